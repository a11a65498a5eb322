import BuriTestSupport
import Foundation
@testable import Buri
import Testing

@Suite("IN queries: any of a list of values, each object once, in index order")
struct InQueryTests {
    static let notes: [Note] = (0..<60).map { i in
        Note(
            String(format: "n%02d", i), tags: Array(["a", "b", "c", "d"].prefix(i % 5)), scores: [Double(i % 7)],
            locale: ["EN", "NL", "DE", "FR", "IT"][i % 5], age: 20 + i % 9)
    }

    /// The keys a model of `IN` gives: objects whose value is in `values`, by (value, key).
    func expected(_ values: [String], descending: Bool = false) -> [String] {
        let matches = Self.notes.filter { values.contains($0.locale) }
            .sorted {
                ($0.locale.utf8.lexicographicallyPrecedes($1.locale.utf8)) || ($0.locale == $1.locale && $0.id < $1.id)
            }
            .map(\.id)
        return descending ? matches.reversed() : matches
    }

    @Test(arguments: Engine.allCases) func anyOfSeveralValuesInIndexOrder(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        // Values far apart (the walk seeks over what lies between), in any order, with repeats.
        #expect(try notes.keys(.index("locale", in: ["NL", "DE", "NL"])) == expected(["DE", "NL"]))
        #expect(
            try notes.keys(Query.index("locale", in: ["NL", "DE"]).descending())
                == expected(["DE", "NL"], descending: true))
        #expect(try notes.keys(.index("locale", in: ["EN", "IT", "XX"])) == expected(["EN", "IT"]))
        #expect(try notes.objects(where: \.locale, in: ["FR"]).map(\.id) == expected(["FR"]))
        #expect(try notes.count(.index("locale", in: ["EN", "NL"])) == 24)
        // Limit and offset select from that order.
        #expect(
            try notes.keys(Query.index("locale", in: ["NL", "DE"]).offset(3).limit(5))
                == Array(expected(["DE", "NL"])[3..<8]))
        // A multi-valued index: an object whose several values match is one result, at its first.
        let tagged = try notes.keys(.index("tags", in: ["b", "d"]))
        #expect(tagged.count == Set(tagged).count)
        #expect(Set(tagged) == Set(Self.notes.filter { $0.tags.contains("b") || $0.tags.contains("d") }.map(\.id)))
        // Numbers, and a compound index's next component after its leading value.
        #expect(
            try notes.keys(.index("age", in: [21, 25, 28]))
                == Self.notes.filter { [21, 25, 28].contains($0.age) }.sorted { ($0.age, $0.id) < ($1.age, $1.id) }.map(
                    \.id))
        #expect(
            try notes.keys(.index("locale_age", leading: ["EN"], in: [20, 25]))
                == Self.notes.filter { $0.locale == "EN" && [20, 25].contains($0.age) }.sorted {
                    ($0.age, $0.id) < ($1.age, $1.id)
                }.map(\.id))
        // With another condition: the IN orders, the other filters (and the reverse).
        #expect(
            try notes.keys(Query.index("locale", in: ["EN", "NL"]).and(.index("age", in: 20...22)))
                == expected(["EN", "NL"]).filter { key in
                    Self.notes.first { $0.id == key }.map { (20...22).contains($0.age) } ?? false
                })
        let filtered = try notes.keys(Query.index("age", in: 20...22).and(.index("locale", in: ["EN", "NL"])))
        #expect(
            Set(filtered)
                == Set(Self.notes.filter { (20...22).contains($0.age) && ["EN", "NL"].contains($0.locale) }.map(\.id)))
    }

    @Test(arguments: Engine.allCases) func pagesResumeAndTokensAreBoundToTheList(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        let query = Query.index("locale", in: ["IT", "EN"])
        var walked: [String] = []
        var page = try notes.keyPage(query, size: 5)
        walked += page.items
        // Writes between pages: a new match after the position comes, a deleted one does not.
        try notes.store(Note("z9", locale: "IT"))
        _ = try notes.delete(key: "n59")
        while let next = page.next {
            page = try notes.keyPage(query.after(next), size: 5)
            walked += page.items
        }
        var now = Self.notes.filter { $0.id != "n59" }
        now.append(Note("z9", locale: "IT"))
        let model = now.filter { ["EN", "IT"].contains($0.locale) }
            .sorted {
                ($0.locale.utf8.lexicographicallyPrecedes($1.locale.utf8)) || ($0.locale == $1.locale && $0.id < $1.id)
            }.map(\.id)
        #expect(walked == model)
        // The same list in another order is the same query; another list is refused.
        let first = try notes.keyPage(query, size: 2)
        let token = try #require(first.next)
        #expect(
            try notes.keyPage(Query.index("locale", in: ["EN", "IT", "EN"]).after(token), size: 2).items.count == 2)
        #expect(throws: BuriError.self) { try notes.keyPage(Query.index("locale", in: ["EN"]).after(token), size: 2) }
    }

    @Test func noValuesMatchNothingAndAHundredThousandValuesWork() throws {
        let t = try TestDatabase(.memory)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        #expect(try notes.keys(.index("locale", in: [])).isEmpty)
        #expect(try notes.count(.index("age", in: [])) == 0)
        #expect(try notes.objects(where: \.locale, in: []).isEmpty)
        #expect(try notes.aggregate("age", where: .index("locale", in: [])) == .empty)
        let many = (0..<100_000).map { IndexValue($0 * 2) }
        #expect(
            try notes.keys(.index("age", in: many))
                == Self.notes.filter { $0.age % 2 == 0 }.sorted { ($0.age, $0.id) < ($1.age, $1.id) }.map(\.id))
        // A value of the wrong kind for the index is a typed error, not an empty answer.
        #expect(throws: BuriError.self) { try notes.keys(.index("locale", in: ["EN", 3])) }
        #expect(throws: BuriError.self) { try notes.keys(.index("age", in: ["twenty"])) }
    }
}

/// Objects with many values in a multi-valued index: a walk meets each of them once per value
/// in range, and returns it once, at its first (the cursor remembers where, rather than read its
/// record at every value).
struct ManyTags: BuriSupport, Equatable {
    var id: String
    var tags: [String]
    var group: Int
    static let buri = BuriSchema<ManyTags>(
        key: \.id, indexes: [.binary("tags", \.tags), .numeric("group", \.group)])
}

@Suite("Multi-valued walks over objects with many values")
struct ManyValuesWalkTests {
    static let objects: [ManyTags] = {
        var rng = SeededGenerator(seed: 7)
        return (0..<30).map { i in
            let count = 20 + Int(rng.next() % 41)
            let tags = (0..<count).map { _ in String(format: "t%03d", Int(rng.next() % 200)) }
            return ManyTags(id: String(format: "o%02d", i), tags: tags, group: i % 3)
        }
    }()

    /// The model: each object matching `inRange` once, at its smallest tag in range (largest
    /// descending), ordered by (that tag, key).
    static func expected(_ inRange: (String) -> Bool, group: Int? = nil, descending: Bool) -> [String] {
        var positions: [(tag: String, key: String)] = []
        for object in objects where group == nil || object.group == group {
            let tags = object.tags.filter(inRange)
            guard let tag = descending ? tags.max() : tags.min() else { continue }
            positions.append((tag, object.id))
        }
        positions.sort { ($0.tag, $0.key) < ($1.tag, $1.key) }
        let keys = positions.map(\.key)
        return descending ? keys.reversed() : keys
    }

    @Test(arguments: Engine.allCases) func eachObjectOnceAtItsFirstValueInRange(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(ManyTags.self)
        try bucket.store(Self.objects)
        let some = (0..<40).map { String(format: "t%03d", ($0 * 37) % 200) }
        let cases: [(Query, (String) -> Bool, Int?)] = [
            (.index("tags", in: IndexValue("t050")...IndexValue("t150")), { $0 >= "t050" && $0 <= "t150" }, nil),
            (.index("tags", in: some.map { IndexValue($0) }), { some.contains($0) }, nil),
            (.index("tags", prefix: "t1"), { $0.hasPrefix("t1") }, nil),
            (
                Query.index("tags", in: IndexValue("t020")...IndexValue("t180")).and(.index("group", equals: 1)),
                { $0 >= "t020" && $0 <= "t180" }, 1
            ),
        ]
        for (query, inRange, group) in cases {
            for descending in [false, true] {
                let q = descending ? query.descending() : query
                let want = Self.expected(inRange, group: group, descending: descending)
                #expect(try bucket.keys(q) == want, "\(engine) \(q)")
                #expect(try bucket.count(q) == want.count)
                // Pages of 7: each page a new cursor resuming after the last key returned.
                var paged: [String] = []
                var token: ContinuationToken? = nil
                repeat {
                    let page = try bucket.keyPage(token.map { q.after($0) } ?? q, size: 7)
                    paged += page.items
                    token = page.next
                } while token != nil
                #expect(paged == want, "\(engine) paged \(q)")
            }
        }
    }
}
