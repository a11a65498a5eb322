import BuriStorage

extension BuriDatabase {
    /// Salvages a database whose files are damaged — a truncated or garbled table file, a garbled
    /// `CURRENT` or `MANIFEST`, a torn log — so that it opens again. The database must not be open.
    ///
    /// 1. LevelDB's repair (``Database/repair(path:options:)``) rebuilds the file set from every
    ///    table and log record it can still read; unreadable data is dropped (LevelDB keeps the
    ///    damaged files in a `lost/` subdirectory).
    /// 2. If Buri's header was in the data that was lost, it is written again — but only when every
    ///    key left lies in Buri's key spaces; otherwise this is not a Buri database.
    /// 3. The database is opened and ``check(repair:progress:)`` rebuilds the index entries from
    ///    the surviving records, so indexes and records agree again.
    ///
    /// Returns the report of that check. Problems it cannot fix stay listed: damaged records, and
    /// records of a bucket whose catalog entry was lost (reported as stray keys).
    ///
    /// ```swift
    /// let report = try BuriDatabase.repair(path: "people.buri")
    /// for problem in report.problems where !problem.repaired { print(problem) }
    /// ```
    ///
    /// - Throws: ``BuriError/notABuriDatabase(path:)`` for a directory holding keys Buri never
    ///   writes, ``BuriError/storage(_:)`` for LevelDB errors (such as the database being open).
    @discardableResult
    public static func repair(path: String, options: BuriOptions = BuriOptions()) throws(BuriError) -> ConsistencyReport {
        var storageOptions = options.storage
        storageOptions.createIfMissing = false
        do {
            try LevelDBEngine.repair(path: path, options: storageOptions)
            let engine = try LevelDBEngine(path: path, options: storageOptions)
            defer { engine.close() }
            let current = try engine.latest()
            if try current.get(Keyspace.headerKey) == nil {
                let cursor = try current.cursor(in: .all)
                while try cursor.next() {
                    let tag = cursor.withKey { $0.first ?? 0xFF }
                    guard (Keyspace.catalogTag...Keyspace.indexTag).contains(tag) else { throw BuriError.notABuriDatabase(path: path) }
                }
                let batch = engine.makeBatch()
                batch.put(Keyspace.headerKey, Keyspace.headerValue())
                try engine.commit(batch, conditions: nil, sync: true)
            }
        } catch {
            throw BuriError.wrap(error)
        }
        var openOptions = options
        openOptions.createIfMissing = false
        let db = try BuriDatabase(path: path, options: openOptions)
        defer { db.close() }
        return try db.check(repair: true)
    }
}
