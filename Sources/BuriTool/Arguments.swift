import ArgumentParser
import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The command line as the process received it, checked and made unambiguous before
// ArgumentParser reads it:
//
// - Every argument must be UTF-8. `CommandLine.arguments` silently replaces invalid bytes with
//   U+FFFD, which would store, query or delete something other than what was typed (or create a
//   database at another path); the raw `argv` bytes are checked instead, and an argument that is
//   not UTF-8 is refused, naming it.
// - `--option=VALUE` is split at its first "=" scalar. ArgumentParser splits at the first "="
//   Character, and a "=" followed by a combining mark is one Character with it, so
//   `--equals=\u{301}x` was taken for an unknown option; and an empty VALUE (`--from=`) made it
//   take the next argument as the value. Such an option is passed on as `--option` `VALUE`, which
//   gives exactly VALUE, even an empty one. A flag given a value (`--json=`) is refused.
// - `-h` (or short flags that include it, such as `-0h`) or `--version` where a key, a value or a
//   name is expected is refused rather than taken for a request for help or the version: `buri
//   delete DB B -h` printed the help and exited 0, deleting nothing. After `--` it is a key like
//   any other word.
//
// What takes a value is read from ArgumentParser's own description of each command
// (`_dumpHelp()`), so every option of every command, including ones added later, is covered.

/// What a command accepts, as far as telling values from options goes.
struct CommandShape {
    struct Option {
        /// Whether it takes a value (an option) rather than none (a flag).
        var takesValue: Bool
        /// Whether a value that starts with '-' is taken too (`.unconditional`).
        var unconditional: Bool
        var valueName: String
    }

    /// Options by name as typed: "--from", "-o".
    var options: [String: Option] = [:]
    /// The positional arguments in order, by value name ("db", "bucket", "key").
    var positionals: [String] = []
    /// Whether the last positional takes any number of words.
    var lastRepeats = false
    /// The value name of the positional that collects unrecognized words (`get`'s and `delete`'s keys).
    var unrecognized: String?

    /// The shape of `command`, from ArgumentParser's description of it; nil if that cannot be read.
    static func of(_ command: any ParsableCommand.Type) -> CommandShape? {
        guard let data = command._dumpHelp().data(using: .utf8),
            let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let info = root["command"] as? [String: Any],
            let arguments = info["arguments"] as? [[String: Any]]
        else { return nil }
        var shape = CommandShape()
        for argument in arguments {
            guard let kind = argument["kind"] as? String else { return nil }
            let strategy = argument["parsingStrategy"] as? String ?? "default"
            let valueName = argument["valueName"] as? String ?? "value"
            switch kind {
            case "positional":
                if strategy == "allUnrecognized" {
                    shape.unrecognized = valueName
                } else {
                    shape.positionals.append(valueName)
                    shape.lastRepeats = argument["isRepeating"] as? Bool ?? false
                }
            case "option", "flag":
                let option = Option(
                    takesValue: kind == "option", unconditional: strategy == "unconditional", valueName: valueName)
                for name in argument["names"] as? [[String: Any]] ?? [] {
                    guard let text = name["name"] as? String, let nameKind = name["kind"] as? String else { continue }
                    shape.options[(nameKind == "long" ? "--" : "-") + text] = option
                }
            default:
                return nil
            }
        }
        return shape
    }

    /// Whether `word` is one or more of this command's short flags run together, one of them -h
    /// (`-h`, `-0h`): what ArgumentParser takes for a request for help.
    func asksForHelp(_ word: String) -> Bool {
        let scalars = Array(word.unicodeScalars)
        guard scalars.count >= 2, scalars[0] == "-", scalars[1] != "-" else { return false }
        var sawHelp = false
        for scalar in scalars.dropFirst() {
            guard let option = options["-" + String(scalar)], !option.takesValue else { return false }
            if scalar == "h" { sawHelp = true }
        }
        return sawHelp
    }
}

/// An argument of the command line, as raw bytes.
func rawCommandLine() -> [[UInt8]] {
    var words: [[UInt8]] = []
    let argv = CommandLine.unsafeArgv
    for index in 1..<max(Int(CommandLine.argc), 1) {
        guard let pointer = argv[index] else { continue }
        words.append(
            Array(
                UnsafeBufferPointer(
                    start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))))
    }
    return words
}

/// `bytes` shown as text, each byte that is not part of valid UTF-8 (and each control) as \xNN;
/// a long argument only around its first such byte, with "…" for what is left out.
func escapedForMessage(_ bytes: [UInt8]) -> String {
    var pieces: [(text: String, valid: Bool)] = []
    var index = 0
    while index < bytes.count {
        // The shortest valid UTF-8 sequence starting here (1 to 4 bytes), else one bad byte.
        var scalar: Unicode.Scalar?
        var length = 1
        for candidate in 1...4 where index + candidate <= bytes.count {
            if let piece = String(validating: bytes[index..<(index + candidate)], as: UTF8.self),
                piece.unicodeScalars.count == 1, let only = piece.unicodeScalars.first
            {
                scalar = only
                length = candidate
                break
            }
        }
        if let scalar {
            let shown =
                scalar.value < 0x20 || scalar.value == 0x7F ? String(format: "\\x%02X", scalar.value) : String(scalar)
            pieces.append((shown, true))
        } else {
            pieces.append((String(format: "\\x%02X", bytes[index]), false))
        }
        index += length
    }
    let around = 40
    guard pieces.count > 2 * around + 1, let bad = pieces.firstIndex(where: { !$0.valid }) else {
        return pieces.map(\.text).joined()
    }
    let from = max(0, bad - around)
    let to = min(pieces.count, bad + around + 1)
    return (from > 0 ? "…" : "") + pieces[from..<to].map(\.text).joined() + (to < pieces.count ? "…" : "")
}

/// The options of the command line that take a value, with their values, in the order they were
/// given (filled by ``preparedArguments(_:)``). ArgumentParser collects each option's values apart
/// and so loses how different options interleave, which `buri query`'s --where, --or and --not,
/// applied left to right, depend on.
enum GivenOptions {
    nonisolated(unsafe) static var inOrder: [(name: String, value: String)] = []
}

/// The arguments to hand ArgumentParser: `raw` (argv without the program), checked and made
/// unambiguous as described at the top of this file. Records the options with values in
/// ``GivenOptions``.
func preparedArguments(_ raw: [[UInt8]]) throws -> [String] {
    GivenOptions.inOrder = []
    guard let first = raw.first, let name = String(validating: first, as: UTF8.self),
        let command = BuriCommand.configuration.subcommands.first(where: { $0._commandName == name }),
        let shape = CommandShape.of(command)
    else {
        // No subcommand (`buri --help`, `buri help get`, a misspelled command): only checked.
        for (index, word) in raw.enumerated() where String(validating: word, as: UTF8.self) == nil {
            throw ToolError(.usage, notUTF8Message("argument \(index + 1)", word, command: nil))
        }
        return raw.map { String(decoding: $0, as: UTF8.self) }
    }
    var result = [name]
    var afterTerminator = false
    var positional = 0
    /// The option waiting for its value in the next word.
    var pending: (name: String, option: CommandShape.Option)?

    func role(ofPositional index: Int) -> String {
        let valueName: String
        if index < shape.positionals.count {
            valueName = shape.positionals[index]
        } else if let last = shape.positionals.last, shape.lastRepeats {
            valueName = last
        } else if let unrecognized = shape.unrecognized {
            valueName = unrecognized
        } else {
            return "argument \(index + 1) after '\(name)'"
        }
        return describe(valueName)
    }
    func checked(_ word: [UInt8], as role: String, valueName: String?) throws -> String {
        if let text = String(validating: word, as: UTF8.self) { return text }
        // The object `buri put` stores is refused like the same bytes in --file (invalid input);
        // any other argument is a bad argument.
        let status: ExitStatus = valueName == "json" ? .invalidInput : .usage
        throw ToolError(status, notUTF8Message(role, word, command: name))
    }
    /// Whether a word here would fill a positional argument other than the database path.
    func valueSlotOpen() -> Bool {
        positional >= 1 && (positional < shape.positionals.count || shape.lastRepeats || shape.unrecognized != nil)
    }

    for word in raw.dropFirst() {
        // An option whose value this word is not (it looks like an option): ArgumentParser
        // reports the missing value, and a help request here is refused below.
        var awaiting: String?
        if let (optionName, option) = pending {
            pending = nil
            awaiting = optionName
            // As ArgumentParser tells (by Characters: "-" and a combining mark are not a dash).
            let shown = String(decoding: word, as: UTF8.self)
            let looksLikeOption = shown.hasPrefix("-") && shown.count > 1
            if option.unconditional || !looksLikeOption {
                let value = try checked(word, as: "the value of \(optionName)", valueName: option.valueName)
                GivenOptions.inOrder.append((optionName, value))
                result.append(value)
                continue
            }
        }
        if afterTerminator {
            let role = role(ofPositional: positional)
            result.append(try checked(word, as: role, valueName: positionalValueName(positional, shape)))
            positional += 1
            continue
        }
        guard let text = String(validating: word, as: UTF8.self) else {
            // Not UTF-8: named by where it stands.
            if word.first == UInt8(ascii: "-"), let equals = word.firstIndex(of: UInt8(ascii: "=")),
                let optionName = String(validating: word[..<equals], as: UTF8.self), shape.options[optionName] != nil
            {
                throw ToolError(
                    shape.options[optionName]?.valueName == "json" ? .invalidInput : .usage,
                    notUTF8Message("the value of \(optionName)", Array(word[(equals + 1)...]), command: name))
            }
            let dashed = word.first == UInt8(ascii: "-") && word.count > 1
            let where_ = dashed && shape.unrecognized == nil ? "an option" : role(ofPositional: positional)
            throw ToolError(
                positionalValueName(positional, shape) == "json" ? .invalidInput : .usage,
                notUTF8Message(where_, word, command: name))
        }
        if text == "--" {
            afterTerminator = true
            result.append(text)
            continue
        }
        // `--option=VALUE` (or `-o=VALUE`): split at the first "=" scalar, not Character, since
        // "=" and a following combining mark are one Character.
        if text.hasPrefix("-"), let equals = text.unicodeScalars.firstIndex(of: "="),
            case let optionName = String(text.unicodeScalars[..<equals]), let option = shape.options[optionName]
        {
            let value = String(text.unicodeScalars[text.unicodeScalars.index(after: equals)...])
            guard option.takesValue else {
                throw ToolError(
                    .usage,
                    "\(optionName) is a flag and takes no value, but '\(text)' gives it '\(value)'; write \(optionName) alone (see 'buri \(name) --help')"
                )
            }
            // ArgumentParser takes an empty value for none (and the next word for the value), and
            // misses a "=" merged with a combining mark: such a value is passed apart, as itself.
            GivenOptions.inOrder.append((optionName, value))
            let parserSplitsHere = text.firstIndex(of: "=").map { String(text[..<$0]) == optionName } ?? false
            if value.isEmpty || !parserSplitsHere {
                result.append(optionName)
                result.append(value)
            } else {
                result.append(text)
            }
            continue
        }
        // -h (help) and --version (which every command takes) end the command at once, printing
        // and exiting 0: where a value goes, they are refused rather than taken for that.
        if shape.asksForHelp(text) || text == "--version" {
            let request = text == "--version" ? "the version" : "help"
            if let optionName = awaiting {
                throw ToolError(
                    .usage,
                    "'\(text)' follows \(optionName), which needs a value, so it is taken neither for \(request) nor as the value; nothing was done. "
                        + "For help run `buri \(name) --help`; to give '\(text)' as its value write \(optionName)=\(text)"
                )
            }
            if valueSlotOpen() {
                let role = role(ofPositional: positional)
                throw ToolError(
                    .usage,
                    "'\(text)' stands where \(role) goes, so it is taken neither for \(request) nor as a value; nothing was done. "
                        + "For help run `buri \(name) --help`; to give '\(text)' as \(role) write it after '--': buri \(name) … -- \(text)"
                )
            }
        }
        if text.hasPrefix("--") {
            if let option = shape.options[text], option.takesValue { pending = (text, option) }
            result.append(text)
            continue
        }
        if text.count > 1, text.hasPrefix("-") {
            if let option = shape.options[text], option.takesValue { pending = (text, option) }
            // Other words starting with '-' are options, or keys of `get` and `delete`.
            result.append(text)
            continue
        }
        result.append(text)
        positional += 1
    }
    return result
}

private func positionalValueName(_ index: Int, _ shape: CommandShape) -> String? {
    if index < shape.positionals.count { return shape.positionals[index] }
    if shape.lastRepeats { return shape.positionals.last }
    return shape.unrecognized
}

/// "the bucket name" for "bucket": what a positional argument is, for messages.
private func describe(_ valueName: String) -> String {
    switch valueName {
    case "db": return "the database path (DB)"
    case "bucket": return "the bucket name"
    case "key": return "a key"
    case "json": return "the object (JSON)"
    case "index": return "the index name"
    case "file": return "the file name"
    default: return "the <\(valueName)> argument"
    }
}

private func notUTF8Message(_ role: String, _ bytes: [UInt8], command: String?) -> String {
    "\(role), '\(escapedForMessage(bytes))', is not valid UTF-8 (the bytes shown as \\xNN are not); "
        + "buri takes names, keys, values, paths and JSON only as UTF-8 text and never replaces bytes it cannot read; "
        + "nothing was read or changed: give the argument as UTF-8"
        + (command == "put" ? " (or the object in a file with --file, which is checked the same way)" : "")
}
