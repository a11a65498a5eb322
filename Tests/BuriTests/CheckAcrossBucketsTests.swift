import Testing
@testable import Buri

/// Found by the randomized model test: `check` compared each unique index entry with the previous
/// unique entry of the same index id in any bucket, so two buckets of one type holding the same
/// unique value were reported as a conflict (when another index's entries lay in between).
@Suite("check: unique values are per bucket")
struct CheckAcrossBucketsTests {
    @Test("the same unique value in two buckets is no conflict", arguments: [Engine.leveldb, .memory])
    func sameUniqueValueInTwoBuckets(engine: Engine) throws {
        let t = try TestDatabase(engine)
        for name in ["\u{E9}", "e\u{301}", "Third"] {
            // The last value of each bucket's unique index is the first of the next bucket's.
            try t.db.bucket(Subscriber.self, named: name).store([Subscriber(id: "a", email: "x@y", age: 1)])
        }
        let report = try t.db.check()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.objects == 3)
        #expect(try t.db.bucket(Subscriber.self, named: "Third").keys(.index("email", equals: "x@y")) == ["a"])
    }

    @Test("a real conflict within one bucket is still reported")
    func aConflictInOneBucketIsReported() throws {
        let t = try TestDatabase(.memory)
        let bucket = try t.db.bucket(Subscriber.self)
        try bucket.store([Subscriber(id: "a", email: "x@y", age: 1), Subscriber(id: "b", email: "w@y", age: 2)])
        // Give b a second entry for x@y behind Buri's back: its header and the index entry.
        let raw = bucket.raw
        let email = try #require(raw.descriptor.index(named: "email"))
        let age = try #require(raw.descriptor.index(named: "age"))
        let header = RecordHeader(
            schemaVersion: 0,
            entries: [
                RecordHeader.Entry(index: age.id, tuple: IndexValue(2).encoded),
                RecordHeader.Entry(index: email.id, tuple: IndexValue("x@y").encoded),
            ])
        var value: [UInt8] = []
        header.append(to: &value)
        value.append(contentsOf: try CBOREncoder().encode(Subscriber(id: "b", email: "x@y", age: 2)))
        let batch = t.db.engine.makeBatch()
        batch.put(Keyspace.recordKey(bucket: raw.descriptor.id, key: "b"), value)
        batch.delete(
            Keyspace.indexEntryKey(
                bucket: raw.descriptor.id, index: email.id, tuple: IndexValue("w@y").encoded, objectKey: "b"))
        batch.put(
            Keyspace.indexEntryKey(
                bucket: raw.descriptor.id, index: email.id, tuple: IndexValue("x@y").encoded, objectKey: "b"), [])
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        let report = try t.db.check()
        #expect(report.problems.map(\.kind) == [.uniqueConflict])
    }
}
