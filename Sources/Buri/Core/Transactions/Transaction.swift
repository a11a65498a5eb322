import BuriStorage

/// The reads and writes of one writer: what it reads through and the batch it fills. A direct
/// write commits its batch when done; inside a transaction the batch is the transaction's pending
/// writes, committed with the rest of it.
final class Writer {
    let reader: any StorageReader
    let batch: any StorageBatch
    let transaction: BuriTransaction?
    private(set) var hooks: [() -> Void] = []
    /// The net number of records this direct writer added to (or removed from) each bucket id.
    private(set) var counts = CountDeltas()

    init(reader: any StorageReader, batch: any StorageBatch, transaction: BuriTransaction?) {
        self.reader = reader
        self.batch = batch
        self.transaction = transaction
    }

    /// Runs `hook` once the writes are committed (never if they are rolled back).
    func afterCommit(_ hook: @escaping () -> Void) {
        if let transaction { transaction.hooks.append(hook) } else { hooks.append(hook) }
    }

    /// Notes that the batch adds `delta` records to bucket id `id` (of bucket `name`, named in errors);
    /// the commit writes the id's count once (see ``BuriDatabase/putCounts(_:reader:into:)``).
    func adjustCount(of id: UInt32, bucket name: String, by delta: Int) {
        guard delta != 0 else { return }
        if let transaction {
            transaction.counts.add(delta, to: id, bucket: name)
        } else {
            counts.add(delta, to: id, bucket: name)
        }
    }

    /// Notes that the batch changes the token total of text index `index` of bucket id `id` by
    /// `delta` (written once per commit, like counts).
    func adjustTextTotal(of id: UInt32, index: UInt32, bucket name: String, by delta: Int) {
        guard delta != 0 else { return }
        if let transaction {
            transaction.counts.addTokens(delta, to: TextTotalId(bucket: id, index: index), bucket: name)
        } else {
            counts.addTokens(delta, to: TextTotalId(bucket: id, index: index), bucket: name)
        }
    }
}

/// A text index's token total: its bucket id and index id.
struct TextTotalId: Hashable {
    var bucket: UInt32
    var index: UInt32
}

/// Net changes to bucket object counts, per bucket id, and to text indexes' token totals, gathered
/// while a batch is built: one key read and written per bucket (and text index) per commit,
/// never per object.
struct CountDeltas {
    var byId: [UInt32: (bucket: String, delta: Int)] = [:]
    var tokens: [TextTotalId: (bucket: String, delta: Int)] = [:]

    var isEmpty: Bool { byId.isEmpty && tokens.isEmpty }

    mutating func add(_ delta: Int, to id: UInt32, bucket: String) {
        byId[id, default: (bucket, 0)].delta += delta
    }

    mutating func addTokens(_ delta: Int, to id: TextTotalId, bucket: String) {
        tokens[id, default: (bucket, 0)].delta += delta
    }
}

extension BuriDatabase {
    /// The database whose `write` closure is running on this thread or task, so that a write to the
    /// same database from inside it is a typed error instead of a deadlock on the writer lock.
    @TaskLocal static var activeWriter: ObjectIdentifier?

    /// Takes the writer lock, refusing (rather than deadlocking) when this thread already holds it
    /// inside ``write(_:)``.
    func withWriteLock<R>(_ body: () throws(BuriError) -> R) throws(BuriError) -> R {
        if Self.activeWriter == ObjectIdentifier(self) {
            throw .invalidTransaction(
                reason:
                    "this database is already writing inside `write { }` on this thread; use the transaction's buckets (`tx.bucket(...)`), which commit with it"
            )
        }
        return try writeLock.withLock { _ throws(BuriError) -> R in
            try checkOpen()
            return try body()
        }
    }

    /// One attempt of a writer: the batch to commit (nothing when empty), what to run once it is
    /// committed, and the result to return then.
    struct Attempt<R> {
        var batch: any StorageBatch
        var hooks: [() -> Void]
        var result: R
        /// Net record changes per bucket id, written as counts with the batch.
        var counts = CountDeltas()
    }

    /// Runs `attempt` under the writer lock against a fresh view and commits its batch. On an
    /// engine shared with other clients the view is a snapshot whose reads become the commit's
    /// conditions, and a conflicting commit runs the attempt again from the start, up to
    /// `options.maxCommitAttempts` times; then ``BuriError/conflict(attempts:detail:)``.
    func committing<R>(
        sync: Bool, _ attempt: (any StorageReader) throws(BuriError) -> Attempt<R>
    ) throws(BuriError) -> R {
        try withWriteLock { () throws(BuriError) -> R in
            var attempts = 0
            while true {
                attempts += 1
                let recording: RecordingReader?
                let reader: any StorageReader
                if engine.isShared {
                    let shared = RecordingReader(try run { try engine.snapshot() })
                    recording = shared
                    reader = shared
                    // Another client may have rotated the data key: seal under the header's keys,
                    // and commit only if the header is still the one read.
                    if isEncrypted { try followEncryptionHeader(shared) }
                } else {
                    recording = nil
                    reader = try run { try engine.latest() }
                }
                let outcome = try attempt(reader)
                if !outcome.batch.isEmpty {
                    let counted = try putCounts(outcome.counts, reader: reader, into: outcome.batch)
                    do {
                        try commit(outcome.batch, conditions: recording?.conditions, sync: sync, counted: counted)
                    } catch let error as StorageError where error.code == .conflict {
                        if attempts < max(1, options.maxCommitAttempts) { continue }
                        throw .conflict(attempts: attempts, detail: error.message)
                    } catch {
                        throw BuriError.wrap(error)
                    }
                }
                for hook in outcome.hooks { hook() }
                return outcome.result
            }
        }
    }

    /// Runs one direct writer and commits what it wrote (see ``committing(sync:_:)``).
    func performWrite<R>(sync: Bool?, _ body: (Writer) throws(BuriError) -> R) throws(BuriError) -> R {
        try committing(sync: sync ?? options.syncWrites) { reader throws(BuriError) -> Attempt<R> in
            let writer = Writer(reader: reader, batch: engine.makeBatch(), transaction: nil)
            let result = try body(writer)
            return Attempt(batch: writer.batch, hooks: writer.hooks, result: result, counts: writer.counts)
        }
    }

    /// Runs `body` as one transaction: everything it stores and deletes, in any number of buckets,
    /// is committed together when it returns, or not at all if it throws.
    ///
    /// Inside, use the transaction's buckets (`tx.bucket(Person.self)`): they read the
    /// transaction's own writes, check unique indexes across all of it, and write into it. Writers
    /// are serialised, so on a database only this process writes to, nothing can conflict. On an
    /// engine shared by several clients every read is a condition of the commit; if another client
    /// changed what the transaction read, `body` runs again from the start (so keep it free of
    /// other side effects), up to `options.maxCommitAttempts` times, then
    /// ``BuriError/conflict(attempts:detail:)`` is thrown.
    ///
    /// ```swift
    /// try db.write { tx in
    ///     let people = try tx.bucket(Person.self)
    ///     let orders = try tx.bucket(Order.self)
    ///     try orders.store(order)
    ///     try people.store(customer)        // both or neither
    /// }
    /// ```
    ///
    /// Each operation inside is atomic on its own, like a statement in SQL: a store, batch store,
    /// delete or `deleteAll` that throws (a unique violation, say) leaves nothing in the
    /// transaction, so the closure may catch the error and go on; what it committed is exactly
    /// the operations that succeeded.
    ///
    /// ```swift
    /// try db.write { tx in
    ///     let people = try tx.bucket(Person.self)
    ///     do { try people.store([anna, lars]) } catch BuriError.uniqueViolation { }  // neither stored
    ///     try people.store(dirk)                                                     // committed
    /// }
    /// ```
    public func write<R>(_ body: (BuriTransaction) throws -> R) throws -> R {
        try committing(sync: options.syncWrites) { base throws(BuriError) -> Attempt<Result<R, any Error>> in
            let transaction = BuriTransaction(database: self, base: base, isWritable: true)
            defer { transaction.finish() }
            do {
                let result = try Self.$activeWriter.withValue(ObjectIdentifier(self)) { try body(transaction) }
                return Attempt(
                    batch: transaction.pending.batch(for: engine), hooks: transaction.hooks, result: .success(result),
                    counts: transaction.counts)
            } catch {
                // Rolled back: the pending writes are dropped, nothing is committed.
                return Attempt(batch: engine.makeBatch(), hooks: [], result: .failure(error))
            }
        }.get()
    }

    /// Runs `body` with one consistent snapshot of every bucket: nothing committed meanwhile is
    /// seen, in any of them. Writers go on undisturbed.
    ///
    /// ```swift
    /// let (people, orders) = try db.read { tx in
    ///     (try tx.bucket(Person.self).count(), try tx.bucket(Order.self).count())
    /// }
    /// ```
    public func read<R>(_ body: (BuriTransaction) throws -> R) throws -> R {
        let transaction = BuriTransaction(database: self, base: try snapshot(), isWritable: false)
        defer { transaction.finish() }
        return try body(transaction)
    }
}

/// One transaction: a consistent view of every bucket and, in ``BuriDatabase/write(_:)-1pxia``, the
/// writes that will commit together. Its buckets work only while its closure runs, on its thread.
///
/// ```swift
/// try db.write { tx in
///     let people = try tx.bucket(Person.self)
///     if let p = try people.object(forKey: "p1") { try people.store(p.renamed("Dirk")) }
/// }
/// ```
public final class BuriTransaction: @unchecked Sendable {
    // @unchecked: a transaction is used by the closure it was given to, on that closure's thread;
    // its buckets refuse to work once the closure has returned.
    let database: BuriDatabase
    let base: any StorageReader
    /// Whether this transaction may write (``BuriDatabase/write(_:)-1pxia``) or only read.
    public let isWritable: Bool
    let pending = PendingWrites()
    var hooks: [() -> Void] = []
    /// Net record changes per bucket id of the whole transaction, written as counts at its commit.
    var counts = CountDeltas()
    private var isFinished = false

    init(database: BuriDatabase, base: any StorageReader, isWritable: Bool) {
        self.database = database
        self.base = base
        self.isWritable = isWritable
    }

    func finish() { isFinished = true }

    func checkOpen() throws(BuriError) {
        if isFinished {
            throw .invalidTransaction(reason: "the transaction has ended; use its buckets only inside its closure")
        }
        try database.checkOpen()
    }

    /// What the transaction sees: its base with its own writes on top.
    func reader() throws(BuriError) -> any StorageReader {
        try checkOpen()
        return pending.isEmpty ? base : pending.reader(over: base)
    }

    /// Runs one operation of the transaction (a store, a delete, a `deleteAll`, a bucket made):
    /// the statement-level savepoint every write inside `write { }` goes through. If `body` throws,
    /// everything it did to the transaction is undone before the error is passed on: its pending
    /// writes, its object-count changes and its after-commit hooks. A closure that catches the
    /// error and goes on therefore commits nothing of the failed operation, as SQLite rolls back a
    /// failed statement but not its transaction. Nested statements nest their savepoints.
    func statement<R>(_ body: (Writer) throws(BuriError) -> R) throws(BuriError) -> R {
        guard isWritable else {
            throw .invalidTransaction(reason: "this transaction only reads (`db.read`); write inside `db.write { }`")
        }
        let writer = Writer(reader: try reader(), batch: pending, transaction: self)
        let writes = pending.savepoint()
        let savedCounts = counts
        let savedHooks = hooks.count
        do {
            return try body(writer)
        } catch {
            pending.rollback(to: writes)
            counts = savedCounts
            if hooks.count > savedHooks { hooks.removeSubrange(savedHooks...) }
            throw error
        }
    }

    /// The bucket for `T` as this transaction sees it. A bucket that does not exist yet is created
    /// with the transaction (in a writing transaction). Index changes are not made inside a
    /// transaction: if `T` declares other indexes than the stored bucket has, open it once with
    /// ``BuriDatabase/bucket(_:named:batchSize:progress:)`` first.
    public func bucket<T: BuriSupport>(
        _ type: T.Type = T.self, named name: String? = nil
    ) throws(BuriError) -> Bucket<T> {
        let schema = T.buri
        let bucketName = name ?? schema.bucketName
        try database.validateBucketName(bucketName)
        try schema.checkDeclarations(bucket: bucketName)
        let reader = try reader()
        let generation = database.catalogGeneration(bucketName)
        if let stored = try database.bucketInfo(named: bucketName, reader: reader) {
            let evolution = BuriDatabase.evolution(of: stored, to: schema)
            if let index = evolution.toBuild.first {
                throw .invalidIndexDefinition(
                    bucket: bucketName, index: index.name,
                    reason:
                        "the stored bucket does not have this index as declared; open the bucket once with `db.bucket(\(T.self).self)` outside the transaction, which builds it"
                )
            }
            if let index = evolution.dropped.first {
                throw .invalidIndexDefinition(
                    bucket: bucketName, index: index.name,
                    reason:
                        "the stored bucket has an index \(T.self) does not declare; open the bucket once with `db.bucket(\(T.self).self)` outside the transaction, which drops it"
                )
            }
            return Bucket(
                raw: RawBucket(database: database, descriptor: stored, transaction: self, generation: generation),
                schema: schema)
        }
        guard isWritable else {
            throw .unknownBucket(name: bucketName, known: try database.bucketNames(reader: reader))
        }
        let empty = BucketDescriptor(
            id: try database.nextBucketId(reader: reader), name: bucketName, keyField: schema.keyField)
        let descriptor = BuriDatabase.evolution(of: empty, to: schema).updated
        try database.validate(descriptor)
        try statement { writer throws(BuriError) in
            try database.saveDescriptor(descriptor, into: writer.batch)
            // The id is given for good (docs/FORMAT.md §6a), in the same commit as the bucket.
            writer.batch.put(Keyspace.bucketIdsKey, Keyspace.bucketIdsValue(descriptor.id))
        }
        return Bucket(raw: RawBucket(database: database, descriptor: descriptor, transaction: self), schema: schema)
    }

    /// An untyped view of an existing bucket, as this transaction sees it.
    public func rawBucket(named name: String) throws(BuriError) -> RawBucket {
        let reader = try reader()
        guard let descriptor = try database.bucketInfo(named: name, reader: reader) else {
            throw .unknownBucket(name: name, known: try database.bucketNames(reader: reader))
        }
        return RawBucket(database: database, descriptor: descriptor, transaction: self)
    }
}
