import LevelDB

/// Streams the results of one query from one LevelDB snapshot, in bounded memory.
///
/// ```swift
/// let cursor = try raw.makeCursor(.index("age", in: 22...24))
/// while let key = try cursor.nextKey() { print(key) }
/// ```
public final class RawQueryCursor {
    let bucket: RawBucket
    let plan: QueryPlan
    let snapshot: Snapshot
    private let cursor: Cursor
    private var skipped = 0
    private var returned = 0
    /// The storage key of the last result returned, for continuation tokens.
    private(set) var lastStorageKey: [UInt8]?

    init(bucket: RawBucket, plan: QueryPlan, snapshot: Snapshot) throws(BuriError) {
        self.bucket = bucket
        self.plan = plan
        self.snapshot = snapshot
        cursor = try bucket.database.run {
            try bucket.storage.cursor(in: plan.range, reverse: plan.descending, options: ReadOptions(snapshot: snapshot))
        }
    }

    /// A token that resumes the query right after the last result returned.
    public var continuation: ContinuationToken? { lastStorageKey.map { ContinuationToken(key: $0) } }

    private var arity: Int { plan.driver?.index.components.count ?? 0 }

    /// The object key the cursor is on.
    private func currentObjectKey() throws(BuriError) -> String {
        do {
            return try cursor.withKey { raw throws(FormatError) -> String in
                if let driver = plan.driver {
                    let parts = try Keyspace.splitIndexEntry(raw, arity: driver.index.components.count)
                    return try Keyspace.string(raw, parts.objectKey)
                }
                return try Keyspace.objectKey(fromRecordKey: raw)
            }
        } catch {
            throw .corruption(bucket: bucket.name, key: nil, index: plan.driver?.index.name, reason: "storage key: \(error)")
        }
    }

    /// Moves to the next candidate that passes every condition, respecting offset and limit.
    /// Calls `accept` with the candidate's key; `accept` returns `nil` to reject it.
    private func advance<R>(_ accept: (String) throws(BuriError) -> R?) throws(BuriError) -> R? {
        if let limit = plan.limit, returned >= limit { return nil }
        while try bucket.database.run({ try cursor.next() }) {
            let key = try currentObjectKey()
            guard let result = try accept(key) else { continue }
            if skipped < plan.offset {
                skipped += 1
                continue
            }
            returned += 1
            lastStorageKey = cursor.key
            return result
        }
        return nil
    }

    /// The next matching key, or `nil` at the end.
    public func nextKey() throws(BuriError) -> String? {
        if plan.residual.isEmpty { return try advance { key in key } }
        return try advance { key throws(BuriError) -> String? in
            let passes = try bucket.withRecord(forKey: key, snapshot: snapshot) { header, _ in
                plan.residual.allSatisfy { $0.isSatisfied(by: header.entries, bucket: bucket.descriptor.id, objectKey: key) }
            }
            return passes == true ? key : nil
        }
    }

    /// The next matching object, lent to `body` as its key, header and payload bytes.
    func nextRecord<R>(_ body: (String, RecordHeader, UnsafeRawBufferPointer) throws -> R) throws(BuriError) -> R? {
        try advance { key throws(BuriError) -> R? in
            if plan.driver == nil {
                // Scanning records: the value is right under the cursor.
                return try bucket.database.run {
                    try cursor.withValue { value throws -> R? in
                        let header: RecordHeader
                        let offset: Int
                        do {
                            (header, offset) = try RecordHeader.parse(value)
                        } catch {
                            throw BuriError.corruption(bucket: bucket.name, key: key, index: nil, reason: "record header: \(error)")
                        }
                        guard plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, bucket: bucket.descriptor.id, objectKey: key) }) else { return nil }
                        return try body(key, header, UnsafeRawBufferPointer(rebasing: value[offset...]))
                    }
                }
            }
            let result = try bucket.withRecord(forKey: key, snapshot: snapshot) { header, payload -> R? in
                guard plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, bucket: bucket.descriptor.id, objectKey: key) }) else { return nil }
                return try body(key, header, payload)
            }
            guard let result else {
                throw BuriError.corruption(bucket: bucket.name, key: key, index: plan.driver?.index.name,
                                           reason: "an index entry points to an object that does not exist")
            }
            return result
        }
    }

    /// The next matching object as a ``StoredRecord``.
    public func nextRecord() throws(BuriError) -> StoredRecord? {
        try nextRecord { key, header, payload in
            StoredRecord(key: key, schemaVersion: header.schemaVersion, indexValues: bucket.indexValues(of: header), payload: Array(payload))
        }
    }
}
