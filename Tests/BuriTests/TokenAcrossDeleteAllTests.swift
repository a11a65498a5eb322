import BuriStorage
import Foundation
import Testing
@testable import Buri

/// A continuation token resumes in the bucket's current contents after any write, `deleteAll`
/// included (which gives the bucket a new generation id): the next page holds the query's
/// current results after the token's position. A token of another bucket, or of a bucket dropped
/// since (a bucket made again under the same name is another bucket), is still refused.
@Suite("Continuation tokens across deleteAll")
struct TokenAcrossDeleteAllTests {
    func people(_ range: Range<Int>, prefix: String = "p") -> [PersonRecord] {
        range.map {
            PersonRecord(objectId: "\(prefix)\($0)", name: "n\($0)", locale: $0 % 2 == 0 ? "EN" : "DE", age: $0)
        }
    }

    func isInvalidContinuation(_ error: any Error) -> Bool {
        if case BuriError.invalidContinuation = error { return true }
        return false
    }

    @Test("a token resumes after deleteAll between pages, in what the bucket holds now", arguments: Engine.allCases)
    func resumesAfterDeleteAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(PersonRecord.self)
        try bucket.store(people(0..<10))
        let queries: [(Query, [String], [String])] = [
            // query, the first page, the page after deleteAll and a refill
            (.index("age", in: 0...100), ["p0", "p1", "p2", "p3"], ["p4", "p5", "p6", "p7"]),
            (.index("age", in: 0...100).descending(), ["p9", "p8", "p7", "p6"], ["p5", "p4", "p3", "p2"]),
            (.all, ["p0", "p1", "p2", "p3"], ["p4", "p5", "p6", "p7"]),
            (.index("locale", equals: "EN"), ["p0", "p2", "p4", "p6"], ["p8"]),
            (.index("locale", prefix: "E").and(.index("age", in: 3...)), ["p4", "p6", "p8"], []),
        ]
        for (query, first, resumed) in queries {
            let page = try bucket.keyPage(query, size: 4)
            #expect(page.items == Array(first.prefix(4)), "\(query)")
            guard let token = page.next else {
                #expect(first.count < 4)
                continue
            }
            #expect(try bucket.deleteAll() == 10)
            // Empty now: the walk ends, without an error.
            let empty = try bucket.keyPage(query.after(token), size: 4)
            #expect(empty.items.isEmpty && empty.next == nil, "\(query)")
            #expect(try bucket.keys(query.after(token)).isEmpty)
            // Objects stored since are found after the position, as after any other write.
            try bucket.store(people(0..<10))
            let next = try bucket.keyPage(query.after(token), size: 4)
            #expect(next.items == resumed, "\(query)")
            // The typed pages too.
            #expect(try bucket.page(query.after(token), size: 4).items.map(\.objectId) == resumed, "\(query)")
        }
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test("a walk goes on through a deleteAll made by another thread", arguments: [Engine.leveldb, .memory, .shared])
    func walkThroughAnotherThreadsDeleteAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(PersonRecord.self)
        try bucket.store(people(0..<20))
        let query = Query.index("age", in: 0...)
        var page = try bucket.keyPage(query, size: 5)
        var walked = page.items
        var pages = 1
        while let token = page.next {
            if pages == 2 {
                // Another thread empties the bucket and stores p100… (ages 100…) through its own handle.
                let db = try t.client(1)
                let done = DispatchSemaphore(value: 0)
                let failure = ErrorBox()
                Thread {
                    do {
                        let other = try db.bucket(PersonRecord.self)
                        _ = try other.deleteAll()
                        try other.store(self.people(100..<103))
                    } catch {
                        failure.error = error
                    }
                    done.signal()
                }.start()
                done.wait()
                #expect(failure.error == nil)
            }
            page = try bucket.keyPage(query.after(token), size: 5)
            walked += page.items
            pages += 1
        }
        #expect(walked == people(0..<10).map(\.objectId) + ["p100", "p101", "p102"])
    }

    @Test(
        "a token resumes after several deleteAlls, after a reopen, and inside a transaction",
        arguments: [Engine.leveldb, .memory, .temporary])
    func resumesAfterSeveralSwitchesAndReopen(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(PersonRecord.self).store(people(0..<10))
        let query = Query.index("age", in: 0...100)
        let token = try #require(try t.db.bucket(PersonRecord.self).keyPage(query, size: 3).next)
        for _ in 0..<3 {
            #expect(try t.db.bucket(PersonRecord.self).deleteAll() == 10)
            try t.db.bucket(PersonRecord.self).store(people(0..<10))
        }
        #expect(try t.db.bucket(PersonRecord.self).keyPage(query.after(token), size: 3).items == ["p3", "p4", "p5"])
        try t.db.purgeRetiredBuckets()
        try t.reopen()
        let bucket = try t.db.bucket(PersonRecord.self)
        #expect(try bucket.keyPage(query.after(token), size: 3).items == ["p3", "p4", "p5"])
        // A token issued after the switches resumes too, and one issued inside a transaction.
        let later = try #require(try bucket.keyPage(query, size: 8).next)
        #expect(try bucket.keys(query.after(later)) == ["p8", "p9"])
        try t.db.write { tx in
            let inside = try tx.bucket(PersonRecord.self)
            #expect(try inside.keyPage(query.after(token), size: 2).items == ["p3", "p4"])
            _ = try inside.deleteAll()
            try inside.store(people(5..<7))
            #expect(try inside.keys(query.after(token)) == ["p5", "p6"])
        }
        #expect(try bucket.keys(query.after(token)) == ["p5", "p6"])
        // The raw API as well.
        let raw = try t.db.rawBucket(named: "Person")
        #expect(try raw.page(query.after(token), size: 5).items.map(\.key) == ["p5", "p6"])
    }

    @Test(
        "a token of another bucket is refused, before and after either bucket's deleteAll",
        arguments: [Engine.leveldb, .memory, .shared])
    func anotherBucketsTokenIsRefused(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let mine = try t.db.bucket(PersonRecord.self)
        let other = try t.db.bucket(PersonRecord.self, named: "Other")
        try mine.store(people(0..<10))
        try other.store(people(0..<10))
        let query = Query.index("age", in: 0...100)
        let token = try #require(try mine.keyPage(query, size: 3).next)
        let theirs = try #require(try other.keyPage(query, size: 3).next)
        func expectRefused(_ bucket: Bucket<PersonRecord>, _ token: ContinuationToken, _ what: String) {
            do {
                _ = try bucket.keyPage(query.after(token), size: 3)
                Issue.record("\(what): a token of another bucket was accepted")
            } catch {
                #expect(isInvalidContinuation(error), "\(what): \(error)")
            }
        }
        expectRefused(other, token, "before")
        _ = try mine.deleteAll()
        try mine.store(people(0..<10))
        expectRefused(other, token, "after the issuing bucket's deleteAll")
        expectRefused(mine, theirs, "after the receiving bucket's deleteAll")
        _ = try other.deleteAll()
        try other.store(people(0..<10))
        expectRefused(other, token, "after both")
        expectRefused(mine, theirs, "after both, the other way")
        #expect(try mine.keys(query.after(token)) == people(3..<10).map(\.objectId))
        #expect(try other.keys(query.after(theirs)) == people(3..<10).map(\.objectId))
    }

    @Test(
        "a bucket dropped and made again refuses the old bucket's tokens",
        arguments: [Engine.leveldb, .memory, .shared])
    func droppedAndRecreatedRefuses(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(PersonRecord.self).store(people(0..<10))
        let query = Query.index("age", in: 0...100)
        let token = try #require(try t.db.bucket(PersonRecord.self).keyPage(query, size: 3).next)
        _ = try t.db.bucket(PersonRecord.self).deleteAll()
        try t.db.bucket(PersonRecord.self).store(people(0..<10))
        // A token issued by the bucket's second generation.
        let switched = try #require(try t.db.bucket(PersonRecord.self).keyPage(query, size: 3).next)
        try t.db.dropBucket(named: "Person")
        let again = try t.db.bucket(PersonRecord.self)
        try again.store(people(0..<10))
        for old in [token, switched] {
            do {
                _ = try again.keyPage(query.after(old), size: 3)
                Issue.record("a token of the dropped bucket was accepted")
            } catch {
                #expect(isInvalidContinuation(error), "\(error)")
                #expect("\(error)".contains("Person"))
            }
        }
        // Its own tokens work, across its own deleteAll.
        let fresh = try #require(try again.keyPage(query, size: 3).next)
        _ = try again.deleteAll()
        try again.store(people(0..<10))
        #expect(try again.keyPage(query.after(fresh), size: 3).items == ["p3", "p4", "p5"])
    }

    @Test("a token resumes after an import is published into the bucket")
    func resumesAfterAPublishedImport() throws {
        let t = try TestDatabase(.leveldb)
        let raw = try t.db.createBucket(
            named: "Items", keyField: "id",
            indexes: [IndexDefinition(id: 0, name: "n", components: [.numeric], fields: ["n"])])
        func object(_ n: Int) throws -> RawObject {
            RawObject(
                key: String(format: "k%02d", n), payload: try CBOREncoder().encode(["id": String(format: "k%02d", n)]),
                indexValues: ["n": [[IndexValue(n)]]])
        }
        try raw.store((0..<10).map(object))
        let query = Query.index("n", in: 0...)
        let token = try #require(try raw.keyPage(query, size: 4).next)
        let load = try t.db.stageImport(into: "Items")
        try load.store([object(20), object(21)])
        try load.publish()
        #expect(
            try raw.keyPage(query.after(token), size: 100).items == [
                "k04", "k05", "k06", "k07", "k08", "k09", "k20", "k21",
            ])
        #expect(
            try t.db.rawBucket(named: "Items").keys(query.after(token)) == [
                "k04", "k05", "k06", "k07", "k08", "k09", "k20", "k21",
            ])
    }

    @Test("a token from before lineage ids, naming the current generation's id, is still accepted")
    func aTokenNamingTheCurrentGenerationIsAccepted() throws {
        let t = try TestDatabase(.memory)
        let bucket = try t.db.bucket(PersonRecord.self)
        try bucket.store(people(0..<10))
        _ = try bucket.deleteAll()
        try bucket.store(people(0..<10))
        let token = try #require(try bucket.keyPage(.all, size: 2).next)
        let id = bucket.raw.descriptor.id
        #expect(token.bucket == bucket.raw.descriptor.lineageId)
        #expect(token.bucket != id)
        let asBefore = ContinuationToken(
            bucket: id, order: token.order, fingerprint: token.fingerprint, returned: token.returned,
            position: Keyspace.recordKey(bucket: id, key: "p1"))
        #expect(try bucket.keyPage(Query.all.after(asBefore), size: 2).items == ["p2", "p3"])
    }
}

extension TokenAcrossDeleteAllTests {
    @Test("the catalog keeps the lineage as its last member, originId, from the first switch on (FORMAT.md §5)")
    func theCatalogKeepsTheLineage() throws {
        let t = try TestDatabase(.memory)
        let bucket = try t.db.bucket(PersonRecord.self)
        try bucket.store(people(0..<3))
        let catalogKey = Keyspace.catalogKey(bucket: "Person")
        let before = try #require(try t.db.engine.snapshot().get(catalogKey))
        #expect(try BucketDescriptor.decode(before).originId == nil)
        _ = try bucket.deleteAll()
        _ = try bucket.deleteAll()  // empty: no switch
        try bucket.store(people(0..<3))
        _ = try bucket.deleteAll()
        let after = try #require(try t.db.engine.snapshot().get(catalogKey))
        let descriptor = try BucketDescriptor.decode(after)
        #expect(descriptor.id == 3)
        #expect(descriptor.originId == 1)
        #expect(descriptor.lineageId == 1)
        // The map gains one pair, "originId": 1, after "nextIndexId"; nothing else changes but the id.
        #expect(after[0] == before[0] + 1)
        #expect(Array(after.suffix(10)) == [0x68] + Array("originId".utf8) + [0x01])
        var unchanged = after
        unchanged.removeLast(10)
        unchanged[0] -= 1
        unchanged[4] = 1
        #expect(unchanged == before)
    }
}

/// An error carried out of a thread.
final class ErrorBox: @unchecked Sendable {
    var error: (any Error)?
}
