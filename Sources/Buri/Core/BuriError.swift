import BuriStorage

/// Everything that can go wrong in Buri, each case naming the bucket, key, index or path
/// involved and saying what to do about it.
///
/// ```swift
/// do {
///     try people.store(person)
/// } catch BuriError.uniqueViolation(let bucket, let index, let value, let holder) {
///     print("\(value) in \(bucket).\(index) already belongs to \(holder)")
/// }
/// ```
public enum BuriError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An object's key is the empty string.
    case emptyKey(bucket: String)
    /// An object's key is longer than the format allows.
    case keyTooLong(bucket: String, keyPrefix: String, length: Int, limit: Int)
    /// A value cannot be indexed (NaN, a value too long, the wrong kind for the index).
    case invalidIndexValue(bucket: String?, key: String?, index: String?, reason: String)
    /// A query or definition names an index the bucket does not have.
    case unknownIndex(bucket: String, index: String, known: [String])
    /// A query does not fit the index it names (a string bound on a numeric index, too many values for its arity).
    case invalidQuery(bucket: String, index: String?, reason: String)
    /// Storing the object would give a unique index a second holder of one value. Nothing was written.
    case uniqueViolation(bucket: String, index: String, value: String, holder: String)
    /// A stored record's payload does not decode as the requested Swift type.
    case decodingFailed(bucket: String, key: String, type: String, reason: String)
    /// An object could not be encoded.
    case encodingFailed(bucket: String, key: String, reason: String)
    /// Bytes on disk do not follow Buri's format: a damaged record or index entry.
    case corruption(bucket: String?, key: String?, index: String?, reason: String)
    /// LevelDB cannot read the database's files: a table block or log record fails its checksum,
    /// is garbled or is cut short. `bucket` names the bucket being read when the damage was met
    /// (`nil` while opening). A read never returns a shorter result instead, and opening refuses
    /// a damaged log rather than dropping the writes in it; ``BuriDatabase/repair(path:options:levelDB:)``
    /// (`buri repair PATH`) salvages what is readable and says what it could not recover.
    case damaged(path: String, bucket: String?, reason: String)
    /// The directory holds a LevelDB database that Buri did not create.
    case notABuriDatabase(path: String)
    /// The database was written by a newer Buri whose format this version cannot read.
    case unsupportedFormat(path: String, found: Int, supported: Int)
    /// A bucket name is empty or not allowed.
    case invalidBucketName(name: String, reason: String)
    /// The bucket does not exist (for read-only access to a bucket by name).
    case unknownBucket(name: String, known: [String])
    /// A continuation token that is malformed, or was issued for another bucket, index or query
    /// (conditions or direction), so resuming from it would skip or repeat results.
    case invalidContinuation(bucket: String?, reason: String)
    /// An index declaration conflicts with itself or the stored catalog.
    case invalidIndexDefinition(bucket: String, index: String, reason: String)
    /// The database has been closed.
    case databaseClosed(path: String)
    /// The storage engine reported an error (I/O, locking, damage to its own files, a lost cluster).
    case storage(StorageError)
    /// Another client of a shared engine kept changing what a write read; it was tried `attempts`
    /// times and nothing was written.
    case conflict(attempts: Int, detail: String)
    /// A transaction was used outside its closure, written to while only reading, or a write was
    /// started on a database already writing on this thread.
    case invalidTransaction(reason: String)
    /// A ``BuriDatabase/changes(includingObjects:bufferLimit:)`` or ``Bucket/changes(includingObjects:bufferLimit:)``
    /// consumer fell `limit` commits behind: its stream ends with this error after the commits it
    /// was given, rather than skip any. Read the current state afresh and observe again.
    case observerFellBehind(bucket: String?, limit: Int)
    /// The exact integer sum of index `index`'s values (``Bucket/aggregate(_:where:)-5iolv``) does not
    /// fit in 128 bits.
    case aggregateOverflow(bucket: String, index: String)
    /// A query by key path (``Query/where(_:equals:)``) names a property of `type` that no
    /// declared single-component index reads.
    case unindexedKeyPath(type: String, keyPath: String)
    /// A record was written by a newer schema version of its type (`stored`) than this code knows
    /// (`known`): it is not decoded, since a wrong decode would lose fields.
    case recordFromNewerSchema(bucket: String, key: String, stored: UInt64, known: UInt64)
    /// Upgrading a record of schema version `from` failed: a migration step threw, or the payload
    /// is not a map of fields.
    case migrationFailed(bucket: String, key: String, from: UInt64, reason: String)
    /// A migration step as data is not one this Buri can apply.
    case invalidMigration(reason: String)
    /// Object `key` of `bucket` cannot be deleted: object `holderKey` of `holderBucket` refers to it
    /// through relationship `index`, whose delete rule is ``DeleteRule/deny``. Nothing was deleted.
    case referenced(bucket: String, key: String, holderBucket: String, holderKey: String, index: String)
    /// Object `key` of `bucket` refers through relationship `index` to `target`, which no object
    /// of bucket `targetBucket` has: a reference is stored only to an object that exists (in the
    /// same commit, or before it). Nothing was written.
    case danglingReference(bucket: String, key: String, index: String, targetBucket: String, target: String)
    /// A named value's name is empty or longer than 1024 bytes of UTF-8 (``NamedValues``).
    case invalidValueName(name: String, reason: String)
    /// The named value `name` does not decode as the requested Swift type `type` (stored as another
    /// type), or its stored bytes are not one CBOR item (damaged). Never a wrong value nor `nil`.
    case valueDecodingFailed(name: String, type: String, reason: String)
    /// A value could not be encoded to be stored under `name`.
    case valueEncodingFailed(name: String, reason: String)
    /// A full-text query given to ``Bucket/search(_:_:)-(String,String)`` does not parse:
    /// `message` says why and `offset` (in Characters) where.
    case textQuerySyntax(bucket: String, index: String, query: String, message: String, offset: Int)
    /// The database is encrypted and was opened without a key (``BuriOptions/encryption``). Nothing was read or written.
    case encryptionKeyRequired(path: String)
    /// The key or passphrase given is not the database's, or its encryption header is unreadable.
    /// Nothing was read or written.
    case wrongEncryptionKey(path: String, reason: String)
    /// A key was given for a database that is not encrypted. Nothing was written.
    case notEncrypted(path: String)
    /// A key file or passphrase that cannot be used (missing, the wrong length, empty).
    case invalidEncryptionKey(reason: String)
    /// A sealed record (or named value, with `bucket` `nil` and `key` its name) failed its
    /// authentication: its bytes were changed on disk, or moved from another key, bucket or database.
    case authenticationFailed(bucket: String?, key: String, reason: String)
    /// An encrypted database was given an index with a numeric component not declared plaintext
    /// (``BuriIndex/plaintext()``): numbers are stored in their order, which would reveal them, so
    /// Buri stores none unless the app declared it. Nothing was written.
    case indexNotDeclaredPlaintext(bucket: String, index: String)
    /// An operation a private index of an encrypted database cannot answer: its values are stored
    /// as keyed tokens, which match exactly but have no order (a range, a prefix, a sort, an aggregate).
    case privateIndex(bucket: String, index: String, operation: String)

    /// The operation a private text index refuses: a word prefix, which no token can tell.
    package static let textPrefixOperation = "a prefix query (`word*`)"

    public var description: String {
        switch self {
        case .emptyKey(let bucket):
            return "bucket '\(bucket)': an object's key is empty; give every object a non-empty key"
        case let .keyTooLong(bucket, keyPrefix, length, limit):
            return
                "bucket '\(bucket)': key '\(keyPrefix)…' is \(length) bytes, over the limit of \(limit); use a shorter key (a hash or UUID)"
        case let .invalidIndexValue(bucket, key, index, reason):
            let place = [bucket.map { "bucket '\($0)'" }, key.map { "key '\($0)'" }, index.map { "index '\($0)'" }]
                .compactMap { $0 }.joined(separator: ", ")
            return (place.isEmpty ? "" : place + ": ") + "cannot index this value: " + reason
        case let .unknownIndex(bucket, index, known):
            let list =
                known.isEmpty
                ? "it has no indexes" : "its indexes are " + known.map { "'\($0)'" }.joined(separator: ", ")
            return "bucket '\(bucket)' has no index '\(index)'; \(list)"
        case let .invalidQuery(bucket, index, reason):
            return "bucket '\(bucket)'" + (index.map { ", index '\($0)'" } ?? "") + ": invalid query: " + reason
        case let .uniqueViolation(bucket, index, value, holder):
            return
                "bucket '\(bucket)': unique index '\(index)' already holds \(value) for key '\(holder)'; nothing was written"
        case let .decodingFailed(bucket, key, type, reason):
            return
                "bucket '\(bucket)', key '\(key)': the stored object does not decode as \(type) (\(reason)); is the bucket opened with the right type?"
        case let .encodingFailed(bucket, key, reason):
            return "bucket '\(bucket)', key '\(key)': the object could not be encoded: \(reason)"
        case let .corruption(bucket, key, index, reason):
            let place = [bucket.map { "bucket '\($0)'" }, key.map { "key '\($0)'" }, index.map { "index '\($0)'" }]
                .compactMap { $0 }.joined(separator: ", ")
            return (place.isEmpty ? "" : place + ": ") + "corrupted data: \(reason); "
                + Self.corruptionAdvice(key: key, index: index)
        case let .damaged(path, bucket, reason):
            let met = bucket.map { " (met in bucket '\($0)')" } ?? ""
            return
                "the database at '\(path)' is damaged\(met): \(reason). No shorter result was returned and nothing was dropped; "
                + "close the database, keep a copy of its directory, and run `buri repair \(path)` (BuriDatabase.repair(path:)) "
                + "to salvage what is readable: it reports what it could not recover"
        case .notABuriDatabase(let path):
            return
                "'\(path)' is a LevelDB database that Buri did not create; open a Buri database or an empty directory"
        case let .unsupportedFormat(path, found, supported):
            return
                "'\(path)' uses Buri format version \(found), but this Buri reads up to version \(supported); upgrade Buri"
        case let .invalidBucketName(name, reason):
            return "bucket name '\(name)' is not allowed: \(reason)"
        case let .unknownBucket(name, known):
            let list =
                known.isEmpty
                ? "the database has no buckets" : "its buckets are " + known.map { "'\($0)'" }.joined(separator: ", ")
            return "there is no bucket '\(name)'; \(list)"
        case let .invalidContinuation(bucket, reason):
            return (bucket.map { "bucket '\($0)': " } ?? "") + "invalid continuation token: \(reason); "
                + "resume a walk only with the token its own previous page returned, using the same query"
        case let .invalidIndexDefinition(bucket, index, reason):
            return "bucket '\(bucket)', index '\(index)': \(reason)"
        case .databaseClosed(let path):
            return "the Buri database at '\(path)' has been closed; open it again"
        case .storage(let error):
            return error.description
        case let .conflict(attempts, detail):
            return
                "the write conflicted with other clients' writes \(attempts) time(s) and was given up; nothing was written (\(detail)); retry it, or write less at once"
        case .invalidTransaction(let reason):
            return "transaction misuse: \(reason)"
        case let .recordFromNewerSchema(bucket, key, stored, known):
            return
                "bucket '\(bucket)': object '\(key)' was written with schema version \(stored), newer than this code's \(known); open the database with the newer version of the app, or declare the version and its migration"
        case .invalidMigration(let reason):
            return "invalid migration step: \(reason)"
        case let .referenced(bucket, key, holderBucket, holderKey, index):
            return
                "bucket '\(bucket)': object '\(key)' was not deleted: object '\(holderKey)' of bucket '\(holderBucket)' refers to it through '\(index)', whose delete rule is deny; remove that reference first (nothing was deleted)"
        case let .danglingReference(bucket, key, index, targetBucket, target):
            return
                "bucket '\(bucket)': object '\(key)' refers through '\(index)' to '\(target)', which bucket '\(targetBucket)' does not hold; store the target first or in the same transaction (nothing was written)"
        case let .invalidValueName(name, reason):
            return "value name '\(name.prefix(64))' is not allowed: \(reason)"
        case let .valueDecodingFailed(name, type, reason):
            return
                "named value '\(name)': the stored value does not decode as \(type) (\(reason)); read it as the type it was stored as, or set it again (`buri get-value` shows what it holds)"
        case .encryptionKeyRequired(let path):
            return "the database at \(path) is encrypted: open it with its key (BuriOptions.encryption in Swift, "
                + "--key-file or --passphrase-file with buri); nothing was read or written"
        case let .wrongEncryptionKey(path, reason):
            return
                "the key given does not open the encrypted database at \(path): \(reason); nothing was read or written"
        case .notEncrypted(let path):
            return "a key was given, but the database at \(path) is not encrypted; open it without one, or copy it "
                + "into a new encrypted database (`buri export`, then `buri restore --key-file`); nothing was written"
        case .invalidEncryptionKey(let reason):
            return "the encryption key cannot be used: \(reason)"
        case let .authenticationFailed(bucket, key, reason):
            // A record met where its bucket's name was not at hand names the bucket by its id (in the reason).
            let what =
                bucket.map { "record \(String(reflecting: key)) in bucket \(String(reflecting: $0))" }
                ?? (reason.hasPrefix(Self.sealedRecordPrefix)
                    ? "record \(String(reflecting: key))" : "value \(String(reflecting: key))")
            return "the sealed \(what) failed its authentication (\(reason)): its bytes were changed on disk or moved "
                + "from another key, bucket or database; restore it from a backup or delete it (`buri check` lists "
                + "every such record)"
        case let .indexNotDeclaredPlaintext(bucket, index):
            return
                "index \(String(reflecting: index)) of bucket \(String(reflecting: bucket)) has a numeric component, "
                + "whose values an encrypted database would store in their order, readable in its files; declare it "
                + "`.plaintext()` (`--plaintext-index` with buri) to accept that, or leave the field unindexed; "
                + "nothing was written"
        case let .privateIndex(bucket, index, operation):
            let instead =
                operation == Self.textPrefixOperation
                ? "search it for whole words and phrases" : "query it for exact values"
            return "index \(String(reflecting: index)) of bucket \(String(reflecting: bucket)) is private in this "
                + "encrypted database: its values are stored as keyed tokens, which match exactly but have no order, "
                + "so it cannot answer \(operation); \(instead), or declare it `.plaintext()` "
                + "(which leaves its values readable in the files)"
        case let .textQuerySyntax(bucket, index, query, message, offset):
            return
                "bucket '\(bucket)', text index '\(index)': the query does not parse at offset \(offset): \(message)\n"
                + String(query.map { $0.isWhitespace ? " " : $0 }) + "\n" + String(repeating: " ", count: offset) + "^"
        case let .valueEncodingFailed(name, reason):
            return "named value '\(name)': the value could not be encoded: \(reason); nothing was written"
        case let .migrationFailed(bucket, key, from, reason):
            return
                "bucket '\(bucket)': object '\(key)' could not be upgraded from schema version \(from): \(reason); fix the migration step (the record is unchanged)"
        case let .unindexedKeyPath(type, keyPath):
            return
                "no index of \(type) reads \(keyPath): declare one in its BuriSchema (such as .numeric(\"name\", \\.property) or .binary(\"name\", \\.property)), or query an index by name"
        case let .aggregateOverflow(bucket, index):
            return
                "bucket '\(bucket)', index '\(index)': the exact sum of the index's integer values does not fit in 128 bits; aggregate fewer objects at a time (a narrower query) and add the parts as you need"
        case let .observerFellBehind(bucket, limit):
            return
                "the change stream\(bucket.map { " of bucket '\($0)'" } ?? "") ended: its consumer fell \(limit) commits behind and no commit is ever skipped; read the current state again and start a new stream (or pass a larger bufferLimit)"
        }
    }
}

extension BuriError {
    /// Wraps any error from a lower layer, keeping `BuriError`s as they are. LevelDB's
    /// corruption status becomes ``damaged(path:bucket:reason:)``; other LevelDB errors
    /// ``storage(_:)``.
    static func wrap(_ error: any Error) -> BuriError {
        if let error = error as? BuriError { return error }
        if let error = error as? StorageError {
            if error.code == .corruption {
                return .damaged(path: error.location ?? "(unknown path)", bucket: nil, reason: error.message)
            }
            return .storage(error)
        }
        return .corruption(bucket: nil, key: nil, index: nil, reason: String(describing: error))
    }

    /// The same error, with damage that names no bucket attributed to `bucket`.
    func attributed(to bucket: String?) -> BuriError {
        if case let .damaged(path, nil, reason) = self, let bucket {
            return .damaged(path: path, bucket: bucket, reason: reason)
        }
        if case let .authenticationFailed(nil, key, reason) = self, let bucket,
            reason.hasPrefix(Self.sealedRecordPrefix)
        {
            return .authenticationFailed(bucket: bucket, key: key, reason: reason)
        }
        return self
    }

    /// What to do about a record or index entry that does not follow the format: `check --repair`
    /// rebuilds index entries, but cannot bring back a record whose own bytes are damaged.
    static func corruptionAdvice(key: String?, index: String?) -> String {
        if index != nil {
            return "run `buri check --repair` to rebuild the index entries from the records"
        }
        if key != nil {
            return "the record itself is damaged and no repair can restore it: delete the object or store it again "
                + "(from a backup or its source); `buri check` lists every damaged record"
        }
        return "run `buri check` to list every problem; `buri check --repair` rebuilds index entries, "
            + "`buri repair` salvages a database whose files are damaged"
    }
}
