import BuriCodec
import BuriText

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What makes an index a full-text index, as recorded in its catalog entry (`docs/FORMAT.md` §5,
/// "Text indexes"): the tokenizer version that cut its terms and the stop words it skipped.
///
/// ```swift
/// let body = try db.bucketInfo(named: "Note")?.index(named: "body")
/// body?.text?.tokenizer   // 1
/// ```
public struct TextIndexDefinition: Codable, Sendable, Hashable {
    /// The `TextTokenizer` version (1). A version this build does not implement makes every use
    /// of the index (search, writes, check) fail with
    /// ``BuriError/invalidIndexDefinition(bucket:index:reason:)``, never a wrong answer.
    public var tokenizer: Int
    /// The stop words as declared (folded by the tokenizer when used); `nil` for none.
    public var stopWords: [String]?
    /// The layout of its entry values (`docs/FORMAT.md` §5b): 2, the document's length then the
    /// positions, with the index's token total kept (what ranking needs); `nil` (1) for an index
    /// made by format 6, positions only, which ranking refuses until the index is rebuilt (the
    /// application's `.text` declaration rebuilds it when it opens the bucket).
    public var layout: Int?

    public init(tokenizer: Int = 1, stopWords: [String]? = nil, layout: Int? = 2) {
        self.tokenizer = tokenizer
        self.stopWords = stopWords?.isEmpty == true ? nil : stopWords
        self.layout = layout == 1 ? nil : layout
    }

    /// The entry layout (1 when the catalog names none).
    var entryLayout: Int { layout ?? 1 }

    /// Whether entries carry document lengths and the index keeps its token total (layout 2).
    var keepsLengths: Bool { entryLayout >= 2 }

    /// Whether two definitions give the same entries: same tokenizer, same stop words (as bytes),
    /// same layout.
    func hasSameEntries(as other: TextIndexDefinition) -> Bool {
        tokenizer == other.tokenizer && entryLayout == other.entryLayout
            && (stopWords ?? []).map { Array($0.utf8) } == (other.stopWords ?? []).map { Array($0.utf8) }
    }
}

/// The entries of full-text indexes: terms as keys, positions as values (`docs/FORMAT.md` §9a).
enum TextEntries {
    /// Unused positions between two elements of an array of strings: element k+1's first position
    /// is element k's last token position + 1 + this gap (an element without tokens takes none).
    /// A phrase spans fewer positions than this (longer phrases are refused), so it never matches
    /// across two elements.
    static let elementGap: UInt64 = 1024

    /// The longest phrase, in terms, a search accepts (see ``elementGap``).
    static let maximumPhraseTerms = Int(elementGap)

    /// The entry layout new text indexes get.
    static let currentLayout = 2
    /// The entry layouts this build reads and writes.
    static let supportedLayouts = 1...2

    /// The distinct terms of `texts` (one text, or an array's elements in order) in byte order,
    /// each as its entry's tuple (the term as one binary element, `docs/FORMAT.md` §8) with its
    /// entry value in `layout`: the positions where it occurs (``encodePositions(_:)``), after
    /// the document's length (its indexed tokens) in layout 2.
    static func entries(
        of texts: [String], tokenizer: TextTokenizer, layout: Int
    ) -> [(tuple: [UInt8], value: [UInt8])] {
        var values = EntryValues()
        let tuples = appendEntries(of: texts, tokenizer: tokenizer, layout: layout, values: &values)
        return tuples.enumerated().map { position, tuple in
            (tuple, values.withValue(at: position) { Array($0) })
        }
    }

    /// The distinct terms of `texts` in byte order as their entries' tuples, each entry's value
    /// (as ``entries(of:tokenizer:layout:)`` gives it) appended to `values` in the same order: the
    /// write path's form, which makes one buffer of all values instead of an array for each.
    static func appendEntries(
        of texts: [String], tokenizer: TextTokenizer, layout: Int, values: inout EntryValues,
        interner: TextTupleInterner? = nil
    ) -> [[UInt8]] {
        // Every token's term goes into one buffer (no array per token); the tokens are then
        // sorted by term bytes and position, and each run of one term is one entry.
        var tokens: [Token] = []
        var bytes = 0
        for text in texts { bytes += text.utf8.count }
        // Folding rarely lengthens a term; a word and its separator take 6 bytes or more in most
        // text (a text of short words grows the array once or twice more).
        // (A ByteWriter: appending a term is a capacity check and a copy, where an array's
        // append(contentsOf:) costs about a hundred instructions.)
        var arena = ByteWriter(capacity: bytes + 16)
        tokens.reserveCapacity(bytes / 6 + 4)
        var base: UInt64 = 0
        for text in texts {
            var last: UInt64?
            tokenizer.forEachToken(in: text) { term, position in
                let absolute = base + UInt64(position)
                tokens.append(Token(start: arena.count, count: term.count, position: absolute))
                arena.append(UnsafeRawBufferPointer(term))
                last = absolute
            }
            if let last { base = last + 1 + elementGap }
        }
        guard !tokens.isEmpty else { return [] }
        return arena.withBytes { buffer -> [[UInt8]] in
            guard let origin = buffer.bindMemory(to: UInt8.self).baseAddress else { return [] }
            @inline(__always)
            func term(_ token: Token) -> UnsafeBufferPointer<UInt8> {
                UnsafeBufferPointer(start: origin + token.start, count: token.count)
            }
            tokens.sort { a, b in
                let order = memcmp(origin + a.start, origin + b.start, Swift.min(a.count, b.count))
                if order != 0 { return order < 0 }
                if a.count != b.count { return a.count < b.count }
                return a.position < b.position
            }
            let length = UInt64(tokens.count)
            var tuples: [[UInt8]] = []
            tuples.reserveCapacity(tokens.count)
            values.reserve(bytes: 4 * tokens.count + 8, entries: tokens.count)
            var first = 0
            while first < tokens.count {
                let head = tokens[first]
                var end = first + 1
                while end < tokens.count, tokens[end].count == head.count,
                    memcmp(origin + tokens[end].start, origin + head.start, head.count) == 0
                {
                    end += 1
                }
                values.append { value in
                    if layout >= 2 { Varint.append(length, to: &value) }
                    Varint.append(UInt64(end - first), to: &value)
                    var previous: UInt64 = 0
                    for index in first..<end {
                        let position = tokens[index].position
                        Varint.append(index == first ? position : position - previous, to: &value)
                        previous = position
                    }
                }
                // The tuple is encoded here, from the buffer: no array of the bare term (and
                // one array for every object of a batch that has the term, with an interner).
                if let interner {
                    tuples.append(interner.tuple(of: term(head)))
                } else {
                    var tuple: [UInt8] = []
                    tuple.reserveCapacity(head.count + 4)
                    ValueEncoding.appendBinary(term(head), to: &tuple)
                    tuples.append(tuple)
                }
                first = end
            }
            return tuples
        }
    }

    /// One token while an object's entries are made: its term's bytes in the buffer, and its position.
    private struct Token {
        var start: Int
        var count: Int
        var position: UInt64
    }

    /// The document length (layout 2) and the positions an entry value of `layout` holds; throws
    /// unless it is exactly what ``entries(of:tokenizer:layout:)`` writes (a length at least the
    /// number of positions).
    static func decode(
        _ value: UnsafeRawBufferPointer, layout: Int
    ) throws(FormatError) -> (length: UInt64?, positions: [UInt64]) {
        guard layout >= 2 else { return (nil, try decodePositions(value)) }
        var offset = 0
        let length = try Varint.read(value, at: &offset)
        let positions = try decodePositions(UnsafeRawBufferPointer(rebasing: value[offset...]))
        guard length >= UInt64(positions.count) else {
            throw FormatError(
                "text entry value gives a document length of \(length) under \(positions.count) positions")
        }
        return (length, positions)
    }

    /// A value as check reports it ("positions [0, 3] in a document of 5 tokens"), or `nil` when it
    /// does not read.
    static func describe(_ value: [UInt8], layout: Int) -> String? {
        let decoded = value.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> (length: UInt64?, positions: [UInt64]) in try decode(raw, layout: layout)
            }
        }
        guard case .success(let (length, positions)) = decoded else { return nil }
        return "positions \(positions)" + (length.map { " in a document of \($0) tokens" } ?? "")
    }

    /// The term's frequency (its number of positions) and the document's length, from the head
    /// of a layout-2 entry value, without reading the positions (ranking's hot path).
    static func frequencyAndLength(
        _ value: UnsafeRawBufferPointer
    ) throws(FormatError) -> (frequency: UInt64, length: UInt64) {
        var offset = 0
        let length = try Varint.read(value, at: &offset)
        let count = try Varint.read(value, at: &offset)
        guard count >= 1, count <= UInt64(value.count - offset), length >= count else {
            throw FormatError(
                "text entry value claims \(count) positions in a document of \(length) tokens, in \(value.count) bytes")
        }
        return (count, length)
    }

    /// An entry value: varint count n, then n varints: the first position, then each position
    /// minus the one before (positions strictly increase, so every delta is at least 1).
    static func encodePositions(_ positions: [UInt64]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(positions.count + 1)
        Varint.append(UInt64(positions.count), to: &out)
        var previous: UInt64 = 0
        for (offset, position) in positions.enumerated() {
            Varint.append(offset == 0 ? position : position - previous, to: &out)
            previous = position
        }
        return out
    }

    /// The positions an entry value holds; throws unless it is exactly what
    /// ``encodePositions(_:)`` writes (at least one position, every delta after the first ≥ 1, no
    /// trailing bytes).
    static func decodePositions(_ value: UnsafeRawBufferPointer) throws(FormatError) -> [UInt64] {
        var positions: [UInt64] = []
        try readPositions(value) { count in
            positions.reserveCapacity(count)
        } each: {
            positions.append($0)
        }
        return positions
    }

    /// Throws unless `value` is an entry value of `layout` exactly as ``decode(_:layout:)`` accepts
    /// it, without building its positions: what a walk that only needs an entry's key checks.
    static func validate(_ value: UnsafeRawBufferPointer, layout: Int) throws(FormatError) {
        guard layout >= 2 else {
            try readPositions(value) { _ in
            } each: { _ in
            }
            return
        }
        // The usual value, every varint one byte: length, n, then n positions, the deltas ≥ 1.
        if value.count >= 3, value[0] < 0x80, value[1] >= 1, value[1] < 0x80, Int(value[1]) == value.count - 2,
            value[0] >= value[1], value[2] < 0x80
        {
            var fits = true
            for offset in 3..<value.count where value[offset] == 0 || value[offset] >= 0x80 {
                fits = false
                break
            }
            if fits { return }
        }
        var offset = 0
        let length = try Varint.read(value, at: &offset)
        var count = 0
        try readPositions(UnsafeRawBufferPointer(rebasing: value[offset...])) {
            count = $0
        } each: { _ in
        }
        guard length >= UInt64(count) else {
            throw FormatError("text entry value gives a document length of \(length) under \(count) positions")
        }
    }

    /// Reads the positions of ``encodePositions(_:)``'s layout: `start` gets their count once it
    /// is known to fit, `each` every position in order; throws where ``decodePositions(_:)`` does.
    @inline(__always)
    private static func readPositions(
        _ value: UnsafeRawBufferPointer, start: (Int) -> Void, each: (UInt64) -> Void
    ) throws(FormatError) {
        var offset = 0
        let count = try Varint.read(value, at: &offset)
        guard count >= 1 else { throw FormatError("text entry value lists no position") }
        guard count <= UInt64(value.count - offset) else {
            throw FormatError("text entry value claims \(count) positions in \(value.count) bytes")
        }
        start(Int(count))
        var previous: UInt64 = 0
        for index in 0..<Int(count) {
            let delta = try Varint.read(value, at: &offset)
            if index == 0 {
                previous = delta
            } else {
                guard delta >= 1 else { throw FormatError("text entry value repeats a position") }
                let (sum, overflow) = previous.addingReportingOverflow(delta)
                guard !overflow else { throw FormatError("text entry value overflows") }
                previous = sum
            }
            each(previous)
        }
        guard offset == value.count else {
            throw FormatError("text entry value has \(value.count - offset) trailing bytes")
        }
    }
}

extension IndexDefinition {
    /// The tokenizer of a text index, or a typed error when its catalog names a version this build
    /// does not implement (or it is not a text index).
    func textTokenizer(bucket: String) throws(BuriError) -> TextTokenizer {
        guard let text else {
            throw .invalidQuery(bucket: bucket, index: name, reason: "index '\(name)' is not a text index")
        }
        _ = try textLayout(bucket: bucket)
        guard let version = UInt8(exactly: text.tokenizer),
            let tokenizer = TextTokenizer(version: version, stopWords: text.stopWords ?? [])
        else {
            throw .invalidIndexDefinition(
                bucket: bucket, index: name,
                reason:
                    "the text index was built by tokenizer version \(text.tokenizer), which this Buri does not implement (it implements \(TextTokenizer.supportedVersions)); open the database with a newer Buri"
            )
        }
        return tokenizer
    }

    /// The entry layout of a text index, or a typed error for one this build does not know.
    func textLayout(bucket: String) throws(BuriError) -> Int {
        let layout = text?.entryLayout ?? 1
        guard TextEntries.supportedLayouts.contains(layout) else {
            throw .invalidIndexDefinition(
                bucket: bucket, index: name,
                reason:
                    "the text index's entries use layout \(layout), which this Buri does not know (it knows \(TextEntries.supportedLayouts)); open the database with a newer Buri"
            )
        }
        return layout
    }

    /// The text a text index reads from `object`'s field: a text string, or the text strings of an
    /// array (nulls skipped), in order; none when the field is missing or null.
    func texts(of object: CBORValue) throws(BuriError) -> [String] {
        guard let path = componentPaths?.first else {
            throw .invalidIndexDefinition(bucket: "", index: name, reason: "the text index names no field")
        }
        guard let value = try Self.value(at: path, in: object, index: name) else { return [] }
        let field = Self.fieldPathText(path)
        switch value {
        case .null: return []
        case .text(let text): return [text]
        case .array(let elements):
            var texts: [String] = []
            for element in elements {
                switch element {
                case .null: continue
                case .text(let text): texts.append(text)
                default:
                    throw .invalidIndexValue(
                        bucket: nil, key: nil, index: name,
                        reason: "field '\(field)' of a text index holds an array with an element that is not text")
                }
            }
            return texts
        default:
            throw .invalidIndexValue(
                bucket: nil, key: nil, index: name,
                reason: "field '\(field)' of a text index holds neither text nor an array of text")
        }
    }

    /// The entries (term tuple, positions value) of a text index for `object`, computed from its
    /// recorded field without the Swift type, in term byte order.
    func textEntries(of object: CBORValue, bucket: String) throws(BuriError) -> [(tuple: [UInt8], value: [UInt8])] {
        let tokenizer = try textTokenizer(bucket: bucket)
        let layout = try textLayout(bucket: bucket)
        return TextEntries.entries(of: try texts(of: object), tokenizer: tokenizer, layout: layout)
    }

    /// The term tuples of ``textEntries(of:bucket:)``, their values appended to `values` in the
    /// same order (the write path's form: one buffer, no array per value).
    func appendTextEntries(
        of object: CBORValue, bucket: String, values: inout EntryValues, interner: TextTupleInterner? = nil
    ) throws(BuriError) -> [[UInt8]] {
        let tokenizer = try textTokenizer(bucket: bucket)
        let layout = try textLayout(bucket: bucket)
        return TextEntries.appendEntries(
            of: try texts(of: object), tokenizer: tokenizer, layout: layout, values: &values, interner: interner)
    }
}

/// The encoded tuples of text terms, one array per distinct term, shared among the objects of one
/// batch as it is prepared: each object's entries name the array instead of allocating their own,
/// which is most of what a large write of text allocates. Terms are compared as bytes. One batch,
/// one thread: not shared.
///
/// ```swift
/// let interner = TextTupleInterner()
/// let a = interner.tuple(of: term)   // the same array for every equal term
/// ```
final class TextTupleInterner {
    /// All the state in one value. An interner is used by one thread, one call at a time (it is
    /// not `Sendable`), so access to it is not checked at run time.
    @exclusivity(unchecked) private var table = Table()

    init() {}

    /// The encoded tuple (``ValueEncoding/appendBinary(_:to:)``) of `term`.
    func tuple(of term: UnsafeBufferPointer<UInt8>) -> [UInt8] { table.tuple(of: term) }

    private struct Table {
        /// Each term's first 16 bytes as two integers (zeros past its end) and its length: terms
        /// of at most 16 bytes are equal exactly when these are; longer ones compare the rest.
        var heads: [UInt64] = []
        var lengths: [Int] = []
        /// The bytes past the 16th of the longer terms, one after another, and where each starts.
        var rests: [UInt8] = []
        var restStarts: [Int] = []
        var tuples: [[UInt8]] = []
        /// Open addressing: a term's number, or -1; a power of two long, at most half full.
        var slots: [Int32] = []
        var hashes: [UInt64] = []
        var shift: UInt64 = 64

        mutating func tuple(of term: UnsafeBufferPointer<UInt8>) -> [UInt8] {
            let head = UnsafeRawBufferPointer(term).orderedHead
            var hash = (head.0 &* 0x9E37_79B9_7F4A_7C15) ^ (head.1 &* 0xC2B2_AE3D_27D4_EB4F) ^ UInt64(term.count)
            if term.count > 16 {
                for byte in term[16...] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            }
            hash ^= hash >> 31
            if slots.isEmpty { resize(to: 1 << 8) }
            var at = slot(of: hash)
            while true {
                let number = Int(slots[at])
                if number < 0 { break }
                if hashes[number] == hash, heads[2 * number] == head.0, heads[2 * number + 1] == head.1,
                    lengths[number] == term.count, term.count <= 16 || restMatches(number, term)
                {
                    return tuples[number]
                }
                at = (at + 1) & (slots.count - 1)
            }
            var tuple: [UInt8] = []
            tuple.reserveCapacity(term.count + 4)
            ValueEncoding.appendBinary(term, to: &tuple)
            slots[at] = Int32(tuples.count)
            tuples.append(tuple)
            hashes.append(hash)
            heads.append(head.0)
            heads.append(head.1)
            lengths.append(term.count)
            restStarts.append(rests.count)
            if term.count > 16 { rests.append(contentsOf: term[16...]) }
            if 2 * tuples.count > slots.count { resize(to: 2 * slots.count) }
            return tuple
        }

        @inline(__always)
        func slot(of hash: UInt64) -> Int { Int(truncatingIfNeeded: (hash &* 0x9E37_79B9_7F4A_7C15) >> shift) }

        func restMatches(_ number: Int, _ term: UnsafeBufferPointer<UInt8>) -> Bool {
            let start = restStarts[number]
            return rests.withUnsafeBytes { stored in
                guard let base = stored.baseAddress, let other = term.baseAddress else { return false }
                return memcmp(base + start, other + 16, term.count - 16) == 0
            }
        }

        mutating func resize(to count: Int) {
            slots = [Int32](repeating: -1, count: count)
            shift = UInt64(64 - count.trailingZeroBitCount)
            for number in hashes.indices {
                var at = slot(of: hashes[number])
                while slots[at] >= 0 { at = (at + 1) & (count - 1) }
                slots[at] = Int32(number)
            }
        }
    }
}
