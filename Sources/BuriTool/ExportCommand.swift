import ArgumentParser
import Buri
import BuriTransfer
import Foundation

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
            (docs/FORMAT.md §19): every database restores from its own export. An export of the whole \
            database (no BUCKET given) ends with one line {"value": NAME, "data": ...} per named value, \
            by name (bytewise), and then has the header ["buri-export",5]. `buri restore` recreates the database from \
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

            The export of an encrypted database holds its data unencrypted: it is refused (exit 2) \
            unless --decrypt is given, and then a warning says so on stderr. `buri restore --key-file \
            FILE` makes an encrypted database from it again.

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

    @Flag(
        help:
            "Export an encrypted database: its objects and named values are written unencrypted (a warning says so on stderr). Without it, exporting an encrypted database is refused."
    )
    var decrypt = false

    func validate() throws {
        if let output, output.isEmpty { throw ValidationError("-o needs a file name") }
        if json, !skipDamaged {
            throw ValidationError("--json describes what --skip-damaged skipped; give --skip-damaged too")
        }
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        // An export is plaintext JSON: of an encrypted database, only when asked for, and said.
        if db.isEncrypted {
            guard decrypt else {
                throw ToolError(
                    .usage,
                    "'\(target.database)' is encrypted, and its export would hold its data unencrypted (JSON Lines, readable by anyone who can read the file); pass --decrypt to accept that; nothing was written"
                )
            }
            writeAll(2, Array("buri: warning: the export holds the database's data unencrypted\n".utf8))
        }
        // The buckets are found before anything is written: an unknown one leaves no file.
        let names: [String]
        if let bucket {
            names = [try openBucket(db, bucket).name]
        } else {
            names = try mapErrors(path: target.database) { try db.bucketNames() }
        }
        // A whole database's export holds its named values too.
        let options = ExportOptions(buckets: names, skipDamaged: skipDamaged, includesValues: bucket == nil)
        let progress = Progress()
        let report: ExportReport
        if let output {
            report = try mapTransferErrors(path: target.database) {
                try db.export(to: URL(fileURLWithPath: output), options: options, progress: progress.handler())
            }
            progress.finish()
        } else {
            let out = Output.standardOutput()
            report = try mapTransferErrors(path: target.database) {
                try db.export(options: options, progress: progress.handler(), writingLinesTo: out.line)
            }
            progress.finish()
            try out.flush()
        }
        try Self.finish(report, json: json)
    }

    /// Says on stderr what `--skip-damaged` skipped, if anything, and then exits with status 1.
    static func finish(_ report: ExportReport, json: Bool) throws {
        guard !report.isComplete else { return }
        var text = ""
        let records = report.skippedRecords
        let ranges = report.skippedRanges
        let exported = report.exported
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
