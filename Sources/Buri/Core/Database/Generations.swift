import BuriStorage
import Dispatch
import Synchronization

/// Where each bucket id retired by a generation switch in this process went: the id that
/// replaced it. A ``RawBucket`` made before a switch follows these forwards to the bucket's current
/// id, so handles keep working after `deleteAll` (see `docs/FORMAT.md` §6a).
///
/// Forwards are learned from this process's own switches (after they commit) and from commits the
/// change hub observes (another client's switch on a shared engine, while anything observes).
final class BucketGenerations: Sendable {
    /// Where a dropped bucket's id is forwarded: no bucket has id 0 (ids start at 1), so a handle
    /// that resolves to it knows its bucket is gone and refuses to read.
    static let dropped: UInt32 = 0
    /// Moves on with every forward learned, so a handle notices with one atomic load.
    let epoch = Atomic<UInt32>(0)
    private let forwards = Mutex<[UInt32: UInt32]>([:])

    /// Records that `old` was replaced by `new`.
    func forward(_ old: UInt32, to new: UInt32) {
        forwards.withLock { forwards in
            guard forwards[old] != new else { return }
            forwards[old] = new
            epoch.add(1, ordering: .releasing)
        }
    }

    /// The id `id` leads to after every forward learned (itself when it was never retired here).
    func resolve(_ id: UInt32) -> UInt32 {
        forwards.withLock { forwards in
            var current = id
            var steps = 0
            while let next = forwards[current], steps <= forwards.count {
                current = next
                steps += 1
            }
            return current
        }
    }

    /// The largest id a forward names, so that no new bucket takes an id a handle may still follow.
    var largestId: UInt32 {
        forwards.withLock { forwards in forwards.reduce(0) { max($0, $1.key, $1.value) } }
    }
}

/// A bucket id whose keys belong to no catalog entry on purpose: a generation replaced by
/// `deleteAll` (or by an import's publish) waiting to be purged, or an import being staged.
///
/// ```swift
/// for purge in try db.pendingPurges() { print(purge.bucket, purge.id, purge.state) }
/// ```
public struct RetiredBucket: Sendable, Hashable {
    /// What is to happen to the keys under the id.
    public enum State: String, Sendable, Hashable {
        /// Replaced; its records and index entries are being deleted in the background.
        case purging
        /// Being loaded by an import that has not published it (purged if it never does).
        case staging
    }

    /// The bucket id.
    public var id: UInt32
    /// The bucket the id belonged (or is to belong) to.
    public var bucket: String
    public var state: State
    /// A stage's owner on a shared engine (format 12): the lease of the client loading it. Once
    /// that lease has ended (the client closed or died), other clients purge the stage, or take
    /// it up (an online encryption's copy). `nil` for a purge, and for every stage on an engine
    /// only one process writes to, where a stage found at open was always left by a process that ended.
    public var owner: UInt64? = nil
}

/// The background purge of retired bucket ids: one job at a time on its own queue, in chunks.
final class Purger: Sendable {
    private struct State {
        var running = false
        var wanted = false
        var stopped = false
        /// Staging ids found at open: loads that never published (their process ended).
        var abandonedStages: Set<UInt32> = []
        /// Staging ids found at open of a database being encrypted, of buckets still holding
        /// plaintext: copies an online encryption began, which ``BuriDatabase/finishEncryption(batchSize:progress:)``
        /// takes up where they ended rather than copying the bucket again. Kept out of the purge.
        var resumableStages: [UInt32: [UInt8]] = [:]
        var lastError: BuriError?
    }

    private let state = Mutex(State())
    private let group = DispatchGroup()
    private let queue = DispatchQueue(label: "buri.purge", qos: .utility)
    /// Keys deleted per chunk; halved when an engine refuses a batch that large (etcd's max-txn-ops).
    let chunkSize = Atomic<Int>(1_000)
    /// Held by each chunk from its snapshot to its commit, so that the background pass and a
    /// purge on the calling thread (``BuriDatabase/purgeRetiredBuckets()``) never interleave: a
    /// chunk that saw the marker before another deleted it would write it back.
    let chunkLock = Mutex<Void>(())

    func abandon(_ stages: [UInt32]) { state.withLock { $0.abandonedStages.formUnion(stages) } }
    func keepResumable(_ stages: [(id: UInt32, bucket: [UInt8])]) {
        state.withLock { state in for stage in stages { state.resumableStages[stage.id] = stage.bucket } }
    }
    /// The resumable stages of bucket `name` (by its bytes), lowest id first, no longer resumable.
    func takeResumable(bucket name: [UInt8]?) -> [UInt32] {
        state.withLock { state in
            let ids = state.resumableStages.filter { name == nil || $0.value == name }.keys.sorted()
            for id in ids { state.resumableStages[id] = nil }
            return ids
        }
    }
    func isAbandoned(_ id: UInt32) -> Bool { state.withLock { $0.abandonedStages.contains(id) } }
    var lastError: BuriError? { state.withLock { $0.lastError } }

    /// Makes sure a purge pass runs soon (another pass if one is running now).
    func kick(_ database: BuriDatabase) {
        let start = state.withLock { state -> Bool in
            if state.stopped { return false }
            state.wanted = true
            if state.running { return false }
            state.running = true
            group.enter()
            return true
        }
        guard start else { return }
        queue.async { [self] in
            while true {
                let go = state.withLock { state -> Bool in
                    if state.stopped || !state.wanted {
                        state.running = false
                        return false
                    }
                    state.wanted = false
                    return true
                }
                guard go else { break }
                do throws(BuriError) {
                    try database.purgeRetired { self.state.withLock { $0.stopped } }
                } catch {
                    state.withLock { $0.lastError = error }
                }
            }
            group.leave()
        }
    }

    /// Waits until no pass runs (one kicked before this call has finished).
    func waitUntilIdle() { group.wait() }

    /// Stops after the chunk in progress and waits for it; nothing is started afterwards.
    func stop() {
        state.withLock { $0.stopped = true }
        group.wait()
    }
}

extension BuriDatabase {
    /// The retired bucket ids of the database: generations waiting to be purged and imports being
    /// staged (see ``RetiredBucket``). `buri check` lists them.
    ///
    /// ```swift
    /// try people.deleteAll()
    /// print(try db.pendingPurges().count)   // 1 until the background purge finishes
    /// ```
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` for a marker that does not parse.
    public func pendingPurges() throws(BuriError) -> [RetiredBucket] {
        try retiredBuckets(reader: currentReader())
    }

    func retiredBuckets(reader: any StorageReader) throws(BuriError) -> [RetiredBucket] {
        try run {
            var result: [RetiredBucket] = []
            let cursor = try reader.cursor(in: Keyspace.retiredRange)
            while try cursor.next() {
                guard let marker = Keyspace.parseRetired(key: cursor.key, value: try cursor.value) else {
                    throw BuriError.corruption(
                        bucket: nil, key: nil, index: nil,
                        reason:
                            "a retired bucket id marker (key \(cursor.key.map { String($0, radix: 16) }.joined(separator: " "))) does not parse; run `buri check` on a copy and report it"
                    )
                }
                result.append(
                    RetiredBucket(
                        id: marker.bucket, bucket: marker.name, state: marker.state == .purging ? .purging : .staging,
                        owner: marker.owner))
            }
            return result
        }
    }

    /// Purges every retired generation now, on the calling thread, and returns when none is left
    /// (staged imports of live loads are left alone), then compacts the key ranges it emptied so
    /// that their space is given back (on LevelDB; other engines have nothing to compact). The
    /// background purge deletes the same keys on its own, leaving the space to LevelDB's own
    /// compactions; this is for tools and tests that want the space back before going on (every
    /// `buri` command that writes runs it when it opens a database).
    ///
    /// ```swift
    /// try people.deleteAll()
    /// try db.purgeRetiredBuckets()
    /// ```
    public func purgeRetiredBuckets() throws(BuriError) {
        try checkOpen()
        let purged = try purgeRetired { false }
        try compactPurged(purged)
    }

    /// Compacts the record, index and count keys of each purged id (LevelDB drops deleted keys
    /// only when it rewrites the files holding them).
    func compactPurged(_ ids: [UInt32]) throws(BuriError) {
        for id in Set(ids).sorted() {
            try run {
                for range in [
                    KeyRange.prefix(Keyspace.recordPrefix(bucket: id)), .prefix(Keyspace.indexSpacePrefix(bucket: id)),
                    .prefix(Keyspace.countKey(bucket: id)), .prefix(Keyspace.retiredKey(bucket: id)),
                ] {
                    try engine.compact(range)
                }
            }
        }
    }

    /// One pass: every purgeable id, chunk by chunk, until done or `shouldStop()`. Returns the ids
    /// it finished purging.
    @discardableResult
    func purgeRetired(shouldStop: () -> Bool) throws(BuriError) -> [UInt32] {
        var purged: [UInt32] = []
        while !shouldStop() {
            guard let next = try purgeableBuckets().first else { return purged }
            while !shouldStop() {
                if try purgeChunk(bucket: next.id) {
                    purged.append(next.id)
                    break
                }
            }
        }
        return purged
    }

    /// Purges the keys under retired id `bucket` now, on the calling thread, whatever its marker's
    /// state (an abandoned stage of this process), then compacts their range. Returns when they are
    /// gone; the marker goes with the last of them.
    func purgeNow(bucket: UInt32) throws(BuriError) {
        while try !purgeChunk(bucket: bucket, force: true) {}
        try compactPurged([bucket])
    }

    /// Deletes up to one chunk of keys under retired id `bucket`; with the last of them, its marker.
    /// Returns whether the id is purged. Keys under a retired id are never written again, so the
    /// chunks need no lock against writers; a chunk that meets a marker no longer there does nothing.
    func purgeChunk(bucket: UInt32, force: Bool = false) throws(BuriError) -> Bool {
        try run {
            try purger.chunkLock.withLock { _ in try purgeChunkLocked(bucket: bucket, force: force) }
        }
    }

    private func purgeChunkLocked(bucket: UInt32, force: Bool) throws -> Bool {
        while true {
            let limit = max(3, chunkLimit)
            let snapshot = try engine.snapshot()
            let markerKey = Keyspace.retiredKey(bucket: bucket)
            guard let value = try snapshot.get(markerKey),
                let marker = Keyspace.parseRetired(key: markerKey, value: value)
            else { return true }
            let retired = RetiredBucket(
                id: bucket, bucket: marker.name, state: marker.state == .purging ? .purging : .staging,
                owner: marker.owner)
            guard try isPurgeable(retired, reader: snapshot, force: force) else { return true }
            // On a shared engine: the marker as read, and (a stage) its owner's lease key still gone.
            var relied = [markerKey]
            if let owner = marker.owner, marker.state == .staging { relied.append(Keyspace.leaseKey(owner)) }
            let batch = engine.makeBatch()
            var count = 0
            for range in [
                KeyRange.prefix(Keyspace.recordPrefix(bucket: bucket)),
                .prefix(Keyspace.indexSpacePrefix(bucket: bucket)), Keyspace.textTotalRange(bucket: bucket),
            ] {
                let cursor = try snapshot.cursor(in: range)
                while count < limit - 2, try cursor.next() {
                    cursor.withKey { batch.delete($0) }
                    count += 1
                }
            }
            let finished = count < limit - 2
            // The marker is in every chunk (rewritten, or deleted with the last keys), so
            // observers know the chunk's deletes for what they are (see `ParsedCommit`). A stage's
            // marker becomes a purge's in the first chunk: a stage partly purged is never taken
            // up again (an online encryption's resumed copy would start from a count and totals
            // that no longer match what is left). The id's object count (format 4) goes with the
            // marker: nothing is left under the id.
            if finished {
                batch.delete(markerKey)
                batch.delete(Keyspace.countKey(bucket: bucket))
            } else {
                batch.put(markerKey, Keyspace.retiredValue(.purging, bucket: marker.name))
            }
            do {
                try engine.commit(
                    batch, conditions: engine.isShared ? StorageConditions(snapshot: snapshot, keys: relied) : nil,
                    sync: false)
            } catch let error as StorageError where error.code == .limitExceeded && limit > 3 {
                purger.chunkSize.store(limit / 2, ordering: .relaxed)
                continue
            } catch let error as StorageError where error.code == .conflict {
                continue  // another client purged or changed the marker: look again
            }
            return finished
        }
    }

    private var chunkLimit: Int { purger.chunkSize.load(ordering: .relaxed) }

    /// Starts the background purge if anything is retired (at open; staging ids found then belong
    /// to loads that ended without publishing).
    func resumePurges() throws(BuriError) {
        let retired = try retiredBuckets(reader: currentReader())
        guard !retired.isEmpty else { return }
        // On a shared engine another client may be staging right now: only its own open finds it abandoned.
        if !engine.isShared {
            var stages = retired.filter { $0.state == .staging }
            if plaintextPhase?.isActive == true, !stages.isEmpty {
                // An online encryption's copy of a bucket still holding plaintext goes on from where it ended.
                let plaintext = Set(
                    try allBucketInfo(reader: currentReader()).filter { $0.plaintextValues == true }.map {
                        Array($0.name.utf8)
                    })
                let resumable = stages.filter { plaintext.contains(Array($0.bucket.utf8)) }
                purger.keepResumable(resumable.map { ($0.id, Array($0.bucket.utf8)) })
                stages.removeAll { plaintext.contains(Array($0.bucket.utf8)) }
            }
            purger.abandon(stages.map(\.id))
        }
        if options.purgesInBackground { purger.kick(self) }
    }
}

extension BuriDatabase {
    /// Puts into `writer`'s batch the switch of bucket `stored` to generation `newId`: its catalog
    /// entry names the new id (nothing else changes, so views stay valid), and the old id gets a
    /// purge marker. Once committed, views here follow the new id and the purge starts.
    func retire(
        _ stored: BucketDescriptor, replacingWith newId: UInt32, writer: Writer, sealing: Bool = false
    ) throws(BuriError) {
        // The lineage (`originId`) stays, so continuation tokens of the bucket go on working.
        var next = stored.movedTo(newId)
        // A sealed copy of a bucket that held plaintext (online encryption) stores tokens.
        if sealing { next.plaintextValues = nil }
        let bytes: [UInt8]
        do {
            bytes = try next.encoded()
        } catch {
            throw .encodingFailed(bucket: stored.name, key: "(catalog)", reason: String(describing: error))
        }
        writer.batch.put(Keyspace.catalogKey(bucket: stored.name), bytes)
        writer.batch.put(Keyspace.retiredKey(bucket: stored.id), Keyspace.retiredValue(.purging, bucket: stored.name))
        writer.afterCommit { [self] in
            // Views made while the bucket held plaintext follow it into a generation of tokens.
            if next.plaintextValues != true { plaintextPhase?.markSealed(newId) }
            generations.forward(stored.id, to: newId)
            if options.purgesInBackground { purger.kick(self) }
        }
    }
}
