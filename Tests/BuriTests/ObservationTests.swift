import BuriCodec
import BuriStorage
import Foundation
import Synchronization
import Testing
@testable import Buri

/// A second type, in a bucket of its own, for writes unrelated to `PersonRecord` queries.
struct Memo: BuriSupport, Equatable, Sendable {
    var id: String
    var text: String
    static let buri = BuriSchema<Memo>(key: \.id, indexes: [.binary("text", \.text)])
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing instead of hanging if it takes longer than `seconds`.
func within<R: Sendable>(
    _ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> R
) async throws -> R {
    try await withThrowingTaskGroup(of: R?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else { throw TimedOut(what: what) }
        return result
    }
}

/// A value shared between a test and its consumer task.
final class Shared<Value: Sendable>: Sendable {
    let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    var current: Value { value.withLock { $0 } }
    func update(_ body: (inout Value) -> Void) { value.withLock { body(&$0) } }
}

/// Runs `body(0..<count)` at once on threads outside Swift's cooperative pool; returns when all end.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            DispatchQueue.concurrentPerform(iterations: count, execute: body)
            done.resume()
        }
    }
}

/// Waits (polling) until `condition` holds. Generous: on a loaded 2-core machine the cooperative
/// pool can be held by other suites' synchronous tests for many seconds; no timing is asserted.
func eventually(_ what: String, seconds: Double = 90, _ condition: @Sendable () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { throw TimedOut(what: what) }
        try await Task.sleep(nanoseconds: 2_000_000)
    }
}

@Suite("Change observation")
struct ObservationTests {
    // MARK: Change streams

    @Test(arguments: Engine.allCases) func observersSeeExactlyTheCommittedSequenceUnderConcurrentWriters(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let db = t.db
        let people = try db.bucket(PersonRecord.self)
        let other = try t.client(1)  // on .shared a second client: its commits must reach us too
        let otherPeople = try other.bucket(PersonRecord.self)
        let stream = try people.changes(includingObjects: true)

        let writers = 4, commits = 30
        struct Failed: Error {}
        // Each writer: transactions over shared keys, every fifth one rolled back. (On threads of
        // their own, not the cooperative pool the consumer and other suites need.)
        await onThreads(writers) { w in
            let database = w % 2 == 0 ? db : other
            for i in 0..<commits {
                let tag = "w\(w)-\(i)"
                _ = try? database.write { tx in
                    let bucket = try tx.bucket(PersonRecord.self)
                    try bucket.store(PersonRecord(objectId: "k\(i % 7)", name: tag, locale: "EN", age: i))
                    try bucket.store(PersonRecord(objectId: "k\((i + 3) % 7)", name: tag, locale: "NL", age: w))
                    if i % 4 == 1 { try bucket.delete(key: "k\((i + 5) % 7)") }
                    if i % 5 == 4 {
                        try bucket.store(PersonRecord(objectId: "rolled-back", name: tag, locale: "", age: 0))
                        throw Failed()
                    }
                }
            }
        }
        let expected = writers * (commits - commits / 5)
        // A sentinel commit after the writers: nothing may come between the last of theirs and it.
        try await otherPeople.store(PersonRecord(objectId: "sentinel", name: "end", locale: "", age: 0))

        let seen = try await within(90, "\(expected + 1) commits") {
            var seen: [BucketChange<PersonRecord>] = []
            for try await change in stream {
                seen.append(change)
                if change.storedKeys == ["sentinel"] { break }
            }
            return seen
        }
        #expect(seen.count == expected + 1)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.revision < $1.revision })
        #expect(!seen.contains { $0.changes.contains { $0.key == "rolled-back" } }, "a rolled-back write was observed")

        var order: [Int: [Int]] = [:]
        var replay: [String: PersonRecord] = [:]
        for change in seen.dropLast() {
            // Whole: every object of the commit carries the same tag and both stores are there.
            var tags = Set<String>()
            for entry in change.changes {
                switch entry {
                case .stored(let key, let object?):
                    tags.insert(object.name)
                    replay[key] = object
                case .stored(let key, nil):
                    Issue.record("stored \(key) without its object")
                case .deleted(let key):
                    replay[key] = nil
                }
            }
            #expect(tags.count == 1)
            #expect(change.storedKeys.count == 2)
            if let tag = tags.first {
                let parts = tag.dropFirst().split(separator: "-").compactMap { Int($0) }
                order[parts[0], default: []].append(parts[1])
                // A delete of a key absent at the time writes nothing; one present is reported.
                #expect(change.deletedKeys.allSatisfy { parts[1] % 4 == 1 && $0 == "k\((parts[1] + 5) % 7)" })
            }
        }
        for w in 0..<writers {
            #expect(order[w] == (0..<commits).filter { $0 % 5 != 4 }, "writer \(w)'s commits, in its order")
        }
        // Replaying the observed sequence gives the stored state: the order is the commit order.
        replay["sentinel"] = PersonRecord(objectId: "sentinel", name: "end", locale: "", age: 0)
        let stored = try people.entries(.all)
        #expect(stored.count == replay.count)
        for (key, object) in stored { #expect(replay[key] == object, "object \(key)") }
    }

    @Test(arguments: Engine.allCases) func aDatabaseStreamShowsATransactionAsOneCommitAcrossBuckets(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let stream = try t.db.changes(includingObjects: true)
        let composed = "\u{E9}", decomposed = "e\u{301}"  // two keys: c3 a9 and 65 cc 81
        try await t.db.write { tx in
            try tx.bucket(PersonRecord.self).store(PersonRecord(objectId: composed, name: "a", locale: "EN", age: 1))
            try tx.bucket(PersonRecord.self).store(PersonRecord(objectId: decomposed, name: "b", locale: "EN", age: 2))
            try tx.bucket(Memo.self).store(Memo(id: "n\0x", text: "created in the transaction"))  // a new bucket
        }
        _ = try await people.delete(key: composed)
        let seen = try await within(90, "two commits") {
            var seen: [DatabaseChange] = []
            for try await change in stream {
                seen.append(change)
                if seen.count == 2 { break }
            }
            return seen
        }
        #expect(seen.count == 2)
        let first = try #require(seen.first)
        #expect(first.buckets.map(\.bucket) == ["Person", "Memo"])
        // Two keys, though `==` on String calls them equal; a transaction commits in key order.
        #expect(
            first.buckets.first.map { $0.storedKeys.map { Array($0.utf8) } } == [
                Array(decomposed.utf8), Array(composed.utf8),
            ])
        #expect(first.buckets.last?.storedKeys == ["n\0x"])
        if case .stored(_, let payload?) = first.buckets.last?.changes.first {
            #expect(try CBORDecoder().decode(Memo.self, from: payload).text == "created in the transaction")
        } else {
            Issue.record("the note's payload is missing")
        }
        #expect(seen.last?.buckets.map(\.bucket) == ["Person"])
        #expect(seen.last?.buckets.first.map { $0.deletedKeys.map { Array($0.utf8) } } == [Array(composed.utf8)])
    }

    @Test(arguments: [Engine.memory, .leveldb]) func aSlowConsumerGetsWhatWasQueuedThenATypedError(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let stream = try people.changes(bufferLimit: 3)
        for i in 0..<5 { try await people.store(PersonRecord(objectId: "p\(i)", name: "", locale: "EN", age: i)) }
        var keys: [String] = []
        do {
            for try await change in stream { keys += change.storedKeys }
            Issue.record("the stream ended without an error")
        } catch {
            #expect(
                error == .observerFellBehind(bucket: "Person", limit: 3) || "\(error)".contains("fell 3 commits behind")
            )
        }
        #expect(keys == ["p0", "p1", "p2"], "the commits queued arrive first, none skipped silently")
        #expect(throws: BuriError.self) { _ = try people.changes(bufferLimit: 0) }
    }

    // MARK: Live queries

    @Test(arguments: Engine.allCases) func everyLiveQueryEmissionEqualsAFreshQueryAtACommit(engine: Engine) async throws
    {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let query = Query.index("age", in: 10...19)
        let states = await Shared<[[PersonRecord]]>([try people.objects(query)])
        let emissions = Shared<[[PersonRecord]]>([])
        let live = try people.observe(query)
        let consumer = Task {
            for try await result in live {
                emissions.update { $0.append(result) }
                try await Task.sleep(nanoseconds: 300_000)  // slower than the writer: coalescing
            }
        }
        var random = SeededGenerator(seed: 14)
        for i in 0..<150 {
            let key = "p\(Int.random(in: 0..<12, using: &random))"
            if i % 9 == 8 {
                try await people.delete(key: key)
            } else {
                try await people.store(
                    PersonRecord(
                        objectId: key, name: "n\(i)", locale: "EN", age: Int.random(in: 0..<30, using: &random)))
            }
            let now = try await people.objects(query)  // the only writer: this is the state at commit i
            states.update { $0.append(now) }
        }
        let final = states.current.last ?? []
        try await eventually("the live query to reach the last state") { emissions.current.last == final }
        consumer.cancel()
        _ = await consumer.result

        let all = states.current
        var position = 0
        for (n, emission) in emissions.current.enumerated() {
            guard let found = all[position...].firstIndex(of: emission) else {
                Issue.record("emission \(n) equals no state at or after the previous one's")
                break
            }
            position = found
        }
        #expect(emissions.current.count <= all.count)
    }

    @Test(arguments: Engine.allCases) func unrelatedWritesCauseNoEmission(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let memos = try t.db.bucket(Memo.self)
        let otherClient = try t.client(1)
        let otherMemos = try otherClient.bucket(Memo.self)
        try await people.store(PersonRecord(objectId: "p0", name: "", locale: "EN", age: 30))
        let counts = Shared<[Int]>([])
        let live = try people.observeCount(.index("locale", equals: "EN"))
        let consumer = Task {
            for try await count in live { counts.update { $0.append(count) } }
        }
        try await eventually("the first emission") { counts.current.count == 1 }
        for i in 0..<40 {
            try await memos.store(Memo(id: "n\(i)", text: "unrelated"))
            try await otherMemos.store(Memo(id: "m\(i)", text: "unrelated, other client"))
        }
        try await t.db.write { tx in try tx.bucket(Memo.self).store(Memo(id: "tx", text: "unrelated")) }
        try await people.store(PersonRecord(objectId: "p1", name: "", locale: "EN", age: 31))
        try await eventually("the related write's emission") { counts.current.count == 2 }
        for i in 0..<40 { _ = try await memos.delete(key: "n\(i)") }
        try await people.store(PersonRecord(objectId: "p2", name: "", locale: "EN", age: 32))
        try await eventually("the second related write's emission") { counts.current.count == 3 }
        // Had any unrelated write emitted, the counts would repeat a value or number more than 3.
        #expect(counts.current == [1, 2, 3])
        consumer.cancel()
        _ = await consumer.result
    }

    @Test(arguments: Engine.allCases) func writesToTheSameBucketOutsideTheQueryCauseNoEmission(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store([
            PersonRecord(objectId: "p0", name: "a", locale: "EN", age: 30),
            PersonRecord(objectId: "q0", name: "a", locale: "NL", age: 30),
        ])
        let emissions = Shared<[[String]]>([])
        let live = try people.observe(.index("locale", equals: "EN"))
        let consumer = Task {
            for try await english in live { emissions.update { $0.append(english.map(\.name)) } }
        }
        try await eventually("the first emission") { emissions.current.count == 1 }
        // Objects outside the query's range, new and changed, in the same bucket: nothing to redraw.
        for i in 0..<30 {
            try await people.store(PersonRecord(objectId: "q\(i)", name: "n\(i)", locale: "NL", age: i))
        }
        _ = try await people.delete(key: "q1")
        // A result whose content changes without its index entries changing: one emission.
        try await people.store(PersonRecord(objectId: "p0", name: "b", locale: "EN", age: 30))
        try await eventually("the changed result") { emissions.current.count == 2 }
        // An object moving into the range: one emission.
        try await people.store(PersonRecord(objectId: "q2", name: "c", locale: "EN", age: 2))
        try await eventually("the object that moved in") { emissions.current.count == 3 }
        #expect(emissions.current == [["a"], ["b"], ["b", "c"]])
        consumer.cancel()
        _ = await consumer.result
    }

    @Test(arguments: Engine.allCases) func aBurstCoalescesAndEndsOnTheLatestState(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let live = try people.observeCount()
        var iterator = live.makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        for i in 0..<100 { try await people.store(PersonRecord(objectId: "p\(i)", name: "", locale: "EN", age: i)) }
        #expect(try await iterator.next() == 100, "one refresh for the whole burst, on the latest state")
        try await people.store(PersonRecord(objectId: "p100", name: "", locale: "EN", age: 100))
        #expect(try await iterator.next() == 101, "no stale refresh was left queued")
    }

    // MARK: Life cycle

    @Test(arguments: Engine.allCases) func cancellingTheTaskReleasesTheObserver(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        #expect(t.db.activeObservationCount == 0)
        #expect(!t.db.changeHub.isObservingEngine)
        weak var source: ObservationSource<UInt64>?
        weak var changeSource: ObservationSource<ParsedCommit>?
        let started = Shared(0)
        var tasks: [Task<Void, any Error>] = []
        do {
            let live = try people.observe(.index("age", in: 0...))
            let changes = try people.changes()
            source = live.source
            changeSource = changes.source
            tasks.append(
                Task {
                    for try await _ in live { started.update { $0 += 1 } }
                })
            tasks.append(
                Task {
                    for try await _ in changes {}
                })
        }
        try await eventually("the first emission") { started.current == 1 }
        #expect(t.db.activeObservationCount == 2)
        #expect(t.db.changeHub.isObservingEngine)
        for task in tasks { task.cancel() }
        for task in tasks { _ = await task.result }
        tasks = []
        let database = t.db
        try await eventually("the observers to be released") { database.activeObservationCount == 0 }
        #expect(source == nil)
        #expect(changeSource == nil)
        // The engine observation goes with the last observer (just after, off the caller's thread).
        try await eventually("the engine observation to end") { !database.changeHub.isObservingEngine }
        if let memory = t.db.engine as? MemoryEngine { #expect(memory.commitObserverCount == 0) }
        if let leveldb = t.db.engine as? LevelDBEngine { #expect(leveldb.commitObserverCount == 0) }
        try await people.store(PersonRecord(objectId: "after", name: "", locale: "EN", age: 1))  // nobody to call

        // Released without ever being iterated: gone too.
        do {
            let unused = try people.observeCount()
            let unusedChanges = try t.db.changes()
            #expect(t.db.activeObservationCount == 2)
            _ = (unused, unusedChanges)
        }
        #expect(t.db.activeObservationCount == 0)
    }

    @Test func closingTheDatabaseEndsLiveQueries() async throws {
        let db = try BuriDatabase.inMemory()
        let people = try db.bucket(PersonRecord.self)
        let live = try people.observeCount()
        let emitted = Shared(0)
        let consumer = Task {
            for try await _ in live { emitted.update { $0 += 1 } }
        }
        try await eventually("the first emission") { emitted.current == 1 }
        db.close()
        let outcome = try await within(90, "the loop to end") { await consumer.result }
        switch outcome {
        case .success: break
        case .failure(let error): #expect(error as? BuriError == .databaseClosed(path: ":memory:"))
        }
        #expect(throws: BuriError.self) { _ = try people.observeCount() }
    }

    @Test func aTransactionsBucketCannotBeObserved() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        try db.write { tx in
            let people = try tx.bucket(PersonRecord.self)
            #expect(throws: BuriError.self) { _ = try people.observeCount() }
        }
    }

    // MARK: async/await

    actor Screen {
        let people: Bucket<PersonRecord>
        var shown: [String] = []
        init(people: Bucket<PersonRecord>) { self.people = people }
        func load() async throws {
            try await people.store(PersonRecord(objectId: "a1", name: "Ada", locale: "EN", age: 36))
            shown = try await people.objects(.index("locale", equals: "EN")).map(\.name)
        }
    }

    @Test(arguments: Engine.allCases) func asyncCallsWorkFromAnActor(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let screen = Screen(people: people)
        try await screen.load()
        #expect(await screen.shown == ["Ada"])
        try await people.store([
            PersonRecord(objectId: "b", name: "B", locale: "NL", age: 1),
            PersonRecord(objectId: "c", name: "C", locale: "NL", age: 2),
        ])
        #expect(try await people.count(.index("locale", equals: "NL")) == 2)
        #expect(try await people.keys(.index("age", in: ...2)) == ["b", "c"])
        #expect(try await people.object(forKey: "c")?.name == "C")
        #expect(try await people.delete(key: "c"))
        #expect(try await people.delete(keys: ["b", "zz"]) == 1)

        let stored = try await t.db.write { tx -> Int in
            try tx.bucket(PersonRecord.self).store(PersonRecord(objectId: "tx", name: "T", locale: "EN", age: 5))
            return try tx.bucket(PersonRecord.self).count()
        }
        #expect(stored == 2)
        struct AppError: Error, Equatable {}
        await #expect(throws: AppError()) {
            try await t.db.write { tx in
                try tx.bucket(PersonRecord.self).store(PersonRecord(objectId: "gone", name: "", locale: "", age: 0))
                throw AppError()
            }
        }
        #expect(try await t.db.read { tx in try tx.bucket(PersonRecord.self).contains(key: "gone") } == false)
        await #expect(throws: BuriError.self) {
            try await people.store(PersonRecord(objectId: "", name: "", locale: "", age: 0))  // empty key
        }
    }
}

@Suite("Change observation under churn")
struct ObservationTestsOfChurn {
    @Test(arguments: [Engine.memory, .leveldb]) func observersComingAndGoingDuringCommitsNeverDeadlock(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let database = t.db
        try await within(60, "writers and subscribers to finish") {
            await onThreads(2) { thread in
                if thread == 0 {
                    for i in 0..<300 {
                        try? people.store(PersonRecord(objectId: "p\(i % 17)", name: "", locale: "EN", age: i))
                    }
                } else {
                    // Streams that overflow (and end) inside a commit's delivery, made and dropped
                    // while commits run.
                    var held: [(ChangeStream<BucketChange<PersonRecord>>?, LiveQuery<Int>?)] = []
                    for _ in 0..<200 {
                        held.append((try? people.changes(bufferLimit: 1), try? people.observeCount()))
                        if held.count > 8 { held.removeFirst() }  // a few live across several commits
                        usleep(100)
                    }
                }
            }
        }
        let released = try await within(90, "release") {
            try await eventually("every observer released") { database.activeObservationCount == 0 }
            return true
        }
        #expect(released)
        #expect(try people.count() == 17)
    }
}
