import LevelDB
import Synchronization

/// How to open a Buri database.
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
    /// The underlying LevelDB options. Buri's defaults add a 10-bit bloom filter (fast misses when
    /// storing new objects) and a 32 MiB block cache.
    public var storage: Options

    public init() {
        var storage = Options()
        storage.bloomFilterBitsPerKey = 10
        storage.blockCacheSize = 32 << 20
        storage.writeBufferSize = 8 << 20
        self.storage = storage
    }
}

/// An open Buri database: a directory holding buckets of objects and their indexes.
///
/// Open one per path and share it: it is safe to use from many threads at once. LevelDB locks
/// the directory, so a second `BuriDatabase` on the same path — in this process or another — fails
/// with ``BuriError/storage(_:)`` carrying ``LevelDBError/Code/databaseInUse``.
///
/// ```swift
/// let db = try BuriDatabase(path: "people.buri")
/// let people = try db.bucket(Person.self)
/// try people.store(Person(objectId: "1", name: "Dirk", locale: "EN", age: 20))
/// db.close()
/// ```
///
/// ## Topics
/// - Buckets: ``bucket(_:named:progress:)``, ``bucketNames()``, ``bucketInfo(named:)``, ``rawBucket(named:)``, ``dropBucket(named:)``
/// - Life cycle: ``close()``, ``formatVersion``
public final class BuriDatabase: Sendable {
    /// The directory of the database.
    public let path: String
    /// The format version in the database's header. A database of an older version this library
    /// reads (version 1) keeps its header until the first write through this library, which
    /// raises it to ``supportedFormatVersion`` in the same atomic batch (so older Buri versions,
    /// which would misread what is written now, refuse it from then on).
    ///
    /// ```swift
    /// let db = try BuriDatabase(path: "old.buri")   // a version 1 database
    /// db.formatVersion                              // 1
    /// try db.bucket(Person.self).store(person)
    /// db.formatVersion                              // 2
    /// ```
    public var formatVersion: Int { Int(headerVersion.load(ordering: .acquiring)) }
    /// The version in the header on disk.
    private let headerVersion: Atomic<UInt16>
    let storage: Database
    let options: BuriOptions
    /// Serialises writers so that reading an object's old index entries and replacing them is
    /// atomic with respect to every other writer (LevelDB itself serialises only the batches).
    let writeLock = Mutex<Void>(())
    /// How many times each bucket's catalog entry has been rewritten or dropped by this process.
    /// A ``RawBucket`` remembers the count it was made at, so a `Bucket` value opened before its
    /// bucket was redefined (indexes changed by another `Bucket` type) cannot write stale entries.
    private let catalogGenerations = Mutex<[String: Int]>([:])

    /// The format version this library writes and the newest it reads.
    public static let supportedFormatVersion = Int(Keyspace.formatVersion)

    /// Opens the Buri database in directory `path`, creating it if allowed.
    ///
    /// - Throws: ``BuriError/notABuriDatabase(path:)`` for a LevelDB database Buri did not create,
    ///   ``BuriError/unsupportedFormat(path:found:supported:)`` for one written by a newer Buri
    ///   (neither writes anything), ``BuriError/storage(_:)`` for LevelDB errors such as a database
    ///   in use by another handle or process.
    public init(path: String, options: BuriOptions = BuriOptions()) throws(BuriError) {
        self.path = path
        self.options = options
        var storageOptions = options.storage
        storageOptions.createIfMissing = options.createIfMissing
        let database: Database
        do {
            database = try Database(path: path, options: storageOptions)
        } catch {
            throw .storage(error)
        }
        do {
            if let header = try database.get(Keyspace.headerKey) {
                guard let version = Keyspace.parseHeader(header) else { throw BuriError.notABuriDatabase(path: path) }
                guard version <= Keyspace.formatVersion else {
                    throw BuriError.unsupportedFormat(path: path, found: Int(version), supported: Int(Keyspace.formatVersion))
                }
                headerVersion = Atomic(version)
            } else {
                let cursor = try database.cursor()
                if try cursor.next() { throw BuriError.notABuriDatabase(path: path) }
                // An empty LevelDB database becomes a Buri database only when creating is allowed,
                // so read-only tools never write into a directory they were merely pointed at.
                guard options.createIfMissing else { throw BuriError.notABuriDatabase(path: path) }
                try database.put(Keyspace.headerKey, Keyspace.headerValue(), options: .sync)
                headerVersion = Atomic(Keyspace.formatVersion)
            }
        } catch {
            database.close()
            throw BuriError.wrap(error)
        }
        storage = database
    }

    /// Closes the database. Buckets obtained from it stop working; their calls throw
    /// ``BuriError/databaseClosed(path:)``. Idempotent.
    public func close() { storage.close() }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { storage.isClosed }

    var writeOptions: WriteOptions { options.syncWrites ? .sync : .async }

    /// Runs a storage call, turning LevelDB errors into Buri's.
    @inline(__always)
    func run<R>(_ body: () throws -> R) throws(BuriError) -> R {
        do {
            return try body()
        } catch let error as LevelDBError where error.code == .databaseClosed {
            throw .databaseClosed(path: path)
        } catch {
            throw BuriError.wrap(error)
        }
    }

    // MARK: Catalog

    /// The names of all buckets, in bytewise order.
    public func bucketNames() throws(BuriError) -> [String] {
        try run {
            try storage.entries(in: Keyspace.catalogRange).compactMap { Keyspace.bucketName(fromCatalogKey: $0.key) }
        }
    }

    /// The catalog entry of bucket `name`, or `nil` if there is no such bucket.
    public func bucketInfo(named name: String) throws(BuriError) -> BucketDescriptor? {
        try run {
            guard let bytes = try storage.get(Keyspace.catalogKey(bucket: name)) else { return nil }
            do {
                return try BucketDescriptor.decode(bytes)
            } catch {
                throw BuriError.corruption(bucket: name, key: nil, index: nil, reason: "its catalog entry does not decode: \(error)")
            }
        }
    }

    /// Every bucket's catalog entry.
    public func allBucketInfo() throws(BuriError) -> [BucketDescriptor] {
        var result: [BucketDescriptor] = []
        for name in try bucketNames() {
            if let info = try bucketInfo(named: name) { result.append(info) }
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

    /// Creates bucket `name` with `indexes` (ids are assigned here) if it does not exist, or returns the
    /// existing one unchanged.
    public func createBucket(named name: String, keyField: String? = nil, indexes: [IndexDefinition] = []) throws(BuriError) -> RawBucket {
        try validateBucketName(name)
        return try writeLock.withLock { _ throws(BuriError) -> RawBucket in
            if let existing = try bucketInfo(named: name) { return RawBucket(database: self, descriptor: existing) }
            var descriptor = BucketDescriptor(id: try nextBucketIdLocked(), name: name, keyField: keyField)
            for var index in indexes {
                index.id = descriptor.nextIndexId
                descriptor.nextIndexId += 1
                descriptor.indexes.append(index)
            }
            try validate(descriptor)
            try saveDescriptor(descriptor, batch: nil)
            return RawBucket(database: self, descriptor: descriptor)
        }
    }

    /// Deletes bucket `name`: its objects, index entries and catalog entry, in one atomic batch.
    public func dropBucket(named name: String) throws(BuriError) {
        try writeLock.withLock { _ throws(BuriError) in
            guard let descriptor = try bucketInfo(named: name) else { return }
            let batch = WriteBatch()
            try run {
                for range in [KeyRange.prefix(Keyspace.recordPrefix(bucket: descriptor.id)), .prefix(Keyspace.indexSpacePrefix(bucket: descriptor.id))] {
                    let cursor = try storage.cursor(in: range)
                    while try cursor.next() { cursor.withKey { batch.delete($0) } }
                }
                batch.delete(Keyspace.catalogKey(bucket: name))
                try storage.write(batch, options: .sync)
                bumpCatalogGeneration(name)
            }
        }
    }

    func validateBucketName(_ name: String) throws(BuriError) {
        if name.isEmpty { throw .invalidBucketName(name: name, reason: "it is empty") }
        if name.utf8.count > 1024 { throw .invalidBucketName(name: String(name.prefix(40)), reason: "it is longer than 1024 bytes") }
    }

    func validate(_ descriptor: BucketDescriptor) throws(BuriError) {
        var seen = Set<String>()
        for index in descriptor.indexes {
            if index.name.isEmpty { throw .invalidIndexDefinition(bucket: descriptor.name, index: index.name, reason: "an index needs a name") }
            if !seen.insert(index.name).inserted {
                throw .invalidIndexDefinition(bucket: descriptor.name, index: index.name, reason: "two indexes have this name")
            }
            if index.components.isEmpty {
                throw .invalidIndexDefinition(bucket: descriptor.name, index: index.name, reason: "an index needs at least one component")
            }
            if let fields = index.fields, fields.count != index.components.count {
                throw .invalidIndexDefinition(bucket: descriptor.name, index: index.name, reason: "it has \(index.components.count) components but \(fields.count) fields")
            }
            if let forms = index.fieldForms, forms.count != index.components.count {
                throw .invalidIndexDefinition(bucket: descriptor.name, index: index.name, reason: "it has \(index.components.count) components but \(forms.count) field forms")
            }
        }
    }

    /// Writes a descriptor, into `batch` if given (whose writer must call ``headerWritten(_:)``),
    /// else on its own. Callers hold the write lock.
    func saveDescriptor(_ descriptor: BucketDescriptor, batch: WriteBatch?) throws(BuriError) {
        let bytes: [UInt8]
        do {
            bytes = try descriptor.encoded()
        } catch {
            throw .encodingFailed(bucket: descriptor.name, key: "(catalog)", reason: String(describing: error))
        }
        try run {
            if let batch {
                batch.put(Keyspace.catalogKey(bucket: descriptor.name), bytes)
            } else {
                let own = WriteBatch()
                let upgrading = upgradeHeader(in: own)
                own.put(Keyspace.catalogKey(bucket: descriptor.name), bytes)
                try storage.write(own, options: .sync)
                headerWritten(upgrading)
            }
        }
        bumpCatalogGeneration(descriptor.name)
    }

    /// Adds the header of the current format version to `batch` if the database's header is older,
    /// and says whether it did. Every write of records or catalog entries goes through this, so
    /// the header never claims an older version than the data written. Callers hold the write lock.
    @inline(__always)
    func upgradeHeader(in batch: WriteBatch) -> Bool {
        guard headerVersion.load(ordering: .relaxed) < Keyspace.formatVersion else { return false }
        batch.put(Keyspace.headerKey, Keyspace.headerValue())
        return true
    }

    /// Notes that a batch from ``upgradeHeader(in:)`` was written.
    @inline(__always)
    func headerWritten(_ upgraded: Bool) {
        if upgraded { headerVersion.store(Keyspace.formatVersion, ordering: .releasing) }
    }

    func catalogGeneration(_ name: String) -> Int {
        catalogGenerations.withLock { $0[name, default: 0] }
    }

    func bumpCatalogGeneration(_ name: String) {
        catalogGenerations.withLock { $0[name, default: 0] += 1 }
    }
}
