import BuriTestBasics
import BuriText
import Testing

@Suite("TextQuery.description prints FTS5 syntax that parses back to the same query")
struct QueryRoundTripTests {
    @Test func descriptions() throws {
        #expect(try parse("apple pie").description == "apple AND pie")
        #expect(try parse("a OR b c").description == "a OR b AND c")
        #expect(try parse("a NOT b c").description == "a NOT (b AND c)")
        #expect(try parse("(a OR b) NOT c").description == "(a OR b) NOT c")
        #expect(try parse("\"Quick br\"* don't 北京大学").description == "\"quick br\"* AND \"don t\" AND \"北京 京大 大学\"")
        #expect(try parse("a NOT (b OR c*)").description == "a NOT (b OR c*)")
        #expect(TextQuery.term(utf8("AND")).description == "\"AND\"")
        #expect(TextQuery.term(utf8("say \"hi\"")).description == "\"say \"\"hi\"\"\"")
    }

    @Test func fixedQueriesRoundTrip() throws {
        for query in [
            "a", "a*", "a b", "a AND b", "a OR b", "a NOT b", "a NOT b NOT c", "(a OR b) c", "a OR b c",
            "a NOT b c", "x y NOT z", "(a NOT b) AND c", "a AND (b NOT c)", "a NOT (b NOT c)", "(a OR b) NOT (c OR d)",
            "\"a b c\"", "\"a b\"*", "don't", "北京大学", "猫", "Crème OR brûlée", "((a OR b) (c OR d)) OR e NOT f",
        ] {
            let parsed = try parse(query)
            #expect(try parse(parsed.description) == parsed, "\(query) → \(parsed.description)")
        }
    }

    @Test func randomQueriesRoundTrip() throws {
        let words = ["apple", "Pie", "don't", "北京大学", "猫", "crème", "x", "3.14", "!!!", "straße", "NEAR", "and"]
        var random = SeededGenerator(seed: 99)
        var parsedCount = 0
        for _ in 0..<3000 {
            var query = ""
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                switch Int.random(in: 0..<12, using: &random) {
                case 0: query += " AND "
                case 1: query += " OR "
                case 2: query += " NOT "
                case 3: query += " ("
                case 4: query += ") "
                case 5:
                    query +=
                        " \"" + words.randomElement(using: &random)! + " " + words.randomElement(using: &random)!
                        + "\" "
                case 6: query += " " + words.randomElement(using: &random)! + "* "
                default: query += " " + words.randomElement(using: &random)! + " "
                }
            }
            guard let parsed = try? parse(query) else { continue }
            parsedCount += 1
            let printed = parsed.description
            #expect(try parse(printed) == parsed, "\(query) → \(printed)")
            #expect(try parse(printed).description == printed)
        }
        #expect(parsedCount > 500)
    }
}
