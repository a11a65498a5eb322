/// An error reported by a storage engine, in terms every engine shares.
///
/// ```swift
/// do {
///     try engine.commit(batch, conditions: nil, sync: false)
/// } catch let error as StorageError where error.code == .conflict {
///     // another client changed what this writer read: read again and retry
/// }
/// ```
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, Sendable, Equatable {
        /// Something the call needed is not there (opening a missing database without creating it).
        case notFound
        /// Stored data failed a checksum or could not be parsed.
        case corruption
        /// The engine cannot do this.
        case notSupported
        /// The engine refused an argument.
        case invalidArgument
        /// An operating-system I/O error (a full disk, a read-only file system, a missing directory).
        case ioError
        /// Another handle or process holds the database.
        case databaseInUse
        /// The engine was closed before this call.
        case databaseClosed
        /// A commit's conditions failed: another client changed a key this writer read.
        case conflict
        /// A commit is larger than the engine can apply atomically (operations or bytes).
        case limitExceeded
        /// The engine cannot be reached (a cluster without a leader, a connection refused).
        case unavailable
        /// Anything else.
        case unknown
    }

    /// The kind of failure.
    public let code: Code
    /// The engine's own message, verbatim.
    public let message: String
    /// Where the database lives (a directory, `:memory:`, a cluster address), when known.
    public let location: String?

    /// The location, for code written when it was always a directory.
    public var path: String? { location }

    public init(code: Code, message: String, location: String? = nil) {
        self.code = code
        self.message = message
        self.location = location
    }

    public var description: String {
        let place = location.map { " (database at \($0))" } ?? ""
        switch code {
        case .databaseInUse:
            return "the database\(place) is in use by another handle or process; close it there first: \(message)"
        case .databaseClosed:
            return "the database\(place) has been closed: \(message)"
        case .corruption:
            return "the database\(place) is damaged: \(message)"
        case .conflict:
            return "the commit\(place) conflicted with another client's write: \(message)"
        case .limitExceeded:
            return "the commit\(place) is too large to apply atomically: \(message)"
        default:
            return "storage \(code.rawValue)\(place): \(message)"
        }
    }
}
