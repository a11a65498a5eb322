import Buri
import Foundation
import Testing

// `buri query --where/--or/--not EXPR` and `--order-by`: each form of the expression language
// against the library's answer for the query it stands for (and, where the order is simple, an
// in-test model), the left-to-right rule of the options, and every mistake as a usage error with a
// caret under the character at fault.

/// Gadgets: binary, numeric (optional, with infinities and -0.0), multi-valued and compound indexes.
struct Gadget: BuriSupport, Equatable {
    var id: String
    var name: String
    var color: String
    var size: Double?
    var weight: Int
    var tags: [String]
    var maker: String
    var year: Int

    static let buri = BuriSchema<Gadget>(
        key: \.id,
        indexes: [
            .binary("name", \.name, field: "name"),
            .binary("color", \.color, field: "color"),
            .numeric("size", \.size, field: "size"),
            .numeric("weight", \.weight, field: "weight"),
            .binary("tags", \.tags, field: "tags"),
            .compound("maker_year", .binary(\.maker, field: "maker"), .numeric(\.year, field: "year")),
        ],
        bucket: "gadgets",
        keyField: "id"
    )
}

/// Words: one binary index whose values need quoting, escapes, or exact bytes.
struct Word: BuriSupport, Equatable {
    var id: String
    var w: String

    static let buri = BuriSchema<Word>(
        key: \.id, indexes: [.binary("w", \.w, field: "w")], bucket: "words", keyField: "id")
}

let expressionGadgets: [Gadget] = (0..<48).map { i in
    var size: Double? = i % 8 == 7 ? nil : Double(i % 5) * 0.5 - 1
    switch i {
    case 0: size = .infinity
    case 1: size = -.infinity
    case 2: size = -0.0
    default: break
    }
    return Gadget(
        id: String(format: "g%02d", i),
        name: ["anvil", "bolt", "cog", "drill", "anchor", "beam"][i % 6] + String(i / 6),
        color: ["red", "green", "blue"][i % 3], size: size, weight: (i * 7) % 13,
        tags: [[], ["new"], ["new", "sale"], ["sale"]][i % 4],
        maker: ["acme", "bolt", "core"][(i / 3) % 3], year: 2000 + i % 4)
}

let expressionWords: [Word] = [
    Word(id: "pre", w: "\u{E9}"), Word(id: "dec", w: "e\u{301}"),
    Word(id: "cafe-pre", w: "caf\u{E9}"), Word(id: "cafe-dec", w: "cafe\u{301}"),
    Word(id: "nul", w: "a\u{0}b"), Word(id: "a", w: "a"), Word(id: "ab", w: "ab"),
    Word(id: "odd", w: "a:b,c|d*e..f (g) \"h\" \\"), Word(id: "empty", w: ""),
]

@Suite("buri query --where/--or/--not EXPR and --order-by: the expression language")
struct QueryExpressionToolTests {
    func makeDatabase(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("gadgets.buri")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Gadget.self).store(expressionGadgets)
        try db.bucket(Word.self).store(expressionWords)
        return path
    }

    /// The library's keys for `query` on the same database.
    func library(_ path: String, _ query: Query, bucket: String = "gadgets") throws -> [String] {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        return try db.rawBucket(named: bucket).keys(query)
    }

    func keys(_ include: (Gadget) -> Bool) -> [String] { expressionGadgets.filter(include).map(\.id) }

    /// Expects `buri query DB BUCKET arguments…` to succeed and print `expected`, one key a line.
    func expectKeys(
        _ db: String, _ arguments: [String], _ expected: [String], bucket: String = "gadgets",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let run = try buri(["query", db, bucket] + arguments)
        expectSuccess(run, sourceLocation: sourceLocation)
        #expect(run.lines == expected, "\(arguments)", sourceLocation: sourceLocation)
    }

    // MARK: Each form of a condition

    @Test func everyFormOfAConditionIsTheLibrarysQuery() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let cases: [(String, Query)] = [
            ("color:red", .index("color", equals: "red")),
            ("size:0.5", .index("size", equals: 0.5)),
            ("size:-0.5..0.5", .index("size", in: -0.5...0.5)),
            ("size:-0.5..<0.5", .index("size", in: -0.5..<0.5)),
            ("size:0..", .index("size", in: 0...)),
            ("size:..0", .index("size", in: ...0)),
            ("size:..<0", .index("size", in: ..<0)),
            ("size:>0", .index("size", from: .exclusive(0), to: .unbounded)),
            ("size:>=0", .index("size", from: .inclusive(0), to: .unbounded)),
            ("size:<0", .index("size", from: .unbounded, to: .exclusive(0))),
            ("size:<=0", .index("size", from: .unbounded, to: .inclusive(0))),
            ("size:inf", .index("size", equals: IndexValue(floatLiteral: .infinity))),
            ("size:-Infinity..-1", .index("size", in: IndexValue(floatLiteral: -.infinity)...(-1))),
            ("name:an*", .index("name", prefix: "an")),
            ("name:*", .index("name", prefix: "")),
            ("color:red|blue", .index("color", in: ["red", "blue"])),
            ("size:1|-1|0.5", .index("size", in: [1, -1, 0.5])),
            ("tags:sale", .index("tags", equals: "sale")),
            ("tags:new|sale", .index("tags", in: ["new", "sale"])),
            ("color!=red", .index("color", notEquals: "red")),
            ("size!=0..", .not(.index("size", in: 0...))),
            ("maker_year:bolt", .index("maker_year", equals: "bolt")),
            ("maker_year:bolt,2001", .index("maker_year", equals: "bolt", 2001)),
            ("maker_year:bolt,2001..2002", .index("maker_year", equals: ["bolt"], in: 2001...2002)),
            ("maker_year:core,>2001", .index("maker_year", leading: ["core"], from: .exclusive(2001), to: .unbounded)),
            ("maker_year:acme,2000|2003", .index("maker_year", leading: ["acme"], in: [2000, 2003])),
            ("maker_year:a*", .index("maker_year", prefixBytes: Array("a".utf8))),
            ("maker_year:acme..bolt", .index("maker_year", in: "acme"..."bolt")),
            ("maker_year!=acme,2000", .not(.index("maker_year", equals: "acme", 2000))),
            ("\"color\":\"red\"", .index("color", equals: "red")),
            ("color:\"red\"|blue", .index("color", in: ["red", "blue"])),
        ]
        for (expression, query) in cases {
            let expected = try library(db, query)
            try expectKeys(db, ["--where", expression], expected)
            // Every case finds something, or it would prove little.
            #expect(!expected.isEmpty, "\(expression)")
        }
        // Two conditions on the models: what the library returns is what matches.
        #expect(
            Set(try library(db, .index("size", in: -0.5..<0.5)))
                == Set(keys { ($0.size ?? .nan) >= -0.5 && ($0.size ?? .nan) < 0.5 }))
        #expect(Set(try library(db, .index("color", notEquals: "red"))) == Set(keys { $0.color != "red" }))
        // --where=EXPR is --where EXPR.
        try expectKeys(
            db, ["--where=size:>0", "--or=color:red"],
            try library(db, Query.index("size", from: .exclusive(0), to: .unbounded).or(.index("color", equals: "red")))
        )
    }

    // MARK: AND, OR, NOT

    @Test func andOrNotNestWithTheUsualPrecedence() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let red = Query.index("color", equals: "red")
        let big = Query.index("size", in: 0.5...)
        let sale = Query.index("tags", equals: "sale")
        let isRed = { (g: Gadget) in g.color == "red" }
        let isBig = { (g: Gadget) in (g.size ?? -.infinity) >= 0.5 }
        let onSale = { (g: Gadget) in g.tags.contains("sale") }
        let cases: [(String, Query, (Gadget) -> Bool)] = [
            (
                "color:red or size:0.5.. and tags:sale", red.or(big.and(sale)),
                { isRed($0) || (isBig($0) && onSale($0)) }
            ),
            (
                "(color:red or size:0.5..) and tags:sale", red.or(big).and(sale),
                { (isRed($0) || isBig($0)) && onSale($0) }
            ),
            ("not color:red and tags:sale", Query.not(red).and(sale), { !isRed($0) && onSale($0) }),
            ("not (color:red and tags:sale)", .not(red.and(sale)), { !(isRed($0) && onSale($0)) }),
            ("not not color:red or size:0.5..", Query.not(.not(red)).or(big), { isRed($0) || isBig($0) }),
            (
                "((color:red)) OR (size:0.5.. AND NOT tags:sale)", red.or(big.and(.not(sale))),
                { isRed($0) || (isBig($0) && !onSale($0)) }
            ),
            (
                "color:red and(tags:sale)or(size:0.5..)", red.and(sale).or(big),
                { (isRed($0) && onSale($0)) || isBig($0) }
            ),
        ]
        for (expression, query, model) in cases {
            let expected = try library(db, query)
            try expectKeys(db, ["--where", expression], expected)
            // The library's matches are the model's.
            #expect(Set(expected) == Set(keys(model)), "\(expression)")
        }
        // `not A and B`: ordered by B's index, whose one value leaves key order.
        try expectKeys(db, ["--where", "not color:red and tags:sale"], keys { !isRed($0) && onSale($0) }.sorted())
        // Keywords are words only: followed by ':' a word is an index name.
        expectExpressionError(
            try buri("query", db, "gadgets", "--where", "not:1"), expression: "not:1", character: 1,
            mentioning: ["no index 'not'"])
    }

    @Test func optionsApplyLeftToRight() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let red = Query.index("color", equals: "red")
        let big = Query.index("size", in: 0.5...)
        let sale = Query.index("tags", equals: "sale")
        // --where A --or B --where C is (A or B) and C, not A or (B and C).
        let leftToRight = try library(db, red.or(big).and(sale))
        try expectKeys(db, ["--where", "color:red", "--or", "size:0.5..", "--where", "tags:sale"], leftToRight)
        let grouped = try library(db, red.or(big.and(sale)))
        try expectKeys(db, ["--where", "color:red", "--or", "size:0.5.. and tags:sale"], grouped)
        #expect(Set(leftToRight) != Set(grouped), "the data must tell the two readings apart")
        #expect(
            Set(leftToRight) == Set(keys { ($0.color == "red" || ($0.size ?? -1) >= 0.5) && $0.tags.contains("sale") }))
        // --not: the query so far, and not EXPR; first, it negates alone.
        try expectKeys(
            db, ["--where", "color:red", "--or", "size:0.5..", "--not", "tags:sale"],
            try library(db, red.or(big).and(.not(sale))))
        try expectKeys(db, ["--not", "color:red", "--where", "tags:sale"], try library(db, Query.not(red).and(sale)))
        try expectKeys(
            db, ["--not", "color:red", "--or", "tags:sale", "--not", "size:0.5.."],
            try library(db, Query.not(red).or(sale).and(.not(big))))
        // The order of different options counts, not only of one option's values.
        let swapped = try buri(
            "query", db, "gadgets", "--where", "tags:sale", "--or", "size:0.5..", "--where", "color:red")
        #expect(Set(swapped.lines) == Set(try library(db, sale.or(big).and(red))))
        #expect(Set(swapped.lines) != Set(leftToRight))
        // INDEX with its condition comes first.
        try expectKeys(db, ["color", "--equals", "red", "--or", "size:0.5..", "--where", "tags:sale"], leftToRight)
        try expectKeys(db, ["size", "--from", "0.5", "--where", "color:red"], try library(db, big.and(red)))
        // A page token of the --equals form resumes the same query written as an expression.
        let first = try buri("query", db, "gadgets", "color", "--equals", "red", "--page-size", "3")
        let token = try #require(first.stderr.split(separator: " ").last?.trimmingCharacters(in: .newlines))
        let rest = try buri("query", db, "gadgets", "--where", "color:red", "--after", token)
        expectSuccess(rest)
        #expect(first.lines + rest.lines == (try library(db, red)))
        // --or first has nothing to be OR-ed with.
        expectFailure(
            try buri("query", db, "gadgets", "--or", "color:red"), status: 2,
            mentioning: ["--or 'color:red' comes first", "--where"])
    }

    // MARK: Order

    @Test func orderByOneOrTwoKeysWithTiesAndDirections() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        /// Size descending, objects without a size last, then key order.
        func bySizeDescending(_ a: Gadget, _ b: Gadget) -> Bool? {
            switch (a.size, b.size) {
            case let (x?, y?): return x == y ? nil : x > y
            case (nil, nil): return nil
            case (nil, _): return false
            case (_, nil): return true
            }
        }
        let sale = expressionGadgets.filter { $0.tags.contains("sale") }
        let model = sale.sorted { a, b in
            if a.color != b.color { return a.color.utf8.lexicographicallyPrecedes(b.color.utf8) }
            return bySizeDescending(a, b) ?? (a.id < b.id)
        }.map(\.id)
        let two = Query.index("tags", equals: "sale").order(by: .ascending("color"), .descending("size"))
        #expect(try library(db, two) == model)
        try expectKeys(db, ["--where", "tags:sale", "--order-by", "color", "--order-by", "size:desc"], model)
        try expectKeys(db, ["--where", "tags:sale", "--order-by", "color:asc", "--order-by", "size:DESC"], model)
        // --reverse reverses every key (objects without a value stay last).
        let reversed = try library(db, two.descending())
        try expectKeys(
            db, ["--where", "tags:sale", "--order-by", "color", "--order-by", "size:desc", "--reverse"], reversed)
        #expect(reversed.first.flatMap { id in sale.first { $0.id == id }?.color } == "red")
        // One key with ties (three colors among 48): key order within each, then limits pick from it.
        let byColor = expressionGadgets.sorted { ($0.color, $0.id) < ($1.color, $1.id) }.map(\.id)
        try expectKeys(db, ["--order-by", "color"], byColor)
        try expectKeys(db, ["--order-by", "color", "--offset", "14", "--limit", "5"], Array(byColor[14..<19]))
        // Ordering an OR by an index, with a condition on another; without --order-by it is in key order.
        let either = Query.index("color", equals: "red").or(.index("tags", equals: "new"))
        try expectKeys(
            db, ["--where", "color:red or tags:new", "--order-by", "size:desc"],
            try library(db, either.order(by: "size", descending: true)))
        try expectKeys(db, ["--where", "color:red or tags:new"], try library(db, either).sorted())
        // A multi-valued index as a key.
        try expectKeys(
            db, ["--where", "size:>=0", "--order-by", "tags", "--order-by", "weight:desc"],
            try library(db, Query.index("size", in: 0...).order(by: .ascending("tags"), .descending("weight"))))
        expectFailure(try buri("query", db, "gadgets", "--order-by", "shape"), status: 6, mentioning: ["shape"])
        expectFailure(
            try buri("query", db, "gadgets", "--order-by", "size:sideways"), status: 2,
            mentioning: ["INDEX:desc", "sideways"])
    }

    // MARK: Outputs, counts, aggregates, pages

    @Test func countsAggregatesAndOutputFormsTakeExpressions() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let query = Query.index("color", in: ["red", "blue"]).and(.not(.index("tags", equals: "new")))
        let expected = try library(db, query)
        let count = try buri("query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--count")
        expectSuccess(count)
        #expect(count.lines == [String(expected.count)])
        #expect(
            try buri("query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--count", "--json")
                .stdout == "{\"count\":\(expected.count)}\n")
        let json = try buri(
            "query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--json", "--limit", "4")
        #expect(json.stdout == "[" + expected.prefix(4).map { "\"\($0)\"" }.joined(separator: ",") + "]\n")
        let nul = try buri(
            "query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "-0", "--offset", "2")
        #expect(nul.stdout == expected.dropFirst(2).map { $0 + "\u{0}" }.joined())
        let objects = try buri("query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--objects")
        expectSuccess(objects)
        #expect(objects.lines.first?.hasPrefix("[\"buri-export\"") == true)
        #expect(
            objects.lines.dropFirst().map { line in
                line.contains("\"key\":\"") ? String(line.split(separator: "\"key\":\"")[1].prefix(3)) : ""
            } == expected)

        // Statistics over an expression: the library's aggregate of the same query.
        let raw = try BuriDatabase(path: db)
        let aggregate = try raw.rawBucket(named: "gadgets").aggregate("weight", where: query)
        let groups = try raw.rawBucket(named: "gadgets").aggregate("weight", where: query, groupedBy: "color")
        raw.close()
        let stats = try buri(
            "query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--sum", "weight", "--max",
            "weight")
        expectSuccess(stats)
        let weights = expressionGadgets.filter { expected.contains($0.id) }.map(\.weight)
        #expect(aggregate.count == weights.count && aggregate.sum == .integer(Int128(weights.reduce(0, +))))
        #expect(stats.lines == ["count \(weights.count)", "sum \(weights.reduce(0, +))", "max \(weights.max() ?? -1)"])
        // The same statistics from the --equals form and from an expression are the same text.
        #expect(
            try buri(
                "query", db, "gadgets", "color", "--in", "red", "--in", "blue", "--sum", "weight", "--group-by", "tags"
            ).stdout
                == (try buri(
                    "query", db, "gadgets", "--where", "color:red|blue", "--sum", "weight", "--group-by", "tags"
                ).stdout))
        let grouped = try buri(
            "query", db, "gadgets", "--where", "color:red|blue", "--not", "tags:new", "--sum", "weight", "--group-by",
            "color")
        expectSuccess(grouped)
        #expect(grouped.lines.count == groups.count + 1)
        #expect(
            grouped.lines.dropFirst().map { $0.split(separator: "\t")[1] }
                == groups.map { Substring(String($0.aggregate.count)) })
        // Statistics of every object need no INDEX.
        let all = try buri("query", db, "gadgets", "--sum", "weight")
        #expect(all.lines == ["count 48", "sum \(expressionGadgets.map(\.weight).reduce(0, +))"])
    }

    @Test func pagesOfAnOrQueryResumeWithTheirToken() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let arguments = ["--where", "color:red", "--or", "tags:sale", "--not", "size:<0"]
        let expected = try library(
            db,
            Query.index("color", equals: "red").or(.index("tags", equals: "sale")).and(.not(.index("size", in: ..<0))))
        #expect(expected.count > 10)
        for extra in [[String](), ["--order-by", "weight:desc"], ["--limit", "9"]] {
            let whole = try buri(["query", db, "gadgets"] + arguments + extra)
            expectSuccess(whole)
            if extra.isEmpty { #expect(whole.lines == expected) }
            var collected: [String] = []
            var token: String?
            var pages = 0
            repeat {
                let run = try buri(
                    ["query", db, "gadgets"] + arguments + extra + ["--page-size", "4"]
                        + (token.map { ["--after", $0] } ?? []))
                #expect(run.status == 0, "\(run)")
                #expect(run.lines.count <= 4)
                collected += run.lines
                token = run.stderr.hasPrefix("next: ") ? String(run.stderr.dropFirst(6).dropLast()) : nil
                pages += 1
            } while token != nil && pages < 50
            #expect(collected == whole.lines, "\(extra)")
        }
        // The JSON page form, and a token of another query refused as a usage error.
        let page = try buri(["query", db, "gadgets"] + arguments + ["--page-size", "4", "--json"])
        expectSuccess(page)
        let next = try #require(page.stdout.split(separator: "\"next\":\"").last?.split(separator: "\"").first)
        let other = try buri("query", db, "gadgets", "--where", "color:red", "--after", String(next))
        #expect(other.status == 2, "\(other)")
    }

    // MARK: Values

    @Test func valuesAreExactBytesQuotedOrEscaped() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        func words(_ expression: String) throws -> [String] {
            let run = try buri("query", db, "words", "--where", expression)
            expectSuccess(run)
            return run.lines
        }
        // Canonically equal, byte-different strings never match each other.
        #expect(try words("w:\u{E9}") == ["pre"])
        #expect(try words("w:e\u{301}") == ["dec"])
        #expect(try words("w:\"\\u{E9}\"") == ["pre"])
        #expect(try words("w:\"e\\u{301}\"") == ["dec"])
        #expect(try words("w:caf\u{E9}|cafe") == ["cafe-pre"])
        #expect(try words("w:\"cafe\"*") == ["cafe-dec"])
        #expect(try words("w:caf*") == ["cafe-dec", "cafe-pre"])  // "cafe\u{301}" < "caf\u{E9}" as bytes
        #expect(try words("w!=\u{E9}").contains("dec"))
        #expect(!(try words("w!=\u{E9}").contains("pre")))
        // NUL bytes by escape, and every character the syntax uses, quoted.
        #expect(try words("w:\"a\\0b\"") == ["nul"])
        #expect(try words("w:\"a\\x00b\"") == ["nul"])
        #expect(try words("w:\"a\\u{0}\"*") == ["nul"])
        #expect(try words("w:a") == ["a"])
        #expect(try words("w:a*") == (try library(db, .index("w", prefix: "a"), bucket: "words")))
        #expect(try words("w:\"a:b,c|d*e..f (g) \\\"h\\\" \\\\\"") == ["odd"])
        #expect(try words("w:\"a:b\"*") == ["odd"])
        #expect(try words("w:\"\"") == ["empty"])
        #expect(try words("w:\"\\xFF\"") == [])
        #expect(try words("(w:\"\" or w:a) and not w:ab") == ["a", "empty"].sorted())
        // Spaces around keywords and parentheses, tabs and newlines too.
        #expect(try words("  ( w:a\tor\nw:ab )  ") == ["a", "ab"])
    }

    @Test func hugeNumbersAreExactAndNaNIsRefused() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("n.buri")
        let lines = [
            #"{"id":"max","x":18446744073709551615}"#, #"{"id":"min","x":-9223372036854775808}"#,
            #"{"id":"i64","x":9223372036854775807}"#, #"{"id":"p65","x":36893488147419103232.0}"#,
            #"{"id":"negzero","x":-0.0}"#, #"{"id":"zero","x":0}"#, #"{"id":"big","x":1e300}"#,
            #"{"id":"tiny","x":5e-324}"#,
        ]
        expectSuccess(
            try buri(
                "import", db, "N", "--key", "id", "--numeric-index", "x", stdin: lines.joined(separator: "\n") + "\n"))
        func query(_ expression: String) throws -> [String] {
            let run = try buri("query", db, "N", "--where", expression)
            expectSuccess(run)
            return run.lines
        }
        #expect(try query("x:18446744073709551615") == ["max"])
        #expect(try query("x:-9223372036854775808") == ["min"])
        #expect(try query("x:>9223372036854775807") == ["max", "p65", "big"])
        #expect(try query("x:9223372036854775807..18446744073709551615") == ["i64", "max"])
        #expect(try query("x:36893488147419103232") == ["p65"])
        #expect(try query("x:<-9223372036854775807") == ["min"])
        #expect(try query("x:-inf..<-1") == ["min"])
        #expect(
            try query("x:-inf..<0")
                == (try library(db, .index("x", in: IndexValue(floatLiteral: -.infinity)..<0), bucket: "N")))
        #expect(try query("x:>=1e300") == ["big"])
        #expect(try query("x:>0 and x:<1") == ["tiny"])
        #expect(
            try query("x:-0.0") == (try library(db, .index("x", equals: IndexValue(floatLiteral: -0.0)), bucket: "N")))
        #expect(Set(try query("x:-0.0")) == ["negzero", "zero"], "numbers compare as numbers: -0.0 is 0")
        #expect(try query("x:inf") == [])
        for (expression, column, fragment) in [
            ("x:NaN", 3, "NaN is refused"), ("x:1..nan", 6, "NaN is refused"),
            ("x:18446744073709551617", 3, "neither an Int64, a UInt64 nor exactly a double"),
            ("x:0.1..0.30000000000000001", 8, "refused"),
        ] {
            expectExpressionError(
                try buri("query", db, "N", "--where", expression), expression: expression, character: column,
                mentioning: [fragment])
        }
    }

    // MARK: Mistakes

    /// Expects a usage error about `expression`: the message line naming the option, the
    /// expression and the character, then the expression and a caret under that character.
    func expectExpressionError(
        _ run: ToolRun, option: String = "--where", expression: String, character: Int, mentioning fragments: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(run.status == 2, "\(run)", sourceLocation: sourceLocation)
        #expect(run.stdout.isEmpty, "\(run)", sourceLocation: sourceLocation)
        let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count == 4, lines[3].isEmpty else {
            Issue.record("expected three lines on stderr: \(run)", sourceLocation: sourceLocation)
            return
        }
        #expect(lines[0].hasPrefix("buri: \(option) '\(expression)': "), "\(run)", sourceLocation: sourceLocation)
        #expect(lines[0].contains("(at character \(character)"), "\(run)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect(
                lines[0].contains(fragment), "stderr should mention \(fragment): \(run)", sourceLocation: sourceLocation
            )
        }
        #expect(lines[1] == "    " + expression, "\(run)", sourceLocation: sourceLocation)
        #expect(
            lines[2] == String(repeating: " ", count: 4 + character - 1) + "^", "\(run)", sourceLocation: sourceLocation
        )
    }

    /// An expression nests at most 256 levels (parentheses, `not`, joined conditions): deeper is a
    /// usage error at the first level too many, never a stack overflow that ends the tool.
    @Test func expressionsNestedTooDeepAreUsageErrors() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        func nested(_ depth: Int) -> String {
            String(repeating: "(", count: depth) + "color:red" + String(repeating: ")", count: depth)
        }
        #expect(try buri("query", db, "gadgets", "--where", nested(256)).status == 0)
        let chain = Array(repeating: "color:red", count: 257).joined(separator: " or ")
        #expect(try buri("query", db, "gadgets", "--where", chain).status == 0)
        for (expression, character) in [
            (nested(257), 257),
            (String(repeating: "not ", count: 257) + "color:red", 1025),
            (chain + " or size:1", chain.unicodeScalars.count + 2),
        ] {
            expectExpressionError(
                try buri("query", db, "gadgets", "--where", expression), expression: expression, character: character,
                mentioning: ["nests more than 256 levels"])
        }
        // Far deeper (within Linux's 128 KiB per argument): still exit 2 with the message, where
        // the tool would have crashed on its stack.
        let deep = try buri("query", db, "gadgets", "--where", nested(30_000))
        #expect(deep.status == 2 && deep.stderr.contains("nests more than 256 levels"), "\(deep.status)")
        let nots = try buri("query", db, "gadgets", "--where", String(repeating: "not ", count: 30_000) + "color:red")
        #expect(nots.status == 2 && nots.stderr.contains("nests more than 256 levels"), "\(nots.status)")
    }

    @Test func mistakesAreUsageErrorsWithACaretAtTheCharacter() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        let cases: [(String, Int, [String])] = [
            ("(color:red", 1, ["'(' is never closed"]),
            ("((color:red) or size:1", 1, ["'(' is never closed"]),
            ("color:red)", 10, ["')' closes no '('"]),
            ("()", 2, ["expected a condition", "found ')'"]),
            ("", 1, ["empty"]),
            ("   ", 1, ["empty"]),
            ("colour:red", 1, ["bucket 'gadgets' has no index 'colour'", "'color'"]),
            ("color:red and hue:blue", 15, ["no index 'hue'"]),
            ("size:abc", 6, ["'abc' is not a number", "index 'size' is numeric"]),
            ("size:1..abc", 9, ["'abc' is not a number"]),
            ("color:red blue", 11, ["expected 'and', 'or' or the end", "'blue'"]),
            ("color:red and", 14, ["expected a condition", "the end of the expression"]),
            ("not", 4, ["expected a condition"]),
            ("and color:red", 1, ["found 'and'"]),
            ("size:1*", 7, ["prefix", "numeric"]),
            ("maker_year:acme,20*", 19, ["prefix", "component 2", "numeric"]),
            ("color:\"red", 7, ["'\"' is never closed"]),
            ("color:", 7, ["expected a value"]),
            ("color:red|", 11, ["expected a value after '|'"]),
            ("color:\"a\\q\"", 9, ["unknown escape"]),
            ("color:\"\\x4\"", 8, ["two hex digits"]),
            ("color:\"\\u{D800}\"", 8, ["Unicode scalar"]),
            ("color:a\\b", 8, ["inside double quotes"]),
            ("color:a:b", 8, ["must be quoted"]),
            ("size:1,2", 8, ["index 'size' has 1 component but the condition gives 2"]),
            ("size:1..2,3", 10, ["only the last component"]),
            ("maker_year:acme,2000,3", 22, ["has 2 components but the condition gives 3"]),
            ("color=red", 6, ["'=' is not an operator", "color:VALUE"]),
            ("color :red", 6, ["no space after the index name"]),
            ("size:NaN", 6, ["NaN"]),
            ("color:red or size:", 19, ["expected a value"]),
            ("color:\"red\"x", 12, ["unexpected 'x'"]),
        ]
        for (expression, character, fragments) in cases {
            expectExpressionError(
                try buri("query", db, "gadgets", "--where", expression), expression: expression, character: character,
                mentioning: fragments)
        }
        // The option at fault is named, and the expressions before it were fine.
        expectExpressionError(
            try buri("query", db, "gadgets", "--where", "color:red", "--or", "size:>x", "--not", "tags:new"),
            option: "--or",
            expression: "size:>x", character: 7, mentioning: ["'x' is not a number"])
        expectExpressionError(
            try buri("query", db, "gadgets", "--where", "color:red", "--not", "(tags:new"), option: "--not",
            expression: "(tags:new", character: 1, mentioning: ["never closed"])
        // The character counts Characters: a combining mark is one with its base.
        let combining = "name:\"e\u{301}\" and hue:1"
        expectExpressionError(
            try buri("query", db, "gadgets", "--where", combining), expression: combining, character: 14,
            mentioning: ["no index 'hue'"])
        // A control character is shown as \xNN, and the caret stays under the character at fault.
        let tabbed = try buri("query", db, "gadgets", "--where", "color:red\tand hue:1")
        #expect(tabbed.status == 2)
        let lines = tabbed.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines.count == 3 && lines[0].contains("(at character 15)") && lines[1] == "    color:red\\x09and hue:1",
            "\(tabbed)")
        if lines.count == 3 { #expect(Array(lines[1])[lines[2].count - 1] == "h", "\(tabbed)") }
        // Syntax is checked before the database is opened: a mistake is a mistake even with no database.
        expectExpressionError(
            try buri("query", sandbox.path("none.buri"), "gadgets", "--where", "size:(1"), expression: "size:(1",
            character: 6, mentioning: ["expected a value"])
        // Typing needs the bucket: an unknown one is not found (6), as without expressions.
        expectFailure(try buri("query", db, "gizmos", "--where", "size:1"), status: 6, mentioning: ["gizmos"])
    }

    @Test func theIndexArgumentIsOptionalOnlyWithTheNewOptions() throws {
        let sandbox = try Sandbox()
        let db = try makeDatabase(sandbox)
        expectFailure(try buri("query", db, "gadgets"), status: 2, mentioning: ["give a condition", "--where"])
        expectFailure(
            try buri("query", db, "gadgets", "--equals", "red"), status: 2,
            mentioning: ["INDEX", "--where INDEX:VALUE"])
        expectFailure(
            try buri("query", db, "gadgets", "color", "--where", "size:1"), status: 2,
            mentioning: ["'color'", "leave INDEX out"])
        expectFailure(
            try buri("query", db, "gadgets", "color", "--order-by", "size"), status: 2, mentioning: ["leave INDEX out"])
        // The old forms are unchanged.
        expectFailure(try buri("query", db, "gadgets", "color"), status: 2, mentioning: ["give a condition: --equals"])
        try expectKeys(db, ["color", "--equals", "red"], try library(db, .index("color", equals: "red")))
        // --order-by alone lists every object in that order, those without a value last.
        let bySize = try library(db, Query.all.order(by: "size"))
        try expectKeys(db, ["--order-by", "size"], bySize)
        #expect(Set(bySize.suffix(6)) == Set(keys { $0.size == nil }))
        #expect(bySize.first == "g01")
    }
}
