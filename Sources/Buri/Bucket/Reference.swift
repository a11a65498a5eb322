import BuriCodec

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A typed reference to an object of another bucket (or the same one): the key of a `Target`.
///
/// It encodes as plain data — the target's key as a text string — so `buri` and any reader of
/// docs/FORMAT.md see it as the key it is. Declare an index over a reference property with
/// `.reference(name, keyPath, onDelete:)` (``BuriIndex``) to make it a relationship: the
/// index answers "who refers to this object" and the target's deletion follows the declared
/// ``DeleteRule``.
///
/// ```swift
/// struct Playlist: BuriSupport {
///     var id: String
///     var songs: [Ref<Song>]                 // ordered: the array keeps its order
///     static let buri = BuriSchema<Playlist>(
///         key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)])
/// }
/// let tracks = try songs.objects(for: playlist.songs)           // in order; nil where missing
/// let holders = try playlists.objects(where: \.songs, equals: Ref(song))
/// ```
public struct Ref<Target: BuriSupport>: Codable, Hashable, Sendable, CustomStringConvertible, CBORTextValue {
    /// The key of the referenced object.
    public let key: String

    /// A reference to the object stored under `key` in `Target`'s bucket.
    ///
    /// ```swift
    /// let ref = Ref<Song>("s1")
    /// ```
    public init(_ key: String) { self.key = key }

    /// A reference to `object` (its key, read through `Target`'s schema).
    ///
    /// ```swift
    /// playlist.songs.append(Ref(song))
    /// ```
    public init(_ object: Target) { self.key = object[keyPath: Target.buri.key] }

    public init(from decoder: any Decoder) throws {
        key = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(key)
    }

    /// Keys are compared as bytes: `"\u{E9}"` and `"e\u{301}"` are two objects, so two references.
    public static func == (lhs: Ref, rhs: Ref) -> Bool { lhs.key.utf8.elementsEqual(rhs.key.utf8) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key.utf8.count)
        for byte in key.utf8 { hasher.combine(byte) }
    }

    public var description: String { "Ref<\(Target.self)>(\(key))" }

    /// The key, which is the reference's whole CBOR encoding (a text string).
    public var cborText: String { key }

    /// The reference whose encoding is `cborText`, the target's key.
    public init(cborText: String) { self.key = cborText }
}

extension Ref: BinaryIndexable {
    public var binaryIndexValue: IndexValue { IndexValue(key) }
    public static var indexFieldForm: IndexFieldForm? { .value }
}

extension Ref: IndexQueryValue, IndexedProperty {
    public typealias IndexedValue = Ref<Target>
}

/// What happens to the objects that refer to an object when it is deleted (by `delete`,
/// `deleteAll`, `dropBucket`, `buri delete` or `buri drop`), applied in the deletion's own commit.
///
/// ```swift
/// .reference("songs", \.songs, onDelete: .nullify)   // the song leaves every playlist
/// .reference("owner", \.owner, onDelete: .cascade)   // the owner's notes go with it
/// .reference("album", \.album, onDelete: .deny)      // an album in use cannot be deleted
/// ```
public enum DeleteRule: String, Codable, Sendable, Hashable {
    /// The reference is removed from every object holding it: taken out of an array of
    /// references (the others keep their order), or set to `nil` for an optional reference.
    case nullify
    /// Every object holding the reference is deleted too, applying its own rules in turn
    /// (transitively; cycles end, as each object is deleted once).
    case cascade
    /// The deletion fails with ``BuriError/referenced(bucket:key:holderBucket:holderKey:index:)``
    /// while any other object holds a reference to it; nothing is deleted.
    case deny
}

extension BuriIndex {
    /// A relationship: an index over an array of references (an ordered to-many relationship; one
    /// entry per distinct target), stored under `field` (default: the index name) so that tools
    /// and delete rules can find it without the Swift type. The targets are objects of `U`'s
    /// bucket (`U.buri.bucketName`), or of the bucket named `bucket` when `U` is stored under
    /// another name (names compared as bytes).
    ///
    /// ```swift
    /// .reference("songs", \.songs, onDelete: .nullify)
    /// .reference("archived", \.archived, in: "songs-2025", onDelete: .nullify)
    /// ```
    public static func reference<U: BuriSupport>(
        _ name: String, _ keyPath: KeyPath<T, [Ref<U>]> & Sendable, in bucket: String? = nil, field: String? = nil,
        onDelete: DeleteRule = .nullify, version: Int = 0
    ) -> BuriIndex {
        BuriIndex(
            name: name, components: [.binary], unique: false, multi: true, version: version,
            fields: [(field ?? name, .value)], keyPath: keyPath,
            reference: ({ bucket ?? U.buri.bucketName }, onDelete)
        ) { object in
            object[keyPath: keyPath].map { [$0.binaryIndexValue] }
        }
    }

    /// A relationship over an optional reference (to-one): no entry when `nil`; `.nullify` sets
    /// it to `nil`.
    ///
    /// ```swift
    /// .reference("album", \.album, onDelete: .deny)
    /// ```
    public static func reference<U: BuriSupport>(
        _ name: String, _ keyPath: KeyPath<T, Ref<U>?> & Sendable, in bucket: String? = nil, field: String? = nil,
        onDelete: DeleteRule = .nullify, version: Int = 0
    ) -> BuriIndex {
        BuriIndex(
            name: name, components: [.binary], unique: false, multi: false, version: version,
            fields: [(field ?? name, .value)], keyPath: keyPath,
            reference: ({ bucket ?? U.buri.bucketName }, onDelete)
        ) { object in
            object[keyPath: keyPath].map { [[$0.binaryIndexValue]] } ?? []
        }
    }

    /// A relationship over a reference that is always there (to-one). It cannot be nullified:
    /// declare `.cascade` or `.deny` (`.nullify` is refused when the bucket is opened), or make
    /// the property optional.
    ///
    /// ```swift
    /// .reference("owner", \.owner, onDelete: .cascade)
    /// ```
    public static func reference<U: BuriSupport>(
        _ name: String, _ keyPath: KeyPath<T, Ref<U>> & Sendable, in bucket: String? = nil, field: String? = nil,
        onDelete: DeleteRule, version: Int = 0
    ) -> BuriIndex {
        BuriIndex(
            name: name, components: [.binary], unique: false, multi: false, version: version,
            fields: [(field ?? name, .value)], keyPath: keyPath,
            reference: ({ bucket ?? U.buri.bucketName }, onDelete),
            declarationError: onDelete == .nullify
                ? "a reference that is not optional cannot be nullified: declare onDelete: .cascade or .deny, or make the property optional"
                : nil
        ) { object in
            [[object[keyPath: keyPath].binaryIndexValue]]
        }
    }
}

extension Bucket {
    /// The objects `refs` refer to, in the same order, `nil` where no object is stored under a
    /// reference's key; read from one snapshot, in one batched request on remote engines.
    ///
    /// ```swift
    /// let tracks = try songs.objects(for: playlist.songs)
    /// let missing = zip(playlist.songs, tracks).filter { $0.1 == nil }.map(\.0)
    /// ```
    /// - Throws: ``BuriError/decodingFailed(bucket:key:type:reason:)`` for an object that does
    ///   not decode, ``BuriError/corruption(bucket:key:index:reason:)`` for a damaged record.
    public func objects(for refs: [Ref<T>]) throws(BuriError) -> [T?] {
        // A closure, not `\.key`: a key path is applied through the runtime per element.
        try objects(forKeys: refs.map { $0.key })
    }

    /// The object `ref` refers to, or `nil`.
    ///
    /// ```swift
    /// let album = try playlist.album.flatMap { try albums.object(for: $0) }
    /// ```
    public func object(for ref: Ref<T>) throws(BuriError) -> T? {
        try object(forKey: ref.key)
    }

    /// The objects stored under `keys`, in the same order, `nil` where none is; from one
    /// snapshot, in one batched request on remote engines.
    ///
    /// ```swift
    /// let found = try people.objects(forKeys: ["p1", "p2"])
    /// ```
    public func objects(forKeys keys: [String]) throws(BuriError) -> [T?] {
        let (reader, view) = try raw.readView()
        let batched = try view.readerForKeys(keys, reader)
        // The objects found are initialized in a buffer of `T`, the keys with none are remembered
        // by position, and the `[T?]` is put together once at the end: a `T?` or an `[T]` append
        // in the per-key closure costs a metadata lookup per key in this unspecialized code.
        let found = UnsafeMutablePointer<T>.allocate(capacity: keys.count)
        var count = 0
        defer {
            found.deinitialize(count: count)
            found.deallocate()
        }
        var missing: [Int] = []
        for (position, key) in keys.enumerated() {
            var failure: BuriError?
            let before = count
            try view.run {
                try batched.withValue(forKey: view.recordKey(key)) { buffer in
                    guard let buffer else { return }
                    do throws(BuriError) {
                        (found + count).initialize(to: try decodeRecord(buffer, key: key))
                        count += 1
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw failure }
            if count == before { missing.append(position) }
        }
        var result: [T?] = []
        result.reserveCapacity(keys.count)
        var next = 0
        var gaps = missing.makeIterator()
        var gap = gaps.next()
        for position in keys.indices {
            if position == gap {
                result.append(nil)
                gap = gaps.next()
            } else {
                result.append(found[next])
                next += 1
            }
        }
        return result
    }
}

extension BuriSchema {
    /// Refuses a declaration that cannot be used (a non-optional reference declared `.nullify`).
    func checkDeclarations(bucket: String) throws(BuriError) {
        for index in indexes {
            if let reason = index.declarationError {
                throw .invalidIndexDefinition(bucket: bucket, index: index.name, reason: reason)
            }
        }
    }
}
