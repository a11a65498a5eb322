import BuriEtcd
import BuriEngines
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

/// The engines every test here runs against.
enum EngineKind: String, CaseIterable, CustomStringConvertible {
    case leveldb, memory, temporary, etcd
    var description: String { rawValue }

    func make() throws -> (any StorageEngine, cleanup: () -> Void) {
        switch self {
        case .memory:
            return (MemoryEngine(), {})
        case .temporary:
            let engine = try LevelDBEngine.temporary()
            return (engine, { engine.close() })
        case .etcd:
            // A database of its own in the tests' shared cluster, deleted afterwards.
            let engine = try EtcdTestCluster.engine("engine")
            return (
                engine,
                {
                    engine.close()
                    try? EtcdEngine(endpoints: engine.client.endpoints, name: engine.name).deleteAll()
                }
            )
        case .leveldb:
            let path = FileManager.default.temporaryDirectory.path + "/buri-engine-test-" + UUID().uuidString
            let engine = try LevelDBEngine(path: path)
            return (
                engine,
                {
                    engine.close()
                    try? FileManager.default.removeItem(atPath: path)
                }
            )
        }
    }
}

/// A deterministic generator, so a failing case can be replayed. Not the shared `SeededGenerator`
/// (SplitMix64): a different algorithm (an LCG step with another output mix and seeding), whose
/// sequence these tests' seeds were chosen with — kept so every case stays the one it was.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        var z = state
        z = (z ^ (z >> 33)) &* 0xff51afd7ed558ccd
        return z ^ (z >> 29)
    }
}

/// The reference: a sorted dictionary compared bytewise.
struct Model {
    var entries: [[UInt8]: [UInt8]] = [:]

    func scan(_ range: KeyRange, reverse: Bool) -> [([UInt8], [UInt8])] {
        let inside = entries.filter { range.contains($0.key) }.map { ($0.key, $0.value) }
        let sorted = inside.sorted { compareBytes($0.0, $1.0) < 0 }
        return reverse ? sorted.reversed() : sorted
    }
}

func randomKey(_ random: inout SeededRandom) -> [UInt8] {
    // Short keys over a small alphabet with 0x00 and 0xFF, so prefixes, equal keys and ends collide often.
    let alphabet: [UInt8] = [0x00, 0x01, 0x61, 0x62, 0xFE, 0xFF]
    let length = Int.random(in: 0...4, using: &random)
    return (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] }
}

func randomRange(_ random: inout SeededRandom) -> KeyRange {
    switch Int.random(in: 0..<4, using: &random) {
    case 0: return .all
    case 1: return .prefix(randomKey(&random))
    case 2: return KeyRange(start: randomKey(&random), end: nil)
    default: return KeyRange(start: randomKey(&random), end: randomKey(&random))
    }
}

func scanAll(_ reader: any StorageReader, _ range: KeyRange, reverse: Bool) throws -> [([UInt8], [UInt8])] {
    let cursor = try reader.cursor(in: range, reverse: reverse)
    var result: [([UInt8], [UInt8])] = []
    while try cursor.next() { result.append((cursor.key, try cursor.value)) }
    #expect(!cursor.isOnEntry)
    return result
}

func same(_ a: [([UInt8], [UInt8])], _ b: [([UInt8], [UInt8])]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
}

@Suite("Storage engines: one behaviour on every engine")
struct EngineTests {
    @Test(
        "random commits, point reads and scans in both directions agree with a sorted model",
        arguments: EngineKind.allCases)
    func agreesWithModel(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        var random = SeededRandom(seed: 11)
        var model = Model()
        var snapshots: [(any StorageSnapshot, Model)] = []
        for round in 0..<300 {
            let batch = engine.makeBatch()
            var next = model
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let key = randomKey(&random)
                if Bool.random(using: &random) {
                    let value = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    }
                    batch.put(key, value)
                    next.entries[key] = value
                } else {
                    batch.delete(key)
                    next.entries[key] = nil
                }
            }
            try engine.commit(batch, conditions: nil, sync: false)
            model = next
            if round % 25 == 0 { snapshots.append((try engine.snapshot(), model)) }
            let reader = try engine.snapshot()
            let key = randomKey(&random)
            #expect(try reader.get(key) == model.entries[key])
            let range = randomRange(&random)
            for reverse in [false, true] {
                #expect(
                    same(try scanAll(reader, range, reverse: reverse), model.scan(range, reverse: reverse)),
                    "round \(round) range \(range) reverse \(reverse)")
            }
        }
        // Every snapshot still shows exactly the state it was taken at.
        for (snapshot, then) in snapshots {
            #expect(same(try scanAll(snapshot, .all, reverse: false), then.scan(.all, reverse: false)))
        }
    }

    @Test(
        "seek lands on the first key at or after (reverse: at or before) the target, within the range",
        arguments: EngineKind.allCases)
    func seekWithinRange(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        let batch = engine.makeBatch()
        for byte: UInt8 in [0x10, 0x20, 0x30, 0x40, 0x50] { batch.put([byte], [byte]) }
        try engine.commit(batch, conditions: nil, sync: false)
        let reader = try engine.snapshot()
        let range = KeyRange(start: [0x20], end: [0x50])
        func first(_ target: [UInt8], reverse: Bool) throws -> UInt8? {
            let cursor = try reader.cursor(in: range, reverse: reverse)
            cursor.seek(target)
            return try cursor.next() ? cursor.key.first : nil
        }
        #expect(try first([0x25], reverse: false) == 0x30)
        #expect(try first([0x00], reverse: false) == 0x20)
        #expect(try first([0x50], reverse: false) == nil)
        #expect(try first([0x35], reverse: true) == 0x30)
        #expect(try first([0x30], reverse: true) == 0x30)
        #expect(try first([0x60], reverse: true) == 0x40)
        #expect(try first([0x10], reverse: true) == nil)
    }

    @Test("a snapshot never sees a later commit, and sees earlier ones whole", arguments: EngineKind.allCases)
    func snapshotIsolation(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        let first = engine.makeBatch()
        first.put([1], [1])
        first.put([2], [2])
        try engine.commit(first, conditions: nil, sync: false)
        let snapshot = try engine.snapshot()
        let cursor = try snapshot.cursor(in: .all, reverse: false)
        #expect(try cursor.next())
        let second = engine.makeBatch()
        second.delete([2])
        second.put([3], [3])
        second.put([1], [9])
        try engine.commit(second, conditions: nil, sync: true)
        // Both a cursor opened before and reads made after the commit see the old state.
        #expect(try cursor.next() && cursor.key == [2])
        #expect(try !cursor.next())
        #expect(try snapshot.get([1]) == [1])
        #expect(try snapshot.get([3]) == nil)
        let now = try engine.snapshot()
        #expect(try scanAll(now, .all, reverse: false).map(\.0) == [[1], [3]])
        #expect(try now.values(forKeys: [[1], [2], [3]]) == [[9], nil, [3]])
    }

    @Test(
        "pending writes read through their overlay: puts replace, deletes hide, scans merge",
        arguments: EngineKind.allCases)
    func overlayMergesPendingWrites(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        var random = SeededRandom(seed: 5)
        var model = Model()
        let batch = engine.makeBatch()
        for _ in 0..<60 {
            let key = randomKey(&random)
            batch.put(key, [1])
            model.entries[key] = [1]
        }
        try engine.commit(batch, conditions: nil, sync: false)
        let snapshot = try engine.snapshot()
        let pending = PendingWrites()
        for _ in 0..<60 {
            let key = randomKey(&random)
            if Bool.random(using: &random) {
                pending.put(key, [2])
                model.entries[key] = [2]
            } else {
                pending.delete(key)
                model.entries[key] = nil
            }
        }
        let reader = pending.reader(over: snapshot)
        for _ in 0..<100 {
            let range = randomRange(&random)
            for reverse in [false, true] {
                #expect(same(try scanAll(reader, range, reverse: reverse), model.scan(range, reverse: reverse)))
            }
            let key = randomKey(&random)
            #expect(try reader.get(key) == model.entries[key])
        }
        // Committing the pending writes gives the engine the overlay's state.
        try engine.commit(pending.batch(for: engine), conditions: nil, sync: false)
        #expect(same(try scanAll(try engine.snapshot(), .all, reverse: false), model.scan(.all, reverse: false)))
    }

    @Test("calls after close are typed errors", arguments: EngineKind.allCases)
    func closedEngine(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        engine.close()
        engine.close()
        #expect(engine.isClosed)
        #expect(throws: StorageError.self) { _ = try engine.snapshot() }
        #expect(throws: StorageError.self) {
            try engine.commit(engine.makeBatch().withPut([1], [1]), conditions: nil, sync: false)
        }
    }
}

extension StorageBatch {
    func withPut(_ key: [UInt8], _ value: [UInt8]) -> Self {
        put(key, value)
        return self
    }
}

@Suite("Memory and temporary engines")
struct EngineLifecycleTests {
    @Test(
        "leases: only a shared memory engine grants them; a lease's key lives until it is released or expired, and observers see both commits"
    )
    func memoryLeases() throws {
        #expect(try MemoryEngine().grantLease { _ in [1] } == nil)
        let temporary = try LevelDBEngine.temporary()
        defer { temporary.close() }
        #expect(try temporary.grantLease { _ in [1] } == nil)
        let engine = MemoryEngine(shared: true)
        let seen = SeenCommits()
        let observation = engine.observeCommits { seen.append($0) }
        defer { observation.cancel() }
        let first = try #require(try engine.grantLease { [0, UInt8($0)] })
        let second = try #require(try engine.grantLease { [0, UInt8($0)] })
        #expect(first.id != second.id && first.id != 0)
        #expect(engine.liveLeases == [first.id, second.id])
        let snapshot = try engine.snapshot()
        #expect(try snapshot.get(first.key) == [] && first.isHeld)
        engine.expireLease(first.id)
        #expect(!first.isHeld && second.isHeld)
        #expect(try engine.snapshot().get(first.key) == nil)
        // A commit conditioned on the expired lease's key (read while it held) is refused.
        _ = try snapshot.get(first.key)
        #expect(throws: StorageError.self) {
            try engine.commit(
                engine.makeBatch().withPut([9], [9]),
                conditions: StorageConditions(snapshot: snapshot, keys: [first.key]),
                sync: false)
        }
        second.release()
        second.release()
        first.release()
        #expect(engine.liveLeases.isEmpty && engine.keyCount == 0)
        #expect(
            seen.changes == [
                [.put(key: first.key, value: [])], [.put(key: second.key, value: [])], [.delete(key: first.key)],
                [.delete(key: second.key)],
            ])
    }

    @Test("a shared memory engine refuses a commit whose read keys or ranges changed, and applies nothing")
    func conditionsDetectConflicts() throws {
        let engine = MemoryEngine(shared: true)
        try engine.commit(engine.makeBatch().withPut([1], [1]), conditions: nil, sync: false)
        let seen = try engine.snapshot()
        // Another client changes key 1.
        try engine.commit(engine.makeBatch().withPut([1], [2]), conditions: nil, sync: false)
        let write = engine.makeBatch().withPut([9], [9])
        #expect {
            try engine.commit(write, conditions: StorageConditions(snapshot: seen, keys: [[1]]), sync: false)
        } throws: { ($0 as? StorageError)?.code == .conflict }
        #expect(try engine.snapshot().get([9]) == nil)
        // A key absent when read and created since is a conflict too; so is a new key in a read range.
        let seen2 = try engine.snapshot()
        try engine.commit(engine.makeBatch().withPut([5, 1], [1]), conditions: nil, sync: false)
        #expect(throws: StorageError.self) {
            try engine.commit(
                engine.makeBatch().withPut([9], [9]), conditions: StorageConditions(snapshot: seen2, keys: [[5, 1]]),
                sync: false)
        }
        #expect(throws: StorageError.self) {
            try engine.commit(
                engine.makeBatch().withPut([9], [9]),
                conditions: StorageConditions(snapshot: seen2, ranges: [.prefix([5])]), sync: false)
        }
        // Unrelated changes do not conflict; a deleted key read as present does.
        let seen3 = try engine.snapshot()
        try engine.commit(engine.makeBatch().withPut([7], [7]), conditions: nil, sync: false)
        try engine.commit(
            engine.makeBatch().withPut([9], [9]),
            conditions: StorageConditions(snapshot: seen3, keys: [[1]], ranges: [.prefix([5])]), sync: false)
        let seen4 = try engine.snapshot()
        let delete = engine.makeBatch()
        delete.delete([1])
        try engine.commit(delete, conditions: nil, sync: false)
        #expect(throws: StorageError.self) {
            try engine.commit(
                engine.makeBatch().withPut([8], [8]), conditions: StorageConditions(snapshot: seen4, keys: [[1]]),
                sync: false)
        }
    }

    @Test("a temporary engine's directory is gone after close")
    func temporaryLeavesNothing() throws {
        let engine = try LevelDBEngine.temporary()
        let path = engine.location
        try engine.commit(engine.makeBatch().withPut([1], [1]), conditions: nil, sync: true)
        #expect(FileManager.default.fileExists(atPath: path))
        engine.close()
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a large memory engine stays balanced and ordered through inserts and deletes")
    func largeTree() throws {
        let engine = MemoryEngine()
        var random = SeededRandom(seed: 3)
        var keys = Set<UInt32>()
        for _ in 0..<20 {
            let batch = engine.makeBatch()
            for _ in 0..<2_000 {
                let n = UInt32.random(in: 0..<50_000, using: &random)
                let key = withUnsafeBytes(of: n.bigEndian) { Array($0) }
                if Int.random(in: 0..<3, using: &random) == 0 {
                    batch.delete(key)
                    keys.remove(n)
                } else {
                    batch.put(key, [])
                    keys.insert(n)
                }
            }
            try engine.commit(batch, conditions: nil, sync: false)
        }
        let scanned = try scanAll(try engine.snapshot(), .all, reverse: false).map {
            $0.0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        #expect(scanned == keys.sorted())
        #expect(engine.keyCount == keys.count)
    }
}

/// Commits an observer saw, kept across threads.
final class SeenCommits: @unchecked Sendable {
    // @unchecked: the list is behind the lock.
    private let lock = NSLock()
    private var events: [[StorageCommitEvent.Change]] = []
    func append(_ event: StorageCommitEvent) { lock.withLock { events.append(event.changes) } }
    var changes: [[StorageCommitEvent.Change]] { lock.withLock { events } }
}
