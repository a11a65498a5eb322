/// A full-text query: SQLite FTS5's common forms, over terms folded by a ``TextTokenizer``.
///
/// ```swift
/// let query = try TextQuery.parse("crème brûlée OR \"apple pie\" NOT pear*", tokenizer: .v1)
/// // .or([.and([.term("creme"), .term("brulee")]),
/// //      .and([.phrase(["apple", "pie"]), .not(.prefix("pear"))])])   (terms as UTF-8)
/// query.description   // creme AND brulee OR "apple pie" NOT pear*
/// ```
///
/// Values that ``parse(_:tokenizer:)`` returns are normalized: `and` and `or` have at least two
/// operands and none of the same case (nested ones are flattened), `not` appears only as an
/// operand of `and` after its first one, a phrase has at least two terms. For them,
/// `parse(query.description) == query`.
public enum TextQuery: Sendable, Hashable {
    /// A document containing the folded term.
    case term([UInt8])
    /// A document containing a term that starts with these folded bytes (`choi*`).
    case prefix([UInt8])
    /// The folded terms at consecutive positions (`"an exact phrase"`); with `lastIsPrefix`, the
    /// last one is a prefix (`"an exact phr"*`). Stop words stay in a phrase, where each stands for
    /// one position that any word fills (the index has no entries for them; see
    /// ``TextTokenizer/isStopWord(_:)``), so the phrase keeps its exact shape.
    case phrase([[UInt8]], lastIsPrefix: Bool = false)
    /// Every operand matches (`a b`, `a AND b`).
    case and([TextQuery])
    /// Some operand matches (`a OR b`).
    case or([TextQuery])
    /// As an operand of `and`: the operand does not match (`a NOT b` is `.and([a, .not(b)])`).
    indirect case not(TextQuery)
}

extension TextQuery: CustomStringConvertible {
    /// The query in FTS5 syntax, with explicit operators: `a AND "b c" NOT (d OR e*)`.
    public var description: String { rendered(in: .top) }

    /// Where an expression is printed, which decides whether it needs parentheses.
    private enum Context { case top, orOperand, andOperand, notOperand }

    private func rendered(in context: Context) -> String {
        switch self {
        case .term(let term):
            return Self.word(term)
        case .prefix(let term):
            return Self.word(term) + "*"
        case .phrase(let terms, let lastIsPrefix):
            let inner = terms.map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
            return "\"" + inner.replacingQuotes() + "\"" + (lastIsPrefix ? "*" : "")
        case .or(let operands):
            let text = operands.map { $0.rendered(in: .orOperand) }.joined(separator: " OR ")
            return context == .top ? text : "(" + text + ")"
        case .and(let operands):
            var text = ""
            for (index, operand) in operands.enumerated() {
                if case .not(let negated) = operand, index > 0 {
                    text += " NOT " + negated.rendered(in: .notOperand)
                } else {
                    text += (index > 0 ? " AND " : "") + operand.rendered(in: .andOperand)
                }
            }
            return context == .top || context == .orOperand ? text : "(" + text + ")"
        case .not(let negated):
            // Only reachable for a value parse does not make: FTS5 has no unary NOT.
            return "NOT " + negated.rendered(in: .notOperand)
        }
    }

    /// A term as a bare word when it reads back as one, else as a quoted string.
    private static func word(_ term: [UInt8]) -> String {
        let text = String(decoding: term, as: UTF8.self)
        let bare =
            !text.isEmpty && !["AND", "OR", "NOT", "NEAR"].contains(text)
            && text.unicodeScalars.allSatisfy { FoldTable.category($0) == .token }
        return bare ? text : "\"" + text.replacingQuotes() + "\""
    }
}

extension String {
    /// A quote inside an FTS5 string is written twice.
    fileprivate func replacingQuotes() -> String {
        var result = ""
        for character in self {
            result.append(character)
            if character == "\"" { result.append("\"") }
        }
        return result
    }
}

extension TextQuery {
    /// The levels of the tree: 1 for a term, prefix or phrase; one more than the deepest operand
    /// for `and`, `or` and `not`. Computed without recursion, so that a tree of any depth can be
    /// measured before anything walks it.
    ///
    /// ```swift
    /// try TextQuery.parse("a OR (b NOT c)", tokenizer: .v1).depth   // 4: or, and, not, c
    /// ```
    public var depth: Int {
        var deepest = 0
        var pending: [(query: TextQuery, level: Int)] = [(self, 1)]
        while let (query, level) = pending.popLast() {
            deepest = Swift.max(deepest, level)
            switch query {
            case .and(let operands), .or(let operands):
                for operand in operands { pending.append((operand, level + 1)) }
            case .not(let operand): pending.append((operand, level + 1))
            case .term, .prefix, .phrase: break
            }
        }
        return deepest
    }

    /// The deepest tree a search takes (1,024 levels). Searching walks the tree by recursion, so a
    /// deeper one, which a program can build by nesting `.and` in `.and` word after word, would
    /// exhaust the stack; it is refused instead. Every query ``parse(_:tokenizer:)`` accepts is
    /// within it (at most three levels per parenthesis).
    ///
    /// ```swift
    /// TextQuery.maximumDepth   // 1024
    /// ```
    public static let maximumDepth = 1024
}
