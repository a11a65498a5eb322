/// A `Codable` type that can be stored in a ``Bucket``: it names its key and its indexes.
///
/// ```swift
/// struct Person: BuriSupport {
///     var objectId: String
///     var name: String
///     var locale: String
///     var age: Int
///
///     static let buri = BuriSchema<Person>(
///         key: \.objectId,
///         indexes: [.binary("locale", \.locale), .numeric("age", \.age)]
///     )
/// }
/// ```
public protocol BuriSupport: Codable {
    /// The key, indexes and bucket name of this type.
    static var buri: BuriSchema<Self> { get }
}

/// How a ``BuriSupport`` type is stored: the property holding each object's key, the indexes
/// kept for it, the bucket's default name and the schema version written into each record.
///
/// ```swift
/// static let buri = BuriSchema<Note>(key: \.id, indexes: [.binary("tags", \.tags)], bucket: "notes")
/// ```
public struct BuriSchema<T>: Sendable {
    /// Reads an object's key (a non-empty `String` of at most 4096 UTF-8 bytes).
    public let key: KeyPath<T, String> & Sendable
    /// The indexes kept for every object.
    public let indexes: [BuriIndex<T>]
    /// The bucket name used when none is given; defaults to the type's name.
    public let bucketName: String
    /// A number you raise when the type's shape changes, stored in every record's header.
    public let schemaVersion: Int
    /// The name of the key property in the object's encoded form, when you want tools to know it.
    public let keyField: String?
    /// The steps that upgrade records of older schema versions (see ``BuriMigration``).
    public let migrations: [BuriMigration]

    public init(
        key: KeyPath<T, String> & Sendable,
        indexes: [BuriIndex<T>] = [],
        bucket: String? = nil,
        schemaVersion: Int = 0,
        keyField: String? = nil,
        migrations: [BuriMigration] = []
    ) {
        self.key = key
        self.indexes = indexes
        self.bucketName = bucket ?? String(describing: T.self)
        self.schemaVersion = schemaVersion
        self.keyField = keyField
        self.migrations = migrations
    }
}

/// One secondary index of a ``BuriSupport`` type: a name and how to read its value(s) from an object.
///
/// ```swift
/// .binary("locale", \.locale)                 // a string property
/// .numeric("age", \.age)                      // any integer or floating-point property
/// .numeric("score", \.score)                  // an optional: no entry when nil
/// .binary("tags", \.tags)                     // an array: one entry per distinct element
/// .binary("email", \.email, unique: true)     // at most one object per value
/// .compound("locale_age", .binary(\.locale), .numeric(\.age))
/// .numeric("due", \.dueDate, field: "dueDate") // tools (`buri import`) read it from field "dueDate"
/// ```
///
/// `field:` names the key under which the property is encoded (its coding key). It is recorded in
/// the catalog so that `buri import` can compute the index as this declaration does; an index
/// without one (or a `.computed` one) is refused by `buri import`. The first object a `Bucket`
/// stores is checked against the named fields, so a wrong name fails at once.
public struct BuriIndex<T>: Sendable {
    /// The name queries use.
    public let name: String
    /// The kind of each component.
    public let components: [IndexKind]
    /// Whether a value may belong to one object only.
    public let isUnique: Bool
    /// Whether an object may have several entries.
    public let isMultiValued: Bool
    /// Raise it to rebuild the index when how its values are computed changes.
    public let version: Int
    /// Per component, the encoded field it reads and how (``IndexFieldForm``); `nil` when not declared.
    public let fields: [(name: String, form: IndexFieldForm)]?
    /// Whether Swift code computes the values so that tools cannot (`.computed`, or a property
    /// whose type has no ``IndexFieldForm``).
    public let isComputed: Bool
    /// The object's value tuples for this index (one per entry).
    let tuples: @Sendable (T) throws(BuriError) -> [[IndexValue]]
    /// The property a single-component index reads, for queries by key path (`nil` for compound
    /// and computed indexes).
    let keyPath: (AnyKeyPath & Sendable)?
    /// For a relationship (`.reference`, Reference.swift): the bucket its
    /// references point into and what their target's deletion does.
    /// (The bucket name is read when the bucket is opened, not when the schema is made: a type may
    /// refer to itself, and reading its own schema while it is being made would never end.)
    let reference: (bucket: @Sendable () -> String, rule: DeleteRule)?
    /// Why the declaration cannot be used, reported when the bucket is opened.
    let declarationError: String?
    /// Declared with ``plaintext()``: its values may be stored readable in an encrypted database.
    public private(set) var isPlaintext = false
    /// For a full-text index (`.text`, TextIndex.swift): its catalog definition, the tokenizer it
    /// uses and the texts it reads from an object (one, or an array's elements in order).
    let text: TextIndexSource?

    init(
        name: String, components: [IndexKind], unique: Bool, multi: Bool, version: Int,
        fields: [(name: String, form: IndexFieldForm)]? = nil, computed: Bool = false,
        keyPath: (AnyKeyPath & Sendable)? = nil, reference: (bucket: @Sendable () -> String, rule: DeleteRule)? = nil,
        declarationError: String? = nil, text: TextIndexSource? = nil,
        tuples: @escaping @Sendable (T) throws(BuriError) -> [[IndexValue]]
    ) {
        self.keyPath = keyPath
        self.reference = reference
        self.declarationError = declarationError
        self.text = text
        self.name = name
        self.components = components
        self.isUnique = unique
        self.isMultiValued = multi
        self.version = version
        self.fields = computed ? nil : fields
        self.isComputed = computed
        self.tuples = tuples
    }

    var definition: IndexDefinition {
        let forms = fields?.map(\.form)
        return IndexDefinition(
            id: 0, name: name, components: components, unique: isUnique, multiValued: isMultiValued, version: version,
            fields: fields?.map(\.name), fieldForms: forms?.allSatisfy { $0 == .value } == true ? nil : forms,
            computed: isComputed ? true : nil, references: reference?.bucket(), onDelete: reference?.rule,
            text: text?.definition, plaintext: isPlaintext ? true : nil)
    }

    /// The same index, declared to store its values readable in an encrypted database.
    ///
    /// An encrypted database seals every record, but an index's entries are keys the storage
    /// engine orders, so their values stay readable in its files (`docs/SECURITY.md`). It refuses
    /// an index not declared this way (but a relationship's), so no value becomes readable unless
    /// the app said so. On a plaintext database it changes nothing.
    ///
    /// ```swift
    /// static let buri = BuriSchema<Note>(key: \.id, indexes: [.numeric("created", \.created).plaintext()])
    /// ```
    public func plaintext() -> BuriIndex {
        var copy = self
        copy.isPlaintext = true
        return copy
    }

    /// The recorded source of a single-component index over a property of type `V`.
    static func source(
        _ field: String?, form: IndexFieldForm?
    ) -> (fields: [(name: String, form: IndexFieldForm)]?, computed: Bool) {
        guard let field else { return (nil, false) }
        guard let form else { return (nil, true) }
        return ([(field, form)], false)
    }

    // MARK: Binary

    /// A binary index over a string or bytes property; `field` is its encoded name, for tools.
    public static func binary<V: BinaryIndexable>(
        _ name: String, _ keyPath: KeyPath<T, V> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.binary], unique: unique, multi: false, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object in
            [[object[keyPath: keyPath].binaryIndexValue]]
        }
    }

    /// A binary index over an optional property; objects where it is `nil` have no entry.
    public static func binary<V: BinaryIndexable>(
        _ name: String, _ keyPath: KeyPath<T, V?> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.binary], unique: unique, multi: false, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object in
            object[keyPath: keyPath].map { [[$0.binaryIndexValue]] } ?? []
        }
    }

    /// A multi-valued binary index over an array property: one entry per distinct element.
    public static func binary<V: BinaryIndexable>(
        _ name: String, _ keyPath: KeyPath<T, [V]> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.binary], unique: unique, multi: true, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object in
            object[keyPath: keyPath].map { [$0.binaryIndexValue] }
        }
    }

    // MARK: Numeric

    /// A numeric index over an integer, floating-point or `Date` property; `field` is its encoded
    /// name, for tools.
    public static func numeric<V: NumericIndexable>(
        _ name: String, _ keyPath: KeyPath<T, V> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.numeric], unique: unique, multi: false, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object throws(BuriError) in
            [[try object[keyPath: keyPath].numericIndexValue()]]
        }
    }

    /// A numeric index over an optional property; objects where it is `nil` have no entry.
    public static func numeric<V: NumericIndexable>(
        _ name: String, _ keyPath: KeyPath<T, V?> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.numeric], unique: unique, multi: false, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object throws(BuriError) in
            guard let value = object[keyPath: keyPath] else { return [] }
            return [[try value.numericIndexValue()]]
        }
    }

    /// A multi-valued numeric index over an array property: one entry per distinct element.
    public static func numeric<V: NumericIndexable>(
        _ name: String, _ keyPath: KeyPath<T, [V]> & Sendable, field: String? = nil, unique: Bool = false,
        version: Int = 0
    ) -> BuriIndex {
        let source = source(field, form: V.indexFieldForm)
        return BuriIndex(
            name: name, components: [.numeric], unique: unique, multi: true, version: version, fields: source.fields,
            computed: source.computed, keyPath: keyPath
        ) { object throws(BuriError) in
            var tuples: [[IndexValue]] = []
            for element in object[keyPath: keyPath] { tuples.append([try element.numericIndexValue()]) }
            return tuples
        }
    }

    // MARK: Compound and custom

    /// A compound index over several properties, ordered by the first, then the second, …
    /// Query it by equality on leading components and a range or prefix on the next.
    /// Tools can compute it when every part names its `field:`.
    ///
    /// An object has at most one entry (`docs/FORMAT.md` §9): every part's value is computed and
    /// checked (a NaN fails the write, whatever the other parts hold), then an object with a `nil`
    /// optional part has **no** entry — so it is not found by a query on the other parts either,
    /// and a unique compound index does not constrain it. A part cannot be an array; for several
    /// tuples per object use ``computed(_:components:unique:version:_:)``.
    ///
    /// ```swift
    /// .compound("locale_age", .binary(\.locale), .numeric(\.age))   // ("EN", 20)
    /// ```
    public static func compound(
        _ name: String, _ parts: IndexComponent<T>..., unique: Bool = false, version: Int = 0
    ) -> BuriIndex {
        let computed = parts.contains { $0.isComputed }
        var fields: [(name: String, form: IndexFieldForm)]? = []
        for part in parts {
            if let field = part.field { fields?.append(field) } else { fields = nil }
        }
        return BuriIndex(
            name: name, components: parts.map(\.kind), unique: unique, multi: false, version: version, fields: fields,
            computed: computed
        ) { object throws(BuriError) in
            // Every part is computed, so whether an object is refused (a NaN) does not depend on
            // the order of the parts or on another part being nil.
            var tuple: [IndexValue] = []
            tuple.reserveCapacity(parts.count)
            var complete = true
            for part in parts {
                if let value = try part.value(object) { tuple.append(value) } else { complete = false }
            }
            return complete ? [tuple] : []
        }
    }

    /// An index whose values a closure computes: return one tuple per entry (none to skip the object).
    /// Each tuple must have one value per component, of the component's kind.
    /// It is recorded as computed: `buri import` cannot compute it and refuses the bucket.
    public static func computed(
        _ name: String, components: [IndexKind], unique: Bool = false, version: Int = 0,
        _ tuples: @escaping @Sendable (T) throws(BuriError) -> [[IndexValue]]
    ) -> BuriIndex {
        BuriIndex(
            name: name, components: components, unique: unique, multi: true, version: version, computed: true,
            tuples: tuples)
    }
}

/// One component of a compound index.
///
/// ```swift
/// .compound("locale_age", .binary(\.locale, field: "locale"), .numeric(\.age, field: "age"))
/// ```
public struct IndexComponent<T>: Sendable {
    let kind: IndexKind
    /// The encoded field it reads, for tools, if declared and readable.
    let field: (name: String, form: IndexFieldForm)?
    let isComputed: Bool
    let value: @Sendable (T) throws(BuriError) -> IndexValue?

    init(
        kind: IndexKind, field: String?, form: IndexFieldForm?,
        value: @escaping @Sendable (T) throws(BuriError) -> IndexValue?
    ) {
        self.kind = kind
        self.field = field.flatMap { name in form.map { (name, $0) } }
        self.isComputed = field != nil && form == nil
        self.value = value
    }

    /// A string or bytes property.
    public static func binary<V: BinaryIndexable>(
        _ keyPath: KeyPath<T, V> & Sendable, field: String? = nil
    ) -> IndexComponent {
        IndexComponent(kind: .binary, field: field, form: V.indexFieldForm) { $0[keyPath: keyPath].binaryIndexValue }
    }

    /// An optional string or bytes property (objects where it is `nil` get no entry).
    public static func binary<V: BinaryIndexable>(
        _ keyPath: KeyPath<T, V?> & Sendable, field: String? = nil
    ) -> IndexComponent {
        IndexComponent(kind: .binary, field: field, form: V.indexFieldForm) { $0[keyPath: keyPath]?.binaryIndexValue }
    }

    /// An integer, floating-point or `Date` property.
    public static func numeric<V: NumericIndexable>(
        _ keyPath: KeyPath<T, V> & Sendable, field: String? = nil
    ) -> IndexComponent {
        IndexComponent(kind: .numeric, field: field, form: V.indexFieldForm) { object throws(BuriError) in
            try object[keyPath: keyPath].numericIndexValue()
        }
    }

    /// An optional integer, floating-point or `Date` property (objects where it is `nil` get no entry).
    public static func numeric<V: NumericIndexable>(
        _ keyPath: KeyPath<T, V?> & Sendable, field: String? = nil
    ) -> IndexComponent {
        IndexComponent(kind: .numeric, field: field, form: V.indexFieldForm) { object throws(BuriError) in
            try object[keyPath: keyPath]?.numericIndexValue()
        }
    }
}
