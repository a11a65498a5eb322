import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Properties of the index value encodings

@Suite("Format: order-preserving index values")
struct FormatPropertyTests {
    static let pairs = 20_000

    private func checkPairs(seed: UInt64, _ make: (inout SeededGenerator) -> (Num, Num)) {
        var rng = SeededGenerator(seed: seed)
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
        var rng = SeededGenerator(seed: 5)
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let n = rng.num()
            let bytes = n.indexValue.encoded
            do {
                let (decoded, length) = try decode(bytes)
                if decoded != n.canonical || length != bytes.count || encode(decoded) != bytes
                    || n.indexValue.decoded != decoded
                {
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
        var rng = SeededGenerator(seed: 6)
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
        var rng = SeededGenerator(seed: 7)
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
        var rng = SeededGenerator(seed: 8)
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
                    if Array(keyA[split.tuple]) != ea || Array(keyA[split.objectKey]) != Array(ka.utf8) {
                        failures.append("split of \(formatHex(keyA))")
                    }
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
        var rng = SeededGenerator(seed: 9)
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
        var rng = SeededGenerator(seed: 10)
        var decoded = 0
        var failures: [String] = []
        for _ in 0..<Self.pairs {
            let negative = rng.chance(50)
            var biased: UInt16 =
                rng.chance(20)
                ? UInt16(truncatingIfNeeded: rng.next()) : UInt16(truncatingIfNeeded: 1075 + rng.below(2200) - 1100)
            var fraction = rng.next()
            if rng.chance(80) { fraction &= ~(UInt64.max >> UInt64(rng.below(64))) }  // keep only some top bits
            if negative { biased = ~biased; fraction = ~fraction }
            var bytes: [UInt8] = [negative ? 0x21 : 0x23, UInt8(biased >> 8), UInt8(biased & 0xFF)]
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: fraction >> UInt64(shift)))
            }
            guard let (value, _) = try? decode(bytes) else { continue }
            decoded += 1
            if encode(value) != bytes, failures.count < 10 {
                failures.append("\(formatHex(bytes)) decodes to \(value), which encodes as \(formatHex(encode(value)))")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(decoded > Self.pairs / 10)
    }
}
