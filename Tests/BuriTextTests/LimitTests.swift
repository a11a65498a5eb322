import BuriText
import Testing

@Suite("Tokenizer v1: long words, long texts, stop words")
struct LimitTests {
    @Test func longAsciiWordsAreCutAt120Bytes() {
        let word = String(repeating: "abcdefghij", count: 30)
        #expect(terms(word) == [String(word.prefix(120))])
        #expect(terms(String(repeating: "x", count: 120)) == [String(repeating: "x", count: 120)])
        #expect(terms(String(repeating: "x", count: 121) + " y") == [String(repeating: "x", count: 120), "y"])
    }

    @Test func cutsNeverSplitAScalar() {
        // 2-, 3- and 4-byte scalars after an odd number of ASCII bytes: the cut falls before them.
        for (filler, scalar) in [(1, "é"), (1, "ж"), (2, "ก"), (1, "\u{10400}"), (3, "\u{10428}")] {
            let word = String(repeating: "a", count: filler) + String(repeating: scalar, count: 200)
            let term = TextTokenizer.v1.tokens(in: word)[0].term
            #expect(term.count <= 120)
            #expect(term.count > 116)
            #expect(String(validating: term, as: UTF8.self) != nil)
        }
        // ß folds to two scalars: the cut may fall between them, still on a scalar boundary.
        #expect(terms(String(repeating: "ß", count: 100)) == [String(repeating: "s", count: 120)])
    }

    @Test func theCutIsAPrefixOfTheFoldedWord() {
        // 119 bytes, then a 2-byte scalar that does not fit: nothing after it may be appended.
        let word = String(repeating: "a", count: 119) + "жbcd"
        #expect(terms(word) == [String(repeating: "a", count: 119)])
    }

    @Test func aCutWordStillTakesOnePosition() {
        let word = String(repeating: "long", count: 100)
        #expect(described("\(word) next").last == "next@1")
    }

    @Test func textOverOneMebibyteIsTokenizedWhole() {
        let sentence = "The quick brown fox jumps over the lazy dog. "  // 9 tokens, 45 bytes
        let text = String(repeating: sentence, count: 30_000)  // 1.35 MB
        #expect(text.utf8.count > 1 << 20)
        var count = 0
        var last: UInt32 = 0
        TextTokenizer.v1.forEachToken(in: text) { _, position in
            count += 1
            last = position
        }
        #expect(count == 270_000)
        #expect(last == 269_999)
        let wide = String(repeating: "Größe 北京大学 ", count: 60_000)  // non-ASCII and CJK, 1.3 MB
        #expect(TextTokenizer.v1.tokens(in: wide).count == 240_000)
    }

    @Test func aOneMebibyteWordIsOneCutTerm() {
        let tokens = TextTokenizer.v1.tokens(in: String(repeating: "é", count: 600_000))
        #expect(tokens.count == 1)
        #expect(tokens.first?.term == Array(repeating: UInt8(ascii: "e"), count: 120))
    }

    @Test func stopWordsAreSkippedButKeepTheirPositions() throws {
        let tokenizer = try #require(TextTokenizer(version: 1, stopWords: ["the", "A", "Über"]))
        #expect(
            described("The cat and a dog über THE hill", tokenizer) == [
                "cat@1", "and@2", "dog@4", "hill@7",
            ])
        #expect(tokenizer.isStopWord(utf8("uber")))
        #expect(tokenizer.stopWords == [utf8("the"), utf8("a"), utf8("uber")])
        // Query words keep stop words (phrases stay exact).
        #expect(tokenizer.foldedTerms("the cat") == [utf8("the"), utf8("cat")])
        #expect(tokenizer != .v1)
        #expect(tokenizer == TextTokenizer(version: 1, stopWords: ["über", "a", "THE"]))
    }

    @Test func unknownVersionsAreRefused() {
        #expect(TextTokenizer(version: 0) == nil)
        #expect(TextTokenizer(version: 2) == nil)
        #expect(TextTokenizer(version: 1) == .v1)
        #expect(TextTokenizer.v1.version == 1)
    }
}
