import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

// Import, restore and export on their failure paths (issues 21 and 22): a failed import or restore
// leaves every key as it was; what a killed one staged is gone after the next command that
// writes; an export restores whatever it holds; schema lines are read strictly; counts and
// messages say what happened.
//
// What those suites share; each has a file of its own (FailedTransferLeavesNoTraceTests.swift,
// KilledTransferStageTests.swift, TransferMessageTests.swift, StrictSchemaLineTests.swift,
// LongLineImportTests.swift).

/// Every key and value of the database at `path`, read with purging off (so reading changes no key).
func everyKey(_ path: String) throws -> [[UInt8]: [UInt8]] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    let snapshot = try db.engine.snapshot()
    let cursor = try snapshot.cursor(in: .all)
    var result: [[UInt8]: [UInt8]] = [:]
    while try cursor.next() { result[cursor.key] = try cursor.value }
    return result
}

/// How the keys of two states differ, for messages (at most a few keys, in hex).
func keyDifference(_ before: [[UInt8]: [UInt8]], _ after: [[UInt8]: [UInt8]]) -> String {
    func hex(_ bytes: [UInt8]) -> String { bytes.prefix(24).map { String(format: "%02x", $0) }.joined(separator: " ") }
    let added = after.keys.filter { before[$0] == nil }.map(hex).sorted()
    let removed = before.keys.filter { after[$0] == nil }.map(hex).sorted()
    let changed = before.keys.filter { after[$0] != nil && after[$0] != before[$0] }.map(hex).sorted()
    return
        "added \(added.count) \(added.prefix(5)), removed \(removed.count) \(removed.prefix(5)), changed \(changed.count) \(changed.prefix(5))"
}

/// The pending purges of the database at `path` (read with purging off).
func pendingPurges(_ path: String) throws -> [RetiredBucket] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    return try db.pendingPurges()
}

/// The total size of the files of directory `path`.
func directorySize(_ path: String) throws -> Int {
    try FileManager.default.contentsOfDirectory(atPath: path).reduce(0) { total, name in
        let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
        return total + ((attributes[.size] as? NSNumber)?.intValue ?? 0)
    }
}

/// A unique binary index over field `field`, as a tool-computable definition.
func uniqueIndex(_ name: String, field: String) -> IndexDefinition {
    var index = IndexDefinition(id: 0, name: name, components: [.binary], unique: true)
    index.setFieldPaths([[field]])
    return index
}

/// Builds CBOR payloads for the fixtures of these suites.
enum CBORValueFixtures {
    static func object(id: String, n: Int, mail: String) -> [UInt8] {
        CBORValue.map([
            CBORMapEntry(key: "id", value: .text(id)), CBORMapEntry(key: "n", value: .int(Int64(n))),
            CBORMapEntry(key: "mail", value: .text(mail)),
        ]).encoded()
    }

    static func person(_ person: Person) -> [UInt8] {
        CBORValue.map([
            CBORMapEntry(key: "objectId", value: .text(person.objectId)),
            CBORMapEntry(key: "name", value: .text(person.name)),
            CBORMapEntry(key: "locale", value: .text(person.locale)),
            CBORMapEntry(key: "age", value: .int(Int64(person.age))),
        ]).encoded()
    }
}
