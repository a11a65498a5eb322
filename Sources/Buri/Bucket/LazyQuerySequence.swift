/// The results of a query as a lazy `Sequence`: the objects of ``Bucket/lazyObjects(_:)`` or the
/// keys of ``Bucket/lazyKeys(_:)``. Each iteration takes its own snapshot and streams in bounded
/// memory. A `for` loop cannot throw, so an error (a damaged record or file, an I/O error) ends the
/// iteration early and is kept in ``error``, and ``isComplete`` stays `false`: check one of them
/// after the loop, or use ``Bucket/cursor(_:)``, which throws.
///
/// ```swift
/// let everyone = people.lazyObjects()
/// for person in everyone { total += person.age }
/// if let error = everyone.error { throw error }
///
/// let english = people.lazyKeys(.index("locale", equals: "EN"))
/// let firstTen = Array(english.prefix(10))
/// ```
///
/// One type serves objects and keys: what an element is, and how it is read from the query's
/// cursor, is fixed when ``Bucket`` makes the sequence (one call per element, no boxing).
///
/// ## Topics
///
/// ### How an iteration ended
///
/// - ``error``
/// - ``isComplete``
///
/// ### Iterating by hand
///
/// - ``makeIterator()``
/// - ``Iterator``
public struct LazyQuerySequence<Element>: Sequence {
    let raw: RawBucket
    let query: Query
    /// Reads the next element from the iteration's cursor, or `nil` at its end: one call per
    /// element, with no allocation of its own.
    let step: (RawQueryCursor) throws(BuriError) -> Element?
    private let errorBox = ErrorBox()

    /// Why the query cannot run, reported by every iteration.
    let refusal: BuriError?

    init(
        raw: RawBucket, query: Query, refusal: BuriError? = nil,
        step: @escaping (RawQueryCursor) throws(BuriError) -> Element?
    ) {
        self.raw = raw
        self.query = query
        self.refusal = refusal
        self.step = step
    }

    /// The error that ended the most recent iteration early, if any.
    ///
    /// ```swift
    /// for key in keys { print(key) }
    /// if let error = keys.error { print("stopped early: \(error)") }
    /// ```
    public var error: BuriError? { errorBox.error }

    /// Whether the most recent iteration reached the end of the results: `false` while it runs,
    /// after it stopped early, and after an error.
    ///
    /// ```swift
    /// for person in everyone where person.age > 100 { break }
    /// print(everyone.isComplete)   // false: the loop stopped early
    /// ```
    public var isComplete: Bool { errorBox.complete }

    /// Starts an iteration: opens a cursor over the query at a fresh snapshot.
    ///
    /// ```swift
    /// var iterator = people.lazyKeys().makeIterator()
    /// let first = iterator.next()
    /// ```
    public func makeIterator() -> Iterator {
        errorBox.error = nil
        errorBox.complete = false
        do throws(BuriError) {
            if let refusal { throw refusal }
            return Iterator(cursor: try raw.cursor(query), step: step, errorBox: errorBox)
        } catch {
            errorBox.error = error
            return Iterator(cursor: nil, step: step, errorBox: errorBox)
        }
    }

    /// One iteration over the results, from one snapshot.
    ///
    /// ```swift
    /// var iterator = people.lazyObjects().makeIterator()
    /// while let person = iterator.next() { print(person.name) }
    /// ```
    public struct Iterator: IteratorProtocol {
        var cursor: RawQueryCursor?
        let step: (RawQueryCursor) throws(BuriError) -> Element?
        let errorBox: ErrorBox

        /// The next result, or `nil` at the end or after an error (see ``LazyQuerySequence/error``).
        public mutating func next() -> Element? {
            guard let current = cursor else { return nil }
            do {
                if let element = try step(current) { return element }
                errorBox.complete = true
            } catch {
                errorBox.error = error
            }
            cursor = nil  // releases the storage iterator and snapshot now
            return nil
        }
    }
}

/// Where a sequence's iterator leaves the error that stopped it, or that it reached the end.
final class ErrorBox: @unchecked Sendable {
    // @unchecked: a sequence and its iterators are used on one thread at a time.
    var error: BuriError?
    var complete = false
}
