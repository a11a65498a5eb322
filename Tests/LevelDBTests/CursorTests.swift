import LevelDB
import Testing

@Suite("Cursors and ranges")
struct CursorTests {
    /// A database holding keys "a", "b", ..., "j" and a few neighbours that bounds must exclude.
    func sample() throws -> (TemporaryDirectory, Database) {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        for c in "abcdefghij" { try db.put(bytes(String(c)), bytes(String(c).uppercased())) }
        try db.put(bytes("p"), bytes("P"))
        try db.put(bytes("p\u{0}"), bytes("P0"))
        try db.put(bytes("pa"), bytes("PA"))
        try db.put([0x70, 0xFF], bytes("PFF"))
        try db.put([0x70, 0xFF, 0xFF], bytes("PFFFF"))
        try db.put(bytes("q"), bytes("Q"))
        return (dir, db)
    }

    func keys(_ db: Database, _ range: KeyRange, reverse: Bool = false) throws -> [String] {
        try db.entries(in: range, reverse: reverse).map { String(decoding: $0.key, as: UTF8.self) }
    }

    @Test func halfOpenRangeIncludesStartExcludesEnd() throws {
        let (_, db) = try sample()
        #expect(try keys(db, KeyRange(start: bytes("c"), end: bytes("f"))) == ["c", "d", "e"])
        #expect(try keys(db, KeyRange(start: bytes("c"), end: bytes("f")), reverse: true) == ["e", "d", "c"])
        #expect(try keys(db, KeyRange(start: bytes("cc"), end: bytes("e0"))) == ["d", "e"])
        #expect(try keys(db, KeyRange(start: bytes("f"), end: bytes("c"))).isEmpty)
        #expect(try keys(db, KeyRange(start: bytes("f"), end: bytes("f"))).isEmpty)
        #expect(try keys(db, KeyRange(end: bytes("c"))) == ["a", "b"])
        #expect(try keys(db, KeyRange(end: bytes("c")), reverse: true) == ["b", "a"])
        #expect(try keys(db, KeyRange(start: bytes("pb"))).count == 3)  // 0x70FF, 0x70FFFF, q
    }

    @Test func prefixRangeHandlesNulAndFF() throws {
        let (_, db) = try sample()
        let pKeys = try db.entries(in: .prefix(bytes("p"))).map(\.key)
        #expect(pKeys == [bytes("p"), [0x70, 0], bytes("pa"), [0x70, 0xFF], [0x70, 0xFF, 0xFF]])
        #expect(try db.entries(in: .prefix([0x70, 0xFF])).map(\.key) == [[0x70, 0xFF], [0x70, 0xFF, 0xFF]])
        #expect(
            try db.entries(in: .prefix([0x70, 0xFF]), reverse: true).map(\.key) == [[0x70, 0xFF, 0xFF], [0x70, 0xFF]])
        #expect(try db.entries(in: .prefix([0x70, 0])).map(\.value) == [bytes("P0")])
        #expect(KeyRange.prefix([0x70, 0xFF]).end == [0x71])
        #expect(KeyRange.prefix([0xFF, 0xFF]).end == nil)
        #expect(KeyRange.prefix([]).end == nil)
        #expect(try db.entries(in: .prefix([])).map(\.key).count == 16)
    }

    @Test func reverseFullScanIsTheForwardScanBackwards() throws {
        let (_, db) = try sample()
        let forward = try db.entries().map(\.key)
        let backward = try db.entries(reverse: true).map(\.key)
        #expect(forward == Array(backward.reversed()))
        #expect(forward.count == 16)
    }

    @Test func seekForwardAndBackwardStaysInsideTheRange() throws {
        let (_, db) = try sample()
        let cursor = try db.cursor(in: KeyRange(start: bytes("c"), end: bytes("h")))
        cursor.seek(bytes("e"))
        #expect(try cursor.next())
        #expect(cursor.key == bytes("e"))
        #expect(cursor.value == bytes("E"))
        cursor.seek(bytes("a"))  // before the range: clamps to its start
        #expect(try cursor.next())
        #expect(cursor.key == bytes("c"))
        cursor.seek(bytes("ee"))  // between keys: the next one
        #expect(try cursor.next())
        #expect(cursor.key == bytes("f"))
        cursor.seek(bytes("z"))  // past the range
        #expect(try !cursor.next())
        #expect(!cursor.isOnEntry)
        #expect(try !cursor.next())

        let reverse = try db.cursor(in: KeyRange(start: bytes("c"), end: bytes("h")), reverse: true)
        reverse.seek(bytes("ee"))  // between keys: the previous one
        #expect(try reverse.next())
        #expect(reverse.key == bytes("e"))
        #expect(try reverse.next())
        #expect(reverse.key == bytes("d"))
        reverse.seek(bytes("z"))  // past the end: clamps to the last key in range
        #expect(try reverse.next())
        #expect(reverse.key == bytes("g"))
        reverse.seek(bytes("a"))  // before the start: nothing
        #expect(try !reverse.next())
    }

    @Test func reverseSeekPastTheLastKeyOfTheDatabase() throws {
        let (_, db) = try sample()
        let cursor = try db.cursor(reverse: true)
        cursor.seek(bytes("zzz"))
        #expect(try cursor.next())
        #expect(cursor.key == bytes("q"))
    }

    @Test func borrowedKeyAndValueMatchCopies() throws {
        let (_, db) = try sample()
        let cursor = try db.cursor(in: .prefix(bytes("pa")))
        #expect(cursor.withKey { $0.count } == 0)  // not on an entry yet
        #expect(try cursor.next())
        #expect(cursor.withKey { Array($0) } == bytes("pa"))
        #expect(cursor.withValue { Array($0) } == bytes("PA"))
        #expect(try !cursor.next())
        cursor.close()
        #expect(try !cursor.next())
    }

    @Test func emptyDatabaseAndEmptyRangesYieldNothing() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        #expect(try db.entries().map(\.key).isEmpty)
        #expect(try db.entries(reverse: true).map(\.key).isEmpty)
        let cursor = try db.cursor(in: .prefix(bytes("x")), reverse: true)
        #expect(try !cursor.next())
    }

    @Test func manyKeysScanInBytewiseOrder() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        var rng = SeededGenerator(seed: 42)
        var expected = Set<[UInt8]>()
        let batch = WriteBatch()
        for _ in 0..<3000 {
            let alphabet: [UInt8] = [0, 1, 0x7F, 0xFE, 0xFF]
            let key: [UInt8] = (0..<Int.random(in: 0...6, using: &rng)).map { _ in
                alphabet.randomElement(using: &rng) ?? 0
            }
            expected.insert(key)
            batch.put(key, key)
        }
        try db.write(batch)
        let sorted = expected.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(try db.entries().map(\.key) == sorted)
        #expect(try db.entries(in: .prefix([0xFF])).map(\.key) == sorted.filter { $0.first == 0xFF })
        #expect(
            try db.entries(in: .prefix([0, 0xFF]), reverse: true).map(\.key)
                == sorted.filter { $0.starts(with: [0, 0xFF]) }.reversed())
    }
}
