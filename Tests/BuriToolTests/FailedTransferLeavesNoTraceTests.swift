import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

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
        try raw.store([
            RawObject(
                key: "a", payload: CBORValueFixtures.object(id: "a", n: 1, mail: "a@x"),
                indexValues: ["n": [[1]], "mail": [["a@x"]]]),
            RawObject(
                key: "b", payload: CBORValueFixtures.object(id: "b", n: 2, mail: "b@x"),
                indexValues: ["n": [[2]], "mail": [["b@x"]]]),
        ])
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
        (
            "value too long", 1200, #"{"id":"y","mail":"\#(String(repeating: "m", count: 70000))"}"#,
            ["line 1201", "65536"]
        ),
    ])
    func aRefusedImportIntoAnExistingBucketLeavesEveryKey(
        _ name: String, _ good: Int, _ last: String, _ mentions: [String]
    ) throws {
        let sandbox = try Sandbox()
        let db = try database(sandbox)
        let before = try everyKey(db)
        let run = try buri(["import", db, "E", "--progress"], stdin: lines(good, then: last))
        #expect(run.status == 7, "\(name): \(run)")
        for fragment in mentions + ["nothing was imported"] {
            #expect(run.stderr.contains(fragment), "\(name): \(fragment): \(run.stderr)")
        }
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
        dump +=
            #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"m","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["m"],"fieldForms":null,"computed":false}]}}"#
            + "\n"
        for i in 0..<2500 { dump += #"{"bucket":"A","key":"k\#(i)","object":{"id":"k\#(i)","m":"v\#(i)"}}"# + "\n" }
        for (last, mentions) in [
            (#"{"bucket":"A","key":"z","object":{"id":"z","m":"v7"}}"#, ["line 2503", "key \"z\"", "'m'", "\"k7\""]),
            (#"{"bucket":"A","key":"z","object":{"id":"y"}}"#, ["line 2503", "disagrees"]),
        ] {
            let run = try buri(["restore", db], stdin: dump + last + "\n")
            #expect(run.status == 7, "\(run)")
            for fragment in mentions + ["nothing was restored"] {
                #expect(run.stderr.contains(fragment), "\(fragment): \(run.stderr)")
            }
            let after = try everyKey(db)
            let unchanged = after == before
            #expect(unchanged, "\(keyDifference(before, after))")
        }
    }
}
