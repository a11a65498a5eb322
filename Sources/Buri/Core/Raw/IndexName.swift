/// An index's name as a dictionary key that compares and hashes the name's UTF-8 bytes.
///
/// Swift's `String` equality is canonical equivalence, so a `[String: …]` dictionary holds
/// `"\u{E9}"` and `"e\u{301}"` (both "é") as one key. Index names are stored as bytes and a
/// bucket may have one index of each, so ``StoredRecord/indexValues`` and
/// ``RawObject/indexValues`` are keyed by `IndexName`, which tells them apart. A string literal
/// is an `IndexName`, so subscripts read as before.
///
/// ```swift
/// let record = try raw.record(forKey: "p1")
/// let ages = record?.indexValues["age"]                 // a literal
/// let tags = record?.indexValues[IndexName(name)]      // a String variable
/// ```
public struct IndexName: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name, exactly as stored.
    public let name: String

    public init(_ name: String) { self.name = name }

    public init(stringLiteral value: String) { name = value }

    public var description: String { name }

    public static func == (a: IndexName, b: IndexName) -> Bool { a.name.hasSameBytes(as: b.name) }

    public func hash(into hasher: inout Hasher) {
        var name = name
        name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Bytewise order of the UTF-8 names.
    public static func < (a: IndexName, b: IndexName) -> Bool { a.name.utf8.lexicographicallyPrecedes(b.name.utf8) }
}

extension Dictionary where Key == IndexName {
    /// The value for the index named `name`, compared as bytes.
    public subscript(_ name: String) -> Value? {
        get { self[IndexName(name)] }
        set { self[IndexName(name)] = newValue }
    }
}
