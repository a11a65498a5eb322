import Foundation
import Testing

@testable import Buri

/// A collecting plan reads every candidate's record to check it; the walk then returns the values
/// it kept (up to a budget) instead of reading each record again, and reads the rest. Either way
/// the results are those of the other strategies, in the same order, from the same snapshot.
@Suite("A collecting plan returns the records it read, and reads again those beyond its budget")
struct CollectedValuesTests {
    struct Doc: BuriSupport, Equatable {
        var id: String
        var n: Int
        var tag: String
        var body: String
        static let buri = BuriSchema<Doc>(key: \.id, indexes: [.numeric("n", \.n), .binary("tag", \.tag)])
    }

    static let count = 2_000
    /// Every eighth object is a hit; hits are large enough that their values exceed the budget.
    static func doc(_ i: Int, generation: Int = 0) -> Doc {
        let hit = i % 8 == 3
        let body = hit ? String(repeating: "\(i % 10)", count: 48_000) + "\u{E9}\u{0}\(generation)" : "small \(i)"
        return Doc(id: String(format: "d%05d", i), n: i, tag: hit ? "hit" : "miss", body: body)
    }

    @Test(arguments: Engine.allCases) func keptAndRereadValuesAgreeWithTheWalk(engine: Engine) throws {
        let count = engine == .etcd ? 160 : Self.count
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(Doc.self)
        let all = (0..<count).map { Self.doc($0) }
        try docs.store(all)
        let hits = all.filter { $0.tag == "hit" }
        if engine != .etcd {
            // More than the budget in values: some kept, the rest read again.
            #expect(hits.reduce(0) { $0 + $1.body.utf8.count } > RawQueryCursor.keptValueBudget)
        }
        let query = Query.index("n", in: IndexValue(0)...IndexValue(count - 1)).and(.index("tag", equals: "hit"))
        #expect(try docs.raw.cursor(query).plan.collectFrom != nil, "the query is expected to collect")
        for (query, expected) in [
            (query, hits), (query.descending(), Array(hits.reversed())),
            (query.offset(7).limit(40), Array(hits.dropFirst(7).prefix(40))),
        ] {
            #expect(try docs.objects(query) == expected)
            let walked = try docs.raw.cursor(query, strategy: .walk)
            var keys: [String] = []
            while let key = try walked.nextKey() { keys.append(key) }
            #expect(keys == expected.map { $0.id })
            // The serial cursor too.
            let cursor = try docs.cursor(query)
            var objects: [Doc] = []
            while let object = try cursor.next() { objects.append(object) }
            #expect(objects == expected)
        }
        // A cursor reads one snapshot: writes after it collected change nothing it returns.
        let cursor = try docs.cursor(query)
        try docs.store((0..<count).filter { $0 % 8 == 3 }.map { Self.doc($0, generation: 1) })
        try docs.delete(key: hits[hits.count - 1].id)
        var objects: [Doc] = []
        while let object = try cursor.next() { objects.append(object) }
        #expect(objects == hits)
        #expect(
            try docs.objects(query).map(\.body.utf8.last) == Array(repeating: UInt8(ascii: "1"), count: hits.count - 1))
    }
}
