import Buri
import Foundation

/// A document as Buri stores it: the key and the text, with a text index over the text.
struct Document: BuriSupport, Sendable {
    var key: String
    var body: String
    static let buri = BuriSchema<Document>(key: \.key, indexes: [.text("body", \.body)])
}

/// Buri's text index on LevelDB (its default engine and options): the build stores every
/// document with `store(_:)` in chunks of 10,000 (each one atomic commit, index entries included),
/// then compacts so that the size is what the files take at rest. With `concurrently`, each chunk
/// goes through `storeConcurrently(_:)`, which encodes and tokenizes it on every core.
final class BuriTextSystem: TextSystem {
    static let name = "Buri"
    let path: String
    let db: BuriDatabase
    let documents: Bucket<Document>
    let concurrently: Bool

    init(directory: String, concurrently: Bool = false) throws {
        path = directory + (concurrently ? "/buri-concurrently" : "/buri")
        db = try BuriDatabase(path: path)
        documents = try db.bucket(Document.self)
        self.concurrently = concurrently
    }

    func build(_ corpus: Corpus) throws {
        var start = 0
        while start < corpus.count {
            let end = min(start + 10_000, corpus.count)
            let chunk = (start..<end).map { Document(key: corpus.keys[$0], body: corpus.texts[$0]) }
            if concurrently {
                try documents.storeConcurrently(chunk)
            } else {
                try documents.store(chunk)
            }
            start = end
        }
    }

    func size() throws -> Int {
        try db.compact()
        return directorySize(path)
    }

    func keys(matching query: String) throws -> [String] { try documents.searchKeys("body", query) }

    /// BM25 top-k (`rankedSearchKeys`), keys only, as FTS5's `ORDER BY rank LIMIT k`.
    func ranked(matching query: String, limit: Int) throws -> [String]? {
        try documents.rankedSearchKeys("body", query, limit: limit).map(\.key)
    }

    func documents(matching query: String) throws -> [(key: String, text: String)] {
        try documents.search("body", query).map { ($0.key, $0.body) }
    }
}
