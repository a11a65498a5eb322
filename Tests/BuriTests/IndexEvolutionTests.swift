import Foundation
@testable import Buri
import LevelDB
import Testing

struct EvolvingPerson: BuriSupport {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<EvolvingPerson>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
        bucket: "People"
    )
}

/// The same stored objects, declared with the age index removed, a new name index and the
/// locale index redefined as unique-free version 2.
struct EvolvedPerson: BuriSupport {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<EvolvedPerson>(
        key: \.objectId,
        indexes: [.binary("name", \.name), .binary("locale", \.locale, version: 2)],
        bucket: "People"
    )
}

@Suite("Index evolution")
struct IndexEvolutionTests {
    @Test(arguments: Engine.allCases) func changedDeclarationsRebuildAndDropEntriesOver100kObjects(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        // 100,000 objects on LevelDB; the other local engines hold the same code paths at 20,000
        // (the suite's time). etcd commits at most --max-txn-ops (4096 in the tests' cluster)
        // writes atomically, over the network: a smaller database there, stored and rebuilt in
        // batches that fit.
        let count =
            switch engine {
            case .leveldb: 100_000
            case .etcd: 3_000
            default: 20_000
            }
        let original = try t.db.bucket(EvolvingPerson.self)
        let people = (0..<count).map {
            EvolvingPerson(
                objectId: String(format: "p%06d", $0), name: "name\($0 % 100)", locale: $0 % 2 == 0 ? "EN" : "NL",
                age: $0 % 90)
        }
        for start in stride(from: 0, to: count, by: engine == .etcd ? 1_000 : count) {
            try original.store(Array(people[start..<min(count, start + (engine == .etcd ? 1_000 : count))]))
        }
        let before = try t.db.bucketInfo(named: "People")
        let oldAgeId = try #require(before?.index(named: "age")?.id)

        let reports = ProgressLog()
        let evolved = try t.db.bucket(EvolvedPerson.self, batchSize: count / 10) { reports.append($0) }
        let last = try #require(reports.all.last)
        #expect(last.processed == count && last.total == count)
        #expect(reports.all.count == 10)
        #expect(Set(last.building) == ["name", "locale"])
        #expect(last.dropping == ["age", "locale"] || Set(last.dropping) == ["age", "locale"])

        #expect(try evolved.count(.index("name", equals: "name7")) == count / 100)
        #expect(try evolved.count(.index("locale", equals: "EN")) == count / 2)
        #expect(throws: BuriError.self) { try evolved.keys(.index("age", equals: 1)) }
        let after = try #require(try t.db.bucketInfo(named: "People"))
        #expect(after.indexes.map(\.name) == ["name", "locale"])
        #expect(after.index(named: "locale")?.version == 2)
        #expect(!after.indexes.contains { $0.id == oldAgeId })
        // Nothing remains under the dropped index's id.
        let prefix = Keyspace.indexPrefix(bucket: after.id, index: oldAgeId)
        #expect(try t.rawKeys().allSatisfy { !$0.starts(with: prefix) })
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems.prefix(5))")
        #expect(report.indexEntries == 2 * count)

        // Opening again with the same declarations changes nothing.
        let quiet = ProgressLog()
        _ = try t.db.bucket(EvolvedPerson.self) { quiet.append($0) }
        #expect(quiet.all.isEmpty)
    }

    @Test(arguments: Engine.allCases) func aBucketOpenedBeforeItWasRedefinedRefusesToWrite(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let old = try t.db.bucket(EvolvingPerson.self)
        try old.store(EvolvingPerson(objectId: "p", name: "n", locale: "EN", age: 1))
        let new = try t.db.bucket(EvolvedPerson.self)
        do {
            try old.store(EvolvingPerson(objectId: "q", name: "n", locale: "EN", age: 2))
            Issue.record("a stale Bucket wrote with index ids the catalog no longer has")
        } catch {
            #expect(error.description.contains("open it again"))
        }
        #expect(throws: BuriError.self) { try old.delete(key: "p") }
        try new.store(EvolvedPerson(objectId: "q", name: "m", locale: "NL", age: 2))
        #expect(try old.object(forKey: "q")?.name == "m")  // reads still work
        #expect(try t.db.check().isConsistent)
        // Opening the same declarations again does not invalidate anything.
        _ = try t.db.bucket(EvolvedPerson.self)
        try new.store(EvolvedPerson(objectId: "r", name: "m", locale: "NL", age: 3))
    }

    @Test(arguments: Engine.allCases) func addingAUniqueIndexOverDuplicatesFailsAndKeepsTheOldDefinition(
        engine: Engine
    ) throws {
        struct Loose: BuriSupport {
            var id: String
            var email: String
            static let buri = BuriSchema<Loose>(key: \.id, bucket: "Accounts")
        }
        struct Strict: BuriSupport {
            var id: String
            var email: String
            static let buri = BuriSchema<Strict>(
                key: \.id, indexes: [.binary("email", \.email, unique: true)], bucket: "Accounts")
        }
        let t = try TestDatabase(engine)
        try t.db.bucket(Loose.self).store([Loose(id: "a", email: "same"), Loose(id: "b", email: "same")])
        #expect(throws: BuriError.self) { try t.db.bucket(Strict.self) }
        #expect(try t.db.bucketInfo(named: "Accounts")?.indexes.isEmpty == true)
    }
}
