// The engines (LevelDB, the default; in-memory) come with Buri: an app that imports Buri opens
// a path, a temporary or an in-memory database without importing them itself.
@_exported import BuriEngines
import BuriStorage
import Synchronization

/// How to open a Buri database, whatever its engine. An engine's own options are given where that
/// engine is made: LevelDB's to the calls that open a directory (``BuriDatabase/init(path:options:levelDB:)``,
/// ``BuriDatabase/temporary(options:levelDB:)``, …) or to its kind in a `StorageEngines` registry.
///
/// ```swift
/// var options = BuriOptions()
/// options.syncWrites = true          // every store survives a power cut once it returns
/// let db = try BuriDatabase(path: "people.buri", options: options)
/// ```
public struct BuriOptions: Sendable {
    /// Create the database if the directory has none (or holds an empty LevelDB database).
    /// With `false`, opening anything but an existing Buri database fails and writes nothing. Default `true`.
    public var createIfMissing: Bool = true
    /// Flush every write to stable storage before returning (see the README's durability model).
    /// Default `false`: writes survive a process crash but the last few may be lost in a power cut.
    public var syncWrites: Bool = false
    /// How many times a write or transaction is tried on a shared engine when another client's
    /// commit conflicts with what it read, before ``BuriError/conflict(attempts:detail:)``. Default 8.
    public var maxCommitAttempts: Int = 8
    /// Purge the generations `deleteAll` retires on a background thread, and resume pending purges
    /// at open. Default `true`. With `false`, retired generations stay (listed by
    /// ``BuriDatabase/pendingPurges()``) until ``BuriDatabase/purgeRetiredBuckets()`` is called.
    public var purgesInBackground: Bool = true
    /// The key of an encrypted database (`DatabaseKey` from the `BuriEncryption` product): a new
    /// database is created encrypted with it, an encrypted one opens only with it. `nil` (the
    /// default) opens plaintext databases, and refuses encrypted ones with
    /// ``BuriError/encryptionKeyRequired(path:)``. See `docs/SECURITY.md` for what is sealed.
    ///
    /// ```swift
    /// var options = BuriOptions()
    /// options.encryption = try DatabaseKey(passphrase: "correct horse battery staple")
    /// let db = try BuriDatabase(path: "notes.buri", options: options)
    /// ```
    public var encryption: (any DatabaseEncryption)?
    /// Whether opening a *plaintext* database with ``encryption`` set begins encrypting it online
    /// (`true`) instead of failing with ``BuriError/notEncrypted(path:)`` (`false`, the default).
    ///
    /// Beginning is one commit: the encryption header, and the key `00 "encrypting"` saying that
    /// plaintext records and named values are still read. From then on every write is sealed, the
    /// database needs the key to open, and ``BuriDatabase/finishEncryption(batchSize:progress:)``
    /// copies each bucket into a sealed generation in bounded batches while the application goes
    /// on reading and writing. A numeric index must be named in ``plaintextIndexes``.
    ///
    /// ```swift
    /// var options = BuriOptions()
    /// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")
    /// options.encryptsPlaintextDatabase = true
    /// options.plaintextIndexes = ["day"]
    /// let db = try BuriDatabase(path: "notes.buri", options: options)
    /// try db.finishEncryption()
    /// ```
    public var encryptsPlaintextDatabase = false
    /// The indexes (by name, in every bucket) that keep readable values when
    /// ``encryptsPlaintextDatabase`` begins encrypting a plaintext database: their catalog entries
    /// are declared plaintext in the commit that begins it. A numeric index must be among them
    /// (numbers are stored in their order); any binary or text index may be. Names are compared as
    /// bytes.
    public var plaintextIndexes: [String] = []
    /// How large reads are spread over threads (``ParallelDecoding``). Not public: the tests make
    /// it small, so that reads of a few objects take the parallel path too.
    var parallelDecoding = ParallelDecoding.Tuning.standard

    public init() {}
}

/// An open Buri database: buckets of objects and their indexes, on a storage engine.
///
/// Open one per path and share it: it is safe to use from many threads at once. LevelDB locks
/// the directory, so a second `BuriDatabase` on the same path — in this process or another — fails
/// with ``BuriError/storage(_:)`` whose code is `databaseInUse`.
///
/// ```swift
/// let db = try BuriDatabase(path: "people.buri")      // LevelDB in a directory
/// let scratch = try BuriDatabase.inMemory()                // gone when closed
/// let temp = try BuriDatabase.temporary()              // LevelDB in a directory removed on close
/// let people = try db.bucket(Person.self)
/// try people.store(Person(objectId: "1", name: "Dirk", locale: "EN", age: 20))
/// db.close()
/// ```
///
/// ## Topics
///
/// ### Opening
///
/// - ``init(path:options:levelDB:)``
/// - ``init(location:options:engines:)``
/// - ``create(location:options:engines:)``
/// - ``inMemory(options:)``
/// - ``temporary(options:levelDB:)``
/// - ``init(engine:options:closesEngine:)``
///
/// ### Buckets
///
/// - ``bucket(_:named:batchSize:progress:)``
/// - ``bucketNames()``
/// - ``bucketInfo(named:)``
/// - ``rawBucket(named:)``
/// - ``dropBucket(named:)``
///
/// ### Transactions
///
/// - ``write(_:)-1pxia``
/// - ``write(_:)-8wiy5``
/// - ``read(_:)-13h2a``
/// - ``read(_:)-7mihn``
/// - ``backup(to:levelDB:)``
///
/// ### Encryption at rest
///
/// - ``isEncrypted``
/// - ``changeEncryptionKey(to:)``
/// - ``isBeingEncrypted``
/// - ``finishEncryption(batchSize:progress:)``
/// - ``storesTokens(for:)``
///
/// ### Life cycle
///
/// - ``close()``
/// - ``formatVersion``
public final class BuriDatabase: Sendable {
    /// Where the database lives: its directory, `:memory:`, or the engine's location.
    public let path: String
    /// The format version in the database's header. A database of an older version this library
    /// reads (version 1) keeps its header until the first write through this library, which
    /// raises it to ``supportedFormatVersion`` in the same atomic commit (so older Buri versions,
    /// which would misread what is written now, refuse it from then on).
    ///
    /// ```swift
    /// let db = try BuriDatabase(path: "old.buri")   // a version 1 database
    /// db.formatVersion                              // 1
    /// try db.bucket(Person.self).store(person)
    /// db.formatVersion                              // 2
    /// ```
    public var formatVersion: Int { Int(headerVersion.load(ordering: .acquiring)) }
    /// The version in the header as stored.
    private let headerVersion: Atomic<UInt16>
    /// The storage engine underneath. In an encrypted database it seals and opens values on their
    /// way to and from ``storedEngine``, so reads through it see plaintext.
    public let engine: any StorageEngine
    /// The engine as it stores the data: the same as ``engine`` unless the database is encrypted,
    /// where its values are sealed (a backup copies these bytes).
    public let storedEngine: any StorageEngine
    /// Whether the database is encrypted at rest (opened with ``BuriOptions/encryption``).
    public var isEncrypted: Bool { engine !== storedEngine }
    /// The keyed tokens of an encrypted database's private indexes; `nil` for a plaintext one.
    let indexTokens: IndexTokens?
    /// Set while the database is being encrypted online (``finishEncryption(batchSize:progress:)``).
    let plaintextPhase: PlaintextPhase?
    let options: BuriOptions
    /// The key this handle holds for the encryption header: `options.encryption` until
    /// ``changeEncryptionKey(to:)`` replaces it (the next change starts from the new key).
    let currentEncryption: Mutex<(any DatabaseEncryption)?>
    /// The encryption header this handle's keys were unlocked from (or last followed, on a shared
    /// engine): a commit on a shared engine reads the stored one and follows it if it changed.
    let knownEncryptionHeader: Mutex<[UInt8]?>
    /// Whether ``close()`` closes the engine too.
    let closesEngine: Bool
    /// Serialises writers so that reading an object's old index entries and replacing them is
    /// atomic with respect to every other writer (LevelDB itself serialises only the batches).
    let writeLock = Mutex<Void>(())
    /// Text segments read lately, decoded and checked (a segment's key is never reused for other
    /// bytes: each segment gets a random id when written).
    let textSegments = TextSegmentCache()
    /// When this process merges each bucket's text segments next.
    let segmentMerges = SegmentMergeSchedule()
    /// Set by ``close()`` (the engine may stay open for other databases sharing it).
    private let closed = Mutex(false)
    /// How many times each bucket's catalog entry has been rewritten or dropped by this process.
    /// A ``RawBucket`` remembers the count it was made at, so a `Bucket` value opened before its
    /// bucket was redefined (indexes changed by another `Bucket` type) cannot write stale entries.
    /// Keyed by the name's UTF-8 bytes: canonically equal names ("\u{E9}", "e\u{301}") are two buckets.
    private let catalogGenerations = Mutex<[[UInt8]: Int]>([:])
    /// Routes the engine's commits to change streams and live queries (observes only while any exist).
    let changeHub: ChangeHub
    /// Where retired bucket ids went, for handles made before a generation switch.
    let generations: BucketGenerations
    /// The background purge of retired generations.
    let purger = Purger()
    /// The lease this handle's stages name as their owner on a shared engine (granted when it first stages).
    let stageLease = StageLease()

    /// The format version this library writes and the newest it reads.
    public static let supportedFormatVersion = Int(Keyspace.formatVersion)

    /// Opens the Buri database in directory `path` (LevelDB), creating it if allowed.
    ///
    /// `levelDB` are the LevelDB options it is opened with (`LevelDBOptions.buriDefaults`
    /// unless given; `createIfMissing` follows `options`). With Buri's default `paranoidChecks`,
    /// a log holding a damaged record is reported as damage rather than its writes dropped.
    ///
    /// ```swift
    /// var levelDB = LevelDBOptions.buriDefaults
    /// levelDB.blockCacheSize = 256 << 20
    /// let db = try BuriDatabase(path: "people.buri", levelDB: levelDB)
    /// ```
    ///
    /// - Throws: ``BuriError/notABuriDatabase(path:)`` for a LevelDB database Buri did not create,
    ///   ``BuriError/unsupportedFormat(path:found:supported:)`` for one written by a newer Buri
    ///   (neither writes anything), ``BuriError/damaged(path:bucket:reason:)`` for damaged files
    ///   (a log record or table block failing its checksum; nothing is dropped or changed — salvage
    ///   with ``repair(path:options:levelDB:)``), ``BuriError/storage(_:)`` for other storage errors such as
    ///   a database in use by another handle or process.
    public convenience init(
        path: String, options: BuriOptions = BuriOptions(), levelDB: LevelDBOptions = .buriDefaults
    ) throws(BuriError) {
        var storageOptions = levelDB
        storageOptions.createIfMissing = options.createIfMissing
        let engine: LevelDBEngine
        do {
            engine = try LevelDBEngine(path: path, options: storageOptions)
        } catch {
            throw Self.openFailure(error, path: path)
        }
        try self.init(engine: engine, options: options)
    }

    /// Opens the Buri database at `location` on the engine a registry picks for it: a directory
    /// (LevelDB, the default kind), or any location a registered kind claims (`etcd://…` once
    /// `EtcdEngine.Kind` is registered). The one way tools open what a user names; engine options
    /// are those of the registered kinds. Creates the database if `options.createIfMissing`.
    ///
    /// ```swift
    /// var engines = StorageEngines.standard
    /// engines.register(EtcdEngine.Kind())                  // from BuriEtcd
    /// let local = try BuriDatabase(location: "people.buri", engines: engines)
    /// let shared = try BuriDatabase(location: "etcd://127.0.0.1:2379/people", engines: engines)
    /// ```
    ///
    /// - Throws: what ``init(path:options:levelDB:)`` throws for a directory; for other engines,
    ///   ``BuriError/storage(_:)`` with the engine's error (`invalidArgument` for a malformed
    ///   location), and the format errors of ``init(engine:options:closesEngine:)``.
    public convenience init(
        location: String, options: BuriOptions = BuriOptions(), engines: StorageEngines = .standard
    ) throws(BuriError) {
        let mode: StorageOpenOptions.Mode = options.createIfMissing ? .openOrCreate : .existing
        try self.init(engine: Self.openEngine(location, mode: mode, engines: engines), options: options)
    }

    /// Creates a new Buri database at `location` (see ``init(location:options:engines:)``),
    /// failing if the location holds data already — a directory with a database, an etcd name
    /// with keys — so that two processes creating one database at once never share it unknowingly.
    ///
    /// ```swift
    /// let db = try BuriDatabase.create(location: "new.buri")
    /// ```
    ///
    /// - Throws: ``BuriError/storage(_:)`` when the location holds data (LevelDB's message says
    ///   `error_if_exists`), and what ``init(location:options:engines:)`` throws.
    public static func create(
        location: String, options: BuriOptions = BuriOptions(), engines: StorageEngines = .standard
    ) throws(BuriError) -> BuriDatabase {
        var options = options
        options.createIfMissing = true
        return try BuriDatabase(engine: openEngine(location, mode: .createNew, engines: engines), options: options)
    }

    /// The engine for `location`, with damage met at open described as ``init(path:options:levelDB:)`` does.
    private static func openEngine(
        _ location: String, mode: StorageOpenOptions.Mode, engines: StorageEngines
    ) throws(BuriError) -> any StorageEngine {
        let kind = engines.kind(for: location)
        do {
            try kind.validate(location)
            return try kind.open(location, options: StorageOpenOptions(mode: mode))
        } catch {
            throw kind.capabilities.contains(.files) ? openFailure(error, path: location) : .wrap(error)
        }
    }

    /// A new, empty database in memory: nothing touches the disk, and everything is gone when it
    /// is closed. For tests, previews and caches.
    ///
    /// ```swift
    /// let db = try BuriDatabase.inMemory()
    /// ```
    public static func inMemory(options: BuriOptions = BuriOptions()) throws(BuriError) -> BuriDatabase {
        var options = options
        options.createIfMissing = true
        return try BuriDatabase(engine: MemoryEngine(), options: options)
    }

    /// A new, empty database in a fresh directory under the system's temporary directory,
    /// removed with everything in it when the database is closed. `levelDB`: the LevelDB options
    /// (`LevelDBOptions.buriDefaults` unless given).
    ///
    /// ```swift
    /// let db = try BuriDatabase.temporary()
    /// defer { db.close() }   // the directory is gone after this
    /// ```
    public static func temporary(
        options: BuriOptions = BuriOptions(), levelDB: LevelDBOptions = .buriDefaults
    ) throws(BuriError) -> BuriDatabase {
        var options = options
        options.createIfMissing = true
        let engine: LevelDBEngine
        do {
            engine = try LevelDBEngine.temporary(options: levelDB)
        } catch {
            throw .storage(error)
        }
        return try BuriDatabase(engine: engine, options: options)
    }

    /// Opens a Buri database on `engine`, creating its header if the engine is empty and
    /// `options.createIfMissing` allows. With `closesEngine` (the default), ``close()`` closes the
    /// engine too; pass `false` to open several databases over one shared engine.
    ///
    /// ```swift
    /// let engine = MemoryEngine(shared: true)
    /// let a = try BuriDatabase(engine: engine, closesEngine: false)
    /// let b = try BuriDatabase(engine: engine, closesEngine: false)   // two clients of one store
    /// ```
    public init(
        engine: any StorageEngine, options: BuriOptions = BuriOptions(), closesEngine: Bool = true
    ) throws(BuriError) {
        self.path = engine.location
        self.options = options
        currentEncryption = Mutex(options.encryption)
        self.storedEngine = engine
        self.closesEngine = closesEngine
        let generations = BucketGenerations()
        self.generations = generations
        let opened: OpenedHeader
        do {
            opened = try Self.openHeader(engine, path: engine.location, options: options)
        } catch {
            if closesEngine { engine.close() }
            throw BuriError.wrap(error)
        }
        headerVersion = Atomic(opened.version)
        let phase = opened.encrypting ? PlaintextPhase() : nil
        plaintextPhase = phase
        knownEncryptionHeader = Mutex(opened.encryptionHeader)
        // Another client of a shared engine may rotate the data key: its cipher follows the header.
        let following = engine.isShared ? opened.cipher.map { FollowingCipher(base: $0) } : nil
        let cipher: (any DatabaseCipher)? = following ?? opened.cipher
        self.engine = cipher.map { SealedEngine(base: engine, cipher: $0, phase: phase) } ?? engine
        indexTokens = cipher.map { IndexTokens(cipher: $0) }
        changeHub = ChangeHub(engine: self.engine, generations: generations)
        following?.refresh.withLock {
            $0 = { [weak self] in try? self?.followStoredEncryptionHeader() }
        }
        // A marker that does not parse is reported by `check`; it does not keep the database closed.
        try? resumePurges()
    }

    /// What opening found in the database header: the format version, the cipher of an encrypted
    /// database unlocked by `options.encryption`, and whether it is being encrypted online.
    struct OpenedHeader {
        var version: UInt16
        var cipher: (any DatabaseCipher)?
        var encrypting = false
        /// The encryption header the cipher was unlocked from.
        var encryptionHeader: [UInt8]? = nil
    }

    /// Reads (or, on an empty engine, writes) the database header (see ``OpenedHeader``).
    private static func openHeader(
        _ engine: any StorageEngine, path: String, options: BuriOptions
    ) throws -> OpenedHeader {
        // Two clients of a shared engine creating one database at once: the one whose header
        // commit conflicts reads again and finds the other's header.
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try openHeaderOnce(engine, path: path, options: options)
            } catch let error as StorageError where error.code == .conflict && attempt < 3 {
                continue
            }
        }
    }

    private static func openHeaderOnce(
        _ engine: any StorageEngine, path: String, options: BuriOptions
    ) throws -> OpenedHeader {
        let encryption = options.encryption
        let snapshot = try engine.snapshot()
        if let header = try snapshot.get(Keyspace.headerKey) {
            guard let version = Keyspace.parseHeader(header) else { throw BuriError.notABuriDatabase(path: path) }
            guard version <= Keyspace.formatVersion else {
                throw BuriError.unsupportedFormat(
                    path: path, found: Int(version), supported: Int(Keyspace.formatVersion))
            }
            let stored = try snapshot.get(Keyspace.encryptionKey)
            switch (stored, encryption) {
            case (nil, nil): return OpenedHeader(version: version)
            case (nil, .some(let encryption)):
                guard options.encryptsPlaintextDatabase else { throw BuriError.notEncrypted(path: path) }
                let (cipher, header) = try beginEncryption(
                    engine, snapshot: snapshot, encryption: encryption, plaintextIndexes: options.plaintextIndexes,
                    path: path)
                return OpenedHeader(
                    version: Keyspace.formatVersion, cipher: cipher, encrypting: true, encryptionHeader: header)
            case (.some, nil): throw BuriError.encryptionKeyRequired(path: path)
            case (.some(let stored), .some(let encryption)):
                let cipher = try unlock(encryption, header: stored, path: path)
                let encrypting = try snapshot.get(Keyspace.encryptionStateKey) != nil
                return OpenedHeader(version: version, cipher: cipher, encrypting: encrypting, encryptionHeader: stored)
            }
        }
        let cursor = try snapshot.cursor(in: .all)
        if try cursor.next() { throw BuriError.notABuriDatabase(path: path) }
        // An empty store becomes a Buri database only when creating is allowed, so read-only
        // tools never write into a directory they were merely pointed at.
        guard options.createIfMissing else { throw BuriError.notABuriDatabase(path: path) }
        let batch = engine.makeBatch()
        batch.put(Keyspace.headerKey, Keyspace.headerValue())
        // An encrypted database is encrypted from its first commit: no reader ever sees it plaintext.
        var cipher: (any DatabaseCipher)?
        var encryptionHeader: [UInt8]?
        if let encryption {
            let header: [UInt8]
            do { header = try encryption.newHeader() } catch {
                throw BuriError.invalidEncryptionKey(reason: error.description)
            }
            cipher = try unlock(encryption, header: header, path: path)
            batch.put(Keyspace.encryptionKey, header)
            encryptionHeader = header
        }
        // Conditions: on a shared engine, two clients creating one database must not both succeed
        // in writing different headers (they write the same bytes, but an engine with data must fail).
        try engine.commit(
            batch, conditions: StorageConditions(snapshot: snapshot, keys: [Keyspace.headerKey], ranges: [.all]),
            sync: true)
        return OpenedHeader(version: Keyspace.formatVersion, cipher: cipher, encryptionHeader: encryptionHeader)
    }

    /// The cipher `encryption` unlocks from the stored encryption header, or the error saying why not.
    static func unlock(
        _ encryption: any DatabaseEncryption, header: [UInt8], path: String
    ) throws(BuriError)
        -> any DatabaseCipher
    {
        do {
            return try encryption.unlock(header: header)
        } catch {
            throw keyFailure(error, path: path)
        }
    }

    /// The error for a key that `unlock` or `rekeyedHeader` refused (opening and changing the key
    /// report the same failures alike).
    static func keyFailure(_ error: EncryptionFailure, path: String) -> BuriError {
        switch error {
        case .invalidKey(let reason): return .invalidEncryptionKey(reason: reason)
        case .malformedHeader(let reason):
            return .wrongEncryptionKey(path: path, reason: "its encryption header is unreadable: \(reason)")
        case .wrongKey(let reason), .authenticationFailed(let reason):
            return .wrongEncryptionKey(path: path, reason: reason)
        }
    }

    /// The error for a failed LevelDB open. Damage is most often a write-ahead log record that
    /// fails its checksum (paranoid checks refuse it rather than drop it): name the record.
    /// `logs` is the directory whose logs were replayed, when not `path` (a snapshot of its files).
    static func openFailure(_ error: StorageError, path: String, logs: String? = nil) -> BuriError {
        guard error.code == .corruption else { return BuriError.wrap(error) }
        var reason = "opening it met \(error.message)"
        if let records = try? LevelDBEngine.damagedLogRecords(path: logs ?? path), !records.isEmpty {
            if !records.allSatisfy({ error.message.contains($0.file) }) {
                reason +=
                    " in " + records.map { "\($0.file) at byte \($0.offset) (\($0.reason))" }.joined(separator: ", ")
            }
            reason += "; Buri does not open a database whose log holds damaged writes rather than drop them"
        }
        return .damaged(path: path, bucket: nil, reason: reason)
    }

    /// Closes the database. Buckets obtained from it stop working; their calls throw
    /// ``BuriError/databaseClosed(path:)``. Idempotent.
    public func close() {
        closed.withLock { $0 = true }
        // The purge in progress finishes its chunk; the next open resumes it.
        purger.stop()
        changeHub.close()
        // Stages this handle left unpublished are abandoned now: others may purge or take them up.
        stageLease.release()
        if closesEngine { engine.close() }
    }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { closed.withLock { $0 } || engine.isClosed }

    /// Runs a storage call, turning engine errors into Buri's.
    @inline(__always)
    func run<R>(_ body: () throws -> R) throws(BuriError) -> R {
        do {
            return try body()
        } catch let error as StorageError where error.code == .databaseClosed {
            throw .databaseClosed(path: path)
        } catch {
            throw BuriError.wrap(error)
        }
    }

    /// Runs a storage call that reads bucket `bucket`: damage met is reported naming it.
    @inline(__always)
    func run<R>(bucket: String?, _ body: () throws -> R) throws(BuriError) -> R {
        do {
            return try run(body)
        } catch {
            throw error.attributed(to: bucket)
        }
    }

    /// A consistent view for one query (or one check).
    func snapshot() throws(BuriError) -> any StorageSnapshot {
        try checkOpen()
        return try run { try engine.snapshot() }
    }

    /// The view single point reads use: the current state, without the cost of a snapshot where
    /// the engine allows.
    func currentReader() throws(BuriError) -> any StorageReader {
        try checkOpen()
        return try run { try engine.latest() }
    }

    @inline(__always)
    func checkOpen() throws(BuriError) {
        if !closesEngine, closed.withLock({ $0 }) { throw .databaseClosed(path: path) }
    }

    // MARK: Catalog

    /// The names of all buckets, in bytewise order.
    /// - Throws: ``BuriError/corruption(bucket:key:index:reason:)`` for a catalog key that is not
    ///   valid UTF-8 (never a shorter list), ``BuriError/damaged(path:bucket:reason:)`` for damage.
    public func bucketNames() throws(BuriError) -> [String] {
        try bucketNames(reader: currentReader())
    }

    func bucketNames(reader: any StorageReader) throws(BuriError) -> [String] {
        try run {
            let cursor = try reader.cursor(in: Keyspace.catalogRange)
            var names: [String] = []
            while try cursor.next() {
                guard let name = Keyspace.bucketName(fromCatalogKey: cursor.key) else {
                    throw BuriError.corruption(
                        bucket: nil, key: nil, index: nil,
                        reason: "a bucket catalog key (\(cursor.key.count) bytes) is not valid UTF-8")
                }
                names.append(name)
            }
            return names
        }
    }

    /// The catalog entry of bucket `name`, or `nil` if there is no such bucket.
    public func bucketInfo(named name: String) throws(BuriError) -> BucketDescriptor? {
        try bucketInfo(named: name, reader: currentReader())
    }

    func bucketInfo(named name: String, reader: any StorageReader) throws(BuriError) -> BucketDescriptor? {
        try run(bucket: name) {
            guard let bytes = try reader.get(Keyspace.catalogKey(bucket: name)) else { return nil }
            do {
                return try BucketDescriptor.decode(bytes)
            } catch {
                throw BuriError.corruption(
                    bucket: name, key: nil, index: nil, reason: "its catalog entry does not decode: \(error)")
            }
        }
    }

    /// Every bucket's catalog entry.
    public func allBucketInfo() throws(BuriError) -> [BucketDescriptor] {
        try allBucketInfo(reader: currentReader())
    }

    func allBucketInfo(reader: any StorageReader) throws(BuriError) -> [BucketDescriptor] {
        var result: [BucketDescriptor] = []
        for name in try bucketNames(reader: reader) {
            if let info = try bucketInfo(named: name, reader: reader) { result.append(info) }
        }
        return result
    }

    /// An untyped view of an existing bucket, for tools that work without the app's Swift types.
    /// - Throws: ``BuriError/unknownBucket(name:known:)`` if there is none.
    public func rawBucket(named name: String) throws(BuriError) -> RawBucket {
        guard let descriptor = try bucketInfo(named: name) else {
            throw .unknownBucket(name: name, known: try bucketNames())
        }
        return RawBucket(database: self, descriptor: descriptor)
    }

    /// Creates bucket `name` with `indexes` (ids are assigned here) and `schemaVersion` if it does not
    /// exist, or returns the existing one unchanged.
    ///
    /// ```swift
    /// let raw = try db.createBucket(named: "Person", keyField: "id", schemaVersion: 2)
    /// ```
    public func createBucket(
        named name: String, keyField: String? = nil, indexes: [IndexDefinition] = [], schemaVersion: UInt64 = 0
    ) throws(BuriError) -> RawBucket {
        try validateBucketName(name)
        return try performWrite(sync: true) { writer throws(BuriError) -> RawBucket in
            if let existing = try bucketInfo(named: name, reader: writer.reader) {
                return RawBucket(database: self, descriptor: existing)
            }
            var descriptor = BucketDescriptor(
                id: try allocateBucketId(reader: writer.reader, batch: writer.batch), name: name, keyField: keyField,
                schemaVersion: schemaVersion)
            for var index in indexes {
                index.id = descriptor.nextIndexId
                descriptor.nextIndexId += 1
                descriptor.indexes.append(index)
            }
            try validate(descriptor)
            try saveDescriptor(descriptor, into: writer.batch)
            return RawBucket(database: self, descriptor: descriptor)
        }
    }

    /// Deletes bucket `name`: its objects, index entries and catalog entry. Nothing happens if
    /// there is no such bucket.
    ///
    /// Whatever the size of the bucket, this commits two keys at once: the catalog entry is
    /// deleted and the bucket's id is marked retired (`docs/FORMAT.md` §6a), so from that commit on
    /// the bucket is gone for every reader; its records and index entries are then purged in the
    /// background, in chunks, resuming at the next open if the process ends first (see
    /// ``pendingPurges()``). Handles of the bucket made before stop working with a typed error.
    ///
    /// ```swift
    /// try db.dropBucket(named: "Person")
    /// try db.bucketNames()   // no "Person"
    /// ```
    public func dropBucket(named name: String) throws(BuriError) {
        try performWrite(sync: true) { writer throws(BuriError) in
            guard let descriptor = try bucketInfo(named: name, reader: writer.reader) else { return }
            writer.batch.delete(Keyspace.catalogKey(bucket: name))
            writer.batch.put(Keyspace.retiredKey(bucket: descriptor.id), Keyspace.retiredValue(.purging, bucket: name))
            // Once purged, the id leaves no trace but this: no bucket made later takes it.
            try recordBucketIdGiven(descriptor.id, reader: writer.reader, batch: writer.batch)
            // Objects of other buckets referring to the dropped ones follow their delete rules.
            try applyDeleteRules(target: name, keys: nil, writer: writer)
            writer.afterCommit { [self] in
                bumpCatalogGeneration(name)
                // Views here read nothing of the retired id from now on (see `RawBucket.readView`).
                generations.forward(descriptor.id, to: BucketGenerations.dropped)
                if options.purgesInBackground { purger.kick(self) }
            }
        }
    }

    func validateBucketName(_ name: String) throws(BuriError) {
        if name.isEmpty { throw .invalidBucketName(name: name, reason: "it is empty") }
        if name.utf8.count > 1024 {
            throw .invalidBucketName(name: String(name.prefix(40)), reason: "it is longer than 1024 bytes")
        }
    }

    func validate(_ descriptor: BucketDescriptor) throws(BuriError) {
        var seen = Set<[UInt8]>()  // names as bytes: "\u{E9}" and "e\u{301}" are two names
        for index in descriptor.indexes {
            if index.name.isEmpty {
                throw .invalidIndexDefinition(
                    bucket: descriptor.name, index: index.name, reason: "an index needs a name")
            }
            if !seen.insert(Array(index.name.utf8)).inserted {
                throw .invalidIndexDefinition(
                    bucket: descriptor.name, index: index.name, reason: "two indexes have this name")
            }
            if index.components.isEmpty {
                throw .invalidIndexDefinition(
                    bucket: descriptor.name, index: index.name, reason: "an index needs at least one component")
            }
            if let fields = index.fields, fields.count != index.components.count {
                throw .invalidIndexDefinition(
                    bucket: descriptor.name, index: index.name,
                    reason: "it has \(index.components.count) components but \(fields.count) fields")
            }
            if let forms = index.fieldForms, forms.count != index.components.count {
                throw .invalidIndexDefinition(
                    bucket: descriptor.name, index: index.name,
                    reason: "it has \(index.components.count) components but \(forms.count) field forms")
            }
        }
    }

    /// Puts a descriptor into `batch`. Callers hold the write lock; the catalog generation moves
    /// on here, so views made before it stop writing even if the commit then fails (they reopen).
    func saveDescriptor(_ descriptor: BucketDescriptor, into batch: any StorageBatch) throws(BuriError) {
        // Every catalog write passes here: no index of an encrypted database stores readable
        // values unless declared so.
        try requirePlaintextDeclarations(descriptor.indexes, bucket: descriptor.name)
        let bytes: [UInt8]
        do {
            bytes = try descriptor.encoded()
        } catch {
            throw .encodingFailed(bucket: descriptor.name, key: "(catalog)", reason: String(describing: error))
        }
        batch.put(Keyspace.catalogKey(bucket: descriptor.name), bytes)
        bumpCatalogGeneration(descriptor.name)
    }

    /// Commits a batch of records or catalog entries, first raising an older database's header to
    /// this library's format version in the same batch (never claiming an older version than the
    /// data written). Raising a database older than version 4 also puts the object count of every
    /// bucket (one scan each) whose count the batch does not already hold (`counted`), so that from
    /// the header bump on every bucket has one. Callers hold the write lock.
    func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool, counted: Set<UInt32> = []) throws
    {
        let upgrading = headerVersion.load(ordering: .relaxed) < Keyspace.formatVersion
        if upgrading { batch.put(Keyspace.headerKey, Keyspace.headerValue()) }
        if headerVersion.load(ordering: .relaxed) < Keyspace.countsVersion {
            try putAllCounts(reader: engine.latest(), into: batch, except: counted)
        }
        try engine.commit(batch, conditions: conditions, sync: sync)
        if upgrading { headerVersion.store(Keyspace.formatVersion, ordering: .releasing) }
    }

    /// Gives a new bucket (or generation, or stage) its id: one more than the largest ever given
    /// (``largestBucketId(reader:)``), recorded in `batch` as the new largest (docs/FORMAT.md §6a),
    /// so that no id is ever given twice, also after its keys are purged, also by another client of
    /// a shared engine (the key is read through `reader`, so it is a condition of the commit).
    func allocateBucketId(reader: any StorageReader, batch: any StorageBatch) throws(BuriError) -> UInt32 {
        let id = try nextBucketId(reader: reader)
        batch.put(Keyspace.bucketIdsKey, Keyspace.bucketIdsValue(id))
        return id
    }

    /// Records in `batch` that id `id` was given (when no larger one is recorded): for an id given
    /// before format 5 kept the largest, whose bucket is being dropped.
    func recordBucketIdGiven(_ id: UInt32, reader: any StorageReader, batch: any StorageBatch) throws(BuriError) {
        guard try storedLargestBucketId(reader: reader) ?? 0 < id else { return }
        batch.put(Keyspace.bucketIdsKey, Keyspace.bucketIdsValue(id))
    }

    /// The largest bucket id recorded as given (format 5), if any.
    func storedLargestBucketId(reader: any StorageReader) throws(BuriError) -> UInt32? {
        guard let bytes = try run({ try reader.get(Keyspace.bucketIdsKey) }) else { return nil }
        guard let id = Keyspace.parseBucketIds(bytes) else {
            throw .corruption(
                bucket: nil, key: nil, index: nil,
                reason:
                    "the largest bucket id key (00 \"bucket-ids\") holds \(bytes.count) bytes, not 4; run `buri check --repair` to write it again"
            )
        }
        return id
    }

    /// The largest bucket id ever given: recorded (format 5), in the catalog, among the retired ids
    /// (whose keys may not be purged yet) and among those handles here may follow.
    func largestBucketId(reader: any StorageReader) throws(BuriError) -> UInt32 {
        let ids = try allBucketInfo(reader: reader).map(\.id) + retiredBuckets(reader: reader).map(\.id)
        return max(ids.max() ?? 0, generations.largestId, try storedLargestBucketId(reader: reader) ?? 0)
    }

    /// The id a new bucket would get now (read-only: nothing is recorded; see ``allocateBucketId(reader:batch:)``).
    func nextBucketId(reader: any StorageReader) throws(BuriError) -> UInt32 {
        let largest = try largestBucketId(reader: reader)
        guard largest < UInt32.max else {
            throw .invalidBucketName(
                name: "(new bucket)",
                reason:
                    "every bucket id up to \(UInt32.max) has been used; export and restore the database to renumber them"
            )
        }
        return largest + 1
    }

    func catalogGeneration(_ name: String) -> Int {
        catalogGenerations.withLock { $0[Array(name.utf8), default: 0] }
    }

    func bumpCatalogGeneration(_ name: String) {
        catalogGenerations.withLock { $0[Array(name.utf8), default: 0] += 1 }
    }
}
