import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

@Suite("BuriTransfer: an export imported or restored gives back the same buckets, byte for byte")
struct RoundTripTests {
    @Test func eachBucketOfAnExportImportsIntoANewBucketExactlyAsItWas() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let source = try fixtureDatabase(in: directory)
        defer { source.close() }
        let url = URL(fileURLWithPath: directory.path("all.jsonl"))
        let report = try source.export(to: url)
        #expect(report.isComplete)
        #expect(report.exported == fixtureItems.count)
        let text = try String(contentsOf: url, encoding: .utf8)
        // Format 4: the computed index's values travel with each record.
        #expect(text.hasPrefix(ExportFormat.header(version: 4) + "\n"))
        #expect(text.contains(#""key":"nul\u0000key""#), "a NUL byte is written escaped")
        #expect(text == (try exportText(source)), "to a file and to a line writer alike")
        #expect(!FileManager.default.fileExists(atPath: url.path + ".partial-\(getpid())"))

        let copy = try BuriDatabase.inMemory()
        defer { copy.close() }
        let items = try copy.importJSONLines(from: .file(url), into: "items")
        #expect(items.createdBucket)
        #expect(items.objectsRead == fixtureItems.count)
        #expect(items.objectsBefore == 0 && items.objectsAfter == fixtureItems.count)
        #expect(items.skippedBuckets.isEmpty, "the other bucket has no records to skip")
        #expect(items.unfilledIndexes.isEmpty)
        let empty = try copy.importJSONLines(from: .file(url), into: "empty")
        #expect(empty.createdBucket && empty.objectsRead == 0 && empty.objectsAfter == 0)
        #expect(empty.skippedBuckets == ["items": fixtureItems.count])

        for name in ["items", "empty"] {
            #expect(try records(copy, name) == records(source, name), "bucket \(name)")
            #expect(try indexes(copy, name) == indexes(source, name), "bucket \(name)")
            #expect(
                try copy.rawBucket(named: name).descriptor.keyField == source.rawBucket(named: name).descriptor.keyField
            )
            for index in try source.rawBucket(named: name).descriptor.indexes {
                #expect(
                    try copy.rawBucket(named: name).entryCount(index: index.name)
                        == source.rawBucket(named: name).entryCount(index: index.name), "index \(index.name)")
            }
        }
        // Exporting the copy gives the same bytes, and its objects decode to the same values.
        #expect(try exportText(copy) == text)
        #expect(try copy.bucket(Item.self).objects() == source.bucket(Item.self).objects())
        let both = try copy.bucket(Item.self).objects().filter { $0.id.hasPrefix("caf") }
        #expect(both.count == 2, "keys that are the same text but not the same bytes stay two objects")
    }

    @Test func aWholeExportRestoresIntoANewDatabaseEqualToTheOriginal() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let source = try fixtureDatabase(in: directory)
        defer { source.close() }
        let dump = directory.path("dump.jsonl")
        try source.export(to: URL(fileURLWithPath: dump))
        var reported: [TransferProgress] = []
        var chunks = 0
        let path = directory.path("copy.buri")
        let report = try BuriDatabase.restore(
            from: .file(dump), to: path, progress: { reported.append($0) }, chunkCommitted: { chunks += 1 })
        #expect(report.buckets == ["empty", "items"])
        #expect(report.objects == fixtureItems.count)
        // The huge value ends a chunk of its own bytes: at least two commits into the stage.
        #expect(chunks >= 2)
        #expect(reported.first?.phase == .restoring && reported.first?.isPhaseBoundary == true)
        #expect(
            reported.last
                == TransferProgress(
                    phase: .published, done: fixtureItems.count, total: fixtureItems.count, unit: .objects,
                    isPhaseBoundary: true))

        let copy = try BuriDatabase(path: path)
        defer { copy.close() }
        #expect(try copy.bucketNames() == source.bucketNames())
        for name in try source.bucketNames() {
            #expect(try records(copy, name) == records(source, name), "bucket \(name)")
            #expect(try indexes(copy, name) == indexes(source, name), "bucket \(name)")
        }
        #expect(try exportText(copy) == (try String(contentsOfFile: dump, encoding: .utf8)))

        // Into an open database without buckets, too; one with buckets is refused.
        let memory = try BuriDatabase.inMemory()
        defer { memory.close() }
        try memory.restore(from: .file(dump))
        #expect(try exportText(memory) == exportText(source))
        let error = transferError { try memory.restore(from: .file(dump)) }
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("already has 2 buckets") == true, "\(String(describing: error))")
    }

    @Test func anImportIntoAnExistingBucketMergesAndCountsWhatItReplaced() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let directory = TemporaryDirectory("buri-transfer")
        let first = try db.importJSONLines(
            from: .file(
                try write(#"{"id":"a","n":1}"# + "\n" + #"{"id":"b","n":2}"# + "\n", "one.jsonl", in: directory)),
            into: "N", options: ImportOptions(keyField: "id", indexes: [try .init(name: "n", kind: .numeric)]))
        #expect(first.createdBucket && first.objectsAfter == 2)
        let lines = [#"{"id":"b","n":20}"#, #"{"id":"c","n":3}"#, #"{"id":"c","n":30}"#]
        let second = try db.importJSONLines(
            from: .file(try write(lines.joined(separator: "\n"), "two.jsonl", in: directory)), into: "N")
        #expect(!second.createdBucket)
        #expect(second.objectsRead == 3 && second.objectsBefore == 2 && second.objectsAfter == 3)
        #expect(second.objectsAdded == 1 && second.objectsReplaced == 2)
        let raw = try db.rawBucket(named: "N")
        #expect(try raw.keys(.all) == ["a", "b", "c"])
        #expect(try raw.keys(.index("n", in: IndexValue(10)...)) == ["b", "c"])
    }

    @Test func theReaderTurnsOneJSONObjectIntoTheObjectAnImportStores() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        _ = try db.bucket(Item.self)
        let raw = try db.rawBucket(named: "items")
        var reader = try JSONRecordReader(bucket: "items", existing: nil, options: ImportOptions(keyField: "id"))
        let object = try #require(try reader.object(fromLine: Array(#"{"id":"k","n":1}"#.utf8), number: 1))
        #expect(object.key == "k")
        #expect(reader.objectsRead == 1 && !reader.isExport)
        #expect(try reader.object(fromLine: Array("   ".utf8), number: 2) == nil)
        try reader.finish()
        // An existing bucket's index values are computed from the fields its indexes name; one whose
        // values only Swift computes cannot be, and is refused with what to do.
        let refused = transferError { _ = try JSONRecordReader(bucket: "items", existing: raw.descriptor) }
        #expect(refused?.kind == .invalidInput)
        #expect(refused?.message.contains("index 'initial'") == true, "\(String(describing: refused))")
    }

    @Test func progressFollowsTheImportPhasesAndEachChunkCommitIsReported() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let input = try write(
            (0..<2500).map { #"{"id":"k\#($0)","n":\#($0)}"# }.joined(separator: "\n"), "many.jsonl", in: directory)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: input)[.size] as? Int)
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        var phases: [TransferProgress.Phase] = []
        var boundaries: [TransferProgress] = []
        var chunks = 0
        let report = try db.importJSONLines(
            from: .file(input), into: "M", options: ImportOptions(keyField: "id"),
            progress: { step in
                if phases.last != step.phase { phases.append(step.phase) }
                if step.isPhaseBoundary { boundaries.append(step) }
            }, chunkCommitted: { chunks += 1 })
        #expect(report.objectsAfter == 2500 && report.inputBytes == size)
        // Stored in the stage 1000 objects at a time, then published at once.
        #expect(chunks == 3)
        // A new bucket: checked first; nothing to verify when publishing.
        #expect(phases == [.checking, .storing, .publishing, .published])
        #expect(
            boundaries.first
                == TransferProgress(phase: .checking, done: 0, total: size, unit: .bytes, isPhaseBoundary: true))
        #expect(
            boundaries.contains(
                TransferProgress(
                    phase: .storing, done: size, total: size, unit: .bytes, lines: 2500, isPhaseBoundary: true)))
        #expect(boundaries.last?.phase == .published && boundaries.last?.done == 2500)

        // With a chunk size: commits of that many objects straight into the bucket.
        var direct = 0
        let chunked = try db.importJSONLines(
            from: .file(input), into: "M2", options: ImportOptions(keyField: "id", chunkSize: 700),
            chunkCommitted: { direct += 1 })
        #expect(direct == 4 && chunked.objectsAfter == 2500)
        #expect(try db.pendingPurges().isEmpty)
    }

    @Test func aCheckedImportStoresWithoutCheckingAgainIntoADatabaseMadeAfterTheCheck() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let input = try write(#"{"id":"a","n":1}"# + "\n" + #"{"id":"b","n":[2,3]}"#, "in.jsonl", in: directory)
        let load = try JSONLinesImport(
            from: .file(input), into: "N", existing: nil,
            options: ImportOptions(keyField: "id", indexes: [try .init(name: "n", kind: .numeric)]))
        defer { load.close() }
        try load.check()
        try load.check()
        // The database is made only now, once the input is known to be good.
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        var phases: [TransferProgress.Phase] = []
        let report = try load.store(into: db, progress: { if phases.last != $0.phase { phases.append($0.phase) } })
        #expect(phases == [.storing, .publishing, .published])
        #expect(report.objectsAfter == 2)
        // The array the check saw makes the new index multi-valued: one entry per element.
        #expect(try db.rawBucket(named: "N").descriptor.index(named: "n")?.multiValued == true)
        #expect(try db.rawBucket(named: "N").entryCount(index: "n") == 3)

        // An export (its schema line read once per check) checks twice as well.
        let dump = URL(fileURLWithPath: directory.path("n.jsonl"))
        try db.export(to: dump)
        let again = try JSONLinesImport(from: .file(dump), into: "N", existing: nil)
        defer { again.close() }
        try again.check()
        try again.check()
        let copy = try BuriDatabase.inMemory()
        defer { copy.close() }
        _ = try again.store(into: copy)
        #expect(try exportText(copy) == (try String(contentsOf: dump, encoding: .utf8)))
    }
}
