import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A large text import, and a model of its text index: documents of several words of a small
/// vocabulary of lowercase ASCII letters, which the tokenizer keeps as they are (its words are
/// runs of letters, folded to lower case), so the model needs no tokenizer of its own.
private struct TextCorpus {
    /// Keys `d00000`…: byte order is number order.
    let documents: [(key: String, words: [String])]

    init(count: Int, seed: UInt64) {
        var state = seed
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        // 300 words "baa" … : three letters each, the first never 'a'.
        let vocabulary = (0..<300).map { n -> String in
            let letters = Array("abcdefghijklmnopqrstuvwxyz")
            return String([letters[1 + n / 26 % 25], letters[n % 26], letters[(n * 7) % 26]])
        }
        documents = (0..<count).map { i in
            let length = 4 + Int(next() % 5)
            // Skewed: low words are common, so queries match many documents and few.
            let words = (0..<length).map { _ in vocabulary[Int(next() % 300 * (next() % 300) / 300)] }
            return (String(format: "d%05d", i), words)
        }
    }

    /// The documents as JSON Lines: {"id": key, "body": the words, some capitalized}.
    func lines(_ range: Range<Int>) -> String {
        documents[range].enumerated().map { offset, document in
            let body = document.words.enumerated().map { $0.offset == offset % 3 ? $0.element.capitalized : $0.element }
            return #"{"id":"\#(document.key)","body":"\#(body.joined(separator: " "))"}"# + "\n"
        }.joined()
    }

    /// The keys of `documents` that a query matches, by the model: `all` words, `any` word,
    /// `none` of these words, a `phrase` (consecutive words), or a `prefix`.
    static func matches(
        _ documents: [(key: String, words: [String])], all: [String] = [], any: [String] = [], none: [String] = [],
        phrase: [String] = [], prefix: String? = nil
    ) -> [String] {
        documents.filter { document in
            let words = document.words
            if !all.allSatisfy(words.contains) { return false }
            if !any.isEmpty, !any.contains(where: words.contains) { return false }
            if none.contains(where: words.contains) { return false }
            if !phrase.isEmpty {
                guard words.count >= phrase.count,
                    (0...(words.count - phrase.count)).contains(where: {
                        Array(words[$0..<($0 + phrase.count)]) == phrase
                    })
                else { return false }
            }
            if let prefix, !words.contains(where: { $0.hasPrefix(prefix) }) { return false }
            return true
        }.map(\.key)
    }
}

/// The queries compared with the model, and the model's answer for each over `documents`.
private func modelQueries(
    _ corpus: TextCorpus, _ documents: [(key: String, words: [String])]
) -> [(query: String, keys: [String])] {
    // Words the documents hold: a common one, a rarer one, and a pair that follows one another.
    let first = documents[0].words
    let common = first[0]
    let rare = documents[documents.count / 2].words.last ?? common
    let pair = Array(documents[documents.count - 1].words.prefix(2))
    return [
        (common, TextCorpus.matches(documents, all: [common])),
        (rare.uppercased(), TextCorpus.matches(documents, all: [rare])),
        ("\(common) \(rare)", TextCorpus.matches(documents, all: [common, rare])),
        ("\(common) OR \(rare)", TextCorpus.matches(documents, any: [common, rare])),
        ("\(common) NOT \(rare)", TextCorpus.matches(documents, all: [common], none: [rare])),
        ("\"\(pair.joined(separator: " "))\"", TextCorpus.matches(documents, phrase: pair)),
        ("\(rare.prefix(2))*", TextCorpus.matches(documents, prefix: String(rare.prefix(2)))),
        ("zzzz", []),
    ]
}

@Suite("A text import killed mid-write: check is clean and search answers what landed")
struct KilledTextImportTests {
    /// With --chunk-size every chunk is its own commit: killed after the 7th of 20, exactly the
    /// first 7,000 documents landed, text entries and all.
    @Test func aChunkedTextImportKilledAfterItsSeventhChunkKeepsExactlyTheChunksThatLanded() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("text.buri")
        let corpus = TextCorpus(count: 20_000, seed: 42)
        let input = try sandbox.write("docs.jsonl", corpus.lines(0..<20_000))
        let killed = try buriKilledAfter(
            chunks: 7,
            ["import", db, "Doc", "--key", "id", "--text-index", "body", "--chunk-size", "1000", "--progress", input])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the import was not killed: \(killed)")
        // Mid-write: it was storing (after the checking pass), and 7,000 of the 20,000 landed.
        #expect(killed.stderr.contains("storing in chunks of 1000: "), "\(killed.stderr)")
        let keys = try buri("keys", db, "Doc")
        #expect(keys.status == 0 && keys.lines == corpus.documents.prefix(7_000).map(\.key), "\(keys.lines.count) keys")
        // The next command that writes, then check: clean.
        expectSuccess(try buri("put", db, "Doc", #"{"id":"zz","body":"Last words here"}"#))
        let check = try buri("check", db)
        #expect(check.status == 0 && check.stdout.hasPrefix("ok: 1 bucket, 7001 objects"), "\(check)")
        #expect(!check.stdout.contains("note:"), "\(check)")
        // Search answers what the model says of the documents that landed.
        let landed = Array(corpus.documents.prefix(7_000)) + [("zz", ["last", "words", "here"])]
        for (query, expected) in modelQueries(corpus, landed) {
            // The model's answers are not vacuous: each query but the last matches documents.
            #expect(!expected.isEmpty || query == "zzzz", "\(query)")
            let found = try buri("search", db, "Doc", "body", query)
            #expect(found.status == 0 && found.lines == expected, "\(query): \(found.lines.count) vs \(expected.count)")
        }
        #expect(try buri("search", db, "Doc", "body", "\"last words\"").lines == ["zz"])
        // And a fresh import of those documents gives the same index: the same entry count.
        let fresh = sandbox.path("fresh.buri")
        let landedInput = try sandbox.write(
            "landed.jsonl", corpus.lines(0..<7_000) + #"{"id":"zz","body":"Last words here"}"# + "\n")
        expectSuccess(try buri("import", fresh, "Doc", "--key", "id", "--text-index", "body", landedInput))
        func entries(_ path: String) throws -> String? {
            try buri("info", path).lines.first { $0.hasPrefix("  index 'body'") }
        }
        #expect(try entries(db) != nil && (try entries(db)) == (try entries(fresh)))
    }

    /// Killed after its 9th chunk, a chunked import has had two merge passes (after the 4th and
    /// 8th chunks, each a commit of its own after its chunk) and one more chunk of segments:
    /// check is clean, search answers what landed, and compact merges the rest without changing
    /// an answer.
    @Test func aChunkedTextImportKilledAfterItsMergesKeepsEveryPostingThroughCompact() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("text.buri")
        let corpus = TextCorpus(count: 12_000, seed: 9)
        let input = try sandbox.write("docs.jsonl", corpus.lines(0..<12_000))
        let killed = try buriKilledAfter(
            chunks: 9,
            ["import", db, "Doc", "--key", "id", "--text-index", "body", "--chunk-size", "1000", "--progress", input])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the import was not killed: \(killed)")
        #expect(killed.stderr.contains("storing in chunks of 1000: "), "\(killed.stderr)")
        let landed = Array(corpus.documents.prefix(9_000))
        func segments() throws -> (segments: Int, tombstones: Int) {
            let json = try buri("info", db, "--json")
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            let index = ((object?["buckets"] as? [[String: Any]])?.first?["indexes"] as? [[String: Any]])?.first
            let text = index?["text"] as? [String: Any]
            return (
                (text?["segments"] as? NSNumber)?.intValue ?? -1, (text?["tombstones"] as? NSNumber)?.intValue ?? -1
            )
        }
        // The 300 words are in every chunk: nine chunks unmerged would hold about 2,700 segments.
        let afterKill = try segments()
        #expect(afterKill.segments > 300 && afterKill.segments < 300 * 4, "\(afterKill)")
        func expectAnswers(_ stage: String) throws {
            let check = try buri("check", db)
            #expect(check.status == 0 && check.stdout.hasPrefix("ok: 1 bucket, 9000 objects"), "\(stage): \(check)")
            for (query, expected) in modelQueries(corpus, landed) {
                let found = try buri("search", db, "Doc", "body", query)
                #expect(found.status == 0 && found.lines == expected, "\(stage), \(query)")
            }
        }
        try expectAnswers("after the kill")
        let compact = try buri("compact", db)
        #expect(compact.status == 0, "\(compact)")
        let compacted = try segments()
        #expect(compacted.tombstones == 0 && compacted.segments <= 300, "\(compacted)")
        try expectAnswers("after compact")
    }

    /// An atomic import (the default) stages everything and publishes with one commit: killed
    /// after its fifth staged chunk nothing of it is visible, the next writing command removes the
    /// stage, and search answers as before the import.
    @Test func anAtomicTextImportKilledMidStageLeavesTheIndexAsItWas() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("text.buri")
        let corpus = TextCorpus(count: 22_000, seed: 7)
        let seed = try sandbox.write("seed.jsonl", corpus.lines(0..<2_000))
        expectSuccess(try buri("import", db, "Doc", "--key", "id", "--text-index", "body", seed))
        let before = try directorySize(db)
        let input = try sandbox.write("more.jsonl", corpus.lines(2_000..<22_000))
        let killed = try buriKilledAfter(chunks: 5, ["import", db, "Doc", "--progress", input])
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "the import was not killed: \(killed)")
        // Mid-write: storing, never publishing; the stage's 5,000 documents are on disk.
        #expect(
            killed.stderr.contains("reading and storing: ") && !killed.stderr.contains("publishing"), "\(killed.stderr)"
        )
        let staged = try directorySize(db)
        #expect(staged > before + 200_000, "size \(before) before, \(staged) with the stage")
        // The next command that writes removes the stage; check is clean.
        expectSuccess(try buri("put", db, "Doc", #"{"id":"zz","body":"Last words here"}"#))
        let check = try buri("check", db)
        #expect(check.status == 0 && check.stdout.hasPrefix("ok: 1 bucket, 2001 objects"), "\(check)")
        #expect(!check.stdout.contains("note:"), "\(check)")
        let landed = Array(corpus.documents.prefix(2_000)) + [("zz", ["last", "words", "here"])]
        for (query, expected) in modelQueries(corpus, landed) {
            let found = try buri("search", db, "Doc", "body", query)
            #expect(found.status == 0 && found.lines == expected, "\(query): \(found.lines.count) vs \(expected.count)")
        }
        // The same import, not killed, lands whole.
        let whole = try buri("import", db, "Doc", input)
        #expect(whole.status == 0 && whole.stdout.hasPrefix("imported 20000 objects"), "\(whole)")
        let all = Array(corpus.documents) + [("zz", ["last", "words", "here"])]
        for (query, expected) in modelQueries(corpus, all) {
            #expect(try buri("search", db, "Doc", "body", query).lines == expected, "\(query)")
        }
    }
}
