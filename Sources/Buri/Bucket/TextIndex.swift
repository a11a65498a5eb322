import BuriText

/// How a `.text` index reads an object: its catalog definition, its tokenizer and the texts.
struct TextIndexSource<T>: Sendable {
    let definition: TextIndexDefinition
    let tokenizer: TextTokenizer
    let texts: @Sendable (T) -> [String]

    /// The object's distinct terms in byte order, each as its encoded tuple with its positions
    /// value.
    func entries(_ object: T) -> [(tuple: [UInt8], value: [UInt8])] {
        TextEntries.entries(of: texts(object), tokenizer: tokenizer, layout: definition.entryLayout)
    }

    /// The object's distinct terms in byte order as encoded tuples, their positions values
    /// appended to `values` in the same order (the write path's form).
    func entries(_ object: T, values: inout EntryValues, interner: TextTupleInterner? = nil) -> [[UInt8]] {
        TextEntries.appendEntries(
            of: texts(object), tokenizer: tokenizer, layout: definition.entryLayout, values: &values,
            interner: interner)
    }
}

extension BuriIndex {
    /// A full-text index over a string property: one entry per distinct folded term (cut by
    /// `TextTokenizer` version 1), whose value lists the term's positions, so that
    /// ``Bucket/search(_:_:)-(String,String)`` answers words, prefixes, phrases and their
    /// combinations. `field` (default: the index name) is the key the property is encoded under,
    /// recorded so that `check` and tools can recompute the entries; `stopWords` are not indexed
    /// (in a phrase each still takes its position).
    ///
    /// ```swift
    /// struct Note: BuriSupport {
    ///     var id: String
    ///     var body: String
    ///     static let buri = BuriSchema<Note>(key: \.id, indexes: [.text("body", \.body)])
    /// }
    /// let hits = try notes.search("body", "crème OR \"apple pie\"")
    /// ```
    public static func text(
        _ name: String, _ keyPath: KeyPath<T, String> & Sendable, field: String? = nil, stopWords: [String] = [],
        version: Int = 0
    ) -> BuriIndex {
        textIndex(name, field: field, stopWords: stopWords, version: version) { [$0[keyPath: keyPath]] }
    }

    /// A full-text index over an optional string property: no entry when `nil`.
    ///
    /// ```swift
    /// .text("summary", \.summary)
    /// ```
    public static func text(
        _ name: String, _ keyPath: KeyPath<T, String?> & Sendable, field: String? = nil, stopWords: [String] = [],
        version: Int = 0
    ) -> BuriIndex {
        textIndex(name, field: field, stopWords: stopWords, version: version) {
            $0[keyPath: keyPath].map { [$0] } ?? []
        }
    }

    /// A full-text index over an array of strings: the elements' terms, with positions that
    /// continue from one element to the next after a gap (`docs/FORMAT.md` §9a), so that a phrase
    /// never matches across two elements.
    ///
    /// ```swift
    /// .text("paragraphs", \.paragraphs)
    /// ```
    public static func text(
        _ name: String, _ keyPath: KeyPath<T, [String]> & Sendable, field: String? = nil, stopWords: [String] = [],
        version: Int = 0
    ) -> BuriIndex {
        textIndex(name, field: field, stopWords: stopWords, version: version) { $0[keyPath: keyPath] }
    }

    private static func textIndex(
        _ name: String, field: String?, stopWords: [String], version: Int,
        texts: @escaping @Sendable (T) -> [String]
    ) -> BuriIndex {
        let tokenizer = TextTokenizer(version: 1, stopWords: stopWords) ?? .v1
        let source = TextIndexSource(
            definition: TextIndexDefinition(tokenizer: Int(tokenizer.version), stopWords: stopWords),
            tokenizer: tokenizer, texts: texts)
        // Components stay [.binary]: a term is one binary element, so every path that handles
        // multi-valued binary indexes (headers, deletes, generations, tools) handles text entries.
        return BuriIndex(
            name: name, components: [.binary], unique: false, multi: true, version: version,
            fields: [(field ?? name, .value)], text: source
        ) { object in
            source.entries(object).map { [IndexValue(encoded: $0.tuple)] }
        }
    }
}
