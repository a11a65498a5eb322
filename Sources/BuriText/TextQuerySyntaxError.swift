/// Why a query does not parse, and where.
///
/// ```swift
/// do { _ = try TextQuery.parse("apple AND", tokenizer: .v1) } catch { print(error) }
/// // AND needs a query on its right
/// // apple AND
/// //       ^
/// ```
public struct TextQuerySyntaxError: Error, Sendable, Hashable {
    /// What is wrong, in a sentence.
    public let message: String
    /// Where: the offset in Characters from the start of the query.
    public let offset: Int
    /// The query as given.
    public let query: String

    public init(message: String, offset: Int, query: String) {
        self.message = message
        self.offset = offset
        self.query = query
    }
}

extension TextQuerySyntaxError: CustomStringConvertible {
    /// The message, then the query on one line with a caret under the offset.
    public var description: String {
        // Whitespace becomes spaces so that a tab or newline in the query keeps the caret aligned.
        let line = String(query.map { $0.isWhitespace ? " " : $0 })
        return message + "\n" + line + "\n" + String(repeating: " ", count: offset) + "^"
    }
}
