import BuriStorage
import Synchronization

/// An import into a bucket staged under a fresh bucket id that no catalog entry names yet, and
/// published with one catalog commit: until ``publish()``, the bucket and its readers see nothing
/// of it; after, they see all of it. Memory stays bounded by the chunks given to ``store(_:)``.
///
/// Staging starts with a copy of the bucket's objects (so the import merges into them, as storing
/// them directly would); each chunk is then stored into the stage with the bucket's indexes,
/// unique ones checked against everything staged so far. The stage's id has a durable marker
/// (`docs/FORMAT.md` §6a): if the process ends before publishing, the next open purges it, and the
/// bucket is exactly as before.
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
    /// The bucket's catalog entry when staging began.
    let base: BucketDescriptor
    /// The state the bucket was copied from.
    private var baseSnapshot: (any StorageSnapshot)?
    /// The view writing into the stage.
    let stage: RawBucket
    private var finished = false

    init(database: BuriDatabase, base: BucketDescriptor, stageId: UInt32, snapshot: any StorageSnapshot) {
        self.database = database
        self.base = base
        bucket = base.name
        baseSnapshot = snapshot
        var staged = base
        staged.id = stageId
        stage = RawBucket(database: database, descriptor: staged, pinned: true,
                          stagingMarker: (Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.staging, bucket: base.name)))
    }

    /// The stage's bucket id.
    public var stageId: UInt32 { stage.madeDescriptor.id }

    /// Stores a chunk of objects into the stage, replacing staged objects of the same keys (as
    /// ``RawBucket/store(_:sync:)`` does). Unique indexes are checked against everything staged.
    /// - Throws: ``BuriError/uniqueViolation(bucket:index:value:holder:)`` and the errors of
    ///   `store`; nothing of the chunk is staged then (earlier chunks stay staged).
    public func store(_ objects: [RawObject]) throws(BuriError) {
        try checkActive()
        try stage.store(objects, sync: false)
    }

    /// The number of objects staged so far (the copy included).
    public func stagedCount() throws(BuriError) -> Int { try stage.count() }

    /// Copies the bucket's objects as they were when staging began into the stage, `chunkSize`
    /// records (with their index entries) per commit, calling `progress` with the number copied.
    func copyBase(chunkSize: Int, progress: ((Int) -> Void)?) throws(BuriError) {
        guard let snapshot = baseSnapshot else { return }
        let stageId = self.stageId
        let marker = stage.stagingMarker
        try database.run(bucket: bucket) {
            let cursor = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: base.id)))
            var copied = 0
            var more = true
            while more {
                let batch = database.engine.makeBatch()
                var inBatch = 0
                while inBatch < chunkSize {
                    guard try cursor.next() else { more = false; break }
                    let (key, value) = (cursor.key, cursor.value)
                    let objectKey = try key.withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) }
                    let header: RecordHeader
                    do {
                        header = try value.withUnsafeBytes { raw in try RecordHeader.parse(raw).0 }
                    } catch {
                        throw BuriError.corruption(bucket: bucket, key: objectKey, index: nil, reason: "record header: \(error); nothing was imported (run `buri check` first)")
                    }
                    batch.put(Keyspace.recordKey(bucket: stageId, key: objectKey), value)
                    for entry in header.entries {
                        batch.put(Keyspace.indexEntryKey(bucket: stageId, index: entry.index, tuple: entry.tuple, objectKey: objectKey), [])
                    }
                    inBatch += 1
                }
                if inBatch > 0 {
                    if let marker { batch.put(marker.key, marker.value) }
                    // The stage's object count, kept with the records it counts (format 4).
                    batch.put(Keyspace.countKey(bucket: stageId), Keyspace.countValue(copied + inBatch))
                    try database.withWriteLock { () throws(BuriError) in
                        try database.run { try database.commit(batch, conditions: nil, sync: false) }
                    }
                    copied += inBatch
                    progress?(copied)
                }
            }
        }
    }

    /// Publishes the stage in one commit: the bucket's catalog entry names the stage's id, and the
    /// generation it replaces is purged in the background. Returns the number of objects the
    /// bucket now holds.
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` if the bucket was written, redefined or
    ///   dropped since staging began (the stage is then purged and the bucket left as it is: run
    ///   the import again).
    @discardableResult
    public func publish() throws(BuriError) -> Int {
        try checkActive()
        guard let snapshot = baseSnapshot else { throw .invalidTransaction(reason: "the staged import of '\(bucket)' has ended") }
        let stageId = self.stageId
        let count = try stage.count()
        do {
            try database.performWrite(sync: true) { writer throws(BuriError) in
                guard let stored = try database.bucketInfo(named: bucket, reader: writer.reader), stored == base else {
                    throw .conflict(attempts: 1, detail: "bucket '\(bucket)' was redefined or dropped since the import began staging; nothing was imported, run it again")
                }
                if try !sameRange(.prefix(Keyspace.recordPrefix(bucket: base.id)), snapshot, writer.reader) {
                    throw .conflict(attempts: 1, detail: "bucket '\(bucket)' was written since the import began staging; nothing was imported, run it again")
                }
                writer.batch.delete(Keyspace.retiredKey(bucket: stageId))
                try database.retire(stored, replacingWith: stageId, writer: writer)
            }
        } catch {
            abandon()
            throw error
        }
        finished = true
        baseSnapshot = nil
        return count
    }

    /// Ends the import without publishing it: the stage is purged in the background. Idempotent.
    public func abandon() {
        let first = !finished
        finished = true
        baseSnapshot = nil
        guard first else { return }
        let stageId = self.stageId
        try? database.performWrite(sync: false) { writer throws(BuriError) in
            writer.batch.put(Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.purging, bucket: bucket))
            writer.afterCommit { [database] in if database.options.purgesInBackground { database.purger.kick(database) } }
        }
    }

    private func checkActive() throws(BuriError) {
        if finished { throw .invalidTransaction(reason: "the staged import of '\(bucket)' has been published or abandoned") }
    }

    /// Whether `range` holds the same keys and values in both readers (streamed, bounded memory).
    private func sameRange(_ range: KeyRange, _ a: any StorageReader, _ b: any StorageReader) throws(BuriError) -> Bool {
        try database.run(bucket: bucket) {
            let left = try a.cursor(in: range)
            let right = try b.cursor(in: range)
            while true {
                let l = try left.next()
                let r = try right.next()
                if l != r { return false }
                if !l { return true }
                if left.key != right.key || left.value != right.value { return false }
            }
        }
    }
}

extension BuriDatabase {
    /// Begins a staged import into existing bucket `name` (see ``StagedImport``): reserves a fresh
    /// bucket id with a durable staging marker, and copies the bucket's objects into it,
    /// `chunkSize` per commit, calling `progress` with the number copied.
    ///
    /// ```swift
    /// let load = try db.stageImport(into: "Person")
    /// try load.store(objects)
    /// try load.publish()
    /// ```
    /// - Throws: ``BuriError/unknownBucket(name:known:)`` if there is no such bucket.
    public func stageImport(into name: String, chunkSize: Int = 1_000, progress: ((Int) -> Void)? = nil) throws(BuriError) -> StagedImport {
        let load = try performWrite(sync: true) { writer throws(BuriError) -> StagedImport in
            guard let base = try bucketInfo(named: name, reader: writer.reader) else {
                throw .unknownBucket(name: name, known: try bucketNames(reader: writer.reader))
            }
            let stageId = try nextBucketId(reader: writer.reader)
            writer.batch.put(Keyspace.retiredKey(bucket: stageId), Keyspace.retiredValue(.staging, bucket: name))
            // Under the writer lock, so the snapshot is the state the stage starts from.
            let snapshot = try run { try engine.snapshot() }
            return StagedImport(database: self, base: base, stageId: stageId, snapshot: snapshot)
        }
        do {
            try load.copyBase(chunkSize: max(1, chunkSize), progress: progress)
        } catch {
            load.abandon()
            throw error
        }
        return load
    }
}
