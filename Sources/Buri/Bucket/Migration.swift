// Migrations: a type declares its schema version and the steps from older ones; each step works on
// the record's self-describing value (a CBOR map), so no old Swift type is needed. A record of an
// older version is upgraded when read, and written back upgraded when next stored (or by
// `migrateAll`).

/// One step of a type's schema history: upgrades a record of version `from` to version `from + 1`,
/// working on the record's fields as stored (see ``MigrationRecord``).
///
/// ```swift
/// static let buri = BuriSchema<Person>(
///     key: \.objectId, indexes: [.binary("name", \.fullName)], schemaVersion: 2,
///     migrations: [
///         .from(0) { record in record.rename("name", to: "fullName") },
///         .from(1) { record in record.fill("age", with: 0) },
///     ])
/// ```
public struct BuriMigration: Sendable {
    /// The version this step upgrades from (to `from + 1`).
    public let from: Int
    /// The step as data, when it is made of ``MigrationStep``s: kept in the catalog, so that
    /// `buri migrate` can apply it without the app; `nil` for a step written in Swift.
    public let steps: [MigrationStep]?
    let body: @Sendable (inout MigrationRecord) throws -> Void

    /// The step from version `from` to `from + 1`, written in Swift (only the app can run it).
    public static func from(
        _ version: Int, _ body: @escaping @Sendable (inout MigrationRecord) throws -> Void
    ) -> BuriMigration {
        BuriMigration(from: version, steps: nil, body: body)
    }

    /// The step from version `from` to `from + 1` as data (renames, removals, defaults): the app
    /// and `buri migrate` both apply it.
    ///
    /// ```swift
    /// .from(0, .rename("name", to: "fullName"), .fill("email", with: ""), .remove("legacy"))
    /// ```
    public static func from(_ version: Int, _ steps: MigrationStep...) -> BuriMigration {
        from(version, steps)
    }

    /// The step from version `from` to `from + 1` made of `steps` (as the catalog keeps them).
    static func from(_ version: Int, _ steps: [MigrationStep]) -> BuriMigration {
        BuriMigration(from: version, steps: steps) { record in
            for step in steps { try step.apply(to: &record) }
        }
    }
}

/// One edit of a record's fields that a migration can keep as data (`docs/FORMAT.md` §5).
///
/// ```swift
/// .from(1, .rename("mail", to: "email"), .fill("verified", with: false), .remove("cache"))
/// ```
public struct MigrationStep: Codable, Sendable, Hashable {
    /// `rename`, `remove` or `fill`.
    public var op: String
    /// The field it applies to.
    public var field: String
    /// For `rename`: the new name.
    public var to: String?
    /// For `fill`: the value, as CBOR bytes.
    public var value: [UInt8]?

    /// Renames field `field` to `new` (nothing if there is none).
    public static func rename(_ field: String, to new: String) -> MigrationStep {
        MigrationStep(op: "rename", field: field, to: new, value: nil)
    }

    /// Removes field `field`.
    public static func remove(_ field: String) -> MigrationStep {
        MigrationStep(op: "remove", field: field, to: nil, value: nil)
    }

    /// Sets field `field` to `value` where the record has no such field.
    public static func fill(_ field: String, with value: CBORValue) -> MigrationStep {
        MigrationStep(op: "fill", field: field, to: nil, value: value.encoded())
    }

    /// Applies the edit.
    /// - Throws: ``BuriError/invalidMigration(reason:)`` for an edit this version does not know.
    public func apply(to record: inout MigrationRecord) throws(BuriError) {
        switch op {
        case "rename":
            guard let to else { throw .invalidMigration(reason: "rename of '\(field)' names no new field") }
            record.rename(field, to: to)
        case "remove":
            record.remove(field)
        case "fill":
            guard let value, let decoded = try? CBORValue(decoding: value) else {
                throw .invalidMigration(reason: "fill of '\(field)' holds no valid CBOR value")
            }
            record.fill(field, with: decoded)
        default:
            throw .invalidMigration(reason: "'\(op)' is not an edit this Buri knows (rename, remove, fill)")
        }
    }
}

/// Upgrading payloads, shared by typed buckets and filters.
enum Migrations {
    /// `payload` (a record of schema version `version`) upgraded to `current` by `steps`; `nil`
    /// when it is current.
    static func upgrade(
        _ payload: UnsafeRawBufferPointer, from version: UInt64, to current: UInt64, steps: [BuriMigration],
        bucket: String, key: @autoclosure () -> String
    ) throws(BuriError) -> [UInt8]? {
        if version == current { return nil }
        guard version < current else {
            throw .recordFromNewerSchema(bucket: bucket, key: key(), stored: version, known: current)
        }
        let key = key()
        let value: CBORValue
        do {
            value = try CBORValue(decoding: payload)
        } catch {
            throw .migrationFailed(bucket: bucket, key: key, from: version, reason: "the payload is not CBOR: \(error)")
        }
        guard case .map(let fields) = value else {
            throw .migrationFailed(
                bucket: bucket, key: key, from: version, reason: "the payload is not a map of fields")
        }
        var record = MigrationRecord(fields: fields, key: key)
        var step = version
        while step < current {
            // A version without a declared step needs none (a field added as an optional, say).
            for migration in steps where migration.from >= 0 && UInt64(migration.from) == step {
                do {
                    try migration.body(&record)
                } catch let error as BuriError {
                    throw .migrationFailed(bucket: bucket, key: key, from: step, reason: error.description)
                } catch {
                    throw .migrationFailed(
                        bucket: bucket, key: key, from: step, reason: "the step from version \(step) threw: \(error)")
                }
            }
            step += 1
        }
        return CBORValue.map(record.fields).encoded()
    }

    /// The schema version and migrations of `type`, when it is a ``BuriSupport`` type.
    static func schema(of type: Any.Type) -> (version: UInt64, steps: [BuriMigration])? {
        guard let support = type as? any BuriSupport.Type else { return nil }
        return schema(support)
    }

    private static func schema<S: BuriSupport>(_ type: S.Type) -> (version: UInt64, steps: [BuriMigration]) {
        (UInt64(Swift.max(0, S.buri.schemaVersion)), S.buri.migrations)
    }
}

/// A migration step as the catalog keeps it.
public struct StoredMigration: Codable, Sendable, Hashable {
    /// The version it upgrades from.
    public var from: UInt64
    /// Its edits, or `nil` for a step written in Swift.
    public var steps: [MigrationStep]?
}

/// A stored record's fields, as a migration step sees them: the top-level map of its CBOR value.
/// Field names are compared as UTF-8 bytes (`"é"` and `"e\u{301}"` are two fields).
///
/// ```swift
/// .from(1) { record in
///     let first = record["first"]?.stringValue ?? "", last = record["last"]?.stringValue ?? ""
///     record["name"] = .text(first + " " + last)          // merge two fields
///     record.remove("first"); record.remove("last")
///     record["age"] = record["age"]?.stringValue.flatMap { Int64($0) }.map(CBORValue.int) ?? 0  // change a type
/// }
/// ```
public struct MigrationRecord: Sendable {
    /// The fields in stored order.
    public var fields: [CBORMapEntry]
    /// The record's key.
    public let key: String

    /// The value of field `name`; setting `nil` removes it, setting a value replaces it in place
    /// or appends it.
    public subscript(name: String) -> CBORValue? {
        get { fields.first { Self.named($0, name) }?.value }
        set {
            if let at = fields.firstIndex(where: { Self.named($0, name) }) {
                if let newValue { fields[at].value = newValue } else { fields.remove(at: at) }
            } else if let newValue {
                fields.append(CBORMapEntry(key: .text(name), value: newValue))
            }
        }
    }

    /// Renames field `old` to `new` (nothing if there is no `old`; an existing `new` is replaced).
    public mutating func rename(_ old: String, to new: String) {
        guard let value = self[old] else { return }
        self[old] = nil
        self[new] = value
    }

    /// Removes field `name`.
    public mutating func remove(_ name: String) { self[name] = nil }

    /// Sets field `name` to `value` if the record has no such field.
    public mutating func fill(_ name: String, with value: CBORValue) {
        if self[name] == nil { self[name] = value }
    }

    static func named(_ entry: CBORMapEntry, _ name: String) -> Bool {
        if case .text(let text) = entry.key { return text.utf8.elementsEqual(name.utf8) }
        return false
    }
}

extension Bucket {
    /// The schema version records are written with.
    var currentVersion: UInt64 { UInt64(Swift.max(0, schema.schemaVersion)) }

    /// The payload of a record of schema version `version` upgraded to the current version:
    /// `nil` when it is current (decode it as it is).
    /// - Throws: ``BuriError/recordFromNewerSchema(bucket:key:stored:known:)`` for a record newer than
    ///   this code; ``BuriError/migrationFailed(bucket:key:from:reason:)`` when a step throws or the
    ///   payload is not a map.
    func upgraded(
        _ payload: UnsafeRawBufferPointer, version: UInt64, key: @autoclosure () -> String
    )
        throws(BuriError) -> [UInt8]?
    {
        try Migrations.upgrade(
            payload, from: version, to: currentVersion, steps: schema.migrations, bucket: name, key: key())
    }

    /// Decodes a payload of schema version `version`, upgrading it first when it is older.
    @inline(__always)
    func decode(
        _ payload: UnsafeRawBufferPointer, version: UInt64, key: @autoclosure () -> String
    ) throws(BuriError)
        -> T
    {
        if version == currentVersion {
            do {
                return try decodeObject(payload)
            } catch {
                throw .decodingFailed(
                    bucket: name, key: key(), type: String(describing: T.self), reason: String(describing: error))
            }
        }
        return try decodeUpgrading(payload, version: version, key: key())
    }

    /// ``decode(_:version:key:)`` for a record of another schema version: apart, so the common
    /// read does not look up the metadata of this path's `Result<T, _>` at every call.
    @inline(never)
    func decodeUpgrading(_ payload: UnsafeRawBufferPointer, version: UInt64, key: String) throws(BuriError) -> T {
        guard let upgraded = try upgraded(payload, version: version, key: key) else {
            return try decode(payload, key: key)
        }
        let result = upgraded.withUnsafeBytes { bytes in Result { () throws(BuriError) in try decode(bytes, key: key) }
        }
        return try result.get()
    }

    /// Upgrades every record older than the type's schema version, in batches of `batchSize`
    /// records, each one atomic commit (a transaction: the records are read and written back in it,
    /// so a concurrent writer's newer object is never overwritten, and index entries move with
    /// their object). `progress` is called after each batch with the records upgraded so far.
    ///
    /// Resumable: a batch commits whole or not at all, and the walk skips records already at the
    /// current version, so after a crash or kill calling it again finishes the work (it reads
    /// every record's header once more, and upgrades only what is left). Returns how many records
    /// it upgraded.
    ///
    /// ```swift
    /// let upgraded = try people.migrateAll { done in print("\(done) upgraded") }
    /// ```
    /// - Throws: ``BuriError/uniqueViolation(bucket:index:value:holder:)`` when an upgraded
    ///   record would break a unique index (earlier batches stay committed, the database
    ///   consistent); ``BuriError/migrationFailed(bucket:key:from:reason:)`` and ``BuriError/recordFromNewerSchema(bucket:key:stored:known:)``.
    @discardableResult
    public func migrateAll(batchSize: Int = 500, progress: ((Int) -> Void)? = nil) throws(BuriError) -> Int {
        guard batchSize > 0 else {
            throw .invalidQuery(bucket: name, index: nil, reason: "a batch holds at least 1 record; \(batchSize) given")
        }
        let current = currentVersion
        var upgraded = 0
        var after: [UInt8]? = nil
        while true {
            // Find the next batch of older records' keys, after the last key looked at.
            var keys: [String] = []
            var last: [UInt8]? = nil
            try raw.forEachRecordVersion(after: after) { key, version in
                last = key
                if version != current { keys.append(String(decoding: key, as: UTF8.self)) }
                return keys.count < batchSize
            }
            if !keys.isEmpty {
                let count: Int
                do {
                    count = try raw.database.write { tx -> Int in
                        let bucket = try tx.bucket(T.self, named: name)
                        var objects: [T] = []
                        for key in keys {
                            // Read in the transaction: an object another writer deleted or
                            // upgraded since is skipped or stored as it is now.
                            if let object = try bucket.object(forKey: key) { objects.append(object) }
                        }
                        try bucket.store(objects)
                        return objects.count
                    }
                } catch let error as BuriError {
                    throw error
                } catch {
                    throw .migrationFailed(bucket: name, key: keys[0], from: 0, reason: "\(error)")
                }
                upgraded += count
                progress?(upgraded)
            }
            // The walk stopped at a full batch: go on after its last key; else it reached the end.
            guard keys.count == batchSize, let last else { break }
            after = last
        }
        return upgraded
    }
}

extension RawBucket {
    /// Upgrades every record older than the bucket's schema version with the migration steps the
    /// catalog keeps (``MigrationStep``s the type declared), without the app's types: what `buri
    /// migrate` runs. Index values are computed from the upgraded fields, so every index must name
    /// its fields (``IndexDefinition/fields``). Batches, atomicity and resuming are those of
    /// ``Bucket/migrateAll(batchSize:progress:)``.
    ///
    /// ```swift
    /// let upgraded = try db.rawBucket(named: "Contact").migrateAll { done in print(done) }
    /// ```
    /// - Throws: ``BuriError/invalidMigration(reason:)`` when a step is written in Swift, an index
    ///   cannot be computed from fields, or the catalog has no step for a version (nothing written).
    @discardableResult
    public func migrateAll(batchSize: Int = 500, progress: ((Int) -> Void)? = nil) throws(BuriError) -> Int {
        guard batchSize > 0 else {
            throw .invalidQuery(bucket: name, index: nil, reason: "a batch holds at least 1 record; \(batchSize) given")
        }
        let descriptor = self.descriptor
        let current = descriptor.schemaVersion
        let stored = descriptor.migrations ?? []
        var upgraded = 0
        var after: [UInt8]? = nil
        while true {
            var keys: [String] = []
            var last: [UInt8]? = nil
            var oldest = current
            try forEachRecordVersion(after: after) { key, version in
                last = key
                if version != current {
                    keys.append(String(decoding: key, as: UTF8.self))
                    oldest = Swift.min(oldest, version)
                }
                return keys.count < batchSize
            }
            if !keys.isEmpty {
                // Everything the batch needs is checked before anything is written.
                for step in oldest..<current where stored.contains(where: { $0.from == step && $0.steps == nil }) {
                    throw .invalidMigration(
                        reason:
                            "bucket '\(name)': the step from schema version \(step) is written in Swift; run migrateAll from the app, or declare the step as data (BuriMigration.from(\(step), .rename(…), …))"
                    )
                }
                if let index = descriptor.indexes.first(where: { $0.uncomputableReason != nil }) {
                    throw .invalidMigration(
                        reason:
                            "bucket '\(name)': index '\(index.name)' cannot be computed without the app (\(index.uncomputableReason ?? "")); run migrateAll from the app"
                    )
                }
                let count: Int
                do {
                    count = try database.write { tx -> Int in
                        let bucket = try tx.rawBucket(named: name)
                        var objects: [RawObject] = []
                        for key in keys {
                            // Read in the transaction: skip what another writer deleted or upgraded since.
                            guard let record = try bucket.record(forKey: key), record.schemaVersion < current else {
                                continue
                            }
                            objects.append(try upgradedObject(record, to: current, steps: stored, in: descriptor))
                        }
                        try bucket.store(objects)
                        return objects.count
                    }
                } catch let error as BuriError {
                    throw error
                } catch {
                    throw .migrationFailed(bucket: name, key: keys[0], from: oldest, reason: "\(error)")
                }
                upgraded += count
                progress?(upgraded)
            }
            guard keys.count == batchSize, let last else { break }
            after = last
        }
        return upgraded
    }

    /// `record` upgraded by the catalog's steps, with index values computed from its fields.
    private func upgradedObject(
        _ record: StoredRecord, to current: UInt64, steps stored: [StoredMigration], in descriptor: BucketDescriptor
    ) throws(BuriError) -> RawObject {
        if record.schemaVersion > current {
            throw .recordFromNewerSchema(bucket: name, key: record.key, stored: record.schemaVersion, known: current)
        }
        let value: CBORValue
        do {
            value = try CBORValue(decoding: record.payload)
        } catch {
            throw .migrationFailed(
                bucket: name, key: record.key, from: record.schemaVersion, reason: "the payload is not CBOR: \(error)")
        }
        guard case .map(let fields) = value else {
            throw .migrationFailed(
                bucket: name, key: record.key, from: record.schemaVersion, reason: "the payload is not a map of fields")
        }
        var migrating = MigrationRecord(fields: fields, key: record.key)
        for step in record.schemaVersion..<current {
            for migration in stored where migration.from == step {
                for edit in migration.steps ?? [] { try edit.apply(to: &migrating) }
            }
        }
        let upgraded = CBORValue.map(migrating.fields)
        var indexValues: [IndexName: [[IndexValue]]] = [:]
        for index in descriptor.indexes {
            do {
                indexValues[IndexName(index.name)] = try index.tuples(of: upgraded)
            } catch {
                throw .migrationFailed(
                    bucket: name, key: record.key, from: record.schemaVersion,
                    reason: "index '\(index.name)' of the upgraded record: \(error)")
            }
        }
        return RawObject(key: record.key, payload: upgraded.encoded(), indexValues: indexValues, schemaVersion: current)
    }
}
