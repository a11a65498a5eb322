import BuriStorage

// The write path: records and their index entries put in one atomic batch, each object's old entries
// replaced by its new ones, unique indexes checked first.
/// The values stored under a write's index entries, in entry order, in one buffer: a text index
/// gives every term's entry a value (its positions), and one buffer for all of an object's values
/// spares an array for each. Entries past the last appended value have empty values.
///
/// ```swift
/// var values = EntryValues()
/// values.appendEmpty(upTo: 2)            // entries 0 and 1 carry none
/// values.append { $0 += [0x05, 0x01] }   // entry 2's value
/// ```
struct EntryValues {
    private var bytes: [UInt8] = []
    /// Where each entry's value ends in `bytes`.
    private var ends: [Int] = []

    /// Whether no entry has a value appended (all are empty).
    var isEmpty: Bool { ends.isEmpty }

    /// The number of entries whose values have been appended (empty ones included).
    var count: Int { ends.count }

    mutating func reserve(bytes extra: Int, entries: Int) {
        bytes.reserveCapacity(bytes.count + extra)
        ends.reserveCapacity(ends.count + entries)
    }

    /// Gives every entry before `count` that has none an empty value.
    mutating func appendEmpty(upTo count: Int) {
        while ends.count < count { ends.append(bytes.count) }
    }

    /// Appends the next entry's value, written by `write` at the end of the buffer.
    @inline(__always)
    mutating func append(_ write: (inout [UInt8]) -> Void) {
        write(&bytes)
        ends.append(bytes.count)
    }

    /// Calls `body` with the value of entry `position` (empty when it has none).
    @inline(__always)
    func withValue<R>(at position: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard position < ends.count else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let start = position == 0 ? 0 : ends[position - 1]
        let end = ends[position]
        return bytes.withUnsafeBytes { raw in body(UnsafeRawBufferPointer(rebasing: raw[start..<end])) }
    }
}

extension RawBucket {
    /// One object to write: its key, its header (index entries) and its payload. The record value
    /// stored is the header followed by the payload (``appendValue(to:)``), serialized as the batch
    /// is written: a header that gains text stamps on the way (``stampForSegments(_:namesAKeyTwice:)``) is then
    /// written once, not spliced into a copy.
    struct RecordWrite {
        var key: String
        var header: RecordHeader
        /// The encoded object (CBOR), stored after the header.
        var payload: [UInt8]
        /// The value stored under each entry's key, in the order of `header.entries` (none: no
        /// entry has one), for indexes whose entries carry one (a text index's positions,
        /// `docs/FORMAT.md` §5b); other entries have empty values. An entry with a value is written
        /// even when the old record lists it too, as its value may have changed.
        var entryValues = EntryValues()

        /// The value to store under the key of `header.entries[position]`, as an array.
        func value(at position: Int) -> [UInt8] {
            entryValues.withValue(at: position) { Array($0) }
        }

        /// Appends the record value (the header, then the payload) to `out`.
        func appendValue(to out: inout ByteWriter) {
            header.write(to: &out)
            out.append(payload)
        }

        /// The record value as stored: the header, then the payload.
        var value: [UInt8] {
            var out = ByteWriter(capacity: payload.count + 16 + header.entries.count * 8)
            appendValue(to: &out)
            return out.array
        }
    }

    /// Writes records and their index entries in one atomic batch, replacing each object's previous
    /// entries with its new ones. Checks unique indexes first; on any error nothing is written.
    func write(_ writes: consuming [RecordWrite], sync: Bool? = nil) throws(BuriError) {
        // Keys are compared as UTF-8 bytes throughout, never as Swift Strings: String equality is
        // canonical equivalence, so "é" and "e\u{301}" would be one key to a String but are two on disk.
        /// Each write's key as UTF-8 bytes, made once for the batch (not needed without indexes).
        let batchKeys = madeDescriptor.indexes.isEmpty ? [] : writes.map { Array($0.key.utf8) }
        /// For each write, the position of the write of the same key before it in the batch (-1:
        /// none), and each key's last position: one hash of each key for the whole batch.
        var previousWrite = [Int](repeating: -1, count: batchKeys.count)
        var lastWrite = [ObjectKeyBytes: Int](minimumCapacity: batchKeys.count)
        for (position, key) in batchKeys.enumerated() {
            previousWrite[position] = lastWrite.updateValue(position, forKey: ObjectKeyBytes(key)) ?? -1
        }
        stampForSegments(&writes, namesAKeyTwice: lastWrite.count < batchKeys.count)
        /// Tombstones the batch writes, and whether it writes segments: for the merge schedule.
        var tombstones = 0
        var segmented = false
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
            /// Unique values claimed by objects earlier in this batch.
            var claims: [RecordHeader.Entry: [UInt8]] = [:]
            let uniqueIds = Set(madeDescriptor.indexes.filter(\.isUnique).map(\.id))
            // A bucket with no record at the writer's view has no old header to read for any key:
            // the only earlier versions are those in this batch (`previousWrite`). One seek instead of a
            // point read per object; through a shared engine's recording reader the scanned range
            // becomes a commit condition, so a record another client adds meanwhile is a conflict.
            let bucketIsEmpty = writes.count > 1 ? try hasNoRecords(writer.reader) : false
            let reader = bucketIsEmpty ? writer.reader : try readerForKeys(writes.map(\.key), writer.reader)
            // A large batch over a bucket with records reads its old headers by one walk in key order
            // (see `walkOldHeaders`), where the engine is local and only this process writes to it.
            let walking =
                !bucketIsEmpty && writes.count >= Self.walkThreshold && !reader.prefersBatchedReads
                && !database.engine.isShared
            let walked = walking ? try walkOldHeaders(batchKeys, reader: reader) : nil
            /// Objects new to the bucket (not stored, and not earlier in this batch): the count's change
            /// (if a later object fails, a transaction's statement savepoint takes it back with the puts).
            var added = 0
            defer { writer.adjustCount(of: bucketId, bucket: name, by: added) }
            /// Text indexes keeping token totals, the change of each, and the document lengths of
            /// objects written earlier in this batch (their stored entries are not theirs any more).
            let lengthIds = lengthKeepingIndexIds
            var tokenDeltas = [Int](repeating: 0, count: lengthIds.count)
            var lengths = [Int](repeating: 0, count: lengthIds.isEmpty ? 0 : writes.count * lengthIds.count)
            defer {
                for (index, delta) in zip(lengthIds, tokenDeltas) {
                    writer.adjustTextTotal(of: bucketId, index: index, bucket: name, by: delta)
                }
            }
            /// Relationships of the bucket, and the references this batch adds (checked after the loop).
            /// A staged import (`buri import`, `buri restore`) loads buckets one after another and
            /// publishes them at once, so its targets may come later: `check` reports what dangles.
            let relationships = stagingMarker == nil ? madeDescriptor.indexes.filter { $0.references != nil } : []
            var newReferences: [(key: String, index: IndexDefinition, tuple: [UInt8])] = []
            var keyBuffer: [UInt8] = []
            var valueBuffer = ByteWriter()
            /// The postings this batch puts in segments.
            var segments = SegmentCollector()
            for (position, write) in writes.enumerated() {
                let writePosition = position
                let keyBytes = batchKeys[position]
                let old: RecordHeader?
                /// Not stored and not earlier in this batch (a stored record, even a damaged one, has a header here).
                let isNew: Bool
                let earlier: Int? = previousWrite[position] >= 0 ? previousWrite[position] : nil
                if let earlier {
                    old = writes[earlier].header
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
                for (slot, index) in lengthIds.enumerated() {
                    let length = Self.documentLength(of: write, index: index)
                    lengths[position * lengthIds.count + slot] = length
                    let before: Int
                    if let earlier {
                        before = lengths[earlier * lengthIds.count + slot]
                    } else if let old {
                        before = try storedDocumentLength(old, index: index, key: write.key, reader: reader)
                    } else {
                        before = 0
                    }
                    tokenDeltas[slot] += length - before
                }
                let oldEntries = old?.entries ?? []
                let newEntries = write.header.entries
                /// Text indexes whose postings of this object are, or go, in segments: their old
                /// postings are all removed (tombstoned where in segments) and the new ones all
                /// written, none kept in place.
                let oldStamps = old?.textStamps ?? []
                let newStamps = write.header.textStamps
                let anyGrouped = !oldStamps.isEmpty || !newStamps.isEmpty
                func isGrouped(_ index: UInt32) -> Bool {
                    anyGrouped
                        && (oldStamps.contains { $0.index == index } || newStamps.contains { $0.index == index })
                }
                // Which entries stay: looked up in sets when both lists are long (a long text's
                // terms), so that replacing an object is not quadratic in its entries.
                let sets = oldEntries.count > 16 && newEntries.count > 16
                let oldSet = sets ? Set(oldEntries) : []
                let newSet = sets ? Set(newEntries) : []
                func isKept(
                    _ entry: RecordHeader.Entry, in entries: [RecordHeader.Entry], _ set: Set<RecordHeader.Entry>
                )
                    -> Bool
                {
                    !isGrouped(entry.index) && (sets ? set.contains(entry) : entries.contains(entry))
                }
                for entry in oldEntries where !isKept(entry, in: newEntries, newSet) {
                    if claims[entry] == keyBytes { claims[entry] = nil }
                }
                if let old {
                    tombstones += removeEntries(of: old, objectKey: keyBytes, key: write.key, batch: batch) { entry in
                        isKept(entry, in: newEntries, newSet)
                    }
                }
                /// Puts an entry of this object, its key built in one buffer for the whole batch.
                func put(_ entry: RecordHeader.Entry, _ value: UnsafeRawBufferPointer) {
                    Keyspace.writeIndexEntryKey(
                        bucket: bucketId, index: entry.index, tuple: entry.tuple, objectKey: keyBytes, into: &keyBuffer)
                    keyBuffer.withUnsafeBytes { batch.put($0, value) }
                }
                for (position, entry) in newEntries.enumerated() {
                    if anyGrouped, let stamp = write.header.textStamp(of: entry.index) {
                        segments.add(
                            index: entry.index, stamp: stamp.stamp, tuple: entry.tuple, position: writePosition,
                            objectKey: keyBytes, entry: position)
                        continue
                    }
                    guard !isKept(entry, in: oldEntries, oldSet) else {
                        // Kept: rewritten only if it carries a value, which may have changed.
                        write.entryValues.withValue(at: position) { value in
                            if !value.isEmpty { put(entry, value) }
                        }
                        continue
                    }
                    if !relationships.isEmpty, let index = relationships.first(where: { $0.id == entry.index }) {
                        newReferences.append((write.key, index, entry.tuple))
                    }
                    if uniqueIds.contains(entry.index) {
                        try checkUnique(entry, for: keyBytes, claims: claims, reader: reader) { holder in
                            // The holder's last write before this one, if the batch has one.
                            guard var at = lastWrite[holder] else { return nil }
                            while at >= writePosition {
                                at = previousWrite[at]
                                if at < 0 { return nil }
                            }
                            return writes[at].header
                        }
                        claims[entry] = keyBytes
                    }
                    write.entryValues.withValue(at: position) { put(entry, $0) }
                }
                Keyspace.writeRecordKey(bucket: bucketId, key: write.key, into: &keyBuffer)
                putRecord(write, key: keyBuffer, into: batch, valueBuffer: &valueBuffer)
                if isNew { added += 1 }
            }
            if !segments.isEmpty {
                segmented = true
                do {
                    try segments.flush(bucket: bucketId, writes: writes, into: batch)
                } catch {
                    throw .corruption(bucket: name, key: nil, index: nil, reason: "text segment: \(error)")
                }
            }
            if !newReferences.isEmpty {
                try checkTargets(newReferences, writtenHere: lastWrite, writer: writer)
            }
        }
        noteSegmentWork(segmentedCommits: segmented ? 1 : 0, tombstones: tombstones)
    }

    /// Puts `write`'s record (its header, then its payload) under record key `key`, the value
    /// built in a buffer the batch's writes share.
    @inline(__always)
    private func putRecord(
        _ write: RecordWrite, key: [UInt8], into batch: any StorageBatch, valueBuffer: inout ByteWriter
    ) {
        valueBuffer.removeAll()
        write.appendValue(to: &valueBuffer)
        key.withUnsafeBytes { key in valueBuffer.withBytes { batch.put(key, $0) } }
    }

    /// Refuses references to objects that do not exist (``BuriError/danglingReference(bucket:key:index:targetBucket:target:)``):
    /// each target is read through the writer's reader (so it is a condition of the commit on a
    /// shared engine, and a transaction sees its own writes); an object of this bucket written
    /// earlier in the same batch counts as there.
    private func checkTargets(
        _ references: [(key: String, index: IndexDefinition, tuple: [UInt8])],
        writtenHere: [ObjectKeyBytes: Int], writer: Writer
    ) throws(BuriError) {
        var targetIds: [String: UInt32?] = [:]
        var recordKeys: [[UInt8]] = []
        var checks:
            [(reference: (key: String, index: IndexDefinition, tuple: [UInt8]), target: [UInt8], record: [UInt8]?)] = []
        for reference in references {
            let targetName = reference.index.references ?? ""
            let target = BuriDatabase.referencedKey(reference.tuple)
            if targetName.hasSameBytes(as: name), writtenHere[ObjectKeyBytes(target)] != nil {
                continue
            }
            let id: UInt32?
            if let known = targetIds[targetName] {
                id = known
            } else {
                id =
                    targetName.hasSameBytes(as: name)
                    ? bucketId : try database.bucketInfo(named: targetName, reader: writer.reader)?.id
                targetIds[targetName] = id
            }
            let record = id.map { Keyspace.recordKey(bucket: $0, key: String(decoding: target, as: UTF8.self)) }
            if let record { recordKeys.append(record) }
            checks.append((reference, target, record))
        }
        guard !checks.isEmpty else { return }
        let reader: any StorageReader =
            writer.reader.prefersBatchedReads && recordKeys.count > 1
            ? try run { try PrefetchingReader(writer.reader, keys: recordKeys) } : writer.reader
        for check in checks {
            let exists = try check.record.map { record throws(BuriError) in try run { try reader.get(record) != nil } }
            if exists != true {
                throw .danglingReference(
                    bucket: name, key: check.reference.key, index: check.reference.index.name,
                    targetBucket: check.reference.index.references ?? "",
                    target: String(decoding: check.target, as: UTF8.self))
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
        var valueBuffer = ByteWriter()
        if try hasNoRecords(writer.reader) {
            for write in writes {
                let key = recordKey(write.key)
                if seen.insert(ObjectKeyBytes(key)).inserted { added += 1 }
                putRecord(write, key: key, into: batch, valueBuffer: &valueBuffer)
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
            putRecord(write, key: key, into: batch, valueBuffer: &valueBuffer)
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
        /// per object, not the payloads, except where a header derives entries from its payload).
        var bytes: [UInt8]

        func header(
            at position: Int, key: String, bucket: RawBucket, reader: any StorageReader
        ) throws(BuriError) -> RecordHeader? {
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
            for (offset, byte) in keys[index].prefix(8).enumerated() {
                head |= UInt64(byte) << (56 - 8 * UInt64(offset))
            }
            return (head, index)
        }
        order.sort { a, b in a.head != b.head ? a.head < b.head : compareBytes(keys[a.index], keys[b.index]) < 0 }
        var slots = [WalkedHeaders.Slot](repeating: .absent, count: keys.count)
        var bytes: [UInt8] = []
        let recordPrefix = recordPrefix
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
                try cursor.withValue { value in
                    if let length = try? RecordHeader.payloadOffset(value) {
                        // A header that derives entries from the payload needs the payload too.
                        let kept = value[0] != RecordHeader.layoutVersion ? value.count : length
                        slots[position] = .stored(start: bytes.count, length: kept)
                        bytes.append(contentsOf: value[..<kept])
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

    private func checkUnique(
        _ entry: RecordHeader.Entry, for key: [UInt8], claims: [RecordHeader.Entry: [UInt8]],
        reader: any StorageReader, pending: (ObjectKeyBytes) -> RecordHeader?
    ) throws(BuriError) {
        let indexName = madeDescriptor.indexes.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
        func violation(_ holder: [UInt8]) -> BuriError {
            let shown = IndexTuple.describe(entry.tuple)
            return .uniqueViolation(
                bucket: name, index: indexName, value: shown, holder: String(decoding: holder, as: UTF8.self))
        }
        if let holder = claims[entry], holder != key { throw violation(holder) }
        let prefix = Keyspace.indexPrefix(bucket: bucketId, index: entry.index) + entry.tuple
        try run {
            let cursor = try reader.cursor(in: .prefix(prefix))
            while try cursor.next() {
                let holder = cursor.withKey { raw in Array(raw[prefix.count...]) }
                if holder == key { continue }
                // Released earlier in this batch?
                if let after = pending(ObjectKeyBytes(holder)), !after.entries.contains(entry) { continue }
                throw violation(holder)
            }
        }
    }
}
