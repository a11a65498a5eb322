// The names Buri's read API had before it settled on one way to read each thing (issue 23). Each
// forwards, in one line, to the name that replaces it, and does no work of its own; the compiler's
// fix-it (or the message) says what to write instead. They go with the next major version.

// MARK: Bucket

extension Bucket {
    /// All keys, in key order.
    ///
    /// ```swift
    /// let everyone = try people.keys()
    /// ```
    @available(*, deprecated, renamed: "keys()")
    public func allKeys() throws(BuriError) -> [String] { try keys(.all) }

    /// All objects, in key order.
    ///
    /// ```swift
    /// let everyone = try people.objects()
    /// ```
    @available(*, deprecated, renamed: "objects()")
    @inlinable
    public func allObjects() throws(BuriError) -> [T] { try objects(.all) }

    /// Keys of the objects whose index `index` equals `value` exactly ("E" never matches "EN").
    ///
    /// ```swift
    /// let english = try people.keys(.index("locale", equals: "EN"))
    /// ```
    @available(*, deprecated, message: "use keys(.index(index, equals: value))")
    public func keys(index: String, equalTo value: IndexValue) throws(BuriError) -> [String] {
        try keys(.index(index, equals: value))
    }

    /// Objects whose index `index` equals `value` exactly.
    ///
    /// ```swift
    /// let english = try people.objects(.index("locale", equals: "EN"))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, equals: value))")
    @inlinable
    public func objects(index: String, equalTo value: IndexValue) throws(BuriError) -> [T] {
        try objects(.index(index, equals: value))
    }

    /// Keys of the objects whose index value lies in `range`, both bounds included.
    ///
    /// ```swift
    /// let twenties = try people.keys(.index("age", in: 20...29))
    /// ```
    @available(*, deprecated, message: "use keys(.index(index, in: range))")
    public func keys(index: String, in range: ClosedRange<IndexValue>) throws(BuriError) -> [String] {
        try keys(.index(index, in: range))
    }

    /// Objects whose index value lies in `range`, both bounds included.
    ///
    /// ```swift
    /// let twenties = try people.objects(.index("age", in: 20...29))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, in: range))")
    @inlinable
    public func objects(index: String, in range: ClosedRange<IndexValue>) throws(BuriError) -> [T] {
        try objects(.index(index, in: range))
    }

    /// Keys of the objects whose binary index value begins with `prefix`.
    ///
    /// ```swift
    /// let dNames = try people.keys(.index("name", prefix: "D"))
    /// ```
    @available(*, deprecated, message: "use keys(.index(index, prefix: prefix))")
    public func keys(index: String, prefix: String) throws(BuriError) -> [String] {
        try keys(.index(index, prefix: prefix))
    }

    /// Objects whose binary index value begins with `prefix`.
    ///
    /// ```swift
    /// let dNames = try people.objects(.index("name", prefix: "D"))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, prefix: prefix))")
    public func objects(index: String, prefix: String) throws(BuriError) -> [T] {
        try objects(.index(index, prefix: prefix))
    }
}

// For a `Sendable` `T` the same names forward to the `objects(_:)` that decodes on every core,
// as they did before.
extension Bucket where T: Sendable {
    /// All objects, in key order (decoded on every core when there are many).
    ///
    /// ```swift
    /// let everyone = try people.objects()
    /// ```
    @available(*, deprecated, renamed: "objects()")
    @inlinable
    public func allObjects() throws(BuriError) -> [T] { try objects(.all) }

    /// Objects whose index `index` equals `value` exactly (decoded on every core when there are many).
    ///
    /// ```swift
    /// let english = try people.objects(.index("locale", equals: "EN"))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, equals: value))")
    @inlinable
    public func objects(index: String, equalTo value: IndexValue) throws(BuriError) -> [T] {
        try objects(.index(index, equals: value))
    }

    /// Objects whose index value lies in `range`, both bounds included (decoded on every core
    /// when there are many).
    ///
    /// ```swift
    /// let twenties = try people.objects(.index("age", in: 20...29))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, in: range))")
    @inlinable
    public func objects(index: String, in range: ClosedRange<IndexValue>) throws(BuriError) -> [T] {
        try objects(.index(index, in: range))
    }

    /// Objects whose binary index value begins with `prefix` (decoded on every core when there
    /// are many).
    ///
    /// ```swift
    /// let dNames = try people.objects(.index("name", prefix: "D"))
    /// ```
    @available(*, deprecated, message: "use objects(.index(index, prefix: prefix))")
    @inlinable
    public func objects(index: String, prefix: String) throws(BuriError) -> [T] {
        try objects(.index(index, prefix: prefix))
    }
}

/// The objects of a query as a lazy `Sequence`: now ``LazyQuerySequence``.
///
/// ```swift
/// let everyone: LazyQuerySequence<Person> = people.lazyObjects()
/// ```
@available(*, deprecated, renamed: "LazyQuerySequence")
public typealias ObjectSequence<T: BuriSupport> = LazyQuerySequence<T>

/// The keys of a query as a lazy `Sequence`: now `LazyQuerySequence<String>`.
///
/// ```swift
/// let keys: LazyQuerySequence<String> = people.lazyKeys()
/// ```
@available(*, deprecated, message: "use LazyQuerySequence<String>")
public typealias KeySequence = LazyQuerySequence<String>

// MARK: RawBucket

extension RawBucket {
    /// A streaming cursor over the results of `query`, reading from one snapshot.
    ///
    /// ```swift
    /// let cursor = try raw.cursor(.index("age", in: 22...24))
    /// ```
    @available(*, deprecated, renamed: "cursor(_:)")
    public func makeCursor(_ query: Query) throws(BuriError) -> RawQueryCursor { try cursor(query) }

    /// A cursor over `query` planned with `strategy`.
    @available(*, deprecated, renamed: "cursor(_:strategy:)")
    func makeCursor(_ query: Query, strategy: QueryPlan.Strategy) throws(BuriError) -> RawQueryCursor {
        try cursor(query, strategy: strategy)
    }

    /// One page of at most `size` records matching `query`, and a token for the next page.
    ///
    /// ```swift
    /// let first = try raw.page(.index("age", in: 20...), size: 100)
    /// ```
    @available(*, deprecated, renamed: "page(_:size:)")
    public func recordPage(_ query: Query, size: Int) throws(BuriError) -> Page<StoredRecord> {
        try page(query, size: size)
    }
}

// MARK: IndexDefinition

extension IndexDefinition {
    /// Whether a value tuple may belong to one object at most.
    ///
    /// ```swift
    /// if definition.isUnique { print("one object per value") }
    /// ```
    @available(*, deprecated, renamed: "isUnique")
    public var unique: Bool {
        get { isUnique }
        set { isUnique = newValue }
    }
}
