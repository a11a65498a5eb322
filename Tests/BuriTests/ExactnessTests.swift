import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

/// Wider integers may be indexed too: exactly, or refused.
extension Int128: NumericIndexable {}

/// A task with a date index that names its field, so tools compute it as Swift does.
struct Chore: BuriSupport, Equatable {
    var id: String
    var title: String
    var dueDate: Date
    var reminders: [Date]
    var doneAt: Date?
    var estimate: Int128

    static let buri = BuriSchema<Chore>(
        key: \.id,
        indexes: [
            .numeric("due", \.dueDate, field: "dueDate"),
            .numeric("reminder", \.reminders, field: "reminders"),
            .numeric("done", \.doneAt, field: "doneAt"),
            .compound("title_due", .binary(\.title, field: "title"), .numeric(\.dueDate, field: "dueDate")),
            .numeric("estimate", \.estimate, field: "estimate"),
        ],
        keyField: "id"
    )
}

/// The same bucket declared without fields and with a computed index: tools cannot compute it.
struct OpaqueTask: BuriSupport {
    var id: String
    var title: String
    var dueDate: Date
    var blob: [UInt8]

    static let buri = BuriSchema<OpaqueTask>(
        key: \.id,
        indexes: [
            .numeric("due", \.dueDate),
            .binary("blob", \.blob, field: "blob"),
            .computed("initial", components: [.binary]) { task in [[IndexValue(String(task.title.prefix(1)))]] },
        ],
        bucket: "opaque"
    )
}

/// A declaration whose `field:` names the wrong property.
struct MisnamedField: BuriSupport {
    var id: String
    var score: Int
    var other: Int

    static let buri = BuriSchema<MisnamedField>(key: \.id, indexes: [.numeric("score", \.score, field: "other")])
}

@Suite("Index numbers are exact or refused, a Date is seconds since 1970, the catalog says how tools compute indexes")
struct IndexExactnessTests {
    // MARK: Numbers

    @Test func numbersFromPayloadsAreExactOrRefused() throws {
        #expect(try IndexValue(number: .negative(UInt64(Int64.max))) == IndexValue(Int64.min))
        #expect(try IndexValue(number: .negative(.max)) == IndexValue(-0x1p64))  // -2^64 is a Double
        #expect(try IndexValue(number: .unsigned(.max)) == IndexValue(UInt64.max))
        #expect(try IndexValue(number: .unsigned(1 << 53 + 1)) != IndexValue(0x1p53))  // 2^53 + 1 stays itself
        #expect(try IndexValue(number: .float(-0.0)) == IndexValue(0))
        #expect(try IndexValue(number: .float(.infinity)) == IndexValue(Double.infinity))
        // -2^63 - 1 and -2^64 + 1 are neither 64-bit integers nor Doubles: refused, not clamped.
        for n: UInt64 in [UInt64(Int64.max) + 1, .max - 1] {
            #expect(throws: BuriError.self) { try IndexValue(number: .negative(n)) }
        }
        #expect(throws: BuriError.self) { try IndexValue(number: .float(.nan)) }
        #expect(throws: BuriError.self) { try IndexValue(number: "12") }
        // A double-exact value below Int64.min is accepted as that double.
        #expect(try IndexValue(number: .negative((1 << 63) + (1 << 11) - 1)) == IndexValue(-0x1p63 - 0x1p11))
    }

    @Test func wideIntegersAreIndexedExactlyOrRefusedByTheSwiftAPI() throws {
        #expect(try IndexValue(Int128(1) << 70) == IndexValue(0x1p70))
        #expect(try IndexValue(Int128(UInt64.max) + 1) == IndexValue(0x1p64))
        #expect(throws: BuriError.self) { try IndexValue(Int128(UInt64.max) + 2) }
        #expect(throws: BuriError.self) { try IndexValue(-Int128(UInt64.max) - 2) }

        let t = try TestDatabase()
        let tasks = try t.db.bucket(Chore.self)
        let base = Chore(
            id: "t", title: "a", dueDate: Date(timeIntervalSince1970: 0), reminders: [], doneAt: nil, estimate: 5)
        var tooBig = base
        tooBig.estimate = Int128(UInt64.max) + 2  // fits CBOR (no), nor an index number
        #expect(throws: BuriError.self) { try tasks.store(tooBig) }
        var inRange = base
        inRange.estimate = -Int128(UInt64.max) - 1  // -2^64: a CBOR integer and a Double
        try tasks.store(inRange)
        #expect(try tasks.object(forKey: "t")?.estimate == -Int128(UInt64.max) - 1)
        #expect(try tasks.keys(.index("estimate", equals: IndexValue(-0x1p64))) == ["t"])
        var notADouble = base
        notADouble.id = "u"
        notADouble.estimate = Int128(Int64.min) - 1  // a CBOR integer, but no index number
        let error = #expect(throws: BuriError.self) { try tasks.store(notADouble) }
        guard case .invalidIndexValue(let bucket, let key, let index, let reason)? = error else {
            Issue.record("expected invalidIndexValue, got \(String(describing: error))")
            return
        }
        #expect(bucket == "Chore" && key == "u" && index == "estimate")
        #expect(reason.contains("-9223372036854775809"), "\(reason)")
        #expect(try tasks.object(forKey: "u") == nil)
    }

    // MARK: Dates

    @Test func aDateIsTheSameNumberInItsRecordAndItsIndex() throws {
        let t = try TestDatabase()
        let tasks = try t.db.bucket(Chore.self)
        let dates = [
            Date(timeIntervalSince1970: 1_700_000_000), Date(timeIntervalSince1970: 1_700_000_000.25),
            Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23), Date(timeIntervalSinceReferenceDate: 0.1),
            Date(timeIntervalSince1970: -86_400.5), Date.distantFuture, Date(),
        ]
        for (i, date) in dates.enumerated() {
            let task = Chore(
                id: "t\(i)", title: "x", dueDate: date, reminders: [date, date.addingTimeInterval(60)], doneAt: date,
                estimate: 1)
            try tasks.store(task)
            #expect(try tasks.object(forKey: task.id) == task, "\(date.timeIntervalSinceReferenceDate)")
            // The payload holds a date item whose seconds since 1970 are the index value.
            let record = try #require(try tasks.raw.record(forKey: task.id))
            let item = try #require(try CBORValue(decoding: record.payload)["dueDate"])
            #expect(item.isTaggedDate)
            #expect(item.dateValue == date)
            let shown = try CBORValue(json: item.jsonString()).doubleValue
            #expect(shown == date.timeIntervalSince1970)
            #expect(try tasks.keys(.index("due", equals: IndexValue(date.timeIntervalSince1970))) == [task.id])
            #expect(
                try tasks.keys(.index("reminder", equals: IndexValue(date.timeIntervalSince1970 + 60))).contains(
                    task.id))
        }
        #expect(try t.db.check().isConsistent)
    }

    // MARK: What the catalog records

    @Test func declarationsRecordTheirFieldsFormsAndComputedIndexes() throws {
        let t = try TestDatabase()
        _ = try t.db.bucket(Chore.self)
        let task = try #require(try t.db.bucketInfo(named: "Chore"))
        #expect(
            task.indexes.map(\.fields) == [["dueDate"], ["reminders"], ["doneAt"], ["title", "dueDate"], ["estimate"]])
        #expect(task.indexes.map(\.fieldForms) == [[.date], [.date], [.date], [.value, .date], nil])
        #expect(task.indexes.allSatisfy { $0.uncomputableReason == nil })

        _ = try t.db.bucket(OpaqueTask.self)
        let opaque = try #require(try t.db.bucketInfo(named: "opaque"))
        #expect(opaque.indexes.map(\.fields) == [nil, nil, nil])
        #expect(opaque.indexes.map(\.computed) == [nil, true, true])
        #expect(opaque.indexes[0].uncomputableReason?.contains("names no field") == true)
        #expect(opaque.indexes[2].uncomputableReason?.contains("computed by Swift code") == true)
        #expect(throws: BuriError.self) { try opaque.indexes[0].tuples(of: ["dueDate": .tagged(1, 0)]) }
    }

    /// The same bucket, first declared without fields, then with them.
    struct Before: BuriSupport {
        var id: String
        var age: Int
        static let buri = BuriSchema<Before>(key: \.id, indexes: [.numeric("age", \.age)], bucket: "evolving")
    }

    struct After: BuriSupport {
        var id: String
        var age: Int
        static let buri = BuriSchema<After>(
            key: \.id, indexes: [.numeric("age", \.age, field: "age")], bucket: "evolving")
    }

    @Test func namingAFieldLaterRecordsItWithoutRebuildingTheIndex() throws {
        let t = try TestDatabase()
        try t.db.bucket(Before.self).store(Before(id: "a", age: 3))
        let before = try #require(try t.db.bucketInfo(named: "evolving"))
        #expect(before.indexes[0].fields == nil)
        _ = try t.db.bucket(After.self)
        let after = try #require(try t.db.bucketInfo(named: "evolving"))
        #expect(after.indexes[0].fields == ["age"])
        #expect(after.indexes[0].id == before.indexes[0].id)
        #expect(try t.db.bucket(After.self).keys(.index("age", equals: 3)) == ["a"])
    }

    @Test func toolsComputeExactlyWhatTheDeclarationsCompute() throws {
        let t = try TestDatabase()
        let tasks = try t.db.bucket(Chore.self)
        let objects = [
            Chore(
                id: "a", title: "é", dueDate: Date(timeIntervalSince1970: 5), reminders: [], doneAt: nil, estimate: 0),
            Chore(
                id: "b", title: "e\u{301}", dueDate: Date(timeIntervalSinceReferenceDate: 0.1),
                reminders: [.distantPast, .distantPast],
                doneAt: Date(timeIntervalSince1970: 1.5), estimate: -Int128(UInt64.max) - 1),
        ]
        try tasks.store(objects)
        for object in objects {
            let record = try #require(try tasks.raw.record(forKey: object.id))
            let payload = try CBORValue(decoding: record.payload)
            let stored = record.indexValues
            for definition in tasks.raw.descriptor.indexes {
                let computed = try definition.tuples(of: payload)
                #expect(Set(computed) == Set(stored[definition.name] ?? []), "\(object.id) \(definition.name)")
            }
        }
    }

    @Test func aFieldThatDoesNotGiveTheDeclaredValueFailsTheFirstStore() throws {
        let t = try TestDatabase()
        let bucket = try t.db.bucket(MisnamedField.self)
        let error = #expect(throws: BuriError.self) { try bucket.store(MisnamedField(id: "m", score: 1, other: 2)) }
        guard case .invalidIndexDefinition(let bucketName, let index, let reason)? = error else {
            Issue.record("expected invalidIndexDefinition, got \(String(describing: error))")
            return
        }
        #expect(bucketName == "MisnamedField" && index == "score")
        #expect(
            reason.contains("field 'other'") && reason.contains("gives (2)") && reason.contains("computes (1)"),
            "\(reason)")
        #expect(try bucket.count() == 0)
    }

    // MARK: Raw payloads

    @Test func rawPayloadsWithARepeatedMapKeyAreRefused() throws {
        let t = try TestDatabase()
        let raw = try t.db.createBucket(named: "raw")
        let repeated = CBORValue.map([
            CBORMapEntry(key: "a", value: 1), CBORMapEntry(key: "b", value: [["k": 1, "k": 2]]),
        ])
        #expect(throws: BuriError.self) { try raw.store([RawObject(key: "x", payload: repeated.encoded())]) }
        // Canonically equal but byte-different keys are different keys.
        let distinct = CBORValue.map([CBORMapEntry(key: "é", value: 1), CBORMapEntry(key: "e\u{301}", value: 2)])
        try raw.store([RawObject(key: "y", payload: distinct.encoded())])
        #expect(try raw.count() == 1)
    }

    // MARK: Format version 2

    /// A database whose header says version 1 and whose record holds a date the version 1 way.
    private func makeVersion1(_ t: TestDatabase, date: Date) throws {
        let raw = try t.db.createBucket(
            named: "Task", keyField: "id",
            indexes: [
                IndexDefinition(id: 0, name: "due", components: [.numeric])
            ])
        let legacy: CBORValue = [
            "id": "old", "title": "old", "dueDate": .float(date.timeIntervalSinceReferenceDate), "reminders": [],
            "estimate": 1,
        ]
        try raw.store([
            RawObject(
                key: "old", payload: legacy.encoded(),
                indexValues: ["due": [[try IndexValue(date.timeIntervalSince1970)]]])
        ])
        t.db.close()
        let storage = try Database(path: t.path, options: Options())
        try storage.put(Keyspace.headerKey, Keyspace.headerValue(version: 1))
        storage.close()
        try t.reopen()
    }

    private func headerOnDisk(_ t: TestDatabase) throws -> [UInt8]? {
        try t.db.engine.snapshot().get(Keyspace.headerKey)
    }

    @Test func aVersion1DatabaseIsReadAsItIsAndUpgradedByItsFirstWrite() throws {
        let t = try TestDatabase()
        let date = Date(timeIntervalSince1970: 1_600_000_000.5)
        try makeVersion1(t, date: date)
        #expect(t.db.formatVersion == 1)
        let tasks = try t.db.rawBucket(named: "Task")
        // Reading, counting and deleting nothing write no header.
        #expect(try tasks.count() == 1)
        #expect(try tasks.delete(keys: ["absent"]) == 0)
        #expect(try headerOnDisk(t) == Keyspace.headerValue(version: 1))
        // Its version 1 record reads with its date as seconds since 2001.
        let payload = try CBORValue(decoding: try #require(try tasks.record(forKey: "old")).payload)
        #expect(payload["dueDate"]?.dateValue == date)
        struct Loose: Codable { var dueDate: Date }
        #expect(try CBORDecoder().decode(Loose.self, from: payload.encoded()).dueDate == date)

        // The first store writes the current (version 4) header in the same batch.
        let fresh: CBORValue = ["id": "new", "dueDate": CBORValue(date: date)]
        try tasks.store([
            RawObject(
                key: "new", payload: fresh.encoded(),
                indexValues: ["due": [[try IndexValue(date.timeIntervalSince1970)]]])
        ])
        #expect(t.db.formatVersion == Int(Keyspace.formatVersion))
        #expect(try headerOnDisk(t) == Keyspace.headerValue())
        try t.reopen()
        #expect(t.db.formatVersion == Int(Keyspace.formatVersion))
        let again = try t.db.rawBucket(named: "Task")
        #expect(try again.keys(.index("due", equals: IndexValue(date.timeIntervalSince1970))) == ["new", "old"])
        for key in ["new", "old"] {
            let item = try CBORValue(decoding: try #require(try again.record(forKey: key)).payload)["dueDate"]
            #expect(item?.dateValue == date, "\(key)")
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test func aCatalogChangeAloneUpgradesTheHeaderToo() throws {
        let t = try TestDatabase()
        try makeVersion1(t, date: Date(timeIntervalSince1970: 0))
        _ = try t.db.createBucket(named: "another")
        #expect(try headerOnDisk(t) == Keyspace.headerValue())
        // The upgrade counted the existing bucket in the same commit.
        let task = try #require(try t.db.bucketInfo(named: "Task"))
        #expect(try t.db.engine.snapshot().get(Keyspace.countKey(bucket: task.id)) == Keyspace.countValue(1))
    }
}
