import BuriCodec
import BuriText

/// What makes an index a full-text index, as recorded in its catalog entry (`docs/FORMAT.md` §5,
/// "Text indexes"): the tokenizer version that cut its terms and the stop words it skipped.
///
/// ```swift
/// let body = try db.bucketInfo(named: "Note")?.index(named: "body")
/// body?.text?.tokenizer   // 1
/// ```
public struct TextIndexDefinition: Codable, Sendable, Hashable {
    /// The ``TextTokenizer`` version (1). A version this build does not implement makes every use
    /// of the index (search, writes, check) fail with
    /// ``BuriError/invalidIndexDefinition(bucket:index:reason:)``, never a wrong answer.
    public var tokenizer: Int
    /// The stop words as declared (folded by the tokenizer when used); `nil` for none.
    public var stopWords: [String]?

    public init(tokenizer: Int = 1, stopWords: [String]? = nil) {
        self.tokenizer = tokenizer
        self.stopWords = stopWords?.isEmpty == true ? nil : stopWords
    }

    /// Whether two definitions give the same entries: same tokenizer, same stop words (as bytes).
    func hasSameEntries(as other: TextIndexDefinition) -> Bool {
        tokenizer == other.tokenizer
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

    /// The distinct terms of `texts` (one text, or an array's elements in order) in byte order,
    /// each with its entry value: the positions where it occurs (``encodePositions(_:)``).
    static func entries(of texts: [String], tokenizer: TextTokenizer) -> [(term: [UInt8], value: [UInt8])] {
        var positions: [[UInt8]: [UInt64]] = [:]
        var base: UInt64 = 0
        for text in texts {
            var last: UInt64?
            tokenizer.forEachToken(in: text) { term, position in
                let absolute = base + UInt64(position)
                positions[Array(term), default: []].append(absolute)
                last = absolute
            }
            if let last { base = last + 1 + elementGap }
        }
        return positions.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { term in
            (term, encodePositions(positions[term] ?? []))
        }
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
        var offset = 0
        let count = try Varint.read(value, at: &offset)
        guard count >= 1 else { throw FormatError("text entry value lists no position") }
        guard count <= UInt64(value.count - offset) else {
            throw FormatError("text entry value claims \(count) positions in \(value.count) bytes")
        }
        var positions: [UInt64] = []
        positions.reserveCapacity(Int(count))
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
            positions.append(previous)
        }
        guard offset == value.count else {
            throw FormatError("text entry value has \(value.count - offset) trailing bytes")
        }
        return positions
    }
}

extension IndexDefinition {
    /// The tokenizer of a text index, or a typed error when its catalog names a version this build
    /// does not implement (or it is not a text index).
    func textTokenizer(bucket: String) throws(BuriError) -> TextTokenizer {
        guard let text else {
            throw .invalidQuery(bucket: bucket, index: name, reason: "index '\(name)' is not a text index")
        }
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
        return TextEntries.entries(of: try texts(of: object), tokenizer: tokenizer).map {
            (IndexValue(bytes: $0.term).encoded, $0.value)
        }
    }
}
