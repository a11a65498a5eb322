import Buri
import BuriEtcd
import BuriStorage
import Foundation

/// The storage engines the shared suites run on.
public enum Engine: String, CaseIterable, CustomStringConvertible, Sendable {
    /// LevelDB in a directory (the default).
    case leveldb
    /// ``MemoryEngine``.
    case memory
    /// LevelDB in a directory removed on close.
    case temporary
    /// ``MemoryEngine`` shared by several clients: every write goes through commit conditions,
    /// as on a replicated engine.
    case shared
    /// ``EtcdEngine`` on the tests' 3-member etcd cluster (``EtcdTestCluster``), a database of its
    /// own per test; ``TestDatabase/client(_:)`` gives other clients with their own connections.
    case etcd

    public var description: String { rawValue }

    /// Every engine, or those named in BURI_TEST_ENGINES (`etcd,memory`): to run the shared
    /// suites on one engine while working on it.
    public static var allCases: [Engine] {
        let every: [Engine] = [.leveldb, .memory, .temporary, .shared, .etcd]
        guard let chosen = ProcessInfo.processInfo.environment["BURI_TEST_ENGINES"], !chosen.isEmpty else {
            return every
        }
        let names = chosen.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return every.filter { names.contains($0.rawValue) }
    }
}

/// A fresh database on `engine`, removed afterwards.
public final class TestDatabase {
    public let directory: URL
    public let engine: Engine
    public var path: String { directory.appendingPathComponent("db.buri").path }
    public private(set) var db: BuriDatabase
    /// The engine the database runs on, kept across ``reopen()`` for engines without a directory.
    private let store: (any StorageEngine)?
    public private(set) var options: BuriOptions
    /// The database's location when it is on etcd.
    public private(set) var etcdLocation: String?
    /// Engines of the other clients, closed with the database.
    private var clients: [any StorageEngine] = []

    public init(_ engine: Engine = .leveldb, options: BuriOptions = BuriOptions()) throws {
        self.engine = engine
        var options = options
        // Clients of a shared engine in a test hammer a handful of keys from every core at once:
        // give their optimistic retries room, so a test sees conflicts resolved, not given up.
        if engine == .shared || engine == .etcd { options.maxCommitAttempts = max(options.maxCommitAttempts, 1_000) }
        self.options = options
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        switch engine {
        case .leveldb:
            store = nil
            db = try BuriDatabase(path: directory.appendingPathComponent("db.buri").path, options: options)
        case .memory:
            let memory = MemoryEngine()
            store = memory
            db = try BuriDatabase(engine: memory, options: options, closesEngine: false)
        case .temporary:
            let temporary = try LevelDBEngine.temporary(options: .buriDefaults)
            store = temporary
            db = try BuriDatabase(engine: temporary, options: options, closesEngine: false)
        case .shared:
            let memory = MemoryEngine(name: ":shared-memory:", shared: true)
            store = memory
            db = try BuriDatabase(engine: memory, options: options, closesEngine: false)
        case .etcd:
            let location = try EtcdTestCluster.location()
            etcdLocation = location
            let etcd = try EtcdEngine(location: location)
            store = etcd
            db = try BuriDatabase(engine: etcd, options: options, closesEngine: false)
        }
    }

    /// Another client of the same data: a second database on the engine when it is shared, else
    /// the database itself (one process may open a LevelDB directory once).
    public func client(_ number: Int) throws -> BuriDatabase {
        if engine == .etcd, number > 0, let etcdLocation {
            // Another client in the full sense: its own engine and connections.
            let other = try EtcdEngine(location: etcdLocation)
            clients.append(other)
            return try BuriDatabase(engine: other, options: options, closesEngine: false)
        }
        guard engine == .shared, number > 0, let store else { return db }
        return try BuriDatabase(engine: store, options: options, closesEngine: false)
    }

    /// Ends lease `id` of a shared engine as the engine does when its holder stops renewing it
    /// (its process was killed): the shared memory engine expires it, an etcd cluster revokes it
    /// (the same deletion of its keys that expiry makes, without waiting for its time to live).
    public func endLease(_ id: UInt64) throws {
        switch engine {
        case .shared: (store as? MemoryEngine)?.expireLease(id)
        case .etcd:
            if let etcdLocation { try EtcdClient(endpoints: try EtcdLocation(etcdLocation).endpoints).revokeLease(id) }
        default: break
        }
    }

    /// Closes and opens the database again (on the same engine).
    public func reopen() throws { try reopen(options: options) }

    /// Closes the database and opens it again with `options` (on the same engine), which later
    /// reopens and clients use too.
    public func reopen(options: BuriOptions) throws {
        var options = options
        if engine == .shared || engine == .etcd { options.maxCommitAttempts = max(options.maxCommitAttempts, 1_000) }
        self.options = options
        db.close()
        if let store {
            db = try BuriDatabase(engine: store, options: options, closesEngine: false)
        } else {
            db = try BuriDatabase(path: path, options: options)
        }
    }

    /// Every key the engine holds, read through the open database's engine.
    public func rawKeys() throws -> [[UInt8]] {
        try scanKeys(db.engine.snapshot())
    }

    deinit {
        db.close()
        store?.close()
        for client in clients { client.close() }
        if engine == .etcd, let etcdLocation { Self.removeEtcdData(etcdLocation) }
        try? FileManager.default.removeItem(at: directory)
    }
}

extension TestDatabase {
    /// Deletes every key of an etcd test database, so that the shared cluster does not grow.
    static func removeEtcdData(_ location: String) {
        guard let engine = try? EtcdEngine(location: location) else { return }
        defer { engine.close() }
        try? engine.deleteAll()
    }
}

/// Every key of a reader, in order.
public func scanKeys(_ reader: any StorageReader) throws -> [[UInt8]] {
    let cursor = try reader.cursor(in: BuriStorage.KeyRange.all, reverse: false)
    var keys: [[UInt8]] = []
    while try cursor.next() { keys.append(cursor.key) }
    return keys
}

/// Every key and value of a reader, in order: the whole state of a database, for "nothing was
/// written" checks that work on every engine.
public func scanEntries(_ reader: any StorageReader) throws -> [[UInt8]] {
    let cursor = try reader.cursor(in: BuriStorage.KeyRange.all, reverse: false)
    var entries: [[UInt8]] = []
    while try cursor.next() { entries.append(try cursor.key + [0xFF, 0xFF, 0xFF] + cursor.value) }
    return entries
}
