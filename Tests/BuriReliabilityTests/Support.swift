import BuriStorage
@_exported import BuriTestSupport
import Foundation
import LevelDB
@testable import Buri

extension SeededGenerator {
    /// `count` random bytes.
    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}

/// Whether the long runs were asked for (`Scripts/test --full` sets BURI_FULL_TESTS=1).
let fullTests = ProcessInfo.processInfo.environment["BURI_FULL_TESTS"] == "1"

/// The object type most reliability tests store. A local type: its shape (`id`, tags, a score,
/// four indexes) is not that of the other targets' people.
struct Person: BuriSupport, Equatable, Sendable {
    var id: String
    var name: String
    var locale: String
    var age: Int
    var tags: [String] = []
    var score: Double = 0

    static let buri = BuriSchema<Person>(
        key: \.id,
        indexes: [
            .binary("locale", \.locale), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
        ]
    )
}

/// Every key and value in the LevelDB database at `path`, read with LevelDB directly (Buri must be closed).
func rawContents(_ path: String) throws -> [Entry] {
    var options = Options()
    options.createIfMissing = false
    let database = try Database(path: path, options: options)
    defer { database.close() }
    var entries: [Entry] = []
    let cursor = try database.cursor()
    while try cursor.next() { entries.append(Entry(key: cursor.key, value: cursor.value)) }
    return entries
}

/// Runs `body` on the LevelDB database at `path` (Buri must be closed).
func withRawDatabase<R>(_ path: String, _ body: (Database) throws -> R) throws -> R {
    var options = Options()
    options.createIfMissing = false
    let database = try Database(path: path, options: options)
    defer { database.close() }
    return try body(database)
}

/// The keys Buri writes for `bucket`'s index entries, computed from objects and the catalog alone.
func expectedIndexEntries(_ objects: [Person], descriptor: BucketDescriptor) throws -> Set<[UInt8]> {
    var keys = Set<[UInt8]>()
    func add(_ index: String, _ value: IndexValue, _ key: String) {
        guard let definition = descriptor.index(named: index) else { return }
        keys.insert(
            Keyspace.indexEntryKey(
                prefix: Keyspace.indexPrefix(bucket: descriptor.id, index: definition.id), tuple: value.encoded,
                objectKey: key))
    }
    for object in objects {
        add("locale", IndexValue(object.locale), object.id)
        add("age", IndexValue(object.age), object.id)
        for tag in Set(object.tags) { add("tags", IndexValue(tag), object.id) }
        add("score", try IndexValue(object.score), object.id)
    }
    return keys
}

/// The index-entry keys stored for bucket `id`, read through the open database's storage.
func storedIndexEntries(_ db: BuriDatabase, bucket id: UInt32) throws -> Set<[UInt8]> {
    var keys = Set<[UInt8]>()
    let cursor = try db.engine.snapshot().cursor(
        in: BuriStorage.KeyRange.prefix(Keyspace.indexSpacePrefix(bucket: id)), reverse: false)
    while try cursor.next() { keys.insert(cursor.key) }
    return keys
}

extension ConsistencyReport {
    /// The problems, one per line, for failure messages.
    var summary: String { problems.isEmpty ? "no problems" : problems.map(\.description).joined(separator: "\n") }
}

/// The error opening the database at `path` throws, or `nil` if it opens (it is closed again).
func openError(_ path: String, options: BuriOptions = BuriOptions()) -> BuriError? {
    do {
        let db = try BuriDatabase(path: path, options: options)
        db.close()
        return nil
    } catch {
        return error
    }
}
