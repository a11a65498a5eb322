import BuriStorage
import LevelDB
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension LevelDBOptions {
    /// The LevelDB options Buri opens databases with: a 10-bit bloom filter (fast misses when
    /// storing new objects), a 32 MiB block cache, an 8 MiB write buffer and `paranoidChecks`:
    /// opening a database whose log holds a damaged record fails instead of silently dropping the
    /// writes in it (a write cut off at the log's very end by a crash is still recovered
    /// normally). Turn `paranoidChecks` off only to open such a database as LevelDB would,
    /// losing them.
    ///
    /// ```swift
    /// var levelDB = LevelDBOptions.buriDefaults
    /// levelDB.blockCacheSize = 256 << 20
    /// let db = try BuriDatabase(path: "people.buri", levelDB: levelDB)
    /// ```
    public static var buriDefaults: LevelDBOptions {
        var options = LevelDBOptions()
        options.paranoidChecks = true
        options.bloomFilterBitsPerKey = 10
        options.blockCacheSize = 32 << 20
        options.writeBufferSize = 8 << 20
        return options
    }
}

extension LevelDBEngine {
    /// The version of the LevelDB library linked (such as `1.23`).
    ///
    /// ```swift
    /// print("LevelDB \(LevelDBEngine.libraryVersion)")
    /// ```
    public static var libraryVersion: String { Database.libraryVersion.description }

    /// Whether `name` is a file LevelDB writes into a database directory when it stores data: a
    /// manifest, a table or a log (not `LOCK` or `LOG`, which an empty open attempt also leaves).
    ///
    /// ```swift
    /// LevelDBEngine.isDataFile("000005.ldb")    // true
    /// ```
    public static func isDataFile(_ name: String) -> Bool {
        name.hasPrefix("MANIFEST-") || name.hasSuffix(".ldb") || name.hasSuffix(".sst") || name.hasSuffix(".log")
    }

    /// Whether `name` is any file LevelDB makes in a database directory: its data files, `LOCK`,
    /// `LOG`, `LOG.old`, `CURRENT` and temporary `*.dbtmp` files (what a failed creation leaves).
    ///
    /// ```swift
    /// LevelDBEngine.isOwnFile("LOCK")    // true
    /// ```
    public static func isOwnFile(_ name: String) -> Bool {
        isDataFile(name) || ["LOCK", "LOG", "LOG.old", "CURRENT"].contains(name) || name.hasSuffix(".dbtmp")
    }

    /// The file that marks a directory as a LevelDB database (written last when one is created).
    public static let currentFileName = "CURRENT"
    /// The file LevelDB locks while a process has the database open.
    public static let lockFileName = "LOCK"

    /// The kind of engine ``LevelDBEngine`` is, for a ``StorageEngines`` registry: a database in a
    /// local directory, opened with `options` (Buri's defaults unless given). It claims no location
    /// itself: it is the default kind, which opens plain paths.
    ///
    /// ```swift
    /// var levelDB = LevelDBOptions.buriDefaults
    /// levelDB.writeBufferSize = 64 << 20
    /// let engines = StorageEngines.standard.registering(LevelDBEngine.Kind(options: levelDB))
    /// ```
    public struct Kind: StorageEngineKind {
        /// The options every database of this kind is opened with (``StorageOpenOptions/mode``
        /// sets `createIfMissing` and `errorIfExists`).
        public var options: LevelDBOptions

        public init(options: LevelDBOptions = .buriDefaults) {
            self.options = options
        }

        public var name: String { "leveldb" }
        public var capabilities: StorageCapabilities { [.files, .repair, .compaction] }
        public func claims(_ location: String) -> Bool { false }

        /// With ``StorageOpenOptions/Mode/existing``, a directory without LevelDB's `CURRENT` file is
        /// refused with `notFound` before LevelDB is called (LevelDB itself would make the
        /// directory and its `LOCK` file before finding no database there).
        public func open(_ location: String, options open: StorageOpenOptions) throws(StorageError) -> any StorageEngine
        {
            if open.mode == .existing,
                !FileManager.default.fileExists(atPath: location + "/" + LevelDBEngine.currentFileName)
            {
                throw StorageError(
                    code: .notFound,
                    message:
                        "'\(location)' holds no LevelDB database (no \(LevelDBEngine.currentFileName) file); nothing was created",
                    location: location)
            }
            var options = options
            options.createIfMissing = open.mode != .existing
            options.errorIfExists = open.mode == .createNew
            return try LevelDBEngine(path: location, options: options)
        }
    }
}

extension MemoryEngine {
    /// The kind of engine ``MemoryEngine`` is, for a ``StorageEngines`` registry: it claims the
    /// location `:memory:`, and each open makes a new, empty engine (so ``StorageOpenOptions/Mode/existing``
    /// is refused: there is never data to open).
    ///
    /// ```swift
    /// let engines = StorageEngines.standard.registering(MemoryEngine.Kind())
    /// let engine = try engines.open(":memory:")
    /// ```
    public struct Kind: StorageEngineKind {
        public init() {}
        public var name: String { "memory" }
        public var capabilities: StorageCapabilities { [] }
        public func claims(_ location: String) -> Bool { location == ":memory:" }

        public func open(_ location: String, options: StorageOpenOptions) throws(StorageError) -> any StorageEngine {
            guard options.mode != .existing else {
                throw StorageError(
                    code: .notFound,
                    message: "an in-memory database exists only while it is open: there is none to open",
                    location: location)
            }
            return MemoryEngine(name: location)
        }
    }
}

extension StorageEngines {
    /// The engine every Buri program can open: LevelDB for paths (the default kind, with
    /// ``LevelDBOptions/buriDefaults``). Register others on a copy: etcd (`EtcdEngine.Kind`, from
    /// `BuriEtcd`), `:memory:` (``MemoryEngine/Kind``).
    ///
    /// ```swift
    /// let engine = try StorageEngines.standard.open("people.buri")   // LevelDB
    /// ```
    public static var standard: StorageEngines {
        StorageEngines(default: LevelDBEngine.Kind())
    }
}
