// How a `Date` is written and read (part of Buri's on-disk format, version 2).
//
// A `Date` holds a `Double` of seconds since 2001-01-01 (Foundation's reference date). It is
// written as RFC 8949 tag 1, seconds since 1970 (the POSIX epoch), in the first of these forms
// that gives back exactly the same `Date`:
//
// 1. tag 1 around an integer: a whole number of seconds (|seconds since 2001| < 2^63);
// 2. tag 1 around a float64 E = t + 978307200, when E - 978307200 gives back t exactly;
// 3. tag 1001 (RFC 9581 extended time) around the map {5: [e, m]}: the epoch time as the
//    bigfloat m × 2^e, exactly (m an integer, or a bignum, tags 2/3, when it needs more than 64
//    bits). About half of the dates with a fraction of a second need this: seconds since 1970
//    are larger than seconds since 2001, so a float64 of them can have one bit less below the
//    point.
//
// Non-finite dates take form 2 (E is ±infinity or NaN, like t).
//
// Reading accepts tag 1 around any integer or float (rounded to the nearest `Date` if it has
// more precision than a `Date` holds), tag 1001 around {1: number} or {5: bigfloat} (which
// must be exactly a `Date`), and — for records written by format version 1 — an untagged
// number, which is seconds since 2001 (what Foundation's own `Date.encode(to:)` writes).

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum _CBORDate {
    static let epochTag: UInt64 = 1
    static let extendedTag: UInt64 = 1001
    static let bigfloatKey: UInt64 = 5
    static let epochKey: UInt64 = 1
    /// Seconds from 1970-01-01 to 2001-01-01.
    static let referenceEpoch: Int64 = 978_307_200
    static let referenceEpochDouble = 978_307_200.0

    /// The item for a date of `t` seconds since 2001.
    static func item(referenceSeconds t: Double) -> CBORValue {
        if let whole = wholeEpochSeconds(t) { return .tagged(epochTag, .int(whole)) }
        if let epoch = exactEpochDouble(t) { return .tagged(epochTag, .float(epoch)) }
        return .tagged(extendedTag, .map([CBORMapEntry(key: .unsigned(bigfloatKey), value: bigfloat(t))]))
    }

    /// Seconds since 1970 as an integer, if `t` is whole and the sum fits.
    @inline(__always)
    static func wholeEpochSeconds(_ t: Double) -> Int64? {
        guard t.isFinite, t == t.rounded(.towardZero), t.magnitude < 0x1p62 else { return nil }
        return Int64(t) + referenceEpoch
    }

    /// Seconds since 1970 as a float64, if that gives `t` back exactly.
    @inline(__always)
    static func exactEpochDouble(_ t: Double) -> Double? {
        let epoch = t + referenceEpochDouble
        if t.isNaN { return epoch }
        return epoch - referenceEpochDouble == t ? epoch : nil
    }

    /// `[e, m]` with m × 2^e = t + 978307200 exactly, m odd (or zero).
    static func bigfloat(_ t: Double) -> CBORValue {
        // t = ±significand × 2^q with an integer significand.
        let significand: UInt64 = t.isNormal ? (1 << 52) | t.significandBitPattern : t.significandBitPattern
        let q = t.isNormal ? Int(t.exponent) - 52 : -1074
        let shift = max(0, -q)
        let epochPart = _BigUInt(UInt64(referenceEpoch)).shiftedLeft(by: shift)
        let datePart = _BigUInt(significand).shiftedLeft(by: max(0, q))
        var negative = false
        var mantissa: _BigUInt
        if t.sign == .plus {
            mantissa = epochPart.adding(datePart)
        } else if datePart.isLess(than: epochPart) {
            mantissa = epochPart.subtracting(datePart)
        } else {
            mantissa = datePart.subtracting(epochPart)
            negative = true
        }
        var exponent = -shift
        let zeros = mantissa.trailingZeroBitCount
        if zeros > 0 && !mantissa.isZero {
            mantissa = mantissa.shiftedRight(by: zeros)
            exponent += zeros
        }
        return .array([.int(Int64(exponent)), _integerItem(negative: negative, magnitude: mantissa)])
    }

    // MARK: Reading

    /// Seconds since 2001 of a date item: tag 1, tag 1001, or (format version 1) an untagged
    /// number of seconds since 2001. Nil if `value` is none of these.
    static func referenceSeconds(_ value: CBORValue) throws -> Double? {
        switch value {
        case .tagged(epochTag, let content):
            return try referenceSeconds(epoch: content)
        case .tagged(extendedTag, let content):
            guard case .map(let entries) = content, entries.count == 1 else {
                throw CBORError(
                    .unsupported, "extended time (tag 1001) other than {1: seconds} or {5: bigfloat}",
                    expected: "date", found: "tag 1001")
            }
            switch (entries[0].key, entries[0].value) {
            case (.unsigned(epochKey), let seconds):
                return try referenceSeconds(epoch: seconds)
            case (.unsigned(bigfloatKey), let bigfloat):
                return try referenceSeconds(bigfloat: bigfloat)
            default:
                throw CBORError(
                    .unsupported, "extended time (tag 1001) other than {1: seconds} or {5: bigfloat}",
                    expected: "date", found: "tag 1001")
            }
        case .tagged(_, let content):
            return try referenceSeconds(content)
        case .float(let seconds):
            return seconds
        case .unsigned, .negative:
            return value.doubleValue
        default:
            return nil
        }
    }

    /// Seconds since 2001 of tag 1's content; rounded to the nearest double if it has more precision.
    static func referenceSeconds(epoch content: CBORValue) throws -> Double {
        switch content {
        case .unsigned(let n):
            return Double(Int128(n) - Int128(referenceEpoch))
        case .negative(let n):
            return Double(-1 - Int128(n) - Int128(referenceEpoch))
        case .float(let seconds):
            return Date(timeIntervalSince1970: seconds).timeIntervalSinceReferenceDate
        default:
            throw CBORError(
                .typeMismatch, "tag 1 (epoch time) must hold a number", expected: "integer or float",
                found: content.kindName)
        }
    }

    /// Seconds since 2001 of the bigfloat `[e, m]` (epoch time), which must be exactly a `Date`.
    static func referenceSeconds(bigfloat: CBORValue) throws -> Double {
        guard case .array(let parts) = bigfloat, parts.count == 2, let exponent = parts[0].int64Value,
            let (negative, magnitude) = _integerParts(parts[1])
        else {
            throw CBORError(
                .typeMismatch, "a bigfloat is [exponent, mantissa]", expected: "[integer, integer]",
                found: bigfloat.kindName)
        }
        guard exponent.magnitude <= 1200, magnitude.bitWidth <= 1200 else {
            throw CBORError(.valueOutOfRange, "the extended time is far beyond what a Date holds", expected: "Date")
        }
        // t × 2^s = m × 2^(e+s) − 978307200 × 2^s, with s = max(0, −e).
        let shift = Int(max(0, -exponent))
        let scaled = magnitude.shiftedLeft(by: Int(max(0, exponent)))
        let epoch = _BigUInt(UInt64(referenceEpoch)).shiftedLeft(by: shift)
        let resultNegative: Bool
        let resultMagnitude: _BigUInt
        if negative {
            (resultNegative, resultMagnitude) = (true, scaled.adding(epoch))
        } else if epoch.isLess(than: scaled) || epoch == scaled {
            (resultNegative, resultMagnitude) = (false, scaled.subtracting(epoch))
        } else {
            (resultNegative, resultMagnitude) = (true, epoch.subtracting(scaled))
        }
        guard let seconds = resultMagnitude.exactDouble(times2ToThe: -shift) else {
            throw CBORError(
                .valueOutOfRange, "the extended time is not exactly a Date (a Double of seconds since 2001)",
                expected: "Date")
        }
        return resultNegative ? -seconds : seconds
    }
}

// MARK: - Integers beyond 64 bits

/// CBOR's item for ±magnitude: an integer head when it fits, else a bignum (tag 2 or 3).
func _integerItem(negative: Bool, magnitude: _BigUInt) -> CBORValue {
    if negative && !magnitude.isZero {
        let less = magnitude.subtracting(_BigUInt(1))
        if let n = less.uint64Value { return .negative(n) }
        return .tagged(3, .bytes(less.bigEndianBytes))
    }
    if let n = magnitude.uint64Value { return .unsigned(n) }
    return .tagged(2, .bytes(magnitude.bigEndianBytes))
}

/// The sign and magnitude of an integer item or bignum (tags 2 and 3).
func _integerParts(_ value: CBORValue) -> (negative: Bool, magnitude: _BigUInt)? {
    switch value {
    case .unsigned(let n): return (false, _BigUInt(n))
    case .negative(let n): return (true, _BigUInt(n).adding(_BigUInt(1)))
    case .tagged(2, .bytes(let bytes)): return (false, _BigUInt(bigEndian: bytes))
    case .tagged(3, .bytes(let bytes)): return (true, _BigUInt(bigEndian: bytes).adding(_BigUInt(1)))
    default: return nil
    }
}

/// A small unsigned integer of any width: just what exact date conversions need.
struct _BigUInt: Equatable {
    /// 32-bit limbs, least significant first, no leading (high) zero limbs.
    private(set) var limbs: [UInt32]

    init(_ value: UInt64) {
        limbs = [UInt32(truncatingIfNeeded: value), UInt32(truncatingIfNeeded: value >> 32)]
        normalize()
    }

    init(bigEndian bytes: [UInt8]) {
        limbs = []
        var limb: UInt32 = 0
        var bits = 0
        for byte in bytes.reversed() {
            limb |= UInt32(byte) << UInt32(bits)
            bits += 8
            if bits == 32 {
                limbs.append(limb)
                limb = 0
                bits = 0
            }
        }
        if bits > 0 { limbs.append(limb) }
        normalize()
    }

    private init(limbs: [UInt32]) {
        self.limbs = limbs
        normalize()
    }

    private mutating func normalize() {
        while let last = limbs.last, last == 0 { limbs.removeLast() }
    }

    var isZero: Bool { limbs.isEmpty }

    var bitWidth: Int { limbs.last.map { limbs.count * 32 - $0.leadingZeroBitCount } ?? 0 }

    var trailingZeroBitCount: Int {
        for (i, limb) in limbs.enumerated() where limb != 0 { return i * 32 + limb.trailingZeroBitCount }
        return 0
    }

    var uint64Value: UInt64? {
        guard limbs.count <= 2 else { return nil }
        return limbs.enumerated().reduce(0) { $0 | UInt64($1.element) << UInt64(32 * $1.offset) }
    }

    var bigEndianBytes: [UInt8] {
        var bytes: [UInt8] = []
        for limb in limbs.reversed() {
            bytes.append(contentsOf: [
                UInt8(truncatingIfNeeded: limb >> 24), UInt8(truncatingIfNeeded: limb >> 16),
                UInt8(truncatingIfNeeded: limb >> 8), UInt8(truncatingIfNeeded: limb),
            ])
        }
        return Array(bytes.drop { $0 == 0 })
    }

    func isLess(than other: _BigUInt) -> Bool {
        if limbs.count != other.limbs.count { return limbs.count < other.limbs.count }
        for i in stride(from: limbs.count - 1, through: 0, by: -1) where limbs[i] != other.limbs[i] {
            return limbs[i] < other.limbs[i]
        }
        return false
    }

    func adding(_ other: _BigUInt) -> _BigUInt {
        var result: [UInt32] = []
        var carry: UInt64 = 0
        for i in 0..<max(limbs.count, other.limbs.count) {
            let sum =
                UInt64(i < limbs.count ? limbs[i] : 0) + UInt64(i < other.limbs.count ? other.limbs[i] : 0) + carry
            result.append(UInt32(truncatingIfNeeded: sum))
            carry = sum >> 32
        }
        if carry > 0 { result.append(UInt32(carry)) }
        return _BigUInt(limbs: result)
    }

    /// self − other, for other ≤ self.
    func subtracting(_ other: _BigUInt) -> _BigUInt {
        var result: [UInt32] = []
        var borrow: Int64 = 0
        for i in 0..<limbs.count {
            var difference = Int64(limbs[i]) - Int64(i < other.limbs.count ? other.limbs[i] : 0) - borrow
            if difference < 0 {
                difference += 1 << 32
                borrow = 1
            } else {
                borrow = 0
            }
            result.append(UInt32(truncatingIfNeeded: difference))
        }
        return _BigUInt(limbs: result)
    }

    func shiftedLeft(by bits: Int) -> _BigUInt {
        guard bits > 0, !isZero else { return self }
        var result = [UInt32](repeating: 0, count: bits / 32)
        let within = UInt32(bits % 32)
        var carry: UInt32 = 0
        for limb in limbs {
            result.append(within == 0 ? limb : limb << within | carry)
            carry = within == 0 ? 0 : limb >> (32 - within)
        }
        if carry > 0 { result.append(carry) }
        return _BigUInt(limbs: result)
    }

    func shiftedRight(by bits: Int) -> _BigUInt {
        guard bits > 0 else { return self }
        let skip = bits / 32
        guard skip < limbs.count else { return _BigUInt(0) }
        let within = UInt32(bits % 32)
        var result: [UInt32] = []
        for i in skip..<limbs.count {
            let high: UInt32 = i + 1 < limbs.count ? limbs[i + 1] : 0
            result.append(within == 0 ? limbs[i] : limbs[i] >> within | high << (32 - within))
        }
        return _BigUInt(limbs: result)
    }

    /// self × 2^exponent as a Double, if that is exact.
    func exactDouble(times2ToThe exponent: Int) -> Double? {
        guard !isZero else { return 0 }
        let zeros = trailingZeroBitCount
        let odd = shiftedRight(by: zeros)
        guard odd.bitWidth <= 53, let significand = odd.uint64Value else { return nil }
        let power = exponent + zeros
        let value = Double(sign: .plus, exponent: power, significand: Double(significand))
        // Exact unless it overflowed or lost bits as a subnormal.
        guard value.isFinite, value != 0 else { return nil }
        let lowest = value.isNormal ? Int(value.exponent) - 52 : -1074
        return power >= lowest ? value : nil
    }
}

extension CBORValue {
    /// A short name of this item's kind, for messages.
    var kindName: String {
        switch self {
        case .unsigned, .negative: return "integer"
        case .bytes: return "byte string"
        case .text: return "text string"
        case .array: return "array"
        case .map: return "map"
        case .tagged(let tag, _): return "tag \(tag)"
        case .bool: return "bool"
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple(let v): return "simple value \(v)"
        case .float: return "float"
        }
    }

    /// The item ``CBOREncoder`` writes for `date`: RFC 8949 tag 1 (seconds since 1970) around an
    /// integer or float64, or, when neither gives back exactly the same `Date`, RFC 9581 tag 1001
    /// with the epoch time as an exact bigfloat.
    ///
    /// ```swift
    /// CBORValue(date: Date(timeIntervalSince1970: 1_700_000_000))   // .tagged(1, 1700000000)
    /// CBORValue(date: Date(timeIntervalSince1970: 0.5))             // .tagged(1, 0.5)
    /// ```
    public init(date: Date) {
        self = _CBORDate.item(referenceSeconds: date.timeIntervalSinceReferenceDate)
    }

    /// The `Date` this item stands for, read the way ``CBORDecoder`` reads a `Date`: tag 1
    /// (seconds since 1970), tag 1001 (`{1: seconds}` or `{5: bigfloat}`), or an untagged number,
    /// which records of format version 1 used for seconds since 2001. `nil` for anything else.
    ///
    /// ```swift
    /// CBORValue.tagged(1, 0).dateValue   // 1970-01-01 00:00:00 +0000
    /// CBORValue.float(0).dateValue       // 2001-01-01 00:00:00 +0000 (version 1 records)
    /// ```
    public var dateValue: Date? {
        guard let seconds = try? _CBORDate.referenceSeconds(self) else { return nil }
        return Date(timeIntervalSinceReferenceDate: seconds)
    }

    /// Whether this is a date item written the version 2 way (tag 1 or tag 1001).
    public var isTaggedDate: Bool {
        if case .tagged(let tag, _) = self { return tag == _CBORDate.epochTag || tag == _CBORDate.extendedTag }
        return false
    }
}
