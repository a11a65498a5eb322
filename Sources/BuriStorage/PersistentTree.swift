/// Bytes at a stable address for as long as the object lives, so cursors can lend them without
/// copying. Immutable, so copies of a tree share them freely across threads.
package final class StableBytes: @unchecked Sendable {
    // @unchecked: written once in init, never mutated, freed in deinit.
    package let buffer: UnsafeMutableRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(bytes.count, 1), alignment: 1)
        if let base = bytes.baseAddress, bytes.count > 0 {
            buffer.baseAddress?.copyMemory(from: base, byteCount: bytes.count)
        }
        count = bytes.count
    }

    convenience init(_ bytes: [UInt8]) {
        self.init(bytes.withUnsafeBytes { UnsafeRawBufferPointer($0) })
    }

    package let count: Int

    package var raw: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: buffer.baseAddress, count: count) }

    deinit { buffer.deallocate() }
}

/// One node of a ``PersistentTree``. Nodes reachable from a published root are never mutated;
/// a tree mutates only nodes no one else references, and copies the rest (path copying).
package final class TreeNode: @unchecked Sendable {
    // @unchecked: a node is mutated only while uniquely referenced by the one tree changing it.
    //
    // The stored properties stay internal: with every access inside this module the compiler
    // checks exclusive access statically. Other modules (the memory engine) read them through the
    // `package` accessors below; making the stored properties `package` put a dynamic exclusivity
    // check on every access in the tree's own insert and walk (about 10% more instructions).
    var key: StableBytes
    /// The value; `nil` marks a deletion (in trees that record pending deletes).
    var value: StableBytes?
    /// The engine revision that last wrote this key.
    var revision: UInt64
    var left: TreeNode?
    var right: TreeNode?
    var height: Int32 = 1

    /// The key, for other modules (read-only).
    package var storedKey: StableBytes { key }
    /// The value (`nil`: a deletion), for other modules (read-only).
    package var storedValue: StableBytes? { value }
    /// The engine revision that last wrote this key, for other modules (read-only).
    package var storedRevision: UInt64 { revision }

    init(key: StableBytes, value: StableBytes?, revision: UInt64) {
        self.key = key
        self.value = value
        self.revision = revision
    }

    func copy() -> TreeNode {
        let node = TreeNode(key: key, value: value, revision: revision)
        node.left = left
        node.right = right
        node.height = height
        return node
    }
}

/// An ordered map from byte strings to byte strings, persistent: copying the tree is O(1) and
/// copies never see each other's changes, which is how `MemoryEngine` (in `BuriEngines`) takes snapshots. Changes
/// made while a node is referenced by one tree only happen in place; shared nodes are copied.
/// An AVL tree, so every operation is O(log n).
///
/// ```swift
/// var tree = PersistentTree()
/// tree.put(Array("a".utf8), value: Array("1".utf8))
/// let frozen = tree                 // a snapshot
/// tree.remove(Array("a".utf8))      // `frozen` still has "a"
/// ```
public struct PersistentTree: @unchecked Sendable {
    // @unchecked: the nodes a copy can see are never mutated again (see TreeNode).
    package var root: TreeNode?
    /// The number of keys (deletion markers included).
    public private(set) var count = 0

    public init() {}

    /// Stores `value` (or a deletion marker, for `nil`) under `key`, written at `revision`.
    public mutating func put(_ key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer?, revision: UInt64 = 0) {
        let stored = value.map { StableBytes($0) }
        if Self.insert(&root, key, value: stored, revision: revision) { count += 1 }
    }

    public mutating func put(_ key: [UInt8], value: [UInt8]?, revision: UInt64 = 0) {
        key.withUnsafeBytes { rawKey in
            if let value {
                value.withUnsafeBytes { put(rawKey, value: $0, revision: revision) }
            } else {
                put(rawKey, value: nil, revision: revision)
            }
        }
    }

    /// Removes `key`; returns whether it was there.
    @discardableResult
    public mutating func remove(_ key: UnsafeRawBufferPointer) -> Bool {
        guard node(for: key) != nil else { return false }
        Self.remove(&root, key)
        count -= 1
        return true
    }

    @discardableResult
    public mutating func remove(_ key: [UInt8]) -> Bool {
        key.withUnsafeBytes { remove($0) }
    }

    /// The node holding `key`, if any.
    package func node(for key: UnsafeRawBufferPointer) -> TreeNode? {
        var current = root
        while let node = current {
            let order = compareBytes(key, node.key.raw)
            if order == 0 { return node }
            current = order < 0 ? node.left : node.right
        }
        return nil
    }

    package func node(for key: [UInt8]) -> TreeNode? {
        key.withUnsafeBytes { node(for: $0) }
    }

    /// Whether `key` is in the tree (a deletion marker counts).
    public func containsKey(_ key: [UInt8]) -> Bool { node(for: key) != nil }

    /// The value of `key`: `.some(nil)` for a deletion marker, `nil` when the key is absent.
    public func lookup(_ key: [UInt8]) -> [UInt8]?? {
        guard let node = node(for: key) else { return nil }
        return .some(node.value.map { Array($0.raw) })
    }

    // MARK: AVL with path copying

    @inline(__always)
    static func height(_ node: TreeNode?) -> Int32 { node?.height ?? 0 }

    /// Makes the node in `slot` safe to mutate: copied unless this tree is its only owner.
    @inline(__always)
    static func uniquify(_ slot: inout TreeNode?) {
        if !isKnownUniquelyReferenced(&slot), let node = slot { slot = node.copy() }
    }

    @inline(__always)
    static func fix(_ node: TreeNode) {
        node.height = Swift.max(height(node.left), height(node.right)) + 1
    }

    static func rotateRight(_ slot: inout TreeNode?) {
        uniquify(&slot)
        guard let top = slot else { return }
        uniquify(&top.left)
        guard let pivot = top.left else { return }
        top.left = pivot.right
        fix(top)
        pivot.right = top
        fix(pivot)
        slot = pivot
    }

    static func rotateLeft(_ slot: inout TreeNode?) {
        uniquify(&slot)
        guard let top = slot else { return }
        uniquify(&top.right)
        guard let pivot = top.right else { return }
        top.right = pivot.left
        fix(top)
        pivot.left = top
        fix(pivot)
        slot = pivot
    }

    /// Restores the AVL balance at `slot`, whose node this tree owns uniquely.
    static func rebalance(_ slot: inout TreeNode?) {
        guard let node = slot else { return }
        fix(node)
        let balance = height(node.left) - height(node.right)
        if balance > 1 {
            if let left = node.left, height(left.left) < height(left.right) { rotateLeft(&node.left) }
            rotateRight(&slot)
        } else if balance < -1 {
            if let right = node.right, height(right.right) < height(right.left) { rotateRight(&node.right) }
            rotateLeft(&slot)
        }
    }

    /// Inserts or replaces; returns whether a key was added.
    static func insert(
        _ slot: inout TreeNode?, _ key: UnsafeRawBufferPointer, value: StableBytes?, revision: UInt64
    ) -> Bool {
        guard slot != nil else {
            slot = TreeNode(key: StableBytes(key), value: value, revision: revision)
            return true
        }
        uniquify(&slot)
        guard let node = slot else { return false }
        let order = compareBytes(key, node.key.raw)
        if order == 0 {
            node.value = value
            node.revision = revision
            return false
        }
        let added =
            order < 0
            ? insert(&node.left, key, value: value, revision: revision)
            : insert(&node.right, key, value: value, revision: revision)
        if added { rebalance(&slot) }
        return added
    }

    /// Removes `key`, known to be present.
    static func remove(_ slot: inout TreeNode?, _ key: UnsafeRawBufferPointer) {
        uniquify(&slot)
        guard let node = slot else { return }
        let order = compareBytes(key, node.key.raw)
        if order < 0 {
            remove(&node.left, key)
        } else if order > 0 {
            remove(&node.right, key)
        } else if node.left == nil {
            slot = node.right
            return
        } else if node.right == nil {
            slot = node.left
            return
        } else if let successor = removeMin(&node.right) {
            node.key = successor.key
            node.value = successor.value
            node.revision = successor.revision
        }
        rebalance(&slot)
    }

    /// Detaches and returns the smallest node under `slot`.
    static func removeMin(_ slot: inout TreeNode?) -> TreeNode? {
        uniquify(&slot)
        guard let node = slot else { return nil }
        if node.left == nil {
            slot = node.right
            return node
        }
        let smallest = removeMin(&node.left)
        rebalance(&slot)
        return smallest
    }
}

/// Walks a ``PersistentTree`` (as it was when the cursor was made) within a ``KeyRange``.
package final class TreeCursor {
    private let root: TreeNode?
    let range: KeyRange
    let isReverse: Bool
    /// The nodes still to visit on the way back up: the next one is on top.
    private var stack: [TreeNode] = []
    private(set) var current: TreeNode?
    /// The entry the cursor is on, for other modules (the stored property stays internal; see
    /// ``TreeNode``).
    package var currentNode: TreeNode? { current }
    private var positioned = false
    private var finished = false

    package init(root: TreeNode?, range: KeyRange, reverse: Bool) {
        self.root = root
        self.range = range
        self.isReverse = reverse
        stack.reserveCapacity(48)
        if range.isEmpty { finished = true }
    }

    /// Fills the stack so that its top is the first node at or after `key` (reverse: at or before
    /// `key`, or strictly before it when `inclusive` is false).
    private func descend(from key: [UInt8]?, inclusive: Bool) {
        stack.removeAll(keepingCapacity: true)
        var node = root
        if isReverse {
            while let current = node {
                let keep: Bool
                if let key {
                    let order = compareBytes(current.key.raw, key)
                    keep = inclusive ? order <= 0 : order < 0
                } else {
                    keep = true
                }
                if keep {
                    stack.append(current)
                    node = current.right
                } else {
                    node = current.left
                }
            }
        } else {
            while let current = node {
                if let key, compareBytes(current.key.raw, key) < 0 {
                    node = current.right
                } else {
                    stack.append(current)
                    node = current.left
                }
            }
        }
        positioned = true
    }

    private func positionAtStart() {
        if isReverse { descend(from: range.end, inclusive: false) } else { descend(from: range.start, inclusive: true) }
    }

    package func seek(_ key: [UInt8]) {
        guard !range.isEmpty else { return }
        finished = false
        current = nil
        if isReverse {
            if let end = range.end, compareBytes(key, end) >= 0 {
                positionAtStart()
            } else {
                descend(from: key, inclusive: true)
            }
        } else {
            if let start = range.start, compareBytes(key, start) < 0 {
                positionAtStart()
            } else {
                descend(from: key, inclusive: true)
            }
        }
    }

    package func next() -> Bool {
        guard !finished else { return false }
        if !positioned { positionAtStart() }
        guard let node = stack.popLast() else { return finish() }
        // Push the path to the node that follows this one.
        var child = isReverse ? node.left : node.right
        while let next = child {
            stack.append(next)
            child = isReverse ? next.right : next.left
        }
        let inside =
            isReverse
            ? (range.start.map { compareBytes(node.key.raw, $0) >= 0 } ?? true)
            : (range.end.map { compareBytes(node.key.raw, $0) < 0 } ?? true)
        guard inside else { return finish() }
        current = node
        return true
    }

    private func finish() -> Bool {
        finished = true
        current = nil
        stack.removeAll()
        return false
    }
}
