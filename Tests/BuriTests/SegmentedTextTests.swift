import BuriStorage
import BuriTestSupport
import Testing

@testable import Buri

/// Grouped postings end to end (`docs/FORMAT.md` §5c): a large write puts a text index's
/// postings in segments, later writes replace and delete objects through tombstones, and every
/// search answers exactly what the same objects stored one small batch at a time answer.
@Suite struct SegmentedTextTests {
    struct Doc: BuriSupport, Equatable {
        var id: String
        var body: String
        static let buri = BuriSchema<Doc>(key: \.id, indexes: [.text("body", \.body)])
    }

    static let words = ["alpha", "beta", "gamma", "delta", "caf\u{E9}", "cafe\u{301}", "zeta", "eta", "theta"]

    /// `count` documents, keys with canonically equal pairs among them ("é1" and "e\u{301}1").
    static func documents(_ count: Int, seed: UInt64, prefix: String = "d") -> [Doc] {
        var rng = SeededGenerator(seed: seed)
        return (0..<count).map { n in
            let key = (n % 3 == 0 ? "\u{E9}" : n % 3 == 1 ? "e\u{301}" : prefix) + String(n / 3)
            let body = (0..<Int.random(in: 0...6, using: &rng)).map { _ in
                words.randomElement(using: &rng) ?? "alpha"
            }.joined(separator: " ")
            return Doc(id: key, body: body)
        }
    }

    static let queries = [
        "alpha", "beta gamma", "alpha OR zeta", "caf\u{E9}", "\"alpha beta\"", "the*", "gamma NOT delta", "eta",
    ]

    /// The key prefix of the `body` index of bucket `Doc` (`03 u32 u32`).
    static func bodyPrefix(_ t: TestDatabase) throws -> [UInt8] {
        let info = try #require(try t.db.bucketInfo(named: "Doc"))
        let index = try #require(info.index(named: "body"))
        return Keyspace.indexPrefix(bucket: info.id, index: index.id)
    }

    /// The raw keys of the index's segments and tombstones.
    static func groupedKeys(_ t: TestDatabase) throws -> (segments: Int, tombstones: Int) {
        let prefix = try Self.bodyPrefix(t)
        let keys = try t.rawKeys().filter { $0.starts(with: prefix) && $0.count > prefix.count }
        return (
            keys.filter { $0[prefix.count] == GroupedPostingKeys.segmentTag }.count,
            keys.filter { $0[prefix.count] == GroupedPostingKeys.tombstoneTag }.count
        )
    }

    @Test(arguments: [Engine.leveldb, .memory, .temporary, .shared])
    func segmentsAnswerWhatSingleEntriesAnswer(engine: Engine) throws {
        let t = try TestDatabase(engine)
        var grouped = try t.db.bucket(Doc.self)
        let reference = TestReference()
        var docs = Self.documents(150, seed: 7)
        try grouped.store(docs)
        reference.store(docs)
        let afterStore = try Self.groupedKeys(t)
        #expect((afterStore.segments > 0) == (engine != .shared), "\(afterStore)")
        // Replaced in a small batch (tombstones, single entries), deleted, then a second large
        // batch over some of the same keys (new segments, tombstones for the old).
        let replaced = Self.documents(30, seed: 8)
        try grouped.store(Array(replaced.prefix(20)))
        reference.store(Array(replaced.prefix(20)))
        let deleted = docs.suffix(25).map(\.id)
        try grouped.delete(keys: deleted)
        reference.delete(deleted)
        docs = Self.documents(120, seed: 9)
        try grouped.store(docs)
        reference.store(docs)
        let afterAll = try Self.groupedKeys(t)
        #expect((afterAll.tombstones > 0) == (engine != .shared), "\(afterAll)")
        for round in 0..<2 {
            for query in Self.queries {
                #expect(
                    try grouped.searchKeys("body", query) == reference.keys(matching: query),
                    "round \(round), query \(query)")
                let ranked = try grouped.rankedSearchKeys("body", query, limit: 200)
                #expect(
                    Set(ranked.map(\.key)) == Set(reference.keys(matching: query)), "round \(round), ranked \(query)")
            }
            #expect(try grouped.raw.entryCount(index: "body") == reference.postingCount)
            let report = try t.db.check()
            #expect(report.isConsistent, "round \(round): \(report.problems)")
            if engine == .leveldb {
                try t.reopen()
                grouped = try t.db.bucket(Doc.self)
            }
        }
    }

    /// The most segments any one term has, and how many terms have segments.
    static func segmentsPerTerm(_ t: TestDatabase) throws -> (most: Int, terms: Int) {
        let prefix = try Self.bodyPrefix(t) + [GroupedPostingKeys.segmentTag]
        var perTerm: [[UInt8]: Int] = [:]
        for key in try t.rawKeys() where key.starts(with: prefix) {
            perTerm[Array(key[prefix.count..<(key.count - 1 - TextSegment.stampLength)]), default: 0] += 1
        }
        return (perTerm.values.max() ?? 0, perTerm.count)
    }

    /// Every segment's tier is the one its posting count gives.
    static func tiersMatchSizes(_ t: TestDatabase) throws -> Bool {
        let prefix = try Self.bodyPrefix(t) + [GroupedPostingKeys.segmentTag]
        let cursor = try t.db.engine.snapshot().cursor(in: .prefix(prefix))
        while try cursor.next() {
            let key = cursor.key
            let segment = try TextSegment(try cursor.value)
            if key[key.count - 1 - TextSegment.stampLength] != RawBucket.segmentTier(ofCount: segment.count) {
                return false
            }
        }
        return true
    }

    @Test(arguments: [Engine.leveldb, .memory, .temporary])
    func mergesKeepATermsSegmentsFewAndCompactLeavesOneAndNoTombstone(engine: Engine) throws {
        let t = try TestDatabase(engine)
        var bucket = try t.db.bucket(Doc.self)
        let reference = TestReference()
        func agree(_ stage: String) throws {
            for query in Self.queries {
                #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(stage): \(query)")
            }
            #expect(try bucket.raw.entryCount(index: "body") == reference.postingCount, "\(stage)")
            let report = try t.db.check()
            #expect(report.isConsistent, "\(stage): \(report.problems)")
        }
        // Twelve large batches over overlapping keys: every one adds a segment to most terms and
        // tombstones for the objects it replaces; the merges after every fourth keep them few.
        for round in 0..<12 {
            let docs = Self.documents(96, seed: UInt64(100 + round), prefix: "k\(round % 5)")
            try bucket.store(docs)
            reference.store(docs)
            let (most, _) = try Self.segmentsPerTerm(t)
            #expect(most < RawBucket.segmentsPerTier * 2, "round \(round): a term has \(most) segments")
        }
        #expect(try Self.tiersMatchSizes(t))
        try agree("after the batches")
        // Deletes leave tombstones; compact merges every term into one segment and drops them all.
        let deleted = Self.documents(96, seed: 104, prefix: "k4").prefix(70).map(\.id)
        try bucket.delete(keys: deleted)
        reference.delete(deleted)
        #expect(try Self.groupedKeys(t).tombstones > 0)
        try agree("after deletes")
        try t.db.compact()
        let after = try Self.groupedKeys(t)
        #expect(after.tombstones == 0, "\(after)")
        #expect(try Self.segmentsPerTerm(t).most == 1)
        #expect(try Self.tiersMatchSizes(t))
        try agree("after compact")
        // A second compact has nothing to merge; the segments stay as they are.
        let keysBefore = try t.rawKeys()
        try t.db.compact()
        #expect(try t.rawKeys() == keysBefore)
        if engine == .leveldb {
            try t.reopen()
            bucket = try t.db.bucket(Doc.self)
            try agree("after reopen")
        }
    }

    /// A prefix's keys are each matching object once, in byte order, when many keys share their
    /// first 16 bytes (or differ only past a NUL byte, or are canonically equal but
    /// byte-different) and objects hold several of the prefix's
    /// terms: with postings in segments, as single entries, and both.
    @Test(arguments: [Engine.leveldb, .memory])
    func aPrefixGivesEachObjectOnceInByteOrder(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(Doc.self)
        var rng = SeededGenerator(seed: 17)
        let terms = ["graph", "graphs", "graphic", "graphical", "grapheme", "graphviz", "grape", "photograph"]
        func batch(_ count: Int) -> [Doc] {
            (0..<count).map { n in
                let heads = ["a-key-head-of-sixteen-bytes/", "a-key\u{0}", "\u{E9}", "e\u{301}"]
                let head = heads[n % heads.count]
                let body = (0..<Int.random(in: 0...4, using: &rng)).map { _ in
                    terms.randomElement(using: &rng) ?? "graph"
                }.joined(separator: " ")
                return Doc(id: head + String(Int.random(in: 0..<400, using: &rng)), body: body)
            }
        }
        var model: [[UInt8]: String] = [:]
        func expected() -> [String] {
            model.filter { $0.value.split(separator: " ").contains { $0.hasPrefix("graph") } }.keys
                .sorted { $0.lexicographicallyPrecedes($1) }.map { String(decoding: $0, as: UTF8.self) }
        }
        // One large write (segments), then small ones (single entries, replacing some).
        for (round, count) in [300, 5, 5, 200, 3].enumerated() {
            let written = batch(count)
            if round == 1 || round == 2 || round == 4 {
                for doc in written { try docs.store(doc) }
            } else {
                try docs.store(written)
            }
            for doc in written { model[Array(doc.id.utf8)] = doc.body }
            #expect(try docs.searchKeys("body", "graph*") == expected(), "after round \(round)")
        }
    }

    @Test func aFormat12DatabaseReadsAsItIsAndItsFirstLargeWriteUpgradesIt() throws {
        // A database as format 12 left it: every posting single.
        let t = try TestDatabase(.leveldb)
        let reference = TestReference()
        let old = Self.documents(90, seed: 21)
        for chunk in stride(from: 0, to: old.count, by: 30) {
            try t.db.bucket(Doc.self).store(Array(old[chunk..<(chunk + 30)]))
        }
        reference.store(old)
        #expect(try Self.groupedKeys(t).segments == 0)
        let batch = t.db.engine.makeBatch()
        batch.put(Keyspace.headerKey, Keyspace.headerValue(version: 12))
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        try t.reopen()
        #expect(t.db.formatVersion == 12)
        var bucket = try t.db.bucket(Doc.self)
        for query in Self.queries {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
        // The first large write puts segments and the version 13 header in one commit.
        let new = Self.documents(100, seed: 22, prefix: "n")
        try bucket.store(new)
        reference.store(new)
        #expect(t.db.formatVersion == 13)
        #expect(try Self.groupedKeys(t).segments > 0)
        try t.reopen()
        #expect(t.db.formatVersion == 13)
        bucket = try t.db.bucket(Doc.self)
        for query in Self.queries {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test func aMergeNeverDropsAPostingATombstoneDoesNotCancel() throws {
        // A term's tombstones are many against its postings: the pass merges all its segments,
        // drops exactly the cancelled postings with their tombstones, and keeps the rest.
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Doc.self)
        let reference = TestReference()
        let docs = (0..<200).map { Doc(id: "d\($0)", body: $0 % 2 == 0 ? "alpha beta" : "alpha") }
        try bucket.store(docs)
        reference.store(docs)
        let gone = (0..<200).filter { $0 % 3 == 0 }.map { "d\($0)" }
        try bucket.delete(keys: gone)
        reference.delete(gone)
        let counts = try bucket.raw.mergeSegments(everything: false)
        #expect(counts.terms == 2 && counts.tombstones == gone.count + gone.count / 2 + 1, "\(counts)")
        #expect(try Self.groupedKeys(t).tombstones == 0)
        for query in ["alpha", "beta", "alpha beta"] {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
        #expect(try t.db.check().isConsistent)
    }

    @Test func aDamagedSegmentFailsCompactButNotTheWriteBeforeAMerge() throws {
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Doc.self)
        try bucket.store(Self.documents(100, seed: 3))
        let prefix = try Self.bodyPrefix(t) + [GroupedPostingKeys.segmentTag]
        let cursor = try t.db.engine.snapshot().cursor(in: .prefix(prefix))
        let batch = t.db.engine.makeBatch()
        while try cursor.next() {
            var value = try cursor.value
            value[value.count - 1] ^= 0xFF
            batch.put(cursor.key, value)
        }
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        // Three more large writes make a merge due; each write itself commits and returns.
        var keys = Set(Self.documents(100, seed: 3).map { Array($0.id.utf8) })
        for round in 0..<3 {
            let docs = Self.documents(100, seed: UInt64(10 + round), prefix: "n\(round)")
            try bucket.store(docs)
            keys.formUnion(docs.map { Array($0.id.utf8) })
        }
        #expect(try bucket.count() == keys.count)
        #expect {
            try t.db.compact()
        } throws: { error in
            guard case BuriError.corruption(let bucketName, _, let indexName, _) = error else { return false }
            return bucketName == "Doc" && indexName == "body"
        }
    }

    @Test func aDamagedSegmentIsATypedErrorNeverAShorterAnswer() throws {
        let t = try TestDatabase(.leveldb)
        try t.db.bucket(Doc.self).store(Self.documents(100, seed: 3))
        let prefix = try Self.bodyPrefix(t)
        let snapshot = try t.db.engine.snapshot()
        let cursor = try snapshot.cursor(in: .prefix(prefix + [GroupedPostingKeys.segmentTag]))
        var damaged = 0
        let batch = t.db.engine.makeBatch()
        while try cursor.next() {
            var value = try cursor.value
            value[value.count - 1] ^= 0xFF  // the last posting's value, or the segment's end
            value.append(0x01)  // and a byte past the end
            batch.put(cursor.key, value)
            damaged += 1
        }
        #expect(damaged > 0)
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        for query in ["alpha", "alpha beta", "the*"] {
            #expect(throws: BuriError.self, "query \(query)") { try t.db.bucket(Doc.self).searchKeys("body", query) }
        }
    }

    /// Rewrites the value of every segment of the index whose term `pick` accepts (the key
    /// without the index prefix) with what `damage` makes of it.
    static func damageSegments(
        _ t: TestDatabase, where pick: ([UInt8]) -> Bool, _ damage: ([UInt8]) -> [UInt8]
    ) throws -> Int {
        let prefix = try Self.bodyPrefix(t)
        let cursor = try t.db.engine.snapshot().cursor(in: .prefix(prefix + [GroupedPostingKeys.segmentTag]))
        let batch = t.db.engine.makeBatch()
        var damaged = 0
        while try cursor.next() {
            guard pick(Array(cursor.key[prefix.count...])) else { continue }
            batch.put(cursor.key, damage(try cursor.value))
            damaged += 1
        }
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        return damaged
    }

    @Test(arguments: [0, 1, 2])
    func checkReportsATermWhoseSegmentsDoNotReadAndRepairPutsEveryPostingBack(damage: Int) throws {
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Doc.self)
        let reference = TestReference()
        let docs = Self.documents(150, seed: 31)
        try bucket.store(docs)
        reference.store(docs)
        let alpha = [GroupedPostingKeys.segmentTag] + IndexValue("alpha").encoded
        let damaged = try Self.damageSegments(t, where: { $0.starts(with: alpha) }) { value in
            switch damage {
            case 0: return Array(value.dropLast(3))  // truncated
            case 1: return value.map { $0 ^ 0x5A }  // every byte changed
            default: return [TextSegment.version + 1] + value.dropFirst()  // an unknown version
            }
        }
        #expect(damaged == 1)
        #expect(throws: BuriError.self) { try bucket.searchKeys("body", "alpha") }
        // check reports the term, and each object's posting of it as missing; it does not throw.
        let report = try t.db.check()
        #expect(!report.isConsistent)
        #expect(report.problems.contains { $0.kind == .wrongIndexValue && $0.detail.contains("\"alpha\"") })
        let holding = reference.keys(matching: "alpha")
        #expect(report.problems.filter { $0.kind == .missingEntry }.count == holding.count)
        // Repair puts every posting back (as single entries), and the index answers exactly again.
        let repaired = try t.db.check(repair: true)
        #expect(repaired.problems.allSatisfy { $0.repaired }, "\(repaired.problems)")
        #expect(try t.db.check().isConsistent)
        for query in Self.queries {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
        // The repaired objects' headers still name their stamps: replacing and deleting them
        // removes the single entries repair put, and compact leaves the index exact.
        let replaced = holding.prefix(10).map { Doc(id: $0, body: "omega") }
        try bucket.store(replaced)
        reference.store(replaced)
        let gone = Array(holding.dropFirst(10).prefix(10))
        try bucket.delete(keys: gone)
        reference.delete(gone)
        #expect(try t.db.check().isConsistent)
        try t.db.compact()
        for query in Self.queries + ["omega"] {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
        #expect(try bucket.raw.entryCount(index: "body") == reference.postingCount)
        #expect(try t.db.check().isConsistent)
    }

    @Test func aPostingStoredBothAloneAndInASegmentIsReportedAndRepaired() throws {
        let t = try TestDatabase(.leveldb)
        let bucket = try t.db.bucket(Doc.self)
        let reference = TestReference()
        let docs = Self.documents(100, seed: 41)
        try bucket.store(docs)
        reference.store(docs)
        // A copy of one segment posting put beside it as a single entry.
        let key = try #require(reference.keys(matching: "beta").first)
        let prefix = try Self.bodyPrefix(t)
        let single = prefix + IndexValue("beta").encoded + Array(key.utf8)  // P tuple objectKey (§7)
        let reader = GroupedPostingsReader(try t.db.engine.snapshot(), textPrefixes: [prefix])
        let value = try #require(try reader.get(single))
        let batch = t.db.engine.makeBatch()
        batch.put(single, value)
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        #expect(throws: BuriError.self) { try bucket.searchKeys("body", "beta") }
        let report = try t.db.check()
        #expect(report.problems.count == 1 && report.problems.first?.kind == .staleEntry, "\(report.problems)")
        #expect(report.problems.first?.key == key)
        let repaired = try t.db.check(repair: true)
        #expect(repaired.problems.allSatisfy { $0.repaired })
        #expect(try t.db.check().isConsistent)
        for query in Self.queries {
            #expect(try bucket.searchKeys("body", query) == reference.keys(matching: query), "\(query)")
        }
    }

    @Test func segmentIdsCountUpFromTheStampCarryingAcrossBytes() {
        let id: [UInt8] = [UInt8](repeating: 0x11, count: 13) + [0x00, 0xFF, 0xFF]
        var key: [UInt8] = []
        GroupedPostingKeys.writeSegmentKey(bucket: 1, index: 2, tuple: [0x30], tier: 0, id: id, plus: 0, into: &key)
        #expect(key == GroupedPostingKeys.segmentKey(bucket: 1, index: 2, tuple: [0x30], tier: 0, id: id))
        GroupedPostingKeys.writeSegmentKey(bucket: 1, index: 2, tuple: [0x30], tier: 0, id: id, plus: 1, into: &key)
        #expect(Array(key.suffix(3)) == [0x01, 0x00, 0x00])
        #expect(Array(key.suffix(16).prefix(13)) == [UInt8](repeating: 0x11, count: 13))
    }
}

/// What the searches of ``SegmentedTextTests`` should answer: the documents by key bytes, and a
/// search evaluated by the plain tokenizer of the test's words (lowercase ASCII and "café" in
/// both forms, which fold to one term).
final class TestReference {
    private var documents: [[UInt8]: [String]] = [:]

    func store(_ docs: [SegmentedTextTests.Doc]) {
        for doc in docs { documents[Array(doc.id.utf8)] = Self.terms(doc.body) }
    }

    func delete(_ keys: [String]) {
        for key in keys { documents[Array(key.utf8)] = nil }
    }

    static func terms(_ body: String) -> [String] {
        body.split(separator: " ").map { word in word == "caf\u{E9}" || word == "cafe\u{301}" ? "cafe" : String(word) }
    }

    /// One posting per distinct term of each document.
    var postingCount: Int { documents.values.reduce(0) { $0 + Set($1).count } }

    func keys(matching query: String) -> [String] {
        let matching = documents.filter { _, terms in Self.matches(query, terms) }.keys
        return matching.sorted { compareBytes($0, $1) < 0 }.map { String(decoding: $0, as: UTF8.self) }
    }

    private static func matches(_ query: String, _ terms: [String]) -> Bool {
        switch query {
        case "alpha OR zeta": return terms.contains("alpha") || terms.contains("zeta")
        case "\"alpha beta\"": return zip(terms, terms.dropFirst()).contains { $0 == "alpha" && $1 == "beta" }
        case "the*": return terms.contains { $0.hasPrefix("the") }
        case "gamma NOT delta": return terms.contains("gamma") && !terms.contains("delta")
        default:
            return query.split(separator: " ").allSatisfy { word in
                terms.contains(word == "caf\u{E9}" ? "cafe" : String(word))
            }
        }
    }
}

@Suite struct SegmentedTextQueryTests {
    struct Item: BuriSupport, Equatable {
        var id: String
        var group: String
        var body: String
        static let buri = BuriSchema<Item>(
            key: \.id, indexes: [.text("body", \.body), .binary("group", \.group, field: "group")])
    }

    /// A search combined with an index condition checks each candidate's postings, in segments too.
    @Test(arguments: [Engine.leveldb, .memory])
    func aSearchAndAConditionAnswerWhatTheSearchFilteredDoes(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let bucket = try t.db.bucket(Item.self)
        let docs = SegmentedTextTests.documents(120, seed: 11).enumerated().map { n, doc in
            Item(id: doc.id, group: ["", "a", "b"][n % 3], body: doc.body)
        }
        try bucket.store(docs)
        try bucket.store(
            Array(docs.prefix(10)).map {
                var item = $0; item.body += " alpha"; return item
            })
        for query in SegmentedTextTests.queries where !query.contains("*") {
            let found = try bucket.searchKeys("body", query)
            for group in ["", "a", "b"] {
                let wanted = found.filter { key in docs.first { $0.id.utf8.elementsEqual(key.utf8) }?.group == group }
                let keys = try bucket.keys(Query.search("body", query).and(.index("group", equals: .init(group))))
                #expect(keys == wanted, "\(query), group \(group)")
            }
        }
    }
}
