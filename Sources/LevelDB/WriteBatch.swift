import CLevelDB
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A list of puts and deletes that ``Database/write(_:options:)`` applies atomically.
///
/// Operations apply in the order they were added, so a later put of the same key wins.
///
/// ```swift
/// let batch = WriteBatch()
/// batch.put(Array("a".utf8), Array("1".utf8))
/// batch.delete(Array("b".utf8))
/// try db.write(batch, options: .sync)
/// ```
public final class WriteBatch {
    let pointer: OpaquePointer

    /// The number of put and delete operations in the batch.
    public private(set) var count: Int = 0

    /// The size in bytes of the batch's serialized form, as LevelDB lays it out in its log
    /// (a 12-byte header, then each operation with varint-prefixed key and value).
    public private(set) var byteSize: Int = WriteBatch.headerSize

    static let headerSize = 12

    public init() { pointer = leveldb_writebatch_create() }

    deinit { leveldb_writebatch_destroy(pointer) }

    /// Whether the batch has no operations.
    public var isEmpty: Bool { count == 0 }

    /// Adds a put of `value` under `key`.
    public func put(_ key: some ContiguousBytes, _ value: some ContiguousBytes) {
        withCBytes(key) { keyPointer, keyCount in
            withCBytes(value) { valuePointer, valueCount in
                leveldb_writebatch_put(pointer, keyPointer, keyCount, valuePointer, valueCount)
                count += 1
                byteSize += 1 + varintLength(keyCount) + keyCount + varintLength(valueCount) + valueCount
            }
        }
    }

    /// Adds a delete of `key`.
    public func delete(_ key: some ContiguousBytes) {
        withCBytes(key) { keyPointer, keyCount in
            leveldb_writebatch_delete(pointer, keyPointer, keyCount)
            count += 1
            byteSize += 1 + varintLength(keyCount) + keyCount
        }
    }

    /// Adds a put of `value` under `key`: the same as the generic ``put(_:_:)``, for byte arrays
    /// without generic dispatch (the common case, and the hot one in bulk writes).
    public func put(_ key: [UInt8], _ value: [UInt8]) {
        withCBytes(key) { keyPointer, keyCount in
            withCBytes(value) { valuePointer, valueCount in
                leveldb_writebatch_put(pointer, keyPointer, keyCount, valuePointer, valueCount)
                count += 1
                byteSize += 1 + varintLength(keyCount) + keyCount + varintLength(valueCount) + valueCount
            }
        }
    }

    /// Adds a put of borrowed bytes (copied into the batch before this returns).
    public func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        withCBytes(key) { keyPointer, keyCount in
            withCBytes(value) { valuePointer, valueCount in
                leveldb_writebatch_put(pointer, keyPointer, keyCount, valuePointer, valueCount)
                count += 1
                byteSize += 1 + varintLength(keyCount) + keyCount + varintLength(valueCount) + valueCount
            }
        }
    }

    /// Adds a delete of `key`: the generic ``delete(_:)`` for byte arrays, without generic dispatch.
    public func delete(_ key: [UInt8]) {
        withCBytes(key) { keyPointer, keyCount in
            leveldb_writebatch_delete(pointer, keyPointer, keyCount)
            count += 1
            byteSize += 1 + varintLength(keyCount) + keyCount
        }
    }

    /// Adds a delete of a borrowed key, such as one lent by ``Cursor/withKey(_:)``.
    public func delete(_ key: UnsafeRawBufferPointer) {
        withCBytes(key) { keyPointer, keyCount in
            leveldb_writebatch_delete(pointer, keyPointer, keyCount)
            count += 1
            byteSize += 1 + varintLength(keyCount) + keyCount
        }
    }

    /// Removes every operation.
    public func clear() {
        leveldb_writebatch_clear(pointer)
        count = 0
        byteSize = WriteBatch.headerSize
    }

    /// Lends each operation to `body` in the order it was added: the key, and the value for a put
    /// (`nil` for a delete). The buffers are valid only during the call.
    ///
    /// ```swift
    /// batch.forEachOperation { key, value in print(key.count, value == nil ? "delete" : "put") }
    /// ```
    public func forEachOperation(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) -> Void) {
        withoutActuallyEscaping(body) { body in
            var visitor = BatchVisitor(body: body)
            withUnsafeMutablePointer(to: &visitor) { state in
                leveldb_writebatch_iterate(
                    pointer, state,
                    { state, key, keyCount, value, valueCount in
                        guard let visitor = state?.assumingMemoryBound(to: BatchVisitor.self) else { return }
                        let value = UnsafeRawBufferPointer(start: value, count: valueCount)
                        visitor.pointee.body(UnsafeRawBufferPointer(start: key, count: keyCount), value)
                    },
                    { state, key, keyCount in
                        guard let visitor = state?.assumingMemoryBound(to: BatchVisitor.self) else { return }
                        visitor.pointee.body(UnsafeRawBufferPointer(start: key, count: keyCount), nil)
                    })
            }
        }
    }

    /// Adds every operation of `other`, after this batch's own.
    public func append(_ other: WriteBatch) {
        leveldb_writebatch_append(pointer, other.pointer)
        count += other.count
        byteSize += other.byteSize - WriteBatch.headerSize
    }
}

/// What ``WriteBatch/forEachOperation(_:)`` passes through LevelDB's C callback.
private struct BatchVisitor {
    let body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) -> Void
}

@inline(__always)
private func varintLength(_ value: Int) -> Int {
    var length = 1
    var rest = UInt(value) >> 7
    while rest != 0 { length += 1; rest >>= 7 }
    return length
}
