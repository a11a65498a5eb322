import BuriStorage
import Synchronization

/// The storage engine of an encrypted database: another engine, whose record and named values
/// (``Keyspace/isSealed(_:)``) are sealed as they are written and opened as they are read.
///
/// Everything above it (buckets, transactions, queries, check, observation) sees plaintext, so
/// one code path serves encrypted and plaintext databases alike; everything below it (LevelDB's
/// files and log, a memory engine, an etcd cluster) sees only sealed values. A value is sealed with
/// its full stored key as associated data (`docs/FORMAT.md` §4a), so a value copied or swapped to
/// another key or bucket fails to open with ``BuriError/authenticationFailed(bucket:key:reason:)``.
final class SealedEngine: StorageEngine {
    let base: any StorageEngine
    let cipher: any DatabaseCipher
    /// Set while a database that was plaintext is being encrypted online: values not yet sealed
    /// are read as they are stored.
    let phase: PlaintextPhase?

    init(base: any StorageEngine, cipher: any DatabaseCipher, phase: PlaintextPhase? = nil) {
        self.base = base
        self.cipher = cipher
        self.phase = phase
    }

    var location: String { base.location }
    var isShared: Bool { base.isShared }
    var isClosed: Bool { base.isClosed }

    func snapshot() throws -> any StorageSnapshot {
        SealedSnapshot(base: try base.snapshot(), cipher: cipher, phase: phase)
    }

    func latest() throws -> any StorageReader {
        let reader = try base.latest()
        // An engine whose latest reader is one object for its life (LevelDB's) gets one wrapper:
        // no cast and no allocation per read.
        if let cached = latestReader.withLock({ $0?.reader }), cached.reader === reader { return cached }
        if let snapshot = reader as? any StorageSnapshot {
            return SealedSnapshot(base: snapshot, cipher: cipher, phase: phase)
        }
        let made = SealedReader(base: reader, cipher: cipher, phase: phase)
        latestReader.withLock { $0 = SharedReader(reader: made) }
        return made
    }

    /// A wrapper of an engine's latest reader that is not a snapshot: that reader is one object
    /// every caller shares (it reads the engine's current state, on any thread), and the wrapper
    /// adds only constants.
    private struct SharedReader: @unchecked Sendable {
        let reader: SealedReader
    }

    /// The wrapper of the base engine's latest reader when that is not a snapshot.
    private let latestReader = Mutex<SharedReader?>(nil)

    func makeBatch() -> any StorageBatch {
        SealedBatch(base: base.makeBatch(), cipher: cipher, pads: base.cachesOnlyCompressedBlocks)
    }

    func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws {
        guard let batch = batch as? SealedBatch else {
            throw StorageError(
                code: .invalidArgument, message: "a batch not made by this encrypted database's engine",
                location: location)
        }
        var conditions = conditions
        if let snapshot = conditions?.snapshot as? SealedSnapshot { conditions?.snapshot = snapshot.snapshot }
        try base.commit(batch.base, conditions: conditions, sync: sync)
    }

    func close() { base.close() }
    func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)? { try base.grantLease(key: key) }
    func leaseTimeToLive(_ id: UInt64) throws -> (remaining: Int, granted: Int)? { try base.leaseTimeToLive(id) }
    func compact(_ range: KeyRange?) throws { try base.compact(range) }
    func property(_ name: String) throws -> String? { try base.property(name) }
    func approximateSizes(of ranges: [KeyRange]) throws -> [UInt64] { try base.approximateSizes(of: ranges) }

    /// Observers see opened values; a value that fails to open reaches them as stored, so that
    /// decoding it fails there instead of an observer seeing a commit with a change left out.
    func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        let cipher = cipher
        let phase = phase
        return base.observeCommits { event in
            var event = event
            for (position, change) in event.changes.enumerated() {
                guard case .put(let key, let value) = change,
                    key.withUnsafeBytes({ Keyspace.isSealed($0) }),
                    let opened = try? Self.open(value, key: key, cipher: cipher, phase: phase)
                else { continue }
                event.changes[position] = .put(key: key, value: opened)
            }
            observer(event)
        }
    }

    /// `body` given the plaintext of `value` stored under `key` (not kept), or the error naming
    /// what failed to open.
    static func withOpened<R>(
        _ value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, cipher: any DatabaseCipher,
        phase: PlaintextPhase?, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        if let phase, phase.passes(value) { return try body(value) }
        do {
            return try cipher.withOpened(value, associatedData: key, body)
        } catch let failure as EncryptionFailure {
            throw rejection(key: Array(key), reason: failure.description)
        }
    }

    /// The plaintext of `value` stored under `key`, or the error naming what failed to open.
    static func open(
        _ value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, cipher: any DatabaseCipher,
        phase: PlaintextPhase?
    )
        throws(BuriError) -> [UInt8]
    {
        if let phase, phase.passes(value) { return Array(value) }
        do {
            return try cipher.open(value, associatedData: key)
        } catch {
            throw rejection(key: Array(key), reason: error.description)
        }
    }

    static func open(
        _ value: [UInt8], key: [UInt8], cipher: any DatabaseCipher, phase: PlaintextPhase?
    ) throws(BuriError) -> [UInt8] {
        let result = value.withUnsafeBytes { value in
            key.withUnsafeBytes { key in
                Result { () throws(BuriError) in try open(value, key: key, cipher: cipher, phase: phase) }
            }
        }
        return try result.get()
    }

    /// The error for the sealed value under `key` that did not open: a record names its bucket by
    /// id until ``BuriError/attributed(to:)`` names it, a named value names itself.
    static func rejection(key: [UInt8], reason: String) -> BuriError {
        if let (bucket, object) = Keyspace.bucketAndObjectKey(ofRecordKey: key) {
            return .authenticationFailed(
                bucket: nil, key: object, reason: "\(BuriError.sealedRecordPrefix)\(bucket): \(reason)")
        }
        if key.first == Keyspace.valueTag {
            return .authenticationFailed(
                bucket: nil, key: String(decoding: key.dropFirst(), as: UTF8.self), reason: reason)
        }
        return .authenticationFailed(bucket: nil, key: String(decoding: key, as: UTF8.self), reason: reason)
    }
}

extension StorageReader {
    /// Whether `key` holds a value, without opening it (a sealed value that fails its
    /// authentication is still there: `check` reports it as damaged, never as missing).
    func containsKey(_ key: [UInt8]) throws -> Bool {
        if let sealed = self as? SealedReader { return try sealed.reader.contains(key) }
        return try contains(key)
    }
}

extension StorageCursor {
    /// ``StorageCursor/withValue(_:)`` for Buri's typed code: a value that cannot be read (a sealed
    /// one failing its authentication) throws its ``BuriError``.
    func readValue<R>(_ body: (UnsafeRawBufferPointer) throws(BuriError) -> R) throws(BuriError) -> R {
        do {
            return try withValue { raw throws(BuriError) in try body(raw) }
        } catch {
            throw BuriError.wrap(error)
        }
    }
}

extension BuriError {
    /// How the reason of a record's ``authenticationFailed(bucket:key:reason:)`` starts while its
    /// bucket is still unnamed (the engine knows only its id).
    static let sealedRecordPrefix = "stored under bucket id "
}

/// Reads of an encrypted database: sealed values are opened as they are read.
class SealedReader: StorageReader {
    let reader: any StorageReader
    let cipher: any DatabaseCipher
    let phase: PlaintextPhase?

    init(base: any StorageReader, cipher: any DatabaseCipher, phase: PlaintextPhase?) {
        reader = base
        self.cipher = cipher
        self.phase = phase
    }

    var prefersBatchedReads: Bool { reader.prefersBatchedReads }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard key.withUnsafeBytes({ Keyspace.isSealed($0) }) else { return try reader.withValue(forKey: key, body) }
        let (cipher, phase) = (cipher, phase)
        // Opened into a buffer on the stack while the engine lends the stored bytes: no copy kept.
        return try reader.withValue(forKey: key) { value in
            guard let value else { return try body(nil) }
            return try key.withUnsafeBytes { key in
                try SealedEngine.withOpened(value, key: key, cipher: cipher, phase: phase) { try body($0) }
            }
        }
    }

    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        var values = try reader.values(forKeys: keys)
        for position in values.indices {
            guard let value = values[position], keys[position].withUnsafeBytes({ Keyspace.isSealed($0) }) else {
                continue
            }
            values[position] = try SealedEngine.open(value, key: keys[position], cipher: cipher, phase: phase)
        }
        return values
    }

    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        SealedCursor(base: try reader.cursor(in: range, reverse: reverse), cipher: cipher, phase: phase)
    }
}

/// A snapshot of an encrypted database; its engine's commits unwrap it for their conditions.
final class SealedSnapshot: SealedReader, StorageSnapshot {
    let snapshot: any StorageSnapshot

    init(base: any StorageSnapshot, cipher: any DatabaseCipher, phase: PlaintextPhase?) {
        snapshot = base
        super.init(base: base, cipher: cipher, phase: phase)
    }
}

/// A cursor of an encrypted database. A sealed value is opened only when it is read (a scan of
/// keys decrypts nothing), and once per position.
final class SealedCursor: StorageCursor {
    let base: any StorageCursor
    let cipher: any DatabaseCipher
    let phase: PlaintextPhase?
    /// The opened value of the current position, once read (its storage reused from one position
    /// to the next).
    private var opened: [UInt8] = []
    /// The byte count of the opened value at the start of ``opened``; nil until it is read.
    private var openedCount: Int?

    init(base: any StorageCursor, cipher: any DatabaseCipher, phase: PlaintextPhase?) {
        self.base = base
        self.cipher = cipher
        self.phase = phase
    }

    func next() throws -> Bool {
        openedCount = nil
        return try base.next()
    }

    func seek(_ key: [UInt8]) {
        openedCount = nil
        base.seek(key)
    }

    var isOnEntry: Bool { base.isOnEntry }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try base.withKey(body) }

    func deferStatusChecks() -> Bool { base.deferStatusChecks() }

    func checkStatus() throws { try base.checkStatus() }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        if let count = openedCount {
            return try opened.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
        guard base.isOnEntry else { return try base.withValue(body) }
        let opener = RecordOpener(cipher: cipher, phase: phase)
        var buffer = opened
        opened = []
        defer { opened = buffer }
        // One look at the key: whether its value is sealed, and the associated data opening it.
        let count = try base.withKey { key -> Int? in
            guard Keyspace.isSealed(key) else { return nil }
            return try base.withValue { value throws(BuriError) in try opener.open(value, key: key, into: &buffer) }
        }
        guard let count else { return try base.withValue(body) }
        openedCount = count
        return try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    /// The current value as stored, when it is sealed (what ``withValue(_:)`` would open), for
    /// opening later with ``opener``, on another thread; `nil` for a value read as stored (not
    /// sealed, or plaintext while the database is being encrypted). Valid until the cursor moves.
    func sealedValue() throws -> UnsafeRawBufferPointer? {
        guard base.isOnEntry, openedCount == nil, base.withKey({ Keyspace.isSealed($0) }) else { return nil }
        let value = try base.withValue { $0 }
        if let phase, phase.passes(value) { return nil }
        return value
    }

    /// Opens what ``sealedValue()`` lent.
    var opener: RecordOpener { RecordOpener(cipher: cipher, phase: phase) }
}

/// Opens sealed values apart from the cursor that read them: on the threads that decode a large
/// read (``ParallelDecoding``), so that the cipher's work is shared by every core as decoding is.
struct RecordOpener: Sendable {
    let cipher: any DatabaseCipher
    let phase: PlaintextPhase?

    /// Opens `value`, stored under `key`, into `buffer` (reused), returning the plaintext's byte
    /// count; a value the plaintext phase passes is copied as it is. A value that does not open is
    /// ``BuriError/authenticationFailed(bucket:key:reason:)``.
    func open(
        _ value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into buffer: inout [UInt8]
    ) throws(BuriError) -> Int {
        if let phase, phase.passes(value) {
            buffer = Array(value)
            return value.count
        }
        do throws(EncryptionFailure) {
            return try cipher.open(value, associatedData: key, into: &buffer)
        } catch {
            throw SealedEngine.rejection(key: Array(key), reason: error.description)
        }
    }
}

/// A batch of an encrypted database: sealed values are sealed as they are added.
final class SealedBatch: StorageBatch {
    let base: any StorageBatch
    let cipher: any DatabaseCipher
    /// Whether sealed values are padded for the engine's block compression (``sealedValuePadding(keyCount:valueCount:)``).
    let pads: Bool

    init(base: any StorageBatch, cipher: any DatabaseCipher, pads: Bool) {
        self.base = base
        self.cipher = cipher
        self.pads = pads
    }

    func put(_ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBytes { key in value.withUnsafeBytes { value in put(key, value) } }
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard Keyspace.isSealed(key) else { return base.put(key, value) }
        let sealed =
            pads
            ? cipher.seal(
                value, associatedData: key, padding: sealedValuePadding(keyCount: key.count, valueCount: value.count))
            : cipher.seal(value, associatedData: key)
        sealed.withUnsafeBytes { base.put(key, $0) }
    }

    func delete(_ key: [UInt8]) { base.delete(key) }
    func delete(_ key: UnsafeRawBufferPointer) { base.delete(key) }
    var count: Int { base.count }
    var byteSize: Int { base.byteSize }
}

/// The plaintext phase of a database being encrypted online (`docs/FORMAT.md` §4a, the key
/// `00 "encrypting"`): until every bucket has been copied into a sealed generation and every named
/// value sealed again, a record or named value that does not start with ``sealedValueMarker`` is
/// read as it is stored (a plaintext record starts with its layout version, a named value with a
/// CBOR head: neither is ever 0xE1 or 0xE2). Writes are sealed throughout. Ended by
/// ``BuriDatabase/finishEncryption(batchSize:progress:)`` in the commit that deletes the key.
final class PlaintextPhase: Sendable {
    private let active = Atomic<Bool>(true)
    /// Generations this process has seen replace a bucket that held plaintext by a sealed one.
    private let sealed = Mutex<Set<UInt32>>([])

    func markSealed(_ id: UInt32) { sealed.withLock { _ = $0.insert(id) } }
    func isSealed(_ id: UInt32) -> Bool { sealed.withLock { $0.contains(id) } }

    var isActive: Bool { active.load(ordering: .acquiring) }

    func end() { active.store(false, ordering: .releasing) }

    /// Whether `value` is read as stored: it is not sealed, and the phase has not ended.
    @inline(__always)
    func passes(_ value: UnsafeRawBufferPointer) -> Bool { !isSealedValueMarker(value.first) && isActive }
}
