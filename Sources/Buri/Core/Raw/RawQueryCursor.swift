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
    /// Walks `plan.range` (then `plan.nullRange`); `nil` for a plan that collects its candidates
    /// (see ``QueryPlan``).
    private var cursor: (any StorageCursor)?
    /// Whether the walk has moved on to the objects without a value in the ordering index.
    private var inNulls = false
    /// Whether the candidate is the record `cursor` is on (a walk of records).
    private var candidateOnCursor = false
    /// Objects met in the ordering index by a walk from its start (to skip the phase of objects
    /// without a value when every object was met).
    private var objectsInOrder = 0
    /// The candidate's sort bytes for the sort keys after the first.
    private var sortBytes: [UInt8] = []
    /// The sort bytes of the result last returned.
    private var lastSortBytes: [UInt8] = []
    /// A group of candidates that tie on the ordering index, sorted by the further sort keys.
    private struct Member {
        var key: [UInt8]
        var objectKey: Range<Int>
        var sortBytes: [UInt8]
    }
    private var group: [Member] = []
    private var groupNext = 0
    /// The first candidate of the next group, met while filling the current one.
    private var pending: Member?
    private var walkOver = false
    /// A collecting plan's candidates: positions in the ordering index, in walk order, each one
    /// an object that already passed every condition.
    private var collected: [[UInt8]] = []
    /// The stored values (opened, on an encrypted database) that the collecting plan read for
    /// each of `collected`, kept while they fit ``keptValueBudget``: the walk returns them instead
    /// of reading (and opening) each record a second time. `nil` where not kept.
    private var collectedValues: [[UInt8]?] = []
    /// The bytes of record values a collecting plan keeps for its walk.
    static let keptValueBudget = 8 << 20
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
    /// On a multi-valued ordering index, the position (first entry in range, in walk order) of
    /// objects with many entries in it, found when the walk met the first of them: the walk meets
    /// such an object once per entry in range, and reading and parsing its record each time to
    /// find out it is not there would be quadratic in its values. Bounded; emptied when full.
    private var settledPositions: [ObjectKeyBytes: [UInt8]] = [:]
    /// The stored value (header and payload) of the current result, lent by one of the cursors:
    /// valid until either moves. Set by `advance(readRecord: true)`.
    private var record = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Where the payload starts in `record`.
    private var payloadOffset = 0
    /// The schema version of the current result's record (with `record`).
    private(set) var currentSchemaVersion: UInt64 = 0
    /// Set by a reader that opens sealed records on other threads (``ParallelDecoding``): a walk
    /// that checks no header then lends a sealed record as it is stored, unopened.
    var defersOpening = false
    /// Whether `record` is the current result's sealed value, unopened (see ``defersOpening``):
    /// ``currentStoredRecord`` and ``opener`` then read it, and neither ``currentPayload`` nor
    /// ``currentSchemaVersion`` describes it.
    private(set) var currentRecordIsSealed = false
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

    init(bucket: RawBucket, plan: QueryPlan, reader given: any StorageReader) throws(BuriError) {
        self.bucket = bucket
        self.plan = plan
        // A bucket with text indexes has its postings read as single entries wherever they are
        // (a search's conditions walk its terms' entries like any index's).
        let reader = bucket.postingsReader(given)
        self.reader = reader
        recordKey = bucket.recordPrefix
        checksHeaders =
            plan.collectFrom == nil && (plan.filters || plan.orderIsMultiValued || !plan.secondary.isEmpty)
        batched =
            reader.prefersBatchedReads && (plan.order != nil || plan.collectFrom != nil || plan.textDriver != nil)
        if let sources = plan.collectFrom {
            cursor = nil
            (collected, collectedValues) = try Self.collect(
                from: sources, bucket: bucket, plan: plan, reader: reader, keepsValues: !batched)
        } else if let driver = plan.textDriver {
            // Record keys of the matches, in walk order; each is checked like a walked record.
            cursor = nil
            collected = try driver.matchingRecordKeys(
                bucket: bucket, reader: reader, range: plan.range, descending: plan.descending)
        } else if plan.resumesInNulls, let nullRange = plan.nullRange {
            inNulls = true
            cursor = try bucket.run { try reader.cursor(in: nullRange, reverse: plan.descending) }
        } else {
            cursor = try bucket.run {
                try reader.cursor(in: plan.range, reverse: plan.descending)
            }
        }
    }

    /// After the walk of the ordering index: moves on to the objects without a value in it, if
    /// the query has that phase and some object may be in it.
    private func enterNulls() throws(BuriError) -> Bool {
        guard !inNulls, cursor != nil, let nullRange = plan.nullRange else { return false }
        inNulls = true
        // A walk of the whole index from its start met every object that has a value there.
        if plan.returnedBefore == 0, plan.range == plan.fullRange,
            let objects = try bucket.objectCount(reader: reader), objectsInOrder >= objects
        {
            return false
        }
        cursor = try bucket.run { try reader.cursor(in: nullRange, reverse: plan.descending) }
        return true
    }

    /// Checks the query's predicates (and filters, decoding `payload`) for one object.
    private func satisfiesPredicates(
        _ entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>, payload: UnsafeRawBufferPointer,
        version: UInt64
    ) throws(BuriError) -> Bool {
        try Self.satisfies(
            plan.predicates, entries, objectKey: objectKey, payload: payload, version: version,
            catalog: bucket.descriptor)
    }

    /// Whether every one of `predicates` holds for an object; a filter that cannot decode the
    /// object is a typed error naming bucket and key.
    static func satisfies(
        _ predicates: [PredicatePlan], _ entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>,
        payload: UnsafeRawBufferPointer, version: UInt64, catalog: BucketDescriptor
    ) throws(BuriError) -> Bool {
        for predicate in predicates {
            let passed = try predicate.isSatisfied(by: entries, objectKey: objectKey) { filter throws(BuriError) in
                try filter.passes(
                    payload, version: version, catalog: catalog, key: String(decoding: objectKey, as: UTF8.self))
            }
            if !passed { return false }
        }
        return true
    }

    /// The candidates of a collecting plan: every object with an entry in the sources' ranges that
    /// satisfies all conditions, as its position in the results' order (its first entry in the
    /// ordering index in walk order, as a walk would meet it, or its record key: in key order, or
    /// without a value in the index it is ordered by), after the continuation, sorted in walk
    /// order. The sources hold at most ``QueryPlan/keyOrderCollectLimit`` entries, so memory
    /// stays bounded; records are read in batches (one request each on a remote engine).
    private static func collect(
        from sources: [ConditionPlan], bucket: RawBucket, plan: QueryPlan, reader: any StorageReader,
        keepsValues: Bool
    ) throws(BuriError) -> (positions: [[UInt8]], values: [[UInt8]?]) {
        var objectKeys: [[UInt8]] = []
        var seen = Set<ObjectKeyBytes>()
        try bucket.run {
            for source in sources {
                let arity = source.index.components.count
                let entries = try reader.cursor(in: source.range)
                while try entries.next() {
                    let objectKey = try entries.withKey { raw throws(BuriError) -> [UInt8] in
                        let parts: (tuple: Range<Int>, objectKey: Range<Int>)
                        do {
                            parts = try Keyspace.splitIndexEntry(raw, arity: arity)
                        } catch {
                            throw .corruption(
                                bucket: bucket.name, key: nil, index: source.index.name,
                                reason: "storage key: \(error)")
                        }
                        guard Keyspace.isValidUTF8(raw[parts.objectKey]) else {
                            throw .corruption(
                                bucket: bucket.name, key: nil, index: source.index.name,
                                reason: "storage key: object key is not valid UTF-8")
                        }
                        return Array(raw[parts.objectKey])
                    }
                    // An entry between an IN condition's values is not one of its matches.
                    guard source.alternatives == nil || entries.withKey({ source.matches(Array($0)) }) else { continue }
                    if seen.insert(ObjectKeyBytes(objectKey)).inserted { objectKeys.append(objectKey) }
                }
            }
        }
        var positions: [(position: [UInt8], value: [UInt8]?)] = []
        var nulls: [(position: [UInt8], value: [UInt8]?)] = []
        var budget = keepsValues ? keptValueBudget : 0
        var start = 0
        while start < objectKeys.count {
            let batch = objectKeys[start..<Swift.min(start + readAhead, objectKeys.count)]
            start += batch.count
            let recordKeys = batch.map { bucket.recordPrefix + $0 }
            let values = try bucket.run { try reader.values(forKeys: recordKeys) }
            for (offset, objectKey) in batch.enumerated() {
                // An entry without its object matches nothing (as in a walk that checks conditions).
                guard let value = values[offset] else { continue }
                let parsed: (header: RecordHeader, payload: Int)
                let parse = RecordHeader.parse
                do {
                    let (header, payload) = try value.withUnsafeBytes { raw in try parse(raw) }
                    parsed = (header, payload)
                } catch {
                    throw .corruption(
                        bucket: bucket.name, key: String(decoding: objectKey, as: UTF8.self), index: nil,
                        reason: "record header: \(error)")
                }
                let key = objectKey[...]
                guard plan.residual.allSatisfy({ $0.isSatisfied(by: parsed.header.entries, objectKey: key) }) else {
                    continue
                }
                let position: [UInt8]
                var isNull = false
                if let order = plan.order {
                    if let found = order.position(
                        of: parsed.header.entries, objectKey: key, descending: plan.descending)
                    {
                        guard plan.range.contains(found) else { continue }
                        position = found
                    } else {
                        guard let nullRange = plan.nullRange, nullRange.contains(recordKeys[offset]) else { continue }
                        position = recordKeys[offset]
                        isNull = true
                    }
                } else {
                    guard plan.range.contains(recordKeys[offset]) else { continue }
                    position = recordKeys[offset]
                }
                if !plan.predicates.isEmpty {
                    let outcome = value.withUnsafeBytes { raw -> Result<Bool, BuriError> in
                        let payload = UnsafeRawBufferPointer(rebasing: raw[parsed.payload...])
                        return Result { () throws(BuriError) -> Bool in
                            try satisfies(
                                plan.predicates, parsed.header.entries, objectKey: key, payload: payload,
                                version: parsed.header.schemaVersion, catalog: bucket.descriptor)
                        }
                    }
                    let passed = try outcome.get()
                    guard passed else { continue }
                }
                // The value read here is what the walk returns, while the budget lasts.
                var kept: [UInt8]?
                if value.count <= budget {
                    budget -= value.count
                    kept = value
                }
                if isNull { nulls.append((position, kept)) } else { positions.append((position, kept)) }
            }
        }
        let descending = plan.descending
        let walkOrder = { (a: (position: [UInt8], value: [UInt8]?), b: (position: [UInt8], value: [UInt8]?)) in
            descending
                ? b.position.lexicographicallyPrecedes(a.position) : a.position.lexicographicallyPrecedes(b.position)
        }
        positions.sort(by: walkOrder)
        nulls.sort(by: walkOrder)
        let all = positions + nulls
        return (all.map(\.position), all.map(\.value))
    }

    /// A token that resumes the query right after the last result returned.
    public var continuation: ContinuationToken? {
        guard hasReturned else { return nil }
        return ContinuationToken(
            bucket: bucket.descriptor.lineageId, order: plan.order?.index.id ?? 0, fingerprint: plan.fingerprint,
            returned: plan.returnedBefore + UInt64(returned), position: lastStorageKey,
            secondary: plan.secondary.isEmpty ? nil : lastSortBytes)
    }

    /// Puts the next candidate's storage key into `candidateKey`; `false` at the end. With
    /// `needsRecord` on a batched reader, its record comes along in `aheadRecord`.
    private func nextCandidate(needsRecord: Bool) throws(BuriError) -> Bool {
        candidateOnCursor = false
        // Candidates already read ahead are served first, whatever this call needs.
        if batched, !inNulls, aheadNext < aheadKeys.count || needsRecord {
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
            candidateOnCursor = plan.order == nil || inNulls
            return true
        }
        guard nextCollected < collected.count else { return false }
        candidateKey = collected[nextCollected]
        collected[nextCollected] = []
        if nextCollected < collectedValues.count, let value = collectedValues[nextCollected] {
            // Read when collected: returned as it was read then.
            collectedValues[nextCollected] = nil
            aheadRecord = value
            candidateReadAhead = true
        }
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
        guard !aheadKeys.isEmpty else { return false }
        let arity = plan.order?.index.components.count ?? 0
        // An entry that does not parse gets no record here; readCandidateKey reports it in turn.
        let recordKeys = aheadKeys.map { key -> [UInt8] in
            // A collected object without a value in the ordering index is its record key.
            if key.first == Keyspace.recordTag { return key }
            return key.withUnsafeBytes { raw in
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
        let arity = candidateKey.first == Keyspace.recordTag ? nil : plan.order?.index.components.count
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

    /// Points `record` at the stored value of the candidate's object; `false` if there is none. A
    /// sealed record that does not open is reported naming the bucket.
    /// With `deferring` (and ``defersOpening``), a sealed record is lent unopened.
    private func locateRecord(deferring: Bool = false) throws(BuriError) -> Bool {
        currentRecordIsSealed = false
        do {
            return try locateRecordValue(deferring: deferring && defersOpening)
        } catch {
            throw error.attributed(to: bucket.name)
        }
    }

    /// The value under `cursor`: as stored when `deferring` and it is sealed (setting
    /// ``currentRecordIsSealed``), opened otherwise.
    private func value(
        under cursor: any StorageCursor, deferring: Bool
    ) throws(BuriError) -> UnsafeRawBufferPointer {
        if deferring, let sealed = cursor as? SealedCursor {
            let stored: UnsafeRawBufferPointer?
            do {
                stored = try sealed.sealedValue()
            } catch {
                throw BuriError.wrap(error)
            }
            if let stored {
                currentRecordIsSealed = true
                return stored
            }
        }
        return try cursor.readValue { $0 }
    }

    private func locateRecordValue(deferring: Bool) throws(BuriError) -> Bool {
        if candidateOnCursor, let cursor {
            // Scanning records: the value is right under the cursor.
            record = try value(under: cursor, deferring: deferring)
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
                        record = try value(under: records, deferring: deferring)
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
            record = try value(under: records, deferring: deferring)
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
        while try plan.secondary.isEmpty ? nextMatch(readRecord: readRecord) : nextSorted(readRecord: readRecord) {
            if skipped < plan.offset {
                skipped += 1
                continue
            }
            returned += 1
            swap(&candidateKey, &lastStorageKey)
            if !plan.secondary.isEmpty { swap(&sortBytes, &lastSortBytes) }
            hasReturned = true
            return true
        }
        return false
    }

    /// Moves to the next candidate in walk order that passes every condition (before offset and
    /// limit); `false` at the end. With `readRecord`, `record` and `payloadOffset` describe its
    /// stored value; with further sort keys, `sortBytes` holds its sort bytes.
    private func nextMatch(readRecord: Bool) throws(BuriError) -> Bool {
        while true {
            guard try nextCandidate(needsRecord: readRecord || checksHeaders || inNulls) else {
                if try enterNulls() { continue }
                return false
            }
            try readCandidateKey()
            let isNull = plan.order != nil && candidateKey.first == Keyspace.recordTag
            // An `anyOf` ordering condition walks from its first value to its last: an entry
            // between two of its values is skipped, and an ascending walk seeks to the next value.
            if !isNull, let order = plan.order, order.alternatives != nil, !order.matches(candidateKey) {
                if !plan.descending, !candidateReadAhead, let cursor {
                    guard let next = order.nextAlternativeStart(after: candidateKey) else { return false }
                    cursor.seek(next)
                }
                continue
            }
            if !isNull, !settledPositions.isEmpty,
                let position = settledPositions[ObjectKeyBytes(Array(candidateKey[objectKeyRange]))],
                position != candidateKey
            {
                continue  // not the entry where this object is a result
            }
            guard readRecord || checksHeaders || isNull else {
                objectsInOrder += 1
                return true
            }
            guard try locateRecord(deferring: !checksHeaders && !isNull) else {
                // A key walk that checks further conditions finds that a missing object
                // matches nothing; anything else needs the object.
                if readRecord || plan.orderIsMultiValued || plan.textDriver != nil {
                    throw BuriError.corruption(
                        bucket: bucket.name, key: objectKey(in: candidateKey),
                        index: plan.order?.index.name ?? plan.textDriver?.index.name,
                        reason: "an index entry points to an object that does not exist")
                }
                continue
            }
            guard checksHeaders || isNull else {
                if currentRecordIsSealed {
                    // Its header is read where it is opened.
                    objectsInOrder += 1
                    return true
                }
                do {
                    (currentSchemaVersion, payloadOffset) = try RecordHeader.versionAndPayloadOffset(record)
                } catch {
                    throw corruptRecord(objectKey(in: candidateKey), error)
                }
                objectsInOrder += 1
                return true
            }
            let header: RecordHeader
            do {
                (header, payloadOffset) = try RecordHeader.parse(record)
            } catch {
                throw corruptRecord(objectKey(in: candidateKey), error)
            }
            currentSchemaVersion = header.schemaVersion
            let key = candidateKey[objectKeyRange]
            if isNull, let order = plan.order {
                // The phase of objects without a value: one with a value was met in the index.
                if header.entries.contains(where: { $0.index == order.index.id }) { continue }
            } else if plan.orderIsMultiValued, let order = plan.order {
                // On a multi-valued index an object is one result, at its first entry in range.
                guard let first = order.position(of: header.entries, objectKey: key, descending: plan.descending)
                else { continue }
                if header.entries.count > 16 {
                    if settledPositions.count >= 4096 { settledPositions.removeAll(keepingCapacity: true) }
                    settledPositions[ObjectKeyBytes(Array(key))] = first
                }
                guard first == candidateKey else { continue }
            }
            if !isNull { objectsInOrder += 1 }
            guard plan.residual.allSatisfy({ $0.isSatisfied(by: header.entries, objectKey: key) }) else {
                continue
            }
            if !plan.predicates.isEmpty {
                let payload = UnsafeRawBufferPointer(rebasing: record[payloadOffset...])
                guard
                    try satisfiesPredicates(
                        header.entries, objectKey: key, payload: payload, version: header.schemaVersion)
                else { continue }
            }
            if !plan.secondary.isEmpty {
                sortBytes.removeAll(keepingCapacity: true)
                for sort in plan.secondary { sort.appendSortBytes(of: header.entries, to: &sortBytes) }
            }
            return true
        }
    }

    /// The bytes that identify a candidate's group: its value in the ordering index, or (for the
    /// objects without one) the record tag.
    private static func groupId(_ key: [UInt8], objectKey: Range<Int>) -> ArraySlice<UInt8> {
        key.first == Keyspace.recordTag ? key[..<1] : key[..<objectKey.lowerBound]
    }

    /// Whether `a` comes before `b` in a group: by sort bytes, then by object key in the walk's direction.
    private func precedes(_ a: Member, _ b: Member) -> Bool {
        if a.sortBytes != b.sortBytes { return a.sortBytes.lexicographicallyPrecedes(b.sortBytes) }
        let keyA = a.key[a.objectKey]
        let keyB = b.key[b.objectKey]
        return plan.descending ? keyB.lexicographicallyPrecedes(keyA) : keyA.lexicographicallyPrecedes(keyB)
    }

    /// The token's last result as a member of its group, to skip what precedes it.
    private lazy var resumeMember: Member? = {
        guard let resume = plan.resume else { return nil }
        let position = resume.position
        let objectKey: Range<Int>
        if position.first == Keyspace.recordTag {
            objectKey = Keyspace.recordPrefixLength..<position.count
        } else if let arity = plan.order?.index.components.count,
            let parts = position.withUnsafeBytes({ try? Keyspace.splitIndexEntry($0, arity: arity) })
        {
            objectKey = parts.objectKey
        } else {
            return nil
        }
        return Member(key: position, objectKey: objectKey, sortBytes: resume.secondary)
    }()

    /// With further sort keys: the next result of the current group (filling and sorting the
    /// next group when it is used up).
    private func nextSorted(readRecord: Bool) throws(BuriError) -> Bool {
        while groupNext == group.count {
            guard try fillGroup() else { return false }
        }
        let member = group[groupNext]
        groupNext += 1
        candidateKey = member.key
        objectKeyRange = member.objectKey
        sortBytes = member.sortBytes
        if readRecord {
            candidateOnCursor = false
            candidateReadAhead = false
            guard try locateRecord() else {
                throw BuriError.corruption(
                    bucket: bucket.name, key: objectKey(in: candidateKey), index: plan.order?.index.name,
                    reason: "an index entry points to an object that does not exist")
            }
            do {
                (currentSchemaVersion, payloadOffset) = try RecordHeader.versionAndPayloadOffset(record)
            } catch {
                throw corruptRecord(objectKey(in: candidateKey), error)
            }
        }
        return true
    }

    /// Reads the next group of candidates that tie on the ordering index and sorts it; `false`
    /// when the walk is over. With a limit, only as many as can still be returned are kept.
    private func fillGroup() throws(BuriError) -> Bool {
        group.removeAll(keepingCapacity: true)
        groupNext = 0
        if let first = pending {
            group.append(first)
            pending = nil
        } else if walkOver {
            return false
        }
        let resume = resumeMember
        let resumeGroup = resume.map { Self.groupId($0.key, objectKey: $0.objectKey) }
        let keep = plan.limit.map { Swift.max(0, plan.offset - skipped) + Swift.max(0, $0 - returned) }
        var id = group.first.map { Self.groupId($0.key, objectKey: $0.objectKey) }
        while true {
            guard try nextMatch(readRecord: false) else {
                walkOver = true
                break
            }
            let member = Member(key: candidateKey, objectKey: objectKeyRange, sortBytes: sortBytes)
            let memberGroup = Self.groupId(member.key, objectKey: member.objectKey)
            if let resume, memberGroup == resumeGroup, !precedes(resume, member) { continue }
            if id == nil { id = memberGroup }
            if memberGroup != id {
                pending = member
                break
            }
            group.append(member)
            if let keep, group.count >= 2 * keep + 64 {
                group.sort(by: precedes)
                group.removeSubrange(keep...)
            }
        }
        group.sort(by: precedes)
        if let keep, group.count > keep { group.removeSubrange(keep...) }
        return !group.isEmpty || pending != nil
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

    /// The stored value of the object ``nextObject()`` moved to, sealed when
    /// ``currentRecordIsSealed``. Valid until the cursor moves.
    var currentStoredRecord: UnsafeRawBufferPointer { record }

    /// The prefix of the record keys this cursor reads (the bucket's, when the cursor was made).
    var recordPrefix: [UInt8] { Array(recordKey[..<Keyspace.recordPrefixLength]) }

    /// What opens this cursor's sealed records (`nil` on a plaintext database).
    var opener: RecordOpener? { (reader as? SealedReader).map { RecordOpener(cipher: $0.cipher, phase: $0.phase) } }

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
