// The JSON bridge: plain JSON for people (`buri get`, `buri query`) and for
// reading plain JSON exactly. Plain JSON cannot hold tags, byte strings or
// non-finite floats, so what it writes does not always read back as the same
// item; the exact JSON form (CBORValue+ExactJSON.swift) does, for export and
// import. Plain JSON written by this bridge reads back as the same text:
//
// CBOR → JSON
// - unsigned/negative integers: exact integer literals, also beyond 2^53
//   (down to -18446744073709551616).
// - floats: Swift's shortest round-trip `description`, always with a '.' or
//   an 'e' so they read back as floats; NaN and ±infinity become the strings
//   "NaN", "Infinity", "-Infinity".
// - byte strings: standard base64 (with padding) in a string.
// - text: RFC 8259 escaping: `"` and `\` escaped, \b \f \n \r \t for those
//   controls and \u00XX for the other controls below 0x20; everything else,
//   non-ASCII included, is written as UTF-8.
// - tags: their content (the tag number is dropped), except dates: a tag 1
//   or tag 1001 date is written as its seconds since 1970 as a `Date` holds
//   them (the float64 `Date.timeIntervalSince1970` gives, its index value):
//   tag 1's own number when it is exactly that (every date Buri writes),
//   else that float64 (tag 1001, and tag 1 around a number with more
//   precision than a `Date` holds).
// - undefined and other simple values: null.
// - map keys: text keys as they are; other keys as a string holding their
//   JSON text (a string-valued key such as bytes gives that string); a
//   non-text key nested inside such a key is written as the base64 of its
//   CBOR, so the output stays linear in the input.
// - pretty output: two-space indentation, `"key": value`, empty containers
//   as `[]`/`{}`; entries always in stored order.
//
// JSON → CBOR: exactly what the text says, or an error.
// - numbers without '.', 'e' or 'E' are integers (major 0/1), exactly; one
//   outside -2^64 ... 2^64-1 (the integers CBOR holds) is an error, never
//   rounded to a float.
// - other numbers become the float64 nearest to them, but only if that
//   float64 *is* the number written: the literal has the decimal value of
//   the double's shortest round-trip text (Swift's `description`: `0.1`,
//   `2.50`, `1e3`, `-0.0` and every shortest-form output of JSON writers
//   pass) or of its exact value, all its digits (`4611686018427387904.0`
//   for 2^62, `-18446744073709551616.0`, `0.1000000000000000055511151231257827021181583404541015625`
//   for the double nearest 0.1). A literal that overflows to
//   ±infinity (`1e400`), underflows to zero (`1e-400`) or carries more
//   digits than a double keeps (`9007199254740993.0`, whose nearest double is
//   9007199254740992) is an error naming the nearest double.
// - strings: text (all escapes incl. surrogate pairs; lone surrogates are an
//   error); objects: maps with text keys in document order; two members with
//   the same name (compared as UTF-8 bytes) are an error; arrays;
//   true/false/null.
// - nesting is limited to 512 levels; a UTF-8 byte order mark is skipped;
//   errors give line and column, and `CBORError.codingPath` names the member
//   (`items[2].price`).

extension CBORValue {
    /// This value as JSON text; entries in stored order, so the output is
    /// deterministic.
    ///
    /// ```swift
    /// let value: CBORValue = ["name": "Dirk", "scores": [1, 2.5], "blob": .bytes([0, 1])]
    /// value.jsonString()  // {"name":"Dirk","scores":[1,2.5],"blob":"AAE="}
    /// ```
    public func jsonString(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        _JSONWriter(pretty: pretty).write(self, into: &out, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses JSON text (RFC 8259) into a value.
    ///
    /// ```swift
    /// let value = try CBORValue(json: #"{"age": 20, "ratio": 0.5}"#)
    /// value["age"]   // .unsigned(20)
    /// value["ratio"] // .float(0.5)
    /// ```
    ///
    /// Throws a ``CBORError`` of kind `.invalidJSON` with ``CBORError/line``
    /// and ``CBORError/column`` set.
    public init(json: String) throws {
        var text = json
        self = try text.withUTF8 { utf8 in
            var parser = _JSONParser(bytes: utf8)
            return try parser.parseDocument()
        }
    }

    /// Parses JSON from UTF-8 bytes (invalid UTF-8 is an error).
    public init(jsonBytes: [UInt8]) throws {
        self = try jsonBytes.withUnsafeBufferPointer { utf8 in
            var parser = _JSONParser(bytes: utf8)
            return try parser.parseDocument()
        }
    }

    /// Parses one number written as in JSON, by the JSON bridge's rules: an integer exactly
    /// (-2^64 ... 2^64-1), any other number as the float64 that is exactly that number in its
    /// shortest form. Also takes `Infinity` and `-Infinity`. Surrounding spaces are ignored.
    ///
    /// ```swift
    /// try CBORValue(jsonNumber: "-9223372036854775809")  // .negative(9223372036854775808)
    /// try CBORValue(jsonNumber: "0.1")                   // .float(0.1)
    /// try CBORValue(jsonNumber: "1e400")                 // throws: overflows a double
    /// ```
    ///
    /// Throws a ``CBORError`` of kind `.invalidJSON` for anything else.
    public init(jsonNumber text: String) throws {
        let trimmed = text.trimmingSpaces
        switch trimmed {
        case "Infinity", "+Infinity": self = .float(.infinity)
        case "-Infinity": self = .float(-.infinity)
        default:
            let value = try CBORValue(json: trimmed)
            switch value {
            case .unsigned, .negative, .float: self = value
            default: throw CBORError(.invalidJSON, "'\(text)' is not a number", found: text)
            }
        }
    }
}

extension CBORValue {
    /// The double whose exact value is the decimal number `text` (JSON's number grammar, such as
    /// `36893488147419103232` or `4611686018427387904.0`), or nil if no double is exactly that
    /// number. Unlike ``init(jsonNumber:)`` it takes integers beyond CBOR's range and never the
    /// shortest form for another number (`0.1` gives nil: the double nearest 0.1 is not 0.1).
    ///
    /// ```swift
    /// CBORValue.exactDouble("36893488147419103232")   // 0x1p65
    /// CBORValue.exactDouble("36893488147419103233")   // nil
    /// ```
    public static func exactDouble(_ text: String) -> Double? {
        let trimmed = text.trimmingSpaces
        let bytes = Array(trimmed.utf8)
        // JSON's grammar only: Double(_:) also reads hex, "inf", "nan" and a leading '+'.
        var index = bytes.first == UInt8(ascii: "-") ? 1 : 0
        let isDigit = { (i: Int) in i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") }
        guard isDigit(index) else { return nil }
        while isDigit(index) { index += 1 }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { return nil }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard isDigit(index) else { return nil }
            while isDigit(index) { index += 1 }
        }
        guard index == bytes.count, let double = Double(trimmed), double.isFinite else { return nil }
        let written = _DecimalValue(trimmed)
        if double == 0 { return written.isZero ? double : nil }
        return _DecimalValue(exactly: double) == written ? double : nil
    }
}

extension String {
    var trimmingSpaces: String {
        let utf8 = Array(self.utf8)
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }
}

// MARK: - Writing

struct _JSONWriter {
    let pretty: Bool
    /// Whether this writer renders a map key's JSON. A key's JSON is escaped into a string; keys
    /// nested in keys would be escaped once more at every level, doubling the output each time
    /// (a 100-byte input could ask for terabytes), so inside a key they are written as base64 CBOR.
    var insideKey = false

    func write(_ value: CBORValue, into out: inout [UInt8], indent: Int) {
        switch value {
        case .unsigned(let n):
            out.append(contentsOf: String(n).utf8)
        case .negative(let n):
            out.append(contentsOf: (n == .max ? "-18446744073709551616" : "-\(n + 1)").utf8)
        case .bytes(let bytes):
            writeString(_base64(bytes), into: &out)
        case .text(let string):
            writeString(string, into: &out)
        case .array(let elements):
            guard !elements.isEmpty else {
                out.append(contentsOf: "[]".utf8)
                return
            }
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent + 1)
                write(element, into: &out, indent: indent + 1)
            }
            newline(&out, indent)
            out.append(UInt8(ascii: "]"))
        case .map(let entries):
            guard !entries.isEmpty else {
                out.append(contentsOf: "{}".utf8)
                return
            }
            out.append(UInt8(ascii: "{"))
            for (i, entry) in entries.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent + 1)
                writeString(keyText(entry.key), into: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                write(entry.value, into: &out, indent: indent + 1)
            }
            newline(&out, indent)
            out.append(UInt8(ascii: "}"))
        case .tagged(let tag, let content):
            if tag == _CBORDate.epochTag || tag == _CBORDate.extendedTag,
                let seconds = try? _CBORDate.referenceSeconds(value)
            {
                // A date is shown as the seconds since 1970 a `Date` holds for it — its index value,
                // and what a query takes: tag 1's own number when that is exactly it (every date Buri
                // writes), else the `Double` it rounds to (tag 1 with more precision than a `Date`
                // holds; tag 1001).
                let epoch = seconds + _CBORDate.referenceEpochDouble
                let exact: Bool
                switch content {
                case .float(let written): exact = written == epoch || (written.isNaN && epoch.isNaN)
                case .unsigned, .negative: exact = content.doubleValue == epoch
                default: exact = false
                }
                write(tag == _CBORDate.epochTag && exact ? content : .float(epoch), into: &out, indent: indent)
            } else {
                write(content, into: &out, indent: indent)
            }
        case .bool(let b):
            out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null, .undefined, .simple:
            out.append(contentsOf: "null".utf8)
        case .float(let d):
            if let name = _nonFiniteName(d) {
                writeString(name, into: &out)
            } else {
                out.append(contentsOf: _floatLiteral(d).utf8)
            }
        }
    }

    private func newline(_ out: inout [UInt8], _ indent: Int) {
        guard pretty else { return }
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    /// The string a map key is written as.
    private func keyText(_ key: CBORValue) -> String {
        switch key {
        case .text(let s): return s
        case .bytes(let b): return _base64(b)
        case .tagged(_, let content): return keyText(content)
        case .float(let d): return _nonFiniteName(d) ?? _floatLiteral(d)
        default:
            if insideKey { return _base64(key.encoded()) }
            var out: [UInt8] = []
            _JSONWriter(pretty: false, insideKey: true).write(key, into: &out, indent: 0)
            return String(decoding: out, as: UTF8.self)
        }
    }

    private func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

func _nonFiniteName(_ d: Double) -> String? {
    if d.isNaN { return "NaN" }
    if d == .infinity { return "Infinity" }
    if d == -.infinity { return "-Infinity" }
    return nil
}

/// Swift's shortest round-trip text, made to always read back as a float.
func _floatLiteral(_ d: Double) -> String {
    let text = d.description
    if text.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
        return text
    }
    return text + ".0"
}

/// Standard base64 with padding (RFC 4648 §4).
func _base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i + 3 <= bytes.count {
        let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
        out.append(alphabet[Int(n >> 18 & 63)])
        out.append(alphabet[Int(n >> 12 & 63)])
        out.append(alphabet[Int(n >> 6 & 63)])
        out.append(alphabet[Int(n & 63)])
        i += 3
    }
    let rest = bytes.count - i
    if rest > 0 {
        let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
        out.append(alphabet[Int(n >> 18 & 63)])
        out.append(alphabet[Int(n >> 12 & 63)])
        out.append(rest == 2 ? alphabet[Int(n >> 6 & 63)] : UInt8(ascii: "="))
        out.append(UInt8(ascii: "="))
    }
    return String(decoding: out, as: UTF8.self)
}

// MARK: - Parsing

struct _JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var pos = 0
    /// The most arrays and objects that may nest.
    let maxDepth: Int
    /// Where the parser is, for error messages: member names and array positions.
    var path: [PathItem] = []

    enum PathItem {
        case member(String)
        case element(Int)
    }

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = _Limits.decodeNesting) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// The path as `items[2].price` (shortened when deep, see ``_renderPath(_:)``).
    var renderedPath: String {
        _renderPath(
            path.map { item in
                switch item {
                case .member(let name): return .member(name)
                case .element(let index): return .element(index)
                }
            })
    }

    mutating func parseDocument() throws -> CBORValue {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { pos = 3 }
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard pos == bytes.count else { throw error("unexpected \(found()) after the JSON value") }
        return value
    }

    // MARK: Errors

    func error(_ message: String, at offset: Int? = nil) -> CBORError {
        let offset = min(offset ?? pos, bytes.count)
        var line = 1
        var column = 1
        for i in 0..<offset {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return CBORError(
            .invalidJSON, "\(message) (line \(line), column \(column))", offset: offset, codingPath: renderedPath,
            line: line, column: column)
    }

    /// Describes the byte at `pos` for error messages.
    func found() -> String {
        guard pos < bytes.count else { return "end of input" }
        let byte = bytes[pos]
        if byte >= 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    // MARK: Grammar

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws -> CBORValue {
        guard pos < bytes.count else { throw error("unexpected end of input; expected a value") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .text(try parseString())
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected \(found()); expected a value")
        }
    }

    mutating func parseLiteral(_ word: StaticString, _ value: CBORValue) throws -> CBORValue {
        let start = pos
        let count = word.utf8CodeUnitCount
        let matches = word.withUTF8Buffer { expected in
            bytes.count - pos >= count && (0..<count).allSatisfy { bytes[pos + $0] == expected[$0] }
        }
        guard matches else { throw error("invalid literal; expected '\(word)'", at: start) }
        pos += count
        return value
    }

    mutating func checkDepth(_ depth: Int) throws {
        guard depth < maxDepth else {
            throw error("arrays and objects nest deeper than \(maxDepth) levels")
        }
    }

    mutating func parseArray(depth: Int) throws -> CBORValue {
        try checkDepth(depth)
        pos += 1  // [
        var elements: [CBORValue] = []
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            return .array(elements)
        }
        path.append(.element(0))
        defer { path.removeLast() }
        while true {
            skipWhitespace()
            path[path.count - 1] = .element(elements.count)
            elements.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard pos < bytes.count else { throw error("unexpected end of input; expected ',' or ']' in an array") }
            switch bytes[pos] {
            case UInt8(ascii: ","): pos += 1
            case UInt8(ascii: "]"):
                pos += 1
                return .array(elements)
            default: throw error("unexpected \(found()); expected ',' or ']' in an array")
            }
        }
    }

    mutating func parseObject(depth: Int) throws -> CBORValue {
        try checkDepth(depth)
        pos += 1  // {
        var entries: [CBORMapEntry] = []
        skipWhitespace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            return .map(entries)
        }
        // Names seen so far, as bytes: String equality is canonical equivalence, which would take
        // "é" and "e\u{301}" for one name.
        var names = Set<[UInt8]>()
        while true {
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else {
                throw error("unexpected \(found()); expected a string key in an object")
            }
            let keyStart = pos
            let key = try parseString()
            guard names.insert(Array(key.utf8)).inserted else {
                throw error(
                    "the object has two members named \(CBORValue.text(key).jsonString()); give each name once",
                    at: keyStart)
            }
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else {
                throw error("unexpected \(found()); expected ':' after an object key")
            }
            pos += 1
            skipWhitespace()
            path.append(.member(key))
            let value = try parseValue(depth: depth + 1)
            path.removeLast()
            entries.append(CBORMapEntry(key: .text(key), value: value))
            skipWhitespace()
            guard pos < bytes.count else { throw error("unexpected end of input; expected ',' or '}' in an object") }
            switch bytes[pos] {
            case UInt8(ascii: ","): pos += 1
            case UInt8(ascii: "}"):
                pos += 1
                return .map(entries)
            default: throw error("unexpected \(found()); expected ',' or '}' in an object")
            }
        }
    }

    mutating func parseString() throws -> String {
        let open = pos
        pos += 1  // "
        let start = pos
        // Fast path: no escapes.
        while pos < bytes.count {
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                let string = try makeString(UnsafeBufferPointer(rebasing: bytes[start..<pos]), at: start)
                pos += 1
                return string
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            pos += 1
        }
        var utf8 = Array(bytes[start..<pos])
        while true {
            guard pos < bytes.count else { throw error("unterminated string", at: open) }
            let byte = bytes[pos]
            switch byte {
            case UInt8(ascii: "\""):
                pos += 1
                return try makeString(utf8, at: start)
            case UInt8(ascii: "\\"):
                try parseEscape(into: &utf8)
            case 0..<0x20:
                throw error("control character \(found()) in a string must be escaped")
            default:
                utf8.append(byte)
                pos += 1
            }
        }
    }

    private func makeString(_ utf8: UnsafeBufferPointer<UInt8>, at offset: Int) throws -> String {
        if _isASCII(utf8) { return String(decoding: utf8, as: UTF8.self) }
        guard let string = String(validating: utf8, as: UTF8.self) else {
            throw error("a string is not valid UTF-8", at: offset)
        }
        return string
    }

    private func makeString(_ utf8: [UInt8], at offset: Int) throws -> String {
        try utf8.withUnsafeBufferPointer { try makeString($0, at: offset) }
    }

    mutating func parseEscape(into utf8: inout [UInt8]) throws {
        let start = pos
        pos += 1  // backslash
        guard pos < bytes.count else { throw error("unterminated escape sequence", at: start) }
        let byte = bytes[pos]
        pos += 1
        switch byte {
        case UInt8(ascii: "\""): utf8.append(0x22)
        case UInt8(ascii: "\\"): utf8.append(0x5C)
        case UInt8(ascii: "/"): utf8.append(0x2F)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4(escapeStart: start)
            if (0xD800..<0xDC00).contains(scalar) {
                let low = pos
                guard bytes.count - pos >= 2, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u")
                else {
                    throw error("a high surrogate escape must be followed by a low surrogate escape", at: start)
                }
                pos += 2
                let second = try parseHex4(escapeStart: low)
                guard (0xDC00..<0xE000).contains(second) else {
                    throw error("a high surrogate escape must be followed by a low surrogate escape", at: start)
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (second - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw error("a low surrogate escape without a high surrogate before it", at: start)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape", at: start) }
            utf8.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw error("invalid escape sequence '\\\(Character(Unicode.Scalar(byte)))'", at: start)
        }
    }

    mutating func parseHex4(escapeStart: Int) throws -> UInt32 {
        guard bytes.count - pos >= 4 else { throw error("a \\u escape needs four hex digits", at: escapeStart) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[pos]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("a \\u escape needs four hex digits", at: escapeStart)
            }
            value = value << 4 | UInt32(digit)
            pos += 1
        }
        return value
    }

    mutating func parseNumber() throws -> CBORValue {
        let start = pos
        let negative = bytes[pos] == UInt8(ascii: "-")
        if negative { pos += 1 }
        let digitsStart = pos
        guard pos < bytes.count, isDigit(bytes[pos]) else {
            throw error("a number needs a digit after '-'", at: start)
        }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < bytes.count && isDigit(bytes[pos]) {
                throw error("a number must not have leading zeros", at: start)
            }
        } else {
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        let digitsEnd = pos
        var isInteger = true
        if pos < bytes.count && bytes[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw error("a number needs a digit after '.'") }
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
            isInteger = false
            pos += 1
            if pos < bytes.count && (bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-")) { pos += 1 }
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw error("a number needs a digit in its exponent") }
            while pos < bytes.count && isDigit(bytes[pos]) { pos += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
        if isInteger {
            var magnitude: UInt64 = 0
            var overflow = false
            for i in digitsStart..<digitsEnd {
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[i] - UInt8(ascii: "0")))
                if o1 || o2 {
                    overflow = true
                    break
                }
                magnitude = sum
            }
            if !overflow {
                if !negative || magnitude == 0 { return .unsigned(magnitude) }
                return .negative(magnitude - 1)
            }
            if negative && text == "-18446744073709551616" { return .negative(.max) }
            throw error(
                "the integer \(text) is outside -18446744073709551616 ... 18446744073709551615, the integers CBOR holds exactly; write it as a string, or as a decimal such as 1.5e30 if an approximate float is meant",
                at: start)
        }
        guard let double = Double(text) else { throw error("invalid number", at: start) }
        if let problem = _inexactDecimal(text, double) { throw error("the number \(text) \(problem)", at: start) }
        return .float(double)
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}

// MARK: - Exact decimals

/// Why `double` (parsed from the decimal literal `text`) is not exactly the number written, or nil
/// if it is: it overflowed to ±infinity, underflowed to zero, or has a different decimal value
/// from the literal in its shortest round-trip form.
func _inexactDecimal(_ text: String, _ double: Double) -> String? {
    if double.isInfinite {
        return "is too large for a double (it would become \(double < 0 ? "-" : "")infinity); write it as a string"
    }
    let written = _DecimalValue(text)
    if double == 0 {
        return written.isZero ? nil : "is too small for a double (it would become 0); write it as a string"
    }
    // The shortest form that reads back as `double` (`0.1`), or every digit of the double's
    // exact value (`4611686018427387904.0` for 2^62, whose shortest form 4.611686018427388e18 is
    // another number): either says exactly which double is meant.
    let shortest = double.description
    if _DecimalValue(shortest) == written { return nil }
    if _DecimalValue(exactly: double) == written { return nil }
    return
        "has more precision than a double holds: the nearest double is \(_floatLiteral(double)); write that, or the number as a string"
}

extension _DecimalValue {
    /// The exact value of a finite `double`, every digit of it: a double is an integer times a
    /// power of two, m·2^e, which is m·2^e exactly when e ≥ 0 and m·5^-e · 10^e when e < 0, so
    /// its decimal expansion always ends (at most 767 significant digits).
    init(exactly double: Double) {
        self.init("0")
        guard double.isFinite, double != 0 else { return }
        negative = double.sign == .minus
        var significand = double.significandBitPattern
        var exponent = Int(double.exponentBitPattern)
        if exponent == 0 {
            exponent = 1  // subnormal: no implicit bit
        } else {
            significand |= 1 << UInt64(Double.significandBitCount)
        }
        exponent -= 1023 + Double.significandBitCount  // the bias of a double's exponent
        while significand & 1 == 0 {
            significand >>= 1
            exponent += 1
        }
        // Little-endian limbs of nine decimal digits each.
        var limbs: [UInt64] = [
            significand % 1_000_000_000, significand / 1_000_000_000 % 1_000_000_000,
            significand / 1_000_000_000_000_000_000,
        ]
        func multiply(by factor: UInt64) {
            var carry: UInt64 = 0
            for i in limbs.indices {
                let product = limbs[i] * factor + carry
                limbs[i] = product % 1_000_000_000
                carry = product / 1_000_000_000
            }
            while carry > 0 {
                limbs.append(carry % 1_000_000_000)
                carry /= 1_000_000_000
            }
        }
        // Factors below 2^30, so that a limb (< 10^9) times one fits in 64 bits.
        var twos = exponent > 0 ? exponent : 0
        while twos > 0 {
            let step = min(twos, 29)
            multiply(by: 1 << UInt64(step))
            twos -= step
        }
        var fives = exponent < 0 ? -exponent : 0
        while fives > 0 {
            let step = min(fives, 12)
            var factor: UInt64 = 1
            for _ in 0..<step { factor *= 5 }
            multiply(by: factor)
            fives -= step
        }
        var text = ""
        while limbs.count > 1, limbs.last == 0 { limbs.removeLast() }
        for (i, limb) in limbs.reversed().enumerated() {
            let part = String(limb)
            if i > 0 { text += String(repeating: "0", count: 9 - part.count) }
            text += part
        }
        self.init((negative ? "-" : "") + text + (exponent < 0 ? "e\(exponent)" : ""))
    }
}

/// A decimal number as sign, significant digits (no leading or trailing zeros) and the power of
/// ten of the last digit, so equal values compare equal whatever way they were written.
struct _DecimalValue: Equatable {
    var negative = false
    var digits: [UInt8] = []
    var exponent = 0

    var isZero: Bool { digits.isEmpty }

    /// Reads `-?digits(.digits)?([eE][+-]?digits)?` (JSON's grammar, and Swift's `description`).
    init(_ text: String) {
        var bytes = Array(text.utf8)[...]
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        } else if bytes.first == UInt8(ascii: "+") {
            bytes = bytes.dropFirst()
        }
        var fractionDigits = 0
        var seenPoint = false
        var exponentPart = 0
        var exponentNegative = false
        var inExponent = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if inExponent {
                    // Saturate: any exponent this large is out of a double's range anyway.
                    exponentPart = min(exponentPart * 10 + Int(byte - UInt8(ascii: "0")), 1_000_000_000)
                } else {
                    digits.append(byte)
                    if seenPoint { fractionDigits += 1 }
                }
            case UInt8(ascii: "."): seenPoint = true
            case UInt8(ascii: "e"), UInt8(ascii: "E"): inExponent = true
            case UInt8(ascii: "-"): exponentNegative = true
            default: break
            }
        }
        exponent = (exponentNegative ? -exponentPart : exponentPart) - fractionDigits
        if let first = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }) {
            digits.removeFirst(first)
        } else {
            digits = []
        }
        while let last = digits.last, last == UInt8(ascii: "0") {
            digits.removeLast()
            exponent += 1
        }
        if digits.isEmpty { exponent = 0 }
    }
}
