import Foundation
@testable import Buri
import LevelDB
import Testing

@Suite("Combined conditions, order and paging")
final class CombinedQueryTests {
    var t: TestDatabase!
    var notes: Bucket<Note>!

    func setUp(_ engine: Engine) throws {
        t = try TestDatabase(engine)
        notes = try t.db.bucket(Note.self)
        let locales = ["EN", "NL", "DE"]
        try notes.store(
            (0..<300).map {
                Note(
                    String(format: "n%03d", $0), tags: $0 % 10 == 0 ? ["ten"] : [], locale: locales[$0 % 3],
                    age: $0 % 50)
            })
    }

    @Test(arguments: Engine.allCases) func andOfTwoIndexesReturnsExactlyTheIntersection(engine: Engine) throws {
        try setUp(engine)
        let query = Query.index("locale", equals: "EN").and(.index("age", in: 10...12))
        let expected = (0..<300).filter { $0 % 3 == 0 && (10...12).contains($0 % 50) }.map {
            String(format: "n%03d", $0)
        }
        #expect(Set(try notes.keys(query)) == Set(expected))
        #expect(try notes.count(query) == expected.count)
        #expect(try notes.objects(query).allSatisfy { $0.locale == "EN" && (10...12).contains($0.age) })
        let three = Query.index("tags", equals: "ten").and(.index("locale", equals: "EN")).and(
            .index("age", in: 0...10))
        let expectedThree = (0..<300).filter { $0 % 30 == 0 && $0 % 50 <= 10 }.map { String(format: "n%03d", $0) }
        #expect(expectedThree == ["n000", "n060", "n150", "n210"])
        #expect(Set(try notes.keys(three)) == Set(expectedThree))
    }

    @Test(arguments: Engine.allCases) func andChecksFurtherConditionsFromHeadersAndDecodesOnlyMatches(
        engine: Engine
    ) throws {
        try setUp(engine)
        // Damage the payload of every object that fails the second condition: if the query decoded
        // non-matching objects it would throw.
        let matching = Set(try notes.keys(.index("tags", equals: "ten")))
        t.db.close()
        let storage = try Database(path: t.path)
        for entry in try storage.entries(in: .prefix([Keyspace.recordTag])) {
            let key = String(decoding: entry.key.dropFirst(5), as: UTF8.self)
            if !matching.contains(key) {
                let (_, offset) = try entry.value.withUnsafeBytes { try RecordHeader.parse($0) }
                try storage.put(entry.key, Array(entry.value[..<offset]) + [0xFF, 0x00])
            }
        }
        storage.close()
        try t.reopen()
        let reopened = try t.db.bucket(Note.self)
        let found = try reopened.objects(Query.index("locale", equals: "EN").and(.index("tags", equals: "ten")))
        #expect(found.map(\.id) == ["n000", "n030", "n060", "n090", "n120", "n150", "n180", "n210", "n240", "n270"])
        #expect(try reopened.count(Query.index("age", in: 0...49).and(.index("tags", equals: "ten"))) == 30)
    }

    @Test(arguments: Engine.allCases) func limitOffsetAndDescendingCompose(engine: Engine) throws {
        try setUp(engine)
        let all = try notes.keys(.index("age", in: 0...49))
        #expect(all.count == 300)
        #expect(try notes.keys(.index("age", in: 0...49).offset(10).limit(5)) == Array(all[10..<15]))
        #expect(try notes.keys(.index("age", in: 0...49).descending().limit(5)) == Array(all.reversed().prefix(5)))
        #expect(try notes.keys(.index("age", in: 0...49).limit(0)).isEmpty)
    }

    @Test(arguments: Engine.allCases) func continuationResumesExactlyAfterTheLastResultDespiteConcurrentWrites(
        engine: Engine
    ) throws {
        try setUp(engine)
        let query = Query.index("age", in: 10...20)
        let first = try notes.keyPage(query, size: 25)
        #expect(first.items.count == 25)
        let token = try #require(first.next)
        let last = try #require(first.items.last)
        let lastAge = try #require(try notes.object(forKey: last)).age
        // Between pages: delete the next few results, add objects before and after the position.
        let upcoming = Array(try notes.keys(query.after(token)).prefix(3))
        try notes.delete(keys: upcoming)
        try notes.store([
            Note("a-before", locale: "EN", age: 10), Note("z-after", locale: "EN", age: 20),
            Note("n999", locale: "EN", age: lastAge),
        ])
        var rest: [String] = []
        var page = try notes.keyPage(query.after(token), size: 25)
        rest += page.items
        while let next = page.next {
            page = try notes.keyPage(query.after(next), size: 25)
            rest += page.items
        }
        let everything = try notes.keys(query)
        let position = try #require(everything.firstIndex(of: last))
        #expect(rest == Array(everything[(position + 1)...]))
        #expect(!rest.contains("a-before"))
        #expect(rest.contains("z-after") && rest.contains("n999"))
        #expect(Set(rest).isDisjoint(with: upcoming))
        // Tokens survive a round trip through their printed form.
        #expect(ContinuationToken(token.description) == token)
        #expect(ContinuationToken("zz") == nil)
    }

    @Test(arguments: Engine.allCases) func descendingPagesWalkBackwards(engine: Engine) throws {
        try setUp(engine)
        let query = Query.index("locale", equals: "NL").descending()
        var seen: [Note] = []
        var page = try notes.page(query, size: 7)
        seen += page.items
        while let next = page.next {
            page = try notes.page(query.after(next), size: 7)
            seen += page.items
        }
        #expect(seen.map(\.id) == (try notes.keys(query)))
        #expect(seen.count == 100)
    }

    @Test(arguments: Engine.allCases) func minAndMaxComeFromTheIndexAlone(engine: Engine) throws {
        try setUp(engine)
        #expect(try notes.min(index: "age") == 0)
        #expect(try notes.max(index: "age") == 49)
        #expect(try notes.min(index: "tags") == "ten")
        try notes.deleteAll()
        #expect(try notes.min(index: "age") == nil)
    }
}
