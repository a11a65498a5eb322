import BuriStorage

// async/await: the same calls as the blocking API, doing their storage work on Buri's storage
// queue (see docs/OBSERVATION.md, "Which calls block, which suspend"). The caller's executor —
// the main actor, an actor, the cooperative pool — is free while LevelDB reads or writes.

extension Bucket where T: Sendable {
    /// Stores `object` (see ``store(_:)-iduc``), suspending instead of blocking the caller.
    ///
    /// ```swift
    /// try await people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
    /// ```
    public func store(_ object: T) async throws(BuriError) {
        try await StorageQueue.run { [self] () throws(BuriError) in try store(object) }
    }

    /// Stores every object in one atomic batch (see ``store(_:)-(Sequence<T>)``), suspending
    /// instead of blocking the caller.
    ///
    /// ```swift
    /// try await people.store([anna, lars])
    /// ```
    public func store(_ objects: [T]) async throws(BuriError) {
        try await StorageQueue.run { [self] () throws(BuriError) in try store(objects) }
    }

    /// Stores every object in one atomic batch, encoding a large array on every core (see
    /// ``storeConcurrently(_:)-7sfjs``), suspending instead of blocking the caller.
    ///
    /// ```swift
    /// try await people.storeConcurrently(thousandsOfPeople)
    /// ```
    public func storeConcurrently(_ objects: [T]) async throws(BuriError) {
        try await StorageQueue.run { [self] () throws(BuriError) in try storeConcurrently(objects) }
    }

    /// Deletes the object stored under `key`; returns whether there was one.
    ///
    /// ```swift
    /// let removed = try await people.delete(key: "p1")
    /// ```
    @discardableResult
    public func delete(key: String) async throws(BuriError) -> Bool {
        try await StorageQueue.run { [self] () throws(BuriError) in try delete(key: key) }
    }

    /// Deletes the objects stored under `keys` in one atomic batch; returns how many there were.
    @discardableResult
    public func delete(keys: [String]) async throws(BuriError) -> Int {
        try await StorageQueue.run { [self] () throws(BuriError) in try delete(keys: keys) }
    }

    /// The object stored under `key`, or `nil`.
    ///
    /// ```swift
    /// let dirk = try await people.object(forKey: "p1")
    /// ```
    public func object(forKey key: String) async throws(BuriError) -> T? {
        try await StorageQueue.run { [self] () throws(BuriError) in try object(forKey: key) }
    }

    /// The objects matching `query` (all by default), read from one snapshot.
    ///
    /// ```swift
    /// let adults = try await people.objects(.index("age", in: 18...))
    /// ```
    public func objects(_ query: Query = .all) async throws(BuriError) -> [T] {
        try await StorageQueue.run { [self] () throws(BuriError) in try objects(query) }
    }

    /// The keys matching `query` (all by default).
    ///
    /// ```swift
    /// let english = try await people.keys(.index("locale", equals: "EN"))
    /// ```
    public func keys(_ query: Query = .all) async throws(BuriError) -> [String] {
        try await StorageQueue.run { [self] () throws(BuriError) in try keys(query) }
    }

    /// The number of objects matching `query`.
    ///
    /// ```swift
    /// let english = try await people.count(.index("locale", equals: "EN"))
    /// ```
    public func count(_ query: Query) async throws(BuriError) -> Int {
        try await StorageQueue.run { [self] () throws(BuriError) in try count(query) }
    }

    /// Count, exact sum, average, minimum and maximum of numeric index `index` over the objects
    /// `query` matches (see ``aggregate(_:where:)-5iolv``).
    ///
    /// ```swift
    /// let english = try await people.aggregate("age", where: .index("locale", equals: "EN"))
    /// ```
    public func aggregate(_ index: String, where query: Query = .all) async throws(BuriError) -> Aggregate {
        try await StorageQueue.run { [self] () throws(BuriError) in try aggregate(index, where: query) }
    }

    /// The aggregate of `index` per value of index `group` (see
    /// ``aggregate(_:where:groupedBy:)-9sgxp``).
    ///
    /// ```swift
    /// let byLocale = try await people.aggregate("age", groupedBy: "locale")
    /// ```
    public func aggregate(
        _ index: String, where query: Query = .all, groupedBy group: String
    ) async throws(BuriError)
        -> [AggregateGroup]
    {
        try await StorageQueue.run { [self] () throws(BuriError) in try aggregate(index, where: query, groupedBy: group)
        }
    }
}
