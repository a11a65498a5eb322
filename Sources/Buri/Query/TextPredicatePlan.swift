import BuriStorage
import BuriText

/// The parts of a phrase that are looked up: each indexed term (stop words only hold their place)
/// and the last term when it is a prefix, with its offset in the phrase.
struct TextPhrasePart: Hashable {
    let offset: UInt64
    let term: [UInt8]
    let isPrefix: Bool

    /// The looked-up parts of phrase `terms` (see ``TextQuery/phrase(_:lastIsPrefix:)``).
    static func parts(of terms: [[UInt8]], lastIsPrefix: Bool, tokenizer: TextTokenizer) -> [TextPhrasePart] {
        var parts: [TextPhrasePart] = []
        for (offset, term) in terms.enumerated() {
            if offset == terms.count - 1 && lastIsPrefix {
                parts.append(TextPhrasePart(offset: UInt64(offset), term: term, isPrefix: true))
            } else if !tokenizer.isStopWord(term) {
                parts.append(TextPhrasePart(offset: UInt64(offset), term: term, isPrefix: false))
            }
        }
        return parts
    }

    /// Whether an object whose parts occur at `positions` (one sorted list per part, in the order
    /// of `parts`) holds the phrase: some occurrence of the first part starts it and every other
    /// part sits at its offset from there.
    /// How many occurrences of the phrase an object whose parts occur at `positions` holds.
    static func occurrences(_ parts: [TextPhrasePart], _ positions: [[UInt64]]) -> Int {
        guard let first = parts.first, let starts = positions.first else { return 0 }
        return starts.count { start in
            guard start >= first.offset else { return false }
            let origin = start - first.offset
            for (part, list) in zip(parts, positions).dropFirst() where !list.sortedContains(origin + part.offset) {
                return false
            }
            return true
        }
    }

    static func aligns(_ parts: [TextPhrasePart], _ positions: [[UInt64]]) -> Bool {
        guard let first = parts.first, let starts = positions.first else { return false }
        return starts.contains { start in
            guard start >= first.offset else { return false }
            let origin = start - first.offset
            for (part, list) in zip(parts, positions).dropFirst() where !list.sortedContains(origin + part.offset) {
                return false
            }
            return true
        }
    }
}

extension [UInt64] {
    /// Whether the sorted array holds `value`.
    func sortedContains(_ value: UInt64) -> Bool {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value
    }
}

/// A ``Query/TextMatch`` resolved against a bucket's catalog: its parsed query with every term
/// encoded as the tuple its entries are keyed by, checked against one object's stored terms (its
/// record header lists one tuple per distinct term; a phrase reads the positions of its terms'
/// entries), and, as a driver, evaluated over the index's entries by ``TextSearcher``.
final class TextPredicatePlan {
    let index: IndexDefinition
    let tokenizer: TextTokenizer
    let query: TextQuery
    /// The index's key prefix.
    let prefix: [UInt8]
    let bucketName: String
    /// Reads one key at the query's snapshot (for a phrase's positions); `nil` when the plan only
    /// describes relevance.
    private let read: (([UInt8]) throws(BuriError) -> [UInt8]?)?
    private let root: Node
    /// Conditions whose entries hold every matching object (see ``PredicatePlan/sources``).
    let sources: [ConditionPlan]?
    /// The ranges of entries whose change can change the match (see ``PredicatePlan/relevance(into:)``).
    let touchedRanges: [KeyRange]

    private indirect enum Node {
        /// An entry with exactly this tuple.
        case tuple([UInt8])
        /// An entry whose tuple starts with these bytes (an encoded binary prefix).
        case prefix([UInt8])
        /// A phrase: its looked-up parts, each with its tuple (exact) or tuple prefix.
        case phrase([(part: TextPhrasePart, bytes: [UInt8])])
        case and([Node])
        case or([Node])
        case not(Node)
    }

    init(
        _ match: Query.TextMatch, in descriptor: BucketDescriptor,
        read: (([UInt8]) throws(BuriError) -> [UInt8]?)? = nil
    ) throws(BuriError) {
        index = try descriptor.textIndexDefinition(match.index)
        tokenizer = try index.textTokenizer(bucket: descriptor.name)
        if let parsed = match.parsed {
            query = parsed
        } else {
            query = try descriptor.parseTextQuery(match.text ?? "", index: match.index)
        }
        try index.requireAnswerable(query, bucket: descriptor.name)
        prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        bucketName = descriptor.name
        self.read = read
        if case .not = query {
            throw .invalidQuery(
                bucket: descriptor.name, index: index.name, reason: "NOT needs a query on its left (`a NOT b`)")
        }
        let built = try Self.build(query, descriptor: descriptor, index: index, tokenizer: tokenizer)
        root = built.node
        sources = built.sources
        touchedRanges = Self.ranges(of: built.node, descriptor: descriptor, index: index)
    }

    /// The ranges of the entries `node` reads, and of the segments and tombstones that hold or
    /// cancel its terms' postings (`docs/FORMAT.md` §5c): a write changes one of them whenever it
    /// changes a term's postings.
    private static func ranges(of node: Node, descriptor: BucketDescriptor, index: IndexDefinition) -> [KeyRange] {
        let prefix = Keyspace.indexPrefix(bucket: descriptor.id, index: index.id)
        return entryRanges(of: node, descriptor: descriptor, index: index).flatMap { range -> [KeyRange] in
            guard let start = range.start, start.count > prefix.count, start.starts(with: prefix) else {
                return [range]
            }
            let term = start[prefix.count...]
            return [range]
                + [GroupedPostingKeys.segmentTag, GroupedPostingKeys.tombstoneTag].map { tag in
                    KeyRange.prefix(prefix + [tag] + term)
                }
        }
    }

    /// The ranges of the single entries `node` reads.
    private static func entryRanges(of node: Node, descriptor: BucketDescriptor, index: IndexDefinition) -> [KeyRange] {
        switch node {
        case .tuple(let tuple):
            return condition(tuple: tuple, exact: true, descriptor: descriptor, index: index).touchedRanges
        case .prefix(let bytes):
            return condition(tuple: bytes, exact: false, descriptor: descriptor, index: index).touchedRanges
        case .phrase(let parts):
            return parts.flatMap {
                condition(tuple: $0.bytes, exact: !$0.part.isPrefix, descriptor: descriptor, index: index)
                    .touchedRanges
            }
        case .and(let nodes), .or(let nodes):
            return nodes.flatMap { entryRanges(of: $0, descriptor: descriptor, index: index) }
        case .not(let inner):
            return entryRanges(of: inner, descriptor: descriptor, index: index)
        }
    }

    /// The condition whose range holds the entries of tuple `tuple` (or of every tuple starting
    /// with the encoded prefix `tuple`).
    private static func condition(
        tuple: [UInt8], exact: Bool, descriptor: BucketDescriptor, index: IndexDefinition
    ) -> ConditionPlan {
        ConditionPlan(tuplePrefix: tuple, exact: exact, of: index, in: descriptor)
    }

    /// The node of `query`, and conditions whose entries hold all its matches (`nil`: none do).
    private static func build(
        _ query: TextQuery, descriptor: BucketDescriptor, index: IndexDefinition, tokenizer: TextTokenizer
    ) throws(BuriError) -> (node: Node, sources: [ConditionPlan]?) {
        switch query {
        case .term(let term):
            let tuple = index.stored(encoded: IndexValue(bytes: term).encoded)
            return (.tuple(tuple), [condition(tuple: tuple, exact: true, descriptor: descriptor, index: index)])
        case .prefix(let start):
            var bytes: [UInt8] = []
            ValueEncoding.appendBinaryPrefix(start, to: &bytes)
            return (.prefix(bytes), [condition(tuple: bytes, exact: false, descriptor: descriptor, index: index)])
        case .phrase(let terms, let lastIsPrefix):
            guard terms.count <= TextEntries.maximumPhraseTerms else {
                throw .invalidQuery(
                    bucket: descriptor.name, index: index.name,
                    reason:
                        "a phrase has \(terms.count) terms, over the limit of \(TextEntries.maximumPhraseTerms)")
            }
            let parts = TextPhrasePart.parts(of: terms, lastIsPrefix: lastIsPrefix, tokenizer: tokenizer).map {
                part -> (part: TextPhrasePart, bytes: [UInt8]) in
                if part.isPrefix {
                    var bytes: [UInt8] = []
                    ValueEncoding.appendBinaryPrefix(part.term, to: &bytes)
                    return (part, bytes)
                }
                return (part, index.stored(encoded: IndexValue(bytes: part.term).encoded))
            }
            // Every match holds each part; the first exact one (or the prefix) finds them all.
            let lead = parts.first { !$0.part.isPrefix } ?? parts.first
            let sources = lead.map { lead in
                [condition(tuple: lead.bytes, exact: !lead.part.isPrefix, descriptor: descriptor, index: index)]
            }
            // A phrase of stop words only matches nothing: no sources needed (an empty list).
            return (.phrase(parts), sources ?? [])
        case .and(let operands):
            var nodes: [Node] = []
            var best: [ConditionPlan]? = nil
            var positive = false
            for operand in operands {
                if case .not(let inner) = operand {
                    nodes.append(
                        .not(try build(inner, descriptor: descriptor, index: index, tokenizer: tokenizer).node))
                    continue
                }
                positive = true
                let built = try build(operand, descriptor: descriptor, index: index, tokenizer: tokenizer)
                nodes.append(built.node)
                if let found = built.sources, best == nil || found.count < best?.count ?? 0 { best = found }
            }
            guard positive else {
                throw .invalidQuery(bucket: descriptor.name, index: index.name, reason: "a query cannot be only NOT")
            }
            return (.and(nodes), best)
        case .or(let operands):
            var nodes: [Node] = []
            var all: [ConditionPlan]? = []
            for operand in operands {
                let built = try build(operand, descriptor: descriptor, index: index, tokenizer: tokenizer)
                nodes.append(built.node)
                if let found = built.sources { all? += found } else { all = nil }
            }
            return (.or(nodes), all)
        case .not:
            throw .invalidQuery(
                bucket: descriptor.name, index: index.name, reason: "NOT needs a query on its left (`a NOT b`)")
        }
    }

    /// Whether the object whose record header lists `entries` matches.
    func isSatisfied(by entries: [RecordHeader.Entry], objectKey: ArraySlice<UInt8>) throws(BuriError) -> Bool {
        try evaluate(root, entries, objectKey)
    }

    private func evaluate(
        _ node: Node, _ entries: [RecordHeader.Entry], _ objectKey: ArraySlice<UInt8>
    ) throws(BuriError) -> Bool {
        let id = index.id
        switch node {
        case .tuple(let tuple):
            return entries.contains { $0.index == id && $0.tuple == tuple }
        case .prefix(let bytes):
            return entries.contains { $0.index == id && $0.tuple.starts(with: bytes) }
        case .phrase(let parts):
            guard !parts.isEmpty else { return false }
            var positions: [[UInt64]] = []
            for part in parts {
                let tuples = entries.lazy.filter {
                    $0.index == id && (part.part.isPrefix ? $0.tuple.starts(with: part.bytes) : $0.tuple == part.bytes)
                }.map(\.tuple)
                var found: [UInt64] = []
                for tuple in tuples { found += try self.positions(of: tuple, objectKey: objectKey) }
                guard !found.isEmpty else { return false }
                if part.part.isPrefix { found.sort() }
                positions.append(found)
            }
            return TextPhrasePart.aligns(parts.map(\.part), positions)
        case .and(let nodes):
            for node in nodes where try !evaluate(node, entries, objectKey) { return false }
            return true
        case .or(let nodes):
            for node in nodes where try evaluate(node, entries, objectKey) { return true }
            return false
        case .not(let inner):
            return try !evaluate(inner, entries, objectKey)
        }
    }

    /// The positions stored in the entry of `tuple` for the object: its header lists the tuple,
    /// so a missing or unreadable entry is damage.
    private func positions(of tuple: [UInt8], objectKey: ArraySlice<UInt8>) throws(BuriError) -> [UInt64] {
        let key = String(decoding: objectKey, as: UTF8.self)
        guard let read else {
            throw .invalidQuery(bucket: bucketName, index: index.name, reason: "a phrase cannot be checked here")
        }
        guard let value = try read(Keyspace.indexEntryKey(prefix: prefix, tuple: tuple, objectKey: objectKey)) else {
            throw .corruption(
                bucket: bucketName, key: key, index: index.name,
                reason: "the record lists a term whose index entry is missing; run `buri check --repair`")
        }
        let decoded = value.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> [UInt64] in
                try TextEntries.decode(raw, layout: index.text?.entryLayout ?? 1).positions
            }
        }
        switch decoded {
        case .success(let positions): return positions
        case .failure(let error):
            throw .corruption(bucket: bucketName, key: key, index: index.name, reason: "text entry value: \(error)")
        }
    }

    /// The record keys of the matching objects in `range`, in walk order, from the index's entries.
    func matchingRecordKeys(
        bucket: RawBucket, reader: any StorageReader, range: KeyRange, descending: Bool
    ) throws(BuriError) -> [[UInt8]] {
        let searcher = TextSearcher(
            bucket: bucket, index: index, tokenizer: tokenizer, reader: reader, prefix: prefix)
        var keys: [[UInt8]] = []
        for objectKey in try searcher.evaluate(query) {
            let recordKey = bucket.recordPrefix + objectKey
            if range.contains(recordKey) { keys.append(recordKey) }
        }
        if descending { keys.reverse() }
        return keys
    }
}
