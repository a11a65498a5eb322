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
/// object in key order.
///
/// **Order.** Results come in the index order of the query's *first* condition: by value tuple,
/// then by object key, both compared as bytes (`.descending()` reverses it); a query without
/// conditions (an OR or a NOT alone included) comes in key order; sort keys
/// (``order(by:)-(SortKey...)``) choose any index's order instead. Further conditions (``and(_:)``) only filter: whichever index
/// Buri scans to answer fastest, the results, their order, and so what `limit` and `offset` select,
/// are defined by the query alone. On a multi-valued first index an object whose several values
/// match is one result, placed at its first matching entry in that order (its smallest matching
/// value ascending, its largest descending).
///
/// **Paging.** ``Bucket/page(_:size:)`` returns a ``Page`` whose token resumes the walk right after
/// its last result: `limit` caps the whole walk, `offset` is applied once, by the first page, and
/// if nothing is written between pages every result comes exactly once. A page after writes
/// returns the query's current results that lie after the token's position in the order above.
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
        /// Set for a condition by key path that no declared index covers (``Query/where(_:equals:)``).
        var unresolved: UnresolvedKeyPath? = nil
        /// Set for a condition by key path whose value no index can hold (a NaN): why.
        var invalidValue: String? = nil

        public enum Rest: Sendable, Hashable {
            /// Nothing more: `leading` alone decides.
            case none
            /// A range over the next component.
            case range(lower: IndexBound, upper: IndexBound)
            /// The next component is a byte string beginning with these bytes.
            case prefix([UInt8])
            /// The next component equals one of these values (an `IN` list; none: nothing matches).
            case anyOf([IndexValue])
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
    /// Further requirements, all of which must hold too: conditions combined with ``or(_:)``,
    /// ``not(_:)`` and ``filter(_:)-method``. They select; they never decide the order.
    public var predicates: [Predicate] = []
    /// The order of the results when set (see ``order(by:)-(SortKey...)``); empty: the order of the
    /// first condition's index, or key order.
    public var sortKeys: [SortKey] = []
    /// The types whose key paths the query was built from (checked against a typed bucket's type).
    var roots: Set<QueryRoot> = []

    init(conditions: [Condition]) { self.conditions = conditions }

    /// Whether the query selects every object (no condition, predicate, limit, offset or token).
    var isUnrestricted: Bool {
        conditions.isEmpty && predicates.isEmpty && offset == 0 && limit == nil && continuation == nil
    }

    /// Every object of the bucket, in key order.
    public static let all = Query(conditions: [])

    /// Objects whose index `index` equals `value` exactly (for a compound index: whose leading
    /// components equal `values`).
    public static func index(_ index: String, equals values: IndexValue...) -> Query {
        Query(conditions: [Condition(index: index, leading: values, rest: .none)])
    }

    /// Objects whose index `index` equals `values` exactly, given as an array (for a compound index:
    /// whose leading components equal them): the same query, and so the same continuation tokens,
    /// as ``index(_:equals:)-(_,IndexValue...)`` with the values listed.
    ///
    /// ```swift
    /// let leading: [IndexValue] = ["EN", 30]
    /// let english30 = try notes.keys(.index("locale_age", equals: leading))
    /// ```
    public static func index(_ index: String, equals values: [IndexValue]) -> Query {
        Query(conditions: [Condition(index: index, leading: values, rest: .none)])
    }

    /// Objects whose compound index `index` has leading components `leading` and a next component in `range`.
    public static func index(_ index: String, equals leading: [IndexValue], in range: ClosedRange<IndexValue>) -> Query
    {
        Query(conditions: [
            Condition(
                index: index, leading: leading,
                rest: .range(lower: .inclusive(range.lowerBound), upper: .inclusive(range.upperBound)))
        ])
    }

    /// Objects whose index value lies between `lower` and `upper`, with explicit bound kinds.
    public static func index(
        _ index: String, leading: [IndexValue] = [], from lower: IndexBound, to upper: IndexBound
    ) -> Query {
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

    /// Objects whose index value is any of `values` (SQL's `IN`), in the index's order: each
    /// object once, at its first matching entry. No values: nothing matches. For a compound index,
    /// `leading` gives its leading components and `values` the next one's alternatives.
    ///
    /// ```swift
    /// let englishOrDutch = try people.objects(.index("locale", in: ["EN", "NL"]))
    /// ```
    public static func index(_ index: String, leading: [IndexValue] = [], in values: [IndexValue]) -> Query {
        Query(conditions: [Condition(index: index, leading: leading, rest: .anyOf(values))])
    }

    /// Objects whose binary index value begins with the UTF-8 bytes of `prefix`.
    public static func index(_ index: String, prefix: String) -> Query {
        .index(index, prefixBytes: Array(prefix.utf8))
    }

    /// Objects whose binary index value begins with `prefixBytes`.
    public static func index(_ index: String, leading: [IndexValue] = [], prefixBytes: [UInt8]) -> Query {
        Query(conditions: [Condition(index: index, leading: leading, rest: .prefix(prefixBytes))])
    }

    /// Objects that match this query and `other` too, in the order of this query's first condition.
    /// Buri scans the first condition's range, or collects a much more selective condition's few
    /// matches and sorts them into that order; either way the other conditions are checked from
    /// stored index values, without decoding objects that do not match.
    public func and(_ other: Query) -> Query {
        var copy = self
        copy.conditions += other.conditions
        copy.predicates += other.predicates
        copy.roots.formUnion(other.roots)
        return copy
    }

    /// The same query with results in descending order.
    public func descending() -> Query {
        var copy = self
        copy.isDescending = true
        return copy
    }

    /// The same query returning at most `count` results (over all its pages, when paged).
    public func limit(_ count: Int) -> Query {
        var copy = self
        copy.limit = max(0, count)
        return copy
    }

    /// The same query skipping its first `count` results (once, on the first page, when paged).
    public func offset(_ count: Int) -> Query {
        var copy = self
        copy.offset = max(0, count)
        return copy
    }

    /// The same query resuming right after the last result of the page that issued `token`.
    /// The token must come from this query (the same bucket, conditions and direction; limit and
    /// offset may differ), or reading throws ``BuriError/invalidContinuation(bucket:reason:)``.
    public func after(_ token: ContinuationToken?) -> Query {
        var copy = self
        copy.continuation = token
        return copy
    }
}

/// An opaque position in a query's walk: where the last result returned lies in the query's order,
/// plus what it belongs to — the bucket, the index that order comes from, a fingerprint of the
/// query's conditions and direction — and how many results the walk has returned so far (so that
/// `limit` caps the whole walk). Resuming from it continues exactly after that result, even if
/// objects were stored or deleted since. Used with another bucket, index or query it is refused
/// with ``BuriError/invalidContinuation(bucket:reason:)``, never applied to another range.
///
/// Its printable form (lower-case hex of a versioned layout, `docs/FORMAT.md` §11) is the same in
/// every process, so a token can be handed to a client and brought back later.
///
/// ```swift
/// let first = try people.page(query, size: 20)
/// let text = first.next?.description                     // "b1000000010000000203…"
/// let token = try ContinuationToken(parsing: text ?? "")
/// let second = try people.page(query.after(token), size: 20)
/// ```
public struct ContinuationToken: Sendable, Hashable, CustomStringConvertible {
    /// The bucket's id.
    let bucket: UInt32
    /// The id of the index that orders the query (its first condition's), 0 for key order.
    let order: UInt32
    /// ``ContinuationFormat/fingerprint(of:)`` of the query.
    let fingerprint: UInt64
    /// Results returned by the walk up to and including the position.
    let returned: UInt64
    /// The storage key of the last result: an entry key of the ordering index, or a record key.
    let position: [UInt8]
    /// For a query with several sort keys: the last result's sort bytes for the keys after the first.
    let secondary: [UInt8]?

    init(
        bucket: UInt32, order: UInt32, fingerprint: UInt64, returned: UInt64, position: [UInt8],
        secondary: [UInt8]? = nil
    ) {
        self.bucket = bucket
        self.order = order
        self.fingerprint = fingerprint
        self.returned = returned
        self.position = position
        self.secondary = secondary
    }

    /// The token as a printable string (lower-case hex), for APIs that pass it to clients.
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in ContinuationFormat.encode(self) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Parses a token produced by ``description``; `nil` if it is not one.
    public init?(_ string: String) {
        guard let token = try? ContinuationToken(parsing: string) else { return nil }
        self = token
    }

    /// Parses a token produced by ``description``.
    /// - Throws: ``BuriError/invalidContinuation(bucket:reason:)`` saying what is wrong with it.
    public init(parsing string: String) throws(BuriError) {
        var bytes: [UInt8] = []
        var high: UInt8? = nil
        for (offset, character) in string.utf8.enumerated() {
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
            default:
                throw .invalidContinuation(bucket: nil, reason: "byte \(offset) of the text is not a hex digit")
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        if high != nil { throw .invalidContinuation(bucket: nil, reason: "the text has an odd number of hex digits") }
        do {
            self = try ContinuationFormat.decode(bytes)
        } catch {
            throw .invalidContinuation(bucket: nil, reason: error.description)
        }
    }
}

/// One page of results and the token to fetch the next.
///
/// A walk is the first page and every page fetched with the previous page's token: it returns
/// the query's results in order, at most `limit` of them in all, after skipping `offset` once.
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
    /// Where the next page starts; `nil` when the walk is over (no more results, or `limit` reached).
    public var next: ContinuationToken?
}

extension Page: Sendable where Element: Sendable {}
