/// The query's words, strings, parentheses and operators, with their offsets in Characters.
struct QueryToken: Equatable {
    enum Kind: Equatable {
        /// A bare word (any run of characters but whitespace, `"`, `(`, `)` and `*`), which the
        /// tokenizer folds; `prefix` when a `*` follows it directly.
        case word(String, prefix: Bool)
        /// A quoted string (`""` inside stands for one quote); `prefix` when `*` follows the
        /// closing quote directly.
        case string(String, prefix: Bool)
        case open, close, and, or, not, end
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
                let word = String(characters[start..<index])
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
