import BuriStorage

// Grouped postings (`docs/FORMAT.md` §5c): a large write puts each text index's postings of its
// objects in one segment per term instead of one entry per (term, object), and stamps each
// object's header with the commit's stamp; replacing or deleting an object whose postings are in
// segments writes tombstones. Readers see both as single entries (`GroupedPostingsReader`).
extension RawBucket {
    /// Batches with at least this many objects holding text for an index put that index's
    /// postings in segments.
    static let segmentThreshold = 64
    /// A segment holds at most this many postings: a larger run of one term is split, so that a
    /// seek never reads a huge value.
    static let segmentPostingLimit = 16_384

    /// The prefixes of the bucket's text indexes whose postings may be in segments (those of
    /// entry layout 2), for ``GroupedPostingsReader``; none on a shared engine, which never
    /// writes segments.
    var groupedTextPrefixes: [[UInt8]] {
        guard !database.engine.isShared else { return [] }
        return Self.groupedTextPrefixes(of: madeDescriptor, bucket: bucketId)
    }

    /// The prefixes of `descriptor`'s text indexes of entry layout 2 under bucket id `bucket`
    /// (its catalog id unless given; a view follows the bucket's current generation), whose
    /// postings may be in segments on an engine only this process writes to.
    static func groupedTextPrefixes(of descriptor: BucketDescriptor, bucket: UInt32? = nil) -> [[UInt8]] {
        descriptor.indexes.compactMap { index in
            index.text?.keepsLengths == true
                ? Keyspace.indexPrefix(bucket: bucket ?? descriptor.id, index: index.id) : nil
        }
    }

    /// `reader` showing this bucket's grouped postings as single entries.
    func postingsReader(_ reader: any StorageReader) -> any StorageReader {
        GroupedPostingsReader.wrap(reader, textPrefixes: groupedTextPrefixes, cache: database.textSegments)
    }

    /// Stamps the writes of a large batch for segments: for each text index (entry layout 2)
    /// that at least ``segmentThreshold`` of the objects have terms in, one random stamp, put
    /// into the header (with the document length) of every object having terms in it. Nothing
    /// changes on a shared engine (segments would make concurrent writers conflict over merges),
    /// or when the batch names a key twice (its earlier version's postings would have to leave
    /// the segment: `namesAKeyTwice`, keys compared as bytes). Only the headers change, in place:
    /// the record values are serialized from them as the batch is written.
    func stampForSegments(_ writes: inout [RecordWrite], namesAKeyTwice: Bool) {
        guard writes.count >= Self.segmentThreshold, !database.engine.isShared else { return }
        let candidates = madeDescriptor.indexes.filter { $0.text?.keepsLengths == true }
        guard !candidates.isEmpty else { return }
        var ordered: [(index: UInt32, stamp: [UInt8])] = []
        for index in candidates.sorted(by: { $0.id < $1.id }) {
            var holding = 0
            for position in writes.indices
            where writes[position].header.entries.contains(where: { $0.index == index.id }) {
                holding += 1
                if holding >= Self.segmentThreshold { break }
            }
            if holding >= Self.segmentThreshold { ordered.append((index.id, Self.randomStamp())) }
        }
        guard !ordered.isEmpty, !namesAKeyTwice else { return }
        for position in writes.indices {
            for (index, stamp) in ordered {
                guard let entry = writes[position].header.entries.firstIndex(where: { $0.index == index }) else {
                    continue
                }
                let length = writes[position].entryValues.withValue(at: entry) { Self.documentLength($0) }
                writes[position].header.textStamps.append(.init(index: index, stamp: stamp, length: UInt64(length)))
            }
        }
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
    /// postings in segments cancelled by tombstones (and their keys deleted as single entries
    /// too, which a repair may have made them). Entries `keeping` says stay are left alone
    /// (single entries only: a segment posting is always cancelled, as its replacement is
    /// written anew).
    /// Returns how many tombstones it wrote.
    @discardableResult
    func removeEntries(
        of header: RecordHeader, objectKey: [UInt8], key: String, batch: any StorageBatch,
        keeping: (RecordHeader.Entry) -> Bool = { _ in false }
    ) -> Int {
        var tombstones = 0
        for entry in header.entries {
            if let stamp = header.textStamp(of: entry.index) {
                batch.put(tombstoneKey(entry, stamp: stamp.stamp, objectKey: objectKey), [])
                // And the single entry, in case `check --repair` rebuilt the posting as one.
                batch.delete(entryKey(entry, objectKey: key))
                tombstones += 1
            } else if !keeping(entry) {
                batch.delete(entryKey(entry, objectKey: key))
            }
        }
        return tombstones
    }
}

/// The postings a write puts in segments, flushed into the batch as one segment per term (or
/// several, past ``RawBucket/segmentPostingLimit``) once every object is written. Held in a few
/// flat arrays per index (a term id, an object number and the entry's place in its object's
/// header per posting: the values stay in the writes until they are copied into the segments),
/// sorted by term with a counting sort at the end.
struct SegmentCollector {
    fileprivate struct IndexPostings {
        var index: UInt32
        var stamp: [UInt8]
        /// Keyed by the tuple's bytes, hashed in one call (an array hashes byte by byte).
        var termIds: [ObjectKeyBytes: Int32] = [:]
        /// Term ids by the address of the tuple array's storage: a batch's objects share one
        /// array per term (`TextTupleInterner`), so most postings find their term without
        /// hashing its bytes. Every array whose address is listed is kept in `seen`, so no
        /// address is reused, nor its bytes changed, while the collector lives.
        var byAddress = AddressTable()
        var seen: [[UInt8]] = []
        var tuples: [[UInt8]] = []
        var postingTerm: [Int32] = []
        var postingObject: [Int32] = []
        /// The posting's entry among its object's header entries (and entry values).
        var postingEntry: [Int32] = []
    }
    private var indexes: [IndexPostings] = []
    /// The object keys (UTF-8), numbered in the order their first posting came, and the batch
    /// position of each object's write.
    private var objectKeys: [[UInt8]] = []
    private var objectPositions: [Int] = []
    /// The number of the object the last posting was of (`position` given to ``add``).
    private var lastPosition = -1

    var isEmpty: Bool { indexes.isEmpty }

    /// Adds the posting of entry `entry` of the write at batch position `position` (positions come
    /// in increasing order, each object's postings together); its value is read from the write's
    /// entry values when the segments are flushed.
    mutating func add(
        index: UInt32, stamp: [UInt8], tuple: [UInt8], position: Int, objectKey: [UInt8], entry: Int
    ) {
        if position != lastPosition {
            lastPosition = position
            objectKeys.append(objectKey)
            objectPositions.append(position)
        }
        let slot: Int
        if let found = indexes.firstIndex(where: { $0.index == index }) {
            slot = found
        } else {
            indexes.append(IndexPostings(index: index, stamp: stamp))
            slot = indexes.count - 1
        }
        indexes[slot].add(tuple: tuple, object: Int32(objectKeys.count - 1), entry: Int32(entry))
    }

    /// Puts every term's segments into `batch`; `writes` are the batch's writes, whose entry
    /// values the postings hold.
    func flush(
        bucket: UInt32, writes: borrowing [RawBucket.RecordWrite], into batch: any StorageBatch
    ) throws(FormatError) {
        // Each object's rank in key order: a term's postings are written in that order.
        var byKey = Array(objectKeys.indices)
        var sorted = true
        for number in objectKeys.indices.dropFirst()
        where compareBytes(objectKeys[number - 1], objectKeys[number]) >= 0 {
            sorted = false
            break
        }
        if !sorted {
            // Compared by their first 16 bytes as integers first: most keys differ there.
            let heads = objectKeys.map { key in key.withUnsafeBytes { $0.orderedHead } }
            byKey.sort { a, b in
                if heads[a] != heads[b] { return heads[a] < heads[b] }
                return compareBytes(objectKeys[a], objectKeys[b]) < 0
            }
        }
        for postings in indexes {
            try postings.flush(
                bucket: bucket, objectKeys: objectKeys, objectPositions: objectPositions, writes: writes,
                byKey: byKey, into: batch)
        }
    }
}

extension SegmentCollector.IndexPostings {
    fileprivate mutating func add(tuple: [UInt8], object: Int32, entry: Int32) {
        let term: Int32
        let address = tuple.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        if address != 0, let known = byAddress.find(address) {
            term = known
        } else {
            let id = ObjectKeyBytes(tuple)
            if let known = termIds[id] {
                term = known
            } else {
                term = Int32(tuples.count)
                termIds[id] = term
                tuples.append(tuple)
            }
            if address != 0 {
                byAddress.insert(address, term)
                seen.append(tuple)
            }
        }
        postingTerm.append(term)
        postingObject.append(object)
        postingEntry.append(entry)
    }

    fileprivate func flush(
        bucket: UInt32, objectKeys: [[UInt8]], objectPositions: [Int], writes: borrowing [RawBucket.RecordWrite],
        byKey: [Int], into batch: any StorageBatch
    ) throws(FormatError) {
        // The postings in their objects' key order: an object's postings came together, so each
        // object's run of them is taken whole, objects in key order.
        var objectStarts = [Int](repeating: 0, count: objectKeys.count + 1)
        for object in postingObject { objectStarts[Int(object) + 1] += 1 }
        for object in objectKeys.indices { objectStarts[object + 1] += objectStarts[object] }
        // Then a stable counting sort by term: each term's postings together, in key order.
        var starts = [Int](repeating: 0, count: tuples.count + 1)
        for term in postingTerm { starts[Int(term) + 1] += 1 }
        for term in tuples.indices { starts[term + 1] += starts[term] }
        var fill = starts
        var order = [Int](repeating: 0, count: postingTerm.count)
        for object in byKey {
            for posting in objectStarts[object]..<objectStarts[object + 1] {
                let term = Int(postingTerm[posting])
                order[fill[term]] = posting
                fill[term] += 1
            }
        }
        // One buffer for every segment and one for its key; each segment's id is the commit's
        // stamp plus the segment's number in this flush (ids need only differ among a term's
        // segments, and another commit's stamp is another 128 random bits). The values are not
        // validated again: `TextEntries.appendEntries` wrote them in this batch, and every read
        // of a segment validates what it reads.
        var writer = TextSegmentWriter(validatingValues: false)
        var key: [UInt8] = []
        var number: UInt64 = 0
        let stamps = [stamp]
        // The writes through a buffer pointer: reading an entry value borrows it in place.
        try writes.withUnsafeBufferPointer { (writes) throws(FormatError) in
            for term in tuples.indices {
                let run = order[starts[term]..<starts[term + 1]]
                var from = run.startIndex
                while from < run.endIndex {
                    let to = Swift.min(from + RawBucket.segmentPostingLimit, run.endIndex)
                    try writer.begin(stamps: stamps, count: to - from)
                    for posting in run[from..<to] {
                        let object = Int(postingObject[posting])
                        writes[objectPositions[object]].entryValues.withValue(at: Int(postingEntry[posting])) { value in
                            objectKeys[object].withUnsafeBytes { key in writer.append(key: key, stamp: 0, value: value)
                            }
                        }
                    }
                    try writer.finish()
                    GroupedPostingKeys.writeSegmentKey(
                        bucket: bucket, index: index, tuple: tuples[term],
                        tier: RawBucket.segmentTier(ofCount: to - from), id: stamp, plus: number,
                        into: &key)
                    number &+= 1
                    key.withUnsafeBytes { key in writer.withBytes { batch.put(key, $0) } }
                    from = to
                }
            }
        }
    }
}

/// A map from addresses (never 0) to numbers: open addressing, at most half full, no removal.
struct AddressTable {
    private var keys: [UInt] = []
    private var values: [Int32] = []
    private var count = 0
    private var shift: UInt64 = 64

    @inline(__always)
    private func slot(of address: UInt) -> Int {
        Int(truncatingIfNeeded: (UInt64(address) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The number of `address`, if it has one.
    func find(_ address: UInt) -> Int32? {
        guard !keys.isEmpty else { return nil }
        var at = slot(of: address)
        while true {
            let key = keys[at]
            if key == address { return values[at] }
            if key == 0 { return nil }
            at = (at + 1) & (keys.count - 1)
        }
    }

    /// Gives `address` (not yet in the table) the number `value`.
    mutating func insert(_ address: UInt, _ value: Int32) {
        if 2 * (count + 1) > keys.count { grow() }
        var at = slot(of: address)
        while keys[at] != 0 { at = (at + 1) & (keys.count - 1) }
        keys[at] = address
        values[at] = value
        count += 1
    }

    private mutating func grow() {
        let old = zip(keys, values).filter { $0.0 != 0 }
        let size = Swift.max(256, 2 * keys.count)
        keys = [UInt](repeating: 0, count: size)
        values = [Int32](repeating: 0, count: size)
        shift = UInt64(64 - size.trailingZeroBitCount)
        count = 0
        for (address, value) in old { insert(address, value) }
    }
}
