import ArgumentParser
import Buri

// MARK: - search

struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find objects through a full-text index: their keys, one per line, in key order.",
        discussion: """
            QUERY is SQLite FTS5's query syntax: words (all must occur), "a phrase", prefix*, \
            one + two (the phrase "one two"), OR, AND, NOT (a NOT b), and parentheses; words are \
            folded (case and accents) as the index folded them. FTS5 forms not implemented are \
            refused, not read another way: NEAR(...), column filters (body:word; quote a word \
            with a colon: "12:30"), ^word, and -word (write a NOT b). The keys come in byte order \
            (as UTF-8), each once. The index must be a text index: one a Swift .text declaration \
            made, or `buri import --text-index`. A query that does not parse exits with status 2, \
            showing the query with a ^ under the character at fault.

            Examples:
              buri search notes.buri Note body 'apple pie'
              buri search notes.buri Note body '"apple pie" OR tart* NOT pear' --limit 10
              buri search notes.buri Note body 'crème' --count
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to search.")
    var bucket: String

    @Argument(help: "The text index to search.")
    var index: String

    @Argument(help: ArgumentHelp("The full-text query (SQLite FTS5 syntax).", valueName: "query"))
    var query: String

    @Option(parsing: .unconditional, help: "At most this many keys (the first ones, in key order).")
    var limit: Int?

    @Flag(help: "Print only the number of matching objects (with --limit, at most that many).")
    var count = false

    @Flag(
        help: ArgumentHelp(
            "Print the keys best first by BM25 (SQLite FTS5's bm25()), equal scores in key order; with --limit, the best N.",
            discussion: "With --json each item is {\"key\": …, \"score\": …}."))
    var ranked = false

    @OptionGroup var keyFormat: KeyListFormat

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit)") }
        if count, keyFormat.nul { throw ValidationError("--count prints only a number; it cannot be combined with -0") }
        if count, ranked { throw ValidationError("--count prints only a number; it cannot be combined with --ranked") }
    }

    func run() throws {
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let descriptor = raw.descriptor
        guard let definition = descriptor.index(named: index) else {
            throw ToolError(BuriError.unknownIndex(bucket: bucket, index: index, known: descriptor.indexes.map(\.name)))
        }
        guard definition.text != nil else {
            let texts = descriptor.indexes.filter { $0.text != nil }.map { "'\($0.name)'" }
            let known =
                texts.isEmpty
                ? "bucket '\(bucket)' has no text index (make one with `buri import … --text-index NAME=FIELD` into a new bucket, or a Swift .text declaration)"
                : "its text indexes: \(texts.joined(separator: ", "))"
            let kind = definition.components.map(\.rawValue).joined(separator: ", ")
            throw ToolError(
                .usage,
                "bucket '\(bucket)': index '\(index)' is a \(kind) index, not a text index, so it cannot be searched (query it with `buri query`); \(known)"
            )
        }
        let keys: [[UInt8]]
        var scores: [Double] = []
        do {
            if ranked {
                let best = try raw.rankedSearchKeyBytes(textIndex: index, query: query, limit: limit ?? Int.max)
                keys = best.map(\.key)
                scores = best.map(\.score)
            } else {
                keys = try raw.searchKeys(textIndex: index, query: query)
            }
        } catch let BuriError.textQuerySyntax(bucket, index, query, message, offset) {
            throw Self.syntaxError(bucket: bucket, index: index, query: query, message: message, offset: offset)
        } catch {
            throw ToolError(error, path: target.database)
        }
        let shown = limit.map { Array(keys.prefix($0)) } ?? keys
        let out = Output.standardOutput()
        if count {
            try out.line(keyFormat.json ? "{\"count\":\(shown.count)}" : String(shown.count))
            try out.flush()
            return
        }
        if ranked, keyFormat.json {
            try printRankedJSON(keys: shown, scores: scores, out: out)
            return
        }
        let list = KeyListWriter(out, keyFormat, source: "bucket '\(bucket)', text index '\(index)'")
        try list.begin()
        try list.listing {
            for key in shown {
                // Keys come from index entries, which `check` keeps valid UTF-8: anything else is
                // damage, reported rather than printed as some other key.
                guard let text = String(validating: key, as: UTF8.self) else {
                    throw ToolError(
                        .failure,
                        "bucket '\(bucket)', text index '\(index)': an entry names a key that is not valid UTF-8 (\(key.count) bytes); the index is damaged: run `buri check \(target.database)`"
                    )
                }
                try list.key(text)
            }
        }
        try list.end()
        try out.flush()
    }

    /// Ranked keys as a JSON array of `{"key": …, "score": …}`, best first.
    private func printRankedJSON(keys: [[UInt8]], scores: [Double], out: Output) throws {
        var items: [String] = []
        for (key, score) in zip(keys, scores) {
            guard let text = String(validating: key, as: UTF8.self) else {
                throw ToolError(
                    .failure,
                    "bucket '\(bucket)', text index '\(index)': an entry names a key that is not valid UTF-8 (\(key.count) bytes); the index is damaged: run `buri check \(target.database)`"
                )
            }
            items.append("{\"key\":\(CBORValue.text(text).jsonString()),\"score\":\(score)}")
        }
        try out.line("[" + items.joined(separator: ",") + "]")
        try out.flush()
    }

    /// A query that does not parse: one line naming bucket, index, character and reason, then the
    /// query with a caret under the character at `offset` (counted in Characters, as the library
    /// counts it). Control characters are shown as \xNN; the caret line pads each Character before
    /// the offset by the columns it takes on a terminal (2 for wide East Asian characters and
    /// emoji, as many as its \xNN form for a control), so it lines up for any query.
    static func syntaxError(bucket: String, index: String, query: String, message: String, offset: Int) -> ToolError {
        var shown = ""
        var padding = 0
        for (number, character) in query.enumerated() {
            let form = displayForm(character)
            if number < offset { padding += columns(form) }
            shown += form
        }
        let total = query.count
        let place =
            offset >= total ? "at character \(total + 1), the end of the query" : "at character \(offset + 1)"
        var error = ToolError(
            .usage,
            "bucket '\(bucket)', text index '\(index)': the query '\(shown)' does not parse \(place): \(message)")
        error.excerpt = "    " + shown + "\n" + "    " + String(repeating: " ", count: padding) + "^\n"
        return error
    }

    /// How a Character is shown on the excerpt's one line: controls (line breaks, tabs) as \xNN.
    static func displayForm(_ character: Character) -> String {
        if character.unicodeScalars.count == 1, let scalar = character.unicodeScalars.first,
            scalar.value < 0x20 || scalar.value == 0x7F
        {
            return "\\x" + String(scalar.value >> 4, radix: 16, uppercase: true)
                + String(scalar.value & 0xF, radix: 16, uppercase: true)
        }
        if character == "\r\n" { return "\\x0D\\x0A" }
        return String(character)
    }

    /// The terminal columns a shown Character takes: its first scalar decides (combining marks
    /// after it take none).
    static func columns(_ form: String) -> Int {
        var total = 0
        for character in form {
            guard let scalar = character.unicodeScalars.first else { continue }
            total += isWide(scalar.value) ? 2 : 1
        }
        return total
    }

    /// Whether a scalar is East Asian Wide or Fullwidth (or an emoji shown two columns wide).
    static func isWide(_ value: UInt32) -> Bool {
        switch value {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
            0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1, 0x26AA...0x26AB,
            0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2...0x26F3, 0x26F5, 0x26FA,
            0x26FD, 0x2705, 0x270A...0x270B, 0x2728, 0x274C, 0x274E, 0x2753...0x2755, 0x2757,
            0x2795...0x2797, 0x27B0, 0x27BF, 0x2B1B...0x2B1C, 0x2B50, 0x2B55, 0x2E80...0x303E,
            0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF, 0xA960...0xA97F,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x16FE0...0x16FE4, 0x17000...0x18CFF, 0x1B000...0x1B2FF, 0x1F004, 0x1F0CF,
            0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F251, 0x1F300...0x1F64F, 0x1F680...0x1F6FF,
            0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}
