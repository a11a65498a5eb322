import BuriStorage
import Synchronization

/// One engine commit as the hub reads it, once for every subscriber: the record changes grouped by
/// bucket id (from the keys alone, per docs/FORMAT.md, so commits made by other processes read the
/// same), the buckets whose index entries changed, and the catalog entries written.
struct ParsedCommit: Sendable {
    var revision: UInt64
    /// Record puts and deletes by bucket id, in the order the batch held them.
    var records: [UInt32: [StorageCommitEvent.Change]] = [:]
    /// Buckets whose index entries changed (an index built or dropped changes no record).
    var indexed: Set<UInt32> = []
    /// The index-entry keys each bucket's part of the commit put or deleted, for live queries
    /// that watch only their own ranges.
    var indexKeys: [UInt32: [[UInt8]]] = [:]
    /// Whether a catalog entry was written or deleted (a bucket created, redefined or dropped).
    var catalogChanged = false
    /// Generations the commit replaced: old bucket id → the id that replaced it (a `deleteAll`, or
    /// an import published). Every object of the old generation is gone in this commit.
    var cleared: [UInt32: UInt32] = [:]
    /// The keys of the named values the commit set or removed (docs/FORMAT.md §3a).
    var values: Set<[UInt8]> = []

    init(_ event: StorageCommitEvent) {
        revision = event.revision
        var retired: [(bucket: UInt32, name: String)] = []
        /// Ids whose marker the commit writes: a purge chunk or a staged load, no object changes.
        var marked: [UInt32] = []
        for change in event.changes {
            if change.key.first == Keyspace.retiredTag {
                if change.key.count == 5 {
                    marked.append(change.key.withUnsafeBytes { Keyspace.readBigEndian($0, at: 1) })
                }
                if case .put(let key, let value) = change, let marker = Keyspace.parseRetired(key: key, value: value),
                    marker.state == .purging
                {
                    retired.append((marker.bucket, marker.name))
                }
            }
            switch Keyspace.classify(change.key) {
            case .record(let bucket): records[bucket, default: []].append(change)
            case .index(let bucket):
                indexed.insert(bucket)
                indexKeys[bucket, default: []].append(change.key)
            case .catalog: catalogChanged = true
            case .value: values.insert(change.key)
            case .retired, .other: break
            }
        }
        // Keys under a retired or staged id are no bucket's objects: a purge chunk (or a staged
        // load) writes its id's marker with them, so they are not reported as changes.
        for id in marked {
            records[id] = nil
            indexed.remove(id)
            indexKeys[id] = nil
        }
        // A generation switch puts the old id's marker and the catalog entry naming the new id.
        for (old, name) in retired {
            let catalogKey = Keyspace.catalogKey(bucket: name)
            for case .put(let key, let value) in event.changes where key == catalogKey {
                if let descriptor = try? BucketDescriptor.decode(value), descriptor.id != old {
                    cleared[old] = descriptor.id
                }
            }
        }
    }
}

/// A subscription to a database's commits; cancelled when released.
final class HubSubscription: Sendable {
    private let observation: StorageObservation
    init(cancel: @escaping @Sendable () -> Void) { observation = StorageObservation(cancel: cancel) }
    func cancel() { observation.cancel() }
}

/// Fans one engine observation out to a database's change streams and live queries.
///
/// The hub observes the engine only while it has subscribers (none: zero cost to commits). Each
/// commit is parsed once; a subscriber is called only for commits that touch what it watches, with
/// work it must keep to enqueueing, since it runs while the engine serialises commits.
final class ChangeHub: Sendable {
    enum Interest: Sendable {
        /// Every commit that stored or deleted an object.
        case objects
        /// Commits that stored or deleted objects of this bucket.
        case records(UInt32)
        /// Commits that can change a query of this bucket: its records, its index entries, or any
        /// catalog entry (the bucket redefined or dropped).
        case query(UInt32)
        /// Commits that set or removed the named value with this key.
        case value([UInt8])
    }

    struct Subscriber: Sendable {
        let interest: Interest
        let deliver: @Sendable (ParsedCommit) -> Void
        let finish: @Sendable () -> Void
    }

    private struct State {
        var next: UInt64 = 0
        var everything: [UInt64: Subscriber] = [:]
        var byBucket: [UInt32: [UInt64: Subscriber]] = [:]
        var byValue: [[UInt8]: [UInt64: Subscriber]] = [:]
        var count = 0
        var closed = false
        /// Bucket names by id, learned from the catalog and from catalog entries committed since.
        var names: [UInt32: String] = [:]
    }

    private let engine: any StorageEngine
    /// Learns the generation switches observed, so views follow them before subscribers run.
    private let generations: BucketGenerations
    private let state = Mutex(State())
    /// The engine observation, present while there are subscribers. Taken only outside `state`
    /// and never by a dispatch, so registering cannot deadlock with a commit being observed.
    private let registration = Mutex<StorageObservation?>(nil)

    init(engine: any StorageEngine, generations: BucketGenerations) {
        self.engine = engine
        self.generations = generations
    }

    /// The number of live subscriptions (change streams and live queries).
    var subscriberCount: Int { state.withLock { $0.count } }

    /// Whether the hub currently observes the engine.
    var isObservingEngine: Bool { registration.withLock { $0 != nil } }

    /// Subscribes; commits applied after this returns reach `deliver` (when they match
    /// `interest`), in commit order. `finish` is called if the database closes first.
    func subscribe(
        _ interest: Interest, deliver: @escaping @Sendable (ParsedCommit) -> Void,
        finish: @escaping @Sendable () -> Void
    ) throws(BuriError) -> HubSubscription {
        let subscriber = Subscriber(interest: interest, deliver: deliver, finish: finish)
        let id = try registration.withLock { observation throws(BuriError) -> UInt64 in
            if observation == nil {
                observation = engine.observeCommits { [weak self] event in self?.dispatch(event) }
            }
            let id = state.withLock { state -> UInt64? in
                if state.closed { return nil }
                state.next += 1
                switch interest {
                case .objects: state.everything[state.next] = subscriber
                case .records(let bucket), .query(let bucket):
                    state.byBucket[bucket, default: [:]][state.next] = subscriber
                case .value(let key):
                    state.byValue[key, default: [:]][state.next] = subscriber
                }
                state.count += 1
                return state.next
            }
            guard let id else {
                if subscriberCount == 0 { observation?.cancel(); observation = nil }
                throw .databaseClosed(path: engine.location)
            }
            return id
        }
        return HubSubscription { [weak self] in self?.unsubscribe(id) }
    }

    /// Removes subscriber `id`. Takes only the subscriber lock, never the engine's: it may run
    /// inside a commit's dispatch (a stream finishing, or released, while it is delivered to).
    /// Leaving the engine, when this was the last subscriber, happens just after, on the storage queue.
    private func unsubscribe(_ id: UInt64) {
        let empty = state.withLock { state -> Bool in
            if state.everything.removeValue(forKey: id) != nil {
                state.count -= 1
            } else if let key = state.byValue.first(where: { $0.value[id] != nil })?.key {
                state.byValue[key]?[id] = nil
                if state.byValue[key]?.isEmpty == true { state.byValue[key] = nil }
                state.count -= 1
            } else {
                for (bucket, var subscribers) in state.byBucket where subscribers[id] != nil {
                    subscribers[id] = nil
                    state.byBucket[bucket] = subscribers.isEmpty ? nil : subscribers
                    state.count -= 1
                    break
                }
            }
            return state.count == 0
        }
        if empty { StorageQueue.queue.async { [weak self] in self?.leaveEngineIfIdle() } }
    }

    /// Stops observing the engine if nobody subscribes (checked under the registration lock, so
    /// a subscription made meanwhile keeps it).
    private func leaveEngineIfIdle() {
        registration.withLock { observation in
            guard state.withLock({ $0.count == 0 }) else { return }
            observation?.cancel()
            observation = nil
        }
    }

    /// Ends every subscription: the database closed.
    func close() {
        let subscribers = state.withLock { state -> [Subscriber] in
            state.closed = true
            return Array(state.everything.values) + state.byBucket.values.flatMap(\.values)
                + state.byValue.values.flatMap(\.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }

    /// Records names of buckets not yet known (a stream's first look at the catalog).
    func learn(_ descriptors: [BucketDescriptor]) {
        state.withLock { state in
            for descriptor in descriptors where state.names[descriptor.id] == nil {
                state.names[descriptor.id] = descriptor.name
            }
        }
    }

    /// The name of bucket `id` as last seen in the catalog.
    func name(ofBucket id: UInt32) -> String? { state.withLock { $0.names[id] } }

    private func dispatch(_ event: StorageCommitEvent) {
        let commit = ParsedCommit(event)
        var learned: [(UInt32, String)] = []
        if commit.catalogChanged {
            for case .put(let key, let value) in event.changes where Keyspace.isCatalogKey(key) {
                if let descriptor = try? BucketDescriptor.decode(value) {
                    learned.append((descriptor.id, descriptor.name))
                }
            }
        }
        for (old, new) in commit.cleared { generations.forward(old, to: new) }
        let targets = state.withLock { state -> [Subscriber] in
            for (id, name) in learned { state.names[id] = name }
            // A bucket's subscribers follow it to its new generation (they learn the new id from
            // the commit's `cleared`).
            for (old, new) in commit.cleared {
                guard let moved = state.byBucket.removeValue(forKey: old) else { continue }
                state.byBucket[new, default: [:]].merge(moved) { a, _ in a }
            }
            let clearedInto = Set(commit.cleared.values)
            var targets: [Subscriber] = []
            for key in commit.values {
                if let subscribers = state.byValue[key] { targets.append(contentsOf: subscribers.values) }
            }
            if !commit.records.isEmpty || !commit.cleared.isEmpty {
                targets.append(contentsOf: state.everything.values)
            }
            if commit.catalogChanged {
                for (bucket, subscribers) in state.byBucket {
                    for subscriber in subscribers.values {
                        switch subscriber.interest {
                        case .query: targets.append(subscriber)
                        case .records where commit.records[bucket] != nil || clearedInto.contains(bucket):
                            targets.append(subscriber)
                        default: break
                        }
                    }
                }
                return targets
            }
            for bucket in Set(commit.records.keys).union(commit.indexed) {
                guard let subscribers = state.byBucket[bucket] else { continue }
                let recordsChanged = commit.records[bucket] != nil
                for subscriber in subscribers.values {
                    if case .records = subscriber.interest, !recordsChanged { continue }
                    targets.append(subscriber)
                }
            }
            return targets
        }
        for target in targets { target.deliver(commit) }
    }
}
