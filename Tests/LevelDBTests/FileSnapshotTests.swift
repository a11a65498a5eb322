import Foundation
import Testing
@testable import LevelDB
#if canImport(Glibc)
    import Glibc
#endif

/// Every file of a directory, recursively: name, size, modification time (ns) and bytes.
func directoryFingerprint(_ path: String) throws -> [String: String] {
    var result: [String: String] = [:]
    var info = stat()
    guard stat(path, &info) == 0 else { return ["<missing>": ""] }
    result["."] = "dir \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    let manager = FileManager.default
    for name in try manager.subpathsOfDirectory(atPath: path) {
        let full = path + "/" + name
        guard lstat(full, &info) == 0 else { continue }
        let bytes = (info.st_mode & S_IFMT) == S_IFREG ? (manager.contents(atPath: full) ?? Data()) : Data()
        var hasher = Hasher()
        hasher.combine(bytes)
        result[name] =
            "\(info.st_mode) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) \(bytes.count) \(Array(bytes.prefix(64))) \(hasher.finalize())"
        result[name + "#bytes"] = bytes.base64EncodedString()
    }
    return result
}

@Suite("File snapshots: a private copy of a database's files that LevelDB may open, leaving the original unchanged")
struct FileSnapshotTests {
    /// A database with several table files at several levels, a manifest with many edits, and
    /// writes still in its log.
    func makeDatabase(_ path: String, rounds: Int = 12) throws -> [[UInt8]: [UInt8]] {
        var expected: [[UInt8]: [UInt8]] = [:]
        var options = Options()
        options.writeBufferSize = 64 << 10
        // A table of keys no later write overlaps, compacted on its own first: however far
        // LevelDB's background compactions get before each close (that is timing), it stays a
        // table file of its own, so there are always several.
        do {
            let db = try Database(path: path, options: options)
            for i in 0..<200 {
                let key = bytes(String(format: "z%05d", i))
                let value = bytes("apart \(i)")
                try db.put(key, value)
                expected[key] = value
            }
            try db.compact(KeyRange(start: bytes("z"), end: bytes("{")))
            db.close()
        }
        for round in 0..<rounds {
            let db = try Database(path: path, options: options)
            for i in 0..<400 {
                let key = bytes(String(format: "k%05d", (i * 7 + round * 131) % 3000))
                let value = bytes("round \(round) value \(i) " + String(repeating: "v", count: i % 200))
                try db.put(key, value)
                expected[key] = value
            }
            if round % 3 == 2 {
                for i in stride(from: 0, to: 3000, by: 11) {
                    let key = bytes(String(format: "k%05d", i))
                    try db.delete(key)
                    expected[key] = nil
                }
            }
            db.close()
        }
        return expected
    }

    func contents(_ db: Database) throws -> [[UInt8]: [UInt8]] {
        var result: [[UInt8]: [UInt8]] = [:]
        for entry in try db.entries() { result[entry.key] = entry.value }
        return result
    }

    @Test func aSnapshotReadsExactlyWhatTheDatabaseHoldsAndTheOriginalIsNotTouched() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        let expected = try makeDatabase(path)
        let before = try directoryFingerprint(path)
        let tables = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(".ldb") }
        #expect(tables.count > 1, "\(tables)")
        let files = try FileSnapshot.take(of: path, in: dir.path)
        #expect(files.path.hasPrefix(dir.path + "/buri-snapshot-\(getpid())-"))
        #expect(files.linkedTables > 0 && files.copiedTables == 0, "tables on the same file system are hard-linked")
        var options = Options()
        options.createIfMissing = false
        options.paranoidChecks = true
        let db = try Database(path: files.path, options: options)
        #expect(try contents(db) == expected)
        // Writing and compacting in the snapshot stays in the snapshot.
        try db.put(bytes("only-in-the-snapshot"), bytes("x"))
        try db.compact()
        #expect(try contents(db).count == expected.count + 1)
        db.close()
        files.remove()
        #expect(!FileManager.default.fileExists(atPath: files.path))
        #expect(try directoryFingerprint(path) == before)
        let original = try Database(path: path, options: options)
        defer { original.close() }
        #expect(try contents(original) == expected)
    }

    @Test func theManifestReaderFindsTheLiveTablesLevelDBUses() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        _ = try makeDatabase(path, rounds: 8)
        // A full compaction leaves nothing for the background to do: the tables LevelDB lists are
        // then exactly those of its manifest when it closes.
        let db = try Database(path: path)
        try db.compact()
        // LevelDB lists its live tables per level in "leveldb.sstables": " 12:4567[…]".
        let listed = try db.sstables().split(separator: "\n").compactMap { line -> UInt64? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard let colon = trimmed.firstIndex(of: ":"), !trimmed.hasPrefix("---") else { return nil }
            return UInt64(trimmed[..<colon])
        }
        db.close()
        let current = try String(contentsOfFile: path + "/CURRENT", encoding: .utf8).trimmingCharacters(in: .newlines)
        let manifest = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/" + current)))
        let state = try #require(ManifestReader.parse(manifest))
        #expect(!listed.isEmpty)
        #expect(Set(listed) == state.tables, "\(listed) vs \(state.tables)")
        #expect(state.tables.allSatisfy { $0 < state.nextFile })
        // A record cut off at the end (a writer that died mid-write) is ignored, as LevelDB
        // ignores it; a flipped byte is refused, as LevelDB refuses it.
        let cutOff = manifest + [0x12, 0x34, 0x56, 0x78, 0x64, 0x00, 0x01] + [UInt8](repeating: 7, count: 20)
        let again = try #require(ManifestReader.parse(cutOff))
        #expect(again.tables == state.tables && again.nextFile == state.nextFile)
        var flipped = manifest
        flipped[20] ^= 0x40
        #expect(ManifestReader.parse(flipped) == nil)
    }

    @Test func aSnapshotOfADatabaseAnotherHandleIsWritingIsAlwaysAConsistentPrefix() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        var options = Options()
        options.writeBufferSize = 32 << 10  // many flushes and compactions while the snapshots are taken
        let writer = try Database(path: path, options: options)
        let total = 6000
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            for i in 0..<total {
                try? writer.put(bytes(String(format: "w%06d", i)), bytes(String(repeating: "p", count: 100 + i % 50)))
            }
            done.signal()
        }
        var snapshots = 0
        var finished = false
        while !finished {
            finished = done.wait(timeout: .now()) == .success
            let files = try FileSnapshot.take(of: path, in: dir.path)
            var readOptions = Options()
            readOptions.createIfMissing = false
            readOptions.paranoidChecks = true
            let db = try Database(path: files.path, options: readOptions)
            let keys = try db.entries().map { String(decoding: $0.key, as: UTF8.self) }
            db.close()
            files.remove()
            // The writer stores w000000, w000001, … one at a time: any state it passed through
            // holds exactly the first n of them.
            #expect(
                keys == (0..<keys.count).map { String(format: "w%06d", $0) }, "snapshot \(snapshots) is not a prefix")
            if finished { #expect(keys.count == total) }
            snapshots += 1
        }
        writer.close()
        #expect(snapshots >= 1)
    }

    @Test func failuresNameTheTemporaryDirectoryAndLeaveNothingBehind() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("db")
        _ = try makeDatabase(path, rounds: 2)
        do {
            _ = try FileSnapshot.take(of: path, in: dir.path("missing"))
            Issue.record("a snapshot in a missing directory")
        } catch {
            #expect(error.kind == .temporaryDirectory)
            #expect(error.description.contains(dir.path("missing")))
        }
        // A directory left by a process that no longer exists is removed by the next snapshot.
        let stale = dir.path("buri-snapshot-999999999-abcdef")
        try FileManager.default.createDirectory(atPath: stale, withIntermediateDirectories: false)
        let files = try FileSnapshot.take(of: path, in: dir.path)
        #expect(!FileManager.default.fileExists(atPath: stale))
        files.remove()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["db"])
    }
}
