import BuriStorage

// Each bucket id's exact object count (format 4, `docs/FORMAT.md` §6b): the number of record keys
// under the id, kept in key `0x05` + id and changed in the same atomic batch as the records.

extension BuriDatabase {
    /// The count stored for bucket id `id` at `reader`, or `nil` when there is none (a database
    /// older than version 4 read without writing, or a bucket no format-4 writer has written yet).
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` naming `bucket` for a value
    ///   that is not a count: never a guessed number.
    func storedCount(of id: UInt32, bucket: String, reader: any StorageReader) throws(BuriError) -> Int? {
        let key = Keyspace.countKey(bucket: id)
        guard let value = try run(bucket: bucket, { try reader.get(key) }) else { return nil }
        guard let count = Keyspace.parseCount(value) else {
            throw .corruption(
                bucket: bucket, key: nil, index: nil,
                reason:
                    "its object count (key \(key.map { String(format2: $0) }.joined(separator: " "))) is \(value.count) bytes, not an 8-byte count; run `buri check --repair`, which recounts it from the records"
            )
        }
        return count
    }

    /// The token total stored for a text index at `reader` (`nil`: none stored, which for a
    /// layout-2 index means no object has tokens in it yet).
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` for a value that is not a total.
    func storedTextTotal(of id: TextTotalId, bucket: String, reader: any StorageReader) throws(BuriError) -> Int? {
        let key = Keyspace.textTotalKey(bucket: id.bucket, index: id.index)
        guard let value = try run(bucket: bucket, { try reader.get(key) }) else { return nil }
        guard let total = Keyspace.parseCount(value) else {
            throw .corruption(
                bucket: bucket, key: nil, index: nil,
                reason:
                    "the token total of text index id \(id.index) is \(value.count) bytes, not an 8-byte count; run `buri check --repair`, which recomputes it"
            )
        }
        return total
    }

    /// The number of record keys under bucket id `id` at `reader`, counted one by one.
    func countRecords(of id: UInt32, bucket: String, reader: any StorageReader) throws(BuriError) -> Int {
        try run(bucket: bucket) {
            let cursor = try reader.cursor(in: .prefix(Keyspace.recordPrefix(bucket: id)))
            var count = 0
            while try cursor.next() { count += 1 }
            return count
        }
    }

    /// The exact object count of bucket id `id` at `reader`: the stored count, or, where none is
    /// stored (see ``storedCount(of:bucket:reader:)``), the records counted.
    func objectCount(of id: UInt32, bucket: String, reader: any StorageReader) throws(BuriError) -> Int {
        if let stored = try storedCount(of: id, bucket: bucket, reader: reader) { return stored }
        return try countRecords(of: id, bucket: bucket, reader: reader)
    }

    /// Puts into `batch` the new count of every bucket id a writer changed, read through `reader`
    /// (the view the writer's changes were made against; on a shared engine a recording reader, so
    /// the count key is a condition of the commit and two clients' increments never overwrite each
    /// other). Returns the ids whose counts the batch now holds.
    func putCounts(
        _ counts: CountDeltas, reader: any StorageReader, into batch: any StorageBatch
    ) throws(BuriError) -> Set<UInt32> {
        for (id, change) in counts.tokens {
            let base = try storedTextTotal(of: id, bucket: change.bucket, reader: reader) ?? 0
            batch.put(
                Keyspace.textTotalKey(bucket: id.bucket, index: id.index), Keyspace.countValue(base + change.delta))
        }
        guard !counts.byId.isEmpty else { return [] }
        // Before version 4 no count is trusted: the upgrade counts every bucket (see `commit`).
        let upgrading = formatVersion < Int(Keyspace.countsVersion)
        var counted = Set<UInt32>()
        for (id, change) in counts.byId {
            let base =
                upgrading
                ? try countRecords(of: id, bucket: change.bucket, reader: reader)
                : try objectCount(of: id, bucket: change.bucket, reader: reader)
            batch.put(Keyspace.countKey(bucket: id), Keyspace.countValue(base + change.delta))
            counted.insert(id)
        }
        return counted
    }

    /// For the upgrade to version 4: puts the count of every bucket in the catalog at `reader`,
    /// counted from its records, except those in `except`.
    func putAllCounts(reader: any StorageReader, into batch: any StorageBatch, except: Set<UInt32>) throws {
        for descriptor in try allBucketInfo(reader: reader) where !except.contains(descriptor.id) {
            let count = try countRecords(of: descriptor.id, bucket: descriptor.name, reader: reader)
            batch.put(Keyspace.countKey(bucket: descriptor.id), Keyspace.countValue(count))
        }
    }
}
