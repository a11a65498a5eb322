import Foundation
@testable import Buri
import Testing

@Suite("Aggregates: count, exact sum, average, min, max from index entries, grouped")
struct AggregateTests {
    @Test(arguments: Engine.allCases) func integersSumExactlyBeyondSixtyFourBits(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let measurements = try t.db.bucket(Measurement.self)
        let counts: [Int64] = [.max, .max, .max, .min, -1, 0, 7]
        let bigs: [UInt64] = [.max, .max, .max, 1, 0, 0, 2]
        try measurements.store(
            counts.indices.map { Measurement(id: "m\($0)", value: 0, count: counts[$0], big: bigs[$0], label: nil) })
        let count = try measurements.aggregate("count")
        #expect(count.count == 7)
        #expect(count.sum == .integer(counts.reduce(Int128(0)) { $0 + Int128($1) }))
        #expect(count.minimum == IndexValue(Int64.min))
        #expect(count.maximum == IndexValue(Int64.max))
        let big = try measurements.aggregate("big")
        let exact = bigs.reduce(Int128(0)) { $0 + Int128($1) }
        #expect(big.sum == .integer(exact))
        // 3 × UInt64.max + 3 is not a Double: the sum is exact, and only the average is rounded.
        #expect(exact > Int128(UInt64.max))
        #expect(big.average == Double(exact / 7) + Double(exact % 7) / 7)
        #expect(big.maximum == IndexValue(UInt64.max))
        #expect(big.minimum == IndexValue(UInt64(0)))
    }

    @Test(arguments: Engine.allCases) func doublesIntegersZerosAndInfinities(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let measurements = try t.db.bucket(Measurement.self)
        func store(_ values: [Double]) throws {
            _ = try measurements.deleteAll()
            try measurements.store(
                values.enumerated().map { Measurement(id: "v\($0.offset)", value: $0.element, count: 0, big: 0) })
        }
        // Integral doubles are integers in an index (3.0 is 3): the sum stays exact.
        try store([3.0, -0.0, 0.0, 2, 1e15])
        var aggregate = try measurements.aggregate("value")
        #expect(aggregate.sum == .integer(5 + 1_000_000_000_000_000))
        #expect(aggregate.count == 5)
        #expect(aggregate.minimum == IndexValue(0))
        // A fraction makes it a Double: the integer part exact, the rest compensated.
        try store([0.1, 0.2, 0.3, 1e16, -1e16, 4])
        aggregate = try measurements.aggregate("value")
        #expect(aggregate.sum == .double(4.6))
        #expect(aggregate.average == 4.6 / 6)
        // Infinities follow IEEE 754.
        try store([1, .infinity, 2.5])
        aggregate = try measurements.aggregate("value")
        #expect(aggregate.sum == .double(.infinity))
        #expect(aggregate.maximum == (try IndexValue(Double.infinity)))
        try store([1, -.infinity])
        #expect(try measurements.aggregate("value").sum == .double(-.infinity))
        try store([.infinity, -.infinity, 1])
        aggregate = try measurements.aggregate("value")
        #expect(aggregate.sum.doubleValue.isNaN)
        #expect(aggregate.minimum == (try IndexValue(-Double.infinity)))
        #expect(aggregate.count == 3)
        // Nothing at all.
        try store([])
        aggregate = try measurements.aggregate("value")
        #expect(aggregate == .empty)
        #expect(aggregate.average == nil)
        #expect(try measurements.aggregate("value", groupedBy: "label").isEmpty)
    }

    @Test(arguments: Engine.allCases) func restrictedByAQueryAndGrouped(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store([
            Note("a", tags: ["x", "y"], scores: [1, 2.5], locale: "EN", age: 20),
            Note("b", tags: ["x"], scores: [], locale: "NL", age: 30),
            Note("c", tags: [], scores: [4], locale: "EN", age: 40),
            Note("d", tags: ["y"], scores: [10], locale: "DE", age: 50),
        ])
        // Every value of a multi-valued index counts.
        let scores = try notes.aggregate("scores")
        #expect(scores.count == 4)
        #expect(scores.sum == .double(17.5))
        // Restricted by a condition on another index: read from the matching records' headers.
        let english = try notes.aggregate("age", where: .index("locale", equals: "EN"))
        #expect(english.count == 2 && english.sum == .integer(60) && english.average == 30)
        // The query's own range, order and limit decide which objects count.
        let firstTwoByAge = try notes.aggregate("age", where: Query.index("age", in: 25...).limit(2))
        #expect(firstTwoByAge.sum == .integer(70))
        let oldestTwo = try notes.aggregate("age", where: Query.index("age", in: 0...).descending().limit(2))
        #expect(oldestTwo.sum == .integer(90))
        // Grouped by a binary index, in its order.
        let byLocale = try notes.aggregate("age", groupedBy: "locale")
        #expect(byLocale.map { $0.value } == [IndexValue("DE"), IndexValue("EN"), IndexValue("NL")])
        #expect(byLocale.map { $0.aggregate.sum } == [.integer(50), .integer(60), .integer(30)])
        // Grouped by a multi-valued index: an object in each of its groups; those without a value last.
        let byTag = try notes.aggregate("age", groupedBy: "tags")
        #expect(byTag.map { $0.value } == [IndexValue("x"), IndexValue("y"), nil])
        #expect(byTag.map { $0.aggregate.sum } == [.integer(50), .integer(70), .integer(40)])
        // A group whose objects have no value to add still appears, with count 0 (as SQL's COUNT(column)).
        let scoresByLocale = try notes.aggregate("scores", where: .index("locale", equals: "NL"), groupedBy: "locale")
        #expect(scoresByLocale == [AggregateGroup(value: IndexValue("NL"), aggregate: .empty)])
        // Grouped by a numeric index, restricted by a query.
        let byAge = try notes.aggregate("scores", where: .index("tags", equals: "y"), groupedBy: "age")
        #expect(byAge.map { $0.value } == [IndexValue(20), IndexValue(50)])
        #expect(byAge.map { $0.aggregate.count } == [2, 1])
        // A query that matches nothing.
        #expect(try notes.aggregate("age", where: .index("locale", equals: "FR")) == .empty)
        #expect(try notes.aggregate("age", where: .index("locale", equals: "FR"), groupedBy: "tags").isEmpty)
    }

    /// Many groups (beyond the few compared in place): each exactly once, in value order.
    @Test func manyGroupsEachOnceInOrder() throws {
        let t = try TestDatabase(.memory)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store((0..<200).map { PersonRecord(objectId: "p\($0)", name: "", locale: "L\($0 % 50)", age: $0) })
        let groups = try people.aggregate("age", groupedBy: "locale")
        #expect(groups.count == 50)
        #expect(groups.map { $0.value } == (0..<50).map { IndexValue("L\($0)") }.sorted())
        for group in groups {
            guard case .bytes(let bytes) = group.value?.decoded,
                let n = Int(String(decoding: bytes.dropFirst(), as: UTF8.self))
            else {
                Issue.record("group \(String(describing: group.value))")
                continue
            }
            #expect(group.aggregate.count == 4)
            #expect(group.aggregate.sum == .integer(Int128(4 * n + 50 * (0 + 1 + 2 + 3))))
        }
        let byAge = try people.aggregate("age", where: .index("locale", prefix: "L1"), groupedBy: "age")
        #expect(byAge.count == 44)
        #expect(byAge.allSatisfy { $0.aggregate.count == 1 && $0.value.map { [$0] } == [$0.aggregate.minimum!] })
    }

    @Test(arguments: Engine.allCases) func insideATransactionItsOwnWritesCount(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store(PersonRecord(objectId: "p1", name: "A", locale: "EN", age: 10))
        try t.db.write { transaction in
            let inside = try transaction.bucket(PersonRecord.self)
            try inside.store(PersonRecord(objectId: "p2", name: "B", locale: "EN", age: 32))
            #expect(try inside.aggregate("age").sum == .integer(42))
            #expect(try inside.aggregate("age", groupedBy: "locale").first?.aggregate.count == 2)
        }
        #expect(try people.aggregate("age").sum == .integer(42))
    }

    @Test func badIndexesAreTypedErrors() throws {
        let t = try TestDatabase(.memory)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Note("a", tags: ["x"], locale: "EN", age: 1))
        #expect(throws: BuriError.self) { try notes.aggregate("locale") }
        do {
            _ = try notes.aggregate("locale")
        } catch {
            guard case let .invalidQuery(bucket, index, reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(bucket == "Note" && index == "locale" && reason.contains("numeric"))
        }
        do {
            _ = try notes.aggregate("nope")
            Issue.record("an unknown index was accepted")
        } catch {
            guard case .unknownIndex(_, let index, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(index == "nope")
        }
        do {
            _ = try notes.aggregate("locale_age")
            Issue.record("a compound index was summed")
        } catch {
            guard case .invalidQuery(_, let index, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(index == "locale_age")
        }
        do {
            _ = try notes.aggregate("age", groupedBy: "locale_age")
            Issue.record("objects were grouped by a compound index")
        } catch {
            guard case .invalidQuery(_, let index, let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(index == "locale_age" && reason.contains("one component"))
        }
    }

    /// Doubles sum exactly and round once: the result does not depend on the order of the values.
    @Test func doubleSumsAreExactAndRoundedOnce() throws {
        func sum(_ values: [Double], integer: Int128 = 0) -> Double {
            var exact = ExactSum()
            for value in values { exact.add(value) }
            exact.add(integer)
            return exact.rounded
        }
        let largest = Double.greatestFiniteMagnitude
        let tiny = Double.leastNonzeroMagnitude
        #expect(sum([1e300, 1e-300, -1e300]) == 1e-300)
        #expect(sum([largest, largest, -largest]) == largest)
        #expect(sum([largest, -largest, largest]) == largest)
        #expect(sum([largest, largest]) == .infinity)
        #expect(sum([-largest, -largest]) == -.infinity)
        #expect(sum([0.1, 0.2, 0.3]) == 0.6)
        #expect(sum([tiny, tiny]) == 2 * tiny)
        #expect(sum([-tiny]) == -tiny)
        #expect(sum([]) == 0)
        #expect(sum([1.5, -1.5]) == 0)
        // Ties go to the even significand: 2^53 + 1 → 2^53, 2^53 + 3 → 2^53 + 4.
        #expect(sum([0.5, 0.5], integer: 1 << 53) == 9_007_199_254_740_992)
        #expect(sum([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], integer: 1 << 53) == 9_007_199_254_740_996)
        #expect(sum([0.25], integer: Int128(Int64.min) * 4) == Double(Int128(Int64.min) * 4))
        // Any order, the same bits; a value and its negation cancel exactly.
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<50 {
            let values = (0..<40).map { _ in
                Double(
                    sign: Bool.random(using: &generator) ? .minus : .plus,
                    exponent: Int.random(in: -1074...1000, using: &generator),
                    significand: Double.random(in: 1..<2, using: &generator))
            }
            let forward = sum(values)
            #expect(sum(values.shuffled(using: &generator)).bitPattern == forward.bitPattern)
            #expect(sum(values + values.map { -$0 }) == 0)
            #expect(sum(values + [-forward]).magnitude <= forward.ulp)
        }
    }

    @Test func aSumBeyondOneHundredTwentyEightBitsIsAnOverflowError() throws {
        var near = AggregateAccumulator(integerSum: Int128.max - 5, count: 1)
        let added = near.add(encoded: IndexValue(5).encoded, decoded: .integer(5))
        #expect(added)
        #expect(near.result.sum == .integer(.max))
        let overflowed = !near.add(encoded: IndexValue(1).encoded, decoded: .integer(1))
        #expect(overflowed)
        var low = AggregateAccumulator(integerSum: Int128.min + 1, count: 1)
        let underflowed = !low.add(encoded: IndexValue(-2).encoded, decoded: .integer(-2))
        #expect(underflowed)
        let message = BuriError.aggregateOverflow(bucket: "B", index: "n").description
        #expect(message.contains("'B'") && message.contains("'n'") && message.contains("128 bits"))
    }
}
