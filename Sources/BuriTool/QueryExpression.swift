import Buri

// The expressions of `buri query --where/--or/--not EXPR`: a small language for the library's
// conditions and their AND, OR and NOT (the grammar is in `QueryExpression.syntaxHelp`, which is
// also the command's help). Parsing reads Unicode scalars, never Characters, and keeps values as
// bytes: "é" and "e\u{301}" are canonically equal Strings but different index values, and an
// expression must not make one match the other. It is done in two steps: the syntax first (no
// database needed), then the typing of each value by the index's component kinds from the bucket's
// catalog. Every error is an `ExpressionError` at a scalar position of the text, shown with a caret.

/// A parsed expression, before its values are typed against a bucket's indexes.
indirect enum QueryExpression {
    case atom(ExpressionAtom)
    case and(QueryExpression, QueryExpression)
    case or(QueryExpression, QueryExpression)
    case not(QueryExpression)

    /// The syntax, as `buri query --help` shows it.
    static let syntaxHelp = """
        Expressions: a condition is INDEX:VALUE (equals), INDEX:A..B (A to B, \
        both included), INDEX:A..<B (B excluded), INDEX:A.. and INDEX:..B (one-sided, included), \
        INDEX:>A, INDEX:>=A, INDEX:<B, INDEX:<=B, INDEX:TEXT* (binary values that begin with TEXT; * \
        alone: any value), INDEX:V1|V2|V3 (any of them), and INDEX!=X, which is `not INDEX:X`. For a \
        compound index, give its leading components' values separated by ',', the last of which may \
        be a range, a prefix or a list: locale_age:EN,20..29. Conditions combine with `and`, `or`, \
        `not` and parentheses; `not` binds tighter than `and`, and `and` tighter than `or` (the \
        keywords in any case), at most 256 levels deep (each parenthesis, `not` and joined \
        condition is a level). Values are typed by the index component: numbers as --equals takes \
        them (also inf and -inf; NaN is refused), text as its UTF-8 bytes, compared exactly (no \
        Unicode normalization). Quote a value or an index name with double quotes when it holds a \
        space, one of : , | * ( ) " \\ or '..', begins with one of < > =, or is empty (""); inside \
        quotes \\" is a quote, \\\\ a backslash, \\n \\t \\r \\0 those characters, \\u{HEX} any Unicode \
        scalar and \\xHH one byte (binary indexes only when the bytes are not UTF-8). A mistake is a \
        usage error (exit status 2) showing the expression with a ^ under the character at fault.
        """
}

/// A value as written: its bytes (escapes resolved) and where it starts in the expression.
struct ExpressionValue {
    var bytes: [UInt8]
    /// The scalar offset of its first character (its opening quote, if quoted).
    var start: Int
}

/// One end of a range in an expression.
struct ExpressionBound {
    var value: ExpressionValue
    var inclusive: Bool
}

/// One condition: `INDEX:SPEC` or `INDEX!=SPEC`.
struct ExpressionAtom {
    var index: String
    var indexStart: Int
    /// Written with `!=`: the negation of the condition.
    var negated: Bool
    /// Exact values of the leading components.
    var leading: [ExpressionValue]
    /// What constrains the component after them, if anything.
    var last: Last
    /// Where the part after the leading values starts (for a component too many).
    var lastStart: Int

    enum Last {
        case none
        case range(lower: ExpressionBound?, upper: ExpressionBound?)
        /// A byte prefix, and where its `*` is.
        case prefix(ExpressionValue, star: Int)
        case anyOf([ExpressionValue])
    }
}

/// A mistake in an expression, at a scalar offset of it.
struct ExpressionError: Error {
    var position: Int
    var message: String

    /// The usage error `buri` reports: one line naming the option, the expression and the
    /// character, then the expression with a caret under that character.
    func toolError(option: String, expression: String) -> ToolError {
        // Shown per Character, so the caret sits under the whole character (a combining mark
        // and its base are one); controls are shown as \xNN to keep the line one line.
        var shown = ""
        var caret = 0
        var characterNumber = 0
        var scalarsBefore = 0
        var found = false
        for (number, character) in expression.enumerated() {
            let count = character.unicodeScalars.count
            if !found, position < scalarsBefore + count {
                caret = shown.count
                characterNumber = number + 1
                found = true
            }
            scalarsBefore += count
            if character.unicodeScalars.count == 1, let scalar = character.unicodeScalars.first,
                scalar.value < 0x20 || scalar.value == 0x7F
            {
                shown +=
                    "\\x" + String(scalar.value >> 4, radix: 16, uppercase: true)
                    + String(scalar.value & 0xF, radix: 16, uppercase: true)
            } else {
                shown.append(character)
            }
        }
        if !found {
            caret = shown.count
            characterNumber = expression.count + 1
        }
        let place =
            characterNumber > expression.count
            ? "at character \(characterNumber), the end of the expression" : "at character \(characterNumber)"
        var error = ToolError(.usage, "\(option) '\(shown)': \(message) (\(place))")
        error.excerpt = "    " + shown + "\n" + "    " + String(repeating: " ", count: caret) + "^\n"
        return error
    }
}

/// A recursive-descent parser of one expression.
struct ExpressionParser {
    let scalars: [Unicode.Scalar]
    var position = 0
    /// The levels above the current point of the expression's tree: open parentheses, `not`s, and
    /// conditions joined so far by the `and`/`or` chains being parsed (each join is a level, as
    /// the chain nests to the left).
    var depth = 0

    /// The deepest expression accepted. Parsing and turning the tree into a query recurse once
    /// per level, so thousands of `(` or `not` (a command line holds a megabyte) would otherwise
    /// exhaust the stack and end the process without a message.
    static let maximumDepth = 256

    /// Goes one level deeper, refusing an expression deeper than ``maximumDepth``.
    mutating func descend(at offset: Int) throws(ExpressionError) {
        depth += 1
        guard depth <= Self.maximumDepth else {
            throw ExpressionError(
                position: offset,
                message:
                    "the expression nests more than \(Self.maximumDepth) levels (parentheses, 'not', or conditions joined by 'and' or 'or'); write it with fewer, or use a list of values (index:a|b|c)"
            )
        }
    }

    /// Parses `text`; the syntax only (values stay untyped).
    static func parse(_ text: String) throws(ExpressionError) -> QueryExpression {
        var parser = ExpressionParser(scalars: Array(text.unicodeScalars))
        parser.skipSpaces()
        if parser.atEnd {
            throw ExpressionError(
                position: 0, message: "the expression is empty; give a condition such as age:20..29 or locale:EN")
        }
        let expression = try parser.parseOr()
        parser.skipSpaces()
        if !parser.atEnd {
            if parser.peek == ")" {
                throw ExpressionError(position: parser.position, message: "this ')' closes no '('")
            }
            throw ExpressionError(
                position: parser.position,
                message:
                    "expected 'and', 'or' or the end of the expression, found \(parser.describeHere()); conditions are joined with 'and' or 'or'"
            )
        }
        return expression
    }

    var atEnd: Bool { position >= scalars.count }
    var peek: Unicode.Scalar? { atEnd ? nil : scalars[position] }

    func scalar(at offset: Int) -> Unicode.Scalar? {
        position + offset < scalars.count ? scalars[position + offset] : nil
    }

    static func isSpace(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.isWhitespace }

    mutating func skipSpaces() {
        while let scalar = peek, Self.isSpace(scalar) { position += 1 }
    }

    /// Whether the text here starts with `literal`.
    func looking(at literal: String) -> Bool {
        for (offset, scalar) in literal.unicodeScalars.enumerated() where self.scalar(at: offset) != scalar {
            return false
        }
        return true
    }

    /// What is at the current position, for messages: "'x'", "the end of the expression".
    func describeHere() -> String {
        guard let first = peek else { return "the end of the expression" }
        if Self.isSpace(first) { return "a space" }
        var word = String.UnicodeScalarView()
        var at = position
        while at < scalars.count, !Self.isSpace(scalars[at]), word.count < 20 {
            word.append(scalars[at])
            at += 1
            if word.count == 1, "()".unicodeScalars.contains(word.first!) { break }
        }
        return "'\(String(word))'"
    }

    /// Whether the keyword `word` (any case) stands here as a word of its own: followed by the
    /// end, a space or a parenthesis.
    func keyword(_ word: String) -> Bool {
        let letters = Array(word.unicodeScalars)
        for (offset, letter) in letters.enumerated() {
            guard let scalar = scalar(at: offset), scalar.isASCII,
                Character(scalar).lowercased() == String(letter)
            else { return false }
        }
        guard let after = scalar(at: letters.count) else { return true }
        return Self.isSpace(after) || after == "(" || after == ")"
    }

    mutating func parseOr() throws(ExpressionError) -> QueryExpression {
        var left = try parseAnd()
        var joined = 0
        defer { depth -= joined }
        while true {
            skipSpaces()
            guard keyword("or") else { return left }
            joined += 1
            try descend(at: position)
            position += 2
            left = .or(left, try parseAnd())
        }
    }

    mutating func parseAnd() throws(ExpressionError) -> QueryExpression {
        var left = try parseUnary()
        var joined = 0
        defer { depth -= joined }
        while true {
            skipSpaces()
            guard keyword("and") else { return left }
            joined += 1
            try descend(at: position)
            position += 3
            left = .and(left, try parseUnary())
        }
    }

    mutating func parseUnary() throws(ExpressionError) -> QueryExpression {
        skipSpaces()
        guard let next = peek else {
            throw ExpressionError(
                position: position,
                message: "expected a condition (such as age:20..29), found the end of the expression")
        }
        if next == "(" {
            let open = position
            try descend(at: open)
            defer { depth -= 1 }
            position += 1
            let inner = try parseOr()
            skipSpaces()
            if atEnd { throw ExpressionError(position: open, message: "this '(' is never closed; add a ')'") }
            guard peek == ")" else {
                throw ExpressionError(
                    position: position, message: "expected 'and', 'or' or ')', found \(describeHere())")
            }
            position += 1
            return inner
        }
        if next == ")" {
            throw ExpressionError(position: position, message: "expected a condition (such as age:20..29), found ')'")
        }
        if keyword("not") {
            try descend(at: position)
            defer { depth -= 1 }
            position += 3
            return .not(try parseUnary())
        }
        for word in ["and", "or"] where keyword(word) {
            throw ExpressionError(
                position: position,
                message:
                    "expected a condition, found '\(word)': '\(word)' joins two conditions (quote an index named so)")
        }
        return .atom(try parseAtom())
    }

    /// Scalars that end an unquoted index name.
    static let nameStops = Set(" ():!\"\\,|*<>=".unicodeScalars)

    mutating func parseAtom() throws(ExpressionError) -> ExpressionAtom {
        let nameStart = position
        let name: String
        if peek == "\"" {
            let bytes = try parseQuoted()
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw ExpressionError(
                    position: nameStart,
                    message: "an index name is UTF-8 text; \\x escapes that are not UTF-8 cannot name one")
            }
            name = text
        } else {
            var view = String.UnicodeScalarView()
            while let scalar = peek, !Self.isSpace(scalar), !Self.nameStops.contains(scalar) {
                view.append(scalar)
                position += 1
            }
            if view.isEmpty {
                throw ExpressionError(
                    position: position,
                    message: "expected an index name, found \(describeHere()) (a condition is INDEX:VALUE)")
            }
            name = String(view)
        }
        let negated: Bool
        if peek == ":" {
            negated = false
            position += 1
        } else if looking(at: "!=") {
            negated = true
            position += 2
        } else {
            let shown = String(name.prefix(40))
            var hint = "a condition is INDEX:VALUE, or INDEX!=VALUE"
            if peek == "=" { hint = "write \(shown):VALUE for equality ('=' is not an operator here)" }
            if let scalar = peek, Self.isSpace(scalar) { hint += ", with no space after the index name" }
            throw ExpressionError(
                position: position,
                message: "expected ':' or '!=' after the index name '\(shown)', found \(describeHere()); \(hint)")
        }
        return try parseSpec(index: name, indexStart: nameStart, negated: negated)
    }

    /// One component of a condition: an exact value, or what only the last component may be.
    enum Component {
        case value(ExpressionValue)
        case last(ExpressionAtom.Last)
    }

    mutating func parseSpec(index: String, indexStart: Int, negated: Bool) throws(ExpressionError) -> ExpressionAtom {
        var leading: [ExpressionValue] = []
        while true {
            let componentStart = position
            let component = try parseComponent()
            if peek == "," {
                guard case .value(let value) = component else {
                    throw ExpressionError(
                        position: position,
                        message:
                            "only the last component of a condition may be a range, a prefix or a list; the ones before it are exact values"
                    )
                }
                leading.append(value)
                position += 1
                continue
            }
            if let scalar = peek, !Self.isSpace(scalar), scalar != ")" {
                let message: String
                switch scalar {
                case ":": message = "a value that holds ':' must be quoted (\"a:b\")"
                case "\"": message = "a '\"' inside a value: quote the whole value and write \\\" for the quote"
                case "(": message = "expected 'and', 'or' or a space after the value, found '('"
                case "|", "*", ".":
                    message =
                        "unexpected '\(scalar)' here: a list (A|B), a prefix (P*) or a range (A..B) is one value, the last of a condition"
                default:
                    message = "unexpected '\(Character(scalar))' after the value; quote a value that holds it"
                }
                throw ExpressionError(position: position, message: message)
            }
            switch component {
            case .value(let value):
                leading.append(value)
                return ExpressionAtom(
                    index: index, indexStart: indexStart, negated: negated, leading: leading, last: .none,
                    lastStart: position)
            case .last(let last):
                return ExpressionAtom(
                    index: index, indexStart: indexStart, negated: negated, leading: leading, last: last,
                    lastStart: componentStart)
            }
        }
    }

    /// Whether a value starts here (quoted or not).
    var valueStartsHere: Bool {
        guard let scalar = peek else { return false }
        if Self.isSpace(scalar) || "(),|*".unicodeScalars.contains(scalar) { return false }
        return !looking(at: "..")
    }

    mutating func parseComponent() throws(ExpressionError) -> Component {
        for (operator_, lower, inclusive) in [
            (">=", true, true), ("<=", false, true), (">", true, false), ("<", false, false),
        ]
        where looking(at: operator_) {
            position += operator_.unicodeScalars.count
            let value = try parseValue(after: "'\(operator_)'")
            let bound = ExpressionBound(value: value, inclusive: inclusive)
            return .last(lower ? .range(lower: bound, upper: nil) : .range(lower: nil, upper: bound))
        }
        if looking(at: "..") {
            let exclusive = looking(at: "..<")
            position += exclusive ? 3 : 2
            let value = try parseValue(after: exclusive ? "'..<'" : "'..'")
            return .last(.range(lower: nil, upper: ExpressionBound(value: value, inclusive: !exclusive)))
        }
        if peek == "*" {
            let star = position
            position += 1
            return .last(.prefix(ExpressionValue(bytes: [], start: star), star: star))
        }
        let value = try parseValue(after: nil)
        if looking(at: "..") {
            let exclusive = looking(at: "..<")
            position += exclusive ? 3 : 2
            let lower = ExpressionBound(value: value, inclusive: true)
            if exclusive || valueStartsHere {
                let upper = try parseValue(after: exclusive ? "'..<'" : "'..'")
                return .last(.range(lower: lower, upper: ExpressionBound(value: upper, inclusive: !exclusive)))
            }
            return .last(.range(lower: lower, upper: nil))
        }
        if peek == "*" {
            let star = position
            position += 1
            return .last(.prefix(value, star: star))
        }
        if peek == "|" {
            var values = [value]
            while peek == "|" {
                position += 1
                values.append(try parseValue(after: "'|'"))
            }
            return .last(.anyOf(values))
        }
        return .value(value)
    }

    /// A value, quoted or not; `after` names what precedes it, for the message when none is there.
    mutating func parseValue(after: String?) throws(ExpressionError) -> ExpressionValue {
        let start = position
        if peek == "\"" { return ExpressionValue(bytes: try parseQuoted(), start: start) }
        var bytes: [UInt8] = []
        while let scalar = peek {
            if Self.isSpace(scalar) || "(),|*".unicodeScalars.contains(scalar) || looking(at: "..") { break }
            switch scalar {
            case "\"":
                throw ExpressionError(
                    position: position,
                    message: "a '\"' inside a value: quote the whole value and write \\\" for the quote")
            case "\\":
                throw ExpressionError(
                    position: position, message: "backslash escapes work inside double quotes only: write \"…\\…\"")
            case ":":
                throw ExpressionError(position: position, message: "a value that holds ':' must be quoted (\"a:b\")")
            default:
                bytes.append(contentsOf: Array(String(scalar).utf8))
                position += 1
            }
        }
        if bytes.isEmpty {
            let what = after.map { "after \($0)" } ?? "here"
            throw ExpressionError(
                position: position,
                message: "expected a value \(what), found \(describeHere()) (write \"\" for the empty value)")
        }
        return ExpressionValue(bytes: bytes, start: start)
    }

    /// A double-quoted string, from its opening quote: its bytes with escapes resolved.
    mutating func parseQuoted() throws(ExpressionError) -> [UInt8] {
        let open = position
        position += 1
        var bytes: [UInt8] = []
        while true {
            guard let character = peek else {
                throw ExpressionError(position: open, message: "this '\"' is never closed; add a '\"'")
            }
            position += 1
            if character == "\"" { return bytes }
            guard character == "\\" else {
                bytes.append(contentsOf: Array(String(character).utf8))
                continue
            }
            let escape = position - 1
            guard let code = peek else {
                throw ExpressionError(
                    position: escape, message: "a '\\' ends the expression; write \\\\ for a backslash")
            }
            position += 1
            switch code {
            case "\"": bytes.append(UInt8(ascii: "\""))
            case "\\": bytes.append(UInt8(ascii: "\\"))
            case "n": bytes.append(0x0A)
            case "t": bytes.append(0x09)
            case "r": bytes.append(0x0D)
            case "0": bytes.append(0)
            case "x":
                guard let high = peek.flatMap(Self.hexDigit), let low = scalar(at: 1).flatMap(Self.hexDigit) else {
                    throw ExpressionError(
                        position: escape, message: "\\x takes exactly two hex digits (\\x00 to \\xFF): one byte")
                }
                bytes.append(UInt8(high << 4 | low))
                position += 2
            case "u":
                guard peek == "{" else {
                    throw ExpressionError(
                        position: escape, message: "write a Unicode scalar as \\u{HEX}, such as \\u{E9}")
                }
                position += 1
                var value: UInt32 = 0
                var digits = 0
                while let digit = peek.flatMap(Self.hexDigit), digits < 6 {
                    value = value << 4 | digit
                    digits += 1
                    position += 1
                }
                guard digits > 0, peek == "}", let unicode = Unicode.Scalar(value) else {
                    throw ExpressionError(
                        position: escape,
                        message: "\\u{…} takes 1 to 6 hex digits of a Unicode scalar (not a surrogate, at most 10FFFF)")
                }
                position += 1
                bytes.append(contentsOf: Array(String(unicode).utf8))
            default:
                throw ExpressionError(
                    position: escape,
                    message:
                        "unknown escape '\\\(Character(code))'; inside quotes write \\\" \\\\ \\n \\t \\r \\0 \\xHH or \\u{HEX}"
                )
            }
        }
    }

    static func hexDigit(_ scalar: Unicode.Scalar) -> UInt32? {
        switch scalar {
        case "0"..."9": return scalar.value - 0x30
        case "a"..."f": return scalar.value - 0x61 + 10
        case "A"..."F": return scalar.value - 0x41 + 10
        default: return nil
        }
    }
}

// MARK: - Typing against a bucket

extension QueryExpression {
    /// The library query for the expression on `descriptor`'s indexes, each value typed by its
    /// index component's kind.
    func query(on descriptor: BucketDescriptor) throws(ExpressionError) -> Query {
        switch self {
        case .atom(let atom): return try atom.query(on: descriptor)
        case .and(let left, let right): return try left.query(on: descriptor).and(right.query(on: descriptor))
        case .or(let left, let right): return try left.query(on: descriptor).or(right.query(on: descriptor))
        case .not(let inner): return Query.not(try inner.query(on: descriptor))
        }
    }
}

extension ExpressionAtom {
    func query(on descriptor: BucketDescriptor) throws(ExpressionError) -> Query {
        guard let definition = descriptor.index(named: index) else {
            let known = descriptor.indexes.map { "'\($0.name)'" }.joined(separator: ", ")
            throw ExpressionError(
                position: indexStart,
                message:
                    "bucket '\(descriptor.name)' has no index '\(index)' (\(known.isEmpty ? "it has no index" : "its indexes: \(known)"))"
            )
        }
        let kinds = definition.components
        let name = definition.name
        let given = leading.count + (isLast ? 1 : 0)
        if given > kinds.count {
            let extra = kinds.count < leading.count ? leading[kinds.count].start : lastStart
            throw ExpressionError(
                position: extra,
                message:
                    "index '\(name)' has \(kinds.count) component\(kinds.count == 1 ? "" : "s") but the condition gives \(given) (',' separates the values of a compound index's components)"
            )
        }
        var values: [IndexValue] = []
        for (position, value) in leading.enumerated() {
            values.append(try Self.typed(value, kind: kinds[position], index: name))
        }
        let next = leading.count
        let query: Query
        switch last {
        case .none:
            // As `--equals` and the Swift API's `.index(name, equals: values…)`: the same query,
            // so a page token passes between them.
            query = .index(name, equals: values)
        case .range(let lower, let upper):
            func bound(_ bound: ExpressionBound?) throws(ExpressionError) -> IndexBound {
                guard let bound else { return .unbounded }
                let value = try Self.typed(bound.value, kind: kinds[next], index: name)
                return bound.inclusive ? .inclusive(value) : .exclusive(value)
            }
            query = .index(name, leading: values, from: try bound(lower), to: try bound(upper))
        case .prefix(let prefix, let star):
            guard kinds[next] == .binary else {
                throw ExpressionError(
                    position: star,
                    message:
                        "a prefix ('*') needs a binary index component, but component \(next + 1) of index '\(name)' is numeric; give a range such as \(name):20..29"
                )
            }
            query = .index(name, leading: values, prefixBytes: prefix.bytes)
        case .anyOf(let list):
            var alternatives: [IndexValue] = []
            for value in list { alternatives.append(try Self.typed(value, kind: kinds[next], index: name)) }
            query = .index(name, leading: values, in: alternatives)
        }
        return negated ? .not(query) : query
    }

    var isLast: Bool {
        if case .none = last { return false }
        return true
    }

    /// Names of infinity besides the "Infinity" and "-Infinity" that --equals takes.
    static let infinities: [String: String] = [
        "inf": "Infinity", "+inf": "Infinity", "-inf": "-Infinity", "infinity": "Infinity", "+infinity": "Infinity",
        "-infinity": "-Infinity",
    ]

    /// `value` as an index value of a component of `kind`: binary takes the bytes as they are,
    /// numeric a number by `parseIndexValue`'s rules (and inf).
    static func typed(_ value: ExpressionValue, kind: IndexKind, index: String) throws(ExpressionError) -> IndexValue {
        switch kind {
        case .binary:
            return IndexValue(bytes: value.bytes)
        case .numeric:
            guard var text = String(validating: value.bytes, as: UTF8.self) else {
                throw ExpressionError(
                    position: value.start, message: "index '\(index)' is numeric, and this value is not even UTF-8 text"
                )
            }
            let lowered = text.lowercased()
            if ["nan", "+nan", "-nan"].contains(lowered) {
                throw ExpressionError(
                    position: value.start,
                    message: "NaN is refused: no index holds NaN, so it can match nothing (index '\(index)' is numeric)"
                )
            }
            if let infinity = infinities[lowered] { text = infinity }
            do {
                return try parseIndexValue(text, kind: .numeric, index: index, option: "value")
            } catch let error as ToolError {
                throw ExpressionError(position: value.start, message: error.message)
            } catch {
                throw ExpressionError(position: value.start, message: String(describing: error))
            }
        }
    }
}
