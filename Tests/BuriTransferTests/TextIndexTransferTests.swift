import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

private struct Article: BuriSupport {
    var id: String
    var body: String
    var tags: [String]
    static let buri = BuriSchema<Article>(
        key: \.id, indexes: [.text("body", \.body), .text("tags", \.tags, stopWords: ["the"])])
}

@Suite("BuriTransfer: a text index travels with its definition and is searchable after restore")
struct TextIndexTransferTests {
    func exportLines(_ db: BuriDatabase) throws -> [String] {
        var lines: [String] = []
        try db.export { lines.append($0) }
        return lines
    }

    @Test(arguments: [Engine.leveldb, .memory]) func exportRestoreKeepsTheTextIndex(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let articles = try t.db.bucket(Article.self)
        try articles.store([
            Article(id: "a1", body: "Ärger im Büro", tags: ["the office", "work"]),
            Article(id: "a2", body: "quick brown fox", tags: ["animals"]),
        ])
        let lines = try exportLines(t.db)
        // Format 6: an older buri refuses the export instead of restoring a plain index.
        #expect(lines.first == ExportFormat.header(version: 6))
        #expect(lines.contains { $0.contains(#""text":{"tokenizer":1}"#) })
        #expect(lines.contains { $0.contains(#""text":{"tokenizer":1,"stopWords":["the"]}"#) })
        let copy = try BuriDatabase.inMemory()
        defer { copy.close() }
        let file = TemporaryDirectory("buri-text-export")
        let path = file.path("dump.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        _ = try copy.restore(from: .file(path))
        #expect(try exportLines(copy) == lines)
        let restored = try copy.bucket(Article.self)
        #expect(try restored.searchKeys("body", "arger") == ["a1"])
        #expect(try restored.searchKeys("body", "\"brown fox\"") == ["a2"])
        #expect(try restored.searchKeys("tags", "office") == ["a1"])
        let info = try #require(try copy.bucketInfo(named: "Article"))
        #expect(info.index(named: "tags")?.text == TextIndexDefinition(tokenizer: 1, stopWords: ["the"]))
        #expect(try copy.check().isConsistent)
    }
}
