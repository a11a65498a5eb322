import ArgumentParser
import Buri
import BuriCodec
import LevelDB

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
        var buckets: [(descriptor: BucketDescriptor, objects: Int, entries: [Int])] = []
        try mapErrors(path: path) {
            for descriptor in try db.allBucketInfo() {
                let raw = try db.rawBucket(named: descriptor.name)
                let entries = try descriptor.indexes.map { index in try raw.entryCount(index: index.name) }
                buckets.append((descriptor, try raw.count(), entries))
            }
        }
        let size = sizeOnDisk(path)
        let leveldb = Database.libraryVersion.description
        let out = Output.standardOutput()
        if json {
            let value: CBORValue = .map([
                CBORMapEntry(key: "path", value: .text(path)),
                CBORMapEntry(key: "formatVersion", value: .int(Int64(db.formatVersion))),
                CBORMapEntry(key: "leveldbVersion", value: .text(leveldb)),
                CBORMapEntry(key: "sizeOnDisk", value: .unsigned(size)),
                CBORMapEntry(key: "buckets", value: .array(buckets.map { bucket in
                    .map([
                        CBORMapEntry(key: "name", value: .text(bucket.descriptor.name)),
                        CBORMapEntry(key: "keyField", value: bucket.descriptor.keyField.map { .text($0) } ?? .null),
                        CBORMapEntry(key: "objects", value: .int(Int64(bucket.objects))),
                        CBORMapEntry(key: "indexes", value: .array(zip(bucket.descriptor.indexes, bucket.entries).map { index, entries in
                            .map([
                                CBORMapEntry(key: "name", value: .text(index.name)),
                                CBORMapEntry(key: "kinds", value: .array(index.components.map { .text($0.rawValue) })),
                                CBORMapEntry(key: "unique", value: .bool(index.unique)),
                                CBORMapEntry(key: "multiValued", value: .bool(index.multiValued)),
                                CBORMapEntry(key: "fields", value: index.fields.map { .array($0.map { .text($0) }) } ?? .null),
                                CBORMapEntry(key: "fieldForms", value: index.fieldForms.map { .array($0.map { .text($0.rawValue) }) } ?? .null),
                                CBORMapEntry(key: "computed", value: .bool(index.computed == true)),
                                CBORMapEntry(key: "entries", value: .int(Int64(entries))),
                            ])
                        })),
                    ])
                })),
            ])
            try out.line(value.jsonString(pretty: true))
        } else {
            try out.line("database:        \(path)")
            try out.line("format version:  \(db.formatVersion)")
            try out.line("LevelDB version: \(leveldb)")
            try out.line("size on disk:    \(formatBytes(size))")
            try out.line("buckets:         \(buckets.count)")
            for bucket in buckets {
                try out.line("")
                let keyField = bucket.descriptor.keyField.map { " (key field '\($0)')" } ?? ""
                try out.line("bucket '\(bucket.descriptor.name)'\(keyField): \(bucket.objects) object\(bucket.objects == 1 ? "" : "s")")
                if bucket.descriptor.indexes.isEmpty { try out.line("  no indexes") }
                for (index, entries) in zip(bucket.descriptor.indexes, bucket.entries) {
                    var traits = [index.components.map(\.rawValue).joined(separator: ", ")]
                    if index.unique { traits.append("unique") }
                    if index.multiValued { traits.append("multi-valued") }
                    if let fields = index.fields {
                        let forms = index.fieldForms ?? []
                        let named = fields.enumerated().map { i, field in i < forms.count && forms[i] == .date ? "\(field) (date)" : field }
                        traits.append("field\(fields.count == 1 ? "" : "s") " + named.joined(separator: ", "))
                    }
                    if index.computed == true { traits.append("computed") }
                    try out.line("  index '\(index.name)' (\(traits.joined(separator: "; "))): \(entries) entr\(entries == 1 ? "y" : "ies")")
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
        discussion: "Example: buri buckets people.buri"
    )

    @OptionGroup var target: DatabaseArgument

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let out = Output.standardOutput()
        for name in try mapErrors(path: target.database, { try db.bucketNames() }) { try out.line(name) }
        try out.flush()
    }
}

// MARK: - keys

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the keys of a bucket, one per line, in key order.",
        discussion: "Example: buri keys people.buri Person --prefix person-00 --limit 10"
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket whose keys to list.")
    var bucket: String

    @Option(parsing: .unconditional, help: "Only keys that begin with this text.")
    var prefix: String?

    @Option(help: "At most this many keys.")
    var limit: Int?

    @Flag(help: "List in descending key order.")
    var reverse = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit)") }
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let out = Output.standardOutput()
        try mapErrors(path: target.database) {
            if let prefix {
                for key in try raw.keys(withPrefix: prefix, reverse: reverse, limit: limit) { try out.line(key) }
            } else {
                var query = Query.all
                if reverse { query = query.descending() }
                if let limit { query = query.limit(limit) }
                let cursor = try raw.makeCursor(query)
                while let key = try cursor.nextKey() { try out.line(key) }
            }
        }
        try out.flush()
    }
}

// MARK: - get

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print one object as pretty JSON.",
        discussion: "Example: buri get people.buri Person person-00042"
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket holding the object.")
    var bucket: String

    @Argument(help: "The object's key.")
    var key: String

    func validate() throws {
        try checkKeyLength(key)
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        guard let record = try mapErrors(path: target.database, { try raw.record(forKey: key) }) else {
            throw ToolError(.notFound, "bucket '\(bucket)' has no object with key '\(key)'; list its keys with `buri keys \(target.database) \(bucket)`")
        }
        let out = Output.standardOutput()
        try out.line(try jsonText(ofPayload: record.payload, pretty: true, bucket: bucket, key: key))
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
        seconds since 1970 (as `buri get` shows them); binary components take UTF-8 text. Both bounds are \
        inclusive, and either may be given alone. For a compound index, --equals takes the values \
        of its leading components separated by ',' and may be combined with --from/--to or \
        --prefix for the next component.

        With --page-size N, at most N results are printed and, if the walk has more, the line \
        `next: TOKEN` goes to standard error; run the same query with --after TOKEN for the next \
        page. --limit caps the whole walk. A token works only with the query that issued it.

        Examples:
          buri query people.buri Person age --from 20 --to 29
          buri query people.buri Person locale --equals EN --objects --limit 5
          buri query people.buri Person locale_age --equals EN,30
          buri query people.buri Person age --from 20 --page-size 100 --after b1000000…
        """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to query.")
    var bucket: String

    @Argument(help: "The index to query through.")
    var index: String

    @Option(parsing: .unconditional, help: ArgumentHelp("Objects whose index value equals this (compound indexes: leading values separated by ',').", valueName: "value"))
    var equals: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Objects whose index value is at least this (inclusive).", valueName: "value"))
    var from: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Objects whose index value is at most this (inclusive).", valueName: "value"))
    var to: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Objects whose binary index value begins with this text.", valueName: "text"))
    var prefix: String?

    @Flag(help: "Print JSON Lines of {\"key\": ..., \"object\": ...} instead of keys.")
    var objects = false

    @Option(help: "At most this many results.")
    var limit: Int?

    @Flag(help: "Return results in descending index order.")
    var reverse = false

    @Option(help: ArgumentHelp("Print at most this many results, then `next: TOKEN` on standard error if there are more.", valueName: "n"))
    var pageSize: Int?

    @Option(help: ArgumentHelp("Resume after this token, printed by a --page-size run of the same query.", valueName: "token"))
    var after: String?

    func validate() throws {
        if equals == nil, from == nil, to == nil, prefix == nil {
            throw ValidationError("give a condition: --equals VALUE, --from A and/or --to B, or --prefix TEXT")
        }
        if prefix != nil, from != nil || to != nil {
            throw ValidationError("--prefix cannot be combined with --from/--to; use one or the other")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit)") }
        if let pageSize, pageSize < 1 { throw ValidationError("--page-size must be 1 or more, not \(pageSize)") }
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        guard let definition = raw.descriptor.index(named: index) else {
            throw ToolError(BuriError.unknownIndex(bucket: bucket, index: index, known: raw.descriptor.indexes.map(\.name)))
        }
        var query = try makeQuery(definition)
        if reverse { query = query.descending() }
        if let limit { query = query.limit(limit) }
        if let after { query = query.after(try mapErrors(path: target.database) { try ContinuationToken(parsing: after) }) }
        let out = Output.standardOutput()
        if let pageSize {
            let next = try mapErrors(path: target.database) { () throws -> ContinuationToken? in
                if objects {
                    let page = try raw.recordPage(query, size: pageSize)
                    for record in page.items { try out.line(try objectLine(record)) }
                    return page.next
                }
                let page = try raw.keyPage(query, size: pageSize)
                for key in page.items { try out.line(key) }
                return page.next
            }
            try out.flush()
            if let next { _ = writeAll(2, Array("next: \(next)\n".utf8)) }
            return
        }
        try mapErrors(path: target.database) {
            let cursor = try raw.makeCursor(query)
            if objects {
                while let record = try cursor.nextRecord() { try out.line(try objectLine(record)) }
            } else {
                while let key = try cursor.nextKey() { try out.line(key) }
            }
        }
        try out.flush()
    }

    /// One JSON Lines row of `--objects`.
    func objectLine(_ record: StoredRecord) throws -> String {
        let object = try jsonText(ofPayload: record.payload, pretty: false, bucket: bucket, key: record.key)
        return "{\"key\":\(jsonString(record.key)),\"object\":\(object)}"
    }

    /// The library query for the options, with values parsed per the index's component kinds.
    func makeQuery(_ definition: IndexDefinition) throws -> Query {
        let kinds = definition.components
        let arity = kinds.count
        let hasNext = from != nil || to != nil || prefix != nil
        var leadingTexts: [String] = []
        if let equals { leadingTexts = arity > 1 ? equals.split(separator: ",", omittingEmptySubsequences: false).map(String.init) : [equals] }
        let room = hasNext ? arity - 1 : arity
        if leadingTexts.count > room {
            let what = arity == 1 ? "1 component" : "\(arity) components"
            let hint = hasNext ? "; --equals may name at most \(room) leading value(s) when --from/--to/--prefix constrain the next component"
                               : "; separate at most \(arity) values with ','"
            throw ToolError(.usage, "index '\(definition.name)' has \(what) but --equals gives \(leadingTexts.count) value(s)\(hint)")
        }
        var leading: [IndexValue] = []
        for (position, text) in leadingTexts.enumerated() {
            leading.append(try parseIndexValue(text, kind: kinds[position], index: definition.name, option: "--equals value"))
        }
        let next = leading.count
        if let prefix {
            guard kinds[next] == .binary else {
                throw ToolError(.usage, "--prefix needs a binary index component, but component \(next + 1) of index '\(definition.name)' is numeric; use --from/--to")
            }
            return .index(definition.name, leading: leading, prefixBytes: Array(prefix.utf8))
        }
        if hasNext {
            let lower = try from.map { IndexBound.inclusive(try parseIndexValue($0, kind: kinds[next], index: definition.name, option: "--from")) } ?? .unbounded
            let upper = try to.map { IndexBound.inclusive(try parseIndexValue($0, kind: kinds[next], index: definition.name, option: "--to")) } ?? .unbounded
            return .index(definition.name, leading: leading, from: lower, to: upper)
        }
        // Exact match on the leading components: the last one as a one-value range.
        guard let last = leading.last else {
            throw ToolError(.usage, "--equals gives no value; give one value per leading component")
        }
        return .index(definition.name, leading: Array(leading.dropLast()), from: .inclusive(last), to: .inclusive(last))
    }
}
