import BuriText

extension Query {
    /// A full-text condition on a text index (see ``Query/search(_:_:)-(String,String)``).
    public struct TextMatch: Sendable, Hashable {
        /// The text index's name.
        public var index: String
        /// The query as written (SQLite FTS5 syntax), parsed by the index's tokenizer when the
        /// query runs; `nil` when ``parsed`` is given instead.
        public var text: String?
        /// An already parsed query; `nil` when ``text`` is given instead.
        public var parsed: TextQuery?
    }

    /// Objects whose text index `index` matches `text` (SQLite FTS5 syntax: words that must all
    /// occur, `OR`, `NOT`, `"a phrase"`, `prefix*`; see `TextQuery`), as a query condition: it
    /// combines with index conditions (``and(_:)``), ``or(_:)``, ``not(_:)``, sort keys, limits,
    /// pages, counts and live queries like any other.
    ///
    /// Alone, or with only other predicates, results come in object-key order, found from the text
    /// index's entries; after an index condition (or with sort keys) they come in that order, the
    /// text match checked from each candidate's stored terms.
    ///
    /// ```swift
    /// let recent = try notes.objects(.index("year", in: 2020...).and(.search("body", "apple pie")))
    /// let page = try notes.page(.search("body", "tart* NOT pear"), size: 20)
    /// let count = try notes.count(.search("body", "crème").or(.index("tag", equals: "dessert")))
    /// ```
    /// - Throws (when the query runs): ``BuriError/textQuerySyntax(bucket:index:query:message:offset:)``
    ///   for a query that does not parse, ``BuriError/invalidQuery(bucket:index:reason:)`` when
    ///   `index` is not a text index.
    public static func search(_ index: String, _ text: String) -> Query {
        var query = Query(conditions: [])
        query.predicates = [.text(TextMatch(index: index, text: text, parsed: nil))]
        return query
    }

    /// Objects whose text index `index` matches an already parsed query (see
    /// ``search(_:_:)-(String,String)``).
    ///
    /// ```swift
    /// let query = try TextQuery.parse("apple*", tokenizer: .v1)
    /// let keys = try notes.keys(.search("body", query).limit(10))
    /// ```
    public static func search(_ index: String, _ query: TextQuery) -> Query {
        var result = Query(conditions: [])
        result.predicates = [.text(TextMatch(index: index, text: nil, parsed: query))]
        return result
    }
}

extension BucketDescriptor {
    /// The text index called `index`, or a typed error: ``BuriError/unknownIndex(bucket:index:known:)``,
    /// or ``BuriError/invalidQuery(bucket:index:reason:)`` when it is not a text index.
    func textIndexDefinition(_ index: String) throws(BuriError) -> IndexDefinition {
        guard let definition = self.index(named: index) else {
            throw .unknownIndex(bucket: name, index: index, known: indexes.map(\.name))
        }
        guard definition.text != nil else {
            throw .invalidQuery(
                bucket: name, index: index,
                reason: "index '\(index)' is not a text index; search needs an index declared with .text")
        }
        return definition
    }

    /// `text` parsed by the tokenizer of text index `index`.
    func parseTextQuery(_ text: String, index: String) throws(BuriError) -> TextQuery {
        let definition = try textIndexDefinition(index)
        let tokenizer = try definition.textTokenizer(bucket: name)
        do {
            return try TextQuery.parse(text, tokenizer: tokenizer)
        } catch {
            throw .textQuerySyntax(
                bucket: name, index: index, query: text, message: error.message, offset: error.offset)
        }
    }
}
