import BuriStorage
import BuriText

extension Bucket {
    /// The objects whose text index `index` matches `query` (SQLite FTS5 syntax, see
    /// `TextQuery`), in object-key byte order, each once, read from one snapshot.
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

    /// The `limit` objects that match `query` best by BM25 (SQLite FTS5's `bm25()`, see
    /// `TextRanker`), best first, equal scores in key order, read from one snapshot. Only as
    /// many objects as returned are read; a query of required words or of alternatives does not
    /// score every match when the best k are known sooner.
    ///
    /// ```swift
    /// for hit in try notes.rankedSearch("body", "apple pie", limit: 20) { print(hit.score, hit.object.title) }
    /// ```
    ///
    /// `filter` keeps only the objects that also satisfy its conditions and predicates (index
    /// conditions, OR, NOT, filters; checked only for objects that would enter the top k); scores
    /// stay those of the whole bucket:
    ///
    /// ```swift
    /// let recent = try notes.rankedSearch("body", "apple pie", limit: 20, where: .index("year", in: 2020...))
    /// ```
    /// - Throws: as ``search(_:_:)-(String,String)``, and ``BuriError/invalidQuery(bucket:index:reason:)``
    ///   for an index made by Buri format 6 (rebuilt when the bucket is opened with its `.text`
    ///   declaration) or a `filter` with an order, limit, offset or token.
    public func rankedSearch(
        _ index: String, _ query: String, limit: Int, where filter: Query = .all
    ) throws(BuriError) -> [Ranked<T>] {
        try rankedSearch(index, raw.parseTextQuery(query, index: index), limit: limit, where: filter)
    }

    /// The `limit` best objects for an already parsed query (see ``rankedSearch(_:_:limit:where:)-(String,String,_,_)``).
    ///
    /// ```swift
    /// let best = try notes.rankedSearch("body", .or([.term(Array("apple".utf8)), .term(Array("pie".utf8))]), limit: 5)
    /// ```
    public func rankedSearch(
        _ index: String, _ query: TextQuery, limit: Int, where filter: Query = .all
    ) throws(BuriError) -> [Ranked<T>] {
        let (reader, view) = try raw.readView()
        let ranked = try view.rankedTextSearch(
            index: index, query: query, limit: limit, filter: checked(filter), reader: reader)
        let objects = try objects(atKeys: ranked.map(\.key), index: index, reader: reader, view: view)
        return zip(ranked, objects).map { hit, object in
            Ranked(object: object, key: String(decoding: hit.key, as: UTF8.self), score: hit.score)
        }
    }

    /// The keys and scores of ``rankedSearch(_:_:limit:where:)-(String,String,_,_)``, without reading objects.
    ///
    /// ```swift
    /// let best = try notes.rankedSearchKeys("body", "apple OR pie", limit: 10).map(\.key)
    /// ```
    public func rankedSearchKeys(
        _ index: String, _ query: String, limit: Int, where filter: Query = .all
    ) throws(BuriError) -> [RankedKey] {
        try raw.rankedSearch(index: index, query: query, limit: limit, where: checked(filter))
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
