import Foundation
import Testing

@Suite("buri keys: key ranges in byte order, with --prefix, --reverse and --limit")
struct KeyRangeToolTests {
    /// Keys in byte order: "e\u{301}" (65 cc 81) sorts before "z", "é" (c3 a9) after it.
    static let keys = ["-x", "a", "a-", "ab", "b", "e\u{301}", "z", "\u{00e9}"]

    static func database(_ sandbox: Sandbox) throws -> String {
        let db = sandbox.path("k.buri")
        let lines = keys.reversed().map { #"{"id":"\#($0)"}"# }.joined(separator: "\n") + "\n"
        expectSuccess(try buri("import", db, "K", "--key", "id", stdin: lines))
        #expect(try buri("keys", db, "K").lines == keys)
        return db
    }

    @Test func inclusiveAndExclusiveBoundsAloneAndTogether() throws {
        let sandbox = try Sandbox()
        let db = try Self.database(sandbox)
        func keys(_ options: String...) throws -> [String] {
            let run = try buri(["keys", db, "K"] + options)
            expectSuccess(run)
            return run.lines
        }
        #expect(try keys("--from", "ab") == ["ab", "b", "e\u{301}", "z", "\u{00e9}"])
        #expect(try keys("--above", "ab") == ["b", "e\u{301}", "z", "\u{00e9}"])
        #expect(try keys("--to", "b") == ["-x", "a", "a-", "ab", "b"])
        #expect(try keys("--below", "b") == ["-x", "a", "a-", "ab"])
        #expect(try keys("--from", "a-", "--to", "b") == ["a-", "ab", "b"])
        #expect(try keys("--above", "a", "--below", "b") == ["a-", "ab"])
        // Bounds need not be keys; "é" is only itself, not its canonical equivalent.
        #expect(try keys("--from", "aa", "--below", "c") == ["ab", "b"])
        #expect(try keys("--from", "\u{00e9}") == ["\u{00e9}"])
        #expect(try keys("--above", "e\u{301}", "--below", "\u{00e9}") == ["z"])
        #expect(try keys("--from", "e\u{301}", "--to", "e\u{301}") == ["e\u{301}"])
        // Bounds starting with '-' are values, not options.
        #expect(try keys("--from", "-x", "--to", "-x") == ["-x"])
        // An empty range is empty, not an error.
        #expect(try keys("--from", "z", "--to", "b") == [])
        #expect(try keys("--above", "b", "--below", "b") == [])
    }

    @Test func rangesCombineWithPrefixReverseLimitAndOutputFormats() throws {
        let sandbox = try Sandbox()
        let db = try Self.database(sandbox)
        func keys(_ options: String...) throws -> [String] {
            let run = try buri(["keys", db, "K"] + options)
            expectSuccess(run)
            return run.lines
        }
        #expect(try keys("--prefix", "a", "--above", "a") == ["a-", "ab"])
        #expect(try keys("--prefix", "a", "--to", "a-") == ["a", "a-"])
        #expect(try keys("--prefix", "a", "--from", "b") == [])
        #expect(try keys("--from", "a-", "--to", "b", "--reverse") == ["b", "ab", "a-"])
        #expect(try keys("--above", "a", "--limit", "2") == ["a-", "ab"])
        #expect(try keys("--below", "z", "--reverse", "--limit", "2") == ["e\u{301}", "b"])
        let json = try buri("keys", db, "K", "--from", "b", "--below", "z", "--json")
        expectSuccess(json)
        #expect(json.stdout == "[\"b\",\"e\u{301}\"]\n")
        let nul = try buri("keys", db, "K", "--from", "b", "--below", "z", "-0")
        #expect(nul.stdout == "b\0e\u{301}\0")
    }

    @Test func conflictingBoundsAreUsageErrors() throws {
        let sandbox = try Sandbox()
        let db = try Self.database(sandbox)
        expectFailure(
            try buri("keys", db, "K", "--from", "a", "--above", "a"), status: 2, mentioning: ["--from", "--above"])
        expectFailure(
            try buri("keys", db, "K", "--to", "a", "--below", "a"), status: 2, mentioning: ["--to", "--below"])
    }
}
