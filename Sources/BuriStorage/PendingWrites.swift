/// The writes of a transaction not yet committed, in key order, and a reader that sees them over
/// the transaction's snapshot: how a transaction reads its own writes.
///
/// ```swift
/// let pending = PendingWrites()
/// pending.put(key, value)
/// let reader = pending.reader(over: snapshot)   // sees `value` under `key`
/// try engine.commit(pending.batch(for: engine), conditions: nil, sync: false)
/// ```
///
/// It is itself a ``StorageBatch``, so code that fills a batch can fill a transaction instead.
public final class PendingWrites: StorageBatch {
    var tree = PersistentTree()
    public private(set) var byteSize = 0

    public init() {}

    /// The number of keys written (deletes included).
    public var count: Int { tree.count }

    public func put(_ key: [UInt8], _ value: [UInt8]) {
        tree.put(key, value: value)
        byteSize += key.count + value.count
    }

    public func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        tree.put(key, value: value)
        byteSize += key.count + value.count
    }

    public func delete(_ key: [UInt8]) {
        tree.put(key, value: nil)
        byteSize += key.count
    }

    public func delete(_ key: UnsafeRawBufferPointer) {
        tree.put(key, value: nil)
        byteSize += key.count
    }

    /// Forgets every write.
    public func removeAll() {
        tree = PersistentTree()
        byteSize = 0
    }

    /// The writes as they stand now, to return to with ``rollback(to:)``: O(1), because the tree
    /// is persistent (later writes copy the nodes they change instead of changing these).
    ///
    /// ```swift
    /// let before = pending.savepoint()
    /// pending.put(key, value)
    /// pending.rollback(to: before)    // `key` is as it was
    /// ```
    public func savepoint() -> Savepoint { Savepoint(tree: tree, byteSize: byteSize) }

    /// Puts the writes back as they were at `savepoint`: every write made since is forgotten.
    public func rollback(to savepoint: Savepoint) {
        tree = savepoint.tree
        byteSize = savepoint.byteSize
    }

    /// The writes of a ``PendingWrites`` at one moment (see ``PendingWrites/savepoint()``).
    public struct Savepoint: Sendable {
        let tree: PersistentTree
        let byteSize: Int
    }

    /// What the transaction wrote for `key`: `.some(nil)` for a delete, `nil` when untouched.
    public func lookup(_ key: [UInt8]) -> [UInt8]?? { tree.lookup(key) }

    /// A reader of `base` with these writes applied on top (a frozen copy of them).
    public func reader(over base: any StorageReader) -> any StorageReader {
        OverlayReader(base: base, pending: tree)
    }

    /// The writes as one batch of `engine`, in key order.
    public func batch(for engine: any StorageEngine) -> any StorageBatch {
        let batch = engine.makeBatch()
        let walker = TreeCursor(root: tree.root, range: .all, reverse: false)
        while walker.next() {
            guard let node = walker.current else { break }
            if let value = node.value { batch.put(node.key.raw, value.raw) } else { batch.delete(node.key.raw) }
        }
        return batch
    }
}

/// A reader that sees pending writes over a base reader.
final class OverlayReader: StorageReader {
    let base: any StorageReader
    let pending: PersistentTree

    init(base: any StorageReader, pending: PersistentTree) {
        self.base = base
        self.pending = pending
    }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        if let node = pending.node(for: key) {
            guard let value = node.value else { return try body(nil) }
            return try withExtendedLifetime(node) { try body(value.raw) }
        }
        return try base.withValue(forKey: key, body)
    }

    var prefersBatchedReads: Bool { base.prefersBatchedReads }

    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        // Keys the transaction wrote are answered here; the rest in one call to the base.
        var result = [[UInt8]??](repeating: nil, count: keys.count)
        var missing: [[UInt8]] = []
        var missingAt: [Int] = []
        for (position, key) in keys.enumerated() {
            if let node = pending.node(for: key) {
                result[position] = .some(node.value.map { Array($0.raw) })
            } else {
                missing.append(key)
                missingAt.append(position)
            }
        }
        if !missing.isEmpty {
            for (position, value) in zip(missingAt, try base.values(forKeys: missing)) {
                result[position] = .some(value)
            }
        }
        return result.map { $0 ?? nil }
    }

    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        if pending.count == 0 { return try base.cursor(in: range, reverse: reverse) }
        return OverlayCursor(
            base: try base.cursor(in: range, reverse: reverse),
            pending: TreeCursor(root: pending.root, range: range, reverse: reverse),
            reverse: reverse)
    }
}

/// Merges a base cursor with a cursor over pending writes: a pending write replaces the base
/// entry of the same key, a pending delete hides it.
final class OverlayCursor: StorageCursor {
    let base: any StorageCursor
    let pending: TreeCursor
    let reverse: Bool
    /// Whether each side is on an entry not yet consumed.
    private var baseReady = false
    private var pendingReady = false
    private var started = false
    private enum Source { case none, base, pending }
    private var source: Source = .none

    init(base: any StorageCursor, pending: TreeCursor, reverse: Bool) {
        self.base = base
        self.pending = pending
        self.reverse = reverse
    }

    var isOnEntry: Bool { source != .none }

    func seek(_ key: [UInt8]) {
        base.seek(key)
        pending.seek(key)
        started = false
        source = .none
    }

    func next() throws -> Bool {
        if !started {
            baseReady = try base.next()
            pendingReady = pending.next()
            started = true
        } else {
            switch source {
            case .base: baseReady = try base.next()
            case .pending: pendingReady = pending.next()
            case .none: break
            }
        }
        while true {
            switch (baseReady, pendingReady) {
            case (false, false):
                source = .none
                return false
            case (true, false):
                source = .base
                return true
            case (false, true):
                guard let node = pending.current else { pendingReady = false; continue }
                if node.value == nil { pendingReady = pending.next(); continue }
                source = .pending
                return true
            case (true, true):
                guard let node = pending.current else { pendingReady = false; continue }
                var order = base.withKey { compareBytes($0, node.key.raw) }
                if reverse { order = -order }
                if order < 0 {
                    source = .base
                    return true
                }
                if order == 0 { baseReady = try base.next() }  // the pending write replaces it
                if node.value == nil { pendingReady = pending.next(); continue }
                source = .pending
                return true
            }
        }
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch source {
        case .base: return try base.withKey(body)
        case .pending:
            guard let node = pending.current else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            return try body(node.key.raw)
        case .none: return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        switch source {
        case .base: return try base.withValue(body)
        case .pending:
            guard let node = pending.current, let value = node.value else {
                return try body(UnsafeRawBufferPointer(start: nil, count: 0))
            }
            return try body(value.raw)
        case .none: return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func deferStatusChecks() -> Bool { base.deferStatusChecks() }

    func checkStatus() throws { try base.checkStatus() }
}
