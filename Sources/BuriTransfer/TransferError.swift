import Buri

/// Why an export, import or restore failed: one line that names the bucket, key, input line or
/// path concerned and says what to do, with a ``Kind`` to act on.
///
/// An import or restore that throws has written nothing the database keeps (see
/// ``JSONLinesImport`` and ``BuriDatabase/restore(from:progress:chunkCommitted:)``).
///
/// ```swift
/// do {
///     try db.importJSONLines(from: .file("people.jsonl"), into: "Person")
/// } catch let error as TransferError where error.kind == .invalidInput {
///     print("refused at line \(error.line ?? 0): \(error)")   // nothing was imported
/// }
/// ```
public struct TransferError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure it is, for a program to act on (the `buri` tool maps each to an exit
    /// status).
    ///
    /// ```swift
    /// if error.kind == .diskFull { print("free some space, then run the import again") }
    /// ```
    public enum Kind: String, Sendable, Hashable {
        /// The input (a JSON line, an export, an object) is refused: malformed, of an unknown
        /// format, or breaking the bucket's rules (a key, a unique index).
        case invalidInput
        /// A bucket or index that does not exist.
        case notFound
        /// The request itself does not fit: options that contradict the bucket or each other.
        case usage
        /// The location is not a Buri database (or one of a format this Buri does not read).
        case notADatabase
        /// Another process holds the database.
        case inUse
        /// The disk holding the database is full: the change was not written.
        case diskFull
        /// Anything else: a storage error, an unreadable input or output, damaged data.
        case failure
    }

    /// What kind of failure it is.
    ///
    /// ```swift
    /// switch error.kind { case .invalidInput: fixTheInput(); default: throw error }
    /// ```
    public let kind: Kind

    /// The message: what happened, naming what it concerns, and what to do.
    ///
    /// ```swift
    /// print("import failed: \(error.message)")
    /// ```
    public let message: String

    /// The input line (counted from 1) the error is about, when it is about one.
    ///
    /// ```swift
    /// if let line = error.line { highlight(line: line) }
    /// ```
    public let line: Int?

    /// The error this one reports, when it comes from elsewhere: a ``BuriError`` of the
    /// database, or an error the caller's own code threw (an export's line writer, say).
    ///
    /// ```swift
    /// if case .storage(let storage)? = error.underlying as? BuriError { log(storage) }
    /// ```
    public let underlying: (any Error)?

    /// For an error that carries `underlying`: how its message is built from the underlying
    /// error's text, so that a program with its own wording of database errors (the `buri` tool)
    /// can build the same message with it.
    package let rendering: Rendering?

    /// Whether an import had begun staging objects when it failed (they are deleted, or marked
    /// for purging when that fails).
    package var stageBegun = false

    /// Why the stage of a failed import could not be deleted at once (it is marked for purging,
    /// and the next open that writes deletes it).
    package var stageDiscardError: BuriError?

    /// The message.
    ///
    /// ```swift
    /// print("buri: \(error)")
    /// ```
    public var description: String { message }

    /// An error of `kind` saying `message` (about input line `line`, if given).
    ///
    /// ```swift
    /// throw TransferError(.invalidInput, "line 3: the key is empty", line: 3)
    /// ```
    public init(_ kind: Kind, _ message: String, line: Int? = nil) {
        self.kind = kind
        self.message = message
        self.line = line
        underlying = nil
        rendering = nil
    }

    private init(kind: Kind, underlying: any Error, rendering: Rendering, line: Int?) {
        self.kind = kind
        self.underlying = underlying
        self.rendering = rendering
        self.line = line
        message = rendering.message(Self.describe(underlying))
    }

    /// How the message of an error that carries another is made: `prefix`, the other error's
    /// text, `suffix`; then, for a restore, "nothing was imported" said as "nothing was
    /// restored" (or that sentence added).
    package struct Rendering: Sendable {
        package var prefix = ""
        package var suffix = ""
        /// Whether the kind is the underlying error's (else the error's own ``TransferError/kind``).
        package var kindFromUnderlying = true
        /// Whether the restore's last clause is applied (see ``TransferError/restoring(_:)``).
        package var restoring = false

        /// Whether the message is the underlying error's text, unchanged.
        package var isVerbatim: Bool { prefix.isEmpty && suffix.isEmpty && !restoring }

        /// The message, given the underlying error's text.
        package func message(_ underlying: String) -> String {
            let text = prefix + underlying + suffix
            return restoring ? TransferError.restoreMessage(text) : text
        }
    }

    /// The error for `error` thrown by the database (or by code this library called): a
    /// `TransferError` as it is, a ``BuriError`` classified, anything else carried as the
    /// `underlying` error of a `.failure`.
    package static func wrapping(_ error: any Error) -> TransferError {
        if let error = error as? TransferError { return error }
        return TransferError(kind: kind(of: error), underlying: error, rendering: Rendering(), line: nil)
    }

    /// A database error given in a message of this library's own: `prefix` + its text + `suffix`.
    static func database(
        _ error: BuriError, kind: Kind, line: Int?, prefix: String, suffix: String
    ) -> TransferError {
        TransferError(
            kind: kind, underlying: error,
            rendering: Rendering(prefix: prefix, suffix: suffix, kindFromUnderlying: false), line: line)
    }

    /// `error` as a restore reports it: its message says that nothing was restored (replacing
    /// "nothing was imported", or added at its end).
    static func restoring(_ error: any Error) -> TransferError {
        var error = wrapping(error)
        if var rendering = error.rendering, let underlying = error.underlying {
            rendering.restoring = true
            var restored = TransferError(
                kind: error.kind, underlying: underlying, rendering: rendering, line: error.line)
            restored.stageBegun = error.stageBegun
            restored.stageDiscardError = error.stageDiscardError
            return restored
        }
        error = TransferError(error.kind, restoreMessage(error.message), line: error.line)
        return error
    }

    /// A restore's message: one that says "nothing was restored" as it is, "nothing was imported"
    /// said so, else the sentence added.
    static func restoreMessage(_ message: String) -> String {
        if message.contains("nothing was restored") { return message }
        if message.contains("nothing was imported") {
            return message.replacingOccurrences(of: "nothing was imported", with: "nothing was restored")
        }
        return message + "; nothing was restored"
    }

    /// The text of an underlying error.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? BuriError else { return "\(error)" }
        if isDiskFull(error), case .storage(let storage) = error {
            return diskFullMessage(storage.path ?? "the database")
        }
        return error.description
    }

    /// The kind of an error this library did not make.
    static func kind(of error: any Error) -> Kind {
        guard let error = error as? BuriError else { return .failure }
        switch error {
        case .unknownBucket, .unknownIndex:
            return .notFound
        case .notABuriDatabase, .unsupportedFormat:
            return .notADatabase
        case .storage(let storage) where storage.code == .databaseInUse:
            return .inUse
        case .storage where isDiskFull(error):
            return .diskFull
        case .storage(let storage)
        where storage.code == .invalidArgument && storage.message.contains("does not match existing comparator"):
            return .notADatabase
        case .invalidQuery, .invalidContinuation, .privateIndex, .invalidEncryptionKey:
            return .usage
        case .uniqueViolation, .invalidIndexValue, .emptyKey, .keyTooLong, .encodingFailed, .invalidBucketName,
            .invalidIndexDefinition, .indexNotDeclaredPlaintext:
            return .invalidInput
        default:
            return .failure
        }
    }

    /// Whether the storage refused a write because its disk is full.
    static func isDiskFull(_ error: BuriError) -> Bool {
        guard case .storage(let storage) = error else { return false }
        return storage.message.contains("No space left on device") || storage.message.contains("Disk quota exceeded")
    }

    /// A full disk, said so that the reader knows nothing was lost.
    static func diskFullMessage(_ path: String) -> String {
        "the disk holding '\(path)' is full: this change was not written, and the data stored before it is intact; "
            + "free space on that disk and run the command again"
    }
}

/// Runs `body`, throwing whatever it throws as a ``TransferError``.
func transferring<R>(_ body: () throws -> R) throws(TransferError) -> R {
    do {
        return try body()
    } catch {
        throw TransferError.wrapping(error)
    }
}
