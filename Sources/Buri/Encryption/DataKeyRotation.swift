import BuriStorage
import Synchronization

/// How far ``BuriDatabase/rotateDataKey(batchSize:progress:)`` has come.
public struct DataKeyRotationProgress: Sendable, Hashable {
    /// Stored values (records and named values) looked at so far, in key order.
    public var examined: Int
    /// Values this call sealed anew under the new record key so far.
    public var resealed: Int
    /// The generation sealing now, and the one being retired (`nil` in the last report, once
    /// retired).
    public var generations: DataKeyGenerations
}

extension BuriDatabase {
    /// The generations of this encrypted database's record keys: the one that seals, and during a
    /// rotation (``rotateDataKey(batchSize:progress:)``) the one being retired. `nil` for a
    /// plaintext database.
    ///
    /// ```swift
    /// if db.dataKeyGenerations?.retiring != nil { try db.rotateDataKey() }   // finish it
    /// ```
    public var dataKeyGenerations: DataKeyGenerations? { indexTokens?.cipher.dataKeyGenerations }

    /// Rotates the key that seals this encrypted database's records and named values, while the
    /// application goes on using it, and returns when every value is sealed under the new key and
    /// the old one is gone from the database (`docs/FORMAT.md` §4a, header version 3):
    ///
    /// 1. one synced commit writes an encryption header holding a new random record key
    ///    (generation g + 1), which seals every value written from then on, beside the current one
    ///    (generation g), which still opens what it sealed;
    /// 2. every record and named value still sealed under generation g is opened and sealed anew,
    ///    `batchSize` per commit, in key order (the stored bytes are walked outside the write lock;
    ///    each batch is read again and written under it, so a value changed meanwhile is sealed as
    ///    it is now). Plaintexts do not change: index entries, versions and object counts stay;
    /// 3. one synced commit checks, under the write lock, that nothing is left under generation g
    ///    (sealing anew what is) and writes the header without it. From then on a value sealed
    ///    under generation g, from an old copy of the files, fails to open.
    ///
    /// Then (a LevelDB database) the key ranges of values are compacted, so the files keep no
    /// value sealed under the old record key. Readers see every object throughout; writers wait
    /// only for each batch. If the process ends on the way, the database opens again with the same
    /// key, both generations open, and calling this again goes on: values already sealed under the
    /// new generation are skipped by their first bytes, without being opened.
    ///
    /// What rotates is the record key. The key that makes private indexes' tokens stays (tokens
    /// cannot be remade without the values, which index entries do not hold): whoever holds the
    /// old key and an old copy of the header can still test guesses of private index values
    /// against the tokens, but cannot open any value sealed after the rotation
    /// (`docs/SECURITY.md`, "Rotating the data key"). The user's key stays too: change it with
    /// ``changeEncryptionKey(to:)``, before or after.
    ///
    /// ```swift
    /// try db.rotateDataKey(batchSize: 500) { print("\($0.resealed) sealed anew") }
    /// ```
    /// - Throws: ``BuriError/notEncrypted(path:)`` for a plaintext database;
    ///   ``BuriError/invalidTransaction(reason:)`` while the database is still being encrypted
    ///   online (finish that first); ``BuriError/invalidEncryptionKey(reason:)`` when the key cannot
    ///   rotate (a version 1 header: change the key once first); storage errors. Nothing is lost on
    ///   any error: both generations stay until the last commit.
    public func rotateDataKey(
        batchSize: Int = 1000, progress: ((DataKeyRotationProgress) -> Void)? = nil
    ) throws(BuriError) {
        guard isEncrypted, let cipher = indexTokens?.cipher else { throw .notEncrypted(path: path) }
        try checkOpen()
        if isBeingEncrypted {
            throw .invalidTransaction(
                reason:
                    "the database at \(path) is still being encrypted online; finish that (`finishEncryption`, `buri encrypt`) before rotating its data key; nothing was written"
            )
        }
        let chunk = max(1, batchSize)
        try followStoredEncryptionHeader()
        if cipher.dataKeyGenerations.retiring == nil {
            try commitEncryptionHeader { key, stored throws(EncryptionFailure) in
                try key.headerBeginningRotation(stored)
            }
        }
        var report = DataKeyRotationProgress(examined: 0, resealed: 0, generations: cipher.dataKeyGenerations)
        progress?(report)
        for range in Self.sealedRanges {
            var after: [UInt8]?
            while true {
                // Its values are read from the stored engine, which a closed handle may share with
                // others: a closed handle stops here, at the next batch.
                try checkOpen()
                let (stale, last, looked) = try staleValues(in: range, after: after, limit: chunk)
                report.examined += looked
                if !stale.isEmpty {
                    try performWrite(sync: false) { writer throws(BuriError) in try reseal(stale, in: writer) }
                    report.resealed += stale.count
                }
                if !stale.isEmpty || last == nil { progress?(report) }
                guard let last else { break }
                after = last
            }
        }
        try commitEncryptionHeader { key, stored throws(EncryptionFailure) in
            try key.headerEndingRotation(stored)
        } leftovers: { writer throws(BuriError) in
            // Nothing may be left under the retiring generation (a staged import's copy sealed
            // before the rotation began, another client's write): sealed anew in this commit.
            for range in Self.sealedRanges {
                _ = try run { try writer.reader.cursor(in: range) }  // a condition on a shared engine
                var after: [UInt8]?
                while true {
                    let (stale, last, _) = try staleValues(
                        in: range, after: after, limit: chunk, reader: Self.storedReader(of: writer.reader))
                    if !stale.isEmpty {
                        try reseal(stale, in: writer)
                        report.resealed += stale.count
                    }
                    guard let last else { break }
                    after = last
                }
            }
        }
        report.generations = cipher.dataKeyGenerations
        progress?(report)
        try compactAway([[Keyspace.recordTag], [Keyspace.valueTag]])
    }

    /// Reads `keys` through `writer` and puts them back, so the batch seals them under the current
    /// generation. Under the write lock: a value changed meanwhile is sealed as it is now, one
    /// deleted meanwhile stays deleted.
    ///
    /// Records of a generation being purged are left as they are: a purge deletes them in chunks
    /// without the write lock, as no writer writes under a retired id, so sealing one anew could
    /// put back a record the purge has just deleted. Nothing reads them again.
    private func reseal(_ keys: [[UInt8]], in writer: Writer) throws(BuriError) {
        var purging: [UInt32: Bool] = [:]
        var keys = keys
        for key in keys where key.count > 5 && key[0] == Keyspace.recordTag {
            let id = key.withUnsafeBytes { Keyspace.readBigEndian($0, at: 1) }
            if purging[id] == nil {
                let marker = try run { try writer.reader.get(Keyspace.retiredKey(bucket: id)) }
                purging[id] =
                    marker.flatMap { Keyspace.parseRetired(key: Keyspace.retiredKey(bucket: id), value: $0) }?.state
                    == .purging
            }
        }
        if purging.values.contains(true) {
            keys.removeAll { key in
                key.count > 5 && key[0] == Keyspace.recordTag
                    && purging[key.withUnsafeBytes { Keyspace.readBigEndian($0, at: 1) }] == true
            }
        }
        let values = try run { try writer.reader.values(forKeys: keys) }
        for (key, value) in zip(keys, values) {
            if let value { writer.batch.put(key, value) }
        }
    }

    /// The key ranges whose values are sealed: records and named values.
    static let sealedRanges: [KeyRange] = [.prefix([Keyspace.recordTag]), .prefix([Keyspace.valueTag])]

    /// The keys after `after` in `range` (at most `limit` of them, looking at no more than
    /// `limit * 8` values) whose stored value is sealed under another generation than the one
    /// sealing now, found by their first bytes; the last key looked at (nil at the end of the
    /// range), and how many were looked at.
    private func staleValues(
        in range: KeyRange, after: [UInt8]?, limit: Int, reader: (any StorageReader)? = nil
    ) throws(BuriError) -> (stale: [[UInt8]], last: [UInt8]?, looked: Int) {
        guard let cipher = indexTokens?.cipher else { return ([], nil, 0) }
        let current = cipher.dataKeyGenerations.current
        return try run {
            let source = try reader ?? storedEngine.latest()
            let cursor = try source.cursor(in: range)
            // After `seek`, `next` lands on the first key at or after `after`: step past it.
            if let after { cursor.seek(after) }
            var more = try cursor.next()
            if more, let after, cursor.key == after { more = try cursor.next() }
            var stale: [[UInt8]] = []
            var looked = 0
            while more {
                looked += 1
                let key = cursor.key
                if try cursor.withValue({ sealedGeneration(of: $0) != current }) { stale.append(key) }
                if stale.count >= limit || looked >= limit * 8 { return (stale, key, looked) }
                more = try cursor.next()
            }
            return (stale, nil, looked)
        }
    }

    /// The stored (sealed) bytes under `reader`, a writer's view of this database: its engine's
    /// reader below the sealing one.
    static func storedReader(of reader: any StorageReader) -> any StorageReader {
        if let recording = reader as? RecordingReader, let sealed = recording.base as? SealedSnapshot {
            return sealed.snapshot
        }
        if let sealed = reader as? SealedReader { return sealed.reader }
        return reader
    }

    /// Writes the encryption header `make` derives (with this handle's key) from the stored one,
    /// in one synced commit under the write lock, after `leftovers` added what it must to the same
    /// batch; once committed, this handle seals and opens with the keys it holds.
    func commitEncryptionHeader(
        _ make: (any DatabaseEncryption, [UInt8]) throws(EncryptionFailure) -> [UInt8],
        leftovers: (Writer) throws(BuriError) -> Void = { _ throws(BuriError) in }
    ) throws(BuriError) {
        guard let cipher = indexTokens?.cipher, let key = currentEncryption.withLock({ $0 }) else {
            throw .notEncrypted(path: path)
        }
        try performWrite(sync: true) { writer throws(BuriError) in
            let stored = try storedEncryptionHeader(writer.reader)
            let header: [UInt8]
            do throws(EncryptionFailure) { header = try make(key, stored) } catch {
                throw Self.keyFailure(error, path: path)
            }
            if header == stored { return }
            let unlocked = try Self.unlock(key, header: header, path: path)
            try leftovers(writer)
            writer.batch.put(Keyspace.encryptionKey, header)
            writer.afterCommit { [self] in
                _ = cipher.adoptDataKeys(of: unlocked)
                knownEncryptionHeader.withLock { $0 = header }
            }
        }
    }

    /// On an engine shared with other clients, where another client may have begun or ended a
    /// rotation: makes this handle hold the keys of the header `reader` reads (noting it, so a
    /// commit made with this reader applies only if the header has not changed meanwhile).
    ///
    /// - Throws: ``BuriError/wrongEncryptionKey(path:reason:)`` when the stored header no longer
    ///   opens with this handle's key (another client changed it): the handle must not write
    ///   values under keys it cannot see.
    func followEncryptionHeader(_ reader: any StorageReader) throws(BuriError) {
        guard let stored = try run({ try reader.get(Keyspace.encryptionKey) }) else { return }
        try adopt(storedHeader: stored)
    }

    /// ``followEncryptionHeader(_:)`` with the latest stored header.
    func followStoredEncryptionHeader() throws(BuriError) {
        try followEncryptionHeader(try run { try storedEngine.latest() })
    }

    /// Makes this handle hold the keys of `stored`, unless it already does.
    private func adopt(storedHeader stored: [UInt8]) throws(BuriError) {
        guard let cipher = indexTokens?.cipher, knownEncryptionHeader.withLock({ $0 != stored }) else { return }
        guard let key = currentEncryption.withLock({ $0 }) else { return }
        let unlocked: any DatabaseCipher
        do {
            unlocked = try key.unlock(header: stored)
        } catch {
            // Another client changed the key. The data keys stay with a key change, so this handle
            // goes on while the header names the generations it holds; not after a rotation.
            if key.dataKeyGenerations(ofHeader: stored) == cipher.dataKeyGenerations {
                knownEncryptionHeader.withLock { $0 = stored }
                return
            }
            throw .wrongEncryptionKey(
                path: path,
                reason:
                    "the key this handle holds no longer opens the database's encryption header, and its data key was rotated since (another client changed both): \(error.description); reopen the database with the new key"
            )
        }
        if unlocked.dataKeyGenerations != cipher.dataKeyGenerations, !cipher.adoptDataKeys(of: unlocked) {
            throw .wrongEncryptionKey(
                path: path,
                reason:
                    "the database's encryption header holds other data keys than this handle's; reopen the database")
        }
        knownEncryptionHeader.withLock { $0 = stored }
    }

    /// The encryption header stored in the database, as `reader` reads it.
    func storedEncryptionHeader(_ reader: any StorageReader) throws(BuriError) -> [UInt8] {
        guard let stored = try run({ try reader.get(Keyspace.encryptionKey) }) else {
            throw .corruption(
                bucket: nil, key: nil, index: nil,
                reason:
                    "the encrypted database at \(path) has no encryption header (key 00 \"encryption\") any more; nothing was written"
            )
        }
        return stored
    }
}

/// The cipher of an encrypted database on an engine shared with other clients: the database's
/// own, which it forwards to, but a value sealed under a generation it does not hold yet (another
/// client began a rotation) makes it read the stored header once and try again.
final class FollowingCipher: DatabaseCipher {
    let base: any DatabaseCipher
    /// Reads the stored header and adopts its keys.
    let refresh = Mutex<(@Sendable () -> Void)?>(nil)

    init(base: any DatabaseCipher) { self.base = base }

    func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) -> [UInt8] {
        base.seal(plaintext, associatedData: associatedData)
    }

    func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, padding: Int) -> [UInt8] {
        base.seal(plaintext, associatedData: associatedData, padding: padding)
    }

    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer
    ) throws(EncryptionFailure) -> [UInt8] {
        followIfNeeded(sealed)
        return try base.open(sealed, associatedData: associatedData)
    }

    func withOpened<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        followIfNeeded(sealed)
        return try base.withOpened(sealed, associatedData: associatedData, body)
    }

    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, into buffer: inout [UInt8]
    ) throws(EncryptionFailure) -> Int {
        followIfNeeded(sealed)
        return try base.open(sealed, associatedData: associatedData, into: &buffer)
    }

    /// Reads the stored header again when `sealed` names a generation this cipher does not hold
    /// (one a rotation by another client began), before it is opened.
    private func followIfNeeded(_ sealed: UnsafeRawBufferPointer) {
        guard let generation = sealedGeneration(of: sealed) else { return }
        let held = base.dataKeyGenerations
        if generation != held.current, generation != held.retiring { refresh.withLock({ $0 })?() }
    }

    func token(_ bytes: UnsafeRawBufferPointer) -> [UInt8] { base.token(bytes) }
    var dataKeyGenerations: DataKeyGenerations { base.dataKeyGenerations }
    func adoptDataKeys(of other: any DatabaseCipher) -> Bool {
        base.adoptDataKeys(of: (other as? FollowingCipher)?.base ?? other)
    }
}
