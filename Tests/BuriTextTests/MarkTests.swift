import BuriText
import Testing

@Suite("Tokenizer v1: diacritics are dropped, every other mark stays in the term")
struct MarkTests {
    /// Expects `nfc` and `nfd` to be different bytes of canonically equivalent text with the same tokens.
    func expectSameTokens(_ nfc: String, _ nfd: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(nfc == nfd, sourceLocation: sourceLocation)  // Swift compares by canonical equivalence
        #expect(Array(nfc.utf8) != Array(nfd.utf8), sourceLocation: sourceLocation)
        #expect(
            TextTokenizer.v1.tokens(in: nfc) == TextTokenizer.v1.tokens(in: nfd), "\(nfc)",
            sourceLocation: sourceLocation)
    }

    @Test func voicingMarksKeepKanaApart() {
        expectSameTokens("\u{304C}", "\u{304B}\u{3099}")  // が
        #expect(terms("\u{304C}") == ["\u{304B}\u{3099}"])  // the term is the NFD form
        #expect(terms("が") != terms("か"))
        #expect(terms("ぱ") != terms("ば"))
        #expect(terms("ぱ") == ["\u{306F}\u{309A}"])
    }

    @Test func devanagariKeepsVowelSignsAndVirama() {
        #expect(terms("हिन्दी") == ["\u{939}\u{93F}\u{928}\u{94D}\u{926}\u{940}"])
        #expect(terms("हिन्दी भाषा") == ["हिन्दी", "भाषा"])
        #expect(terms("हिन्दी") != terms("हनद"))
        expectSameTokens("\u{958}\u{93F}\u{932}\u{93E}", "\u{915}\u{93C}\u{93F}\u{932}\u{93E}")  // क़िला
        #expect(terms("\u{958}") == ["\u{915}\u{93C}"])  // the nukta stays, decomposed
        #expect(terms("\u{958}") != terms("\u{915}"))
        #expect(terms("ক্ষমা தமிழ்") == ["ক্ষমা", "தமிழ்"])  // Bengali, Tamil
    }

    @Test func thaiAndLaoKeepVowelsAndToneMarks() {
        #expect(terms("สวัสดี") == ["สวัสดี"])  // Thai: no bigrams, one token per run
        #expect(terms("ภาษาไทย") == ["ภาษาไทย"])
        #expect(terms("ไม้") != terms("ไม"))
        #expect(terms("ສະບາຍດີ") == ["ສະບາຍດີ"])
        // A vowel below (class 103) and a tone mark (107) in either order: canonical order.
        #expect(terms("ก\u{E49}\u{E39}") == ["ก\u{E39}\u{E49}"])
        #expect(terms("ก\u{E39}\u{E49}") == ["ก\u{E39}\u{E49}"])
    }

    @Test func arabicHarakatAreDropped() {
        #expect(terms("كَتَبَ") == terms("كتب"))
        #expect(terms("مُحَمَّد") == ["محمد"])
        #expect(terms("القُرْآن") == ["القران"])  // آ is alef with madda (U+0653), dropped too
        // Hamza above (U+0654) is in the harakat range: أ (alef + hamza above) folds to alef.
        #expect(terms("أحمد") == ["احمد"])
        expectSameTokens("\u{623}\u{64E}", "\u{627}\u{654}\u{64E}")
    }

    @Test func hebrewNiqqudIsDropped() {
        #expect(terms("שָׁלוֹם") == terms("שלום"))
        #expect(terms("בְּרֵאשִׁית") == ["בראשית"])
        expectSameTokens("\u{FB2A}\u{5B8}", "\u{5E9}\u{5C1}\u{5B8}")  // שָׁ: a precomposed presentation form
        #expect(terms("\u{FB2A}") == ["\u{5E9}"])
    }

    @Test func vietnameseAndFrenchStillLoseAccents() {
        #expect(terms("Tiếng Việt có dấu") == ["tieng", "viet", "co", "dau"])
        expectSameTokens("Ti\u{1EBF}ng Vi\u{1EC7}t", "Tie\u{302}\u{301}ng Vie\u{323}\u{302}t")
        #expect(terms("être Noël où Œuvre déjà") == ["etre", "noel", "ou", "œuvre", "deja"])
    }

    @Test func argerStillFindsArger() {
        for text in ["Großer Ärger", "Großer A\u{308}rger", "GROSSER ÄRGER"] {
            let tokens = TextTokenizer.v1.tokens(in: text)
            #expect(tokens.map(\.term) == [utf8("grosser"), utf8("arger")], "\(text)")
        }
        #expect(TextTokenizer.v1.foldedTerms("arger") == [utf8("arger")])
        #expect(TextTokenizer.v1.foldedTerms("Ärger") == [utf8("arger")])
    }

    @Test func otherDiacriticBlocksAreDropped() {
        #expect(terms("a\u{1AB0}b\u{1DC0}c\u{20D7}d\u{FE20}e") == ["abcde"])
    }

    @Test func variationSelectorsAreDropped() {
        // Default-ignorable marks: an ideographic variation sequence is its ideograph.
        #expect(terms("葛\u{E0100}城") == terms("葛城"))
        #expect(terms("x\u{FE0E}y") == ["xy"])
    }

    @Test func keptMarksOfEveryClassComeOutInCanonicalOrder() {
        // Devanagari: nukta (class 7) before udatta (230), whatever the input order or form.
        let expected = ["\u{915}\u{93C}\u{951}"]
        #expect(terms("\u{915}\u{951}\u{93C}") == expected)
        #expect(terms("\u{915}\u{93C}\u{951}") == expected)
        #expect(terms("\u{958}\u{951}") == expected)
        // A dropped diacritic between kept marks changes nothing.
        #expect(terms("\u{915}\u{951}\u{301}\u{93C}") == expected)
    }

    @Test func theCutKeepsTheCanonicalPrefix() {
        // 117 bytes, then two 3-byte marks: only the one that sorts first fits, in either order.
        let word = String(repeating: "a", count: 114) + "ก"
        #expect(terms(word + "\u{E49}\u{E39}") == [word + "\u{E39}"])
        #expect(terms(word + "\u{E39}\u{E49}") == [word + "\u{E39}"])
        // A mark cut away still lets a mark of a lower class in, but nothing after a cut letter.
        let full = String(repeating: "a", count: 113) + "ก"  // 116 bytes
        #expect(terms(full + "\u{E49}\u{E49}\u{E39}") == [full + "\u{E39}"])
        #expect(terms(full + "\u{E49}\u{E49}b\u{E39}") == [full + "\u{E49}"])
        #expect(terms(full + "\u{E49}ж\u{E39}") == [full + "\u{E49}"])
    }
}
