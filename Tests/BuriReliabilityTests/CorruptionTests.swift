import Foundation
import LevelDB
import Testing
@testable import Buri

/// Damage written under Buri's feet, through LevelDB or straight into the files: every read
/// reports it as a typed error naming what is damaged, `check()` finds it, and nothing crashes.
struct CorruptionTests {
    /// p1…p10: locale EN for odd numbers, DE for even; age 19 + n.
    static func people() -> [Person] {
        (1...10).map { n in
            Person(
                id: "p\(n)", name: "n\(n)", locale: n % 2 == 1 ? "EN" : "DE", age: 19 + n, tags: n % 3 == 0 ? ["x"] : []
            )
        }
    }

    /// Creates the database and returns the Person bucket's catalog entry.
    static func makeDatabase(_ path: String, objects: [Person] = people()) throws -> BucketDescriptor {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Person.self).store(objects)
        return try #require(try db.bucketInfo(named: "Person"))
    }

    static func entryKey(
        _ descriptor: BucketDescriptor, _ index: String, _ value: IndexValue, _ key: String
    ) throws -> [UInt8] {
        let definition = try #require(descriptor.index(named: index))
        return Keyspace.indexEntryKey(
            prefix: Keyspace.indexPrefix(bucket: descriptor.id, index: definition.id), tuple: value.encoded,
            objectKey: key)
    }

    @Test(
        "damaged records and index keys: typed errors naming bucket and key, queries stop with the error, check finds all, repair fixes the indexes"
    )
    func damagedRecordsAndIndexKeys() throws {
        let directory = TemporaryDirectory("buri-corrupt")
        let path = directory.path("db")
        let descriptor = try Self.makeDatabase(path)

        try withRawDatabase(path) { raw in
            // p3: the record header's layout byte is flipped.
            let p3 = Keyspace.recordKey(bucket: descriptor.id, key: "p3")
            var value = try #require(try raw.get(p3))
            value[0] ^= 0x7E
            try raw.put(p3, value)
            // p5: the payload loses its last bytes (the header is intact).
            let p5 = Keyspace.recordKey(bucket: descriptor.id, key: "p5")
            value = try #require(try raw.get(p5))
            try raw.put(p5, Array(value.dropLast(3)))
            // p7's locale entry: a byte of the value's end mark is flipped, so the key no longer parses.
            let locale7 = try Self.entryKey(descriptor, "locale", "EN", "p7")
            #expect(try raw.get(locale7) != nil)
            var damaged = locale7
            damaged[locale7.count - 3] ^= 0x05  // the second end-mark byte: 0x00 0x00 → 0x00 0x05
            try raw.delete(locale7)
            try raw.put(damaged, [UInt8]())
            // p8's age entry: a byte of the object key is flipped, so it points at "q8", which does not exist.
            let age8 = try Self.entryKey(descriptor, "age", 27, "p8")
            #expect(try raw.get(age8) != nil)
            var dangling = age8
            dangling[age8.count - 2] ^= UInt8(ascii: "p") ^ UInt8(ascii: "q")
            try raw.delete(age8)
            try raw.put(dangling, [UInt8]())
        }

        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)

        // Fetching one object.
        #expect(try people.object(forKey: "p1") == Self.people()[0])
        #expect(throws: BuriError.self) { try people.object(forKey: "p3") }
        do {
            _ = try people.object(forKey: "p3")
        } catch let BuriError.corruption(bucket, key, _, reason) {
            #expect(bucket == "Person" && key == "p3", "\(reason)")
        } catch {
            Issue.record("p3: expected .corruption, got \(error)")
        }
        do {
            _ = try people.object(forKey: "p5")
            Issue.record("p5 decoded")
        } catch let BuriError.decodingFailed(bucket, key, type, _) {
            #expect(bucket == "Person" && key == "p5" && type == "Person")
        } catch {
            Issue.record("p5: expected .decodingFailed, got \(error)")
        }
        #expect(try people.raw.record(forKey: "p5") != nil, "the raw record of p5 (valid header) is still readable")

        // Array queries throw; lazy sequences stop at the damage and keep the error.
        do {
            _ = try people.objects()
            Issue.record("allObjects succeeded over a damaged record")
        } catch let BuriError.corruption(bucket, key, _, _) {
            #expect(bucket == "Person" && key == "p3")  // key order: p1, p10, p2, p3
        } catch {
            Issue.record("allObjects: expected .corruption, got \(error)")
        }
        let everyone = people.lazyObjects()
        let seen = Array(everyone)
        #expect(seen.map(\.id) == ["p1", "p10", "p2"])
        if case let .corruption(bucket, key, _, _)? = everyone.error {
            #expect(bucket == "Person" && key == "p3")
        } else {
            Issue.record("lazyObjects: expected .corruption in .error, got \(String(describing: everyone.error))")
        }
        // Keys alone never read records: all ten keys are listed.
        #expect(try people.keys().count == 10)

        // The unparsable index key stops queries over its range with .corruption naming the index.
        do {
            _ = try people.keys(.index("locale", prefix: "EN"))
            Issue.record("a query over a damaged index key succeeded")
        } catch let BuriError.corruption(bucket, _, index, _) {
            #expect(bucket == "Person" && index == "locale")
        } catch {
            Issue.record("locale query: expected .corruption, got \(error)")
        }
        let lazyKeys = people.lazyKeys(.index("locale", prefix: "EN"))
        _ = Array(lazyKeys)
        #expect(lazyKeys.error != nil)
        // Queries that do not reach the damage still work.
        #expect(try people.keys(.index("locale", equals: "DE")) == ["p10", "p2", "p4", "p6", "p8"])

        // The dangling entry: keys come from the index alone; objects report the missing record.
        #expect(try people.keys(.index("age", in: 27...27)) == ["q8"])
        do {
            _ = try people.objects(.index("age", in: 27...27))
            Issue.record("objects over a dangling entry succeeded")
        } catch let BuriError.corruption(bucket, key, index, _) {
            #expect(bucket == "Person" && key == "q8" && index == "age")
        } catch {
            Issue.record("age query: expected .corruption, got \(error)")
        }

        // check() reports every problem; repair rebuilds the indexes and leaves the damaged records to the user.
        let report = try db.check()
        let found = Set(report.problems.map { "\($0.kind.rawValue) \($0.key ?? "-") \($0.index ?? "-")" })
        #expect(
            found == [
                "corruptRecord p3 -", "corruptRecord p5 -",
                "strayKey - locale", "missingEntry p7 locale",
                "danglingEntry q8 age", "missingEntry p8 age",
            ], "\(report.summary)")
        #expect(!report.isConsistent)

        let repaired = try db.check(repair: true)
        #expect(
            Set(repaired.problems.filter { !$0.repaired }.map { "\($0.kind.rawValue) \($0.key ?? "-")" }) == [
                "corruptRecord p3", "corruptRecord p5",
            ])
        let after = try db.check()
        #expect(
            Set(after.problems.map { "\($0.kind.rawValue) \($0.key ?? "-")" }) == [
                "corruptRecord p3", "corruptRecord p5",
            ], "\(after.summary)")
        #expect(try people.keys(.index("locale", equals: "EN")) == ["p1", "p3", "p5", "p7", "p9"])
        #expect(try people.objects(.index("age", in: 27...27)).map(\.id) == ["p8"])
    }

    @Test("an aggregate that meets a damaged record header fails with a typed error naming it, never a smaller sum")
    func aggregateOverDamagedHeaderFails() throws {
        let directory = TemporaryDirectory("buri-corrupt-aggregate")
        let path = directory.path("db")
        let descriptor = try Self.makeDatabase(path)
        try withRawDatabase(path) { raw in
            let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: "p3")
            var value = try #require(try raw.get(recordKey))
            value[0] = 0xEE  // header layout byte
            try raw.put(recordKey, value)
        }
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        for attempt in [
            { () throws -> Void in _ = try people.aggregate("age", groupedBy: "locale") },
            { () throws -> Void in _ = try people.aggregate("age", where: .index("locale", equals: "EN")) },
        ] {
            do {
                try attempt()
                Issue.record("an aggregate over a damaged record returned a result")
            } catch let error as BuriError {
                guard case .corruption(_, let key, _, _) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(key == "p3")
            }
        }
        // Without conditions the index entries alone are read: the damaged record is not in the way.
        #expect(try people.aggregate("age").count == 10)
    }

    @Test("a damaged record can be deleted or overwritten, and takes its index entries with it")
    func damagedRecordCanBeReplaced() throws {
        let directory = TemporaryDirectory("buri-corrupt-replace")
        let path = directory.path("db")
        let descriptor = try Self.makeDatabase(path)
        try withRawDatabase(path) { raw in
            for key in ["p3", "p4"] {
                let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: key)
                var value = try #require(try raw.get(recordKey))
                value[0] = 0xEE  // header layout byte: the header can no longer be read
                try raw.put(recordKey, value)
            }
        }
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        // A damaged record must not be stuck: deleting it and storing over it both work.
        #expect(try people.delete(key: "p3"))
        let replacement = Person(id: "p4", name: "new", locale: "FR", age: 99)
        try people.store(replacement)
        #expect(try people.object(forKey: "p3") == nil)
        #expect(try people.object(forKey: "p4") == replacement)
        // Neither left index entries behind for their old values.
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        #expect(try people.keys(.index("locale", equals: "EN")) == ["p1", "p5", "p7", "p9"])
        #expect(try people.keys(.index("locale", equals: "FR")) == ["p4"])
        #expect(try people.keys(.index("age", in: 22...23)) == [])
    }

    @Test(
        "a large batch over damaged records (read by the store path's walk) replaces them and takes their old index entries with it"
    )
    func damagedRecordsInLargeBatch() throws {
        let directory = TemporaryDirectory("buri-corrupt-batch")
        let path = directory.path("db")
        let originals = (0..<400).map { n in Person(id: "b\(n)", name: "n", locale: "EN", age: n % 30) }
        let descriptor = try Self.makeDatabase(path, objects: originals)
        let damaged = ["b0", "b17", "b399"]
        try withRawDatabase(path) { raw in
            for key in damaged {
                let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: key)
                var value = try #require(try raw.get(recordKey))
                value[0] = 0xEE  // the header can no longer be read
                try raw.put(recordKey, value)
            }
        }
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        let replacements = originals.map { Person(id: $0.id, name: "new", locale: "FR", age: 100 + $0.age) }
        #expect(replacements.count >= RawBucket.walkThreshold)
        try people.store(replacements.reversed())
        for key in damaged { #expect(try people.object(forKey: key)?.name == "new") }
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
        #expect(try people.keys(.index("age", in: 0...99)).isEmpty)
        #expect(try people.keys(.index("locale", equals: "FR")).count == 400)
    }

    @Test(
        "random garbage as record values: every fetch and query returns an object or a typed error, and check reports each"
    )
    func randomGarbageRecords() throws {
        let directory = TemporaryDirectory("buri-garbage")
        let path = directory.path("db")
        let originals = (1...200).map { n in Person(id: "g\(n)", name: "n", locale: "EN", age: n) }
        let descriptor = try Self.makeDatabase(path, objects: originals)
        var random = SeededGenerator(seed: 0x6A4B)
        var damaged = Set<String>()
        try withRawDatabase(path) { raw in
            for original in originals where Bool.random(using: &random) {
                let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: original.id)
                var value = try #require(try raw.get(recordKey))
                switch Int.random(in: 0..<4, using: &random) {
                case 0: value = random.bytes(Int.random(in: 0...64, using: &random))  // all garbage
                case 1: value = Array(value.prefix(Int.random(in: 0..<value.count, using: &random)))  // truncated
                case 2:  // a few bytes flipped
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        value[Int.random(in: 0..<value.count, using: &random)] ^= UInt8.random(
                            in: 1...255, using: &random)
                    }
                default: value += random.bytes(Int.random(in: 1...8, using: &random))  // trailing bytes
                }
                try raw.put(recordKey, value)
                damaged.insert(original.id)
            }
        }
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        var errors = 0
        for original in originals {
            do {
                let object = try people.object(forKey: original.id)
                // A flip can leave a record readable; an undamaged one must be exactly as stored.
                if !damaged.contains(original.id) { #expect(object == original) }
            } catch let error {
                switch error {
                case .corruption(let bucket, let key, _, _):
                    #expect(bucket == "Person" && key == original.id)
                case .decodingFailed(let bucket, let key, _, _):
                    #expect(bucket == "Person" && key == original.id)
                default:
                    Issue.record("\(original.id): unexpected error \(error)")
                }
                #expect(damaged.contains(original.id), "\(original.id) was not damaged but fails: \(error)")
                errors += 1
            }
        }
        #expect(errors > 50)
        // Queries stop at the first damaged record with an error; they never crash or invent objects.
        let sequence = people.lazyObjects(.index("age", in: 1...200))
        for person in sequence { #expect(person.locale == "EN") }
        #expect(sequence.error != nil)
        let report = try db.check()
        let corrupt = Set(report.problems.filter { $0.kind == .corruptRecord }.compactMap(\.key))
        #expect(corrupt.isSubset(of: damaged) && corrupt.count >= errors / 2, "\(report.summary)")
    }

    // MARK: Damaged files

    /// Builds a database whose data sits in one compacted table file plus a tail in the log.
    static func makeFileDatabase(_ path: String) throws -> (inTables: [Person], inLog: [Person]) {
        let inTables = (0..<2000).map { n in
            Person(
                id: String(format: "t%05d", n), name: "n", locale: n % 2 == 0 ? "EN" : "DE", age: n % 90,
                tags: ["t\(n % 7)"])
        }
        let inLog = (0..<20).map { n in Person(id: "log\(n)", name: "n", locale: "FR", age: n) }
        let db = try BuriDatabase(path: path)
        let people = try db.bucket(Person.self)
        try people.store(inTables)
        try db.compact()
        for person in inLog { try people.store(person) }
        db.close()
        return (inTables, inLog)
    }

    static func size(of file: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
    }

    static func files(_ path: String, suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(suffix) }.sorted().map {
            path + "/" + $0
        }
    }

    /// Opens the database, checks it is consistent, and returns every object (all must decode).
    static func openAndRead(_ path: String) throws -> [Person] {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        return try people.objects()
    }

    /// What opening reports: "opened", "storage <code>", "damaged", or another error.
    static func openOutcome(
        _ path: String, options: BuriOptions = BuriOptions(), levelDB: LevelDBOptions = .buriDefaults
    ) -> String {
        do {
            let db = try BuriDatabase(path: path, options: options, levelDB: levelDB)
            defer { db.close() }
            _ = try db.check()
            return "opened"
        } catch {
            if case .storage(let storageError) = error { return "storage \(storageError.code)" }
            if case .damaged(let at, nil, _) = error, at == path { return "damaged" }
            return "\(error)"
        }
    }

    @Test("a truncated table file: open fails with a storage error; BuriDatabase.repair salvages the rest")
    func truncatedTableFile() throws {
        let directory = TemporaryDirectory("buri-truncated-table")
        let path = directory.path("db")
        let (inTables, inLog) = try Self.makeFileDatabase(path)
        let tables = try Self.files(path, suffix: ".ldb")
        #expect(tables.count == 1)
        let table = try #require(tables.first)
        #expect(truncate(table, off_t(try Self.size(of: table) / 2)) == 0)

        // LevelDB does not read whole tables at open, but Buri's open reads its header key, which
        // is in the damaged table: open fails with LevelDB's I/O error naming the file.
        #expect(Self.openOutcome(path) == "storage ioError")

        // LevelDB's repair sets the unreadable table aside (in lost/), and with it Buri's header
        // and catalog: the rest is not recognisable as a Buri database any more.
        try Database.repair(path: path)
        #expect(throws: BuriError.notABuriDatabase(path: path)) { try BuriDatabase(path: path) }

        // BuriDatabase.repair restores the header, and the records that survived in the log stay
        // reachable: the catalog entry was lost with the table (and LevelDB's repair left no copy
        // of it to read), so the bucket gets one again, rebuilt from its records under a name
        // that says so, with its indexes and key field found from the records themselves.
        let report = try BuriDatabase.repair(path: path)
        #expect(report.check.isConsistent, "\(report.lines)")
        #expect(report.recoveredBuckets.map(\.name) == ["recovered-1"], "\(report.lines)")
        let recovered = try #require(report.recoveredBuckets.first)
        #expect(!recovered.nameIsKnown && recovered.objects == inLog.count)
        #expect(recovered.descriptor.keyField == "id")
        #expect(
            recovered.descriptor.indexes.map(\.name).sorted() == ["age", "locale", "score"], "\(recovered.descriptor)")
        #expect(!report.isComplete)
        #expect(
            report.lines.contains {
                $0.hasPrefix("recovered: bucket id 1 lost its catalog entry") && $0.contains("'recovered-1'")
            }, "\(report.lines)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.check().problems.isEmpty)
        let raw = try db.rawBucket(named: "recovered-1")
        #expect(try raw.count() == inLog.count)
        // Its index entries are exact: a query through the rebuilt index finds the objects.
        #expect(try raw.keys(.index("locale", equals: "FR")).sorted() == inLog.map(\.id).sorted())
        #expect(inLog.count < inTables.count)
    }

    @Test(
        "a truncated table file: BuriDatabase.repair reads its intact blocks without the index, keeps them, and names the rest"
    )
    func truncatedTableFileKeepsItsIntactBlocks() throws {
        let directory = TemporaryDirectory("buri-truncated-table-kept")
        let path = directory.path("db")
        let (inTables, inLog) = try Self.makeFileDatabase(path)
        let table = try #require(try Self.files(path, suffix: ".ldb").first)
        // Cut inside the records (the index entries, after them, are most of the table).
        #expect(truncate(table, off_t(try Self.size(of: table) / 8)) == 0)

        // LevelDB's repair alone drops the whole table (its footer is gone); Buri's finds the data
        // blocks before the cut by their checksums and puts back what they hold: the header, the
        // catalog entry and the first records, under the bucket's own name.
        let report = try BuriDatabase.repair(path: path)
        #expect(report.recoveredBuckets.isEmpty, "\(report.lines)")
        #expect(report.check.isConsistent, "\(report.lines)")
        #expect(!report.isComplete)
        #expect(
            report.lostRanges.count == 1 && report.lostRanges.first?.bucket == "Person"
                && report.lostRanges.first?.toKey == nil, "\(report.lines)")
        let survivors = try Self.openAndRead(path)
        let kept = Set(survivors.map(\.id))
        #expect(kept.isSuperset(of: inLog.map(\.id)))
        let keptFromTable = inTables.filter { kept.contains($0.id) }
        #expect(keptFromTable.count > 50 && keptFromTable.count < inTables.count, "\(keptFromTable.count)")
        // What survived is a prefix of the table's records, exact; the range starts after it.
        #expect(keptFromTable.map(\.id) == Array(inTables.prefix(keptFromTable.count)).map(\.id))
        #expect(survivors.filter { $0.id.hasPrefix("t") } == keptFromTable)
        let from = try #require(report.lostRanges.first?.fromKey)
        #expect(from <= inTables[keptFromTable.count].id)
        // Objects named as lost are exactly absent ones (those whose index entries survived).
        for object in report.lostObjects { #expect(!kept.contains(object.key), "\(object)") }
    }

    @Test("garbled CURRENT or MANIFEST: open fails with a storage error; Database.repair brings everything back")
    func garbledCurrentAndManifest() throws {
        for target in ["CURRENT", "MANIFEST"] {
            let directory = TemporaryDirectory("buri-garbled")
            let path = directory.path("db")
            let (inTables, inLog) = try Self.makeFileDatabase(path)
            let file =
                target == "CURRENT"
                ? path + "/CURRENT" : try #require(try Self.files(path, suffix: "").first { $0.contains("/MANIFEST-") })
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: file)))
            var random = SeededGenerator(seed: 7)
            for i in stride(from: 0, to: bytes.count, by: 3) { bytes[i] ^= UInt8.random(in: 1...255, using: &random) }
            try Data(bytes).write(to: URL(fileURLWithPath: file))

            let outcome = Self.openOutcome(path)
            #expect(outcome.hasPrefix("storage ") || outcome == "damaged", "\(target): \(outcome)")
            // The tables and log are intact: LevelDB's repair rebuilds the file set from them and
            // loses nothing, so the database opens consistent without Buri's own repair.
            try Database.repair(path: path)
            #expect(try Self.openAndRead(path) == (inTables + inLog).sorted { $0.id < $1.id }, "\(target)")
        }
    }

    /// The byte offsets of the records in a LevelDB log file smaller than one 32 KiB block:
    /// each record is a 7-byte header (CRC32C, u16 LE length, type) and its payload.
    static func logRecordOffsets(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = 0
        while offset + 7 <= bytes.count {
            let length = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8
            if length == 0 && bytes[offset + 6] == 0 { break }
            offsets.append(offset)
            offset += 7 + length
        }
        return offsets
    }

    @Test("a damaged log: only whole batches are recovered, in order; paranoid checks refuse a checksum failure")
    func damagedLog() throws {
        for (damage, paranoid) in [
            ("zeroed", false), ("zeroed", true), ("torn", false), ("torn", true), ("flipped", false), ("flipped", true),
        ] {
            let label = "\(damage), paranoid \(paranoid)"
            let directory = TemporaryDirectory("buri-log")
            let path = directory.path("db")
            let (inTables, inLog) = try Self.makeFileDatabase(path)
            let logs = try Self.files(path, suffix: ".log").filter { (try? Self.size(of: $0)) ?? 0 > 0 }
            #expect(logs.count == 1, "\(label): \(logs)")
            let log = try #require(logs.first)
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: log)))
            let records = Self.logRecordOffsets(bytes)
            // One log record per store: the 20 stores of `inLog`, each its own batch.
            #expect(records.count == inLog.count, "\(label)")
            let tenth = records[9]
            switch damage {
            case "zeroed": bytes = [UInt8](repeating: 0, count: bytes.count)
            case "torn": bytes = Array(bytes[..<(tenth + 12)])  // the writer "died" inside the tenth record
            default: bytes[tenth + 12] ^= 0x40  // one bit of the tenth record's payload
            }
            try Data(bytes).write(to: URL(fileURLWithPath: log))

            var levelDB = LevelDBOptions.buriDefaults
            levelDB.paranoidChecks = paranoid
            let outcome = Self.openOutcome(path, levelDB: levelDB)
            // What survives: nothing of the log if it was zeroed; else the nine batches before the
            // damaged one (LevelDB drops the rest of a block after a checksum failure).
            let expected = (inTables + (damage == "zeroed" ? [] : Array(inLog.prefix(9)))).sorted { $0.id < $1.id }
            if damage == "flipped" && paranoid {
                // A checksum failure is damage: paranoid checks refuse to open.
                #expect(outcome == "damaged", "\(label)")
                // LevelDB's repair reads logs without checksums and keeps whatever still parses, so
                // it may salvage more than recovery would: assert only what it must do — open
                // consistent, keep every batch before the damage, invent nothing.
                // Buri's repair, not LevelDB's alone: a batch recovered without its checksum can
                // come back out of order (a flipped bit in its sequence number), so its object count
                // may be older than the records around it; Buri's check recounts it.
                try BuriDatabase.repair(path: path)
                let survivors = try Self.openAndRead(path)
                #expect(Set(survivors.map(\.id)).isSuperset(of: expected.map(\.id)), "\(label)")
                let originals = Dictionary(uniqueKeysWithValues: (inTables + inLog).map { ($0.id, $0) })
                #expect(survivors.allSatisfy { originals[$0.id] == $0 }, "\(label)")
                continue
            }
            // Zero-filled space reads as preallocated, a cut-off record as a writer that died
            // mid-write (both normal after a crash), and without paranoid checks a record that
            // fails its checksum is skipped: the database opens.
            #expect(outcome == "opened", "\(label)")
            let survivors = try Self.openAndRead(path)
            let difference = Set(survivors.map(\.id)).symmetricDifference(expected.map(\.id)).sorted()
            #expect(difference.isEmpty && survivors == expected, "\(label): \(difference)")
        }
    }

    @Test("BuriDatabase.repair on an intact database changes nothing, and refuses a foreign LevelDB database")
    func repairIntactAndForeign() throws {
        let directory = TemporaryDirectory("buri-repair")
        let path = directory.path("db")
        let (inTables, inLog) = try Self.makeFileDatabase(path)
        let report = try BuriDatabase.repair(path: path)
        #expect(report.check.problems.isEmpty, "\(report.check.summary)")
        #expect(report.isComplete && report.lines.isEmpty, "\(report.lines)")
        #expect(try Self.openAndRead(path) == (inTables + inLog).sorted { $0.id < $1.id })

        let foreign = directory.path("foreign")
        let raw = try Database(path: foreign)
        try raw.put(Array("hello".utf8), Array("world".utf8))
        raw.close()
        #expect(throws: BuriError.notABuriDatabase(path: foreign)) { try BuriDatabase.repair(path: foreign) }
        #expect(try rawContents(foreign) == [Entry(key: Array("hello".utf8), value: Array("world".utf8))])
    }
}
