import Buri
import BuriCodec
import Foundation
import Testing

// One meaning for a date on every path of the tool (docs/FORMAT.md §10, "Dates: one meaning on
// every path"): a number given for a date is seconds since 1970, in plain objects and export
// records alike; a version 1 date (seconds since 2001) is shown and exported as the seconds since
// 1970 it stands for; `check` catches an index value that disagrees with the object's date. And
// the schema version tool-written records carry, and the query `--equals` builds (§10, §11).

/// A Swift date, as the record of `buri get --json` writes it.
private func exactDate(_ seconds: Int) -> String { #"{"$tag":1,"$value":\#(seconds)}"# }

@Suite("buri: one meaning for a date on every path; schema versions and --equals as the API has them")
struct DateAndSchemaToolTests {
    /// Import, restore and put of an object whose date field holds 1700000000: found by a query
    /// for 1700000000, shown as it, stored as the Swift `Date` 1700000000 s after 1970.
    private func expectDate(
        _ path: String, bucket: String = "E", key: String, field: [String] = ["due"], index: String = "due",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(
            try buri("query", path, bucket, index, "--equals", "1700000000").lines.contains(key),
            sourceLocation: sourceLocation)
        #expect(
            try buri("query", path, bucket, index, "--equals", "2678307200").lines.isEmpty,
            sourceLocation: sourceLocation)
        let shown = try CBORValue(json: try buri("get", path, bucket, key).stdout)
        #expect(field.reduce(Optional(shown)) { $0?[$1] } == 1_700_000_000, "\(shown)", sourceLocation: sourceLocation)
        let record = try buri("get", path, bucket, key, "--json").stdout
        #expect(record.contains(exactDate(1_700_000_000)), "\(record)", sourceLocation: sourceLocation)
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let payload = try CBORValue(decoding: try #require(try db.rawBucket(named: bucket).record(forKey: key)).payload)
        #expect(
            field.reduce(Optional(payload)) { $0?[$1] }?.dateValue == Date(timeIntervalSince1970: 1_700_000_000),
            sourceLocation: sourceLocation)
        #expect(try db.check().isConsistent, sourceLocation: sourceLocation)
    }

    @Test func aPlainNumberInADateFieldOfAnExportRecordIsSecondsSince1970() throws {
        let sandbox = try Sandbox()
        // A bucket made by import with a date index; then a hand-written export record into it.
        let imported = sandbox.path("imported.buri")
        expectSuccess(
            try buri(
                "import", imported, "E", "--key", "id", "--numeric-index", "due", "--date", "due",
                stdin: #"{"id":"a","due":1}"# + "\n"))
        let record =
            #"["buri-export",3]"# + "\n" + #"{"bucket":"E","key":"b","object":{"id":"b","due":1700000000}}"# + "\n"
        expectSuccess(try buri("import", imported, "E", stdin: record))
        try expectDate(imported, key: "b")

        // Restore: a schema line with a date index, top-level and nested, and plain numbers.
        let dump = #"""
            ["buri-export",3]
            {"bucket":"E","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"due","kinds":["numeric"],"unique":false,"multiValued":false,"version":0,"fields":["due"],"fieldForms":["date"],"computed":false}]}}
            {"bucket":"E","key":"b","object":{"id":"b","due":1700000000}}
            {"bucket":"E","key":"c","object":{"id":"c","due":{"$float":"Infinity"}}}
            {"bucket":"N","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"when","kinds":["numeric"],"unique":false,"multiValued":true,"version":0,"fields":null,"fieldForms":["date"],"computed":false,"fieldPaths":[["at","when"]]}]}}
            {"bucket":"N","key":"n","object":{"id":"n","at":{"when":[1700000000,1700000000.0]}}}

            """#
        let restored = sandbox.path("restored.buri")
        expectSuccess(try buri("restore", restored, stdin: dump))
        try expectDate(restored, key: "b")
        #expect(try buri("query", restored, "E", "due", "--equals", "Infinity").lines == ["c"])
        #expect(try buri("query", restored, "N", "when", "--equals", "1700000000").lines == ["n"])
        #expect(
            try buri("get", restored, "N", "n", "--json").stdout.contains(
                #""when":[\#(exactDate(1_700_000_000)),\#(exactDate(1_700_000_000))]"#))
        // The same dump imported bucket by bucket, into a new database.
        let each = try buri("import", sandbox.path("each.buri"), "E", stdin: dump)
        #expect(each.status == 0 && each.stderr.contains("skipped export records of other buckets: 'N' (1)"), "\(each)")
        try expectDate(sandbox.path("each.buri"), key: "b")

        // Into a bucket a Swift type made: its `Date` reads 1700000000 s after 1970.
        let typed = sandbox.path("typed.buri")
        do {
            let db = try BuriDatabase(path: typed)
            _ = try db.bucket(Event.self)
            db.close()
        }
        let eventRecord =
            #"["buri-export",3]"# + "\n"
            + #"{"bucket":"events","key":"e","object":{"id":"e","due":1700000000,"score":1.5,"blob":{"$bytes":""}}}"#
            + "\n"
        expectSuccess(try buri("import", typed, "events", stdin: eventRecord))
        try expectDate(typed, bucket: "events", key: "e")
        let db = try BuriDatabase(path: typed)
        #expect(try db.bucket(Event.self).object(forKey: "e")?.due == Date(timeIntervalSince1970: 1_700_000_000))
        db.close()

        // A number a Date cannot hold exactly is refused, in a record as in a plain object.
        let inexact = #"["buri-export",3]"# + "\n" + #"{"bucket":"E","key":"x","object":{"id":"x","due":0.1}}"# + "\n"
        expectFailure(
            try buri("import", imported, "E", stdin: inexact), status: 7,
            mentioning: ["line 2", "field 'due' of index 'due'", "0.10000002384185791", "nothing was imported"])
    }

    /// A database holding dates the version 1 way (untagged seconds since 2001) in date fields,
    /// and one tag 1 date with more precision than a `Date` holds.
    private func makeOldDates(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("old.buri")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let raw = try db.createBucket(
            named: "old", keyField: "id",
            indexes: [
                IndexDefinition(id: 0, name: "due", components: [.numeric], fields: ["due"], fieldForms: [.date]),
                IndexDefinition(
                    id: 0, name: "seen", components: [.numeric], multiValued: true, fields: ["seen"],
                    fieldForms: [.date]),
            ])
        let a: CBORValue = ["id": "a", "due": .float(1), "seen": [.float(0), .float(86_400)], "n": .float(1)]
        let b: CBORValue = ["id": "b", "due": .tagged(1, .unsigned(9_007_199_254_740_993))]
        try raw.store([
            RawObject(
                key: "a", payload: a.encoded(),
                indexValues: [
                    "due": [[try IndexValue(978_307_201.0)]],
                    "seen": [[try IndexValue(978_307_200.0)], [try IndexValue(978_393_600.0)]],
                ]),
            RawObject(
                key: "b", payload: b.encoded(), indexValues: ["due": [[try IndexValue(9_007_199_254_740_992.0)]]]),
        ])
        return path
    }

    @Test func aVersion1DateIsShownAndExportedAsTheSecondsSince1970ItStandsFor() throws {
        let sandbox = try Sandbox()
        let path = try makeOldDates(sandbox)
        expectSuccess(try buri("check", path))
        let shown = try CBORValue(json: try buri("get", path, "old", "a").stdout)
        #expect(shown["due"] == 978_307_201, "\(shown)")
        #expect(shown["seen"] == [978_307_200, 978_393_600], "\(shown)")
        #expect(shown["n"] == .float(1), "a field no date index reads is shown as it is")
        let record = try buri("get", path, "old", "a", "--json").stdout
        #expect(
            record
                == #"{"bucket":"old","key":"a","object":{"id":"a","due":\#(exactDate(978_307_201)),"seen":[\#(exactDate(978_307_200)),\#(exactDate(978_393_600))],"n":1.0}}"#
                + "\n", "\(record)")
        // What get shows is what query takes, and --objects prints what export prints.
        #expect(try buri("query", path, "old", "due", "--equals", "978307201").lines == ["a"])
        #expect(try buri("query", path, "old", "seen", "--equals", "978393600").lines == ["a"])
        let export = try buri("export", path)
        expectSuccess(export)
        #expect(export.lines.contains(String(record.dropLast())))
        #expect(
            try buri("query", path, "old", "due", "--from", "0", "--objects").lines.dropFirst().allSatisfy {
                export.lines.contains($0)
            })
        // A tag 1 date with more precision than a Date holds shows as the Date it is read as.
        let precise = try CBORValue(json: try buri("get", path, "old", "b").stdout)
        #expect(precise["due"] == .float(9_007_199_254_740_992), "\(precise)")
        #expect(try buri("query", path, "old", "due", "--equals", "9007199254740992").lines == ["b"])

        // Restored, the dates mean the same, written the version 2 way; a second export is identical.
        let copy = sandbox.path("copy.buri")
        expectSuccess(try buri("restore", copy, stdin: export.stdout))
        #expect(try buri("export", copy).stdout == export.stdout)
        #expect(try buri("query", copy, "old", "due", "--equals", "978307201").lines == ["a"])
        #expect(try buri("query", copy, "old", "seen", "--equals", "978307200").lines == ["a"])
        expectSuccess(try buri("check", copy))
        let db = try BuriDatabase(path: copy)
        defer { db.close() }
        let payload = try CBORValue(decoding: try #require(try db.rawBucket(named: "old").record(forKey: "a")).payload)
        #expect(payload["due"] == .tagged(1, 978_307_201))
        #expect(payload["due"]?.dateValue == Date(timeIntervalSinceReferenceDate: 1))
    }

    @Test func checkCatchesAnIndexValueThatIsNotTheRecordsDate() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("wrong.buri")
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            let raw = try db.createBucket(
                named: "E", keyField: "id",
                indexes: [
                    IndexDefinition(id: 0, name: "due", components: [.numeric], fields: ["due"], fieldForms: [.date])
                ])
            // The record says 1700000000 s after 1970; the index says the 2001 reading of it.
            let object: CBORValue = ["id": "x", "due": .tagged(1, 1_700_000_000)]
            try raw.store([RawObject(key: "x", payload: object.encoded(), indexValues: ["due": [[2_678_307_200]]])])
        }
        let run = try buri("check", path)
        #expect(run.status == 1, "\(run)")
        for fragment in ["wrongIndexValue", "bucket 'E'", "key 'x'", "index 'due'", "2678307200", "1700000000"] {
            #expect(run.stdout.contains(fragment) || run.stderr.contains(fragment), "\(fragment): \(run)")
        }
        #expect(
            try buri("check", path, "--repair").status == 1, "not repaired: which side is right is not derived data")
        let json = try buri("check", path, "--json")
        #expect(json.stdout.contains("wrongIndexValue"), "\(json)")
    }

    @Test func toolWrittenRecordsCarryTheBucketsSchemaVersion() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("versioned.buri")
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            try db.bucket(Versioned.self).store(Versioned(id: "v0", name: "Swift"))
        }
        expectSuccess(try buri("put", path, "versioned", #"{"id":"p","name":"Put"}"#))
        expectSuccess(try buri("import", path, "versioned", stdin: #"{"id":"i","name":"Imported"}"# + "\n"))
        expectSuccess(
            try buri("import", path, "versioned", "--chunk-size", "1", stdin: #"{"id":"c","name":"Chunked"}"# + "\n"))
        let export = try buri("export", path, "versioned").stdout
        // Into new databases: the bucket takes the export's schema version, and so do its records.
        let fresh = sandbox.path("fresh.buri")
        expectSuccess(try buri("import", fresh, "versioned", stdin: export))
        let chunked = sandbox.path("chunked.buri")
        expectSuccess(try buri("import", chunked, "versioned", "--chunk-size", "2", stdin: export))
        let restored = sandbox.path("restored.buri")
        expectSuccess(try buri("restore", restored, stdin: export))
        for (database, keys) in [
            (path, ["v0", "p", "i", "c"]), (fresh, ["v0", "p", "i", "c"]), (chunked, ["v0", "p", "i", "c"]),
            (restored, ["v0", "p", "i", "c"]),
        ] {
            let db = try BuriDatabase(path: database)
            defer { db.close() }
            #expect(try db.bucketInfo(named: "versioned")?.schemaVersion == 3, "\(database)")
            let raw = try db.rawBucket(named: "versioned")
            for key in keys {
                #expect(try raw.record(forKey: key)?.schemaVersion == 3, "\(database): \(key)")
            }
        }
    }

    @Test func queryEqualsBuildsTheAPIsExactQuerySoTokensPassBetweenThem() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let cases: [(bucket: String, index: String, equals: [String], query: Query)] = [
            ("Person", "locale", ["EN"], .index("locale", equals: "EN")),
            ("notes", "locale_age", ["EN"], .index("locale_age", equals: "EN")),
            ("notes", "locale_age", ["EN,30"], .index("locale_age", equals: "EN", 30)),
            ("notes", "locale_age", ["EN", "35"], .index("locale_age", equals: "EN", 35)),
            ("Person", "age", ["25"], .index("age", equals: 25).descending()),
        ]
        for (bucket, index, equals, query) in cases {
            let options = equals.flatMap { ["--equals", $0] } + (query.isDescending ? ["--reverse"] : [])
            let all = try buri(["query", path, bucket, index] + options).lines
            #expect(!all.isEmpty)
            // The tool's first page token resumes the API's query …
            let page = try buri(["query", path, bucket, index] + options + ["--page-size", "1"])
            #expect(page.status == 0, "\(page)")
            let db = try BuriDatabase(path: path)
            let raw = try db.rawBucket(named: bucket)
            let token = page.stderr.split(separator: "\n").first { $0.hasPrefix("next: ") }.map {
                String($0.dropFirst(6))
            }
            #expect((token != nil) == (all.count > 1), "\(page)")
            if let token {
                let rest = try raw.keys(query.after(try ContinuationToken(parsing: token)))
                #expect(page.lines + rest == all, "\(bucket) \(index) \(equals)")
            } else {
                #expect(page.lines == all)
            }
            // … and the API's token resumes the tool's.
            let first = try raw.keyPage(query, size: 1)
            db.close()
            if let next = first.next {
                let resumed = try buri(["query", path, bucket, index] + options + ["--after", next.description])
                #expect(resumed.status == 0, "\(resumed)")
                #expect(first.items + resumed.lines == all)
            }
        }
    }

    @Test func anIndexWithBothFieldsAndFieldPathsIsComputedByNoTool() throws {
        let sandbox = try Sandbox()
        let dump = #"""
            ["buri-export",3]
            {"bucket":"P","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"city","kinds":["binary"],"unique":false,"multiValued":false,"version":0,"fields":["city"],"fieldForms":null,"computed":false,"fieldPaths":[["address","city"]]}]}}
            {"bucket":"P","key":"a","object":{"id":"a","city":"X","address":{"city":"Y"}}}

            """#
        expectFailure(
            try buri("restore", sandbox.path("r.buri"), stdin: dump), status: 7,
            mentioning: ["index 'city'", "both `fields` and `fieldPaths`"])
        expectFailure(
            try buri("import", sandbox.path("i.buri"), "P", stdin: dump), status: 7,
            mentioning: ["index 'city'", "both `fields` and `fieldPaths`"])
        let path = sandbox.path("made.buri")
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            _ = try db.createBucket(
                named: "P", keyField: "id",
                indexes: [
                    IndexDefinition(
                        id: 0, name: "city", components: [.binary], fields: ["city"], fieldPaths: [["address", "city"]])
                ])
        }
        expectFailure(
            try buri("put", path, "P", #"{"id":"a","city":"X","address":{"city":"Y"}}"#), status: 7,
            mentioning: ["index 'city'", "both `fields` and `fieldPaths`"])
        expectFailure(
            try buri("import", path, "P", stdin: #"{"id":"a","city":"X"}"# + "\n"), status: 7,
            mentioning: ["index 'city'", "both `fields` and `fieldPaths`"])
    }
}
