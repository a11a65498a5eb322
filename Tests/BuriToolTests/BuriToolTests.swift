import Buri
import BuriCodec
import Foundation
import LevelDB
import Testing

@Suite("buri command-line tool, end to end")
struct BuriToolTests {
    static let commands = [
        "info", "buckets", "keys", "get", "query", "search", "export", "import", "put", "delete", "drop", "check",
        "repair", "stats", "compact", "migrate", "values", "get-value", "set-value", "rekey", "key",
        "encrypt",
    ]

    // MARK: Help and usage

    @Test func helpListsEveryCommandAndTheExitCodes() throws {
        let run = try buri("--help")
        expectSuccess(run)
        for command in Self.commands {
            #expect(run.stdout.contains("\n  \(command) "), "buri --help should list \(command)")
        }
        #expect(run.stdout.contains("Exit codes:"))
        // `buri key new FILE` makes a key file: the one command without a database.
        let key = try buri("key", "new", "--help")
        expectSuccess(key)
        #expect(key.stdout.contains("USAGE: buri key new <file>"), "\(key)")
        for command in Self.commands where command != "key" {
            let help = try buri(command, "--help")
            expectSuccess(help)
            // Long option lists are folded into "[<options>]" by the parser.
            #expect(
                help.stdout.contains("USAGE: buri \(command) <db>")
                    || help.stdout.contains("USAGE: buri \(command) [<options>] <db>"), "\(help)")
            #expect(help.stdout.contains("--wait <seconds>"), "every command can wait for a lock: \(help)")
            #expect(
                help.stdout.contains("--key-file <file>") && help.stdout.contains("--passphrase-file <file>"),
                "every command opens an encrypted database: \(help)")
            #expect(help.stdout.contains("Path of the database directory") && help.stdout.contains("etcd location"))
        }
    }

    @Test func usageErrorsExitWithTwoAndOneLineSayingHowToFixTheCall() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        expectFailure(
            try buri("keys", db), status: 2, mentioning: ["Missing expected argument '<bucket>'", "buri keys --help"])
        expectFailure(try buri("query", db, "Person", "age"), status: 2, mentioning: ["give a condition: --equals"])
        expectFailure(
            try buri("query", db, "Person", "locale", "--from", "A", "--prefix", "B"), status: 2,
            mentioning: ["--prefix cannot be combined"])
        expectFailure(
            try buri("keys", db, "Person", "--limit=-1"), status: 2, mentioning: ["--limit must be 0 or more"])
        expectFailure(
            try buri("import", db, "Person", "--binary-index", "=locale"), status: 2,
            mentioning: ["has no index name; write NAME or NAME=FIELD"])
        expectFailure(try buri("frobnicate", db), status: 2, mentioning: ["frobnicate"])
        // A value that does not fit the index's kind is a usage error too, found once the index is known.
        expectFailure(
            try buri("query", db, "Person", "age", "--equals", "abc"), status: 2,
            mentioning: ["'abc' is not a number", "index 'age' is numeric"])
        expectFailure(
            try buri("query", db, "Person", "age", "--prefix", "1"), status: 2,
            mentioning: ["--prefix needs a binary index component"])
    }

    // MARK: Inspecting

    @Test func infoShowsVersionsBucketsCountsIndexesAndSize() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let run = try buri("info", db)
        expectSuccess(run)
        for line in [
            "format version:  \(BuriDatabase.supportedFormatVersion)",
            "LevelDB version: \(Database.libraryVersion)",
            "buckets:         2",
            "bucket 'Person' (key field 'objectId'): 40 objects",
            "  index 'locale' (binary; field locale): 40 entries",
            "  index 'age' (numeric; field age): 40 entries",
            "bucket 'notes' (key field 'id'): 4 objects",
            "  index 'tags' (binary; multi-valued; field tags): 5 entries",
            "  index 'locale_age' (binary, numeric; fields locale, age): 4 entries",
        ] {
            #expect(run.lines.contains(line), "info should print \(line): \(run)")
        }
        #expect(run.lines.contains { $0.hasPrefix("size on disk:    ") && $0.hasSuffix(")") })

        let json = try buri("info", db, "--json")
        expectSuccess(json)
        let value = try CBORValue(json: json.stdout)
        #expect(value["formatVersion"]?.int64Value == 13)
        #expect(value["leveldbVersion"]?.stringValue == Database.libraryVersion.description)
        #expect((value["sizeOnDisk"]?.int64Value ?? 0) > 0)
        let buckets = value["buckets"]?.arrayValue ?? []
        #expect(buckets.map { $0["name"]?.stringValue } == ["Person", "notes"])
        #expect(buckets.map { $0["objects"]?.int64Value } == [40, 4])
        let noteIndexes = buckets.last?["indexes"]?.arrayValue ?? []
        #expect(noteIndexes.map { $0["name"]?.stringValue } == ["tags", "locale_age"])
        #expect(noteIndexes.map { $0["entries"]?.int64Value } == [5, 4])
        #expect(noteIndexes.map { $0["multiValued"]?.boolValue } == [true, false])
        #expect(noteIndexes.last?["kinds"] == ["binary", "numeric"])
        #expect(noteIndexes.last?["unique"]?.boolValue == false)
    }

    @Test func bucketsListsTheNamesInBytewiseOrder() throws {
        let sandbox = try Sandbox()
        let run = try buri("buckets", try makeFixture(sandbox))
        expectSuccess(run)
        #expect(run.stdout == "Person\nnotes\n")
    }

    @Test func keysListsInKeyOrderWithPrefixLimitAndReverse() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let all = bytewise(fixturePeople.map(\.objectId))
        #expect(try buri("keys", db, "Person").lines == all)
        #expect(try buri("keys", db, "Person", "--limit", "3").lines == Array(all.prefix(3)))
        #expect(try buri("keys", db, "Person", "--reverse", "--limit", "2").lines == ["p39", "p38"])
        #expect(try buri("keys", db, "Person", "--prefix", "p1").lines == (10...19).map { "p\($0)" })
        #expect(
            try buri("keys", db, "Person", "--prefix", "p2", "--reverse", "--limit", "3").lines == [
                "p29", "p28", "p27",
            ])
        #expect(try buri("keys", db, "Person", "--prefix", "q").stdout == "")
        #expect(try buri("keys", db, "notes").lines == ["n1", "n2", "n3", "n4"])
    }

    @Test func getPrintsTheObjectAsPrettyJSON() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let run = try buri("get", db, "Person", "p05")
        expectSuccess(run)
        #expect(
            run.stdout == """
                {
                  "objectId": "p05",
                  "name": "Anna",
                  "locale": "EN",
                  "age": 25
                }

                """)
        let note = try buri("get", db, "notes", "n3")
        #expect(try CBORValue(json: note.stdout) == ["id": "n3", "tags": [], "locale": "NL", "age": 30])
        expectFailure(
            try buri("get", db, "Person", "nobody"), status: 6,
            mentioning: ["bucket 'Person' has no object with key 'nobody'"])
    }

    @Test func queryNumericIndexWithEqualsRangesAndOneBound() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        /// Keys of people whose age satisfies `match`, in index order (age, then key).
        func expected(_ match: (Int) -> Bool) -> [String] {
            fixturePeople.filter { match($0.age) }
                .sorted { ($0.age, $0.objectId) < ($1.age, $1.objectId) }.map(\.objectId)
        }
        #expect(try buri("query", db, "Person", "age", "--equals", "25").lines == expected { $0 == 25 })
        #expect(try buri("query", db, "Person", "age", "--equals", "25.0").lines == expected { $0 == 25 })
        #expect(
            try buri("query", db, "Person", "age", "--from", "22", "--to", "23").lines
                == expected { (22...23).contains($0) })
        #expect(try buri("query", db, "Person", "age", "--from", "28").lines == expected { $0 >= 28 })
        #expect(try buri("query", db, "Person", "age", "--to", "20.5").lines == expected { $0 <= 20 })
        #expect(
            try buri("query", db, "Person", "age", "--from", "28", "--reverse", "--limit", "2").lines == ["p39", "p29"])
        #expect(try buri("query", db, "Person", "age", "--from", "-5", "--to", "19").stdout == "")
        #expect(try buri("query", db, "Person", "age", "--from", "18446744073709551615").stdout == "")

        let objects = try buri("query", db, "Person", "age", "--equals", "25", "--objects", "--limit", "2")
        expectSuccess(objects)
        // The records of `buri export`, header first, so the output can be imported.
        #expect(
            objects.lines == [
                #"["buri-export",3]"#,
                #"{"bucket":"Person","key":"p05","object":{"objectId":"p05","name":"Anna","locale":"EN","age":25}}"#,
                #"{"bucket":"Person","key":"p15","object":{"objectId":"p15","name":"Marie","locale":"NL","age":25}}"#,
            ])
    }

    @Test func queryPagesResumeInANewProcessFromThePrintedToken() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let whole = try buri("query", db, "Person", "age", "--from", "21", "--reverse", "--limit", "11")
        expectSuccess(whole)
        #expect(whole.lines.count == 11)
        // Each page is a separate process: the token must mean the same thing in every one.
        var keys: [String] = []
        var after: String? = nil
        var pages = 0
        repeat {
            var arguments = [
                "query", db, "Person", "age", "--from", "21", "--reverse", "--limit", "11", "--page-size", "4",
            ]
            if let after { arguments += ["--after", after] }
            let run = try buri(arguments)
            #expect(run.status == 0, "\(run)")
            keys += run.lines
            let next = run.stderr.split(separator: "\n").first { $0.hasPrefix("next: ") }
            after = next.map { String($0.dropFirst("next: ".count)) }
            pages += 1
        } while after != nil && pages < 10
        #expect(pages == 3)
        #expect(keys == whole.lines)
        // Objects page the same way.
        let objects = try buri(
            "query", db, "Person", "age", "--from", "21", "--reverse", "--limit", "11", "--page-size", "4", "--objects")
        #expect(
            objects.lines.count == 5 && objects.lines[0] == #"["buri-export",3]"#
                && objects.lines[1].hasPrefix("{\"bucket\":\"Person\",\"key\":\"\(whole.lines[0])\""), "\(objects)")
        let token = try #require(
            objects.stderr.split(separator: "\n").first.map { String($0.dropFirst("next: ".count)) })

        // A token of another query, a malformed one, and a page size below 1 are usage errors.
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "21", "--page-size", "4", "--after", token), status: 2,
            mentioning: ["invalid continuation token", "other conditions or another direction"])
        expectFailure(
            try buri("query", db, "Person", "locale", "--equals", "EN", "--reverse", "--after", token), status: 2,
            mentioning: ["invalid continuation token", "index 'age'"])
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "21", "--after", "zz"), status: 2,
            mentioning: ["invalid continuation token", "not a hex digit"])
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "21", "--page-size", "0"), status: 2,
            mentioning: ["--page-size must be 1 or more"])
    }

    @Test func queryBinaryIndexWithEqualsPrefixAndRange() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        func keys(_ locales: Set<String>) -> [String] {
            fixturePeople.filter { locales.contains($0.locale) }
                .sorted { ($0.locale, $0.objectId) < ($1.locale, $1.objectId) }.map(\.objectId)
        }
        #expect(try buri("query", db, "Person", "locale", "--equals", "EN").lines == keys(["EN"]))
        #expect(try buri("query", db, "Person", "locale", "--equals", "E").stdout == "")
        #expect(try buri("query", db, "Person", "locale", "--prefix", "N").lines == keys(["NL"]))
        #expect(try buri("query", db, "Person", "locale", "--from", "DE", "--to", "EN").lines == keys(["DE", "EN"]))
        #expect(try buri("query", db, "Person", "locale", "--from", "F").lines == keys(["FR", "NL"]))
        #expect(try buri("query", db, "notes", "tags", "--equals", "red").lines == ["n1", "n4"])
        #expect(try buri("query", db, "notes", "tags", "--prefix", "b").lines == ["n1", "n2"])
    }

    @Test func queryCompoundIndexTakesCommaSeparatedLeadingValues() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        #expect(try buri("query", db, "notes", "locale_age", "--equals", "EN,30").lines == ["n1"])
        #expect(try buri("query", db, "notes", "locale_age", "--equals", "EN").lines == ["n1", "n2", "n4"])
        #expect(
            try buri("query", db, "notes", "locale_age", "--equals", "EN", "--from", "31", "--to", "50").lines == [
                "n2", "n4",
            ])
        #expect(try buri("query", db, "notes", "locale_age", "--from", "E", "--to", "F").lines == ["n1", "n2", "n4"])
        expectFailure(
            try buri("query", db, "notes", "locale_age", "--equals", "EN,30,1"), status: 2,
            mentioning: ["index 'locale_age' has 2 components but --equals gives 3 value(s)"])
        expectFailure(
            try buri("query", db, "notes", "locale_age", "--equals", "EN,old"), status: 2,
            mentioning: ["'old' is not a number"])
    }

    @Test func unknownBucketsAndIndexesAreNamedWithTheKnownOnes() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let known = "there is no bucket 'Nobody'; its buckets are 'Person', 'notes'"
        expectFailure(try buri("keys", db, "Nobody"), status: 6, mentioning: [known])
        expectFailure(try buri("get", db, "Nobody", "k"), status: 6, mentioning: [known])
        expectFailure(try buri("query", db, "Nobody", "age", "--equals", "1"), status: 6, mentioning: [known])
        expectFailure(try buri("export", db, "Nobody"), status: 6, mentioning: [known])
        expectFailure(
            try buri("query", db, "Person", "height", "--equals", "1"), status: 6,
            mentioning: ["bucket 'Person' has no index 'height'; its indexes are 'locale', 'age'"])
    }

    // MARK: Opening

    @Test func readOnlyCommandsNeverCreateADatabase() throws {
        let sandbox = try Sandbox()
        let missing = sandbox.path("missing.buri")
        let empty = sandbox.path("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        let file = try sandbox.write("plain.txt", "not a database")
        let newKey = try sandbox.write("new.key", String(repeating: "k", count: 32))
        for path in [missing, empty, file] {
            for arguments in [
                ["info"], ["buckets"], ["keys", "Person"], ["get", "Person", "p01"],
                ["query", "Person", "age", "--equals", "1"], ["search", "Person", "name", "x"],
                ["export"], ["check"], ["check", "--repair"], ["stats"], ["compact"], ["migrate", "Person"],
                ["values"], ["get-value", "lastSync"], ["set-value", "lastSync", "1"],
                ["rekey", "--new-key-file", newKey],
            ] {
                let run = try buri([arguments[0], path] + arguments.dropFirst())
                expectFailure(run, status: 4, mentioning: ["'\(path)'"])
            }
        }
        #expect(!sandbox.exists("missing.buri"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
        #expect(try sandbox.read("plain.txt") == "not a database")
    }

    @Test func aDatabaseInUseByAnotherProcessIsReportedInOneLine() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let held = try BuriDatabase(path: path)
        defer { held.close() }
        // Commands that write need the database itself.
        for arguments in [
            ["compact", path], ["check", path, "--repair"], ["delete", path, "Person", "p01"],
            ["import", path, "Person", "--key", "objectId"], ["migrate", path, "Person"],
            ["set-value", path, "lastSync", "1"],
            ["encrypt", path, "--key-file", try writeRandomKey(sandbox, "in-use.key"), "--plaintext-index", "age"],
            ["rekey", path, "--new-key-file", try sandbox.write("new.key", String(repeating: "k", count: 32))],
        ] {
            let run = try buri(arguments, stdin: peopleJSONLines(Array(fixturePeople.prefix(1))))
            expectFailure(run, status: 5, mentioning: ["the database at '\(path)' is in use by process \(getpid())"])
        }
        // Reading commands read a private snapshot of its files (ReadOnlySnapshotToolTests).
        for arguments in [
            ["info", path], ["keys", path, "Person"], ["export", path], ["check", path], ["values", path],
            ["get-value", path, "missing"], ["search", path, "Person", "age", "x"],
        ] {
            // (search reads the catalog, and refuses the numeric index for not being a text index.)
            let expected: Int32 = arguments[0] == "get-value" ? 6 : arguments[0] == "search" ? 2 : 0
            #expect(try buri(arguments).status == expected, "\(arguments)")
        }
        #expect(try held.bucket(Person.self).count() == 40)
    }

    // MARK: Export and import

    @Test func exportWritesDeterministicJSONLinesOrderedByBucketThenKey() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let run = try buri("export", db)
        expectSuccess(run)
        #expect(run.lines.count == 47)
        #expect(run.lines.first == #"["buri-export",3]"#)
        // Each bucket's schema line comes before its records.
        #expect(
            run.lines[1]
                == #"{"bucket":"Person","schema":{"keyField":"objectId","schemaVersion":0,"indexes":[{"name":"locale","kinds":["binary"],"unique":false,"multiValued":false,"version":0,"fields":["locale"],"fieldForms":null,"computed":false},{"name":"age","kinds":["numeric"],"unique":false,"multiValued":false,"version":0,"fields":["age"],"fieldForms":null,"computed":false}]}}"#
        )
        #expect(
            run.lines[2]
                == #"{"bucket":"Person","key":"p00","object":{"objectId":"p00","name":"Dirk","locale":"DE","age":20}}"#)
        #expect(run.lines[42].hasPrefix(#"{"bucket":"notes","schema":{"keyField":"id","#))
        #expect(
            run.lines.last
                == #"{"bucket":"notes","key":"n4","object":{"id":"n4","tags":["green","red"],"locale":"EN","age":41}}"#)
        let records = try run.lines.dropFirst().filter { !$0.contains(#""schema":{"#) }.map { try CBORValue(json: $0) }
        let order = records.map { ($0["bucket"]?.stringValue ?? "", $0["key"]?.stringValue ?? "") }
        #expect(order.map(\.0) == Array(repeating: "Person", count: 40) + Array(repeating: "notes", count: 4))
        #expect(order.prefix(40).map(\.1) == bytewise(fixturePeople.map(\.objectId)))
        #expect(try buri("export", db).stdout == run.stdout)

        let output = sandbox.path("out.jsonl")
        expectSuccess(try buri("export", db, "-o", output))
        #expect(try sandbox.read("out.jsonl") == run.stdout)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: sandbox.url.path).filter { $0.contains(".partial") }
                .isEmpty)

        let notes = try buri("export", db, "notes")
        #expect(notes.lines == [run.lines[0]] + Array(run.lines.suffix(5)))
    }

    @Test func importCreatesABucketTheSwiftAPIQueriesLikeItsOwn() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("imported.buri")
        let input = try sandbox.write("people.jsonl", peopleJSONLines(fixturePeople))
        let run = try buri(
            "import", path, "Person", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age", input)
        expectSuccess(run)
        #expect(run.stdout == "imported 40 objects into bucket 'Person' of \(path)\n")
        // The CLI sees it like a bucket made by the Swift API.
        #expect(try buri("query", path, "Person", "age", "--equals", "25").lines == ["p05", "p15", "p25", "p35"])
        #expect(try buri("info", path).lines.contains("  index 'age' (numeric; field age): 40 entries"))

        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let catalog = try db.bucketInfo(named: "Person")
        #expect(catalog?.keyField == "objectId")
        #expect(catalog?.indexes.map(\.fields) == [["locale"], ["age"]])
        let people = try db.bucket(Person.self)
        // Opening with the same declared indexes rebuilds nothing.
        #expect(try db.bucketInfo(named: "Person")?.indexes.map(\.id) == catalog?.indexes.map(\.id))
        #expect(try people.count() == 40)
        #expect(try people.object(forKey: "p05") == fixturePeople[5])
        #expect(
            try people.keys(.index("locale", equals: "EN"))
                == fixturePeople.filter { $0.locale == "EN" }.map(\.objectId))
        #expect(try people.objects(.index("age", in: 22...23)).map(\.age) == [22, 22, 22, 22, 23, 23, 23, 23])
        #expect(try people.count(.index("age", in: 28...)) == 8)
        #expect(try db.check().isConsistent)
        // And the Swift API's writes keep the index the CLI reads.
        try people.store(Person(objectId: "p05", name: "Anna", locale: "EN", age: 99))
        db.close()
        #expect(try buri("query", path, "Person", "age", "--from", "90").lines == ["p05"])
    }

    @Test func exportImportExportIsByteIdentical() throws {
        let sandbox = try Sandbox()
        let original = try makeFixture(sandbox)
        let export = sandbox.path("first.jsonl")
        expectSuccess(try buri("export", original, "-o", export))
        let copy = sandbox.path("copy.buri")
        let people = try buri(
            "import", copy, "Person", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age", export)
        #expect(people.status == 0, "\(people)")
        #expect(people.stderr == "buri: note: skipped export records of other buckets: 'notes' (4)\n")
        let notes = try buri("import", copy, "notes", "--binary-index", "tags", stdin: try sandbox.read("first.jsonl"))
        #expect(notes.status == 0, "\(notes)")
        let second = try buri("export", copy)
        expectSuccess(second)
        #expect(second.stdout == (try sandbox.read("first.jsonl")))
        #expect(try buri("query", copy, "notes", "tags", "--equals", "red").lines == ["n1", "n4"])
        #expect(try buri("info", copy).lines.contains("  index 'tags' (binary; multi-valued; field tags): 5 entries"))
    }

    @Test func importExtendsAnExistingBucketAndReplacesObjectsWithTheirIndexEntries() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let lines = """
            {"objectId":"p05","name":"Anna","locale":"EN","age":77}
            {"objectId":"x1","name":"New","locale":"XX","age":21.5}
            {"objectId":42,"name":"Numbered","locale":"XX"}
            {"objectId":"x2","name":"Twice","locale":"XX","age":1}
            {"objectId":"x2","name":"Twice","locale":"YY","age":2}

            """
        // No --key: the bucket records its key field.
        let run = try buri("import", db, "Person", stdin: lines)
        expectSuccess(run)
        #expect(try buri("query", db, "Person", "age", "--equals", "77").lines == ["p05"])
        #expect(!(try buri("query", db, "Person", "age", "--equals", "25").lines.contains("p05")))
        #expect(try buri("query", db, "Person", "age", "--from", "21.5", "--to", "21.5").lines == ["x1"])
        #expect(try buri("query", db, "Person", "locale", "--equals", "XX").lines == ["42", "x1"])
        #expect(try buri("query", db, "Person", "locale", "--equals", "YY").lines == ["x2"])
        #expect(try buri("get", db, "Person", "42").stdout.contains(#""objectId": 42"#))
        expectSuccess(try buri("check", db))

        expectFailure(
            try buri("import", db, "Person", "--key", "id", stdin: lines), status: 2,
            mentioning: ["bucket 'Person' keeps its keys in field 'objectId'"])
        expectFailure(
            try buri("import", db, "Person", "--numeric-index", "height", stdin: lines), status: 2,
            mentioning: ["already exists without index 'height'", "its indexes are 'locale', 'age'"])
    }

    @Test func failingImportsNameTheLineAndLeaveTheDatabaseAsItWas() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let before = try buri("export", db).stdout
        let good = #"{"objectId":"z1","name":"Zed","locale":"EN","age":30}"#
        let cases: [(String, [String])] = [
            ("\(good)\n\n{\"objectId\":\"z2\",\"age\":}\n", ["line 3, column 24, field 'age': invalid JSON"]),
            ("\(good)\n{\"name\":\"Keyless\",\"age\":3}\n", ["line 2: the object has no key field 'objectId'"]),
            (
                "\(good)\n{\"objectId\":\"z3\",\"age\":\"old\"}\n",
                ["line 2: index 'age': field 'age' holds the string \"old\"; numeric indexes take numbers"]
            ),
            (
                "\(good)\n{\"objectId\":\"z4\",\"locale\":7}\n",
                ["line 2: index 'locale': field 'locale' holds the number 7; binary indexes take strings"]
            ),
            ("\(good)\n{\"objectId\":true}\n", ["line 2: key field 'objectId' holds true"]),
            ("\(good)\n[1,2]\n", ["line 2: expected a JSON object, found an array"]),
            ("\(good)\n{\"objectId\":\"\"}\n", ["line 2: the key is empty"]),
            (
                "\(good)\n{\"objectId\":\"z5\",\"age\":[1,2]}\n",
                ["line 2: index 'age': field 'age' holds an array, but the index is single-valued"]
            ),
        ]
        for (input, fragments) in cases {
            let run = try buri("import", db, "Person", "--key", "objectId", stdin: input)
            expectFailure(run, status: 7, mentioning: fragments + ["nothing was imported"])
            #expect(run.stdout.isEmpty)
        }
        // A new bucket in the existing database is not left behind either.
        expectFailure(
            try buri("import", db, "Fresh", "--key", "objectId", "--numeric-index", "age", stdin: cases[2].0),
            status: 7, mentioning: ["line 2"])
        #expect(try buri("export", db).stdout == before)
        #expect(try buri("buckets", db).stdout == "Person\nnotes\n")

        // Nor a database the import would have created.
        let fresh = sandbox.path("fresh.buri")
        expectFailure(
            try buri("import", fresh, "Person", "--key", "objectId", stdin: cases[1].0), status: 7,
            mentioning: ["line 2"])
        #expect(!sandbox.exists("fresh.buri"))
        expectFailure(
            try buri("import", fresh, "Person", "--key", "objectId", sandbox.path("absent.jsonl")), status: 3,
            mentioning: ["absent.jsonl"])
        #expect(!sandbox.exists("fresh.buri"))
    }

    @Test func importTurnsArraysIntoMultiValuedEntriesAndSkipsMissingFields() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("notes.buri")
        let lines = """
            {"id":"a","tags":["x","y","x"],"score":1}
            {"id":"b","tags":"y","score":null}
            {"id":"c","score":-3000000000}
            {"id":7,"tags":[],"score":18446744073709551615}

            """
        expectSuccess(
            try buri(
                "import", path, "things", "--key", "id", "--binary-index", "tag=tags", "--numeric-index", "score",
                stdin: lines))
        #expect(try buri("query", path, "things", "tag", "--equals", "x").lines == ["a"])
        #expect(try buri("query", path, "things", "tag", "--equals", "y").lines == ["a", "b"])
        #expect(try buri("query", path, "things", "score", "--from", "-5000000000").lines == ["c", "a", "7"])
        #expect(try buri("query", path, "things", "score", "--equals", "18446744073709551615").lines == ["7"])
        let info = try buri("info", path)
        #expect(info.lines.contains("  index 'tag' (binary; multi-valued; field tags): 3 entries"), "\(info)")
        #expect(info.lines.contains("  index 'score' (numeric; field score): 3 entries"), "\(info)")
        expectSuccess(try buri("check", path))
    }

    // MARK: Maintenance

    @Test func checkReportsEachProblemAndRepairFixesThem() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let clean = try buri("check", path)
        expectSuccess(clean)
        #expect(clean.stdout == "ok: 2 buckets, 44 objects, 89 index entries; no problems\n")

        // Remove the first two index entries behind Buri's back (tag 0x03 is the index space, docs/FORMAT.md).
        do {
            // Scoped so that the handle (kept alive by the cursor) is released before `buri` runs.
            let storage = try Database(path: path)
            let cursor = try storage.cursor(in: .prefix([0x03]))
            var removed: [[UInt8]] = []
            while removed.count < 2, try cursor.next() { removed.append(cursor.key) }
            for key in removed { try storage.delete(key) }
            storage.close()
        }

        let damaged = try buri("check", path)
        #expect(damaged.status == 1, "\(damaged)")
        #expect(damaged.stderr.isEmpty)
        let problems = damaged.lines.filter { $0.hasPrefix("missingEntry bucket 'Person' key '") }
        #expect(problems.count == 2, "\(damaged)")
        #expect(
            damaged.lines.last
                == "2 problems found: 2 buckets, 44 objects, 87 index entries; run `buri check --repair` to rebuild the indexes"
        )

        let repair = try buri("check", path, "--repair")
        expectSuccess(repair)
        #expect(repair.lines.filter { $0.hasSuffix("[repaired]") }.count == 2)
        #expect(repair.lines.last == "repaired: 2 buckets, 44 objects, 87 index entries; 2 problems fixed")
        #expect(try buri("check", path).stdout == clean.stdout)
        #expect(try buri("query", path, "Person", "age", "--from", "0").lines.count == 40)
    }

    @Test func statsPrintsLevelDBPropertiesAndCompactKeepsTheData() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let stats = try buri("stats", path)
        expectSuccess(stats)
        for level in 0..<7 { #expect(stats.stdout.contains("leveldb.num-files-at-level\(level): ")) }
        for property in [
            "leveldb.approximate-memory-usage: ", "\nleveldb.sstables:\n", "\nleveldb.stats:\n", "Compactions",
        ] {
            #expect(stats.stdout.contains(property), "stats should show \(property): \(stats)")
        }
        let before = try buri("export", path).stdout
        let compact = try buri("compact", path)
        expectSuccess(compact)
        #expect(compact.stdout.hasPrefix("compacted \(path): "))
        #expect(try buri("export", path).stdout == before)
        #expect(try buri("stats", path).stdout.contains("leveldb.num-files-at-level0: 0"))
    }
}
