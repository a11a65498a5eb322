import BuriStorage
import Foundation
import Testing
@testable import Buri

/// The object type of the BuriStress child (Sources/BuriStress/main.swift), field for field.
struct StressItem: BuriSupport, Equatable, Sendable {
    var id: String
    var name: String
    var age: Int
    var tags: [String]
    var score: Double
    var writer: String
    var note: String

    static let buri = BuriSchema<StressItem>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
        ],
        bucket: "stress"
    )
}

/// A bucket the deleteAll kill test keeps beside the one it clears.
struct PurgeKept: BuriSupport, Equatable {
    var id: String
    var age: Int
    static let buri = BuriSchema<PurgeKept>(key: \.id, indexes: [.numeric("age", \.age)], bucket: "kept")
}

/// The BuriStress executable, built next to the test bundle (`swift build --build-tests` builds it:
/// it is a target of this package). BURI_STRESS_BINARY overrides the location.
func stressBinary() throws -> URL {
    let environment = ProcessInfo.processInfo.environment
    if let override = environment["BURI_STRESS_BINARY"] { return URL(fileURLWithPath: override) }
    var directories: [URL] = []
    // Linux: the test bundle is an executable in the build products directory.
    directories.append(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent())
    if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
    // macOS: <products>/BuriPackageTests.xctest is a bundle inside the products directory.
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(bundle.bundleURL.deletingLastPathComponent())
    }
    for directory in directories {
        let candidate = directory.appendingPathComponent("BuriStress")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    throw StressError(
        """
        the BuriStress executable is not next to the test bundle (looked in \(directories.map(\.path).joined(separator: ", "))); \
        build it with `swift build --build-tests` or set BURI_STRESS_BINARY
        """)
}

struct StressError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the child reported: the writes it completed, and the one it had begun when it was killed.
struct StressLog {
    enum Write: Equatable {
        case store([StressItem])
        case delete([String])
    }
    var completed: [Write] = []
    var inFlight: Write?
    var ready = false
    var lines = 0

    init(text: String) throws {
        let decoder = JSONDecoder()
        var begun: (seq: Substring, write: Write)?
        // A SIGKILL can cut the last line short: only lines ending in a newline count.
        var complete = text.split(separator: "\n", omittingEmptySubsequences: false)
        complete.removeLast()
        for line in complete {
            lines += 1
            if line.hasPrefix("ready") { ready = true; continue }
            let parts = line.split(separator: " ", maxSplits: 3)
            guard parts.count == 4 else { throw StressError("unreadable line: \(line)") }
            let json = Data(parts[3].utf8)
            let write: Write
            switch parts[2] {
            case "store": write = .store([try decoder.decode(StressItem.self, from: json)])
            case "storemany": write = .store(try decoder.decode([StressItem].self, from: json))
            case "delete": write = .delete(try decoder.decode([String].self, from: json))
            default: throw StressError("unknown operation in line: \(line)")
            }
            switch parts[0] {
            case "begin":
                if let begun { throw StressError("write \(begun.seq) began but never completed before \(line)") }
                begun = (parts[1], write)
            case "ok":
                guard let started = begun, started.seq == parts[1], started.write == write else {
                    throw StressError("completion without a matching begin: \(line)")
                }
                completed.append(write)
                begun = nil
            default:
                throw StressError("unreadable line: \(line)")
            }
        }
        inFlight = begun?.write
    }
}

extension [String: StressItem] {
    func applying(_ write: StressLog.Write) -> [String: StressItem] {
        var copy = self
        switch write {
        case .store(let items): for item in items { copy[item.id] = item }
        case .delete(let keys): for key in keys { copy[key] = nil }
        }
        return copy
    }
}

/// The BuriStress transfer mode's types, field for field.
struct TransferAccount: BuriSupport, Equatable, Sendable {
    var id: String
    var balance: Int
    static let buri = BuriSchema<TransferAccount>(
        key: \.id, indexes: [.numeric("balance", \.balance)], bucket: "accounts")
}

struct TransferRecord: BuriSupport, Equatable, Sendable {
    var id: String
    var from: String
    var to: String
    var amount: Int
    static let buri = BuriSchema<TransferRecord>(
        key: \.id, indexes: [.binary("from", \.from), .binary("to", \.to)], bucket: "transfers")
}

/// StressItem with its "age" index at version 1 or 2: opening the bucket as the other one
/// rebuilds that index.
struct EvolveOne: BuriSupport, Equatable, Sendable {
    var id: String, name: String, age: Int, tags: [String], score: Double, writer: String, note: String
    static let buri = BuriSchema<EvolveOne>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age, version: 1), .binary("tags", \.tags),
            .numeric("score", \.score),
        ],
        bucket: "stress")
}

/// StressItem at schema version 1, as BuriStress's `migrate` mode declares it (without the kill).
struct MigratedItem: BuriSupport, Equatable, Sendable {
    var id: String, name: String, age: Int, tags: [String], score: Double, writer: String, note: String
    static let buri = BuriSchema<MigratedItem>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
        ],
        bucket: "stress", schemaVersion: 1, migrations: [.from(0) { $0["note"] = "migrated" }])
}

struct EvolveTwo: BuriSupport, Equatable, Sendable {
    var id: String, name: String, age: Int, tags: [String], score: Double, writer: String, note: String
    static let buri = BuriSchema<EvolveTwo>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age, version: 2), .binary("tags", \.tags),
            .numeric("score", \.score),
        ],
        bucket: "stress")
}

/// Kills a BuriStress child at random moments and proves, after every kill, that the database
/// opens, passes `check()`, decodes completely, and holds exactly the writes the child reported —
/// plus, atomically, possibly the one write it had begun but not reported.
struct KillTests {
    @Test("SIGKILL during synchronous writes loses no reported write and corrupts nothing")
    func killDuringSyncWrites() throws {
        try runKillRounds(rounds: fullTests ? 60 : 5, seed: 0x5EED_0001, async: false)
    }

    @Test("SIGKILL during asynchronous writes loses no reported write either (a process crash keeps the OS's buffers)")
    func killDuringAsyncWrites() throws {
        try runKillRounds(rounds: fullTests ? 30 : 3, seed: 0x5EED_0002, async: true)
    }

    @Test("SIGKILL during deleteAll's background purge: the next open resumes it, check is clean, nothing else is lost")
    func killDuringDeleteAllPurge() throws {
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill-purge")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: 0xDE1A_11)
        let kept = (0..<500).map { n in
            StressItem(id: "keep\(n)", name: "k", age: n, tags: ["t\(n % 5)"], score: 1, writer: "setup", note: "")
        }
        do {
            let db = try BuriDatabase(path: dbPath)
            try db.bucket(PurgeKept.self).store(kept.map { PurgeKept(id: $0.id, age: $0.age) })
            db.close()
        }
        var interrupted = 0
        for round in 0..<(fullTests ? 12 : 3) {
            let items = (0..<20_000).map { n in
                StressItem(
                    id: String(format: "r\(round)-%05d", n), name: "n\(n % 17)", age: n % 90,
                    tags: n % 3 == 0 ? ["a", "b"] : ["c"], score: Double(n % 7),
                    writer: "setup", note: "")
            }
            var retired: UInt32 = 0
            do {
                let db = try BuriDatabase(path: dbPath)
                let bucket = try db.bucket(StressItem.self)
                try bucket.store(items)
                retired = bucket.raw.descriptor.id
                db.close()
            }
            let outputPath = directory.path("purge-\(round).out")
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let process = Process()
            process.executableURL = binary
            process.arguments = ["deleteall", dbPath]
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = FileHandle.nullDevice
            try process.run()
            var waited = 0
            while process.isRunning, waited < 60_000,
                !((try? String(contentsOfFile: outputPath, encoding: .utf8))?.contains("deleted") ?? false)
            {
                usleep(1_000)
                waited += 1
            }
            usleep(UInt32.random(in: 0...30_000, using: &random))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            #expect(output.contains("deleted 20000"), "round \(round): \(output)")

            // Reopened without purging: the state the crash left is consistent, the purge pending or done.
            var still = BuriOptions()
            still.purgesInBackground = false
            do {
                let db = try BuriDatabase(path: dbPath, options: still)
                defer { db.close() }
                let report = try db.check()
                #expect(report.problems.isEmpty, "round \(round): \(report.problems)")
                let pending = try db.pendingPurges()
                if !pending.isEmpty {
                    interrupted += 1
                    #expect(
                        pending == [RetiredBucket(id: retired, bucket: "stress", state: .purging)], "round \(round)")
                    #expect(report.pendingPurges == pending)
                }
                #expect(try db.bucket(StressItem.self).count() == 0)
            }
            // Reopened as usual: the purge resumes and finishes; nothing else is touched.
            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            let deadline = Date().addingTimeInterval(120)
            while try !db.pendingPurges().isEmpty, Date() < deadline { usleep(2_000) }
            #expect(try db.pendingPurges().isEmpty, "round \(round): the purge did not finish")
            let leftovers = try db.engine.snapshot().cursor(in: .prefix(Keyspace.recordPrefix(bucket: retired)))
            #expect(try !leftovers.next(), "round \(round): records left under the retired id")
            let entries = try db.engine.snapshot().cursor(in: .prefix(Keyspace.indexSpacePrefix(bucket: retired)))
            #expect(try !entries.next(), "round \(round): index entries left under the retired id")
            #expect(
                try db.engine.snapshot().get(Keyspace.countKey(bucket: retired)) == nil,
                "round \(round): the retired id's count is left")
            #expect(
                try db.bucket(PurgeKept.self).objects()
                    == kept.map { PurgeKept(id: $0.id, age: $0.age) }.sorted {
                        $0.id.utf8.lexicographicallyPrecedes($1.id.utf8)
                    })
            #expect(try db.bucket(PurgeKept.self).keys(.index("age", in: 0...9)).count == 10)
            let stress = try db.bucket(StressItem.self)
            #expect(try stress.count() == 0)
            try stress.store(items[0])
            #expect(try stress.keys(.index("name", equals: IndexValue(items[0].name))) == [items[0].id])
            try stress.deleteAll()
            try db.purgeRetiredBuckets()
            let report = try db.check()
            #expect(report.problems.isEmpty && report.pendingPurges.isEmpty, "round \(round): \(report.problems)")
        }
        print("deleteAll purge kills: \(interrupted) of the rounds interrupted mid-purge")
    }

    /// Delete rules under SIGKILL: each round of the child is one transaction that deletes a song
    /// (its nullify and cascade rules applied in it) and is killed, in a seeded round, after the
    /// rules are in the transaction and before its commit. The rounds before committed whole, the
    /// killed one left nothing, and no reference ever dangles.
    @Test func killDuringDeleteRules() throws {
        struct Song: BuriSupport {
            var id: String
            static let buri = BuriSchema<Song>(key: \.id, bucket: "songs")
        }
        struct Playlist: BuriSupport, Equatable {
            var id: String
            var songs: [Ref<Song>]
            static let buri = BuriSchema<Playlist>(
                key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)], bucket: "playlists")
        }
        struct Fan: BuriSupport {
            var id: String
            var favourite: Ref<Song>
            static let buri = BuriSchema<Fan>(
                key: \.id, indexes: [.reference("favourite", \.favourite, onDelete: .cascade)], bucket: "fans")
        }
        struct Round: BuriSupport {
            var id: String
            var round: Int
            static let buri = BuriSchema<Round>(key: \.id, bucket: "rounds")
        }
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill-refs")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: 0x4EF5)
        let songKeys = (0..<200).map { String(format: "s%03d", $0) }
        let playlists = (0..<60).map { p in
            Playlist(id: "p\(p)", songs: (0..<20).map { _ in Ref<Song>(songKeys.randomElement(using: &random)!) })
        }
        do {
            let db = try BuriDatabase(path: dbPath)
            try db.bucket(Song.self).store(songKeys.map { Song(id: $0) })
            try db.bucket(Playlist.self).store(playlists)
            try db.bucket(Fan.self).store((0..<100).map { Fan(id: "f\($0)", favourite: Ref(songKeys[$0 * 2])) })
            db.close()
        }
        var committed = 0
        for round in 0..<(fullTests ? 20 : 10) {
            let killAt = committed + Int.random(in: 1...8, using: &random)
            let end = try runChildKilledAtAPoint(binary, ["refs", dbPath, String(killAt)], capturingOutput: true)
            #expect(end.reason == .uncaughtSignal && end.status == SIGKILL, "round \(round): \(end.output)")
            // Rounds up to killAt − 1 committed; round killAt was killed inside its transaction.
            #expect(end.output.hasSuffix(killAt - 1 > committed ? "round \(killAt - 1)\n" : "kill-at=\(killAt)\n"))
            committed = killAt - 1
            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            let deleted = Set(songKeys.prefix(committed))
            #expect(try db.bucket(Song.self).keys() == Array(songKeys.dropFirst(committed)), "round \(round)")
            #expect(try db.bucket(Round.self).object(forKey: "last")?.round ?? 0 == committed)
            let stored = try db.bucket(Playlist.self).objects()
            #expect(stored.count == playlists.count)
            for before in playlists {
                let after = stored.first { $0.id == before.id }
                #expect(
                    after?.songs == before.songs.filter { !deleted.contains($0.key) }, "round \(round) \(before.id)")
            }
            let fans = try db.bucket(Fan.self).objects()
            #expect(fans.count == (0..<100).filter { !deleted.contains(songKeys[$0 * 2]) }.count)
            let report = try db.check()
            #expect(report.problems.isEmpty, "round \(round): \(report.summary)")
        }
    }

    @Test("SIGKILL inside migrateAll's batches: each batch is whole or absent, and running it again finishes")
    func killDuringMigrateAll() throws {
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill-migrate")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: 0x316_2A7E)
        let originals = (0..<3000).map { n in
            StressItem(
                id: String(format: "m%05d", n), name: "n\(n % 13)", age: n % 100, tags: n % 4 == 0 ? ["red"] : [],
                score: Double(n % 40) / 4, writer: "setup", note: "")
        }
        do {
            let db = try BuriDatabase(path: dbPath)
            try db.bucket(StressItem.self).store(originals)
            db.close()
        }
        var migratedBefore = 0
        let rounds = fullTests ? 20 : 10
        for round in 0..<rounds {
            let left = originals.count - migratedBefore
            guard left > 0 else { break }
            // Killed by the child itself inside the step that upgrades its Kth record of this run:
            // in the middle of a batch's transaction, before its commit (K seeded).
            let killAt = Int.random(in: 1...Swift.min(left, 400), using: &random)
            let end = try runChildKilledAtAPoint(binary, ["migrate", dbPath, String(killAt)], capturingOutput: true)
            let output = end.output
            #expect(end.reason == .uncaughtSignal && end.status == SIGKILL, "round \(round): not killed: \(output)")
            #expect(!output.contains("migrated "), "round \(round): finished before the kill: \(output)")
            // The batches before the kill committed whole; the one being built did not.
            let committed = (killAt - 1) / 100 * 100
            #expect(
                output.hasSuffix(committed == 0 ? "kill-at=\(killAt)\n" : "upgraded \(committed)\n"),
                "round \(round): \(output)")

            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            let raw = try db.rawBucket(named: "stress")
            var atOne = 0
            for key in try raw.keys(.all) where try raw.record(forKey: key)?.schemaVersion == 1 { atOne += 1 }
            #expect(atOne == migratedBefore + committed, "round \(round): \(atOne) records at version 1")
            migratedBefore = atOne
            let report = try db.check()
            #expect(report.problems.isEmpty, "round \(round): \(report.summary)")
        }
        // Running it again (here, to the end) finishes: every record at version 1, nothing lost.
        let db = try BuriDatabase(path: dbPath)
        defer { db.close() }
        let bucket = try db.bucket(MigratedItem.self)
        #expect(try bucket.migrateAll(batchSize: 250) == originals.count - migratedBefore)
        #expect(try bucket.migrateAll() == 0)
        let objects = try bucket.objects()
        #expect(objects.map(\.id) == originals.map(\.id))
        #expect(objects.allSatisfy { $0.note == "migrated" })
        #expect(
            try bucket.keys(.index("age", in: 10...19)).count == originals.filter { (10...19).contains($0.age) }.count)
        #expect(try db.check().problems.isEmpty)
    }

    @Test("SIGKILL during an index rebuild: the next open with the new type finishes it, and nothing is lost")
    func killDuringIndexRebuild() throws {
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill-evolve")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: 0xE7_0E)
        let originals = (0..<3000).map { n in
            StressItem(
                id: String(format: "e%05d", n), name: "n\(n % 13)", age: n % 100, tags: n % 4 == 0 ? ["red"] : [],
                score: Double(n % 40) / 4,
                writer: "setup", note: "")
        }
        do {
            let db = try BuriDatabase(path: dbPath)
            try db.bucket(StressItem.self).store(originals)
            db.close()
        }
        var interrupted = 0
        for round in 0..<(fullTests ? 20 : 3) {
            let version = round % 2 + 1
            // Killed at a known point of the rebuild (after its Kth batch of 100 of 30, K seeded),
            // by the child itself: no wait for a progress line, on any machine.
            let batches = Int.random(in: 1...28, using: &random)
            let end = try runChildKilledAtAPoint(
                binary, ["evolve", dbPath, String(version), String(batches)], capturingOutput: true)
            let output = end.output
            #expect(end.reason == .uncaughtSignal && end.status == SIGKILL, "round \(round): not killed: \(output)")
            #expect(
                output.hasSuffix("progress \(batches * 100)\n") && !output.contains("evolved"),
                "round \(round): not killed after batch \(batches): \(output)")
            if !output.contains("evolved") { interrupted += 1 }

            // Opening with the same new type finishes the rebuild; then everything is consistent.
            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            let ages: [String]
            let objects: [StressItem]
            if version == 1 {
                let bucket = try db.bucket(EvolveOne.self)
                ages = try bucket.keys(.index("age", in: 10...19))
                objects = try bucket.objects().map {
                    StressItem(
                        id: $0.id, name: $0.name, age: $0.age, tags: $0.tags, score: $0.score, writer: $0.writer,
                        note: $0.note)
                }
            } else {
                let bucket = try db.bucket(EvolveTwo.self)
                ages = try bucket.keys(.index("age", in: 10...19))
                objects = try bucket.objects().map {
                    StressItem(
                        id: $0.id, name: $0.name, age: $0.age, tags: $0.tags, score: $0.score, writer: $0.writer,
                        note: $0.note)
                }
            }
            let report = try db.check()
            #expect(report.problems.isEmpty, "round \(round): \(report.summary)")
            #expect(objects == originals, "round \(round): the rebuild changed objects")
            #expect(
                Set(ages) == Set(originals.filter { (10...19).contains($0.age) }.map(\.id)),
                "round \(round): the rebuilt age index")
            #expect(try db.bucketInfo(named: "stress")?.index(named: "age")?.version == version)
        }
        #expect(interrupted == (fullTests ? 20 : 3), "every round is killed mid-rebuild")
    }

    @Test("SIGKILL during cross-bucket transactions: every acknowledged transfer is there, none is there in part")
    func killDuringTransactions() throws {
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill-transfer")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: 0x7A_0F)
        var acknowledged = Set<String>()
        for round in 0..<(fullTests ? 20 : 4) {
            let outputPath = directory.path("transfer-\(round).out")
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let process = Process()
            process.executableURL = binary
            process.arguments = ["transfer", dbPath, String(round + 1), "--accounts", "6"]
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = FileHandle.nullDevice
            try process.run()
            var waited = 0
            while process.isRunning, waited < 30_000,
                !((try? String(contentsOfFile: outputPath, encoding: .utf8))?.contains("ok ") ?? false)
            {
                usleep(1_000)
                waited += 1
            }
            usleep(UInt32.random(in: 20_000...200_000, using: &random))
            let wasRunning = process.isRunning
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            #expect(wasRunning, "round \(round): the transfer child stopped by itself: \(output.suffix(300))")
            var lines = output.split(separator: "\n", omittingEmptySubsequences: false)
            lines.removeLast()  // a kill can cut the last line short
            for line in lines where line.hasPrefix("ok ") { acknowledged.insert(String(line.dropFirst(3))) }

            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            #expect(try db.check().problems.isEmpty, "round \(round)")
            let transfers = try db.bucket(TransferRecord.self).objects()
            let accounts = try db.bucket(TransferAccount.self).objects()
            #expect(
                acknowledged.isSubset(of: Set(transfers.map(\.id))),
                "round \(round): an acknowledged transfer is missing")
            // The balances are exactly 1000 each plus the transfers recorded: no transaction applied in part.
            var balances = Dictionary(uniqueKeysWithValues: accounts.map { ($0.id, 1000) })
            for transfer in transfers {
                balances[transfer.from, default: 0] -= transfer.amount
                balances[transfer.to, default: 0] += transfer.amount
            }
            #expect(accounts.count == 6)
            #expect(
                accounts.allSatisfy { balances[$0.id] == $0.balance },
                "round \(round): balances disagree with the recorded transfers")
        }
        #expect(!acknowledged.isEmpty)
    }

    func runKillRounds(rounds: Int, seed: UInt64, async: Bool) throws {
        let binary = try stressBinary()
        let directory = TemporaryDirectory("buri-kill")
        let dbPath = directory.path("db")
        var random = SeededGenerator(seed: seed)
        var expected: [String: StressItem] = [:]
        var totalCompleted = 0
        var inFlightApplied = 0

        for round in 0..<rounds {
            let outputPath = directory.path("round-\(round).out")
            let errorPath = directory.path("round-\(round).err")
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            let process = Process()
            process.executableURL = binary
            process.arguments = ["stress", dbPath, String(seed &+ UInt64(round))] + (async ? ["--async"] : [])
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
            try process.run()
            let pid = process.processIdentifier

            // Every fifth round is killed without waiting for "ready": during open and recovery.
            if round % 5 == 4 {
                usleep(UInt32.random(in: 0...40_000, using: &random))
            } else {
                var waited = 0
                while !((try? String(contentsOfFile: outputPath, encoding: .utf8))?.hasPrefix("ready") ?? false) {
                    guard process.isRunning else { break }
                    guard waited < 30_000 else { break }
                    usleep(2_000)
                    waited += 2
                }
                usleep(UInt32.random(in: 50_000...500_000, using: &random))
            }
            let wasRunning = process.isRunning
            kill(pid, SIGKILL)
            process.waitUntilExit()
            let stderr = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            // The child never exits by itself within the round: anything else is a failure in it.
            #expect(
                wasRunning,
                "round \(round): BuriStress exited on its own (status \(process.terminationStatus)): \(stderr)")
            #expect(
                process.terminationReason == .uncaughtSignal, "round \(round): BuriStress was not killed: \(stderr)")

            let log = try StressLog(text: String(contentsOfFile: outputPath, encoding: .utf8))
            for write in log.completed { expected = expected.applying(write) }
            totalCompleted += log.completed.count

            // Reopen: the database must open, check clean, decode completely and hold what was reported.
            let db = try BuriDatabase(path: dbPath)
            defer { db.close() }
            let report = try db.check()
            #expect(report.problems.isEmpty, "round \(round): check found problems after the kill:\n\(report.summary)")
            let bucket = try db.bucket(StressItem.self)
            let objects = try bucket.objects()
            let actual = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            #expect(actual.count == objects.count)
            // The stored object count (one key, written in each write's batch) is the records'.
            #expect(try bucket.count() == objects.count, "round \(round)")
            #expect(
                try db.engine.snapshot().get(Keyspace.countKey(bucket: bucket.raw.descriptor.id)).flatMap(
                    Keyspace.parseCount) == objects.count, "round \(round)")

            var allowed = [expected]
            if let inFlight = log.inFlight { allowed.append(expected.applying(inFlight)) }
            if actual == allowed[0] {
                // The unreported write, if any, did not land.
            } else if allowed.count == 2, actual == allowed[1] {
                inFlightApplied += 1
            } else {
                let keys = Set(actual.keys).union(expected.keys).sorted()
                let differences = keys.filter { actual[$0] != expected[$0] }.prefix(10).map { key in
                    "\(key): stored \(actual[key].map { "\($0)" } ?? "nothing"), reported \(expected[key].map { "\($0)" } ?? "deleted")"
                }
                Issue.record(
                    """
                    round \(round): the database does not hold exactly the reported writes \
                    (\(log.completed.count) completed this round, in flight: \(log.inFlight.map { "\($0)" } ?? "none")):
                    \(differences.joined(separator: "\n"))
                    """)
                return
            }
            expected = actual

            // The indexes answer queries exactly as the objects say.
            let red = try bucket.keys(.index("tags", equals: "red"))
            #expect(
                red == actual.values.filter { $0.tags.contains("red") }.map(\.id).sorted(), "round \(round): tags index"
            )
            let young = try bucket.count(.index("age", in: 0...49))
            #expect(young == actual.values.filter { $0.age < 50 }.count, "round \(round): age index")
            let byScore = try bucket.objects(.index("score", in: (-20.0)...20.0))
            #expect(
                Set(byScore.map(\.id)) == Set(actual.values.filter { (-20...20).contains($0.score) }.map(\.id)),
                "round \(round): score index")
            #expect(byScore.map(\.score) == byScore.map(\.score).sorted(), "round \(round): score order")
        }
        // The rounds did real work (not a run of kills before the first write).
        #expect(totalCompleted > rounds * 5, "only \(totalCompleted) writes completed in \(rounds) rounds")
        print(
            "kill rounds: \(rounds), writes reported: \(totalCompleted), unreported writes that landed: \(inFlightApplied), objects at the end: \(expected.count)"
        )
    }
}
