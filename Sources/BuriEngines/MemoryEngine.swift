import BuriStorage
import Synchronization

/// An engine that keeps everything in memory, for tests, previews and caches: ordered, with real
/// snapshots (a reader never sees a later commit), atomic commits and condition checks. Its data
/// is gone when the last reference to it goes.
///
/// Several Buri databases may share one `MemoryEngine` (``isShared``), each with its own writer
/// lock, like several clients of one server: their commits are then checked against the keys each
/// writer read, exactly as a replicated engine checks them.
///
/// ```swift
/// let engine = MemoryEngine()
/// let batch = engine.makeBatch()
/// batch.put(Array("k".utf8), Array("v".utf8))
/// try engine.commit(batch, conditions: nil, sync: false)
/// ```
public final class MemoryEngine: StorageEngine, Sendable {
    struct State {
        var tree = PersistentTree()
        var revision: UInt64 = 0
        var closed = false
        /// The key of each lease that holds, by id.
        var leases: [UInt64: [UInt8]] = [:]
        var lastLease: UInt64 = 0
    }

    private let state = Mutex(State())
    private let observers = StorageCommitObservers()
    public let location: String
    public let isShared: Bool
    private let counter = ReadCounter()

    /// How many read requests this engine has answered when shared: point reads, multi-key reads,
    /// cursors opened and seeks. A shared engine stands in for one across a network, where each is
    /// a round trip (and says so with ``StorageReader/prefersBatchedReads``); tests use the count
    /// to show that Buri batches its reads there.
    public var readRequests: Int { counter.count.load(ordering: .relaxed) }

    /// A new, empty engine. With `shared`, writers must send conditions (for use by several
    /// databases at once).
    public init(name: String = ":memory:", shared: Bool = false) {
        location = name
        isShared = shared
    }

    public var isClosed: Bool { state.withLock { $0.closed } }

    /// The number of keys stored.
    public var keyCount: Int { state.withLock { $0.tree.count } }

    private func closedError() -> StorageError {
        StorageError(code: .databaseClosed, message: "call made after close()", location: location)
    }

    public func snapshot() throws -> any StorageSnapshot {
        let frozen = state.withLock { state -> (PersistentTree, UInt64)? in
            state.closed ? nil : (state.tree, state.revision)
        }
        guard let (tree, revision) = frozen else { throw closedError() }
        return MemorySnapshot(tree: tree, revision: revision, counter: isShared ? counter : nil)
    }

    public func latest() throws -> any StorageReader { try snapshot() }

    public func makeBatch() -> any StorageBatch { MemoryBatch() }

    public func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws {
        guard let batch = batch as? MemoryBatch else {
            throw StorageError(code: .invalidArgument, message: "a batch made by another engine", location: location)
        }
        let failure = state.withLock { state -> StorageError? in
            if state.closed { return closedError() }
            if let conditions, !conditions.isEmpty {
                guard let seen = conditions.snapshot as? MemorySnapshot else {
                    return StorageError(
                        code: .invalidArgument, message: "conditions read from another engine's snapshot",
                        location: location)
                }
                if let changed = Self.firstChange(conditions, seen: seen.tree, now: state.tree) {
                    return StorageError(
                        code: .conflict, message: "key \(changed) changed since it was read", location: location)
                }
            }
            guard !batch.operations.isEmpty else { return nil }
            apply(batch.operations, to: &state)
            return nil
        }
        if let failure { throw failure }
    }

    /// Applies `operations` as one commit and tells the observers. Called under the state lock.
    private func apply(_ operations: [MemoryBatch.Operation], to state: inout State) {
        state.revision += 1
        for operation in operations {
            if let value = operation.value {
                state.tree.put(operation.key, value: value, revision: state.revision)
            } else {
                state.tree.remove(operation.key)
            }
        }
        // Still under the lock: observers see commits one at a time, in the order applied.
        if !observers.isEmpty {
            let changes = operations.map { operation -> StorageCommitEvent.Change in
                if let value = operation.value { return .put(key: operation.key, value: value) }
                return .delete(key: operation.key)
            }
            observers.notify(StorageCommitEvent(changes: changes, revision: state.revision))
        }
    }

    /// On a shared engine, a lease whose key is put now (one commit) and deleted when it is
    /// released or ``expireLease(_:)`` ends it; it never expires on its own (nothing here stands
    /// for a network to lose). `nil` on an engine that is not shared.
    public func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)? {
        guard isShared else { return nil }
        let granted = state.withLock { state -> (UInt64, [UInt8])? in
            if state.closed { return nil }
            state.lastLease += 1
            let id = state.lastLease
            let leaseKey = key(id)
            state.leases[id] = leaseKey
            apply([MemoryBatch.Operation(key: leaseKey, value: [])], to: &state)
            return (id, leaseKey)
        }
        guard let (id, leaseKey) = granted else { throw closedError() }
        return MemoryLease(engine: self, id: id, key: leaseKey)
    }

    /// Ends lease `id` as if its holder had stopped renewing it (its process died): its key is
    /// deleted in one commit. For tests of what other clients do with a dead client's work.
    ///
    /// ```swift
    /// let engine = MemoryEngine(shared: true)
    /// let lease = try engine.grantLease { Array("owner-\($0)".utf8) }
    /// engine.expireLease(lease!.id)     // its key is gone; lease!.isHeld == false
    /// ```
    public func expireLease(_ id: UInt64) {
        state.withLock { state in
            guard !state.closed, let key = state.leases.removeValue(forKey: id) else { return }
            apply([MemoryBatch.Operation(key: key, value: nil)], to: &state)
        }
    }

    /// The ids of the leases that hold.
    public var liveLeases: [UInt64] { state.withLock { $0.leases.keys.sorted() } }

    public func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        // Registered under the commit lock: the observer sees exactly the commits applied after.
        state.withLock { _ in observers.add(observer) }
    }

    /// The number of commit observers registered (for tests of observation life cycles).
    public var commitObserverCount: Int { observers.observerCount }

    public func close() {
        state.withLock { state in
            state.closed = true
            state.tree = PersistentTree()
        }
    }

    /// The first key (as hex) among the conditions whose state differs between `seen` and `now`.
    static func firstChange(_ conditions: StorageConditions, seen: PersistentTree, now: PersistentTree) -> String? {
        for key in conditions.keys where seen.node(for: key)?.storedRevision != now.node(for: key)?.storedRevision {
            return hex(key)
        }
        for range in conditions.ranges {
            let before = TreeCursor(root: seen.root, range: range, reverse: false)
            let after = TreeCursor(root: now.root, range: range, reverse: false)
            while true {
                let a = before.next(), b = after.next()
                if !a && !b { break }
                guard a, b, let x = before.currentNode, let y = after.currentNode,
                    compareBytes(x.storedKey.raw, y.storedKey.raw) == 0, x.storedRevision == y.storedRevision
                else {
                    return "in range starting \(hex(range.start ?? []))"
                }
            }
        }
        return nil
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.prefix(48).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() + (bytes.count > 48 ? "…" : "")
    }
}

/// A lease of a shared ``MemoryEngine``.
final class MemoryLease: StorageLease {
    let engine: MemoryEngine
    let id: UInt64
    let key: [UInt8]

    init(engine: MemoryEngine, id: UInt64, key: [UInt8]) {
        self.engine = engine
        self.id = id
        self.key = key
    }

    var isHeld: Bool { engine.liveLeases.contains(id) }
    func release() { engine.expireLease(id) }
}

/// A frozen view of a ``MemoryEngine``: the tree as it was.
final class MemorySnapshot: StorageSnapshot, @unchecked Sendable {
    // @unchecked: the tree it holds is never mutated (persistent); the counter is atomic.
    let tree: PersistentTree
    let revision: UInt64
    /// On a shared engine (a stand-in for a remote one): where read requests are counted.
    let counter: ReadCounter?

    init(tree: PersistentTree, revision: UInt64, counter: ReadCounter?) {
        self.tree = tree
        self.revision = revision
        self.counter = counter
    }

    var prefersBatchedReads: Bool { counter != nil }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        counter?.add()
        guard let node = tree.node(for: key), let value = node.storedValue else { return try body(nil) }
        return try withExtendedLifetime(node) { try body(value.raw) }
    }

    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        counter?.add()
        return keys.map { key in tree.node(for: key)?.storedValue.map { Array($0.raw) } }
    }

    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        counter?.add()
        return MemoryCursor(TreeCursor(root: tree.root, range: range, reverse: reverse), counter: counter)
    }
}

/// Counts read requests of a shared memory engine.
final class ReadCounter: Sendable {
    let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
}

/// A cursor over a frozen tree; lends keys and values from the nodes, which it keeps alive.
final class MemoryCursor: StorageCursor {
    let walker: TreeCursor
    let counter: ReadCounter?

    init(_ walker: TreeCursor, counter: ReadCounter? = nil) {
        self.walker = walker
        self.counter = counter
    }

    func next() throws -> Bool {
        // Deletion markers never appear in an engine's tree, only in pending-write trees, which
        // are read through OverlayReader.
        walker.next()
    }

    func seek(_ key: [UInt8]) {
        counter?.add()
        walker.seek(key)
    }

    var isOnEntry: Bool { walker.currentNode != nil }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard let node = walker.currentNode else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(node.storedKey.raw)
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard let node = walker.currentNode, let value = node.storedValue else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(value.raw)
    }
}

/// Operations in order; the engine applies them under its lock.
final class MemoryBatch: StorageBatch {
    struct Operation {
        var key: [UInt8]
        var value: [UInt8]?
    }

    var operations: [Operation] = []
    private(set) var byteSize = 0

    var count: Int { operations.count }

    func put(_ key: [UInt8], _ value: [UInt8]) {
        operations.append(Operation(key: key, value: value))
        byteSize += key.count + value.count
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) { put(Array(key), Array(value)) }

    func delete(_ key: [UInt8]) {
        operations.append(Operation(key: key, value: nil))
        byteSize += key.count
    }

    func delete(_ key: UnsafeRawBufferPointer) { delete(Array(key)) }
}
