import BuriCodec
import Dispatch
import BuriStorage
import Synchronization

/// A bucket of `T` objects with their secondary indexes: the heart of Buri.
///
/// Every store and delete changes an object and all its index entries in one atomic LevelDB
/// batch. Every query reads from one snapshot, so a concurrent writer can never make it return an
/// object that does not match. Results come in index order: by value, then by key.
///
/// ```swift
/// let db = try BuriDatabase(path: "people.buri")
/// let people = try db.bucket(Person.self)
///
/// try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
/// let dirk = try people.object(forKey: "p1")
/// let englishKeys = try people.keys(.index("locale", equals: "EN"))
/// let twenties = try people.objects(.index("age", in: 20...29))
/// let oldest = try people.objects(.index("age", in: 18...).descending().limit(10))
/// try people.delete(key: "p1")
/// ```
///
/// The names Buri first had for these calls (`allKeys()`, `objects(index:equalTo:)`, …) are
/// deprecated and forward to them from `Bucket+Deprecated.swift`.
///
/// ## Topics
///
/// ### Reading one
///
/// - ``object(forKey:)-6vvot``
/// - ``object(forKey:)-83izu``
/// - ``contains(key:)``
///
/// ### Writing
///
/// - ``store(_:)-iduc``
/// - ``store(_:)-35d4b``
/// - ``store(_:)-(Sequence<T>)``
/// - ``store(_:)-([T])``
/// - ``storeConcurrently(_:)-7sfjs``
/// - ``storeConcurrently(_:)-24yv8``
/// - ``delete(key:)-jk5s``
/// - ``delete(key:)-3xqej``
/// - ``delete(keys:)-5p07y``
/// - ``delete(keys:)-6vj6w``
/// - ``delete(_:)``
/// - ``deleteAll()``
///
/// ### Queries
///
/// - ``keys(_:)-7sxnc``
/// - ``keys(_:)-8z95u``
/// - ``objects(_:)-8irns``
/// - ``objects(_:)-9teeq``
/// - ``objects(_:)-7h55v``
/// - ``entries(_:)``
/// - ``count()``
/// - ``count(_:)-5p9cb``
/// - ``count(_:)-4j6yw``
/// - ``page(_:size:)``
/// - ``keyPage(_:size:)``
/// - ``cursor(_:)``
/// - ``lazyObjects(_:)``
/// - ``lazyKeys(_:)``
/// - ``min(index:)``
/// - ``max(index:)``
public final class Bucket<T: BuriSupport>: Sendable {
    /// The untyped bucket underneath, for tools and advanced use.
    public let raw: RawBucket
    let declared: [(definition: IndexDefinition, index: BuriIndex<T>)]
    let sealedDeclared: [(definition: IndexDefinition, index: BuriIndex<T>)]?
    let schema: BuriSchema<T>
    /// Whether the next object stored is to be checked against the indexes' declared fields
    /// (once per `Bucket`: a wrong `field:` would make `buri import` compute other values).
    let fieldCheckPending: Atomic<Bool>
    /// Whether the next object stored is to be read back and its index values computed again
    /// (once per `Bucket`: an index over a property that is not stored — left out by `CodingKeys`
    /// — would give other values when the index is rebuilt or migrated from the stored records).
    let roundTripPending = Atomic(true)
    /// `T(record:)` over a payload when `T` adopts ``CBORRecordDecodable``, else nil (decided
    /// once per bucket, so a read pays no dynamic cast per object).
    let recordDecoder: RecordDecoder<T>?
    /// Whether `T` is decoded through its `init(from:)` (a record type, not a primitive or text
    /// value): decided once per bucket, so a read pays no conformance lookup per object.
    let readsNested: Bool
    /// Whether a declared index is a relationship (whose entries a header may derive from the
    /// payload): decided once, not per object stored.
    let hasRelationships: Bool
    /// Whether the bucket declares a text index (a batch then shares its terms' tuples).
    let hasTextIndexes: Bool
    /// `declared`'s text sources, in its order (`nil` for other indexes), and the key's offset in
    /// an object when the key is a stored property of a struct: `prepare` reads them without
    /// copying a `BuriIndex<T>` or projecting a key path, each of which looks up generic metadata
    /// per object in this unspecialized code.
    let textSources: [TextIndexSource?]
    let keyOffset: Int?
    /// `declared`'s and `sealedDeclared`'s definitions, for the same reason.
    let definitions: [IndexDefinition]
    let sealedDefinitions: [IndexDefinition]?

    init(raw: RawBucket, schema: BuriSchema<T>) {
        self.raw = raw
        self.schema = schema
        self.recordDecoder = RecordDecoding.decoder(for: T.self)
        self.readsNested = CBORDecoder.readsNested(T.self)
        var declared: [(IndexDefinition, BuriIndex<T>)] = []
        for index in schema.indexes {
            if let definition = raw.descriptor.index(named: index.name) { declared.append((definition, index)) }
        }
        self.declared = declared
        // A bucket of a database being encrypted online: its definitions with tokens, for when the
        // view follows the bucket into its sealed generation.
        sealedDeclared = raw.sealedDescriptor.map { sealed in
            declared.map { (definition, index) in (sealed.index(named: definition.name) ?? definition, index) }
        }
        fieldCheckPending = Atomic(declared.contains { $0.0.uncomputableReason == nil })
        hasRelationships = declared.contains { $0.0.references != nil }
        textSources = declared.map(\.1.text)
        definitions = declared.map(\.0)
        sealedDefinitions = sealedDeclared?.map(\.definition)
        hasTextIndexes = textSources.contains { $0 != nil }
        keyOffset = MemoryLayout<T>.offset(of: schema.key)
    }

    /// `object`'s key, read from its offset where there is one.
    @inline(__always)
    func key(of object: T) -> String {
        guard let keyOffset else { return object[keyPath: schema.key] }
        return withUnsafeBytes(of: object) { $0.load(fromByteOffset: keyOffset, as: String.self) }
    }

    /// The bucket's name.
    public var name: String { raw.name }

    // MARK: Encoding

    /// The header (index entries) and complete record value for `object`; a batch passes one
    /// `interner` for all its objects, so that equal text terms share one tuple array.
    func prepare(_ object: T, interner: TextTupleInterner? = nil) throws(BuriError) -> RawBucket.RecordWrite {
        let key = key(of: object)
        try raw.validateKey(key)
        // The definitions with tokens once this view writes a sealed generation.
        let definitions = raw.followsIntoSealed ? sealedDefinitions ?? definitions : definitions
        let checking = fieldCheckPending.load(ordering: .relaxed) || roundTripPending.load(ordering: .relaxed)
        var computed: [(IndexDefinition, [[IndexValue]])] = []
        var entries: [RecordHeader.Entry] = []
        // A text index reserves for its terms; reserving here too would allocate twice.
        if !hasTextIndexes { entries.reserveCapacity(definitions.count) }
        /// Values parallel to `entries` once a text index gives one (the others' are empty).
        var entryValues = EntryValues()
        for slot in definitions.indices {
            if let text = textSources[slot] {
                // One tokenization gives the terms (the header's tuples) and their positions (the
                // entries' values).
                let definition = definitions[slot]
                entryValues.appendEmpty(upTo: entries.count)
                let terms = text.entries(object, values: &entryValues, interner: interner)
                var tuples: [[IndexValue]] = []
                entries.reserveCapacity(entries.count + terms.count)
                for tuple in terms {
                    try raw.appendTextEntry(tuple, for: definition, key: key, to: &entries)
                    if checking { tuples.append([IndexValue(encoded: tuple)]) }
                }
                if checking { computed.append((definition, tuples)) }
                continue
            }
            let definition = definitions[slot]
            let index = declared[slot].index
            let tuples: [[IndexValue]]
            do {
                tuples = try index.tuples(object)
            } catch let BuriError.invalidIndexValue(_, _, _, reason) {
                throw .invalidIndexValue(bucket: name, key: key, index: index.name, reason: reason)
            }
            try raw.appendEntries(tuples, for: definition, key: key, to: &entries)
            if checking { computed.append((definition, tuples)) }
        }
        var header = RecordHeader(schemaVersion: UInt64(Swift.max(0, schema.schemaVersion)), entries: entries)
        var payload: [UInt8] = []
        // The header is serialized in front of the payload as the batch is written.
        payload.reserveCapacity(64 + entries.reduce(0) { $0 + $1.tuple.count })
        do {
            try CBOREncoder().encode(object, appendingTo: &payload)
        } catch {
            throw .encodingFailed(bucket: name, key: key, reason: String(describing: error))
        }
        if hasRelationships {
            // A relationship's entries are left out of the header when the payload gives exactly
            // them (docs/FORMAT.md §10, "Derived entries").
            header.derived = Self.derivable(definitions, entries: entries, payload: payload)
        }
        if checking {
            if fieldCheckPending.load(ordering: .relaxed) {
                try checkDeclaredFields(computed, payload: payload, key: key)
                fieldCheckPending.store(false, ordering: .relaxed)
            }
            if roundTripPending.load(ordering: .relaxed) {
                try checkStoredValues(computed, payload: payload, key: key)
                roundTripPending.store(false, ordering: .relaxed)
            }
        }
        return RawBucket.RecordWrite(key: key, header: header, payload: payload, entryValues: entryValues)
    }

    /// The relationships among `definitions` whose entries (in `entries`) are exactly what the
    /// payload gives at their path, so the header can derive them instead of listing them.
    static func derivable(
        _ definitions: [IndexDefinition], entries: [RecordHeader.Entry], payload: [UInt8]
    ) -> [RecordHeader.Derived] {
        var derived: [RecordHeader.Derived] = []
        for definition in definitions where definition.references != nil && definition.components.count == 1 {
            guard let path = Relationship.path(of: definition) else { continue }
            let bytes = path.map { Array($0.utf8) }
            guard
                let tuples = try? payload.withUnsafeBytes({ (raw) throws(FormatError) -> [[UInt8]] in
                    try RecordHeader.derivedTuples(payload: raw, path: bytes)
                })
            else { continue }
            // Both lists are distinct; they are usually in the same order too.
            var listed: [[UInt8]] = []
            for entry in entries where entry.index == definition.id { listed.append(entry.tuple) }
            guard listed.count == tuples.count, listed == tuples || Set(listed) == Set(tuples) else { continue }
            derived.append(RecordHeader.Derived(index: definition.id, path: bytes))
        }
        return derived
    }

    /// Index value tuples as an error message shows them: "(20), (21)", or "no entry".
    static func describe(_ tuples: [[IndexValue]]) -> String {
        tuples.isEmpty
            ? "no entry"
            : tuples.map { "(" + $0.map(\.description).joined(separator: ", ") + ")" }.joined(separator: ", ")
    }

    /// Checks that the object read back from its encoding gives the same index values: an index
    /// must read only what is stored, or rebuilding it (a new declaration, a migration, `buri
    /// check --repair`) would compute other values than the ones stored with the object.
    private func checkStoredValues(
        _ computed: [(IndexDefinition, [[IndexValue]])], payload: [UInt8], key: String
    ) throws(BuriError) {
        let readBack: T
        do {
            readBack = try payload.withUnsafeBytes { try decodeObject($0) }
        } catch {
            throw .decodingFailed(
                bucket: name, key: key, type: String(describing: T.self),
                reason: "the object does not decode from its own encoding: \(error)")
        }
        for ((definition, tuples), (_, index)) in zip(computed, declared) {
            let again = (try? index.tuples(readBack)) ?? []
            if Set(again) != Set(tuples) {
                throw .invalidIndexDefinition(
                    bucket: name, index: definition.name,
                    reason:
                        "for key '\(key)' the object gives \(Self.describe(tuples)), but read back from what is stored it gives \(Self.describe(again)): the index reads a property that is not stored (left out by CodingKeys?) or not stored as it is; index only stored properties"
                )
            }
        }
    }

    /// Checks that the fields the declarations name give the index values the declarations compute,
    /// for one object: a `field:` that names another property (or misses a custom coding key) fails here,
    /// instead of making `buri import` compute other values later.
    private func checkDeclaredFields(
        _ computed: [(IndexDefinition, [[IndexValue]])], payload: [UInt8], key: String
    ) throws(BuriError) {
        let object: CBORValue
        do {
            object = try CBORValue(decoding: payload)
        } catch {
            throw .encodingFailed(
                bucket: name, key: key, reason: "the encoded object does not read back as CBOR: \(error)")
        }
        for (definition, tuples) in computed where definition.uncomputableReason == nil {
            let fields = (definition.fields ?? []).map { "'\($0)'" }.joined(separator: ", ")
            let fromFields: [[IndexValue]]
            do {
                fromFields = try definition.tuples(of: object)
            } catch {
                throw .invalidIndexDefinition(
                    bucket: name, index: definition.name,
                    reason:
                        "it declares field \(fields), but for key '\(key)' that field does not give the declared value (\(error)); name the key the property is encoded under, or leave `field:` out"
                )
            }
            if Set(fromFields) != Set(tuples) {
                throw .invalidIndexDefinition(
                    bucket: name, index: definition.name,
                    reason:
                        "it declares field \(fields), which for key '\(key)' gives \(Self.describe(fromFields)), but the declaration computes \(Self.describe(tuples)); name the key the property is encoded under, or leave `field:` out"
                )
            }
        }
    }

    /// Decodes one object's payload: through `T(record:)` if `T` adopts ``CBORRecordDecodable``,
    /// else through `Decodable`.
    @inline(__always)
    func decodeObject(_ payload: UnsafeRawBufferPointer) throws -> T {
        if let recordDecoder { return try recordDecoder(payload) }
        return try CBORDecoder().decode(T.self, from: payload, readsNested: readsNested)
    }

    @inline(__always)
    func decode(_ payload: UnsafeRawBufferPointer, key: String) throws(BuriError) -> T {
        do {
            return try decodeObject(payload)
        } catch {
            throw .decodingFailed(
                bucket: name, key: key, type: String(describing: T.self), reason: String(describing: error))
        }
    }

    /// The object in a stored record (header, then payload) read under `key`.
    func decodeRecord(_ record: UnsafeRawBufferPointer, key: String) throws(BuriError) -> T {
        let (version, offset): (UInt64, Int)
        do {
            (version, offset) = try RecordHeader.versionAndPayloadOffset(record)
        } catch {
            throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
        }
        return try decode(UnsafeRawBufferPointer(rebasing: record[offset...]), version: version, key: key)
    }

    // MARK: Reading one

    /// The object stored under `key`, or `nil`.
    public func object(forKey key: String) throws(BuriError) -> T? {
        // A non-generic read with the decoded object carried out through a local: generic closures
        // returning `Result<T, _>?` cost metadata lookups on every call.
        var object: T?
        var failure: BuriError?
        try raw.withPayload(forKey: key) { payload, version in
            do throws(BuriError) {
                object = try decode(payload, version: version, key: key)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return object
    }

    /// Whether an object is stored under `key`.
    public func contains(key: String) throws(BuriError) -> Bool { try raw.contains(key: key) }

    // MARK: Writing

    /// Stores `object` under its key, replacing any previous version and moving its index entries,
    /// atomically.
    /// - Throws: ``BuriError/emptyKey(bucket:)``, ``BuriError/invalidIndexValue(bucket:key:index:reason:)``
    ///   (NaN), ``BuriError/uniqueViolation(bucket:index:value:holder:)``; nothing is written then.
    public func store(_ object: T) throws(BuriError) {
        try raw.write([prepare(object)])
    }

    /// Stores every object in one atomic batch: all of them or, on any error, none.
    /// A key that appears twice ends up with its last object. Objects are encoded on the calling
    /// thread, one after another; ``storeConcurrently(_:)-7sfjs`` encodes a large array on every core.
    ///
    /// ```swift
    /// try people.store([anna, lars])   // both or neither
    /// ```
    public func store(_ objects: some Sequence<T>) throws(BuriError) {
        var writes: [RawBucket.RecordWrite] = []
        writes.reserveCapacity(objects.underestimatedCount)
        let interner = hasTextIndexes ? TextTupleInterner() : nil
        for object in objects { writes.append(try prepare(object, interner: interner)) }
        if !writes.isEmpty { try raw.write(writes) }
    }

    /// Deletes the object stored under `key` and all its index entries. Returns whether there was one.
    @discardableResult
    public func delete(key: String) throws(BuriError) -> Bool {
        try raw.delete(keys: [key]) > 0
    }

    /// Deletes the objects stored under `keys` in one atomic batch. Returns how many there were.
    @discardableResult
    public func delete(keys: [String]) throws(BuriError) -> Int {
        try raw.delete(keys: keys)
    }

    /// Deletes the stored object with `object`'s key. The index entries removed are those recorded
    /// when it was stored, not ones computed from `object`, so nothing is left behind even if
    /// `object` was changed since.
    @discardableResult
    public func delete(_ object: T) throws(BuriError) -> Bool {
        try delete(key: key(of: object))
    }

    /// Deletes every object and index entry of the bucket, atomically. Returns how many objects there were.
    ///
    /// Outside a transaction it writes two keys however large the bucket is: the bucket moves to a
    /// new, empty generation and the old one is purged in the background (see
    /// ``RawBucket/deleteAll(sync:)``). This `Bucket` and every other one of the same bucket go on
    /// with the new generation.
    ///
    /// ```swift
    /// let removed = try people.deleteAll()
    /// try people.store(newcomer)      // the same handle keeps working
    /// ```
    @discardableResult
    public func deleteAll() throws(BuriError) -> Int { try raw.deleteAll() }

    // MARK: Queries

    /// The number of objects in the bucket: one key read, however many there are.
    ///
    /// ```swift
    /// let total = try people.count()
    /// ```
    public func count() throws(BuriError) -> Int { try raw.count() }

    /// The number of objects matching `query`, from index entries alone.
    ///
    /// ```swift
    /// let english = try people.count(.index("locale", equals: "EN"))
    /// ```
    public func count(_ query: Query) throws(BuriError) -> Int { try raw.count(checked(query)) }

    /// The keys of the objects matching `query` (all keys, in key order, by default), without
    /// reading the objects.
    ///
    /// ```swift
    /// let everyone = try people.keys()
    /// let english = try people.keys(.index("locale", equals: "EN"))
    /// ```
    public func keys(_ query: Query = .all) throws(BuriError) -> [String] { try raw.keys(checked(query)) }

    /// The objects matching `query` (all objects, in key order, by default).
    ///
    /// ```swift
    /// let twenties = try people.objects(.index("age", in: 20...29))
    /// ```
    // @inlinable (public API only inside): specialized in the caller's module, the array of `T`
    // grows by moves instead of unspecialized per-element copies, a third of a 2i object read.
    // For a `Sendable` `T`, the overloads in ParallelDecode.swift decode a large result on every core.
    @inlinable
    public func objects(_ query: Query = .all) throws(BuriError) -> [T] {
        let cursor = try cursor(query)
        var objects: [T] = []
        while let object = try cursor.next() { objects.append(object) }
        return objects
    }

    /// The keys and objects matching `query`, in the query's order.
    ///
    /// ```swift
    /// for (key, person) in try people.entries(.index("age", in: 20...29)) { print(key, person.name) }
    /// ```
    public func entries(_ query: Query) throws(BuriError) -> [(key: String, object: T)] {
        let cursor = try cursor(query)
        var entries: [(key: String, object: T)] = []
        while let entry = try cursor.nextEntry() { entries.append(entry) }
        return entries
    }

    /// One page of at most `size` objects matching `query`, and a token for the next page.
    ///
    /// Fetch the next page with `query.after(page.next)`. Over a walk of pages, `query.limit` caps
    /// the total and `query.offset` is skipped once, by the first page; see ``Page``.
    ///
    /// ```swift
    /// let first = try people.page(.index("age", in: 20...).limit(250), size: 100)
    /// let second = try people.page(.index("age", in: 20...).limit(250).after(first.next), size: 100)
    /// ```
    /// - Throws: ``BuriError/invalidQuery(bucket:index:reason:)`` if `size` is not positive,
    ///   ``BuriError/invalidContinuation(bucket:reason:)`` for a token of another bucket or query.
    public func page(_ query: Query, size: Int) throws(BuriError) -> Page<T> {
        try raw.page(checked(query), size: size) { cursor throws(BuriError) -> T? in
            guard try cursor.nextObject() else { return nil }
            // The key is built only on an error or an upgrade: returning objects does not need it.
            return try decode(cursor.currentPayload, version: cursor.currentSchemaVersion, key: cursor.currentKey)
        }
    }

    /// One page of at most `size` keys matching `query`, and a token for the next page; pages
    /// exactly as ``page(_:size:)`` does.
    ///
    /// ```swift
    /// let first = try people.keyPage(.index("age", in: 20...), size: 100)
    /// let second = try people.keyPage(.index("age", in: 20...).after(first.next), size: 100)
    /// ```
    public func keyPage(_ query: Query, size: Int) throws(BuriError) -> Page<String> {
        try raw.keyPage(checked(query), size: size)
    }

    /// A streaming cursor over the objects matching `query`: bounded memory, one snapshot, and
    /// errors thrown where they occur.
    ///
    /// ```swift
    /// let cursor = try people.cursor(.index("age", in: 22...24))
    /// while let person = try cursor.next() { print(person.name) }
    /// ```
    public func cursor(_ query: Query) throws(BuriError) -> ObjectCursor<T> {
        ObjectCursor(bucket: self, raw: try raw.cursor(checked(query)))
    }

    /// The objects matching `query` as a lazy `Sequence` that streams from storage, each iteration
    /// from its own snapshot. See ``LazyQuerySequence`` for how errors surface.
    ///
    /// ```swift
    /// let everyone = people.lazyObjects()
    /// for person in everyone { total += person.age }
    /// if let error = everyone.error { throw error }
    /// ```
    public func lazyObjects(_ query: Query = .all) -> LazyQuerySequence<T> {
        LazyQuerySequence(raw: raw, query: query, refusal: refusal(of: query)) {
            [self] cursor throws(BuriError) -> T? in
            guard try cursor.nextObject() else { return nil }
            // The key is built only on an error or an upgrade: returning objects does not need it.
            return try decode(cursor.currentPayload, version: cursor.currentSchemaVersion, key: cursor.currentKey)
        }
    }

    /// The keys matching `query` as a lazy `Sequence` that streams from storage; errors surface as
    /// in ``lazyObjects(_:)``.
    ///
    /// ```swift
    /// for key in people.lazyKeys(.index("locale", equals: "EN")) { print(key) }
    /// ```
    public func lazyKeys(_ query: Query = .all) -> LazyQuerySequence<String> {
        LazyQuerySequence(raw: raw, query: query, refusal: refusal(of: query)) { cursor throws(BuriError) -> String? in
            try cursor.nextKey()
        }
    }

    /// The smallest value of a numeric or binary index (its first component), read from the index alone.
    ///
    /// ```swift
    /// let youngest = try people.min(index: "age")   // 18, or nil for an empty index
    /// ```
    public func min(index: String) throws(BuriError) -> IndexValue? { try raw.extremeValue(index: index, last: false) }

    /// The largest value of an index (its first component), read from the index alone.
    ///
    /// ```swift
    /// let oldest = try people.max(index: "age")
    /// ```
    public func max(index: String) throws(BuriError) -> IndexValue? { try raw.extremeValue(index: index, last: true) }
}

/// Streams the objects of one query, from one snapshot, decoding each as it is reached.
///
/// ```swift
/// let cursor = try people.cursor(.index("age", in: 22...24))
/// while let person = try cursor.next() { print(person.name) }
/// ```
public final class ObjectCursor<T: BuriSupport> {
    let bucket: Bucket<T>
    let raw: RawQueryCursor

    init(bucket: Bucket<T>, raw: RawQueryCursor) {
        self.bucket = bucket
        self.raw = raw
    }

    /// The next object, or `nil` at the end.
    public func next() throws(BuriError) -> T? {
        guard try raw.nextObject() else { return nil }
        // The key is built only on an error or an upgrade: returning objects does not need it.
        return try bucket.decode(raw.currentPayload, version: raw.currentSchemaVersion, key: raw.currentKey)
    }

    /// The next key and object, or `nil` at the end.
    public func nextEntry() throws(BuriError) -> (key: String, object: T)? {
        guard try raw.nextObject() else { return nil }
        let key = raw.currentKey
        return (key, try bucket.decode(raw.currentPayload, version: raw.currentSchemaVersion, key: key))
    }

    /// A token that resumes the query right after the last object returned.
    public var continuation: ContinuationToken? { raw.continuation }
}

// MARK: Encoding large batches on several cores

extension Bucket where T: Sendable {
    /// Stores every object in one atomic batch, as ``store(_:)-(Sequence<T>)`` does, encoding
    /// a large array on every core: all of them or, on any error, none. A key that appears twice
    /// ends up with its last object.
    ///
    /// An array of 8,192 objects or more is encoded on every core (each object's CBOR and index
    /// values are independent of the others), in chunks whose results are put into the batch in
    /// the array's order, so the batch is byte for byte the one the serial path builds; the first
    /// object that fails to encode, in array order, is the error thrown.
    /// A smaller array is encoded on the calling thread.
    ///
    /// ```swift
    /// try people.storeConcurrently(thousandsOfPeople)   // encoded on every core, written in one batch
    /// ```
    public func storeConcurrently(_ objects: [T]) throws(BuriError) {
        let writes = try prepareAll(objects)
        if !writes.isEmpty { try raw.write(writes) }
    }

    /// The writes for `objects`, in their order: encoded in parallel chunks when there are at least
    /// ``parallelEncodingThreshold`` of them (and `parallel` allows it), else one after another.
    func prepareAll(_ objects: [T], parallel: Bool = true) throws(BuriError) -> [RawBucket.RecordWrite] {
        let chunkSize = Self.encodingChunkSize
        guard parallel, objects.count >= Self.parallelEncodingThreshold else {
            var writes: [RawBucket.RecordWrite] = []
            writes.reserveCapacity(objects.count)
            let interner = hasTextIndexes ? TextTupleInterner() : nil
            for object in objects { writes.append(try prepare(object, interner: interner)) }
            return writes
        }
        let chunks = (objects.count + chunkSize - 1) / chunkSize
        var results = [Result<[RawBucket.RecordWrite], BuriError>?](repeating: nil, count: chunks)
        results.withUnsafeMutableBufferPointer { buffer in
            // Each chunk writes only its own slot.
            nonisolated(unsafe) let slots = buffer
            DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                let range = (chunk * chunkSize)..<Swift.min(objects.count, (chunk + 1) * chunkSize)
                var writes: [RawBucket.RecordWrite] = []
                writes.reserveCapacity(range.count)
                do throws(BuriError) {
                    let interner = hasTextIndexes ? TextTupleInterner() : nil
                    for object in objects[range] { writes.append(try prepare(object, interner: interner)) }
                    slots[chunk] = .success(writes)
                } catch {
                    slots[chunk] = .failure(error)
                }
            }
        }
        var writes: [RawBucket.RecordWrite] = []
        writes.reserveCapacity(objects.count)
        for index in results.indices {
            switch results[index] {
            case .success(let chunk)?: writes.append(contentsOf: chunk)
            case .failure(let error)?: throw error
            case nil:
                throw .encodingFailed(
                    bucket: name, key: "", reason: "chunk \(index) of a parallel encoding produced nothing")
            }
            results[index] = nil  // the chunk's array goes as soon as it is copied
        }
        return writes
    }

    /// Arrays of at least this many objects are encoded on several cores (the public
    /// documentation of `storeConcurrently(_:)` gives the number: change both together).
    static var parallelEncodingThreshold: Int { 8_192 }
    /// Objects per parallel encoding task.
    static var encodingChunkSize: Int { 2_048 }
}
