import BuriText
import Testing

@Suite("Tokenizer v1: case, diacritic and canonical folding")
struct FoldingTests {
    @Test func asciiCaseFolds() {
        #expect(terms("Hello WORLD MiXeD") == ["hello", "world", "mixed"])
    }

    @Test func fullCaseFoldingMakesSharpSDoubleS() {
        // Documented choice: full case folding, so ß, ẞ, SS and ss are one term.
        #expect(terms("Straße STRASSE strasse STRAẞE") == ["strasse", "strasse", "strasse", "strasse"])
        #expect(terms("Maß") == terms("MASS"))
    }

    @Test func otherFullCaseFoldings() {
        #expect(terms("ΟΔΟΣ οδος Οδός") == ["οδοσ", "οδοσ", "οδοσ"])  // final sigma, tonos dropped
        #expect(terms("ﬁnance ﬂow") == ["finance", "flow"])  // ligatures fold by case folding
        #expect(terms("İstanbul ISTANBUL ıstanbul") == ["istanbul", "istanbul", "istanbul"])
        #expect(terms("µs μs") == ["μs", "μs"])  // micro sign
        #expect(terms("ſtraße") == ["strasse"])  // long s
        #expect(terms("ДОМ дом Дом") == ["дом", "дом", "дом"])
        #expect(terms("ԱՐԵՎ \u{587}") == ["\u{561}\u{580}\u{565}\u{57E}", "\u{565}\u{582}"])  // Armenian, և
        #expect(terms("\u{13E3}\u{13B3}\u{13A9}") == terms("\u{ABB3}\u{AB83}\u{AB79}"))  // Cherokee: one case
    }

    @Test func diacriticsAreDropped() {
        #expect(terms("Ärger") == ["arger"])
        #expect(terms("Crème Brûlée") == ["creme", "brulee"])
        #expect(terms("naïve café façade résumé") == ["naive", "cafe", "facade", "resume"])
        #expect(terms("Ångström Øresund Ñandú") == ["angstrom", "oresund", "nandu"])
        #expect(terms("Việt Nam phở Hà Nội") == ["viet", "nam", "pho", "ha", "noi"])
        #expect(terms("Dvořák Škoda Łódź Kraków") == ["dvorak", "skoda", "lodz", "krakow"])
        #expect(terms("ἀλήθεια") == ["αληθεια"])  // Greek breathing and accent
        #expect(terms("Ελλάδα") == ["ελλαδα"])
    }

    @Test func strokeLettersFoldByTheTable() {
        #expect(terms("ø Ø ł Ł đ Đ ħ Ħ ı ŧ Ŧ") == ["o", "o", "l", "l", "d", "d", "h", "h", "i", "t", "t"])
        #expect(terms("Søren Wałęsa Đorđe Ħamrun") == ["soren", "walesa", "dorde", "hamrun"])
        #expect(terms("ǿ") == ["o"])  // ø with acute: decomposes to ø, then the table
    }

    @Test func lettersOfTheirOwnStay() {
        #expect(terms("æ Æ œ Œ ð Ð þ Þ ĸ") == ["æ", "æ", "œ", "œ", "ð", "ð", "þ", "þ", "ĸ"])
    }

    @Test func canonicalSingletonsFold() {
        // Ångström sign, Ohm sign, Kelvin sign decompose canonically to ordinary letters.
        #expect(terms("\u{212B}") == ["a"])
        #expect(terms("\u{2126}") == ["ω"])
        #expect(terms("\u{212A}") == ["k"])
        // A CJK compatibility ideograph is its unified ideograph.
        #expect(terms("\u{F900}") == terms("\u{8C48}"))
        #expect(terms("\u{2F800}") == terms("\u{4E3D}"))
    }

    @Test func compatibilityFormsAreNotFolded() {
        // v1 folds canonical equivalents only: full-width and superscript forms stay distinct.
        #expect(terms("ＡＢＣ") == ["ａｂｃ"])
        #expect(terms("x²") == ["x²"])
    }

    @Test func combiningDiacriticsAreDroppedWhereverTheyStand() {
        #expect(terms("e\u{301}") == ["e"])
        #expect(terms("a\u{301}\u{302}\u{303}\u{304}b") == ["ab"])
        #expect(terms("x\u{20DD}y") == ["xy"])  // enclosing circle (Me)
        #expect(terms("\u{301}abc") == ["abc"])  // a mark before the word
        #expect(terms("abc \u{301}") == ["abc"])
    }

    @Test func nfcAndNfdGiveTheSameTokens() {
        let pairs: [(String, String)] = [
            ("\u{E9}t\u{E9}", "e\u{301}te\u{301}"),  // été
            ("\u{1EC7}", "e\u{323}\u{302}"),  // ệ: Vietnamese, stacked marks
            ("Vi\u{1EC7}t Nam \u{1EDF}", "Vie\u{323}\u{302}t Nam o\u{31B}\u{309}"),  // Việt, ở
            ("\u{1E09}", "c\u{327}\u{301}"),  // ḉ
            ("\u{1E69}", "s\u{323}\u{307}"),  // ṩ
            ("\u{390}", "\u{3B9}\u{308}\u{301}"),  // ΐ
            ("\u{1F0F}", "\u{391}\u{314}\u{342}"),  // Ἇ
            ("\u{C5}", "A\u{30A}"),  // Å
            ("\u{1D6}", "u\u{308}\u{304}"),  // ǖ (pinyin)
            ("\u{958}", "\u{915}\u{93C}"),  // क़ (a composition exclusion): the nukta is kept
            ("\u{304C}\u{3063}\u{3053}\u{3046}", "\u{304B}\u{3099}\u{3063}\u{3053}\u{3046}"),  // がっこう
            ("\u{D55C}\u{AD6D}\u{C5B4}", "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}\u{110B}\u{1165}"),  // 한국어
            ("\u{AC00}\u{11A8}", "\u{1100}\u{1161}\u{11A8}"),  // 각: syllable + final jamo
        ]
        for (nfc, nfd) in pairs {
            #expect(nfc == nfd)  // Swift compares strings by canonical equivalence: the pair is right
            #expect(Array(nfc.utf8) != Array(nfd.utf8))
            #expect(TextTokenizer.v1.tokens(in: nfc) == TextTokenizer.v1.tokens(in: nfd), "\(nfc)")
        }
    }

    @Test func marksInAnyCanonicalOrderGiveTheSameTokens() {
        // Dot below (class 220) and circumflex (230) commute; so do the tokens.
        #expect(terms("e\u{323}\u{302}") == terms("e\u{302}\u{323}"))
        #expect(terms("e\u{323}\u{302}") == ["e"])
    }

    @Test func hangulJamoComposeIntoSyllables() {
        #expect(terms("\u{1100}\u{1161}") == ["\u{AC00}"])
        #expect(terms("\u{1100}\u{1161}\u{11A8}") == ["\u{AC01}"])
        // An archaic jamo that does not compose stays a unit of its own.
        #expect(terms("\u{1100}\u{1176}") == ["\u{1100}\u{1176}"])
    }
}
