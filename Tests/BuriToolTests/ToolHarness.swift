import Buri
import BuriCodec
import BuriTestSupport
import Foundation
import Testing

// Runs the built `buri` binary as a subprocess, end to end, against databases prepared with the
// Swift API.

/// The people of the demo: a binary index on locale, a numeric one on age. A local type: unlike
/// BuriTests' `PersonRecord` it names the JSON field of each index and the key field, as the tool
/// needs to import and export JSON; sharing one type would change what one of the two stores.
struct Person: BuriSupport, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Person>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale, field: "locale"), .numeric("age", \.age, field: "age")],
        keyField: "objectId"
    )
}

/// Notes: a multi-valued binary index and a compound index, in a bucket named "notes".
struct Note: BuriSupport, Equatable {
    var id: String
    var tags: [String]
    var locale: String
    var age: Int

    static let buri = BuriSchema<Note>(
        key: \.id,
        indexes: [
            .binary("tags", \.tags, field: "tags"),
            .compound("locale_age", .binary(\.locale, field: "locale"), .numeric(\.age, field: "age")),
        ],
        bucket: "notes",
        keyField: "id"
    )
}

let fixturePeople: [Person] = (0..<40).map { i in
    Person(
        objectId: String(format: "p%02d", i), name: ["Dirk", "Anna", "Jan", "Marie"][i % 4],
        locale: ["DE", "EN", "FR", "NL"][i % 4], age: 20 + i % 10)
}

let fixtureNotes: [Note] = [
    Note(id: "n1", tags: ["red", "blue"], locale: "EN", age: 30),
    Note(id: "n2", tags: ["blue"], locale: "EN", age: 35),
    Note(id: "n3", tags: [], locale: "NL", age: 30),
    Note(id: "n4", tags: ["green", "red"], locale: "EN", age: 41),
]

/// A fresh directory, removed when dropped.
final class Sandbox {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "buri-tool-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func write(_ name: String, _ text: String) throws -> String {
        let path = path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func read(_ name: String) throws -> String {
        try String(contentsOfFile: path(name), encoding: .utf8)
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: path(name)) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A database holding `fixturePeople` in bucket "Person" and `fixtureNotes` in "notes", made with the Swift API.
func makeFixture(_ sandbox: Sandbox, name: String = "fixture.buri") throws -> String {
    let path = sandbox.path(name)
    let db = try BuriDatabase(path: path)
    defer { db.close() }
    try db.bucket(Person.self).store(fixturePeople)
    try db.bucket(Note.self).store(fixtureNotes)
    return path
}

struct ToolRun: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String

    var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }

    var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

struct ToolNotBuilt: Error, CustomStringConvertible {
    let looked: [String]
    var description: String {
        "the `buri` binary was not found next to the test bundle (looked in \(looked.joined(separator: ", "))); "
            + "build it first: `swift build --product buri` with the same --scratch-path (swift test builds it too)"
    }
}

enum BuriBinary {
    /// Directories that may hold the products next to the running test bundle.
    static let searched: [URL] = {
        var starts: [URL] = []
        if let argument = CommandLine.arguments.first {
            starts.append(URL(fileURLWithPath: argument).resolvingSymlinksInPath().deletingLastPathComponent())
            starts.append(URL(fileURLWithPath: argument).deletingLastPathComponent())
        }
        starts.append(Bundle.main.bundleURL)
        starts.append(contentsOf: Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" })
        var result: [URL] = []
        for start in starts {
            var directory = start.standardizedFileURL
            for _ in 0..<4 {
                if !result.contains(directory) { result.append(directory) }
                directory = directory.deletingLastPathComponent()
            }
        }
        return result
    }()

    static let url: URL? = searched.map { $0.appendingPathComponent("buri") }
        .first { FileManager.default.isExecutableFile(atPath: $0.path) }

    static func located() throws -> URL {
        guard let url else { throw ToolNotBuilt(looked: searched.map(\.path)) }
        return url
    }
}

/// Runs `buri arguments…` with `stdin` as standard input; stdout and stderr go to files (not a
/// terminal, so the tool must stay quiet on stderr unless something fails).
@discardableResult
func buri(_ arguments: String..., stdin: String? = nil) throws -> ToolRun {
    try buri(arguments, stdin: stdin)
}

@discardableResult
func buri(
    _ arguments: [String], stdin: String? = nil, executable path: String? = nil, environment: [String: String] = [:]
) throws -> ToolRun {
    // `executable`: a program that runs buri itself (setpriv, to run it as another user).
    let executable = try path.map { URL(fileURLWithPath: $0) } ?? BuriBinary.located()
    let scratch = try Sandbox()
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    // The key variables of the test's own environment never reach buri (a run would open the
    // fixtures with a key): only those a test gives.
    var inherited = ProcessInfo.processInfo.environment
    inherited["BURI_KEY_FILE"] = nil
    inherited["BURI_PASSPHRASE_FILE"] = nil
    process.environment = inherited.merging(environment) { $1 }
    process.currentDirectoryURL = scratch.url
    let input = try scratch.write("stdin", stdin ?? "")
    let outPath = scratch.path("stdout")
    let errPath = scratch.path("stderr")
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let inHandle = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
    let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    defer {
        try? inHandle.close()
        try? outHandle.close()
        try? errHandle.close()
    }
    process.standardInput = inHandle
    process.standardOutput = outHandle
    process.standardError = errHandle
    let done = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in done.signal() }
    try process.run()
    // A guard against a hang only, far above any run's time on a loaded machine (a slow run is
    // not a failure): a hung buri is killed and waited for, so its status is always read from an
    // exited process.
    if done.wait(timeout: .now() + 900) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        done.wait()
        Issue.record(
            "buri \(arguments.joined(separator: " ")) hung: it had not finished after 15 minutes and was killed")
    }
    return ToolRun(
        status: process.terminationStatus, stdout: try scratch.read("stdout"), stderr: try scratch.read("stderr"))
}

/// Runs `buri arguments…` with the test hook that SIGKILLs it right after its `chunks`th
/// stored chunk is committed (`BURI_TEST_KILL_AFTER_CHUNKS`, docs/DURABILITY.md): a kill at a
/// known point of the write, on any machine, however fast or slow.
func buriKilledAfter(
    chunks: Int, _ arguments: [String]
) throws -> (reason: Process.TerminationReason, status: Int32, stderr: String) {
    let end = try runChildKilledAtAPoint(
        try BuriBinary.located(), arguments, environment: ["BURI_TEST_KILL_AFTER_CHUNKS": String(chunks)],
        capturingErrors: true)
    return (end.reason, end.status, end.errors)
}

/// Expects a failure reported as exactly one line `buri: …` on stderr, with `status`.
func expectFailure(
    _ run: ToolRun, status: Int32, mentioning fragments: [String], sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(run.status == status, "\(run)", sourceLocation: sourceLocation)
    #expect(run.stderr.hasPrefix("buri: "), "\(run)", sourceLocation: sourceLocation)
    #expect(
        run.stderr.filter { $0 == "\n" }.count == 1, "expected one line on stderr: \(run)",
        sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(
            run.stderr.contains(fragment), "stderr should mention \(fragment): \(run)", sourceLocation: sourceLocation)
    }
}

/// Expects success with nothing on stderr (progress is shown only on a terminal).
func expectSuccess(_ run: ToolRun, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(run.status == 0, "\(run)", sourceLocation: sourceLocation)
    #expect(run.stderr.isEmpty, "\(run)", sourceLocation: sourceLocation)
}

/// Keys sorted bytewise, as Buri orders them.
func bytewise(_ keys: [String]) -> [String] {
    keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
}

/// The plain JSON Lines of people, as an application might write them.
func peopleJSONLines(_ people: [Person]) -> String {
    people.map {
        #"{"objectId":"\#($0.objectId)","name":"\#($0.name)","locale":"\#($0.locale)","age":\#($0.age)}"# + "\n"
    }.joined()
}
