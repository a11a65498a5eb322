import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Buri

/// Two objects always written together, in one batch, with the same generation.
struct Pair: BuriSupport, Equatable, Sendable {
    var id: String
    var generation: Int

    static let buri = BuriSchema<Pair>(key: \.id, indexes: [.numeric("generation", \.generation)])
}

/// Many threads write, delete and query the same few keys at once. Every query must return only
/// matching objects, in order, from one consistent moment; afterwards the indexes are exact.
struct ConcurrencyTests {
    static let threads = 8
    static let iterations = fullTests ? 1500 : 300
    static let locales = ["EN", "DE", "FR", "E"]
    static let tagPool = ["hot", "cold", "new", "old"]

    @Test(
        "concurrent stores, deletes and queries: every result matches its query, and the indexes end exact",
        arguments: Engine.allCases)
    func concurrentWritersAndReaders(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        let people = try db.bucket(Person.self)
        let pairs = try db.bucket(Pair.self)
        try pairs.store([Pair(id: "a", generation: 0), Pair(id: "b", generation: 0)])

        let violations = Mutex<[String]>([])
        let errors = Mutex<[String]>([])
        let counts = Mutex<[String: Int]>([:])
        @Sendable func violation(_ message: String) { violations.withLock { if $0.count < 50 { $0.append(message) } } }
        @Sendable func count(_ name: String, _ n: Int = 1) { counts.withLock { $0[name, default: 0] += n } }

        DispatchQueue.concurrentPerform(iterations: Self.threads) { thread in
            var random = SeededGenerator(seed: 0xC0_FFEE &+ UInt64(thread))
            func person() -> Person {
                var tags: [String] = []
                for tag in Self.tagPool where Bool.random(using: &random) { tags.append(tag) }
                return Person(
                    id: "c\(Int.random(in: 0..<16, using: &random))", name: "t\(thread)",
                    locale: Self.locales[Int.random(in: 0..<Self.locales.count, using: &random)],
                    age: Int.random(in: 0..<80, using: &random), tags: tags,
                    score: Double(Int.random(in: -100...100, using: &random)) / 8)
            }
            for iteration in 0..<Self.iterations {
                do {
                    switch Int.random(in: 0..<12, using: &random) {
                    case 0, 1, 2:
                        try people.store(person())
                        count("store")
                    case 3:
                        try people.store([person(), person(), person()])
                        count("store")
                    case 4:
                        try people.delete(key: "c\(Int.random(in: 0..<16, using: &random))")
                        count("delete")
                    case 5:
                        let found = try people.objects(.index("age", in: 30...40))
                        for p in found where !(30...40).contains(p.age) { violation("age 30...40 returned \(p)") }
                        if found.map(\.age) != found.map(\.age).sorted() {
                            violation("age query out of order: \(found.map(\.age))")
                        }
                        count("query", found.count)
                    case 6:
                        let found = try people.objects(.index("locale", equals: "EN"))
                        for p in found where p.locale != "EN" { violation("locale EN returned \(p)") }
                        count("query", found.count)
                    case 7:
                        let sequence = people.lazyObjects(.index("tags", equals: "hot"))
                        var n = 0
                        for p in sequence {
                            n += 1
                            if !p.tags.contains("hot") { violation("tags hot returned \(p)") }
                        }
                        if let error = sequence.error { violation("lazy tags query stopped: \(error)") }
                        count("query", n)
                    case 8:
                        let found = try people.objects(.index("locale", equals: "DE").and(.index("age", in: 10...50)))
                        for p in found where p.locale != "DE" || !(10...50).contains(p.age) {
                            violation("DE and 10...50 returned \(p)")
                        }
                        let descending = try people.objects(.index("score", in: (-5.0)...).descending())
                        let scores = descending.map(\.score)
                        if scores != scores.sorted(by: >) || scores.contains(where: { $0 < -5 }) {
                            violation("descending score query: \(scores)")
                        }
                        let prefix = try people.keys(.index("locale", prefix: "E"))
                        let all = try people.objects()
                        if Set(all.map(\.id)).count != all.count { violation("allObjects returned a key twice") }
                        count("query", found.count + descending.count + prefix.count + all.count)
                    case 9:
                        // Paging while others write: each page is in order and matches.
                        var page = try people.page(.index("age", in: 20...), size: 4)
                        var pages = 0
                        while true {
                            for p in page.items where p.age < 20 { violation("age 20... page returned \(p)") }
                            if page.items.map(\.age) != page.items.map(\.age).sorted() {
                                violation("page out of order")
                            }
                            guard let next = page.next, pages < 20 else { break }
                            page = try people.page(.index("age", in: 20...).after(next), size: 4)
                            pages += 1
                        }
                        count("query")
                    case 10:
                        // The pair is always written in one batch: every snapshot sees one generation.
                        let generation = thread * 1_000_000 + iteration
                        try pairs.store([Pair(id: "a", generation: generation), Pair(id: "b", generation: generation)])
                        count("store")
                    default:
                        let both = try pairs.objects()
                        if both.count != 2 || both[0].generation != both[1].generation {
                            violation("a pair batch was seen half-applied: \(both)")
                        }
                        let byIndex = try pairs.objects(.index("generation", in: 0...))
                        if byIndex.count != 2 || byIndex[0].generation != byIndex[1].generation {
                            violation("pair index saw a half-applied batch: \(byIndex)")
                        }
                        count("query")
                    }
                } catch {
                    errors.withLock {
                        if $0.count < 20 { $0.append("thread \(thread), iteration \(iteration): \(error)") }
                    }
                }
            }
        }

        #expect(errors.withLock { $0 } == [])
        #expect(violations.withLock { $0 } == [])
        let tally = counts.withLock { $0 }
        #expect((tally["store"] ?? 0) > 0 && (tally["delete"] ?? 0) > 0 && (tally["query"] ?? 0) > 0, "\(tally)")

        // Afterwards: check passes, and the index entries are exactly those the objects call for.
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        let objects = try people.objects()
        let descriptor = try #require(try db.bucketInfo(named: "Person"))
        #expect(
            try storedIndexEntries(db, bucket: descriptor.id) == expectedIndexEntries(objects, descriptor: descriptor))
        #expect(report.objects == objects.count + 2)
        for locale in Self.locales {
            #expect(
                try people.keys(.index("locale", equals: IndexValue(locale)))
                    == objects.filter { $0.locale == locale }.map(\.id).sorted())
        }
    }

    @Test(
        "concurrent writers to one unique index never give a value two holders (on a shared engine: from several clients)",
        arguments: Engine.allCases)
    func concurrentUniqueClaims(engine: Engine) throws {
        struct Account: BuriSupport, Equatable, Sendable {
            var id: String
            var email: String
            static let buri = BuriSchema<Account>(key: \.id, indexes: [.binary("email", \.email, unique: true)])
        }
        let test = try TestDatabase(engine)
        let db = test.db
        let accounts = try db.bucket(Account.self)
        let clients = try (0..<Self.threads).map { try test.client($0).bucket(Account.self) }
        let unexpected = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: Self.threads) { thread in
            var random = SeededGenerator(seed: 0xACC0 &+ UInt64(thread))
            for _ in 0..<(Self.iterations / 2) {
                let account = Account(
                    id: "a\(Int.random(in: 0..<6, using: &random))", email: "e\(Int.random(in: 0..<6, using: &random))")
                let accounts = clients[thread]
                do {
                    if Int.random(in: 0..<5, using: &random) == 0 {
                        try accounts.delete(account)
                    } else {
                        try accounts.store(account)
                    }
                } catch BuriError.uniqueViolation {
                    // Expected: another thread holds this email.
                } catch {
                    unexpected.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(unexpected.withLock { $0 } == [])
        let all = try accounts.objects()
        #expect(Set(all.map(\.email)).count == all.count, "an email has two holders: \(all)")
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
    }
}
