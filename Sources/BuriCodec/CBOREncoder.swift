// # How Codable values are laid out in CBOR (part of Buri's on-disk format)
//
// This mapping is stable: Buri stores every object's payload with it, so a
// change here is a change to the file format.
//
// - Keyed containers become maps (major 5) whose keys are always text strings
//   (major 3) holding `key.stringValue`, in the order the keys were encoded.
//   This holds for `Dictionary<Int, V>` too, whose keys Swift encodes through
//   a keyed container: `[7: "a"]` is `{"7": "a"}`.
// - Unkeyed containers become arrays (major 4).
// - All lengths are definite and every head is the shortest one
//   (RFC 8949 §4.2.1): a container's head is patched once the container is
//   finished, growing from 1 byte to 2, 3, 5 or 9 when it holds more than 23,
//   255, 65535 or 2^32-1 items.
// - `Bool` is 0xF4/0xF5; `nil` (encodeNil) is null, 0xF6.
// - Every integer type writes the shortest head: major 0 for values >= 0,
//   major 1 (-1 - n) below zero. `Int64.min` and `UInt64.max` are exact.
// - `Float` is always a float32 (0xFA), `Double` always a float64 (0xFB), with
//   the exact bit pattern (NaN, infinities, -0.0 and subnormals included).
// - `String` is a text string of its UTF-8 bytes (NUL and all).
// - `Data` is a byte string (major 2). `URL` is tag 32 around a text string of
//   its `absoluteString`. These are recognised by type, as JSONEncoder does.
// - `Date` is RFC 8949 tag 1, seconds since 1970: an integer when whole, a
//   float64 when that gives back exactly the same `Date`, else RFC 9581 tag
//   1001 around {5: [e, m]}, the epoch time as an exact bigfloat (see
//   `CBORDate.swift`). (Format version 1 wrote `timeIntervalSinceReferenceDate`
//   as an untagged float64; the decoder still reads that.)
// - `Int128`/`UInt128` are integers (major 0/1) when they lie in
//   -2^64 ... 2^64-1; beyond that they are refused (`invalidValue`), never
//   rounded.
// - Every other type uses its own Codable implementation: `UUID` is its
//   uppercase string, `Decimal` whatever Foundation's `Decimal.encode(to:)`
//   writes (a map of its exact parts).
// - A value whose `encode(to:)` writes nothing becomes an empty map (0xA0).
// - `superEncoder()` stores the superclass under the text key "super" (or as
//   the next element of an unkeyed container), at the position where
//   `superEncoder()` was called. It may be used after later keys were
//   written, but only until its container is finished; an unused one
//   writes an empty map.
// - Nesting is limited to 256 containers / recursive values; deeper values
//   throw `CBORError.Kind.depthLimitExceeded` (reference cycles end there too).
//
// The encoder writes in a single pass into one growing byte array. A
// container is finished when something is written to a container further
// out; writing to a container after that throws `CBORError.Kind.invalidValue`
// (synthesized Codable code never does this).

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Encodes `Encodable` values as CBOR (RFC 8949).
///
/// ```swift
/// struct Person: Codable { var name: String; var age: Int }
///
/// let bytes = try CBOREncoder().encode(Person(name: "Dirk", age: 20))
/// // a2 64 6e616d65 64 4469726b 63 616765 14
/// // {"name": "Dirk", "age": 20}
///
/// var record: [UInt8] = [0x01]                  // a header written first
/// try CBOREncoder().encode(Person(name: "Ana", age: 31), appendingTo: &record)
/// ```
///
/// The layout is fixed and documented at the top of `CBOREncoder.swift`:
/// keyed containers are maps with text keys, `Float`/`Double` keep their
/// width, `Data` is a byte string and `URL` is tag 32 around text.
///
/// ## Topics
/// - ``encode(_:)``
/// - ``encode(_:appendingTo:)``
/// - ``userInfo``
public struct CBOREncoder: Sendable {
    /// Values handed to the `Encodable` types through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder.
    public init() {}

    /// Encodes `value` and returns its CBOR bytes.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let state = _CBOREncodingState(userInfo: userInfo, codingPath: [], baseDepth: 0, recursion: 0)
        try state.encodeTopLevel(value)
        return state.takeBytes()
    }

    /// Appends the CBOR encoding of `value` to `buffer`. On error, `buffer`
    /// is left as it was.
    public func encode<T: Encodable>(_ value: T, appendingTo buffer: inout [UInt8]) throws {
        let state = _CBOREncodingState(userInfo: userInfo, codingPath: [], baseDepth: 0, recursion: 0)
        try state.encodeTopLevel(value)
        state.append(to: &buffer)
    }
}

/// A container that has been opened and not yet finished.
struct _OpenContainer {
    /// Offset of the container's (placeholder) head byte.
    var start: Int
    /// Items written so far.
    var count: Int
    /// `_Major.array` or `_Major.map`.
    var major: UInt8
}

/// A `superEncoder()` whose value is spliced in when its container finishes.
struct _PendingSuper {
    var containerIndex: Int
    var containerStart: Int
    var offset: Int
    var key: String?
    var encoder: _CBOREncodingState
}

/// The `Encoder` handed to `encode(to:)`. It owns the output bytes and the
/// stack of open containers.
final class _CBOREncodingState: Encoder {
    /// The output, in memory this object owns. (An `[UInt8]` stored property
    /// would cost a dynamic exclusivity check on every append.)
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Bytes written so far.
    private(set) var length = 0
    /// The open containers, outermost first. The outermost is kept in a
    /// stored property (most values are one flat map), deeper ones in
    /// memory this object owns; like `storage`, this avoids dynamic
    /// exclusivity checks and an allocation per encode.
    private(set) var containerCount = 0
    private var outermost = _OpenContainer(start: 0, count: 0, major: 0)
    private var deeper: UnsafeMutablePointer<_OpenContainer>?
    private var deeperCapacity = 0
    /// Where the value currently being encoded starts, and how many
    /// containers were open when it started.
    var slotStart = 0
    var slotDepth = 0
    var recursion: Int
    /// Containers open around this encoder (non-zero for super encoders).
    let baseDepth: Int
    var codingPath: [any CodingKey]
    let sendableUserInfo: [CodingUserInfoKey: any Sendable]
    var pendingSupers: [_PendingSuper] = []
    private var hasPendingSupers = false
    /// The first misuse seen where the Encoder API cannot throw.
    private(set) var failure: CBORError?
    private(set) var failed = false

    init(userInfo: [CodingUserInfoKey: any Sendable], codingPath: [any CodingKey], baseDepth: Int, recursion: Int) {
        self.sendableUserInfo = userInfo
        self.codingPath = codingPath
        self.baseDepth = baseDepth
        self.recursion = recursion
        self.capacity = 128
        self.storage = .allocate(capacity: 128)
    }

    deinit {
        storage.deallocate()
        deeper?.deallocate()
    }

    // MARK: Output

    @inline(__always)
    private func reserve(_ count: Int) {
        if capacity &- length < count { grow(minimum: count) }
    }

    @inline(never)
    private func grow(minimum count: Int) {
        let newCapacity = max(capacity * 2, length + count)
        let newStorage = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newStorage.initialize(from: storage, count: length)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    @inline(__always)
    func writeByte(_ byte: UInt8) {
        reserve(1)
        storage[length] = byte
        length &+= 1
    }

    @inline(__always)
    func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        UnsafeMutableRawPointer(storage + length).copyMemory(from: source, byteCount: bytes.count)
        length &+= bytes.count
    }

    /// The shortest head for `major` and `argument` (RFC 8949 §4.2.1).
    @inline(__always)
    func writeHead(_ major: UInt8, _ argument: UInt64) {
        reserve(9)
        let p = storage + length
        let m = major &<< 5
        if argument < 24 {
            p[0] = m | UInt8(truncatingIfNeeded: argument)
            length &+= 1
        } else if argument <= 0xFF {
            p[0] = m | 24
            p[1] = UInt8(truncatingIfNeeded: argument)
            length &+= 2
        } else if argument <= 0xFFFF {
            p[0] = m | 25
            UnsafeMutableRawPointer(p + 1).storeBytes(
                of: UInt16(truncatingIfNeeded: argument).bigEndian, as: UInt16.self)
            length &+= 3
        } else if argument <= 0xFFFF_FFFF {
            p[0] = m | 26
            UnsafeMutableRawPointer(p + 1).storeBytes(
                of: UInt32(truncatingIfNeeded: argument).bigEndian, as: UInt32.self)
            length &+= 5
        } else {
            p[0] = m | 27
            UnsafeMutableRawPointer(p + 1).storeBytes(of: argument.bigEndian, as: UInt64.self)
            length &+= 9
        }
    }

    /// Major 0 for values >= 0, major 1 (-1 - n) below.
    @inline(__always)
    func writeInteger(_ value: Int64) {
        if value >= 0 {
            writeHead(_Major.unsigned, UInt64(value))
        } else {
            writeHead(_Major.negative, UInt64(bitPattern: ~value))  // -1 - value, cannot overflow
        }
    }

    @inline(__always)
    func writeText(_ string: String) {
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            writeHead(_Major.text, UInt64(utf8.count))
            writeBytes(UnsafeRawBufferPointer(utf8))
        }
        if done == nil {
            var copy = string
            copy.withUTF8 { utf8 in
                writeHead(_Major.text, UInt64(utf8.count))
                writeBytes(UnsafeRawBufferPointer(utf8))
            }
        }
    }

    @inline(__always)
    func writeDouble(_ value: Double) {
        reserve(9)
        storage[length] = _Simple.double
        UnsafeMutableRawPointer(storage + length + 1).storeBytes(of: value.bitPattern.bigEndian, as: UInt64.self)
        length &+= 9
    }

    @inline(__always)
    func writeFloat(_ value: Float) {
        reserve(5)
        storage[length] = _Simple.float
        UnsafeMutableRawPointer(storage + length + 1).storeBytes(of: value.bitPattern.bigEndian, as: UInt32.self)
        length &+= 5
    }

    /// Inserts `bytes` at `offset`, moving what follows back.
    func insert(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        reserve(bytes.count)
        (storage + offset + bytes.count).moveInitialize(from: storage + offset, count: length - offset)
        if let source = bytes.baseAddress {
            UnsafeMutableRawPointer(storage + offset).copyMemory(from: source, byteCount: bytes.count)
        }
        length += bytes.count
    }

    var writtenBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage, count: length)
    }

    func takeBytes() -> [UInt8] {
        Array(UnsafeBufferPointer(start: storage, count: length))
    }

    func append(to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: storage, count: length))
    }

    /// Encodes `value` as the whole output.
    func encodeTopLevel<T: Encodable>(_ value: T) throws {
        try encodeValue(value)
        closeContainers(downTo: 0)
        if failed, let failure { throw failure }
    }

    var userInfo: [CodingUserInfoKey: Any] { sendableUserInfo }

    func fail(_ error: CBORError) {
        if !failed {
            failure = error
            failed = true
        }
    }

    // MARK: Containers

    /// Opens a container at the current end of the output.
    func openContainer(_ major: UInt8) -> (index: Int, start: Int) {
        if baseDepth + containerCount >= _Limits.encodeDepth {
            fail(
                CBORError(
                    .depthLimitExceeded, "containers nest deeper than \(_Limits.encodeDepth) levels",
                    codingPath: _renderCodingPath(codingPath)))
        }
        let start = length
        pushContainer(_OpenContainer(start: start, count: 0, major: major))
        writeByte(major &<< 5)
        return (containerCount - 1, start)
    }

    private func pushContainer(_ container: _OpenContainer) {
        if containerCount == 0 {
            outermost = container
        } else {
            if containerCount > deeperCapacity {
                let newCapacity = max(8, deeperCapacity * 2)
                let newStack = UnsafeMutablePointer<_OpenContainer>.allocate(capacity: newCapacity)
                if let deeper {
                    newStack.initialize(from: deeper, count: containerCount - 1)
                    deeper.deallocate()
                }
                deeper = newStack
                deeperCapacity = newCapacity
            }
            deeper?[containerCount - 1] = container
        }
        containerCount += 1
    }

    /// The open container at `index` (0 is the outermost).
    @inline(__always)
    func openContainer(at index: Int) -> _OpenContainer? {
        guard index >= 0 && index < containerCount else { return nil }
        if index == 0 { return outermost }
        return deeper?[index - 1]
    }

    @inline(__always)
    private func countItem(in index: Int) {
        if index == 0 {
            outermost.count += 1
        } else {
            deeper?[index - 1].count += 1
        }
    }

    /// Finishes every container deeper than `depth`: patches its head with
    /// the final count and splices in pending super encoders.
    func closeContainers(downTo depth: Int) {
        while containerCount > depth, let container = openContainer(at: containerCount - 1) {
            containerCount -= 1
            var count = container.count
            if hasPendingSupers {
                count += spliceSupers(containerIndex: containerCount, start: container.start)
            }
            if count < 24 {
                storage[container.start] = container.major &<< 5 | UInt8(truncatingIfNeeded: count)
            } else {
                var head: [UInt8] = []
                _appendHead(container.major, UInt64(count), to: &head)
                // The placeholder byte becomes the head's first byte.
                storage[container.start] = head[0]
                head.removeFirst()
                head.withUnsafeBytes { insert($0, at: container.start + 1) }
            }
        }
    }

    private func spliceSupers(containerIndex: Int, start: Int) -> Int {
        var mine: [_PendingSuper] = []
        pendingSupers.removeAll { pending in
            guard pending.containerIndex == containerIndex && pending.containerStart == start else { return false }
            mine.append(pending)
            return true
        }
        hasPendingSupers = !pendingSupers.isEmpty
        // Insert from the back so earlier offsets stay valid.
        for pending in mine.sorted(by: { $0.offset > $1.offset }) {
            var chunk: [UInt8] = []
            if let key = pending.key { _appendText(key, to: &chunk) }
            pending.encoder.finish()
            chunk.append(contentsOf: pending.encoder.writtenBytes)
            if let error = pending.encoder.failure { fail(error) }
            chunk.withUnsafeBytes { insert($0, at: pending.offset) }
        }
        return mine.count
    }

    /// Completes a super encoder's bytes: an empty map if nothing was written.
    func finish() {
        closeContainers(downTo: 0)
        if length == 0 { writeByte(_Major.map &<< 5) }
    }

    /// Finishes deeper containers, checks that the container at `index` is
    /// still open, and counts one more item in it.
    @inline(__always)
    func beginItem(in index: Int, start: Int) throws {
        if containerCount != index + 1 { closeContainers(downTo: index + 1) }
        guard openContainer(at: index)?.start == start else {
            throw staleContainer()
        }
        countItem(in: index)
    }

    func isOpen(_ index: Int, start: Int) -> Bool {
        openContainer(at: index)?.start == start
    }

    func staleContainer() -> CBORError {
        CBORError(
            .invalidValue,
            "a container was written to after a container further out was written to; CBOREncoder writes in one pass",
            codingPath: _renderCodingPath(codingPath))
    }

    /// Registers a super encoder for the container at `index`.
    func makeSuperEncoder(in index: Int, start: Int, key: String?, path: [any CodingKey]) -> _CBOREncodingState {
        closeContainers(downTo: index + 1)
        if !isOpen(index, start: start) { fail(staleContainer()) }
        let encoder = _CBOREncodingState(
            userInfo: sendableUserInfo, codingPath: path,
            baseDepth: baseDepth + containerCount, recursion: recursion + 1)
        pendingSupers.append(
            _PendingSuper(
                containerIndex: index, containerStart: start, offset: length, key: key, encoder: encoder))
        hasPendingSupers = true
        return encoder
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let (index, start) = openSlotContainer(_Major.map)
        return KeyedEncodingContainer(
            _CBORKeyedEncodingContainer<Key>(
                state: self, index: index, start: start, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let (index, start) = openSlotContainer(_Major.array)
        return _CBORUnkeyedEncodingContainer(
            state: self, index: index, start: start, codingPath: codingPath, count: openContainer(at: index)?.count ?? 0
        )
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        _CBORSingleValueEncodingContainer(state: self, slot: slotStart, codingPath: codingPath)
    }

    /// Opens the container for the current value, or hands back the one it
    /// already opened (a subclass and its superclass may share one encoder).
    private func openSlotContainer(_ major: UInt8) -> (index: Int, start: Int) {
        if let existing = openContainer(at: slotDepth), existing.start == slotStart {
            closeContainers(downTo: slotDepth + 1)
            if existing.major != major {
                fail(
                    CBORError(
                        .invalidValue, "asked for a keyed and an unkeyed container for the same value",
                        codingPath: _renderCodingPath(codingPath)))
            }
            return (slotDepth, slotStart)
        }
        closeContainers(downTo: slotDepth)
        if length != slotStart {
            fail(
                CBORError(
                    .invalidValue, "asked for a container after the value was already encoded",
                    codingPath: _renderCodingPath(codingPath)))
        }
        return openContainer(major)
    }

    // MARK: Values

    /// Writes `value`, using the fixed layouts for primitives, `Data` and
    /// `URL`, and `encode(to:)` for everything else.
    @inline(__always)
    func encodeValue<T: Encodable>(_ value: T) throws {
        if encodePrimitive(value) { return }
        try encodeNested(value, containerPath: codingPath, key: nil)
    }

    @inline(__always)
    func encodeValue<T: Encodable>(_ value: T, containerPath: [any CodingKey], key: some CodingKey) throws {
        if encodePrimitive(value) { return }
        try encodeNested(value, containerPath: containerPath, key: key)
    }

    /// Writes primitives directly; returns false for other types.
    @inline(__always)
    func encodePrimitive<T: Encodable>(_ value: T) -> Bool {
        if T.self == String.self {
            writeText(unsafeBitCast(value, to: String.self))
        } else if T.self == Int.self {
            writeInteger(Int64(unsafeBitCast(value, to: Int.self)))
        } else if T.self == Bool.self {
            writeByte(unsafeBitCast(value, to: Bool.self) ? _Simple.true : _Simple.false)
        } else if T.self == Double.self {
            writeDouble(unsafeBitCast(value, to: Double.self))
        } else if T.self == Float.self {
            writeFloat(unsafeBitCast(value, to: Float.self))
        } else if T.self == Int64.self {
            writeInteger(unsafeBitCast(value, to: Int64.self))
        } else if T.self == UInt64.self {
            writeHead(_Major.unsigned, unsafeBitCast(value, to: UInt64.self))
        } else if T.self == UInt.self {
            writeHead(_Major.unsigned, UInt64(unsafeBitCast(value, to: UInt.self)))
        } else if T.self == Int32.self {
            writeInteger(Int64(unsafeBitCast(value, to: Int32.self)))
        } else if T.self == UInt32.self {
            writeHead(_Major.unsigned, UInt64(unsafeBitCast(value, to: UInt32.self)))
        } else if T.self == Int16.self {
            writeInteger(Int64(unsafeBitCast(value, to: Int16.self)))
        } else if T.self == UInt16.self {
            writeHead(_Major.unsigned, UInt64(unsafeBitCast(value, to: UInt16.self)))
        } else if T.self == Int8.self {
            writeInteger(Int64(unsafeBitCast(value, to: Int8.self)))
        } else if T.self == UInt8.self {
            writeHead(_Major.unsigned, UInt64(unsafeBitCast(value, to: UInt8.self)))
        } else if T.self == Data.self {
            let data = unsafeBitCast(value, to: Data.self)
            writeHead(_Major.bytes, UInt64(data.count))
            data.withUnsafeBytes { writeBytes($0) }
        } else if T.self == URL.self {
            writeHead(_Major.tag, 32)
            writeText(unsafeBitCast(value, to: URL.self).absoluteString)
        } else if T.self == Date.self {
            writeDate(unsafeBitCast(value, to: Date.self))
        } else if T.self is any CBORTextValue.Type, let textual = value as? any CBORTextValue {
            // The metatype first: casting the value boxes it (a heap box past 24 bytes) for every
            // object and nested value, and few types are text values.
            writeText(textual.cborText)
        } else {
            return false
        }
        return true
    }

    /// A `Date` as RFC 8949 tag 1 (seconds since 1970), exactly; see `CBORDate.swift`.
    func writeDate(_ date: Date) {
        let t = date.timeIntervalSinceReferenceDate
        if let whole = _CBORDate.wholeEpochSeconds(t) {
            writeHead(_Major.tag, _CBORDate.epochTag)
            writeInteger(whole)
        } else if let epoch = _CBORDate.exactEpochDouble(t) {
            writeHead(_Major.tag, _CBORDate.epochTag)
            writeDouble(epoch)
        } else {
            _CBORDate.item(referenceSeconds: t).encoded().withUnsafeBytes { writeBytes($0) }
        }
    }

    /// A 128-bit integer, which CBOR holds exactly from -2^64 to 2^64 - 1; anything beyond is
    /// refused rather than rounded.
    func writeWide<I: BinaryInteger>(_ value: I, codingPath: [any CodingKey]) throws {
        if let small = UInt64(exactly: value) {
            writeHead(_Major.unsigned, small)
        } else if value < 0, let argument = UInt64(exactly: -1 - value) {
            writeHead(_Major.negative, argument)
        } else {
            throw CBORError(
                .invalidValue, "\(value) is outside -2^64 ... 2^64 - 1, the integers CBOR holds exactly",
                codingPath: _renderCodingPath(codingPath),
                expected: "an integer in -18446744073709551616 ... 18446744073709551615",
                found: "\(value) (\(I.self))")
        }
    }

    /// Runs `value.encode(to: self)` as a new value slot.
    func encodeNested<T: Encodable>(_ value: T, containerPath: [any CodingKey], key: (any CodingKey)?) throws {
        if failed, let failure { throw failure }
        guard recursion < _Limits.encodeDepth else {
            var path = containerPath
            if let key { path.append(key) }
            throw CBORError(
                .depthLimitExceeded, "values nest deeper than \(_Limits.encodeDepth) levels (a reference cycle?)",
                codingPath: _renderCodingPath(path))
        }
        let savedStart = slotStart
        let savedDepth = slotDepth
        var savedPath: [any CodingKey]?
        if let key {
            if codingPath.count == containerPath.count {
                codingPath.append(key)
            } else {
                savedPath = codingPath
                codingPath = containerPath + [key]
            }
        }
        recursion += 1
        slotStart = length
        slotDepth = containerCount
        defer {
            recursion -= 1
            slotStart = savedStart
            slotDepth = savedDepth
            if key != nil {
                if let savedPath { codingPath = savedPath } else { codingPath.removeLast() }
            }
        }
        try value.encode(to: self)
        if failed, let failure { throw failure }
        if length == slotStart { writeByte(_Major.map &<< 5) }
    }
}

// MARK: - Keyed

struct _CBORKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: _CBOREncodingState
    let index: Int
    let start: Int
    let codingPath: [any CodingKey]

    @inline(__always)
    private func beginEntry(_ key: Key) throws {
        try state.beginItem(in: index, start: start)
        state.writeText(key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws {
        try beginEntry(key)
        state.writeByte(_Simple.null)
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try beginEntry(key)
        state.writeByte(value ? _Simple.true : _Simple.false)
    }

    mutating func encode(_ value: String, forKey key: Key) throws {
        try beginEntry(key)
        state.writeText(value)
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        try beginEntry(key)
        state.writeDouble(value)
    }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        try beginEntry(key)
        state.writeFloat(value)
    }

    mutating func encode(_ value: Int, forKey key: Key) throws {
        try beginEntry(key)
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int8, forKey key: Key) throws {
        try beginEntry(key)
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int16, forKey key: Key) throws {
        try beginEntry(key)
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int32, forKey key: Key) throws {
        try beginEntry(key)
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int64, forKey key: Key) throws {
        try beginEntry(key)
        state.writeInteger(value)
    }

    mutating func encode(_ value: UInt, forKey key: Key) throws {
        try beginEntry(key)
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt8, forKey key: Key) throws {
        try beginEntry(key)
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt16, forKey key: Key) throws {
        try beginEntry(key)
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt32, forKey key: Key) throws {
        try beginEntry(key)
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt64, forKey key: Key) throws {
        try beginEntry(key)
        state.writeHead(_Major.unsigned, value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try beginEntry(key)
        try state.encodeValue(value, containerPath: codingPath, key: key)
    }

    mutating func encode(_ value: Int128, forKey key: Key) throws {
        try beginEntry(key)
        try state.writeWide(value, codingPath: codingPath + [key])
    }

    mutating func encode(_ value: UInt128, forKey key: Key) throws {
        try beginEntry(key)
        try state.writeWide(value, codingPath: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        do { try beginEntry(key) } catch { state.fail(state.staleContainer()) }
        let (nestedIndex, nestedStart) = state.openContainer(_Major.map)
        return KeyedEncodingContainer(
            _CBORKeyedEncodingContainer<NestedKey>(
                state: state, index: nestedIndex, start: nestedStart, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        do { try beginEntry(key) } catch { state.fail(state.staleContainer()) }
        let (nestedIndex, nestedStart) = state.openContainer(_Major.array)
        return _CBORUnkeyedEncodingContainer(
            state: state, index: nestedIndex, start: nestedStart, codingPath: codingPath + [key], count: 0)
    }

    mutating func superEncoder() -> any Encoder {
        let key = _CBORSuperKey()
        return state.makeSuperEncoder(in: index, start: start, key: key.stringValue, path: codingPath + [key])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        state.makeSuperEncoder(in: index, start: start, key: key.stringValue, path: codingPath + [key])
    }
}

// MARK: - Unkeyed

struct _CBORUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let state: _CBOREncodingState
    let index: Int
    let start: Int
    let codingPath: [any CodingKey]
    private(set) var count: Int

    init(state: _CBOREncodingState, index: Int, start: Int, codingPath: [any CodingKey], count: Int) {
        self.state = state
        self.index = index
        self.start = start
        self.codingPath = codingPath
        self.count = count
    }

    @inline(__always)
    private mutating func beginElement() throws {
        try state.beginItem(in: index, start: start)
        count += 1
    }

    mutating func encodeNil() throws {
        try beginElement()
        state.writeByte(_Simple.null)
    }

    mutating func encode(_ value: Bool) throws {
        try beginElement()
        state.writeByte(value ? _Simple.true : _Simple.false)
    }

    mutating func encode(_ value: String) throws {
        try beginElement()
        state.writeText(value)
    }

    mutating func encode(_ value: Double) throws {
        try beginElement()
        state.writeDouble(value)
    }

    mutating func encode(_ value: Float) throws {
        try beginElement()
        state.writeFloat(value)
    }

    mutating func encode(_ value: Int) throws {
        try beginElement()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int8) throws {
        try beginElement()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int16) throws {
        try beginElement()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int32) throws {
        try beginElement()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int64) throws {
        try beginElement()
        state.writeInteger(value)
    }

    mutating func encode(_ value: UInt) throws {
        try beginElement()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt8) throws {
        try beginElement()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt16) throws {
        try beginElement()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt32) throws {
        try beginElement()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt64) throws {
        try beginElement()
        state.writeHead(_Major.unsigned, value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try beginElement()
        try state.encodeValue(value, containerPath: codingPath, key: _CBORIndexKey(count - 1))
    }

    mutating func encode(_ value: Int128) throws {
        try beginElement()
        try state.writeWide(value, codingPath: codingPath + [_CBORIndexKey(count - 1)])
    }

    mutating func encode(_ value: UInt128) throws {
        try beginElement()
        try state.writeWide(value, codingPath: codingPath + [_CBORIndexKey(count - 1)])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        do { try beginElement() } catch { state.fail(state.staleContainer()) }
        let (nestedIndex, nestedStart) = state.openContainer(_Major.map)
        return KeyedEncodingContainer(
            _CBORKeyedEncodingContainer<NestedKey>(
                state: state, index: nestedIndex, start: nestedStart,
                codingPath: codingPath + [_CBORIndexKey(count - 1)]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        do { try beginElement() } catch { state.fail(state.staleContainer()) }
        let (nestedIndex, nestedStart) = state.openContainer(_Major.array)
        return _CBORUnkeyedEncodingContainer(
            state: state, index: nestedIndex, start: nestedStart,
            codingPath: codingPath + [_CBORIndexKey(count - 1)], count: 0)
    }

    mutating func superEncoder() -> any Encoder {
        let key = _CBORIndexKey(count)
        count += 1
        return state.makeSuperEncoder(in: index, start: start, key: nil, path: codingPath + [key])
    }
}

// MARK: - Single value

struct _CBORSingleValueEncodingContainer: SingleValueEncodingContainer {
    let state: _CBOREncodingState
    /// The value slot this container writes; it may write once.
    let slot: Int
    let codingPath: [any CodingKey]

    @inline(__always)
    private func begin() throws {
        guard state.slotStart == slot, state.length == slot else {
            throw CBORError(
                .invalidValue, "a single value container was written to twice, or after its value was finished",
                codingPath: _renderCodingPath(codingPath))
        }
    }

    mutating func encodeNil() throws {
        try begin()
        state.writeByte(_Simple.null)
    }

    mutating func encode(_ value: Bool) throws {
        try begin()
        state.writeByte(value ? _Simple.true : _Simple.false)
    }

    mutating func encode(_ value: String) throws {
        try begin()
        state.writeText(value)
    }

    mutating func encode(_ value: Double) throws {
        try begin()
        state.writeDouble(value)
    }

    mutating func encode(_ value: Float) throws {
        try begin()
        state.writeFloat(value)
    }

    mutating func encode(_ value: Int) throws {
        try begin()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int8) throws {
        try begin()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int16) throws {
        try begin()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int32) throws {
        try begin()
        state.writeInteger(Int64(value))
    }

    mutating func encode(_ value: Int64) throws {
        try begin()
        state.writeInteger(value)
    }

    mutating func encode(_ value: UInt) throws {
        try begin()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt8) throws {
        try begin()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt16) throws {
        try begin()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt32) throws {
        try begin()
        state.writeHead(_Major.unsigned, UInt64(value))
    }

    mutating func encode(_ value: UInt64) throws {
        try begin()
        state.writeHead(_Major.unsigned, value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try state.encodeValue(value)
    }

    mutating func encode(_ value: Int128) throws {
        try begin()
        try state.writeWide(value, codingPath: codingPath)
    }

    mutating func encode(_ value: UInt128) throws {
        try begin()
        try state.writeWide(value, codingPath: codingPath)
    }
}
