import BuriCodec
import Foundation
import Testing

@Suite("Bad input gives a typed error, never a crash")
struct DecodingErrorTests {
    @Test func everyTruncationOfAValidEncodingThrows() throws {
        let shapes: [Shape] = [.labeled(name: "x", .circle(radius: 1)), .rectangle(1, 2)]
        for bytes in [try CBOREncoder().encode(samplePerson), try CBOREncoder().encode(shapes)] {
            for length in 0..<bytes.count {
                let prefix = Array(bytes.prefix(length))
                expectCBORError { _ = try CBORDecoder().decode(Person.self, from: prefix) }
                expectCBORError { _ = try CBORDecoder().decode([Shape].self, from: prefix) }
                expectCBORError { _ = try CBORValue(decoding: prefix) }
            }
        }
    }

    @Test func typeMismatchNamesPathOffsetAndTypes() throws {
        var person = try CBORValue(decoding: try CBOREncoder().encode(samplePerson))
        person = person.replacing("age", with: "old")
        let error = expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Person.self, from: person.encoded())
        }
        #expect(error?.codingPath == "age")
        #expect(error?.expected == "Int")
        #expect(error?.found == "text string")
        #expect(error?.offset != nil)
        #expect(error?.description.contains("age") == true)
    }

    @Test func nestedPathsUseDotsAndIndexes() throws {
        let original = try CBORValue(decoding: try CBOREncoder().encode(samplePerson))
        let badZip = original.replacing("address", with: original["address"]!.replacing("zip", with: 12345))
        let zipError = expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Person.self, from: badZip.encoded())
        }
        #expect(zipError?.codingPath == "address.zip")

        let badTag = original.replacing("tags", with: ["ok", 2])
        let tagError = expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Person.self, from: badTag.encoded())
        }
        #expect(tagError?.codingPath == "tags[1]")

        let people: CBORValue = [try CBORValue(decoding: try CBOREncoder().encode(samplePerson)), badZip]
        let deepError = expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode([Person].self, from: people.encoded())
        }
        #expect(deepError?.codingPath == "[1].address.zip")
    }

    @Test func missingKeyAndNullForNonOptional() throws {
        let original = try CBORValue(decoding: try CBOREncoder().encode(samplePerson))
        let noZip = original.replacing("address", with: original["address"]!.removing("zip"))
        let missing = expectCBORError(.keyNotFound) { _ = try CBORDecoder().decode(Person.self, from: noZip.encoded()) }
        #expect(missing?.codingPath == "address.zip")
        #expect(missing?.message.contains("zip") == true)

        let nullName = original.replacing("name", with: .null)
        let null = expectCBORError(.valueNotFound) {
            _ = try CBORDecoder().decode(Person.self, from: nullName.encoded())
        }
        #expect(null?.codingPath == "name")
        #expect(null?.found == "null")

        let nullAddress = original.replacing("address", with: .null)
        expectCBORError(.valueNotFound) { _ = try CBORDecoder().decode(Person.self, from: nullAddress.encoded()) }
        // A null city is fine: it is optional.
        let nullCity = original.replacing("address", with: original["address"]!.replacing("city", with: .null))
        #expect(try CBORDecoder().decode(Person.self, from: nullCity.encoded()).address.city == nil)
    }

    @Test func outOfRangeIntegersAreErrorsNotTraps() throws {
        let threeHundred = try CBOREncoder().encode(300)
        let error = expectCBORError(.valueOutOfRange) { _ = try CBORDecoder().decode(UInt8.self, from: threeHundred) }
        #expect(error?.expected == "UInt8" && error?.found == "300")
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int8.self, from: try CBOREncoder().encode(-129))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(UInt.self, from: try CBOREncoder().encode(-1))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int64.self, from: try CBOREncoder().encode(UInt64.max))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int.self, from: CBORValue.negative(.max).encoded())
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int.self, from: try CBOREncoder().encode(1.5))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int.self, from: try CBOREncoder().encode(Double.nan))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Int32.self, from: try CBOREncoder().encode(1e10))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Double.self, from: try CBOREncoder().encode(UInt64.max - 1))
        }
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Float.self, from: try CBOREncoder().encode(1e300))
        }
    }

    @Test func losslessLeniency() throws {
        #expect(try CBORDecoder().decode(Int.self, from: try CBOREncoder().encode(20.0)) == 20)
        #expect(try CBORDecoder().decode(UInt8.self, from: CBORValue.float(255).encoded()) == 255)
        #expect(try CBORDecoder().decode(Double.self, from: try CBOREncoder().encode(-7)) == -7)
        #expect(try CBORDecoder().decode(Double.self, from: CBORValue.negative(.max).encoded()) == -0x1p64)
        #expect(try CBORDecoder().decode(Float.self, from: try CBOREncoder().encode(0.1)) == 0.1 as Float)
        #expect(try CBORDecoder().decode(Double.self, from: CBORValue.text("-Infinity").encoded()) == -.infinity)
        #expect(try CBORDecoder().decode(Double.self, from: CBORValue.text("NaN").encoded()).isNaN)
        #expect(
            try CBORDecoder().decode(Data.self, from: CBORValue.array([1, 2, 255]).encoded()) == Data([1, 2, 255]))
        #expect(try CBORDecoder().decode(Data.self, from: CBORValue.text("AQL/").encoded()) == Data([1, 2, 255]))
        #expect(
            try CBORDecoder().decode(URL.self, from: CBORValue.text("https://x.y/").encoded())
                == URL(string: "https://x.y/"))
        #expect(try CBORDecoder().decode(Int.self, from: CBORValue.tagged(99, 5).encoded()) == 5)
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Data.self, from: CBORValue.array([256]).encoded())
        }
        expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Data.self, from: CBORValue.text("not base64!").encoded())
        }
        expectCBORError(.typeMismatch) {
            _ = try CBORDecoder().decode(Double.self, from: CBORValue.text("1.5").encoded())
        }
    }

    @Test func depthBombsAreRejected() throws {
        let bomb = [UInt8](repeating: 0x81, count: 100_000) + [0x00]
        expectCBORError(.depthLimitExceeded) { _ = try CBORValue(decoding: bomb) }
        // The Codable decoder reads through arrays iteratively, and stops recursion.
        expectCBORError { _ = try CBORDecoder().decode([Int].self, from: bomb) }
        let tags = [UInt8](repeating: 0xC6, count: 100_000) + [0x00]
        expectCBORError(.depthLimitExceeded) { _ = try CBORValue(decoding: tags) }

        // {"value": 0, "next": {"value": 0, "next": ... {"value": 0}}}, 10,000 deep.
        let level = [0xA2] + CBORValue.text("value").encoded() + [0x00] + CBORValue.text("next").encoded()
        let innermost = [0xA1] + CBORValue.text("value").encoded() + [0x00]
        let bytes = Array([[UInt8]](repeating: level, count: 9_999).joined()) + innermost
        #expect(
            try CBORValue(decoding: Array([[UInt8]](repeating: level, count: 300).joined()) + innermost)["value"] == 0)
        expectCBORError(.depthLimitExceeded) { _ = try CBORDecoder().decode(Node.self, from: bytes) }

        // 200 levels is fine.
        let ok = try roundTrip(Node.chain(200))
        #expect(ok.length == 200)
    }

    @Test func encoderStopsAtItsDepthLimitAndOnCycles() throws {
        expectCBORError(.depthLimitExceeded) { _ = try CBOREncoder().encode(Node.chain(300)) }
        let cycle = Node(value: 1, next: nil)
        cycle.next = cycle
        defer { cycle.next = nil }
        expectCBORError(.depthLimitExceeded) { _ = try CBOREncoder().encode(cycle) }
    }

    @Test func hugeLengthClaimsAreRejectedBeforeAllocating() throws {
        let claims = [
            "5bffffffffffffffff", "7b7fffffffffffffff00", "9bffffffffffffffff", "bb0000000100000000",
            "5a7fffffff", "9a7fffffff01", "b97fff0000",
        ]
        for claim in claims.map(hex) {
            expectCBORError(.lengthTooLarge) { _ = try CBORValue(decoding: claim) }
            expectCBORError(.lengthTooLarge) { _ = try CBORDecoder().decode([Int].self, from: claim) }
        }
    }

    @Test func malformedAndUnsupportedItems() throws {
        expectCBORError(.unexpectedEnd) { _ = try CBORDecoder().decode(Int.self, from: []) }
        expectCBORError(.unexpectedEnd) { _ = try CBORValue(decoding: []) }
        expectCBORError(.trailingBytes) { _ = try CBORDecoder().decode(Int.self, from: [0x01, 0x02]) }
        expectCBORError(.trailingBytes) { _ = try CBORValue(decoding: [0x01, 0x02]) }
        for bad in ["1c", "3e", "fc", "ff", "f810", "5f41ff"] {
            expectCBORError { _ = try CBORValue(decoding: hex(bad)) }
            expectCBORError { _ = try CBORDecoder().decode(Data.self, from: hex(bad)) }
        }
        expectCBORError(.malformed) { _ = try CBORValue(decoding: hex("1f")) }
        expectCBORError(.unsupported) { _ = try CBORDecoder().decode([Int].self, from: hex("9f01ff")) }
        expectCBORError(.invalidUTF8) { _ = try CBORDecoder().decode(String.self, from: hex("62c328")) }
        expectCBORError(.invalidUTF8) { _ = try CBORValue(decoding: hex("62c328")) }
        // Each chunk of an indefinite text string must be valid UTF-8 on its own.
        expectCBORError(.invalidUTF8) { _ = try CBORValue(decoding: hex("7f61c361a9ff")) }
        #expect(try CBORValue(decoding: hex("7f62c3a9ff")) == "é")
        expectCBORError(.typeMismatch) { _ = try CBORDecoder().decode(Person.self, from: [0x80]) }
        let end = expectCBORError(.valueNotFound) {
            _ = try CBORDecoder().decode(PairFromArray.self, from: hex("8101"))
        }
        #expect(end?.codingPath == "[1]")
    }

    @Test func errorDescriptionsAreReadable() throws {
        let error = expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(UInt8.self, from: [0x19, 0x01, 0x2C])
        }
        #expect(error?.description == "valueOutOfRange (byte 0): the number does not fit; expected UInt8, found 300")
    }
}

/// Reads two integers out of an array (for running off the end).
struct PairFromArray: Decodable {
    var a: Int
    var b: Int
    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        a = try container.decode(Int.self)
        b = try container.decode(Int.self)
    }
}

extension CBORValue {
    /// A copy of this map with the value for `key` replaced.
    func replacing(_ key: String, with value: CBORValue) -> CBORValue {
        guard case .map(var entries) = self else { return self }
        for i in entries.indices where entries[i].key == .text(key) { entries[i].value = value }
        return .map(entries)
    }

    func removing(_ key: String) -> CBORValue {
        guard case .map(let entries) = self else { return self }
        return .map(entries.filter { $0.key != .text(key) })
    }

}
