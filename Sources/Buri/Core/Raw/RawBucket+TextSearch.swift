import BuriStorage
import BuriText

// Full-text search: a TextQuery evaluated over a text index's entries with cursors, from one
// snapshot. Each term's entries come in object-key order under the term's key prefix, so every
// intermediate result is a list of object keys (UTF-8) in byte order, each once.
extension RawBucket {
    /// The text index called `index` (see ``BucketDescriptor/textIndexDefinition(_:)``).
    func textIndexDefinition(_ index: String) throws(BuriError) -> IndexDefinition {
        try descriptor.textIndexDefinition(index)
    }

    /// `query` parsed by the tokenizer of text index `index`.
    func parseTextQuery(_ query: String, index: String) throws(BuriError) -> TextQuery {
        try descriptor.parseTextQuery(query, index: index)
    }

    /// The object keys (UTF-8) matching `query` in text index `index`, in byte order, each once,
    /// read through `reader` (one snapshot).
    func textSearch(index: String, query: TextQuery, reader: any StorageReader) throws(BuriError) -> [[UInt8]] {
        let definition = try textIndexDefinition(index)
        let tokenizer = try definition.textTokenizer(bucket: name)
        try definition.requireAnswerable(query, bucket: name)
        let searcher = TextSearcher(
            bucket: self, index: definition, tokenizer: tokenizer, reader: reader,
            prefix: Keyspace.indexPrefix(bucket: bucketId, index: definition.id))
        return try searcher.evaluate(query)
    }
}

extension RawBucket {
    /// The object keys (UTF-8) whose text index `index` matches `query` (SQLite FTS5 syntax), in
    /// byte order, each once, read from one snapshot: what `Bucket.searchKeys(_:_:)`
    /// returns, without a Swift type (for `buri search`).
    ///
    /// - Throws: ``BuriError/unknownIndex(bucket:index:known:)``,
    ///   ``BuriError/invalidQuery(bucket:index:reason:)`` when `index` is not a text index,
    ///   ``BuriError/textQuerySyntax(bucket:index:query:message:offset:)`` for a query that does not
    ///   parse (offset in Characters).
    package func searchKeys(textIndex index: String, query: String) throws(BuriError) -> [[UInt8]] {
        let (reader, view) = try readView()
        let parsed = try view.parseTextQuery(query, index: index)
        return try view.textSearch(index: index, query: parsed, reader: reader)
    }
}

/// Evaluates one query over one text index.
struct TextSearcher {
    let bucket: RawBucket
    let index: IndexDefinition
    let tokenizer: TextTokenizer
    /// The reader, showing postings in segments as single entries (``GroupedPostingsReader``).
    let reader: any StorageReader
    /// The index's key prefix (`0x03` + bucket id + index id).
    let prefix: [UInt8]

    init(
        bucket: RawBucket, index: IndexDefinition, tokenizer: TextTokenizer, reader: any StorageReader,
        prefix: [UInt8]
    ) {
        self.bucket = bucket
        self.index = index
        self.tokenizer = tokenizer
        self.reader = bucket.postingsReader(reader)
        self.prefix = prefix
    }

    typealias Keys = [[UInt8]]

    func evaluate(_ query: TextQuery) throws(BuriError) -> Keys {
        switch query {
        case .term(let term):
            return try termKeys(term)
        case .prefix(let start):
            return try distinctKeys(under: startPrefix(start))
        case .phrase(let terms, let lastIsPrefix):
            return try phrase(terms, lastIsPrefix: lastIsPrefix)
        case .or(let operands):
            var result: Keys = []
            for operand in operands { result = Self.union(result, try evaluate(operand)) }
            return result
        case .and(let operands):
            return try and(operands)
        case .not:
            throw .invalidQuery(
                bucket: bucket.name, index: index.name, reason: "NOT needs a query on its left (`a NOT b`)")
        }
    }

    /// AND: the operands that are not single terms are evaluated to key lists, then each term
    /// narrows the candidates by leapfrog seeks on its entries, and each NOT operand removes its keys.
    private func and(_ operands: [TextQuery]) throws(BuriError) -> Keys {
        var terms: [[UInt8]] = []
        var others: [TextQuery] = []
        var negated: [TextQuery] = []
        for operand in operands {
            switch operand {
            case .not(let inner): negated.append(inner)
            case .term(let term): terms.append(term)
            default: others.append(operand)
            }
        }
        var candidates: Keys
        if let first = others.first {
            candidates = try evaluate(first)
            for other in others.dropFirst() where !candidates.isEmpty {
                candidates = Self.intersection(candidates, try evaluate(other))
            }
            for term in terms where !candidates.isEmpty {
                candidates = try leapfrog(candidates, termPrefix(term), keep: true)
            }
        } else if !terms.isEmpty {
            // Words only: their entries walked together, each cursor seeking past the others.
            candidates = []
            try intersect(terms.map(termPrefix)) { key, _ throws(BuriError) in candidates.append(key) }
        } else {
            throw .invalidQuery(bucket: bucket.name, index: index.name, reason: "a query cannot be only NOT")
        }
        for inner in negated where !candidates.isEmpty {
            if case .term(let term) = inner {
                candidates = try leapfrog(candidates, termPrefix(term), keep: false)
            } else {
                candidates = Self.difference(candidates, try evaluate(inner))
            }
        }
        return candidates
    }

    /// A phrase: the documents holding all its terms (each stop word stands for one position any
    /// word fills), then those where the terms' positions line up.
    private func phrase(_ terms: [[UInt8]], lastIsPrefix: Bool) throws(BuriError) -> Keys {
        guard terms.count <= TextEntries.maximumPhraseTerms else {
            throw .invalidQuery(
                bucket: bucket.name, index: index.name,
                reason:
                    "a phrase has \(terms.count) terms, over the limit of \(TextEntries.maximumPhraseTerms)")
        }
        let parts = TextPhrasePart.parts(of: terms, lastIsPrefix: lastIsPrefix, tokenizer: tokenizer)
        guard !parts.isEmpty else { return [] }
        if !parts.contains(where: \.isPrefix) {
            // Exact words: the objects holding all of them, found together; only theirs are read.
            var result: Keys = []
            let layout = index.text?.entryLayout ?? 1
            var lists = [[UInt64]](repeating: [], count: parts.count)
            try intersect(parts.map { termPrefix($0.term) }) { key, cursors throws(BuriError) in
                for (slot, cursor) in cursors.enumerated() {
                    lists[slot] = try cursor.decoded(layout: layout).positions
                }
                if TextPhrasePart.aligns(parts, lists) { result.append(key) }
            }
            return result
        }
        var positions: [[ObjectKeyBytes: [UInt64]]] = []
        var candidates: Keys?
        for part in parts {
            let found = try positionsUnder(
                part.isPrefix ? startPrefix(part.term) : termPrefix(part.term), merging: part.isPrefix)
            let keys = found.keys.map(\.bytes).sortedUnique()
            candidates = candidates.map { Self.intersection($0, keys) } ?? keys
            positions.append(found)
            if candidates?.isEmpty == true { return [] }
        }
        return (candidates ?? []).filter { key in
            let object = ObjectKeyBytes(key)
            var lists: [[UInt64]] = []
            for found in positions {
                guard let list = found[object] else { return false }
                lists.append(list)
            }
            return TextPhrasePart.aligns(parts, lists)
        }
    }

    /// The objects holding phrase `terms`, each with how many times it occurs and the object's
    /// document length (layout 2; 0 otherwise): what ranking scores a phrase by.
    func phraseOccurrences(
        _ terms: [[UInt8]], lastIsPrefix: Bool
    ) throws(BuriError) -> [(key: ObjectKeyBytes, occurrences: UInt32, length: UInt32)] {
        let parts = TextPhrasePart.parts(of: terms, lastIsPrefix: lastIsPrefix, tokenizer: tokenizer)
        guard !parts.isEmpty, terms.count <= TextEntries.maximumPhraseTerms else { return [] }
        if !parts.contains(where: \.isPrefix) {
            var result: [(key: ObjectKeyBytes, occurrences: UInt32, length: UInt32)] = []
            let layout = index.text?.entryLayout ?? 1
            var lists = [[UInt64]](repeating: [], count: parts.count)
            try intersect(parts.map { termPrefix($0.term) }) { key, cursors throws(BuriError) in
                var length: UInt64 = 0
                for (slot, cursor) in cursors.enumerated() {
                    let value = try cursor.decoded(layout: layout)
                    lists[slot] = value.positions
                    length = value.length ?? 0
                }
                let count = TextPhrasePart.occurrences(parts, lists)
                if count > 0 {
                    result.append((ObjectKeyBytes(key), UInt32(clamping: count), UInt32(clamping: length)))
                }
            }
            return result
        }
        var positions: [[ObjectKeyBytes: [UInt64]]] = []
        var lengths: [ObjectKeyBytes: UInt64] = [:]
        for (offset, part) in parts.enumerated() {
            let found = try withUnsafeMutablePointer(to: &lengths) { pointer throws(BuriError) in
                try positionsUnder(
                    part.isPrefix ? startPrefix(part.term) : termPrefix(part.term), merging: part.isPrefix,
                    lengths: offset == 0 ? pointer : nil)
            }
            positions.append(found)
        }
        var result: [(key: ObjectKeyBytes, occurrences: UInt32, length: UInt32)] = []
        for (object, starts) in positions[0] {
            var lists: [[UInt64]] = [starts]
            for found in positions.dropFirst() {
                guard let list = found[object] else { break }
                lists.append(list)
            }
            guard lists.count == parts.count else { continue }
            let count = TextPhrasePart.occurrences(parts, lists)
            if count > 0 { result.append((object, UInt32(clamping: count), UInt32(clamping: lengths[object] ?? 0))) }
        }
        return result
    }

    // MARK: Entries

    /// The key prefix of the entries of `term` (its whole encoded tuple).
    func termPrefix(_ term: [UInt8]) -> [UInt8] { prefix + index.stored(encoded: IndexValue(bytes: term).encoded) }

    /// The key prefix of the entries of every term starting with `start`.
    func startPrefix(_ start: [UInt8]) -> [UInt8] {
        var out = prefix
        ValueEncoding.appendBinaryPrefix(start, to: &out)
        return out
    }

    /// The object key of the entry a cursor is on, after checking its value reads as positions.
    private func entry(
        _ cursor: any StorageCursor, positions wanted: Bool
    ) throws(BuriError) -> (key: [UInt8], positions: [UInt64], length: UInt64?) {
        guard wanted else {
            // The key alone, its value checked as `decode` would read it, no positions made.
            var key: [UInt8] = []
            try appendObjectKey(cursor, layout: index.text?.entryLayout ?? 1, to: &key)
            return (key, [], nil)
        }
        let split = Result { () throws(BuriError) -> (key: [UInt8], positions: [UInt64], length: UInt64?) in
            let key: [UInt8]
            do {
                key = try cursor.withKey { raw throws(FormatError) -> [UInt8] in
                    Array(raw[try Keyspace.splitIndexEntry(raw, arity: 1).objectKey])
                }
            } catch {
                throw .corruption(bucket: bucket.name, key: nil, index: index.name, reason: "index entry key: \(error)")
            }
            do {
                let layout = index.text?.entryLayout ?? 1
                let decoded = try cursor.withValue { raw in
                    Result { () throws(FormatError) -> (length: UInt64?, positions: [UInt64]) in
                        try TextEntries.decode(raw, layout: layout)
                    }
                }
                let (length, positions) = try decoded.get()
                return (key, positions, length)
            } catch {
                throw .corruption(
                    bucket: bucket.name, key: String(decoding: key, as: UTF8.self), index: index.name,
                    reason: "text entry value: \(error)")
            }
        }
        return try split.get()
    }

    /// The objects holding `term`, in key order, each entry's value checked.
    private func termKeys(_ term: [UInt8]) throws(BuriError) -> Keys {
        let layout = index.text?.entryLayout ?? 1
        let cursor = try TermCursor(bucket: bucket, index: index, reader: reader, prefix: termPrefix(term))
        var result: Keys = []
        while try cursor.next() {
            try cursor.validateValue(layout: layout)
            result.append(cursor.key)
        }
        try cursor.checkStatus()
        return result
    }

    /// The distinct object keys of the entries under `keyPrefix` (several terms, for a prefix),
    /// in key order, each entry's value checked. The keys are gathered in one buffer and sorted
    /// there, an array made only for each distinct key.
    private func distinctKeys(under keyPrefix: [UInt8]) throws(BuriError) -> Keys {
        let layout = index.text?.entryLayout ?? 1
        var bytes: [UInt8] = []
        var ends: [Int] = []
        try bucket.run {
            let cursor = try reader.cursor(in: .prefix(keyPrefix))
            _ = cursor.deferStatusChecks()
            while try cursor.next() {
                try appendObjectKey(cursor, layout: layout, to: &bytes)
                ends.append(bytes.count)
            }
            try cursor.checkStatus()
        }
        let keyEnds = ends
        return bytes.withUnsafeBytes { buffer in
            func key(_ i: Int) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: buffer[(i == 0 ? 0 : keyEnds[i - 1])..<keyEnds[i]])
            }
            // By each key's first 16 bytes as integers, then by its bytes.
            let heads = keyEnds.indices.map { key($0).orderedHead }
            let order = keyEnds.indices.sorted { a, b in
                heads[a] != heads[b] ? heads[a] < heads[b] : compareBytes(key(a), key(b)) < 0
            }
            var result: Keys = []
            result.reserveCapacity(order.count)
            var last: Int?
            for i in order {
                if let last, heads[last] == heads[i], compareBytes(key(last), key(i)) == 0 { continue }
                result.append(Array(key(i)))
                last = i
            }
            return result
        }
    }

    /// Appends the object key of the entry `cursor` is on to `bytes`, after checking that its
    /// value reads as positions (what ``entry(_:positions:)`` checks, with no arrays made).
    private func appendObjectKey(
        _ cursor: any StorageCursor, layout: Int, to bytes: inout [UInt8]
    ) throws(BuriError) {
        let start = bytes.count
        do {
            try cursor.withKey { raw in
                bytes.append(
                    contentsOf: UnsafeRawBufferPointer(
                        rebasing: raw[try Keyspace.splitIndexEntry(raw, arity: 1).objectKey]))
            }
        } catch {
            throw .corruption(bucket: bucket.name, key: nil, index: index.name, reason: "index entry key: \(error)")
        }
        do {
            try cursor.withValue { raw in try TextEntries.validate(raw, layout: layout) }
        } catch {
            throw .corruption(
                bucket: bucket.name, key: String(decoding: bytes[start...], as: UTF8.self), index: index.name,
                reason: "text entry value: \(error)")
        }
    }

    /// The positions of each object under `keyPrefix`; several terms of one object (a prefix)
    /// have theirs merged, sorted.
    private func positionsUnder(
        _ keyPrefix: [UInt8], merging: Bool, lengths: UnsafeMutablePointer<[ObjectKeyBytes: UInt64]>? = nil
    ) throws(BuriError) -> [ObjectKeyBytes: [UInt64]] {
        var result: [ObjectKeyBytes: [UInt64]] = [:]
        try bucket.run {
            let cursor = try reader.cursor(in: .prefix(keyPrefix))
            _ = cursor.deferStatusChecks()
            while try cursor.next() {
                let (key, positions, length) = try entry(cursor, positions: true)
                result[ObjectKeyBytes(key), default: []].append(contentsOf: positions)
                if let lengths, let length { lengths.pointee[ObjectKeyBytes(key)] = length }
            }
            try cursor.checkStatus()
        }
        if merging { for key in result.keys { result[key]?.sort() } }
        return result
    }

    /// The candidates that have (`keep`) or do not have an entry under `termPrefix`, in one pass of
    /// a cursor over the term's entries: it steps forward up to `Self.stepsBeforeSeek` entries to
    /// reach the next candidate and seeks only across longer gaps (a leapfrog), so two lists of
    /// similar length cost a walk of both, and a short list against a long one a seek per candidate.
    private func leapfrog(_ candidates: Keys, _ termPrefix: [UInt8], keep: Bool) throws(BuriError) -> Keys {
        var result: Keys = []
        try bucket.run {
            let cursor = try reader.cursor(in: .prefix(termPrefix))
            _ = cursor.deferStatusChecks()
            var position = 0
            /// The entry the cursor is on (`nil` before the first read).
            var current: [UInt8]?
            walk: while position < candidates.count {
                let target = candidates[position]
                var steps = 0
                while let key = current, key.lexicographicallyPrecedes(target), steps < Self.stepsBeforeSeek {
                    guard try cursor.next() else { break walk }
                    current = try entry(cursor, positions: false).key
                    steps += 1
                }
                if current.map({ $0.lexicographicallyPrecedes(target) }) ?? true {
                    cursor.seek(termPrefix + target)
                    guard try cursor.next() else { break }
                    current = try entry(cursor, positions: false).key
                }
                guard let found = current else { break }
                while position < candidates.count, candidates[position].lexicographicallyPrecedes(found) {
                    if !keep { result.append(candidates[position]) }
                    position += 1
                }
                if position < candidates.count, candidates[position] == found {
                    if keep { result.append(found) }
                    position += 1
                }
            }
            if !keep { result.append(contentsOf: candidates[position...]) }
            // The walk may stop before the term's last entry: damage it skipped is reported here.
            try cursor.checkStatus()
        }
        return result
    }

    /// Calls `visit` with each object that has an entry under every one of `prefixes` (term key
    /// prefixes), in key order, with the cursors on its entries: one cursor per term, each moved to
    /// the largest key another is on by stepping (up to ``stepsBeforeSeek`` entries) or seeking, so
    /// a rare word and a common one cost about a seek per object of the rare one.
    func intersect(
        _ prefixes: [[UInt8]], _ visit: ([UInt8], [TermCursor]) throws(BuriError) -> Void
    ) throws(BuriError) {
        _ = try intersect(prefixes, counting: false, visit)
    }

    /// ``intersect(_:_:)`` that also counts every term's entries (what ranking's idf needs): each
    /// cursor only steps, never seeks, so one walk of every list gives both the objects holding
    /// all terms and each term's count. Returns the counts, in the order of `prefixes`.
    func intersectCounting(
        _ prefixes: [[UInt8]], _ visit: ([UInt8], [TermCursor]) throws(BuriError) -> Void
    ) throws(BuriError) -> [Int] {
        try intersect(prefixes, counting: true, visit)
    }

    /// The joint walk of ``intersect(_:_:)``; `counting`, of ``intersectCounting(_:_:)``.
    private func intersect(
        _ prefixes: [[UInt8]], counting: Bool, _ visit: ([UInt8], [TermCursor]) throws(BuriError) -> Void
    ) throws(BuriError) -> [Int] {
        var cursors: [TermCursor] = []
        var counts = [Int](repeating: 0, count: prefixes.count)
        // The cursors check for damage where the walk stops: every one of them, also those the
        // walk left before their end, once it is over.
        try walk(prefixes, counting: counting, cursors: &cursors, counts: &counts, visit)
        for cursor in cursors { try cursor.checkStatus() }
        return counts
    }

    /// The walk of ``intersect(_:counting:_:)``, leaving its cursors in `cursors`.
    private func walk(
        _ prefixes: [[UInt8]], counting: Bool, cursors: inout [TermCursor], counts: inout [Int],
        _ visit: ([UInt8], [TermCursor]) throws(BuriError) -> Void
    ) throws(BuriError) {
        for (slot, prefix) in prefixes.enumerated() {
            let cursor = try TermCursor(bucket: bucket, index: index, reader: reader, prefix: prefix)
            cursors.append(cursor)
            if try cursor.next() { counts[slot] = 1 } else if !counting { return }
        }
        if !cursors.isEmpty, !cursors.contains(where: \.isOver) {
            try join(cursors, counting: counting, counts: &counts, visit)
        }
        // Counting: the rest of every list that is not over.
        if counting {
            for (slot, cursor) in cursors.enumerated() where !cursor.isOver {
                while try cursor.next() { counts[slot] += 1 }
            }
        }
    }

    /// Moves `cursors` (at least one, each on an entry) together: every object they all reach is
    /// visited, in key order, until one of them runs out.
    private func join(
        _ cursors: [TermCursor], counting: Bool, counts: inout [Int],
        _ visit: ([UInt8], [TermCursor]) throws(BuriError) -> Void
    ) throws(BuriError) {
        var leader = cursors[0]
        for cursor in cursors.dropFirst() where leader.precedes(cursor) { leader = cursor }
        var target = leader.key
        walk: while true {
            var agreed = true
            for (slot, cursor) in cursors.enumerated() {
                if counting {
                    while cursor.precedes(target) {
                        guard try cursor.next() else { break walk }
                        counts[slot] += 1
                    }
                } else if cursor.precedes(target) {
                    guard try cursor.advance(to: target) else { break walk }
                }
                if !cursor.isOn(target) {
                    target = cursor.key
                    agreed = false
                    break
                }
            }
            guard agreed else { continue }
            try visit(target, cursors)
            guard try cursors[0].next() else { break }
            counts[0] += 1
            target = cursors[0].key
        }
    }

    /// How far a leapfrog steps before it seeks: a step is a fraction of a seek's cost.
    static let stepsBeforeSeek = 8

    // MARK: Sorted key lists

    static func union(_ a: Keys, _ b: Keys) -> Keys {
        var result: Keys = []
        result.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count, j < b.count {
            if a[i] == b[j] {
                result.append(a[i]); i += 1; j += 1
            } else if a[i].lexicographicallyPrecedes(b[j]) {
                result.append(a[i]); i += 1
            } else {
                result.append(b[j]); j += 1
            }
        }
        result.append(contentsOf: a[i...])
        result.append(contentsOf: b[j...])
        return result
    }

    static func intersection(_ a: Keys, _ b: Keys) -> Keys {
        var result: Keys = []
        var i = 0
        var j = 0
        while i < a.count, j < b.count {
            if a[i] == b[j] {
                result.append(a[i]); i += 1; j += 1
            } else if a[i].lexicographicallyPrecedes(b[j]) {
                i += 1
            } else {
                j += 1
            }
        }
        return result
    }

    static func difference(_ a: Keys, _ b: Keys) -> Keys {
        var result: Keys = []
        var j = 0
        for key in a {
            while j < b.count, b[j].lexicographicallyPrecedes(key) { j += 1 }
            if j < b.count, b[j] == key { continue }
            result.append(key)
        }
        return result
    }
}

extension [[UInt8]] {
    /// Sorted bytewise, each once.
    fileprivate func sortedUnique() -> [[UInt8]] {
        // By each key's first 16 bytes as integers, then by its bytes.
        let heads = map { $0.withUnsafeBytes { $0.orderedHead } }
        let order = indices.sorted { a, b in
            heads[a] != heads[b] ? heads[a] < heads[b] : self[a].lexicographicallyPrecedes(self[b])
        }
        var result: [[UInt8]] = []
        result.reserveCapacity(count)
        for i in order where result.last != self[i] { result.append(self[i]) }
        return result
    }
}

/// A cursor over one term's postings that keeps the object key it is on: its single entries and,
/// when the term has segments (`docs/FORMAT.md` §5c), their live postings, merged in key order.
///
/// It copies each posting's object key into a buffer of its own (no array per step) and compares
/// it there. Its engine cursor checks for damage only where its walk stops
/// (``StorageCursor/deferStatusChecks()``), so a walk must end with ``checkStatus()`` before
/// what it found is used, as every walk of `TextSearcher` and `TextRanker` does.
final class TermCursor {
    /// The term's single entries.
    private let cursor: any StorageCursor
    private let prefix: [UInt8]
    private let bucket: RawBucket
    private let indexName: String
    /// The term's live segment postings, merged (empty when it has no segments), and the one
    /// the cursor's segment side is on.
    private let segments: MergedTermPostings?
    private var segmentIndex = -1
    private let hasSegments: Bool
    /// The object key of the single entry the engine cursor is on.
    private var singleKey: KeyBuffer
    private var singleOn = false
    private var segmentOn = false
    private var started = false
    /// Which of the two the cursor is on.
    private var onSegment = false

    /// Bytes owned by the cursor, reused from step to step.
    private struct KeyBuffer {
        var bytes: UnsafeMutableRawPointer = .allocate(byteCount: 64, alignment: 1)
        var capacity = 64
        var count = 0

        mutating func set(_ base: UnsafeRawPointer, _ length: Int) {
            if length > capacity {
                bytes.deallocate()
                capacity = Swift.max(length, 2 * capacity)
                bytes = .allocate(byteCount: capacity, alignment: 1)
            }
            bytes.copyMemory(from: base, byteCount: length)
            count = length
        }

        var view: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: bytes, count: count) }
    }

    init(bucket: RawBucket, index: IndexDefinition, reader: any StorageReader, prefix: [UInt8]) throws(BuriError) {
        self.bucket = bucket
        self.prefix = prefix
        indexName = index.name
        var singles = reader
        if let grouped = reader as? GroupedPostingsReader {
            singles = grouped.base
            let indexPrefix = Keyspace.indexPrefix(bucket: bucket.bucketId, index: index.id)
            let group = try bucket.run { try grouped.group(prefix: indexPrefix, tuple: prefix[indexPrefix.count...]) }
            segments = group.merged.count > 0 ? group.merged : nil
        } else {
            segments = nil
        }
        hasSegments = segments != nil
        let cursor = try bucket.run { try singles.cursor(in: .prefix(prefix)) }
        _ = cursor.deferStatusChecks()
        self.cursor = cursor
        singleKey = KeyBuffer()
    }

    deinit { singleKey.bytes.deallocate() }

    /// The object key of the segment posting the segment side is on.
    private var segmentKey: UnsafeRawBufferPointer {
        segments.map { $0.key(segmentIndex) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
    }

    /// A copy of the object key of the posting it is on.
    var key: [UInt8] { [UInt8](current) }

    /// The object key it is on, lent until it moves.
    private var current: UnsafeRawBufferPointer { onSegment ? segmentKey : singleKey.view }

    /// Whether the object key it is on comes before `target` in byte order.
    @inline(__always)
    func precedes(_ target: [UInt8]) -> Bool { compareBytes(current, target) < 0 }

    /// Whether the object key it is on is `target`'s bytes.
    @inline(__always)
    func isOn(_ target: [UInt8]) -> Bool { current.count == target.count && compareBytes(current, target) == 0 }

    /// Whether the object key it is on comes before the one `other` is on.
    func precedes(_ other: TermCursor) -> Bool { compareBytes(current, other.current) < 0 }

    /// Reads the object key of the single entry the engine cursor is on.
    private func loadSingle() throws(BuriError) {
        let length = prefix.count
        let loaded = cursor.withKey { raw -> Bool in
            guard raw.count > length, let base = raw.baseAddress else { return false }
            singleKey.set(base + length, raw.count - length)
            return true
        }
        guard loaded else {
            throw .corruption(
                bucket: bucket.name, key: nil, index: indexName, reason: "index entry key: no object key after the term"
            )
        }
    }

    /// Whether the cursor went past its last posting (or never had one).
    private(set) var isOver = false

    private func nextSingle() throws(BuriError) {
        singleOn = try bucket.run { try cursor.next() }
        if singleOn { try loadSingle() }
    }

    private func nextSegment() {
        guard let segments else { return }
        segmentIndex += 1
        segmentOn = segmentIndex < segments.count
    }

    /// Puts the cursor on the lesser of the two sides; a key on both is damage.
    private func settle() throws(BuriError) -> Bool {
        switch (singleOn, segmentOn) {
        case (false, false):
            isOver = true
            return false
        case (true, false): onSegment = false
        case (false, true): onSegment = true
        case (true, true):
            let order = compareBytes(singleKey.view, segmentKey)
            if order == 0 {
                throw .corruption(
                    bucket: bucket.name, key: String(decoding: singleKey.view, as: UTF8.self), index: indexName,
                    reason:
                        "the term's posting is both a single entry and in a segment; run `buri check --repair`")
            }
            onSegment = order > 0
        }
        return true
    }

    /// Moves to the next posting; `false` at the end.
    func next() throws(BuriError) -> Bool {
        guard hasSegments else {
            try nextSingle()
            if !singleOn { isOver = true }
            return singleOn
        }
        if !started {
            started = true
            try nextSingle()
            nextSegment()
        } else if onSegment {
            nextSegment()
        } else {
            try nextSingle()
        }
        return try settle()
    }

    /// Moves to the first posting whose object key is not below `target`; `false` at the end.
    func advance(to target: [UInt8]) throws(BuriError) -> Bool {
        guard hasSegments else { return try advanceSingle(to: target) }
        if !started {
            started = true
            try nextSingle()
            nextSegment()
        }
        if singleOn, compareBytes(singleKey.view, target) < 0 { _ = try advanceSingle(to: target) }
        if segmentOn, let segments, compareBytes(segmentKey, target) < 0 {
            segmentIndex = segments.lowerBound(target, from: segmentIndex + 1)
            segmentOn = segmentIndex < segments.count
        }
        return try settle()
    }

    /// Moves the single entries to the first whose object key is not below `target`: a few steps,
    /// then a seek.
    private func advanceSingle(to target: [UInt8]) throws(BuriError) -> Bool {
        for _ in 0..<TextSearcher.stepsBeforeSeek {
            try nextSingle()
            guard singleOn else {
                if !hasSegments { isOver = true }
                return false
            }
            if compareBytes(singleKey.view, target) >= 0 { return true }
        }
        cursor.seek(prefix + target)
        try nextSingle()
        if !singleOn, !hasSegments { isOver = true }
        return singleOn
    }

    /// Throws the damage the engine met while this cursor moved (a block it skipped), which it
    /// reports only here and at the end of the term's entries.
    func checkStatus() throws(BuriError) {
        try bucket.run { try cursor.checkStatus() }
    }

    /// The term's frequency and the document's length from the current posting's value (layout 2).
    func frequencyAndLength() throws(BuriError) -> (frequency: UInt64, length: UInt64) {
        try readValue { raw throws(FormatError) in try TextEntries.frequencyAndLength(raw) }
    }

    /// Throws unless the current posting's value reads as `layout` (see ``TextEntries/validate(_:layout:)``).
    func validateValue(layout: Int) throws(BuriError) {
        try readValue { raw throws(FormatError) in try TextEntries.validate(raw, layout: layout) }
    }

    /// The document length (layout 2) and positions the current posting's value holds.
    func decoded(layout: Int) throws(BuriError) -> (length: UInt64?, positions: [UInt64]) {
        try readValue { raw throws(FormatError) in try TextEntries.decode(raw, layout: layout) }
    }

    /// The current posting's value read by `decode`; a value that does not read is damage naming
    /// the bucket, the index and the object.
    private func readValue<R>(
        _ decode: (UnsafeRawBufferPointer) throws(FormatError) -> R
    ) throws(BuriError) -> R {
        let result =
            onSegment
            ? Result { () throws(FormatError) -> R in
                try decode(segments?.value(segmentIndex) ?? UnsafeRawBufferPointer(start: nil, count: 0))
            }
            : try cursor.readValue { raw in Result { () throws(FormatError) -> R in try decode(raw) } }
        switch result {
        case .success(let value): return value
        case .failure(let error):
            throw .corruption(
                bucket: bucket.name, key: String(decoding: key, as: UTF8.self), index: indexName,
                reason: "text entry value: \(error)")
        }
    }
}
