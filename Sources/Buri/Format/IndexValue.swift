import BuriCodec
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One value of a secondary index: a number or a byte string, held in its order-preserving
/// encoding (see `docs/FORMAT.md`, "Index values").
///
/// Numbers of every Swift type share one exact scale: `IndexValue(20) == IndexValue(20.0)`,
/// `-0.0 == 0.0`, and `9007199254740993` (2⁵³+1) is greater than `9007199254740992.0`.
/// Byte strings (and `String`s, as UTF-8) compare bytewise. Every number sorts before every byte string.
///
/// ```swift
/// let age: IndexValue = 42                 // an integer literal
/// let ratio = try IndexValue(0.75)         // Doubles throw for NaN
/// let locale: IndexValue = "EN"            // a string literal
/// assert(IndexValue(20) == (try IndexValue(20.0)))
/// ```
public struct IndexValue: Sendable, Hashable, Comparable {
    /// The element's encoding as it appears inside index keys; equality and order are those of these bytes.
    public let encoded: [UInt8]

    init(encoded: [UInt8]) { self.encoded = encoded }

    /// A byte-string value.
    public init(bytes: some Sequence<UInt8>) {
        let bytes = Array(bytes)
        var out: [UInt8] = []
        // The tag, the bytes, the terminator, and room for a few escapes.
        out.reserveCapacity(bytes.count + 8)
        ValueEncoding.appendBinary(bytes, to: &out)
        encoded = out
    }

    /// A string value: its UTF-8 bytes.
    public init(_ string: String) {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count + 3)
        ValueEncoding.appendBinary(string.utf8, to: &out)
        encoded = out
    }

    /// A byte-string value from `Data`.
    public init(_ data: Data) { self.init(bytes: data) }

    /// An integer of any type, exactly: every `Int64` and `UInt64`, and wider integers (such as
    /// `Int128`) that are exactly a `Double`.
    ///
    /// ```swift
    /// let big = try IndexValue(Int128(1) << 70)       // 2^70 is a Double exactly
    /// _ = try IndexValue(Int128(UInt64.max) + 1 + 1)  // throws: neither 64-bit nor a Double
    /// ```
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` for an integer beyond
    ///   the 64-bit range that a `Double` cannot hold exactly; it is never rounded.
    public init<I: BinaryInteger>(_ integer: I) throws(BuriError) {
        if let value = Int64(exactly: integer) {
            self.init(value)
        } else if let value = UInt64(exactly: integer) {
            self.init(value)
        } else if let value = Double(exactly: integer) {
            self = IndexValue(floatLiteral: value)
        } else {
            throw BuriError.invalidIndexValue(
                bucket: nil, key: nil, index: nil, reason: Self.inexactInteger("\(integer)"))
        }
    }

    static func inexactInteger(_ text: String) -> String {
        "the integer \(text) is neither an Int64, a UInt64 nor exactly a Double, the numbers an index holds exactly; it is refused rather than rounded"
    }

    /// An `Int64`, exactly.
    public init(_ value: Int64) {
        var out: [UInt8] = []
        out.reserveCapacity(ValueEncoding.finiteLength)
        ValueEncoding.appendInteger(value, to: &out)
        encoded = out
    }

    /// A `UInt64`, exactly.
    public init(_ value: UInt64) {
        var out: [UInt8] = []
        out.reserveCapacity(ValueEncoding.finiteLength)
        ValueEncoding.appendUnsigned(value, to: &out)
        encoded = out
    }

    /// An `Int`, exactly.
    public init(_ value: Int) { self.init(Int64(value)) }
    /// An `Int32`, exactly.
    public init(_ value: Int32) { self.init(Int64(value)) }
    /// An `Int16`, exactly.
    public init(_ value: Int16) { self.init(Int64(value)) }
    /// An `Int8`, exactly.
    public init(_ value: Int8) { self.init(Int64(value)) }
    /// A `UInt`, exactly.
    public init(_ value: UInt) { self.init(UInt64(value)) }
    /// A `UInt32`, exactly.
    public init(_ value: UInt32) { self.init(UInt64(value)) }
    /// A `UInt16`, exactly.
    public init(_ value: UInt16) { self.init(UInt64(value)) }
    /// A `UInt8`, exactly.
    public init(_ value: UInt8) { self.init(UInt64(value)) }

    /// The index value of a number in an object's CBOR form, exactly: an integer (major type 0
    /// or 1) that is an `Int64`, a `UInt64` or exactly a `Double` (so -2^64 is, -2^63 - 1 is not),
    /// or a float other than NaN. `buri import` and `buri query` read numbers through this.
    ///
    /// ```swift
    /// try IndexValue(number: .negative(9_223_372_036_854_775_807))   // Int64.min
    /// try IndexValue(number: .negative(9_223_372_036_854_775_808))   // throws: -2^63 - 1
    /// ```
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` for other numbers, NaN
    ///   and values that are not numbers.
    public init(number: CBORValue) throws(BuriError) {
        switch number {
        case .unsigned(let n):
            self.init(n)
        case .negative(let n):
            if n <= UInt64(Int64.max) {
                self.init(~Int64(bitPattern: n))
            } else if n == .max {
                self = IndexValue(floatLiteral: -0x1p64)
            } else if let magnitude = Double(exactly: n + 1) {
                self = IndexValue(floatLiteral: -magnitude)
            } else {
                throw BuriError.invalidIndexValue(
                    bucket: nil, key: nil, index: nil, reason: Self.inexactInteger(number.jsonString()))
            }
        case .float(let d):
            try self.init(d)
        default:
            throw BuriError.invalidIndexValue(
                bucket: nil, key: nil, index: nil, reason: "\(number.jsonString()) is not a number")
        }
    }

    /// A floating-point value. Infinities are allowed and sort at the ends of the number line.
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` for NaN, which has no place in an order.
    public init(_ double: Double) throws(BuriError) {
        guard !double.isNaN else {
            throw BuriError.invalidIndexValue(
                bucket: nil, key: nil, index: nil, reason: "NaN cannot be indexed: it has no place in numeric order")
        }
        var out: [UInt8] = []
        out.reserveCapacity(ValueEncoding.finiteLength)
        ValueEncoding.appendDouble(double, to: &out)
        encoded = out
    }

    /// A `Float` value, widened exactly to `Double`.
    public init(_ float: Float) throws(BuriError) { try self.init(Double(float)) }

    /// Whether this is a number (as opposed to a byte string).
    public var isNumeric: Bool { encoded.first.map { $0 != ValueEncoding.binaryCode } ?? false }

    /// The value decoded back into Swift terms.
    public var decoded: Decoded {
        var offset = 0
        return (try? ValueEncoding.decodeElement(encoded, at: &offset)) ?? .bytes(encoded)
    }

    /// An index value as Swift sees it: the canonical form of a number (the smallest integer type
    /// that holds it exactly, else `Double`) or bytes.
    public enum Decoded: Sendable, Hashable, CustomStringConvertible {
        case integer(Int64)
        case unsigned(UInt64)
        case double(Double)
        case bytes([UInt8])

        public var description: String {
            switch self {
            case .integer(let value): return String(value)
            case .unsigned(let value): return String(value)
            case .double(let value): return String(value)
            case .bytes(let bytes):
                if let string = String(validating: bytes, as: UTF8.self) { return string }
                return "0x" + bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            }
        }
    }

    public static func < (lhs: IndexValue, rhs: IndexValue) -> Bool {
        lhs.encoded.lexicographicallyPrecedes(rhs.encoded)
    }
}

extension IndexValue: CustomStringConvertible {
    public var description: String {
        switch decoded {
        case .bytes: return "\"\(decoded)\""
        default: return decoded.description
        }
    }
}

extension IndexValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral {
    public init(integerLiteral value: Int64) { self.init(value) }

    public init(floatLiteral value: Double) {
        // A literal cannot be NaN, so this cannot fail.
        var out: [UInt8] = []
        ValueEncoding.appendDouble(value, to: &out)
        self.init(encoded: out)
    }

    public init(stringLiteral value: String) { self.init(value) }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

/// A type whose values can be stored in a **binary** index: strings (as UTF-8) and raw bytes.
///
/// ```swift
/// static let indexes: [BuriIndex<Person>] = [.binary("locale", \.locale)]
/// ```
public protocol BinaryIndexable: SendableMetatype {
    /// The index value for this instance.
    var binaryIndexValue: IndexValue { get }
    /// How tools read this index value from the object's stored field, or `nil` if they cannot
    /// (the default): then an index over it is recorded as computed and `buri import` refuses it.
    static var indexFieldForm: IndexFieldForm? { get }
}

extension BinaryIndexable {
    public static var indexFieldForm: IndexFieldForm? { nil }
}

extension String: BinaryIndexable {
    public var binaryIndexValue: IndexValue { IndexValue(self) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}
extension Substring: BinaryIndexable {
    public var binaryIndexValue: IndexValue { IndexValue(String(self)) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}
extension Array: BinaryIndexable where Element == UInt8 {
    /// Bytes index as a byte string but encode as an array of integers, so tools cannot read
    /// the index value from the field (``indexFieldForm`` is `nil`).
    public var binaryIndexValue: IndexValue { IndexValue(bytes: self) }
}
extension Data: BinaryIndexable {
    public var binaryIndexValue: IndexValue { IndexValue(self) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}
extension UUID: BinaryIndexable {
    /// A UUID indexes as its canonical upper-case string, as it encodes in records.
    public var binaryIndexValue: IndexValue { IndexValue(uuidString) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}

/// A type whose values can be stored in a **numeric** index: every integer and floating-point type.
///
/// ```swift
/// static let indexes: [BuriIndex<Person>] = [.numeric("age", \.age)]
/// ```
public protocol NumericIndexable: SendableMetatype {
    /// The index value for this instance. Throws for NaN.
    func numericIndexValue() throws(BuriError) -> IndexValue
    /// How tools read this index value from the object's stored field, or `nil` if they cannot
    /// (the default for your own types): then an index over it is recorded as computed and
    /// `buri import` refuses it. Integers and floats are ``IndexFieldForm/value``, `Date` is
    /// ``IndexFieldForm/date``.
    static var indexFieldForm: IndexFieldForm? { get }
}

extension NumericIndexable {
    public static var indexFieldForm: IndexFieldForm? { nil }
}

extension NumericIndexable where Self: BinaryInteger {
    public static var indexFieldForm: IndexFieldForm? { .value }
}

extension NumericIndexable where Self: BinaryInteger {
    /// The integer exactly; one beyond 64 bits that is not exactly a `Double` throws.
    public func numericIndexValue() throws(BuriError) -> IndexValue { try IndexValue(self) }
}
extension Int: NumericIndexable {}
extension Int8: NumericIndexable {}
extension Int16: NumericIndexable {}
extension Int32: NumericIndexable {}
extension Int64: NumericIndexable {}
extension UInt: NumericIndexable {}
extension UInt8: NumericIndexable {}
extension UInt16: NumericIndexable {}
extension UInt32: NumericIndexable {}
extension UInt64: NumericIndexable {}
extension Double: NumericIndexable {
    public func numericIndexValue() throws(BuriError) -> IndexValue { try IndexValue(self) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}
extension Float: NumericIndexable {
    public func numericIndexValue() throws(BuriError) -> IndexValue { try IndexValue(Double(self)) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}
extension Date: NumericIndexable {
    /// A date indexes as seconds since 1970 (a Double), so date ranges are numeric ranges — the
    /// same number its record holds (RFC 8949 tag 1) and `buri get` shows.
    public func numericIndexValue() throws(BuriError) -> IndexValue { try IndexValue(timeIntervalSince1970) }
    public static var indexFieldForm: IndexFieldForm? { .date }
}
