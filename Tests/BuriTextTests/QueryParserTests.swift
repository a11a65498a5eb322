import BuriText
import Testing

@Suite("TextQuery.parse: FTS5's query forms")
struct QueryParserTests {
    @Test func aWordIsAFoldedTerm() throws {
        #expect(try parse("Crème") == term("creme"))
        #expect(try parse("  STRASSE ") == term("strasse"))
        #expect(try parse("Straße") == term("strasse"))
    }

    @Test func wordsSideBySideMustAllMatch() throws {
        #expect(try parse("apple pie") == .and([term("apple"), term("pie")]))
        #expect(try parse("a b c") == .and([term("a"), term("b"), term("c")]))
    }

    @Test func explicitOperators() throws {
        #expect(try parse("a AND b") == .and([term("a"), term("b")]))
        #expect(try parse("a OR b") == .or([term("a"), term("b")]))
        #expect(try parse("a NOT b") == .and([term("a"), .not(term("b"))]))
        #expect(try parse("a NOT b NOT c") == .and([term("a"), .not(term("b")), .not(term("c"))]))
    }

    @Test func operatorsAreUppercaseOnly() throws {
        #expect(try parse("a and b or c not d") == .and(["a", "and", "b", "or", "c", "not", "d"].map(term)))
        #expect(try parse("\"AND\" OR \"NOT\"") == .or([term("and"), term("not")]))
        #expect(try parse("AND*") == prefix("and"))  // with a star, a keyword is a word
    }

    @Test func precedenceIsImplicitAndThenNotThenAndThenOr() throws {
        // FTS5: implicit AND groups tightest, then NOT, AND, OR.
        #expect(try parse("a OR b c") == .or([term("a"), .and([term("b"), term("c")])]))
        #expect(try parse("a NOT b c") == .and([term("a"), .not(.and([term("b"), term("c")]))]))
        #expect(try parse("a OR b AND c") == .or([term("a"), .and([term("b"), term("c")])]))
        #expect(try parse("a AND b OR c") == .or([.and([term("a"), term("b")]), term("c")]))
        #expect(try parse("a AND b NOT c") == .and([term("a"), term("b"), .not(term("c"))]))
        #expect(try parse("a NOT b AND c") == .and([term("a"), .not(term("b")), term("c")]))
        #expect(try parse("a OR b NOT c") == .or([term("a"), .and([term("b"), .not(term("c"))])]))
        #expect(try parse("a NOT b OR c") == .or([.and([term("a"), .not(term("b"))]), term("c")]))
    }

    @Test func parenthesesGroup() throws {
        #expect(try parse("(a OR b) AND c") == .and([.or([term("a"), term("b")]), term("c")]))
        #expect(try parse("a NOT (b OR c)") == .and([term("a"), .not(.or([term("b"), term("c")]))]))
        #expect(try parse("((a))") == term("a"))
        #expect(try parse("(a OR (b OR c))") == .or([term("a"), term("b"), term("c")]))
        // Unlike FTS5, a group may stand next to a word: an implicit AND.
        #expect(try parse("(a OR b) c") == .and([.or([term("a"), term("b")]), term("c")]))
        #expect(try parse("x(a OR b)") == .and([term("x"), .or([term("a"), term("b")])]))
    }

    @Test func phrases() throws {
        #expect(try parse("\"an exact phrase\"") == phrase("an", "exact", "phrase"))
        #expect(try parse("\"Crème, Brûlée!\"") == phrase("creme", "brulee"))
        #expect(try parse("\"one\"") == term("one"))
        #expect(try parse("\"say \"\"hi\"\" now\"") == phrase("say", "hi", "now"))
        #expect(try parse("\"a b\" c") == .and([phrase("a", "b"), term("c")]))
        #expect(try parse("x\"a b\"") == .and([term("x"), phrase("a", "b")]))
        #expect(try parse("\"a OR b\"") == phrase("a", "or", "b"))
        #expect(try parse("\"a (b)\"") == phrase("a", "b"))
    }

    @Test func prefixes() throws {
        #expect(try parse("choi*") == prefix("choi"))
        #expect(try parse("Chöi*") == prefix("choi"))
        #expect(try parse("\"the quick br\"*") == phrase("the", "quick", "br", lastIsPrefix: true))
        #expect(try parse("don't*") == phrase("don", "t", lastIsPrefix: true))
        #expect(try parse("a*b") == .and([prefix("a"), term("b")]))
        // A * inside quotes is text, as in FTS5: a separator.
        #expect(try parse("\"choi*\"") == term("choi"))
    }

    @Test func aWordTheTokenizerSplitsIsAPhrase() throws {
        #expect(try parse("don't") == phrase("don", "t"))
        #expect(try parse("3.14") == phrase("3", "14"))
        #expect(try parse("foo_bar baz") == .and([phrase("foo", "bar"), term("baz")]))
        #expect(try parse("北京大学") == phrase("北京", "京大", "大学"))
        #expect(try parse("iPhone手机") == phrase("iphone", "手机"))
        #expect(try parse("北京") == term("北京"))
    }

    @Test func aSingleCJKCharacterIsAPrefixOfItsBigrams() throws {
        #expect(try parse("猫") == prefix("猫"))
        #expect(try parse("한") == prefix("한"))
        #expect(try parse("が") == prefix("\u{304B}\u{3099}"))  // a kana and its voicing mark are one unit
        #expect(try parse("\u{304B}\u{3099}") == prefix("\u{304B}\u{3099}"))
        #expect(try parse("がき") == term("\u{304B}\u{3099}\u{304D}"))
        #expect(try parse("\"北 京\"") == phrase("北", "京"))  // inside a phrase, exact
    }

    @Test func wordsWithoutTermsAreDropped() throws {
        #expect(try parse("!!! apple") == term("apple"))
        #expect(try parse("apple OR ---") == term("apple"))
        #expect(try parse("apple NOT ...") == term("apple"))
        #expect(try parse("(!!!) apple") == term("apple"))
        #expect(try parse("\"\" apple") == term("apple"))
    }

    @Test func stopWordsAreDroppedAloneAndKeptInPhrases() throws {
        let tokenizer = try #require(TextTokenizer(version: 1, stopWords: ["the", "of"]))
        #expect(try parse("the cat", tokenizer) == term("cat"))
        #expect(try parse("\"the cat\"", tokenizer) == phrase("the", "cat"))
        #expect(try parse("\"house of cards\"", tokenizer) == phrase("house", "of", "cards"))
        #expect(try parse("the*", tokenizer) == prefix("the"))  // a prefix is never a stop word
        #expect(throws: TextQuerySyntaxError.self) { try parse("the OF", tokenizer) }
        #expect(throws: TextQuerySyntaxError.self) { try parse("\"the of\"", tokenizer) }
    }

    @Test func plusJoinsPhrasesAsInFTS5() throws {
        #expect(try parse("apple + pie") == phrase("apple", "pie"))
        #expect(try parse("apple+pie") == phrase("apple", "pie"))
        #expect(try parse("apple +pie") == phrase("apple", "pie"))
        #expect(try parse("\"a b\" + c + \"d\"*") == phrase("a", "b", "c", "d", lastIsPrefix: true))
        #expect(try parse("x apple + pie OR y") == .or([.and([term("x"), phrase("apple", "pie")]), term("y")]))
        #expect(try parse("a + !!!") == term("a"))  // a part that folds to nothing adds nothing
        // Where FTS5 refuses, or where only a middle prefix would do: refused, with the offset.
        let refused = [
            ("+ a", 0), ("a +", 2), ("a + + b", 2), ("a* + b", 0), ("(a) + b", 4), ("a + (b)", 2), ("a OR + b", 5),
        ]
        for (query, offset) in refused {
            #expect(syntaxError(query)?.offset == offset, "\(query)")
        }
    }

    @Test func fts5SyntaxThatIsNotImplementedIsRefusedNotMisread() throws {
        // Column filters, initial-token queries and a - before a word would otherwise fold into
        // another question (body:apple into "body apple", -apple into apple).
        let refused = [
            ("body:apple", 4), ("{body}: apple", 6), ("a {b c} : d", 8), ("^apple", 0), ("^\"a b\"", 0),
            ("-apple", 0), ("a -b", 2), ("-(a)", 0), ("-\"a\"", 0), ("-5", 0), ("^(a)", 0),
        ]
        for (query, offset) in refused {
            #expect(syntaxError(query)?.offset == offset, "\(query)")
        }
        #expect(syntaxError("body:apple")?.message.contains("quotes") == true)
        // Punctuation FTS5 gives no meaning to is folded as in the indexed text.
        #expect(try parse("x-ray") == phrase("x", "ray"))
        #expect(try parse("x^2") == phrase("x", "2"))
        #expect(try parse("apple ---") == term("apple"))
        #expect(try parse("apple -") == term("apple"))
        // Standing alone, - and ^ are punctuation, as every word without a term.
        #expect(try parse("(- OR apple)") == term("apple"))
        #expect(try parse("apple - pie") == .and([term("apple"), term("pie")]))
        #expect(try parse("a ^ b") == .and([term("a"), term("b")]))
        #expect(try parse("- \"a b\"") == phrase("a", "b"))
        #expect(try parse("\"12:30\"") == phrase("12", "30"))
    }

    @Test func nearIsRefusedRatherThanMisread() {
        #expect(syntaxError("NEAR(a b)")?.message.contains("NEAR") == true)
        #expect((try? parse("NEAR a")) == .and([term("near"), term("a")]))
    }
}
