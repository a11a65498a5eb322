import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

/// A day declared plaintext (as an encrypted database requires of a numeric index), a topic not.
private struct Entry: BuriSupport {
    var id: String
    var day: Int
    var topic: String
    static let buri = BuriSchema<Entry>(
        key: \.id,
        indexes: [.numeric("day", \.day, field: "day").plaintext(), .binary("topic", \.topic, field: "topic")])
}

@Suite("BuriTransfer: an index declared plaintext keeps its declaration through export, restore and import")
struct PlaintextIndexTransferTests {
    func exportLines(_ db: BuriDatabase) throws -> [String] {
        var lines: [String] = []
        try db.export { lines.append($0) }
        return lines
    }

    @Test func exportRestoreKeepsThePlaintextDeclaration() throws {
        let t = try TestDatabase(.memory)
        try t.db.bucket(Entry.self).store([Entry(id: "a", day: 3, topic: "x"), Entry(id: "b", day: 1, topic: "y")])
        let lines = try exportLines(t.db)
        // Format 7, and the member only on the declared index: an older buri refuses the export
        // rather than restore the index undeclared.
        #expect(lines.first == ExportFormat.header(version: 7))
        #expect(lines[1].components(separatedBy: #""plaintext":true"#).count == 2, "\(lines[1])")
        #expect(lines[1].contains(#""computed":false,"plaintext":true}"#), "\(lines[1])")
        let directory = TemporaryDirectory("buri-plaintext-export")
        let path = directory.path("dump.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let copy = try BuriDatabase.inMemory()
        defer { copy.close() }
        _ = try copy.restore(from: .file(path))
        #expect(try exportLines(copy) == lines)
        let info = try #require(try copy.bucketInfo(named: "Entry"))
        #expect(info.index(named: "day")?.plaintext == true)
        #expect(info.index(named: "topic")?.plaintext == nil)
        // A bucket without the declaration exports as before (format 3).
        let plain = try BuriDatabase.inMemory()
        defer { plain.close() }
        try plain.importJSONLines(
            from: .file(try write(#"{"id":"a","day":3}"# + "\n", "plain.jsonl", in: directory)), into: "P",
            options: ImportOptions(keyField: "id", indexes: [try .init(name: "day", kind: .numeric)]))
        let plainLines = try exportLines(plain)
        #expect(plainLines.first == ExportFormat.header(version: 3))
        #expect(!plainLines.contains { $0.contains("plaintext") })
    }

    @Test func importDeclaresTheIndexesItIsToldToAndRefusesOtherNames() throws {
        let directory = TemporaryDirectory("buri-plaintext-import")
        let input = try write(#"{"id":"a","day":3,"topic":"x"}"# + "\n", "in.jsonl", in: directory)
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let indexes = [try ImportOptions.Index(name: "day", kind: .numeric), try .init(name: "topic", kind: .binary)]
        try db.importJSONLines(
            from: .file(input), into: "E",
            options: ImportOptions(keyField: "id", indexes: indexes, plaintextIndexes: ["day"]))
        let info = try #require(try db.bucketInfo(named: "E"))
        #expect(info.index(named: "day")?.plaintext == true)
        #expect(info.index(named: "topic")?.plaintext == nil)
        // A name no index of the new bucket has; an existing index not declared so.
        let unknown = transferError {
            try db.importJSONLines(
                from: .file(input), into: "F",
                options: ImportOptions(keyField: "id", indexes: indexes, plaintextIndexes: ["dya"]))
        }
        #expect(unknown?.kind == .usage && unknown?.message.contains("'dya'") == true, "\(String(describing: unknown))")
        #expect(try db.bucketInfo(named: "F") == nil)
        let existing = transferError {
            try db.importJSONLines(from: .file(input), into: "E", options: ImportOptions(plaintextIndexes: ["topic"]))
        }
        #expect(
            existing?.kind == .usage && existing?.message.contains("not declared plaintext") == true,
            "\(String(describing: existing))")
        try db.importJSONLines(from: .file(input), into: "E", options: ImportOptions(plaintextIndexes: ["day"]))
    }

    @Test func aPlaintextMemberThatIsNotABooleanIsRefused() throws {
        let directory = TemporaryDirectory("buri-plaintext-refused")
        let schema =
            #"{"bucket":"E","schema":{"keyField":"id","schemaVersion":0,"indexes":[{"name":"day","kinds":["numeric"],"unique":false,"multiValued":false,"version":0,"fields":["day"],"fieldForms":null,"computed":false,"plaintext":1}]}}"#
        let input = try write(#"["buri-export",7]"# + "\n" + schema + "\n", "bad.jsonl", in: directory)
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let error = transferError { try db.restore(from: .file(input)) }
        #expect(error?.kind == .invalidInput, "\(String(describing: error))")
        #expect(error?.message.contains(#""plaintext" is"#) == true, "\(String(describing: error))")
        #expect(error?.message.contains("true or false") == true, "\(String(describing: error))")
    }
}
