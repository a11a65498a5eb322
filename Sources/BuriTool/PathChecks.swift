import ArgumentParser
import Buri
import BuriEtcd
import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Errors that say what happened: what is at a database path when LevelDB's own status would
// only say `notFound … /LOCK`, who holds a database, a full disk, a read-only file system.

/// Why a path that does not exist cannot be opened: a dangling symbolic link, a missing parent.
func missingPathMessage(_ path: String) -> String {
    if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
        return
            "'\(path)' is a symbolic link to '\(target)', which does not exist; fix the link or give the directory of a Buri database"
    }
    let parent = parentDirectory(path)
    var isDirectory: ObjCBool = false
    if !FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory) {
        return
            "'\(path)' does not exist, nor does its parent directory '\(parent)'; give the directory of a Buri database"
    }
    return "'\(path)' does not exist; give the directory of a Buri database"
}

/// The directory that holds `path` ("." for a bare name).
func parentDirectory(_ path: String) -> String {
    var trimmed = path
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
    let parent = (trimmed as NSString).deletingLastPathComponent
    return parent.isEmpty ? "." : parent
}

/// A database directory whose CURRENT file is gone while its tables and logs remain.
func damagedWithoutCurrentMessage(_ path: String) -> String {
    "'\(path)' is a damaged database: its CURRENT file is missing but its LevelDB files are there; "
        + "keep a copy of the directory and run `buri repair \(path)` to rebuild it from them"
}

/// Why a new database cannot be created at `path`, if that is known before trying:
/// a missing parent directory, a dangling symbolic link, a parent that is not a directory.
func creationProblem(_ path: String) -> String? {
    // A cluster location names no directory: the engine says what is wrong with it.
    if !hasFiles(path) { return nil }
    if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
        return
            "cannot create a database at '\(path)': it is a symbolic link to '\(target)', which does not exist; create that directory, fix the link, or give another path"
    }
    let parent = parentDirectory(path)
    var isDirectory: ObjCBool = false
    if !FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory) {
        return
            "cannot create a database at '\(path)': its parent directory '\(parent)' does not exist; create it first (mkdir -p '\(parent)')"
    }
    if !isDirectory.boolValue {
        return
            "cannot create a database at '\(path)': '\(parent)' is a file, not a directory; give a path inside a directory"
    }
    return nil
}

/// The process holding LevelDB's lock on the database at `path`, if the OS says (POSIX record
/// locks report their holder's PID; a holder in this process or on another machine shows none).
func lockHolder(_ path: String) -> pid_t? {
    let fd = open((path as NSString).appendingPathComponent(LevelDBEngine.lockFileName), O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 0
    lock.l_len = 0
    guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK), lock.l_pid > 0 else { return nil }
    return lock.l_pid
}

/// A directory without CURRENT whose LOCK another process holds is a database being created
/// right now (LevelDB writes CURRENT last), not a damaged one: that is the in-use error.
func refuseIfBeingCreated(_ path: String) throws {
    if lockHolder(path) != nil {
        var error = ToolError(.inUse, inUseMessage(path))
        error.heldPath = path
        throw error
    }
}

/// The in-use error, naming the holder's PID when the OS tells it.
func inUseMessage(_ path: String) -> String {
    "\(inUseFact(path)) (LevelDB lets one process open it at a time); "
        + "close it there and retry, or give --wait SECONDS to wait for it"
}

/// "the database at 'X' is in use by process N".
func inUseFact(_ path: String, still: Bool = false) -> String {
    let holder = lockHolder(path).map { "process \($0)" } ?? "another process"
    return "the database at '\(path)' is \(still ? "still " : "")in use by \(holder)"
}

/// LevelDB's `No space left on device`, said so that the user knows nothing was lost.
func diskFullMessage(_ path: String) -> String {
    "the disk holding '\(path)' is full: this change was not written, and the data stored before it is intact; "
        + "free space on that disk and run the command again"
}

/// A LevelDB database made with another key order than Buri's bytewise one.
func otherComparatorMessage(_ path: String, _ message: String) -> String {
    // LevelDB says "<stored name> does not match existing comparator <name asked for>".
    var comparator = ""
    if let range = message.range(of: " does not match existing comparator") {
        let before = message[..<range.lowerBound]
        let name = before.range(of: ": ", options: .backwards).map { before[$0.upperBound...] } ?? before
        if !name.isEmpty { comparator = " '\(name)'" }
    }
    return "'\(path)' is not a Buri database: it is a LevelDB database ordered by another comparator\(comparator), "
        + "and Buri uses LevelDB's bytewise order; give the directory of a Buri database"
}

/// Runs `body` until it no longer fails because the database is in use, for up to `seconds`
/// (`--wait`). The first time it finds the database held it says so on standard error — who holds
/// it and how long it will wait — and if the time runs out the error says it waited, and for how
/// long, rather than advising the --wait that was given.
func waitingForLock<R>(_ seconds: Double?, _ body: () throws -> R) throws -> R {
    let deadline = Date().addingTimeInterval(seconds ?? 0)
    var announced = false
    while true {
        do {
            return try body()
        } catch let error as ToolError where error.status == .inUse {
            guard let seconds, seconds > 0 else { throw error }
            let path = error.heldPath ?? "the given path"
            guard Date() < deadline else {
                throw ToolError(
                    .inUse,
                    "\(inUseFact(path, still: true)) after waiting \(secondsText(seconds)) (--wait \(secondsText(seconds, unit: false))); "
                        + "nothing was done: close it in that process and run the command again, or give a longer --wait"
                )
            }
            if !announced {
                announced = true
                writeAll(
                    2,
                    Array(
                        "buri: note: \(inUseFact(path)); waiting up to \(secondsText(seconds)) for it to be closed (--wait; Ctrl-C gives up)\n"
                            .utf8))
            }
            usleep(50_000)
        }
    }
}

/// "30 seconds", "0.5 seconds", "1 second"; with `unit: false` just the number.
func secondsText(_ seconds: Double, unit: Bool = true) -> String {
    let number = seconds == seconds.rounded() && seconds < 1e15 ? String(Int64(seconds)) : String(seconds)
    return unit ? number + (seconds == 1 ? " second" : " seconds") : number
}

/// Whether LevelDB failed because it may not write into the database directory.
func isReadOnlyFailure(_ error: ToolError) -> Bool {
    error.status == .failure
        && (error.message.contains("Read-only file system") || error.message.contains("Permission denied"))
}

extension DatabaseArgument {
    /// Opens the database (see ``openExisting(_:purges:snapshot:)``). A command that only reads
    /// (`readOnly`) reads a private snapshot of a LevelDB database's files: it creates and changes
    /// nothing in the directory, does not wait for the lock (it reads what another process holding
    /// the database has committed to disk), and works on a read-only file system or a full disk.
    /// A command that writes opens the database itself, waiting `--wait` seconds for its lock, and
    /// resumes pending purges in the background, as the library does;
    /// `purgesInBackground: false` lets it run the purge itself (`buri compact`).
    ///
    /// Before a command writes, the stages of imports that ended without publishing (killed, or
    /// failed on a full disk that kept their purge from running) are purged and their space is
    /// given back (``reclaimAbandonedStages(_:path:)``).
    func open(readOnly: Bool = false, purgesInBackground: Bool? = nil) throws -> BuriDatabase {
        do {
            let db = try waitingForLock(wait) {
                try openExisting(database, purges: purgesInBackground ?? !readOnly, snapshot: readOnly)
            }
            if !readOnly {
                do {
                    try reclaimAbandonedStages(db, path: database)
                } catch {
                    db.close()
                    throw error
                }
            }
            return db
        } catch let error as ToolError where !readOnly && isReadOnlyFailure(error) {
            let reason =
                error.message.contains("Read-only file system")
                ? "is on a read-only file system" : "is in a directory this user may not write"
            throw ToolError(
                .failure,
                "'\(database)' \(reason), and this command changes the database; copy the directory somewhere writable and run it there (reading commands work as they are)"
            )
        }
    }
}

/// Buri's limit on the UTF-8 length of an object key (docs/FORMAT.md).
let maxKeyBytes = 4096

/// Refuses a key no object can have, naming the limit rather than echoing the whole key.
func checkKeyLength(_ key: String) throws {
    let length = key.utf8.count
    guard length > maxKeyBytes else { return }
    let start = String(decoding: Array(key.utf8.prefix(32)), as: UTF8.self)
    throw ToolError(
        .usage,
        "the key '\(start)…' is \(length) bytes, over Buri's limit of \(maxKeyBytes) bytes for a key, so no object has it; give a key of at most \(maxKeyBytes) UTF-8 bytes"
    )
}

/// The keys among `words` (a command's unrecognized words, the '--' terminator included): one
/// that starts with a single '-' is taken as it is (`buri get DB B -weird`); one that starts with
/// '--' only after the terminator, so that a mistyped option (`--jsno`) is never taken for a key —
/// least of all by `buri delete`.
func argumentKeys(_ words: [String], command: String) throws -> [String] {
    let terminator = words.firstIndex(of: "--")
    var keys = words
    if let terminator { keys.remove(at: terminator) }
    let beforeTerminator = keys[..<(terminator ?? keys.count)]
    if let key = beforeTerminator.first(where: { $0.hasPrefix("--") }) {
        throw ValidationError(
            "'\(key)' is not an option of buri \(command); a key that starts with '--' goes after '--': buri \(command) DB BUCKET -- \(key)"
        )
    }
    return keys
}
