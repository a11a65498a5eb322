import Buri
import BuriCodec
import Foundation
import LevelDB
import Testing

/// Contacts: a compound index whose text component may hold commas.
struct Contact: BuriSupport, Equatable {
    var id: String
    var name: String
    var age: Int

    static let buri = BuriSchema<Contact>(
        key: \.id,
        indexes: [.compound("name_age", .binary(\.name, field: "name"), .numeric(\.age, field: "age"))],
        bucket: "contacts",
        keyField: "id"
    )
}

@Suite(
    "buri output for scripts: --version, --json, -0, --count, exclusive bounds, --offset, importable --objects, commas in --equals"
)
struct OutputFormatToolTests {
    /// Keys of fixture people whose age satisfies `match`, in index order (age, then key).
    static func byAge(_ match: (Int) -> Bool) -> [String] {
        fixturePeople.filter { match($0.age) }.sorted { ($0.age, $0.objectId) < ($1.age, $1.objectId) }.map(\.objectId)
    }

    @Test func versionNamesTheFormatsAndLevelDB() throws {
        let run = try buri("--version")
        expectSuccess(run)
        #expect(
            run.stdout
                == "buri for Buri format \(BuriDatabase.supportedFormatVersion), export format 7, LevelDB \(Database.libraryVersion)\n"
        )
    }

    @Test func keysAsJSONOrNULSeparatedKeepAwkwardKeysWhole() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let awkward = ["line\nbreak", "tab\there", "quote\"back\\slash", "é", "e\u{301}", "-dash"]
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            let bucket = try db.bucket(Person.self)
            try bucket.store(awkward.map { Person(objectId: $0, name: "x", locale: "XX", age: 99) })
        }
        let all = bytewise(fixturePeople.map(\.objectId) + awkward)
        let json = try buri("keys", path, "Person", "--json")
        expectSuccess(json)
        #expect(try CBORValue(json: json.stdout) == .array(all.map { .text($0) }))
        let nul = try buri("keys", path, "Person", "-0")
        expectSuccess(nul)
        #expect(Array(nul.stdout.utf8) == Array(all.map { $0 + "\u{0}" }.joined().utf8))
        // Both canonically-equal spellings are there, as different keys.
        let nfc: [UInt8] = [0xC3, 0xA9]
        let nfd: [UInt8] = [0x65, 0xCC, 0x81]
        let split: [[UInt8]] = nul.stdout.utf8.split(separator: 0).map { Array($0) }
        #expect(split.contains(nfc) && split.contains(nfd))
        #expect(
            try buri("keys", path, "Person", "--prefix", "p0", "--limit", "3", "--json").stdout
                == #"["p00","p01","p02"]"# + "\n")
        let emptyPrefix = try buri("keys", path, "Person", "--prefix", "zzz", "--json")
        #expect(emptyPrefix.stdout == "[]\n")
        expectFailure(try buri("keys", path, "Person", "--json", "-0"), status: 2, mentioning: ["give one"])
        // query lists keys the same ways.
        #expect(
            try buri("query", path, "Person", "locale", "--equals", "XX", "-0").stdout
                == bytewise(awkward).map { $0 + "\u{0}" }.joined())
        #expect(
            try CBORValue(json: try buri("query", path, "Person", "locale", "--equals", "XX", "--json").stdout)
                == .array(bytewise(awkward).map { .text($0) }))
    }

    @Test func exclusiveBoundsOffsetAndCount() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        func keys(_ arguments: String...) throws -> [String] {
            let run = try buri(["query", db, "Person", "age"] + arguments)
            expectSuccess(run)
            return run.lines
        }
        #expect(try keys("--above", "22", "--below", "25") == Self.byAge { $0 > 22 && $0 < 25 })
        #expect(try keys("--above", "22", "--to", "25") == Self.byAge { $0 > 22 && $0 <= 25 })
        #expect(try keys("--from", "22", "--below", "25") == Self.byAge { $0 >= 22 && $0 < 25 })
        #expect(try keys("--above", "28") == Self.byAge { $0 > 28 })
        #expect(try keys("--below", "20.5") == Self.byAge { $0 <= 20 })
        #expect(try keys("--above", "22", "--below", "23") == [])
        #expect(try keys("--above", "22", "--below", "25", "--reverse") == Self.byAge { $0 > 22 && $0 < 25 }.reversed())
        #expect(
            try keys("--from", "20", "--offset", "5", "--limit", "3")
                == Array(Self.byAge { $0 >= 20 }.dropFirst(5).prefix(3)))
        #expect(try keys("--from", "20", "--offset", "1000") == [])
        #expect(try keys("--from", "20", "--offset", "0") == Self.byAge { $0 >= 20 })
        // Binary exclusive bounds on text.
        let locales = try buri("query", db, "Person", "locale", "--above", "DE", "--below", "NL")
        #expect(
            locales.lines
                == fixturePeople.filter { $0.locale == "EN" || $0.locale == "FR" }
                .sorted { ($0.locale, $0.objectId) < ($1.locale, $1.objectId) }.map(\.objectId))

        #expect(
            try buri("query", db, "Person", "age", "--above", "22", "--below", "25", "--count").stdout
                == "\(Self.byAge { $0 > 22 && $0 < 25 }.count)\n")
        #expect(try buri("query", db, "Person", "age", "--from", "20", "--offset", "35", "--count").stdout == "5\n")
        #expect(try buri("query", db, "Person", "age", "--from", "99", "--count").stdout == "0\n")
        #expect(
            try buri("query", db, "Person", "locale", "--equals", "EN", "--count", "--json").stdout == #"{"count":10}"#
                + "\n")

        expectFailure(
            try buri("query", db, "Person", "age", "--from", "1", "--above", "2"), status: 2,
            mentioning: ["--from and --above"])
        expectFailure(
            try buri("query", db, "Person", "age", "--to", "1", "--below", "2"), status: 2,
            mentioning: ["--to and --below"])
        expectFailure(
            try buri("query", db, "Person", "locale", "--prefix", "E", "--below", "F"), status: 2,
            mentioning: ["--prefix cannot be combined"])
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "1", "--offset=-1"), status: 2,
            mentioning: ["--offset must be 0 or more"])
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "1", "--count", "--objects"), status: 2,
            mentioning: ["--count prints only a number"])
        expectFailure(
            try buri("query", db, "Person", "age", "--above", "NaN"), status: 2, mentioning: ["--above 'NaN'"])
    }

    @Test func pagesAsJSONCarryTheirToken() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        var keys: [String] = []
        var after: String? = nil
        var pages = 0
        repeat {
            var arguments = ["query", db, "Person", "age", "--above", "21", "--page-size", "7", "--json"]
            if let after { arguments += ["--after", after] }
            let run = try buri(arguments)
            expectSuccess(run)
            let page = try CBORValue(json: run.stdout)
            guard case .array(let items)? = page["keys"] else { Issue.record("no keys array: \(run)"); break }
            keys += items.compactMap(\.stringValue)
            after = page["next"]?.stringValue
            pages += 1
        } while after != nil && pages < 20
        #expect(keys == Self.byAge { $0 > 21 })
        #expect(pages == 5)
    }

    @Test func queryObjectsPipeIntoImportAndMatchExport() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let query = try buri("query", db, "Person", "locale", "--equals", "NL", "--objects")
        expectSuccess(query)
        // The same records export prints for those keys, after the same header.
        let export = try buri("export", db, "Person")
        let nl = Set(fixturePeople.filter { $0.locale == "NL" }.map(\.objectId))
        let exported = export.lines.filter { line in
            nl.contains { line.hasPrefix(#"{"bucket":"Person","key":"\#($0)","#) }
        }
        #expect(exported.count == nl.count)
        #expect(query.lines == [export.lines[0]] + exported)

        let copy = sandbox.path("copy.buri")
        let imported = try buri(
            "import", copy, "Person", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age",
            stdin: query.stdout)
        expectSuccess(imported)
        let again = try buri("export", copy)
        // The same bytes, but for the schema line export adds (query prints records only).
        #expect(
            again.lines.filter { !$0.hasPrefix(#"{"bucket":"Person","schema":"#) } == query.lines,
            "query → import → export gives the same records")
        let reopened = try BuriDatabase(path: copy)
        defer { reopened.close() }
        #expect(
            try reopened.bucket(Person.self).objects(.index("locale", equals: "NL")).map(\.objectId)
                == bytewise(Array(nl)))
    }

    @Test func compoundEqualsTakesCommasEscapedOrAsRepeatedValues() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("contacts.buri")
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            try db.bucket(Contact.self).store([
                Contact(id: "c1", name: "Smith, John", age: 40),
                Contact(id: "c2", name: "Smith", age: 40),
                Contact(id: "c3", name: "Smith, John", age: 41),
                Contact(id: "c4", name: #"back\slash"#, age: 40),
                Contact(id: "c5", name: "é", age: 40),
                Contact(id: "c6", name: "e\u{301}", age: 40),
                Contact(id: "c7", name: ",", age: 1),
            ])
        }
        func keys(_ arguments: String...) throws -> [String] {
            let run = try buri(["query", path, "contacts", "name_age"] + arguments)
            expectSuccess(run)
            return run.lines
        }
        #expect(try keys("--equals", #"Smith\, John,40"#) == ["c1"])
        #expect(try keys("--equals", #"Smith\, John"#) == ["c1", "c3"])
        #expect(try keys("--equals", "Smith, John", "--equals", "40") == ["c1"])
        #expect(try keys("--equals", #"Smith\, John"#, "--from", "41") == ["c3"])
        // One --equals is split even before a range; the message says how to keep the comma.
        expectFailure(
            try buri("query", path, "contacts", "name_age", "--equals", "Smith, John", "--from", "41"), status: 2,
            mentioning: ["--equals gives 2 value(s)", "at most 1 leading value"])
        #expect(try keys("--equals", "Smith,40") == ["c2"])
        #expect(try keys("--equals", #"back\\slash,40"#) == ["c4"])
        #expect(try keys("--equals", #"\,,1"#) == ["c7"])
        #expect(try keys("--equals", ",", "--equals", "1") == ["c7"])
        // Canonically equal but different bytes: each finds only its own.
        #expect(try keys("--equals", "é,40") == ["c5"])
        #expect(try keys("--equals", "e\u{301},40") == ["c6"])
        // The old split would have read " John" as the age.
        expectFailure(
            try buri("query", path, "contacts", "name_age", "--equals", "Smith, John,40"), status: 2,
            mentioning: ["has 2 components but --equals gives 3 value(s)", #"'\,'"#])
        expectFailure(
            try buri("query", path, "contacts", "name_age", "--equals", #"a\b"#), status: 2,
            mentioning: [#"must be followed by ',' or '\'"#])
        expectFailure(
            try buri("query", path, "contacts", "name_age", "--equals", #"a\"#), status: 2, mentioning: ["lone"])
    }

    @Test func getCheckAndStatsSpeakJSON() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let get = try buri("get", db, "notes", "n1", "--json")
        expectSuccess(get)
        let export = try buri("export", db, "notes")
        #expect(get.lines == [export.lines[2]], "get --json prints the export record")

        let check = try buri("check", db, "--json")
        expectSuccess(check)
        let report = try CBORValue(json: check.stdout)
        #expect(
            report["consistent"] == true && report["buckets"] == 2 && report["objects"] == 44
                && report["indexEntries"] == 89)
        #expect(report["problems"] == .array([]))
        do {
            let storage = try Database(path: db)
            let cursor = try storage.cursor(in: .prefix([0x03]))
            #expect(try cursor.next())
            let key = cursor.key
            try storage.delete(key)
            storage.close()
        }
        let damaged = try buri("check", db, "--json")
        #expect(damaged.status == 1 && damaged.stderr.isEmpty, "\(damaged)")
        let problems = try CBORValue(json: damaged.stdout)
        #expect(problems["consistent"] == false)
        guard case .array(let list)? = problems["problems"] else { Issue.record("no problems array"); return }
        #expect(list.count == 1)
        #expect(
            list.first?["kind"] == "missingEntry" && list.first?["bucket"] == "Person"
                && list.first?["repaired"] == false)

        let stats = try buri("stats", db, "--json")
        expectSuccess(stats)
        let value = try CBORValue(json: stats.stdout)
        guard case .array(let levels)? = value["filesAtLevel"] else {
            Issue.record("no filesAtLevel: \(stats)"); return
        }
        #expect(levels.count == 7 && levels.allSatisfy { $0.int64Value != nil })
        #expect((value["sizeOnDisk"]?.int64Value ?? 0) > 0)
        #expect(value["stats"]?.stringValue?.contains("Compactions") == true)
    }
}
