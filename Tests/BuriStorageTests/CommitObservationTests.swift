import BuriEngines
import BuriStorage
import Foundation
import Synchronization
import Testing

/// Collects events an engine reports (observers may be called from any thread).
final class EventLog: Sendable {
    let events = Mutex<[StorageCommitEvent]>([])
    func append(_ event: StorageCommitEvent) { events.withLock { $0.append(event) } }
    var all: [StorageCommitEvent] { events.withLock { $0 } }
}

/// Waits until `log` holds `count` events: engines that learn of commits from a change feed
/// (etcd's watch) report them a moment after the commit returns; in-process engines at once.
func settle(_ log: EventLog, count: Int) {
    var waited = 0
    while log.all.count < count, waited < 30_000 {
        usleep(2_000)
        waited += 2
    }
}

@Suite("Commit observation (engines)")
struct CommitObservationTests {
    @Test(arguments: EngineKind.allCases) func eachCommitIsReportedWholeAndInOrder(kind: EngineKind) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        let log = EventLog()
        let observation = engine.observeCommits { log.append($0) }

        // NUL bytes, an empty value, canonically equal but byte-different keys, a large value.
        let composed: [UInt8] = [0xC3, 0xA9], decomposed: [UInt8] = [0x65, 0xCC, 0x81]
        let big = [UInt8](repeating: 0xAB, count: 1 << 20)
        let first = engine.makeBatch()
        first.put([0, 1, 0], [])
        first.put(composed, [1])
        first.put(decomposed, big)
        try engine.commit(first, conditions: nil, sync: false)
        let second = engine.makeBatch()
        second.delete(composed)
        second.put([0, 1, 0], [0])
        try engine.commit(second, conditions: nil, sync: true)
        try engine.commit(engine.makeBatch(), conditions: nil, sync: false)  // empty: no commit

        settle(log, count: 2)
        let events = log.all
        #expect(events.count == 2)
        #expect(
            events.first?.changes == [
                .put(key: [0, 1, 0], value: []), .put(key: composed, value: [1]), .put(key: decomposed, value: big),
            ])
        #expect(events.last?.changes == [.delete(key: composed), .put(key: [0, 1, 0], value: [0])])
        if events.count == 2 { #expect(events[0].revision < events[1].revision) }

        observation.cancel()
        // A probe observing from before the third commit: once it has that commit, a change feed
        // has delivered it (an event, not a delay), and the cancelled observation must not have.
        let probe = EventLog()
        let probing = engine.observeCommits { probe.append($0) }
        defer { probing.cancel() }
        let third = engine.makeBatch()
        third.put([9], [9])
        try engine.commit(third, conditions: nil, sync: false)
        settle(probe, count: 1)
        #expect(probe.all.map(\.changes) == [[.put(key: [9], value: [9])]])
        #expect(log.all.count == 2, "a cancelled observation is called no more")
    }

    @Test(arguments: EngineKind.allCases) func concurrentCommitsAreReportedOncePerCommitInApplyOrder(
        kind: EngineKind
    ) throws {
        let (engine, cleanup) = try kind.make()
        defer { cleanup() }
        let log = EventLog()
        let observation = engine.observeCommits { log.append($0) }
        defer { observation.cancel() }
        // Every writer overwrites the same key: the last event must name the value that stayed.
        let committed = Mutex<[[UInt8]]>([[], [], [], []])
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            for i in 0..<100 {
                let batch = engine.makeBatch()
                batch.put([1], [UInt8(writer), UInt8(i)])
                batch.put([2, UInt8(writer)], [UInt8(i)])
                // A remote engine may refuse a commit under load (unavailable): count only those applied.
                if (try? engine.commit(batch, conditions: nil, sync: false)) != nil {
                    committed.withLock { $0[writer].append(UInt8(i)) }
                }
            }
        }
        let applied = committed.withLock { $0 }
        settle(log, count: applied.map(\.count).reduce(0, +))
        let events = log.all
        #expect(events.count == applied.map(\.count).reduce(0, +))
        #expect(applied.map(\.count).reduce(0, +) >= 390, "most commits apply")
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.revision < $1.revision })
        #expect(events.allSatisfy { $0.changes.count == 2 })
        // Each writer's commits arrive in its own order, and the last event holds the stored value.
        for writer in 0..<4 {
            let mine = events.compactMap { event -> UInt8? in
                guard case .put(let key, let value) = event.changes[1], key == [2, UInt8(writer)] else { return nil }
                return value[0]
            }
            #expect(mine == applied[writer])
        }
        if case .put(_, let value) = events.last?.changes.first {
            #expect(try engine.snapshot().get([1]) == value)
        } else {
            Issue.record("no last event")
        }
    }

    @Test func withoutObserversNoObserverIsCounted() throws {
        let engine = MemoryEngine()
        #expect(engine.commitObserverCount == 0)
        var observation: StorageObservation? = engine.observeCommits { _ in }
        #expect(engine.commitObserverCount == 1)
        _ = observation
        observation = nil  // released: cancelled
        #expect(engine.commitObserverCount == 0)
        let leveldb = try LevelDBEngine.temporary()
        defer { leveldb.close() }
        let held = leveldb.observeCommits { _ in }
        #expect(leveldb.commitObserverCount == 1)
        held.cancel()
        held.cancel()  // idempotent
        #expect(leveldb.commitObserverCount == 0)
    }
}
