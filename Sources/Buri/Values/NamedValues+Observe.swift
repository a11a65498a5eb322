extension NamedValues {
    /// The value stored under `name` as `T` (`nil` while there is none), now and after every
    /// commit that sets or removes it; commits that do not touch it do not wake it (see
    /// ``LiveQuery`` for the guarantees). Observe from ``BuriDatabase/values``, not a transaction's.
    ///
    /// ```swift
    /// for try await lastSync in try db.values.observe(Date.self, for: "lastSync") {
    ///     label = lastSync.map { "synced \($0)" } ?? "never synced"
    /// }
    /// ```
    /// - Throws: ``BuriError/invalidValueName(name:reason:)`` at once; the sequence ends with
    ///   ``BuriError/valueDecodingFailed(name:type:reason:)`` if the value stops being a `T`.
    public func observe<T: Decodable & Sendable>(_ type: T.Type, for name: String) throws(BuriError) -> LiveQuery<T?> {
        if transaction != nil {
            throw .invalidTransaction(
                reason: "a live query observes committed data; observe the value from `db.values`, not a transaction's")
        }
        try Self.validate(name)
        let values = self
        return try database.liveValue(key: Keyspace.valueKey(name: name)) { () throws(BuriError) -> T? in
            try values.get(T.self, for: name)
        }
    }
}

extension BuriDatabase {
    /// The value stored under `name` as `T`, now and after every commit that changes it:
    /// ``NamedValues/observe(_:for:)`` on ``values``.
    ///
    /// ```swift
    /// for try await lastSync in try db.observeValue(Date.self, for: "lastSync") { print(lastSync as Any) }
    /// ```
    public func observeValue<T: Decodable & Sendable>(
        _ type: T.Type, for name: String
    ) throws(BuriError) -> LiveQuery<T?> {
        try values.observe(type, for: name)
    }

    /// A live query of the named value under `key`, answering with `run`.
    func liveValue<Element: Sendable>(
        key: [UInt8], _ run: @escaping @Sendable () throws(BuriError) -> Element
    ) throws(BuriError) -> LiveQuery<Element> {
        // Bucket id 0 is never given: the state follows no bucket.
        let state = LiveQueryState(relevance: LiveQueryRelevance(records: .none, namedValue: key), bucket: 0)
        return try liveQuery(state: state, interest: .value(key)) { _ throws(BuriError) in try run() }
    }
}
