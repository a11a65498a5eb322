import BuriStorage
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `body` with the bytes of `array`, its typed error passed on (`Array.withUnsafeBytes` rethrows
/// untyped).
@inline(__always)
private func withBytes<R>(
    _ array: [UInt8], _ body: (UnsafeRawBufferPointer) throws(FormatError) -> R
) throws(FormatError) -> R {
    try array.withUnsafeBytes { raw in Result { () throws(FormatError) -> R in try body(raw) } }.get()
}

/// A text index segment (`docs/FORMAT.md` §5c): one term's postings written by one commit
/// or one merge, in one value, in object-key order. Each posting is an object key, the stamp of
/// the commit that wrote it (an index into the segment's stamp table) and its entry value (the
/// layout-2 value: document length, count, positions).
///
/// ```
/// u8      version (1)
/// varint  posting count n (≥ 1)
/// varint  stamp count s (≥ 1), then s stamps of 16 bytes, strictly increasing
/// u32be   ⌈n / 16⌉ restart offsets, each where posting 16·k starts, from the first posting
/// n × posting:
///         varint  bytes shared with the previous key (0 at a restart)
///         varint  length of the rest of the key (the key is never empty)
///         bytes   the rest of the key
///         varint  stamp index (< s)
///         varint  value length, then the value
/// ```
///
/// Keys strictly increase, compared as bytes. Nothing follows the last posting.
///
/// ```swift
/// let bytes = try TextSegment.encode(stamps: [stamp], postings: [(Array("a".utf8), 0, value)])
/// let segment = try TextSegment(bytes)    // validated: every posting reads
/// ```
struct TextSegment {
    /// The version byte this build writes and reads.
    static let version: UInt8 = 1
    /// A stamp's length in bytes.
    static let stampLength = 16
    /// Postings between two restart points. A reader may seek within one segment by a binary
    /// search over the restart offsets; Buri reads a term's segments whole and merged, and checks
    /// every restart offset as it reads.
    static let restartInterval = 16

    /// One posting as ``encode(stamps:postings:)`` takes it.
    typealias Posting = (key: [UInt8], stamp: Int, value: [UInt8])

    /// The segment's bytes.
    let bytes: [UInt8]
    /// The number of postings.
    let count: Int
    /// The stamps its postings name, in byte order.
    let stamps: [[UInt8]]
    /// Where the restart offsets start, and where the first posting starts.
    private let restartsStart: Int
    private let postingsStart: Int

    /// Validates `bytes` as a whole segment: header, stamps, restart offsets, and every posting
    /// (keys in increasing order, stamp indexes in range, values that read as layout-2 entry
    /// values, no trailing bytes). Throws the first fault found.
    init(_ bytes: [UInt8]) throws(FormatError) {
        try self.init(bytes, checkingPostings: true)
    }

    /// A segment whose header and stamps are checked, and its postings too when
    /// `checkingPostings`; otherwise the reader must walk them with ``forEachPosting(_:)``, which
    /// checks them as it goes, before it trusts any (what a term's merged postings do, in one pass).
    init(_ bytes: [UInt8], checkingPostings: Bool) throws(FormatError) {
        self.bytes = bytes
        var offset = 0
        let header = try withBytes(bytes) { raw throws(FormatError) in try Self.readHeader(raw, at: &offset) }
        count = header.count
        stamps = header.stamps
        restartsStart = offset
        postingsStart = offset + 4 * Self.restartCount(of: count)
        guard postingsStart <= bytes.count else {
            throw FormatError("text segment: its \(Self.restartCount(of: count)) restart offsets run past its end")
        }
        if checkingPostings { try validatePostings() }
    }

    /// The number of restart offsets a segment of `count` postings has.
    static func restartCount(of count: Int) -> Int { (count + restartInterval - 1) / restartInterval }

    private static func readHeader(
        _ raw: UnsafeRawBufferPointer, at offset: inout Int
    ) throws(FormatError) -> (count: Int, stamps: [[UInt8]]) {
        guard let first = raw.first else { throw FormatError("text segment is empty") }
        guard first == version else {
            throw FormatError("text segment version \(first) is not known (this Buri reads version \(version))")
        }
        offset = 1
        let count = try Varint.read(raw, at: &offset)
        guard count >= 1 else { throw FormatError("text segment holds no posting") }
        // Every posting takes at least 5 bytes (shared, length, one key byte, stamp, value length).
        guard count <= UInt64(raw.count / 5) else {
            throw FormatError("text segment claims \(count) postings in \(raw.count) bytes")
        }
        let stampCount = try Varint.read(raw, at: &offset)
        guard stampCount >= 1, stampCount <= count else {
            throw FormatError("text segment names \(stampCount) stamps for \(count) postings")
        }
        guard stampCount <= UInt64((raw.count - offset) / stampLength) else {
            throw FormatError("text segment's \(stampCount) stamps run past its end")
        }
        var stamps: [[UInt8]] = []
        stamps.reserveCapacity(Int(stampCount))
        for _ in 0..<Int(stampCount) {
            let stamp = Array(raw[offset..<(offset + stampLength)])
            if let previous = stamps.last, !previous.lexicographicallyPrecedes(stamp) {
                throw FormatError("text segment's stamps are not in increasing byte order")
            }
            stamps.append(stamp)
            offset += stampLength
        }
        return (Int(count), stamps)
    }

    /// Checks every posting and restart offset (see ``init(_:)``).
    private func validatePostings() throws(FormatError) {
        try forEachPosting { _, _, value throws(FormatError) in try TextEntries.validate(value, layout: 2) }
    }

    /// Calls `body` with each posting in order (its key, its stamp index, its value; the buffers
    /// lent until `body` returns), in one pass that checks what a walk can: keys increasing,
    /// restart offsets pointing at their postings, stamp indexes in range, every stamp named,
    /// the posting count, and no bytes after the last posting.
    func forEachPosting(
        _ body: (UnsafeRawBufferPointer, Int, UnsafeRawBufferPointer) throws(FormatError) -> Void
    ) throws(FormatError) {
        let count = self.count
        let stampCount = stamps.count
        let postingsStart = self.postingsStart
        let restartsStart = self.restartsStart
        // The key being rebuilt (each shares a prefix with the one before), grown as keys need.
        var keyCapacity = 64
        var key = UnsafeMutableRawPointer.allocate(byteCount: keyCapacity, alignment: 1)
        defer { key.deallocate() }
        var keyLength = 0
        var used = stampCount == 1 ? [] : [Bool](repeating: false, count: stampCount)
        try withBytes(bytes) { raw throws(FormatError) in
            var at = postingsStart
            for number in 0..<count {
                if number % Self.restartInterval == 0 {
                    let r = restartsStart + 4 * (number / Self.restartInterval)
                    let offset = Int(raw[r]) << 24 | Int(raw[r + 1]) << 16 | Int(raw[r + 2]) << 8 | Int(raw[r + 3])
                    guard postingsStart + offset == at else {
                        throw FormatError(
                            "text segment: restart \(number / Self.restartInterval) does not point at posting \(number)"
                        )
                    }
                }
                guard at < raw.count else { throw FormatError("text segment: posting \(number) starts past its end") }
                let shared = Int(try Self.varint(raw, &at))
                guard shared <= keyLength, number % Self.restartInterval != 0 || shared == 0 else {
                    throw FormatError(
                        "text segment: posting \(number) shares \(shared) bytes with a key of \(keyLength)")
                }
                let rest = Int(try Self.varint(raw, &at))
                guard rest >= 1, rest <= raw.count - at else {
                    throw FormatError("text segment: posting \(number)'s key of \(rest) more bytes runs past its end")
                }
                if number > 0 {
                    // Past the shared bytes, the new key is longer, or its next byte is larger.
                    var follows = false
                    var offset = 0
                    while true {
                        if shared + offset == keyLength { follows = true; break }
                        if offset == rest { break }
                        let mine = raw[at + offset]
                        let theirs = key.load(fromByteOffset: shared + offset, as: UInt8.self)
                        if mine != theirs { follows = mine > theirs; break }
                        offset += 1
                    }
                    guard follows else {
                        throw FormatError("text segment: posting \(number)'s key does not follow the one before it")
                    }
                }
                if shared + rest > keyCapacity {
                    keyCapacity = Swift.max(2 * keyCapacity, shared + rest)
                    let grown = UnsafeMutableRawPointer.allocate(byteCount: keyCapacity, alignment: 1)
                    grown.copyMemory(from: key, byteCount: shared)
                    key.deallocate()
                    key = grown
                }
                if let source = raw.baseAddress { (key + shared).copyMemory(from: source + at, byteCount: rest) }
                keyLength = shared + rest
                at += rest
                let stamp = Int(try Self.varint(raw, &at))
                guard stamp < stampCount else {
                    throw FormatError("text segment: posting \(number) names stamp \(stamp) of \(stampCount)")
                }
                if !used.isEmpty { used[stamp] = true }
                let length = Int(try Self.varint(raw, &at))
                guard length <= raw.count - at else {
                    throw FormatError("text segment: posting \(number)'s value of \(length) bytes runs past its end")
                }
                let value = UnsafeRawBufferPointer(rebasing: raw[at..<(at + length)])
                at += length
                try body(UnsafeRawBufferPointer(start: key, count: keyLength), stamp, value)
            }
            guard at == raw.count else {
                throw FormatError("text segment has \(raw.count - at) bytes after its last posting")
            }
        }
        guard !used.contains(false) else { throw FormatError("text segment lists a stamp no posting names") }
    }

    /// A varint at `at`, read without a call when it is one byte.
    @inline(__always)
    private static func varint(_ raw: UnsafeRawBufferPointer, _ at: inout Int) throws(FormatError) -> UInt64 {
        if at < raw.count, raw[at] < 0x80 {
            defer { at += 1 }
            return UInt64(raw[at])
        }
        return try Varint.read(raw, at: &at)
    }

    /// The bytes of a segment holding `postings` (keys strictly increasing, each stamp an index
    /// into `stamps`, stamps of 16 bytes in increasing order and each named by a posting, values
    /// layout-2 entry values).
    /// Throws when any of that does not hold: a segment is never written that would not read.
    static func encode(stamps: [[UInt8]], postings: [Posting]) throws(FormatError) -> [UInt8] {
        try encode(stamps: stamps, count: postings.count) { index, body throws(FormatError) in
            let posting = postings[index]
            try withBytes(posting.value) { value throws(FormatError) in try body(posting.key, posting.stamp, value) }
        }
    }

    /// ``encode(stamps:postings:)`` for `count` postings that `posting(i, body)` hands to `body`
    /// one at a time (key, stamp index, value), in order: what a write's arena of postings uses,
    /// without an array per posting.
    static func encode(
        stamps: [[UInt8]], count: Int,
        _ posting: (Int, ([UInt8], Int, UnsafeRawBufferPointer) throws(FormatError) -> Void) throws(FormatError) -> Void
    ) throws(FormatError) -> [UInt8] {
        var writer = TextSegmentWriter(validatingValues: true)
        try writer.begin(stamps: stamps, count: count)
        for index in 0..<count {
            try posting(index) { key, stamp, value throws(FormatError) in
                key.withUnsafeBytes { key in writer.append(key: key, stamp: stamp, value: value) }
            }
        }
        try writer.finish()
        return writer.bytes
    }
}

/// Writes segments (``TextSegment``'s layout) one after another into one reused buffer, a
/// posting at a time, with no closure and no array per posting: what a write's flush and a
/// merge use.
///
/// ```swift
/// var writer = TextSegmentWriter(validatingValues: false)
/// try writer.begin(stamps: [stamp], count: 1)
/// writer.append(key: key, stamp: 0, value: value)
/// try writer.finish()                     // writer.bytes (or withBytes): the segment
/// ```
///
/// ``append(key:stamp:value:)`` does not throw: the first fault it finds (keys not strictly
/// increasing, an empty key, a stamp out of range, a value that is not a layout-2 entry value when
/// `validatingValues`) is kept, and ``finish()`` throws it, so a segment that would not read is
/// never handed out.
struct TextSegmentWriter: ~Copyable {
    /// The segment being written, complete once ``finish()`` returns.
    private var out = ByteWriter(capacity: 4096)
    /// Whether each value is checked as a layout-2 entry value (off where the values were just
    /// read and checked, as in a merge).
    let validatingValues: Bool
    private var previous = ByteWriter(capacity: 64)
    private var expected = 0
    private var written = 0
    private var stampCount = 0
    private var restartsAt = 0
    private var postingsAt = 0
    /// Which stamps a posting names (one stamp, the usual case, is named by the first).
    private var used: [Bool] = []
    private var fault: FormatError?

    init(validatingValues: Bool) { self.validatingValues = validatingValues }

    /// The segment written, as an array.
    var bytes: [UInt8] { out.array }

    /// Calls `body` with the segment written (valid only during the call).
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { out.withBytes(body) }

    /// Starts a segment of `count` postings naming `stamps` (16 bytes each, in increasing order),
    /// emptying ``bytes``.
    mutating func begin(stamps: [[UInt8]], count: Int) throws(FormatError) {
        guard count > 0 else { throw FormatError("a text segment needs at least one posting") }
        guard !stamps.isEmpty, stamps.allSatisfy({ $0.count == TextSegment.stampLength }) else {
            throw FormatError("a text segment needs stamps of \(TextSegment.stampLength) bytes")
        }
        for (a, b) in zip(stamps, stamps.dropFirst()) where !a.lexicographicallyPrecedes(b) {
            throw FormatError("a text segment's stamps must be in increasing byte order")
        }
        out.removeAll()
        out.append(TextSegment.version)
        out.appendVarint(UInt64(count))
        out.appendVarint(UInt64(stamps.count))
        for stamp in stamps { out.append(stamp) }
        restartsAt = out.count
        out.appendZeros(4 * TextSegment.restartCount(of: count))
        postingsAt = out.count
        expected = count
        written = 0
        stampCount = stamps.count
        if stamps.count == 1 {
            used.removeAll()
        } else {
            used = [Bool](repeating: false, count: stamps.count)
        }
        previous.removeAll()
        fault = nil
    }

    /// Appends the next posting: its object key (greater than the one before), its stamp's index
    /// into the stamps given to ``begin(stamps:count:)``, and its value.
    mutating func append(key: UnsafeRawBufferPointer, stamp: Int, value: UnsafeRawBufferPointer) {
        guard fault == nil else { return }
        let index = written
        guard index < expected else { return fail("more postings than the \(expected) announced") }
        guard !key.isEmpty else { return fail("a text segment's keys are never empty") }
        // The bytes shared with the key before, and from them whether this key follows it: it
        // does when it is longer and starts with the whole of it, or its first differing byte
        // is larger. One pass, eight bytes at a time.
        let common = index == 0 ? 0 : previous.withBytes { Self.sharedPrefix(key, $0) }
        if index > 0 {
            let follows =
                common == previous.count
                ? key.count > common : common < key.count && key[common] > previous[common]
            guard follows else { return fail("a text segment's keys must strictly increase") }
        }
        guard stamp >= 0, stamp < stampCount else {
            return fail("posting \(index) names stamp \(stamp) of \(stampCount)")
        }
        if !used.isEmpty { used[stamp] = true }
        if validatingValues {
            do throws(FormatError) {
                try TextEntries.validate(value, layout: 2)
            } catch {
                fault = error
                return
            }
        }
        var shared = 0
        if index % TextSegment.restartInterval == 0 {
            guard out.count - postingsAt <= Int(UInt32.max) else { return fail("a text segment is limited to 4 GiB") }
            let offset = UInt32(truncatingIfNeeded: out.count - postingsAt)
            let at = restartsAt + 4 * (index / TextSegment.restartInterval)
            out[at] = UInt8(truncatingIfNeeded: offset >> 24)
            out[at + 1] = UInt8(truncatingIfNeeded: offset >> 16)
            out[at + 2] = UInt8(truncatingIfNeeded: offset >> 8)
            out[at + 3] = UInt8(truncatingIfNeeded: offset)
        } else {
            shared = common
        }
        out.appendVarint(UInt64(shared))
        out.appendVarint(UInt64(key.count - shared))
        out.append(UnsafeRawBufferPointer(rebasing: key[shared...]))
        out.appendVarint(UInt64(stamp))
        out.appendVarint(UInt64(value.count))
        out.append(value)
        previous.removeAll()
        previous.append(key)
        written += 1
    }

    /// Ends the segment: throws the first fault ``append(key:stamp:value:)`` met, or when fewer
    /// postings came than announced, or a stamp is named by none.
    mutating func finish() throws(FormatError) {
        if let fault { throw fault }
        guard written == expected else {
            throw FormatError("a text segment announced \(expected) postings and got \(written)")
        }
        guard !used.contains(false) else { throw FormatError("a text segment lists only stamps its postings name") }
    }

    private mutating func fail(_ reason: String) { fault = FormatError(reason) }

    /// How many leading bytes `a` and `b` share, compared eight at a time.
    @inline(__always)
    static func sharedPrefix(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let limit = Swift.min(a.count, b.count)
        guard limit > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return 0 }
        var at = 0
        while at + 8 <= limit {
            // Read as little-endian words, the first differing byte is the lowest differing one.
            let difference =
                UInt64(littleEndian: pa.loadUnaligned(fromByteOffset: at, as: UInt64.self))
                ^ UInt64(littleEndian: pb.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            if difference != 0 { return at + difference.trailingZeroBitCount >> 3 }
            at += 8
        }
        while at < limit, pa.load(fromByteOffset: at, as: UInt8.self) == pb.load(fromByteOffset: at, as: UInt8.self) {
            at += 1
        }
        return at
    }
}

/// Merging segments (`docs/FORMAT.md` §5c): the live postings of several
/// segments of one term, in key order, without those a tombstone cancels.
enum TextSegmentMerge {
    /// A posting's identity: its object key and its stamp (16 bytes).
    struct Identity: Hashable {
        var key: [UInt8]
        var stamp: [UInt8]

        /// The bytes hashed in two calls (an array's own hash takes one call per byte).
        func hash(into hasher: inout Hasher) {
            key.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(key.count)
            stamp.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// The live postings of `segments` (keys with their stamps and values), and the tombstones
    /// of `tombstones` that cancelled one of them (a merge deletes exactly those). Throws when
    /// two live postings have one key (each object has at most one live posting per term) or a
    /// segment does not read.
    static func merge(
        _ segments: [TextSegment], tombstones: Set<Identity>
    ) throws(FormatError) -> (postings: [(key: [UInt8], stamp: [UInt8], value: [UInt8])], used: Set<Identity>) {
        let merged = try MergedTermPostings(segments, tombstones: tombstones)
        let postings = (0..<merged.count).map { i in
            (key: Array(merged.key(i)), stamp: merged.stamp(i), value: Array(merged.value(i)))
        }
        return (postings, merged.usedTombstones)
    }
}

/// The keys of grouped postings (`docs/FORMAT.md` §5c), beside a text index's
/// single postings (`P tuple objectKey`, `P` the index prefix, the tuple the term's one binary
/// element as the index stores it):
///
/// ```
/// segment     P 31 tuple u8(tier) id(16)           value: a TextSegment
/// tombstone   P 32 tuple stamp(16) objectKey        value: empty
/// ```
///
/// An object whose postings are in segments names their stamp in its record header (layout 3,
/// ``RecordHeader/TextStamp``). The tags sort every single posting of an index before every
/// segment, and every segment before every tombstone.
enum GroupedPostingKeys {
    static let segmentTag: UInt8 = 0x31
    static let tombstoneTag: UInt8 = 0x32

    /// The key of segment `id` of tier `tier` of the term whose stored tuple is `tuple`.
    static func segmentKey(bucket: UInt32, index: UInt32, tuple: [UInt8], tier: UInt8, id: [UInt8]) -> [UInt8] {
        var key = segmentPrefix(bucket: bucket, index: index, tuple: tuple)
        key.append(tier)
        key.append(contentsOf: id)
        return key
    }

    /// Writes into `key` the key of the segment of `tuple`'s term whose id is `id` plus `plus`
    /// (the id read as a 128-bit big-endian number, wrapping).
    static func writeSegmentKey(
        bucket: UInt32, index: UInt32, tuple: [UInt8], tier: UInt8, id: [UInt8], plus: UInt64, into key: inout [UInt8]
    ) {
        key.removeAll(keepingCapacity: true)
        Keyspace.appendIndexPrefix(bucket: bucket, index: index, to: &key)
        key.append(segmentTag)
        key.append(contentsOf: tuple)
        key.append(tier)
        let idStart = key.count
        key.append(contentsOf: id)
        var carry = plus
        var at = key.count - 1
        while carry != 0, at >= idStart {
            let sum = UInt64(key[at]) + (carry & 0xFF)
            key[at] = UInt8(truncatingIfNeeded: sum)
            carry = (carry >> 8) + (sum >> 8)
            at -= 1
        }
    }

    /// The prefix of every segment key of one term.
    static func segmentPrefix(bucket: UInt32, index: UInt32, tuple: [UInt8]) -> [UInt8] {
        termPrefix(segmentTag, bucket: bucket, index: index, tuple: tuple)
    }

    /// `P tag tuple`: the prefix of one term's segment or tombstone keys.
    private static func termPrefix(_ tag: UInt8, bucket: UInt32, index: UInt32, tuple: [UInt8]) -> [UInt8] {
        var key = Keyspace.indexPrefix(bucket: bucket, index: index)
        key.append(tag)
        key.append(contentsOf: tuple)
        return key
    }

    /// Where the term's tuple ends in a segment or tombstone key of the index whose prefix is
    /// `prefixLength` bytes long (the tuple is one whole index element after the tag).
    static func tupleEnd(of key: [UInt8], prefixLength: Int) throws(FormatError) -> Int {
        try withBytes(key) { raw throws(FormatError) in
            prefixLength + 1 + (try ValueEncoding.elementLength(raw, at: prefixLength + 1))
        }
    }

    /// The key of the tombstone cancelling the posting of `objectKey` with stamp `stamp`.
    static func tombstoneKey(
        bucket: UInt32, index: UInt32, tuple: [UInt8], stamp: [UInt8], objectKey: [UInt8]
    ) -> [UInt8] {
        var key = tombstonePrefix(bucket: bucket, index: index, tuple: tuple)
        key.append(contentsOf: stamp)
        key.append(contentsOf: objectKey)
        return key
    }

    /// The prefix of every tombstone key of one term.
    static func tombstonePrefix(bucket: UInt32, index: UInt32, tuple: [UInt8]) -> [UInt8] {
        termPrefix(tombstoneTag, bucket: bucket, index: index, tuple: tuple)
    }

    /// The tier and id of a segment key of `tuple`'s term; throws unless the key is exactly that.
    static func parseSegmentKey(
        _ key: [UInt8], bucket: UInt32, index: UInt32, tuple: [UInt8]
    ) throws(FormatError) -> (tier: UInt8, id: [UInt8]) {
        let prefix = segmentPrefix(bucket: bucket, index: index, tuple: tuple)
        guard key.count == prefix.count + 1 + TextSegment.stampLength, key.starts(with: prefix) else {
            throw FormatError("text segment key of \(key.count) bytes is not one of this term")
        }
        return (key[prefix.count], Array(key[(prefix.count + 1)...]))
    }

    /// The stamp and object key of a tombstone key of `tuple`'s term; throws unless the key is
    /// exactly that (an object key is never empty).
    static func parseTombstoneKey(
        _ key: [UInt8], bucket: UInt32, index: UInt32, tuple: [UInt8]
    ) throws(FormatError) -> TextSegmentMerge.Identity {
        let prefix = tombstonePrefix(bucket: bucket, index: index, tuple: tuple)
        guard key.count > prefix.count + TextSegment.stampLength, key.starts(with: prefix) else {
            throw FormatError("text tombstone key of \(key.count) bytes is not one of this term")
        }
        let stampEnd = prefix.count + TextSegment.stampLength
        return .init(key: Array(key[stampEnd...]), stamp: Array(key[prefix.count..<stampEnd]))
    }
}
