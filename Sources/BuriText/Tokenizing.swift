// The scanner behind TextTokenizer.forEachToken: one pass over the text's UTF-8, folding into one
// reused buffer; ASCII words are folded byte by byte in a tight loop, everything else goes through
// the fold table. Nothing is allocated per character or per token.

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
            try table.bmp.withUnsafeBufferPointer { bmp in
                try table.extra.withUnsafeBufferPointer { extra in
                    try table.ascii.withUnsafeBufferPointer { ascii in
                        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.maximumTermBytes + 8) {
                            term in
                            guard let term = term.baseAddress else { return }
                            var scanner = TokenScanner(
                                bytes: utf8, bmp: bmp, extra: extra, ascii: ascii, term: term, stopWords: stopWords)
                            try scanner.run(body)
                        }
                    }
                }
            }
        }
    }
}

struct TokenScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    let bmp: UnsafeBufferPointer<UInt32>
    let extra: UnsafeBufferPointer<UInt32>
    let ascii: UnsafeBufferPointer<UInt8>
    /// The term being built: a word's folded UTF-8, or a CJK bigram when one is emitted.
    let term: UnsafeMutablePointer<UInt8>
    let stopWords: StopWordList?

    /// Bytes in `term`; above 0 exactly while a word is open.
    var length = 0
    /// Bytes the word may still reach: the maximum, or its length once a scalar did not fit, so
    /// that the term stays a prefix of the folded word.
    var limit = TextTokenizer.maximumTermBytes
    var position: UInt32 = 0
    /// The open CJK run: its last unit (not 0 exactly while a run is open), which a Hangul jamo
    /// may still extend, and the unit before it.
    var pending: UInt32 = 0
    var previous: UInt32 = 0
    var astral = AstralFolds()

    init(
        bytes: UnsafeBufferPointer<UInt8>, bmp: UnsafeBufferPointer<UInt32>, extra: UnsafeBufferPointer<UInt32>,
        ascii: UnsafeBufferPointer<UInt8>, term: UnsafeMutablePointer<UInt8>, stopWords: StopWordList?
    ) {
        self.bytes = bytes
        self.bmp = bmp
        self.extra = extra
        self.ascii = ascii
        self.term = term
        self.stopWords = stopWords
    }

    mutating func run(_ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
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

    /// One non-ASCII scalar.
    @inline(__always)
    private mutating func take(_ value: UInt32, _ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
        let entry = value < 0x10000 ? FoldEntry(raw: bmp[Int(value)]) : astral.entry(value)
        switch entry.kindBits {
        case ScalarKind.separator.rawValue:
            try endToken(body)
        case ScalarKind.mark.rawValue:
            return
        case ScalarKind.word.rawValue:
            if pending != 0 { try endRun(body) }
            let range = Int(entry.value)..<Int(entry.value) + entry.count
            if entry.count == 0 {
                append(entry.value)
            } else if value < 0x10000 {
                for index in range { append(extra[index]) }
            } else {
                for index in range { append(astral.extra[index]) }
            }
        default:
            if length > 0 { try endWord(body) }
            try addUnit(entry.count == 0 ? entry.value : value, body)
        }
    }

    /// Appends a scalar's UTF-8 to the word, unless it would pass the limit (which then closes).
    @inline(__always)
    private mutating func append(_ value: UInt32) {
        let width = value < 0x80 ? 1 : value < 0x800 ? 2 : value < 0x10000 ? 3 : 4
        guard length + width <= limit else {
            limit = length
            return
        }
        write(value, width: width, at: length)
        length += width
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
    private mutating func endToken(_ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
        if length > 0 {
            try endWord(body)
        } else if pending != 0 {
            try endRun(body)
        }
    }

    private mutating func endWord(_ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
        try emit(length, body)
        length = 0
        limit = TextTokenizer.maximumTermBytes
    }

    /// A CJK unit: the previous pair is emitted once the unit before this one can no longer change.
    private mutating func addUnit(
        _ unit: UInt32, _ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void
    ) rethrows {
        if pending != 0 {
            if let composed = CJK.composeHangul(pending, unit) {
                pending = composed
                return
            }
            if previous != 0 { try emitUnits(previous, pending, body) }
            previous = pending
        }
        pending = unit
    }

    /// Closes a CJK run: its last bigram, or its only unit when it has one.
    private mutating func endRun(_ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
        if previous != 0 {
            try emitUnits(previous, pending, body)
        } else {
            try emitUnits(pending, nil, body)
        }
        previous = 0
        pending = 0
    }

    private mutating func emitUnits(
        _ first: UInt32, _ second: UInt32?, _ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void
    ) rethrows {
        var count = Self.width(first)
        write(first, width: count, at: 0)
        if let second {
            write(second, width: Self.width(second), at: count)
            count += Self.width(second)
        }
        try emit(count, body)
    }

    @inline(__always)
    private static func width(_ value: UInt32) -> Int {
        value < 0x80 ? 1 : value < 0x800 ? 2 : value < 0x10000 ? 3 : 4
    }

    @inline(__always)
    private mutating func emit(_ count: Int, _ body: (UnsafeBufferPointer<UInt8>, UInt32) throws -> Void) rethrows {
        let token = UnsafeBufferPointer(start: term, count: count)
        if stopWords?.contains(token) != true { try body(token, position) }
        position &+= 1
    }
}
