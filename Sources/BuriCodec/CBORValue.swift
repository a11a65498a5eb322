/// One entry of a CBOR map. Maps keep their entries in order.
///
/// ```swift
/// let entry = CBORMapEntry(key: "name", value: "Dirk")
/// let map = CBORValue.map([entry])
/// ```
public struct CBORMapEntry: Hashable, Sendable {
    /// The entry's key; any CBOR value, though Codable maps use text.
    public var key: CBORValue
    /// The entry's value.
    public var value: CBORValue

    /// Creates a map entry.
    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}

/// Any CBOR data item, for reading and writing CBOR without Swift types for it
/// (the `buri` tool shows, exports and imports objects with it).
///
/// ```swift
/// let bytes = try CBOREncoder().encode(Person(name: "Dirk", age: 20))
/// let value = try CBORValue(decoding: bytes)
/// value["name"]                  // .text("Dirk")
/// value["age"]?.int64Value       // 20
/// value.jsonString()             // {"name":"Dirk","age":20}
///
/// let edited = try CBORValue(json: #"{"name":"Ana","age":31}"#)
/// let person = try CBORDecoder().decode(Person.self, from: edited.encoded())
/// ```
///
/// Parsing is as defensive as ``CBORDecoder``: bounds-checked, lengths
/// checked before allocating, at most 512 nested arrays/maps/tags, valid
/// UTF-8 only, exactly one item. Unlike ``CBORDecoder`` it also reads
/// indefinite-length strings, arrays and maps (``encoded()`` writes them back
/// with definite lengths). Half, single and double floats all become
/// ``float(_:)``; ``encoded()`` writes the shortest width that holds the value
/// exactly.
///
/// ## Topics
/// - ``init(decoding:)``
/// - ``encoded()``
/// - ``subscript(_:)``
/// - ``jsonString(pretty:)``
/// - ``init(json:)``
public indirect enum CBORValue: Hashable, Sendable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the integer `-1 - n`.
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, entries in their stored order.
    case map([CBORMapEntry])
    /// Major type 6: a tagged item.
    case tagged(UInt64, CBORValue)
    /// `false` (0xF4) or `true` (0xF5).
    case bool(Bool)
    /// `null` (0xF6).
    case null
    /// `undefined` (0xF7).
    case undefined
    /// Any other simple value (0...19 and 32...255).
    case simple(UInt8)
    /// A half, single or double precision float.
    case float(Double)
}

// MARK: - Convenience

extension CBORValue {
    /// An integer value: ``unsigned(_:)`` for `value >= 0`, else ``negative(_:)``.
    public static func int(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(bitPattern: ~value))
    }

    /// The value of an integer that fits in `Int64`.
    public var int64Value: Int64? {
        switch self {
        case .unsigned(let n): return Int64(exactly: n)
        case .negative(let n): return n <= UInt64(Int64.max) ? ~Int64(bitPattern: n) : nil
        default: return nil
        }
    }

    /// The value of a float, or of an integer that converts exactly.
    public var doubleValue: Double? {
        switch self {
        case .float(let d): return d
        case .unsigned(let n): return Double(exactly: n)
        case .negative(let n): return n == .max ? -0x1p64 : Double(exactly: n + 1).map { -$0 }
        default: return nil
        }
    }

    /// The string of a text value.
    public var stringValue: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The value of a bool.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements of an array.
    public var arrayValue: [CBORValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The entries of a map.
    public var mapEntries: [CBORMapEntry]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// True for ``null`` and ``undefined``.
    public var isNull: Bool {
        self == .null || self == .undefined
    }

    /// The value of the first entry whose key is the text `key`, if this is a map. Keys are
    /// compared as UTF-8 bytes: `"é"` (c3 a9) does not find `"e\u{301}"` (65 cc 81).
    public subscript(key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        for entry in entries {
            if case .text(let name) = entry.key, name.utf8.elementsEqual(key.utf8) { return entry.value }
        }
        return nil
    }

    /// The first map key that occurs twice in one map anywhere in this value (keys compared as
    /// their CBOR bytes, so `"é"` and `"e\u{301}"` are two keys), or `nil`. Buri refuses to store
    /// such maps: a reader would see one of the values and silently lose the other.
    ///
    /// ```swift
    /// CBORValue.map([CBORMapEntry(key: "a", value: 1), CBORMapEntry(key: "a", value: 2)]).firstRepeatedMapKey()  // "a"
    /// ```
    public func firstRepeatedMapKey() -> CBORValue? {
        switch self {
        case .array(let elements):
            for element in elements { if let repeated = element.firstRepeatedMapKey() { return repeated } }
        case .map(let entries):
            var seen = Set<[UInt8]>()
            for entry in entries {
                if !seen.insert(entry.key.encoded()).inserted { return entry.key }
                if let repeated = entry.key.firstRepeatedMapKey() ?? entry.value.firstRepeatedMapKey() {
                    return repeated
                }
            }
        case .tagged(_, let content):
            return content.firstRepeatedMapKey()
        default:
            break
        }
        return nil
    }

    /// The element at `index`, if this is an array and `index` is in range.
    public subscript(index: Int) -> CBORValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }
}

extension CBORValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    /// `"text"` is ``text(_:)``.
    public init(stringLiteral value: String) { self = .text(value) }
    /// `-3` is ``negative(_:)`` with 2; `3` is ``unsigned(_:)``.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// `1.5` is ``float(_:)``.
    public init(floatLiteral value: Double) { self = .float(value) }
    /// `true` is ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `[1, "a"]` is ``array(_:)``.
    public init(arrayLiteral elements: CBORValue...) { self = .array(elements) }
    /// `["a": 1]` is ``map(_:)``, in literal order.
    public init(dictionaryLiteral elements: (CBORValue, CBORValue)...) {
        self = .map(elements.map { CBORMapEntry(key: $0.0, value: $0.1) })
    }
    /// `nil` is ``null``.
    public init(nilLiteral: ()) { self = .null }
}

// MARK: - Decoding

extension CBORValue {
    /// Parses exactly one CBOR item; trailing bytes are an error.
    public init(decoding bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try CBORValue(decoding: $0) }
    }

    /// Parses exactly one CBOR item straight out of `bytes`.
    public init(decoding bytes: UnsafeRawBufferPointer) throws {
        guard let raw = bytes.baseAddress, bytes.count > 0 else {
            throw CBORError(.unexpectedEnd, "the input is empty", offset: 0)
        }
        let input = _CBORInput(base: raw.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        var pos = 0
        let value = try _CBORValueParser(input: input).parse(&pos, depth: 0)
        guard pos == input.count else {
            throw CBORError(.trailingBytes, "\(input.count - pos) bytes follow the top-level item", offset: pos)
        }
        self = value
    }
}

struct _CBORValueParser {
    let input: _CBORInput

    func parse(_ pos: inout Int, depth: Int) throws -> CBORValue {
        let start = pos
        let (initial, argument) = try input.readHead(&pos, allowIndefinite: true)
        let indefinite = initial & 0x1F == 31
        switch initial >> 5 {
        case _Major.unsigned:
            return .unsigned(argument)
        case _Major.negative:
            return .negative(argument)
        case _Major.bytes:
            if indefinite {
                var bytes: [UInt8] = []
                try chunks(&pos, major: _Major.bytes) { chunkStart, _, length in
                    bytes.append(contentsOf: UnsafeBufferPointer(start: input.base + chunkStart, count: length))
                }
                return .bytes(bytes)
            }
            let length = try input.checkedLength(argument, at: pos, headStart: start)
            let bytes = Array(UnsafeBufferPointer(start: input.base + pos, count: length))
            pos += length
            return .bytes(bytes)
        case _Major.text:
            if indefinite {
                var string = ""
                try chunks(&pos, major: _Major.text) { chunkStart, headStart, length in
                    // Each chunk must be valid UTF-8 by itself (RFC 8949 §3.2.3).
                    string += try input.makeString(at: chunkStart, length: length, headStart: headStart)
                }
                return .text(string)
            }
            let length = try input.checkedLength(argument, at: pos, headStart: start)
            let string = try input.makeString(at: pos, length: length, headStart: start)
            pos += length
            return .text(string)
        case _Major.array:
            try checkDepth(depth, at: start)
            var elements: [CBORValue] = []
            if indefinite {
                while try !atBreak(&pos) { elements.append(try parse(&pos, depth: depth + 1)) }
            } else {
                let count = try input.checkedCount(argument, perItem: 1, at: pos, headStart: start)
                elements.reserveCapacity(count)
                for _ in 0..<count { elements.append(try parse(&pos, depth: depth + 1)) }
            }
            return .array(elements)
        case _Major.map:
            try checkDepth(depth, at: start)
            var entries: [CBORMapEntry] = []
            if indefinite {
                while try !atBreak(&pos) {
                    let key = try parse(&pos, depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: try parse(&pos, depth: depth + 1)))
                }
            } else {
                let count = try input.checkedCount(argument, perItem: 2, at: pos, headStart: start)
                entries.reserveCapacity(count)
                for _ in 0..<count {
                    let key = try parse(&pos, depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: try parse(&pos, depth: depth + 1)))
                }
            }
            return .map(entries)
        case _Major.tag:
            try checkDepth(depth, at: start)
            return .tagged(argument, try parse(&pos, depth: depth + 1))
        default:
            switch initial {
            case _Simple.false: return .bool(false)
            case _Simple.true: return .bool(true)
            case _Simple.null: return .null
            case _Simple.undefined: return .undefined
            case _Simple.half: return .float(_halfToDouble(UInt16(truncatingIfNeeded: argument)))
            case _Simple.float: return .float(Double(Float(bitPattern: UInt32(truncatingIfNeeded: argument))))
            case _Simple.double: return .float(Double(bitPattern: argument))
            case 0xFF: throw CBORError(.malformed, "unexpected break code", offset: start)
            default: return .simple(UInt8(truncatingIfNeeded: argument))
            }
        }
    }

    private func checkDepth(_ depth: Int, at offset: Int) throws {
        guard depth < _Limits.decodeNesting else {
            throw CBORError(
                .depthLimitExceeded, "items nest deeper than \(_Limits.decodeNesting) levels", offset: offset)
        }
    }

    /// Consumes a break code if one is next.
    private func atBreak(_ pos: inout Int) throws -> Bool {
        guard pos < input.count else { throw input.unexpectedEnd(pos, "an indefinite-length item") }
        if input[pos] == 0xFF {
            pos += 1
            return true
        }
        return false
    }

    /// Calls `body` with (offset, head offset, length) of each definite-length
    /// chunk of an indefinite string, up to its break code.
    private func chunks(_ pos: inout Int, major: UInt8, _ body: (Int, Int, Int) throws -> Void) throws {
        while try !atBreak(&pos) {
            let start = pos
            let (initial, argument) = try input.readHead(&pos)
            guard initial >> 5 == major else {
                throw CBORError(
                    .malformed, "a chunk of an indefinite-length string has another type", offset: start,
                    expected: major == _Major.text ? "text string" : "byte string", found: _describeInitial(initial))
            }
            let length = try input.checkedLength(argument, at: pos, headStart: start)
            try body(pos, start, length)
            pos += length
        }
    }
}

// MARK: - Encoding

extension CBORValue {
    /// The CBOR bytes of this value: definite lengths, shortest heads, and
    /// floats in the shortest width that holds them exactly.
    ///
    /// Simple values 20...23 come out as false/true/null/undefined; the
    /// reserved simple values 24...31 are written as undefined.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return bytes
    }

    /// Appends the encoding of this value to `bytes`.
    public func append(to bytes: inout [UInt8]) {
        switch self {
        case .unsigned(let n):
            _appendHead(_Major.unsigned, n, to: &bytes)
        case .negative(let n):
            _appendHead(_Major.negative, n, to: &bytes)
        case .bytes(let b):
            _appendHead(_Major.bytes, UInt64(b.count), to: &bytes)
            bytes.append(contentsOf: b)
        case .text(let s):
            _appendText(s, to: &bytes)
        case .array(let elements):
            _appendHead(_Major.array, UInt64(elements.count), to: &bytes)
            for element in elements { element.append(to: &bytes) }
        case .map(let entries):
            _appendHead(_Major.map, UInt64(entries.count), to: &bytes)
            for entry in entries {
                entry.key.append(to: &bytes)
                entry.value.append(to: &bytes)
            }
        case .tagged(let tag, let content):
            _appendHead(_Major.tag, tag, to: &bytes)
            content.append(to: &bytes)
        case .bool(let b):
            bytes.append(b ? _Simple.true : _Simple.false)
        case .null:
            bytes.append(_Simple.null)
        case .undefined:
            bytes.append(_Simple.undefined)
        case .simple(let v):
            if v < 24 {
                bytes.append(0xE0 | v)
            } else if v < 32 {
                bytes.append(_Simple.undefined)
            } else {
                bytes.append(contentsOf: [0xF8, v])
            }
        case .float(let d):
            _appendShortestFloat(d, to: &bytes)
        }
    }
}
