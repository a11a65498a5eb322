import BuriStorage
import Dispatch
import Synchronization

/// A query kept up to date as an `AsyncSequence`: its results now, at once, then its results
/// again after each commit that can change them, and never after commits that cannot. A commit
/// can change them when it writes an index entry inside one of the query's key ranges (an object
/// entering, leaving or moving within the results), changes an object among the last results
/// (a query of objects), writes any object of the bucket (a query of every object), or writes
/// any catalog entry (the bucket redefined or dropped). Writes to other buckets, and to objects
/// outside the query's ranges, do not wake it.
///
/// Every element is the query's complete result at one committed state, read from one snapshot
/// taken after the commit it answers; never part of a transaction, never a rolled-back write.
/// A consumer slower than the writers is not queued a backlog: the commits it has not yet seen
/// are coalesced into one refresh, read when it asks for the next element, so it always ends on
/// the latest state and holds at most one pending refresh. Queries run off the caller's
/// executor, on Buri's storage queue.
///
/// Iterate it once. Cancelling the iterating task, leaving the loop, or releasing the sequence
/// ends the observation and frees everything it held. A query that fails ends the sequence with
/// its ``BuriError``; so does closing the database (the sequence then simply ends).
///
/// ```swift
/// for try await adults in try people.observe(.index("age", in: 18...)) {
///     print("now \(adults.count) adults")        // redraw
/// }
/// ```
public struct LiveQuery<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = BuriError

    let source: ObservationSource<UInt64>
    let state: LiveQueryState
    let run: @Sendable () throws(BuriError) -> Element

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: source, state: state, base: source.stream.makeAsyncIterator(), run: run)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = BuriError
        let source: ObservationSource<UInt64>
        let state: LiveQueryState
        var base: AsyncStream<UInt64>.Iterator
        let run: @Sendable () throws(BuriError) -> Element
        var started = false
        var finished = false
        /// The newest relevant revision the last element was read after.
        var emittedThrough: UInt64 = 0

        public mutating func next() async throws(BuriError) -> Element? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(BuriError) -> Element? {
            if finished { return nil }
            if !started {
                started = true
            } else {
                while true {
                    guard let revision = await base.next(isolation: actor) else {
                        finished = true
                        if let error = source.endingError() { throw error }
                        return nil
                    }
                    // A signal for a commit the last snapshot already held: nothing new to show.
                    if revision > emittedThrough { break }
                }
            }
            // The revision is read before the snapshot is taken, and commits are dispatched after
            // they are applied: the snapshot holds every commit up to it.
            emittedThrough = state.latest.load(ordering: .acquiring)
            // From here until the new results are known, any change to the bucket's objects counts
            // (the results being read may hold objects the last ones did not).
            state.beginRefresh()
            let result = await StorageQueue.result(run)
            state.endRefresh()
            if case .failure = result {
                finished = true
                source.end()
            }
            return try result.get()
        }
    }
}

/// What the commit path shares with a live query's iterator.
final class LiveQueryState: Sendable {
    /// The revision of the newest commit that touched the query's bucket.
    let latest = Atomic<UInt64>(0)
    /// Which commits can change the results.
    let relevance: LiveQueryRelevance
    /// The record keys of the last results (for `.results`), and whether a refresh is reading.
    private let watched = Mutex<(keys: Set<[UInt8]>, refreshing: Int)>(([], 0))

    init(relevance: LiveQueryRelevance, bucket: UInt32) {
        self.relevance = relevance
        self.bucket = Atomic(bucket)
        original = bucket
    }

    /// The id the relevance's ranges and keys were made with.
    private let original: UInt32

    /// `key` (a record or index-entry key of a later generation) as it reads under the original
    /// id, so the relevance made then still applies.
    private func asOriginal(_ key: [UInt8]) -> [UInt8] {
        guard key.count >= Keyspace.recordPrefixLength else { return key }
        var key = key
        key[1] = UInt8(truncatingIfNeeded: original >> 24)
        key[2] = UInt8(truncatingIfNeeded: original >> 16)
        key[3] = UInt8(truncatingIfNeeded: original >> 8)
        key[4] = UInt8(truncatingIfNeeded: original)
        return key
    }

    func beginRefresh() { watched.withLock { $0.refreshing += 1 } }
    func endRefresh() { watched.withLock { $0.refreshing -= 1 } }

    /// Notes the record keys of results just read (for a query of objects).
    func resultsRead(_ recordKeys: Set<[UInt8]>) {
        let keys =
            recordKeys.contains(where: { Keyspace.classify($0) != .record(bucket: original) })
            ? Set(recordKeys.map(asOriginal)) : recordKeys
        watched.withLock { $0.keys = keys }
    }

    /// The bucket's generation the query follows (moved on by each commit that replaces it).
    let bucket: Atomic<UInt32>

    /// Whether `commit` can change the results of the query on its bucket.
    func isRelevant(_ commit: ParsedCommit) -> Bool {
        // A named value's query reads its one key, which no bucket write touches.
        if let key = relevance.namedValue { return commit.values.contains(key) }
        var bucket = self.bucket.load(ordering: .relaxed)
        if !commit.cleared.isEmpty {
            while let next = commit.cleared[bucket] { bucket = next }
            self.bucket.store(bucket, ordering: .relaxed)
        }
        if commit.catalogChanged { return true }
        let moved = bucket != original
        if let keys = commit.indexKeys[bucket],
            keys.contains(where: { key in
                let key = moved ? asOriginal(key) : key
                return relevance.ranges.contains { $0.contains(key) }
            })
        {
            return true
        }
        guard var records = commit.records[bucket], !records.isEmpty else { return false }
        if moved {
            records = records.map { change in
                switch change {
                case .put(let key, let value): .put(key: asOriginal(key), value: value)
                case .delete(let key): .delete(key: asOriginal(key))
                }
            }
        }
        switch relevance.records {
        case .none:
            return false
        case .any:
            return true
        case .key(let recordKey):
            return records.contains { $0.key == recordKey }
        case .results:
            return watched.withLock { state in
                state.refreshing > 0 || records.contains { state.keys.contains($0.key) }
            }
        }
    }
}

/// Which parts of a bucket a live query reads: the key ranges of its index conditions, and which
/// records.
struct LiveQueryRelevance: Sendable {
    enum Records: Sendable {
        /// None: the answer comes from index entries alone (keys or counts of a condition).
        case none
        /// Every record: a query without conditions, whose members are the records themselves.
        case any
        /// One record: an object observed by key.
        case key([UInt8])
        /// The records of the last results: a query of objects, whose content can change without
        /// its index entries changing.
        case results
    }

    var ranges: [KeyRange] = []
    var records: Records
    /// The key of the named value a live query of one value reads (then nothing else matters).
    var namedValue: [UInt8]? = nil

    /// The relevance of `query` on `bucket`, for a query of objects (`objects`) or of keys/counts.
    static func of(_ query: Query, bucket: RawBucket, objects: Bool) throws(BuriError) -> LiveQueryRelevance {
        if query.conditions.isEmpty, query.predicates.isEmpty { return LiveQueryRelevance(records: .any) }
        var ranges: [KeyRange] = []
        var anyRecord = false
        for condition in query.conditions {
            // An `anyOf` condition wakes only for its values' ranges, not what lies between them.
            ranges += try ConditionPlan(condition, in: bucket.descriptor).touchedRanges
        }
        for predicate in query.predicates {
            // A NOT or a filter can start to match when only a record changes.
            if try PredicatePlan(predicate, in: bucket.descriptor).relevance(into: &ranges) { anyRecord = true }
        }
        // Any change to a sort key's values can reorder the results.
        for key in query.sortKeys {
            guard let index = bucket.descriptor.index(named: key.index) else { continue }
            ranges.append(.prefix(Keyspace.indexPrefix(bucket: bucket.descriptor.id, index: index.id)))
        }
        return LiveQueryRelevance(ranges: ranges, records: anyRecord ? .any : objects ? .results : .none)
    }
}

extension BuriDatabase {
    /// A live query over bucket `bucket` (id) answering with `run`.
    func liveQuery<Element: Sendable>(
        bucket: RawBucket, relevance: LiveQueryRelevance,
        _ run: @escaping @Sendable (LiveQueryState) throws(BuriError) -> Element
    ) throws(BuriError) -> LiveQuery<Element> {
        if bucket.transaction != nil {
            throw .invalidTransaction(
                reason:
                    "a live query observes committed data; observe the bucket from `db.bucket(...)`, not a transaction's"
            )
        }
        let bucketId = bucket.bucketId
        return try liveQuery(
            state: LiveQueryState(relevance: relevance, bucket: bucketId), interest: .query(bucketId), run)
    }

    /// A live query with `state`, woken by the commits of `interest` that `state` finds relevant.
    func liveQuery<Element: Sendable>(
        state: LiveQueryState, interest: ChangeHub.Interest,
        _ run: @escaping @Sendable (LiveQueryState) throws(BuriError) -> Element
    ) throws(BuriError) -> LiveQuery<Element> {
        try checkOpen()
        // Newest only: any number of commits between two reads coalesce into one refresh.
        let source = ObservationSource<UInt64>(policy: .bufferingNewest(1))
        let subscription = try changeHub.subscribe(
            interest,
            deliver: { [weak source] commit in
                guard state.isRelevant(commit) else { return }
                state.latest.store(commit.revision, ordering: .releasing)
                source?.continuation.yield(commit.revision)
            }, finish: { [weak source] in source?.continuation.finish() })
        source.attach(subscription)
        return LiveQuery(source: source, state: state, run: { () throws(BuriError) -> Element in try run(state) })
    }

    /// The number of live change streams and live queries on this database (each ends when its
    /// task is cancelled or it is released); for diagnostics and tests of their life cycle.
    ///
    /// ```swift
    /// let before = db.activeObservationCount
    /// ```
    public var activeObservationCount: Int { changeHub.subscriberCount }
}

extension Bucket where T: Sendable {
    /// The objects matching `query`, now and after every commit that can change them (see
    /// ``LiveQuery`` for the guarantees).
    ///
    /// ```swift
    /// for try await english in try people.observe(.index("locale", equals: "EN")) {
    ///     show(english)
    /// }
    /// ```
    public func observe(_ query: Query = .all) throws(BuriError) -> LiveQuery<[T]> {
        let query = try checked(query)
        let relevance = try LiveQueryRelevance.of(query, bucket: raw, objects: true)
        return try raw.database.liveQuery(bucket: raw, relevance: relevance) { [self] state throws(BuriError) -> [T] in
            guard case .results = relevance.records else { return try objects(query) }
            let found = try entries(query)
            state.resultsRead(Set(found.map { raw.recordKey($0.key) }))
            return found.map(\.object)
        }
    }

    /// The number of objects matching `query`, now and after every commit that can change it.
    ///
    /// ```swift
    /// for try await count in try people.observeCount(.index("age", in: 18...)) { badge = count }
    /// ```
    public func observeCount(_ query: Query = .all) throws(BuriError) -> LiveQuery<Int> {
        let query = try checked(query)
        return try raw.database.liveQuery(
            bucket: raw, relevance: LiveQueryRelevance.of(query, bucket: raw, objects: false)
        ) {
            [self] _ throws(BuriError) -> Int in
            try count(query)
        }
    }

    /// The keys matching `query`, now and after every commit that can change them.
    ///
    /// ```swift
    /// for try await keys in try people.observeKeys(.index("locale", equals: "EN")) { print(keys) }
    /// ```
    public func observeKeys(_ query: Query = .all) throws(BuriError) -> LiveQuery<[String]> {
        let query = try checked(query)
        return try raw.database.liveQuery(
            bucket: raw, relevance: LiveQueryRelevance.of(query, bucket: raw, objects: false)
        ) {
            [self] _ throws(BuriError) -> [String] in
            try keys(query)
        }
    }

    /// The object stored under `key` (`nil` when there is none), now and after every commit that
    /// can change it.
    ///
    /// ```swift
    /// for try await person in try people.observe(key: "p1") { print(person?.name ?? "gone") }
    /// ```
    public func observe(key: String) throws(BuriError) -> LiveQuery<T?> {
        try raw.database.liveQuery(bucket: raw, relevance: LiveQueryRelevance(records: .key(raw.recordKey(key)))) {
            [self] _ throws(BuriError) -> T? in
            try object(forKey: key)
        }
    }
}

/// Where Buri's async calls do their blocking storage work: a concurrent dispatch queue, so that
/// LevelDB reads and writes (which block a thread) never occupy the caller's executor or the
/// Swift concurrency pool's few threads.
enum StorageQueue {
    static let queue = DispatchQueue(label: "buri.storage", qos: .userInitiated, attributes: .concurrent)

    static func run<R: Sendable>(_ body: @escaping @Sendable () throws(BuriError) -> R) async throws(BuriError) -> R {
        try await result(body).get()
    }

    static func result<R: Sendable>(_ body: @escaping @Sendable () throws(BuriError) -> R) async -> Result<R, BuriError>
    {
        await withCheckedContinuation { continuation in
            queue.async {
                do throws(BuriError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
    }
}
