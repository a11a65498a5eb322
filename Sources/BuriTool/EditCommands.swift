import ArgumentParser
import Buri
import BuriTransfer
import Foundation
import Glibc

// MARK: - put

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store one object, given as JSON, in an existing bucket (replacing any with its key).",
        discussion: """
            The object is one JSON object — on the command line, or read from FILE or standard input \
            ('-' or nothing) — and may span lines, so the pretty JSON of `buri get` can be edited and \
            stored back. At most 16 MiB of JSON is read; a longer input is refused. Its key is its key field (the bucket's recorded one, or --key), and its index \
            values are computed from its fields exactly as `buri import` computes them; numbers are \
            stored exactly or refused. The bucket must exist: `buri import` creates buckets.

            Examples:
              buri put people.buri Person '{"objectId":"p1","name":"Anna","locale":"EN","age":31}'
              buri get people.buri Person p1 > p1.json; $EDITOR p1.json; buri put people.buri Person --file p1.json
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to store the object in.")
    var bucket: String

    @Argument(
        help: ArgumentHelp("The object as JSON (default: read it from --file or standard input).", valueName: "json"))
    var object: String?

    @Option(help: ArgumentHelp("Read the object from this file ('-': standard input).", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("The field holding the object's key, if the bucket records none.", valueName: "field"))
    var key: String?

    @Option(
        name: .customLong("date"),
        help: ArgumentHelp(
            "Field FIELD holds a date as seconds since 1970 (as for `buri import`). Repeatable.", valueName: "field"))
    var dateFields: [String] = []

    /// The most JSON text `buri put` reads for its one object (16 MiB): the input is read up to
    /// this and refused beyond it, rather than held whole however long a stream is.
    static let maxObjectBytes = 16 << 20

    func validate() throws {
        if object != nil, file != nil {
            throw ValidationError("give the object either as an argument or with --file, not both")
        }
        if let key, key.isEmpty { throw ValidationError("--key needs a field name, such as --key id") }
    }

    func run() throws {
        var input: [UInt8]
        if let object, object != "-" {
            input = Array(object.utf8)
            if input.count > Self.maxObjectBytes {
                throw ToolError(
                    .invalidInput,
                    "the object given is \(input.count) bytes, over \(Self.maxObjectBytes >> 20) MiB (\(Self.maxObjectBytes) bytes), the most `buri put` takes for one object; nothing was stored"
                )
            }
        } else {
            input = try readInputFile(file ?? "-", limit: Self.maxObjectBytes, what: "`buri put` reads for one object")
        }
        // JSON allows a line break wherever it allows a space, and never inside a string: joining
        // the lines keeps the text's meaning and makes it the one line the import reader takes.
        input = input.map { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") ? UInt8(ascii: " ") : $0 }
        if input.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
            throw ToolError(.invalidInput, "no object given; pass one JSON object, such as '{\"id\":\"a\",\"n\":1}'")
        }
        let db = try target.open()
        defer { db.close() }
        let path = target.database
        guard let existing = try mapErrors(path: path, { try db.bucketInfo(named: bucket) }) else {
            let known = try mapErrors(path: path) { try db.bucketNames() }
            throw ToolError(
                .notFound,
                "the database has no bucket '\(bucket)' (its buckets: \(known.isEmpty ? "none" : known.map { "'\($0)'" }.joined(separator: ", "))); create it with `buri import`"
            )
        }
        // The JSON is read as `buri import` reads a line (BuriTransfer's reader).
        var reader = try mapTransferErrors(path: path) {
            try JSONRecordReader(
                bucket: bucket, existing: existing, options: ImportOptions(keyField: key, dateFields: dateFields))
        }
        let read: RawObject?
        do {
            read = try mapTransferErrors(path: path) { () throws -> RawObject? in
                let object = try reader.object(fromLine: input, number: 1)
                try reader.finish()
                return object
            }
        } catch let error as ToolError {
            // The import reader's messages, said for one object (its lines were joined into one).
            throw ToolError(
                error.status,
                error.message.replacingOccurrences(of: "nothing was imported", with: "nothing was stored")
                    .replacingOccurrences(
                        of: "unexpected '{' after the JSON value",
                        with:
                            "a second JSON value follows the object (`buri put` stores one; use `buri import` for several)"
                    ))
        }
        guard !reader.isExport, let object = read else {
            throw ToolError(
                .invalidInput,
                "`buri put` stores one plain JSON object; use `buri import` for export records or several objects")
        }
        let raw = try openBucket(db, bucket)
        let replaced = try mapErrors(path: path) { () throws -> Bool in
            let was = try raw.contains(key: object.key)
            try raw.store([object], sync: true)
            return was
        }
        let out = Output.standardOutput()
        try out.line("\(replaced ? "replaced" : "stored") object '\(object.key)' in bucket '\(bucket)'")
        try out.flush()
    }
}

/// The bytes of `name`, or of standard input for '-', read in blocks and never more than `limit`
/// bytes: a longer input is refused (naming the limit) as soon as it passes it, however long the
/// stream is.
func readInputFile(_ name: String, limit: Int, what: String) throws -> [UInt8] {
    let fd: Int32
    if name == "-" {
        fd = 0
    } else {
        fd = open(name, O_RDONLY)
        guard fd >= 0 else {
            let reason =
                errno == ENOENT ? "there is no such file" : "it cannot be read (\(String(cString: strerror(errno))))"
            throw ToolError(.failure, "cannot read '\(name)': \(reason)")
        }
    }
    defer { if fd != 0 { _ = close(fd) } }
    let source = name == "-" ? "standard input" : "'\(name)'"
    var bytes: [UInt8] = []
    let block = 1 << 16
    while true {
        let old = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: block))
        var got = 0
        repeat {
            got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + old, block) }
        } while got < 0 && errno == EINTR
        guard got >= 0 else { throw ToolError(.failure, "cannot read \(source): \(String(cString: strerror(errno)))") }
        bytes.removeLast(block - got)
        if got == 0 { return bytes }
        if bytes.count > limit {
            throw ToolError(
                .invalidInput,
                "\(source) holds more than \(limit >> 20) MiB (\(limit) bytes), the most \(what); nothing was stored (give a smaller input, or store many objects with `buri import`)"
            )
        }
    }
}

// MARK: - delete

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete objects by key, with their index entries, in one atomic batch.",
        discussion: """
            Keys come from the command line, or with --stdin from standard input, one per line (or \
            NUL-terminated with -0) — so the keys a query prints can be deleted: \
            `buri query DB B INDEX … -0 | buri delete DB B --stdin -0`. Prints how many objects were \
            deleted and how many keys were not there. A key that starts with one '-' may be given as \
            it is; one that starts with '--', or is one of its flags (-0, -h, or both as -0h), goes \
            after `--`, so that a mistyped option is never taken for a key nor a key for a flag. A \
            list that `buri keys` or `buri query` cannot delimit (a NUL in a key with -0, a line break \
            one per line) stops them with an error before that key: it is never read here as other keys.

            Examples:
              buri delete people.buri Person p1 p2
              buri query people.buri Person age --below 18 -0 | buri delete people.buri Person --stdin -0
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to delete from.")
    var bucket: String

    // Unrecognized words are keys too, so that a key starting with '-' needs no '--'.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The keys of the objects to delete.", valueName: "key"))
    var keyWords: [String] = []

    var keys: [String] { (try? argumentKeys(keyWords, command: "delete")) ?? [] }

    @Flag(help: "Read the keys from standard input, one per line.")
    var stdin = false

    @Flag(name: .customShort("0"), help: "With --stdin: the keys end with NUL bytes instead of newlines.")
    var nul = false

    func validate() throws {
        let keys = try argumentKeys(keyWords, command: "delete")
        if nul, !stdin {
            throw ValidationError(
                "-0 describes keys read with --stdin; add --stdin (to delete the key '-0', write it after '--': buri delete DB BUCKET -- -0)"
            )
        }
        if keys.isEmpty, !stdin {
            throw ValidationError("give the keys to delete, or --stdin to read them from standard input")
        }
        for key in keys { try checkKeyLength(key) }
    }

    func run() throws {
        var all = keys
        if stdin {
            let bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            let separator = nul ? UInt8(0) : UInt8(ascii: "\n")
            for piece in bytes.split(separator: separator, omittingEmptySubsequences: true) {
                var piece = Array(piece)
                if !nul, piece.last == UInt8(ascii: "\r") { piece.removeLast() }
                guard let key = String(validating: piece, as: UTF8.self) else {
                    throw ToolError(.invalidInput, "a key on standard input is not valid UTF-8; nothing was deleted")
                }
                try checkKeyLength(key)
                all.append(key)
            }
        }
        let db = try target.open()
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        var unique: [String] = []
        var seen = Set<[UInt8]>()
        for key in all where seen.insert(Array(key.utf8)).inserted { unique.append(key) }
        let deleted = try mapErrors(path: target.database) { try raw.delete(keys: unique, sync: true) }
        let missing = unique.count - deleted
        let out = Output.standardOutput()
        var line = "deleted \(deleted) object\(deleted == 1 ? "" : "s") from bucket '\(bucket)'"
        if missing > 0 { line += "; \(missing) key\(missing == 1 ? " was" : "s were") not there" }
        try out.line(line)
        try out.flush()
    }
}

// MARK: - drop

struct Drop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a bucket: its objects, index entries and definition (needs --force).",
        discussion: """
            Without --force, says what would be deleted and changes nothing (exit 2). Export the bucket \
            first if you may want it back: `buri export DB BUCKET -o BUCKET.jsonl`.

            Example: buri drop people.buri Person --force
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to delete.")
    var bucket: String

    @Flag(help: "Really delete the bucket.")
    var force = false

    func run() throws {
        // Without --force nothing is written, not even a pending purge; with it, the dropped
        // bucket's keys (and any other pending purge) are purged before the command returns, so a
        // process that ends right after does not leave them for the next writer.
        let db = try target.open(purgesInBackground: false)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let count = try mapErrors(path: target.database) { try raw.count() }
        let what =
            "bucket '\(bucket)' with \(count) object\(count == 1 ? "" : "s") and \(raw.descriptor.indexes.count) index\(raw.descriptor.indexes.count == 1 ? "" : "es")"
        guard force else {
            throw ToolError(
                .usage,
                "dropping deletes \(what); nothing was changed: run again with --force (export it first with `buri export \(target.database) \(bucket) -o \(bucket).jsonl` to keep a copy)"
            )
        }
        try mapErrors(path: target.database) {
            try db.dropBucket(named: bucket)
            try db.purgeRetiredBuckets()
        }
        let out = Output.standardOutput()
        try out.line("dropped \(what)")
        try out.flush()
    }
}
