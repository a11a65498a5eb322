import CLevelDB

/// How to open a database. Every field maps to one LevelDB option.
///
/// ```swift
/// var options = Options()
/// options.blockCacheSize = 64 << 20      // 64 MiB LRU cache
/// options.bloomFilterBitsPerKey = 10     // fewer disk reads for missing keys
/// let db = try Database(path: "/tmp/app.ldb", options: options)
/// ```
public struct Options: Sendable, Equatable {
    /// Create the database if it does not exist. Default `true`.
    public var createIfMissing: Bool = true
    /// Fail with ``LevelDBError/Code/invalidArgument`` if the database already exists. Default `false`.
    public var errorIfExists: Bool = false
    /// Check data aggressively and stop at the first sign of corruption. Default `false`
    /// (LevelDB's default).
    ///
    /// With `true`, opening fails with ``LevelDBError/Code/corruption`` when a log record fails
    /// its checksum, where LevelDB would otherwise drop the record (and the rest of its 32 KiB log
    /// block) and open without it; a record cut off at the very end of the log — a writer that
    /// died mid-write — is still ignored. This wrapper adds checks LevelDB lacks: a record in
    /// the log's last block whose damaged length runs past the end of the file, which LevelDB
    /// would take for such a cut-off write and drop with everything after it; zeroed bytes with
    /// complete records after them in their block, which LevelDB would skip as preallocated space
    /// (see ``Database/damagedLogRecords(path:)``); and a missing write-ahead log that the MANIFEST
    /// names as holding the latest writes, without which LevelDB would open and lose them.
    /// Compactions and ``Database/repair(path:options:)``
    /// then also verify table checksums, so a damaged block is never copied on as good data.
    public var paranoidChecks: Bool = false
    /// Compress blocks with Snappy. Default `true`.
    public var compression: Bool = true
    /// Capacity in bytes of the LRU block cache; `nil` uses LevelDB's built-in 8 MiB cache.
    public var blockCacheSize: Int? = nil
    /// Bits per key of a bloom filter policy; `nil` means no filter. 10 is a good value.
    public var bloomFilterBitsPerKey: Int? = nil
    /// Bytes of writes buffered in memory before they are sorted into a table file. `nil` = LevelDB's 4 MiB.
    public var writeBufferSize: Int? = nil
    /// Number of table files LevelDB may keep open. `nil` = LevelDB's 1000.
    public var maxOpenFiles: Int? = nil
    /// Approximate size of a data block. `nil` = LevelDB's 4 KiB.
    public var blockSize: Int? = nil
    /// Approximate size of a table file. `nil` = LevelDB's 2 MiB.
    public var maxFileSize: Int? = nil
    /// Keys between the restart points of a data block (where a key is stored whole, not as a
    /// suffix of the one before). A point read searches the restart points, then walks at most
    /// this many keys. `nil` = LevelDB's 16.
    public var blockRestartInterval: Int? = nil

    public init() {}
}

/// Options for one read.
///
/// ```swift
/// let snapshot = try db.snapshot()
/// let value = try db.get(key, options: ReadOptions(snapshot: snapshot, fillCache: false))
/// ```
public struct ReadOptions: Sendable {
    /// Verify the checksum of every block read from a file. Default `true` — unlike LevelDB,
    /// whose default is `false`: without it a flipped bit inside a block can read back as a
    /// different value without any error. Blocks served from the block cache were verified when
    /// they were read, so the cost is one CRC32C per block read from disk.
    public var verifyChecksums: Bool = true
    /// Put blocks read into the block cache. Turn off for bulk scans. Default `true`.
    public var fillCache: Bool = true
    /// Read the database as it was when this snapshot was taken; `nil` reads the current state.
    public var snapshot: Snapshot? = nil

    public init(snapshot: Snapshot? = nil, verifyChecksums: Bool = true, fillCache: Bool = true) {
        self.snapshot = snapshot
        self.verifyChecksums = verifyChecksums
        self.fillCache = fillCache
    }

    var isDefault: Bool { verifyChecksums && fillCache && snapshot == nil }
    /// Whether the options differ from the defaults by their snapshot at most.
    var isDefaultApartFromSnapshot: Bool { verifyChecksums && fillCache }
}

/// Options for one write.
///
/// A *sync* write returns only after the operating system has flushed it to disk, so it survives a
/// machine crash. A non-sync write survives a process crash (it is in the OS buffers) but can be lost
/// if the machine loses power.
///
/// ```swift
/// try db.put(key, value, options: .sync)
/// ```
public struct WriteOptions: Sendable, Equatable {
    /// Flush to stable storage before returning. Default `false`.
    public var sync: Bool

    public init(sync: Bool = false) { self.sync = sync }

    /// A write that is flushed to disk before the call returns.
    public static let sync = WriteOptions(sync: true)
    /// A write that is handed to the operating system and returns at once.
    public static let async = WriteOptions(sync: false)
}

/// Owns a `leveldb_readoptions_t` for the duration of one call or cursor.
final class CReadOptions {
    let pointer: OpaquePointer
    /// Kept so that the snapshot outlives the C options that point at it.
    let snapshot: Snapshot?

    init(_ options: ReadOptions) {
        pointer = leveldb_readoptions_create()
        leveldb_readoptions_set_verify_checksums(pointer, options.verifyChecksums ? 1 : 0)
        leveldb_readoptions_set_fill_cache(pointer, options.fillCache ? 1 : 0)
        snapshot = options.snapshot
        if let snapshot = options.snapshot {
            leveldb_readoptions_set_snapshot(pointer, snapshot.pointer)
        }
    }

    deinit { leveldb_readoptions_destroy(pointer) }
}
