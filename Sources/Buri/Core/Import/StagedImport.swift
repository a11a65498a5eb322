import BuriStorage
import Synchronization

/// An import into a bucket staged under a fresh bucket id that no catalog entry names yet, and
/// published with one catalog commit: until ``publish(progress:)``, the bucket and its readers see
/// nothing of it; after, they see all of it. Memory stays bounded by the chunks given to ``store(_:)``.
///
/// Staging into an existing bucket starts with a copy of its objects (so the import merges into
/// them, as storing them directly would); staging a bucket that does not exist yet
/// (``BuriDatabase/stageImport(creating:keyField:indexes:schemaVersion:)``) changes no catalog
/// entry at all: publishing creates the bucket. Each chunk is then stored into the stage with the
/// bucket's indexes, unique ones checked against everything staged so far. The stage's id has a
/// durable marker (`docs/FORMAT.md` §6a): if the process ends before publishing, the next open
/// purges it, and the database is exactly as before (a bucket being created does not exist).
///
/// ```swift
/// let load = try db.stageImport(into: "Person")
/// for chunk in chunks { try load.store(chunk) }
/// try load.publish()     // or load.abandon()
/// ```
/// Use it from one thread at a time.
public final class StagedImport {
    /// The bucket being loaded.
    public let bucket: String
    let database: BuriDatabase
    /// The bucket's catalog entry when staging began; nil when publishing creates the bucket.
    let base: BucketDescriptor?
    /// The state the bucket was copied from (nil for a new bucket).
    private var baseSnapshot: (any StorageSnapshot)?
    /// The view writing into the stage.
    let stage: RawBucket
    private var finished = false
    /// Whether ``publish(progress:)`` committed (the stage's id is then the bucket's).
    private var published = false
    /// The objects copied from the bucket when staging began.
    private(set) var copied = 0
    /// The objects given to ``store(_:)`` so far (a key given twice counts twice).
    private(set) var given = 0
    /// The bucket's objects the copy found staged already, exactly as it would have written them,
    /// and kept (a stage an earlier process began, or brought up to date).
    private(set) var kept = 0

    /// The work publishing does that grows with the data, reported as it goes.
    public struct PublishProgress: Sendable, Hashable {
        public enum Phase: String, Sendable, Hashable {
            /// Reading the staged object count (the number `publish` returns; one key per stage).
            case counting
            /// Checking, under the write lock, that an existing bucket still holds exactly the
            /// objects the stage was copied from (so no write is lost by publishing).
            case verifying
        }
        public var phase: Phase
        /// Objects done in this phase.
        public var done: Int
        /// Objects this phase walks at most: exact for `verifying`; for `counting`, the objects
        /// copied and stored (keys given twice make it larger than the count).
        public var total: Int
    }

    /// The lease the stage's marker names as its owner (a shared engine's; `nil` elsewhere).
    let owner: UInt64?

    init(
        database: BuriDatabase, base: BucketDescriptor?, definition: BucketDescriptor, snapshot: (any StorageSnapshot)?,
        owner: UInt64?
    ) {
        self.database = database
        self.base = base
        self.owner = owner
        bucket = definition.name
        baseSnapshot = snapshot
        stage = RawBucket(
            database: database, descriptor: definition, pinned: true,
            stagingMarker: (
                Keyspace.retiredKey(bucket: definition.id),
                Keyspace.retiredValue(.staging, bucket: definition.name, owner: owner)
            ))
    }

    /// The stage's bucket id.
    public var stageId: UInt32 { stage.madeDescriptor.id }

    /// Whether publishing creates the bucket (it did not exist when staging began).
    public var createsBucket: Bool { base == nil }

    /// Stores a chunk of objects into the stage, replacing staged objects of the same keys (as
    /// ``RawBucket/store(_:sync:)`` does). Unique indexes are checked against everything staged.
    ///
    /// A chunk the engine refuses as too large for one commit (an etcd cluster's `--max-txn-ops`
    /// or `--max-request-bytes`) is stored in smaller commits, halved until they fit, in order:
    /// nobody sees the stage before it is published, so its commits need not be the caller's
    /// chunks, and the import stays atomic. Only one object whose record and index entries exceed
    /// the limit on their own is refused.
    /// - Throws: ``BuriError/uniqueViolation(bucket:index:value:holder:)`` and the errors of
    ///   `store`. After an error, abandon the import: a chunk stored in several commits may be
    ///   partly staged (earlier chunks stay staged).
    public func store(_ objects: [RawObject]) throws(BuriError) {
        try checkActive()
        var start = 0
        while start < objects.count {
            let end = min(objects.count, start + (fittingChunk ?? objects.count))
            try storeFitting(objects[start..<end])
            start = end
        }
        given += objects.count
    }

    /// The most objects one commit into the stage has been found to hold, once a larger one was
    /// refused as over the engine's limits (nil: no refusal yet).
    private var fittingChunk: Int?

    private func storeFitting(_ objects: ArraySlice<RawObject>) throws(BuriError) {
        do {
            try stage.store(Array(objects), sync: false)
        } catch let error where isOverLimit(error) && objects.count > 1 {
            let half = objects.count / 2
            fittingChunk = min(fittingChunk ?? half, half)
            try storeFitting(objects.prefix(half))
            try storeFitting(objects.dropFirst(half))
        }
    }

    /// The number of objects staged so far (the copy included).
    public func stagedCount() throws(BuriError) -> Int { try stage.count() }

    /// Copies the bucket's objects as they were in the snapshot staging began from (or the last
    /// ``resync(chunkSize:progress:)`` took) into the stage, `chunkSize` objects (with their index
    /// entries) per commit, calling `progress` with the number of the bucket's objects done so far.
    /// A commit the engine refuses as over its limits (etcd's `--max-txn-ops`,
    /// `--max-request-bytes`) is made again with half as many objects, until it fits: the copy's
    /// commit size never grows with the bucket.
    ///
    /// The copy is a merge of the bucket with what the stage holds already, so it also brings a
    /// stage up to date, or finishes one an earlier process began (online encryption after a kill):
    /// a staged record that is exactly what copying the bucket's would write (and sealed, where the
    /// stage seals) is kept (counted in ``kept``); one that differs is replaced, with its index
    /// entries; one the bucket does not hold is deleted with its entries. The stage's object count
    /// and token totals move in the same commits.
    func copyBase(chunkSize: Int, progress: ((Int) -> Void)?) throws(BuriError) {
        guard let snapshot = baseSnapshot, let base else { return }
        let stageId = self.stageId
        let stage = self.stage
        let marker = stage.stagingMarker
        let bucket = self.bucket
        var fitting = max(1, chunkSize)
        // A stage with an owner commits only while the owner's lease holds (its key, read in the
        // snapshot, is every commit's condition).
        let ownership: StorageConditions?
        if let owner {
            try database.requireStageOwnership(owner, stage: stageId, bucket: bucket, reader: snapshot)
            ownership = StorageConditions(snapshot: snapshot, keys: [Keyspace.leaseKey(owner)])
        } else {
            ownership = nil
        }
        let owner = self.owner
        try database.run(bucket: bucket) {
            let cursor = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: base.id)))
            // What the stage holds already (nothing, unless it is brought up to date or adopted).
            let staged = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: stageId)))
            var stagedMore = try staged.next()
            var baseMore = true
            var done = 0
            /// Objects kept since the last report (a long run of them is reported as batches are).
            var keptSinceReport = 0
            /// The changes not committed yet, one per object.
            var pending: [StageChange] = []
            /// Text indexes keeping token totals (format 7), and the stage's totals so far.
            let lengthIds = base.indexes.filter { $0.text?.keepsLengths == true }.map(\.id)
            var count = try snapshot.get(Keyspace.countKey(bucket: stageId)).flatMap(Keyspace.parseCount) ?? 0
            var totals: [Int] = try lengthIds.map { index in
                try snapshot.get(Keyspace.textTotalKey(bucket: stageId, index: index)).flatMap(Keyspace.parseCount)
                    ?? 0
            }
            // Text indexes' entries carry the term's positions (docs/FORMAT.md §9a): recomputed from
            // each record's payload, as every other writer does, so the copy is never a bare key.
            // The stage's indexes, which store keyed tokens where the bucket's are private.
            let textIndexes = stage.madeDescriptor.indexes.filter { $0.text != nil }
            // A bucket still holding plaintext values in a database being encrypted: its private
            // indexes' values (text terms too) become their tokens in the copy, record headers included.
            let tokenizing: [UInt32: IndexDefinition] =
                base.plaintextValues == true
                ? Dictionary(
                    stage.madeDescriptor.indexes.filter(\.isPrivate).map { ($0.id, $0) },
                    uniquingKeysWith: { first, _ in first })
                : [:]
            // Where the stage seals its records, a staged record kept must be stored sealed.
            let sealing = database.isEncrypted && stage.madeDescriptor.plaintextValues != true
            /// The change taking out the staged record under `staged` (its entries, its tokens,
            /// itself); the cursor moves on.
            func takeOutStaged() throws -> (objectKey: String, change: StageChange) {
                let objectKey = try staged.withKey { try Keyspace.objectKey(fromRecordKey: $0) }
                let value = try staged.value
                // The stored bytes' first one says whether the stage holds it sealed.
                let sealed = try (staged as? SealedCursor)?.base.withValue { isSealedValueMarker($0.first) } ?? true
                let header: RecordHeader
                do { header = try value.withUnsafeBytes { raw in try RecordHeader.parse(raw) }.0 } catch {
                    throw BuriError.corruption(
                        bucket: bucket, key: objectKey, index: nil,
                        reason: "staged record: \(error); nothing was imported (run `buri check`)")
                }
                var change = StageChange(count: -1, tokens: [])
                // Its postings in segments are cancelled by tombstones, the rest deleted.
                let removal = KeyCollectingBatch()
                stage.removeEntries(of: header, objectKey: Array(objectKey.utf8), key: objectKey, batch: removal)
                change.deletes = removal.deletes
                change.puts = removal.puts
                change.deletes.append(Keyspace.recordKey(bucket: stageId, key: objectKey))
                change.tokens = try lengthIds.map { index in
                    try -stage.storedDocumentLength(header, index: index, key: objectKey, reader: snapshot)
                }
                change.staged = (value, sealed)
                stagedMore = try staged.next()
                return (objectKey, change)
            }
            while baseMore || stagedMore || !pending.isEmpty {
                while pending.count < fitting {
                    guard baseMore, try cursor.next() else {
                        // The staged objects after the bucket's last: it does not hold them.
                        baseMore = false
                        guard stagedMore else { break }
                        pending.append(try takeOutStaged().change)
                        continue
                    }
                    var value = try cursor.value
                    let objectKey = try cursor.withKey { try Keyspace.objectKey(fromRecordKey: $0) }
                    // Staged objects before this one: the bucket does not hold them.
                    var replaced: StageChange?
                    while stagedMore {
                        let order = staged.withKey { stagedKey in
                            orderOfBytes(
                                UnsafeRawBufferPointer(rebasing: stagedKey[Keyspace.recordPrefixLength...]),
                                objectKey.utf8)
                        }
                        if order > 0 { break }
                        let (_, change) = try takeOutStaged()
                        if order == 0 {
                            replaced = change
                            break
                        }
                        pending.append(change)
                    }
                    var header: RecordHeader
                    var entryValues: [RecordHeader.Entry: [UInt8]] = [:]
                    do {
                        var payloadOffset: Int
                        (header, payloadOffset) = try value.withUnsafeBytes { raw in try RecordHeader.parse(raw) }
                        // The copy puts every entry as an entry of its own: a header saying its text
                        // postings are in segments says so no more.
                        if !tokenizing.isEmpty || !header.textStamps.isEmpty {
                            header.textStamps = []
                            header.entries = header.entries.map { entry in
                                guard let index = tokenizing[entry.index] else { return entry }
                                return RecordHeader.Entry(index: entry.index, tuple: index.stored(encoded: entry.tuple))
                            }
                            var rewritten: [UInt8] = []
                            header.append(to: &rewritten)
                            let headerLength = rewritten.count
                            rewritten.append(contentsOf: value[payloadOffset...])
                            value = rewritten
                            payloadOffset = headerLength
                        }
                        if let staged = replaced?.staged, staged.value == value, staged.sealed || !sealing {
                            // Staged already, exactly as this copy would write it: kept.
                            kept += 1
                            done += 1
                            keptSinceReport += 1
                            if keptSinceReport >= fitting {
                                keptSinceReport = 0
                                copied = done
                                progress?(done)
                            }
                            continue
                        }
                        if !textIndexes.isEmpty {
                            let payload = try value.withUnsafeBytes { raw in
                                try CBORValue(decoding: UnsafeRawBufferPointer(rebasing: raw[payloadOffset...]))
                            }
                            for index in textIndexes {
                                for (tuple, positions) in try index.textEntries(of: payload, bucket: bucket) {
                                    let stored = index.stored(encoded: tuple)
                                    entryValues[RecordHeader.Entry(index: index.id, tuple: stored)] = positions
                                }
                            }
                        }
                    } catch {
                        throw BuriError.corruption(
                            bucket: bucket, key: objectKey, index: nil,
                            reason: "record: \(error); nothing was imported (run `buri check` first)")
                    }
                    var change = replaced ?? StageChange(count: 0, tokens: lengthIds.map { _ in 0 })
                    change.count += 1
                    change.objects = 1
                    for (slot, index) in lengthIds.enumerated() {
                        change.tokens[slot] +=
                            header.entries.first { $0.index == index }.map { entry in
                                (entryValues[entry] ?? []).withUnsafeBytes { RawBucket.documentLength($0) }
                            } ?? 0
                    }
                    change.puts.append((Keyspace.recordKey(bucket: stageId, key: objectKey), value))
                    for entry in header.entries {
                        change.puts.append(
                            (
                                Keyspace.indexEntryKey(
                                    bucket: stageId, index: entry.index, tuple: entry.tuple, objectKey: objectKey),
                                entryValues[entry] ?? []
                            ))
                    }
                    if !change.deletes.isEmpty {
                        // A key both taken out and put is only put (one commit may not name a key twice).
                        let put = Set(change.puts.map(\.key))
                        change.deletes.removeAll { put.contains($0) }
                    }
                    pending.append(change)
                }
                if pending.isEmpty { break }
                let inBatch = min(fitting, pending.count)
                let batch = database.engine.makeBatch()
                var newCount = count
                var newTotals = totals
                for change in pending[..<inBatch] {
                    for key in change.deletes { batch.delete(key) }
                    for (key, value) in change.puts { batch.put(key, value) }
                    newCount += change.count
                    for slot in newTotals.indices { newTotals[slot] += change.tokens[slot] }
                }
                if let marker { batch.put(marker.key, marker.value) }
                // The stage's object count, kept with the records it counts (format 4).
                batch.put(Keyspace.countKey(bucket: stageId), Keyspace.countValue(newCount))
                for (index, total) in zip(lengthIds, newTotals) {
                    batch.put(Keyspace.textTotalKey(bucket: stageId, index: index), Keyspace.countValue(total))
                }
                do {
                    try database.withWriteLock { () throws(BuriError) in
                        try database.run { try database.commit(batch, conditions: ownership, sync: false) }
                    }
                } catch let error where isOverLimit(error) && inBatch > 1 {
                    fitting = max(1, inBatch / 2)
                    continue
                } catch let error where isConflict(error) {
                    guard let owner else { throw error }
                    // The only condition: the owner's lease key, gone now.
                    throw database.lapsedStage(stage: stageId, bucket: bucket, owner: owner)
                }
                done += pending[..<inBatch].reduce(0) { $0 + $1.objects }
                pending.removeFirst(inBatch)
                count = newCount
                totals = newTotals
                keptSinceReport = 0
                copied = done
                progress?(done)
            }
            copied = done
            if keptSinceReport > 0 { progress?(done) }
        }
    }

    /// Brings the stage up to date with the bucket as it is now: a copy from a new snapshot that
    /// keeps what is staged already and changes only what the bucket's writes since changed (see
    /// ``copyBase(chunkSize:progress:)``). Publishing then compares the bucket with this snapshot.
    func resync(chunkSize: Int, progress: ((Int) -> Void)?) throws(BuriError) {
        try checkActive()
        kept = 0
        baseSnapshot = try database.run { try database.engine.snapshot() }
        try copyBase(chunkSize: chunkSize, progress: progress)
    }

    /// Publishes the stage in one commit (see ``BuriDatabase/publish(_:progress:)``, which
    /// publishes several at once): the bucket's catalog entry names the stage's id (or, for a new
    /// bucket, is created), and a generation it replaces is purged in the background. Returns the
    /// number of objects the bucket now holds.
    ///
    /// Publishing reads the staged object count (one key) and, for an existing bucket, compares
    /// the bucket with the state it was copied from, which takes time proportional to the data,
    /// reported to `progress`. The commit itself writes a fixed number of keys.
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` if the bucket was written, redefined or
    ///   dropped since staging began, or, for a new bucket, if a bucket of that name was created
    ///   meanwhile (the stage is then purged and the bucket left as it is: run the import again).
    @discardableResult
    public func publish(progress: ((PublishProgress) -> Void)? = nil) throws(BuriError) -> Int {
        try database.publish([self], progress: progress).first ?? 0
    }

    /// The number of staged objects: the stage's object count, kept in the same batches as its
    /// records (format 4), so reading it is one key whatever the size of the stage.
    func countStaged(offset: Int, total: Int, progress: ((PublishProgress) -> Void)?) throws(BuriError) -> Int {
        let count = try stage.count()
        progress?(PublishProgress(phase: .counting, done: offset + count, total: max(total, offset + count)))
        return count
    }

    /// Puts this stage's publication into `writer`'s batch, after checking the bucket is as staging
    /// found it. Callers hold the write lock.
    func addPublication(
        to writer: Writer, verified: Int, total: Int, progress: ((PublishProgress) -> Void)?
    ) throws(BuriError) -> Int {
        let stageId = self.stageId
        try database.requireStageOwnership(owner, stage: stageId, bucket: bucket, reader: writer.reader)
        let stored = try database.bucketInfo(named: bucket, reader: writer.reader)
        guard let base else {
            if stored != nil {
                throw .conflict(
                    attempts: 1,
                    detail:
                        "bucket '\(bucket)' was created by another writer while the import was staging it; nothing was imported: run the import again (it adds to the bucket now there)"
                )
            }
            writer.batch.delete(Keyspace.retiredKey(bucket: stageId))
            try database.saveDescriptor(stage.madeDescriptor, into: writer.batch)
            return 0
        }
        guard let snapshot = baseSnapshot else {
            throw .invalidTransaction(reason: "the staged import of '\(bucket)' has ended")
        }
        guard let stored, stored == base else {
            throw .conflict(
                attempts: 1,
                detail:
                    "bucket '\(bucket)' was redefined or dropped since the import began staging; nothing was imported, run it again"
            )
        }
        let compared = try sameRange(.prefix(Keyspace.recordPrefix(bucket: base.id)), snapshot, writer.reader) { done in
            progress?(PublishProgress(phase: .verifying, done: verified + done, total: total))
        }
        guard let compared else {
            throw .conflict(
                attempts: 1,
                detail:
                    "bucket '\(bucket)' was written since the import began staging; nothing was imported, run it again")
        }
        // On a shared engine the walk's range is a condition of the commit, which sees keys put
        // in it meanwhile but not keys deleted (etcd compares keys that exist). A delete changes
        // the bucket's object count, so reading the count key makes one more condition — a fixed
        // number of conditions, whatever the size of the bucket.
        _ = try database.run { try writer.reader.get(Keyspace.countKey(bucket: base.id)) }
        writer.batch.delete(Keyspace.retiredKey(bucket: stageId))
        try database.retire(
            stored, replacingWith: stageId, writer: writer, sealing: stage.madeDescriptor.plaintextValues != true)
        return compared
    }

    /// Marks the stage published.
    func didPublish() {
        finished = true
        published = true
        baseSnapshot = nil
    }

    /// Ends the import without publishing it: the stage is purged in the background. Idempotent.
    public func abandon() {
        let first = !finished
        finished = true
        baseSnapshot = nil
        guard first else { return }
        let stageId = self.stageId
        let owner = self.owner
        try? database.performWrite(sync: false) { writer throws(BuriError) in
            // A stage whose lease ended may be another client's now (taken up): left as it is,
            // for that client, or for whoever purges abandoned stages.
            try database.requireStageOwnership(owner, stage: stageId, bucket: bucket, reader: writer.reader)
            writer.batch.put(Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.purging, bucket: bucket))
            writer.afterCommit { [database] in if database.options.purgesInBackground { database.purger.kick(database) }
            }
        }
    }

    /// Ends the import without publishing it and deletes the stage now, on the calling thread: its
    /// records, index entries, object count and marker are gone when this returns, and the key
    /// ranges they held are compacted (their space given back), so the database is exactly as it
    /// was before staging began. Use it before ending a process (a tool's failed import); an app
    /// that goes on running may ``abandon()`` instead and let the background purge do it.
    ///
    /// ```swift
    /// do { try load.store(chunk) } catch { try? load.discard(); throw error }
    /// ```
    /// - Throws: the storage error that stopped the purge; the stage is then marked for purging,
    ///   and the next open (or ``BuriDatabase/purgeRetiredBuckets()``) deletes the rest.
    public func discard() throws(BuriError) {
        guard !published else { return }
        abandon()
        try database.checkOpen()
        try database.purgeNow(bucket: stageId)
    }

    func checkActive() throws(BuriError) {
        if finished {
            throw .invalidTransaction(reason: "the staged import of '\(bucket)' has been published or abandoned")
        }
    }

    /// The number of keys `range` holds in both readers if it holds the same keys and values in
    /// both, nil if not (streamed, bounded memory), calling `progress` every 10,000 keys.
    private func sameRange(
        _ range: KeyRange, _ a: any StorageReader, _ b: any StorageReader, progress: (Int) -> Void
    ) throws(BuriError) -> Int? {
        try database.run(bucket: bucket) {
            let left = try a.cursor(in: range)
            let right = try b.cursor(in: range)
            var count = 0
            while true {
                let l = try left.next()
                let r = try right.next()
                if l != r { return nil }
                if !l { return count }
                if try left.key != right.key || left.value != right.value { return nil }
                count += 1
                if count % 10_000 == 0 { progress(count) }
            }
        }
    }
}

extension BuriDatabase {
    /// Begins a staged import into existing bucket `name` (see ``StagedImport``): reserves a fresh
    /// bucket id with a durable staging marker, and copies the bucket's objects into it,
    /// `chunkSize` per commit, calling `progress` with the number copied. If the copy fails, what
    /// it copied is deleted before the error is thrown.
    ///
    /// ```swift
    /// let load = try db.stageImport(into: "Person")
    /// try load.store(objects)
    /// try load.publish()
    /// ```
    /// - Throws: ``BuriError/unknownBucket(name:known:)`` if there is no such bucket.
    public func stageImport(
        into name: String, chunkSize: Int = 1_000, progress: ((Int) -> Void)? = nil
    ) throws(BuriError) -> StagedImport {
        let owner = try stageOwner()
        let load = try performWrite(sync: true) { writer throws(BuriError) -> StagedImport in
            guard let base = try bucketInfo(named: name, reader: writer.reader) else {
                throw .unknownBucket(name: name, known: try bucketNames(reader: writer.reader))
            }
            // Not recorded as given (docs/FORMAT.md §6a): a stage is seen by no handle, and a failed
            // import leaves every key as it was; once published, the catalog names the id.
            let stageId = try nextBucketId(reader: writer.reader)
            // Not conditioned on the lease: a marker naming an owner already gone is an abandoned
            // stage (purged by whoever looks), and the stage's first write checks the lease.
            writer.batch.put(
                Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.staging, bucket: name, owner: owner))
            // Under the writer lock, so the snapshot is the state the stage starts from.
            let snapshot = try run { try engine.snapshot() }
            var definition = base
            definition.id = stageId
            // Staged into a bucket that still holds plaintext (online encryption), the copy is sealed.
            if isEncrypted { definition.plaintextValues = nil }
            return StagedImport(database: self, base: base, definition: definition, snapshot: snapshot, owner: owner)
        }
        do {
            try load.copyBase(chunkSize: max(1, chunkSize), progress: progress)
        } catch {
            // The chunks copied so far are deleted now (the caller has no stage to discard).
            do { try load.discard() } catch { load.abandon() }
            throw error
        }
        return load
    }

    /// Begins a staged import that creates bucket `name`, which must not exist yet: the bucket is
    /// defined as ``createBucket(named:keyField:indexes:schemaVersion:)`` would define it, but the
    /// definition stays with the stage (in memory) and no catalog entry is written until
    /// ``StagedImport/publish(progress:)`` creates the bucket in its one commit. If the import is
    /// abandoned, fails or its process ends, no bucket of that name appears (the stage's keys are
    /// purged, at the next open after a crash).
    ///
    /// ```swift
    /// let load = try db.stageImport(creating: "Person", keyField: "objectId",
    ///                               indexes: [IndexDefinition(id: 0, name: "age", components: [.numeric])])
    /// try load.store(objects)
    /// try load.publish()     // Person exists from this commit on
    /// ```
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` if the bucket exists (stage into it with
    ///   ``stageImport(into:chunkSize:progress:)``), ``BuriError/invalidBucketName(name:reason:)``
    ///   and ``BuriError/invalidIndexDefinition(bucket:index:reason:)`` for a bad definition.
    public func stageImport(
        creating name: String, keyField: String? = nil, indexes: [IndexDefinition] = [], schemaVersion: UInt64 = 0
    ) throws(BuriError) -> StagedImport {
        try validateBucketName(name)
        let owner = try stageOwner()
        return try performWrite(sync: true) { writer throws(BuriError) -> StagedImport in
            if try bucketInfo(named: name, reader: writer.reader) != nil {
                throw .conflict(
                    attempts: 1,
                    detail: "bucket '\(name)' already exists; stage an import into it instead of creating it")
            }
            // Not recorded as given (docs/FORMAT.md §6a): a stage is seen by no handle, and a failed
            // import leaves every key as it was; once published, the catalog names the id.
            let stageId = try nextBucketId(reader: writer.reader)
            var definition = BucketDescriptor(id: stageId, name: name, keyField: keyField, schemaVersion: schemaVersion)
            for var index in indexes {
                index.id = definition.nextIndexId
                definition.nextIndexId += 1
                definition.indexes.append(index)
            }
            try validate(definition)
            // Not conditioned on the lease: a marker naming an owner already gone is an abandoned
            // stage (purged by whoever looks), and the stage's first write checks the lease.
            writer.batch.put(
                Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.staging, bucket: name, owner: owner))
            return StagedImport(database: self, base: nil, definition: definition, snapshot: nil, owner: owner)
        }
    }

    /// Publishes staged imports of different buckets in **one commit**: every bucket switches to
    /// (or, if new, is created with) its staged objects at once, or — on any conflict — none does
    /// and every stage is purged. Returns each bucket's object count, in order.
    ///
    /// Before the commit, each stage's object count is read (one key); under the write lock, each
    /// existing bucket is compared with the state it was copied from, walking it once and reporting
    /// to `progress`; the commit itself writes a few keys per bucket.
    ///
    /// ```swift
    /// let people = try db.stageImport(creating: "Person")
    /// let notes = try db.stageImport(creating: "Note")
    /// try people.store(somePeople); try notes.store(someNotes)
    /// try db.publish([people, notes])
    /// ```
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` as ``StagedImport/publish(progress:)``
    ///   does; ``BuriError/invalidTransaction(reason:)`` for an import already ended, of another
    ///   database, or two imports of one bucket. Every stage given is purged after an error.
    @discardableResult
    public func publish(
        _ imports: [StagedImport], progress: ((StagedImport.PublishProgress) -> Void)? = nil
    ) throws(BuriError) -> [Int] {
        try publish(imports, values: [], progress: progress)
    }

    /// ``publish(_:progress:)``, setting the named values `values` (CBOR items, checked as
    /// ``NamedValues/setCBOR(_:for:sync:)`` checks them) in the same commit: `buri restore`.
    package func publish(
        _ imports: [StagedImport], values: [(name: String, bytes: [UInt8])],
        progress: ((StagedImport.PublishProgress) -> Void)?, abandoningOnError: Bool = true
    ) throws(BuriError) -> [Int] {
        do throws(BuriError) {
            for (name, bytes) in values { try NamedValues.validate(name, cbor: bytes) }
            var names = Set<[UInt8]>()
            for load in imports {
                try load.checkActive()
                if load.database !== self {
                    throw BuriError.invalidTransaction(
                        reason: "the staged import of '\(load.bucket)' belongs to another database")
                }
                if !names.insert(Array(load.bucket.utf8)).inserted {
                    throw BuriError.invalidTransaction(
                        reason:
                            "two staged imports of bucket '\(load.bucket)' cannot be published together; nothing was imported"
                    )
                }
            }
            let bound = imports.reduce(0) { $0 + $1.copied + $1.given }
            progress?(StagedImport.PublishProgress(phase: .counting, done: 0, total: bound))
            var counts: [Int] = []
            for load in imports {
                let counted = counts.reduce(0, +)
                counts.append(try load.countStaged(offset: counted, total: bound, progress: progress))
            }
            let total = counts.reduce(0, +)
            progress?(StagedImport.PublishProgress(phase: .counting, done: total, total: total))
            let toVerify = imports.reduce(0) { $0 + ($1.base == nil ? 0 : $1.copied) }
            try performWrite(sync: true) { writer throws(BuriError) in
                progress?(StagedImport.PublishProgress(phase: .verifying, done: 0, total: toVerify))
                var verified = 0
                for load in imports {
                    verified += try load.addPublication(
                        to: writer, verified: verified, total: toVerify, progress: progress)
                }
                progress?(StagedImport.PublishProgress(phase: .verifying, done: verified, total: verified))
                for (name, bytes) in values { writer.batch.put(Keyspace.valueKey(name: name), bytes) }
            }
            for load in imports { load.didPublish() }
            return counts
        } catch {
            if abandoningOnError { for load in imports { load.abandon() } }
            throw error
        }
    }
}

/// One object's part of a commit into a stage.
private struct StageChange {
    var puts: [(key: [UInt8], value: [UInt8])] = []
    var deletes: [[UInt8]] = []
    /// How the stage's object count and text token totals move.
    var count: Int
    var tokens: [Int]
    /// The bucket's objects it accounts for (0 for a staged object taken out).
    var objects = 0
    /// The staged record it takes out, as read, and whether it was stored sealed.
    var staged: (value: [UInt8], sealed: Bool)?
}

/// How the bytes `a` order against `b`: negative, zero or positive.
private func orderOfBytes(_ a: UnsafeRawBufferPointer, _ b: String.UTF8View) -> Int {
    var right = b.makeIterator()
    for byte in a {
        guard let other = right.next() else { return 1 }
        if byte != other { return byte < other ? -1 : 1 }
    }
    return right.next() == nil ? 0 : -1
}

/// Whether `error` is an engine's refusal of a commit whose conditions no longer held.
private func isConflict(_ error: any Error) -> Bool {
    if let error = error as? BuriError {
        if case .storage(let storage) = error { return storage.code == .conflict }
        if case .conflict = error { return true }
    }
    if let error = error as? StorageError { return error.code == .conflict }
    return false
}

/// Whether `error` is an engine's refusal of a commit over its limits (nothing was written).
private func isOverLimit(_ error: any Error) -> Bool {
    if let error = error as? BuriError, case .storage(let storage) = error { return storage.code == .limitExceeded }
    if let error = error as? StorageError { return error.code == .limitExceeded }
    return false
}

/// A batch that only collects what is put and deleted, for a caller that applies them later.
private final class KeyCollectingBatch: StorageBatch {
    var puts: [(key: [UInt8], value: [UInt8])] = []
    var deletes: [[UInt8]] = []
    func put(_ key: [UInt8], _ value: [UInt8]) { puts.append((key, value)) }
    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) { puts.append((Array(key), Array(value))) }
    func delete(_ key: [UInt8]) { deletes.append(key) }
    func delete(_ key: UnsafeRawBufferPointer) { deletes.append(Array(key)) }
    var count: Int { puts.count + deletes.count }
    var byteSize: Int { puts.reduce(0) { $0 + $1.key.count + $1.value.count } + deletes.reduce(0) { $0 + $1.count } }
}
