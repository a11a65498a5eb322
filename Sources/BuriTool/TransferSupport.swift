import Buri
import BuriTransfer
import Foundation

// What `buri export`, `import`, `restore` and `put` share around the BuriTransfer library: its
// errors said as the tool says errors (exit status, wording of database errors), its progress
// shown on the tool's progress line, and the hidden memory report of the tests.

extension ExitStatus {
    /// The exit status of a transfer error of `kind`.
    init(_ kind: TransferError.Kind) {
        switch kind {
        case .invalidInput: self = .invalidInput
        case .notFound: self = .notFound
        case .usage: self = .usage
        case .notADatabase: self = .notADatabase
        case .inUse: self = .inUse
        case .diskFull, .failure: self = .failure
        }
    }
}

/// The tool's error for a transfer error: a database error it carries is worded as every command
/// words it (``ToolError/init(_:path:)``, naming `path`), inside the library's message; an error
/// of the tool's own that it carries (a write to standard output that failed) is thrown as it was.
func toolError(_ error: TransferError, path: String) -> any Error {
    guard let underlying = error.underlying, let rendering = error.rendering else {
        return ToolError(ExitStatus(error.kind), error.message, diskFull: error.kind == .diskFull)
    }
    let inner: ToolError
    if let buri = underlying as? BuriError {
        inner = ToolError(buri, path: path)
    } else if let tool = underlying as? ToolError {
        inner = tool
    } else if rendering.isVerbatim {
        return underlying
    } else {
        inner = ToolError(.failure, "\(underlying)")
    }
    if rendering.isVerbatim { return inner }
    return ToolError(
        rendering.kindFromUnderlying ? inner.status : ExitStatus(error.kind), rendering.message(inner.message))
}

/// Runs a BuriTransfer call, turning its errors into the tool's (see ``toolError(_:path:)``).
func mapTransferErrors<R>(path: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as TransferError {
        throw toolError(error, path: path)
    }
}

/// The input a FILE argument names: standard input for '-' or none.
func transferInput(_ file: String?) -> TransferInput {
    guard let file, file != "-" else { return .standardInput }
    return .file(file)
}

extension Progress {
    /// The library's progress reports shown on this line, when it is shown (nil otherwise, so
    /// that nothing is counted only to be reported). `storing` names an import's storing phase.
    func handler(storing: String = "reading and storing") -> TransferProgressHandler? {
        guard enabled else { return nil }
        return { step in self.show(step, storing: storing) }
    }

    /// Shows one report: "PHASE: DONE of TOTAL (P%), N lines, RATE/s, ETA Ns".
    func show(_ step: TransferProgress, storing: String) {
        let phase: String
        switch step.phase {
        case .published:
            update("published \(step.done) object\(step.done == 1 ? "" : "s") in one commit", force: true)
            return
        case .checking: phase = "checking"
        case .copyingExisting: phase = "copying existing objects"
        case .storing: phase = storing
        case .restoring: phase = "restoring"
        case .publishing: phase = "publishing"
        case .verifying: phase = "publishing (checking the bucket is unchanged)"
        case .purgingStage: phase = "purging the stage"
        case .exporting(let bucket): phase = "exporting '\(bucket)'"
        }
        let detail = step.lines.map { lines in
            "\(lines) lines" + (step.buckets.map { ", \($0) bucket\($0 == 1 ? "" : "s")" } ?? "")
        }
        measure(
            phase, done: step.done, total: step.total, bytes: step.unit == .bytes, detail: detail,
            force: step.isPhaseBoundary)
    }
}

/// `--debug-peak-memory` (hidden; for the tests of bounded memory and linear reading): the
/// process's peak resident memory, and the bytes the newline search looked at, on standard error.
func printPeakMemory(newlineSearchBytes: Int, inputBytes: Int) {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
    else { return }
    let peak = line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    writeAll(2, Array("buri: debug: \(peak)\n".utf8))
    writeAll(
        2,
        Array(
            "buri: debug: searched \(newlineSearchBytes) bytes for newlines in an input of \(inputBytes) bytes\n".utf8)
    )
}
