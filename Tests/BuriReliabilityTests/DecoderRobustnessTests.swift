import BuriCodec
import Foundation
import Testing
@testable import Buri

/// Shaped like the objects apps store (the same shape the libFuzzer harness in Fuzz/ uses).
struct Shaped: Codable, Equatable {
    struct Address: Codable, Equatable {
        var street: String
        var zip: Int?
    }
    var id: String
    var name: String
    var age: Int
    var score: Double?
    var small: Int8?
    var big: UInt64?
    var flag: Bool?
    var tags: [String]
    var address: Address?
    var blob: [UInt8]?
    var extra: [String: Int]?
}

/// The seeded, in-suite counterpart of `Scripts/fuzz`: random and mutated bytes through every
/// decoder that reads what is on disk. Nothing may crash; every failure is the decoder's typed error.
struct DecoderRobustnessTests {
    static let iterations = fullTests ? 200_000 : 20_000

    /// Valid encodings to mutate: records, payloads, index tuples and keys.
    static func seeds() throws -> [[UInt8]] {
        let shaped = [
            Shaped(id: "p1", name: "Dirk", age: 20, tags: []),
            Shaped(
                id: "p2", name: "Ünï 😀", age: -7, score: 1.5, small: -3, big: .max, flag: true,
                tags: ["a", "", "b\u{0}"],
                address: Address(street: "Main", zip: 12345), blob: [0, 255], extra: ["x": 1]),
        ]
        var seeds = try shaped.map { try CBOREncoder().encode($0) }
        let value: CBORValue = ["k": [1, -2, 3.5, "t", nil, true], "m": ["n": .tagged(1, 17)], "b": .bytes([1, 2])]
        seeds.append(value.encoded())
        var record: [UInt8] = []
        RecordHeader(
            schemaVersion: 3,
            entries: [
                RecordHeader.Entry(index: 1, tuple: IndexValue("EN").encoded),
                RecordHeader.Entry(index: 2, tuple: IndexValue(42).encoded),
                RecordHeader.Entry(index: 3, tuple: IndexValue("a").encoded + IndexValue(floatLiteral: -2.5).encoded),
            ]
        ).append(to: &record)
        seeds.append(record + seeds[0])
        let values: [IndexValue] = [
            0, -1, 42, IndexValue(UInt64.max), 0.5, -1e300, IndexValue(floatLiteral: .infinity), "", "a\u{0}b",
            IndexValue(bytes: [0xFF]),
        ]
        seeds.append(values.flatMap(\.encoded))
        seeds.append(
            Keyspace.indexEntryKey(
                prefix: Keyspace.indexPrefix(bucket: 1, index: 2), tuple: IndexValue("EN").encoded, objectKey: "p1"))
        return seeds
    }
    typealias Address = Shaped.Address

    /// Runs every decoder over `bytes`; returns how many accepted it. Records an issue for any
    /// failure that is not the decoder's own error type, or a round trip that does not hold.
    static func exercise(_ bytes: [UInt8]) -> Int {
        var accepted = 0
        do {
            let value = try CBORValue(decoding: bytes)
            accepted += 1
            _ = value.jsonString()
            let again = try CBORValue(decoding: value.encoded())
            #expect(again.encoded() == value.encoded())
        } catch is CBORError {
        } catch {
            Issue.record("CBORValue threw \(type(of: error)): \(error) for \(bytes)")
        }
        do {
            let shaped = try CBORDecoder().decode(Shaped.self, from: bytes)
            accepted += 1
            if shaped.score?.isNaN != true {
                #expect(try CBORDecoder().decode(Shaped.self, from: CBOREncoder().encode(shaped)) == shaped)
            }
        } catch is CBORError {
        } catch {
            Issue.record("CBORDecoder threw \(type(of: error)): \(error) for \(bytes)")
        }
        bytes.withUnsafeBytes { raw in
            if let (header, offset) = try? RecordHeader.parse(raw) {
                accepted += 1
                #expect(offset <= raw.count)
                var out: [UInt8] = []
                header.append(to: &out)
                #expect(out.withUnsafeBytes { try? RecordHeader.parse($0).0 } == header)
            }
            var offset = 0
            while offset < raw.count, let element = try? ValueEncoding.decodeElement(raw, at: &offset) {
                accepted += 1
                _ = element.description
            }
            #expect(offset <= raw.count)
            for arity in 1...3 {
                if let parts = try? Keyspace.splitIndexEntry(raw, arity: arity) {
                    accepted += 1
                    #expect(
                        parts.objectKey.upperBound == raw.count && parts.tuple.upperBound == parts.objectKey.lowerBound)
                    _ = IndexTuple.split(Array(raw[parts.tuple]))
                }
            }
            _ = try? Keyspace.objectKey(fromRecordKey: raw)
        }
        return accepted
    }

    @Test("random bytes through the record, header, key and value decoders never crash")
    func randomBytes() throws {
        var random = SeededGenerator(seed: 0xF022)
        var accepted = 0
        for _ in 0..<Self.iterations {
            let length = Int.random(in: 0...(Bool.random(using: &random) ? 16 : 300), using: &random)
            var bytes = random.bytes(length)
            // Bias towards the shapes the decoders look for.
            if length > 9, Bool.random(using: &random) { bytes[0] = Keyspace.indexTag }
            if length > 2, Int.random(in: 0..<4, using: &random) == 0 { bytes[0] = 0x01; bytes[1] = 0x01 }
            accepted += Self.exercise(bytes)
        }
        #expect(accepted > 0)
    }

    @Test("mutated valid encodings through the same decoders never crash")
    func mutatedEncodings() throws {
        let seeds = try Self.seeds()
        // Every seed is accepted by at least one decoder to begin with.
        for seed in seeds { #expect(Self.exercise(seed) > 0) }
        var random = SeededGenerator(seed: 0x3317)
        for _ in 0..<Self.iterations {
            var bytes = seeds[Int.random(in: 0..<seeds.count, using: &random)]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                switch Int.random(in: 0..<5, using: &random) {
                case 0 where !bytes.isEmpty:
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] ^=
                        UInt8(1) << UInt8.random(in: 0...7, using: &random)
                case 1 where !bytes.isEmpty:
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                case 2: bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random)))
                case 3:
                    bytes.insert(
                        UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
                default: bytes += bytes.prefix(Int.random(in: 0...8, using: &random))
                }
            }
            _ = Self.exercise(bytes)
        }
    }

    @Test("deeply nested and huge-length CBOR is rejected without exhausting the stack or memory")
    func hostileShapes() throws {
        let hostile: [[UInt8]] = [
            [UInt8](repeating: 0x81, count: 100_000) + [0x00],  // 100,000 nested arrays
            [UInt8](repeating: 0xA1, count: 50_000) + [0x00, 0x00],  // nested maps as keys
            [UInt8](repeating: 0x9F, count: 100_000),  // unterminated indefinite arrays
            [0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],  // a byte string of 2^64-1 bytes
            [0x9B, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],  // an array of 2^63-1 elements
            [0xBB, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00],  // a map of 2^32 entries
            [0xD9, 0xD9, 0xF7] + [UInt8](repeating: 0xC6, count: 100_000) + [0x00],  // 100,000 tags
            [
                0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1,
                0xA1, 0xA1, 0xA1,
                0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1, 0xA1,
                0xA1, 0xA1, 0xA1,
                0x00, 0x00,
            ] + [UInt8](repeating: 0x00, count: 40),  // 40 maps nested as keys: JSON output must stay small
        ]
        for bytes in hostile {
            _ = Self.exercise(bytes)
            if let value = try? CBORValue(decoding: bytes) {
                #expect(
                    value.jsonString().utf8.count < 100 * bytes.count,
                    "JSON of a \(bytes.count)-byte item is out of proportion")
            }
        }
        // A record header claiming more entries or longer tuples than it holds.
        let header: [UInt8] = [1, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]
        #expect(throws: FormatError.self) { try header.withUnsafeBytes { try RecordHeader.parse($0) } }
    }
}
