import Foundation
import GRDB

/// SQLite's FTS5 through GRDB at its best (cached statements, columns read by index): the
/// documents in `doc(key UNINDEXED, body)` with the `unicode61` tokenizer and
/// `remove_diacritics 2`, the closest FTS5 comes to Buri's tokenizer v1 (docs/BENCHMARK.md says
/// where they differ). WAL, `synchronous = OFF`, as the main benchmark's GRDB.
final class FTS5System: TextSystem {
    static let name = "GRDB + FTS5"
    let path: String
    let queue: DatabaseQueue

    init(directory: String) throws {
        path = directory + "/fts5.sqlite"
        queue = try fts5Queue(path: path) { db in
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE doc USING fts5(key UNINDEXED, body, \
                    tokenize = 'unicode61 remove_diacritics 2')
                    """)
        }
    }

    func build(_ corpus: Corpus) throws {
        try insertAll(corpus, into: queue, sql: "INSERT INTO doc (key, body) VALUES (?, ?)")
    }

    func size() throws -> Int { directorySize(path) + directorySize(path + "-wal") }

    func keys(matching query: String) throws -> [String] {
        try queue.read { db in
            try String.fetchAll(db.cachedStatement(sql: "SELECT key FROM doc WHERE doc MATCH ?"), arguments: [query])
        }
    }

    func ranked(matching query: String, limit: Int) throws -> [String]? {
        try queue.read { db in
            try String.fetchAll(
                db.cachedStatement(sql: "SELECT key FROM doc WHERE doc MATCH ? ORDER BY rank LIMIT ?"),
                arguments: [query, limit])
        }
    }

    func documents(matching query: String) throws -> [(key: String, text: String)] {
        try queue.read { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT key, body FROM doc WHERE doc MATCH ?"), arguments: [query])
            return rows.map { (key: $0[0], text: $0[1]) }
        }
    }
}

/// A GRDB queue on `path` as both FTS5 setups open it (WAL, `synchronous = OFF` as the main
/// benchmark's GRDB, a 32 MiB page cache), with the tables `schema` makes.
func fts5Queue(path: String, schema: (Database) throws -> Void) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.prepareDatabase { db in
        try db.execute(sql: "PRAGMA synchronous = OFF")
        try db.execute(sql: "PRAGMA cache_size = -32768")
    }
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    try queue.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA journal_mode = WAL")
        try schema(db)
    }
    return queue
}

/// Every document of `corpus` inserted by `sql` (key, body) in one transaction through one
/// cached statement, then the WAL checkpointed (part of the build, as Buri's compaction is not).
func insertAll(_ corpus: Corpus, into queue: DatabaseQueue, sql: String) throws {
    try queue.write { db in
        let insert = try db.cachedStatement(sql: sql)
        for i in 0..<corpus.count {
            insert.setUncheckedArguments([corpus.keys[i], corpus.texts[i]])
            try insert.execute()
        }
    }
    try queue.writeWithoutTransaction { db in _ = try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
}
