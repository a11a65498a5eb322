import Foundation
@testable import Buri
import LevelDB

/// A fresh database in its own temporary directory, removed afterwards.
final class TestDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent("db.buri").path }
    private(set) var db: BuriDatabase

    init(options: BuriOptions = BuriOptions()) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        db = try BuriDatabase(path: directory.appendingPathComponent("db.buri").path, options: options)
    }

    /// Closes and opens the database again.
    func reopen() throws {
        db.close()
        db = try BuriDatabase(path: path)
    }

    /// Every raw LevelDB key, read through the open database's storage handle.
    func rawKeys() throws -> [[UInt8]] {
        try db.storage.entries().map(\.key)
    }

    deinit {
        db.close()
        try? FileManager.default.removeItem(at: directory)
    }
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
