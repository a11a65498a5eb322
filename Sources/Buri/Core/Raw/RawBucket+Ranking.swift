import BuriStorage
import BuriText

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One ranked match: an object key and its BM25 score (higher is better).
///
/// ```swift
/// for hit in try notes.rankedSearchKeys("body", "apple pie", limit: 10) { print(hit.key, hit.score) }
/// ```
public struct RankedKey: Sendable, Hashable {
    public var key: String
    public var score: Double
}

/// One ranked object (see ``Bucket/rankedSearch(_:_:limit:where:)-(String,String,_,_)``).
///
/// ```swift
/// let best = try notes.rankedSearch("body", "apple pie", limit: 1).first?.object
/// ```
public struct Ranked<T> {
    public var object: T
    public var key: String
    /// The BM25 score (higher is better): SQLite FTS5's `bm25()` with its defaults, negated.
    public var score: Double
}

extension Ranked: Sendable where T: Sendable {}

extension RawBucket {
    /// The `limit` best matches of `query` in text index `index` by BM25, best first (equal scores
    /// in key byte order), read through `reader` (one snapshot). See `TextRanker`.
    func rankedTextSearch(
        index: String, query: TextQuery, limit: Int, filter: Query? = nil, reader: any StorageReader
    ) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        let definition = try textIndexDefinition(index)
        // Whatever the bucket holds: a query that cannot be answered is refused even when empty.
        try definition.requireAnswerable(query, bucket: name)
        let tokenizer = try definition.textTokenizer(bucket: name)
        guard definition.text?.keepsLengths == true else {
            throw .invalidQuery(
                bucket: name, index: index,
                reason:
                    "text index '\(index)' was built by Buri format 6, whose entries hold no document lengths, so it cannot rank; open the bucket with its `.text` declaration (which rebuilds it) or restore an export"
            )
        }
        guard limit > 0 else { return [] }
        let documents: Int
        if let stored = try objectCount(reader: reader) {
            documents = stored
        } else {
            documents = try database.countRecords(of: bucketId, bucket: name, reader: reader)
        }
        let totalId = TextTotalId(bucket: bucketId, index: definition.id)
        let tokens =
            (try database.storedTextTotal(of: totalId, bucket: name, reader: reader) ?? 0)
            + (transaction?.counts.tokens[totalId]?.delta ?? 0)
        guard documents > 0 else { return [] }
        let searcher = TextSearcher(
            bucket: self, index: definition, tokenizer: tokenizer, reader: reader,
            prefix: Keyspace.indexPrefix(bucket: bucketId, index: definition.id))
        var ranker = TextRanker(
            searcher: searcher, documents: documents,
            averageLength: Double(max(tokens, 1)) / Double(documents), limit: limit)
        if let filter { ranker.accepts = try acceptance(of: filter, reader: reader) }
        return try ranker.rank(query)
    }

    /// Whether an object (by key) satisfies `filter`'s conditions and predicates, from its stored
    /// record (header, and payload for a filter), read through `reader`.
    private func acceptance(
        of filter: Query, reader: any StorageReader
    ) throws(BuriError) -> (([UInt8]) throws(BuriError) -> Bool)? {
        guard filter.sortKeys.isEmpty, filter.limit == nil, filter.offset == 0, filter.continuation == nil,
            !filter.isDescending
        else {
            throw .invalidQuery(
                bucket: name, index: nil,
                reason:
                    "a ranked search comes best first, at most `limit` of it: its `where` query selects only (no order, limit, offset or token)"
            )
        }
        guard !filter.conditions.isEmpty || !filter.predicates.isEmpty else { return nil }
        let descriptor = self.descriptor
        var conditions: [ConditionPlan] = []
        for condition in filter.conditions { conditions.append(try ConditionPlan(condition, in: descriptor)) }
        let postings = postingsReader(reader)
        let read = { (key: [UInt8]) throws(BuriError) -> [UInt8]? in try self.run { try postings.get(key) } }
        var predicates: [PredicatePlan] = []
        for predicate in filter.predicates {
            predicates.append(try PredicatePlan(predicate, in: descriptor, read: read))
        }
        let prefix = recordPrefix
        let name = self.name
        return { key throws(BuriError) -> Bool in
            guard let record = try read(prefix + key) else {
                throw .corruption(
                    bucket: name, key: String(decoding: key, as: UTF8.self), index: nil,
                    reason: "the text index has an entry for an object that is not stored")
            }
            let parsed = record.withUnsafeBytes { raw in
                Result { () throws(FormatError) -> (RecordHeader, Int) in try RecordHeader.parse(raw) }
            }
            guard case .success(let (header, payloadOffset)) = parsed else {
                throw .corruption(
                    bucket: name, key: String(decoding: key, as: UTF8.self), index: nil,
                    reason: "record header does not read")
            }
            let objectKey = key[...]
            guard conditions.allSatisfy({ $0.isSatisfied(by: header.entries, objectKey: objectKey) }) else {
                return false
            }
            guard !predicates.isEmpty else { return true }
            let outcome = record.withUnsafeBytes { raw in
                Result { () throws(BuriError) -> Bool in
                    try RawQueryCursor.satisfies(
                        predicates, header.entries, objectKey: objectKey,
                        payload: UnsafeRawBufferPointer(rebasing: raw[payloadOffset...]),
                        version: header.schemaVersion, catalog: descriptor)
                }
            }
            return try outcome.get()
        }
    }

    /// `rankedTextSearch(index:query:limit:filter:reader:)` on a fresh snapshot, with the query parsed.
    ///
    /// ```swift
    /// let best = try raw.rankedSearch(index: "body", query: "apple pie", limit: 20)
    /// ```
    public func rankedSearch(
        index: String, query: String, limit: Int, where filter: Query? = nil
    ) throws(BuriError) -> [RankedKey] {
        try rankedSearchKeyBytes(textIndex: index, query: query, limit: limit, where: filter).map {
            RankedKey(key: String(decoding: $0.key, as: UTF8.self), score: $0.score)
        }
    }

    /// ``rankedSearch(index:query:limit:)`` with the keys as stored (UTF-8 bytes), for tools that
    /// report a key that is not valid UTF-8 as damage rather than print another key.
    package func rankedSearchKeyBytes(
        textIndex index: String, query: String, limit: Int, where filter: Query? = nil
    ) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        let parsed = try parseTextQuery(query, index: index)
        let (reader, view) = try readView()
        return try view.rankedTextSearch(index: index, query: parsed, limit: limit, filter: filter, reader: reader)
    }
}

/// BM25 over a text index, as SQLite FTS5's `bm25()` computes it (k1 = 1.2, b = 0.75,
/// idf = ln((N − n + 0.5) / (n + 0.5)), at least 1e-6), for every term, prefix and phrase of the
/// query that is not under NOT: N is the bucket's object count, n the objects the unit matches,
/// a unit's frequency its occurrences in the object (a prefix's: every term it covers), and the
/// document length and average come from the entries and the index's token total. As in FTS5, a
/// unit scores in an object only where every AND above it matches the object (`apple OR (pie
/// apple)` counts apple once in an object without pie), and a unit written twice scores twice.
/// `FTS5OracleTests` compares the scores with FTS5's own on random queries; where an OR holds an
/// AND, FTS5's counts depend on its iterators' positions, and Buri keeps to the rule.
///
/// Top-k: a query of alternatives (`a OR b`, or one word) uses MaxScore, so once k results are
/// held, words whose most (idf × (k1 + 1)) together cannot beat the k-th only score objects the
/// other words found, and are only looked up for those; required words (`a b`, with any `NOT`)
/// are found, and each word's objects counted, by one walk of their entries, each match scored
/// from the values under the cursors, an excluded word looked up only for an object that would
/// enter the top k; a prefix
/// or a phrase alone scores the objects its one walk finds; other shapes score each match of the
/// query from its units' postings.
struct TextRanker {
    let searcher: TextSearcher
    let documents: Int
    let averageLength: Double
    let limit: Int
    /// Whether an object may be ranked at all (the other conditions of a ranked search), asked
    /// only of objects whose score would enter the top k; `nil`: every match may.
    var accepts: (([UInt8]) throws(BuriError) -> Bool)? = nil

    static let k1 = 1.2
    static let b = 0.75

    /// One scored unit's postings, in object-key order: frequency and document length.
    struct Postings {
        var keys: [[UInt8]] = []
        var frequencies: [UInt32] = []
        var lengths: [UInt32] = []
        var idf = 0.0
        /// The most one posting can add: idf × (k1 + 1).
        var most: Double { idf * (TextRanker.k1 + 1) }

        /// The first index at or after `from` whose key is not below `key` (galloping).
        func seek(_ key: [UInt8], from: Int) -> Int {
            var low = from
            var step = 1
            var high = from
            while high < keys.count, keys[high].lexicographicallyPrecedes(key) {
                low = high + 1
                high += step
                step *= 2
            }
            high = min(high, keys.count)
            while low < high {
                let middle = (low + high) / 2
                if keys[middle].lexicographicallyPrecedes(key) { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    func idf(matching count: Int) -> Double {
        let value = log((Double(documents) - Double(count) + 0.5) / (Double(count) + 0.5))
        return value > 0 ? value : 1e-6
    }

    func contribution(idf: Double, frequency: UInt32, length: UInt32) -> Double {
        let tf = Double(frequency)
        let norm = Self.k1 * (1 - Self.b + Self.b * Double(length) / averageLength)
        return idf * tf * (Self.k1 + 1) / (tf + norm)
    }

    func rank(_ query: TextQuery) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        switch query {
        case .term(let term):
            return try disjunction([term])
        case .prefix(let start):
            // Every object under the prefix matches: one walk gives them and their frequencies.
            let list = try postings(under: searcher.startPrefix(start), merging: true)
            var top = TopK(limit: limit)
            for (at, key) in list.keys.enumerated() {
                try consider(
                    key, contribution(idf: list.idf, frequency: list.frequencies[at], length: list.lengths[at]),
                    &top)
            }
            return top.sorted()
        case .phrase(let terms, let lastIsPrefix):
            // Every object holding the phrase matches: found and counted by one joint walk.
            let found = try searcher.phraseOccurrences(terms, lastIsPrefix: lastIsPrefix)
            let weight = idf(matching: found.count)
            var top = TopK(limit: limit)
            for (key, occurrences, length) in found {
                try consider(key.bytes, contribution(idf: weight, frequency: occurrences, length: length), &top)
            }
            return top.sorted()
        case .or(let operands):
            let terms = operands.compactMap { if case .term(let term) = $0 { term } else { nil } }
            if terms.count == operands.count { return try disjunction(terms) }
        case .and(let operands):
            var terms: [[UInt8]] = []
            var excluded: [[UInt8]] = []
            var simple = true
            for operand in operands {
                switch operand {
                case .term(let term): terms.append(term)
                case .not(.term(let term)): excluded.append(term)
                default: simple = false
                }
            }
            if simple, !terms.isEmpty { return try conjunction(terms, excluding: excluded) }
        default:
            break
        }
        return try scoreEveryMatch(query)
    }

    // MARK: Postings

    /// The postings of the objects under `keyPrefix`; several terms of one object (a prefix) have
    /// their frequencies added.
    private func postings(under keyPrefix: [UInt8], merging: Bool) throws(BuriError) -> Postings {
        var result = Postings()
        let layout = 2
        let bucket = searcher.bucket
        let index = searcher.index
        try bucket.run {
            let cursor = try searcher.reader.cursor(in: .prefix(keyPrefix))
            _ = cursor.deferStatusChecks()
            while try cursor.next() {
                let parsed = cursor.withKey { raw in
                    Result { () throws(FormatError) in try Keyspace.splitIndexEntry(raw, arity: 1) }
                }
                guard case .success(let parts) = parsed else {
                    throw BuriError.corruption(
                        bucket: bucket.name, key: nil, index: index.name, reason: "index entry key")
                }
                let key = cursor.withKey { Array($0[parts.objectKey]) }
                let head = try cursor.withValue { raw in
                    Result { () throws(FormatError) in try TextEntries.frequencyAndLength(raw) }
                }
                guard case .success(let (frequency, length)) = head else {
                    throw BuriError.corruption(
                        bucket: bucket.name, key: String(decoding: key, as: UTF8.self), index: index.name,
                        reason: "text entry value does not read as layout \(layout)")
                }
                result.keys.append(key)
                result.frequencies.append(UInt32(clamping: frequency))
                result.lengths.append(UInt32(clamping: length))
            }
            try cursor.checkStatus()
        }
        if merging, !result.keys.isEmpty {
            var merged: [[UInt8]: (UInt32, UInt32)] = [:]
            for (offset, key) in result.keys.enumerated() {
                let frequency = result.frequencies[offset]
                merged[key, default: (0, result.lengths[offset])].0 &+= frequency
            }
            let keys = merged.keys.sorted { $0.lexicographicallyPrecedes($1) }
            result = Postings(
                keys: keys, frequencies: keys.map { merged[$0]?.0 ?? 0 }, lengths: keys.map { merged[$0]?.1 ?? 0 })
        }
        result.idf = idf(matching: result.keys.count)
        return result
    }

    /// The postings of `term`: its entries walked by one term cursor, whose keys need no parsing.
    private func termPostings(_ term: [UInt8]) throws(BuriError) -> Postings {
        var result = Postings()
        let cursor = try TermCursor(
            bucket: searcher.bucket, index: searcher.index, reader: searcher.reader, prefix: searcher.termPrefix(term))
        while try cursor.next() {
            let (frequency, length) = try cursor.frequencyAndLength()
            result.keys.append(cursor.key)
            result.frequencies.append(UInt32(clamping: frequency))
            result.lengths.append(UInt32(clamping: length))
        }
        try cursor.checkStatus()
        result.idf = idf(matching: result.keys.count)
        return result
    }

    // MARK: Top k

    /// The k best so far: a min-heap whose root is the worst kept (lowest score, then largest key).
    struct TopK {
        let limit: Int
        var heap: [(key: [UInt8], score: Double)] = []

        /// Whether `a` ranks below `b`.
        static func worse(_ a: (key: [UInt8], score: Double), _ b: (key: [UInt8], score: Double)) -> Bool {
            a.score != b.score ? a.score < b.score : b.key.lexicographicallyPrecedes(a.key)
        }

        var isFull: Bool { heap.count >= limit }
        /// The score an object must beat to enter (−∞ until k are held).
        var threshold: Double { isFull ? heap[0].score : -.infinity }

        mutating func offer(_ key: [UInt8], _ score: Double) {
            let item = (key: key, score: score)
            if heap.count < limit {
                heap.append(item)
                var child = heap.count - 1
                while child > 0 {
                    let parent = (child - 1) / 2
                    guard Self.worse(heap[child], heap[parent]) else { break }
                    heap.swapAt(child, parent)
                    child = parent
                }
                return
            }
            guard Self.worse(heap[0], item) else { return }
            heap[0] = item
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < heap.count, Self.worse(heap[left], heap[smallest]) { smallest = left }
                if right < heap.count, Self.worse(heap[right], heap[smallest]) { smallest = right }
                if smallest == parent { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }

        /// Best first, equal scores in key order.
        func sorted() -> [(key: [UInt8], score: Double)] {
            heap.sorted { Self.worse($1, $0) }
        }
    }

    /// Whether an object whose score can be at most `bound` could still enter `top`: objects come
    /// in key order, so one that only ties the k-th comes after it and stays out. The margin keeps
    /// rounding from excluding an object the exact sum would admit.
    private static func mayEnter(_ bound: Double, _ top: TopK) -> Bool {
        bound * (1 + 1e-9) + 1e-12 > top.threshold
    }

    /// Offers a match to `top` if its score can enter and `accepts` lets it.
    private func consider(_ key: [UInt8], _ score: Double, _ top: inout TopK) throws(BuriError) {
        guard Self.mayEnter(score, top) else { return }
        if let accepts, try !accepts(key) { return }
        top.offer(key, score)
    }

    /// Σ contributions in unit order, so every path gives an object the same score.
    private static func total(_ parts: [Double]) -> Double { parts.reduce(0, +) }

    /// `a OR b OR …` of words (or one word): MaxScore over the words' postings.
    private func disjunction(_ terms: [[UInt8]]) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        var lists: [Postings] = []
        for term in terms { lists.append(try termPostings(term)) }
        // By most ascending: a prefix of lists whose mosts sum below the k-th are non-essential.
        let order = lists.indices.sorted { lists[$0].most < lists[$1].most }
        var prefixMost: [Double] = []
        var running = 0.0
        for unit in order {
            running += lists[unit].most
            prefixMost.append(running)
        }
        var positions = [Int](repeating: 0, count: lists.count)
        var top = TopK(limit: limit)
        var firstEssential = 0
        var parts = [Double](repeating: 0, count: lists.count)
        while firstEssential < order.count {
            // The next object among the essential lists.
            var candidate: [UInt8]? = nil
            for rank in firstEssential..<order.count {
                let unit = order[rank]
                guard positions[unit] < lists[unit].keys.count else { continue }
                let key = lists[unit].keys[positions[unit]]
                if candidate.map({ key.lexicographicallyPrecedes($0) }) ?? true { candidate = key }
            }
            guard let key = candidate else { break }
            for slot in parts.indices { parts[slot] = 0 }
            var partial = 0.0
            for rank in firstEssential..<order.count {
                let unit = order[rank]
                let at = positions[unit]
                guard at < lists[unit].keys.count, lists[unit].keys[at] == key else { continue }
                let value = contribution(
                    idf: lists[unit].idf, frequency: lists[unit].frequencies[at], length: lists[unit].lengths[at])
                parts[unit] = value
                partial += value
                positions[unit] = at + 1
            }
            // Non-essential lists, most first, while they can still lift it above the k-th.
            var rank = firstEssential - 1
            while rank >= 0, Self.mayEnter(partial + prefixMost[rank], top) {
                let unit = order[rank]
                let at = lists[unit].seek(key, from: positions[unit])
                positions[unit] = at
                if at < lists[unit].keys.count, lists[unit].keys[at] == key {
                    let value = contribution(
                        idf: lists[unit].idf, frequency: lists[unit].frequencies[at], length: lists[unit].lengths[at])
                    parts[unit] = value
                    partial += value
                }
                rank -= 1
            }
            if rank < 0 { try consider(key, Self.total(parts), &top) }
            while firstEssential < order.count, !Self.mayEnter(prefixMost[firstEssential], top) {
                firstEssential += 1
            }
        }
        return top.sorted()
    }

    /// `a b …` (every word required, `NOT c` excluded): one walk of every word's entries
    /// (``TextSearcher/intersectCounting(_:_:)``) finds the objects holding all of them, with
    /// their frequencies and lengths, and counts each word's objects for its idf; an excluded
    /// word is looked up only for an object that would enter the top k.
    private func conjunction(
        _ terms: [[UInt8]], excluding excluded: [[UInt8]]
    ) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        let prefixes = terms.map { searcher.termPrefix($0) }
        let excludedPrefixes = excluded.map { searcher.termPrefix($0) }
        let bucket = searcher.bucket
        // One walk of every word's entries finds the objects holding all of them and counts each
        // word's objects; the idf needs the counts, so matches are scored after the walk.
        var matches: [(key: [UInt8], heads: [(frequency: UInt32, length: UInt32)])] = []
        let counts = try searcher.intersectCounting(prefixes) { key, cursors throws(BuriError) in
            var heads: [(frequency: UInt32, length: UInt32)] = []
            for cursor in cursors {
                let (frequency, length) = try cursor.frequencyAndLength()
                heads.append((UInt32(clamping: frequency), UInt32(clamping: length)))
            }
            matches.append((key, heads))
        }
        let idfs = counts.map { idf(matching: $0) }
        var top = TopK(limit: limit)
        var parts = [Double](repeating: 0, count: terms.count)
        for (key, heads) in matches {
            for (slot, head) in heads.enumerated() {
                parts[slot] = contribution(idf: idfs[slot], frequency: head.frequency, length: head.length)
            }
            let score = Self.total(parts)
            guard Self.mayEnter(score, top) else { continue }
            var excludedHere = false
            for prefix in excludedPrefixes {
                let entry = prefix + key
                if try bucket.run({ try searcher.reader.get(entry) != nil }) {
                    excludedHere = true
                    break
                }
            }
            if !excludedHere { try consider(key, score, &top) }
        }
        return top.sorted()
    }

    /// Any other query: its matches (``TextSearcher``), each scored from its units' postings.
    private func scoreEveryMatch(_ query: TextQuery) throws(BuriError) -> [(key: [UInt8], score: Double)] {
        let matches = try searcher.evaluate(query)
        guard !matches.isEmpty else { return [] }
        var units: [[ObjectKeyBytes: (frequency: UInt32, length: UInt32)]] = []
        var idfs: [Double] = []
        for unit in Self.units(of: query) {
            var found: [ObjectKeyBytes: (frequency: UInt32, length: UInt32)] = [:]
            switch unit {
            case .term(let term):
                let list = try termPostings(term)
                for (offset, key) in list.keys.enumerated() {
                    found[ObjectKeyBytes(key)] = (list.frequencies[offset], list.lengths[offset])
                }
            case .prefix(let start):
                var keyPrefix = searcher.prefix
                ValueEncoding.appendBinaryPrefix(start, to: &keyPrefix)
                let list = try postings(under: keyPrefix, merging: true)
                for (offset, key) in list.keys.enumerated() {
                    found[ObjectKeyBytes(key)] = (list.frequencies[offset], list.lengths[offset])
                }
            case .phrase(let terms, let lastIsPrefix):
                for (key, occurrences, length) in try searcher.phraseOccurrences(terms, lastIsPrefix: lastIsPrefix) {
                    found[key] = (occurrences, length)
                }
            default:
                continue
            }
            units.append(found)
            idfs.append(idf(matching: found.count))
        }
        // The objects each excluded operand matches, for telling which units count (FTS5's rule).
        var excluded: [Set<ObjectKeyBytes>] = []
        for inner in Self.excludedOperands(of: query) {
            excluded.append(Set(try searcher.evaluate(inner).map(ObjectKeyBytes.init)))
        }
        var top = TopK(limit: limit)
        var parts = [Double](repeating: 0, count: units.count)
        var present = [Bool](repeating: false, count: units.count)
        var counted = present
        for key in matches {
            let object = ObjectKeyBytes(key)
            for (slot, unit) in units.enumerated() { present[slot] = unit[object] != nil }
            var slot = 0
            var exclusion = 0
            _ = Self.count(
                query, object: object, present: present, excluded: excluded, slot: &slot, exclusion: &exclusion,
                counted: &counted)
            for (slot, unit) in units.enumerated() {
                if counted[slot], let posting = unit[object] {
                    parts[slot] = contribution(idf: idfs[slot], frequency: posting.frequency, length: posting.length)
                } else {
                    parts[slot] = 0
                }
            }
            try consider(key, Self.total(parts), &top)
        }
        return top.sorted()
    }

    /// Marks in `counted` which of `query`'s units (from `slot`, in ``units(of:)``'s order) score
    /// for `object`, as FTS5's `bm25()` counts them: a unit's occurrences count only where every
    /// AND above it matches the object (with its NOT operands not matching): `apple OR (pie apple)`
    /// counts apple once in an object without pie, twice in one with it. `present` tells which
    /// units occur in the object, `excluded` the objects each NOT operand matches (in
    /// ``excludedOperands(of:)``'s order, from `exclusion`). Returns whether `query` matches.
    static func count(
        _ query: TextQuery, object: ObjectKeyBytes, present: [Bool], excluded: [Set<ObjectKeyBytes>],
        slot: inout Int, exclusion: inout Int, counted: inout [Bool]
    ) -> Bool {
        switch query {
        case .term, .prefix, .phrase:
            counted[slot] = present[slot]
            slot += 1
            return present[slot - 1]
        case .or(let operands):
            var matched = false
            for operand in operands {
                if count(
                    operand, object: object, present: present, excluded: excluded, slot: &slot,
                    exclusion: &exclusion, counted: &counted)
                {
                    matched = true
                }
            }
            return matched
        case .and(let operands):
            let first = slot
            var matched = true
            for operand in operands {
                if case .not = operand {
                    if excluded[exclusion].contains(object) { matched = false }
                    exclusion += 1
                } else if !count(
                    operand, object: object, present: present, excluded: excluded, slot: &slot,
                    exclusion: &exclusion, counted: &counted)
                {
                    matched = false
                }
            }
            if !matched { for at in first..<slot { counted[at] = false } }
            return matched
        case .not:
            // Only an operand of AND (``TextSearcher`` refuses it elsewhere); scores nothing.
            return false
        }
    }

    /// The operands of NOT in `query`, in the order ``count(_:object:present:excluded:slot:exclusion:counted:)``
    /// meets them (not those inside another NOT's operand).
    static func excludedOperands(of query: TextQuery) -> [TextQuery] {
        switch query {
        case .term, .prefix, .phrase: return []
        case .or(let operands): return operands.flatMap { excludedOperands(of: $0) }
        case .and(let operands):
            return operands.flatMap { operand -> [TextQuery] in
                if case .not(let inner) = operand { return [inner] }
                return excludedOperands(of: operand)
            }
        case .not: return []
        }
    }

    /// The scored units of a query: its terms, prefixes and phrases, except those under NOT.
    static func units(of query: TextQuery) -> [TextQuery] {
        switch query {
        case .term, .prefix, .phrase: return [query]
        case .and(let operands), .or(let operands): return operands.flatMap { units(of: $0) }
        case .not: return []
        }
    }
}
