import Testing
import BuriEtcd
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

/// `check` on an engine where each read is a round trip reads the entries records list, and the
/// headers of the records entries name, in batches: a bounded number of requests, and the same
/// report as a local engine, damage in the middle of a batch included.
@Suite("check: batched reads on etcd")
struct BatchedCheckTests {
    /// 1,000 people, then behind Buri's back: one entry deleted (missing), one entry added for a
    /// value its object does not have (stale), one for an object that does not exist (dangling),
    /// each in the middle of the records and of the index.
    static func damaged(_ t: TestDatabase) throws -> (report: ConsistencyReport, clean: ConsistencyReport) {
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(
            (0..<1_000).map {
                PersonRecord(
                    objectId: String(format: "p%04d", $0), name: "n\($0)", locale: $0 % 2 == 0 ? "EN" : "NL",
                    age: $0 % 90)
            })
        let clean = try t.db.check()
        let raw = people.raw
        let locale = try #require(raw.descriptor.index(named: "locale"))
        let age = try #require(raw.descriptor.index(named: "age"))
        let batch = t.db.engine.makeBatch()
        func entry(_ index: UInt32, _ value: IndexValue, _ key: String) -> [UInt8] {
            Keyspace.indexEntryKey(bucket: raw.descriptor.id, index: index, tuple: value.encoded, objectKey: key)
        }
        batch.delete(entry(locale.id, "EN", "p0500"))
        batch.put(entry(age.id, 89, "p0301"), [])
        batch.put(entry(locale.id, "DE", "p0700x"), [])
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        return (try t.db.check(), clean)
    }

    @Test(arguments: [Engine.etcd].filter(Engine.allCases.contains))
    func aBoundedNumberOfRequestsAndTheSameReportAsLevelDB(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let etcd = try #require(t.db.engine as? EtcdEngine)
        let before = etcd.client.requestCount
        let (report, clean) = try Self.damaged(t)
        #expect(clean.isConsistent && clean.objects == 1_000 && clean.indexEntries == 2_000)
        let local = try Self.damaged(try TestDatabase(.leveldb)).report
        func described(_ report: ConsistencyReport) -> [String] {
            report.problems.map { "\($0.kind) \($0.bucket ?? "") \($0.key ?? "") \($0.index ?? "") \($0.detail)" }
        }
        #expect(described(report) == described(local))
        #expect(
            Set(report.problems.map(\.kind)) == [.missingEntry, .staleEntry, .danglingEntry], "\(described(report))")
        #expect(report.objects == 1_000 && report.indexEntries == 2_001)
        // Before batching, each check read every entry and every header on its own: over 3,000
        // requests each. Now a few dozen for both checks and the stores together.
        let requests = etcd.client.requestCount - before
        #expect(requests < 150, "\(requests) requests")
    }
}
