/// A type whose whole encoding is one CBOR text string, which ``CBOREncoder`` and ``CBORDecoder``
/// write and read directly instead of through a nested single-value container.
///
/// The bytes are the same either way (the type's `Codable` conformance must encode exactly its
/// ``cborText`` as a single string); this only skips the per-value coder machinery, which costs
/// more than the string itself for small wrappers decoded by the hundred (a playlist's
/// `[Ref<Song>]`).
///
/// ```swift
/// struct Tag: Codable, CBORTextValue {
///     var cborText: String
///     init(cborText: String) { self.cborText = cborText }
///     init(from decoder: any Decoder) throws { cborText = try decoder.singleValueContainer().decode(String.self) }
///     func encode(to encoder: any Encoder) throws {
///         var container = encoder.singleValueContainer()
///         try container.encode(cborText)
///     }
/// }
/// ```
public protocol CBORTextValue {
    /// The text this value encodes as.
    var cborText: String { get }
    /// The value whose encoding is `cborText`.
    init(cborText: String)
}
