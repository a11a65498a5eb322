import ArgumentParser
import Buri
import BuriEtcd
import BuriCodec
import BuriStorage
import BuriTransfer
import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Errors and exit codes

/// The process exit codes, documented in `buri --help`.
enum ExitStatus: Int32 {
    case ok = 0
    case problemsFound = 1
    case usage = 2
    case failure = 3
    case notADatabase = 4
    case inUse = 5
    case notFound = 6
    case invalidInput = 7
    /// The database is encrypted and no key was given.
    case keyRequired = 8
    /// The key given does not open the database (or a key was given for a plaintext one).
    case wrongKey = 9
}

/// An error the tool reports as `buri: <message>` with a specific exit code.
struct ToolError: Error, CustomStringConvertible {
    let status: ExitStatus
    let message: String
    /// For `.inUse`: the database another process holds (for `--wait`'s messages).
    var heldPath: String?
    /// Whether the disk holding the database is full (the error of a write that was refused).
    var isDiskFull = false
    /// Lines printed as they are after the one-line message: the only errors with more than one
    /// line, those of a `buri query` expression, show the expression with a `^` under the
    /// character at fault (``ExpressionError``).
    var excerpt: String?

    init(_ status: ExitStatus, _ message: String, diskFull: Bool = false) {
        self.status = status
        self.message = message
        isDiskFull = diskFull
    }

    /// Classifies a library error.
    init(_ error: BuriError, path: String? = nil) {
        switch error {
        case .unknownBucket, .unknownIndex:
            self.init(.notFound, error.description)
        case .notABuriDatabase, .unsupportedFormat:
            self.init(.notADatabase, error.description)
        case .storage(let storage)
        where storage.code == .unavailable && engineKind(path ?? storage.location ?? "").capabilities.contains(.probe):
            self.init(.failure, unavailableMessage(path ?? storage.location ?? "", storage))
        case .storage(let storage) where storage.code == .databaseInUse:
            let place = path ?? storage.path ?? "the given path"
            self.init(.inUse, inUseMessage(place))
            heldPath = place
        case .storage(let storage)
        where storage.message.contains("No space left on device") || storage.message.contains("Disk quota exceeded"):
            self.init(.failure, diskFullMessage(path ?? storage.path ?? "the database"), diskFull: true)
        case .storage(let storage)
        where storage.code == .invalidArgument && storage.message.contains("does not match existing comparator"):
            self.init(.notADatabase, otherComparatorMessage(path ?? storage.path ?? "the given path", storage.message))
        case .encryptionKeyRequired(let stored):
            self.init(.keyRequired, ToolEncryption.keyRequiredMessage(path ?? stored))
        case .wrongEncryptionKey(let stored, let reason):
            self.init(.wrongKey, ToolEncryption.wrongKeyMessage(path ?? stored, reason: reason))
        case .notEncrypted(let stored):
            self.init(.wrongKey, ToolEncryption.notEncryptedMessage(path ?? stored))
        case .invalidEncryptionKey:
            self.init(.usage, error.description)
        case .invalidQuery, .invalidContinuation, .textQuerySyntax:
            self.init(.usage, error.description)
        // A private index cannot answer a range, a prefix or an order: a query that does not fit
        // the index, as an invalid query is.
        case .privateIndex(let bucket, let index, let operation):
            self.init(.usage, privateIndexMessage(bucket: bucket, index: index, operation: operation))
        case .indexNotDeclaredPlaintext(let bucket, let index):
            self.init(.invalidInput, undeclaredPlaintextMessage(bucket: bucket, index: index))
        case .uniqueViolation, .invalidIndexValue, .emptyKey, .keyTooLong, .encodingFailed, .invalidBucketName,
            .invalidIndexDefinition, .invalidValueName, .valueEncodingFailed:
            self.init(.invalidInput, error.description)
        default:
            self.init(.failure, error.description)
        }
    }

    var description: String { message }
}

/// Runs `body`, turning library errors into tool errors that name `path`.
func mapErrors<R>(path: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as BuriError {
        throw ToolError(error, path: path)
    }
}

func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
}

// MARK: - Test hook

/// A kill at a known point, for tests that must not depend on timing (docs/DURABILITY.md, "Test
/// hooks"): with `BURI_TEST_KILL_AFTER_CHUNKS=N` in the environment, `buri import` and `buri
/// restore` send themselves SIGKILL right after the Nth chunk they store has been committed — into
/// the stage of an atomic import or restore, or into the bucket with `--chunk-size` — `buri
/// encrypt` after the Nth batch it copies into a sealed generation, and `buri rekey
/// --rotate-data-key` after the Nth progress report once a batch was sealed anew. Without the
/// variable nothing changes.
///
/// ```sh
/// BURI_TEST_KILL_AFTER_CHUNKS=2 buri import db.buri B --key id big.jsonl   # killed mid-write
/// ```
enum TestKillHook {
    static let afterChunks: Int? = ProcessInfo.processInfo.environment["BURI_TEST_KILL_AFTER_CHUNKS"].flatMap {
        Int($0)
    }
    nonisolated(unsafe) private static var stored = 0

    /// Counts a committed chunk; the Nth one ends the process with SIGKILL.
    static func chunkStored() {
        guard let afterChunks else { return }
        stored += 1
        if stored >= afterChunks { kill(getpid(), SIGKILL) }
    }
}

// MARK: - Opening databases

/// The `DB` argument every command takes.
struct DatabaseArgument: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "Path of the database directory, or an etcd location: etcd://HOST:PORT[,HOST:PORT…]/NAME[?max-txn-ops=N&max-request-bytes=M&lease-seconds=S].",
            valueName: "db"))
    var database: String

    @Option(
        help: ArgumentHelp(
            "If another process holds the database, wait up to this many seconds for it to close it, with a note on standard error saying who holds it (default: fail at once with exit 5, as when the time runs out). Commands that only read never wait: they read a snapshot of its files.",
            valueName: "seconds"))
    var wait: Double?

    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp(
            "The key of an encrypted database: a file of exactly 32 random bytes (`buri key new FILE` makes one). A database a command creates (import, restore) is encrypted with it. Default: the file $BURI_KEY_FILE names.",
            valueName: "file"))
    var keyFile: String?

    @Option(
        name: .customLong("passphrase-file"),
        help: ArgumentHelp(
            "The passphrase of an encrypted database, in a text file (one trailing line break is not part of it). A database a command creates is encrypted with it. Default: the file $BURI_PASSPHRASE_FILE names.",
            valueName: "file"))
    var passphraseFile: String?

    func validate() throws {
        if let wait, !(wait >= 0 && wait <= 86_400 * 365) {
            throw ValidationError(
                "--wait takes the most seconds to wait for another process to close the database, from 0 to 31536000 (a year), such as --wait 30; not \(wait)"
            )
        }
        if let problem = locationProblem(database) { throw ValidationError(problem) }
        // The key is read here, before the command does anything: a key file that cannot be used
        // is a usage error (exit 2) naming it.
        try ToolEncryption.load(keyFile: keyFile, passphraseFile: passphraseFile)
    }
}

/// What is at a path, as far as opening a database goes.
enum PathState {
    case missing
    case emptyDirectory
    case database
    case file
    case otherDirectory
    /// A directory with LevelDB's files but no CURRENT file: a database that lost it.
    case damaged
}

/// A location without files here (etcd) is probed first: a cluster that cannot answer throws
/// (exit 3), never `.missing`.
func pathState(_ path: String) throws -> PathState {
    if !hasFiles(path) { return try enginePathState(path) }
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .missing }
    guard isDirectory.boolValue else { return .file }
    if FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent(LevelDBEngine.currentFileName))
    {
        return .database
    }
    let contents = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    if contents.contains(where: LevelDBEngine.isDataFile) { return .damaged }
    return contents.isEmpty ? .emptyDirectory : .otherDirectory
}

/// Opens an existing database without ever creating one (nor any file in a directory that
/// holds none): a path that is not a database gives a one-line error. With `purges` false the
/// generations waiting to be purged (`docs/FORMAT.md` §6a) are left as they are. With
/// `snapshot`, a LevelDB database is read through a private snapshot of its files
/// (``openSnapshot(_:)``): nothing in its directory is created or changed, and a database
/// another process holds open is read as its files stand.
func openExisting(_ path: String, purges: Bool = true, snapshot: Bool = false) throws -> BuriDatabase {
    // A database in an etcd cluster: never created here either.
    if !hasFiles(path) { return finishingPurges(try openExistingEtcd(path, purges: purges), purges) }
    switch try pathState(path) {
    case .missing:
        throw ToolError(.notADatabase, missingPathMessage(path))
    case .file:
        throw ToolError(.notADatabase, "'\(path)' is a file, not a database; give the directory of a Buri database")
    case .damaged:
        try refuseIfBeingCreated(path)
        throw ToolError(.failure, damagedWithoutCurrentMessage(path))
    case .emptyDirectory, .otherDirectory:
        try refuseIfBeingCreated(path)
        throw ToolError(
            .notADatabase,
            "'\(path)' is not a Buri database (it has no LevelDB files); give the directory of a Buri database")
    case .database:
        if snapshot { return try openSnapshot(path) }
        var options = ToolEncryption.options()
        options.createIfMissing = false
        options.purgesInBackground = purges
        return finishingPurges(try openLocation(path, options: options), purges)
    }
}

/// A command that writes finishes what a killed import or restore staged, and the generations
/// waiting to be purged, before it does anything else, and compacts their ranges to give their
/// space back: a background purge would stop when the command ends, leaving them for the next
/// one (docs/FORMAT.md §6a). If that fails (a full disk), the command goes on, and the next one
/// that writes tries again.
func finishingPurges(_ db: BuriDatabase, _ purges: Bool) -> BuriDatabase {
    if purges { try? db.purgeRetiredBuckets() }
    return db
}

/// The sum of the sizes of the files in the database directory.
func sizeOnDisk(_ path: String) -> UInt64 {
    let manager = FileManager.default
    guard let names = try? manager.contentsOfDirectory(atPath: path) else { return 0 }
    var total: UInt64 = 0
    for name in names {
        let attributes = try? manager.attributesOfItem(atPath: (path as NSString).appendingPathComponent(name))
        if let size = attributes?[.size] as? NSNumber { total += size.uint64Value }
    }
    return total
}

func formatBytes(_ bytes: UInt64) -> String {
    let units = ["KiB", "MiB", "GiB", "TiB"]
    guard bytes >= 1024 else { return "\(bytes) bytes" }
    var value = Double(bytes)
    var unit = -1
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return "\(bytes) bytes (\(String(format: "%.1f", value)) \(units[unit]))"
}

/// An open bucket, or a one-line error naming it and listing the known ones.
func openBucket(_ db: BuriDatabase, _ name: String) throws -> RawBucket {
    try mapErrors(path: db.path) { try db.rawBucket(named: name) }
}

// MARK: - Output

/// Writes every byte to a file descriptor, retrying short writes.
@discardableResult
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            guard let base = raw.baseAddress else { return true }
            let written = write(fd, base + offset, raw.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }
}

/// Buffered output to standard output or a file.
final class Output {
    private let fd: Int32
    private let name: String
    private var buffer: [UInt8] = []
    private let ownsDescriptor: Bool

    private init(fd: Int32, name: String, owns: Bool) {
        self.fd = fd
        self.name = name
        ownsDescriptor = owns
        buffer.reserveCapacity(1 << 16)
    }

    static func standardOutput() -> Output { Output(fd: 1, name: "standard output", owns: false) }

    /// Creates (or truncates) `path` for writing.
    static func file(_ path: String) throws -> Output {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else {
            throw ToolError(.failure, "cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        return Output(fd: fd, name: "'\(path)'", owns: true)
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    func line(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= 1 << 16 { try flush() }
    }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        let ok = writeAll(fd, buffer)
        buffer.removeAll(keepingCapacity: true)
        if !ok {
            let code = errno
            // The reader went away (`buri export DB | head`): end quietly, as SIGPIPE would have
            // (the tool ignores it while it holds a snapshot, so that the snapshot is removed).
            if code == EPIPE { throw ExitCode(128 + SIGPIPE) }
            var message = "cannot write to \(name): \(String(cString: strerror(code)))"
            if code == ENOSPC {
                message +=
                    "; the disk is full; the database is not affected by this output: free space there and run the command again"
            }
            throw ToolError(.failure, message)
        }
    }

    /// Flushes, and closes a file opened by ``file(_:)``.
    func close() throws {
        try flush()
        if ownsDescriptor, closeDescriptor(fd) != 0 {
            throw ToolError(.failure, "cannot write to \(name): \(String(cString: strerror(errno)))")
        }
    }
}

private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }

/// Progress on standard error, shown only when standard error is a terminal.
final class Progress {
    /// Whether progress is shown: standard error is a terminal, or it was asked for (`--progress`).
    let enabled: Bool
    init(forced: Bool = false) { enabled = forced || isatty(2) != 0 }
    private var shown = false
    private var lastUpdate = Date.distantPast

    /// Shows `text` in place of the previous message (at most ten times a second).
    func update(_ text: @autoclosure () -> String, force: Bool = false) {
        guard enabled else { return }
        let now = Date()
        guard force || now.timeIntervalSince(lastUpdate) >= 0.1 else { return }
        lastUpdate = now
        writeAll(2, Array(("\r\u{1B}[K" + text()).utf8))
        shown = true
    }

    private var phase = ""
    private var phaseStart = Date()

    /// Shows how far `phase` is: "PHASE: DONE of TOTAL (P%), RATE/s, ETA Ns", in bytes or objects.
    /// `force` shows it even within a tenth of a second of the last message (a phase's start and end).
    func measure(_ phase: String, done: Int, total: Int, bytes: Bool, detail: String?, force: Bool = false) {
        guard enabled else { return }
        let now = Date()
        if phase != self.phase {
            self.phase = phase
            phaseStart = now
        }
        update(
            Progress.line(
                phase, done: done, total: total, bytes: bytes, detail: detail,
                elapsed: now.timeIntervalSince(phaseStart)), force: force)
    }

    static func line(_ phase: String, done: Int, total: Int, bytes: Bool, detail: String?, elapsed: Double) -> String {
        func amount(_ n: Int) -> String {
            guard bytes else { return "\(n)" }
            return n < 1 << 20 ? "\(n / 1024) KiB" : String(format: "%.1f MiB", Double(n) / 1_048_576)
        }
        let percent = total > 0 ? Int(Double(done) * 100 / Double(total)) : 0
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Int((Double(max(total - done, 0)) / rate).rounded(.up)) : nil
        var text = "\(phase): \(amount(done)) of \(amount(total))\(bytes ? "" : " objects") (\(percent)%)"
        if let detail { text += ", \(detail)" }
        text += ", \(amount(Int(rate)))\(bytes ? "" : " objects")/s, ETA " + (eta.map { "\($0)s" } ?? "?")
        return text
    }

    /// Clears the message.
    func finish() {
        guard enabled, shown else { return }
        writeAll(2, Array("\r\u{1B}[K".utf8))
        shown = false
    }
}

// MARK: - JSON

/// The JSON text of a CBOR payload.
/// `dates`: the bucket's date paths (``BucketDescriptor/datePaths``), where an untagged number (a
/// format version 1 date, seconds since 2001) is shown as the seconds since 1970 it stands for.
func jsonText(ofPayload payload: [UInt8], pretty: Bool, bucket: String, key: String, dates: [[String]]) throws -> String
{
    do {
        return DatePaths.taggingStoredDates(try CBORValue(decoding: payload), at: dates).jsonString(pretty: pretty)
    } catch {
        throw ToolError(
            .failure,
            "bucket '\(bucket)', key '\(key)': the stored object is not valid CBOR (\(error)); run `buri check`")
    }
}

/// One record as `buri export` writes it: {"bucket","key","object"} with the object in the exact JSON
/// form (``ExportFormat/recordLine(_:of:)``).
func exportRecordLine(_ record: StoredRecord, of bucket: BucketDescriptor) throws -> String {
    try mapTransferErrors(path: bucket.name) { try ExportFormat.recordLine(record, of: bucket) }
}

/// A string as a JSON string literal.
func jsonString(_ text: String) -> String { CBORValue.text(text).jsonString() }

// MARK: - Index values from the command line

/// Parses a command-line value for an index component of `kind`: binary values as UTF-8 text,
/// numbers by the rules `buri import` applies to JSON numbers (an integer exactly — an Int64, a
/// UInt64 or exactly a double —, a decimal only if a double holds exactly that number, or
/// Infinity/-Infinity); anything else is refused, never rounded. Dates are seconds since 1970.
func parseIndexValue(_ text: String, kind: IndexKind, index: String, option: String) throws -> IndexValue {
    switch kind {
    case .binary:
        return IndexValue(text)
    case .numeric:
        let number: CBORValue
        do {
            number = try CBORValue(jsonNumber: text)
        } catch let error as CBORError {
            // An integer beyond CBOR's range that is exactly a double (2^65): an index holds it
            // as that double, so a query names it as written.
            guard let exact = CBORValue.exactDouble(text) else {
                try refuseNumber(text, error, index: index, option: option)
            }
            number = .float(exact)
        }
        do {
            return try IndexValue(number: number)
        } catch {
            let reason: String
            if case .invalidIndexValue(_, _, _, let text) = error { reason = text } else { reason = error.description }
            throw ToolError(.usage, "\(option) '\(text)' for numeric index '\(index)' is refused: \(reason)")
        }
    }
}

/// The error for a query value that is not a number a numeric index holds.
private func refuseNumber(_ text: String, _ error: CBORError, index: String, option: String) throws -> Never {
    if let first = text.trimmingCharacters(in: .whitespaces).unicodeScalars.first,
        first == "-" || ("0"..."9").contains(first) || first == "." || first == "+"
    {
        var reason = error.message
        if let range = reason.range(of: " (line ", options: .backwards) { reason = String(reason[..<range.lowerBound]) }
        if reason.contains("the integers CBOR holds exactly"),
            let nearest = Double(text.trimmingCharacters(in: .whitespaces))
        {
            // A query value is not stored: what matters is what an index holds.
            reason =
                "the integer \(text.trimmingCharacters(in: .whitespaces)) is neither an Int64, a UInt64 nor exactly a double, the numbers an index holds (the nearest double is \(nearest)); it is refused rather than rounded"
        }
        throw ToolError(.usage, "\(option) '\(text)' for numeric index '\(index)' is refused: \(reason)")
    }
    throw ToolError(
        .usage,
        "\(option) '\(text)' is not a number, but index '\(index)' is numeric; give an integer or a decimal number such as 42 or 2.5"
    )
}
