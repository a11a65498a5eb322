import BuriStorage
import Foundation
import Synchronization
import Testing
@testable import Buri

@Suite("Several clients of one shared engine")
struct SharedEngineTests {
    @Test("concurrent read-modify-write transactions from two databases on one shared engine lose no update")
    func conflictingTransactionsRetry() throws {
        let engine = MemoryEngine(shared: true)
        var options = BuriOptions()
        options.maxCommitAttempts = 1_000
        let a = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        let b = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        try a.bucket(Account.self).store(Account(id: "counter", email: "c@x", balance: 0))
        _ = try b.bucket(Account.self)
        let rounds = 300
        DispatchQueue.concurrentPerform(iterations: 2) { client in
            let db = client == 0 ? a : b
            for _ in 0..<rounds {
                do {
                    try db.write { tx in
                        let accounts = try tx.bucket(Account.self)
                        guard var counter = try accounts.object(forKey: "counter") else { return }
                        counter.balance += 1
                        try accounts.store(counter)
                    }
                } catch {
                    Issue.record("client \(client): \(error)")
                }
            }
        }
        #expect(try a.bucket(Account.self).object(forKey: "counter")?.balance == 2 * rounds)
        #expect(try a.check().problems.isEmpty)
        #expect(try a.bucket(Account.self).keys(.index("balance", equals: IndexValue(2 * rounds))) == ["counter"])
    }

    @Test("direct stores from two clients keep unique indexes exact: one of two claims of a value wins")
    func uniqueAcrossClients() throws {
        let engine = MemoryEngine(shared: true)
        let a = try BuriDatabase(engine: engine, closesEngine: false)
        let b = try BuriDatabase(engine: engine, closesEngine: false)
        let bucketA = try a.bucket(Account.self)
        let bucketB = try b.bucket(Account.self)
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 2) { client in
            for n in 0..<200 {
                do {
                    if client == 0 {
                        try bucketA.store(Account(id: "a\(n)", email: "e\(n)@x", balance: n))
                    } else {
                        try bucketB.store(Account(id: "b\(n)", email: "e\(n)@x", balance: n))
                    }
                } catch BuriError.uniqueViolation {
                    failures.withLock { $0 += 1 }
                } catch {
                    Issue.record("\(error)")
                }
            }
        }
        // Every email is held exactly once, by whichever client committed first.
        #expect(failures.withLock { $0 } == 200)
        #expect(try bucketA.count() == 200)
        #expect(try a.check().problems.isEmpty)
    }

    @Test(
        "on an engine where every read is a round trip, Buri batches: no request per object for index reads, stores or deletes"
    )
    func readsAreBatchedOnRemoteEngines() throws {
        let engine = MemoryEngine(shared: true)
        let db = try BuriDatabase(engine: engine, closesEngine: false)
        let ledger = try db.bucket(Ledger.self)
        let entries = (0..<640).map { Ledger(id: String(format: "l%04d", $0), account: "a\($0 % 2)", amount: $0) }
        var before = engine.readRequests
        try ledger.store(entries)
        #expect(
            engine.readRequests - before < 10, "storing 640 objects took \(engine.readRequests - before) read requests")
        before = engine.readRequests
        let objects = try ledger.objects(.index("account", equals: "a1"))
        #expect(objects == entries.filter { $0.account == "a1" })
        // 320 matches: one cursor for the index, and one multi-key read per 64 of them.
        #expect(
            engine.readRequests - before <= 12,
            "an index query of 320 objects took \(engine.readRequests - before) read requests")
        before = engine.readRequests
        let page = try ledger.page(.index("amount", in: 100...), size: 100)
        #expect(page.items.map(\.amount) == Array(100..<200))
        #expect(engine.readRequests - before <= 8)
        before = engine.readRequests
        #expect(try ledger.delete(keys: entries.prefix(300).map(\.id)) == 300)
        #expect(engine.readRequests - before < 10)
        #expect(try db.check().problems.isEmpty)
    }

    @Test("a conflict that never clears ends in a typed error after the configured attempts, writing nothing")
    func boundedRetries() throws {
        let engine = MemoryEngine(shared: true)
        var options = BuriOptions()
        options.maxCommitAttempts = 3
        let a = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        let b = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        try a.bucket(Account.self).store(Account(id: "x", email: "x@x", balance: 0))
        var attempts = 0
        #expect {
            try a.write { tx in
                attempts += 1
                let accounts = try tx.bucket(Account.self)
                _ = try accounts.object(forKey: "x")
                // Another client changes what this transaction read, every time.
                try b.bucket(Account.self).store(Account(id: "x", email: "x@x", balance: attempts))
                try accounts.store(Account(id: "y", email: "y@x", balance: 1))
            }
        } throws: { error in
            guard case BuriError.conflict(let count, _)? = error as? BuriError else { return false }
            return count == 3
        }
        #expect(attempts == 3)
        #expect(try a.bucket(Account.self).object(forKey: "y") == nil)
    }
}
