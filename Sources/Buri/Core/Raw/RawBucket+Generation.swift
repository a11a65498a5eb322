import BuriStorage

// Generations: which bucket id a view reads and writes. `deleteAll` (here or in another client of a
// shared engine) moves a bucket to a new id; views follow it, and a read or write through a view of a
// bucket dropped or redefined since is refused.
extension RawBucket {
    /// Whether a read must find the bucket's current id in the catalog at its own snapshot: on an
    /// engine where another client can switch the bucket's generation (or drop it) unseen, the id
    /// this view knows may be retired and partly purged. Pinned views (a transaction's, a query's)
    /// were resolved at the snapshot they read; unshared engines learn every switch as it commits.
    var resolvesAtRead: Bool { !pinned && database.engine.isShared }

    /// For one range read (a query, a count, a key walk): a consistent view and this bucket pinned
    /// to its generation at that view. On a shared engine the catalog entry is read at the same
    /// snapshot (one more key per read, never per object), so another client's `deleteAll` or
    /// drop is seen by the very read that could otherwise meet its partly purged keys.
    func readView() throws(BuriError) -> (reader: any StorageReader, bucket: RawBucket) {
        // The snapshot first, then the generation: a switch committed before the snapshot is seen.
        let reader = try reader()
        guard resolvesAtRead else {
            let view = pinnedView()
            if view.bucketId == BucketGenerations.dropped { throw droppedError }
            return (reader, view)
        }
        let id = try idInCatalog(try database.bucketInfo(named: name, reader: reader), reader: reader)
        return (
            reader,
            RawBucket(
                database: database, descriptor: descriptor(at: id), transaction: nil, generation: generation,
                pinned: true)
        )
    }

    /// Lends the stored record value of object `key` (or `nil`) to `body`, read at the current
    /// generation. On a shared engine the catalog entry and the record are read from one snapshot in
    /// one request (``StorageReader/values(forKeys:)``); only if the generation switched is the
    /// record read again under the new id.
    func withCurrentValue<R>(forKey key: String, _ body: (UnsafeRawBufferPointer?) throws -> R) throws(BuriError) -> R {
        guard resolvesAtRead else {
            let reader = try pointReader()
            let id = bucketId
            if id == BucketGenerations.dropped { throw droppedError }
            return try run { try reader.withValue(forKey: Keyspace.recordKey(bucket: id, key: key), body) }
        }
        let reader = try reader()
        let known = bucketId
        let catalogKey = Keyspace.catalogKey(bucket: name)
        let values = try run { try reader.values(forKeys: [catalogKey, Keyspace.recordKey(bucket: known, key: key)]) }
        let stored: BucketDescriptor?
        if let bytes = values.first ?? nil {
            do {
                stored = try BucketDescriptor.decode(bytes)
            } catch {
                throw .corruption(
                    bucket: name, key: nil, index: nil, reason: "its catalog entry does not decode: \(error)")
            }
        } else {
            stored = nil
        }
        let id = try idInCatalog(stored, reader: reader)
        let value =
            id == known
            ? (values.count > 1 ? values[1] : nil)
            : try run { try reader.get(Keyspace.recordKey(bucket: id, key: key)) }
        return try run {
            guard let value else { return try body(nil) }
            return try value.withUnsafeBytes { try body($0) }
        }
    }

    /// What a read or write through a view of a bucket dropped (or redefined) since it was made throws.
    var droppedError: BuriError {
        .invalidIndexDefinition(
            bucket: name, index: "*",
            reason: "the bucket was redefined or dropped after this Bucket was opened; open it again with db.bucket(_:)"
        )
    }

    /// The bucket id that catalog entry `stored` (read through `reader`) names for this view.
    /// A generation switched by another client is followed (and remembered for later reads); a
    /// bucket dropped or redefined since this view was made is refused with a typed error.
    func idInCatalog(_ stored: BucketDescriptor?, reader: any StorageReader) throws(BuriError) -> UInt32 {
        let id = bucketId
        // Dropped here (a bucket of the name made since is another bucket), or dropped anywhere.
        guard let stored, id != BucketGenerations.dropped else { throw droppedError }
        // Another client began encrypting the database: this one, without the key, must not write.
        if stored.plaintextValues == true, !database.isEncrypted {
            throw .encryptionKeyRequired(path: database.path)
        }
        if stored.id == id { return id }
        guard stored.indexes.count == madeDescriptor.indexes.count,
            zip(stored.indexes, madeDescriptor.indexes).allSatisfy({ $0.id == $1.id && $0.hasSameShape(as: $1) })
        else {
            throw .invalidIndexDefinition(
                bucket: name, index: "*",
                reason:
                    "another client redefined the bucket after this Bucket was opened; open it again with db.bucket(_:)"
            )
        }
        // Ids only grow: a smaller one is an older snapshot than what this process has learned,
        // and is read as it stands there (complete: nothing is purged before its switch commits).
        if stored.id > id {
            if madeDescriptor.plaintextValues == true, stored.plaintextValues != true {
                database.plaintextPhase?.markSealed(stored.id)
            }
            database.generations.forward(id, to: stored.id)
        }
        return stored.id
    }

    /// Refuses to write through a view made before the bucket was redefined or dropped in this
    /// process: its index ids would no longer match the catalog. Callers hold the write lock.
    ///
    /// On a shared engine, the catalog entry is read too (so it is a condition of the commit): a
    /// generation switched by another client is followed, like one switched here.
    func checkCurrent(_ reader: any StorageReader) throws(BuriError) {
        guard database.catalogGeneration(name) == generation else {
            throw .invalidIndexDefinition(
                bucket: name, index: "*",
                reason:
                    "the bucket was redefined or dropped after this Bucket was opened; open it again with db.bucket(_:)"
            )
        }
        guard database.engine.isShared, !pinned else { return }
        _ = try idInCatalog(try database.bucketInfo(named: name, reader: reader), reader: reader)
    }
}
