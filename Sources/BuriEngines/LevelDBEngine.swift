import BuriStorage
import LevelDB
import Synchronization
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// LevelDB's open options (cache, bloom filter, write buffer, …), for ``LevelDBEngine``.
public typealias LevelDBOptions = LevelDB.Options
/// A write-ahead log record of a LevelDB database that fails its checksum or framing.
public typealias DamagedLogRecord = LevelDB.DamagedLogRecord
/// A private snapshot of a LevelDB database directory's files, for ``LevelDBEngine/init(readingSnapshot:options:)``.
public typealias DatabaseFileSnapshot = LevelDB.FileSnapshot
/// Why a ``DatabaseFileSnapshot`` could not be taken.
public typealias DatabaseFileSnapshotError = LevelDB.FileSnapshotError
/// What ``LevelDBEngine/salvage(path:options:)`` recovered and lost, key by key.
public typealias SalvageReport = LevelDB.SalvageReport

/// The default engine: one LevelDB database in a directory, opened by this process alone.
///
/// Reads verify LevelDB's block checksums, so a damaged block is an error rather than different
/// data; commits are LevelDB write batches (one log record each, all or nothing across a crash).
///
/// ```swift
/// let engine = try LevelDBEngine(path: "people.buri")
/// let temporary = try LevelDBEngine.temporary()   // removed again on close
/// ```
public final class LevelDBEngine: StorageEngine, Sendable {
    /// The LevelDB database underneath.
    public let database: Database
    public let location: String
    public var isShared: Bool { false }
    /// `true`: LevelDB caches a block it decompressed, but reads an uncompressed block of a
    /// memory-mapped table (and verifies its checksum) at every access, so an encrypted database
    /// pads its sealed values for their blocks to compress (`docs/FORMAT.md` §4a).
    public var cachesOnlyCompressedBlocks: Bool { true }
    /// Whether the directory is removed when the engine closes.
    public let removesDirectoryOnClose: Bool
    /// The private snapshot of another directory's files this engine reads (see
    /// ``init(readingSnapshot:options:)``), removed when the engine closes; nil for a database
    /// opened in place.
    public let snapshotFiles: FileSnapshot?
    /// Error messages name the snapshot's files by the original directory's path.
    private let alias: PathAlias?
    /// Reads the current state; immutable, so one serves every caller.
    private let current: LevelDBReader
    /// Serialises commits (LevelDB queues concurrent writers anyway) and counts them: the revision
    /// of the last commit applied, so that observers see commits one at a time, in order.
    private let commitLock = Mutex<UInt64>(0)
    private let observers = StorageCommitObservers()

    /// Opens (or, with `options.createIfMissing`, creates) the LevelDB database in `path`.
    public init(path: String, options: Options = Options()) throws(StorageError) {
        do {
            database = try Database(path: path, options: options)
        } catch {
            throw StorageError(error)
        }
        location = path
        removesDirectoryOnClose = false
        snapshotFiles = nil
        alias = nil
        current = LevelDBReader(database: database, options: Self.checkedReads)
    }

    /// Opens the database in a private snapshot of a directory's files (``FileSnapshot``) to read
    /// it without writing anything in that directory — while another process holds it open, on a
    /// read-only file system or a full disk. The engine reads; ``commit(_:conditions:sync:)`` and
    /// ``compact(_:)`` refuse with `notSupported`. Its ``location`` and its errors name the
    /// original directory. Closing the engine removes the snapshot.
    ///
    /// ```swift
    /// let files = try FileSnapshot.take(of: "people.buri", in: NSTemporaryDirectory())
    /// let engine = try LevelDBEngine(readingSnapshot: files)
    /// defer { engine.close() }
    /// ```
    ///
    /// - Throws: ``StorageError`` as opening the original would (damage is `corruption`). The
    ///   snapshot is left in place then, for the caller to inspect (its logs) and remove.
    public init(readingSnapshot files: FileSnapshot, options: Options = Options()) throws(StorageError) {
        var options = options
        options.createIfMissing = false
        options.errorIfExists = false
        let alias = PathAlias(from: files.path, to: files.source)
        do {
            database = try Database(path: files.path, options: options)
        } catch {
            throw StorageError(error, alias: alias)
        }
        location = files.source
        removesDirectoryOnClose = false
        snapshotFiles = files
        self.alias = alias
        current = LevelDBReader(database: database, options: Self.checkedReads, alias: alias)
    }

    private init(database: Database, path: String, removesDirectoryOnClose: Bool) {
        self.database = database
        self.location = path
        self.removesDirectoryOnClose = removesDirectoryOnClose
        snapshotFiles = nil
        alias = nil
        current = LevelDBReader(database: database, options: Self.checkedReads)
    }

    /// A new database in a fresh directory under the system's temporary directory, removed with
    /// everything in it when the engine is closed (or released).
    public static func temporary(options: Options = Options()) throws(StorageError) -> LevelDBEngine {
        let base = FileManager.default.temporaryDirectory.path
        let path = base + "/buri-" + UUID().uuidString
        var options = options
        options.createIfMissing = true
        options.errorIfExists = true
        do {
            return LevelDBEngine(
                database: try Database(path: path, options: options), path: path, removesDirectoryOnClose: true)
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw StorageError(error)
        }
    }

    deinit {
        if removesDirectoryOnClose || snapshotFiles != nil { close() }
    }

    public var isClosed: Bool { database.isClosed }

    /// The log records of the (closed) database in `path` that fail their checksum or framing:
    /// writes LevelDB's recovery would drop or refuse.
    public static func damagedLogRecords(path: String) throws(StorageError) -> [DamagedLogRecord] {
        do {
            return try Database.damagedLogRecords(path: path)
        } catch {
            throw StorageError(error)
        }
    }

    /// Salvages what LevelDB can still read of the damaged database in `path` (LevelDB's repair:
    /// unreadable data is dropped; damaged files are kept under `lost/`). It must not be open.
    public static func repair(path: String, options: Options = Options()) throws(StorageError) {
        do {
            try Database.repair(path: path, options: options)
        } catch {
            throw StorageError(error)
        }
    }

    /// LevelDB's repair of the damaged database in `path`, with an inventory of the readable data
    /// taken before and compared after, so that every lost key is named (``Database/salvage(path:options:)``).
    /// It must not be open.
    ///
    /// ```swift
    /// let report = try LevelDBEngine.salvage(path: "people.buri")
    /// print(report.lostKeys.count, report.unreadableRanges.count, report.unknownLosses)
    /// ```
    public static func salvage(path: String, options: Options = Options()) throws(StorageError) -> SalvageReport {
        do {
            return try Database.salvage(path: path, options: options)
        } catch {
            throw StorageError(error)
        }
    }

    public func close() {
        database.close()
        // LevelDB's files there are released with the handle (a cursor still alive keeps its
        // tables open; their links are gone, the files stay readable until it ends).
        snapshotFiles?.remove()
        if removesDirectoryOnClose {
            // Readers still alive keep LevelDB's files open; removing the directory unlinks them,
            // and the space returns when the last one finishes.
            try? FileManager.default.removeItem(atPath: location)
        }
    }

    static let checkedReads = ReadOptions(verifyChecksums: true)

    public func snapshot() throws -> any StorageSnapshot {
        do {
            return LevelDBSnapshot(database: database, snapshot: try database.snapshot(), alias: alias)
        } catch {
            throw StorageError(error, alias: alias)
        }
    }

    public func latest() throws -> any StorageReader { current }

    public func makeBatch() -> any StorageBatch { LevelDBBatch() }

    public func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws {
        // Conditions hold by construction: this process is the only writer, and Buri holds its
        // writer lock from the reads the conditions name to this commit.
        guard let batch = batch as? LevelDBBatch else {
            throw StorageError(code: .invalidArgument, message: "a batch made by another engine", location: location)
        }
        guard !batch.isEmpty else { return }
        if snapshotFiles != nil { throw readOnlyRefusal("write") }
        try commitLock.withLock { revision throws(StorageError) in
            do throws(LevelDBError) {
                try database.write(batch.batch, options: sync ? .sync : .async)
            } catch {
                throw StorageError(error)
            }
            revision += 1
            if !observers.isEmpty {
                var changes: [StorageCommitEvent.Change] = []
                changes.reserveCapacity(batch.count)
                batch.batch.forEachOperation { key, value in
                    changes.append(value.map { .put(key: Array(key), value: Array($0)) } ?? .delete(key: Array(key)))
                }
                observers.notify(StorageCommitEvent(changes: changes, revision: revision))
            }
        }
    }

    public func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        // Registered under the commit lock: the observer sees exactly the commits applied after.
        commitLock.withLock { _ in observers.add(observer) }
    }

    /// The number of commit observers registered (for tests of observation life cycles).
    public var commitObserverCount: Int { observers.observerCount }

    public func compact(_ range: BuriStorage.KeyRange?) throws {
        if snapshotFiles != nil { throw readOnlyRefusal("compact") }
        do {
            try database.compact(range.map { LevelDB.KeyRange($0) })
        } catch {
            throw StorageError(error)
        }
    }

    /// The refusal of a change to an engine that reads a snapshot.
    private func readOnlyRefusal(_ what: String) -> StorageError {
        StorageError(
            code: .notSupported,
            message:
                "this engine reads a private snapshot of the files of '\(location)' and cannot \(what) it; open the database itself to \(what) it",
            location: location)
    }

    public func property(_ name: String) throws -> String? {
        do {
            return try database.property(name)
        } catch {
            throw StorageError(error, alias: alias)
        }
    }

    public func approximateSizes(of ranges: [BuriStorage.KeyRange]) throws -> [UInt64] {
        do {
            return try database.approximateSizes(of: ranges.map { LevelDB.KeyRange($0) })
        } catch {
            throw StorageError(error, alias: alias)
        }
    }
}

/// A directory that error messages name by another path: a snapshot's by its original's.
struct PathAlias: Sendable {
    let from: String
    let to: String
    func apply(_ text: String) -> String { text.replacing(from, with: to) }
}

extension StorageError {
    /// ``init(_:)`` naming the files of `alias.from` by `alias.to`.
    init(_ error: LevelDBError, alias: PathAlias?) {
        guard let alias else {
            self.init(error)
            return
        }
        let renamed = StorageError(error)
        self.init(
            code: renamed.code, message: alias.apply(renamed.message), location: renamed.location.map(alias.apply))
    }

    /// The engine-neutral form of a LevelDB error, keeping LevelDB's message.
    public init(_ error: LevelDBError) {
        let code: Code
        switch error.code {
        case .notFound: code = .notFound
        case .corruption: code = .corruption
        case .notSupported: code = .notSupported
        case .invalidArgument: code = .invalidArgument
        case .ioError: code = .ioError
        case .databaseInUse: code = .databaseInUse
        case .databaseClosed: code = .databaseClosed
        case .unknown: code = .unknown
        }
        self.init(code: code, message: error.message, location: error.path)
    }
}

/// Reads through LevelDB with fixed read options (a snapshot, or the current state).
class LevelDBReader: StorageReader, @unchecked Sendable {
    // @unchecked: Database is thread-safe and the options are immutable.
    let database: Database
    let options: ReadOptions
    let alias: PathAlias?

    init(database: Database, options: ReadOptions, alias: PathAlias? = nil) {
        self.database = database
        self.options = options
        self.alias = alias
    }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        do {
            return try database.withValue(forKey: key, options: options, body)
        } catch let error as LevelDBError {
            throw StorageError(error, alias: alias)
        }
    }

    func cursor(in range: BuriStorage.KeyRange, reverse: Bool) throws -> any StorageCursor {
        do {
            return LevelDBCursor(
                try database.cursor(in: LevelDB.KeyRange(range), reverse: reverse, options: options), alias: alias)
        } catch {
            throw StorageError(error, alias: alias)
        }
    }
}

final class LevelDBSnapshot: LevelDBReader, StorageSnapshot, @unchecked Sendable {
    init(database: Database, snapshot: Snapshot, alias: PathAlias? = nil) {
        super.init(database: database, options: ReadOptions(snapshot: snapshot, verifyChecksums: true), alias: alias)
    }
}

/// A LevelDB cursor with engine-neutral errors.
final class LevelDBCursor: StorageCursor {
    let cursor: Cursor
    let alias: PathAlias?

    init(_ cursor: Cursor, alias: PathAlias? = nil) {
        self.cursor = cursor
        self.alias = alias
    }

    @inline(__always)
    func next() throws -> Bool {
        do {
            return try cursor.next()
        } catch {
            throw StorageError(error, alias: alias)
        }
    }

    func seek(_ key: [UInt8]) { cursor.seek(key) }

    var isOnEntry: Bool { cursor.isOnEntry }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try cursor.withKey(body) }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try cursor.withValue(body) }

    func deferStatusChecks() -> Bool {
        cursor.defersStatusChecks = true
        return true
    }

    func checkStatus() throws {
        do {
            try cursor.checkStatus()
        } catch {
            throw StorageError(error, alias: alias)
        }
    }
}

/// A LevelDB write batch.
final class LevelDBBatch: StorageBatch {
    let batch = WriteBatch()
    var count: Int { batch.count }
    var byteSize: Int { batch.byteSize }
    func put(_ key: [UInt8], _ value: [UInt8]) { batch.put(key, value) }
    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) { batch.put(key, value) }
    func delete(_ key: [UInt8]) { batch.delete(key) }
    func delete(_ key: UnsafeRawBufferPointer) { batch.delete(key) }
}

extension LevelDB.KeyRange {
    /// The same range in LevelDB's type: the engine boundary, where Buri's ranges meet LevelDB's.
    @inline(__always)
    init(_ range: BuriStorage.KeyRange) {
        self.init(start: range.start, end: range.end)
    }
}
