@testable import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Synchronization
import Testing

/// What is particular to the etcd engine: locations, prefixes, limits, commit conditions as etcd
/// compares, and the watch. (The behaviour every engine shares is in EngineTests, which runs on
/// etcd too.)
@Suite("etcd engine")
struct EtcdEngineTests {
    /// A fresh database in the tests' cluster and a cleanup that deletes it.
    func fresh(_ label: String, limits: EtcdLimits? = nil) throws -> EtcdEngine {
        let shared = try EtcdTestCluster.engine(label)
        guard let limits else { return shared }
        return try EtcdEngine(endpoints: shared.client.endpoints, name: shared.name, limits: limits)
    }

    func put(_ engine: EtcdEngine, _ pairs: [([UInt8], [UInt8]?)]) throws {
        let batch = engine.makeBatch()
        for (key, value) in pairs {
            if let value { batch.put(key, value) } else { batch.delete(key) }
        }
        try engine.commit(batch, conditions: nil, sync: false)
    }

    func everything(_ engine: EtcdEngine) throws -> [[UInt8]] {
        try scanEntries(engine.snapshot())
    }

    @Test(
        "a lease renewed in the background outlives its time to live; one revoked elsewhere is found lost at its next renewal"
    )
    func leaseRenewal() throws {
        let base = try fresh("renew")
        defer { try? base.deleteAll() }
        // Renewed every 2/3 s: after 5 renewals (over 3 s) a 2-second lease still holds its key.
        let engine = try EtcdEngine(endpoints: base.client.endpoints, name: base.name, leaseSeconds: 2)
        defer { engine.close() }
        let lease = try #require(try engine.grantLease { [0, 0x6C] + Array(String($0).utf8) } as? EtcdLease)
        let deadline = Date().addingTimeInterval(60)
        while lease.renewals < 5, Date() < deadline { usleep(50_000) }
        #expect(lease.renewals >= 5)
        #expect(try engine.snapshot().get(lease.key) == [] && lease.isHeld)
        // Ended by someone else (as the cluster ends a lease nobody renews): the next renewal
        // finds it gone, and the lease says so.
        try engine.client.revokeLease(lease.id)
        while !lease.isLost, Date() < deadline { usleep(50_000) }
        #expect(lease.isLost && !lease.isHeld)
        #expect(try engine.snapshot().get(lease.key) == nil)
    }

    @Test("a lease holds its key until released; a released lease cannot be renewed, and its key is gone")
    func leases() throws {
        let engine = try fresh("lease")
        defer { try? engine.deleteAll() }
        let key: [UInt8] = [0, 0x6C]
        let lease = try #require(try engine.grantLease { id in key + [UInt8(truncatingIfNeeded: id)] })
        let held = key + [UInt8(truncatingIfNeeded: lease.id)]
        #expect(lease.key == held && lease.isHeld)
        #expect(try engine.snapshot().get(held) == [])
        #expect(try engine.client.keepAlive(lease.id) > 0)
        // A commit conditioned on the lease key applies while it holds, and not after.
        let before = try engine.snapshot()
        _ = try before.get(held)
        lease.release()
        lease.release()
        #expect(!lease.isHeld)
        #expect(try engine.snapshot().get(held) == nil)
        #expect(try engine.client.keepAlive(lease.id) == 0)
        let batch = engine.makeBatch()
        batch.put([0x10], [1])
        #expect(throws: StorageError.self) {
            try engine.commit(batch, conditions: StorageConditions(snapshot: before, keys: [held]), sync: false)
        }
        #expect(try engine.snapshot().get([0x10]) == nil)
        // Closing the engine releases the leases it holds.
        let other = try EtcdEngine(location: engine.location)
        let second = try #require(try other.grantLease { id in key + [UInt8(truncatingIfNeeded: id)] })
        #expect(try engine.snapshot().get(second.key) == [])
        other.close()
        #expect(try engine.snapshot().get(second.key) == nil)
    }

    @Test(
        "locations name members, a database and the cluster's limits; bad ones are typed errors that say what to write")
    func locations() throws {
        let engine = try EtcdEngine(
            location: "etcd://127.0.0.1:2379,localhost/app%2Fv1?max-txn-ops=4096&max-request-bytes=8388608")
        #expect(engine.client.endpoints == ["127.0.0.1:2379", "localhost:2379"])
        #expect(engine.name == "app/v1")
        #expect(engine.keyPrefix == Array("app/v1".utf8) + [0])
        #expect(engine.limits == EtcdLimits(maxTxnOps: 4096, maxRequestBytes: 8_388_608))
        #expect(engine.isShared)
        #expect(
            try EtcdEngine(location: "etcd://h:1/x").limits == EtcdLimits(maxTxnOps: 128, maxRequestBytes: 1_572_864))
        #expect(try EtcdEngine(location: "etcd://h:1/x").leaseSeconds == 10)
        #expect(try EtcdEngine(location: "etcd://h:1/x?lease-seconds=3&max-txn-ops=7").leaseSeconds == 3)
        for bad in [
            "etcd://127.0.0.1:2379", "etcd://127.0.0.1:2379/", "etcd://:2379/x", "etcd://h:0/x", "etcd://h:99999/x",
            "etcd://h:1/x?max-txn-ops=0", "etcd://h:1/x?max-ops=5", "etcd://h:1/x%00y", "http://h:1/x", "etcd://h:1,/x",
            "etcd://h:1/x?lease-seconds=0", "etcd://h:1/x?lease-seconds=-2", "etcd://h:1/x?lease-seconds=2s",
            "etcd://h:1/x?lease-seconds=2&lease-seconds=3",
        ] {
            #expect(throws: StorageError.self, "\(bad)") { _ = try EtcdEngine(location: bad) }
        }
        #expect {
            _ = try EtcdEngine(location: "etcd://127.0.0.1:2379/")
        } throws: { error in
            let error = error as? StorageError
            return error?.code == .invalidArgument && error?.message.contains("NAME") == true
        }
    }

    @Test(
        "databases share a cluster by prefix: 'a' and 'ab' never see each other's keys, and deleteAll removes one only")
    func prefixesIsolate() throws {
        let base = try fresh("iso")
        let a = try EtcdEngine(endpoints: base.client.endpoints, name: base.name + "a")
        let ab = try EtcdEngine(endpoints: base.client.endpoints, name: base.name + "ab")
        defer { try? a.deleteAll(); try? ab.deleteAll() }
        try put(a, [([0xFF, 0xFF], [1]), ([0x00], [2])])
        try put(ab, [([0x00], [3]), (Array("é".utf8), [4])])
        #expect(try everything(a) == [[0x00, 0xFF, 0xFF, 0xFF, 2], [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1]])
        #expect(try everything(ab) == [[0x00, 0xFF, 0xFF, 0xFF, 3], [0xC3, 0xA9, 0xFF, 0xFF, 0xFF, 4]])
        let down = try a.snapshot().cursor(in: .all, reverse: true)
        var reversed: [[UInt8]] = []
        while try down.next() { reversed.append(down.key) }
        #expect(reversed == [[0xFF, 0xFF], [0x00]])
        try a.deleteAll()
        #expect(try everything(a).isEmpty)
        #expect(try everything(ab).count == 2)
    }

    @Test(
        "a commit over the limits is refused whole, naming the limit and its size; the cluster's own refusal is the same typed error"
    )
    func limits() throws {
        let small = try fresh("limits", limits: EtcdLimits(maxTxnOps: 4, maxRequestBytes: 1000))
        defer { try? small.deleteAll() }
        let many = small.makeBatch()
        for i: UInt8 in 0..<5 { many.put([i], [i]) }
        #expect {
            try small.commit(many, conditions: nil, sync: false)
        } throws: { error in
            let error = error as? StorageError
            return error?.code == .limitExceeded && error!.message.contains("--max-txn-ops")
                && error!.message.contains("5 write(s)")
                && error!.message.contains("allows 4")
        }
        let big = small.makeBatch()
        big.put([1], [UInt8](repeating: 7, count: 2000))
        #expect {
            try small.commit(big, conditions: nil, sync: false)
        } throws: { error in
            let error = error as? StorageError
            return error?.code == .limitExceeded && error!.message.contains("--max-request-bytes")
                && error!.message.contains("1000")
        }
        // Later puts of one key replace earlier ones: 4 distinct keys fit although 6 puts were made.
        let repeated = small.makeBatch()
        for i: UInt8 in 0..<4 { repeated.put([i], [i]) }
        repeated.put([0], [9])
        repeated.delete([1])
        try small.commit(repeated, conditions: nil, sync: false)
        #expect(
            try everything(small) == [[0, 0xFF, 0xFF, 0xFF, 9], [2, 0xFF, 0xFF, 0xFF, 2], [3, 0xFF, 0xFF, 0xFF, 3]])
        // An engine told a larger limit than the cluster has: the cluster refuses, the error is the same kind.
        let optimistic = try EtcdEngine(
            endpoints: small.client.endpoints, name: small.name,
            limits: EtcdLimits(maxTxnOps: 100_000, maxRequestBytes: 64 << 20))
        let huge = optimistic.makeBatch()
        for i in 0..<5000 { huge.put(Array("k\(i)".utf8), [1]) }
        #expect {
            try optimistic.commit(huge, conditions: nil, sync: false)
        } throws: { ($0 as? StorageError)?.code == .limitExceeded }
        #expect(try everything(small).count == 3, "nothing of a refused commit is written")
    }

    @Test(
        "conditions: a key changed, created, deleted or deleted-and-recreated since the snapshot conflicts; an untouched one does not"
    )
    func keyConditions() throws {
        let engine = try fresh("cond")
        defer { try? engine.deleteAll() }
        let other = try EtcdEngine(endpoints: engine.client.endpoints, name: engine.name)
        func conflicts(_ keys: [[UInt8]] = [], ranges: [KeyRange] = [], after change: () throws -> Void) throws -> Bool
        {
            let snapshot = try engine.snapshot()
            for key in keys { _ = try snapshot.get(key) }  // read, as a writer does
            try change()
            let batch = engine.makeBatch()
            batch.put([0x77], Array(UUID().uuidString.utf8))
            do {
                try engine.commit(
                    batch, conditions: StorageConditions(snapshot: snapshot, keys: keys, ranges: ranges), sync: false)
                return false
            } catch let error as StorageError where error.code == .conflict {
                return true
            }
        }
        try put(other, [([1], [1]), ([2], [2])])
        #expect(try conflicts([[1]]) { try put(other, [([1], [5])]) })
        #expect(try conflicts([[1]]) { try put(other, [([1], [5])]) }, "the same value again is still a new write")
        #expect(try conflicts([[3]]) { try put(other, [([3], [3])]) }, "absent when read, created since")
        #expect(try conflicts([[3]]) { try put(other, [([3], nil)]) }, "present when read, deleted since")
        #expect(
            try conflicts([[2]]) {
                try put(other, [([2], nil)]); try put(other, [([2], [2])])
            }, "deleted and recreated with the same value")
        #expect(
            try !conflicts([[4]]) {
                try put(other, [([4], [4])]); try put(other, [([4], nil)])
            }, "absent then and absent now, as on MemoryEngine")
        #expect(try !conflicts([[1], [2]]) { try put(other, [([9], [9])]) }, "an unrelated key")
        // A key read through values(forKeys:) and one never read before the commit are both judged at the snapshot.
        let snapshot = try engine.snapshot()
        _ = try snapshot.values(forKeys: [[1], [8]])
        try put(other, [([8], [8])])
        #expect(throws: StorageError.self) {
            try engine.commit(
                engine.makeBatch().withPut([0x77], [1]), conditions: StorageConditions(snapshot: snapshot, keys: [[8]]),
                sync: false)
        }
        // Ranges: a put inside conflicts, a put outside does not; a deletion inside is not seen (documented).
        try put(other, [([5, 1], [1])])
        #expect(try conflicts(ranges: [.prefix([5])]) { try put(other, [([5, 2], [2])]) })
        #expect(try conflicts(ranges: [.prefix([5])]) { try put(other, [([5, 1], [1])]) }, "an overwrite in the range")
        #expect(try !conflicts(ranges: [.prefix([5])]) { try put(other, [([6], [6])]) })
        #expect(
            try !conflicts(ranges: [.prefix([5])]) { try put(other, [([5, 2], nil)]) },
            "etcd's compare cannot see a deletion")
        #expect(try !conflicts(ranges: [KeyRange(start: [5, 9], end: nil)]) { try put(other, [([5, 3], [1])]) })
        #expect(
            try conflicts(ranges: [KeyRange(start: [5, 9], end: nil)]) { try put(other, [([0xFF, 0xFF], [1])]) },
            "an open end reaches the prefix's end")
    }

    @Test("cursors page through thousands of keys both ways at one revision, and seek within their range")
    func paging() throws {
        let engine = try fresh("paging")
        defer { try? engine.deleteAll() }
        var keys: [[UInt8]] = []
        for i in 0..<3000 { keys.append([UInt8(i >> 8), UInt8(i & 0xFF), 0x00, 0xFF]) }
        var start = 0
        while start < keys.count {
            try put(engine, keys[start..<min(keys.count, start + 1000)].map { ($0, Array($0.reversed())) })
            start += 1000
        }
        let snapshot = try engine.snapshot()
        try put(engine, [([0x05, 0x00], [1]), (keys[10], nil)])  // after the snapshot: not seen
        let forward = try scanKeys(snapshot)
        #expect(forward == keys)
        let backward = try snapshot.cursor(in: .all, reverse: true)
        var reversed: [[UInt8]] = []
        while try backward.next() {
            reversed.append(backward.key)
            #expect(try backward.value == Array(backward.key.reversed()))
        }
        #expect(reversed == keys.reversed())
        let range = KeyRange(start: keys[100], end: keys[2900])
        let cursor = try snapshot.cursor(in: range, reverse: false)
        cursor.seek(keys[2000])
        #expect(try cursor.next() && cursor.key == keys[2000])
        cursor.seek([0x00])
        #expect(try cursor.next() && cursor.key == keys[100])
        let down = try snapshot.cursor(in: range, reverse: true)
        down.seek(keys[2000] + [0x01])
        #expect(try down.next() && down.key == keys[2000])
        down.seek([0xFF])
        #expect(try down.next() && down.key == keys[2899])
        #expect(!down.isOnEntry || down.key == keys[2899])
    }

    @Test(
        "a snapshot whose revision the cluster compacted fails with a typed error asking to read again, never a short scan"
    )
    func compacted() throws {
        // Compaction is cluster-wide: a private cluster, so no other test's snapshot is affected.
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let engine = try EtcdEngine(location: cluster.location("compact"))
        try put(engine, (0..<50).map { ([UInt8($0)], [1]) })
        let snapshot = try engine.snapshot()
        let cursor = try snapshot.cursor(in: .all, reverse: false)
        #expect(try cursor.next())
        try put(engine, [([0xAA], [1])])
        let now = try #require(try engine.property("etcd.revision").flatMap { UInt64($0) })
        try cluster.compact(to: now)
        var error: StorageError?
        do {
            while try cursor.next() {}
        } catch let caught as StorageError {
            error = caught
        }
        #expect(
            error?.code == .unavailable && error?.message.contains("compacted") == true
                && error?.message.contains("read again") == true)
        #expect(throws: StorageError.self) { _ = try snapshot.get([1]) }
        #expect(try scanKeys(engine.snapshot()).count == 51)
    }

    @Test("no member answering is a typed 'unavailable' error after the retry window, naming the members")
    func unavailable() throws {
        let engine = try EtcdEngine(endpoints: ["127.0.0.1:1", "127.0.0.1:2"], name: "nobody", retryWindow: 0.5)
        #expect {
            _ = try engine.snapshot()
        } throws: { error in
            let error = error as? StorageError
            return error?.code == .unavailable && error!.message.contains("127.0.0.1:")
                && error!.message.contains("etcd-cluster")
        }
    }

    @Test(
        "observeCommits delivers every commit of any client once, in order, one event per transaction, prefix stripped; cancel stops it"
    )
    func watch() throws {
        let engine = try fresh("watch")
        defer { try? engine.deleteAll() }
        let neighbour = try EtcdEngine(endpoints: engine.client.endpoints, name: engine.name + "x")
        defer { try? neighbour.deleteAll() }
        let other = try EtcdEngine(endpoints: engine.client.endpoints, name: engine.name)
        try put(other, [([1], [1])])  // before: not delivered
        let events = Mutex<[StorageCommitEvent]>([])
        let observation = engine.observeCommits { event in events.withLock { $0.append(event) } }
        try put(other, [([2], [2]), ([3], [0x00, 0xFF])])
        try put(neighbour, [([4], [4])])  // another database: not delivered
        try put(engine, [([2], nil), ([0xC3, 0xA9], [5])])
        // Wait for the two (an event; the deadline only guards against a hang). That no other
        // event follows (the neighbour's commit, a repeat) is checked at the end, once a later
        // commit has been delivered to a probe.
        let deadline = Date().addingTimeInterval(60)
        while events.withLock({ $0.count }) < 2 && Date() < deadline { usleep(10_000) }
        let seen = events.withLock { $0 }
        #expect(seen.count == 2)
        if seen.count == 2 {
            #expect(Set(seen[0].changes) == [.put(key: [2], value: [2]), .put(key: [3], value: [0x00, 0xFF])])
            #expect(Set(seen[1].changes) == [.delete(key: [2]), .put(key: [0xC3, 0xA9], value: [5])])
            #expect(seen[0].revision < seen[1].revision)
        }
        observation.cancel()
        observation.cancel()
        // A probe watching from before the next commit: once it has that commit, the feed has
        // delivered it (an event, not a delay), and the cancelled observation must not have it.
        let probe = Mutex<[StorageCommitEvent]>([])
        let probing = engine.observeCommits { event in probe.withLock { $0.append(event) } }
        defer { probing.cancel() }
        try put(other, [([7], [7])])
        let probeDeadline = Date().addingTimeInterval(60)
        while probe.withLock({ $0.isEmpty }) && Date() < probeDeadline { usleep(10_000) }
        #expect(probe.withLock { $0.map(\.changes) } == [[.put(key: [7], value: [7])]])
        #expect(events.withLock { $0.count } == 2, "nothing after cancel")
    }
}
