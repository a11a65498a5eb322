import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

@Suite("BuriTransfer: named values travel in exports and come back with restore")
struct NamedValueTransferTests {
    /// Every line of the database's export.
    func exportLines(_ db: BuriDatabase, _ options: ExportOptions = ExportOptions()) throws -> [String] {
        var lines: [String] = []
        try db.export(options: options) { lines.append($0) }
        return lines
    }

    @Test(arguments: Engine.allCases) func exportRestoreExportGivesTheSameBytes(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(Date(timeIntervalSince1970: 0.5), for: "lastSync")
        try t.db.values.set(Data([0, 0xff, 0]), for: "bytes\u{0}name")
        try t.db.values.set([Double.infinity, 1.5, -0.0], for: "floats")
        try t.db.values.set(Int64.min, for: "min")
        let lines = try exportLines(t.db)
        #expect(lines.first == ExportFormat.header(version: 5))
        #expect(lines.contains(#"{"value":"min","data":-9223372036854775808}"#))
        let copy = try BuriDatabase.inMemory()
        defer { copy.close() }
        let file = TemporaryDirectory("buri-values")
        let path = file.path("dump.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let report = try copy.restore(from: .file(path))
        #expect(report.values == 4 && report.buckets.isEmpty)
        #expect(try exportLines(copy) == lines)
        #expect(try copy.values.get(Date.self, for: "lastSync") == Date(timeIntervalSince1970: 0.5))
        #expect(try copy.values.get(Data.self, for: "bytes\u{0}name") == Data([0, 0xff, 0]))
        #expect(try copy.values.get(Int64.self, for: "min") == Int64.min)
        // Restoring into a database that has named values is refused, and writes nothing.
        #expect(throws: TransferError.self) { try copy.restore(from: .file(path)) }
    }

    @Test func anExportWithoutValuesKeepsItsOlderFormat() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        #expect(try exportLines(db) == [ExportFormat.header(version: 3)])
        try db.values.set(1, for: "one")
        #expect(try exportLines(db, ExportOptions(includesValues: false)) == [ExportFormat.header(version: 3)])
        #expect(try exportLines(db, ExportOptions(buckets: [])) == [ExportFormat.header(version: 3)])
        #expect(
            try exportLines(db, ExportOptions(buckets: [], includesValues: true)) == [
                ExportFormat.header(version: 5), #"{"value":"one","data":1}"#,
            ])
    }
}
