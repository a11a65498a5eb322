import ArgumentParser
import Buri
import BuriTransfer
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `buri` command: looks inside any Buri database without the app's Swift types.
struct BuriCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "buri",
        abstract: "Inspect, query, export, import and maintain Buri databases.",
        discussion: """
            Works on any Buri database from its bucket catalog and self-describing CBOR records; \
            objects are shown as JSON. Read-only commands (info, buckets, keys, get, query, search, \
            export, check without --repair, stats, values, get-value) never create a database nor create or change a file in \
            its directory: they read a private snapshot of its files made in $TMPDIR (default /tmp), \
            which also lets them read a database another process has open (its last committed \
            state) or one on a full disk.

            An encrypted database opens only with its key, given to any command as a file: \
            --key-file FILE (exactly 32 random bytes; `buri key new FILE` makes one) or \
            --passphrase-file FILE, or the file named by BURI_KEY_FILE or BURI_PASSPHRASE_FILE when \
            neither option is given. A database import or restore creates is encrypted with the key \
            given. `buri export` of an encrypted database needs --decrypt (its output is plaintext). \
            `buri rekey DB --new-key-file FILE` changes the key without rewriting the data.

            Exit codes:
              0  success
              1  `buri check` found problems, `buri repair` could not recover
                 everything, or `buri export --skip-damaged` skipped records
              2  usage error: bad arguments (an unusable key file too), a query value or
                 expression that does not fit (a range on a private index too), `buri
                 export` of an encrypted database without --decrypt
              3  failure: I/O error, storage error, damaged data (`buri repair`
                 salvages damaged files), an etcd cluster that is unreachable or has
                 no quorum
              4  not a Buri database: missing path, other files, a newer format
              5  a command that writes found the database in use by another process
              6  not found: unknown bucket, index, key or named value
              7  invalid input: `buri import` data rejected (nothing was written)
              8  the database is encrypted: give --key-file or --passphrase-file
              9  the key given does not open the database: the wrong key, the other kind
                 of key, or a key for a database that is not encrypted
            """,
        version:
            "buri for Buri format \(BuriDatabase.supportedFormatVersion), export format \(ExportFormat.version), LevelDB \(LevelDBEngine.libraryVersion)",
        subcommands: [
            Info.self, Buckets.self, Keys.self, Get.self, QueryCommand.self, Search.self,
            Export.self, Import.self, Restore.self, Put.self, Delete.self, Drop.self, Check.self, Repair.self,
            Stats.self, Compact.self, Migrate.self, Values.self, GetValue.self, SetValue.self, Rekey.self,
            KeyCommand.self, Encrypt.self,
        ]
    )
}

@main
enum BuriMain {
    static func main() {
        // First, before any other thread exists: every thread blocks the signals that remove
        // this process's snapshots before ending it (Snapshots.swift).
        SnapshotCleanup.install()
        var command: any ParsableCommand
        let arguments: [String]
        do {
            // The raw argv bytes, checked and made unambiguous (Arguments.swift).
            arguments = try preparedArguments(rawCommandLine())
        } catch let error as ToolError {
            fail(error)
        } catch {
            fail(ToolError(.usage, String(describing: error)))
        }
        do {
            command = try BuriCommand.parseAsRoot(arguments)
        } catch {
            if BuriCommand.exitCode(for: error) == .success {
                BuriCommand.exit(withError: error)  // --help: prints to stdout, exits 0
            }
            usageFailure(error)
        }
        do {
            try command.run()
        } catch let error as ToolError {
            fail(error)
        } catch let error as BuriError {
            fail(ToolError(error))
        } catch let code as ExitCode {
            SnapshotCleanup.holdIfTerminating()
            exit(code.rawValue)
        } catch let error as ValidationError {
            fail(ToolError(.usage, error.message))
        } catch {
            if BuriCommand.exitCode(for: error) == .success {
                BuriCommand.exit(withError: error)  // `buri` alone: prints help, exits 0
            }
            fail(ToolError(.failure, String(describing: error)))
        }
        exit(ExitStatus.ok.rawValue)
    }

    /// Prints an ArgumentParser error as one line and exits with status 2.
    static func usageFailure(_ error: any Error) -> Never {
        var message = BuriCommand.message(for: error)
        let full = BuriCommand.fullMessage(for: error)
        if let start = full.range(of: "See '") {
            let rest = full[start.upperBound...]
            if let end = rest.firstIndex(of: "'") { message += " (see '\(rest[..<end])')" }
        } else {
            message += " (see 'buri --help')"
        }
        fail(ToolError(.usage, message))
    }

    static func fail(_ error: ToolError) -> Never {
        SnapshotCleanup.holdIfTerminating()
        let line = "buri: " + oneLine(error.message) + "\n" + (error.excerpt ?? "")
        writeAll(2, Array(line.utf8))
        exit(error.status.rawValue)
    }
}
