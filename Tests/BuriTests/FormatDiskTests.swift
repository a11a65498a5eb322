import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - A database on disk, read back as plain LevelDB

@Suite("Format: databases on disk")
struct FormatDiskTests {
    final class Directory {
        let path: String
        init() {
            path =
                FileManager.default.temporaryDirectory.appendingPathComponent("buri-format-\(UUID().uuidString)").path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test("a database written by Buri holds exactly the documented keys and values")
    func layoutOnDisk() throws {
        let directory = Directory()
        let db = try BuriDatabase(path: directory.path)
        let bucket = try db.createBucket(
            named: "Person", keyField: "objectId",
            indexes: [
                IndexDefinition(id: 0, name: "locale", components: [.binary]),
                IndexDefinition(id: 0, name: "age", components: [.numeric]),
            ])
        let header = personHeader
        var payload: [UInt8] = []
        try CBOREncoder().encode(
            FormatPerson(objectId: "p1", name: "Dirk", locale: "EN", age: 20), appendingTo: &payload)
        try bucket.write([RawBucket.RecordWrite(key: "p1", header: header, payload: payload)])
        var value: [UInt8] = []
        header.append(to: &value)
        value += payload
        #expect(try bucket.keys(.index("locale", equals: "EN")) == ["p1"])
        #expect(try bucket.keys(.index("locale", equals: "E")) == [])
        #expect(try bucket.keys(.index("age", in: 20...20)) == ["p1"])
        #expect(try bucket.keys(.index("age", equals: try doubleValue(20.0))) == ["p1"])
        db.close()

        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        let entries = Array(try raw.entries())
        var expectedDescriptor = personDescriptor
        expectedDescriptor.schemaVersion = 0
        let expected: [(String, [UInt8])] = [
            ("00 62 75 63 6b 65 74 2d 69 64 73", [0, 0, 0, 1]),
            ("00 66 6f 72 6d 61 74", Keyspace.headerValue()),
            ("01 50 65 72 73 6f 6e", try expectedDescriptor.encoded()),
            ("02 00 00 00 01 70 31", value),
            ("03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", []),
            ("03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", []),
            ("05 00 00 00 01", bytes(hex: "00 00 00 00 00 00 00 01")),
        ]
        #expect(entries.map { formatHex($0.key) } == expected.map(\.0))
        #expect(entries.map(\.value) == expected.map(\.1))
    }

    @Test("bucket \"a\" never sees bucket \"ab\"'s objects")
    func bucketIsolation() throws {
        let directory = Directory()
        let db = try BuriDatabase(path: directory.path)
        defer { db.close() }
        let a = try db.createBucket(named: "a")
        let ab = try db.createBucket(named: "ab")
        func write(_ bucket: RawBucket, _ key: String) throws {
            try bucket.write([
                RawBucket.RecordWrite(key: key, header: RecordHeader(schemaVersion: 0, entries: []), payload: [0xA0])
            ])
        }
        try write(a, "1")
        try write(ab, "1")
        try write(ab, "2")
        #expect(try a.count() == 1)
        #expect(try ab.count() == 2)
        #expect(try a.keys(.all) == ["1"])
        #expect(try db.bucketNames() == ["a", "ab"])
    }

    @Test("a LevelDB database Buri did not write is refused and left untouched")
    func foreignDatabase() throws {
        let directory = Directory()
        do {
            let raw = try Database(path: directory.path, options: Options())
            try raw.put(Array("hello".utf8), Array("world".utf8))
            raw.close()
        }
        #expect(throws: BuriError.notABuriDatabase(path: directory.path)) { try BuriDatabase(path: directory.path) }
        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        #expect(Array(try raw.entries()).map(\.key) == [Array("hello".utf8)])
    }

    @Test("a database of a newer format version, or with a foreign header, is refused and left untouched")
    func newerFormat() throws {
        for value in [
            Array("BURI".utf8) + [0x00, 0x0E], Array("BURI".utf8) + [0x01, 0x00], Array("NOPE".utf8) + [0x00, 0x01],
        ] {
            let directory = Directory()
            do {
                let raw = try Database(path: directory.path, options: Options())
                try raw.put(Keyspace.headerKey, value)
                raw.close()
            }
            do {
                _ = try BuriDatabase(path: directory.path)
                Issue.record("opened a database with header \(formatHex(value))")
            } catch {
                if value.starts(with: Array("BURI".utf8)) {
                    #expect(
                        error
                            == .unsupportedFormat(
                                path: directory.path, found: Int(Keyspace.parseHeader(value)!),
                                supported: Int(Keyspace.formatVersion)))
                } else {
                    #expect(error == .notABuriDatabase(path: directory.path))
                }
            }
            let raw = try Database(path: directory.path, options: Options())
            #expect(
                Array(try raw.entries()).map { $0.key + [0xFF] + $0.value } == [Keyspace.headerKey + [0xFF] + value])
            raw.close()
        }
    }
}
