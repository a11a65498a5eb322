import Buri
import Foundation
import Testing

/// Runs `script` with /bin/sh, in which `$BURI` is the buri binary: the one way to hand buri
/// arguments that are not UTF-8 (Foundation's Process takes Swift strings), made with printf.
private func shell(_ script: String, stdin: String? = nil) throws -> ToolRun {
    let binary = try BuriBinary.located().path
    return try buri(["-c", "BURI='\(binary)'; " + script], stdin: stdin, executable: "/bin/sh")
}

/// The commands, options and flags buri has, as ArgumentParser describes them.
private struct Described {
    var command: String
    var options: [String]  // value-taking, as typed: "--from", "-o"
    var flags: [String]  // "--json", "-0"
}

private func describedCommands() throws -> [Described] {
    let root = try buri("--experimental-dump-help")
    let names = try #require(
        ((try JSONSerialization.jsonObject(with: Data(root.stdout.utf8)) as? [String: Any])?["command"]
            as? [String: Any])?["subcommands"] as? [[String: Any]]
    )
    .compactMap { $0["commandName"] as? String }.filter { $0 != "help" }
    return try names.map { name in
        let dump = try buri(name, "--experimental-dump-help")
        let command = try #require(
            (try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])?["command"]
                as? [String: Any])
        var described = Described(command: name, options: [], flags: [])
        for argument in command["arguments"] as? [[String: Any]] ?? [] {
            let kind = argument["kind"] as? String
            for entry in argument["names"] as? [[String: Any]] ?? [] {
                guard let text = entry["name"] as? String else { continue }
                let typed = (entry["kind"] as? String == "long" ? "--" : "-") + text
                if kind == "option" { described.options.append(typed) }
                if kind == "flag", !["--help", "-h", "--version"].contains(typed) { described.flags.append(typed) }
            }
        }
        return described
    }
}

@Suite("buri reads its command line exactly: UTF-8 only, --opt= is an empty value, a key is never help")
struct ArgumentToolTests {
    /// Every command's description reads as prose: a line continuation in a help string that kept
    /// the next line's indentation put a run of spaces in the middle of a sentence (`buri query`,
    /// `restore` and `rekey` had one).
    @Test func helpTextsHaveNoRunsOfSpacesInsideSentences() throws {
        for command in [""] + (try describedCommands()).map(\.command) {
            let help = try buri((command.isEmpty ? [] : [command]) + ["--help"])
            #expect(help.status == 0, "buri \(command) --help")
            let description = help.stdout.components(separatedBy: "\nUSAGE:")[0]
            for line in description.split(separator: "\n") {
                // An example's comment, aligned after it, is the one place for a run of spaces.
                #expect(line.firstRange(of: /\S {3,}[^\s#]/) == nil, "buri \(command) --help: \(line)")
            }
        }
    }

    // MARK: Issue 22 item 12: doubles written in full

    /// A number written with every digit of a double's exact value is that double, in stored
    /// objects and in query values; an integer beyond 64 bits that is exactly a double is a query
    /// value too (an index holds it as that double). Only inexact numbers are refused.
    @Test func doublesWrittenInFullAreStoredAndQueriedExactly() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("x.buri")
        let lines = [
            #"{"id":"a","x":4611686018427387904.0}"#, #"{"id":"b","x":-18446744073709551616.0}"#,
            #"{"id":"c","x":36893488147419103232.000}"#,
            #"{"id":"d","x":0.1000000000000000055511151231257827021181583404541015625}"#,
        ]
        let imported = try buri(
            "import", db, "N", "--key", "id", "--numeric-index", "x", stdin: lines.joined(separator: "\n") + "\n")
        expectSuccess(imported)
        expectSuccess(try buri("put", db, "N", #"{"id":"e","x":4.611686018427387904e18}"#))
        #expect(try buri("query", db, "N", "x", "--equals", "4611686018427387904.0").lines == ["a", "e"])
        #expect(try buri("query", db, "N", "x", "--equals", "4611686018427387904").lines == ["a", "e"])
        #expect(try buri("query", db, "N", "x", "--equals", "-18446744073709551616.0").lines == ["b"])
        #expect(try buri("query", db, "N", "x", "--equals", "36893488147419103232").lines == ["c"])
        #expect(try buri("query", db, "N", "x", "--equals", "3.6893488147419103232e19").lines == ["c"])
        #expect(try buri("query", db, "N", "x", "--equals", "0.1").lines == ["d"])
        expectFailure(
            try buri("query", db, "N", "x", "--equals", "36893488147419103233"), status: 2,
            mentioning: ["neither an Int64, a UInt64 nor exactly a double", "nearest double is 3.6893488147419103e+19"])
        expectFailure(
            try buri("put", db, "N", #"{"id":"f","x":4611686018427387905.0}"#), status: 7,
            mentioning: ["more precision than a double holds"])
        expectFailure(
            try buri("query", db, "N", "x", "--from", "4611686018427387904.5"), status: 2,
            mentioning: ["more precision than a double holds"])
    }

    // MARK: Issue 22 item 13: invalid UTF-8 in arguments

    /// Every argument that is not UTF-8 is refused, naming it, and nothing is written: before, the
    /// bytes were replaced with U+FFFD and the object stored, the bucket looked up, the database
    /// created under another name.
    @Test func argumentsThatAreNotUTF8AreRefusedNamingThem() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let before = try buri("export", db).stdout
        let file = try sandbox.write("one.jsonl", #"{"objectId":"x1","name":"N","locale":"EN","age":3}"# + "\n")
        let cases: [(script: String, status: Int32, names: String)] = [
            (
                #""$BURI" put '\#(db)' Person "$(printf '{"objectId":"p\377","name":"N","locale":"EN","age":1}')""#, 7,
                "the object (JSON), '{\"objectId\":\"p\\xFF\""
            ),
            (#""$BURI" keys '\#(db)' "$(printf 'Pers\303on')""#, 2, "the bucket name, 'Pers\\xC3on'"),
            (#""$BURI" get '\#(db)' Person "$(printf 'p0\2011')""#, 2, "a key, 'p0\\x811'"),
            (#""$BURI" delete '\#(db)' Person p01 "$(printf 'p\37702')""#, 2, "a key, 'p\\xFF02'"),
            (#""$BURI" delete '\#(db)' Person -- "$(printf -- '-p\377')""#, 2, "a key, '-p\\xFF'"),
            (
                #""$BURI" query '\#(db)' Person locale --equals "$(printf 'E\377')""#, 2,
                "the value of --equals, 'E\\xFF'"
            ),
            (
                #""$BURI" query '\#(db)' Person locale "--equals=$(printf 'E\377')""#, 2,
                "the value of --equals, 'E\\xFF'"
            ),
            (#""$BURI" query '\#(db)' Person age --from "$(printf '1\377')""#, 2, "the value of --from"),
            (#""$BURI" query '\#(db)' Person "$(printf 'ag\351')" --equals 3"#, 2, "the index name, 'ag\\xE9'"),
            (#""$BURI" keys '\#(db)' Person --prefix "$(printf 'p\377')""#, 2, "the value of --prefix"),
            (
                #""$BURI" import '\#(db)' Person --key "$(printf 'object\377Id')" '\#(file)'"#, 2,
                "the value of --key, 'object\\xFFId'"
            ),
            (
                #""$BURI" import '\#(db)' Fresh --key objectId --binary-index "$(printf 'l=loc\377')" '\#(file)'"#, 2,
                "the value of --binary-index"
            ),
            (#""$BURI" put '\#(db)' Person --date "$(printf 'd\377')" '{"objectId":"d"}'"#, 2, "the value of --date"),
            (
                #""$BURI" import "$(printf '\#(sandbox.path("new"))\377.buri')" Person --key objectId '\#(file)'"#, 2,
                "the database path (DB)"
            ),
            (
                #""$BURI" import '\#(db)' Person --key objectId "$(printf '\#(sandbox.path("one"))\377.jsonl')""#, 2,
                "the file name"
            ),
            (#""$BURI" export '\#(db)' -o "$(printf '\#(sandbox.path("out"))\377')""#, 2, "the value of -o"),
        ]
        for (script, status, names) in cases {
            let run = try shell(script)
            expectFailure(
                run, status: status, mentioning: [names, "is not valid UTF-8", "nothing was read or changed"])
            #expect(!run.stderr.contains("\u{FFFD}"), "\(run)")
        }
        // A long argument is shown around its first bad byte, not whole.
        let long = try shell(
            #""$BURI" put '\#(db)' Person "$(printf '{"objectId":"'; head -c 50000 /dev/zero | tr '\0' a; printf '\377"}')""#
        )
        expectFailure(long, status: 7, mentioning: ["the object (JSON), '…aaaa", "aaaa\\xFF\"}', is not valid UTF-8"])
        #expect(long.stderr.utf8.count < 600, "\(long.stderr.prefix(300))")
        #expect(try buri("export", db).stdout == before, "an argument that is not UTF-8 changed the database")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: sandbox.url.path).sorted() == [
                "fixture.buri", "one.jsonl",
            ])
        // The same arguments as UTF-8 work.
        expectSuccess(try shell(#""$BURI" query '\#(db)' Person locale --equals "$(printf 'E')N" --count"#))
    }

    // MARK: Issue 22 item 14: a key that looks like an option

    /// `-h` where a key, a value or a name is expected printed the help and exited 0 — `delete`
    /// deleted nothing and said nothing. It is refused there now, and after `--` it is a key.
    @Test func aHelpFlagWhereAKeyOrValueGoesIsAnErrorAndAKeyAfterTheTerminator() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("d.buri")
        let lines = ["-h", "-0h", "a", "b"].map { #"{"id":"\#($0)","s":"\#($0)"}"# }.joined(separator: "\n") + "\n"
        expectSuccess(try buri("import", db, "K", "--key", "id", "--binary-index", "s", stdin: lines))
        let cases: [([String], String)] = [
            (["delete", db, "K", "-h"], "stands where a key goes"),
            (["delete", db, "K", "a", "-h"], "stands where a key goes"),
            (["delete", db, "K", "--stdin", "-0h"], "stands where a key goes"),
            (["delete", db, "K", "-0h"], "stands where a key goes"),
            (["get", db, "K", "-h"], "stands where a key goes"),
            (["get", db, "K", "--json", "-h"], "stands where a key goes"),
            (["get", db, "-h", "a"], "stands where the bucket name goes"),
            (["keys", db, "-h"], "stands where the bucket name goes"),
            (["query", db, "K", "-h", "--equals", "a"], "stands where the index name goes"),
            (["put", db, "K", "-h"], "stands where the object (JSON) goes"),
            (["put", db, "K", "--key", "-h", "{}"], "follows --key, which needs a value"),
            (["export", db, "-o", "-h"], "follows -o, which needs a value"),
            (["delete", db, "K", "--version"], "stands where a key goes"),
            (["get", db, "K", "--version"], "stands where a key goes"),
        ]
        for (arguments, fragment) in cases {
            let run = try buri(arguments)
            expectFailure(
                run, status: 2,
                mentioning: [
                    fragment, "taken neither for \(arguments.contains("--version") ? "the version" : "help") nor as",
                    "nothing was done", "--help",
                ])
            #expect(run.stdout.isEmpty, "\(run)")
        }
        #expect(try buri("keys", db, "K").lines == ["-0h", "-h", "a", "b"], "a refused -h deleted something")
        // After '--' it is a key like any other.
        #expect(try buri("get", db, "K", "--json", "--", "-h").stdout.contains(#""key":"-h""#))
        let deleted = try buri("delete", db, "K", "--", "-h", "-0h")
        expectSuccess(deleted)
        #expect(deleted.stdout == "deleted 2 objects from bucket 'K'\n")
        #expect(try buri("keys", db, "K").lines == ["a", "b"])
        for arguments in [["--version"], ["get", "--version"], ["info", db, "--version"]] {
            let version = try buri(arguments)
            expectSuccess(version)
            #expect(version.stdout.hasPrefix("buri for Buri format"), "\(arguments): \(version)")
        }
        // Help is still help where no value is expected, and --help everywhere.
        for arguments in [
            ["get", "-h"], ["delete", "-h"], ["info", db, "-h"], ["delete", db, "K", "a", "--help"],
            ["query", "--help"],
        ] {
            let help = try buri(arguments)
            expectSuccess(help)
            #expect(help.stdout.hasPrefix("OVERVIEW: "), "\(arguments): \(help)")
        }
        // An option value that is -h, attached, is the value.
        expectFailure(
            try buri("put", db, "K", "--key=-h", #"{"id":"z"}"#), status: 2,
            mentioning: ["keeps its keys in field 'id'; pass --key id"])
    }

    // MARK: Issue 22 item 19: --opt= and combining marks

    /// `--opt=` gives the option an empty value, exactly as `--opt ""` does, for every option of
    /// every command: before, the empty value was taken for none and the next word became the
    /// value. And `--opt=VALUE` is `--opt VALUE` when VALUE starts with a combining mark, which
    /// Swift's String merges with the '=' into one Character.
    @Test func everyOptionTakesAnEmptyOrCombiningValueAfterEqualsAsItIs() throws {
        let sandbox = try Sandbox()
        let fixture = try makeFixture(sandbox)
        let file = try sandbox.write("in.jsonl", #"{"objectId":"q1","name":"N","locale":"EN","age":3}"# + "\n")
        let db = sandbox.path("work.buri")
        /// Arguments that make a complete call of each command (before the option under test).
        func base(_ command: String) -> [String] {
            switch command {
            case "keys", "drop": return [command, db, "Person"]
            case "get", "delete": return [command, db, "Person", "p01"]
            case "query": return [command, db, "Person", "locale"]
            case "import": return [command, db, "Person", file]
            case "restore": return [command, sandbox.path("restored.buri"), file]
            case "put": return [command, db, "Person", #"{"objectId":"q2","name":"N","locale":"EN","age":3}"#]
            default: return [command, db]
            }
        }
        try FileManager.default.copyItem(atPath: fixture, toPath: db)
        /// Runs a command that may write on a fresh copy of the fixture, so that every run starts
        /// from the same database.
        func run(_ arguments: [String]) throws -> ToolRun {
            if !["info", "buckets", "keys", "get", "query", "search", "export", "stats"].contains(arguments[0]) {
                try? FileManager.default.removeItem(atPath: db)
                try? FileManager.default.removeItem(atPath: sandbox.path("restored.buri"))
                try FileManager.default.copyItem(atPath: fixture, toPath: db)
            }
            return try buri(arguments)
        }
        let described = try describedCommands()
        #expect(
            described.count >= 15 && described.contains { $0.options.contains("--equals") && $0.flags.contains("-0") })
        var checked = 0
        for command in described {
            for option in command.options {
                // An empty value is the value: the next word stays a word of its own.
                let attached = try run(base(command.command) + ["\(option)=", "NEXT"])
                let apart = try run(base(command.command) + [option, "", "NEXT"])
                #expect(
                    attached.status == apart.status && attached.stderr == apart.stderr,
                    "buri \(command.command) \(option)= NEXT took NEXT for its value:\n\(attached)\nvs \(option) '' NEXT:\n\(apart)"
                )
                #expect(attached.status != 0, "\(command.command) \(option)=: \(attached)")
                // A value starting with a combining mark (U+0301) after '=' is the value.
                let combining = try run(base(command.command) + ["\(option)=\u{301}v"])
                let spaced = try run(base(command.command) + [option, "\u{301}v"])
                #expect(
                    combining.status == spaced.status && combining.stderr == spaced.stderr
                        && !combining.stderr.contains("Unknown option"),
                    "buri \(command.command) \(option)=\u{301}v:\n\(combining)\nvs \(option) \u{301}v:\n\(spaced)")
                checked += 1
            }
            // A flag takes no value, not even an empty one.
            for flag in command.flags where flag.hasPrefix("--") {
                expectFailure(
                    try run(base(command.command) + ["\(flag)="]), status: 2,
                    mentioning: ["\(flag) is a flag and takes no value"])
            }
        }
        #expect(checked >= 25, "\(checked) options checked")
        // What the values mean: an empty --equals matches the empty string; an empty --prefix all keys.
        let lines =
            ["", "\u{301}x", "x"].enumerated().map { #"{"id":"k\#($0.offset)","s":"\#($0.element)"}"# }.joined(
                separator: "\n") + "\n"
        let small = sandbox.path("s.buri")
        expectSuccess(try buri("import", small, "K", "--key", "id", "--binary-index", "s", stdin: lines))
        #expect(try buri("query", small, "K", "s", "--equals=").stdout == "k0\n")
        #expect(try buri("query", small, "K", "s", "--equals=\u{301}x").stdout == "k1\n")
        #expect(try buri("query", small, "K", "s", "--prefix=\u{301}").stdout == "k1\n")
        #expect(try buri("query", small, "K", "s", "--from=", "--count").stdout == "3\n")
        #expect(try buri("keys", small, "K", "--prefix=").lines == ["k0", "k1", "k2"])
        expectFailure(try buri("query", small, "K", "s", "--equals=", "x"), status: 2, mentioning: ["'x'"])
        // Options whose value starts with '-' attached still work as before.
        expectFailure(try buri("keys", small, "K", "--limit=-1"), status: 2, mentioning: ["--limit must be 0 or more"])
        // A negative number as the next argument is the option's value too, so the message says
        // what is wrong with it (not "Missing value").
        for (arguments, message) in [
            (["keys", small, "K", "--limit", "-1"], "--limit must be 0 or more, not -1"),
            (["query", small, "K", "s", "--equals", "x", "--limit", "-2"], "--limit must be 0 or more, not -2"),
            (["query", small, "K", "s", "--equals", "x", "--offset", "-3"], "--offset must be 0 or more, not -3"),
            (
                ["query", small, "K", "s", "--equals", "x", "--page-size", "-4"],
                "--page-size must be 1 or more, not -4"
            ),
            (["search", small, "K", "s", "x", "--limit", "-5"], "--limit must be 0 or more, not -5"),
            (["import", small, "K", "--key", "id", "--chunk-size", "-6"], "--chunk-size needs a positive number"),
        ] {
            expectFailure(try buri(arguments, stdin: lines), status: 2, mentioning: [message])
        }
    }

    // MARK: Issue 21 item 6: keys a list form cannot delimit

    /// A key holding a NUL byte cannot be listed with -0, nor one holding a line break (or ending
    /// with a carriage return) one per line: the list stops with exit 2 naming the bucket and the
    /// key, so that `keys … -0 | delete --stdin -0` never deletes `a` and `b` for "a\0b".
    @Test func keysThatCannotBeDelimitedStopTheListAndAreNeverReadAsOtherKeys() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("n.buri")
        let lines =
            [#"a"#, #"b"#, #"c"#, #"a\u0000b"#, #"a\nb"#, #"c\r"#, #"d\re"#].map { #"{"id":"\#($0)","s":"x"}"# }.joined(
                separator: "\n") + "\n"
        expectSuccess(try buri("import", db, "K", "--key", "id", "--binary-index", "s", stdin: lines))
        let all = ["a", "a\u{0}b", "a\nb", "b", "c", "c\r", "d\re"]
        let listed = try buri("keys", db, "K", "--json")
        expectSuccess(listed)
        #expect(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String] == all)
        let nul = try buri("keys", db, "K", "-0")
        expectFailure(nul, status: 2, mentioning: ["bucket 'K'", #"the key "a\u0000b" holds a NUL byte"#, "--json"])
        #expect(!nul.stdout.contains("b"), "\(nul)")
        expectFailure(
            try buri("keys", db, "K"), status: 2,
            mentioning: ["bucket 'K'", #"the key "a\nb" holds a line break"#, "-0"])
        expectFailure(
            try buri("keys", db, "K", "--from", "b"), status: 2,
            mentioning: [#"the key "c\r" ends with a carriage return"#])
        expectSuccess(try buri("keys", db, "K", "--from", "d"))
        expectFailure(
            try buri("query", db, "K", "s", "--equals", "x", "-0"), status: 2,
            mentioning: ["bucket 'K', index 's'", "holds a NUL byte"])
        expectFailure(
            try buri("query", db, "K", "s", "--equals", "x", "-0", "--page-size", "3"), status: 2,
            mentioning: ["holds a NUL byte"])
        expectFailure(
            try buri("query", db, "K", "s", "--equals", "x", "--reverse"), status: 2,
            mentioning: [#"the key "c\r" ends with a carriage return"#])
        // The pipeline of the issue deletes nothing it was not given: never 'a' and 'b' for "a\0b".
        let pipeline = try shell(#""$BURI" keys '\#(db)' K --above a -0 | "$BURI" delete '\#(db)' K --stdin -0"#)
        #expect(pipeline.stdout == "deleted 0 objects from bucket 'K'\n", "\(pipeline)")
        let left =
            try JSONSerialization.jsonObject(with: Data(try buri("keys", db, "K", "--json").stdout.utf8)) as? [String]
        #expect(
            left?.contains("a") == true && left?.contains("b") == true && left?.contains("a\u{0}b") == true,
            "\(String(describing: left))")
        // Bucket names alike: one per line unless it holds a line break; -0 and --json list any.
        let names = sandbox.path("names.buri")
        expectSuccess(try buri("import", names, "A", "--key", "id", stdin: #"{"id":"1"}"# + "\n"))
        expectSuccess(try buri("import", names, "A\nB", "--key", "id", stdin: #"{"id":"1"}"# + "\n"))
        expectFailure(
            try buri("buckets", names), status: 2, mentioning: [#"the bucket name "A\nB" holds a line break"#])
        #expect(try buri("buckets", names, "-0").stdout == "A\u{0}A\nB\u{0}")
        #expect(try buri("buckets", names, "--json").stdout == #"["A","A\nB"]"# + "\n")
    }

    // MARK: Issue 22 item 18: JSON lists stopped by an error

    /// `keys --json` on damaged data printed an unterminated array (or nothing). A JSON list that
    /// an error stops now ends with an {"error": …} element: still JSON, never a list of keys to be
    /// taken for complete; the exit status and the message on stderr are as before.
    @Test func aJSONListStoppedByAnErrorEndsWithAnErrorElement() throws {
        let sandbox = try Sandbox()
        let (db, _) = try DamageToolTests.damagedTable(sandbox)
        let keys = try buri("keys", db, "Person", "--json")
        expectFailure(keys, status: 3, mentioning: ["damaged", "bucket 'Person'"])
        let array = try #require(
            try JSONSerialization.jsonObject(with: Data(keys.stdout.utf8)) as? [Any],
            "not JSON: \(keys.stdout.suffix(200))")
        let last = try #require(array.last as? [String: String], "\(array.suffix(2))")
        #expect(
            last["error"]?.contains("bucket 'Person'") == true && last["error"]?.contains("damaged") == true, "\(last)")
        #expect(array.dropLast().allSatisfy { $0 is String })
        // A query's keys come from index entries: damage one of their blocks (found from the end of
        // the table, where the entries follow the records), then list them as JSON, whole and paged.
        let indexed = sandbox.path("q.buri")
        let people = (0..<1000).map {
            #"{"id":"p\#(String(format: "%04d", $0))","name":"name \#($0) lorem ipsum dolor","age":\#($0 % 90)}"#
        }
        expectSuccess(
            try buri(
                "import", indexed, "P", "--key", "id", "--numeric-index", "age",
                stdin: people.joined(separator: "\n") + "\n"))
        _ = try buri("compact", indexed)
        let table =
            indexed + "/"
            + (try #require(try FileManager.default.contentsOfDirectory(atPath: indexed).first { $0.hasSuffix(".ldb") }))
        let intact = try Data(contentsOf: URL(fileURLWithPath: table))
        var hit = false
        for back in stride(from: 3000, to: intact.count / 2, by: 1000) where !hit {
            var bytes = [UInt8](intact)
            for i in (bytes.count - back)..<(bytes.count - back + 8) { bytes[i] = 0xFF }
            try Data(bytes).write(to: URL(fileURLWithPath: table))
            hit = try buri("query", indexed, "P", "age", "--from", "0", "--count").status == 3
        }
        try #require(hit, "no damage reached the index entries")
        let query = try buri("query", indexed, "P", "age", "--from", "0", "--json")
        expectFailure(query, status: 3, mentioning: ["damaged", "bucket 'P'"])
        let queried = try #require(
            try JSONSerialization.jsonObject(with: Data(query.stdout.utf8)) as? [Any],
            "not JSON: \(query.stdout.suffix(200))")
        #expect((queried.last as? [String: String])?["error"]?.contains("damaged") == true, "\(queried.suffix(2))")
        let page = try buri("query", indexed, "P", "age", "--from", "0", "--json", "--page-size", "2000")
        expectFailure(page, status: 3, mentioning: ["damaged", "bucket 'P'"])
        let paged = try #require(
            try JSONSerialization.jsonObject(with: Data(page.stdout.utf8)) as? [String: Any],
            "not JSON: \(page.stdout.suffix(200))")
        #expect(
            paged["next"] == nil
                && ((paged["keys"] as? [Any])?.last as? [String: String])?["error"]?.contains("damaged") == true,
            "\(page.stdout.suffix(300))")
        // Lines and -0 get no in-band marker: the exit status and stderr say the list is not whole.
        expectFailure(try buri("query", indexed, "P", "age", "--from", "0", "-0"), status: 3, mentioning: ["damaged"])
    }
}
