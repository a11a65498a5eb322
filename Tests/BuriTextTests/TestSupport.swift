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
