import BuriCodec
import BuriStorage
import Foundation
import Testing
@testable import Buri

// The exact per-bucket object count of format 4 (docs/FORMAT.md §6b): one key per bucket id,
// changed in the same batch as the records it counts.

private func people(_ n: Int, prefix: String = "p", from start: Int = 0) -> [PersonRecord] {
    (start..<(start + n)).map {
        PersonRecord(objectId: "\(prefix)\($0)", name: "n\($0)", locale: "L\($0 % 3)", age: $0)
    }
}

/// The count stored for bucket id `id`, as the engine holds it (`nil` if there is none).
private func storedCount(_ db: BuriDatabase, _ id: UInt32) throws -> Int? {
    guard let value = try db.engine.snapshot().get(Keyspace.countKey(bucket: id)) else { return nil }
    guard let count = Keyspace.parseCount(value) else { throw UnreadableCount(value: value) }
    return count
}

private struct UnreadableCount: Error { var value: [UInt8] }

/// The number of record keys under `id`, counted one by one.
private func recordKeys(_ db: BuriDatabase, _ id: UInt32) throws -> Int {
    try scanKeys(db.engine.snapshot()).filter { $0.starts(with: Keyspace.recordPrefix(bucket: id)) }.count
}

/// Asserts that `count()`, the stored count and the record keys agree on `expected`.
private func expectCount(
    _ raw: RawBucket, _ expected: Int, _ note: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let id = raw.descriptor.id
    #expect(try raw.count() == expected, "\(note): count()", sourceLocation: sourceLocation)
    #expect(try storedCount(raw.database, id) == expected, "\(note): stored count", sourceLocation: sourceLocation)
    #expect(try recordKeys(raw.database, id) == expected, "\(note): record keys", sourceLocation: sourceLocation)
}

private func rawObject(_ key: String, _ n: Int = 0) throws -> RawObject {
    RawObject(key: key, payload: CBORValue.map([CBORMapEntry(key: "n", value: .int(Int64(n)))]).encoded())
}

/// Writes `db` back to how a version 3 Buri would have left it: the version 3 header and no counts.
private func makeVersion3(_ engine: any StorageEngine) throws {
    let batch = engine.makeBatch()
    let cursor = try engine.snapshot().cursor(in: Keyspace.countRange)
    while try cursor.next() { batch.delete(cursor.key) }
    batch.put(Keyspace.headerKey, Keyspace.headerValue(version: 3))
    try engine.commit(batch, conditions: nil, sync: true)
}

@Suite("Object counts: O(1) count() and deleteAll(), exact after every write")
struct ObjectCountTests {
    @Test(arguments: Engine.allCases) func everyKindOfWriteKeepsTheCountExact(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let typed = try t.db.bucket(PersonRecord.self)
        let raw = typed.raw
        // A new bucket has no count yet: it counts as 0, and its first write puts the count.
        #expect(try raw.count() == 0)
        try typed.store(people(10))
        try expectCount(raw, 10, "first batch into an empty bucket")
        try typed.store(
            people(1, from: 3).map {
                var p = $0; p.name = "renamed"; return p
            })
        try expectCount(raw, 10, "one overwrite")
        try typed.store(people(1, from: 10))
        try expectCount(raw, 11, "one insert")
        // Five overwrites and three new objects in one batch.
        try typed.store(people(8, from: 6))
        try expectCount(raw, 14, "overwrites and inserts in one batch")
        // A key repeated in one batch is one object; canonically equal keys are two ("é" c3 a9, "e\u{301}" 65 cc 81).
        try typed.store([
            PersonRecord(objectId: "dup", name: "a", locale: "X", age: 1),
            PersonRecord(objectId: "dup", name: "b", locale: "Y", age: 2),
            PersonRecord(objectId: "\u{E9}", name: "c", locale: "X", age: 3),
            PersonRecord(objectId: "e\u{301}", name: "d", locale: "X", age: 4),
            PersonRecord(objectId: "nul\u{0}key", name: "e", locale: "X", age: 5),
        ])
        try expectCount(raw, 18, "duplicates in one batch")
        // Deleting missing keys changes nothing; a key given twice is deleted once.
        #expect(try typed.delete(keys: ["absent", "also absent"]) == 0)
        try expectCount(raw, 18, "deleting missing keys")
        #expect(try typed.delete(keys: ["p0", "p0", "absent", "\u{E9}"]) == 2)
        try expectCount(raw, 16, "deleting keys")
        #expect(try typed.count(.all) == 16)
        #expect(try typed.keys().count == 16)
        // A failed batch (unique violation elsewhere) or a refused key changes nothing.
        #expect(throws: BuriError.self) { try typed.store(PersonRecord(objectId: "", name: "", locale: "", age: 0)) }
        try expectCount(raw, 16, "a refused store")
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aBucketWithoutIndexesCountsEveryPathOfItsWriter(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let raw = try t.db.createBucket(named: "plain")
        try raw.store([try rawObject("a")])
        try expectCount(raw, 1, "one put into an empty bucket")
        try raw.store([try rawObject("a", 1)])
        try expectCount(raw, 1, "one overwrite")
        // Empty-bucket fast path with duplicates: a fresh bucket.
        let fresh = try t.db.createBucket(named: "fresh")
        try fresh.store([try rawObject("x"), try rawObject("x", 2), try rawObject("\u{E9}"), try rawObject("e\u{301}")])
        try expectCount(fresh, 3, "duplicates into an empty bucket")
        // A small batch over a bucket with records (point reads), with an overwrite and a repeat.
        try raw.store([try rawObject("a", 2), try rawObject("b"), try rawObject("b", 3), try rawObject("c")])
        try expectCount(raw, 3, "small batch")
        // A large batch (one walk over the stored keys): half overwrites, half new, some repeated.
        var large = try (0..<600).map { try rawObject(String(format: "k%04d", $0)) }
        try raw.store(large)
        try expectCount(raw, 603, "large batch into a bucket with records")
        large =
            try (300..<900).map { try rawObject(String(format: "k%04d", $0)) }
            + (0..<50).map { try rawObject(String(format: "k%04d", 890 + $0 % 20)) }
        try raw.store(large)
        // 300 overwrites and 300 new keys, then 50 repeats of k0890…k0909, of which k0900…k0909 are new.
        try expectCount(raw, 913, "large batch with overwrites and repeats")
        #expect(try raw.delete(keys: ["a", "b", "zzz"]) == 2)
        try expectCount(raw, 911, "deletes")
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func transactionsWriteEachCountOnceAndARollbackChangesNothing(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let typed = try t.db.bucket(PersonRecord.self)
        try typed.store(people(20))
        let plain = try t.db.createBucket(named: "plain")
        try t.db.write { tx in
            let people = try tx.bucket(PersonRecord.self)
            try people.store(PersonRecord(objectId: "new1", name: "", locale: "", age: 1))
            try people.store(PersonRecord(objectId: "p1", name: "over", locale: "", age: 1))
            #expect(try people.count() == 21)  // the transaction sees its own writes
            #expect(try people.delete(keys: ["p2", "p3", "nope"]) == 2)
            #expect(try people.count() == 19)
            try tx.rawBucket(named: "plain").store([try rawObject("a"), try rawObject("b")])
            #expect(try tx.rawBucket(named: "plain").count() == 2)
        }
        try expectCount(typed.raw, 19, "after a transaction")
        try expectCount(plain, 2, "the second bucket of the transaction")

        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try t.db.write { tx in
                let bucket = try tx.bucket(PersonRecord.self)
                try bucket.store(people(50, prefix: "gone"))
                _ = try bucket.deleteAll()
                #expect(try bucket.count() == 0)
                throw Abort()
            }
        }
        try expectCount(typed.raw, 19, "after a rollback")
        // deleteAll inside a transaction deletes key by key and counts down to 0 with it.
        let removed = try t.db.write { tx in try tx.bucket(PersonRecord.self).deleteAll() }
        #expect(removed == 19)
        try expectCount(typed.raw, 0, "after deleteAll in a transaction")
        // A bucket created inside a transaction gets its count at the commit.
        try t.db.write { tx in try tx.bucket(PersonRecord.self, named: "made").store(people(4)) }
        try expectCount(try t.db.rawBucket(named: "made"), 4, "a bucket made in a transaction")
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func deleteAllReadsTheCountAndTheNewGenerationStartsAtZero(engine: Engine) throws
    {
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let typed = try t.db.bucket(PersonRecord.self)
        try typed.store(people(300))
        let oldId = typed.raw.descriptor.id
        #expect(try typed.deleteAll() == 300)
        let newId = typed.raw.descriptor.id
        #expect(newId != oldId)
        #expect(try storedCount(t.db, newId) == 0)
        #expect(try typed.count() == 0)
        // The retired id's count stays until the purge deletes it with the marker.
        #expect(try storedCount(t.db, oldId) == 300)
        #expect(try t.db.check().isConsistent)
        try t.db.purgeRetiredBuckets()
        #expect(try storedCount(t.db, oldId) == nil)
        try typed.store(people(7))
        try expectCount(typed.raw, 7, "writes into the new generation")
        #expect(try typed.deleteAll() == 7)
        #expect(try typed.deleteAll() == 0)
        // Dropping the bucket: the purge removes its count too.
        let id = typed.raw.descriptor.id
        try t.db.dropBucket(named: "Person")
        try t.db.purgeRetiredBuckets()
        #expect(
            try scanKeys(t.db.engine.snapshot()).filter { $0.first == Keyspace.countTag }.allSatisfy {
                Keyspace.bucket(ofCountKey: $0) != id
            })
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aStagedImportKeepsItsStagesCount(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let typed = try t.db.bucket(PersonRecord.self)
        try typed.store(people(1_200))
        let load = try t.db.stageImport(into: "Person", chunkSize: 500)
        #expect(try load.stagedCount() == 1_200)
        #expect(try storedCount(t.db, load.stageId) == 1_200)
        let payload = try CBOREncoder().encode(PersonRecord(objectId: "x", name: "", locale: "", age: 1))
        try load.store([
            RawObject(key: "p1", payload: payload, indexValues: ["age": [[1]], "locale": [[""]]]),
            RawObject(key: "x", payload: payload, indexValues: ["age": [[1]], "locale": [[""]]]),
        ])
        #expect(try load.publish() == 1_201)
        try expectCount(typed.raw, 1_201, "after publishing")
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: [Engine.shared, .etcd].filter(Engine.allCases.contains))
    func twoClientsInsertingAtOnceNeverLoseAnIncrement(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let other = try t.client(1)
        defer { if other !== t.db { other.close() } }
        let mine = try t.db.bucket(PersonRecord.self)
        let theirs = try other.bucket(PersonRecord.self)
        let rounds = engine == .etcd ? 10 : 40
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            let bucket = worker % 2 == 0 ? mine : theirs
            for round in 0..<rounds {
                do {
                    try bucket.store(people(3, prefix: "w\(worker)-r\(round)-"))
                    // Overwrites and deletes from both clients too.
                    try bucket.store(people(1, prefix: "shared", from: round % 5))
                    if round % 4 == 3 { _ = try bucket.delete(keys: ["w\(worker)-r\(round)-0"]) }
                } catch {
                    Issue.record("worker \(worker) round \(round): \(error)")
                }
            }
        }
        let expected = 4 * rounds * 3 - 4 * (rounds / 4) + 5
        #expect(try mine.count() == expected)
        #expect(try theirs.count() == expected)
        #expect(try mine.keys().count == expected)
        #expect(try storedCount(t.db, mine.raw.descriptor.id) == expected)
        #expect(try t.db.check().isConsistent)
    }

    @Test func threadsWritingOneLevelDBDatabaseKeepTheCountExact() throws {
        let t = try TestDatabase(.leveldb)
        let typed = try t.db.bucket(PersonRecord.self)
        let plain = try t.db.createBucket(named: "plain")
        DispatchQueue.concurrentPerform(iterations: 6) { worker in
            for round in 0..<50 {
                do {
                    try typed.store(people(4, prefix: "w\(worker)-\(round)-"))
                    try plain.store([try rawObject("w\(worker)-\(round)"), try rawObject("common\(round % 7)")])
                    if round % 5 == 0 { _ = try typed.delete(keys: ["w\(worker)-\(round)-1", "missing"]) }
                } catch {
                    Issue.record("worker \(worker) round \(round): \(error)")
                }
            }
        }
        try expectCount(typed.raw, 6 * 50 * 4 - 6 * 10, "typed bucket")
        try expectCount(plain, 6 * 50 + 7, "bucket without indexes")
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: [Engine.leveldb, .memory])
    func aVersion3DatabaseIsCountedWhenReadAndUpgradedWithCountsByItsFirstWrite(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(PersonRecord.self).store(people(30))
        let other = try t.db.createBucket(named: "other")
        try other.store([try rawObject("o1"), try rawObject("o2")])
        _ = try t.db.createBucket(named: "empty")
        try makeVersion3(t.db.engine)
        try t.reopen()
        #expect(t.db.formatVersion == 3)
        // Read without writing: counted from the records, and nothing is written.
        let before = try scanEntries(t.db.engine.snapshot())
        let typed = try t.db.bucket(PersonRecord.self)
        #expect(try typed.count() == 30)
        #expect(try t.db.rawBucket(named: "other").count() == 2)
        #expect(try t.db.rawBucket(named: "empty").count() == 0)
        #expect(try typed.count(.all) == 30)
        #expect(try t.db.check().isConsistent)  // a version 3 database has no counts to check
        #expect(try scanEntries(t.db.engine.snapshot()) == before)
        // The first write raises the header and counts every bucket in the same batch.
        try typed.store(people(5, from: 28))
        #expect(t.db.formatVersion == Int(Keyspace.formatVersion))
        #expect(try t.db.engine.snapshot().get(Keyspace.headerKey) == Keyspace.headerValue())
        try expectCount(typed.raw, 33, "the bucket written")
        try expectCount(try t.db.rawBucket(named: "other"), 2, "a bucket not written")
        try expectCount(try t.db.rawBucket(named: "empty"), 0, "an empty bucket")
        #expect(try t.db.check().isConsistent)
        // deleteAll as the first write of a version 3 database reads no count it cannot trust.
        try makeVersion3(t.db.engine)
        try t.reopen()
        #expect(try t.db.bucket(PersonRecord.self).deleteAll() == 33)
        #expect(try t.db.check().isConsistent)
    }

    @Test func aReadOnlyOpenOfAVersion3DatabaseCountsAndWritesNothing() throws {
        let t = try TestDatabase(.leveldb)
        try t.db.bucket(PersonRecord.self).store(people(12))
        try makeVersion3(t.db.engine)
        t.db.close()
        var options = BuriOptions()
        options.createIfMissing = false
        options.purgesInBackground = false  // as the `buri` tool's reading commands open
        let db = try BuriDatabase(path: t.path, options: options)
        let before = try scanEntries(db.engine.snapshot())
        #expect(db.formatVersion == 3)
        #expect(try db.rawBucket(named: "Person").count() == 12)
        #expect(try db.check().isConsistent)
        #expect(try scanEntries(db.engine.snapshot()) == before)
        db.close()
        try t.reopen()
    }

    @Test(arguments: [Engine.leveldb, .memory, .shared])
    func aDamagedOrWrongCountIsATypedErrorCheckReportsAndRepairRecounts(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let typed = try t.db.bucket(PersonRecord.self)
        try typed.store(people(25))
        let id = typed.raw.descriptor.id
        func put(_ value: [UInt8]?) throws {
            let batch = t.db.engine.makeBatch()
            if let value {
                batch.put(Keyspace.countKey(bucket: id), value)
            } else {
                batch.delete(Keyspace.countKey(bucket: id))
            }
            try t.db.engine.commit(batch, conditions: nil, sync: true)
        }
        let records = try scanEntries(t.db.engine.snapshot()).count

        for (damage, value) in [
            ("3 bytes", [UInt8]([1, 2, 3])), ("9 bytes", [UInt8](repeating: 0, count: 9)),
            ("above Int.max", [UInt8](repeating: 0xFF, count: 8)), ("empty", []),
        ] {
            try put(value)
            #expect(throws: BuriError.self, "\(damage)") { try typed.count() }
            do {
                _ = try typed.count()
            } catch let error {
                guard case .corruption(let bucket, _, _, let reason) = error else {
                    Issue.record("\(damage): \(error)"); continue
                }
                #expect(
                    bucket == "Person" && reason.contains("object count") && reason.contains("buri check --repair"),
                    "\(damage): \(reason)")
            }
            // A write cannot build on a count it cannot read: refused, nothing written.
            #expect(throws: BuriError.self, "\(damage)") {
                try typed.store(PersonRecord(objectId: "new", name: "", locale: "", age: 0))
            }
            #expect(throws: BuriError.self, "\(damage)") { try typed.deleteAll() }
            let report = try t.db.check()
            #expect(
                report.problems.map(\.kind) == [.wrongCount] && report.problems.first?.bucket == "Person",
                "\(damage): \(report.problems)")
            #expect(
                report.problems.first?.detail.contains("holds 25 records") ?? false, "\(damage): \(report.problems)")
            let repaired = try t.db.check(repair: true)
            #expect(repaired.problems.count == 1 && repaired.isConsistent, "\(damage)")
            try expectCount(typed.raw, 25, "\(damage), repaired")
        }
        // A count that parses but is wrong, and a missing one: found and fixed the same way.
        for (damage, value) in [("wrong", Keyspace.countValue(999)), ("missing", nil)] {
            try put(value)
            let report = try t.db.check()
            #expect(report.problems.map(\.kind) == [.wrongCount], "\(damage): \(report.problems)")
            if damage == "wrong" { #expect(report.problems.first?.detail.contains("999") ?? false) }
            #expect(try t.db.check(repair: true).isConsistent)
            try expectCount(typed.raw, 25, "\(damage), repaired")
        }
        // A count for an id no bucket or marker has: a stray key, deleted by repair.
        let batch = t.db.engine.makeBatch()
        batch.put(Keyspace.countKey(bucket: 777), Keyspace.countValue(5))
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        #expect(try t.db.check().problems.map(\.kind) == [.strayKey])
        #expect(try t.db.check(repair: true).isConsistent)
        #expect(try storedCount(t.db, 777) == nil)
        // Repairing counts never deleted a record or an entry.
        #expect(try scanEntries(t.db.engine.snapshot()).count == records)
        #expect(try typed.keys().count == 25)
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test func countValuesRoundTripAndRefuseWhatIsNotACount() {
        for n in [0, 1, 255, 256, 100_000, Int(UInt32.max), Int.max] {
            #expect(Keyspace.parseCount(Keyspace.countValue(n)) == n)
            #expect(Keyspace.countValue(n).count == 8)
        }
        #expect(Keyspace.parseCount([]) == nil)
        #expect(Keyspace.parseCount([0, 0, 0, 0, 0, 0, 0]) == nil)
        #expect(Keyspace.parseCount([UInt8](repeating: 0, count: 9)) == nil)
        #expect(Keyspace.parseCount([0x80, 0, 0, 0, 0, 0, 0, 0]) == nil)
        #expect(Keyspace.bucket(ofCountKey: Keyspace.countKey(bucket: 0xDEAD_BEEF)) == 0xDEAD_BEEF)
        #expect(Keyspace.bucket(ofCountKey: Keyspace.retiredKey(bucket: 1)) == nil)
        #expect(Keyspace.bucket(ofCountKey: Keyspace.countKey(bucket: 1) + [0]) == nil)
    }
}
