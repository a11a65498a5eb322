import Buri
import BuriCodec
import Foundation
import Testing
#if canImport(Glibc)
    import Glibc
#endif

/// Runs `script` with `sh` in new user and mount namespaces (so it may mount a small tmpfs
/// without privileges); `BURI` is the binary. Returns the exit status.
func inMountNamespace(_ script: String) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    process.arguments = ["-r", "-m", "sh", "-c", script]
    var environment = ProcessInfo.processInfo.environment
    environment["BURI"] = try BuriBinary.located().path
    process.environment = environment
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// The CRC32C LevelDB masks into its log record headers.
private func maskedCRC32C(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    crc ^= 0xFFFF_FFFF
    return ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
}

@Suite("buri's errors say what happened: damaged, foreign, missing, in use, disk full, read-only, key too long")
struct ErrorMessageToolTests {
    @Test func aDatabaseThatLostItsCurrentFileIsDamagedAndRepairBringsItBack() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        try FileManager.default.removeItem(atPath: db + "/CURRENT")
        let mentions = ["damaged database", "CURRENT file is missing", "buri repair \(db)"]
        expectFailure(try buri("info", db), status: 3, mentioning: mentions)
        expectFailure(try buri("get", db, "Person", "p01"), status: 3, mentioning: mentions)
        expectFailure(
            try buri("import", db, "Person", "--key", "objectId", stdin: peopleJSONLines([fixturePeople[0]])),
            status: 3, mentioning: mentions)
        #expect(!FileManager.default.fileExists(atPath: db + "/CURRENT"), "nothing may recreate CURRENT but repair")
        // The message's advice works: repair rebuilds it and every object is back.
        #expect(try buri("repair", db).status == 0)
        let keys = try buri("keys", db, "Person")
        expectSuccess(keys)
        #expect(keys.lines == fixturePeople.map(\.objectId))
    }

    @Test func aLevelDBDatabaseWithAnotherComparatorIsNotABuriDatabase() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("reverse.ldb")
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: false)
        // A version edit: comparator (tag 1), log number (2) = 0, next file (3) = 2, last sequence (4) = 0.
        let name = Array("test.ReverseComparator".utf8)
        let edit: [UInt8] = [1, UInt8(name.count)] + name + [2, 0, 3, 2, 4, 0]
        let crc = maskedCRC32C([1] + edit)
        var record: [UInt8] = (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) }
        record += [UInt8(edit.count & 0xFF), UInt8(edit.count >> 8), 1] + edit
        try Data(record).write(to: URL(fileURLWithPath: db + "/MANIFEST-000001"))
        try Data("MANIFEST-000001\n".utf8).write(to: URL(fileURLWithPath: db + "/CURRENT"))
        for command in [["info", db], ["keys", db, "Person"], ["check", db]] {
            expectFailure(
                try buri(command), status: 4,
                mentioning: ["not a Buri database", "another comparator", "'test.ReverseComparator'"])
        }
        expectFailure(
            try buri("import", db, "Person", "--key", "objectId", stdin: peopleJSONLines(fixturePeople)), status: 4,
            mentioning: ["not a Buri database", "'test.ReverseComparator'"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: db).filter {
                $0.hasSuffix(".log") || $0.hasSuffix(".ldb")
            }.isEmpty)
    }

    @Test func aMissingParentOrADanglingLinkIsNamedNotReportedAsALockFile() throws {
        let sandbox = try Sandbox()
        let input = peopleJSONLines(fixturePeople)
        let deep = sandbox.path("no-such-dir/people.buri")
        let missingParent = try buri("import", deep, "Person", "--key", "objectId", stdin: input)
        expectFailure(
            missingParent, status: 3,
            mentioning: ["parent directory '\(sandbox.path("no-such-dir"))' does not exist", "mkdir -p"])
        #expect(!missingParent.stderr.contains("LOCK"))
        #expect(!sandbox.exists("no-such-dir"))
        expectFailure(try buri("info", deep), status: 4, mentioning: ["does not exist, nor does its parent directory"])

        let link = sandbox.path("link.buri")
        let target = sandbox.path("gone.buri")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let dangling = try buri("import", link, "Person", "--key", "objectId", stdin: input)
        expectFailure(dangling, status: 3, mentioning: ["symbolic link to '\(target)', which does not exist"])
        #expect(!dangling.stderr.contains("LOCK"))
        #expect(!sandbox.exists("gone.buri"))
        expectFailure(
            try buri("keys", link, "Person"), status: 4,
            mentioning: ["'\(link)' is a symbolic link to '\(target)', which does not exist"])
        // A link to a real database works as the database.
        let real = try makeFixture(sandbox)
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        #expect(try buri("keys", link, "Person").lines.count == fixturePeople.count)
    }

    @Test func inUseNamesTheHoldersPIDAndWaitWaitsForTheLock() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let holder = try BuriDatabase(path: path)
        // A command that writes needs the database itself.
        let busy = try buri("delete", path, "Person", "p01")
        expectFailure(busy, status: 5, mentioning: ["in use by process \(getpid())", "--wait SECONDS"])
        // A reading command reads a snapshot of the files: no lock, no waiting.
        let read = try buri("keys", path, "Person")
        expectSuccess(read)
        #expect(read.lines == fixturePeople.map(\.objectId))
        let started = Date()
        // Out of time, the error says it waited, and how long, rather than advising --wait.
        let gaveUp = try buri("delete", path, "Person", "p01", "--wait", "0.3")
        #expect(gaveUp.status == 5, "\(gaveUp)")
        #expect(
            gaveUp.stderr.hasPrefix(
                "buri: note: the database at '\(path)' is in use by process \(getpid()); waiting up to 0.3 seconds for it to be closed"
            ), "\(gaveUp)")
        #expect(
            gaveUp.stderr.contains(
                "buri: the database at '\(path)' is still in use by process \(getpid()) after waiting 0.3 seconds (--wait 0.3); nothing was done"
            ), "\(gaveUp)")
        #expect(!gaveUp.stderr.contains("give --wait SECONDS"), "\(gaveUp)")
        #expect(Date().timeIntervalSince(started) >= 0.3, "--wait 0.3 must wait before giving up")
        // The holder closes while buri waits: buri then succeeds. It is closed once buri has said
        // it waits (an event, not a delay), so that the run proves the wait on any machine.
        let process = Process()
        process.executableURL = try BuriBinary.located()
        process.arguments = ["delete", path, "Person", "p01", "--wait", "60"]
        let errors = Pipe()
        let output = Pipe()
        process.standardError = errors
        process.standardOutput = output
        try process.run()
        var said = ""
        while !said.contains("\n") {
            let data = errors.fileHandleForReading.availableData
            if data.isEmpty { break }
            said += String(decoding: data, as: UTF8.self)
        }
        #expect(
            said
                == "buri: note: the database at '\(path)' is in use by process \(getpid()); waiting up to 60 seconds for it to be closed (--wait; Ctrl-C gives up)\n",
            "\(said)")
        holder.close()
        _ = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).isEmpty)
        #expect(try buri("keys", path, "Person").lines == fixturePeople.map(\.objectId).filter { $0 != "p01" })
        expectFailure(
            try buri("keys", path, "Person", "--wait=-1"), status: 2,
            mentioning: ["--wait takes the most seconds", "such as --wait 30"])
    }

    @Test func twoImportsRacingToCreateOneDatabase_theLoserGetsInUse() throws {
        let people = (0..<4000).map { i in
            Person(objectId: String(format: "r%05d", i), name: "racer", locale: "EN", age: i % 90)
        }
        let input = peopleJSONLines(people)
        // Two imports started together: whichever wins, and whether they overlap at all (which
        // depends on the machine), the database holds every object once and a loser says in use.
        for round in 0..<3 {
            let sandbox = try Sandbox()
            let path = sandbox.path("race.buri")
            let results = RunResults()
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                let run = try? buri("import", path, "Race", "--key", "objectId", "--numeric-index", "age", stdin: input)
                results.append(run)
            }
            let runs = try results.all().map { try #require($0) }
            for run in runs where run.status != 0 {
                expectFailure(run, status: 5, mentioning: ["race.buri"])
            }
            let statuses = runs.map(\.status).sorted()
            #expect(statuses == [0, 5] || statuses == [0, 0], "round \(round): \(runs)")
            // Whoever won, the database holds every object exactly once.
            let count = try buri("query", path, "Race", "age", "--from", "0", "--to", "100")
            #expect(count.lines.count == people.count, "round \(round)")
        }
        // The losing side, at a known point rather than by chance: a database being created (its
        // directory holds only LevelDB's LOCK, held by the creating process — here this one).
        let sandbox = try Sandbox()
        let path = sandbox.path("race.buri")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let fd = open(path + "/LOCK", O_RDWR | O_CREAT, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        try #require(fcntl(fd, F_SETLK, &lock) == 0)
        let loser = try buri("import", path, "Race", "--key", "objectId", "--numeric-index", "age", stdin: input)
        expectFailure(loser, status: 5, mentioning: ["race.buri", "in use by process \(getpid())"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: path) == ["LOCK"],
            "the loser wrote into the database being created")
    }

    @Test func aFullDiskSaysTheDataIsIntactAndFreeingSpaceFixesIt() throws {
        let sandbox = try Sandbox()
        let small = try sandbox.write("small.jsonl", peopleJSONLines(fixturePeople))
        let big = try sandbox.write(
            "big.jsonl",
            peopleJSONLines(
                (0..<20000).map { i in
                    Person(
                        objectId: String(format: "big%05d", i), name: String(repeating: "x", count: 200), locale: "NL",
                        age: i % 90)
                }))
        let mount = sandbox.path("small-disk")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        let out = sandbox.path("out")
        let status = try inMountNamespace(
            """
            set -u
            mount -t tmpfs -o size=1m tmpfs '\(mount)' || exit 90
            "$BURI" import '\(mount)/db.buri' Person --key objectId --binary-index locale '\(small)' >/dev/null || exit 91
            dd if=/dev/zero of='\(mount)/filler' bs=4096 2>/dev/null
            "$BURI" import '\(mount)/db.buri' Person --key objectId '\(big)' >'\(out).full.stdout' 2>'\(out).full.stderr'
            echo $? >'\(out).full.status'
            rm '\(mount)/filler'
            "$BURI" check '\(mount)/db.buri' >'\(out).check' 2>&1 || exit 92
            "$BURI" keys '\(mount)/db.buri' Person >'\(out).keys' 2>&1 || exit 93
            """)
        #expect(status == 0, "namespace script failed with \(status): \((try? sandbox.read("out.check")) ?? "")")
        let full = ToolRun(
            status: Int32(try sandbox.read("out.full.status").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1,
            stdout: try sandbox.read("out.full.stdout"), stderr: try sandbox.read("out.full.stderr"))
        expectFailure(full, status: 3, mentioning: ["is full", "data stored before it is intact", "free space"])
        // The data stored before is all there, and nothing of the failed import is.
        #expect(try sandbox.read("out.keys").split(separator: "\n").map(String.init) == fixturePeople.map(\.objectId))
        // No problems; the stage of the failed import, if the full disk kept its purge from
        // finishing, is only noted (the next open that may write purges it).
        let check = try sandbox.read("out.check").split(separator: "\n")
        #expect(check.last?.hasPrefix("ok: ") == true, "\(check)")
        #expect(
            check.dropLast().allSatisfy { $0.hasPrefix("note: bucket 'Person' has a retired generation") }, "\(check)")
    }

    @Test func writingOutputToAFullDiskSaysTheDatabaseIsUnaffected() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let process = Process()
        process.executableURL = try BuriBinary.located()
        process.arguments = ["export", path]
        let errPath = sandbox.path("stderr")
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.standardOutput = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        try process.run()
        process.waitUntilExit()
        let run = ToolRun(status: process.terminationStatus, stdout: "", stderr: try sandbox.read("stderr"))
        expectFailure(
            run, status: 3,
            mentioning: ["standard output", "No space left on device", "disk is full", "database is not affected"])
    }

    @Test func aDatabaseOnAReadOnlyFileSystemCanBeInspected() throws {
        let sandbox = try Sandbox()
        let input = try sandbox.write("people.jsonl", peopleJSONLines(fixturePeople))
        let mount = sandbox.path("ro")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        let out = sandbox.path("out")
        let temporary = sandbox.path("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        let status = try inMountNamespace(
            """
            export TMPDIR='\(temporary)'
            mount -t tmpfs -o size=4m tmpfs '\(mount)' || exit 90
            "$BURI" import '\(mount)/db.buri' Person --key objectId --numeric-index age '\(input)' >/dev/null || exit 91
            mount -o remount,ro '\(mount)' || exit 92
            touch '\(mount)/probe' 2>/dev/null && exit 93
            "$BURI" get '\(mount)/db.buri' Person p07 >'\(out).get' 2>'\(out).get.err'; echo $? >'\(out).get.status'
            "$BURI" query '\(mount)/db.buri' Person age --equals 27 >'\(out).query' 2>/dev/null; echo $? >'\(out).query.status'
            "$BURI" check '\(mount)/db.buri' --repair >/dev/null 2>'\(out).repair.err'; echo $? >'\(out).repair.status'
            ls -A '\(mount)/db.buri' >'\(out).files'
            """)
        #expect(status == 0, "namespace script failed with \(status)")
        func read(_ name: String) throws -> String { try sandbox.read(name) }
        let getError = try read("out.get.err")
        #expect(try read("out.get.status") == "0\n", "\(getError)")
        let shown = try CBORValue(json: try read("out.get"))
        #expect(shown["name"] == "Marie" && shown["objectId"] == "p07", "\(shown)")
        // Reading never writes into the database directory: nothing to say about the file system.
        #expect(getError.isEmpty, "\(getError)")
        #expect(try read("out.query.status") == "0\n")
        #expect(
            try read("out.query").split(separator: "\n").map(String.init)
                == fixturePeople.filter { $0.age == 27 }.map(\.objectId))
        // A command that writes says exactly why it cannot.
        #expect(try read("out.repair.status") == "3\n")
        #expect(try read("out.repair.err").contains("read-only file system, and this command changes the database"))
        // The private snapshots are gone.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: temporary)
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func anOverlongKeyNamesTheLimitInsteadOfEchoingTheKey() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let key = String(repeating: "k", count: 5000)
        let run = try buri("get", path, "Person", key)
        expectFailure(run, status: 2, mentioning: ["5000 bytes", "limit of 4096 bytes"])
        #expect(run.stderr.count < 400, "the key must not be echoed whole: \(run.stderr.count) characters")
        // Exactly at the limit is a legal key that simply is not there.
        expectFailure(
            try buri("get", path, "Person", String(repeating: "é", count: 2048)), status: 6,
            mentioning: ["has no object"])
    }
}

/// Tool runs collected from several threads.
final class RunResults: @unchecked Sendable {
    private let lock = NSLock()
    private var runs: [ToolRun?] = []

    func append(_ run: ToolRun?) { lock.withLock { runs.append(run) } }
    func all() -> [ToolRun?] { lock.withLock { runs } }
}
