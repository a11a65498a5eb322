import BuriStorage
import Synchronization

/// An engine over another whose reads fail on demand: after ``failAfter(reads:)`` the given number
/// of reads succeed and the next one throws ``StorageError/Code/ioError``, once. Every point read,
/// multi-key read, cursor made and cursor step counts as one read. Tests sweep the countdown over
/// every read an operation makes, so the operation fails at each point it can fail, and check that
/// it leaves nothing behind.
///
/// ```swift
/// let faulty = FaultyEngine(MemoryEngine())
/// let db = try BuriDatabase(engine: faulty, closesEngine: false)
/// faulty.failAfter(reads: 3)
/// _ = try? db.bucket(Person.self).delete(keys: ["a", "b"])   // fails at its 4th read
/// ```
public final class FaultyEngine: StorageEngine, @unchecked Sendable {
    // @unchecked: `base` is Sendable and the countdown is atomic.
    public let base: any StorageEngine
    /// Reads left before the injected failure; negative when none is armed.
    let countdown = Atomic<Int>(-1)
    /// Whether an armed failure has been thrown.
    let fired = Atomic<Bool>(false)

    public init(_ base: any StorageEngine) { self.base = base }

    /// Arms one failure: `reads` more reads succeed, the one after throws.
    public func failAfter(reads: Int) {
        fired.store(false, ordering: .relaxed)
        countdown.store(reads, ordering: .relaxed)
    }

    /// Disarms the failure; returns whether it was thrown.
    @discardableResult
    public func disarm() -> Bool {
        countdown.store(-1, ordering: .relaxed)
        return fired.load(ordering: .relaxed)
    }

    /// Counts one read; throws if it is the armed one.
    func read() throws {
        while true {
            let left = countdown.load(ordering: .relaxed)
            if left < 0 { return }
            if left == 0 {
                guard countdown.compareExchange(expected: 0, desired: -1, ordering: .relaxed).exchanged else {
                    continue
                }
                fired.store(true, ordering: .relaxed)
                throw StorageError(code: .ioError, message: "a read failure injected by the test", location: location)
            }
            if countdown.compareExchange(expected: left, desired: left - 1, ordering: .relaxed).exchanged { return }
        }
    }

    public var location: String { base.location }
    public var isShared: Bool { base.isShared }
    public var isClosed: Bool { base.isClosed }
    public func snapshot() throws -> any StorageSnapshot { FaultySnapshot(engine: self, base: try base.snapshot()) }
    public func latest() throws -> any StorageReader { FaultyReader(engine: self, base: try base.latest()) }
    public func makeBatch() -> any StorageBatch { base.makeBatch() }
    public func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)? { try base.grantLease(key: key) }
    public func leaseTimeToLive(_ id: UInt64) throws -> (remaining: Int, granted: Int)? {
        try base.leaseTimeToLive(id)
    }
    public func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws {
        var conditions = conditions
        // The base engine judges conditions against its own snapshots.
        if let faulty = conditions?.snapshot as? FaultySnapshot, let snapshot = faulty.base as? any StorageSnapshot {
            conditions?.snapshot = snapshot
        }
        try base.commit(batch, conditions: conditions, sync: sync)
    }
    public func close() { base.close() }
    public func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        base.observeCommits(observer)
    }
}

class FaultyReader: StorageReader {
    let engine: FaultyEngine
    let base: any StorageReader

    init(engine: FaultyEngine, base: any StorageReader) {
        self.engine = engine
        self.base = base
    }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try engine.read()
        return try base.withValue(forKey: key, body)
    }

    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        try engine.read()
        return try base.values(forKeys: keys)
    }

    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        try engine.read()
        return FaultyCursor(engine: engine, base: try base.cursor(in: range, reverse: reverse))
    }

    var prefersBatchedReads: Bool { base.prefersBatchedReads }
}

final class FaultySnapshot: FaultyReader, StorageSnapshot {}

final class FaultyCursor: StorageCursor {
    let engine: FaultyEngine
    let base: any StorageCursor

    init(engine: FaultyEngine, base: any StorageCursor) {
        self.engine = engine
        self.base = base
    }

    func next() throws -> Bool {
        try engine.read()
        return try base.next()
    }

    func seek(_ key: [UInt8]) { base.seek(key) }
    var isOnEntry: Bool { base.isOnEntry }
    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try base.withKey(body) }
    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R { try base.withValue(body) }
}
