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
/// u8      layout version (1)
/// u8      payload codec (1 = CBOR)
/// varint  schema version of the object
/// varint  number of index entries n
/// n ×     varint index id, varint tuple length L, L bytes of encoded value tuple
/// …       payload
/// ```
///
/// It lets Buri delete or rebuild an object's index entries from what is stored, without decoding
/// the payload or knowing the Swift type.
struct RecordHeader: Equatable, Sendable {
    static let layoutVersion: UInt8 = 1
    static let cborCodec: UInt8 = 1

    /// One index entry of the object: the index's id and the encoded value tuple.
    struct Entry: Hashable, Sendable {
        var index: UInt32
        var tuple: [UInt8]
    }

    var schemaVersion: UInt64
    var entries: [Entry]

    func append(to out: inout [UInt8]) {
        out.append(RecordHeader.layoutVersion)
        out.append(RecordHeader.cborCodec)
        Varint.append(schemaVersion, to: &out)
        Varint.append(UInt64(entries.count), to: &out)
        for entry in entries {
            Varint.append(UInt64(entry.index), to: &out)
            Varint.append(UInt64(entry.tuple.count), to: &out)
            out.append(contentsOf: entry.tuple)
        }
    }

    /// The offset where the payload of `value` starts, after checking the header exactly as
    /// ``parse(_:)`` does but without building it: reading an object needs only its payload, and
    /// this allocates nothing.
    static func payloadOffset(_ value: UnsafeRawBufferPointer) throws(FormatError) -> Int {
        try walk(value) { _, _, _ in }.payloadOffset
    }

    /// Validates the header at the front of `value`; returns its schema version and where the payload starts.
    static func versionAndPayloadOffset(
        _ value: UnsafeRawBufferPointer
    ) throws(FormatError)
        -> (schemaVersion: UInt64, payloadOffset: Int)
    {
        try walk(value) { _, _, _ in }
    }

    /// Parses the header at the front of `value`; returns it and the offset where the payload starts.
    static func parse(_ value: UnsafeRawBufferPointer) throws(FormatError) -> (RecordHeader, payloadOffset: Int) {
        var entries: [Entry] = []
        let (schema, offset) = try walk(value) { count, index, tuple in
            if entries.isEmpty { entries.reserveCapacity(count) }
            entries.append(Entry(index: index, tuple: Array(value[tuple])))
        }
        return (RecordHeader(schemaVersion: schema, entries: entries), offset)
    }

    /// Validates the header at the front of `value` and calls `visit(indexId, tupleRange)` for
    /// each entry, building nothing (aggregates read every matching record's entries this way);
    /// returns what ``versionAndPayloadOffset(_:)`` does.
    @discardableResult
    static func forEachEntry(
        _ value: UnsafeRawBufferPointer, _ visit: (UInt32, Range<Int>) -> Void
    ) throws(FormatError) -> (schemaVersion: UInt64, payloadOffset: Int) {
        try walk(value) { _, index, tuple in visit(index, tuple) }
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
    /// for each entry; the one definition of the header's layout that both readers share.
    @inline(__always)
    private static func walk(
        _ value: UnsafeRawBufferPointer,
        _ visit: (Int, UInt32, Range<Int>) -> Void
    ) throws(FormatError) -> (schemaVersion: UInt64, payloadOffset: Int) {
        guard value.count >= 2 else { throw FormatError("record of \(value.count) bytes is shorter than its header") }
        guard value[0] == layoutVersion else {
            throw FormatError(
                "record layout version \(value[0]) is not supported (this Buri reads version \(layoutVersion))")
        }
        guard value[1] == cborCodec else { throw FormatError("record payload codec \(value[1]) is unknown") }
        var offset = 2
        let schema = try Varint.read(value, at: &offset)
        let count = try Varint.read(value, at: &offset)
        // Each entry takes at least two bytes, which bounds the count before anything is allocated.
        guard count <= UInt64(value.count - offset) / 2 else {
            throw FormatError("record header claims \(count) index entries")
        }
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
            offset = end
        }
        return (schema, offset)
    }
}
