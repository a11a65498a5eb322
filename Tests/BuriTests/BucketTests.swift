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
        #expect(try people.keys(index: "locale", equalTo: "EN").isEmpty)
    }

    @Test(arguments: Engine.allCases) func bucketNameDefaultsToTheTypeAndCanBeSet(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let archive = try t.db.bucket(PersonRecord.self, named: "archive")
        #expect(people.name == "Person")
        try people.store(PersonRecord(objectId: "a", name: "A", locale: "EN", age: 1))
        try archive.store(PersonRecord(objectId: "b", name: "B", locale: "EN", age: 2))
        #expect(try people.allKeys() == ["a"])
        #expect(try archive.allKeys() == ["b"])
        #expect(try t.db.bucketNames() == ["Person", "archive"])
    }

    @Test(arguments: Engine.allCases) func unicodeAndNulKeysRoundTrip(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let keys = ["ключ", "🔑", "a\u{0}b", "a", "a\u{0}", "\u{FFFF}", String(repeating: "x", count: 4096)]
        for key in keys { try people.store(PersonRecord(objectId: key, name: key, locale: "\u{0}", age: 1)) }
        for key in keys { #expect(try people.object(forKey: key)?.name == key) }
        #expect(Set(try people.allKeys()) == Set(keys))
        #expect(Set(try people.keys(index: "locale", equalTo: "\u{0}")) == Set(keys))
        #expect(try people.keys(index: "locale", equalTo: "").isEmpty)
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
        #expect(try people.keys(index: "locale", equalTo: "EN").isEmpty)
        #expect(try people.keys(index: "age", equalTo: 1).isEmpty)
        #expect(try people.keys(index: "locale", equalTo: "DE") == ["k"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func storeManyWithABadObjectWritesNothing(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let before = try t.rawKeys()
        #expect(throws: BuriError.emptyKey(bucket: "Person")) {
            try people.store([PersonRecord(objectId: "ok", name: "", locale: "EN", age: 1), PersonRecord(objectId: "", name: "", locale: "EN", age: 1)])
        }
        #expect(try t.rawKeys() == before)
    }

    @Test(arguments: Engine.allCases) func everythingSurvivesCloseAndReopen(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(PersonRecord.self).store((0..<500).map { PersonRecord(objectId: "p\($0)", name: "n", locale: $0 % 2 == 0 ? "EN" : "NL", age: $0) })
        try t.reopen()
        let people = try t.db.bucket(PersonRecord.self)
        #expect(try people.count() == 500)
        #expect(try people.keys(index: "locale", equalTo: "EN").count == 250)
        #expect(try people.keys(index: "age", in: 100...199).count == 100)
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
        #expect(throws: BuriError.databaseClosed(path: t.db.path)) { try people.store(PersonRecord(objectId: "x", name: "", locale: "", age: 0)) }
        #expect(throws: BuriError.databaseClosed(path: t.db.path)) { try people.object(forKey: "x") }
    }
}

@Suite("Bucket: queries")
final class BucketQueryTests {
    /// Kept alive for the whole test: dropping it closes the database.
    var t: TestDatabase!
    var people: Bucket<PersonRecord>!

    func setUp(_ engine: Engine) throws {
        t = try TestDatabase(engine)
        people = try t.db.bucket(PersonRecord.self)
        try people.store([
            PersonRecord(objectId: "a", name: "Ann", locale: "EN", age: 5),
            PersonRecord(objectId: "b", name: "Bob", locale: "EN", age: 10),
            PersonRecord(objectId: "c", name: "Cat", locale: "E", age: 30),
            PersonRecord(objectId: "d", name: "Dan", locale: "NL", age: -7),
            PersonRecord(objectId: "e", name: "Eve", locale: "EN-GB", age: 20),
            PersonRecord(objectId: "f", name: "Fay", locale: "", age: 2),
        ])
    }

    @Test(arguments: Engine.allCases) func numericRangeUsesNumericOrderNotText(engine: Engine) throws {
        try setUp(engine)
        // The original stored "5", "10", "30" as text, so 0...20 returned the wrong set.
        #expect(try people.keys(index: "age", in: 0...20) == ["f", "a", "b", "e"])
        #expect(try people.keys(index: "age", in: -10...0) == ["d"])
        #expect(try people.objects(index: "age", in: 5...10).map(\.age) == [5, 10])
    }

    @Test(arguments: Engine.allCases) func exactMatchIsNotAPrefixMatch(engine: Engine) throws {
        try setUp(engine)
        #expect(try people.keys(index: "locale", equalTo: "E") == ["c"])
        #expect(try people.keys(index: "locale", equalTo: "EN") == ["a", "b"])
        #expect(try people.keys(index: "locale", equalTo: "") == ["f"])
        #expect(try people.keys(index: "age", equalTo: 2) == ["f"])   // not 20..29
        #expect(try people.keys(index: "locale", prefix: "E") == ["c", "a", "b", "e"])
        #expect(try people.keys(index: "locale", prefix: "") == ["f", "c", "a", "b", "e", "d"])
    }

    @Test(arguments: Engine.allCases) func rangeBoundsAreInclusiveExclusiveOrOpenAsWritten(engine: Engine) throws {
        try setUp(engine)
        #expect(try people.keys(.index("age", in: 5...20)) == ["a", "b", "e"])
        #expect(try people.keys(.index("age", in: 5..<20)) == ["a", "b"])
        #expect(try people.keys(.index("age", in: 10...)) == ["b", "e", "c"])
        #expect(try people.keys(.index("age", in: ...5)) == ["d", "f", "a"])
        #expect(try people.keys(.index("age", in: ..<5)) == ["d", "f"])
        #expect(try people.keys(.index("age", from: .exclusive(5), to: .exclusive(30))) == ["b", "e"])
        #expect(try people.keys(.index("age", in: 4.5...10.5)) == ["a", "b"])
        #expect(try people.keys(.index("age", from: .inclusive(30), to: .inclusive(5))).isEmpty)
        #expect(try people.keys(.index("locale", in: "E"..."EN")) == ["c", "a", "b"])
        #expect(try people.keys(.index("locale", in: "EN"...)) == ["a", "b", "e", "d"])
    }

    @Test(arguments: Engine.allCases) func resultsComeInValueThenKeyOrderAndDescendingReverses(engine: Engine) throws {
        try setUp(engine)
        #expect(try people.objects(.index("age", in: ...100)).map(\.age) == [-7, 2, 5, 10, 20, 30])
        #expect(try people.objects(.index("age", in: ...100).descending()).map(\.age) == [30, 20, 10, 5, 2, -7])
        #expect(try people.keys(.index("locale", equals: "EN").descending()) == ["b", "a"])
        #expect(try people.allKeys() == ["a", "b", "c", "d", "e", "f"])
        #expect(try people.keys(Query.all.descending()) == ["f", "e", "d", "c", "b", "a"])
    }

    @Test(arguments: Engine.allCases) func limitOffsetAndCount(engine: Engine) throws {
        try setUp(engine)
        #expect(try people.keys(.index("age", in: ...100).limit(2)) == ["d", "f"])
        #expect(try people.keys(.index("age", in: ...100).offset(2).limit(2)) == ["a", "b"])
        #expect(try people.keys(.index("age", in: ...100).offset(10)).isEmpty)
        #expect(try people.count(.index("locale", prefix: "EN")) == 3)
        #expect(try people.count() == 6)
        #expect(try people.min(index: "age") == -7)
        #expect(try people.max(index: "age") == 30)
        #expect(try people.min(index: "locale") == "")
        #expect(try people.max(index: "locale") == "NL")
    }

    @Test(arguments: Engine.allCases) func keysOnlyQueriesNeverReadRecords(engine: Engine) throws {
        try setUp(engine)
        // Damage every record's payload, through the engine underneath: keys-only queries must
        // still answer, object queries must not.
        let damage = t.db.engine.makeBatch()
        for key in try scanKeys(t.db.engine.snapshot()) where key.first == Keyspace.recordTag { damage.put(key, [0xFF, 0xFF]) }
        try t.db.engine.commit(damage, conditions: nil, sync: false)
        try t.reopen()
        let reopened = try t.db.bucket(PersonRecord.self)
        #expect(try reopened.keys(index: "locale", equalTo: "EN") == ["a", "b"])
        #expect(try reopened.count(.index("age", in: 0...20)) == 4)
        #expect(throws: BuriError.self) { try reopened.objects(index: "locale", equalTo: "EN") }
    }

    @Test(arguments: Engine.allCases) func lazySequencesStreamTheSameResults(engine: Engine) throws {
        try setUp(engine)
        #expect(Array(people.lazyKeys(.index("age", in: 0...20))) == ["f", "a", "b", "e"])
        #expect(Array(people.lazyObjects()).map(\.objectId) == ["a", "b", "c", "d", "e", "f"])
        let bad = people.lazyObjects(.index("nope", equals: 1))
        #expect(Array(bad).isEmpty)
        #expect(bad.error == .unknownIndex(bucket: "Person", index: "nope", known: ["locale", "age"]))
    }

    @Test(arguments: Engine.allCases) func negativeFractionalAnd64BitNumbersShareOneExactOrder(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Measurement.self)
        let values: [(String, Double, Int64, UInt64)] = [
            ("m1", -1e300, .min, 0), ("m2", -0.5, -1, 1), ("m3", -0.0, 0, UInt64(Int64.max)),
            ("m4", 0.25, 9_007_199_254_740_993, UInt64(Int64.max) + 1), ("m5", .infinity, .max, .max),
            ("m6", -.infinity, 9_007_199_254_740_992, 42), ("m7", Double.leastNonzeroMagnitude, 20, 20),
        ]
        try bucket.store(values.map { Measurement(id: $0.0, value: $0.1, count: $0.2, big: $0.3, label: nil) })
        #expect(try bucket.keys(.index("value", in: ...IndexValue.init(floatLiteral: 1e308))) == ["m6", "m1", "m2", "m3", "m7", "m4"])
        #expect(try bucket.keys(index: "value", equalTo: 0) == ["m3"])       // -0.0 == 0
        #expect(try bucket.keys(index: "value", equalTo: .init(floatLiteral: .infinity)) == ["m5"])
        #expect(try bucket.keys(.index("count", in: 9_007_199_254_740_993...)) == ["m4", "m5"])
        #expect(try bucket.keys(index: "count", equalTo: .init(floatLiteral: 9_007_199_254_740_992.0)) == ["m6"])
        #expect(try bucket.keys(index: "count", equalTo: 20.0) == ["m7"])
        #expect(try bucket.keys(.index("count", in: ...(-1))) == ["m1", "m2"])
        #expect(try bucket.keys(.index("big", in: IndexValue(UInt64(Int64.max))...)) == ["m3", "m4", "m5"])
        #expect(try bucket.keys(index: "big", equalTo: IndexValue(UInt64.max)) == ["m5"])
        #expect(try bucket.keys(.index("label", prefix: "")).isEmpty)   // nil optionals have no entry
    }

    @Test(arguments: Engine.allCases) func queriesThatDoNotFitTheIndexAreTypedErrors(engine: Engine) throws {
        try setUp(engine)
        #expect(throws: BuriError.unknownIndex(bucket: "Person", index: "height", known: ["locale", "age"])) {
            try people.keys(index: "height", equalTo: 1)
        }
        do {
            _ = try people.keys(index: "age", equalTo: "twenty")
            Issue.record("a string matched a numeric index")
        } catch {
            guard case .invalidQuery(let bucket, let index, _) = error else { Issue.record("\(error)"); return }
            #expect(bucket == "Person" && index == "age")
        }
        #expect(throws: BuriError.self) { try people.keys(.index("age", prefix: "1")) }
        #expect(throws: BuriError.self) { try people.keys(.index("age", equals: 1, 2)) }
    }
}

@Suite("Bucket: index maintenance")
struct IndexMaintenanceTests {
    @Test(arguments: Engine.allCases) func updateMovesIndexEntries(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(PersonRecord(objectId: "p", name: "P", locale: "EN", age: 20))
        try people.store(PersonRecord(objectId: "p", name: "P", locale: "NL", age: 21))
        #expect(try people.keys(index: "locale", equalTo: "EN").isEmpty)
        #expect(try people.keys(index: "age", equalTo: 20).isEmpty)
        #expect(try people.keys(index: "locale", equalTo: "NL") == ["p"])
        #expect(try people.keys(index: "age", equalTo: 21) == ["p"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func deleteByAChangedObjectLeavesNoStaleEntries(engine: Engine) throws {
        // The original computed index keys from the in-memory object and orphaned the stored ones.
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        var person = PersonRecord(objectId: "p", name: "P", locale: "EN", age: 20)
        try people.store(person)
        person.locale = "FR"
        person.age = 99
        #expect(try people.delete(person))
        #expect(try people.keys(index: "locale", equalTo: "EN").isEmpty)
        #expect(try people.keys(index: "age", equalTo: 20).isEmpty)
        let report = try t.db.check()
        #expect(report.isConsistent)
        #expect(report.indexEntries == 0)
    }

    @Test(arguments: Engine.allCases) func deleteAllLeavesNoKeyOfTheBucketBehind(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let others = try t.db.bucket(PersonRecord.self, named: "Person2")
        try people.store((0..<300).map { PersonRecord(objectId: "p\($0)", name: "n", locale: "L\($0 % 3)", age: $0) })
        try others.store(PersonRecord(objectId: "keep", name: "k", locale: "EN", age: 1))
        let id = people.raw.descriptor.id
        #expect(try people.deleteAll() == 300)
        // The old generation's keys go in the background purge; wait for it here.
        try t.db.purgeRetiredBuckets()
        let keys = try t.rawKeys()
        let leftovers = keys.filter {
            $0.starts(with: Keyspace.recordPrefix(bucket: id)) || $0.starts(with: Keyspace.indexSpacePrefix(bucket: id))
        }
        #expect(leftovers.isEmpty)
        let reopened = try t.db.bucket(PersonRecord.self, named: "Person2")
        #expect(try reopened.allKeys() == ["keep"])
        #expect(try reopened.keys(index: "locale", equalTo: "EN") == ["keep"])
    }

    @Test(arguments: Engine.allCases) func bucketNamedLikeAnotherBucketsIndexSpaceIsJustAnotherBucket(engine: Engine) throws {
        // The original's "Person_bin" collided with Person's binary index keys.
        let t = try TestDatabase(engine)
        let names = ["Person", "Person_bin", "Person::locale", "Person->EN", "a", "ab", "a\u{0}"]
        for name in names {
            try t.db.bucket(PersonRecord.self, named: name).store(PersonRecord(objectId: name + "-obj", name: name, locale: "EN", age: 1))
        }
        for name in names {
            let bucket = try t.db.bucket(PersonRecord.self, named: name)
            #expect(try bucket.allKeys() == [name + "-obj"])
            #expect(try bucket.keys(index: "locale", equalTo: "EN") == [name + "-obj"])
            #expect(try bucket.count(.index("locale", prefix: "")) == 1)
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func indexValuesContainingSeparatorsParseBack(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let locales = ["->", "::", "EN->x", "a\u{0}", "a\u{0}\u{0}", "a", "\u{0}\u{1}", "ÿ"]
        for (i, locale) in locales.enumerated() { try people.store(PersonRecord(objectId: "k\(i)", name: "", locale: locale, age: i)) }
        for (i, locale) in locales.enumerated() {
            #expect(try people.keys(index: "locale", equalTo: IndexValue(locale)) == ["k\(i)"])
        }
        #expect(try people.keys(index: "locale", prefix: "a\u{0}") == ["k3", "k4"])
        #expect(try people.keys(.index("locale", in: "a"..."a\u{0}")) == ["k5", "k3"])
    }

    @Test(arguments: Engine.allCases) func typedErrorsNameBucketKeyAndIndex(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Measurement.self)
        do {
            try bucket.store(Measurement(id: "nan", value: .nan, count: 0, big: 0, label: nil))
            Issue.record("NaN was indexed")
        } catch {
            #expect(error == .invalidIndexValue(bucket: "Measurement", key: "nan", index: "value",
                                                reason: "NaN cannot be indexed: it has no place in numeric order"))
            #expect(error.description.contains("nan") && error.description.contains("value"))
        }
        #expect(try bucket.count() == 0)
        #expect(throws: BuriError.emptyKey(bucket: "Measurement")) {
            try bucket.store(Measurement(id: "", value: 1, count: 0, big: 0, label: nil))
        }
        #expect(throws: BuriError.self) {
            try bucket.store(Measurement(id: String(repeating: "k", count: 1 << 20), value: 1, count: 0, big: 0, label: nil))
        }
        // A bucket opened as the wrong type.
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(PersonRecord(objectId: "p", name: "n", locale: "EN", age: 1))
        struct NotAPerson: BuriSupport {
            var id: String
            var weight: Double
            static let buri = BuriSchema<NotAPerson>(key: \.id, bucket: "Person")
        }
        let wrong = try t.db.bucket(NotAPerson.self, named: "Person")
        do {
            _ = try wrong.object(forKey: "p")
            Issue.record("decoded a PersonRecord as NotAPerson")
        } catch {
            guard case let .decodingFailed(bucket, key, type, _) = error else { Issue.record("\(error)"); return }
            #expect(bucket == "Person" && key == "p" && type.contains("NotAPerson"))
        }
    }

    @Test(arguments: Engine.allCases) func manyThreadsHammeringTheSameKeysLeaveEveryEntryExact(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let keys = (0..<8).map { "k\($0)" }
        let locales = ["EN", "NL", "DE"]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<6 {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(worker))
                    for step in 0..<400 {
                        let key = keys[Int(rng.next() % UInt64(keys.count))]
                        switch rng.next() % 5 {
                        case 0:
                            try people.delete(key: key)
                        case 1:
                            let batch = (0..<3).map { i in PersonRecord(objectId: keys[(step + i) % keys.count], name: "w\(worker)", locale: locales[i % 3], age: step) }
                            try people.store(batch)
                        default:
                            try people.store(PersonRecord(objectId: key, name: "w\(worker)", locale: locales[step % 3], age: Int(rng.next() % 50)))
                        }
                        // Every object a query returns matches it.
                        for person in try people.objects(index: "locale", equalTo: "EN") { #expect(person.locale == "EN") }
                        for person in try people.objects(index: "age", in: 10...20) { #expect((10...20).contains(person.age)) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems)")
        let stored = try people.allObjects()
        #expect(report.indexEntries == stored.count * 2)
        for person in stored {
            #expect(try people.keys(index: "locale", equalTo: IndexValue(person.locale)).contains(person.objectId))
            #expect(try people.keys(index: "age", equalTo: IndexValue(person.age)).contains(person.objectId))
        }
    }

    @Test(arguments: Engine.allCases) func aQueryReadsFromOneSnapshotWhileAWriterMovesObjects(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store((0..<200).map { PersonRecord(objectId: "p\($0)", name: "", locale: "EN", age: 1) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 0..<60 {
                    try people.store((0..<200).map { PersonRecord(objectId: "p\($0)", name: "", locale: round % 2 == 0 ? "NL" : "EN", age: round % 2 == 0 ? 2 : 1) })
                }
            }
            group.addTask {
                for _ in 0..<60 {
                    let english = try people.objects(index: "locale", equalTo: "EN")
                    #expect(english.allSatisfy { $0.locale == "EN" && $0.age == 1 })
                    #expect(english.count == 0 || english.count == 200, "saw a half-applied batch: \(english.count)")
                }
            }
            try await group.waitForAll()
        }
    }
}
