import BuriStorage

extension BuriDatabase {
    /// Purges every retired generation and every stage of an import that ended without
    /// publishing (see ``pendingPurges()``) now, and waits for it; with `reclaimingSpace`, then
    /// compacts the key ranges they occupied, so that the disk space they took is given back now
    /// rather than by later compactions (LevelDB frees a deleted key's space only when it rewrites
    /// its table). Returns what was purged. Stages of imports still loading in this process, and
    /// on a shared engine another client's stages, are left alone.
    ///
    /// The purge runs on the background purger when the database has one (so that it never races
    /// it), else on the calling thread.
    ///
    /// ```swift
    /// let db = try BuriDatabase(path: "people.buri")   // an import was killed, or failed on a full disk
    /// try db.purgeRetiredBuckets(reclaimingSpace: true)
    /// ```
    /// - Throws: the storage error that stopped the purge or the compaction (a full disk).
    @discardableResult
    public func purgeRetiredBuckets(reclaimingSpace: Bool) throws(BuriError) -> [RetiredBucket] {
        try checkOpen()
        let pending = try purgeableBuckets()
        guard !pending.isEmpty else { return [] }
        if options.purgesInBackground {
            // Passes until none is left: on a shared engine another client's stage may become
            // purgeable meanwhile (its lease ended), which a pass begun before did not see.
            var previous = Set(pending.map(\.id))
            for pass in 1... {
                purger.kick(self)
                purger.waitUntilIdle()
                let left = Set(try purgeableBuckets().map(\.id))
                if left.isEmpty { break }
                if let error = purger.lastError { throw error }
                // A pass that purged nothing was stopped (the handle is closing).
                if isClosed || left == previous || pass >= 8 {
                    throw .invalidTransaction(
                        reason: "the purge of retired generations was stopped (the database is closing)")
                }
                previous = left
            }
        } else {
            try purgeRetired { false }
        }
        if reclaimingSpace, !engine.isShared {
            for retired in pending {
                try run {
                    try engine.compact(.prefix(Keyspace.recordPrefix(bucket: retired.id)))
                    try engine.compact(.prefix(Keyspace.indexSpacePrefix(bucket: retired.id)))
                }
            }
        }
        // What was purged: a stage another client took up meanwhile is not.
        let left = Set(try retiredBuckets(reader: currentReader()).map(\.id))
        return pending.filter { !left.contains($0.id) }
    }
}
