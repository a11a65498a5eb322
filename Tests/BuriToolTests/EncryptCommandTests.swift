import Buri
import BuriEncryption
import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A plaintext database of the encrypted notes' lines, in two buckets (Note and Copy), and its
/// export: what every later state must read back.
struct PlaintextNotes {
    let path: String
    let key: String
    let export: String

    init(_ sandbox: Sandbox) throws {
        path = sandbox.path("plain.buri")
        key = try writeRandomKey(sandbox, "plain.key")
        let input = try sandbox.write("notes.jsonl", EncryptedNotes.lines)
        for bucket in ["Note", "Copy"] {
            expectSuccess(try buri(["import", path, bucket] + EncryptedNotes.indexOptions + [input]))
        }
        expectSuccess(try buri("set-value", path, "motto", #""\#(EncryptedNotes.secret)""#))
        let run = try buri("export", path)
        #expect(run.status == 0, "\(run)")
        export = run.stdout
        #expect(!filesHolding(Array(EncryptedNotes.secret.utf8), under: path).isEmpty)
    }

    /// The export with the key, which must equal the plaintext one.
    func decrypted() throws -> String {
        let run = try buri("export", path, "--key-file", key, "--decrypt")
        #expect(run.status == 0, "\(run)")
        return run.stdout
    }

    /// The database is sealed throughout: no secret in any file, every record and value checked.
    func expectSealed(_ label: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
        for needle in [EncryptedNotes.secret, EncryptedNotes.secretCity, EncryptedNotes.secretWord] {
            #expect(
                filesHolding(Array(needle.utf8), under: path) == [], "\(label)\(needle) is readable in the files",
                sourceLocation: sourceLocation)
        }
        let check = try buri("check", path, "--key-file", key)
        #expect(check.status == 0, "\(check)", sourceLocation: sourceLocation)
        #expect(try decrypted() == export, sourceLocation: sourceLocation)
    }
}

@Suite("buri encrypt: a plaintext database encrypted where it is, resumable after a kill")
struct EncryptCommandTests {
    @Test func encryptsInPlaceAndTheExportIsUnchanged() throws {
        let sandbox = try Sandbox()
        let notes = try PlaintextNotes(sandbox)
        // Without the key: a usage error. Without --plaintext-index for the numeric index: exit 7, nothing written.
        expectFailure(try buri("encrypt", notes.path), status: 2, mentioning: ["--key-file"])
        // A numeric index not declared plaintext (here, nor named): exit 7, and nothing is written.
        let leaky = sandbox.path("leaky.buri")
        expectSuccess(
            try buri(
                "import", leaky, "Note", "--key", "id", "--numeric-index", "age",
                try sandbox.write("leaky.jsonl", EncryptedNotes.lines)))
        let before = try everyKey(leaky)
        expectFailure(
            try buri("encrypt", leaky, "--key-file", notes.key), status: 7,
            mentioning: ["'age'", "--plaintext-index age"])
        #expect(try everyKey(leaky) == before)
        // Declared plaintext when imported, the numeric index needs no option here.
        let run = try buri("encrypt", notes.path, "--key-file", notes.key)
        expectSuccess(run)
        #expect(run.stdout.contains("encrypted"))
        try notes.expectSealed()
        let info = try buri("info", notes.path, "--key-file", notes.key)
        #expect(info.stdout.contains("encrypted:       yes\n"), "\(info)")
        // Now it is an encrypted database: exit 8 without the key, private indexes answer exactly.
        expectFailure(try buri("get", notes.path, "Note", "n1"), status: 8, mentioning: ["--key-file"])
        let lemuria = try buri(
            "query", notes.path, "Note", "city", "--equals", EncryptedNotes.secretCity, "--count",
            "--key-file", notes.key)
        #expect(lemuria.lines == ["10"], "\(lemuria)")
        let again = try buri("encrypt", notes.path, "--key-file", notes.key)
        expectSuccess(again)
        #expect(again.stdout.contains("already encrypted"))
    }

    @Test func killedAgainWhileGoingOnItKeepsWhatBothRunsSealed() throws {
        // Killed after 4 chunks of Copy (12 objects staged), then the next run killed after 2
        // chunks of its own (6 more): the third run keeps 18 and seals the rest.
        let sandbox = try Sandbox()
        let notes = try PlaintextNotes(sandbox)
        let arguments = [
            "encrypt", notes.path, "--key-file", notes.key, "--plaintext-index", "age", "--batch-size", "3",
        ]
        for chunks in [4, 2] {
            let killed = try buriKilledAfter(chunks: chunks, arguments)
            #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "\(killed)")
            #expect(try notes.decrypted() == notes.export)
        }
        let last = try buri(arguments)
        expectSuccess(last)
        #expect(last.stdout.contains("bucket Copy: 18 objects sealed by an earlier run were kept"), "\(last)")
        try notes.expectSealed()
    }

    @Test func killedAtTwelvePointsItReadsMeanwhileAndFinishesWhenRunAgain() throws {
        // 2 buckets of 30 objects in batches of 3: 20 committed chunks. Killed after chunk k, the
        // database needs the key, reads everything with it, and the next run finishes it.
        for chunks in [1, 2, 3, 5, 7, 9, 10, 11, 13, 16, 19, 20] {
            let sandbox = try Sandbox()
            let notes = try PlaintextNotes(sandbox)
            let killed = try buriKilledAfter(
                chunks: chunks,
                ["encrypt", notes.path, "--key-file", notes.key, "--plaintext-index", "age", "--batch-size", "3"])
            #expect(
                killed.reason == .uncaughtSignal && killed.status == SIGKILL,
                "encrypt was not killed after chunk \(chunks): \(killed)")
            expectFailure(try buri("keys", notes.path, "Note"), status: 8, mentioning: ["--key-file"])
            // Mid-way: still being encrypted, every object and value reads the same with the key.
            var options = BuriOptions()
            options.encryption = try DatabaseKey(contentsOfFile: notes.key)
            let db = try BuriDatabase(path: notes.path, options: options)
            #expect(db.isBeingEncrypted, "killed after chunk \(chunks), the database is not being encrypted")
            #expect(try db.check().problems.isEmpty, "after chunk \(chunks)")
            db.close()
            #expect(try notes.decrypted() == notes.export, "after chunk \(chunks)")
            let info = try buri("info", notes.path, "--key-file", notes.key)
            #expect(info.stdout.contains("encrypted:       yes (being encrypted"), "\(info)")
            // The copy under way is there, unpublished, and check says what it is.
            let check = try buri("check", notes.path, "--key-file", notes.key)
            #expect(check.status == 0, "\(check)")
            #expect(check.stdout.contains("`buri encrypt` goes on with its copy"), "after chunk \(chunks): \(check)")
            let resumed = try buri("encrypt", notes.path, "--key-file", notes.key, "--batch-size", "3")
            expectSuccess(resumed)
            // The bucket whose copy was under way (Copy, then Note, 10 chunks each) goes on from
            // where it was killed: what it had sealed is kept, not sealed again.
            let (bucket, kept) = chunks <= 10 ? ("Copy", 3 * chunks) : ("Note", 3 * (chunks - 10))
            #expect(
                resumed.stdout.contains("bucket \(bucket): \(kept) objects sealed by an earlier run were kept"),
                "killed after chunk \(chunks): \(resumed)")
            try notes.expectSealed("killed after chunk \(chunks): ")
        }
    }

    @Test(arguments: [4, 13])
    func killedOnEtcdTheNextRunTakesUpTheCopyOnceTheKilledRunsLeaseHasEnded(chunks: Int) throws {
        // A 2-second lease: the killed run stops renewing it, and etcd deletes its key then.
        let location = try EtcdTestCluster.location("encrypt-kill") + "&lease-seconds=2"
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let key = try writeRandomKey(sandbox, "etcd.key")
        let input = try sandbox.write("notes.jsonl", EncryptedNotes.lines)
        for bucket in ["Note", "Copy"] {
            expectSuccess(try buri(["import", location, bucket] + EncryptedNotes.indexOptions + [input]))
        }
        let plaintext = try buri("export", location)
        expectSuccess(plaintext)
        let arguments = [
            "encrypt", location, "--key-file", key, "--plaintext-index", "age", "--batch-size", "3",
        ]
        // Killed after 4 chunks of Copy (12 objects sealed into its copy, which names the run's
        // lease), or after 3 chunks of Note, the second bucket (9 objects).
        let killed = try buriKilledAfter(chunks: chunks, arguments)
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "\(killed)")
        let engine = try EtcdEngine(location: location)
        defer { engine.close() }
        let leasePrefix: [UInt8] = [0] + Array("lease".utf8)
        // One stage, naming its owner (state 03); a generation replaced before the kill may still
        // be waiting for its purge (state 01), which the kill stopped.
        let snapshot = try engine.snapshot()
        let stages = try scanKeys(snapshot).filter { $0.first == 0x04 }.filter { try snapshot.get($0)?.first == 0x03 }
        #expect(stages.count == 1)
        // Run again at once: the killed run's lease still holds, but nothing renews it any more;
        // the new run watches it run out (2 s), then takes the copy up.
        #expect(try scanKeys(engine.snapshot()).contains(where: { $0.starts(with: leasePrefix) }))
        let resumed = try buri(arguments)
        expectSuccess(resumed)
        let (bucket, kept) = chunks <= 10 ? ("Copy", 3 * chunks) : ("Note", 3 * (chunks - 10))
        #expect(
            resumed.stdout.contains("bucket \(bucket): \(kept) objects sealed by an earlier run were kept"),
            "\(resumed)")
        let check = try buri("check", location, "--key-file", key)
        #expect(check.status == 0, "\(check)")
        let decrypted = try buri("export", location, "--key-file", key, "--decrypt")
        #expect(decrypted.stdout == plaintext.stdout)
        // Nothing left behind: no stage, no lease, no plaintext value in the cluster's keys.
        #expect(try scanKeys(engine.snapshot()).filter { $0.first == 0x04 || $0.starts(with: leasePrefix) } == [])
    }
}
