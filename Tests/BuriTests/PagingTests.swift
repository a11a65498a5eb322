import Foundation
@testable import Buri
import LevelDB
import Testing

/// The issue's example type: a binary and a numeric index.
struct PagedPair: BuriSupport, Equatable {
    var id: String
    var a: String
    var n: Int

    static let buri = BuriSchema<PagedPair>(
        key: \.id, indexes: [.binary("a", \.a), .numeric("n", \.n)], bucket: "Pairs")

    init(_ id: String, _ a: String, _ n: Int) {
        self.id = id
        self.a = a
        self.n = n
    }
}

/// Every key of a walk of key pages, following the tokens to the end.
private func walkKeys(_ bucket: Bucket<PagedPair>, _ query: Query, size: Int) throws -> [String] {
    var page = try bucket.keyPage(query, size: size)
    var keys = page.items
    var pages = 1
    while let next = page.next {
        page = try bucket.keyPage(query.after(next), size: size)
        keys += page.items
        pages += 1
        if pages > 10_000 { Issue.record("the walk does not end"); break }
    }
    return keys
}

private func isInvalidContinuation(_ error: any Error) -> Bool {
    if case BuriError.invalidContinuation = error { return true }
    return false
}

@Suite("Pages resume exactly; one query, one answer")
final class PagingTests {
    var t: TestDatabase!
    var pairs: Bucket<PagedPair>!

    func setUp(_ engine: Engine) throws {
        t = try TestDatabase(engine)
        pairs = try t.db.bucket(PagedPair.self)
    }

    @Test(arguments: Engine.allCases) func theIssueExampleResumesAfterWritesChangeWhichConditionIsSmaller(
        engine: Engine
    ) throws {
        try setUp(engine)
        try pairs.store([
            PagedPair("k1", "x", 1), PagedPair("k2", "x", 1), PagedPair("k3", "y", 1), PagedPair("k4", "y", 1),
        ])
        let q = Query.index("n", equals: 1).and(.index("a", equals: "x"))
        let p1 = try pairs.keyPage(q, size: 1)
        #expect(p1.items == ["k1"])
        try pairs.store([PagedPair("k5", "x", 2), PagedPair("k6", "x", 2), PagedPair("k7", "x", 2)])
        let p2 = try pairs.keyPage(q.after(p1.next), size: 1)
        #expect(p2.items == ["k2"])
        #expect(p2.next == nil)
        // The same walk descending, with the writes undone between pages.
        let down = q.descending()
        let d1 = try pairs.keyPage(down, size: 1)
        #expect(d1.items == ["k2"])
        try pairs.delete(keys: ["k5", "k6", "k7"])
        #expect(try pairs.keyPage(down.after(d1.next), size: 1).items == ["k1"])
    }

    @Test(arguments: Engine.allCases) func andResultsComeInTheFirstConditionsOrderWhateverTheDataShape(
        engine: Engine
    ) throws {
        try setUp(engine)
        // "a" is dense (every object), "n == 7" rare: the planner may collect the rare matches,
        // but the order is the first condition's: by a's value, then by key.
        var objects: [PagedPair] = []
        for i in 0..<2000 {
            objects.append(PagedPair(String(format: "k%04d", i), ["m", "b", "z", "a"][i % 4], i % 97 == 0 ? 7 : i % 5))
        }
        // etcd: in commits that fit its --max-txn-ops (each object is 3 writes).
        for start in stride(from: 0, to: objects.count, by: engine == .etcd ? 500 : objects.count) {
            try pairs.store(Array(objects[start..<min(objects.count, start + (engine == .etcd ? 500 : objects.count))]))
        }
        let rare = objects.filter { $0.n == 7 }
        #expect(rare.count == 21)
        let byA = rare.sorted { ($0.a, $0.id) < ($1.a, $1.id) }.map(\.id)
        let q = Query.index("a", prefix: "").and(.index("n", equals: 7))
        let snapshot = try t.db.engine.snapshot()
        #expect(
            try QueryPlan(q, bucket: pairs.raw, reader: snapshot).collectFrom != nil,
            "the test should exercise the collecting plan")
        #expect(try pairs.keys(q) == byA)
        #expect(try pairs.keys(q.descending()) == byA.reversed())
        #expect(try pairs.keys(q.offset(3).limit(4)) == Array(byA[3..<7]))
        #expect(try pairs.objects(q.limit(5)).map(\.id) == Array(byA.prefix(5)))
        #expect(try walkKeys(pairs, q, size: 4) == byA)
        #expect(try walkKeys(pairs, q.descending(), size: 3) == byA.reversed())
        // The conditions the other way round: n's order (all 7), then key.
        #expect(try pairs.keys(Query.index("n", equals: 7).and(.index("a", prefix: ""))) == rare.map(\.id))
        // When n is the dense one and a the rare one, the order is still n's.
        let fewB = Query.index("n", in: 0...7).and(.index("a", equals: "b"))
        let expected = objects.filter { $0.a == "b" }.sorted { ($0.n, $0.id) < ($1.n, $1.id) }.map(\.id)
        #expect(try pairs.keys(fewB.limit(50)) == Array(expected.prefix(50)))
    }

    @Test(arguments: Engine.allCases) func aWalkHonoursLimitOverAllPagesAndOffsetOnce(engine: Engine) throws {
        try setUp(engine)
        try pairs.store((0..<20).map { PagedPair(String(format: "k%02d", $0), "x", $0) })
        let q = Query.index("n", in: 0...)
        let all = (0..<20).map { String(format: "k%02d", $0) }
        // limit caps the page and the walk.
        let capped = try pairs.page(q.limit(2), size: 7)
        #expect(capped.items.map(\.id) == ["k00", "k01"])
        #expect(capped.next == nil)
        #expect(try walkKeys(pairs, q.limit(10), size: 4) == Array(all.prefix(10)))
        #expect(try walkKeys(pairs, q.limit(8), size: 4) == Array(all.prefix(8)))
        // offset is skipped once, by the first page.
        #expect(try walkKeys(pairs, q.offset(3), size: 2) == Array(all.dropFirst(3)))
        #expect(try walkKeys(pairs, q.offset(3).limit(5), size: 2) == Array(all[3..<8]))
        #expect(try walkKeys(pairs, q.offset(3).limit(5).descending(), size: 2) == Array(all.reversed()[3..<8]))
        // A limit reached exactly at a page's end leaves no token.
        let first = try pairs.keyPage(q.limit(6), size: 3)
        let second = try pairs.keyPage(q.limit(6).after(first.next), size: 3)
        #expect(second.items == ["k03", "k04", "k05"] && second.next == nil)
        // Limit and offset may change between pages: limit still counts the whole walk.
        #expect(try pairs.keyPage(q.limit(4).offset(9).after(first.next), size: 3).items == ["k03"])
    }

    @Test(arguments: Engine.allCases) func aPageSizeBelowOneIsAnError(engine: Engine) throws {
        try setUp(engine)
        let pairs = try #require(self.pairs)
        try pairs.store(PagedPair("k", "x", 1))
        for size in [0, -1, Int.min] {
            for attempt in 0..<2 {
                do {
                    if attempt == 0 {
                        _ = try pairs.page(.all, size: size)
                    } else {
                        _ = try pairs.keyPage(.all, size: size)
                    }
                    Issue.record("a page of size \(size) was returned")
                } catch let BuriError.invalidQuery(bucket, _, reason) {
                    #expect(bucket == "Pairs" && reason.contains("\(size)"))
                }
            }
        }
    }

    @Test(arguments: Engine.allCases) func pagesOfObjectsAndOfKeysAreTheSameWalk(engine: Engine) throws {
        try setUp(engine)
        try pairs.store((0..<30).map { PagedPair("k\($0)", ["x", "y"][$0 % 2], $0 % 7) })
        for q in [
            Query.all, .index("n", in: 1...5),
            Query.index("a", equals: "x").and(.index("n", in: 2...6)).descending().offset(1).limit(9),
        ] {
            var objects = try pairs.page(q, size: 4)
            var keys = try pairs.keyPage(q, size: 4)
            while true {
                #expect(objects.items.map(\.id) == keys.items)
                #expect(objects.next == keys.next)
                guard let next = objects.next else { break }
                objects = try pairs.page(q.after(next), size: 4)
                keys = try pairs.keyPage(q.after(next), size: 4)
            }
        }
    }

    @Test(arguments: Engine.allCases) func aMultiValuedObjectComesOncePerWalkAtItsFirstMatchingValue(
        engine: Engine
    ) throws {
        try setUp(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store([
            Note("n1", tags: ["a", "b", "c"]), Note("n2", tags: ["b"]), Note("n3", tags: ["c", "a"]),
            Note("n4", tags: ["d"]), Note("n5", tags: ["b", "c"]),
        ])
        let q = Query.index("tags", in: "a"..."c")
        // Ascending: at the smallest matching tag (n1, n3 at "a"; n2, n5 at "b").
        #expect(try notes.keys(q) == ["n1", "n3", "n2", "n5"])
        // Descending: at the largest (n1, n3, n5 at "c"; n2 at "b").
        #expect(try notes.keys(q.descending()) == ["n5", "n3", "n1", "n2"])
        for size in 1...4 {
            for query in [q, q.descending()] {
                var page = try notes.keyPage(query, size: size)
                var walked = page.items
                while let next = page.next {
                    page = try notes.keyPage(query.after(next), size: size)
                    walked += page.items
                }
                #expect(walked == (try notes.keys(query)), "size \(size)")
            }
        }
        // Resuming after "a"'s entries does not bring back objects returned there.
        let first = try notes.keyPage(q, size: 2)
        #expect(first.items == ["n1", "n3"])
        #expect(try notes.keyPage(q.after(first.next), size: 10).items == ["n2", "n5"])
        // The same with the collecting plan (a rare second condition).
        try notes.store((0..<30).map { Note("m\($0)", tags: ["b"], age: 1) })
        let combined = Query.index("tags", in: "a"..."c").and(.index("age", equals: 0))
        #expect(try QueryPlan(combined, bucket: notes.raw, reader: t.db.engine.snapshot()).collectFrom != nil)
        #expect(try notes.keyPage(combined, size: 2).items == ["n1", "n3"])
        #expect(
            try notes.keyPage(combined.after(notes.keyPage(combined, size: 2).next), size: 5).items == ["n2", "n5"])
        #expect(try notes.keys(combined) == ["n1", "n3", "n2", "n5"])
        #expect(try notes.objects(combined.descending()).map(\.id) == ["n5", "n3", "n1", "n2"])
    }

    @Test(arguments: Engine.allCases) func aTokenIsRefusedByAnotherBucketIndexOrQuery(engine: Engine) throws {
        try setUp(engine)
        try pairs.store((0..<10).map { PagedPair("k\($0)", $0 < 5 ? "x" : "y", $0 % 2) })
        let other = try t.db.bucket(PagedPair.self, named: "OtherPairs")
        try other.store((0..<10).map { PagedPair("k\($0)", "x", 1) })
        let q = Query.index("n", equals: 1).and(.index("a", equals: "x"))
        let token = try #require(try pairs.keyPage(q, size: 1).next)
        let pairs = try #require(self.pairs)

        let refused: [(String, () throws -> Void)] = [
            ("another bucket", { _ = try other.keyPage(q.after(token), size: 5) }),
            (
                "another value",
                {
                    _ = try pairs.keyPage(
                        Query.index("n", equals: 1).and(.index("a", equals: "y")).after(token), size: 5)
                }
            ),
            ("fewer conditions", { _ = try pairs.keys(Query.index("n", equals: 1).after(token)) }),
            ("another direction", { _ = try pairs.keyPage(q.descending().after(token), size: 5) }),
            (
                "another first index",
                { _ = try pairs.keys(Query.index("a", equals: "x").and(.index("n", equals: 1)).after(token)) }
            ),
            ("key order", { _ = try pairs.keys(Query.all.after(token)) }),
            ("objects too", { _ = try pairs.objects(q.descending().after(token)) }),
        ]
        for (what, call) in refused {
            do {
                try call()
                Issue.record("a token was accepted with \(what)")
            } catch {
                #expect(isInvalidContinuation(error), "\(what): \(error)")
                #expect("\(error)".contains("continuation"), "\(what): \(error)")
            }
        }
        // Limit and offset are not part of what a token belongs to.
        #expect(try pairs.keys(q.limit(5).offset(2).after(token)) == ["k3"])

        // A position outside the query's range (a hand-made token) is refused too.
        let forged = ContinuationToken(
            bucket: token.bucket, order: token.order, fingerprint: token.fingerprint, returned: 0,
            position: Keyspace.recordKey(bucket: token.bucket, key: "k1"))
        #expect(throws: BuriError.self) { try pairs.keys(q.after(forged)) }
        do {
            _ = try pairs.keys(q.after(forged))
        } catch {
            #expect(isInvalidContinuation(error))
        }
    }

    @Test(arguments: Engine.allCases) func aTokenOfARebuiltIndexIsRefused(engine: Engine) throws {
        try setUp(engine)
        try pairs.store((0..<6).map { PagedPair("k\($0)", "x", $0) })
        let q = Query.index("a", equals: "x")
        let token = try #require(try pairs.keyPage(q, size: 2).next)
        // Redeclare "a" with a new version: its entries move to a new index id.
        struct Rebuilt: BuriSupport {
            var id: String
            var a: String
            var n: Int
            static let buri = BuriSchema<Rebuilt>(
                key: \.id, indexes: [.binary("a", \.a, version: 1), .numeric("n", \.n)], bucket: "Pairs")
        }
        let rebuilt = try t.db.bucket(Rebuilt.self)
        do {
            _ = try rebuilt.keyPage(q.after(token), size: 2)
            Issue.record("a token of the index's old id was accepted")
        } catch {
            #expect(isInvalidContinuation(error), "\(error)")
        }
    }

    @Test(arguments: Engine.allCases) func tokensPrintRoundTripAndMalformedTextIsATypedError(engine: Engine) throws {
        try setUp(engine)
        try pairs.store((0..<5).map { PagedPair("k\($0)", "x\u{0}\u{E9}", $0) })
        let q = Query.index("a", prefix: "x").descending().limit(4)
        let page = try pairs.keyPage(q, size: 2)
        let token = try #require(page.next)
        let text = token.description
        #expect(text.hasPrefix("b1"))
        #expect(text.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(ContinuationToken(text) == token)
        #expect(try ContinuationToken(parsing: text.uppercased()) == token)
        #expect(token.returned == 2)
        // Resuming from the parsed text gives the rest of the walk.
        let parsed = try ContinuationToken(parsing: text)
        #expect(try pairs.keyPage(q.after(parsed), size: 5).items == ["k2", "k1"])

        let storageKeyHex = Keyspace.recordKey(bucket: 1, key: "k1").map { String($0, radix: 16).leftPadded(to: 2) }
            .joined()
        let malformed = [
            "", "zz", "b", "b1", String(text.dropLast()), String(text.prefix(34)), "é" + text.dropFirst(1),
            "c1" + text.dropFirst(2), storageKeyHex, text + " ",
        ]
        for bad in malformed {
            #expect(ContinuationToken(bad) == nil, "\(bad)")
            do {
                _ = try ContinuationToken(parsing: bad)
                Issue.record("'\(bad)' parsed as a token")
            } catch {
                #expect(isInvalidContinuation(error), "\(bad): \(error)")
            }
        }
    }

    @Test(arguments: Engine.allCases) func theFingerprintIgnoresLimitOffsetAndContinuationButNotConditions(
        engine: Engine
    ) throws {
        try setUp(engine)
        let base = Query.index("n", in: 1...5).and(.index("a", equals: "x"))
        let fingerprint = ContinuationFormat.fingerprint(of: base)
        #expect(ContinuationFormat.fingerprint(of: base.limit(3).offset(7)) == fingerprint)
        let variants: [Query] = [
            base.descending(), Query.index("a", equals: "x").and(.index("n", in: 1...5)), .index("n", in: 1...5),
            Query.index("n", in: 1..<5).and(.index("a", equals: "x")),
            Query.index("n", in: 1...5).and(.index("a", equals: "\u{E9}")),
            Query.index("n", in: 1...5).and(.index("a", equals: "e\u{301}")),
            Query.index("n", in: 1...5).and(.index("a", prefix: "x")),
            .all,
        ]
        let prints = variants.map(ContinuationFormat.fingerprint(of:))
        #expect(!prints.contains(fingerprint))
        #expect(Set(prints).count == prints.count)
        // Numbers are compared by value, as the index does: 20 and 20.0 are one query.
        #expect(
            ContinuationFormat.fingerprint(of: .index("n", equals: 20))
                == ContinuationFormat.fingerprint(of: .index("n", equals: 20.0)))
    }
}
