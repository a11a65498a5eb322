// The places where an independent implementation of format 4 still had to guess, each settled in
// docs/FORMAT.md and pinned here: how a date becomes its index value (§10), when a bucket may lack
// its object count (§6b, §13), how offset, limit and the end of a walk show in continuation
// tokens (§11), what a reader does with both `fields` and `fieldPaths` (§5), which schema version
// objects written without their Swift type carry (§10), and that an index value must be what its
// fields give (§13, invariant 9).

import BuriCodec
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

@testable import Buri

/// Lower-case hex, bytes separated by single spaces: the form docs/FORMAT.md uses.
private func spacedHex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
}

private func bytes(fromHex text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

/// docs/FORMAT.md with every run of whitespace collapsed to one space, found by walking up from this file.
private func flatFormat() throws -> String {
    for start in [URL(fileURLWithPath: #filePath), URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()] {
        var directory = start.deletingLastPathComponent()
        while directory.path != "/" {
            if let text = try? String(contentsOf: directory.appendingPathComponent("docs/FORMAT.md"), encoding: .utf8) {
                return text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            }
            directory = directory.deletingLastPathComponent()
        }
    }
    Issue.record("docs/FORMAT.md not found above \(#filePath)")
    return ""
}

/// The index of §10's date vectors: a date read from field `d`.
private let dateIndex = IndexDefinition(id: 1, name: "d", components: [.numeric], fields: ["d"], fieldForms: [.date])
private let valueIndex = IndexDefinition(id: 1, name: "d", components: [.numeric], fields: ["d"])

/// docs/FORMAT.md §10, "Dates: one meaning on every path": a date item and its index element.
private let dateVectors: [(name: String, item: String, element: String, tagged: Bool)] = [
    ("tag 1 around 1700000000", "c1 1a 65 53 f1 00", "23 04 51 95 4f c4 00 00 00 00 00", true),
    (
        "tag 1 around 2^53 + 1: the sum is a tie, rounded to even", "c1 1b 00 20 00 00 00 00 00 01",
        "23 04 68 00 00 00 00 00 00 00 00", true
    ),
    (
        "tag 1 around 2^53 + 1 + 978307200: t is a tie, rounded to even", "c1 1b 00 20 00 00 3a 4f c8 81",
        "23 04 68 00 00 01 d2 7e 44 00 00", true
    ),
    ("tag 1 around float64 0.1", "c1 fb 3f b9 99 99 99 99 99 9a", "23 04 2f 99 99 a0 00 00 00 00 00", true),
    (
        "tag 1001, 2^29 + 2^-23 s after 2001", "d9 03 e9 a1 05 82 36 1b 00 2d 27 e4 40 00 00 01",
        "23 04 51 69 3f 22 00 00 00 00 00", true
    ),
    (
        "untagged float64 1.0 (a version 1 record)", "fb 3f f0 00 00 00 00 00 00", "23 04 50 d2 7e 44 08 00 00 00 00",
        false
    ),
]

private struct Stamp: BuriSupport {
    var id: String
    var at: Date
    static let buri = BuriSchema<Stamp>(
        key: \.id, indexes: [.numeric("at", \.at, field: "at")], bucket: "stamps", keyField: "id")
}

@Suite("Format: the guesses an outside reader needed, settled")
struct FormatSettledTests {
    // MARK: §10 dates

    @Test(
        "§10: a date item's index value is t + 978307200 rounded once, t rounded as documented",
        arguments: dateVectors.indices)
    func dateIndexValue(_ i: Int) throws {
        let vector = dateVectors[i]
        let item = try CBORValue(decoding: bytes(fromHex: vector.item))
        let object: CBORValue = ["d": item]
        #expect(
            spacedHex(try dateIndex.tuples(of: object).first?.first?.encoded ?? []) == vector.element, "\(vector.name)")
        // A tagged date is a date in the "value" form too; an untagged number there is just a number.
        if vector.tagged {
            #expect(
                spacedHex(try valueIndex.tuples(of: object).first?.first?.encoded ?? []) == vector.element,
                "\(vector.name)")
        }
        // The Swift type reads the same Date, and indexes it as the same element.
        let date = try #require(item.dateValue)
        #expect(spacedHex(try date.numericIndexValue().encoded) == vector.element, "\(vector.name)")
        // The plain JSON `buri get` prints shows that very number.
        let shown = DatePaths.taggingStoredDates(object, at: [["d"]]).jsonString()
        let number = try #require(try CBORValue(json: shown)["d"])
        #expect(
            spacedHex(try IndexValue(number: number).encoded) == vector.element, "\(vector.name): shown as \(shown)")
    }

    @Test("§10: docs/FORMAT.md shows every date vector")
    func documentShowsDateVectors() throws {
        let flat = try flatFormat()
        for vector in dateVectors {
            #expect(flat.contains(vector.item) && flat.contains(vector.element), "docs/FORMAT.md lacks \(vector.name)")
        }
        #expect(flat.contains("*n* − 978307200, rounded"))
        #expect(flat.contains("ties to even"))
    }

    @Test(
        "§10: items that are not dates are refused, never rounded: an inexact bigfloat, tag 1 around text or a bignum, NaN"
    )
    func notDates() throws {
        // {5: [-1100, 1]}: 2^-1100 seconds after 1970 is no Double of seconds since 2001.
        let tiny = CBORValue.tagged(1001, .map([CBORMapEntry(key: .unsigned(5), value: [.int(-1100), .unsigned(1)])]))
        let refused: [CBORValue] = [
            tiny, .tagged(1, "1700000000"), .tagged(1, .tagged(2, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0]))),
            .tagged(
                1001, .map([CBORMapEntry(key: .unsigned(1), value: 5), CBORMapEntry(key: .unsigned(2), value: 0)])),
            .tagged(1, .float(.nan)),
        ]
        for item in refused {
            #expect(throws: BuriError.self, "\(item)") { try dateIndex.tuples(of: ["d": item]) }
        }
        // Dates a Swift type writes index as the number inside their tag 1.
        for seconds in [0.5, 1_700_000_000, -1.5, 1e15 + 0.25] {
            let item = CBORValue(date: Date(timeIntervalSince1970: seconds))
            guard case .tagged(1, let number) = item else { continue }
            #expect(try dateIndex.tuples(of: ["d": item]) == [[try IndexValue(number: number)]], "\(seconds)")
        }
    }

    @Test("§10: tools take a plain number in a date field as seconds since 1970, exactly or not at all")
    func numbersTakenAsDates() throws {
        #expect(try DatePaths.dateItem(ofSecondsSince1970: 1_700_000_000) == .tagged(1, 1_700_000_000))
        #expect(try DatePaths.dateItem(ofSecondsSince1970: .float(0.5)) == .tagged(1, .float(0.5)))
        #expect(throws: DatePaths.InputError.inexact(nearest: 0.10000002384185791)) {
            try DatePaths.dateItem(ofSecondsSince1970: .float(0.1))
        }
        #expect(throws: DatePaths.InputError.notADate) {
            try DatePaths.dateItem(ofSecondsSince1970: .unsigned(9_007_199_254_740_993))
        }
        // Version 1 dates are shown and exported as the date they stand for, in arrays and nested fields too.
        let old: CBORValue = ["a": ["due": .float(1)], "list": [.float(0), "x", .tagged(1, 5)], "other": .float(1)]
        let tagged = DatePaths.taggingStoredDates(old, at: [["a", "due"], ["list"], ["missing", "x"]])
        #expect(tagged["a"]?["due"] == .tagged(1, 978_307_201))
        #expect(tagged["list"] == [.tagged(1, 978_307_200), "x", .tagged(1, 5)])
        #expect(tagged["other"] == .float(1))
    }

    // MARK: §5 fields and fieldPaths

    @Test("§5: an index map with both fields and fieldPaths is one no tool computes")
    func fieldsAndFieldPaths() throws {
        let both = IndexDefinition(
            id: 1, name: "city", components: [.binary], fields: ["city"], fieldForms: [.date],
            fieldPaths: [["address", "city"]])
        #expect(both.uncomputableReason?.contains("both `fields` and `fieldPaths`") == true)
        #expect(both.datePaths.isEmpty)
        #expect(throws: BuriError.self) { try both.tuples(of: ["city": "a", "address": ["city": "b"]]) }
        #expect(try flatFormat().contains("An index map holding both is ambiguous"))

        // A bucket with such an index: the raw API still stores, queries and checks its entries.
        let t = try TestDatabase()
        let raw = try t.db.createBucket(named: "places", keyField: "id", indexes: [both])
        try raw.store([
            RawObject(
                key: "p", payload: (["id": "p", "city": "a"] as CBORValue).encoded(), indexValues: ["city": [["zzz"]]])
        ])
        #expect(try raw.keys(.index("city", equals: "zzz")) == ["p"])
        #expect(try t.db.check().isConsistent)
    }

    @Test("§5: a catalog entry with a component kind or field form Buri does not know is refused, not guessed")
    func unknownValuesOfKnownKeys() throws {
        let t = try TestDatabase()
        for (name, index) in [
            (
                "kinds",
                ["id": 1, "name": "x", "components": ["spatial"], "unique": false, "multiValued": false, "version": 0]
                    as CBORValue
            ),
            (
                "forms",
                [
                    "id": 1, "name": "x", "components": ["numeric"], "unique": false, "multiValued": false,
                    "version": 0,
                    "fields": ["x"], "fieldForms": ["duration"],
                ] as CBORValue
            ),
        ] {
            let descriptor: CBORValue = [
                "id": name == "kinds" ? 7 : 8, "name": .text(name), "schemaVersion": 0, "indexes": [index],
                "nextIndexId": 2,
            ]
            let batch = t.db.engine.makeBatch()
            batch.put(Keyspace.catalogKey(bucket: name), descriptor.encoded())
            try t.db.engine.commit(batch, conditions: nil, sync: false)
            #expect(throws: BuriError.self, "\(name)") { try t.db.rawBucket(named: name) }
        }
        let report = try t.db.check()
        #expect(report.problems.filter { $0.kind == .corruptCatalog }.count == 2, "\(report.problems)")
    }

    // MARK: §6b, §13.8 object counts

    @Test("§6b/§13: in a version 4 database a bucket lacks its count key only while it has no records")
    func countKeyAbsentOnlyWhenEmpty() throws {
        let t = try TestDatabase()
        let raw = try t.db.createBucket(named: "c", keyField: "id")
        let countKey = Keyspace.countKey(bucket: raw.descriptor.id)
        #expect(try t.db.engine.snapshot().get(countKey) == nil)
        #expect(try raw.count() == 0)
        #expect(try t.db.check().isConsistent)
        try raw.store([RawObject(key: "a", payload: (["id": "a"] as CBORValue).encoded())])
        #expect(try t.db.engine.snapshot().get(countKey) == Keyspace.countValue(1))
        _ = try raw.delete(keys: ["a"])
        #expect(try t.db.engine.snapshot().get(countKey) == Keyspace.countValue(0))
        // Records without a count in a version 4 database breach invariant 8.
        try raw.store([RawObject(key: "b", payload: (["id": "b"] as CBORValue).encoded())])
        let batch = t.db.engine.makeBatch()
        batch.delete(countKey)
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        let report = try t.db.check()
        #expect(report.problems.map(\.kind) == [.wrongCount], "\(report.problems)")
        let flat = try flatFormat()
        #expect(flat.contains("It is absent only when that number is 0"))
        #expect(!flat.contains("or the bucket was not written since the database was upgraded"))
    }

    // MARK: §11 tokens

    private func numbered(_ t: TestDatabase, count: Int) throws -> RawBucket {
        let raw = try t.db.createBucket(
            named: "n", keyField: "id",
            indexes: [IndexDefinition(id: 0, name: "v", components: [.numeric], fields: ["v"])])
        try raw.store(
            (0..<count).map { i in
                RawObject(
                    key: "k\(i)", payload: (["id": .text("k\(i)"), "v": .int(Int64(i))] as CBORValue).encoded(),
                    indexValues: ["v": [[IndexValue(Int64(i))]]])
            })
        return raw
    }

    @Test("§11: results skipped by offset are not counted in a token, nor are they positions")
    func offsetIsNotCounted() throws {
        let t = try TestDatabase()
        let raw = try numbered(t, count: 10)
        let query = Query.index("v", in: 0...).offset(2).limit(5)
        let first = try raw.keyPage(query, size: 3)
        #expect(first.items == ["k2", "k3", "k4"])
        let token = try #require(first.next)
        #expect(token.returned == 3)
        #expect(
            token.position
                == Keyspace.indexEntryKey(
                    prefix: Keyspace.indexPrefix(bucket: raw.descriptor.id, index: 1),
                    tuple: IndexValue(Int64(4)).encoded, objectKey: "k4"))
        let second = try raw.keyPage(query.after(token), size: 3)
        #expect(second.items == ["k5", "k6"])
        #expect(second.next == nil)
        #expect(try flatFormat().contains("results skipped by `offset` are not counted in *n*"))
    }

    @Test("§11: a page carries a token only if a result follows it within the limit")
    func tokenOnlyWhenMore() throws {
        let t = try TestDatabase()
        let raw = try numbered(t, count: 6)
        let all = Query.index("v", in: 0...)
        let first = try raw.keyPage(all, size: 3)
        #expect(first.next != nil)
        let last = try raw.keyPage(all.after(first.next), size: 3)
        #expect(last.items == ["k3", "k4", "k5"] && last.next == nil, "a page ending on the last result")
        #expect(try raw.keyPage(all, size: 6).next == nil)
        #expect(try raw.keyPage(all, size: 7).next == nil)
        #expect(try raw.keyPage(all.limit(3), size: 3).next == nil, "a page ending on the limit-th result")
        #expect(try raw.keyPage(all.offset(6), size: 3).next == nil, "an empty page")
        #expect(try raw.keyPage(.all.descending(), size: 5).next != nil)
        #expect(try flatFormat().contains("**only if there is more**"))
    }

    @Test("§11: an exact condition given as an array is the same query as the variadic one, unlike a one-value range")
    func exactConditions() throws {
        let variadic = Query.index("locale_age", equals: "EN", 30)
        let array = Query.index("locale_age", equals: ["EN", 30] as [IndexValue])
        #expect(ContinuationFormat.signature(of: array) == ContinuationFormat.signature(of: variadic))
        let range = Query.index("locale", from: .inclusive("EN"), to: .inclusive("EN"))
        #expect(
            spacedHex(ContinuationFormat.signature(of: .index("locale", equals: ["EN"] as [IndexValue])))
                == "00 01 06 6c 6f 63 61 6c 65 01 30 45 4e 00 00 00")
        #expect(
            spacedHex(ContinuationFormat.signature(of: range))
                == "00 01 06 6c 6f 63 61 6c 65 00 01 01 30 45 4e 00 00 01 30 45 4e 00 00")
        let fingerprint = ContinuationFormat.fingerprint(of: .index("locale", equals: "EN"))
        #expect(
            spacedHex((0..<8).map { UInt8(truncatingIfNeeded: fingerprint >> (56 - 8 * $0)) })
                == "6b f9 a5 60 64 40 2a 78")
        let flat = try flatFormat()
        #expect(
            flat.contains("00 01 06 6c 6f 63 61 6c 65 01 30 45 4e 00 00 00") && flat.contains("6b f9 a5 60 64 40 2a 78")
        )
    }

    // MARK: §10 schema versions

    @Test(
        "§10: objects stored without their Swift type carry the bucket's schema version",
        arguments: [Engine.leveldb, .memory])
    func rawObjectsCarryTheBucketsSchemaVersion(_ engine: Engine) throws {
        let t = try TestDatabase(engine)
        let raw = try t.db.createBucket(named: "v", keyField: "id", schemaVersion: 3)
        let payload = { (key: String) in (["id": .text(key)] as CBORValue).encoded() }
        try raw.store([
            RawObject(key: "a", payload: payload("a")), RawObject(key: "b", payload: payload("b"), schemaVersion: 5),
        ])
        #expect(try raw.record(forKey: "a")?.schemaVersion == 3)
        #expect(try raw.record(forKey: "b")?.schemaVersion == 5)
        // Staged imports, into the bucket and creating one.
        let into = try t.db.stageImport(into: "v")
        try into.store([RawObject(key: "c", payload: payload("c"))])
        let creating = try t.db.stageImport(creating: "w", keyField: "id", schemaVersion: 7)
        try creating.store([RawObject(key: "d", payload: payload("d"))])
        try t.db.publish([into, creating])
        #expect(try t.db.rawBucket(named: "v").record(forKey: "c")?.schemaVersion == 3)
        #expect(try t.db.rawBucket(named: "w").record(forKey: "d")?.schemaVersion == 7)
        #expect(try flatFormat().contains("so a record never claims a version its bucket does not have"))
    }

    // MARK: §13 invariant 9

    @Test(
        "§13: check reports an index value that is not what the object's fields give, a date included",
        arguments: [Engine.leveldb, .memory])
    func indexValuesMatchFields(_ engine: Engine) throws {
        let t = try TestDatabase(engine)
        let raw = try t.db.createBucket(
            named: "e", keyField: "id",
            indexes: [
                IndexDefinition(id: 0, name: "due", components: [.numeric], fields: ["due"], fieldForms: [.date]),
                IndexDefinition(id: 0, name: "tags", components: [.binary], multiValued: true, fields: ["tags"]),
                IndexDefinition(id: 0, name: "free", components: [.numeric], computed: true),
            ])
        func object(_ key: String, due: CBORValue, tags: [CBORValue] = []) -> [UInt8] {
            (["id": .text(key), "due": due, "tags": .array(tags)] as CBORValue).encoded()
        }
        try raw.store([
            // Consistent: a tagged date, a version 1 date (seconds since 2001) indexed as seconds since 1970.
            RawObject(
                key: "ok", payload: object("ok", due: .tagged(1, 1_700_000_000), tags: ["x", "y", "x"]),
                indexValues: ["due": [[1_700_000_000]], "tags": [["y"], ["x"]], "free": [[42]]]),
            RawObject(
                key: "v1", payload: object("v1", due: .float(1)),
                indexValues: ["due": [[try IndexValue(978_307_201.0)]]]),
        ])
        #expect(try t.db.check().isConsistent)
        try raw.store([
            // The date of a plain number read the 2001 way, indexed as if it were 1970 seconds.
            RawObject(
                key: "wrong", payload: object("wrong", due: .unsigned(1_700_000_000)),
                indexValues: ["due": [[1_700_000_000]]]),
            // A tag missing from the index, and a field that cannot be a date.
            RawObject(
                key: "tags", payload: object("tags", due: .tagged(1, 0), tags: ["x", "y"]),
                indexValues: ["due": [[0]], "tags": [["x"]]]),
            RawObject(key: "text", payload: object("text", due: "soon")),
        ])
        let report = try t.db.check(repair: true)
        let problems = report.problems.filter { $0.kind == .wrongIndexValue }
        #expect(problems.map(\.key) == ["tags", "text", "wrong"], "\(report.problems)")
        #expect(problems.allSatisfy { !$0.repaired && $0.bucket == "e" })
        #expect(problems.first { $0.key == "wrong" }?.index == "due")
        #expect(problems.first { $0.key == "wrong" }?.detail.contains("2678307200") == true, "\(problems)")
        #expect(problems.first { $0.key == "tags" }?.index == "tags")
        #expect(report.problems.count == 3, "no other problem: \(report.problems)")
        #expect(!report.isConsistent)
        // The Swift type's own stores agree with its fields.
        let stamps = try t.db.bucket(Stamp.self)
        try stamps.store([
            Stamp(id: "s", at: Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23)),
            Stamp(id: "t", at: Date(timeIntervalSince1970: 0.1)),
        ])
        #expect(try t.db.check().problems.filter { $0.bucket == "stamps" }.isEmpty)
    }
}
