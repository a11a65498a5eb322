import Buri
import BuriCodec
import Foundation
import Testing

/// Every index kind Buri has, over every kind of value a Swift type stores.
struct Everything: BuriSupport, Equatable {
    var id: String
    var email: String
    var score: Double
    var tags: [String]
    var city: String
    var age: Int
    var due: Date
    var blob: Data
    var big: UInt64
    var small: Int64
    var note: String?
    var nested: [[Int]]

    static let buri = BuriSchema<Everything>(
        key: \.id,
        indexes: [
            .binary("email", \.email, field: "email", unique: true),
            .numeric("score", \.score, field: "score", version: 2),
            .binary("tags", \.tags, field: "tags"),
            .compound("city_age", .binary(\.city, field: "city"), .numeric(\.age, field: "age"), unique: true),
            .numeric("due", \.due, field: "due"),
            .binary("note", \.note, field: "note"),
            .numeric("big", \.big, field: "big"),
            .numeric("small", \.small, field: "small", version: 7),
        ],
        bucket: "everything",
        keyField: "id"
    )
}

@Suite("buri export carries the schema and buri restore recreates the database exactly")
struct RestoreToolTests {
    static let things: [Everything] = (0..<60).map { i in
        let keys = ["\u{E9}", "e\u{301}", "nul\u{0}byte", "🙂", "-dash", "line\nbreak"]
        return Everything(
            id: i < keys.count ? keys[i] : String(format: "t%03d", i),
            email: "user\(i)@example.org" + (i == 1 ? "\u{301}" : ""),
            score: [Double.infinity, -Double.infinity, 0.1, -0.0, 1e300, Double(i)][i % 6],
            tags: i % 5 == 0 ? [] : Array(["red", "green", "blue", "é", "e\u{301}"].prefix(i % 5)),
            city: ["Amsterdam", "Zürich", "Smith, John", "東京"][i % 4],
            age: i,
            due: Date(timeIntervalSince1970: Double(i) * 86_400.25 - 1e6),
            blob: Data((0..<(i % 7 == 0 ? 3000 : i)).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
            big: i % 3 == 0 ? UInt64.max - UInt64(i) : UInt64(i),
            small: i % 4 == 0 ? Int64.min + Int64(i) : -Int64(i),
            note: i % 3 == 0 ? nil : "note \(i % 4)",
            nested: [[i], [], [i, -i, Int.max]]
        )
    }

    /// The fixture plus a bucket with every index kind, made with the Swift API.
    func makeDatabase(_ sandbox: Sandbox) throws -> String {
        let path = try makeFixture(sandbox)
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Everything.self).store(Self.things)
        _ = try db.createBucket(
            named: "empty", keyField: "id",
            indexes: [IndexDefinition(id: 0, name: "n", components: [.numeric], fields: ["n"])])
        return path
    }

    /// Every answer the Swift type gives, for comparison between databases.
    func answers(_ path: String) throws -> [String: [String]] {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let bucket = try db.bucket(Everything.self)
        var result: [String: [String]] = [:]
        result["all"] = try bucket.keys(.all)
        result["email"] = try bucket.keys(.index("email", equals: "user7@example.org"))
        result["email-prefix"] = try bucket.keys(.index("email", prefix: "user1"))
        result["score"] = try bucket.keys(.index("score", in: try IndexValue(-1e301)...(try IndexValue(1e301))))
        result["score-inf"] = try bucket.keys(.index("score", equals: try IndexValue(Double.infinity)))
        result["tags-red"] = try bucket.keys(.index("tags", equals: "red"))
        result["tags-nfd"] = try bucket.keys(.index("tags", equals: "e\u{301}"))
        result["city_age"] = try bucket.keys(.index("city_age", equals: "Smith, John"))
        result["city_age-range"] = try bucket.keys(
            .index("city_age", equals: ["Zürich"], in: try IndexValue(10)...(try IndexValue(40))))
        result["due"] = try bucket.keys(.index("due", in: try IndexValue(-1e6)...(try IndexValue(0.0))).descending())
        result["note"] = try bucket.keys(.index("note", equals: "note 1"))
        result["big"] = try bucket.keys(
            .index("big", in: try IndexValue(UInt64.max - 30)...(try IndexValue(UInt64.max))))
        result["small"] = try bucket.keys(
            .index("small", in: try IndexValue(Int64.min)...(try IndexValue(Int64.min + 100))))
        result["objects"] = try bucket.objects(.all).map {
            "\($0.id)|\($0.nested)|\($0.blob.count)|\($0.score)|\($0.due.timeIntervalSince1970)"
        }
        return result
    }

    @Test func exportRestoreExportIsByteIdenticalAndEveryQueryAnswersTheSame() throws {
        let sandbox = try Sandbox()
        let original = try makeDatabase(sandbox)
        let first = try buri("export", original, "-o", sandbox.path("dump.jsonl"))
        expectSuccess(first)
        let dump = try sandbox.read("dump.jsonl")
        #expect(dump.hasPrefix(#"["buri-export",3]"# + "\n"))
        #expect(
            dump.contains(
                #"{"bucket":"everything","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"email","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["email"],"fieldForms":null,"computed":false}"#
            ))
        #expect(
            dump.contains(
                #"{"name":"city_age","kinds":["binary","numeric"],"unique":true,"multiValued":false,"version":0,"fields":["city","age"]"#
            ))
        #expect(
            dump.contains(
                #"{"name":"due","kinds":["numeric"],"unique":false,"multiValued":false,"version":0,"fields":["due"],"fieldForms":["date"]"#
            ))
        #expect(dump.contains(#"{"bucket":"empty","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"n""#))

        let copy = sandbox.path("copy.buri")
        let restored = try buri("restore", copy, sandbox.path("dump.jsonl"))
        expectSuccess(restored)
        #expect(
            restored.stdout
                == "restored 4 buckets and \(fixturePeople.count + fixtureNotes.count + Self.things.count) objects into \(copy)\n"
        )
        let again = try buri("export", copy)
        expectSuccess(again)
        #expect(again.stdout == dump, "export → restore → export must give the same bytes")

        // The catalogs agree (info --json without the path and size).
        func catalog(_ path: String) throws -> CBORValue? {
            try CBORValue(json: try buri("info", path, "--json").stdout)["buckets"]
        }
        #expect(try catalog(copy) == catalog(original))
        expectSuccess(try buri("check", copy))
        // The Swift type asks the restored database every question and gets the same answers.
        let expected = try answers(original)
        #expect(
            expected["tags-red"]?.isEmpty == false && expected["city_age"]?.isEmpty == false
                && expected["score-inf"]?.isEmpty == false)
        #expect(try answers(copy) == expected)
        // Unique indexes are unique again: a second object with a taken email is refused.
        let db = try BuriDatabase(path: copy)
        defer { db.close() }
        var clash = Self.things[10]
        clash.id = "clash"
        clash.city = "Nowhere"
        #expect(throws: BuriError.self) { try db.bucket(Everything.self).store(clash) }
        #expect(try db.bucket(Note.self).objects(.all) == fixtureNotes.sorted { $0.id < $1.id })
    }

    @Test func oneBucketOfADumpImportsIntoANewBucketWithItsIndexes() throws {
        let sandbox = try Sandbox()
        let original = try makeDatabase(sandbox)
        let export = try buri("export", original, "everything")
        let copy = sandbox.path("one.buri")
        expectSuccess(try buri("import", copy, "everything", stdin: export.stdout))
        #expect(try buri("export", copy).stdout == export.stdout)
        // Index options must agree with the schema the export carries.
        expectFailure(
            try buri(
                "import", sandbox.path("two.buri"), "everything", "--numeric-index", "email", stdin: export.stdout),
            status: 7,
            mentioning: ["no numeric index 'email'", "leave out the index options"])
        expectSuccess(
            try buri(
                "import", sandbox.path("three.buri"), "everything", "--binary-index", "email", stdin: export.stdout))
        #expect(!sandbox.exists("two.buri"))
    }

    @Test func restoreRefusesWhatItCannotRecreateAndLeavesNothing() throws {
        let sandbox = try Sandbox()
        let original = try makeFixture(sandbox)
        let dump = try buri("export", original).stdout
        // An existing database, a format-2 export, records without a schema line, a bad schema.
        expectFailure(
            try buri("restore", original, stdin: dump), status: 2, mentioning: ["already a database", "buri import"])
        let old =
            dump.replacingOccurrences(of: #"["buri-export",3]"#, with: #"["buri-export",2]"#)
            .split(separator: "\n").filter { !$0.contains(#""schema":"#) }.joined(separator: "\n") + "\n"
        expectFailure(
            try buri("restore", sandbox.path("a.buri"), stdin: old), status: 7, mentioning: ["format 2", "buri import"])
        // A format-2 export still imports, one bucket at a time.
        let v2 = try buri("import", sandbox.path("v2.buri"), "notes", "--binary-index", "tags", stdin: old)
        #expect(v2.status == 0 && v2.stdout.hasPrefix("imported 4 objects"), "\(v2)")
        let orphan =
            dump.split(separator: "\n").filter { !$0.hasPrefix(#"{"bucket":"notes","schema""#) }.joined(separator: "\n")
            + "\n"
        expectFailure(
            try buri("restore", sandbox.path("b.buri"), stdin: orphan), status: 7,
            mentioning: ["bucket 'notes' but no schema line"])
        let badKind = dump.replacingOccurrences(of: #""kinds":["numeric"]"#, with: #""kinds":["decimal"]"#)
        expectFailure(
            try buri("restore", sandbox.path("c.buri"), stdin: badKind), status: 7,
            mentioning: ["\"decimal\"", "nothing was restored"])
        // A unique index the records violate: nothing is left behind.
        let db = try BuriDatabase(path: sandbox.path("u.buri"))
        try db.bucket(Everything.self).store(Array(Self.things.prefix(3)))
        db.close()
        let uniqueDump = try buri("export", sandbox.path("u.buri")).stdout
            .replacingOccurrences(of: "user1@example.org\u{301}", with: "user0@example.org")
        let violated = try buri("restore", sandbox.path("d.buri"), stdin: uniqueDump)
        expectFailure(violated, status: 7, mentioning: ["email", "nothing was restored"])
        // A computed index cannot be computed from JSON: an export (format 4) carries its values,
        // and one without them (format 3) is refused, naming it.
        let computed = try BuriDatabase(path: sandbox.path("computed.buri"))
        try computed.bucket(EventComputed.self).store(EventComputed(id: "e1", due: Date(timeIntervalSince1970: 0)))
        computed.close()
        let computedDump = try buri("export", sandbox.path("computed.buri")).stdout
        #expect(
            computedDump.hasPrefix(#"["buri-export",4]"#) && computedDump.contains(#","indexValues":{"year":[[0]]}}"#),
            "\(computedDump)")
        let withoutValues = computedDump.replacingOccurrences(of: #"["buri-export",4]"#, with: #"["buri-export",3]"#)
            .replacingOccurrences(of: #","indexValues":{"year":[[0]]}"#, with: "")
        expectFailure(
            try buri("restore", sandbox.path("e.buri"), stdin: withoutValues), status: 7,
            mentioning: ["index 'year'", "computed by Swift code", "format 3"])
        for name in ["a.buri", "b.buri", "c.buri", "d.buri", "e.buri"] {
            #expect(!sandbox.exists(name), "\(name) was left behind")
        }
        let restored = try buri("restore", sandbox.path("f.buri"), stdin: computedDump)
        #expect(restored.status == 0, "\(restored)")
        #expect(try buri("export", sandbox.path("f.buri")).stdout == computedDump)
    }

    /// The first lines of an export of buckets Person (locale, age) and Zed (multi-valued tags):
    /// the header and the schema lines, from a database `buri import` made.
    private static func schemaLines(_ sandbox: Sandbox) throws -> (header: String, person: String, zed: String) {
        let seed = sandbox.path("seed.buri")
        expectSuccess(
            try buri(
                "import", seed, "Person", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age",
                stdin: #"{"objectId":"s","locale":"EN","age":1}"# + "\n"))
        expectSuccess(
            try buri(
                "import", seed, "Zed", "--key", "id", "--binary-index", "tags",
                stdin: #"{"id":"z","tags":["a","b"]}"# + "\n"))
        let lines = try buri("export", seed).lines
        let person = try #require(lines.first { $0.hasPrefix(#"{"bucket":"Person","schema""#) })
        let zed = try #require(lines.first { $0.hasPrefix(#"{"bucket":"Zed","schema""#) })
        return (lines[0], person, zed)
    }

    /// Restore streams the dump record by record into one staged import per bucket: 100,000
    /// records (11.6 MB) restore in bounded memory, and export again byte for byte. The restore
    /// of main held the whole dump and every object: 167 MB peak for 99,000 of these records,
    /// against 44 MB streamed (measured with /usr/bin/time, debug builds).
    @Test func aLargeRestoreStaysInBoundedMemoryAndPublishesEveryBucketAtOnce() throws {
        let sandbox = try Sandbox()
        let (header, person, zed) = try Self.schemaLines(sandbox)
        var dump = header + "\n" + person + "\n"
        dump.reserveCapacity(12_000_000)
        for i in 0..<99_000 {
            dump +=
                #"{"bucket":"Person","key":"p\#(String(format: "%07d", i))","object":{"objectId":"p\#(String(format: "%07d", i))","name":"restored name \#(i)","locale":"\#(i % 2 == 0 ? "EN" : "FR")","age":\#(i % 90)}}"#
                + "\n"
        }
        dump += zed + "\n"
        for i in 0..<1_000 {
            dump +=
                #"{"bucket":"Zed","key":"z\#(String(format: "%04d", i))","object":{"id":"z\#(String(format: "%04d", i))","tags":["t\#(i % 7)","u\#(i % 3)"]}}"#
                + "\n"
        }
        let file = try sandbox.write("dump.jsonl", dump)
        let copy = sandbox.path("copy.buri")
        let run = try buri("restore", copy, "--debug-peak-memory", "--progress", file)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "restored 2 buckets and 100000 objects into \(copy)\n")
        let field = run.stderr.split(separator: "\n").first { $0.contains("buri: debug: VmHWM:") }
        let kilobytes = field.flatMap { line in line.split(separator: " ").last { Int($0) != nil }.flatMap { Int($0) } }
        #expect(kilobytes != nil, "\(run.stderr)")
        #expect((kilobytes ?? .max) < 60_000, "peak \(kilobytes ?? -1) kB")
        // Every phase showed its total, percentage, rate and ETA; both buckets published in one commit.
        let size = String(format: "%.1f MiB", Double(dump.utf8.count) / 1_048_576)
        for shown in [
            "restoring: 0 KiB of \(size) (0%)", "restoring: \(size) of \(size) (100%), 100003 lines, 2 buckets, ",
            "publishing: 0 of 100000 objects (0%)", "publishing: 100000 of 100000 objects (100%), ",
            "published 100000 objects in one commit",
        ] {
            #expect(run.stderr.contains(shown), "missing \(shown): \(run.stderr.suffix(2000))")
        }
        let again = try buri("export", copy)
        #expect(again.status == 0 && again.stdout == dump, "the restored database exports differently")
        #expect(try buri("query", copy, "Zed", "tags", "--equals", "u1", "--count").stdout == "333\n")
        expectSuccess(try buri("check", copy))
    }

    /// A restore killed midway has published nothing: the database it was creating holds no
    /// bucket, and the next read-write open purges what was staged.
    @Test func aKilledRestoreLeavesNoBucket() throws {
        let sandbox = try Sandbox()
        let (header, person, zed) = try Self.schemaLines(sandbox)
        var dump =
            header + "\n" + zed + "\n" + #"{"bucket":"Zed","key":"z","object":{"id":"z","tags":["a"]}}"# + "\n" + person
            + "\n"
        for i in 0..<5_000 {
            dump +=
                #"{"bucket":"Person","key":"p\#(String(format: "%07d", i))","object":{"objectId":"p\#(String(format: "%07d", i))","locale":"EN","age":\#(i % 90)}}"#
                + "\n"
        }
        let file = try sandbox.write("dump.jsonl", dump)
        let copy = sandbox.path("copy.buri")
        // Killed right after its third chunk is committed (the test hook, docs/DURABILITY.md): Zed's
        // one record, then two chunks of Person's 5,000, with three more to go.
        let killed = try buriKilledAfter(chunks: 3, ["restore", copy, "--progress", file])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the restore was not killed: \(killed)")
        #expect(killed.stderr.contains("restoring: ") && !killed.stderr.contains("publishing"), "\(killed.stderr)")
        let buckets = try buri("buckets", copy)
        #expect(buckets.status == 0 && buckets.stdout.isEmpty, "\(buckets)")
        var options = BuriOptions()
        options.purgesInBackground = false
        let db = try BuriDatabase(path: copy, options: options)
        #expect(Set(try db.pendingPurges().map(\.bucket)) == ["Person", "Zed"])
        #expect(try db.pendingPurges().allSatisfy { $0.state == .staging })
        try db.purgeRetiredBuckets()
        #expect(try db.pendingPurges().isEmpty && db.bucketNames().isEmpty)
        db.close()
        let check = try buri("check", copy)
        #expect(check.status == 0, "\(check)")
        // The database the killed restore left has no bucket: restoring into it again works, and a
        // restore into a database with buckets is still refused, leaving it as it was.
        let small = header + "\n" + zed + "\n" + #"{"bucket":"Zed","key":"z","object":{"id":"z","tags":["a"]}}"# + "\n"
        let again = try buri("restore", copy, stdin: small)
        #expect(again.status == 0 && again.stdout.hasPrefix("restored 1 bucket and 1 object"), "\(again)")
        let before = try buri("export", copy).stdout
        expectFailure(
            try buri("restore", copy, stdin: small), status: 2,
            mentioning: ["already a database with 1 bucket", "buri import"])
        #expect(try buri("export", copy).stdout == before)
        #expect(try buri("check", copy).status == 0)
    }
}
