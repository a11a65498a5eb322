import BuriEngines
import BuriStorage
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension BuriDatabase {
    /// Opens the Buri database in directory `path` for reading, as its files stand now, without
    /// writing anything in that directory: not its lock, not LevelDB's `LOG`, `CURRENT`,
    /// `MANIFEST` or logs, and no compaction (see `DatabaseFileSnapshot`: the files are linked or
    /// copied into a private directory under `temporaryDirectory`, the system's by default, and
    /// LevelDB opens that). So it reads a database another process holds open — the last state
    /// committed to disk there, its log read as it stands —, one on a read-only file system,
    /// and one on a full disk (when the temporary directory is on another).
    ///
    /// The database reads like any other; writes throw ``BuriError/storage(_:)`` with code
    /// `notSupported`. Damage is reported exactly as opening `path` itself would report it.
    /// Closing it removes the private directory.
    ///
    /// ```swift
    /// let db = try BuriDatabase.readingSnapshot(of: "people.buri")   // even while an app has it open
    /// defer { db.close() }
    /// let count = try db.bucket(Person.self).count()
    /// ```
    ///
    /// - Throws: ``BuriError/storage(_:)`` with code `ioError` if the snapshot cannot be made (no
    ///   space or no permission in `temporaryDirectory`, an unreadable file; the message names
    ///   the directory), `unavailable` if the files kept changing; otherwise what
    ///   ``init(path:options:levelDB:)`` throws for an existing database.
    ///
    /// `levelDB`: the LevelDB options the snapshot is opened with (`LevelDBOptions.buriDefaults` unless given).
    public static func readingSnapshot(
        of path: String, options: BuriOptions = BuriOptions(), levelDB: LevelDBOptions = .buriDefaults,
        temporaryDirectory: String? = nil
    ) throws(BuriError) -> BuriDatabase {
        let files: DatabaseFileSnapshot
        do throws(DatabaseFileSnapshotError) {
            files = try DatabaseFileSnapshot.take(
                of: path, in: temporaryDirectory ?? FileManager.default.temporaryDirectory.path)
        } catch {
            throw .storage(
                StorageError(
                    code: error.kind == .keptChanging ? .unavailable : .ioError, message: error.description,
                    location: path))
        }
        return try BuriDatabase(readingSnapshot: files, options: options, levelDB: levelDB)
    }

    /// Opens the Buri database in a snapshot already taken (see ``readingSnapshot(of:options:levelDB:temporaryDirectory:)``),
    /// for callers that handle `DatabaseFileSnapshotError` themselves. The database owns `files`
    /// from here on: closing it (or a failure to open) removes them.
    ///
    /// ```swift
    /// let files = try DatabaseFileSnapshot.take(of: "people.buri", in: "/var/tmp")
    /// let db = try BuriDatabase(readingSnapshot: files)
    /// ```
    public convenience init(
        readingSnapshot files: DatabaseFileSnapshot, options: BuriOptions = BuriOptions(),
        levelDB: LevelDBOptions = .buriDefaults
    ) throws(BuriError) {
        var options = options
        options.createIfMissing = false
        // Purging is a write: a snapshot only notes what is pending.
        options.purgesInBackground = false
        let engine: LevelDBEngine
        do {
            engine = try LevelDBEngine(readingSnapshot: files, options: levelDB)
        } catch {
            let failure = Self.openFailure(error, path: files.source, logs: files.path)
            files.remove()
            throw failure
        }
        try self.init(engine: engine, options: options)
    }
}
