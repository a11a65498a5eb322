import BuriStorage
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The lease a handle of a shared engine stages under (`docs/FORMAT.md` §6a, format 12).
///
/// On an engine only one process writes to, a stage found at open was left by a process that
/// ended: it is purged, or taken up by an online encryption. On a shared engine (etcd) another
/// client may be loading it right now, so every stage marker there names its owner: a lease of
/// the engine, whose key (`00 "lease" u64be(id)`) exists while the owner lives and renews it. A
/// stage whose owner's lease key is gone is abandoned; any client may purge it or take it up, and
/// every commit into a stage reads its owner's lease key, so it applies only while that lease holds.
final class StageLease: Sendable {
    private struct State {
        var lease: (any StorageLease)?
        var closed = false
    }
    private let state = Mutex(State())

    /// The lease held now, granted on first use (again if the last one ended); `nil` on an engine
    /// that is not shared. (Granting is two requests to the cluster, made under this lock: stages
    /// of one handle begin one at a time.)
    func current(_ engine: any StorageEngine) throws -> (any StorageLease)? {
        guard engine.isShared else { return nil }
        let (lease, ended) = try state.withLock { state throws -> ((any StorageLease)?, (any StorageLease)?) in
            if state.closed {
                throw StorageError(code: .databaseClosed, message: "call made after close()", location: engine.location)
            }
            if let held = state.lease, held.isHeld { return (held, nil) }
            let ended = state.lease
            state.lease = try engine.grantLease { Keyspace.leaseKey($0) }
            return (state.lease, ended)
        }
        // One the engine found ended: stop renewing it (outside the lock: a request).
        ended?.release()
        return lease
    }

    /// Forgets lease `id` if it is the one held, found ended: the next stage gets a new one. Its
    /// renewal stops in the background (its revocation is a request, and the caller may hold the
    /// writer lock).
    func forget(_ id: UInt64) {
        let ended = state.withLock { state -> (any StorageLease)? in
            guard let current = state.lease, current.id == id else { return nil }
            state.lease = nil
            return current
        }
        guard let ended else { return }
        DispatchQueue.global(qos: .utility).async { ended.release() }
    }

    /// Releases the lease (its key is deleted: stages left unpublished are abandoned); no lease is
    /// granted afterwards.
    func release() {
        let held = state.withLock { state -> (any StorageLease)? in
            defer {
                state.lease = nil
                state.closed = true
            }
            return state.lease
        }
        held?.release()
    }
}

extension BuriDatabase {
    /// Whether the client that owns stage `stage` (a ``RetiredBucket`` of state `staging` with an
    /// ``RetiredBucket/owner``, on a shared engine) still holds its lease: `true` while it lives,
    /// `false` once it closed or died (the stage is then abandoned: purged by the next client that
    /// purges, or taken up by an online encryption). `nil` for a purge or a stage without an owner.
    ///
    /// ```swift
    /// for stage in try db.pendingPurges() where try db.stageOwnerIsAlive(stage) == false {
    ///     print("abandoned import of \(stage.bucket)")
    /// }
    /// ```
    public func stageOwnerIsAlive(_ stage: RetiredBucket) throws(BuriError) -> Bool? {
        guard stage.state == .staging, let owner = stage.owner else { return nil }
        return try leaseHolds(owner)
    }

    /// Whether lease `owner`'s key exists now.
    func leaseHolds(_ owner: UInt64) throws(BuriError) -> Bool {
        let reader = try currentReader()
        return try run { try reader.get(Keyspace.leaseKey(owner)) } != nil
    }

    /// The owner a new stage's marker names: this handle's lease on a shared engine, `nil` elsewhere.
    func stageOwner() throws(BuriError) -> UInt64? {
        try checkOpen()
        return try run { try stageLease.current(storedEngine)?.id }
    }

    /// Checks, through `reader`, that `owner`'s lease still holds, so that a commit reading through
    /// it (a shared engine's writer records the read as a condition) applies only while it does.
    /// Nothing to check for a stage without an owner.
    ///
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` when the lease has ended: the stage may
    ///   be another client's to purge or take up now, so nothing more is written to it.
    func requireStageOwnership(
        _ owner: UInt64?, stage: UInt32, bucket: String, reader: any StorageReader
    ) throws(BuriError) {
        guard let owner else { return }
        if try run({ try reader.get(Keyspace.leaseKey(owner)) }) == nil {
            throw lapsedStage(stage: stage, bucket: bucket, owner: owner)
        }
    }

    /// The error of a stage whose owner's lease ended; if that lease is this handle's, the next
    /// stage gets a new one.
    func lapsedStage(stage: UInt32, bucket: String, owner: UInt64) -> BuriError {
        stageLease.forget(owner)
        return .conflict(
            attempts: 1,
            detail:
                "the staged copy of bucket '\(bucket)' (id \(stage)) is no longer this client's: its lease ended (no renewal reached the cluster within its time to live, or the handle closed), so other clients may purge it or take it up; nothing more was written to it. Run the import, restore or encryption again"
        )
    }

    /// Whether retired id `retired` may be purged now, judged in `reader` (whose reads, on a shared
    /// engine, become the purge commit's conditions): a replaced generation always; a stage when
    /// its load ended. On an engine only one process writes to, a stage found at open (`force`:
    /// any stage, for a load that discards its own). On a shared engine, a stage whose owner's
    /// lease has ended, unless an online encryption still needs it (the database is being
    /// encrypted and its bucket still holds plaintext: ``finishEncryption(batchSize:progress:)``
    /// takes it up) and `force` is not given; a stage without an owner (written before format 12)
    /// only with `force`.
    func isPurgeable(_ retired: RetiredBucket, reader: any StorageReader, force: Bool) throws(BuriError) -> Bool {
        if retired.state == .purging { return true }
        guard engine.isShared else { return force || purger.isAbandoned(retired.id) }
        guard let owner = retired.owner else { return force }
        guard try run({ try reader.get(Keyspace.leaseKey(owner)) }) == nil else { return false }
        if force { return true }
        return try !awaitsEncryption(bucket: retired.bucket, reader: reader)
    }

    /// The retired ids purgeable now (``isPurgeable(_:reader:force:)``), as the current state has them.
    func purgeableBuckets() throws(BuriError) -> [RetiredBucket] {
        let reader = try currentReader()
        var result: [RetiredBucket] = []
        for retired in try retiredBuckets(reader: reader) where try isPurgeable(retired, reader: reader, force: false) {
            result.append(retired)
        }
        return result
    }

    /// Whether bucket `name` still holds plaintext in a database being encrypted (as `reader` sees it).
    func awaitsEncryption(bucket name: String, reader: any StorageReader) throws(BuriError) -> Bool {
        guard try run({ try reader.get(Keyspace.encryptionStateKey) }) != nil else { return false }
        return try bucketInfo(named: name, reader: reader)?.plaintextValues == true
    }

    /// Whether the client holding lease `owner` has died, waiting to find out: while its lease key
    /// exists, watches the lease's remaining time to live (when the engine tells it) until the key
    /// is gone (`true`) or the time goes up (`false` at once: the holder renewed it, and a live
    /// holder renews every third of the time to live), for at most the granted time to live and
    /// two seconds. An engine that does not tell: whether the key is gone now.
    func ownerHasDied(_ owner: UInt64) throws(BuriError) -> Bool {
        func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
        guard try leaseHolds(owner) else { return true }
        guard let first = try run({ try storedEngine.leaseTimeToLive(owner) }) else { return try !leaseHolds(owner) }
        let start = now()
        var last = first.remaining
        while now() < start + Double(first.granted) + 2 {
            usleep(200_000)
            try checkOpen()
            guard try leaseHolds(owner), let ttl = try run({ try storedEngine.leaseTimeToLive(owner) }) else {
                return try !leaseHolds(owner)
            }
            if ttl.remaining > last { return false }  // renewed: alive
            last = ttl.remaining
        }
        return try !leaseHolds(owner)
    }

    /// On a shared engine: takes up the abandoned stage of bucket `name` (its owner's lease ended)
    /// that a killed online encryption left, in one commit that names this handle's lease in its
    /// marker, conditioned on the marker and on the old owner's lease key still being gone (two
    /// clients taking up one stage: one wins, the other finds none). Returns its id and the owner
    /// its marker now names (every later write into it must be under that lease), or `nil`.
    func takeUpAbandonedStage(of name: String) throws(BuriError) -> (id: UInt32, owner: UInt64)? {
        let candidates = try pendingPurges().filter {
            $0.state == .staging && $0.owner != nil && Array($0.bucket.utf8) == Array(name.utf8)
        }
        guard !candidates.isEmpty, let owner = try stageOwner() else { return nil }
        for candidate in candidates {
            // A copy whose client was killed a moment ago: its lease runs out within seconds,
            // and taking the copy up then saves copying the bucket again.
            if let previous = candidate.owner, previous != owner, try !ownerHasDied(previous) { continue }
            let taken: Bool
            do {
                taken = try takeUp(candidate, owner: owner, name: name)
            } catch .conflict(let attempts, let detail) {
                // This handle's own lease lapsed: the caller copies anew, under a new one.
                if try !leaseHolds(owner) { return nil }
                throw .conflict(attempts: attempts, detail: detail)
            }
            if taken { return (candidate.id, owner) }
        }
        return nil
    }

    /// The commit of ``takeUpAbandonedStage(of:)`` for one candidate; whether it took it.
    private func takeUp(_ candidate: RetiredBucket, owner: UInt64, name: String) throws(BuriError) -> Bool {
        try performWrite(sync: true) { writer throws(BuriError) -> Bool in
            let markerKey = Keyspace.retiredKey(bucket: candidate.id)
            guard let value = try run({ try writer.reader.get(markerKey) }),
                let marker = Keyspace.parseRetired(key: markerKey, value: value),
                marker.state == .staging, let previous = marker.owner, previous != owner,
                try run({ try writer.reader.get(Keyspace.leaseKey(previous)) }) == nil
            else { return false }
            try requireStageOwnership(owner, stage: candidate.id, bucket: name, reader: writer.reader)
            writer.batch.put(markerKey, Keyspace.retiredValue(.staging, bucket: marker.name, owner: owner))
            return true
        }
    }
}
