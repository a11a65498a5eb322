// The per-scalar half of tokenizer v1: what each Unicode scalar is (a separator, a dropped
// diacritic, a word character, a CJK unit or a kept mark) and what it folds to. See
// TextTokenizer's documentation for the rules.
//
// Canonical decomposition and full case folding come from the standard library's own Unicode data
// (its `_nfd` and `_caseFolded`, SPI that swift-foundation uses as well): Swift 6.3 has no public
// normalization API, and these keep BuriText free of Foundation and of tables of its own.
@_spi(_Unicode) import Swift
import Synchronization

/// What a scalar is to the tokenizer, in the top three bits of a fold entry.
enum ScalarKind: UInt32 {
    /// Ends a word or a CJK run; emits nothing.
    case separator = 0
    /// A diacritic (see `FoldTable.isDroppedMark`), or a scalar that folds to nothing: dropped,
    /// so it neither ends nor starts anything.
    case ignored = 1
    /// Part of a word (letters, numbers and private use outside the CJK ranges).
    case word = 2
    /// One unit of a CJK run, which emits overlapping bigrams.
    case cjk = 3
    /// A kept mark (vowel sign, virama, voicing mark, …): part of the word or of the CJK unit
    /// before it; with neither before it, it starts a word.
    case mark = 4
}

/// One scalar's fold, packed in a UInt32 so that the table stays small and a lookup is one load:
/// bits 29–31 the kind; bit 28 set when the fold holds a non-starter (a kept mark of a canonical
/// combining class above 0, which the scanner puts in canonical order); bits 21–27 the number of
/// scalars it folds to when that is not one (they are then at `extra[bits 0–20]`); otherwise bits
/// 0–20 hold the one scalar it folds to.
struct FoldEntry {
    var raw: UInt32

    static let separator = FoldEntry(raw: 0)
    static let ignored = FoldEntry(raw: ScalarKind.ignored.rawValue << 29)

    init(raw: UInt32) { self.raw = raw }

    init(kind: ScalarKind, scalar: UInt32, reorders: Bool) {
        raw = kind.rawValue << 29 | (reorders ? 1 << 28 : 0) | scalar
    }

    init(kind: ScalarKind, extraIndex: Int, count: Int, reorders: Bool) {
        raw = kind.rawValue << 29 | (reorders ? 1 << 28 : 0) | UInt32(count) << 21 | UInt32(extraIndex)
    }

    var kindBits: UInt32 { raw >> 29 }
    /// Whether the entry folds to one scalar of combining class 0 (bits 21–28 clear).
    var isSingleStarter: Bool { raw & 0x1FE0_0000 == 0 }
    /// Whether a scalar of the fold has a combining class above 0 and must be put in its place.
    var reorders: Bool { raw & 1 << 28 != 0 }
    /// 0 when the entry holds one scalar in `value`; else how many scalars start at extra[value].
    var count: Int { Int((raw >> 21) & 0x7F) }
    var value: UInt32 { raw & 0x1F_FFFF }
}

/// The folds of the scalars of the Basic Multilingual Plane, computed a block of 256 at a time the
/// first time a process meets a scalar of the block; scalars above it are folded on demand (see
/// `AstralFolds`).
final class FoldTable: @unchecked Sendable {
    // Unchecked: a block's entries are published by release stores after its classes and extra
    // scalars are written (under `filling`), and read by acquire loads before them; nothing is
    // ever freed (`shared` lives as long as the process).
    static let shared = FoldTable()

    /// An entry not filled yet: kind bits 7, which no entry has.
    static let unfilled = UInt32.max
    /// Scalars per block: a block's entries are computed together, the first time a scalar of it
    /// is looked up, so that a process pays only for the blocks its text uses (the whole BMP takes
    /// about 100 M instructions, most of them for blocks of scripts a text never has).
    static let blockBits: UInt32 = 8

    /// Per BMP scalar: its entry, or ``unfilled`` until its block is filled.
    private let entries: UnsafeMutablePointer<Atomic<UInt32>>
    /// Per BMP scalar: its canonical combining class if it is a kept mark, else 0 (valid once its
    /// block is filled).
    private let classes: UnsafeMutablePointer<UInt8>
    /// Per block: the scalars of its entries that fold to several (ß → s s, が → か U+3099), which
    /// those entries index; nil for a block without any.
    private let extras: UnsafeMutablePointer<UnsafeMutablePointer<UInt32>?>
    /// ASCII: 0 for a separator, else the folded byte (A–Z lowered).
    let ascii: [UInt8]
    private let filling = Mutex(())

    /// An empty table: the tokenizer uses ``shared``; tests make their own to see blocks filled.
    init() {
        entries = .allocate(capacity: 0x10000)
        for value in 0..<0x10000 { (entries + value).initialize(to: Atomic(Self.unfilled)) }
        classes = .allocate(capacity: 0x10000)
        classes.initialize(repeating: 0, count: 0x10000)
        let blocks = 0x10000 >> Int(Self.blockBits)
        extras = .allocate(capacity: blocks)
        extras.initialize(repeating: nil, count: blocks)
        ascii = (0..<128).map { byte in
            switch UInt8(byte) {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt8(byte) + 32
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte)
            default: 0
            }
        }
    }

    deinit {
        entries.deinitialize(count: 0x10000)
        entries.deallocate()
        classes.deallocate()
        for block in 0..<(0x10000 >> Int(Self.blockBits)) { extras[block]?.deallocate() }
        extras.deallocate()
    }

    /// The entry of BMP scalar `value` (below 0x10000).
    @inline(__always)
    func entry(_ value: UInt32) -> FoldEntry {
        let raw = entries[Int(value)].load(ordering: .acquiring)
        if raw != Self.unfilled { return FoldEntry(raw: raw) }
        fill(block: value >> Self.blockBits)
        return FoldEntry(raw: entries[Int(value)].load(ordering: .acquiring))
    }

    /// Scalar `index` of the several that BMP scalar `value`'s entry folds to.
    @inline(__always)
    func extra(of value: UInt32, at index: Int) -> UInt32 {
        // The entry naming `index` was read (acquiring) before, so the block's extras are there.
        extras[Int(value >> Self.blockBits)].map { $0[index] } ?? 0
    }

    /// The canonical combining class of BMP scalar `value` if it is a kept mark, else 0.
    @inline(__always)
    func keptMarkClass(_ value: UInt32) -> UInt8 {
        _ = entry(value)  // fills its block if need be
        return classes[Int(value)]
    }

    /// Computes and publishes the entries of one block, once.
    @inline(never)
    private func fill(block: UInt32) {
        filling.withLock { _ in
            let first = Int(block << Self.blockBits)
            let count = 1 << Int(Self.blockBits)
            guard entries[first].load(ordering: .relaxed) == Self.unfilled else { return }
            var extra: [UInt32] = []
            var raws = [UInt32](repeating: 0, count: count)
            for offset in 0..<count {
                let value = UInt32(first + offset)
                let entry = Self.entry(value, extra: &extra)
                raws[offset] = entry.raw
                if entry.kindBits == ScalarKind.mark.rawValue { classes[first + offset] = Self.combiningClass(value) }
            }
            if !extra.isEmpty {
                let stored = UnsafeMutablePointer<UInt32>.allocate(capacity: extra.count)
                stored.initialize(from: extra, count: extra.count)
                extras[Int(block)] = stored
            }
            // Published last: a reader that sees an entry sees its classes and extra scalars.
            for offset in 0..<count { entries[first + offset].store(raws[offset], ordering: .releasing) }
        }
    }

    /// The entry of `value`, appending the scalars of a multi-scalar fold to `extra`.
    static func entry(_ value: UInt32, extra: inout [UInt32]) -> FoldEntry {
        let (kind, folded) = fold(value)
        switch kind {
        case .separator: return .separator
        case .ignored: return .ignored
        case .word, .cjk, .mark:
            let reorders = folded.contains { combiningClass($0) != 0 }
            if folded.count == 1 { return FoldEntry(kind: kind, scalar: folded[0], reorders: reorders) }
            let entry = FoldEntry(kind: kind, extraIndex: extra.count, count: folded.count, reorders: reorders)
            extra.append(contentsOf: folded)
            return entry
        }
    }

    /// The rules of v1 for one scalar: its kind and the scalars it folds to. Kept marks come out
    /// in the order of the scalar's canonical decomposition, which is canonical order.
    static func fold(_ value: UInt32) -> (ScalarKind, [UInt32]) {
        guard let scalar = Unicode.Scalar(value) else { return (.separator, []) }
        let category = category(scalar)
        switch category {
        case .separator: return (.separator, [])
        case .mark: if isDroppedMark(scalar) { return (.ignored, []) }
        case .token:
            // Fast answers for the large ranges that fold to themselves (no decomposition, no
            // case): they are most of the table and would otherwise dominate its build time.
            // Hangul syllables stay composed on purpose: jamo are composed into them instead.
            if CJK.isHangul(value) || CJK.isUnifiedIdeograph(value) { return (.cjk, [value]) }
            if (0xE000...0xF8FF).contains(value) || value >= 0xF_0000 { return (.word, [value]) }
        }
        var folded: [UInt32] = []
        for base in String(scalar)._nfd {
            switch Self.category(base) {
            case .separator: continue
            case .mark where isDroppedMark(base): continue  // before case folding: U+0345 would fold to ι
            case .mark, .token: break
            }
            guard base.properties.changesWhenCaseFolded else {
                keep(base, in: &folded)
                continue
            }
            for lower in base.properties._caseFolded.unicodeScalars {
                for part in String(lower)._nfd { keep(part, in: &folded) }
            }
        }
        if folded.isEmpty { return (.ignored, []) }
        if category == .mark { return (.mark, folded) }
        guard CJK.isUnit(value) else { return (.word, folded) }
        // A CJK unit folds to exactly one unit (compatibility ideographs to unified ones), followed
        // by the kept marks of its decomposition (が → か U+3099); keep it whole if the data ever
        // said otherwise.
        let marks = folded.dropFirst().allSatisfy { Unicode.Scalar($0).map { Self.category($0) == .mark } ?? false }
        guard CJK.isUnit(folded[0]) && marks else { return (.cjk, [value]) }
        return (.cjk, folded)
    }

    /// Appends a scalar of a decomposition (or of a case folding) unless it is dropped.
    private static func keep(_ part: Unicode.Scalar, in folded: inout [UInt32]) {
        switch category(part) {
        case .token: folded.append(strokeFolds[part.value] ?? part.value)
        case .mark: if !isDroppedMark(part) { folded.append(part.value) }
        case .separator: break
        }
    }

    /// The marks that v1 drops, its diacritics (asked of marks only): the Combining Diacritical
    /// Marks blocks, Hebrew points and cantillation, Arabic harakat and Quranic annotation, and
    /// the marks that are default-ignorable (variation selectors, the combining grapheme joiner,
    /// Mongolian free variation selectors, Khmer inherent vowels). Every other mark is kept.
    static func isDroppedMark(_ mark: Unicode.Scalar) -> Bool {
        switch mark.value {
        case 0x0300...0x036F, 0x1AB0...0x1AFF, 0x1DC0...0x1DFF, 0x20D0...0x20FF, 0xFE20...0xFE2F: true
        case 0x0591...0x05C7: true  // Hebrew
        case 0x0610...0x061A, 0x064B...0x065F, 0x0670, 0x06D6...0x06ED: true  // Arabic
        default: mark.properties.isDefaultIgnorableCodePoint
        }
    }

    /// The canonical combining class of a scalar (the scanner reads the BMP's from `classes`).
    static func combiningClass(_ value: UInt32) -> UInt8 {
        guard let scalar = Unicode.Scalar(value) else { return 0 }
        return UInt8(truncatingIfNeeded: scalar.properties.canonicalCombiningClass.rawValue)
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
/// letters, …) and marks (Brahmi vowel signs, variation selectors, …) are folded once per call
/// and remembered.
struct AstralFolds {
    private var entries: [UInt32: UInt32] = [:]
    private(set) var extra: [UInt32] = []

    mutating func entry(_ value: UInt32) -> FoldEntry {
        guard let scalar = Unicode.Scalar(value) else { return .separator }
        switch FoldTable.category(scalar) {
        case .separator: return .separator
        case .mark: break
        case .token:
            if CJK.isUnifiedIdeograph(value) { return FoldEntry(kind: .cjk, scalar: value, reorders: false) }
            if value >= 0xF_0000 { return FoldEntry(kind: .word, scalar: value, reorders: false) }  // private use
        }
        if let raw = entries[value] { return FoldEntry(raw: raw) }
        let entry = FoldTable.entry(value, extra: &extra)
        entries[value] = entry.raw
        return entry
    }
}
