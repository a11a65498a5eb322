import BuriStorage

// Maintenance and inspection calls for tools (`buri stats`, `buri compact`, `buri keys --prefix`)
// that need the storage layer underneath an open database without opening a second handle.

extension BuriDatabase {
    /// The value of a property of the storage engine; for LevelDB such as `"leveldb.stats"`,
    /// `"leveldb.sstables"`, `"leveldb.num-files-at-level0"` or `"leveldb.approximate-memory-usage"`;
    /// `nil` if the engine does not know the property.
    ///
    /// ```swift
    /// print(try db.storageProperty("leveldb.stats") ?? "")
    /// ```
    public func storageProperty(_ name: String) throws(BuriError) -> String? {
        try checkOpen()
        return try run { try engine.property(name) }
    }

    /// Compacts the whole underlying store: first merges every text index's segments, so that
    /// each term's postings are in as few segments as they fit and no tombstone is left
    /// (`docs/FORMAT.md` §5c), then rewrites the engine's table files, dropping deleted and
    /// overwritten data. Blocks until done; reads and writes may continue meanwhile.
    ///
    /// ```swift
    /// try db.compact()
    /// ```
    public func compact() throws(BuriError) {
        try checkOpen()
        if !engine.isShared {
            for name in try bucketNames() {
                let bucket = try rawBucket(named: name)
                try bucket.mergeSegments(everything: true)
                segmentMerges.reset(bucket: bucket.bucketId)
            }
        }
        try run { try engine.compact(nil) }
    }
}

extension RawBucket {
    /// The keys of the objects whose key begins with `prefix` (bytewise, as UTF-8), in key order
    /// (or reverse order), at most `limit` of them. Reads only record keys, never values.
    ///
    /// ```swift
    /// let keys = try raw.keys(withPrefix: "person-000", limit: 10)
    /// ```
    public func keys(withPrefix prefix: String, reverse: Bool = false, limit: Int? = nil) throws(BuriError) -> [String]
    {
        try keys(withPrefix: prefix, from: nil, to: nil, reverse: reverse, limit: limit)
    }

    /// One end of a range of object keys, compared bytewise as UTF-8.
    public enum KeyBound: Sendable, Hashable {
        /// This key and those beyond it.
        case inclusive(String)
        /// Only keys beyond this one.
        case exclusive(String)
    }

    /// The keys of the objects in a key range (bytewise, as UTF-8) that begin with `prefix`, in key
    /// order (or reverse order), at most `limit` of them. The walk starts at the range's first key,
    /// and reads only record keys, never values.
    ///
    /// ```swift
    /// let keys = try raw.keys(from: .inclusive("person-00100"), to: .exclusive("person-00200"))
    /// ```
    public func keys(
        withPrefix prefix: String = "", from lower: KeyBound?, to upper: KeyBound?, reverse: Bool = false,
        limit: Int? = nil
    ) throws(BuriError) -> [String] {
        if let limit, limit <= 0 { return [] }
        // The record keys are the bucket's record prefix followed by the key's bytes, so a key
        // range is a range of record keys: just after a key is that key followed by byte 0.
        let (reader, bucket) = try readView()
        let recordPrefix = bucket.recordPrefix
        var range = KeyRange.prefix(recordPrefix + Array(prefix.utf8))
        if let lower {
            let start: [UInt8]
            switch lower {
            case .inclusive(let key): start = recordPrefix + Array(key.utf8)
            case .exclusive(let key): start = recordPrefix + Array(key.utf8) + [0]
            }
            if let current = range.start, !current.lexicographicallyPrecedes(start) {} else { range.start = start }
        }
        if let upper {
            let end: [UInt8]
            switch upper {
            case .inclusive(let key): end = recordPrefix + Array(key.utf8) + [0]
            case .exclusive(let key): end = recordPrefix + Array(key.utf8)
            }
            if let current = range.end, current.lexicographicallyPrecedes(end) {} else { range.end = end }
        }
        if let start = range.start, let end = range.end, !start.lexicographicallyPrecedes(end) { return [] }
        return try run {
            let cursor = try reader.cursor(in: range, reverse: reverse)
            var keys: [String] = []
            while try cursor.next() {
                let key = try cursor.withKey { raw throws -> String in
                    do {
                        return try Keyspace.objectKey(fromRecordKey: raw)
                    } catch {
                        throw BuriError.corruption(bucket: name, key: nil, index: nil, reason: "record key: \(error)")
                    }
                }
                keys.append(key)
                if let limit, keys.count >= limit { break }
            }
            return keys
        }
    }
}
