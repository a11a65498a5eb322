import BuriStorage
import Synchronization

/// A bucket seen without its Swift type: records as header plus CBOR payload, index entries as
/// value tuples. ``Bucket`` is built on it; the `buri` tool uses it directly.
///
/// ```swift
/// let raw = try db.rawBucket(named: "Person")
/// for key in try raw.keys(.index("locale", equals: "EN")) { print(key) }
/// ```
public final class RawBucket: Sendable {
    /// The bucket's catalog entry as of when this view was made, with the id of the bucket's
    /// current generation: after ``deleteAll(sync:)`` (here, or through another view of the same
    /// bucket) the id is the new generation's.
    public var descriptor: BucketDescriptor { descriptor(at: bucketId) }

    /// The descriptor this view uses for generation `id`: a view made while its bucket held
    /// plaintext follows it into its sealed generation (a database being encrypted online), whose
    /// private indexes store tokens.
    func descriptor(at id: UInt32) -> BucketDescriptor {
        if madeDescriptor.plaintextValues == true, let sealed = sealedDescriptor,
            database.plaintextPhase?.isSealed(id) == true
        {
            return sealed.movedTo(id)
        }
        return madeDescriptor.movedTo(id)
    }

    /// Whether this view, made while its bucket held plaintext, now reads and writes its sealed generation.
    var followsIntoSealed: Bool {
        madeDescriptor.plaintextValues == true && database.plaintextPhase?.isSealed(bucketId) == true
    }

    /// The descriptor of this view's bucket once sealed, with its tokens (nil unless the view was
    /// made while the bucket held plaintext, in a database being encrypted).
    var sealedDescriptor: BucketDescriptor? {
        guard madeDescriptor.plaintextValues == true, let tokens = database.indexTokens else { return nil }
        var sealed = madeDescriptor
        sealed.plaintextValues = nil
        return sealed.attaching(tokens)
    }
    /// The catalog entry this view was made from.
    let madeDescriptor: BucketDescriptor
    let database: BuriDatabase
    /// Whether the view keeps the id it was made with: a transaction's view (which sees the
    /// transaction's snapshot) and the view one query reads through. Other views follow the
    /// bucket to each new generation.
    let pinned: Bool
    /// The epoch of `database.generations` (high 32 bits) at which the id (low 32 bits) was resolved.
    private let current: Atomic<UInt64>

    /// The catalog generation this view was made at (see `BuriDatabase.catalogGeneration`).
    let generation: Int
    /// The transaction this view reads and writes through, if any.
    let transaction: BuriTransaction?

    /// For the view of a staged import: its id's marker, put again with every batch it writes so
    /// observers know the batch for staging, not objects (see `ParsedCommit`).
    let stagingMarker: (key: [UInt8], value: [UInt8])?
    /// The owner the staging marker names (a shared engine's lease): every batch reads its lease
    /// key, so that it commits only while the lease holds.
    let stagingOwner: UInt64?

    init(
        database: BuriDatabase, descriptor: BucketDescriptor, transaction: BuriTransaction? = nil,
        generation: Int? = nil, pinned: Bool = false,
        stagingMarker: (key: [UInt8], value: [UInt8])? = nil
    ) {
        self.stagingMarker = stagingMarker
        stagingOwner = stagingMarker.flatMap { Keyspace.parseRetired(key: $0.key, value: $0.value)?.owner }
        self.database = database
        // A private index's values are its tokens for every read and write through this view.
        self.madeDescriptor = descriptor.attaching(database.indexTokens)
        self.transaction = transaction
        self.pinned = pinned || transaction != nil
        self.generation = generation ?? database.catalogGeneration(descriptor.name)
        // An epoch that cannot be the current one, so the first use resolves the id.
        let epoch = database.generations.epoch.load(ordering: .acquiring) &- 1
        current = Atomic(UInt64(epoch) << 32 | UInt64(descriptor.id))
        pinnedRecordPrefix = self.pinned ? Keyspace.recordPrefix(bucket: descriptor.id) : nil
    }

    /// The id of the bucket's current generation (one atomic load when no generation switched).
    @inline(__always)
    var bucketId: UInt32 {
        if pinned { return madeDescriptor.id }
        let epoch = database.generations.epoch.load(ordering: .acquiring)
        let packed = current.load(ordering: .relaxed)
        if UInt32(truncatingIfNeeded: packed >> 32) == epoch { return UInt32(truncatingIfNeeded: packed) }
        return resolveId(epoch: epoch, from: UInt32(truncatingIfNeeded: packed))
    }

    private func resolveId(epoch: UInt32, from id: UInt32) -> UInt32 {
        let resolved = database.generations.resolve(id)
        current.store(UInt64(epoch) << 32 | UInt64(resolved), ordering: .relaxed)
        return resolved
    }

    /// `0x02` + the id, kept for a pinned view (queries build record keys from it per entry).
    private let pinnedRecordPrefix: [UInt8]?

    /// `0x02` + the current bucket id.
    var recordPrefix: [UInt8] {
        if let pinnedRecordPrefix { return pinnedRecordPrefix }
        return Keyspace.recordPrefix(bucket: bucketId)
    }

    /// A view fixed to the current generation, for work that must use one id throughout (a query).
    func pinnedView() -> RawBucket {
        if pinned { return self }
        return RawBucket(
            database: database, descriptor: descriptor, transaction: nil, generation: generation, pinned: true)
    }

    /// The bucket's name.
    public var name: String { madeDescriptor.name }

    /// A consistent view for one query: the transaction's, or a fresh snapshot.
    func reader() throws(BuriError) -> any StorageReader {
        if let transaction { return try transaction.reader() }
        return try database.snapshot()
    }

    /// The view for one point read: the transaction's, or the current state.
    func pointReader() throws(BuriError) -> any StorageReader {
        if let transaction { return try transaction.reader() }
        return try database.currentReader()
    }

    /// Runs one writer: inside the transaction as one statement (if it throws, it leaves nothing in
    /// the transaction: see ``BuriTransaction/statement(_:)``), or as its own atomic commit.
    func withWriter<R>(sync: Bool?, _ body: (Writer) throws(BuriError) -> R) throws(BuriError) -> R {
        if let transaction { return try transaction.statement(body) }
        guard let stagingMarker else { return try database.performWrite(sync: sync, body) }
        return try database.performWrite(sync: sync) { writer throws(BuriError) -> R in
            let result = try body(writer)
            if !writer.batch.isEmpty {
                try database.requireStageOwnership(
                    stagingOwner, stage: madeDescriptor.id, bucket: name, reader: writer.reader)
                writer.batch.put(stagingMarker.key, stagingMarker.value)
            }
            return result
        }
    }

    /// Runs a storage call on this bucket's data: LevelDB errors become Buri's, and damage met
    /// names this bucket.
    @inline(__always)
    func run<R>(_ body: () throws -> R) throws(BuriError) -> R {
        try database.run(bucket: name, body)
    }

    // MARK: Keys

    func validateKey(_ key: String) throws(BuriError) {
        if key.isEmpty { throw .emptyKey(bucket: name) }
        let length = key.utf8.count
        if length > Keyspace.maxObjectKeyLength {
            throw .keyTooLong(
                bucket: name, keyPrefix: String(key.prefix(32)), length: length, limit: Keyspace.maxObjectKeyLength)
        }
    }

    @inline(__always)
    func recordKey(_ key: String) -> [UInt8] { Keyspace.recordKey(bucket: bucketId, key: key) }

    /// Checks one value tuple against an index's definition (arity, kinds, encoded length) and adds
    /// its entry to `entries` unless an equal one is there. The one place both writers (typed and
    /// raw) turn index values into header entries.
    func appendEntry(
        _ tuple: [IndexValue], for definition: IndexDefinition, key: String, to entries: inout [RecordHeader.Entry]
    ) throws(BuriError) {
        let entry = try entry(tuple, for: definition, key: key)
        if !entries.contains(entry) { entries.append(entry) }
    }

    /// Appends the entries of one index's value tuples (``appendEntry(_:for:key:to:)``),
    /// equal tuples giving one entry. Many tuples (a long array) are told apart by a set, so that
    /// storing an object with thousands of values is not quadratic in them.
    func appendEntries(
        _ tuples: [[IndexValue]], for definition: IndexDefinition, key: String, to entries: inout [RecordHeader.Entry]
    ) throws(BuriError) {
        guard tuples.count > 16 else {
            for tuple in tuples { try appendEntry(tuple, for: definition, key: key, to: &entries) }
            return
        }
        // An object's tuples of one index are appended by one call, so equal entries can only be
        // among them.
        var seen = Set<RecordHeader.Entry>(minimumCapacity: tuples.count)
        entries.reserveCapacity(entries.count + tuples.count)
        for tuple in tuples {
            let entry = try entry(tuple, for: definition, key: key)
            if seen.insert(entry).inserted { entries.append(entry) }
        }
    }

    /// The header entry of one value tuple, checked against the index's definition (arity, kinds,
    /// encoded length), its values as the index stores them (tokens for a private index).
    private func entry(
        _ tuple: [IndexValue], for definition: IndexDefinition, key: String
    ) throws(BuriError) -> RecordHeader.Entry {
        guard tuple.count == definition.components.count,
            zip(tuple, definition.components).allSatisfy({ $0.isNumeric == ($1 == .numeric) })
        else {
            throw .invalidIndexValue(
                bucket: name, key: key, index: definition.name,
                reason: "expected a tuple of \(definition.components.map(\.rawValue)), got \(tuple)")
        }
        let tuple = definition.stored(tuple)
        let encoded = tuple.count == 1 ? tuple[0].encoded : IndexTuple.join(tuple)
        return try checkedEntry(encoded, for: definition, key: key)
    }

    /// The header entry of an encoded tuple, refused when it is longer than an entry key holds.
    private func checkedEntry(
        _ encoded: [UInt8], for definition: IndexDefinition, key: String
    ) throws(BuriError) -> RecordHeader.Entry {
        if encoded.count > Keyspace.maxTupleLength {
            throw .invalidIndexValue(
                bucket: name, key: key, index: definition.name,
                reason: "the value is \(encoded.count) bytes encoded, over the limit of \(Keyspace.maxTupleLength)")
        }
        return RecordHeader.Entry(index: definition.id, tuple: encoded)
    }

    /// Appends a text index's entry for one term, given as its encoded tuple (one binary element,
    /// as `TextEntries.entries` gives it): `appendEntry` without building `IndexValue`s, except
    /// for a private index, whose terms become tokens. Terms come distinct, so no search for an
    /// equal entry.
    func appendTextEntry(
        _ tuple: [UInt8], for definition: IndexDefinition, key: String, to entries: inout [RecordHeader.Entry]
    ) throws(BuriError) {
        entries.append(
            definition.isPrivate
                ? try entry([IndexValue(encoded: tuple)], for: definition, key: key)
                : try checkedEntry(tuple, for: definition, key: key))
    }

    @inline(__always)
    func entryKey(_ entry: RecordHeader.Entry, objectKey: String) -> [UInt8] {
        Keyspace.indexEntryKey(bucket: bucketId, index: entry.index, tuple: entry.tuple, objectKey: objectKey)
    }

    /// `reader`, or, on an engine where every read is a round trip, a reader that has read the
    /// records of all `keys` in one request.
    func readerForKeys(_ keys: [String], _ reader: any StorageReader) throws(BuriError) -> any StorageReader {
        guard reader.prefersBatchedReads, keys.count > 1 else { return reader }
        return try run { try PrefetchingReader(reader, keys: keys.map { recordKey($0) }) }
    }
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

/// An object (or record) key as UTF-8 bytes, for bookkeeping in writes, queries and checks: equal only when the bytes are
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
