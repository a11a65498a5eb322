import BuriCodec
import BuriStorage

/// One inconsistency found by ``BuriDatabase/check(repair:progress:)``.
public struct ConsistencyProblem: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// An index entry whose object does not exist.
        case danglingEntry
        /// An index entry whose object's stored index values do not include it.
        case staleEntry
        /// An object's stored index value with no index entry.
        case missingEntry
        /// An index entry or header entry for an index the catalog does not define.
        case unknownIndex
        /// A key in a bucket space whose bucket is not in the catalog, or a key Buri cannot parse.
        /// The records and index entries of a bucket id without catalog entry (one whose catalog
        /// entry was lost) are one problem per id, named `#<id>`, and are never deleted: they may be
        /// all that is left of its objects; ``BuriDatabase/repair(path:options:levelDB:)`` gives the bucket a
        /// catalog entry again.
        case strayKey
        /// A record whose header or payload cannot be read.
        case corruptRecord
        /// A catalog entry that does not decode.
        case corruptCatalog
        /// A unique index value held by more than one object.
        case uniqueConflict
        /// A bucket's stored object count (format 4) that is missing, damaged or not the number of
        /// its records. Repair writes the number counted (a count is derived data: nothing else changes).
        case wrongCount
        /// An object whose stored index values (its record header) are not what its payload's
        /// fields give, for an index tools compute from recorded fields (`fields`/`fieldPaths`, not
        /// `computed`): a date stored one way and indexed another, say, or a field that cannot be
        /// indexed at all. Queries and tools would disagree about the object. Not repaired (which
        /// side is right is not derived data): store the object again, through its Swift type or
        /// `buri put`, or restore an export, which recomputes every such index from the fields.
        /// Also a text index entry whose value (the term's positions, format 6) is not what
        /// tokenizing the field gives; that one repair rewrites, as positions are derived data.
        case wrongIndexValue
        /// An object refers through a relationship (an index with `references`, format 5) to an
        /// object its target bucket does not hold. Repair applies the relationship's delete rule as
        /// if the target had just been deleted: `.nullify` takes the reference out, `.cascade`
        /// deletes the holder (and follows its own rules); `.deny` is not repaired (store the
        /// target again, or change the holder).
        case danglingReference
        /// A named value (docs/FORMAT.md §3a) whose stored bytes are not one CBOR item, or whose key
        /// holds no valid UTF-8 name. Never deleted nor repaired: set the value again (or remove it).
        case corruptValue
    }

    public var kind: Kind
    public var bucket: String?
    public var key: String?
    public var index: String?
    public var detail: String
    /// Whether `check(repair: true)` fixed it.
    public var repaired: Bool = false

    public var description: String {
        var parts = [kind.rawValue]
        if let bucket { parts.append("bucket '\(bucket)'") }
        if let key { parts.append("key '\(key)'") }
        if let index { parts.append("index '\(index)'") }
        return parts.joined(separator: " ") + ": " + detail + (repaired ? " [repaired]" : "")
    }
}

/// What a consistency check found.
public struct ConsistencyReport: Sendable {
    public var buckets = 0
    public var objects = 0
    public var indexEntries = 0
    /// The named values checked (``NamedValues``).
    public var values = 0
    public var problems: [ConsistencyProblem] = []
    /// Retired bucket ids whose keys are still there: generations replaced by `deleteAll` (or an
    /// import) that the background purge has not finished, and imports being staged. Information,
    /// not problems: their keys are neither checked nor repaired.
    public var pendingPurges: [RetiredBucket] = []
    /// Whether no problem was found (or every problem found was repaired).
    public var isConsistent: Bool { problems.allSatisfy(\.repaired) }
}

extension BuriDatabase {
    /// Checks that every index entry points to an existing object whose stored index values include
    /// it, that every object's stored index values have their entries, that every record decodes,
    /// that unique indexes hold each value once, and — for every index tools compute from recorded
    /// fields — that each object's stored index values are what its fields give (a date included). With `repair`, rebuilds the entries from the
    /// record headers (deleting dangling, stale and unknown entries, adding missing ones) in one
    /// atomic batch; damaged records are reported, never deleted, and neither are the keys of a
    /// bucket id that has records but no catalog entry (reported as one problem naming `#<id>`:
    /// ``repair(path:options:levelDB:)`` rebuilds its catalog entry).
    ///
    /// ```swift
    /// let report = try db.check()
    /// if !report.isConsistent { report.problems.forEach { print($0) } }
    /// ```
    ///
    /// - Throws: ``BuriError/damaged(path:bucket:reason:)`` naming the bucket being read when
    ///   LevelDB cannot read a block: damaged files are not a list of problems but a reason to run
    ///   ``repair(path:options:levelDB:)``, and a check that skipped them would report too little.
    public func check(repair: Bool = false, progress: ((Int) -> Void)? = nil) throws(BuriError) -> ConsistencyReport {
        var dangling: [DanglingReference] = []
        var report = try withWriteLock { () throws(BuriError) -> ConsistencyReport in
            var reading: String?
            do throws(BuriError) {
                return try run {
                    try checkLocked(repair: repair, progress: progress, reading: &reading, dangling: &dangling)
                }
            } catch {
                throw error.attributed(to: reading)
            }
        }
        if repair, !dangling.isEmpty {
            let repaired = try repairReferences(dangling)
            for position in report.problems.indices where report.problems[position].kind == .danglingReference {
                let problem = report.problems[position]
                if repaired.contains(where: {
                    $0.holder.hasSameBytes(as: problem.bucket ?? "") && $0.key.hasSameBytes(as: problem.key ?? "")
                        && $0.index.hasSameBytes(as: problem.index ?? "")
                }) {
                    report.problems[position].repaired = true
                }
            }
        }
        return report
    }

    /// A reference found by `check` whose target is missing.
    struct DanglingReference {
        var relationship: Relationship
        var holderKey: [UInt8]
        var tuple: [UInt8]
    }

    /// Applies each dangling reference's delete rule (not `.deny`) in one commit; returns the
    /// (holder bucket, key, index) of those repaired.
    private func repairReferences(
        _ dangling: [DanglingReference]
    ) throws(BuriError) -> [(holder: String, key: String, index: String)] {
        try performWrite(sync: true) { writer throws(BuriError) -> [(holder: String, key: String, index: String)] in
            var repaired: [(holder: String, key: String, index: String)] = []
            var plan = DeletionPlan()
            for reference in dangling {
                let relationship = reference.relationship
                let key = String(decoding: reference.holderKey, as: UTF8.self)
                switch relationship.rule {
                case .deny: continue
                case .cascade: plan.cascade(relationship.holder, key: reference.holderKey)
                case .nullify: plan.nullify(relationship, holderKey: reference.holderKey, tuple: reference.tuple)
                }
                repaired.append((relationship.holder.name, key, relationship.index.name))
            }
            try carryOut(&plan, deleting: [], relationships: relationships(reader: writer.reader), writer: writer)
            return repaired
        }
    }

    /// `reading` is kept up to date with the bucket being read, to name it when damage is met.
    private func checkLocked(
        repair: Bool, progress: ((Int) -> Void)?, reading: inout String?, dangling: inout [DanglingReference]
    ) throws -> ConsistencyReport {
        var report = ConsistencyReport()
        let snapshot = try engine.snapshot()
        let fixes = engine.makeBatch()
        /// On a shared engine, the keys each fix relied on: the fix applies only if they are unchanged.
        var relied: [[UInt8]] = []
        var buckets: [UInt32: BucketDescriptor] = [:]

        // Catalog.
        let catalog = try snapshot.cursor(in: Keyspace.catalogRange)
        while try catalog.next() {
            let key = catalog.key
            let name = Keyspace.bucketName(fromCatalogKey: key) ?? "(invalid UTF-8)"
            do {
                // With its private indexes' tokens, to compare what the fields give with what is stored.
                let descriptor = try BucketDescriptor.decode(catalog.value).attaching(indexTokens)
                buckets[descriptor.id] = descriptor
            } catch {
                report.problems.append(
                    ConsistencyProblem(kind: .corruptCatalog, bucket: name, key: nil, index: nil, detail: "\(error)"))
            }
        }
        report.buckets = buckets.count
        // Retired ids: their keys belong to no bucket on purpose (docs/FORMAT.md §6a).
        var retired = Set<UInt32>()
        let markers = try snapshot.cursor(in: Keyspace.retiredRange)
        while try markers.next() {
            let key = markers.key
            if let marker = Keyspace.parseRetired(key: key, value: try markers.value), buckets[marker.bucket] == nil {
                retired.insert(marker.bucket)
                report.pendingPurges.append(
                    RetiredBucket(
                        id: marker.bucket, bucket: marker.name, state: marker.state == .purging ? .purging : .staging,
                        owner: marker.owner))
            } else {
                // Never repaired: deleting a marker would turn a pending purge into orphaned keys.
                report.problems.append(
                    ConsistencyProblem(
                        kind: .strayKey, bucket: nil, key: nil, index: nil,
                        detail:
                            "retired bucket id marker \(key.map { String(format2: $0) }.joined(separator: " ")) does not parse or names a bucket id the catalog uses"
                    ))
            }
        }
        // The largest bucket id given (format 5). One below an id in use is no damage (a published
        // import's id is named by the catalog instead, docs/FORMAT.md §6a); one that does not parse
        // would stop every new bucket. Repair writes the largest id in use.
        if let bytes = try snapshot.get(Keyspace.bucketIdsKey), Keyspace.parseBucketIds(bytes) == nil {
            let inUse = max(buckets.keys.max() ?? 0, retired.max() ?? 0)
            do {
                var problem = ConsistencyProblem(
                    kind: .strayKey, bucket: nil, key: nil, index: nil,
                    detail:
                        "the largest bucket id given (key 00 \"bucket-ids\") holds \(bytes.count) bytes, not 4; repair writes the largest id in use, \(inUse)"
                )
                if repair {
                    fixes.put(Keyspace.bucketIdsKey, Keyspace.bucketIdsValue(inUse))
                    relied.append(Keyspace.bucketIdsKey)
                    problem.repaired = true
                }
                report.problems.append(problem)
            }
        }
        /// Keys under bucket ids with neither a catalog entry nor a retired-id marker.
        struct OrphanKeys {
            var records = 0
            var entries = 0
            var count: Int?? = nil
        }
        var orphans: [UInt32: OrphanKeys] = [:]
        var processed = 0
        /// Record ranges whose counts were repaired: on a shared engine, unchanged when the fix applies.
        var reliedRanges: [KeyRange] = []
        // Object counts are kept from format 4 on; an older database has none to check.
        let checksCounts = formatVersion >= Int(Keyspace.countsVersion)

        // Text indexes' postings, in segments or not, read as single entries.
        let postings = GroupedPostingsReader(
            snapshot,
            textPrefixes: engine.isShared ? [] : buckets.values.flatMap { RawBucket.groupedTextPrefixes(of: $0) })
        try checkSegments(
            buckets: buckets, postings: postings, snapshot: snapshot, repair: repair, fixes: fixes, report: &report)
        // Records: each must parse, decode as CBOR, and have every entry its header lists.
        for descriptor in buckets.values.sorted(by: { $0.id < $1.id }) {
            let objectsBefore = report.objects
            /// Text indexes keeping token totals (format 7): the tokens their objects' fields give,
            /// known unless a record or field could not be read.
            let lengthIndexes = descriptor.indexes.filter { $0.text?.keepsLengths == true }
            var tokenTotals: [UInt32: Int] = [:]
            var totalsKnown = true
            defer {
                if checksCounts {
                    checkCount(
                        of: descriptor, counted: report.objects - objectsBefore, snapshot: snapshot, repair: repair,
                        fixes: fixes, relied: &relied, reliedRanges: &reliedRanges, report: &report)
                }
                if totalsKnown {
                    for index in lengthIndexes {
                        checkTextTotal(
                            of: descriptor, index: index, counted: tokenTotals[index.id] ?? 0, snapshot: snapshot,
                            repair: repair, fixes: fixes, relied: &relied, reliedRanges: &reliedRanges,
                            report: &report)
                    }
                }
            }
            let names = Dictionary(descriptor.indexes.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
            // Indexes whose values tools compute from the payload's fields: each record's stored
            // values must be exactly what its fields give (docs/FORMAT.md §13, invariant 9).
            let computable = descriptor.indexes.filter { $0.uncomputableReason == nil }
            let raw = RawBucket(database: self, descriptor: descriptor, pinned: true)
            reading = descriptor.name
            let textIds = Set(descriptor.indexes.filter { $0.text != nil }.map(\.id))
            /// Records read whose index entries are still to be compared with the stored ones. On an
            /// engine where each read is a round trip (etcd), the entries of up to 256 records are
            /// read in one request; elsewhere each record's are compared as soon as it is read.
            var pending: [PendingEntryCheck] = []
            var pendingEntries = 0
            let batchesReads = snapshot.prefersBatchedReads
            func comparePending() throws {
                guard !pending.isEmpty else { return }
                var reader: any StorageReader = postings
                if batchesReads {
                    let keys = pending.flatMap { record in
                        record.entries.map { raw.entryKey($0, objectKey: record.objectKey) }
                    }
                    // A batch that cannot be read at once is read key by key, as it would be anyway,
                    // so that any error is the one the key itself gives.
                    if keys.count > 1, let prefetched = try? PrefetchingReader(snapshot, keys: keys) {
                        reader = prefetched
                    }
                }
                for record in pending {
                    report.problems += record.problems
                    try compareEntries(record, reader)
                }
                pending.removeAll(keepingCapacity: true)
                pendingEntries = 0
            }
            /// Every entry `record`'s header lists must be stored, a text entry with the positions its
            /// field gives.
            func compareEntries(_ record: PendingEntryCheck, _ reader: any StorageReader) throws {
                for entry in record.entries {
                    guard let indexName = names[entry.index] else {
                        report.problems.append(
                            ConsistencyProblem(
                                kind: .unknownIndex, bucket: descriptor.name, key: record.objectKey,
                                index: "#\(entry.index)",
                                detail: "the record lists an entry for an index the catalog does not define"))
                        continue
                    }
                    let entryKey = raw.entryKey(entry, objectKey: record.objectKey)
                    let expected = record.textValues[entry]
                    let isText = textIds.contains(entry.index)
                    let stored = try reader.get(entryKey)
                    if let stored, isText, let expected, stored != expected {
                        let layout = descriptor.indexes.first { $0.id == entry.index }?.text?.entryLayout ?? 1
                        let shown = TextEntries.describe(stored, layout: layout) ?? "a malformed value"
                        let wanted = TextEntries.describe(expected, layout: layout) ?? "?"
                        var problem = ConsistencyProblem(
                            kind: .wrongIndexValue, bucket: descriptor.name, key: record.objectKey, index: indexName,
                            detail:
                                "the text entry for \(IndexTuple.describe(entry.tuple)) holds \(shown), but the field gives \(wanted)"
                        )
                        if repair {
                            // A posting in a segment is cancelled, and the single entry takes its place.
                            if let stamp = try postings.segmentStamp(ofPosting: entryKey),
                                let tombstone = GroupedPostingsReader.tombstoneKey(
                                    ofPosting: entryKey, stamp: stamp, in: postings)
                            {
                                fixes.put(tombstone, [])
                            }
                            fixes.put(entryKey, expected)
                            relied.append(entryKey)
                            relied.append(Keyspace.recordKey(bucket: descriptor.id, key: record.objectKey))
                            problem.repaired = true
                        }
                        report.problems.append(problem)
                    }
                    if stored == nil {
                        var problem = ConsistencyProblem(
                            kind: .missingEntry, bucket: descriptor.name, key: record.objectKey, index: indexName,
                            detail: "no entry for value \(IndexTuple.describe(entry.tuple))")
                        // A text entry is rewritten only with the positions its field gives.
                        if repair, !isText || expected != nil {
                            fixes.put(entryKey, expected ?? [UInt8]())
                            relied.append(entryKey)
                            relied.append(Keyspace.recordKey(bucket: descriptor.id, key: record.objectKey))
                            problem.repaired = true
                        }
                        report.problems.append(problem)
                    }
                }
            }
            let records = try snapshot.cursor(in: .prefix(raw.recordPrefix))
            while try records.next() {
                report.objects += 1
                processed += 1
                if processed % 10_000 == 0 { progress?(processed) }
                let objectKey: String
                do {
                    objectKey = try records.withKey { try Keyspace.objectKey(fromRecordKey: $0) }
                } catch {
                    try comparePending()
                    report.problems.append(
                        ConsistencyProblem(
                            kind: .strayKey, bucket: descriptor.name, key: nil, index: nil,
                            detail: "record key: \(error)"))
                    continue
                }
                let parsed: (RecordHeader, Int)
                let payload: CBORValue
                do {
                    (parsed, payload) = try records.withValue { value throws -> ((RecordHeader, Int), CBORValue) in
                        let result = try RecordHeader.parse(value)
                        return (
                            result,
                            try CBORValue(decoding: UnsafeRawBufferPointer(rebasing: value[result.payloadOffset...]))
                        )
                    }
                } catch {
                    try comparePending()
                    report.problems.append(
                        ConsistencyProblem(
                            kind: .corruptRecord, bucket: descriptor.name, key: objectKey, index: nil,
                            detail: "\(error)"))
                    totalsKnown = false
                    continue
                }
                var problems: [ConsistencyProblem] = []
                for definition in computable {
                    if let problem = Self.valueProblem(
                        definition, header: parsed.0, payload: payload, bucket: descriptor.name, key: objectKey)
                    {
                        problems.append(problem)
                    }
                }
                // Text indexes' entries carry the term's positions: what tokenizing the field gives
                // (docs/FORMAT.md §9a). An index whose terms differ from the header's is reported by
                // `valueProblem` above; its values are compared only where the terms agree.
                var textValues: [RecordHeader.Entry: [UInt8]] = [:]
                for definition in computable where definition.text != nil {
                    guard let computed = try? definition.textEntries(of: payload, bucket: descriptor.name) else {
                        if definition.text?.keepsLengths == true { totalsKnown = false }
                        continue
                    }
                    if definition.text?.keepsLengths == true, let first = computed.first {
                        tokenTotals[definition.id, default: 0] += first.value.withUnsafeBytes {
                            RawBucket.documentLength($0)
                        }
                    }
                    for (tuple, value) in computed {
                        textValues[RecordHeader.Entry(index: definition.id, tuple: definition.stored(encoded: tuple))] =
                            value
                    }
                }
                pending.append(
                    PendingEntryCheck(
                        objectKey: objectKey, problems: problems, entries: parsed.0.entries, textValues: textValues))
                pendingEntries += parsed.0.entries.count
                if !batchesReads || pending.count >= 256 || pendingEntries >= 4096 {
                    try comparePending()
                }
            }
            try comparePending()
        }

        // Index entries: each must belong to a known bucket and index and match its record's header.
        // Postings in text segments are read as the single entries they stand for.
        reading = nil
        // A posting stored both as a single entry and in a segment reads as the single entry
        // (checked against its record above); the segment's copy is reported after the walk.
        postings.duplicates = []
        let entries = try postings.cursor(in: .prefix([Keyspace.indexTag]))
        /// Removes an index entry: a posting in a segment by a tombstone, anything else by a delete.
        func removeEntry(_ key: [UInt8]) throws {
            if let stamp = try postings.segmentStamp(ofPosting: key),
                let tombstone = GroupedPostingsReader.tombstoneKey(ofPosting: key, stamp: stamp, in: postings)
            {
                fixes.put(tombstone, [])
            } else {
                fixes.delete(key)
            }
        }
        // Keyed by the record key's bytes, never by a String: "é" (c3 a9) and "e\u{301}" (65 cc 81)
        // are equal Strings but two objects, and mixing up their headers would make a consistent
        // database look stale and have repair delete valid entries.
        var headers: [ObjectKeyBytes: RecordHeader?] = [:]
        /// The entries of cached headers that list many (a long text's terms), as sets: each entry
        /// of such an object is looked up in its header, which a search of the list would make
        /// quadratic in the object's entries. Emptied with `headers`, or past a million entries.
        var entrySets: [ObjectKeyBytes: Set<RecordHeader.Entry>] = [:]
        var entrySetsSize = 0
        /// The last entry of a unique index seen: the next one conflicts if it is of the same bucket,
        /// index and value (index ids are per bucket, and other indexes' entries lie in between).
        var previousUnique: (bucket: UInt32, index: UInt32, tuple: [UInt8], key: String)? = nil
        /// On an engine where each read is a round trip (etcd), the headers of the records of the
        /// next 256 entries are read in one request, from a second cursor looking ahead: the same
        /// headers the loop would read one by one. A batch that does not read at once (a sealed
        /// record that does not open) is left to the loop, which then reads key by key as elsewhere.
        var batchesEntryReads = snapshot.prefersBatchedReads
        func prefetchHeaders(from start: [UInt8]) throws {
            let ahead = try snapshot.cursor(in: KeyRange(start: start, end: [Keyspace.indexTag + 1]))
            var recordKeys: [[UInt8]] = []
            var wanted = Set<ObjectKeyBytes>()
            while recordKeys.count < 256, try ahead.next() {
                let entryKey = ahead.key
                guard let ids = entryKey.withUnsafeBytes({ Keyspace.bucketAndIndex(ofEntry: $0) }),
                    let descriptor = buckets[ids.bucket],
                    let definition = descriptor.indexes.first(where: { $0.id == ids.index }),
                    let objectKey = try? entryKey.withUnsafeBytes({ raw throws -> String in
                        let parts = try Keyspace.splitIndexEntry(raw, arity: definition.components.count)
                        return try Keyspace.string(raw, parts.objectKey)
                    })
                else { continue }
                let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: objectKey)
                let cacheKey = ObjectKeyBytes(recordKey)
                if headers[cacheKey] == nil, wanted.insert(cacheKey).inserted { recordKeys.append(recordKey) }
            }
            guard !recordKeys.isEmpty else { return }
            guard let values = try? snapshot.values(forKeys: recordKeys) else {
                // Read key by key from here on, as local engines do: trying every later batch
                // again would cost a look-ahead and a failed request per entry.
                batchesEntryReads = false
                return
            }
            if headers.count + recordKeys.count > 4096 { headers.removeAll(keepingCapacity: true) }
            for (recordKey, value) in zip(recordKeys, values) {
                headers[ObjectKeyBytes(recordKey)] = .some(
                    value.flatMap { bytes in bytes.withUnsafeBytes { try? RecordHeader.parse($0).0 } })
            }
        }
        while try entries.next() {
            report.indexEntries += 1
            let key = entries.key
            let ids = key.withUnsafeBytes { Keyspace.bucketAndIndex(ofEntry: $0) }
            if let ids, retired.contains(ids.bucket) {
                report.indexEntries -= 1
                if ids.bucket == UInt32.max { break }
                entries.seek(Keyspace.indexSpacePrefix(bucket: ids.bucket + 1))
                continue
            }
            guard let ids else {
                var problem = ConsistencyProblem(
                    kind: .strayKey, bucket: nil, key: nil, index: nil,
                    detail:
                        "index entry key of \(key.count) bytes is too short to name a bucket and an index; `check --repair` deletes it"
                )
                if repair { try removeEntry(key); relied.append(key); problem.repaired = true }
                report.problems.append(problem)
                continue
            }
            guard let descriptor = buckets[ids.bucket] else {
                // A bucket id no catalog entry names: its catalog entry was lost. Its entries may be
                // all that names its objects, so they are counted and left for `repair`.
                orphans[ids.bucket, default: OrphanKeys()].entries += 1
                continue
            }
            reading = descriptor.name
            guard let definition = descriptor.indexes.first(where: { $0.id == ids.index }) else {
                var problem = ConsistencyProblem(
                    kind: .unknownIndex, bucket: descriptor.name, key: nil, index: "#\(ids.index)",
                    detail: "index entry for an index the catalog does not define")
                if repair { try removeEntry(key); relied.append(key); problem.repaired = true }
                report.problems.append(problem)
                continue
            }
            let split: (tuple: [UInt8], objectKey: String)
            do {
                split = try key.withUnsafeBytes { raw throws -> ([UInt8], String) in
                    let parts = try Keyspace.splitIndexEntry(raw, arity: definition.components.count)
                    return (Array(raw[parts.tuple]), try Keyspace.string(raw, parts.objectKey))
                }
            } catch {
                var problem = ConsistencyProblem(
                    kind: .strayKey, bucket: descriptor.name, key: nil, index: definition.name,
                    detail: "index entry key: \(error)")
                if repair { try removeEntry(key); relied.append(key); problem.repaired = true }
                report.problems.append(problem)
                continue
            }
            let recordKey = Keyspace.recordKey(bucket: descriptor.id, key: split.objectKey)
            let cacheKey = ObjectKeyBytes(recordKey)
            let header: RecordHeader?
            if batchesEntryReads, headers[cacheKey] == nil { try prefetchHeaders(from: key) }
            if let cached = headers[cacheKey] {
                header = cached
            } else {
                do {
                    header = try snapshot.withValue(forKey: recordKey) { value in
                        value.flatMap { try? RecordHeader.parse($0).0 }
                    }
                } catch BuriError.authenticationFailed {
                    header = nil  // a sealed record that does not open: reported with the records
                }
                if headers.count > 4096 {
                    headers.removeAll(keepingCapacity: true)
                    entrySets.removeAll()
                    entrySetsSize = 0
                }
                headers[cacheKey] = .some(header)
            }
            let shown = IndexTuple.describe(split.tuple)
            if header == nil {
                let exists = try snapshot.containsKey(recordKey)
                if exists { continue }  // the record is damaged; reported with the records
                var problem = ConsistencyProblem(
                    kind: .danglingEntry, bucket: descriptor.name, key: split.objectKey, index: definition.name,
                    detail: "entry for value \(shown) points to an object that does not exist")
                if repair { try removeEntry(key); relied.append(key); problem.repaired = true }
                report.problems.append(problem)
                continue
            }
            let entry = RecordHeader.Entry(index: definition.id, tuple: split.tuple)
            let listed: Bool
            if let header, header.entries.count > 16 {
                if let set = entrySets[cacheKey] {
                    listed = set.contains(entry)
                } else {
                    let set = Set(header.entries)
                    if entrySetsSize > 1_000_000 {
                        entrySets.removeAll()
                        entrySetsSize = 0
                    }
                    entrySets[cacheKey] = set
                    entrySetsSize += set.count
                    listed = set.contains(entry)
                }
            } else {
                listed = header?.entries.contains(entry) ?? false
            }
            if !listed {
                var problem = ConsistencyProblem(
                    kind: .staleEntry, bucket: descriptor.name, key: split.objectKey, index: definition.name,
                    detail: "entry for value \(shown) is not among the object's stored index values")
                if repair { try removeEntry(key); relied.append(key); problem.repaired = true }
                report.problems.append(problem)
                continue
            }
            if definition.isUnique {
                if let previous = previousUnique, previous.bucket == descriptor.id, previous.index == definition.id,
                    previous.tuple == split.tuple
                {
                    report.problems.append(
                        ConsistencyProblem(
                            kind: .uniqueConflict, bucket: descriptor.name, key: split.objectKey,
                            index: definition.name,
                            detail: "value \(shown) is also held by '\(previous.key)'"))
                }
                previousUnique = (descriptor.id, definition.id, split.tuple, split.objectKey)
            }
        }

        for key in postings.duplicates ?? [] {
            let ids = key.withUnsafeBytes { Keyspace.bucketAndIndex(ofEntry: $0) }
            let descriptor = ids.flatMap { buckets[$0.bucket] }
            let definition = descriptor?.indexes.first { $0.id == ids?.index }
            let objectKey = definition.flatMap { definition in
                try? key.withUnsafeBytes { raw in
                    let split = try Keyspace.splitIndexEntry(raw, arity: definition.components.count)
                    return String(decoding: raw[split.objectKey], as: UTF8.self)
                }
            }
            var problem = ConsistencyProblem(
                kind: .staleEntry, bucket: descriptor?.name, key: objectKey, index: definition?.name,
                detail:
                    "a text posting is stored both as a single entry and in a segment; `check --repair` cancels the segment's copy"
            )
            if repair, let stamp = try postings.segmentStamp(ofPosting: key, besideASingle: true),
                let tombstone = GroupedPostingsReader.tombstoneKey(ofPosting: key, stamp: stamp, in: postings)
            {
                fixes.put(tombstone, [])
                problem.repaired = true
            }
            report.problems.append(problem)
        }

        // Object counts: each must belong to a bucket in the catalog or a retired id.
        let countKeys = try snapshot.cursor(in: Keyspace.countRange)
        while try countKeys.next() {
            let key = countKeys.key
            if let id = Keyspace.bucket(ofCountKey: key), buckets[id] != nil || retired.contains(id) { continue }
            // A text index's token total: its bucket must keep one for that index (or be retired).
            if let ids = Keyspace.ids(ofTextTotalKey: key) {
                if retired.contains(ids.bucket) || orphans[ids.bucket] != nil { continue }
                if let descriptor = buckets[ids.bucket],
                    descriptor.indexes.contains(where: { $0.id == ids.index && $0.text?.keepsLengths == true })
                {
                    continue
                }
            }
            if let id = Keyspace.bucket(ofCountKey: key), orphans[id] != nil {
                orphans[id]?.count = Keyspace.parseCount(try countKeys.value)
                continue
            }
            var problem = ConsistencyProblem(
                kind: .strayKey, bucket: nil, key: nil, index: nil,
                detail:
                    "object count key \(key.map { String(format2: $0) }.joined(separator: " ")) names no bucket in the catalog"
            )
            if repair { fixes.delete(key); relied.append(key); problem.repaired = true }
            report.problems.append(problem)
        }

        // Named values: each a UTF-8 name holding one CBOR item. Not derived data: never deleted.
        let values = try snapshot.cursor(in: Keyspace.valueRange)
        while try values.next() {
            report.values += 1
            let key = values.key
            let name = Keyspace.valueName(fromValueKey: key)
            let damage: String?
            if name == nil {
                damage =
                    "the key \(key.map { String(format2: $0) }.joined(separator: " ")) holds no valid UTF-8 name; it is kept: read it with a LevelDB tool and delete it if it is not needed"
            } else if try values.withValue({ (try? CBORValue(decoding: $0)) == nil }) {
                damage =
                    "its \((try? values.value.count) ?? 0) stored bytes are not one CBOR item; it is kept: set it again (`buri set-value`) or remove it"
            } else {
                damage = nil
            }
            if let damage {
                report.problems.append(
                    ConsistencyProblem(kind: .corruptValue, bucket: nil, key: name, index: nil, detail: damage))
            }
        }

        // Anything else outside the known spaces.
        reading = nil
        let stray = try snapshot.cursor(in: KeyRange(start: [Keyspace.valueTag + 1]))
        while try stray.next() {
            report.problems.append(
                ConsistencyProblem(
                    kind: .strayKey, bucket: nil, key: nil, index: nil,
                    detail: "key with unknown tag 0x\(String(stray.key.first ?? 0, radix: 16))"))
        }
        let records = try snapshot.cursor(in: .prefix([Keyspace.recordTag]))
        while try records.next() {
            let bucketId = records.withKey { $0.count >= 5 ? Keyspace.readBigEndian($0, at: 1) : UInt32.max }
            if buckets[bucketId] == nil, !retired.contains(bucketId) {
                // Counted, never touched: the records of a bucket whose catalog entry was lost.
                var count = 0
                let orphaned = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: bucketId)))
                while try orphaned.next() { count += 1 }
                orphans[bucketId, default: OrphanKeys()].records = count
            }
            // Each bucket's records were checked above: jump to the next bucket id.
            if bucketId == UInt32.max { break }
            records.seek(Keyspace.recordPrefix(bucket: bucketId + 1))
        }
        for (id, keys) in orphans.sorted(by: { $0.key < $1.key }) {
            var parts: [String] = []
            if keys.records > 0 { parts.append("\(keys.records) record\(keys.records == 1 ? "" : "s")") }
            if keys.entries > 0 { parts.append("\(keys.entries) index entr\(keys.entries == 1 ? "y" : "ies")") }
            if let count = keys.count { parts.append("an object count of \(count.map(String.init) ?? "(damaged)")") }
            let what =
                keys.records > 0
                ? "run `buri repair` (BuriDatabase.repair(path:)) to give the bucket a catalog entry again, rebuilt from its records, so its objects stay reachable"
                : "its records are gone too: run `buri repair` (BuriDatabase.repair(path:)) to name the lost objects from these entries and remove them"
            report.problems.append(
                ConsistencyProblem(
                    kind: .strayKey, bucket: "#\(id)", key: nil, index: nil,
                    detail:
                        "bucket id \(id) has \(parts.joined(separator: ", ")) but no catalog entry (it was lost); they are kept: \(what)"
                ))
        }

        // References (format 5): every entry of a relationship names an object its target holds.
        var byName: [ObjectKeyBytes: UInt32] = [:]
        for descriptor in buckets.values { byName[ObjectKeyBytes(Array(descriptor.name.utf8))] = descriptor.id }
        for descriptor in buckets.values.sorted(by: { $0.id < $1.id }) {
            for index in descriptor.indexes where index.references != nil {
                reading = descriptor.name
                let relationship = Relationship(holder: descriptor, index: index)
                let targetId = byName[ObjectKeyBytes(Array(relationship.target.utf8))]
                for (holderKey, tuple) in try referencesInto(relationship, keys: nil, reader: snapshot) {
                    let target = Self.referencedKey(tuple)
                    let exists = try targetId.map { id in
                        try snapshot.containsKey(
                            Keyspace.recordKey(bucket: id, key: String(decoding: target, as: UTF8.self)))
                    }
                    guard exists != true else { continue }
                    let key = String(decoding: holderKey, as: UTF8.self)
                    let action: String
                    switch relationship.rule {
                    case .nullify: action = "repair takes the reference out (its delete rule is nullify)"
                    case .cascade: action = "repair deletes the object (its delete rule is cascade)"
                    case .deny:
                        action =
                            "its delete rule is deny, so repair leaves it: store '\(String(decoding: target, as: UTF8.self))' again or change the object"
                    }
                    report.problems.append(
                        ConsistencyProblem(
                            kind: .danglingReference, bucket: descriptor.name, key: key, index: index.name,
                            detail:
                                "refers to '\(String(decoding: target, as: UTF8.self))', which bucket '\(relationship.target)' does not hold; \(action)"
                        ))
                    dangling.append(DanglingReference(relationship: relationship, holderKey: holderKey, tuple: tuple))
                }
            }
        }
        reading = nil

        if repair, !fixes.isEmpty {
            // Index entries that are deleted were read in this snapshot; on a shared engine they and
            // the records the fixes relied on must be unchanged when the fixes apply.
            let conditions =
                engine.isShared ? StorageConditions(snapshot: snapshot, keys: relied, ranges: reliedRanges) : nil
            try engine.commit(fixes, conditions: conditions, sync: true)
        }
        progress?(processed)
        return report
    }
}

extension BuriDatabase {
    /// A `wrongIndexValue` problem if the tuples `header` stores for `definition` (a computable
    /// index) are not, as a set, the ones `definition.tuples(of: payload)` computes from the fields.
    fileprivate static func valueProblem(
        _ definition: IndexDefinition, header: RecordHeader, payload: CBORValue,
        bucket: String, key: String
    ) -> ConsistencyProblem? {
        let stored = Set(header.entries.lazy.filter { $0.index == definition.id }.map(\.tuple))
        let fields = (definition.componentPaths ?? []).map(IndexDefinition.fieldPathText).joined(separator: ", ")
        let computed: Set<[UInt8]>
        do {
            computed = Set(try definition.tuples(of: payload).map { definition.stored($0).flatMap(\.encoded) })
        } catch {
            let reason: String
            if case .invalidIndexValue(_, _, _, let text) = error { reason = text } else { reason = error.description }
            return ConsistencyProblem(
                kind: .wrongIndexValue, bucket: bucket, key: key, index: definition.name,
                detail:
                    "its stored index values are (\(describe(stored))), but its field(s) \(fields) cannot be indexed: \(reason)"
            )
        }
        guard computed != stored else { return nil }
        return ConsistencyProblem(
            kind: .wrongIndexValue, bucket: bucket, key: key, index: definition.name,
            detail:
                "its stored index values are (\(describe(stored))), but its field(s) \(fields) give (\(describe(computed))); store the object again (or restore an export) to recompute them"
        )
    }

    /// Tuples as people read them, in byte order: `"EN", 20; "NL", 3`, or `none`.
    private static func describe(_ tuples: Set<[UInt8]>) -> String {
        guard !tuples.isEmpty else { return "none" }
        return tuples.sorted { $0.lexicographicallyPrecedes($1) }.map(IndexTuple.describe).joined(separator: "; ")
    }

    /// Compares the token total stored for text index `index` with the `counted` tokens its
    /// objects' fields give; a missing (for an index with tokens), damaged or wrong total is a
    /// `wrongCount` problem naming both numbers, which repair fixes by writing the number counted.
    fileprivate func checkTextTotal(
        of descriptor: BucketDescriptor, index: IndexDefinition, counted: Int, snapshot: any StorageSnapshot,
        repair: Bool, fixes: any StorageBatch, relied: inout [[UInt8]], reliedRanges: inout [KeyRange],
        report: inout ConsistencyReport
    ) {
        checkStoredNumber(
            Keyspace.textTotalKey(bucket: descriptor.id, index: index.id), of: descriptor, index: index.name,
            counted: counted, what: "token total", unit: "tokens", source: "the objects' fields give",
            snapshot: snapshot, repair: repair, fixes: fixes, relied: &relied, reliedRanges: &reliedRanges,
            report: &report)
    }

    /// Compares bucket `descriptor`'s stored object count with the `counted` record keys the check
    /// walked; a missing (for a bucket with records), damaged or wrong count is a `wrongCount`
    /// problem naming both numbers, which repair fixes by writing the number counted.
    fileprivate func checkCount(
        of descriptor: BucketDescriptor, counted: Int, snapshot: any StorageSnapshot, repair: Bool,
        fixes: any StorageBatch, relied: inout [[UInt8]], reliedRanges: inout [KeyRange],
        report: inout ConsistencyReport
    ) {
        checkStoredNumber(
            Keyspace.countKey(bucket: descriptor.id), of: descriptor, index: nil, counted: counted,
            what: "object count", unit: "records", source: "the bucket holds", snapshot: snapshot, repair: repair,
            fixes: fixes, relied: &relied, reliedRanges: &reliedRanges, report: &report)
    }

    /// Compares the 8-byte number stored under `key` (an object count or a token total) with
    /// `counted`; reports a missing (when `counted` is not 0), damaged, unreadable or wrong one as
    /// `wrongCount`, and with `repair` writes `counted`, relying on the bucket's records.
    private func checkStoredNumber(
        _ key: [UInt8], of descriptor: BucketDescriptor, index: String?, counted: Int, what: String, unit: String,
        source: String, snapshot: any StorageSnapshot, repair: Bool, fixes: any StorageBatch,
        relied: inout [[UInt8]], reliedRanges: inout [KeyRange], report: inout ConsistencyReport
    ) {
        let truth = "\(source) \(counted) \(unit)"
        var detail: String
        do {
            let value = try snapshot.get(key)
            if let value, let stored = Keyspace.parseCount(value) {
                if stored == counted { return }
                detail = "the stored \(what) is \(stored) but \(truth)"
            } else if let value {
                detail = "the stored \(what) is damaged (\(value.count) bytes, not an 8-byte count); \(truth)"
            } else {
                // Absent: nothing counted yet (a bucket no format-4 writer has written, an index
                // without tokens); counted when read.
                if counted == 0 { return }
                detail = "no \(what) is stored; \(truth)"
            }
        } catch {
            detail = "the stored \(what) cannot be read (\(error)); \(truth)"
        }
        if index != nil { detail += "; ranking reads the average document length from it" }
        var problem = ConsistencyProblem(
            kind: .wrongCount, bucket: descriptor.name, key: nil, index: index, detail: detail)
        if repair {
            fixes.put(key, Keyspace.countValue(counted))
            relied.append(key)
            reliedRanges.append(.prefix(Keyspace.recordPrefix(bucket: descriptor.id)))
            problem.repaired = true
        }
        report.problems.append(problem)
    }
}

extension String {
    /// A byte as two hex digits.
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}

/// One record of the consistency check whose index entries are still to be compared: its key, the
/// problems already found in it (reported first, in record order), the entries its header lists,
/// and the values its text indexes' entries must hold.
private struct PendingEntryCheck {
    var objectKey: String
    var problems: [ConsistencyProblem]
    var entries: [RecordHeader.Entry]
    var textValues: [RecordHeader.Entry: [UInt8]]
}

extension BuriDatabase {
    /// Checks that every text index's grouped postings read (`docs/FORMAT.md` §5c), term by term,
    /// before the records are compared with their postings. A term whose segments or tombstones
    /// do not read is reported and read from then on as having no segments, so that each record
    /// listing the term shows its posting missing; repair deletes the term's segments and
    /// tombstones, and the record pass puts every record's posting back as a single entry, with
    /// the positions its field gives. Nothing valid is lost: every posting a record lists is
    /// put back.
    fileprivate func checkSegments(
        buckets: [UInt32: BucketDescriptor], postings: GroupedPostingsReader, snapshot: any StorageReader,
        repair: Bool, fixes: any StorageBatch, report: inout ConsistencyReport
    ) throws {
        guard !engine.isShared else { return }
        for descriptor in buckets.values.sorted(by: { $0.id < $1.id }) {
            for index in descriptor.indexes where index.text?.keepsLengths == true {
                let prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
                let segmentKeys = try snapshot.cursor(in: .prefix(prefix + [GroupedPostingKeys.segmentTag]))
                var last: [UInt8]? = nil
                while try segmentKeys.next() {
                    let key = segmentKeys.key
                    // The term as readers take it: the key without its tier and id.
                    let tupleEnd = key.count - 1 - TextSegment.stampLength
                    guard tupleEnd > prefix.count + 1 else {
                        var problem = ConsistencyProblem(
                            kind: .strayKey, bucket: descriptor.name, key: nil, index: index.name,
                            detail:
                                "a text segment key of \(key.count) bytes names no term; `check --repair` deletes it")
                        if repair {
                            fixes.delete(key)
                            problem.repaired = true
                        }
                        report.problems.append(problem)
                        continue
                    }
                    let termPrefix = Array(key[..<tupleEnd])
                    if termPrefix == last { continue }
                    last = termPrefix
                    let tuple = key[(prefix.count + 1)..<tupleEnd]
                    do {
                        _ = try postings.group(prefix: prefix, tuple: tuple)
                    } catch let error as FormatError {
                        postings.skippedTerms.insert(termPrefix)
                        var problem = ConsistencyProblem(
                            kind: .wrongIndexValue, bucket: descriptor.name, key: nil, index: index.name,
                            detail:
                                "the segments of term \(IndexTuple.describe(Array(tuple))) do not read (\(error)); `check --repair` deletes them and puts each object's posting back from its record"
                        )
                        if repair {
                            try deleteTerm(prefix: prefix, tuple: Array(tuple), snapshot: snapshot, fixes: fixes)
                            problem.repaired = true
                        }
                        report.problems.append(problem)
                    }
                }
            }
        }
    }

    /// Deletes one term's segments (the keys readers take for that term: exactly its length) and,
    /// when the term is one whole index element, its tombstones.
    private func deleteTerm(
        prefix: [UInt8], tuple: [UInt8], snapshot: any StorageReader, fixes: any StorageBatch
    ) throws {
        let segmentPrefix = prefix + [GroupedPostingKeys.segmentTag] + tuple
        let segments = try snapshot.cursor(in: .prefix(segmentPrefix))
        while try segments.next() {
            if segments.withKey({ $0.count }) == segmentPrefix.count + 1 + TextSegment.stampLength {
                segments.withKey { fixes.delete($0) }
            }
        }
        let whole = tuple.withUnsafeBytes { raw in (try? ValueEncoding.elementLength(raw, at: 0)) == tuple.count }
        guard whole else { return }
        let tombstones = try snapshot.cursor(in: .prefix(prefix + [GroupedPostingKeys.tombstoneTag] + tuple))
        while try tombstones.next() { tombstones.withKey { fixes.delete($0) } }
    }
}
