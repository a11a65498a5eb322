@_spi(_Unicode) import Swift  // the standard library's NFD, to check every BMP scalar against
import BuriTestBasics
import BuriText
import Testing

@Suite("Tokenizer v1: properties over random and exhaustive input")
struct PropertyTests {
    /// Tricky pieces, each as a precomposed (NFC-like) and a decomposed (NFD) spelling of one text.
    static let pool: [(composed: String, decomposed: String)] = [
        ("a", "a"), ("Z", "Z"), ("7", "7"), (" ", " "), ("'", "'"), ("_", "_"), (".", "."), ("\u{0}", "\u{0}"),
        ("\n", "\n"), ("\u{E9}", "e\u{301}"), ("\u{C9}", "E\u{301}"), ("\u{1EC7}", "e\u{323}\u{302}"),
        ("\u{1EDF}", "o\u{31B}\u{309}"), ("\u{1E09}", "c\u{327}\u{301}"), ("\u{390}", "\u{3B9}\u{308}\u{301}"),
        ("\u{3A3}", "\u{3A3}"), ("\u{3C2}", "\u{3C2}"), ("\u{DF}", "\u{DF}"), ("\u{1E9E}", "\u{1E9E}"),
        ("\u{FB01}", "\u{FB01}"), ("\u{130}", "I\u{307}"), ("\u{212B}", "A\u{30A}"), ("\u{2126}", "\u{3A9}"),
        ("\u{F8}", "\u{F8}"), ("\u{1FF}", "\u{F8}\u{301}"), ("\u{142}", "\u{142}"), ("\u{958}", "\u{915}\u{93C}"),
        ("\u{915}\u{94D}\u{937}", "\u{915}\u{94D}\u{937}"), ("\u{E2A}\u{E31}", "\u{E2A}\u{E31}"),
        ("\u{4E2D}", "\u{4E2D}"), ("\u{6587}", "\u{6587}"), ("\u{F900}", "\u{8C48}"), ("\u{20000}", "\u{20000}"),
        ("\u{304C}", "\u{304B}\u{3099}"), ("\u{30D1}", "\u{30CF}\u{309A}"), ("\u{30FC}", "\u{30FC}"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}"), ("\u{AC00}", "\u{1100}\u{1161}"), ("\u{11A8}", "\u{11A8}"),
        ("\u{1161}", "\u{1161}"), ("\u{1100}", "\u{1100}"), ("\u{301}", "\u{301}"), ("\u{20DD}", "\u{20DD}"),
        ("\u{1F44D}", "\u{1F44D}"), ("\u{1F3FD}", "\u{1F3FD}"), ("\u{200D}", "\u{200D}"), ("\u{FE0F}", "\u{FE0F}"),
        ("\u{1F1EB}\u{1F1F7}", "\u{1F1EB}\u{1F1F7}"), ("\u{E000}", "\u{E000}"), ("\u{10400}", "\u{10400}"),
        ("\u{1D400}", "\u{1D400}"), ("\u{FF21}", "\u{FF21}"), ("\u{2460}", "\u{2460}"), ("\u{2F800}", "\u{4E3D}"),
        // Kept marks, some spelled in another canonical order on each side, so that they are reordered.
        ("\u{3099}", "\u{3099}"), ("\u{302A}", "\u{302A}"), ("\u{94D}", "\u{94D}"), ("\u{93F}", "\u{93F}"),
        ("\u{E01}\u{E39}\u{E49}", "\u{E01}\u{E49}\u{E39}"), ("\u{E39}\u{E49}", "\u{E49}\u{E39}"),
        ("\u{304C}\u{302A}", "\u{304B}\u{302A}\u{3099}"), ("\u{3099}\u{302A}", "\u{302A}\u{3099}"),
        ("\u{958}\u{951}", "\u{915}\u{951}\u{93C}"), ("\u{93C}\u{951}", "\u{951}\u{93C}"),
        ("\u{1112E}", "\u{11131}\u{11127}"), ("\u{11046}", "\u{11046}"), ("\u{302E}", "\u{302E}"),
        // Dropped Hebrew and Arabic marks, and a precomposed Hebrew presentation form.
        ("\u{FB2A}\u{5B8}", "\u{5E9}\u{5C1}\u{5B8}"), ("\u{5B8}", "\u{5B8}"), ("\u{623}", "\u{627}\u{654}"),
        ("\u{64E}", "\u{64E}"), ("\u{E0100}", "\u{E0100}"),
    ]

    @Test func randomTextsTokenizeTheSameInBothForms() throws {
        var random = SeededGenerator(seed: 20_250_601)
        for _ in 0..<3000 {
            var composed = ""
            var decomposed = ""
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                let piece = Self.pool[Int.random(in: 0..<Self.pool.count, using: &random)]
                // A run of one piece, sometimes long enough to reach the 120-byte cut.
                let repeats = Int.random(in: 0..<10, using: &random) == 0 ? Int.random(in: 1...80, using: &random) : 1
                composed += String(repeating: piece.composed, count: repeats)
                decomposed += String(repeating: piece.decomposed, count: repeats)
            }
            try #require(composed == decomposed)  // canonically equivalent, by Swift's own comparison
            let tokens = TextTokenizer.v1.tokens(in: composed)
            #expect(tokens == TextTokenizer.v1.tokens(in: decomposed), "\(composed.debugDescription)")
            #expect(tokens.map(\.position) == Array(0..<UInt32(tokens.count)))
            for token in tokens {
                #expect(!token.term.isEmpty && token.term.count <= TextTokenizer.maximumTermBytes)
                let term = try #require(String(validating: token.term, as: UTF8.self))
                // A term is a fixed point: tokenizing it again gives itself.
                #expect(TextTokenizer.v1.foldedTerms(term) == [token.term], "\(term.debugDescription)")
            }
        }
    }

    /// Scalars for scrambled texts: letters, CJK units and jamo, kept marks of many combining
    /// classes (0, 7, 8, 9, 103, 107, 216, 218, 224, 230), dropped ones, precomposed forms.
    static let scalars: [Unicode.Scalar] = [
        "a", "b", "\u{E9}", "\u{E01}", "\u{E39}", "\u{E49}", "\u{E48}", "\u{E3A}", "\u{3099}", "\u{309A}", "\u{302A}",
        "\u{302E}", "\u{93C}", "\u{94D}", "\u{951}", "\u{93F}", "\u{915}", "\u{958}", "\u{301}", "\u{323}",
        "\u{5B8}", "\u{64E}", "\u{FB2A}", "\u{304B}", "\u{304C}", "\u{30CF}", "\u{30D1}", "\u{1100}", "\u{1161}",
        "\u{11A8}", "\u{AC00}", "\u{5317}", " ", "\u{11046}", "\u{1D165}", "\u{1D16E}", "\u{1E94A}", "\u{FE0F}",
    ]

    @Test func scrambledMarksTokenizeAsTheirNfdAndNfc() throws {
        var random = SeededGenerator(seed: 3099)
        for _ in 0..<3000 {
            var text = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...60, using: &random) {
                let scalar = Self.scalars[Int.random(in: 0..<Self.scalars.count, using: &random)]
                // Sometimes a long run, to reach the cuts of a word (120 bytes) or a CJK unit (60).
                let repeats = Int.random(in: 0..<8, using: &random) == 0 ? Int.random(in: 1...50, using: &random) : 1
                text.append(contentsOf: repeatElement(scalar, count: repeats))
            }
            let scrambled = String(text)
            let tokens = TextTokenizer.v1.tokens(in: scrambled)
            let nfd = String(String.UnicodeScalarView(scrambled._nfd))
            let nfc = String(String.UnicodeScalarView(scrambled._nfc))
            #expect(tokens == TextTokenizer.v1.tokens(in: nfd), "\(scrambled.debugDescription)")
            #expect(tokens == TextTokenizer.v1.tokens(in: nfc), "\(scrambled.debugDescription)")
            for token in tokens {
                let term = try #require(String(validating: token.term, as: UTF8.self))
                #expect(token.term.count <= TextTokenizer.maximumTermBytes)
                // Marks in canonical order: no non-starter after one of a higher class.
                let classes = term.unicodeScalars.map(\.properties.canonicalCombiningClass.rawValue)
                #expect(!zip(classes, classes.dropFirst()).contains { $1 != 0 && $0 > $1 }, "\(term.debugDescription)")
                #expect(TextTokenizer.v1.foldedTerms(term) == [token.term], "\(term.debugDescription)")
            }
        }
    }

    @Test func everyBmpScalarTokenizesAsItsDecompositionAndFoldsToAFixedPoint() {
        var checked = 0
        for value in UInt32(0x80)..<0x10000 {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "x" + String(scalar) + "y"  // inside a word, where it matters most
            let tokens = TextTokenizer.v1.tokens(in: text)
            let decomposed = String(String.UnicodeScalarView(text._nfd))
            #expect(tokens == TextTokenizer.v1.tokens(in: decomposed), "U+\(String(value, radix: 16))")
            for token in tokens {
                let term = String(decoding: token.term, as: UTF8.self)
                #expect(TextTokenizer.v1.foldedTerms(term) == [token.term], "U+\(String(value, radix: 16))")
            }
            checked += 1
        }
        #expect(checked > 60_000)
    }

    @Test func arbitraryScalarsNeverBreakTheTokenizer() throws {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<500 {
            var text = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...200, using: &random) {
                let value = UInt32.random(in: 0...0x10_FFFF, using: &random)
                if let scalar = Unicode.Scalar(value) { text.append(scalar) }
            }
            for token in TextTokenizer.v1.tokens(in: String(text)) {
                #expect(!token.term.isEmpty && token.term.count <= TextTokenizer.maximumTermBytes)
                #expect(String(validating: token.term, as: UTF8.self) != nil)
            }
        }
    }
}
