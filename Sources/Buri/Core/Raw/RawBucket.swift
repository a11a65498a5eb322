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
    public var descriptor: BucketDescriptor {
        madeDescriptor.movedTo(bucketId)
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

    init(database: BuriDatabase, descriptor: BucketDescriptor, transaction: BuriTransaction? = nil, generation: Int? = nil, pinned: Bool = false,
         stagingMarker: (key: [UInt8], value: [UInt8])? = nil) {
        self.stagingMarker = stagingMarker
        self.database = database
        self.madeDescriptor = descriptor
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
        return RawBucket(database: database, descriptor: descriptor, transaction: nil, generation: generation, pinned: true)
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

    /// Whether a read must find the bucket's current id in the catalog at its own snapshot: on an
    /// engine where another client can switch the bucket's generation (or drop it) unseen, the id
    /// this view knows may be retired and partly purged. Pinned views (a transaction's, a query's)
    /// were resolved at the snapshot they read; unshared engines learn every switch as it commits.
    var resolvesAtRead: Bool { !pinned && database.engine.isShared }

    /// For one range read (a query, a count, a key walk): a consistent view and this bucket pinned
    /// to its generation at that view. On a shared engine the catalog entry is read at the same
    /// snapshot (one more key per read, never per object), so another client's `deleteAll` or
    /// drop is seen by the very read that could otherwise meet its partly purged keys.
    func readView() throws(BuriError) -> (reader: any StorageReader, bucket: RawBucket) {
        // The snapshot first, then the generation: a switch committed before the snapshot is seen.
        let reader = try reader()
        guard resolvesAtRead else {
            let view = pinnedView()
            if view.bucketId == BucketGenerations.dropped { throw droppedError }
            return (reader, view)
        }
        let id = try idInCatalog(try database.bucketInfo(named: name, reader: reader), reader: reader)
        return (reader, RawBucket(database: database, descriptor: madeDescriptor.movedTo(id), transaction: nil, generation: generation, pinned: true))
    }

    /// Lends the stored record value of object `key` (or `nil`) to `body`, read at the current
    /// generation. On a shared engine the catalog entry and the record are read from one snapshot in
    /// one request (``StorageReader/values(forKeys:)``); only if the generation switched is the
    /// record read again under the new id.
    func withCurrentValue<R>(forKey key: String, _ body: (UnsafeRawBufferPointer?) throws -> R) throws(BuriError) -> R {
        guard resolvesAtRead else {
            let reader = try pointReader()
            let id = bucketId
            if id == BucketGenerations.dropped { throw droppedError }
            return try run { try reader.withValue(forKey: Keyspace.recordKey(bucket: id, key: key), body) }
        }
        let reader = try reader()
        let known = bucketId
        let catalogKey = Keyspace.catalogKey(bucket: name)
        let values = try run { try reader.values(forKeys: [catalogKey, Keyspace.recordKey(bucket: known, key: key)]) }
        let stored: BucketDescriptor?
        if let bytes = values.first ?? nil {
            do {
                stored = try BucketDescriptor.decode(bytes)
            } catch {
                throw .corruption(bucket: name, key: nil, index: nil, reason: "its catalog entry does not decode: \(error)")
            }
        } else {
            stored = nil
        }
        let id = try idInCatalog(stored, reader: reader)
        let value = id == known ? (values.count > 1 ? values[1] : nil) : try run { try reader.get(Keyspace.recordKey(bucket: id, key: key)) }
        return try run {
            guard let value else { return try body(nil) }
            return try value.withUnsafeBytes { try body($0) }
        }
    }

    /// What a read or write through a view of a bucket dropped (or redefined) since it was made throws.
    var droppedError: BuriError {
        .invalidIndexDefinition(bucket: name, index: "*",
                                reason: "the bucket was redefined or dropped after this Bucket was opened; open it again with db.bucket(_:)")
    }

    /// The bucket id that catalog entry `stored` (read through `reader`) names for this view.
    /// A generation switched by another client is followed (and remembered for later reads); a
    /// bucket dropped or redefined since this view was made is refused with a typed error.
    func idInCatalog(_ stored: BucketDescriptor?, reader: any StorageReader) throws(BuriError) -> UInt32 {
        let id = bucketId
        // Dropped here (a bucket of the name made since is another bucket), or dropped anywhere.
        guard let stored, id != BucketGenerations.dropped else { throw droppedError }
        if stored.id == id { return id }
        guard stored.indexes.count == madeDescriptor.indexes.count,
              zip(stored.indexes, madeDescriptor.indexes).allSatisfy({ $0.id == $1.id && $0.hasSameShape(as: $1) }) else {
            throw .invalidIndexDefinition(bucket: name, index: "*",
                                          reason: "another client redefined the bucket after this Bucket was opened; open it again with db.bucket(_:)")
        }
        // Ids only grow: a smaller one is an older snapshot than what this process has learned,
        // and is read as it stands there (complete: nothing is purged before its switch commits).
        if stored.id > id { database.generations.forward(id, to: stored.id) }
        return stored.id
    }

    /// Runs one writer: inside the transaction as one statement (if it throws, it leaves nothing in
    /// the transaction: see ``BuriTransaction/statement(_:)``), or as its own atomic commit.
    func withWriter<R>(sync: Bool?, _ body: (Writer) throws(BuriError) -> R) throws(BuriError) -> R {
        if let transaction { return try transaction.statement(body) }
        guard let stagingMarker else { return try database.performWrite(sync: sync, body) }
        return try database.performWrite(sync: sync) { writer throws(BuriError) -> R in
            let result = try body(writer)
            if !writer.batch.isEmpty { writer.batch.put(stagingMarker.key, stagingMarker.value) }
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
            throw .keyTooLong(bucket: name, keyPrefix: String(key.prefix(32)), length: length, limit: Keyspace.maxObjectKeyLength)
        }
    }

    @inline(__always)
    func recordKey(_ key: String) -> [UInt8] { Keyspace.recordKey(bucket: bucketId, key: key) }

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
    ///
    /// On a shared engine, the catalog entry is read too (so it is a condition of the commit): a
    /// generation switched by another client is followed, like one switched here.
    func checkCurrent(_ reader: any StorageReader) throws(BuriError) {
        guard database.catalogGeneration(name) == generation else {
            throw .invalidIndexDefinition(bucket: name, index: "*",
                                          reason: "the bucket was redefined or dropped after this Bucket was opened; open it again with db.bucket(_:)")
        }
        guard database.engine.isShared, !pinned else { return }
        _ = try idInCatalog(try database.bucketInfo(named: name, reader: reader), reader: reader)
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
        try withWriter(sync: sync) { writer throws(BuriError) in
            try checkCurrent(writer.reader)
            let batch = writer.batch
            if madeDescriptor.indexes.isEmpty {
                // No index entries to replace (index evolution strips dropped indexes from every
                // header): each object is one put, and only whether it is new is read, for the count.
                let added = try writeWithoutIndexes(writes, writer: writer)
                writer.adjustCount(of: bucketId, bucket: name, by: added)
                return
            }
            // Keys are compared as UTF-8 bytes throughout, never as Swift Strings: String equality is
            // canonical equivalence, so "é" and "e\u{301}" would be one key to a String but are two on disk.
            /// Headers as they will be once the batch is applied, for keys written earlier in it.
            var pending: [ObjectKeyBytes: RecordHeader?] = [:]
            pending.reserveCapacity(writes.count)
            /// Unique values claimed by objects earlier in this batch.
            var claims: [RecordHeader.Entry: [UInt8]] = [:]
            let uniqueIds = Set(madeDescriptor.indexes.filter(\.unique).map(\.id))
            // A bucket with no record at the writer's view has no old header to read for any key:
            // the only earlier versions are those in this batch (`pending`). One seek instead of a
            // point read per object; through a shared engine's recording reader the scanned range
            // becomes a commit condition, so a record another client adds meanwhile is a conflict.
            let bucketIsEmpty = writes.count > 1 ? try hasNoRecords(writer.reader) : false
            let reader = bucketIsEmpty ? writer.reader : try readerForKeys(writes.map(\.key), writer.reader)
            // A large batch over a bucket with records reads its old headers by one walk in key order
            // (see `walkOldHeaders`), where the engine is local and only this process writes to it.
            let walking = !bucketIsEmpty && writes.count >= Self.walkThreshold && !reader.prefersBatchedReads && !database.engine.isShared
            let allKeyBytes = walking ? writes.map { Array($0.key.utf8) } : []
            let walked = walking ? try walkOldHeaders(allKeyBytes, reader: reader) : nil
            /// Objects new to the bucket (not stored, and not earlier in this batch): the count's change
            /// (if a later object fails, a transaction's statement savepoint takes it back with the puts).
            var added = 0
            defer { writer.adjustCount(of: bucketId, bucket: name, by: added) }
            for (position, write) in writes.enumerated() {
                let keyBytes = walking ? allKeyBytes[position] : Array(write.key.utf8)
                let pendingKey = ObjectKeyBytes(keyBytes)
                let old: RecordHeader?
                /// Not stored and not earlier in this batch (a stored record, even a damaged one, has a header here).
                let isNew: Bool
                if let known = pending[pendingKey] {
                    old = known
                    isNew = false
                } else if bucketIsEmpty {
                    old = nil
                    isNew = true
                } else if let walked {
                    old = try walked.header(at: position, key: write.key, bucket: self, reader: reader)
                    isNew = old == nil
                } else {
                    old = try currentHeader(forKey: write.key, reader: reader)
                    isNew = old == nil
                }
                let oldEntries = old?.entries ?? []
                for entry in oldEntries where !write.header.entries.contains(entry) {
                    batch.delete(entryKey(entry, objectKey: write.key))
                    if claims[entry] == keyBytes { claims[entry] = nil }
                }
                for entry in write.header.entries where !oldEntries.contains(entry) {
                    if uniqueIds.contains(entry.index) {
                        try checkUnique(entry, for: keyBytes, pending: pending, claims: claims, reader: reader)
                        claims[entry] = keyBytes
                    }
                    batch.put(entryKey(entry, objectKey: write.key), [UInt8]())
                }
                batch.put(recordKey(write.key), write.value)
                if isNew { added += 1 }
                pending[pendingKey] = .some(write.header)
            }
        }
    }

    /// Puts the records of a bucket without indexes and returns how many of them are new: none is
    /// read when the bucket is empty (one seek), large batches find their stored keys by one walk
    /// (``walkOldHeaders(_:reader:)``), others by a point read each. A key repeated in the batch is
    /// new at most once (keys compared as bytes).
    private func writeWithoutIndexes(_ writes: [RecordWrite], writer: Writer) throws(BuriError) -> Int {
        let batch = writer.batch
        if writes.count == 1 {
            let key = recordKey(writes[0].key)
            let exists = try run { try writer.reader.contains(key) }
            batch.put(key, writes[0].value)
            return exists ? 0 : 1
        }
        var seen = Set<ObjectKeyBytes>(minimumCapacity: writes.count)
        var added = 0
        if try hasNoRecords(writer.reader) {
            for write in writes {
                let key = recordKey(write.key)
                if seen.insert(ObjectKeyBytes(key)).inserted { added += 1 }
                batch.put(key, write.value)
            }
            return added
        }
        let reader = try readerForKeys(writes.map(\.key), writer.reader)
        let walking = writes.count >= Self.walkThreshold && !reader.prefersBatchedReads && !database.engine.isShared
        let walked = walking ? try walkOldHeaders(writes.map { Array($0.key.utf8) }, reader: reader) : nil
        for (position, write) in writes.enumerated() {
            let key = recordKey(write.key)
            if seen.insert(ObjectKeyBytes(key)).inserted {
                let exists: Bool
                if let walked {
                    if case .absent = walked.slots[position] { exists = false } else { exists = true }
                } else {
                    exists = try run { try reader.contains(key) }
                }
                if !exists { added += 1 }
            }
            batch.put(key, write.value)
        }
        return added
    }

    /// Batches of at least this many objects read their old records by ``walkOldHeaders(_:reader:)``.
    static let walkThreshold = 256
    /// How many entries the walk steps forward before it seeks instead (a step costs about a tenth
    /// of a point read or seek).
    static let walkSteps = 8

    /// The stored record headers of a batch's keys, read by one walk.
    struct WalkedHeaders {
        enum Slot {
            case absent
            /// The record is there but its header does not read.
            case damaged
            /// The header's bytes: `bytes[start..<(start + length)]`.
            case stored(start: Int, length: Int)
        }
        /// One slot per write, in the batch's order.
        var slots: [Slot]
        /// The header bytes of every record found, one after another (headers only: a few bytes
        /// per object, not the payloads).
        var bytes: [UInt8]

        func header(at position: Int, key: String, bucket: RawBucket, reader: any StorageReader) throws(BuriError) -> RecordHeader? {
            switch slots[position] {
            case .absent:
                return nil
            case .damaged:
                return try bucket.currentHeader(forKey: key, reader: reader)
            case let .stored(start, length):
                let parsed = bytes.withUnsafeBytes { raw in
                    try? RecordHeader.parse(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])).0
                }
                if let parsed { return parsed }
                return try bucket.currentHeader(forKey: key, reader: reader)
            }
        }
    }

    /// Reads the stored headers of the records of `keys` (object keys as UTF-8 bytes, in the
    /// batch's order) by one forward cursor over the bucket's records, visiting the keys in byte
    /// order: the cursor steps forward up to ``walkSteps`` entries to reach the next key and seeks
    /// only across longer gaps. A refill of a bucket's objects then costs one step per object instead
    /// of one point read each. A damaged header is marked, for `currentHeader` to rebuild it from the
    /// index entries as a point read would.
    func walkOldHeaders(_ keys: [[UInt8]], reader: any StorageReader) throws(BuriError) -> WalkedHeaders {
        // Sorted by each key's first 8 bytes as one big-endian integer, then bytewise: most
        // comparisons are one integer comparison instead of a call over two arrays.
        var order: [(head: UInt64, index: Int)] = keys.indices.map { index in
            var head: UInt64 = 0
            for (offset, byte) in keys[index].prefix(8).enumerated() { head |= UInt64(byte) << (56 - 8 * UInt64(offset)) }
            return (head, index)
        }
        order.sort { a, b in a.head != b.head ? a.head < b.head : compareBytes(keys[a.index], keys[b.index]) < 0 }
        var slots = [WalkedHeaders.Slot](repeating: .absent, count: keys.count)
        var bytes: [UInt8] = []
        try run {
            let cursor = try reader.cursor(in: .prefix(recordPrefix))
            var target = recordPrefix
            var started = false
            var exhausted = false
            var previous: Int?
            for (_, position) in order {
                if let previous, keys[previous] == keys[position] {
                    slots[position] = slots[previous]
                    continue
                }
                previous = position
                if exhausted { continue }
                target.removeSubrange(recordPrefix.count...)
                target.append(contentsOf: keys[position])
                // Move onto the first record at or after `target`.
                var comparison = 0
                var steps = 0
                while true {
                    if started {
                        comparison = cursor.withKey { compareBytes($0, target) }
                        if comparison >= 0 { break }
                    }
                    if !started || steps == Self.walkSteps {
                        cursor.seek(target)
                        started = true
                        guard try cursor.next() else { exhausted = true; break }
                        comparison = cursor.withKey { compareBytes($0, target) }
                        break
                    }
                    guard try cursor.next() else { exhausted = true; break }
                    steps += 1
                }
                guard !exhausted, comparison == 0 else { continue }
                cursor.withValue { value in
                    if let length = try? RecordHeader.payloadOffset(value) {
                        slots[position] = .stored(start: bytes.count, length: length)
                        bytes.append(contentsOf: value[..<length])
                    } else {
                        slots[position] = .damaged
                    }
                }
            }
        }
        return WalkedHeaders(slots: slots, bytes: bytes)
    }

    /// Whether the bucket has no record at all in `reader`'s view (one seek on the record prefix).
    func hasNoRecords(_ reader: any StorageReader) throws(BuriError) -> Bool {
        try run { try !reader.cursor(in: .prefix(recordPrefix)).next() }
    }

    /// Deletes objects and every index entry their stored headers list, in one atomic batch.
    /// Keys that are not there are ignored. Returns how many objects were deleted.
    @discardableResult
    public func delete(keys: [String], sync: Bool? = nil) throws(BuriError) -> Int {
        try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            var deleted = Set<[UInt8]>()  // UTF-8 bytes: see write(_:sync:) on String equality
            let reader = try readerForKeys(keys, writer.reader)
            for key in keys where !deleted.contains(Array(key.utf8)) {
                guard let header = try currentHeader(forKey: key, reader: reader) else { continue }
                for entry in header.entries { writer.batch.delete(entryKey(entry, objectKey: key)) }
                writer.batch.delete(recordKey(key))
                deleted.insert(Array(key.utf8))
            }
            writer.adjustCount(of: bucketId, bucket: name, by: -deleted.count)
            return deleted.count
        }
    }

    /// Deletes every object and index entry of the bucket; keeps the bucket and its index
    /// definitions. Returns how many objects were deleted (counted in the state the deletion
    /// commits on).
    ///
    /// Outside a transaction this writes two keys whatever the size of the bucket: the bucket gets
    /// a new, empty generation (a fresh bucket id) in one catalog commit, and the old generation's
    /// keys are purged in the background, in chunks, resuming at the next open if the process ends
    /// first (see ``BuriDatabase/pendingPurges()``). This view and every other view of the bucket
    /// go on with the new generation. Inside ``BuriDatabase/write(_:)`` each key is deleted in the
    /// transaction instead, so the transaction's later reads and writes see the bucket as before.
    ///
    /// ```swift
    /// let removed = try raw.deleteAll()
    /// try raw.count()   // 0
    /// ```
    @discardableResult
    public func deleteAll(sync: Bool? = nil) throws(BuriError) -> Int {
        if transaction != nil { return try deleteEachKey(sync: sync) }
        return try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            guard let stored = try database.bucketInfo(named: name, reader: writer.reader) else {
                throw .unknownBucket(name: name, known: try database.bucketNames(reader: writer.reader))
            }
            // One key read: the stored count (counted only in a database no format-4 writer has written).
            let count = try database.objectCount(of: stored.id, bucket: name, reader: writer.reader)
            if count == 0, try countEntries(in: .prefix(Keyspace.indexSpacePrefix(bucket: stored.id)), reader: writer.reader, cap: 1) == 0 {
                return 0
            }
            let newId = try database.nextBucketId(reader: writer.reader)
            try database.retire(stored, replacingWith: newId, writer: writer)
            writer.batch.put(Keyspace.countKey(bucket: newId), Keyspace.countValue(0))
            return count
        }
    }

    /// `deleteAll` as one batch deleting every key (inside a transaction).
    private func deleteEachKey(sync: Bool?) throws(BuriError) -> Int {
        try withWriter(sync: sync) { writer throws(BuriError) -> Int in
            try checkCurrent(writer.reader)
            let id = bucketId
            return try run {
                var count = 0
                let records = try writer.reader.cursor(in: .prefix(Keyspace.recordPrefix(bucket: id)))
                while try records.next() {
                    records.withKey { writer.batch.delete($0) }
                    count += 1
                }
                let entries = try writer.reader.cursor(in: .prefix(Keyspace.indexSpacePrefix(bucket: id)))
                while try entries.next() { entries.withKey { writer.batch.delete($0) } }
                writer.adjustCount(of: id, bucket: name, by: -count)
                return count
            }
        }
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

    /// The header of the stored object `key`, read through the writer's reader.
    /// If the record is damaged so that its header cannot be read, the header is rebuilt from the
    /// index entries that name `key`, so a damaged record can still be deleted or overwritten
    /// without leaving entries behind.
    func currentHeader(forKey key: String, reader: any StorageReader) throws(BuriError) -> RecordHeader? {
        let header = try run {
            try reader.withValue(forKey: recordKey(key)) { buffer -> RecordHeader?? in
                guard let buffer else { return .some(nil) }
                return (try? RecordHeader.parse(buffer).0).map { .some($0) }
            }
        }
        if let header { return header }
        return try entriesNaming(key, reader: reader)
    }

    /// A header listing every index entry of this bucket that names object `key`, found by scanning
    /// the bucket's indexes (entries that do not parse are skipped). For damaged records only.
    private func entriesNaming(_ key: String, reader: any StorageReader) throws(BuriError) -> RecordHeader {
        let objectKey = Array(key.utf8)
        var entries: [RecordHeader.Entry] = []
        try run {
            for index in madeDescriptor.indexes {
                let cursor = try reader.cursor(in: .prefix(Keyspace.indexPrefix(bucket: bucketId, index: index.id)))
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

    private func checkUnique(_ entry: RecordHeader.Entry, for key: [UInt8], pending: [ObjectKeyBytes: RecordHeader?], claims: [RecordHeader.Entry: [UInt8]], reader: any StorageReader) throws(BuriError) {
        let indexName = madeDescriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
        func violation(_ holder: [UInt8]) -> BuriError {
            let shown = IndexTuple.describe(entry.tuple)
            return .uniqueViolation(bucket: name, index: indexName, value: shown, holder: String(decoding: holder, as: UTF8.self))
        }
        if let holder = claims[entry], holder != key { throw violation(holder) }
        let prefix = Keyspace.indexPrefix(bucket: bucketId, index: entry.index) + entry.tuple
        try run {
            let cursor = try reader.cursor(in: .prefix(prefix))
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

    /// Lends the payload (CBOR bytes) of object `key` to `body`; returns `false`, without calling
    /// it, if there is no such object. Checks the header without building it.
    @discardableResult
    func withPayload(forKey key: String, _ body: (UnsafeRawBufferPointer) -> Void) throws(BuriError) -> Bool {
        try withCurrentValue(forKey: key) { buffer throws -> Bool in
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

    /// The stored payload (CBOR bytes) and header of object `key`, or `nil`.
    public func record(forKey key: String) throws(BuriError) -> StoredRecord? {
        try withCurrentValue(forKey: key) { buffer throws -> StoredRecord? in
            guard let buffer else { return nil }
            let header: RecordHeader
            let offset: Int
            do {
                (header, offset) = try RecordHeader.parse(buffer)
            } catch {
                throw BuriError.corruption(bucket: name, key: key, index: nil, reason: "record header: \(error)")
            }
            return StoredRecord(key: key, schemaVersion: header.schemaVersion, indexValues: indexValues(of: header), payload: Array(buffer[offset...]))
        }
    }

    /// Whether object `key` exists.
    public func contains(key: String) throws(BuriError) -> Bool {
        try withCurrentValue(forKey: key) { $0 != nil }
    }

    /// The number of objects in the bucket: one key read, the count every writer keeps in the same
    /// commit as the records (a database older than format 4, opened without writing, is counted
    /// record by record).
    ///
    /// ```swift
    /// try raw.count()   // 100_000, without reading a record
    /// ```
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` if the stored count is damaged
    ///   (`buri check --repair` recounts it).
    public func count() throws(BuriError) -> Int {
        let (reader, bucket) = try readView()
        let id = bucket.bucketId
        guard let stored = try database.storedCount(of: id, bucket: name, reader: reader) else {
            return try database.countRecords(of: id, bucket: name, reader: reader)
        }
        // Inside a transaction the count key is written at its commit: add what it changed so far.
        return stored + (transaction?.counts.byId[id]?.delta ?? 0)
    }

    /// The number of entries index `index` holds (an object has one per distinct value of a
    /// multi-valued index), counted from the index alone.
    public func entryCount(index: String) throws(BuriError) -> Int {
        guard let definition = madeDescriptor.index(named: index) else {
            throw .unknownIndex(bucket: name, index: index, known: madeDescriptor.indexes.map(\.name))
        }
        let (reader, bucket) = try readView()
        return try countEntries(in: .prefix(Keyspace.indexPrefix(bucket: bucket.bucketId, index: definition.id)), reader: reader, cap: nil)
    }

    /// Counts the keys in `range`, stopping at `cap`.
    func countEntries(in range: KeyRange, reader: any StorageReader, cap: Int?) throws(BuriError) -> Int {
        try run {
            let cursor = try reader.cursor(in: range)
            var count = 0
            while try cursor.next() {
                count += 1
                if let cap, count >= cap { break }
            }
            return count
        }
    }

    /// The decoded index values of a header, by index name (as bytes: see ``IndexName``).
    func indexValues(of header: RecordHeader) -> [IndexName: [[IndexValue]]] {
        var result: [IndexName: [[IndexValue]]] = [:]
        for entry in header.entries {
            let name = madeDescriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
            result[IndexName(name), default: []].append(IndexTuple.split(entry.tuple))
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
        try makeCursor(query, strategy: .automatic)
    }

    func makeCursor(_ query: Query, strategy: QueryPlan.Strategy) throws(BuriError) -> RawQueryCursor {
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

    /// One page of at most `size` records matching `query`, and a token for the next page.
    public func recordPage(_ query: Query, size: Int) throws(BuriError) -> Page<StoredRecord> {
        try page(query, size: size) { cursor throws(BuriError) in try cursor.nextRecord() }
    }

    /// One page of what `next` reads from a cursor over `query`: at most `size` items, and a token
    /// when the walk has more (checked by moving past one more result).
    func page<Element>(_ query: Query, size: Int, strategy: QueryPlan.Strategy = .automatic,
                       _ next: (RawQueryCursor) throws(BuriError) -> Element?) throws(BuriError) -> Page<Element> {
        guard size > 0 else {
            throw .invalidQuery(bucket: name, index: nil, reason: "a page holds at least 1 result; the size given is \(size)")
        }
        let cursor = try makeCursor(query, strategy: strategy)
        var items: [Element] = []
        items.reserveCapacity(Swift.min(size, 1024))
        while items.count < size, let item = try next(cursor) { items.append(item) }
        guard items.count == size, let token = cursor.continuation else { return Page(items: items, next: nil) }
        return Page(items: items, next: try cursor.skipToNext() ? token : nil)
    }
}

/// A stored object as raw data: its key, schema version, index values and CBOR payload.
public struct StoredRecord: Sendable, Hashable {
    public var key: String
    public var schemaVersion: UInt64
    /// The object's index values as stored, by index name (one tuple per entry). Names are
    /// compared as bytes (see ``IndexName``): `record.indexValues["age"]`.
    public var indexValues: [IndexName: [[IndexValue]]]
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
