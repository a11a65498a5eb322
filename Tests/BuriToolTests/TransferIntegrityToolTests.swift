import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

// Import, restore and export on their failure paths (issues 21 and 22): a failed import or restore
// leaves every key as it was; what a killed one staged is gone after the next command that
// writes; an export restores whatever it holds; schema lines are read strictly; counts and
// messages say what happened.

/// Every key and value of the database at `path`, read with purging off (so reading changes no key).
func everyKey(_ path: String) throws -> [[UInt8]: [UInt8]] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    let snapshot = try db.engine.snapshot()
    let cursor = try snapshot.cursor(in: .all)
    var result: [[UInt8]: [UInt8]] = [:]
    while try cursor.next() { result[cursor.key] = cursor.value }
    return result
}

/// How the keys of two states differ, for messages (at most a few keys, in hex).
func keyDifference(_ before: [[UInt8]: [UInt8]], _ after: [[UInt8]: [UInt8]]) -> String {
    func hex(_ bytes: [UInt8]) -> String { bytes.prefix(24).map { String(format: "%02x", $0) }.joined(separator: " ") }
    let added = after.keys.filter { before[$0] == nil }.map(hex).sorted()
    let removed = before.keys.filter { after[$0] == nil }.map(hex).sorted()
    let changed = before.keys.filter { after[$0] != nil && after[$0] != before[$0] }.map(hex).sorted()
    return "added \(added.count) \(added.prefix(5)), removed \(removed.count) \(removed.prefix(5)), changed \(changed.count) \(changed.prefix(5))"
}

/// The pending purges of the database at `path` (read with purging off).
func pendingPurges(_ path: String) throws -> [RetiredBucket] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    return try db.pendingPurges()
}

/// The total size of the files of directory `path`.
func directorySize(_ path: String) throws -> Int {
    try FileManager.default.contentsOfDirectory(atPath: path).reduce(0) { total, name in
        let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
        return total + ((attributes[.size] as? NSNumber)?.intValue ?? 0)
    }
}

/// A unique binary index over field `field`, as a tool-computable definition.
func uniqueIndex(_ name: String, field: String) -> IndexDefinition {
    var index = IndexDefinition(id: 0, name: name, components: [.binary], unique: true)
    index.setFieldPaths([[field]])
    return index
}

@Suite("A failed import or restore leaves every key of the database as it was")
struct FailedTransferLeavesNoTraceTests {
    /// Bucket E (key field id, numeric index n, unique binary index mail) with two objects.
    func database(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("e.buri")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        var n = IndexDefinition(id: 0, name: "n", components: [.numeric])
        n.setFieldPaths([["n"]])
        let raw = try db.createBucket(named: "E", keyField: "id", indexes: [n, uniqueIndex("mail", field: "mail")])
        try raw.store([RawObject(key: "a", payload: CBORValueFixtures.object(id: "a", n: 1, mail: "a@x"), indexValues: ["n": [[1]], "mail": [["a@x"]]]),
                       RawObject(key: "b", payload: CBORValueFixtures.object(id: "b", n: 2, mail: "b@x"), indexValues: ["n": [[2]], "mail": [["b@x"]]])])
        return path
    }

    /// `count` good lines for bucket E, keys c0…, then `last`.
    func lines(_ count: Int, then last: String) -> String {
        (0..<count).map { #"{"id":"c\#($0)","n":\#($0 + 10),"mail":"c\#($0)@x"}"# + "\n" }.joined() + last + "\n"
    }

    @Test(arguments: [
        // The issue's case: an integer beyond what CBOR holds, on the second line.
        ("bad number", 1, #"{"id":"d","n":18446744073709551616}"#, ["line 2", "18446744073709551616"]),
        // After two full chunks were stored into the stage.
        ("late bad line", 2500, #"{"id":"z","n":"many"}"#, ["line 2501", "index 'n'"]),
        // A unique index violated by the last line, holder an object the bucket had.
        ("unique violation", 1500, #"{"id":"z","n":3,"mail":"a@x"}"#, ["line 1501", "key \"z\"", "'mail'", "\"a\""]),
        // A key over Buri's limit.
        ("key too long", 1200, #"{"id":"\#(String(repeating: "k", count: 5000))","n":3}"#, ["line 1201", "4096"]),
        // An index value over the tuple limit.
        ("value too long", 1200, #"{"id":"y","mail":"\#(String(repeating: "m", count: 70000))"}"#, ["line 1201", "65536"]),
    ])
    func aRefusedImportIntoAnExistingBucketLeavesEveryKey(_ name: String, _ good: Int, _ last: String, _ mentions: [String]) throws {
        let sandbox = try Sandbox()
        let db = try database(sandbox)
        let before = try everyKey(db)
        let run = try buri(["import", db, "E", "--progress"], stdin: lines(good, then: last))
        #expect(run.status == 7, "\(name): \(run)")
        for fragment in mentions + ["nothing was imported"] { #expect(run.stderr.contains(fragment), "\(name): \(fragment): \(run.stderr)") }
        let after = try everyKey(db)
        let unchanged = after == before
        #expect(unchanged, "\(name): \(keyDifference(before, after))")
        #expect(try pendingPurges(db).isEmpty)
    }

    /// A restore into a database without buckets (what a killed restore leaves) that fails after
    /// staging thousands of records keeps nothing of them.
    @Test func aRefusedRestoreIntoAnEmptyDatabaseLeavesEveryKey() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("empty.buri")
        try BuriDatabase(path: db).close()
        let before = try everyKey(db)
        var dump = #"["buri-export",3]"# + "\n"
        dump += #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"m","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["m"],"fieldForms":null,"computed":false}]}}"# + "\n"
        for i in 0..<2500 { dump += #"{"bucket":"A","key":"k\#(i)","object":{"id":"k\#(i)","m":"v\#(i)"}}"# + "\n" }
        for (last, mentions) in [(#"{"bucket":"A","key":"z","object":{"id":"z","m":"v7"}}"#, ["line 2503", "key \"z\"", "'m'", "\"k7\""]),
                                 (#"{"bucket":"A","key":"z","object":{"id":"y"}}"#, ["line 2503", "disagrees"])] {
            let run = try buri(["restore", db], stdin: dump + last + "\n")
            #expect(run.status == 7, "\(run)")
            for fragment in mentions + ["nothing was restored"] { #expect(run.stderr.contains(fragment), "\(fragment): \(run.stderr)") }
            let after = try everyKey(db)
            let unchanged = after == before
            #expect(unchanged, "\(keyDifference(before, after))")
        }
    }
}

/// Builds CBOR payloads for the fixtures above.
enum CBORValueFixtures {
    static func object(id: String, n: Int, mail: String) -> [UInt8] {
        CBORValue.map([CBORMapEntry(key: "id", value: .text(id)), CBORMapEntry(key: "n", value: .int(Int64(n))),
                       CBORMapEntry(key: "mail", value: .text(mail))]).encoded()
    }

    static func person(_ person: Person) -> [UInt8] {
        CBORValue.map([CBORMapEntry(key: "objectId", value: .text(person.objectId)), CBORMapEntry(key: "name", value: .text(person.name)),
                       CBORMapEntry(key: "locale", value: .text(person.locale)), CBORMapEntry(key: "age", value: .int(Int64(person.age)))]).encoded()
    }
}

@Suite("What a killed import or restore staged is gone after the next command that writes")
struct KilledTransferStageTests {
    /// A database holding bucket Person (20 people), and the stage of an import into it that
    /// stored `count` objects and was never published nor abandoned — what a SIGKILL leaves —
    /// made deterministically through the library. Returns the stage's id.
    func killedImport(_ path: String, count: Int) throws -> UInt32 {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Person.self).store(Array(fixturePeople.prefix(20)))
        let load = try db.stageImport(into: "Person")
        // Names that do not compress (LevelDB compresses its blocks): 300 pseudo-random hex digits.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        var chunk: [RawObject] = []
        for i in 0..<count {
            var name = ""
            while name.count < 300 {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                name += String(seed >> 1, radix: 16)
            }
            let person = Person(objectId: String(format: "s%06d", i), name: name, locale: "EN", age: i % 90)
            let payload = CBORValueFixtures.person(person)
            chunk.append(RawObject(key: person.objectId, payload: payload, indexValues: ["locale": [["EN"]], "age": [[IndexValue(i % 90)]]]))
            if chunk.count == 1000 {
                try load.store(chunk)
                chunk = []
            }
        }
        if !chunk.isEmpty { try load.store(chunk) }
        return load.stageId
    }

    @Test func theNextWritingCommandDeletesTheStageAndGivesItsSpaceBack() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("people.buri")
        let stage = try killedImport(db, count: 20_000)
        let staged = try directorySize(db)
        let pending = try pendingPurges(db)
        #expect(pending.map(\.id) == [stage] && pending.first?.state == .staging, "\(pending)")
        let keysBefore = try everyKey(db).keys.filter { $0[0] == 2 && $0[1...4].elementsEqual(withUnsafeBytes(of: stage.bigEndian, Array.init)) }
        // The 20 objects copied from the bucket and the 20,000 stored.
        #expect(keysBefore.count == 20_020)
        // Any command that writes: here one `put`.
        expectSuccess(try buri("put", db, "Person", #"{"objectId":"new","name":"N","locale":"NL","age":5}"#))
        #expect(try pendingPurges(db).isEmpty)
        let left = try everyKey(db).keys.filter { key in
            key.count >= 5 && [2, 3, 4, 5].contains(key[0]) && key[1...4].elementsEqual(withUnsafeBytes(of: stage.bigEndian, Array.init))
        }
        #expect(left.isEmpty, "\(left.count) keys of the stage are left")
        // The stage's 20,000 records of 300+ bytes (over 6 MB) no longer take space.
        let after = try directorySize(db)
        #expect(staged > 6_000_000 && after < 1_000_000, "size \(staged) with the stage, \(after) after the put")
        let keys = try buri("keys", db, "Person")
        #expect(keys.lines.count == 21 && keys.lines.contains("new"), "\(keys)")
        let check = try buri("check", db)
        #expect(check.status == 0 && !check.stdout.contains("note:"), "\(check)")
    }

    /// An import creating a database killed after LevelDB made its files but before Buri wrote
    /// its header leaves a store without a single key: the same import run again takes it.
    @Test func anImportKilledBeforeTheHeaderIsWrittenCanBeRunAgain() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("new.buri")
        let engine = try LevelDBEngine(path: db)
        engine.close()
        let input = #"{"id":"a","n":1}"# + "\n" + #"{"id":"b","n":2}"# + "\n"
        let run = try buri(["import", db, "B", "--key", "id", "--numeric-index", "n"], stdin: input)
        #expect(run.status == 0 && run.stdout == "imported 2 objects into bucket 'B' of \(db)\n", "\(run)")
        #expect(try buri("keys", db, "B").lines == ["a", "b"])
        // So does restore.
        let other = sandbox.path("other.buri")
        let second = try LevelDBEngine(path: other)
        second.close()
        let dump = try buri("export", db)
        let restored = try buri(["restore", other], stdin: dump.stdout)
        #expect(restored.status == 0, "\(restored)")
        #expect(try buri("export", other).stdout == dump.stdout)
        // A LevelDB store with keys that are not Buri's is still refused, and left alone.
        let foreign = sandbox.path("foreign.buri")
        let store = try Database(path: foreign)
        try store.put(Array("k".utf8), Array("v".utf8))
        store.close()
        expectFailure(try buri(["import", foreign, "B", "--key", "id"], stdin: input), status: 4, mentioning: ["foreign.buri"])
    }

    /// An import into a new path killed while storing leaves a database without buckets and its
    /// stage: the same import run again creates the bucket, and nothing of the stage is left.
    @Test func anImportIntoANewPathKilledWhileStoringCanBeRunAgain() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("fresh.buri")
        do {
            let database = try BuriDatabase(path: db)
            defer { database.close() }
            var n = IndexDefinition(id: 0, name: "n", components: [.numeric])
            n.setFieldPaths([["n"]])
            let load = try database.stageImport(creating: "B", keyField: "id", indexes: [n])
            try load.store((0..<20_000).map { RawObject(key: "s\($0)", payload: CBORValueFixtures.object(id: "s\($0)", n: $0 % 20, mail: "m"), indexValues: ["n": [[IndexValue($0 % 20)]]]) })
        }
        #expect(try pendingPurges(db).count == 1)
        let input = #"{"id":"a","n":1}"# + "\n"
        let run = try buri(["import", db, "B", "--key", "id", "--numeric-index", "n"], stdin: input)
        #expect(run.status == 0 && run.stdout == "imported 1 object into bucket 'B' of \(db)\n", "\(run)")
        #expect(try pendingPurges(db).isEmpty)
        #expect(try buri("keys", db, "B").lines == ["a"])
        let check = try buri("check", db)
        #expect(check.status == 0 && !check.stdout.contains("note:"), "\(check)")
        #expect(try everyKey(db).keys.filter { $0.first == 2 }.count == 1)
    }
}

@Suite("Import and restore count and name what happened")
struct TransferMessageTests {
    @Test func aKeyGivenTwiceIsCountedOnce() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("d.buri")
        let twice = try buri(["import", db, "E", "--key", "id"], stdin: #"{"id":"a","v":1}"# + "\n" + #"{"id":"a","v":2}"# + "\n")
        #expect(twice.status == 0, "\(twice)")
        #expect(twice.stdout.hasPrefix("imported 1 object into bucket 'E' of \(db) from 2 lines"), "\(twice)")
        #expect(try buri("keys", db, "E").lines == ["a"])
        // Into an existing bucket: new objects and replacements are told apart from the count.
        let more = try buri(["import", db, "E"], stdin: #"{"id":"a","v":3}"# + "\n" + #"{"id":"b","v":1}"# + "\n" + #"{"id":"b","v":2}"# + "\n")
        #expect(more.status == 0, "\(more)")
        #expect(more.stdout.hasPrefix("imported 3 lines into bucket 'E' of \(db): 1 object added, 2 replacing"), "\(more)")
        #expect(more.stdout.contains("the bucket holds 2 objects"), "\(more)")
        // With --chunk-size too.
        let chunked = try buri(["import", db, "E", "--chunk-size", "1"], stdin: #"{"id":"c","v":3}"# + "\n" + #"{"id":"c","v":4}"# + "\n")
        #expect(chunked.stdout.hasPrefix("imported 2 lines into bucket 'E' of \(db): 1 object added, 1 replacing"), "\(chunked)")
        // Only new keys: the plain count, as before.
        let plain = try buri(["import", db, "E"], stdin: #"{"id":"x"}"# + "\n" + #"{"id":"y"}"# + "\n")
        #expect(plain.stdout == "imported 2 objects into bucket 'E' of \(db)\n", "\(plain)")
        // restore counts what the buckets hold.
        let dump = #"["buri-export",3]"# + "\n" + #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[]}}"# + "\n"
            + #"{"bucket":"A","key":"k","object":{"id":"k","v":1}}"# + "\n" + #"{"bucket":"A","key":"k","object":{"id":"k","v":2}}"# + "\n"
        let restored = try buri(["restore", sandbox.path("r.buri")], stdin: dump)
        #expect(restored.stdout == "restored 1 bucket and 1 object into \(sandbox.path("r.buri"))\n", "\(restored)")
    }

    @Test func aUniqueViolationNamesLineKeyIndexValueAndHolder() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("u.buri")
        let database = try BuriDatabase(path: db)
        _ = try database.createBucket(named: "Mail", keyField: "id", indexes: [uniqueIndex("email", field: "email")])
        database.close()
        // Within the input, in one chunk.
        let input = #"{"id":"a","email":"x@y"}"# + "\n" + #"{"id":"b","email":"b@y"}"# + "\n" + #"{"id":"c","email":"x@y"}"# + "\n"
        expectFailure(try buri(["import", db, "Mail"], stdin: input), status: 7,
                      mentioning: ["line 3", "key \"c\"", "unique index 'email'", "\"x@y\"", "key \"a\"", "nothing was imported"])
        // Against an object the bucket holds, in a later chunk.
        expectSuccess(try buri(["import", db, "Mail"], stdin: #"{"id":"h","email":"held@y"}"# + "\n"))
        let late = (0..<1500).map { #"{"id":"m\#($0)","email":"\#($0)@y"}"# }.joined(separator: "\n") + "\n" + #"{"id":"late","email":"held@y"}"# + "\n"
        expectFailure(try buri(["import", db, "Mail"], stdin: late), status: 7,
                      mentioning: ["line 1501", "key \"late\"", "'email'", "\"held@y\"", "key \"h\""])
        // --chunk-size: the lines before it are stored, and it says so.
        let chunked = try buri(["import", db, "Mail", "--chunk-size", "10"], stdin: #"{"id":"p","email":"p@y"}"# + "\n" + #"{"id":"q","email":"held@y"}"# + "\n")
        expectFailure(chunked, status: 7, mentioning: ["line 2", "key \"q\"", "key \"h\"", "lines before it are stored"])
        #expect(try buri("keys", db, "Mail").lines == ["h", "p"])
    }

    @Test func restoreSaysWhatIsWrongWithAHeader() throws {
        let sandbox = try Sandbox()
        let schema = #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[]}}"#
        for (header, mentions) in [(#"["buri-export",5]"#, ["format 5", "does not know", "2, 3 and 4"]),
                                   (#"["buri-export",3.0]"#, ["format 3.0", "does not know"]),
                                   (#"["buri-export","3"]"#, ["format \"3\"", "does not know"]),
                                   (#"["buri-export",2]"#, ["format 2", "older buri", "buri import"]),
                                   (#"{"bucket":"A"}"#, ["not a `buri export`"])] {
            let run = try buri(["restore", sandbox.path("r.buri")], stdin: header + "\n" + schema + "\n")
            expectFailure(run, status: 7, mentioning: ["line 1"] + mentions)
            #expect(!run.stderr.contains("carries no schema"), "\(run)")
            #expect(!sandbox.exists("r.buri"))
        }
        // import says the same of an unknown format.
        let run = try buri(["import", sandbox.path("i.buri"), "A"], stdin: #"["buri-export",5]"# + "\n" + schema + "\n")
        expectFailure(run, status: 7, mentioning: ["line 1", "format 5", "2, 3 and 4"])
    }
}

@Suite("Schema lines and records are read strictly: a wrong member is refused, never defaulted")
struct StrictSchemaLineTests {
    static let index = #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false}"#

    static func dump(schema: String, index: String = index, record: String = #"{"bucket":"B","key":"k","object":{"id":"k","e":"x"}}"#) -> String {
        let schemaText = schema.replacingOccurrences(of: "INDEX", with: index)
        return #"["buri-export",3]"# + "\n" + #"{"bucket":"B","schema":"# + schemaText + "}\n" + record + "\n"
    }

    static let schema = #"{"keyField":"id","schemaVersion":0,"indexes":[INDEX]}"#

    /// (what, the index object or schema changed, the member the error must name)
    static let badIndexes: [(String, String)] = [
        (#""unique":1"#, "unique"), (#""unique":"yes""#, "unique"), (#""unique":null"#, "unique"), (#""unique":0"#, "unique"),
        (#""multiValued":1"#, "multiValued"), (#""multiValued":null"#, "multiValued"),
        (#""computed":"no""#, "computed"), (#""computed":null"#, "computed"),
        (#""version":9223372036854775808"#, "version"), (#""version":1.5"#, "version"), (#""version":"3""#, "version"),
        (#""version":true"#, "version"), (#""version":null"#, "version"), (#""version":-9223372036854775809"#, "version"),
        (#""kinds":[]"#, "kinds"), (#""kinds":["text"]"#, "kinds"), (#""kinds":"binary""#, "kinds"), (#""kinds":[1]"#, "kinds"),
        (#""fields":"e""#, "fields"), (#""fields":[1]"#, "fields"), (#""fields":["e","f"]"#, "fields"),
        (#""fieldForms":["when"]"#, "fieldForms"), (#""fieldForms":"date""#, "fieldForms"), (#""fieldForms":["value","date"]"#, "fieldForms"),
        (#""name":"""#, "name"), (#""name":5"#, "name"), (#""name":null"#, "name"),
    ]

    static func replacing(_ member: String, in object: String) -> String {
        let name = String(member.split(separator: ":", maxSplits: 1)[0])
        guard let range = object.range(of: name + ":") else { return object }
        let rest = object[range.upperBound...]
        // The old value runs to the next ',"' or the closing brace.
        let end = rest.range(of: ",\"")?.lowerBound ?? rest.index(before: rest.endIndex)
        return object.replacingCharacters(in: range.lowerBound..<end, with: member)
    }

    @Test func everyWrongIndexMemberIsRefusedNamingLineAndMember() throws {
        let sandbox = try Sandbox()
        for (member, name) in Self.badIndexes {
            let index = Self.replacing(member, in: Self.index)
            #expect(index != Self.index, "\(member)")
            let dump = Self.dump(schema: Self.schema, index: index)
            let restore = try buri(["restore", sandbox.path("r.buri")], stdin: dump)
            expectFailure(restore, status: 7, mentioning: ["line 2", "\"\(name)\"", "nothing was restored"])
            #expect(!sandbox.exists("r.buri"), "\(member)")
            let importing = try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump)
            expectFailure(importing, status: 7, mentioning: ["line 2", "\"\(name)\"", "nothing was imported"])
            #expect(!sandbox.exists("i.buri"), "\(member)")
        }
        // The unchanged line restores, its unique index kept.
        let good = try buri(["restore", sandbox.path("ok.buri")], stdin: Self.dump(schema: Self.schema))
        #expect(good.status == 0, "\(good)")
        #expect(try buri("info", sandbox.path("ok.buri")).stdout.contains("unique"))
    }

    @Test func everyWrongSchemaOrLineMemberIsRefusedNamingIt() throws {
        let sandbox = try Sandbox()
        let cases: [(String, String, String)] = [
            (#"{"keyField":5,"schemaVersion":0,"indexes":[]}"#, Self.index, "keyField"),
            (#"{"keyField":"id","schemaVersion":-1,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":1.5,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":"3","indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":18446744073709551616,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":0,"indexes":{}}"#, Self.index, "indexes"),
            (#"{"keyField":"id","schemaVersion":0}"#, Self.index, "indexes"),
            (#"{"keyField":"id","schemaVersion":0,"indexes":[],"uniqe":true}"#, Self.index, "uniqe"),
            (#"[]"#, Self.index, "keyField"),
            (Self.schema, #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false,"uniqe":false}"#, "uniqe"),
            (Self.schema, #"{"name":"e","kinds":["binary"],"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false}"#, "unique"),
            (Self.schema, #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":null,"fieldForms":null,"computed":false,"fieldPaths":[[]]}"#, "fieldPaths"),
            (Self.schema, #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":null,"fieldForms":null,"computed":false,"fieldPaths":[["a"],["b"]]}"#, "fieldPaths"),
            (#"{"keyField":"id","schemaVersion":0,"indexes":[INDEX,INDEX]}"#, Self.index, "same name"),
        ]
        for (schema, index, name) in cases {
            let dump = Self.dump(schema: schema, index: index)
            let restore = try buri(["restore", sandbox.path("r.buri")], stdin: dump)
            expectFailure(restore, status: 7, mentioning: ["line 2", name])
            let importing = try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump)
            expectFailure(importing, status: 7, mentioning: ["line 2", name])
        }
        // Records and schema lines with a wrong or unknown member.
        let records: [(String, String)] = [
            (#"{"bucket":"B","key":5,"object":{}}"#, "\"key\""),
            (#"{"bucket":"B","key":"k","object":{},"extra":1}"#, "\"extra\""),
            (#"{"bucket":"B","key":"k"}"#, "\"object\""),
            (#"{"bucket":"B","key":"k","object":{"id":"k"},"indexValues":{}}"#, "\"indexValues\""),
            (#"{"bucket":5,"key":"k","object":{}}"#, "\"bucket\""),
        ]
        for (record, name) in records {
            let dump = Self.dump(schema: Self.schema, record: record)
            expectFailure(try buri(["restore", sandbox.path("r.buri")], stdin: dump), status: 7, mentioning: ["line 3", name])
            expectFailure(try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump), status: 7, mentioning: ["line 3", name])
        }
        let extra = #"["buri-export",3]"# + "\n" + #"{"bucket":"B","schema":{"keyField":"id","schemaVersion":0,"indexes":[]},"more":1}"# + "\n"
        expectFailure(try buri(["restore", sandbox.path("r.buri")], stdin: extra), status: 7, mentioning: ["line 2", "\"more\""])
    }

    /// A catalog entry whose fields do not match its kinds is described as such, not as an index
    /// that "names no field".
    @Test func mismatchedFieldCountsAreNamedAsSuch() throws {
        var index = IndexDefinition(id: 1, name: "pair", components: [.binary, .numeric])
        index.fields = ["a"]
        #expect(index.uncomputableReason?.contains("1 field for 2 components") == true, "\(index.uncomputableReason ?? "nil")")
        #expect(index.uncomputableReason?.contains("names no field") == false)
        index.fields = nil
        #expect(index.uncomputableReason?.contains("names no field") == true)
    }
}

@Suite("A long line is read in time linear in its length")
struct LongLineImportTests {
    /// One line of 24 MiB, then a short one. Main searched the whole line again for its newline
    /// after every 1 MiB block it read, so the work grew with the square of the line (5 MB 3.9 s,
    /// 20 MB 27 s, 100 MB 376 s in a release build). Linearity is measured without a clock: the
    /// tool counts every byte its newline search looks at, and that must stay within the input's
    /// size per pass over it (an import into a new bucket reads its input twice).
    @Test func aLongSingleLineImportsInLinearTimeAndBoundedMemory() throws {
        let sandbox = try Sandbox()
        let length = 24 << 20
        let path = try sandbox.write("long.jsonl", #"{"id":"a","s":""# + String(repeating: "x", count: length) + #""}"# + "\n" + #"{"id":"b","s":"short"}"# + "\n")
        let db = sandbox.path("long.buri")
        let run = try buri(["import", db, "L", "--key", "id", "--debug-peak-memory", path])
        #expect(run.status == 0 && run.stdout == "imported 2 objects into bucket 'L' of \(db)\n", "\(run.stdout) \(run.stderr)")
        // Memory is a small multiple of the line (the line, its parsed form, its record), never
        // the whole input or a copy per block read.
        let field = run.stderr.split(separator: "\n").first { $0.hasPrefix("buri: debug: VmHWM:") }
        let kilobytes = field.flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" })[3]) } ?? .max
        #expect(kilobytes < 12 * length / 1024, "peak \(kilobytes) kB for a line of \(length / 1024) kB")
        let searched = run.stderr.split(separator: "\n").first { $0.hasPrefix("buri: debug: searched ") }
            .flatMap { Int($0.split(separator: " ")[3]) } ?? .max
        #expect(searched <= 2 * (length + 64), "the newline search looked at \(searched) bytes of a \(length)-byte input read twice")
        let database = try BuriDatabase(path: db)
        defer { database.close() }
        let record = try database.rawBucket(named: "L").record(forKey: "a")
        #expect((record?.payload.count ?? 0) > length)
        #expect(try database.rawBucket(named: "L").count() == 2)
    }
}
