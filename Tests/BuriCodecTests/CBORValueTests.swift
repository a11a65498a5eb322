import BuriCodec
import Foundation
import Testing

@Suite("CBORValue reads and writes any CBOR")
struct CBORValueTests {
    @Test func readsWhatTheEncoderWrote() throws {
        let value = try CBORValue(decoding: try CBOREncoder().encode(samplePerson))
        #expect(value["name"] == "Ada Lovelace")
        #expect(value["age"]?.int64Value == 36)
        #expect(value["address"]?["zip"]?.stringValue == "SW1Y 4JH")
        #expect(value["tags"]?[2] == "")
        #expect(value["scores"]?["analysis"]?.doubleValue == 9.5)
        #expect(value["missing"] == nil)
        #expect(value.mapEntries?.map(\.key) == ["name", "age", "address", "tags", "scores"])
    }

    @Test func everyCaseRoundTrips() throws {
        let value: CBORValue = [
            .unsigned(.max), .negative(.max), .int(-5), .bytes([0, 255]), .bytes([]), "text", "",
            [1, [2, [3]]], ["k": "v", 1: 2, .bytes([1]): [.null]], .tagged(32, "http://x"), .tagged(.max, .undefined),
            true, false, .null, .undefined, .simple(0), .simple(19), .simple(32), .simple(255),
            1.5, 100_000.0, 1.1, -0.0, .float(.infinity), .float(.leastNonzeroMagnitude),
            .float(.greatestFiniteMagnitude),
        ]
        #expect(try CBORValue(decoding: value.encoded()) == value)
        let nan = try CBORValue(decoding: CBORValue.float(.nan).encoded())
        #expect(nan.doubleValue?.isNaN == true)
        #expect(try CBORValue(decoding: CBORValue.float(-0.0).encoded()).doubleValue?.sign == .minus)
    }

    @Test func allFloatWidthsBecomeDoubles() throws {
        #expect(try CBORValue(decoding: hex("f93c00")) == 1.0)
        #expect(try CBORValue(decoding: hex("f90001")) == .float(5.960464477539063e-8))
        #expect(try CBORValue(decoding: hex("f97c00")) == .float(.infinity))
        #expect(try CBORValue(decoding: hex("fa47c35000")) == 100_000.0)
        #expect(try CBORValue(decoding: hex("fb3ff199999999999a")) == 1.1)
    }

    @Test func indefiniteLengthItemsAreReadAndWrittenDefinite() throws {
        let value = try CBORValue(
            decoding: hex("bf 61 61 9f 01 02 ff 61 62 5f 41 01 42 02 03 ff 61 63 7f 62 68 69 ff ff"))
        #expect(value == ["a": [1, 2], "b": .bytes([1, 2, 3]), "c": "hi"])
        #expect(hexString(value.encoded()) == "a3616182010261624301020361636268" + "69")
    }

    @Test func literalsAndHelpers() {
        #expect(CBORValue.int(-1) == .negative(0))
        #expect(CBORValue.int(.min).int64Value == .min)
        #expect(CBORValue.negative(.max).int64Value == nil)
        #expect(CBORValue.unsigned(1 << 60).doubleValue == 0x1p60)
        #expect(CBORValue.unsigned(.max).doubleValue == nil)  // not exact
        #expect((nil as CBORValue).isNull && CBORValue.undefined.isNull)
        #expect(CBORValue.bool(true).boolValue == true)
        #expect(CBORValue.array([1])[5] == nil)
        #expect(CBORValue.text("x")["key"] == nil)
    }

    @Test func decodesCopyFreeFromARawBuffer() throws {
        let bytes = [0xFF, 0x82, 0x01, 0x02, 0xFF]
        let value = try bytes.map(UInt8.init).withUnsafeBytes { raw in
            try CBORValue(decoding: UnsafeRawBufferPointer(rebasing: raw[1..<4]))
        }
        #expect(value == [1, 2])
    }
}
