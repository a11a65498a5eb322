/// The error thrown by ``CBOREncoder``, ``CBORDecoder``, ``CBORValue`` parsing
/// and the JSON bridge.
///
/// Every error says what went wrong (``kind``), where in the input
/// (``offset``, and ``line``/``column`` for JSON), at which coding path
/// (``codingPath``, e.g. `"person.address.zip"` or `"people[3].name"`) and,
/// where it applies, what was expected and what was found.
///
/// ```swift
/// do {
///     _ = try CBORDecoder().decode(UInt8.self, from: [0x19, 0x01, 0x2C]) // 300
/// } catch let error as CBORError {
///     print(error.kind)   // valueOutOfRange
///     print(error)        // valueOutOfRange (byte 0): the number does not fit; expected UInt8, found 300
///     print(error.offset) // Optional(0)
/// }
/// ```
///
/// ## Topics
/// - ``Kind``
public struct CBORError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The category of a ``CBORError``.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// The input ended in the middle of an item.
        case unexpectedEnd
        /// The bytes are not well-formed CBOR (reserved additional information,
        /// a stray break code, a two-byte simple value below 32, ...).
        case malformed
        /// Well-formed CBOR that this codec does not read (indefinite-length
        /// items in ``CBORDecoder``).
        case unsupported
        /// A length or count claims more bytes than the input has left.
        case lengthTooLarge
        /// Arrays, maps, tags or Codable values nest deeper than the limit.
        case depthLimitExceeded
        /// A text string is not valid UTF-8.
        case invalidUTF8
        /// More bytes follow the single top-level item.
        case trailingBytes
        /// The item has a different type than the one asked for.
        case typeMismatch
        /// A number does not fit the asked-for type (for example 300 as `UInt8`,
        /// or 0.5 as `Int`).
        case valueOutOfRange
        /// A value is `null`/`undefined` (or an unkeyed container is at its end)
        /// where a non-optional value was asked for.
        case valueNotFound
        /// A keyed container has no entry for the asked-for key.
        case keyNotFound
        /// A value could not be encoded, or a container was used in a way the
        /// single-pass encoder cannot honour.
        case invalidValue
        /// The JSON text is not valid RFC 8259 JSON.
        case invalidJSON
    }

    /// What went wrong.
    public var kind: Kind
    /// A human-readable explanation.
    public var message: String
    /// The byte offset in the input (CBOR bytes, or UTF-8 bytes of JSON text), if known.
    public var offset: Int?
    /// The coding path as dotted text (`"person.address.zip"`, `"tags[2]"`); empty at the top level.
    public var codingPath: String
    /// What was expected, if it applies (`"text string"`, `"UInt8"`).
    public var expected: String?
    /// What was found instead, if it applies (`"null"`, `"300"`).
    public var found: String?
    /// The 1-based line of a JSON error.
    public var line: Int?
    /// The 1-based column (in Unicode scalars) of a JSON error.
    public var column: Int?

    /// Creates an error; the codec builds these, but callers may too.
    public init(
        _ kind: Kind, _ message: String, offset: Int? = nil, codingPath: String = "",
        expected: String? = nil, found: String? = nil, line: Int? = nil, column: Int? = nil
    ) {
        self.kind = kind
        self.message = message
        self.offset = offset
        self.codingPath = codingPath
        self.expected = expected
        self.found = found
        self.line = line
        self.column = column
    }

    /// For example `typeMismatch at person.age (byte 17): expected Int, found text string`.
    public var description: String {
        var text = kind.rawValue
        if !codingPath.isEmpty { text += " at \(codingPath)" }
        if let line, let column {
            text += " (line \(line), column \(column))"
        } else if let offset {
            text += " (byte \(offset))"
        }
        text += ": " + message
        if let expected { text += "; expected \(expected)" }
        if let found { text += ", found \(found)" }
        return text
    }

    /// Fills in the coding path unless a deeper level already did.
    func withPath(_ path: [any CodingKey]) -> CBORError {
        guard codingPath.isEmpty, !path.isEmpty else { return self }
        var copy = self
        copy.codingPath = _renderCodingPath(path)
        return copy
    }

    func withPath(_ path: [any CodingKey], appending key: some CodingKey) -> CBORError {
        guard codingPath.isEmpty else { return self }
        var copy = self
        copy.codingPath = _renderCodingPath(path + [key])
        return copy
    }
}

/// A coding key for positions in unkeyed containers.
struct _CBORIndexKey: CodingKey {
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(stringValue: String) { return nil }
    init(intValue: Int) { self.index = intValue }
    var stringValue: String { "Index \(index)" }
    var intValue: Int? { index }
}

/// The key under which `superEncoder()`/`superDecoder()` store their value.
struct _CBORSuperKey: CodingKey {
    init() {}
    init?(stringValue: String) { if stringValue != "super" { return nil } }
    init?(intValue: Int) { return nil }
    var stringValue: String { "super" }
    var intValue: Int? { nil }
}

/// Renders `[person, address, zip]` as `person.address.zip` and unkeyed
/// positions as `[3]` (shortened as ``_renderPath(_:)`` says).
func _renderCodingPath(_ path: [any CodingKey]) -> String {
    _renderPath(
        path.map { key in
            if let index = key as? _CBORIndexKey { return .element(index.index) }
            return .member(key.stringValue)
        })
}

/// One step of a path in an error message: a member name, an array position, or text shown as
/// it is (`{$tag 1}`).
enum _PathStep {
    case member(String)
    case element(Int)
    case verbatim(String)
}

/// The most steps a path in a message shows: a deeper one shows its first and last
/// `_pathEnds` steps around "…(N more)…", so that an error at the 512th level of nesting names
/// where it is in a line, not in 512 repetitions of `[0]`.
let _pathStepsShown = 16
let _pathEnds = 6
/// The most characters of a member name a path shows (a longer one ends with "…").
let _pathNameShown = 64

/// Renders steps as `items[2].price`: a member after another step follows a '.', a position is
/// `[i]`. Paths deeper than ``_pathStepsShown`` and names longer than ``_pathNameShown`` are
/// shortened, saying how much was left out.
func _renderPath(_ steps: [_PathStep]) -> String {
    func render(_ slice: ArraySlice<_PathStep>, into text: inout String, afterGap: Bool = false) {
        for (offset, step) in slice.enumerated() {
            switch step {
            case .element(let index):
                text += "[\(index)]"
            case .verbatim(let shown):
                text += shown
            case .member(let name):
                if !text.isEmpty, !(afterGap && offset == 0) { text += "." }
                text += name.count > _pathNameShown ? name.prefix(_pathNameShown) + "…" : name
            }
        }
    }
    var text = ""
    if steps.count > _pathStepsShown {
        render(steps.prefix(_pathEnds), into: &text)
        text += "…(\(steps.count - 2 * _pathEnds) more levels)…"
        render(steps.suffix(_pathEnds), into: &text, afterGap: true)
    } else {
        render(steps[...], into: &text)
    }
    return text
}
