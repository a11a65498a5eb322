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

    /// Compacts the whole underlying store: rewrites its table files, dropping deleted and
    /// overwritten data. Blocks until done; reads and writes may continue meanwhile.
    public func compact() throws(BuriError) {
        try checkOpen()
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
    public func keys(withPrefix prefix: String, reverse: Bool = false, limit: Int? = nil) throws(BuriError) -> [String] {
        if let limit, limit <= 0 { return [] }
        let reader = try reader()
        return try run {
            let cursor = try reader.cursor(in: .prefix(recordPrefix + Array(prefix.utf8)), reverse: reverse)
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
