import Foundation
@testable import Buri
import LevelDB
import Testing

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
        #expect(try people.keys(.index("age", in: 0...20)) == ["f", "a", "b", "e"])
        #expect(try people.keys(.index("age", in: -10...0)) == ["d"])
        #expect(try people.objects(.index("age", in: 5...10)).map(\.age) == [5, 10])
    }

    @Test(arguments: Engine.allCases) func exactMatchIsNotAPrefixMatch(engine: Engine) throws {
        try setUp(engine)
        #expect(try people.keys(.index("locale", equals: "E")) == ["c"])
        #expect(try people.keys(.index("locale", equals: "EN")) == ["a", "b"])
        #expect(try people.keys(.index("locale", equals: "")) == ["f"])
        #expect(try people.keys(.index("age", equals: 2)) == ["f"])  // not 20..29
        #expect(try people.keys(.index("locale", prefix: "E")) == ["c", "a", "b", "e"])
        #expect(try people.keys(.index("locale", prefix: "")) == ["f", "c", "a", "b", "e", "d"])
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
        #expect(try people.keys() == ["a", "b", "c", "d", "e", "f"])
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
        for key in try scanKeys(t.db.engine.snapshot()) where key.first == Keyspace.recordTag {
            damage.put(key, [0xFF, 0xFF])
        }
        try t.db.engine.commit(damage, conditions: nil, sync: false)
        try t.reopen()
        let reopened = try t.db.bucket(PersonRecord.self)
        #expect(try reopened.keys(.index("locale", equals: "EN")) == ["a", "b"])
        #expect(try reopened.count(.index("age", in: 0...20)) == 4)
        #expect(throws: BuriError.self) { try reopened.objects(.index("locale", equals: "EN")) }
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
        #expect(
            try bucket.keys(.index("value", in: ...IndexValue.init(floatLiteral: 1e308))) == [
                "m6", "m1", "m2", "m3", "m7", "m4",
            ])
        #expect(try bucket.keys(.index("value", equals: 0)) == ["m3"])  // -0.0 == 0
        #expect(try bucket.keys(.index("value", equals: .init(floatLiteral: .infinity))) == ["m5"])
        #expect(try bucket.keys(.index("count", in: 9_007_199_254_740_993...)) == ["m4", "m5"])
        #expect(try bucket.keys(.index("count", equals: .init(floatLiteral: 9_007_199_254_740_992.0))) == ["m6"])
        #expect(try bucket.keys(.index("count", equals: 20.0)) == ["m7"])
        #expect(try bucket.keys(.index("count", in: ...(-1))) == ["m1", "m2"])
        #expect(try bucket.keys(.index("big", in: IndexValue(UInt64(Int64.max))...)) == ["m3", "m4", "m5"])
        #expect(try bucket.keys(.index("big", equals: IndexValue(UInt64.max))) == ["m5"])
        #expect(try bucket.keys(.index("label", prefix: "")).isEmpty)  // nil optionals have no entry
    }

    @Test(arguments: Engine.allCases) func queriesThatDoNotFitTheIndexAreTypedErrors(engine: Engine) throws {
        try setUp(engine)
        #expect(throws: BuriError.unknownIndex(bucket: "Person", index: "height", known: ["locale", "age"])) {
            try people.keys(.index("height", equals: 1))
        }
        do {
            _ = try people.keys(.index("age", equals: "twenty"))
            Issue.record("a string matched a numeric index")
        } catch {
            guard case .invalidQuery(let bucket, let index, _) = error else { Issue.record("\(error)"); return }
            #expect(bucket == "Person" && index == "age")
        }
        #expect(throws: BuriError.self) { try people.keys(.index("age", prefix: "1")) }
        #expect(throws: BuriError.self) { try people.keys(.index("age", equals: 1, 2)) }
    }
}
