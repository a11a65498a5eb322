import Buri
import BuriTestSupport
import BuriTransfer
import Foundation
import Testing

@Suite("BuriTransfer: refused input names its line, and nothing is written")
struct RefusedInputTests {
    /// Good lines, then a bad one: the line it is, and what the message must say.
    static let cases: [(name: String, lines: [String], line: Int, mentions: [String])] = [
        ("invalid JSON", [#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"id":"c","n":"#], 3, ["invalid JSON"]),
        ("no key", [#"{"id":"a","n":1}"#, #"{"n":2}"#], 2, ["no key field 'id'"]),
        ("inexact number", [#"{"id":"a","n":1}"#, #"{"id":"b","n":1e400}"#], 2, ["1e400"]),
        ("not an object", [#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, "[1,2]"], 3, ["expected a JSON object"]),
        (
            "unique value taken", [#"{"id":"a","n":1,"mail":"x@y"}"#, #"{"id":"b","n":2,"mail":"x@y"}"#], 2,
            ["key \"b\"", "unique index 'mail'", "for key \"a\""]
        ),
        ("export header late", [#"{"id":"a","n":1}"#, #"["buri-export",3]"#], 2, ["may only start the input"]),
    ]

    /// An index option per field the cases use (`mail` unique, so that a repeated value is refused).
    static func options() throws -> ImportOptions {
        ImportOptions(
            keyField: "id", indexes: [try .init(name: "n", kind: .numeric), try .init(name: "mail", kind: .binary)])
    }

    @Test(arguments: cases.indices)
    func aBadLineIntoAnExistingBucketIsNamedAndChangesNothing(_ index: Int) throws {
        let test = Self.cases[index]
        let directory = TemporaryDirectory("buri-transfer")
        let db = try BuriDatabase.create(location: directory.path("db.buri"))
        defer { db.close() }
        var mail = IndexDefinition(id: 0, name: "mail", components: [.binary], unique: true)
        mail.setFieldPaths([["mail"]])
        var n = IndexDefinition(id: 0, name: "n", components: [.numeric])
        n.setFieldPaths([["n"]])
        let raw = try db.createBucket(named: "B", keyField: "id", indexes: [n, mail])
        try raw.store([
            RawObject(
                key: "old", payload: try CBORValue(json: #"{"id":"old","n":0,"mail":"old@y"}"#).encoded(),
                indexValues: ["n": [[IndexValue(0)]], "mail": [[IndexValue("old@y")]]])
        ])
        let before = try everyEntry(db)
        let input = try write(test.lines.joined(separator: "\n") + "\n", "in.jsonl", in: directory)

        let error = transferError { try db.importJSONLines(from: .file(input), into: "B") }
        #expect(error?.kind == .invalidInput, "\(test.name): \(String(describing: error))")
        #expect(error?.line == test.line, "\(test.name)")
        #expect(error?.message.hasPrefix("line \(test.line)") == true, "\(test.name): \(String(describing: error))")
        #expect(error?.message.hasSuffix("nothing was imported") == true, "\(test.name): \(String(describing: error))")
        for mention in test.mentions {
            #expect(
                error?.message.contains(mention) == true, "\(test.name): \(mention) in \(String(describing: error))")
        }
        #expect(try everyEntry(db) == before, "\(test.name): the database changed")
        #expect(try db.pendingPurges().isEmpty, "\(test.name): a stage was left")
    }

    /// A new bucket's indexes are never unique: every case but the unique one.
    @Test(arguments: cases.indices.filter { !cases[$0].name.hasPrefix("unique") })
    func aBadLineForANewBucketCreatesNoBucket(_ index: Int) throws {
        let test = Self.cases[index]
        let directory = TemporaryDirectory("buri-transfer")
        let db = try BuriDatabase.create(location: directory.path("db.buri"))
        defer { db.close() }
        let before = try everyEntry(db)
        let input = try write(test.lines.joined(separator: "\n"), "in.jsonl", in: directory)
        let load = try JSONLinesImport(from: .file(input), into: "New", existing: nil, options: try Self.options())
        defer { load.close() }
        #expect(load.needsCheck)
        // The check pass refuses the line before anything is written.
        let error = transferError { try load.check() }
        #expect(error?.kind == .invalidInput, "\(test.name): \(String(describing: error))")
        #expect(error?.line == test.line, "\(test.name)")
        #expect(try db.bucketNames().isEmpty, "\(test.name)")
        #expect(try everyEntry(db) == before, "\(test.name): the database changed")
    }

    @Test func optionsABucketContradictsAreRefusedBeforeTheInputIsRead() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        _ = try db.bucket(Item.self)
        let existing = try db.bucketInfo(named: "items")
        // The input does not exist: the options are refused first all the same.
        let missing = TransferInput.file("/nonexistent/input.jsonl")
        let key = transferError {
            _ = try JSONLinesImport(
                from: missing, into: "items", existing: existing, options: ImportOptions(keyField: "x"))
        }
        #expect(key?.kind == .usage)
        #expect(key?.message == "bucket 'items' keeps its keys in field 'id'; pass --key id or leave --key out")
        let unreadable = transferError { _ = try JSONLinesImport(from: missing, into: "Fresh", existing: nil) }
        #expect(unreadable?.kind == .failure)
        #expect(unreadable?.message == "cannot read '/nonexistent/input.jsonl': there is no such file")
    }

    @Test func aBadExportRestoresNothingAndLeavesNoDatabase() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let header = ExportFormat.header(version: 3)
        let schema = #"{"bucket":"B","schema":{"keyField":"id","schemaVersion":0,"indexes":[]}}"#
        let inputs: [(text: String, line: Int?, mentions: String)] = [
            ("", nil, "the input is empty; give the output of `buri export`; nothing was restored"),
            (#"{"id":"a"}"#, 1, "line 1: the input is not a `buri export`"),
            (
                header + "\n" + schema + "\n" + #"{"bucket":"B","key":"a","object":{"id":"a"}}"# + "\n"
                    + #"{"bucket":"B","key":"b","objekt":{}}"#, 4,
                "line 4: the record of bucket 'B' has the member \"objekt\""
            ),
            (header + "\n" + #"{"bucket":"C","key":"a","object":{}}"#, 2, "no schema line for it"),
        ]
        for (number, input) in inputs.enumerated() {
            let path = directory.path("copy\(number).buri")
            let dump = try write(input.text, "dump\(number).jsonl", in: directory)
            let error = transferError { try BuriDatabase.restore(from: .file(dump), to: path) }
            #expect(error?.kind == .invalidInput, "\(String(describing: error))")
            #expect(error?.line == input.line, "\(String(describing: error))")
            #expect(error?.message.contains(input.mentions) == true, "\(String(describing: error))")
            #expect(error?.message.hasSuffix("nothing was restored") == true, "\(String(describing: error))")
            #expect(!FileManager.default.fileExists(atPath: path), "a database was left at \(path)")
        }
    }

    @Test func anUnknownBucketIsNotFoundAndAFailingWriterEndsTheExport() throws {
        let directory = TemporaryDirectory("buri-transfer")
        let db = try fixtureDatabase(in: directory)
        defer { db.close() }
        let url = URL(fileURLWithPath: directory.path("out.jsonl"))
        let missing = transferError { try db.export(to: url, options: ExportOptions(buckets: ["nope"])) }
        #expect(missing?.kind == .notFound)
        if case .unknownBucket(let name, _)? = missing?.underlying as? BuriError {
            #expect(name == "nope")
        } else {
            Issue.record("the underlying error is not unknownBucket: \(String(describing: missing))")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["source.buri"])

        struct Full: Error {}
        var written = 0
        let failed = transferError {
            try db.export { _ in
                written += 1
                if written == 3 { throw Full() }
            }
        }
        #expect(failed?.underlying is Full)
        #expect(written == 3, "the export stops at the writer's error")
    }
}
