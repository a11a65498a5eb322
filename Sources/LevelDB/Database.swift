import CLevelDB
import Synchronization
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An open LevelDB database: a sorted map from byte strings to byte strings, on disk.
///
/// `Database` is safe to share between threads: LevelDB serialises writes internally and
/// reads run concurrently. It closes when ``close()`` is called or when the last reference
/// goes away. Cursors and snapshots keep the underlying handle alive, so closing while one is
/// still in use never frees memory under it; the files are released when the last of them ends.
///
/// ```swift
/// let db = try Database(path: "/tmp/example.ldb")
/// try db.put(Array("greeting".utf8), Array("hello".utf8))
/// let value = try db.get(Array("greeting".utf8))     // [104, 101, 108, 108, 111]
/// db.close()
/// ```
///
/// LevelDB locks its directory: a second `Database` on the same path, in this process or
/// another, fails with ``LevelDBError/Code/databaseInUse``.
///
/// ## Topics
/// - Reading: ``get(_:options:)``, ``withValue(forKey:options:_:)``, ``cursor(in:reverse:options:)``, ``entries(in:reverse:options:)``
/// - Writing: ``put(_:_:options:)``, ``delete(_:options:)``, ``write(_:options:)``
/// - Consistency: ``snapshot()``
/// - Maintenance: ``compact(_:)``, ``property(_:)``, ``approximateSize(of:)``, ``destroy(path:options:)``, ``repair(path:options:)``
public final class Database: Sendable {
    /// The directory this database lives in.
    public let path: String
    private let state: Mutex<Handle?>
    /// LevelDB's message for the first write that failed with an I/O error (a full disk), after
    /// which this handle refuses to write: see ``write(_:options:)``.
    private let failedWrite = Mutex<String?>(nil)

    /// Opens (and by default creates) the database in directory `path`.
    ///
    /// - Throws: ``LevelDBError`` with code ``LevelDBError/Code/databaseInUse`` if another handle
    ///   or process holds the database, ``LevelDBError/Code/invalidArgument`` if it exists and
    ///   `options.errorIfExists` is set, ``LevelDBError/Code/notFound`` (or `invalidArgument`) if it
    ///   is missing and `options.createIfMissing` is not set, ``LevelDBError/Code/corruption`` if its
    ///   files are damaged (with `options.paranoidChecks`, including a damaged log record).
    public init(path: String, options: Options = Options()) throws(LevelDBError) {
        self.path = path
        // LevelDB takes a record whose length runs past the end of the log for a write cut off by
        // a crash, and zeroed bytes for preallocated space, and drops what follows without a word,
        // even with paranoid checks; and it opens without complaint when the log the MANIFEST names
        // is missing, losing the writes it held.
        if options.paranoidChecks {
            if let problem = LogScanner.silentlyDroppedRecords(path: path) {
                throw LevelDBError(code: .corruption, message: "Corruption: \(problem)", path: path)
            }
            if let problem = ManifestState.missingLiveLog(path: path) {
                throw LevelDBError(code: .corruption, message: "Corruption: \(problem)", path: path)
            }
        }
        self.state = Mutex(try Handle(path: path, options: options))
    }

    /// Closes the database. Later calls on this object throw ``LevelDBError/Code/databaseClosed``.
    /// Idempotent. If cursors or snapshots are still alive, the files are released when the
    /// last of them is released.
    public func close() {
        let handle = state.withLock { state -> Handle? in
            let handle = state
            state = nil
            return handle
        }
        _ = handle  // dropped here: closes now unless a cursor or snapshot still holds it
    }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { state.withLock { $0 == nil } }

    /// The live handle, retained for the duration of one call so a concurrent `close()`
    /// cannot free it mid-call.
    @inline(__always)
    func handle() throws(LevelDBError) -> Handle {
        guard let handle = state.withLock({ $0 }) else {
            throw LevelDBError(code: .databaseClosed, message: "call made after close()", path: path)
        }
        return handle
    }

    // MARK: Reads

    /// The value stored for `key`, or `nil` if there is none.
    public func get(_ key: some ContiguousBytes, options: ReadOptions = ReadOptions()) throws(LevelDBError) -> [UInt8]?
    {
        guard let (pointer, length) = try rawGet(key, options: options) else { return nil }
        defer { leveldb_free(pointer) }
        return copyBytes(pointer, length)
    }

    /// Lends the value stored for `key` to `body` without copying it into a Swift array
    /// (`nil` if there is none). The buffer is valid only inside `body` and is freed right after.
    ///
    /// ```swift
    /// let length = try db.withValue(forKey: key) { $0?.count ?? 0 }
    /// ```
    public func withValue<R>(
        forKey key: some ContiguousBytes,
        options: ReadOptions = ReadOptions(),
        _ body: (UnsafeRawBufferPointer?) throws -> R
    ) throws -> R {
        guard let (pointer, length) = try rawGet(key, options: options) else { return try body(nil) }
        defer { leveldb_free(pointer) }
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// The value stored for `key`, or `nil`: ``get(_:options:)`` for byte arrays without generic
    /// dispatch.
    public func get(_ key: [UInt8], options: ReadOptions = ReadOptions()) throws(LevelDBError) -> [UInt8]? {
        guard let (pointer, length) = try rawGet(bytes: key, options: options) else { return nil }
        defer { leveldb_free(pointer) }
        return copyBytes(pointer, length)
    }

    /// ``withValue(forKey:options:_:)`` for byte-array keys without generic dispatch: the form
    /// point reads take in hot loops.
    public func withValue<R>(
        forKey key: [UInt8],
        options: ReadOptions = ReadOptions(),
        _ body: (UnsafeRawBufferPointer?) throws -> R
    ) throws -> R {
        guard let (pointer, length) = try rawGet(bytes: key, options: options) else { return try body(nil) }
        defer { leveldb_free(pointer) }
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// Whether a value is stored for `key` (byte-array form).
    public func contains(_ key: [UInt8], options: ReadOptions = ReadOptions()) throws(LevelDBError) -> Bool {
        guard let (pointer, _) = try rawGet(bytes: key, options: options) else { return false }
        leveldb_free(pointer)
        return true
    }

    /// `leveldb_get` for a byte-array key, with no generic dispatch on the way.
    private func rawGet(
        bytes key: [UInt8], options: ReadOptions
    ) throws(LevelDBError) -> (UnsafeMutablePointer<CChar>, Int)? {
        let handle = try handle()
        var error: UnsafeMutablePointer<CChar>? = nil
        var length = 0
        let pointer = handle.withReadOptionsPointer(options) { readOptions in
            withCBytes(key) { keyPointer, keyCount in
                leveldb_get(handle.db, readOptions, keyPointer, keyCount, &length, &error)
            }
        }
        if let error {
            let message = String(cString: error)
            leveldb_free(error)
            if let pointer { leveldb_free(pointer) }
            throw LevelDBError(statusMessage: message, path: path)
        }
        guard let pointer else { return nil }
        return (pointer, length)
    }

    /// `leveldb_get`: a malloc'd buffer the caller must `leveldb_free`, or `nil` when absent.
    private func rawGet(
        _ key: some ContiguousBytes, options: ReadOptions
    ) throws(LevelDBError) -> (UnsafeMutablePointer<CChar>, Int)? {
        let handle = try handle()
        let (pointer, length) = try handle.withReadOptions(options) { readOptions throws(LevelDBError) in
            try withCBytes(key) { keyPointer, keyCount throws(LevelDBError) in
                var length = 0
                let pointer = try withErrorSlot(path: path) { error in
                    leveldb_get(handle.db, readOptions, keyPointer, keyCount, &length, error)
                }
                return (pointer, length)
            }
        }
        guard let pointer else { return nil }
        return (pointer, length)
    }

    /// Whether a value is stored for `key`.
    public func contains(_ key: some ContiguousBytes, options: ReadOptions = ReadOptions()) throws -> Bool {
        try withValue(forKey: key, options: options) { $0 != nil }
    }

    /// A cursor over the entries in `range`, in key order (or reverse order).
    /// The cursor starts before the first entry: call ``Cursor/next()`` to move onto it.
    public func cursor(
        in range: KeyRange = .all, reverse: Bool = false, options: ReadOptions = ReadOptions()
    ) throws(LevelDBError) -> Cursor {
        Cursor(handle: try handle(), options: options, range: range, reverse: reverse)
    }

    /// Every entry in `range`, copied into an array, in key order (or reverse order).
    ///
    /// ```swift
    /// for entry in try db.entries(in: .prefix(Array("user:".utf8))) {
    ///     print(entry.key, entry.value)
    /// }
    /// ```
    /// Reads the whole range before returning, so an I/O error or corruption anywhere in it is
    /// thrown, never turned into a shorter result. For large ranges, walk a
    /// ``cursor(in:reverse:options:)`` instead.
    public func entries(
        in range: KeyRange = .all, reverse: Bool = false, options: ReadOptions = ReadOptions()
    ) throws(LevelDBError) -> [Entry] {
        let cursor = Cursor(handle: try handle(), options: options, range: range, reverse: reverse)
        var entries: [Entry] = []
        while try cursor.next() { entries.append(Entry(key: cursor.key, value: cursor.value)) }
        return entries
    }

    // MARK: Writes

    /// Stores `value` under `key`, replacing any previous value.
    public func put(
        _ key: some ContiguousBytes, _ value: some ContiguousBytes, options: WriteOptions = .async
    ) throws(LevelDBError) {
        let handle = try writableHandle()
        do {
            try withCBytes(key) { keyPointer, keyCount throws(LevelDBError) in
                try withCBytes(value) { valuePointer, valueCount throws(LevelDBError) in
                    try withErrorSlot(path: path) { error in
                        leveldb_put(
                            handle.db, handle.writeOptions(options), keyPointer, keyCount, valuePointer, valueCount,
                            error)
                    }
                }
            }
        } catch {
            throw writeFailed(error)
        }
    }

    /// Removes `key`. Removing a key that is not there is not an error.
    public func delete(_ key: some ContiguousBytes, options: WriteOptions = .async) throws(LevelDBError) {
        let handle = try writableHandle()
        do {
            try withCBytes(key) { keyPointer, keyCount throws(LevelDBError) in
                try withErrorSlot(path: path) { error in
                    leveldb_delete(handle.db, handle.writeOptions(options), keyPointer, keyCount, error)
                }
            }
        } catch {
            throw writeFailed(error)
        }
    }

    /// Applies every operation of `batch` atomically: after a crash either all of them are there or none.
    ///
    /// A write that fails with an I/O error (a full disk) may have left part of its record at the
    /// end of the write-ahead log, while LevelDB's log writer goes on as if the whole record were
    /// there: the next record would be framed against the wrong block boundaries and make the log
    /// unreadable from there on. So after such a failure this handle refuses every further write
    /// (with ``LevelDBError/Code/ioError`` quoting the first failure) while reads go on; close
    /// and reopen the database to write again — recovery drops the cut-off record, as after a
    /// crash, and the failed write is not in the database.
    public func write(_ batch: WriteBatch, options: WriteOptions = .async) throws(LevelDBError) {
        let handle = try writableHandle()
        do {
            try withErrorSlot(path: path) { error in
                leveldb_write(handle.db, handle.writeOptions(options), batch.pointer, error)
            }
        } catch {
            throw writeFailed(error)
        }
    }

    /// The handle, if this database may still write (see ``write(_:options:)``).
    private func writableHandle() throws(LevelDBError) -> Handle {
        let handle = try handle()
        if let first = failedWrite.withLock({ $0 }) {
            throw LevelDBError(
                code: .ioError,
                message:
                    "IO error: an earlier write failed (\(first)) and may have left a partial record at the end of the write-ahead log, after which no write can be appended safely; nothing more was written: close and reopen the database to write again",
                path: path)
        }
        return handle
    }

    /// Remembers the first write that failed with an I/O error.
    private func writeFailed(_ error: LevelDBError) -> LevelDBError {
        if error.code == .ioError { failedWrite.withLock { if $0 == nil { $0 = error.message } } }
        return error
    }

    /// Whether a write failed with an I/O error, so that this handle refuses to write (see ``write(_:options:)``).
    public var refusesWrites: Bool { failedWrite.withLock { $0 != nil } }

    // MARK: Snapshots

    /// A consistent, read-only view of the database as it is now. Pass it in ``ReadOptions``.
    ///
    /// ```swift
    /// let snapshot = try db.snapshot()
    /// try db.put(key, newValue)
    /// try db.get(key, options: ReadOptions(snapshot: snapshot))  // still the old value
    /// ```
    public func snapshot() throws(LevelDBError) -> Snapshot {
        Snapshot(handle: try handle())
    }

    // MARK: Maintenance

    /// The value of a LevelDB property such as `"leveldb.stats"`, `"leveldb.sstables"`,
    /// `"leveldb.num-files-at-level0"` or `"leveldb.approximate-memory-usage"`; `nil` if unknown.
    public func property(_ name: String) throws(LevelDBError) -> String? {
        let handle = try handle()
        guard let value = leveldb_property_value(handle.db, name) else { return nil }
        defer { leveldb_free(value) }
        return String(cString: value)
    }

    /// LevelDB's compaction and I/O statistics (`leveldb.stats`).
    public func stats() throws(LevelDBError) -> String { try property("leveldb.stats") ?? "" }

    /// The table files at each level (`leveldb.sstables`).
    public func sstables() throws(LevelDBError) -> String { try property("leveldb.sstables") ?? "" }

    /// The number of table files at `level` (0...6).
    public func fileCount(atLevel level: Int) throws(LevelDBError) -> Int {
        Int(try property("leveldb.num-files-at-level\(level)") ?? "") ?? 0
    }

    /// The approximate number of bytes the keys in `range` occupy on disk (after compression).
    /// Data still in the memory table is not counted.
    public func approximateSize(of range: KeyRange) throws(LevelDBError) -> UInt64 {
        try approximateSizes(of: [range])[0]
    }

    /// ``approximateSize(of:)`` for several ranges at once.
    public func approximateSizes(of ranges: [KeyRange]) throws(LevelDBError) -> [UInt64] {
        let handle = try handle()
        // An open end is approximated by a key above every key Buri or most applications write.
        let top = [UInt8](repeating: 0xFF, count: 64)
        let starts = ranges.map { $0.start ?? [] }
        let limits = ranges.map { $0.end ?? top }
        var sizes = [UInt64](repeating: 0, count: ranges.count)
        // The C call takes arrays of pointers; give each key a stable copy for its duration.
        func copies(_ keys: [[UInt8]]) -> [UnsafeMutablePointer<CChar>] {
            keys.map { bytes in
                let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
                bytes.withUnsafeBytes { raw in
                    if let base = raw.baseAddress {
                        UnsafeMutableRawPointer(pointer).copyMemory(from: base, byteCount: raw.count)
                    }
                }
                return pointer
            }
        }
        let startPointers = copies(starts)
        let limitPointers = copies(limits)
        defer {
            startPointers.forEach { $0.deallocate() }
            limitPointers.forEach { $0.deallocate() }
        }
        let startArgs: [UnsafePointer<CChar>?] = startPointers.map { UnsafePointer($0) }
        let limitArgs: [UnsafePointer<CChar>?] = limitPointers.map { UnsafePointer($0) }
        let startLengths = starts.map(\.count)
        let limitLengths = limits.map(\.count)
        leveldb_approximate_sizes(
            handle.db, Int32(ranges.count), startArgs, startLengths, limitArgs, limitLengths, &sizes)
        return sizes
    }

    /// Compacts the keys in `range` (all keys when `nil`): rewrites their table files, dropping
    /// deleted and overwritten data. Blocks until done.
    public func compact(_ range: KeyRange? = nil) throws(LevelDBError) {
        let handle = try handle()
        let start = range?.start
        let end = range?.end
        func call(_ s: UnsafePointer<CChar>?, _ sc: Int, _ e: UnsafePointer<CChar>?, _ ec: Int) {
            leveldb_compact_range(handle.db, s, sc, e, ec)
        }
        switch (start, end) {
        case (nil, nil): call(nil, 0, nil, 0)
        case let (s?, nil): withCBytes(s) { call($0, $1, nil, 0) }
        case let (nil, e?): withCBytes(e) { call(nil, 0, $0, $1) }
        case let (s?, e?): withCBytes(s) { sp, sc in withCBytes(e) { call(sp, sc, $0, $1) } }
        }
    }

    /// Deletes the database in `path` and all its files. The database must not be open.
    public static func destroy(path: String, options: Options = Options()) throws(LevelDBError) {
        let cOptions = COptions(options)
        try withErrorSlot(path: path) { error in leveldb_destroy_db(cOptions.pointer, path, error) }
    }

    /// Salvages what can be read from a damaged database in `path` (some data may be lost).
    /// The database must not be open.
    public static func repair(path: String, options: Options = Options()) throws(LevelDBError) {
        let cOptions = COptions(options)
        try withErrorSlot(path: path) { error in leveldb_repair_db(cOptions.pointer, path, error) }
    }

    /// The version of the LevelDB library this process is linked against.
    public static var libraryVersion: LibraryVersion {
        LibraryVersion(major: Int(leveldb_major_version()), minor: Int(leveldb_minor_version()))
    }
}

/// A LevelDB release number such as 1.23.
public struct LibraryVersion: Sendable, Equatable, Comparable, CustomStringConvertible {
    public let major: Int
    public let minor: Int
    public var description: String { "\(major).\(minor)" }
    public static func < (a: Self, b: Self) -> Bool { (a.major, a.minor) < (b.major, b.minor) }
}

/// `leveldb_options_t` with the cache and filter policy it points to, freed together.
final class COptions {
    let pointer: OpaquePointer
    let cache: OpaquePointer?
    let filterPolicy: OpaquePointer?

    init(_ options: Options) {
        pointer = leveldb_options_create()
        leveldb_options_set_create_if_missing(pointer, options.createIfMissing ? 1 : 0)
        leveldb_options_set_error_if_exists(pointer, options.errorIfExists ? 1 : 0)
        leveldb_options_set_paranoid_checks(pointer, options.paranoidChecks ? 1 : 0)
        leveldb_options_set_compression(
            pointer, Int32(options.compression ? leveldb_snappy_compression : leveldb_no_compression))
        if let size = options.writeBufferSize { leveldb_options_set_write_buffer_size(pointer, max(size, 64 << 10)) }
        if let files = options.maxOpenFiles {
            leveldb_options_set_max_open_files(pointer, Int32(clamping: max(files, 20)))
        }
        if let size = options.blockSize { leveldb_options_set_block_size(pointer, max(size, 1 << 10)) }
        if let size = options.maxFileSize { leveldb_options_set_max_file_size(pointer, max(size, 1 << 20)) }
        if let interval = options.blockRestartInterval {
            leveldb_options_set_block_restart_interval(pointer, Int32(clamping: max(interval, 1)))
        }
        if let capacity = options.blockCacheSize {
            let cache = leveldb_cache_create_lru(max(capacity, 0))
            leveldb_options_set_cache(pointer, cache)
            self.cache = cache
        } else {
            self.cache = nil
        }
        if let bits = options.bloomFilterBitsPerKey, bits > 0 {
            let policy = leveldb_filterpolicy_create_bloom(Int32(clamping: bits))
            leveldb_options_set_filter_policy(pointer, policy)
            self.filterPolicy = policy
        } else {
            self.filterPolicy = nil
        }
    }

    deinit {
        leveldb_options_destroy(pointer)
        if let cache { leveldb_cache_destroy(cache) }
        if let filterPolicy { leveldb_filterpolicy_destroy(filterPolicy) }
    }
}

/// The open C database and everything that must live exactly as long as it. Closed in `deinit`,
/// which runs when the `Database` and every cursor and snapshot that retained it are gone.
final class Handle: @unchecked Sendable {
    // @unchecked: LevelDB documents `leveldb_t` as safe for concurrent use without external
    // synchronisation, and every other field is immutable after init.
    let db: OpaquePointer
    let path: String
    private let options: COptions
    private let syncWrite: OpaquePointer
    private let asyncWrite: OpaquePointer
    private let defaultRead: OpaquePointer

    init(path: String, options: Options) throws(LevelDBError) {
        let cOptions = COptions(options)
        let db = try withErrorSlot(path: path) { error in leveldb_open(cOptions.pointer, path, error) }
        guard let db else {
            throw LevelDBError(code: .unknown, message: "leveldb_open returned no handle and no error", path: path)
        }
        self.db = db
        self.path = path
        self.options = cOptions
        syncWrite = leveldb_writeoptions_create()
        leveldb_writeoptions_set_sync(syncWrite, 1)
        asyncWrite = leveldb_writeoptions_create()
        leveldb_writeoptions_set_sync(asyncWrite, 0)
        defaultRead = leveldb_readoptions_create()
        leveldb_readoptions_set_verify_checksums(defaultRead, ReadOptions().verifyChecksums ? 1 : 0)
    }

    @inline(__always)
    func writeOptions(_ options: WriteOptions) -> OpaquePointer { options.sync ? syncWrite : asyncWrite }

    /// Runs `body` with C read options for `options`, reusing a shared default object when possible.
    @inline(__always)
    func withReadOptions<R>(
        _ options: ReadOptions, _ body: (OpaquePointer) throws(LevelDBError) -> R
    ) throws(LevelDBError) -> R {
        if options.isDefault { return try body(defaultRead) }
        if let snapshot = options.snapshot, options.isDefaultApartFromSnapshot { return try body(snapshot.readOptions) }
        let cOptions = CReadOptions(options)
        return try withExtendedLifetime(cOptions) { () throws(LevelDBError) -> R in try body(cOptions.pointer) }
    }

    /// ``withReadOptions(_:_:)`` for a body that cannot throw. Reads at a snapshot with otherwise
    /// default options use C options the snapshot owns, so point reads allocate nothing here.
    @inline(__always)
    func withReadOptionsPointer<R>(_ options: ReadOptions, _ body: (OpaquePointer) -> R) -> R {
        if options.isDefault { return body(defaultRead) }
        if let snapshot = options.snapshot, options.isDefaultApartFromSnapshot { return body(snapshot.readOptions) }
        let cOptions = CReadOptions(options)
        return withExtendedLifetime(cOptions) { body(cOptions.pointer) }
    }

    deinit {
        leveldb_close(db)
        leveldb_writeoptions_destroy(syncWrite)
        leveldb_writeoptions_destroy(asyncWrite)
        leveldb_readoptions_destroy(defaultRead)
    }
}
