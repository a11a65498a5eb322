import ArgumentParser
import Buri
import BuriCodec
import Foundation

// MARK: - export

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write objects as JSON Lines: {\"bucket\": ..., \"key\": ..., \"object\": ...}.",
        discussion: """
        One object per line, ordered by bucket name, then key (both bytewise), so the same \
        database always exports to the same bytes. `buri import` reads the output back.

        Example: buri export people.buri Person -o people.jsonl
        """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "Export only this bucket (default: every bucket).")
    var bucket: String?

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write to this file instead of standard output (replaced only when the export succeeds).", valueName: "file"))
    var output: String?

    func validate() throws {
        if let output, output.isEmpty { throw ValidationError("-o needs a file name") }
    }

    func run() throws {
        let db = try openExisting(target.database)
        defer { db.close() }
        let buckets: [RawBucket]
        if let bucket {
            buckets = [try openBucket(db, bucket)]
        } else {
            buckets = try mapErrors(path: target.database) { try db.bucketNames().map { try db.rawBucket(named: $0) } }
        }
        guard let output else {
            try export(buckets, to: Output.standardOutput())
            return
        }
        // Write next to the destination and rename, so a failed export never leaves half a file.
        let partial = output + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        do {
            let file = try Output.file(partial)
            do {
                try export(buckets, to: file)
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
    }

    func export(_ buckets: [RawBucket], to out: Output) throws {
        let progress = Progress()
        defer { progress.finish() }
        try mapErrors(path: target.database) {
            for raw in buckets {
                let total = progress.enabled ? try raw.count() : 0
                let head = "{\"bucket\":\(jsonString(raw.name)),\"key\":"
                let cursor = try raw.makeCursor(.all)
                var done = 0
                while let record = try cursor.nextRecord() {
                    let object = try jsonText(ofPayload: record.payload, pretty: false, bucket: raw.name, key: record.key)
                    try out.line(head + jsonString(record.key) + ",\"object\":" + object + "}")
                    done += 1
                    if progress.enabled, done % 1000 == 0 { progress.update("exporting '\(raw.name)': \(done)/\(total) objects") }
                }
            }
        }
        try out.flush()
    }
}

// MARK: - import

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or extend a bucket from JSON Lines, in one atomic batch.",
        discussion: """
        Each line is either a plain JSON object or an export record {"bucket", "key", "object"} \
        as written by `buri export` (records of other buckets are skipped). A plain object's key \
        is its --key field: a string, or an integer stored as its decimal text. Index values come \
        from the object's top-level fields: strings for binary indexes, numbers for numeric ones; \
        an array gives one entry per distinct element (a multi-valued index); a missing or null \
        field gives no entry. A new bucket gets the indexes named here; an existing one keeps its \
        own, and the options, if given, must match them.

        Every line is checked before anything is written, and all objects are stored in one \
        atomic batch (held in memory): on any error the database is left exactly as it was (a \
        database the import would have created is not created). A key given twice: the last line wins.

        Examples:
          buri import people.buri Person --key objectId --binary-index locale --numeric-index age people.jsonl
          buri export old.buri Person | buri import new.buri Person --key objectId --binary-index locale
        """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to create or extend.")
    var bucket: String

    @Option(help: ArgumentHelp("The field holding each plain object's key (a string, or an integer stored as its decimal text). Defaults to the bucket's recorded key field.", valueName: "field"))
    var key: String?

    @Option(name: .customLong("binary-index"), help: ArgumentHelp("Keep binary index NAME over string field FIELD (default: NAME). Repeatable.", valueName: "name[=field]"))
    var binaryIndexes: [String] = []

    @Option(name: .customLong("numeric-index"), help: ArgumentHelp("Keep numeric index NAME over number field FIELD (default: NAME). Repeatable.", valueName: "name[=field]"))
    var numericIndexes: [String] = []

    @Argument(help: ArgumentHelp("The JSON Lines file to read; '-' or nothing reads standard input.", valueName: "file"))
    var file: String?

    /// An index option: name, field and kind.
    struct IndexOption {
        var name: String
        var field: String
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
                if result.contains(where: { $0.name == name }) {
                    throw ValidationError("index '\(name)' is given twice; give each index once, as --binary-index or --numeric-index")
                }
                result.append(IndexOption(name: name, field: field, kind: kind))
            }
        }
        return result
    }

    func validate() throws {
        if bucket.isEmpty { throw ValidationError("the bucket name is empty; give a name such as Person") }
        if let key, key.isEmpty { throw ValidationError("--key needs a field name, such as --key id") }
        _ = try indexOptions()
    }

    func run() throws {
        let path = target.database
        let state = pathState(path)
        switch state {
        case .file:
            throw ToolError(.notADatabase, "'\(path)' is a file, not a database; give the directory of a Buri database or a new path")
        case .otherDirectory:
            throw ToolError(.notADatabase, "'\(path)' is not a Buri database and is not empty; import into a Buri database, a new path or an empty directory")
        case .missing, .emptyDirectory, .database:
            break
        }
        let options = try indexOptions()
        // An existing database is opened (and locked) first, so the checks see its catalog.
        var db: BuriDatabase? = state == .database ? try openExisting(path) : nil
        defer { db?.close() }
        let existing = try db.flatMap { db in try mapErrors(path: path) { try db.bucketInfo(named: bucket) } }
        var plan = try ImportPlan(bucket: bucket, existing: existing, key: key, options: options, databasePath: path)

        let input = try readInput()
        let progress = Progress()
        let objects = try plan.objects(from: input, progress: progress)
        progress.finish()

        // Nothing is written before this point.
        let created = db == nil
        if created {
            var create = BuriOptions()
            create.storage.errorIfExists = true
            create.syncWrites = true
            db = try mapErrors(path: path) { try BuriDatabase(path: path, options: create) }
        }
        guard let db else { return }
        progress.update("storing \(objects.count) objects…", force: true)
        var createdBucket = false
        do {
            try mapErrors(path: path) {
                let raw: RawBucket
                if existing == nil {
                    raw = try db.createBucket(named: bucket, keyField: plan.keyField, indexes: plan.newDefinitions())
                    createdBucket = true
                } else {
                    raw = try db.rawBucket(named: bucket)
                }
                try raw.store(objects, sync: true)
            }
            progress.finish()
        } catch {
            progress.finish()
            if createdBucket { try? db.dropBucket(named: bucket) }
            if created {
                db.close()
                removeCreatedDatabase(path, wasEmptyDirectory: state == .emptyDirectory)
            }
            throw error
        }
        let out = Output.standardOutput()
        try out.line("imported \(objects.count) object\(objects.count == 1 ? "" : "s") into bucket '\(bucket)' of \(path)")
        try out.flush()
        if !plan.skipped.isEmpty {
            let names = plan.skipped.keys.sorted().map { "'\($0)' (\(plan.skipped[$0] ?? 0))" }.joined(separator: ", ")
            writeAll(2, Array("buri: note: skipped export records of other buckets: \(names)\n".utf8))
        }
    }

    func readInput() throws -> [UInt8] {
        if file == nil || file == "-" {
            return [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        }
        let name = file ?? "-"
        guard let data = FileManager.default.contents(atPath: name) else {
            let reason = FileManager.default.fileExists(atPath: name) ? "it cannot be read" : "there is no such file"
            throw ToolError(.failure, "cannot read '\(name)': \(reason)")
        }
        return [UInt8](data)
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

/// How one import computes keys and index values, and the objects it prepared.
struct ImportPlan {
    struct Index {
        var name: String
        var components: [IndexKind]
        var fields: [String]
        /// Whether arrays are allowed: an existing multi-valued index, or any new single-component one.
        var acceptsArrays: Bool
        var isNew: Bool
        var sawArray = false
    }

    let bucket: String
    let keyField: String?
    var indexes: [Index]
    /// Export records of other buckets that were skipped, by bucket.
    var skipped: [String: Int] = [:]

    init(bucket: String, existing: BucketDescriptor?, key: String?, options: [Import.IndexOption], databasePath: String) throws {
        self.bucket = bucket
        guard let existing else {
            keyField = key
            indexes = options.map { Index(name: $0.name, components: [$0.kind], fields: [$0.field], acceptsArrays: true, isNew: true) }
            return
        }
        if let key, let recorded = existing.keyField, recorded != key {
            throw ToolError(.usage, "bucket '\(bucket)' keeps its keys in field '\(recorded)'; pass --key \(recorded) or leave --key out")
        }
        keyField = key ?? existing.keyField
        let describe = { (index: IndexDefinition) -> String in
            "\(index.components.map(\.rawValue).joined(separator: ", ")) over field(s) \((index.fields ?? [index.name]).joined(separator: ", "))"
        }
        for option in options {
            guard let index = existing.index(named: option.name) else {
                let known = existing.indexes.isEmpty ? "it has no indexes" : "its indexes are " + existing.indexes.map { "'\($0.name)'" }.joined(separator: ", ")
                throw ToolError(.usage, "bucket '\(bucket)' already exists without index '\(option.name)' (\(known)); an import cannot add indexes to an existing bucket: leave the option out, or import into a new bucket")
            }
            if index.components != [option.kind] || (index.fields ?? [index.name]) != [option.field] {
                throw ToolError(.usage, "bucket '\(bucket)' already has index '\(index.name)' as \(describe(index)), not \(option.kind.rawValue) over field \(option.field); leave the option out or make it match")
            }
        }
        var indexes: [Index] = []
        for index in existing.indexes {
            let fields: [String]
            if let recorded = index.fields {
                fields = recorded
            } else if index.components.count == 1 {
                fields = [index.name]
            } else {
                throw ToolError(.invalidInput, "bucket '\(bucket)' has compound index '\(index.name)' without recorded fields, so `buri import` cannot compute its values; store these objects with the Swift API")
            }
            indexes.append(Index(name: index.name, components: index.components, fields: fields,
                                 acceptsArrays: index.multiValued && index.components.count == 1, isNew: false))
        }
        self.indexes = indexes
    }

    /// The definitions of a new bucket's indexes, multi-valued where the data held arrays.
    func newDefinitions() -> [IndexDefinition] {
        indexes.map { IndexDefinition(id: 0, name: $0.name, components: $0.components, multiValued: $0.sawArray, fields: $0.fields) }
    }

    static let maxKeyLength = 4096
    static let maxTupleLength = 65536

    /// Parses and checks every line, returning the objects to store.
    mutating func objects(from input: [UInt8], progress: Progress) throws -> [RawObject] {
        var objects: [RawObject] = []
        var lineNumber = 0
        var start = 0
        try input.withUnsafeBufferPointer { bytes in
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
                lineNumber += 1
                let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
                start = end + 1
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                if let object = try prepare(Array(line), line: lineNumber) { objects.append(object) }
                if progress.enabled, lineNumber % 1000 == 0 { progress.update("read \(lineNumber) lines") }
            }
        }
        return objects
    }

    func fail(_ line: Int, _ message: String) -> ToolError {
        ToolError(.invalidInput, "line \(line): \(message); nothing was imported")
    }

    /// One line's object, or `nil` for an export record of another bucket.
    mutating func prepare(_ bytes: [UInt8], line: Int) throws -> RawObject? {
        let value: CBORValue
        do {
            value = try CBORValue(jsonBytes: bytes)
        } catch let error as CBORError {
            var message = error.message
            if let range = message.range(of: " (line ", options: .backwards) { message = String(message[..<range.lowerBound]) }
            let column = error.column.map { ", column \($0)" } ?? ""
            throw ToolError(.invalidInput, "line \(line)\(column): malformed JSON: \(message); nothing was imported")
        }
        guard let entries = value.mapEntries else {
            throw fail(line, "expected a JSON object, found \(kindName(value))")
        }
        let key: String
        let object: CBORValue
        if let record = exportRecord(entries) {
            if record.bucket != bucket {
                skipped[record.bucket, default: 0] += 1
                return nil
            }
            key = record.key
            object = record.object
        } else {
            guard let keyField else {
                throw fail(line, "a plain object needs a key field, and bucket '\(bucket)' records none; pass --key FIELD")
            }
            guard let field = value[keyField], !field.isNull else {
                throw fail(line, "the object has no key field '\(keyField)'")
            }
            switch field {
            case .text(let text): key = text
            case .unsigned(let number): key = String(number)
            case .negative: key = field.int64Value.map(String.init) ?? field.jsonString()
            default:
                throw fail(line, "key field '\(keyField)' holds \(kindName(field)); a key must be a string or an integer")
            }
            object = value
        }
        if key.isEmpty { throw fail(line, "the key is empty; every object needs a non-empty key") }
        if key.utf8.count > Self.maxKeyLength {
            throw fail(line, "the key is \(key.utf8.count) bytes, over the limit of \(Self.maxKeyLength)")
        }
        var indexValues: [String: [[IndexValue]]] = [:]
        for position in indexes.indices {
            let tuples = try indexTuples(position, of: object, line: line)
            if !tuples.isEmpty { indexValues[indexes[position].name] = tuples }
        }
        return RawObject(key: key, payload: object.encoded(), indexValues: indexValues)
    }

    /// The parts of an export record: exactly the fields bucket (text), key (text) and object (a map).
    func exportRecord(_ entries: [CBORMapEntry]) -> (bucket: String, key: String, object: CBORValue)? {
        guard entries.count == 3 else { return nil }
        var bucket: String?, key: String?, object: CBORValue?
        for entry in entries {
            switch (entry.key.stringValue, entry.value) {
            case ("bucket", .text(let text)): bucket = text
            case ("key", .text(let text)): key = text
            case ("object", let value) where value.mapEntries != nil: object = value
            default: return nil
            }
        }
        guard let bucket, let key, let object else { return nil }
        return (bucket, key, object)
    }

    mutating func indexTuples(_ position: Int, of object: CBORValue, line: Int) throws -> [[IndexValue]] {
        let index = indexes[position]
        var tuple: [IndexValue] = []
        for (component, field) in zip(index.components, index.fields) {
            guard let value = object[field], !value.isNull else { return [] }
            if case .array(let elements) = value {
                guard index.acceptsArrays, index.components.count == 1 else {
                    let why = index.components.count > 1 ? "a compound index takes one value per field" : "the index is single-valued"
                    throw fail(line, "field '\(field)' of index '\(index.name)' holds an array, but \(why)")
                }
                indexes[position].sawArray = true
                var tuples: [[IndexValue]] = []
                for element in elements where !element.isNull {
                    let single = [try indexValue(element, kind: component, field: field, index: index.name, line: line)]
                    if !tuples.contains(single) { tuples.append(single) }
                }
                return tuples
            }
            tuple.append(try indexValue(value, kind: component, field: field, index: index.name, line: line))
        }
        let length = tuple.reduce(0) { $0 + $1.encoded.count }
        if length > Self.maxTupleLength {
            throw fail(line, "the value of index '\(index.name)' is \(length) bytes encoded, over the limit of \(Self.maxTupleLength)")
        }
        return [tuple]
    }

    func indexValue(_ value: CBORValue, kind: IndexKind, field: String, index: String, line: Int) throws -> IndexValue {
        switch (kind, value) {
        case (.binary, .text(let text)):
            return IndexValue(text)
        case (.binary, .bytes(let bytes)):
            return IndexValue(bytes: bytes)
        case (.numeric, .unsigned(let number)):
            return IndexValue(number)
        case (.numeric, .negative):
            if let number = value.int64Value { return IndexValue(number) }
            return IndexValue(floatLiteral: value.doubleValue ?? -0x1p64)
        case (.numeric, .float(let number)) where !number.isNaN:
            return IndexValue(floatLiteral: number)
        case (.binary, _):
            throw fail(line, "index '\(index)' is binary but field '\(field)' holds \(kindName(value)); binary indexes take strings")
        case (.numeric, _):
            throw fail(line, "index '\(index)' is numeric but field '\(field)' holds \(kindName(value)); numeric indexes take numbers")
        }
    }

    func kindName(_ value: CBORValue) -> String {
        switch value {
        case .text(let text): return "the string \(CBORValue.text(text.count > 40 ? String(text.prefix(40)) + "…" : text).jsonString())"
        case .unsigned, .negative, .float: return "the number \(value.jsonString())"
        case .bool(let flag): return "\(flag)"
        case .array: return "an array"
        case .map: return "an object"
        case .null, .undefined: return "null"
        default: return "a \(value.jsonString()) value"
        }
    }
}
