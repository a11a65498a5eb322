#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// OR, NOT, filters on unindexed fields and explicit sort orders: the parts of a query that
// select or order without driving a range walk by themselves (see docs/PLANNER.md).

extension Query {
    /// Conditions combined with AND, OR and NOT, and checks of decoded objects.
    ///
    /// Built with ``Query/or(_:)``, ``Query/not(_:)`` and ``Query/filter(_:)-method``; each object
    /// satisfies a predicate or not, as Swift's Boolean operators would decide: an object with no
    /// value in an index (a `nil` optional, an empty array) fails every condition on it, so
    /// `.not(.index("locale", equals: "EN"))` includes it.
    public indirect enum Predicate: Sendable, Hashable {
        /// A condition on one index, checked from the object's stored index values.
        case condition(Condition)
        /// All of these (none: always true).
        case all([Predicate])
        /// Any of these (none: always false).
        case any([Predicate])
        /// Not this.
        case not(Predicate)
        /// A check of the decoded object: a scan of the candidates the rest of the query leaves.
        case filter(QueryFilter)
        /// A full-text match on a text index (see ``Query/search(_:_:)-(String,String)``).
        case text(TextMatch)
    }

    /// The query's requirements (its conditions and predicates) as one predicate.
    var requirement: Predicate {
        let parts = conditions.map(Predicate.condition) + predicates
        return parts.count == 1 ? parts[0] : .all(parts)
    }

    /// Objects that match this query or `other` (SQL's `OR`), each once. Its conditions and
    /// `other`'s are combined: this query's order, direction, limit and offset stay, `other`'s are
    /// not used. Without ``order(by:)-(SortKey...)`` the results come in key order (an OR has no
    /// single index to come in the order of).
    ///
    /// ```swift
    /// let query = Query.index("locale", equals: "EN").or(.index("age", in: ..<10))
    /// let englishOrChildren = try people.objects(query)
    /// ```
    public func or(_ other: Query) -> Query {
        var copy = self
        var branches: [Predicate] = []
        for part in [requirement, other.requirement] {
            if case .any(let inner) = part { branches += inner } else { branches.append(part) }
        }
        copy.conditions = []
        copy.predicates = [.any(branches)]
        copy.roots.formUnion(other.roots)
        return copy
    }

    /// Objects that do not match `query`'s conditions (SQL's `NOT`), in key order unless ordered
    /// (combine with ``and(_:)`` to keep another query's order). Objects with no value in an index
    /// do not match a condition on it, so they are in the negation. Negating a query without
    /// conditions (``all``) matches nothing.
    ///
    /// ```swift
    /// let notEnglish = try people.objects(.not(.index("locale", equals: "EN")))
    /// let adultsNotEnglish = try people.objects(.index("age", in: 18...).and(.not(.index("locale", equals: "EN"))))
    /// ```
    public static func not(_ query: Query) -> Query {
        var negated = Query(conditions: [])
        negated.predicates = [.not(query.requirement)]
        negated.roots = query.roots
        return negated
    }

    /// Objects whose index `index` does not equal `values` (SQL's `!=`; for a compound index, whose
    /// leading components are not `values`): ``not(_:)`` of ``index(_:equals:)-(_,IndexValue...)``.
    ///
    /// ```swift
    /// let others = try people.keys(.index("locale", notEquals: "EN"))
    /// ```
    public static func index(_ index: String, notEquals values: IndexValue...) -> Query {
        .not(.index(index, equals: values))
    }

    /// The same query keeping only the objects for which `isIncluded` returns true: each candidate
    /// the indexed conditions leave is decoded as `Root` and checked — a scan of those candidates
    /// (of every object when there is no indexed condition). With a `limit` it stops as soon as
    /// enough objects passed. Pages, counts and live queries apply it like any condition; a
    /// continuation token is bound to the query's indexed conditions, not to the closure's code.
    ///
    /// ```swift
    /// let query = Query.index("age", in: 20...29).filter { (person: Person) in person.name.hasPrefix("A") }
    /// let someAs = try people.objects(query.limit(10))
    /// ```
    /// - Throws (when the query runs): ``BuriError/decodingFailed(bucket:key:type:reason:)`` if
    ///   a candidate is not a `Root`.
    public func filter<Root: Decodable & SendableMetatype>(_ isIncluded: @escaping @Sendable (Root) -> Bool) -> Query {
        var copy = self
        copy.predicates.append(.filter(QueryFilter(Root.self, isIncluded)))
        return copy
    }

    /// Every object for which `isIncluded` returns true: a scan of the whole bucket (see
    /// ``filter(_:)-method``).
    ///
    /// ```swift
    /// let someAs = try people.objects(.filter { (person: Person) in person.name.hasPrefix("A") })
    /// ```
    public static func filter<Root: Decodable & SendableMetatype>(
        _ isIncluded: @escaping @Sendable (Root) -> Bool
    ) -> Query {
        Query.all.filter(isIncluded)
    }

    /// The same query keeping only the objects whose property at `keyPath` passes `isIncluded`,
    /// a scan like ``filter(_:)-method``, for a property no index covers.
    ///
    /// ```swift
    /// let someAs = try people.objects(.where(\Person.age, in: 20...29).filter(\Person.name) { $0.hasPrefix("A") })
    /// ```
    public func filter<Root: Decodable & SendableMetatype, Value>(
        _ keyPath: KeyPath<Root, Value> & Sendable, _ isIncluded: @escaping @Sendable (Value) -> Bool
    ) -> Query {
        filter { (object: Root) in isIncluded(object[keyPath: keyPath]) }
    }

    /// The same query with results ordered by `keys`: by the first key's index, objects with equal
    /// values by the second's, and so on, then by object key (in the first key's direction).
    /// An object with several values in a key's index sorts by its smallest (ascending) or largest
    /// (descending) one; objects with no value in a key's index come after those with one, in both
    /// directions. ``descending()`` reverses every key.
    ///
    /// With a `limit` the walk stops once the limit is reached: ordered by one index, it reads that
    /// index's entries in order and checks the conditions on each, never sorting the matches;
    /// each further key sorts only the objects that tie on the keys before it.
    ///
    /// ```swift
    /// let newest = try people.objects(.index("locale", in: ["EN", "NL"]).order(by: .descending("age")).limit(50))
    /// let sorted = try people.objects(.all.order(by: .ascending("locale"), .descending("age")))
    /// ```
    public func order(by keys: SortKey...) -> Query {
        var copy = self
        copy.sortKeys = keys
        for key in keys { if let root = key.root { copy.roots.insert(root) } }
        return copy
    }

    /// The same query ordered by index `index` (see ``order(by:)-(SortKey...)``).
    ///
    /// ```swift
    /// let oldestFirst = try people.keys(.index("locale", equals: "EN").order(by: "age", descending: true))
    /// ```
    public func order(by index: String, descending: Bool = false) -> Query {
        order(by: SortKey(index: index, descending: descending))
    }

    /// The same query ordered by the index declared over `keyPath` (see ``order(by:)-(SortKey...)``).
    ///
    /// ```swift
    /// let oldestFirst = try people.objects(.where(\Person.locale, equals: "EN").order(by: \Person.age, descending: true))
    /// ```
    public func order<Root: BuriSupport, P: IndexedProperty>(
        by keyPath: KeyPath<Root, P>, descending: Bool = false
    )
        -> Query
    {
        order(by: descending ? .descending(keyPath) : .ascending(keyPath))
    }

    /// The same query with `key` as a further sort key after those it has.
    ///
    /// ```swift
    /// let query = Query.all.order(by: "locale").then(by: .descending("age"))
    /// ```
    public func then(by key: SortKey) -> Query {
        var copy = self
        copy.sortKeys.append(key)
        if let root = key.root { copy.roots.insert(root) }
        return copy
    }
}

/// One key of a query's order: an index and a direction (see ``Query/order(by:)-(SortKey...)``).
///
/// ```swift
/// let query = Query.all.order(by: .ascending("locale"), .descending(\Person.age))
/// ```
public struct SortKey: Sendable, Hashable {
    /// The index whose values order the results.
    public var index: String
    /// Whether larger values come first.
    public var descending: Bool
    /// Set for a key path no declared index covers.
    var unresolved: UnresolvedKeyPath? = nil
    /// The type of the key path it was made from.
    var root: QueryRoot? = nil

    public init(index: String, descending: Bool = false) {
        self.index = index
        self.descending = descending
    }

    /// Smaller values of index `index` first.
    public static func ascending(_ index: String) -> SortKey { SortKey(index: index) }
    /// Larger values of index `index` first.
    public static func descending(_ index: String) -> SortKey { SortKey(index: index, descending: true) }

    /// Smaller values of the index declared over `keyPath` first.
    public static func ascending<Root: BuriSupport, P: IndexedProperty>(_ keyPath: KeyPath<Root, P>) -> SortKey {
        SortKey(keyPath, descending: false)
    }

    /// Larger values of the index declared over `keyPath` first.
    public static func descending<Root: BuriSupport, P: IndexedProperty>(_ keyPath: KeyPath<Root, P>) -> SortKey {
        SortKey(keyPath, descending: true)
    }

    init<Root: BuriSupport, P: IndexedProperty>(_ keyPath: KeyPath<Root, P>, descending: Bool) {
        if let name = Query.indexName(Root.self, keyPath) {
            self.init(index: name, descending: descending)
        } else {
            self.init(index: "", descending: descending)
            unresolved = UnresolvedKeyPath(type: String(describing: Root.self), keyPath: String(describing: keyPath))
        }
        root = QueryRoot(Root.self)
    }
}

/// A check of decoded objects in a query (see ``Query/filter(_:)-method``). Two filters are equal
/// only if they are the same filter: closures cannot be compared.
public final class QueryFilter: Sendable, Hashable {
    /// The type candidates are decoded as (named only in an error).
    let type: Any.Type
    var typeName: String { String(describing: type) }
    /// Decodes a payload and applies the check.
    let check: @Sendable (UnsafeRawBufferPointer) throws -> Bool
    /// The schema version and migrations of the type, when it is a ``BuriSupport`` type: an older
    /// record is upgraded by them before it is decoded (otherwise by the catalog's steps).
    let schema: (version: UInt64, steps: [BuriMigration])?

    init<Root: Decodable & SendableMetatype>(_ type: Root.Type, _ isIncluded: @escaping @Sendable (Root) -> Bool) {
        self.type = Root.self
        let decode = RecordDecoding.decoder(for: Root.self) ?? RecordDecoding.codableDecoder(for: Root.self)
        check = { payload in isIncluded(try decode(payload)) }
        schema = Migrations.schema(of: Root.self)
    }

    /// Whether the object whose payload (of schema version `version`) is `payload` passes, upgrading
    /// an older record first: by the type's own migrations, or for a type that is not the bucket's
    /// (a projection), by the steps `catalog` keeps.
    func passes(
        _ payload: UnsafeRawBufferPointer, version: UInt64, catalog: BucketDescriptor, key: @autoclosure () -> String
    ) throws(BuriError) -> Bool {
        let current = schema?.version ?? catalog.schemaVersion
        // The common case, a record at the current version, builds nothing (not even the key).
        var upgraded: [UInt8]? = nil
        if version != current {
            let steps =
                schema?.steps
                ?? (catalog.migrations ?? []).map { stored -> BuriMigration in
                    if let edits = stored.steps { return .from(Int(clamping: stored.from), edits) }
                    return .from(Int(clamping: stored.from)) { _ in
                        throw BuriError.invalidMigration(
                            reason:
                                "the step from schema version \(stored.from) is written in Swift; filter with the bucket's own type"
                        )
                    }
                }
            upgraded = try Migrations.upgrade(
                payload, from: version, to: current, steps: steps, bucket: catalog.name, key: key())
        }
        do {
            if let upgraded { return try upgraded.withUnsafeBytes { try check($0) } }
            return try check(payload)
        } catch {
            throw .decodingFailed(bucket: catalog.name, key: key(), type: typeName, reason: String(describing: error))
        }
    }

    public static func == (a: QueryFilter, b: QueryFilter) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension Bucket {
    /// The objects matching `query` for which `isIncluded` returns true (a scan of the query's
    /// candidates: see ``Query/filter(_:)-method``).
    ///
    /// ```swift
    /// let someAs = try people.objects(.index("age", in: 20...29), filter: { $0.name.hasPrefix("A") })
    /// ```
    public func objects(
        _ query: Query = .all, filter isIncluded: @escaping @Sendable (T) -> Bool
    )
        throws(BuriError) -> [T] where T: SendableMetatype
    {
        try objects(query.filter(isIncluded))
    }
}

/// A type a query's key paths belong to.
struct QueryRoot: Sendable, Hashable {
    let id: ObjectIdentifier
    let name: String

    init<Root>(_ type: Root.Type) {
        id = ObjectIdentifier(type)
        name = String(describing: type)
    }
}

extension Bucket {
    /// Why `query` cannot run on this bucket: its key paths belong to another type.
    func refusal(of query: Query) -> BuriError? {
        guard let other = query.roots.first(where: { $0.id != ObjectIdentifier(T.self) }) else { return nil }
        return .invalidQuery(
            bucket: name, index: nil,
            reason:
                "the query uses key paths of \(other.name), but this bucket holds \(String(describing: T.self)); query a bucket of \(other.name), or use key paths of \(String(describing: T.self))"
        )
    }

    /// `query`, checked to be over this bucket's type.
    func checked(_ query: Query) throws(BuriError) -> Query {
        if let refusal = refusal(of: query) { throw refusal }
        return query
    }
}
