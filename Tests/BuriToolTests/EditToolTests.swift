import Buri
import BuriCodec
import Foundation
import Testing

@Suite("buri put, delete and drop edit a database as the Swift API does")
struct EditToolTests {
    @Test func putStoresOrReplacesOneObjectAndItsIndexEntries() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let stored = try buri("put", db, "Person", #"{"objectId":"new","name":"Zoë","locale":"SV","age":77}"#)
        expectSuccess(stored)
        #expect(stored.stdout == "stored object 'new' in bucket 'Person'\n")
        #expect(try buri("query", db, "Person", "age", "--equals", "77").lines == ["new"])

        // The pretty JSON of `get`, edited, goes back with put (it spans lines).
        let shown = try buri("get", db, "Person", "p03").stdout
        #expect(shown.contains("\n"))
        let edited = shown.replacingOccurrences(of: "\"age\" : 23", with: "\"age\" : 64").replacingOccurrences(
            of: "\"age\": 23", with: "\"age\": 64")
        #expect(edited != shown, "the age must have been edited: \(shown)")
        let file = try sandbox.write("p03.json", edited)
        let replaced = try buri("put", db, "Person", "--file", file)
        expectSuccess(replaced)
        #expect(replaced.stdout == "replaced object 'p03' in bucket 'Person'\n")
        #expect(
            !(try buri("query", db, "Person", "age", "--equals", "23").lines.contains("p03")),
            "the old index entry must be gone")
        #expect(try buri("query", db, "Person", "age", "--equals", "64").lines == ["p03"])
        // Standard input works too; canonically equal keys stay two objects.
        expectSuccess(try buri("put", db, "Person", stdin: #"{"objectId":"é","name":"a","locale":"X","age":1}"#))
        expectSuccess(
            try buri("put", db, "Person", "-", stdin: #"{"objectId":"e\u0301","name":"b","locale":"X","age":2}"#))
        expectSuccess(try buri("check", db))

        let reopened = try BuriDatabase(path: db)
        defer { reopened.close() }
        let people = try reopened.bucket(Person.self)
        #expect(try people.object(forKey: "new") == Person(objectId: "new", name: "Zoë", locale: "SV", age: 77))
        #expect(try people.object(forKey: "p03")?.age == 64)
        #expect(try people.object(forKey: "\u{E9}")?.name == "a")
        #expect(try people.object(forKey: "e\u{301}")?.name == "b")
        #expect(try people.count() == fixturePeople.count + 3)
    }

    @Test func putComputesMultiValuedAndCompoundIndexesAsTheSwiftTypeDoes() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        expectSuccess(
            try buri("put", db, "notes", #"{"id":"n9","tags":["red","red","violet"],"locale":"EN","age":30}"#))
        #expect(try buri("query", db, "notes", "tags", "--equals", "violet").lines == ["n9"])
        #expect(try buri("query", db, "notes", "locale_age", "--equals", "EN,30").lines == ["n1", "n9"])
        expectSuccess(try buri("check", db))
        let reopened = try BuriDatabase(path: db)
        defer { reopened.close() }
        let notes = try reopened.bucket(Note.self)
        #expect(
            try notes.object(forKey: "n9") == Note(id: "n9", tags: ["red", "red", "violet"], locale: "EN", age: 30))
        #expect(try notes.keys(.index("tags", equals: "red")) == ["n1", "n4", "n9"])
    }

    @Test func putRefusesWhatItCannotStoreAndChangesNothing() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let before = try buri("export", db).stdout
        expectFailure(
            try buri("put", db, "Nobody", #"{"id":"x"}"#), status: 6,
            mentioning: ["no bucket 'Nobody'", "'Person'", "buri import"])
        expectFailure(try buri("put", db, "Person", #"{"objectId":"x","age":1e400}"#), status: 7, mentioning: ["1e400"])
        expectFailure(try buri("put", db, "Person", #"{"objectId":"x","age":"#), status: 7, mentioning: ["line 1"])
        expectFailure(try buri("put", db, "Person", #"{"name":"no key"}"#), status: 7, mentioning: ["objectId"])
        expectFailure(try buri("put", db, "Person", "   "), status: 7, mentioning: ["no object given"])
        expectFailure(
            try buri("put", db, "Person", stdin: #"{"objectId":"a"}"# + "\n" + #"{"objectId":"b"}"#), status: 7,
            mentioning: ["a second JSON value follows", "buri import", "nothing was stored"])
        expectFailure(
            try buri("put", db, "Person", #"["buri-export",2]"#), status: 7, mentioning: ["one plain JSON object"])
        let longKey = String(repeating: "k", count: 4097)
        expectFailure(
            try buri("put", db, "Person", #"{"objectId":"\#(longKey)","age":1}"#), status: 7, mentioning: ["4096"])
        expectFailure(try buri("put", db, "Person", "{}", "--file", "x.json"), status: 2, mentioning: ["not both"])
        #expect(try buri("export", db).stdout == before)
    }

    /// `put` reads at most 16 MiB for its one object and refuses more, naming the limit, as soon as
    /// the input passes it: an endless stream ends the command instead of filling memory.
    @Test func putReadsABoundedInputAndRefusesMoreNamingTheLimit() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let before = try buri("export", db).stdout
        // A valid object just over the limit (a long string), from a file.
        let limit = 16 << 20
        let overName = String(repeating: "x", count: limit - 35)
        let over = try sandbox.write("over.json", #"{"objectId":"big","name":"\#(overName)","age":1}"#)
        #expect(try Data(contentsOf: URL(fileURLWithPath: over)).count == limit + 1)
        expectFailure(
            try buri("put", db, "Person", "--file", over), status: 7,
            mentioning: [
                "'\(over)' holds more than 16 MiB (16777216 bytes)", "the most `buri put` reads for one object",
                "nothing was stored",
            ])
        // Exactly at the limit, the object is stored.
        let atLimit = try sandbox.write("at.json", #"{"objectId":"big","name":"\#(overName.dropLast())","age":1}"#)
        #expect(try Data(contentsOf: URL(fileURLWithPath: atLimit)).count == limit)
        let stored = try buri("put", db, "Person", "--file", atLimit)
        #expect(stored.status == 0 && stored.stdout == "stored object 'big' in bucket 'Person'\n", "\(stored.stderr)")
        #expect(try buri("get", db, "Person", "big", "--json").stdout.utf8.count > limit - 100)
        // An endless stream on standard input: refused once it passes the limit.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = [
            "-c", "cat /dev/zero | '\(try BuriBinary.located().path)' put '\(db)' Person 2>'\(sandbox.path("err"))'",
        ]
        shell.standardOutput = FileHandle.nullDevice
        try shell.run()
        shell.waitUntilExit()
        #expect(shell.terminationStatus == 7)
        #expect(
            try sandbox.read("err")
                == "buri: standard input holds more than 16 MiB (16777216 bytes), the most `buri put` reads for one object; nothing was stored (give a smaller input, or store many objects with `buri import`)\n"
        )
        // Nothing but 'big' was stored.
        expectSuccess(try buri("delete", db, "Person", "big"))
        #expect(try buri("export", db).stdout == before)
    }

    @Test func deleteRemovesObjectsByKeyFromArgumentsOrAQuery() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let two = try buri("delete", db, "Person", "p00", "p01", "missing", "p00")
        expectSuccess(two)
        #expect(two.stdout == "deleted 2 objects from bucket 'Person'; 1 key was not there\n")
        // A query's matches, NUL-separated, and a newline-separated list on stdin.
        let nl = try buri("query", db, "Person", "locale", "--equals", "NL", "-0")
        let piped = try buri("delete", db, "Person", "--stdin", "-0", stdin: nl.stdout)
        expectSuccess(piped)
        #expect(piped.stdout == "deleted 10 objects from bucket 'Person'\n")
        expectSuccess(try buri("delete", db, "Person", "--stdin", stdin: "p02\r\np04\n\n"))
        // A key that starts with '-' after `--`.
        expectSuccess(try buri("put", db, "Person", #"{"objectId":"-dash","name":"d","locale":"DE","age":50}"#))
        expectSuccess(try buri("delete", db, "Person", "--", "-dash"))
        expectSuccess(try buri("check", db))

        let remaining = fixturePeople.filter {
            $0.locale != "NL" && !["p00", "p01", "p02", "p04"].contains($0.objectId)
        }
        #expect(try buri("keys", db, "Person").lines == remaining.map(\.objectId))
        #expect(try buri("query", db, "Person", "age", "--equals", "50").stdout == "")

        expectFailure(try buri("delete", db, "Person"), status: 2, mentioning: ["give the keys to delete"])
        expectFailure(try buri("delete", db, "Person", "-0", "p05"), status: 2, mentioning: ["add --stdin"])
        expectFailure(try buri("delete", db, "Nobody", "x"), status: 6, mentioning: ["Nobody"])
        expectFailure(
            try buri("delete", db, "Person", String(repeating: "k", count: 5000)), status: 2,
            mentioning: ["limit of 4096 bytes"])
        #expect(try buri("keys", db, "Person").lines.count == remaining.count)
    }

    @Test func dropNeedsForceAndThenRemovesTheWholeBucket() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let asked = try buri("drop", db, "notes")
        expectFailure(
            asked, status: 2,
            mentioning: [
                "bucket 'notes' with 4 objects and 2 indexes", "nothing was changed", "--force",
                "buri export \(db) notes",
            ])
        #expect(try buri("buckets", db).lines == ["Person", "notes"])
        let dropped = try buri("drop", db, "notes", "--force")
        expectSuccess(dropped)
        #expect(dropped.stdout == "dropped bucket 'notes' with 4 objects and 2 indexes\n")
        #expect(try buri("buckets", db).lines == ["Person"])
        let check = try buri("check", db)
        expectSuccess(check)
        #expect(check.stdout == "ok: 1 bucket, 40 objects, 80 index entries; no problems\n")
        expectFailure(try buri("drop", db, "notes", "--force"), status: 6, mentioning: ["notes"])
        // The Swift type starts over with an empty bucket.
        let reopened = try BuriDatabase(path: db)
        defer { reopened.close() }
        #expect(try reopened.bucket(Note.self).count() == 0)
    }
}
