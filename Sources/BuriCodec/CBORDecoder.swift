#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Decodes `Decodable` values from CBOR (RFC 8949) written by ``CBOREncoder``
/// or by any other well-formed producer.
///
/// ```swift
/// struct Person: Codable { var name: String; var age: Int }
///
/// let bytes = try CBOREncoder().encode(Person(name: "Dirk", age: 20))
/// let person = try CBORDecoder().decode(Person.self, from: bytes)
///
/// // Copy-free, straight out of a buffer someone else owns:
/// let again = try bytes.withUnsafeBytes { try CBORDecoder().decode(Person.self, from: $0) }
/// ```
///
/// The input is treated as untrusted: every read is bounds-checked, lengths
/// are checked against the remaining input before anything is allocated,
/// nesting is limited (512 arrays/maps/tags, 256 nested `init(from:)`), text
/// must be valid UTF-8, and bytes after the single top-level item are an
/// error. Indefinite-length items are rejected with the error kind
/// `.unsupported` (``CBORValue`` reads them). All
/// failures throw ``CBORError`` with the byte offset and coding path.
///
/// Decoding is lenient where that loses nothing: integer fields accept
/// integral floats that fit, `Double`/`Float` fields accept integers that
/// convert exactly (and the texts `"NaN"`, `"Infinity"`, `"-Infinity"`),
/// `Float` fields accept wider floats rounded to nearest, `Data` accepts a
/// byte string, an array of bytes or base64 text, `URL` accepts tag 32 or
/// plain text, and tags in front of any value are skipped. A `Date` is read
/// from tag 1 (seconds since 1970), tag 1001 (RFC 9581 extended time with
/// `{1: seconds}` or an exact `{5: bigfloat}`), or — as format version 1
/// wrote it — an untagged number of seconds since 2001.
///
/// `superDecoder()` needs the `"super"` entry that `superEncoder()` writes; a
/// missing one is a `.keyNotFound` error. The `Decoder` handed to
/// `init(from:)` reads the caller's buffer directly; it must not be kept
/// after `decode` returns.
///
/// ## Topics
/// - ``decode(_:from:)``
/// - ``userInfo``
public struct CBORDecoder: Sendable {
    /// Values handed to the `Decodable` types through `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder.
    public init() {}

    /// Decodes a `T` from `bytes`, which must hold exactly one CBOR item.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a `T` straight out of `bytes` without copying them.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        try decode(type, from: bytes, readsNested: false)
    }

    /// Whether `T` is decoded through its own `init(from:)`, not read directly as a primitive or
    /// as a ``CBORTextValue``: a caller decoding many values of one type asks once and passes the
    /// answer to ``decode(_:from:readsNested:)``.
    package static func readsNested<T: Decodable>(_ type: T.Type) -> Bool {
        !_CBORDecodingState.isReadDirectly(T.self) && _CBORDecodingState.textType(T.self) == nil
    }

    /// ``decode(_:from:)`` for a `T` whose ``readsNested(_:)`` answer the caller has kept, so
    /// the type is not looked at again for every value.
    package func decode<T: Decodable>(
        _ type: T.Type, from bytes: UnsafeRawBufferPointer, readsNested: Bool
    ) throws -> T {
        guard let raw = bytes.baseAddress, bytes.count > 0 else {
            throw CBORError(.unexpectedEnd, "the input is empty", offset: 0)
        }
        let input = _CBORInput(base: raw.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        let state = _CBORDecodingState(input: input, userInfo: userInfo)
        // Validation is part of decoding: every read checks what it reads, and what the value
        // does not read is skipped (which checks it) before the end is compared with the input's.
        do {
            // A record type (the caller says so) goes straight to `init(from:)`; anything else
            // the way a field's value goes (`decodeAny`: directly, as text, or nested).
            var pos = 0
            var ended = false
            let value =
                readsNested
                ? try state.decodeNested(T.self, at: 0, path: [], key: nil)
                : try state.decodeAny(T.self, at: &pos, ended: &ended, path: [], key: nil)
            if ended {
                guard pos == input.count else { throw Self.trailing(input, end: pos) }
                return value
            }
            let end = try state.isTopMapCursor ? state.endOfMap() : input.skip(0)
            guard end == input.count else { throw Self.trailing(input, end: end) }
            return value
        } catch {
            // Malformed input reports its malformation, whatever the value's type found first.
            let end = try input.skip(0)
            guard end == input.count else { throw Self.trailing(input, end: end) }
            throw error
        }
    }

    private static func trailing(_ input: _CBORInput, end: Int) -> CBORError {
        CBORError(.trailingBytes, "\(input.count - end) bytes follow the top-level item", offset: end)
    }
}

/// The `Decoder` handed to `init(from:)`. It is also the cursor of the first keyed container
/// made on the top-level item (the only item at offset 0): that cursor tells where the item
/// ends, and a record needs no container object of its own.
final class _CBORDecodingState: _CBORMapCursor, Decoder {
    /// Where the value being decoded starts.
    var offset = 0
    var recursion = 0
    var codingPath: [any CodingKey] = []
    /// Whether this object is the cursor of a container on the top-level map.
    var isTopMapCursor = false
    let sendableUserInfo: [CodingUserInfoKey: any Sendable]

    init(input: _CBORInput, userInfo: [CodingUserInfoKey: any Sendable]) {
        self.sendableUserInfo = userInfo
        super.init(input: input, owner: nil, path: [], firstEntry: 0, count: 0)
    }

    var userInfo: [CodingUserInfoKey: Any] { sendableUserInfo }

    // MARK: Values

    /// Whether `T` is read directly (a primitive, `Data`, `URL` or `Date`) by ``decodeDirect(_:at:)``:
    /// metatype comparisons only, so no conformance lookup and no `T?` (whose metadata unspecialized
    /// code looks up at every call) on the way to a type decoded through its own `init(from:)`.
    @inline(__always)
    static func isReadDirectly<T>(_ type: T.Type) -> Bool {
        T.self == String.self || T.self == Int.self || T.self == Bool.self || T.self == Double.self
            || T.self == Float.self || T.self == Int64.self || T.self == UInt64.self || T.self == UInt.self
            || T.self == Int32.self || T.self == UInt32.self || T.self == Int16.self || T.self == UInt16.self
            || T.self == Int8.self || T.self == UInt8.self || T.self == Data.self || T.self == URL.self
            || T.self == Date.self
    }

    /// The text type `T` is, if it adopts ``CBORTextValue`` (a conformance lookup: callers that
    /// decode many values of one type ask once).
    @inline(__always)
    static func textType<T>(_ type: T.Type) -> (any CBORTextValue.Type)? {
        T.self as? any CBORTextValue.Type
    }

    /// Reads a `T` for which ``isReadDirectly(_:)`` holds.
    @inline(__always)
    func decodeDirect<T: Decodable>(_ type: T.Type, at pos: inout Int) throws -> T {
        if T.self == String.self {
            return unsafeBitCast(try input.readString(&pos), to: T.self)
        } else if T.self == Int.self {
            return unsafeBitCast(try input.readInteger(&pos, as: Int.self), to: T.self)
        } else if T.self == Bool.self {
            return unsafeBitCast(try input.readBool(&pos), to: T.self)
        } else if T.self == Double.self {
            return unsafeBitCast(try input.readDouble(&pos), to: T.self)
        } else if T.self == Float.self {
            return unsafeBitCast(try input.readFloat(&pos), to: T.self)
        } else if T.self == Int64.self {
            return unsafeBitCast(try input.readInteger(&pos, as: Int64.self), to: T.self)
        } else if T.self == UInt64.self {
            return unsafeBitCast(try input.readInteger(&pos, as: UInt64.self), to: T.self)
        } else if T.self == UInt.self {
            return unsafeBitCast(try input.readInteger(&pos, as: UInt.self), to: T.self)
        } else if T.self == Int32.self {
            return unsafeBitCast(try input.readInteger(&pos, as: Int32.self), to: T.self)
        } else if T.self == UInt32.self {
            return unsafeBitCast(try input.readInteger(&pos, as: UInt32.self), to: T.self)
        } else if T.self == Int16.self {
            return unsafeBitCast(try input.readInteger(&pos, as: Int16.self), to: T.self)
        } else if T.self == UInt16.self {
            return unsafeBitCast(try input.readInteger(&pos, as: UInt16.self), to: T.self)
        } else if T.self == Int8.self {
            return unsafeBitCast(try input.readInteger(&pos, as: Int8.self), to: T.self)
        } else if T.self == UInt8.self {
            return unsafeBitCast(try input.readInteger(&pos, as: UInt8.self), to: T.self)
        } else if T.self == Data.self {
            return unsafeBitCast(try input.readData(&pos), to: T.self)
        } else if T.self == URL.self {
            return unsafeBitCast(try input.readURL(&pos), to: T.self)
        } else if T.self == Date.self {
            return unsafeBitCast(try input.readDate(&pos), to: T.self)
        }
        // Not reached: callers ask `isReadDirectly` first.
        return try decodeNested(T.self, at: pos, path: codingPath, key: nil)
    }

    /// Reads a `T` that is the text type `textType`: its text, then `T(cborText:)`.
    @inline(__always)
    func decodeText<T>(_ textType: any CBORTextValue.Type, as type: T.Type, at pos: inout Int) throws -> T {
        _makeTextValue(textType, text: try input.readString(&pos), as: T.self)
    }

    /// Reads any `T` at `pos`: directly, as text, or through `init(from:)`. `ended` tells whether
    /// `pos` was moved past the value (known without a walk), else it is left where the value starts.
    @inline(__always)
    func decodeAny<T: Decodable>(
        _ type: T.Type, at pos: inout Int, ended: inout Bool, path: [any CodingKey], key: (any CodingKey)?
    ) throws -> T {
        ended = true
        if Self.isReadDirectly(T.self) { return try decodeDirect(T.self, at: &pos) }
        if let textType = Self.textType(T.self) { return try decodeText(textType, as: T.self, at: &pos) }
        // An array (untagged: the first byte says so, so maps never pay the lookup) of text
        // values, such as `[Ref<Song>]`: read in one loop, not element by element through the
        // standard library's `Array.init(from:)`.
        if pos < input.count, input.base[pos] >> 5 == _Major.array,
            let arrayType = T.self as? any _CBORTextArray.Type
        {
            var elementPath = path
            if let key { elementPath.append(key) }
            return try _decodeTextArray(arrayType, state: self, at: &pos, ended: &ended, path: elementPath, as: T.self)
        }
        ended = false
        return try decodeNested(T.self, at: pos, path: path, key: key)
    }

    /// Runs `T(from: self)` on the item at `pos`.
    func decodeNested<T: Decodable>(
        _ type: T.Type, at pos: Int, path: [any CodingKey], key: (any CodingKey)?
    ) throws -> T {
        guard recursion < _Limits.codableRecursion else {
            var full = path
            if let key { full.append(key) }
            throw CBORError(
                .depthLimitExceeded, "values nest deeper than \(_Limits.codableRecursion) levels",
                offset: pos, codingPath: _renderCodingPath(full))
        }
        let savedOffset = offset
        var savedPath: [any CodingKey]?
        if let key, codingPath.count == path.count {
            codingPath.append(key)
        } else if key != nil || codingPath.count != path.count {
            savedPath = codingPath
            codingPath = path
            if let key { codingPath.append(key) }
        }
        recursion += 1
        offset = pos
        defer {
            recursion -= 1
            offset = savedOffset
            if let savedPath {
                codingPath = savedPath
            } else if key != nil {
                codingPath.removeLast()
            }
        }
        return try T(from: self)
    }

    // MARK: Containers

    func makeKeyedContainer<Key: CodingKey>(
        _ type: Key.Type, at start: Int, path: [any CodingKey]
    ) throws -> KeyedDecodingContainer<Key> {
        var pos = start
        let (initial, argument) = try input.readValueHead(&pos)
        guard initial >> 5 == _Major.map else { throw input.mismatch(initial, at: start, expected: "map") }
        let count = try input.checkedCount(argument, perItem: 2, at: pos, headStart: start)
        let cursor: _CBORMapCursor
        if start == 0 && !isTopMapCursor {
            isTopMapCursor = true
            reset(path: path, firstEntry: pos, count: count)
            cursor = self
        } else {
            cursor = _CBORMapCursor(input: input, owner: self, path: path, firstEntry: pos, count: count)
        }
        return KeyedDecodingContainer(_CBORKeyedDecodingContainer<Key>(cursor: cursor))
    }

    func makeUnkeyedContainer(at start: Int, path: [any CodingKey]) throws -> _CBORUnkeyedDecodingContainer {
        var pos = start
        let (initial, argument) = try input.readValueHead(&pos)
        guard initial >> 5 == _Major.array else { throw input.mismatch(initial, at: start, expected: "array") }
        let count = try input.checkedCount(argument, perItem: 1, at: pos, headStart: start)
        return _CBORUnkeyedDecodingContainer(state: self, codingPath: path, count: count, position: pos)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        do {
            return try makeKeyedContainer(type, at: offset, path: codingPath)
        } catch let error as CBORError {
            throw error.withPath(codingPath)
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        do {
            return try makeUnkeyedContainer(at: offset, path: codingPath)
        } catch let error as CBORError {
            throw error.withPath(codingPath)
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        _CBORSingleValueDecodingContainer(state: self, offset: offset, codingPath: codingPath)
    }

    /// A separate decoder for a super class's value at `pos`.
    func makeSuperDecoder(at pos: Int, path: [any CodingKey]) -> _CBORDecodingState {
        let decoder = _CBORDecodingState(input: input, userInfo: sendableUserInfo)
        decoder.offset = pos
        decoder.codingPath = path
        decoder.recursion = recursion + 1
        return decoder
    }
}

// MARK: - Keyed

/// The walk over one map's entries, apart from the key type (so it is compiled once, not per
/// `Key`). Looks keys up with a cursor: keys asked for in encoding order are found by checking the
/// next entry only. Any other order builds an index of the map's entries once and scans it. Keys
/// are compared as UTF-8 bytes.
///
/// Every entry the cursor moves past has been read or skipped, and ``endOfMap()`` skips the
/// rest: that is how the decoder proves the input well-formed while decoding it, without a
/// separate pass over the bytes first.
class _CBORMapCursor {
    struct Entry {
        /// Offset of the key's head.
        var head: Int
        /// Offset and length of a text key's bytes; length -1 for other keys.
        var keyStart: Int
        var keyLength: Int
        var value: Int
    }

    final let input: _CBORInput
    /// The decoding state of a nested map's cursor; nil for the top-level map's, which is the
    /// state itself.
    final let retainedOwner: _CBORDecodingState?
    /// The coding path of the container this cursor serves.
    final var containerPath: [any CodingKey]
    final var firstEntry: Int
    final var count: Int
    /// The entry the cursor points at and the offset of its key head, or
    /// (if `pendingSkip` >= 0) the value to skip to get there.
    final var cursorIndex = 0
    final var cursorOffset: Int
    final var pendingSkip = -1
    final var entries: [Entry]?
    /// The offset just past the map, once `buildIndex` has walked all of it.
    final var indexedEnd = -1

    init(input: _CBORInput, owner: _CBORDecodingState?, path: [any CodingKey], firstEntry: Int, count: Int) {
        self.input = input
        self.retainedOwner = owner
        self.containerPath = path
        self.firstEntry = firstEntry
        self.count = count
        self.cursorOffset = firstEntry
    }

    /// The decoding state this map is read by.
    @inline(__always)
    final var owner: _CBORDecodingState {
        if let retainedOwner { return retainedOwner }
        return unsafeDowncast(self, to: _CBORDecodingState.self)
    }

    /// Points the cursor at the first of `count` entries starting at `firstEntry`.
    final func reset(path: [any CodingKey], firstEntry: Int, count: Int) {
        containerPath = path
        self.firstEntry = firstEntry
        self.count = count
        cursorIndex = 0
        cursorOffset = firstEntry
        pendingSkip = -1
        entries = nil
        indexedEnd = -1
    }

    final func find(utf8 name: UnsafeBufferPointer<UInt8>) throws -> (entry: Int, value: Int)? {
        if cursorIndex < count {
            if pendingSkip >= 0 {
                cursorOffset = try input.skip(pendingSkip)
                pendingSkip = -1
            }
            var pos = cursorOffset
            let (initial, argument) = try input.readHead(&pos)
            if initial >> 5 == _Major.text, argument == UInt64(name.count), name.count <= input.count - pos,
                _bytesEqual(input.base + pos, name)
            {
                return (cursorIndex, pos + name.count)
            }
        }
        let entries = try self.entries ?? buildIndex()
        for index in entries.indices {
            let entry = entries[index]
            if entry.keyLength == name.count && _bytesEqual(input.base + entry.keyStart, name) {
                return (index, entry.value)
            }
        }
        return nil
    }

    final func buildIndex() throws -> [Entry] {
        var result: [Entry] = []
        result.reserveCapacity(count)
        var pos = firstEntry
        for _ in 0..<count {
            let head = pos
            let (initial, argument) = try input.readHead(&pos)
            if initial >> 5 == _Major.text {
                let length = try input.checkedLength(argument, at: pos, headStart: head)
                result.append(Entry(head: head, keyStart: pos, keyLength: length, value: pos + length))
                pos += length
            } else {
                pos = try input.skip(head)
                result.append(Entry(head: head, keyStart: head, keyLength: -1, value: pos))
            }
            pos = try input.skip(pos)
        }
        entries = result
        indexedEnd = pos
        return result
    }

    /// Moves the cursor past `entry`, whose value starts at `value` and ends
    /// at `end` (-1 if not known yet).
    @inline(__always)
    final func advance(past entry: Int, value: Int, end: Int) {
        cursorIndex = entry + 1
        if end >= 0 {
            cursorOffset = end
            pendingSkip = -1
        } else if let entries, cursorIndex < count {
            cursorOffset = entries[cursorIndex].head
            pendingSkip = -1
        } else {
            pendingSkip = value
        }
    }

    /// The offset just past the map, after skipping (and so checking) every entry the cursor has
    /// not moved past. When the keys were read in order, that is at most the last value.
    final func endOfMap() throws -> Int {
        if entries != nil { return indexedEnd }
        var pos = pendingSkip >= 0 ? try input.skip(pendingSkip) : cursorOffset
        var index = cursorIndex
        while index < count {
            pos = try input.skip(pos)
            pos = try input.skip(pos)
            index += 1
        }
        return pos
    }
}

/// A struct of one reference, so that it lives inside the standard library's box of
/// `KeyedDecodingContainer` instead of being a second object per container (the box copies it on
/// every call, so it holds nothing else). Its cursor is the decoding state itself for the
/// top-level map (no allocation at all) and an object of its own for a nested one.
struct _CBORKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let cursor: _CBORMapCursor

    init(cursor: _CBORMapCursor) {
        self.cursor = cursor
    }

    var state: _CBORDecodingState { cursor.owner }
    var codingPath: [any CodingKey] { cursor.containerPath }
    private var input: _CBORInput { cursor.input }

    // MARK: Lookup

    @inline(__always)
    private func find(_ key: Key) throws -> (entry: Int, value: Int)? {
        var name = key.stringValue
        return try name.withUTF8 { try cursor.find(utf8: $0) }
    }

    private func keyNotFound(_ key: some CodingKey) -> CBORError {
        CBORError(.keyNotFound, "no value for key \"\(key.stringValue)\"")
    }

    @inline(__always)
    private func decodeScalar<T>(_ key: Key, _ read: (inout Int) throws -> T) throws -> T {
        do {
            guard let (entry, value) = try find(key) else { throw keyNotFound(key) }
            var pos = value
            let result = try read(&pos)
            cursor.advance(past: entry, value: value, end: pos)
            return result
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    @inline(__always)
    private func decodeScalarIfPresent<T>(_ key: Key, _ read: (inout Int) throws -> T) throws -> T? {
        do {
            guard let (entry, value) = try find(key) else { return nil }
            if let end = input.nilEnd(at: value) {
                cursor.advance(past: entry, value: value, end: end)
                return nil
            }
            var pos = value
            let result = try read(&pos)
            cursor.advance(past: entry, value: value, end: pos)
            return result
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    // MARK: KeyedDecodingContainerProtocol

    /// Every key of the map. `allKeys` cannot throw, so an entry it cannot name (a damaged map, a
    /// key that is not text, or text that is not UTF-8) is never dropped: it is listed under a name
    /// no entry's bytes can equal (U+FFFD stands for the bad bytes), so decoding it (as
    /// `Dictionary` does for every listed key) throws instead of returning a shorter dictionary.
    var allKeys: [Key] {
        guard let entries = try? (cursor.entries ?? cursor.buildIndex()) else {
            return Key(stringValue: "\u{FFFD}").map { [$0] } ?? []
        }
        return entries.compactMap { entry in
            guard entry.keyLength >= 0 else { return Key(stringValue: "\u{FFFD}") }
            let bytes = UnsafeBufferPointer(start: input.base + entry.keyStart, count: entry.keyLength)
            if let name = String(validating: bytes, as: UTF8.self) { return Key(stringValue: name) }
            return Key(stringValue: String(decoding: bytes, as: UTF8.self))
        }
    }

    func contains(_ key: Key) -> Bool {
        (try? find(key)) != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        do {
            guard let (entry, value) = try find(key) else { throw keyNotFound(key) }
            guard let end = input.nilEnd(at: value) else { return false }
            cursor.advance(past: entry, value: value, end: end)
            return true
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let input = input
        return try decodeScalar(key) { try input.readBool(&$0) }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let input = input
        return try decodeScalar(key) { try input.readString(&$0) }
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let input = input
        return try decodeScalar(key) { try input.readDouble(&$0) }
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        let input = input
        return try decodeScalar(key) { try input.readFloat(&$0) }
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: Int.self) }
    }

    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: Int8.self) }
    }

    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: Int16.self) }
    }

    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: Int32.self) }
    }

    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: Int64.self) }
    }

    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: UInt.self) }
    }

    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: UInt8.self) }
    }

    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: UInt16.self) }
    }

    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: UInt32.self) }
    }

    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        let input = input
        return try decodeScalar(key) { try input.readInteger(&$0, as: UInt64.self) }
    }

    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 {
        let input = input
        return try decodeScalar(key) { try input.readWide(&$0, as: Int128.self) }
    }

    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 {
        let input = input
        return try decodeScalar(key) { try input.readWide(&$0, as: UInt128.self) }
    }

    func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readWide(&$0, as: Int128.self) }
    }

    func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readWide(&$0, as: UInt128.self) }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        do {
            guard let (entry, value) = try find(key) else { throw keyNotFound(key) }
            return try decodeEntry(type, entry: entry, value: value, key: key)
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    @inline(__always)
    private func decodeEntry<T: Decodable>(_ type: T.Type, entry: Int, value: Int, key: Key) throws -> T {
        var pos = value
        var ended = false
        let result = try state.decodeAny(T.self, at: &pos, ended: &ended, path: codingPath, key: key)
        cursor.advance(past: entry, value: value, end: ended ? pos : -1)
        return result
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readBool(&$0) }
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readString(&$0) }
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readDouble(&$0) }
    }

    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readFloat(&$0) }
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: Int.self) }
    }

    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: Int8.self) }
    }

    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: Int16.self) }
    }

    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: Int32.self) }
    }

    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: Int64.self) }
    }

    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: UInt.self) }
    }

    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: UInt8.self) }
    }

    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: UInt16.self) }
    }

    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: UInt32.self) }
    }

    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
        let input = input
        return try decodeScalarIfPresent(key) { try input.readInteger(&$0, as: UInt64.self) }
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        do {
            guard let (entry, value) = try find(key) else { return nil }
            if let end = input.nilEnd(at: value) {
                cursor.advance(past: entry, value: value, end: end)
                return nil
            }
            return try decodeEntry(type, entry: entry, value: value, key: key)
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        do {
            guard let (entry, value) = try find(key) else { throw keyNotFound(key) }
            let container = try state.makeKeyedContainer(type, at: value, path: codingPath + [key])
            cursor.advance(past: entry, value: value, end: -1)
            return container
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        do {
            guard let (entry, value) = try find(key) else { throw keyNotFound(key) }
            let container = try state.makeUnkeyedContainer(at: value, path: codingPath + [key])
            cursor.advance(past: entry, value: value, end: -1)
            return container
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }

    func superDecoder() throws -> any Decoder {
        try superDecoder(name: "super", key: _CBORSuperKey())
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try superDecoder(name: key.stringValue, key: key)
    }

    private func superDecoder(name: String, key: some CodingKey) throws -> any Decoder {
        do {
            var name = name
            guard let (entry, value) = try name.withUTF8({ try cursor.find(utf8: $0) }) else { throw keyNotFound(key) }
            cursor.advance(past: entry, value: value, end: -1)
            return state.makeSuperDecoder(at: value, path: codingPath + [key])
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: key)
        }
    }
}

// MARK: - Unkeyed

struct _CBORUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let state: _CBORDecodingState
    let codingPath: [any CodingKey]
    private let input: _CBORInput
    private let elementCount: Int
    private(set) var currentIndex = 0
    /// Offset of the current element, or (if `pendingSkip` >= 0) the
    /// previous element to skip to get there.
    private var position: Int
    private var pendingSkip = -1
    /// The last element type decoded through `decode<T>` and its text type, if any.
    private var lastElementType: ObjectIdentifier?
    private var lastTextType: (any CBORTextValue.Type)?

    init(state: _CBORDecodingState, codingPath: [any CodingKey], count: Int, position: Int) {
        self.state = state
        self.input = state.input
        self.codingPath = codingPath
        self.elementCount = count
        self.position = position
    }

    var count: Int? { elementCount }
    var isAtEnd: Bool { currentIndex >= elementCount }
    /// The offset just past the last element read, or -1 when the last one read was decoded
    /// through `init(from:)` (its end is found by skipping it).
    var endOfRead: Int { pendingSkip >= 0 ? -1 : position }

    /// The offset of the current element; throws at the end.
    private mutating func current() throws -> Int {
        guard currentIndex < elementCount else {
            throw CBORError(
                .valueNotFound, "the unkeyed container has no element \(currentIndex), it holds \(elementCount)",
                expected: "another element")
        }
        if pendingSkip >= 0 {
            position = try input.skip(pendingSkip)
            pendingSkip = -1
        }
        return position
    }

    @inline(__always)
    private mutating func decodeScalar<T>(_ read: (inout Int) throws -> T) throws -> T {
        do {
            var pos = try current()
            let result = try read(&pos)
            position = pos
            currentIndex += 1
            return result
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }

    mutating func decodeNil() throws -> Bool {
        do {
            let pos = try current()
            guard let end = input.nilEnd(at: pos) else { return false }
            position = end
            currentIndex += 1
            return true
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool {
        let input = input
        return try decodeScalar { try input.readBool(&$0) }
    }

    mutating func decode(_ type: String.Type) throws -> String {
        let input = input
        return try decodeScalar { try input.readString(&$0) }
    }

    mutating func decode(_ type: Double.Type) throws -> Double {
        let input = input
        return try decodeScalar { try input.readDouble(&$0) }
    }

    mutating func decode(_ type: Float.Type) throws -> Float {
        let input = input
        return try decodeScalar { try input.readFloat(&$0) }
    }

    mutating func decode(_ type: Int.Type) throws -> Int {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: Int.self) }
    }

    mutating func decode(_ type: Int8.Type) throws -> Int8 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: Int8.self) }
    }

    mutating func decode(_ type: Int16.Type) throws -> Int16 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: Int16.self) }
    }

    mutating func decode(_ type: Int32.Type) throws -> Int32 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: Int32.self) }
    }

    mutating func decode(_ type: Int64.Type) throws -> Int64 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: Int64.self) }
    }

    mutating func decode(_ type: UInt.Type) throws -> UInt {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: UInt.self) }
    }

    mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: UInt8.self) }
    }

    mutating func decode(_ type: UInt16.Type) throws -> UInt16 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: UInt16.self) }
    }

    mutating func decode(_ type: UInt32.Type) throws -> UInt32 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: UInt32.self) }
    }

    mutating func decode(_ type: UInt64.Type) throws -> UInt64 {
        let input = input
        return try decodeScalar { try input.readInteger(&$0, as: UInt64.self) }
    }

    mutating func decode(_ type: Int128.Type) throws -> Int128 {
        let input = input
        return try decodeScalar { try input.readWide(&$0, as: Int128.self) }
    }

    mutating func decode(_ type: UInt128.Type) throws -> UInt128 {
        let input = input
        return try decodeScalar { try input.readWide(&$0, as: UInt128.self) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            let start = try current()
            var pos = start
            if _CBORDecodingState.isReadDirectly(T.self) {
                let value = try state.decodeDirect(T.self, at: &pos)
                position = pos
                currentIndex += 1
                return value
            }
            // An array's elements are one type: its text type is looked up for the first only.
            let type = ObjectIdentifier(T.self)
            if type != lastElementType {
                lastElementType = type
                lastTextType = _CBORDecodingState.textType(T.self)
            }
            if let textType = lastTextType {
                let value = try state.decodeText(textType, as: T.self, at: &pos)
                position = pos
                currentIndex += 1
                return value
            }
            let result = try state.decodeNested(T.self, at: start, path: codingPath, key: _CBORIndexKey(currentIndex))
            pendingSkip = start
            currentIndex += 1
            return result
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        do {
            let start = try current()
            let container = try state.makeKeyedContainer(
                type, at: start, path: codingPath + [_CBORIndexKey(currentIndex)])
            pendingSkip = start
            currentIndex += 1
            return container
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        do {
            let start = try current()
            let container = try state.makeUnkeyedContainer(at: start, path: codingPath + [_CBORIndexKey(currentIndex)])
            pendingSkip = start
            currentIndex += 1
            return container
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        do {
            let start = try current()
            let decoder = state.makeSuperDecoder(at: start, path: codingPath + [_CBORIndexKey(currentIndex)])
            pendingSkip = start
            currentIndex += 1
            return decoder
        } catch let error as CBORError {
            throw error.withPath(codingPath, appending: _CBORIndexKey(currentIndex))
        }
    }
}

// MARK: - Single value

struct _CBORSingleValueDecodingContainer: SingleValueDecodingContainer {
    let state: _CBORDecodingState
    let offset: Int
    let codingPath: [any CodingKey]

    @inline(__always)
    private func read<T>(_ body: (inout Int) throws -> T) throws -> T {
        do {
            var pos = offset
            return try body(&pos)
        } catch let error as CBORError {
            throw error.withPath(codingPath)
        }
    }

    func decodeNil() -> Bool { state.input.nilEnd(at: offset) != nil }

    func decode(_ type: Bool.Type) throws -> Bool { try read { try state.input.readBool(&$0) } }
    func decode(_ type: String.Type) throws -> String { try read { try state.input.readString(&$0) } }
    func decode(_ type: Double.Type) throws -> Double { try read { try state.input.readDouble(&$0) } }
    func decode(_ type: Float.Type) throws -> Float { try read { try state.input.readFloat(&$0) } }
    func decode(_ type: Int.Type) throws -> Int { try read { try state.input.readInteger(&$0, as: Int.self) } }
    func decode(_ type: Int8.Type) throws -> Int8 { try read { try state.input.readInteger(&$0, as: Int8.self) } }
    func decode(_ type: Int16.Type) throws -> Int16 { try read { try state.input.readInteger(&$0, as: Int16.self) } }
    func decode(_ type: Int32.Type) throws -> Int32 { try read { try state.input.readInteger(&$0, as: Int32.self) } }
    func decode(_ type: Int64.Type) throws -> Int64 { try read { try state.input.readInteger(&$0, as: Int64.self) } }
    func decode(_ type: UInt.Type) throws -> UInt { try read { try state.input.readInteger(&$0, as: UInt.self) } }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try read { try state.input.readInteger(&$0, as: UInt8.self) } }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try read { try state.input.readInteger(&$0, as: UInt16.self) } }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try read { try state.input.readInteger(&$0, as: UInt32.self) } }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try read { try state.input.readInteger(&$0, as: UInt64.self) } }
    func decode(_ type: Int128.Type) throws -> Int128 { try read { try state.input.readWide(&$0, as: Int128.self) } }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try read { try state.input.readWide(&$0, as: UInt128.self) } }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            var pos = offset
            var ended = false
            return try state.decodeAny(T.self, at: &pos, ended: &ended, path: codingPath, key: nil)
        } catch let error as CBORError {
            throw error.withPath(codingPath)
        }
    }
}

/// `T(cborText: text)` as the `U` the caller knows it to be (`U` is `T`), without a dynamic cast.
@inline(__always)
private func _makeTextValue<T: CBORTextValue, U>(_ type: T.Type, text: String, as: U.Type) -> U {
    assert(T.self == U.self)
    return unsafeBitCast(T(cborText: text), to: U.self)
}

/// An array whose elements are ``CBORTextValue``s, read by ``_CBORDecodingState/decodeAny``
/// in one loop.
protocol _CBORTextArray {
    static func _decodeCBORTexts(
        _ state: _CBORDecodingState, at pos: inout Int, ended: inout Bool, path: [any CodingKey]
    ) throws -> Self
}

extension Array: _CBORTextArray where Element: CBORTextValue {
    static func _decodeCBORTexts(
        _ state: _CBORDecodingState, at pos: inout Int, ended: inout Bool, path: [any CodingKey]
    ) throws -> [Element] {
        // The same reads `Array.init(from:)` makes through the unkeyed container, errors and
        // their coding paths included, without the per-element generic dispatch.
        var container = try state.makeUnkeyedContainer(at: pos, path: path)
        var result: [Element] = []
        result.reserveCapacity(container.count ?? 0)
        while !container.isAtEnd { result.append(Element(cborText: try container.decode(String.self))) }
        let end = container.endOfRead
        if end < 0 { ended = false } else { pos = end }
        return result
    }
}

/// `A._decodeCBORTexts` as the `U` the caller knows it to be (`U` is `A`).
@inline(__always)
private func _decodeTextArray<A: _CBORTextArray, U>(
    _ type: A.Type, state: _CBORDecodingState, at pos: inout Int, ended: inout Bool, path: [any CodingKey],
    as: U.Type
) throws -> U {
    assert(A.self == U.self)
    return unsafeBitCast(try A._decodeCBORTexts(state, at: &pos, ended: &ended, path: path), to: U.self)
}
