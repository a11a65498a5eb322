import BuriCodec

extension IndexDefinition {
    /// Why tools cannot compute this index from stored objects, or `nil` if they can: its values
    /// come from recorded fields (see ``fields`` and ``fieldForms``).
    public var uncomputableReason: String? {
        if computed == true {
            return "its values are computed by Swift code (a `.computed` index, or a property whose type tools cannot read)"
        }
        guard let fields, fields.count == components.count else {
            return "its Swift declaration names no field (declare it with `field:`, e.g. .numeric(\"\(name)\", \\.\(name), field: \"\(name)\"))"
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
    /// - Parameter acceptingArrays: whether an array may give several entries; default: only if
    ///   the index is multi-valued and has one component.
    /// - Throws: ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` naming the field, or
    ///   ``BuriError/invalidIndexDefinition(bucket:index:reason:)`` when tools cannot compute it.
    public func tuples(of object: CBORValue, acceptingArrays: Bool? = nil) throws(BuriError) -> [[IndexValue]] {
        if let reason = uncomputableReason {
            throw .invalidIndexDefinition(bucket: "", index: name, reason: "tools cannot compute it: " + reason)
        }
        let fields = fields ?? []
        let forms = fieldForms ?? Array(repeating: .value, count: components.count)
        let arrays = acceptingArrays ?? (multiValued && components.count == 1)
        // Every field is read and checked before a missing one drops the entry, so an object is
        // refused (an array in a compound index, a wrong type) whatever the order of its fields,
        // exactly as the Swift declaration computes every part of a compound index.
        var tuple: [IndexValue] = []
        var complete = true
        for position in components.indices {
            let field = fields[position]
            guard let value = object[field], !value.isNull else {
                complete = false
                continue
            }
            if case .array(let elements) = value {
                guard arrays, components.count == 1 else {
                    let why = components.count > 1 ? "a compound index takes one value per field" : "the index is single-valued"
                    throw invalid(field, "holds an array, but \(why)")
                }
                var tuples: [[IndexValue]] = []
                for element in elements where !element.isNull {
                    let single = [try indexValue(element, position: position, field: field, form: forms[position])]
                    if !tuples.contains(single) { tuples.append(single) }
                }
                return tuples
            }
            tuple.append(try indexValue(value, position: position, field: field, form: forms[position]))
        }
        return complete ? [tuple] : []
    }

    private func invalid(_ field: String, _ message: String) -> BuriError {
        .invalidIndexValue(bucket: nil, key: nil, index: name, reason: "field '\(field)' \(message)")
    }

    private func indexValue(_ value: CBORValue, position: Int, field: String, form: IndexFieldForm) throws(BuriError) -> IndexValue {
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
        case .text(let text): return "the string " + CBORValue.text(text.count > 40 ? String(text.prefix(40)) + "…" : text).jsonString()
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
