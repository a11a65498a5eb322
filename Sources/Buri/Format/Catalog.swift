import BuriCodec

/// The kind of one component of an index.
public enum IndexKind: String, Codable, Sendable, Hashable {
    /// Strings (as UTF-8) and raw bytes, ordered bytewise.
    case binary
    /// Integers and floating-point numbers on one exact, ordered number line.
    case numeric
}

/// How one index of a bucket is defined, as recorded in the bucket catalog
/// (`docs/FORMAT.md`, "Bucket catalog").
///
/// ```swift
/// let info = try db.bucketInfo(named: "Person")
/// for index in info.indexes { print(index.name, index.components, index.isUnique) }
/// ```
public struct IndexDefinition: Codable, Sendable, Hashable {
    /// The id under which its entries are stored; never reused within a bucket.
    public var id: UInt32
    /// The name queries use.
    public var name: String
    /// The kinds of the values in its tuples: one for a plain index, several for a compound index.
    public var components: [IndexKind]
    /// Whether a value tuple may belong to one object at most (stored in the catalog as `unique`).
    ///
    /// ```swift
    /// let email = try db.bucketInfo(named: "Person")?.index(named: "email")
    /// if email?.isUnique == true { print("one object per email") }
    /// ```
    public var isUnique: Bool
    /// Whether an object may have several entries (an index over an array).
    public var multiValued: Bool
    /// The declaration's version; changing it rebuilds the index.
    public var version: Int
    /// For each component, the object field (a top-level key of the object's CBOR map) it reads,
    /// when known. Buckets made by `buri import` record them; Swift declarations record them when
    /// they name the field (`.numeric("age", \.age, field: "age")`). Without them, tools cannot
    /// compute the index and `buri import` refuses the bucket.
    public var fields: [String]?
    /// For each component, how its value is read from its field; `nil` means ``IndexFieldForm/value``
    /// for every component (as in catalogs written before format version 2).
    public var fieldForms: [IndexFieldForm]?
    /// Whether a Swift closure computes the values (`.computed`, or a property of a type tools cannot
    /// read, such as `[UInt8]`), so that no tool can compute them from the stored object.
    public var computed: Bool?
    /// For each component, the path of map keys its value is read from (`["address", "city"]`),
    /// when some component reads a field nested in the object; ``fields`` is then `nil`, so that
    /// readers that do not know paths refuse to compute the index instead of reading the wrong
    /// field. Written by `buri import`/`restore` (`--binary-index city=address.city`); see
    /// ``componentPaths``.
    public var fieldPaths: [[String]]?
    /// For a relationship: the name of the bucket its values are keys of (format 5). Its entries
    /// are references; `check` reports those whose target is missing.
    public var references: String?
    /// For a relationship: what deleting a referenced object does to the objects holding it.
    public var onDelete: DeleteRule?
    /// For a full-text index (format 6): the tokenizer version and stop words that made its
    /// entries (`docs/FORMAT.md` §5). Its components stay `[.binary]`: each entry's tuple is one
    /// term, and its value lists the term's positions (§9a).
    public var text: TextIndexDefinition?
    /// Whether the index was declared to store its values readable in an encrypted database
    /// (format 8; `.plaintext()` in Swift). An encrypted database refuses any other index but a
    /// relationship's, whose values are object keys, which are stored readable anyway
    /// (`docs/SECURITY.md`).
    public var plaintext: Bool?
    /// The keyed tokens its values are stored as, when it is private in an encrypted database;
    /// attached to a bucket view's definitions, never stored (`IndexTokens`).
    var tokenSlot = IndexTokens.Slot()
    var tokens: IndexTokens? { tokenSlot.tokens }

    public init(
        id: UInt32, name: String, components: [IndexKind], unique: Bool = false, multiValued: Bool = false,
        version: Int = 0,
        fields: [String]? = nil, fieldForms: [IndexFieldForm]? = nil, computed: Bool? = nil,
        fieldPaths: [[String]]? = nil, references: String? = nil, onDelete: DeleteRule? = nil,
        text: TextIndexDefinition? = nil, plaintext: Bool? = nil
    ) {
        self.text = text
        self.plaintext = plaintext
        self.references = references
        self.onDelete = onDelete
        self.id = id
        self.name = name
        self.components = components
        self.isUnique = unique
        self.multiValued = multiValued
        self.version = version
        self.fields = fields
        self.fieldForms = fieldForms
        self.computed = computed
        self.fieldPaths = fieldPaths
    }

    /// Whether two definitions describe the same index entries (ignoring the id and how tools
    /// read the values, which never changes the entries).
    func hasSameShape(as other: IndexDefinition) -> Bool {
        name.hasSameBytes(as: other.name) && components == other.components && isUnique == other.isUnique
            && multiValued == other.multiValued && version == other.version
            && (text == nil) == (other.text == nil)
            && (text.map { mine in other.text.map { mine.hasSameEntries(as: $0) } ?? false } ?? true)
    }

    /// The catalog's field names (`docs/FORMAT.md`, "Bucket catalog"): ``isUnique`` is stored as
    /// `unique`, as it always was; the others under their own names, in declaration order.
    enum CodingKeys: String, CodingKey {
        case id, name, components
        case isUnique = "unique"
        case multiValued, version, fields, fieldForms, computed, fieldPaths, references, onDelete, text, plaintext
    }
}

/// How a tool reads one index component's value from the object's field (recorded in the catalog).
public enum IndexFieldForm: String, Codable, Sendable, Hashable {
    /// The field's value itself: a number (or a tag 1/1001 date, as its seconds since 1970) for a
    /// numeric component, a text or byte string for a binary one; an array gives one entry per element.
    case value
    /// A `Date`: the field holds RFC 8949 tag 1 or RFC 9581 tag 1001 (or, in records of format
    /// version 1, an untagged number of seconds since 2001), and the index value is its seconds
    /// since 1970, as `Date.timeIntervalSince1970` gives them.
    case date
}

/// A bucket's entry in the catalog: its id, name and index definitions.
public struct BucketDescriptor: Codable, Sendable, Hashable {
    /// The id that prefixes all its record and index keys.
    public var id: UInt32
    /// Its name.
    public var name: String
    /// The object field holding each object's key, when known.
    public var keyField: String?
    /// The schema version of the objects last declared for it.
    public var schemaVersion: UInt64
    /// Its indexes.
    public var indexes: [IndexDefinition]
    /// The id the next new index will get (ids are never reused).
    public var nextIndexId: UInt32
    /// The id the bucket had before its first generation switch (`deleteAll`, or an import
    /// published into it), kept through every later one; `nil` while the bucket still has the id
    /// it was made with. Continuation tokens name the bucket by it (see ``lineageId``), so a token
    /// resumes across `deleteAll` but never in another bucket (`docs/FORMAT.md` §5, §11).
    public var originId: UInt32?
    /// The migration steps the type declared (`nil`: none), so tools can upgrade older records.
    public var migrations: [StoredMigration]?
    /// `true` (format 9) while the database is being encrypted online and this bucket has not been
    /// copied into a sealed generation yet: its records may be plaintext and its indexes hold
    /// readable values, so its views do not use keyed tokens (`docs/FORMAT.md` §4a). `nil`
    /// otherwise: the copy's catalog entry, which ``BuriDatabase/finishEncryption(batchSize:progress:)``
    /// publishes, has none.
    public var plaintextValues: Bool?

    public init(
        id: UInt32, name: String, keyField: String? = nil, schemaVersion: UInt64 = 0, indexes: [IndexDefinition] = [],
        nextIndexId: UInt32 = 1,
        originId: UInt32? = nil
    ) {
        self.id = id
        self.name = name
        self.keyField = keyField
        self.schemaVersion = schemaVersion
        self.indexes = indexes
        self.nextIndexId = nextIndexId
        self.originId = originId
    }

    /// The id that names the bucket through all its generations: the one it was made with
    /// (``originId``, or ``id`` while it has never switched). What continuation tokens carry.
    ///
    /// ```swift
    /// let info = try db.bucketInfo(named: "Person")
    /// print(info.id, info.lineageId)   // 7 1 after a few `deleteAll`s of bucket 1
    /// ```
    public var lineageId: UInt32 { originId ?? id }

    /// The same bucket under generation `newId`: the id changes, the lineage stays.
    func movedTo(_ newId: UInt32) -> BucketDescriptor {
        guard newId != id else { return self }
        var moved = self
        moved.originId = lineageId
        moved.id = newId
        return moved
    }

    /// The index called `name`, if any. Names are compared as UTF-8 bytes: `"\u{E9}"` and
    /// `"e\u{301}"` (both "é") are two different names, as they are on disk.
    ///
    /// ```swift
    /// let age = try db.bucketInfo(named: "Person")?.index(named: "age")
    /// ```
    public func index(named name: String) -> IndexDefinition? {
        indexes.first { $0.name.hasSameBytes(as: name) }
    }

    func encoded() throws -> [UInt8] { try CBOREncoder().encode(self) }

    static func decode(_ bytes: [UInt8]) throws -> BucketDescriptor {
        try CBORDecoder().decode(BucketDescriptor.self, from: bytes)
    }
}

extension String {
    /// Whether two strings have the same UTF-8 bytes. Swift's `==` is canonical equivalence
    /// ("\u{E9}" == "e\u{301}"), but names and keys are stored, and so compared, as bytes.
    @inline(__always)
    func hasSameBytes(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }
}
