import BuriText

/// How a `.text` index reads an object: its catalog definition, its tokenizer and the texts.
/// Not generic: the write path of a `Bucket<T>` runs unspecialized, where every use of a type
/// generic over `T` looks up its metadata, so the texts are read from the object's address.
struct TextIndexSource: Sendable {
    let definition: TextIndexDefinition
    let tokenizer: TextTokenizer
    /// The texts of the object at the address given, which holds an object of the index's type.
    let textsAt: @Sendable (UnsafeRawPointer) -> [String]

    /// The texts of `object` (one, or an array's elements in order).
    @inline(__always)
    func texts<T>(_ object: T) -> [String] {
        withUnsafePointer(to: object) { textsAt(UnsafeRawPointer($0)) }
    }

    /// The object's distinct terms in byte order, each as its encoded tuple with its positions
    /// value.
    func entries<T>(_ object: T) -> [(tuple: [UInt8], value: [UInt8])] {
        TextEntries.entries(of: texts(object), tokenizer: tokenizer, layout: definition.entryLayout)
    }

    /// The object's distinct terms in byte order as encoded tuples, their positions values
    /// appended to `values` in the same order (the write path's form).
    func entries<T>(_ object: T, values: inout EntryValues, interner: TextTupleInterner? = nil) -> [[UInt8]] {
        TextEntries.appendEntries(
            of: texts(object), tokenizer: tokenizer, layout: definition.entryLayout, values: &values,
            interner: interner)
    }

    /// A reader of the `Value` property `keyPath` names, as `textsAt` takes it: straight from its
    /// offset when it is a stored property of a struct (no key path projection per object), else
    /// through the key path.
    static func reader<T, Value>(
        _ keyPath: KeyPath<T, Value> & Sendable, texts: @escaping @Sendable (Value) -> [String]
    ) -> @Sendable (UnsafeRawPointer) -> [String] {
        if let offset = MemoryLayout<T>.offset(of: keyPath) {
            return { texts($0.load(fromByteOffset: offset, as: Value.self)) }
        }
        return { texts($0.assumingMemoryBound(to: T.self).pointee[keyPath: keyPath]) }
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
        textIndex(
            name, field: field, stopWords: stopWords, version: version,
            textsAt: TextIndexSource.reader(keyPath) { [$0] })
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
        textIndex(
            name, field: field, stopWords: stopWords, version: version,
            textsAt: TextIndexSource.reader(keyPath) { $0.map { [$0] } ?? [] })
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
        textIndex(
            name, field: field, stopWords: stopWords, version: version,
            textsAt: TextIndexSource.reader(keyPath) { $0 })
    }

    private static func textIndex(
        _ name: String, field: String?, stopWords: [String], version: Int,
        textsAt: @escaping @Sendable (UnsafeRawPointer) -> [String]
    ) -> BuriIndex {
        let tokenizer = TextTokenizer(version: 1, stopWords: stopWords) ?? .v1
        let source = TextIndexSource(
            definition: TextIndexDefinition(tokenizer: Int(tokenizer.version), stopWords: stopWords),
            tokenizer: tokenizer, textsAt: textsAt)
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
