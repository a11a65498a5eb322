import BuriStorage

/// How far ``BuriDatabase/finishEncryption(batchSize:progress:)`` has come.
public struct EncryptionProgress: Sendable, Hashable {
    /// The bucket being copied into a sealed generation; `nil` while named values are sealed, and
    /// in the last report.
    public var bucket: String?
    /// Objects of ``bucket`` copied so far.
    public var copied: Int
    /// Buckets already sealed by this call.
    public var bucketsDone: Int
    /// Buckets this call seals: those done and those still holding plaintext.
    public var bucketsTotal: Int
    /// Objects of ``bucket`` that an earlier call, which ended before it published the bucket's
    /// copy, had sealed already: kept as they are, not sealed again (included in ``copied``).
    public var kept: Int = 0
}

extension BuriDatabase {
    /// Whether the database is being encrypted online: it was plaintext, was opened with
    /// ``BuriOptions/encryptsPlaintextDatabase``, and ``finishEncryption(batchSize:progress:)`` has
    /// not finished yet (in any process). Its records and named values are read whether sealed yet
    /// or not; everything written is sealed.
    ///
    /// ```swift
    /// if db.isBeingEncrypted { try db.finishEncryption() }
    /// ```
    public var isBeingEncrypted: Bool { plaintextPhase?.isActive ?? false }

    /// Finishes encrypting a database that was plaintext (see
    /// ``BuriOptions/encryptsPlaintextDatabase``), while the application goes on using it:
    ///
    /// 1. each bucket still holding plaintext is copied into a new generation, `batchSize` objects
    ///    per commit, its records sealed and its private indexes' values replaced by keyed tokens,
    ///    and the copy is published in one commit (as a staged import is); a write to the bucket
    ///    during the copy makes the copy catch up first, copying again only the objects written,
    ///    at most `options.maxCommitAttempts` times; the plaintext generation is then purged;
    /// 2. every named value not sealed yet is sealed, `batchSize` per commit;
    /// 3. one commit ends the plaintext phase: from then on a value that is not sealed is damage.
    ///
    /// Then the key ranges that held plaintext are compacted (a LevelDB database), so the files
    /// keep no copy of it. Readers see every object throughout, sealed or not; writers wait only
    /// for each commit. If the process ends on the way, the database opens again with the key
    /// (still being encrypted), and calling this again goes on where it ended, inside the bucket
    /// whose copy was under way: the objects that copy had sealed are kept
    /// (``EncryptionProgress/kept``), and only those written since are copied again. On a shared
    /// engine, such as etcd, the copy is taken up once its client's lease has ended: at once if
    /// the client closed; if it died, this call watches its lease run out (at most its time to
    /// live, 10 s by default) and then takes the copy up. A copy whose client still renews its
    /// lease is under way, so the bucket is copied anew. Every commit leaves the database
    /// consistent. Does nothing for a database
    /// not being encrypted.
    ///
    /// ```swift
    /// var options = BuriOptions()
    /// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")
    /// options.encryptsPlaintextDatabase = true
    /// let db = try BuriDatabase(path: "notes.buri", options: options)
    /// try db.finishEncryption { print("\($0.bucketsDone)/\($0.bucketsTotal) buckets") }
    /// ```
    /// - Throws: ``BuriError/conflict(attempts:detail:)`` when a bucket was written during every
    ///   attempt to copy it (call again when writes are fewer); storage errors. Nothing is lost:
    ///   what was published stays sealed, the rest stays readable.
    public func finishEncryption(
        batchSize: Int = 1000, progress: ((EncryptionProgress) -> Void)? = nil
    ) throws(BuriError) {
        guard let phase = plaintextPhase, phase.isActive else { return }
        try checkOpen()
        let chunk = max(1, batchSize)
        var done = 0
        var skipped: Set<[UInt8]> = []
        while true {
            let pending = try allBucketInfo(reader: currentReader()).filter {
                $0.plaintextValues == true && !skipped.contains(Array($0.name.utf8))
            }
            guard let next = pending.first else { break }
            let total = done + pending.count
            progress?(EncryptionProgress(bucket: next.name, copied: 0, bucketsDone: done, bucketsTotal: total, kept: 0))
            if try sealBucket(
                next.name, chunk: chunk,
                report: { copied, kept in
                    progress?(
                        EncryptionProgress(
                            bucket: next.name, copied: copied, bucketsDone: done, bucketsTotal: total, kept: kept))
                })
            {
                done += 1
            } else {
                // Dropped meanwhile: nothing of it is left to seal.
                skipped.insert(Array(next.name.utf8))
                abandonStages(purger.takeResumable(bucket: Array(next.name.utf8)))
            }
        }
        try sealNamedValues(chunk: chunk) {
            progress?(EncryptionProgress(bucket: nil, copied: 0, bucketsDone: done, bucketsTotal: done))
        }
        try performWrite(sync: true) { writer throws(BuriError) in
            // Another client of a shared engine may have created nothing plaintext (every write is
            // sealed), but a bucket it redefined keeps its flag until copied: check, under the lock.
            if let left = try allBucketInfo(reader: writer.reader).first(where: { $0.plaintextValues == true }) {
                throw BuriError.conflict(
                    attempts: 1,
                    detail:
                        "bucket '\(left.name)' still holds plaintext (it was recreated while it was being sealed); call finishEncryption again"
                )
            }
            writer.batch.delete(Keyspace.encryptionStateKey)
        }
        phase.end()
        // Copies begun by an earlier call of buckets since dropped or recreated: purged.
        abandonStages(purger.takeResumable(bucket: nil))
        progress?(EncryptionProgress(bucket: nil, copied: 0, bucketsDone: done, bucketsTotal: done))
        // The plaintext generations, then every range that held plaintext, are rewritten without it.
        _ = try purgeRetiredBuckets(reclaimingSpace: true)
        try compactAway([[Keyspace.valueTag], [Keyspace.recordTag], [Keyspace.indexTag]])
    }

    /// Compacts the key ranges under `prefixes` so that the files keep no older copy of their
    /// values (on an engine that is not shared; a shared one compacts its own history). First it
    /// waits for the background purge's pass to end: LevelDB deletes a table that a compaction
    /// replaced only when no cursor reads it, and a table left behind would keep what was
    /// replaced until the next compaction or open.
    func compactAway(_ prefixes: [[UInt8]]) throws(BuriError) {
        guard !engine.isShared else { return }
        purger.waitUntilIdle()
        try run { for prefix in prefixes { try engine.compact(.prefix(prefix)) } }
    }

    /// Copies bucket `name` into a sealed generation and publishes it; `false` if the bucket no
    /// longer exists. The copy an earlier call began (its process ended) is taken up where it
    /// ended. A write to the bucket during the copy makes publishing bring the copy up to date
    /// first (only what was written is copied again), at most `options.maxCommitAttempts` times.
    private func sealBucket(_ name: String, chunk: Int, report: @escaping (Int, Int) -> Void) throws(BuriError) -> Bool
    {
        var load = try resumedStage(of: name, chunk: chunk, report: report)
        var attempt = 0
        while true {
            attempt += 1
            let staged: StagedImport
            if let load {
                staged = load
            } else {
                do {
                    staged = try stageImport(into: name, chunkSize: chunk) { report($0, 0) }
                } catch .unknownBucket {
                    return false
                }
                load = staged
            }
            do {
                _ = try publish([staged], values: [], progress: nil, abandoningOnError: false)
                return true
            } catch .conflict(let attempts, let detail) {
                if let owner = staged.owner, try !leaseHolds(owner) {
                    // This handle's lease lapsed (cut off from the cluster): the copy is left to
                    // whoever takes it up or purges it, and this call copies anew under a new lease.
                    staged.abandon()
                    load = nil
                    if attempt >= max(1, options.maxCommitAttempts) {
                        throw .conflict(attempts: attempt, detail: "sealing bucket '\(name)': \(detail)")
                    }
                    continue
                }
                if attempt >= max(1, options.maxCommitAttempts) {
                    staged.abandon()
                    throw .conflict(
                        attempts: attempt + attempts - 1,
                        detail: "sealing bucket '\(name)': \(detail); call finishEncryption again")
                }
                if try bucketInfo(named: name, reader: currentReader()) == staged.base {
                    // Written meanwhile: the copy is brought up to date, keeping what it holds.
                    do {
                        try staged.resync(chunkSize: chunk) { report($0, staged.kept) }
                    } catch {
                        staged.abandon()
                        throw error
                    }
                } else {
                    // Redefined or dropped: copied anew (or found gone).
                    staged.abandon()
                    load = nil
                }
            } catch {
                staged.abandon()
                throw error
            }
        }
    }

    /// The copy of bucket `name` an earlier call began and did not publish (its process ended;
    /// found when this handle opened), brought up to date with the bucket: what it holds sealed
    /// already is kept. `nil` when there is none (others of the bucket are purged).
    private func resumedStage(
        of name: String, chunk: Int, report: @escaping (Int, Int) -> Void
    ) throws(BuriError) -> StagedImport? {
        let id: UInt32
        var owner: UInt64?
        if engine.isShared {
            // A stage whose owner's lease ended (its client was killed or closed): taken up by
            // naming this handle's lease in its marker. Others of the bucket are purged once it is sealed.
            guard try bucketInfo(named: name, reader: currentReader())?.plaintextValues == true,
                let taken = try takeUpAbandonedStage(of: name)
            else { return nil }
            (id, owner) = taken
        } else {
            var ids = purger.takeResumable(bucket: Array(name.utf8))
            guard !ids.isEmpty else { return nil }
            id = ids.removeFirst()
            guard try bucketInfo(named: name, reader: currentReader())?.plaintextValues == true else {
                ids.append(id)
                abandonStages(ids)
                return nil
            }
            abandonStages(ids)
        }
        guard let base = try bucketInfo(named: name, reader: currentReader()), base.plaintextValues == true else {
            // Sealed or dropped by another client meanwhile: the copy taken up is purged.
            if let owner { abandonOwnedStage(id, bucket: name, owner: owner) }
            return nil
        }
        var definition = base
        definition.id = id
        definition.plaintextValues = nil
        let load = StagedImport(
            database: self, base: base, definition: definition, snapshot: try run { try engine.snapshot() },
            owner: owner)
        do {
            try load.copyBase(chunkSize: chunk) { report($0, load.kept) }
        } catch {
            load.abandon()
            throw error
        }
        return load
    }

    /// Marks stage `id`, which this handle's lease `owner` owns, for the purge (while that lease holds).
    private func abandonOwnedStage(_ id: UInt32, bucket: String, owner: UInt64) {
        try? performWrite(sync: false) { writer throws(BuriError) in
            try requireStageOwnership(owner, stage: id, bucket: bucket, reader: writer.reader)
            writer.batch.put(Keyspace.retiredKey(bucket: id), Keyspace.retiredValue(.purging, bucket: bucket))
        }
        if options.purgesInBackground { purger.kick(self) }
    }

    /// Leaves the stages `ids` (found at open, not taken up) to the background purge.
    func abandonStages(_ ids: [UInt32]) {
        guard !ids.isEmpty else { return }
        purger.abandon(ids)
        if options.purgesInBackground { purger.kick(self) }
    }

    /// Seals every named value stored as plaintext, `chunk` per commit.
    private func sealNamedValues(chunk: Int, report: () -> Void) throws(BuriError) {
        while true {
            try checkOpen()
            // Found in the stored bytes (the engine above opens sealed and plaintext values alike).
            let names: [[UInt8]] = try run {
                var found: [[UInt8]] = []
                let cursor = try storedEngine.latest().cursor(in: .prefix([Keyspace.valueTag]))
                while found.count < chunk, try cursor.next() {
                    if try cursor.withValue({ !isSealedValueMarker($0.first) }) { found.append(cursor.key) }
                }
                return found
            }
            if names.isEmpty { return }
            report()
            try performWrite(sync: false) { writer throws(BuriError) in
                for key in names {
                    // Read and written under the write lock: a value changed meanwhile is sealed as it is now.
                    if let value = try run({ try writer.reader.get(key) }) { writer.batch.put(key, value) }
                }
            }
        }
    }

    /// Begins encrypting the plaintext database in `engine` (``BuriOptions/encryptsPlaintextDatabase``)
    /// in one commit: every catalog entry is flagged ``BucketDescriptor/plaintextValues`` (its
    /// indexes in `plaintextIndexes` declared plaintext), and the encryption header and the key
    /// `00 "encrypting"` are written, with the format version. Returns the cipher and the header.
    ///
    /// - Throws: ``BuriError/indexNotDeclaredPlaintext(bucket:index:)`` for a numeric index not in
    ///   `plaintextIndexes`, before anything is written; the key's errors as at creation.
    static func beginEncryption(
        _ engine: any StorageEngine, snapshot: any StorageSnapshot, encryption: any DatabaseEncryption,
        plaintextIndexes: [String], path: String
    ) throws -> (any DatabaseCipher, [UInt8]) {
        let declared = Set(plaintextIndexes.map { Array($0.utf8) })
        let batch = engine.makeBatch()
        let catalog = try snapshot.cursor(in: Keyspace.catalogRange)
        while try catalog.next() {
            let key = catalog.key
            let name = Keyspace.bucketName(fromCatalogKey: key) ?? "(invalid UTF-8)"
            var descriptor: BucketDescriptor
            do {
                descriptor = try BucketDescriptor.decode(try catalog.value)
            } catch {
                throw BuriError.corruption(
                    bucket: name, key: nil, index: nil,
                    reason:
                        "its catalog entry does not decode (\(error)); run `buri check --repair` before encrypting; nothing was written"
                )
            }
            for position in descriptor.indexes.indices
            where declared.contains(Array(descriptor.indexes[position].name.utf8)) {
                descriptor.indexes[position].plaintext = true
            }
            if let index = descriptor.indexes.first(where: {
                IndexTokens.isPrivate($0) && $0.components.contains(.numeric)
            }) {
                throw BuriError.indexNotDeclaredPlaintext(bucket: descriptor.name, index: index.name)
            }
            descriptor.plaintextValues = true
            do { batch.put(key, try descriptor.encoded()) } catch {
                throw BuriError.encodingFailed(bucket: descriptor.name, key: "(catalog)", reason: "\(error)")
            }
            // A database from before object counts (format 4) gets them with the header it is raised to.
            if try snapshot.get(Keyspace.countKey(bucket: descriptor.id)) == nil {
                var count = 0
                let records = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: descriptor.id)))
                while try records.next() { count += 1 }
                batch.put(Keyspace.countKey(bucket: descriptor.id), Keyspace.countValue(count))
            }
        }
        let header: [UInt8]
        do { header = try encryption.newHeader() } catch {
            throw BuriError.invalidEncryptionKey(reason: error.description)
        }
        let cipher = try unlock(encryption, header: header, path: path)
        batch.put(Keyspace.headerKey, Keyspace.headerValue())
        batch.put(Keyspace.encryptionKey, header)
        batch.put(Keyspace.encryptionStateKey, [1])
        try engine.commit(
            batch,
            conditions: StorageConditions(
                snapshot: snapshot, keys: [Keyspace.headerKey, Keyspace.encryptionKey, Keyspace.encryptionStateKey],
                ranges: [Keyspace.catalogRange]),
            sync: true)
        return (cipher, header)
    }
}
