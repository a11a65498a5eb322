import BuriStorage
import BuriText

extension Bucket {
    /// The objects whose text index `index` matches `query` (SQLite FTS5 syntax, see
    /// ``TextQuery``), in object-key byte order, each once, read from one snapshot.
    ///
    /// ```swift
    /// let hits = try notes.search("body", "apple pie")          // both words
    /// let more = try notes.search("body", "\"apple pie\" OR tart* NOT pear")
    /// ```
    /// - Throws: ``BuriError/textQuerySyntax(bucket:index:query:message:offset:)`` for a query that
    ///   does not parse, ``BuriError/invalidQuery(bucket:index:reason:)`` when `index` is not a
    ///   text index, ``BuriError/corruption(bucket:key:index:reason:)`` for a damaged entry.
    public func search(_ index: String, _ query: String) throws(BuriError) -> [T] {
        try search(index, raw.parseTextQuery(query, index: index))
    }

    /// The objects matching an already parsed query (see ``search(_:_:)-(String,String)``).
    ///
    /// ```swift
    /// let query = try TextQuery.parse("apple*", tokenizer: .v1)
    /// let hits = try notes.search("body", query)
    /// ```
    public func search(_ index: String, _ query: TextQuery) throws(BuriError) -> [T] {
        let (reader, view) = try raw.readView()
        let keys = try view.textSearch(index: index, query: query, reader: reader)
        return try objects(atKeys: keys, index: index, reader: reader, view: view)
    }

    /// The keys of the objects ``search(_:_:)-(String,String)`` returns, without reading them.
    ///
    /// ```swift
    /// let keys = try notes.searchKeys("body", "apple")
    /// ```
    public func searchKeys(_ index: String, _ query: String) throws(BuriError) -> [String] {
        try searchKeys(index, raw.parseTextQuery(query, index: index))
    }

    /// The keys of the objects matching an already parsed query.
    ///
    /// ```swift
    /// let keys = try notes.searchKeys("body", .prefix(Array("app".utf8)))
    /// ```
    public func searchKeys(_ index: String, _ query: TextQuery) throws(BuriError) -> [String] {
        let (reader, view) = try raw.readView()
        return try view.textSearch(index: index, query: query, reader: reader).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// How many objects ``search(_:_:)-(String,String)`` returns, from index entries alone.
    ///
    /// ```swift
    /// let count = try notes.searchCount("body", "apple OR pear")
    /// ```
    public func searchCount(_ index: String, _ query: String) throws(BuriError) -> Int {
        try searchCount(index, raw.parseTextQuery(query, index: index))
    }

    /// How many objects match an already parsed query.
    ///
    /// ```swift
    /// let count = try notes.searchCount("body", .term(Array("apple".utf8)))
    /// ```
    public func searchCount(_ index: String, _ query: TextQuery) throws(BuriError) -> Int {
        let (reader, view) = try raw.readView()
        return try view.textSearch(index: index, query: query, reader: reader).count
    }

    /// The objects stored under `keys` (found in index `index`) in `reader`'s view.
    private func objects(
        atKeys keys: [[UInt8]], index: String, reader: any StorageReader, view: RawBucket
    ) throws(BuriError) -> [T] {
        // Keys read from index entries, which `check` keeps valid UTF-8.
        let names = keys.map { String(decoding: $0, as: UTF8.self) }
        let batched = try view.readerForKeys(names, reader)
        var result: [T] = []
        result.reserveCapacity(keys.count)
        for key in names {
            var object: T?
            var failure: BuriError?
            try view.run {
                try batched.withValue(forKey: Keyspace.recordKey(bucket: view.bucketId, key: key)) { buffer in
                    do throws(BuriError) {
                        guard let buffer else {
                            throw BuriError.corruption(
                                bucket: view.name, key: key, index: index,
                                reason: "the text index has an entry for an object that is not stored")
                        }
                        object = try decodeRecord(buffer, key: key)
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw failure }
            if let object { result.append(object) }
        }
        return result
    }
}
