import Buri
import BuriEncryption
import BuriTestSupport
import Foundation
import Testing

/// A private text index (an encrypted database's terms are keyed tokens) against SQLite FTS5, as
/// `FTS5OracleTests` checks a plaintext one: the same random documents and queries, on every
/// engine, before and after edits, inside a transaction and after reopening. Words, phrases, `+`,
/// AND, OR and NOT answer and rank as FTS5 does; a word prefix (`choi*`) is refused with
/// `privateIndex`, since tokens have no order.
@Suite struct PrivateTextOracleTests {
    struct Page: BuriSupport, Equatable, Sendable {
        var id: String
        var body: String
        static let buri = BuriSchema<Page>(key: \.id, indexes: [.text("body", \.body)])
    }

    static func isPrefixRefusal(_ error: any Error) -> Bool {
        guard case .privateIndex(let bucket, let index, _) = error as? BuriError else { return false }
        return bucket == "Page" && index == "body"
    }

    static func compare(
        _ search: (String) throws -> [String], _ ranked: (String) throws -> [(key: String, score: Double)],
        _ documents: [String: String], _ queries: [String], _ answers: [FTS5Oracle.Answer], _ label: String
    ) {
        let result = FTS5Oracle.compare(
            documents: documents, queries: queries, answers: answers, label: label, refusal: isPrefixRefusal,
            search: search, ranked: ranked)
        #expect(result.problems.isEmpty, "\(result.problems.prefix(10).joined(separator: "\n"))")
        // Every query with a * is refused; the others are answered (and most of their scores compared).
        let starred = queries.count { $0.contains("*") }
        #expect(result.refusedAsExpected <= starred && result.refusedAsExpected * 10 >= starred * 9, "\(label)")
        #expect(result.answered * 10 >= (queries.count - starred) * 9, "\(label): \(result.answered) answered")
        #expect(result.scoresSkipped * 2 <= result.answered, "\(label)")
    }

    @Test(arguments: Engine.allCases) func aPrivateTextIndexAnswersAndRanksAsFTS5(engine: Engine) throws {
        var random = SeededGenerator(seed: 0x5EC)
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        let pages = try t.db.bucket(Page.self)
        var documents: [String: String] = [:]
        var batch: [Page] = []
        for index in 0..<150 {
            let page = Page(id: "p\(index)", body: FTS5Oracle.document(&random))
            documents[page.id] = page.body
            batch.append(page)
        }
        try pages.store(batch)
        let queries = (0..<160).map { _ in FTS5Oracle.query(&random) }
        let search = { (text: String) throws -> [String] in try pages.searchKeys("body", text) }
        let ranked = { (text: String) throws -> [(key: String, score: Double)] in
            try pages.rankedSearchKeys("body", text, limit: 1_000).map { ($0.key, $0.score) }
        }
        Self.compare(search, ranked, documents, queries, try FTS5Oracle.answers(documents, queries), "\(engine) fresh")

        // Edits in a transaction that also catches an error (which must leave no trace), and a
        // search inside it that sees them.
        var edited = documents
        for key in documents.keys.sorted().shuffled(using: &random).prefix(30) {
            edited[key] = FTS5Oracle.document(&random)
        }
        for key in documents.keys.sorted().shuffled(using: &random).prefix(20) { edited[key] = nil }
        let answers = try FTS5Oracle.answers(edited, queries)
        try t.db.write { tx in
            let inside = try tx.bucket(Page.self)
            for key in documents.keys.sorted() {
                if let body = edited[key], body != documents[key] {
                    try inside.store(Page(id: key, body: body))
                } else if edited[key] == nil {
                    try inside.delete(key: key)
                }
            }
            do {
                try inside.store(Page(id: "", body: "apple"))
                Issue.record("an empty key was stored")
            } catch {}
            Self.compare(
                { try inside.searchKeys("body", $0) },
                { try inside.rankedSearchKeys("body", $0, limit: 1_000).map { ($0.key, $0.score) } },
                edited, Array(queries.prefix(40)), Array(answers.prefix(40)), "\(engine) inside a transaction")
        }
        Self.compare(search, ranked, edited, queries, answers, "\(engine) edited")
        #expect(try t.db.check().problems.isEmpty)
        try t.reopen()
        let reopened = try t.db.bucket(Page.self)
        Self.compare(
            { try reopened.searchKeys("body", $0) },
            { try reopened.rankedSearchKeys("body", $0, limit: 1_000).map { ($0.key, $0.score) } },
            edited, queries, answers, "\(engine) reopened")
    }
}
