import Foundation
@testable import Buri
import LevelDB
import Testing

@Suite("Bucket: index maintenance")
struct IndexMaintenanceTests {
    @Test(arguments: Engine.allCases) func updateMovesIndexEntries(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(PersonRecord(objectId: "p", name: "P", locale: "EN", age: 20))
        try people.store(PersonRecord(objectId: "p", name: "P", locale: "NL", age: 21))
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
        #expect(try people.keys(.index("age", equals: 20)).isEmpty)
        #expect(try people.keys(.index("locale", equals: "NL")) == ["p"])
        #expect(try people.keys(.index("age", equals: 21)) == ["p"])
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
        #expect(try people.keys(.index("locale", equals: "EN")).isEmpty)
        #expect(try people.keys(.index("age", equals: 20)).isEmpty)
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
        #expect(try reopened.keys() == ["keep"])
        #expect(try reopened.keys(.index("locale", equals: "EN")) == ["keep"])
    }

    @Test(arguments: Engine.allCases) func bucketNamedLikeAnotherBucketsIndexSpaceIsJustAnotherBucket(
        engine: Engine
    ) throws {
        // The original's "Person_bin" collided with Person's binary index keys.
        let t = try TestDatabase(engine)
        let names = ["Person", "Person_bin", "Person::locale", "Person->EN", "a", "ab", "a\u{0}"]
        for name in names {
            try t.db.bucket(PersonRecord.self, named: name).store(
                PersonRecord(objectId: name + "-obj", name: name, locale: "EN", age: 1))
        }
        for name in names {
            let bucket = try t.db.bucket(PersonRecord.self, named: name)
            #expect(try bucket.keys() == [name + "-obj"])
            #expect(try bucket.keys(.index("locale", equals: "EN")) == [name + "-obj"])
            #expect(try bucket.count(.index("locale", prefix: "")) == 1)
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func indexValuesContainingSeparatorsParseBack(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let locales = ["->", "::", "EN->x", "a\u{0}", "a\u{0}\u{0}", "a", "\u{0}\u{1}", "ÿ"]
        for (i, locale) in locales.enumerated() {
            try people.store(PersonRecord(objectId: "k\(i)", name: "", locale: locale, age: i))
        }
        for (i, locale) in locales.enumerated() {
            #expect(try people.keys(.index("locale", equals: IndexValue(locale))) == ["k\(i)"])
        }
        #expect(try people.keys(.index("locale", prefix: "a\u{0}")) == ["k3", "k4"])
        #expect(try people.keys(.index("locale", in: "a"..."a\u{0}")) == ["k5", "k3"])
    }

    @Test(arguments: Engine.allCases) func typedErrorsNameBucketKeyAndIndex(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Measurement.self)
        do {
            try bucket.store(Measurement(id: "nan", value: .nan, count: 0, big: 0, label: nil))
            Issue.record("NaN was indexed")
        } catch {
            #expect(
                error
                    == .invalidIndexValue(
                        bucket: "Measurement", key: "nan", index: "value",
                        reason: "NaN cannot be indexed: it has no place in numeric order"))
            #expect(error.description.contains("nan") && error.description.contains("value"))
        }
        #expect(try bucket.count() == 0)
        #expect(throws: BuriError.emptyKey(bucket: "Measurement")) {
            try bucket.store(Measurement(id: "", value: 1, count: 0, big: 0, label: nil))
        }
        #expect(throws: BuriError.self) {
            try bucket.store(
                Measurement(id: String(repeating: "k", count: 1 << 20), value: 1, count: 0, big: 0, label: nil))
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

    @Test(arguments: Engine.allCases) func manyThreadsHammeringTheSameKeysLeaveEveryEntryExact(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let keys = (0..<8).map { "k\($0)" }
        let locales = ["EN", "NL", "DE"]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<6 {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(worker))
                    // Each step is several round trips on etcd: fewer there, still thousands of races.
                    for step in 0..<(engine == .etcd ? 100 : 400) {
                        let key = keys[Int(rng.next() % UInt64(keys.count))]
                        switch rng.next() % 5 {
                        case 0:
                            try people.delete(key: key)
                        case 1:
                            let batch = (0..<3).map { i in
                                PersonRecord(
                                    objectId: keys[(step + i) % keys.count], name: "w\(worker)", locale: locales[i % 3],
                                    age: step)
                            }
                            try people.store(batch)
                        default:
                            try people.store(
                                PersonRecord(
                                    objectId: key, name: "w\(worker)", locale: locales[step % 3],
                                    age: Int(rng.next() % 50)))
                        }
                        // Every object a query returns matches it.
                        for person in try people.objects(.index("locale", equals: "EN")) {
                            #expect(person.locale == "EN")
                        }
                        for person in try people.objects(.index("age", in: 10...20)) {
                            #expect((10...20).contains(person.age))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems)")
        let stored = try await people.objects()
        #expect(report.indexEntries == stored.count * 2)
        for person in stored {
            #expect(
                try await people.keys(.index("locale", equals: IndexValue(person.locale))).contains(person.objectId))
            #expect(try await people.keys(.index("age", equals: IndexValue(person.age))).contains(person.objectId))
        }
    }

    @Test(arguments: Engine.allCases) func aQueryReadsFromOneSnapshotWhileAWriterMovesObjects(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store((0..<200).map { PersonRecord(objectId: "p\($0)", name: "", locale: "EN", age: 1) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for round in 0..<60 {
                    try people.store(
                        (0..<200).map {
                            PersonRecord(
                                objectId: "p\($0)", name: "", locale: round % 2 == 0 ? "NL" : "EN",
                                age: round % 2 == 0 ? 2 : 1)
                        })
                }
            }
            group.addTask {
                for _ in 0..<60 {
                    let english = try people.objects(.index("locale", equals: "EN"))
                    #expect(english.allSatisfy { $0.locale == "EN" && $0.age == 1 })
                    #expect(english.count == 0 || english.count == 200, "saw a half-applied batch: \(english.count)")
                }
            }
            try await group.waitForAll()
        }
    }
}
