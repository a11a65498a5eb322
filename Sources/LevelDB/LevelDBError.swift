/// An error reported by LevelDB, or by this wrapper when a call cannot be made.
///
/// Every C call that takes an `errptr` has its message turned into a `LevelDBError`
/// whose ``code`` is derived from LevelDB's status prefix and whose ``message`` is
/// LevelDB's own text, so nothing LevelDB said is lost.
///
/// ```swift
/// do {
///     let db = try Database(path: "/tmp/app.ldb")
/// } catch let error as LevelDBError where error.code == .databaseInUse {
///     print("another process has it open: \(error)")
/// }
/// ```
public struct LevelDBError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, Sendable, Equatable {
        /// LevelDB's `NotFound` status (for example opening a missing database without `createIfMissing`).
        case notFound
        /// Data on disk failed a checksum or could not be parsed.
        case corruption
        /// LevelDB's `Not implemented` status.
        case notSupported
        /// LevelDB's `Invalid argument` status (for example `errorIfExists` on an existing database).
        case invalidArgument
        /// An operating-system I/O error.
        case ioError
        /// The database's `LOCK` file is held by another handle in this process or by another process.
        case databaseInUse
        /// The handle was closed with ``Database/close()`` before this call.
        case databaseClosed
        /// A status LevelDB reported that this wrapper does not recognise.
        case unknown
    }

    /// The kind of failure.
    public let code: Code
    /// LevelDB's message, verbatim (or this wrapper's, for ``Code/databaseClosed``).
    public let message: String
    /// The database directory involved, when known.
    public let path: String?

    public init(code: Code, message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    /// Classifies a LevelDB status string such as `"IO error: lock /x/LOCK: already held by process"`.
    init(statusMessage: String, path: String?) {
        self.message = statusMessage
        self.path = path
        // A held lock reads "IO error: lock <dir>/LOCK: already held by process" (this process) or
        // "IO error: lock <dir>/LOCK: <errno text>" (another); failing to open the LOCK file at all
        // ("IO error: <dir>/LOCK: Permission denied", a read-only directory) is a plain I/O error.
        if statusMessage.hasPrefix("IO error: lock ") {
            self.code = .databaseInUse
        } else if statusMessage.hasPrefix("NotFound: ") {
            self.code = .notFound
        } else if statusMessage.hasPrefix("Corruption: ") {
            self.code = .corruption
        } else if statusMessage.hasPrefix("Not implemented: ") {
            self.code = .notSupported
        } else if statusMessage.hasPrefix("Invalid argument: ") {
            self.code = .invalidArgument
        } else if statusMessage.hasPrefix("IO error: ") {
            self.code = .ioError
        } else {
            self.code = .unknown
        }
    }

    public var description: String {
        let location = path.map { " (database at \($0))" } ?? ""
        switch code {
        case .databaseInUse:
            return "the database\(location) is in use by another handle or process; close it there first: \(message)"
        case .databaseClosed:
            return "the database\(location) has been closed: \(message)"
        case .corruption:
            return
                "the database\(location) is corrupted; Database.repair(path:) can salvage what is readable: \(message)"
        default:
            return "LevelDB \(code.rawValue)\(location): \(message)"
        }
    }
}
