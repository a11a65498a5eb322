import Foundation
import LevelDB
import Testing
@testable import Buri

/// `BuriDatabase.repair` keeps every object that can still be read reachable — also when the
/// damaged data held its bucket's catalog entry — and reports exactly what was lost: nothing for
/// a leftover file that held nothing live, and a named loss for a missing table, a missing log,
/// zeroed log bytes and a broken record length.
@Suite("repair keeps every readable object and reports exactly what was lost")
struct RepairReportTests {
    static let people = DamagedFileTests.people
    static var byKey: [String: Person] { DamagedFileTests.byKey }

    /// The block holding the catalog entry of `Person` (the first whose upper key is at or after it).
    static func catalogBlock(_ descriptor: BucketDescriptor, _ blocks: [DamagedFileTests.TableBlock]) throws -> [Int] {
        let key = Keyspace.catalogKey(bucket: descriptor.name)
        let index = try #require(blocks.firstIndex { !$0.upperKey.lexicographicallyPrecedes(key) })
        return [index]
    }

    /// Reads every surviving person of bucket `name` and checks it against the original, and that
    /// the stored index entries are exactly those the survivors call for.
    static func expectSurvivorsExact(
        _ db: BuriDatabase, bucket name: String, lost: Set<String>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let raw = try db.rawBucket(named: name)
        let keys = try raw.keys(.all)
        let expected = people.map(\.id).filter { !lost.contains($0) }.sorted {
            $0.utf8.lexicographicallyPrecedes($1.utf8)
        }
        #expect(keys == expected, "\(keys.count) survivors, \(expected.count) expected", sourceLocation: sourceLocation)
        let decoder = CBORDecoder()
        for key in keys {
            let record = try #require(try raw.record(forKey: key), sourceLocation: sourceLocation)
            #expect(
                try decoder.decode(Person.self, from: record.payload) == byKey[key], "\(key)",
                sourceLocation: sourceLocation)
        }
        let descriptor = try #require(try db.bucketInfo(named: name), sourceLocation: sourceLocation)
        let survivors = keys.compactMap { byKey[$0] }
        #expect(
            try storedIndexEntries(db, bucket: descriptor.id)
                == expectedIndexEntries(survivors, descriptor: descriptor),
            "index entries of \(name)", sourceLocation: sourceLocation)
    }

    // MARK: Item 2: the block holding the catalog entry

    @Test(
        "the damaged block held the catalog entry: the bucket keeps its name from the legible copy, every readable object stays reachable",
        arguments: DamagedFileTests.Damage.allCases)
    func catalogBlockDamaged(damage: DamagedFileTests.Damage) throws {
        let directory = TemporaryDirectory("buri-catalog-block")
        let path = directory.path("db")
        let (_, damagedStorageKeys) = try DamagedFileTests.makeDamaged(path, damage: damage, choose: Self.catalogBlock)
        let lostKeys = Set(damagedStorageKeys.compactMap { Keyspace.bucketAndObjectKey(ofRecordKey: $0)?.key })
        #expect(damagedStorageKeys.contains(Keyspace.catalogKey(bucket: "Person")))
        try #require(!lostKeys.isEmpty && lostKeys.count < 500)

        let options = BuriOptions()
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let report = try BuriDatabase.repair(path: path, options: options, levelDB: levelDB)
        #expect(!report.isComplete)
        // The bucket is back under its own name, read from the damaged block and checked against
        // the records; nothing reports a key without naming its bucket.
        #expect(
            report.recoveredBuckets.map(\.name) == ["Person"] && report.recoveredBuckets.first?.nameIsKnown == true,
            "\(report.lines)")
        #expect(
            report.lostObjects
                == lostKeys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map {
                    ObjectReference(bucket: "Person", key: $0)
                },
            "\(report.lines)")
        #expect(report.lostRanges.map(\.bucket) == ["Person"], "\(report.lines)")
        #expect(
            report.check.isConsistent && !report.check.problems.contains { $0.bucket == nil && $0.kind == .strayKey },
            "\(report.check.summary)")
        #expect(!report.lines.contains { $0.contains("unknown bucket id") }, "\(report.lines)")

        let db = try BuriDatabase(path: path, options: options)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        #expect(try db.bucketNames() == ["Person"])
        try Self.expectSurvivorsExact(db, bucket: "Person", lost: lostKeys)
        // The Swift type opens it as before: same indexes, no rebuild, queries exact.
        let people = try db.bucket(Person.self)
        #expect(try people.count() == Self.people.count - lostKeys.count)
        let german = Self.people.filter { $0.locale == "DE" && !lostKeys.contains($0.id) }.map(\.id)
        #expect(try people.keys(.index("locale", equals: "DE")) == german)
    }

    @Test(
        "the catalog entry itself is unreadable: the bucket is recovered as recovered-<id> with its indexes and key field found from the records"
    )
    func catalogEntryUnreadable() throws {
        let directory = TemporaryDirectory("buri-catalog-lost")
        let path = directory.path("db")
        var lost: Set<String> = []
        _ = try DamagedFileTests.makeDamaged(path, damage: .ffRun) { descriptor, blocks in
            try Self.catalogBlock(descriptor, blocks)
        }
        // Also overwrite the bucket's name inside the catalog entry's key and value, so that no
        // legible copy names the bucket.
        let table = try #require(try CorruptionTests.files(path, suffix: ".ldb").first)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: table)))
        // The first "Person" in the table is the catalog entry's key: with it changed, the legible
        // copy's key no longer matches the name inside it, and is not trusted.
        let name = Array("Person".utf8)
        let at = try #require((0...(bytes.count - name.count)).first { Array(bytes[$0..<($0 + name.count)]) == name })
        bytes[at] = UInt8(ascii: "Q")
        try Data(bytes).write(to: URL(fileURLWithPath: table))
        do {
            // Which records the damaged block held: those the repaired database lacks.
            let options = BuriOptions()
            var levelDB = LevelDBOptions.buriDefaults
            levelDB.compression = false
            let report = try BuriDatabase.repair(path: path, options: options, levelDB: levelDB)
            #expect(report.recoveredBuckets.count == 1, "\(report.lines)")
            let bucket = try #require(report.recoveredBuckets.first)
            #expect(bucket.name == "recovered-1" && !bucket.nameIsKnown)
            #expect(bucket.descriptor.keyField == "id", "\(bucket.descriptor)")
            #expect(
                bucket.descriptor.indexes.map(\.name) == ["locale", "age", "tags", "score"], "\(bucket.descriptor)")
            #expect(bucket.descriptor.indexes.map(\.fields) == [["locale"], ["age"], ["tags"], ["score"]])
            #expect(bucket.descriptor.indexes.map(\.multiValued) == [false, false, true, false])
            #expect(
                report.lines.contains {
                    $0.contains("stay reachable as bucket 'recovered-1'") && $0.contains("its name was lost")
                }, "\(report.lines)")
            lost = Set(report.lostObjects.map(\.key))
            #expect(report.lostObjects.allSatisfy { $0.bucket == "recovered-1" })
            #expect(report.check.isConsistent, "\(report.check.summary)")
            let db = try BuriDatabase(path: path, options: options)
            defer { db.close() }
            #expect(try db.check().problems.isEmpty)
            try Self.expectSurvivorsExact(db, bucket: "recovered-1", lost: lost)
            #expect(!lost.isEmpty && lost.count < 100, "\(lost.count)")
        }
    }

    @Test(
        "check --repair never deletes the index entries of records whose catalog entry is gone; it names the bucket id and says to run repair"
    )
    func checkKeepsTheKeysOfABucketWithoutCatalogEntry() throws {
        let directory = TemporaryDirectory("buri-catalog-check")
        let path = directory.path("db")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(Array(Self.people.prefix(50)))
        let batch = db.engine.makeBatch()
        batch.delete(Keyspace.catalogKey(bucket: "Person"))
        try db.engine.commit(batch, conditions: nil, sync: true)
        let before = try scanKeys(db.engine.snapshot())
        let report = try db.check(repair: true)
        #expect(
            try scanKeys(db.engine.snapshot()) == before,
            "check --repair changed keys of a bucket whose catalog entry is gone")
        #expect(report.problems.count == 1, "\(report.summary)")
        let problem = try #require(report.problems.first)
        #expect(problem.bucket == "#1" && !problem.repaired)
        #expect(problem.detail.contains("50 records") && problem.detail.contains("buri repair"), "\(problem)")
        db.close()

        let repaired = try BuriDatabase.repair(path: path)
        #expect(repaired.recoveredBuckets.map(\.name) == ["recovered-1"], "\(repaired.lines)")
        let reopened = try BuriDatabase(path: path)
        defer { reopened.close() }
        #expect(try reopened.check().problems.isEmpty)
        #expect(try reopened.rawBucket(named: "recovered-1").count() == 50)
    }

    // MARK: Item 3: honest losses

    @Test("a leftover partial compaction output is set aside: nothing was lost, the data is byte-identical")
    func leftoverTableIsNoLoss() throws {
        let directory = TemporaryDirectory("buri-leftover")
        let path = directory.path("db")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(Array(Self.people.prefix(300)))
        try db.compact()
        db.close()
        let before = try rawContents(path)
        // A compaction killed while writing its output leaves a table no MANIFEST names, cut short.
        let table = try #require(try CorruptionTests.files(path, suffix: ".ldb").last)
        let data = try #require(FileManager.default.contents(atPath: table))
        let leftover = path + "/000999.ldb"
        try data.prefix(data.count / 3).write(to: URL(fileURLWithPath: leftover))

        let report = try BuriDatabase.repair(path: path)
        #expect(report.isComplete, "\(report.lines)")
        #expect(report.setAsideFiles == ["000999.ldb"])
        #expect(report.lines.contains { $0.contains("000999.ldb is not part of the database") }, "\(report.lines)")
        #expect(!report.lines.contains { $0.hasPrefix("lost") }, "\(report.lines)")
        #expect(try rawContents(path) == before)
        #expect(FileManager.default.fileExists(atPath: path + "/lost/000999.ldb"))
    }

    @Test("a deleted table file: opening refuses; repair names the missing file and the stretch of objects it held")
    func deletedTableIsNamed() throws {
        let directory = TemporaryDirectory("buri-deleted-table")
        let path = directory.path("db")
        let db = try BuriDatabase(path: path)
        let bucket = try db.bucket(Person.self)
        try bucket.store(Array(Self.people.prefix(600)))
        try db.compact()
        db.close()
        // A second session: these writes go to a new level-0 table when the database next opens.
        let second = try BuriDatabase(path: path)
        try second.bucket(Person.self).store(Array(Self.people[600..<700]))
        second.close()
        try BuriDatabase(path: path).close()
        let tables = try CorruptionTests.files(path, suffix: ".ldb")
        try #require(tables.count == 2, "\(tables)")
        let newest = try #require(tables.last)
        let name = (newest as NSString).lastPathComponent
        try FileManager.default.removeItem(atPath: newest)
        guard case .damaged(_, nil, let reason)? = openError(path) else { Issue.record("open did not refuse"); return }
        #expect(reason.contains(name), "\(reason)")

        let report = try BuriDatabase.repair(path: path)
        #expect(!report.isComplete)
        let range = try #require(report.lostRanges.first { $0.bucket == "Person" }, "\(report.lines)")
        #expect(range.source.contains(name) && range.source.contains("missing"), "\(range.source)")
        #expect(range.fromKey.map { $0 <= "d0600" } ?? true, "\(range)")
        #expect(range.toKey.map { $0 >= "d0699" } ?? true, "\(range)")
        // Nothing else is named under another file's number.
        let otherTable = (tables[0] as NSString).lastPathComponent
        #expect(!report.lines.contains { $0.contains(otherTable) }, "\(report.lines)")
        let reopened = try BuriDatabase(path: path)
        defer { reopened.close() }
        #expect(try reopened.check().problems.isEmpty)
        let survivors = try reopened.bucket(Person.self).objects()
        #expect(survivors == Array(Self.people.prefix(600)))
    }

    @Test("a deleted log: opening refuses naming it; repair reports the loss although its keys cannot be known")
    func deletedLogIsDamage() throws {
        let directory = TemporaryDirectory("buri-deleted-log")
        let path = directory.path("db")
        let (inLog, log) = try DamagedFileTests.makeLogDatabase(path)
        let name = (log as NSString).lastPathComponent
        try FileManager.default.removeItem(atPath: log)
        for _ in 1...2 {
            guard case .damaged(_, nil, let reason)? = openError(path) else {
                Issue.record("open did not refuse a missing log"); return
            }
            #expect(reason.contains(name) && reason.contains("missing"), "\(reason)")
        }
        #expect(try CorruptionTests.files(path, suffix: ".log").isEmpty, "the refused open created a log")

        let report = try BuriDatabase.repair(path: path)
        #expect(!report.isComplete)
        #expect(report.unknownLosses.contains { $0.contains(name) && $0.contains("missing") }, "\(report.lines)")
        #expect(report.lines.contains { $0.hasPrefix("lost: the write-ahead log \(name)") }, "\(report.lines)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        #expect(try db.bucket(Person.self).objects() == Array(Self.people.prefix(100)))
        _ = inLog
    }

    /// A database whose last 400 writes (one object per batch, several log blocks) are in its log.
    static func manyLogRecords(_ path: String) throws -> (log: String, records: [Int]) {
        let db = try BuriDatabase(path: path)
        let bucket = try db.bucket(Person.self)
        try bucket.store(Array(people.prefix(100)))
        try db.compact()
        for person in people[100..<500] { try bucket.store(person) }
        db.close()
        let log = try #require(
            try CorruptionTests.files(path, suffix: ".log").first { (try? CorruptionTests.size(of: $0)) ?? 0 > 0 })
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        try #require(bytes.count > 2 * 32768)
        return (log, batchOffsets(bytes))
    }

    /// Where each write batch's record (its first fragment) starts in a log of several blocks.
    static func batchOffsets(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var blockStart = 0
        while blockStart < bytes.count {
            var offset = blockStart
            let blockEnd = min(blockStart + 32768, bytes.count)
            while offset + 7 <= blockEnd {
                let length = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8
                let type = bytes[offset + 6]
                if length == 0 && type == 0 { break }
                if type == 1 || type == 2 { offsets.append(offset) }
                offset += 7 + length
            }
            blockStart += 32768
        }
        return offsets
    }

    @Test(
        "zeroed log bytes: opening refuses; repair puts back the intact writes after them and reports the ones whose bytes are gone"
    )
    func zeroedLogBytes() throws {
        let directory = TemporaryDirectory("buri-zeroed-log")
        let path = directory.path("db")
        let (log, records) = try Self.manyLogRecords(path)
        // Zero three whole records in the middle of the first block, from a record boundary:
        // LevelDB's reader takes the zeroes for preallocated space and skips the rest of the block.
        let inFirstBlock = records.filter { $0 < 32768 - 100 }
        let first = inFirstBlock.count / 2
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        for i in records[first]..<records[first + 3] { bytes[i] = 0 }
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        guard case .damaged(_, nil, let reason)? = openError(path) else {
            Issue.record("open did not refuse zeroed records"); return
        }
        #expect(reason.contains("zeroed"), "\(reason)")

        let zeroed = Set(Self.people[(100 + first)..<(100 + first + 3)].map(\.id))
        let report = try BuriDatabase.repair(path: path)
        #expect(!report.isComplete)
        // Three batches of seven writes each (record, five index entries, count): their keys are gone.
        #expect(report.unknownLosses.count == 1 && report.unknownLosses[0].contains("21 writes"), "\(report.lines)")
        // Every write after the zeroes in that block is intact and was put back.
        let restored = Set(report.restoredObjects.map(\.key))
        let afterZeroes = Set(Self.people[(100 + first + 3)..<(100 + inFirstBlock.count)].map(\.id))
        #expect(
            restored.isSuperset(of: afterZeroes), "\(restored.count) restored, \(afterZeroes.count) after the zeroes")
        #expect(report.lostObjects.isEmpty && report.suspectObjects.isEmpty, "\(report.lines)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        #expect(try db.bucket(Person.self).objects() == Self.people.prefix(500).filter { !zeroed.contains($0.id) })
    }

    @Test(
        "a record length damaged in a full block: every write is put back from its intact checksum; nothing is lost",
        arguments: [-20, 0x7F00])
    func damagedLengthInAFullBlock(change: Int) throws {
        let directory = TemporaryDirectory("buri-length-full-block")
        let path = directory.path("db")
        let (log, records) = try Self.manyLogRecords(path)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        let target = records[records.filter { $0 < 32768 }.count / 2]
        let length = Int(bytes[target + 4]) | Int(bytes[target + 5]) << 8
        let damaged = change > 0 ? change : length + change
        bytes[target + 4] = UInt8(damaged & 0xFF)
        bytes[target + 5] = UInt8(damaged >> 8)
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        #expect(openError(path) != nil)

        let report = try BuriDatabase.repair(path: path)
        #expect(report.isComplete, "\(report.lines)")
        #expect(!report.damagedLogRecords.isEmpty && !report.restoredObjects.isEmpty, "\(report.lines)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        #expect(try db.bucket(Person.self).objects() == Array(Self.people.prefix(500)))
    }
}
