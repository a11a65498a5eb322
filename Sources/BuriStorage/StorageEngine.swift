import Synchronization

/// The narrow interface every storage engine gives Buri: an ordered map from byte strings to
/// byte strings with consistent reads and atomic, optionally conditional, commits.
///
/// Buri's buckets, indexes, queries, consistency check and index evolution use nothing else, so
/// the same database logic runs on LevelDB (`LevelDBEngine`), in memory (`MemoryEngine`, both in `BuriEngines`) and
/// on engines whose reads cross a network. Every read happens through a ``StorageReader``:
/// a ``StorageSnapshot`` (one consistent point in time) or, for a writer on an engine nobody else
/// writes to, the engine's ``latest()`` state. Every write is one ``StorageBatch`` applied
/// atomically by ``commit(_:conditions:sync:)``.
///
/// ```swift
/// let engine = MemoryEngine()
/// let batch = engine.makeBatch()
/// batch.put(Array("a".utf8), Array("1".utf8))
/// try engine.commit(batch, conditions: nil, sync: false)
/// let snapshot = try engine.snapshot()
/// let value = try snapshot.get(Array("a".utf8))      // [0x31]
/// ```
///
/// ## What an engine promises
/// - Keys are ordered bytewise; a cursor never leaves its range.
/// - A snapshot never sees a commit made after it was taken, and sees each earlier commit whole.
/// - A commit is all or nothing, also across a crash of the process (durable engines) once it returns.
/// - A commit whose ``StorageConditions`` no longer hold fails with ``StorageError/Code/conflict``
///   and changes nothing. An engine that only this process writes to (``isShared`` false), under
///   the caller's writer lock, may treat conditions as always holding.
/// - A read that meets damaged data throws; it never returns a shorter result as if complete.
/// - Every commit applied, by any client, is reported to ``observeCommits(_:)`` observers once,
///   whole, in the order applied; a failed commit is never reported. With no observers, commits
///   build no event.
public protocol StorageEngine: AnyObject, Sendable {
    /// Where the data lives: a directory, `:memory:`, a cluster address.
    var location: String { get }
    /// Whether other clients (processes, handles) may commit to the same data concurrently, so
    /// that writers must send conditions and be ready to retry on ``StorageError/Code/conflict``.
    var isShared: Bool { get }
    /// Whether ``close()`` has been called.
    var isClosed: Bool { get }

    /// A consistent view of the data as it is now.
    func snapshot() throws -> any StorageSnapshot
    /// The current data, read without a snapshot: what a writer holding the only writer lock of an
    /// unshared engine reads before it commits. Engines may return a fresh snapshot.
    func latest() throws -> any StorageReader
    /// An empty batch to fill and pass to ``commit(_:conditions:sync:)``.
    func makeBatch() -> any StorageBatch
    /// Applies `batch` atomically, if `conditions` (when given) still hold. `sync` asks for the
    /// commit to be on stable storage before returning.
    func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws
    /// Releases the engine. Readers already made may finish; later calls throw
    /// ``StorageError/Code/databaseClosed``. Idempotent.
    func close()

    /// Rewrites the stored data of `range` (all of it when `nil`) compactly. Engines without
    /// compaction do nothing.
    func compact(_ range: KeyRange?) throws
    /// An engine-specific statistic by name (LevelDB: `leveldb.stats`, `leveldb.sstables`, …).
    func property(_ name: String) throws -> String?
    /// The approximate stored size of each range, in bytes (0 where the engine cannot tell).
    func approximateSizes(of ranges: [KeyRange]) throws -> [UInt64]
    /// Whether the engine keeps a block of stored data in its cache only when the block
    /// compressed (LevelDB: an uncompressed block of a memory-mapped table is read, and its
    /// checksum verified, at every access). Values that do not compress (sealed ones) are then
    /// padded so that their blocks do. The default: `false`.
    var cachesOnlyCompressedBlocks: Bool { get }

    /// Calls `observer` once per commit applied after this call, in commit order, from any thread, never
    /// concurrently with itself; including commits by other clients on shared/replicated engines.
    ///
    /// The observer runs while the engine serialises its commits: it must only enqueue the event
    /// (never read or write the engine). The observation ends when the returned value is cancelled
    /// or released.
    ///
    /// ```swift
    /// let observation = engine.observeCommits { event in queue.append(event) }
    /// defer { observation.cancel() }
    /// ```
    func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation

    /// On a shared engine, a claim this client renews while it runs (an etcd lease): the engine
    /// puts `key(id)` (empty value) bound to the claim, and deletes it when the claim ends, because
    /// ``StorageLease/release()`` was called or because the client stopped renewing it (its process
    /// died, or lost the cluster for longer than the claim's time to live). Other clients tell
    /// whether the holder is alive by reading that key, and a commit that reads it (as a condition)
    /// applies only while the claim holds. `nil` on engines only one process writes to (the default),
    /// where the process's own lock says the same.
    ///
    /// ```swift
    /// if let lease = try engine.grantLease(key: { id in Array("owner-\(id)".utf8) }) {
    ///     defer { lease.release() }
    ///     // commits conditioned on lease.key being present
    /// }
    /// ```
    func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)?

    /// How long lease `id` (granted by any client) has left to live and the time to live it was
    /// granted, in whole seconds, as the engine tells it; `nil` when it has ended or the engine
    /// does not tell (the default). A holder that renews it makes `remaining` go up again; one
    /// that died lets it run down.
    ///
    /// ```swift
    /// if let ttl = try engine.leaseTimeToLive(id) { print("\(ttl.remaining) of \(ttl.granted) s") }
    /// ```
    func leaseTimeToLive(_ id: UInt64) throws -> (remaining: Int, granted: Int)?
}

/// A claim granted by ``StorageEngine/grantLease(key:)``: its ``key`` exists exactly while it holds.
public protocol StorageLease: AnyObject, Sendable {
    /// The claim's id in the engine (nonzero, never given twice by one engine).
    var id: UInt64 { get }
    /// The key that exists while the claim holds.
    var key: [UInt8] { get }
    /// Whether the claim may still hold: `false` once it was released, or the engine found it
    /// ended (it cannot be renewed again; grant a new one).
    var isHeld: Bool { get }
    /// Ends the claim now (its key is deleted) and stops renewing it. Idempotent.
    func release()
}

extension StorageEngine {
    public func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)? { nil }
    public func leaseTimeToLive(_ id: UInt64) throws -> (remaining: Int, granted: Int)? { nil }
    public func compact(_ range: KeyRange?) throws {}
    public func property(_ name: String) throws -> String? { nil }
    public func approximateSizes(of ranges: [KeyRange]) throws -> [UInt64] { ranges.map { _ in 0 } }
    public var cachesOnlyCompressedBlocks: Bool { false }
}

/// Reads of one view of the data: point reads, multi-key reads and ordered range scans.
///
/// Values are lent without copying where the engine can: a buffer passed to `body` is valid only
/// inside it, and a cursor's key and value only until the cursor moves.
public protocol StorageReader: AnyObject {
    /// Lends the value stored for `key` (or `nil`) to `body`.
    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R
    /// The values of many keys at once, in the order asked: one round trip on engines that cross a
    /// network. `nil` where a key has no value.
    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?]
    /// A cursor over `range`, in key order or reversed, positioned before its first entry.
    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor
    /// Whether each read is a round trip (an engine across a network), so that callers should
    /// gather the keys they need and read them with one ``values(forKeys:)`` call rather than one
    /// point read or seek per key. Default `false`.
    var prefersBatchedReads: Bool { get }
}

extension StorageReader {
    public var prefersBatchedReads: Bool { false }

    /// A copy of the value stored for `key`, or `nil`.
    public func get(_ key: [UInt8]) throws -> [UInt8]? {
        try withValue(forKey: key) { $0.map { Array($0) } }
    }

    /// Whether a value is stored for `key`.
    public func contains(_ key: [UInt8]) throws -> Bool {
        try withValue(forKey: key) { $0 != nil }
    }

    public func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        var result: [[UInt8]?] = []
        result.reserveCapacity(keys.count)
        for key in keys { result.append(try get(key)) }
        return result
    }

    /// A forward cursor over `range`.
    public func cursor(in range: KeyRange) throws -> any StorageCursor {
        try cursor(in: range, reverse: false)
    }
}

/// A reader fixed at one point in time: it never sees a later commit.
public protocol StorageSnapshot: StorageReader {}

/// A position that moves through the keys of one range, forward or in reverse, and never past the
/// range's ends. It starts before its first entry.
///
/// ```swift
/// let cursor = try snapshot.cursor(in: .prefix(prefix), reverse: false)
/// while try cursor.next() { cursor.withKey { print($0.count) } }
/// ```
public protocol StorageCursor: AnyObject {
    /// Moves onto the next entry; `false` when the range is exhausted. Throws when the engine met
    /// damaged data or an I/O error while moving: a scan never ends early without an error.
    func next() throws -> Bool
    /// Positions the cursor so that the following ``next()`` returns the first entry at or after
    /// `key` (in reverse: the last entry at or before `key`), clamped to the range.
    func seek(_ key: [UInt8])
    /// Whether the cursor is on an entry (the last ``next()`` returned `true`).
    var isOnEntry: Bool { get }
    /// Lends the current key to `body` (empty when not on an entry). Valid until the cursor moves.
    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// Lends the current value to `body` (empty when not on an entry). Valid until the cursor moves.
    /// Throws when the value cannot be read as stored: an engine that decrypts values (an
    /// encrypted Buri database) opens them only when asked, and a value that fails its
    /// authentication fails here.
    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
    /// Asks the cursor to check the engine's error status only where its walk stops — at the
    /// end of its range — and at ``checkStatus()``, instead of after every ``next()``; returns
    /// whether it will. A walk over many small entries runs faster so (LevelDB reads the status
    /// of every table iterator each time). The caller must then call ``checkStatus()`` before it
    /// uses what it read as complete: an engine that skipped damaged data while moving reports it
    /// there. Engines whose checks cost nothing keep checking at every step and return `false`
    /// (the default).
    func deferStatusChecks() -> Bool
    /// Throws any error the engine met since the cursor was made that ``next()`` has not thrown
    /// yet (see ``deferStatusChecks()``); nothing for a cursor that checks at every step.
    func checkStatus() throws
}

extension StorageCursor {
    public func deferStatusChecks() -> Bool { false }
    public func checkStatus() throws {}
    /// A copy of the current key.
    public var key: [UInt8] { withKey { Array($0) } }
    /// A copy of the current value.
    public var value: [UInt8] {
        get throws { try withValue { Array($0) } }
    }
}

/// Puts and deletes to apply together. Later operations on a key win over earlier ones.
public protocol StorageBatch: AnyObject {
    func put(_ key: [UInt8], _ value: [UInt8])
    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer)
    func delete(_ key: [UInt8])
    func delete(_ key: UnsafeRawBufferPointer)
    /// The number of operations.
    var count: Int { get }
    /// The bytes of keys and values the batch carries (what engines with request limits count).
    var byteSize: Int { get }
}

extension StorageBatch {
    public var isEmpty: Bool { count == 0 }
}

/// What a writer read, which must be unchanged when its commit applies: the optimistic
/// concurrency check that keeps indexes exact when several clients write one database.
///
/// `keys` are single keys whose value (or absence) the writer relied on; `ranges` are ranges in
/// which no key may have been added or changed (a unique index's value, scanned for holders).
/// Both are judged against `snapshot`, the view the writer read them from.
public struct StorageConditions {
    public var snapshot: any StorageSnapshot
    public var keys: [[UInt8]]
    public var ranges: [KeyRange]

    public init(snapshot: any StorageSnapshot, keys: [[UInt8]] = [], ranges: [KeyRange] = []) {
        self.snapshot = snapshot
        self.keys = keys
        self.ranges = ranges
    }

    public var isEmpty: Bool { keys.isEmpty && ranges.isEmpty }
}

// MARK: Observing commits

/// One committed change of the stored data, as observers see it: every key the commit put or
/// deleted, in the order the engine applied the commits.
///
/// ```swift
/// let observation = engine.observeCommits { event in
///     for case .put(let key, _) in event.changes { print(event.revision, key.count) }
/// }
/// ```
public struct StorageCommitEvent: Sendable {
    /// One key the commit wrote.
    public enum Change: Sendable, Hashable {
        case put(key: [UInt8], value: [UInt8])
        case delete(key: [UInt8])

        /// The key put or deleted.
        public var key: [UInt8] {
            switch self {
            case .put(let key, _), .delete(let key): key
            }
        }
    }

    /// The batch's operations in the order they were added (a later one on the same key wins).
    public var changes: [Change]
    /// Increases with every commit the engine applies (LevelDB/memory: a counter; etcd: the revision).
    public var revision: UInt64

    public init(changes: [Change], revision: UInt64) {
        self.changes = changes
        self.revision = revision
    }
}

/// Cancels an observation when cancelled or released.
///
/// ```swift
/// let observation = engine.observeCommits { _ in }
/// observation.cancel()      // or let it go: releasing it cancels too
/// ```
public final class StorageObservation: Sendable {
    private let cancelAction: Mutex<(@Sendable () -> Void)?>

    /// An observation that runs `cancel` once, at the first ``cancel()`` or when released.
    public init(cancel: @escaping @Sendable () -> Void) {
        cancelAction = Mutex(cancel)
    }

    /// Ends the observation: the observer is released and called no more once a call in
    /// progress has returned. Idempotent.
    public func cancel() {
        let action = cancelAction.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { cancel() }
}

/// The observers of one engine's commits, for engines that apply commits in this process: the
/// engine calls ``notify(_:)`` while its commits are serialised, right after applying one.
/// With no observers, ``isEmpty`` is one atomic load and no event is built.
///
/// ```swift
/// let observers = StorageCommitObservers()
/// let observation = observers.add { event in print(event.revision) }
/// if !observers.isEmpty { observers.notify(StorageCommitEvent(changes: [], revision: 1)) }
/// ```
public final class StorageCommitObservers: Sendable {
    private struct Registry {
        var next: UInt64 = 0
        var observers: [UInt64: @Sendable (StorageCommitEvent) -> Void] = [:]
    }

    private let registry = Mutex(Registry())
    private let count = Atomic<Int>(0)

    public init() {}

    /// Whether nobody observes: the engine then builds no event.
    @inline(__always)
    public var isEmpty: Bool { count.load(ordering: .acquiring) == 0 }

    /// The number of observers registered.
    public var observerCount: Int { count.load(ordering: .acquiring) }

    /// Registers `observer`; the observation removes it when cancelled or released.
    public func add(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        let id = registry.withLock { registry -> UInt64 in
            registry.next += 1
            registry.observers[registry.next] = observer
            count.store(registry.observers.count, ordering: .releasing)
            return registry.next
        }
        return StorageObservation { [weak self] in
            guard let self else { return }
            self.registry.withLock { registry in
                registry.observers[id] = nil
                self.count.store(registry.observers.count, ordering: .releasing)
            }
        }
    }

    /// Calls every observer with `event`, in registration order. The caller serialises its calls
    /// (engines: under their commit lock), so each observer sees events one at a time, in order.
    public func notify(_ event: StorageCommitEvent) {
        let observers = registry.withLock { registry in
            registry.observers.sorted { $0.key < $1.key }.map(\.value)
        }
        for observer in observers { observer(event) }
    }
}
