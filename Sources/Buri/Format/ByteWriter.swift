#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A growable byte buffer for writers that append many small pieces (a text segment's postings):
/// an append is a capacity check and a copy, without the uniqueness check and bookkeeping each
/// `Array.append(contentsOf:)` call makes. Not copyable, so its memory has one owner.
///
/// ```swift
/// var out = ByteWriter()
/// out.append(0x01)
/// out.appendVarint(300)                // 0xAC 0x02
/// out.withBytes { batch.put(key, $0) }
/// ```
struct ByteWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    /// The number of bytes written.
    private(set) var count = 0

    init(capacity: Int = 256) {
        self.capacity = Swift.max(capacity, 16)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    /// Forgets the bytes written, keeping the memory.
    mutating func removeAll() { count = 0 }

    /// Makes room for `extra` more bytes.
    @inline(__always)
    mutating func reserve(_ extra: Int) {
        if extra > capacity - count { grow(to: count + extra) }
    }

    @inline(never)
    private mutating func grow(to needed: Int) {
        let newCapacity = Swift.max(needed, 2 * capacity)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// `count` zero bytes.
    mutating func appendZeros(_ count: Int) {
        guard count > 0 else { return }
        reserve(count)
        (base + self.count).initializeMemory(as: UInt8.self, repeating: 0, count: count)
        self.count += count
    }

    /// `value` as an unsigned LEB128 varint (``Varint``).
    @inline(__always)
    mutating func appendVarint(_ value: UInt64) {
        reserve(10)
        var rest = value
        var at = count
        while rest >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: rest) | 0x80, toByteOffset: at, as: UInt8.self)
            rest >>= 7
            at += 1
        }
        base.storeBytes(of: UInt8(truncatingIfNeeded: rest), toByteOffset: at, as: UInt8.self)
        count = at + 1
    }

    /// The byte at `offset` (below ``count``).
    subscript(offset: Int) -> UInt8 {
        get {
            precondition(offset >= 0 && offset < count, "ByteWriter: offset \(offset) of \(count)")
            return base.load(fromByteOffset: offset, as: UInt8.self)
        }
        set {
            precondition(offset >= 0 && offset < count, "ByteWriter: offset \(offset) of \(count)")
            base.storeBytes(of: newValue, toByteOffset: offset, as: UInt8.self)
        }
    }

    /// Calls `body` with the bytes written (valid only during the call).
    @inline(__always)
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The bytes written, as an array.
    var array: [UInt8] { withBytes { Array($0) } }
}
