import ArgumentParser
import Buri
import BuriTransfer

// MARK: - values

struct Values: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the names of the named values, one per line.",
        discussion: """
            Named values are Codable values an app keeps under a name, outside every bucket \
            (db.values.set(Date(), for: "lastSync")). Names are listed in bytewise order. A name \
            that holds a line break cannot be listed one per line: the command then stops with exit \
            status 2; list with -0 or --json (one JSON array of strings) instead.

            Example: buri values people.buri
            """
    )

    @OptionGroup var target: DatabaseArgument
    @OptionGroup var form: NameListForm

    func run() throws {
        try form.list(target, noun: "value name") { db throws(BuriError) in try db.values.names() }
    }
}

// MARK: - get-value

struct GetValue: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get-value",
        abstract: "Print one named value as pretty JSON.",
        discussion: """
            The value is shown as `buri get` shows an object: its CBOR as JSON (a date as seconds \
            since 1970). With --json it is one line {"value":NAME,"data":…} in the exact JSON form of \
            `buri export`, which `buri set-value` and `buri restore` read back exactly. A name that \
            starts with '-' goes after '--' (buri get-value DB -- -weird). A missing name exits with \
            status 6; a value whose stored bytes are damaged with status 3.

            Example: buri get-value people.buri lastSync
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The value's name.")
    var name: String

    @Flag(help: "Print one line {\"value\",\"data\"} in the exact JSON form of `buri export`, not pretty JSON.")
    var json = false

    func validate() throws { try checkValueName(name) }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        guard let bytes = try mapErrors(path: target.database, { try db.values.cbor(for: name) }) else {
            throw ToolError(
                .notFound,
                "the database has no named value '\(name)'; list its values with `buri values \(target.database)`")
        }
        let value: CBORValue
        do {
            value = try CBORValue(decoding: bytes)
        } catch {
            throw ToolError(
                .failure,
                "named value '\(name)': the stored \(bytes.count) bytes are not valid CBOR (\(error)); the value is damaged: set it again with `buri set-value`, or run `buri check`"
            )
        }
        let out = Output.standardOutput()
        if json {
            try out.line(ExportFormat.valueLine(name: name, value: value))
        } else {
            try out.line(value.jsonString(pretty: true))
        }
        try out.flush()
    }
}

// MARK: - set-value

struct SetValue: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-value",
        abstract: "Store one named value, given as JSON (replacing any under its name).",
        discussion: """
            The value is any JSON value in the exact JSON form of `buri export` — on the command \
            line, or read from FILE or standard input ('-' or nothing) — and may span lines; at most \
            16 MiB is read. Numbers are stored exactly or refused. A date is {"$tag":1,"$value":SECONDS} \
            (seconds since 1970), as `buri get-value --json` prints it; bytes are {"$bytes":BASE64}.

            Examples:
              buri set-value people.buri theme '"dark"'
              buri set-value people.buri lastSync '{"$tag":1,"$value":1700000000}'
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The value's name.")
    var name: String

    @Argument(
        help: ArgumentHelp("The value as JSON (default: read it from --file or standard input).", valueName: "json"))
    var value: String?

    @Option(help: ArgumentHelp("Read the value from this file ('-': standard input).", valueName: "file"))
    var file: String?

    func validate() throws {
        try checkValueName(name)
        if value != nil, file != nil {
            throw ValidationError("give the value either as an argument or with --file, not both")
        }
    }

    func run() throws {
        let input: [UInt8]
        if let value, value != "-" {
            input = Array(value.utf8)
            if input.count > Put.maxObjectBytes {
                throw ToolError(
                    .invalidInput,
                    "the value given is \(input.count) bytes, over \(Put.maxObjectBytes >> 20) MiB, the most `buri set-value` takes; nothing was stored"
                )
            }
        } else {
            input = try readInputFile(
                file ?? "-", limit: Put.maxObjectBytes, what: "`buri set-value` reads for one value")
        }
        let parsed: CBORValue
        do {
            parsed = try CBORValue(exactJSON: input)
        } catch {
            throw ToolError(
                .invalidInput,
                "the value is not JSON in the exact form `buri export` writes (\(error)); give one JSON value, such as '\"dark\"' or '{\"size\":14}'; nothing was stored"
            )
        }
        let db = try target.open()
        defer { db.close() }
        let replaced = try mapErrors(path: target.database) { () throws -> Bool in
            let was = try db.values.contains(name)
            try db.values.setCBOR(parsed.encoded(), for: name, sync: true)
            return was
        }
        let out = Output.standardOutput()
        try out.line("\(replaced ? "replaced" : "stored") value '\(name)'")
        try out.flush()
    }
}

/// A value name's length checked before anything is opened (as object keys are).
func checkValueName(_ name: String) throws {
    if name.isEmpty { throw ValidationError("give the name of a value; names are 1 to 1024 bytes") }
    let length = name.utf8.count
    if length > 1024 {
        throw ValidationError(
            "the name is \(length) bytes, over Buri's limit of 1024 bytes for a value name, so no value has it; give a shorter name"
        )
    }
}
