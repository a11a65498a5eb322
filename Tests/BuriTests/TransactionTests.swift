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

    static let buri = BuriSchema<Ledger>(
        key: \.id, indexes: [.binary("account", \.account), .numeric("amount", \.amount)])
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
            try accounts.store([
                Account(id: "a", email: "a@x", balance: 10), Account(id: "b", email: "b@x", balance: 5),
            ])
            try ledger.store(Ledger(id: "l1", account: "a", amount: 10))
            try ledger.store(Ledger(id: "l2", account: "b", amount: 5))
            return try accounts.count() + ledger.count()
        }
        #expect(total == 4)
        #expect(try db.bucket(Account.self).keys(.index("balance", in: 6...)) == ["a"])
        #expect(try db.bucket(Ledger.self).keys(.index("account", equals: "b")) == ["l2"])
        #expect(try db.check().problems.isEmpty)
    }

    @Test(
        "a thrown error rolls back every bucket, including buckets the transaction created", arguments: Engine.allCases)
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
            guard case BuriError.uniqueViolation(_, let index, _, let holder)? = error as? BuriError else {
                return false
            }
            return index == "email" && holder == "a"
        }
        #expect(try test.rawKeys() == before)
    }

    @Test(
        "unique indexes are checked across the whole transaction: a value freed earlier in it can be taken",
        arguments: Engine.allCases)
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
            #expect(try accounts.keys() == ["a"])
            #expect(try ledger.keys() == ["l"])
            #expect(throws: BuriError.self) { try accounts.store(Account(id: "c", email: "c@x", balance: 3)) }
        }
        #expect(try db.bucket(Account.self).count() == 2)
    }

    @Test(
        "misuse is a typed error, never a deadlock: nested writes, buckets used after the transaction",
        arguments: Engine.allCases)
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
