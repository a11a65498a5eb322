import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Record headers, varints and parsers on malformed input

@Suite("Format: record headers and parsers")
struct FormatParserTests {
    /// The header walk recognizes a plain byte string (no NUL) without the element-by-element
    /// check: for every short tuple over the bytes that matter (codes, 0x00, the escape 0x01, a
    /// letter), it accepts and rejects exactly what the general element walk does.
    @Test func theHeaderWalkAcceptsExactlyTheTuplesTheElementWalkAccepts() throws {
        let alphabet: [UInt8] = [0x00, 0x01, ValueEncoding.binaryCode, 0x61, 0xFF]
        var tuples: [[UInt8]] = [[]]
        var frontier: [[UInt8]] = [[]]
        for _ in 1...6 {
            frontier = frontier.flatMap { tuple in alphabet.map { tuple + [$0] } }
            tuples += frontier
        }
        var accepted = 0
        for tuple in tuples {
            let general: Bool = tuple.withUnsafeBytes { raw in
                var check = 0
                while check < raw.count {
                    guard let length = try? ValueEncoding.elementLength(raw, at: check) else { return false }
                    check += length
                }
                return check == raw.count
            }
            var record: [UInt8] = [RecordHeader.layoutVersion, RecordHeader.cborCodec, 0, 1, 7, UInt8(tuple.count)]
            record += tuple + [0xA0]
            var seen: [(UInt32, [UInt8])] = []
            let walked: Bool = record.withUnsafeBytes { raw in
                do {
                    let (_, payload) = try RecordHeader.forEachEntry(raw) { index, tuple in
                        seen.append((index, Array(tuple)))
                    }
                    return payload == record.count - 1
                } catch {
                    return false
                }
            }
            #expect(walked == general, "\(tuple)")
            if walked {
                accepted += 1
                #expect(seen.count == 1 && seen[0].0 == 7 && seen[0].1 == tuple)
            }
        }
        #expect(accepted > 50)  // empty, byte strings with and without escapes, and runs of them
    }

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
        var rng = SeededGenerator(seed: 13)
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
        #expect(throws: FormatError.self) {
            try readVarint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02])
        }
        #expect(throws: FormatError.self) {
            try readVarint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x00])
        }
        #expect(throws: FormatError.self) { try readVarint(Array(repeating: 0x80, count: 11) + [0x00]) }
    }

    private func randomHeader(_ rng: inout SeededGenerator) -> RecordHeader {
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
        var rng = SeededGenerator(seed: 14)
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
        let valid: [UInt8] = [
            0x01, 0x01, 0x01, 0x02, 0x01, 0x05, 0x30, 0x45, 0x4E, 0x00, 0x00, 0x02, 0x0B,
            0x23, 0x04, 0x37, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]
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
        #expect(throws: FormatError.self) {
            try parse([0x01, 0x01, 0x00, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01, 0x22])
        }
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
        #expect(throws: FormatError.self) {
            try split([0x02] + Array(prefix.dropFirst()) + IndexValue("E").encoded + [0x41], arity: 1)
        }
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
        #expect(throws: FormatError.self) {
            try Keyspace.recordPrefix(bucket: 1).withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) }
        }
        for bad: [UInt8] in [[0x02, 0, 0, 0, 1, 0xFF], [0x03, 0, 0, 0, 1, 0x41], [0x02, 0, 0, 0, 1, 0xC3]] {
            #expect(throws: FormatError.self) {
                try bad.withUnsafeBytes { raw in try Keyspace.objectKey(fromRecordKey: raw) }
            }
        }
    }

    @Test("20,000 random byte strings never crash a parser")
    func randomBytesNeverCrash() {
        var rng = SeededGenerator(seed: 15)
        let starts: [[UInt8]] = [
            [], [0x01, 0x01], [0x01, 0x01, 0x00], [0x03, 0, 0, 0, 1, 0, 0, 0, 1], [0x02, 0, 0, 0, 1],
            [0x30], [0x21], [0x23], [0x22], [0x01, 0x01, 0x01, 0x01, 0x01],
        ]
        var outcomes = [0, 0]
        var failures: [String] = []
        func fail(_ message: String, _ bytes: [UInt8]) {
            if failures.count < 10 { failures.append("\(message): \(formatHex(bytes))") }
        }
        for _ in 0..<20_000 {
            var bytes = starts.randomElement(using: &rng)!
            for _ in 0..<rng.below(24) {
                bytes.append(
                    rng.chance(50)
                        ? [0x00, 0x01, 0x02, 0x05, 0x0B, 0x20, 0x22, 0x23, 0x24, 0x30, 0x80, 0xFF].randomElement(
                            using: &rng)!
                        : UInt8(truncatingIfNeeded: rng.next()))
            }
            bytes.withUnsafeBytes { raw in
                if let header = try? RecordHeader.parse(raw) {
                    outcomes[1] += 1
                    var again: [UInt8] = []
                    header.0.append(to: &again)
                    if header.payloadOffset > raw.count { fail("payload offset past the end", bytes) }
                    // Varints may be written longer than needed; otherwise the header re-encodes identically.
                    if again.count == header.payloadOffset, again != Array(raw[..<header.payloadOffset]) {
                        fail("header re-encodes differently", bytes)
                    }
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
                        if parts.tuple.lowerBound != Keyspace.indexPrefixLength
                            || parts.objectKey.upperBound != raw.count || parts.objectKey.isEmpty
                        {
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
