#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif

/// A half-open range of keys, `[start, end)`, in bytewise order — the order every storage engine
/// keeps its keys in. `nil` bounds are open: ``all`` covers every key. Engines convert it to
/// their own form at their boundary (the LevelDB engine to LevelDB's range, etcd to its
/// `key`/`range_end` pair).
///
/// ```swift
/// let users = KeyRange.prefix(Array("user:".utf8))                 // every key starting with "user:"
/// let ab = KeyRange(start: Array("a".utf8), end: Array("b".utf8))  // "a" ..< "b"
/// users.contains(Array("user:1".utf8))                             // true
/// ```
public struct KeyRange: Sendable, Hashable {
    /// The first key in the range (inclusive), or `nil` for the first key there is.
    public var start: [UInt8]?
    /// The key just past the range (exclusive), or `nil` for no upper bound.
    public var end: [UInt8]?

    /// The keys from `start` (inclusive; `nil`: from the first) to `end` (exclusive; `nil`: to the last).
    public init(start: [UInt8]? = nil, end: [UInt8]? = nil) {
        self.start = start
        self.end = end
    }

    /// Every key.
    public static let all = KeyRange()

    /// Every key that begins with `prefix`.
    public static func prefix(_ prefix: [UInt8]) -> KeyRange {
        KeyRange(start: prefix, end: KeyRange.successor(ofPrefix: prefix))
    }

    /// The smallest key greater than every key that begins with `prefix`, or `nil` when there is
    /// none (the prefix is empty or all `0xFF`).
    public static func successor(ofPrefix prefix: [UInt8]) -> [UInt8]? {
        var bytes = prefix
        while let last = bytes.last {
            if last == 0xFF {
                bytes.removeLast()
            } else {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
        }
        return nil
    }

    /// Whether `key` lies in the range.
    public func contains(_ key: [UInt8]) -> Bool {
        key.withUnsafeBytes { contains(rawKey: $0) }
    }

    /// Whether the key in `key` lies in the range.
    public func contains(rawKey key: UnsafeRawBufferPointer) -> Bool {
        if let start, compareBytes(key, start) < 0 { return false }
        if let end, compareBytes(key, end) >= 0 { return false }
        return true
    }

    /// Whether no key can lie in the range.
    public var isEmpty: Bool {
        guard let start, let end else { return false }
        return compareBytes(start, end) >= 0
    }
}

/// Bytewise three-way comparison (negative, zero, positive): the order of every engine's keys.
@inline(__always)
public func compareBytes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
    b.withUnsafeBytes { compareBytes(a, $0) }
}

/// Bytewise three-way comparison of two byte arrays.
@inline(__always)
public func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { ra in b.withUnsafeBytes { compareBytes(ra, $0) } }
}

/// Bytewise three-way comparison of two buffers.
@inline(__always)
public func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let common = min(a.count, b.count)
    if common > 0, let pa = a.baseAddress, let pb = b.baseAddress {
        let result = memcmp(pa, pb, common)
        if result != 0 { return Int(result) }
    }
    return a.count - b.count
}
