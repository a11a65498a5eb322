// The byte-level building blocks every other file uses: writing item heads,
// reading them back with bounds checks, skipping whole items, and the float
// conversions. Nothing outside this file reads or writes a head by hand.

/// Major types of RFC 8949 §3.1.
enum _Major {
    static let unsigned: UInt8 = 0
    static let negative: UInt8 = 1
    static let bytes: UInt8 = 2
    static let text: UInt8 = 3
    static let array: UInt8 = 4
    static let map: UInt8 = 5
    static let tag: UInt8 = 6
    static let simple: UInt8 = 7
}

/// Initial bytes of major type 7 that the codec writes.
enum _Simple {
    static let `false`: UInt8 = 0xF4
    static let `true`: UInt8 = 0xF5
    static let null: UInt8 = 0xF6
    static let undefined: UInt8 = 0xF7
    static let half: UInt8 = 0xF9
    static let float: UInt8 = 0xFA
    static let double: UInt8 = 0xFB
}

/// Nesting limits. The encoder refuses to write deeper than `encodeDepth`
/// containers or recursive Codable values; the decoders accept up to
/// `decodeNesting` nested arrays/maps/tags (so anything the encoder wrote,
/// including a tag inside the deepest container, reads back) and up to
/// `codableRecursion` nested `init(from:)` calls.
enum _Limits {
    static let encodeDepth = 256
    static let codableRecursion = 256
    static let decodeNesting = 512
}

// MARK: - Writing

/// The number of bytes of the shortest head for `argument`.
@inline(__always)
func _headSize(_ argument: UInt64) -> Int {
    if argument < 24 { return 1 }
    if argument <= 0xFF { return 2 }
    if argument <= 0xFFFF { return 3 }
    if argument <= 0xFFFF_FFFF { return 5 }
    return 9
}

/// Appends the shortest head (RFC 8949 §4.2.1) for `major` and `argument`.
@inline(__always)
func _appendHead(_ major: UInt8, _ argument: UInt64, to bytes: inout [UInt8]) {
    let m = major &<< 5
    if argument < 24 {
        bytes.append(m | UInt8(truncatingIfNeeded: argument))
    } else if argument <= 0xFF {
        bytes.append(m | 24)
        bytes.append(UInt8(truncatingIfNeeded: argument))
    } else if argument <= 0xFFFF {
        bytes.append(m | 25)
        _appendBigEndian(UInt16(truncatingIfNeeded: argument), to: &bytes)
    } else if argument <= 0xFFFF_FFFF {
        bytes.append(m | 26)
        _appendBigEndian(UInt32(truncatingIfNeeded: argument), to: &bytes)
    } else {
        bytes.append(m | 27)
        _appendBigEndian(argument, to: &bytes)
    }
}

@inline(__always)
func _appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
}

/// Writes the shortest head for `major`/`argument` into `bytes[at...]`, which
/// must already have `_headSize(argument)` bytes of room.
func _writeHead(_ major: UInt8, _ argument: UInt64, into bytes: inout [UInt8], at start: Int) {
    var head: [UInt8] = []
    head.reserveCapacity(9)
    _appendHead(major, argument, to: &head)
    bytes.replaceSubrange(start..<(start + head.count), with: head)
}

/// Appends a signed integer: major 0 for values >= 0, major 1 (-1 - n) below.
@inline(__always)
func _appendInteger(_ value: Int64, to bytes: inout [UInt8]) {
    if value >= 0 {
        _appendHead(_Major.unsigned, UInt64(value), to: &bytes)
    } else {
        // -1 - value == ~value, which cannot overflow even for Int64.min.
        _appendHead(_Major.negative, UInt64(bitPattern: ~value), to: &bytes)
    }
}

/// Appends a text string head and its UTF-8 bytes.
@inline(__always)
func _appendText(_ string: String, to bytes: inout [UInt8]) {
    var string = string
    string.withUTF8 { utf8 in
        _appendHead(_Major.text, UInt64(utf8.count), to: &bytes)
        bytes.append(contentsOf: utf8)
    }
}

/// Appends a float64 (0xFB) with the exact bit pattern.
@inline(__always)
func _appendDouble(_ value: Double, to bytes: inout [UInt8]) {
    bytes.append(_Simple.double)
    _appendBigEndian(value.bitPattern, to: &bytes)
}

/// Appends a float32 (0xFA) with the exact bit pattern.
@inline(__always)
func _appendFloat(_ value: Float, to bytes: inout [UInt8]) {
    bytes.append(_Simple.float)
    _appendBigEndian(value.bitPattern, to: &bytes)
}

/// Appends `value` in the shortest of half/single/double that holds it
/// exactly (RFC 8949 §4.2.2 preferred serialization); NaN becomes 0xF97E00.
func _appendShortestFloat(_ value: Double, to bytes: inout [UInt8]) {
    if value.isNaN {
        bytes.append(contentsOf: [_Simple.half, 0x7E, 0x00])
        return
    }
    let single = Float(value)
    guard Double(single).bitPattern == value.bitPattern else {
        _appendDouble(value, to: &bytes)
        return
    }
    if let half = _exactHalf(single) {
        bytes.append(_Simple.half)
        _appendBigEndian(half, to: &bytes)
    } else {
        _appendFloat(single, to: &bytes)
    }
}

/// The IEEE 754 binary16 bits of `value` if it is exactly representable.
func _exactHalf(_ value: Float) -> UInt16? {
    let sign = UInt16(truncatingIfNeeded: (value.bitPattern >> 16) & 0x8000)
    if value.isNaN { return 0x7E00 }
    if value.isInfinite { return sign | 0x7C00 }
    if value == 0 { return sign }
    let magnitude = value.magnitude
    let exponent = Int(magnitude.exponent)
    if exponent >= -14 && exponent <= 15 {
        let significand = magnitude.significandBitPattern
        guard magnitude.isNormal, significand & 0x1FFF == 0 else { return nil }
        return sign | UInt16(exponent + 15) << 10 | UInt16(truncatingIfNeeded: significand >> 13)
    }
    if exponent >= -24 && exponent < -14 {
        let scaled = magnitude * 0x1p24  // exact: scaling by a power of two
        guard scaled == scaled.rounded(.towardZero), scaled < 1024 else { return nil }
        return sign | UInt16(scaled)
    }
    return nil
}

/// Converts binary16 bits to a Double (exactly; NaN payloads are not kept).
func _halfToDouble(_ bits: UInt16) -> Double {
    let exponent = Int((bits >> 10) & 0x1F)
    let mantissa = Double(bits & 0x3FF)
    let magnitude: Double
    if exponent == 0 {
        magnitude = mantissa * 0x1p-24
    } else if exponent == 31 {
        magnitude = mantissa == 0 ? .infinity : .nan
    } else {
        magnitude = Double(sign: .plus, exponent: exponent - 25, significand: mantissa + 1024)
    }
    return bits & 0x8000 != 0 ? -magnitude : magnitude
}

// MARK: - Reading

/// A bounds-checked view of the input bytes. Every read checks against
/// `count`; positions are always in `0...count`.
struct _CBORInput {
    let base: UnsafePointer<UInt8>
    let count: Int

    @inline(__always)
    subscript(_ index: Int) -> UInt8 { base[index] }

    @inline(__always)
    func unexpectedEnd(_ offset: Int, _ what: String = "an item") -> CBORError {
        CBORError(.unexpectedEnd, "input ended while reading \(what)", offset: offset)
    }

    /// Reads the initial byte at `pos` and its argument, advancing `pos`
    /// past the head. For major type 7 the argument is the simple value or
    /// the raw float bits. Throws on truncation and on reserved additional
    /// information; `allowIndefinite` lets 31 through (argument 0).
    @inline(__always)
    func readHead(_ pos: inout Int, allowIndefinite: Bool = false) throws -> (initial: UInt8, argument: UInt64) {
        guard pos < count else { throw unexpectedEnd(pos) }
        let initial = base[pos]
        let info = initial & 0x1F
        if info < 24 {
            pos += 1
            return (initial, UInt64(info))
        }
        return try readLongHead(&pos, initial: initial, allowIndefinite: allowIndefinite)
    }

    func readLongHead(
        _ pos: inout Int, initial: UInt8, allowIndefinite: Bool
    ) throws -> (initial: UInt8, argument: UInt64) {
        let start = pos
        let info = initial & 0x1F
        let size: Int
        switch info {
        case 24: size = 1
        case 25: size = 2
        case 26: size = 4
        case 27: size = 8
        case 31:
            let major = initial >> 5
            if major == _Major.simple {
                guard allowIndefinite else {
                    throw CBORError(.malformed, "unexpected break code", offset: start)
                }
                pos += 1
                return (initial, 0)
            }
            guard major >= 2 && major != 6 else {
                throw CBORError(
                    .malformed, "additional information 31 is not allowed for major type \(major)", offset: start)
            }
            guard allowIndefinite else {
                throw CBORError(
                    .unsupported, "indefinite-length items are not supported by CBORDecoder",
                    offset: start, expected: "a definite length")
            }
            pos += 1
            return (initial, 0)
        default:
            throw CBORError(.malformed, "reserved additional information \(info)", offset: start)
        }
        guard count - pos - 1 >= size else { throw unexpectedEnd(start, "an item head") }
        let p = UnsafeRawPointer(base + pos + 1)
        let argument: UInt64
        switch size {
        case 1: argument = UInt64(p.load(as: UInt8.self))
        case 2: argument = UInt64(UInt16(bigEndian: p.loadUnaligned(as: UInt16.self)))
        case 4: argument = UInt64(UInt32(bigEndian: p.loadUnaligned(as: UInt32.self)))
        default: argument = UInt64(bigEndian: p.loadUnaligned(as: UInt64.self))
        }
        if initial == 0xF8 && argument < 32 {
            throw CBORError(.malformed, "two-byte simple value \(argument) must be at least 32", offset: start)
        }
        pos += 1 + size
        return (initial, argument)
    }

    /// Checks that a byte/text string of `length` bytes fits in what is left
    /// after `pos`, and returns the length as an `Int`.
    @inline(__always)
    func checkedLength(_ length: UInt64, at pos: Int, headStart: Int) throws -> Int {
        guard length <= UInt64(count - pos) else {
            throw CBORError(
                .lengthTooLarge, "a string claims \(length) bytes but only \(count - pos) remain",
                offset: headStart)
        }
        return Int(length)
    }

    /// Checks that `items` array elements (or map entries, with `perItem` 2)
    /// can fit in what is left (each needs at least one byte).
    @inline(__always)
    func checkedCount(_ items: UInt64, perItem: UInt64, at pos: Int, headStart: Int) throws -> Int {
        let remaining = UInt64(count - pos)
        guard items <= remaining / perItem else {
            throw CBORError(
                .lengthTooLarge,
                "a container claims \(items) \(perItem == 2 ? "entries" : "elements") but only \(remaining) bytes remain",
                offset: headStart)
        }
        return Int(items)
    }

    /// Returns the offset just past the complete item at `start`. Iterative,
    /// with one counter of items still to skip (an array of n adds n, a map
    /// 2n, a tag 1), so nesting depth costs neither stack nor memory.
    /// Rejects indefinite lengths and every malformation `readHead` finds.
    func skip(_ start: Int) throws -> Int {
        var pos = start
        var remaining = 1
        while remaining > 0 {
            remaining -= 1
            let headStart = pos
            let (initial, argument) = try readHead(&pos)
            switch initial >> 5 {
            case _Major.bytes, _Major.text:
                pos += try checkedLength(argument, at: pos, headStart: headStart)
            case _Major.array:
                remaining += try checkedCount(argument, perItem: 1, at: pos, headStart: headStart)
            case _Major.map:
                remaining += 2 * (try checkedCount(argument, perItem: 2, at: pos, headStart: headStart))
            case _Major.tag:
                remaining += 1
            default:
                break  // integers and simple values: the head is the whole item
            }
            // Every item still to come needs at least one byte.
            guard remaining <= count - pos else {
                throw CBORError(
                    .lengthTooLarge, "containers claim \(remaining) more items but only \(count - pos) bytes remain",
                    offset: headStart)
            }
        }
        return pos
    }
}

/// A short description of the item that starts with `initial`, for errors.
func _describeInitial(_ initial: UInt8) -> String {
    switch initial >> 5 {
    case 0: return "unsigned integer"
    case 1: return "negative integer"
    case 2: return "byte string"
    case 3: return "text string"
    case 4: return "array"
    case 5: return "map"
    case 6: return "tag"
    default:
        switch initial {
        case 0xF4, 0xF5: return "bool"
        case 0xF6: return "null"
        case 0xF7: return "undefined"
        case 0xF9, 0xFA, 0xFB: return "float"
        case 0xFF: return "break"
        default: return "simple value"
        }
    }
}
