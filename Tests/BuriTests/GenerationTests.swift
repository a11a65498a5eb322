import BuriStorage
import Foundation
import Testing
@testable import Buri

/// Every key of the database under bucket id `id` (records and index entries).
private func keys(under id: UInt32, _ t: TestDatabase) throws -> [[UInt8]] {
    try t.rawKeys().filter {
        $0.starts(with: Keyspace.recordPrefix(bucket: id)) || $0.starts(with: Keyspace.indexSpacePrefix(bucket: id))
    }
}

/// Waits (polling, no timing asserted) until the background purge has finished every retired id.
private func waitForPurges(_ db: BuriDatabase, seconds: Double = 120) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !db.pendingPurges().isEmpty {
        if Date() > deadline {
            throw StressLikeError("the background purge did not finish in \(seconds) s: \(try db.pendingPurges())")
        }
        usleep(2_000)
    }
}

struct StressLikeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func makePeople(_ n: Int, prefix: String = "p") -> [PersonRecord] {
    (0..<n).map { PersonRecord(objectId: "\(prefix)\($0)", name: "n\($0)", locale: "L\($0 % 3)", age: $0) }
}

@Suite("Bucket generations: deleteAll in O(1) with a background purge")
struct GenerationTests {
    @Test(arguments: Engine.allCases) func deleteAllCountsExactlyAndEveryHandleGoesOnWithTheNewGeneration(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let a = try t.db.bucket(PersonRecord.self)
        try a.store(makePeople(300))
        let b = try t.db.bucket(PersonRecord.self)
        let raw = try t.db.rawBucket(named: "Person")
        let oldId = raw.descriptor.id

        #expect(try a.deleteAll() == 300)
        let newId = raw.descriptor.id
        #expect(newId != oldId)
        #expect(try t.db.bucketInfo(named: "Person")?.id == newId)
        for handle in [a, b] {
            #expect(try handle.count() == 0)
            #expect(try handle.keys().isEmpty)
            #expect(try handle.keys(.index("locale", equals: "L1")).isEmpty)
            #expect(try handle.object(forKey: "p1") == nil)
        }
        #expect(try raw.count() == 0)
        #expect(try raw.entryCount(index: "age") == 0)

        // Stores through any handle land in the new generation, and every handle reads them.
        try b.store(PersonRecord(objectId: "p1", name: "again", locale: "EN", age: 7))
        try raw.delete(keys: ["absent"])
        #expect(try a.object(forKey: "p1")?.name == "again")
        #expect(try a.keys(.index("locale", equals: "EN")) == ["p1"])
        #expect(try raw.keys(.index("age", in: 0...10)) == ["p1"])
        #expect(try t.db.bucket(PersonRecord.self).count() == 1)
        #expect(try a.delete(key: "p1"))
        try a.store(makePeople(5, prefix: "q"))

        // The count stays exact on the next generation; an empty bucket switches nothing.
        #expect(try raw.deleteAll() == 5)
        let thirdId = a.raw.descriptor.id
        #expect(try b.deleteAll() == 0)
        #expect(a.raw.descriptor.id == thirdId)
        #expect(try t.db.bucketInfo(named: "Person")?.id == thirdId)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aUniqueIndexHoldsAgainAfterDeleteAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Note("n1", email: "x@example.com"))
        #expect(try notes.deleteAll() == 1)
        // The old generation's entry (still there until purged) does not hold the value.
        try notes.store(Note("n2", email: "x@example.com"))
        #expect(throws: BuriError.self) { try notes.store(Note("n3", email: "x@example.com")) }
        #expect(try notes.keys(.index("email", equals: "x@example.com")) == ["n2"])
        try waitForPurges(t.db)
        #expect(throws: BuriError.self) { try notes.store(Note("n4", email: "x@example.com")) }
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func theBackgroundPurgeLeavesNoKeyUnderTheOldIdAndTouchesNothingElse(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let a = try t.db.bucket(PersonRecord.self)
        let others = try t.db.bucket(PersonRecord.self, named: "Others")
        for chunk in stride(from: 0, to: 2_500, by: 500) { try a.store(Array(makePeople(2_500)[chunk..<chunk + 500])) }
        try others.store(makePeople(50))
        let oldId = a.raw.descriptor.id
        #expect(try a.deleteAll() == 2_500)
        try waitForPurges(t.db)
        #expect(try keys(under: oldId, t).isEmpty)
        #expect(try others.count() == 50)
        #expect(try others.keys(.index("locale", equals: "L0")).count == 17)
        let report = try t.db.check()
        #expect(report.isConsistent)
        #expect(report.pendingPurges.isEmpty)
        #expect(report.objects == 50)
    }

    @Test(arguments: Engine.allCases) func aPendingPurgeIsInformationForCheckAndRepairKeepsItsKeys(
        engine: Engine
    ) throws {
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let a = try t.db.bucket(PersonRecord.self)
        try a.store(makePeople(120))
        let oldId = a.raw.descriptor.id
        let before = try keys(under: oldId, t)
        #expect(before.count == 360)  // a record and two entries each
        #expect(try a.deleteAll() == 120)
        #expect(try t.db.pendingPurges() == [RetiredBucket(id: oldId, bucket: "Person", state: .purging)])

        let report = try t.db.check(repair: true)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.pendingPurges.map(\.id) == [oldId])
        #expect(report.objects == 0)
        #expect(try keys(under: oldId, t) == before)

        // A new bucket never takes a retired id, even once it is the largest free one.
        let c = try t.db.createBucket(named: "C")
        #expect(c.descriptor.id != oldId)
        #expect(c.descriptor.id > a.raw.descriptor.id)

        // Reopening keeps it pending; purging it on demand empties it.
        try t.reopen()
        #expect(try t.db.pendingPurges().map(\.id) == [oldId])
        try t.db.purgeRetiredBuckets()
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try keys(under: oldId, t).isEmpty)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func reopeningResumesAPendingPurge(engine: Engine) throws {
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let a = try t.db.bucket(PersonRecord.self)
        try a.store(makePeople(400))
        let oldId = a.raw.descriptor.id
        #expect(try a.deleteAll() == 400)
        try a.store(PersonRecord(objectId: "kept", name: "k", locale: "EN", age: 1))
        t.db.close()
        let db =
            engine == .leveldb
            ? try BuriDatabase(path: t.path)
            : try BuriDatabase(engine: t.db.engine, options: BuriOptions(), closesEngine: false)
        defer { db.close() }
        try waitForPurges(db)
        #expect(
            try scanKeys(db.engine.snapshot()).filter {
                $0.starts(with: Keyspace.recordPrefix(bucket: oldId))
                    || $0.starts(with: Keyspace.indexSpacePrefix(bucket: oldId))
            }.isEmpty)
        #expect(try db.bucket(PersonRecord.self).keys() == ["kept"])
        #expect(try db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func insideATransactionDeleteAllDeletesEachKeyAndTheTransactionSeesIt(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let a = try t.db.bucket(PersonRecord.self)
        try a.store(makePeople(40))
        let id = a.raw.descriptor.id
        let count = try t.db.write { tx in
            let people = try tx.bucket(PersonRecord.self)
            let removed = try people.deleteAll()
            #expect(try people.count() == 0)
            try people.store(PersonRecord(objectId: "t", name: "t", locale: "EN", age: 3))
            #expect(try people.keys() == ["t"])
            return removed
        }
        #expect(count == 40)
        #expect(a.raw.descriptor.id == id)
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try a.keys() == ["t"])
        #expect(try keys(under: id, t).count == 3)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: [Engine.shared, .etcd].filter(Engine.allCases.contains))
    func anotherClientsHandleWritesIntoTheNewGeneration(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let mine = try t.db.bucket(PersonRecord.self)
        try mine.store(makePeople(30))
        let other = try t.client(1)
        defer { if other !== t.db { other.close() } }
        let theirs = try other.bucket(PersonRecord.self)
        #expect(try theirs.count() == 30)
        #expect(try mine.deleteAll() == 30)
        // Their next write reads the catalog as a condition and follows the switch.
        try theirs.store(PersonRecord(objectId: "late", name: "l", locale: "EN", age: 1))
        #expect(try mine.keys() == ["late"])
        #expect(try theirs.keys() == ["late"])
        try waitForPurges(t.db)
        #expect(try t.db.check().isConsistent)
    }

    /// A dropped bucket's id, once purged, leaves no key under it: another client that did not see
    /// the drop must still not give the id to a new bucket, or this client's handles (which know
    /// the id as dropped) would refuse the new bucket, and stale handles elsewhere would read it as
    /// the old one. Every way of making a bucket or a generation records the largest id given.
    @Test(arguments: [Engine.shared, .etcd].filter(Engine.allCases.contains))
    func anIdFreedByAPurgeIsNeverGivenAgainByAnotherClient(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let other = try t.client(1)
        defer { if other !== t.db { other.close() } }
        for step in 0..<4 {
            let mine = try t.db.bucket(PersonRecord.self)
            try mine.store(makePeople(5))
            let stored = try mine.count()
            let used = mine.raw.descriptor.id
            // The drop, then the purge of its keys, here; the other client learns nothing of either.
            switch step {
            case 0: try t.db.dropBucket(named: mine.raw.name)
            case 1: #expect(try mine.deleteAll() == stored)
            case 2: try t.db.write { tx in _ = try tx.bucket(PersonRecord.self).deleteAll() }
            default:
                let load = try t.db.stageImport(into: mine.raw.name)
                try load.publish()
            }
            try t.db.purgeRetiredBuckets()
            #expect(try t.db.pendingPurges().isEmpty)
            // The other client makes buckets: none takes an id given before.
            try other.dropBucket(named: mine.raw.name)
            let theirs = try other.bucket(PersonRecord.self)
            #expect(theirs.raw.descriptor.id > used, "step \(step)")
            try theirs.store(PersonRecord(objectId: "new\(step)", name: "n", locale: "EN", age: 1))
            let again = try t.db.bucket(PersonRecord.self)
            #expect(try again.keys() == ["new\(step)"], "step \(step)")
            let fromTransaction = try other.write { tx in try tx.bucket(Account.self).raw.descriptor.id }
            #expect(fromTransaction > theirs.raw.descriptor.id)
            try other.dropBucket(named: "Account")
            try other.purgeRetiredBuckets()
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test func theLargestBucketIdIsCheckedAndRepaired() throws {
        let engine = MemoryEngine()
        let db = try BuriDatabase(engine: engine, closesEngine: false)
        defer { db.close() }
        let bucket = try db.bucket(PersonRecord.self)
        try bucket.store(makePeople(3))
        #expect(try engine.snapshot().get(Keyspace.bucketIdsKey) == Keyspace.bucketIdsValue(bucket.raw.descriptor.id))
        #expect(try db.check().isConsistent)
        for damaged: [UInt8] in [[1, 2, 3], [0, 0, 0, 0, 1]] {
            let batch = engine.makeBatch()
            batch.put(Keyspace.bucketIdsKey, damaged)
            try engine.commit(batch, conditions: nil, sync: true)
            let report = try db.check()
            #expect(report.problems.map(\.kind) == [.strayKey])
            #expect(report.problems.first?.detail.contains("bucket-ids") == true)
            _ = try db.check(repair: true)
            #expect(
                try engine.snapshot().get(Keyspace.bucketIdsKey) == Keyspace.bucketIdsValue(bucket.raw.descriptor.id))
            #expect(try db.check().isConsistent)
        }
    }

    @Test func aVersion2DatabaseIsUpgradedByItsFirstWriteAndANewerOneRefused() throws {
        let engine = MemoryEngine()
        do {
            let db = try BuriDatabase(engine: engine, closesEngine: false)
            try db.bucket(PersonRecord.self).store(makePeople(3))
            db.close()
        }
        let batch = engine.makeBatch()
        batch.put(Keyspace.headerKey, Keyspace.headerValue(version: 2))
        try engine.commit(batch, conditions: nil, sync: true)
        let db = try BuriDatabase(engine: engine, closesEngine: false)
        #expect(db.formatVersion == 2)
        let bucket = try db.bucket(PersonRecord.self)
        #expect(try bucket.count() == 3)
        #expect(try bucket.deleteAll() == 3)
        #expect(db.formatVersion == Int(Keyspace.formatVersion))
        #expect(try engine.snapshot().get(Keyspace.headerKey) == Keyspace.headerValue())
        db.close()

        let newer = engine.makeBatch()
        newer.put(Keyspace.headerKey, Keyspace.headerValue(version: Keyspace.formatVersion + 1))
        try engine.commit(newer, conditions: nil, sync: true)
        #expect {
            _ = try BuriDatabase(engine: engine, closesEngine: false)
        } throws: { error in
            guard
                case BuriError.unsupportedFormat(
                    _, found: Int(Keyspace.formatVersion) + 1, supported: Int(Keyspace.formatVersion)) = error
            else {
                return false
            }
            return true
        }
    }

    @Test func aMarkerThatDoesNotParseIsAProblemCheckReportsAndNeverRepairs() throws {
        let t = try TestDatabase(.memory)
        let batch = t.db.engine.makeBatch()
        batch.put(Keyspace.retiredKey(bucket: 9), [0x7F] + Array("x".utf8))
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        let report = try t.db.check(repair: true)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.kind == .strayKey)
        #expect(report.problems.first?.repaired == false)
        #expect(try t.db.engine.snapshot().get(Keyspace.retiredKey(bucket: 9)) != nil)
        #expect(throws: BuriError.self) { try t.db.pendingPurges() }
    }
}

@Suite("Bucket generations: what observers see")
struct GenerationObservationTests {
    @Test(arguments: Engine.allCases) func changeStreamsReportADeleteAllAndFollowTheNewGeneration(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store(makePeople(3))
        let stream = try people.changes()
        let everything = try t.db.changes()
        #expect(try await people.deleteAll() == 3)
        try await people.store(PersonRecord(objectId: "after", name: "a", locale: "EN", age: 1))
        let seen = try await within(90, "two bucket changes") {
            var seen: [BucketChange<PersonRecord>] = []
            for try await change in stream {
                seen.append(change)
                if seen.count == 2 { break }
            }
            return seen
        }
        #expect(seen.map(\.deletedAll) == [true, false])
        #expect(seen.first?.changes.isEmpty == true)
        #expect(seen.last?.storedKeys == ["after"])
        let commits = try await within(90, "two database changes") {
            var seen: [DatabaseChange] = []
            for try await change in everything {
                seen.append(change)
                if seen.count == 2 { break }
            }
            return seen
        }
        #expect(commits.first?.buckets.map(\.bucket) == ["Person"])
        #expect(commits.first?.buckets.first?.deletedAll == true)
        #expect(commits.last?.buckets.first?.storedKeys == ["after"])
    }

    @Test(arguments: Engine.allCases) func liveQueriesShowTheEmptyBucketThenItsNewObjects(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store(
            makePeople(3).map {
                var p = $0; p.locale = "EN"; return p
            })
        let counts = Shared<[Int]>([])
        let keys = Shared<[[String]]>([])
        let liveCount = try people.observeCount(.index("locale", equals: "EN"))
        let liveKeys = try people.observeKeys()
        let c = Task { for try await n in liveCount { counts.update { $0.append(n) } } }
        let k = Task { for try await n in liveKeys { keys.update { $0.append(n) } } }
        try await eventually("the first results") { counts.current.last == 3 && keys.current.last?.count == 3 }
        #expect(try await people.deleteAll() == 3)
        try await eventually("the empty results") { counts.current.last == 0 && keys.current.last == [] }
        try await people.store(PersonRecord(objectId: "x", name: "x", locale: "EN", age: 1))
        try await eventually("the new generation's object") { counts.current.last == 1 && keys.current.last == ["x"] }
        c.cancel()
        k.cancel()
        _ = await c.result
        _ = await k.result
    }
}
