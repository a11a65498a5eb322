import BuriCodec
import BuriStorage

/// Progress of bringing a bucket's stored index entries in line with its declared indexes.
public struct IndexBuildProgress: Sendable {
    /// The bucket being reindexed.
    public var bucket: String
    /// Indexes being built.
    public var building: [String]
    /// Indexes being dropped.
    public var dropping: [String]
    /// Objects processed so far.
    public var processed: Int
    /// Objects in the bucket.
    public var total: Int
}

extension BuriDatabase {
    /// Opens the bucket for `T`, creating it on first use.
    ///
    /// If `T`'s declared indexes differ from those stored in the catalog (added, removed or
    /// redefined — a changed kind, uniqueness or `version`), the stored entries are brought in line
    /// first, in batches of `batchSize` objects: new indexes are built from the objects, removed
    /// ones are deleted. `progress` is called after each batch.
    ///
    /// ```swift
    /// let people = try db.bucket(Person.self)
    /// let archive = try db.bucket(Person.self, named: "people-2025")
    /// ```
    public func bucket<T: BuriSupport>(
        _ type: T.Type = T.self,
        named name: String? = nil,
        batchSize: Int = 1000,
        progress: (@Sendable (IndexBuildProgress) -> Void)? = nil
    ) throws(BuriError) -> Bucket<T> {
        let schema = T.buri
        let bucketName = name ?? schema.bucketName
        try validateBucketName(bucketName)
        try schema.checkDeclarations(bucket: bucketName)
        // A bucket already stored as `T` declares it needs no lock: the common case, and the one
        // that works inside `write { }` too.
        // The generation is read first, so a redefinition racing with this read makes the view stale.
        let generation = catalogGeneration(bucketName)
        if let stored = try bucketInfo(named: bucketName), Self.evolution(of: stored, to: schema).updated == stored {
            return Bucket(raw: RawBucket(database: self, descriptor: stored, generation: generation), schema: schema)
        }
        // On a shared engine another client may create or change the bucket at the same moment:
        // the catalog commit is conditional on the catalog being as read, and a conflict reads again.
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try openOrEvolve(schema, bucketName: bucketName, batchSize: batchSize, progress: progress)
            } catch .storage(let error) where error.code == .conflict && attempt < max(1, options.maxCommitAttempts) {
                continue
            }
        }
    }

    private func openOrEvolve<T: BuriSupport>(
        _ schema: BuriSchema<T>, bucketName: String, batchSize: Int, progress: (@Sendable (IndexBuildProgress) -> Void)?
    ) throws(BuriError) -> Bucket<T> {
        try withWriteLock { () throws(BuriError) -> Bucket<T> in
            let seen: (any StorageSnapshot)? = engine.isShared ? try run { try engine.snapshot() } : nil
            let stored = try bucketInfo(named: bucketName)
            var descriptor: BucketDescriptor
            if let stored {
                descriptor = stored
            } else {
                let reader: any StorageReader = if let seen { seen } else { try currentReader() }
                descriptor = BucketDescriptor(
                    id: try nextBucketId(reader: reader), name: bucketName, keyField: schema.keyField)
            }
            let (updated, toBuild, dropped) = Self.evolution(of: descriptor, to: schema)
            try validate(updated)

            if stored != nil, !(toBuild.isEmpty && dropped.isEmpty) {
                let building = RawBucket(database: self, descriptor: updated)
                let bucket = Bucket<T>(raw: building, schema: schema)
                try reindex(
                    bucket: bucket, from: descriptor, building: toBuild, dropping: dropped,
                    batchSize: max(1, batchSize), progress: progress)
            }
            if stored != updated {
                let batch = engine.makeBatch()
                try saveDescriptor(updated, into: batch)
                // A new bucket's id is given for good (docs/FORMAT.md §6a), in the same commit.
                if stored == nil { batch.put(Keyspace.bucketIdsKey, Keyspace.bucketIdsValue(updated.id)) }
                let conditions = seen.map {
                    StorageConditions(snapshot: $0, keys: [Keyspace.bucketIdsKey], ranges: [Keyspace.catalogRange])
                }
                try commitEvolution(batch, conditions: conditions, sync: true)
                descriptor = updated
            }
            return Bucket(raw: RawBucket(database: self, descriptor: descriptor), schema: schema)
        }
    }

    /// The descriptor `schema` asks for, given the stored one: kept indexes keep their ids, new or
    /// redefined ones get fresh ids (to build), and stored ones not declared any more are dropped.
    static func evolution<T: BuriSupport>(
        of descriptor: BucketDescriptor, to schema: BuriSchema<T>
    )
        -> (updated: BucketDescriptor, toBuild: [IndexDefinition], dropped: [IndexDefinition])
    {
        var kept: [IndexDefinition] = []
        var toBuild: [IndexDefinition] = []
        var nextId = descriptor.nextIndexId
        for index in schema.indexes {
            var wanted = index.definition
            if var existing = descriptor.indexes.first(where: { $0.hasSameShape(as: wanted) }) {
                // How tools read the values follows the declaration; the entries stay as they are.
                existing.fields = wanted.fields
                existing.fieldPaths = wanted.fieldPaths
                existing.fieldForms = wanted.fieldForms
                existing.computed = wanted.computed
                // A relationship's target and rule change no entry: the catalog follows the declaration.
                existing.references = wanted.references
                existing.onDelete = wanted.onDelete
                kept.append(existing)
            } else {
                wanted.id = nextId
                nextId += 1
                toBuild.append(wanted)
            }
        }
        let keptIds = Set(kept.map(\.id))
        let dropped = descriptor.indexes.filter { !keptIds.contains($0.id) }
        var updated = descriptor
        updated.indexes = schema.indexes.compactMap { index in
            (kept + toBuild).first { $0.name.hasSameBytes(as: index.name) }
        }
        updated.nextIndexId = nextId
        updated.schemaVersion = UInt64(max(0, schema.schemaVersion))
        let declared = schema.migrations.filter { $0.from >= 0 }
        updated.migrations =
            declared.isEmpty ? nil : declared.map { StoredMigration(from: UInt64($0.from), steps: $0.steps) }
        if updated.keyField == nil { updated.keyField = schema.keyField }
        return (updated, toBuild, dropped)
    }

    /// Rewrites every record's header (and index entries) for the new index set. Callers hold the write lock.
    private func reindex<T: BuriSupport>(
        bucket: Bucket<T>, from old: BucketDescriptor, building: [IndexDefinition], dropping: [IndexDefinition],
        batchSize: Int, progress: (@Sendable (IndexBuildProgress) -> Void)?
    ) throws(BuriError) {
        let raw = bucket.raw
        let buildIds = Set(building.map(\.id))
        let dropIds = Set(dropping.map(\.id))
        // Building an index decodes every object (a wrong type, a NaN, a repeated unique value
        // fails it). Find out before writing anything, so a failed build leaves the bucket as it was.
        if !buildIds.isEmpty { try validateBuild(bucket: bucket, from: old, building: building) }
        try run(bucket: old.name) {
            // Clear the spaces of dropped indexes and any leftovers of an interrupted earlier build.
            for id in dropIds.union(buildIds) {
                var batch = engine.makeBatch()
                let cursor = try engine.latest().cursor(in: .prefix(Keyspace.indexPrefix(bucket: old.id, index: id)))
                while try cursor.next() {
                    cursor.withKey { batch.delete($0) }
                    if batch.count >= batchSize * 4 {
                        try commitEvolution(batch, sync: false)
                        batch = engine.makeBatch()
                    }
                }
                try commitEvolution(batch, sync: false)
            }
            // Their token totals start again from nothing (format 7).
            let totals = engine.makeBatch()
            for id in dropIds.union(buildIds) { totals.delete(Keyspace.textTotalKey(bucket: old.id, index: id)) }
            try commitEvolution(totals, sync: false)
        }
        /// Built text indexes that keep a token total: each batch adds its objects' lengths.
        let lengthIds = building.filter { $0.text?.keepsLengths == true }.map(\.id)
        let total = try raw.count()
        var report = IndexBuildProgress(
            bucket: old.name, building: building.map(\.name), dropping: dropping.map(\.name), processed: 0, total: total
        )
        var resumeAfter: [UInt8]? = nil
        while true {
            var range = KeyRange.prefix(raw.recordPrefix)
            if let resumeAfter { range.start = resumeAfter + [0] }
            let batch = engine.makeBatch()
            var processed = 0
            var lastKey: [UInt8]? = nil
            var tokens = [Int](repeating: 0, count: lengthIds.count)
            try run(bucket: old.name) {
                let cursor = try engine.latest().cursor(in: range)
                while processed < batchSize, try cursor.next() {
                    let recordKey = cursor.key
                    let key = try cursor.withKey { raw throws -> String in
                        do { return try Keyspace.objectKey(fromRecordKey: raw) } catch {
                            throw BuriError.corruption(
                                bucket: old.name, key: nil, index: nil, reason: "record key: \(error)")
                        }
                    }
                    let rewritten = try cursor.withValue { value throws -> [UInt8] in
                        let header: RecordHeader
                        let offset: Int
                        do { (header, offset) = try RecordHeader.parse(value) } catch {
                            throw BuriError.corruption(
                                bucket: old.name, key: key, index: nil, reason: "record header: \(error)")
                        }
                        var entries = header.entries.filter {
                            !dropIds.contains($0.index) && !buildIds.contains($0.index)
                        }
                        if !buildIds.isEmpty {
                            let object = try bucket.decode(
                                UnsafeRawBufferPointer(rebasing: value[offset...]), version: header.schemaVersion,
                                key: key)
                            let fresh = try bucket.prepare(object)
                            for (position, entry) in fresh.header.entries.enumerated()
                            where buildIds.contains(entry.index) {
                                entries.append(entry)
                                batch.put(raw.entryKey(entry, objectKey: key), fresh.value(at: position))
                            }
                            for (slot, index) in lengthIds.enumerated() {
                                tokens[slot] += RawBucket.documentLength(of: fresh, index: index)
                            }
                        }
                        var out: [UInt8] = []
                        // The payload stays as stored, so entries derived from it still are.
                        let derived = header.derived.filter {
                            !dropIds.contains($0.index) && !buildIds.contains($0.index)
                        }
                        // Text postings of kept indexes stay where they are (in segments, for stamped ones);
                        // built ones are put as entries of their own just above.
                        let stamps = header.textStamps.filter {
                            !dropIds.contains($0.index) && !buildIds.contains($0.index)
                        }
                        RecordHeader(
                            schemaVersion: header.schemaVersion, entries: entries, derived: derived, textStamps: stamps
                        ).append(to: &out)
                        out.append(contentsOf: value[offset...])
                        return out
                    }
                    batch.put(recordKey, rewritten)
                    processed += 1
                    lastKey = recordKey
                }
            }
            if processed == 0 { break }
            for (index, added) in zip(lengthIds, tokens) where added != 0 {
                let id = TextTotalId(bucket: old.id, index: index)
                let before = try storedTextTotal(of: id, bucket: old.name, reader: try run { try engine.latest() }) ?? 0
                batch.put(Keyspace.textTotalKey(bucket: old.id, index: index), Keyspace.countValue(before + added))
            }
            try commitEvolution(batch, sync: false)
            report.processed += processed
            progress?(report)
            resumeAfter = lastKey
        }
        if buildIds.isEmpty == false || dropIds.isEmpty == false {
            // Unique indexes built over existing data must actually be unique.
            for definition in building where definition.isUnique {
                try verifyUnique(raw: raw, index: definition)
            }
        }
    }

    /// Decodes every object of the bucket and computes its entries for the indexes being built,
    /// writing nothing; throws what the build would throw (including a unique value held twice).
    private func validateBuild<T: BuriSupport>(
        bucket: Bucket<T>, from old: BucketDescriptor, building: [IndexDefinition]
    ) throws(BuriError) {
        let uniqueIds = Set(building.filter(\.isUnique).map(\.id))
        let buildIds = Set(building.map(\.id))
        var claimed: [RecordHeader.Entry: String] = [:]
        try run(bucket: old.name) {
            let cursor = try engine.latest().cursor(in: .prefix(bucket.raw.recordPrefix))
            while try cursor.next() {
                let key = try cursor.withKey { raw throws -> String in
                    do { return try Keyspace.objectKey(fromRecordKey: raw) } catch {
                        throw BuriError.corruption(
                            bucket: old.name, key: nil, index: nil, reason: "record key: \(error)")
                    }
                }
                let entries = try cursor.withValue { value throws -> [RecordHeader.Entry] in
                    let parsed: (header: RecordHeader, offset: Int)
                    do {
                        let (header, offset) = try RecordHeader.parse(value)
                        parsed = (header, offset)
                    } catch {
                        throw BuriError.corruption(
                            bucket: old.name, key: key, index: nil, reason: "record header: \(error)")
                    }
                    let object = try bucket.decode(
                        UnsafeRawBufferPointer(rebasing: value[parsed.offset...]), version: parsed.header.schemaVersion,
                        key: key)
                    return try bucket.prepare(object).header.entries.filter { buildIds.contains($0.index) }
                }
                for entry in entries where uniqueIds.contains(entry.index) {
                    if let holder = claimed.updateValue(key, forKey: entry) {
                        let index = building.first { $0.id == entry.index }?.name ?? "#\(entry.index)"
                        throw BuriError.uniqueViolation(
                            bucket: old.name, index: index,
                            value: IndexTuple.describe(entry.tuple),
                            holder: "\(holder)' and '\(key)")
                    }
                }
            }
        }
    }

    private func verifyUnique(raw: RawBucket, index: IndexDefinition) throws(BuriError) {
        try raw.run {
            let cursor = try engine.latest().cursor(
                in: .prefix(Keyspace.indexPrefix(bucket: raw.descriptor.id, index: index.id)))
            var previous: (tuple: [UInt8], key: String)? = nil
            while try cursor.next() {
                let (tuple, key) = try cursor.withKey { bytes throws -> ([UInt8], String) in
                    let parts = try Keyspace.splitIndexEntry(bytes, arity: index.components.count)
                    return (Array(bytes[parts.tuple]), try Keyspace.string(bytes, parts.objectKey))
                }
                if let previous, previous.tuple == tuple {
                    throw BuriError.uniqueViolation(
                        bucket: raw.name, index: index.name,
                        value: IndexTuple.describe(tuple),
                        holder: "\(previous.key)' and '\(key)")
                }
                previous = (tuple, key)
            }
        }
    }

    /// Commits one step of an index rebuild. Each step stands alone (a rebuild is resumable, not
    /// atomic: see docs/DURABILITY.md), so no conditions are sent.
    private func commitEvolution(
        _ batch: any StorageBatch, conditions: StorageConditions? = nil, sync: Bool
    ) throws(BuriError) {
        guard !batch.isEmpty else { return }
        try run { try commit(batch, conditions: conditions, sync: sync) }
    }
}

extension RawBucket {
    /// The first (or last) value of an index's first component, from the index alone.
    func extremeValue(index name: String, last: Bool) throws(BuriError) -> IndexValue? {
        guard let index = descriptor.index(named: name) else {
            throw .unknownIndex(bucket: self.name, index: name, known: descriptor.indexes.map(\.name))
        }
        let (reader, bucket) = try readView()
        return try run {
            let cursor = try reader.cursor(
                in: .prefix(Keyspace.indexPrefix(bucket: bucket.bucketId, index: index.id)), reverse: last)
            guard try cursor.next() else { return nil }
            return try cursor.withKey { raw throws -> IndexValue in
                do {
                    let length = try ValueEncoding.elementLength(raw, at: Keyspace.indexPrefixLength)
                    return IndexValue(
                        encoded: Array(raw[Keyspace.indexPrefixLength..<(Keyspace.indexPrefixLength + length)]))
                } catch {
                    throw BuriError.corruption(
                        bucket: self.name, key: nil, index: name, reason: "index entry: \(error)")
                }
            }
        }
    }
}
