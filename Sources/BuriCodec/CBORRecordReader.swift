#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A fast, allocation-free reader of one CBOR map (a record written by ``CBOREncoder`` for a
/// keyed `Encodable` value), for a hand-written initialiser that reads its fields directly instead
/// of through `Decodable`'s containers.
///
/// Walk the fields with ``nextField()``, compare each field's name with a string literal (the
/// comparison is of UTF-8 bytes, so `"é"` written as c3 a9 never matches e + U+0301), and read its
/// value with the typed readers. A field you do not read is skipped (and checked) when you ask for
/// the next one.
///
/// ```swift
/// struct Person: Codable {
///     var objectId: String
///     var name: String
///     var locale: String
///     var age: Int
/// }
///
/// extension Person: CBORRecordDecodable {   // an extension keeps the memberwise init
///     init(record: inout CBORRecordReader) throws {
///         var objectId: String?, name: String?, locale: String?, age: Int?
///         while let field = try record.nextField() {
///             switch field {
///             case "objectId": objectId = try record.string()
///             case "name": name = try record.string()
///             case "locale": locale = try record.string()
///             case "age": age = try record.int()
///             default: try record.skip() // a field of a newer version of the type
///             }
///         }
///         guard let objectId else { throw record.missingField("objectId") }
///         guard let name else { throw record.missingField("name") }
///         guard let locale else { throw record.missingField("locale") }
///         guard let age else { throw record.missingField("age") }
///         self.init(objectId: objectId, name: name, locale: locale, age: age)
///     }
/// }
///
/// let bytes = try CBOREncoder().encode(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
/// let dirk = try bytes.withUnsafeBytes { try CBORRecordReader.decode(Person.self, from: $0) }
/// ```
///
/// Each reader converts exactly as ``CBORDecoder`` does for the same Swift type: integers accept
/// integral floats that fit, `Double`/`Float` accept integers that convert exactly and the texts
/// `"NaN"`, `"Infinity"`, `"-Infinity"`, tags in front of a value are skipped, a `Date` reads tag
/// 1, tag 1001 or an untagged number of seconds since 2001. The input is untrusted: every
/// malformation (truncation, wrong type, bad UTF-8, lengths beyond the input, bytes after the map,
/// a field name that occurs twice) throws a ``CBORError`` with the byte offset and the field's name
/// as its coding path, never a crash and never another value.
///
/// The reader points into the caller's buffer: it must not outlive it, and the strings, data and
/// values it returns are copies.
public struct CBORRecordReader {
    let input: _CBORInput
    /// The offset of the next unread byte: the current field's value, or the next field's key.
    public private(set) var offset: Int
    /// Offset of the map's first key, and fields not yet returned by `nextField`.
    let firstEntry: Int
    var remaining: Int
    /// Whether the current field's value has not been read yet (`offset` is its start).
    var valuePending = false
    /// The current field's name: offset and length of its UTF-8 bytes (length -1 for a key that
    /// is not text).
    var nameStart = 0
    var nameLength = -1
    /// A bit per small hash of every text name returned so far: a name whose bit is set is
    /// compared with the earlier names, so a field that occurs twice is an error.
    var seenNames: UInt64 = 0

    /// Starts reading the map at the start of `bytes` (tags in front of it are skipped).
    ///
    /// - Throws: ``CBORError`` if `bytes` is empty or does not start with a definite-length map.
    public init(_ bytes: UnsafeRawBufferPointer) throws {
        guard let raw = bytes.baseAddress, bytes.count > 0 else {
            throw CBORError(.unexpectedEnd, "the input is empty", offset: 0)
        }
        input = _CBORInput(base: raw.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        var pos = 0
        let (initial, argument) = try input.readValueHead(&pos)
        guard initial >> 5 == _Major.map else { throw input.mismatch(initial, at: 0, expected: "map") }
        remaining = try input.checkedCount(argument, perItem: 2, at: pos, headStart: 0)
        firstEntry = pos
        offset = pos
    }

    /// Decodes one `R` that fills the whole of `bytes`: runs `R(record:)`, then skips (and so
    /// checks) the fields it did not read and refuses bytes after the map. Malformed input
    /// reports its malformation, whatever `R(record:)` ran into first, as ``CBORDecoder`` does.
    ///
    /// ```swift
    /// let person = try bytes.withUnsafeBytes { try CBORRecordReader.decode(Person.self, from: $0) }
    /// ```
    public static func decode<R: CBORRecordDecodable>(_ type: R.Type, from bytes: UnsafeRawBufferPointer) throws -> R {
        do {
            var reader = try CBORRecordReader(bytes)
            let value = try R(record: &reader)
            try reader.finish()
            return value
        } catch {
            // A well-formed input keeps the error the value found; a malformed one reports where.
            guard let raw = bytes.baseAddress, bytes.count > 0 else { throw error }
            let input = _CBORInput(base: raw.assumingMemoryBound(to: UInt8.self), count: bytes.count)
            let end = try input.skip(0)
            guard end == input.count else {
                throw CBORError(.trailingBytes, "\(input.count - end) bytes follow the top-level item", offset: end)
            }
            throw error
        }
    }

    /// Skips the fields not read yet and checks that nothing follows the map.
    mutating func finish() throws {
        while try nextField() != nil {}
        guard offset == input.count else {
            throw CBORError(.trailingBytes, "\(input.count - offset) bytes follow the top-level item", offset: offset)
        }
    }

    // MARK: Fields

    /// The next field of the map, or `nil` after the last one. The value of the previous field,
    /// if it was not read, is skipped (and checked).
    ///
    /// - Throws: ``CBORError`` for a malformed key or value, or a name that occurs twice.
    public mutating func nextField() throws -> CBORField? {
        if valuePending {
            offset = try input.skip(offset)
            valuePending = false
        }
        guard remaining > 0 else { return nil }
        remaining -= 1
        let head = offset
        var pos = offset
        let (initial, argument) = try input.readHead(&pos)
        if initial >> 5 == _Major.text {
            let length = try input.checkedLength(argument, at: pos, headStart: head)
            nameStart = pos
            nameLength = length
            try noteName(at: pos, length: length, head: head)
            pos += length
        } else {
            // Not a text key: no name matches it (as no `CodingKey` of `CBORDecoder` would).
            pos = try input.skip(head)
            nameStart = head
            nameLength = -1
        }
        guard pos < input.count else { throw input.unexpectedEnd(pos, "the value of a map entry") }
        offset = pos
        valuePending = true
        return CBORField(base: input.base + nameStart, length: nameLength)
    }

    /// Throws if the name at `start` was returned before.
    @inline(__always)
    private mutating func noteName(at start: Int, length: Int, head: Int) throws {
        var hash = UInt64(truncatingIfNeeded: length) &* 0x9E37
        if length > 0 {
            hash &+= UInt64(input.base[start]) &* 31 &+ UInt64(input.base[start + length - 1])
        }
        let bit: UInt64 = 1 << (hash & 63)
        if seenNames & bit != 0 {
            try checkNotSeen(start: start, length: length, head: head)
        }
        seenNames |= bit
    }

    /// Compares the name at `start` with every earlier text name of the map.
    private func checkNotSeen(start: Int, length: Int, head: Int) throws {
        var pos = firstEntry
        while pos < head {
            let keyHead = pos
            let (initial, argument) = try input.readHead(&pos)
            if initial >> 5 == _Major.text {
                let other = Int(argument)
                if other == length,
                    _bytesEqual(input.base + pos, UnsafeBufferPointer(start: input.base + start, count: length))
                {
                    let name = String(
                        decoding: UnsafeBufferPointer(start: input.base + start, count: length), as: UTF8.self)
                    throw CBORError(
                        .malformed, "the map has the key \"\(name)\" twice (first at byte \(keyHead))",
                        offset: head, codingPath: name)
                }
                pos += other
            } else {
                pos = try input.skip(keyHead)
            }
            pos = try input.skip(pos)
        }
    }

    /// The current field's name, for errors (`"?"` for a key that is not valid UTF-8 text).
    var currentName: String {
        guard nameLength >= 0 else { return "?" }
        let bytes = UnsafeBufferPointer(start: input.base + nameStart, count: nameLength)
        return String(validating: bytes, as: UTF8.self) ?? String(decoding: bytes, as: UTF8.self)
    }

    /// The error for a required field the map does not have, as ``CBORDecoder`` reports it.
    ///
    /// ```swift
    /// guard let name else { throw record.missingField("name") }
    /// ```
    public func missingField(_ name: String) -> CBORError {
        CBORError(.keyNotFound, "no value for key \"\(name)\"", codingPath: name)
    }

    /// Skips the current field's value (checking that it is well-formed).
    public mutating func skip() throws {
        _ = try read { input, pos in pos = try input.skip(pos) }
    }

    /// Reads the current field's value with `body`, which advances `pos` past it; errors get
    /// the field's name as their coding path.
    @inline(__always)
    private mutating func read<T>(_ body: (_CBORInput, inout Int) throws -> T) throws -> T {
        guard valuePending else {
            throw CBORError(
                .valueNotFound, "no field is current: call nextField() before reading a value, and read it once",
                offset: offset)
        }
        do {
            var pos = offset
            let value = try body(input, &pos)
            offset = pos
            valuePending = false
            return value
        } catch var error as CBORError {
            if error.codingPath.isEmpty {
                error.codingPath = currentName
            } else {
                error.codingPath = currentName + (error.codingPath.hasPrefix("[") ? "" : ".") + error.codingPath
            }
            throw error
        }
    }

    // MARK: Values

    /// Whether the current field's value is null (or undefined); if so it is consumed, as
    /// `decodeIfPresent` does.
    public mutating func isNil() -> Bool {
        guard valuePending, let end = input.nilEnd(at: offset) else { return false }
        offset = end
        valuePending = false
        return true
    }

    /// `nil` for a null value, else what `body` reads: the reader of an `Optional` field.
    ///
    /// ```swift
    /// case "nickname": nickname = try record.optional { try $0.string() }
    /// ```
    public mutating func optional<T>(_ body: (inout CBORRecordReader) throws -> T) throws -> T? {
        if isNil() { return nil }
        return try body(&self)
    }

    /// A text string (valid UTF-8).
    public mutating func string() throws -> String { try read { try $0.readString(&$1) } }
    /// A `Bool`.
    public mutating func bool() throws -> Bool { try read { try $0.readBool(&$1) } }
    /// An `Int` (an error if the number does not fit, or is a float with a fraction).
    public mutating func int() throws -> Int { try read { try $0.readInteger(&$1, as: Int.self) } }
    /// An `Int64`.
    public mutating func int64() throws -> Int64 { try read { try $0.readInteger(&$1, as: Int64.self) } }
    /// An `Int32`.
    public mutating func int32() throws -> Int32 { try read { try $0.readInteger(&$1, as: Int32.self) } }
    /// An `Int16`.
    public mutating func int16() throws -> Int16 { try read { try $0.readInteger(&$1, as: Int16.self) } }
    /// An `Int8`.
    public mutating func int8() throws -> Int8 { try read { try $0.readInteger(&$1, as: Int8.self) } }
    /// A `UInt`.
    public mutating func uint() throws -> UInt { try read { try $0.readInteger(&$1, as: UInt.self) } }
    /// A `UInt64`.
    public mutating func uint64() throws -> UInt64 { try read { try $0.readInteger(&$1, as: UInt64.self) } }
    /// A `UInt32`.
    public mutating func uint32() throws -> UInt32 { try read { try $0.readInteger(&$1, as: UInt32.self) } }
    /// A `UInt16`.
    public mutating func uint16() throws -> UInt16 { try read { try $0.readInteger(&$1, as: UInt16.self) } }
    /// A `UInt8`.
    public mutating func uint8() throws -> UInt8 { try read { try $0.readInteger(&$1, as: UInt8.self) } }
    /// A `Double` (NaN, infinities and -0.0 keep their value).
    public mutating func double() throws -> Double { try read { try $0.readDouble(&$1) } }
    /// A `Float` (wider floats round to nearest; an error if that overflows).
    public mutating func float() throws -> Float { try read { try $0.readFloat(&$1) } }
    /// A `Data`: a byte string, or (as ``CBORDecoder`` accepts) an array of bytes or base64 text.
    public mutating func data() throws -> Data { try read { try $0.readData(&$1) } }
    /// A `Date`, read as ``CBORDecoder`` reads one.
    public mutating func date() throws -> Date { try read { try $0.readDate(&$1) } }
    /// A `URL`: tag 32 around text, or plain text.
    public mutating func url() throws -> URL { try read { try $0.readURL(&$1) } }

    /// An `[UInt8]`: an array of integers 0...255, as `Codable` writes and reads `[UInt8]`.
    public mutating func bytes() throws -> [UInt8] {
        try read { input, pos in
            let start = pos
            let (initial, argument) = try input.readValueHead(&pos)
            guard initial >> 5 == _Major.array else { throw input.mismatch(initial, at: start, expected: "array") }
            let count = try input.checkedCount(argument, perItem: 1, at: pos, headStart: start)
            var result: [UInt8] = []
            result.reserveCapacity(count)
            for index in 0..<count {
                do {
                    result.append(try input.readInteger(&pos, as: UInt8.self))
                } catch var error as CBORError {
                    if error.codingPath.isEmpty { error.codingPath = "[\(index)]" }
                    throw error
                }
            }
            return result
        }
    }

    /// Any `Decodable` value (a nested struct, an array, a dictionary, an enum...), through
    /// ``CBORDecoder``: the fallback for what the typed readers do not cover.
    ///
    /// ```swift
    /// case "tags": tags = try record.decode([String].self)
    /// ```
    public mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try read { input, pos in
            let start = pos
            let end = try input.skip(start)
            do {
                let value = try CBORDecoder().decode(
                    T.self, from: UnsafeRawBufferPointer(start: input.base + start, count: end - start))
                pos = end
                return value
            } catch var error as CBORError {
                error.offset = error.offset.map { $0 + start }
                throw error
            }
        }
    }
}

/// The name of the field a ``CBORRecordReader`` is at: compare it with a string literal, as
/// UTF-8 bytes.
///
/// ```swift
/// switch field {
/// case "name": name = try record.string()
/// default: try record.skip()
/// }
/// if field == "age" { age = try record.int() }
/// ```
///
/// The comparison is of bytes, never of `String`s (which compare by canonical equivalence): the
/// literal `"é"` (c3 a9) does not match a field named `"e\u{301}"` (65 cc 81). A key that is not
/// text matches no name. A field is valid only until the reader moves on.
public struct CBORField {
    let base: UnsafePointer<UInt8>
    /// The name's length in bytes, or -1 for a key that is not text.
    let length: Int

    /// Whether the field's name has exactly the UTF-8 bytes of `name`.
    @inline(__always)
    public static func == (field: CBORField, name: StaticString) -> Bool {
        field.matches(name)
    }

    /// Lets `switch field { case "name": ... }` compare names as bytes.
    @inline(__always)
    public static func ~= (name: StaticString, field: CBORField) -> Bool {
        field.matches(name)
    }

    @inline(__always)
    func matches(_ name: StaticString) -> Bool {
        if name.hasPointerRepresentation {
            let count = name.utf8CodeUnitCount
            return count == length && _bytesEqual(base, UnsafeBufferPointer(start: name.utf8Start, count: count))
        }
        return name.withUTF8Buffer { $0.count == length && _bytesEqual(base, $0) }
    }

    /// Whether the field's name has exactly the bytes of `utf8` (a name known only at run time).
    public func matches(utf8: some Collection<UInt8>) -> Bool {
        guard length >= 0, utf8.count == length else { return false }
        var index = 0
        for byte in utf8 {
            guard base[index] == byte else { return false }
            index += 1
        }
        return true
    }

    /// The name as a `String` (for messages), or `nil` for a key that is not valid UTF-8 text.
    public var name: String? {
        guard length >= 0 else { return nil }
        return String(validating: UnsafeBufferPointer(start: base, count: length), as: UTF8.self)
    }
}

/// A `Decodable` type with a hand-written initialiser over a ``CBORRecordReader``: the fast path
/// Buri's typed reads take instead of `init(from:)` (which stays, for everything else). Encoding
/// is unchanged (`Encodable`), so the stored bytes are the same.
///
/// ```swift
/// struct Person: BuriSupport {
///     var objectId: String, name: String, locale: String, age: Int
///     static let buri = BuriSchema<Person>(key: \.objectId, indexes: [.numeric("age", \.age)])
/// }
///
/// extension Person: CBORRecordDecodable {
///     init(record: inout CBORRecordReader) throws {
///         var objectId: String?, name: String?, locale: String?, age: Int?
///         while let field = try record.nextField() {
///             switch field {
///             case "objectId": objectId = try record.string()
///             case "name": name = try record.string()
///             case "locale": locale = try record.string()
///             case "age": age = try record.int()
///             default: try record.skip()
///             }
///         }
///         guard let objectId, let name, let locale, let age else {
///             throw record.missingField(objectId == nil ? "objectId" : name == nil ? "name" : locale == nil ? "locale" : "age")
///         }
///         self.init(objectId: objectId, name: name, locale: locale, age: age)
///     }
/// }
/// ```
///
/// The initialiser must read what `init(from:)` reads, with the same result: the same fields,
/// absent optionals as `nil`, a missing required field as an error. Fields it does not know are
/// skipped; the whole record is checked either way. (The initialiser may run on any thread: Buri
/// decodes large reads on every core.)
public protocol CBORRecordDecodable: Decodable, SendableMetatype {
    /// Reads one value from the map `record` is reading.
    init(record: inout CBORRecordReader) throws
}
