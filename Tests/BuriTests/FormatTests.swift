import BuriStorage
// Tests of Buri's on-disk format (docs/FORMAT.md): golden vectors that pin every byte the
// document shows, seeded property tests of the index value encodings, and robustness of the
// parsers against malformed and random input.

import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Helpers

/// Lower-case hex, bytes separated by single spaces: the form docs/FORMAT.md uses.
private func formatHex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined(separator: " ")
}

/// The SplitMix64 generator: small, fast and fully determined by its seed.
private struct FormatSplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

/// A number of one of the three Swift types Buri indexes exactly.
private enum Num: CustomStringConvertible {
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
private struct Wide: Comparable {
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

private func sign<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (b < a ? 1 : 0) }

/// Exact three-way comparison of a Double with an integer, without converting the integer to Double.
private func compare(_ d: Double, _ w: Wide) -> Int {
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
private func compare(_ a: Num, _ b: Num) -> Int {
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

private func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
}

/// One element of an index value tuple.
private enum Element: CustomStringConvertible {
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
private func compare(_ a: Element, _ b: Element) -> Int {
    switch (a, b) {
    case let (.number(x), .number(y)): return compare(x, y)
    case let (.bytes(x), .bytes(y)): return compareBytes(x, y)
    case (.number, .bytes): return -1
    case (.bytes, .number): return 1
    }
}

private func compare(_ a: [Element], _ b: [Element]) -> Int {
    for (x, y) in zip(a, b) {
        let c = compare(x, y)
        if c != 0 { return c }
    }
    return sign(a.count, b.count)
}

/// A Double index value through the throwing initializer (`IndexValue(20.0)` would use the literal one).
private func doubleValue(_ value: Double) throws -> IndexValue { try IndexValue(value) }

/// Re-encodes a decoded value.
private func encode(_ decoded: IndexValue.Decoded) -> [UInt8] {
    switch decoded {
    case .integer(let v): return IndexValue(v).encoded
    case .unsigned(let v): return IndexValue(v).encoded
    case .double(let v): return (try? IndexValue(v).encoded) ?? []
    case .bytes(let b): return IndexValue(bytes: b).encoded
    }
}

private func decode(_ bytes: [UInt8]) throws(FormatError) -> (IndexValue.Decoded, Int) {
    var offset = 0
    let value = try ValueEncoding.decodeElement(bytes, at: &offset)
    return (value, offset)
}

// MARK: Random values

extension FormatSplitMix64 {
    mutating func int64() -> Int64 {
        switch below(7) {
        case 0: return Int64(bitPattern: next())
        case 1: return Int64(below(2001)) - 1000
        case 2:  // near a power of two, either sign
            let base = Int64(1) << Int64(below(63))
            let v = base &+ Int64(below(7) - 3)
            return chance(50) ? v : (v == .min ? v : -v)
        case 3: return [Int64.min, .min + 1, .min + 2, .max, .max - 1, 0, 1, -1, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1].randomElement(using: &self)!
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
        case 3: return [UInt64.max, .max - 1, 1 << 63, (1 << 63) - 1, (1 << 63) + 1, 0, 1, 1 << 53, (1 << 53) + 1].randomElement(using: &self)!
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
            return Double(sign: chance(50) ? .minus : .plus, exponentBitPattern: 0, significandBitPattern: next() & ((1 << 52) - 1))
        case 2:
            return [0.0, -0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                    .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, -.leastNormalMagnitude,
                    Double.leastNormalMagnitude.nextDown, 0.5, -0.5, 1, -1, 0x1p53, 0x1p63, -0x1p63, 0x1p64, -0x1p64,
                    0x1p63.nextDown, 0x1p64.nextDown, 0x1p64.nextUp, -0x1p63.nextUp, -0x1p63.nextDown].randomElement(using: &self)!
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
            return Double(sign: chance(50) ? .minus : .plus, exponent: below(140) - 70, significand: 1 + Double(below(16)) / 16)
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
        return (0..<below(maxLength + 1)).map { _ in chance(85) ? alphabet.randomElement(using: &self)! : UInt8(truncatingIfNeeded: next()) }
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

// MARK: - Golden vectors (mirrored by docs/FORMAT.md)

/// The Person example of docs/FORMAT.md.
private struct FormatPerson: Codable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int
}

private let personDescriptor = BucketDescriptor(
    id: 1, name: "Person", keyField: "objectId", schemaVersion: 1,
    indexes: [
        IndexDefinition(id: 1, name: "locale", components: [.binary]),
        IndexDefinition(id: 2, name: "age", components: [.numeric]),
    ],
    nextIndexId: 3)

/// The Person bucket as if it also declared the compound index `locale_age` (id 3), for the query examples.
private let personQueryDescriptor: BucketDescriptor = {
    var descriptor = personDescriptor
    descriptor.indexes.append(IndexDefinition(id: 3, name: "locale_age", components: [.binary, .numeric]))
    descriptor.nextIndexId = 4
    return descriptor
}()

private let personHeader = RecordHeader(schemaVersion: 1, entries: [
    .init(index: 1, tuple: IndexValue("EN").encoded),
    .init(index: 2, tuple: IndexValue(20).encoded),
])

private func personRecord() throws -> [UInt8] {
    var out: [UInt8] = []
    personHeader.append(to: &out)
    try CBOREncoder().encode(FormatPerson(objectId: "p1", name: "Dirk", locale: "EN", age: 20), appendingTo: &out)
    return out
}

private func element(_ value: IndexValue) -> [UInt8] { value.encoded }

private func entry(index: UInt32, _ values: [IndexValue], key: String = "p1") -> [UInt8] {
    Keyspace.indexEntryKey(prefix: Keyspace.indexPrefix(bucket: 1, index: index), tuple: IndexTuple.join(values), objectKey: key)
}

private func varint(_ value: UInt64) -> [UInt8] {
    var out: [UInt8] = []
    Varint.append(value, to: &out)
    return out
}

/// The key range a query on the Person bucket scans.
private func range(_ query: Query) throws -> BuriStorage.KeyRange {
    try ConditionPlan(query.conditions[0], in: personQueryDescriptor).range
}

private func start(_ query: Query) throws -> [UInt8] { try range(query).start ?? [] }
private func end(_ query: Query) throws -> [UInt8] { try range(query).end ?? [] }

/// Every byte string docs/FORMAT.md shows, with the code that produces it.
private let goldenVectors: [(name: String, hex: String, bytes: @Sendable () throws -> [UInt8])] = [
    ("database header key", "00 66 6f 72 6d 61 74", { Keyspace.headerKey }),
    ("database header value, format 4", "42 55 52 49 00 04", { Keyspace.headerValue() }),
    ("database header value, format 3 (read, upgraded by the first write)", "42 55 52 49 00 03", { Keyspace.headerValue(version: 3) }),
    ("object count key of bucket id 1", "05 00 00 00 01", { Keyspace.countKey(bucket: 1) }),
    ("object count key of bucket id 258", "05 00 00 01 02", { Keyspace.countKey(bucket: 258) }),
    ("object count value 0", "00 00 00 00 00 00 00 00", { Keyspace.countValue(0) }),
    ("object count value 1", "00 00 00 00 00 00 00 01", { Keyspace.countValue(1) }),
    ("object count value 100000", "00 00 00 00 00 01 86 a0", { Keyspace.countValue(100_000) }),
    ("database header value, format 2 (read, upgraded by the first write)", "42 55 52 49 00 02", { Keyspace.headerValue(version: 2) }),
    ("retired bucket id marker key of bucket id 1", "04 00 00 00 01", { Keyspace.retiredKey(bucket: 1) }),
    ("retired bucket id marker value: purging, bucket Person", "01 50 65 72 73 6f 6e", { Keyspace.retiredValue(.purging, bucket: "Person") }),
    ("retired bucket id marker value: staging, bucket Person", "02 50 65 72 73 6f 6e", { Keyspace.retiredValue(.staging, bucket: "Person") }),
    ("database header value, format 1 (read, upgraded by the first write)", "42 55 52 49 00 01", { Keyspace.headerValue(version: 1) }),
    ("catalog key of bucket Person", "01 50 65 72 73 6f 6e", { Keyspace.catalogKey(bucket: "Person") }),
    ("catalog value of bucket Person",
     "a6 62 69 64 01 64 6e 61 6d 65 66 50 65 72 73 6f 6e 68 6b 65 79 46 69 65 6c 64 68 6f 62 6a 65 63 74 49 64 6d 73 63 68 65 6d 61 56 65 72 73 69 6f 6e 01 67 69 6e 64 65 78 65 73 82 a6 62 69 64 01 64 6e 61 6d 65 66 6c 6f 63 61 6c 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 66 62 69 6e 61 72 79 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 a6 62 69 64 02 64 6e 61 6d 65 63 61 67 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 67 6e 75 6d 65 72 69 63 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 6b 6e 65 78 74 49 6e 64 65 78 49 64 03",
     { try personDescriptor.encoded() }),
    ("catalog index map of .numeric(\"due\", \\.dueDate, field: \"dueDate\")", "a8 62 69 64 03 64 6e 61 6d 65 63 64 75 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 67 6e 75 6d 65 72 69 63 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 66 66 69 65 6c 64 73 81 67 64 75 65 44 61 74 65 6a 66 69 65 6c 64 46 6f 72 6d 73 81 64 64 61 74 65",
     { try CBOREncoder().encode(IndexDefinition(id: 3, name: "due", components: [.numeric], fields: ["dueDate"], fieldForms: [.date])) }),
    ("catalog index map of a .computed index", "a7 62 69 64 04 64 6e 61 6d 65 61 63 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 66 62 69 6e 61 72 79 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f5 67 76 65 72 73 69 6f 6e 00 68 63 6f 6d 70 75 74 65 64 f5",
     { try CBOREncoder().encode(IndexDefinition(id: 4, name: "c", components: [.binary], multiValued: true, computed: true)) }),
    ("payload: Date, 2001-01-01T00:00:01Z (tag 1, integer)", "c1 1a 3a 4f c8 81",
     { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1)) }),
    ("payload: Date, 1970-01-01T00:00:00.5Z (tag 1, float64)", "c1 fb 3f e0 00 00 00 00 00 00",
     { try CBOREncoder().encode(Date(timeIntervalSince1970: 0.5)) }),
    ("payload: Date, 2^29 + 2^-23 s after 2001 (tag 1001, bigfloat)", "d9 03 e9 a1 05 82 36 1b 00 2d 27 e4 40 00 00 01",
     { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23)) }),
    ("payload: Date in a version 1 record (2001-01-01T00:00:01Z)", "fb 3f f0 00 00 00 00 00 00",
     { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1).timeIntervalSinceReferenceDate) }),
    ("record prefix of bucket 1", "02 00 00 00 01", { Keyspace.recordPrefix(bucket: 1) }),
    ("record key: bucket 1, object key p1", "02 00 00 00 01 70 31", { Keyspace.recordKey(bucket: 1, key: "p1") }),
    ("index prefix: bucket 1, index 2", "03 00 00 00 01 00 00 00 02", { Keyspace.indexPrefix(bucket: 1, index: 2) }),
    ("entry key: locale \"EN\", p1", "03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", { entry(index: 1, ["EN"]) }),
    ("entry key: locale \"E\", p1", "03 00 00 00 01 00 00 00 01 30 45 00 00 70 31", { entry(index: 1, ["E"]) }),
    ("entry key: age 20, p1", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", { entry(index: 2, [20]) }),
    ("entry key: age 20.0, p1", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", { entry(index: 2, [try doubleValue(20.0)]) }),
    ("entry key: locale_age (\"EN\", 20), p1", "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 40 00 00 00 00 00 00 00 70 31",
     { entry(index: 3, ["EN", 20]) }),
    // Elements
    ("element 20", "23 04 37 40 00 00 00 00 00 00 00", { element(20) }),
    ("element 20.0", "23 04 37 40 00 00 00 00 00 00 00", { element(try doubleValue(20.0)) }),
    ("element 0", "22", { element(0) }),
    ("element -0.0", "22", { element(try doubleValue(-0.0)) }),
    ("element 1", "23 04 33 00 00 00 00 00 00 00 00", { element(1) }),
    ("element -1", "21 fb cc ff ff ff ff ff ff ff ff", { element(-1) }),
    ("element 0.5", "23 04 32 00 00 00 00 00 00 00 00", { element(0.5) }),
    ("element -0.5", "21 fb cd ff ff ff ff ff ff ff ff", { element(-0.5) }),
    ("element 2^53 as Double", "23 04 68 00 00 00 00 00 00 00 00", { element(try doubleValue(9_007_199_254_740_992.0)) }),
    ("element 2^53+1", "23 04 68 00 00 00 00 00 00 08 00", { element(IndexValue(Int64(9_007_199_254_740_993))) }),
    ("element Int64.min", "21 fb 8d ff ff ff ff ff ff ff ff", { element(IndexValue(Int64.min)) }),
    ("element Int64.max", "23 04 71 ff ff ff ff ff ff ff fc", { element(IndexValue(Int64.max)) }),
    ("element UInt64.max", "23 04 72 ff ff ff ff ff ff ff fe", { element(IndexValue(UInt64.max)) }),
    ("element +infinity", "24", { element(try IndexValue(Double.infinity)) }),
    ("element -infinity", "20", { element(try IndexValue(-Double.infinity)) }),
    ("element Double.greatestFiniteMagnitude", "23 08 32 ff ff ff ff ff ff f0 00", { element(try IndexValue(Double.greatestFiniteMagnitude)) }),
    ("element Double.leastNonzeroMagnitude", "23 00 01 00 00 00 00 00 00 00 00", { element(try IndexValue(Double.leastNonzeroMagnitude)) }),
    ("element 1.5 (E = 0, F = 2^63)", "23 04 33 80 00 00 00 00 00 00 00", { element(1.5) }),
    ("element 3 (E = 1, F = 2^63)", "23 04 34 80 00 00 00 00 00 00 00", { element(3) }),
    ("element 2^63 + 2^11 (UInt64)", "23 04 72 00 00 00 00 00 00 10 00", { element(IndexValue((UInt64(1) << 63) + 2048)) }),
    ("element -(2^63 + 2^11) (a Double)", "21 fb 8d ff ff ff ff ff ff ef ff", { element(try doubleValue(-(0x1p63 + 0x1p11))) }),
    ("element 2^64 (a Double)", "23 04 73 00 00 00 00 00 00 00 00", { element(try doubleValue(0x1p64)) }),
    ("element 3 × 2^-1074 (subnormal)", "23 00 02 80 00 00 00 00 00 00 00", { element(try doubleValue(3 * Double.leastNonzeroMagnitude)) }),
    ("element \"\"", "30 00 00", { element("") }),
    ("element \"E\"", "30 45 00 00", { element("E") }),
    ("element \"EN\"", "30 45 4e 00 00", { element("EN") }),
    ("element \"a\\0b\"", "30 61 00 01 62 00 00", { element("a\u{0}b") }),
    ("element bytes ff", "30 ff 00 00", { element(IndexValue(bytes: [0xFF])) }),
    // Record values
    ("varint 300", "ac 02", { varint(300) }),
    ("varint UInt64.max", "ff ff ff ff ff ff ff ff ff 01", { varint(.max) }),
    ("record header of p1", "01 01 01 02 01 05 30 45 4e 00 00 02 0b 23 04 37 40 00 00 00 00 00 00 00", {
        var out: [UInt8] = []
        personHeader.append(to: &out)
        return out
    }),
    ("record value of p1",
     "01 01 01 02 01 05 30 45 4e 00 00 02 0b 23 04 37 40 00 00 00 00 00 00 00 a4 68 6f 62 6a 65 63 74 49 64 62 70 31 64 6e 61 6d 65 64 44 69 72 6b 66 6c 6f 63 61 6c 65 62 45 4e 63 61 67 65 14",
     { try personRecord() }),
    ("record header of n1 (multi-valued tags \"db\", \"swift\")", "01 01 00 02 01 05 30 64 62 00 00 01 08 30 73 77 69 66 74 00 00", {
        var out: [UInt8] = []
        RecordHeader(schemaVersion: 0, entries: [.init(index: 1, tuple: IndexValue("db").encoded), .init(index: 1, tuple: IndexValue("swift").encoded)]).append(to: &out)
        return out
    }),
    ("entry key: bucket 2, tags \"db\", n1", "03 00 00 00 02 00 00 00 01 30 64 62 00 00 6e 31",
     { Keyspace.indexEntryKey(prefix: Keyspace.indexPrefix(bucket: 2, index: 1), tuple: IndexValue("db").encoded, objectKey: "n1") }),
    ("entry key: bucket 2, tags \"swift\", n1", "03 00 00 00 02 00 00 00 01 30 73 77 69 66 74 00 00 6e 31",
     { Keyspace.indexEntryKey(prefix: Keyspace.indexPrefix(bucket: 2, index: 1), tuple: IndexValue("swift").encoded, objectKey: "n1") }),
    // Query ranges
    ("range locale == \"E\": start", "03 00 00 00 01 00 00 00 01 30 45 00 00", { try start(.index("locale", equals: "E")) }),
    ("range locale == \"E\": end", "03 00 00 00 01 00 00 00 01 30 45 00 01", { try end(.index("locale", equals: "E")) }),
    ("range locale prefix \"E\": start", "03 00 00 00 01 00 00 00 01 30 45", { try start(.index("locale", prefix: "E")) }),
    ("range locale prefix \"E\": end", "03 00 00 00 01 00 00 00 01 30 46", { try end(.index("locale", prefix: "E")) }),
    ("range age in 20...29: start", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00", { try start(.index("age", in: 20...29)) }),
    ("range age in 20...29: end", "03 00 00 00 01 00 00 00 02 23 04 37 d0 00 00 00 00 00 00 01", { try end(.index("age", in: 20...29)) }),
    ("range age in 20..<30: end", "03 00 00 00 01 00 00 00 02 23 04 37 e0 00 00 00 00 00 00 00", { try end(.index("age", in: 20..<30)) }),
    ("range age > 20: start", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 01", { try start(.index("age", from: .exclusive(20), to: .unbounded)) }),
    ("range age > 20: end", "03 00 00 00 01 00 00 00 03", { try end(.index("age", from: .exclusive(20), to: .unbounded)) }),
    ("range age < 0: start", "03 00 00 00 01 00 00 00 02", { try start(.index("age", in: ..<0)) }),
    ("range age < 0: end", "03 00 00 00 01 00 00 00 02 22", { try end(.index("age", in: ..<0)) }),
    ("range locale_age \"EN\", 20...29: start", "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 40 00 00 00 00 00 00 00",
     { try start(.index("locale_age", equals: ["EN"], in: 20...29)) }),
    ("range locale_age \"EN\", 20...29: end", "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 d0 00 00 00 00 00 00 01",
     { try end(.index("locale_age", equals: ["EN"], in: 20...29)) }),
    ("range all records of bucket 1: end", "02 00 00 00 02", { BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: 1)).end ?? [] }),
    // Continuation tokens
    ("query signature: locale == \"EN\" and age in 20...29", "00 02 06 6c 6f 63 61 6c 65 01 30 45 4e 00 00 00 03 61 67 65 00 01 01 23 04 37 40 00 00 00 00 00 00 00 01 23 04 37 d0 00 00 00 00 00 00 00", { ContinuationFormat.signature(of: tokenExampleQuery) }),
    ("query fingerprint: locale == \"EN\" and age in 20...29", "f0 58 b7 a0 89 39 09 c2", { fingerprintBytes(tokenExampleQuery) }),
    ("query fingerprint: the same, descending", "3d 6c 7a 67 bb 27 88 3b", { fingerprintBytes(tokenExampleQuery.descending()) }),
    ("continuation token: bucket 1, ordered by locale, 1 returned, after p1", "b1 00 00 00 01 00 00 00 01 f0 58 b7 a0 89 39 09 c2 01 03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", {
        ContinuationFormat.encode(ContinuationToken(bucket: 1, order: 1, fingerprint: ContinuationFormat.fingerprint(of: tokenExampleQuery),
                                                    returned: 1, position: entry(index: 1, ["EN"])))
    }),
]

/// The query of docs/FORMAT.md's continuation token example.
private let tokenExampleQuery = Query.index("locale", equals: "EN").and(.index("age", in: 20...29))

/// A fingerprint as u64be.
private func fingerprintBytes(_ query: Query) -> [UInt8] {
    let value = ContinuationFormat.fingerprint(of: query)
    return (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
}

/// docs/FORMAT.md, found by walking up from this file (through a symlink, if any).
private func formatDocument() throws -> String {
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
private func flatFormatDocument() throws -> String {
    try formatDocument().split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

@Suite("Format: golden vectors")
struct FormatGoldenTests {
    @Test("every documented byte string is what the code produces", arguments: goldenVectors.indices)
    func vector(_ i: Int) throws {
        let vector = goldenVectors[i]
        let actual = formatHex(try vector.bytes())
        #expect(actual == vector.hex, "\(vector.name): the code gives \(actual)")
    }

    @Test("docs/FORMAT.md shows every golden vector verbatim")
    func documentShowsVectors() throws {
        let doc = try formatDocument()
        // Hex in the document may wrap across lines: compare with all whitespace collapsed.
        let flat = doc.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for vector in goldenVectors {
            #expect(flat.contains(vector.hex), "docs/FORMAT.md lacks \(vector.name): \(vector.hex)")
        }
        #expect(doc.contains("format version 4") || doc.contains("Format version 4"))
    }


    @Test("the catalog value decodes back and has the documented CBOR shape")
    func catalogShape() throws {
        let bytes = try personDescriptor.encoded()
        #expect(bytes.count == 202)  // as docs/FORMAT.md says
        #expect(try BucketDescriptor.decode(bytes) == personDescriptor)
        let value = try CBORValue(decoding: bytes)
        let keys = value.mapEntries?.compactMap(\.key.stringValue)
        #expect(keys == ["id", "name", "keyField", "schemaVersion", "indexes", "nextIndexId"])
        let index = value["indexes"]?[0]
        #expect(index?.mapEntries?.compactMap(\.key.stringValue) == ["id", "name", "components", "unique", "multiValued", "version"])
        // Absent optionals are left out of the map; present `fields` comes last.
        var bare = personDescriptor
        bare.keyField = nil
        bare.indexes[0].fields = ["locale"]
        let bareValue = try CBORValue(decoding: try bare.encoded())
        #expect(bareValue.mapEntries?.compactMap(\.key.stringValue) == ["id", "name", "schemaVersion", "indexes", "nextIndexId"])
        #expect(bareValue["indexes"]?[0]?.mapEntries?.last?.key.stringValue == "fields")
        #expect(try BucketDescriptor.decode(try bare.encoded()) == bare)
    }

    @Test("the record value parses into its header and a CBOR payload")
    func recordShape() throws {
        let record = try personRecord()
        let (header, offset) = try record.withUnsafeBytes { raw in try RecordHeader.parse(raw) }
        #expect(header == personHeader)
        #expect(offset == 24)
        #expect(record.count == 62)  // as docs/FORMAT.md says
        let person = try CBORDecoder().decode(FormatPerson.self, from: Array(record[offset...]))
        #expect(person.objectId == "p1" && person.name == "Dirk" && person.locale == "EN" && person.age == 20)
    }

    @Test("the database header parses; other values are not headers")
    func header() {
        #expect(Keyspace.parseHeader(Keyspace.headerValue()) == 4)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x04]) == 4)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x03]) == 3)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x01]) == 1)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x02]) == 2)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x01, 0x00]) == 256)
        #expect(Keyspace.parseHeader(Array("BURX".utf8) + [0x00, 0x01]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00]) == nil)
        #expect(Keyspace.parseHeader([]) == nil)
        // §4: version 0 was never written; a known version (1, 2) has exactly 6 bytes.
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x00, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x01, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x02, 0xFF, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("buri".utf8) + [0x00, 0x02]) == nil)
        // A newer version is a version, whatever its length: the opener says "upgrade Buri".
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x03, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x04, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x05]) == 5)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x05, 0x01, 0x02]) == 5)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0xFF, 0xFF]) == 65535)
    }

    @Test("catalog keys give back bucket names byte for byte")
    func catalogKeys() {
        for name in ["Person", "a", "ab", "a\u{0}b", "é", "e\u{301}", String(repeating: "x", count: 1024)] {
            let key = Keyspace.catalogKey(bucket: name)
            #expect(key == [0x01] + Array(name.utf8))
            #expect(Keyspace.bucketName(fromCatalogKey: key).map { Array($0.utf8) } == Array(name.utf8))
        }
        #expect(Keyspace.bucketName(fromCatalogKey: [0x01, 0xFF]) == nil)
        #expect(Keyspace.bucketName(fromCatalogKey: [0x02, 0x41]) == nil)
    }
}

// MARK: - A database on disk, read back as plain LevelDB

@Suite("Format: databases on disk")
struct FormatDiskTests {
    final class Directory {
        let path: String
        init() {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("buri-format-\(UUID().uuidString)").path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test("a database written by Buri holds exactly the documented keys and values")
    func layoutOnDisk() throws {
        let directory = Directory()
        let db = try BuriDatabase(path: directory.path)
        let bucket = try db.createBucket(named: "Person", keyField: "objectId", indexes: [
            IndexDefinition(id: 0, name: "locale", components: [.binary]),
            IndexDefinition(id: 0, name: "age", components: [.numeric]),
        ])
        let header = personHeader
        var value: [UInt8] = []
        header.append(to: &value)
        try CBOREncoder().encode(FormatPerson(objectId: "p1", name: "Dirk", locale: "EN", age: 20), appendingTo: &value)
        try bucket.write([RawBucket.RecordWrite(key: "p1", header: header, value: value)])
        #expect(try bucket.keys(.index("locale", equals: "EN")) == ["p1"])
        #expect(try bucket.keys(.index("locale", equals: "E")) == [])
        #expect(try bucket.keys(.index("age", in: 20...20)) == ["p1"])
        #expect(try bucket.keys(.index("age", equals: try doubleValue(20.0))) == ["p1"])
        db.close()

        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        let entries = Array(try raw.entries())
        var expectedDescriptor = personDescriptor
        expectedDescriptor.schemaVersion = 0
        let expected: [(String, [UInt8])] = [
            ("00 66 6f 72 6d 61 74", Keyspace.headerValue()),
            ("01 50 65 72 73 6f 6e", try expectedDescriptor.encoded()),
            ("02 00 00 00 01 70 31", value),
            ("03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", []),
            ("03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", []),
            ("05 00 00 00 01", bytes(hex: "00 00 00 00 00 00 00 01")),
        ]
        #expect(entries.map { formatHex($0.key) } == expected.map(\.0))
        #expect(entries.map(\.value) == expected.map(\.1))
    }

    @Test("bucket \"a\" never sees bucket \"ab\"'s objects")
    func bucketIsolation() throws {
        let directory = Directory()
        let db = try BuriDatabase(path: directory.path)
        defer { db.close() }
        let a = try db.createBucket(named: "a")
        let ab = try db.createBucket(named: "ab")
        func write(_ bucket: RawBucket, _ key: String) throws {
            var value: [UInt8] = []
            RecordHeader(schemaVersion: 0, entries: []).append(to: &value)
            value.append(0xA0)
            try bucket.write([RawBucket.RecordWrite(key: key, header: RecordHeader(schemaVersion: 0, entries: []), value: value)])
        }
        try write(a, "1")
        try write(ab, "1")
        try write(ab, "2")
        #expect(try a.count() == 1)
        #expect(try ab.count() == 2)
        #expect(try a.keys(.all) == ["1"])
        #expect(try db.bucketNames() == ["a", "ab"])
    }

    @Test("a LevelDB database Buri did not write is refused and left untouched")
    func foreignDatabase() throws {
        let directory = Directory()
        do {
            let raw = try Database(path: directory.path, options: Options())
            try raw.put(Array("hello".utf8), Array("world".utf8))
            raw.close()
        }
        #expect(throws: BuriError.notABuriDatabase(path: directory.path)) { try BuriDatabase(path: directory.path) }
        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        #expect(Array(try raw.entries()).map(\.key) == [Array("hello".utf8)])
    }

    @Test("a database of a newer format version, or with a foreign header, is refused and left untouched")
    func newerFormat() throws {
        for value in [Array("BURI".utf8) + [0x00, 0x05], Array("BURI".utf8) + [0x01, 0x00], Array("NOPE".utf8) + [0x00, 0x01]] {
            let directory = Directory()
            do {
                let raw = try Database(path: directory.path, options: Options())
                try raw.put(Keyspace.headerKey, value)
                raw.close()
            }
            do {
                _ = try BuriDatabase(path: directory.path)
                Issue.record("opened a database with header \(formatHex(value))")
            } catch {
                if value.starts(with: Array("BURI".utf8)) {
                    #expect(error == .unsupportedFormat(path: directory.path, found: Int(Keyspace.parseHeader(value)!), supported: 4))
                } else {
                    #expect(error == .notABuriDatabase(path: directory.path))
                }
            }
            let raw = try Database(path: directory.path, options: Options())
            #expect(Array(try raw.entries()).map { $0.key + [0xFF] + $0.value } == [Keyspace.headerKey + [0xFF] + value])
            raw.close()
        }
    }
}

// MARK: - Properties of the index value encodings

@Suite("Format: order-preserving index values")
struct FormatPropertyTests {
    static let pairs = 20_000

    private func checkPairs(seed: UInt64, _ make: (inout FormatSplitMix64) -> (Num, Num)) {
        var rng = FormatSplitMix64(seed: seed)
        var failures: [String] = []
        var equalPairs = 0
        for _ in 0..<Self.pairs {
            let (a, b) = make(&rng)
            let ea = a.indexValue.encoded, eb = b.indexValue.encoded
            let expected = compare(a, b)
            if expected == 0 { equalPairs += 1 }
            if compareBytes(ea, eb) != expected, failures.count < 10 {
                failures.append("\(a) vs \(b): expected \(expected), bytes \(formatHex(ea)) vs \(formatHex(eb))")
            }
            if (a.indexValue == b.indexValue) != (expected == 0), failures.count < 10 {
                failures.append("IndexValue equality of \(a) and \(b)")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(equalPairs > 0)
    }

    @Test("Int64: byte order is numeric order")
    func int64Order() {
        checkPairs(seed: 1) { rng in
            let a = rng.int64()
            return (.int(a), .int(rng.chance(10) ? a : rng.chance(30) ? a &+ Int64(rng.below(5) - 2) : rng.int64()))
        }
    }

    @Test("UInt64: byte order is numeric order")
    func uint64Order() {
        checkPairs(seed: 2) { rng in
            let a = rng.uint64()
            return (.uint(a), .uint(rng.chance(10) ? a : rng.chance(30) ? a &+ UInt64(rng.below(5)) : rng.uint64()))
        }
    }

    @Test("Double: byte order is numeric order, subnormals and infinities included")
    func doubleOrder() {
        checkPairs(seed: 3) { rng in
            let a = rng.double()
            let b: Double
            switch rng.below(5) {
            case 0: b = a
            case 1: b = a.nextUp.isNaN ? a : a.nextUp
            case 2: b = a.nextDown.isNaN ? a : a.nextDown
            case 3: b = -a
            default: b = rng.double()
            }
            return (.double(a), .double(b))
        }
    }

    @Test("mixed Int64, UInt64 and Double compare exactly")
    func mixedOrder() {
        checkPairs(seed: 4) { rng in rng.numPair() }
    }

    @Test("decoding gives back the canonical value, and re-encoding the same bytes")
    func canonicalDecoding() throws {
        var rng = FormatSplitMix64(seed: 5)
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let n = rng.num()
            let bytes = n.indexValue.encoded
            do {
                let (decoded, length) = try decode(bytes)
                if decoded != n.canonical || length != bytes.count || encode(decoded) != bytes || n.indexValue.decoded != decoded {
                    failures.append("\(n) decodes to \(decoded)")
                }
            } catch {
                failures.append("\(n): \(error)")
            }
            if failures.count >= 10 { break }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("byte strings: byte order is bytewise order; decoding gives them back")
    func bytesOrder() throws {
        var rng = FormatSplitMix64(seed: 6)
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let a = rng.bytes()
            let b = rng.chance(20) ? a + rng.bytes(maxLength: 2) : rng.bytes()
            let ea = IndexValue(bytes: a).encoded, eb = IndexValue(bytes: b).encoded
            if compareBytes(ea, eb) != compareBytes(a, b) { failures.append("\(formatHex(a)) vs \(formatHex(b))") }
            if try decode(ea) != (.bytes(a), ea.count) { failures.append("decoding \(formatHex(ea))") }
            if failures.count >= 10 { break }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("strings index as their UTF-8 bytes")
    func strings() {
        var rng = FormatSplitMix64(seed: 7)
        for _ in 0..<1000 {
            let s = rng.objectKey()
            #expect(IndexValue(s) == IndexValue(bytes: Array(s.utf8)))
        }
        #expect(IndexValue("é") != IndexValue("e\u{301}"))  // no Unicode normalisation: bytes decide
        #expect(IndexValue("E") < IndexValue("EN"))
        #expect(IndexValue("EN") < IndexValue("F"))
        #expect(IndexValue("E") < IndexValue("E\u{0}"))
        #expect(IndexValue("E\u{0}") < IndexValue("E\u{1}"))
    }

    @Test("tuples order element by element, and entry keys order by tuple, then object key")
    func tupleOrder() {
        var rng = FormatSplitMix64(seed: 8)
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let a = rng.tuple()
            var b = rng.tuple()
            if rng.chance(25) { b = Array(a.prefix(rng.below(a.count + 1))) + b }
            if rng.chance(10) { b = a }
            let ea = a.flatMap(\.encoded), eb = b.flatMap(\.encoded)
            let expected = compare(a, b)
            if compareBytes(ea, eb) != expected { failures.append("\(a) vs \(b)") }
            if a.count == b.count {
                // Same arity: the whole entry key orders by tuple first, object key second.
                let ka = rng.objectKey(), kb = rng.objectKey()
                let prefix = Keyspace.indexPrefix(bucket: 9, index: 4)
                let keyA = Keyspace.indexEntryKey(prefix: prefix, tuple: ea, objectKey: ka)
                let keyB = Keyspace.indexEntryKey(prefix: prefix, tuple: eb, objectKey: kb)
                let full = expected != 0 ? expected : compareBytes(Array(ka.utf8), Array(kb.utf8))
                if compareBytes(keyA, keyB) != full { failures.append("entry keys \(a)/\(ka) vs \(b)/\(kb)") }
                // And splits back into the same parts.
                let split = keyA.withUnsafeBytes { raw in try? Keyspace.splitIndexEntry(raw, arity: a.count) }
                if let split {
                    if Array(keyA[split.tuple]) != ea || Array(keyA[split.objectKey]) != Array(ka.utf8) { failures.append("split of \(formatHex(keyA))") }
                } else {
                    failures.append("split of \(formatHex(keyA)) threw")
                }
            }
            if failures.count >= 10 { break }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("no encoding is a prefix of another distinct one")
    func prefixFree() {
        var rng = FormatSplitMix64(seed: 9)
        var set = Set<[UInt8]>()
        for _ in 0..<Self.pairs {
            set.insert(rng.element().encoded)
        }
        // In sorted order, a prefix is immediately followed by some key it prefixes.
        let sorted = set.sorted { $0.lexicographicallyPrecedes($1) }
        var failures: [String] = []
        for (a, b) in zip(sorted, sorted.dropFirst()) where b.starts(with: a) {
            failures.append("\(formatHex(a)) is a prefix of \(formatHex(b))")
        }
        #expect(failures.isEmpty, "\(failures.prefix(10).joined(separator: "\n"))")
        #expect(sorted.count > Self.pairs / 2)
    }

    @Test("decoding succeeds only on canonical encodings")
    func onlyCanonicalDecodes() {
        var rng = FormatSplitMix64(seed: 10)
        var decoded = 0
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let negative = rng.chance(50)
            var biased: UInt16 = rng.chance(20) ? UInt16(truncatingIfNeeded: rng.next()) : UInt16(truncatingIfNeeded: 1075 + rng.below(2200) - 1100)
            var fraction = rng.next()
            if rng.chance(80) { fraction &= ~(UInt64.max >> UInt64(rng.below(64))) }  // keep only some top bits
            if negative { biased = ~biased; fraction = ~fraction }
            var bytes: [UInt8] = [negative ? 0x21 : 0x23, UInt8(biased >> 8), UInt8(biased & 0xFF)]
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: fraction >> UInt64(shift))) }
            guard let (value, _) = try? decode(bytes) else { continue }
            decoded += 1
            if encode(value) != bytes, failures.count < 10 { failures.append("\(formatHex(bytes)) decodes to \(value), which encodes as \(formatHex(encode(value)))") }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(decoded > Self.pairs / 10)
    }
}

// MARK: - Queries map to exactly the right key ranges

@Suite("Format: query key ranges")
struct FormatQueryRangeTests {
    private static let descriptor = BucketDescriptor(id: 7, name: "T", indexes: [
        IndexDefinition(id: 1, name: "s", components: [.binary]),
        IndexDefinition(id: 2, name: "n", components: [.numeric]),
        IndexDefinition(id: 3, name: "c", components: [.binary, .numeric]),
    ], nextIndexId: 4)

    private func plan(_ query: Query) throws -> BuriStorage.KeyRange {
        try ConditionPlan(query.conditions[0], in: Self.descriptor).range
    }

    private func key(index: UInt32, _ elements: [Element], _ objectKey: String) -> [UInt8] {
        Keyspace.indexEntryKey(prefix: Keyspace.indexPrefix(bucket: 7, index: index), tuple: elements.flatMap(\.encoded), objectKey: objectKey)
    }

    private func bound(_ rng: inout FormatSplitMix64, _ make: (inout FormatSplitMix64) -> Element) -> (IndexBound, Element?, Bool) {
        switch rng.below(3) {
        case 0: return (.unbounded, nil, false)
        case 1:
            let e = make(&rng)
            return (.inclusive(IndexValue(encoded: e.encoded)), e, true)
        default:
            let e = make(&rng)
            return (.exclusive(IndexValue(encoded: e.encoded)), e, false)
        }
    }

    private func satisfies(_ v: Element, lower: (IndexBound, Element?, Bool), upper: (IndexBound, Element?, Bool)) -> Bool {
        if let l = lower.1 {
            let c = compare(v, l)
            if c < 0 || (c == 0 && !lower.2) { return false }
        }
        if let u = upper.1 {
            let c = compare(v, u)
            if c > 0 || (c == 0 && !upper.2) { return false }
        }
        return true
    }

    @Test("exact, range and prefix scans hold exactly the matching entries")
    func rangesMatchPredicates() throws {
        var rng = FormatSplitMix64(seed: 11)
        var failures: [String] = []
        for _ in 0..<5000 {
            let objectKey = rng.objectKey()
            // Numeric index: exact and ranges.
            let (v, q) = rng.numPair()
            let k = key(index: 2, [.number(v)], objectKey)
            if try plan(.index("n", equals: q.indexValue)).contains(k) != (compare(v, q) == 0) { failures.append("n == \(q) vs \(v)") }
            let lower = bound(&rng) { .number($0.num()) }, upper = bound(&rng) { .number($0.num()) }
            if case .unbounded = lower.0, case .unbounded = upper.0 {} else {
                let r = try plan(.index("n", from: lower.0, to: upper.0))
                if r.contains(k) != satisfies(.number(v), lower: lower, upper: upper) { failures.append("n range \(lower) \(upper) vs \(v)") }
            }
            // Binary index: exact, ranges, prefix.
            let s = rng.bytes(), t = rng.chance(30) ? Array(s.prefix(rng.below(s.count + 1))) : rng.bytes()
            let ks = key(index: 1, [.bytes(s)], objectKey)
            if try plan(.index("s", equals: IndexValue(bytes: t))).contains(ks) != (s == t) { failures.append("s == \(formatHex(t)) vs \(formatHex(s))") }
            if try plan(.index("s", prefixBytes: t)).contains(ks) != s.starts(with: t) { failures.append("s prefix \(formatHex(t)) vs \(formatHex(s))") }
            let sl = bound(&rng) { .bytes($0.bytes()) }, su = bound(&rng) { .bytes($0.bytes()) }
            if case .unbounded = sl.0, case .unbounded = su.0 {} else {
                if try plan(.index("s", from: sl.0, to: su.0)).contains(ks) != satisfies(.bytes(s), lower: sl, upper: su) {
                    failures.append("s range \(sl) \(su) vs \(formatHex(s))")
                }
            }
            // Compound index: leading equality, then a range or a prefix.
            let kc = key(index: 3, [.bytes(s), .number(v)], objectKey)
            let leadingMatches = s == t
            if try plan(.index("c", leading: [IndexValue(bytes: t)], from: lower.0, to: upper.0)).contains(kc)
                != (leadingMatches && satisfies(.number(v), lower: lower, upper: upper)) {
                failures.append("c \(formatHex(t)) range \(lower) \(upper) vs \(formatHex(s)), \(v)")
            }
            if try plan(.index("c", equals: IndexValue(bytes: t))).contains(kc) != leadingMatches { failures.append("c == \(formatHex(t)) vs \(formatHex(s))") }
            if try plan(.index("c", prefixBytes: t)).contains(kc) != s.starts(with: t) { failures.append("c prefix \(formatHex(t)) vs \(formatHex(s))") }
            // Nothing of another index or bucket is ever in range.
            if try plan(.index("s", prefixBytes: [])).contains(kc) || plan(.index("n", from: .unbounded, to: .inclusive(IndexValue(UInt64.max)))).contains(ks) {
                failures.append("cross-index leak")
            }
            if failures.count >= 10 { break }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("an exact match of \"E\" never reaches \"EN\" or \"E\\0\"")
    func exactDoesNotLeak() throws {
        let r = try plan(.index("s", equals: "E"))
        #expect(r.contains(key(index: 1, [.bytes(Array("E".utf8))], "x")))
        #expect(r.contains(key(index: 1, [.bytes(Array("E".utf8))], "\u{0}")))
        #expect(!r.contains(key(index: 1, [.bytes(Array("EN".utf8))], "x")))
        #expect(!r.contains(key(index: 1, [.bytes([0x45, 0x00])], "x")))
        #expect(!r.contains(key(index: 1, [.bytes([0x45, 0x00, 0x00])], "x")))
        let twenty = try plan(.index("n", equals: try doubleValue(20.0)))
        #expect(twenty.contains(key(index: 2, [.number(.int(20))], "a")))
        #expect(!twenty.contains(key(index: 2, [.number(.double(20.000000000000004))], "a")))
    }

    @Test("record and index spaces of different buckets and indexes never overlap")
    func spacesDoNotOverlap() {
        var rng = FormatSplitMix64(seed: 12)
        for _ in 0..<2000 {
            let b1 = UInt32(truncatingIfNeeded: rng.chance(50) ? rng.next() : UInt64(rng.below(300)))
            let b2 = UInt32(truncatingIfNeeded: rng.chance(50) ? rng.next() : UInt64(rng.below(300)))
            let i1 = UInt32(rng.below(300)), i2 = UInt32(rng.below(300))
            let key = rng.objectKey()
            let record = Keyspace.recordKey(bucket: b2, key: key)
            #expect(BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: b1)).contains(record) == (b1 == b2))
            let entry = Keyspace.indexEntryKey(prefix: Keyspace.indexPrefix(bucket: b2, index: i2), tuple: IndexValue(key).encoded, objectKey: key)
            #expect(BuriStorage.KeyRange.prefix(Keyspace.indexPrefix(bucket: b1, index: i1)).contains(entry) == (b1 == b2 && i1 == i2))
            #expect(!BuriStorage.KeyRange.prefix(Keyspace.indexSpacePrefix(bucket: b1)).contains(record))
            #expect(!BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: b1)).contains(entry))
        }
    }
}

// MARK: - The specific cases named by the format's requirements

@Suite("Format: required cases")
struct FormatRequiredCaseTests {
    @Test("2^53+1 sorts after 9007199254740992.0 and differs from it")
    func beyondDoublePrecision() throws {
        let exact = IndexValue(Int64(9_007_199_254_740_993))
        let double = try doubleValue(9_007_199_254_740_992.0)
        #expect(exact > double)
        #expect(exact != double)
        #expect(IndexValue(Int64(9_007_199_254_740_992)) == double)
        #expect(try doubleValue(9_007_199_254_740_994.0) > exact)
        #expect(exact.decoded == .integer(9_007_199_254_740_993))
        #expect(IndexValue(UInt64.max) > (try IndexValue(Double(UInt64.max).nextDown)))
        #expect(IndexValue(UInt64.max) < (try doubleValue(0x1p64)))
    }

    @Test("20 == 20.0 and -0.0 == 0.0, byte for byte")
    func equalAcrossTypes() throws {
        #expect(IndexValue(20) == (try doubleValue(20.0)))
        #expect(IndexValue(UInt8(20)) == (try IndexValue(Float(20))))
        #expect(try doubleValue(-0.0) == IndexValue(0))
        #expect(try doubleValue(-0.0).encoded == [0x22])
        #expect(try doubleValue(-0.0).decoded == .integer(0))
        #expect(try doubleValue(20.0).decoded == .integer(20))
        #expect(try doubleValue(20.5).decoded == .double(20.5))
        #expect(IndexValue(UInt64(1) << 63).decoded == .unsigned(1 << 63))
    }

    @Test("NaN is rejected with invalidIndexValue")
    func nanRejected() {
        for nan in [Double.nan, -Double.nan, Double.signalingNaN, Double(bitPattern: 0x7FF0_0000_0000_0001)] {
            let error = #expect(throws: BuriError.self) { _ = try IndexValue(nan) }
            if case .invalidIndexValue = error {} else { Issue.record("NaN threw \(String(describing: error))") }
            #expect(throws: BuriError.self) { _ = try nan.numericIndexValue() }
        }
        #expect(throws: BuriError.self) { _ = try IndexValue(Float.nan) }
    }

    @Test("the extremes of every type order correctly")
    func extremes() throws {
        let ordered: [IndexValue] = [
            try IndexValue(-Double.infinity),
            try IndexValue(-Double.greatestFiniteMagnitude),
            try doubleValue(-0x1p64),
            IndexValue(Int64.min),
            IndexValue(Int64.min + 1),
            IndexValue(-1),
            try doubleValue(-0.5),
            try IndexValue(-Double.leastNonzeroMagnitude),
            IndexValue(0),
            try IndexValue(Double.leastNonzeroMagnitude),
            try IndexValue(Double.leastNormalMagnitude),
            try doubleValue(0.5),
            IndexValue(1),
            IndexValue(Int64.max),
            IndexValue(UInt64(Int64.max) + 1),
            IndexValue(UInt64.max),
            try doubleValue(0x1p64),
            try IndexValue(Double.greatestFiniteMagnitude),
            try IndexValue(Double.infinity),
            IndexValue(bytes: []),
            IndexValue(bytes: [0x00]),
            IndexValue(bytes: [0x00, 0x00]),
            IndexValue(bytes: [0x00, 0x01]),
            IndexValue(bytes: [0x01]),
            IndexValue(bytes: [0xFF]),
            IndexValue(bytes: [0xFF, 0xFF]),
        ]
        for (a, b) in zip(ordered, ordered.dropFirst()) { #expect(a < b, "\(a) < \(b)") }
        #expect(IndexValue(Int64.min).decoded == .integer(.min))
        #expect(IndexValue(Int64.max).decoded == .integer(.max))
        #expect(IndexValue(UInt64.max).decoded == .unsigned(.max))
        #expect(try doubleValue(-0x1p63) == IndexValue(Int64.min))
        #expect(try doubleValue(-0x1p64).decoded == .double(-0x1p64))
    }
}

// MARK: - Record headers, varints and parsers on malformed input

@Suite("Format: record headers and parsers")
struct FormatParserTests {
    private func parse(_ bytes: [UInt8]) throws(FormatError) -> (RecordHeader, Int) {
        let result: Result<(RecordHeader, Int), FormatError> = bytes.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> (RecordHeader, Int) in
                let (header, offset) = try RecordHeader.parse(raw)
                return (header, offset)
            }
        }
        return try result.get()
    }

    private func readVarint(_ bytes: [UInt8]) throws(FormatError) -> (UInt64, Int) {
        let result: Result<(UInt64, Int), FormatError> = bytes.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> (UInt64, Int) in
                var offset = 0
                let value = try Varint.read(raw, at: &offset)
                return (value, offset)
            }
        }
        return try result.get()
    }

    @Test("varints round-trip, in the shortest form, and every truncation throws")
    func varints() throws {
        var rng = FormatSplitMix64(seed: 13)
        var values: [UInt64] = [0, 1, 127, 128, 255, 300, 16383, 16384, .max, .max - 1, 1 << 63]
        for k in 1..<10 { values += [(1 << (7 * UInt64(k))) - 1, 1 << (7 * UInt64(k))] }
        for _ in 0..<2000 { values.append(rng.next() >> UInt64(rng.below(64))) }
        for value in values {
            let bytes = varint(value)
            let bits = 64 - value.leadingZeroBitCount
            #expect(bytes.count == max(1, (bits + 6) / 7))
            let (read, length) = try readVarint(bytes)
            #expect(read == value && length == bytes.count)
            let (readAgain, lengthAgain) = try readVarint(bytes + [0x7F, 0x80])
            #expect(readAgain == value && lengthAgain == bytes.count)
            for cut in 0..<bytes.count where (try? readVarint(Array(bytes[..<cut]))) != nil {
                Issue.record("varint \(formatHex(bytes)) cut to \(cut) bytes parsed")
            }
        }
        // Longer than 64 bits.
        #expect(throws: FormatError.self) { try readVarint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]) }
        #expect(throws: FormatError.self) { try readVarint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x00]) }
        #expect(throws: FormatError.self) { try readVarint(Array(repeating: 0x80, count: 11) + [0x00]) }
    }

    private func randomHeader(_ rng: inout FormatSplitMix64) -> RecordHeader {
        let schema: UInt64 = rng.chance(50) ? UInt64(rng.below(4)) : rng.next() >> UInt64(rng.below(64))
        var entries: [RecordHeader.Entry] = []
        for _ in 0..<rng.below(5) {
            let index: UInt32 = rng.chance(70) ? UInt32(1 + rng.below(20)) : UInt32(truncatingIfNeeded: rng.next())
            entries.append(.init(index: index, tuple: rng.tuple().flatMap(\.encoded)))
        }
        return RecordHeader(schemaVersion: schema, entries: entries)
    }

    @Test("record headers round-trip, and every truncation of one throws")
    func headerRoundTrip() throws {
        var rng = FormatSplitMix64(seed: 14)
        for _ in 0..<500 {
            let header = randomHeader(&rng)
            var bytes: [UInt8] = []
            header.append(to: &bytes)
            let payload = rng.bytes(maxLength: 6)
            let (parsed, offset) = try parse(bytes + payload)
            #expect(parsed == header)
            #expect(offset == bytes.count)
            for cut in 0..<bytes.count where (try? parse(Array(bytes[..<cut]))) != nil {
                Issue.record("header \(formatHex(bytes)) truncated to \(cut) bytes parsed")
            }
        }
    }

    @Test("malformed record headers are rejected")
    func malformedHeaders() {
        let valid: [UInt8] = [0x01, 0x01, 0x01, 0x02, 0x01, 0x05, 0x30, 0x45, 0x4E, 0x00, 0x00, 0x02, 0x0B,
                              0x23, 0x04, 0x37, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        #expect(throws: Never.self) { try parse(valid) }
        var bad = valid
        bad[0] = 0x02  // a newer record layout version
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[1] = 0x02  // an unknown payload codec
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[3] = 0x7F  // more entries than bytes
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[6] = 0x40  // an unknown type code
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[10] = 0x02  // 0x00 followed by 0x02 inside a byte string
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[5] = 0x04  // a tuple length that ends inside an element
        #expect(throws: FormatError.self) { try parse(bad) }
        bad = valid
        bad[12] = 0x0A  // a number cut short by its tuple length
        #expect(throws: FormatError.self) { try parse(bad) }
        // An index id beyond UInt32.
        #expect(throws: FormatError.self) { try parse([0x01, 0x01, 0x00, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01, 0x22]) }
        #expect(throws: Never.self) { try parse([0x01, 0x01, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01, 0x22]) }
    }

    @Test("index entry keys split correctly, however tricky the object key")
    func splitTrickyKeys() throws {
        func split(_ key: [UInt8], arity: Int) throws(FormatError) -> ([UInt8], [UInt8]) {
            let result: Result<([UInt8], [UInt8]), FormatError> = key.withUnsafeBytes { raw in
                Result { () throws(FormatError) -> ([UInt8], [UInt8]) in
                    let parts = try Keyspace.splitIndexEntry(raw, arity: arity)
                    return (Array(key[parts.tuple]), Array(key[parts.objectKey]))
                }
            }
            return try result.get()
        }
        let prefix = Keyspace.indexPrefix(bucket: 1, index: 1)
        let cases: [([IndexValue], String)] = [
            (["E"], "N"), (["E"], "\u{0}\u{0}"), (["E\u{0}"], "\u{1}"), ([""], "\u{0}"), (["a\u{0}\u{0}b"], "0"),
            ([20], "\u{22}"), ([0], "#"), ([IndexValue(bytes: [0x00, 0x00, 0xFF])], "\u{30}\u{0}\u{0}"),
            (["EN", 20], "p1"), ([20, "EN"], "\u{24}"), ([IndexValue(Int64.min), 0, "x"], "é"),
        ]
        for (values, objectKey) in cases {
            let tuple = IndexTuple.join(values)
            let key = Keyspace.indexEntryKey(prefix: prefix, tuple: tuple, objectKey: objectKey)
            let (t, k) = try split(key, arity: values.count)
            #expect(t == tuple)
            #expect(k == Array(objectKey.utf8))
            #expect(IndexTuple.split(t) == values)
        }
        // No object key, wrong tag, too short, truncated elements, bad escapes.
        #expect(throws: FormatError.self) { try split(prefix + IndexValue("E").encoded, arity: 1) }
        #expect(throws: FormatError.self) { try split([0x02] + Array(prefix.dropFirst()) + IndexValue("E").encoded + [0x41], arity: 1) }
        #expect(throws: FormatError.self) { try split(Array(prefix.prefix(5)), arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix, arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix + [0x23, 0x04, 0x37], arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix + [0x30, 0x45, 0x00], arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix + [0x30, 0x45, 0x00, 0x02, 0x41], arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix + [0x99, 0x41], arity: 1) }
        #expect(throws: FormatError.self) { try split(prefix + IndexValue("E").encoded + [0x41], arity: 2) }
    }

    @Test("record keys give back their object keys")
    func recordKeys() throws {
        for objectKey in ["p1", "\u{0}", "é", String(repeating: "k", count: 4096)] {
            let key = Keyspace.recordKey(bucket: 0xDEAD_BEEF, key: objectKey)
            #expect(Array(key.prefix(5)) == [0x02, 0xDE, 0xAD, 0xBE, 0xEF])
            #expect(try key.withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) } == objectKey)
        }
        #expect(throws: FormatError.self) { try Keyspace.recordPrefix(bucket: 1).withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) } }
        for bad: [UInt8] in [[0x02, 0, 0, 0, 1, 0xFF], [0x03, 0, 0, 0, 1, 0x41], [0x02, 0, 0, 0, 1, 0xC3]] {
            #expect(throws: FormatError.self) { try bad.withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) } }
        }
    }

    @Test("20,000 random byte strings never crash a parser")
    func randomBytesNeverCrash() {
        var rng = FormatSplitMix64(seed: 15)
        let starts: [[UInt8]] = [[], [0x01, 0x01], [0x01, 0x01, 0x00], [0x03, 0, 0, 0, 1, 0, 0, 0, 1], [0x02, 0, 0, 0, 1],
                                 [0x30], [0x21], [0x23], [0x22], [0x01, 0x01, 0x01, 0x01, 0x01]]
        var outcomes = [0, 0]
        var failures: [String] = []
        func fail(_ message: String, _ bytes: [UInt8]) {
            if failures.count < 10 { failures.append("\(message): \(formatHex(bytes))") }
        }
        for _ in 0..<20_000 {
            var bytes = starts.randomElement(using: &rng)!
            for _ in 0..<rng.below(24) {
                bytes.append(rng.chance(50) ? [0x00, 0x01, 0x02, 0x05, 0x0B, 0x20, 0x22, 0x23, 0x24, 0x30, 0x80, 0xFF].randomElement(using: &rng)!
                                            : UInt8(truncatingIfNeeded: rng.next()))
            }
            bytes.withUnsafeBytes { raw in
                if let header = try? RecordHeader.parse(raw) {
                    outcomes[1] += 1
                    var again: [UInt8] = []
                    header.0.append(to: &again)
                    if header.payloadOffset > raw.count { fail("payload offset past the end", bytes) }
                    // Varints may be written longer than needed; otherwise the header re-encodes identically.
                    if again.count == header.payloadOffset, again != Array(raw[..<header.payloadOffset]) { fail("header re-encodes differently", bytes) }
                } else {
                    outcomes[0] += 1
                }
                for offset in 0...raw.count {
                    guard let length = try? ValueEncoding.elementLength(raw, at: offset) else { continue }
                    if offset + length > raw.count { fail("element length past the end", bytes) }
                    var at = offset
                    if let value = try? ValueEncoding.decodeElement(raw, at: &at) {
                        if at != offset + length { fail("decodeElement and elementLength disagree", bytes) }
                        if encode(value) != Array(raw[offset..<at]) { fail("a non-canonical element decoded", bytes) }
                    }
                }
                for arity in 0...3 {
                    if let parts = try? Keyspace.splitIndexEntry(raw, arity: arity) {
                        if parts.tuple.lowerBound != Keyspace.indexPrefixLength || parts.objectKey.upperBound != raw.count || parts.objectKey.isEmpty {
                            fail("bad split", bytes)
                        }
                        _ = try? Keyspace.string(raw, parts.objectKey)
                    }
                }
                _ = try? Keyspace.objectKey(fromRecordKey: raw)
                _ = Keyspace.bucketAndIndex(ofEntry: raw)
            }
            _ = Keyspace.parseHeader(bytes)
            _ = Keyspace.bucketName(fromCatalogKey: bytes)
            _ = IndexTuple.split(bytes)
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(outcomes[1] > 0)  // some inputs were valid headers
    }
}

// MARK: - What an independent reader needs settled (issue 11, point 10)

/// §8: elements a decoder must read as documented (the value) or refuse (`nil`): the E = 0 case,
/// the integer/Double boundary at 2^63 for each sign, and exponents out of range.
private let decodingVectors: [(name: String, hex: String, value: IndexValue.Decoded?)] = [
    ("E = 0, F = 0: the integer 1", "23 04 33 00 00 00 00 00 00 00 00", .integer(1)),
    ("E = 0, F = 2^63: 1.5, a Double (no shift by 64)", "23 04 33 80 00 00 00 00 00 00 00", .double(1.5)),
    ("E = 0, F = 2^63, negative: -1.5", "21 fb cc 7f ff ff ff ff ff ff ff", .double(-1.5)),
    ("E = 0, F = 1: neither an integer nor a Double", "23 04 33 00 00 00 00 00 00 00 01", nil),
    ("E = 1, F = 2^63: the integer 3", "23 04 34 80 00 00 00 00 00 00 00", .integer(3)),
    ("2^63 + 2^11: a UInt64", "23 04 72 00 00 00 00 00 00 10 00", .unsigned((UInt64(1) << 63) + 2048)),
    ("-(2^63 + 2^11): below Int64.min, so a Double", "21 fb 8d ff ff ff ff ff ff ef ff", .double(-(0x1p63 + 0x1p11))),
    ("-(2^63 + 1): neither an Int64 nor a Double", "21 fb 8d ff ff ff ff ff ff ff fd", nil),
    ("2^64: a Double", "23 04 73 00 00 00 00 00 00 00 00", .double(0x1p64)),
    ("3 × 2^-1074: a subnormal Double", "23 00 02 80 00 00 00 00 00 00 00", .double(3 * Double.leastNonzeroMagnitude)),
    ("E = -1073 with 2 fraction bits: a subnormal has 1", "23 00 02 40 00 00 00 00 00 00 00", nil),
    ("biased exponent 0 (E = -1075)", "23 00 00 00 00 00 00 00 00 00 00", nil),
    ("biased exponent 2099 (E = 1024)", "23 08 33 00 00 00 00 00 00 00 00", nil),
]

private func bytes(hex: String) -> [UInt8] {
    hex.split(separator: " ").compactMap { UInt8($0, radix: 16) }
}

@Suite("Format: settled for an independent reader")
struct FormatSpecTests {
    @Test("§8: every decoding vector decodes to its value, canonically, or is refused", arguments: decodingVectors.indices)
    func decodingVector(_ i: Int) throws {
        let vector = decodingVectors[i]
        let element = bytes(hex: vector.hex)
        #expect(element.count == 11)
        if let expected = vector.value {
            let (value, length) = try decode(element)
            #expect(value == expected, "\(vector.name): decoded \(value)")
            #expect(length == 11)
            #expect(encode(value) == element, "\(vector.name): re-encodes as \(formatHex(encode(value)))")
        } else {
            #expect(throws: FormatError.self, "\(vector.name)") { try decode(element) }
        }
    }

    @Test("§8: docs/FORMAT.md shows every decoding vector")
    func documentShowsDecodingVectors() throws {
        let flat = try flatFormatDocument()
        for vector in decodingVectors {
            #expect(flat.contains(vector.hex), "docs/FORMAT.md lacks \(vector.name): \(vector.hex)")
        }
    }

    @Test("§4: a header of version 0, or of a known version with more than 6 bytes, is refused; a newer one of any length is unsupportedFormat; nothing is written")
    func headerValidity() throws {
        let cases: [([UInt8], BuriError?)] = [
            (Array("BURI".utf8) + [0x00, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x02, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x01, 0xFF], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x03, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x04, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x05, 0x00, 0x00], .unsupportedFormat(path: "", found: 5, supported: 4)),
            (Array("BURI".utf8) + [0x00, 0x02], nil),
            (Array("BURI".utf8) + [0x00, 0x03], nil),
            (Array("BURI".utf8) + [0x00, 0x04], nil),
        ]
        for (value, expected) in cases {
            let directory = FormatDiskTests.Directory()
            do {
                let raw = try Database(path: directory.path, options: Options())
                try raw.put(Keyspace.headerKey, value)
                raw.close()
            }
            do {
                let db = try BuriDatabase(path: directory.path)
                db.close()
                #expect(expected == nil, "opened a database with header \(formatHex(value))")
            } catch {
                switch expected {
                case .notABuriDatabase?: #expect(error == .notABuriDatabase(path: directory.path), "\(formatHex(value))")
                case .unsupportedFormat(_, let found, let supported)?:
                    #expect(error == .unsupportedFormat(path: directory.path, found: found, supported: supported), "\(formatHex(value))")
                default: Issue.record("header \(formatHex(value)) refused: \(error)")
                }
            }
            let raw = try Database(path: directory.path, options: Options())
            #expect(Array(try raw.entries()).map { $0.key + [0xFF] + $0.value } == [Keyspace.headerKey + [0xFF] + value])
            raw.close()
        }
    }

    /// The declaration §5 and §17 give for their example, verbatim.
    struct Person: BuriSupport {
        var objectId: String
        var name: String
        var locale: String
        var age: Int

        static let buri = BuriSchema<Person>(
            key: \.objectId,
            indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
            bucket: "Person",
            schemaVersion: 1,
            keyField: "objectId"
        )
    }

    /// The source of ``Person`` as docs/FORMAT.md shows it.
    static let personDeclaration = """
        struct Person: BuriSupport {
            var objectId: String
            var name: String
            var locale: String
            var age: Int

            static let buri = BuriSchema<Person>(
                key: \\.objectId,
                indexes: [.binary("locale", \\.locale), .numeric("age", \\.age)],
                bucket: "Person",
                schemaVersion: 1,
                keyField: "objectId"
            )
        }
        """

    @Test("§5/§17: the documented Swift declaration writes exactly the documented database, and the document shows it")
    func workedExample() throws {
        #expect(try formatDocument().contains(Self.personDeclaration))
        let directory = FormatDiskTests.Directory()
        do {
            let db = try BuriDatabase(path: directory.path)
            let people = try db.bucket(Person.self)
            try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 20))
            db.close()
        }
        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        let entries = Array(try raw.entries())
        let expected: [(key: String, value: [UInt8])] = [
            ("00 66 6f 72 6d 61 74", bytes(hex: "42 55 52 49 00 04")),
            ("01 50 65 72 73 6f 6e", try personDescriptor.encoded()),
            ("02 00 00 00 01 70 31", try personRecord()),
            ("03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", []),
            ("03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", []),
            ("05 00 00 00 01", bytes(hex: "00 00 00 00 00 00 00 01")),
        ]
        #expect(entries.map { formatHex($0.key) } == expected.map(\.key))
        #expect(entries.map(\.value) == expected.map(\.value))
        #expect(entries.count == 6 && entries[1].value.count == 202 && entries[2].value.count == 62)
    }

    struct Rated: BuriSupport {
        var id: String
        var locale: String?
        var score: Double

        static let buri = BuriSchema<Rated>(
            key: \.id,
            indexes: [.compound("locale_score", .binary(\.locale), .numeric(\.score), unique: true)]
        )
    }

    @Test("§9: a compound index with a nil component has no entry: not found by its other components, not constrained by uniqueness")
    func compoundWithNil() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let rated = try db.bucket(Rated.self)
        try rated.store([Rated(id: "a", locale: nil, score: 1), Rated(id: "b", locale: nil, score: 1), Rated(id: "c", locale: "EN", score: 1)])
        #expect(try rated.count() == 3)
        #expect(try rated.keys(.index("locale_score", equals: "EN")) == ["c"])
        #expect(try rated.keys(.index("locale_score", from: .unbounded, to: .unbounded)) == ["c"])
        #expect(try rated.raw.record(forKey: "a")?.indexValues["locale_score"] == nil)
        #expect(try rated.raw.record(forKey: "c")?.indexValues["locale_score"] == [["EN", 1]])
        // Unique: a second ("EN", 1) is refused; nil components never collide.
        #expect(throws: BuriError.self) { try rated.store(Rated(id: "d", locale: "EN", score: 1)) }
    }

    @Test("§9: every component is checked even when another is nil: a NaN is refused whatever the order of the parts")
    func compoundNilDoesNotHideNaN() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let rated = try db.bucket(Rated.self)
        do {
            try rated.store(Rated(id: "a", locale: nil, score: .nan))
            Issue.record("stored a NaN in a compound index because another component was nil")
        } catch {
            guard case .invalidIndexValue(_, _, let index, _) = error else {
                Issue.record("expected invalidIndexValue, got \(error)")
                return
            }
            #expect(index == "locale_score")
        }
        #expect(try rated.count() == 0)
    }

    @Test("§9: tools compute a compound index as Swift does: a null or missing field gives no entry, an array is refused whatever the other fields hold")
    func compoundFromFields() throws {
        let index = IndexDefinition(id: 1, name: "locale_tag", components: [.binary, .binary], fields: ["locale", "tag"])
        #expect(try index.tuples(of: ["locale": "EN", "tag": "x"]) == [["EN", "x"]])
        #expect(try index.tuples(of: ["locale": "EN", "tag": nil]) == [])
        #expect(try index.tuples(of: ["locale": "EN"]) == [])
        #expect(try index.tuples(of: ["tag": "x"]) == [])
        for object: CBORValue in [["locale": nil, "tag": ["x", "y"]], ["tag": ["x"]], ["locale": ["EN"], "tag": nil], ["locale": "EN", "tag": ["x"]]] {
            #expect(throws: BuriError.self, "\(object.jsonString())") { try index.tuples(of: object) }
        }
        // A wrong kind is refused even next to a missing field.
        #expect(throws: BuriError.self) { try index.tuples(of: ["locale": 5, "tag": nil]) }
        #expect(throws: BuriError.self) { try index.tuples(of: ["locale": nil, "tag": 5]) }
    }

    struct Note: BuriSupport {
        var id: String
        var tags: [String]
        static let buri = BuriSchema<Note>(key: \.id, indexes: [.binary("tags", \.tags)])
    }

    @Test("§11: a multi-valued first index gives each object once, at its first matching entry in walk order, on every page size")
    func multiValuedOncePerQuery() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let notes = try db.bucket(Note.self)
        try notes.store([Note(id: "n1", tags: ["a", "b", "c"]), Note(id: "n2", tags: ["b"]), Note(id: "n3", tags: ["a", "c"]), Note(id: "n4", tags: ["d"])])
        let query = Query.index("tags", in: IndexValue("a")...IndexValue("c"))
        // Positions: n1 at "a", n3 at "a", n2 at "b" ascending; n3 at "c", n1 at "c", n2 at "b" descending.
        #expect(try notes.keys(query) == ["n1", "n3", "n2"])
        #expect(try notes.keys(query.descending()) == ["n3", "n1", "n2"])
        #expect(try notes.count(query) == 3)
        #expect(try notes.keys(query.offset(1).limit(1)) == ["n3"])
        for size in 1...4 {
            for q in [query, query.descending()] {
                var keys: [String] = []
                var token: ContinuationToken? = nil
                repeat {
                    let page = try notes.keyPage(q.after(token), size: size)
                    keys += page.items
                    token = page.next
                } while token != nil
                #expect(keys == (try notes.keys(q)), "page size \(size)")
            }
        }
    }

    @Test("§16: an open database, even a read-only one, holds LevelDB's LOCK; opening rewrites LevelDB's own files but no Buri key")
    func lockAndFiles() throws {
        let directory = FormatDiskTests.Directory()
        do {
            let db = try BuriDatabase(path: directory.path)
            try db.bucket(Person.self).store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 20))
            db.close()
        }
        func files() throws -> Set<String> { Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)) }
        func keysAndValues() throws -> [[UInt8]] {
            let raw = try Database(path: directory.path, options: Options())
            defer { raw.close() }
            return Array(try raw.entries()).map { $0.key + [0xFF] + $0.value }
        }
        let before = try keysAndValues()
        let filesBefore = try files()
        var readOnly = BuriOptions()
        readOnly.createIfMissing = false
        let reader = try BuriDatabase(path: directory.path, options: readOnly)
        #expect(try reader.bucketNames() == ["Person"])
        do {
            let second = try BuriDatabase(path: directory.path, options: readOnly)
            second.close()
            Issue.record("a second handle opened a database that is open")
        } catch {
            guard case .storage(let storage) = error else { Issue.record("expected a storage error, got \(error)"); return }
            #expect(storage.code == .databaseInUse)
        }
        #expect(throws: LevelDBError.self) { try Database(path: directory.path, options: Options()) }
        reader.close()
        let filesAfter = try files()
        #expect(filesAfter.contains("LOCK"))
        #expect(filesAfter.filter { $0.hasPrefix("MANIFEST-") } != filesBefore.filter { $0.hasPrefix("MANIFEST-") },
                "opening wrote no new MANIFEST: \(filesBefore.sorted()) → \(filesAfter.sorted())")
        #expect(try keysAndValues() == before)
    }
}
