import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - Golden vectors (mirrored by docs/FORMAT.md)

/// The Person bucket as if it also declared the compound index `locale_age` (id 3), for the query examples.
private let personQueryDescriptor: BucketDescriptor = {
    var descriptor = personDescriptor
    descriptor.indexes.append(IndexDefinition(id: 3, name: "locale_age", components: [.binary, .numeric]))
    descriptor.nextIndexId = 4
    return descriptor
}()

/// The struct of docs/FORMAT.md §3a's named value example.
private struct ThemeSettings: Codable {
    var theme: String
    var fontSize: Int
}

private func element(_ value: IndexValue) -> [UInt8] { value.encoded }

private func entry(index: UInt32, _ values: [IndexValue], key: String = "p1") -> [UInt8] {
    Keyspace.indexEntryKey(
        prefix: Keyspace.indexPrefix(bucket: 1, index: index), tuple: IndexTuple.join(values), objectKey: key)
}

/// The key range a query on the Person bucket scans.
private func range(_ query: Query) throws -> BuriStorage.KeyRange {
    try ConditionPlan(query.conditions[0], in: personQueryDescriptor).range
}

private func start(_ query: Query) throws -> [UInt8] { try range(query).start ?? [] }
private func end(_ query: Query) throws -> [UInt8] { try range(query).end ?? [] }

/// Every byte string docs/FORMAT.md shows, with the code that produces it.
private let goldenVectors: [(name: String, hex: String, bytes: @Sendable () throws -> [UInt8])] = [
    ("database header key", "00 66 6f 72 6d 61 74", { Keyspace.headerKey }),
    ("database header value, format 13", "42 55 52 49 00 0d", { Keyspace.headerValue() }),
    (
        "database header value, format 12 (read, upgraded by the first write)", "42 55 52 49 00 0c",
        { Keyspace.headerValue(version: 12) }
    ),
    (
        "text segment key (§5c)",
        "03 00 00 00 01 00 00 00 01 31 30 61 6c 70 68 61 00 00 00 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f",
        {
            GroupedPostingKeys.segmentKey(
                bucket: 1, index: 1, tuple: IndexValue("alpha").encoded, tier: 0, id: Array(0x10...0x1F))
        }
    ),
    (
        "text segment value (§5c)",
        "01 01 01 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f 00 00 00 00 00 01 7a 00 06 09 03 00 03 c5 01",
        {
            try TextSegment.encode(
                stamps: [Array(0x10...0x1F)], postings: [(Array("z".utf8), 0, [0x09, 0x03, 0x00, 0x03, 0xC5, 0x01])])
        }
    ),
    (
        "text tombstone key (§5c)",
        "03 00 00 00 01 00 00 00 01 32 30 61 6c 70 68 61 00 00 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f 7a",
        {
            GroupedPostingKeys.tombstoneKey(
                bucket: 1, index: 1, tuple: IndexValue("alpha").encoded, stamp: Array(0x10...0x1F),
                objectKey: Array("z".utf8))
        }
    ),
    (
        "record header of layout 3 (§10, text stamps)",
        "03 01 00 01 01 08 30 61 6c 70 68 61 00 00 00 01 01 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f 09",
        {
            var out: [UInt8] = []
            RecordHeader(
                schemaVersion: 0, entries: [RecordHeader.Entry(index: 1, tuple: IndexValue("alpha").encoded)],
                textStamps: [RecordHeader.TextStamp(index: 1, stamp: Array(0x10...0x1F), length: 9)]
            ).append(to: &out)
            return out
        }
    ),
    (
        "database header value, format 11 (read, upgraded by the first write)", "42 55 52 49 00 0b",
        { Keyspace.headerValue(version: 11) }
    ),
    ("largest bucket id given, 1", "00 00 00 01", { Keyspace.bucketIdsValue(1) }),
    (
        "record header deriving index 1 from songs", "02 01 00 00 01 01 01 05 73 6f 6e 67 73",
        {
            var out: [UInt8] = []
            RecordHeader(
                schemaVersion: 0, entries: [RecordHeader.Entry(index: 1, tuple: IndexValue("s7").encoded)],
                derived: [RecordHeader.Derived(index: 1, path: [Array("songs".utf8)])]
            ).append(to: &out)
            return out
        }
    ),
    (
        "payload of the derived example", "a2 62 69 64 62 70 31 65 73 6f 6e 67 73 83 62 73 37 62 73 32 62 73 37",
        {
            struct Example: Encodable { var id = "p1", songs = ["s7", "s2", "s7"] }
            return try CBOREncoder().encode(Example())
        }
    ),
    ("largest bucket id key", "00 62 75 63 6b 65 74 2d 69 64 73", { Keyspace.bucketIdsKey }),
    (
        "relationship entry of p1 referring to s7", "03 00 00 00 02 00 00 00 01 30 73 37 00 00 70 31",
        { Keyspace.indexEntryKey(bucket: 2, index: 1, tuple: IndexValue("s7").encoded, objectKey: "p1") }
    ),
    (
        "database header value, format 3 (read, upgraded by the first write)", "42 55 52 49 00 03",
        { Keyspace.headerValue(version: 3) }
    ),
    ("object count key of bucket id 1", "05 00 00 00 01", { Keyspace.countKey(bucket: 1) }),
    ("named value key: lastSync", "06 6c 61 73 74 53 79 6e 63", { Keyspace.valueKey(name: "lastSync") }),
    ("named value key: \u{E9}", "06 c3 a9", { Keyspace.valueKey(name: "\u{E9}") }),
    ("named value key: e\u{301}", "06 65 cc 81", { Keyspace.valueKey(name: "e\u{301}") }),
    (
        "named value: Date 2001-01-01T00:00:01Z", "c1 1a 3a 4f c8 81",
        { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1)) }
    ),
    (
        "named value: a struct {theme: \"dark\", fontSize: 14}",
        "a2 65 74 68 65 6d 65 64 64 61 72 6b 68 66 6f 6e 74 53 69 7a 65 0e",
        { try CBOREncoder().encode(ThemeSettings(theme: "dark", fontSize: 14)) }
    ),
    ("object count key of bucket id 258", "05 00 00 01 02", { Keyspace.countKey(bucket: 258) }),
    ("object count value 0", "00 00 00 00 00 00 00 00", { Keyspace.countValue(0) }),
    ("object count value 1", "00 00 00 00 00 00 00 01", { Keyspace.countValue(1) }),
    ("object count value 100000", "00 00 00 00 00 01 86 a0", { Keyspace.countValue(100_000) }),
    (
        "database header value, format 2 (read, upgraded by the first write)", "42 55 52 49 00 02",
        { Keyspace.headerValue(version: 2) }
    ),
    ("retired bucket id marker key of bucket id 1", "04 00 00 00 01", { Keyspace.retiredKey(bucket: 1) }),
    (
        "retired bucket id marker value: purging, bucket Person", "01 50 65 72 73 6f 6e",
        { Keyspace.retiredValue(.purging, bucket: "Person") }
    ),
    (
        "retired bucket id marker value: staging, bucket Person", "02 50 65 72 73 6f 6e",
        { Keyspace.retiredValue(.staging, bucket: "Person") }
    ),
    (
        "retired bucket id marker value: staging, owned by lease 0x694d0b2c1a3e0f01, bucket Person (format 12)",
        "03 69 4d 0b 2c 1a 3e 0f 01 50 65 72 73 6f 6e",
        { Keyspace.retiredValue(.staging, bucket: "Person", owner: 0x694d_0b2c_1a3e_0f01) }
    ),
    (
        "lease key of lease 0x694d0b2c1a3e0f01 (format 12)", "00 6c 65 61 73 65 69 4d 0b 2c 1a 3e 0f 01",
        { Keyspace.leaseKey(0x694d_0b2c_1a3e_0f01) }
    ),
    (
        "database header value, format 1 (read, upgraded by the first write)", "42 55 52 49 00 01",
        { Keyspace.headerValue(version: 1) }
    ),
    ("catalog key of bucket Person", "01 50 65 72 73 6f 6e", { Keyspace.catalogKey(bucket: "Person") }),
    (
        "catalog value of bucket Person",
        "a6 62 69 64 01 64 6e 61 6d 65 66 50 65 72 73 6f 6e 68 6b 65 79 46 69 65 6c 64 68 6f 62 6a 65 63 74 49 64 6d 73 63 68 65 6d 61 56 65 72 73 69 6f 6e 01 67 69 6e 64 65 78 65 73 82 a6 62 69 64 01 64 6e 61 6d 65 66 6c 6f 63 61 6c 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 66 62 69 6e 61 72 79 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 a6 62 69 64 02 64 6e 61 6d 65 63 61 67 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 67 6e 75 6d 65 72 69 63 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 6b 6e 65 78 74 49 6e 64 65 78 49 64 03",
        { try personDescriptor.encoded() }
    ),
    (
        "catalog index map of .numeric(\"due\", \\.dueDate, field: \"dueDate\")",
        "a8 62 69 64 03 64 6e 61 6d 65 63 64 75 65 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 67 6e 75 6d 65 72 69 63 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f4 67 76 65 72 73 69 6f 6e 00 66 66 69 65 6c 64 73 81 67 64 75 65 44 61 74 65 6a 66 69 65 6c 64 46 6f 72 6d 73 81 64 64 61 74 65",
        {
            try CBOREncoder().encode(
                IndexDefinition(id: 3, name: "due", components: [.numeric], fields: ["dueDate"], fieldForms: [.date]))
        }
    ),
    (
        "catalog index map of a .computed index",
        "a7 62 69 64 04 64 6e 61 6d 65 61 63 6a 63 6f 6d 70 6f 6e 65 6e 74 73 81 66 62 69 6e 61 72 79 66 75 6e 69 71 75 65 f4 6b 6d 75 6c 74 69 56 61 6c 75 65 64 f5 67 76 65 72 73 69 6f 6e 00 68 63 6f 6d 70 75 74 65 64 f5",
        {
            try CBOREncoder().encode(
                IndexDefinition(id: 4, name: "c", components: [.binary], multiValued: true, computed: true))
        }
    ),
    (
        "payload: Date, 2001-01-01T00:00:01Z (tag 1, integer)", "c1 1a 3a 4f c8 81",
        { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1)) }
    ),
    (
        "payload: Date, 1970-01-01T00:00:00.5Z (tag 1, float64)", "c1 fb 3f e0 00 00 00 00 00 00",
        { try CBOREncoder().encode(Date(timeIntervalSince1970: 0.5)) }
    ),
    (
        "payload: Date, 2^29 + 2^-23 s after 2001 (tag 1001, bigfloat)",
        "d9 03 e9 a1 05 82 36 1b 00 2d 27 e4 40 00 00 01",
        { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23)) }
    ),
    (
        "payload: Date in a version 1 record (2001-01-01T00:00:01Z)", "fb 3f f0 00 00 00 00 00 00",
        { try CBOREncoder().encode(Date(timeIntervalSinceReferenceDate: 1).timeIntervalSinceReferenceDate) }
    ),
    ("record prefix of bucket 1", "02 00 00 00 01", { Keyspace.recordPrefix(bucket: 1) }),
    ("record key: bucket 1, object key p1", "02 00 00 00 01 70 31", { Keyspace.recordKey(bucket: 1, key: "p1") }),
    ("index prefix: bucket 1, index 2", "03 00 00 00 01 00 00 00 02", { Keyspace.indexPrefix(bucket: 1, index: 2) }),
    ("entry key: locale \"EN\", p1", "03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", { entry(index: 1, ["EN"]) }),
    ("entry key: locale \"E\", p1", "03 00 00 00 01 00 00 00 01 30 45 00 00 70 31", { entry(index: 1, ["E"]) }),
    (
        "entry key: age 20, p1", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31",
        { entry(index: 2, [20]) }
    ),
    (
        "entry key: age 20.0, p1", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31",
        { entry(index: 2, [try doubleValue(20.0)]) }
    ),
    (
        "entry key: locale_age (\"EN\", 20), p1",
        "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 40 00 00 00 00 00 00 00 70 31",
        { entry(index: 3, ["EN", 20]) }
    ),
    // Elements
    ("element 20", "23 04 37 40 00 00 00 00 00 00 00", { element(20) }),
    ("element 20.0", "23 04 37 40 00 00 00 00 00 00 00", { element(try doubleValue(20.0)) }),
    ("element 0", "22", { element(0) }),
    ("element -0.0", "22", { element(try doubleValue(-0.0)) }),
    ("element 1", "23 04 33 00 00 00 00 00 00 00 00", { element(1) }),
    ("element -1", "21 fb cc ff ff ff ff ff ff ff ff", { element(-1) }),
    ("element 0.5", "23 04 32 00 00 00 00 00 00 00 00", { element(0.5) }),
    ("element -0.5", "21 fb cd ff ff ff ff ff ff ff ff", { element(-0.5) }),
    (
        "element 2^53 as Double", "23 04 68 00 00 00 00 00 00 00 00",
        { element(try doubleValue(9_007_199_254_740_992.0)) }
    ),
    ("element 2^53+1", "23 04 68 00 00 00 00 00 00 08 00", { element(IndexValue(Int64(9_007_199_254_740_993))) }),
    ("element Int64.min", "21 fb 8d ff ff ff ff ff ff ff ff", { element(IndexValue(Int64.min)) }),
    ("element Int64.max", "23 04 71 ff ff ff ff ff ff ff fc", { element(IndexValue(Int64.max)) }),
    ("element UInt64.max", "23 04 72 ff ff ff ff ff ff ff fe", { element(IndexValue(UInt64.max)) }),
    ("element +infinity", "24", { element(try IndexValue(Double.infinity)) }),
    ("element -infinity", "20", { element(try IndexValue(-Double.infinity)) }),
    (
        "element Double.greatestFiniteMagnitude", "23 08 32 ff ff ff ff ff ff f0 00",
        { element(try IndexValue(Double.greatestFiniteMagnitude)) }
    ),
    (
        "element Double.leastNonzeroMagnitude", "23 00 01 00 00 00 00 00 00 00 00",
        { element(try IndexValue(Double.leastNonzeroMagnitude)) }
    ),
    ("element 1.5 (E = 0, F = 2^63)", "23 04 33 80 00 00 00 00 00 00 00", { element(1.5) }),
    ("element 3 (E = 1, F = 2^63)", "23 04 34 80 00 00 00 00 00 00 00", { element(3) }),
    (
        "element 2^63 + 2^11 (UInt64)", "23 04 72 00 00 00 00 00 00 10 00",
        { element(IndexValue((UInt64(1) << 63) + 2048)) }
    ),
    (
        "element -(2^63 + 2^11) (a Double)", "21 fb 8d ff ff ff ff ff ff ef ff",
        { element(try doubleValue(-(0x1p63 + 0x1p11))) }
    ),
    ("element 2^64 (a Double)", "23 04 73 00 00 00 00 00 00 00 00", { element(try doubleValue(0x1p64)) }),
    (
        "element 3 × 2^-1074 (subnormal)", "23 00 02 80 00 00 00 00 00 00 00",
        { element(try doubleValue(3 * Double.leastNonzeroMagnitude)) }
    ),
    ("element \"\"", "30 00 00", { element("") }),
    ("element \"E\"", "30 45 00 00", { element("E") }),
    ("element \"EN\"", "30 45 4e 00 00", { element("EN") }),
    ("element \"a\\0b\"", "30 61 00 01 62 00 00", { element("a\u{0}b") }),
    ("element bytes ff", "30 ff 00 00", { element(IndexValue(bytes: [0xFF])) }),
    // Record values
    ("varint 300", "ac 02", { varint(300) }),
    ("varint UInt64.max", "ff ff ff ff ff ff ff ff ff 01", { varint(.max) }),
    (
        "record header of p1", "01 01 01 02 01 05 30 45 4e 00 00 02 0b 23 04 37 40 00 00 00 00 00 00 00",
        {
            var out: [UInt8] = []
            personHeader.append(to: &out)
            return out
        }
    ),
    (
        "record value of p1",
        "01 01 01 02 01 05 30 45 4e 00 00 02 0b 23 04 37 40 00 00 00 00 00 00 00 a4 68 6f 62 6a 65 63 74 49 64 62 70 31 64 6e 61 6d 65 64 44 69 72 6b 66 6c 6f 63 61 6c 65 62 45 4e 63 61 67 65 14",
        { try personRecord() }
    ),
    (
        "record header of n1 (multi-valued tags \"db\", \"swift\")",
        "01 01 00 02 01 05 30 64 62 00 00 01 08 30 73 77 69 66 74 00 00",
        {
            var out: [UInt8] = []
            RecordHeader(
                schemaVersion: 0,
                entries: [
                    .init(index: 1, tuple: IndexValue("db").encoded),
                    .init(index: 1, tuple: IndexValue("swift").encoded),
                ]
            ).append(to: &out)
            return out
        }
    ),
    (
        "entry key: bucket 2, tags \"db\", n1", "03 00 00 00 02 00 00 00 01 30 64 62 00 00 6e 31",
        {
            Keyspace.indexEntryKey(
                prefix: Keyspace.indexPrefix(bucket: 2, index: 1), tuple: IndexValue("db").encoded, objectKey: "n1")
        }
    ),
    (
        "entry key: bucket 2, tags \"swift\", n1", "03 00 00 00 02 00 00 00 01 30 73 77 69 66 74 00 00 6e 31",
        {
            Keyspace.indexEntryKey(
                prefix: Keyspace.indexPrefix(bucket: 2, index: 1), tuple: IndexValue("swift").encoded, objectKey: "n1")
        }
    ),
    // Query ranges
    (
        "range locale == \"E\": start", "03 00 00 00 01 00 00 00 01 30 45 00 00",
        { try start(.index("locale", equals: "E")) }
    ),
    (
        "range locale == \"E\": end", "03 00 00 00 01 00 00 00 01 30 45 00 01",
        { try end(.index("locale", equals: "E")) }
    ),
    (
        "range locale prefix \"E\": start", "03 00 00 00 01 00 00 00 01 30 45",
        { try start(.index("locale", prefix: "E")) }
    ),
    ("range locale prefix \"E\": end", "03 00 00 00 01 00 00 00 01 30 46", { try end(.index("locale", prefix: "E")) }),
    (
        "range age in 20...29: start", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00",
        { try start(.index("age", in: 20...29)) }
    ),
    (
        "range age in 20...29: end", "03 00 00 00 01 00 00 00 02 23 04 37 d0 00 00 00 00 00 00 01",
        { try end(.index("age", in: 20...29)) }
    ),
    (
        "range age in 20..<30: end", "03 00 00 00 01 00 00 00 02 23 04 37 e0 00 00 00 00 00 00 00",
        { try end(.index("age", in: 20..<30)) }
    ),
    (
        "range age > 20: start", "03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 01",
        { try start(.index("age", from: .exclusive(20), to: .unbounded)) }
    ),
    (
        "range age > 20: end", "03 00 00 00 01 00 00 00 03",
        { try end(.index("age", from: .exclusive(20), to: .unbounded)) }
    ),
    ("range age < 0: start", "03 00 00 00 01 00 00 00 02", { try start(.index("age", in: ..<0)) }),
    ("range age < 0: end", "03 00 00 00 01 00 00 00 02 22", { try end(.index("age", in: ..<0)) }),
    (
        "range locale_age \"EN\", 20...29: start",
        "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 40 00 00 00 00 00 00 00",
        { try start(.index("locale_age", equals: ["EN"], in: 20...29)) }
    ),
    (
        "range locale_age \"EN\", 20...29: end",
        "03 00 00 00 01 00 00 00 03 30 45 4e 00 00 23 04 37 d0 00 00 00 00 00 00 01",
        { try end(.index("locale_age", equals: ["EN"], in: 20...29)) }
    ),
    (
        "range all records of bucket 1: end", "02 00 00 00 02",
        { BuriStorage.KeyRange.prefix(Keyspace.recordPrefix(bucket: 1)).end ?? [] }
    ),
    // Continuation tokens
    (
        "query signature: locale == \"EN\" and age in 20...29",
        "00 02 06 6c 6f 63 61 6c 65 01 30 45 4e 00 00 00 03 61 67 65 00 01 01 23 04 37 40 00 00 00 00 00 00 00 01 23 04 37 d0 00 00 00 00 00 00 00",
        { ContinuationFormat.signature(of: tokenExampleQuery) }
    ),
    (
        "query fingerprint: locale == \"EN\" and age in 20...29", "f0 58 b7 a0 89 39 09 c2",
        { fingerprintBytes(tokenExampleQuery) }
    ),
    (
        "query fingerprint: the same, descending", "3d 6c 7a 67 bb 27 88 3b",
        { fingerprintBytes(tokenExampleQuery.descending()) }
    ),
    (
        "continuation token: bucket 1, ordered by locale, 1 returned, after p1",
        "b1 00 00 00 01 00 00 00 01 f0 58 b7 a0 89 39 09 c2 01 03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31",
        {
            ContinuationFormat.encode(
                ContinuationToken(
                    bucket: 1, order: 1, fingerprint: ContinuationFormat.fingerprint(of: tokenExampleQuery),
                    returned: 1, position: entry(index: 1, ["EN"])))
        }
    ),
]

/// The query of docs/FORMAT.md's continuation token example.
private let tokenExampleQuery = Query.index("locale", equals: "EN").and(.index("age", in: 20...29))

/// A fingerprint as u64be.
private func fingerprintBytes(_ query: Query) -> [UInt8] {
    let value = ContinuationFormat.fingerprint(of: query)
    return (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
}

@Suite("Format: golden vectors")
struct FormatGoldenTests {
    @Test("every documented byte string is what the code produces", arguments: goldenVectors.indices)
    func vector(_ i: Int) throws {
        let vector = goldenVectors[i]
        let actual = formatHex(try vector.bytes())
        #expect(actual == vector.hex, "\(vector.name): the code gives \(actual)")
    }

    @Test("docs/FORMAT.md shows every golden vector verbatim")
    func documentShowsVectors() throws {
        let doc = try formatDocument()
        // Hex in the document may wrap across lines: compare with all whitespace collapsed.
        let flat = doc.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for vector in goldenVectors {
            #expect(flat.contains(vector.hex), "docs/FORMAT.md lacks \(vector.name): \(vector.hex)")
        }
        #expect(doc.contains("format version 13") || doc.contains("Format version 13"))
    }

    @Test("the catalog value decodes back and has the documented CBOR shape")
    func catalogShape() throws {
        let bytes = try personDescriptor.encoded()
        #expect(bytes.count == 202)  // as docs/FORMAT.md says
        #expect(try BucketDescriptor.decode(bytes) == personDescriptor)
        let value = try CBORValue(decoding: bytes)
        let keys = value.mapEntries?.compactMap(\.key.stringValue)
        #expect(keys == ["id", "name", "keyField", "schemaVersion", "indexes", "nextIndexId"])
        let index = value["indexes"]?[0]
        #expect(
            index?.mapEntries?.compactMap(\.key.stringValue) == [
                "id", "name", "components", "unique", "multiValued", "version",
            ])
        // Absent optionals are left out of the map; present `fields` comes last.
        var bare = personDescriptor
        bare.keyField = nil
        bare.indexes[0].fields = ["locale"]
        let bareValue = try CBORValue(decoding: try bare.encoded())
        #expect(
            bareValue.mapEntries?.compactMap(\.key.stringValue) == [
                "id", "name", "schemaVersion", "indexes", "nextIndexId",
            ])
        #expect(bareValue["indexes"]?[0]?.mapEntries?.last?.key.stringValue == "fields")
        #expect(try BucketDescriptor.decode(try bare.encoded()) == bare)
    }

    @Test("the record value parses into its header and a CBOR payload")
    func recordShape() throws {
        let record = try personRecord()
        let (header, offset) = try record.withUnsafeBytes { raw in try RecordHeader.parse(raw) }
        #expect(header == personHeader)
        #expect(offset == 24)
        #expect(record.count == 62)  // as docs/FORMAT.md says
        let person = try CBORDecoder().decode(FormatPerson.self, from: Array(record[offset...]))
        #expect(person.objectId == "p1" && person.name == "Dirk" && person.locale == "EN" && person.age == 20)
    }

    @Test("the database header parses; other values are not headers")
    func header() {
        #expect(Keyspace.parseHeader(Keyspace.headerValue()) == 13)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x05]) == 5)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x04]) == 4)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x03]) == 3)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x01]) == 1)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x02]) == 2)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x01, 0x00]) == 256)
        #expect(Keyspace.parseHeader(Array("BURX".utf8) + [0x00, 0x01]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00]) == nil)
        #expect(Keyspace.parseHeader([]) == nil)
        // §4: version 0 was never written; a known version (1, 2) has exactly 6 bytes.
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x00, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x01, 0x00]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x02, 0xFF, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("buri".utf8) + [0x00, 0x02]) == nil)
        // A newer version is a version, whatever its length: the opener says "upgrade Buri".
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x03, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x04, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x05, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x06, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x08, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x08]) == 8)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x09, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x09]) == 9)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0A]) == 10)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0A, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0B]) == 11)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0B, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0C]) == 12)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0C, 0xFF]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0D]) == 13)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0D, 0x01]) == nil)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0E]) == 14)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0x00, 0x0E, 0x01, 0x02]) == 14)
        #expect(Keyspace.parseHeader(Array("BURI".utf8) + [0xFF, 0xFF]) == 65535)
    }

    @Test("catalog keys give back bucket names byte for byte")
    func catalogKeys() {
        for name in ["Person", "a", "ab", "a\u{0}b", "é", "e\u{301}", String(repeating: "x", count: 1024)] {
            let key = Keyspace.catalogKey(bucket: name)
            #expect(key == [0x01] + Array(name.utf8))
            #expect(Keyspace.bucketName(fromCatalogKey: key).map { Array($0.utf8) } == Array(name.utf8))
        }
        #expect(Keyspace.bucketName(fromCatalogKey: [0x01, 0xFF]) == nil)
        #expect(Keyspace.bucketName(fromCatalogKey: [0x02, 0x41]) == nil)
    }
}
