/// The text strings stored at one field of an encoded map, found without decoding the map into a
/// tree: the references a relationship's index entries are derived from (`docs/FORMAT.md` §10,
/// "Derived entries").
public enum CBORFieldTexts {
    /// The outcome of ``texts(at:in:)``.
    public enum Found: Equatable, Sendable {
        /// The byte ranges (in the item) of the UTF-8 bytes of each text string at the path, in
        /// order, repeats kept: one for a lone text string, one per text element of an array
        /// (null and undefined elements are skipped), none when the path is missing or holds null
        /// or undefined.
        case texts([Range<Int>])
        /// The path leads through, or to, something else: a number, a byte string, a tag, an
        /// array holding anything but text strings and nulls, a non-map on the way. Entries
        /// cannot be derived from such a field.
        case other
    }

    /// The text strings at `path` (map keys matched as UTF-8 bytes against text keys, the first
    /// equal key taken) in `item`, which must be a map.
    ///
    /// ```swift
    /// let payload = try CBOREncoder().encode(["songs": ["a", "b"]])
    /// let found = try payload.withUnsafeBytes { try CBORFieldTexts.texts(at: [Array("songs".utf8)], in: $0) }
    /// // .texts([9..<10, 11..<12])
    /// ```
    /// - Throws: ``CBORError`` when `item` is not well-formed CBOR where it is read.
    public static func texts(at path: [[UInt8]], in item: UnsafeRawBufferPointer) throws -> Found {
        guard !path.isEmpty, let base = item.baseAddress, !item.isEmpty else { return .other }
        let input = _CBORInput(base: base.assumingMemoryBound(to: UInt8.self), count: item.count)
        var pos: Int
        switch try input.value(at: path) {
        case .found(let start): pos = start
        case .absent: return .texts([])
        case .blocked: return .other
        }
        let start = pos
        let (initial, argument) = try input.readHead(&pos)
        switch initial >> 5 {
        case _Major.text:
            let length = try input.checkedLength(argument, at: pos, headStart: start)
            return .texts([pos..<(pos + length)])
        case _Major.array:
            var found: [Range<Int>] = []
            found.reserveCapacity(
                try input.checkedCount(argument, perItem: 1, at: pos, headStart: start))
            for _ in 0..<argument {
                let elementStart = pos
                let (elementInitial, length) = try input.readHead(&pos)
                if elementInitial >> 5 == _Major.text {
                    let count = try input.checkedLength(length, at: pos, headStart: elementStart)
                    found.append(pos..<(pos + count))
                    pos += count
                } else if elementInitial == _Simple.null || elementInitial == _Simple.undefined {
                    continue
                } else {
                    return .other
                }
            }
            return .texts(found)
        default:
            return initial == _Simple.null || initial == _Simple.undefined ? .texts([]) : .other
        }
    }
}

/// Where a path of map keys leads in an encoded item.
enum _CBORPathValue {
    /// The value at the path starts at this offset.
    case found(Int)
    /// A key is missing, or a null or undefined stands on the way (below the top).
    case absent
    /// Something other than a map stands where a map is needed (the top-level item included).
    case blocked
}

extension _CBORInput {
    /// Walks `path` (map keys matched as bytes against text keys, the first equal key taken) from
    /// the map at offset 0, reading only the keys and skipping the other values: the one walk that
    /// the nullify splice and derived entries share.
    func value(at path: some Sequence<[UInt8]>) throws -> _CBORPathValue {
        var pos = 0
        for field in path {
            let mapStart = pos
            let (initial, argument) = try readHead(&pos)
            if initial == _Simple.null || initial == _Simple.undefined, mapStart > 0 { return .absent }
            guard initial >> 5 == _Major.map else { return .blocked }
            var valueStart: Int?
            for _ in 0..<argument {
                let keyStart = pos
                let (keyInitial, keyLength) = try readHead(&pos)
                if keyInitial >> 5 == _Major.text, keyLength == UInt64(field.count), pos + field.count <= count,
                    field.indices.allSatisfy({ self[pos + $0] == field[$0] })
                {
                    valueStart = pos + field.count
                    break
                }
                pos = try skip(try skip(keyStart))
            }
            guard let valueStart else { return .absent }
            pos = valueStart
        }
        return .found(pos)
    }
}
