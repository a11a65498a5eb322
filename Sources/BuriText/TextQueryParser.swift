extension TextQuery {
    /// Parses a query in SQLite FTS5's syntax, folding its words with `tokenizer`, the tokenizer
    /// of the index it will run against.
    ///
    /// - Words separated by spaces must all match (an implicit AND): `apple pie`.
    /// - `AND`, `OR`, `NOT` (uppercase only; `and` is a word). `a NOT b` means a AND NOT b; NOT is
    ///   binary, so a query of only `NOT b` is an error. Precedence as in FTS5, tightest first:
    ///   implicit AND, NOT, AND, OR. So `a OR b c` is `a OR (b AND c)` and `a NOT b c` is
    ///   `a NOT (b AND c)`. Parentheses group.
    /// - `"an exact phrase"` (a quote inside is written `""`); `prefix*`, and `"a phra"*` whose last
    ///   word is a prefix. A `*` inside quotes is text, as in FTS5, and so a separator.
    /// - A word the tokenizer splits into several terms is a phrase of them (`don't`, `北京大学`). A
    ///   word that is a single CJK character becomes a prefix (it is indexed only inside bigrams).
    ///   A word that gives no term (`!!!`, a stop word) is dropped; a query left with nothing to
    ///   search is an error.
    ///
    /// Unlike FTS5, a parenthesized group may stand next to a word (`(a OR b) c` is an implicit
    /// AND), and punctuation in a bare word is folded away rather than refused.
    /// - `one + two` joins phrases into one (`"one two"`), as in FTS5; only the last part may be a
    ///   prefix.
    /// - FTS5 syntax that is not implemented is refused, never folded into a different question:
    ///   `NEAR(…)`, column filters (`body:word`, `{a b}:word`), `^word`, and a `-` before a word
    ///   (which excludes nothing in FTS5 either). A word with a colon is searched in quotes
    ///   (`"12:30"`).
    ///
    /// ```swift
    /// let query = try TextQuery.parse("sqlite OR (\"full text\" search*)", tokenizer: .v1)
    /// ```
    public static func parse(_ text: String, tokenizer: TextTokenizer) throws(TextQuerySyntaxError) -> TextQuery {
        var parser = QueryParser(tokens: try QueryLexer.tokens(text), query: text, tokenizer: tokenizer)
        return try parser.parse()
    }
}

extension TextQuery {
    /// The deepest nesting of parentheses ``parse(_:tokenizer:)`` accepts (256, FTS5's limit);
    /// deeper is a ``TextQuerySyntaxError`` at the first `(` too many.
    ///
    /// ```swift
    /// TextQuery.maximumNesting   // 256
    /// ```
    public static var maximumNesting: Int { QueryParser.maximumNesting }
}

/// Recursive descent over QueryLexer's tokens, one function per precedence level. Operands that
/// fold to nothing come back nil and are dropped by the level above.
struct QueryParser {
    let tokens: [QueryToken]
    let query: String
    let tokenizer: TextTokenizer
    private var index = 0
    /// Where the first word that gave no term is: the error's offset if nothing is left.
    private var firstDropped: Int?
    /// The parentheses open around the current token.
    private var depth = 0

    /// The deepest nesting of parentheses a query may have (FTS5's own limit): every level is a
    /// few frames of this recursive parser, so a query of thousands of `(` from a search box would
    /// otherwise exhaust the stack and end the process.
    static let maximumNesting = 256

    init(tokens: [QueryToken], query: String, tokenizer: TextTokenizer) {
        self.tokens = tokens
        self.query = query
        self.tokenizer = tokenizer
    }

    private var current: QueryToken { tokens[min(index, tokens.count - 1)] }

    private func fail(_ message: String, at offset: Int) -> TextQuerySyntaxError {
        TextQuerySyntaxError(message: message, offset: offset, query: query)
    }

    mutating func parse() throws(TextQuerySyntaxError) -> TextQuery {
        if current.kind == .end { throw fail("the query is empty", at: 0) }
        let query = try parseOr(after: nil)
        if current.kind == .close { throw fail("this ) has no matching (", at: current.offset) }
        guard let query else { throw fail("the query has no word to search for", at: firstDropped ?? 0) }
        return query
    }

    /// `after`: the operator or `(` before the expression, for the messages about missing operands.
    private mutating func parseOr(after: QueryToken?) throws(TextQuerySyntaxError) -> TextQuery? {
        var operands = [try parseAnd(after: after)]
        while current.kind == .or {
            let operator_ = current
            index += 1
            operands.append(try parseAnd(after: operator_))
        }
        return Self.combine(operands.compactMap { $0 }, or: true)
    }

    private mutating func parseAnd(after: QueryToken?) throws(TextQuerySyntaxError) -> TextQuery? {
        var operands = [try parseNot(after: after)]
        while current.kind == .and {
            let operator_ = current
            index += 1
            operands.append(try parseNot(after: operator_))
        }
        return Self.combine(operands.compactMap { $0 }, or: false)
    }

    private mutating func parseNot(after: QueryToken?) throws(TextQuerySyntaxError) -> TextQuery? {
        var left = try parseGroup(after: after)
        while current.kind == .not {
            let operator_ = current
            index += 1
            guard let right = try parseGroup(after: operator_) else { continue }
            guard let positive = left else {
                throw fail("nothing to search for on the left of NOT", at: operator_.offset)
            }
            left = Self.combine([positive, .not(right)], or: false)
        }
        return left
    }

    /// Operands side by side: the implicit AND, which binds tightest.
    private mutating func parseGroup(after: QueryToken?) throws(TextQuerySyntaxError) -> TextQuery? {
        guard current.startsOperand else { throw missingOperand(after: after) }
        var operands: [TextQuery] = []
        while current.startsOperand {
            if let operand = try parsePrimary() { operands.append(operand) }
        }
        // A + after a parenthesized group (a phrase's + was taken by its phrase).
        if current.kind == .plus { throw missingOperand(after: nil) }
        return Self.combine(operands, or: false)
    }

    private mutating func parsePrimary() throws(TextQuerySyntaxError) -> TextQuery? {
        let token = current
        index += 1
        switch token.kind {
        case .word(let text, let prefix), .string(let text, let prefix):
            guard current.kind == .plus else { return operand(text, prefix: prefix, at: token.offset) }
            return try concatenation(startingWith: text, prefix: prefix, at: token.offset)
        default:  // .open: startsOperand admits nothing else
            guard depth < Self.maximumNesting else {
                throw fail(
                    "parentheses nested more than \(Self.maximumNesting) deep: write the query with fewer levels",
                    at: token.offset)
            }
            depth += 1
            defer { depth -= 1 }
            let inner = try parseOr(after: token)
            guard current.kind == .close else { throw fail("this ( is never closed", at: token.offset) }
            index += 1
            return inner
        }
    }

    /// `one + "two three" + four`: FTS5's concatenation, one phrase of every part's terms. Only the
    /// last part may be a prefix (a phrase here has at most its last term a prefix).
    private mutating func concatenation(
        startingWith text: String, prefix: Bool, at offset: Int
    ) throws(TextQuerySyntaxError) -> TextQuery? {
        var terms = tokenizer.foldedTerms(text)
        var lastIsPrefix = prefix
        var partOffset = offset
        while current.kind == .plus {
            let plus = current
            if lastIsPrefix {
                throw fail("only the last part of a phrase joined with + can be a prefix (word*)", at: partOffset)
            }
            index += 1
            switch current.kind {
            case .word(let next, let nextPrefix), .string(let next, let nextPrefix):
                terms += tokenizer.foldedTerms(next)
                lastIsPrefix = nextPrefix
                partOffset = current.offset
                index += 1
            default:
                throw fail("+ joins two phrases: a word or a quoted phrase must follow it", at: plus.offset)
            }
        }
        return operand(terms: terms, prefix: lastIsPrefix, at: offset)
    }

    private func missingOperand(after: QueryToken?) -> TextQuerySyntaxError {
        if current.kind == .plus {
            return fail("+ joins two phrases: a word or a quoted phrase must come before it", at: current.offset)
        }
        if let keyword = current.keyword {
            let hint = current.kind == .not ? " (NOT means AND NOT: write a NOT b)" : ""
            return fail("\(keyword) needs a query on its left\(hint)", at: current.offset)
        }
        switch (after?.kind, current.kind) {
        case (nil, .close): return fail("this ) has no matching (", at: current.offset)
        case (nil, _): return fail("the query is empty", at: 0)
        case (.open?, .close): return fail("empty parentheses", at: after?.offset ?? 0)
        case (.open?, _): return fail("this ( is never closed", at: after?.offset ?? 0)
        default: return fail("\(after?.keyword ?? "") needs a query on its right", at: after?.offset ?? 0)
        }
    }

    /// A word or string: a term, a prefix, a phrase of the terms it folds to, or nothing.
    private mutating func operand(_ text: String, prefix: Bool, at offset: Int) -> TextQuery? {
        operand(terms: tokenizer.foldedTerms(text), prefix: prefix, at: offset)
    }

    /// The operand of `terms` (folded), as ``operand(_:prefix:at:)``.
    private mutating func operand(terms: [[UInt8]], prefix: Bool, at offset: Int) -> TextQuery? {
        if terms.isEmpty || (!prefix && terms.allSatisfy(tokenizer.isStopWord)) {
            if firstDropped == nil { firstDropped = offset }
            return nil
        }
        guard terms.count == 1 else { return .phrase(terms, lastIsPrefix: prefix) }
        return prefix || Self.isSingleCJKUnit(terms[0]) ? .prefix(terms[0]) : .term(terms[0])
    }

    /// Whether `term` is one CJK unit: one CJK scalar and the kept marks after it (が is か U+3099).
    private static func isSingleCJKUnit(_ term: [UInt8]) -> Bool {
        let scalars = String(decoding: term, as: UTF8.self).unicodeScalars
        guard let first = scalars.first, CJK.isUnit(first.value) else { return false }
        return scalars.dropFirst().allSatisfy { !CJK.isUnit($0.value) }
    }

    /// The operands under one `and` or `or`, flattening nested ones of the same kind.
    private static func combine(_ operands: [TextQuery], or: Bool) -> TextQuery? {
        var flat: [TextQuery] = []
        for operand in operands {
            switch (operand, or) {
            case (.or(let inner), true), (.and(let inner), false): flat.append(contentsOf: inner)
            default: flat.append(operand)
            }
        }
        guard flat.count > 1 else { return flat.first }
        return or ? .or(flat) : .and(flat)
    }
}
