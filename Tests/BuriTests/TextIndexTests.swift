import BuriStorage
import BuriTestSupport
import BuriText
import Foundation
import Testing

@testable import Buri

struct TextDoc: BuriSupport, Equatable {
    var id: String
    var body: String
    var notes: [String]
    var summary: String?

    static let buri = BuriSchema<TextDoc>(
        key: \.id,
        indexes: [
            .text("body", \.body), .text("notes", \.notes), .text("summary", \.summary, stopWords: ["the", "a"]),
            .binary("id", \.id, field: "id"),
        ])
}

/// What the index should answer, computed by tokenizing in the test.
struct TextModel {
    var docs: [String: [String]] = [:]  // key -> texts (one, or array elements)
    var tokenizer = TextTokenizer.v1

    /// Stores `doc` in `docs` and records its body.
    mutating func store(_ doc: TextDoc, in docs: Bucket<TextDoc>) throws {
        try docs.store(doc)
        self.docs[doc.id] = [doc.body]
    }

    /// Term -> positions, with the same element gap as the index.
    func positions(_ key: String) -> [[UInt8]: [UInt64]] {
        var result: [[UInt8]: [UInt64]] = [:]
        var base: UInt64 = 0
        for text in docs[key] ?? [] {
            var last: UInt64?
            for token in tokenizer.tokens(in: text) {
                result[token.term, default: []].append(base + UInt64(token.position))
                last = base + UInt64(token.position)
            }
            if let last { base = last + 1 + 1024 }
        }
        return result
    }

    func matches(_ query: TextQuery, _ key: String) -> Bool {
        let terms = positions(key)
        switch query {
        case .term(let term): return terms[term] != nil
        case .prefix(let start): return terms.keys.contains { $0.starts(with: start) }
        case .and(let operands):
            return operands.allSatisfy { operand in
                if case .not(let inner) = operand { return !matches(inner, key) }
                return matches(operand, key)
            }
        case .or(let operands): return operands.contains { matches($0, key) }
        case .not(let inner): return !matches(inner, key)
        case .phrase(let phrase, let lastIsPrefix):
            let all = terms.values.flatMap { $0 }
            return all.contains { start in
                for (offset, term) in phrase.enumerated() {
                    let at = start + UInt64(offset)
                    if offset == phrase.count - 1 && lastIsPrefix {
                        if !terms.contains(where: { $0.key.starts(with: term) && $0.value.contains(at) }) {
                            return false
                        }
                    } else if tokenizer.isStopWord(term) {
                        continue
                    } else if terms[term]?.contains(at) != true {
                        return false
                    }
                }
                return true
            }
        }
    }

    func answer(_ query: String) throws -> [String] {
        let parsed = try TextQuery.parse(query, tokenizer: tokenizer)
        return docs.keys.filter { matches(parsed, $0) }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}

@Suite struct TextIndexTests {
    static func doc(_ id: String, _ body: String, notes: [String] = [], summary: String? = nil) -> TextDoc {
        TextDoc(id: id, body: body, notes: notes, summary: summary)
    }

    @Test(arguments: Engine.allCases) func storeUpdateDeleteKeepSearchExact(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        var model = TextModel()
        func put(_ d: TextDoc) throws { try model.store(d, in: docs) }
        try put(Self.doc("d1", "The quick brown fox jumps over the lazy dog"))
        try put(Self.doc("d2", "A quick brown dog"))
        try put(Self.doc("d3", "a a b"))
        try put(Self.doc("d4", "Ärger im Büro: crème brûlée"))
        try put(Self.doc("d5", "北京大学的学生"))
        try put(Self.doc("d6", ""))
        let queries = [
            "quick", "quick brown", "quick OR lazy", "quick NOT lazy", "qu*", "\"brown fox\"", "\"brown dog\"",
            "\"a a b\"", "\"a b\"", "\"a a\"", "arger", "ÄRGER", "creme", "brulee", "北京", "大学", "\"北京大学\"",
            "\"quick brown\"*", "\"brown fo\"*", "zebra", "dog NOT (fox OR lazy)",
        ]
        func verify() throws {
            for query in queries {
                #expect(try docs.searchKeys("body", query) == model.answer(query), "\(engine) \(query)")
                #expect(try docs.searchCount("body", query) == model.answer(query).count)
            }
        }
        try verify()
        #expect(try docs.search("body", "fox").map(\.id) == ["d1"])
        // An update moves positions of a kept term.
        try put(Self.doc("d1", "dog dog brown fox"))
        try put(Self.doc("d3", "b a a"))
        try verify()
        #expect(try docs.delete(key: "d2"))
        model.docs["d2"] = nil
        try verify()
        // NFC and NFD documents and queries find each other.
        try put(Self.doc("n1", "caf\u{E9}"))
        try put(Self.doc("n2", "cafe\u{301}"))
        #expect(try docs.searchKeys("body", "caf\u{E9}") == ["n1", "n2"])
        #expect(try docs.searchKeys("body", "cafe\u{301}") == ["n1", "n2"])
        #expect(try t.db.check().isConsistent)
        try t.reopen()
        let again = try t.db.bucket(TextDoc.self)
        #expect(try again.searchKeys("body", "dog") == model.answer("dog"))
        #expect(try again.deleteAll() > 0)
        #expect(try again.searchKeys("body", "dog").isEmpty)
        #expect(try t.db.check().isConsistent)
    }

    /// Replacing an object whose texts have a thousand distinct terms: the entries that stay
    /// (with their positions rewritten where they moved), go and come are found by sets, not by
    /// a search of one list per entry of the other, and every one of them moves exactly. (The
    /// size keeps one replacement within etcd's default 4,096 operations per transaction.)
    @Test(arguments: Engine.allCases) func replacingALongTextMovesExactlyItsEntries(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        var model = TextModel()
        func put(_ d: TextDoc) throws { try model.store(d, in: docs) }
        func words(_ range: Range<Int>) -> String { range.map { "w\($0)" }.joined(separator: " ") }
        try put(Self.doc("long", "common " + words(0..<1200) + " common", notes: ["n1 n2", words(0..<40)]))
        try put(Self.doc("other", "w5 w1000 w1600 keep"))
        let queries = [
            "w5", "w599", "w600", "w1000", "w1199", "w1200", "w1600", "w1799", "common", "keep",
            "\"common w0\"", "\"common w600\"", "\"w1199 common\"", "\"w1799 common\"", "\"w600 w601\"",
            "\"w1199 w1200\"", "w600 w1600", "w10 OR w1700", "w800 NOT w10",
        ]
        func verify(_ step: String) throws {
            for query in queries {
                #expect(try docs.searchKeys("body", query) == model.answer(query), "\(engine) \(step) \(query)")
            }
        }
        try verify("stored")
        // Half the terms stay (at other positions), half go, half are new; "common" moves.
        try put(Self.doc("long", "common " + words(600..<1800) + " common", notes: ["n2 n3", words(20..<60)]))
        try verify("replaced")
        #expect(try docs.searchKeys("notes", "w10").isEmpty)
        #expect(try docs.searchKeys("notes", "w50") == ["long"])
        #expect(try t.db.check().isConsistent)
        // And back, in a transaction with a caught error after it: the replacement stays whole.
        try t.db.write { tx in
            let inTx = try tx.bucket(TextDoc.self)
            try inTx.store(Self.doc("long", words(0..<20) + " " + words(1190..<1210)))
            #expect(throws: BuriError.self) { try inTx.store(Self.doc("", "no key")) }
        }
        model.docs["long"] = [words(0..<20) + " " + words(1190..<1210)]
        try verify("replaced in a transaction")
        #expect(try t.db.check().isConsistent)
        // check looks a long header's entries up in a set: an entry the header does not list is
        // stale, and the 40 it lists are not.
        let info = try #require(try t.db.bucketInfo(named: "TextDoc"))
        let body = try #require(info.index(named: "body"))
        let stale = Keyspace.indexEntryKey(
            bucket: info.id, index: body.id, tuple: IndexValue("w700").encoded, objectKey: "long")
        let batch = t.db.engine.makeBatch()
        batch.put(stale, [2, 1, 0])
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        let report = try t.db.check()
        #expect(report.problems.map(\.kind) == [.staleEntry], "\(engine)")
        #expect(try t.db.check(repair: true).problems.allSatisfy(\.repaired))
        #expect(try t.db.check().isConsistent)
        try verify("repaired")
    }

    /// A query tree a program builds (`.and` nested in `.and`, word after word) is measured
    /// before anything walks it: up to `TextQuery.maximumDepth` levels it is answered, deeper it
    /// is a typed error naming bucket and index, never a stack overflow. The parser's own limit
    /// stays within it.
    @Test func queryTreesDeeperThanTheLimitAreRefused() throws {
        let t = try TestDatabase(.leveldb)
        let docs = try t.db.bucket(TextDoc.self)
        try docs.store([Self.doc("a", "apple pie"), Self.doc("b", "apple tart")])
        let apple = TextQuery.term(Array("apple".utf8))
        let pie = TextQuery.term(Array("pie".utf8))
        func nested(_ levels: Int) -> TextQuery { (1..<levels).reduce(apple) { tree, _ in .and([tree, pie]) } }
        #expect(nested(TextQuery.maximumDepth).depth == TextQuery.maximumDepth)
        #expect(try docs.searchKeys("body", nested(TextQuery.maximumDepth)) == ["a"])
        #expect(try docs.keys(.search("body", nested(TextQuery.maximumDepth))) == ["a"])
        let tooDeep = nested(5_000)
        func refused(_ error: any Error) -> Bool {
            guard case .invalidQuery("TextDoc", "body"?, let reason) = error as? BuriError else { return false }
            return reason.contains("5000 levels")
        }
        #expect(performing: { try docs.searchKeys("body", tooDeep) }, throws: refused)
        #expect(performing: { try docs.searchCount("body", tooDeep) }, throws: refused)
        #expect(performing: { try docs.search("body", tooDeep) }, throws: refused)
        #expect(performing: { try docs.keys(.search("body", tooDeep)) }, throws: refused)
        // The deepest the parser builds: three levels (or, and, not) per parenthesis.
        var text = "apple"
        for _ in 0..<(TextQuery.maximumNesting / 2) { text = "zzz OR (apple NOT (" + text + "))" }
        let parsed = try TextQuery.parse(text, tokenizer: .v1)
        #expect(parsed.depth > 3 * TextQuery.maximumNesting / 2 && parsed.depth <= TextQuery.maximumDepth)
        // Each round is `apple` minus the round inside it: an even number of rounds is `apple`.
        #expect(try docs.searchKeys("body", text) == ["a", "b"])
        #expect(try docs.rankedSearchKeys("body", text, limit: 5).count == 2)
    }

    @Test(arguments: Engine.allCases) func phrasesNeverSpanArrayElementsAndStopWordsKeepTheirPlace(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        try docs.store(Self.doc("a", "", notes: ["red apple", "pie crust"], summary: "the cat and a dog"))
        try docs.store(Self.doc("b", "", notes: ["red apple pie"], summary: "cat and dog"))
        #expect(try docs.searchKeys("notes", "\"apple pie\"") == ["b"])
        #expect(try docs.searchKeys("notes", "apple pie") == ["a", "b"])
        #expect(try docs.searchKeys("notes", "\"pie crust\"") == ["a"])
        // Stop words are not indexed but keep one position in a phrase.
        #expect(try docs.searchKeys("summary", "\"the cat\"") == ["a"])
        #expect(try docs.searchKeys("summary", "\"cat and dog\"") == ["b"])
        #expect(try docs.searchKeys("summary", "\"and a dog\"") == ["a"])
        let info = try #require(try t.db.bucketInfo(named: "TextDoc")?.index(named: "summary"))
        #expect(info.text == TextIndexDefinition(tokenizer: 1, stopWords: ["the", "a"]))
        #expect(info.components == [.binary])
    }

    @Test(arguments: Engine.allCases) func errorsAreTypedAndAFailedWriteLeavesNoEntry(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        try docs.store(Self.doc("a", "hello world"))
        #expect {
            try docs.search("body", "hello AND")
        } throws: { error in
            guard case .textQuerySyntax(let bucket, let index, _, let message, let offset) = error as? BuriError
            else { return false }
            return bucket == "TextDoc" && index == "body" && !message.isEmpty && offset > 0
        }
        #expect {
            try docs.search("id", "hello")
        } throws: { error in
            guard case .invalidQuery("TextDoc", "id"?, _) = error as? BuriError else { return false }
            return true
        }
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try t.db.write { tx in
                try tx.bucket(TextDoc.self).store(Self.doc("b", "transient words"))
                throw Boom()
            }
        }
        #expect(try docs.searchKeys("body", "transient").isEmpty)
        let prefix = Keyspace.indexSpacePrefix(bucket: try #require(try t.db.bucketInfo(named: "TextDoc")).id)
        var entries = 0
        let cursor = try t.db.engine.latest().cursor(in: .prefix(prefix))
        while try cursor.next() { entries += 1 }
        #expect(entries == 3)  // hello, world, and the id index
    }

    @Test func anUnknownTokenizerVersionIsATypedError() throws {
        var definition = IndexDefinition(id: 1, name: "body", components: [.binary], fields: ["body"])
        definition.text = TextIndexDefinition(tokenizer: 9)
        #expect {
            _ = try definition.textTokenizer(bucket: "B")
        } throws: { error in
            guard case .invalidIndexDefinition("B", "body", _) = error as? BuriError else { return false }
            return true
        }
    }

    @Test func entryValuesRoundTripAndDamageIsRefused() throws {
        let value = TextEntries.encodePositions([0, 3, 200])
        #expect(value == [3, 0, 3, 197, 1])
        #expect(try value.withUnsafeBytes { try TextEntries.decodePositions($0) } == [0, 3, 200])
        for bad: [UInt8] in [[], [0], [2, 1], [2, 1, 0], [1, 1, 1]] {
            #expect(throws: FormatError.self) { try bad.withUnsafeBytes { try TextEntries.decodePositions($0) } }
        }
    }

    /// `validate` (which takes a shortcut where every varint is one byte) accepts exactly the
    /// layout-2 values that `decode` reads: random short values over the bytes that matter.
    @Test func validateAcceptsExactlyWhatDecodeReads() {
        var rng = SeededGenerator(seed: 7)
        let alphabet: [UInt8] = [0, 1, 2, 3, 5, 0x7F, 0x80, 0x81, 0xFF]
        var accepted = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...7, using: &rng)
            var value = (0..<count).map { _ in alphabet.randomElement(using: &rng)! }
            // Often a value of the shape the shortcut takes: length, n = count − 2.
            if count >= 3, Bool.random(using: &rng) { value[1] = UInt8(count - 2) }
            let decodes = value.withUnsafeBytes { (try? TextEntries.decode($0, layout: 2)) != nil }
            let validates = value.withUnsafeBytes { (try? TextEntries.validate($0, layout: 2)) != nil }
            #expect(decodes == validates, "\(value)")
            if validates { accepted += 1 }
        }
        #expect(accepted > 500)
    }

    @Test func checkFindsAndRepairFixesDamagedTextEntriesAndSearchRefusesThem() throws {
        let t = try TestDatabase(.leveldb)
        let docs = try t.db.bucket(TextDoc.self)
        var rng = SystemRandomNumberGenerator()
        let words = ["alpha", "beta", "gamma", "delta", "eps"]
        for round in 0..<200 {
            let key = "k\(Int.random(in: 0..<30, using: &rng))"
            if round % 7 == 0 {
                try docs.delete(key: key)
            } else {
                let body = (0..<Int.random(in: 0..<6, using: &rng)).map { _ in words.randomElement(using: &rng)! }
                try docs.store(Self.doc(key, body.joined(separator: " "), notes: body.reversed()))
            }
        }
        try docs.store(Self.doc("z", "alpha beta alpha"))
        #expect(try t.db.check().isConsistent)
        let info = try #require(try t.db.bucketInfo(named: "TextDoc"))
        let body = try #require(info.index(named: "body"))
        let alpha = Keyspace.indexEntryKey(
            bucket: info.id, index: body.id, tuple: IndexValue("alpha").encoded, objectKey: "z")
        let beta = Keyspace.indexEntryKey(
            bucket: info.id, index: body.id, tuple: IndexValue("beta").encoded, objectKey: "z")
        let batch = t.db.engine.makeBatch()
        batch.delete(alpha)
        batch.put(beta, [1, 5])  // a wrong position
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        let report = try t.db.check()
        #expect(Set(report.problems.map(\.kind)) == [.missingEntry, .wrongIndexValue])
        let repaired = try t.db.check(repair: true)
        #expect(repaired.isConsistent)
        #expect(try t.db.check().problems.isEmpty)
        #expect(try docs.searchKeys("body", "\"alpha beta\"").contains("z"))
        // A malformed value is a corruption error, never a shorter result.
        let damage = t.db.engine.makeBatch()
        damage.put(beta, [7])
        try t.db.engine.commit(damage, conditions: nil, sync: true)
        #expect {
            try docs.searchKeys("body", "beta")
        } throws: { error in
            guard case .corruption("TextDoc", "z"?, "body"?, _) = error as? BuriError else { return false }
            return true
        }
        #expect(try t.db.check(repair: true).problems.contains { $0.kind == .wrongIndexValue && $0.repaired })
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test(arguments: Engine.allCases) func randomEditsMatchTheModel(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        var model = TextModel()
        var rng = SeededGenerator(seed: 26)
        let vocabulary = ["a", "b", "c", "d", "ab", "abc"]
        let steps = engine == .etcd ? 25 : 80
        for _ in 0..<steps {
            let key = "k\(Int.random(in: 0..<12, using: &rng))"
            if Int.random(in: 0..<5, using: &rng) == 0 {
                try docs.delete(key: key)
                model.docs[key] = nil
            } else {
                let words = (0..<Int.random(in: 0..<7, using: &rng)).map { _ in
                    vocabulary[Int.random(in: 0..<vocabulary.count, using: &rng)]
                }
                let body = words.joined(separator: " ")
                try docs.store(Self.doc(key, body))
                model.docs[key] = [body]
            }
            let w = { vocabulary[Int.random(in: 0..<vocabulary.count, using: &rng)] }
            for query in ["\(w()) \(w())", "\(w()) OR \(w())", "\"\(w()) \(w())\"", "\(w()) NOT \(w())", "a*"] {
                #expect(try docs.searchKeys("body", query) == model.answer(query), "\(query)")
            }
        }
        #expect(try t.db.check().isConsistent)
    }
}

@Suite struct TextIndexImportTests {
    /// A staged import copies the bucket's records and entries under a new id: the copied text
    /// entries keep their positions (a bare key would be a corrupt entry), and staged records are
    /// indexed from their payload like any other write.
    @Test(arguments: [Engine.leveldb, .memory, .shared]) func aStagedImportKeepsTextPositions(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let docs = try t.db.bucket(TextDoc.self)
        try docs.store([
            TextDoc(id: "d1", body: "quick brown fox", notes: ["one two", "three"], summary: "the summary"),
            TextDoc(id: "d2", body: "brown quick dog", notes: [], summary: nil),
        ])
        let load = try t.db.stageImport(into: "TextDoc", chunkSize: 1)
        let payload: CBORValue = [
            "id": .text("d3"), "body": .text("a quick brown hen"), "notes": .array([.text("three two one")]),
            "summary": .null,
        ]
        let idValue: [String: [[IndexValue]]] = ["id": [[IndexValue("d3")]]]
        try load.store([RawObject(key: "d3", payload: payload.encoded(), indexValues: idValue)])
        try load.publish()
        #expect(try docs.searchKeys("body", "\"quick brown\"") == ["d1", "d3"])
        #expect(try docs.searchKeys("body", "\"brown quick\"") == ["d2"])
        #expect(try docs.searchKeys("notes", "\"one two\"") == ["d1"])
        #expect(try docs.searchKeys("notes", "\"two one\"") == ["d3"])
        #expect(try docs.searchKeys("summary", "summary") == ["d1"])
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems)")
    }
}

@Suite struct TextIndexReadmeTests {
    struct Note: BuriSupport {
        var id: String, body: String, year: Int
        static let buri = BuriSchema<Note>(key: \.id, indexes: [.text("body", \.body), .numeric("year", \.year)])
    }

    /// README, "Full-text search": the example as written there.
    @Test func theReadmeExampleWorksAsWritten() throws {
        let t = try TestDatabase()
        let notes = try t.db.bucket(Note.self)
        try notes.store([
            Note(id: "n1", body: "Apple pie, the recipe", year: 2019),
            Note(id: "n2", body: "pie with apple and pear", year: 2024),
            Note(id: "n3", body: "A tartlet", year: 2021), Note(id: "n4", body: "Crème brûlée", year: 2022),
            Note(id: "n5", body: "pie pie pie", year: 2023),
        ])
        let pies = try notes.search("body", "apple pie")
        #expect(pies.map(\.id) == ["n1", "n2"])
        let exact = try notes.searchKeys("body", "\"apple pie\" OR tart*")
        #expect(exact == ["n1", "n3"])
        let count = try notes.searchCount("body", "pie NOT pear")
        #expect(count == 2)
        #expect(try notes.searchKeys("body", "creme BRULEE") == ["n4"])
        let best = try notes.rankedSearch("body", "apple OR pie", limit: 10)
        // Both words in a short text first; "pie", in most notes, weighs almost nothing.
        #expect(best.first?.object.id == "n1")
        #expect(Set(best.map(\.key)) == ["n1", "n2", "n5"] && best.map(\.score) == best.map(\.score).sorted(by: >))
        let recent = try notes.keys(.search("body", "pie").and(.index("year", in: 2020...)))
        #expect(recent == ["n5", "n2"])  // in year order
        let first = try notes.page(.search("body", "apple"), size: 20)
        #expect(first.items.map(\.id) == ["n1", "n2"] && first.next == nil)  // all on the first page
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        for line in [
            "static let buri = BuriSchema<Note>(key: \\.id, indexes: [.text(\"body\", \\.body), .numeric(\"year\", \\.year)])",
            "let pies = try notes.search(\"body\", \"apple pie\")",
            "let exact = try notes.searchKeys(\"body\", \"\\\"apple pie\\\" OR tart*\")",
            "let count = try notes.searchCount(\"body\", \"pie NOT pear\")",
            "let best = try notes.rankedSearch(\"body\", \"apple OR pie\", limit: 10)",
            "let recent = try notes.keys(.search(\"body\", \"pie\").and(.index(\"year\", in: 2020...)))",
            "let first = try notes.page(.search(\"body\", \"apple\"), size: 20)",
        ] {
            #expect(readme.contains(line), "README lacks \(line)")
        }
    }
}

/// An object's entry values sit in one buffer beside its header entries (`EntryValues`): with text
/// indexes among other indexes (whose entries carry no value) and a text without terms, every
/// entry must still get its own value, on a first write, on a rewrite and in one large batch.
@Suite struct TextEntryValuesAlignmentTests {
    struct Doc: BuriSupport {
        var id: String, tag: String, title: String, year: Int, body: [String]
        static let buri = BuriSchema<Doc>(
            key: \.id,
            indexes: [
                .binary("tag", \.tag), .text("title", \.title), .numeric("year", \.year), .text("body", \.body),
            ])
    }

    @Test func valuesFollowTheirEntriesAmongOtherIndexes() throws {
        let t = try TestDatabase()
        let docs = try t.db.bucket(Doc.self)
        try docs.store(Doc(id: "a", tag: "x", title: "red apple", year: 1, body: ["green pear", "red apple pie"]))
        try docs.store(Doc(id: "b", tag: "y", title: "", year: 2, body: ["apple"]))
        try docs.store(Doc(id: "c", tag: "x", title: "pear pear pear", year: 3, body: []))
        #expect(try t.db.check().isConsistent)
        #expect(try docs.searchKeys("title", "apple") == ["a"])
        #expect(try docs.searchKeys("body", "\"red apple\"") == ["a"])
        #expect(try docs.searchKeys("body", "\"pear red\"") == [])  // never across two elements
        // A rewrite keeps some terms (their values rewritten) and drops others.
        try docs.store(Doc(id: "a", tag: "z", title: "apple apple", year: 4, body: ["pie"]))
        #expect(try t.db.check().isConsistent)
        #expect(try docs.searchKeys("body", "pie") == ["a"])
        #expect(try docs.searchKeys("title", "red") == [])
        // Ranking reads each object's document length from its entries' values.
        let ranked = try docs.rankedSearchKeys("title", "apple OR pear", limit: 5)
        #expect(Set(ranked.map(\.key)) == ["a", "c"])
        // One batch large enough to be encoded on several cores.
        let many = (0..<9_000).map { i in
            Doc(
                id: "m\(i)", tag: "t\(i % 7)", title: i % 3 == 0 ? "" : "title \(i % 11)", year: i,
                body: ["word\(i % 13) common", i % 2 == 0 ? "even \(i)" : ""])
        }
        try docs.store(many)
        #expect(try t.db.check().isConsistent)
        #expect(try docs.searchCount("body", "common") == 9_000)
        #expect(try docs.searchCount("title", "title") == 6_000)
        #expect(try docs.searchCount("body", "word3 common") == (0..<9_000).filter { $0 % 13 == 3 }.count)
    }
}

@Suite struct TextTupleInternerTests {
    /// Equal terms (as bytes) get one array; different ones, canonically equal strings included,
    /// get their own tuple, as `ValueEncoding.appendBinary` encodes it; growth keeps every term.
    @Test func equalTermsShareOneTupleAndEveryTupleIsTheEncoding() {
        let interner = TextTupleInterner()
        var terms: [[UInt8]] = [
            [], [0x00], [0x00, 0x00], Array("é".utf8), Array("e\u{301}".utf8), [0xFF, 0x00, 0x01],
        ]
        for i in 0..<5_000 { terms.append(Array("term\(i)".utf8)) }
        // Terms that tie in their first 16 bytes: exactly 16, longer by a byte or by many, NUL after.
        let sixteen = Array("abcdefghijklmnop".utf8)
        terms += [
            sixteen, sixteen + [0x00], sixteen + [0x58], sixteen + [0x59], sixteen + Array(repeating: 0x5A, count: 300),
        ]
        terms += (0..<200).map { sixteen + Array("-long-\($0)".utf8) }
        var first: [[UInt8]] = []
        for term in terms {
            let tuple = term.withUnsafeBufferPointer { interner.tuple(of: $0) }
            var expected: [UInt8] = []
            ValueEncoding.appendBinary(term, to: &expected)
            #expect(tuple == expected)
            first.append(tuple)
        }
        for (term, tuple) in zip(terms, first) {
            let again = term.withUnsafeBufferPointer { interner.tuple(of: $0) }
            #expect(again == tuple)
            let shared = again.withUnsafeBufferPointer { a in
                tuple.withUnsafeBufferPointer { $0.baseAddress == a.baseAddress }
            }
            #expect(shared, "\(term) was encoded twice")
        }
        #expect(first[3] != first[4])
    }
}

@Suite struct AddressTableTests {
    /// Random addresses (clustered, as heap addresses are) find exactly the numbers inserted,
    /// through growth; absent ones find nothing.
    @Test func findsWhatWasInsertedAndNothingElse() {
        var rng = SeededGenerator(seed: 3)
        var table = AddressTable()
        var model: [UInt: Int32] = [:]
        for number in 0..<20_000 {
            let address = UInt(0x7F00_0000_0000) + UInt.random(in: 1...5_000_000, using: &rng) * 16
            guard model[address] == nil else { continue }
            table.insert(address, Int32(number))
            model[address] = Int32(number)
        }
        for (address, number) in model { #expect(table.find(address) == number) }
        for _ in 0..<2_000 {
            let address = UInt(0x7E00_0000_0000) + UInt.random(in: 1...5_000_000, using: &rng) * 16
            #expect(table.find(address) == nil)
        }
        #expect(AddressTable().find(16) == nil)
    }
}

@Suite struct ForwardWalkTests {
    /// Keys under a few term-like prefixes (some extending others' bytes, NUL and 0xFF bytes
    /// included), in one engine.
    private func engine(_ keys: [[UInt8]]) throws -> MemoryEngine {
        let engine = MemoryEngine()
        let batch = engine.makeBatch()
        for key in keys { batch.put(key, [1]) }
        try engine.commit(batch, conditions: nil, sync: false)
        return engine
    }

    /// Prefixes asked in increasing order (as a query's terms), then in any order, with repeats,
    /// prefixes holding nothing and prefixes past every key: each gives exactly the keys a scan
    /// finds under it, in key order.
    @Test func givesExactlyTheKeysUnderEachPrefixInAnyOrder() throws {
        var rng = SeededGenerator(seed: 11)
        let alphabet: [UInt8] = [0x00, 0x01, 0x61, 0x62, 0xFE, 0xFF]
        func word(_ length: Int) -> [UInt8] {
            (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }
        }
        let keys = Set((0..<400).map { _ in word(Int.random(in: 1...5, using: &rng)) }).sorted {
            $0.lexicographicallyPrecedes($1)
        }
        let engine = try engine(keys)
        let walk = ForwardWalk(try engine.snapshot().cursor(in: KeyRange(start: nil, end: nil)))
        func expected(_ prefix: [UInt8]) -> [[UInt8]] { keys.filter { $0.starts(with: prefix) } }
        func asked(_ prefix: [UInt8]) throws -> [[UInt8]] {
            var found: [[UInt8]] = []
            try walk.entries(under: prefix) { found.append($0.key) }
            return found
        }
        var prefixes = (0..<300).map { _ in word(Int.random(in: 1...3, using: &rng)) }
        prefixes.sort { $0.lexicographicallyPrecedes($1) }
        for prefix in prefixes { #expect(try asked(prefix) == expected(prefix)) }
        prefixes.shuffle(using: &rng)
        for prefix in prefixes + [[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0x00]] {
            #expect(try asked(prefix) == expected(prefix))
        }
    }

    /// A walk stopped by an error thrown while visiting seeks again at the next prefix, and
    /// misses nothing: neither the rest of the failed prefix nor what follows.
    @Test func aWalkStoppedByAnErrorStartsOverAtTheNextPrefix() throws {
        let keys: [[UInt8]] = [[1, 1], [1, 2], [1, 3], [2, 1], [2, 2], [3, 1]]
        let walk = ForwardWalk(try engine(keys).snapshot().cursor(in: KeyRange(start: nil, end: nil)))
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try walk.entries(under: [1]) { cursor in if cursor.key == [1, 2] { throw Stop() } }
        }
        var found: [[UInt8]] = []
        try walk.entries(under: [1]) { found.append($0.key) }
        try walk.entries(under: [2]) { found.append($0.key) }
        try walk.entries(under: [2]) { found.append($0.key) }
        try walk.entries(under: [3]) { found.append($0.key) }
        #expect(found == [[1, 1], [1, 2], [1, 3], [2, 1], [2, 2], [2, 1], [2, 2], [3, 1]])
    }
}
