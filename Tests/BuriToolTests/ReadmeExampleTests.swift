import Foundation
import Testing

// Runs every shell example of README.md — the Example column of the `buri` table and every ```sh
// block — with the built `buri` on PATH, on a copy of the database that the demo (`Scripts/demo`,
// i.e. the `buri-demo` binary) makes. The examples are read from README.md itself, so a new one is
// covered without touching this file.

/// The shell examples of the README.
struct ReadmeExamples {
    /// The Example column of the `buri` command table: one-line commands, `\|` unescaped.
    var tableExamples: [String] = []
    /// The ```sh blocks that use only `buri` and the shell, in order.
    var blocks: [String] = []
    /// The ```sh blocks that run the project's own scripts (build, test suite, etcd cluster).
    var scriptBlocks: [String] = []

    init(readme: String) {
        var inBlock = false
        var isShell = false
        var current: [String] = []
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                if inBlock {
                    if isShell {
                        let block = current.joined(separator: "\n") + "\n"
                        if current.contains(where: { $0.hasPrefix("Scripts/") }) {
                            scriptBlocks.append(block)
                        } else {
                            blocks.append(block)
                        }
                    }
                    inBlock = false
                } else {
                    inBlock = true
                    isShell = line.dropFirst(3).trimmingCharacters(in: .whitespaces) == "sh"
                    current = []
                }
                continue
            }
            if inBlock {
                current.append(line)
                continue
            }
            // A table row whose last cell is `buri …`.
            guard line.hasPrefix("|") else { continue }
            let cells = Self.cells(line)
            guard let last = cells.last, last.hasPrefix("`buri "), last.hasSuffix("`"), last.count > 2 else { continue }
            tableExamples.append(String(last.dropFirst().dropLast()))
        }
    }

    /// The cells of a Markdown table row; `\|` is a literal bar inside a cell.
    static func cells(_ row: String) -> [String] {
        var cells: [String] = []
        var cell = ""
        var characters = row.dropFirst()[...]
        while let character = characters.popFirst() {
            if character == "\\", characters.first == "|" {
                cell.append(characters.removeFirst())
            } else if character == "|" {
                cells.append(cell.trimmingCharacters(in: .whitespaces))
                cell = ""
            } else {
                cell.append(character)
            }
        }
        return cells
    }
}

enum Readme {
    static let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    static func examples() throws -> ReadmeExamples {
        ReadmeExamples(readme: try String(contentsOf: url, encoding: .utf8))
    }
}

/// Runs `script` with bash (errexit, pipefail) in `directory`, with the built products first on PATH.
func runShell(_ script: String, in directory: URL) throws -> ToolRun {
    let bin = try BuriBinary.located().deletingLastPathComponent().path
    let scratch = try Sandbox()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    // The failing command is named on stderr.
    process.arguments = [
        "-c", "set -eu -o pipefail\ntrap 'echo \"README example failed: $BASH_COMMAND\" >&2' ERR\n" + script,
    ]
    process.currentDirectoryURL = directory
    var environment = ProcessInfo.processInfo.environment
    environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
    process.environment = environment
    let outPath = scratch.path("stdout")
    let errPath = scratch.path("stderr")
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    defer {
        try? outHandle.close()
        try? errHandle.close()
    }
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = outHandle
    process.standardError = errHandle
    try process.run()
    process.waitUntilExit()
    return ToolRun(
        status: process.terminationStatus, stdout: try scratch.read("stdout"), stderr: try scratch.read("stderr"))
}

/// The demo's database, made by running the `buri-demo` binary built next to `buri`.
func makeDemoDatabase(_ sandbox: Sandbox) throws -> String {
    let demo = try BuriBinary.located().deletingLastPathComponent().appendingPathComponent("buri-demo")
    let path = sandbox.path("demo.buri")
    let run = try runShell("'\(demo.path)' '\(path)' > /dev/null", in: sandbox.url)
    #expect(run.status == 0, "buri-demo failed: \(run)")
    return path
}

/// A new directory holding a copy of the demo database as `demo.buri`.
func demoCopy(of master: String) throws -> Sandbox {
    let sandbox = try Sandbox()
    try FileManager.default.copyItem(atPath: master, toPath: sandbox.path("demo.buri"))
    return sandbox
}

@Suite("README shell examples")
struct ReadmeExampleTests {
    @Test("the examples are found in README.md: the table's, the sh blocks', and none hides in a scripts block")
    func extraction() throws {
        let examples = try Readme.examples()
        // The table has an example for most commands, and the tool's block several lines.
        #expect(examples.tableExamples.count >= 15, "\(examples.tableExamples)")
        #expect(
            examples.tableExamples.contains(
                "buri query demo.buri Person age --below 21 -0 | buri delete demo.buri Person --stdin -0"))
        #expect(examples.blocks.contains { $0.contains("buri query demo.buri Person locale_age --equals EN,30") })
        #expect(examples.blocks.contains { $0.contains("name_age") })
        // Blocks that run Scripts/ are not run here; a `buri` line in them may only be an etcd one
        // (those need a cluster and are covered by EtcdToolTests).
        for block in examples.scriptBlocks {
            for line in block.split(separator: "\n") where line.hasPrefix("buri ") {
                #expect(line.contains("etcd://"), "a README example outside the runnable blocks: \(line)")
            }
        }
        // The extraction itself: cells with escaped bars, and fences.
        let sample = ReadmeExamples(
            readme:
                "| `a \\| b` | x | `buri keys db B -0 \\| xargs -0 echo` |\n```sh\nburi info db\n```\n```swift\nburi\n```\n```sh\nScripts/test\n```\n"
        )
        #expect(sample.tableExamples == ["buri keys db B -0 | xargs -0 echo"])
        #expect(sample.blocks == ["buri info db\n"])
        #expect(sample.scriptBlocks == ["Scripts/test\n"])
    }

    @Test("every shell example of the README succeeds on a copy of the demo database")
    func everyExampleRuns() throws {
        let examples = try Readme.examples()
        let master = try Sandbox()
        let demo = try makeDemoDatabase(master)

        // Each table example on its own copy: they are independent one-liners (one drops the bucket).
        for example in examples.tableExamples {
            let copy = try demoCopy(of: demo)
            let run = try runShell(example, in: copy.url)
            #expect(run.status == 0, "README example `\(example)` failed: \(run)")
        }
        // The blocks in order, line by line, on one copy: a line may use a file an earlier one made.
        // An example that finds nothing is as wrong as one that fails: each line whose output is
        // not redirected must print something, and a count must not be 0.
        let copy = try demoCopy(of: demo)
        for block in examples.blocks {
            for line in block.split(separator: "\n").map(String.init) {
                let command = line.trimmingCharacters(in: .whitespaces)
                if command.isEmpty || command.hasPrefix("#") { continue }
                #expect(!command.hasSuffix("\\"), "README examples are one line each: \(line)")
                let run = try runShell(command, in: copy.url)
                #expect(run.status == 0, "README example `\(command)` failed: \(run)")
                if !command.contains(" > ") {
                    #expect(!run.stdout.isEmpty, "README example `\(command)` printed nothing")
                }
                if command.contains("--count") {
                    #expect(run.stdout != "0\n", "README example `\(command)` counts nothing")
                }
            }
        }
        // What the examples claim, checked on their results (the demo deleted person-00007, aged 27).
        let count = try runShell("buri query demo.buri Person age --above 20 --below 30 --count", in: copy.url)
        #expect(count.stdout == "4499\n", "\(count)")
        for equals in [["'Smith\\, Anna,25'"], ["'Smith, Anna'", "25"]] {
            let smith = try runShell(
                "buri query demo.buri Person name_age --equals " + equals.joined(separator: " --equals ") + " --count",
                in: copy.url)
            #expect(smith.stdout == "250\n", "\(smith)")
        }
        let imported = try runShell(
            "buri keys people.buri Person && buri query new.buri Person age --from 20 --to 20 --count", in: copy.url)
        #expect(imported.stdout == "p1\np2\n500\n", "\(imported)")
    }
}
