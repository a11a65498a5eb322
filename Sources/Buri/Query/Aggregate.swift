import BuriStorage

/// The exact sum of a numeric index's values.
///
/// Integers (every value an index holds as an `Int64` or `UInt64`: an index stores `3.0` and `3`
/// alike) are summed exactly in 128 bits, never rounded through `Double`; a sum that does not fit
/// throws ``BuriError/aggregateOverflow(bucket:index:)``. As soon as one value is not an integer
/// (a fraction, a double beyond 64 bits, an infinity) the sum is a `Double`: the exact sum of all
/// the values, rounded once to the nearest double (ties to even) — so it does not depend on the
/// order the values are read in, and `[1e300, 1e-300, -1e300]` sums to `1e-300`. An exact sum
/// beyond the largest double is ±∞.
///
/// Infinities follow IEEE 754: a sum with +∞ is +∞, with −∞ is −∞, with both is NaN. NaN itself
/// is never in an index (storing it is refused), so it never comes from a value.
///
/// ```swift
/// let total = try people.aggregate("age").sum
/// if case .integer(let years) = total { print(years) }   // exact, however many people
/// print(total.doubleValue)
/// ```
public enum NumericSum: Sendable, Hashable, CustomStringConvertible {
    /// Every value was an integer: the exact sum.
    case integer(Int128)
    /// At least one value was not an integer.
    case double(Double)

    /// The sum as a `Double` (rounded once, for an integer sum beyond 2^53).
    public var doubleValue: Double {
        switch self {
        case .integer(let value): return Double(value)
        case .double(let value): return value
        }
    }

    public var description: String {
        switch self {
        case .integer(let value): return String(value)
        case .double(let value): return String(value)
        }
    }
}

/// Count, sum, average, minimum and maximum of a numeric index's values over the objects a query
/// matches, computed from index entries and record headers, without decoding any object.
///
/// Each value an object has in the index counts once: an object with no value (a `nil`
/// optional, an empty array) adds nothing; one with several (a multi-valued index) adds each.
///
/// ```swift
/// let english = try people.aggregate("age", where: .index("locale", equals: "EN"))
/// print(english.count, english.sum, english.average ?? 0, english.minimum ?? "none")
/// ```
public struct Aggregate: Sendable, Hashable {
    /// How many values were aggregated.
    public var count: Int
    /// Their exact sum (see ``NumericSum``).
    public var sum: NumericSum
    /// The smallest value, exactly as the index holds it; `nil` when `count` is 0.
    public var minimum: IndexValue?
    /// The largest value; `nil` when `count` is 0.
    public var maximum: IndexValue?

    /// The mean, `sum / count` (computed from the exact sum); `nil` when `count` is 0.
    public var average: Double? {
        guard count > 0 else { return nil }
        switch sum {
        case .integer(let total):
            // Quotient and remainder apart, so that a sum beyond 2^53 loses no more than one rounding.
            let divisor = Int128(count)
            return Double(total / divisor) + Double(total % divisor) / Double(count)
        case .double(let total):
            return total / Double(count)
        }
    }

    /// Nothing aggregated.
    public static let empty = Aggregate(count: 0, sum: .integer(0), minimum: nil, maximum: nil)
}

/// The aggregate of one group: the objects whose grouping index holds `value`.
///
/// ```swift
/// for group in try people.aggregate("age", groupedBy: "locale") {
///     print(group.value?.description ?? "(none)", group.aggregate.average ?? 0)
/// }
/// ```
public struct AggregateGroup: Sendable, Hashable {
    /// The grouping index's value; `nil` for the objects that have none.
    public var value: IndexValue?
    /// The aggregate of the group's values.
    public var aggregate: Aggregate
}

/// The exact sum of finite doubles and integers: a fixed-point number of 2,240 bits whose lowest
/// bit is 2^-1074 (the smallest subnormal), so every finite double and every 128-bit integer is a
/// whole number of its units, and 2^63 values of the largest magnitude still fit. Positive and
/// negative values are added into two magnitudes, subtracted once at the end.
struct ExactSum {
    static let words = 35
    private var positive = [UInt64](repeating: 0, count: ExactSum.words)
    private var negative = [UInt64](repeating: 0, count: ExactSum.words)

    /// Adds `magnitude` × 2^`position` units to the positive or negative magnitude.
    private mutating func add(_ magnitude: UInt64, at position: Int, negative isNegative: Bool) {
        guard magnitude != 0 else { return }
        let word = position / 64
        let shift = position % 64
        let low = magnitude << UInt64(shift)
        let high = shift == 0 ? 0 : magnitude >> UInt64(64 - shift)
        func addWord(_ value: UInt64, at index: Int, to words: inout [UInt64]) {
            var index = index
            var carry = value
            while carry != 0, index < words.count {
                let (sum, overflow) = words[index].addingReportingOverflow(carry)
                words[index] = sum
                carry = overflow ? 1 : 0
                index += 1
            }
        }
        if isNegative {
            addWord(low, at: word, to: &negative)
            addWord(high, at: word + 1, to: &negative)
        } else {
            addWord(low, at: word, to: &positive)
            addWord(high, at: word + 1, to: &positive)
        }
    }

    /// Adds a finite double, exactly.
    mutating func add(_ value: Double) {
        guard value.isFinite, value != 0 else { return }
        let significand: UInt64
        let lowestBit: Int
        if value.isSubnormal {
            significand = value.significandBitPattern
            lowestBit = 0
        } else {
            significand = value.significandBitPattern | (1 << 52)
            lowestBit = Int(value.exponent) - 52 + 1074
        }
        add(significand, at: lowestBit, negative: value < 0)
    }

    /// Adds an integer, exactly.
    mutating func add(_ value: Int128) {
        let magnitude = value.magnitude
        add(UInt64(truncatingIfNeeded: magnitude), at: 1074, negative: value < 0)
        add(UInt64(truncatingIfNeeded: magnitude >> 64), at: 1074 + 64, negative: value < 0)
    }

    /// The sum rounded once to the nearest double, ties to even (±∞ beyond the largest double).
    var rounded: Double {
        // Which magnitude is larger, and their difference.
        var isNegative = false
        var larger = positive
        var smaller = negative
        for index in stride(from: Self.words - 1, through: 0, by: -1) where positive[index] != negative[index] {
            if negative[index] > positive[index] {
                isNegative = true
                swap(&larger, &smaller)
            }
            break
        }
        var borrow: UInt64 = 0
        for index in 0..<Self.words {
            let (step, overflow1) = larger[index].subtractingReportingOverflow(smaller[index])
            let (result, overflow2) = step.subtractingReportingOverflow(borrow)
            larger[index] = result
            borrow = (overflow1 || overflow2) ? 1 : 0
        }
        let bits = larger
        guard let top = (0..<Self.words).reversed().first(where: { bits[$0] != 0 }) else { return 0 }
        let highest = top * 64 + (63 - bits[top].leadingZeroBitCount)
        func bit(_ position: Int) -> UInt64 { position < 0 ? 0 : (bits[position / 64] >> UInt64(position % 64)) & 1 }
        // The result's lowest bit: 53 significant bits, but never below the smallest subnormal's.
        let lowest = Swift.max(0, highest - 52)
        var significand: UInt64 = 0
        for position in stride(from: highest, through: lowest, by: -1) {
            significand = significand << 1 | bit(position)
        }
        if lowest > 0 {
            let half = bit(lowest - 1) == 1
            var sticky = false
            for position in 0..<(lowest - 1) where bit(position) == 1 {
                sticky = true
                break
            }
            if half && (sticky || significand & 1 == 1) { significand += 1 }
        }
        let magnitude = Double(sign: .plus, exponent: lowest - 1074, significand: Double(significand))
        return isNegative ? -magnitude : magnitude
    }
}

/// Sums numeric index values exactly (see ``NumericSum``), and keeps count, minimum and maximum.
struct AggregateAccumulator {
    private(set) var count = 0
    private var integers: Int128 = 0
    private var hasDouble = false
    private var doubles = ExactSum()
    private var positiveInfinity = false
    private var negativeInfinity = false
    private var minimum: [UInt8]? = nil
    private var maximum: [UInt8]? = nil

    init() {}

    /// Starts from an integer partial sum (tests reach the 128-bit limit this way).
    init(integerSum: Int128, count: Int) {
        integers = integerSum
        self.count = count
    }

    /// Adds one value given as an array (tests).
    mutating func add(encoded: [UInt8], decoded: IndexValue.Decoded) -> Bool {
        encoded.withUnsafeBytes { add(encoded: $0, decoded: decoded) }
    }

    /// Adds one value: `encoded` is its index encoding (one element), `decoded` its Swift form;
    /// its bytes are copied only when it is a new minimum or maximum. Returns `false` when the
    /// integer sum no longer fits in 128 bits.
    mutating func add(encoded: UnsafeRawBufferPointer, decoded: IndexValue.Decoded) -> Bool {
        switch decoded {
        case .integer(let value):
            let (sum, overflow) = integers.addingReportingOverflow(Int128(value))
            if overflow { return false }
            integers = sum
        case .unsigned(let value):
            let (sum, overflow) = integers.addingReportingOverflow(Int128(value))
            if overflow { return false }
            integers = sum
        case .double(let value):
            hasDouble = true
            if value == .infinity {
                positiveInfinity = true
            } else if value == -.infinity {
                negativeInfinity = true
            } else {
                doubles.add(value)
            }
        case .bytes:
            return true  // not a number: the caller refuses binary indexes before it gets here
        }
        count += 1
        if minimum.map({ encoded.lexicographicallyPrecedes($0) }) ?? true { minimum = Array(encoded) }
        if maximum.map({ $0.lexicographicallyPrecedes(encoded) }) ?? true { maximum = Array(encoded) }
        return true
    }

    var result: Aggregate {
        let sum: NumericSum
        if positiveInfinity && negativeInfinity {
            sum = .double(.nan)
        } else if positiveInfinity {
            sum = .double(.infinity)
        } else if negativeInfinity {
            sum = .double(-.infinity)
        } else if hasDouble {
            var exact = doubles
            exact.add(integers)
            sum = .double(exact.rounded)
        } else {
            sum = .integer(integers)
        }
        return Aggregate(
            count: count, sum: sum, minimum: minimum.map { IndexValue(encoded: $0) },
            maximum: maximum.map { IndexValue(encoded: $0) })
    }
}

/// The groups of a grouped aggregate, found by their value's bytes: a few groups are compared in
/// place (no key is built per object), many through a dictionary.
struct GroupTable {
    private(set) var keys: [[UInt8]] = []
    var accumulators: [AggregateAccumulator] = []
    private var positions: [[UInt8]: Int] = [:]
    /// Up to this many groups are found by comparing bytes, one group after the other.
    static let linearLimit = 16

    /// The slot of the group with value `bytes`, made if new.
    mutating func slot(for bytes: UnsafeRawBufferPointer) -> Int {
        if keys.count <= Self.linearLimit {
            for (position, key) in keys.enumerated() where key.count == bytes.count && key.elementsEqual(bytes) {
                return position
            }
        } else if let position = positions[Array(bytes)] {
            return position
        }
        let key = Array(bytes)
        keys.append(key)
        accumulators.append(AggregateAccumulator())
        positions[key] = keys.count - 1
        return keys.count - 1
    }

    /// The groups in bytewise order of their values.
    var sorted: [(key: [UInt8], accumulator: AggregateAccumulator)] {
        zip(keys, accumulators).sorted { $0.0.lexicographicallyPrecedes($1.0) }.map { (key: $0.0, accumulator: $0.1) }
    }
}

extension RawBucket {
    /// Count, sum, average, minimum and maximum of numeric index `index`'s values over the objects
    /// `query` matches (its limit, offset and continuation included), read from index entries —
    /// or, when the query has conditions, from the matching records' headers — without decoding
    /// an object (see ``Aggregate``).
    ///
    /// ```swift
    /// let adults = try raw.aggregate("age", where: .index("age", in: 18...))
    /// ```
    /// - Throws: ``BuriError/unknownIndex(bucket:index:known:)``;
    ///   ``BuriError/invalidQuery(bucket:index:reason:)`` if `index` is not numeric with one
    ///   component; ``BuriError/aggregateOverflow(bucket:index:)``; what the query throws.
    public func aggregate(_ index: String, where query: Query = .all) throws(BuriError) -> Aggregate {
        let groups = try aggregate(index, where: query, groupIndex: nil)
        return groups.first?.aggregate ?? .empty
    }

    /// The aggregate of `index` over the objects `query` matches, per value of index `group`
    /// (binary or numeric, one component): one ``AggregateGroup`` per value some matching object
    /// has, in the group index's order (bytewise), then the matching objects without a value
    /// (`value == nil`), if any. An object with several values in `group` (a multi-valued index)
    /// is in each of their groups. A group appears as soon as a matching object is in it, with
    /// `count` 0 if none of its objects has a value in `index` (as SQL's `COUNT(column)`).
    ///
    /// ```swift
    /// let byLocale = try raw.aggregate("age", where: .all, groupedBy: "locale")
    /// ```
    public func aggregate(
        _ index: String, where query: Query = .all, groupedBy group: String
    ) throws(BuriError)
        -> [AggregateGroup]
    {
        try aggregate(index, where: query, groupIndex: group)
    }

    private func aggregate(
        _ name: String, where query: Query, groupIndex: String?
    ) throws(BuriError)
        -> [AggregateGroup]
    {
        let (reader, bucket) = try readView()
        let descriptor = bucket.descriptor
        func lookUp(_ name: String) throws(BuriError) -> IndexDefinition {
            guard let index = descriptor.index(named: name) else {
                throw .unknownIndex(bucket: self.name, index: name, known: descriptor.indexes.map(\.name))
            }
            return index
        }
        let index = try lookUp(name)
        guard index.components == [.numeric] else {
            let kinds = index.components.map(\.rawValue).joined(separator: ", ")
            throw .invalidQuery(
                bucket: self.name, index: name,
                reason:
                    "an aggregate sums a numeric index of one component, and this index is (\(kinds)); aggregate a numeric index"
            )
        }
        let grouping = try groupIndex.map { (name) throws(BuriError) -> IndexDefinition in
            let group = try lookUp(name)
            try group.requireOrder(bucket: self.name, for: "grouping by it (its groups would be tokens)")
            guard group.components.count == 1 else {
                throw .invalidQuery(
                    bucket: self.name, index: name,
                    reason:
                        "objects are grouped by an index of one component, and this one has \(group.components.count); group by a single-component index"
                )
            }
            return group
        }
        let overflow = BuriError.aggregateOverflow(bucket: self.name, index: name)
        func corrupt(_ key: String?, _ index: String, _ error: any Error) -> BuriError {
            .corruption(bucket: self.name, key: key, index: index, reason: "index value: \(error)")
        }

        // No condition and no group: the index's entries are exactly the values (one per value of
        // each object), so walk them alone.
        if grouping == nil, query.isUnrestricted {
            var accumulator = AggregateAccumulator()
            let prefix = Keyspace.indexPrefix(bucket: bucket.bucketId, index: index.id)
            try run { () throws -> Void in
                let cursor = try reader.cursor(in: .prefix(prefix))
                while try cursor.next() {
                    try cursor.withKey { raw throws -> Void in
                        var offset = Keyspace.indexPrefixLength
                        let decoded: IndexValue.Decoded
                        do {
                            decoded = try ValueEncoding.decodeElement(raw, at: &offset)
                        } catch {
                            throw corrupt(nil, name, error)
                        }
                        let encoded = UnsafeRawBufferPointer(rebasing: raw[Keyspace.indexPrefixLength..<offset])
                        guard accumulator.add(encoded: encoded, decoded: decoded) else { throw overflow }
                    }
                }
            }
            return [AggregateGroup(value: nil, aggregate: accumulator.result)]
        }

        // Otherwise each matching object's header lists its values in both indexes: read in place.
        let plan = try QueryPlan(query, bucket: bucket, reader: reader)
        let cursor = try RawQueryCursor(bucket: bucket, plan: plan, reader: reader)
        var table = GroupTable()
        var ungrouped = AggregateAccumulator()
        var hasUngrouped = grouping == nil
        var groupRanges: [Range<Int>] = []
        var valueRanges: [Range<Int>] = []
        var slots: [Int] = []
        let groupId = grouping?.id
        while true {
            let more = try cursor.nextStoredValue { (value) throws -> Bool in
                groupRanges.removeAll(keepingCapacity: true)
                valueRanges.removeAll(keepingCapacity: true)
                // A group appears as soon as a matching object is in it, even with no value to add.
                slots.removeAll(keepingCapacity: true)
                do {
                    let walked = try RecordHeader.forEachListedEntry(value) { id, tuple in
                        if id == index.id { valueRanges.append(tuple) }
                        if id == groupId { groupRanges.append(tuple) }
                    }
                    // A relationship's entries may be derived from the payload (a numeric value
                    // never is): a group by references reads them there.
                    for derived in walked.derived where derived.index == groupId {
                        for tuple in try RecordHeader.derivedTuples(value, payloadOffset: walked.payloadOffset, derived)
                        {
                            slots.append(tuple.withUnsafeBytes { table.slot(for: $0) })
                        }
                    }
                } catch {
                    throw BuriError.corruption(
                        bucket: self.name, key: cursor.currentKey, index: nil, reason: "record header: \(error)")
                }
                for range in groupRanges {
                    slots.append(table.slot(for: UnsafeRawBufferPointer(rebasing: value[range])))
                }
                if slots.isEmpty { hasUngrouped = true }
                for range in valueRanges {
                    var offset = range.lowerBound
                    let decoded: IndexValue.Decoded
                    do {
                        decoded = try ValueEncoding.decodeElement(value, at: &offset)
                    } catch {
                        throw corrupt(cursor.currentKey, name, error)
                    }
                    let encoded = UnsafeRawBufferPointer(rebasing: value[range.lowerBound..<offset])
                    if slots.isEmpty {
                        guard ungrouped.add(encoded: encoded, decoded: decoded) else { throw overflow }
                    } else {
                        for slot in slots {
                            guard table.accumulators[slot].add(encoded: encoded, decoded: decoded) else {
                                throw overflow
                            }
                        }
                    }
                }
                return true
            }
            guard more != nil else { break }
        }
        let groups = table.sorted
        var result = groups.map { AggregateGroup(value: IndexValue(encoded: $0.key), aggregate: $0.accumulator.result) }
        if hasUngrouped { result.append(AggregateGroup(value: nil, aggregate: ungrouped.result)) }
        return result
    }
}

extension Bucket {
    /// Count, sum, average, minimum and maximum of numeric index `index` over the objects `query`
    /// matches, from index entries and record headers, without decoding an object (see
    /// ``Aggregate`` and ``NumericSum`` for what counts and how sums stay exact).
    ///
    /// ```swift
    /// let stats = try people.aggregate("age", where: .index("locale", equals: "EN"))
    /// print(stats.count, stats.sum, stats.average ?? 0)
    /// ```
    public func aggregate(_ index: String, where query: Query = .all) throws(BuriError) -> Aggregate {
        try raw.aggregate(index, where: checked(query))
    }

    /// The aggregate of numeric index `index` over the objects `query` matches, per value of index
    /// `group` (see ``RawBucket/aggregate(_:where:groupedBy:)`` for the groups' order and the
    /// objects without a value).
    ///
    /// ```swift
    /// for group in try people.aggregate("age", groupedBy: "locale") {
    ///     print(group.value?.description ?? "(none)", group.aggregate.count)
    /// }
    /// ```
    public func aggregate(
        _ index: String, where query: Query = .all, groupedBy group: String
    ) throws(BuriError)
        -> [AggregateGroup]
    {
        try raw.aggregate(index, where: checked(query), groupedBy: group)
    }
}
