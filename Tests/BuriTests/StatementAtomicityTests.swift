import BuriStorage
import Foundation
import Testing
@testable import Buri

/// The issue's type: a numeric index and a unique one.
struct Subscriber: BuriSupport, Equatable {
    var id: String
    var email: String
    var age: Int

    static let buri = BuriSchema<Subscriber>(
        key: \.id,
        indexes: [.numeric("age", \.age), .binary("email", \.email, unique: true)],
        bucket: "Subscriber"
    )
}

/// Every operation inside `db.write { }` is atomic on its own: one that throws leaves nothing in
/// the transaction (no pending write, no count change), even when the closure catches the error,
/// goes on and commits. As SQLite rolls back a failed statement, not its transaction.
@Suite("Each operation inside a transaction is atomic on its own")
struct StatementAtomicityTests {
    static let engines: [Engine] = Engine.allCases

    /// The bucket's state checked every way a reader can see it: the keys and objects of `expected`,
    /// in key order, by age and by email; the count; a clean `check`.
    func expectState(
        _ db: BuriDatabase, _ expected: [Subscriber], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let bucket = try db.bucket(Subscriber.self)
        let byKey = expected.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        #expect(try bucket.objects() == byKey, sourceLocation: sourceLocation)
        #expect(try bucket.count() == expected.count, sourceLocation: sourceLocation)
        let byAge = expected.sorted {
            $0.age != $1.age ? $0.age < $1.age : $0.id.utf8.lexicographicallyPrecedes($1.id.utf8)
        }
        #expect(
            try bucket.keys(.index("age", in: IndexValue(Int.min)...)) == byAge.map(\.id),
            sourceLocation: sourceLocation)
        #expect(try bucket.objects(.index("age", in: IndexValue(Int.min)...)) == byAge, sourceLocation: sourceLocation)
        #expect(
            try bucket.count(.index("age", in: IndexValue(Int.min)...)) == expected.count,
            sourceLocation: sourceLocation)
        #expect(try bucket.raw.entryCount(index: "age") == expected.count, sourceLocation: sourceLocation)
        #expect(try bucket.raw.entryCount(index: "email") == expected.count, sourceLocation: sourceLocation)
        for subscriber in expected {
            #expect(
                try bucket.keys(.index("email", equals: IndexValue(subscriber.email))) == [subscriber.id],
                sourceLocation: sourceLocation)
        }
        let report = try db.check()
        #expect(report.problems.isEmpty, "check: \(report.problems)", sourceLocation: sourceLocation)
    }

    @Test("the issue's case: a caught unique violation of one store commits nothing of it", arguments: engines)
    func caughtUniqueViolationOfOneStore(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let a = Subscriber(id: "a", email: "x@y", age: 30)
        try t.db.bucket(Subscriber.self).store(a)
        var caught: BuriError?
        try t.db.write { tx in
            let b = try tx.bucket(Subscriber.self)
            do { try b.store(Subscriber(id: "b", email: "x@y", age: 40)) } catch { caught = error as? BuriError }
            // The transaction sees nothing of it either.
            #expect(try b.object(forKey: "b") == nil)
            #expect(try b.keys(.index("age", in: 0...100)) == ["a"])
            #expect(try b.count() == 1)
            try b.store(Subscriber(id: "c", email: "c@y", age: 50))
        }
        guard case .uniqueViolation = caught else {
            Issue.record("expected a unique violation, got \(String(describing: caught))")
            return
        }
        try expectState(t.db, [a, Subscriber(id: "c", email: "c@y", age: 50)])
    }

    @Test("the issue's case: a caught unique violation in a batch commits nothing of the batch", arguments: engines)
    func caughtUniqueViolationOfABatch(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let a = Subscriber(id: "a", email: "x@y", age: 30)
        try t.db.bucket(Subscriber.self).store(a)
        try t.db.write { tx in
            let b = try tx.bucket(Subscriber.self)
            #expect(throws: BuriError.self) {
                try b.store([Subscriber(id: "d", email: "d@y", age: 41), Subscriber(id: "e", email: "x@y", age: 42)])
            }
            #expect(try b.count() == 1)
            #expect(try b.object(forKey: "d") == nil)
        }
        try expectState(t.db, [a])
        // The same batch outside a transaction: all or nothing, as it always was.
        #expect(throws: BuriError.self) {
            try t.db.bucket(Subscriber.self).store([
                Subscriber(id: "d", email: "d@y", age: 41), Subscriber(id: "e", email: "x@y", age: 42),
            ])
        }
        try expectState(t.db, [a])
    }

    @Test("a caught failure of an update keeps the object's old index entries", arguments: engines)
    func caughtFailureOfAnUpdateKeepsTheOldEntries(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let a = Subscriber(id: "a", email: "a@y", age: 30)
        let z = Subscriber(id: "z", email: "z@y", age: 31)
        try t.db.bucket(Subscriber.self).store([a, z])
        try t.db.write { tx in
            let b = try tx.bucket(Subscriber.self)
            // The update deletes a's old age and email entries before it meets z's email.
            #expect(throws: BuriError.self) { try b.store(Subscriber(id: "a", email: "z@y", age: 99)) }
            // A batch that updates a, then fails on its second object.
            #expect(throws: BuriError.self) {
                try b.store([Subscriber(id: "a", email: "new@y", age: 77), Subscriber(id: "n", email: "z@y", age: 1)])
            }
            // A batch that first stores an object under a key and then refuses it.
            #expect(throws: BuriError.self) {
                try b.store([Subscriber(id: "m", email: "m@y", age: 5), Subscriber(id: "m2", email: "m@y", age: 6)])
            }
            #expect(try b.keys(.index("age", in: 0...100)) == ["a", "z"])
        }
        try expectState(t.db, [a, z])
    }

    @Test("several caught failures in one transaction, between successful writes of every kind", arguments: engines)
    func severalCaughtFailuresBetweenSuccessfulWrites(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(Subscriber.self).store((0..<6).map { Subscriber(id: "s\($0)", email: "s\($0)@y", age: $0) })
        try t.db.write { tx in
            let b = try tx.bucket(Subscriber.self)
            try b.store(Subscriber(id: "n1", email: "n1@y", age: 50))
            #expect(throws: BuriError.self) { try b.store(Subscriber(id: "n2", email: "s1@y", age: 51)) }
            #expect(try b.delete(key: "s2"))
            #expect(throws: BuriError.self) {
                try b.store([Subscriber(id: "n3", email: "n3@y", age: 52), Subscriber(id: "", email: "e@y", age: 1)])
            }
            #expect(try b.delete(keys: ["s3", "s4", "nope"]) == 2)
            // s2's email is free again: taking it works; s5's is not.
            try b.store(Subscriber(id: "n4", email: "s2@y", age: 53))
            #expect(throws: BuriError.self) {
                try b.store([
                    Subscriber(id: "n5", email: "n5@y", age: 54), Subscriber(id: "n6", email: "s5@y", age: 55),
                ])
            }
            #expect(try b.count() == 5)
        }
        try expectState(
            t.db,
            [
                Subscriber(id: "s0", email: "s0@y", age: 0), Subscriber(id: "s1", email: "s1@y", age: 1),
                Subscriber(id: "s5", email: "s5@y", age: 5),
                Subscriber(id: "n1", email: "n1@y", age: 50), Subscriber(id: "n4", email: "s2@y", age: 53),
            ])
    }

    @Test("raw objects: a caught refusal inside a transaction leaves no trace", arguments: engines)
    func rawObjectsCaughtRefusal(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let a = Subscriber(id: "a", email: "x@y", age: 30)
        try t.db.bucket(Subscriber.self).store(a)
        func raw(_ key: String, _ email: String, _ age: Int) throws -> RawObject {
            RawObject(
                key: key, payload: try CBOREncoder().encode(Subscriber(id: key, email: email, age: age)),
                indexValues: ["age": [[IndexValue(age)]], "email": [[IndexValue(email)]]])
        }
        try t.db.write { tx in
            let b = try tx.rawBucket(named: "Subscriber")
            #expect(throws: BuriError.self) { try b.store([raw("d", "d@y", 41), raw("e", "x@y", 42)]) }
            #expect(throws: BuriError.self) {
                try b.store([raw("f", "f@y", 43), raw("g", "g@y", 44), raw("h", "f@y", 45)])
            }
            try b.store([raw("c", "c@y", 50)])
        }
        try expectState(t.db, [a, Subscriber(id: "c", email: "c@y", age: 50)])
    }

    @Test("observers see only what the transaction committed, not a failed operation's writes")
    func observersSeeNoFailedOperation() async throws {
        let t = try TestDatabase(.memory)
        let db = t.db
        let bucket = try db.bucket(Subscriber.self)
        try Self.put(db, [Subscriber(id: "a", email: "x@y", age: 30)])
        let stream = try bucket.changes()
        var iterator = stream.makeAsyncIterator()
        try Self.storeAfterACaughtFailure(db)
        let change = try #require(try await iterator.next())
        #expect(change.storedKeys == ["c"])
        #expect(change.deletedKeys.isEmpty)
    }

    /// Stores `objects` directly (the blocking call, from async tests too).
    static func put(_ db: BuriDatabase, _ objects: [Subscriber]) throws {
        try db.bucket(Subscriber.self).store(objects)
    }

    /// A transaction whose batch store fails and is caught, then stores `c` and commits.
    static func storeAfterACaughtFailure(_ db: BuriDatabase) throws {
        try db.write { tx in
            let b = try tx.bucket(Subscriber.self)
            _ = try? b.store([Subscriber(id: "d", email: "d@y", age: 41), Subscriber(id: "e", email: "x@y", age: 42)])
            try b.store(Subscriber(id: "c", email: "c@y", age: 50))
        }
    }

    /// Fails one operation inside a transaction at every read it makes, in turn: each time the
    /// closure catches the failure, stores one more object and commits. The database must then be
    /// exactly (byte for byte) what the same transaction without the failed operation commits.
    func sweep(
        _ label: String, base: (BuriDatabase) throws -> Void,
        operation: @escaping (BuriTransaction) throws -> Void
    ) throws {
        let after = Subscriber(id: "after", email: "after@y", age: 1000)
        // What the transaction commits when the operation is left out.
        let reference = try TestDatabase(.memory)
        try base(reference.db)
        try reference.db.write { tx in try tx.bucket(Subscriber.self).store(after) }
        let expected = try scanEntries(reference.db.engine.snapshot())

        var reads = 0
        while true {
            let faulty = FaultyEngine(MemoryEngine())
            let db = try BuriDatabase(engine: faulty, closesEngine: false)
            defer { db.close() }
            try base(db)
            var failed = false
            try db.write { tx in
                faulty.failAfter(reads: reads)
                do {
                    try operation(tx)
                } catch let error as BuriError {
                    guard case .storage(let storage) = error, storage.code == .ioError else { throw error }
                    failed = true
                }
                faulty.disarm()
                if failed { try tx.bucket(Subscriber.self).store(after) }
            }
            faulty.disarm()
            guard failed else { break }  // the operation made fewer reads than `reads`: every point was tried
            let state = try scanEntries(db.engine.snapshot())
            if state != expected {
                let extra = Set(state).subtracting(expected).count
                let missing = Set(expected).subtracting(state).count
                Issue.record(
                    "\(label): failing at read \(reads) left a trace: \(extra) entries more, \(missing) fewer than without the operation"
                )
            }
            #expect(try db.check().problems.isEmpty, "\(label): failing at read \(reads)")
            reads += 1
            if reads > 500 { Issue.record("\(label): more than 500 reads"); break }
        }
        #expect(reads > 0, "\(label): the operation never failed")
    }

    @Test("every write path, failing at each of its reads, leaves nothing in the transaction")
    func everyWritePathFailingAtEachRead() throws {
        let stored = (0..<5).map { Subscriber(id: "s\($0)", email: "s\($0)@y", age: $0) }
        let base = { (db: BuriDatabase) throws in try db.bucket(Subscriber.self).store(stored) }
        let operations: [(String, (BuriTransaction) throws -> Void)] = [
            ("store one new", { try $0.bucket(Subscriber.self).store(Subscriber(id: "n", email: "n@y", age: 9)) }),
            ("store one update", { try $0.bucket(Subscriber.self).store(Subscriber(id: "s1", email: "n@y", age: 9)) }),
            (
                "store many",
                {
                    try $0.bucket(Subscriber.self).store([
                        Subscriber(id: "n", email: "n@y", age: 9), Subscriber(id: "s2", email: "m@y", age: 8),
                        Subscriber(id: "o", email: "o@y", age: 7),
                    ])
                }
            ),
            ("delete by key", { _ = try $0.bucket(Subscriber.self).delete(key: "s1") }),
            ("delete by keys", { _ = try $0.bucket(Subscriber.self).delete(keys: ["s1", "s3", "s4"]) }),
            ("delete by object", { _ = try $0.bucket(Subscriber.self).delete(stored[2]) }),
            ("deleteAll", { _ = try $0.bucket(Subscriber.self).deleteAll() }),
            (
                "raw store",
                { tx in
                    let raw = try tx.rawBucket(named: "Subscriber")
                    try raw.store([
                        RawObject(
                            key: "r", payload: try CBOREncoder().encode(Subscriber(id: "r", email: "r@y", age: 3)),
                            indexValues: ["age": [[3]], "email": [["r@y"]]]),
                        RawObject(
                            key: "s0", payload: try CBOREncoder().encode(Subscriber(id: "s0", email: "q@y", age: 4)),
                            indexValues: ["age": [[4]], "email": [["q@y"]]]),
                    ])
                }
            ),
            ("raw delete", { _ = try $0.rawBucket(named: "Subscriber").delete(keys: ["s0", "s4"]) }),
            ("raw deleteAll", { _ = try $0.rawBucket(named: "Subscriber").deleteAll() }),
            ("a new bucket", { _ = try $0.bucket(PersonRecord.self) }),
        ]
        for (label, operation) in operations {
            try sweep(label, base: base, operation: operation)
        }
    }

    @Test("a failed operation of a transaction that then throws commits nothing at all", arguments: engines)
    func failedOperationThenThrow(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(Subscriber.self).store(Subscriber(id: "a", email: "x@y", age: 30))
        let before = try scanEntries(t.db.engine.snapshot())
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try t.db.write { tx in
                let b = try tx.bucket(Subscriber.self)
                try b.store(Subscriber(id: "c", email: "c@y", age: 50))
                _ = try? b.store(Subscriber(id: "b", email: "x@y", age: 40))
                throw Stop()
            }
        }
        #expect(try scanEntries(t.db.engine.snapshot()) == before)
    }

    @Test("async transactions get the same statement atomicity")
    func asyncTransaction() async throws {
        let t = try TestDatabase(.leveldb)
        let a = Subscriber(id: "a", email: "x@y", age: 30)
        try Self.put(t.db, [a])
        try await t.db.write { @Sendable tx in
            let b = try tx.bucket(Subscriber.self)
            _ = try? b.store([Subscriber(id: "d", email: "d@y", age: 41), Subscriber(id: "e", email: "x@y", age: 42)])
            _ = try? b.store(Subscriber(id: "b", email: "x@y", age: 40))
            try b.store(Subscriber(id: "c", email: "c@y", age: 50))
        }
        try expectState(t.db, [a, Subscriber(id: "c", email: "c@y", age: 50)])
    }
}
