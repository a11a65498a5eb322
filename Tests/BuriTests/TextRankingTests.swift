import BuriStorage
import BuriTestSupport
import BuriText
import Foundation
import Testing

@testable import Buri

/// BM25 ranking against a brute-force model: FTS5's formula over the model's tokens, every match
/// scored, sorted by score then key.
@Suite struct TextRankingTests {
    struct Model {
        var bodies: [String: String] = [:]
        let tokenizer = TextTokenizer.v1

        func tokens(_ key: String) -> [[UInt8]: [UInt64]] {
            var result: [[UInt8]: [UInt64]] = [:]
            for token in tokenizer.tokens(in: bodies[key] ?? "") {
                result[token.term, default: []].append(UInt64(token.position))
            }
            return result
        }

        /// How often `unit` occurs in object `key`.
        func frequency(_ unit: TextQuery, _ key: String) -> Int {
            let terms = tokens(key)
            switch unit {
            case .term(let term): return terms[term]?.count ?? 0
            case .prefix(let start): return terms.filter { $0.key.starts(with: start) }.map(\.value.count).reduce(0, +)
            case .phrase(let phrase, let lastIsPrefix):
                let starts = Set(terms.values.flatMap { $0 })
                return starts.count { start in
                    for (offset, term) in phrase.enumerated() {
                        let at = start + UInt64(offset)
                        if offset == phrase.count - 1 && lastIsPrefix {
                            if !terms.contains(where: { $0.key.starts(with: term) && $0.value.contains(at) }) {
                                return false
                            }
                        } else if terms[term]?.contains(at) != true {
                            return false
                        }
                    }
                    return true
                }
            default: return 0
            }
        }

        func ranked(_ text: String, limit: Int) throws -> [(key: String, score: Double)] {
            let query = try TextQuery.parse(text, tokenizer: tokenizer)
            var textModel = TextModel()
            for (key, body) in bodies { textModel.docs[key] = [body] }
            let matches = try textModel.answer(text)
            let documents = Double(bodies.count)
            let lengths = Dictionary(
                uniqueKeysWithValues: bodies.keys.map { ($0, tokens($0).values.map(\.count).reduce(0, +)) })
            let average = Double(max(lengths.values.reduce(0, +), 1)) / documents
            let units = TextRanker.units(of: query)
            let idfs = units.map { unit -> Double in
                let n = Double(bodies.keys.count { frequency(unit, $0) > 0 })
                let value = log((documents - n + 0.5) / (n + 0.5))
                return value > 0 ? value : 1e-6
            }
            let scored = matches.map { key -> (key: String, score: Double) in
                var parts: [Double] = []
                for (unit, idf) in zip(units, idfs) {
                    let f = frequency(unit, key)
                    guard f > 0 else { parts.append(0); continue }
                    let tf = Double(f)
                    let norm = 1.2 * (1 - 0.75 + 0.75 * Double(lengths[key] ?? 0) / average)
                    parts.append(idf * tf * (1.2 + 1) / (tf + norm))
                }
                return (key, parts.reduce(0, +))
            }
            let sorted = scored.sorted { a, b in
                a.score != b.score ? a.score > b.score : a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
            }
            return Array(sorted.prefix(limit))
        }
    }

    static let queries = [
        "apple", "pear", "apple OR pie", "apple OR pie OR tart OR zebra", "apple pie", "pie apple tart",
        "apple NOT tart", "app*", "\"apple pie\"", "\"apple pie\" OR tart", "(apple OR pear) pie", "北京", "2024",
        "creme OR arger", "zebra", "apple OR zebra",
    ]

    static func verify(_ bucket: Bucket<Article>, _ model: Model, _ label: String) throws {
        for text in queries {
            for limit in [1, 3, 10, 1000] {
                let expected = try model.ranked(text, limit: limit)
                let actual = try bucket.rankedSearchKeys("body", text, limit: limit)
                #expect(actual.map(\.key) == expected.map(\.key), "\(label) \(text) limit \(limit)")
                for (a, e) in zip(actual, expected) {
                    #expect(abs(a.score - e.score) <= 1e-9 * max(1, abs(e.score)), "\(label) \(text) \(a.key)")
                }
            }
        }
        let objects = try bucket.rankedSearch("body", "apple OR pie", limit: 5)
        #expect(objects.map(\.key) == objects.map(\.object.id))
        #expect(objects.map(\.key) == (try model.ranked("apple OR pie", limit: 5)).map(\.key))
    }

    @Test(arguments: Engine.allCases) func rankingIsBM25OverEveryEditAndEngine(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        var model = Model()
        for article in TextQueryTests.articles(150, seed: 11) {
            try bucket.store(article)
            model.bodies[article.id] = article.body
        }
        try Self.verify(bucket, model, "\(engine) fresh")
        // Updates and deletes change lengths, frequencies, N and the total; a batch repeats a key.
        var edits = TextQueryTests.articles(40, seed: 12)
        edits.append(Article(id: edits[0].id, body: "apple apple apple pie", year: 1, tag: "x"))
        try bucket.store(edits)
        for edit in edits { model.bodies[edit.id] = edit.body }
        for key in model.bodies.keys.sorted().prefix(25) {
            #expect(try bucket.delete(key: key))
            model.bodies[key] = nil
        }
        try Self.verify(bucket, model, "\(engine) edited")
        #expect(try t.db.check().isConsistent)
        try t.reopen()
        try Self.verify(try t.db.bucket(Article.self), model, "\(engine) reopened")
    }

    @Test(arguments: Engine.allCases) func aRankedSearchKeepsOnlyWhatItsWhereQuerySelects(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        var model = Model()
        var articles: [String: Article] = [:]
        for article in TextQueryTests.articles(150, seed: 14) {
            try bucket.store(article)
            model.bodies[article.id] = article.body
            articles[article.id] = article
        }
        for text in ["apple", "apple OR pie OR tart", "apple pie", "\"apple pie\"", "app*"] {
            let all = try model.ranked(text, limit: Int.max)
            for limit in [1, 5, 1000] {
                let tagged = all.filter { articles[$0.key]?.tag == "x" }.prefix(limit).map(\.key)
                #expect(
                    try bucket.rankedSearchKeys("body", text, limit: limit, where: .index("tag", equals: "x")).map(
                        \.key)
                        == tagged, "\(engine) \(text) \(limit)")
                let recent = all.filter { (2010...).contains(articles[$0.key]?.year ?? 0) }.prefix(limit).map(\.key)
                let filtered = try bucket.rankedSearch(
                    "body", text, limit: limit, where: .filter { (article: Article) in article.year >= 2010 })
                #expect(filtered.map(\.key) == recent, "\(engine) \(text) \(limit) filter")
            }
        }
        #expect(throws: BuriError.self) {
            _ = try bucket.rankedSearchKeys("body", "apple", limit: 3, where: Query.all.limit(2))
        }
    }

    @Test(arguments: Engine.allCases) func insideATransactionRankingSeesItsWritesAndAFailureLeavesNoTotal(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        var model = Model()
        for article in TextQueryTests.articles(30, seed: 13) {
            try bucket.store(article)
            model.bodies[article.id] = article.body
        }
        try t.db.write { tx in
            let inside = try tx.bucket(Article.self)
            try inside.store(Article(id: "zz", body: "apple apple pie pie pie", year: 1, tag: "x"))
            var seen = model
            seen.bodies["zz"] = "apple apple pie pie pie"
            #expect(
                try inside.rankedSearchKeys("body", "apple pie", limit: 3).map(\.key)
                    == (try seen.ranked("apple pie", limit: 3)).map(\.key))
            do {
                try inside.store([
                    Article(id: "zy", body: "many many many many words here", year: 1, tag: "x"),
                    Article(id: "", body: "refused", year: 1, tag: "x"),
                ])
            } catch {}
            // deleteAll inside a transaction takes every token with it.
            _ = try inside.deleteAll()
            #expect(try inside.rankedSearchKeys("body", "apple", limit: 3).isEmpty)
            try inside.store(Article(id: "only", body: "apple", year: 1, tag: "x"))
        }
        #expect(try bucket.rankedSearchKeys("body", "apple", limit: 3).map(\.key) == ["only"])
        #expect(try t.db.check().isConsistent)
        let info = try #require(try t.db.bucketInfo(named: "Article"))
        let index = try #require(info.index(named: "body"))
        let total = try t.db.engine.latest().get(Keyspace.textTotalKey(bucket: info.id, index: index.id))
        #expect(total == Keyspace.countValue(1))
    }

    @Test func aWrongTotalIsFoundAndRepairedAndAFormat6IndexIsRebuiltToRank() throws {
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Article.self)
        try bucket.store(Article(id: "a", body: "apple pie", year: 1, tag: "x"))
        try bucket.store(Article(id: "b", body: "apple", year: 1, tag: "x"))
        let info = try #require(try t.db.bucketInfo(named: "Article"))
        let index = try #require(info.index(named: "body"))
        let key = Keyspace.textTotalKey(bucket: info.id, index: index.id)
        #expect(try t.db.engine.latest().get(key) == Keyspace.countValue(3))
        let batch = t.db.engine.makeBatch()
        batch.put(key, Keyspace.countValue(99))
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        let report = try t.db.check()
        #expect(report.problems.contains { $0.kind == .wrongCount && $0.index == "body" })
        _ = try t.db.check(repair: true)
        #expect(try t.db.check().isConsistent)
        #expect(try t.db.engine.latest().get(key) == Keyspace.countValue(3))

        // A catalog whose text index has layout 1 (made by format 6): searchable, not rankable,
        // and rebuilt with layout 2 when the app opens the bucket.
        var old = info
        old.indexes = old.indexes.map { definition in
            var definition = definition
            if definition.text != nil { definition.text?.layout = nil }
            return definition
        }
        let catalog = t.db.engine.makeBatch()
        try t.db.saveDescriptor(old, into: catalog)
        try t.db.engine.commit(catalog, conditions: nil, sync: false)
        let raw = try t.db.rawBucket(named: "Article")
        #expect(throws: BuriError.self) { _ = try raw.rankedSearch(index: "body", query: "apple", limit: 2) }
        let reopened = try t.db.bucket(Article.self)
        #expect(try reopened.rankedSearchKeys("body", "apple", limit: 2).map(\.key) == ["b", "a"])
        #expect(try t.db.check().isConsistent)
    }
}
