import Foundation
import GRDB

/// SQLite's FTS5 as GRDB recommends it for an app's records: a table of documents keyed by
/// `key` (its primary key, so a document is fetched by key as in Buri), and an external-content
/// FTS5 index over `body` that GRDB keeps in sync with triggers (`synchronize(withTable:)`). Same
/// tokenizer and settings as ``FTS5System``.
final class FTS5TableSystem: TextSystem {
    static let name = "GRDB + FTS5 (synchronized table)"
    let path: String
    let queue: DatabaseQueue

    init(directory: String) throws {
        path = directory + "/fts5-table.sqlite"
        queue = try fts5Queue(path: path) { db in
            try db.create(table: "document") { t in
                t.primaryKey("key", .text)
                t.column("body", .text).notNull()
            }
            try db.create(virtualTable: "document_ft", using: FTS5()) { t in
                t.synchronize(withTable: "document")
                t.tokenizer = .unicode61(diacritics: .remove)
                t.column("body")
            }
        }
    }

    func build(_ corpus: Corpus) throws {
        try insertAll(corpus, into: queue, sql: "INSERT INTO document (key, body) VALUES (?, ?)")
    }

    func size() throws -> Int { directorySize(path) + directorySize(path + "-wal") }

    func keys(matching query: String) throws -> [String] {
        try queue.read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT document.key FROM document JOIN document_ft ON document_ft.rowid = document.rowid WHERE document_ft MATCH ?"
                ),
                arguments: [query])
        }
    }

    func ranked(matching query: String, limit: Int) throws -> [String]? {
        try queue.read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT document.key FROM document JOIN document_ft ON document_ft.rowid = document.rowid WHERE document_ft MATCH ? ORDER BY document_ft.rank LIMIT ?"
                ),
                arguments: [query, limit])
        }
    }

    func documents(matching query: String) throws -> [(key: String, text: String)] {
        try queue.read { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT document.key, document.body FROM document JOIN document_ft ON document_ft.rowid = document.rowid WHERE document_ft MATCH ?"
                ),
                arguments: [query])
            return rows.map { (key: $0[0], text: $0[1]) }
        }
    }
}
