import BuriStorage

// Point reads and counts: one object's record or payload, whether it exists, how many objects or
// index entries the bucket holds.
extension RawBucket {
    /// Lends the payload (CBOR bytes) of object `key` to `body`; returns `false`, without calling
    /// it, if there is no such object. Checks the header without building it.
    @discardableResult
    func withPayload(forKey key: String, _ body: (UnsafeRawBufferPointer, UInt64) -> Void) throws(BuriError) -> Bool {
        try withCurrentValue(forKey: key) { buffer throws -> Bool in
            guard let buffer else { return false }
            let version: UInt64
            let offset: Int
            do {
                (version, offset) = try RecordHeader.versionAndPayloadOffset(buffer)
            } catch {
                throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
            }
            body(UnsafeRawBufferPointer(rebasing: buffer[offset...]), version)
            return true
        }
    }

    /// The stored payload (CBOR bytes) and header of object `key`, or `nil`.
    public func record(forKey key: String) throws(BuriError) -> StoredRecord? {
        try withCurrentValue(forKey: key) { buffer throws -> StoredRecord? in
            guard let buffer else { return nil }
            let header: RecordHeader
            let offset: Int
            do {
                (header, offset) = try RecordHeader.parse(buffer)
            } catch {
                throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
            }
            return StoredRecord(
                key: key, schemaVersion: header.schemaVersion, indexValues: indexValues(of: header),
                payload: Array(buffer[offset...]))
        }
    }

    /// Whether object `key` exists.
    public func contains(key: String) throws(BuriError) -> Bool {
        try withCurrentValue(forKey: key) { $0 != nil }
    }

    /// The number of objects in the bucket: one key read, the count every writer keeps in the same
    /// commit as the records (a database older than format 4, opened without writing, is counted
    /// record by record).
    ///
    /// ```swift
    /// try raw.count()   // 100_000, without reading a record
    /// ```
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` if the stored count is damaged
    ///   (`buri check --repair` recounts it).
    public func count() throws(BuriError) -> Int {
        let (reader, bucket) = try readView()
        let id = bucket.bucketId
        guard let stored = try database.storedCount(of: id, bucket: name, reader: reader) else {
            return try database.countRecords(of: id, bucket: name, reader: reader)
        }
        // Inside a transaction the count key is written at its commit: add what it changed so far.
        return stored + (transaction?.counts.byId[id]?.delta ?? 0)
    }

    /// Walks the bucket's records after object key `after` (from the first without it), in key
    /// order, from one snapshot, lending each one's key bytes and schema version to `body` until
    /// it returns `false`.
    func forEachRecordVersion(after: [UInt8]?, _ body: ([UInt8], UInt64) -> Bool) throws(BuriError) {
        let (reader, bucket) = try readView()
        var range = KeyRange.prefix(bucket.recordPrefix)
        if let after { range.start = bucket.recordPrefix + after + [0] }
        try run { () throws -> Void in
            let cursor = try reader.cursor(in: range)
            while try cursor.next() {
                let key = cursor.withKey { Array($0[Keyspace.recordPrefixLength...]) }
                let version: UInt64
                do {
                    version = try cursor.withValue { try RecordHeader.versionAndPayloadOffset($0).schemaVersion }
                } catch {
                    throw BuriError.corruption(
                        bucket: name, key: String(decoding: key, as: UTF8.self), index: nil,
                        reason: "record header: \(error)")
                }
                if !body(key, version) { return }
            }
        }
    }

    /// The number of objects as `reader` sees them, from the stored count (`nil` if the bucket
    /// keeps none).
    func objectCount(reader: any StorageReader) throws(BuriError) -> Int? {
        let id = bucketId
        guard let stored = try database.storedCount(of: id, bucket: name, reader: reader) else { return nil }
        return stored + (transaction?.counts.byId[id]?.delta ?? 0)
    }

    /// The number of entries index `index` holds (an object has one per distinct value of a
    /// multi-valued index, and one per distinct term of a text index, whether it is stored as an
    /// entry of its own or in a segment), counted from the index alone.
    public func entryCount(index: String) throws(BuriError) -> Int {
        guard let definition = descriptor.index(named: index) else {
            throw .unknownIndex(bucket: name, index: index, known: madeDescriptor.indexes.map(\.name))
        }
        let (reader, bucket) = try readView()
        return try countEntries(
            in: .prefix(Keyspace.indexPrefix(bucket: bucket.bucketId, index: definition.id)),
            reader: bucket.postingsReader(reader), cap: nil)
    }

    /// How a text index stores its postings: how many segments and tombstones it holds
    /// (`docs/FORMAT.md` §5c); `nil` for an index that is not a text index. Large writes put
    /// postings in segments, replacing or deleting their objects leaves tombstones, and merges
    /// (``BuriDatabase/compact()`` merges everything) keep both few.
    ///
    /// ```swift
    /// if let grouped = try raw.textPostingStorage(index: "body") {
    ///     print("\(grouped.segments) segments, \(grouped.tombstones) tombstones")
    /// }
    /// ```
    public func textPostingStorage(index: String) throws(BuriError) -> TextPostingStorage? {
        guard let definition = descriptor.index(named: index) else {
            throw .unknownIndex(bucket: name, index: index, known: madeDescriptor.indexes.map(\.name))
        }
        guard definition.text != nil else { return nil }
        let (reader, bucket) = try readView()
        let prefix = Keyspace.indexPrefix(bucket: bucket.bucketId, index: definition.id)
        return TextPostingStorage(
            segments: try countEntries(in: .prefix(prefix + [GroupedPostingKeys.segmentTag]), reader: reader, cap: nil),
            tombstones: try countEntries(
                in: .prefix(prefix + [GroupedPostingKeys.tombstoneTag]), reader: reader, cap: nil))
    }

    /// Counts the keys in `range`, stopping at `cap`.
    func countEntries(in range: KeyRange, reader: any StorageReader, cap: Int?) throws(BuriError) -> Int {
        try run {
            let cursor = try reader.cursor(in: range)
            var count = 0
            while try cursor.next() {
                count += 1
                if let cap, count >= cap { break }
            }
            return count
        }
    }

    /// The decoded index values of a header, by index name (as bytes: see ``IndexName``).
    func indexValues(of header: RecordHeader) -> [IndexName: [[IndexValue]]] {
        var result: [IndexName: [[IndexValue]]] = [:]
        for entry in header.entries {
            let name = madeDescriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
            result[IndexName(name), default: []].append(IndexTuple.split(entry.tuple))
        }
        return result
    }
}

/// A stored object as raw data: its key, schema version, index values and CBOR payload.
public struct StoredRecord: Sendable, Hashable {
    public var key: String
    public var schemaVersion: UInt64
    /// The object's index values as stored, by index name (one tuple per entry). Names are
    /// compared as bytes (see ``IndexName``): `record.indexValues["age"]`.
    public var indexValues: [IndexName: [[IndexValue]]]
    /// The CBOR encoding of the object.
    public var payload: [UInt8]
}

/// How a text index stores its postings (``RawBucket/textPostingStorage(index:)``).
public struct TextPostingStorage: Sendable, Hashable {
    /// Values holding many objects' postings of one term.
    public var segments: Int
    /// Postings in segments cancelled by a later replace or delete, until a merge drops both.
    public var tombstones: Int
}
