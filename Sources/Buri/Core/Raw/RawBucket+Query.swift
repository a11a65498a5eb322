import BuriStorage

// Queries: keys, counts, cursors and pages over the results of a `Query`, each from one snapshot.
extension RawBucket {
    /// The keys of the objects matching `query`, in index order. Reads only index entries (or
    /// record keys), never record values, unless the query has more than one condition.
    ///
    /// ```swift
    /// let english = try raw.keys(.index("locale", equals: "EN"))
    /// ```
    public func keys(_ query: Query) throws(BuriError) -> [String] {
        let cursor = try cursor(query)
        var keys: [String] = []
        while let key = try cursor.nextKey() { keys.append(key) }
        return keys
    }

    /// The number of objects matching `query`, counted from index entries without decoding objects.
    ///
    /// ```swift
    /// let adults = try raw.count(.index("age", in: 18...))
    /// ```
    public func count(_ query: Query) throws(BuriError) -> Int {
        if query.isUnrestricted { return try count() }
        let cursor = try cursor(query)
        var count = 0
        while try cursor.nextKey() != nil { count += 1 }
        return count
    }

    /// A streaming cursor over the results of `query`, reading from one snapshot (the name
    /// ``Bucket/cursor(_:)`` has for typed objects).
    ///
    /// ```swift
    /// let cursor = try raw.cursor(.index("age", in: 22...24))
    /// while let record = try cursor.nextRecord() { print(record.key, record.payload.count) }
    /// ```
    public func cursor(_ query: Query) throws(BuriError) -> RawQueryCursor {
        try cursor(query, strategy: .automatic)
    }

    /// A cursor over `query` planned with `strategy` (tests compare the strategies' results).
    func cursor(_ query: Query, strategy: QueryPlan.Strategy) throws(BuriError) -> RawQueryCursor {
        let (reader, bucket) = try readView()
        let plan = try QueryPlan(query, bucket: bucket, reader: reader, strategy: strategy)
        return try RawQueryCursor(bucket: bucket, plan: plan, reader: reader)
    }

    /// One page of at most `size` keys matching `query`, and a token for the next page
    /// (see ``Page`` for what a walk of pages returns).
    ///
    /// ```swift
    /// var page = try raw.keyPage(.index("age", in: 20...), size: 100)
    /// while let next = page.next { page = try raw.keyPage(.index("age", in: 20...).after(next), size: 100) }
    /// ```
    /// - Throws: ``BuriError/invalidQuery(bucket:index:reason:)`` if `size` is not positive,
    ///   ``BuriError/invalidContinuation(bucket:reason:)`` for a token of another bucket or query.
    public func keyPage(_ query: Query, size: Int) throws(BuriError) -> Page<String> {
        try page(query, size: size) { cursor throws(BuriError) in try cursor.nextKey() }
    }

    /// One page of at most `size` records matching `query`, and a token for the next page; pages
    /// as ``keyPage(_:size:)`` does (the name ``Bucket/page(_:size:)`` has for typed objects).
    ///
    /// ```swift
    /// let first = try raw.page(.index("age", in: 20...), size: 100)
    /// for record in first.items { print(record.key, record.indexValues["age"] ?? []) }
    /// ```
    /// - Throws: ``BuriError/invalidQuery(bucket:index:reason:)`` if `size` is not positive,
    ///   ``BuriError/invalidContinuation(bucket:reason:)`` for a token of another bucket or query.
    public func page(_ query: Query, size: Int) throws(BuriError) -> Page<StoredRecord> {
        try page(query, size: size) { cursor throws(BuriError) in try cursor.nextRecord() }
    }

    /// One page of what `next` reads from a cursor over `query`: at most `size` items, and a token
    /// when the walk has more (checked by moving past one more result).
    func page<Element>(
        _ query: Query, size: Int, strategy: QueryPlan.Strategy = .automatic,
        _ next: (RawQueryCursor) throws(BuriError) -> Element?
    ) throws(BuriError) -> Page<Element> {
        guard size > 0 else {
            throw .invalidQuery(
                bucket: name, index: nil, reason: "a page holds at least 1 result; the size given is \(size)")
        }
        let cursor = try cursor(query, strategy: strategy)
        var items: [Element] = []
        items.reserveCapacity(Swift.min(size, 1024))
        while items.count < size, let item = try next(cursor) { items.append(item) }
        guard items.count == size, let token = cursor.continuation else { return Page(items: items, next: nil) }
        return Page(items: items, next: try cursor.skipToNext() ? token : nil)
    }
}
