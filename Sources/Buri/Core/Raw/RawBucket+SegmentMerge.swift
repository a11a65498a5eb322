import BuriStorage
import Synchronization

// Merging text segments (`docs/FORMAT.md` §5c, "Merges"). Every large write adds a segment to
// each term it holds, and every replaced or deleted object leaves a tombstone per term; merges
// keep both few. A merge is a commit of its own that changes no live posting: it replaces some of
// a term's segments with one holding their live postings, and deletes the tombstones that
// cancelled the others.
extension RawBucket {
    /// A term's segments of one tier that make it merge them (with every lower tier's).
    static let segmentsPerTier = 4
    /// The highest tier: segments of up to ``segmentPostingLimit`` postings, which merge only
    /// to drop cancelled postings.
    static let topSegmentTier: UInt8 = 4

    /// The tier of a segment of `count` postings: the smallest `k` with `count ≤ 64·4ᵏ`, at most
    /// ``topSegmentTier``.
    static func segmentTier(ofCount count: Int) -> UInt8 {
        var tier: UInt8 = 0
        var capacity = segmentThreshold
        while count > capacity, tier < topSegmentTier {
            capacity *= 4
            tier += 1
        }
        return tier
    }

    /// The lowest tier below the top holding at least ``segmentsPerTier`` of a term's segments
    /// (whose tiers are `tiers`), which makes a pass merge them with every lower tier's.
    static func fullTier(of tiers: [UInt8]) -> Int? {
        var perTier = [Int](repeating: 0, count: Int(topSegmentTier))
        for tier in tiers where tier < topSegmentTier { perTier[Int(tier)] += 1 }
        return perTier.firstIndex { $0 >= segmentsPerTier }
    }

    /// What a merge pass did.
    struct SegmentMergeCounts: Equatable, Sendable {
        /// Terms some of whose segments were merged.
        var terms = 0
        /// Segments read and replaced, and segments written in their place.
        var segmentsRead = 0
        var segmentsWritten = 0
        /// Tombstones deleted with the postings they cancelled (or cancelling none).
        var tombstones = 0
    }

    /// Merges the segments of this bucket's text indexes in one commit, outside a transaction.
    /// With `everything`, each term's segments become as few as the posting limit allows and
    /// every tombstone goes (what ``BuriDatabase/compact()`` does); otherwise only where a tier
    /// is full or a term's tombstones are many (what a write does now and then, see
    /// ``SegmentMergeSchedule``).
    @discardableResult
    func mergeSegments(everything: Bool) throws(BuriError) -> SegmentMergeCounts {
        let prefixes = groupedTextPrefixes
        guard !prefixes.isEmpty else { return SegmentMergeCounts() }
        return try withWriter(sync: nil) { writer throws(BuriError) -> SegmentMergeCounts in
            try checkCurrent(writer.reader)
            var counts = SegmentMergeCounts()
            for index in madeDescriptor.indexes where index.text?.keepsLengths == true {
                do {
                    try mergeSegments(
                        index: index.id, reader: writer.reader, batch: writer.batch, everything: everything,
                        counts: &counts)
                } catch let error as FormatError {
                    throw .corruption(
                        bucket: name, key: nil, index: index.name,
                        reason: "text segment: \(error); `buri check --repair` rebuilds the index's postings")
                } catch {
                    try run { () throws -> Void in throw error }
                }
            }
            return counts
        }
    }

    /// The merge pass over one text index: its tombstones read into a set per term, then its
    /// segments walked term by term.
    private func mergeSegments(
        index: UInt32, reader: any StorageReader, batch: any StorageBatch, everything: Bool,
        counts: inout SegmentMergeCounts
    ) throws {
        let prefix = Keyspace.indexPrefix(bucket: bucketId, index: index)
        var tombstones: [[UInt8]: Set<TextSegmentMerge.Identity>] = [:]
        let tombstoneCursor = try reader.cursor(in: .prefix(prefix + [GroupedPostingKeys.tombstoneTag]))
        while try tombstoneCursor.next() {
            let key = tombstoneCursor.key
            let tupleStart = prefix.count + 1
            let tupleEnd = try GroupedPostingKeys.tupleEnd(of: key, prefixLength: prefix.count)
            guard key.count > tupleEnd + TextSegment.stampLength else {
                throw FormatError("a text tombstone key of \(key.count) bytes names no object")
            }
            let stampEnd = tupleEnd + TextSegment.stampLength
            let tuple = Array(key[tupleStart..<tupleEnd])
            let identity = TextSegmentMerge.Identity(
                key: Array(key[stampEnd...]), stamp: Array(key[tupleEnd..<stampEnd]))
            tombstones[tuple, default: []].insert(identity)
        }
        // A term's segments are gathered (keys, tiers, and their values copied into one buffer)
        // and read only when something of the term is due: most terms of a pass have no tier
        // full and no tombstone, which their keys' tiers alone tell.
        var term: [UInt8] = []
        var haveTerm = false
        var gathered: [(key: [UInt8], tier: UInt8, value: Range<Int>)] = []
        var values = ByteWriter(capacity: 4096)
        var segments: [(key: [UInt8], tier: UInt8, segment: TextSegment)] = []
        // The ids of the segments the pass writes: one random id counted up (ids need only
        // differ among one term's segments, and another pass draws another 128 random bits).
        let id = Self.randomStamp()
        var number: UInt64 = 0
        func finishTerm() throws {
            guard haveTerm else { return }
            defer {
                gathered.removeAll(keepingCapacity: true)
                values.removeAll()
            }
            let cancelled = tombstones.removeValue(forKey: term) ?? []
            if !everything, cancelled.isEmpty, Self.fullTier(of: gathered.map(\.tier)) == nil { return }
            segments.removeAll(keepingCapacity: true)
            for segment in gathered {
                let bytes = values.withBytes { Array(UnsafeRawBufferPointer(rebasing: $0[segment.value])) }
                segments.append((segment.key, segment.tier, try TextSegment(bytes, checkingPostings: false)))
            }
            try mergeTerm(
                index: index, tuple: term, segments: segments, tombstones: cancelled, everything: everything,
                batch: batch, id: id, number: &number, counts: &counts)
        }
        let segmentCursor = try reader.cursor(in: .prefix(prefix + [GroupedPostingKeys.segmentTag]))
        while try segmentCursor.next() {
            let key = segmentCursor.key
            let tupleStart = prefix.count + 1
            let tupleEnd = try GroupedPostingKeys.tupleEnd(of: key, prefixLength: prefix.count)
            guard key.count == tupleEnd + 1 + TextSegment.stampLength else {
                throw FormatError(
                    "a text segment key of \(key.count) bytes is not a segment key (term, tier, 16-byte id)")
            }
            let sameTerm =
                haveTerm && term.count == tupleEnd - tupleStart && term.elementsEqual(key[tupleStart..<tupleEnd])
            if !sameTerm {
                try finishTerm()
                term = Array(key[tupleStart..<tupleEnd])
                haveTerm = true
            }
            let tier = key[tupleEnd]
            let start = values.count
            try segmentCursor.withValue { values.append($0) }
            gathered.append((key, tier, start..<values.count))
        }
        try finishTerm()
        // Tombstones of terms without a segment cancel nothing (stamps never repeat): they go.
        for (tuple, identities) in tombstones {
            for identity in identities {
                batch.delete(
                    GroupedPostingKeys.tombstoneKey(
                        bucket: bucketId, index: index, tuple: tuple, stamp: identity.stamp, objectKey: identity.key))
                counts.tombstones += 1
            }
        }
    }

    /// Merges what is due of one term's segments (all of them with `everything`), replacing
    /// them in `batch` by segments of their live postings and deleting the tombstones used.
    private func mergeTerm(
        index: UInt32, tuple: [UInt8], segments: [(key: [UInt8], tier: UInt8, segment: TextSegment)],
        tombstones: Set<TextSegmentMerge.Identity>, everything: Bool, batch: any StorageBatch, id: [UInt8],
        number: inout UInt64, counts: inout SegmentMergeCounts
    ) throws {
        let chosen: [(key: [UInt8], tier: UInt8, segment: TextSegment)]
        let postings = segments.reduce(0) { $0 + $1.segment.count }
        let all =
            everything || (!tombstones.isEmpty && (tombstones.count * 4 >= postings || tombstones.count >= 1024))
        if all {
            // Every segment: all cancelled postings go, and the fewest segments hold the rest
            // (already so when nothing is cancelled and at most one segment is not full).
            if tombstones.isEmpty,
                segments.filter({ $0.segment.count < Self.segmentPostingLimit }).count <= 1
            {
                return
            }
            chosen = segments
        } else {
            // The lowest tier below the top holding enough segments, merged with every lower one.
            guard let full = Self.fullTier(of: segments.map(\.tier)) else { return }
            chosen = segments.filter { Int($0.tier) <= full }
        }
        let merged = try MergedTermPostings(chosen.map(\.segment), tombstones: tombstones)
        for segment in chosen { batch.delete(segment.key) }
        // Merging all, the tombstones that cancelled nothing go too: stamps never repeat, so
        // they never will.
        let dropped = all ? tombstones : merged.usedTombstones
        for identity in dropped {
            batch.delete(
                GroupedPostingKeys.tombstoneKey(
                    bucket: bucketId, index: index, tuple: tuple, stamp: identity.stamp, objectKey: identity.key))
        }
        counts.terms += 1
        counts.segmentsRead += chosen.count
        counts.tombstones += dropped.count
        // The live postings, in chunks of at most the posting limit, each chunk naming only its
        // own stamps (in byte order, as a segment lists them).
        // Values were checked as the merged postings read them.
        var writer = TextSegmentWriter(validatingValues: false)
        var key: [UInt8] = []
        var from = 0
        while from < merged.count {
            let to = Swift.min(from + Self.segmentPostingLimit, merged.count)
            var named = [Bool](repeating: false, count: merged.stamps.count)
            for i in from..<to { named[merged.stampNumber(i)] = true }
            let ordered = named.indices.filter { named[$0] }.sorted {
                merged.stamps[$0].lexicographicallyPrecedes(merged.stamps[$1])
            }
            var position = [Int](repeating: 0, count: merged.stamps.count)
            for (slot, number) in ordered.enumerated() { position[number] = slot }
            try writer.begin(stamps: ordered.map { merged.stamps[$0] }, count: to - from)
            for i in from..<to {
                writer.append(key: merged.key(i), stamp: position[merged.stampNumber(i)], value: merged.value(i))
            }
            try writer.finish()
            GroupedPostingKeys.writeSegmentKey(
                bucket: bucketId, index: index, tuple: tuple, tier: Self.segmentTier(ofCount: to - from), id: id,
                plus: number, into: &key)
            number &+= 1
            key.withUnsafeBytes { key in writer.withBytes { batch.put(key, $0) } }
            counts.segmentsWritten += 1
            from = to
        }
    }

    /// Notes in the database's merge schedule what a committed write added (segments, tombstones),
    /// and runs this bucket's merge pass when one is due. Outside a transaction only; a pass that
    /// fails leaves everything as it was (the write has committed; the damage met is reported by
    /// the reads and `check` that meet it), and the next is tried only when another pass is due,
    /// not at every write.
    func noteSegmentWork(segmentedCommits: Int, tombstones: Int) {
        guard segmentedCommits > 0 || tombstones > 0, !database.engine.isShared else { return }
        let due = database.segmentMerges.note(
            bucket: bucketId, segmentedCommits: segmentedCommits, tombstones: tombstones)
        guard due, transaction == nil else { return }
        database.segmentMerges.reset(bucket: bucketId)
        _ = try? mergeSegments(everything: false)
    }
}

/// When buckets' text segments are merged: after every ``commits`` commits that wrote segments
/// to a bucket, or ``tombstones`` tombstones written to it, counted by this process since it
/// opened the database or last merged the bucket. ``BuriDatabase/compact()`` merges everything
/// whatever the counts.
final class SegmentMergeSchedule: Sendable {
    static let commits = 4
    static let tombstones = 4096
    private let state = Mutex<[UInt32: (commits: Int, tombstones: Int)]>([:])

    /// Adds to a bucket's counts; whether a merge pass is due.
    func note(bucket: UInt32, segmentedCommits: Int, tombstones: Int) -> Bool {
        state.withLock { state in
            var entry = state[bucket] ?? (0, 0)
            entry.commits += segmentedCommits
            entry.tombstones += tombstones
            state[bucket] = entry
            return entry.commits >= Self.commits || entry.tombstones >= Self.tombstones
        }
    }

    /// Forgets a bucket's counts (after a pass).
    func reset(bucket: UInt32) {
        _ = state.withLock { $0.removeValue(forKey: bucket) }
    }
}
