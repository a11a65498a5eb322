import LevelDB

/// Streams the results of one query from one LevelDB snapshot, in bounded memory.
///
/// ```swift
/// let cursor = try raw.makeCursor(.index("age", in: 22...24))
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
    let snapshot: Snapshot
    private let cursor: Cursor
    /// Walks the bucket's records alongside an index scan (made on first use).
    private var records: Cursor?
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
    /// Object keys already returned, when the driving index is multi-valued: an object with several
    /// values in a range has several entries there but is one result. Grows with the results.
    private var seenObjects: Set<[UInt8]>?

    init(bucket: RawBucket, plan: QueryPlan, snapshot: Snapshot) throws(BuriError) {
        self.bucket = bucket
        self.plan = plan
        self.snapshot = snapshot
        recordKey = bucket.recordPrefix
        if plan.driver?.index.multiValued == true { seenObjects = [] }
        cursor = try bucket.run {
            try bucket.storage.cursor(in: plan.range, reverse: plan.descending, options: ReadOptions(snapshot: snapshot))
        }
    }

    /// A token that resumes the query right after the last result returned.
    public var continuation: ContinuationToken? { hasReturned ? ContinuationToken(key: lastStorageKey) : nil }

    /// Copies the storage key under the cursor into `candidateKey` and finds the object key in it,
    /// checking that it is UTF-8 (without building a String).
    private func readCandidateKey() throws(BuriError) {
        cursor.withKey { raw in
            candidateKey.removeAll(keepingCapacity: true)
            candidateKey.append(contentsOf: raw)
        }
        // (A plain closure returning the problem: typed throws through `withUnsafeBytes` here
        // crashed the 6.3 optimizer.)
        let arity = plan.driver?.index.components.count
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
            throw .corruption(bucket: bucket.name, key: nil, index: plan.driver?.index.name, reason: "storage key: \(problem)")
        }
    }

    /// The object key of `storageKey` (already checked to be UTF-8).
    private func objectKey(in storageKey: [UInt8]) -> String {
        storageKey.withUnsafeBufferPointer { String(decoding: $0[objectKeyRange], as: UTF8.self) }
    }

    /// The key of the result last returned (built on demand: reading objects does not need it).
    var currentKey: String { objectKey(in: lastStorageKey) }

    /// Points `record` at the stored value of the candidate's object; `false` if there is none.
    private func locateRecord() throws(BuriError) -> Bool {
        guard plan.driver != nil else {
            // Scanning records: the value is right under the cursor.
            record = cursor.withValue { $0 }
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
            let records = try self.records ?? bucket.storage.cursor(in: .prefix(bucket.recordPrefix), options: ReadOptions(snapshot: snapshot))
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
        let needsRecord = readRecord || !plan.residual.isEmpty
        while try bucket.run({ try cursor.next() }) {
            try readCandidateKey()
            if seenObjects != nil, seenObjects?.insert(Array(candidateKey[objectKeyRange])).inserted == false { continue }
            if needsRecord {
                guard try locateRecord() else {
                    // Only a key scan with residual conditions tolerates a missing record (it skips it).
                    if readRecord {
                        throw BuriError.corruption(bucket: bucket.name, key: objectKey(in: candidateKey), index: plan.driver?.index.name,
                                                   reason: "an index entry points to an object that does not exist")
                    }
                    continue
                }
                if plan.residual.isEmpty {
                    do {
                        payloadOffset = try RecordHeader.payloadOffset(record)
                    } catch {
                        throw corruptRecord(objectKey(in: candidateKey), error)
                    }
                } else {
                    let key = objectKey(in: candidateKey)
                    let header: RecordHeader
                    do {
                        (header, payloadOffset) = try RecordHeader.parse(record)
                    } catch {
                        throw corruptRecord(key, error)
                    }
                    guard plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, bucket: bucket.descriptor.id, objectKey: key) }) else { continue }
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

    /// The next matching object as a ``StoredRecord``.
    public func nextRecord() throws(BuriError) -> StoredRecord? {
        try nextRecord { key, header, payload in
            StoredRecord(key: key, schemaVersion: header.schemaVersion, indexValues: bucket.indexValues(of: header), payload: Array(payload))
        }
    }
}
