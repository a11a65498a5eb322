import Buri
import Foundation
import Testing

@Suite("buri query --sum/--avg/--min/--max/--group-by: statistics of a numeric index")
struct QueryAggregateToolTests {
    /// The fixture's people: ages 20…29, four locales in turn.
    func ages(_ include: (Person) -> Bool = { _ in true }) -> [Int] { fixturePeople.filter(include).map(\.age) }

    @Test func statisticsOfEveryObjectAndOfAQuery() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let all = ages()
        let run = try buri("query", db, "Person", "age", "--sum", "age", "--avg", "age", "--min", "age", "--max", "age")
        expectSuccess(run)
        #expect(
            run.lines == [
                "count \(all.count)", "sum \(all.reduce(0, +))",
                "avg \(Double(all.reduce(0, +)) / Double(all.count))", "min \(all.min()!)", "max \(all.max()!)",
            ])
        let english = ages { $0.locale == "EN" }
        let json = try buri("query", db, "Person", "locale", "--equals", "EN", "--sum", "age", "--json")
        expectSuccess(json)
        #expect(json.stdout == "{\"count\":\(english.count),\"sum\":\(english.reduce(0, +))}\n")
        // A range on the aggregated index itself, and a limit: only those matches count.
        let young = try buri("query", db, "Person", "age", "--below", "22", "--max", "age", "--limit", "3")
        #expect(young.lines == ["count 3", "max 20"])
        // Nothing matches: count 0, no sum to speak of but 0, no minimum.
        let none = try buri("query", db, "Person", "locale", "--equals", "XX", "--sum", "age", "--min", "age")
        #expect(none.lines == ["count 0", "sum 0", "min null"])
    }

    @Test func groupedByAnIndexAsATableOrJSON() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let run = try buri("query", db, "Person", "age", "--sum", "age", "--group-by", "locale")
        expectSuccess(run)
        var expected = ["group\tcount\tsum"]
        for locale in ["DE", "EN", "FR", "NL"] {
            let group = ages { $0.locale == locale }
            expected.append("\"\(locale)\"\t\(group.count)\t\(group.reduce(0, +))")
        }
        #expect(run.lines == expected)
        // (Grouping by a multi-valued index, and the group of objects without a value, are
        // AggregateTests'.) A compound index is not something to sum: a usage error.
        let notes = try buri("query", db, "notes", "tags", "--max", "locale_age", "--group-by", "tags", "--json")
        expectFailure(notes, status: 2, mentioning: ["locale_age", "numeric"])
        let byAge = try buri(
            "query", db, "Person", "locale", "--equals", "NL", "--min", "age", "--group-by", "age", "--json")
        expectSuccess(byAge)
        let nl = Set(ages { $0.locale == "NL" }).sorted()
        let rows = nl.map { age in
            let count = ages { $0.locale == "NL" && $0.age == age }.count
            return "{\"group\":\(age),\"count\":\(count),\"min\":\(age)}"
        }
        #expect(byAge.stdout == "[" + rows.joined(separator: ",") + "]\n")
    }

    @Test func inListsAnyOfSeveralValues() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        func byLocaleThenKey(_ locales: Set<String>) -> [String] {
            fixturePeople.filter { locales.contains($0.locale) }
                .sorted { ($0.locale, $0.objectId) < ($1.locale, $1.objectId) }.map(\.objectId)
        }
        let run = try buri("query", db, "Person", "locale", "--in", "NL", "--in", "DE")
        expectSuccess(run)
        #expect(run.lines == byLocaleThenKey(["DE", "NL"]))
        #expect(try buri("query", db, "Person", "age", "--in", "21", "--in", "29", "--count").lines == ["8"])
        // With --equals on a compound index: the next component's values.
        let notes = try buri("query", db, "notes", "locale_age", "--equals", "EN", "--in", "30", "--in", "41", "--json")
        #expect(notes.stdout == "[\"n1\",\"n4\"]\n")
        // A page token of the list resumes it; statistics over it.
        let sum = try buri("query", db, "Person", "locale", "--in", "EN", "--sum", "age")
        let english = fixturePeople.filter { $0.locale == "EN" }.map(\.age)
        #expect(sum.lines == ["count \(english.count)", "sum \(english.reduce(0, +))"])
        expectFailure(
            try buri("query", db, "Person", "locale", "--in", "EN", "--prefix", "E"), status: 2, mentioning: ["--in"])
        expectFailure(try buri("query", db, "Person", "age", "--in", "twenty"), status: 2, mentioning: ["twenty"])
    }

    @Test func misuseIsAUsageError() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        expectFailure(
            try buri("query", db, "Person", "age", "--sum", "age", "--avg", "locale"), status: 2,
            mentioning: ["same index"])
        expectFailure(
            try buri("query", db, "Person", "age", "--group-by", "locale"), status: 2, mentioning: ["--group-by"])
        expectFailure(
            try buri("query", db, "Person", "age", "--sum", "age", "--count"), status: 2, mentioning: ["--count"])
        expectFailure(
            try buri("query", db, "Person", "age", "--sum", "locale"), status: 2, mentioning: ["locale", "numeric"])
        expectFailure(try buri("query", db, "Person", "age", "--sum", "nope"), status: 6, mentioning: ["nope"])
        expectFailure(
            try buri("query", db, "Person", "age", "--sum", "age", "--group-by", "nope"), status: 6,
            mentioning: ["nope"])
    }
}
