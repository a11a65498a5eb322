import Foundation
import LevelDB
import Testing

@Suite("Database basics")
struct DatabaseTests {
    @Test func emptyKeyAndEmptyValueRoundTrip() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        try db.put([UInt8](), [UInt8]())
        #expect(try db.get([UInt8]()) == [])
        try db.put(bytes("k"), [UInt8]())
        #expect(try db.get(bytes("k")) == [])
        #expect(try db.get(bytes("missing")) == nil)
        #expect(try db.contains(bytes("k")))
        #expect(try !db.contains(bytes("missing")))
    }

    @Test func binaryKeysWithNulAndFFAreDistinct() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        let keys: [[UInt8]] = [[0], [0, 0], [0xFF], [0xFF, 0xFF], [0, 0xFF], [0xFF, 0], [1, 0, 2], [1, 0, 3]]
        for (i, key) in keys.enumerated() { try db.put(key, [UInt8(i)]) }
        for (i, key) in keys.enumerated() { #expect(try db.get(key) == [UInt8(i)]) }
        let scanned = try db.entries().map(\.key)
        #expect(scanned == keys.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test func oneMebibyteValueRoundTripsThroughBothReadPaths() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        var generator = SystemRandomNumberGenerator()
        let big = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try db.put(bytes("big"), big, options: .sync)
        #expect(try db.get(bytes("big")) == big)
        let viaBorrow = try db.withValue(forKey: bytes("big")) { buffer in buffer.map { Array($0) } }
        #expect(viaBorrow == big)
        #expect(try db.withValue(forKey: bytes("nope")) { $0 == nil })
    }

    @Test func deleteRemovesAndDeletingAMissingKeyIsFine() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        try db.put(bytes("a"), bytes("1"))
        try db.delete(bytes("a"), options: .sync)
        try db.delete(bytes("never-there"))
        #expect(try db.get(bytes("a")) == nil)
    }

    @Test func acceptsArraySlicesAndData() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        let source = bytes("xxkeyxx")
        try db.put(source[2..<5], Data("value".utf8))
        #expect(try db.get(bytes("key")) == bytes("value"))
    }

    @Test func valuesSurviveCloseAndReopen() throws {
        let dir = TemporaryDirectory()
        do {
            let db = try Database(path: dir.path("db"))
            for i in 0..<1000 { try db.put(bytes("k\(i)"), bytes("v\(i)")) }
            db.close()
            #expect(db.isClosed)
        }
        let db = try Database(path: dir.path("db"))
        #expect(try db.get(bytes("k999")) == bytes("v999"))
        #expect(try db.entries().reduce(0) { n, _ in n + 1 } == 1000)
    }

    @Test func callsAfterCloseThrowClosed() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        db.close()
        db.close()  // idempotent
        #expect(throws: LevelDBError.self) { try db.get(bytes("a")) }
        do {
            try db.put(bytes("a"), bytes("b"))
            Issue.record("put after close succeeded")
        } catch {
            #expect(error.code == .databaseClosed)
        }
    }

    @Test func cursorOutlivingCloseStaysValidAndReleasesTheLockAfterwards() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        var db: Database? = try Database(path: path)
        for i in 0..<10 { try db?.put(bytes("k\(i)"), bytes("v")) }
        var cursor: Cursor? = try db?.cursor()
        db?.close()
        db = nil
        var seen = 0
        while try cursor?.next() == true { seen += 1 }
        #expect(seen == 10)
        cursor = nil
        // Everything that held the C handle is gone, so the directory lock is free again.
        let reopened = try Database(path: path)
        #expect(try reopened.get(bytes("k3")) == bytes("v"))
    }
}

@Suite("Opening, locking, destroying and repairing")
struct LifecycleTests {
    @Test func secondHandleInTheSameProcessIsRefusedAsInUse() throws {
        let dir = TemporaryDirectory()
        let first = try Database(path: dir.path("db"))
        do {
            _ = try Database(path: dir.path("db"))
            Issue.record("a second handle opened the same database")
        } catch {
            #expect(error.code == .databaseInUse)
            #expect(error.description.contains("in use"))
            #expect(error.path == dir.path("db"))
        }
        first.close()
        _ = try Database(path: dir.path("db"))
    }

    @Test func databaseLockedByAnotherProcessIsRefusedAsInUse() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        try Database(path: path).close()
        // Another process takes the same POSIX record lock LevelDB takes on LOCK, and holds it.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = [
            "python3", "-c",
            """
            import fcntl, sys
            f = open(sys.argv[1] + "/LOCK", "r+")
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            print("locked", flush=True)
            sys.stdin.read()  # hold the lock until the test closes our stdin
            """, path,
        ]
        let output = Pipe()
        let input = Pipe()
        holder.standardOutput = output
        holder.standardInput = input
        try holder.run()
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        let line = output.fileHandleForReading.availableData
        #expect(String(decoding: line, as: UTF8.self).hasPrefix("locked"))
        do {
            _ = try Database(path: path)
            Issue.record("opened a database another process holds")
        } catch {
            #expect(error.code == .databaseInUse)
        }
    }

    @Test func errorIfExistsRefusesAnExistingDatabase() throws {
        let dir = TemporaryDirectory()
        try Database(path: dir.path("db")).close()
        var options = Options()
        options.errorIfExists = true
        do {
            _ = try Database(path: dir.path("db"), options: options)
            Issue.record("errorIfExists opened an existing database")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("exists"))
        }
        _ = try Database(path: dir.path("fresh"), options: options)
    }

    @Test func missingDatabaseWithoutCreateIfMissingFails() throws {
        let dir = TemporaryDirectory()
        var options = Options()
        options.createIfMissing = false
        #expect(throws: LevelDBError.self) { try Database(path: dir.path("nothing"), options: options) }
        #expect(!FileManager.default.fileExists(atPath: dir.path("nothing/CURRENT")))
    }

    @Test func destroyRemovesTheDatabase() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        let db = try Database(path: path)
        try db.put(bytes("a"), bytes("b"))
        db.close()
        try Database.destroy(path: path)
        #expect(!FileManager.default.fileExists(atPath: path + "/CURRENT"))
        let again = try Database(path: path)
        #expect(try again.get(bytes("a")) == nil)
    }

    @Test func repairRecoversADatabaseWhoseManifestIsLost() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        do {
            let db = try Database(path: path)
            for i in 0..<500 { try db.put(bytes("key\(i)"), bytes("value\(i)")) }
            try db.compact()
            db.close()
        }
        // Destroy the metadata that says which files make up the database.
        try FileManager.default.removeItem(atPath: path + "/CURRENT")
        var options = Options()
        options.createIfMissing = false
        #expect(throws: LevelDBError.self) { try Database(path: path, options: options) }
        try Database.repair(path: path)
        let db = try Database(path: path, options: options)
        #expect(try db.get(bytes("key250")) == bytes("value250"))
        #expect(try db.entries().reduce(0) { n, _ in n + 1 } == 500)
    }

    @Test func allOptionsAreAccepted() throws {
        let dir = TemporaryDirectory()
        var options = Options()
        options.compression = false
        options.blockCacheSize = 1 << 20
        options.bloomFilterBitsPerKey = 10
        options.writeBufferSize = 1 << 20
        options.maxOpenFiles = 64
        options.paranoidChecks = true
        options.blockSize = 8 << 10
        options.maxFileSize = 4 << 20
        let db = try Database(path: dir.path("db"), options: options)
        for i in 0..<2000 { try db.put(bytes("k\(i)"), [UInt8](repeating: UInt8(i % 256), count: 100)) }
        #expect(try db.get(bytes("k1999")) == [UInt8](repeating: UInt8(1999 % 256), count: 100))
    }

    /// Tables written with any restart interval (1 = every key whole, a large one = long runs of
    /// shared prefixes) read back every key, also after a reopen with another interval: the
    /// interval is a writer's choice each table records, not a setting a reader must match.
    @Test(arguments: [1, 4, 16, 1000]) func everyRestartIntervalReadsBack(interval: Int) throws {
        let dir = TemporaryDirectory()
        var options = Options()
        options.blockRestartInterval = interval
        let keys = (0..<3000).map { bytes(String(format: "prefix-shared-%05d", $0)) }
        do {
            let db = try Database(path: dir.path("db"), options: options)
            for (i, key) in keys.enumerated() { try db.put(key, bytes("v\(i)")) }
            try db.compact()
            for (i, key) in keys.enumerated() { #expect(try db.get(key) == bytes("v\(i)")) }
            #expect(try db.get(bytes("prefix-shared-03000")) == nil)
        }
        options.blockRestartInterval = interval == 4 ? 16 : 4
        let db = try Database(path: dir.path("db"), options: options)
        #expect(try db.entries().map(\.key) == keys)
        #expect(try db.get(keys[1234]) == bytes("v1234"))
    }

    @Test func propertiesSizesCompactionAndVersion() throws {
        let dir = TemporaryDirectory()
        let db = try Database(path: dir.path("db"))
        for i in 0..<5000 { try db.put(bytes(String(format: "k%05d", i)), [UInt8](repeating: 7, count: 200)) }
        try db.compact()
        #expect(try db.stats().contains("Compactions"))
        #expect(try db.sstables().contains("level"))
        #expect(try db.property("leveldb.no-such-property") == nil)
        let files = try (0...6).map { try db.fileCount(atLevel: $0) }.reduce(0, +)
        #expect(files > 0)
        let all = try db.approximateSize(of: .all)
        let none = try db.approximateSize(of: KeyRange(start: bytes("x"), end: bytes("y")))
        #expect(all > 0)
        #expect(none == 0)
        let sizes = try db.approximateSizes(of: [.prefix(bytes("k0")), .prefix(bytes("k"))])
        #expect(sizes[0] <= sizes[1])
        try db.compact(KeyRange(start: bytes("k1"), end: bytes("k2")))
        #expect(Database.libraryVersion.major >= 1)
        #expect(Database.libraryVersion.description.contains("."))
    }
}
