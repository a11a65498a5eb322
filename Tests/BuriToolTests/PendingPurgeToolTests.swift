import Buri
import Foundation
import Testing

/// A database at `path` whose "Person" bucket has a retired generation of 40 objects waiting to be
/// purged (a `deleteAll` made with purging off), and one object in its new generation.
/// Returns the retired id.
private func databaseWithPendingPurge(_ path: String) throws -> UInt32 {
    var options = BuriOptions()
    options.purgesInBackground = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    let people = try db.bucket(Person.self)
    try people.store(fixturePeople)
    let retired = people.raw.descriptor.id
    #expect(try people.deleteAll() == 40)
    try people.store(Person(objectId: "p01", name: "Zoë", locale: "SV", age: 77))
    // A text index for `buri search` to read.
    try db.bucket(Memo.self).store(searchDocuments.map { Memo(id: $0.key, body: $0.body) })
    return retired
}

/// The pending purges of the database at `path`, and how many keys each retired id still holds,
/// read with purging off (so reading changes nothing).
private func pendingState(_ path: String) throws -> [String] {
    var options = BuriOptions()
    options.purgesInBackground = false
    options.createIfMissing = false
    let db = try BuriDatabase(path: path, options: options)
    defer { db.close() }
    let snapshot = try db.engine.snapshot()
    return try db.pendingPurges().map { purge in
        var prefix: [UInt8] = [2]
        for shift in [24, 16, 8, 0] { prefix.append(UInt8(truncatingIfNeeded: purge.id >> UInt32(shift))) }
        let cursor = try snapshot.cursor(in: .prefix(prefix))
        var records = 0
        while try cursor.next() { records += 1 }
        return "\(purge.bucket) \(purge.id) \(purge.state.rawValue) \(records) records"
    }
}

/// Every file of directory `path` with its bytes.
private func files(_ path: String) throws -> [String: Data] {
    var result: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: path) {
        result[name] = try Data(contentsOf: URL(fileURLWithPath: path).appendingPathComponent(name))
    }
    return result
}

@Suite("Reading commands leave pending purges alone; writing ones resume them")
struct PendingPurgeToolTests {
    /// The commands that only read, as run on the fixture.
    static func readingCommands(_ db: String) -> [[String]] {
        [
            ["check", db], ["info", db], ["keys", db, "Person"], ["get", db, "Person", "p01"],
            ["query", db, "Person", "age", "--from", "0"], ["export", db, "Person"], ["stats", db],
            ["search", db, "Memo", "body", "pie"],
        ]
    }

    @Test func readingCommandsDoNotPurgeAndCheckReportsThePurgeAsANote() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("people.buri")
        let retired = try databaseWithPendingPurge(db)
        let before = try pendingState(db)
        #expect(before == ["Person \(retired) purging 40 records"])
        for command in Self.readingCommands(db) {
            let run = try buri(command)
            #expect(run.status == 0, "buri \(command.joined(separator: " ")): \(run.stderr)")
            #expect(try pendingState(db) == before, "buri \(command.joined(separator: " ")) purged")
        }
        let check = try buri("check", db)
        #expect(
            check.stdout.contains(
                "note: bucket 'Person' has a retired generation (id \(retired)) being purged in the background"),
            "\(check.stdout)")
        #expect(try buri("get", db, "Person", "p01").stdout.contains("Zoë"))
        #expect(!(try buri("keys", db, "Person").stdout.contains("p02")))
    }

    @Test func compactFinishesThePendingPurgeBeforeCompacting() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("people.buri")
        _ = try databaseWithPendingPurge(db)
        let compact = try buri("compact", db)
        #expect(compact.status == 0, "\(compact.stderr)")
        #expect(try pendingState(db).isEmpty)
        #expect(try buri("keys", db, "Person").stdout.split(separator: "\n") == ["p01"])
    }

    @Test func aPendingPurgeOnAReadOnlyDirectoryIsInspectedWithoutErrorAndUnchanged() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("people.buri")
        let retired = try databaseWithPendingPurge(db)
        let before = try files(db)
        chmod(sandbox.url.path, 0o755)
        chmod(db, 0o555)
        for name in before.keys { chmod(db + "/" + name, 0o444) }
        defer {
            chmod(db, 0o755)
            for name in before.keys { chmod(db + "/" + name, 0o644) }
        }
        // Root ignores permission bits: run the tool as an unprivileged user then (setpriv).
        let probe = db + "/probe"
        let enforced = !FileManager.default.createFile(atPath: probe, contents: Data())
        if !enforced { try FileManager.default.removeItem(atPath: probe) }
        let setpriv = "/usr/bin/setpriv"
        if !enforced {
            try #require(
                FileManager.default.isExecutableFile(atPath: setpriv),
                "setpriv (util-linux) is needed to run the tool as an unprivileged user")
        }
        for command in Self.readingCommands(db) {
            let run =
                enforced
                ? try buri(command)
                : try buri(
                    ["--reuid=65534", "--regid=65534", "--clear-groups", try BuriBinary.located().path] + command,
                    executable: setpriv)
            #expect(run.status == 0, "buri \(command.joined(separator: " ")): \(run.stderr)")
            if command[0] == "check" {
                #expect(
                    run.stdout.contains("note: bucket 'Person' has a retired generation (id \(retired))"),
                    "\(run.stdout)")
            }
        }
        #expect(try files(db) == before)
        chmod(db, 0o755)
        for name in before.keys { chmod(db + "/" + name, 0o644) }
        #expect(try pendingState(db) == ["Person \(retired) purging 40 records"])
    }
}
