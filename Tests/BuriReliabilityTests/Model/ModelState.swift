@testable import Buri

// The model of the randomized model test (ModelTests.swift): what a bucket holds, and what every
// query, page and count over it must return, computed the simple way — by scanning plain Swift
// dictionaries — from docs/FORMAT.md §8, §9 and §11, never from Buri's own code. Keys, names and
// strings are compared as UTF-8 bytes throughout ("é" and "e\u{301}" are two keys), numbers exactly
// across Int64, UInt64 and Double.

// MARK: Numbers

/// A number as it was given, in its own Swift type: the model compares them exactly.
enum ModelNumber: Codable, Sendable, Hashable, CustomStringConvertible {
    case int(Int64)
    case uint(UInt64)
    case double(Double)

    var isNaN: Bool {
        if case .double(let value) = self { return value.isNaN }
        return false
    }

    /// The index value Buri is given for it (NaN throws, as Buri refuses it).
    func indexValue() throws(BuriError) -> IndexValue {
        switch self {
        case .int(let value): return IndexValue(value)
        case .uint(let value): return IndexValue(value)
        case .double(let value): return try IndexValue(value)
        }
    }

    /// The same number of the same type, bit for bit (-0.0 is not 0.0 here).
    func isIdentical(to other: ModelNumber) -> Bool {
        switch (self, other) {
        case let (.int(a), .int(b)): return a == b
        case let (.uint(a), .uint(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        default: return false
        }
    }

    var description: String {
        switch self {
        case .int(let value): return "\(value)"
        case .uint(let value): return "\(value)u"
        case .double(let value): return "\(value)d"
        }
    }

    /// An integer as sign and magnitude: every Int64 and UInt64, and every integral double below 2^64.
    struct Wide: Comparable {
        var negative: Bool
        var magnitude: UInt64

        init(negative: Bool, magnitude: UInt64) {
            self.negative = negative && magnitude != 0
            self.magnitude = magnitude
        }

        static func < (a: Wide, b: Wide) -> Bool {
            if a.negative != b.negative { return a.negative }
            return a.negative ? a.magnitude > b.magnitude : a.magnitude < b.magnitude
        }
    }

    /// The number as an integer when it is one (of magnitude below 2^64), else as a double.
    enum Exact {
        case integer(Wide)
        case real(Double)
    }

    var exact: Exact {
        switch self {
        case .int(let value): return .integer(Wide(negative: value < 0, magnitude: value.magnitude))
        case .uint(let value): return .integer(Wide(negative: false, magnitude: value))
        case .double(let value):
            if value.isFinite, value == value.rounded(.towardZero), value.magnitude < 18_446_744_073_709_551_616.0 {
                return .integer(Wide(negative: value < 0, magnitude: UInt64(value.magnitude)))
            }
            return .real(value)
        }
    }

    /// -1, 0 or 1: the exact order of two numbers on one number line (-0.0 equals 0).
    static func compare(_ a: ModelNumber, _ b: ModelNumber) -> Int {
        switch (a.exact, b.exact) {
        case let (.integer(x), .integer(y)): return x < y ? -1 : (y < x ? 1 : 0)
        case let (.real(x), .real(y)): return x < y ? -1 : (x > y ? 1 : 0)
        case let (.integer(x), .real(y)): return compare(x, y)
        case let (.real(x), .integer(y)): return -compare(y, x)
        }
    }

    /// An integer against a double that is not an integer below 2^64 in magnitude.
    private static func compare(_ integer: Wide, _ real: Double) -> Int {
        if real == .infinity || real >= 18_446_744_073_709_551_616.0 { return -1 }
        if real == -.infinity || real <= -18_446_744_073_709_551_616.0 { return 1 }
        let floor = real.rounded(.down)
        let wideFloor = Wide(negative: floor < 0, magnitude: UInt64(floor.magnitude))
        if integer < wideFloor { return -1 }
        if wideFloor < integer { return 1 }
        return -1  // integer == floor(real) < real, which has a fraction
    }
}

// MARK: Index values

/// One element of an index tuple as the model sees it.
enum ModelValue: Hashable, CustomStringConvertible {
    case bytes([UInt8])
    case number(ModelNumber)

    static func string(_ string: String) -> ModelValue { .bytes(Array(string.utf8)) }

    func indexValue() throws(BuriError) -> IndexValue {
        switch self {
        case .bytes(let bytes): return IndexValue(bytes: bytes)
        case .number(let number): return try number.indexValue()
        }
    }

    /// Byte strings bytewise (a prefix first), numbers exactly; numbers before byte strings.
    static func compare(_ a: ModelValue, _ b: ModelValue) -> Int {
        switch (a, b) {
        case let (.bytes(x), .bytes(y)): return modelCompareBytes(x, y)
        case let (.number(x), .number(y)): return ModelNumber.compare(x, y)
        case (.number, .bytes): return -1
        case (.bytes, .number): return 1
        }
    }

    var description: String {
        switch self {
        case .bytes(let bytes): return escaped(String(decoding: bytes, as: UTF8.self))
        case .number(let number): return number.description
        }
    }
}

/// A string as Swift source with every character outside printable ASCII escaped, so that
/// byte-different look-alikes ("\u{E9}" and "e\u{301}") read differently in reports.
func escaped(_ string: String) -> String {
    var out = "\""
    for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case " "..."~": out.unicodeScalars.append(scalar)
        default: out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        }
    }
    return out + "\""
}

/// Bytewise order, a prefix first.
func modelCompareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
    return a.count < b.count ? -1 : (a.count > b.count ? 1 : 0)
}

func compareTuples(_ a: [ModelValue], _ b: [ModelValue]) -> Int {
    for (x, y) in zip(a, b) {
        let order = ModelValue.compare(x, y)
        if order != 0 { return order }
    }
    return a.count < b.count ? -1 : (a.count > b.count ? 1 : 0)
}

// MARK: The object type

/// An object holding an ordered list of references into the model's first bucket ("\u{E9}", which is
/// not the canonically equal "e\u{301}"), with the nullify rule: deleting an item there, one by one,
/// by `deleteAll` or by dropping the bucket, takes it out of every link in the same commit.
struct ModelLink: BuriSupport, Sendable, Equatable {
    var id: String
    var targets: [Ref<ModelItem>]

    static let targetBucket = "\u{E9}"
    static let buri = BuriSchema<ModelLink>(
        key: \.id, indexes: [.reference("targets", \.targets, in: targetBucket, onDelete: .nullify)], bucket: "links")
}

/// The objects the model test stores: a unique index, a multi-valued one, a compound one, numbers
/// of every kind in one index (`num`) and doubles (`real`, where -0.0, the infinities and NaN go),
/// and two full-text indexes, over an optional string (`body`) and an array of them (`paragraphs`),
/// which the model searches itself (Model/ModelText.swift).
struct ModelItem: BuriSupport, Sendable, CustomStringConvertible {
    var id: String
    var group: String
    var num: ModelNumber
    var real: Double
    var tags: [String]
    var email: String?
    var note: String
    var body: String?
    var paragraphs: [String]

    static let buri = BuriSchema<ModelItem>(
        key: \.id,
        indexes: [
            .binary("group", \.group),
            // Numbers keep their order, so an encrypted database stores them only when declared
            // plaintext; the binary and text indexes are private there (keyed tokens).
            .computed("num", components: [.numeric]) { item throws(BuriError) in [[try item.num.indexValue()]] }
                .plaintext(),
            .numeric("real", \.real).plaintext(),
            .binary("tags", \.tags),
            .binary("email", \.email, unique: true),
            .compound("group_real", .binary(\.group), .numeric(\.real)).plaintext(),
            .text("body", \.body),
            .text("paragraphs", \.paragraphs),
        ],
        bucket: "Model",
        // Version 0 kept the note under "legacyNote" (the raw write path still writes some such
        // records): every read upgrades them, migrateAll rewrites them.
        schemaVersion: 1,
        migrations: [.from(0, .rename("legacyNote", to: "note"))]
    )

    /// The indexes, with their arity: what the model computes entries for.
    static let indexes: [(name: String, arity: Int)] = [
        ("group", 1), ("num", 1), ("real", 1), ("tags", 1), ("email", 1), ("group_real", 2),
    ]

    var keyBytes: [UInt8] { Array(id.utf8) }

    /// Whether Buri refuses the object's index values (a NaN).
    var hasInvalidIndexValue: Bool { num.isNaN || real.isNaN }

    /// The object's distinct entries (value tuples) in index `index`, as FORMAT.md §9 defines them.
    func entries(_ index: String) -> [[ModelValue]] {
        switch index {
        case "group": return [[.string(group)]]
        case "num": return [[.number(num)]]
        case "real": return [[.number(.double(real))]]
        case "tags":
            var seen = Set<[UInt8]>()
            return tags.compactMap { seen.insert(Array($0.utf8)).inserted ? [.string($0)] : nil }
        case "email": return email.map { [[.string($0)]] } ?? []
        case "group_real": return [[.string(group), .number(.double(real))]]
        default: return []
        }
    }

    /// The same object, compared as bytes and bits.
    func isIdentical(to other: ModelItem) -> Bool {
        id.utf8.elementsEqual(other.id.utf8) && group.utf8.elementsEqual(other.group.utf8)
            && num.isIdentical(to: other.num)
            && real.bitPattern == other.real.bitPattern && tags.count == other.tags.count
            && zip(tags, other.tags).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
            && (email.map { Array($0.utf8) }) == (other.email.map { Array($0.utf8) })
            && note.utf8.elementsEqual(other.note.utf8)
            && (body.map { Array($0.utf8) }) == (other.body.map { Array($0.utf8) })
            && paragraphs.map { Array($0.utf8) } == other.paragraphs.map { Array($0.utf8) }
    }

    var description: String {
        "\(escaped(id)){group \(escaped(group)), num \(num), real \(real), tags [\(tags.map(escaped).joined(separator: ", "))], email \(email.map(escaped) ?? "nil"), body \(body.map(escaped) ?? "nil"), paragraphs [\(paragraphs.map(escaped).joined(separator: ", "))]}"
    }
}

// MARK: Queries

/// One condition of a model query (FORMAT.md §11).
struct ModelCondition: CustomStringConvertible {
    enum Bound {
        case unbounded
        case inclusive(ModelValue)
        case exclusive(ModelValue)
    }

    enum Rest {
        case none
        case range(Bound, Bound)
        case prefix([UInt8])
        /// Any of these values (`IN`); none matches nothing.
        case anyOf([ModelValue])
    }

    var index: String
    var leading: [ModelValue]
    var rest: Rest

    /// Whether an entry (value tuple) of the condition's index lies in its range.
    func matches(_ tuple: [ModelValue]) -> Bool {
        guard tuple.count >= leading.count, zip(tuple, leading).allSatisfy({ ModelValue.compare($0, $1) == 0 }) else {
            return false
        }
        switch rest {
        case .none:
            return true
        case let .range(lower, upper):
            guard tuple.count > leading.count else { return false }
            let value = tuple[leading.count]
            switch lower {
            case .unbounded: break
            case .inclusive(let bound): if ModelValue.compare(value, bound) < 0 { return false }
            case .exclusive(let bound): if ModelValue.compare(value, bound) <= 0 { return false }
            }
            switch upper {
            case .unbounded: break
            case .inclusive(let bound): if ModelValue.compare(value, bound) > 0 { return false }
            case .exclusive(let bound): if ModelValue.compare(value, bound) >= 0 { return false }
            }
            return true
        case .prefix(let prefix):
            guard tuple.count > leading.count, case .bytes(let bytes) = tuple[leading.count] else { return false }
            return bytes.starts(with: prefix)
        case .anyOf(let values):
            guard tuple.count > leading.count else { return false }
            return values.contains { ModelValue.compare(tuple[leading.count], $0) == 0 }
        }
    }

    /// The condition as Buri's query condition.
    func buriCondition() throws(BuriError) -> Query.Condition {
        func bound(_ bound: Bound) throws(BuriError) -> IndexBound {
            switch bound {
            case .unbounded: return .unbounded
            case .inclusive(let value): return .inclusive(try value.indexValue())
            case .exclusive(let value): return .exclusive(try value.indexValue())
            }
        }
        var values: [IndexValue] = []
        for value in leading { values.append(try value.indexValue()) }
        switch rest {
        case .none: return Query.Condition(index: index, leading: values, rest: .none)
        case let .range(lower, upper):
            return Query.Condition(
                index: index, leading: values, rest: .range(lower: try bound(lower), upper: try bound(upper)))
        case .prefix(let bytes): return Query.Condition(index: index, leading: values, rest: .prefix(bytes))
        case .anyOf(let alternatives):
            var encoded: [IndexValue] = []
            for value in alternatives { encoded.append(try value.indexValue()) }
            return Query.Condition(index: index, leading: values, rest: .anyOf(encoded))
        }
    }

    var description: String {
        let lead = leading.isEmpty ? "" : " leading \(leading)"
        switch rest {
        case .none: return "\(index)\(lead) equals"
        case let .range(lower, upper): return "\(index)\(lead) in \(lower)…\(upper)"
        case .prefix(let bytes): return "\(index)\(lead) prefix \(ModelValue.bytes(bytes))"
        case .anyOf(let values): return "\(index)\(lead) in \(values)"
        }
    }
}

/// A model of ``Query/Predicate``: conditions combined with AND, OR and NOT, and a filter on the
/// unindexed `note` field (its UTF-8 bytes begin with a prefix).
indirect enum ModelPredicate: CustomStringConvertible {
    case condition(ModelCondition)
    case all([ModelPredicate])
    case any([ModelPredicate])
    case not(ModelPredicate)
    case notePrefix([UInt8])
    /// A match of a text index (`Query.search`): a query the model can evaluate (it compiles).
    case search(index: String, query: ModelTextQuery)

    func isSatisfied(by item: ModelItem) -> Bool {
        switch self {
        case .search(let index, let query):
            guard case .some(.some(let compiled)) = try? query.compiled() else { return false }
            return compiled.matches(ModelItem.texts(item, index: index).map { ModelTextTokens($0) })
        case .condition(let condition): return item.entries(condition.index).contains(where: condition.matches)
        case .all(let parts): return parts.allSatisfy { $0.isSatisfied(by: item) }
        case .any(let parts): return parts.contains { $0.isSatisfied(by: item) }
        case .not(let inner): return !inner.isSatisfied(by: item)
        case .notePrefix(let prefix): return Array(item.note.utf8).starts(with: prefix)
        }
    }

    func buriPredicate() throws(BuriError) -> Query.Predicate {
        switch self {
        case .condition(let condition): return .condition(try condition.buriCondition())
        case .all(let parts):
            var built: [Query.Predicate] = []
            for part in parts { built.append(try part.buriPredicate()) }
            return .all(built)
        case .any(let parts):
            var built: [Query.Predicate] = []
            for part in parts { built.append(try part.buriPredicate()) }
            return .any(built)
        case .not(let inner): return .not(try inner.buriPredicate())
        case .notePrefix(let prefix):
            let filter = Query.all.filter { (item: ModelItem) in Array(item.note.utf8).starts(with: prefix) }
            return filter.predicates[0]
        case .search(let index, let query): return Query.search(index, query.description).predicates[0]
        }
    }

    var description: String {
        switch self {
        case .condition(let condition): return condition.description
        case .all(let parts): return "(" + parts.map(\.description).joined(separator: " and ") + ")"
        case .any(let parts): return "(" + parts.map(\.description).joined(separator: " or ") + ")"
        case .not(let inner): return "not \(inner)"
        case .notePrefix(let prefix): return "filter note prefix \(ModelValue.bytes(prefix))"
        case .search(let index, let query): return "search \(index) \(ModelValue.bytes(Array(query.description.utf8)))"
        }
    }
}

struct ModelQuery: CustomStringConvertible {
    var conditions: [ModelCondition] = []
    var predicates: [ModelPredicate] = []
    /// Sort keys: index name and direction (empty: the first condition's order, or key order).
    var sort: [(index: String, descending: Bool)] = []
    var descending = false
    var limit: Int?
    var offset = 0

    func buriQuery() throws(BuriError) -> Query {
        var conditions: [Query.Condition] = []
        for condition in self.conditions { conditions.append(try condition.buriCondition()) }
        var query = Query(conditions: conditions)
        for predicate in predicates { query.predicates.append(try predicate.buriPredicate()) }
        query.sortKeys = sort.map { SortKey(index: $0.index, descending: $0.descending) }
        query.isDescending = descending
        query.limit = limit
        query.offset = offset
        return query
    }

    var description: String {
        let parts = conditions.map(\.description) + predicates.map(\.description)
        var text = parts.isEmpty ? "all" : parts.joined(separator: " and ")
        if !sort.isEmpty {
            text += " order by " + sort.map { "\($0.index)\($0.descending ? " desc" : "")" }.joined(separator: ", ")
        }
        if descending { text += " descending" }
        if let limit { text += " limit \(limit)" }
        if offset > 0 { text += " offset \(offset)" }
        return text
    }
}

/// One part of a result's place in a query's order: a value tuple (or none), in a direction.
struct ModelSortPart {
    var tuple: [ModelValue]?
    var descending: Bool
}

/// A result's place in its query's order (FORMAT.md §11 and ``Query/order(by:)-(SortKey...)``):
/// compared part by part (an object with a value before one without, in both directions), then
/// by object key.
struct ModelPosition {
    var parts: [ModelSortPart]
    var key: [UInt8]
    var keyDescending: Bool

    /// The walk order of two positions: negative if `a` comes first.
    static func compare(_ a: ModelPosition, _ b: ModelPosition) -> Int {
        for (x, y) in zip(a.parts, b.parts) {
            switch (x.tuple, y.tuple) {
            case (nil, nil): continue
            case (nil, _): return 1
            case (_, nil): return -1
            case let (p?, q?):
                let order = compareTuples(p, q)
                if order != 0 { return x.descending ? -order : order }
            }
        }
        let order = modelCompareBytes(a.key, b.key)
        return a.keyDescending ? -order : order
    }
}

/// One result of a model query: its position in the query's order and the object.
struct ModelResult {
    var position: ModelPosition
    var item: ModelItem
    var key: [UInt8] { item.keyBytes }
}

// MARK: The model

/// What the database must hold: per bucket (name as bytes), its objects by key bytes.
struct ModelState {
    var buckets: [[UInt8]: [[UInt8]: ModelItem]] = [:]
    /// In an encrypted run: what a private index stores for a value (its token), whose order is
    /// the order results come in after a condition on that index; `nil` for a plaintext index.
    var stored: (_ index: String, _ value: ModelValue) -> ModelValue? = { _, _ in nil }
    /// The named values, by name bytes (never by String equality).
    var values: [[UInt8]: ModelNamedValue] = [:]
    /// The links (``ModelLink``) by key bytes: their targets' keys, in order.
    var links: [[UInt8]: [String]] = [:]

    /// Whether a link may name `key`: an object of the target bucket holds it.
    func linkable(_ key: String) -> Bool { objects(ModelLink.targetBucket)[Array(key.utf8)] != nil }

    /// The nullify rule: `deleted` keys (as bytes) of the target bucket leave every link.
    mutating func unlink(_ deleted: Set<[UInt8]>?) {
        for (key, targets) in links {
            links[key] = deleted.map { gone in targets.filter { !gone.contains(Array($0.utf8)) } } ?? []
        }
    }

    func objects(_ bucket: String) -> [[UInt8]: ModelItem] { buckets[Array(bucket.utf8)] ?? [:] }

    /// The bucket's objects in key order.
    func sorted(_ bucket: String) -> [ModelItem] {
        objects(bucket).values.sorted { modelCompareBytes($0.keyBytes, $1.keyBytes) < 0 }
    }

    /// Why Buri refuses a store.
    enum Refusal: Equatable, CustomStringConvertible {
        case emptyKey, keyTooLong, invalidIndexValue, uniqueViolation, invalidValueName, danglingReference

        func matches(_ error: BuriError) -> Bool {
            switch (self, error) {
            case (.emptyKey, .emptyKey), (.keyTooLong, .keyTooLong), (.invalidIndexValue, .invalidIndexValue),
                (.uniqueViolation, .uniqueViolation), (.invalidValueName, .invalidValueName),
                (.danglingReference, .danglingReference):
                return true
            default: return false
            }
        }

        var description: String {
            switch self {
            case .emptyKey: "an empty key"
            case .keyTooLong: "a key too long"
            case .invalidIndexValue: "an invalid index value"
            case .uniqueViolation: "a unique violation"
            case .invalidValueName: "an invalid value name"
            case .danglingReference: "a reference to nothing"
            }
        }
    }

    /// Why storing `items` in this order, as one batch, is refused, if it is: the first item whose
    /// key or index values are invalid, else the first unique value claimed while another object
    /// holds it (each item applied after the ones before it, FORMAT.md §9).
    func refusal(storing items: [ModelItem], in bucket: String) -> Refusal? {
        for item in items {
            if item.id.isEmpty { return .emptyKey }
            if item.id.utf8.count > 4096 { return .keyTooLong }
            if item.hasInvalidIndexValue { return .invalidIndexValue }
        }
        var next = objects(bucket)
        for item in items {
            if let email = item.email {
                let mine = Array(email.utf8)
                let key = item.keyBytes
                if next.contains(where: { $0.key != key && $0.value.email.map { Array($0.utf8) } == mine }) {
                    return .uniqueViolation
                }
            }
            next[item.keyBytes] = item
        }
        return nil
    }

    mutating func store(_ items: [ModelItem], in bucket: String) {
        for item in items { buckets[Array(bucket.utf8), default: [:]][item.keyBytes] = item }
    }

    /// Deletes the objects of `keys` (as bytes, each once); returns how many there were.
    mutating func delete(_ keys: [String], in bucket: String) -> Int {
        var deleted = Set<[UInt8]>()
        for key in keys where buckets[Array(bucket.utf8), default: [:]].removeValue(forKey: Array(key.utf8)) != nil {
            deleted.insert(Array(key.utf8))
        }
        if Array(bucket.utf8) == Array(ModelLink.targetBucket.utf8), !deleted.isEmpty { unlink(deleted) }
        return deleted.count
    }

    mutating func deleteAll(in bucket: String) -> Int {
        let count = objects(bucket).count
        buckets[Array(bucket.utf8)] = [:]
        if Array(bucket.utf8) == Array(ModelLink.targetBucket.utf8) { unlink(nil) }
        return count
    }

    /// Every result of `query` over the bucket, in its order, before offset and limit.
    func results(_ query: ModelQuery, in bucket: String) -> [ModelResult] {
        var results: [ModelResult] = []
        /// The object's first tuple in `index` in a direction (among those `condition` matches).
        func place(
            _ item: ModelItem, _ index: String, descending: Bool, within condition: ModelCondition? = nil
        )
            -> [ModelValue]?
        {
            let matching = item.entries(index).filter { condition?.matches($0) ?? true }.map { tuple in
                tuple.map { stored(index, $0) ?? $0 }
            }
            guard var place = matching.first else { return nil }
            for tuple in matching.dropFirst() {
                let order = compareTuples(tuple, place)
                if descending ? order > 0 : order < 0 { place = tuple }
            }
            return place
        }
        for item in objects(bucket).values {
            guard query.conditions.allSatisfy({ item.entries($0.index).contains(where: $0.matches) }),
                query.predicates.allSatisfy({ $0.isSatisfied(by: item) })
            else { continue }
            var parts: [ModelSortPart] = []
            let keyDescending: Bool
            if let lead = query.sort.first {
                keyDescending = lead.descending != query.descending
                for key in query.sort {
                    let descending = key.descending != query.descending
                    parts.append(
                        ModelSortPart(tuple: place(item, key.index, descending: descending), descending: descending))
                }
            } else {
                keyDescending = query.descending
                if let first = query.conditions.first {
                    parts.append(
                        ModelSortPart(
                            tuple: place(item, first.index, descending: query.descending, within: first),
                            descending: query.descending))
                }
            }
            results.append(
                ModelResult(
                    position: ModelPosition(parts: parts, key: item.keyBytes, keyDescending: keyDescending), item: item)
            )
        }
        results.sort { ModelPosition.compare($0.position, $1.position) < 0 }
        return results
    }

    /// The results `query` returns: offset and limit applied.
    func answer(_ query: ModelQuery, in bucket: String) -> [ModelResult] {
        let all = results(query, in: bucket).dropFirst(query.offset)
        return Array(query.limit.map { all.prefix($0) } ?? all)
    }
}

/// A named value of the model: one of three Swift types, each read back only as itself.
enum ModelNamedValue: Equatable, CustomStringConvertible {
    case int(Int64)
    case text(String)
    case list([String])

    var description: String {
        switch self {
        case .int(let value): "\(value)"
        case .text(let value): "\"\(value)\""
        case .list(let value): "\(value)"
        }
    }
}
