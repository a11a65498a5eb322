@testable import Buri
import Foundation

// Aggregates in the model test: `Bucket.aggregate` over a random query (and grouped by a random
// index) against the model's own arithmetic on the same results. Counts, minimums, maximums,
// integer sums and infinities must match exactly; a sum with finite doubles must lie within a few
// units of rounding of the model's sum (the exact rounding itself is AggregateTests' to prove).

/// What the model expects of one aggregate.
struct ModelAggregate: CustomStringConvertible {
    var count = 0
    var integers: Int128 = 0
    var doubles: [Double] = []
    var minimum: ModelValue? = nil
    var maximum: ModelValue? = nil

    mutating func add(_ number: ModelNumber) {
        count += 1
        let value = ModelValue.number(number)
        if minimum.map({ ModelValue.compare(value, $0) < 0 }) ?? true { minimum = value }
        if maximum.map({ ModelValue.compare(value, $0) > 0 }) ?? true { maximum = value }
        switch number {
        case .int(let integer): integers += Int128(integer)
        case .uint(let integer): integers += Int128(integer)
        case .double(let real):
            // An index holds an integral double that is an Int64 or a UInt64 as that integer.
            if real.isFinite, real == real.rounded(.towardZero), real >= -9_223_372_036_854_775_808.0,
                real < 18_446_744_073_709_551_616.0
            {
                integers += real < 0 ? Int128(Int64(real)) : Int128(UInt64(real))
            } else {
                doubles.append(real)
            }
        }
    }

    var description: String {
        "count \(count), integers \(integers), doubles \(doubles), min \(minimum?.description ?? "-"), max \(maximum?.description ?? "-")"
    }

    /// The difference between `got` and this, or nil if they agree.
    func mismatch(_ got: Aggregate) -> String? {
        if got.count != count { return "count \(got.count), the model \(count)" }
        do {
            if try got.minimum != minimum?.indexValue() { return "minimum \(String(describing: got.minimum))" }
            if try got.maximum != maximum?.indexValue() { return "maximum \(String(describing: got.maximum))" }
        } catch {
            return "the model's minimum or maximum has no index value: \(error)"
        }
        if doubles.isEmpty {
            return got.sum == .integer(integers) ? nil : "sum \(got.sum), the model \(integers)"
        }
        guard case .double(let sum) = got.sum else { return "sum \(got.sum) is an integer, the model has doubles" }
        let positive = doubles.contains(.infinity)
        let negative = doubles.contains(-.infinity)
        if positive && negative { return sum.isNaN ? nil : "sum \(sum), the model +∞ and −∞: NaN" }
        if positive { return sum == .infinity ? nil : "sum \(sum), the model +∞" }
        if negative { return sum == -.infinity ? nil : "sum \(sum), the model −∞" }
        let finite = doubles + [Double(integers)]
        let magnitudes = finite.reduce(0) { $0 + $1.magnitude }
        // Beyond the largest double the model's plain arithmetic says nothing reliable.
        guard magnitudes.isFinite else { return nil }
        var approximate = 0.0
        for value in finite.sorted(by: { $0.magnitude < $1.magnitude }) { approximate += value }
        let tolerance = magnitudes * 0x1p-48 + Double.leastNonzeroMagnitude
        return (sum - approximate).magnitude <= tolerance ? nil : "sum \(sum), the model about \(approximate)"
    }
}

extension ModelRun {
    /// Aggregates a numeric index over `query`'s results, sometimes grouped, and compares.
    func verifyAggregate(
        _ query: ModelQuery, _ expected: [ModelResult], _ bucket: Bucket<ModelItem>, _ label: String
    ) throws {
        let index = pick(["num", "real"])
        let group: String? =
            chance(0.5) ? pick(["group", "tags", "email", "num"].filter { !privateIndexes.contains($0) }) : nil
        let buriQuery = try read("building \(query)") { try query.buriQuery() }
        func numbers(_ item: ModelItem) -> [ModelNumber] {
            item.entries(index).compactMap { tuple in
                if case .number(let number) = tuple.first { return number }
                return nil
            }
        }
        guard let group else {
            var model = ModelAggregate()
            for result in expected { for number in numbers(result.item) { model.add(number) } }
            let got = try read("\(label) aggregate(\(index), \(query))") {
                try bucket.aggregate(index, where: buriQuery)
            }
            if let problem = model.mismatch(got) {
                throw fail("\(label) aggregate(\(index)) over \(query): \(problem); the model: \(model)")
            }
            tally["aggregate", default: 0] += 1
            return
        }
        // Groups: each distinct value of the group index (in its order), then those without one.
        var groups: [(value: ModelValue, aggregate: ModelAggregate)] = []
        var ungrouped: ModelAggregate? = nil
        for result in expected {
            let values = result.item.entries(group).compactMap(\.first)
            if values.isEmpty {
                var aggregate = ungrouped ?? ModelAggregate()
                for number in numbers(result.item) { aggregate.add(number) }
                ungrouped = aggregate
            }
            for value in values {
                let at =
                    groups.firstIndex { ModelValue.compare($0.value, value) == 0 }
                    ?? {
                        groups.append((value, ModelAggregate())); return groups.count - 1
                    }()
                for number in numbers(result.item) { groups[at].aggregate.add(number) }
            }
        }
        groups.sort { ModelValue.compare($0.value, $1.value) < 0 }
        let got = try read("\(label) aggregate(\(index), \(query), groupedBy: \(group))") {
            try bucket.aggregate(index, where: buriQuery, groupedBy: group)
        }
        let what = "\(label) aggregate(\(index)) over \(query) grouped by \(group)"
        let expectedCount = groups.count + (ungrouped == nil ? 0 : 1)
        if got.count != expectedCount {
            throw fail("\(what): \(got.count) groups, the model \(expectedCount): \(got.map { $0.value })")
        }
        for (position, entry) in groups.enumerated() {
            let value = try read("group value") { try entry.value.indexValue() }
            if got[position].value != value {
                throw fail(
                    "\(what): group \(position) is \(String(describing: got[position].value)), the model \(entry.value)"
                )
            }
            if let problem = entry.aggregate.mismatch(got[position].aggregate) {
                throw fail("\(what): group \(entry.value): \(problem); the model: \(entry.aggregate)")
            }
        }
        if let ungrouped {
            let last = got[got.count - 1]
            if last.value != nil { throw fail("\(what): the last group is \(String(describing: last.value)), not nil") }
            if let problem = ungrouped.mismatch(last.aggregate) {
                throw fail("\(what): objects without a group value: \(problem); the model: \(ungrouped)")
            }
        }
        tally["aggregate grouped", default: 0] += 1
    }
}
