import Buri
import Foundation
import Testing

/// `count` plain people lines, keys `prefix` + a zero-padded number, written straight to a file.
private func writePeople(
    _ sandbox: Sandbox, _ name: String, count: Int, prefix: String = "s", lastLine: String? = nil
) throws -> String {
    var text = ""
    text.reserveCapacity(count * 80)
    for i in 0..<count {
        text +=
            #"{"objectId":"\#(prefix)\#(String(format: "%07d", i))","name":"imported name \#(i)","locale":"\#(i % 2 == 0 ? "EN" : "FR")","age":\#(i % 90)}"#
            + "\n"
    }
    if let lastLine { text += lastLine + "\n" }
    return try sandbox.write(name, text)
}

/// A database with bucket Person (indexes locale and age) holding 300 people, and its export.
private func existingDatabase(_ sandbox: Sandbox) throws -> (db: String, export: String) {
    let db = sandbox.path("existing.buri")
    let seed = try writePeople(sandbox, "seed.jsonl", count: 300, prefix: "e")
    expectSuccess(
        try buri(
            "import", db, "Person", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age", seed))
    let export = try buri("export", db)
    #expect(export.status == 0 && export.stdout.contains(#""key":"e0000299""#), "\(export)")
    return (db, export.stdout)
}

/// Opens `db` without background purges and returns its pending purges, then purges them and
/// returns what is pending after that.
private func purgesAtNextOpen(_ db: String) throws -> (found: [RetiredBucket], after: [RetiredBucket], consistent: Bool)
{
    var options = BuriOptions()
    options.purgesInBackground = false
    let database = try BuriDatabase(path: db, options: options)
    defer { database.close() }
    let found = try database.pendingPurges()
    try database.purgeRetiredBuckets()
    return (found, try database.pendingPurges(), try database.check().isConsistent)
}

@Suite("buri import streams its input into a staged, atomic import with bounded memory")
struct StreamingImportToolTests {
    /// Peak memory (VmHWM) of an import of 50,000 lines (3.6 MB) into an existing bucket. The
    /// one-batch import of main held every line and object: 90 MB for this file (154 MB for
    /// twice as many lines). Streaming in chunks keeps it near 40 MB, whatever the length.
    @Test func aLargeImportStaysInBoundedMemory() throws {
        let sandbox = try Sandbox()
        let (db, _) = try existingDatabase(sandbox)
        let input = try writePeople(sandbox, "big.jsonl", count: 50_000)
        let run = try buri("import", db, "Person", "--debug-peak-memory", input)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "imported 50000 objects into bucket 'Person' of \(db)\n")
        let field = run.stderr.split(separator: "\n").first { $0.hasPrefix("buri: debug: VmHWM:") }
        let kilobytes = field.flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" })[3]) }
        #expect(kilobytes != nil, "\(run)")
        #expect((kilobytes ?? .max) < 60_000, "peak \(kilobytes ?? -1) kB")
        let count = try buri("query", db, "Person", "age", "--from", "0", "--to", "89", "--count")
        #expect(count.stdout == "50300\n", "\(count)")
        // Standard input from a pipe is copied to a temporary file and streamed the same way.
        let lines = try sandbox.write("two.jsonl", #"{"objectId":"é"}"# + "\n" + #"{"objectId":"e\#u{301}"}"# + "\n")
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = [
            "-c",
            "cat '\(lines)' | '\(try BuriBinary.located().path)' import '\(sandbox.path("piped.buri"))' P --key objectId --progress 2>'\(sandbox.path("err"))'",
        ]
        shell.standardOutput = FileHandle.nullDevice
        try shell.run()
        shell.waitUntilExit()
        let shown = try sandbox.read("err")
        #expect(shell.terminationStatus == 0, "\(shown)")
        #expect(
            shown.contains("checking: 0 KiB of 0 KiB (") && shown.contains("publishing: 2 of 2 objects (100%)"),
            "\(shown)")
        let keys = try buri("keys", sandbox.path("piped.buri"), "P")
        #expect(keys.stdout == "e\u{301}\né\n", "\(keys)")
    }

    @Test func aBadLineLateInABigFileLeavesTheDatabaseUnchanged() throws {
        let sandbox = try Sandbox()
        let (db, before) = try existingDatabase(sandbox)
        let input = try writePeople(sandbox, "late.jsonl", count: 20_000, lastLine: #"{"objectId":"bad","age":"old"}"#)
        let run = try buri("import", db, "Person", input)
        expectFailure(run, status: 7, mentioning: ["line 20001", "index 'age'", "nothing was imported"])
        let after = try buri("export", db)
        #expect(after.status == 0 && after.stdout == before, "\(after.stderr)")
        let purges = try purgesAtNextOpen(db)
        #expect(purges.after.isEmpty && purges.consistent)
        // A unique violation met in a late chunk leaves it unchanged too.
        let unique = sandbox.path("u.buri")
        expectSuccess(try buri("import", unique, "U", "--key", "id", stdin: #"{"id":"a"}"# + "\n"))
        let db2 = try BuriDatabase(path: unique)
        _ = try db2.createBucket(
            named: "Mail", keyField: "id",
            indexes: [
                {
                    var index = IndexDefinition(id: 0, name: "email", components: [.binary], unique: true);
                    index.setFieldPaths([["email"]]); return index
                }()
            ])
        db2.close()
        let mails =
            (0..<3000).map { #"{"id":"m\#($0)","email":"\#($0)@x"}"# }.joined(separator: "\n") + "\n"
            + #"{"id":"dup","email":"7@x"}"# + "\n"
        let violation = try buri("import", unique, "Mail", stdin: mails)
        #expect(violation.status != 0 && violation.stderr.contains("email"), "\(violation)")
        let empty = try buri("keys", unique, "Mail")
        #expect(empty.status == 0 && empty.stdout.isEmpty, "\(empty)")
    }

    @Test func aKillWhileStoringLeavesTheDatabaseAsBeforeAndTheStageIsPurgedAtTheNextOpen() throws {
        let sandbox = try Sandbox()
        let (db, before) = try existingDatabase(sandbox)
        // 5,000 lines are five chunks (Import.stageChunk is 1,000 objects): killed after the second.
        let input = try writePeople(sandbox, "kill.jsonl", count: 5_000)
        let killed = try buriKilledAfter(chunks: 2, ["import", db, "Person", "--progress", input])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the import was not killed: \(killed)")
        #expect(
            killed.stderr.contains("reading and storing: ") && !killed.stderr.contains("publishing"), "\(killed.stderr)"
        )
        // The kill was mid-write: the next open finds the stage it had stored into, and purges it.
        let purges = try purgesAtNextOpen(db)
        #expect(
            purges.found.count == 1 && purges.found.first?.state == .staging && purges.found.first?.bucket == "Person",
            "\(purges.found)")
        #expect(purges.after.isEmpty && purges.consistent)
        let after = try buri("export", db)
        #expect(after.status == 0 && after.stdout == before, "\(after.stderr)")
        let check = try buri("check", db)
        #expect(check.status == 0, "\(check)")
        // Without the hook the same import completes.
        let whole = try buri("import", db, "Person", input)
        #expect(whole.status == 0 && whole.stdout.hasPrefix("imported 5000 objects"), "\(whole)")
    }

    /// An import creating a bucket is staged without touching the catalog: a SIGKILL while it
    /// stores leaves no bucket of that name (not even an empty one), and the next read-write
    /// open purges the stage.
    @Test func aKillWhileStoringIntoANewBucketLeavesNoBucketBehind() throws {
        let sandbox = try Sandbox()
        let (db, before) = try existingDatabase(sandbox)
        let infoBefore = try buri("info", db, "--json")
        #expect(infoBefore.status == 0, "\(infoBefore)")
        let input = try writePeople(sandbox, "kill.jsonl", count: 5_000, prefix: "n")
        // Killed after the storing pass (which follows the checking pass) has committed 3 chunks.
        let killed = try buriKilledAfter(
            chunks: 3,
            [
                "import", db, "Fresh", "--key", "objectId", "--binary-index", "locale", "--numeric-index", "age",
                "--progress", input,
            ])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the import was not killed: \(killed)")
        #expect(
            killed.stderr.contains("reading and storing: ") && !killed.stderr.contains("publishing"), "\(killed.stderr)"
        )
        // Reading commands (which do not purge) show no bucket 'Fresh'.
        // (Their buckets as before; the size on disk grew with the stage.)
        func buckets(_ json: String) throws -> NSArray? {
            (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary)?["buckets"] as? NSArray
        }
        let info = try buri("info", db, "--json")
        #expect(info.status == 0 && !info.stdout.contains("Fresh"), "\(info)")
        let bucketsAfter = try buckets(info.stdout)
        let bucketsBefore = try buckets(infoBefore.stdout)
        #expect(bucketsAfter != nil && bucketsAfter == bucketsBefore, "\(info.stdout)")
        let export = try buri("export", db)
        #expect(export.status == 0 && export.stdout == before, "\(export.stderr)")
        let missing = try buri("keys", db, "Fresh")
        expectFailure(missing, status: 6, mentioning: ["no bucket 'Fresh'"])
        // The next read-write open finds the stage, under the new bucket's name, and purges it.
        let purges = try purgesAtNextOpen(db)
        #expect(
            purges.found.count == 1 && purges.found.first?.state == .staging && purges.found.first?.bucket == "Fresh",
            "\(purges.found)")
        #expect(purges.after.isEmpty && purges.consistent)
        let check = try buri("check", db)
        #expect(check.status == 0 && !check.stdout.contains("Fresh"), "\(check)")
        // The name is free: the same import now creates the bucket.
        let again = try buri(
            "import", db, "Fresh", "--key", "objectId", "--numeric-index", "age",
            stdin: #"{"objectId":"x","age":3}"# + "\n")
        #expect(again.status == 0 && again.stdout.hasPrefix("imported 1 object "), "\(again)")
    }

    @Test func forcedProgressShowsTotalPercentRateAndETAInEveryPhase() throws {
        let sandbox = try Sandbox()
        let (db, _) = try existingDatabase(sandbox)
        let input = try writePeople(sandbox, "more.jsonl", count: 3000, prefix: "m")
        let run = try buri("import", db, "Person", "--progress", input)
        #expect(run.status == 0 && run.stdout.hasPrefix("imported 3000 objects"), "\(run)")
        let size = try Data(contentsOf: URL(fileURLWithPath: input)).count / 1024
        for shown in [
            "copying existing objects: 0 of 300 objects (0%)", "copying existing objects: 300 of 300 objects (100%)",
            "reading and storing: 0 KiB of \(size) KiB (0%)",
            "reading and storing: \(size) KiB of \(size) KiB (100%), 3000 lines, ",
            "publishing: 0 of 3300 objects (0%)", "publishing: 3300 of 3300 objects (100%), ",
            // Publishing compares the bucket with the 300 objects it was copied from, under the write lock.
            "publishing (checking the bucket is unchanged): 0 of 300 objects (0%)",
            "publishing (checking the bucket is unchanged): 300 of 300 objects (100%), ",
            "published 3300 objects in one commit",
        ] {
            #expect(run.stderr.contains(shown), "missing \(shown): \(run.stderr)")
        }
        #expect(run.stderr.components(separatedBy: "/s, ETA ").count >= 9, "\(run.stderr)")
        // A new bucket is checked first; a failure shows the stage being purged.
        let failing = try buri(
            "import", db, "Person", "--progress",
            stdin: #"{"objectId":"x","age":3}"# + "\n" + #"{"name":"no key"}"# + "\n")
        #expect(
            failing.status == 7 && failing.stderr.contains("purging the stage: 1 of 1 objects (100%)"), "\(failing)")
        #expect(failing.stderr.contains("line 2: the object has no key field 'objectId'"), "\(failing)")
        let fresh = try buri("import", sandbox.path("new.buri"), "N", "--key", "objectId", "--progress", input)
        #expect(fresh.stderr.contains("checking: \(size) KiB of \(size) KiB (100%), 3000 lines, "), "\(fresh)")
        // A new bucket has nothing to compare: publishing counts what it stages, then commits.
        for shown in [
            "publishing: 0 of 3000 objects (0%)", "publishing: 3000 of 3000 objects (100%), ",
            "published 3000 objects in one commit",
        ] {
            #expect(fresh.stderr.contains(shown), "missing \(shown): \(fresh.stderr)")
        }
        #expect(!fresh.stderr.contains("checking the bucket is unchanged"), "\(fresh.stderr)")
        // Without a terminal and without --progress: nothing but the result.
        expectSuccess(try buri("import", sandbox.path("quiet.buri"), "N", "--key", "objectId", input))
    }
}
