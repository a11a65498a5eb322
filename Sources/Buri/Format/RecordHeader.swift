import BuriCodec

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The header in front of every record's payload (`docs/FORMAT.md`, "Record values"):
///
/// ```
/// u8      layout version (1, or 2 with derived entries)
/// u8      payload codec (1 = CBOR)
/// varint  schema version of the object
/// varint  number of index entries n
/// n ×     varint index id, varint tuple length L, L bytes of encoded value tuple
/// (layouts 2 and 3)
/// varint  number of derived indexes d (≥ 1 in layout 2)
/// d ×     varint index id, varint k, k × (varint length, bytes of a payload map key)
/// (layout 3 only)
/// varint  number of text stamps s (≥ 1)
/// s ×     varint index id, 16 bytes stamp, varint document length
/// …       payload
/// ```
///
/// It lets Buri delete or rebuild an object's index entries from what is stored, without decoding
/// the payload or knowing the Swift type. A relationship's entries are usually *derived*: the
/// header names the index and the payload path of its references instead of repeating them, and
/// every reader of the header computes them from the payload (the text strings at that path).
struct RecordHeader: Equatable, Sendable {
    static let layoutVersion: UInt8 = 1
    /// The layout whose header ends with derived indexes.
    static let derivedLayoutVersion: UInt8 = 2
    /// The layout whose header ends with text stamps: some of the object's text postings are in
    /// segments (`docs/FORMAT.md` §5c).
    static let stampedLayoutVersion: UInt8 = 3
    static let cborCodec: UInt8 = 1

    /// One index entry of the object: the index's id and the encoded value tuple.
    struct Entry: Hashable, Sendable {
        var index: UInt32
        var tuple: [UInt8]
    }

    /// An index whose entries are the distinct text strings at `path` in the payload, each as a
    /// one-element binary tuple (a relationship's references).
    struct Derived: Hashable, Sendable {
        var index: UInt32
        /// Payload map keys, as UTF-8 bytes; at least one.
        var path: [[UInt8]]
    }

    /// Where a text index's postings of the object are: in the segments a commit wrote, under
    /// its stamp (`docs/FORMAT.md` §5c), with the object's document length in that index.
    struct TextStamp: Hashable, Sendable {
        var index: UInt32
        /// 16 bytes.
        var stamp: [UInt8]
        var length: UInt64
    }

    var schemaVersion: UInt64
    /// Every entry of the object, derived ones included.
    var entries: [Entry]
    /// The indexes whose entries the stored header derives from the payload rather than lists.
    var derived: [Derived] = []
    /// The text indexes whose postings of this object are in segments (each index at most once);
    /// the others' postings are single entries.
    var textStamps: [TextStamp] = []

    init(schemaVersion: UInt64, entries: [Entry], derived: [Derived] = [], textStamps: [TextStamp] = []) {
        self.schemaVersion = schemaVersion
        self.entries = entries
        self.derived = derived
        self.textStamps = textStamps
    }

    /// The stamp of text index `index`'s postings, when they are in segments.
    func textStamp(of index: UInt32) -> TextStamp? {
        textStamps.isEmpty ? nil : textStamps.first { $0.index == index }
    }

    /// Appends the header's bytes (`docs/FORMAT.md` §4) to `out`.
    func append(to out: inout [UInt8]) {
        var writer = ByteWriter(capacity: 16 + 8 * entries.count)
        write(to: &writer)
        writer.withBytes { out.append(contentsOf: $0) }
    }

    /// Writes the header's bytes (`docs/FORMAT.md` §4) to `out`: the one encoder of headers (the
    /// write path serializes each record's value into a ByteWriter the batch reuses).
    func write(to out: inout ByteWriter) {
        let layout =
            !textStamps.isEmpty
            ? RecordHeader.stampedLayoutVersion
            : derived.isEmpty ? RecordHeader.layoutVersion : RecordHeader.derivedLayoutVersion
        out.append(layout)
        out.append(RecordHeader.cborCodec)
        out.appendVarint(schemaVersion)
        if derived.isEmpty {
            out.appendVarint(UInt64(entries.count))
            for index in entries.indices { Self.write(entries[index], to: &out) }
        } else {
            let listed = entries.filter { entry in !derived.contains { $0.index == entry.index } }
            out.appendVarint(UInt64(listed.count))
            for entry in listed { Self.write(entry, to: &out) }
        }
        guard layout != RecordHeader.layoutVersion else { return }
        out.appendVarint(UInt64(derived.count))
        for index in derived {
            out.appendVarint(UInt64(index.index))
            out.appendVarint(UInt64(index.path.count))
            for field in index.path {
                out.appendVarint(UInt64(field.count))
                out.append(field)
            }
        }
        guard layout == RecordHeader.stampedLayoutVersion else { return }
        out.appendVarint(UInt64(textStamps.count))
        for stamp in textStamps {
            out.appendVarint(UInt64(stamp.index))
            out.append(stamp.stamp)
            out.appendVarint(stamp.length)
        }
    }

    @inline(__always)
    private static func write(_ entry: Entry, to out: inout ByteWriter) {
        out.appendVarint(UInt64(entry.index))
        out.appendVarint(UInt64(entry.tuple.count))
        out.append(entry.tuple)
    }

    /// The offset where the payload of `value` starts, after checking the header exactly as
    /// ``parse(_:)`` does but without building it: reading an object needs only its payload, and
    /// this allocates nothing. (Derived entries are not computed: their payload is read when the
    /// entries are.)
    static func payloadOffset(_ value: UnsafeRawBufferPointer) throws(FormatError) -> Int {
        try walk(value, collectingDerived: false) { _, _, _ in }.payloadOffset
    }

    /// Validates the header at the front of `value`; returns its schema version and where the payload starts.
    static func versionAndPayloadOffset(
        _ value: UnsafeRawBufferPointer
    ) throws(FormatError)
        -> (schemaVersion: UInt64, payloadOffset: Int)
    {
        let walked = try walk(value, collectingDerived: false) { _, _, _ in }
        return (walked.schemaVersion, walked.payloadOffset)
    }

    /// Parses the header at the front of `value`, derived entries computed from the payload;
    /// returns it and the offset where the payload starts.
    static func parse(_ value: UnsafeRawBufferPointer) throws(FormatError) -> (RecordHeader, payloadOffset: Int) {
        var entries: [Entry] = []
        let walked = try walk(value) { count, index, tuple in
            if entries.isEmpty { entries.reserveCapacity(count) }
            entries.append(Entry(index: index, tuple: Array(value[tuple])))
        }
        for index in walked.derived {
            for tuple in try derivedTuples(value, payloadOffset: walked.payloadOffset, index) {
                entries.append(Entry(index: index.index, tuple: tuple))
            }
        }
        return (
            RecordHeader(
                schemaVersion: walked.schemaVersion, entries: entries, derived: walked.derived,
                textStamps: walked.stamps),
            walked.payloadOffset
        )
    }

    /// Validates the header at the front of `value` and calls `visit(indexId, tuple)` for each
    /// entry, derived ones included (aggregates read every matching record's entries this way);
    /// returns what ``versionAndPayloadOffset(_:)`` does.
    @discardableResult
    static func forEachEntry(
        _ value: UnsafeRawBufferPointer, _ visit: (UInt32, UnsafeRawBufferPointer) -> Void
    ) throws(FormatError) -> (schemaVersion: UInt64, payloadOffset: Int) {
        let walked = try walk(value) { _, index, tuple in visit(index, UnsafeRawBufferPointer(rebasing: value[tuple])) }
        for index in walked.derived {
            for tuple in try derivedTuples(value, payloadOffset: walked.payloadOffset, index) {
                tuple.withUnsafeBytes { visit(index.index, $0) }
            }
        }
        return (walked.schemaVersion, walked.payloadOffset)
    }

    /// Validates the header at the front of `value` and calls `visit(indexId, tupleRange)` for each
    /// entry it *lists* (not the derived ones); returns the derived indexes too. What an in-place
    /// edit of the header needs: the listed entries' byte ranges.
    static func forEachListedEntry(
        _ value: UnsafeRawBufferPointer, _ visit: (UInt32, Range<Int>) -> Void
    ) throws(FormatError) -> (schemaVersion: UInt64, payloadOffset: Int, derived: [Derived]) {
        let walked = try walk(value) { _, index, tuple in visit(index, tuple) }
        return (walked.schemaVersion, walked.payloadOffset, walked.derived)
    }

    /// The tuples of derived index `index`: the distinct text strings at its path in the payload,
    /// first occurrences in order, each as a binary element. A payload whose path holds anything
    /// else was not written by Buri (a writer derives an index only when this gives its entries).
    static func derivedTuples(
        _ value: UnsafeRawBufferPointer, payloadOffset: Int, _ index: Derived
    ) throws(FormatError) -> [[UInt8]] {
        do {
            return try derivedTuples(
                payload: UnsafeRawBufferPointer(rebasing: value[payloadOffset...]), path: index.path)
        } catch {
            throw FormatError("derived index \(index.index): \(error.description)")
        }
    }

    /// The tuples a derived index with `path` has in `payload` (see
    /// ``derivedTuples(_:payloadOffset:_:)``).
    static func derivedTuples(payload: UnsafeRawBufferPointer, path: [[UInt8]]) throws(FormatError) -> [[UInt8]] {
        let found: CBORFieldTexts.Found
        do {
            found = try CBORFieldTexts.texts(at: path, in: payload)
        } catch {
            throw FormatError("the payload at \(describe(path)) is malformed: \(error)")
        }
        guard case .texts(let ranges) = found else {
            throw FormatError("the payload at \(describe(path)) is not text strings")
        }
        var tuples: [[UInt8]] = []
        tuples.reserveCapacity(ranges.count)
        var seen = Set<[UInt8]>(minimumCapacity: ranges.count > 1 ? ranges.count : 0)
        for range in ranges {
            var tuple: [UInt8] = []
            tuple.reserveCapacity(range.count + 3)
            ValueEncoding.appendBinary(payload[range], to: &tuple)
            guard tuple.count <= Keyspace.maxTupleLength else {
                throw FormatError("a value at \(describe(path)) of \(tuple.count) bytes encoded is over the limit")
            }
            if ranges.count == 1 || seen.insert(tuple).inserted { tuples.append(tuple) }
        }
        return tuples
    }

    /// A derived path as text for messages: `songs`, `album.tracks`.
    static func describe(_ path: [[UInt8]]) -> String {
        path.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }

    /// A varint, read here without a call when it is one byte (index ids and tuple lengths under 128).
    @inline(__always)
    private static func readVarint(_ value: UnsafeRawBufferPointer, at offset: inout Int) throws(FormatError) -> UInt64
    {
        if offset < value.count, value[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(value[offset])
        }
        return try Varint.read(value, at: &offset)
    }

    /// Whether `value[start..<end]` is one byte-string element holding no 0x00 byte: its code,
    /// its bytes, its end mark 0x00 0x00. (False says only "not this form": the general walk
    /// then checks it.)
    @inline(__always)
    private static func isPlainBinaryElement(_ value: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        guard end - start >= 3, value[start] == ValueEncoding.binaryCode, value[end - 1] == 0, value[end - 2] == 0,
            let base = value.baseAddress
        else { return false }
        return memchr(base + start + 1, 0, end - 2 - (start + 1)) == nil
    }

    /// Validates the header at the front of `value`, calling `visit(entryCount, indexId, tupleRange)`
    /// for each listed entry; the one definition of the header's layout that every reader shares.
    /// With `collectingDerived` false the derived indexes are validated but not returned (nor
    /// checked against the listed entries' ids), which allocates nothing.
    @inline(__always)
    private static func walk(
        _ value: UnsafeRawBufferPointer, collectingDerived: Bool = true,
        _ visit: (Int, UInt32, Range<Int>) -> Void
    ) throws(FormatError) -> (schemaVersion: UInt64, payloadOffset: Int, derived: [Derived], stamps: [TextStamp]) {
        guard value.count >= 2 else { throw FormatError("record of \(value.count) bytes is shorter than its header") }
        let layout = value[0]
        guard layout == layoutVersion || layout == derivedLayoutVersion || layout == stampedLayoutVersion else {
            throw FormatError(
                "record layout version \(layout) is not supported (this Buri reads versions \(layoutVersion) to \(stampedLayoutVersion))"
            )
        }
        guard value[1] == cborCodec else { throw FormatError("record payload codec \(value[1]) is unknown") }
        var offset = 2
        let schema = try Varint.read(value, at: &offset)
        let count = try Varint.read(value, at: &offset)
        // Each entry takes at least two bytes, which bounds the count before anything is allocated.
        guard count <= UInt64(value.count - offset) / 2 else {
            throw FormatError("record header claims \(count) index entries")
        }
        var listed: [UInt32] = []
        for _ in 0..<count {
            let index = try readVarint(value, at: &offset)
            let length = try readVarint(value, at: &offset)
            guard index <= UInt64(UInt32.max) else { throw FormatError("index id \(index) out of range") }
            guard length <= UInt64(value.count - offset) else {
                throw FormatError("index value of \(length) bytes runs past the record")
            }
            let end = offset + Int(length)
            // Each tuple must be a well-formed sequence of elements. The usual one, a single byte
            // string without NUL (a reference, a binary value), is recognized in one memchr: its
            // code, then no 0x00 before its end mark (0x00 0x00) at the tuple's end.
            if !isPlainBinaryElement(value, offset, end) {
                var check = offset
                while check < end { check += try ValueEncoding.elementLength(value, at: check) }
                guard check == end else { throw FormatError("index value tuple is malformed") }
            }
            visit(Int(count), UInt32(index), offset..<end)
            if collectingDerived, layout != layoutVersion { listed.append(UInt32(index)) }
            offset = end
        }
        guard layout != layoutVersion else { return (schema, offset, [], []) }
        let derivedCount = try Varint.read(value, at: &offset)
        // A derived index takes at least three bytes (id, path length, one key length).
        guard derivedCount >= (layout == derivedLayoutVersion ? 1 : 0),
            derivedCount <= UInt64(value.count - offset) / 3
        else {
            throw FormatError("record header claims \(derivedCount) derived indexes")
        }
        var derived: [Derived] = []
        if collectingDerived { derived.reserveCapacity(Int(derivedCount)) }
        for _ in 0..<derivedCount {
            let index = try readVarint(value, at: &offset)
            guard index <= UInt64(UInt32.max) else { throw FormatError("derived index id \(index) out of range") }
            let depth = try readVarint(value, at: &offset)
            guard depth >= 1, depth <= UInt64(value.count - offset) else {
                throw FormatError("derived index \(index) claims a path of \(depth) keys")
            }
            var path: [[UInt8]] = []
            for _ in 0..<depth {
                let length = try readVarint(value, at: &offset)
                guard length <= UInt64(value.count - offset) else {
                    throw FormatError("a path key of \(length) bytes runs past the record")
                }
                if collectingDerived { path.append(Array(value[offset..<(offset + Int(length))])) }
                offset += Int(length)
            }
            guard collectingDerived else { continue }
            guard !derived.contains(where: { $0.index == UInt32(index) }) else {
                throw FormatError("derived index \(index) is named twice")
            }
            guard !listed.contains(UInt32(index)) else {
                throw FormatError("derived index \(index) also has entries listed in the header")
            }
            derived.append(Derived(index: UInt32(index), path: path))
        }
        guard layout == stampedLayoutVersion else { return (schema, offset, derived, []) }
        let stampCount = try Varint.read(value, at: &offset)
        // A stamp takes at least 18 bytes (id, 16 stamp bytes, length).
        guard stampCount >= 1, stampCount <= UInt64(value.count - offset) / 18 else {
            throw FormatError("record header claims \(stampCount) text stamps")
        }
        var stamps: [TextStamp] = []
        if collectingDerived { stamps.reserveCapacity(Int(stampCount)) }
        for _ in 0..<stampCount {
            let index = try readVarint(value, at: &offset)
            guard index <= UInt64(UInt32.max) else { throw FormatError("text stamp index id \(index) out of range") }
            guard value.count - offset >= TextSegment.stampLength else {
                throw FormatError("a text stamp runs past the record")
            }
            let stamp = Array(value[offset..<(offset + TextSegment.stampLength)])
            offset += TextSegment.stampLength
            let length = try Varint.read(value, at: &offset)
            guard collectingDerived else { continue }
            guard !stamps.contains(where: { $0.index == UInt32(index) }) else {
                throw FormatError("text index \(index) has two stamps")
            }
            stamps.append(TextStamp(index: UInt32(index), stamp: stamp, length: length))
        }
        return (schema, offset, derived, stamps)
    }
}
