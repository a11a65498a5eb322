// The exact JSON form: JSON that holds any CBOR item and reads back as the very same item, for
// `buri export` and `buri import`. Plain JSON (`jsonString`) is for reading by people; it drops
// tags and writes byte strings as base64 text, so it cannot be read back exactly.
//
// Everything plain JSON can say exactly is written as plain JSON: integers, finite floats (in
// their shortest round-trip form, always with '.' or 'e'), text, arrays, booleans, null, and maps
// whose keys are all text. Everything else is a *wrapper*: an object whose member names all
// start with '$':
//
//   {"$bytes": "<base64>"}                  a byte string (standard base64 with padding)
//   {"$float": "NaN"|"Infinity"|"-Infinity"} a float that is not finite
//   {"$tag": n, "$value": v}                tag n around v (a date: {"$tag":1,"$value":1700000000})
//   {"$simple": n}                          undefined (23) and the other simple values
//   {"$map": [[k1, v1], [k2, v2], ...]}     a map with a non-text key, or whose keys all start
//                                           with '$' (so it is not taken for a wrapper)
//
// Reading takes exactly these forms: an object all of whose member names start with '$' must be
// one of them. Numbers follow the JSON bridge's exact rules; two equal member names or map keys
// are an error; the item may nest as deep as CBOR input may (512 arrays, maps and tags), however
// many JSON levels its wrappers take.

extension CBORValue {
    /// This value in the exact JSON form (one line): JSON that ``init(exactJSON:)`` reads back as
    /// exactly this value, tags, byte strings and non-finite floats included.
    ///
    /// ```swift
    /// let value: CBORValue = ["when": .tagged(1, 1_700_000_000), "raw": .bytes([0, 1]), "x": .float(.infinity)]
    /// value.exactJSONString()
    /// // {"when":{"$tag":1,"$value":1700000000},"raw":{"$bytes":"AAE="},"x":{"$float":"Infinity"}}
    /// ```
    public func exactJSONString() -> String {
        var out: [UInt8] = []
        _ExactJSONWriter().write(self, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Reads the exact JSON form written by ``exactJSONString()``.
    ///
    /// ```swift
    /// let value = try CBORValue(exactJSON: #"{"$tag":1,"$value":0}"#)   // .tagged(1, 0)
    /// ```
    ///
    /// Throws a ``CBORError`` of kind `.invalidJSON` (with line, column and path) for malformed
    /// JSON, inexact numbers, repeated names or keys, unknown wrappers, or nesting deeper than 512.
    public init(exactJSON bytes: [UInt8]) throws {
        let parsed = try bytes.withUnsafeBufferPointer { utf8 in
            // Wrappers take up to three JSON levels per CBOR level ({"$map":[[k, v]]}).
            var parser = _JSONParser(bytes: utf8, maxDepth: 3 * _Limits.decodeNesting + 4)
            return try parser.parseDocument()
        }
        var reader = _ExactJSONReader()
        self = try reader.unwrap(parsed, depth: 0)
    }

    /// Reads the exact JSON form from text.
    public init(exactJSON text: String) throws {
        try self.init(exactJSON: Array(text.utf8))
    }

    /// Reads a JSON object whose member values are each in the exact JSON form, as `buri export`
    /// writes its records: each value may nest as deep as a CBOR item may, the object around it
    /// not counted. Member names must be plain (not start with '$') and appear once.
    ///
    /// ```swift
    /// let record = try CBORValue.exactJSONMembers(Array(#"{"key":"k","object":{"$bytes":"AA=="}}"#.utf8))
    /// record[1].value   // .bytes([0])
    /// ```
    public static func exactJSONMembers(_ bytes: [UInt8]) throws -> [CBORMapEntry] {
        let parsed = try bytes.withUnsafeBufferPointer { utf8 in
            var parser = _JSONParser(bytes: utf8, maxDepth: 3 * _Limits.decodeNesting + 5)
            return try parser.parseDocument()
        }
        guard case .map(let entries) = parsed else {
            throw CBORError(.invalidJSON, "expected a JSON object", found: parsed.kindName)
        }
        var result: [CBORMapEntry] = []
        for entry in entries {
            let name = entry.key.stringValue ?? ""
            var reader = _ExactJSONReader(path: [.member(name)])
            result.append(CBORMapEntry(key: entry.key, value: try reader.unwrap(entry.value, depth: 0)))
        }
        return result
    }
}

struct _ExactJSONWriter {
    let plain = _JSONWriter(pretty: false)

    func write(_ value: CBORValue, into out: inout [UInt8]) {
        switch value {
        case .unsigned, .negative, .text, .bool, .null:
            plain.write(value, into: &out, indent: 0)
        case .float(let d):
            if let name = _nonFiniteName(d) {
                wrapper("$float", into: &out) { plain.write(.text(name), into: &$0, indent: 0) }
            } else {
                out.append(contentsOf: _floatLiteral(d).utf8)
            }
        case .bytes(let bytes):
            wrapper("$bytes", into: &out) { plain.write(.text(_base64(bytes)), into: &$0, indent: 0) }
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .map(let entries):
            let textKeys = entries.allSatisfy { $0.key.stringValue != nil }
            let allDollar =
                !entries.isEmpty && entries.allSatisfy { $0.key.stringValue?.utf8.first == UInt8(ascii: "$") }
            if textKeys && !allDollar {
                out.append(UInt8(ascii: "{"))
                for (i, entry) in entries.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    plain.write(entry.key, into: &out, indent: 0)
                    out.append(UInt8(ascii: ":"))
                    write(entry.value, into: &out)
                }
                out.append(UInt8(ascii: "}"))
            } else {
                wrapper("$map", into: &out) { out in
                    out.append(UInt8(ascii: "["))
                    for (i, entry) in entries.enumerated() {
                        if i > 0 { out.append(UInt8(ascii: ",")) }
                        out.append(UInt8(ascii: "["))
                        write(entry.key, into: &out)
                        out.append(UInt8(ascii: ","))
                        write(entry.value, into: &out)
                        out.append(UInt8(ascii: "]"))
                    }
                    out.append(UInt8(ascii: "]"))
                }
            }
        case .tagged(let tag, let content):
            out.append(contentsOf: "{\"$tag\":\(tag),\"$value\":".utf8)
            write(content, into: &out)
            out.append(UInt8(ascii: "}"))
        case .undefined:
            out.append(contentsOf: "{\"$simple\":23}".utf8)
        case .simple(let v):
            out.append(contentsOf: "{\"$simple\":\(v)}".utf8)
        }
    }

    private func wrapper(_ name: String, into out: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        out.append(contentsOf: "{\"\(name)\":".utf8)
        body(&out)
        out.append(UInt8(ascii: "}"))
    }
}

struct _ExactJSONReader {
    /// Where the reader is, for error messages.
    var path: [_PathStep] = []

    func fail(_ message: String) -> CBORError {
        CBORError(.invalidJSON, message, codingPath: _renderPath(path))
    }

    /// The CBOR item a parsed JSON value stands for, checking CBOR's nesting limit.
    mutating func unwrap(_ value: CBORValue, depth: Int) throws -> CBORValue {
        switch value {
        case .array(let elements):
            try checkDepth(depth)
            var result: [CBORValue] = []
            result.reserveCapacity(elements.count)
            for (i, element) in elements.enumerated() {
                path.append(.element(i))
                result.append(try unwrap(element, depth: depth + 1))
                path.removeLast()
            }
            return .array(result)
        case .map(let entries):
            if !entries.isEmpty, entries.allSatisfy({ $0.key.stringValue?.utf8.first == UInt8(ascii: "$") }) {
                return try wrapper(entries, depth: depth)
            }
            try checkDepth(depth)
            var result: [CBORMapEntry] = []
            result.reserveCapacity(entries.count)
            for entry in entries {
                path.append(.member(entry.key.stringValue ?? ""))
                result.append(CBORMapEntry(key: entry.key, value: try unwrap(entry.value, depth: depth + 1)))
                path.removeLast()
            }
            return .map(result)
        default:
            return value
        }
    }

    private func checkDepth(_ depth: Int) throws {
        guard depth < _Limits.decodeNesting else {
            throw fail("arrays, maps and tags nest deeper than \(_Limits.decodeNesting) levels")
        }
    }

    private mutating func wrapper(_ entries: [CBORMapEntry], depth: Int) throws -> CBORValue {
        let names = entries.compactMap(\.key.stringValue)
        let member = { (name: String) in entries.first { $0.key.stringValue == name }?.value }
        switch names {
        case ["$bytes"]:
            guard case .text(let text)? = member("$bytes"), let bytes = _base64Decode(text) else {
                throw fail("\"$bytes\" takes standard base64 text with padding")
            }
            return .bytes(bytes)
        case ["$float"]:
            switch member("$float") {
            case .text("NaN")?: return .float(.nan)
            case .text("Infinity")?: return .float(.infinity)
            case .text("-Infinity")?: return .float(-.infinity)
            default: throw fail("\"$float\" takes \"NaN\", \"Infinity\" or \"-Infinity\"")
            }
        case ["$tag", "$value"], ["$value", "$tag"]:
            guard case .unsigned(let tag)? = member("$tag"), let content = member("$value") else {
                throw fail("\"$tag\" takes an unsigned integer")
            }
            try checkDepth(depth)
            path.append(.verbatim("{$tag \(tag)}"))
            defer { path.removeLast() }
            return .tagged(tag, try unwrap(content, depth: depth + 1))
        case ["$simple"]:
            guard case .unsigned(let n)? = member("$simple"), n <= 255, !(20...22).contains(n), !(24...31).contains(n)
            else {
                throw fail("\"$simple\" takes 23 (undefined), 0...19 or 32...255")
            }
            return n == 23 ? .undefined : .simple(UInt8(n))
        case ["$map"]:
            guard case .array(let pairs)? = member("$map") else {
                throw fail("\"$map\" takes an array of [key, value] pairs")
            }
            try checkDepth(depth)
            var result: [CBORMapEntry] = []
            var seen = Set<[UInt8]>()
            for (i, pair) in pairs.enumerated() {
                guard case .array(let parts) = pair, parts.count == 2 else {
                    throw fail("\"$map\" takes an array of [key, value] pairs")
                }
                path.append(.verbatim("{$map \(i)}"))
                let key = try unwrap(parts[0], depth: depth + 1)
                guard seen.insert(key.encoded()).inserted else {
                    throw fail("the map has the key \(key.exactJSONString()) twice; give each key once")
                }
                result.append(CBORMapEntry(key: key, value: try unwrap(parts[1], depth: depth + 1)))
                path.removeLast()
            }
            return .map(result)
        default:
            throw fail(
                "an object whose member names all start with '$' must be a wrapper ($bytes, $float, $tag with $value, $simple or $map), not \(names.map { "\"\($0)\"" }.joined(separator: ", "))"
            )
        }
    }
}

/// Decodes standard base64 with padding, accepting only the canonical text `_base64` writes.
func _base64Decode(_ text: String) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 4 == 0 else { return nil }
    func sextet(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
    var out: [UInt8] = []
    out.reserveCapacity(utf8.count / 4 * 3)
    var i = 0
    while i < utf8.count {
        let last = i + 4 == utf8.count
        let padding = last ? (utf8[i + 3] == UInt8(ascii: "=") ? (utf8[i + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
        var n: UInt32 = 0
        for j in 0..<4 {
            if j >= 4 - padding {
                n <<= 6
                continue
            }
            guard let s = sextet(utf8[i + j]) else { return nil }
            n = n << 6 | s
        }
        out.append(UInt8(truncatingIfNeeded: n >> 16))
        if padding < 2 { out.append(UInt8(truncatingIfNeeded: n >> 8)) }
        if padding < 1 { out.append(UInt8(truncatingIfNeeded: n)) }
        i += 4
    }
    // Only the canonical text (zero bits after the last byte) is accepted.
    return _base64(out) == text ? out : nil
}
