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
