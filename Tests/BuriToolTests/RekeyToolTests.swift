import Buri
import BuriTestSupport
import Foundation
import Testing

// `buri rekey DB --new-key-file FILE` (or --new-passphrase-file): the current key given as for any
// command, the new one as a file; one line on success; exit 8 without the current key, 9 with a
// wrong one or for a plaintext database, 2 for a missing, doubled or unusable new key.

/// `buri export --decrypt` of `path` with `key` (as `["--key-file", FILE]`).
private func decryptedExport(_ path: String, _ key: [String]) throws -> ToolRun {
    try buri(["export", path, "--decrypt"] + key)
}

@Suite("buri rekey: the key changes in one commit, the old key gets exit 9, the new one reads everything")
struct RekeyToolTests {
    @Test func rekeyWithKeyFilesThenToAPassphrase() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let contents = try notes.contents()
        let newKey = try writeRandomKey(sandbox, "new.key")
        let run = try buri("rekey", notes.path, "--key-file", notes.key, "--new-key-file", newKey)
        expectSuccess(run)
        #expect(run.lines.count == 1 && run.lines[0].hasPrefix("changed the key of \(notes.path)"), "\(run)")
        #expect(run.stdout.contains("--new-key-file '\(newKey)'"), "\(run)")
        // Run again (a script retrying after a kill): the database opens with the new key already.
        let retried = try buri("rekey", notes.path, "--key-file", notes.key, "--new-key-file", newKey)
        expectSuccess(retried)
        #expect(retried.stdout.contains("already opens with the new key"), "\(retried)")
        // The old key is refused (exit 9) and writes nothing; the new one reads everything.
        expectFailure(
            try buri("keys", notes.path, "Note", "--key-file", notes.key), status: 9,
            mentioning: ["does not open the encrypted database", "nothing was read or written"])
        expectFailure(
            try buri("put", notes.path, "Note", #"{"id":"x","age":1}"#, "--key-file", notes.key), status: 9,
            mentioning: ["does not open"])
        let exported = try decryptedExport(notes.path, ["--key-file", newKey])
        #expect(exported.status == 0, "\(exported)")
        #expect(exported.stdout == contents)
        let city = try buri(
            ["query", notes.path, "Note", "city", "--equals", EncryptedNotes.secretCity, "--key-file", newKey])
        expectSuccess(city)
        #expect(city.lines.count == 10, "\(city)")
        let check = try buri("check", notes.path, "--key-file", newKey)
        expectSuccess(check)
        // From the new key, given in the environment, to a passphrase.
        let passphrase = try sandbox.write("new.passphrase", "a new passphrase for the notes\n")
        expectSuccess(
            try buri(
                ["rekey", notes.path, "--new-passphrase-file", passphrase], environment: ["BURI_KEY_FILE": newKey]))
        expectFailure(try buri("keys", notes.path, "Note", "--key-file", newKey), status: 9, mentioning: ["passphrase"])
        let again = try decryptedExport(notes.path, ["--passphrase-file", passphrase])
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout == contents)
        // Nothing secret was written in the clear by the changes.
        for needle in [EncryptedNotes.secret, EncryptedNotes.secretCity, EncryptedNotes.secretWord] {
            #expect(filesHolding(Array(needle.utf8), under: notes.path) == [], "\(needle) is readable in the files")
        }
    }

    @Test func aMissingWrongOrUnusableKeyChangesNothing() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let newKey = try writeRandomKey(sandbox, "new.key")
        let other = try writeRandomKey(sandbox, "other.key")
        let short = try sandbox.write("short.key", "too short")
        let before = try notes.contents()
        // No current key: exit 8. The wrong one: exit 9.
        expectFailure(
            try buri("rekey", notes.path, "--new-key-file", newKey), status: 8, mentioning: ["is encrypted"])
        expectFailure(
            try buri("rekey", notes.path, "--key-file", other, "--new-key-file", newKey), status: 9,
            mentioning: ["does not open the encrypted database at '\(notes.path)'"])
        // No new key, both kinds, an empty name or an unusable file: usage errors naming what is wrong.
        expectFailure(
            try buri("rekey", notes.path, "--key-file", notes.key), status: 2,
            mentioning: ["--new-key-file FILE", "--new-passphrase-file FILE"])
        expectFailure(
            try buri(
                "rekey", notes.path, "--key-file", notes.key, "--new-key-file", newKey, "--new-passphrase-file",
                newKey), status: 2, mentioning: ["give one"])
        expectFailure(
            try buri("rekey", notes.path, "--key-file", notes.key, "--new-key-file", short), status: 2,
            mentioning: ["'\(short)'", "32"])
        expectFailure(
            try buri("rekey", notes.path, "--key-file", notes.key, "--new-key-file", sandbox.path("missing.key")),
            status: 2, mentioning: ["does not exist"])
        expectFailure(
            try buri("rekey", notes.path, "--key-file", notes.key, "--new-passphrase-file", ""), status: 2,
            mentioning: ["--new-passphrase-file needs"])
        // The key is the one it was: it opens everything as before.
        #expect(try notes.contents() == before)
    }

    @Test func aPlaintextDatabaseHasNoKeyToChange() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("plain.buri")
        expectSuccess(try buri(["import", path, "N", "--key", "id"], stdin: #"{"id":"a"}"# + "\n"))
        let newKey = try writeRandomKey(sandbox, "new.key")
        let before = try buri("export", path).stdout
        expectFailure(
            try buri("rekey", path, "--new-key-file", newKey), status: 9,
            mentioning: ["is not encrypted, so it has no key to change", "buri encrypt", "nothing was written"])
        // With a key given for it: refused as for any command.
        expectFailure(
            try buri("rekey", path, "--key-file", newKey, "--new-key-file", newKey), status: 9,
            mentioning: ["is not encrypted"])
        #expect(try buri("export", path).stdout == before)
    }
}

@Suite("buri rekey --rotate-data-key: every value sealed anew, resumable after a kill at any batch")
struct RotateDataKeyToolTests {
    @Test func killedAtElevenPointsItReadsMeanwhileAndFinishesWhenRunAgain() throws {
        // 30 records, 2 per batch: 15 batches. Killed after batch k, the database opens with the
        // same key, reads everything, checks clean, and the next run finishes the rotation.
        for chunks in [1, 2, 3, 4, 5, 7, 9, 11, 13, 14, 15] {
            let sandbox = try Sandbox()
            let notes = try EncryptedNotes(sandbox)
            let contents = try notes.contents()
            let killed = try buriKilledAfter(
                chunks: chunks,
                ["rekey", notes.path, "--key-file", notes.key, "--rotate-data-key", "--batch-size", "2"])
            #expect(
                killed.reason == .uncaughtSignal && killed.status == SIGKILL,
                "rekey was not killed after batch \(chunks): \(killed)")
            let info = try buri("info", notes.path, "--key-file", notes.key)
            #expect(info.stdout.contains("data key generation 1; rotating"), "after batch \(chunks): \(info)")
            expectSuccess(try buri("check", notes.path, "--key-file", notes.key))
            #expect(try notes.contents() == contents, "after batch \(chunks)")
            let finished = try buri(
                "rekey", notes.path, "--key-file", notes.key, "--rotate-data-key", "--batch-size", "2")
            expectSuccess(finished)
            #expect(finished.stdout.contains("finished rotating the data key"), "\(finished)")
            let after = try buri("info", notes.path, "--key-file", notes.key, "--json")
            #expect(after.stdout.contains(#""dataKeyGeneration": 1"#), "\(after)")
            #expect(after.stdout.contains(#""retiringDataKeyGeneration": null"#), "\(after)")
            expectSuccess(try buri("check", notes.path, "--key-file", notes.key))
            #expect(try notes.contents() == contents)
            for needle in [EncryptedNotes.secret, EncryptedNotes.secretCity, EncryptedNotes.secretWord] {
                #expect(filesHolding(Array(needle.utf8), under: notes.path) == [], "\(needle) is readable")
            }
        }
    }

    @Test func aNewKeyAndARotationTogetherResumeWithTheNewKey() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let contents = try notes.contents()
        let newKey = try writeRandomKey(sandbox, "new.key")
        let arguments = [
            "rekey", notes.path, "--key-file", notes.key, "--new-key-file", newKey, "--rotate-data-key", "--batch-size",
            "4",
        ]
        let killed = try buriKilledAfter(chunks: 3, arguments)
        #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL, "\(killed)")
        // The key changed first: the old one is refused, the new one reads everything mid-rotation.
        expectFailure(try buri("keys", notes.path, "Note", "--key-file", notes.key), status: 9, mentioning: ["open"])
        #expect(try buri("export", notes.path, "--decrypt", "--key-file", newKey).stdout == contents)
        // Run again as it was: the new key already opens it, and the rotation is finished.
        let again = try buri(arguments)
        expectSuccess(again)
        #expect(again.stdout.contains("already opens with the new key"), "\(again)")
        #expect(again.stdout.contains("finished rotating the data key"), "\(again)")
        let info = try buri("info", notes.path, "--key-file", newKey)
        #expect(info.stdout.contains("(data key generation 1)"), "\(info)")
        expectSuccess(try buri("check", notes.path, "--key-file", newKey))
        // Rotating alone again: generation 2.
        let second = try buri("rekey", notes.path, "--key-file", newKey, "--rotate-data-key")
        expectSuccess(second)
        #expect(second.stdout.contains("rotated the data key") && second.stdout.contains("generation 2"), "\(second)")
        #expect(try buri("export", notes.path, "--decrypt", "--key-file", newKey).stdout == contents)
    }

    @Test func aPlaintextDatabaseHasNoDataKeyToRotate() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("plain.buri")
        expectSuccess(try buri(["import", path, "N", "--key", "id"], stdin: #"{"id":"a"}"# + "\n"))
        let key = try writeRandomKey(sandbox, "k.key")
        expectFailure(
            try buri("rekey", path, "--key-file", key, "--rotate-data-key"), status: 9, mentioning: ["not encrypted"])
        expectFailure(
            try buri("rekey", path, "--rotate-data-key", "--batch-size", "0"), status: 2, mentioning: ["batch"])
    }
}
