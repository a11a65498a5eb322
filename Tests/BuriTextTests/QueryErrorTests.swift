import BuriText
import Testing

@Suite("TextQuery.parse: syntax errors say what and where")
struct QueryErrorTests {
    /// The error's offset and a word of its message.
    func expectError(
        _ query: String, at offset: Int, saying word: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let error = syntaxError(query)
        #expect(error?.offset == offset, "\(query)", sourceLocation: sourceLocation)
        #expect(
            error?.message.contains(word) == true, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
        #expect(error?.query == query, sourceLocation: sourceLocation)
    }

    @Test func emptyQueries() {
        expectError("", at: 0, saying: "empty")
        expectError("   \t", at: 0, saying: "empty")
    }

    @Test func unmatchedQuotes() {
        expectError("\"abc", at: 0, saying: "quote")
        expectError("a b \"c d", at: 4, saying: "quote")
        expectError("\"a\" \"b", at: 4, saying: "quote")
        expectError("\"ends with escaped \"\"", at: 0, saying: "quote")
    }

    @Test func unmatchedParentheses() {
        expectError("(a", at: 0, saying: "(")
        expectError("a (b OR (c)", at: 2, saying: "(")
        expectError("a)", at: 1, saying: ")")
        expectError("(a) b)", at: 5, saying: ")")
        expectError(") a", at: 0, saying: ")")
        expectError("a ()", at: 2, saying: "empty parentheses")
    }

    /// Nesting is bounded: a search box's input of thousands of `(` is a syntax error at the
    /// first one too deep, never a stack overflow that ends the process.
    @Test func parenthesesNestedTooDeep() throws {
        let limit = TextQuery.maximumNesting
        func nested(_ depth: Int, _ inner: String = "a") -> String {
            String(repeating: "(", count: depth) + inner + String(repeating: ")", count: depth)
        }
        #expect(try TextQuery.parse(nested(limit), tokenizer: .v1) == .term(Array("a".utf8)))
        #expect(try TextQuery.parse("x " + nested(limit, "a OR b"), tokenizer: .v1).description.contains("OR"))
        expectError(nested(limit + 1), at: limit, saying: "nested more than \(limit) deep")
        expectError("x OR " + nested(limit + 1), at: 5 + limit, saying: "deep")
        expectError(nested(200_000), at: limit, saying: "deep")
        // Unclosed ones are refused at the same point, before the missing `)` is noticed.
        expectError(String(repeating: "(", count: 100_000) + "a", at: limit, saying: "deep")
    }

    @Test func danglingOperators() {
        expectError("a AND", at: 2, saying: "AND needs a query on its right")
        expectError("a OR", at: 2, saying: "OR needs a query on its right")
        expectError("a NOT", at: 2, saying: "NOT needs a query on its right")
        expectError("(a OR) b", at: 3, saying: "OR needs a query on its right")
        expectError("AND a", at: 0, saying: "AND needs a query on its left")
        expectError("OR a", at: 0, saying: "OR needs a query on its left")
        expectError("a OR OR b", at: 5, saying: "OR needs a query on its left")
        expectError("(AND a)", at: 1, saying: "AND needs a query on its left")
    }

    @Test func aQueryOfOnlyNotIsAnError() {
        expectError("NOT a", at: 0, saying: "NOT needs a query on its left")
        expectError("a AND NOT b", at: 6, saying: "NOT needs a query on its left")
        expectError("a OR NOT b", at: 5, saying: "NOT")
        expectError("!!! NOT b", at: 4, saying: "left of NOT")
    }

    @Test func bareStars() {
        expectError("*", at: 0, saying: "*")
        expectError("a * b", at: 2, saying: "*")
        expectError("a**", at: 2, saying: "*")
        expectError("(a)*", at: 3, saying: "*")
    }

    @Test func nothingToSearchFor() {
        expectError("!!!", at: 0, saying: "no word")
        expectError("  ... OR ???", at: 2, saying: "no word")
    }

    @Test func offsetsCountCharacters() {
        // é in NFD is two scalars but one Character; 👨‍👩‍👧 is five scalars, one Character.
        expectError("e\u{301}t\u{E9} 👨‍👩‍👧 AND", at: 6, saying: "AND")
    }

    @Test func theDescriptionPutsACaretUnderTheOffset() throws {
        let error = try #require(syntaxError("apple AND"))
        #expect(error.description == "AND needs a query on its right\napple AND\n      ^")
        let tabbed = try #require(syntaxError("a\t(b"))
        #expect(tabbed.description.hasSuffix("a (b\n  ^"))
    }
}
