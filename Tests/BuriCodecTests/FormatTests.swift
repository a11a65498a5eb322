import BuriCodec
import Foundation
import Testing

/// These pin Buri's on-disk payload format byte for byte.
@Suite("The encoder writes the documented bytes")
struct FormatTests {
    struct Golden: Codable {
        var name: String
        var age: Int
        var ok: Bool
        var nothing: Int?
        var list: [Int8]
    }

    @Test func goldenBytesOfASmallStruct() throws {
        let bytes = try CBOREncoder().encode(Golden(name: "Dirk", age: 20, ok: true, nothing: nil, list: [-1, 100]))
        // {"name": "Dirk", "age": 20, "ok": true, "list": [-1, 100]}; nil keys are left out.
        #expect(
            hexString(bytes) == "a4" + "646e616d65" + "644469726b" + "63616765" + "14" + "626f6b" + "f5"
                + "646c697374" + "82" + "20" + "1864")
    }

    @Test func integersUseTheShortestHead() throws {
        let cases: [(Int64, String)] = [
            (0, "00"), (23, "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65535, "19ffff"),
            (65536, "1a00010000"), (4_294_967_295, "1affffffff"), (4_294_967_296, "1b0000000100000000"),
            (-1, "20"), (-24, "37"), (-25, "3818"), (-256, "38ff"), (-257, "390100"),
            (.min, "3b7fffffffffffffff"), (.max, "1b7fffffffffffffff"),
        ]
        for (value, expected) in cases {
            #expect(hexString(try CBOREncoder().encode(value)) == expected, "\(value)")
        }
        #expect(hexString(try CBOREncoder().encode(UInt64.max)) == "1bffffffffffffffff")
        #expect(hexString(try CBOREncoder().encode(Int8.min)) == "387f")
    }

    @Test func floatsKeepTheirWidth() throws {
        #expect(hexString(try CBOREncoder().encode(Float(1.5))) == "fa3fc00000")
        #expect(hexString(try CBOREncoder().encode(1.5)) == "fb3ff8000000000000")
        #expect(hexString(try CBOREncoder().encode(-0.0)) == "fb8000000000000000")
        #expect(hexString(try CBOREncoder().encode(Double.infinity)) == "fb7ff0000000000000")
    }

    @Test func simpleValuesStringsAndFoundationTypes() throws {
        #expect(try CBOREncoder().encode(true) == [0xF5])
        #expect(try CBOREncoder().encode(false) == [0xF4])
        #expect(try CBOREncoder().encode(Int?.none) == [0xF6])
        #expect(hexString(try CBOREncoder().encode("ü")) == "62c3bc")
        #expect(hexString(try CBOREncoder().encode(Data([1, 2]))) == "420102")
        #expect(hexString(try CBOREncoder().encode(URL(string: "http://a.b")!)) == "d8206a687474703a2f2f612e62")
        // Date is RFC 8949 tag 1, seconds since 1970: 2001-01-01T00:00:01Z is 978307201.
        #expect(hexString(try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1))) == "c11a3a4fc881")
        #expect(hexString(try CBOREncoder().encode(Date(timeIntervalSince1970: 0.5))) == "c1fb3fe0000000000000")
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        #expect(try CBORValue(decoding: try CBOREncoder().encode(uuid)) == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
    }

    @Test func dictionaryKeysAreAlwaysText() throws {
        #expect(hexString(try CBOREncoder().encode([7: "a"])) == "a1613761" + "61")
        #expect(hexString(try CBOREncoder().encode(["k": 1])) == "a1616b01")
    }

    @Test func enumsUseTheirSynthesizedShape() throws {
        // {"circle": {"radius": 2.0}} and {"point": {}}
        #expect(
            try CBORValue(decoding: try CBOREncoder().encode(Shape.circle(radius: 2))) == ["circle": ["radius": 2.0]])
        #expect(hexString(try CBOREncoder().encode(Shape.point)) == "a165706f696e74a0")
        #expect(try CBOREncoder().encode(Color.green) == [0x65] + Array("green".utf8))
    }

    @Test func containerHeadsGrowPastEachThreshold() throws {
        let expectations: [(Int, String)] = [
            (23, "97"), (24, "9818"), (255, "98ff"), (256, "990100"), (65535, "99ffff"), (65536, "9a00010000"),
        ]
        for (count, head) in expectations {
            let bytes = try CBOREncoder().encode([Bool](repeating: true, count: count))
            #expect(hexString(Array(bytes.prefix(head.count / 2))) == head, "\(count)")
            #expect(bytes.count == head.count / 2 + count)
        }
        let map = try CBOREncoder().encode(Dictionary(uniqueKeysWithValues: (0..<300).map { ("\($0)", true) }))
        #expect(hexString(Array(map.prefix(3))) == "b9012c")
    }

    @Test func valueThatEncodesNothingIsAnEmptyMap() throws {
        struct Empty: Encodable {
            func encode(to encoder: any Encoder) throws {}
        }
        #expect(try CBOREncoder().encode(Empty()) == [0xA0])
        #expect(try CBOREncoder().encode([Empty(), Empty()]) == [0x82, 0xA0, 0xA0])
    }

    @Test func cborValueEncodesShortestForms() throws {
        #expect(hexString(CBORValue.float(1.5).encoded()) == "f93e00")
        #expect(hexString(CBORValue.float(100_000).encoded()) == "fa47c35000")
        #expect(hexString(CBORValue.float(1.1).encoded()) == "fb3ff199999999999a")
        #expect(hexString(CBORValue.float(.nan).encoded()) == "f97e00")
        #expect(hexString(CBORValue.float(-.infinity).encoded()) == "f9fc00")
        #expect(hexString(CBORValue.float(5.960464477539063e-8).encoded()) == "f90001")  // smallest half subnormal
        #expect(hexString(CBORValue.negative(UInt64.max).encoded()) == "3bffffffffffffffff")
        #expect(hexString(CBORValue.tagged(1, 0).encoded()) == "c100")
        #expect(hexString(CBORValue.simple(16).encoded()) == "f0")
        #expect(hexString(CBORValue.simple(255).encoded()) == "f8ff")
    }
}
