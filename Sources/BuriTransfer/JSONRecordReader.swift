import Buri

/// How one import computes keys and index values, and the objects it prepared.
struct ImportPlan {
    let bucket: String
    var keyField: String?
    /// Whether the indexes came from the export's schema line (kept exactly, multi-valued included).
    var fromSchema = false
    /// The buckets whose schema lines the input holds, in order.
    var schemaBuckets: [String] = []
    /// The index options given on the command line (checked against a schema line).
    var options: [ImportOptions.Index] = []
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
    func unfilledIndexes(objectCount: Int) -> [IndexDefinition] {
        guard isNew, !fromSchema, objectCount > 0 else { return [] }
        return definitions.filter { !indexed.contains(Array($0.name.utf8)) }
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
    /// The names of the new bucket's indexes declared plaintext (``ImportOptions/plaintextIndexes``).
    let plaintextIndexes: [String]

    init(bucket: String, existing: BucketDescriptor?, options given: ImportOptions) throws {
        let key = given.keyField
        let options = given.indexes
        let dateFields = given.dateFields
        self.bucket = bucket
        self.dateFields = dateFields
        self.options = options
        plaintextIndexes = given.plaintextIndexes
        keyGiven = key != nil
        guard let existing else {
            isNew = true
            keyField = key
            definitions = options.map { option in
                let isDate =
                    option.kind == .numeric && option.path.count == 1
                    && dateFields.contains { (try? IndexDefinition.parseFieldPath($0).get()) == option.path }
                // A text index: the entry a `.text` declaration makes (one binary component,
                // multi-valued, the tokenizer and stop words recorded).
                var definition = IndexDefinition(
                    id: 0, name: option.name, components: [option.kind], multiValued: option.text != nil,
                    fieldForms: isDate ? [.date] : nil, text: option.text)
                definition.setFieldPaths([option.path])
                return definition
            }
            // A name that none of these indexes has may be one of an export's schema line: checked
            // when the input is known (`adoptSchema`, `checkEnd`).
            declarePlaintext(&definitions)
            return
        }
        isNew = false
        if let key, let recorded = existing.keyField, !recorded.utf8.elementsEqual(key.utf8) {
            throw TransferError(
                .usage,
                "bucket '\(bucket)' keeps its keys in field '\(recorded)'; pass --key \(recorded) or leave --key out")
        }
        keyField = key ?? existing.keyField
        let describe = { (index: IndexDefinition) -> String in
            let kinds = index.text != nil ? "text" : index.components.map(\.rawValue).joined(separator: ", ")
            guard let paths = index.componentPaths else { return "\(kinds) with no recorded field" }
            return "\(kinds) over field(s) \(paths.map(IndexDefinition.fieldPathText).joined(separator: ", "))"
        }
        for option in options {
            guard let index = existing.index(named: option.name) else {
                let known =
                    existing.indexes.isEmpty
                    ? "it has no indexes"
                    : "its indexes are " + existing.indexes.map { "'\($0.name)'" }.joined(separator: ", ")
                throw TransferError(
                    .usage,
                    "bucket '\(bucket)' already exists without index '\(option.name)' (\(known)); an import cannot add indexes to an existing bucket: leave the option out, or import into a new bucket"
                )
            }
            if !option.matches(index) {
                throw TransferError(
                    .usage,
                    "bucket '\(bucket)' already has index '\(index.name)' as \(describe(index)), not \(option.kindName) over field \(option.field); leave the option out or make it match"
                )
            }
        }
        // Every index must be computable from the objects exactly as the Swift declaration computes
        // it; an index that gets no entries here would be missing from every imported object.
        for index in existing.indexes {
            if let reason = index.uncomputableReason {
                throw TransferError(
                    .invalidInput,
                    "bucket '\(bucket)' has index '\(index.name)', which `buri import` cannot compute: \(reason); store these objects with the Swift API; nothing was imported"
                )
            }
        }
        for name in plaintextIndexes {
            guard let index = existing.index(named: name) else {
                throw TransferError(
                    .usage,
                    "bucket '\(bucket)' has no index '\(name)' to declare plaintext (\(existing.indexes.isEmpty ? "it has no indexes" : "its indexes are " + existing.indexes.map { "'\($0.name)'" }.joined(separator: ", "))); leave the option out"
                )
            }
            if index.plaintext != true {
                throw TransferError(
                    .usage,
                    "bucket '\(bucket)' already has index '\(name)', not declared plaintext, and an import cannot change an existing index; leave --plaintext-index \(name) out, or import into a new bucket"
                )
            }
        }
        definitions = existing.indexes
    }

    /// Marks the definitions ``plaintextIndexes`` names as declared plaintext.
    func declarePlaintext(_ definitions: inout [IndexDefinition]) {
        for position in definitions.indices
        where plaintextIndexes.contains(where: { $0.utf8.elementsEqual(definitions[position].name.utf8) }) {
            definitions[position].plaintext = true
        }
    }

    /// The first name of ``plaintextIndexes`` that none of the new bucket's indexes has.
    var undeclaredPlaintextName: String? {
        plaintextIndexes.first { name in !definitions.contains { $0.name.utf8.elementsEqual(name.utf8) } }
    }

    /// The definitions of a new bucket's indexes, multi-valued where the data held arrays.
    func newDefinitions() -> [IndexDefinition] {
        if fromSchema { return definitions }
        return definitions.map { definition in
            var copy = definition
            // A text index is multi-valued (one entry per term) whatever its field holds.
            copy.multiValued = definition.text != nil || sawArray.contains(definition.name)
            return copy
        }
    }

    static let maxKeyLength = 4096
    static let maxTupleLength = 65536

    var skippedList: String {
        skipped.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { "'\($0)' (\(skipped[$0] ?? 0))" }
            .joined(separator: ", ")
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
        if isNew, let name = undeclaredPlaintextName {
            let known =
                definitions.isEmpty
                ? "it gets no index" : "its indexes are " + definitions.map { "'\($0.name)'" }.joined(separator: ", ")
            throw TransferError(
                .usage,
                "index '\(name)' is declared plaintext, but the new bucket '\(bucket)' gets no index of that name (\(known)); name one of them; nothing was imported"
            )
        }
        if isExport, records > 0, prepared == 0, !fromSchema {
            throw TransferError(
                .invalidInput,
                "the export holds no record of bucket '\(bucket)' (only of \(skippedList)); name one of those buckets; nothing was imported"
            )
        }
    }

    func fail(_ line: Int, _ message: String) -> TransferError { Self.failure(line, message) }

    static func failure(_ line: Int, _ message: String) -> TransferError {
        TransferError(.invalidInput, "line \(line): \(message); nothing was imported", line: line)
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
    func malformed(_ error: CBORError, line: Int) -> TransferError { Self.malformed(error, line: line) }

    static func malformed(_ error: CBORError, line: Int) -> TransferError {
        var message = error.message
        if let range = message.range(of: " (line ", options: .backwards) {
            message = String(message[..<range.lowerBound])
        }
        let column = error.column.map { ", column \($0)" } ?? ""
        let field = error.codingPath.isEmpty ? "" : ", field '\(error.codingPath)'"
        return TransferError(
            .invalidInput,
            "line \(line)\(column)\(field): \(error.kind == .invalidJSON ? "invalid JSON: " : "")\(message); nothing was imported",
            line: line)
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
                option.matches(index), index.componentPaths == [option.path]
            else {
                throw fail(
                    line,
                    "the export's schema for bucket '\(bucket)' has no \(option.kindName) index '\(option.name)' over field '\(option.field)' (it has \(schema.indexes.map { "'\($0.name)'" }.joined(separator: ", "))); the export recreates its indexes: leave out the index options"
                )
            }
        }
        for index in schema.indexes {
            if let reason = index.uncomputableReason, exportVersion < 4 {
                throw TransferError(
                    .invalidInput,
                    "line \(line): bucket '\(bucket)' has index '\(index.name)', which buri cannot compute from the objects: \(reason); this export (format \(exportVersion)) does not carry its values: export the database again with this buri (format 4 carries them), or copy the bucket with the Swift API (BuriDatabase.backup); nothing was imported",
                    line: line)
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
        declarePlaintext(&definitions)
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

/// Turns JSON Lines into the objects of one bucket, exactly as an import reads them: plain JSON
/// objects (each keyed by its key field) or the lines of an export (its header first), every
/// number stored exactly or refused, dates in date fields stored as dates, index values computed
/// from the fields the bucket's indexes name. It writes nothing: store what it returns with
/// ``RawBucket/store(_:sync:)`` or a ``StagedImport``, or use
/// ``BuriDatabase/importJSONLines(from:into:options:progress:chunkCommitted:)``.
///
/// ```swift
/// let raw = try db.rawBucket(named: "Person")
/// var reader = try JSONRecordReader(bucket: "Person", existing: raw.descriptor)
/// if let object = try reader.object(fromLine: Array(#"{"objectId":"p1","age":31}"#.utf8), number: 1) {
///     try raw.store([object])
/// }
/// try reader.finish()
/// ```
public struct JSONRecordReader: Sendable {
    var plan: ImportPlan

    /// A reader for bucket `bucket`: `existing` is its definition if it exists (its key field and
    /// indexes are used, and `options` must agree with them), nil for a new bucket (which gets the
    /// indexes `options` names, or those of an export's schema line).
    ///
    /// ```swift
    /// var reader = try JSONRecordReader(
    ///     bucket: "Person", existing: nil, options: ImportOptions(keyField: "objectId"))
    /// ```
    /// - Throws: ``TransferError`` (`.usage`) for options the bucket contradicts,
    ///   (`.invalidInput`) for a bucket with an index whose values cannot be computed from JSON.
    public init(
        bucket: String, existing: BucketDescriptor?, options: ImportOptions = ImportOptions()
    ) throws(TransferError) {
        plan = try transferring { try ImportPlan(bucket: bucket, existing: existing, options: options) }
    }

    /// The object line `number` (counted from 1) holds, its newline left out; nil for a blank
    /// line, an export's header or schema line, or a record of another bucket.
    ///
    /// ```swift
    /// for (index, line) in lines.enumerated() {
    ///     if let object = try reader.object(fromLine: line, number: index + 1) { objects.append(object) }
    /// }
    /// ```
    /// - Throws: ``TransferError`` (`.invalidInput`, naming the line) for a line it refuses.
    public mutating func object(fromLine line: [UInt8], number: Int) throws(TransferError) -> RawObject? {
        try transferring { try plan.prepare(line, line: number) }
    }

    /// The checks that need every line: call it after the last one.
    ///
    /// ```swift
    /// try reader.finish()   // an export that held no record of this bucket is refused
    /// ```
    public func finish() throws(TransferError) {
        try transferring { try plan.checkEnd() }
    }

    /// Whether the input is an export (its first line is an export header).
    ///
    /// ```swift
    /// if reader.isExport { print("reading a buri export") }
    /// ```
    public var isExport: Bool { plan.isExport }

    /// The objects read so far (a key given twice counts twice).
    ///
    /// ```swift
    /// print("\(reader.objectsRead) objects")
    /// ```
    public var objectsRead: Int { plan.prepared }

    /// The field holding each plain object's key (the option given, the bucket's, or the
    /// export schema's).
    ///
    /// ```swift
    /// print(reader.keyField ?? "no key field")
    /// ```
    public var keyField: String? { plan.keyField }

    /// For a new bucket: the indexes it gets (from the options, multi-valued where an object held
    /// an array, or from the export's schema line); an existing bucket's indexes otherwise.
    ///
    /// ```swift
    /// let raw = try db.createBucket(named: "Person", keyField: reader.keyField, indexes: reader.indexes)
    /// ```
    public var indexes: [IndexDefinition] { plan.newDefinitions() }
}
