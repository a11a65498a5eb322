import Foundation
@testable import Buri
import LevelDB
import Testing

@Suite("Bucket: storing, fetching, deleting")
struct BucketBasicsTests {
    @Test(arguments: Engine.allCases) func storeFetchAndDeleteOneObject(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let dirk = PersonRecord(objectId: "p1", name: "Dirk", locale: "EN", age: 20)
        try people.store(dirk)
        #expect(try people.object(forKey: "p1") == dirk)
        #expect(try people.contains(key: "p1"))
        #expect(try people.object(forKey: "p2") == nil)
        #expect(try people.count() == 1)
        #expect(try people.delete(key: "p1"))
        #expect(try !people.delete(key: "p1"))
        #expect(try people.object(forKey: "p1") == nil)
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
    }

    @Test(arguments: Engine.allCases) func bucketNameDefaultsToTheTypeAndCanBeSet(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let archive = try t.db.bucket(PersonRecord.self, named: "archive")
        #expect(people.name == "Person")
        try people.store(PersonRecord(objectId: "a", name: "A", locale: "EN", age: 1))
        try archive.store(PersonRecord(objectId: "b", name: "B", locale: "EN", age: 2))
        #expect(try people.keys() == ["a"])
        #expect(try archive.keys() == ["b"])
        #expect(try t.db.bucketNames() == ["Person", "archive"])
    }

    @Test(arguments: Engine.allCases) func unicodeAndNulKeysRoundTrip(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let keys = ["ключ", "🔑", "a\u{0}b", "a", "a\u{0}", "\u{FFFF}", String(repeating: "x", count: 4096)]
        for key in keys { try people.store(PersonRecord(objectId: key, name: key, locale: "\u{0}", age: 1)) }
        for key in keys { #expect(try people.object(forKey: key)?.name == key) }
        #expect(Set(try people.keys()) == Set(keys))
        #expect(Set(try people.keys(.index("locale", equals: "\u{0}"))) == Set(keys))
        #expect(try people.keys(.index("locale", equals: "")).isEmpty)
    }

    @Test(arguments: Engine.allCases) func storeManyIsOneBatchAndTheLastDuplicateWins(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store([
            PersonRecord(objectId: "k", name: "first", locale: "EN", age: 1),
            PersonRecord(objectId: "j", name: "other", locale: "NL", age: 2),
            PersonRecord(objectId: "k", name: "second", locale: "DE", age: 3),
        ])
        #expect(try people.object(forKey: "k")?.name == "second")
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
        #expect(try people.keys(.index("age", equals: 1)).isEmpty)
        #expect(try people.keys(.index("locale", equals: "DE")) == ["k"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func storeManyWithABadObjectWritesNothing(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let before = try t.rawKeys()
        #expect(throws: BuriError.emptyKey(bucket: "Person")) {
            try people.store([
                PersonRecord(objectId: "ok", name: "", locale: "EN", age: 1),
                PersonRecord(objectId: "", name: "", locale: "EN", age: 1),
            ])
        }
        #expect(try t.rawKeys() == before)
    }

    @Test(arguments: Engine.allCases) func everythingSurvivesCloseAndReopen(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(PersonRecord.self).store(
            (0..<500).map { PersonRecord(objectId: "p\($0)", name: "n", locale: $0 % 2 == 0 ? "EN" : "NL", age: $0) })
        try t.reopen()
        let people = try t.db.bucket(PersonRecord.self)
        #expect(try people.count() == 500)
        #expect(try people.keys(.index("locale", equals: "EN")).count == 250)
        #expect(try people.keys(.index("age", in: 100...199)).count == 100)
        #expect(try people.object(forKey: "p499")?.age == 499)
        #expect(try t.db.check().isConsistent)
    }

    @Test func secondOpenOfTheSamePathInOneProcessIsAClearError() throws {
        let t = try TestDatabase(.leveldb)
        do {
            _ = try BuriDatabase(path: t.path)
            Issue.record("a second handle opened a database that is already open")
        } catch {
            guard case .storage(let storage) = error else { Issue.record("unexpected \(error)"); return }
            #expect(storage.code == .databaseInUse)
            #expect(error.description.contains("in use"))
        }
    }

    @Test(arguments: Engine.allCases) func closedDatabaseGivesATypedError(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        t.db.close()
        #expect(throws: BuriError.databaseClosed(path: t.db.path)) {
            try people.store(PersonRecord(objectId: "x", name: "", locale: "", age: 0))
        }
        #expect(throws: BuriError.databaseClosed(path: t.db.path)) { try people.object(forKey: "x") }
    }
}
