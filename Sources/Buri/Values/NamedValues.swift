import BuriStorage

/// Values of any `Codable` type kept under names, outside every bucket: the entry points of an
/// app's data (the last sync date, the current user's key, a settings struct), as
/// BNRPersistence names data buffers and NanoStore keeps bags.
///
/// ```swift
/// try db.values.set(Date(), for: "lastSync")
/// let lastSync = try db.values.get(Date.self, for: "lastSync")     // Date?
/// let same = try db.values["lastSync", as: Date.self]
/// try db.values.remove("lastSync")
/// ```
///
/// Get it from ``BuriDatabase/values`` (each call its own atomic commit) or from a transaction's
/// ``BuriTransaction/values``, which reads the transaction's own writes and commits them with its
/// bucket writes. Each value is stored as the CBOR encoding of the value (the same encoding as an
/// object's payload) under the key `06 || utf8(name)` (docs/FORMAT.md §3a).
///
/// Names are 1 to 1024 bytes of UTF-8, compared as bytes, never by Swift `String` equality:
/// `"\u{E9}"` and `"e\u{301}"` are two names. A value read as another type than it holds is
/// ``BuriError/valueDecodingFailed(name:type:reason:)``, never a wrong value or `nil`. Change
/// streams (``BuriDatabase/changes(includingObjects:bufferLimit:)``) report objects only; a value
/// is observed with ``observe(_:for:)``.
///
/// ## Topics
/// - ``set(_:for:sync:)-52w5g``
/// - ``get(_:for:)-2n831``
/// - ``subscript(_:as:)``
/// - ``remove(_:sync:)-4sdhm``
/// - ``names()-9plfr``
/// - ``contains(_:)``
/// - ``cbor(for:)``
/// - ``setCBOR(_:for:sync:)``
/// - ``observe(_:for:)``
public struct NamedValues: Sendable {
    let database: BuriDatabase
    /// The transaction the values are read and written through, if any.
    let transaction: BuriTransaction?

    init(database: BuriDatabase, transaction: BuriTransaction?) {
        self.database = database
        self.transaction = transaction
    }

    // MARK: Reading

    /// The value stored under `name`, decoded as `T`; `nil` when nothing is stored under it.
    ///
    /// ```swift
    /// if let lastSync = try db.values.get(Date.self, for: "lastSync") { print(lastSync) }
    /// ```
    /// - Throws: ``BuriError/valueDecodingFailed(name:type:reason:)`` when the stored value is not a
    ///   `T` (or is damaged), ``BuriError/invalidValueName(name:reason:)`` for an empty or too long name.
    public func get<T: Decodable>(_ type: T.Type, for name: String) throws(BuriError) -> T? {
        guard let bytes = try cbor(for: name) else { return nil }
        do {
            return try CBORDecoder().decode(T.self, from: bytes)
        } catch {
            let damaged = (try? CBORValue(decoding: bytes)) == nil
            throw .valueDecodingFailed(
                name: name, type: String(describing: T.self),
                reason: damaged
                    ? "the stored \(bytes.count) bytes are not one CBOR item: the value is damaged"
                    : String(describing: error))
        }
    }

    /// The value stored under `name` as `T` (`nil` when there is none): ``get(_:for:)-2n831`` as a subscript.
    ///
    /// ```swift
    /// let theme = try db.values["theme", as: String.self] ?? "light"
    /// ```
    public subscript<T: Decodable>(name: String, as type: T.Type) -> T? {
        get throws(BuriError) { try get(type, for: name) }
    }

    /// Whether a value is stored under `name`.
    ///
    /// ```swift
    /// if try !db.values.contains("installedAt") { try db.values.set(Date(), for: "installedAt") }
    /// ```
    public func contains(_ name: String) throws(BuriError) -> Bool {
        try cbor(for: name) != nil
    }

    /// The stored CBOR bytes of the value under `name`, as they are (for tools that read values
    /// without their Swift types); `nil` when nothing is stored under it.
    ///
    /// ```swift
    /// if let bytes = try db.values.cbor(for: "lastSync") { print(try CBORValue(decoding: bytes).jsonString()) }
    /// ```
    public func cbor(for name: String) throws(BuriError) -> [UInt8]? {
        try Self.validate(name)
        let reader = try reader()
        return try database.run { try reader.get(Keyspace.valueKey(name: name)) }
    }

    /// The names of every stored value, in bytewise order of their UTF-8.
    ///
    /// ```swift
    /// for name in try db.values.names() { print(name) }
    /// ```
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` for a stored name that is not
    ///   valid UTF-8 (never a shorter list).
    public func names() throws(BuriError) -> [String] {
        let reader = try reader()
        return try database.run {
            let cursor = try reader.cursor(in: Keyspace.valueRange)
            var names: [String] = []
            while try cursor.next() {
                guard let name = Keyspace.valueName(fromValueKey: cursor.key) else {
                    throw BuriError.corruption(
                        bucket: nil, key: nil, index: nil,
                        reason: "a named value's key (\(cursor.key.count) bytes) holds no valid UTF-8 name")
                }
                names.append(name)
            }
            return names
        }
    }

    // MARK: Writing

    /// Stores `value` under `name`, replacing what was there (of any type): one atomic commit, or,
    /// inside ``BuriDatabase/write(_:)-1pxia``, part of the transaction.
    ///
    /// ```swift
    /// try db.values.set(Settings(theme: "dark", fontSize: 14), for: "settings")
    /// ```
    /// - Parameters:
    ///   - value: the value, encoded as an object's payload is (CBOR).
    ///   - name: 1 to 1024 bytes of UTF-8.
    ///   - sync: whether the commit waits for the disk (default: ``BuriOptions/syncWrites``;
    ///     ignored inside a transaction, which commits as a whole).
    /// - Throws: ``BuriError/invalidValueName(name:reason:)``, ``BuriError/valueEncodingFailed(name:reason:)``
    ///   (nothing is written), and storage errors.
    public func set<T: Encodable>(_ value: T, for name: String, sync: Bool? = nil) throws(BuriError) {
        try Self.validate(name)
        let bytes: [UInt8]
        do {
            bytes = try CBOREncoder().encode(value)
        } catch {
            throw .valueEncodingFailed(name: name, reason: String(describing: error))
        }
        try write(sync: sync) { writer in writer.batch.put(Keyspace.valueKey(name: name), bytes) }
    }

    /// Stores the CBOR item `bytes` under `name` as it is (for tools that write values without
    /// their Swift types: `buri set-value`, `buri restore`).
    ///
    /// ```swift
    /// try db.values.setCBOR(try CBORValue(json: #"{"theme":"dark"}"#).encoded(), for: "settings")
    /// ```
    /// - Throws: ``BuriError/valueEncodingFailed(name:reason:)`` when `bytes` are not one CBOR item,
    ///   or hold a map with a key twice (nothing is written).
    public func setCBOR(_ bytes: [UInt8], for name: String, sync: Bool? = nil) throws(BuriError) {
        try Self.validate(name, cbor: bytes)
        try write(sync: sync) { writer in writer.batch.put(Keyspace.valueKey(name: name), bytes) }
    }

    /// Removes the value stored under `name`; returns whether there was one.
    ///
    /// ```swift
    /// try db.values.remove("lastSync")
    /// ```
    @discardableResult
    public func remove(_ name: String, sync: Bool? = nil) throws(BuriError) -> Bool {
        try Self.validate(name)
        let key = Keyspace.valueKey(name: name)
        return try write(sync: sync) { writer throws(BuriError) -> Bool in
            guard try database.run({ try writer.reader.get(key) }) != nil else { return false }
            writer.batch.delete(key)
            return true
        }
    }

    // MARK: Plumbing

    /// The view reads go through: the transaction's (its own writes included), or the current state.
    func reader() throws(BuriError) -> any StorageReader {
        if let transaction { return try transaction.reader() }
        return try database.currentReader()
    }

    /// One write: a statement of the transaction (undone if it throws), or its own commit through
    /// the path every bucket write takes (header upgrade, conflicts and retries on shared engines).
    func write<R>(sync: Bool?, _ body: (Writer) throws(BuriError) -> R) throws(BuriError) -> R {
        if let transaction { return try transaction.statement(body) }
        return try database.performWrite(sync: sync, body)
    }

    /// Checks a name and CBOR bytes to store under it: one item, no map with a key twice.
    static func validate(_ name: String, cbor bytes: [UInt8]) throws(BuriError) {
        try validate(name)
        let item: CBORValue
        do {
            item = try CBORValue(decoding: bytes)
        } catch {
            throw .valueEncodingFailed(name: name, reason: "the bytes are not one CBOR item: \(error)")
        }
        if let repeated = item.firstRepeatedMapKey() {
            throw .valueEncodingFailed(
                name: name, reason: "a map holds the key \(repeated.jsonString()) twice; give each key once")
        }
    }

    /// Checks a name: 1 to 1024 bytes of UTF-8.
    static func validate(_ name: String) throws(BuriError) {
        if name.isEmpty {
            throw .invalidValueName(name: name, reason: "the name is empty; give a name of 1 to 1024 bytes")
        }
        let length = name.utf8.count
        if length > Keyspace.maxValueNameLength {
            throw .invalidValueName(
                name: name,
                reason:
                    "the name is \(length) bytes of UTF-8, over the limit of \(Keyspace.maxValueNameLength); use a shorter name"
            )
        }
    }
}

extension BuriDatabase {
    /// The database's named values (see ``NamedValues``); each write is its own atomic commit.
    ///
    /// ```swift
    /// try db.values.set(Date(), for: "lastSync")
    /// let lastSync = try db.values.get(Date.self, for: "lastSync")
    /// ```
    public var values: NamedValues { NamedValues(database: self, transaction: nil) }
}

extension BuriTransaction {
    /// The named values as this transaction sees them (its own writes included); in
    /// ``BuriDatabase/write(_:)-1pxia`` what it sets and removes commits with its bucket writes, all or nothing.
    ///
    /// ```swift
    /// try db.write { tx in
    ///     try tx.bucket(Person.self).store(anna)
    ///     try tx.values.set(Date(), for: "lastSync")     // both or neither
    /// }
    /// ```
    public var values: NamedValues { NamedValues(database: database, transaction: self) }
}
