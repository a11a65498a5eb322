import Buri
import BuriCodec
import Foundation
import Testing

/// Memos with a full-text index, declared as an application declares one: the catalog entry
/// `buri import --text-index body` must make.
struct Memo: BuriSupport, Equatable {
    var id: String
    var body: String
    static let buri = BuriSchema<Memo>(key: \.id, indexes: [.text("body", \.body)], keyField: "id")
}

/// The documents of the tests: keys and bodies. Keys whose byte order differs from any order of
/// Swift Strings: "e\u{301}" and "é" are canonically equal Strings but two keys, and "é" (0xC3…)
/// comes after "z".
let searchDocuments: [(key: String, body: String)] = [
    ("z", "Apple pie with cream"),
    ("é", "a crème brûlée, then apple tart"),
    ("e\u{301}", "APPLE PIE recipes"),
    ("b", "pear and plum"),
    ("a", "apple crumble; no pie"),
]

/// One JSON line per document, keyed by "id".
func memoLines(_ documents: [(key: String, body: String)]) -> String {
    documents.map { #"{"id":\#(jsonQuoted($0.key)),"body":\#(jsonQuoted($0.body))}"# + "\n" }.joined()
}

func jsonQuoted(_ text: String) -> String { CBORValue.text(text).jsonString() }

/// Keys as their UTF-8 bytes: Swift's `==` on Strings is canonical equivalence ("é" equals
/// "e\u{301}"), keys are compared as bytes.
func utf8(_ keys: [String]) -> [[UInt8]] { keys.map { Array($0.utf8) } }

/// The keys `buri search` printed, one a line.
func searchLines(_ db: String, _ bucket: String, _ index: String, _ query: String) throws -> [String] {
    let run = try buri("search", db, bucket, index, query)
    expectSuccess(run)
    return run.lines
}

@Suite("buri search, and the text indexes buri import --text-index makes")
struct SearchToolTests {
    func importedMemos(_ sandbox: Sandbox, name: String = "memos.buri") throws -> String {
        let db = sandbox.path(name)
        let input = try sandbox.write(name + ".jsonl", memoLines(searchDocuments))
        expectSuccess(try buri("import", db, "Memo", "--key", "id", "--text-index", "body", input))
        return db
    }

    @Test func rankedPrintsTheBestFirstAsTheLibraryRanksThem() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        let expected: [RankedKey]
        do {
            let opened = try BuriDatabase(path: db)
            defer { opened.close() }
            expected = try opened.bucket(Memo.self).rankedSearchKeys("body", "apple OR pie", limit: 3)
        }
        #expect(expected.count == 3)
        let ranked = try buri("search", db, "Memo", "body", "apple OR pie", "--ranked", "--limit", "3")
        expectSuccess(ranked)
        #expect(utf8(ranked.lines) == utf8(expected.map(\.key)))
        // Every match, best first, when there is no limit; scores in JSON.
        let all = try buri("search", db, "Memo", "body", "apple", "--ranked")
        expectSuccess(all)
        #expect(Set(utf8(all.lines)) == Set(utf8(["a", "e\u{301}", "z", "é"])))
        let json = try buri("search", db, "Memo", "body", "apple OR pie", "--ranked", "--limit", "3", "--json")
        expectSuccess(json)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        #expect(parsed?.compactMap { $0["key"] as? String }.map { Array($0.utf8) } == utf8(expected.map(\.key)))
        let scores = parsed?.compactMap { $0["score"] as? Double } ?? []
        #expect(scores.count == 3 && zip(scores, expected).allSatisfy { abs($0 - $1.score) < 1e-9 })
        #expect(scores == scores.sorted(by: >))
        #expect(try buri("search", db, "Memo", "body", "apple", "--ranked", "--count").status == 2)
    }

    @Test func searchPrintsTheMatchingKeysInByteOrderAsLinesJSONOrACount() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        // Case and accents are folded; keys come in byte order, each once.
        #expect(utf8(try searchLines(db, "Memo", "body", "apple")) == utf8(["a", "e\u{301}", "z", "é"]))
        #expect(utf8(try searchLines(db, "Memo", "body", "\"apple pie\"")) == utf8(["e\u{301}", "z"]))
        #expect(utf8(try searchLines(db, "Memo", "body", "apple NOT pie")) == utf8(["é"]))
        #expect(utf8(try searchLines(db, "Memo", "body", "creme OR plum")) == utf8(["b", "é"]))
        #expect(utf8(try searchLines(db, "Memo", "body", "app* AND cr*")) == utf8(["a", "z", "é"]))
        #expect(try searchLines(db, "Memo", "body", "nothing").isEmpty)
        let json = try buri("search", db, "Memo", "body", "apple", "--json")
        expectSuccess(json)
        #expect(Array(json.stdout.utf8) == Array("[\"a\",\"e\u{301}\",\"z\",\"é\"]\n".utf8), "\(json)")
        let limited = try buri("search", db, "Memo", "body", "apple", "--limit", "2")
        #expect(Array(limited.stdout.utf8) == Array("a\ne\u{301}\n".utf8), "\(limited)")
        let count = try buri("search", db, "Memo", "body", "apple", "--count")
        #expect(count.stdout == "4\n", "\(count)")
        let countLimited = try buri("search", db, "Memo", "body", "apple", "--count", "--limit", "3")
        #expect(countLimited.stdout == "3\n", "\(countLimited)")
        let countJSON = try buri("search", db, "Memo", "body", "pear", "--count", "--json")
        #expect(countJSON.stdout == "{\"count\":1}\n", "\(countJSON)")
        let nul = try buri("search", db, "Memo", "body", "pie", "-0")
        #expect(Array(nul.stdout.utf8) == Array("a\u{0}e\u{301}\u{0}z\u{0}".utf8), "\(nul)")
        expectFailure(
            try buri("search", db, "Memo", "body", "pie", "--limit", "-1"), status: 2, mentioning: ["--limit"])
    }

    @Test func theIndexImportMakesIsTheOneTheTextDeclarationMakesAndTheLibrarySearchesAndChecksIt() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        // The same documents stored through the Swift declaration.
        let declaredPath = sandbox.path("declared.buri")
        let declared = try BuriDatabase(path: declaredPath)
        try declared.bucket(Memo.self).store(searchDocuments.map { Memo(id: $0.key, body: $0.body) })
        var expected = try #require(try declared.bucketInfo(named: "Memo")?.index(named: "body"))
        declared.close()
        let imported = try BuriDatabase(path: db)
        defer { imported.close() }
        let made = try #require(try imported.bucketInfo(named: "Memo")?.index(named: "body"))
        expected.id = made.id
        #expect(made == expected, "import made \(made), .text declares \(expected)")
        #expect(made.text == TextIndexDefinition(tokenizer: 1, stopWords: nil) && made.multiValued)
        #expect(made.components == [.binary] && made.fields == ["body"])
        // The library searches it, opened through the declaration, with the tool's answers.
        let memos = try imported.bucket(Memo.self)
        for query in ["apple", "\"apple pie\"", "apple NOT pie", "creme OR plum", "app* AND cr*"] {
            let library = try memos.searchKeys("body", query)
            #expect(utf8(library) == utf8(try searchLines(db, "Memo", "body", query)), "\(query)")
        }
        #expect(try imported.check().isConsistent)
        let check = try buri("check", db)
        #expect(check.status == 0 && check.stdout.hasPrefix("ok: 1 bucket, 5 objects"), "\(check)")
    }

    @Test func aQuerySyntaxErrorShowsTheQueryWithACaretUnderTheCharacterEvenAfterNonASCII() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        // Decomposed accents (a letter and a combining mark are one character), then an unclosed '('.
        let query = "cre\u{300}me bru\u{302}le\u{301}e AND ("
        let run = try buri("search", db, "Memo", "body", query)
        #expect(run.status == 2, "\(run)")
        let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 4 && lines[3].isEmpty, "\(run)")
        #expect(
            lines[0].hasPrefix("buri: bucket 'Memo', text index 'body': ")
                && lines[0].contains("at character 18") && lines[0].contains("this ( is never closed"), "\(run)")
        #expect(lines[1] == "    " + query, "\(run)")
        // 17 characters before the '(' (each accented letter is one), each one column wide.
        #expect(lines[2] == String(repeating: " ", count: 4 + 17) + "^", "\(run)")
        // Wide characters take two columns each; the caret still sits under the operator.
        let wide = try buri("search", db, "Memo", "body", "日本語 AND")
        #expect(wide.status == 2, "\(wide)")
        let wideLines = wide.stderr.split(separator: "\n").map(String.init)
        #expect(wideLines.count == 3 && wideLines[0].contains("AND needs a query on its right"), "\(wide)")
        #expect(wideLines[1] == "    日本語 AND" && wideLines[2] == String(repeating: " ", count: 4 + 7) + "^", "\(wide)")
        // A line break in the query is shown as \x0A, keeping the caret under its character.
        let broken = try buri("search", db, "Memo", "body", "pie\n)")
        #expect(broken.status == 2, "\(broken)")
        let brokenLines = broken.stderr.split(separator: "\n").map(String.init)
        #expect(
            brokenLines.count == 3 && brokenLines[1] == "    pie\\x0A)"
                && brokenLines[2] == String(repeating: " ", count: 4 + 7) + "^", "\(broken)")
    }

    @Test func anUnknownBucketOrIndexOrAnIndexThatIsNotATextIndexIsAClearError() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        expectFailure(try buri("search", db, "Nope", "body", "x"), status: 6, mentioning: ["'Nope'", "'Memo'"])
        expectFailure(try buri("search", db, "Memo", "nope", "x"), status: 6, mentioning: ["'nope'", "'body'"])
        let fixture = try makeFixture(sandbox)
        expectFailure(
            try buri("search", fixture, "Person", "age", "x"), status: 2,
            mentioning: ["index 'age' is a numeric index, not a text index", "has no text index", "--text-index"])
        let both = sandbox.path("both.buri")
        expectSuccess(
            try buri(
                "import", both, "Memo", "--key", "id", "--text-index", "body", "--binary-index", "id",
                stdin: memoLines(searchDocuments)))
        expectFailure(
            try buri("search", both, "Memo", "id", "x"), status: 2,
            mentioning: ["index 'id' is a binary index, not a text index", "its text indexes: 'body'"])
        expectFailure(try buri("search", sandbox.path("missing.buri"), "Memo", "body", "x"), status: 4, mentioning: [])
    }

    @Test func textIndexOptionsTakeNestedFieldsAndArraysAndMustMatchAnExistingBucket() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("nested.buri")
        let input =
            [
                #"{"id":"n1","doc":{"title":"Quick brown fox"},"tags":["red fox","blue"]}"#,
                #"{"id":"n2","doc":{"title":"lazy dog"},"tags":["fox"]}"#,
                #"{"id":"n3","doc":{}}"#,
            ].joined(separator: "\n") + "\n"
        expectSuccess(
            try buri(
                "import", db, "N", "--key", "id", "--text-index", "title=doc.title", "--text-index", "tags",
                stdin: input))
        #expect(try searchLines(db, "N", "title", "fox") == ["n1"])
        #expect(try searchLines(db, "N", "tags", "fox") == ["n1", "n2"])
        // Elements of an array never form one phrase.
        #expect(try searchLines(db, "N", "tags", "\"fox blue\"").isEmpty)
        #expect(try searchLines(db, "N", "tags", "\"red fox\"") == ["n1"])
        let info = try buri("info", db)
        #expect(
            info.stdout.contains("index 'title' (text; tokenizer 1; no stop words; field doc.title)")
                && info.stdout.contains("index 'tags' (text; tokenizer 1; no stop words; field tags)"), "\(info)")
        // An existing bucket keeps its indexes: the same option is accepted, another kind refused.
        expectSuccess(
            try buri(
                "import", db, "N", "--text-index", "tags", stdin: #"{"id":"n4","tags":["grey fox"]}"# + "\n"))
        #expect(try searchLines(db, "N", "tags", "fox") == ["n1", "n2", "n4"])
        expectFailure(
            try buri("import", db, "N", "--binary-index", "tags", stdin: #"{"id":"n5"}"# + "\n"), status: 2,
            mentioning: ["already has index 'tags' as text", "not binary"])
        expectFailure(
            try buri("import", db, "N", "--text-index", "tags=doc.title", stdin: #"{"id":"n5"}"# + "\n"),
            status: 2, mentioning: ["not text over field doc.title"])
        // A value that is not text is refused, naming the line and the index; nothing is written.
        expectFailure(
            try buri("import", db, "N", stdin: #"{"id":"n6","tags":3}"# + "\n"), status: 7,
            mentioning: ["line 1", "'tags'", "neither text nor an array of text"])
        expectFailure(
            try buri("import", db, "M", "--key", "id", "--text-index", "a=", stdin: ""), status: 2,
            mentioning: ["--text-index 'a='"])
        expectFailure(
            try buri("import", db, "M", "--key", "id", "--text-index", "a", "--binary-index", "a", stdin: ""),
            status: 2, mentioning: ["index 'a' is given twice", "--text-index"])
        let check = try buri("check", db)
        #expect(check.status == 0 && check.stdout.hasPrefix("ok: 1 bucket, 4 objects"), "\(check)")
    }

    @Test func infoShowsTextIndexesAsTextWithTheirTokenizerAndStopWords() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        let info = try buri("info", db)
        expectSuccess(info)
        #expect(info.stdout.contains("  index 'body' (text; tokenizer 1; no stop words; field body): "), "\(info)")
        let json = try buri("info", db, "--json")
        expectSuccess(json)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let bucket = (object?["buckets"] as? [[String: Any]])?.first
        let index = (bucket?["indexes"] as? [[String: Any]])?.first
        #expect(index?["kind"] as? String == "text", "\(json)")
        let text = index?["text"] as? [String: Any]
        #expect((text?["tokenizer"] as? NSNumber)?.intValue == 1 && (text?["stopWords"] as? [String]) == [], "\(json)")
        // Other indexes say their kind, and null for "text".
        let fixture = try makeFixture(sandbox)
        let other = try buri("info", fixture, "--json")
        #expect(other.stdout.contains(#""kind": "numeric""#) && other.stdout.contains(#""text": null"#), "\(other)")
        #expect(other.stdout.contains(#""kind": "compound""#), "\(other)")
        // Stop words, from a declaration: listed.
        let declaredPath = sandbox.path("stop.buri")
        let declared = try BuriDatabase(path: declaredPath)
        try declared.bucket(StopMemo.self).store(StopMemo(id: "s1", body: "the cat"))
        declared.close()
        let stop = try buri("info", declaredPath)
        #expect(stop.stdout.contains("(text; tokenizer 1; stop words the, a; field body)"), "\(stop)")
        let stopJSON = try buri("info", declaredPath, "--json")
        #expect(stopJSON.stdout.contains("\"stopWords\": [\n"), "\(stopJSON)")
    }

    @Test func infoCountsATextIndexsSegmentsAndTombstonesAndCompactMergesThem() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("grouped.buri")
        let db = try BuriDatabase(path: path)
        let memos = try db.bucket(StopMemo.self)
        // One large write puts the postings in segments; deletes leave tombstones.
        try memos.store((0..<100).map { StopMemo(id: "m\($0)", body: "the cat sat on mat \($0 % 7)") })
        try memos.delete(keys: (0..<10).map { "m\($0)" })
        let expected = try #require(try memos.raw.textPostingStorage(index: "body"))
        #expect(expected.segments > 0 && expected.tombstones > 0, "\(expected)")
        db.close()
        let info = try buri("info", path)
        expectSuccess(info)
        #expect(
            info.stdout.contains(
                "field body): \(90 * 5) entries (\(expected.segments) segments, \(expected.tombstones) tombstones)"),
            "\(info)")
        let json = try buri("info", path, "--json")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let index = ((object?["buckets"] as? [[String: Any]])?.first?["indexes"] as? [[String: Any]])?.first
        let text = index?["text"] as? [String: Any]
        #expect((text?["segments"] as? NSNumber)?.intValue == expected.segments, "\(json)")
        #expect((text?["tombstones"] as? NSNumber)?.intValue == expected.tombstones, "\(json)")
        #expect((index?["entries"] as? NSNumber)?.intValue == 90 * 5, "\(json)")
        // `buri compact` merges them: no tombstone, one segment per term, the same answers.
        expectSuccess(try buri("compact", path))
        let after = try buri("info", path, "--json")
        let compacted = try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any]
        let afterIndex = ((compacted?["buckets"] as? [[String: Any]])?.first?["indexes"] as? [[String: Any]])?.first
        let afterText = afterIndex?["text"] as? [String: Any]
        #expect((afterText?["tombstones"] as? NSNumber)?.intValue == 0, "\(after)")
        // Terms: cat, sat, on, mat and the seven digits ("the" is a stop word).
        #expect((afterText?["segments"] as? NSNumber)?.intValue == 4 + 7, "\(after)")
        let search = try buri("search", path, "StopMemo", "body", "cat", "--count")
        #expect(search.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "90", "\(search)")
        expectSuccess(try buri("check", path))
    }

    @Test func exportAndRestoreThroughTheToolKeepTheTextIndexSearchable() throws {
        let sandbox = try Sandbox()
        let db = try importedMemos(sandbox)
        let dump = sandbox.path("dump.jsonl")
        expectSuccess(try buri("export", db, "-o", dump))
        let text = try String(contentsOfFile: dump, encoding: .utf8)
        #expect(text.hasPrefix("[\"buri-export\",6]\n") && text.contains(#""text":{"tokenizer":1}"#), "\(text)")
        let copy = sandbox.path("restored.buri")
        let restore = try buri("restore", copy, dump)
        expectSuccess(restore)
        for query in ["apple", "\"apple pie\"", "apple NOT pie", "creme OR plum", "app* AND cr*", "pear"] {
            #expect(
                utf8(try searchLines(copy, "Memo", "body", query)) == utf8(try searchLines(db, "Memo", "body", query)),
                "\(query)")
        }
        let info = try buri("info", copy)
        #expect(info.stdout.contains("index 'body' (text; tokenizer 1; no stop words; field body)"), "\(info)")
        let check = try buri("check", copy)
        #expect(check.status == 0, "\(check)")
        // Importing the export into a new bucket of another database recreates it from the schema line.
        let imported = sandbox.path("imported.buri")
        expectSuccess(try buri("import", imported, "Memo", dump))
        #expect(utf8(try searchLines(imported, "Memo", "body", "apple")) == utf8(["a", "e\u{301}", "z", "é"]))
        // A --text-index that the schema line holds is accepted; one it does not is refused.
        expectSuccess(try buri("import", sandbox.path("again.buri"), "Memo", "--text-index", "body", dump))
        expectFailure(
            try buri("import", sandbox.path("other.buri"), "Memo", "--text-index", "title", dump), status: 7,
            mentioning: ["no text index 'title'"])
    }
}

/// A text index with stop words, as only a declaration makes one.
struct StopMemo: BuriSupport, Equatable {
    var id: String
    var body: String
    static let buri = BuriSchema<StopMemo>(
        key: \.id, indexes: [.text("body", \.body, stopWords: ["the", "a"])], keyField: "id")
}
