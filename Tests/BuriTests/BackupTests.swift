import BuriStorage
import Foundation
import Synchronization
import Testing
@testable import Buri

@Suite("Online backup, in-memory and temporary databases")
struct BackupTests {
    @Test(
        "a backup taken while a writer runs is one consistent snapshot that opens and passes check",
        arguments: Engine.allCases)
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
                    guard var from = try accounts.object(forKey: "a\(n % 50)"),
                        var to = try accounts.object(forKey: "a\((n + 7) % 50)")
                    else { return }
                    from.balance -= 1
                    to.balance += 1
                    try accounts.store([from, to])
                    try tx.bucket(Ledger.self).store(
                        Ledger(id: String(format: "l%08d", n), account: from.id, amount: 1))
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
            let accounts = try restored.bucket(Account.self).objects()
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
