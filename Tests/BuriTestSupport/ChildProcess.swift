import Foundation

/// How a child process ended, and what it wrote.
public struct ChildExit: CustomStringConvertible {
    /// `.uncaughtSignal` when a signal ended it (``status`` is then the signal), else `.exit`.
    public let reason: Process.TerminationReason
    /// The exit status or the signal.
    public let status: Int32
    /// Its standard output, if captured (else empty).
    public let output: String
    /// Its standard error, if captured (else empty).
    public let errors: String

    /// Whether it was ended by SIGKILL.
    public var wasKilled: Bool { reason == .uncaughtSignal && status == SIGKILL }

    public var description: String {
        "\(reason == .uncaughtSignal ? "signal" : "exit") \(status)\nstdout: \(output)\nstderr: \(errors)"
    }
}

/// Runs `executable arguments…` to its end, for a child that kills itself at a deterministic point
/// of its work through a test hook: `buri` with `BURI_TEST_KILL_AFTER_CHUNKS=N` in its environment
/// (SIGKILL right after its Nth committed chunk, docs/DURABILITY.md), `BuriStress evolve` with a
/// kill-after-batches argument. The kill then falls at the same point on any machine, however fast
/// or slow, with no polling of the child's output and no timing.
///
/// ```swift
/// let end = try runChildKilledAtAPoint(buri, ["import", db, "Person", input],
///                                      environment: ["BURI_TEST_KILL_AFTER_CHUNKS": "2"], capturingErrors: true)
/// #expect(end.wasKilled, "\(end)")
/// ```
///
/// - Parameters:
///   - environment: added to this process's environment (which the child inherits).
///   - capturingOutput: whether to keep standard output (else it goes to /dev/null).
///   - capturingErrors: whether to keep standard error (else it goes to /dev/null).
public func runChildKilledAtAPoint(
    _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
    capturingOutput: Bool = false, capturingErrors: Bool = false
) throws -> ChildExit {
    let directory = TemporaryDirectory("buri-child")
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    /// A file the child writes to, or nil for /dev/null.
    func file(_ name: String, _ captured: Bool) throws -> (path: String, handle: FileHandle)? {
        guard captured else { return nil }
        let path = directory.path(name)
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return (path, try FileHandle(forWritingTo: URL(fileURLWithPath: path)))
    }
    let output = try file("stdout", capturingOutput)
    let errors = try file("stderr", capturingErrors)
    defer {
        try? output?.handle.close()
        try? errors?.handle.close()
    }
    process.standardOutput = output?.handle ?? FileHandle.nullDevice
    process.standardError = errors?.handle ?? FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    func text(_ file: (path: String, handle: FileHandle)?) throws -> String {
        guard let file else { return "" }
        return try String(contentsOfFile: file.path, encoding: .utf8)
    }
    return ChildExit(
        reason: process.terminationReason, status: process.terminationStatus, output: try text(output),
        errors: try text(errors))
}
