@testable import Buri

// Full-text search in the model test: ModelItem's `body` (String?, index "body") and `paragraphs`
// ([String], index "paragraphs") are indexed with `.text`. The model answers a search by
// tokenizing the model objects' texts with `TextTokenizer.v1.forEachToken` and matching terms,
// prefixes and phrases on the positions it gets, per text (an array's elements are separate texts:
// a phrase never spans two of them), and combining AND, OR and NOT itself. It reads no entry and
// calls no search code of Buri's; its query-side rules (how a query word folds, that a single CJK
// character is a prefix, that a word without terms is dropped) are TextQuery.parse's documented ones.

/// The terms of one text and their positions, as TextTokenizer v1 gives them.
struct ModelTextTokens {
    var positions: [[UInt8]: Set<UInt32>] = [:]

    init(_ text: String) {
        TextTokenizer.v1.forEachToken(in: text) { term, position in
            positions[Array(term), default: []].insert(position)
        }
    }

    func has(_ term: [UInt8]) -> Bool { positions[term] != nil }

    func hasPrefix(_ prefix: [UInt8]) -> Bool { positions.keys.contains { $0.starts(with: prefix) } }

    /// Whether `terms` stand at consecutive positions (the last one only a prefix when asked).
    func hasPhrase(_ terms: [[UInt8]], lastIsPrefix: Bool) -> Bool {
        guard let first = terms.first else { return false }
        let starts: Set<UInt32>
        if terms.count == 1 && lastIsPrefix {
            starts = positions.filter { $0.key.starts(with: first) }.values.reduce(into: []) { $0.formUnion($1) }
        } else {
            starts = positions[first] ?? []
        }
        return starts.contains { start in
            for (offset, term) in terms.enumerated().dropFirst() {
                let at = start + UInt32(offset)
                if lastIsPrefix && offset == terms.count - 1 {
                    if !positions.contains(where: { $0.key.starts(with: term) && $0.value.contains(at) }) {
                        return false
                    }
                } else if !(positions[term]?.contains(at) ?? false) {
                    return false
                }
            }
            return true
        }
    }
}

/// The folded terms of a query word or quoted string: the tokenizer's, as for any text.
func modelFoldedTerms(_ text: String) -> [[UInt8]] {
    var terms: [[UInt8]] = []
    TextTokenizer.v1.forEachToken(in: text) { term, _ in terms.append(Array(term)) }
    return terms
}

/// Whether a folded term is one CJK character (Han, kana, Hangul) and the marks kept after it
/// (TextTokenizer rule 6's unit: `が` is `か` U+3099): a query word of one is a prefix, as such a
/// character is indexed only inside bigrams. Covers the ranges the test's texts use.
func modelIsSingleCJKUnit(_ term: [UInt8]) -> Bool {
    let scalars = Array(String(decoding: term, as: UTF8.self).unicodeScalars)
    func isCJK(_ value: UInt32) -> Bool {
        (0x3041...0x3098).contains(value) || (0x309D...0x30FF).contains(value) || (0x3400...0x4DBF).contains(value)
            || (0x4E00...0x9FFF).contains(value) || (0xAC00...0xD7A3).contains(value)
            || (0x1100...0x11FF).contains(value)
    }
    func isMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }
    guard let first = scalars.first, isCJK(first.value) else { return false }
    return scalars.dropFirst().allSatisfy(isMark)
}

/// A full-text query as the test builds it, rendered to FTS5 syntax for Buri and evaluated by the model.
indirect enum ModelTextQuery: CustomStringConvertible {
    /// A bare word (`word`, `word*`).
    case word(String, prefix: Bool)
    /// A quoted string of words (`"w1 w2"`, `"w1 w2"*`).
    case quoted([String], prefix: Bool)
    /// Every operand (joined by `AND`, or side by side when not `explicit`).
    case and([ModelTextQuery], explicit: Bool)
    case or([ModelTextQuery])
    /// `left NOT right`: left and not right.
    case not(ModelTextQuery, ModelTextQuery)

    var isLeaf: Bool {
        switch self {
        case .word, .quoted: return true
        default: return false
        }
    }

    /// The query in FTS5 syntax; composite operands in parentheses.
    var description: String {
        func operand(_ query: ModelTextQuery) -> String { query.isLeaf ? query.description : "(\(query))" }
        switch self {
        case .word(let word, let prefix): return word + (prefix ? "*" : "")
        case .quoted(let words, let prefix): return "\"" + words.joined(separator: " ") + "\"" + (prefix ? "*" : "")
        case .and(let operands, let explicit): return operands.map(operand).joined(separator: explicit ? " AND " : " ")
        case .or(let operands): return operands.map(operand).joined(separator: " OR ")
        case .not(let left, let right): return "\(operand(left)) NOT \(operand(right))"
        }
    }

    /// How tightly the query's form binds in FTS5 syntax (tightest first: a word or string, the
    /// implicit AND, NOT, AND, OR).
    var level: Int {
        switch self {
        case .word, .quoted: return 4
        case .and(_, let explicit): return explicit ? 1 : 3
        case .not: return 2
        case .or: return 0
        }
    }

    /// The query with parentheses only where precedence needs them (`a OR b c`, `a b NOT c d`,
    /// `a AND b NOT c`), which the parser must read as the model does.
    var minimal: String {
        func operand(_ query: ModelTextQuery, of parent: Int, right: Bool = false) -> String {
            query.level < parent || (right && query.level == parent) ? "(\(query.minimal))" : query.minimal
        }
        switch self {
        case .word, .quoted: return description
        case .and(let operands, let explicit):
            return operands.map { operand($0, of: level) }.joined(separator: explicit ? " AND " : " ")
        case .or(let operands): return operands.map { operand($0, of: level) }.joined(separator: " OR ")
        case .not(let left, let right):
            return "\(operand(left, of: level)) NOT \(operand(right, of: level, right: true))"
        }
    }

    /// What a leaf means once folded (nil: it folds to no term and the parser drops it).
    enum Leaf {
        case term([UInt8])
        case prefix([UInt8])
        case phrase([[UInt8]], lastIsPrefix: Bool)
    }

    static func leaf(_ text: String, prefix: Bool) -> Leaf? {
        let terms = modelFoldedTerms(text)
        guard !terms.isEmpty else { return nil }
        if terms.count > 1 { return .phrase(terms, lastIsPrefix: prefix) }
        return prefix || modelIsSingleCJKUnit(terms[0]) ? .prefix(terms[0]) : .term(terms[0])
    }

    /// The query compiled for matching: nil when nothing is left to search for (Buri must refuse it
    /// with a syntax error), or `invalid` for a NOT with nothing on its left or a word Buri refuses
    /// (``isRefusedWord(_:)``).
    indirect enum Compiled {
        case leaf(Leaf)
        case all([Compiled])
        case any([Compiled])
        case andNot(Compiled, Compiled)
    }

    struct Invalid: Error {}

    /// Whether `TextQuery.parse` refuses bare word `word` as FTS5 syntax it does not implement: a
    /// colon (a column filter), or a `-` or `^` before the word's letters or digits.
    static func isRefusedWord(_ word: String) -> Bool {
        if word.contains(":") { return true }
        guard let first = word.first, first == "-" || first == "^" else { return false }
        return word.dropFirst().contains { $0.isLetter || $0.isNumber }
    }

    func compiled() throws(Invalid) -> Compiled? {
        switch self {
        case .word(let word, let prefix):
            if Self.isRefusedWord(word) { throw Invalid() }
            return Self.leaf(word, prefix: prefix).map { .leaf($0) }
        case .quoted(let words, let prefix):
            return Self.leaf(words.joined(separator: " "), prefix: prefix).map { .leaf($0) }
        case .and(let operands, _):
            var parts: [Compiled] = []
            for operand in operands { if let part = try operand.compiled() { parts.append(part) } }
            return parts.isEmpty ? nil : (parts.count == 1 ? parts[0] : .all(parts))
        case .or(let operands):
            var parts: [Compiled] = []
            for operand in operands { if let part = try operand.compiled() { parts.append(part) } }
            return parts.isEmpty ? nil : (parts.count == 1 ? parts[0] : .any(parts))
        case .not(let left, let right):
            let positive = try left.compiled()
            guard let negative = try right.compiled() else { return positive }
            guard let positive else { throw Invalid() }
            return .andNot(positive, negative)
        }
    }
}

extension ModelTextQuery.Compiled {
    /// Whether an object whose texts tokenize to `texts` (one per text, each element of an array
    /// its own) matches.
    func matches(_ texts: [ModelTextTokens]) -> Bool {
        switch self {
        case .leaf(.term(let term)): return texts.contains { $0.has(term) }
        case .leaf(.prefix(let prefix)): return texts.contains { $0.hasPrefix(prefix) }
        case .leaf(.phrase(let terms, let lastIsPrefix)):
            return texts.contains { $0.hasPhrase(terms, lastIsPrefix: lastIsPrefix) }
        case .all(let parts): return parts.allSatisfy { $0.matches(texts) }
        case .any(let parts): return parts.contains { $0.matches(texts) }
        case .andNot(let positive, let negative): return positive.matches(texts) && !negative.matches(texts)
        }
    }
}

extension ModelItem {
    /// The text indexes, each with the texts it holds of an item.
    static let textIndexes: [(name: String, texts: @Sendable (ModelItem) -> [String])] = [
        ("body", { $0.body.map { [$0] } ?? [] }),
        ("paragraphs", { $0.paragraphs }),
    ]

    static func texts(_ item: ModelItem, index: String) -> [String] {
        textIndexes.first { $0.name == index }?.texts(item) ?? []
    }

    /// The number of entries text index `index` holds for the item: its distinct terms.
    func textEntryCount(_ index: String) -> Int {
        var terms = Set<[UInt8]>()
        for text in Self.texts(self, index: index) {
            TextTokenizer.v1.forEachToken(in: text) { term, _ in terms.insert(Array(term)) }
        }
        return terms.count
    }

    /// The item's distinct terms in text index `index`, with their positions as the index stores
    /// them (the damage operation uses them to tell a wrong value from the right one).
    func textTerms(_ index: String) -> Set<[UInt8]> {
        var terms = Set<[UInt8]>()
        for text in Self.texts(self, index: index) {
            TextTokenizer.v1.forEachToken(in: text) { term, _ in terms.insert(Array(term)) }
        }
        return terms
    }
}

extension ModelState {
    /// The keys (as bytes, in byte order) of the bucket's objects matching `query` in text index
    /// `index`; nil when Buri must refuse the query as having nothing to search for.
    /// `tokens` tokenizes a text (the run caches them: the same texts are searched again and again).
    func search(
        _ query: ModelTextQuery, index: String, in bucket: String, tokens: (String) -> ModelTextTokens
    ) -> [[UInt8]]? {
        guard let compiled = try? query.compiled() else { return nil }
        return objects(bucket).values.filter { item in
            compiled.matches(ModelItem.texts(item, index: index).map(tokens))
        }.map(\.keyBytes).sorted { modelCompareBytes($0, $1) < 0 }
    }
}

// MARK: Texts and queries drawn at random

extension ModelRun {
    /// Words of the texts: canonically equal but byte-different forms (NFC "\u{E9}t\u{E9}" and NFD),
    /// case and diacritic variants, ß and ligatures, CJK runs, digits, punctuation, words that fold
    /// to nothing, and a few words that occur often (for phrases with repeated words).
    static let textWords: [String] = [
        "apple", "Apple", "APPLE", "pie", "apple-pie", "\u{E9}t\u{E9}", "e\u{301}te\u{301}", "ete", "\u{C4}rger",
        "A\u{308}rger", "arger", "\u{E4}rger", "Stra\u{DF}e", "strasse", "\u{FB01}sh", "fish", "na\u{EF}ve", "naive",
        "\u{5317}\u{4EAC}\u{5927}\u{5B66}", "\u{5927}\u{5B66}", "\u{5317}\u{4EAC}", "\u{5317}", "\u{6771}\u{4EAC}",
        "42", "3.14", "007", "don't", "!!", "...", "\u{1F642}", "a", "b", "ab", "or", "x\u{0}y",
        // Kana with a voicing mark, NFC and NFD; Hangul as syllables and as jamo; dotted I; a word
        // longer than a term (cut to 120 bytes).
        "\u{304C}\u{3063}\u{3053}\u{3046}", "\u{304B}\u{3099}\u{3063}\u{3053}\u{3046}", "\u{304C}",
        "\u{D55C}\u{AD6D}", "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}", "\u{130}stanbul", "istanbul",
        String(repeating: "long", count: 40),
    ]
    static let textSeparators: [String] = [" ", " ", " ", ", ", "-", "  ", "\n", ". ", "\u{3000}", ""]

    func randomText() -> String {
        if chance(0.08) { return "" }
        var words: [String] = []
        for _ in 0..<int(0...5) {
            // Repeats make phrases like "apple apple" and "pie apple pie" mean something.
            if !words.isEmpty, chance(0.25) { words.append(pick(words)) } else { words.append(pick(Self.textWords)) }
        }
        var text = chance(0.1) ? pick(Self.textSeparators) : ""
        for (offset, word) in words.enumerated() {
            if offset > 0 { text += pick(Self.textSeparators) }
            text += word
        }
        return text
    }

    func randomBody() -> String? { chance(0.2) ? nil : randomText() }
    func randomParagraphs() -> [String] { (0..<(chance(0.3) ? int(2...3) : int(0...1))).map { _ in randomText() } }

    /// Query words: the text words (except those that fold to nothing, which come separately) and
    /// prefixes of them.
    static let queryWords: [String] = [
        "apple", "APPLE", "pie", "apple-pie", "\u{E9}t\u{E9}", "e\u{301}te\u{301}", "ete", "\u{C4}rger", "arger",
        "A\u{308}rger", "strasse", "STRASSE", "Stra\u{DF}e", "fish", "\u{FB01}sh", "naive", "na\u{EF}ve",
        "\u{5317}\u{4EAC}\u{5927}\u{5B66}", "\u{5927}\u{5B66}", "\u{5317}\u{4EAC}", "\u{5317}", "\u{5927}", "42",
        "3.14", "007", "don't", "a", "b", "ab", "or", "x", "y", "missing", "\u{304C}\u{3063}\u{3053}\u{3046}",
        "\u{304B}\u{3099}\u{3063}", "\u{304C}", "\u{304B}", "\u{D55C}\u{AD6D}", "\u{1112}\u{1161}\u{11AB}",
        "ISTANBUL", String(repeating: "LONG", count: 35),
    ]
    static let queryPrefixes: [String] = [
        "app", "ap", "a", "p", "e", "\u{E9}", "e\u{301}t", "ar", "\u{C4}r", "str", "stra\u{DF}", "f", "\u{FB01}",
        "na", "\u{5317}", "\u{5317}\u{4EAC}", "\u{5927}", "4", "0", "3", "do", "o", "z", "\u{304C}",
        "\u{304B}\u{3099}\u{3063}", "\u{D55C}", "\u{1112}\u{1161}", "\u{130}s", "longlong",
    ]
    static let droppedWords: [String] = ["!!", "...", "\u{1F642}", "-"]

    /// A word of the texts, sometimes one of a random object's own (so that searches find something).
    func randomQueryWord(_ objects: [ModelItem], _ index: String) -> String {
        if chance(objects.count == 1 ? 0.85 : 0.5), !objects.isEmpty {
            // A chunk between spaces: a bare word of the query is one (any whitespace would split it).
            let words = ModelItem.texts(pick(objects), index: index).flatMap { $0.split(separator: " ") }
            if !words.isEmpty {
                let word = String(pick(words))
                // `+` joins phrases: a word with one would be read as two.
                if !word.contains(where: { $0.isWhitespace || "\"()*+".contains($0) }),
                    !textTokens(word).positions.isEmpty
                {
                    return word
                }
            }
        }
        return pick(Self.queryWords)
    }

    /// A phrase of an object's own terms: consecutive ones of one text (a hit), or the end of one
    /// element of `paragraphs` and the start of the next (which must not match: no phrase spans two).
    func randomPhraseOfObject(_ objects: [ModelItem], _ index: String) -> ModelTextQuery? {
        guard !objects.isEmpty else { return nil }
        let item = pick(objects)
        let texts = ModelItem.texts(item, index: index).map { text in
            var terms: [String] = []
            TextTokenizer.v1.forEachToken(in: text) { term, _ in terms.append(String(decoding: term, as: UTF8.self)) }
            return terms
        }.filter { !$0.isEmpty }
        guard !texts.isEmpty else { return nil }
        if texts.count > 1, chance(0.5) {
            let at = int(0...(texts.count - 2))
            let words = Array(texts[at].suffix(int(1...2))) + Array(texts[at + 1].prefix(int(1...2)))
            tally["text phrase across elements", default: 0] += 1
            return .quoted(words, prefix: chance(0.2))
        }
        let terms = pick(texts)
        let start = int(0...(terms.count - 1))
        let words = Array(terms[start..<min(terms.count, start + int(2...4))])
        return .quoted(words, prefix: chance(0.2))
    }

    func randomTextLeaf(_ objects: [ModelItem], _ index: String) -> ModelTextQuery {
        if chance(objects.count == 1 ? 0.3 : 0.1), let phrase = randomPhraseOfObject(objects, index) { return phrase }
        switch int(0...9) {
        case 0..<4: return .word(randomQueryWord(objects, index), prefix: false)
        case 4..<6:
            // A prefix of a word of the texts, or of an object's own term.
            if chance(0.5), !objects.isEmpty,
                let term = textTokens(ModelItem.texts(pick(objects), index: index).joined(separator: " ")).positions
                    .keys.sorted(by: { modelCompareBytes($0, $1) < 0 }).randomElement(using: &rng)
            {
                let scalars = Array(String(decoding: term, as: UTF8.self).unicodeScalars)
                var prefix = String.UnicodeScalarView()
                prefix.append(contentsOf: scalars.prefix(int(1...3)))
                return .word(String(prefix), prefix: true)
            }
            return .word(pick(Self.queryPrefixes), prefix: true)
        case 6..<9:
            // A phrase, often with a repeated word ("apple apple", "pie apple pie").
            var words = [randomQueryWord(objects, index)]
            for _ in 0..<int(1...3) { words.append(chance(0.35) ? pick(words) : randomQueryWord(objects, index)) }
            return .quoted(words, prefix: chance(0.15))
        default:
            return chance(0.5)
                ? .quoted([randomQueryWord(objects, index)], prefix: chance(0.3))
                : .word(pick(Self.droppedWords), prefix: false)
        }
    }

    /// A random query: a term, two terms (AND), OR, prefix*, NOT, phrases, and nestings of them.
    func randomTextQuery(_ objects: [ModelItem], _ index: String, depth: Int = 0) -> ModelTextQuery {
        if depth >= 2 || chance(depth == 0 ? 0.3 : 0.55) { return randomTextLeaf(objects, index) }
        switch int(0...3) {
        case 0:
            return .and(
                (0..<int(2...3)).map { _ in randomTextQuery(objects, index, depth: depth + 1) }, explicit: chance(0.5))
        case 1: return .or((0..<int(2...3)).map { _ in randomTextQuery(objects, index, depth: depth + 1) })
        default:
            return .not(
                randomTextQuery(objects, index, depth: depth + 1), randomTextQuery(objects, index, depth: depth + 1))
        }
    }

    // MARK: Searching

    /// The tokens of `text`, computed once per text (by its bytes) in a run.
    func textTokens(_ text: String) -> ModelTextTokens {
        let bytes = Array(text.utf8)
        if let known = tokenCache[bytes] { return known }
        let tokens = ModelTextTokens(text)
        tokenCache[bytes] = tokens
        return tokens
    }

    /// One random search of one text index through `bucket`: `searchKeys`, and sometimes `search`
    /// (the objects) and `searchCount`, against what the model says `model` holds.
    func verifySearch(
        _ name: String, _ bucket: Bucket<ModelItem>, _ model: ModelState, _ label: String, index given: String? = nil,
        query wanted: ModelTextQuery? = nil
    ) throws {
        let index = given ?? pick(ModelItem.textIndexes).name
        // Words of one object, half the time, so that ANDs and phrases of them find it.
        let objects = model.sorted(name)
        let query = wanted ?? randomTextQuery(!objects.isEmpty && chance(0.5) ? [pick(objects)] : objects, index)
        let text = chance(0.3) ? query.minimal : query.description
        let what = "\(label)search \(escaped(name)) \(index) \(escaped(text))"
        operations += 1
        guard let expected = model.search(query, index: index, in: name, tokens: textTokens) else {
            note("\(what) → refused: nothing to search for")
            tally["text search refused", default: 0] += 1
            do {
                let got = try bucket.searchKeys(index, text)
                throw fail("\(what): the model has nothing to search for, yet it returned \(got.map(escaped))")
            } catch let mismatch as ModelMismatch {
                throw mismatch
            } catch BuriError.textQuerySyntax {
                return
            } catch {
                throw fail("\(what): expected a textQuerySyntax error, got \(error)")
            }
        }
        if encrypted, query.hasPrefixLeaf {
            // A private text index cannot tell what a term starts with: every form is refused.
            note("\(what) → refused: a prefix on a private index")
            tally["text search refused: prefix on a private index", default: 0] += 1
            try expectPrivateRefusal(what) { _ = try bucket.searchKeys(index, text) }
            try expectPrivateRefusal("\(what) as a query") { _ = try bucket.keys(.search(index, text)) }
            try expectPrivateRefusal("\(what) ranked") { _ = try bucket.rankedSearchKeys(index, text, limit: 3) }
            return
        }
        note("\(what) → \(expected.count) keys")
        tally[
            expected.isEmpty
                ? (objects.isEmpty ? "text search (empty bucket)" : "text search (no hits)") : "text search (hits)",
            default: 0] += 1
        // Sometimes the query parsed first (TextQuery), as an app that keeps it does.
        let parsed = chance(0.2) ? try read("\(what) parse") { try TextQuery.parse(text, tokenizer: .v1) } : nil
        let keys = try read(what) {
            try parsed.map { try bucket.searchKeys(index, $0) } ?? bucket.searchKeys(index, text)
        }
        if keys.map({ Array($0.utf8) }) != expected {
            // The objects the two disagree on, with their texts and the model's terms.
            let differing = Set(keys.map { Array($0.utf8) }).symmetricDifference(expected)
            let texts = differing.sorted { modelCompareBytes($0, $1) < 0 }.map { key in
                guard let item = model.objects(name)[key] else { return "\(ModelValue.bytes(key)): not stored" }
                let texts = ModelItem.texts(item, index: index)
                let terms = texts.map {
                    textTokens($0).positions.map { "\(ModelValue.bytes($0.key))@\($0.value.sorted())" }
                }
                return "\(ModelValue.bytes(key)): \(texts.map(escaped)) terms \(terms)"
            }
            throw fail(
                "\(what): searchKeys returned [\(keys.map(escaped).joined(separator: ", "))], the model expects [\(expected.map { escaped(String(decoding: $0, as: UTF8.self)) }.joined(separator: ", "))]\n  \(texts.joined(separator: "\n  "))"
            )
        }
        if chance(0.4) {
            let count = try read("\(what) count") { try bucket.searchCount(index, text) }
            if count != expected.count {
                throw fail("\(what): searchCount is \(count), the model says \(expected.count)")
            }
        }
        if chance(0.3) {
            let objects = try read("\(what) objects") { try bucket.search(index, text) }
            let items = model.objects(name)
            try compare(objects, expected.compactMap { items[$0] }, "\(what) objects")
        }
        try verifyTextQuery(text, index: index, bucket, expected: expected, items: model.objects(name), what: what)
        try verifyRanking(text, index: index, bucket, expected: expected, items: model.objects(name), what: what)
    }

    /// The same search as a query condition: alone (key order, paged), and with a condition on
    /// the `group` index (in its order), against the model's matches.
    func verifyTextQuery(
        _ text: String, index: String, _ bucket: Bucket<ModelItem>, expected: [[UInt8]],
        items: [[UInt8]: ModelItem], what: String
    ) throws {
        let search = Query.search(index, text)
        if chance(0.3) {
            let keys = try read("\(what) as a query") { try bucket.keys(search) }
            if keys.map({ Array($0.utf8) }) != expected {
                throw fail("\(what): keys(.search) gave \(keys.map(escaped))")
            }
            let count = try read("\(what) counted as a query") { try bucket.count(search) }
            if count != expected.count { throw fail("\(what): count(.search) is \(count), not \(expected.count)") }
        }
        if chance(0.3), let some = expected.first.flatMap({ items[$0] }) {
            let group = some.group
            let wanted = expected.filter { items[$0]?.group.utf8.elementsEqual(group.utf8) == true }
            let keys = try read("\(what) and group") {
                try bucket.keys(search.and(.index("group", equals: .init(group))))
            }
            if keys.map({ Array($0.utf8) }) != wanted {
                throw fail(
                    "\(what) and group \(escaped(group)): gave \(keys.map(escaped)), the model says \(wanted.count) keys"
                )
            }
        }
        if chance(0.2) {
            tally["text search paged", default: 0] += 1
            let size = int(1...3)
            var paged: [[UInt8]] = []
            var page = try read("\(what) page") { try bucket.page(search, size: size) }
            while true {
                paged += page.items.map { Array($0.id.utf8) }
                guard let next = page.next, paged.count <= expected.count else { break }
                page = try read("\(what) next page") { try bucket.page(search.after(next), size: size) }
            }
            if paged != expected {
                throw fail("\(what): pages of \(size) gave \(paged.count) keys, not \(expected.count)")
            }
        }
    }

    /// BM25 ranking of the same search: every match ranked once, best first; the top k (found
    /// with pruning) is the first k of the whole ranking.
    func verifyRanking(
        _ text: String, index: String, _ bucket: Bucket<ModelItem>, expected: [[UInt8]],
        items: [[UInt8]: ModelItem], what: String
    ) throws {
        guard chance(0.3) else { return }
        tally["text ranking", default: 0] += 1
        let all = try read("\(what) ranked") { try bucket.rankedSearchKeys(index, text, limit: Int.max) }
        if Set(all.map { Array($0.key.utf8) }) != Set(expected) || all.count != expected.count {
            throw fail("\(what): ranked \(all.count) keys, the model matches \(expected.count)")
        }
        for (a, b) in zip(all, all.dropFirst()) where a.score < b.score || !(a.score > 0) {
            throw fail(
                "\(what): ranking out of order at \(escaped(a.key)) (\(a.score)) and \(escaped(b.key)) (\(b.score))")
        }
        let k = int(1...4)
        let top = try read("\(what) top \(k)") { try bucket.rankedSearchKeys(index, text, limit: k) }
        if top.map(\.key).map({ Array($0.utf8) }) != all.prefix(k).map({ Array($0.key.utf8) }) {
            throw fail(
                "\(what): top \(k) is \(top.map(\.key).map(escaped)), the whole ranking begins \(all.prefix(k).map(\.key).map(escaped))"
            )
        }
        // With a condition: the whole ranking's objects in that group, the first k of them.
        if let some = expected.first.flatMap({ items[$0] }) {
            let group = some.group
            let wanted = all.filter { items[Array($0.key.utf8)]?.group.utf8.elementsEqual(group.utf8) == true }
                .prefix(k).map { Array($0.key.utf8) }
            let got = try read("\(what) top \(k) of group") {
                try bucket.rankedSearchKeys(index, text, limit: k, where: .index("group", equals: .init(group)))
            }
            if got.map({ Array($0.key.utf8) }) != wanted {
                throw fail("\(what): top \(k) of group \(escaped(group)) is \(got.map(\.key).map(escaped))")
            }
        }
    }

    // MARK: Damage to text entries

    /// Damages one text entry of an object under the engine's feet (deletes it, gives it a wrong or
    /// malformed positions value, or adds an entry for a term the object lacks); `check` must find
    /// it, a search of a malformed entry's term must fail typed rather than answer short,
    /// `check(repair: true)` must mend it, and then searches must match the model again.
    /// An object (bucket, text index, term) whose posting of the term is in a segment.
    func segmentedPosting() throws -> (String, String, ModelItem, [UInt8])? {
        let snapshot = try read("a snapshot") { try db.engine.snapshot() }
        for name in Self.bucketNames {
            guard let info = try read("bucket info", { try db.bucketInfo(named: name) }) else { continue }
            for index in ModelItem.textIndexes.map(\.name) {
                guard let definition = info.index(named: index) else { continue }
                let reader = GroupedPostingsReader(
                    snapshot, textPrefixes: [Keyspace.indexPrefix(bucket: info.id, index: definition.id)])
                for item in model.sorted(name) {
                    for term in item.textTerms(index).sorted(by: { modelCompareBytes($0, $1) < 0 }) {
                        let key = Keyspace.indexEntryKey(
                            bucket: info.id, index: definition.id, tuple: IndexValue(bytes: term).encoded,
                            objectKey: item.id)
                        if try read("a segment posting", { try reader.segmentStamp(ofPosting: key) }) != nil {
                            return (name, index, item, term)
                        }
                    }
                }
            }
        }
        return nil
    }

    func damageTextEntry(kind given: Int? = nil) throws {
        // A bucket and text index holding some term (none only when no object has any text).
        let places = Self.bucketNames.flatMap { name in ModelItem.textIndexes.map { (name, $0.name) } }.filter {
            name, index in model.sorted(name).contains { !$0.textTerms(index).isEmpty }
        }
        guard !places.isEmpty else { return }
        var kind = given ?? int(0...5)
        var (name, index) = pick(places)
        var item = pick(model.sorted(name).filter { !$0.textTerms(index).isEmpty })
        var terms = item.textTerms(index).sorted { modelCompareBytes($0, $1) < 0 }
        var term = pick(terms)
        // A segment's damage: an object and term whose posting is in a segment, if any is.
        if kind == 5, let found = try segmentedPosting() {
            (name, index, item, term) = found
            terms = item.textTerms(index).sorted { modelCompareBytes($0, $1) < 0 }
        }
        let extra = Array("zz-not-a-term".utf8)
        operations += 1
        try read("damaging a text entry") {
            guard let info = try db.bucketInfo(named: name), let definition = info.index(named: index) else {
                throw fail("no bucket info for \(escaped(name)) index \(index)")
            }
            let tuple = kind == 3 ? extra : term
            // The last kind: an entry for an object that is not stored.
            let owner = kind == 4 ? "no such object" : item.id
            let key = Keyspace.indexEntryKey(
                bucket: info.id, index: definition.id, tuple: IndexValue(bytes: tuple).encoded, objectKey: owner)
            let batch = db.engine.makeBatch()
            // Where the object's posting is: a single entry, or in one of the term's segments
            // (format 13), which a tombstone cancels and whose bytes can be damaged.
            let prefix = Keyspace.indexPrefix(bucket: info.id, index: definition.id)
            let snapshot = try db.engine.snapshot()
            let postings = GroupedPostingsReader(snapshot, textPrefixes: [prefix])
            let segmentPrefix = prefix + [GroupedPostingKeys.segmentTag] + IndexValue(bytes: term).encoded
            var segment: (key: [UInt8], value: [UInt8])? = nil
            let segments = try snapshot.cursor(in: .prefix(segmentPrefix))
            while segment == nil, try segments.next() {
                if segments.key.count == segmentPrefix.count + 1 + TextSegment.stampLength {
                    segment = (segments.key, try segments.value)
                }
            }
            if kind == 5, segment == nil { kind = 2 }
            switch kind {
            case 0:
                if let stamp = try postings.segmentStamp(ofPosting: key),
                    let tombstone = GroupedPostingsReader.tombstoneKey(ofPosting: key, stamp: stamp, in: postings)
                {
                    batch.put(tombstone, [])
                } else {
                    batch.delete(key)
                }
            case 1: batch.put(key, TextEntries.encodePositions([999_999]))
            case 2: batch.put(key, [7])
            case 5: if let segment { batch.put(segment.key, Array(segment.value.dropLast(3))) }
            default: batch.put(key, TextEntries.encodePositions([0]))
            }
            try db.engine.commit(batch, conditions: nil, sync: true)
            let kinds = ["deleted", "wrong positions", "malformed", "extra term", "no object", "segment truncated"]
            note(
                "damage text entry \(kinds[kind]) of \(escaped(owner)) in \(escaped(name)) \(index), term \(ModelValue.bytes(tuple))"
            )
            tally["text entry damaged", default: 0] += 1
            tally["text entry damaged: \(kinds[kind])", default: 0] += 1
            // (A truncated segment may still be answered from this process's cache of the
            // segments it read: complete, from the bytes as they were. `check` reads the files.)
            if kind == 2 {
                // A malformed value is a corruption error, never a shorter result.
                let bucket = try db.bucket(ModelItem.self, named: name)
                for query in [TextQuery.term(term), .prefix(Array(term.prefix(1)))] {
                    do {
                        let got =
                            try chance(0.5) ? bucket.searchCount(index, query) : bucket.searchKeys(index, query).count
                        throw fail("a search \(query) over a malformed entry answered \(got) keys instead of failing")
                    } catch BuriError.corruption {
                    } catch let mismatch as ModelMismatch {
                        throw mismatch
                    }
                }
            }
        }
        let report = try read("check after damage") { try db.check() }
        if report.problems.isEmpty { throw fail("check found no problem after damaging a text entry") }
        let repaired = try read("check(repair: true)") { try db.check(repair: true) }
        if !repaired.problems.allSatisfy(\.repaired) {
            throw fail("check(repair: true) left problems: \(repaired.problems.filter { !$0.repaired })")
        }
        try checkClean()
        let bucket = try read("opening \(name)") { try self.bucket(name) }
        // The damaged term (a term, and as a phrase with the object's next term), then random ones.
        let word = String(decoding: term, as: UTF8.self)
        try verifySearch(name, bucket, model, "after repair: ", index: index, query: .word(word, prefix: false))
        try verifySearch(
            name, bucket, model, "after repair: ", index: index,
            query: .quoted(
                [word, String(decoding: pick(terms), as: UTF8.self)], prefix: false))
        let stray = try read("search for the extra term") { try bucket.searchKeys(index, TextQuery.term(extra)) }
        if !stray.isEmpty { throw fail("after repair, the extra term still finds \(stray.map(escaped))") }
        for _ in 0..<2 { try verifySearch(name, bucket, model, "after repair: ") }
        try verifyBucket(name, bucket, model, "after repair")
    }
}

extension ModelTextQuery {
    /// Whether the query, as Buri parses it, holds a word prefix (`app*`, a phrase ending in one, a
    /// single CJK unit): what a private text index refuses.
    var hasPrefixLeaf: Bool {
        guard case .some(.some(let compiled)) = try? compiled() else { return false }
        return Self.hasPrefix(compiled)
    }

    private static func hasPrefix(_ compiled: Compiled) -> Bool {
        switch compiled {
        case .leaf(.prefix): true
        case .leaf(.phrase(_, let lastIsPrefix)): lastIsPrefix
        case .leaf(.term): false
        case .all(let parts), .any(let parts): parts.contains(where: hasPrefix)
        case .andNot(let left, let right): hasPrefix(left) || hasPrefix(right)
        }
    }
}

extension ModelRun {
    /// Runs `body`, which must fail with `privateIndex` (and change nothing: it only reads).
    func expectPrivateRefusal(_ what: String, _ body: () throws -> Void) throws {
        operations += 1
        do {
            try body()
        } catch BuriError.privateIndex {
            return
        } catch {
            throw fail("\(what): expected a privateIndex refusal, got \(error)")
        }
        throw fail("\(what): a private index answered what its tokens cannot")
    }

    /// One query a private index must refuse: a range, a prefix, an order or a grouping by it.
    func privateRefusal() throws {
        let name = pick(Self.bucketNames)
        let bucket = try bucket(name)
        let index = pick(privateIndexes.sorted())
        let form = int(0...3)
        let what = "private refusal \(escaped(name)) \(index) form \(form)"
        note(what)
        tally["private index refusal", default: 0] += 1
        try expectPrivateRefusal(what) {
            switch form {
            case 0: _ = try bucket.keys(.index(index, in: IndexValue("a")...IndexValue("z")))
            case 1: _ = try bucket.keys(.index(index, prefix: "a"))
            case 2: _ = try bucket.keys(Query.all.order(by: index))
            default: _ = try bucket.aggregate("real", groupedBy: index)
            }
        }
    }
}
