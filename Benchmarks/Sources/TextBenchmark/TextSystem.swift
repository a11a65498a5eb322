/// One full-text engine under test: builds its index over a corpus, then answers queries in
/// FTS5's syntax (the common forms, which Buri's `TextQuery` parses the same way).
protocol TextSystem: AnyObject {
    static var name: String { get }
    /// Stores every document of `corpus` and indexes it (timed as the build).
    func build(_ corpus: Corpus) throws
    /// The bytes the system's files take after the build.
    func size() throws -> Int
    /// The keys of every matching document (any order).
    func keys(matching query: String) throws -> [String]
    /// The keys of the `limit` best matches by BM25, best first; `nil` where ranking is not built.
    func ranked(matching query: String, limit: Int) throws -> [String]?
    /// Every matching document, key and text (what an app shows).
    func documents(matching query: String) throws -> [(key: String, text: String)]
}
