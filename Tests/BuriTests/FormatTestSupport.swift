import BuriStorage
// Tests of Buri's on-disk format (docs/FORMAT.md): golden vectors that pin every byte the
// document shows, seeded property tests of the index value encodings, and robustness of the
// parsers against malformed and random input.
//
// What the Format suites share; each suite has a file of its own (FormatGoldenTests.swift,
// FormatDiskTests.swift, FormatPropertyTests.swift, FormatQueryRangeTests.swift,
// FormatRequiredCaseTests.swift, FormatParserTests.swift, FormatSpecTests.swift).

import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Helpers

/// Lower-case hex, bytes separated by single spaces: the form docs/FORMAT.md uses.
func formatHex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined(separator: " ")
}

/// A number of one of the three Swift types Buri indexes exactly.
enum Num: CustomStringConvertible {
    case int(Int64)
    case uint(UInt64)
    case double(Double)

    var indexValue: IndexValue {
        switch self {
        case .int(let v): return IndexValue(v)
        case .uint(let v): return IndexValue(v)
        case .double(let v): return try! IndexValue(v)
        }
    }

    var description: String {
        switch self {
        case .int(let v): return "Int64(\(v))"
        case .uint(let v): return "UInt64(\(v))"
        case .double(let v): return "Double(\(v))"
        }
    }

    /// What `IndexValue.decoded` must return: the smallest integer type holding it, else Double.
    var canonical: IndexValue.Decoded {
        switch self {
        case .int(let v): return .integer(v)
        case .uint(let v): return v <= UInt64(Int64.max) ? .integer(Int64(v)) : .unsigned(v)
        case .double(let d):
            if d == 0 { return .integer(0) }
            if let i = Int64(exactly: d) { return .integer(i) }
            if let u = UInt64(exactly: d) { return .unsigned(u) }
            return .double(d)
        }
    }
}

/// An integer in [-2^63, 2^64) as sign and magnitude (zero is never negative).
struct Wide: Comparable {
    var negative: Bool
    var magnitude: UInt64
    init(_ v: Int64) { negative = v < 0; magnitude = v.magnitude }
    init(_ v: UInt64) { negative = false; magnitude = v }
    init(negative: Bool, magnitude: UInt64) { self.negative = negative && magnitude != 0; self.magnitude = magnitude }
    static func < (a: Wide, b: Wide) -> Bool {
        if a.negative != b.negative { return a.negative }
        return a.negative ? a.magnitude > b.magnitude : a.magnitude < b.magnitude
    }
}

func sign<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (b < a ? 1 : 0) }

/// Exact three-way comparison of a Double with an integer, without converting the integer to Double.
func compare(_ d: Double, _ w: Wide) -> Int {
    if d.isInfinite { return d < 0 ? -1 : 1 }
    if d >= 0x1p64 { return 1 }
    if d < -0x1p63 { return -1 }
    let floor = d.rounded(.down)  // an integer in [-2^63, 2^64), exactly representable below
    let f = floor < 0 ? Wide(negative: true, magnitude: UInt64(-floor)) : Wide(UInt64(floor))
    if f < w { return -1 }  // d < floor + 1 <= w
    if w < f { return 1 }
    return d == floor ? 0 : 1
}

/// Exact three-way comparison of any two numbers.
func compare(_ a: Num, _ b: Num) -> Int {
    switch (a, b) {
    case let (.double(x), .double(y)): return sign(x, y)
    case let (.double(x), .int(y)): return compare(x, Wide(y))
    case let (.double(x), .uint(y)): return compare(x, Wide(y))
    case let (.int(x), .double(y)): return -compare(y, Wide(x))
    case let (.uint(x), .double(y)): return -compare(y, Wide(x))
    case let (.int(x), .int(y)): return sign(x, y)
    case let (.uint(x), .uint(y)): return sign(x, y)
    case let (.int(x), .uint(y)): return sign(Wide(x), Wide(y))
    case let (.uint(x), .int(y)): return sign(Wide(x), Wide(y))
    }
}

func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
}

/// One element of an index value tuple.
enum Element: CustomStringConvertible {
    case number(Num)
    case bytes([UInt8])

    var encoded: [UInt8] {
        switch self {
        case .number(let n): return n.indexValue.encoded
        case .bytes(let b): return IndexValue(bytes: b).encoded
        }
    }

    var description: String {
        switch self {
        case .number(let n): return n.description
        case .bytes(let b): return "bytes[\(formatHex(b))]"
        }
    }
}

/// Every number sorts before every byte string; numbers compare exactly, byte strings bytewise.
func compare(_ a: Element, _ b: Element) -> Int {
    switch (a, b) {
    case let (.number(x), .number(y)): return compare(x, y)
    case let (.bytes(x), .bytes(y)): return compareBytes(x, y)
    case (.number, .bytes): return -1
    case (.bytes, .number): return 1
    }
}

func compare(_ a: [Element], _ b: [Element]) -> Int {
    for (x, y) in zip(a, b) {
        let c = compare(x, y)
        if c != 0 { return c }
    }
    return sign(a.count, b.count)
}

/// A Double index value through the throwing initializer (`IndexValue(20.0)` would use the literal one).
func doubleValue(_ value: Double) throws -> IndexValue { try IndexValue(value) }

/// Re-encodes a decoded value.
func encode(_ decoded: IndexValue.Decoded) -> [UInt8] {
    switch decoded {
    case .integer(let v): return IndexValue(v).encoded
    case .unsigned(let v): return IndexValue(v).encoded
    case .double(let v): return (try? IndexValue(v).encoded) ?? []
    case .bytes(let b): return IndexValue(bytes: b).encoded
    }
}

func decode(_ bytes: [UInt8]) throws(FormatError) -> (IndexValue.Decoded, Int) {
    var offset = 0
    let value = try ValueEncoding.decodeElement(bytes, at: &offset)
    return (value, offset)
}

// MARK: Random values

extension SeededGenerator {
    /// A uniform integer in 0..<n.
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    /// True with the given probability in percent.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    mutating func int64() -> Int64 {
        switch below(7) {
        case 0: return Int64(bitPattern: next())
        case 1: return Int64(below(2001)) - 1000
        case 2:  // near a power of two, either sign
            let base = Int64(1) << Int64(below(63))
            let v = base &+ Int64(below(7) - 3)
            return chance(50) ? v : (v == .min ? v : -v)
        case 3:
            return [Int64.min, .min + 1, .min + 2, .max, .max - 1, 0, 1, -1, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1]
                .randomElement(using: &self)!
        case 4:  // a random magnitude of random width
            let v = Int64(bitPattern: next() >> UInt64(below(64)))
            return chance(50) ? v : (v == .min ? v : -v)
        case 5:  // exactly a double's value
            let d = (Double(Int64(bitPattern: next())) / Double(1 << below(60))).rounded()
            return Int64(exactly: d) ?? 0
        default: return Int64(bitPattern: next() & ~(UInt64.max >> UInt64(below(64))))  // low bits clear
        }
    }

    mutating func uint64() -> UInt64 {
        switch below(5) {
        case 0: return next()
        case 1: return UInt64(below(1001))
        case 2: return (UInt64(1) << UInt64(below(64))) &+ UInt64(bitPattern: Int64(below(7) - 3))
        case 3:
            return [UInt64.max, .max - 1, 1 << 63, (1 << 63) - 1, (1 << 63) + 1, 0, 1, 1 << 53, (1 << 53) + 1]
                .randomElement(using: &self)!
        default: return next() >> UInt64(below(64))
        }
    }

    mutating func double() -> Double {
        switch below(9) {
        case 0:  // any bit pattern but NaN
            while true {
                let d = Double(bitPattern: next())
                if !d.isNaN { return d }
            }
        case 1:  // subnormal
            return Double(
                sign: chance(50) ? .minus : .plus, exponentBitPattern: 0,
                significandBitPattern: next() & ((1 << 52) - 1))
        case 2:
            return [
                0.0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, -.leastNormalMagnitude,
                Double.leastNormalMagnitude.nextDown, 0.5, -0.5, 1, -1, 0x1p53, 0x1p63, -0x1p63, 0x1p64, -0x1p64,
                0x1p63.nextDown, 0x1p64.nextDown, 0x1p64.nextUp, -0x1p63.nextUp, -0x1p63.nextDown,
            ].randomElement(using: &self)!
        case 3: return Double(int64())
        case 4: return Double(uint64())
        case 5:
            let d = Double(int64())
            return chance(50) ? d.nextUp : d.nextDown
        case 6: return Double(below(2001) - 1000) / Double(1 << below(6))
        case 7:
            let significand = 1 + Double(next() >> 12) / 0x1p52
            return Double(sign: chance(50) ? .minus : .plus, exponent: below(2098) - 1074, significand: significand)
        default:
            return Double(
                sign: chance(50) ? .minus : .plus, exponent: below(140) - 70, significand: 1 + Double(below(16)) / 16)
        }
    }

    mutating func num() -> Num {
        switch below(3) {
        case 0: return .int(int64())
        case 1: return .uint(uint64())
        default: return .double(double())
        }
    }

    /// A number and, often, the same value in another Swift type.
    mutating func numPair() -> (Num, Num) {
        let a = num()
        guard chance(30) else { return (a, num()) }
        switch a {
        case .int(let v):
            if chance(50), let d = Double(exactly: v) { return (a, .double(d)) }
            if let u = UInt64(exactly: v) { return (a, .uint(u)) }
        case .uint(let v):
            if chance(50), let d = Double(exactly: v) { return (a, .double(d)) }
            if let i = Int64(exactly: v) { return (a, .int(i)) }
        case .double(let d):
            if d == 0 { return (a, chance(50) ? .double(-d) : .int(0)) }
            if let i = Int64(exactly: d) { return (a, .int(i)) }
            if let u = UInt64(exactly: d) { return (a, .uint(u)) }
        }
        return (a, a)
    }

    /// Short byte strings rich in 0x00, 0x01 and 0xFF.
    mutating func bytes(maxLength: Int = 8) -> [UInt8] {
        let alphabet: [UInt8] = [0x00, 0x00, 0x00, 0x01, 0x01, 0xFF, 0xFF, 0x02, 0x45, 0x4E, 0x7F, 0x80, 0xFE]
        return (0..<below(maxLength + 1)).map { _ in
            chance(85) ? alphabet.randomElement(using: &self)! : UInt8(truncatingIfNeeded: next())
        }
    }

    mutating func element() -> Element {
        chance(50) ? .number(num()) : .bytes(bytes(maxLength: 5))
    }

    mutating func tuple() -> [Element] {
        (0..<(1 + below(3))).map { _ in element() }
    }

    /// A valid non-empty object key (UTF-8), sometimes with NUL and bytes that look like type codes.
    mutating func objectKey() -> String {
        let pieces = ["p", "1", "\u{0}", "0", "#", "$", "é", "EN", "\u{7F}", "~", "z"]
        return (0..<(1 + below(4))).map { _ in pieces.randomElement(using: &self)! }.joined()
    }
}

// MARK: - The Person example of docs/FORMAT.md, shared by the golden, disk and spec suites

/// The Person example of docs/FORMAT.md.
struct FormatPerson: Codable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int
}

let personDescriptor = BucketDescriptor(
    id: 1, name: "Person", keyField: "objectId", schemaVersion: 1,
    indexes: [
        IndexDefinition(id: 1, name: "locale", components: [.binary]),
        IndexDefinition(id: 2, name: "age", components: [.numeric]),
    ],
    nextIndexId: 3)

let personHeader = RecordHeader(
    schemaVersion: 1,
    entries: [
        .init(index: 1, tuple: IndexValue("EN").encoded),
        .init(index: 2, tuple: IndexValue(20).encoded),
    ])

func personRecord() throws -> [UInt8] {
    var out: [UInt8] = []
    personHeader.append(to: &out)
    try CBOREncoder().encode(FormatPerson(objectId: "p1", name: "Dirk", locale: "EN", age: 20), appendingTo: &out)
    return out
}

func varint(_ value: UInt64) -> [UInt8] {
    var out: [UInt8] = []
    Varint.append(value, to: &out)
    return out
}

/// docs/FORMAT.md, found by walking up from this file (through a symlink, if any).
func formatDocument() throws -> String {
    for start in [URL(fileURLWithPath: #filePath), URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()] {
        var directory = start.deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("docs/FORMAT.md")
            if let text = try? String(contentsOf: candidate, encoding: .utf8) { return text }
            directory = directory.deletingLastPathComponent()
        }
    }
    Issue.record("docs/FORMAT.md not found above \(#filePath)")
    return ""
}

/// docs/FORMAT.md with every run of whitespace collapsed to one space (hex may wrap across lines).
func flatFormatDocument() throws -> String {
    try formatDocument().split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

func bytes(hex: String) -> [UInt8] {
    hex.split(separator: " ").compactMap { UInt8($0, radix: 16) }
}
