import LevelDB

/// A bucket seen without its Swift type: records as header plus CBOR payload, index entries as
/// value tuples. ``Bucket`` is built on it; the `buri` tool uses it directly.
///
/// ```swift
/// let raw = try db.rawBucket(named: "Person")
/// for key in try raw.keys(.index("locale", equals: "EN")) { print(key) }
/// ```
public final class RawBucket: Sendable {
    /// The bucket's catalog entry as of when this view was made.
    public let descriptor: BucketDescriptor
    let database: BuriDatabase
    let recordPrefix: [UInt8]
    /// Each index's key prefix, by index id.
    let indexPrefixes: [UInt32: [UInt8]]

    /// The catalog generation this view was made at (see `BuriDatabase.catalogGeneration`).
    let generation: Int

    init(database: BuriDatabase, descriptor: BucketDescriptor) {
        self.database = database
        self.descriptor = descriptor
        generation = database.catalogGeneration(descriptor.name)
        recordPrefix = Keyspace.recordPrefix(bucket: descriptor.id)
        var prefixes: [UInt32: [UInt8]] = [:]
        for index in descriptor.indexes { prefixes[index.id] = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id) }
        indexPrefixes = prefixes
    }

    /// The bucket's name.
    public var name: String { descriptor.name }

    var storage: Database { database.storage }

    // MARK: Keys

    func validateKey(_ key: String) throws(BuriError) {
        if key.isEmpty { throw .emptyKey(bucket: name) }
        let length = key.utf8.count
        if length > Keyspace.maxObjectKeyLength {
            throw .keyTooLong(bucket: name, keyPrefix: String(key.prefix(32)), length: length, limit: Keyspace.maxObjectKeyLength)
        }
    }

    @inline(__always)
    func recordKey(_ key: String) -> [UInt8] { Keyspace.recordKey(bucket: descriptor.id, key: key) }

    /// Checks one value tuple against an index's definition (arity, kinds, encoded length) and adds
    /// its entry to `entries` unless an equal one is there. The one place both writers (typed and
    /// raw) turn index values into header entries.
    func appendEntry(_ tuple: [IndexValue], for definition: IndexDefinition, key: String, to entries: inout [RecordHeader.Entry]) throws(BuriError) {
        guard tuple.count == definition.components.count,
              zip(tuple, definition.components).allSatisfy({ $0.isNumeric == ($1 == .numeric) }) else {
            throw .invalidIndexValue(bucket: name, key: key, index: definition.name,
                                     reason: "expected a tuple of \(definition.components.map(\.rawValue)), got \(tuple)")
        }
        let encoded = tuple.count == 1 ? tuple[0].encoded : IndexTuple.join(tuple)
        if encoded.count > Keyspace.maxTupleLength {
            throw .invalidIndexValue(bucket: name, key: key, index: definition.name,
                                     reason: "the value is \(encoded.count) bytes encoded, over the limit of \(Keyspace.maxTupleLength)")
        }
        let entry = RecordHeader.Entry(index: definition.id, tuple: encoded)
        if !entries.contains(entry) { entries.append(entry) }
    }

    // MARK: Writing

    /// Refuses to write through a view made before the bucket was redefined or dropped in this
    /// process: its index ids would no longer match the catalog. Callers hold the write lock.
    func checkCurrent() throws(BuriError) {
        guard database.catalogGeneration(name) == generation else {
            throw .invalidIndexDefinition(bucket: name, index: "*",
                                          reason: "the bucket was redefined or dropped after this Bucket was opened; open it again with db.bucket(_:)")
        }
    }

    /// One object to write: its key, its header (index entries) and the complete record value.
    struct RecordWrite {
        var key: String
        var header: RecordHeader
        var value: [UInt8]
    }

    /// Writes records and their index entries in one atomic batch, replacing each object's previous
    /// entries with its new ones. Checks unique indexes first; on any error nothing is written.
    func write(_ writes: [RecordWrite], sync: Bool? = nil) throws(BuriError) {
        try database.writeLock.withLock { _ throws(BuriError) in
            try checkCurrent()
            let batch = WriteBatch()
            if descriptor.indexes.isEmpty {
                // No index entries to replace (index evolution strips dropped indexes from every
                // header), so there is nothing to read back or track: each object is one put.
                let upgrading = database.upgradeHeader(in: batch)
                for write in writes { batch.put(recordKey(write.key), write.value) }
                try database.run { try storage.write(batch, options: sync.map { WriteOptions(sync: $0) } ?? database.writeOptions) }
                database.headerWritten(upgrading)
                return
            }
            // Keys are compared as UTF-8 bytes throughout, never as Swift Strings: String equality is
            // canonical equivalence, so "é" and "e\u{301}" would be one key to a String but are two on disk.
            /// Headers as they will be once the batch is applied, for keys written earlier in it.
            var pending: [ObjectKeyBytes: RecordHeader?] = [:]
            pending.reserveCapacity(writes.count)
            /// Unique values claimed by objects earlier in this batch.
            var claims: [RecordHeader.Entry: [UInt8]] = [:]
            let uniqueIds = Set(descriptor.indexes.filter(\.unique).map(\.id))
            for write in writes {
                let keyBytes = Array(write.key.utf8)
                let pendingKey = ObjectKeyBytes(keyBytes)
                let old: RecordHeader?
                if let known = pending[pendingKey] {
                    old = known
                } else {
                    old = try currentHeader(forKey: write.key)
                }
                let oldEntries = old?.entries ?? []
                for entry in oldEntries where !write.header.entries.contains(entry) {
                    batch.delete(entryKey(entry, objectKey: write.key))
                    if claims[entry] == keyBytes { claims[entry] = nil }
                }
                for entry in write.header.entries where !oldEntries.contains(entry) {
                    if uniqueIds.contains(entry.index) {
                        try checkUnique(entry, for: keyBytes, pending: pending, claims: claims)
                        claims[entry] = keyBytes
                    }
                    batch.put(entryKey(entry, objectKey: write.key), [UInt8]())
                }
                batch.put(recordKey(write.key), write.value)
                pending[pendingKey] = .some(write.header)
            }
            let upgrading = database.upgradeHeader(in: batch)
            try database.run { try storage.write(batch, options: sync.map { WriteOptions(sync: $0) } ?? database.writeOptions) }
            database.headerWritten(upgrading)
        }
    }

    /// Deletes objects and every index entry their stored headers list, in one atomic batch.
    /// Keys that are not there are ignored. Returns how many objects were deleted.
    @discardableResult
    public func delete(keys: [String], sync: Bool? = nil) throws(BuriError) -> Int {
        try database.writeLock.withLock { _ throws(BuriError) -> Int in
            try checkCurrent()
            let batch = WriteBatch()
            var deleted = Set<[UInt8]>()  // UTF-8 bytes: see write(_:sync:) on String equality
            for key in keys where !deleted.contains(Array(key.utf8)) {
                guard let header = try currentHeader(forKey: key) else { continue }
                for entry in header.entries { batch.delete(entryKey(entry, objectKey: key)) }
                batch.delete(recordKey(key))
                deleted.insert(Array(key.utf8))
            }
            if !batch.isEmpty {
                try database.run { try storage.write(batch, options: sync.map { WriteOptions(sync: $0) } ?? database.writeOptions) }
            }
            return deleted.count
        }
    }

    /// Deletes every object and index entry of the bucket in one atomic batch; keeps the bucket
    /// and its index definitions. Returns how many objects were deleted.
    @discardableResult
    public func deleteAll(sync: Bool? = nil) throws(BuriError) -> Int {
        try database.writeLock.withLock { _ throws(BuriError) -> Int in
            try checkCurrent()
            return try database.run {
                let batch = WriteBatch()
                var count = 0
                let records = try storage.cursor(in: .prefix(recordPrefix), options: ReadOptions(fillCache: false))
                while try records.next() {
                    records.withKey { batch.delete($0) }
                    count += 1
                }
                let entries = try storage.cursor(in: .prefix(Keyspace.indexSpacePrefix(bucket: descriptor.id)), options: ReadOptions(fillCache: false))
                while try entries.next() { entries.withKey { batch.delete($0) } }
                if !batch.isEmpty {
                    try storage.write(batch, options: sync.map { WriteOptions(sync: $0) } ?? database.writeOptions)
                }
                return count
            }
        }
    }

    @inline(__always)
    func entryKey(_ entry: RecordHeader.Entry, objectKey: String) -> [UInt8] {
        let prefix = indexPrefixes[entry.index] ?? Keyspace.indexPrefix(bucket: descriptor.id, index: entry.index)
        return Keyspace.indexEntryKey(prefix: prefix, tuple: entry.tuple, objectKey: objectKey)
    }

    /// The header of the stored object `key`, read from the current state (writers hold the lock).
    /// If the record is damaged so that its header cannot be read, the header is rebuilt from the
    /// index entries that name `key`, so a damaged record can still be deleted or overwritten
    /// without leaving entries behind.
    func currentHeader(forKey key: String) throws(BuriError) -> RecordHeader? {
        let header = try database.run {
            try storage.withValue(forKey: recordKey(key)) { buffer -> RecordHeader?? in
                guard let buffer else { return .some(nil) }
                return (try? RecordHeader.parse(buffer).0).map { .some($0) }
            }
        }
        if let header { return header }
        return try entriesNaming(key)
    }

    /// A header listing every index entry of this bucket that names object `key`, found by scanning
    /// the bucket's indexes (entries that do not parse are skipped). For damaged records only.
    private func entriesNaming(_ key: String) throws(BuriError) -> RecordHeader {
        let objectKey = Array(key.utf8)
        var entries: [RecordHeader.Entry] = []
        try database.run {
            for index in descriptor.indexes {
                let cursor = try storage.cursor(in: .prefix(Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)), options: ReadOptions(fillCache: false))
                while try cursor.next() {
                    let tuple = cursor.withKey { raw -> [UInt8]? in
                        guard let parts = try? Keyspace.splitIndexEntry(raw, arity: index.components.count),
                              raw[parts.objectKey].elementsEqual(objectKey) else { return nil }
                        return Array(raw[parts.tuple])
                    }
                    if let tuple { entries.append(RecordHeader.Entry(index: index.id, tuple: tuple)) }
                }
            }
        }
        return RecordHeader(schemaVersion: 0, entries: entries)
    }

    private func checkUnique(_ entry: RecordHeader.Entry, for key: [UInt8], pending: [ObjectKeyBytes: RecordHeader?], claims: [RecordHeader.Entry: [UInt8]]) throws(BuriError) {
        let indexName = descriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
        func violation(_ holder: [UInt8]) -> BuriError {
            let shown = IndexTuple.describe(entry.tuple)
            return .uniqueViolation(bucket: name, index: indexName, value: shown, holder: String(decoding: holder, as: UTF8.self))
        }
        if let holder = claims[entry], holder != key { throw violation(holder) }
        let prefix = (indexPrefixes[entry.index] ?? []) + entry.tuple
        try database.run {
            let cursor = try storage.cursor(in: .prefix(prefix))
            while try cursor.next() {
                let holder = cursor.withKey { raw in Array(raw[prefix.count...]) }
                if holder == key { continue }
                // Released earlier in this batch?
                if let after = pending[ObjectKeyBytes(holder)], !(after?.entries.contains(entry) ?? false) { continue }
                throw violation(holder)
            }
        }
    }

    // MARK: Reading

    /// Reads a consistent snapshot for one query.
    func snapshot() throws(BuriError) -> Snapshot {
        try database.run { try storage.snapshot() }
    }

    /// Lends the stored record of `key` (header and payload bytes) to `body`; `nil` if absent.
    func withRecord<R>(forKey key: String, snapshot: Snapshot?, _ body: (RecordHeader, UnsafeRawBufferPointer) throws -> R) throws(BuriError) -> R? {
        try database.run {
            try storage.withValue(forKey: recordKey(key), options: ReadOptions(snapshot: snapshot)) { buffer throws -> R? in
                guard let buffer else { return nil }
                let header: RecordHeader
                let offset: Int
                do {
                    (header, offset) = try RecordHeader.parse(buffer)
                } catch {
                    throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
                }
                return try body(header, UnsafeRawBufferPointer(rebasing: buffer[offset...]))
            }
        }
    }

    /// Lends the payload (CBOR bytes) of object `key` to `body`; returns `false`, without calling
    /// it, if there is no such object. Checks the header without building it.
    @discardableResult
    func withPayload(forKey key: String, _ body: (UnsafeRawBufferPointer) -> Void) throws(BuriError) -> Bool {
        try database.run {
            try storage.withValue(forKey: recordKey(key)) { buffer throws -> Bool in
                guard let buffer else { return false }
                let offset: Int
                do {
                    offset = try RecordHeader.payloadOffset(buffer)
                } catch {
                    throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
                }
                body(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
                return true
            }
        }
    }

    /// The stored payload (CBOR bytes) and header of object `key`, or `nil`.
    public func record(forKey key: String) throws(BuriError) -> StoredRecord? {
        try withRecord(forKey: key, snapshot: nil) { header, payload in
            StoredRecord(key: key, schemaVersion: header.schemaVersion, indexValues: indexValues(of: header), payload: Array(payload))
        }
    }

    /// Whether object `key` exists.
    public func contains(key: String) throws(BuriError) -> Bool {
        try database.run { try storage.contains(recordKey(key)) }
    }

    /// The number of objects in the bucket.
    public func count() throws(BuriError) -> Int {
        try countEntries(in: .prefix(recordPrefix), snapshot: nil, cap: nil)
    }

    /// The number of entries index `index` holds (an object has one per distinct value of a
    /// multi-valued index), counted from the index alone.
    public func entryCount(index: String) throws(BuriError) -> Int {
        guard let definition = descriptor.index(named: index) else {
            throw .unknownIndex(bucket: name, index: index, known: descriptor.indexes.map(\.name))
        }
        return try countEntries(in: .prefix(Keyspace.indexPrefix(bucket: descriptor.id, index: definition.id)), snapshot: nil, cap: nil)
    }

    /// Counts the keys in `range`, stopping at `cap`.
    func countEntries(in range: KeyRange, snapshot: Snapshot?, cap: Int?) throws(BuriError) -> Int {
        try database.run {
            let cursor = try storage.cursor(in: range, options: ReadOptions(snapshot: snapshot, fillCache: false))
            var count = 0
            while try cursor.next() {
                count += 1
                if let cap, count >= cap { break }
            }
            return count
        }
    }

    /// The decoded index values of a header, by index name.
    func indexValues(of header: RecordHeader) -> [String: [[IndexValue]]] {
        var result: [String: [[IndexValue]]] = [:]
        for entry in header.entries {
            let name = descriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
            result[name, default: []].append(IndexTuple.split(entry.tuple))
        }
        return result
    }

    // MARK: Queries

    /// The keys of the objects matching `query`, in index order. Reads only index entries (or
    /// record keys), never record values, unless the query has more than one condition.
    public func keys(_ query: Query) throws(BuriError) -> [String] {
        let cursor = try makeCursor(query)
        var keys: [String] = []
        while let key = try cursor.nextKey() { keys.append(key) }
        return keys
    }

    /// The number of objects matching `query`, counted from index entries without decoding objects.
    public func count(_ query: Query) throws(BuriError) -> Int {
        if query.conditions.isEmpty, query.offset == 0, query.limit == nil, query.continuation == nil { return try count() }
        let cursor = try makeCursor(query)
        var count = 0
        while try cursor.nextKey() != nil { count += 1 }
        return count
    }

    /// A streaming cursor over the results of `query`, reading from one snapshot.
    public func makeCursor(_ query: Query) throws(BuriError) -> RawQueryCursor {
        let snapshot = try snapshot()
        let plan = try QueryPlan(query, bucket: self, snapshot: snapshot)
        return try RawQueryCursor(bucket: self, plan: plan, snapshot: snapshot)
    }
}

/// A stored object as raw data: its key, schema version, index values and CBOR payload.
public struct StoredRecord: Sendable, Hashable {
    public var key: String
    public var schemaVersion: UInt64
    /// The object's index values as stored, by index name (one tuple per entry).
    public var indexValues: [String: [[IndexValue]]]
    /// The CBOR encoding of the object.
    public var payload: [UInt8]
}

/// Splitting encoded tuples into their elements.
enum IndexTuple {
    static func split(_ tuple: [UInt8]) -> [IndexValue] {
        tuple.withUnsafeBytes { raw in
            var values: [IndexValue] = []
            var offset = 0
            while offset < raw.count, let length = try? ValueEncoding.elementLength(raw, at: offset) {
                values.append(IndexValue(encoded: Array(raw[offset..<(offset + length)])))
                offset += length
            }
            return values
        }
    }

    /// An encoded tuple as people read it in messages: `"EN", 20`.
    static func describe(_ tuple: [UInt8]) -> String {
        split(tuple).map(\.description).joined(separator: ", ")
    }

    static func join(_ values: [IndexValue]) -> [UInt8] {
        var out: [UInt8] = []
        for value in values { out.append(contentsOf: value.encoded) }
        return out
    }
}

/// An object key as UTF-8 bytes, for the write path's bookkeeping: equal only when the bytes are
/// (never by String canonical equivalence), hashed in one call over the bytes rather than one
/// `Hasher.combine` per byte as `[UInt8]` does, which cost more than the LevelDB put it guarded.
struct ObjectKeyBytes: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: ObjectKeyBytes, b: ObjectKeyBytes) -> Bool { a.bytes == b.bytes }
}
