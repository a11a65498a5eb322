// libFuzzer harness for Buri's key and header decoders: record headers, index-entry keys and
// index value elements, everything Buri parses out of LevelDB keys and record fronts.
// Built and run by Scripts/fuzz; see Fuzz/README.md.
//
// Properties checked on every input (a violation traps, which libFuzzer reports as a crash):
//  - RecordHeader.parse, Keyspace.splitIndexEntry, Keyspace.objectKey and
//    ValueEncoding.decodeElement never crash, whatever the bytes;
//  - a header that parses re-encodes to a header that parses to the same value;
//  - every element that decodes re-encodes to exactly the bytes it was decoded from
//    (the encoding is canonical, so equality and order of index values are those of their bytes);
//  - a split index entry's ranges lie inside the key and cover it.
@testable import Buri
import Foundation

@inline(never)
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        fatalError("property violated: \(message())")
    }
}

/// Re-encodes a decoded element the way Buri encodes values it stores.
func reencode(_ decoded: IndexValue.Decoded) -> [UInt8] {
    switch decoded {
    case .integer(let value): return IndexValue(value).encoded
    case .unsigned(let value): return IndexValue(value).encoded
    case .double(let value): return (try? IndexValue(value).encoded) ?? []
    case .bytes(let bytes): return IndexValue(bytes: bytes).encoded
    }
}

func checkElements(_ raw: UnsafeRawBufferPointer) {
    var offset = 0
    while offset < raw.count {
        let start = offset
        guard let decoded = try? ValueEncoding.decodeElement(raw, at: &offset) else { return }
        require(offset > start && offset <= raw.count, "decodeElement moved from \(start) to \(offset) of \(raw.count)")
        let original = Array(raw[start..<offset])
        require(reencode(decoded) == original, "element \(original) decodes to \(decoded), which encodes differently")
    }
}

func checkSplit(_ key: UnsafeRawBufferPointer, arity: Int) {
    guard let parts = try? Keyspace.splitIndexEntry(key, arity: arity) else { return }
    require(
        parts.tuple.lowerBound == Keyspace.indexPrefixLength && parts.tuple.upperBound == parts.objectKey.lowerBound
            && parts.objectKey.upperBound == key.count && !parts.objectKey.isEmpty,
        "split \(parts) of a \(key.count)-byte key")
    _ = try? Keyspace.string(key, parts.objectKey)
    let tuple = Array(key[parts.tuple])
    require(
        IndexTuple.split(tuple).count == arity, "a tuple of arity \(arity) splits into a different number of values")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let raw = UnsafeRawBufferPointer(start: data, count: size)

    // Record header at the front of a record value.
    if let (header, offset) = try? RecordHeader.parse(raw) {
        require(offset >= 2 && offset <= raw.count, "payload offset \(offset) outside 2...\(raw.count)")
        var out: [UInt8] = []
        header.append(to: &out)
        let again = out.withUnsafeBytes { try? RecordHeader.parse($0) }
        require(again?.0 == header && again?.1 == out.count, "a re-encoded header parses differently")
        for entry in header.entries {
            entry.tuple.withUnsafeBytes { checkElements($0) }
        }
    }

    // Index value elements.
    checkElements(raw)

    // Index entry keys: as given, and with a valid tag and ids in front.
    var entryKey: [UInt8] = [Keyspace.indexTag, 0, 0, 0, 1, 0, 0, 0, 1]
    entryKey.append(contentsOf: raw)
    for arity in 1...3 {
        checkSplit(raw, arity: arity)
        entryKey.withUnsafeBytes { checkSplit($0, arity: arity) }
    }

    // Record keys.
    _ = try? Keyspace.objectKey(fromRecordKey: raw)
    _ = Keyspace.bucketAndIndex(ofEntry: raw)
    _ = Keyspace.parseHeader(Array(raw))
    return 0
}

/// With BURI_FUZZ_SEEDS=<dir> in the environment, writes a starting corpus of valid record
/// headers, index value tuples and entry-key tails to <dir> and exits (Scripts/fuzz does this).
@_cdecl("LLVMFuzzerInitialize")
public func initializeKeys(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = ProcessInfo.processInfo.environment["BURI_FUZZ_SEEDS"] else { return 0 }
    let values: [IndexValue] = [
        0, 1, -1, 42, IndexValue(Int64.min), IndexValue(UInt64.max), 0.5, -1e300, 5e-324,
        .init(floatLiteral: .infinity), .init(floatLiteral: -.infinity), "", "EN", "a\u{0}b",
        IndexValue(bytes: [0xFF, 0, 0xC3]),
    ]
    var seeds: [[UInt8]] = values.map(\.encoded)
    seeds.append(values.flatMap(\.encoded))
    // A record: header with three entries, then a CBOR payload.
    var record: [UInt8] = []
    RecordHeader(
        schemaVersion: 3,
        entries: [
            RecordHeader.Entry(index: 1, tuple: IndexValue("EN").encoded),
            RecordHeader.Entry(index: 2, tuple: IndexValue(42).encoded),
            RecordHeader.Entry(index: 300, tuple: IndexValue("a").encoded + IndexValue(-2.5).encoded),
        ]
    ).append(to: &record)
    record += [0xA1, 0x61, 0x61, 0x01]
    seeds.append(record)
    // Index entry keys (a full key, and the tail after the prefix the harness adds).
    seeds.append(
        Keyspace.indexEntryKey(
            prefix: Keyspace.indexPrefix(bucket: 1, index: 2), tuple: IndexValue("EN").encoded, objectKey: "p1"))
    seeds.append(IndexValue(7).encoded + Array("key\u{0}".utf8))
    seeds.append(Keyspace.recordKey(bucket: 9, key: "p1"))
    seeds.append(Keyspace.headerValue())
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (number, seed) in seeds.enumerated() {
        _ = FileManager.default.createFile(atPath: directory + "/seed-\(number)", contents: Data(seed))
    }
    exit(0)
}
