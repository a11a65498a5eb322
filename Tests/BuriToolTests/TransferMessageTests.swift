import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

@Suite("Import and restore count and name what happened")
struct TransferMessageTests {
    @Test func aKeyGivenTwiceIsCountedOnce() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("d.buri")
        let twice = try buri(
            ["import", db, "E", "--key", "id"], stdin: #"{"id":"a","v":1}"# + "\n" + #"{"id":"a","v":2}"# + "\n")
        #expect(twice.status == 0, "\(twice)")
        #expect(twice.stdout.hasPrefix("imported 1 object into bucket 'E' of \(db) from 2 lines"), "\(twice)")
        #expect(try buri("keys", db, "E").lines == ["a"])
        // Into an existing bucket: new objects and replacements are told apart from the count.
        let more = try buri(
            ["import", db, "E"],
            stdin: #"{"id":"a","v":3}"# + "\n" + #"{"id":"b","v":1}"# + "\n" + #"{"id":"b","v":2}"# + "\n")
        #expect(more.status == 0, "\(more)")
        #expect(
            more.stdout.hasPrefix("imported 3 lines into bucket 'E' of \(db): 1 object added, 2 replacing"), "\(more)")
        #expect(more.stdout.contains("the bucket holds 2 objects"), "\(more)")
        // With --chunk-size too.
        let chunked = try buri(
            ["import", db, "E", "--chunk-size", "1"], stdin: #"{"id":"c","v":3}"# + "\n" + #"{"id":"c","v":4}"# + "\n")
        #expect(
            chunked.stdout.hasPrefix("imported 2 lines into bucket 'E' of \(db): 1 object added, 1 replacing"),
            "\(chunked)")
        // Only new keys: the plain count, as before.
        let plain = try buri(["import", db, "E"], stdin: #"{"id":"x"}"# + "\n" + #"{"id":"y"}"# + "\n")
        #expect(plain.stdout == "imported 2 objects into bucket 'E' of \(db)\n", "\(plain)")
        // restore counts what the buckets hold.
        let dump =
            #"["buri-export",3]"# + "\n" + #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[]}}"#
            + "\n"
            + #"{"bucket":"A","key":"k","object":{"id":"k","v":1}}"# + "\n"
            + #"{"bucket":"A","key":"k","object":{"id":"k","v":2}}"# + "\n"
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
        let input =
            #"{"id":"a","email":"x@y"}"# + "\n" + #"{"id":"b","email":"b@y"}"# + "\n" + #"{"id":"c","email":"x@y"}"#
            + "\n"
        expectFailure(
            try buri(["import", db, "Mail"], stdin: input), status: 7,
            mentioning: ["line 3", "key \"c\"", "unique index 'email'", "\"x@y\"", "key \"a\"", "nothing was imported"])
        // Against an object the bucket holds, in a later chunk.
        expectSuccess(try buri(["import", db, "Mail"], stdin: #"{"id":"h","email":"held@y"}"# + "\n"))
        let late =
            (0..<1500).map { #"{"id":"m\#($0)","email":"\#($0)@y"}"# }.joined(separator: "\n") + "\n"
            + #"{"id":"late","email":"held@y"}"# + "\n"
        expectFailure(
            try buri(["import", db, "Mail"], stdin: late), status: 7,
            mentioning: ["line 1501", "key \"late\"", "'email'", "\"held@y\"", "key \"h\""])
        // --chunk-size: the lines before it are stored, and it says so.
        let chunked = try buri(
            ["import", db, "Mail", "--chunk-size", "10"],
            stdin: #"{"id":"p","email":"p@y"}"# + "\n" + #"{"id":"q","email":"held@y"}"# + "\n")
        expectFailure(
            chunked, status: 7, mentioning: ["line 2", "key \"q\"", "key \"h\"", "lines before it are stored"])
        #expect(try buri("keys", db, "Mail").lines == ["h", "p"])
    }

    @Test func restoreSaysWhatIsWrongWithAHeader() throws {
        let sandbox = try Sandbox()
        let schema = #"{"bucket":"A","schema":{"keyField":"id","schemaVersion":0,"indexes":[]}}"#
        for (header, mentions) in [
            (#"["buri-export",8]"#, ["format 8", "does not know", "2, 3, 4, 5, 6 and 7"]),
            (#"["buri-export",3.0]"#, ["format 3.0", "does not know"]),
            (#"["buri-export","3"]"#, ["format \"3\"", "does not know"]),
            (#"["buri-export",2]"#, ["format 2", "older buri", "buri import"]),
            (#"{"bucket":"A"}"#, ["not a `buri export`"]),
        ] {
            let run = try buri(["restore", sandbox.path("r.buri")], stdin: header + "\n" + schema + "\n")
            expectFailure(run, status: 7, mentioning: ["line 1"] + mentions)
            #expect(!run.stderr.contains("carries no schema"), "\(run)")
            #expect(!sandbox.exists("r.buri"))
        }
        // import says the same of an unknown format.
        let run = try buri(
            ["import", sandbox.path("i.buri"), "A"], stdin: #"["buri-export",8]"# + "\n" + schema + "\n")
        expectFailure(run, status: 7, mentioning: ["line 1", "format 8", "2, 3, 4, 5, 6 and 7"])
    }
}
