import Buri
import BuriCodec
import Foundation
import Testing

@Suite("buri export --skip-damaged: every readable record, what was skipped listed, exit 1")
struct SkipDamagedToolTests {
    /// The keys of the records lines of an export, in order.
    static func exportedKeys(_ text: String) throws -> [String] {
        try text.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let value = try CBORValue(jsonBytes: Array(line.utf8))
            return value["object"] == nil ? nil : value["key"]?.stringValue
        }
    }

    @Test func aDamagedTableIsSalvagedAroundItsBadBlockAndEveryLostKeyIsNamed() throws {
        let sandbox = try Sandbox()
        let (db, damaged) = try DamageToolTests.damagedTable(sandbox)
        let all = DamageToolTests.people.map(\.objectId)
        let readable = all.filter { !damaged.contains($0) }
        let output = sandbox.path("salvage.jsonl")

        let run = try buri("export", db, "--skip-damaged", "-o", output)
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.isEmpty)
        let text = try sandbox.read("salvage.jsonl")
        #expect(text.hasPrefix(ExportHeader.line + "\n"))
        // Every readable record, in key order, and none of the damaged ones.
        #expect(try Self.exportedKeys(text) == readable)
        // Each damaged key is named, and the range the record walk could not list.
        for key in damaged {
            #expect(run.stderr.contains("buri: skipped: bucket 'Person', key \"\(key)\": "), "\(key): \(run.stderr)")
        }
        #expect(run.stderr.contains("could not be listed"), "\(run.stderr)")
        #expect(
            run.stderr.contains(
                "buri: export incomplete: \(readable.count) objects saved; skipped \(damaged.count) unreadable records and 1 key range"
            ), "\(run.stderr)")
        // The salvage is a real export: restored, it holds exactly the readable objects with their indexes.
        let copy = sandbox.path("copy.buri")
        let restored = try buri("restore", copy, output)
        expectSuccess(restored)
        #expect(try buri("keys", copy, "Person").lines == readable)
        let expectedEN = DamageToolTests.people.filter { $0.locale == "EN" && !damaged.contains($0.objectId) }.map(
            \.objectId)
        #expect(try buri("query", copy, "Person", "locale", "--equals", "EN").lines == expectedEN)
        expectSuccess(try buri("check", copy))

        // --json: the same, as one JSON object on stderr; to standard output the records.
        let json = try buri("export", db, "Person", "--skip-damaged", "--json")
        #expect(json.status == 1, "\(json)")
        #expect(try Self.exportedKeys(json.stdout) == readable)
        let report = try CBORValue(jsonBytes: Array(json.stderr.utf8))
        #expect(report["exported"] == .unsigned(UInt64(readable.count)), "\(json.stderr)")
        guard case .array(let records)? = report["skippedRecords"], case .array(let ranges)? = report["skippedRanges"]
        else {
            Issue.record("no skippedRecords/skippedRanges: \(json.stderr)")
            return
        }
        #expect(records.compactMap { $0["key"]?.stringValue } == damaged)
        #expect(
            records.allSatisfy { $0["bucket"] == "Person" && $0["reason"]?.stringValue?.contains("damaged") == true })
        #expect(ranges.count == 1)
        let after = try #require(ranges.first?["after"]?.stringValue)
        let before = try #require(ranges.first?["before"]?.stringValue)
        // The range holds every damaged key and lies between readable ones.
        #expect(
            damaged.allSatisfy {
                after.utf8.lexicographicallyPrecedes($0.utf8) && $0.utf8.lexicographicallyPrecedes(before.utf8)
            })
        #expect(readable.contains(after) && readable.contains(before))
        #expect(ranges.first?["keysFromIndexes"].flatMap { $0.int64Value } ?? 0 >= Int64(damaged.count))
    }

    @Test func withoutTheFlagExportStillFailsAndAHealthyDatabaseExportsTheSameWithIt() throws {
        let sandbox = try Sandbox()
        let (db, _) = try DamageToolTests.damagedTable(sandbox)
        expectFailure(
            try buri("export", db, "-o", sandbox.path("x.jsonl")), status: 3,
            mentioning: ["damaged", "bucket 'Person'"])
        #expect(!sandbox.exists("x.jsonl"))
        expectFailure(try buri("export", db, "--json"), status: 2, mentioning: ["--skip-damaged"])
        // Nothing damaged: the flag changes nothing, exit 0, no report.
        let healthy = try makeFixture(sandbox)
        let plain = try buri("export", healthy)
        let skipping = try buri("export", healthy, "--skip-damaged", "--json")
        expectSuccess(skipping)
        #expect(skipping.stdout == plain.stdout)
    }
}

enum ExportHeader {
    static let line = #"["buri-export",3]"#
}
