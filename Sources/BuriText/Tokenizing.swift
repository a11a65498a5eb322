// The scanner behind TextTokenizer.forEachToken: one pass over the text's UTF-8, folding into one
// reused buffer; ASCII words are folded byte by byte in a tight loop, everything else goes through
// the fold table, and the rare kept marks of a combining class above 0 are inserted in canonical
// order. Nothing is allocated per character or per token.

extension TextTokenizer {
    /// Calls `body` with each term and its position; stop words are skipped (their positions are
    /// still used) unless `keepingStopWords`, which the query parser uses to keep phrases exact.
    func scan(
        _ text: String, keepingStopWords: Bool,
        _ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void
    ) rethrows {
        var text = text
        let table = FoldTable.shared
        let stopWords = keepingStopWords || stopWordList.isEmpty ? nil : stopWordList
        try text.withUTF8 { utf8 in
            try table.ascii.withUnsafeBufferPointer { ascii in
                try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: TokenScanner.capacity) { term in
                    guard let term = term.baseAddress else { return }
                    var scanner = TokenScanner(
                        bytes: utf8, table: table, ascii: ascii, term: term, stopWords: stopWords)
                    try scanner.run(body)
                }
            }
        }
    }
}

struct TokenScanner {
    typealias Body = (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void

    /// The most bytes of one CJK unit (a scalar and its kept marks), so that a bigram fits a term.
    static let unitBytes = TextTokenizer.maximumTermBytes / 2
    /// The bytes of `term`: a CJK run's units are written one after the other and its bigrams
    /// emitted where they stand, until the last two units move back to the start.
    static let capacity = 512

    let bytes: UnsafeBufferPointer<UInt8>
    /// The BMP's folds (filled as blocks are met) and ASCII's.
    let table: FoldTable
    let ascii: UnsafeBufferPointer<UInt8>
    /// The term being built: a word's folded UTF-8 from the start, or the open CJK run's units
    /// (its last two, from `previousStart`, are the bigram emitted once the second can no longer
    /// change).
    let term: UnsafeMutablePointer<UInt8>
    let stopWords: StopWordList?

    /// The end of the term's bytes; above 0 while a word or a CJK run is open.
    var length = 0
    /// Bytes `term` may reach with a starter (a scalar of combining class 0): 120 for a word, the
    /// end of the pending unit's 60 for a CJK run (set when its first mark comes); -1 once anything
    /// was cut away, so that the term stays a prefix of the folded word.
    var limit = TextTokenizer.maximumTermBytes
    /// Once `limit` is -1: the lowest combining class cut away from the word (or unit), 0 if a
    /// starter was. A later mark of a lower class sorts before what was cut, so it still enters.
    var cutClass: UInt8 = 0
    var position: UInt32 = 0
    /// The open CJK run's last unit: its first scalar (not 0 exactly while a run is open), which a
    /// Hangul jamo may still extend, and where its bytes start in `term`; where the unit before it
    /// starts (`unitStart` while the run has one unit).
    var pending: UInt32 = 0
    var unitStart = 0
    var previousStart = 0
    var astral = AstralFolds()

    init(
        bytes: UnsafeBufferPointer<UInt8>, table: FoldTable, ascii: UnsafeBufferPointer<UInt8>,
        term: UnsafeMutablePointer<UInt8>, stopWords: StopWordList?
    ) {
        self.bytes = bytes
        self.table = table
        self.ascii = ascii
        self.term = term
        self.stopWords = stopWords
    }

    mutating func run(_ body: Body) rethrows {
        guard let start = bytes.baseAddress, let ascii = ascii.baseAddress else { return }
        let count = bytes.count
        var index = 0
        while index < count {
            let byte = start[index]
            if byte < 0x80 {
                var folded = ascii[Int(byte)]
                if folded == 0 {
                    try endToken(body)
                    index += 1
                    continue
                }
                if pending != 0 { try endRun(body) }
                // The ASCII word loop: one table load and one store per byte.
                var length = self.length
                let limit = self.limit
                if limit < 0 { cutClass = 0 }  // these letters are cut: no mark enters after them
                while true {
                    if length < limit {
                        term[length] = folded
                        length += 1
                    }
                    index += 1
                    if index == count { break }
                    let next = start[index]
                    if next >= 0x80 { break }
                    folded = ascii[Int(next)]
                    if folded == 0 { break }
                }
                self.length = length
                continue
            }
            // A scalar of 2 to 4 bytes; the String's UTF-8 is valid, the bound check is for safety.
            let width = byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4
            guard index + width <= count else { break }
            var value = UInt32(byte) & (0x7F >> width)
            for offset in 1..<width { value = value << 6 | UInt32(start[index + offset] & 0x3F) }
            index += width
            try take(value, body)
        }
        try endToken(body)
    }

    /// One non-ASCII scalar: a BMP letter that folds to one scalar and a CJK unit inline, the
    /// rest in `takeOther`.
    @inline(__always)
    private mutating func take(_ value: UInt32, _ body: Body) rethrows {
        guard value < 0x10000 else { return try takeOther(value, astral.entry(value), body) }
        let entry = table.entry(value)
        switch entry.kindBits {
        case ScalarKind.separator.rawValue:
            try endToken(body)
        case ScalarKind.ignored.rawValue:
            return
        case ScalarKind.word.rawValue where entry.isSingleStarter:
            if pending != 0 { try endRun(body) }
            append(entry.value)
        case ScalarKind.cjk.rawValue where entry.isSingleStarter:
            if pending == 0 && length > 0 { try endWord(body) }
            try addUnit(entry.value, body)
        default:
            try takeOther(value, entry, body)
        }
    }

    /// A scalar that `take` does not handle inline: above the BMP, a kept mark, or a fold of
    /// several scalars or with marks to put in order.
    @inline(never)
    private mutating func takeOther(_ value: UInt32, _ entry: FoldEntry, _ body: Body) rethrows {
        switch entry.kindBits {
        case ScalarKind.separator.rawValue:
            try endToken(body)
        case ScalarKind.ignored.rawValue:
            return
        case ScalarKind.word.rawValue:
            if pending != 0 { try endRun(body) }
            appendFold(entry, of: value, from: 0)
        case ScalarKind.mark.rawValue:
            // Part of the word or CJK unit before it; with neither, it starts a word.
            openPendingUnit()
            appendFold(entry, of: value, from: 0)
        default:
            if pending == 0 && length > 0 { try endWord(body) }
            if entry.count == 0 {
                try addUnit(entry.value, body)
            } else {
                // A unit and the kept marks of its decomposition (が → か U+3099).
                try addUnit(folded(Int(entry.value), of: value), body)
                openPendingUnit()
                appendFold(entry, of: value, from: 1)
            }
        }
    }

    /// Sets the limit of the pending CJK unit when its first mark comes (`addUnit` leaves it).
    private mutating func openPendingUnit() {
        if pending != 0 && length - unitStart == Self.width(pending) { limit = unitStart + Self.unitBytes }
    }

    /// Scalar `index` of the several that `source`'s entry folds to.
    @inline(__always)
    private func folded(_ index: Int, of source: UInt32) -> UInt32 {
        source >= 0x10000 ? astral.extra[index] : table.extra(of: source, at: index)
    }

    /// Appends the scalars of a fold from its `first` on.
    @inline(__always)
    private mutating func appendFold(_ entry: FoldEntry, of source: UInt32, from first: Int) {
        if entry.count == 0 {
            if entry.reorders { add(entry.value) } else { append(entry.value) }
            return
        }
        let start = Int(entry.value)
        for index in start + first..<start + entry.count {
            let value = folded(index, of: source)
            if entry.reorders { add(value) } else { append(value) }
        }
    }

    /// Appends a scalar of any combining class.
    @inline(never)
    private mutating func add(_ value: UInt32) {
        let combiningClass = classOf(value)
        if combiningClass == 0 { append(value) } else { insert(value, combiningClass) }
    }

    @inline(__always)
    private func classOf(_ value: UInt32) -> UInt8 {
        value < 0x10000 ? table.keptMarkClass(value) : FoldTable.combiningClass(value)
    }

    /// Appends a starter's UTF-8 to the term, unless it would pass the limit (which then closes).
    @inline(__always)
    private mutating func append(_ value: UInt32) {
        let width = Self.width(value)
        guard length + width <= limit else {
            limit = -1
            cutClass = 0
            return
        }
        write(value, width: width, at: length)
        length += width
    }

    /// Puts a mark of combining class `combiningClass` (above 0) in canonical order: after the
    /// marks before it of a class up to its own (canonical ordering is a stable sort by class,
    /// within a run of non-starters). What no longer fits after it is cut away.
    @inline(never)
    private mutating func insert(_ value: UInt32, _ combiningClass: UInt8) {
        guard limit >= 0 || combiningClass < cutClass else { return }  // it sorts after what was cut
        let width = Self.width(value)
        let cap = pending != 0 ? unitStart + Self.unitBytes : TextTokenizer.maximumTermBytes
        var at = length
        while at > 0 {
            var start = at - 1
            while start > 0 && term[start] & 0xC0 == 0x80 { start -= 1 }
            if classOf(scalar(at: start)) <= combiningClass { break }
            at = start
        }
        guard at + width <= cap else {
            length = at
            cutClass = limit < 0 ? min(cutClass, combiningClass) : combiningClass
            limit = -1
            return
        }
        var end = at
        while end < length {
            let next = Self.width(leadByte: term[end])
            if end + next + width > cap {
                let cut = classOf(scalar(at: end))
                cutClass = limit < 0 ? min(cutClass, cut) : cut
                limit = -1
                break
            }
            end += next
        }
        var index = end
        while index > at {
            index -= 1
            term[index + width] = term[index]
        }
        write(value, width: width, at: at)
        length = end + width
    }

    /// The scalar whose UTF-8 starts at `offset` in the term.
    private func scalar(at offset: Int) -> UInt32 {
        let lead = term[offset]
        let width = Self.width(leadByte: lead)
        if width == 1 { return UInt32(lead) }
        var value = UInt32(lead) & (0x7F >> width)
        for index in offset + 1..<offset + width { value = value << 6 | UInt32(term[index] & 0x3F) }
        return value
    }

    @inline(__always)
    private func write(_ value: UInt32, width: Int, at offset: Int) {
        let out = term + offset
        switch width {
        case 1:
            out[0] = UInt8(value)
        case 2:
            out[0] = UInt8(0xC0 | value >> 6)
            out[1] = UInt8(0x80 | value & 0x3F)
        case 3:
            out[0] = UInt8(0xE0 | value >> 12)
            out[1] = UInt8(0x80 | (value >> 6) & 0x3F)
            out[2] = UInt8(0x80 | value & 0x3F)
        default:
            out[0] = UInt8(0xF0 | value >> 18)
            out[1] = UInt8(0x80 | (value >> 12) & 0x3F)
            out[2] = UInt8(0x80 | (value >> 6) & 0x3F)
            out[3] = UInt8(0x80 | value & 0x3F)
        }
    }

    @inline(__always)
    private mutating func endToken(_ body: Body) rethrows {
        if length > 0 {
            if pending != 0 { try endRun(body) } else { try endWord(body) }
        }
    }

    private mutating func endWord(_ body: Body) rethrows {
        try emit(from: 0, to: length, body)
        length = 0
        limit = TextTokenizer.maximumTermBytes
    }

    /// A CJK unit: the previous pair is emitted once the unit before this one can no longer change.
    @inline(__always)
    private mutating func addUnit(_ unit: UInt32, _ body: Body) rethrows {
        if pending != 0 {
            // A jamo completes the pending syllable unless a kept mark follows it (which blocks
            // the composition in NFC as well).
            if let composed = CJK.composeHangul(pending, unit), length - unitStart == 3 {
                pending = composed
                write(composed, width: 3, at: unitStart)
                return
            }
            if previousStart < unitStart { try emit(from: previousStart, to: length, body) }
            previousStart = unitStart
            // Room for a whole unit (up to 60 bytes) after this one.
            if length > Self.capacity - Self.unitBytes { moveUnitsToStart() }
        }
        unitStart = length
        pending = unit
        let width = Self.width(unit)
        write(unit, width: width, at: length)
        length += width
    }

    /// Moves the run's last two units back to the start of the term, before it fills up.
    @inline(never)
    private mutating func moveUnitsToStart() {
        let count = length - previousStart
        for index in 0..<count { term[index] = term[previousStart + index] }
        previousStart = 0
        length = count
    }

    /// Closes a CJK run: its last bigram, or its only unit when it has one.
    private mutating func endRun(_ body: Body) rethrows {
        try emit(from: previousStart, to: length, body)
        length = 0
        limit = TextTokenizer.maximumTermBytes
        pending = 0
        unitStart = 0
        previousStart = 0
    }

    @inline(__always)
    private static func width(_ value: UInt32) -> Int {
        value < 0x80 ? 1 : value < 0x800 ? 2 : value < 0x10000 ? 3 : 4
    }

    @inline(__always)
    private static func width(leadByte: UInt8) -> Int {
        leadByte < 0x80 ? 1 : leadByte < 0xE0 ? 2 : leadByte < 0xF0 ? 3 : 4
    }

    @inline(__always)
    private mutating func emit(from start: Int, to end: Int, _ body: Body) rethrows {
        let token = UnsafeBufferPointer(start: term + start, count: end - start)
        if stopWords?.contains(token) != true { try body(token, position) }
        position &+= 1
    }
}
