import Buri
import BuriCodec
import BuriStorage
import Foundation
import Testing

/// Every key and value an engine holds.
private func allKeys(_ db: BuriDatabase) throws -> [[UInt8]: [UInt8]] {
    let cursor = try db.engine.snapshot().cursor(in: .all)
    var result: [[UInt8]: [UInt8]] = [:]
    while try cursor.next() { result[cursor.key] = try cursor.value }
    return result
}

private func objects(_ range: Range<Int>) -> [RawObject] {
    range.map { i in
        RawObject(
            key: "k\(i)", payload: CBORValue.map([CBORMapEntry(key: "n", value: .int(Int64(i)))]).encoded(),
            indexValues: ["n": [[IndexValue(i)]]])
    }
}

@Suite("StagedImport.discard deletes the stage at once: every key is as it was")
struct StagedImportDiscardTests {
    @Test(arguments: ["memory", "leveldb"])
    func discardLeavesEveryKeyAsItWas(_ kind: String) throws {
        var options = BuriOptions()
        // No background purge: whatever is deleted, discard deletes on the calling thread.
        options.purgesInBackground = false
        let db =
            kind == "memory"
            ? try BuriDatabase.inMemory(options: options) : try BuriDatabase.temporary(options: options)
        defer { db.close() }
        var n = IndexDefinition(id: 0, name: "n", components: [.numeric])
        n.setFieldPaths([["n"]])
        try db.createBucket(named: "B", keyField: nil, indexes: [n]).store(objects(0..<50))
        let before = try allKeys(db)

        // A stage into the existing bucket: its copy and 2,500 objects stored in chunks.
        let load = try db.stageImport(into: "B", chunkSize: 7)
        for start in stride(from: 40, to: 2540, by: 500) { try load.store(objects(start..<(start + 500))) }
        #expect(try allKeys(db).count > before.count)
        try load.discard()
        #expect(try allKeys(db) == before)
        #expect(try db.pendingPurges().isEmpty)
        // Idempotent, and the stage is ended.
        try load.discard()
        #expect(throws: BuriError.self) { try load.store(objects(0..<1)) }

        // A stage creating a bucket.
        let fresh = try db.stageImport(creating: "C", indexes: [n])
        try fresh.store(objects(0..<300))
        try fresh.discard()
        #expect(try allKeys(db) == before)
        #expect(try db.bucketNames() == ["B"])

        // After publishing, discard deletes nothing.
        let published = try db.stageImport(creating: "D", indexes: [n])
        try published.store(objects(0..<10))
        try published.publish()
        try published.discard()
        #expect(try db.rawBucket(named: "D").count() == 10)
    }
}
