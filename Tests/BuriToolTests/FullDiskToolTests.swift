import Buri
import Foundation
import Testing
#if canImport(Glibc)
    import Glibc
#endif

/// A small tmpfs mounted on a fresh directory for one test, when the tests run as root (as CI
/// does); `nil` with the reason printed otherwise. ``unmount()`` runs in every test's `defer`.
final class SmallDisk {
    let path: String
    let sandbox: Sandbox

    private init(sandbox: Sandbox, path: String) {
        self.sandbox = sandbox
        self.path = path
    }

    static func mount(megabytes: Int = 20, test: String) throws -> SmallDisk? {
        guard getuid() == 0 else {
            print(
                "skipped \(test): it mounts a \(megabytes) MiB tmpfs (mount -t tmpfs), which needs root; this run is uid \(getuid())"
            )
            return nil
        }
        let sandbox = try Sandbox()
        let path = sandbox.path("disk")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let status = try run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
        guard status == 0 else {
            Issue.record(
                "running as root, but `mount -t tmpfs -o size=\(megabytes)m tmpfs \(path)` failed with status \(status)"
            )
            return nil
        }
        return SmallDisk(sandbox: sandbox, path: path)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    func path(_ name: String) -> String { path + "/" + name }

    /// Fills the disk with a file until a write fails, then gives `leaving` bytes back.
    func fill(leaving: Int = 0) throws {
        let fd = open(path("filler"), O_WRONLY | O_CREAT | O_APPEND, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5A, count: 64 << 10)
        var size = 0
        while true {
            let written = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            size += written
        }
        if leaving > 0 { _ = ftruncate(fd, off_t(max(0, size - leaving))) }
    }

    func freeSpace() { try? FileManager.default.removeItem(atPath: path("filler")) }

    func unmount() {
        if (try? Self.run("/bin/umount", [path])) != 0 { _ = try? Self.run("/bin/umount", ["-l", path]) }
    }
}

@Suite("A full disk: writes fail naming it and leave the database as it was; reads and export to another disk work")
struct FullDiskToolTests {
    /// 8,000 people of about 300 bytes each (2.4 MB): more than a nearly full disk holds.
    static func bigInput(_ sandbox: Sandbox) throws -> String {
        try sandbox.write(
            "big.jsonl",
            peopleJSONLines(
                (0..<8_000).map { i in
                    Person(
                        objectId: String(format: "big%05d", i), name: String(repeating: "x", count: 250) + "\(i)",
                        locale: "NL", age: i % 90)
                }))
    }

    /// The fixture database on the small disk, with what reading it gives before anything fails.
    static func fixtureOnDisk(_ disk: SmallDisk) throws -> (db: String, keys: [String], export: String) {
        let db = disk.path("db.buri")
        let made = try BuriDatabase(path: db)
        try made.bucket(Person.self).store(fixturePeople)
        try made.bucket(Note.self).store(fixtureNotes)
        made.close()
        let export = try buri("export", db)
        try #require(export.status == 0)
        return (db, try buri("keys", db, "Person").lines, export.stdout)
    }

    /// A directory for buri's private snapshots on another file system than the small disk.
    static func otherDisk(_ disk: SmallDisk) throws -> String {
        let temporary = disk.sandbox.path("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        return temporary
    }

    /// The database reads as before (from a snapshot on the other disk, while the disk is full),
    /// and check finds no problem.
    static func expectIntact(
        _ db: String, keys: [String], export: String, temporary: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let read = try buri(temporaryDirectory: temporary, ["keys", db, "Person"])
        #expect(read.status == 0 && read.lines == keys, "\(read)", sourceLocation: sourceLocation)
        let exported = try buri(temporaryDirectory: temporary, ["export", db])
        #expect(exported.status == 0 && exported.stdout == export, "\(exported.stderr)", sourceLocation: sourceLocation)
        let check = try buri(temporaryDirectory: temporary, ["check", db])
        #expect(
            check.status == 0 && check.lines.last?.hasPrefix("ok: ") == true, "\(check)", sourceLocation: sourceLocation
        )
    }

    @Test func importIntoABucketOnAFullDiskFailsNamingItAndItsStageIsGoneOnceThereIsRoom() throws {
        guard let disk = try SmallDisk.mount(test: #function) else { return }
        defer { disk.unmount() }
        let (db, keys, export) = try Self.fixtureOnDisk(disk)
        let temporary = try Self.otherDisk(disk)
        let input = try Self.bigInput(disk.sandbox)
        let sizeBefore = try directorySize(db)
        try disk.fill(leaving: 3 << 19)
        let failed = try buri(temporaryDirectory: temporary, ["import", db, "Person", input])
        expectFailure(
            failed, status: 3,
            mentioning: ["the disk holding '\(db)' is full", "data stored before it is intact", "free space"])
        // Reading works on the full disk, and the data is as it was.
        try disk.fill()
        let full = try fingerprint(db)
        try Self.expectIntact(db, keys: keys, export: export, temporary: temporary)
        #expect(fingerprintChanges(full, try fingerprint(db)).isEmpty, "reading wrote to the full disk")
        let stageLeft = failed.stderr.contains("could not be removed while the disk is full")
        if stageLeft {
            #expect(failed.stderr.contains("the next command that writes to '\(db)'"), "\(failed)")
        }
        // Once there is room, the next command that writes purges the stage and gives its space back.
        disk.freeSpace()
        let put = try buri(
            temporaryDirectory: temporary, ["put", db, "Person", "-"],
            stdin: #"{"objectId":"after","name":"A","locale":"EN","age":1}"# + "\n")
        #expect(put.status == 0, "\(put)")
        let check = try buri(temporaryDirectory: temporary, ["check", db])
        #expect(
            check.status == 0 && check.lines.count == 1 && check.lines[0].hasPrefix("ok: 2 buckets, 45 objects"),
            "the stage must be gone: \(check)")
        let sizeAfter = try directorySize(db)
        #expect(
            sizeAfter < sizeBefore + (1 << 20),
            "the stage's space must be given back: \(sizeBefore) before, \(sizeAfter) after")
    }

    @Test func importOrRestoreIntoANewPathOnAFullDiskLeavesNothingAndTheAdvisedRetryWorks() throws {
        guard let disk = try SmallDisk.mount(test: #function) else { return }
        defer { disk.unmount() }
        let (db, _, export) = try Self.fixtureOnDisk(disk)
        let temporary = try Self.otherDisk(disk)
        let small = try disk.sandbox.write("people.jsonl", peopleJSONLines(fixturePeople))
        let big = try Self.bigInput(disk.sandbox)
        let dump = try disk.sandbox.write("dump.jsonl", export)
        let emptyDirectory = disk.path("empty")
        try FileManager.default.createDirectory(atPath: emptyDirectory, withIntermediateDirectories: false)
        // No room at all, room for LevelDB's LOCK and LOG but not its manifest, room for part of the data.
        let newPath = (disk.path("new.buri"), false), inEmptyDirectory = (emptyDirectory, true)
        for (leaving, targets) in [(0, [newPath]), (6 << 10, [newPath, inEmptyDirectory]), (3 << 19, [newPath])] {
            try disk.fill(leaving: leaving)
            for (target, wasEmptyDirectory) in targets {
                let commands = [
                    ["import", target, "Person", "--key", "objectId", leaving == 3 << 19 ? big : small],
                    ["restore", target, dump],
                ]
                for arguments in commands {
                    let run = try buri(temporaryDirectory: temporary, arguments)
                    // With no room, everything fails; the big import never fits.
                    if leaving == 0 || arguments.contains(big) {
                        #expect(run.status != 0, "\(arguments[0]) leaving \(leaving) succeeded")
                    }
                    if run.status == 0 {
                        // The data fitted in the room left: start again from nothing.
                        try FileManager.default.removeItem(atPath: target)
                        if wasEmptyDirectory {
                            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
                        }
                        continue
                    }
                    expectFailure(run, status: 3, mentioning: ["is full", target])
                    if wasEmptyDirectory {
                        let left = try FileManager.default.contentsOfDirectory(atPath: target)
                        #expect(left.isEmpty, "\(arguments[0]) leaving \(leaving): \(left): \(run)")
                    } else {
                        #expect(
                            !FileManager.default.fileExists(atPath: target),
                            "\(arguments[0]) leaving \(leaving) left \(target): \(run)")
                    }
                }
            }
            disk.freeSpace()
        }
        // The retry the message advises, with room: both work.
        let imported = try buri(
            temporaryDirectory: temporary, ["import", disk.path("new.buri"), "Person", "--key", "objectId", small])
        #expect(imported.status == 0, "\(imported)")
        let restored = try buri(temporaryDirectory: temporary, ["restore", emptyDirectory, dump])
        #expect(restored.status == 0, "\(restored)")
        #expect(try buri("export", emptyDirectory).stdout == export)
        #expect(try buri("keys", db, "Person").lines.count == fixturePeople.count)
    }

    @Test func putOnAFullDiskFailsNamingItAndChangesNothing() throws {
        guard let disk = try SmallDisk.mount(test: #function) else { return }
        defer { disk.unmount() }
        let (db, keys, export) = try Self.fixtureOnDisk(disk)
        let temporary = try Self.otherDisk(disk)
        let object = #"{"objectId":"new","name":"N","locale":"EN","age":3}"# + "\n"
        try disk.fill()
        for arguments in [["put", db, "Person", "-"], ["delete", db, "Person", "p01"]] {
            let run = try buri(temporaryDirectory: temporary, arguments, stdin: object)
            expectFailure(run, status: 3, mentioning: ["the disk holding '\(db)' is full", "intact", "free space"])
            try Self.expectIntact(db, keys: keys, export: export, temporary: temporary)
        }
        disk.freeSpace()
        let put = try buri(temporaryDirectory: temporary, ["put", db, "Person", "-"], stdin: object)
        #expect(put.status == 0, "\(put)")
        #expect(try buri("keys", db, "Person").lines == bytewise(keys + ["new"]))
        #expect(try buri("check", db).status == 0)
    }

    @Test func aDatabaseOnAFullDiskExportsToAnotherDisk() throws {
        guard let disk = try SmallDisk.mount(test: #function) else { return }
        defer { disk.unmount() }
        let (db, _, export) = try Self.fixtureOnDisk(disk)
        let temporary = try Self.otherDisk(disk)
        let onTheFullDisk = disk.path("tmp")
        try FileManager.default.createDirectory(atPath: onTheFullDisk, withIntermediateDirectories: false)
        // Writes still in the log, which opening would have to flush into a table.
        let last = try buri(
            "put", db, "Person", "-", stdin: #"{"objectId":"logged","name":"L","locale":"EN","age":5}"# + "\n")
        #expect(last.status == 0)
        let expected = try buri("export", db).stdout
        #expect(expected != export && expected.contains("logged"))
        try disk.fill()
        let before = try fingerprint(db)
        let output = disk.sandbox.path("saved.jsonl")
        let saved = try buri(temporaryDirectory: temporary, ["export", db, "-o", output])
        expectSuccess(saved)
        #expect(try String(contentsOfFile: output, encoding: .utf8) == expected)
        #expect(fingerprintChanges(before, try fingerprint(db)).isEmpty)
        // With the snapshot's directory on the full disk too, the message names it and TMPDIR.
        let stuck = try buri(temporaryDirectory: onTheFullDisk, ["export", db, "-o", output])
        expectFailure(
            stuck, status: 3,
            mentioning: [
                "temporary directory '\(onTheFullDisk)'", "disk is full", "TMPDIR", "the database was not changed",
            ])
        #expect(fingerprintChanges(before, try fingerprint(db)).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: onTheFullDisk).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
    }
}
