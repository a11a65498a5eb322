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

    /// Decodes `bytes` both ways: the wrapper with the fast path and without it.
    private static func bothWays(
        _ bytes: [UInt8]
    ) -> (fast: Result<PlainHolder, CBORError>, plain: Result<PlainHolder, CBORError>) {
        func run<T: Decodable>(_ type: T.Type, _ map: (T) -> PlainHolder) -> Result<PlainHolder, CBORError> {
            do {
                return .success(map(try CBORDecoder().decode(T.self, from: bytes)))
            } catch let error as CBORError {
                return .failure(error)
            } catch {
                return .failure(CBORError(.typeMismatch, "not a CBORError: \(error)"))
            }
        }
        let fast = run(Holder.self) { h in
            PlainHolder(
                one: PlainTag(h.one.cborText), maybe: h.maybe.map { PlainTag($0.cborText) },
                many: h.many.map { PlainTag($0.cborText) }, nested: h.nested.map { $0.map { PlainTag($0.cborText) } })
        }
        return (fast, run(PlainHolder.self) { $0 })
    }

    @Test(
        "damaged bytes: the fast path reads exactly what the wrapper's own Codable reads, errors and coding paths included"
    )
    func damagedBytesReadTheSameBothWays() throws {
        let value = Holder(
            one: Tag(cborText: "o"), maybe: nil, many: ["", "a", "\u{E9}", "x"].map(Tag.init(cborText:)),
            nested: [[Tag(cborText: "n")], []])
        let bytes = try CBOREncoder().encode(value)
        var variants: [[UInt8]] = [bytes]
        // Every cut, and every byte replaced by heads of each major type, a tag, null, and a near miss.
        for end in 0..<bytes.count { variants.append(Array(bytes[..<end])) }
        for index in bytes.indices {
            for byte: UInt8 in [
                0x00, 0x01, 0x21, 0x41, 0x61, 0x62, 0x81, 0x80, 0xA0, 0xC1, 0xD8, 0xF6, 0xFF, bytes[index] ^ 1,
            ] {
                var copy = bytes
                copy[index] = byte
                variants.append(copy)
            }
        }
        var decoded = 0
        for variant in variants {
            let (fast, plain) = Self.bothWays(variant)
            switch (fast, plain) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "\(variant)")
                decoded += 1
            case (.failure(let a), .failure(let b)):
                #expect(a == b, "\(variant)")
            default:
                Issue.record("one way decodes, the other fails: \(variant): \(fast) vs \(plain)")
            }
        }
        #expect(decoded > 1)  // some changes still decode (a text's letter), and read the same
    }

    @Test("an array of wrappers reads the same tagged, empty, huge, or among fields read out of order")
    func arraysInEveryPosition() throws {
        struct Around: Codable, Equatable {
            var before: Int
            var tags: [Tag]
            var after: String
            init(before: Int, tags: [Tag], after: String) {
                self.before = before
                self.tags = tags
                self.after = after
            }
            enum CodingKeys: String, CodingKey { case before, tags, after }
            // Read in another order than written: the map's entries are found by key.
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                after = try container.decode(String.self, forKey: .after)
                tags = try container.decode([Tag].self, forKey: .tags)
                before = try container.decode(Int.self, forKey: .before)
            }
        }
        for tags in [[], [Tag(cborText: "")], (0..<10_000).map { Tag(cborText: "t\($0)") }] {
            let value = Around(before: 1, tags: tags, after: "z")
            let bytes = try CBOREncoder().encode(value)
            #expect(try CBORDecoder().decode(Around.self, from: bytes) == value)
            // Tag 55799 (self-described CBOR) in front of the array: read past, as everywhere.
            let plainArray = try CBOREncoder().encode(tags)
            var tagged = try CBOREncoder().encode(["before": 1])
            tagged[0] = 0xA3
            tagged += try CBOREncoder().encode("tags") + [0xD9, 0xD9, 0xF7] + plainArray
            tagged += try CBOREncoder().encode("after") + (try CBOREncoder().encode("z"))
            #expect(try CBORDecoder().decode(Around.self, from: tagged) == value)
        }
        // Bytes after the map are still found when the array was the last thing read.
        var trailing = try CBOREncoder().encode(Around(before: 1, tags: [Tag(cborText: "a")], after: "z"))
        trailing.append(0x00)
        #expect(throws: CBORError.self) { try CBORDecoder().decode(Around.self, from: trailing) }
    }
}
