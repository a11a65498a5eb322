import BuriTestSupport
import Foundation
import Testing

@testable import Buri

/// Buri's text search against SQLite FTS5 itself, an implementation no one here wrote: random
/// corpora and random queries in FTS5's syntax (words, prefixes, phrases, `+`, AND, OR, NOT,
/// parentheses), asked of a Buri text index and of an FTS5 table (`unicode61 remove_diacritics 2`)
/// holding the same documents, before and after a round of updates and deletes. Both must accept
/// the same queries, return the same objects, and give every match the same BM25 score.
///
/// The oracle, its corpus and its queries are ``FTS5Oracle`` (BuriTestSupport); the encryption
/// tests ask the same of a private text index.
@Suite struct FTS5OracleTests {
    static func compare(
        _ bucket: Bucket<Article>, _ documents: [String: String], _ queries: [String],
        _ answers: [FTS5Oracle.Answer], _ label: String
    ) {
        let result = FTS5Oracle.compare(
            documents: documents, queries: queries, answers: answers, label: label,
            search: { try bucket.searchKeys("body", $0) },
            ranked: { try bucket.rankedSearchKeys("body", $0, limit: 1_000).map { ($0.key, $0.score) } })
        #expect(result.problems.isEmpty, "\(result.problems.prefix(10).joined(separator: "\n"))")
        // The generator writes FTS5's syntax: nearly every query is answered by both, and most
        // scores are compared.
        #expect(result.answered * 10 >= queries.count * 9, "\(label): \(result.answered) of \(queries.count) answered")
        #expect(result.scoresSkipped * 2 <= result.answered, "\(label): \(result.scoresSkipped) scores not compared")
    }

    @Test(arguments: Engine.allCases) func searchesAndScoresAsFTS5DoesBeforeAndAfterEdits(engine: Engine) throws {
        var random = SeededGenerator(seed: 0xF75)
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        var documents: [String: String] = [:]
        for index in 0..<160 {
            let key = "d\(index)"
            documents[key] = FTS5Oracle.document(&random)
            try bucket.store(Article(id: key, body: documents[key]!, year: index, tag: "t"))
        }
        let queries = (0..<180).map { _ in FTS5Oracle.query(&random) }
        Self.compare(bucket, documents, queries, try FTS5Oracle.answers(documents, queries), "\(engine) fresh")

        // Updates (one batch, a key twice), deletes, and new documents; then again after reopening.
        var edits: [Article] = []
        for key in documents.keys.sorted().shuffled(using: &random).prefix(40) {
            edits.append(Article(id: key, body: FTS5Oracle.document(&random), year: 0, tag: "u"))
        }
        edits.append(Article(id: edits[0].id, body: "apple apple pie", year: 0, tag: "u"))
        try bucket.store(edits)
        for edit in edits { documents[edit.id] = edit.body }
        for key in documents.keys.sorted().shuffled(using: &random).prefix(30) {
            #expect(try bucket.delete(key: key))
            documents[key] = nil
        }
        for index in 160..<180 {
            let key = "d\(index)"
            documents[key] = FTS5Oracle.document(&random)
            try bucket.store(Article(id: key, body: documents[key]!, year: index, tag: "n"))
        }
        let answers = try FTS5Oracle.answers(documents, queries)
        Self.compare(bucket, documents, queries, answers, "\(engine) edited")
        #expect(try t.db.check().isConsistent)
        try t.reopen()
        Self.compare(try t.db.bucket(Article.self), documents, queries, answers, "\(engine) reopened")
    }

    /// The rule the comparison above leaves out, checked on its own: a unit scores in an object
    /// only where every AND above it matches the object, and a unit written twice scores twice.
    @Test(arguments: Engine.allCases) func aUnitScoresOnlyWhereItsSubExpressionMatches(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Article.self)
        let bodies = ["a": "apple", "b": "apple pie", "c": "pie cafe lim", "d": "cafe", "e": "tart tart", "f": "lim"]
        for (key, body) in bodies { try bucket.store(Article(id: key, body: body, year: 0, tag: "t")) }
        func score(_ query: String, _ key: String) throws -> Double {
            try #require(try bucket.rankedSearchKeys("body", query, limit: 100).first { $0.key == key }?.score)
        }
        func near(_ a: Double, _ b: Double) -> Bool { abs(a - b) <= 1e-9 * max(1, abs(b)) }
        // apple in the failed AND (no pie in a) does not count; in b, where it matches, it does.
        #expect(near(try score("apple OR (pie apple)", "a"), try score("apple", "a")))
        #expect(near(try score("apple OR (pie apple)", "b"), 2 * (try score("apple", "b")) + (try score("pie", "b"))))
        // lim NOT pie fails in c (pie is there): only cafe scores, never lim or pie.
        #expect(near(try score("(lim NOT pie) OR cafe", "c"), try score("cafe", "c")))
        #expect(near(try score("(lim NOT pie) OR cafe", "f"), try score("lim", "f")))
        // tart cafe fails in c: lim alone.
        #expect(near(try score("lim OR (tart cafe)", "c"), try score("lim", "c")))
        #expect(near(try score("lim OR tart OR cafe", "c"), (try score("lim", "c")) + (try score("cafe", "c"))))
    }
}
