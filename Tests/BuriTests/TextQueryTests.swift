import BuriTestSupport
import BuriText
import Foundation
import Testing

@testable import Buri

struct Article: BuriSupport, Equatable, Sendable {
    var id: String
    var body: String
    var year: Int
    var tag: String

    static let buri = BuriSchema<Article>(
        key: \.id,
        indexes: [.text("body", \.body), .numeric("year", \.year), .binary("tag", \.tag)])
}

/// Text matches as query conditions: combined with index conditions, OR, NOT, sort keys, limits,
/// pages, counts and transactions, against a model computed by tokenizing in the test.
@Suite struct TextQueryTests {
    static let words = [
        "apple", "pie", "tart", "pear", "crème", "creme", "brûlée", "Ärger", "arger", "北京", "大学", "2024", "the",
        "apple", "pie", "apples",
    ]

    /// Seeded random articles.
    static func articles(_ count: Int, seed: UInt64) -> [Article] {
        var state = seed
        func next() -> Int {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) >> 1)
        }
        return (0..<count).map { i in
            let length = next() % 7
            let body = (0..<length).map { _ in words[next() % words.count] }.joined(separator: " ")
            return Article(
                id: "a\(i % 10)\(i)", body: body, year: 2000 + next() % 20, tag: ["x", "y", "z"][next() % 3])
        }
    }

    static let queries = [
        "apple", "apple pie", "apple OR tart", "apple NOT pie", "app*", "\"apple pie\"", "\"pie apple\"", "creme",
        "arger", "北京", "\"apple pie\" OR pear", "pie NOT (tart OR pear)", "zebra",
    ]

    struct Model {
        var text = TextModel()
        var articles: [String: Article] = [:]
        mutating func put(_ article: Article) {
            articles[article.id] = article
            text.docs[article.id] = [article.body]
        }
        mutating func remove(_ key: String) {
            articles[key] = nil
            text.docs[key] = nil
        }
        func byKey(_ keys: some Sequence<String>) -> [String] {
            keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        }
        func matches(_ query: String) throws -> Set<String> { Set(try text.answer(query)) }
        /// Keys in the order of index `year`, then key.
        func byYear(_ keys: Set<String>, descending: Bool = false) -> [String] {
            let sorted = keys.sorted { a, b in
                let (ya, yb) = (articles[a]?.year ?? 0, articles[b]?.year ?? 0)
                return ya != yb ? ya < yb : a.utf8.lexicographicallyPrecedes(b.utf8)
            }
            return descending ? sorted.reversed() : sorted
        }
    }

    @Test(arguments: Engine.allCases) func textMatchesCombineWithEveryKindOfCondition(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        var model = Model()
        for article in Self.articles(160, seed: 7) {
            try bucket.store(article)
            model.put(article)
        }
        func verify(_ label: String) throws {
            for text in Self.queries {
                let matches = try model.matches(text)
                let search = Query.search("body", text)
                #expect(try bucket.keys(search) == model.byKey(matches), "\(engine) \(label) \(text)")
                #expect(try bucket.keys(search.descending()) == model.byKey(matches).reversed())
                #expect(try bucket.count(search) == matches.count)
                #expect(try bucket.objects(search).map(\.id) == model.byKey(matches))
                // With an index condition: in that index's order.
                let recent = Set(model.articles.values.filter { (2005...2012).contains($0.year) }.map(\.id))
                let expected = model.byYear(matches.intersection(recent))
                #expect(try bucket.keys(.index("year", in: 2005...2012).and(search)) == expected, "\(text)")
                #expect(try bucket.keys(search.and(.index("year", in: 2005...2012))) == expected, "\(text)")
                #expect(try bucket.count(search.and(.index("year", in: 2005...2012))) == expected.count)
                // OR and NOT, in key order.
                let tagged = Set(model.articles.values.filter { $0.tag == "x" }.map(\.id))
                #expect(try bucket.keys(search.or(.index("tag", equals: "x"))) == model.byKey(matches.union(tagged)))
                let everything = Set(model.articles.keys)
                #expect(try bucket.keys(.not(search)) == model.byKey(everything.subtracting(matches)))
                #expect(
                    try bucket.keys(.index("tag", equals: "x").and(.not(search)))
                        == model.byKey(tagged.subtracting(matches)))
                // Sort keys, limits and offsets.
                #expect(
                    try bucket.keys(search.order(by: "year", descending: true))
                        == model.byYear(matches, descending: true))
                #expect(try bucket.keys(search.limit(3)) == Array(model.byKey(matches).prefix(3)))
                #expect(
                    try bucket.keys(search.offset(2).limit(4)) == Array(model.byKey(matches).dropFirst(2).prefix(4)))
                // Pages: every match exactly once.
                var paged: [String] = []
                var page = try bucket.page(search, size: 4)
                while true {
                    paged += page.items.map(\.id)
                    guard let next = page.next else { break }
                    page = try bucket.page(search.after(next), size: 4)
                }
                #expect(paged == model.byKey(matches), "\(engine) pages of \(text)")
            }
        }
        try verify("fresh")
        // Updates and deletes move the text entries; the combined queries follow.
        for (offset, article) in Self.articles(60, seed: 8).enumerated() {
            try bucket.store(article)
            model.put(article)
            if offset % 3 == 0, let victim = model.articles.keys.sorted().first {
                #expect(try bucket.delete(key: victim))
                model.remove(victim)
            }
        }
        try verify("after edits")
        try t.reopen()
        let again = try t.db.bucket(Article.self)
        #expect(try again.keys(.search("body", "apple pie")) == model.byKey(try model.matches("apple pie")))
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func pagesResumeAfterWritesAndDeleteAll(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        for i in 0..<10 { try bucket.store(Article(id: "k\(i)", body: "apple \(i)", year: 2000 + i, tag: "x")) }
        let search = Query.search("body", "apple")
        let first = try bucket.page(search, size: 4)
        #expect(first.items.map(\.id) == ["k0", "k1", "k2", "k3"])
        let token = try #require(first.next)
        // A write between pages: a new match after the token shows up, one before it does not.
        try bucket.store(Article(id: "k35", body: "apple late", year: 1990, tag: "y"))
        try bucket.store(Article(id: "k00", body: "apple early", year: 1990, tag: "y"))
        #expect(try bucket.delete(key: "k4"))
        let second = try bucket.page(search.after(token), size: 4)
        #expect(second.items.map(\.id) == ["k35", "k5", "k6", "k7"])
        // A token of another question is refused.
        #expect(throws: BuriError.self) { _ = try bucket.page(Query.search("body", "pear").after(token), size: 4) }
        // After deleteAll the token still resumes (nothing is left).
        _ = try bucket.deleteAll()
        #expect(try bucket.page(search.after(token), size: 4).items.isEmpty)
    }

    @Test(arguments: Engine.allCases) func insideATransactionItsOwnWritesAreSearchedAndAFailureLeavesNoTrace(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        try bucket.store(Article(id: "a", body: "apple pie", year: 2001, tag: "x"))
        struct Boom: Error {}
        try t.db.write { tx in
            let inside = try tx.bucket(Article.self)
            try inside.store(Article(id: "b", body: "apple tart", year: 2002, tag: "x"))
            #expect(try inside.keys(.search("body", "apple")) == ["a", "b"])
            #expect(try inside.keys(.search("body", "\"apple tart\"").and(.index("tag", equals: "x"))) == ["b"])
            // A call that throws and is caught leaves nothing behind.
            do {
                try inside.store([
                    Article(id: "c", body: "apple crumble", year: 3, tag: "x"),
                    Article(id: "", body: "an empty key is refused", year: 3, tag: "x"),
                ])
                Issue.record("a store of an empty key went through")
            } catch {}
            #expect(try inside.keys(.search("body", "crumble")).isEmpty)
        }
        #expect(try bucket.keys(.search("body", "apple")) == ["a", "b"])
        #expect(throws: Boom.self) {
            try t.db.write { tx in
                try tx.bucket(Article.self).store(Article(id: "d", body: "transient", year: 1, tag: "z"))
                throw Boom()
            }
        }
        #expect(try bucket.count(.search("body", "transient")) == 0)
    }

    @Test func errorsAreTypedWhenTheQueryRuns() throws {
        let t = try TestDatabase(.memory)
        let bucket = try t.db.bucket(Article.self)
        try bucket.store(Article(id: "a", body: "apple", year: 1, tag: "x"))
        #expect {
            _ = try bucket.keys(.index("tag", equals: "x").and(.search("body", "apple OR")))
        } throws: { error in
            guard case .textQuerySyntax("Article", "body", "apple OR", _, let offset) = error as? BuriError else {
                return false
            }
            return offset >= 6
        }
        #expect {
            _ = try bucket.keys(.search("tag", "apple"))
        } throws: { error in
            guard case .invalidQuery("Article", "tag"?, _) = error as? BuriError else { return false }
            return true
        }
        #expect {
            _ = try bucket.keys(.search("nope", "apple"))
        } throws: { error in
            guard case .unknownIndex("Article", "nope", _) = error as? BuriError else { return false }
            return true
        }
    }

    @Test func aDamagedEntryFailsTheQueryRatherThanShorteningIt() throws {
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Article.self)
        try bucket.store(Article(id: "a", body: "apple pie", year: 2001, tag: "x"))
        try bucket.store(Article(id: "b", body: "apple pie", year: 2002, tag: "x"))
        let info = try #require(try t.db.bucketInfo(named: "Article"))
        let index = try #require(info.index(named: "body"))
        let prefix = Keyspace.indexPrefix(bucket: info.id, index: index.id)
        let pie = Keyspace.indexEntryKey(
            prefix: prefix, tuple: IndexValue(bytes: Array("pie".utf8)).encoded, objectKey: "b")
        let batch = t.db.engine.makeBatch()
        batch.put(pie, [9, 9])
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        // The phrase is checked from the stored positions, through an index condition too.
        #expect(throws: BuriError.self) {
            _ = try bucket.keys(.index("tag", equals: "x").and(.search("body", "\"apple pie\"")))
        }
        #expect(throws: BuriError.self) { _ = try bucket.keys(.search("body", "\"apple pie\"")) }
    }
}

/// Live queries of a text match: woken by changes to its terms' entries (positions included),
/// not by writes elsewhere.
@Suite("Live text searches")
struct ObservationTestsOfTextSearch {
    @Test(arguments: Engine.allCases) func aLiveSearchFollowsItsMatchesAndIgnoresOtherWrites(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        try await bucket.store(Article(id: "a", body: "apple pie", year: 2001, tag: "x"))
        let emissions = Shared<[[String]]>([])
        let live = try bucket.observeKeys(.search("body", "\"apple pie\""))
        let consumer = Task {
            for try await keys in live { emissions.update { $0.append(keys) } }
        }
        try await eventually("the first emission") { emissions.current == [["a"]] }
        try await bucket.store(Article(id: "b", body: "apple pie too", year: 2002, tag: "y"))
        try await eventually("b matches") { emissions.current.last == ["a", "b"] }
        // Only positions change: the terms stay, their entries' values move.
        try await bucket.store(Article(id: "a", body: "pie apple", year: 2001, tag: "x"))
        try await eventually("a no longer holds the phrase") { emissions.current.last == ["b"] }
        let settled = emissions.current.count
        // Writes to other terms wake nothing.
        for i in 0..<20 { try await bucket.store(Article(id: "p\(i)", body: "pear tart", year: 2003, tag: "z")) }
        _ = try await bucket.delete(key: "b")
        try await eventually("b deleted") { emissions.current.last == [] }
        #expect(emissions.current.count == settled + 1, "\(emissions.current)")
        consumer.cancel()
        _ = await consumer.result
    }

    /// A large write puts its postings in segments and a later delete cancels one by a tombstone:
    /// a live search wakes for both, as it does for single entries.
    @Test(arguments: [Engine.leveldb, .memory]) func aLiveSearchFollowsPostingsInSegments(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        try await bucket.store(Article(id: "a", body: "apple pie", year: 2001, tag: "x"))
        let emissions = Shared<[[String]]>([])
        let live = try bucket.observeKeys(.search("body", "apple"))
        let consumer = Task {
            for try await keys in live { emissions.update { $0.append(keys) } }
        }
        try await eventually("the first emission") { emissions.current == [["a"]] }
        let batch = (0..<RawBucket.segmentThreshold + 6).map { n in
            Article(id: "s\(n + 100)", body: n % 2 == 0 ? "apple tart" : "pear tart", year: 2002, tag: "y")
        }
        try await bucket.store(batch)
        let withBatch = ["a"] + batch.filter { $0.body.hasPrefix("apple") }.map(\.id)
        try await eventually("the batch's matches") { emissions.current.last == withBatch }
        _ = try await bucket.delete(key: "s100")
        try await eventually("s100 deleted") { emissions.current.last == withBatch.filter { $0 != "s100" } }
        consumer.cancel()
        _ = await consumer.result
    }
}
