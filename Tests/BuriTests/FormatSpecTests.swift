import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - What an independent reader needs settled (issue 11, point 10)

/// §8: elements a decoder must read as documented (the value) or refuse (`nil`): the E = 0 case,
/// the integer/Double boundary at 2^63 for each sign, and exponents out of range.
private let decodingVectors: [(name: String, hex: String, value: IndexValue.Decoded?)] = [
    ("E = 0, F = 0: the integer 1", "23 04 33 00 00 00 00 00 00 00 00", .integer(1)),
    ("E = 0, F = 2^63: 1.5, a Double (no shift by 64)", "23 04 33 80 00 00 00 00 00 00 00", .double(1.5)),
    ("E = 0, F = 2^63, negative: -1.5", "21 fb cc 7f ff ff ff ff ff ff ff", .double(-1.5)),
    ("E = 0, F = 1: neither an integer nor a Double", "23 04 33 00 00 00 00 00 00 00 01", nil),
    ("E = 1, F = 2^63: the integer 3", "23 04 34 80 00 00 00 00 00 00 00", .integer(3)),
    ("2^63 + 2^11: a UInt64", "23 04 72 00 00 00 00 00 00 10 00", .unsigned((UInt64(1) << 63) + 2048)),
    ("-(2^63 + 2^11): below Int64.min, so a Double", "21 fb 8d ff ff ff ff ff ff ef ff", .double(-(0x1p63 + 0x1p11))),
    ("-(2^63 + 1): neither an Int64 nor a Double", "21 fb 8d ff ff ff ff ff ff ff fd", nil),
    ("2^64: a Double", "23 04 73 00 00 00 00 00 00 00 00", .double(0x1p64)),
    ("3 × 2^-1074: a subnormal Double", "23 00 02 80 00 00 00 00 00 00 00", .double(3 * Double.leastNonzeroMagnitude)),
    ("E = -1073 with 2 fraction bits: a subnormal has 1", "23 00 02 40 00 00 00 00 00 00 00", nil),
    ("biased exponent 0 (E = -1075)", "23 00 00 00 00 00 00 00 00 00 00", nil),
    ("biased exponent 2099 (E = 1024)", "23 08 33 00 00 00 00 00 00 00 00", nil),
]

@Suite("Format: settled for an independent reader")
struct FormatSpecTests {
    @Test(
        "§8: every decoding vector decodes to its value, canonically, or is refused", arguments: decodingVectors.indices
    )
    func decodingVector(_ i: Int) throws {
        let vector = decodingVectors[i]
        let element = bytes(hex: vector.hex)
        #expect(element.count == 11)
        if let expected = vector.value {
            let (value, length) = try decode(element)
            #expect(value == expected, "\(vector.name): decoded \(value)")
            #expect(length == 11)
            #expect(encode(value) == element, "\(vector.name): re-encodes as \(formatHex(encode(value)))")
        } else {
            #expect(throws: FormatError.self, "\(vector.name)") { try decode(element) }
        }
    }

    @Test("§8: docs/FORMAT.md shows every decoding vector")
    func documentShowsDecodingVectors() throws {
        let flat = try flatFormatDocument()
        for vector in decodingVectors {
            #expect(flat.contains(vector.hex), "docs/FORMAT.md lacks \(vector.name): \(vector.hex)")
        }
    }

    @Test(
        "§4: a header of version 0, or of a known version with more than 6 bytes, is refused; a newer one of any length is unsupportedFormat; nothing is written"
    )
    func headerValidity() throws {
        let cases: [([UInt8], BuriError?)] = [
            (Array("BURI".utf8) + [0x00, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x02, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x01, 0xFF], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x03, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x04, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x05, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x06, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x08, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x09, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x0A, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x0B, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x0C, 0x00], .notABuriDatabase(path: "")),
            (Array("BURI".utf8) + [0x00, 0x0E, 0x00, 0x00], .unsupportedFormat(path: "", found: 14, supported: 13)),
            (Array("BURI".utf8) + [0x00, 0x02], nil),
            (Array("BURI".utf8) + [0x00, 0x03], nil),
            (Array("BURI".utf8) + [0x00, 0x04], nil),
            (Array("BURI".utf8) + [0x00, 0x05], nil),
            (Array("BURI".utf8) + [0x00, 0x06], nil),
            (Array("BURI".utf8) + [0x00, 0x08], nil),
            (Array("BURI".utf8) + [0x00, 0x09], nil),
            (Array("BURI".utf8) + [0x00, 0x0A], nil),
            (Array("BURI".utf8) + [0x00, 0x0B], nil),
            (Array("BURI".utf8) + [0x00, 0x0C], nil),
            (Array("BURI".utf8) + [0x00, 0x0D], nil),
        ]
        for (value, expected) in cases {
            let directory = FormatDiskTests.Directory()
            do {
                let raw = try Database(path: directory.path, options: Options())
                try raw.put(Keyspace.headerKey, value)
                raw.close()
            }
            do {
                let db = try BuriDatabase(path: directory.path)
                db.close()
                #expect(expected == nil, "opened a database with header \(formatHex(value))")
            } catch {
                switch expected {
                case .notABuriDatabase?:
                    #expect(error == .notABuriDatabase(path: directory.path), "\(formatHex(value))")
                case .unsupportedFormat(_, let found, let supported)?:
                    #expect(
                        error == .unsupportedFormat(path: directory.path, found: found, supported: supported),
                        "\(formatHex(value))")
                default: Issue.record("header \(formatHex(value)) refused: \(error)")
                }
            }
            let raw = try Database(path: directory.path, options: Options())
            #expect(
                Array(try raw.entries()).map { $0.key + [0xFF] + $0.value } == [Keyspace.headerKey + [0xFF] + value])
            raw.close()
        }
    }

    /// The declaration §5 and §17 give for their example, verbatim.
    struct Person: BuriSupport {
        var objectId: String
        var name: String
        var locale: String
        var age: Int

        static let buri = BuriSchema<Person>(
            key: \.objectId,
            indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
            bucket: "Person",
            schemaVersion: 1,
            keyField: "objectId"
        )
    }

    /// The source of ``Person`` as docs/FORMAT.md shows it.
    static let personDeclaration = """
        struct Person: BuriSupport {
            var objectId: String
            var name: String
            var locale: String
            var age: Int

            static let buri = BuriSchema<Person>(
                key: \\.objectId,
                indexes: [.binary("locale", \\.locale), .numeric("age", \\.age)],
                bucket: "Person",
                schemaVersion: 1,
                keyField: "objectId"
            )
        }
        """

    @Test("§5/§17: the documented Swift declaration writes exactly the documented database, and the document shows it")
    func workedExample() throws {
        #expect(try formatDocument().contains(Self.personDeclaration))
        let directory = FormatDiskTests.Directory()
        do {
            let db = try BuriDatabase(path: directory.path)
            let people = try db.bucket(Person.self)
            try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 20))
            db.close()
        }
        let raw = try Database(path: directory.path, options: Options())
        defer { raw.close() }
        let entries = Array(try raw.entries())
        let expected: [(key: String, value: [UInt8])] = [
            ("00 62 75 63 6b 65 74 2d 69 64 73", bytes(hex: "00 00 00 01")),
            ("00 66 6f 72 6d 61 74", bytes(hex: "42 55 52 49 00 0d")),
            ("01 50 65 72 73 6f 6e", try personDescriptor.encoded()),
            ("02 00 00 00 01 70 31", try personRecord()),
            ("03 00 00 00 01 00 00 00 01 30 45 4e 00 00 70 31", []),
            ("03 00 00 00 01 00 00 00 02 23 04 37 40 00 00 00 00 00 00 00 70 31", []),
            ("05 00 00 00 01", bytes(hex: "00 00 00 00 00 00 00 01")),
        ]
        #expect(entries.map { formatHex($0.key) } == expected.map(\.key))
        #expect(entries.map(\.value) == expected.map(\.value))
        #expect(entries.count == 7 && entries[2].value.count == 202 && entries[3].value.count == 62)
    }

    struct Rated: BuriSupport {
        var id: String
        var locale: String?
        var score: Double

        static let buri = BuriSchema<Rated>(
            key: \.id,
            indexes: [.compound("locale_score", .binary(\.locale), .numeric(\.score), unique: true)]
        )
    }

    @Test(
        "§9: a compound index with a nil component has no entry: not found by its other components, not constrained by uniqueness"
    )
    func compoundWithNil() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let rated = try db.bucket(Rated.self)
        try rated.store([
            Rated(id: "a", locale: nil, score: 1), Rated(id: "b", locale: nil, score: 1),
            Rated(id: "c", locale: "EN", score: 1),
        ])
        #expect(try rated.count() == 3)
        #expect(try rated.keys(.index("locale_score", equals: "EN")) == ["c"])
        #expect(try rated.keys(.index("locale_score", from: .unbounded, to: .unbounded)) == ["c"])
        #expect(try rated.raw.record(forKey: "a")?.indexValues["locale_score"] == nil)
        #expect(try rated.raw.record(forKey: "c")?.indexValues["locale_score"] == [["EN", 1]])
        // Unique: a second ("EN", 1) is refused; nil components never collide.
        #expect(throws: BuriError.self) { try rated.store(Rated(id: "d", locale: "EN", score: 1)) }
    }

    @Test("§9: every component is checked even when another is nil: a NaN is refused whatever the order of the parts")
    func compoundNilDoesNotHideNaN() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let rated = try db.bucket(Rated.self)
        do {
            try rated.store(Rated(id: "a", locale: nil, score: .nan))
            Issue.record("stored a NaN in a compound index because another component was nil")
        } catch {
            guard case .invalidIndexValue(_, _, let index, _) = error else {
                Issue.record("expected invalidIndexValue, got \(error)")
                return
            }
            #expect(index == "locale_score")
        }
        #expect(try rated.count() == 0)
    }

    @Test(
        "§9: tools compute a compound index as Swift does: a null or missing field gives no entry, an array is refused whatever the other fields hold"
    )
    func compoundFromFields() throws {
        let index = IndexDefinition(
            id: 1, name: "locale_tag", components: [.binary, .binary], fields: ["locale", "tag"])
        #expect(try index.tuples(of: ["locale": "EN", "tag": "x"]) == [["EN", "x"]])
        #expect(try index.tuples(of: ["locale": "EN", "tag": nil]) == [])
        #expect(try index.tuples(of: ["locale": "EN"]) == [])
        #expect(try index.tuples(of: ["tag": "x"]) == [])
        for object: CBORValue in [
            ["locale": nil, "tag": ["x", "y"]], ["tag": ["x"]], ["locale": ["EN"], "tag": nil],
            ["locale": "EN", "tag": ["x"]],
        ] {
            #expect(throws: BuriError.self, "\(object.jsonString())") { try index.tuples(of: object) }
        }
        // A wrong kind is refused even next to a missing field.
        #expect(throws: BuriError.self) { try index.tuples(of: ["locale": 5, "tag": nil]) }
        #expect(throws: BuriError.self) { try index.tuples(of: ["locale": nil, "tag": 5]) }
    }

    struct Note: BuriSupport {
        var id: String
        var tags: [String]
        static let buri = BuriSchema<Note>(key: \.id, indexes: [.binary("tags", \.tags)])
    }

    @Test(
        "§11: a multi-valued first index gives each object once, at its first matching entry in walk order, on every page size"
    )
    func multiValuedOncePerQuery() throws {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let notes = try db.bucket(Note.self)
        try notes.store([
            Note(id: "n1", tags: ["a", "b", "c"]), Note(id: "n2", tags: ["b"]), Note(id: "n3", tags: ["a", "c"]),
            Note(id: "n4", tags: ["d"]),
        ])
        let query = Query.index("tags", in: IndexValue("a")...IndexValue("c"))
        // Positions: n1 at "a", n3 at "a", n2 at "b" ascending; n3 at "c", n1 at "c", n2 at "b" descending.
        #expect(try notes.keys(query) == ["n1", "n3", "n2"])
        #expect(try notes.keys(query.descending()) == ["n3", "n1", "n2"])
        #expect(try notes.count(query) == 3)
        #expect(try notes.keys(query.offset(1).limit(1)) == ["n3"])
        for size in 1...4 {
            for q in [query, query.descending()] {
                var keys: [String] = []
                var token: ContinuationToken? = nil
                repeat {
                    let page = try notes.keyPage(q.after(token), size: size)
                    keys += page.items
                    token = page.next
                } while token != nil
                #expect(keys == (try notes.keys(q)), "page size \(size)")
            }
        }
    }

    @Test(
        "§16: an open database, even a read-only one, holds LevelDB's LOCK; opening rewrites LevelDB's own files but no Buri key"
    )
    func lockAndFiles() throws {
        let directory = FormatDiskTests.Directory()
        do {
            let db = try BuriDatabase(path: directory.path)
            try db.bucket(Person.self).store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 20))
            db.close()
        }
        func files() throws -> Set<String> { Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)) }
        func keysAndValues() throws -> [[UInt8]] {
            let raw = try Database(path: directory.path, options: Options())
            defer { raw.close() }
            return Array(try raw.entries()).map { $0.key + [0xFF] + $0.value }
        }
        let before = try keysAndValues()
        let filesBefore = try files()
        var readOnly = BuriOptions()
        readOnly.createIfMissing = false
        let reader = try BuriDatabase(path: directory.path, options: readOnly)
        #expect(try reader.bucketNames() == ["Person"])
        do {
            let second = try BuriDatabase(path: directory.path, options: readOnly)
            second.close()
            Issue.record("a second handle opened a database that is open")
        } catch {
            guard case .storage(let storage) = error else {
                Issue.record("expected a storage error, got \(error)"); return
            }
            #expect(storage.code == .databaseInUse)
        }
        #expect(throws: LevelDBError.self) { try Database(path: directory.path, options: Options()) }
        reader.close()
        let filesAfter = try files()
        #expect(filesAfter.contains("LOCK"))
        #expect(
            filesAfter.filter { $0.hasPrefix("MANIFEST-") } != filesBefore.filter { $0.hasPrefix("MANIFEST-") },
            "opening wrote no new MANIFEST: \(filesBefore.sorted()) → \(filesAfter.sorted())")
        #expect(try keysAndValues() == before)
    }
}
