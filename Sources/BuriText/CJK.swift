// Scripts written without spaces between words: Han ideographs, Hiragana, Katakana and Hangul.
// Tokenizer v1 cuts their runs into overlapping bigrams (see TextTokenizer); this file says which
// scalars belong to such runs and composes Hangul jamo, so that a run reads the same in NFC and NFD.
enum CJK {
    /// Whether `value` is a unit of a CJK run (before folding; its fold is one unit as well).
    static func isUnit(_ value: UInt32) -> Bool {
        isHan(value) || isKana(value) || isHangul(value)
    }

    /// Ideographs that decompose to nothing: the fold table answers them without asking the
    /// standard library. Not the compatibility ideographs (U+F900…, U+2F800…), which decompose.
    static func isUnifiedIdeograph(_ value: UInt32) -> Bool {
        switch value {
        case 0x3400...0x4DBF, 0x4E00...0x9FFF, 0x2_0000...0x2_F7FF, 0x2_FA20...0x3_FFFF: true
        default: false
        }
    }

    static func isHan(_ value: UInt32) -> Bool {
        switch value {
        case 0x3005...0x3007,  // 々 〆 〇
            0x3021...0x3029, 0x3038...0x303B,  // Hangzhou numerals, 〻
            0xF900...0xFAFF, 0x2_F800...0x2_FA1F:  // compatibility ideographs
            true
        default: isUnifiedIdeograph(value)
        }
    }

    /// Kana, but not the voicing marks U+3099…U+309C: the combining ones belong to the kana
    /// before them (kept marks), the spacing ones are symbols.
    static func isKana(_ value: UInt32) -> Bool {
        switch value {
        case 0x3041...0x3098, 0x309D...0x30FF,  // Hiragana, Katakana (with ー and the iteration marks)
            0x31F0...0x31FF,  // small Katakana for Ainu
            0xFF66...0xFF9F,  // halfwidth Katakana
            0x1_AFF0...0x1_B16F:  // Kana Extended-B, Kana Supplement, Kana Extended-A, small kana
            true
        default: false
        }
    }

    static func isHangul(_ value: UInt32) -> Bool {
        switch value {
        case 0xAC00...0xD7A3,  // syllables
            0x1100...0x11FF, 0xA960...0xA97F, 0xD7B0...0xD7FF,  // jamo and their extensions
            0x3131...0x318E,  // compatibility jamo
            0xFFA0...0xFFDC:  // halfwidth jamo
            true
        default: false
        }
    }

    /// The syllable that `first` followed by `next` compose to, as NFC composes them (a leading
    /// consonant and a vowel; a syllable without a final consonant and a final consonant), or nil.
    @inline(__always)
    static func composeHangul(_ first: UInt32, _ next: UInt32) -> UInt32? {
        if first &- 0x1100 < 19 && next &- 0x1161 < 21 {
            return 0xAC00 + ((first - 0x1100) * 21 + (next - 0x1161)) * 28
        }
        if first &- 0xAC00 < 11172 && (first - 0xAC00) % 28 == 0 && next &- 0x11A8 < 27 {
            return first + (next - 0x11A7)
        }
        return nil
    }
}
