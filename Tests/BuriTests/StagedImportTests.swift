import BuriCodec
import BuriStorage
import Foundation
import Testing
@testable import Buri

/// A raw `PersonRecord`-shaped object for the `Person` bucket.
private func rawPerson(_ key: String, name: String, locale: String = "EN", age: Int = 1) throws -> RawObject {
    let payload: CBORValue = ["objectId": .text(key), "name": .text(name), "locale": .text(locale), "age": .int(Int64(age))]
    return RawObject(key: key, payload: payload.encoded(), indexValues: ["locale": [[IndexValue(locale)]], "age": [[IndexValue(age)]]])
}

private func rawNote(_ key: String, email: String) throws -> RawObject {
    let note = Note(key, email: email)
    return RawObject(key: key, payload: try CBOREncoder().encode(note), indexValues: [
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
        for chunk in 0..<5 { try load.store(try (0..<20).map { try rawPerson("q\(chunk)-\($0)", name: "q", locale: "EN", age: 40) }) }
        // Nothing is visible before publishing.
        #expect(try people.count() == 10)
        #expect(try people.object(forKey: "p1")?.name == "old")
        #expect(try people.keys(index: "locale", equalTo: "EN").isEmpty)
        #expect(try t.db.check().isConsistent)

        #expect(try load.publish() == 110)
        #expect(try people.count() == 110)
        #expect(try people.object(forKey: "p1")?.name == "new")
        #expect(try people.object(forKey: "p2")?.name == "old")
        #expect(try people.keys(index: "locale", equalTo: "EN").count == 101)
        #expect(try people.keys(index: "locale", equalTo: "FR").count == 9)
        #expect(try people.keys(index: "age", equalTo: 50) == ["p1"])
        #expect(people.raw.descriptor.id == load.stageId)
        #expect(throws: BuriError.self) { try load.store([]) }
        try settle(t.db)
        #expect(try t.rawKeys().filter { $0.starts(with: Keyspace.recordPrefix(bucket: oldId)) || $0.starts(with: Keyspace.indexSpacePrefix(bucket: oldId)) }.isEmpty)
        let report = try t.db.check()
        #expect(report.isConsistent && report.objects == 110 && report.pendingPurges.isEmpty)
    }

    @Test(arguments: Engine.allCases) func uniqueIndexesAreCheckedAcrossTheWholeImport(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Note("n1", email: "a@x"))
        let load = try t.db.stageImport(into: "Note")
        try load.store([try rawNote("n2", email: "b@x")])
        #expect(throws: BuriError.self) { try load.store([try rawNote("n3", email: "b@x")]) }   // an earlier chunk holds it
        #expect(throws: BuriError.self) { try load.store([try rawNote("n4", email: "a@x")]) }   // the copied object holds it
        #expect(throws: BuriError.self) { try load.store([try rawNote("n5", email: "c@x"), try rawNote("n6", email: "c@x")]) }
        try load.store([try rawNote("n1", email: "d@x"), try rawNote("n7", email: "a@x")])   // n1 releases it in the same chunk
        try load.publish()
        #expect(try notes.allKeys() == ["n1", "n2", "n7"])
        #expect(try notes.keys(index: "email", equalTo: "a@x") == ["n7"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aBucketWrittenDuringStagingMakesPublishAConflictAndTheStageIsPurged(engine: Engine) throws {
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
        #expect(try people.allKeys() == ["direct", "p0"])
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
}
