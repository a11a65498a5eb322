import BuriText

/// The keyed tokens a private index stores in an encrypted database instead of its values
/// (`docs/FORMAT.md` §4a): each binary element of a tuple becomes the 16-byte token of the
/// index's name and the element's encoding, stored as a binary element. Equal values give equal
/// tokens, so exact matches, `IN` lists, unique indexes and text terms work as before; tokens have
/// no order, so ranges, prefixes, sorting and aggregates on such an index are refused with
/// ``BuriError/privateIndex(bucket:index:operation:)``.
///
/// Attached to each private index definition of a bucket view (``BucketDescriptor/attaching(_:)``).
final class IndexTokens: Sendable {
    let cipher: any DatabaseCipher

    init(cipher: any DatabaseCipher) { self.cipher = cipher }

    /// Where a definition holds its tokens: never stored, and equal to every other, so that
    /// definitions compare (and hash) as their catalog entries do.
    struct Slot: Sendable, Hashable {
        var tokens: IndexTokens?
        static func == (lhs: Slot, rhs: Slot) -> Bool { true }
        func hash(into hasher: inout Hasher) {}
    }

    /// Whether `index` is private in an encrypted database: any index not declared plaintext but
    /// a relationship's (whose values are object keys, stored readable anyway).
    static func isPrivate(_ index: IndexDefinition) -> Bool { index.plaintext != true && index.references == nil }

    /// The token stored for `value` in the index named `index`.
    func token(_ value: IndexValue, index: String) -> IndexValue {
        // u32 name length, the name, the value's encoding.
        let count = index.utf8.count
        var input: [UInt8] = []
        input.reserveCapacity(4 + count + value.encoded.count)
        input.append(UInt8(truncatingIfNeeded: count >> 24))
        input.append(UInt8(truncatingIfNeeded: count >> 16))
        input.append(UInt8(truncatingIfNeeded: count >> 8))
        input.append(UInt8(truncatingIfNeeded: count))
        input.append(contentsOf: index.utf8)
        input.append(contentsOf: value.encoded)
        return IndexValue(bytes: input.withUnsafeBytes { cipher.token($0) })
    }
}

extension IndexDefinition {
    /// Whether its values are stored as keyed tokens (a private index of an encrypted database).
    var isPrivate: Bool { tokens != nil }

    /// The tuple as the index stores it: `tuple` itself, or its elements' tokens.
    func stored(_ tuple: [IndexValue]) -> [IndexValue] {
        guard let tokens else { return tuple }
        return tuple.map { tokens.token($0, index: name) }
    }

    /// The encoded tuple as the index stores it (see ``stored(_:)``).
    func stored(encoded tuple: [UInt8]) -> [UInt8] {
        guard tokens != nil else { return tuple }
        return IndexTuple.join(stored(IndexTuple.split(tuple)))
    }

    /// Refuses a text query this index cannot answer: one deeper than ``TextQuery/maximumDepth``
    /// (measured without recursion, before anything walks it), or a prefix on a private index
    /// (``requireExactTerms(_:bucket:)``).
    func requireAnswerable(_ query: TextQuery, bucket: String) throws(BuriError) {
        let depth = query.depth
        if depth > TextQuery.maximumDepth {
            throw .invalidQuery(
                bucket: bucket, index: name,
                reason:
                    "the text query nests \(depth) levels, more than the \(TextQuery.maximumDepth) a search takes: give .and and .or all their operands in one list rather than nesting one in another"
            )
        }
        try requireExactTerms(query, bucket: bucket)
    }

    /// Refuses a text query with a prefix (`graph*`) on a private text index: its terms are tokens,
    /// and no token tells what its term starts with.
    func requireExactTerms(_ query: TextQuery, bucket: String) throws(BuriError) {
        guard isPrivate, query.hasPrefix else { return }
        throw .privateIndex(bucket: bucket, index: name, operation: BuriError.textPrefixOperation)
    }

    /// Refuses `operation` on a private index, whose tokens have no order.
    func requireOrder(bucket: String, for operation: @autoclosure () -> String) throws(BuriError) {
        if isPrivate { throw .privateIndex(bucket: bucket, index: name, operation: operation()) }
    }
}

extension TextQuery {
    /// Whether a word prefix (`graph*`, or a phrase ending in one) appears anywhere in the query.
    var hasPrefix: Bool {
        switch self {
        case .term: false
        case .prefix: true
        case .phrase(_, let lastIsPrefix): lastIsPrefix
        case .and(let operands), .or(let operands): operands.contains { $0.hasPrefix }
        case .not(let operand): operand.hasPrefix
        }
    }
}

extension BucketDescriptor {
    /// The descriptor with `tokens` attached to each private index (none when `tokens` is `nil`,
    /// or while the bucket still holds the plaintext values of a database being encrypted).
    func attaching(_ tokens: IndexTokens?) -> BucketDescriptor {
        guard let tokens, plaintextValues != true else { return self }
        var copy = self
        for position in copy.indexes.indices where IndexTokens.isPrivate(copy.indexes[position]) {
            copy.indexes[position].tokenSlot.tokens = tokens
        }
        return copy
    }
}

extension BuriDatabase {
    /// Whether this database stores `index`'s values as keyed tokens: it is encrypted, and the
    /// index is neither declared plaintext nor a relationship's (`docs/FORMAT.md` §4a).
    ///
    /// ```swift
    /// let info = try db.bucketInfo(named: "Note")
    /// for index in info?.indexes ?? [] { print(index.name, db.storesTokens(for: index) ? "private" : "plaintext") }
    /// ```
    public func storesTokens(for index: IndexDefinition) -> Bool { isEncrypted && IndexTokens.isPrivate(index) }

    /// Refuses `definitions` if this database is encrypted and one of them has a numeric
    /// component without being declared plaintext (numbers are stored in their order, which would
    /// reveal them). Every catalog write checks this; tools check it before they write anything.
    ///
    /// ```swift
    /// try db.requirePlaintextDeclarations(descriptor.indexes, bucket: descriptor.name)
    /// ```
    /// - Throws: ``BuriError/indexNotDeclaredPlaintext(bucket:index:)`` naming the first such index.
    public func requirePlaintextDeclarations(_ definitions: [IndexDefinition], bucket: String) throws(BuriError) {
        guard isEncrypted,
            let index = definitions.first(where: { IndexTokens.isPrivate($0) && $0.components.contains(.numeric) })
        else { return }
        throw .indexNotDeclaredPlaintext(bucket: bucket, index: index.name)
    }
}
