import Foundation
import LevelDB
import Testing
@testable import Buri

/// Bytes damaged inside LevelDB's own files — a data block of a table, a record of the
/// write-ahead log — where LevelDB's checksums, not Buri's parsing, find the damage. Every read
/// that reaches it must throw `.damaged` naming the bucket, never return fewer objects; opening
/// must refuse a damaged log instead of dropping the writes in it; and repair must say exactly
/// what it could not recover.
@Suite("damaged LevelDB files: no read comes out short, repair names what was lost")
struct DamagedFileTests {
    // MARK: Fixture

    /// 1000 people with unique names and tags, so each record and entry is distinct.
    static let people: [Person] = (0..<1000).map { n in
        Person(
            id: String(format: "d%04d", n), name: "name \(n)", locale: ["EN", "DE", "FR"][n % 3], age: n % 97,
            tags: ["tag\(n % 13)", "t\(n)"], score: Double(n) / 3)
    }

    static var byKey: [String: Person] { Dictionary(uniqueKeysWithValues: people.map { ($0.id, $0) }) }

    /// One data block of a table file: where it is and the largest user key it can hold (its
    /// separator in the table's index block, without LevelDB's 8-byte sequence and type).
    struct TableBlock {
        var offset: Int
        var size: Int
        var upperKey: [UInt8]
    }

    /// The data blocks of an uncompressed LevelDB table, read from its footer and index block
    /// (LevelDB's `table_format.md`).
    static func dataBlocks(_ table: [UInt8]) throws -> [TableBlock] {
        func varint(_ bytes: ArraySlice<UInt8>, _ position: inout Int) -> Int {
            var result = 0
            var shift = 0
            while position < bytes.endIndex {
                let byte = bytes[position]
                position += 1
                result |= Int(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return result
        }
        var position = table.count - 48
        _ = varint(table[...], &position)  // metaindex handle
        _ = varint(table[...], &position)
        let indexOffset = varint(table[...], &position)
        let indexSize = varint(table[...], &position)
        try #require(table[indexOffset + indexSize] == 0, "the index block must be uncompressed")
        let block = table[indexOffset..<(indexOffset + indexSize)]
        let restarts =
            Int(block[block.endIndex - 4]) | Int(block[block.endIndex - 3]) << 8
            | Int(block[block.endIndex - 2]) << 16 | Int(block[block.endIndex - 1]) << 24
        let entriesEnd = block.endIndex - 4 - 4 * restarts
        var blocks: [TableBlock] = []
        var key: [UInt8] = []
        position = block.startIndex
        while position < entriesEnd {
            let shared = varint(block, &position)
            let unshared = varint(block, &position)
            let valueLength = varint(block, &position)
            key = Array(key.prefix(shared)) + block[position..<(position + unshared)]
            position += unshared
            var handle = position
            let offset = varint(block, &handle)
            let size = varint(block, &handle)
            position += valueLength
            blocks.append(TableBlock(offset: offset, size: size, upperKey: Array(key.dropLast(8))))
        }
        return blocks
    }

    enum Damage: String, CaseIterable, CustomStringConvertible {
        case ffRun = "eight 0xFF bytes"
        case bitFlip = "one flipped bit"
        var description: String { rawValue }

        func apply(to bytes: inout [UInt8], at offset: Int) {
            switch self {
            case .ffRun: for i in offset..<(offset + 8) { bytes[i] = 0xFF }
            case .bitFlip: bytes[offset] ^= 0x10
            }
        }
    }

    /// A database of `people` compacted into uncompressed tables (so blocks can be found by key),
    /// with `damage` applied in the middle of each block `choose` picks from the table's blocks;
    /// returns the keys (storage keys) each damaged block held.
    static func makeDamaged(
        _ path: String, damage: Damage, choose: (BucketDescriptor, [TableBlock]) throws -> [Int]
    ) throws -> (descriptor: BucketDescriptor, damagedStorageKeys: [[UInt8]]) {
        let options = BuriOptions()
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, options: options, levelDB: levelDB)
        try db.bucket(Person.self).store(people)
        try db.compact()
        let descriptor = try #require(try db.bucketInfo(named: "Person"))
        let allKeys = try scanKeys(db.engine.snapshot())
        db.close()
        let tables = try CorruptionTests.files(path, suffix: ".ldb")
        try #require(tables.count == 1, "\(tables)")
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: tables[0])))
        let blocks = try dataBlocks(bytes)
        var damaged: [[UInt8]] = []
        for index in try choose(descriptor, blocks) {
            let block = blocks[index]
            damage.apply(to: &bytes, at: block.offset + block.size / 2)
            let lower = index > 0 ? blocks[index - 1].upperKey : nil
            damaged += allKeys.filter { key in
                (lower.map { key.lexicographicallyPrecedes($0) == false && key != $0 } ?? true)
                    && !block.upperKey.lexicographicallyPrecedes(key)
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: tables[0]))
        return (descriptor, damaged)
    }

    /// Expects `body` to throw `.damaged` for the database at `path`, naming bucket `bucket`.
    static func expectDamaged<R>(
        _ what: String, path: String, bucket: String? = "Person", sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws(BuriError) -> R
    ) {
        do {
            let result = try body()
            Issue.record("\(what) returned \(result) instead of reporting the damage", sourceLocation: sourceLocation)
        } catch let BuriError.damaged(at, named, reason) {
            #expect(
                at == path && named == bucket, "\(what): \(BuriError.damaged(path: at, bucket: named, reason: reason))",
                sourceLocation: sourceLocation)
            #expect(reason.contains("Corruption"), "\(what): \(reason)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(what): expected .damaged, got \(error)", sourceLocation: sourceLocation)
        }
    }

    /// Every file of the database directory but LevelDB's info log and lock, by name.
    static func dataFiles(_ path: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: path)
        where !["LOG", "LOG.old", "LOCK"].contains(name) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isDirectory),
                isDirectory.boolValue
            {
                continue
            }
            files[name] = FileManager.default.contents(atPath: path + "/" + name)
        }
        return files
    }

    // MARK: A damaged block of records

    @Test(
        "a damaged block of records: every read that reaches it throws .damaged naming the bucket; none comes out short",
        arguments: Damage.allCases)
    func damagedRecordBlock(damage: Damage) throws {
        let directory = TemporaryDirectory("buri-damaged-records")
        let path = directory.path("db")
        let (descriptor, damagedStorageKeys) = try Self.makeDamaged(path, damage: damage) { descriptor, blocks in
            // A block in the middle of the bucket's records, with records on both sides.
            let records = blocks.indices.filter { i in
                i > 0 && blocks[i - 1].upperKey.first == Keyspace.recordTag
                    && blocks[i].upperKey.first == Keyspace.recordTag
            }
            try #require(records.count >= 3, "\(blocks.count) blocks")
            return [records[records.count / 2]]
        }
        let damagedKeys = damagedStorageKeys.compactMap { Keyspace.bucketAndObjectKey(ofRecordKey: $0)?.key }
        try #require(!damagedKeys.isEmpty && damagedKeys.count == damagedStorageKeys.count)
        let ordered = Self.people.map(\.id).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let firstDamaged = try #require(ordered.firstIndex(of: damagedKeys[0]))
        let lastDamaged = try #require(ordered.firstIndex(of: damagedKeys[damagedKeys.count - 1]))
        #expect(lastDamaged - firstDamaged + 1 == damagedKeys.count)
        #expect(firstDamaged > 0 && lastDamaged < ordered.count - 1)
        _ = descriptor

        var options = BuriOptions()
        // Large reads take the parallel path from the first objects on, so that it meets the
        // damaged block inside a batch.
        options.parallelDecoding = ParallelDecoding.Tuning(threshold: 3, batchSize: 50, chunkSize: 7)
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, options: options, levelDB: levelDB)
        let people = try db.bucket(Person.self)
        let original = Self.byKey

        // Point reads: the damaged records throw, every other one reads back exactly.
        for key in ordered {
            if damagedKeys.contains(key) {
                Self.expectDamaged("object(forKey: \(key))", path: path) { () throws(BuriError) in
                    try people.object(forKey: key)
                }
                Self.expectDamaged("record(forKey: \(key))", path: path) { () throws(BuriError) in
                    try people.raw.record(forKey: key)
                }
                Self.expectDamaged("contains(key: \(key))", path: path) { () throws(BuriError) in
                    try people.contains(key: key)
                }
            } else {
                #expect(try people.object(forKey: key) == original[key], "\(key)")
            }
        }

        // Whole-bucket reads, forward and descending, arrays and counts.
        Self.expectDamaged("allKeys", path: path) { () throws(BuriError) in try people.keys() }
        Self.expectDamaged("allObjects", path: path) { () throws(BuriError) in try people.objects() }
        Self.expectDamaged("keys(.all.descending())", path: path) { () throws(BuriError) in
            try people.keys(.all.descending())
        }
        Self.expectDamaged("objects(.all.descending())", path: path) { () throws(BuriError) in
            try people.objects(.all.descending())
        }
        Self.expectDamaged("entries(.all)", path: path) { () throws(BuriError) in try people.entries(.all).count }
        // count() reads the stored object count alone (format 4), never the damaged block: exact.
        #expect(try people.count() == Self.people.count)
        Self.expectDamaged("count(.all.offset(1))", path: path) { () throws(BuriError) in
            try people.count(.all.offset(1))
        }
        Self.expectDamaged("page", path: path) { () throws(BuriError) in try people.page(.all, size: 5000).items.count }
        Self.expectDamaged("keyPage", path: path) { () throws(BuriError) in
            try people.keyPage(.all, size: 5000).items.count
        }
        Self.expectDamaged("raw keys(withPrefix:)", path: path) { () throws(BuriError) in
            try people.raw.keys(withPrefix: "d")
        }
        // A limit that ends right after the damaged block: the scan stepped over it and must say so.
        Self.expectDamaged("keys(.all.limit(past the block))", path: path) { () throws(BuriError) in
            try people.keys(.all.limit(lastDamaged + 2))
        }
        // A scan that stops before the block never reads it and is complete.
        #expect(try people.keys(.all.limit(firstDamaged)) == Array(ordered.prefix(firstDamaged)))

        // Cursors: every object before the block, then the error — never a quiet end.
        for descending in [false, true] {
            let cursor = try people.cursor(descending ? .all.descending() : .all)
            var seen = 0
            Self.expectDamaged("cursor, descending \(descending)", path: path) { () throws(BuriError) in
                while let person = try cursor.next() {
                    #expect(person == original[person.id])
                    seen += 1
                }
            }
            // Backwards, LevelDB looks one entry ahead before returning one, so the error may come
            // one object early; it never comes late and never looks like the end.
            let expected = descending ? ordered.count - 1 - lastDamaged : firstDamaged
            #expect(
                seen == expected || (descending && seen == expected - 1),
                "descending \(descending): \(seen) of \(expected)")
        }

        // Lazy sequences keep the error and are not complete.
        let lazyObjects = people.lazyObjects()
        #expect(Array(lazyObjects).count == firstDamaged)
        #expect(!lazyObjects.isComplete)
        if case .damaged(_, "Person", _)? = lazyObjects.error {
        } else {
            Issue.record("lazyObjects.error: \(String(describing: lazyObjects.error))")
        }
        let lazyKeys = people.lazyKeys(.all.descending())
        #expect((ordered.count - 2 - lastDamaged...ordered.count - 1 - lastDamaged).contains(Array(lazyKeys).count))
        #expect(!lazyKeys.isComplete)
        if case .damaged(_, "Person", _)? = lazyKeys.error {
        } else {
            Issue.record("lazyKeys.error: \(String(describing: lazyKeys.error))")
        }

        // Index queries: those reading only index entries are intact and complete; those that
        // read the damaged records throw.
        let victim = try #require(original[damagedKeys[0]])
        let sameLocale = ordered.filter { original[$0]?.locale == victim.locale }
        #expect(try people.keys(.index("locale", equals: IndexValue(victim.locale))) == sameLocale)
        #expect(try people.count(.index("locale", equals: IndexValue(victim.locale))) == sameLocale.count)
        let complete = people.lazyKeys(.index("locale", equals: IndexValue(victim.locale)))
        #expect(Array(complete).count == sameLocale.count && complete.isComplete && complete.error == nil)
        Self.expectDamaged("objects(locale)", path: path) { () throws(BuriError) in
            try people.objects(.index("locale", equals: IndexValue(victim.locale)))
        }
        Self.expectDamaged("objects(t<n>)", path: path) { () throws(BuriError) in
            try people.objects(.index("tags", equals: IndexValue("t\(Int(victim.id.dropFirst())!)")))
        }
        // Two conditions: the second is checked against each record, so the damaged ones are read.
        let twoConditions = Query.index("locale", equals: IndexValue(victim.locale)).and(
            .index("age", in: IndexValue(0)...IndexValue(200)))
        Self.expectDamaged("keys(two conditions)", path: path) { () throws(BuriError) in try people.keys(twoConditions)
        }
        Self.expectDamaged("count(two conditions)", path: path) { () throws(BuriError) in
            try people.count(twoConditions)
        }

        // check() does not report a shorter database as consistent.
        Self.expectDamaged("check()", path: path) { () throws(BuriError) in try db.check() }

        // Index evolution reads every record before writing anything: it fails and changes nothing.
        let before = try Self.dataFiles(path)
        Self.expectDamaged("bucket(PersonWithNickname)", path: path) { () throws(BuriError) in
            try db.bucket(PersonWithNickname.self)
        }
        #expect(try Self.dataFiles(path) == before)
        #expect(try db.bucketInfo(named: "Person")?.indexes.map(\.name) == ["locale", "age", "tags", "score"])
        db.close()

        // Repair: the damaged block is dropped; its objects are named as lost, everything else is back.
        let report = try BuriDatabase.repair(path: path, options: options, levelDB: levelDB)
        #expect(!report.isComplete)
        #expect(
            report.storageLosses.contains { $0.contains("Table #") && $0.contains("Corruption") },
            "\(report.storageLosses)")
        #expect(report.lostObjects.map(\.bucket).allSatisfy { $0 == "Person" })
        #expect(report.lostObjects.map(\.key) == damagedKeys, "\(report.lines)")
        #expect(report.damagedLogRecords.isEmpty && report.suspectObjects.isEmpty)
        #expect(
            report.lines.contains { $0.hasPrefix("lost: bucket 'Person', key '\(damagedKeys[0])'") }, "\(report.lines)")
        let reopened = try BuriDatabase(path: path, options: options, levelDB: levelDB)
        defer { reopened.close() }
        #expect(try reopened.check().problems.isEmpty)
        let survivors = try reopened.bucket(Person.self).objects()
        #expect(survivors == ordered.filter { !damagedKeys.contains($0) }.compactMap { original[$0] })
    }

    // MARK: A damaged block of index entries

    @Test(
        "damaged blocks of index entries: index reads, min and max throw; records read fine; repair rebuilds the index whole",
        arguments: Damage.allCases)
    func damagedIndexBlocks(damage: Damage) throws {
        let directory = TemporaryDirectory("buri-damaged-index")
        let path = directory.path("db")
        _ = try Self.makeDamaged(path, damage: damage) { descriptor, blocks in
            // The blocks holding the first and the last entry of index "age".
            let age = try #require(descriptor.index(named: "age"))
            let prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: age.id)
            let first = try #require(blocks.firstIndex { !$0.upperKey.lexicographicallyPrecedes(prefix) })
            let end = try #require(KeyRange.successor(ofPrefix: prefix))
            let last = try #require(blocks.firstIndex { !$0.upperKey.lexicographicallyPrecedes(end) })
            try #require(blocks[first].upperKey.first == Keyspace.indexTag && last > first)
            return [first, last]
        }
        let options = BuriOptions()
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, options: options, levelDB: levelDB)
        let people = try db.bucket(Person.self)
        let ordered = Self.people.map(\.id).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }

        Self.expectDamaged("min(age)", path: path) { () throws(BuriError) in try people.min(index: "age") }
        Self.expectDamaged("max(age)", path: path) { () throws(BuriError) in try people.max(index: "age") }
        Self.expectDamaged("keys(age)", path: path) { () throws(BuriError) in
            try people.keys(.index("age", in: IndexValue(0)...IndexValue(200)))
        }
        Self.expectDamaged("keys(age, descending)", path: path) { () throws(BuriError) in
            try people.keys(.index("age", in: IndexValue(0)...IndexValue(200)).descending())
        }
        Self.expectDamaged("count(age)", path: path) { () throws(BuriError) in
            try people.count(.index("age", in: IndexValue(0)...IndexValue(200)))
        }
        Self.expectDamaged("objects(age)", path: path) { () throws(BuriError) in
            try people.objects(.index("age", in: IndexValue(0)...IndexValue(200)))
        }
        Self.expectDamaged("entryCount(age)", path: path) { () throws(BuriError) in
            try people.raw.entryCount(index: "age")
        }
        let lazy = people.lazyObjects(.index("age", in: IndexValue(0)...IndexValue(200)))
        _ = Array(lazy)
        #expect(!lazy.isComplete)
        if case .damaged(_, "Person", _)? = lazy.error {
        } else {
            Issue.record("lazyObjects.error: \(String(describing: lazy.error))")
        }
        Self.expectDamaged("check()", path: path) { () throws(BuriError) in try db.check() }

        // The records are intact: reads that do not touch the index are complete and exact.
        #expect(try people.count() == 1000)
        #expect(try people.objects() == ordered.compactMap { Self.byKey[$0] })
        db.close()

        // Repair drops the damaged blocks, and rebuilding the indexes from the records restores them.
        let report = try BuriDatabase.repair(path: path, options: options, levelDB: levelDB)
        #expect(report.storageLosses.count >= 1, "\(report.lines)")
        #expect(report.lostObjects.isEmpty, "\(report.lines)")
        #expect(report.check.problems.contains { $0.kind == .missingEntry && $0.index == "age" && $0.repaired })
        #expect(report.check.isConsistent, "\(report.lines)")
        let reopened = try BuriDatabase(path: path, options: options, levelDB: levelDB)
        defer { reopened.close() }
        #expect(try reopened.check().problems.isEmpty)
        let repaired = try reopened.bucket(Person.self)
        let byAge = Self.people.sorted {
            $0.age != $1.age ? $0.age < $1.age : $0.id.utf8.lexicographicallyPrecedes($1.id.utf8)
        }
        #expect(try repaired.keys(.index("age", in: IndexValue(0)...IndexValue(200))) == byAge.map(\.id))
        #expect(try repaired.min(index: "age") == IndexValue(0) && repaired.max(index: "age") == IndexValue(96))
    }

    // MARK: A damaged log record

    /// A database whose last writes, one object per synced batch, are only in the log.
    static func makeLogDatabase(_ path: String) throws -> (inLog: [Person], log: String) {
        var options = BuriOptions()
        options.syncWrites = true
        let db = try BuriDatabase(path: path, options: options)
        let people = try db.bucket(Person.self)
        try people.store(Array(Self.people.prefix(100)))
        try db.compact()
        for person in Self.people[100..<130] { try people.store(person) }  // one synced batch each
        db.close()
        let logs = try CorruptionTests.files(path, suffix: ".log").filter {
            (try? CorruptionTests.size(of: $0)) ?? 0 > 0
        }
        try #require(logs.count == 1, "\(logs)")
        return (Array(Self.people[100..<130]), logs[0])
    }

    @Test(
        "a damaged log record: opening fails naming the log and changes nothing; repair keeps it and names the object to verify"
    )
    func damagedLogRecord() throws {
        let directory = TemporaryDirectory("buri-damaged-log")
        let path = directory.path("db")
        let (inLog, log) = try Self.makeLogDatabase(path)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        // The record of d0110 (the eleventh write): one bit of its name, "name 110" → "name 1q0".
        let name = Array("name 110".utf8)
        let at = try #require((0...(bytes.count - name.count)).first { Array(bytes[$0..<($0 + name.count)]) == name })
        bytes[at + 6] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        let before = try Self.dataFiles(path)

        // Opening refuses, twice, naming the log file; no data file changes (LevelDB would
        // otherwise drop this write and every later one in its block, and delete the log).
        for attempt in 1...2 {
            let error = openError(path)
            guard case let .damaged(at, nil, reason)? = error else {
                Issue.record("attempt \(attempt): expected .damaged, got \(String(describing: error))")
                continue
            }
            #expect(
                at == path && reason.contains((log as NSString).lastPathComponent) && reason.contains("checksum"),
                "\(reason)")
            #expect(String(describing: error!).contains("buri repair \(path)"))
            #expect(try Self.dataFiles(path) == before, "attempt \(attempt) changed files")
        }

        // The scan finds exactly that record and the object it writes.
        let damaged = try Database.damagedLogRecords(path: path)
        #expect(damaged.count == 1 && damaged.first?.reason.contains("checksum") == true, "\(damaged)")

        // Repair salvages everything and names the object whose write was damaged.
        let report = try BuriDatabase.repair(path: path)
        #expect(!report.isComplete)
        #expect(report.damagedLogRecords.count == 1)
        #expect(report.suspectObjects == [ObjectReference(bucket: "Person", key: "d0110")], "\(report.lines)")
        #expect(report.lostObjects.isEmpty && report.check.problems.isEmpty, "\(report.lines)")
        #expect(report.lines.contains { $0.hasPrefix("suspect: bucket 'Person', key 'd0110'") }, "\(report.lines)")

        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        let people = try db.bucket(Person.self)
        #expect(try people.count() == 130)
        for person in Self.people.prefix(130) where person.id != "d0110" {
            #expect(try people.object(forKey: person.id) == person)
        }
        #expect(
            try people.object(forKey: "d0110")?.name == "name 1q0",
            "recovered as LevelDB's repair read it, and named as suspect")
        _ = inLog
    }

    @Test("a damaged log record length: repair puts back the writes LevelDB drops, whose checksums are intact")
    func damagedLogLength() throws {
        let directory = TemporaryDirectory("buri-damaged-log-length")
        let path = directory.path("db")
        let (inLog, log) = try Self.makeLogDatabase(path)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        let records = CorruptionTests.logRecordOffsets(bytes)
        try #require(records.count == inLog.count)
        bytes[records[20] + 5] = 0x7F  // the 21st record's length now runs past the block
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        guard case .damaged? = openError(path) else { Issue.record("open did not refuse the damaged log"); return }

        let report = try BuriDatabase.repair(path: path)
        #expect(
            report.damagedLogRecords.count == 1 && report.damagedLogRecords[0].offset == records[20],
            "\(report.damagedLogRecords)")
        #expect(report.damagedLogRecords[0].reason.contains("runs past the end"), "\(report.damagedLogRecords)")
        // LevelDB's repair takes the over-long record for a cut-off write and drops it and the nine
        // writes after it. The checksum covers the payload, not the length: the record's checksum
        // matches its true length, so its write is intact, and so are the nine after it. All ten
        // are put back, and nothing was lost.
        #expect(
            report.restoredObjects == Self.people[120..<130].map { ObjectReference(bucket: "Person", key: $0.id) },
            "\(report.lines)")
        #expect(
            report.suspectObjects.isEmpty && report.lostObjects.isEmpty && report.unknownLosses.isEmpty,
            "\(report.lines)")
        #expect(report.isComplete, "\(report.lines)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        let people = try db.bucket(Person.self)
        for person in Self.people.prefix(130) { #expect(try people.object(forKey: person.id) == person) }
        #expect(try people.count() == 130)
    }

    @Test("a write cut off at the end of the log is recovered as before: paranoid checks do not refuse a crash")
    func tornLogTailStillOpens() throws {
        let directory = TemporaryDirectory("buri-torn-log")
        let path = directory.path("db")
        let (inLog, log) = try Self.makeLogDatabase(path)
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
        let records = CorruptionTests.logRecordOffsets(bytes)
        try Data(bytes[..<(records[29] + 20)]).write(to: URL(fileURLWithPath: log))  // the last write died midway
        #expect(try Database.damagedLogRecords(path: path).isEmpty)
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        #expect(try db.bucket(Person.self).count() == 100 + inLog.count - 1)
    }

    @Test("repair refuses a directory holding no LevelDB files, and writes nothing into it")
    func repairRefusesOtherDirectories() throws {
        let directory = TemporaryDirectory("buri-repair-other")
        let path = directory.path("notes")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: path + "/readme.txt"))
        #expect(throws: BuriError.notABuriDatabase(path: path)) { try BuriDatabase.repair(path: path) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: path) == ["readme.txt"])
    }
}

/// `Person` with one more index: opening its bucket builds the index from every record.
struct PersonWithNickname: BuriSupport, Equatable, Sendable {
    var id: String
    var name: String
    var locale: String
    var age: Int
    var tags: [String] = []
    var score: Double = 0

    static let buri = BuriSchema<PersonWithNickname>(
        key: \.id,
        indexes: [
            .binary("locale", \.locale), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
            .binary("name", \.name),
        ],
        bucket: "Person"
    )
}
