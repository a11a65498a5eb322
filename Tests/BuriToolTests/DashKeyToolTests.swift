import Foundation
import Testing

@Suite("keys starting with '-': as they are when they start with one, after '--' when with two")
struct DashKeyToolTests {
    static func database(_ sandbox: Sandbox) throws -> String {
        let db = sandbox.path("d.buri")
        let lines =
            ["-weird", "--double", "-0", "--", "plain"].map { #"{"id":"\#($0)","n":1}"# }.joined(separator: "\n") + "\n"
        expectSuccess(try buri("import", db, "K", "--key", "id", stdin: lines))
        return db
    }

    @Test func getTakesASingleDashKeyAsItIsAndADoubleDashOneAfterTheTerminator() throws {
        let sandbox = try Sandbox()
        let db = try Self.database(sandbox)
        let weird = try buri("get", db, "K", "-weird", "--json")
        expectSuccess(weird)
        #expect(weird.stdout == #"{"bucket":"K","key":"-weird","object":{"id":"-weird","n":1}}"# + "\n")
        // Options before or after the key, and the terminator, all work.
        #expect(try buri("get", db, "K", "--json", "-weird").stdout == weird.stdout)
        #expect(try buri("get", db, "K", "--json", "--", "-weird").stdout == weird.stdout)
        #expect(try buri("get", db, "K", "--json", "--", "--double").stdout.contains(#""key":"--double""#))
        #expect(try buri("get", db, "K", "--json", "--", "--").stdout.contains(#""key":"--","object""#))
        #expect(try buri("get", db, "K", "--", "-0").stdout.contains(#""id": "-0""#))
        // Without the terminator a word starting with '--' is a mistyped option, and the error says so.
        expectFailure(
            try buri("get", db, "K", "--double"), status: 2,
            mentioning: [
                "'--double' is not an option of buri get", "goes after '--'", "buri get DB BUCKET -- --double",
            ])
        expectFailure(try buri("get", db, "K", "plain", "--jsno"), status: 2, mentioning: ["'--jsno' is not an option"])
        expectFailure(try buri("get", db, "K", "plain", "-weird"), status: 2, mentioning: ["give one key, not 2"])
        expectFailure(try buri("get", db, "K"), status: 2, mentioning: ["give the key"])
        // A single-dash key that is not there is not found, as any key.
        expectFailure(try buri("get", db, "K", "-nothere"), status: 6, mentioning: ["no object with key '-nothere'"])
    }

    @Test func deleteTakesSingleDashKeysAndNeverAMistypedOption() throws {
        let sandbox = try Sandbox()
        let db = try Self.database(sandbox)
        // A mistyped option deletes nothing.
        expectFailure(
            try buri("delete", db, "K", "-weird", "--stdn"), status: 2,
            mentioning: ["'--stdn' is not an option of buri delete", "buri delete DB BUCKET -- --stdn"])
        #expect(try buri("keys", db, "K").lines.count == 5)
        let run = try buri("delete", db, "K", "-weird", "--", "--double", "-0")
        expectSuccess(run)
        #expect(run.stdout == "deleted 3 objects from bucket 'K'\n")
        #expect(try buri("keys", db, "K").lines == ["--", "plain"])
        // -0 before the terminator is the flag, which needs --stdin.
        expectFailure(try buri("delete", db, "K", "-0"), status: 2, mentioning: ["-0", "--stdin"])
    }
}
