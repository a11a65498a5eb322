import ArgumentParser
import Buri
import BuriCodec
import BuriEtcd
import BuriTransfer

// MARK: - info

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the format version, buckets, object counts, indexes and size on disk.",
        discussion: "Example: buri info people.buri --json"
    )

    @OptionGroup var target: DatabaseArgument

    @Flag(help: "Print the information as one JSON object instead of text.")
    var json = false

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let path = target.database
        var buckets: [(descriptor: BucketDescriptor, objects: Int, entries: [Int], grouped: [TextPostingStorage?])] = []
        try mapErrors(path: path) {
            for descriptor in try db.allBucketInfo() {
                let raw = try db.rawBucket(named: descriptor.name)
                let entries = try descriptor.indexes.map { index in try raw.entryCount(index: index.name) }
                let grouped = try descriptor.indexes.map { index in try raw.textPostingStorage(index: index.name) }
                buckets.append((descriptor, try raw.count(), entries, grouped))
            }
        }
        // An etcd location has no LevelDB underneath and no files here.
        let kind = engineKind(path)
        let onEtcd = !kind.capabilities.contains(.files)
        let size = onEtcd ? 0 : sizeOnDisk(path)
        let leveldb = LevelDBEngine.libraryVersion
        let out = Output.standardOutput()
        if json {
            let value: CBORValue = .map([
                CBORMapEntry(key: "path", value: .text(path)),
                CBORMapEntry(key: "formatVersion", value: .int(Int64(db.formatVersion))),
                CBORMapEntry(key: "engine", value: .text(kind.name)),
                CBORMapEntry(key: "leveldbVersion", value: onEtcd ? .null : .text(leveldb)),
                CBORMapEntry(key: "sizeOnDisk", value: onEtcd ? .null : .unsigned(size)),
                CBORMapEntry(key: "encrypted", value: .bool(db.isEncrypted)),
                CBORMapEntry(
                    key: "dataKeyGeneration",
                    value: db.dataKeyGenerations.map { .unsigned(UInt64($0.current)) } ?? .null),
                CBORMapEntry(
                    key: "retiringDataKeyGeneration",
                    value: db.dataKeyGenerations?.retiring.map { .unsigned(UInt64($0)) } ?? .null),
                CBORMapEntry(key: "beingEncrypted", value: .bool(db.isBeingEncrypted)),
                CBORMapEntry(
                    key: "buckets",
                    value: .array(
                        buckets.map { bucket in
                            .map([
                                CBORMapEntry(key: "name", value: .text(bucket.descriptor.name)),
                                CBORMapEntry(
                                    key: "keyField", value: bucket.descriptor.keyField.map { .text($0) } ?? .null),
                                CBORMapEntry(key: "objects", value: .int(Int64(bucket.objects))),
                                CBORMapEntry(
                                    key: "indexes",
                                    value: .array(
                                        zip(bucket.descriptor.indexes, zip(bucket.entries, bucket.grouped)).map {
                                            index, counts in
                                            let (entries, grouped) = counts
                                            return
                                                .map([
                                                    CBORMapEntry(key: "name", value: .text(index.name)),
                                                    CBORMapEntry(
                                                        key: "kinds",
                                                        value: .array(index.components.map { .text($0.rawValue) })),
                                                    CBORMapEntry(key: "unique", value: .bool(index.isUnique)),
                                                    CBORMapEntry(key: "multiValued", value: .bool(index.multiValued)),
                                                    CBORMapEntry(
                                                        key: "fields",
                                                        value: index.fields.map { .array($0.map { .text($0) }) }
                                                            ?? .null),
                                                    CBORMapEntry(
                                                        key: "fieldForms",
                                                        value: index.fieldForms.map {
                                                            .array($0.map { .text($0.rawValue) })
                                                        } ?? .null),
                                                    CBORMapEntry(key: "computed", value: .bool(index.computed == true)),
                                                    // Per component, the keys its value is read from (nested fields too).
                                                    CBORMapEntry(
                                                        key: "fieldPaths",
                                                        value: index.componentPaths.map {
                                                            .array($0.map { .array($0.map { .text($0) }) })
                                                        } ?? .null),
                                                    CBORMapEntry(key: "entries", value: .int(Int64(entries))),
                                                    // "text" for a full-text index (searched with `buri
                                                    // search`), else the kinds' own; and its tokenizer.
                                                    CBORMapEntry(
                                                        key: "kind",
                                                        value: .text(
                                                            index.text != nil
                                                                ? "text"
                                                                : index.components.count == 1
                                                                    ? index.components[0].rawValue : "compound")),
                                                    CBORMapEntry(
                                                        key: "text",
                                                        value: index.text.map { text in
                                                            .map([
                                                                CBORMapEntry(
                                                                    key: "tokenizer", value: .int(Int64(text.tokenizer))
                                                                ),
                                                                CBORMapEntry(
                                                                    key: "stopWords",
                                                                    value: .array(
                                                                        (text.stopWords ?? []).map { .text($0) })),
                                                                // Postings grouped in segments, and
                                                                // tombstones cancelling some (FORMAT.md §5c).
                                                                CBORMapEntry(
                                                                    key: "segments",
                                                                    value: .int(Int64(grouped?.segments ?? 0))),
                                                                CBORMapEntry(
                                                                    key: "tombstones",
                                                                    value: .int(Int64(grouped?.tombstones ?? 0))),
                                                            ])
                                                        } ?? .null),
                                                    // Declared plaintext; and whether an encrypted
                                                    // database stores its values as keyed tokens.
                                                    CBORMapEntry(
                                                        key: "plaintext", value: .bool(index.plaintext == true)),
                                                    CBORMapEntry(
                                                        key: "private", value: .bool(db.storesTokens(for: index))),
                                                ])
                                        })),
                            ])
                        })),
            ])
            try out.line(value.jsonString(pretty: true))
        } else {
            try out.line("database:        \(path)")
            try out.line("format version:  \(db.formatVersion)")
            if onEtcd {
                try out.line("engine:          \(kind.name)")
            } else {
                try out.line("LevelDB version: \(leveldb)")
                try out.line("size on disk:    \(formatBytes(size))")
            }
            try out.line(
                "encrypted:       \(db.isEncrypted ? "yes" : "no")"
                    + (db.isBeingEncrypted
                        ? " (being encrypted: buckets still holding plaintext are sealed by running buri encrypt with the key)"
                        : "")
                    + (db.dataKeyGenerations.map { generations in
                        if let retiring = generations.retiring {
                            return
                                " (data key generation \(generations.current); rotating: values still sealed under generation \(retiring) are sealed anew by running buri rekey --rotate-data-key with the key)"
                        }
                        return generations.current > 0 ? " (data key generation \(generations.current))" : ""
                    } ?? ""))
            try out.line("buckets:         \(buckets.count)")
            for bucket in buckets {
                try out.line("")
                let keyField = bucket.descriptor.keyField.map { " (key field '\($0)')" } ?? ""
                try out.line(
                    "bucket '\(bucket.descriptor.name)'\(keyField): \(bucket.objects) object\(bucket.objects == 1 ? "" : "s")"
                )
                if bucket.descriptor.indexes.isEmpty { try out.line("  no indexes") }
                for (index, (entries, grouped)) in zip(bucket.descriptor.indexes, zip(bucket.entries, bucket.grouped)) {
                    var traits = [index.components.map(\.rawValue).joined(separator: ", ")]
                    if let text = index.text {
                        // A full-text index: one entry per word, multi-valued by nature.
                        let words = text.stopWords ?? []
                        traits = [
                            "text", "tokenizer \(text.tokenizer)",
                            words.isEmpty ? "no stop words" : "stop words " + words.joined(separator: ", "),
                        ]
                    }
                    if index.isUnique { traits.append("unique") }
                    if index.multiValued, index.text == nil { traits.append("multi-valued") }
                    if let paths = index.componentPaths {
                        let forms = index.fieldForms ?? []
                        let fields = paths.map(IndexDefinition.fieldPathText)
                        let named = fields.enumerated().map { i, field in
                            i < forms.count && forms[i] == .date ? "\(field) (date)" : field
                        }
                        traits.append("field\(fields.count == 1 ? "" : "s") " + named.joined(separator: ", "))
                    }
                    if index.computed == true { traits.append("computed") }
                    // How an encrypted database stores its values: readable, or as keyed tokens
                    // (which match exactly, but have no order).
                    if db.isEncrypted {
                        traits.append(db.storesTokens(for: index) ? "private (keyed tokens)" : "plaintext")
                    }
                    // A text index's postings in segments are counted among its entries, one per
                    // posting; the segments and tombstones holding them are shown beside.
                    let storage =
                        grouped.map { grouped in
                            grouped.segments == 0 && grouped.tombstones == 0
                                ? ""
                                : " (\(grouped.segments) segment\(grouped.segments == 1 ? "" : "s"), \(grouped.tombstones) tombstone\(grouped.tombstones == 1 ? "" : "s"))"
                        } ?? ""
                    try out.line(
                        "  index '\(index.name)' (\(traits.joined(separator: "; "))): \(entries) entr\(entries == 1 ? "y" : "ies")\(storage)"
                    )
                }
            }
        }
        try out.flush()
    }
}

// MARK: - buckets

struct Buckets: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the bucket names, one per line.",
        discussion: """
            A name that holds a line break (or ends with a carriage return) cannot be listed one per \
            line: the command then stops with exit status 2; list with -0 or --json instead.

            Example: buri buckets people.buri
            """
    )

    @OptionGroup var target: DatabaseArgument
    @OptionGroup var form: NameListForm

    func run() throws {
        try form.list(target, noun: "bucket name") { db throws(BuriError) in try db.bucketNames() }
    }
}

/// How a command lists names (`buri buckets`, `buri values`): one per line, NUL-ended, or JSON.
struct NameListForm: ParsableArguments {
    @Flag(help: "Print the names as one JSON array of strings.")
    var json = false

    @Flag(
        name: .customShort("0"), help: "End each name with a NUL byte instead of a newline (names may hold newlines).")
    var nul = false

    func validate() throws {
        if json, nul { throw ValidationError("--json and -0 are two output forms; give one") }
    }

    /// Opens `target` read-only and lists the names `read` gives, each a `noun` in errors.
    func list(_ target: DatabaseArgument, noun: String, _ read: (BuriDatabase) throws(BuriError) -> [String]) throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let out = Output.standardOutput()
        let list = KeyListWriter(out, json: json, nul: nul, source: "the database", noun: noun)
        let names = try mapErrors(path: target.database, { try read(db) })
        try list.begin()
        try list.listing { for name in names { try list.key(name) } }
        try list.end()
        try out.flush()
    }
}

// MARK: - keys

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the keys of a bucket, one per line, in key order.",
        discussion: """
            Keys are ordered bytewise (as UTF-8). --from and --to bound the range inclusively, \
            --above and --below exclusively; any of them alone, and with --prefix. The walk starts \
            at the range's first key.

            Examples:
              buri keys people.buri Person --prefix person-00 --limit 10
              buri keys people.buri Person --from person-00100 --below person-00200
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket whose keys to list.")
    var bucket: String

    @Option(parsing: .unconditional, help: "Only keys that begin with this text.")
    var prefix: String?

    @Option(parsing: .unconditional, help: "Only keys at or after this key (bytewise).")
    var from: String?

    @Option(parsing: .unconditional, help: "Only keys after this key (bytewise).")
    var above: String?

    @Option(parsing: .unconditional, help: "Only keys at or before this key (bytewise).")
    var to: String?

    @Option(parsing: .unconditional, help: "Only keys before this key (bytewise).")
    var below: String?

    @Option(parsing: .unconditional, help: "At most this many keys.")
    var limit: Int?

    @Flag(help: "List in descending key order.")
    var reverse = false

    @OptionGroup var keyFormat: KeyListFormat

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit)") }
        if from != nil, above != nil {
            throw ValidationError("give --from (inclusive) or --above (exclusive), not both")
        }
        if to != nil, below != nil { throw ValidationError("give --to (inclusive) or --below (exclusive), not both") }
    }

    var lower: RawBucket.KeyBound? { from.map { .inclusive($0) } ?? above.map { .exclusive($0) } }
    var upper: RawBucket.KeyBound? { to.map { .inclusive($0) } ?? below.map { .exclusive($0) } }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let out = Output.standardOutput()
        let list = KeyListWriter(out, keyFormat, source: "bucket '\(bucket)'")
        try list.begin()
        try list.listing {
            try mapErrors(path: target.database) {
                if prefix != nil || lower != nil || upper != nil {
                    for key in try raw.keys(
                        withPrefix: prefix ?? "", from: lower, to: upper, reverse: reverse, limit: limit)
                    { try list.key(key) }
                } else {
                    var query = Query.all
                    if reverse { query = query.descending() }
                    if let limit { query = query.limit(limit) }
                    let cursor = try raw.cursor(query)
                    while let key = try cursor.nextKey() { try list.key(key) }
                }
            }
        }
        try list.end()
        try out.flush()
    }
}

// MARK: - get

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print one object as pretty JSON.",
        discussion: """
            A key that starts with one '-' may be given as it is (buri get DB BUCKET -weird); one that \
            starts with '--', or that is -h (help), goes after '--' (buri get DB BUCKET -- --weird), so \
            that a mistyped option is never taken for a key nor a key for a request for help.

            Example: buri get people.buri Person person-00042
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket holding the object.")
    var bucket: String

    // Unrecognized words are the key too, so that a key starting with '-' needs no '--'.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The object's key.", valueName: "key"))
    var keyArguments: [String] = []

    @Flag(
        help:
            "Print the object as one line {\"bucket\",\"key\",\"object\"} in the exact JSON form of `buri export` (importable), not pretty JSON."
    )
    var json = false

    var key: String { ((try? argumentKeys(keyArguments, command: "get")) ?? []).first ?? "" }

    func validate() throws {
        let keys = try argumentKeys(keyArguments, command: "get")
        guard keys.count == 1 else {
            throw ValidationError(
                keys.isEmpty
                    ? "give the key of the object to print"
                    : "give one key, not \(keys.count) (\(keys.map { "'\($0)'" }.joined(separator: ", ")))")
        }
        try checkKeyLength(keys[0])
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        guard let record = try mapErrors(path: target.database, { try raw.record(forKey: key) }) else {
            throw ToolError(
                .notFound,
                "bucket '\(bucket)' has no object with key '\(key)'; list its keys with `buri keys \(target.database) \(bucket)`"
            )
        }
        let out = Output.standardOutput()
        if json {
            try out.line(try exportRecordLine(record, of: raw.descriptor))
        } else {
            try out.line(
                try jsonText(
                    ofPayload: record.payload, pretty: true, bucket: bucket, key: key, dates: raw.descriptor.datePaths))
        }
        try out.flush()
    }
}

// MARK: - query

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Find objects through an index: keys one per line, or objects as JSON Lines.",
        discussion: """
            Values are read per the index's component kind: numeric components take numbers \
            exactly — integers that are an Int64, a UInt64 or exactly a double, decimals that a double \
            holds exactly, Infinity, -Infinity; anything else is refused, never rounded — and dates as \
            seconds since 1970 (as `buri get` shows them); binary components take UTF-8 text. --from and \
            --to are inclusive bounds, --above and --below exclusive ones; any one may be given alone. \
            For a compound index, --equals takes the values of its leading components, either once \
            separated by ',' (write '\\,' for a comma inside a value and '\\\\' for a backslash) or \
            repeated, one value each, taken as written; it may be combined with a range or --prefix \
            for the next component.

            --where EXPR, --or EXPR and --not EXPR are applied left to right in the order given, each \
            to the query so far: --where ANDs its expression with it, --or ORs it, --not ANDs the \
            expression's negation; so --where A --or B --where C is (A or B) and C, and --where A --not \
            B is A and not B. INDEX with --equals, --in, a range or --prefix, if given, is the first \
            condition; without it the first option must be --where or --not.

            \(QueryExpression.syntaxHelp)

            Order: results come in the index order of the first condition that is not inside an OR or \
            a NOT (key order when there is none). --order-by INDEX orders them by that index instead, \
            INDEX:desc largest first; repeated, each further index orders the results the ones before \
            it tie on, and objects without a value in an --order-by index come after the others. \
            --reverse reverses the whole order.

            --objects prints what `buri export` prints for the matches — the header line, then \
            {"bucket","key","object"} records in the exact JSON form — so `buri query … --objects | \
            buri import …` copies them. --count prints only the number of matches; --offset skips \
            that many first.

            --in VALUE, repeated, matches any of the values (SQL's IN), in the index's order, each \
            object once; after --equals it lists the next component's values.

            --sum, --avg, --min and --max INDEX print statistics of a numeric index over the matches \
            (every object when no condition is given), computed from index entries without decoding \
            objects: `count N` and one `NAME VALUE` line each, or one JSON object with --json. Integer \
            sums are exact; a sum with any fraction is the exact total rounded once; infinities and NaN \
            print as "Infinity", "-Infinity", "NaN". --group-by INDEX prints one row per value of that \
            index (a tab-separated table with a header line, or a JSON array with --json), values as \
            JSON, null for the matches without a value.

            With --page-size N, at most N results are printed and, if the walk has more, the line \
            `next: TOKEN` goes to standard error; run the same query with --after TOKEN for the next \
            page. --limit caps the whole walk. A token works only with the query that issued it.

            Examples:
              buri query people.buri Person age --from 20 --to 29
              buri query people.buri Person locale --equals EN --objects --limit 5
              buri query people.buri Person locale_age --equals EN,30
              buri query people.buri Person age --above 20 --below 30 --count
              buri query people.buri Person name_age --equals 'Smith\\, John,40'
              buri query people.buri Person name_age --equals 'Smith, John' --equals 40
              buri query people.buri Person age --from 20 --page-size 100 --after b1000000…
              buri query people.buri Person locale --in EN --in NL --limit 50
              buri query people.buri Person locale --equals EN --sum age --avg age
              buri query people.buri Person age --max age --group-by locale --json
              buri query people.buri Person --where 'age:20..29 and locale:EN|NL'
              buri query people.buri Person --where locale:EN --or 'age:<18' --order-by age
              buri query people.buri Person --where 'age:>=30' --not 'name_age:A*' --count
              buri query people.buri Person --where 'locale_age:EN,20..<30' --max age
              buri query people.buri Person --order-by locale --order-by age:desc --limit 9
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to query.")
    var bucket: String

    @Argument(
        help: ArgumentHelp(
            "The index that --equals, --in, a range or --prefix constrain (left out when only --where/--or/--not, --order-by or statistics are given).",
            valueName: "index"))
    var index: String?

    @Option(
        name: .customLong("where"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Objects that also match this expression (AND); repeatable. See the expression syntax above.",
            valueName: "expr"))
    var wheres: [String] = []

    @Option(
        name: .customLong("or"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("The query so far, OR this expression; repeatable.", valueName: "expr"))
    var ors: [String] = []

    @Option(
        name: .customLong("not"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("The query so far, AND NOT this expression; repeatable.", valueName: "expr"))
    var nots: [String] = []

    @Option(
        name: .customLong("order-by"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Order the results by this index, ascending or (with :desc) descending; repeat it for ties (the first is primary).",
            valueName: "index[:desc|:asc]"))
    var orderBy: [String] = []

    @Option(
        parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Objects whose index value equals this (compound indexes: leading values separated by ',', '\\,' for a comma in a value; or repeat --equals, one value each).",
            valueName: "value"))
    var equals: [String] = []

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Objects whose index value is at least this (inclusive).", valueName: "value"))
    var from: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Objects whose index value is at most this (inclusive).", valueName: "value"))
    var to: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Objects whose index value is greater than this (exclusive).", valueName: "value"))
    var above: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Objects whose index value is less than this (exclusive).", valueName: "value"))
    var below: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Objects whose binary index value begins with this text.", valueName: "text"))
    var prefix: String?

    @Option(
        name: .customLong("in"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Objects whose index value (or, after --equals, the next component) is any of these; repeat it, one value each.",
            valueName: "value"))
    var anyOf: [String] = []

    @Flag(
        help:
            "Print the matching objects as `buri export` does: its header line, then {\"bucket\",\"key\",\"object\"} records (importable)."
    )
    var objects = false

    @Flag(help: "Print only the number of matching objects.")
    var count = false

    @Option(parsing: .unconditional, help: "At most this many results.")
    var limit: Int?

    @Option(parsing: .unconditional, help: "Skip this many results first.")
    var offset: Int?

    @OptionGroup var keyFormat: KeyListFormat

    @OptionGroup var aggregates: AggregateOptions

    @Flag(help: "Return results in descending index order.")
    var reverse = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Print at most this many results, then `next: TOKEN` on standard error if there are more.", valueName: "n"))
    var pageSize: Int?

    @Option(
        help: ArgumentHelp(
            "Resume after this token, printed by a --page-size run of the same query.", valueName: "token"))
    var after: String?

    /// Whether a range or prefix constrains the component after the --equals values.
    var hasNext: Bool { from != nil || to != nil || above != nil || below != nil || prefix != nil || !anyOf.isEmpty }

    func validate() throws {
        if aggregates.isRequested, count || objects || pageSize != nil || keyFormat.nul {
            throw ValidationError(
                "--sum, --avg, --min and --max print statistics; they cannot be combined with --count, --objects, --page-size or -0"
            )
        }
        let hasExpressions = !wheres.isEmpty || !ors.isEmpty || !nots.isEmpty
        if let index {
            if equals.isEmpty, !hasNext, hasExpressions || !orderBy.isEmpty {
                throw ValidationError(
                    "the index '\(index)' is given with no --equals, --in, range or --prefix for it; with --where, --or, --not or --order-by leave INDEX out (write its condition as --where '\(index):VALUE'; to order by it, --order-by '\(index)')"
                )
            }
            if equals.isEmpty, !hasNext, !aggregates.isRequested {
                throw ValidationError(
                    "give a condition: --equals VALUE, a range (--from/--above A and/or --to/--below B), or --prefix TEXT"
                )
            }
        } else if !equals.isEmpty || hasNext {
            throw ValidationError(
                "--equals, --in, --from, --to, --above, --below and --prefix constrain INDEX: name it after the bucket (buri query DB BUCKET INDEX --equals VALUE), or write the condition as --where INDEX:VALUE"
            )
        } else if !hasExpressions, orderBy.isEmpty, !aggregates.isRequested {
            throw ValidationError(
                "give a condition: --where EXPR (such as --where age:20..29), or INDEX with --equals VALUE, a range (--from/--above A and/or --to/--below B), --in VALUE or --prefix TEXT"
            )
        }
        if !anyOf.isEmpty, prefix != nil || from != nil || to != nil || above != nil || below != nil {
            throw ValidationError(
                "--in lists the values the component may have; it cannot be combined with a range or --prefix")
        }
        if prefix != nil, from != nil || to != nil || above != nil || below != nil {
            throw ValidationError("--prefix cannot be combined with --from/--to/--above/--below; use one or the other")
        }
        if from != nil, above != nil {
            throw ValidationError(
                "--from and --above both give a lower bound; give one (--from includes the value, --above excludes it)")
        }
        if to != nil, below != nil {
            throw ValidationError(
                "--to and --below both give an upper bound; give one (--to includes the value, --below excludes it)")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit)") }
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more, not \(offset)") }
        if let pageSize, pageSize < 1 { throw ValidationError("--page-size must be 1 or more, not \(pageSize)") }
        if count, objects || pageSize != nil || keyFormat.nul {
            throw ValidationError(
                "--count prints only a number; it cannot be combined with --objects, --page-size or -0")
        }
        if objects, keyFormat.json || keyFormat.nul {
            throw ValidationError("--objects prints JSON Lines records already; drop --json and -0")
        }
    }

    func run() throws {
        // The expressions' syntax is checked before the database is opened.
        var expressions: [(option: GivenExpression, expression: QueryExpression)] = []
        for option in try givenExpressions() {
            do {
                expressions.append((option, try ExpressionParser.parse(option.text)))
            } catch {
                throw error.toolError(option: option.name, expression: option.text)
            }
        }
        if let first = expressions.first?.option, first.name == "--or", equals.isEmpty, !hasNext {
            throw ToolError(
                .usage,
                "--or '\(oneLine(first.text))' comes first, with no condition before it to be OR-ed with; begin with --where EXPR"
            )
        }
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let descriptor = raw.descriptor
        // The INDEX condition first (statistics without any condition are of every object), then
        // the expressions left to right.
        var built: Query?
        if let index {
            guard let definition = descriptor.index(named: index) else {
                throw ToolError(
                    BuriError.unknownIndex(bucket: bucket, index: index, known: descriptor.indexes.map(\.name)))
            }
            if !equals.isEmpty || hasNext { built = try makeQuery(definition) }
        }
        for (option, expression) in expressions {
            let part: Query
            do {
                part = try expression.query(on: descriptor)
            } catch {
                throw error.toolError(option: option.name, expression: option.text)
            }
            switch option.name {
            case "--where": built = built.map { $0.and(part) } ?? part
            case "--or": built = built.map { $0.or(part) } ?? part
            default: built = built.map { $0.and(.not(part)) } ?? .not(part)
            }
        }
        var query = built ?? .all
        let sortKeys = try orderByKeys(descriptor)
        if let first = sortKeys.first {
            query = query.order(by: first)
            for key in sortKeys.dropFirst() { query = query.then(by: key) }
        }
        if reverse { query = query.descending() }
        if let offset, offset > 0 { query = query.offset(offset) }
        if let limit { query = query.limit(limit) }
        if let after {
            query = query.after(try mapErrors(path: target.database) { try ContinuationToken(parsing: after) })
        }
        let out = Output.standardOutput()
        if aggregates.isRequested {
            try aggregates.run(raw, query: query, json: keyFormat.json, path: target.database, out: out)
            return
        }
        if count {
            let matches = try mapErrors(path: target.database) { try raw.count(query) }
            try out.line(keyFormat.json ? "{\"count\":\(matches)}" : String(matches))
            try out.flush()
            return
        }
        if objects { try out.line(ExportFormat.header(version: 3)) }
        let list = KeyListWriter(
            out, keyFormat, source: index.map { "bucket '\(bucket)', index '\($0)'" } ?? "bucket '\(bucket)'")
        if let pageSize {
            if keyFormat.json { try out.write("{\"keys\":") }
            if !objects { try list.begin() }
            var next: ContinuationToken?
            do {
                try list.listing(newline: false) {
                    next = try mapErrors(path: target.database) { () throws -> ContinuationToken? in
                        if objects {
                            let page = try raw.page(query, size: pageSize)
                            for record in page.items {
                                try out.line(try exportRecordLine(record, of: descriptor))
                            }
                            return page.next
                        }
                        let page = try raw.keyPage(query, size: pageSize)
                        for key in page.items { try list.key(key) }
                        return page.next
                    }
                }
            } catch {
                // {"keys":[…,{"error":…}]}: valid JSON, with no "next" to go on from.
                if keyFormat.json, !objects {
                    try? out.line("}")
                    try? out.flush()
                }
                throw error
            }
            if !objects { try list.end(newline: !keyFormat.json) }
            if keyFormat.json { try out.line(",\"next\":" + (next.map { jsonString($0.description) } ?? "null") + "}") }
            try out.flush()
            if let next, !keyFormat.json { _ = writeAll(2, Array("next: \(next)\n".utf8)) }
            return
        }
        if !objects { try list.begin() }
        try list.listing {
            try mapErrors(path: target.database) {
                let cursor = try raw.cursor(query)
                if objects {
                    while let record = try cursor.nextRecord() {
                        try out.line(try exportRecordLine(record, of: descriptor))
                    }
                } else {
                    while let key = try cursor.nextKey() { try list.key(key) }
                }
            }
        }
        if !objects { try list.end() }
        try out.flush()
    }

    /// One --where, --or or --not.
    struct GivenExpression {
        var name: String
        var text: String
    }

    /// The --where, --or and --not options in the order they were given, as ``GivenOptions``
    /// recorded them from the command line; checked against what ArgumentParser read.
    func givenExpressions() throws -> [GivenExpression] {
        let names = ["--where", "--or", "--not"]
        let recorded = GivenOptions.inOrder.filter { names.contains($0.name) }.map {
            GivenExpression(name: $0.name, text: $0.value)
        }
        func agrees(_ name: String, _ values: [String]) -> Bool {
            let given = recorded.filter { $0.name == name }.map(\.text)
            return given.count == values.count && zip(given, values).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
        }
        if agrees("--where", wheres), agrees("--or", ors), agrees("--not", nots) { return recorded }
        // Not run from the command line (no record): the order matters only across options.
        if ors.isEmpty, nots.isEmpty { return wheres.map { GivenExpression(name: "--where", text: $0) } }
        throw ToolError(
            .failure,
            "the order of --where, --or and --not could not be read from the command line, and the query depends on it; nothing was read"
        )
    }

    /// The --order-by keys: INDEX, INDEX:asc or INDEX:desc (a whole value that names an index is
    /// that index, ascending, even if it ends so).
    func orderByKeys(_ descriptor: BucketDescriptor) throws -> [SortKey] {
        var keys: [SortKey] = []
        for text in orderBy {
            var name = text
            var descending = false
            let scalars = text.unicodeScalars
            if descriptor.index(named: text) == nil, let colon = scalars.lastIndex(of: ":") {
                let suffix = String(scalars[scalars.index(after: colon)...])
                guard ["asc", "desc"].contains(suffix.lowercased()) else {
                    throw ToolError(
                        .usage,
                        "--order-by '\(text)': write INDEX, INDEX:asc or INDEX:desc ('\(suffix)' after the last ':' is neither, and bucket '\(descriptor.name)' has no index '\(text)')"
                    )
                }
                name = String(scalars[..<colon])
                descending = suffix.lowercased() == "desc"
            }
            guard descriptor.index(named: name) != nil else {
                throw ToolError(
                    BuriError.unknownIndex(
                        bucket: descriptor.name, index: name, known: descriptor.indexes.map(\.name)))
            }
            keys.append(SortKey(index: name, descending: descending))
        }
        return keys
    }

    /// The --equals values: repeated options verbatim, or one option split at unescaped commas
    /// (`\,` is a comma, `\\` a backslash) for a compound index.
    func equalsValues(arity: Int) throws -> [String] {
        if equals.count != 1 { return equals }
        let text = equals[0]
        guard arity > 1 else { return [text] }
        var values: [String] = []
        var current: [UInt8] = []
        var escaped = false
        for byte in text.utf8 {
            if escaped {
                guard byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\\") else {
                    throw ToolError(
                        .usage,
                        "--equals '\(text)': '\\' must be followed by ',' or '\\' (write '\\,' for a comma inside a value, '\\\\' for a backslash)"
                    )
                }
                current.append(byte)
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: ",") {
                values.append(String(decoding: current, as: UTF8.self))
                current = []
            } else {
                current.append(byte)
            }
        }
        if escaped { throw ToolError(.usage, "--equals '\(text)' ends with a lone '\\'; write '\\\\' for a backslash") }
        values.append(String(decoding: current, as: UTF8.self))
        return values
    }

    /// The library query for the options, with values parsed per the index's component kinds.
    func makeQuery(_ definition: IndexDefinition) throws -> Query {
        let kinds = definition.components
        let arity = kinds.count
        let leadingTexts = try equalsValues(arity: arity)
        let room = hasNext ? arity - 1 : arity
        if leadingTexts.count > room {
            let what = arity == 1 ? "1 component" : "\(arity) components"
            let hint =
                hasNext
                ? "; --equals may name at most \(room) leading value(s) when a range or --prefix constrains the next component (write '\\,' for a comma inside a value)"
                : "; separate at most \(arity) values with ',' (write '\\,' for a comma inside a value) or repeat --equals"
            throw ToolError(
                .usage,
                "index '\(definition.name)' has \(what) but --equals gives \(leadingTexts.count) value(s)\(hint)")
        }
        var leading: [IndexValue] = []
        for (position, text) in leadingTexts.enumerated() {
            leading.append(
                try parseIndexValue(text, kind: kinds[position], index: definition.name, option: "--equals value"))
        }
        let next = leading.count
        if let prefix {
            guard kinds[next] == .binary else {
                throw ToolError(
                    .usage,
                    "--prefix needs a binary index component, but component \(next + 1) of index '\(definition.name)' is numeric; use --from/--to"
                )
            }
            return .index(definition.name, leading: leading, prefixBytes: Array(prefix.utf8))
        }
        if !anyOf.isEmpty {
            var values: [IndexValue] = []
            for text in anyOf {
                values.append(
                    try parseIndexValue(text, kind: kinds[next], index: definition.name, option: "--in value"))
            }
            return .index(definition.name, leading: leading, in: values)
        }
        if hasNext {
            var lower = IndexBound.unbounded
            var upper = IndexBound.unbounded
            if let from {
                lower = .inclusive(
                    try parseIndexValue(from, kind: kinds[next], index: definition.name, option: "--from"))
            }
            if let above {
                lower = .exclusive(
                    try parseIndexValue(above, kind: kinds[next], index: definition.name, option: "--above"))
            }
            if let to {
                upper = .inclusive(try parseIndexValue(to, kind: kinds[next], index: definition.name, option: "--to"))
            }
            if let below {
                upper = .exclusive(
                    try parseIndexValue(below, kind: kinds[next], index: definition.name, option: "--below"))
            }
            return .index(definition.name, leading: leading, from: lower, to: upper)
        }
        // Exact match on the leading components: the very query the Swift API's
        // `.index(name, equals: values…)` builds, so a page token passes between the two.
        guard !leading.isEmpty else {
            throw ToolError(.usage, "--equals gives no value; give one value per leading component")
        }
        return .index(definition.name, equals: leading)
    }
}

// MARK: - key lists

/// How commands that list keys print them: lines, `--json` (one JSON array), `-0` (NUL-terminated).
struct KeyListFormat: ParsableArguments {
    @Flag(
        help:
            "Print the keys as one JSON array of strings (if an error stops the listing, the array ends with an {\"error\": MESSAGE} element and the exit status is not 0)."
    )
    var json = false

    @Flag(
        name: .customShort("0"),
        help:
            "End each key with a NUL byte instead of a newline (for xargs -0; keys may hold newlines). A key that holds a NUL byte cannot be listed so: the command stops there with exit status 2; use --json."
    )
    var nul = false

    func validate() throws {
        if json, nul { throw ValidationError("--json and -0 are two output forms; give one") }
    }
}

/// Writes a list of keys (or names) in a ``KeyListFormat``: one a line, NUL-terminated, or a JSON
/// array. A key its form cannot delimit — a NUL byte with `-0`; a line break, or a carriage return
/// at its end (which `buri delete --stdin` takes for a Windows line end), one a line — stops the
/// list with an error naming it rather than being printed as other keys: `keys … -0 | delete
/// --stdin -0` must never delete `a` and `b` for the key "a\0b". An error that stops a JSON array
/// ends it with an `{"error": MESSAGE}` element (``fail(_:)``), so the output stays valid JSON but
/// can never be taken for a complete list of strings.
final class KeyListWriter {
    let out: Output
    let format: (json: Bool, nul: Bool)
    /// What is listed, for messages: "bucket 'B'", "the database".
    let source: String
    /// What one item is: "key", "bucket name".
    let noun: String
    private var first = true
    private var open = false

    init(_ out: Output, json: Bool, nul: Bool, source: String, noun: String = "key") {
        self.out = out
        format = (json, nul)
        self.source = source
        self.noun = noun
    }

    convenience init(_ out: Output, _ format: KeyListFormat, source: String) {
        self.init(out, json: format.json, nul: format.nul, source: source)
    }

    func begin() throws {
        if format.json {
            try out.write("[")
            open = true
        }
    }

    func key(_ key: String) throws {
        if format.json {
            try out.write((first ? "" : ",") + jsonString(key))
        } else if format.nul {
            if key.utf8.contains(0) {
                throw ToolError(
                    .usage,
                    "\(source): the \(noun) \(jsonString(key)) holds a NUL byte, which ends a \(noun) in -0 output, so it cannot be listed that way (it would read as other \(noun)s); the list stops before it: list with --json instead"
                )
            }
            try out.write(key + "\u{0}")
        } else {
            let bytes = key.utf8
            if bytes.contains(UInt8(ascii: "\n")) || bytes.last == UInt8(ascii: "\r") {
                let what =
                    bytes.contains(UInt8(ascii: "\n"))
                    ? "holds a line break" : "ends with a carriage return (which readers drop as part of a line end)"
                throw ToolError(
                    .usage,
                    "\(source): the \(noun) \(jsonString(key)) \(what), so it cannot be listed one per line (it would read as other \(noun)s); the list stops before it: list with -0 (NUL-terminated) or --json instead"
                )
            }
            try out.line(key)
        }
        first = false
    }

    func end(newline: Bool = true) throws {
        if format.json {
            open = false
            try newline ? out.line("]") : out.write("]")
        }
    }

    /// After `error` stopped the list: a JSON array still open is closed with an
    /// `{"error": MESSAGE}` element (valid JSON, never a list of strings taken for complete) and
    /// written out. Lines and NUL-terminated keys get nothing more (what is still buffered is not
    /// written). `error` is then reported as usual.
    func fail(_ error: any Error, newline: Bool = true) {
        if open {
            let message: String
            switch error {
            case let error as ToolError: message = error.message
            case let error as BuriError: message = ToolError(error).message
            default: message = String(describing: error)
            }
            try? out.write((first ? "" : ",") + "{\"error\":" + jsonString(oneLine(message)) + "}")
            try? end(newline: newline)
            try? out.flush()
        }
    }

    /// Runs `body`, which lists items, and ends the list on error as ``fail(_:)`` says.
    func listing(newline: Bool = true, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            fail(error, newline: newline)
            throw error
        }
    }
}
