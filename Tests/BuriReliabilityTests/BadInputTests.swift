import Foundation
import LevelDB
import Testing
@testable import Buri

/// A type with raw-byte, NUL-holding and floating-point index values.
struct Odd: BuriSupport, Equatable, Sendable {
    var id: String
    var label: String
    var blob: [UInt8]
    var value: Double

    static let buri = BuriSchema<Odd>(
        key: \.id, indexes: [.binary("label", \.label), .binary("blob", \.blob), .numeric("value", \.value)])
}

/// Person's shape with a field of another type: stored Persons do not decode as it.
struct NotAPerson: BuriSupport, Equatable, Sendable {
    var id: String
    var locale: String
    var age: String

    static let buri = BuriSchema<NotAPerson>(
        key: \.id, indexes: [.binary("locale", \.locale), .numeric("length", \.id.utf8.count)])
}

/// Bad input through the Swift API: each case gets a clear typed error and writes nothing, or —
/// for inputs that are valid however odd — works exactly.
struct BadInputTests {
    /// Opens a fresh database with a Person bucket holding one object; `body` runs against it, and
    /// the raw contents of the database are returned before and after.
    static func withPeople(
        _ engine: Engine, _ body: (BuriDatabase, Bucket<Person>) throws -> Void
    ) throws -> (before: [[UInt8]], after: [[UInt8]]) {
        let test = try TestDatabase(engine)
        let people = try test.db.bucket(Person.self)
        try people.store(Person(id: "p1", name: "Dirk", locale: "EN", age: 20, tags: ["a"]))
        try test.reopen()
        let before = try scanEntries(test.db.engine.snapshot())
        try body(test.db, try test.db.bucket(Person.self))
        return (before, try scanEntries(test.db.engine.snapshot()))
    }

    @Test(
        "empty and over-long keys are rejected with typed errors, alone or inside a batch, writing nothing",
        arguments: Engine.allCases)
    func emptyAndLongKeys(engine: Engine) throws {
        let (before, after) = try Self.withPeople(engine) { _, people in
            #expect(throws: BuriError.emptyKey(bucket: "Person")) {
                try people.store(Person(id: "", name: "", locale: "EN", age: 1))
            }
            let huge = String(repeating: "k", count: 1 << 20)
            do {
                try people.store(Person(id: huge, name: "", locale: "EN", age: 1))
                Issue.record("a 1 MiB key was stored")
            } catch let BuriError.keyTooLong(bucket, keyPrefix, length, limit) {
                #expect(bucket == "Person" && keyPrefix.count <= 32 && length == 1 << 20 && limit == 4096)
            } catch {
                Issue.record("expected .keyTooLong, got \(error)")
            }
            // A bad object anywhere in a batch stops the whole batch.
            #expect(throws: BuriError.emptyKey(bucket: "Person")) {
                try people.store([
                    Person(id: "ok1", name: "", locale: "EN", age: 1), Person(id: "", name: "", locale: "EN", age: 2),
                ])
            }
            #expect(throws: BuriError.self) {
                try people.raw.store([RawObject(key: "ok2", payload: [0xA0]), RawObject(key: huge, payload: [0xA0])])
            }
            // Reading with such keys is harmless.
            #expect(try people.object(forKey: "") == nil)
            #expect(try people.object(forKey: huge) == nil)
            #expect(try people.delete(key: "") == false)
            #expect(try people.delete(key: huge) == false)
            // The longest allowed key works.
            let longest = String(repeating: "L", count: 4096)
            try people.store(Person(id: longest, name: "", locale: "EN", age: 3))
            #expect(try people.object(forKey: longest)?.age == 3)
            #expect(try people.delete(key: longest))
        }
        #expect(after == before)
    }

    @Test(
        "NUL bytes in keys and index values are ordinary bytes: stored, found exactly, kept apart",
        arguments: Engine.allCases)
    func nulBytes(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        let odd = try db.bucket(Odd.self)
        let objects = [
            Odd(id: "a", label: "E", blob: [], value: 1),
            Odd(id: "a\u{0}", label: "E\u{0}", blob: [0], value: 2),
            Odd(id: "a\u{0}b", label: "E\u{0}N", blob: [0, 0], value: 3),
            Odd(id: "\u{0}", label: "\u{0}\u{0}", blob: [0, 1], value: 4),
            Odd(id: "ab", label: "EN", blob: [1], value: 5),
        ]
        try odd.store(objects)
        for object in objects { #expect(try odd.object(forKey: object.id) == object) }
        #expect(try odd.keys() == ["\u{0}", "a", "a\u{0}", "a\u{0}b", "ab"])
        #expect(try odd.keys(.index("label", equals: "E")) == ["a"])
        #expect(try odd.keys(.index("label", equals: "E\u{0}")) == ["a\u{0}"])
        #expect(try odd.keys(.index("label", equals: "E\u{0}N")) == ["a\u{0}b"])
        #expect(try odd.keys(.index("label", prefix: "E\u{0}")) == ["a\u{0}", "a\u{0}b"])
        #expect(try odd.keys(.index("label", prefix: "E")).count == 4)
        #expect(try odd.objects(.index("label", in: "E"..."EN")).map(\.label) == ["E", "E\u{0}", "E\u{0}N", "EN"])
        #expect(try odd.keys(.index("blob", equals: IndexValue(bytes: [0]))) == ["a\u{0}"])
        #expect(try odd.keys(.index("blob", prefix: "\u{0}")) == ["a\u{0}", "a\u{0}b", "\u{0}"])
        #expect(try odd.delete(key: "a\u{0}"))
        #expect(try odd.object(forKey: "a") != nil && odd.object(forKey: "a\u{0}b") != nil)
        #expect(try db.check().problems.isEmpty)
    }

    @Test("invalid UTF-8 bytes are valid binary index values", arguments: Engine.allCases)
    func invalidUTF8IndexValues(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let db = test.db
        let odd = try db.bucket(Odd.self)
        let blobs: [[UInt8]] = [
            [0xFF], [0xFF, 0xFE], [0xC3], [0xC3, 0x28], [0xED, 0xA0, 0x80], [0x80, 0x00, 0xFF],
            [0xF8, 0x88, 0x80, 0x80, 0x80],
        ]
        try odd.store(blobs.enumerated().map { Odd(id: "b\($0.offset)", label: "x", blob: $0.element, value: 0) })
        for (n, blob) in blobs.enumerated() {
            #expect(try odd.keys(.index("blob", equals: IndexValue(bytes: blob))) == ["b\(n)"])
            #expect(try odd.object(forKey: "b\(n)")?.blob == blob)
        }
        #expect(try odd.keys(.index("blob", prefixBytes: [0xFF])) == ["b0", "b1"])
        // Index order is bytewise order.
        let ordered = try odd.objects(.index("blob", from: .unbounded, to: .unbounded)).map(\.blob)
        #expect(ordered == blobs.sorted { $0.lexicographicallyPrecedes($1) })
        let record = try #require(try odd.raw.record(forKey: "b0"))
        #expect(record.indexValues["blob"] == [[IndexValue(bytes: [0xFF])]])
        #expect(try db.check().problems.isEmpty)
    }

    @Test(
        "NaN in a numeric index is a typed error and writes nothing; ±infinity work and sort at the ends",
        arguments: Engine.allCases)
    func nanAndInfinity(engine: Engine) throws {
        let test = try TestDatabase(engine)
        var odd = try test.db.bucket(Odd.self)
        try odd.store(Odd(id: "zero", label: "z", blob: [], value: 0))
        try test.reopen()
        let before = try scanEntries(test.db.engine.snapshot())
        var db = test.db
        odd = try db.bucket(Odd.self)
        for nan in [Double.nan, -Double.nan, Double.signalingNaN] {
            do {
                try odd.store(Odd(id: "nan", label: "n", blob: [], value: nan))
                Issue.record("NaN was stored")
            } catch let BuriError.invalidIndexValue(bucket, key, index, reason) {
                #expect(bucket == "Odd" && key == "nan" && index == "value", "\(reason)")
            } catch {
                Issue.record("expected .invalidIndexValue, got \(error)")
            }
            // In a batch with a valid object: neither is written.
            #expect(throws: BuriError.self) {
                try odd.store([
                    Odd(id: "fine", label: "f", blob: [], value: 1), Odd(id: "nan", label: "n", blob: [], value: nan),
                ])
            }
            // Over an existing object: the old version stays.
            #expect(throws: BuriError.self) { try odd.store(Odd(id: "zero", label: "changed", blob: [], value: nan)) }
        }
        #expect(throws: BuriError.self) { try IndexValue(Double.nan) }
        #expect(throws: BuriError.self) { try odd.keys(.index("value", in: 0.0...(try IndexValue(Double.nan)))) }
        #expect(try scanEntries(db.engine.snapshot()) == before, "a rejected NaN wrote something")

        try test.reopen()
        db = test.db
        odd = try db.bucket(Odd.self)
        let values: [Double] = [
            .infinity, -.infinity, 1, -1, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
            -0.0,
        ]
        try odd.store(values.enumerated().map { Odd(id: "v\($0.offset)", label: "v", blob: [], value: $0.element) })
        let ascending = try odd.objects(.index("value", from: .unbounded, to: .unbounded)).map(\.value)
        #expect(ascending.first == -.infinity && ascending.last == .infinity)
        #expect(ascending == ascending.sorted())
        #expect(try odd.min(index: "value") == IndexValue(floatLiteral: -.infinity))
        #expect(try odd.max(index: "value") == IndexValue(floatLiteral: .infinity))
        #expect(try odd.keys(.index("value", equals: IndexValue(floatLiteral: .infinity))) == ["v0"])
        #expect(
            try odd.keys(.index("value", in: IndexValue(floatLiteral: .greatestFiniteMagnitude)...)) == ["v4", "v0"])
        #expect(try odd.object(forKey: "v1")?.value == -.infinity)
        #expect(try db.check().problems.isEmpty)
    }

    @Test(
        "unknown buckets and indexes, and queries that do not fit their index, are typed errors",
        arguments: Engine.allCases)
    func unknownNames(engine: Engine) throws {
        let (before, after) = try Self.withPeople(engine) { db, people in
            #expect(throws: BuriError.unknownBucket(name: "Nope", known: ["Person"])) {
                try db.rawBucket(named: "Nope")
            }
            #expect(
                throws: BuriError.unknownIndex(
                    bucket: "Person", index: "nope", known: ["locale", "age", "tags", "score"])
            ) {
                try people.keys(.index("nope", equals: 1))
            }
            #expect(
                throws: BuriError.unknownIndex(
                    bucket: "Person", index: "nope", known: ["locale", "age", "tags", "score"])
            ) {
                try people.min(index: "nope")
            }
            let lazy = people.lazyObjects(.index("nope", equals: "x"))
            #expect(Array(lazy).isEmpty)
            #expect(
                lazy.error == .unknownIndex(bucket: "Person", index: "nope", known: ["locale", "age", "tags", "score"]))
            // A string bound on a numeric index, a number on a binary one, a prefix on a number.
            for query in [
                Query.index("age", equals: "twenty"), .index("locale", in: 1...2), .index("age", prefix: "2"),
            ] {
                do {
                    _ = try people.keys(query)
                    Issue.record("\(query) ran")
                } catch let BuriError.invalidQuery(bucket, index, _) {
                    #expect(bucket == "Person" && index != nil)
                } catch {
                    Issue.record("\(query): expected .invalidQuery, got \(error)")
                }
            }
            // Raw objects naming an unknown index, or giving it the wrong kind of value.
            #expect(throws: BuriError.self) {
                try people.raw.store([RawObject(key: "r", payload: [0xA0], indexValues: ["nope": [["x"]]])])
            }
            #expect(throws: BuriError.self) {
                try people.raw.store([RawObject(key: "r", payload: [0xA0], indexValues: ["age": [["x"]]])])
            }
            #expect(throws: BuriError.self) { try people.raw.store([RawObject(key: "r", payload: [0xFF, 0xFF])]) }
            #expect(throws: BuriError.invalidBucketName(name: "", reason: "it is empty")) {
                try db.bucket(Person.self, named: "")
            }
        }
        #expect(after == before)
    }

    @Test(
        "a bucket opened as the wrong Swift type: decodingFailed naming bucket, key and type; nothing written",
        arguments: Engine.allCases)
    func wrongSwiftType(engine: Engine) throws {
        let (before, after) = try Self.withPeople(engine) { db, _ in
            // Same index names and kinds, so opening it changes nothing in the catalog.
            struct Impostor: BuriSupport {
                var id: String
                var locale: Int
                var tags: [String]
                static let buri = BuriSchema<Impostor>(
                    key: \.id,
                    indexes: [
                        .binary("locale", \.id), .numeric("age", \.locale), .binary("tags", \.tags),
                        .numeric("score", \.locale),
                    ],
                    bucket: "Person")
            }
            let wrong = try db.bucket(Impostor.self)
            do {
                _ = try wrong.object(forKey: "p1")
                Issue.record("a Person decoded as Impostor")
            } catch let BuriError.decodingFailed(bucket, key, type, reason) {
                #expect(bucket == "Person" && key == "p1" && type == "Impostor", "\(reason)")
            } catch {
                Issue.record("expected .decodingFailed, got \(error)")
            }
            #expect(throws: BuriError.self) { try wrong.objects() }
            let lazy = wrong.lazyObjects()
            #expect(Array(lazy).isEmpty)
            if case .decodingFailed? = lazy.error {} else { Issue.record("lazy: \(String(describing: lazy.error))") }
            // Keys and counts need no decoding.
            #expect(try wrong.keys() == ["p1"])
        }
        #expect(after == before)
    }

    @Test(
        "opening a bucket as a wrong type whose indexes differ fails without damaging the bucket",
        arguments: Engine.allCases)
    func wrongSwiftTypeWithOtherIndexes(engine: Engine) throws {
        let test = try TestDatabase(engine)
        try test.db.bucket(Person.self).store((1...5).map { Person(id: "p\($0)", name: "n", locale: "EN", age: $0) })
        try test.reopen()
        let db = test.db
        // NotAPerson keeps "locale", drops Person's "age", "tags" and "score" indexes and adds
        // "length"; building it means decoding the stored objects, which fails.
        #expect(throws: BuriError.self) { try db.bucket(NotAPerson.self, named: "Person") }
        // The Person bucket is as it was: same catalog, every index entry still there.
        let people = try db.bucket(Person.self)
        let report = try db.check()
        #expect(report.problems.isEmpty, "\(report.summary)")
        #expect(try people.keys(.index("age", in: 2...3)) == ["p2", "p3"])
        #expect(try people.objects().count == 5)
    }

    @Test("a database written by a newer Buri: unsupportedFormat, and not a byte is written")
    func newerFormatVersion() throws {
        let directory = TemporaryDirectory("buri-newer")
        let path = directory.path("db")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(Person(id: "p1", name: "", locale: "EN", age: 1))
        db.close()
        try withRawDatabase(path) { raw in
            try raw.put(Keyspace.headerKey, Keyspace.headerValue(version: 14), options: .sync)
        }
        let before = try rawContents(path)
        #expect(throws: BuriError.unsupportedFormat(path: path, found: 14, supported: 13)) {
            try BuriDatabase(path: path)
        }
        #expect(try rawContents(path) == before)
        // And the database was closed again: LevelDB can open it right away.
        try withRawDatabase(path) { raw in try raw.put(Keyspace.headerKey, Keyspace.headerValue(version: 5)) }
        let reopened = try BuriDatabase(path: path)
        #expect(try reopened.bucket(Person.self).object(forKey: "p1")?.age == 1)
        reopened.close()
    }

    @Test("a LevelDB database Buri did not create: notABuriDatabase, and not a byte is written")
    func foreignLevelDB() throws {
        let directory = TemporaryDirectory("buri-foreign")
        for (name, entries) in [
            ("plain", [Entry(key: Array("hello".utf8), value: Array("world".utf8))]),
            ("fake header", [Entry(key: Keyspace.headerKey, value: Array("NOPE".utf8))]),
            ("short header", [Entry(key: Keyspace.headerKey, value: Array("BURI".utf8))]),
        ] {
            let path = directory.path(name)
            let raw = try Database(path: path)
            for entry in entries { try raw.put(entry.key, entry.value) }
            raw.close()
            let before = try rawContents(path)
            #expect(throws: BuriError.notABuriDatabase(path: path), "\(name)") { try BuriDatabase(path: path) }
            #expect(try rawContents(path) == before, "\(name)")
        }
        // Not a database at all: a directory holding other files, or a plain file.
        let other = directory.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: other + "/CURRENT", contents: Data("garbage".utf8))
        #expect(throws: BuriError.self) { try BuriDatabase(path: other) }
        let file = directory.path("file")
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect(throws: BuriError.self) { try BuriDatabase(path: file) }
        #expect(FileManager.default.contents(atPath: file) == Data("x".utf8))
        // A missing database with createIfMissing off: LevelDB's invalidArgument. (LevelDB makes the
        // directory, its LOCK and LOG files before it finds there is no database, so those
        // remain; no database is created.)
        var options = BuriOptions()
        options.createIfMissing = false
        let missing = directory.path("missing")
        if case .storage(let error)? = openError(missing, options: options) {
            #expect(error.code == .invalidArgument && error.message.contains("does not exist"), "\(error)")
        } else {
            Issue.record("expected .storage, got \(String(describing: openError(missing, options: options)))")
        }
        #expect(!FileManager.default.fileExists(atPath: missing + "/CURRENT"))
    }

    @Test("a read-only database directory: a clear storage error and nothing changed (as root: see the comment)")
    func readOnlyDirectory() throws {
        let directory = TemporaryDirectory("buri-readonly")
        let path = directory.path("db")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(Person(id: "p1", name: "", locale: "EN", age: 1))
        db.close()
        let before = try rawContents(path)
        let filesBefore = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
        #expect(chmod(path, 0o500) == 0)
        defer { chmod(path, 0o755) }

        // Root ignores permission bits, so chmod alone proves nothing when the tests run as root
        // (they do in CI). Detect whether permissions are enforced by trying to create a file.
        let probe = path + "/probe"
        let enforced = !FileManager.default.createFile(atPath: probe, contents: Data())
        if enforced {
            // A real read-only directory: LevelDB cannot create its lock and log files.
            #expect(throws: BuriError.self) { try BuriDatabase(path: path) }
            if case .storage(let error)? = openError(path) {
                #expect(error.code == .ioError, "\(error)")
            } else {
                Issue.record("expected .storage, got \(String(describing: openError(path)))")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: path).sorted() == filesBefore)
        } else {
            // As root the directory is writable after all: Buri opens it and writes, which is the
            // behaviour that applies here. The read-only case is then exercised by the BuriStress
            // child run as an unprivileged user (below), for whom the bits are enforced.
            try FileManager.default.removeItem(atPath: probe)
            let writable = try BuriDatabase(path: path)
            #expect(try writable.bucket(Person.self).object(forKey: "p1")?.age == 1)
            writable.close()
            let setpriv = "/usr/bin/setpriv"
            try #require(
                FileManager.default.isExecutableFile(atPath: setpriv),
                "setpriv (util-linux) is needed to run the read-only check as an unprivileged user")
            // The unprivileged user must be able to reach the directory (but not write it).
            chmod(directory.path, 0o755)
            chmod(path, 0o555)
            for file in try FileManager.default.contentsOfDirectory(atPath: path) { chmod(path + "/" + file, 0o644) }
            let output = directory.path("open.out")
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = [
                "--reuid=65534", "--regid=65534", "--clear-groups", try stressBinary().path, "open", path,
            ]
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(process.terminationStatus == 1, "the unprivileged open should fail: \(printed)")
            // LevelDB cannot create its LOCK file: an I/O error naming it, not "in use by another process".
            #expect(
                printed.hasPrefix("error storage ioError") && printed.contains("/LOCK: Permission denied"), "\(printed)"
            )
        }
        chmod(path, 0o755)
        #expect(try rawContents(path) == before)
    }
}
