import LevelDB
import Testing

@Suite("Write batches and snapshots")
struct BatchSnapshotTests {
    @Test func batchCountsAndSizesFollowLevelDBsLayout() {
        let batch = WriteBatch()
        #expect(batch.isEmpty)
        #expect(batch.byteSize == 12)
        batch.put(bytes("ab"), bytes("xyz"))  // 1 + 1 + 2 + 1 + 3
        batch.delete(bytes("ab"))  // 1 + 1 + 2
        #expect(batch.count == 2)
        #expect(batch.byteSize == 12 + 8 + 4)
        let other = WriteBatch()
        other.put([UInt8](repeating: 1, count: 200), [UInt8]())  // 1 + 2 + 200 + 1
        batch.append(other)
        #expect(batch.count == 3)
        #expect(batch.byteSize == 12 + 8 + 4 + 204)
        batch.clear()
        #expect(batch.count == 0)
        #expect(batch.byteSize == 12)
    }

    @Test func batchAppliesInOrderAndAtomically() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        try db.put(bytes("gone"), bytes("x"))
        let batch = WriteBatch()
        for i in 0..<100 { batch.put(bytes("k\(i)"), bytes("v\(i)")) }
        batch.put(bytes("k0"), bytes("last wins"))
        batch.delete(bytes("gone"))
        let snapshotBefore = try db.snapshot()
        try db.write(batch, options: .sync)
        #expect(try db.get(bytes("k0")) == bytes("last wins"))
        #expect(try db.get(bytes("k99")) == bytes("v99"))
        #expect(try db.get(bytes("gone")) == nil)
        // A reader that started before the write sees none of it.
        let before = ReadOptions(snapshot: snapshotBefore)
        #expect(try db.get(bytes("k5"), options: before) == nil)
        #expect(try db.get(bytes("gone"), options: before) == bytes("x"))
    }

    @Test func concurrentReadersSeeAllOrNothingOfEachBatch() async throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        let keys = (0..<20).map { bytes("pair\($0)") }
        let initial = WriteBatch()
        for key in keys { initial.put(key, bytes("0")) }
        try db.write(initial)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 1...300 {
                    let batch = WriteBatch()
                    for key in keys { batch.put(key, bytes("\(round)")) }
                    try db.write(batch)
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<300 {
                        let snapshot = try db.snapshot()
                        let values = try keys.map { try db.get($0, options: ReadOptions(snapshot: snapshot)) }
                        #expect(Set(values).count == 1, "a reader saw a half-applied batch")
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func snapshotIsolatesCursorsToo() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        for i in 0..<10 { try db.put(bytes("k\(i)"), bytes("old")) }
        let snapshot = try db.snapshot()
        for i in 0..<10 { try db.put(bytes("k\(i)"), bytes("new")) }
        try db.put(bytes("k99"), bytes("new"))
        let old = try db.entries(options: ReadOptions(snapshot: snapshot, verifyChecksums: true, fillCache: false))
        #expect(old.map(\.value).allSatisfy { $0 == bytes("old") })
        #expect(old.map(\.key).count == 10)
        #expect(try db.entries().map(\.key).count == 11)
    }
}
