// The per-scalar half of tokenizer v1: what each Unicode scalar is (a separator, a mark, a word
// character or a CJK unit) and what it folds to. See TextTokenizer's documentation for the rules.
//
// Canonical decomposition and full case folding come from the standard library's own Unicode data
// (its `_nfd` and `_caseFolded`, SPI that swift-foundation uses as well): Swift 6.3 has no public
// normalization API, and these keep BuriText free of Foundation and of tables of its own.
@_spi(_Unicode) import Swift

/// What a scalar is to the tokenizer, in the top two bits of a fold entry.
enum ScalarKind: UInt32 {
    /// Ends a word or a CJK run; emits nothing.
    case separator = 0
    /// A mark (M*): a token character that folds to nothing, so it neither ends nor starts anything.
    case mark = 1
    /// Part of a word (letters, numbers and private use outside the CJK ranges).
    case word = 2
    /// One unit of a CJK run, which emits overlapping bigrams.
    case cjk = 3
}

/// One scalar's fold, packed in a UInt32 so that the table stays small and a lookup is one load:
/// bits 30–31 the kind; bits 21–27 the number of scalars it folds to when that is not one (they
/// are then at `extra[bits 0–20]`); otherwise bits 0–20 hold the one scalar it folds to.
struct FoldEntry {
    var raw: UInt32

    static let separator = FoldEntry(raw: 0)
    static let mark = FoldEntry(raw: ScalarKind.mark.rawValue << 30)

    init(raw: UInt32) { self.raw = raw }

    init(kind: ScalarKind, scalar: UInt32) { raw = kind.rawValue << 30 | scalar }

    init(kind: ScalarKind, extraIndex: Int, count: Int) {
        raw = kind.rawValue << 30 | UInt32(count) << 21 | UInt32(extraIndex)
    }

    var kindBits: UInt32 { raw >> 30 }
    /// 0 when the entry holds one scalar in `value`; else how many scalars start at extra[value].
    var count: Int { Int((raw >> 21) & 0x7F) }
    var value: UInt32 { raw & 0x1F_FFFF }
}

/// The folds of every scalar of the Basic Multilingual Plane, built once per process on first use
/// (a few milliseconds); scalars above it are folded on demand (see `AstralFolds`).
final class FoldTable: Sendable {
    static let shared = FoldTable()

    /// Index: the scalar's value; 0x10000 entries.
    let bmp: [UInt32]
    /// The scalars of the entries that fold to several (ß → s s) or, rarely, to none.
    let extra: [UInt32]
    /// ASCII: 0 for a separator, else the folded byte (A–Z lowered).
    let ascii: [UInt8]

    private init() {
        var bmp = [UInt32](repeating: 0, count: 0x10000)
        var extra: [UInt32] = []
        for value in 0..<UInt32(0x10000) {
            bmp[Int(value)] = Self.entry(value, extra: &extra).raw
        }
        self.bmp = bmp
        self.extra = extra
        ascii = (0..<128).map { byte in
            switch UInt8(byte) {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt8(byte) + 32
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte)
            default: 0
            }
        }
    }

    /// The entry of `value`, appending the scalars of a multi-scalar fold to `extra`.
    static func entry(_ value: UInt32, extra: inout [UInt32]) -> FoldEntry {
        let (kind, folded) = fold(value)
        switch kind {
        case .separator: return .separator
        case .mark: return .mark
        case .word, .cjk:
            if folded.count == 1 { return FoldEntry(kind: kind, scalar: folded[0]) }
            let entry = FoldEntry(kind: kind, extraIndex: extra.count, count: folded.count)
            extra.append(contentsOf: folded)
            return entry
        }
    }

    /// The rules of v1 for one scalar: its kind and the scalars it folds to.
    static func fold(_ value: UInt32) -> (ScalarKind, [UInt32]) {
        guard let scalar = Unicode.Scalar(value) else { return (.separator, []) }
        switch category(scalar) {
        case .separator: return (.separator, [])
        case .mark: return (.mark, [])
        case .token: break
        }
        let cjk = CJK.isUnit(value)
        // Fast answers for the large ranges that fold to themselves (no decomposition, no case):
        // they are most of the table and would otherwise dominate its build time. Hangul syllables
        // stay composed on purpose: jamo are composed into them instead (see CJK).
        if CJK.isHangul(value) || CJK.isUnifiedIdeograph(value) { return (.cjk, [value]) }
        if (0xE000...0xF8FF).contains(value) || value >= 0xF_0000 { return (.word, [value]) }
        var folded: [UInt32] = []
        for base in String(scalar)._nfd where category(base) == .token {
            guard base.properties.changesWhenCaseFolded else {
                folded.append(strokeFolds[base.value] ?? base.value)
                continue
            }
            for lower in base.properties._caseFolded.unicodeScalars {
                for part in String(lower)._nfd where category(part) == .token {
                    folded.append(strokeFolds[part.value] ?? part.value)
                }
            }
        }
        if folded.isEmpty { return (.mark, []) }
        // A CJK unit folds to exactly one unit (compatibility ideographs to unified ones, kana
        // with a voicing mark to the plain kana); keep it whole if the data ever said otherwise.
        if cjk && (folded.count != 1 || !CJK.isUnit(folded[0])) { return (.cjk, [value]) }
        return (cjk ? .cjk : .word, folded)
    }

    /// Letters with a stroke or bar, or without a dot, that have no canonical decomposition but
    /// that readers take for the plain letter (applied after case folding, so to lowercase only).
    static let strokeFolds: [UInt32: UInt32] = [
        0x00F8: 0x6F,  // ø → o
        0x0142: 0x6C,  // ł → l
        0x0111: 0x64,  // đ → d
        0x0127: 0x68,  // ħ → h
        0x0131: 0x69,  // ı (dotless i) → i
        0x0167: 0x74,  // ŧ → t
    ]

    enum Category { case separator, mark, token }

    /// Marks (M*); letters (L*), numbers (N*) and private use (Co); everything else.
    static func category(_ scalar: Unicode.Scalar) -> Category {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark:
            .mark
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
            .decimalNumber, .letterNumber, .otherNumber, .privateUse:
            .token
        default: .separator
        }
    }
}

/// Folds of scalars above the BMP, looked up per call: separators (emoji) and ideographs are
/// answered from their category or range; other token characters (Deseret, Adlam, mathematical
/// letters, …) are folded once per call and remembered.
struct AstralFolds {
    private var entries: [UInt32: UInt32] = [:]
    private(set) var extra: [UInt32] = []

    mutating func entry(_ value: UInt32) -> FoldEntry {
        guard let scalar = Unicode.Scalar(value) else { return .separator }
        switch FoldTable.category(scalar) {
        case .separator: return .separator
        case .mark: return .mark
        case .token: break
        }
        if CJK.isUnifiedIdeograph(value) { return FoldEntry(kind: .cjk, scalar: value) }
        if value >= 0xF_0000 { return FoldEntry(kind: .word, scalar: value) }  // planes 15–16: private use
        if let raw = entries[value] { return FoldEntry(raw: raw) }
        let entry = FoldTable.entry(value, extra: &extra)
        entries[value] = entry.raw
        return entry
    }
}
