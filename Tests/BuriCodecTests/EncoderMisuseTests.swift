import BuriCodec
import Foundation
import Testing

/// The single-pass encoder cannot honour every ordering the Encoder API
/// allows; it must say so with an error instead of writing bad bytes.
@Suite("Encoder misuse is reported")
struct EncoderMisuseTests {
    struct WritesAfterSibling: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var outer = encoder.container(keyedBy: Keys.self)
            var inner = outer.nestedUnkeyedContainer(forKey: .a)
            try inner.encode(1)
            try outer.encode(2, forKey: .b)  // finishes `inner`
            try inner.encode(3)  // too late
        }
    }

    struct TwoSingleValues: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(1)
            try container.encode(2)
        }
    }

    struct KeyedAndUnkeyed: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var keyed = encoder.container(keyedBy: Keys.self)
            try keyed.encode(1, forKey: .a)
            var unkeyed = encoder.unkeyedContainer()
            try unkeyed.encode(2)
        }
    }

    @Test func writingToAFinishedContainerThrows() {
        expectCBORError(.invalidValue) { _ = try CBOREncoder().encode(WritesAfterSibling()) }
    }

    @Test func writingASingleValueTwiceThrows() {
        expectCBORError(.invalidValue) { _ = try CBOREncoder().encode(TwoSingleValues()) }
    }

    @Test func mixingKeyedAndUnkeyedForOneValueThrows() {
        expectCBORError(.invalidValue) { _ = try CBOREncoder().encode(KeyedAndUnkeyed()) }
    }

    @Test func aFailedEncodeLeavesTheBufferAlone() {
        var buffer: [UInt8] = [1, 2, 3]
        expectCBORError(.invalidValue) { try CBOREncoder().encode(TwoSingleValues(), appendingTo: &buffer) }
        #expect(buffer == [1, 2, 3])
    }

    @Test func errorsFromEncodableTypesPassThrough() {
        struct Refuses: Encodable {
            struct Nope: Error {}
            func encode(to encoder: any Encoder) throws { throw Nope() }
        }
        #expect(throws: Refuses.Nope.self) { _ = try CBOREncoder().encode([Refuses()]) }
    }
}
