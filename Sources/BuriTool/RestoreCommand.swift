import ArgumentParser
import Buri
import BuriTransfer
import Foundation

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Create a database from a whole `buri export`: every bucket with its key field and indexes, every object.",
        discussion: """
            The export must carry schema lines (format 3 to 7, written by this buri): each bucket is \
            recreated with its indexes exactly as they were — kinds, fields, field forms, unique, \
            multi-valued, versions — so the restored database answers every query the same, and \
            exporting it again gives the same bytes. Every member of every schema line and record is \
            checked; a wrong one is refused, naming its line and member (docs/FORMAT.md §19). The \
            entries of indexes whose values only Swift code computes (declared without `field:`, or \
            `.computed`) are restored from the values format 4 records carry; a format 3 export of \
            such a bucket is refused, naming the index. The database must be new (a missing path, an \
            empty directory, or a database without buckets or named values). The export is read line by line in bounded memory (a pipe is copied to a \
            temporary file first): each bucket is staged under a fresh, unpublished id as its records \
            come, and one commit publishes every bucket, and the named values of a format 5 export, at once. On any error no database is left \
            behind (nor, in a database without buckets, anything staged); if the process is killed, the new database holds no bucket (the next \
            command that writes to it deletes what was staged): restore into it again. With --progress (or on a \
            terminal) reading and publishing show their total, percentage, rate and ETA.

            With --key-file or --passphrase-file (or BURI_KEY_FILE, BURI_PASSPHRASE_FILE) the new \
            database is encrypted with that key: indexes the export declares plaintext (and those \
            named with --plaintext-index) store readable values, the others keyed tokens; a numeric \
            index must be declared plaintext. --encrypt makes the key required: without one the \
            restore stops before it writes anything, so a key file left out by mistake never gives \
            a plaintext copy.

            Examples:
              buri export people.buri -o dump.jsonl && buri restore copy.buri dump.jsonl
              buri restore --encrypt --key-file people.key --plaintext-index age secret.buri dump.jsonl
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: ArgumentHelp("The export to restore; '-' or nothing reads standard input.", valueName: "file"))
    var file: String?

    @Option(
        name: .customLong("plaintext-index"),
        help: ArgumentHelp(
            "Declare every index named NAME (in any bucket of the export) plaintext, as the export's \"plaintext\": true does: in an encrypted database its values are stored readable, in their order (an encrypted database refuses a numeric index otherwise). Repeatable.",
            valueName: "name"))
    var plaintextIndexes: [String] = []

    @Flag(
        name: .customLong("encrypt"),
        help: "Require the new database to be encrypted: refuse (exit 2, nothing written) unless a key is given.")
    var encrypt = false

    @Flag(name: .customLong("progress"), help: "Show progress on standard error even when it is not a terminal.")
    var showProgress = false

    @Flag(name: .customLong("debug-peak-memory"), help: .hidden)
    var debugPeakMemory = false

    func validate() throws {
        if plaintextIndexes.contains("") {
            throw ValidationError("--plaintext-index needs an index name, such as --plaintext-index age")
        }
    }

    func run() throws {
        let path = target.database
        if encrypt, ToolEncryption.given == nil {
            throw ToolError(
                .usage,
                "--encrypt needs the new database's key: give --key-file FILE (`buri key new FILE` makes one) or --passphrase-file FILE, or name one in BURI_KEY_FILE or BURI_PASSPHRASE_FILE; nothing was written"
            )
        }
        let state = try pathState(path)
        /// A database without buckets that was there before (one a killed restore left): restored
        /// into, and never removed.
        var existing: BuriDatabase?
        switch state {
        case .missing:
            if let problem = creationProblem(path) { throw ToolError(.failure, problem) }
        case .emptyDirectory:
            break
        case .database:
            existing = try openEmptyDatabase(path)
        case .file, .otherDirectory, .damaged:
            throw ToolError(
                .notADatabase,
                "'\(path)' exists and is not empty; restore creates a new database: give a new path or an empty directory"
            )
        }
        let progress = Progress(forced: showProgress)
        defer { progress.finish() }
        // A new database is created once the export has shown it is one (its first schema line).
        var created: BuriDatabase?
        let destination: RestoreDestination =
            existing.map { .database($0) }
            ?? .created {
                let db = try createDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
                created = db
                return db
            }
        let report: RestoreReport
        do {
            report = try BuriDatabase.restore(
                from: transferInput(file), into: destination, plaintextIndexes: plaintextIndexes,
                progress: progress.handler(),
                chunkCommitted: TestKillHook.chunkStored
            ).report
        } catch {
            existing?.close()
            if let created {
                created.close()
                // Only a database this restore created is removed (one another process created
                // meanwhile made the creation fail, leaving none).
                if !hasFiles(path) {
                    removeCreatedEtcdDatabase(path)
                } else if state == .emptyDirectory {
                    let manager = FileManager.default
                    for name in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
                        try? manager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
                    }
                } else {
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
            throw toolError(error, path: path)
        }
        (existing ?? created)?.close()
        progress.finish()
        if debugPeakMemory {
            printPeakMemory(newlineSearchBytes: report.newlineSearchBytes, inputBytes: report.inputBytes)
        }
        let buckets = report.buckets.count
        let out = Output.standardOutput()
        try out.line(
            "restored \(buckets) bucket\(buckets == 1 ? "" : "s") and \(report.objects) object\(report.objects == 1 ? "" : "s")"
                + (report.values == 0 ? "" : " and \(report.values) named value\(report.values == 1 ? "" : "s")")
                + " into \(path)"
        )
        try out.flush()
    }

    /// Opens the database at `path` if it has no buckets (a restore killed before it published
    /// leaves such a database, and restoring into it again must work); refuses one with buckets.
    func openEmptyDatabase(_ path: String) throws -> BuriDatabase {
        var options = ToolEncryption.options()
        options.syncWrites = true
        // Created if the directory holds a LevelDB store without a single key (a restore killed
        // before it wrote the header); refused, as before, if it holds anything that is not Buri's.
        options.createIfMissing = true
        let database =
            !hasFiles(path)
            ? try openExistingEtcd(path, purges: true)
            : try waitingForLock(target.wait) { try openLocation(path, options: options) }
        // What a killed restore staged is deleted first (and its space given back).
        _ = finishingPurges(database, true)
        let names = try mapErrors(path: path) { try database.bucketNames() }
        guard names.isEmpty else {
            database.close()
            throw ToolError(
                .usage,
                "'\(path)' is already a database with \(names.count) bucket\(names.count == 1 ? "" : "s"); restore creates a new one (or fills one without buckets): give a new path (to add one bucket to it, use `buri import \(path) BUCKET`)"
            )
        }
        return database
    }

    /// Creates the new database (once the export has shown it is one). A failed attempt (a full
    /// disk) leaves nothing behind, so that restoring again finds the path as it was.
    func createDatabase(_ path: String, wasEmptyDirectory: Bool) throws -> BuriDatabase {
        if !hasFiles(path) { return try createLocation(path) }
        do {
            return try waitingForLock(target.wait) { try createLocation(path) }
        } catch {
            removeFailedCreation(path, error: error, wasEmptyDirectory: wasEmptyDirectory)
            throw error
        }
    }
}
