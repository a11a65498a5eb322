import Buri
import BuriCodec
import Foundation
import Testing

/// People with a nested address, as plain JSON Lines: the index values of `city=address.city`
/// come from inside `address`.
let nestedPeople = """
    {"id":"a","address":{"city":"Utrecht","zip":{"code":3511}},"v1.2":"dotted","tags":{"a.b":"x"}}
    {"id":"b","address":{"city":"Zwolle","zip":{"code":8011}},"v1.2":"other"}
    {"id":"c","address":{"city":"Utrecht"}}
    {"id":"d","address":null}
    {"id":"e"}
    {"id":"f","address":{"city":"\u{00e9}"}}
    {"id":"g","address":{"city":"e\u{0301}"},"\u{00e9}":{"k":"nfc"},"e\u{0301}":{"k":"nfd"}}

    """

@Suite("nested field paths in import and restore declarations")
struct NestedFieldToolTests {
    @Test func aDottedPathIndexesANestedFieldAndAnEscapedDotATopLevelKey() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("n.buri")
        let run = try buri(
            "import", db, "P", "--key", "id", "--binary-index", "city=address.city",
            "--numeric-index", "zip=address.zip.code", "--binary-index", #"v=v1\.2"#,
            "--binary-index", #"ab=tags.a\.b"#, "--binary-index", "nfc=\u{00e9}.k", stdin: nestedPeople)
        expectSuccess(run)
        #expect(run.stdout == "imported 7 objects into bucket 'P' of \(db)\n")
        // A missing map on the way (c's zip, d's null address, e's missing one) gives no entry.
        #expect(try buri("query", db, "P", "city", "--equals", "Utrecht").lines == ["a", "c"])
        #expect(try buri("query", db, "P", "zip", "--from", "0").lines == ["a", "b"])
        #expect(try buri("query", db, "P", "v", "--equals", "dotted").lines == ["a"])
        #expect(try buri("query", db, "P", "ab", "--equals", "x").lines == ["a"])
        // Keys and values are bytes: "é" (c3 a9) is not "e\u{301}" (65 cc 81), in a value or a path.
        #expect(try buri("query", db, "P", "city", "--equals", "\u{00e9}").lines == ["f"])
        #expect(try buri("query", db, "P", "nfc", "--from", "").lines == ["g"])
        #expect(try buri("query", db, "P", "nfc", "--equals", "nfc").lines == ["g"])
        #expect(try buri("check", db).status == 0)
        // The catalog records the paths; info shows them as they are written.
        let info = try buri("info", db)
        #expect(info.stdout.contains("index 'city' (binary; field address.city): 5 entries"), "\(info)")
        #expect(info.stdout.contains(#"index 'v' (binary; field v1\.2): 2 entries"#), "\(info)")
        let json = try buri("info", db, "--json")
        #expect(json.stdout.contains(#""fieldPaths": ["#), "\(json)")
        let opened = try BuriDatabase(path: db)
        let descriptor = try opened.bucketInfo(named: "P")
        opened.close()
        #expect(descriptor?.index(named: "city")?.fieldPaths == [["address", "city"]])
        #expect(descriptor?.index(named: "city")?.fields == nil)
        #expect(descriptor?.index(named: "v")?.fields == ["v1.2"])
        #expect(descriptor?.index(named: "v")?.fieldPaths == nil)

        // put into the bucket computes the same path.
        expectSuccess(try buri("put", db, "P", #"{"id":"h","address":{"city":"Zwolle"}}"#))
        #expect(try buri("query", db, "P", "city", "--equals", "Zwolle").lines == ["b", "h"])

        // Export carries the paths; restore recomputes the same entries; export again is identical.
        let dump = try buri("export", db)
        #expect(
            dump.stdout.contains(
                #""fields":null,"fieldForms":null,"computed":false,"fieldPaths":[["address","city"]]"#),
            "\(dump.stdout)")
        let copy = sandbox.path("copy.buri")
        expectSuccess(try buri("restore", copy, stdin: dump.stdout))
        #expect(try buri("export", copy).stdout == dump.stdout)
        #expect(try buri("query", copy, "P", "city", "--equals", "Utrecht").lines == ["a", "c"])
        #expect(try buri("query", copy, "P", "zip", "--from", "0").lines == ["a", "b"])
        #expect(try buri("info", copy).stdout.contains("index 'city' (binary; field address.city): 6 entries"))
        // Importing the export into a new bucket takes the paths from its schema line, and naming
        // the index with its path agrees with it.
        let again = try buri(
            "import", sandbox.path("again.buri"), "P", "--binary-index", "city=address.city", stdin: dump.stdout)
        expectSuccess(again)
        #expect(try buri("query", sandbox.path("again.buri"), "P", "city", "--equals", "Zwolle").lines == ["b", "h"])
        // Extending the bucket: the option must name the same path.
        let more = #"{"id":"i","address":{"city":"Utrecht"}}"# + "\n"
        expectSuccess(try buri("import", db, "P", "--binary-index", "city=address.city", stdin: more))
        #expect(try buri("query", db, "P", "city", "--equals", "Utrecht").lines == ["a", "c", "i"])
        expectFailure(
            try buri("import", db, "P", "--binary-index", "city=address", stdin: more), status: 2,
            mentioning: ["index 'city'", "field(s) address.city", "not binary over field address"])
    }

    @Test func aValueOnThePathThatIsNotAnObjectIsRefusedNamingLineAndPath() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("bad.buri")
        let input = #"{"id":"a","address":{"city":"Utrecht"}}"# + "\n" + #"{"id":"b","address":"Main St 1"}"# + "\n"
        let run = try buri("import", db, "P", "--key", "id", "--binary-index", "city=address.city", stdin: input)
        expectFailure(
            run, status: 7,
            mentioning: [
                "line 2", "index 'city'", "'address.city'", "'address'", "the string \"Main St 1\"",
                "nothing was imported",
            ])
        #expect(!sandbox.exists("bad.buri"))
        // An array on the way is not walked either.
        let arrays = try buri(
            "import", db, "P", "--key", "id", "--binary-index", "city=address.city",
            stdin: #"{"id":"a","address":[{"city":"Utrecht"}]}"# + "\n")
        expectFailure(arrays, status: 7, mentioning: ["line 1", "'address'", "an array"])
        // The leaf may be an array: one entry per element, a multi-valued index.
        let multi = try buri(
            "import", db, "P", "--key", "id", "--binary-index", "tag=meta.tags",
            stdin: #"{"id":"a","meta":{"tags":["x","y"]}}"# + "\n" + #"{"id":"b","meta":{"tags":["y"]}}"# + "\n")
        expectSuccess(multi)
        #expect(try buri("query", db, "P", "tag", "--equals", "y").lines == ["a", "b"])
        #expect(try buri("info", db).stdout.contains("index 'tag' (binary; multi-valued; field meta.tags): 3 entries"))
    }

    @Test func malformedPathsAreUsageErrorsAndAMissingPathIsWarnedAbout() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("m.buri")
        for bad in ["city=address..city", "city=.city", "city=address.", #"city=a\b"#, #"city=a\"#] {
            let run = try buri("import", db, "P", "--key", "id", "--binary-index", bad, stdin: nestedPeople)
            expectFailure(run, status: 2, mentioning: ["--binary-index '\(bad)'", "field path"])
        }
        let nestedDate = try buri("import", db, "P", "--key", "id", "--date", "a.b", stdin: nestedPeople)
        expectFailure(nestedDate, status: 2, mentioning: ["--date 'a.b'", "top-level"])
        #expect(!sandbox.exists("m.buri"))
        // A path no object has: imported, with the warning naming the path.
        let run = try buri("import", db, "P", "--key", "id", "--binary-index", "city=address.town", stdin: nestedPeople)
        #expect(run.status == 0, "\(run)")
        #expect(
            run.stderr
                == "buri: warning: index 'city' has no entries: none of the 7 objects has a value in field 'address.town' (a name is a top-level field, a dotted path such as address.city a nested one; check the name)\n"
        )
    }

    @Test func pathsAsTextRoundTrip() throws {
        for path in [["address", "city"], ["v1.2"], [#"a\b"#, ".", "x.y.z"], ["é", "e\u{301}"]] {
            let text = IndexDefinition.fieldPathText(path)
            #expect(try IndexDefinition.parseFieldPath(text).get() == path, "\(text)")
        }
        #expect(IndexDefinition.fieldPathText(["a.b", "c"]) == #"a\.b.c"#)
        #expect((try? IndexDefinition.parseFieldPath("a..b").get()) == nil)
    }
}
