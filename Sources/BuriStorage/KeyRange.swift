#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

import LevelDB

/// A half-open range of keys, `[start, end)`, in bytewise order — the order every storage engine
/// keeps its keys in. The same type as the LevelDB module's, so ranges pass between the layers
/// unchanged.
///
/// ```swift
/// let users = KeyRange.prefix(Array("user:".utf8))                 // every key starting with "user:"
/// let ab = KeyRange(start: Array("a".utf8), end: Array("b".utf8))  // "a" ..< "b"
/// ```
public typealias KeyRange = LevelDB.KeyRange

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
