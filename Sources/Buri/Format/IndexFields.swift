import BuriCodec
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension IndexDefinition {
    /// Why tools cannot compute this index from stored objects, or `nil` if they can: its values
    /// come from recorded fields (see ``fields`` and ``fieldForms``).
    public var uncomputableReason: String? {
        if computed == true {
            return
                "its values are computed by Swift code (a `.computed` index, or a property whose type tools cannot read)"
        }
        if let fieldPaths {
            if fields != nil {
                // Buri writes one or the other: a reader that knows only `fields` would read other
                // fields than one that knows `fieldPaths`, so neither may guess.
                return
                    "its catalog entry records both `fields` and `fieldPaths`, which Buri never writes together (docs/FORMAT.md §5), so which fields it reads is ambiguous"
            }
            if fieldPaths.count != components.count {
                return "its catalog entry has \(fieldPaths.count) field paths for \(components.count) components"
            }
            if fieldPaths.contains(where: \.isEmpty) { return "its catalog entry has an empty field path" }
        } else if let fields {
            if fields.count != components.count {
                return
                    "its catalog entry has \(fields.count) field\(fields.count == 1 ? "" : "s") for \(components.count) component\(components.count == 1 ? "" : "s")"
            }
        } else {
            return
                "its Swift declaration names no field (declare it with `field:`, e.g. .numeric(\"\(name)\", \\.\(name), field: \"\(name)\"))"
        }
        if let forms = fieldForms, forms.count != components.count {
            return "its catalog entry has \(forms.count) field forms for \(components.count) components"
        }
        return nil
    }

    /// The value tuples of this index for `object` (an object's CBOR form), computed from its
    /// recorded fields exactly as the Swift declaration computes them: a missing or null field
    /// gives no entry (every other field is still checked, so a bad value is refused regardless); an array gives one entry per distinct non-null element (multi-valued
    /// single-component indexes only); numbers must be exactly an index number
    /// (``IndexValue/init(number:)``); a date (tag 1 or 1001, or in a ``IndexFieldForm/date`` field
    /// also a version 1 untagged number of seconds since 2001) gives its seconds since 1970.
    ///
    /// ```swift
    /// let definition = IndexDefinition(id: 1, name: "age", components: [.numeric], fields: ["age"])
    /// try definition.tuples(of: ["name": "Ana", "age": 31])   // [[31]]
    /// ```
    /// - Parameters:
    ///   - object: the object's CBOR form: a map of its recorded fields.
    ///   - acceptingArrays: whether an array may give several entries; default: only if the index
    ///     is multi-valued and has one component.
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` naming the field, or
    ///   ``BuriError/invalidIndexDefinition(bucket:index:reason:)`` when tools cannot compute it.
    public func tuples(of object: CBORValue, acceptingArrays: Bool? = nil) throws(BuriError) -> [[IndexValue]] {
        if let reason = uncomputableReason {
            throw .invalidIndexDefinition(bucket: "", index: name, reason: "tools cannot compute it: " + reason)
        }
        // A text index's tuples are the distinct folded terms of its field (docs/FORMAT.md §9a).
        if text != nil {
            return try textEntries(of: object, bucket: "").map { [IndexValue(encoded: $0.tuple)] }
        }
        let paths = componentPaths ?? []
        let forms = fieldForms ?? Array(repeating: .value, count: components.count)
        let arrays = acceptingArrays ?? (multiValued && components.count == 1)
        // Every field is read and checked before a missing one drops the entry, so an object is
        // refused (an array in a compound index, a wrong type) whatever the order of its fields,
        // exactly as the Swift declaration computes every part of a compound index.
        var tuple: [IndexValue] = []
        var complete = true
        for position in components.indices {
            let path = paths[position]
            let field = path.count == 1 ? path[0] : Self.fieldPathText(path)
            guard let value = try Self.value(at: path, in: object, index: name), !value.isNull else {
                complete = false
                continue
            }
            if case .array(let elements) = value {
                guard arrays, components.count == 1 else {
                    let why =
                        components.count > 1
                        ? "a compound index takes one value per field" : "the index is single-valued"
                    throw invalid(field, "holds an array, but \(why)")
                }
                // Distinct elements, in order; told apart by a set, so a long array is not
                // quadratic to index or to check.
                var tuples: [[IndexValue]] = []
                var seen = Set<IndexValue>()
                for element in elements where !element.isNull {
                    let value = try indexValue(element, position: position, field: field, form: forms[position])
                    if seen.insert(value).inserted { tuples.append([value]) }
                }
                return tuples
            }
            tuple.append(try indexValue(value, position: position, field: field, form: forms[position]))
        }
        return complete ? [tuple] : []
    }

    /// For each component, the path of map keys its value is read from: ``fieldPaths``, or each of
    /// ``fields`` as a one-key path; `nil` when neither is recorded. (An entry with both is
    /// ambiguous: ``uncomputableReason`` refuses it.)
    public var componentPaths: [[String]]? {
        fieldPaths ?? fields.map { $0.map { [$0] } }
    }

    /// The paths of the payload fields this index reads as dates (its ``IndexFieldForm/date``
    /// components), when tools can compute it; empty otherwise.
    ///
    /// ```swift
    /// let due = IndexDefinition(id: 1, name: "due", components: [.numeric], fields: ["due"], fieldForms: [.date])
    /// due.datePaths   // [["due"]]
    /// ```
    public var datePaths: [[String]] {
        guard uncomputableReason == nil, let paths = componentPaths, let forms = fieldForms else { return [] }
        return zip(paths, forms).compactMap { $1 == .date ? $0 : nil }
    }

    /// Records `paths` (one per component) as this index's fields: as ``fields`` when every path is
    /// one top-level key (as before paths existed), else as ``fieldPaths`` with ``fields`` `nil`.
    ///
    /// ```swift
    /// var city = IndexDefinition(id: 0, name: "city", components: [.binary])
    /// city.setFieldPaths([["address", "city"]])   // fieldPaths [["address", "city"]], fields nil
    /// ```
    public mutating func setFieldPaths(_ paths: [[String]]) {
        if paths.allSatisfy({ $0.count == 1 }) {
            fields = paths.map { $0[0] }
            fieldPaths = nil
        } else {
            fields = nil
            fieldPaths = paths
        }
    }

    /// The value at `path` in `object`: each key looked up (as UTF-8 bytes) in the map the previous
    /// one gave. `nil` when a key is missing or a map on the way is `null` (no entry, like a missing
    /// top-level field).
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` when a value on the way
    ///   is not a map (`"address": "Main St"` for the path `address.city`).
    public static func value(at path: [String], in object: CBORValue, index: String) throws(BuriError) -> CBORValue? {
        var current = object
        for (depth, key) in path.enumerated() {
            if depth > 0 {
                if current.isNull { return nil }
                guard case .map = current else {
                    let parent = fieldPathText(Array(path[..<depth]))
                    throw .invalidIndexValue(
                        bucket: nil, key: nil, index: index,
                        reason:
                            "field '\(fieldPathText(path))' is read through '\(parent)', which holds \(describe(current)), not an object"
                    )
                }
            }
            guard let next = current[key] else { return nil }
            current = next
        }
        return current
    }

    /// A field path as text: keys joined by `.`, a `.` or `\` inside a key written `\.` or `\\`
    /// (`["address", "city"]` is `address.city`; `["v1.2"]` is `v1\.2`).
    public static func fieldPathText(_ path: [String]) -> String {
        path.map { key in
            var text = ""
            for character in key.unicodeScalars {
                if character == "." || character == "\\" { text.unicodeScalars.append("\\") }
                text.unicodeScalars.append(character)
            }
            return text
        }.joined(separator: ".")
    }

    /// Parses a field path written as ``fieldPathText(_:)`` writes it: `.` separates keys, `\.` is
    /// a dot inside a key and `\\` a backslash; `nil` (with the reason) for an empty key or a
    /// backslash before anything else.
    ///
    /// ```swift
    /// IndexDefinition.parseFieldPath("address.city")   // .success(["address", "city"])
    /// IndexDefinition.parseFieldPath("v1\\.2")          // .success(["v1.2"])
    /// ```
    public static func parseFieldPath(_ text: String) -> Result<[String], FieldPathError> {
        var keys: [String] = []
        var key = String.UnicodeScalarView()
        var scalars = text.unicodeScalars[...]
        while let scalar = scalars.popFirst() {
            if scalar == "\\" {
                guard let next = scalars.popFirst(), next == "." || next == "\\" else {
                    return .failure(
                        FieldPathError(
                            path: text,
                            reason: "a backslash must be followed by '.' (a dot inside a key) or '\\' (a backslash)"))
                }
                key.append(next)
            } else if scalar == "." {
                guard !key.isEmpty else {
                    return .failure(
                        FieldPathError(
                            path: text,
                            reason: "it has an empty key; keys are separated by single dots, as in address.city"))
                }
                keys.append(String(key))
                key = String.UnicodeScalarView()
            } else {
                key.append(scalar)
            }
        }
        guard !key.isEmpty else {
            return .failure(
                FieldPathError(
                    path: text, reason: "it has an empty key; keys are separated by single dots, as in address.city"))
        }
        keys.append(String(key))
        return .success(keys)
    }

    private func invalid(_ field: String, _ message: String) -> BuriError {
        .invalidIndexValue(bucket: nil, key: nil, index: name, reason: "field '\(field)' \(message)")
    }

    private func indexValue(
        _ value: CBORValue, position: Int, field: String, form: IndexFieldForm
    ) throws(BuriError) -> IndexValue {
        switch (components[position], form) {
        case (.binary, .value):
            switch value {
            case .text(let text): return IndexValue(text)
            case .bytes(let bytes): return IndexValue(bytes: bytes)
            default: throw invalid(field, "holds \(Self.describe(value)); binary indexes take strings or byte strings")
            }
        case (.numeric, .value):
            switch value {
            case .tagged(let tag, _) where value.isTaggedDate:
                // A date (tag 1 or 1001) is its seconds since 1970, as a Swift Date indexes.
                guard let date = value.dateValue else {
                    throw invalid(field, "holds a tag \(tag) date that is not exactly a Date")
                }
                do {
                    return try IndexValue(date.timeIntervalSince1970)
                } catch {
                    throw invalid(field, "holds a date that cannot be indexed: " + Self.reason(error))
                }
            case .unsigned, .negative, .float:
                do {
                    return try IndexValue(number: value)
                } catch {
                    throw invalid(field, "holds \(value.jsonString()): " + Self.reason(error))
                }
            default:
                throw invalid(field, "holds \(Self.describe(value)); numeric indexes take numbers")
            }
        case (.numeric, .date):
            guard let date = value.dateValue else {
                throw invalid(field, "holds \(Self.describe(value)), not a date (seconds since 1970 in tag 1)")
            }
            do {
                return try IndexValue(date.timeIntervalSince1970)
            } catch {
                throw invalid(field, "holds a date that cannot be indexed: " + Self.reason(error))
            }
        case (.binary, .date):
            throw invalid(field, "is read as a date, but the index component is binary")
        }
    }

    private static func reason(_ error: BuriError) -> String {
        if case .invalidIndexValue(_, _, _, let reason) = error { return reason }
        return error.description
    }

    /// A short description of a value for messages.
    static func describe(_ value: CBORValue) -> String {
        switch value {
        case .text(let text):
            return "the string " + CBORValue.text(text.count > 40 ? String(text.prefix(40)) + "…" : text).jsonString()
        case .unsigned, .negative, .float: return "the number \(value.jsonString())"
        case .bool(let flag): return "\(flag)"
        case .array: return "an array"
        case .map: return "an object"
        case .bytes: return "a byte string"
        case .tagged(let tag, _): return "a value with tag \(tag)"
        case .null, .undefined: return "null"
        case .simple(let v): return "the simple value \(v)"
        }
    }
}

/// Why a field path given as text (`address.city`) could not be read.
public struct FieldPathError: Error, Sendable, CustomStringConvertible {
    /// The text as given.
    public var path: String
    /// What is wrong with it.
    public var reason: String
    public var description: String { "field path '\(path)': \(reason)" }
}

// MARK: - Dates in tools

extension BucketDescriptor {
    /// The paths of the payload fields that the bucket's indexes read as dates
    /// (``IndexDefinition/datePaths``), each once (keys compared as bytes).
    ///
    /// ```swift
    /// let info = try db.bucketInfo(named: "Task")
    /// info?.datePaths   // [["dueDate"]]
    /// ```
    public var datePaths: [[String]] {
        var paths: [[String]] = []
        for index in indexes {
            for path in index.datePaths where !paths.contains(where: { DatePaths.same($0, path) }) {
                paths.append(path)
            }
        }
        return paths
    }
}

/// How tools give a date one meaning on every path (docs/FORMAT.md §10, "Dates in tools"): a
/// number a person or a JSON file gives for a date is **seconds since 1970**; a record holds a date
/// as tag 1 or tag 1001 (or, written by format version 1, an untagged number of seconds since
/// 2001). These rewrite the values at a bucket's date paths (``BucketDescriptor/datePaths``),
/// directly or as elements of an array there, and leave every other value as it is.
public enum DatePaths {
    /// Whether two paths are the same keys, compared as bytes.
    static func same(_ a: [String], _ b: [String]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    }

    /// `object` with the value at each of `paths` (and each element of an array there) replaced by
    /// `transform(value, path)`; missing fields, `null`s and non-maps on the way are left alone.
    public static func rewriting(
        _ object: CBORValue, at paths: [[String]],
        _ transform: (CBORValue, [String]) throws -> CBORValue
    ) rethrows -> CBORValue {
        var result = object
        for path in paths where !path.isEmpty {
            result = try rewrite(result, path: path[...], whole: path, transform)
        }
        return result
    }

    private static func rewrite(
        _ value: CBORValue, path: ArraySlice<String>, whole: [String],
        _ transform: (CBORValue, [String]) throws -> CBORValue
    ) rethrows -> CBORValue {
        guard let key = path.first else {
            if case .array(let elements) = value { return .array(try elements.map { try transform($0, whole) }) }
            return try transform(value, whole)
        }
        guard case .map(var entries) = value,
            let position = entries.firstIndex(where: { $0.key.stringValue?.utf8.elementsEqual(key.utf8) == true })
        else { return value }
        entries[position].value = try rewrite(entries[position].value, path: path.dropFirst(), whole: whole, transform)
        return .map(entries)
    }

    /// `object` as tools show and export it: each **untagged** number at a date path — a date a
    /// format version 1 record holds as seconds since 2001 — becomes the tag 1 (or tag 1001) item
    /// of that same date, so it is shown as seconds since 1970 like every other date, and an
    /// export carries its meaning. Tagged dates and other values are unchanged.
    ///
    /// ```swift
    /// let old: CBORValue = ["id": "a", "due": .float(1)]            // 2001-01-01T00:00:01Z, version 1
    /// DatePaths.taggingStoredDates(old, at: [["due"]])["due"]      // .tagged(1, 978307201)
    /// ```
    public static func taggingStoredDates(_ object: CBORValue, at paths: [[String]]) -> CBORValue {
        guard !paths.isEmpty else { return object }
        return rewriting(object, at: paths) { value, _ in
            switch value {
            case .unsigned, .negative, .float:
                guard let date = value.dateValue else { return value }
                return CBORValue(date: date)
            default:
                return value
            }
        }
    }

    /// Why a number given as seconds since 1970 is not a date.
    public enum InputError: Error, Sendable, Equatable {
        /// NaN, or an integer that is not exactly a `Double`.
        case notADate
        /// A `Date` (a `Double` of seconds since 2001) cannot hold it exactly; `nearest` is the
        /// closest seconds since 1970 one can.
        case inexact(nearest: Double)
    }

    /// The date item a number given as seconds since 1970 stands for (tag 1, or tag 1001 when a
    /// float64 of seconds since 1970 cannot give the `Date` back), exactly or not at all.
    ///
    /// ```swift
    /// try DatePaths.dateItem(ofSecondsSince1970: 1_700_000_000)   // .tagged(1, 1700000000)
    /// try DatePaths.dateItem(ofSecondsSince1970: 0.1)              // throws .inexact(nearest: 0.10000002384185791)
    /// ```
    public static func dateItem(ofSecondsSince1970 number: CBORValue) throws(InputError) -> CBORValue {
        guard let seconds = number.doubleValue, !seconds.isNaN else { throw .notADate }
        let date = Date(timeIntervalSince1970: seconds)
        guard date.timeIntervalSince1970 == seconds else { throw .inexact(nearest: date.timeIntervalSince1970) }
        return CBORValue(date: date)
    }
}
