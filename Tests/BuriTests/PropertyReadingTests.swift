import BuriTestSupport
import Foundation
import Testing

@testable import Buri

/// The write path reads a key or a text straight from its offset when the key path names a stored
/// property of a struct, and through the key path otherwise: every form must give the same keys,
/// entries and matches.
@Suite struct PropertyReadingTests {
    /// Stored properties at offsets other than 0, an optional and an array.
    struct Padded: BuriSupport, Sendable {
        var flag: Bool
        var small: Int8
        var title: String
        var notes: [String]
        var code: String
        var summary: String?
        static let buri = BuriSchema<Padded>(
            key: \.code,
            indexes: [.text("title", \.title), .text("notes", \.notes), .text("summary", \.summary)])
    }

    /// A computed key: no offset, read through the key path (a text index reads a stored
    /// property, which tools recompute from its field).
    struct Computed: BuriSupport, Sendable {
        var first: String
        var last: String
        var words: String
        var key: String { first + "-" + last }
        init(first: String, last: String) {
            self.first = first
            self.last = last
            words = last + " " + first
        }
        static let buri = BuriSchema<Computed>(key: \.key, indexes: [.text("words", \.words)])
    }

    /// A class: its properties are not inline, so they are read through the key path.
    final class Card: BuriSupport, @unchecked Sendable {
        let id: String
        let text: String
        init(id: String, text: String) {
            self.id = id
            self.text = text
        }
        static let buri = BuriSchema<Card>(key: \.id, indexes: [.text("text", \.text)])
    }

    @Test(arguments: Engine.allCases) func everyFormOfKeyAndTextGivesTheSameKeysAndMatches(engine: Engine) throws {
        #expect(MemoryLayout<Padded>.offset(of: \Padded.code).map { $0 > 0 } == true)
        #expect(MemoryLayout<Computed>.offset(of: \Computed.key) == nil)
        #expect(MemoryLayout<Computed>.offset(of: \Computed.words) != nil)
        #expect(MemoryLayout<Card>.offset(of: \Card.id) == nil)
        let t = try TestDatabase(engine)

        let padded = try t.db.bucket(Padded.self)
        // A large batch goes through segments and the shared interner; a single store does not.
        var batch: [Padded] = (0..<100).map { i in
            Padded(
                flag: i.isMultiple(of: 2), small: 1, title: "Title \(i) Ärger", notes: ["n\(i)", "shared"],
                code: "c\(i)", summary: i.isMultiple(of: 3) ? "crème \(i)" : nil)
        }
        try padded.store(batch)
        batch.append(Padded(flag: true, small: 0, title: "lone", notes: [], code: "é", summary: nil))
        try padded.store(batch[100])
        #expect(try padded.object(forKey: "é")?.title == "lone")
        #expect(try padded.searchKeys("title", "arger").count == 100)
        #expect(try padded.searchKeys("title", "lone") == ["é"])
        #expect(try padded.searchKeys("notes", "shared").count == 100)
        #expect(try padded.searchKeys("notes", "n7") == ["c7"])
        #expect(try padded.searchKeys("summary", "creme") == batch.filter { $0.summary != nil }.map(\.code).sorted())
        #expect(try padded.searchKeys("title", "\"title 42\"") == ["c42"])

        let computed = try t.db.bucket(Computed.self)
        try computed.store((0..<80).map { Computed(first: "f\($0)", last: "common") })
        #expect(try computed.object(forKey: "f3-common")?.first == "f3")
        #expect(try computed.searchKeys("words", "\"common f5\"") == ["f5-common"])
        #expect(try computed.count() == 80)
        #expect(try computed.delete(Computed(first: "f3", last: "common")))
        #expect(try computed.object(forKey: "f3-common") == nil)

        let cards = try t.db.bucket(Card.self)
        try cards.store((0..<70).map { Card(id: "card\($0)", text: "deck \($0)") })
        try cards.store(Card(id: "joker", text: "wild deck"))
        #expect(try cards.searchKeys("text", "deck").count == 71)
        #expect(try cards.searchKeys("text", "wild") == ["joker"])
        #expect(try cards.object(forKey: "card9")?.text == "deck 9")
        let report = try t.db.check()
        #expect(report.problems.isEmpty, "\(report.problems)")
    }
}
