import BuriCodec
import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Testing
@testable import Buri

/// Issue 22 item 15: a staged import on an engine with transaction limits (etcd's `--max-txn-ops`)
/// must not need a commit that grows with the chunk or with the bucket.
@Suite("Staged imports fit an etcd cluster's transaction limits")
struct StagedImportLimitTests {
    /// A fresh database on the tests' cluster whose engine allows `maxTxnOps` operations per commit.
    static func engine(maxTxnOps: Int) throws -> EtcdEngine {
        let location = try EtcdLocation(try EtcdTestCluster.location("stagelimits"))
        return try EtcdEngine(
            endpoints: location.endpoints, name: location.name,
            limits: EtcdLimits(maxTxnOps: maxTxnOps, maxRequestBytes: location.limits.maxRequestBytes))
    }

    static func person(_ key: String, age: Int) -> RawObject {
        let payload: CBORValue = [
            "objectId": .text(key), "name": .text("n"), "locale": .text("EN"), "age": .int(Int64(age)),
        ]
        return RawObject(
            key: key, payload: payload.encoded(),
            indexValues: ["locale": [[IndexValue("EN")]], "age": [[IndexValue(age)]]])
    }

    @Test func chunksAndCopiesOverTheLimitAreStagedInSmallerCommitsAndPublishedAtOnce() throws {
        let engine = try Self.engine(maxTxnOps: 40)
        defer { try? engine.deleteAll() }
        let db = try BuriDatabase(engine: engine)
        defer { db.close() }
        let people = try db.bucket(PersonRecord.self)
        // Storing 200 objects directly is one commit (600 writes): refused whole, nothing written.
        #expect(throws: BuriError.self) {
            try people.store((0..<200).map { PersonRecord(objectId: "d\($0)", name: "n", locale: "EN", age: $0) })
        }
        #expect(try people.count() == 0)

        // The same 200 as one chunk of a staged import: stored in commits that fit, published at once.
        let first = try db.stageImport(into: "Person")
        try first.store((0..<200).map { Self.person(String(format: "p%03d", $0), age: $0) })
        #expect(try people.count() == 0)
        #expect(try first.publish() == 200)
        #expect(try people.count() == 200)

        // One more object into the 200-object bucket: the copy (chunks of 1,000 records asked for,
        // 3 writes each) and the publication fit too.
        let second = try db.stageImport(into: "Person", chunkSize: 1_000)
        try second.store([Self.person("new", age: 7)])
        #expect(try second.publish() == 201)
        #expect(try people.count() == 201)
        #expect(try people.keys(.index("age", equals: 7)).sorted() == ["new", "p007"])
        let report = try db.check()
        #expect(report.isConsistent && report.objects == 201 && report.indexEntries == 402, "\(report.problems)")
    }

    @Test func anObjectDeletedWhileAnImportIsStagedMakesThePublicationAConflict() throws {
        let engine = try Self.engine(maxTxnOps: 4096)
        defer { try? engine.deleteAll() }
        let db = try BuriDatabase(engine: engine)
        defer { db.close() }
        let people = try db.bucket(PersonRecord.self)
        try people.store((0..<5).map { PersonRecord(objectId: "p\($0)", name: "n", locale: "EN", age: $0) })
        let load = try db.stageImport(into: "Person")
        try load.store([Self.person("q", age: 9)])
        // Another client deletes an object the stage copied: publishing would bring it back.
        let other = try BuriDatabase(
            engine: EtcdEngine(endpoints: engine.client.endpoints, name: engine.name, limits: engine.limits))
        defer { other.close() }
        try other.bucket(PersonRecord.self).delete(key: "p3")
        #expect(throws: BuriError.self) { try load.publish() }
        #expect(try people.count() == 4)
        #expect(try people.object(forKey: "p3") == nil)
        #expect(try people.object(forKey: "q") == nil)
    }
}
