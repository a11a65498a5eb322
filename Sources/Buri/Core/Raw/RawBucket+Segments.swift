import BuriStorage

// Grouped postings (`docs/FORMAT.md` §5c): a large write puts each text index's postings of its
// objects in one segment per term instead of one entry per (term, object), and stamps each
// object's header with the commit's stamp; replacing or deleting an object whose postings are in
// segments writes tombstones. Readers see both as single entries (`GroupedPostingsReader`).
extension RawBucket {
    /// Batches with at least this many objects holding text for an index put that index's
    /// postings in segments.
    static let segmentThreshold = 64
    /// A segment holds at most this many postings, or about this many bytes: a larger run of one
    /// term is split, so that a seek never reads a huge value.
    static let segmentPostingLimit = 16_384
    static let segmentByteLimit = 256 << 10

    /// The prefixes of the bucket's text indexes whose postings may be in segments (those of
    /// entry layout 2), for ``GroupedPostingsReader``; none on a shared engine, which never
    /// writes segments.
    var groupedTextPrefixes: [[UInt8]] {
        guard !database.engine.isShared else { return [] }
        return madeDescriptor.indexes.compactMap { index in
            index.text?.keepsLengths == true ? Keyspace.indexPrefix(bucket: bucketId, index: index.id) : nil
        }
    }

    /// `reader` showing this bucket's grouped postings as single entries.
    func postingsReader(_ reader: any StorageReader) -> any StorageReader {
        GroupedPostingsReader.wrap(reader, textPrefixes: groupedTextPrefixes, cache: database.textSegments)
    }

    /// The writes of a batch, those of a large batch stamped for segments: for each text index
    /// (entry layout 2) that at least ``segmentThreshold`` of the objects have terms in, one
    /// random stamp, put into the header (with the document length) of every object having terms
    /// in it. Nothing changes on a shared engine (segments would make concurrent writers
    /// conflict over merges), or when the batch names a key twice (its earlier version's
    /// postings would have to leave the segment).
    func stampedForSegments(_ writes: [RecordWrite]) throws(BuriError) -> [RecordWrite] {
        guard writes.count >= Self.segmentThreshold, !database.engine.isShared else { return writes }
        let candidates = madeDescriptor.indexes.filter { $0.text?.keepsLengths == true }
        guard !candidates.isEmpty else { return writes }
        var stamps: [UInt32: [UInt8]] = [:]
        for index in candidates {
            var holding = 0
            for write in writes where write.header.entries.contains(where: { $0.index == index.id }) {
                holding += 1
                if holding >= Self.segmentThreshold { break }
            }
            if holding >= Self.segmentThreshold { stamps[index.id] = Self.randomStamp() }
        }
        guard !stamps.isEmpty else { return writes }
        var keys = Set<ObjectKeyBytes>(minimumCapacity: writes.count)
        for write in writes where !keys.insert(ObjectKeyBytes(Array(write.key.utf8))).inserted { return writes }
        var stamped = writes
        for position in stamped.indices {
            var header = stamped[position].header
            for (index, stamp) in stamps.sorted(by: { $0.key < $1.key })
            where header.entries.contains(where: { $0.index == index }) {
                let length = Self.documentLength(of: stamped[position], index: index)
                header.textStamps.append(.init(index: index, stamp: stamp, length: UInt64(length)))
            }
            guard !header.textStamps.isEmpty else { continue }
            do {
                stamped[position].value = try header.replacingHeader(of: stamped[position].value)
            } catch {
                throw .corruption(
                    bucket: name, key: stamped[position].key, index: nil, reason: "record header: \(error)")
            }
            stamped[position].header = header
        }
        return stamped
    }

    /// 16 random bytes.
    static func randomStamp() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var stamp = [UInt8](repeating: 0, count: TextSegment.stampLength)
        for offset in stride(from: 0, to: stamp.count, by: 8) {
            let word = generator.next() as UInt64
            for byte in 0..<8 { stamp[offset + byte] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(byte))) }
        }
        return stamp
    }

    /// The tombstone key cancelling `objectKey`'s posting of `entry`'s term written under `stamp`.
    func tombstoneKey(_ entry: RecordHeader.Entry, stamp: [UInt8], objectKey: [UInt8]) -> [UInt8] {
        GroupedPostingKeys.tombstoneKey(
            bucket: bucketId, index: entry.index, tuple: entry.tuple, stamp: stamp, objectKey: objectKey)
    }

    /// Removes the postings `header` lists for `objectKey` in `batch`: single entries deleted,
    /// postings in segments cancelled by tombstones. Entries `keeping` says stay are left alone
    /// (single entries only: a segment posting is always cancelled, as its replacement is
    /// written anew).
    func removeEntries(
        of header: RecordHeader, objectKey: [UInt8], key: String, batch: any StorageBatch,
        keeping: (RecordHeader.Entry) -> Bool = { _ in false }
    ) {
        for entry in header.entries {
            if let stamp = header.textStamp(of: entry.index) {
                batch.put(tombstoneKey(entry, stamp: stamp.stamp, objectKey: objectKey), [])
            } else if !keeping(entry) {
                batch.delete(entryKey(entry, objectKey: key))
            }
        }
    }
}

/// The postings a write puts in segments, by index and term, flushed into the batch as one
/// segment per term (or several, past the limits) once every object is written.
struct SegmentCollector {
    private struct Term {
        var keys: [[UInt8]] = []
        var values: [UInt8] = []
        var ends: [Int] = []

        mutating func append(_ key: [UInt8], _ value: UnsafeRawBufferPointer) {
            keys.append(key)
            values.append(contentsOf: value)
            ends.append(values.count)
        }
    }
    private var terms: [UInt32: [[UInt8]: Term]] = [:]
    /// Each index's stamp.
    private var stamps: [UInt32: [UInt8]] = [:]

    var isEmpty: Bool { terms.isEmpty }

    mutating func add(index: UInt32, stamp: [UInt8], tuple: [UInt8], objectKey: [UInt8], value: UnsafeRawBufferPointer)
    {
        stamps[index] = stamp
        terms[index, default: [:]][tuple, default: Term()].append(objectKey, value)
    }

    /// Puts every term's segments into `batch`.
    func flush(bucket: UInt32, into batch: any StorageBatch) throws(FormatError) {
        for (index, byTerm) in terms {
            guard let stamp = stamps[index] else { continue }
            for (tuple, term) in byTerm {
                var order = Array(term.keys.indices)
                if zip(term.keys, term.keys.dropFirst()).contains(where: { !$0.0.lexicographicallyPrecedes($0.1) }) {
                    order.sort { term.keys[$0].lexicographicallyPrecedes(term.keys[$1]) }
                }
                var postings: [TextSegment.Posting] = []
                var bytes = 0
                func emit() throws(FormatError) {
                    guard !postings.isEmpty else { return }
                    let value = try TextSegment.encode(stamps: [stamp], postings: postings)
                    let key = GroupedPostingKeys.segmentKey(
                        bucket: bucket, index: index, tuple: tuple, tier: 0, id: RawBucket.randomStamp())
                    batch.put(key, value)
                    postings.removeAll(keepingCapacity: true)
                    bytes = 0
                }
                for position in order {
                    let start = position == 0 ? 0 : term.ends[position - 1]
                    let value = Array(term.values[start..<term.ends[position]])
                    postings.append((term.keys[position], 0, value))
                    bytes += term.keys[position].count + value.count + 4
                    if postings.count >= RawBucket.segmentPostingLimit || bytes >= RawBucket.segmentByteLimit {
                        try emit()
                    }
                }
                try emit()
            }
        }
    }
}
