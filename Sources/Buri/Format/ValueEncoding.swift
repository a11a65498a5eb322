#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The order-preserving encodings of index values ("elements"), specified in `docs/FORMAT.md`
/// under "Index values". Every element starts with a type code and is prefix-free: no element's
/// encoding is a prefix of another's, so a tuple of elements followed by an object key parses
/// unambiguously and an exact-match scan of one value can never reach a longer value.
///
/// | code | element                  | bytes after the code                                   |
/// |------|--------------------------|--------------------------------------------------------|
/// | 0x20 | −∞                       | none                                                   |
/// | 0x21 | negative finite number   | ~(E + 1075) as u16 BE, ~F as u64 BE                    |
/// | 0x22 | zero (and −0.0)          | none                                                   |
/// | 0x23 | positive finite number   | (E + 1075) as u16 BE, F as u64 BE                      |
/// | 0x24 | +∞                       | none                                                   |
/// | 0x30 | byte string              | bytes with 0x00 → 0x00 0x01, then the end mark 0x00 0x00 |
///
/// A finite non-zero number is |x| = 2^E × 1.F: E is the exponent of its highest set bit and F the
/// bits after it, left-aligned in 64 bits. Every Int64, UInt64 and Double has exactly one (E, F), so
/// equal numbers of different Swift types encode identically and byte order is numeric order.
enum ValueEncoding {
    static let negativeInfinityCode: UInt8 = 0x20
    static let negativeCode: UInt8 = 0x21
    static let zeroCode: UInt8 = 0x22
    static let positiveCode: UInt8 = 0x23
    static let positiveInfinityCode: UInt8 = 0x24
    static let binaryCode: UInt8 = 0x30
    static let exponentBias = 1075
    /// Bytes in a finite non-zero number's encoding, type code included.
    static let finiteLength = 11

    // MARK: Encoding

    @inline(__always)
    static func appendBinary(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        out.append(binaryCode)
        for byte in bytes {
            out.append(byte)
            if byte == 0 { out.append(0x01) }
        }
        out.append(0x00)
        out.append(0x00)
    }

    /// The escaped body of a byte string without its end mark: the key prefix shared by every
    /// value that begins with `bytes`.
    static func appendBinaryPrefix(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        out.append(binaryCode)
        for byte in bytes {
            out.append(byte)
            if byte == 0 { out.append(0x01) }
        }
    }

    @inline(__always)
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        if value == 0 {
            out.append(zeroCode)
        } else {
            appendMagnitude(value.magnitude, negative: value < 0, to: &out)
        }
    }

    @inline(__always)
    static func appendUnsigned(_ value: UInt64, to out: inout [UInt8]) {
        if value == 0 {
            out.append(zeroCode)
        } else {
            appendMagnitude(value, negative: false, to: &out)
        }
    }

    /// A non-zero integer magnitude: E is the position of its top bit, F the bits below it.
    @inline(__always)
    private static func appendMagnitude(_ magnitude: UInt64, negative: Bool, to out: inout [UInt8]) {
        let top = 63 - magnitude.leadingZeroBitCount
        let fraction = top == 0 ? 0 : magnitude << UInt64(64 - top)
        appendFinite(exponent: top, fraction: fraction, negative: negative, to: &out)
    }

    /// Any non-NaN double (callers reject NaN first).
    static func appendDouble(_ value: Double, to out: inout [UInt8]) {
        if value == 0 {
            out.append(zeroCode)  // both +0.0 and -0.0
        } else if value.isInfinite {
            out.append(value < 0 ? negativeInfinityCode : positiveInfinityCode)
        } else {
            appendFiniteDouble(value, to: &out)
        }
    }

    static func appendFiniteDouble(_ value: Double, to out: inout [UInt8]) {
        guard value != 0, value.isFinite else { return appendDouble(value, to: &out) }
        let raw = value.significandBitPattern
        let fraction: UInt64
        if value.isSubnormal {
            // raw = m, the value is m × 2^-1074; drop m's top bit and left-align the rest.
            let top = 63 - raw.leadingZeroBitCount
            fraction = top == 0 ? 0 : raw << UInt64(64 - top)
        } else {
            fraction = raw << 12
        }
        appendFinite(exponent: Int(value.exponent), fraction: fraction, negative: value < 0, to: &out)
    }

    @inline(__always)
    private static func appendFinite(exponent: Int, fraction: UInt64, negative: Bool, to out: inout [UInt8]) {
        var biased = UInt16(truncatingIfNeeded: exponent + exponentBias)
        var bits = fraction
        if negative {
            biased = ~biased
            bits = ~bits
        }
        out.append(negative ? negativeCode : positiveCode)
        out.append(UInt8(truncatingIfNeeded: biased >> 8))
        out.append(UInt8(truncatingIfNeeded: biased))
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
    }

    // MARK: Decoding

    /// The length of the element starting at `offset`, or an error if it is malformed or truncated.
    static func elementLength(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(FormatError) -> Int {
        guard offset < bytes.count else { throw FormatError("index value truncated at byte \(offset)") }
        switch bytes[offset] {
        case negativeInfinityCode, zeroCode, positiveInfinityCode:
            return 1
        case negativeCode, positiveCode:
            guard offset + finiteLength <= bytes.count else { throw FormatError("number truncated at byte \(offset)") }
            return finiteLength
        case binaryCode:
            // Only 0x00 bytes matter (an escape or the end mark): memchr finds them a word at a time.
            guard let base = bytes.baseAddress else {
                throw FormatError("byte string at byte \(offset) has no end mark")
            }
            var index = offset + 1
            while index + 1 < bytes.count {
                guard let hit = memchr(base + index, 0, bytes.count - 1 - index) else { break }
                index = base.distance(to: UnsafeRawPointer(hit))
                switch bytes[index + 1] {
                case 0x00: return index + 2 - offset
                case 0x01: index += 2
                default:
                    throw FormatError(
                        "byte string has 0x00 followed by 0x\(String(bytes[index + 1], radix: 16)) at byte \(index)"
                    )
                }
            }
            throw FormatError("byte string at byte \(offset) has no end mark")
        case let code:
            throw FormatError("unknown index value type code 0x\(String(code, radix: 16)) at byte \(offset)")
        }
    }

    static func decodeElement(_ bytes: [UInt8], at offset: inout Int) throws(FormatError) -> IndexValue.Decoded {
        let result: Result<IndexValue.Decoded, FormatError> = bytes.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> IndexValue.Decoded in try decodeElement(raw, at: &offset) }
        }
        return try result.get()
    }

    /// Decodes the element at `offset` and moves `offset` past it.
    static func decodeElement(
        _ bytes: UnsafeRawBufferPointer, at offset: inout Int
    ) throws(FormatError) -> IndexValue.Decoded {
        let length = try elementLength(bytes, at: offset)
        defer { offset += length }
        switch bytes[offset] {
        case negativeInfinityCode: return .double(-.infinity)
        case positiveInfinityCode: return .double(.infinity)
        case zeroCode: return .integer(0)
        case binaryCode:
            var out: [UInt8] = []
            out.reserveCapacity(length - 3)
            var index = offset + 1
            let end = offset + length - 2
            while index < end {
                out.append(bytes[index])
                index += bytes[index] == 0 ? 2 : 1
            }
            return .bytes(out)
        default:
            let negative = bytes[offset] == negativeCode
            var biased = UInt16(bytes[offset + 1]) << 8 | UInt16(bytes[offset + 2])
            var fraction: UInt64 = 0
            for i in 0..<8 { fraction = fraction << 8 | UInt64(bytes[offset + 3 + i]) }
            if negative {
                biased = ~biased
                fraction = ~fraction
            }
            return try number(exponent: Int(biased) - exponentBias, fraction: fraction, negative: negative)
        }
    }

    /// The canonical Swift form of 2^exponent × 1.fraction.
    static func number(exponent: Int, fraction: UInt64, negative: Bool) throws(FormatError) -> IndexValue.Decoded {
        if exponent >= 0, exponent <= 63, exponent == 0 ? fraction == 0 : fraction << UInt64(exponent) == 0 {
            let magnitude = (UInt64(1) << UInt64(exponent)) | (exponent == 0 ? 0 : fraction >> UInt64(64 - exponent))
            if negative {
                if magnitude <= UInt64(Int64.max) { return .integer(-Int64(magnitude)) }
                if magnitude == UInt64(Int64.max) + 1 { return .integer(.min) }
            } else {
                if magnitude <= UInt64(Int64.max) { return .integer(Int64(magnitude)) }
                return .unsigned(magnitude)
            }
        }
        // Not a 64-bit integer: it must be a double, whose fraction has at most 52 bits (fewer for
        // subnormals: exponent + 1074 bits below 2^-1022).
        guard exponent >= -1074, exponent <= 1023 else {
            throw FormatError(
                "number 2^\(exponent) × 1.\(String(fraction, radix: 16)) is neither a 64-bit integer nor a double")
        }
        let fractionBits = exponent >= -1022 ? 52 : exponent + 1074
        guard fractionBits == 0 ? fraction == 0 : fraction << UInt64(fractionBits) == 0 else {
            throw FormatError(
                "number 2^\(exponent) × 1.\(String(fraction, radix: 16)) is neither a 64-bit integer nor a double")
        }
        let significand = 1 + Double(fraction >> 12) / 4_503_599_627_370_496  // 2^52
        let value = Double(sign: negative ? .minus : .plus, exponent: exponent, significand: significand)
        return .double(value)
    }
}

/// Bytes on disk that do not follow `docs/FORMAT.md`. Wrapped into a ``BuriError`` that names the
/// bucket, key or index before it reaches a caller.
struct FormatError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
