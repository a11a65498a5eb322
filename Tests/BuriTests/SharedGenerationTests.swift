import BuriCodec
import BuriStorage
import Foundation
import Testing
@testable import Buri

/// Engines where several clients commit to one store, so that a handle can miss a switch.
private let sharedEngines = [Engine.shared, .etcd].filter(Engine.allCases.contains)

private func people(_ n: Int, prefix: String, locale: String = "L") -> [PersonRecord] {
    (0..<n).map {
        PersonRecord(objectId: "\(prefix)\($0)", name: "\(prefix)-name\($0)", locale: "\(locale)\($0 % 2)", age: $0)
    }
}

/// Keys (records and index entries) under bucket id `id`.
private func keys(under id: UInt32, _ db: BuriDatabase) throws -> [[UInt8]] {
    try scanKeys(db.engine.snapshot()).filter {
        $0.starts(with: Keyspace.recordPrefix(bucket: id)) || $0.starts(with: Keyspace.indexSpacePrefix(bucket: id))
    }
}

/// Everything client B's handles can read of the bucket, each through another read path.
private struct Seen: Equatable {
    var count: Int
    var allKeys: [String]
    var names: [String]
    var localeKeys: [String]
    var ageEntries: Int
    var youngest: IndexValue?
    var oldest: IndexValue?
    var prefixed: [String]
    var pagedKeys: [String]
    var countQuery: Int

    init(_ bucket: Bucket<PersonRecord>, _ raw: RawBucket, probe: [String]) throws {
        count = try bucket.count()
        allKeys = try bucket.keys()
        names =
            try probe.map { key in try bucket.object(forKey: key)?.name ?? "-" }
            + probe.map { key in try raw.record(forKey: key) == nil ? "absent" : "present" }
            + probe.map { key in try bucket.contains(key: key) ? "yes" : "no" }
        localeKeys = try bucket.keys(.index("locale", equals: "N1"))
        ageEntries = try raw.entryCount(index: "age")
        youngest = try bucket.min(index: "age")
        oldest = try bucket.max(index: "age")
        prefixed = try raw.keys(withPrefix: "")
        var walked: [String] = []
        var page = try bucket.keyPage(.all, size: 2)
        walked += page.items
        while let next = page.next {
            page = try bucket.keyPage(.all.after(next), size: 2)
            walked += page.items
        }
        pagedKeys = walked
        countQuery = try raw.count(.index("age", in: 0...1_000))
    }
}

@Suite("Bucket generations on shared engines: reads resolve the generation at their own snapshot")
struct SharedGenerationTests {
    @Test(arguments: sharedEngines)
    func anotherClientsHandleReadsExactlyTheNewGenerationDuringAndAfterThePurge(engine: Engine) throws {
        var options = BuriOptions()
        options.purgesInBackground = false  // the test purges chunk by chunk itself
        let t = try TestDatabase(engine, options: options)
        let mine = try t.db.bucket(PersonRecord.self)
        try mine.store(people(40, prefix: "old"))
        let other = try t.client(1)
        defer { other.close() }
        let theirs = try other.bucket(PersonRecord.self)
        let theirRaw = try other.rawBucket(named: "Person")
        let probe = ["old3", "new1", "old39", "new0"]
        #expect(try theirs.count() == 40)
        #expect(try theirs.object(forKey: "old3")?.name == "old-name3")
        let oldId = theirRaw.descriptor.id

        // A switches the generation and stores the new state; B observes nothing and writes nothing.
        #expect(try mine.deleteAll() == 40)
        try mine.store(people(3, prefix: "new", locale: "N"))
        let expected = try Seen(mine, try t.db.rawBucket(named: "Person"), probe: probe)
        #expect(expected.count == 3)
        #expect(expected.allKeys == ["new0", "new1", "new2"])
        #expect(expected.localeKeys == ["new1"])
        #expect(
            expected.names == [
                "-", "new-name1", "-", "new-name0", "absent", "present", "absent", "present", "no", "yes", "no", "yes",
            ])

        // Before any purge, during it (the old generation partly deleted) and after it, B's reads
        // show exactly A's new state: never the old generation, whole or in part.
        #expect(try Seen(theirs, theirRaw, probe: probe) == expected)
        t.db.purger.chunkSize.store(20, ordering: .relaxed)
        #expect(try !t.db.purgeChunk(bucket: oldId))
        let left = try keys(under: oldId, t.db).count
        #expect(left > 0 && left < 120)
        let freshHandle = try other.bucket(PersonRecord.self)
        #expect(try Seen(theirs, theirRaw, probe: probe) == expected)
        #expect(try Seen(freshHandle, try other.rawBucket(named: "Person"), probe: probe) == expected)
        try t.db.purgeRetiredBuckets()
        #expect(try keys(under: oldId, t.db).isEmpty)
        #expect(try Seen(theirs, theirRaw, probe: probe) == expected)
        #expect(theirRaw.descriptor.id != oldId)
        #expect(try other.check().isConsistent)
    }

    @Test(arguments: sharedEngines)
    func aPointReadStaysOneRequestAndFindsTheSwitchInIt(engine: Engine) throws {
        // The clients share one engine and its request counter: no background purge may read
        // through it while the test counts.
        var options = BuriOptions()
        options.purgesInBackground = false
        let t = try TestDatabase(engine, options: options)
        let mine = try t.db.bucket(PersonRecord.self)
        try mine.store(people(5, prefix: "p"))
        let other = try t.client(1)
        defer { other.close() }
        let theirs = try other.bucket(PersonRecord.self)
        #expect(try theirs.object(forKey: "p1")?.age == 1)
        guard let memory = other.engine as? MemoryEngine else { return }
        // The catalog entry travels in the same multi-key request as the record.
        var before = memory.readRequests
        #expect(try theirs.object(forKey: "p2")?.age == 2)
        #expect(memory.readRequests - before == 1)
        before = memory.readRequests
        #expect(try theirs.contains(key: "absent") == false)
        #expect(memory.readRequests - before == 1)
        // After a switch the record is read again under the new id (once), then one request again.
        #expect(try mine.deleteAll() == 5)
        try mine.store(PersonRecord(objectId: "p2", name: "again", locale: "EN", age: 22))
        before = memory.readRequests
        #expect(try theirs.object(forKey: "p2")?.age == 22)
        #expect(memory.readRequests - before == 2)
        before = memory.readRequests
        #expect(try theirs.object(forKey: "p2")?.age == 22)
        #expect(memory.readRequests - before == 1)
    }

    @Test(arguments: sharedEngines)
    func aContinuationTokenResumesAfterAnotherClientsDeleteAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let mine = try t.db.bucket(PersonRecord.self)
        try mine.store(people(10, prefix: "p"))
        let other = try t.client(1)
        defer { other.close() }
        let theirs = try other.bucket(PersonRecord.self)
        let first = try theirs.keyPage(.index("age", in: 0...100), size: 4)
        #expect(first.items == ["p0", "p1", "p2", "p3"])
        let token = try #require(first.next)
        #expect(try mine.deleteAll() == 10)
        // Emptied by the other client: the walk ends there, without an error.
        let empty = try theirs.keyPage(.index("age", in: 0...100).after(token), size: 4)
        #expect(empty.items.isEmpty && empty.next == nil)
        try mine.store(people(10, prefix: "p"))
        // A token is a position in the query's order: after the switch it resumes in the bucket's
        // current contents, like after any other write (its position is read in the new generation).
        var page = try theirs.keyPage(.index("age", in: 0...100).after(token), size: 4)
        var walked = page.items
        while let next = page.next {
            page = try theirs.keyPage(.index("age", in: 0...100).after(next), size: 4)
            walked += page.items
        }
        #expect(walked == (4..<10).map { "p\($0)" })
        // A token of another bucket is still refused.
        let others = try other.bucket(PersonRecord.self, named: "Others")
        try others.store(people(10, prefix: "p"))
        do {
            _ = try others.keyPage(.index("age", in: 0...100).after(token), size: 4)
            Issue.record("a token of another bucket was accepted")
        } catch {
            guard case .invalidContinuation(let bucket, _) = error else {
                Issue.record("expected invalidContinuation, got \(error)")
                return
            }
            #expect(bucket == "Others")
        }
    }

    @Test(arguments: sharedEngines)
    func readsThroughAHandleOfADroppedOrRedefinedBucketFailWithATypedError(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let mine = try t.db.bucket(PersonRecord.self)
        try mine.store(people(6, prefix: "p"))
        let other = try t.client(1)
        defer { other.close() }
        let theirs = try other.bucket(PersonRecord.self)
        #expect(try theirs.count() == 6)
        try t.db.dropBucket(named: "Person")
        for read in [
            { _ = try theirs.count() }, { _ = try theirs.object(forKey: "p1") }, { _ = try theirs.keys() },
            { _ = try theirs.keys(.index("locale", equals: "L1")) },
        ] as [() throws -> Void] {
            do {
                try read()
                Issue.record("a read of a dropped bucket returned a result")
            } catch let error as BuriError {
                guard case .invalidIndexDefinition(let name, _, let reason) = error else {
                    Issue.record("expected the redefined-or-dropped error, got \(error)"); continue
                }
                #expect(name == "Person")
                #expect(reason.contains("dropped"))
            }
        }
        // Recreated by A with other indexes: B's handle refuses to read it with its old definitions.
        let again = try t.db.createBucket(named: "Person", keyField: "objectId")
        try again.store([RawObject(key: "p1", payload: try CBORValue(json: #"{"objectId":"p1"}"#).encoded())])
        do {
            _ = try theirs.object(forKey: "p1")
            Issue.record("a read through a handle of a redefined bucket returned a result")
        } catch {
            guard case .invalidIndexDefinition(let bucket, _, let reason) = error else {
                Issue.record("expected invalidIndexDefinition, got \(error)"); return
            }
            #expect(bucket == "Person")
            #expect(reason.contains("open it again"))
        }
        #expect(try other.rawBucket(named: "Person").keys(.all) == ["p1"])
    }
}
