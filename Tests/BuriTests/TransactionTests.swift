import BuriStorage
import Foundation
import Synchronization
import Testing
@testable import Buri

/// Accounts with a unique email, for transactions across buckets.
struct Account: BuriSupport, Equatable {
    var id: String
    var email: String
    var balance: Int

    static let buri = BuriSchema<Account>(
        key: \.id,
        indexes: [.binary("email", \.email, unique: true), .numeric("balance", \.balance)]
    )
}

struct Ledger: BuriSupport, Equatable {
    var id: String
    var account: String
    var amount: Int

    static let buri = BuriSchema<Ledger>(key: \.id, indexes: [.binary("account", \.account), .numeric("amount", \.amount)])
}

struct Rollback: Error {}

@Suite("Transactions across buckets")
struct TransactionTests {
    @Test("a write transaction commits every bucket's writes together", arguments: Engine.allCases)
    func commitsAcrossBuckets(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        let total = try db.write { tx -> Int in
            let accounts = try tx.bucket(Account.self)
            let ledger = try tx.bucket(Ledger.self)
            try accounts.store([Account(id: "a", email: "a@x", balance: 10), Account(id: "b", email: "b@x", balance: 5)])
            try ledger.store(Ledger(id: "l1", account: "a", amount: 10))
            try ledger.store(Ledger(id: "l2", account: "b", amount: 5))
            return try accounts.count() + ledger.count()
        }
        #expect(total == 4)
        #expect(try db.bucket(Account.self).keys(.index("balance", in: 6...)) == ["a"])
        #expect(try db.bucket(Ledger.self).keys(.index("account", equals: "b")) == ["l2"])
        #expect(try db.check().problems.isEmpty)
    }

    @Test("a thrown error rolls back every bucket, including buckets the transaction created", arguments: Engine.allCases)
    func thrownErrorRollsBack(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Account.self).store(Account(id: "a", email: "a@x", balance: 10))
        let before = try test.rawKeys()
        #expect(throws: Rollback.self) {
            try db.write { tx in
                let accounts = try tx.bucket(Account.self)
                try accounts.store(Account(id: "a", email: "a@y", balance: 0))
                try accounts.store(Account(id: "c", email: "c@x", balance: 1))
                try tx.bucket(Ledger.self).store(Ledger(id: "l1", account: "a", amount: -10))
                throw Rollback()
            }
        }
        #expect(try test.rawKeys() == before)
        #expect(try db.bucketNames() == ["Account"])
        #expect(try db.bucket(Account.self).object(forKey: "a")?.email == "a@x")
    }

    @Test("a unique violation in the second bucket written rolls back the first", arguments: Engine.allCases)
    func uniqueViolationInSecondBucket(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Ledger.self).store(Ledger(id: "l0", account: "z", amount: 1))
        try db.bucket(Account.self).store(Account(id: "a", email: "taken@x", balance: 1))
        let before = try test.rawKeys()
        #expect {
            try db.write { tx in
                try tx.bucket(Ledger.self).store(Ledger(id: "l1", account: "b", amount: 2))
                try tx.bucket(Account.self).store(Account(id: "b", email: "taken@x", balance: 2))
            }
        } throws: { error in
            guard case BuriError.uniqueViolation(_, let index, _, let holder)? = error as? BuriError else { return false }
            return index == "email" && holder == "a"
        }
        #expect(try test.rawKeys() == before)
    }

    @Test("unique indexes are checked across the whole transaction: a value freed earlier in it can be taken", arguments: Engine.allCases)
    func uniqueAcrossTransaction(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Account.self).store(Account(id: "a", email: "e@x", balance: 1))
        // Taken twice within one transaction, in separate calls: refused.
        #expect(throws: BuriError.self) {
            try db.write { tx in
                let accounts = try tx.bucket(Account.self)
                try accounts.store(Account(id: "b", email: "new@x", balance: 1))
                try accounts.store(Account(id: "c", email: "new@x", balance: 1))
            }
        }
        // Freed by one call and taken by a later one: allowed.
        try db.write { tx in
            let accounts = try tx.bucket(Account.self)
            try accounts.store(Account(id: "a", email: "other@x", balance: 1))
            try accounts.store(Account(id: "b", email: "e@x", balance: 2))
        }
        #expect(try db.bucket(Account.self).keys(.index("email", equals: "e@x")) == ["b"])
        #expect(try db.check().problems.isEmpty)
    }

    @Test("a transaction reads its own writes: point reads, queries, counts, deletes", arguments: Engine.allCases)
    func readsOwnWrites(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Account.self).store((0..<10).map { Account(id: "a\($0)", email: "\($0)@x", balance: $0) })
        try db.write { tx in
            let accounts = try tx.bucket(Account.self)
            try accounts.store(Account(id: "a3", email: "3@x", balance: 100))
            try accounts.delete(key: "a4")
            try accounts.store(Account(id: "b0", email: "b@x", balance: 50))
            #expect(try accounts.object(forKey: "a3")?.balance == 100)
            #expect(try accounts.object(forKey: "a4") == nil)
            #expect(try accounts.count() == 10)
            #expect(try accounts.keys(.index("balance", in: 5...)) == ["a5", "a6", "a7", "a8", "a9", "b0", "a3"])
            #expect(try accounts.keys(.index("balance", in: 2...5).descending()) == ["a5", "a2"])
            // Outside the transaction nothing has changed yet.
            #expect(try db.bucket(Account.self).object(forKey: "a3")?.balance == 3)
        }
        #expect(try db.bucket(Account.self).object(forKey: "a3")?.balance == 100)
        #expect(try db.bucket(Account.self).count() == 10)
    }

    @Test("db.read sees one snapshot of every bucket while writers go on", arguments: Engine.allCases)
    func readIsOneSnapshot(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Account.self).store(Account(id: "a", email: "a@x", balance: 1))
        try db.bucket(Ledger.self).store(Ledger(id: "l", account: "a", amount: 1))
        try db.read { tx in
            let accounts = try tx.bucket(Account.self)
            let ledger = try tx.bucket(Ledger.self)
            try db.write { w in
                try w.bucket(Account.self).store(Account(id: "b", email: "b@x", balance: 2))
                try w.bucket(Ledger.self).delete(key: "l")
            }
            #expect(try accounts.allKeys() == ["a"])
            #expect(try ledger.allKeys() == ["l"])
            #expect(throws: BuriError.self) { try accounts.store(Account(id: "c", email: "c@x", balance: 3)) }
        }
        #expect(try db.bucket(Account.self).count() == 2)
    }

    @Test("misuse is a typed error, never a deadlock: nested writes, buckets used after the transaction", arguments: Engine.allCases)
    func misuse(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        let outside = try db.bucket(Account.self)
        var escaped: Bucket<Account>?
        #expect(throws: BuriError.self) {
            try db.write { tx in
                escaped = try tx.bucket(Account.self)
                try outside.store(Account(id: "a", email: "a@x", balance: 1))
            }
        }
        #expect(throws: BuriError.self) { try db.write { _ in try db.write { _ in } } }
        try db.write { tx in escaped = try tx.bucket(Account.self) }
        #expect(throws: BuriError.self) { try escaped?.count() }
        #expect(try outside.count() == 0)
    }
}

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

    @Test("on an engine where every read is a round trip, Buri batches: no request per object for index reads, stores or deletes")
    func readsAreBatchedOnRemoteEngines() throws {
        let engine = MemoryEngine(shared: true)
        let db = try BuriDatabase(engine: engine, closesEngine: false)
        let ledger = try db.bucket(Ledger.self)
        let entries = (0..<640).map { Ledger(id: String(format: "l%04d", $0), account: "a\($0 % 2)", amount: $0) }
        var before = engine.readRequests
        try ledger.store(entries)
        #expect(engine.readRequests - before < 10, "storing 640 objects took \(engine.readRequests - before) read requests")
        before = engine.readRequests
        let objects = try ledger.objects(.index("account", equals: "a1"))
        #expect(objects == entries.filter { $0.account == "a1" })
        // 320 matches: one cursor for the index, and one multi-key read per 64 of them.
        #expect(engine.readRequests - before <= 12, "an index query of 320 objects took \(engine.readRequests - before) read requests")
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

@Suite("Online backup, in-memory and temporary databases")
struct BackupTests {
    @Test("a backup taken while a writer runs is one consistent snapshot that opens and passes check", arguments: Engine.allCases)
    func backupDuringWrites(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        try db.bucket(Account.self).store((0..<50).map { Account(id: "a\($0)", email: "\($0)@x", balance: 100) })
        _ = try db.bucket(Ledger.self)
        let stop = Mutex(false)
        let committed = Mutex(0)
        let writer = Thread {
            var n = 0
            while !stop.withLock({ $0 }) {
                n += 1
                defer { committed.withLock { $0 = n } }
                // Each transaction moves 1 between two accounts and records it: totals stay 5000.
                try? db.write { tx in
                    let accounts = try tx.bucket(Account.self)
                    guard var from = try accounts.object(forKey: "a\(n % 50)"), var to = try accounts.object(forKey: "a\((n + 7) % 50)") else { return }
                    from.balance -= 1
                    to.balance += 1
                    try accounts.store([from, to])
                    try tx.bucket(Ledger.self).store(Ledger(id: String(format: "l%08d", n), account: from.id, amount: 1))
                }
            }
        }
        writer.start()
        var copies: [String] = []
        defer { for copy in copies { try? FileManager.default.removeItem(atPath: copy) } }
        for round in 0..<3 {
            // Each copy is taken after the writer has committed more transfers (counted, not a
            // delay), so that every round copies a database that changed since the last one.
            let seen = committed.withLock { $0 }
            while committed.withLock({ $0 }) < seen + 20 { usleep(500) }
            let copy = test.directory.appendingPathComponent("backup-\(round)").path
            copies.append(copy)
            try db.backup(to: copy)
        }
        stop.withLock { $0 = true }
        while writer.isExecuting || !writer.isFinished { usleep(1_000) }
        for copy in copies {
            let restored = try BuriDatabase(path: copy)
            defer { restored.close() }
            #expect(try restored.check().problems.isEmpty)
            let accounts = try restored.bucket(Account.self).allObjects()
            let ledger = try restored.bucket(Ledger.self).count()
            #expect(accounts.count == 50)
            #expect(accounts.reduce(0) { $0 + $1.balance } == 5000)
            // Each ledger entry moved 1 away from 100: the balances above 100 add up to the entries.
            #expect(accounts.reduce(0) { $0 + abs($1.balance - 100) } <= 2 * ledger)
        }
        #expect(throws: BuriError.self) { try db.backup(to: copies[0]) }
    }

    @Test("an in-memory database touches no disk and is gone after close; a temporary one leaves no directory")
    func lifetimes() throws {
        let memory = try BuriDatabase.inMemory()
        try memory.bucket(Account.self).store(Account(id: "a", email: "a@x", balance: 1))
        #expect(memory.path == ":memory:")
        #expect(try memory.bucket(Account.self).count() == 1)
        memory.close()
        #expect(throws: BuriError.self) { try memory.bucket(Account.self) }

        let temporary = try BuriDatabase.temporary()
        let path = temporary.path
        try temporary.bucket(Account.self).store(Account(id: "a", email: "a@x", balance: 1))
        #expect(FileManager.default.fileExists(atPath: path))
        temporary.close()
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
