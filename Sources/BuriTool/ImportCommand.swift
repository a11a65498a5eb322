import ArgumentParser
import Buri
import BuriTransfer
import Foundation

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or extend a bucket from JSON Lines, atomically and in bounded memory.",
        discussion: """
            The input is either the output of `buri export` (its first line is the header \
            ["buri-export",3] or 4 (or 2, from an older buri); each further line is a record \
            {"bucket","key","object"} in the exact JSON form, or a bucket's schema line, every member \
            checked (a wrong one is refused, naming line and member); records of \
            other buckets are skipped; a new bucket gets the indexes of its schema line, and the index \
            values format 4 records carry) or plain JSON Lines, one object per line, \
            each stored as it is: a plain object is never taken for an export record. A plain object's \
            key is its --key field: a string, or an integer stored as its decimal text. An export \
            record's key must agree with its object's key field, if the object has one.

            Numbers are stored exactly or refused: integers in -2^64 ... 2^64-1, decimals only if a \
            double holds exactly the number written (1e400, 1e-400 and 9007199254740993.0 are \
            refused, naming the nearest double). Repeated member names are refused.

            Index values come from the object's fields: FIELD is a top-level name or a dotted path \
            into nested objects (city=address.city), in which \\. is a dot inside a name (v=v1\\.2 \
            reads the top-level "v1.2") and \\\\ a backslash; a value on the way that is not an object \
            is refused. Strings for binary indexes, \
            numbers for numeric ones (exactly: an Int64, a UInt64 or a double); an array gives one \
            entry per distinct element (a multi-valued index); a missing or null field gives no \
            entry. A --text-index takes a string or an array of strings and keeps one entry per \
            word, with its positions, for `buri search`. A date field (one a Swift Date property's index reads, or one named with --date) \
            takes seconds since 1970 (in plain objects and export records alike) and is stored \
            as a date, as the Swift type stores it; a \
            numeric index over a --date field indexes it as a date. A new bucket gets the indexes \
            named here; an existing one keeps its own, and the options, if given, must match them. An index whose values Swift code \
            computes, or whose declaration names no field, cannot be computed here: an existing bucket \
            with one is refused, naming the index (a new bucket made from a format 4 export takes \
            the values its records carry).

            The import is atomic with bounded memory: the input is read line by line (never held \
            whole; a pipe is copied to a temporary file first; a line of any length is read in time \
            linear in its length, memory growing with the longest line), the bucket's objects and the new ones \
            are stored in chunks under a fresh, unpublished bucket id, and one catalog commit \
            publishes them. On any error (a bad line, even the last one; a unique index violated, \
            named with its line, key, value and the key holding it) the \
            stage is deleted before the command ends and the database is left exactly as it was (a database the import would \
            have created is not created); if the process is killed, the next command that writes to \
            the database deletes the stage (and gives its space back); running the same import again works. \
            A new bucket's input is checked in a first pass before anything is written, and the \
            bucket appears only with the publishing commit (a killed import leaves no empty bucket). A key given \
            twice: the last line wins, and the result counts objects, not lines (it says how many \
            lines replaced an object of the same key). On a terminal (or with --progress) each phase shows its \
            total, percentage, rate and ETA: checking, copying existing objects, reading and \
            storing, publishing (purging the stage on failure).

            With --key-file or --passphrase-file (or BURI_KEY_FILE, BURI_PASSPHRASE_FILE), a new \
            database is created encrypted with that key; an existing encrypted one needs its key, as \
            for every command. In an encrypted database every index stores its values as keyed tokens \
            (private: exact matches only) unless declared plaintext with --plaintext-index NAME, which \
            a numeric index must be.

            Examples:
              buri import people.buri Person --key objectId --binary-index locale --numeric-index age people.jsonl
              buri import notes.buri Note --key id --numeric-index day --plaintext-index day --key-file notes.key notes.jsonl
              buri export old.buri Person | buri import new.buri Person --key objectId --binary-index locale
              buri import notes.buri Note --key id --text-index body --text-index title=meta.title notes.jsonl
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to create or extend.")
    var bucket: String

    @Option(
        help: ArgumentHelp(
            "The field holding each plain object's key (a string, or an integer stored as its decimal text). Defaults to the bucket's recorded key field.",
            valueName: "field"))
    var key: String?

    @Option(
        name: .customLong("binary-index"),
        help: ArgumentHelp(
            "Keep binary index NAME over string field FIELD (default: NAME); a dotted FIELD (address.city) reads a nested field, \\. is a dot inside a name. Repeatable.",
            valueName: "name[=field]"))
    var binaryIndexes: [String] = []

    @Option(
        name: .customLong("numeric-index"),
        help: ArgumentHelp(
            "Keep numeric index NAME over number field FIELD (default: NAME); a dotted FIELD (address.zip) reads a nested field, \\. is a dot inside a name. Repeatable.",
            valueName: "name[=field]"))
    var numericIndexes: [String] = []

    @Option(
        name: .customLong("text-index"),
        help: ArgumentHelp(
            "Keep full-text index NAME over text field FIELD (default: NAME; a string or an array of strings), as a Swift .text declaration does (tokenizer 1, no stop words), for `buri search`; a dotted FIELD reads a nested field. Repeatable.",
            valueName: "name[=field]"))
    var textIndexes: [String] = []

    @Option(
        name: .customLong("plaintext-index"),
        help: ArgumentHelp(
            "Declare index NAME (of the new bucket: one given here, or of the export's schema line) plaintext: in an encrypted database its values are stored readable, in their order, instead of as keyed tokens (an encrypted database refuses a numeric index otherwise). Repeatable.",
            valueName: "name"))
    var plaintextIndexes: [String] = []

    @Option(
        name: .customLong("date"),
        help: ArgumentHelp(
            "Field FIELD holds a date as seconds since 1970: store a number there as a date (as a Swift Date property is stored), and index it as one. Repeatable.",
            valueName: "field"))
    var dateFields: [String] = []

    @Option(
        name: .customLong("chunk-size"), parsing: .unconditional,
        help: ArgumentHelp(
            "Store the objects straight into the bucket in commits of N objects each, instead of staging them and publishing them in one commit. NOT atomic: an import that fails midway leaves the chunks before the failure stored. (A staged import fits etcd's transaction limits by itself.)",
            valueName: "n"))
    var chunkSize: Int?

    @Argument(
        help: ArgumentHelp("The JSON Lines file to read; '-' or nothing reads standard input.", valueName: "file"))
    var file: String?

    @Flag(name: .customLong("progress"), help: "Show progress on standard error even when it is not a terminal.")
    var showProgress = false

    @Flag(name: .customLong("debug-peak-memory"), help: .hidden)
    var debugPeakMemory = false

    /// The index options, checked.
    func indexOptions() throws -> [ImportOptions.Index] {
        var result: [ImportOptions.Index] = []
        let given: [(specs: [String], kind: IndexKind, text: Bool)] = [
            (binaryIndexes, .binary, false), (numericIndexes, .numeric, false), (textIndexes, .binary, true),
        ]
        for (specs, kind, text) in given {
            for spec in specs {
                let parts = spec.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let name = parts[0]
                let field = parts.count > 1 ? parts[1] : name
                let option = "--\(text ? "text" : kind.rawValue)-index '\(spec)'"
                if name.isEmpty { throw ValidationError("\(option) has no index name; write NAME or NAME=FIELD") }
                if field.isEmpty { throw ValidationError("\(option) has no field after '='; write NAME or NAME=FIELD") }
                if result.contains(where: { $0.name.utf8.elementsEqual(name.utf8) }) {
                    throw ValidationError(
                        "index '\(name)' is given twice; give each index once, as --binary-index, --numeric-index or --text-index"
                    )
                }
                if case .failure(let error) = IndexDefinition.parseFieldPath(field) {
                    throw ValidationError("\(option): \(error.description) (write a key with a dot in it as 'v1\\.2')")
                }
                result.append(
                    try mapTransferErrors(path: target.database) {
                        text ? try .init(name: name, textField: field) : try .init(name: name, kind: kind, field: field)
                    })
            }
        }
        return result
    }

    func validate() throws {
        if bucket.isEmpty { throw ValidationError("the bucket name is empty; give a name such as Person") }
        if let key, key.isEmpty { throw ValidationError("--key needs a field name, such as --key id") }
        if dateFields.contains("") { throw ValidationError("--date needs a field name, such as --date due") }
        if let nested = dateFields.first(where: { (try? IndexDefinition.parseFieldPath($0).get().count) != 1 }) {
            throw ValidationError(
                "--date '\(nested)': --date names a top-level field (a dot inside its name is written '\\.'); nested date fields are not supported"
            )
        }
        if let chunkSize, chunkSize < 1 {
            throw ValidationError("--chunk-size needs a positive number of objects, such as --chunk-size 500")
        }
        if plaintextIndexes.contains("") {
            throw ValidationError("--plaintext-index needs an index name, such as --plaintext-index age")
        }
        _ = try indexOptions()
    }

    func run() throws {
        let path = target.database
        let state = try pathState(path)
        switch state {
        case .file:
            throw ToolError(
                .notADatabase,
                "'\(path)' is a file, not a database; give the directory of a Buri database or a new path")
        case .otherDirectory:
            try refuseIfBeingCreated(path)
            throw ToolError(
                .notADatabase,
                "'\(path)' is not a Buri database and is not empty; import into a Buri database, a new path or an empty directory"
            )
        case .damaged:
            try refuseIfBeingCreated(path)
            throw ToolError(.failure, damagedWithoutCurrentMessage(path))
        case .missing:
            if let problem = creationProblem(path) { throw ToolError(.failure, problem) }
        case .emptyDirectory, .database:
            break
        }
        let options = ImportOptions(
            keyField: key, indexes: try indexOptions(), dateFields: dateFields, chunkSize: chunkSize,
            plaintextIndexes: plaintextIndexes)
        // An existing database is opened (and locked) first, so the checks see its catalog.
        var db: BuriDatabase? = state == .database ? try openForLoading(target) : nil
        defer { db?.close() }
        let existing = try db.flatMap { db in try mapErrors(path: path) { try db.bucketInfo(named: bucket) } }
        let progress = Progress(forced: showProgress)
        defer { progress.finish() }
        let show = progress.handler(storing: chunkSize.map { "storing in chunks of \($0)" } ?? "reading and storing")
        // The options are checked against the bucket before the input is opened.
        let load = try mapTransferErrors(path: path) {
            try JSONLinesImport(from: transferInput(file), into: bucket, existing: existing, options: options)
        }
        defer { load.close() }
        // A new bucket's definition (multi-valued indexes, the schema line's indexes) and the
        // non-atomic --chunk-size mode need every line checked before anything is written: a
        // first pass reads the input without keeping it.
        if load.needsCheck { try mapTransferErrors(path: path) { try load.check(progress: show) } }

        // Nothing is written before this point.
        let created = db == nil
        if created {
            if !hasFiles(path) {
                db = try createLocation(path)
            } else {
                do {
                    db = try waitingForLock(target.wait) { try createLocation(path) }
                } catch let error as ToolError where error.message.contains("error_if_exists") {
                    // Another import created it since this one looked: the same race as the lock.
                    throw ToolError(
                        .inUse,
                        "another process created the database at '\(path)' while this import was reading its input; nothing was written: run the import again to add to it"
                    )
                } catch {
                    // A full disk met while creating it: nothing is left behind, so that running
                    // the import again (as the message advises) finds the path as it was.
                    removeFailedCreation(path, error: error, wasEmptyDirectory: state == .emptyDirectory)
                    throw error
                }
            }
        }
        guard let db else { return }
        let report: ImportReport
        do throws(TransferError) {
            report = try load.store(into: db, progress: show, chunkCommitted: TestKillHook.chunkStored)
            progress.finish()
        } catch {
            progress.finish()
            let failure = toolError(error, path: path)
            // A database this import created is removed whole below, and a stage a full disk kept
            // is reported with the error (or removed by a fresh handle): no note for those.
            let diskFull = (failure as? ToolError)?.isDiskFull == true
            if let discard = error.stageDiscardError, !created, !diskFull {
                writeAll(
                    2,
                    Array(
                        "buri: note: the import's stage could not be deleted now (\(oneLine(ToolError(discard, path: path).message))); it is marked for purging, and the next command that writes to \(path) deletes it\n"
                            .utf8))
            }
            if created {
                db.close()
                if !hasFiles(path) {
                    // The database this import created (its header only): gone again.
                    removeCreatedEtcdDatabase(path)
                } else {
                    removeCreatedDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
                }
            } else if error.stageBegun, let full = failure as? ToolError, full.isDiskFull {
                // The handle that met the full disk writes no more (not even the stage's purge
                // marker): a new one removes the stage if the disk now has room for it.
                db.close()
                if !removeStageAfterDiskFull(path) {
                    throw ToolError(full.status, full.message + stageLeftNote(path), diskFull: true)
                }
            }
            throw failure
        }
        if debugPeakMemory {
            printPeakMemory(newlineSearchBytes: report.newlineSearchBytes, inputBytes: report.inputBytes)
        }
        let out = Output.standardOutput()
        try out.line(
            Self.summary(
                lines: report.objectsRead, before: report.objectsBefore, after: report.objectsAfter, bucket: bucket,
                path: path, isNew: existing == nil))
        try out.flush()
        if !report.skippedBuckets.isEmpty {
            let skipped = report.skippedBuckets
            let list = skipped.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                .map { "'\($0)' (\(skipped[$0] ?? 0))" }.joined(separator: ", ")
            writeAll(2, Array("buri: note: skipped export records of other buckets: \(list)\n".utf8))
        }
        for index in report.unfilledIndexes {
            let fields = (index.componentPaths ?? []).map { "'\(IndexDefinition.fieldPathText($0))'" }
                .joined(separator: ", ")
            writeAll(
                2,
                Array(
                    "buri: warning: index '\(index.name)' has no entries: none of the \(report.objectsRead) objects has a value in field \(fields) (a name is a top-level field, a dotted path such as address.city a nested one; check the name)\n"
                        .utf8))
        }
    }

    /// What the import stored, honestly counted: `lines` objects read, into a bucket that held
    /// `before` objects and holds `after`. A line whose key an earlier line (or the bucket) had
    /// replaced that object: the import says so instead of counting it as one more object.
    static func summary(lines: Int, before: Int, after: Int, bucket: String, path: String, isNew: Bool) -> String {
        func objects(_ n: Int) -> String { "\(n) object\(n == 1 ? "" : "s")" }
        let added = after - before
        let replaced = lines - added
        if replaced <= 0 {
            return "imported \(objects(lines)) into bucket '\(bucket)' of \(path)"
        }
        if isNew {
            return
                "imported \(objects(after)) into bucket '\(bucket)' of \(path) from \(lines) lines: \(replaced) line\(replaced == 1 ? "" : "s") gave a key an earlier line gave (the last line of a key wins)"
        }
        return
            "imported \(lines) lines into bucket '\(bucket)' of \(path): \(objects(added)) added, \(replaced) replacing an object of the same key (one the bucket held, or an earlier line's; the last line of a key wins); the bucket holds \(objects(after))"
    }

    func removeCreatedDatabase(_ path: String, wasEmptyDirectory: Bool) {
        let manager = FileManager.default
        if wasEmptyDirectory {
            for name in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
                try? manager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
            }
        } else {
            try? manager.removeItem(atPath: path)
        }
    }
}

/// Opens an existing database for `buri import`, finishing pending purges (see
/// ``finishingPurges(_:_:)``). A LevelDB directory that holds no key at all — what an import or
/// restore killed between creating the database and writing its header leaves — is taken as a
/// new database (it holds nothing to lose), so running the same import again works.
func openForLoading(_ target: DatabaseArgument) throws -> BuriDatabase {
    do {
        return try target.open()
    } catch let error as ToolError where error.status == .notADatabase && hasFiles(target.database) {
        var options = ToolEncryption.options()
        options.createIfMissing = true
        options.syncWrites = true
        // Writes the header only into a store without keys; anything else is refused as before.
        do {
            return try waitingForLock(target.wait) { try openLocation(target.database, options: options) }
        } catch let again as ToolError where again.status == .notADatabase {
            throw error
        }
    }
}
