import Buri
import Foundation
import Testing

/// Runs `command` (a shell command line) under `script`, so that its standard error is a
/// terminal; returns everything the terminal received.
func onTerminal(_ command: String, in sandbox: Sandbox) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-q", "-e", "-c", command, sandbox.path("typescript")]
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    let shown = try sandbox.read("typescript")
    #expect(process.terminationStatus == 0, "\(command): \(shown)")
    return shown
}

@Suite("buri import: progress with total, percentage, rate and ETA on a terminal; empty indexes are warned about")
struct ImportProgressToolTests {
    @Test func progressOnATerminalShowsTotalPercentRateAndETA() throws {
        let sandbox = try Sandbox()
        let people = (0..<30000).map { i in
            Person(objectId: String(format: "q%06d", i), name: "n", locale: "EN", age: i % 90)
        }
        let input = try sandbox.write("people.jsonl", peopleJSONLines(people))
        let binary = try BuriBinary.located().path
        let db = sandbox.path("p.buri")
        let shown = try onTerminal(
            "'\(binary)' import '\(db)' Person --key objectId --numeric-index age '\(input)' && '\(binary)' export '\(db)' -o '\(sandbox.path("out.jsonl"))'",
            in: sandbox)
        let total = String(
            format: "%.1f MiB", Double(try Data(contentsOf: URL(fileURLWithPath: input)).count) / 1_048_576)
        #expect(
            shown.contains("checking: ") && shown.contains("reading and storing: ") && shown.contains("of \(total) ("),
            "\(shown)")
        #expect(shown.contains("%), 1000 lines,") || shown.contains(" lines, "), "\(shown)")
        #expect(shown.contains("/s, ETA "), "\(shown)")
        #expect(shown.contains("publishing: 30000 of 30000 objects (100%)"), "\(shown)")
        #expect(shown.contains("exporting 'Person': 1000 of 30000 objects (3%)"), "\(shown)")
        #expect(shown.contains("imported 30000 objects"))
        // Without a terminal nothing but the result is printed.
        let quiet = try buri("import", sandbox.path("q.buri"), "Person", "--key", "objectId", input)
        expectSuccess(quiet)
    }

    @Test func anIndexWhoseFieldNoLineHasIsWarnedAbout() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("w.buri")
        let run = try buri(
            "import", db, "Person", "--key", "objectId", "--numeric-index", "age", "--binary-index", "city=adress.city",
            stdin: peopleJSONLines(fixturePeople))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "imported 40 objects into bucket 'Person' of \(db)\n")
        #expect(
            run.stderr
                == "buri: warning: index 'city' has no entries: none of the 40 objects has a value in field 'adress.city' (a name is a top-level field, a dotted path such as address.city a nested one; check the name)\n"
        )
        // An index some objects fill is not warned about.
        let partly = try buri(
            "import", sandbox.path("x.buri"), "P", "--key", "id", "--binary-index", "tag",
            stdin: #"{"id":"a","tag":"x"}"# + "\n" + #"{"id":"b"}"# + "\n")
        expectSuccess(partly)
    }
}
