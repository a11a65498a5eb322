import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Queries map to exactly the right key ranges

@Suite("Format: query key ranges")
struct FormatQueryRangeTests {
    private static let descriptor = BucketDescriptor(
        id: 7, name: "T",
        indexes: [
            IndexDefinition(id: 1, name: "s", components: [.binary]),
            IndexDefinition(id: 2, name: "n", components: [.numeric]),
            IndexDefinition(id: 3, name: "c", components: [.binary, .numeric]),
        ], nextIndexId: 4)

    private func plan(_ query: Query) throws -> BuriStorage.KeyRange {
        try ConditionPlan(query.conditions[0], in: Self.descriptor).range
    }

    private func key(index: UInt32, _ elements: [Element], _ objectKey: String) -> [UInt8] {
        Keyspace.indexEntryKey(
            prefix: Keyspace.indexPrefix(bucket: 7, index: index), tuple: elements.flatMap(\.encoded),
            objectKey: objectKey)
    }

    private func bound(
        _ rng: inout SeededGenerator, _ make: (inout SeededGenerator) -> Element
    ) -> (IndexBound, Element?, Bool) {
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

    private func satisfies(
        _ v: Element, lower: (IndexBound, Element?, Bool), upper: (IndexBound, Element?, Bool)
    ) -> Bool {
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
        var rng = SeededGenerator(seed: 11)
        var failures: [String] = []
        for _ in 0..<5000 {
            let objectKey = rng.objectKey()
            // Numeric index: exact and ranges.
            let (v, q) = rng.numPair()
            let k = key(index: 2, [.number(v)], objectKey)
            if try plan(.index("n", equals: q.indexValue)).contains(k) != (compare(v, q) == 0) {
                failures.append("n == \(q) vs \(v)")
            }
            let lower = bound(&rng) { .number($0.num()) }, upper = bound(&rng) { .number($0.num()) }
            if case .unbounded = lower.0, case .unbounded = upper.0 {
            } else {
                let r = try plan(.index("n", from: lower.0, to: upper.0))
                if r.contains(k) != satisfies(.number(v), lower: lower, upper: upper) {
                    failures.append("n range \(lower) \(upper) vs \(v)")
                }
            }
            // Binary index: exact, ranges, prefix.
            let s = rng.bytes(), t = rng.chance(30) ? Array(s.prefix(rng.below(s.count + 1))) : rng.bytes()
            let ks = key(index: 1, [.bytes(s)], objectKey)
            if try plan(.index("s", equals: IndexValue(bytes: t))).contains(ks) != (s == t) {
                failures.append("s == \(formatHex(t)) vs \(formatHex(s))")
            }
            if try plan(.index("s", prefixBytes: t)).contains(ks) != s.starts(with: t) {
                failures.append("s prefix \(formatHex(t)) vs \(formatHex(s))")
            }
            let sl = bound(&rng) { .bytes($0.bytes()) }, su = bound(&rng) { .bytes($0.bytes()) }
            if case .unbounded = sl.0, case .unbounded = su.0 {
            } else {
                if try plan(.index("s", from: sl.0, to: su.0)).contains(ks)
                    != satisfies(.bytes(s), lower: sl, upper: su)
                {
                    failures.append("s range \(sl) \(su) vs \(formatHex(s))")
                }
            }
            // Compound index: leading equality, then a range or a prefix.
            let kc = key(index: 3, [.bytes(s), .number(v)], objectKey)
            let leadingMatches = s == t
            if try plan(.index("c", leading: [IndexValue(bytes: t)], from: lower.0, to: upper.0)).contains(kc)
                != (leadingMatches && satisfies(.number(v), lower: lower, upper: upper))
            {
                failures.append("c \(formatHex(t)) range \(lower) \(upper) vs \(formatHex(s)), \(v)")
            }
            if try plan(.index("c", equals: IndexValue(bytes: t))).contains(kc) != leadingMatches {
                failures.append("c == \(formatHex(t)) vs \(formatHex(s))")
            }
            if try plan(.index("c", prefixBytes: t)).contains(kc) != s.starts(with: t) {
                failures.append("c prefix \(formatHex(t)) vs \(formatHex(s))")
            }
            // Nothing of another index or bucket is ever in range.
            if try plan(.index("s", prefixBytes: [])).contains(kc)
                || plan(.index("n", from: .unbounded, to: .inclusive(IndexValue(UInt64.max)))).contains(ks)
            {
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
        var rng = SeededGenerator(seed: 12)
        for _ in 0..<2000 {
            let b1 = UInt32(truncatingIfNeeded: rng.chance(50) ? rng.next() : UInt64(rng.below(300)))
            let b2 = UInt32(truncatingIfNeeded: rng.chance(50) ? rng.next() : UInt64(rng.below(300)))
            let i1 = UInt32(rng.below(300)), i2 = UInt32(rng.below(300))
            let key = rng.objectKey()
            let record = Keyspace.recordKey(bucket: b2, key: key)
            #expect(BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: b1)).contains(record) == (b1 == b2))
            let entry = Keyspace.indexEntryKey(
                prefix: Keyspace.indexPrefix(bucket: b2, index: i2), tuple: IndexValue(key).encoded, objectKey: key)
            #expect(
                BuriStorage.KeyRange.prefix(Keyspace.indexPrefix(bucket: b1, index: i1)).contains(entry)
                    == (b1 == b2 && i1 == i2))
            #expect(!BuriStorage.KeyRange.prefix(Keyspace.indexSpacePrefix(bucket: b1)).contains(record))
            #expect(!BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: b1)).contains(entry))
        }
    }
}
