import BuriStorage

/// A query condition resolved against a bucket's catalog: the exact LevelDB key range that holds
/// its matches. Built only here, from `Keyspace` and `ValueEncoding`.
struct ConditionPlan {
    let index: IndexDefinition
    /// The key prefix of the index's entries.
    let prefix: [UInt8]
    /// The range of full index-entry keys (prefix, tuple, object key) that satisfy the condition;
    /// for an `anyOf` condition, the smallest range holding all of its alternatives.
    let range: KeyRange
    /// For an `anyOf` condition, the ranges of its values, sorted and disjoint: a key in `range`
    /// matches only if one of them holds it.
    let alternatives: [KeyRange]?

    init(_ condition: Query.Condition, in descriptor: BucketDescriptor) throws(BuriError) {
        if let unresolved = condition.unresolved {
            throw .unindexedKeyPath(type: unresolved.type, keyPath: unresolved.keyPath)
        }
        if let reason = condition.invalidValue {
            throw .invalidQuery(bucket: descriptor.name, index: condition.index, reason: reason)
        }
        guard let index = descriptor.index(named: condition.index) else {
            throw .unknownIndex(bucket: descriptor.name, index: condition.index, known: descriptor.indexes.map(\.name))
        }
        self.index = index
        let arity = index.components.count
        let needsNext: Bool
        if case .none = condition.rest { needsNext = false } else { needsNext = true }
        let used = condition.leading.count + (needsNext ? 1 : 0)
        guard used <= arity, used > 0 || !needsNext || arity > 0 else {
            throw .invalidQuery(
                bucket: descriptor.name, index: index.name,
                reason: "the index has \(arity) component(s) but the query constrains \(used)")
        }
        if condition.leading.isEmpty, !needsNext {
            throw .invalidQuery(bucket: descriptor.name, index: index.name, reason: "the query gives no value to match")
        }
        func check(_ value: IndexValue, component: Int) throws(BuriError) {
            let kind = index.components[component]
            if value.isNumeric != (kind == .numeric) {
                throw .invalidQuery(
                    bucket: descriptor.name, index: index.name,
                    reason: "component \(component + 1) is \(kind.rawValue) but the query gives \(value)")
            }
        }
        prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        var base = prefix
        for (position, value) in condition.leading.enumerated() {
            try check(value, component: position)
            base.append(contentsOf: value.encoded)
        }
        let next = condition.leading.count
        var alternatives: [KeyRange]? = nil
        switch condition.rest {
        case .none:
            range = .prefix(base)
        case .anyOf(let values):
            var prefixes: [[UInt8]] = []
            prefixes.reserveCapacity(values.count)
            for value in values {
                try check(value, component: next)
                prefixes.append(base + value.encoded)
            }
            // Values are prefix-free encodings: distinct ones give disjoint ranges.
            prefixes = Set(prefixes).sorted { $0.lexicographicallyPrecedes($1) }
            let ranges = prefixes.map { KeyRange.prefix($0) }
            alternatives = ranges
            if let first = ranges.first, let last = ranges.last {
                range = KeyRange(start: first.start, end: last.end)
            } else {
                range = KeyRange(start: base, end: base)  // no value: an empty range
            }
        case let .range(lower, upper):
            let start: [UInt8]
            switch lower {
            case .unbounded: start = base
            case .inclusive(let value):
                try check(value, component: next)
                start = base + value.encoded
            case .exclusive(let value):
                try check(value, component: next)
                start = KeyRange.successor(ofPrefix: base + value.encoded) ?? base
            }
            let end: [UInt8]?
            switch upper {
            case .unbounded: end = KeyRange.successor(ofPrefix: base)
            case .inclusive(let value):
                try check(value, component: next)
                end = KeyRange.successor(ofPrefix: base + value.encoded)
            case .exclusive(let value):
                try check(value, component: next)
                end = base + value.encoded
            }
            range = KeyRange(start: start, end: end)
        case .prefix(let bytes):
            guard index.components[next] == .binary else {
                throw .invalidQuery(
                    bucket: descriptor.name, index: index.name,
                    reason: "a prefix query needs a binary component, but component \(next + 1) is numeric")
            }
            var key = base
            ValueEncoding.appendBinaryPrefix(bytes, to: &key)
            range = .prefix(key)
        }
        self.alternatives = alternatives
    }

    /// How many alternatives start at or before `key` (they are sorted by start).
    private func alternativesStarting(atOrBefore key: [UInt8], in alternatives: [KeyRange]) -> Int {
        var low = 0
        var high = alternatives.count
        while low < high {
            let middle = (low + high) / 2
            if let start = alternatives[middle].start, key.lexicographicallyPrecedes(start) {
                high = middle
            } else {
                low = middle + 1
            }
        }
        return low
    }

    /// For an `anyOf` condition, the start of the first alternative after `key`, where an
    /// ascending walk that met a key between alternatives goes on; `nil` if none is left.
    func nextAlternativeStart(after key: [UInt8]) -> [UInt8]? {
        guard let alternatives else { return nil }
        let next = alternativesStarting(atOrBefore: key, in: alternatives)
        return next < alternatives.count ? alternatives[next].start : nil
    }

    /// Whether the full entry key `key` satisfies this condition.
    func matches(_ key: [UInt8]) -> Bool {
        guard range.contains(key) else { return false }
        guard let alternatives else { return true }
        // The last alternative that starts at or before `key` is the only one that can hold it.
        let count = alternativesStarting(atOrBefore: key, in: alternatives)
        return count > 0 && alternatives[count - 1].contains(key)
    }

    /// Whether an object whose header lists `entries` satisfies this condition.
    func isSatisfied(by entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>) -> Bool {
        for entry in entries where entry.index == index.id {
            if matches(Keyspace.indexEntryKey(prefix: prefix, tuple: entry.tuple, objectKey: objectKey)) {
                return true
            }
        }
        return false
    }

    /// The object's place in this condition's index order: the first of its entries (by header)
    /// that lie in the range, in walk order (the smallest key ascending, the largest descending);
    /// `nil` if none does.
    func position(of entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>, descending: Bool) -> [UInt8]? {
        var best: [UInt8]? = nil
        for entry in entries where entry.index == index.id {
            let key = Keyspace.indexEntryKey(prefix: prefix, tuple: entry.tuple, objectKey: objectKey)
            guard matches(key) else { continue }
            if let current = best,
                descending ? !current.lexicographicallyPrecedes(key) : !key.lexicographicallyPrecedes(current)
            {
                continue
            }
            best = key
        }
        return best
    }
}

/// A whole query resolved: the order its results come in (its first condition's index, or key
/// order), the range to walk, what to check on each candidate, and where a continuation resumes.
///
/// The results are defined by the query alone (`docs/FORMAT.md` §11): the first condition orders
/// them. The plan decides only how to find them: walk the first condition's range (`.walk`), or,
/// when another condition has few entries and the first many, collect that condition's objects and
/// sort their positions in the first condition's index (`.sorted`) — the same results, the same order,
/// the same tokens.
struct QueryPlan {
    /// How candidates are found.
    enum Strategy {
        /// Choose the cheaper of the two below.
        case automatic
        /// Always walk the ordering range (what the tests compare `.automatic` against).
        case walk
    }

    /// The condition whose index orders the results (the first), or `nil` for key order.
    let order: ConditionPlan?
    /// Every other condition, checked against each candidate's stored index values.
    let residual: [ConditionPlan]
    /// When set, candidates are the objects with an entry in this condition's range (one of `residual`),
    /// sorted into the ordering index's order, instead of a walk of `range`.
    let collectFrom: ConditionPlan?
    /// The whole range of the ordering condition (or the bucket's records).
    let fullRange: KeyRange
    /// `fullRange` narrowed to what lies after the continuation token.
    let range: KeyRange
    /// The key prefix of the ordering index (or of the bucket's records).
    let orderPrefix: [UInt8]
    let descending: Bool
    /// Results to skip before returning any: the query's offset on a walk's first page, 0 after.
    let offset: Int
    /// Results this cursor may still return: the query's limit less what earlier pages returned.
    let limit: Int?
    /// Results earlier pages of the walk returned (from the token).
    let returnedBefore: UInt64
    /// What tokens issued by this plan carry.
    let fingerprint: UInt64
    /// Whether the ordering index may hold several entries per object, so that each candidate
    /// entry must be checked to be the object's first in range.
    var orderIsMultiValued: Bool { order?.index.multiValued ?? false }

    /// At most this many entries are collected for a `.sorted` plan (bounded memory).
    static let collectLimit = 256
    /// A `.sorted` plan is used when the first condition has at least this many times more entries.
    static let collectRatio = 4

    init(
        _ query: Query, bucket: RawBucket, reader: any StorageReader, strategy: Strategy = .automatic
    ) throws(BuriError) {
        let descriptor = bucket.descriptor
        var plans: [ConditionPlan] = []
        for condition in query.conditions { plans.append(try ConditionPlan(condition, in: descriptor)) }
        order = plans.first
        residual = Array(plans.dropFirst())
        fullRange = order?.range ?? .prefix(Keyspace.recordPrefix(bucket: descriptor.id))
        orderPrefix =
            order.map { Keyspace.indexPrefix(bucket: descriptor.id, index: $0.index.id) }
            ?? Keyspace.recordPrefix(bucket: descriptor.id)
        descending = query.isDescending
        fingerprint = ContinuationFormat.fingerprint(of: query)

        var range = fullRange
        if let token = query.continuation {
            let orderId = order?.index.id ?? 0
            func refuse(_ reason: String) -> BuriError { .invalidContinuation(bucket: descriptor.name, reason: reason) }
            // A token names its bucket by lineage (the id the bucket was made with), so it resumes
            // after `deleteAll` switched the bucket to a new generation; one naming the current
            // generation's id comes from this bucket too (Buri before the lineage was kept wrote those).
            guard token.bucket == descriptor.lineageId || token.bucket == descriptor.id else {
                throw refuse(
                    "the token was issued by another bucket (bucket id \(token.bucket); this bucket is \(descriptor.lineageId)), or by one dropped since; start the walk again without a token"
                )
            }
            guard token.order == orderId else {
                let issued =
                    token.order == 0
                    ? "key order"
                    : (descriptor.indexes.first { $0.id == token.order }.map { "index '\($0.name)'" }
                        ?? "index id \(token.order), which the bucket no longer has")
                let wanted = order.map { "index '\($0.index.name)'" } ?? "key order"
                throw refuse("the token is a position in \(issued) but this query is ordered by \(wanted)")
            }
            guard token.fingerprint == fingerprint else {
                throw refuse("the token was issued for a query with other conditions or another direction")
            }
            // The position is a storage key of the generation the page was read from: the same
            // place in this generation's keys.
            guard let position = ContinuationFormat.position(token.position, inGeneration: descriptor.id),
                position.starts(with: orderPrefix), fullRange.contains(position)
            else {
                throw refuse("the token's position lies outside the query's range")
            }
            if descending {
                if range.end.map({ position.lexicographicallyPrecedes($0) }) ?? true { range.end = position }
            } else {
                let after = position + [0]
                if range.start.map({ $0.lexicographicallyPrecedes(after) }) ?? true { range.start = after }
            }
            returnedBefore = token.returned
            offset = 0
            limit = query.limit.map { Swift.max(0, $0 - Int(clamping: token.returned)) }
        } else {
            returnedBefore = 0
            offset = query.offset
            limit = query.limit
        }
        self.range = range

        // A selective later condition: collect its few objects and sort them, rather than walk
        // many entries of the first condition to find them.
        var collectFrom: ConditionPlan? = nil
        if strategy == .automatic, order != nil, !residual.isEmpty, limit != 0 {
            var smallest: (plan: ConditionPlan, count: Int)? = nil
            for plan in residual {
                let count = try bucket.countEntries(in: plan.range, reader: reader, cap: Self.collectLimit + 1)
                if count <= Self.collectLimit, count < smallest?.count ?? Int.max { smallest = (plan, count) }
            }
            if let smallest {
                let enough = Self.collectRatio * Swift.max(1, smallest.count)
                if try bucket.countEntries(in: range, reader: reader, cap: enough) >= enough {
                    collectFrom = smallest.plan
                }
            }
        }
        self.collectFrom = collectFrom
    }
}
