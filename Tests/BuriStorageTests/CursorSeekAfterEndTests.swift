import BuriStorage
import Testing

/// Found by the randomized model test: a LevelDB cursor that had run out of its range released its
/// iterator and ignored every later seek, so a transaction's reader (its pending writes merged over
/// the engine's cursor) that looked a record up after the engine's cursor ran out found nothing,
/// and a query inside a transaction failed with "an index entry points to an object that does not
/// exist". Every engine's cursor must seek again after the end, as StorageCursor promises.
@Suite("Cursors seek again after running out of their range")
struct CursorSeekAfterEndTests {
    static func key(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test(arguments: EngineKind.allCases)
    func aCursorSeeksAgainAfterItsEnd(engine kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        let batch = engine.makeBatch()
        for name in ["a", "b", "c", "d"] { batch.put(Self.key(name), Self.key("v" + name)) }
        try engine.commit(batch, conditions: nil, sync: false)
        for reader in [try engine.snapshot() as any StorageReader, try engine.latest()] {
            // Forward: run out, then seek back into the range.
            let forward = try reader.cursor(in: KeyRange(start: Self.key("a"), end: Self.key("d")), reverse: false)
            forward.seek(Self.key("c"))
            #expect(try forward.next())
            #expect(forward.key == Self.key("c"))
            #expect(try !forward.next())
            #expect(!forward.isOnEntry)
            #expect(try !forward.next())
            forward.seek(Self.key("b"))
            #expect(try forward.next())
            #expect(forward.key == Self.key("b"))
            #expect(try forward.value == Self.key("vb"))
            // Past the last key of the data, then back.
            let all = try reader.cursor(in: .all, reverse: false)
            all.seek(Self.key("z"))
            #expect(try !all.next())
            all.seek(Self.key("a"))
            #expect(try all.next())
            #expect(all.key == Self.key("a"))
            // Reverse: run out at the start, then seek.
            let reverse = try reader.cursor(in: KeyRange(start: Self.key("b"), end: nil), reverse: true)
            reverse.seek(Self.key("b"))
            #expect(try reverse.next())
            #expect(reverse.key == Self.key("b"))
            #expect(try !reverse.next())
            reverse.seek(Self.key("cc"))
            #expect(try reverse.next())
            #expect(reverse.key == Self.key("c"))
        }
    }
}
