import BuriStorage
import Foundation
@testable import Buri
import LevelDB

/// The storage engines the shared suites run on.
enum Engine: String, CaseIterable, CustomStringConvertible, Sendable {
    /// LevelDB in a directory (the default).
    case leveldb
    /// ``MemoryEngine``.
    case memory
    /// LevelDB in a directory removed on close.
    case temporary

    var description: String { rawValue }
}

/// A fresh database on `engine`, removed afterwards.
final class TestDatabase {
    let directory: URL
    let engine: Engine
    var path: String { directory.appendingPathComponent("db.buri").path }
    private(set) var db: BuriDatabase
    /// The engine the database runs on, kept across ``reopen()`` for engines without a directory.
    private let store: (any StorageEngine)?
    private let options: BuriOptions

    init(_ engine: Engine = .leveldb, options: BuriOptions = BuriOptions()) throws {
        self.engine = engine
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
            let temporary = try LevelDBEngine.temporary(options: options.storage)
            store = temporary
            db = try BuriDatabase(engine: temporary, options: options, closesEngine: false)
        }
    }

    /// Closes and opens the database again (on the same engine).
    func reopen() throws {
        db.close()
        if let store {
            db = try BuriDatabase(engine: store, options: options, closesEngine: false)
        } else {
            db = try BuriDatabase(path: path, options: options)
        }
    }

    /// Every raw LevelDB key, read through the open database's storage handle.
    func rawKeys() throws -> [[UInt8]] {
        try scanKeys(db.engine.snapshot())
    }

    deinit {
        db.close()
        store?.close()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Every key of a reader, in order.
func scanKeys(_ reader: any StorageReader) throws -> [[UInt8]] {
    let cursor = try reader.cursor(in: BuriStorage.KeyRange.all, reverse: false)
    var keys: [[UInt8]] = []
    while try cursor.next() { keys.append(cursor.key) }
    return keys
}

struct PersonRecord: BuriSupport, Equatable, Hashable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<PersonRecord>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
        bucket: "Person"
    )
}

/// A type with numbers of several kinds in one index, and optional / fractional values.
struct Measurement: BuriSupport, Equatable {
    var id: String
    var value: Double
    var count: Int64
    var big: UInt64
    var label: String?

    static let buri = BuriSchema<Measurement>(
        key: \.id,
        indexes: [.numeric("value", \.value), .numeric("count", \.count), .numeric("big", \.big), .binary("label", \.label)]
    )
}

/// SplitMix64, so random tests reproduce.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
