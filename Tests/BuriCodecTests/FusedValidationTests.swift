import BuriCodec
import Foundation
import Testing

/// `CBORDecoder` checks the input while decoding it instead of in a separate pass first. These
/// tests put damage exactly where a decode that only reads what it needs would not look: in
/// entries the type ignores, after the last field it reads, inside values it reads only partly,
/// after the item. Every one must still be a typed error, and the error must be the one the
/// separate pass gave (malformation before type errors).
@Suite("Validation fused into decoding still rejects every damaged input")
struct FusedValidationTests {
    struct Small: Codable, Equatable {
        var a: Int
        var b: String
    }

    /// Reads only the first element of its array field "list".
    struct FirstOnly: Decodable, Equatable {
        var first: Int
        init(first: Int) { self.first = first }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            var list = try container.nestedUnkeyedContainer(forKey: .list)
            first = try list.decode(Int.self)
        }
        enum CodingKeys: String, CodingKey { case list }
    }

    /// {"a": 1, "b": "x"} followed by the given entries (the map head counts them).
    func map(extra: [UInt8], extraCount: Int) -> [UInt8] {
        [0xA0 | UInt8(2 + extraCount), 0x61, 0x61, 0x01, 0x61, 0x62, 0x61, 0x78] + extra
    }

    @Test func wellFormedInputStillDecodes() throws {
        #expect(try CBORDecoder().decode(Small.self, from: map(extra: [], extraCount: 0)) == Small(a: 1, b: "x"))
        // An entry the type ignores is skipped; keys in another order use the index.
        #expect(
            try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63, 0x82, 0x01, 0x02], extraCount: 1))
                == Small(a: 1, b: "x"))
        let reversed = hex("a2 61 62 61 78 61 61 01")
        #expect(try CBORDecoder().decode(Small.self, from: reversed) == Small(a: 1, b: "x"))
        #expect(
            try CBORDecoder().decode(FirstOnly.self, from: hex("a1 64 6c697374 83 07 08 09")) == FirstOnly(first: 7))
        // A tag in front of the top-level map is skipped.
        #expect(
            try CBORDecoder().decode(Small.self, from: [0xC6] + map(extra: [], extraCount: 0)) == Small(a: 1, b: "x"))
    }

    @Test func damageInAnIgnoredEntryAfterTheFieldsIsAnError() throws {
        // "c": a reserved head (0x1C); "c": a string claiming 5 bytes with 1 left; "c": 2 entries of a map, 1 present.
        expectCBORError(.malformed) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63, 0x1C], extraCount: 1))
        }
        expectCBORError(.lengthTooLarge) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63, 0x65, 0x41], extraCount: 1))
        }
        expectCBORError {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63, 0xA2, 0x01, 0x02], extraCount: 1))
        }
        // An indefinite-length value in an ignored entry is still unsupported.
        expectCBORError(.unsupported) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63, 0x9F, 0xFF], extraCount: 1))
        }
    }

    @Test func aMapClaimingMoreEntriesThanItHasIsAnError() throws {
        // The type reads "a" and "b", which are there; the third entry the head promises is not.
        expectCBORError(.lengthTooLarge) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [], extraCount: 1))
        }
        expectCBORError(.lengthTooLarge) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x61, 0x63], extraCount: 1))
        }
        // The last entry's value cut short: a string claiming 3 bytes with 2 left.
        expectCBORError(.lengthTooLarge) {
            _ = try CBORDecoder().decode(Small.self, from: hex("a2 61 61 01 61 62 63 78 78"))
        }
    }

    @Test func damageInsideAPartlyReadValueIsAnError() throws {
        // "list": [7, 8, <reserved head>]: the type reads only 7.
        expectCBORError(.malformed) {
            _ = try CBORDecoder().decode(FirstOnly.self, from: hex("a1 64 6c697374 83 07 08 1c"))
        }
        // "list": [7, 8, 9] but the array claims 4 elements.
        expectCBORError { _ = try CBORDecoder().decode(FirstOnly.self, from: hex("a1 64 6c697374 84 07 08 09")) }
    }

    @Test func damageBeforeAFieldReadOutOfOrderIsAnError() throws {
        // Keys in reverse order build the index, which walks every entry: a broken middle entry fails.
        let bytes = hex("a3 61 62 61 78 61 63 1c 61 61 01")
        expectCBORError(.malformed) { _ = try CBORDecoder().decode(Small.self, from: bytes) }
    }

    @Test func trailingBytesAfterAFullyReadItemAreAnError() throws {
        let error = expectCBORError(.trailingBytes) {
            _ = try CBORDecoder().decode(Small.self, from: map(extra: [0x00], extraCount: 0))
        }
        #expect(error?.offset == 8)
        expectCBORError(.trailingBytes) { _ = try CBORDecoder().decode(String.self, from: hex("61 78 00")) }
        expectCBORError(.trailingBytes) {
            _ = try CBORDecoder().decode(FirstOnly.self, from: hex("a1 64 6c697374 81 07 f6"))
        }
        expectCBORError(.trailingBytes) {
            _ = try CBORDecoder().decode([Small].self, from: [0x81] + map(extra: [], extraCount: 0) + [0x01])
        }
    }

    @Test func malformationIsReportedBeforeATypeMismatch() throws {
        // "a" holds text (a type mismatch for Int) and the map is cut short after it: as with a
        // separate validation pass, the missing bytes are what is reported.
        let bytes = hex("a2 61 61 61 78 61 62")
        expectCBORError(.lengthTooLarge) { _ = try CBORDecoder().decode(Small.self, from: bytes) }
        // A missing key in an input with trailing bytes reports the trailing bytes.
        expectCBORError(.trailingBytes) { _ = try CBORDecoder().decode(Small.self, from: hex("a1 61 61 01 00")) }
        // Well-formed, only the type is wrong: the type mismatch, with its path.
        let mismatch = expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Small.self, from: hex("a2 61 61 61 78 61 62 61 78"))
        }
        #expect(mismatch?.codingPath == "a")
    }

    /// Whatever bytes the decoder accepts, the fully validating `CBORValue` parser accepts too:
    /// decoding never returns a value from malformed input. (The one difference: the decoder
    /// checks the UTF-8 of the text it reads, not of text it skips, as before this change.)
    @Test func everythingTheDecoderAcceptsIsWellFormed() throws {
        var generator = SeededGenerator(seed: 0xF05E)
        let seeds = [try CBOREncoder().encode(samplePerson), try CBOREncoder().encode(Small(a: -5, b: "é e\u{301}"))]
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = seeds[Int.random(in: 0..<seeds.count, using: &generator)]
            for _ in 0..<Int.random(in: 1...3, using: &generator) where !bytes.isEmpty {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes[index] ^= UInt8(1) << UInt8.random(in: 0...7, using: &generator)
                case 1: bytes.removeSubrange(index...)
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                default: bytes.remove(at: index)
                }
            }
            let decoded =
                (try? CBORDecoder().decode(Person.self, from: bytes)) != nil
                || (try? CBORDecoder().decode(Small.self, from: bytes)) != nil
            if decoded {
                accepted += 1
                do {
                    _ = try CBORValue(decoding: bytes)
                } catch let error as CBORError {
                    #expect(error.kind == .invalidUTF8, "accepted malformed \(hexString(bytes)): \(error)")
                }
            }
        }
        // Some mutations (a changed letter in a string, a different number) keep the input valid.
        #expect(accepted > 0)
    }

    /// A `Dictionary` lists its keys with `allKeys`, which cannot throw. A key that is not UTF-8
    /// or not text used to be left out of that list, so the dictionary decoded one entry short
    /// with no error. Now every such map is an error, and good maps decode whole.
    @Test func dictionaryNeverDropsAnEntryItCannotName() throws {
        // {"a": 1, "b": 2}
        #expect(try CBORDecoder().decode([String: Int].self, from: hex("a2 6161 01 6162 02")) == ["a": 1, "b": 2])
        // {"a": 1, <ff fe as text>: 2}: the second key is not UTF-8.
        #expect(throws: (any Error).self) {
            try CBORDecoder().decode([String: Int].self, from: hex("a2 6161 01 62fffe 02"))
        }
        // {"a": 1, 7: 2}: the second key is an integer.
        #expect(throws: (any Error).self) {
            try CBORDecoder().decode([String: Int].self, from: hex("a2 6161 01 07 02"))
        }
        // The same inside a record's field.
        struct Holder: Decodable { var tags: [String: Int] }
        #expect(throws: (any Error).self) {
            try CBORDecoder().decode(Holder.self, from: hex("a1 6474616773 a2 6161 01 62fffe 02"))
        }
    }
}
