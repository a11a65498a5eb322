#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Edits of encoded CBOR that leave every other byte as it is, without decoding the item into a
/// tree: what a delete rule does to each object holding a reference (Buri's `nullify`).
public enum CBORSplice {
    /// `item` (a map) with the text strings whose UTF-8 bytes are in `removed` taken out of the
    /// array at `path` (a path of map keys, compared as bytes), or, when a text string stands
    /// there alone, replaced by null. Returns `nil` when nothing changes (no such path, no such
    /// string). Every other byte of `item` is kept as it was.
    ///
    /// ```swift
    /// let payload = try CBOREncoder().encode(["songs": ["a", "b", "a"]])
    /// let edited = try CBORSplice.removingTexts(["a"].map { Array($0.utf8) }, at: ["songs"], in: payload)
    /// // {"songs": ["b"]}
    /// ```
    /// - Throws: ``CBORError`` when `item` is not well-formed CBOR where it is read.
    public static func removingTexts(
        _ removed: Set<[UInt8]>, at path: [String], in item: [UInt8]
    ) throws -> [UInt8]? {
        var out: [UInt8] = []
        let changed = try item.withUnsafeBytes { raw in
            try removingTexts(removed, at: path, in: raw, appendingTo: &out)
        }
        return changed ? out : nil
    }

    /// Appends `item` to `out` with the text strings in `removed` taken out of the array at `path`
    /// (see ``removingTexts(_:at:in:)-(_,_,[UInt8])``); returns whether anything changed. When
    /// nothing does, `out` is left as it was, so the caller can copy `item` itself.
    ///
    /// ```swift
    /// var record = header
    /// if try !CBORSplice.removingTexts(["a"].map { Array($0.utf8) }, at: ["songs"], in: payload, appendingTo: &record) {
    ///     record.append(contentsOf: payload)
    /// }
    /// ```
    public static func removingTexts(
        _ removed: Set<[UInt8]>, at path: [String], in item: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]
    ) throws -> Bool {
        guard !path.isEmpty, let base = item.baseAddress, !item.isEmpty else { return false }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        let input = _CBORInput(base: bytes, count: item.count)
        guard let (start, end, replacement) = try edit(input, path: path, removed: removed) else {
            return false
        }
        out.reserveCapacity(out.count + item.count)
        out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: start))
        out.append(contentsOf: replacement)
        out.append(contentsOf: UnsafeBufferPointer(start: bytes + end, count: item.count - end))
        return true
    }

    /// The byte range of the value to replace, and its replacement.
    private static func edit(
        _ input: _CBORInput, path: [String], removed: Set<[UInt8]>
    ) throws -> (Int, Int, [UInt8])? {
        guard case .found(let start) = try input.value(at: path.lazy.map { Array($0.utf8) }) else { return nil }
        return try editValue(input, at: start, removed: removed)
    }

    /// The value at `start` with the strings taken out (an array) or nulled (a lone string).
    private static func editValue(
        _ input: _CBORInput, at start: Int, removed: Set<[UInt8]>
    ) throws -> (Int, Int, [UInt8])? {
        var pos = start
        let (initial, argument) = try input.readHead(&pos)
        switch initial >> 5 {
        case _Major.text:
            let end = try input.skip(start)
            return isRemoved(input, pos..<end, Array(removed)) ? (start, end, [0xF6]) : nil
        case _Major.array:
            // The kept elements' byte ranges, copied once at the end (nothing is allocated per
            // element): runs of kept elements are one range, so only a removal starts a new one.
            let candidates = Array(removed)
            var kept: [Range<Int>] = []
            var runStart = pos
            var count: UInt64 = 0
            var changed = false
            for _ in 0..<argument {
                let elementStart = pos
                let initial = elementStart < input.count ? input.base[elementStart] : 0xFF
                let end: Int
                var removedHere = false
                // A text string's end is its head plus its length; anything else is skipped whole.
                // Keys are short: a text of under 256 bytes (head 0x60–0x78) is read here.
                if initial >> 5 == _Major.text,
                    initial & 0x1F < 24 || (initial & 0x1F == 24 && elementStart + 1 < input.count)
                {
                    let short = initial & 0x1F < 24
                    let textStart = elementStart + (short ? 1 : 2)
                    let length = UInt64(short ? initial & 0x1F : input.base[elementStart + 1])
                    end = textStart + (try input.checkedLength(length, at: textStart, headStart: elementStart))
                    removedHere = isRemoved(input, textStart..<end, candidates)
                } else {
                    var inner = elementStart
                    let (elementInitial, length) = try input.readHead(&inner)
                    if elementInitial >> 5 == _Major.text {
                        end = inner + (try input.checkedLength(length, at: inner, headStart: elementStart))
                        removedHere = isRemoved(input, inner..<end, candidates)
                    } else {
                        end = try input.skip(elementStart)
                    }
                }
                if removedHere {
                    if runStart < elementStart { kept.append(runStart..<elementStart) }
                    runStart = end
                    changed = true
                } else {
                    count += 1
                }
                pos = end
            }
            guard changed else { return nil }
            if runStart < pos { kept.append(runStart..<pos) }
            var out = arrayHead(count)
            for range in kept {
                out.append(contentsOf: UnsafeBufferPointer(start: input.base + range.lowerBound, count: range.count))
            }
            return (start, pos, out)
        default:
            return nil
        }
    }

    /// Whether the bytes at `range` are one of `removed` (compared without copying them).
    @inline(__always)
    private static func isRemoved(_ input: _CBORInput, _ range: Range<Int>, _ removed: [[UInt8]]) -> Bool {
        let start = input.base + range.lowerBound
        for text in removed where text.count == range.count {
            // Keys often share long prefixes ("song-0001…"): the last byte rules most out at once.
            guard let last = text.last else { return true }  // both empty
            guard start[range.count - 1] == last else { continue }
            let same = text.withUnsafeBytes { own in
                own.baseAddress.map { memcmp($0, start, range.count) == 0 } ?? false
            }
            if same { return true }
        }
        return false
    }

    /// The shortest head of an array of `count` items.
    static func arrayHead(_ count: UInt64) -> [UInt8] {
        let major: UInt8 = _Major.array << 5
        switch count {
        case 0..<24: return [major | UInt8(count)]
        case 24...0xFF: return [major | 24, UInt8(count)]
        case 0x100...0xFFFF: return [major | 25, UInt8(count >> 8), UInt8(count & 0xFF)]
        case 0x1_0000...0xFFFF_FFFF:
            return [major | 26] + (0..<4).reversed().map { UInt8((count >> (8 * UInt64($0))) & 0xFF) }
        default:
            return [major | 27] + (0..<8).reversed().map { UInt8((count >> (8 * UInt64($0))) & 0xFF) }
        }
    }
}
