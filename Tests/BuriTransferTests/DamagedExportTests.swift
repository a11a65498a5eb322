import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

/// The people of a damaged database: a binary and a numeric index, through which the salvage
/// finds the keys of records it cannot list.
struct Person: BuriSupport, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Person>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale, field: "locale"), .numeric("age", \.age, field: "age")],
        keyField: "objectId"
    )
}

@Suite("BuriTransfer: a damaged database fails to export, or exports what it can with skipDamaged")
struct DamagedExportTests {
    static let people: [Person] = (0..<1000).map { i in
        Person(
            objectId: String(format: "p%04d", i), name: "name \(i) lorem ipsum dolor",
            locale: ["DE", "EN", "FR"][i % 3], age: i % 90)
    }

    /// 1000 objects compacted into one table, then eight 0xFF bytes written at byte 5000 of it
    /// (inside a block of records): the database, and the keys whose records cannot be read.
    static func damagedDatabase(_ directory: TemporaryDirectory) throws -> (BuriDatabase, damaged: [String]) {
        let path = directory.path("damaged.buri")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(people)
        try db.compact()
        db.close()
        let table = try #require(
            try FileManager.default.contentsOfDirectory(atPath: path).first { $0.hasSuffix(".ldb") })
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path + "/" + table)))
        for i in 5000..<5008 { bytes[i] = 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + table))
        let reopened = try BuriDatabase(path: path)
        let bucket = try reopened.bucket(Person.self)
        var damaged: [String] = []
        for person in people {
            do { _ = try bucket.object(forKey: person.objectId) } catch { damaged.append(person.objectId) }
        }
        try #require(!damaged.isEmpty && damaged.count < 500, "the damage must hit some records: \(damaged.count)")
        return (reopened, damaged)
    }

    @Test func withoutSkipDamagedTheExportFailsAndLeavesNoFile() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let (db, _) = try Self.damagedDatabase(directory)
        defer { db.close() }
        let url = URL(fileURLWithPath: directory.path("out.jsonl"))
        let error = transferError { try db.export(to: url) }
        #expect(error?.kind == .failure)
        #expect(error?.message.contains("damaged") == true, "\(String(describing: error))")
        #expect(error?.underlying is BuriError)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["damaged.buri"])
    }

    @Test func skipDamagedSavesEveryReadableRecordAndReportsEveryLostKey() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let (db, damaged) = try Self.damagedDatabase(directory)
        defer { db.close() }
        let readable = Self.people.map(\.objectId).filter { !damaged.contains($0) }
        let url = URL(fileURLWithPath: directory.path("salvage.jsonl"))
        let report = try db.export(to: url, options: ExportOptions(skipDamaged: true))

        #expect(!report.isComplete)
        #expect(report.exported == readable.count)
        #expect(report.skippedRecords.map(\.key) == damaged)
        #expect(report.skippedRecords.allSatisfy { $0.bucket == "Person" && $0.reason.contains("damaged") })
        // The record walk stopped at the damage: the range it could not list holds every damaged
        // key, between two readable ones, and the index entries named at least those keys.
        #expect(report.skippedRanges.count == 1)
        let range = try #require(report.skippedRanges.first)
        let after = try #require(range.after)
        let before = try #require(range.before)
        #expect(readable.contains(after) && readable.contains(before))
        #expect(
            damaged.allSatisfy {
                after.utf8.lexicographicallyPrecedes($0.utf8) && $0.utf8.lexicographicallyPrecedes(before.utf8)
            })
        #expect(range.keysFromIndexes >= damaged.count)
        #expect(range.unreadIndexes.isEmpty)

        // The salvage is a whole export: restored, it holds exactly the readable objects.
        let copy = directory.path("copy.buri")
        let restored = try BuriDatabase.restore(from: .file(url), to: copy)
        #expect(restored.objects == readable.count)
        let reopened = try BuriDatabase(path: copy)
        defer { reopened.close() }
        #expect(try reopened.rawBucket(named: "Person").keys(.all) == readable)
        let english = Self.people.filter { $0.locale == "EN" && !damaged.contains($0.objectId) }.map(\.objectId)
        #expect(try reopened.rawBucket(named: "Person").keys(.index("locale", equals: IndexValue("EN"))) == english)

        // Over a line writer: the same lines and the same report.
        var lines: [String] = []
        let again = try db.export(options: ExportOptions(skipDamaged: true)) { lines.append($0) }
        #expect(again == report)
        #expect(lines.map { $0 + "\n" }.joined() == (try String(contentsOf: url, encoding: .utf8)))
    }
}
