import BuriCodec
import Testing

/// A wrapper that encodes as one text string, with the fast path.
private struct Tag: Codable, Hashable, CBORTextValue {
    var cborText: String
    init(cborText: String) { self.cborText = cborText }
    init(from decoder: any Decoder) throws { cborText = try decoder.singleValueContainer().decode(String.self) }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(cborText)
    }
}

/// The same wrapper without it: the bytes must not differ.
private struct PlainTag: Codable, Hashable {
    var text: String
    init(from decoder: any Decoder) throws { text = try decoder.singleValueContainer().decode(String.self) }
    init(_ text: String) { self.text = text }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

private struct Holder: Codable, Equatable {
    var one: Tag
    var maybe: Tag?
    var many: [Tag]
    var nested: [[Tag]]
}

private struct PlainHolder: Codable, Equatable {
    var one: PlainTag
    var maybe: PlainTag?
    var many: [PlainTag]
    var nested: [[PlainTag]]
}

@Suite("CBORTextValue: a text wrapper read and written without a nested coder")
struct TextValueTests {
    static let texts = ["", "a", "e\u{301}", "\u{E9}", "nul\u{0}inside", String(repeating: "x", count: 300), "🎵"]

    @Test("encodes to the same bytes as the wrapper's own Codable conformance, everywhere it can stand")
    func sameBytesAsTheCodablePath() throws {
        for text in Self.texts {
            let fast = Holder(
                one: Tag(cborText: text), maybe: Tag(cborText: text), many: Self.texts.map(Tag.init(cborText:)),
                nested: [[Tag(cborText: text)], []])
            let plain = PlainHolder(
                one: PlainTag(text), maybe: PlainTag(text), many: Self.texts.map(PlainTag.init),
                nested: [[PlainTag(text)], []])
            let fastBytes = try CBOREncoder().encode(fast)
            #expect(fastBytes == (try CBOREncoder().encode(plain)))
            #expect(try CBORDecoder().decode(Holder.self, from: fastBytes) == fast)
            #expect(try CBOREncoder().encode(Tag(cborText: text)) == (try CBOREncoder().encode(text)))
        }
    }

    @Test("a non-text item where the wrapper is expected is a typed error, not a value")
    func aNumberIsRefused() throws {
        let bytes = try CBOREncoder().encode(["one": 5])
        #expect(throws: CBORError.self) { try CBORDecoder().decode([String: Tag].self, from: bytes) }
        #expect(throws: CBORError.self) {
            try CBORDecoder().decode([Tag].self, from: try CBOREncoder().encode([1, 2]))
        }
        let absent = try CBOREncoder().encode(["many": [String](), "nested": []] as [String: [String]])
        #expect(throws: (any Error).self) { try CBORDecoder().decode(Holder.self, from: absent) }
    }
}
