import Buri
import BuriCodec
import Foundation
import Testing

/// Events with a date index that names its field, bytes, and a Double index that may be infinite.
struct Event: BuriSupport, Equatable {
    var id: String
    var due: Date
    var score: Double
    var blob: Data
    var note: String?

    static let buri = BuriSchema<Event>(
        key: \.id,
        indexes: [.numeric("due", \.due, field: "due"), .numeric("score", \.score, field: "score")],
        bucket: "events",
        keyField: "id"
    )
}

/// The same bucket declared the way the issue found it: a date index without a field.
struct EventWithoutField: BuriSupport {
    var id: String
    var due: Date
    static let buri = BuriSchema<EventWithoutField>(
        key: \.id, indexes: [.numeric("due", \.due)], bucket: "events", keyField: "id")
}

/// A computed index: no tool can compute it.
struct EventComputed: BuriSupport {
    var id: String
    var due: Date
    static let buri = BuriSchema<EventComputed>(
        key: \.id,
        indexes: [
            .computed("year", components: [.numeric]) { event throws(BuriError) in
                [[try IndexValue(event.due.timeIntervalSince1970 / 31_557_600)]]
            }
        ],
        bucket: "events", keyField: "id")
}

@Suite("buri import and query are exact; export and import round-trip everything")
struct ExactImportTests {
    // MARK: 6. Numbers

    @Test func integersAndDecimalsAreStoredExactlyOrTheLineIsRefused() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("numbers.buri")
        let good = """
            {"id":"min","n":-9223372036854775808}
            {"id":"m64","n":-18446744073709551616}
            {"id":"max","n":18446744073709551615}
            {"id":"p53","n":9007199254740992.0}
            {"id":"p53+1","n":9007199254740993}
            {"id":"tenth","n":0.1}
            {"id":"negzero","n":-0.0}
            {"id":"raw","n":1,"big":-9223372036854775809}

            """
        let run = try buri("import", db, "nums", "--key", "id", "--numeric-index", "n", stdin: good)
        expectSuccess(run)
        #expect(run.stdout.hasPrefix("imported 8 objects"))
        // Each value finds exactly its own object.
        let cases: [(String, [String])] = [
            ("-9223372036854775808", ["min"]), ("-18446744073709551616", ["m64"]), ("18446744073709551615", ["max"]),
            ("9007199254740992", ["p53"]), ("9007199254740993", ["p53+1"]), ("0.1", ["tenth"]), ("0", ["negzero"]),
            ("-1.8446744073709552e19", ["m64"]),
        ]
        for (literal, keys) in cases {
            #expect(try buri("query", db, "nums", "n", "--equals", literal).lines == keys, "\(literal)")
        }
        // A number outside the index's number line is stored exactly when nothing indexes it.
        #expect(try buri("get", db, "nums", "raw").stdout.contains(#""big": -9223372036854775809"#))
        #expect(try buri("get", db, "nums", "negzero").stdout.contains(#""n": -0.0"#))

        // Query literals follow the same rule: refused, never rounded.
        for literal in [
            "-9223372036854775809", "18446744073709551617", "9007199254740993.0", "1e400", "1e-400",
            "0.30000000000000001",
        ] {
            expectFailure(
                try buri("query", db, "nums", "n", "--equals", literal), status: 2,
                mentioning: ["'\(literal)'", "numeric index 'n' is refused"])
        }
        // An integer that is exactly a double is that double, beyond 64 bits too, as the help says.
        expectSuccess(try buri("query", db, "nums", "n", "--equals", "18446744073709551616"))
        expectFailure(
            try buri("query", db, "nums", "n", "--from", "-9223372036854775809"), status: 2,
            mentioning: ["--from", "neither an Int64, a UInt64 nor exactly a Double"])

        // Every inexact number in an import is refused with its line, field and what to do.
        let before = try buri("export", db).stdout
        let bad: [(String, [String])] = [
            (
                #"{"id":"x","n":-9223372036854775809}"#,
                ["line 2", "index 'n'", "field 'n'", "-9223372036854775809", "neither an Int64"]
            ),
            (#"{"id":"x","n":-18446744073709551617}"#, ["line 2", "field 'n'", "outside -18446744073709551616"]),
            (#"{"id":"x","n":18446744073709551616}"#, ["line 2", "field 'n'", "outside"]),
            (#"{"id":"x","deep":{"n":1e400}}"#, ["line 2", "field 'deep.n'", "too large for a double"]),
            (#"{"id":"x","n":-1e400}"#, ["line 2", "field 'n'", "-infinity"]),
            (#"{"id":"x","n":1e-400}"#, ["line 2", "field 'n'", "too small for a double"]),
            (#"{"id":"x","n":9007199254740993.0}"#, ["line 2", "field 'n'", "nearest double is 9007199254740992.0"]),
        ]
        for (line, fragments) in bad {
            let failed = try buri("import", db, "nums", stdin: #"{"id":"ok","n":1}"# + "\n" + line + "\n")
            expectFailure(failed, status: 7, mentioning: fragments + ["nothing was imported"])
        }
        #expect(try buri("export", db).stdout == before)
    }

    // MARK: 7. Dates

    static let dates = [
        Date(timeIntervalSince1970: 1_700_000_000), Date(timeIntervalSince1970: 1_700_000_000.25),
        Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23), Date(timeIntervalSince1970: -1.5),
    ]

    func makeEvents(_ sandbox: Sandbox, name: String = "events.buri") throws -> String {
        let path = sandbox.path(name)
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let events = try db.bucket(Event.self)
        for (i, date) in Self.dates.enumerated() {
            try events.store(
                Event(id: "e\(i)", due: date, score: Double(i), blob: Data([UInt8(i), 0, 255]), note: nil))
        }
        try events.store(Event(id: "inf", due: Self.dates[0], score: .infinity, blob: Data(), note: "+∞"))
        try events.store(Event(id: "-inf", due: Self.dates[0], score: -.infinity, blob: Data([0]), note: "-∞"))
        return path
    }

    @Test func getShowsADateAsTheSecondsSince1970ThatQueryTakes() throws {
        let sandbox = try Sandbox()
        let db = try makeEvents(sandbox)
        let exported = try buri("export", db, "events").lines
        for (i, date) in Self.dates.enumerated() {
            let shown = try CBORValue(json: try buri("get", db, "events", "e\(i)").stdout)["due"]
            #expect(shown?.doubleValue == date.timeIntervalSince1970, "\(date)")
            let literal = try #require(shown).jsonString()
            #expect(try buri("query", db, "events", "due", "--equals", literal).lines.contains("e\(i)"), "\(literal)")
            let line = try buri("query", db, "events", "due", "--equals", literal, "--objects").lines.first {
                $0.contains("\"e\(i)\"")
            }
            // --objects prints the exact record of export (a date as tag 1, or tag 1001 when a double cannot hold it).
            #expect(exported.contains(try #require(line)), "\(String(describing: line))")
        }
    }

    @Test func aRestoredDumpIndexesEveryDateAsTheSwiftTypeDoes() throws {
        let sandbox = try Sandbox()
        let original = try makeEvents(sandbox)
        let dump = sandbox.path("dump.jsonl")
        expectSuccess(try buri("export", original, "-o", dump))

        // Into a new database, naming the indexes, and into one whose bucket the Swift type made.
        let fresh = sandbox.path("fresh.buri")
        expectSuccess(
            try buri(
                "import", fresh, "events", "--key", "id", "--numeric-index", "due", "--numeric-index", "score", dump))
        let typed = sandbox.path("typed.buri")
        do {
            let db = try BuriDatabase(path: typed)
            _ = try db.bucket(Event.self)
            db.close()
        }
        expectSuccess(try buri("import", typed, "events", dump))
        for path in [fresh, typed] {
            for (i, date) in Self.dates.enumerated() {
                #expect(
                    try buri(
                        "query", path, "events", "due", "--equals",
                        CBORValue.float(date.timeIntervalSince1970).jsonString()
                    ).lines.contains("e\(i)"))
            }
            let db = try BuriDatabase(path: path)
            let events = try db.bucket(Event.self)
            for (i, date) in Self.dates.enumerated() {
                #expect(try events.object(forKey: "e\(i)")?.due == date)
                #expect(
                    try events.keys(.index("due", equals: IndexValue(date.timeIntervalSince1970))).contains("e\(i)"))
            }
            #expect(try events.keys(.index("score", equals: IndexValue(Double.infinity))) == ["inf"])
            #expect(try db.check().isConsistent)
            db.close()
            #expect(try buri("export", path).stdout == (try sandbox.read("dump.jsonl")))
        }
    }

    @Test func plainJSONDatesAreSecondsSince1970AndStoredAsDates() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("plain.buri")
        do {
            let db = try BuriDatabase(path: path)
            _ = try db.bucket(Event.self)
            db.close()
        }
        let line = #"{"id":"p","due":1700000000.5,"score":2,"blob":"AAE="}"#
        expectSuccess(try buri("import", path, "events", stdin: line + "\n"))
        #expect(try buri("query", path, "events", "due", "--equals", "1700000000.5").lines == ["p"])
        let db = try BuriDatabase(path: path)
        let event = try db.bucket(Event.self).object(forKey: "p")
        #expect(event?.due == Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(event?.blob == Data([0, 1]))
        db.close()
        // A number of seconds a Date cannot hold exactly is refused, naming the nearest.
        expectFailure(
            try buri("import", path, "events", stdin: #"{"id":"q","due":0.1,"score":1}"# + "\n"), status: 7,
            mentioning: ["line 1", "field 'due' of index 'due'", "cannot hold exactly", "0.10000002384185791"])
    }

    @Test func dateFieldsNamedOnTheCommandLineAreStoredAndIndexedAsDates() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("dated.buri")
        // A BOM before the lines, a date index and an unindexed date field.
        let lines =
            "\u{FEFF}" + #"{"id":"a","due":1700000000.25,"score":1,"blob":"","note":"x","seen":[0,86400]}"# + "\n"
        expectSuccess(
            try buri(
                "import", path, "events", "--key", "id", "--numeric-index", "due", "--date", "due", "--date", "seen",
                stdin: lines))
        #expect(try buri("query", path, "events", "due", "--equals", "1700000000.25").lines == ["a"])
        #expect(
            try buri("export", path).lines.last?.contains(#""seen":[{"$tag":1,"$value":0},{"$tag":1,"$value":86400}]"#)
                == true)
        struct Seen: Codable { var due: Date; var seen: [Date] }
        let db = try BuriDatabase(path: path)
        let record = try #require(try db.rawBucket(named: "events").record(forKey: "a"))
        let seen = try CBORDecoder().decode(Seen.self, from: record.payload)
        #expect(seen.due == Date(timeIntervalSince1970: 1_700_000_000.25))
        #expect(seen.seen == [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 86_400)])
        #expect(try db.bucketInfo(named: "events")?.index(named: "due")?.fieldForms == [.date])
        // The Swift type opens it without rebuilding anything and finds the same date.
        #expect(try db.bucket(Event.self).keys(.index("due", equals: IndexValue(1_700_000_000.25))) == ["a"])
        db.close()
        #expect(try buri("info", path).lines.contains("  index 'due' (numeric; field due (date)): 1 entry"))
        // An export with a BOM is still an export.
        let export = try buri("export", path).stdout
        let again = sandbox.path("again.buri")
        expectSuccess(try buri("import", again, "events", "--key", "id", stdin: "\u{FEFF}" + export))
        #expect(try buri("export", again).stdout == export)
    }

    // MARK: 8. Indexes the CLI cannot compute

    @Test func aBucketWithAnIndexTheCLICannotComputeIsRefusedNamingIt() throws {
        let sandbox = try Sandbox()
        let makers: [(String, (BuriDatabase) throws -> Void)] = [
            ("due", { db in _ = try db.bucket(EventWithoutField.self) }),
            ("year", { db in _ = try db.bucket(EventComputed.self) }),
        ]
        for (name, make) in makers {
            let path = sandbox.path("\(name).buri")
            let db = try BuriDatabase(path: path)
            try make(db)
            db.close()
            let run = try buri("import", path, "events", stdin: #"{"id":"x","due":1700000000}"# + "\n")
            expectFailure(
                run, status: 7,
                mentioning: ["bucket 'events' has index '\(name)'", "cannot compute", "nothing was imported"])
            expectSuccess(try buri("check", path))
            #expect(try buri("keys", path, "events").stdout.isEmpty)
        }
    }

    // MARK: 9. Import reads exactly what it is given

    @Test func repeatedMemberNamesAreRefused() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("dup.buri")
        for line in [#"{"id":"a","v":1,"v":"x"}"#, #"{"id":"a","id":"b"}"#, #"{"id":"a","o":{"k":[{"z":1,"z":1}]}}"#] {
            let run = try buri("import", path, "things", "--key", "id", stdin: line + "\n")
            expectFailure(run, status: 7, mentioning: ["line 1", "two members named", "nothing was imported"])
            #expect(!sandbox.exists("dup.buri"))
        }
    }

    @Test func aPlainObjectIsNeverTakenForAnExportRecord() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("plain.buri")
        let line = #"{"bucket":"events","key":"k-1","object":{"size":5}}"#
        for bucket in ["events", "other"] {
            let run = try buri("import", path, bucket, "--key", "key", stdin: line + "\n")
            expectSuccess(run)
            #expect(run.stdout.hasPrefix("imported 1 object into bucket '\(bucket)'"))
            #expect(
                try CBORValue(json: try buri("get", path, bucket, "k-1").stdout) == [
                    "bucket": "events", "key": "k-1", "object": ["size": 5],
                ])
        }
        // An export header after plain lines is refused, not half-obeyed.
        let mixed = line + "\n" + #"["buri-export",2]"# + "\n"
        expectFailure(
            try buri("import", path, "events", "--key", "key", stdin: mixed), status: 7,
            mentioning: ["line 2", "export header may only start the input"])
        // An export of another format version is refused.
        expectFailure(
            try buri("import", path, "events", stdin: #"["buri-export",99]"# + "\n"), status: 7,
            mentioning: ["line 1", "format 99"])
        // In an export, every line must be a record.
        let export = #"["buri-export",2]"# + "\n" + #"{"size":5}"# + "\n"
        expectFailure(
            try buri("import", path, "events", stdin: export), status: 7, mentioning: ["line 2", "an export record is"])
    }

    @Test func anExportRecordWhoseKeyDisagreesWithItsObjectIsRefused() throws {
        let sandbox = try Sandbox()
        let original = try makeEvents(sandbox)
        var lines = try buri("export", original).lines
        // Line 2 is the bucket's schema line, line 3 its first record.
        lines[2] = lines[2].replacingOccurrences(of: #""key":"-inf""#, with: #""key":"other""#)
        let copy = sandbox.path("copy.buri")
        expectFailure(
            try buri("import", copy, "events", "--key", "id", stdin: lines.joined(separator: "\n") + "\n"), status: 7,
            mentioning: ["line 3", #"the record's key "other" disagrees with its object's key field 'id' ("-inf")"#])
        #expect(!sandbox.exists("copy.buri"))
        // Records only of other buckets: an error, not "imported 0" with exit 0.
        expectFailure(
            try buri("import", copy, "nothing-here", stdin: lines.joined(separator: "\n") + "\n"), status: 7,
            mentioning: ["no record of bucket 'nothing-here'", "'events' (6)"])
    }

    @Test func whateverTheSwiftAPIStoresSurvivesExportImportExport() throws {
        let sandbox = try Sandbox()
        let path = try makeEvents(sandbox)
        do {
            // Through the raw API: the deepest nesting a payload may have, every kind of CBOR item.
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            let raw = try db.createBucket(named: "raw")
            var deep: CBORValue = .bytes([1, 2, 3])
            for level in 0..<511 { deep = level % 2 == 0 ? .array([deep]) : .tagged(6, deep) }
            let items: [CBORValue] = [
                ["deep": deep],
                [
                    "bytes": .bytes(Array(0...255)), "tag": .tagged(32, "https://x"), "undefined": .undefined,
                    "simple": .simple(99),
                    "floats": [
                        .float(.nan), .float(.infinity), .float(-.infinity), -0.0, 5e-324, .float(Double(Float(0.1))),
                    ],
                    "ints": [.negative(.max), .unsigned(.max), .negative(1 << 63)],
                    "keys": .map([CBORMapEntry(key: 1, value: "one"), CBORMapEntry(key: .bytes([0]), value: "zero")]),
                    "$only": ["$x": 1], "nfc": "é", "nfd": "e\u{301}",
                ],
                .array([1, "top-level array"]),
                .tagged(1, 1_700_000_000),
            ]
            try raw.store(items.enumerated().map { RawObject(key: "r\($0.offset)", payload: $0.element.encoded()) })
        }
        let first = try buri("export", path)
        expectSuccess(first)
        #expect(first.lines.contains { $0.contains(#""$float":"Infinity""#) })
        #expect(first.lines.contains { $0.contains(#"{"$bytes":"AAEC"#) })
        let copy = sandbox.path("copy.buri")
        let dump = try sandbox.write("dump.jsonl", first.stdout)
        expectSuccess(
            try buri("import", copy, "events", "--numeric-index", "due", "--numeric-index", "score", dump).withoutNote)
        expectSuccess(try buri("import", copy, "raw", dump).withoutNote)
        let second = try buri("export", copy)
        expectSuccess(second)
        #expect(second.stdout == first.stdout)
        // The exported line of the deepest object nests deeper than CBOR may, and still imports.
        #expect(first.lines.contains { $0.hasPrefix(#"{"bucket":"raw","key":"r0""#) })
    }
}

extension ToolRun {
    /// The run without the note about skipped records of other buckets.
    var withoutNote: ToolRun {
        var copy = self
        copy.stderr = stderr.split(separator: "\n").filter { !$0.hasPrefix("buri: note: skipped export records") }.map {
            $0 + "\n"
        }.joined()
        return copy
    }
}
