import BuriStorage

// Deleting: objects by key with every index entry their headers list, or the whole bucket
// (a generation switch outside a transaction).
extension RawBucket {
    /// Deletes objects and every index entry their stored headers list, in one atomic batch,
    /// with what the delete rules of relationships into this bucket do to the objects referring to
    /// them (``DeleteRule``). Keys that are not there are ignored. Returns how many objects of
    /// this bucket were deleted.
    @discardableResult
    public func delete(keys: [String], sync: Bool? = nil) throws(BuriError) -> Int {
        var tombstones = 0
        let count = try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            let deleted = try deleteRecords(keys, writer: writer, tombstones: &tombstones)
            if !deleted.isEmpty { try database.applyDeleteRules(target: name, keys: deleted, writer: writer) }
            return deleted.count
        }
        noteSegmentWork(segmentedCommits: 0, tombstones: tombstones)
        return count
    }

    /// Deletes the records `keys` and the index entries their headers list in `writer`'s batch,
    /// and counts them. Returns the UTF-8 bytes of the keys that were there, each once.
    func deleteRecords(_ keys: [String], writer: Writer) throws(BuriError) -> [[UInt8]] {
        var tombstones = 0
        return try deleteRecords(keys, writer: writer, tombstones: &tombstones)
    }

    /// ``deleteRecords(_:writer:)``, adding to `tombstones` the tombstones it writes.
    func deleteRecords(_ keys: [String], writer: Writer, tombstones: inout Int) throws(BuriError) -> [[UInt8]] {
        var deleted = Set<[UInt8]>()  // UTF-8 bytes: see write(_:sync:) on String equality
        var order: [[UInt8]] = []
        let reader = try readerForKeys(keys, writer.reader)
        let keepsLengths = !lengthKeepingIndexIds.isEmpty
        var removed: [(key: String, header: RecordHeader)] = []
        for key in keys where !deleted.contains(Array(key.utf8)) {
            guard let header = try currentHeader(forKey: key, reader: reader) else { continue }
            if keepsLengths { removed.append((key, header)) }
            tombstones += removeEntries(of: header, objectKey: Array(key.utf8), key: key, batch: writer.batch)
            writer.batch.delete(recordKey(key))
            deleted.insert(Array(key.utf8))
            order.append(Array(key.utf8))
        }
        writer.adjustCount(of: bucketId, bucket: name, by: -deleted.count)
        if keepsLengths { try subtractDocumentLengths(removed, reader: reader, writer: writer) }
        return order
    }

    /// Deletes every object and index entry of the bucket; keeps the bucket and its index
    /// definitions. Returns how many objects were deleted (counted in the state the deletion
    /// commits on).
    ///
    /// Outside a transaction this writes two keys whatever the size of the bucket: the bucket gets
    /// a new, empty generation (a fresh bucket id) in one catalog commit, and the old generation's
    /// keys are purged in the background, in chunks, resuming at the next open if the process ends
    /// first (see ``BuriDatabase/pendingPurges()``). This view and every other view of the bucket
    /// go on with the new generation. Inside ``BuriDatabase/write(_:)-1pxia`` each key is deleted in the
    /// transaction instead, so the transaction's later reads and writes see the bucket as before.
    ///
    /// ```swift
    /// let removed = try raw.deleteAll()
    /// try raw.count()   // 0
    /// ```
    @discardableResult
    public func deleteAll(sync: Bool? = nil) throws(BuriError) -> Int {
        if transaction != nil { return try deleteEachKey(sync: sync) }
        return try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            guard let stored = try database.bucketInfo(named: name, reader: writer.reader) else {
                throw .unknownBucket(name: name, known: try database.bucketNames(reader: writer.reader))
            }
            // One key read: the stored count (counted only in a database no format-4 writer has written).
            let count = try database.objectCount(of: stored.id, bucket: name, reader: writer.reader)
            if count == 0,
                try countEntries(
                    in: .prefix(Keyspace.indexSpacePrefix(bucket: stored.id)), reader: writer.reader, cap: 1) == 0
            {
                return 0
            }
            let newId = try database.allocateBucketId(reader: writer.reader, batch: writer.batch)
            try database.retire(stored, replacingWith: newId, writer: writer)
            writer.batch.put(Keyspace.countKey(bucket: newId), Keyspace.countValue(0))
            try database.applyDeleteRules(target: name, keys: nil, writer: writer)
            return count
        }
    }

    /// `deleteAll` as one batch deleting every key (inside a transaction).
    private func deleteEachKey(sync: Bool?) throws(BuriError) -> Int {
        try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            let id = bucketId
            let count = try run {
                var count = 0
                let records = try writer.reader.cursor(in: .prefix(Keyspace.recordPrefix(bucket: id)))
                while try records.next() {
                    records.withKey { writer.batch.delete($0) }
                    count += 1
                }
                let entries = try writer.reader.cursor(in: .prefix(Keyspace.indexSpacePrefix(bucket: id)))
                while try entries.next() { entries.withKey { writer.batch.delete($0) } }
                writer.adjustCount(of: id, bucket: name, by: -count)
                return count
            }
            // Every object is gone: so are the text indexes' tokens.
            for index in lengthKeepingIndexIds {
                let totalId = TextTotalId(bucket: id, index: index)
                // The stored total, and what earlier statements of the transaction changed it by.
                let total =
                    try (database.storedTextTotal(of: totalId, bucket: name, reader: writer.reader) ?? 0)
                    + (transaction?.counts.tokens[totalId]?.delta ?? 0)
                writer.adjustTextTotal(of: id, index: index, bucket: name, by: -total)
            }
            if count > 0 { try database.applyDeleteRules(target: name, keys: nil, writer: writer) }
            return count
        }
    }
}
