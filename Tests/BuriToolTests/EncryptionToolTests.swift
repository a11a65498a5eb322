import Buri
import BuriCodec
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

// `buri` on encrypted databases: created by import and restore with --key-file or
// --passphrase-file, opened only with their key (exit 8 without one, 9 with another), exported
// only with --decrypt, inspected (info, check) and queried through private and plaintext indexes.

/// An encrypted database of notes made by `buri import` in a sandbox, and its key file.
struct EncryptedNotes {
    /// Text that must never appear in the database's files: in a field no index reads, in the
    /// values of a private binary index (city) and in the words of a private text index (body).
    static let secret = "Zanzibar-7f3a9c-secret"
    static let secretCity = "Lemuria"
    static let secretWord = "xylophonist"
    static let cities = ["Atlantis", secretCity, "Hyperborea"]

    /// 30 notes: n0…n29, age 20 + i % 10 (a plaintext numeric index), city cycling through
    /// `cities` (private), a body whose even notes "jump" (a private text index).
    static let lines: String = (0..<30).map { i in
        #"{"id":"n\#(i)","name":"\#(secret) \#(i)","city":"\#(cities[i % 3])","age":\#(20 + i % 10),"body":"the \#(secretWord) fox \#(i % 2 == 0 ? "jumps" : "sleeps")"}"#
            + "\n"
    }.joined()

    static let indexOptions = [
        "--key", "id", "--binary-index", "city", "--numeric-index", "age", "--plaintext-index", "age", "--text-index",
        "body",
    ]

    let sandbox: Sandbox
    let path: String
    let key: String
    let input: String

    init(_ sandbox: Sandbox, name: String = "notes.buri") throws {
        self.sandbox = sandbox
        path = sandbox.path(name)
        key = try writeRandomKey(sandbox, "notes.key")
        input = try sandbox.write("notes.jsonl", Self.lines)
        expectSuccess(try buri(["import", path, "Note"] + Self.indexOptions + ["--key-file", key, input]))
    }

    /// `buri export --decrypt` with the right key: what the database holds, to compare before and after.
    func contents() throws -> String {
        let run = try buri("export", path, "--key-file", key, "--decrypt")
        #expect(run.status == 0, "\(run)")
        return run.stdout
    }
}

/// A new key file of 32 random bytes.
func writeRandomKey(_ sandbox: Sandbox, _ name: String) throws -> String {
    let path = sandbox.path(name)
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

@Suite("buri on encrypted databases: keys from files, exit 8 and 9, private indexes, export only with --decrypt")
struct EncryptionToolTests {
    @Test func importWithAKeyFileCreatesAnEncryptedDatabaseThatReadsWithItsKey() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        // Nothing secret in any file of the directory: not the field no index reads, not the
        // private index's values, not the text index's words.
        for needle in [EncryptedNotes.secret, EncryptedNotes.secretCity, EncryptedNotes.secretWord] {
            #expect(filesHolding(Array(needle.utf8), under: notes.path) == [], "\(needle) is readable in the files")
        }
        let k = ["--key-file", notes.key]
        let get = try buri(["get", notes.path, "Note", "n4"] + k)
        expectSuccess(get)
        #expect(get.stdout.contains("\(EncryptedNotes.secret) 4") && get.stdout.contains(EncryptedNotes.secretCity))
        // The plaintext numeric index answers ranges; the private binary one exact values.
        let ages = try buri(["query", notes.path, "Note", "age", "--from", "20", "--to", "21"] + k)
        expectSuccess(ages)
        #expect(ages.lines == ["n0", "n10", "n20", "n1", "n11", "n21"], "\(ages)")
        let city = try buri(["query", notes.path, "Note", "city", "--equals", EncryptedNotes.secretCity] + k)
        expectSuccess(city)
        #expect(city.lines == bytewise(stride(from: 1, to: 30, by: 3).map { "n\($0)" }), "\(city)")
        let within = try buri(
            ["query", notes.path, "Note", "--where", "city:\(EncryptedNotes.secretCity) and age:>=25"] + k)
        expectSuccess(within)
        #expect(Set(within.lines) == ["n7", "n16", "n19", "n25", "n28"], "\(within)")
        // The private text index finds words exactly.
        let jumps = try buri(["search", notes.path, "Note", "body", "jumps"] + k)
        expectSuccess(jumps)
        #expect(Set(jumps.lines) == Set(stride(from: 0, to: 30, by: 2).map { "n\($0)" }), "\(jumps)")
        let check = try buri(["check", notes.path] + k)
        expectSuccess(check)
        #expect(check.stdout.hasPrefix("ok: 1 bucket, 30 objects"), "\(check)")
        // Writing commands take the key too, and what they write is sealed as well.
        expectSuccess(
            try buri(
                [
                    "put", notes.path, "Note",
                    #"{"id":"p1","name":"Qwertzuiop-late","city":"Mu","age":50,"body":"late"}"#,
                ]
                    + k))
        #expect(try buri(["query", notes.path, "Note", "age", "--from", "50"] + k).lines == ["p1"])
        expectSuccess(try buri(["compact", notes.path] + k))
        #expect(filesHolding(Array("Qwertzuiop-late".utf8), under: notes.path) == [])
    }

    @Test func infoSaysWhetherADatabaseIsEncryptedAndHowEachIndexStoresItsValues() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let info = try buri("info", notes.path, "--key-file", notes.key)
        expectSuccess(info)
        for line in [
            "encrypted:       yes",
            "  index 'city' (binary; field city; private (keyed tokens)): 30 entries",
            "  index 'age' (numeric; field age; plaintext): 30 entries",
        ] {
            #expect(info.lines.contains(line), "info should print \(line): \(info)")
        }
        #expect(
            info.lines.contains {
                $0.hasPrefix("  index 'body' (text; tokenizer 1") && $0.contains("private (keyed tokens)")
            },
            "\(info)")
        let json = try buri("info", notes.path, "--key-file", notes.key, "--json")
        expectSuccess(json)
        let value = try CBORValue(json: json.stdout)
        #expect(value["encrypted"] == .bool(true))
        let indexes = value["buckets"]?.arrayValue?.first?["indexes"]?.arrayValue ?? []
        #expect(indexes.map { $0["name"]?.stringValue } == ["city", "age", "body"])
        #expect(indexes.map { $0["private"]?.boolValue } == [true, false, true])
        #expect(indexes.map { $0["plaintext"]?.boolValue } == [false, true, false])
        // A plaintext database says so, and its indexes are as they were.
        let plain = try makeFixture(sandbox)
        let plainInfo = try buri("info", plain)
        #expect(plainInfo.lines.contains("encrypted:       no"), "\(plainInfo)")
        #expect(plainInfo.lines.contains("  index 'age' (numeric; field age): 40 entries"), "\(plainInfo)")
        let plainJSON = try CBORValue(json: try buri("info", plain, "--json").stdout)
        #expect(plainJSON["encrypted"] == .bool(false))
        #expect(plainJSON["buckets"]?.arrayValue?.first?["indexes"]?.arrayValue?.first?["private"] == .bool(false))
    }

    @Test func aMissingWrongOrUnusableKeyIsRefusedAndChangesNothing() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let before = try notes.contents()
        let other = try writeRandomKey(sandbox, "other.key")
        let short = try sandbox.write("short.key", String(repeating: "k", count: 31))
        let passphrase = try sandbox.write("words.txt", "correct horse battery staple\n")
        let put = ["put", notes.path, "Note", #"{"id":"x","age":1}"#]

        // No key: exit 8, for reading and writing commands alike.
        for arguments in [["info", notes.path], ["get", notes.path, "Note", "n1"], put, ["check", notes.path]] {
            expectFailure(
                try buri(arguments), status: 8,
                mentioning: [
                    "'\(notes.path)' is encrypted", "--key-file", "--passphrase-file", "nothing was read or written",
                ])
        }
        expectFailure(
            try buri(["import", notes.path, "Note", notes.input]), status: 8, mentioning: ["is encrypted"])
        // Another key: exit 9, saying it does not match.
        for arguments in [["info", notes.path], put, ["delete", notes.path, "Note", "n1"]] {
            expectFailure(
                try buri(arguments + ["--key-file", other]), status: 9,
                mentioning: ["--key-file '\(other)'", "does not open the encrypted database", "does not unwrap"])
        }
        // A passphrase for a database made with a key file: the other kind of key, said so.
        expectFailure(
            try buri(put + ["--passphrase-file", passphrase]), status: 9,
            mentioning: ["encrypted with a raw 256-bit key (a key file)", "give the key file, not a passphrase"])
        // Key files that cannot be used: usage errors naming the file.
        expectFailure(
            try buri(["info", notes.path, "--key-file", short]), status: 2,
            mentioning: ["'\(short)'", "31 bytes", "32"])
        expectFailure(
            try buri(["info", notes.path, "--key-file", sandbox.path("missing.key")]), status: 2,
            mentioning: ["'\(sandbox.path("missing.key"))' does not exist"])
        let empty = try sandbox.write("empty.txt", "\n")
        expectFailure(
            try buri(["info", notes.path, "--passphrase-file", empty]), status: 2,
            mentioning: ["'\(empty)'", "holds no passphrase"])
        expectFailure(
            try buri(["info", notes.path, "--key-file", notes.key, "--passphrase-file", passphrase]), status: 2,
            mentioning: ["--key-file and --passphrase-file", "give one"])
        // The environment names the key when no option does; an option wins over it.
        expectSuccess(try buri(["get", notes.path, "Note", "n1"], environment: ["BURI_KEY_FILE": notes.key]))
        expectFailure(
            try buri(put, environment: ["BURI_KEY_FILE": other]), status: 9,
            mentioning: ["BURI_KEY_FILE ('\(other)')", "does not open"])
        expectSuccess(
            try buri(["get", notes.path, "Note", "n1", "--key-file", notes.key], environment: ["BURI_KEY_FILE": other]))
        expectFailure(
            try buri(["info", notes.path], environment: ["BURI_KEY_FILE": short]), status: 2,
            mentioning: ["'\(short)'", "31 bytes", "BURI_KEY_FILE"])
        expectFailure(
            try buri(
                ["info", notes.path], environment: ["BURI_KEY_FILE": notes.key, "BURI_PASSPHRASE_FILE": passphrase]),
            status: 2, mentioning: ["BURI_KEY_FILE and BURI_PASSPHRASE_FILE are both set"])
        // An empty variable is no key.
        expectFailure(try buri(["info", notes.path], environment: ["BURI_KEY_FILE": ""]), status: 8, mentioning: [])
        #expect(try notes.contents() == before)

        // A key for a plaintext database: exit 9, saying it is not encrypted; nothing written.
        let plain = try makeFixture(sandbox)
        let plainBefore = try buri("export", plain).stdout
        for arguments in [
            ["info", plain], ["put", plain, "Person", #"{"objectId":"x","name":"N","locale":"EN","age":1}"#],
            ["import", plain, "Person", notes.input],
        ] {
            expectFailure(
                try buri(arguments + ["--key-file", notes.key]), status: 9,
                mentioning: [
                    "a key was given (--key-file '\(notes.key)')", "is not encrypted", "buri encrypt",
                ])
        }
        expectFailure(
            try buri(["info", plain], environment: ["BURI_KEY_FILE": notes.key]), status: 9,
            mentioning: ["is not encrypted", "unset BURI_KEY_FILE"])
        #expect(try buri("export", plain).stdout == plainBefore)
    }

    @Test func exportOfAnEncryptedDatabaseNeedsDecryptAndRestoresEncrypted() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let dump = sandbox.path("dump.jsonl")
        expectFailure(
            try buri("export", notes.path, "--key-file", notes.key, "-o", dump), status: 2,
            mentioning: ["is encrypted", "unencrypted", "--decrypt"])
        expectFailure(try buri("export", notes.path, "--key-file", notes.key), status: 2, mentioning: ["--decrypt"])
        #expect(!sandbox.exists("dump.jsonl"))
        let export = try buri("export", notes.path, "--key-file", notes.key, "--decrypt", "-o", dump)
        #expect(export.status == 0, "\(export)")
        #expect(export.stderr == "buri: warning: the export holds the database's data unencrypted\n", "\(export)")
        let text = try sandbox.read("dump.jsonl")
        // The plaintext declaration travels in the schema line (format 7).
        #expect(text.hasPrefix(#"["buri-export",7]"# + "\n"), "\(text.prefix(200))")
        #expect(text.contains(#""name":"age","kinds":["numeric"]"#) && text.contains(#""plaintext":true"#))
        #expect(text.components(separatedBy: #""plaintext""#).count == 2, "only the age index is declared")
        #expect(text.contains("\(EncryptedNotes.secret) 7"))

        // Restored with another key: an encrypted database with the same content.
        let copyKey = try writeRandomKey(sandbox, "copy.key")
        let copy = sandbox.path("copy.buri")
        // --encrypt without a key: refused before anything is written.
        expectFailure(try buri("restore", "--encrypt", copy, dump), status: 2, mentioning: ["--encrypt needs"])
        #expect(!sandbox.exists("copy.buri"))
        let restore = try buri("restore", "--encrypt", copy, dump, "--key-file", copyKey)
        expectSuccess(restore)
        #expect(restore.stdout == "restored 1 bucket and 30 objects into \(copy)\n", "\(restore)")
        expectFailure(try buri("info", copy), status: 8, mentioning: ["is encrypted"])
        expectFailure(try buri("info", copy, "--key-file", notes.key), status: 9, mentioning: ["does not open"])
        #expect(filesHolding(Array(EncryptedNotes.secret.utf8), under: copy) == [])
        let again = try buri("export", copy, "--key-file", copyKey, "--decrypt")
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout == text)
        #expect(
            try buri("query", copy, "Note", "age", "--from", "29", "--key-file", copyKey).lines == ["n19", "n29", "n9"])
        // Restored without a key: a plaintext database, with the declaration kept, exporting the same bytes.
        let plain = sandbox.path("plain.buri")
        expectSuccess(try buri("restore", plain, dump))
        #expect(try buri("info", plain).lines.contains("encrypted:       no"))
        #expect(try buri("export", plain).stdout == text)
        // --decrypt changes nothing for a plaintext database: no warning.
        expectSuccess(try buri("export", plain, "--decrypt"))
    }

    @Test func plaintextIndexesAreDeclaredOnImportAndRestore() throws {
        let sandbox = try Sandbox()
        let key = try writeRandomKey(sandbox, "k.key")
        let input = try sandbox.write("in.jsonl", EncryptedNotes.lines)
        // A numeric index not declared plaintext: refused, nothing created.
        let refused = sandbox.path("refused.buri")
        expectFailure(
            try buri("import", refused, "Note", "--key", "id", "--numeric-index", "age", "--key-file", key, input),
            status: 7, mentioning: ["index 'age' of bucket 'Note'", "--plaintext-index age", "nothing was written"])
        #expect(!sandbox.exists("refused.buri"))
        expectFailure(
            try buri(
                "import", refused, "Note", "--key", "id", "--numeric-index", "age", "--plaintext-index", "agee",
                "--key-file", key, input), status: 2, mentioning: ["'agee'", "'age'"])
        #expect(!sandbox.exists("refused.buri"))
        // A plaintext database's export (no declaration) restores encrypted only with one.
        let plain = try makeFixture(sandbox)
        let dump = sandbox.path("plain.jsonl")
        expectSuccess(try buri("export", plain, "-o", dump))
        let secret = sandbox.path("secret.buri")
        expectFailure(
            try buri("restore", secret, dump, "--key-file", key), status: 7,
            mentioning: ["bucket 'Person'", "--plaintext-index age", "nothing was restored"])
        #expect(!sandbox.exists("secret.buri"))
        expectFailure(
            try buri(
                "restore", secret, dump, "--key-file", key, "--plaintext-index", "age", "--plaintext-index", "nope",
                "--plaintext-index", "locale_age"), status: 2, mentioning: ["'nope'", "nothing was restored"])
        #expect(!sandbox.exists("secret.buri"))
        // "age" in Person, "locale_age" (binary, numeric) in notes.
        expectSuccess(
            try buri(
                "restore", secret, dump, "--key-file", key, "--plaintext-index", "age", "--plaintext-index",
                "locale_age"))
        let info = try buri("info", secret, "--key-file", key)
        #expect(info.lines.contains("  index 'age' (numeric; field age; plaintext): 40 entries"), "\(info)")
        #expect(info.lines.contains("  index 'locale' (binary; field locale; private (keyed tokens)): 40 entries"))
        #expect(
            try buri("query", secret, "Person", "locale", "--equals", "NL", "--count", "--key-file", key).stdout
                == "10\n")
        // Its export carries the declarations: another restore needs no option.
        let declared = try buri("export", secret, "--key-file", key, "--decrypt")
        #expect(declared.stdout.components(separatedBy: #""plaintext":true"#).count == 3)
        let third = sandbox.path("third.buri")
        expectSuccess(
            try buri(["restore", third, "-", "--key-file", key], stdin: declared.stdout))
        #expect(try buri("export", third, "--key-file", key, "--decrypt").stdout == declared.stdout)
        // One bucket of that export imported into a new encrypted database keeps its declaration.
        let one = sandbox.path("one.buri")
        let imported = try buri(["import", one, "Person", "--key-file", key], stdin: declared.stdout)
        #expect(
            imported.status == 0 && imported.stderr.contains("skipped export records of other buckets"), "\(imported)")
        #expect(
            try buri("info", one, "--key-file", key).lines.contains(
                "  index 'age' (numeric; field age; plaintext): 40 entries"))
        // An existing bucket's index cannot be declared plaintext by an import.
        let notes = try EncryptedNotes(sandbox)
        expectFailure(
            try buri("import", notes.path, "Note", "--plaintext-index", "city", "--key-file", notes.key, input),
            status: 2, mentioning: ["'city'", "not declared plaintext", "cannot change an existing index"])
        expectSuccess(
            try buri("import", notes.path, "Note", "--plaintext-index", "age", "--key-file", notes.key, input))
    }

    @Test func aPrivateIndexAnswersExactMatchesAndRefusesRangesPrefixesAndOrders() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let k = ["--key-file", notes.key]
        for arguments in [
            ["query", notes.path, "Note", "city", "--prefix", "Lem"],
            ["query", notes.path, "Note", "city", "--from", "A", "--to", "M"],
            ["query", notes.path, "Note", "--where", "age:20..25", "--order-by", "city"],
            ["query", notes.path, "Note", "--where", "city:Lem*"],
        ] {
            expectFailure(
                try buri(arguments + k), status: 2,
                mentioning: [
                    "index 'city' of bucket 'Note' is private", "keyed tokens", "exact values", "--plaintext-index",
                ])
        }
        expectFailure(
            try buri(["search", notes.path, "Note", "body", "jum*"] + k), status: 2,
            mentioning: ["index 'body'", "is private", "a prefix query"])
        expectSuccess(try buri(["query", notes.path, "Note", "city", "--in", "Mu", "--in", "Atlantis"] + k))
        #expect(try buri(["query", notes.path, "Note", "age", "--from", "28", "--count"] + k).stdout == "6\n")
    }

    @Test func checkNamesEachSealedRecordThatFailsItsAuthentication() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        // One byte flipped in the middle of n2's sealed value, written under the database's own key.
        do {
            var options = BuriOptions()
            options.encryption = try DatabaseKey(contentsOfFile: notes.key)
            let db = try BuriDatabase(path: notes.path, options: options)
            defer { db.close() }
            let base = db.storedEngine
            let cursor = try base.snapshot().cursor(in: .all, reverse: false)
            var target: (key: [UInt8], value: [UInt8])?
            while try cursor.next() {
                let key = cursor.key
                if key.first == 0x02, key.count > 5, String(decoding: key[5...], as: UTF8.self) == "n2" {
                    target = (key, try cursor.value)
                }
            }
            var (key, value) = try #require(target)
            #expect(value.first == sealedValueMarker | paddedSealedValueFlag)  // padded on LevelDB
            value[value.count / 2] ^= 0x01
            let batch = base.makeBatch()
            batch.put(key, value)
            try base.commit(batch, conditions: nil, sync: true)
        }
        let k = ["--key-file", notes.key]
        let check = try buri(["check", notes.path] + k)
        #expect(check.status == 1, "\(check)")
        let problem = check.lines.first { $0.hasPrefix("corruptRecord bucket 'Note' key 'n2'") }
        #expect(problem?.contains("authentication") == true, "\(check)")
        #expect(check.lines.filter { $0.hasPrefix("corruptRecord") }.count == 1, "\(check)")
        let json = try CBORValue(json: try buri(["check", notes.path, "--json"] + k).stdout)
        let problems = json["problems"]?.arrayValue ?? []
        #expect(problems.map { $0["key"]?.stringValue } == ["n2"], "\(json)")
        #expect(problems.first?["bucket"]?.stringValue == "Note")
        #expect(problems.first?["detail"]?.stringValue?.contains("authentication") == true)
        // Reading it fails as damage (exit 3) naming it; the others read.
        expectFailure(
            try buri(["get", notes.path, "Note", "n2"] + k), status: 3,
            mentioning: ["record \"n2\" in bucket \"Note\"", "failed its authentication"])
        expectSuccess(try buri(["get", notes.path, "Note", "n3"] + k))
        // An export saves every other record with --skip-damaged, naming the one it skipped.
        let export = try buri(["export", notes.path, "--decrypt", "--skip-damaged"] + k)
        #expect(export.status == 1, "\(export)")
        #expect(export.stderr.contains("skipped: bucket 'Note', key \"n2\""), "\(export)")
        #expect(export.stderr.contains("skipped 1 unreadable record and 0 key ranges"), "\(export)")
        #expect(export.lines.filter { $0.contains(#""key":"#) }.count == 29, "\(export)")
    }

    @Test func aPassphraseFileCreatesAndOpensADatabase() throws {
        let sandbox = try Sandbox()
        let passphrase = try sandbox.write("words.txt", "correct horse battery staple\n")
        let key = try writeRandomKey(sandbox, "k.key")
        let db = sandbox.path("p.buri")
        expectSuccess(
            try buri(
                ["import", db, "Note"] + EncryptedNotes.indexOptions + ["--passphrase-file", passphrase, "-"],
                stdin: EncryptedNotes.lines))
        #expect(filesHolding(Array(EncryptedNotes.secret.utf8), under: db) == [])
        // The line break is not part of the passphrase: the same words without it open it too.
        let bare = try sandbox.write("bare.txt", "correct horse battery staple")
        #expect(
            try buri("query", db, "Note", "city", "--equals", "Lemuria", "--count", "--passphrase-file", bare).stdout
                == "10\n")
        expectSuccess(try buri(["get", db, "Note", "n1"], environment: ["BURI_PASSPHRASE_FILE": passphrase]))
        let wrong = try sandbox.write("wrong.txt", "correct horse battery stable\n")
        expectFailure(
            try buri("info", db, "--passphrase-file", wrong), status: 9,
            mentioning: ["not the passphrase the database was encrypted with"])
        expectFailure(
            try buri("info", db, "--key-file", key), status: 9,
            mentioning: ["encrypted with a passphrase; give the passphrase, not a key file"])
    }

    @Test func repairTakesTheKeyToCheckTheRecordsItSalvaged() throws {
        let sandbox = try Sandbox()
        let notes = try EncryptedNotes(sandbox)
        let before = try notes.contents()
        expectFailure(
            try buri("repair", notes.path), status: 8,
            mentioning: ["is encrypted", "the files were salvaged", "run `buri repair` again with it"])
        let repaired = try buri("repair", notes.path, "--key-file", notes.key)
        expectSuccess(repaired)
        #expect(repaired.stdout.contains("nothing was lost"), "\(repaired)")
        #expect(try notes.contents() == before)
    }

    @Test func anEncryptedDatabaseAtAnEtcdLocationTakesTheKeyLikeADirectory() throws {
        let location = try EtcdTestCluster.location("encrypted-tool")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let key = try writeRandomKey(sandbox, "k.key")
        let input = try sandbox.write("in.jsonl", EncryptedNotes.lines)
        expectSuccess(
            try buri(["import", location, "Note"] + EncryptedNotes.indexOptions + ["--key-file", key, input]))
        expectFailure(try buri("info", location), status: 8, mentioning: ["'\(location)' is encrypted"])
        expectFailure(
            try buri("info", location, "--key-file", try writeRandomKey(sandbox, "other.key")), status: 9,
            mentioning: ["does not open"])
        #expect(try buri("info", location, "--key-file", key).lines.contains("encrypted:       yes"))
        #expect(
            try buri(
                "query", location, "Note", "city", "--equals", EncryptedNotes.secretCity, "--count", "--key-file", key
            )
            .stdout == "10\n")
        expectSuccess(try buri("check", location, "--repair", "--key-file", key))
        // What the cluster stores holds no secret.
        let engine = try EtcdEngine(location: location)
        defer { engine.close() }
        let cursor = try engine.snapshot().cursor(in: .all, reverse: false)
        var values = 0
        while try cursor.next() {
            let value = try cursor.value
            values += 1
            for needle in [EncryptedNotes.secret, EncryptedNotes.secretCity, EncryptedNotes.secretWord] {
                #expect(value.firstRange(of: Array(needle.utf8)) == nil, "\(needle) stored readable")
                #expect(cursor.key.firstRange(of: Array(needle.utf8)) == nil, "\(needle) in a key")
            }
        }
        #expect(values > 30)
    }

    @Test func keyNewWritesThirtyTwoRandomBytesOnlyItsOwnerReadsAndNeverOverwrites() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("new.key")
        let run = try buri("key", "new", path)
        expectSuccess(run)
        #expect(run.stdout.contains("--key-file \(path)"), "\(run)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.count == 32)
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        expectFailure(
            try buri("key", "new", path), status: 2, mentioning: ["'\(path)' already exists", "never overwrites"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        // Another key is another 32 bytes; either opens what it made.
        let second = sandbox.path("second.key")
        expectSuccess(try buri("key", "new", second))
        #expect(try Data(contentsOf: URL(fileURLWithPath: second)) != bytes)
        let db = sandbox.path("k.buri")
        expectSuccess(try buri(["import", db, "N", "--key", "id", "--key-file", path], stdin: #"{"id":"a"}"# + "\n"))
        #expect(try buri("keys", db, "N", "--key-file", path).lines == ["a"])
        expectFailure(try buri("keys", db, "N", "--key-file", second), status: 9, mentioning: ["does not open"])
    }
}
