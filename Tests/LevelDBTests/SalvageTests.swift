import Foundation
import Testing
@testable import LevelDB

/// The readers of LevelDB's own files that `Database.salvage` relies on — tables (with Snappy),
/// the MANIFEST, logs — checked against what LevelDB itself wrote, and the damage that opening now
/// refuses although LevelDB would drop it without a word.
struct SalvageTests {
    static func key(_ n: Int) -> [UInt8] { bytes(String(format: "key%05d", n)) }
    static func value(_ n: Int) -> [UInt8] {
        bytes(String(format: "value %d ", n) + String(repeating: "abc", count: n % 40))
    }

    /// 3000 keys written and compacted into tables, then 30 more left in the log.
    static func database(_ path: String, compression: Bool) throws {
        var options = Options()
        options.compression = compression
        let db = try Database(path: path, options: options)
        for n in 0..<3000 { try db.put(key(n), value(n)) }
        for n in stride(from: 0, to: 3000, by: 7) { try db.delete(key(n)) }
        try db.compact()
        for n in 3000..<3030 { try db.put(key(n), value(n), options: .sync) }
        db.close()
    }

    static func files(_ path: String, _ suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(suffix) }.sorted()
    }

    @Test(
        "tables read without LevelDB — Snappy-compressed or not — hold exactly what LevelDB reads",
        arguments: [true, false])
    func tablesReadExactly(compression: Bool) throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: compression)
        // The newest entry of each key, as LevelDB resolves versions: by sequence number.
        var newest: [[UInt8]: (sequence: UInt64, value: [UInt8]?)] = [:]
        for name in try Self.files(path, ".ldb") {
            let table = try TableFile.open(
                [UInt8](try #require(FileManager.default.contents(atPath: path + "/" + name)))
            ).get()
            for (handle, _) in try table.dataBlocks().get() {
                guard case .intact(let contents) = table.block(handle) else {
                    Issue.record("\(name): block at \(handle.offset) is not intact"); continue
                }
                for entry in try #require(BlockParser.entries(contents)) {
                    let key = try #require(InternalKey(entry.key[...]))
                    if let current = newest[key.userKey], current.sequence > key.sequence { continue }
                    newest[key.userKey] = (key.sequence, key.isDeletion ? nil : Array(entry.value))
                }
            }
        }
        let read = newest.compactMapValues(\.value)
        let expected = Dictionary(
            uniqueKeysWithValues: (0..<3000).filter { $0 % 7 != 0 }.map { (Self.key($0), Self.value($0)) })
        #expect(read.count == expected.count)
        let wrong = expected.filter { read[$0.key] != $0.value }.map { String(decoding: $0.key, as: UTF8.self) }
            .sorted()
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        #expect(read == expected)
    }

    @Test func theManifestNamesTheLiveTablesAndTheLog() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: true)
        let manifest = try ManifestState.read(path: path).get()
        #expect(Set(manifest.tables.keys.map(DatabaseFile.tableName)) == Set(try Self.files(path, ".ldb")))
        #expect(try Self.files(path, ".log") == [DatabaseFile.logName(manifest.logNumber)])
        #expect(manifest.comparator == "leveldb.BytewiseComparator")
        #expect(manifest.lastSequence > 0)
    }

    @Test("a table cut short: its data blocks are found without the index, each exactly as the index describes it")
    func dataBlocksWithoutTheIndex() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: true)
        let name = try #require(try Self.files(path, ".ldb").first)
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path + "/" + name)))
        let table = try TableFile.open(bytes).get()
        let blocks = try table.dataBlocks().get()
        let whole = TableFile.dataBlocksWithoutIndex(bytes)
        #expect(whole.map(\.offset) == blocks.map(\.handle.offset))
        let cut = Array(bytes.prefix(bytes.count / 2))
        guard case .failure = TableFile.open(cut) else { Issue.record("a table cut in half still opened"); return }
        let found = TableFile.dataBlocksWithoutIndex(cut)
        #expect(found.count > 1 && found.count < blocks.count)
        for (block, expected) in zip(found, blocks) {
            guard case .intact(let contents) = table.block(expected.handle) else { continue }
            #expect(block.offset == expected.handle.offset && block.contents == contents)
        }
    }

    @Test(
        "a deleted log: LevelDB would open without it, losing its writes; with paranoid checks opening refuses, naming it"
    )
    func aMissingLogIsRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: true)
        let log = try #require(try Self.files(path, ".log").first)
        try FileManager.default.removeItem(atPath: path + "/" + log)
        var options = Options()
        options.paranoidChecks = true
        options.createIfMissing = false
        #expect {
            _ = try Database(path: path, options: options)
        } throws: { error in
            guard let error = error as? LevelDBError else { return false }
            return error.code == .corruption && error.message.contains(log) && error.message.contains("missing")
        }
        #expect(try Self.files(path, ".log").isEmpty, "the refused open wrote a log")
        // Salvage reports the loss, and the tables' data is kept.
        let report = try Database.salvage(path: path)
        #expect(report.unknownLosses.count == 1 && report.unknownLosses[0].contains(log), "\(report.unknownLosses)")
        #expect(!report.isComplete)
        let db = try Database(path: path)
        defer { db.close() }
        #expect(try db.get(Self.key(1)) == Self.value(1))
        #expect(try db.get(Self.key(3000)) == nil)
    }

    @Test(
        "zeroed log records followed by intact ones: opening refuses; salvage puts back every intact write and counts the lost ones"
    )
    func zeroedRecordsAreFoundAndSalvaged() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: true)
        let log = path + "/" + (try #require(try Self.files(path, ".log").first))
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        // Record offsets: one put per batch, all in the first block.
        var offsets: [Int] = []
        var offset = 0
        while offset + 7 <= bytes.count {
            offsets.append(offset)
            offset += 7 + (Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8)
        }
        try #require(offsets.count == 30)
        for i in offsets[10]..<offsets[12] { bytes[i] = 0 }  // the 11th and 12th writes
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        #expect(
            try Database.damagedLogRecords(path: path).map(\.reason) == [
                "zeroed bytes hide complete records after them in their block"
            ])
        var options = Options()
        options.paranoidChecks = true
        #expect(throws: LevelDBError.self) { _ = try Database(path: path, options: options) }

        let report = try Database.salvage(path: path)
        #expect(report.restoredKeys == (3012..<3030).map(Self.key), "\(report.restoredKeys.count)")
        #expect(
            report.unknownLosses.count == 1 && report.unknownLosses[0].contains("2 writes"), "\(report.unknownLosses)")
        #expect(report.lostKeys.isEmpty && report.suspectKeys.isEmpty)
        let db = try Database(path: path)
        defer { db.close() }
        for n in 3000..<3030 {
            #expect(try db.get(Self.key(n)) == ((3010..<3012).contains(n) ? nil : Self.value(n)), "\(n)")
        }
    }

    @Test("salvaging an intact database loses, restores and sets aside nothing")
    func salvagingAnIntactDatabaseChangesNothing() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("db")
        try Self.database(path, compression: false)
        let report = try Database.salvage(path: path)
        #expect(
            report.isComplete && report.restoredKeys.isEmpty && report.setAside.isEmpty
                && report.damagedLogRecords.isEmpty)
        let db = try Database(path: path)
        defer { db.close() }
        #expect(try db.entries().count == 3000 - 429 + 30)
    }

    @Test func snappyRefusesOrStopsAtDamage() {
        // A literal "abcd" and a copy of 4 bytes at offset 4: "abcdabcd".
        let valid: [UInt8] = [8, 0x0C, 0x61, 0x62, 0x63, 0x64, 0x01, 0x04]
        #expect(Snappy.decompress(valid[...]) == bytes("abcdabcd"))
        var damaged = valid
        damaged[7] = 0x09  // an offset beyond what was written
        #expect(Snappy.decompress(damaged[...]) == nil)
        #expect(Snappy.decompress(damaged[...], lenient: true) == bytes("abcd"))
        #expect(Snappy.decompress([0xFF, 0xFF, 0xFF, 0xFF, 0x7F][...]) == nil)
    }
}
