import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

// Fixtures of the BuriTransfer suites: a bucket whose objects and keys are hard to carry as text
// (Unicode, NUL bytes, bytes, dates, a value of several MiB), with every kind of index, including
// one only Swift code computes (so that the export carries its values: format 4).

/// An object of the "items" bucket.
struct Item: BuriSupport, Equatable {
    var id: String
    var name: String
    var tags: [String]
    var score: Double
    var mail: String
    var note: String
    var blob: Data
    var due: Date?

    static let buri = BuriSchema<Item>(
        key: \.id,
        indexes: [
            .binary("name", \.name, field: "name"),
            .binary("tags", \.tags, field: "tags"),
            .numeric("score", \.score, field: "score"),
            .binary("mail", \.mail, field: "mail", unique: true),
            .compound("name_score", .binary(\.name, field: "name"), .numeric(\.score, field: "score")),
            // Only Swift computes it: the export carries its values.
            .computed("initial", components: [.binary]) { item in [[IndexValue(String(item.name.prefix(1)))]] },
        ],
        bucket: "items",
        keyField: "id"
    )
}

/// A bucket with an index and no object.
struct Unused: BuriSupport, Equatable {
    var key: String
    var size: Int

    static let buri = BuriSchema<Unused>(
        key: \.key, indexes: [.numeric("size", \.size, field: "size")], bucket: "empty", keyField: "key")
}

/// The items: keys in several scripts, two keys that are the same text in Unicode but not the same
/// bytes, NUL bytes in keys and values, every byte value, a date, and a value over 4 MiB (a line
/// longer than the reader's block and the import's chunk).
let fixtureItems: [Item] = {
    let keys = [
        "a", "ключ", "日本語", "🦊 fox", "caf\u{E9}", "cafe\u{301}", "nul\u{0}key", "tab\tand \"quote\"", "z",
    ]
    var items = keys.enumerated().map { i, key in
        Item(
            id: key, name: ["Ann", "Bo", "Čeněk", "Dörte"][i % 4], tags: i % 3 == 0 ? [] : ["t\(i % 2)", "shared"],
            score: Double(i) * 1.5 - 3, mail: "m\(i)@example.org", note: "line\nbreak and \u{0} nul \(i)",
            blob: Data((0..<256).map { UInt8(($0 + i) % 256) }),
            due: i % 2 == 0 ? Date(timeIntervalSince1970: 1_700_000_000 + Double(i)) : nil)
    }
    items.append(
        Item(
            id: "huge", name: "Huge", tags: ["big"], score: 1e300, mail: "huge@example.org",
            note: String(repeating: "0123456789abcdef", count: 6 << 16), blob: Data(count: 1 << 16), due: nil))
    return items
}()

/// A fresh database on disk holding the fixtures (and the empty bucket).
func fixtureDatabase(in directory: TemporaryDirectory, name: String = "source.buri") throws -> BuriDatabase {
    let db = try BuriDatabase.create(location: directory.path(name))
    try db.bucket(Item.self).store(fixtureItems)
    _ = try db.bucket(Unused.self)
    return db
}

/// A record as what it holds: its key, the value its payload encodes (an import writes each float
/// in its shortest exact encoding, the Swift encoder in 64 bits: the same value), its schema
/// version and the index values of its header.
struct RecordContents: Equatable {
    var key: String
    var object: CBORValue
    var schemaVersion: UInt64
    var indexValues: [IndexName: [[IndexValue]]]
}

/// Every record of bucket `name`, in key order.
func records(_ db: BuriDatabase, _ name: String) throws -> [RecordContents] {
    let cursor = try db.rawBucket(named: name).cursor(.all)
    var all: [RecordContents] = []
    while let record = try cursor.nextRecord() {
        all.append(
            RecordContents(
                key: record.key, object: try CBORValue(decoding: record.payload), schemaVersion: record.schemaVersion,
                indexValues: record.indexValues))
    }
    return all
}

/// The export of `db` as text.
func exportText(_ db: BuriDatabase, _ options: ExportOptions = ExportOptions()) throws -> String {
    var text = ""
    try db.export(options: options) { line in text += line + "\n" }
    return text
}

/// Every key and value `db` holds: its whole state, for "nothing was written" checks.
func everyEntry(_ db: BuriDatabase) throws -> [[UInt8]] {
    try scanEntries(db.engine.snapshot())
}

/// A bucket's indexes as a definition states them (their ids aside).
func indexes(_ db: BuriDatabase, _ name: String) throws -> [IndexDefinition] {
    try db.rawBucket(named: name).descriptor.indexes.map { index in
        var index = index
        index.id = 0
        return index
    }
}

/// Writes `text` to file `name` of `directory`; its path.
func write(_ text: String, _ name: String, in directory: TemporaryDirectory) throws -> String {
    let path = directory.path(name)
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

/// Runs `body`, which must throw a ``TransferError``; returns it.
func transferError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> TransferError? {
    do {
        try body()
        Issue.record("no error thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as TransferError {
        return error
    } catch {
        Issue.record("not a TransferError: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
