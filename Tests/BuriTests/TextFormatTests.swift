import BuriTestSupport
import Testing

@testable import Buri

/// The text index's bytes as docs/FORMAT.md specifies them.
@Suite struct TextFormatTests {
    /// docs/FORMAT.md §5b's example, written by the real write path (tokenizer, the encoded tuple
    /// straight from its buffer, the entry key built in the batch's reused buffer): term `alpha`
    /// at positions 0, 3 and 200 of object `z` in a document of 9 indexed tokens (the other
    /// positions hold the stop word `s`), index 1 of bucket 1.
    @Test func theSpecsTextEntryIsWhatAStoreWrites() throws {
        struct Z: BuriSupport {
            var id: String
            var body: String
            static let buri = BuriSchema<Z>(key: \.id, indexes: [.text("body", \.body, stopWords: ["s"])])
        }
        var words = [String](repeating: "s", count: 201)
        for position in [0, 3, 200] { words[position] = "alpha" }
        for position in [1, 2, 4, 5, 6, 7] { words[position] = "b" }
        let t = try TestDatabase(.memory)
        try t.db.bucket(Z.self).store(Z(id: "z", body: words.joined(separator: " ")))
        let key: [UInt8] = [0x03, 0, 0, 0, 1, 0, 0, 0, 1, 0x30] + Array("alpha".utf8) + [0, 0, 0x7a]
        #expect(try t.db.engine.latest().get(key) == [0x09, 0x03, 0x00, 0x03, 0xc5, 0x01])
    }
}
