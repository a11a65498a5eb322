import BuriStorage

/// A query condition resolved against a bucket's catalog: the exact LevelDB key range that holds
/// its matches. Built only here, from `Keyspace` and `ValueEncoding`.
final class ConditionPlan {
    let index: IndexDefinition
    /// The key prefix of the index's entries.
    let prefix: [UInt8]
    /// The range of full index-entry keys (prefix, tuple, object key) that satisfy the condition;
    /// for an `anyOf` condition, the smallest range holding all of its alternatives.
    let range: KeyRange
    /// For an `anyOf` condition, the ranges of its values, sorted and disjoint: a key in `range`
    /// matches only if one of them holds it.
    let alternatives: [KeyRange]?
    /// Whether the range holds exactly one value tuple (an equality on every component): an
    /// object has at most one entry there, even in a multi-valued index (its entries are distinct).
    let isOneTuple: Bool

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
        /// A value as the index stores it: itself, or its token in a private index.
        func stored(_ value: IndexValue) -> [UInt8] {
            index.tokens.map { $0.token(value, index: index.name).encoded } ?? value.encoded
        }
        prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        var base = prefix
        for (position, value) in condition.leading.enumerated() {
            try check(value, component: position)
            base.append(contentsOf: stored(value))
        }
        let next = condition.leading.count
        var alternatives: [KeyRange]? = nil
        if case .none = condition.rest, next == arity { isOneTuple = true } else { isOneTuple = false }
        switch condition.rest {
        case .none:
            range = .prefix(base)
        case .anyOf(let values):
            var prefixes: [[UInt8]] = []
            prefixes.reserveCapacity(values.count)
            for value in values {
                try check(value, component: next)
                prefixes.append(base + stored(value))
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
            try index.requireOrder(bucket: descriptor.name, for: "a range of values")
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
            try index.requireOrder(bucket: descriptor.name, for: "a prefix query")
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

    /// The condition "has a value in `index`": every entry of it, for ordering by it.
    init(wholeIndex index: IndexDefinition, in descriptor: BucketDescriptor) {
        self.index = index
        prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        range = .prefix(prefix)
        alternatives = nil
        isOneTuple = false
    }

    /// The entries of an index whose tuple is `bytes` (`exact`) or starts with the encoded bytes
    /// `bytes` (a text index's term, or terms with a prefix).
    init(tuplePrefix bytes: [UInt8], exact: Bool, of index: IndexDefinition, in descriptor: BucketDescriptor) {
        self.index = index
        prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        range = .prefix(prefix + bytes)
        alternatives = nil
        isOneTuple = exact
    }

    /// The ranges a commit must touch to change which objects match (for live queries).
    var touchedRanges: [KeyRange] { alternatives ?? [range] }

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

    /// The condition whose index orders the results (the first, or the one on the first sort
    /// key's index), or `nil` for key order.
    let order: ConditionPlan?
    /// Every other condition, checked against each candidate's stored index values.
    let residual: [ConditionPlan]
    /// The query's predicates (OR, NOT, filters, text matches), checked on each candidate too
    /// (all but ``textDriver``).
    let predicates: [PredicatePlan]
    /// A text match that finds the candidates (in key order, from its index's entries), which
    /// then only need the other predicates checked; `nil` for a walk or a collection.
    let textDriver: TextPredicatePlan?
    /// Whether a candidate's payload must be decoded to check it (a filter).
    let decodes: Bool
    /// The sort keys after the first, with their effective direction: each group of objects that
    /// tie on the ordering index is sorted by them (then by key in the walk's direction).
    let secondary: [SecondarySort]
    /// When ordered by a sort key whose index an object may have no value in: the range of the
    /// bucket's records walked after the index, for the objects without a value (in key order
    /// in the walk's direction); `nil` when there is no such phase.
    let nullRange: KeyRange?
    /// Whether a continuation resumes inside the phase of objects without a value.
    let resumesInNulls: Bool
    /// For a token of a query with several sort keys: the sort bytes of the last result returned
    /// and its position; results of that group up to it are skipped.
    let resume: (secondary: [UInt8], position: [UInt8])?
    /// When set, candidates are the objects with an entry in these conditions' ranges (a residual
    /// condition, or every branch of an OR), sorted into the results' order, instead of a walk of `range`.
    let collectFrom: [ConditionPlan]?
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
    /// (An equality on every component of a multi-valued index is not: each object has one entry
    /// with that tuple at most, so a walk of it meets each object once without reading headers.)
    var orderIsMultiValued: Bool {
        guard let order, order.index.multiValued else { return false }
        return !order.isOneTuple
    }
    /// Whether each candidate is checked against more than the ordering range.
    var filters: Bool { !residual.isEmpty || !predicates.isEmpty }

    /// At most this many entries are collected for a `.sorted` plan (bounded memory).
    static let collectLimit = 256
    /// At most this many entries are collected (memory stays bounded); above ``collectLimit`` only
    /// when the walk would read several times more.
    static let keyOrderCollectLimit = 16_384
    /// With a limit, the walk's range is counted up to this many times the collection's size.
    static let walkCountCap = 64
    /// A `.sorted` plan is used when the first condition has at least this many times more entries.
    static let collectRatio = 4

    init(
        _ query: Query, bucket: RawBucket, reader: any StorageReader, strategy: Strategy = .automatic
    ) throws(BuriError) {
        let descriptor = bucket.descriptor
        var plans: [ConditionPlan] = []
        for condition in query.conditions { plans.append(try ConditionPlan(condition, in: descriptor)) }
        var predicates: [PredicatePlan] = []
        let postings = bucket.postingsReader(reader)
        let read = { (key: [UInt8]) throws(BuriError) -> [UInt8]? in try bucket.run { try postings.get(key) } }
        for predicate in query.predicates {
            predicates.append(try PredicatePlan(predicate, in: descriptor, read: read))
        }
        // In key order, a text match finds its objects from its index's entries (in key order
        // already) and the walk checks only the rest on each.
        var textDriver: TextPredicatePlan? = nil
        if strategy == .automatic, query.conditions.isEmpty, query.sortKeys.isEmpty,
            let at = predicates.firstIndex(where: { if case .text = $0 { true } else { false } }),
            case .text(let driver) = predicates[at]
        {
            textDriver = driver
            predicates.remove(at: at)
        }
        self.textDriver = textDriver
        self.predicates = predicates
        decodes = predicates.contains { $0.decodes }

        var nullsAfter = false
        if query.sortKeys.isEmpty {
            order = plans.first
            residual = Array(plans.dropFirst())
            descending = query.isDescending
            secondary = []
        } else {
            var keys: [(index: IndexDefinition, descending: Bool)] = []
            for key in query.sortKeys {
                if let unresolved = key.unresolved {
                    throw .unindexedKeyPath(type: unresolved.type, keyPath: unresolved.keyPath)
                }
                guard let index = descriptor.index(named: key.index) else {
                    throw .unknownIndex(
                        bucket: descriptor.name, index: key.index, known: descriptor.indexes.map(\.name))
                }
                try index.requireOrder(bucket: descriptor.name, for: "an order by it")
                keys.append((index, key.descending != query.isDescending))
            }
            let lead = keys[0].index
            descending = keys[0].descending
            // A condition on the first key's index already walks it in order, and every result
            // has a value there; on a multi-valued index the condition's range would change which
            // value an object sorts by, so it is checked like the others.
            if !lead.multiValued, let at = plans.firstIndex(where: { $0.index.id == lead.id }) {
                order = plans[at]
                plans.remove(at: at)
            } else {
                order = ConditionPlan(wholeIndex: lead, in: descriptor)
                nullsAfter = true
            }
            residual = plans
            secondary = keys.dropFirst().map { SecondarySort(index: $0.index.id, descending: $0.descending) }
        }
        let recordRange = KeyRange.prefix(Keyspace.recordPrefix(bucket: descriptor.id))
        fullRange = order?.range ?? recordRange
        orderPrefix =
            order.map { Keyspace.indexPrefix(bucket: descriptor.id, index: $0.index.id) }
            ?? Keyspace.recordPrefix(bucket: descriptor.id)
        fingerprint = ContinuationFormat.fingerprint(of: query)

        var range = fullRange
        var nullRange: KeyRange? = nullsAfter ? recordRange : nil
        var resumesInNulls = false
        var resume: (secondary: [UInt8], position: [UInt8])? = nil
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
            guard token.fingerprint == fingerprint, (token.secondary != nil) == !secondary.isEmpty else {
                throw refuse("the token was issued for a query with other conditions or another direction or order")
            }
            // The position is a storage key of the generation the page was read from: the same
            // place in this generation's keys.
            guard let position = ContinuationFormat.position(token.position, inGeneration: descriptor.id) else {
                throw refuse("the token's position lies outside the query's range")
            }
            if let records = nullRange, recordRange.contains(position), position != recordRange.start {
                // A position among the objects without a value: the index walk is over.
                resumesInNulls = true
                range = KeyRange(start: position, end: position)
                var narrowed = records
                if token.secondary == nil {
                    if descending { narrowed.end = position } else { narrowed.start = position + [0] }
                }
                nullRange = narrowed
            } else {
                guard position.starts(with: orderPrefix), fullRange.contains(position) else {
                    throw refuse("the token's position lies outside the query's range")
                }
                var from = position
                if token.secondary != nil, let order {
                    // Resume at the start of the position's group (its value in the ordering
                    // index): the group is sorted again and read past the position.
                    let arity = order.index.components.count
                    let tupleEnd = position.withUnsafeBytes { raw in
                        (try? Keyspace.splitIndexEntry(raw, arity: arity))?.tuple.upperBound
                    }
                    guard let tupleEnd else { throw refuse("the token's position is not an index entry") }
                    let group = Array(position[..<tupleEnd])
                    from = descending ? (KeyRange.successor(ofPrefix: group) ?? group) : group
                    if descending {
                        if range.end.map({ from.lexicographicallyPrecedes($0) }) ?? true { range.end = from }
                    } else if range.start.map({ $0.lexicographicallyPrecedes(from) }) ?? true {
                        range.start = from
                    }
                } else if descending {
                    if range.end.map({ from.lexicographicallyPrecedes($0) }) ?? true { range.end = from }
                } else {
                    let after = from + [0]
                    if range.start.map({ $0.lexicographicallyPrecedes(after) }) ?? true { range.start = after }
                }
            }
            if let sortBytes = token.secondary { resume = (sortBytes, position) }
            returnedBefore = token.returned
            offset = 0
            limit = query.limit.map { Swift.max(0, $0 - Int(clamping: token.returned)) }
        } else {
            returnedBefore = 0
            offset = query.offset
            limit = query.limit
        }
        self.nullRange = nullRange
        self.resumesInNulls = resumesInNulls
        self.resume = resume
        self.range = range

        // A selective condition (or OR of conditions): collect its objects and sort them, rather
        // than walk many more entries of the ordering index, or every record, to find them.
        var collectFrom: [ConditionPlan]? = nil
        if strategy == .automatic, limit != 0, secondary.isEmpty, textDriver == nil {
            var sources: [[ConditionPlan]] = residual.map { [$0] }
            for predicate in predicates { if let found = predicate.sources { sources.append(found) } }
            let cap = Self.keyOrderCollectLimit
            var smallest: (plans: [ConditionPlan], count: Int)? = nil
            for candidate in sources {
                var count = 0
                for plan in candidate where count <= cap {
                    count += try bucket.countEntries(in: plan.range, reader: reader, cap: cap + 1 - count)
                }
                if count <= cap, count < smallest?.count ?? Int.max { smallest = (candidate, count) }
            }
            if let smallest {
                let size = Swift.max(1, smallest.count)
                // The walk reads about `wanted × walked / size` entries before it has `wanted`
                // results; collecting reads `size` entries and headers and sorts them.
                let enough: Int
                if let limit, size > Self.collectLimit {
                    let wanted = Swift.max(1, limit + offset)
                    let needed = Self.collectRatio * size * size / wanted
                    enough = needed <= Self.walkCountCap * size ? Swift.max(needed, Self.collectRatio * size) : Int.max
                } else {
                    enough = Self.collectRatio * size
                }
                if enough < Int.max {
                    // In key order over the whole bucket, the stored object count says how many
                    // records the walk would read, without stepping through them.
                    let walked: Int
                    if order == nil, query.continuation == nil, let objects = try bucket.objectCount(reader: reader) {
                        walked = objects
                    } else {
                        walked = try bucket.countEntries(in: range, reader: reader, cap: enough)
                    }
                    if walked >= enough { collectFrom = smallest.plans }
                }
            }
        }
        self.collectFrom = collectFrom
    }
}

/// A sort key after the first, resolved: its index and effective direction.
struct SecondarySort {
    let index: UInt32
    let descending: Bool

    /// Appends this key's sort bytes for an object whose header lists `entries`, so that byte
    /// order is the key's order: `01` and the object's first value in the key's direction (every
    /// byte inverted when descending: the encodings are prefix-free, so inverting reverses their
    /// order), or `02` when the object has no value (after every value, in both directions).
    func appendSortBytes(of entries: [RecordHeader.Entry], to bytes: inout [UInt8]) {
        var best: [UInt8]? = nil
        for entry in entries where entry.index == index {
            if let current = best,
                descending
                    ? !current.lexicographicallyPrecedes(entry.tuple) : !entry.tuple.lexicographicallyPrecedes(current)
            {
                continue
            }
            best = entry.tuple
        }
        guard let best else {
            bytes.append(2)
            return
        }
        bytes.append(1)
        if descending { bytes.append(contentsOf: best.map { ~$0 }) } else { bytes.append(contentsOf: best) }
    }
}

/// A ``Query/Predicate`` resolved against a bucket's catalog.
indirect enum PredicatePlan {
    case condition(ConditionPlan)
    case all([PredicatePlan])
    case any([PredicatePlan])
    case not(PredicatePlan)
    case filter(QueryFilter)
    case text(TextPredicatePlan)

    /// `predicate` resolved; `read` reads one key at the query's snapshot (a text phrase reads its
    /// terms' positions), `nil` for a plan that only describes relevance.
    init(
        _ predicate: Query.Predicate, in descriptor: BucketDescriptor,
        read: (([UInt8]) throws(BuriError) -> [UInt8]?)? = nil
    ) throws(BuriError) {
        switch predicate {
        case .condition(let condition): self = .condition(try ConditionPlan(condition, in: descriptor))
        case .all(let parts):
            var plans: [PredicatePlan] = []
            for part in parts { plans.append(try PredicatePlan(part, in: descriptor, read: read)) }
            self = .all(plans)
        case .any(let parts):
            var plans: [PredicatePlan] = []
            for part in parts { plans.append(try PredicatePlan(part, in: descriptor, read: read)) }
            self = .any(plans)
        case .not(let inner): self = .not(try PredicatePlan(inner, in: descriptor, read: read))
        case .filter(let filter): self = .filter(filter)
        case .text(let match): self = .text(try TextPredicatePlan(match, in: descriptor, read: read))
        }
    }

    /// Whether checking it may decode the object.
    var decodes: Bool {
        switch self {
        case .condition, .text: false
        case .all(let parts), .any(let parts): parts.contains { $0.decodes }
        case .not(let inner): inner.decodes
        case .filter: true
        }
    }

    /// Conditions whose entries hold every object that satisfies it (so collecting their objects
    /// finds all of its matches), or `nil` if there are none: a NOT or a filter can match objects
    /// with no entry anywhere.
    var sources: [ConditionPlan]? {
        switch self {
        case .condition(let plan): return [plan]
        case .text(let plan): return plan.sources
        case .all(let parts):
            return parts.lazy.compactMap(\.sources).min { $0.count < $1.count }
        case .any(let parts):
            var all: [ConditionPlan] = []
            for part in parts {
                guard let found = part.sources else { return nil }
                all += found
            }
            return all
        case .not, .filter: return nil
        }
    }

    /// The ranges of index entries whose change can change its value for an object, and whether
    /// a change to a record alone can (a NOT matches objects with no entry; a filter reads the object).
    func relevance(into ranges: inout [KeyRange]) -> Bool {
        switch self {
        case .condition(let plan):
            ranges += plan.touchedRanges
            return false
        case .text(let plan):
            // Every change of a term's presence or positions puts or deletes one of its entries.
            ranges += plan.touchedRanges
            return false
        case .all(let parts), .any(let parts):
            var records = false
            for part in parts where part.relevance(into: &ranges) { records = true }
            return records
        case .not(let inner):
            _ = inner.relevance(into: &ranges)
            return true
        case .filter:
            return true
        }
    }

    /// Whether an object whose header lists `entries` satisfies it; `check` decodes the object for
    /// a filter. Index conditions are checked before filters, so an object is decoded only when
    /// they leave the answer open.
    func isSatisfied(
        by entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>,
        check: (QueryFilter) throws(BuriError) -> Bool
    ) throws(BuriError) -> Bool {
        switch self {
        case .condition(let plan):
            return plan.isSatisfied(by: entries, objectKey: objectKey)
        case .text(let plan):
            return try plan.isSatisfied(by: entries, objectKey: objectKey)
        case .all(let parts):
            for part in parts where !part.decodes {
                if try !part.isSatisfied(by: entries, objectKey: objectKey, check: check) { return false }
            }
            for part in parts where part.decodes {
                if try !part.isSatisfied(by: entries, objectKey: objectKey, check: check) { return false }
            }
            return true
        case .any(let parts):
            for part in parts where !part.decodes {
                if try part.isSatisfied(by: entries, objectKey: objectKey, check: check) { return true }
            }
            for part in parts where part.decodes {
                if try part.isSatisfied(by: entries, objectKey: objectKey, check: check) { return true }
            }
            return false
        case .not(let inner):
            return try !inner.isSatisfied(by: entries, objectKey: objectKey, check: check)
        case .filter(let filter):
            return try check(filter)
        }
    }
}
