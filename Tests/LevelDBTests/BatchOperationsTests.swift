import LevelDB
import Testing

@Suite("Write batch operations")
struct BatchOperationsTests {
    @Test func writeBatchListsItsOperationsInOrder() {
        let batch = WriteBatch()
        batch.put([0, 0], [])
        batch.delete([0xFF])
        batch.put(Array("k".utf8), [UInt8](repeating: 7, count: 70_000))
        var seen: [(key: [UInt8], value: [UInt8]?)] = []
        batch.forEachOperation { key, value in seen.append((Array(key), value.map { Array($0) })) }
        #expect(seen.count == 3)
        #expect(seen.map(\.key) == [[0, 0], [0xFF], Array("k".utf8)])
        #expect(seen.map(\.value) == [[], nil, [UInt8](repeating: 7, count: 70_000)])
        var none = 0
        WriteBatch().forEachOperation { _, _ in none += 1 }
        #expect(none == 0)
    }
}
