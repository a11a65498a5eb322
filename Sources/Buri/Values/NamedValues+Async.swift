// async/await: the same calls as the blocking API, doing their storage work on Buri's storage
// queue, so the caller's executor is free while the engine reads or writes (as Bucket+Async.swift).

extension NamedValues {
    /// Stores `value` under `name` (see ``set(_:for:sync:)-52w5g``), suspending instead of blocking the caller.
    ///
    /// ```swift
    /// try await db.values.set(Date(), for: "lastSync")
    /// ```
    public func set<T: Encodable & Sendable>(_ value: T, for name: String, sync: Bool? = nil) async throws(BuriError) {
        try await StorageQueue.run { [self] () throws(BuriError) in try set(value, for: name, sync: sync) }
    }

    /// The value stored under `name` as `T` (see ``get(_:for:)-2n831``), suspending instead of blocking the caller.
    ///
    /// ```swift
    /// let lastSync = try await db.values.get(Date.self, for: "lastSync")
    /// ```
    public func get<T: Decodable & Sendable>(_ type: T.Type, for name: String) async throws(BuriError) -> T? {
        try await StorageQueue.run { [self] () throws(BuriError) -> T? in try get(type, for: name) }
    }

    /// Removes the value stored under `name` (see ``remove(_:sync:)-4sdhm``), suspending instead of
    /// blocking the caller; returns whether there was one.
    ///
    /// ```swift
    /// try await db.values.remove("lastSync")
    /// ```
    @discardableResult
    public func remove(_ name: String, sync: Bool? = nil) async throws(BuriError) -> Bool {
        try await StorageQueue.run { [self] () throws(BuriError) -> Bool in try remove(name, sync: sync) }
    }

    /// The names of every stored value (see ``names()-9plfr``), suspending instead of blocking the caller.
    ///
    /// ```swift
    /// for name in try await db.values.names() { print(name) }
    /// ```
    public func names() async throws(BuriError) -> [String] {
        try await StorageQueue.run { [self] () throws(BuriError) -> [String] in try names() }
    }
}
