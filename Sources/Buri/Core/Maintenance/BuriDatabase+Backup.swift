import BuriEngines
import BuriStorage
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension BuriDatabase {
    /// Writes a consistent copy of the whole database — every bucket as of one snapshot — to a
    /// new LevelDB database in directory `path`, while other threads go on reading and writing.
    /// Works from every engine (an in-memory database can be saved this way). `levelDB`: the
    /// LevelDB options the copy is written with (`LevelDBOptions.buriDefaults` unless given).
    ///
    /// The copy is built in a sibling directory and moved to `path` only once complete and synced,
    /// so `path` never holds a partial backup, even if the process dies midway. Returns the
    /// number of keys copied. An encrypted database's copy is its stored bytes: as encrypted as
    /// the original, and opened with the same key. (Lease keys of a shared engine's live clients
    /// are left out: in the copy, a stage they own is one its process left, purged at open.)
    ///
    /// ```swift
    /// try db.backup(to: "people-backup.buri")
    /// let copy = try BuriDatabase(path: "people-backup.buri")   // an ordinary database
    /// ```
    ///
    /// - Throws: ``BuriError/storage(_:)`` if `path` already exists or cannot be written, or the
    ///   source cannot be read (a damaged source never yields a short backup).
    @discardableResult
    public func backup(to path: String, levelDB: LevelDBOptions = .buriDefaults) throws(BuriError) -> Int {
        let manager = FileManager.default
        if manager.fileExists(atPath: path) {
            throw .storage(
                StorageError(
                    code: .invalidArgument, message: "'\(path)' already exists; back up to a new path", location: path))
        }
        let staging = path + ".partial-" + UUID().uuidString
        // The stored engine's snapshot: an encrypted database's values are copied sealed.
        try checkOpen()
        let snapshot = try run { try storedEngine.snapshot() }
        var copied = 0
        do {
            var storage = levelDB
            storage.createIfMissing = true
            storage.errorIfExists = true
            let target = try LevelDBEngine(path: staging, options: storage)
            defer { target.close() }
            try run {
                let cursor = try snapshot.cursor(in: .all)
                var batch = target.makeBatch()
                while try cursor.next() {
                    // A shared engine's live clients (their lease keys) are not the copy's.
                    if cursor.withKey({ $0.first == Keyspace.databaseTag && Keyspace.isLeaseKey(Array($0)) }) {
                        continue
                    }
                    try cursor.withKey { key in try cursor.withValue { value in batch.put(key, value) } }
                    copied += 1
                    if batch.byteSize >= 4 << 20 {
                        try target.commit(batch, conditions: nil, sync: false)
                        batch = target.makeBatch()
                    }
                }
                try target.commit(batch, conditions: nil, sync: true)
            }
        } catch {
            try? manager.removeItem(atPath: staging)
            throw BuriError.wrap(error)
        }
        do {
            try manager.moveItem(atPath: staging, toPath: path)
        } catch {
            try? manager.removeItem(atPath: staging)
            throw .storage(
                StorageError(
                    code: .ioError, message: "could not move the finished backup into place: \(error)", location: path))
        }
        return copied
    }
}
