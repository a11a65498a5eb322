import BuriStorage

/// The one place that builds and parses LevelDB keys and fixed values, following
/// `docs/FORMAT.md` byte for byte. Nothing else in Buri assembles a key by hand.
///
/// Every key starts with a one-byte tag naming its space:
///
/// | tag  | space          | rest of the key                                              | value                 |
/// |------|----------------|--------------------------------------------------------------|-----------------------|
/// | 0x00 | database       | ASCII `format`                                               | database header       |
/// | 0x01 | bucket catalog | bucket name, UTF-8                                           | bucket descriptor (CBOR) |
/// | 0x02 | records        | bucket id (u32 BE), object key (UTF-8)                       | record (header + CBOR) |
/// | 0x03 | index entries  | bucket id (u32 BE), index id (u32 BE), value tuple, object key | empty                 |
/// | 0x04 | retired ids    | bucket id (u32 BE)                                           | state byte, bucket name (v3) |
/// | 0x05 | object counts  | bucket id (u32 BE)                                           | u64 BE (v4)           |
/// | 0x06 | named values   | value name (UTF-8)                                           | CBOR (v5)             |
///
/// Buckets and indexes are named by fixed-width numeric ids, so no name, however spelled,
/// can reach into another bucket's or index's keys.
enum Keyspace {
    static let databaseTag: UInt8 = 0x00
    static let catalogTag: UInt8 = 0x01
    static let recordTag: UInt8 = 0x02
    static let indexTag: UInt8 = 0x03
    static let retiredTag: UInt8 = 0x04
    static let countTag: UInt8 = 0x05
    static let valueTag: UInt8 = 0x06

    /// The current format version, written at creation (and by the first write to a database of
    /// an older version) and checked at every open. Version 2 writes `Date`s as RFC 8949 tag 1 and
    /// records where tools read index values (`fieldForms`, `computed`); version 3 adds the retired
    /// bucket ids (tag 0x04) of bucket generations; version 4 keeps each bucket id's exact object
    /// count (tag 0x05), which older code would not update; version 5 keeps the largest bucket id
    /// ever given (``bucketIdsKey``), so that no id is given twice, which older code would not
    /// update either, and the named values (tag 0x06), which older code would take for stray keys;
    /// version 6 adds text indexes (catalog `text`), whose entries carry the term's positions as
    /// their value, which older code would write empty; version 7 gives new text indexes entry
    /// layout 2 (the document's length before the positions) and keeps each one's token total
    /// (tag 0x05, under the bucket's count), which older code would not update; version 8 adds
    /// encryption at rest (``encryptionKey``, sealed record and named values, index values stored
    /// as keyed tokens), which older code would take for damage; version 9 adds the online
    /// encryption of a plaintext database (``encryptionStateKey``: plaintext records beside sealed
    /// ones while it runs) and encryption headers that wrap a data key (so the key can change),
    /// which older code would refuse as damage; version 10 adds record headers of layout 2, which
    /// derive a relationship's entries from the payload instead of listing them, and which older
    /// code would refuse as damage; version 11 adds sealed values padded for LevelDB's block
    /// compression (markers 0xE9 and 0xEA), which older code would report as damaged; version 12
    /// adds staging markers that name their owner on a shared engine (state 0x03) and the lease
    /// keys they name (``leaseKey(_:)``), which older code would refuse as damage; version 13
    /// adds a text index's grouped postings (segments and tombstones, tags 0x31 and 0x32 after
    /// the index prefix) and record headers of layout 3 that name the stamps of an object's
    /// postings in segments, which older code would take for stray entries and a damaged header.
    /// Versions 1 to 12 databases are read.
    static let formatVersion: UInt16 = 13
    /// The first version whose writers keep the object counts (tag 0x05).
    static let countsVersion: UInt16 = 4
    static let magic: [UInt8] = Array("BURI".utf8)
    static let headerKey: [UInt8] = [databaseTag] + Array("format".utf8)
    /// `00 "bucket-ids"` (format 5): the largest bucket id ever given to a bucket, a generation or
    /// a stage, as u32be. A purged id leaves no other trace, and a client of a shared engine that
    /// gave it again would make another client's handles read a different bucket as theirs.
    static let bucketIdsKey: [UInt8] = [databaseTag] + Array("bucket-ids".utf8)
    /// `00 "encryption"` (format 8): an encrypted database's encryption header (salts, passphrase
    /// cost, and the data key wrapped under the user's key, or in version 1 a key check;
    /// `docs/FORMAT.md` §4a), written in the commit that creates the database or changes its key.
    static let encryptionKey: [UInt8] = [databaseTag] + Array("encryption".utf8)
    /// `00 "encrypting"` (format 9): present while a database that was plaintext is being encrypted
    /// online (`docs/FORMAT.md` §4a). Its value is the largest bucket id given before encryption
    /// began (u32be, as ``bucketIdsKey``): buckets of ids up to it may still hold plaintext records
    /// and index values until they are copied into a new, sealed generation, and named values may
    /// be plaintext. Every id given later is sealed from its first write.
    static let encryptionStateKey: [UInt8] = [databaseTag] + Array("encrypting".utf8)

    /// Whether the value stored under `key` is sealed in an encrypted database: records (0x02)
    /// and named values (0x06). Everything else (the catalog, counts, index entries) is stored as
    /// it is, and holds index values as keyed tokens where they are private.
    /// How an encryption header starts (`docs/FORMAT.md` §4a).
    static let encryptionHeaderMagic: [UInt8] = Array("BURIKEY".utf8)
    /// The fewest bytes a sealed value has: its marker, session id and counter, and tag (§4a).
    static let sealedOverhead = 41

    /// Whether `value` has the form of a sealed value (its marker, and room for its nonce and tag),
    /// for readers without the key: only the key can tell whether it is authentic.
    static func looksSealed(_ value: [UInt8]) -> Bool {
        guard let first = value.first, isSealedValueMarker(first) else { return false }
        let generation = first & ~paddedSealedValueFlag == rotatedSealedValueMarker ? 4 : 0
        let trailer = first & paddedSealedValueFlag != 0 ? 2 : 0
        return value.count >= sealedOverhead + generation + trailer
    }

    @inline(__always)
    static func isSealed(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let tag = key.first else { return false }
        return tag == recordTag || tag == valueTag
    }

    static func bucketIdsValue(_ id: UInt32) -> [UInt8] {
        [UInt8(id >> 24), UInt8((id >> 16) & 0xFF), UInt8((id >> 8) & 0xFF), UInt8(id & 0xFF)]
    }

    /// The id in a ``bucketIdsKey`` value, or `nil` unless it is exactly 4 bytes.
    static func parseBucketIds(_ value: [UInt8]) -> UInt32? {
        value.count == 4 ? value.reduce(0) { $0 << 8 | UInt32($1) } : nil
    }

    /// Object keys are limited so that index keys stay small enough for LevelDB to handle well.
    static let maxObjectKeyLength = 4096
    /// Encoded index value tuples are limited for the same reason.
    static let maxTupleLength = 65536

    // MARK: Database header

    /// `BURI` then the format version as u16 BE.
    static func headerValue(version: UInt16 = formatVersion) -> [UInt8] {
        magic + [UInt8(version >> 8), UInt8(version & 0xFF)]
    }

    /// The format version in a header value, or `nil` if the value is not a Buri header
    /// (`docs/FORMAT.md` §4): it must start with `BURI` and a version ≥ 1; a version this reader
    /// knows (1 … ``formatVersion``) has a header of exactly 6 bytes. A newer version is returned
    /// whatever follows it (a later format may lengthen the header), so the opener refuses it as
    /// `unsupportedFormat` rather than as a foreign database.
    static func parseHeader(_ value: [UInt8]) -> UInt16? {
        guard value.count >= 6, Array(value[0..<4]) == magic else { return nil }
        let version = UInt16(value[4]) << 8 | UInt16(value[5])
        if version == 0 { return nil }
        if version <= formatVersion, value.count != 6 { return nil }
        return version
    }

    // MARK: Catalog

    static func catalogKey(bucket name: String) -> [UInt8] {
        var key: [UInt8] = [catalogTag]
        key.append(contentsOf: name.utf8)
        return key
    }

    static let catalogRange = KeyRange.prefix([catalogTag])

    static func bucketName(fromCatalogKey key: [UInt8]) -> String? {
        guard key.first == catalogTag else { return nil }
        return String(validating: key.dropFirst(), as: UTF8.self)
    }

    /// The space a key belongs to, for routing committed changes (see ``ParsedCommit``).
    enum Space: Equatable {
        case record(bucket: UInt32)
        case index(bucket: UInt32)
        case catalog
        case retired
        case value
        case other
    }

    /// Which space `key` is in, and for records and index entries the bucket id: from the tag and
    /// the u32 BE bucket id after it.
    @inline(__always)
    static func classify(_ key: [UInt8]) -> Space {
        guard let tag = key.first else { return .other }
        switch tag {
        case recordTag where key.count >= recordPrefixLength:
            return .record(bucket: UInt32(key[1]) << 24 | UInt32(key[2]) << 16 | UInt32(key[3]) << 8 | UInt32(key[4]))
        case indexTag where key.count >= recordPrefixLength:
            return .index(bucket: UInt32(key[1]) << 24 | UInt32(key[2]) << 16 | UInt32(key[3]) << 8 | UInt32(key[4]))
        case catalogTag:
            return .catalog
        case retiredTag:
            return .retired
        case valueTag:
            return .value
        default:
            return .other
        }
    }

    static func isCatalogKey(_ key: [UInt8]) -> Bool { key.first == catalogTag }

    // MARK: Records

    @inline(__always)
    static func appendBigEndian(_ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: value >> 24))
        out.append(UInt8(truncatingIfNeeded: value >> 16))
        out.append(UInt8(truncatingIfNeeded: value >> 8))
        out.append(UInt8(truncatingIfNeeded: value))
    }

    static func readBigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    /// `0x02` + bucket id: the prefix of every record of a bucket.
    static func recordPrefix(bucket: UInt32) -> [UInt8] {
        var key: [UInt8] = [recordTag]
        appendBigEndian(bucket, to: &key)
        return key
    }

    static let recordPrefixLength = 5

    @inline(__always)
    static func recordKey(bucket: UInt32, key: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(recordPrefixLength + key.utf8.count)
        writeRecordKey(bucket: bucket, key: key, into: &out)
        return out
    }

    /// Writes the record key of `key` in `bucket` into `out`, replacing its contents (a buffer a
    /// batch's writes share).
    @inline(__always)
    static func writeRecordKey(bucket: UInt32, key: String, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        out.append(recordTag)
        appendBigEndian(bucket, to: &out)
        out.append(contentsOf: key.utf8)
    }

    /// The object key of a record key of `bucket`.
    static func objectKey(fromRecordKey key: UnsafeRawBufferPointer) throws(FormatError) -> String {
        guard key.count > recordPrefixLength, key[0] == recordTag else {
            throw FormatError("record key of \(key.count) bytes is not a record key")
        }
        guard let string = String(validating: key[recordPrefixLength...], as: UTF8.self) else {
            throw FormatError("record key holds an object key that is not valid UTF-8")
        }
        return string
    }

    /// The bucket id and object key of a record key, or `nil` if `key` is not a record key with a
    /// UTF-8 object key (for naming objects found in raw storage, such as a damaged log record).
    static func bucketAndObjectKey(ofRecordKey key: [UInt8]) -> (bucket: UInt32, key: String)? {
        key.withUnsafeBytes { raw in
            guard let objectKey = try? objectKey(fromRecordKey: raw) else { return nil }
            return (readBigEndian(raw, at: 1), objectKey)
        }
    }

    // MARK: Retired bucket ids

    /// What a retired-id marker (tag 0x04) says about the keys under its bucket id.
    enum RetiredState: UInt8, Sendable {
        /// A generation replaced (`deleteAll`): its records and entries are purged in the background.
        case purging = 0x01
        /// A generation being loaded and not yet published (a staged import): purged if the load
        /// never publishes it.
        case staging = 0x02
    }

    /// The state byte of a staging marker that names its owner (format 12): a client of a shared
    /// engine, by the lease whose key (``leaseKey(_:)``) exists while that client lives.
    static let ownedStagingState: UInt8 = 0x03

    /// `00 "lease" u64be(id)` (format 12): present while the client holding lease `id` of a shared
    /// engine lives (the engine deletes it when the lease ends); its value is empty. A stage whose
    /// marker names a lease whose key is gone belongs to a client that died: another client may
    /// purge it, or take it up (online encryption).
    static func leaseKey(_ id: UInt64) -> [UInt8] {
        var key = leasePrefix
        for shift in stride(from: 56, through: 0, by: -8) { key.append(UInt8(truncatingIfNeeded: id >> UInt64(shift))) }
        return key
    }

    static let leasePrefix: [UInt8] = [databaseTag] + Array("lease".utf8)

    /// Whether `key` is a ``leaseKey(_:)``.
    static func isLeaseKey(_ key: [UInt8]) -> Bool {
        key.count == leasePrefix.count + 8 && key.starts(with: leasePrefix)
    }

    /// `0x04` + bucket id: the marker that keys under `bucket` belong to no catalog entry on purpose.
    static func retiredKey(bucket: UInt32) -> [UInt8] {
        var key: [UInt8] = [retiredTag]
        appendBigEndian(bucket, to: &key)
        return key
    }

    static let retiredRange = KeyRange.prefix([retiredTag])

    /// The state byte, then the UTF-8 name of the bucket the id belonged (or will belong) to; a
    /// staging marker with an `owner` (a shared engine's lease id, format 12) has the state byte
    /// ``ownedStagingState`` and the owner as u64be before the name.
    static func retiredValue(_ state: RetiredState, bucket name: String, owner: UInt64? = nil) -> [UInt8] {
        guard state == .staging, let owner else { return [state.rawValue] + Array(name.utf8) }
        var value: [UInt8] = [ownedStagingState]
        for shift in stride(from: 56, through: 0, by: -8) {
            value.append(UInt8(truncatingIfNeeded: owner >> UInt64(shift)))
        }
        return value + Array(name.utf8)
    }

    /// The bucket id of a marker key and its state, bucket name and owner (a staging marker's, on
    /// a shared engine), or `nil` if they do not parse (an owner of 0 does not).
    static func parseRetired(
        key: [UInt8], value: [UInt8]
    ) -> (bucket: UInt32, state: RetiredState, name: String, owner: UInt64?)? {
        guard key.count == 5, key[0] == retiredTag, let first = value.first else { return nil }
        let bucket = key.withUnsafeBytes { readBigEndian($0, at: 1) }
        if first == ownedStagingState {
            guard value.count >= 9 else { return nil }
            let owner = value[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard owner != 0, let name = String(validating: value.dropFirst(9), as: UTF8.self) else { return nil }
            return (bucket, .staging, name, owner)
        }
        guard let state = RetiredState(rawValue: first), let name = String(validating: value.dropFirst(), as: UTF8.self)
        else { return nil }
        return (bucket, state, name, nil)
    }

    // MARK: Object counts

    /// `0x05` + bucket id: the key of the exact number of records under the id (format 4).
    static func countKey(bucket: UInt32) -> [UInt8] {
        var key: [UInt8] = [countTag]
        appendBigEndian(bucket, to: &key)
        return key
    }

    static let countRange = KeyRange.prefix([countTag])

    /// A count as stored: u64, big-endian, always 8 bytes.
    static func countValue(_ count: Int) -> [UInt8] {
        let value = UInt64(max(0, count))
        return (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// The count a stored value holds, or `nil` if it is not 8 bytes or is beyond `Int.max`.
    static func parseCount(_ value: [UInt8]) -> Int? {
        guard value.count == 8 else { return nil }
        let number = value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return number <= UInt64(Int.max) ? Int(number) : nil
    }

    /// The bucket id of a count key, or `nil` if `key` is not one.
    static func bucket(ofCountKey key: [UInt8]) -> UInt32? {
        guard key.count == 5, key[0] == countTag else { return nil }
        return key.withUnsafeBytes { readBigEndian($0, at: 1) }
    }

    /// `0x05` + bucket id + index id: the key of a text index's token total, the sum of its
    /// objects' document lengths (format 7, layout-2 text indexes; `docs/FORMAT.md` §6b). Under
    /// the bucket id's count key, so whatever removes an id's count range removes it too.
    static func textTotalKey(bucket: UInt32, index: UInt32) -> [UInt8] {
        var key = countKey(bucket: bucket)
        appendBigEndian(index, to: &key)
        return key
    }

    /// The token-total keys of every text index of bucket id `bucket` (not its object count).
    static func textTotalRange(bucket: UInt32) -> KeyRange {
        let count = countKey(bucket: bucket)
        return KeyRange(start: count + [0], end: KeyRange.successor(ofPrefix: count))
    }

    /// The bucket and index ids of a token-total key, or `nil` if `key` is not one.
    static func ids(ofTextTotalKey key: [UInt8]) -> (bucket: UInt32, index: UInt32)? {
        guard key.count == 9, key[0] == countTag else { return nil }
        return key.withUnsafeBytes { (readBigEndian($0, at: 1), readBigEndian($0, at: 5)) }
    }

    // MARK: Named values

    /// Names of named values are limited like bucket names.
    static let maxValueNameLength = 1024

    /// `0x06` + the name's UTF-8 bytes: the key of a named value (format 5), whose value is the
    /// CBOR encoding of the value.
    static func valueKey(name: String) -> [UInt8] {
        var key: [UInt8] = [valueTag]
        key.append(contentsOf: name.utf8)
        return key
    }

    static let valueRange = KeyRange.prefix([valueTag])

    /// The name of a named value's key, or `nil` if `key` is not one (no name, or not UTF-8).
    static func valueName(fromValueKey key: [UInt8]) -> String? {
        guard key.count > 1, key.first == valueTag else { return nil }
        return String(validating: key.dropFirst(), as: UTF8.self)
    }

    // MARK: Index entries

    /// `0x03` + bucket id: the prefix of every index entry of a bucket.
    static func indexSpacePrefix(bucket: UInt32) -> [UInt8] {
        var key: [UInt8] = [indexTag]
        appendBigEndian(bucket, to: &key)
        return key
    }

    /// `0x03` + bucket id + index id: the prefix of every entry of one index.
    static func indexPrefix(bucket: UInt32, index: UInt32) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(indexPrefixLength)
        appendIndexPrefix(bucket: bucket, index: index, to: &key)
        return key
    }

    /// Appends ``indexPrefix(bucket:index:)`` to `out`, for keys built in a reused buffer.
    @inline(__always)
    static func appendIndexPrefix(bucket: UInt32, index: UInt32, to out: inout [UInt8]) {
        out.append(indexTag)
        appendBigEndian(bucket, to: &out)
        appendBigEndian(index, to: &out)
    }

    static let indexPrefixLength = 9

    /// An entry's full key: index prefix, the encoded value tuple, the object key.
    @inline(__always)
    static func indexEntryKey(prefix: [UInt8], tuple: [UInt8], objectKey: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(prefix.count + tuple.count + objectKey.utf8.count)
        out.append(contentsOf: prefix)
        out.append(contentsOf: tuple)
        out.append(contentsOf: objectKey.utf8)
        return out
    }

    /// An entry's full key, with the object key given as its UTF-8 bytes.
    @inline(__always)
    static func indexEntryKey(prefix: [UInt8], tuple: [UInt8], objectKey: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(prefix.count + tuple.count + objectKey.count)
        out.append(contentsOf: prefix)
        out.append(contentsOf: tuple)
        out.append(contentsOf: objectKey)
        return out
    }

    /// An entry's full key from the bucket and index ids, built in one allocation.
    @inline(__always)
    static func indexEntryKey(bucket: UInt32, index: UInt32, tuple: [UInt8], objectKey: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(indexPrefixLength + tuple.count + objectKey.utf8.count)
        out.append(indexTag)
        appendBigEndian(bucket, to: &out)
        appendBigEndian(index, to: &out)
        out.append(contentsOf: tuple)
        out.append(contentsOf: objectKey.utf8)
        return out
    }

    /// Writes an entry's full key into `out`, replacing what it held and keeping its capacity:
    /// for writers that put many entries, one buffer instead of an array per key.
    @inline(__always)
    static func writeIndexEntryKey(
        bucket: UInt32, index: UInt32, tuple: [UInt8], objectKey: [UInt8], into out: inout [UInt8]
    ) {
        out.removeAll(keepingCapacity: true)
        appendIndexPrefix(bucket: bucket, index: index, to: &out)
        out.append(contentsOf: tuple)
        out.append(contentsOf: objectKey)
    }

    /// Splits an index entry key into its tuple and object key, given the index's arity.
    /// Returns the byte ranges (relative to `key`) of the tuple and the object key.
    static func splitIndexEntry(
        _ key: UnsafeRawBufferPointer, arity: Int
    ) throws(FormatError) -> (tuple: Range<Int>, objectKey: Range<Int>) {
        guard key.count > indexPrefixLength, key[0] == indexTag else {
            throw FormatError("index entry key of \(key.count) bytes is too short or has the wrong tag")
        }
        var offset = indexPrefixLength
        for _ in 0..<arity {
            offset += try ValueEncoding.elementLength(key, at: offset)
        }
        guard offset < key.count else { throw FormatError("index entry has no object key") }
        return (indexPrefixLength..<offset, offset..<key.count)
    }

    static func bucketAndIndex(ofEntry key: UnsafeRawBufferPointer) -> (bucket: UInt32, index: UInt32)? {
        guard key.count >= indexPrefixLength, key[0] == indexTag else { return nil }
        return (readBigEndian(key, at: 1), readBigEndian(key, at: 5))
    }

    /// Whether `bytes` are valid UTF-8 (ASCII checked first, eight bytes at a time).
    static func isValidUTF8(_ bytes: Slice<UnsafeRawBufferPointer>) -> Bool {
        let buffer = UnsafeRawBufferPointer(rebasing: bytes).bindMemoryAsUInt8()
        return buffer.isASCII || String(validating: buffer, as: UTF8.self) != nil
    }

    static func string(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) throws(FormatError) -> String {
        guard let string = String(validating: bytes[range], as: UTF8.self) else {
            throw FormatError("object key is not valid UTF-8")
        }
        return string
    }
}

extension String {
    /// `String(validating:as:)` for slices of raw buffers.
    ///
    /// ASCII bytes, the common case for keys, are always valid UTF-8 and take a fast path: the
    /// generic validating initializer costs about a thousand instructions for a 36-byte UUID,
    /// more than the LevelDB step that produced it.
    init?(validating bytes: Slice<UnsafeRawBufferPointer>, as encoding: UTF8.Type) {
        let buffer = UnsafeRawBufferPointer(rebasing: bytes).bindMemoryAsUInt8()
        if buffer.isASCII {
            self.init(decoding: buffer, as: UTF8.self)
        } else {
            self.init(validating: buffer, as: encoding)
        }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether every byte is below 0x80, checked eight bytes at a time.
    @inline(__always)
    var isASCII: Bool {
        guard let base = baseAddress else { return true }
        var offset = 0
        var bits: UInt64 = 0
        while offset + 8 <= count {
            bits |= UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
            offset += 8
        }
        while offset < count {
            bits |= UInt64(base[offset])
            offset += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }
}

extension UnsafeRawBufferPointer {
    /// The same bytes seen as `UInt8`s (raw memory is always valid to read as bytes).
    func bindMemoryAsUInt8() -> UnsafeBufferPointer<UInt8> {
        guard let base = baseAddress else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: count)
    }

    /// The first 16 bytes as two big-endian integers, zeros past the end: two byte strings whose
    /// heads differ compare as their heads do; equal heads leave the rest (and the lengths) to
    /// compare. What sorts and merges of keys compare first.
    @inline(__always)
    var orderedHead: (UInt64, UInt64) {
        var head: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &head) { head in
            if let base = baseAddress, let target = head.baseAddress {
                target.copyMemory(from: base, byteCount: Swift.min(16, count))
            }
        }
        return (UInt64(bigEndian: head.0), UInt64(bigEndian: head.1))
    }
}
