import BuriText

/// The byte layout of continuation tokens and the query fingerprint they carry
/// (`docs/FORMAT.md` §11, "Continuation tokens"). Tokens are not stored in the database, but they
/// travel between processes and programs, so their layout is specified and versioned like the rest.
///
/// ```
/// b1                 token layout version
/// u32be              bucket lineage id (the id the bucket was made with: see `BucketDescriptor.lineageId`)
/// u32be              id of the index the query is ordered by (0: the bucket's records)
/// u64be              fingerprint of the query's conditions and direction
/// varint             results returned so far by the walk (earlier pages included)
/// …                  position: the storage key of the last result returned (non-empty)
/// ```
///
/// A query with several sort keys issues layout `b2`: the same, with `varint L, L bytes` (the last
/// result's sort bytes for the keys after the first) between the count and the position.
enum ContinuationFormat {
    static let version: UInt8 = 0xB1
    /// The layout of tokens that carry sort bytes.
    static let sortedVersion: UInt8 = 0xB2
    /// Version, bucket id, index id and fingerprint: the fixed-width part in front of the count.
    static let fixedLength = 1 + 4 + 4 + 8

    static func encode(_ token: ContinuationToken) -> [UInt8] {
        var out: [UInt8] = [token.secondary == nil ? version : sortedVersion]
        out.reserveCapacity(fixedLength + 2 + token.position.count + (token.secondary?.count ?? 0))
        Keyspace.appendBigEndian(token.bucket, to: &out)
        Keyspace.appendBigEndian(token.order, to: &out)
        Keyspace.appendBigEndian(UInt32(truncatingIfNeeded: token.fingerprint >> 32), to: &out)
        Keyspace.appendBigEndian(UInt32(truncatingIfNeeded: token.fingerprint), to: &out)
        Varint.append(token.returned, to: &out)
        if let secondary = token.secondary {
            Varint.append(UInt64(secondary.count), to: &out)
            out.append(contentsOf: secondary)
        }
        out.append(contentsOf: token.position)
        return out
    }

    /// A token's position (a record key `02 || u32be(b) || key` or an index entry key
    /// `03 || u32be(b) || …`) moved to bucket generation `id`: the same key under the bucket's
    /// current id, which a `deleteAll` since the token was issued has changed. `nil` if the
    /// position is neither kind of key.
    static func position(_ position: [UInt8], inGeneration id: UInt32) -> [UInt8]? {
        guard position.count > 5, position[0] == Keyspace.recordTag || position[0] == Keyspace.indexTag else {
            return nil
        }
        var moved: [UInt8] = [position[0]]
        moved.reserveCapacity(position.count)
        Keyspace.appendBigEndian(id, to: &moved)
        moved.append(contentsOf: position[5...])
        return moved
    }

    static func decode(_ bytes: [UInt8]) throws(FormatError) -> ContinuationToken {
        guard let first = bytes.first else { throw FormatError("the token is empty") }
        guard first == version || first == sortedVersion else {
            throw FormatError(
                "token layout version 0x\(String(first, radix: 16)) is not one this Buri reads (0x\(String(version, radix: 16)) or 0x\(String(sortedVersion, radix: 16)))"
            )
        }
        guard bytes.count > fixedLength else {
            throw FormatError("the token is \(bytes.count) bytes, too short to be one")
        }
        func word(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
        }
        let count = bytes.withUnsafeBytes { raw -> (value: UInt64, end: Int)? in
            var offset = fixedLength
            guard let value = try? Varint.read(raw, at: &offset) else { return nil }
            return (value, offset)
        }
        guard let (returned, start) = count else {
            throw FormatError("the token's result count is not a valid varint")
        }
        var offset = start
        var secondary: [UInt8]? = nil
        if first == sortedVersion {
            let length = bytes.withUnsafeBytes { raw -> UInt64? in try? Varint.read(raw, at: &offset) }
            guard let length, length <= UInt64(bytes.count - offset) else {
                throw FormatError("the token's sort bytes are cut short")
            }
            secondary = Array(bytes[offset..<offset + Int(length)])
            offset += Int(length)
        }
        guard offset < bytes.count else { throw FormatError("the token holds no position") }
        return ContinuationToken(
            bucket: word(1), order: word(5), fingerprint: UInt64(word(9)) << 32 | UInt64(word(13)),
            returned: returned, position: Array(bytes[offset...]), secondary: secondary)
    }

    /// The canonical bytes of what a query's results depend on, in order: its direction and its
    /// conditions (index names as UTF-8 bytes, values in their index encodings). Limit, offset and
    /// continuation are not part of it.
    ///
    /// ```
    /// u8 direction (00 ascending, 01 descending), varint number of conditions, then per condition:
    ///   varint L, L bytes of the index name; varint k, k × enc(value) (leading values);
    ///   rest: 00 (none) | 01 bound bound (range: lower, upper) | 02 varint L, L bytes (prefix)
    ///         | 03 varint k, k × enc(value) (any of: the distinct values in bytewise order)
    ///   bound: 00 (unbounded) | 01 enc(value) (inclusive) | 02 enc(value) (exclusive)
    /// ```
    static func signature(of query: Query) -> [UInt8] {
        var out: [UInt8] = [query.isDescending ? 1 : 0]
        Varint.append(UInt64(query.conditions.count), to: &out)
        func bound(_ bound: IndexBound) {
            switch bound {
            case .unbounded: out.append(0)
            case .inclusive(let value): out.append(1); out.append(contentsOf: value.encoded)
            case .exclusive(let value): out.append(2); out.append(contentsOf: value.encoded)
            }
        }
        for condition in query.conditions {
            Varint.append(UInt64(condition.index.utf8.count), to: &out)
            out.append(contentsOf: condition.index.utf8)
            Varint.append(UInt64(condition.leading.count), to: &out)
            for value in condition.leading { out.append(contentsOf: value.encoded) }
            switch condition.rest {
            case .none:
                out.append(0)
            case let .range(lower, upper):
                out.append(1)
                bound(lower)
                bound(upper)
            case .prefix(let bytes):
                out.append(2)
                Varint.append(UInt64(bytes.count), to: &out)
                out.append(contentsOf: bytes)
            case .anyOf(let values):
                // As the set it is: sorted and without repeats, so the order written does not matter.
                let distinct = Set(values.map(\.encoded)).sorted { $0.lexicographicallyPrecedes($1) }
                out.append(3)
                Varint.append(UInt64(distinct.count), to: &out)
                for value in distinct { out.append(contentsOf: value) }
            }
        }
        // Queries with predicates or sort keys: a tail that older queries do not have, so their
        // fingerprints (and tokens) stay what they were.
        if !query.predicates.isEmpty || !query.sortKeys.isEmpty {
            out.append(0xF0)
            Varint.append(UInt64(query.predicates.count), to: &out)
            for predicate in query.predicates { appendSignature(of: predicate, to: &out) }
            Varint.append(UInt64(query.sortKeys.count), to: &out)
            for key in query.sortKeys {
                Varint.append(UInt64(key.index.utf8.count), to: &out)
                out.append(contentsOf: key.index.utf8)
                out.append(key.descending ? 1 : 0)
            }
        }
        return out
    }

    /// ```
    /// predicate: 10 condition | 11 varint n, n × predicate (all) | 12 varint n, n × predicate (any)
    ///          | 13 predicate (not) | 14 (a filter: its code is not part of the fingerprint)
    ///          | 15 varint n, n bytes (index name), then 00 varint m, m bytes (query text)
    ///                                               or 01 text query (parsed)
    /// ```
    static func appendSignature(of predicate: Query.Predicate, to out: inout [UInt8]) {
        switch predicate {
        case .condition(let condition):
            out.append(0x10)
            var single = Query(conditions: [condition])
            single.isDescending = false
            out.append(contentsOf: signature(of: single).dropFirst(2))
        case .all(let parts), .any(let parts):
            if case .all = predicate { out.append(0x11) } else { out.append(0x12) }
            Varint.append(UInt64(parts.count), to: &out)
            for part in parts { appendSignature(of: part, to: &out) }
        case .not(let inner):
            out.append(0x13)
            appendSignature(of: inner, to: &out)
        case .filter:
            out.append(0x14)
        case .text(let match):
            // The index, then the query as written (0) or as parsed (1): a page resumes only the
            // same question.
            out.append(0x15)
            Varint.append(UInt64(match.index.utf8.count), to: &out)
            out.append(contentsOf: match.index.utf8)
            if let text = match.text {
                out.append(0)
                Varint.append(UInt64(text.utf8.count), to: &out)
                out.append(contentsOf: text.utf8)
            } else {
                out.append(1)
                appendSignature(of: match.parsed ?? .or([]), to: &out)
            }
        }
    }

    /// ```
    /// text query: 20 varint n, n bytes (term) | 21 … (prefix) | 22 b (last is a prefix), varint n,
    ///             n × (varint m, m bytes) (phrase) | 23 varint n, n × text query (and) | 24 … (or)
    ///           | 25 text query (not)
    /// ```
    static func appendSignature(of query: TextQuery, to out: inout [UInt8]) {
        func bytes(_ value: [UInt8]) {
            Varint.append(UInt64(value.count), to: &out)
            out.append(contentsOf: value)
        }
        switch query {
        case .term(let term):
            out.append(0x20)
            bytes(term)
        case .prefix(let start):
            out.append(0x21)
            bytes(start)
        case .phrase(let terms, let lastIsPrefix):
            out.append(0x22)
            out.append(lastIsPrefix ? 1 : 0)
            Varint.append(UInt64(terms.count), to: &out)
            for term in terms { bytes(term) }
        case .and(let operands), .or(let operands):
            if case .and = query { out.append(0x23) } else { out.append(0x24) }
            Varint.append(UInt64(operands.count), to: &out)
            for operand in operands { appendSignature(of: operand, to: &out) }
        case .not(let inner):
            out.append(0x25)
            appendSignature(of: inner, to: &out)
        }
    }

    /// FNV-1a (64-bit) of the query's ``signature(of:)``: the same in every process and program,
    /// unlike Swift's per-process seeded `Hasher`.
    static func fingerprint(of query: Query) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in signature(of: query) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }
}
