import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Synchronization
import Testing

/// `buri` pointed at an etcd location instead of a directory.
struct EtcdToolTests {
    @Test func importQueryCheckAndExportWorkOnAnEtcdLocation() throws {
        let location = try EtcdTestCluster.location("tool")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let input = try sandbox.write(
            "people.jsonl",
            """
            {"id":"a","name":"Ann","age":3}
            {"id":"b","name":"Zoë","age":5}
            {"id":"c","name":"Bob","age":9}

            """)
        expectSuccess(
            try buri(
                "import", location, "People", input, "--key", "id", "--binary-index", "name", "--numeric-index", "age"))
        let info = try buri("info", location)
        expectSuccess(info)
        #expect(info.stdout.contains("bucket 'People' (key field 'id'): 3 objects"), "\(info)")
        #expect(try buri("query", location, "People", "age", "--from", "4", "--to", "10").stdout == "b\nc\n")
        expectSuccess(try buri("check", location))
        let export = try buri("export", location)
        expectSuccess(export)
        // The header, the bucket's schema line, then its three objects.
        #expect(export.stdout.split(separator: "\n").count == 5, "\(export)")
        #expect(export.stdout.split(separator: "\n").filter { $0.contains("\"key\"") }.count == 3, "\(export)")
    }

    @Test func aKilledImportsStageIsLeftWhileItsLeaseHoldsAndPurgedByTheNextWritingCommandAfter() throws {
        let location = try EtcdTestCluster.location("toolkill") + "&lease-seconds=2"
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        expectSuccess(
            try buri("import", location, "Small", try sandbox.write("s.jsonl", "{\"id\":\"a\"}\n"), "--key", "id"))
        let lines = (0..<2500).map { "{\"id\":\"k\($0)\",\"n\":\($0)}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("big.jsonl", lines)
        // Killed after 2 chunks (2,000 objects) committed into its stage: it never publishes.
        let killed = try buriKilledAfter(chunks: 2, ["import", location, "Big", input, "--key", "id"])
        #expect(killed.reason == .uncaughtSignal && killed.status == 9, "\(killed)")
        let engine = try EtcdEngine(location: location)
        defer { engine.close() }
        let leasePrefix: [UInt8] = [0] + Array("lease".utf8)
        #expect(try scanKeys(engine.snapshot()).filter { $0.first == 0x02 }.count == 2001)
        // Its lease ends 2 s after the kill (no renewal): etcd deletes the lease key.
        let deadline = Date().addingTimeInterval(60)
        while try scanKeys(engine.snapshot()).contains(where: { $0.starts(with: leasePrefix) }) {
            #expect(Date() < deadline, "the killed import's lease never ended")
            if Date() >= deadline { return }
            usleep(100_000)
        }
        // A reading command says what the stage is, and leaves it.
        let check = try buri("check", location)
        expectSuccess(check)
        #expect(check.stdout.contains("staged by a client that ended without publishing it"), "\(check)")
        let json = try buri("check", location, "--json")
        #expect(json.stdout.contains("\"ownerAlive\": false"), "\(json)")
        // The next command that writes purges it: nothing of Big is left, no pending purge.
        expectSuccess(
            try buri("import", location, "Other", try sandbox.write("o.jsonl", "{\"id\":\"b\"}\n"), "--key", "id"))
        let after = try buri("check", location, "--json")
        expectSuccess(after)
        #expect(after.stdout.contains("\"pendingPurges\": []"), "\(after)")
        #expect(try scanKeys(engine.snapshot()).filter { $0.first == 0x02 || $0.first == 0x04 }.count == 2)
        #expect(try buri("info", location).stdout.contains("Big") == false)
    }

    @Test func aStagedImportFitsItsCommitsToTheTransactionLimitAndStaysAtomic() throws {
        let location = try EtcdTestCluster.location("toolbig")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let lines = (0..<3000).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\"}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("big.jsonl", lines)
        // 3000 objects with one index: 6000 writes, over the cluster's 4096 in one commit; the
        // staged import commits them in chunks and publishes them atomically.
        expectSuccess(try buri("import", location, "Big", input, "--key", "id", "--binary-index", "name"))
        #expect(try buri("info", location).stdout.contains("3000 objects"))
        // Six writes per object: a staged chunk of 1000 objects (6000 writes) is over the limit on
        // its own, and is stored in smaller commits — the stage is invisible until published.
        let tagged =
            (0..<1000).map { "{\"id\":\"t\($0)\",\"tags\":[\"a\($0)\",\"b\($0)\",\"c\($0)\",\"d\($0)\",\"e\($0)\"]}" }
            .joined(separator: "\n") + "\n"
        let taggedInput = try sandbox.write("tagged.jsonl", tagged)
        expectSuccess(try buri("import", location, "Tagged", taggedInput, "--key", "id", "--binary-index", "tags"))
        let info = try buri("info", location)
        #expect(info.stdout.contains("bucket 'Tagged' (key field 'id'): 1000 objects"), "\(info)")
        #expect(info.stdout.contains("index 'tags' (binary; multi-valued; field tags): 5000 entries"), "\(info)")
        expectSuccess(try buri("check", location))
        // Still atomic when a chunk is split: a bad last line, after 600 objects stored into the
        // stage in commits of a few objects each (64 operations at most), leaves the bucket as it was.
        let bad =
            (0..<600).map { "{\"id\":\"k\($0)\",\"name\":\"changed\"}" }.joined(separator: "\n")
            + "\n{\"id\":\"k9\",\"name\":\n"
        let refused = try buri(
            "import", Self.withLimits(location, maxTxnOps: 64), "Big", try sandbox.write("bad.jsonl", bad))
        expectFailure(refused, status: 7, mentioning: ["line 601", "nothing was imported"])
        #expect(try buri("get", location, "Big", "k5").stdout.contains("\"name\": \"n5\""))
        #expect(try buri("query", location, "Big", "name", "--equals", "changed").stdout == "")
        #expect(try buri("buckets", location).stdout == "Big\nTagged\n")
    }

    /// `location` with other limits in its query.
    static func withLimits(_ location: String, maxTxnOps: Int) -> String {
        let base = location.split(separator: "?", maxSplits: 1).first.map(String.init) ?? location
        return "\(base)?max-txn-ops=\(maxTxnOps)&max-request-bytes=8388608"
    }

    /// Issue 22 item 15: a 1,000-object bucket on a cluster with etcd's default limit of 128
    /// operations per transaction; importing one more object must not need a commit that grows with
    /// the bucket (the copy into the stage, the check that the bucket is unchanged, the publication).
    @Test func importingOneObjectIntoALargeBucketFitsEtcdsDefaultTransactionLimit() throws {
        let location = Self.withLimits(try EtcdTestCluster.location("toolone"), maxTxnOps: 128)
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let objects =
            (0..<1000).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\",\"age\":\($0)}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("objects.jsonl", objects)
        // Even the creation (3000 writes) needs no --chunk-size.
        expectSuccess(
            try buri("import", location, "B", input, "--key", "id", "--binary-index", "name", "--numeric-index", "age"))
        let one = try sandbox.write("one.jsonl", "{\"id\":\"new\",\"name\":\"x\",\"age\":1}\n")
        let run = try buri("import", location, "B", one)
        expectSuccess(run)
        #expect(run.stdout.contains("imported 1 object into bucket 'B'"), "\(run)")
        let info = try buri("info", location)
        #expect(info.stdout.contains("bucket 'B' (key field 'id'): 1001 objects"), "\(info)")
        #expect(info.stdout.contains("index 'age' (numeric; field age): 1001 entries"), "\(info)")
        let check = try buri("check", location)
        #expect(check.status == 0 && check.stdout.contains("1001 objects, 2002 index entries"), "\(check)")
        #expect(try buri("get", location, "B", "new").stdout.contains("\"name\": \"x\""))
    }

    /// Issue 22 item 15: `restore` into an etcd location (it failed with ".../LOCK: No such file").
    @Test func restoreIntoAnEmptyEtcdLocationRecreatesTheDumpAndOneTooLargeToPublishAtomicallyIsRefusedLeavingNothing()
        throws
    {
        let sandbox = try Sandbox()
        let fixture = try makeFixture(sandbox)
        let more =
            (0..<700).map { "{\"objectId\":\"m\($0)\",\"name\":\"M\",\"locale\":\"DE\",\"age\":\($0 % 90)}" }.joined(
                separator: "\n") + "\n"
        expectSuccess(try buri("import", fixture, "Person", try sandbox.write("more.jsonl", more)))
        let dumpRun = try buri("export", fixture, "-o", sandbox.path("dump.jsonl"))
        expectSuccess(dumpRun)
        let dump = try sandbox.read("dump.jsonl")

        // Limits far below a chunk of the stage: the stage is written in many small commits.
        let location = Self.withLimits(try EtcdTestCluster.location("toolrestore"), maxTxnOps: 100)
        defer { try? EtcdEngine(location: location).deleteAll() }
        let restored = try buri("restore", location, sandbox.path("dump.jsonl"))
        expectSuccess(restored)
        #expect(restored.stdout.contains("restored 2 buckets and 744 objects"), "\(restored)")
        let again = try buri("export", location)
        expectSuccess(again)
        #expect(again.stdout == dump, "export → restore → export gives the same bytes")
        expectSuccess(try buri("check", location))
        #expect(try buri("query", location, "notes", "tags", "--equals", "red").stdout == "n1\nn4\n")
        // A database with buckets is not restored into.
        let full = try buri("restore", location, sandbox.path("dump.jsonl"))
        expectFailure(full, status: 2, mentioning: ["already a database with 2 buckets"])

        // Publishing three buckets is six writes (a marker and a catalog entry each), over a limit
        // of 4 that each staged object (3 writes) fits: refused with the reason, nothing left.
        let small = sandbox.path("small.buri")
        for bucket in ["A", "B", "C"] {
            expectSuccess(
                try buri(
                    "import", small, bucket, try sandbox.write("\(bucket).jsonl", "{\"id\":\"a\",\"n\":1}\n"), "--key",
                    "id"))
        }
        expectSuccess(try buri("export", small, "-o", sandbox.path("small.jsonl")))
        let tiny = Self.withLimits(try EtcdTestCluster.location("toolrestoretiny"), maxTxnOps: 4)
        defer { try? EtcdEngine(location: tiny).deleteAll() }
        let refused = try buri("restore", tiny, sandbox.path("small.jsonl"))
        expectFailure(
            refused, status: 3, mentioning: ["in one commit", "3 buckets", "max-txn-ops", "nothing was restored"])
        let after = try buri("info", tiny)
        expectFailure(after, status: 4, mentioning: ["holds no Buri database", "the cluster is available"])
    }

    /// Issue 22 item 15: a malformed location is a usage error that shows the accepted form, for
    /// every kind of command (reading, writing, creating, repairing), before anything is tried.
    @Test func aMalformedEtcdLocationIsAUsageErrorShowingTheAcceptedForm() throws {
        let sandbox = try Sandbox()
        let input = try sandbox.write("in.jsonl", "{\"id\":\"a\"}\n")
        let malformed = [
            "http://127.0.0.1:2379/db",  // another scheme
            "ETCD://127.0.0.1:2379/db",  // the scheme is lower case
            "etcd:/127.0.0.1:2379/db",  // one slash
            "etcd:127.0.0.1:2379/db",
            "etcd:///db",  // no host
            "etcd://:2379/db",
            "etcd://127.0.0.1:2379,,127.0.0.1:2381/db",
            "etcd://ho st:2379/db",
            "etcd://127.0.0.1:0/db",  // bad ports
            "etcd://127.0.0.1:65536/db",
            "etcd://127.0.0.1:+5/db",
            "etcd://127.0.0.1:x/db",
            "etcd://127.0.0.1:/db",
            "etcd://::1:2379/db",  // IPv6 without brackets
            "etcd://[::1/db",
            "etcd://127.0.0.1:2379",  // no database name
            "etcd://127.0.0.1:2379/",
            "etcd://127.0.0.1:2379/db?max-txn-ops=0",  // bad query parameters
            "etcd://127.0.0.1:2379/db?max-txn-ops=-1",
            "etcd://127.0.0.1:2379/db?max-txn-ops=12x",
            "etcd://127.0.0.1:2379/db?max-txn-ops",
            "etcd://127.0.0.1:2379/db?max-tx-ops=4096",
            "etcd://127.0.0.1:2379/db?max-txn-ops=1&max-txn-ops=2",
            "etcd://127.0.0.1:2379/db?lease-seconds=0",
            "etcd://127.0.0.1:2379/db%zz",
        ]
        let runs = try runConcurrently(
            malformed.flatMap { location in
                [
                    ["info", location], ["import", location, "B", input, "--key", "id"], ["restore", location, input],
                    ["repair", location], ["delete", location, "B", "k"],
                ]
            })
        for run in runs {
            expectFailure(
                run.run, status: 2,
                mentioning: ["etcd://HOST:PORT[,HOST:PORT…]/NAME[?max-txn-ops=N&max-request-bytes=M&lease-seconds=S]"])
            #expect(run.seconds < 15, "\(run.arguments): \(run.seconds) s")
        }
        // Well-formed variants parse (and then find nothing listening: exit 3, not 2).
        for location in [
            "etcd://127.0.0.1:1/db", "etcd://[::1]:1/db?max-txn-ops=4096",
            "etcd://localhost:1,127.0.0.1:1/a%2Fb?max-request-bytes=100",
        ] {
            let run = try buri("buckets", location)
            expectFailure(run, status: 3, mentioning: ["unreachable"])
        }
    }

    /// Every subcommand `buri --help` lists, each with an argument list that would work on a healthy
    /// database at `location` holding bucket "P" (objects k0…k9, indexes name and age). `restore`
    /// goes to `fresh`, a location with no database.
    static func everyCommand(_ location: String, fresh: String, sandbox: Sandbox) throws -> [[String]] {
        let input = try sandbox.write("more.jsonl", "{\"id\":\"k20\",\"name\":\"n20\",\"age\":20}\n")
        let dump = try sandbox.write("dump.jsonl", "[\"buri-export\",3]\n")
        let newKey = try sandbox.write("new.key", String(repeating: "k", count: 32))
        let commands = [
            ["info", location], ["info", location, "--json"], ["buckets", location], ["keys", location, "P"],
            ["get", location, "P", "k1"], ["query", location, "P", "age", "--from", "1", "--to", "3"],
            ["export", location], ["export", location, "P", "-o", sandbox.path("out.jsonl")],
            ["import", location, "P", input],
            ["import", location, "Q", input, "--key", "id", "--chunk-size", "1", "--text-index", "name"],
            ["search", location, "Q", "name", "N20"],
            ["restore", fresh, dump], ["put", location, "P", "{\"id\":\"k30\",\"name\":\"n30\",\"age\":30}"],
            ["delete", location, "P", "k2"], ["migrate", location, "P"], ["set-value", location, "theme", "\"dark\""],
            ["values", location], ["get-value", location, "theme"], ["drop", location, "P", "--force"],
            ["check", location],
            ["check", location, "--repair"], ["repair", location], ["stats", location], ["stats", location, "--json"],
            ["compact", location], ["rekey", location, "--new-key-file", newKey],
            // Last: from here on the database needs the key.
            ["encrypt", location, "--key-file", try writeRandomKey(sandbox, "etcd.key"), "--plaintext-index", "age"],
        ]
        // Every subcommand of the tool is here: a new one cannot be left out unnoticed.
        let help = try buri("--help")
        let listed =
            help.stdout.components(separatedBy: "SUBCOMMANDS:").last?.split(separator: "\n")
            .compactMap { line -> String? in
                guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
                guard let word = line.split(separator: " ").first,
                    word.allSatisfy({ ("a"..."z").contains($0) || $0 == "-" })
                else {
                    return nil
                }
                return String(word)
            } ?? []
        #expect(listed.count == 23 && listed.contains("compact") && listed.contains("get-value"), "\(listed) \(help)")
        // `key` (buri key new FILE) writes a key file and opens no database.
        for name in listed where name != "help" && name != "key" {
            #expect(commands.contains { $0.first == name }, "subcommand '\(name)' is not exercised on etcd")
        }
        return commands
    }

    /// Issue 22 "Make these classes impossible to miss": every command under an etcd location whose
    /// cluster lost its quorum (two of three members stopped), then with nothing listening at all,
    /// fails within seconds with exit 3 and says which — never "holds no Buri database" (exit 4)
    /// after 30 s, nor an import's "records none" (exit 7).
    @Test func everyCommandFailsFastWithExit3SayingWhetherTheClusterHasNoQuorumOrIsUnreachable() throws {
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let sandbox = try Sandbox()
        let location = cluster.location("dead")
        let objects =
            (0..<10).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\",\"age\":\($0)}" }.joined(separator: "\n") + "\n"
        expectSuccess(
            try buri(
                "import", location, "P", try sandbox.write("p.jsonl", objects), "--key", "id", "--binary-index", "name",
                "--numeric-index", "age"))
        let commands = try Self.everyCommand(location, fresh: cluster.location("fresh"), sandbox: sandbox)

        // Quorum lost: one member of three left (it answers, but has or soon has no leader).
        let survivor = cluster.leader() ?? 0
        for member in 0..<3 where member != survivor { cluster.kill(member) }
        for run in try runConcurrently(commands) {
            expectFailure(
                run.run, status: 3,
                mentioning: ["no quorum", "nothing is listening at", "answers", "nothing was read or written"])
            #expect(
                !run.run.stderr.contains("unreachable") && !run.run.stderr.contains("holds no Buri database"),
                "\(run.run)")
            #expect(run.seconds < 15, "\(run.arguments.joined(separator: " ")) took \(run.seconds) s")
        }

        // Nothing listening at any member.
        cluster.kill(survivor)
        for run in try runConcurrently(commands) {
            expectFailure(
                run.run, status: 3,
                mentioning: [
                    "unreachable", "nothing is listening at \(cluster.endpoints[0]) (connection refused)",
                    "nothing was read or written",
                ])
            #expect(
                !run.run.stderr.contains("no quorum") && !run.run.stderr.contains("holds no Buri database"),
                "\(run.run)")
            #expect(run.seconds < 15, "\(run.arguments.joined(separator: " ")) took \(run.seconds) s")
        }
        #expect(!sandbox.exists("out.jsonl"))
    }

    /// Issue 22 item 15: every command on a healthy etcd location does what it says there, or
    /// refuses clearly — `stats`, `compact` and `repair` printed LevelDB nonsense with exit 0.
    /// (A cluster of its own: `compact` compacts the whole cluster's history.)
    @Test func everyCommandOnAnEtcdLocationDoesSomethingMeaningfulOrRefusesClearly() throws {
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let sandbox = try Sandbox()
        let location = cluster.location("live")
        let objects =
            (0..<10).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\",\"age\":\($0)}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("p.jsonl", objects)
        expectSuccess(
            try buri("import", location, "P", input, "--key", "id", "--binary-index", "name", "--numeric-index", "age"))
        // Importing again into the bucket retires its first generation (left for a purge).
        expectSuccess(try buri("import", location, "P", input))
        let commands = try Self.everyCommand(location, fresh: cluster.location("fresh"), sandbox: sandbox)
        var seen = Set<String>()
        for arguments in commands {
            let run = try buri(arguments)
            let name =
                arguments[0]
                + (arguments.contains("--json") ? " --json" : arguments.contains("--repair") ? " --repair" : "")
            seen.insert(arguments[0])
            switch name {
            case "repair":
                expectFailure(
                    run, status: 2, mentioning: ["LevelDB database directory", "etcd cluster", "buri check --repair"])
            case "restore":
                expectSuccess(run)
                #expect(run.stdout.contains("restored 0 buckets and 0 objects"), "\(run)")
            case "stats":
                expectSuccess(run)
                #expect(run.stdout.contains("engine:     etcd") && run.stdout.contains("database:   live"), "\(run)")
                #expect(!run.stdout.contains("leveldb") && !run.stdout.contains("?"), "\(run)")
                for endpoint in cluster.endpoints { #expect(run.stdout.contains("  \(endpoint): member "), "\(run)") }
                #expect(
                    run.stdout.contains(", leader, etcd 3.") && run.stdout.contains(", follower, etcd 3."), "\(run)")
                let keys = run.stdout.split(separator: "\n").first { $0.hasPrefix("keys:") }
                #expect(keys.map { Int($0.split(separator: " ")[1]) ?? 0 } ?? 0 > 0, "\(run)")
            case "stats --json":
                expectSuccess(run)
                let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
                #expect(json?["engine"] as? String == "etcd" && json?["database"] as? String == "live", "\(run)")
                #expect(((json?["keys"] as? NSNumber)?.intValue ?? 0) > 0, "\(run)")
                let members = json?["members"] as? [[String: Any]] ?? []
                #expect(members.count == 3 && members.filter { $0["isLeader"] as? Bool == true }.count == 1, "\(run)")
                #expect(
                    members.allSatisfy { (($0["dbSize"] as? NSNumber)?.intValue ?? 0) > 0 && $0["version"] is String },
                    "\(run)")
            case "compact":
                expectSuccess(run)
                // (How many generations are left to purge depends on how far the background purges
                // of the commands before got; none is left after.)
                #expect(
                    run.stdout.contains(" retired generation")
                        && run.stdout.contains("compacted the cluster's history up to revision"), "\(run)")
                // The history before the compaction is gone: a read at revision 2 is refused.
                #expect(throws: StorageError.self) {
                    _ = try EtcdClient(endpoints: cluster.endpoints, retryWindow: 2).range(
                        from: [0], to: nil, revision: 2)
                }
                let check = try buri("check", location)
                #expect(check.status == 0 && !check.stdout.contains("retired generation"), "\(check)")
            case "rekey":
                // The database is not encrypted: no key to change, and nothing written.
                expectFailure(run, status: 9, mentioning: ["is not encrypted, so it has no key to change"])
            case "info --json":
                expectSuccess(run)
                #expect(run.stdout.contains("\"engine\": \"etcd\""), "\(run)")
            case "info":
                expectSuccess(run)
                #expect(run.stdout.contains("engine:          etcd") && !run.stdout.contains("LevelDB"), "\(run)")
            case "drop":
                expectSuccess(run)
                #expect(try buri("buckets", location).stdout == "Q\n")
            case "search":
                expectSuccess(run)
                #expect(run.stdout == "k20\n", "\(run)")
            case "values":
                expectSuccess(run)
                #expect(run.stdout == "theme\n", "\(run)")
            case "get-value":
                expectSuccess(run)
                #expect(run.stdout == "\"dark\"\n", "\(run)")
            case "migrate":
                // Records of the bucket's schema version: nothing to upgrade.
                expectSuccess(run)
                #expect(run.stdout == "upgraded 0 records of bucket 'P' to schema version 0\n", "\(run)")
            default:
                expectSuccess(run)
            }
        }
        #expect(seen.count >= 15)
    }
}

/// One `buri` run with how long it took (measured, not slept).
struct TimedRun: Sendable {
    var arguments: [String]
    var run: ToolRun
    var seconds: Double
}

/// Runs each argument list as `buri …`, up to `width` at a time (each on a thread of its own, not
/// limited to the number of cores: the runs mostly wait), and returns the runs in order.
func runConcurrently(_ commands: [[String]], width: Int = 32) throws -> [TimedRun] {
    let results = Mutex<[Int: Result<TimedRun, any Error>]>([:])
    let slots = DispatchSemaphore(value: width)
    let group = DispatchGroup()
    for (index, arguments) in commands.enumerated() {
        slots.wait()
        group.enter()
        let thread = Thread {
            let start = DispatchTime.now().uptimeNanoseconds
            let outcome = Result { try buri(arguments) }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            results.withLock { $0[index] = outcome.map { TimedRun(arguments: arguments, run: $0, seconds: seconds) } }
            slots.signal()
            group.leave()
        }
        thread.start()
    }
    group.wait()
    let all = results.withLock { $0 }
    return try commands.indices.map { index in
        guard let result = all[index] else { throw CocoaError(.featureUnsupported) }
        return try result.get()
    }
}
