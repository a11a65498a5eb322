import BuriCodec
import Foundation
import Testing

/// Throws random and mutated bytes at both parsers. Passing means: no crash,
/// no hang, and anything `CBORValue` accepts re-encodes to something it
/// accepts again with the same meaning.
@Suite("Random bytes never crash the decoders")
struct FuzzTests {
    /// Bytes that steer random input towards interesting heads.
    static let interesting: [UInt8] = [
        0x00, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1F, 0x20, 0x38, 0x3B, 0x40, 0x58, 0x5B, 0x5F, 0x60, 0x61, 0x78,
        0x7B, 0x7F, 0x80, 0x81, 0x98, 0x9B, 0x9F, 0xA0, 0xA1, 0xB8, 0xBF, 0xC0, 0xD8, 0xF4, 0xF5, 0xF6, 0xF7,
        0xF8, 0xF9, 0xFA, 0xFB, 0xFF, 0xC3, 0xA9, 0xED, 0xA0,
    ]

    static let seeds: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        seeds.append((try? CBOREncoder().encode(samplePerson)) ?? [])
        seeds.append((try? CBOREncoder().encode([Shape.labeled(name: "a", .rectangle(1, 2)), .point])) ?? [])
        seeds.append((try? CBOREncoder().encode(AllIntegers.max)) ?? [])
        seeds.append((try? CBOREncoder().encode([[1: "x"], [2: "y"]])) ?? [])
        seeds.append(hex("9f 5f 41 01 ff 7f 61 61 ff bf 61 61 01 ff c1 f9 3c 00 ff"))
        return seeds
    }()

    /// Runs every decoding entry point on `bytes`; only errors are allowed.
    static func exercise(_ bytes: [UInt8]) {
        let decoder = CBORDecoder()
        _ = try? decoder.decode(Person.self, from: bytes)
        _ = try? decoder.decode([Shape].self, from: bytes)
        _ = try? decoder.decode(AllIntegers.self, from: bytes)
        _ = try? decoder.decode([Int: String].self, from: bytes)
        _ = try? decoder.decode([String: [Double?]].self, from: bytes)
        _ = try? decoder.decode(Data.self, from: bytes)
        if let value = try? CBORValue(decoding: bytes) {
            let again = try? CBORValue(decoding: value.encoded())
            #expect(again != nil)
            if let again, !value.containsNaN {
                #expect(again.normalized == value.normalized)
            }
            _ = value.jsonString()
            _ = try? CBORValue(json: value.jsonString(pretty: true))
        }
    }

    @Test func randomBuffers() {
        var generator = SeededGenerator(seed: 0xB0_21)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...48, using: &generator)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(length)
            for _ in 0..<length {
                if Bool.random(using: &generator) {
                    bytes.append(Self.interesting.randomElement(using: &generator) ?? 0)
                } else {
                    bytes.append(UInt8.random(in: 0...255, using: &generator))
                }
            }
            Self.exercise(bytes)
        }
    }

    @Test func mutatedValidBuffers() {
        var generator = SeededGenerator(seed: 0x5EED)
        for _ in 0..<10_000 {
            var bytes = Self.seeds.randomElement(using: &generator) ?? []
            for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<6, using: &generator) {
                case 0: bytes[index] ^= UInt8(1) << UInt8.random(in: 0...7, using: &generator)
                case 1: bytes[index] = Self.interesting.randomElement(using: &generator) ?? 0
                case 2: bytes.removeSubrange(index...)
                case 3: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                case 4: bytes.remove(at: index)
                default: bytes.insert(contentsOf: bytes[index...].prefix(8), at: index)
                }
            }
            Self.exercise(bytes)
        }
    }
}

extension CBORValue {
    var containsNaN: Bool {
        switch self {
        case .float(let d): return d.isNaN
        case .array(let elements): return elements.contains { $0.containsNaN }
        case .map(let entries): return entries.contains { $0.key.containsNaN || $0.value.containsNaN }
        case .tagged(_, let content): return content.containsNaN
        default: return false
        }
    }

    /// Simple values 20...23 read back as bool/null/undefined, 24...31 as undefined.
    var normalized: CBORValue {
        switch self {
        case .simple(20): return .bool(false)
        case .simple(21): return .bool(true)
        case .simple(22): return .null
        case .simple(23), .simple(24...31): return .undefined
        case .array(let elements): return .array(elements.map(\.normalized))
        case .map(let entries):
            return .map(entries.map { CBORMapEntry(key: $0.key.normalized, value: $0.value.normalized) })
        case .tagged(let tag, let content): return .tagged(tag, content.normalized)
        default: return self
        }
    }
}
