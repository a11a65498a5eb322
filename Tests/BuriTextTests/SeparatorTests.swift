import BuriText
import Testing

@Suite("Tokenizer v1: what makes a token and what separates tokens")
struct SeparatorTests {
    @Test func punctuationSeparatesAsInFTS5Unicode61() {
        #expect(terms("don't") == ["don", "t"])
        #expect(terms("3.14") == ["3", "14"])
        #expect(terms("foo_bar") == ["foo", "bar"])
        #expect(
            terms("e-mail, (etc.); \"quoted\" [x]{y}<z>/w\\v|u~t`s@r#q$p%o^n&m+l=k?j!") == [
                "e", "mail", "etc", "quoted", "x", "y", "z", "w", "v", "u", "t", "s", "r", "q", "p", "o", "n", "m", "l",
                "k", "j",
            ])
        #expect(terms("l’homme « quoi » — ¿qué? ¡sí!") == ["l", "homme", "quoi", "que", "si"])
    }

    @Test func whitespaceOfEveryKindSeparates() {
        #expect(terms("a\tb\nc\r\nd\u{A0}e\u{2003}f\u{3000}g\u{2028}h") == ["a", "b", "c", "d", "e", "f", "g", "h"])
    }

    @Test func numbersAreTokens() {
        #expect(
            terms("Release 2024 v6.3.1 has 42 fixes, ½ of ² done; ٣ and ३") == [
                "release", "2024", "v6", "3", "1", "has", "42", "fixes", "½", "of", "²", "done", "٣", "and", "३",
            ])
        #expect(terms("x86_64 0xFF") == ["x86", "64", "0xff"])
    }

    @Test func emojiSymbolsAndSequencesSeparate() {
        #expect(terms("I❤️NY") == ["i", "ny"])
        #expect(terms("go👍now") == ["go", "now"])
        // ZWJ sequences, skin tones, flags (regional indicators), tags, keycaps.
        #expect(terms("family👨‍👩‍👧‍👦here") == ["family", "here"])
        #expect(terms("wave👋🏽ok") == ["wave", "ok"])
        #expect(terms("from🇫🇷to🇯🇵") == ["from", "to"])
        #expect(terms("scot🏴󠁧󠁢󠁳󠁣󠁴󠁿land") == ["scot", "land"])
        #expect(terms("press 1️⃣ then #️⃣") == ["press", "1", "then"])
        #expect(terms("€100 ≥ $5 © ™ ∑") == ["100", "5"])
        #expect(terms("👨‍👩‍👧 🇫🇷 ✨").isEmpty)
    }

    @Test func joinersAndFormatCharactersSeparate() {
        #expect(terms("a\u{200D}b") == ["a", "b"])
        #expect(terms("a\u{200B}b") == ["a", "b"])  // zero width space
        #expect(terms("a\u{AD}b") == ["a", "b"])  // soft hyphen (Cf), as in FTS5
    }

    @Test func nulIsASeparator() {
        #expect(terms("abc\u{0}def") == ["abc", "def"])
        #expect(terms("\u{0}\u{0}x\u{0}") == ["x"])
        #expect(described("\u{0}é\u{0}北京\u{0}") == ["e@0", "北京@1"])
    }

    @Test func privateUseCharactersAreTokenCharacters() {
        #expect(terms("a\u{E000}b \u{F0000}") == ["a\u{E000}b", "\u{F0000}"])
    }

    @Test func emptyTextAndTextWithoutTokenCharactersGiveNothing() {
        #expect(TextTokenizer.v1.tokens(in: "").isEmpty)
        #expect(TextTokenizer.v1.tokens(in: "   \n\t ").isEmpty)
        #expect(TextTokenizer.v1.tokens(in: "!?… — «» 🙂 ∞").isEmpty)
        var calls = 0
        TextTokenizer.v1.forEachToken(in: "") { _, _ in calls += 1 }
        #expect(calls == 0)
    }

    @Test func diacriticsAloneGiveNothingAndTakeNoPosition() {
        #expect(described("\u{301}\u{308} a \u{301} b") == ["a@0", "b@1"])
        #expect(described("\u{5B8} a \u{64E}\u{FE0F} b") == ["a@0", "b@1"])
    }

    @Test func aKeptMarkWithNothingBeforeItStartsAWord() {
        #expect(described("a \u{94D} b") == ["a@0", "\u{94D}@1", "b@2"])
        #expect(described("(\u{93F}x)") == ["\u{93F}x@0"])
    }

    @Test func positionsAreConsecutiveFromZero() {
        let tokens = TextTokenizer.v1.tokens(in: "One, two... three!\n  four 五六七 eight")
        #expect(tokens.map(\.position) == Array(0..<UInt32(tokens.count)))
        #expect(tokens.map(\.description) == ["one@0", "two@1", "three@2", "four@3", "五六@4", "六七@5", "eight@6"])
    }

    @Test func forEachTokenAndTokensAgree() {
        let text = "Ça va? Très bien — 日本語 and ASCII_words 123 ßtraße"
        var streamed: [TextToken] = []
        TextTokenizer.v1.forEachToken(in: text) { term, position in
            streamed.append(TextToken(term: Array(term), position: position))
        }
        #expect(streamed == TextTokenizer.v1.tokens(in: text))
        #expect(streamed.count == 11)
    }

    @Test func forEachTokenRethrows() {
        struct Stop: Error {}
        var seen = 0
        #expect(throws: Stop.self) {
            try TextTokenizer.v1.forEachToken(in: "a b c") { _, _ in
                seen += 1
                if seen == 2 { throw Stop() }
            }
        }
        #expect(seen == 2)
    }

    @Test func substringsAndBridgedLookingStringsWork() {
        let long = "prefix " + String(repeating: "x", count: 20) + " suffix"
        let slice = String(long.dropFirst(7))
        #expect(terms(slice) == [String(repeating: "x", count: 20), "suffix"])
    }
}
