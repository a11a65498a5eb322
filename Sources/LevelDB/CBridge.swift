import CLevelDB
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Small helpers that every C call goes through, so that buffers and error strings are
// handled in exactly one way.

/// Calls `body` with a C error slot and throws LevelDB's message if it filled it.
/// The message buffer is freed exactly once, here.
@inline(__always)
func withErrorSlot<R>(
    path: String?,
    _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> R
) throws(LevelDBError) -> R {
    var error: UnsafeMutablePointer<CChar>? = nil
    let result = body(&error)
    if let error {
        let message = String(cString: error)
        leveldb_free(error)
        throw LevelDBError(statusMessage: message, path: path)
    }
    return result
}

/// A one-byte buffer whose address stands in for empty inputs, so LevelDB never sees a NULL
/// pointer (memcpy from NULL is undefined even with length 0).
nonisolated(unsafe) private let emptyBuffer: UnsafeMutablePointer<CChar> = {
    let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    pointer.initialize(to: 0)
    return pointer
}()

/// Exposes any contiguous bytes as the `(const char*, size_t)` pair the C API takes.
@inline(__always)
func withCBytes<R, E: Error>(
    _ bytes: some ContiguousBytes,
    _ body: (UnsafePointer<CChar>, Int) throws(E) -> R
) throws(E) -> R {
    // `ContiguousBytes.withUnsafeBytes` is `rethrows`, which erases the error type; carry the
    // outcome out in a Result to keep it typed.
    let result: Result<R, E> = bytes.withUnsafeBytes { raw in
        guard let base = raw.baseAddress, raw.count > 0 else {
            return Result { () throws(E) -> R in try body(UnsafePointer(emptyBuffer), 0) }
        }
        return Result { () throws(E) -> R in try body(base.assumingMemoryBound(to: CChar.self), raw.count) }
    }
    return try result.get()
}

/// ``withCBytes(_:_:)`` for a byte array, without the generic `ContiguousBytes` path: called from
/// another module, that path is not specialized and looks up generic metadata on every call, which
/// costs more than the LevelDB operation itself for small keys (batch puts, point gets).
@inline(__always)
func withCBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>, Int) -> R) -> R {
    bytes.withUnsafeBufferPointer { buffer in
        guard let base = buffer.baseAddress, buffer.count > 0 else { return body(UnsafePointer(emptyBuffer), 0) }
        return body(UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), buffer.count)
    }
}

/// ``withCBytes(_:_:)`` for borrowed raw bytes (no copy, no generic dispatch).
@inline(__always)
func withCBytes<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<CChar>, Int) -> R) -> R {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return body(UnsafePointer(emptyBuffer), 0) }
    return body(base.assumingMemoryBound(to: CChar.self), bytes.count)
}

/// Copies a `(const char*, size_t)` pair LevelDB owns into a Swift array.
@inline(__always)
func copyBytes(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> [UInt8] {
    guard let pointer, count > 0 else { return [] }
    return [UInt8](UnsafeRawBufferPointer(start: pointer, count: count))
}
