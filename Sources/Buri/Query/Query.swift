/// One end of a range over index values.
public enum IndexBound: Sendable, Hashable {
    case unbounded
    case inclusive(IndexValue)
    case exclusive(IndexValue)
}

/// A question to ask a bucket: which objects, in what order, how many.
///
/// A query names an index and a condition on its values — an exact value, a range (inclusive,
/// half-open or one-sided, like Swift's own ranges) or a byte prefix — or no index at all, for every
/// object in key order. Results come in index order: by value, then by key. On a multi-valued
/// index an object whose several values match is returned once, at its first matching value
/// (within one query or page; a later page may return it again at a later value).
///
/// ```swift
/// let adults = try people.keys(.index("age", in: 18...))
/// let english = try people.objects(.index("locale", equals: "EN").limit(10))
/// let byName = try people.objects(.index("name", prefix: "Di").descending())
/// let all = try people.objects(.all)
/// ```
public struct Query: Sendable, Hashable {
    /// A condition on one index.
    public struct Condition: Sendable, Hashable {
        /// The index's name.
        public var index: String
        /// Exact values for the index's leading components (all of them, for an exact match).
        public var leading: [IndexValue]
        /// What the component after `leading` must satisfy, if anything.
        public var rest: Rest

        public enum Rest: Sendable, Hashable {
            /// Nothing more: `leading` alone decides.
            case none
            /// A range over the next component.
            case range(lower: IndexBound, upper: IndexBound)
            /// The next component is a byte string beginning with these bytes.
            case prefix([UInt8])
        }
    }

    /// The conditions, all of which must hold (empty: every object).
    public var conditions: [Condition]
    /// Whether results come in descending order.
    public var isDescending: Bool = false
    /// At most this many results.
    public var limit: Int? = nil
    /// Skip this many results first.
    public var offset: Int = 0
    /// Resume after the result this token was issued for (see ``Page``).
    public var continuation: ContinuationToken? = nil

    init(conditions: [Condition]) { self.conditions = conditions }

    /// Every object of the bucket, in key order.
    public static let all = Query(conditions: [])

    /// Objects whose index `index` equals `value` exactly (for a compound index: whose leading
    /// components equal `values`).
    public static func index(_ index: String, equals values: IndexValue...) -> Query {
        Query(conditions: [Condition(index: index, leading: values, rest: .none)])
    }

    /// Objects whose compound index `index` has leading components `leading` and a next component in `range`.
    public static func index(_ index: String, equals leading: [IndexValue], in range: ClosedRange<IndexValue>) -> Query {
        Query(conditions: [Condition(index: index, leading: leading, rest: .range(lower: .inclusive(range.lowerBound), upper: .inclusive(range.upperBound)))])
    }

    /// Objects whose index value lies between `lower` and `upper`, with explicit bound kinds.
    public static func index(_ index: String, leading: [IndexValue] = [], from lower: IndexBound, to upper: IndexBound) -> Query {
        Query(conditions: [Condition(index: index, leading: leading, rest: .range(lower: lower, upper: upper))])
    }

    /// Objects whose index value lies in `range`, both ends included: `22...24`.
    public static func index(_ index: String, in range: ClosedRange<IndexValue>) -> Query {
        .index(index, from: .inclusive(range.lowerBound), to: .inclusive(range.upperBound))
    }

    /// Objects whose index value lies in the half-open `range`: `22..<25`.
    public static func index(_ index: String, in range: Range<IndexValue>) -> Query {
        .index(index, from: .inclusive(range.lowerBound), to: .exclusive(range.upperBound))
    }

    /// Objects whose index value is at least `range.lowerBound`: `22...`.
    public static func index(_ index: String, in range: PartialRangeFrom<IndexValue>) -> Query {
        .index(index, from: .inclusive(range.lowerBound), to: .unbounded)
    }

    /// Objects whose index value is at most `range.upperBound`: `...24`.
    public static func index(_ index: String, in range: PartialRangeThrough<IndexValue>) -> Query {
        .index(index, from: .unbounded, to: .inclusive(range.upperBound))
    }

    /// Objects whose index value is below `range.upperBound`: `..<25`.
    public static func index(_ index: String, in range: PartialRangeUpTo<IndexValue>) -> Query {
        .index(index, from: .unbounded, to: .exclusive(range.upperBound))
    }

    /// Objects whose binary index value begins with the UTF-8 bytes of `prefix`.
    public static func index(_ index: String, prefix: String) -> Query {
        .index(index, prefixBytes: Array(prefix.utf8))
    }

    /// Objects whose binary index value begins with `prefixBytes`.
    public static func index(_ index: String, leading: [IndexValue] = [], prefixBytes: [UInt8]) -> Query {
        Query(conditions: [Condition(index: index, leading: leading, rest: .prefix(prefixBytes))])
    }

    /// Objects that match this query and `other` too. The first condition drives the scan unless
    /// another one is estimated to be more selective; the others are checked from stored index
    /// values, without decoding objects that do not match.
    public func and(_ other: Query) -> Query {
        var copy = self
        copy.conditions += other.conditions
        return copy
    }

    /// The same query with results in descending order.
    public func descending() -> Query {
        var copy = self
        copy.isDescending = true
        return copy
    }

    /// The same query returning at most `count` results.
    public func limit(_ count: Int) -> Query {
        var copy = self
        copy.limit = max(0, count)
        return copy
    }

    /// The same query skipping its first `count` results.
    public func offset(_ count: Int) -> Query {
        var copy = self
        copy.offset = max(0, count)
        return copy
    }

    /// The same query resuming right after the last result of the page that issued `token`.
    public func after(_ token: ContinuationToken?) -> Query {
        var copy = self
        copy.continuation = token
        return copy
    }
}

/// An opaque position in a query's results: the storage key of the last result returned.
/// Resuming from it continues exactly after that result, even if objects were stored or deleted since.
public struct ContinuationToken: Sendable, Hashable, CustomStringConvertible {
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    /// The token as a printable string (hex), for APIs that pass it to clients.
    public var description: String { key.map { String($0, radix: 16).leftPadded(to: 2) }.joined() }

    /// Parses a token produced by ``description``; `nil` if it is not one.
    public init?(_ string: String) {
        guard string.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = string.startIndex
        while index < string.endIndex {
            let next = string.index(index, offsetBy: 2)
            guard let byte = UInt8(string[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        key = bytes
    }
}

/// One page of results and the token to fetch the next.
///
/// ```swift
/// var page = try people.page(.index("age", in: 20...), size: 100)
/// while let token = page.next {
///     page = try people.page(.index("age", in: 20...).after(token), size: 100)
/// }
/// ```
public struct Page<Element> {
    /// The results of this page.
    public var items: [Element]
    /// Where the next page starts; `nil` when this was the last page.
    public var next: ContinuationToken?
}

extension Page: Sendable where Element: Sendable {}
