import Buri
import Foundation
import Testing

@Suite("buri on damaged databases: exit 3 naming the bucket, no short output, repair says what was lost")
struct DamageToolTests {
    static let people: [Person] = (0..<1000).map { i in
        Person(
            objectId: String(format: "p%04d", i), name: "name \(i) lorem ipsum dolor",
            locale: ["DE", "EN", "FR"][i % 3], age: i % 90)
    }

    /// Issue 11's example: 1000 objects compacted into one table, then eight 0xFF bytes written at
    /// byte 5000 of it (inside a block of records). Returns the keys whose records were damaged,
    /// found through the library.
    static func damagedTable(_ sandbox: Sandbox) throws -> (path: String, damaged: [String]) {
        let path = sandbox.path("r.buri")
        let db = try BuriDatabase(path: path)
        try db.bucket(Person.self).store(people)
        try db.compact()
        db.close()
        let table = try #require(
            try FileManager.default.contentsOfDirectory(atPath: path).first { $0.hasSuffix(".ldb") })
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path + "/" + table)))
        for i in 5000..<5008 { bytes[i] = 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + table))
        let reopened = try BuriDatabase(path: path)
        defer { reopened.close() }
        let bucket = try reopened.bucket(Person.self)
        var damaged: [String] = []
        for person in people {
            do { _ = try bucket.object(forKey: person.objectId) } catch { damaged.append(person.objectId) }
        }
        try #require(!damaged.isEmpty && damaged.count < 500, "the damage must hit some records: \(damaged.count)")
        return (path, damaged)
    }

    /// The database's files other than LevelDB's info log and lock, by name.
    static func dataFiles(_ path: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: path)
        where !["LOG", "LOG.old", "LOCK"].contains(name) {
            files[name] = FileManager.default.contents(atPath: path + "/" + name)
        }
        return files
    }

    @Test func everyReadingCommandFailsWithThreeNamingTheBucketAndLeavesNoShortExport() throws {
        let sandbox = try Sandbox()
        let (db, damaged) = try Self.damagedTable(sandbox)
        // Every successful LevelDB open starts a new log and manifest, so compare the tables.
        func tables() throws -> [String: Data] { try Self.dataFiles(db).filter { $0.key.hasSuffix(".ldb") } }
        let before = try tables()
        let output = sandbox.path("out.jsonl")
        try Data("an earlier export\n".utf8).write(to: URL(fileURLWithPath: output))
        let mentions = ["damaged", "bucket 'Person'", "buri repair \(db)"]

        expectFailure(try buri("export", db, "-o", output), status: 3, mentioning: mentions)
        expectFailure(try buri("export", db, "Person", "-o", output), status: 3, mentioning: mentions)
        // The earlier file is untouched and no partial file is left beside it.
        #expect(try sandbox.read("out.jsonl") == "an earlier export\n")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: sandbox.url.path).sorted() == ["out.jsonl", "r.buri"])
        #expect(try buri("export", db).status == 3)

        expectFailure(try buri("keys", db, "Person"), status: 3, mentioning: mentions)
        expectFailure(try buri("keys", db, "Person", "--reverse"), status: 3, mentioning: mentions)
        expectFailure(try buri("keys", db, "Person", "--prefix", "p"), status: 3, mentioning: mentions)
        expectFailure(try buri("check", db), status: 3, mentioning: mentions)
        expectFailure(try buri("check", db, "--repair"), status: 3, mentioning: mentions)
        expectFailure(
            try buri("query", db, "Person", "age", "--from", "0", "--to", "200", "--objects"), status: 3,
            mentioning: mentions)
        expectFailure(try buri("get", db, "Person", damaged[0]), status: 3, mentioning: mentions)
        // What does not touch the damaged block still works: an intact object, and index-only keys.
        let intact = try #require(Self.people.first { !damaged.contains($0.objectId) })
        expectSuccess(try buri("get", db, "Person", intact.objectId))
        // `info` reads each bucket's stored object count (format 4), not its records: exact.
        let info = try buri("info", db)
        expectSuccess(info)
        #expect(
            info.lines.contains { $0.contains("bucket 'Person'") && $0.hasSuffix(": \(Self.people.count) objects") },
            "\(info.lines)")
        expectSuccess(try buri("info", db, "--json"))
        let keys = try buri("query", db, "Person", "age", "--from", "0", "--to", "200")
        expectSuccess(keys)
        #expect(keys.lines.count == 1000)
        #expect(try tables() == before, "reading commands changed the tables")
    }

    @Test func repairNamesTheLostObjectsExitsOneAndLeavesACleanDatabase() throws {
        let sandbox = try Sandbox()
        let (db, damaged) = try Self.damagedTable(sandbox)
        let run = try buri("repair", db)
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
        let lost = run.lines.filter { $0.hasPrefix("lost: bucket 'Person', key '") }
        #expect(lost.count == damaged.count, "\(run)")
        for key in damaged {
            #expect(run.lines.contains { $0.hasPrefix("lost: bucket 'Person', key '\(key)'") }, "\(key): \(run)")
        }
        #expect(run.lines.contains { $0.hasPrefix("leveldb: Table #") && $0.contains("Corruption") }, "\(run)")
        // The unreadable block is named with the stretch of objects it held.
        #expect(
            run.lines.contains {
                $0.hasPrefix("lost: bucket 'Person', objects from key '") && $0.contains("block checksum mismatch")
            }, "\(run)")
        #expect(
            run.lines.last?.hasPrefix(
                "repaired \(db) with losses: \(damaged.count) objects known lost; 1 range of objects in unreadable data"
            ) == true, "\(run)")
        #expect(FileManager.default.fileExists(atPath: db + "/lost"))

        expectSuccess(try buri("check", db))
        let output = sandbox.path("after.jsonl")
        expectSuccess(try buri("export", db, "-o", output))
        let exported = try sandbox.read("after.jsonl").split(separator: "\n").filter {
            !$0.hasPrefix("[\"buri-export\"") && !$0.contains("\"schema\":{")
        }
        #expect(exported.count == 1000 - damaged.count)
        #expect(!exported.contains { line in damaged.contains { line.contains("\"\($0)\"") } })

        // Repairing a healthy database loses nothing and says so.
        let again = try buri("repair", db)
        expectSuccess(again)
        #expect(
            again.lines.last?.hasPrefix("repaired \(db): ") == true
                && again.lines.last?.hasSuffix("nothing was lost") == true, "\(again)")
    }

    @Test func aDamagedLogRecordIsRefusedByInfoAndCheckUntilRepairNamesItsObjects() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let log = try #require(try FileManager.default.contentsOfDirectory(atPath: db).first { $0.hasSuffix(".log") })
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: db + "/" + log)))
        let marie = Array("Marie".utf8)
        let at = try #require(
            (0...(bytes.count - marie.count)).first { Array(bytes[$0..<($0 + marie.count)]) == marie })
        bytes[at + 1] ^= 0x01  // one bit of an acknowledged write of bucket Person
        try Data(bytes).write(to: URL(fileURLWithPath: db + "/" + log))
        let before = try Self.dataFiles(db)

        for command in ["info", "check", "buckets", "export"] {
            expectFailure(try buri(command, db), status: 3, mentioning: ["damaged", log, "buri repair \(db)"])
            #expect(try Self.dataFiles(db) == before, "\(command) changed the database")
        }

        let run = try buri("repair", db)
        #expect(run.status == 1, "\(run)")
        #expect(run.lines.contains { $0.hasPrefix("damaged log record: \(log) at byte") }, "\(run)")
        // The people were written in one batch: all forty are named for checking.
        #expect(
            run.lines.filter { $0.hasPrefix("suspect: bucket 'Person', key 'p") }.count == fixturePeople.count, "\(run)"
        )
        #expect(!run.lines.contains { $0.contains("bucket 'notes'") }, "\(run)")
        expectSuccess(try buri("check", db))
        let info = try buri("info", db)
        expectSuccess(info)
        #expect(info.lines.contains("bucket 'Person' (key field 'objectId'): 40 objects"), "\(info)")
    }

    /// Item 2 of issue 21: 300 objects imported and compacted into one table, then eight 0xFF
    /// bytes in its first block, which holds Buri's header, the catalog entry and the first records.
    static func damagedCatalogBlock(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("c.buri")
        let lines = (0..<300).map { i in
            #"{"id":"k\#(String(1000 + i).dropFirst())","n":\#(i),"tag":"t\#(i % 7)","pad":"\#(String(repeating: "x", count: 50))"}"#
        }
        expectSuccess(
            try buri(
                "import", path, "P", "--key", "id", "--numeric-index", "n", "--binary-index", "tag",
                stdin: lines.joined(separator: "\n") + "\n"))
        expectSuccess(try buri("compact", path))
        let table = try #require(
            try FileManager.default.contentsOfDirectory(atPath: path).first { $0.hasSuffix(".ldb") })
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path + "/" + table)))
        for i in 1000..<1008 { bytes[i] = 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + table))
        return path
    }

    @Test func repairKeepsABucketWhoseCatalogEntryWasInTheDamagedBlock() throws {
        let sandbox = try Sandbox()
        let db = try Self.damagedCatalogBlock(sandbox)
        expectFailure(try buri("info", db), status: 3, mentioning: ["damaged", "buri repair \(db)"])

        let run = try buri("repair", db)
        #expect(run.status == 1, "\(run)")
        #expect(
            run.lines.contains {
                $0.hasPrefix("recovered: bucket id 1 lost its catalog entry") && $0.contains("as bucket 'P'")
            }, "\(run)")
        let lost = run.lines.filter { $0.hasPrefix("lost: bucket 'P', key 'k") }
        #expect(!lost.isEmpty && lost.count < 100, "\(run)")
        #expect(run.lines.contains { $0.hasPrefix("lost: bucket 'P', objects from the first to key '") }, "\(run)")
        // Every reported problem names its bucket; no key is reported without one.
        #expect(!run.lines.contains { $0.contains("unknown bucket id") || $0.hasPrefix("unrepaired") }, "\(run)")

        expectSuccess(try buri("check", db))
        let buckets = try buri("buckets", db)
        expectSuccess(buckets)
        #expect(buckets.lines == ["P"])
        // Every object not named lost is there, with its index entries: export and queries agree.
        let export = try buri("export", db, "P")
        expectSuccess(export)
        let records = export.lines.filter { $0.contains("\"object\":") }
        #expect(records.count == 300 - lost.count, "\(records.count) exported, \(lost.count) lost")
        let query = try buri("query", db, "P", "n", "--from", "0", "--to", "1000")
        expectSuccess(query)
        #expect(query.lines.count == 300 - lost.count)
        let tagged = try buri("query", db, "P", "tag", "--equals", "t3")
        expectSuccess(tagged)
        #expect(tagged.lines.count == records.filter { $0.contains("\"tag\":\"t3\"") }.count)
    }

    @Test func repairOfALeftoverCompactionOutputSaysNothingWasLostAndExitsZero() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        expectSuccess(try buri("compact", db))
        let before = try buri("export", db)
        expectSuccess(before)
        let table = try #require(try FileManager.default.contentsOfDirectory(atPath: db).first { $0.hasSuffix(".ldb") })
        let data = try #require(FileManager.default.contents(atPath: db + "/" + table))
        try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: db + "/009999.ldb"))

        let run = try buri("repair", db)
        expectSuccess(run)
        #expect(run.lines.contains { $0.hasPrefix("note: 009999.ldb is not part of the database") }, "\(run)")
        #expect(!run.lines.contains { $0.hasPrefix("lost") }, "\(run)")
        #expect(run.lines.last?.hasSuffix("nothing was lost") == true, "\(run)")
        let after = try buri("export", db)
        expectSuccess(after)
        #expect(after.stdout == before.stdout)
    }

    @Test func aMissingLogIsDamageForEveryCommandAndRepairReportsTheLoss() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        expectSuccess(try buri("put", db, "Person", #"{"objectId":"late","name":"Late","locale":"EN","age":1}"#))
        let log = try #require(try FileManager.default.contentsOfDirectory(atPath: db).first { $0.hasSuffix(".log") })
        try FileManager.default.removeItem(atPath: db + "/" + log)
        let before = try Self.dataFiles(db)
        for command in [["info"], ["check"], ["buckets"], ["export"], ["get", "Person", "late"], ["keys", "Person"]] {
            expectFailure(
                try buri([command[0], db] + command.dropFirst()), status: 3,
                mentioning: ["damaged", log, "missing", "buri repair \(db)"])
            #expect(try Self.dataFiles(db) == before, "\(command) changed the database")
        }
        let run = try buri("repair", db)
        #expect(run.status == 1, "\(run)")
        #expect(
            run.lines.contains { $0.hasPrefix("lost: the write-ahead log \(log)") && $0.contains("missing") }, "\(run)")
        #expect(run.lines.last?.contains("1 loss whose keys cannot be known") == true, "\(run)")
        expectSuccess(try buri("check", db))
    }

    @Test func repairOfADatabaseAnotherProcessHoldsChangesNothing() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let held = try BuriDatabase(path: db)
        defer { held.close() }
        let before = try Self.dataFiles(db)
        expectFailure(try buri("repair", db), status: 5, mentioning: ["in use"])
        #expect(try Self.dataFiles(db) == before)
        #expect(!FileManager.default.fileExists(atPath: db + "/lost"))
        #expect(try held.bucket(Person.self).count() == fixturePeople.count)
    }

    @Test func repairRefusesPathsThatHoldNoDatabase() throws {
        let sandbox = try Sandbox()
        expectFailure(try buri("repair", sandbox.path("missing")), status: 4, mentioning: ["does not exist"])
        expectFailure(try buri("repair", try sandbox.write("file", "x")), status: 4, mentioning: ["is a file"])
        try FileManager.default.createDirectory(atPath: sandbox.path("empty"), withIntermediateDirectories: false)
        expectFailure(try buri("repair", sandbox.path("empty")), status: 4, mentioning: ["empty directory"])
        try FileManager.default.createDirectory(atPath: sandbox.path("notes"), withIntermediateDirectories: false)
        _ = try sandbox.write("notes/readme.txt", "hello")
        expectFailure(try buri("repair", sandbox.path("notes")), status: 4, mentioning: ["notes"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.path("notes")) == ["readme.txt"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.path("empty")).isEmpty)
        #expect(!sandbox.exists("missing"))
    }
}
