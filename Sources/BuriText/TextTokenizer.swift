/// Cuts text into the folded terms a full-text index stores, by a fixed, versioned set of rules:
/// an index records the version it was built with, and a query is folded by the same version.
///
/// ```swift
/// let tokenizer = TextTokenizer.v1
/// tokenizer.tokens(in: "Crème Brûlée, don't!").map { String(decoding: $0.term, as: UTF8.self) }
/// // ["creme", "brulee", "don", "t"]
/// tokenizer.forEachToken(in: text) { term, position in index.add(term, at: position) }
/// ```
///
/// ## Version 1
///
/// 1. **Token characters.** A scalar whose general category is a letter (L*), a number (N*), a
///    mark (M*) or private use (Co) is part of a token; every other scalar separates tokens: spaces,
///    punctuation (apostrophes, `_`, periods, hyphens), symbols, emoji, joiners (U+200D), NUL. So
///    `don't` → `don`, `t`; `3.14` → `3`, `14`; `foo_bar` → `foo`, `bar`. Numbers are tokens. These
///    are SQLite FTS5 `unicode61`'s token characters (`L* N* Co`) plus all marks, which unicode61
///    counts only in the Latin diacritic range and which would otherwise split Indic and Thai
///    words apart.
/// 2. **Canonical equivalence.** Each scalar is canonically decomposed (NFD); diacritics (see 4)
///    are dropped and every other mark is kept, in canonical order: a term holds the NFD of what is
///    kept, so strings that are canonically equivalent (NFC and NFD forms, marks in any canonically
///    equivalent order) give the same tokens. `が` (U+304C) and `か` U+3099 both give `か` U+3099.
///    A dropped mark neither starts nor ends a token. A kept mark belongs to the word or the CJK
///    unit before it; with neither before it, it starts a word. Hangul is the exception in
///    direction only: jamo are composed into syllables as NFC composes them (a run reads by
///    syllables, see 6; a kept mark after a jamo blocks its composition, as in NFC), and syllables
///    are kept whole.
/// 3. **Case.** Full Unicode case folding (CaseFolding.txt, statuses C and F) after decomposition,
///    then decomposition again: `ß` and `ẞ` → `ss` (so "Straße" matches "STRASSE" and "strasse"),
///    final `ς` → `σ`, `ﬁ` → `fi`, `µ` → `μ`, `İ` → `i`. ASCII folds A–Z to a–z.
/// 4. **Diacritics.** The marks dropped after decomposition are the diacritics: those of the
///    Combining Diacritical Marks blocks (U+0300–U+036F, U+1AB0–U+1AFF, U+1DC0–U+1DFF,
///    U+20D0–U+20FF, U+FE20–U+FE2F), Hebrew points and cantillation (the marks of U+0591–U+05C7),
///    Arabic harakat and Quranic annotation (the marks of U+0610–U+061A, U+064B–U+065F, U+0670,
///    U+06D6–U+06ED, which include hamza and madda above and below: `أ` → `ا`), and the marks that
///    are default-ignorable (variation selectors, the combining grapheme joiner). So `Ärger` →
///    `arger`, `Crème Brûlée` → `creme`, `brulee`, `phở` → `pho`, `Ελλάδα` → `ελλαδα`,
///    `שָׁלוֹם` → `שלום`, `كَتَبَ` → `كتب`, `葛` U+E0100 → `葛`. Every other mark stays: kana
///    voicing marks (`が` ≠ `か`), Indic vowel signs, viramas and nuktas (`हिन्दी` stays whole),
///    Thai and Lao vowels and tone marks. Letters with a stroke that have no decomposition fold by
///    this table (after case folding, so both cases): `ø`→`o`, `ł`→`l`, `đ`→`d`, `ħ`→`h`, `ı`→`i`,
///    `ŧ`→`t`. `æ`, `œ`, `ð`, `þ` and `ĸ` stay letters of their own.
/// 5. **Terms** are the folded UTF-8 of a token, cut to at most ``maximumTermBytes`` (120) bytes on
///    a scalar boundary: the longest prefix of the folded word, in canonical order, that fits. The
///    index's keys stay bounded whatever the text, and 120 bytes hold any real word. Empty text, or
///    text without token characters, gives no tokens.
/// 6. **Scripts without spaces.** A run of Han ideographs (and 々 〆 〇, compatibility ideographs),
///    Hiragana, Katakana (with ー) and Hangul (syllables and jamo) is emitted as overlapping bigrams
///    of its units: `北京大学` → `北京`, `京大`, `大学`; a run of one unit emits that unit. A unit is
///    one such character with the marks kept after it (`がっこう` → `か`U+3099`っ`, `っこ`, `こう`),
///    cut to 60 bytes like a term. Any other token character next to a run ends it: `iPhone手机`
///    → `iphone`, `手机`.
/// 7. **Positions.** Each token takes the next position from 0: one per word, one per bigram, so a
///    CJK word in a phrase query is a run of consecutive bigrams. A stop word (see
///    ``init(version:stopWords:)``) is not emitted but takes its position, so phrases stay exact.
///
/// On plain Latin-script text (no ß, no stroke letters, no word over 120 bytes) v1 gives the terms
/// of FTS5's `tokenize = "unicode61 remove_diacritics 2"`, so result sets can be compared with
/// FTS5's. Elsewhere v1 differs: it drops the diacritics of 4 in every script (FTS5 strips Latin
/// diacritics only) and keeps other marks inside words (FTS5 splits words at them), folds ß and
/// the stroke letters, and cuts CJK runs into bigrams, which unicode61 keeps as one token per run.
///
/// The Unicode data (categories, decompositions, case folding) is the Swift runtime's; a character
/// that a later Unicode version assigns may therefore tokenize differently on another runtime.
public struct TextTokenizer: Sendable, Hashable {
    /// Version 1 without stop words.
    public static let v1 = TextTokenizer(checkedVersion: 1, stopWords: StopWordList([]))

    /// The versions this build implements.
    public static let supportedVersions: ClosedRange<UInt8> = 1...1

    /// The longest term, in bytes of UTF-8.
    public static let maximumTermBytes = 120

    /// The rules' version, 1.
    public let version: UInt8

    let stopWordList: StopWordList

    /// The stop words, folded.
    public var stopWords: Set<[UInt8]> { stopWordList.terms }

    /// A tokenizer of `version` that skips `stopWords`; nil if this build does not implement it.
    ///
    /// Each stop word is folded like text, and every term it gives becomes a stop word.
    ///
    /// ```swift
    /// let tokenizer = TextTokenizer(version: 1, stopWords: ["the", "a"])
    /// tokenizer?.tokens(in: "The cat")   // [("cat", position 1)]
    /// ```
    public init?(version: UInt8, stopWords: some Sequence<String> = [String]()) {
        guard Self.supportedVersions.contains(version) else { return nil }
        var terms = Set<[UInt8]>()
        for word in stopWords { terms.formUnion(TextTokenizer.v1.foldedTerms(word)) }
        self.init(checkedVersion: version, stopWords: StopWordList(terms))
    }

    private init(checkedVersion: UInt8, stopWords: StopWordList) {
        version = checkedVersion
        stopWordList = stopWords
    }

    /// Calls `body` with each token of `text` in order: its term (folded UTF-8, valid only during
    /// the call) and its position. The fast path: nothing is allocated per token.
    ///
    /// ```swift
    /// TextTokenizer.v1.forEachToken(in: "Hello, World") { term, position in
    ///     print(String(decoding: term, as: UTF8.self), position)   // hello 0, world 1
    /// }
    /// ```
    public func forEachToken(
        in text: String, _ body: (_ term: UnsafeBufferPointer<UInt8>, _ position: UInt32) throws -> Void
    ) rethrows {
        try scan(text, keepingStopWords: false, body)
    }

    /// The tokens of `text`, in order.
    ///
    /// ```swift
    /// TextTokenizer.v1.tokens(in: "Ärger!").first?.term   // Array("arger".utf8)
    /// ```
    public func tokens(in text: String) -> [TextToken] {
        var tokens: [TextToken] = []
        scan(text, keepingStopWords: false) { term, position in
            tokens.append(TextToken(term: Array(term), position: position))
        }
        return tokens
    }

    /// The terms of a query word, folded exactly as text is, stop words included (a query keeps
    /// them in phrases as one-position gaps). A word that gives several terms is a phrase.
    ///
    /// ```swift
    /// TextTokenizer.v1.foldedTerms("Don't")   // [Array("don".utf8), Array("t".utf8)]
    /// ```
    public func foldedTerms(_ word: String) -> [[UInt8]] {
        var terms: [[UInt8]] = []
        scan(word, keepingStopWords: true) { term, _ in terms.append(Array(term)) }
        return terms
    }

    /// Whether `term` (folded) is one of this tokenizer's stop words.
    public func isStopWord(_ term: [UInt8]) -> Bool {
        term.withUnsafeBufferPointer { stopWordList.contains($0) }
    }
}

/// One token: its folded term and its word position in the text.
public struct TextToken: Sendable, Hashable {
    /// The UTF-8 of the folded term (1 to 120 bytes).
    public var term: [UInt8]
    /// The 0-based word position (bigrams of a CJK run take one each).
    public var position: UInt32

    public init(term: [UInt8], position: UInt32) {
        self.term = term
        self.position = position
    }
}

extension TextToken: CustomStringConvertible {
    /// `term@position`, e.g. `creme@0`.
    public var description: String { "\(String(decoding: term, as: UTF8.self))@\(position)" }
}
