import Buri
import Foundation
import Testing

/// Books indexed the README's way: key paths without `field:`, so tools cannot compute most of
/// these indexes from the stored objects — plus a computed index and one declared with a field.
struct Book: BuriSupport, Equatable {
    var id: String
    var title: String
    var year: Int
    var tags: [String]
    var cover: Data
    var rating: Double?
    var published: Date
    var isbn: String

    static let buri = BuriSchema<Book>(
        key: \.id,
        indexes: [
            .binary("title", \.title),
            .numeric("year", \.year),
            .binary("tags", \.tags),
            .binary("cover", \.cover),
            .numeric("rating", \.rating),
            .numeric("published", \.published),
            .compound("title_year", .binary(\.title), .numeric(\.year)),
            .computed("initial", components: [.binary]) { book in [[IndexValue(String(book.title.prefix(1)))]] },
            .binary("isbn", \.isbn, field: "isbn", unique: true),
        ],
        bucket: "books",
        keyField: "id"
    )
}

let fixtureBooks: [Book] = [
    Book(
        id: "b1", title: "Dune", year: 1965, tags: ["sf", "desert"], cover: Data([0xFF, 0x00, 0x80]), rating: 4.5,
        published: Date(timeIntervalSince1970: 1_700_000_000.25), isbn: "isbn-1"),
    Book(
        id: "b2", title: "Émile", year: -1762, tags: [], cover: Data("plain".utf8), rating: nil,
        published: Date(timeIntervalSince1970: -86_400), isbn: "isbn-2"),
    Book(
        id: "b3", title: "Zero", year: 0, tags: ["sf"], cover: Data(), rating: 1e300,
        published: Date(timeIntervalSince1970: 0), isbn: "isbn-3"),
]

/// Every index entry of every bucket of the database at `path`, as "bucket index key values".
func indexEntries(_ path: String) throws -> [String] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    var result: [String] = []
    for name in try db.bucketNames() {
        let raw = try db.rawBucket(named: name)
        let cursor = try raw.cursor(.all)
        while let record = try cursor.nextRecord() {
            for (index, tuples) in record.indexValues.sorted(by: { $0.key < $1.key }) {
                let values = tuples.map { $0.flatMap(\.encoded).map { String($0, radix: 16) }.joined(separator: ".") }
                    .sorted()
                result.append("\(name) \(index.name) \(record.key) \(values)")
            }
        }
        for index in raw.descriptor.indexes {
            let keys = try raw.keys(Query.index(index.name, from: .unbounded, to: .unbounded))
            result.append("\(name) \(index.name) in index order: \(keys)")
        }
    }
    return result
}

@Suite("An export restores whatever it holds, indexes declared without field: included")
struct KeyPathIndexDumpToolTests {
    func database(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("books.buri")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Book.self).store(fixtureBooks)
        try db.bucket(Person.self).store(Array(fixturePeople.prefix(3)))
        return path
    }

    @Test func aDatabaseOfKeyPathIndexesRestoresFromItsOwnExport() throws {
        let sandbox = try Sandbox()
        let db = try database(sandbox)
        let export = try buri("export", db)
        #expect(export.status == 0, "\(export)")
        // Format 4: the records of 'books' carry the values of the indexes tools cannot compute.
        #expect(export.lines.first == #"["buri-export",4]"#, "\(export.stdout)")
        let b1 = export.lines.first { $0.hasPrefix(#"{"bucket":"books","key":"b1""#) } ?? ""
        #expect(
            b1.hasSuffix(
                #","indexValues":{"title":[["Dune"]],"year":[[1965]],"tags":[["desert"],["sf"]],"cover":[[{"$bytes":"/wCA"}]],"rating":[[4.5]],"published":[[1700000000.25]],"title_year":[["Dune",1965]],"initial":[["D"]]}}"#
            ), "\(b1)")
        // Person's indexes are all computable: its records carry nothing more.
        #expect(!export.lines.contains { $0.hasPrefix(#"{"bucket":"Person","key""#) && $0.contains("indexValues") })

        let copy = sandbox.path("copy.buri")
        let restored = try buri(["restore", copy], stdin: export.stdout)
        #expect(
            restored.status == 0 && restored.stdout == "restored 2 buckets and 6 objects into \(copy)\n", "\(restored)")
        // The same entries, the same bytes again, and a clean check.
        #expect(try indexEntries(copy) == indexEntries(db))
        #expect(try buri("export", copy).stdout == export.stdout)
        let check = try buri("check", copy)
        #expect(check.status == 0, "\(check)")
        // The Swift type reads and queries the restored bucket as it did the original.
        let database = try BuriDatabase(path: copy)
        defer { database.close() }
        let books = try database.bucket(Book.self)
        #expect(try books.objects(.index("title", equals: "Dune")) == [fixtureBooks[0]])
        #expect(try books.keys(.index("year", in: IndexValue(-2000)...IndexValue(0))) == ["b2", "b3"])
        #expect(try books.keys(.index("cover", equals: IndexValue(bytes: [0xFF, 0x00, 0x80]))) == ["b1"])
        #expect(try books.keys(.index("initial", equals: "Z")) == ["b3"])
        #expect(try books.keys(.index("tags", equals: "sf")) == ["b1", "b3"])
        // A new object stored through the type after the restore is indexed alongside.
        try books.store(
            Book(
                id: "b4", title: "Dune Messiah", year: 1969, tags: ["sf"], cover: Data(), rating: 4,
                published: Date(timeIntervalSince1970: 1), isbn: "isbn-4"))
        #expect(try books.keys(.index("tags", equals: "sf")) == ["b1", "b3", "b4"])
    }

    @Test func importOfOneBucketOfTheExportTakesTheCarriedValues() throws {
        let sandbox = try Sandbox()
        let db = try database(sandbox)
        let export = try buri("export", db, "books")
        let copy = sandbox.path("one.buri")
        let imported = try buri(["import", copy, "books"], stdin: export.stdout)
        #expect(
            imported.status == 0 && imported.stdout == "imported 3 objects into bucket 'books' of \(copy)\n",
            "\(imported)")
        #expect(try indexEntries(copy) == indexEntries(db).filter { $0.hasPrefix("books ") })
        #expect(try buri("export", copy).stdout == export.stdout)
        // An existing bucket with such indexes still cannot take plain objects, and says why.
        expectFailure(
            try buri(["import", copy, "books"], stdin: #"{"id":"b9","title":"New"}"# + "\n"), status: 7,
            mentioning: ["index 'title'", "names no field"])
    }

    @Test func anExportWithoutTheCarriedValuesIsRefusedNamingTheIndex() throws {
        let sandbox = try Sandbox()
        let db = try database(sandbox)
        let export = try buri("export", db, "books").stdout
        // As buri wrote it before format 4: header 3, no "indexValues".
        var old = export.replacingOccurrences(of: #"["buri-export",4]"#, with: #"["buri-export",3]"#)
        while let start = old.range(of: #","indexValues":"#) {
            let end = old[start.upperBound...].range(of: "}}\n")!.lowerBound
            old.replaceSubrange(start.lowerBound..<end, with: "")
        }
        #expect(!old.contains("indexValues"))
        let run = try buri(["restore", sandbox.path("old.buri")], stdin: old)
        expectFailure(
            run, status: 7,
            mentioning: ["line 2", "index 'title'", "names no field", "format 3", "export the database again"])
        #expect(!sandbox.exists("old.buri"))

        // Hand-edited carried values are checked against the schema, naming line and index.
        let lines = export.split(separator: "\n").map(String.init)
        func edited(_ line: Int, _ change: (String) -> String) -> String {
            lines.enumerated().map { $0.offset == line ? change($0.element) : $0.element }.joined(separator: "\n")
                + "\n"
        }
        let cases: [(String, [String])] = [
            (
                edited(2) { $0.replacingOccurrences(of: #""title":[["Dune"]],"#, with: "") },
                ["line 3", "lacks index 'title'"]
            ),
            (
                edited(2) { $0.replacingOccurrences(of: #""title":[["Dune"]]"#, with: #""title":[[5]]"#) },
                ["line 3", "index 'title'", "binary"]
            ),
            (
                edited(2) { $0.replacingOccurrences(of: #""year":[[1965]]"#, with: #""year":[["1965"]]"#) },
                ["line 3", "index 'year'", "numeric"]
            ),
            (
                edited(2) {
                    $0.replacingOccurrences(of: #""title_year":[["Dune",1965]]"#, with: #""title_year":[["Dune"]]"#)
                }, ["line 3", "index 'title_year'", "2 values"]
            ),
            (
                edited(2) {
                    $0.replacingOccurrences(of: #""initial":[["D"]]"#, with: #""initial":[["D"]],"isbn":[["x"]]"#)
                }, ["line 3", "\"isbn\""]
            ),
            (
                edited(2) { $0.replacingOccurrences(of: #""rating":[[4.5]]"#, with: #""rating":4.5"#) },
                ["line 3", "index 'rating'"]
            ),
            (
                edited(2) {
                    $0.replacingOccurrences(of: #","indexValues":{"#, with: #","indexValues":[{"#).replacingOccurrences(
                        of: "]]}}", with: "]]}]}")
                }, ["line 3", "\"indexValues\""]
            ),
        ]
        for (dump, mentions) in cases {
            #expect(dump != export)
            expectFailure(
                try buri(["restore", sandbox.path("bad.buri")], stdin: dump), status: 7,
                mentioning: mentions + ["nothing was restored"])
            #expect(!sandbox.exists("bad.buri"))
        }
    }
}
