import ArgumentParser
import Buri
import BuriEtcd
import BuriCodec
import Foundation
import Glibc

// MARK: - export

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write objects as JSON Lines: a header line, then {\"bucket\": ..., \"key\": ..., \"object\": ...}.",
        discussion: """
            The first line is the header ["buri-export",3]; then, for each bucket, a schema line \
            {"bucket": ..., "schema": {"keyField", "schemaVersion", "indexes": [...]}} naming every \
            index with its kinds, fields, field forms, unique and multi-valued flags and version, and \
            its records, one object per line, ordered by bucket name, then key (both bytewise), so the \
            same database always exports to the same bytes. An index whose values buri cannot compute \
            from the object (declared in Swift without `field:`, or `.computed`) has each record carry \
            its values as stored, in "indexValues", and the header is then ["buri-export",4] \
            (docs/FORMAT.md §19): every database restores from its own export. `buri restore` recreates the database from \
            it; `buri import` of one bucket into a new bucket takes its indexes from the schema. Objects are in the exact JSON form: what plain JSON cannot say is wrapped — \
            {"$bytes":"<base64>"}, {"$tag":N,"$value":V} (a date is {"$tag":1,"$value":<seconds \
            since 1970>}), {"$float":"Infinity"}, {"$simple":N}, {"$map":[[key,value],...]} — so \
            `buri import` reads the output back exactly, and exporting again gives the same bytes.

            A damaged database (a table block or record that cannot be read) makes the export fail \
            with exit 3, leaving no short file. With --skip-damaged it saves every record it can read \
            and lists on stderr what it skipped (with --json as one JSON object): each record whose \
            key is known but which cannot be read, and each key range whose records cannot even be \
            listed (the keys that index entries name in such a range are read one by one). It then \
            exits with status 1, so a script cannot take the file for a complete export.

            Example: buri export people.buri Person -o people.jsonl
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "Export only this bucket (default: every bucket).")
    var bucket: String?

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp(
            "Write to this file instead of standard output (replaced only when the export succeeds).", valueName: "file"
        ))
    var output: String?

    @Flag(
        name: .customLong("skip-damaged"),
        help:
            "Save every readable record of a damaged database, list what was skipped on stderr, and exit with status 1 if anything was."
    )
    var skipDamaged = false

    @Flag(help: "With --skip-damaged: list what was skipped as one JSON object on stderr.")
    var json = false

    func validate() throws {
        if let output, output.isEmpty { throw ValidationError("-o needs a file name") }
        if json, !skipDamaged {
            throw ValidationError("--json describes what --skip-damaged skipped; give --skip-damaged too")
        }
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let buckets: [RawBucket]
        if let bucket {
            buckets = [try openBucket(db, bucket)]
        } else {
            buckets = try mapErrors(path: target.database) { try db.bucketNames().map { try db.rawBucket(named: $0) } }
        }
        let report = SkipReport()
        guard let output else {
            try export(buckets, to: Output.standardOutput(), report: report)
            try report.finish(json: json)
            return
        }
        // Write next to the destination and rename, so a failed export never leaves half a file.
        let partial = output + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        do {
            let file = try Output.file(partial)
            do {
                try export(buckets, to: file, report: report)
            } catch {
                try? file.close()
                throw error
            }
            try file.close()
            if rename(partial, output) != 0 {
                throw ToolError(.failure, "cannot move the export to '\(output)': \(String(cString: strerror(errno)))")
            }
        } catch {
            unlink(partial)
            throw error
        }
        try report.finish(json: json)
    }

    func export(_ buckets: [RawBucket], to out: Output, report: SkipReport) throws {
        let progress = Progress()
        defer { progress.finish() }
        // Format 4 when a record carries index values (an index tools cannot compute), else 3.
        try out.line(ExportFormat.header(for: buckets.map(\.descriptor)))
        try mapErrors(path: target.database) {
            for raw in buckets {
                try out.line(ExportFormat.schemaLine(raw.descriptor))
                let carried = ExportFormat.carriedIndexes(raw.descriptor)
                let total = progress.enabled ? (skipDamaged ? (try? raw.count()) ?? 0 : try raw.count()) : 0
                let head = "{\"bucket\":\(jsonString(raw.name)),\"key\":"
                let dates = raw.descriptor.datePaths
                let cursor = try raw.cursor(.all)
                var done = 0
                var last: String? = nil
                do {
                    while let record = try cursor.nextRecord() {
                        last = record.key
                        let object: String
                        do {
                            object =
                                try exactJSONText(
                                    ofPayload: record.payload, bucket: raw.name, key: record.key, dates: dates)
                                + Self.carriedValues(record, of: raw.name, carried)
                        } catch {
                            guard skipDamaged, let tool = error as? ToolError else { throw error }
                            report.record(bucket: raw.name, key: record.key, reason: tool.message)
                            continue
                        }
                        try out.line(head + jsonString(record.key) + ",\"object\":" + object + "}")
                        done += 1
                        if progress.enabled, done % 1000 == 0 {
                            progress.measure(
                                "exporting '\(raw.name)'", done: done, total: total, bytes: false, detail: nil)
                        }
                    }
                } catch {
                    guard skipDamaged, SkipReport.damage(error) != nil else { throw error }
                    report.exported += done
                    // The salvage meets the same damage again and reports it.
                    try salvage(raw, after: last, to: out, head: head, report: report)
                    continue
                }
                report.exported += done
            }
        }
        try out.flush()
    }

    /// The rest of a bucket whose record walk met damage after `last`: every key listed from the
    /// top down to the damage, and between the two every key an index entry names, each read on
    /// its own, in key order; what cannot be read (or listed) goes to `report`.
    /// If the walk down meets no damage, every key above `last` is listed, and only the records
    /// that fail to read (the one the walk stopped at) are skipped.
    func salvage(_ raw: RawBucket, after last: String?, to out: Output, head: String, report: SkipReport) throws {
        // Keys from the end down to the damage (or to `last`, if the walk down meets none).
        var above: [String] = []
        var unlisted: BuriError? = nil
        do {
            let down = try raw.cursor(Query.all.descending())
            while let key = try down.nextKey(), Self.isAfter(key, last) { above.append(key) }
        } catch {
            guard let damage = SkipReport.damage(error) else { throw error }
            unlisted = damage
        }
        var candidates: [String] = []
        if let unlisted {
            // Records between `last` and the lowest key listed from above cannot be listed: the
            // keys index entries name there are the ones that can still be found.
            let lowest = above.last
            var seen = Set<[UInt8]>()
            var unreadIndexes: [String] = []
            for index in raw.descriptor.indexes {
                do {
                    let cursor = try raw.cursor(Query.index(index.name, from: .unbounded, to: .unbounded))
                    // Index order is not key order: every entry is looked at.
                    while let key = try cursor.nextKey() {
                        if Self.isAfter(key, last), Self.isBefore(key, lowest), seen.insert(Array(key.utf8)).inserted {
                            candidates.append(key)
                        }
                    }
                } catch {
                    guard SkipReport.damage(error) != nil else { throw error }
                    unreadIndexes.append(index.name)
                }
            }
            candidates.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            report.range(
                bucket: raw.name, after: last, before: lowest, reason: ToolError(unlisted).message,
                keysFromIndexes: candidates.count, unreadIndexes: unreadIndexes)
        }
        candidates.append(contentsOf: above.reversed())
        for key in candidates {
            let object: String
            do {
                guard let record = try raw.record(forKey: key) else {
                    report.record(bucket: raw.name, key: key, reason: "an index entry names it, but it has no record")
                    continue
                }
                object =
                    try exactJSONText(
                        ofPayload: record.payload, bucket: raw.name, key: key, dates: raw.descriptor.datePaths)
                    + Self.carriedValues(record, of: raw.name, ExportFormat.carriedIndexes(raw.descriptor))
            } catch {
                if let damage = SkipReport.damage(error) {
                    report.record(bucket: raw.name, key: key, reason: ToolError(damage).message)
                } else if let tool = error as? ToolError {
                    report.record(bucket: raw.name, key: key, reason: tool.message)
                } else {
                    throw error
                }
                continue
            }
            try out.line(head + jsonString(key) + ",\"object\":" + object + "}")
            report.exported += 1
        }
    }

    /// The record's `"indexValues"` member (format 4; empty when the bucket's indexes are all
    /// computable): the values its header stores for the indexes tools cannot compute.
    static func carriedValues(_ record: StoredRecord, of bucket: String, _ carried: [IndexDefinition]) throws -> String
    {
        do {
            return try ExportFormat.indexValuesMember(record.indexValues, carried: carried)
        } catch {
            throw ToolError(
                .failure,
                "bucket '\(bucket)', key \(jsonString(record.key)): \(error.message); the record is damaged (run `buri check`)"
            )
        }
    }

    /// Whether `key` sorts bytewise after `bound` (every key does when there is none).
    static func isAfter(_ key: String, _ bound: String?) -> Bool {
        guard let bound else { return true }
        return bound.utf8.lexicographicallyPrecedes(key.utf8)
    }

    /// Whether `key` sorts bytewise before `bound` (every key does when there is none).
    static func isBefore(_ key: String, _ bound: String?) -> Bool {
        guard let bound else { return true }
        return key.utf8.lexicographicallyPrecedes(bound.utf8)
    }
}

/// What `buri export --skip-damaged` skipped, reported on stderr when the export ends.
final class SkipReport {
    struct Record { var bucket: String; var key: String; var reason: String }
    struct Range {
        var bucket: String; var after: String?; var before: String?; var reason: String; var keysFromIndexes: Int;
        var unreadIndexes: [String]
    }
    var records: [Record] = []
    var ranges: [Range] = []
    var exported = 0

    /// The error if it means unreadable data (a damaged block or record), which --skip-damaged
    /// skips; `nil` for anything else.
    static func damage(_ error: any Error) -> BuriError? {
        guard let error = error as? BuriError else { return nil }
        switch error {
        case .damaged, .corruption, .decodingFailed: return error
        default: return nil
        }
    }

    func record(bucket: String, key: String, reason: String) {
        records.append(Record(bucket: bucket, key: key, reason: reason))
    }

    func range(
        bucket: String, after: String?, before: String?, reason: String, keysFromIndexes: Int, unreadIndexes: [String]
    ) {
        ranges.append(
            Range(
                bucket: bucket, after: after, before: before, reason: reason, keysFromIndexes: keysFromIndexes,
                unreadIndexes: unreadIndexes))
    }

    var isEmpty: Bool { records.isEmpty && ranges.isEmpty }

    /// Writes the report to stderr and throws exit status 1 if anything was skipped.
    func finish(json: Bool) throws {
        guard !isEmpty else { return }
        var text = ""
        if json {
            let value: CBORValue = .map([
                CBORMapEntry(key: "exported", value: .int(Int64(exported))),
                CBORMapEntry(
                    key: "skippedRecords",
                    value: .array(
                        records.map { record in
                            .map([
                                CBORMapEntry(key: "bucket", value: .text(record.bucket)),
                                CBORMapEntry(key: "key", value: .text(record.key)),
                                CBORMapEntry(key: "reason", value: .text(oneLine(record.reason))),
                            ])
                        })),
                CBORMapEntry(
                    key: "skippedRanges",
                    value: .array(
                        ranges.map { range in
                            .map([
                                CBORMapEntry(key: "bucket", value: .text(range.bucket)),
                                CBORMapEntry(key: "after", value: range.after.map { .text($0) } ?? .null),
                                CBORMapEntry(key: "before", value: range.before.map { .text($0) } ?? .null),
                                CBORMapEntry(key: "keysFromIndexes", value: .int(Int64(range.keysFromIndexes))),
                                CBORMapEntry(
                                    key: "unreadIndexes", value: .array(range.unreadIndexes.map { .text($0) })),
                                CBORMapEntry(key: "reason", value: .text(oneLine(range.reason))),
                            ])
                        })),
            ])
            text = value.jsonString() + "\n"
        } else {
            for range in ranges {
                let after = range.after.map { "after key \(jsonString($0))" } ?? "from the first key"
                let before = range.before.map { "before key \(jsonString($0))" } ?? "to the last key"
                let unread =
                    range.unreadIndexes.isEmpty
                    ? ""
                    : " (index\(range.unreadIndexes.count == 1 ? "" : "es") \(range.unreadIndexes.map { "'\($0)'" }.joined(separator: ", ")) could not be read either)"
                text +=
                    "buri: skipped: bucket '\(range.bucket)', the records \(after) and \(before) could not be listed (\(oneLine(range.reason))); of the keys there, only the \(range.keysFromIndexes) that index entries name were tried\(unread)\n"
            }
            for record in records {
                text +=
                    "buri: skipped: bucket '\(record.bucket)', key \(jsonString(record.key)): \(oneLine(record.reason))\n"
            }
            text +=
                "buri: export incomplete: \(exported) object\(exported == 1 ? "" : "s") saved; skipped \(records.count) unreadable record\(records.count == 1 ? "" : "s") and \(ranges.count) key range\(ranges.count == 1 ? "" : "s") that could not be listed (exit status 1); `buri repair` salvages the database itself\n"
        }
        writeAll(2, Array(text.utf8))
        throw ExitCode(ExitStatus.problemsFound.rawValue)
    }
}

// MARK: - import

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
            entry. A date field (one a Swift Date property's index reads, or one named with --date) \
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

            Examples:
              buri import people.buri Person --key objectId --binary-index locale --numeric-index age people.jsonl
              buri export old.buri Person | buri import new.buri Person --key objectId --binary-index locale
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
        name: .customLong("date"),
        help: ArgumentHelp(
            "Field FIELD holds a date as seconds since 1970: store a number there as a date (as a Swift Date property is stored), and index it as one. Repeatable.",
            valueName: "field"))
    var dateFields: [String] = []

    @Option(
        name: .customLong("chunk-size"),
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

    /// An index option: name, field and kind.
    struct IndexOption {
        var name: String
        /// The field path as given (`address.city`).
        var field: String
        /// The map keys it walks (`["address", "city"]`).
        var path: [String]
        var kind: IndexKind
    }

    func indexOptions() throws -> [IndexOption] {
        var result: [IndexOption] = []
        for (specs, kind) in [(binaryIndexes, IndexKind.binary), (numericIndexes, .numeric)] {
            for spec in specs {
                let parts = spec.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let name = parts[0]
                let field = parts.count > 1 ? parts[1] : name
                let option = "--\(kind.rawValue)-index '\(spec)'"
                if name.isEmpty { throw ValidationError("\(option) has no index name; write NAME or NAME=FIELD") }
                if field.isEmpty { throw ValidationError("\(option) has no field after '='; write NAME or NAME=FIELD") }
                if result.contains(where: { $0.name.utf8.elementsEqual(name.utf8) }) {
                    throw ValidationError(
                        "index '\(name)' is given twice; give each index once, as --binary-index or --numeric-index")
                }
                let path: [String]
                switch IndexDefinition.parseFieldPath(field) {
                case .success(let keys): path = keys
                case .failure(let error):
                    throw ValidationError("\(option): \(error.description) (write a key with a dot in it as 'v1\\.2')")
                }
                result.append(IndexOption(name: name, field: field, path: path, kind: kind))
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
        let options = try indexOptions()
        // An existing database is opened (and locked) first, so the checks see its catalog.
        var db: BuriDatabase? = state == .database ? try openForLoading(target) : nil
        defer { db?.close() }
        let existing = try db.flatMap { db in try mapErrors(path: path) { try db.bucketInfo(named: bucket) } }
        var plan = try ImportPlan(
            bucket: bucket, existing: existing, key: key, options: options, dateFields: dateFields, databasePath: path)

        let progress = Progress(forced: showProgress)
        defer { progress.finish() }
        let input = try JSONLinesInput(file ?? "-")
        defer { input.release() }
        let total = input.size
        let storeChunk = chunkSize ?? Self.stageChunk

        /// Runs `body` over every line with its number, showing the reading progress as `phase`.
        func eachLine(_ phase: String, _ body: ([UInt8], Int) throws -> Void) throws {
            try input.rewind()
            progress.measure(phase, done: 0, total: total, bytes: true, detail: nil, force: true)
            var number = 0
            while let line = try input.nextLine() {
                number += 1
                try body(line, number)
                if progress.enabled, number % 1000 == 0 {
                    progress.measure(phase, done: input.consumed, total: total, bytes: true, detail: "\(number) lines")
                }
            }
            progress.measure(
                phase, done: input.consumed, total: total, bytes: true, detail: "\(number) lines", force: true)
        }

        // A new bucket's definition (multi-valued indexes, the schema line's indexes) and the
        // non-atomic --chunk-size mode need every line checked before anything is written: a
        // first pass reads the input without keeping it.
        if existing == nil || chunkSize != nil {
            try eachLine("checking") { line, number in _ = try plan.prepare(line, line: number) }
            try plan.checkEnd()
        }
        let definitions = plan.newDefinitions()
        let keyField = plan.keyField
        let checked = plan
        var storing = try ImportPlan(
            bucket: bucket, existing: existing, key: key, options: options, dateFields: dateFields, databasePath: path)

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
        var createdBucket = false
        var stage: StagedImport? = nil
        /// The objects the bucket held before (copied into the stage) and after the import.
        var before = 0
        var after = 0
        do {
            try mapErrors(path: path) {
                var chunk: [RawObject] = []
                var chunkLines: [Int] = []
                var chunkBytes = 0
                if chunkSize != nil {
                    // Asked for: one commit per chunk, not atomic as a whole.
                    let raw: RawBucket
                    if existing == nil {
                        raw = try db.createBucket(
                            named: bucket, keyField: keyField, indexes: definitions,
                            schemaVersion: checked.schemaVersion)
                        createdBucket = true
                    } else {
                        raw = try db.rawBucket(named: bucket)
                        before = try raw.count()
                    }
                    try eachLine("storing in chunks of \(storeChunk)") { line, number in
                        guard let object = try storing.prepare(line, line: number) else { return }
                        chunk.append(object)
                        chunkLines.append(number)
                        if chunk.count >= storeChunk {
                            try Self.store(chunk, lines: chunkLines, partial: true) { try raw.store($0, sync: true) }
                            TestKillHook.chunkStored()
                            chunk.removeAll(keepingCapacity: true)
                            chunkLines.removeAll(keepingCapacity: true)
                        }
                    }
                    if !chunk.isEmpty {
                        try Self.store(chunk, lines: chunkLines, partial: true) { try raw.store($0, sync: true) }
                        TestKillHook.chunkStored()
                    }
                    after = try raw.count()
                    return
                }
                // Atomic: staged under a fresh bucket id, published with one catalog commit; a new
                // bucket is created by that commit (until then the catalog does not change).
                let load: StagedImport
                if existing == nil {
                    load = try db.stageImport(
                        creating: bucket, keyField: keyField, indexes: definitions, schemaVersion: checked.schemaVersion
                    )
                } else {
                    let existingCount = progress.enabled ? try db.rawBucket(named: bucket).count() : 0
                    progress.measure(
                        "copying existing objects", done: 0, total: existingCount, bytes: false, detail: nil,
                        force: true)
                    var copied = 0
                    load = try db.stageImport(into: bucket, chunkSize: Self.stageChunk) { done in
                        copied = done
                        progress.measure(
                            "copying existing objects", done: done, total: existingCount, bytes: false, detail: nil)
                    }
                    before = copied
                    progress.measure(
                        "copying existing objects", done: existingCount, total: existingCount, bytes: false,
                        detail: nil, force: true)
                }
                stage = load
                try eachLine("reading and storing") { line, number in
                    guard let object = try storing.prepare(line, line: number) else { return }
                    chunkBytes += object.payload.count + object.key.utf8.count
                    chunk.append(object)
                    chunkLines.append(number)
                    if chunk.count >= storeChunk || chunkBytes >= Self.stageChunkBytes {
                        try Self.store(chunk, lines: chunkLines, partial: false) { try load.store($0) }
                        TestKillHook.chunkStored()
                        chunk.removeAll(keepingCapacity: true)
                        chunkLines.removeAll(keepingCapacity: true)
                        chunkBytes = 0
                    }
                }
                if !chunk.isEmpty {
                    try Self.store(chunk, lines: chunkLines, partial: false) { try load.store($0) }
                    TestKillHook.chunkStored()
                }
                chunk = []
                try storing.checkEnd()
                after = try publishStages(db, [load], progress: progress).reduce(0, +)
            }
            progress.finish()
        } catch {
            var note = ""
            if let stage {
                progress.measure("purging the stage", done: 0, total: 1, bytes: false, detail: nil, force: true)
                // Deleted now (not left to a background purge this process would not live to
                // finish), so the database is exactly as it was.
                do {
                    try stage.discard()
                } catch {
                    note =
                        "buri: note: the import's stage could not be deleted now (\(oneLine(ToolError(error, path: path).message))); it is marked for purging, and the next command that writes to \(path) deletes it\n"
                }
                progress.measure("purging the stage", done: 1, total: 1, bytes: false, detail: nil, force: true)
            }
            progress.finish()
            // A database this import created is removed whole below, and a stage a full disk kept
            // is reported with the error (or removed by a fresh handle): no note for those.
            let diskFull = (error as? ToolError)?.isDiskFull == true
            if !note.isEmpty, !created, !diskFull { writeAll(2, Array(note.utf8)) }
            if createdBucket {
                try? db.dropBucket(named: bucket)
                try? db.purgeRetiredBuckets()
            }
            if created {
                db.close()
                if !hasFiles(path) {
                    // The database this import created (its header only): gone again.
                    removeCreatedEtcdDatabase(path)
                } else {
                    removeCreatedDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
                }
            } else if stage != nil, let full = error as? ToolError, full.isDiskFull {
                // The handle that met the full disk writes no more (not even the stage's purge
                // marker): a new one removes the stage if the disk now has room for it.
                db.close()
                if !removeStageAfterDiskFull(path) {
                    throw ToolError(full.status, full.message + stageLeftNote(path), diskFull: true)
                }
            }
            throw error
        }
        if debugPeakMemory, let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        {
            writeAll(
                2,
                Array(
                    "buri: debug: \(line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "))\n"
                        .utf8))
            writeAll(
                2,
                Array(
                    "buri: debug: searched \(input.bytesSearched) bytes for newlines in an input of \(input.size) bytes\n"
                        .utf8))
        }
        let count = storing.prepared
        let out = Output.standardOutput()
        try out.line(
            Self.summary(lines: count, before: before, after: after, bucket: bucket, path: path, isNew: existing == nil)
        )
        try out.flush()
        if !storing.skipped.isEmpty {
            writeAll(2, Array("buri: note: skipped export records of other buckets: \(storing.skippedList)\n".utf8))
        }
        for warning in checked.emptyIndexWarnings(objectCount: count) { writeAll(2, Array(warning.utf8)) }
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

    /// Stores one chunk of objects (read from `lines`) with `store`. When a unique index refuses
    /// the chunk, the objects are stored one by one to find the first that breaks it, so that the
    /// error names its line and key, the index, the value and the key that holds it. With
    /// `partial` (--chunk-size, not atomic) the objects of the lines before it are then stored.
    static func store(_ chunk: [RawObject], lines: [Int], partial: Bool, _ store: ([RawObject]) throws -> Void) throws {
        do {
            try store(chunk)
        } catch {
            guard case .uniqueViolation? = error as? BuriError else { throw error }
            for (object, line) in zip(chunk, lines) {
                do {
                    try store([object])
                } catch {
                    guard case let .uniqueViolation(name, index, value, holder)? = error as? BuriError else {
                        throw error
                    }
                    let stored =
                        partial
                        ? "the objects of the lines before it are stored (--chunk-size is not atomic)"
                        : "nothing was imported"
                    throw ToolError(
                        .invalidInput,
                        "line \(line): key \(jsonString(object.key)): unique index '\(index)' of bucket '\(name)' already holds \(value) for key \(jsonString(holder)); \(stored)"
                    )
                }
            }
            throw error
        }
    }

    /// Objects per commit into the stage (and per copied chunk), and the bytes that end a chunk
    /// early: what bounds the import's memory.
    static let stageChunk = 1_000
    static let stageChunkBytes = 4 << 20

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
        var options = BuriOptions()
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

/// Publishes staged imports in one commit, showing the publish phase's work (counting the staged
/// objects; checking existing buckets are unchanged) with total, percentage, rate and ETA.
@discardableResult
func publishStages(_ db: BuriDatabase, _ loads: [StagedImport], progress: Progress) throws -> [Int] {
    let counts = try db.publish(loads) { step in
        // New buckets have nothing to compare: no such phase is shown for them.
        if step.phase == .verifying, step.total == 0 { return }
        let phase = step.phase == .counting ? "publishing" : "publishing (checking the bucket is unchanged)"
        progress.measure(
            phase, done: step.done, total: step.total, bytes: false, detail: nil,
            force: step.done == 0 || step.done == step.total)
    }
    let total = counts.reduce(0, +)
    progress.update("published \(total) object\(total == 1 ? "" : "s") in one commit", force: true)
    return counts
}

/// A JSON Lines input read line by line in blocks, never whole; it can be read again from the
/// start. Standard input that is not a regular file (a pipe) is first copied to an unlinked
/// temporary file, so its size is known and a second pass can read it.
final class JSONLinesInput {
    private let fd: Int32
    private let owned: Bool
    /// The input's size in bytes.
    let size: Int
    /// The bytes of the lines returned so far (their newlines included).
    private(set) var consumed = 0
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private static let blockSize = 1 << 20

    init(_ name: String) throws {
        let source: Int32
        if name == "-" {
            source = 0
        } else {
            source = open(name, O_RDONLY)
            guard source >= 0 else {
                let reason =
                    errno == ENOENT
                    ? "there is no such file" : "it cannot be read (\(String(cString: strerror(errno))))"
                throw ToolError(.failure, "cannot read '\(name)': \(reason)")
            }
        }
        var info = stat()
        if fstat(source, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            fd = source
            owned = source != 0
            size = Int(info.st_size) - max(0, Int(lseek(source, 0, SEEK_CUR)))
            return
        }
        // A pipe (or another stream): copied to an unlinked temporary file.
        defer { if source != 0 { _ = Glibc.close(source) } }
        let what = name == "-" ? "standard input" : "'\(name)'"
        var template = Array((NSTemporaryDirectory() + "/buri-import-XXXXXX").utf8CString)
        let spool = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard spool >= 0 else {
            throw ToolError(
                .failure,
                "cannot make a temporary file for \(what) in \(NSTemporaryDirectory()): \(String(cString: strerror(errno))); set TMPDIR, or give the input as a regular file"
            )
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var block = [UInt8](repeating: 0, count: Self.blockSize)
        var total = 0
        while true {
            let got = block.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else {
                let reason = String(cString: strerror(errno))
                _ = Glibc.close(spool)
                throw ToolError(.failure, "cannot read \(what): \(reason); nothing was imported")
            }
            if got == 0 { break }
            var written = 0
            while written < got {
                let put = block.withUnsafeBytes { write(spool, $0.baseAddress! + written, got - written) }
                if put < 0, errno == EINTR { continue }
                guard put > 0 else {
                    let reason = String(cString: strerror(errno))
                    _ = Glibc.close(spool)
                    throw ToolError(
                        .failure,
                        "cannot copy \(what) to a temporary file in \(NSTemporaryDirectory()): \(reason); free space there (or set TMPDIR), or give the input as a regular file; nothing was imported"
                    )
                }
                written += put
            }
            total += got
        }
        fd = spool
        owned = true
        size = total
        start = 0
    }

    private var start: off_t = -1

    /// Goes back to the start of the input.
    func rewind() throws {
        if start < 0 { start = lseek(fd, 0, SEEK_CUR) }
        guard lseek(fd, start, SEEK_SET) >= 0 else {
            throw ToolError(.failure, "cannot read the input again: \(String(cString: strerror(errno)))")
        }
        buffer = []
        position = 0
        scanned = 0
        consumed = 0
        atEnd = false
    }

    /// The next line without its newline, or nil at the end.
    ///
    /// Linear in the input, however long a line is: the search for the newline goes on from
    /// where the last block's search ended (never over the same bytes again), blocks are read
    /// straight into the buffer's free capacity, and consumed bytes are dropped only once they
    /// are most of the buffer. Memory is the longest line plus a block.
    func nextLine() throws -> [UInt8]? {
        while true {
            let newline: Int? = buffer.withUnsafeBufferPointer { bytes in
                guard scanned < bytes.count, let base = bytes.baseAddress else { return nil }
                guard let found = memchr(base + scanned, 0x0A, bytes.count - scanned) else {
                    bytesSearched += bytes.count - scanned
                    return nil
                }
                let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                bytesSearched += at + 1 - scanned
                return at
            }
            if let newline {
                consumed += newline + 1 - position
                if newline - position > 4 * Self.blockSize {
                    // A long line: the buffer itself becomes the line (no second copy of it), and
                    // what follows it starts a new buffer.
                    let rest = Array(buffer[(newline + 1)...])
                    buffer.removeSubrange(newline...)
                    buffer.removeSubrange(0..<position)
                    let line = buffer
                    buffer = rest
                    position = 0
                    scanned = 0
                    return line
                }
                let line = Array(buffer[position..<newline])
                position = newline + 1
                scanned = position
                releaseIfLarge()
                return line
            }
            scanned = buffer.count
            if atEnd {
                guard position < buffer.count else { return nil }
                let line = Array(buffer[position...])
                consumed += buffer.count - position
                position = buffer.count
                scanned = position
                releaseIfLarge()
                return line
            }
            // Drop the consumed bytes once they are at least half the buffer (each byte is moved
            // a bounded number of times), then read a block into the free capacity.
            if position > 0, position * 2 >= buffer.count {
                buffer.removeSubrange(0..<position)
                scanned -= position
                position = 0
            }
            var got = 0
            var failure: Int32 = 0
            let readCount = Self.blockSize
            let tail = [UInt8](unsafeUninitializedCapacity: readCount) { chunk, initialized in
                repeat {
                    got = read(fd, chunk.baseAddress, readCount)
                } while got < 0 && errno == EINTR
                if got < 0 { failure = errno }
                initialized = max(0, got)
            }
            guard got >= 0 else {
                throw ToolError(
                    .failure, "cannot read the input: \(String(cString: strerror(failure))); nothing was imported")
            }
            buffer.append(contentsOf: tail)
            if got == 0 { atEnd = true }
        }
    }

    /// Bytes of the buffer already searched for a newline (from `position` on).
    private var scanned = 0

    /// Every byte the newline search has looked at, over all passes: what makes reading linear
    /// measurable without a clock (`--debug-peak-memory` prints it; a test bounds it by the input's size).
    private(set) var bytesSearched = 0

    /// After a long line, gives its memory back instead of keeping a buffer that large.
    private func releaseIfLarge() {
        guard buffer.capacity > 4 * Self.blockSize, buffer.count - position <= Self.blockSize else { return }
        buffer = Array(buffer[position...])
        scanned -= position
        position = 0
    }

    /// Closes the input (a temporary copy is gone with it).
    func release() { if owned { _ = Glibc.close(fd) } }
}

/// The header line of `buri export`'s output, which alone makes the input an export, and the
/// export's lines (docs/FORMAT.md §19).
enum ExportFormat {
    /// The newest format: 4 added the index values a record carries for the indexes `buri` cannot
    /// compute from an object's fields; 3 added the schema lines; 2 (records only) is still read.
    static let version: UInt64 = 4
    static let readable: [UInt64] = [2, 3, 4]
    /// The header of an export whose records carry no index values: format 3, which an older buri
    /// reads too.
    static let header = header(version: 3)

    static func header(version: UInt64) -> String { "[\"buri-export\",\(version)]" }

    /// The header for exporting buckets with these definitions: format 4 if any record carries
    /// index values (a bucket has an index tools cannot compute), else format 3.
    static func header(for descriptors: [BucketDescriptor]) -> String {
        header(version: descriptors.contains { !carriedIndexes($0).isEmpty } ? 4 : 3)
    }

    /// The readable formats as text ("2, 3 and 4").
    static var readableList: String {
        let names = readable.map(String.init)
        return names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
    }

    /// The indexes whose values each record of the bucket carries (format 4): those whose values
    /// tools cannot compute from the object (a Swift declaration without `field:`, a `.computed`
    /// index), in the bucket's order.
    static func carriedIndexes(_ descriptor: BucketDescriptor) -> [IndexDefinition] {
        descriptor.indexes.filter { $0.uncomputableReason != nil }
    }

    /// The `,"indexValues":{…}` member of a record of a bucket whose `carried` indexes are not
    /// computable (empty when there are none): for each such index, in the bucket's order, the
    /// value tuples of the object's entries as stored (from its record header), sorted bytewise
    /// by their encoding. Each value is an integer, a double, text (a UTF-8 byte string) or
    /// {"$bytes": …} (other bytes).
    /// - Throws: the reason, for a stored value that does not read back as itself.
    static func indexValuesMember(
        _ values: [IndexName: [[IndexValue]]], carried: [IndexDefinition]
    ) throws(ToolError) -> String {
        guard !carried.isEmpty else { return "" }
        var entries: [CBORMapEntry] = []
        for index in carried {
            var seen = Set<[UInt8]>()
            var tuples: [(encoded: [UInt8], values: [IndexValue])] = []
            for tuple in values[IndexName(index.name)] ?? [] {
                // The encodings are prefix-free, so the joined bytes order tuples as their elements do.
                let encoded = tuple.flatMap(\.encoded)
                if seen.insert(encoded).inserted { tuples.append((encoded, tuple)) }
            }
            tuples.sort { $0.encoded.lexicographicallyPrecedes($1.encoded) }
            var written: [CBORValue] = []
            for tuple in tuples {
                var elements: [CBORValue] = []
                for value in tuple.values {
                    let element = jsonValue(value)
                    guard (try? indexValue(element, numeric: value.isNumeric)) == value else {
                        throw ToolError(
                            .failure,
                            "index '\(index.name)' holds a value (\(value.encoded.map { String($0, radix: 16) }.joined(separator: " "))) that does not read back as itself"
                        )
                    }
                    elements.append(element)
                }
                written.append(.array(elements))
            }
            entries.append(CBORMapEntry(key: .text(index.name), value: .array(written)))
        }
        return ",\"indexValues\":" + CBORValue.map(entries).exactJSONString()
    }

    /// An index value as JSON: a number as itself, a byte string as text when it is UTF-8, else as bytes.
    static func jsonValue(_ value: IndexValue) -> CBORValue {
        switch value.decoded {
        case .integer(let number): return .int(number)
        case .unsigned(let number): return .unsigned(number)
        case .double(let number): return .float(number)
        case .bytes(let bytes):
            if let text = String(validating: bytes, as: UTF8.self) { return .text(text) }
            return .bytes(bytes)
        }
    }

    /// The index value a carried JSON value gives for a component of kind numeric or binary.
    /// - Throws: the reason it is not one, as text.
    static func indexValue(_ value: CBORValue, numeric: Bool) throws(ToolError) -> IndexValue {
        if numeric {
            switch value {
            case .unsigned, .negative, .float:
                do {
                    return try IndexValue(number: value)
                } catch {
                    if case let .invalidIndexValue(_, _, _, reason) = error { throw ToolError(.invalidInput, reason) }
                    throw ToolError(.invalidInput, error.description)
                }
            default:
                throw ToolError(.invalidInput, "a numeric component takes a number, not \(kindName(value))")
            }
        }
        switch value {
        case .text(let text): return IndexValue(text)
        case .bytes(let bytes): return IndexValue(bytes: bytes)
        default:
            throw ToolError(.invalidInput, "a binary component takes text or {\"$bytes\": …}, not \(kindName(value))")
        }
    }

    /// The schema line written before a bucket's records:
    /// {"bucket":NAME,"schema":{"keyField","schemaVersion","indexes":[{"name","kinds","unique","multiValued","version","fields","fieldForms","computed"[,"fieldPaths"]}]}}
    /// ("fieldPaths" only for an index that reads a nested field; its "fields" is then null).
    static func schemaLine(_ descriptor: BucketDescriptor) -> String {
        let indexes: [CBORValue] = descriptor.indexes.map { index in
            .map(
                [
                    CBORMapEntry(key: "name", value: .text(index.name)),
                    CBORMapEntry(key: "kinds", value: .array(index.components.map { .text($0.rawValue) })),
                    CBORMapEntry(key: "unique", value: .bool(index.isUnique)),
                    CBORMapEntry(key: "multiValued", value: .bool(index.multiValued)),
                    CBORMapEntry(key: "version", value: .int(Int64(index.version))),
                    CBORMapEntry(key: "fields", value: index.fields.map { .array($0.map { .text($0) }) } ?? .null),
                    CBORMapEntry(
                        key: "fieldForms",
                        value: index.fieldForms.map { .array($0.map { .text($0.rawValue) }) } ?? .null),
                    CBORMapEntry(key: "computed", value: .bool(index.computed == true)),
                ]
                    + (index.fieldPaths.map {
                        [CBORMapEntry(key: "fieldPaths", value: .array($0.map { .array($0.map { .text($0) }) }))]
                    } ?? []))
        }
        let schema: CBORValue = .map([
            CBORMapEntry(key: "keyField", value: descriptor.keyField.map { .text($0) } ?? .null),
            CBORMapEntry(key: "schemaVersion", value: .unsigned(descriptor.schemaVersion)),
            CBORMapEntry(key: "indexes", value: .array(indexes)),
        ])
        return "{\"bucket\":" + jsonString(descriptor.name) + ",\"schema\":" + schema.jsonString() + "}"
    }

    /// The members of one object of an export line, checked: each name one of those it may have
    /// (compared as bytes), the required ones present; each read with its type checked, so that a
    /// wrong value is refused naming its member instead of becoming a default.
    struct Members {
        let entries: [CBORMapEntry]
        /// Where the object is, for messages: "the schema", "index 2 ('email') of the schema".
        let place: String
        let fail: (String) -> ToolError

        init(
            _ value: CBORValue, place: String, required: [String], optional: [String] = [],
            fail: @escaping (String) -> ToolError
        ) throws {
            self.place = place
            self.fail = fail
            let names = required + optional
            let list = names.map { "\"\($0)\"" }.joined(separator: ", ")
            guard case .map(let entries) = value else {
                throw fail("\(place) is \(kindName(value)); it must be an object with the members \(list)")
            }
            self.entries = entries
            for entry in entries {
                guard let name = entry.key.stringValue else {
                    throw fail("\(place) has a member named \(entry.key.exactJSONString()), which is not text")
                }
                guard names.contains(where: { $0.utf8.elementsEqual(name.utf8) }) else {
                    throw fail(
                        "\(place) has the member \(jsonString(name)), which an export does not have (its members are \(list))"
                    )
                }
            }
            for name in required where self[name] == nil {
                throw fail("\(place) lacks the member \"\(name)\" (its members are \(list))")
            }
        }

        subscript(_ name: String) -> CBORValue? {
            entries.first { $0.key.stringValue?.utf8.elementsEqual(name.utf8) == true }?.value
        }

        func wrong(_ name: String, _ value: CBORValue, _ expected: String) -> ToolError {
            fail("\(place): \"\(name)\" is \(kindName(value)); it must be \(expected)")
        }

        /// A member that must be true or false.
        func bool(_ name: String) throws -> Bool {
            guard let value = self[name] else { throw fail("\(place) lacks the member \"\(name)\"") }
            guard case .bool(let flag) = value else { throw wrong(name, value, "true or false") }
            return flag
        }

        /// A member that must be text (non-empty if `nonEmpty`; or null, if `nullable`).
        func text(_ name: String, nullable: Bool, nonEmpty: Bool = false) throws -> String? {
            guard let value = self[name] else { return nil }
            if nullable, value.isNull { return nil }
            guard case .text(let text) = value, !(nonEmpty && text.isEmpty) else {
                throw wrong(name, value, (nonEmpty ? "non-empty text" : "text") + (nullable ? " or null" : ""))
            }
            return text
        }

        /// A member that must be an array (or null, if `nullable`) of text.
        func texts(_ name: String, nullable: Bool) throws -> [String]? {
            guard let value = self[name] else { return nil }
            if nullable, value.isNull { return nil }
            let expected = "an array of text" + (nullable ? " or null" : "")
            guard case .array(let items) = value else { throw wrong(name, value, expected) }
            return try items.map { item in
                guard case .text(let text) = item else {
                    throw fail("\(place): \"\(name)\" holds \(kindName(item)); it must be \(expected)")
                }
                return text
            }
        }
    }

    /// The bucket schema a schema line describes; `fail` makes the error for a malformed one (the
    /// caller adds the line). Every member is checked: a value of the wrong type or out of range,
    /// an unknown or missing member is refused, naming it — never read as a default.
    static func parseSchema(
        _ value: CBORValue, fail: @escaping (String) -> ToolError
    ) throws -> (keyField: String?, schemaVersion: UInt64, indexes: [IndexDefinition]) {
        let schema = try Members(
            value, place: "the schema", required: ["keyField", "schemaVersion", "indexes"], fail: fail)
        let keyField = try schema.text("keyField", nullable: true)
        guard let versionValue = schema["schemaVersion"], case .unsigned(let schemaVersion) = versionValue else {
            throw schema.wrong(
                "schemaVersion", schema["schemaVersion"] ?? .null, "an integer from 0 to 18446744073709551615")
        }
        guard let indexList = schema["indexes"], case .array(let list) = indexList else {
            throw schema.wrong("indexes", schema["indexes"] ?? .null, "an array of index objects")
        }
        var indexes: [IndexDefinition] = []
        var names = Set<[UInt8]>()
        for (position, entry) in list.enumerated() {
            var place = "index \(position + 1) of the schema"
            let members = ["name", "kinds", "unique", "multiValued", "version", "fields", "fieldForms", "computed"]
            let first = try Members(entry, place: place, required: members, optional: ["fieldPaths"], fail: fail)
            guard let name = try first.text("name", nullable: false, nonEmpty: true) else {
                throw first.fail("\(place) lacks the member \"name\"")
            }
            place += " (\(jsonString(name)))"
            let index = try Members(entry, place: place, required: members, optional: ["fieldPaths"], fail: fail)
            guard names.insert(Array(name.utf8)).inserted else {
                throw fail("\(place): another index of the schema has the same name; give each index once")
            }
            guard let kindValues = index["kinds"], case .array(let kindList) = kindValues, !kindList.isEmpty else {
                throw index.wrong("kinds", index["kinds"] ?? .null, "a non-empty array of \"binary\" and \"numeric\"")
            }
            var kinds: [IndexKind] = []
            for kind in kindList {
                guard let text = kind.stringValue, let parsed = IndexKind(rawValue: text) else {
                    throw fail("\(place): \"kinds\" holds \(kindName(kind)); a kind is \"binary\" or \"numeric\"")
                }
                kinds.append(parsed)
            }
            func counted<T>(_ member: String, _ items: [T]?, _ what: String) throws -> [T]? {
                guard let items, items.count != kinds.count else { return items }
                throw fail(
                    "\(place): \"\(member)\" has \(items.count) \(what)\(items.count == 1 ? "" : "s") for \(kinds.count) kind\(kinds.count == 1 ? "" : "s"); give one per kind"
                )
            }
            let unique = try index.bool("unique")
            let multiValued = try index.bool("multiValued")
            let computed = try index.bool("computed")
            guard let versionValue = index["version"],
                let version = versionValue.int64Value.flatMap({ Int(exactly: $0) })
            else {
                throw index.wrong("version", index["version"] ?? .null, "an integer from \(Int.min) to \(Int.max)")
            }
            let fields = try counted("fields", try index.texts("fields", nullable: true), "field")
            let formNames = try counted("fieldForms", try index.texts("fieldForms", nullable: true), "field form")
            let forms = try formNames?.map { text -> IndexFieldForm in
                guard let form = IndexFieldForm(rawValue: text) else {
                    throw fail(
                        "\(place): \"fieldForms\" holds \(jsonString(text)); a field form is \"value\" or \"date\"")
                }
                return form
            }
            var paths: [[String]]? = nil
            if let value = index["fieldPaths"], !value.isNull {
                let expected = "an array of non-empty arrays of text, or null"
                guard case .array(let items) = value else { throw index.wrong("fieldPaths", value, expected) }
                paths = try counted(
                    "fieldPaths",
                    try items.map { item in
                        guard case .array(let keys) = item, !keys.isEmpty else {
                            throw fail("\(place): \"fieldPaths\" holds \(kindName(item)); it must be \(expected)")
                        }
                        return try keys.map { key in
                            guard let text = key.stringValue else {
                                throw fail(
                                    "\(place): a path of \"fieldPaths\" holds \(kindName(key)); it must be \(expected)")
                            }
                            return text
                        }
                    }, "field path")
            }
            indexes.append(
                IndexDefinition(
                    id: 0, name: name, components: kinds, unique: unique, multiValued: multiValued, version: version,
                    fields: fields, fieldForms: forms, computed: computed ? true : nil, fieldPaths: paths))
        }
        return (keyField, schemaVersion, indexes)
    }

    /// The export format version if `value` is an export header (any version), else nil.
    static func headerVersion(_ value: CBORValue) -> CBORValue? {
        guard case .array(let parts) = value, parts.count == 2,
            parts[0].stringValue?.utf8.elementsEqual("buri-export".utf8) == true
        else { return nil }
        return parts[1]
    }

    /// One line of an export after its header.
    enum Line {
        case schema(bucket: String, schema: CBORValue)
        case record(bucket: String, key: String, object: CBORValue, indexValues: CBORValue?)
    }

    /// What an export line is, its members checked: a schema line {"bucket","schema"} or a record
    /// {"bucket","key","object"} (and, from format 4, "indexValues"), nothing else.
    static func classify(
        _ members: [CBORMapEntry], version: UInt64, fail: @escaping (String) -> ToolError
    ) throws -> Line {
        let shapes =
            "an export record is {\"bucket\": text, \"key\": text, \"object\": …\(version >= 4 ? "[, \"indexValues\": {…}]" : "")} and a schema line {\"bucket\": text, \"schema\": {…}}"
        let line = CBORValue.map(members)
        guard let bucketValue = line["bucket"] else {
            throw fail("the line has no \"bucket\"; in an export (it started with the export header) \(shapes)")
        }
        guard case .text(let bucket) = bucketValue else {
            throw fail("\"bucket\" is \(kindName(bucketValue)); it must be the bucket's name as text")
        }
        if line["schema"] != nil {
            let checked = try Members(
                line, place: "the schema line of bucket '\(bucket)'", required: ["bucket", "schema"], fail: fail)
            return .schema(bucket: bucket, schema: checked["schema"] ?? .null)
        }
        let record = try Members(
            line, place: "the record of bucket '\(bucket)'", required: ["bucket", "key", "object"],
            optional: version >= 4 ? ["indexValues"] : [], fail: fail)
        guard let keyValue = record["key"], case .text(let key) = keyValue else {
            throw record.wrong("key", record["key"] ?? .null, "the object's key as text")
        }
        return .record(bucket: bucket, key: key, object: record["object"] ?? .null, indexValues: record["indexValues"])
    }
}

/// How one import computes keys and index values, and the objects it prepared.
struct ImportPlan {
    let bucket: String
    var keyField: String?
    /// Whether the indexes came from the export's schema line (kept exactly, multi-valued included).
    var fromSchema = false
    /// The buckets whose schema lines the input holds, in order.
    var schemaBuckets: [String] = []
    /// The index options given on the command line (checked against a schema line).
    var options: [Import.IndexOption] = []
    /// Whether --key was given.
    var keyGiven = false
    /// Whether a record of this bucket came before its schema line.
    var sawRecord = false
    /// The schema version of the export's schema line (0 without one); `buri restore` gives it
    /// to the bucket and its records.
    var schemaVersion: UInt64 = 0
    /// The indexes (UTF-8 names) that got at least one entry.
    var indexed = Set<[UInt8]>()
    /// The export format of the input (0 until its header is read; plain JSON Lines have none).
    var exportVersion: UInt64 = 0
    /// The indexes of the schema line whose values tools cannot compute: each record carries them
    /// (format 4, "indexValues"), and they are stored as carried.
    var carried: [IndexDefinition] = []

    /// The new indexes no object gave a value: a field name that matches nothing is likely a typo.
    func emptyIndexWarnings(objectCount: Int) -> [String] {
        guard isNew, !fromSchema, objectCount > 0 else { return [] }
        return definitions.filter { !indexed.contains(Array($0.name.utf8)) }.map { definition in
            let fields = (definition.componentPaths ?? []).map { "'\(IndexDefinition.fieldPathText($0))'" }.joined(
                separator: ", ")
            return
                "buri: warning: index '\(definition.name)' has no entries: none of the \(objectCount) objects has a value in field \(fields) (a name is a top-level field, a dotted path such as address.city a nested one; check the name)\n"
        }
    }
    /// The indexes whose values each object gets: the existing bucket's, or the new ones named.
    var definitions: [IndexDefinition]
    /// For a new bucket: which indexes saw an array (they become multi-valued).
    var sawArray: Set<String> = []
    let isNew: Bool
    /// Export records of other buckets that were skipped, by bucket.
    var skipped: [String: Int] = [:]
    /// Whether the input is `buri export` output (decided by its first line).
    var isExport = false

    /// Fields of plain objects that hold dates as seconds since 1970 (`--date`).
    let dateFields: [String]

    init(
        bucket: String, existing: BucketDescriptor?, key: String?, options: [Import.IndexOption],
        dateFields: [String] = [], databasePath: String
    ) throws {
        self.bucket = bucket
        self.dateFields = dateFields
        self.options = options
        keyGiven = key != nil
        guard let existing else {
            isNew = true
            keyField = key
            definitions = options.map { option in
                let isDate =
                    option.kind == .numeric && option.path.count == 1
                    && dateFields.contains { (try? IndexDefinition.parseFieldPath($0).get()) == option.path }
                var definition = IndexDefinition(
                    id: 0, name: option.name, components: [option.kind], fieldForms: isDate ? [.date] : nil)
                definition.setFieldPaths([option.path])
                return definition
            }
            return
        }
        isNew = false
        if let key, let recorded = existing.keyField, !recorded.utf8.elementsEqual(key.utf8) {
            throw ToolError(
                .usage,
                "bucket '\(bucket)' keeps its keys in field '\(recorded)'; pass --key \(recorded) or leave --key out")
        }
        keyField = key ?? existing.keyField
        let describe = { (index: IndexDefinition) -> String in
            let kinds = index.components.map(\.rawValue).joined(separator: ", ")
            guard let paths = index.componentPaths else { return "\(kinds) with no recorded field" }
            return "\(kinds) over field(s) \(paths.map(IndexDefinition.fieldPathText).joined(separator: ", "))"
        }
        for option in options {
            guard let index = existing.index(named: option.name) else {
                let known =
                    existing.indexes.isEmpty
                    ? "it has no indexes"
                    : "its indexes are " + existing.indexes.map { "'\($0.name)'" }.joined(separator: ", ")
                throw ToolError(
                    .usage,
                    "bucket '\(bucket)' already exists without index '\(option.name)' (\(known)); an import cannot add indexes to an existing bucket: leave the option out, or import into a new bucket"
                )
            }
            if index.components != [option.kind] || index.componentPaths.map({ $0 == [option.path] }) == false {
                throw ToolError(
                    .usage,
                    "bucket '\(bucket)' already has index '\(index.name)' as \(describe(index)), not \(option.kind.rawValue) over field \(option.field); leave the option out or make it match"
                )
            }
        }
        // Every index must be computable from the objects exactly as the Swift declaration computes
        // it; an index that gets no entries here would be missing from every imported object.
        for index in existing.indexes {
            if let reason = index.uncomputableReason {
                throw ToolError(
                    .invalidInput,
                    "bucket '\(bucket)' has index '\(index.name)', which `buri import` cannot compute: \(reason); store these objects with the Swift API; nothing was imported"
                )
            }
        }
        definitions = existing.indexes
    }

    /// The definitions of a new bucket's indexes, multi-valued where the data held arrays.
    func newDefinitions() -> [IndexDefinition] {
        if fromSchema { return definitions }
        return definitions.map { definition in
            var copy = definition
            copy.multiValued = sawArray.contains(definition.name)
            return copy
        }
    }

    static let maxKeyLength = 4096
    static let maxTupleLength = 65536

    var skippedList: String {
        skipped.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { "'\($0)' (\(skipped[$0] ?? 0))" }
            .joined(separator: ", ")
    }

    /// Parses and checks every line, returning the objects to store (for inputs held whole:
    /// `buri put` and `buri restore`; `buri import` streams through ``prepare(_:line:)``).
    mutating func objects(from input: [UInt8], progress: Progress) throws -> [RawObject] {
        var objects: [RawObject] = []
        var lineNumber = 0
        var start = 0
        try input.withUnsafeBufferPointer { bytes in
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
                lineNumber += 1
                let line = Array(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                start = end + 1
                if let object = try prepare(line, line: lineNumber) { objects.append(object) }
                if progress.enabled, lineNumber % 1000 == 0 {
                    progress.measure(
                        "reading", done: start, total: bytes.count, bytes: true, detail: "\(lineNumber) lines")
                }
            }
        }
        try checkEnd()
        return objects
    }

    /// Whether no line has been seen yet that decides the kind of input.
    private var first = true
    /// The export records seen (of any bucket).
    private(set) var records = 0
    /// The objects prepared for this bucket (a key given twice counts twice).
    private(set) var prepared = 0

    /// Parses and checks one line (without its newline): the object to store, or nil for a blank
    /// line, the header, a schema line or a record of another bucket.
    mutating func prepare(_ line: [UInt8], line lineNumber: Int) throws -> RawObject? {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return nil }
        if try header(line, line: lineNumber, first: first) {
            first = false
            return nil
        }
        first = false
        let object: RawObject?
        if isExport {
            records += 1
            object = try prepareRecord(line, line: lineNumber)
        } else {
            object = try preparePlain(line, line: lineNumber)
        }
        if object != nil { prepared += 1 }
        return object
    }

    /// The checks that need the whole input, once every line has been prepared.
    func checkEnd() throws {
        if isExport, records > 0, prepared == 0, !fromSchema {
            throw ToolError(
                .invalidInput,
                "the export holds no record of bucket '\(bucket)' (only of \(skippedList)); name one of those buckets; nothing was imported"
            )
        }
    }

    func fail(_ line: Int, _ message: String) -> ToolError { Self.failure(line, message) }

    static func failure(_ line: Int, _ message: String) -> ToolError {
        ToolError(.invalidInput, "line \(line): \(message); nothing was imported")
    }

    /// Whether `bytes` is an export header; the first one decides that the input is an export.
    mutating func header(_ bytes: [UInt8], line: Int, first: Bool) throws -> Bool {
        // Only a line that starts like the header is looked at; objects never do.
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        guard bytes[start...].drop(while: { $0 == 0x20 || $0 == 0x09 }).first == UInt8(ascii: "["),
            let value = try? CBORValue(jsonBytes: bytes), let version = ExportFormat.headerVersion(value)
        else { return false }
        guard case .unsigned(let number) = version, ExportFormat.readable.contains(number) else {
            throw fail(
                line,
                "this is a `buri export` of format \(version.jsonString()), which this buri does not know (it reads formats \(ExportFormat.readableList)); import it with the buri that wrote it, or a newer one"
            )
        }
        if first {
            isExport = true
            exportVersion = number
        } else if !isExport {
            throw fail(
                line,
                "an export header may only start the input (the lines before it are plain objects); import the export on its own"
            )
        }
        return true
    }

    /// The JSON parse error as a one-line message naming line, column and member.
    func malformed(_ error: CBORError, line: Int) -> ToolError { Self.malformed(error, line: line) }

    static func malformed(_ error: CBORError, line: Int) -> ToolError {
        var message = error.message
        if let range = message.range(of: " (line ", options: .backwards) {
            message = String(message[..<range.lowerBound])
        }
        let column = error.column.map { ", column \($0)" } ?? ""
        let field = error.codingPath.isEmpty ? "" : ", field '\(error.codingPath)'"
        return ToolError(
            .invalidInput,
            "line \(line)\(column)\(field): \(error.kind == .invalidJSON ? "invalid JSON: " : "")\(message); nothing was imported"
        )
    }

    /// A plain object: stored as it is, its key from the key field.
    mutating func preparePlain(_ bytes: [UInt8], line: Int) throws -> RawObject {
        var value: CBORValue
        do {
            value = try CBORValue(jsonBytes: bytes)
        } catch let error as CBORError {
            throw malformed(error, line: line)
        }
        guard case .map = value else {
            throw fail(line, "expected a JSON object, found \(kindName(value))")
        }
        guard let keyField else {
            throw fail(line, "a plain object needs a key field, and bucket '\(bucket)' records none; pass --key FIELD")
        }
        guard let field = value[keyField], !field.isNull else {
            throw fail(line, "the object has no key field '\(keyField)'")
        }
        guard let key = keyText(field) else {
            throw fail(line, "key field '\(keyField)' holds \(kindName(field)); a key must be a string or an integer")
        }
        // Plain JSON has no dates: a date field's number is seconds since 1970, stored as a date
        // (tag 1), as the Swift type stores it.
        value = try taggingDates(value, line: line)
        return try rawObject(key: key, object: value, line: line)
    }

    /// An export record: its object stored exactly as exported.
    mutating func prepareRecord(_ bytes: [UInt8], line: Int) throws -> RawObject? {
        let members: [CBORMapEntry]
        do {
            members = try CBORValue.exactJSONMembers(bytes)
        } catch let error as CBORError {
            throw malformed(error, line: line)
        }
        return try prepareRecord(members: members, line: line)
    }

    /// An export line already parsed into its members (`buri restore` routes each to its bucket).
    mutating func prepareRecord(members: [CBORMapEntry], line: Int) throws -> RawObject? {
        let parsed = try ExportFormat.classify(members, version: exportVersion) { Self.failure(line, $0) }
        guard case let .record(recordBucket, key, object, indexValues) = parsed else {
            if case let .schema(schemaBucket, schema) = parsed {
                schemaBuckets.append(schemaBucket)
                if schemaBucket.utf8.elementsEqual(bucket.utf8) {
                    try adoptSchema(schema, line: line)
                } else {
                    // Another bucket's schema is not used, but checked all the same: a malformed
                    // export is refused whichever bucket is imported from it.
                    _ = try ExportFormat.parseSchema(schema) { Self.failure(line, $0) }
                }
            }
            return nil
        }
        guard recordBucket.utf8.elementsEqual(bucket.utf8) else {
            skipped[recordBucket, default: 0] += 1
            return nil
        }
        sawRecord = true
        if let keyField, let field = object[keyField], !field.isNull {
            guard let fieldKey = keyText(field), fieldKey.utf8.elementsEqual(key.utf8) else {
                throw fail(
                    line,
                    "the record's key \(jsonString(key)) disagrees with its object's key field '\(keyField)' (\(field.jsonString())); fix one of them"
                )
            }
        }
        // A plain number in a date field is seconds since 1970 here too (an export writes dates
        // tagged; a hand-written or foreign record may not), never a version 1 record's 2001 seconds.
        return try rawObject(
            key: key, object: try taggingDates(object, line: line), line: line,
            carriedValues: try carriedValues(indexValues, line: line))
    }

    /// The index values a record carries for the indexes tools cannot compute (format 4), checked
    /// against the bucket's schema: exactly those indexes, each an array of value tuples of its kinds.
    func carriedValues(_ member: CBORValue?, line: Int) throws -> [IndexName: [[IndexValue]]] {
        guard let member else {
            if let index = carried.first {
                throw fail(
                    line,
                    "the record carries no \"indexValues\", but index '\(index.name)' of bucket '\(bucket)' is not computed from a field (\(index.uncomputableReason ?? "")): every record must carry its values, as `buri export` writes them"
                )
            }
            return [:]
        }
        guard !carried.isEmpty else {
            let why =
                fromSchema
                ? "its schema line has no index that needs them (each is computed from a field)"
                : "only a bucket created from the export's schema line takes them (this import computes every index from its field)"
            throw fail(
                line,
                "the record carries \"indexValues\", but bucket '\(bucket)' takes none: \(why); remove the member or import into a new bucket from the whole export"
            )
        }
        guard case .map(let entries) = member else {
            throw fail(
                line, "\"indexValues\" is \(kindName(member)); it must be an object {index name: [[value, …], …]}")
        }
        var result: [IndexName: [[IndexValue]]] = [:]
        for entry in entries {
            guard let name = entry.key.stringValue else {
                throw fail(line, "\"indexValues\" has a member named \(entry.key.exactJSONString()), which is not text")
            }
            guard let index = carried.first(where: { $0.name.utf8.elementsEqual(name.utf8) }) else {
                let known = carried.map { "'\($0.name)'" }.joined(separator: ", ")
                throw fail(
                    line,
                    "\"indexValues\" names index \(jsonString(name)), which is not one whose values records carry (bucket '\(bucket)': \(known))"
                )
            }
            let place = "\"indexValues\" of index '\(index.name)'"
            guard case .array(let tuples) = entry.value else {
                throw fail(
                    line,
                    "\(place) is \(kindName(entry.value)); it must be an array of value tuples ([[value, …], …]; [] for no entry)"
                )
            }
            var parsed: [[IndexValue]] = []
            for tuple in tuples {
                guard case .array(let elements) = tuple, elements.count == index.components.count else {
                    throw fail(
                        line,
                        "\(place) holds \(kindName(tuple)); each entry is an array of \(index.components.count) value\(index.components.count == 1 ? "" : "s") (\(index.components.map(\.rawValue).joined(separator: ", ")))"
                    )
                }
                var values: [IndexValue] = []
                for (element, kind) in zip(elements, index.components) {
                    do {
                        values.append(try ExportFormat.indexValue(element, numeric: kind == .numeric))
                    } catch {
                        throw fail(line, "\(place) holds \(element.exactJSONString()): \(error.message)")
                    }
                }
                let length = values.reduce(0) { $0 + $1.encoded.count }
                if length > Self.maxTupleLength {
                    throw fail(
                        line,
                        "the value of index '\(index.name)' is \(length) bytes encoded, over the limit of \(Self.maxTupleLength)"
                    )
                }
                parsed.append(values)
            }
            result[IndexName(index.name)] = parsed
        }
        if let missing = carried.first(where: { result[IndexName($0.name)] == nil }) {
            throw fail(
                line,
                "\"indexValues\" lacks index '\(missing.name)', whose values every record of bucket '\(bucket)' must carry ([] for none)"
            )
        }
        return result
    }

    /// A new bucket takes the indexes and key field of its schema line (an existing one keeps its
    /// own); index options given must each name one of the schema's indexes as it is.
    mutating func adoptSchema(_ value: CBORValue, line: Int) throws {
        guard isNew else { return }
        if sawRecord {
            throw fail(line, "the schema line of bucket '\(bucket)' comes after its records; it must come before them")
        }
        if fromSchema { throw fail(line, "bucket '\(bucket)' has a second schema line; give one") }
        let schema = try ExportFormat.parseSchema(value) { Self.failure(line, $0) }
        for option in options {
            guard let index = schema.indexes.first(where: { $0.name.utf8.elementsEqual(option.name.utf8) }),
                index.components == [option.kind], index.componentPaths == [option.path]
            else {
                throw fail(
                    line,
                    "the export's schema for bucket '\(bucket)' has no \(option.kind.rawValue) index '\(option.name)' over field '\(option.field)' (it has \(schema.indexes.map { "'\($0.name)'" }.joined(separator: ", "))); the export recreates its indexes: leave out the index options"
                )
            }
        }
        for index in schema.indexes {
            if let reason = index.uncomputableReason, exportVersion < 4 {
                throw ToolError(
                    .invalidInput,
                    "line \(line): bucket '\(bucket)' has index '\(index.name)', which buri cannot compute from the objects: \(reason); this export (format \(exportVersion)) does not carry its values: export the database again with this buri (format 4 carries them), or copy the bucket with the Swift API (BuriDatabase.backup); nothing was imported"
                )
            }
        }
        carried = schema.indexes.filter { $0.uncomputableReason != nil }
        if let given = keyField, keyGiven, let recorded = schema.keyField, !given.utf8.elementsEqual(recorded.utf8) {
            throw fail(
                line,
                "the export's schema keeps bucket '\(bucket)''s keys in field '\(recorded)', not '\(given)'; leave --key out"
            )
        }
        if !keyGiven { keyField = schema.keyField }
        schemaVersion = schema.schemaVersion
        definitions = schema.indexes
        fromSchema = true
    }

    /// A key field's value as a key: a string, or an integer as its decimal text.
    func keyText(_ field: CBORValue) -> String? {
        switch field {
        case .text(let text): return text
        case .unsigned(let number): return String(number)
        case .negative: return field.jsonString()
        default: return nil
        }
    }

    /// `object` with each plain number in a date field turned into the date it names (seconds since
    /// 1970), refusing numbers a Swift `Date` cannot hold exactly. Plain objects and export records
    /// alike: a date given as a number means one thing on every path (docs/FORMAT.md §10).
    func taggingDates(_ object: CBORValue, line: Int) throws -> CBORValue {
        // The fields a date index reads (top-level or nested), and those named with --date.
        var dates: [(path: [String], index: String?)] = []
        for definition in definitions {
            for path in definition.datePaths { dates.append((path, definition.name)) }
        }
        for field in dateFields
        where !dates.contains(where: { $0.path.count == 1 && $0.path[0].utf8.elementsEqual(field.utf8) }) {
            dates.append(([field], nil))
        }
        guard !dates.isEmpty else { return object }
        return try DatePaths.rewriting(object, at: dates.map(\.path)) { value, path in
            switch value {
            case .unsigned, .negative, .float:
                let field = IndexDefinition.fieldPathText(path)
                let index = dates.first { $0.path.elementsEqual(path) { $0.utf8.elementsEqual($1.utf8) } }?.index
                let place = index.map { "field '\(field)' of index '\($0)'" } ?? "date field '\(field)'"
                do throws(DatePaths.InputError) {
                    return try DatePaths.dateItem(ofSecondsSince1970: value)
                } catch {
                    switch error {
                    case .notADate:
                        throw fail(
                            line,
                            "\(place) holds \(value.jsonString()), which is not a date a Swift Date holds exactly (seconds since 1970 as a Double)"
                        )
                    case .inexact(let nearest):
                        throw fail(
                            line,
                            "\(place) holds \(value.jsonString()) seconds since 1970, which a Swift Date (a Double of seconds since 2001) cannot hold exactly; the nearest is \(CBORValue.float(nearest).jsonString())"
                        )
                    }
                }
            default:
                return value
            }
        }
    }

    /// The object to store: key checked, index values computed from the recorded fields.
    mutating func rawObject(
        key: String, object: CBORValue, line: Int, carriedValues: [IndexName: [[IndexValue]]] = [:]
    ) throws -> RawObject {
        if key.isEmpty { throw fail(line, "the key is empty; every object needs a non-empty key") }
        if key.utf8.count > Self.maxKeyLength {
            throw fail(line, "the key is \(key.utf8.count) bytes, over the limit of \(Self.maxKeyLength)")
        }
        if let repeated = object.firstRepeatedMapKey() {
            throw fail(
                line, "the object has a map with the key \(repeated.exactJSONString()) twice; give each key once")
        }
        var indexValues: [IndexName: [[IndexValue]]] = [:]
        for definition in definitions {
            let tuples: [[IndexValue]]
            if let values = carriedValues[IndexName(definition.name)] {
                // Stored as the export carried them (checked against the definition's kinds).
                if !values.isEmpty {
                    indexValues[definition.name] = values
                    indexed.insert(Array(definition.name.utf8))
                }
                continue
            }
            do {
                tuples = try definition.tuples(of: object, acceptingArrays: isNew && !fromSchema ? true : nil)
            } catch let BuriError.invalidIndexValue(_, _, index, reason) {
                throw fail(line, "index '\(index ?? definition.name)': \(reason)")
            } catch {
                throw fail(line, "index '\(definition.name)': \(error)")
            }
            if isNew, !fromSchema, let path = definition.componentPaths?.first,
                case .array? = try? IndexDefinition.value(at: path, in: object, index: definition.name)
            {
                sawArray.insert(definition.name)
            }
            let length = tuples.map { $0.reduce(0) { $0 + $1.encoded.count } }.max() ?? 0
            if length > Self.maxTupleLength {
                throw fail(
                    line,
                    "the value of index '\(definition.name)' is \(length) bytes encoded, over the limit of \(Self.maxTupleLength)"
                )
            }
            if !tuples.isEmpty {
                indexValues[definition.name] = tuples
                indexed.insert(Array(definition.name.utf8))
            }
        }
        return RawObject(key: key, payload: object.encoded(), indexValues: indexValues)
    }
}

/// A short description of a JSON value for messages.
func kindName(_ value: CBORValue) -> String {
    switch value {
    case .text(let text):
        return "the string \(CBORValue.text(text.count > 40 ? String(text.prefix(40)) + "…" : text).jsonString())"
    case .unsigned, .negative, .float: return "the number \(value.jsonString())"
    case .bool(let flag): return "\(flag)"
    case .array: return "an array"
    case .map: return "an object"
    case .null, .undefined: return "null"
    default: return "a \(value.exactJSONString()) value"
    }
}

// MARK: - restore

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Create a database from a whole `buri export`: every bucket with its key field and indexes, every object.",
        discussion: """
            The export must carry schema lines (format 3 or 4, written by this buri): each bucket is \
            recreated with its indexes exactly as they were — kinds, fields, field forms, unique, \
            multi-valued, versions — so the restored database answers every query the same, and \
            exporting it again gives the same bytes. Every member of every schema line and record is \
            checked; a wrong one is refused, naming its line and member (docs/FORMAT.md §19). The \
            entries of indexes whose values only Swift code computes (declared without `field:`, or \
            `.computed`) are restored from the values format 4 records carry; a format 3 export of \
            such a bucket is refused, naming the index. The database must be new (a missing path, an \
            empty directory, or a database without buckets). The export is read line by line in bounded memory (a pipe is copied to a \
            temporary file first): each bucket is staged under a fresh, unpublished id as its records \
            come, and one commit publishes every bucket at once. On any error no database is left \
            behind (nor, in a database without buckets, anything staged); if the process is killed, the new database holds no bucket (the next \
            command that writes to it deletes what was staged): restore into it again. With --progress (or on a \
            terminal) reading and publishing show their total, percentage, rate and ETA.

            Example: buri export people.buri -o dump.jsonl && buri restore copy.buri dump.jsonl
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: ArgumentHelp("The export to restore; '-' or nothing reads standard input.", valueName: "file"))
    var file: String?

    @Flag(name: .customLong("progress"), help: "Show progress on standard error even when it is not a terminal.")
    var showProgress = false

    @Flag(name: .customLong("debug-peak-memory"), help: .hidden)
    var debugPeakMemory = false

    func run() throws {
        let path = target.database
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
        let input = try JSONLinesInput(file ?? "-")
        defer { input.release() }
        let progress = Progress(forced: showProgress)
        defer { progress.finish() }

        // One pass, line by line: each schema line begins a staged import creating its bucket;
        // each record goes into its bucket's stage in chunks; all stages publish in one commit.
        var db: BuriDatabase? = existing
        var plans: [ImportPlan] = []
        var stages: [StagedImport] = []
        var byName: [[UInt8]: Int] = [:]
        var chunk: [RawObject] = []
        var chunkLines: [Int] = []
        var chunkBytes = 0
        var chunkOwner = -1
        var total = 0
        var exportVersion: UInt64 = 0
        func flush() throws {
            if !chunk.isEmpty {
                let stage = stages[chunkOwner]
                try Import.store(chunk, lines: chunkLines, partial: false) { try stage.store($0) }
                TestKillHook.chunkStored()
            }
            chunk.removeAll(keepingCapacity: true)
            chunkLines.removeAll(keepingCapacity: true)
            chunkBytes = 0
        }
        func fail(_ line: Int, _ message: String) -> ToolError {
            ToolError(.invalidInput, "line \(line): \(message); nothing was restored")
        }
        do {
            try mapErrors(path: path) {
                try input.rewind()
                var header: (bytes: [UInt8], number: Int)?
                var number = 0
                progress.measure("restoring", done: 0, total: input.size, bytes: true, detail: nil, force: true)
                while let line = try input.nextLine() {
                    number += 1
                    if progress.enabled, number % 1000 == 0 {
                        progress.measure(
                            "restoring", done: input.consumed, total: input.size, bytes: true,
                            detail: "\(number) lines, \(stages.count) bucket\(stages.count == 1 ? "" : "s")")
                    }
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                    guard let header else {
                        let start = line.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(line.dropFirst(3)) : line
                        guard let value = try? CBORValue(jsonBytes: start),
                            let version = ExportFormat.headerVersion(value)
                        else {
                            throw fail(
                                number,
                                "the input is not a `buri export` (it must start with the header \(ExportFormat.header(version: ExportFormat.version)), or \(ExportFormat.header) from an older buri)"
                            )
                        }
                        guard case .unsigned(let known) = version, ExportFormat.readable.contains(known) else {
                            throw fail(
                                number,
                                "this is a `buri export` of format \(version.jsonString()), which this buri does not know (it reads formats \(ExportFormat.readableList)); restore it with the buri that wrote it, or a newer one"
                            )
                        }
                        guard known >= 3 else {
                            throw fail(
                                number,
                                "this export has format \(known), written by an older buri before exports carried each bucket's schema (format 3): restore cannot recreate its indexes; import its buckets one by one with `buri import`, naming their indexes"
                            )
                        }
                        header = (line, number)
                        exportVersion = known
                        continue
                    }
                    let members: [CBORMapEntry]
                    do {
                        members = try CBORValue.exactJSONMembers(line)
                    } catch let error as CBORError {
                        throw ImportPlan.malformed(error, line: number)
                    }
                    let parsed = try ExportFormat.classify(members, version: exportVersion) { fail(number, $0) }
                    let name: String
                    switch parsed {
                    case .schema(let bucket, _), .record(let bucket, _, _, _): name = bucket
                    }
                    let nameBytes = Array(name.utf8)
                    if case .schema = parsed {
                        if byName[nameBytes] != nil {
                            throw fail(number, "bucket '\(name)' has a second schema line; give one per bucket")
                        }
                        var plan = try ImportPlan(
                            bucket: name, existing: nil, key: nil, options: [], databasePath: path)
                        _ = try plan.prepare(header.bytes, line: header.number)
                        _ = try plan.prepare(line, line: number)
                        let database = try db ?? createDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
                        db = database
                        do {
                            stages.append(
                                try database.stageImport(
                                    creating: name, keyField: plan.keyField, indexes: plan.newDefinitions(),
                                    schemaVersion: plan.schemaVersion))
                        } catch let error as BuriError {
                            throw fail(
                                number,
                                "the schema of bucket '\(name)' is not one a bucket can have: \(ToolError(error, path: path).message)"
                            )
                        }
                        plans.append(plan)
                        byName[nameBytes] = plans.count - 1
                        continue
                    }
                    guard let owner = byName[nameBytes] else {
                        throw fail(
                            number,
                            "the export has a record of bucket '\(name)' but no schema line for it before its records (`buri export` writes each bucket's schema line first)"
                        )
                    }
                    guard var object = try plans[owner].prepareRecord(members: members, line: number) else { continue }
                    // The records are written under the bucket's schema version, as the Swift type writes them.
                    object.schemaVersion = plans[owner].schemaVersion
                    if owner != chunkOwner { try flush() }
                    chunkOwner = owner
                    chunkBytes += object.payload.count + object.key.utf8.count
                    chunk.append(object)
                    chunkLines.append(number)
                    if chunk.count >= Import.stageChunk || chunkBytes >= Import.stageChunkBytes { try flush() }
                }
                guard header != nil else {
                    throw ToolError(.invalidInput, "the input is empty; give the output of `buri export`")
                }
                progress.measure(
                    "restoring", done: input.consumed, total: input.size, bytes: true,
                    detail: "\(number) lines, \(stages.count) bucket\(stages.count == 1 ? "" : "s")", force: true)
                try flush()
                let database = try db ?? createDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
                db = database
                do {
                    // What the buckets hold (a key given twice in the dump is one object).
                    total = try publishStages(database, stages, progress: progress).reduce(0, +)
                } catch BuriError.storage(let storage) where storage.code == .limitExceeded {
                    // Only one commit keeps the restore atomic; an engine with transaction limits
                    // (etcd) may refuse it for a dump of many buckets.
                    throw ToolError(
                        .failure,
                        "restore publishes every bucket of the dump in one commit, so that the whole dump appears at once or not at all, and the database's engine refuses a commit that large for \(stages.count) buckets (\(storage.message)); nothing was restored: raise the limit, or import the buckets one at a time with `buri import` (each import is atomic on its own)"
                    )
                }
            }
        } catch {
            // A database this restore created is removed below; one that was there (a killed
            // restore's, without buckets) keeps nothing of the stages.
            for stage in stages {
                if existing != nil { try? stage.discard() } else { stage.abandon() }
            }
            db?.close()
            let manager = FileManager.default
            // Only a database this restore created is removed (one another process created
            // meanwhile made the creation fail, leaving `db` nil).
            if db != nil, existing == nil {
                if !hasFiles(path) {
                    removeCreatedEtcdDatabase(path)
                } else if state == .emptyDirectory {
                    for name in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
                        try? manager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
                    }
                } else {
                    try? manager.removeItem(atPath: path)
                }
            }
            if let tool = error as? ToolError {
                if tool.message.contains("nothing was restored") { throw tool }
                if tool.message.contains("nothing was imported") {
                    throw ToolError(
                        tool.status,
                        tool.message.replacingOccurrences(of: "nothing was imported", with: "nothing was restored"))
                }
                throw ToolError(tool.status, tool.message + "; nothing was restored")
            }
            throw error
        }
        db?.close()
        progress.finish()
        if debugPeakMemory, let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        {
            writeAll(
                2,
                Array(
                    "buri: debug: \(line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "))\n"
                        .utf8))
            writeAll(
                2,
                Array(
                    "buri: debug: searched \(input.bytesSearched) bytes for newlines in an input of \(input.size) bytes\n"
                        .utf8))
        }
        let out = Output.standardOutput()
        try out.line(
            "restored \(stages.count) bucket\(stages.count == 1 ? "" : "s") and \(total) object\(total == 1 ? "" : "s") into \(path)"
        )
        try out.flush()
    }

    /// Opens the database at `path` if it has no buckets (a restore killed before it published
    /// leaves such a database, and restoring into it again must work); refuses one with buckets.
    func openEmptyDatabase(_ path: String) throws -> BuriDatabase {
        var options = BuriOptions()
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
