import BuriStorage

/// Streams the results of one query from one snapshot, in bounded memory.
///
/// ```swift
/// let cursor = try raw.cursor(.index("age", in: 22...24))
/// while let key = try cursor.nextKey() { print(key) }
/// ```
///
/// An index-driven query reads each match's record through a second cursor over the bucket's
/// records, at the same snapshot: index entries of one value come in object-key order, so the
/// record is often the one right after the previous match and one step forward finds it; otherwise
/// the cursor seeks. Either way no value is copied out of LevelDB and no per-read options are made.
public final class RawQueryCursor {
    let bucket: RawBucket
    let plan: QueryPlan
    let reader: any StorageReader
    /// Walks `plan.range`; `nil` for a plan that collects its candidates (see ``QueryPlan``).
    private let cursor: (any StorageCursor)?
    /// A collecting plan's candidates: positions in the ordering index, in walk order, each one
    /// an object that already passed every condition.
    private var collected: [[UInt8]] = []
    private var nextCollected = 0
    /// Whether each walked candidate's header must be read: to check further conditions, or, on a
    /// multi-valued ordering index, that the entry is the object's first in range.
    private let checksHeaders: Bool
    /// Walks the bucket's records alongside an index scan (made on first use).
    private var records: (any StorageCursor)?
    /// Scratch space for the record key being looked up.
    private var recordKey: [UInt8]
    private var skipped = 0
    private var returned = 0
    /// The storage key of the last result returned, for continuation tokens.
    private var lastStorageKey: [UInt8] = []
    private var hasReturned = false
    /// The storage key of the candidate being looked at (swapped into `lastStorageKey` when it is
    /// returned: two reused buffers, no allocation per result).
    private var candidateKey: [UInt8] = []
    /// Where the object key lies in `lastStorageKey` (and in `candidateKey` while looking).
    private var objectKeyRange = 0..<0
    /// The stored value (header and payload) of the current result, lent by one of the cursors:
    /// valid until either moves. Set by `advance(readRecord: true)`.
    private var record = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Where the payload starts in `record`.
    private var payloadOffset = 0
    /// On an engine where each read is a round trip (``StorageReader/prefersBatchedReads``), an
    /// index walk that needs records reads ahead: up to ``readAhead`` index entries, then all their
    /// records in one request, instead of one seek per object.
    private let batched: Bool
    static let readAhead = 64
    private var aheadKeys: [[UInt8]] = []
    private var aheadValues: [[UInt8]?] = []
    private var aheadNext = 0
    /// The record of the candidate, when read ahead.
    private var aheadRecord: [UInt8]?
    /// Whether the candidate came from a read-ahead (its record is `aheadRecord`).
    private var candidateReadAhead = false
    /// A copy of the current record when it came from a read-ahead, so `record` stays valid until
    /// the cursor moves.
    private var held = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    deinit { held.deallocate() }

    init(bucket: RawBucket, plan: QueryPlan, reader: any StorageReader) throws(BuriError) {
        self.bucket = bucket
        self.plan = plan
        self.reader = reader
        recordKey = bucket.recordPrefix
        checksHeaders = plan.collectFrom == nil && (!plan.residual.isEmpty || plan.orderIsMultiValued)
        batched = reader.prefersBatchedReads && plan.order != nil
        if let source = plan.collectFrom {
            cursor = nil
            collected = try Self.collect(from: source, bucket: bucket, plan: plan, reader: reader)
        } else {
            cursor = try bucket.run {
                try reader.cursor(in: plan.range, reverse: plan.descending)
            }
        }
    }

    /// The candidates of a collecting plan: every object with an entry in `source`'s range that
    /// satisfies all conditions, as its position in the ordering index (its first entry there in
    /// walk order, as a walk would meet it), after the continuation, sorted in walk order.
    /// `source` has at most ``QueryPlan/collectLimit`` entries, so memory stays bounded.
    private static func collect(
        from source: ConditionPlan, bucket: RawBucket, plan: QueryPlan, reader: any StorageReader
    ) throws(BuriError) -> [[UInt8]] {
        guard let order = plan.order else { return [] }
        let arity = source.index.components.count
        var positions: [[UInt8]] = []
        var seen = Set<ObjectKeyBytes>()
        var recordKey = bucket.recordPrefix
        try bucket.run {
            let entries = try reader.cursor(in: source.range)
            while try entries.next() {
                let objectKey = try entries.withKey { raw throws(BuriError) -> [UInt8] in
                    let parts: (tuple: Range<Int>, objectKey: Range<Int>)
                    do {
                        parts = try Keyspace.splitIndexEntry(raw, arity: arity)
                    } catch {
                        throw .corruption(
                            bucket: bucket.name, key: nil, index: source.index.name, reason: "storage key: \(error)")
                    }
                    guard Keyspace.isValidUTF8(raw[parts.objectKey]) else {
                        throw .corruption(
                            bucket: bucket.name, key: nil, index: source.index.name,
                            reason: "storage key: object key is not valid UTF-8")
                    }
                    return Array(raw[parts.objectKey])
                }
                guard seen.insert(ObjectKeyBytes(objectKey)).inserted else { continue }
                recordKey.removeSubrange(Keyspace.recordPrefixLength...)
                recordKey.append(contentsOf: objectKey)
                let header = try reader.withValue(forKey: recordKey) { value throws(BuriError) -> RecordHeader? in
                    guard let value else { return nil }
                    do {
                        return try RecordHeader.parse(value).0
                    } catch {
                        throw .corruption(
                            bucket: bucket.name, key: String(decoding: objectKey, as: UTF8.self), index: nil,
                            reason: "record header: \(error)")
                    }
                }
                // An entry without its object matches nothing (as in a walk that checks conditions).
                guard let header else { continue }
                let key = objectKey[...]
                guard let position = order.position(of: header.entries, objectKey: key, descending: plan.descending),
                    plan.range.contains(position),
                    plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, objectKey: key) })
                else { continue }
                positions.append(position)
            }
        }
        if plan.descending {
            positions.sort { $1.lexicographicallyPrecedes($0) }
        } else {
            positions.sort { $0.lexicographicallyPrecedes($1) }
        }
        return positions
    }

    /// A token that resumes the query right after the last result returned.
    public var continuation: ContinuationToken? {
        guard hasReturned else { return nil }
        return ContinuationToken(
            bucket: bucket.descriptor.lineageId, order: plan.order?.index.id ?? 0, fingerprint: plan.fingerprint,
            returned: plan.returnedBefore + UInt64(returned), position: lastStorageKey)
    }

    /// Puts the next candidate's storage key into `candidateKey`; `false` at the end. With
    /// `needsRecord` on a batched reader, its record comes along in `aheadRecord`.
    private func nextCandidate(needsRecord: Bool) throws(BuriError) -> Bool {
        // Candidates already read ahead are served first, whatever this call needs.
        if batched, aheadNext < aheadKeys.count || needsRecord {
            if aheadNext == aheadKeys.count {
                guard try readAhead() else { return false }
            }
            candidateKey = aheadKeys[aheadNext]
            aheadRecord = aheadValues[aheadNext]
            aheadNext += 1
            candidateReadAhead = true
            return true
        }
        candidateReadAhead = false
        if let cursor {
            guard try bucket.run({ try cursor.next() }) else { return false }
            cursor.withKey { raw in
                candidateKey.removeAll(keepingCapacity: true)
                candidateKey.append(contentsOf: raw)
            }
            return true
        }
        guard nextCollected < collected.count else { return false }
        candidateKey = collected[nextCollected]
        collected[nextCollected] = []
        nextCollected += 1
        return true
    }

    /// Reads the next candidates (index entries) and their records, in one request for the records.
    private func readAhead() throws(BuriError) -> Bool {
        aheadKeys.removeAll(keepingCapacity: true)
        aheadNext = 0
        if let cursor {
            while aheadKeys.count < Self.readAhead, try bucket.run({ try cursor.next() }) {
                aheadKeys.append(cursor.key)
            }
        } else {
            while aheadKeys.count < Self.readAhead, nextCollected < collected.count {
                aheadKeys.append(collected[nextCollected])
                collected[nextCollected] = []
                nextCollected += 1
            }
        }
        guard !aheadKeys.isEmpty, let arity = plan.order?.index.components.count else { return false }
        // An entry that does not parse gets no record here; readCandidateKey reports it in turn.
        let recordKeys = aheadKeys.map { key -> [UInt8] in
            key.withUnsafeBytes { raw in
                guard let parts = try? Keyspace.splitIndexEntry(raw, arity: arity) else { return [] }
                return bucket.recordPrefix + raw[parts.objectKey]
            }
        }
        aheadValues = try bucket.run { try reader.values(forKeys: recordKeys) }
        return true
    }

    /// Finds the object key in `candidateKey`, checking that it is UTF-8 (without building a String).
    private func readCandidateKey() throws(BuriError) {
        // (A plain closure returning the problem: typed throws through `withUnsafeBytes` here
        // crashed the 6.3 optimizer.)
        let arity = plan.order?.index.components.count
        let problem: String? = candidateKey.withUnsafeBytes { raw -> String? in
            if let arity {
                do {
                    objectKeyRange = try Keyspace.splitIndexEntry(raw, arity: arity).objectKey
                } catch {
                    return "\(error)"
                }
            } else {
                guard raw.count > Keyspace.recordPrefixLength, raw[0] == Keyspace.recordTag else {
                    return "record key of \(raw.count) bytes is not a record key"
                }
                objectKeyRange = Keyspace.recordPrefixLength..<raw.count
            }
            return Keyspace.isValidUTF8(raw[objectKeyRange]) ? nil : "object key is not valid UTF-8"
        }
        if let problem {
            throw .corruption(
                bucket: bucket.name, key: nil, index: plan.order?.index.name, reason: "storage key: \(problem)")
        }
    }

    /// The object key of `storageKey` (already checked to be UTF-8).
    private func objectKey(in storageKey: [UInt8]) -> String {
        storageKey.withUnsafeBufferPointer { String(decoding: $0[objectKeyRange], as: UTF8.self) }
    }

    /// The key of the result last returned (built on demand: reading objects does not need it).
    var currentKey: String { objectKey(in: lastStorageKey) }

    /// Appends the bytes of ``currentKey`` to `bytes` (no `String` built).
    func appendCurrentObjectKey(to bytes: inout [UInt8]) {
        bytes.append(contentsOf: lastStorageKey[objectKeyRange])
    }

    /// Points `record` at the stored value of the candidate's object; `false` if there is none.
    private func locateRecord() throws(BuriError) -> Bool {
        if plan.order == nil, let cursor {
            // Scanning records: the value is right under the cursor.
            record = cursor.withValue { $0 }
            return true
        }
        if candidateReadAhead {
            guard let value = aheadRecord else { return false }
            held.deallocate()
            held = UnsafeMutableRawBufferPointer.allocate(byteCount: max(value.count, 1), alignment: 1)
            value.withUnsafeBytes { source in
                if let base = source.baseAddress { held.baseAddress?.copyMemory(from: base, byteCount: source.count) }
            }
            record = UnsafeRawBufferPointer(start: held.baseAddress, count: value.count)
            return true
        }
        recordKey.removeSubrange(Keyspace.recordPrefixLength...)
        recordKey.append(contentsOf: candidateKey[objectKeyRange])
        return try bucket.run { () throws -> Bool in
            // A step forward finds the record when the index walks in key order (one value of it).
            if let records, records.isOnEntry {
                var steps = 0
                while true {
                    let order = records.withKey { compare($0, recordKey) }
                    if order == 0 {
                        record = records.withValue { $0 }
                        return true
                    }
                    if order > 0 || steps == 1 { break }
                    guard try records.next() else {
                        self.records = nil
                        break
                    }
                    steps += 1
                }
            }
            let records = try self.records ?? reader.cursor(in: .prefix(bucket.recordPrefix))
            self.records = records
            records.seek(recordKey)
            guard try records.next() else {
                self.records = nil
                return false
            }
            guard records.withKey({ compare($0, recordKey) }) == 0 else { return false }
            record = records.withValue { $0 }
            return true
        }
    }

    /// Bytewise order of two keys (LevelDB's default comparator), as -1, 0 or 1.
    private func compare(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
        b.withUnsafeBufferPointer { b in
            let common = Swift.min(a.count, b.count)
            for i in 0..<common where a[i] != b[i] {
                return a[i] < b[i] ? -1 : 1
            }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }
    }

    private func corruptRecord(_ key: String, _ error: any Error) -> BuriError {
        .corruption(bucket: bucket.name, key: key, index: nil, reason: "record header: \(error)")
    }

    /// Moves to the next result that passes every condition, respecting offset and limit; `false`
    /// at the end. With `readRecord`, `record` and `payloadOffset` describe its stored value.
    private func advance(readRecord: Bool) throws(BuriError) -> Bool {
        if let limit = plan.limit, returned >= limit { return false }
        while try nextCandidate(needsRecord: readRecord || checksHeaders) {
            try readCandidateKey()
            // An `anyOf` ordering condition walks from its first value to its last: an entry
            // between two of its values is skipped, and an ascending walk seeks to the next value.
            if let order = plan.order, order.alternatives != nil, !order.matches(candidateKey) {
                if !plan.descending, !candidateReadAhead, let cursor {
                    guard let next = order.nextAlternativeStart(after: candidateKey) else { return false }
                    cursor.seek(next)
                }
                continue
            }
            if readRecord || checksHeaders {
                guard try locateRecord() else {
                    // A key walk that checks further conditions finds that a missing object
                    // matches nothing; anything else needs the object.
                    if readRecord || plan.orderIsMultiValued {
                        throw BuriError.corruption(
                            bucket: bucket.name, key: objectKey(in: candidateKey), index: plan.order?.index.name,
                            reason: "an index entry points to an object that does not exist")
                    }
                    continue
                }
                if checksHeaders {
                    let header: RecordHeader
                    do {
                        (header, payloadOffset) = try RecordHeader.parse(record)
                    } catch {
                        throw corruptRecord(objectKey(in: candidateKey), error)
                    }
                    let key = candidateKey[objectKeyRange]
                    // On a multi-valued index an object is one result, at its first entry in range.
                    if plan.orderIsMultiValued, let order = plan.order {
                        guard
                            let first = order.position(of: header.entries, objectKey: key, descending: plan.descending),
                            first == candidateKey
                        else { continue }
                    }
                    guard plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, objectKey: key) }) else {
                        continue
                    }
                } else {
                    do {
                        payloadOffset = try RecordHeader.payloadOffset(record)
                    } catch {
                        throw corruptRecord(objectKey(in: candidateKey), error)
                    }
                }
            }
            if skipped < plan.offset {
                skipped += 1
                continue
            }
            returned += 1
            swap(&candidateKey, &lastStorageKey)
            hasReturned = true
            return true
        }
        return false
    }

    /// Whether there is another result, moving past it: what a page asks after its last item.
    func skipToNext() throws(BuriError) -> Bool {
        try advance(readRecord: false)
    }

    /// The next matching key, or `nil` at the end.
    public func nextKey() throws(BuriError) -> String? {
        try advance(readRecord: false) ? currentKey : nil
    }

    /// Moves to the next matching object; `false` at the end. Its payload (CBOR bytes) is then
    /// ``currentPayload`` (valid until the cursor moves again) and its key ``currentKey``.
    func nextObject() throws(BuriError) -> Bool {
        try advance(readRecord: true)
    }

    /// The payload of the object ``nextObject()`` moved to. Valid until the cursor moves.
    var currentPayload: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: record[payloadOffset...]) }

    /// The next matching object, lent to `body` as its key, header and payload bytes.
    func nextRecord<R>(_ body: (String, RecordHeader, UnsafeRawBufferPointer) throws -> R) throws(BuriError) -> R? {
        guard try advance(readRecord: true) else { return nil }
        let key = currentKey
        let header: RecordHeader
        do {
            header = try RecordHeader.parse(record).0
        } catch {
            throw corruptRecord(key, error)
        }
        return try bucket.run { try body(key, header, currentPayload) }
    }

    /// The next matching object's whole stored value (header and payload), lent to `body`
    /// without copying or parsing it; ``currentKey`` names it.
    func nextStoredValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws(BuriError) -> R? {
        guard try advance(readRecord: true) else { return nil }
        return try bucket.run { try body(record) }
    }

    /// The next matching object as a ``StoredRecord``.
    public func nextRecord() throws(BuriError) -> StoredRecord? {
        try nextRecord { key, header, payload in
            StoredRecord(
                key: key, schemaVersion: header.schemaVersion, indexValues: bucket.indexValues(of: header),
                payload: Array(payload))
        }
    }
}
