import BuriStorage

/// A query condition resolved against a bucket's catalog: the exact LevelDB key range that holds
/// its matches. Built only here, from `Keyspace` and `ValueEncoding`.
struct ConditionPlan {
    let index: IndexDefinition
    /// The range of full index-entry keys (prefix, tuple, object key) that satisfy the condition.
    let range: KeyRange

    init(_ condition: Query.Condition, in descriptor: BucketDescriptor) throws(BuriError) {
        guard let index = descriptor.index(named: condition.index) else {
            throw .unknownIndex(bucket: descriptor.name, index: condition.index, known: descriptor.indexes.map(\.name))
        }
        self.index = index
        let arity = index.components.count
        let needsNext: Bool
        if case .none = condition.rest { needsNext = false } else { needsNext = true }
        let used = condition.leading.count + (needsNext ? 1 : 0)
        guard used <= arity, used > 0 || !needsNext || arity > 0 else {
            throw .invalidQuery(bucket: descriptor.name, index: index.name,
                                reason: "the index has \(arity) component(s) but the query constrains \(used)")
        }
        if condition.leading.isEmpty, !needsNext {
            throw .invalidQuery(bucket: descriptor.name, index: index.name, reason: "the query gives no value to match")
        }
        func check(_ value: IndexValue, component: Int) throws(BuriError) {
            let kind = index.components[component]
            if value.isNumeric != (kind == .numeric) {
                throw .invalidQuery(bucket: descriptor.name, index: index.name,
                                    reason: "component \(component + 1) is \(kind.rawValue) but the query gives \(value)")
            }
        }
        var base = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        for (position, value) in condition.leading.enumerated() {
            try check(value, component: position)
            base.append(contentsOf: value.encoded)
        }
        let next = condition.leading.count
        switch condition.rest {
        case .none:
            range = .prefix(base)
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
                throw .invalidQuery(bucket: descriptor.name, index: index.name,
                                    reason: "a prefix query needs a binary component, but component \(next + 1) is numeric")
            }
            var key = base
            ValueEncoding.appendBinaryPrefix(bytes, to: &key)
            range = .prefix(key)
        }
    }

    /// Whether an object whose header lists `entries` satisfies this condition.
    func isSatisfied(by entries: [RecordHeader.Entry], bucket: UInt32, objectKey: String) -> Bool {
        let prefix = Keyspace.indexPrefix(bucket: bucket, index: index.id)
        for entry in entries where entry.index == index.id {
            if range.contains(Keyspace.indexEntryKey(prefix: prefix, tuple: entry.tuple, objectKey: objectKey)) { return true }
        }
        return false
    }
}

/// A whole query resolved: which range to scan, and what to check on each candidate.
struct QueryPlan {
    /// The driving condition, or `nil` to scan the records in key order.
    let driver: ConditionPlan?
    /// Conditions checked against each candidate's stored index values.
    let residual: [ConditionPlan]
    /// The LevelDB range the scan walks (narrowed by a continuation token).
    let range: KeyRange
    let descending: Bool
    let offset: Int
    let limit: Int?

    init(_ query: Query, bucket: RawBucket, reader: any StorageReader) throws(BuriError) {
        let descriptor = bucket.descriptor
        var plans: [ConditionPlan] = []
        for condition in query.conditions { plans.append(try ConditionPlan(condition, in: descriptor)) }
        if plans.count > 1 {
            // Drive the scan from the condition with the fewest entries (counted up to a cap).
            let counts = try plans.map { plan throws(BuriError) in try bucket.countEntries(in: plan.range, reader: reader, cap: 512) }
            let best = counts.indices.min { counts[$0] < counts[$1] } ?? 0
            driver = plans[best]
            plans.remove(at: best)
            residual = plans
        } else {
            driver = plans.first
            residual = []
        }
        var range = driver?.range ?? .prefix(Keyspace.recordPrefix(bucket: descriptor.id))
        if let token = query.continuation {
            if query.isDescending {
                if range.end.map({ token.key.lexicographicallyPrecedes($0) }) ?? true { range.end = token.key }
            } else {
                let after = token.key + [0]
                if range.start.map({ $0.lexicographicallyPrecedes(after) }) ?? true { range.start = after }
            }
        }
        self.range = range
        descending = query.isDescending
        offset = query.offset
        limit = query.limit
    }
}
