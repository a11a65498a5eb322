import BuriStorage
import Foundation
import Testing
@testable import Buri

private func people(_ n: Int, prefix: String) -> [PersonRecord] {
    (0..<n).map { PersonRecord(objectId: "\(prefix)\($0)", name: "\(prefix)-name\($0)", locale: "L\($0 % 2)", age: $0) }
}

/// Keys (records and index entries) under bucket id `id`.
private func keys(under id: UInt32, _ db: BuriDatabase) throws -> [[UInt8]] {
    try scanKeys(db.engine.snapshot()).filter {
        $0.starts(with: Keyspace.recordPrefix(bucket: id)) || $0.starts(with: Keyspace.indexSpacePrefix(bucket: id))
    }
}

@Suite("dropBucket in O(1): the catalog entry goes, the keys are purged in the background")
struct DropBucketGenerationTests {
    @Test(arguments: Engine.allCases)
    func dropCommitsTwoKeysAndThePurgeRemovesTheRest(engine: Engine) throws {
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let doomed = try t.db.bucket(PersonRecord.self)
        let kept = try t.db.bucket(PersonRecord.self, named: "Kept")
        try doomed.store(people(500, prefix: "d"))
        try kept.store(people(7, prefix: "k"))
        let id = doomed.raw.descriptor.id
        #expect(try keys(under: id, t.db).count == 1_500)
        let before = try scanEntries(t.db.engine.snapshot())

        try t.db.dropBucket(named: "Person")
        // The drop itself changed two keys (the catalog entry and the marker), whatever the size.
        let after = try scanEntries(t.db.engine.snapshot())
        #expect(Set(before).symmetricDifference(Set(after)).count <= 4)
        #expect(try keys(under: id, t.db).count == 1_500)
        #expect(try t.db.bucketNames() == ["Kept"])
        #expect(try t.db.pendingPurges() == [RetiredBucket(id: id, bucket: "Person", state: .purging)])
        // Handles made before the drop refuse to read the retired id (its keys are all still there).
        #expect(throws: BuriError.self) { try doomed.count() }
        #expect(throws: BuriError.self) { try doomed.object(forKey: "d1") }
        #expect(throws: BuriError.self) { try doomed.raw.keys(withPrefix: "d") }
        #expect(throws: BuriError.self) { try doomed.store(PersonRecord(objectId: "x", name: "", locale: "", age: 0)) }

        // check: information, not a problem; repair keeps every key.
        let report = try t.db.check(repair: true)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.pendingPurges.map(\.id) == [id])
        #expect(report.objects == 7)
        #expect(try keys(under: id, t.db).count == 1_500)

        // A bucket of the same name made now starts empty under a new id, never the retired one.
        let reborn = try t.db.bucket(PersonRecord.self)
        #expect(reborn.raw.descriptor.id != id)
        #expect(try reborn.count() == 0)
        #expect(try reborn.object(forKey: "d1") == nil)
        try reborn.store(PersonRecord(objectId: "d1", name: "new", locale: "EN", age: 1))

        try t.db.purgeRetiredBuckets()
        #expect(try keys(under: id, t.db).isEmpty)
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try reborn.keys() == ["d1"])
        #expect(try kept.count() == 7)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases)
    func aDropIsPurgedInTheBackgroundAndResumedAfterReopening(engine: Engine) throws {
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let doomed = try t.db.bucket(PersonRecord.self)
        try doomed.store(people(300, prefix: "d"))
        let id = doomed.raw.descriptor.id
        try t.db.dropBucket(named: "Person")
        t.db.close()
        let db =
            engine == .leveldb
            ? try BuriDatabase(path: t.path)
            : try BuriDatabase(engine: t.db.engine, options: BuriOptions(), closesEngine: false)
        defer { db.close() }
        let deadline = Date().addingTimeInterval(120)
        while try !db.pendingPurges().isEmpty {
            if Date() > deadline { Issue.record("the purge did not finish: \(try db.pendingPurges())"); return }
            usleep(2_000)
        }
        #expect(try keys(under: id, db).isEmpty)
        #expect(try db.bucketNames().isEmpty)
        #expect(try db.check().isConsistent)
    }
}
