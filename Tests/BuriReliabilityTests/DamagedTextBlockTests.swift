import Foundation
import LevelDB
import Testing
@testable import Buri

/// A document of the damaged-text fixture: one text index.
struct DamagedTextDoc: BuriSupport, Equatable {
    var id: String
    var body: String
    static let buri = BuriSchema<DamagedTextDoc>(key: \.id, indexes: [.text("body", \.body)])
}

/// A damaged table block in the middle of a text index's entries. Text walks read LevelDB's error
/// status only where they stop (`StorageCursor.deferStatusChecks()`): a walk that steps over the
/// damaged block and then stops early — an AND whose other word ran out — must still report it,
/// never answer short.
@Suite("a damaged block of text entries: every search that walks over it throws .damaged")
struct DamagedTextBlockTests {
    /// 2,000 documents: every one holds "common"; d0000–d1199 hold "dense"; d0005 and d0100 hold
    /// "rare"; d1900 and later hold "late".
    static let documents: [DamagedTextDoc] = (0..<2000).map { n in
        var words = ["common"]
        if n < 1200 { words.append("dense") }
        if n == 5 || n == 100 { words.append("rare") }
        if n >= 1900 { words.append("late") }
        return DamagedTextDoc(id: String(format: "d%04d", n), body: words.joined(separator: " "))
    }

    static func keys(holding word: String) -> [String] {
        documents.filter { $0.body.split(separator: " ").contains(Substring(word)) }.map(\.id)
    }

    /// The fixture compacted into one uncompressed table, with `damage` in the middle of the data
    /// block holding the entry of "common" for d0600.
    ///
    /// With `segments`, the fixture is stored in one write, so each term's postings are one
    /// segment (format 13): the damaged block is then the one holding the segment of "common".
    static func makeDamaged(_ path: String, damage: DamagedFileTests.Damage, segments: Bool = false) throws {
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, levelDB: levelDB)
        let bucket = try db.bucket(DamagedTextDoc.self)
        if segments {
            try bucket.store(documents)
        } else {
            // In writes small enough to put one entry per posting.
            for start in stride(from: 0, to: documents.count, by: RawBucket.segmentThreshold - 1) {
                try bucket.store(documents[start..<min(start + RawBucket.segmentThreshold - 1, documents.count)])
            }
        }
        try db.compact()
        let info = try #require(try db.bucketInfo(named: "DamagedTextDoc"))
        let body = try #require(info.index(named: "body"))
        let common = IndexValue("common").encoded
        let target =
            segments
            ? GroupedPostingKeys.segmentPrefix(bucket: info.id, index: body.id, tuple: common)
            : Keyspace.indexEntryKey(bucket: info.id, index: body.id, tuple: common, objectKey: "d0600")
        let first =
            segments
            ? Keyspace.indexPrefix(bucket: info.id, index: body.id)
            : Keyspace.indexEntryKey(bucket: info.id, index: body.id, tuple: common, objectKey: "d0000")
        db.close()
        let tables = try CorruptionTests.files(path, suffix: ".ldb")
        try #require(tables.count == 1, "\(tables)")
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: tables[0])))
        let blocks = try DamagedFileTests.dataBlocks(bytes)
        let index = try #require(blocks.firstIndex { !$0.upperKey.lexicographicallyPrecedes(target) })
        // The damaged block lies strictly inside the entries of "common": the block before it
        // ends after the word's first entry, so a walk from its start steps into it. (A segment
        // is one value: its block is the one whose last key is at or after the segment's.)
        try #require(segments || (index > 0 && !blocks[index - 1].upperKey.lexicographicallyPrecedes(first)))
        let block = blocks[index]
        damage.apply(to: &bytes, at: block.offset + block.size / 2)
        try Data(bytes).write(to: URL(fileURLWithPath: tables[0]))
    }

    /// `body` either throws `.damaged` naming the database and bucket, or (when its walk never
    /// reached the damaged block) returns exactly `expected`: never a shorter answer.
    /// Each query, unranked and ranked (top 5), throws `.damaged` or answers exactly.
    static func expectSearchesDamagedOrExact(
        _ queries: [String], docs: Bucket<DamagedTextDoc>, path: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for query in queries {
            expectDamagedOrExact("search \(query)", path: path, sourceLocation: sourceLocation) {
                () throws(BuriError) in try docs.searchKeys("body", query)
            }
            expectDamagedOrExact("ranked \(query)", path: path, sourceLocation: sourceLocation) {
                () throws(BuriError) in try docs.rankedSearchKeys("body", query, limit: 5).map(\.key)
            }
        }
    }

    static func expectDamagedOrExact<R: Equatable>(
        _ what: String, path: String, expected: R? = nil, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws(BuriError) -> R
    ) {
        do {
            let result = try body()
            if let expected {
                #expect(result == expected, "\(what) answered wrong", sourceLocation: sourceLocation)
            } else {
                Issue.record(
                    "\(what) returned \(result) instead of reporting the damage", sourceLocation: sourceLocation)
            }
        } catch let BuriError.damaged(at, named, reason) {
            #expect(at == path && named == "DamagedTextDoc", "\(what): \(reason)", sourceLocation: sourceLocation)
            #expect(reason.contains("Corruption"), "\(what): \(reason)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(what): expected .damaged, got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(
        "searches that step over a damaged block of entries throw .damaged, also when they stop before the word's end",
        arguments: DamagedFileTests.Damage.allCases)
    func damagedTextBlock(damage: DamagedFileTests.Damage) throws {
        let directory = TemporaryDirectory("buri-damaged-text")
        let path = directory.path("db")
        try Self.makeDamaged(path, damage: damage)
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, levelDB: levelDB)
        defer { db.close() }
        let docs = try db.bucket(DamagedTextDoc.self)

        // Walks that reach the end of "common".
        Self.expectDamagedOrExact("search common", path: path) { () throws(BuriError) in
            try docs.searchKeys("body", "common")
        }
        Self.expectDamagedOrExact("count common", path: path) { () throws(BuriError) in
            try docs.searchCount("body", "common")
        }
        Self.expectDamagedOrExact("ranked common", path: path) { () throws(BuriError) in
            try docs.rankedSearchKeys("body", "common", limit: 5).map(\.key)
        }
        Self.expectDamagedOrExact("prefix comm*", path: path) { () throws(BuriError) in
            try docs.searchKeys("body", "comm*")
        }
        // Joint walks that step over the block, then stop when "dense" runs out (d1199): the
        // cursor over "common" is left in the middle of its entries, past the damage.
        Self.expectSearchesDamagedOrExact(["common dense", "dense common", "\"common dense\""], docs: docs, path: path)
        Self.expectDamagedOrExact("search dense NOT common", path: path) { () throws(BuriError) in
            try docs.searchKeys("body", "dense NOT common")
        }
        // Walks that may seek past the damaged block without reading it: an exact answer, or the
        // damage reported.
        Self.expectDamagedOrExact("search rare common", path: path, expected: ["d0005", "d0100"]) {
            () throws(BuriError) in try docs.searchKeys("body", "rare common")
        }
        Self.expectDamagedOrExact("search late common", path: path, expected: Self.keys(holding: "late")) {
            () throws(BuriError) in try docs.searchKeys("body", "late common")
        }
        // Words whose entries are intact answer exactly.
        #expect(try docs.searchKeys("body", "dense") == Self.keys(holding: "dense"))
        #expect(try docs.searchKeys("body", "late") == Self.keys(holding: "late"))
        #expect(try docs.rankedSearchKeys("body", "rare", limit: 5).map(\.key).sorted() == ["d0005", "d0100"])
    }

    @Test(
        "the damaged block holds a term's segment: every search of the term throws .damaged, never a shorter answer",
        arguments: DamagedFileTests.Damage.allCases)
    func damagedSegmentBlock(damage: DamagedFileTests.Damage) throws {
        let directory = TemporaryDirectory("buri-damaged-segment")
        let path = directory.path("db")
        try Self.makeDamaged(path, damage: damage, segments: true)
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.compression = false
        let db = try BuriDatabase(path: path, levelDB: levelDB)
        defer { db.close() }
        let docs = try db.bucket(DamagedTextDoc.self)
        Self.expectSearchesDamagedOrExact(
            ["common", "comm*", "common dense", "dense common", "\"common dense\"", "dense NOT common"], docs: docs,
            path: path)
        Self.expectDamagedOrExact("count common", path: path) { () throws(BuriError) in
            try docs.searchCount("body", "common")
        }
        // A word whose segment lies in another block answers exactly, or reports the damage.
        Self.expectDamagedOrExact("search late", path: path, expected: Self.keys(holding: "late")) {
            () throws(BuriError) in try docs.searchKeys("body", "late")
        }
    }
}
