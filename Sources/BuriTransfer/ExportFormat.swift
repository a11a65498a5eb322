import Buri

/// The JSON Lines format of an export (docs/FORMAT.md §19): a header line `["buri-export",N]`, then
/// for each bucket a schema line `{"bucket","schema"}` and its records `{"bucket","key","object"}`
/// (with `"indexValues"` from format 4), objects in the exact JSON form, then (from format 5) one line
/// `{"value","data"}` per named value.
///
/// ```swift
/// print(ExportFormat.version)                  // 7
/// print(ExportFormat.header(version: 3))       // ["buri-export",3]
/// ```
public enum ExportFormat {
    /// The newest format: 7 added indexes declared plaintext (an index's `"plaintext"` member, for
    /// an encrypted database); 6 added text indexes (an index's `"text"` member: its tokenizer and stop
    /// words); 5 added the named values (``valueLine(name:value:)``); 4 added the index
    /// values a record carries for the indexes `buri` cannot compute from an object's fields; 3
    /// added the schema lines; 2 (records only) is still read.
    ///
    /// ```swift
    /// print("writes export format \(ExportFormat.version)")
    /// ```
    public static let version: UInt64 = 7

    /// The formats an import or restore reads.
    ///
    /// ```swift
    /// if !ExportFormat.readableVersions.contains(found) { print("too new") }
    /// ```
    public static let readableVersions: [UInt64] = [2, 3, 4, 5, 6, 7]

    static var readable: [UInt64] { readableVersions }

    /// The header of an export whose records carry no index values: format 3, which an older buri
    /// reads too.
    static let header = header(version: 3)

    /// The header line (without its newline) of an export of format `version`: a listing of
    /// records with no index values (such as `buri query --objects`) starts with format 3's.
    ///
    /// ```swift
    /// writeLine(ExportFormat.header(version: 3))   // ["buri-export",3]
    /// ```
    public static func header(version: UInt64) -> String { "[\"buri-export\",\(version)]" }

    /// One record as an export writes it (without its newline):
    /// `{"bucket":…,"key":…,"object":…}`, the object in the exact JSON form, a date stored by a
    /// format version 1 database (an untagged number at one of the bucket's date paths) written
    /// as the tag 1 date it stands for. A format 4 export also gives a record its `"indexValues"`;
    /// this line has none.
    ///
    /// ```swift
    /// let raw = try db.rawBucket(named: "Person")
    /// if let record = try raw.record(forKey: "p1") {
    ///     print(try ExportFormat.recordLine(record, of: raw.descriptor))
    /// }
    /// ```
    /// - Throws: ``TransferError`` (`.failure`) if the stored object is not valid CBOR.
    public static func recordLine(_ record: StoredRecord, of bucket: BucketDescriptor) throws(TransferError) -> String {
        let object = try exactJSONText(
            ofPayload: record.payload, bucket: bucket.name, key: record.key, dates: bucket.datePaths)
        return "{\"bucket\":" + jsonString(bucket.name) + ",\"key\":" + jsonString(record.key) + ",\"object\":"
            + object + "}"
    }

    /// The exact JSON form of a CBOR payload (for export); an untagged number at one of `dates` (a
    /// format version 1 date) is written as the tag 1 date it stands for, so the export says what
    /// it means.
    static func exactJSONText(
        ofPayload payload: [UInt8], bucket: String, key: String, dates: [[String]]
    ) throws(TransferError) -> String {
        do {
            return DatePaths.taggingStoredDates(try CBORValue(decoding: payload), at: dates).exactJSONString()
        } catch {
            throw TransferError(
                .failure,
                "bucket '\(bucket)', key '\(key)': the stored object is not valid CBOR (\(error)); run `buri check`")
        }
    }

    /// The header for exporting buckets with these definitions (and named values, if `values`):
    /// format 7 with an index declared plaintext (`"plaintext": true`), else 6 with a text index (an
    /// index with `text`), else 5 with named values or a relationship (an index with `references`),
    /// else format 4 if any record carries index values (a bucket has an index tools cannot
    /// compute), else format 3 — the oldest format that holds the export, so an older buri reads it
    /// when it can (and one that cannot refuses it rather than restore a text index as a plain one,
    /// or a plaintext index as a private one).
    static func header(for descriptors: [BucketDescriptor], values: Bool = false) -> String {
        let plaintext = descriptors.contains { $0.indexes.contains { $0.plaintext == true } }
        let text = descriptors.contains { $0.indexes.contains { $0.text != nil } }
        let relationships = descriptors.contains { $0.indexes.contains { $0.references != nil } }
        return header(
            version: plaintext
                ? 7
                : text
                    ? 6
                    : values || relationships ? 5 : descriptors.contains { !carriedIndexes($0).isEmpty } ? 4 : 3)
    }

    /// One named value as an export writes it (format 5, without its newline):
    /// `{"value":NAME,"data":DATA}`, the data in the exact JSON form.
    ///
    /// ```swift
    /// print(ExportFormat.valueLine(name: "theme", value: .text("dark")))   // {"value":"theme","data":"dark"}
    /// ```
    public static func valueLine(name: String, value: CBORValue) -> String {
        "{\"value\":" + jsonString(name) + ",\"data\":" + value.exactJSONString() + "}"
    }

    /// The readable formats as text ("2, 3, 4 and 5").
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
    ) throws(TransferError) -> String {
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
                        throw TransferError(
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
    static func indexValue(_ value: CBORValue, numeric: Bool) throws(TransferError) -> IndexValue {
        if numeric {
            switch value {
            case .unsigned, .negative, .float:
                do {
                    return try IndexValue(number: value)
                } catch {
                    if case let .invalidIndexValue(_, _, _, reason) = error {
                        throw TransferError(.invalidInput, reason)
                    }
                    throw TransferError(.invalidInput, error.description)
                }
            default:
                throw TransferError(.invalidInput, "a numeric component takes a number, not \(kindName(value))")
            }
        }
        switch value {
        case .text(let text): return IndexValue(text)
        case .bytes(let bytes): return IndexValue(bytes: bytes)
        default:
            throw TransferError(
                .invalidInput, "a binary component takes text or {\"$bytes\": …}, not \(kindName(value))")
        }
    }

    /// The schema line written before a bucket's records:
    /// {"bucket":NAME,"schema":{"keyField","schemaVersion","indexes":[{"name","kinds","unique","multiValued","version","fields","fieldForms","computed"[,"fieldPaths"]}]}}
    /// ("fieldPaths" only for an index that reads a nested field; its "fields" is then null;
    /// "plaintext": true only for an index declared plaintext, so that other exports keep their bytes).
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
                    } ?? [])
                    + (index.references.map { [CBORMapEntry(key: "references", value: .text($0))] } ?? [])
                    + (index.onDelete.map { [CBORMapEntry(key: "onDelete", value: .text($0.rawValue))] } ?? [])
                    + (index.text.map { text in
                        [
                            CBORMapEntry(
                                key: "text",
                                value: .map(
                                    [CBORMapEntry(key: "tokenizer", value: .int(Int64(text.tokenizer)))]
                                        + (text.stopWords.map {
                                            [CBORMapEntry(key: "stopWords", value: .array($0.map { .text($0) }))]
                                        } ?? [])))
                        ]
                    } ?? [])
                    + (index.plaintext == true ? [CBORMapEntry(key: "plaintext", value: .bool(true))] : []))
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
        let fail: (String) -> TransferError

        init(
            _ value: CBORValue, place: String, required: [String], optional: [String] = [],
            fail: @escaping (String) -> TransferError
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

        func wrong(_ name: String, _ value: CBORValue, _ expected: String) -> TransferError {
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
        _ value: CBORValue, fail: @escaping (String) -> TransferError
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
            let first = try Members(
                entry, place: place, required: members,
                optional: ["fieldPaths", "references", "onDelete", "text", "plaintext"],
                fail: fail)
            guard let name = try first.text("name", nullable: false, nonEmpty: true) else {
                throw first.fail("\(place) lacks the member \"name\"")
            }
            place += " (\(jsonString(name)))"
            let index = try Members(
                entry, place: place, required: members,
                optional: ["fieldPaths", "references", "onDelete", "text", "plaintext"],
                fail: fail)
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
            // A relationship (format 5): the bucket its values are keys of, and its delete rule.
            let references = try index.text("references", nullable: true, nonEmpty: true)
            var rule: DeleteRule? = nil
            if let text = try index.text("onDelete", nullable: true, nonEmpty: true) {
                guard let parsed = DeleteRule(rawValue: text) else {
                    throw fail(
                        "\(place): \"onDelete\" holds \(jsonString(text)); a delete rule is \"nullify\", \"cascade\" or \"deny\""
                    )
                }
                rule = parsed
            }
            if rule != nil, references == nil {
                throw fail(
                    "\(place): \"onDelete\" is given without \"references\"; name the bucket the index refers to")
            }
            // A text index (format 6): the tokenizer that cuts its terms and its stop words.
            var text: TextIndexDefinition? = nil
            if let value = index["text"], !value.isNull {
                let members = try Members(
                    value, place: "\(place), \"text\"", required: ["tokenizer"], optional: ["stopWords"], fail: fail)
                guard let tokenizerValue = members["tokenizer"],
                    let tokenizer = tokenizerValue.int64Value.flatMap({ Int(exactly: $0) }), tokenizer >= 1
                else {
                    throw members.wrong("tokenizer", members["tokenizer"] ?? .null, "a tokenizer version (1)")
                }
                text = TextIndexDefinition(
                    tokenizer: tokenizer, stopWords: try members.texts("stopWords", nullable: true))
            }
            // Declared plaintext (format 7): its values stay readable in an encrypted database.
            let plaintext = index["plaintext"] == nil ? false : try index.bool("plaintext")
            indexes.append(
                IndexDefinition(
                    id: 0, name: name, components: kinds, unique: unique, multiValued: multiValued, version: version,
                    fields: fields, fieldForms: forms, computed: computed ? true : nil, fieldPaths: paths,
                    references: references, onDelete: rule, text: text, plaintext: plaintext ? true : nil))
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
        /// A named value (format 5).
        case value(name: String, data: CBORValue)
    }

    /// What an export line is, its members checked: a schema line {"bucket","schema"} or a record
    /// {"bucket","key","object"} (and, from format 4, "indexValues"), nothing else.
    static func classify(
        _ members: [CBORMapEntry], version: UInt64, fail: @escaping (String) -> TransferError
    ) throws -> Line {
        let shapes =
            "an export record is {\"bucket\": text, \"key\": text, \"object\": …\(version >= 4 ? "[, \"indexValues\": {…}]" : "")} and a schema line {\"bucket\": text, \"schema\": {…}}\(version >= 5 ? ", a named value {\"value\": text, \"data\": …}" : "")"
        let line = CBORValue.map(members)
        if version >= 5, line["bucket"] == nil, let nameValue = line["value"] {
            let checked = try Members(line, place: "a named value's line", required: ["value", "data"], fail: fail)
            guard case .text(let name) = nameValue, !name.isEmpty, name.utf8.count <= 1024 else {
                throw checked.wrong("value", nameValue, "the value's name as text of 1 to 1024 bytes")
            }
            return .value(name: name, data: checked["data"] ?? .null)
        }
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

/// A string as a JSON string literal.
func jsonString(_ text: String) -> String { CBORValue.text(text).jsonString() }
