import BuriEtcd
import BuriStorage
import Foundation
import Testing
@testable import Buri

/// Several processes and failing members on the etcd engine: BuriStress children (in `stress`
/// mode on an etcd location) write while this process watches, kills and checks.
@Suite("etcd: several processes and failing members", .serialized)
struct EtcdClusterTests {
    /// Starts `BuriStress stress <location> <seed> <options>`, its output going to files.
    func startWriter(
        _ location: String, seed: UInt64, options: [String], directory: TemporaryDirectory, label: String
    ) throws -> (Process, String, String) {
        let output = directory.path("\(label).out")
        let errors = directory.path("\(label).err")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        let process = Process()
        process.executableURL = try stressBinary()
        process.arguments = ["stress", location, String(seed)] + options
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        try process.run()
        return (process, output, errors)
    }

    /// Waits (bounded) for `process` to end by itself; kills it if it does not.
    func finish(_ process: Process, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return false
        }
        process.waitUntilExit()
        return true
    }

    /// The log of a writer that ended by itself ("done" last), without that line.
    func log(_ path: String) throws -> StressLog {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try StressLog(text: text.replacingOccurrences(of: "\ndone\n", with: "\n"))
    }

    func acknowledged(_ path: String) -> Int {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").components(separatedBy: "\nok ").count - 1
    }

    /// Each key's last acknowledged state in one writer's log: an object, or `nil` for deleted.
    func lastWrites(_ log: StressLog) -> [String: StressItem?] {
        var last: [String: StressItem?] = [:]
        for write in log.completed {
            switch write {
            case .store(let items): for item in items { last[item.id] = .some(item) }
            case .delete(let keys): for key in keys { last[key] = .some(nil) }
            }
        }
        return last
    }

    @Test(
        "two processes hammer six keys with stores, updates and deletes: check is clean and each object is a last acknowledged write"
    )
    func twoProcessesHammerTheSameKeys() throws {
        let location = try EtcdTestCluster.location("hammer")
        defer { if let engine = try? EtcdEngine(location: location) { try? engine.deleteAll() } }
        let directory = TemporaryDirectory("buri-etcd-hammer")
        let options = ["--keys", "6", "--ops", fullTests ? "600" : "150", "--seconds", "90", "--async"]
        let (a, aOut, aErr) = try startWriter(
            location, seed: 0xA11CE, options: options, directory: directory, label: "a")
        let (b, bOut, bErr) = try startWriter(location, seed: 0xB0B, options: options, directory: directory, label: "b")
        let aEnded = finish(a, within: 150), bEnded = finish(b, within: 150)
        let aText = (try? String(contentsOfFile: aErr, encoding: .utf8)) ?? ""
        let bText = (try? String(contentsOfFile: bErr, encoding: .utf8)) ?? ""
        #expect(aEnded && a.terminationStatus == 0, "writer a: \(aText)")
        #expect(bEnded && b.terminationStatus == 0, "writer b: \(bText)")
        let logA = try log(aOut), logB = try log(bOut)
        #expect(logA.inFlight == nil && logB.inFlight == nil)
        #expect(logA.completed.count == (fullTests ? 600 : 150) && logB.completed.count == logA.completed.count)

        let db = try BuriDatabase(engine: EtcdEngine(location: location))
        defer { db.close() }
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        let objects = try db.bucket(StressItem.self).objects()
        let actual = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        // Both writers finished, so each key holds the last acknowledged write of one of them.
        let lastA = lastWrites(logA), lastB = lastWrites(logB)
        var fromA = 0, fromB = 0
        for key in Set(lastA.keys).union(lastB.keys).union(actual.keys) {
            let now = actual[key]
            let candidates = [lastA[key], lastB[key]].compactMap { $0 }
            #expect(!candidates.isEmpty, "\(key) was never written but holds \(String(describing: now))")
            #expect(
                candidates.contains(now),
                "\(key) holds \(String(describing: now)), not the last write of either process")
            if let a = lastA[key], a == now { fromA += 1 }
            if let b = lastB[key], b == now { fromB += 1 }
        }
        print(
            "etcd hammer: \(logA.completed.count) + \(logB.completed.count) writes, final state from a: \(fromA), from b: \(fromB)"
        )
    }

    @Test(
        "SIGKILL of the leader, then of a follower, mid-stream: writes resume, the members rejoin, every acknowledged write is there"
    )
    func leaderAndFollowerKilledMidStream() throws {
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let location = cluster.location("fault")
        let directory = TemporaryDirectory("buri-etcd-fault")
        let stopFile = directory.path("stop")
        let (writer, output, errors) = try startWriter(
            location, seed: 0xFA17,
            options: ["--keys", "200", "--seconds", "120", "--ops", "20000", "--stop-file", stopFile, "--async"],
            directory: directory, label: "writer")
        defer { if writer.isRunning { kill(writer.processIdentifier, SIGKILL) } }

        /// Waits (bounded) until the writer has acknowledged `more` writes beyond `count`.
        func waitForAcks(beyond count: Int, more: Int, _ what: String) -> Int {
            let deadline = Date().addingTimeInterval(45)
            while acknowledged(output) < count + more && Date() < deadline && writer.isRunning { usleep(20_000) }
            let now = acknowledged(output)
            #expect(
                now >= count + more,
                "\(what): the writer acknowledged only \(now - count) write(s) in 45 s; stderr: \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")"
            )
            return now
        }
        func waitForLeader() -> Int? {
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                if let leader = cluster.leader() { return leader }
                usleep(50_000)
            }
            return nil
        }

        var acks = waitForAcks(beyond: 0, more: 30, "before any kill")
        for victim in ["leader", "follower"] {
            let leader = try #require(waitForLeader(), "no leader before killing the \(victim)")
            let target = victim == "leader" ? leader : (leader + 1) % 3
            cluster.kill(target)
            let killedAt = acknowledged(output)
            acks = waitForAcks(beyond: killedAt, more: 30, "after killing the \(victim) (member \(target))")
            let (status, text) = cluster.restart(target)
            #expect(status == 0, "restart of member \(target): \(text)")
            let deadline = Date().addingTimeInterval(20)
            while !cluster.isHealthy(target) && Date() < deadline { usleep(50_000) }
            #expect(cluster.isHealthy(target), "member \(target) did not rejoin")
            acks = waitForAcks(beyond: acks, more: 20, "after member \(target) rejoined")
        }
        _ = FileManager.default.createFile(atPath: stopFile, contents: nil)
        let ended = finish(writer, within: 60)
        let stderr = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        #expect(ended && writer.terminationStatus == 0, "the writer failed: \(stderr)")
        let log = try log(output)
        #expect(log.inFlight == nil)
        var expected: [String: StressItem] = [:]
        for write in log.completed { expected = expected.applying(write) }

        let db = try BuriDatabase(engine: EtcdEngine(location: location))
        defer { db.close() }
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        let objects = try db.bucket(StressItem.self).objects()
        let actual = Dictionary(objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(
            actual == expected,
            "\(log.completed.count) acknowledged writes; \(Set(expected.keys).symmetricDifference(actual.keys).count) keys differ"
        )
        // Every member, the restarted ones included, has applied the same history.
        let client = try EtcdClient(endpoints: cluster.endpoints)
        let deadline = Date().addingTimeInterval(10)
        var revisions: [UInt64] = []
        repeat {
            revisions = cluster.endpoints.compactMap { try? client.memberStatus(of: $0).revision }
            if revisions.count == 3 && Set(revisions).count == 1 { break }
            usleep(50_000)
        } while Date() < deadline
        #expect(revisions.count == 3 && Set(revisions).count == 1, "members' revisions: \(revisions)")
        print("etcd fault test: \(log.completed.count) acknowledged writes through a leader and a follower kill")
    }
}
