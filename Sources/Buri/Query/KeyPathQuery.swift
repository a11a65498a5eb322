#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A value a query can compare with an index: every type an index can be declared over
/// (integers, floating-point numbers, `Date`, `String`, `Substring`, `Data`, `UUID`).
///
/// ```swift
/// let adults = try people.objects(where: \.age, in: 18...)
/// ```
public protocol IndexQueryValue: Sendable {
    /// The index value this value is stored and queried as (a `Date` as seconds since 1970).
    func queryIndexValue() throws(BuriError) -> IndexValue
}

extension IndexQueryValue where Self: NumericIndexable {
    public func queryIndexValue() throws(BuriError) -> IndexValue { try numericIndexValue() }
}

extension IndexQueryValue where Self: BinaryIndexable {
    public func queryIndexValue() throws(BuriError) -> IndexValue { binaryIndexValue }
}

/// A property type an index can be declared over, and the type of the values a query compares it
/// with: a value itself, an optional (objects where it is `nil` have no entry, so no query finds
/// them), or an array (a multi-valued index: an object matches if any element does).
///
/// ```swift
/// let tagged = try notes.objects(where: \.tags, equals: "red")   // tags: [String]
/// ```
public protocol IndexedProperty {
    /// What a query over the property compares it with.
    associatedtype IndexedValue: IndexQueryValue
}

extension Int: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Int }
extension Int8: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Int8 }
extension Int16: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Int16 }
extension Int32: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Int32 }
extension Int64: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Int64 }
extension UInt: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UInt }
extension UInt8: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UInt8 }
extension UInt16: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UInt16 }
extension UInt32: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UInt32 }
extension UInt64: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UInt64 }
extension Double: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Double }
extension Float: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Float }
extension Date: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Date }
extension String: IndexQueryValue, IndexedProperty { public typealias IndexedValue = String }
extension Substring: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Substring }
extension Data: IndexQueryValue, IndexedProperty { public typealias IndexedValue = Data }
extension UUID: IndexQueryValue, IndexedProperty { public typealias IndexedValue = UUID }
extension Optional: IndexedProperty where Wrapped: IndexQueryValue { public typealias IndexedValue = Wrapped }
extension Array: IndexedProperty where Element: IndexQueryValue { public typealias IndexedValue = Element }

/// A query condition by key path that no declared index covers: kept in the query and thrown as
/// ``BuriError/unindexedKeyPath(type:keyPath:)`` when the query runs.
struct UnresolvedKeyPath: Sendable, Hashable {
    var type: String
    var keyPath: String
}

extension Query {
    /// The condition on the single-component index `Root` declares over `keyPath`, or one that
    /// fails with ``BuriError/unindexedKeyPath(type:keyPath:)`` when the query runs.
    /// A query of `conditions` made from key paths of `Root`.
    init<Root>(root: Root.Type, conditions: [Condition]) {
        self.init(conditions: conditions)
        roots = [QueryRoot(root)]
    }

    /// The name of the single-component index `Root` declares over `keyPath`, if any.
    static func indexName<Root: BuriSupport>(_ root: Root.Type, _ keyPath: AnyKeyPath) -> String? {
        Root.buri.indexes.first { index in
            guard let declared = index.keyPath else { return false }
            return (declared as AnyKeyPath) == keyPath
        }?.name
    }

    static func condition<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, _ make: (String) throws(BuriError) -> Condition
    ) -> Condition {
        guard let declared = indexName(Root.self, keyPath) else {
            var condition = Condition(index: "", leading: [], rest: .none)
            condition.unresolved = UnresolvedKeyPath(
                type: String(describing: Root.self), keyPath: String(describing: keyPath))
            return condition
        }
        do {
            return try make(declared)
        } catch {
            var condition = Condition(index: declared, leading: [], rest: .none)
            condition.invalidValue = error.description
            return condition
        }
    }

    static func keyPathRange<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, from lower: P.IndexedValue?, inclusive lowerInclusive: Bool,
        to upper: P.IndexedValue?, inclusive upperInclusive: Bool
    ) -> Query {
        Query(
            root: Root.self,
            conditions: [
                condition(keyPath) { name throws(BuriError) in
                    let low: IndexBound =
                        try lower.map { value throws(BuriError) in
                            let encoded = try value.queryIndexValue()
                            return lowerInclusive ? .inclusive(encoded) : .exclusive(encoded)
                        } ?? .unbounded
                    let high: IndexBound =
                        try upper.map { value throws(BuriError) in
                            let encoded = try value.queryIndexValue()
                            return upperInclusive ? .inclusive(encoded) : .exclusive(encoded)
                        } ?? .unbounded
                    return Condition(index: name, leading: [], rest: .range(lower: low, upper: high))
                }
            ])
    }

    /// Objects whose property at `keyPath` equals `value`, through the index `Root` declares over
    /// it (an array property: any element equals it). A key path no index covers makes the query
    /// throw ``BuriError/unindexedKeyPath(type:keyPath:)`` when it runs.
    ///
    /// ```swift
    /// let english = try people.objects(.where(\Person.locale, equals: "EN"))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, equals value: P.IndexedValue
    ) -> Query {
        Query(
            root: Root.self,
            conditions: [
                condition(keyPath) { name throws(BuriError) in
                    Condition(index: name, leading: [try value.queryIndexValue()], rest: .none)
                }
            ])
    }

    /// Objects whose property at `keyPath` does not equal `value` (Swift's `!=`): objects where it
    /// is `nil` (no index entry) are included; an array property: no element equals it.
    ///
    /// ```swift
    /// let notEnglish = try people.objects(.where(\Person.locale, notEquals: "EN"))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, notEquals value: P.IndexedValue
    ) -> Query {
        .not(.where(keyPath, equals: value))
    }

    /// Objects whose property at `keyPath` lies in `range`, both ends included: `20...29`, or a
    /// range of `Date`s, `Double`s or `String`s.
    ///
    /// ```swift
    /// let twenties = try people.objects(.where(\Person.age, in: 20...29))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in range: ClosedRange<P.IndexedValue>
    ) -> Query where P.IndexedValue: Comparable {
        keyPathRange(keyPath, from: range.lowerBound, inclusive: true, to: range.upperBound, inclusive: true)
    }

    /// Objects whose property at `keyPath` lies in the half-open `range`: `start..<end`.
    ///
    /// ```swift
    /// let dueToday = try tasks.objects(.where(\Task.due, in: midnight..<tomorrow))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in range: Range<P.IndexedValue>
    ) -> Query where P.IndexedValue: Comparable {
        keyPathRange(keyPath, from: range.lowerBound, inclusive: true, to: range.upperBound, inclusive: false)
    }

    /// Objects whose property at `keyPath` is at least `range.lowerBound`: `18...`.
    ///
    /// ```swift
    /// let adults = try people.objects(.where(\Person.age, in: 18...))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in range: PartialRangeFrom<P.IndexedValue>
    ) -> Query where P.IndexedValue: Comparable {
        keyPathRange(keyPath, from: range.lowerBound, inclusive: true, to: nil, inclusive: false)
    }

    /// Objects whose property at `keyPath` is at most `range.upperBound`: `...17`.
    ///
    /// ```swift
    /// let minors = try people.objects(.where(\Person.age, in: ...17))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in range: PartialRangeThrough<P.IndexedValue>
    ) -> Query where P.IndexedValue: Comparable {
        keyPathRange(keyPath, from: nil, inclusive: false, to: range.upperBound, inclusive: true)
    }

    /// Objects whose property at `keyPath` is below `range.upperBound`: `..<18`.
    ///
    /// ```swift
    /// let minors = try people.objects(.where(\Person.age, in: ..<18))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in range: PartialRangeUpTo<P.IndexedValue>
    ) -> Query where P.IndexedValue: Comparable {
        keyPathRange(keyPath, from: nil, inclusive: false, to: range.upperBound, inclusive: false)
    }

    /// Objects whose property at `keyPath` equals any of `values` (SQL's `IN`): each object once,
    /// in the index's order. No values: nothing matches.
    ///
    /// ```swift
    /// let englishOrDutch = try people.objects(.where(\Person.locale, in: ["EN", "NL"]))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, in values: [P.IndexedValue]
    ) -> Query {
        Query(
            root: Root.self,
            conditions: [
                condition(keyPath) { name throws(BuriError) in
                    var encoded: [IndexValue] = []
                    encoded.reserveCapacity(values.count)
                    for value in values { encoded.append(try value.queryIndexValue()) }
                    return Condition(index: name, leading: [], rest: .anyOf(encoded))
                }
            ])
    }

    /// Objects whose string property at `keyPath` begins with `prefix` (compared as UTF-8 bytes).
    ///
    /// ```swift
    /// let dirks = try people.objects(.where(\Person.name, prefix: "Di"))
    /// ```
    public static func `where`<Root: BuriSupport, P: IndexedProperty>(
        _ keyPath: KeyPath<Root, P>, prefix: String
    ) -> Query where P.IndexedValue == String {
        Query(
            root: Root.self,
            conditions: [
                condition(keyPath) { name throws(BuriError) in
                    Condition(index: name, leading: [], rest: .prefix(Array(prefix.utf8)))
                }
            ])
    }
}

extension Bucket {
    /// The objects whose property at `keyPath` equals `value`, through the index declared over it
    /// (see ``Query/where(_:equals:)``), in that index's order.
    ///
    /// ```swift
    /// let english = try people.objects(where: \.locale, equals: "EN")
    /// ```
    /// - Throws: ``BuriError/unindexedKeyPath(type:keyPath:)`` if no index covers `keyPath`.
    public func objects<P: IndexedProperty>(
        where keyPath: KeyPath<T, P>, equals value: P.IndexedValue
    )
        throws(BuriError) -> [T]
    {
        try objects(.where(keyPath, equals: value))
    }

    /// The objects whose property at `keyPath` lies in `range` (both ends included).
    ///
    /// ```swift
    /// let twenties = try people.objects(where: \.age, in: 20...29)
    /// ```
    public func objects<P: IndexedProperty>(
        where keyPath: KeyPath<T, P>, in range: ClosedRange<P.IndexedValue>
    )
        throws(BuriError) -> [T] where P.IndexedValue: Comparable
    {
        try objects(.where(keyPath, in: range))
    }

    /// The objects whose property at `keyPath` lies in the half-open `range`.
    ///
    /// ```swift
    /// let dueToday = try tasks.objects(where: \.due, in: midnight..<tomorrow)
    /// ```
    public func objects<P: IndexedProperty>(
        where keyPath: KeyPath<T, P>, in range: Range<P.IndexedValue>
    )
        throws(BuriError) -> [T] where P.IndexedValue: Comparable
    {
        try objects(.where(keyPath, in: range))
    }

    /// The objects whose property at `keyPath` equals any of `values`, in the index's order.
    ///
    /// ```swift
    /// let englishOrDutch = try people.objects(where: \.locale, in: ["EN", "NL"])
    /// ```
    public func objects<P: IndexedProperty>(
        where keyPath: KeyPath<T, P>, in values: [P.IndexedValue]
    )
        throws(BuriError) -> [T]
    {
        try objects(.where(keyPath, in: values))
    }

    /// The number of objects whose property at `keyPath` equals `value`.
    ///
    /// ```swift
    /// let english = try people.count(where: \.locale, equals: "EN")
    /// ```
    public func count<P: IndexedProperty>(
        where keyPath: KeyPath<T, P>, equals value: P.IndexedValue
    )
        throws(BuriError) -> Int
    {
        try count(.where(keyPath, equals: value))
    }
}
