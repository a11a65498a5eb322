import BuriStorage
import Synchronization

/// A reader that shows a text index's grouped postings (`docs/FORMAT.md` §5c) as the single
/// entries they stand for: in the ranges of the text indexes it is given, a key
/// `P tuple objectKey` reads as the object's posting of that term whether it is stored as a
/// single entry or in one of the term's segments, and a segment posting a tombstone cancels is
/// not there. Segment and tombstone keys themselves are not shown. Everything else reads as
/// `base` has it.
///
/// So every reader of postings (search, ranking, predicates, `check`) reads one layout, and only
/// the write path knows where a posting is stored.
///
/// ```swift
/// let reader = GroupedPostingsReader(snapshot, textPrefixes: [Keyspace.indexPrefix(bucket: 1, index: 2)])
/// let positions = try reader.get(entryKey)   // from a single entry or a segment
/// ```
final class GroupedPostingsReader: StorageReader {
    let base: any StorageReader
    /// The index prefixes (`03 u32 u32`) of the text indexes whose postings may be in segments,
    /// in byte order.
    let textPrefixes: [[UInt8]]
    /// The segments and tombstones of the terms read lately, by segment key prefix (`P 31 tuple`).
    private var groups: [[UInt8]: TermGroup] = [:]
    private var groupBytes = 0

    /// Segments shared with other readers of the database, by key.
    let shared: TextSegmentCache?
    /// One walk over each text index's segment keys and one over its tombstone keys (by index
    /// prefix), moved forward term by term: a query reading its terms in order seeks only where
    /// it skips keys, instead of opening two engine cursors per term.
    private var segmentWalks: [[UInt8]: ForwardWalk] = [:]
    private var tombstoneWalks: [[UInt8]: ForwardWalk] = [:]
    /// Terms (segment key prefixes `P 31 tuple`) read as having no segments: those `check`
    /// found damaged, so that it can go on and rebuild their postings from the records.
    var skippedTerms: Set<[UInt8]> = []
    /// When not `nil`, a posting stored both as a single entry and as a live segment posting is
    /// read as the single entry, and its key noted here (what `check` reports and repairs);
    /// otherwise such a posting is damage.
    var duplicates: [[UInt8]]? = nil

    init(_ base: any StorageReader, textPrefixes: [[UInt8]], cache: TextSegmentCache? = nil) {
        self.base = base
        self.textPrefixes = textPrefixes.sorted { $0.lexicographicallyPrecedes($1) }
        shared = cache
    }

    /// `reader` wrapped for the text indexes of `prefixes`, unless there are none.
    static func wrap(
        _ reader: any StorageReader, textPrefixes prefixes: [[UInt8]], cache: TextSegmentCache? = nil
    ) -> any StorageReader {
        if prefixes.isEmpty || reader is GroupedPostingsReader { return reader }
        return GroupedPostingsReader(reader, textPrefixes: prefixes, cache: cache)
    }

    var prefersBatchedReads: Bool { base.prefersBatchedReads }

    /// One term's segments and tombstones, and its live segment postings merged.
    struct TermGroup {
        var segments: [TextSegment]
        var tombstones: Set<TextSegmentMerge.Identity>
        var merged: MergedTermPostings
        var isEmpty: Bool { segments.isEmpty }
    }

    /// The text prefix `key` starts with, and whether the key is a posting's (`P 30 …`).
    private func textPrefix(of key: [UInt8]) -> [UInt8]? {
        for prefix in textPrefixes where key.count > prefix.count && key.starts(with: prefix) { return prefix }
        return nil
    }

    /// The segments and tombstones of the term whose stored tuple is `tuple`, in index `prefix`.
    func group(prefix: [UInt8], tuple: ArraySlice<UInt8>) throws -> TermGroup {
        var segmentPrefix = prefix
        segmentPrefix.append(GroupedPostingKeys.segmentTag)
        segmentPrefix.append(contentsOf: tuple)
        if let known = groups[segmentPrefix] { return known }
        if !skippedTerms.isEmpty, skippedTerms.contains(segmentPrefix) {
            return TermGroup(segments: [], tombstones: [], merged: try MergedTermPostings([], tombstones: []))
        }
        var segments: [TextSegment] = []
        var segmentKeys: [[UInt8]] = []
        var bytes = 0
        try walk(&segmentWalks, prefix: prefix, tag: GroupedPostingKeys.segmentTag, under: segmentPrefix) { cursor in
            let length = cursor.withKey { $0.count }
            guard length == segmentPrefix.count + 1 + TextSegment.stampLength else {
                throw FormatError(
                    "a text segment key of \(length) bytes is not a segment key (term, tier, 16-byte id)")
            }
            let key = cursor.key
            segmentKeys.append(key)
            if let known = shared?.segment(key) {
                segments.append(known)
                return
            }
            let value = try cursor.value
            bytes += value.count
            // Its postings are checked as the term's merged postings are built from it, below.
            let segment = try TextSegment(value, checkingPostings: false)
            shared?.keep(segment, key: key)
            segments.append(segment)
        }
        var tombstones = Set<TextSegmentMerge.Identity>()
        if !segments.isEmpty {
            var tombstonePrefix = prefix
            tombstonePrefix.append(GroupedPostingKeys.tombstoneTag)
            tombstonePrefix.append(contentsOf: tuple)
            try walk(&tombstoneWalks, prefix: prefix, tag: GroupedPostingKeys.tombstoneTag, under: tombstonePrefix) {
                cursor in
                let identity = try cursor.withKey { raw throws(FormatError) -> TextSegmentMerge.Identity in
                    guard raw.count > tombstonePrefix.count + TextSegment.stampLength else {
                        throw FormatError("a text tombstone key of \(raw.count) bytes names no object")
                    }
                    let stampEnd = tombstonePrefix.count + TextSegment.stampLength
                    return .init(key: Array(raw[stampEnd...]), stamp: Array(raw[tombstonePrefix.count..<stampEnd]))
                }
                tombstones.insert(identity)
            }
        }
        // The merged postings as a reader of the same segments and tombstones made them, or anew.
        let merged: MergedTermPostings
        if let known = shared?.merged(segmentPrefix, segmentKeys: segmentKeys, tombstones: tombstones) {
            merged = known
        } else {
            merged = try MergedTermPostings(segments, tombstones: tombstones)
            shared?.keep(merged, term: segmentPrefix, segmentKeys: segmentKeys, tombstones: tombstones)
        }
        let group = TermGroup(segments: segments, tombstones: tombstones, merged: merged)
        if groupBytes + bytes > Self.cacheBytes {
            groups.removeAll(keepingCapacity: true)
            groupBytes = 0
        }
        groups[segmentPrefix] = group
        groupBytes += bytes + 64
        return group
    }

    /// How many bytes of segments the reader keeps decoded.
    static let cacheBytes = 64 << 20

    /// Calls `body` on each key under `keyPrefix` through the walk over the keys tagged `tag`
    /// (segments or tombstones) of the index `prefix`. A walk that meets an error is dropped, so
    /// the next term is read by a new cursor.
    private func walk(
        _ walks: inout [[UInt8]: ForwardWalk], prefix: [UInt8], tag: UInt8, under keyPrefix: [UInt8],
        _ body: (any StorageCursor) throws -> Void
    ) throws {
        let walk: ForwardWalk
        if let known = walks[prefix] {
            walk = known
        } else {
            walk = ForwardWalk(try base.cursor(in: .prefix(prefix + [tag])))
            // Kept for the next term only over a snapshot, whose view never moves; a reader that
            // may see later writes (a transaction's) gets a cursor of its own each time.
            if base is any StorageSnapshot { walks[prefix] = walk }
        }
        do {
            try walk.entries(under: keyPrefix, body)
        } catch {
            walks[prefix] = nil
            throw error
        }
    }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard let prefix = postingPrefix(of: key) else { return try base.withValue(forKey: key, body) }
        if let single = try base.get(key) { return try single.withUnsafeBytes { try body($0) } }
        guard let (postings, at) = try segmentPosting(key, prefix: prefix) else { return try body(nil) }
        return try body(postings.value(at))
    }

    /// The stamp of the live segment posting `key` stands for, or `nil` when it is a single
    /// entry or not there.
    /// With `besideASingle`, the stamp of its segment posting even when a single entry has the key.
    func segmentStamp(ofPosting key: [UInt8], besideASingle: Bool = false) throws -> [UInt8]? {
        guard let prefix = postingPrefix(of: key), try besideASingle || base.get(key) == nil,
            let (postings, at) = try segmentPosting(key, prefix: prefix)
        else { return nil }
        return postings.stamp(at)
    }

    /// The text index prefix of `key` when it is a posting's key (`P 30 …`).
    private func postingPrefix(of key: [UInt8]) -> [UInt8]? {
        guard let prefix = textPrefix(of: key), key[prefix.count] == ValueEncoding.binaryCode else { return nil }
        return prefix
    }

    /// The live segment posting posting key `key` of the index `prefix` stands for: its term's
    /// merged postings and its place there (`nil` when none of its term's segments holds it).
    private func segmentPosting(_ key: [UInt8], prefix: [UInt8]) throws -> (MergedTermPostings, Int)? {
        let termEnd = try key.withUnsafeBytes { raw throws(FormatError) in
            prefix.count + (try ValueEncoding.elementLength(raw, at: prefix.count))
        }
        guard termEnd < key.count else { return nil }
        let merged = try group(prefix: prefix, tuple: key[prefix.count..<termEnd]).merged
        return merged.find(Array(key[termEnd...])).map { (merged, $0) }
    }

    /// The tombstone key cancelling the segment posting `key` stands for, written under `stamp`.
    static func tombstoneKey(ofPosting key: [UInt8], stamp: [UInt8], in reader: GroupedPostingsReader) -> [UInt8]? {
        guard let prefix = reader.textPrefix(of: key),
            let length = key.withUnsafeBytes({ raw in try? ValueEncoding.elementLength(raw, at: prefix.count) }),
            prefix.count + length < key.count
        else { return nil }
        var tombstone = prefix
        tombstone.append(GroupedPostingKeys.tombstoneTag)
        tombstone.append(contentsOf: key[prefix.count..<(prefix.count + length)])
        tombstone.append(contentsOf: stamp)
        tombstone.append(contentsOf: key[(prefix.count + length)...])
        return tombstone
    }

    func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        // The parts of `range` in each text index's span are merged views; the rest reads as is.
        var pieces: [(range: KeyRange, prefix: [UInt8]?)] = []
        var start = range.start
        for prefix in textPrefixes {
            let span = KeyRange.prefix(prefix)
            let low = Self.max(start, span.start)
            let high = Self.min(range.end, span.end)
            guard Self.less(low, high) else { continue }
            if Self.less(start, low) { pieces.append((KeyRange(start: start, end: low), nil)) }
            pieces.append((KeyRange(start: low, end: high), prefix))
            start = high
        }
        guard !pieces.isEmpty else { return try base.cursor(in: range, reverse: reverse) }
        if Self.less(start, range.end) { pieces.append((KeyRange(start: start, end: range.end), nil)) }
        if reverse { pieces.reverse() }
        if pieces.count == 1, let prefix = pieces[0].prefix, !reverse { return try merged(pieces[0].range, prefix) }
        return try PiecewiseCursor(
            pieces.map { piece throws -> any StorageCursor in
                guard let prefix = piece.prefix else { return try base.cursor(in: piece.range, reverse: reverse) }
                guard !reverse else { return try MaterializedCursor(try merged(piece.range, prefix), reverse: true) }
                return try merged(piece.range, prefix)
            }, reverse: reverse)
    }

    private func merged(_ range: KeyRange, _ prefix: [UInt8]) throws -> MergedPostingsCursor {
        try MergedPostingsCursor(reader: self, range: range, prefix: prefix)
    }

    // Bounds, `nil` start meaning the first key and `nil` end meaning past the last.
    private static func max(_ a: [UInt8]?, _ b: [UInt8]?) -> [UInt8]? {
        guard let a else { return b }
        guard let b else { return a }
        return a.lexicographicallyPrecedes(b) ? b : a
    }
    private static func min(_ a: [UInt8]?, _ b: [UInt8]?) -> [UInt8]? {
        guard let a else { return b }
        guard let b else { return a }
        return a.lexicographicallyPrecedes(b) ? a : b
    }
    /// Whether start bound `a` is below end bound `b`.
    private static func less(_ a: [UInt8]?, _ b: [UInt8]?) -> Bool {
        guard let b else { return true }
        guard let a else { return !b.isEmpty }
        return a.lexicographicallyPrecedes(b)
    }
}

/// One engine cursor giving the entries under one key prefix after another: it seeks only when
/// asked for a prefix behind it or past the entry it is on, so prefixes asked in increasing order
/// (a query's terms) cost a seek each only where the walk skips entries.
///
/// It keeps a lower bound: the cursor is on the first entry at or after it (or past the last).
/// After the entries under a prefix, the bound is the prefix's successor, so the next prefix
/// asked (the next term's) finds the cursor already there.
final class ForwardWalk {
    private let cursor: any StorageCursor
    /// `nil` before the first seek.
    private var bound: [UInt8]?

    init(_ cursor: any StorageCursor) { self.cursor = cursor }

    /// Calls `body` with the cursor on each entry whose key starts with `prefix`, in key order.
    func entries(under prefix: [UInt8], _ body: (any StorageCursor) throws -> Void) throws {
        let positioned: Bool
        if let bound, !prefix.lexicographicallyPrecedes(bound) {
            // At or past the bound: the cursor's entry (the first at or after the bound) is the
            // first at or after `prefix` too, unless it lies before `prefix`.
            positioned = !cursor.isOnEntry || !cursor.withKey({ compareBytes($0, prefix) < 0 })
        } else {
            positioned = false
        }
        if !positioned {
            // The bound holds again only once the cursor has moved onto its entry (or past the
            // last) without an error.
            bound = nil
            cursor.seek(prefix)
            let on = try cursor.next()
            bound = prefix
            guard on else { return }
        } else if !cursor.isOnEntry {
            return
        }
        // Whatever happens below, the cursor ends on the first entry past `prefix`'s (`nil`
        // until then, so that a walk stopped by an error seeks again).
        bound = nil
        while cursor.withKey({ $0.hasBytePrefix(prefix) }) {
            try body(cursor)
            guard try cursor.next() else { break }
        }
        bound = KeyRange.successor(ofPrefix: prefix)
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes start with `prefix` (compared by `memcmp`).
    @inline(__always)
    func hasBytePrefix(_ prefix: [UInt8]) -> Bool {
        count >= prefix.count && compareBytes(UnsafeRawBufferPointer(rebasing: self[..<prefix.count]), prefix) == 0
    }
}

/// Cursors over consecutive ranges, walked one after another.
private final class PiecewiseCursor: StorageCursor {
    private let pieces: [any StorageCursor]
    private let reverse: Bool
    private var current = 0
    private(set) var isOnEntry = false

    init(_ pieces: [any StorageCursor], reverse: Bool) throws {
        self.pieces = pieces
        self.reverse = reverse
    }

    func next() throws -> Bool {
        while current < pieces.count {
            if try pieces[current].next() {
                isOnEntry = true
                return true
            }
            current += 1
        }
        isOnEntry = false
        return false
    }

    func seek(_ key: [UInt8]) {
        // Every piece is told (each clamps the target to its range), and the walk starts over:
        // the pieces before the target's are then past their ends.
        for piece in pieces { piece.seek(key) }
        current = 0
        isOnEntry = false
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try pieces[current].withKey(body)
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try pieces[current].withValue(body)
    }

    func deferStatusChecks() -> Bool {
        var all = true
        for piece in pieces where !piece.deferStatusChecks() { all = false }
        return all
    }

    func checkStatus() throws {
        for piece in pieces { try piece.checkStatus() }
    }
}

/// Entries read up front, walked either way (a text index's merged postings walked in reverse,
/// which no query of Buri does but a tool may).
private final class MaterializedCursor: StorageCursor {
    private var entries: [(key: [UInt8], value: [UInt8])] = []
    private var position = -1
    private let reverse: Bool

    init(_ cursor: MergedPostingsCursor, reverse: Bool) throws {
        while try cursor.next() { entries.append((cursor.key, try cursor.value)) }
        if reverse { entries.reverse() }
        self.reverse = reverse
    }

    var isOnEntry: Bool { position >= 0 && position < entries.count }

    func next() throws -> Bool {
        if position < entries.count { position += 1 }
        return isOnEntry
    }

    func seek(_ key: [UInt8]) {
        position =
            (entries.firstIndex { entry in
                reverse ? !key.lexicographicallyPrecedes(entry.key) : !entry.key.lexicographicallyPrecedes(key)
            } ?? entries.count) - 1
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try entries[position].key.withUnsafeBytes(body)
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try entries[position].value.withUnsafeBytes(body)
    }
}

/// The entries of one text index in `range`: its single entries and the live postings of its
/// segments, merged in key order as single entries (`P tuple objectKey`); its segment and
/// tombstone keys are not shown, and any other key of the index is (for `check` to report).
final class MergedPostingsCursor: StorageCursor {
    private unowned let reader: GroupedPostingsReader
    private let prefix: [UInt8]
    private let bounds: KeyRange
    /// Everything in the range but segment and tombstone keys.
    private let singles: any StorageCursor
    private var singleOn = false
    /// Segment keys of the terms in range, walked term by term.
    private let segmentKeys: any StorageCursor
    /// The segment key prefix (`P 31 tuple`) of the term loaded last, whose keys the walk skips.
    private var loadedTermSegments: [UInt8]?
    /// The term whose postings `postings` walks (its stored tuple), and the walk.
    private var term: [UInt8]?
    private var postings: MergedTermPostings?
    private var postingIndex = -1
    private var postingOn = false
    /// The key the segment posting it is on stands for: `prefix + term + objectKey`.
    private var postingKey: [UInt8] = []
    /// The term `postingKey` was made for.
    private var postingKeyTerm: [UInt8] = []
    /// Which of the two the cursor is on.
    private enum Side { case none, single, posting }
    private var side = Side.none
    /// Where the next `next()` starts: a seek's target, applied lazily.
    private var pendingSeek: [UInt8]?
    private var started = false

    /// The segment keys' range for the postings range: term by term, the same order.
    init(reader: GroupedPostingsReader, range: KeyRange, prefix: [UInt8]) throws {
        self.reader = reader
        self.prefix = prefix
        bounds = range
        singles = try reader.base.cursor(in: range, reverse: false)
        var segmentStart = prefix + [GroupedPostingKeys.segmentTag]
        if let start = range.start, start.count > prefix.count, start.starts(with: prefix) {
            // From the term the start lies in: its postings before the start are skipped below.
            segmentStart.append(contentsOf: Self.termPart(of: start, prefix: prefix))
        }
        segmentKeys = try reader.base.cursor(
            in: KeyRange(start: segmentStart, end: prefix + [GroupedPostingKeys.tombstoneTag]), reverse: false)
    }

    /// The term part of a key of the index, whole when it holds a whole tuple, else as it is.
    private static func termPart(of key: [UInt8], prefix: [UInt8]) -> ArraySlice<UInt8> {
        let length = key.withUnsafeBytes { raw in try? ValueEncoding.elementLength(raw, at: prefix.count) }
        if let length, prefix.count + length <= key.count { return key[prefix.count..<(prefix.count + length)] }
        return key[prefix.count...]
    }

    var isOnEntry: Bool { side != .none }

    func next() throws -> Bool {
        if !started {
            started = true
            singleOn = try nextSingle()
            postingOn = try nextPosting(seeking: bounds.start)
        } else if let target = pendingSeek {
            pendingSeek = nil
            singles.seek(target)
            singleOn = try nextSingle()
            postingOn = try seekPosting(target)
        } else {
            switch side {
            case .single: singleOn = try nextSingle()
            case .posting: postingOn = try nextPosting(seeking: nil)
            case .none: break
            }
        }
        return try settle()
    }

    private func settle() throws -> Bool {
        switch (singleOn, postingOn) {
        case (false, false): side = .none
        case (true, false): side = .single
        case (false, true): side = .posting
        case (true, true):
            let order = singles.withKey { compareBytes($0, postingKey) }
            if order == 0 {
                guard reader.duplicates != nil else {
                    throw FormatError(
                        "a text posting is stored both as a single entry and in a segment, with no tombstone for the latter"
                    )
                }
                reader.duplicates?.append(postingKey)
                postingOn = try nextPosting(seeking: nil)
                return try settle()
            }
            side = order < 0 ? .single : .posting
        }
        if let end = bounds.end, side == .posting, !postingKey.lexicographicallyPrecedes(end) {
            postingOn = false
            return try settle()
        }
        return side != .none
    }

    /// The next single entry, past segment and tombstone keys.
    private func nextSingle() throws -> Bool {
        while try singles.next() {
            let tag = singles.withKey { $0.count > prefix.count ? $0[prefix.count] : 0 }
            let isGrouped =
                singles.withKey { $0.count > prefix.count && $0.starts(with: prefix) }
                && (tag == GroupedPostingKeys.segmentTag || tag == GroupedPostingKeys.tombstoneTag)
            guard isGrouped else { return true }
            singles.seek(prefix + [GroupedPostingKeys.tombstoneTag + 1])
        }
        return false
    }

    /// The next live segment posting, loading the next term's segments when one term's run out;
    /// postings below `from` are skipped.
    private func nextPosting(seeking from: [UInt8]?) throws -> Bool {
        if let postings, postingIndex + 1 < postings.count {
            postingIndex += 1
            setPostingKey()
            return true
        }
        // The next term with segments.
        while try loadNextTerm() {
            guard let term, let postings else { continue }
            if let from, from.count > prefix.count + term.count, from.starts(with: prefix + term) {
                postingIndex = postings.lowerBound(Array(from[(prefix.count + term.count)...]), from: 0)
            } else if let from, (prefix + term).lexicographicallyPrecedes(from), !from.starts(with: prefix + term) {
                postingIndex = postings.count
            } else {
                postingIndex = 0
            }
            if postingIndex < postings.count {
                setPostingKey()
                return true
            }
        }
        return false
    }

    /// Moves the postings walk to `target`: within the current term when it is the term, else
    /// from the term the target lies in.
    private func seekPosting(_ target: [UInt8]) throws -> Bool {
        if let term, let postings, target.starts(with: prefix + term), target.count > prefix.count + term.count,
            postingOn, !target.lexicographicallyPrecedes(postingKey)
        {
            postingIndex = postings.lowerBound(Array(target[(prefix.count + term.count)...]), from: postingIndex)
            if postingIndex < postings.count {
                setPostingKey()
                return true
            }
            return try nextPosting(seeking: nil)
        }
        var segmentStart = prefix + [GroupedPostingKeys.segmentTag]
        if target.count > prefix.count, target.starts(with: prefix) {
            segmentStart.append(contentsOf: Self.termPart(of: target, prefix: prefix))
        }
        segmentKeys.seek(segmentStart)
        loadedTermSegments = nil
        term = nil
        postings = nil
        return try nextPosting(seeking: target)
    }

    /// Loads the segments and tombstones of the next term that has segments; `false` when none is left.
    private func loadNextTerm() throws -> Bool {
        // Past the segment keys of the term loaded last, stepping (a term has a few).
        repeat {
            guard try segmentKeys.next() else { return false }
        } while segmentKeys.withKey({ raw in loadedTermSegments.map { raw.hasBytePrefix($0) } ?? false })
        let key = segmentKeys.key
        let tupleStart = prefix.count + 1
        let tupleEnd = key.count - 1 - TextSegment.stampLength
        guard tupleEnd > tupleStart else {
            throw FormatError("a text segment key of \(key.count) bytes names no term")
        }
        let tuple = key[tupleStart..<tupleEnd]
        let group = try reader.group(prefix: prefix, tuple: tuple)
        // The next load steps past this term's other segment keys.
        var segmentsOfTerm = prefix + [GroupedPostingKeys.segmentTag]
        segmentsOfTerm.append(contentsOf: tuple)
        loadedTermSegments = segmentsOfTerm
        term = Array(tuple)
        postings = group.merged
        postingIndex = -1
        return true
    }

    private func setPostingKey() {
        guard let term, let postings else { return }
        // `prefix + term` stays from the last posting of the same term; only the object key changes.
        let base = prefix.count + term.count
        if postingKey.count >= base, postingKeyTerm == term {
            postingKey.removeLast(postingKey.count - base)
        } else {
            postingKey.removeAll(keepingCapacity: true)
            postingKey.append(contentsOf: prefix)
            postingKey.append(contentsOf: term)
            postingKeyTerm = term
        }
        postingKey.append(contentsOf: postings.key(postingIndex))
    }

    func seek(_ key: [UInt8]) {
        started = true
        var target = key
        if let start = bounds.start, target.lexicographicallyPrecedes(start) { target = start }
        pendingSeek = target
        side = .none
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch side {
        case .single: return try singles.withKey(body)
        case .posting: return try postingKey.withUnsafeBytes(body)
        case .none: return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        switch side {
        case .single: return try singles.withValue(body)
        case .posting:
            guard let postings else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            return try body(postings.value(postingIndex))
        case .none: return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func deferStatusChecks() -> Bool {
        _ = segmentKeys.deferStatusChecks()
        return singles.deferStatusChecks()
    }

    func checkStatus() throws {
        try singles.checkStatus()
        try segmentKeys.checkStatus()
    }
}

/// Decoded text segments by key, and terms' merged postings by the segments and tombstones they
/// were merged from, shared by a database's readers up to a size: a segment is checked once when
/// read, and a later query of an unchanged term reads its postings from here.
final class TextSegmentCache: Sendable {
    private struct Term {
        var segmentKeys: [[UInt8]]
        var tombstones: Set<TextSegmentMerge.Identity>
        var merged: MergedTermPostings
    }
    private struct State {
        var segments: [[UInt8]: TextSegment] = [:]
        var terms: [[UInt8]: Term] = [:]
        var bytes = 0

        mutating func make(room: Int) {
            guard bytes + room > TextSegmentCache.limit else { return }
            segments.removeAll()
            terms.removeAll()
            bytes = 0
        }
    }
    private let state = Mutex(State())
    static let limit = 64 << 20

    func segment(_ key: [UInt8]) -> TextSegment? {
        state.withLock { $0.segments[key] }
    }

    func keep(_ segment: TextSegment, key: [UInt8]) {
        state.withLock { state in
            state.make(room: segment.bytes.count)
            state.segments[key] = segment
            state.bytes += segment.bytes.count + key.count
        }
    }

    /// The merged postings of the term whose segment keys start with `term`, if they were merged
    /// from exactly these segments and tombstones.
    func merged(
        _ term: [UInt8], segmentKeys: [[UInt8]], tombstones: Set<TextSegmentMerge.Identity>
    ) -> MergedTermPostings? {
        state.withLock { state in
            guard let known = state.terms[term], known.segmentKeys == segmentKeys, known.tombstones == tombstones
            else { return nil }
            return known.merged
        }
    }

    func keep(
        _ merged: MergedTermPostings, term: [UInt8], segmentKeys: [[UInt8]], tombstones: Set<TextSegmentMerge.Identity>
    ) {
        state.withLock { state in
            state.make(room: merged.byteCount)
            state.terms[term] = Term(segmentKeys: segmentKeys, tombstones: tombstones, merged: merged)
            state.bytes += merged.byteCount + 64 * segmentKeys.count
        }
    }
}

/// One term's live segment postings, merged in key order into one buffer: a walk is an index
/// stepping forward, a seek a binary search, and neither allocates.
final class MergedTermPostings: @unchecked Sendable {
    let count: Int
    /// Each posting's key then its value, posting after posting, as the segments hold them
    /// (never mutated after `init`).
    private let bytes: UnsafeMutableRawPointer
    /// Where posting `p`'s key starts (`starts[2p]`), its value starts (`starts[2p + 1]`), and
    /// its value ends (`starts[2p + 2]`) in `bytes`.
    private let starts: [Int]
    private let stampIndexes: [Int32]
    /// The stamps the postings name, in the order first met.
    let stamps: [[UInt8]]
    /// The live postings' numbers, in key order.
    private let order: [Int32]
    let byteCount: Int
    /// The tombstones that cancelled a posting of the segments (a merge deletes exactly these).
    let usedTombstones: Set<TextSegmentMerge.Identity>

    /// The live postings of `segments` (each read once, front to back), in key order: those
    /// `tombstones` name left out. Throws when a segment does not read or two live postings have
    /// one key (each object has at most one posting per term).
    init(_ segments: [TextSegment], tombstones: Set<TextSegmentMerge.Identity>) throws(FormatError) {
        // Every posting read into one buffer, segment after segment (each in key order): a key
        // takes at most what its segment holds of it plus what it shares, so the segments' sizes
        // and the keys' lengths bound it; it grows when they do not.
        let postings = segments.reduce(0) { $0 + $1.count }
        let segmentBytes = segments.reduce(0) { $0 + $1.bytes.count }
        // Filled through pointers (no uniqueness check per store), then copied into arrays.
        let starts = UnsafeMutablePointer<Int>.allocate(capacity: 2 * postings + 1)
        let stampIndexes = UnsafeMutablePointer<Int32>.allocate(capacity: Swift.max(1, postings))
        // Each key's first 16 bytes as two big-endian integers (zeros past its end): most keys
        // are ordered by these alone.
        let heads = UnsafeMutablePointer<UInt64>.allocate(capacity: Swift.max(2, 2 * postings))
        defer {
            starts.deallocate()
            stampIndexes.deallocate()
            heads.deallocate()
        }
        starts[0] = 0
        var stamps: [[UInt8]] = []
        var stampNumbers: [ObjectKeyBytes: Int32] = [:]
        var capacity = Swift.max(64, 2 * segmentBytes)
        var buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        var used = 0
        var owned = true
        defer { if owned { buffer.deallocate() } }
        @inline(__always)
        func put(_ bytes: UnsafeRawBufferPointer) {
            if used + bytes.count > capacity {
                capacity = Swift.max(2 * capacity, used + bytes.count)
                let grown = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
                grown.copyMemory(from: buffer, byteCount: used)
                buffer.deallocate()
                buffer = grown
            }
            if let base = bytes.baseAddress { (buffer + used).copyMemory(from: base, byteCount: bytes.count) }
            used += bytes.count
        }
        // Where each segment's postings start among all of them.
        var firstPosting: [Int] = []
        firstPosting.reserveCapacity(segments.count + 1)
        var total = 0
        for segment in segments {
            firstPosting.append(total)
            var numbers: [Int32] = []
            for stamp in segment.stamps {
                if let number = stampNumbers[ObjectKeyBytes(stamp)] {
                    numbers.append(number)
                } else {
                    stampNumbers[ObjectKeyBytes(stamp)] = Int32(stamps.count)
                    numbers.append(Int32(stamps.count))
                    stamps.append(stamp)
                }
            }
            try segment.forEachPosting { key, stamp, value throws(FormatError) in
                // A segment's walk checks its count, so this holds; a bound is kept all the same.
                guard total < postings else { throw FormatError("text segment holds more postings than it says") }
                try TextEntries.validate(value, layout: 2)
                put(key)
                starts[2 * total + 1] = used
                put(value)
                starts[2 * total + 2] = used
                stampIndexes[total] = numbers[stamp]
                let head = key.orderedHead
                heads[2 * total] = head.0
                heads[2 * total + 1] = head.1
                total += 1
            }
        }
        firstPosting.append(total)
        byteCount = Swift.max(1, used)
        bytes = buffer
        self.starts = Array(UnsafeBufferPointer(start: starts, count: 2 * total + 1))
        self.stampIndexes = Array(UnsafeBufferPointer(start: stampIndexes, count: total))
        self.stamps = stamps
        @inline(__always)
        func key(_ posting: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(
                start: buffer + starts[2 * posting], count: starts[2 * posting + 1] - starts[2 * posting])
        }
        /// Two postings' keys compared, by their heads first.
        @inline(__always)
        func compare(_ a: Int, _ b: Int) -> Int {
            if heads[2 * a] != heads[2 * b] { return heads[2 * a] < heads[2 * b] ? -1 : 1 }
            if heads[2 * a + 1] != heads[2 * b + 1] { return heads[2 * a + 1] < heads[2 * b + 1] ? -1 : 1 }
            return compareBytes(key(a), key(b))
        }
        // Key order across segments: a merge of the segments' runs (each in key order), kept in
        // the order of their next keys. The first run gives every posting up to the second run's
        // next key (all of them at once when its last key is not past that: runs of keys that do
        // not overlap, as where keys grow with time, go across whole), then goes back in its place.
        var order: [Int32] = []
        order.reserveCapacity(total)
        var runs = segments.indices.compactMap { segment in
            firstPosting[segment] < firstPosting[segment + 1]
                ? (next: firstPosting[segment], end: firstPosting[segment + 1]) : nil
        }
        runs.sort { compare($0.next, $1.next) < 0 }
        while !runs.isEmpty {
            var run = runs[0]
            if runs.count == 1 {
                order.append(contentsOf: Int32(run.next)..<Int32(run.end))
                break
            }
            let bound = runs[1].next
            if compare(run.end - 1, bound) <= 0 {
                order.append(contentsOf: Int32(run.next)..<Int32(run.end))
                run.next = run.end
            } else {
                // At least one posting; equal keys stay side by side for the check below.
                repeat {
                    order.append(Int32(run.next))
                    run.next += 1
                } while compare(run.next, bound) <= 0
            }
            if run.next == run.end {
                runs.removeFirst()
                continue
            }
            var place = 1
            while place < runs.count, compare(runs[place].next, run.next) <= 0 {
                runs[place - 1] = runs[place]
                place += 1
            }
            runs[place - 1] = run
        }
        // The live ones.
        var live: [Int32] = []
        live.reserveCapacity(total)
        var previous = -1
        var usedIdentities = Set<TextSegmentMerge.Identity>()
        for posting in order {
            let p = Int(posting)
            if !tombstones.isEmpty {
                let identity = TextSegmentMerge.Identity(key: Array(key(p)), stamp: stamps[Int(stampIndexes[p])])
                if tombstones.contains(identity) {
                    usedIdentities.insert(identity)
                    continue
                }
            }
            if previous >= 0, compare(previous, p) == 0 {
                throw FormatError("two live postings of one object key in the segments of one term")
            }
            previous = p
            live.append(posting)
        }
        self.order = live
        count = live.count
        usedTombstones = usedIdentities
        owned = false  // `deinit` deallocates the buffer from here on
    }

    deinit { bytes.deallocate() }

    /// The object key of posting `i` (`0 ..< count`), valid while this object lives.
    @inline(__always)
    func key(_ i: Int) -> UnsafeRawBufferPointer {
        let p = Int(order[i])
        return UnsafeRawBufferPointer(start: bytes + starts[2 * p], count: starts[2 * p + 1] - starts[2 * p])
    }

    /// The value of posting `i`.
    @inline(__always)
    func value(_ i: Int) -> UnsafeRawBufferPointer {
        let p = Int(order[i])
        return UnsafeRawBufferPointer(start: bytes + starts[2 * p + 1], count: starts[2 * p + 2] - starts[2 * p + 1])
    }

    /// The stamp of posting `i`.
    func stamp(_ i: Int) -> [UInt8] { stamps[Int(stampIndexes[Int(order[i])])] }

    /// The number in ``stamps`` of posting `i`'s stamp.
    func stampNumber(_ i: Int) -> Int { Int(stampIndexes[Int(order[i])]) }

    /// The first posting at or after `from` whose key is not below `target` (`count` if none):
    /// a gallop from `from`, then a binary search.
    func lowerBound(_ target: [UInt8], from: Int) -> Int {
        var low = from
        var step = 1
        var high = from
        while high < count, compareBytes(key(high), target) < 0 {
            low = high + 1
            high += step
            step *= 2
        }
        high = Swift.min(high, count)
        while low < high {
            let middle = (low + high) / 2
            if compareBytes(key(middle), target) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The posting of `objectKey`, if there is one.
    func find(_ objectKey: [UInt8]) -> Int? {
        let at = lowerBound(objectKey, from: 0)
        guard at < count, compareBytes(key(at), objectKey) == 0 else { return nil }
        return at
    }
}
