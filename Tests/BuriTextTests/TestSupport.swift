import BuriText

/// The terms of `text` as strings, in order.
func terms(_ text: String, _ tokenizer: TextTokenizer = .v1) -> [String] {
    tokenizer.tokens(in: text).map { String(decoding: $0.term, as: UTF8.self) }
}

/// The tokens of `text` as `term@position`.
func described(_ text: String, _ tokenizer: TextTokenizer = .v1) -> [String] {
    tokenizer.tokens(in: text).map(\.description)
}

/// UTF-8 of a string, for comparing with terms.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Query building blocks with terms written as strings.
func term(_ text: String) -> TextQuery { .term(utf8(text)) }
func prefix(_ text: String) -> TextQuery { .prefix(utf8(text)) }
func phrase(_ words: String..., lastIsPrefix: Bool = false) -> TextQuery {
    .phrase(words.map(utf8), lastIsPrefix: lastIsPrefix)
}

/// Parses with tokenizer v1 (or `tokenizer`).
func parse(_ query: String, _ tokenizer: TextTokenizer = .v1) throws -> TextQuery {
    try TextQuery.parse(query, tokenizer: tokenizer)
}

/// The error a query fails with, or nil if it parses.
func syntaxError(_ query: String) -> TextQuerySyntaxError? {
    do {
        _ = try TextQuery.parse(query, tokenizer: .v1)
        return nil
    } catch {
        return error
    }
}
