import BuriCodec
import BuriStorage
import Synchronization

/// What one commit did to one bucket's objects: every key it stored or deleted.
///
/// A transaction is one commit, so one `BucketChange` per bucket it wrote; a key written twice
/// in one commit appears once, with what the commit left (stored or deleted).
///
/// ```swift
/// for try await change in people.changes() {
///     print(change.revision, change.storedKeys, change.deletedKeys)
/// }
/// ```
public struct BucketChange<Object: Sendable>: Sendable {
    /// One key of the bucket the commit wrote.
    public enum Change: Sendable {
        /// Stored under `key`; `object` is the new object when the stream was asked for objects.
        case stored(key: String, object: Object?)
        /// Deleted (or never there: a delete of a missing key is still a committed delete).
        case deleted(key: String)

        /// The object key.
        public var key: String {
            switch self {
            case .stored(let key, _), .deleted(let key): key
            }
        }
    }

    /// The bucket's name.
    public var bucket: String
    /// The engine's revision of the commit: increases from one commit to the next.
    public var revision: UInt64
    /// Each key the commit wrote, once, in the order of the commit's batch (a direct write's
    /// order; a transaction commits in key order).
    public var changes: [Change]
    /// Whether the commit deleted every object the bucket held before it (``Bucket/deleteAll()``
    /// outside a transaction, which replaces the bucket's generation, or an import published):
    /// those keys are not listed one by one in ``changes``.
    ///
    /// ```swift
    /// for try await change in people.changes() where change.deletedAll { clearCache() }
    /// ```
    public var deletedAll = false

    /// The keys stored, in commit order.
    public var storedKeys: [String] {
        changes.compactMap { if case .stored(let key, _) = $0 { key } else { nil } }
    }

    /// The keys deleted, in commit order.
    public var deletedKeys: [String] {
        changes.compactMap { if case .deleted(let key) = $0 { key } else { nil } }
    }
}

/// What one commit did to the database's objects, bucket by bucket.
///
/// ```swift
/// for try await commit in db.changes() {
///     for bucket in commit.buckets { print(commit.revision, bucket.bucket, bucket.storedKeys) }
/// }
/// ```
public struct DatabaseChange: Sendable {
    /// The engine's revision of the commit.
    public var revision: UInt64
    /// The buckets whose objects the commit changed, by bucket id (creation order). Objects, when
    /// asked for, are the stored CBOR payloads (decode with `CBORDecoder`).
    public var buckets: [BucketChange<[UInt8]>]
}

/// The committed changes of a bucket or database as an `AsyncSequence`: one element per commit
/// that stored or deleted objects, in commit order, never part of a commit, never one rolled back.
///
/// It sees the commits applied after it was made. Iterate it once. Ending the iterating task,
/// breaking out of the loop or releasing the sequence ends the observation and frees what it held.
///
/// A consumer slower than the writers has its commits queued, up to `bufferLimit` of them; one
/// more and the stream ends, after the queued commits, with
/// ``BuriError/observerFellBehind(bucket:limit:)``: it never skips a commit silently.
///
/// ```swift
/// let task = Task {
///     for try await change in people.changes(includingObjects: true) { render(change) }
/// }
/// task.cancel()   // ends the observation
/// ```
public struct ChangeStream<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = BuriError

    let source: ObservationSource<ParsedCommit>
    let transform: @Sendable (ParsedCommit) throws(BuriError) -> Element?

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: source, base: source.stream.makeAsyncIterator(), transform: transform)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = BuriError
        let source: ObservationSource<ParsedCommit>
        var base: AsyncStream<ParsedCommit>.Iterator
        let transform: @Sendable (ParsedCommit) throws(BuriError) -> Element?

        public mutating func next() async throws(BuriError) -> Element? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(BuriError) -> Element? {
            while true {
                guard let commit = await base.next(isolation: actor) else {
                    if let error = source.endingError() { throw error }
                    return nil
                }
                do {
                    if let element = try transform(commit) { return element }
                } catch {
                    source.end()
                    throw error
                }
            }
        }
    }
}

/// The stream a subscription feeds, and the subscription: released with the last sequence or
/// iterator holding it, which ends the subscription.
final class ObservationSource<Element: Sendable>: Sendable {
    let stream: AsyncStream<Element>
    let continuation: AsyncStream<Element>.Continuation
    private let state = Mutex<(subscription: HubSubscription?, error: BuriError?)>((nil, nil))

    init(policy: AsyncStream<Element>.Continuation.BufferingPolicy) {
        (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: policy)
    }

    /// Keeps `subscription` until the stream ends (a task cancelled, the stream released or finished).
    func attach(_ subscription: HubSubscription) {
        state.withLock { $0.subscription = subscription }
        continuation.onTermination = { [weak self] _ in self?.detach() }
    }

    /// Ends the stream after what it holds, with `error` thrown after the last element.
    func fail(_ error: BuriError) {
        state.withLock { if $0.error == nil { $0.error = error } }
        continuation.finish()
    }

    func end() {
        continuation.finish()
        detach()
    }

    func endingError() -> BuriError? { state.withLock { $0.error } }

    private func detach() {
        let subscription = state.withLock { state -> HubSubscription? in
            defer { state.subscription = nil }
            return state.subscription
        }
        subscription?.cancel()
    }

    deinit {
        continuation.finish()
        detach()
    }
}

extension BuriDatabase {
    /// The default number of commits a change stream queues for a slow consumer.
    public static let defaultChangeBufferLimit = 10_000

    /// Subscribes a change stream; see ``ChangeStream``.
    func changeStream<Element: Sendable>(
        _ interest: ChangeHub.Interest, bucket: String?, bufferLimit: Int,
        _ transform: @escaping @Sendable (ParsedCommit) throws(BuriError) -> Element?
    ) throws(BuriError) -> ChangeStream<Element> {
        guard bufferLimit > 0 else {
            throw .invalidQuery(
                bucket: bucket ?? "(database)", index: nil,
                reason: "a change stream buffers at least 1 commit; bufferLimit is \(bufferLimit)")
        }
        try checkOpen()
        let source = ObservationSource<ParsedCommit>(policy: .bufferingOldest(bufferLimit))
        let subscription = try changeHub.subscribe(
            interest,
            deliver: { [weak source] commit in
                guard let source else { return }
                if case .dropped = source.continuation.yield(commit) {
                    source.fail(.observerFellBehind(bucket: bucket, limit: bufferLimit))
                }
            }, finish: { [weak source] in source?.continuation.finish() })
        source.attach(subscription)
        return ChangeStream(source: source, transform: transform)
    }

    /// Every commit that stores or deletes objects, in any bucket, from now on: one element per
    /// commit, in commit order (see ``ChangeStream`` for ending it and for slow consumers). On an
    /// engine shared with other clients, their commits are included.
    ///
    /// ```swift
    /// for try await commit in db.changes() {
    ///     print(commit.revision, commit.buckets.map(\.bucket))
    /// }
    /// ```
    /// - Parameters:
    ///   - includingObjects: also carry each stored object's CBOR payload.
    ///   - bufferLimit: how many commits the stream queues for a slow consumer (at least 1); one
    ///     more ends it with ``BuriError/observerFellBehind(bucket:limit:)``.
    public func changes(
        includingObjects: Bool = false, bufferLimit: Int = defaultChangeBufferLimit
    ) throws(BuriError) -> DatabaseChange.Stream {
        let hub = changeHub
        let stream = try changeStream(.objects, bucket: nil, bufferLimit: bufferLimit) {
            commit throws(BuriError) -> DatabaseChange? in
            var buckets: [BucketChange<[UInt8]>] = []
            for (old, _) in commit.cleared.sorted(by: { $0.key < $1.key }) {
                let name = hub.name(ofBucket: old) ?? "#\(old)"
                buckets.append(BucketChange(bucket: name, revision: commit.revision, changes: [], deletedAll: true))
            }
            for (id, changes) in commit.records.sorted(by: { $0.key < $1.key }) {
                let name = hub.name(ofBucket: id) ?? "#\(id)"
                buckets.append(
                    try BucketChange(bucket: name, revision: commit.revision, records: changes) { _, payload, _ in
                        includingObjects ? Array(payload) : nil
                    })
            }
            return DatabaseChange(revision: commit.revision, buckets: buckets)
        }
        // Names of buckets that exist now; those created later arrive with their catalog entries.
        changeHub.learn(try allBucketInfo(reader: snapshot()))
        return stream
    }
}

extension DatabaseChange {
    /// The stream ``BuriDatabase/changes(includingObjects:bufferLimit:)`` returns.
    public typealias Stream = ChangeStream<DatabaseChange>
}

extension BucketChange {
    /// The change of one bucket from its record puts and deletes, the last write of a key winning.
    init(
        bucket: String, revision: UInt64, records: [StorageCommitEvent.Change],
        object: (String, UnsafeRawBufferPointer, UInt64) throws(BuriError) -> Object?
    ) throws(BuriError) {
        self.bucket = bucket
        self.revision = revision
        var order: [ObjectKeyBytes] = []
        var last: [ObjectKeyBytes: StorageCommitEvent.Change] = [:]
        for change in records {
            let key = ObjectKeyBytes(change.key)
            if last.updateValue(change, forKey: key) == nil { order.append(key) }
        }
        var changes: [Change] = []
        changes.reserveCapacity(order.count)
        for key in order {
            guard let change = last[key] else { continue }
            let objectKey: String
            do {
                objectKey = try key.bytes.withUnsafeBytes { raw throws(FormatError) in
                    try Keyspace.objectKey(fromRecordKey: raw)
                }
            } catch {
                throw .corruption(bucket: bucket, key: nil, index: nil, reason: "a committed record key: \(error)")
            }
            switch change {
            case .delete:
                changes.append(.deleted(key: objectKey))
            case .put(_, let value):
                var decoded: Object?
                var failure: BuriError?
                value.withUnsafeBytes { raw in
                    do throws(BuriError) {
                        let version: UInt64
                        let offset: Int
                        do {
                            (version, offset) = try RecordHeader.versionAndPayloadOffset(raw)
                        } catch {
                            throw .corruption(
                                bucket: bucket, key: objectKey, index: nil, reason: "record header: \(error)")
                        }
                        decoded = try object(objectKey, UnsafeRawBufferPointer(rebasing: raw[offset...]), version)
                    } catch {
                        failure = error
                    }
                }
                if let failure { throw failure }
                changes.append(.stored(key: objectKey, object: decoded))
            }
        }
        self.changes = changes
    }
}

extension Bucket where T: Sendable {
    /// Every commit that stores or deletes objects of this bucket, from now on: one element per
    /// commit, in commit order, never part of a transaction or one rolled back (see
    /// ``ChangeStream`` for ending it and for slow consumers). On an engine shared with other
    /// clients, their commits are included.
    ///
    /// ```swift
    /// for try await change in try people.changes(includingObjects: true) {
    ///     for case .stored(let key, let person?) in change.changes { print(key, person.name) }
    /// }
    /// ```
    /// - Parameters:
    ///   - includingObjects: decode the stored objects too (on the consuming task).
    ///   - bufferLimit: how many commits the stream queues for a slow consumer (at least 1); one
    ///     more ends it with ``BuriError/observerFellBehind(bucket:limit:)``.
    public func changes(
        includingObjects: Bool = false, bufferLimit: Int = BuriDatabase.defaultChangeBufferLimit
    ) throws(BuriError) -> ChangeStream<BucketChange<T>> {
        let name = name
        // The generation the stream follows: it moves on with each commit that replaces it.
        let followed = Atomic<UInt32>(raw.bucketId)
        return try raw.database.changeStream(
            .records(followed.load(ordering: .relaxed)), bucket: name, bufferLimit: bufferLimit
        ) { [self] commit throws(BuriError) -> BucketChange<T>? in
            var id = followed.load(ordering: .relaxed)
            var deletedAll = false
            while let next = commit.cleared[id] {
                id = next
                deletedAll = true
            }
            followed.store(id, ordering: .relaxed)
            guard let records = commit.records[id] else {
                return deletedAll
                    ? BucketChange(bucket: name, revision: commit.revision, changes: [], deletedAll: true) : nil
            }
            var change = try BucketChange(bucket: name, revision: commit.revision, records: records) {
                key, payload, version throws(BuriError) -> T? in
                includingObjects ? try decode(payload, version: version, key: key) : nil
            }
            change.deletedAll = deletedAll
            return change
        }
    }
}
