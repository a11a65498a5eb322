import ArgumentParser
import Buri
import BuriEncryption
import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The key of an encrypted database (docs/TOOL.md, "Encrypted databases"). A command is given it
// as a file — `--key-file FILE` (32 raw bytes) or `--passphrase-file FILE` — or through the
// environment (`BURI_KEY_FILE`, `BURI_PASSPHRASE_FILE`), never as an argument, which other users
// of the machine see (`ps`) and shells keep in their history. It is read once, when the
// arguments are checked, into ``ToolEncryption``, and every open or creation of a database takes
// its options from there (``ToolEncryption/options()``): one place, no copies.

/// The key the command was given (if any), and the options it opens and creates databases with.
enum ToolEncryption {
    /// A key read from its file, and where it came from, for messages.
    struct Given {
        let key: DatabaseKey
        /// "--key-file 'k'", "BURI_PASSPHRASE_FILE ('p')".
        let source: String
    }

    static let keyFileVariable = "BURI_KEY_FILE"
    static let passphraseFileVariable = "BURI_PASSPHRASE_FILE"

    /// Set once, by ``load(keyFile:passphraseFile:environment:)`` while the arguments are checked
    /// (before the command runs, on the main thread).
    nonisolated(unsafe) private(set) static var given: Given?

    /// Options with the key given, if any: a new database is created encrypted with it, an
    /// existing one opens only with its own key (and a plaintext one only without a key).
    static func options() -> BuriOptions {
        var options = BuriOptions()
        options.encryption = given?.key
        if let beginning {
            options.encryptsPlaintextDatabase = true
            options.plaintextIndexes = beginning
        }
        return options
    }

    /// Set by `buri encrypt` before it opens the database: a plaintext database opened with the
    /// key begins to be encrypted, these indexes kept plaintext.
    nonisolated(unsafe) static var beginning: [String]?

    /// Reads the key the options name, or else the environment's; no key if neither names one.
    /// An option wins over the environment; the two options together, or the two variables
    /// together (with no option), are refused. An empty variable counts as unset.
    ///
    /// - Throws: `ValidationError` (exit 2) for both options at once, an empty file name, and a
    ///   key file that cannot be used (missing, unreadable, not 32 bytes, an empty passphrase),
    ///   naming the file.
    /// Makes `key` the key databases are opened with (`buri rekey`, trying the new key).
    static func use(_ key: Given) { given = key }

    static func load(
        keyFile: String?, passphraseFile: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        given = nil
        if keyFile != nil, passphraseFile != nil {
            throw ValidationError(
                "--key-file and --passphrase-file both give the database's key; give one (a database opens only with the kind of key it was created with)"
            )
        }
        if keyFile == "" { throw ValidationError("--key-file needs the name of a file of 32 random bytes") }
        if passphraseFile == "" {
            throw ValidationError("--passphrase-file needs the name of a file holding the passphrase")
        }
        let (path, isPassphrase, source): (String, Bool, String)
        if let keyFile {
            (path, isPassphrase, source) = (keyFile, false, "--key-file '\(keyFile)'")
        } else if let passphraseFile {
            (path, isPassphrase, source) = (passphraseFile, true, "--passphrase-file '\(passphraseFile)'")
        } else {
            let keyVariable = environment[keyFileVariable].flatMap { $0.isEmpty ? nil : $0 }
            let passphraseVariable = environment[passphraseFileVariable].flatMap { $0.isEmpty ? nil : $0 }
            switch (keyVariable, passphraseVariable) {
            case (nil, nil):
                return
            case (.some, .some):
                throw ValidationError(
                    "\(keyFileVariable) and \(passphraseFileVariable) are both set, and each gives the database's key; unset one, or give --key-file or --passphrase-file, which wins over both"
                )
            case (let file?, nil):
                (path, isPassphrase, source) = (file, false, "\(keyFileVariable) ('\(file)')")
            case (nil, let file?):
                (path, isPassphrase, source) = (file, true, "\(passphraseFileVariable) ('\(file)')")
            }
        }
        do {
            let key = isPassphrase ? try DatabaseKey(passphraseFile: path) : try DatabaseKey(contentsOfFile: path)
            given = Given(key: key, source: source)
        } catch {
            // The library's message names the file; one named by the environment says so.
            let named = source.hasPrefix("--") ? "" : " (named by \(source.prefix { $0 != " " }))"
            throw ValidationError(error.description + named)
        }
    }

    /// The message for an encrypted database opened without a key (exit 8).
    static func keyRequiredMessage(_ path: String) -> String {
        "the database at '\(path)' is encrypted: give its key with --key-file FILE (a file of 32 random bytes) or --passphrase-file FILE, "
            + "or name the file in \(keyFileVariable) or \(passphraseFileVariable); nothing was read or written"
    }

    /// The message for a key that does not open the database (exit 9): `reason` is the library's
    /// (the wrong key, or the other kind of key).
    static func wrongKeyMessage(_ path: String, reason: String) -> String {
        "the key given (\(given?.source ?? "no key")) does not open the encrypted database at '\(path)': \(reason); nothing was read or written"
    }

    /// The message for a key given for a plaintext database (exit 9).
    static func notEncryptedMessage(_ path: String) -> String {
        var unset = ""
        if let source = given?.source, !source.hasPrefix("--") {
            unset = " (unset \(source.prefix { $0 != " " }))"
        }
        return
            "a key was given (\(given?.source ?? "none")), but the database at '\(path)' is not encrypted: run the command without a key\(unset); "
            + "to encrypt it where it is, run `buri encrypt \(path) --key-file FILE` (with --plaintext-index for each numeric index); nothing was written"
    }
}

/// The message for a numeric index an encrypted database refuses (exit 7): said with the tool's
/// option rather than the Swift declaration.
func undeclaredPlaintextMessage(bucket: String, index: String) -> String {
    "index '\(index)' of bucket '\(bucket)' has a numeric component, whose values an encrypted database stores in their order, "
        + "readable in its files, and only for an index declared plaintext: give --plaintext-index \(index) to accept that "
        + "(buri import, restore and encrypt), or leave the index out; nothing was written"
}

/// The message for an order a private index cannot give (exit 2): said with the tool's options.
func privateIndexMessage(bucket: String, index: String, operation: String) -> String {
    "index '\(index)' of bucket '\(bucket)' is private in this encrypted database: its values are stored as keyed tokens, "
        + "which match exactly but have no order, so it cannot answer \(operation); "
        + (operation == BuriError.textPrefixOperation
            ? "search it for whole words and phrases"
            : "query it for exact values (--equals, --in, INDEX:VALUE)")
        + ", or make the bucket anew with the index declared plaintext (--plaintext-index "
        + "with buri import or restore), which leaves its values readable in the files"
}

// MARK: - encrypt

/// `buri encrypt DB --key-file FILE`: encrypts a plaintext database where it is, online.
struct Encrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a plaintext database where it is, with the key given (or finish encrypting one).",
        discussion: """
            Begins in one commit (the encryption header; from then on the database needs the key and \
            every write is sealed), then copies each bucket into a sealed generation, --batch-size \
            objects per commit, replacing private index values by keyed tokens, seals the named \
            values, and compacts away the plaintext. Applications may go on using the database \
            meanwhile (with the key): every object reads the same throughout. If the command is \
            stopped, run it again with the same key: it goes on where it stopped. A numeric index \
            must be kept readable with --plaintext-index NAME (exit 7 otherwise, before anything is \
            written); any binary or text index may be.

            Examples:
              buri key new notes.key && buri encrypt notes.buri --key-file notes.key --plaintext-index day
              BURI_KEY_FILE=notes.key buri encrypt notes.buri    # finish an interrupted run
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Option(
        name: .customLong("plaintext-index"),
        help: ArgumentHelp(
            "An index (by name, in every bucket) whose values stay readable in the files: required for a numeric index. Repeat for several.",
            valueName: "name"))
    var plaintextIndexes: [String] = []

    @Option(parsing: .unconditional, help: ArgumentHelp("Objects copied per commit (default 1000).", valueName: "n"))
    var batchSize: Int = 1000

    func validate() throws {
        guard ToolEncryption.given != nil else {
            throw ValidationError(
                "buri encrypt needs the key to encrypt with: --key-file FILE (`buri key new FILE` makes one) or --passphrase-file FILE"
            )
        }
        guard batchSize >= 1 else {
            throw ValidationError("--batch-size takes a positive number of objects, not \(batchSize)")
        }
    }

    func run() throws {
        ToolEncryption.beginning = plaintextIndexes
        let db = try target.open()
        defer { db.close() }
        let progress = Progress()
        let wasBeing = db.isBeingEncrypted
        /// Objects an earlier, killed run had sealed, kept per bucket.
        var kept: [String: Int] = [:]
        /// Objects of the bucket under way written by this run (kept ones are not).
        var written = 0
        try mapErrors(path: target.database) {
            try db.finishEncryption(batchSize: batchSize) { report in
                if let bucket = report.bucket {
                    if report.kept > 0 { kept[bucket] = report.kept }
                    if report.copied == 0 { written = 0 }
                    // A chunk is a commit: a report of objects kept only wrote nothing.
                    if report.copied - report.kept > written {
                        written = report.copied - report.kept
                        TestKillHook.chunkStored()
                    }
                    progress.update(
                        "sealing bucket \(report.bucketsDone + 1) of \(report.bucketsTotal) (\(bucket)): \(report.copied) objects…"
                    )
                } else {
                    progress.update("sealing named values…")
                }
            }
        }
        progress.finish()
        let out = Output.standardOutput()
        for (bucket, count) in kept.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
            try out.line("bucket \(bucket): \(count) objects sealed by an earlier run were kept, not sealed again")
        }
        try out.line(
            wasBeing
                ? "encrypted \(target.database): every record and named value is sealed; open it with this key from now on"
                : "\(target.database) is already encrypted with this key; nothing to do")
        try out.flush()
    }
}

// MARK: - key new

/// `buri key`: key files for encrypted databases.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Make key files for encrypted databases (buri key new FILE).",
        subcommands: [NewKey.self]
    )
}

/// `buri key new FILE`: 32 random bytes in a new file only its owner may read.
struct NewKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Write a new random 256-bit key (32 bytes) to a new file, readable by its owner only (mode 0600).",
        discussion: """
            The bytes come from the system's secure random number generator. An existing file is never \
            overwritten (exit 2): a key that encrypts a database cannot be made again. Keep a copy of \
            the file somewhere safe: without it, a database encrypted with it cannot be opened by anyone.

            Example: buri key new notes.key && buri import --key-file notes.key notes.buri Note --key id notes.jsonl
            """
    )

    @Argument(help: ArgumentHelp("The key file to create.", valueName: "file"))
    var file: String

    func validate() throws {
        if file.isEmpty { throw ValidationError("the key file's name is empty; give a path such as notes.key") }
    }

    func run() throws {
        // O_EXCL: never an existing file, nor through a symbolic link; 0600 from the start.
        let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            if code == EEXIST {
                throw ToolError(
                    .usage,
                    "'\(file)' already exists; buri key new never overwrites a file (it may hold the key of a database): give a new path"
                )
            }
            throw ToolError(.failure, "cannot create the key file '\(file)': \(String(cString: strerror(code)))")
        }
        // Its own key's bytes: the same generator `DatabaseKey.random()` draws from.
        let bytes = DatabaseKey.random().rawKeyBytes ?? []
        let written = bytes.count == 32 && writeAll(descriptor, bytes) && fsync(descriptor) == 0
        let code = errno
        let closed = close(descriptor) == 0
        guard written, closed else {
            try? FileManager.default.removeItem(atPath: file)
            throw ToolError(.failure, "cannot write the key file '\(file)': \(String(cString: strerror(code)))")
        }
        let out = Output.standardOutput()
        try out.line(
            "wrote a new 256-bit key to \(file) (mode 0600); give it as --key-file \(file), and keep a copy in a safe place"
        )
        try out.flush()
    }
}

// MARK: - rekey

/// `buri rekey DB --new-key-file FILE`: changes the key of an encrypted database without rewriting
/// its data (``BuriDatabase/changeEncryptionKey(to:)``); with `--rotate-data-key`, also (or only)
/// seals every value anew under a new record key (``BuriDatabase/rotateDataKey(batchSize:progress:)``).
struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Change the key of an encrypted database (one commit, whatever its size), or rotate its data key (every value sealed anew).",
        discussion: """
            The current key is given as for any command (--key-file, --passphrase-file, or the \
            environment); the new one as a file too, with exactly one of --new-key-file (32 random \
            bytes; `buri key new FILE` makes one) or --new-passphrase-file, never on the command \
            line. The data is not rewritten: the database's data keys are wrapped anew under the new \
            key in its encryption header, the one thing written, so the change takes the same time \
            whatever the size of the database. From then on the database opens only with the new \
            key; the old one gets exit 9.

            The old key keeps opening copies of the old header: an old backup, or a copy of the \
            files made before the change. After a key is compromised, copy the database into a new \
            one instead, which gets new data keys: `buri export DB --decrypt --key-file OLD -o \
            dump.jsonl`, then `buri restore --key-file NEW NEWDB dump.jsonl` (docs/SECURITY.md).

            --rotate-data-key (with or without a new key; after the key change when both are \
            given) seals every record and named value anew under a new random record key, \
            --batch-size values per commit, while applications go on using the database, then \
            drops the old record key from the header and compacts: old copies of the files no \
            longer open with any key. The key of private index tokens is not rotated \
            (docs/SECURITY.md). If it is stopped, run it again with the key the database opens \
            with: it goes on where it stopped.

            Examples:
              buri key new new.key && buri rekey notes.buri --key-file old.key --new-key-file new.key
              buri rekey notes.buri --key-file notes.key --rotate-data-key
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Option(
        name: .customLong("new-key-file"),
        help: ArgumentHelp(
            "The new key: a file of exactly 32 random bytes (`buri key new FILE` makes one).", valueName: "file"))
    var newKeyFile: String?

    @Option(
        name: .customLong("new-passphrase-file"),
        help: ArgumentHelp(
            "The new passphrase, in a text file (one trailing line break is not part of it).", valueName: "file"))
    var newPassphraseFile: String?

    @Flag(
        name: .customLong("rotate-data-key"),
        help: "Seal every value anew under a new record key, and drop the old one (after the key change, if any).")
    var rotateDataKey = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Values sealed anew per commit with --rotate-data-key (default 1000).", valueName: "n"))
    var batchSize: Int = 1000

    /// The new key and where it came from, read while the arguments are checked.
    private(set) var newKey: ToolEncryption.Given?

    enum CodingKeys: String, CodingKey {
        case target, newKeyFile, newPassphraseFile, rotateDataKey, batchSize
    }

    mutating func validate() throws {
        guard batchSize >= 1 else {
            throw ValidationError("--batch-size takes a positive number of values, not \(batchSize)")
        }
        switch (newKeyFile, newPassphraseFile) {
        case (nil, nil):
            if rotateDataKey { return }
            throw ValidationError(
                "give the new key with --new-key-file FILE (32 random bytes; `buri key new FILE` makes one) or --new-passphrase-file FILE, or rotate the data key with --rotate-data-key"
            )
        case (.some, .some):
            throw ValidationError(
                "--new-key-file and --new-passphrase-file both give the new key; give one")
        case (let file?, nil):
            if file.isEmpty { throw ValidationError("--new-key-file needs the name of a file of 32 random bytes") }
            do {
                newKey = ToolEncryption.Given(
                    key: try DatabaseKey(contentsOfFile: file), source: "--new-key-file '\(file)'")
            } catch {
                throw ValidationError(error.description)
            }
        case (nil, let file?):
            if file.isEmpty {
                throw ValidationError("--new-passphrase-file needs the name of a file holding the passphrase")
            }
            do {
                newKey = ToolEncryption.Given(
                    key: try DatabaseKey(passphraseFile: file), source: "--new-passphrase-file '\(file)'")
            } catch {
                throw ValidationError(error.description)
            }
        }
    }

    func run() throws {
        guard let newKey else {
            let db = try target.open()
            defer { db.close() }
            try requireEncrypted(db)
            try rotate(db)
            return
        }
        let db: BuriDatabase
        do {
            db = try target.open()
        } catch let refused as ToolError where refused.status == .wrongKey {
            // Run again after it changed the key (a script retrying after a kill): the database
            // opens with the new key, so there is nothing left to do.
            let old = ToolEncryption.given
            ToolEncryption.use(newKey)
            defer { if let old { ToolEncryption.use(old) } }
            guard let reopened = try? target.open() else { throw refused }
            defer { reopened.close() }
            try report(
                "\(target.database) already opens with the new key (\(newKey.source)), not with the one given: its key was changed before"
                    + (rotateDataKey ? "" : "; nothing to do"), thenRotate: reopened)
            return
        }
        defer { db.close() }
        try requireEncrypted(db)
        try mapErrors(path: target.database) { try db.changeEncryptionKey(to: newKey.key) }
        try report(
            "changed the key of \(target.database): it opens only with the new key (\(newKey.source)) from now on"
                + (rotateDataKey ? "" : "; its data was not rewritten"), thenRotate: db)
    }

    /// Prints `line`, then rotates the data key of `db` if `--rotate-data-key` was given.
    private func report(_ line: String, thenRotate db: BuriDatabase) throws {
        let out = Output.standardOutput()
        try out.line(line)
        try out.flush()
        if rotateDataKey { try rotate(db) }
    }

    private func requireEncrypted(_ db: BuriDatabase) throws {
        guard db.isEncrypted else {
            throw ToolError(
                .wrongKey,
                "the database at '\(target.database)' is not encrypted, so it has no key to change; to encrypt it where it is, run `buri encrypt \(target.database) --key-file FILE` (with --plaintext-index for each numeric index); nothing was written"
            )
        }
    }

    /// Seals every value of `db` anew under a new record key (or finishes a rotation under way).
    private func rotate(_ db: BuriDatabase) throws {
        let progress = Progress()
        let before = db.dataKeyGenerations
        try mapErrors(path: target.database) {
            try db.rotateDataKey(batchSize: batchSize) { report in
                if report.resealed > 0 { TestKillHook.chunkStored() }
                progress.update(
                    "sealing under data key generation \(report.generations.current): \(report.resealed) values sealed anew, \(report.examined) looked at…"
                )
            }
        }
        progress.finish()
        let out = Output.standardOutput()
        let generation = db.dataKeyGenerations?.current ?? 0
        try out.line(
            before?.retiring != nil
                ? "finished rotating the data key of \(target.database): every value is sealed under generation \(generation); the old record key is gone"
                : "rotated the data key of \(target.database): every value is sealed under generation \(generation); the old record key is gone"
        )
        try out.flush()
    }
}
