import BuriStorage
import Foundation
import Testing
@testable import Buri

@Suite("BuriDatabase.readingSnapshot(of:): reading a database as its files stand, writing nothing there")
struct SnapshotReadTests {
    static func people(_ range: Range<Int>) -> [PersonRecord] {
        range.map {
            PersonRecord(
                objectId: String(format: "p%04d", $0), name: "n\($0)", locale: ["DE", "EN"][$0 % 2], age: $0 % 80)
        }
    }

    @Test func readsWhatAnOpenDatabaseCommittedAndRefusesToWrite() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "buri-snapshot-read-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/db.buri"
        let temporary = directory + "/tmp"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        // The application keeps the database open (its LevelDB lock held) and goes on writing.
        let app = try BuriDatabase(path: path)
        defer { app.close() }
        try app.bucket(PersonRecord.self).store(Self.people(0..<300))

        let reader = try BuriDatabase.readingSnapshot(of: path, temporaryDirectory: temporary)
        #expect(reader.path == path)
        let people = try reader.bucket(PersonRecord.self)
        #expect(try people.count() == 300)
        #expect(try people.object(forKey: "p0123") == Self.people(123..<124)[0])
        #expect(try people.keys(.index("age", equals: 5)) == ["p0005", "p0085", "p0165", "p0245"])
        // A write through the snapshot is refused; nothing reaches the application's database.
        do {
            try people.store(Self.people(1000..<1001))
            Issue.record("a snapshot accepted a write")
        } catch let error {
            guard case .storage(let storage) = error else { throw error }
            #expect(storage.code == .notSupported)
            #expect(storage.message.contains(path))
        }
        #expect(try app.bucket(PersonRecord.self).object(forKey: "p1000") == nil)
        // Later writes of the application are not in this snapshot; a new one sees them.
        try app.bucket(PersonRecord.self).store(Self.people(300..<310))
        #expect(try people.count() == 300)
        reader.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "closing removes the snapshot")
        let again = try BuriDatabase.readingSnapshot(of: path, temporaryDirectory: temporary)
        #expect(try again.bucket(PersonRecord.self).count() == 310)
        again.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
    }

    @Test func aClosedDatabaseIsLeftExactlyAsItWas() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "buri-snapshot-read-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/db.buri"
        let db = try BuriDatabase(path: path)
        try db.bucket(PersonRecord.self).store(Self.people(0..<500))
        try db.bucket(PersonRecord.self).deleteAll()  // a pending purge: a reader must not run it
        try db.bucket(PersonRecord.self).store(Self.people(0..<20))
        db.close()
        func files() throws -> [String: Data] {
            var result: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: path) {
                let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
                result[name + " " + String(describing: attributes[.modificationDate] ?? "")] = FileManager.default
                    .contents(atPath: path + "/" + name)
            }
            return result
        }
        let before = try files()
        let reader = try BuriDatabase.readingSnapshot(of: path, temporaryDirectory: directory)
        #expect(try reader.bucket(PersonRecord.self).count() == 20)
        _ = try reader.check()
        reader.close()
        #expect(try files() == before)
        let missing = directory + "/no-such-dir"
        do {
            _ = try BuriDatabase.readingSnapshot(of: path, temporaryDirectory: missing)
            Issue.record("a snapshot in a missing directory")
        } catch let error {
            guard case .storage(let storage) = error else { throw error }
            #expect(storage.code == .ioError && storage.message.contains(missing))
        }
    }
}
