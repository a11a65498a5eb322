/// The query's words, strings, parentheses and operators, with their offsets in Characters.
struct QueryToken: Equatable {
    enum Kind: Equatable {
        /// A bare word (any run of characters but whitespace, `"`, `(`, `)`, `*` and `+`), which
        /// the tokenizer folds; `prefix` when a `*` follows it directly.
        case word(String, prefix: Bool)
        /// A quoted string (`""` inside stands for one quote); `prefix` when `*` follows the
        /// closing quote directly.
        case string(String, prefix: Bool)
        /// `+`, FTS5's phrase concatenation: `one + two` is `"one two"`.
        case open, close, and, or, not, plus, end
    }

    var kind: Kind
    var offset: Int

    /// Whether the token starts an operand (a word, a string or a parenthesized query).
    var startsOperand: Bool {
        switch kind {
        case .word, .string, .open: true
        default: false
        }
    }

    /// The keyword's name, for messages.
    var keyword: String? {
        switch kind {
        case .and: "AND"
        case .or: "OR"
        case .not: "NOT"
        case .plus: "+"
        default: nil
        }
    }
}

enum QueryLexer {
    static func tokens(_ query: String) throws(TextQuerySyntaxError) -> [QueryToken] {
        let characters = Array(query)
        var tokens: [QueryToken] = []
        var index = 0
        func fail(_ message: String, at offset: Int) -> TextQuerySyntaxError {
            TextQuerySyntaxError(message: message, offset: offset, query: query)
        }
        /// Consumes a `*` right after a word or string: a prefix.
        func star() -> Bool {
            guard index < characters.count, characters[index] == "*" else { return false }
            index += 1
            return true
        }
        while index < characters.count {
            let character = characters[index]
            let start = index
            if character.isWhitespace {
                index += 1
                continue
            }
            switch character {
            case "(":
                index += 1
                tokens.append(QueryToken(kind: .open, offset: start))
            case ")":
                index += 1
                tokens.append(QueryToken(kind: .close, offset: start))
            case "*":
                throw fail("a * must follow a word or a closing quote directly (a prefix: word*)", at: start)
            case "+":
                index += 1
                tokens.append(QueryToken(kind: .plus, offset: start))
            case "\"":
                var text = ""
                index += 1
                while true {
                    guard index < characters.count else { throw fail("this quote is never closed", at: start) }
                    if characters[index] == "\"" {
                        if index + 1 < characters.count && characters[index + 1] == "\"" {
                            text.append("\"")
                            index += 2
                            continue
                        }
                        index += 1
                        break
                    }
                    text.append(characters[index])
                    index += 1
                }
                tokens.append(QueryToken(kind: .string(text, prefix: star()), offset: start))
            default:
                while index < characters.count && !isDelimiter(characters[index]) { index += 1 }
                // Appended one Character at a time: `String(characters[start..<index])` is the
                // generic initializer, whose first call in a process looks up `ArraySlice`'s
                // conformances by name (about 0.1 ms on the first query).
                var word = ""
                for character in characters[start..<index] { word.append(character) }
                // Right after the word (no space): a quote or parenthesis it would stand before.
                let attached = index < characters.count && (characters[index] == "\"" || characters[index] == "(")
                try refuseFTS5Syntax(word, at: start, attachedToGroup: attached, fail: fail)
                let prefix = star()
                if word == "NEAR" && !prefix && index < characters.count && characters[index] == "(" {
                    throw fail("NEAR(…) is not supported; use a phrase in quotes", at: start)
                }
                tokens.append(QueryToken(kind: prefix ? .word(word, prefix: true) : keyword(word), offset: start))
            }
        }
        tokens.append(QueryToken(kind: .end, offset: characters.count))
        return tokens
    }

    private static func isDelimiter(_ character: Character) -> Bool {
        character.isWhitespace || character == "\"" || character == "(" || character == ")" || character == "*"
            || character == "+"
    }

    /// Refuses a bare word that FTS5 would read as syntax Buri does not implement, rather than fold
    /// its punctuation away and answer a different question: a column filter (`body:word`,
    /// `{a b}:word`, `- body:word`: every one has a colon), an initial-token query (`^word`,
    /// `^"a phrase"`), and a `-` before a word, which is not an exclusion in FTS5 either.
    /// Punctuation FTS5 gives no meaning to (`x-ray`, `don't`, `3.14`, `---`, a `-` standing
    /// alone) is folded by the tokenizer as in the indexed text. `attachedToGroup`: a quote or a
    /// `(` follows the word directly.
    private static func refuseFTS5Syntax(
        _ word: String, at start: Int, attachedToGroup: Bool, fail: (String, Int) -> TextQuerySyntaxError
    ) throws(TextQuerySyntaxError) {
        if let colon = word.firstIndex(of: ":") {
            throw fail(
                "column filters (column: in FTS5) are not supported: a text index searches its own field; "
                    + "to search for a word with a colon, put it in quotes (\"12:30\")",
                start + word.distance(from: word.startIndex, to: colon))
        }
        guard let first = word.first, first == "^" || first == "-" else { return }
        // Only where it is attached to something to search: a word (`-apple`), a phrase or a group
        // (`^"a b"`, `-(a OR b)`). Standing alone (`a - b`) or in a run (`---`), it is punctuation.
        let beforeOperand =
            word.dropFirst().contains { $0.isLetter || $0.isNumber } || (word.count == 1 && attachedToGroup)
        guard beforeOperand else { return }
        if first == "^" {
            throw fail(
                "^ (a phrase at the start of the text, in FTS5) is not supported: drop it to match anywhere", start)
        }
        throw fail("a - before a word does not exclude it (in FTS5 it starts a column filter): write `a NOT b`", start)
    }

    /// FTS5's operators are uppercase only; `and`, `Or` are words.
    private static func keyword(_ word: String) -> QueryToken.Kind {
        switch word {
        case "AND": .and
        case "OR": .or
        case "NOT": .not
        default: .word(word, prefix: false)
        }
    }
}
