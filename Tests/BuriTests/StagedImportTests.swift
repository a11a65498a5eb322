import BuriCodec
import BuriStorage
import Foundation
import Testing
@testable import Buri

/// A raw `PersonRecord`-shaped object for the `Person` bucket.
private func rawPerson(_ key: String, name: String, locale: String = "EN", age: Int = 1) throws -> RawObject {
    let payload: CBORValue = [
        "objectId": .text(key), "name": .text(name), "locale": .text(locale), "age": .int(Int64(age)),
    ]
    return RawObject(
        key: key, payload: payload.encoded(),
        indexValues: ["locale": [[IndexValue(locale)]], "age": [[IndexValue(age)]]])
}

private func rawNote(_ key: String, email: String) throws -> RawObject {
    let note = Note(key, email: email)
    return RawObject(
        key: key, payload: try CBOREncoder().encode(note),
        indexValues: [
            "email": [[IndexValue(email)]], "locale": [[IndexValue(note.locale)]], "age": [[IndexValue(note.age)]],
            "locale_age": [[IndexValue(note.locale), IndexValue(note.age)]],
        ])
}

private func settle(_ db: BuriDatabase) throws {
    let deadline = Date().addingTimeInterval(120)
    while try !db.pendingPurges().isEmpty {
        if Date() > deadline { throw StressLikeError("purges still pending: \(try db.pendingPurges())") }
        usleep(2_000)
    }
}

@Suite("Staged atomic imports")
struct StagedImportTests {
    @Test(arguments: Engine.allCases) func aStagedImportMergesIntoTheBucketAndAppearsAllAtOnce(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store((0..<10).map { PersonRecord(objectId: "p\($0)", name: "old", locale: "FR", age: $0) })
        let oldId = people.raw.descriptor.id
        var copied: [Int] = []
        let load = try t.db.stageImport(into: "Person", chunkSize: 4) { copied.append($0) }
        #expect(copied == [4, 8, 10])
        #expect(try load.stagedCount() == 10)
        try load.store([try rawPerson("p1", name: "new", locale: "EN", age: 50)])
        for chunk in 0..<5 {
            try load.store(try (0..<20).map { try rawPerson("q\(chunk)-\($0)", name: "q", locale: "EN", age: 40) })
        }
        // Nothing is visible before publishing.
        #expect(try people.count() == 10)
        #expect(try people.object(forKey: "p1")?.name == "old")
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
        #expect(try t.db.check().isConsistent)

        #expect(try load.publish() == 110)
        #expect(try people.count() == 110)
        #expect(try people.object(forKey: "p1")?.name == "new")
        #expect(try people.object(forKey: "p2")?.name == "old")
        #expect(try people.keys(.index("locale", equals: "EN")).count == 101)
        #expect(try people.keys(.index("locale", equals: "FR")).count == 9)
        #expect(try people.keys(.index("age", equals: 50)) == ["p1"])
        #expect(people.raw.descriptor.id == load.stageId)
        #expect(throws: BuriError.self) { try load.store([]) }
        try settle(t.db)
        #expect(
            try t.rawKeys().filter {
                $0.starts(with: Keyspace.recordPrefix(bucket: oldId))
                    || $0.starts(with: Keyspace.indexSpacePrefix(bucket: oldId))
            }.isEmpty)
        let report = try t.db.check()
        #expect(report.isConsistent && report.objects == 110 && report.pendingPurges.isEmpty)
    }

    @Test(arguments: Engine.allCases) func uniqueIndexesAreCheckedAcrossTheWholeImport(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Note("n1", email: "a@x"))
        let load = try t.db.stageImport(into: "Note")
        try load.store([try rawNote("n2", email: "b@x")])
        // an earlier chunk holds it
        #expect(throws: BuriError.self) { try load.store([try rawNote("n3", email: "b@x")]) }
        // the copied object holds it
        #expect(throws: BuriError.self) { try load.store([try rawNote("n4", email: "a@x")]) }
        #expect(throws: BuriError.self) {
            try load.store([try rawNote("n5", email: "c@x"), try rawNote("n6", email: "c@x")])
        }
        // n1 releases it in the same chunk
        try load.store([try rawNote("n1", email: "d@x"), try rawNote("n7", email: "a@x")])
        try load.publish()
        #expect(try notes.keys() == ["n1", "n2", "n7"])
        #expect(try notes.keys(.index("email", equals: "a@x")) == ["n7"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aBucketWrittenDuringStagingMakesPublishAConflictAndTheStageIsPurged(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(PersonRecord(objectId: "p0", name: "old", locale: "FR", age: 1))
        let load = try t.db.stageImport(into: "Person")
        try load.store([try rawPerson("s1", name: "staged")])
        try people.store(PersonRecord(objectId: "direct", name: "d", locale: "FR", age: 2))
        #expect {
            try load.publish()
        } throws: { error in
            guard case BuriError.conflict = error else { return false }
            return true
        }
        #expect(try people.keys() == ["direct", "p0"])
        try settle(t.db)
        #expect(try t.rawKeys().filter { $0.starts(with: Keyspace.recordPrefix(bucket: load.stageId)) }.isEmpty)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: [Engine.leveldb, .memory, .temporary].filter(Engine.allCases.contains))
    func aLoadThatNeverPublishesLeavesTheBucketAsItWasAndIsPurgedAtTheNextOpen(engine: Engine) throws {
        var still = BuriOptions()
        still.purgesInBackground = false
        let t = try TestDatabase(engine, options: still)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store((0..<30).map { PersonRecord(objectId: "p\($0)", name: "old", locale: "FR", age: $0) })
        let before = try t.rawKeys().filter { $0.first != Keyspace.retiredTag }
        let stageId: UInt32
        do {
            let load = try t.db.stageImport(into: "Person")
            try load.store(try (0..<50).map { try rawPerson("s\($0)", name: "staged") })
            stageId = load.stageId
        }
        // The process "ends" here: closed without publishing or abandoning.
        try t.reopen()
        #expect(try t.db.pendingPurges() == [RetiredBucket(id: stageId, bucket: "Person", state: .staging)])
        #expect(try t.db.check().isConsistent)
        #expect(try t.db.bucket(PersonRecord.self).count() == 30)
        try t.db.purgeRetiredBuckets()
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try t.rawKeys().filter { $0.first != Keyspace.retiredTag } == before)
    }

    // MARK: Staging a bucket that does not exist yet

    private static func definitions() -> [IndexDefinition] {
        var email = IndexDefinition(id: 0, name: "email", components: [.binary], unique: true)
        email.setFieldPaths([["email"]])
        var age = IndexDefinition(id: 0, name: "age", components: [.numeric])
        age.setFieldPaths([["age"]])
        return [email, age]
    }

    private static func mail(_ key: String, _ email: String, age: Int = 1) -> RawObject {
        let payload: CBORValue = ["id": .text(key), "email": .text(email), "age": .int(Int64(age))]
        return RawObject(
            key: key, payload: payload.encoded(),
            indexValues: ["email": [[IndexValue(email)]], "age": [[IndexValue(age)]]])
    }

    /// Keys of the database other than the header and the retired-id markers.
    private static func dataKeys(_ t: TestDatabase) throws -> [[UInt8]] {
        // Lease keys are the shared engine's live clients, not data.
        try t.rawKeys().filter { $0.first != Keyspace.retiredTag && !Keyspace.isLeaseKey($0) }
    }

    @Test(arguments: Engine.allCases) func stagingANewBucketChangesNoCatalogUntilPublishCreatesIt(engine: Engine) throws
    {
        let t = try TestDatabase(engine)
        _ = try t.db.bucket(PersonRecord.self)
        let catalogBefore = try t.db.allBucketInfo()
        let load = try t.db.stageImport(creating: "Mail", keyField: "id", indexes: Self.definitions(), schemaVersion: 7)
        #expect(load.createsBucket)
        for chunk in 0..<5 {
            try load.store((chunk * 500..<chunk * 500 + 500).map { Self.mail("m\($0)", "\($0)@x", age: $0 % 50) })
        }  // etcd: 4096 ops a commit
        try load.store([Self.mail("m1", "again@x", age: 99)])  // replaces m1, releasing "1@x"
        #expect(throws: BuriError.self) { try load.store([Self.mail("dup", "2@x")]) }  // unique across chunks
        // Nothing of it is visible: no bucket, the same catalog, a consistent database.
        #expect(try t.db.bucketInfo(named: "Mail") == nil)
        #expect(try t.db.allBucketInfo() == catalogBefore)
        #expect(throws: BuriError.self) { try t.db.rawBucket(named: "Mail") }
        #expect(try t.db.check().isConsistent)
        // On a shared engine the marker names its owner, this handle's lease.
        #expect(
            try t.db.pendingPurges() == [
                RetiredBucket(id: load.stageId, bucket: "Mail", state: .staging, owner: try t.db.stageOwner())
            ])
        #expect(try (t.db.stageOwner() != nil) == t.db.engine.isShared)

        var steps: [StagedImport.PublishProgress] = []
        #expect(try load.publish { steps.append($0) } == 2500)
        let info = try #require(try t.db.bucketInfo(named: "Mail"))
        #expect(info.id == load.stageId && info.keyField == "id" && info.schemaVersion == 7)
        #expect(
            info.indexes.map(\.name) == ["email", "age"] && info.indexes.map(\.id) == [1, 2] && info.nextIndexId == 3)
        #expect(info.index(named: "email")?.isUnique == true)
        let mail = try t.db.rawBucket(named: "Mail")
        #expect(try mail.count() == 2500)
        #expect(try mail.keys(.index("email", equals: IndexValue("again@x"))) == ["m1"])
        #expect(try mail.keys(.index("email", equals: IndexValue("1@x"))).isEmpty)
        #expect(try mail.keys(.index("age", equals: IndexValue(99))) == ["m1"])
        #expect(try t.db.pendingPurges().isEmpty)
        let report = try t.db.check()
        #expect(report.isConsistent && report.objects == 2500)
        // Counting reported from 0 to the end; a new bucket has nothing to verify.
        #expect(steps.first == StagedImport.PublishProgress(phase: .counting, done: 0, total: 2501))
        #expect(steps.contains(StagedImport.PublishProgress(phase: .counting, done: 2500, total: 2500)))
        #expect(steps.last == StagedImport.PublishProgress(phase: .verifying, done: 0, total: 0))
        #expect(throws: BuriError.self) { try load.store([]) }
        #expect(throws: BuriError.self) { try load.publish() }
    }

    @Test(arguments: Engine.allCases) func aBucketOfTheNameCreatedMeanwhileMakesPublishAConflictAndLeavesItAlone(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        // Names are bytes: an existing "é" (c3 a9) does not stop staging "e\u{301}" (65 cc 81).
        _ = try t.db.createBucket(named: "\u{E9}")
        let decomposed = try t.db.stageImport(creating: "e\u{301}", keyField: "id", indexes: Self.definitions())
        try decomposed.store([Self.mail("a", "a@x")])
        #expect(try decomposed.publish() == 1)
        #expect(try t.db.bucketNames().map { Array($0.utf8) } == [[0x65, 0xCC, 0x81], [0xC3, 0xA9]])
        // Staging a bucket that exists is refused at once.
        #expect { try t.db.stageImport(creating: "\u{E9}") } throws: { error in
            guard case BuriError.conflict = error else { return false }
            return true
        }
        let load = try t.db.stageImport(creating: "Mail", keyField: "id", indexes: Self.definitions())
        try load.store((0..<10).map { Self.mail("s\($0)", "\($0)@x") })
        let other = try t.db.createBucket(named: "Mail", keyField: "other")
        try other.store([RawObject(key: "direct", payload: CBORValue.text("d").encoded())], sync: true)
        #expect { try load.publish() } throws: { error in
            guard case BuriError.conflict(_, let detail) = error else { return false }
            return detail.contains("'Mail'") && detail.contains("nothing was imported")
        }
        #expect(try t.db.bucketInfo(named: "Mail")?.keyField == "other")
        #expect(try t.db.rawBucket(named: "Mail").keys(.all) == ["direct"])
        try settle(t.db)
        #expect(
            try t.rawKeys().filter {
                $0.starts(with: Keyspace.recordPrefix(bucket: load.stageId))
                    || $0.starts(with: Keyspace.indexSpacePrefix(bucket: load.stageId))
            }.isEmpty)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func anAbandonedNewBucketLeavesNothingBehind(engine: Engine) throws {
        let t = try TestDatabase(engine)
        _ = try t.db.bucket(PersonRecord.self)
        let before = try Self.dataKeys(t)
        let load = try t.db.stageImport(creating: "Mail", indexes: Self.definitions())
        for chunk in 0..<3 { try load.store((chunk * 500..<chunk * 500 + 500).map { Self.mail("s\($0)", "\($0)@x") }) }
        load.abandon()
        load.abandon()
        #expect(throws: BuriError.self) { try load.publish() }
        try settle(t.db)
        #expect(try t.db.bucketInfo(named: "Mail") == nil)
        #expect(try Self.dataKeys(t) == before)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: [Engine.leveldb, .memory, .temporary].filter(Engine.allCases.contains))
    func aNewBucketWhoseProcessEndsBeforePublishingDoesNotExistAfterReopening(engine: Engine) throws {
        var still = BuriOptions()
        still.purgesInBackground = false
        let t = try TestDatabase(engine, options: still)
        _ = try t.db.bucket(PersonRecord.self)
        let before = try t.rawKeys()
        let stageId: UInt32
        do {
            let load = try t.db.stageImport(creating: "Mail", keyField: "id", indexes: Self.definitions())
            for chunk in 0..<6 {
                try load.store((chunk * 500..<chunk * 500 + 500).map { Self.mail("s\($0)", "\($0)@x") })
            }
            stageId = load.stageId
        }
        // The process "ends" here: closed without publishing or abandoning.
        try t.reopen()
        #expect(try t.db.bucketInfo(named: "Mail") == nil)
        #expect(try t.db.bucketNames() == ["Person"])
        #expect(try t.db.pendingPurges() == [RetiredBucket(id: stageId, bucket: "Mail", state: .staging)])
        let report = try t.db.check()
        #expect(report.isConsistent && report.objects == 0)
        try t.db.purgeRetiredBuckets()
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try t.rawKeys() == before)
        // The name is free: a new stage of it publishes.
        let again = try t.db.stageImport(creating: "Mail", indexes: Self.definitions())
        try again.store([Self.mail("x", "x@x")])
        #expect(try again.publish() == 1)
    }

    @Test(arguments: Engine.allCases) func severalStagesPublishInOneCommitOrNotAtAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store((0..<20).map { PersonRecord(objectId: "p\($0)", name: "old", locale: "FR", age: $0) })
        // Two new buckets and an existing one, published together.
        let a = try t.db.stageImport(creating: "A", keyField: "id", indexes: Self.definitions())
        let b = try t.db.stageImport(creating: "B", keyField: "id", indexes: Self.definitions())
        let p = try t.db.stageImport(into: "Person")
        try a.store((0..<30).map { Self.mail("a\($0)", "\($0)@a") })
        try b.store([])
        try p.store([try rawPerson("p1", name: "new")])
        // a bucket twice: refused, both purged
        #expect(throws: BuriError.self) { try t.db.publish([a, t.db.stageImport(creating: "A")]) }
        #expect(throws: BuriError.self) { try a.store([]) }

        let a2 = try t.db.stageImport(creating: "A", keyField: "id", indexes: Self.definitions())
        try a2.store((0..<30).map { Self.mail("a\($0)", "\($0)@a") })
        var steps: [StagedImport.PublishProgress] = []
        #expect(try t.db.publish([a2, b, p]) { steps.append($0) } == [30, 0, 20])
        #expect(try t.db.bucketNames() == ["A", "B", "Person"])
        #expect(try t.db.rawBucket(named: "A").count() == 30)
        #expect(try t.db.rawBucket(named: "B").count() == 0)
        #expect(try people.object(forKey: "p1")?.name == "new")
        // Verifying walks the 20 objects Person was copied from.
        #expect(steps.contains(StagedImport.PublishProgress(phase: .verifying, done: 0, total: 20)))
        #expect(steps.last == StagedImport.PublishProgress(phase: .verifying, done: 20, total: 20))

        // One conflict (Person written meanwhile) and no bucket is published.
        let c = try t.db.stageImport(creating: "C", indexes: Self.definitions())
        let q = try t.db.stageImport(into: "Person")
        try c.store([Self.mail("c", "c@x")])
        try people.store(PersonRecord(objectId: "direct", name: "d", locale: "FR", age: 1))
        #expect { try t.db.publish([c, q]) } throws: { error in
            guard case BuriError.conflict = error else { return false }
            return true
        }
        #expect(try t.db.bucketInfo(named: "C") == nil)
        #expect(try people.count() == 21)
        try settle(t.db)
        #expect(try t.db.check().isConsistent)
    }
}
