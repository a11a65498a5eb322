import Buri

/// How an import reads its objects: their key field, the indexes of a new bucket, date fields,
/// and whether it stores in separate commits instead of atomically.
///
/// ```swift
/// var options = ImportOptions(keyField: "objectId")
/// options.indexes = [try .init(name: "age", kind: .numeric), try .init(name: "city", kind: .binary, field: "address.city")]
/// options.dateFields = ["born"]
/// ```
public struct ImportOptions: Sendable, Hashable {
    /// An index a new bucket gets: its name, its kind, and the field (a top-level name or a
    /// dotted path into nested objects) whose values it holds.
    ///
    /// ```swift
    /// let city = try ImportOptions.Index(name: "city", kind: .binary, field: "address.city")
    /// ```
    public struct Index: Sendable, Hashable {
        /// The index's name.
        ///
        /// ```swift
        /// print(city.name)       // city
        /// ```
        public var name: String
        /// The field as written (`address.city`; `v1\.2` for a name with a dot in it).
        ///
        /// ```swift
        /// print(city.field)      // address.city
        /// ```
        public var field: String
        /// The keys of nested objects the field path walks (`["address", "city"]`).
        ///
        /// ```swift
        /// print(city.path)       // ["address", "city"]
        /// ```
        public var path: [String]
        /// Binary (strings) or numeric (numbers, dates).
        ///
        /// ```swift
        /// print(city.kind)       // binary
        /// ```
        public var kind: IndexKind
        /// For a full-text index (`buri import --text-index`): its tokenizer and stop words; its
        /// ``kind`` is then `.binary`, and the new bucket gets the catalog entry a `.text`
        /// declaration makes (one binary component, multi-valued, entries with positions).
        package var text: TextIndexDefinition?

        /// Index `name` of `kind` over `field` (default: the field of the index's name): a
        /// top-level name or a dotted path, in which `\.` is a dot inside a name and `\\` a
        /// backslash.
        ///
        /// ```swift
        /// let age = try ImportOptions.Index(name: "age", kind: .numeric)
        /// ```
        /// - Throws: ``TransferError`` (`.usage`) for an empty name or a malformed field path.
        public init(name: String, kind: IndexKind, field: String? = nil) throws(TransferError) {
            let field = field ?? name
            guard !name.isEmpty else { throw TransferError(.usage, "an index needs a name") }
            switch IndexDefinition.parseFieldPath(field) {
            case .success(let keys): path = keys
            case .failure(let error):
                throw TransferError(
                    .usage,
                    "index '\(name)': \(error.description) (write a key with a dot in it as 'v1\\.2')")
            }
            self.name = name
            self.field = field
            self.kind = kind
        }

        /// Full-text index `name` over the text (or array of texts) in `field` (default: the
        /// field of the index's name), as the `.text` declaration indexes it: tokenizer `text`.
        package init(
            name: String, textField field: String? = nil, text: TextIndexDefinition = TextIndexDefinition()
        )
            throws(TransferError)
        {
            try self.init(name: name, kind: .binary, field: field)
            self.text = text
        }

        /// What the index is, for messages: "binary", "numeric" or "text".
        var kindName: String { text != nil ? "text" : kind.rawValue }

        /// Whether `definition` (an existing bucket's, or an export schema's) is this index: same
        /// kind, same field and, for a text index, the same tokenizer and stop words.
        func matches(_ definition: IndexDefinition) -> Bool {
            guard definition.components == [kind], definition.componentPaths.map({ $0 == [path] }) != false else {
                return false
            }
            switch (text, definition.text) {
            case (nil, nil): return true
            case let (mine?, theirs?):
                return mine.tokenizer == theirs.tokenizer
                    && (mine.stopWords ?? []).map { Array($0.utf8) } == (theirs.stopWords ?? []).map { Array($0.utf8) }
            default: return false
            }
        }
    }

    /// The field holding each plain object's key (a string, or an integer stored as its decimal
    /// text); nil for the bucket's recorded one (or, for an export, its schema line's).
    ///
    /// ```swift
    /// options.keyField = "objectId"
    /// ```
    public var keyField: String?
    /// The indexes a new bucket gets (an existing bucket keeps its own; those given must match
    /// them). Ignored for a bucket an export's schema line defines, except that each must be one of
    /// its indexes.
    ///
    /// ```swift
    /// options.indexes.append(try .init(name: "locale", kind: .binary))
    /// ```
    public var indexes: [Index]
    /// Top-level fields that hold dates as seconds since 1970: a number there is stored as a date
    /// (as a Swift `Date` property is), and a numeric index over it indexes it as one.
    ///
    /// ```swift
    /// options.dateFields = ["born", "due"]
    /// ```
    public var dateFields: [String]
    /// Store in commits of this many objects straight into the bucket, instead of staging them and
    /// publishing them in one commit: NOT atomic — an import that fails midway leaves the chunks
    /// before the failure stored. Nil (the default): atomic.
    ///
    /// ```swift
    /// options.chunkSize = 500   // a huge import into a bucket others read meanwhile
    /// ```
    public var chunkSize: Int?
    /// The names of the new bucket's indexes declared plaintext (`buri import --plaintext-index`):
    /// in an encrypted database their values are stored readable (numbers in their order, which
    /// an encrypted database requires of a numeric index) rather than as keyed tokens; in a
    /// plaintext one it changes nothing but the catalog. Each must name one of ``indexes``, or
    /// an index of the export's schema line; an existing bucket's index must already be declared so.
    ///
    /// ```swift
    /// options.plaintextIndexes = ["age"]   // an encrypted database refuses a numeric index otherwise
    /// ```
    public var plaintextIndexes: [String]

    /// Options; the defaults import atomically, keyed by the bucket's recorded key field.
    ///
    /// ```swift
    /// let options = ImportOptions(keyField: "id", dateFields: ["due"])
    /// ```
    public init(
        keyField: String? = nil, indexes: [Index] = [], dateFields: [String] = [], chunkSize: Int? = nil,
        plaintextIndexes: [String] = []
    ) {
        self.keyField = keyField
        self.indexes = indexes
        self.dateFields = dateFields
        self.chunkSize = chunkSize
        self.plaintextIndexes = plaintextIndexes
    }

    /// The options' own mistakes, found before anything is read.
    func check() throws(TransferError) {
        if let keyField, keyField.isEmpty { throw TransferError(.usage, "the key field's name is empty") }
        if let chunkSize, chunkSize < 1 {
            throw TransferError(.usage, "the chunk size must be a positive number of objects, not \(chunkSize)")
        }
        for field in dateFields where (try? IndexDefinition.parseFieldPath(field).get().count) != 1 {
            throw TransferError(
                .usage, "date field '\(field)' is not a top-level field name; nested date fields are not supported")
        }
        var names = Set<[UInt8]>()
        for index in indexes where !names.insert(Array(index.name.utf8)).inserted {
            throw TransferError(.usage, "index '\(index.name)' is given twice; give each index once")
        }
        if plaintextIndexes.contains("") {
            throw TransferError(.usage, "an index declared plaintext needs a name")
        }
    }
}

/// What an import stored.
///
/// ```swift
/// let report = try db.importJSONLines(from: .file("people.jsonl"), into: "Person")
/// print("read \(report.objectsRead), the bucket holds \(report.objectsAfter)")
/// ```
public struct ImportReport: Sendable, Hashable {
    /// The bucket imported into.
    ///
    /// ```swift
    /// print("imported into \(report.bucket)")
    /// ```
    public var bucket: String
    /// Whether the import created the bucket.
    ///
    /// ```swift
    /// if report.createdBucket { print("new bucket") }
    /// ```
    public var createdBucket: Bool
    /// The objects read from the input (a key given twice counts twice).
    ///
    /// ```swift
    /// print("\(report.objectsRead) objects read")
    /// ```
    public var objectsRead: Int
    /// The objects the bucket held before.
    ///
    /// ```swift
    /// print("\(report.objectsBefore) before")
    /// ```
    public var objectsBefore: Int
    /// The objects it holds after.
    ///
    /// ```swift
    /// print("\(report.objectsAfter) after")
    /// ```
    public var objectsAfter: Int
    /// The records of other buckets an export held, skipped, by bucket.
    ///
    /// ```swift
    /// for (bucket, count) in report.skippedBuckets { print("skipped \(count) of \(bucket)") }
    /// ```
    public var skippedBuckets: [String: Int]
    /// The new bucket's indexes that no object gave a value (a field name that matches nothing is
    /// likely a typo); empty for an existing bucket or one an export's schema line defines.
    ///
    /// ```swift
    /// for index in report.unfilledIndexes { print("index \(index.name) has no entries") }
    /// ```
    public var unfilledIndexes: [IndexDefinition]
    /// The size of the input in bytes.
    ///
    /// ```swift
    /// print("\(report.inputBytes) bytes read")
    /// ```
    public var inputBytes: Int
    /// Every byte the search for newlines looked at (for a test that reading is linear).
    package var newlineSearchBytes: Int

    /// The objects the bucket gained.
    ///
    /// ```swift
    /// print("\(report.objectsAdded) added")
    /// ```
    public var objectsAdded: Int { objectsAfter - objectsBefore }

    /// The objects read that replaced one of the same key (one the bucket held, or an earlier
    /// line's: the last line of a key wins).
    ///
    /// ```swift
    /// if report.objectsReplaced > 0 { print("\(report.objectsReplaced) replaced") }
    /// ```
    public var objectsReplaced: Int { max(0, objectsRead - objectsAdded) }
}

/// An import of JSON Lines into one bucket, in two steps, so that a caller can decide between them
/// (create the database, say) once the input is known to be good: ``check(progress:)`` reads every
/// line and writes nothing; ``store(into:progress:chunkCommitted:)`` stores the objects.
///
/// The import is atomic with bounded memory: the input is read line by line (a pipe is copied to a
/// temporary file first), the bucket's objects and the new ones are stored in chunks under a
/// fresh, unpublished bucket id, and one commit publishes them. On any error the stage is deleted
/// and the database is left exactly as it was; if the process is killed, the next open that writes
/// deletes the stage. A new bucket's input (and a chunked import's) is checked in a first pass
/// before anything is written. With ``ImportOptions/chunkSize`` the objects go straight into the
/// bucket in commits of that many instead (not atomic).
///
/// ```swift
/// let load = try JSONLinesImport(from: .file("people.jsonl"), into: "Person", existing: nil,
///                                options: ImportOptions(keyField: "objectId"))
/// try load.check()                                  // every line read; nothing written
/// let db = try BuriDatabase.create(location: "people.buri")
/// let report = try load.store(into: db)
/// ```
public final class JSONLinesImport {
    /// The bucket imported into.
    ///
    /// ```swift
    /// print("importing into \(load.bucket)")
    /// ```
    public let bucket: String
    let existing: BucketDescriptor?
    let options: ImportOptions
    /// The plan of the checking pass (its definitions make a new bucket).
    private var plan: ImportPlan
    private var checked = false
    private let input: LineReader

    /// An import of `input` into bucket `bucket`, whose definition is `existing` (nil if it does
    /// not exist yet). The options are checked against the bucket, then the input is opened.
    ///
    /// ```swift
    /// let existing = try db.bucketInfo(named: "Person")
    /// let load = try JSONLinesImport(from: .standardInput, into: "Person", existing: existing)
    /// ```
    /// - Throws: ``TransferError``: `.usage` for options the bucket contradicts, `.invalidInput`
    ///   for a bucket with an index whose values cannot be computed from JSON, `.failure` for an
    ///   input that cannot be read.
    public init(
        from input: TransferInput, into bucket: String, existing: BucketDescriptor?,
        options: ImportOptions = ImportOptions()
    ) throws(TransferError) {
        try options.check()
        self.bucket = bucket
        self.existing = existing
        self.options = options
        plan = try transferring { try ImportPlan(bucket: bucket, existing: existing, options: options) }
        self.input = try LineReader(input)
    }

    /// Whether ``store(into:progress:chunkCommitted:)`` needs the checking pass first (it runs it
    /// itself if not done): for a new bucket, whose definition the whole input decides, and for a
    /// chunked import.
    ///
    /// ```swift
    /// if load.needsCheck { try load.check() }
    /// ```
    public var needsCheck: Bool { existing == nil || options.chunkSize != nil }

    /// The size of the input in bytes.
    ///
    /// ```swift
    /// print("\(load.inputBytes) bytes to import")
    /// ```
    public var inputBytes: Int { input.size }

    /// Reads every line and checks it, writing nothing: after it, only the database (a unique
    /// index, a full disk) can refuse the import. Once it has passed, calling it again does nothing.
    ///
    /// ```swift
    /// try load.check { step in print(step.done, "of", step.total, "bytes") }
    /// ```
    /// - Throws: ``TransferError`` (`.invalidInput`, naming the line) for a line refused.
    public func check(progress: TransferProgressHandler? = nil) throws(TransferError) {
        guard !checked else { return }
        try transferring {
            // A fresh plan: a check that failed before may have read part of the input.
            plan = try ImportPlan(bucket: bucket, existing: existing, options: options)
            try eachLine(.checking, progress) { line, number in _ = try plan.prepare(line, line: number) }
            try plan.checkEnd()
        }
        checked = true
    }

    /// Stores the input's objects into bucket ``bucket`` of `db`: staged and published in one
    /// commit (or in chunks, with ``ImportOptions/chunkSize``). On an error the stage is deleted
    /// (or marked for purging, if deleting fails), and a bucket the chunked import created is
    /// dropped.
    ///
    /// ```swift
    /// let report = try load.store(into: db)
    /// print("imported \(report.objectsRead) objects")
    /// ```
    /// - Parameters:
    ///   - progress: told how each phase goes (given, an import into an existing bucket also
    ///     counts its objects first, for the total).
    ///   - chunkCommitted: called right after each chunk of objects is committed (into the stage,
    ///     or into the bucket): a point a test can stop the process at.
    /// - Throws: ``TransferError``: `.invalidInput` for a line refused (a unique index broken,
    ///   naming the line, key, value and holder), `.diskFull`, `.failure` for a storage error.
    public func store(
        into db: BuriDatabase, progress: TransferProgressHandler? = nil, chunkCommitted: (() -> Void)? = nil
    ) throws(TransferError) -> ImportReport {
        if needsCheck, !checked { try check(progress: progress) }
        let definitions = plan.newDefinitions()
        let keyField = plan.keyField
        let schemaVersion = plan.schemaVersion
        var storing = try transferring { try ImportPlan(bucket: bucket, existing: existing, options: options) }
        var createdBucket = false
        var stage: StagedImport? = nil
        /// The objects the bucket held before (copied into the stage) and after the import.
        var before = 0
        var after = 0
        do {
            var chunk: [RawObject] = []
            var chunkLines: [Int] = []
            var chunkBytes = 0
            if let chunkSize = options.chunkSize {
                // Asked for: one commit per chunk, not atomic as a whole.
                let raw: RawBucket
                if existing == nil {
                    raw = try db.createBucket(
                        named: bucket, keyField: keyField, indexes: definitions, schemaVersion: schemaVersion)
                    createdBucket = true
                } else {
                    raw = try db.rawBucket(named: bucket)
                    before = try raw.count()
                }
                try eachLine(.storing, progress) { line, number in
                    guard let object = try storing.prepare(line, line: number) else { return }
                    chunk.append(object)
                    chunkLines.append(number)
                    if chunk.count >= chunkSize {
                        try storeChunk(chunk, lines: chunkLines, partial: true) { try raw.store($0, sync: true) }
                        chunkCommitted?()
                        chunk.removeAll(keepingCapacity: true)
                        chunkLines.removeAll(keepingCapacity: true)
                    }
                }
                if !chunk.isEmpty {
                    try storeChunk(chunk, lines: chunkLines, partial: true) { try raw.store($0, sync: true) }
                    chunkCommitted?()
                }
                after = try raw.count()
            } else {
                // Atomic: staged under a fresh bucket id, published with one catalog commit; a new
                // bucket is created by that commit (until then the catalog does not change).
                let load: StagedImport
                if existing == nil {
                    try db.requirePlaintextDeclarations(definitions, bucket: bucket)
                    load = try db.stageImport(
                        creating: bucket, keyField: keyField, indexes: definitions, schemaVersion: schemaVersion)
                } else {
                    let existingCount = progress != nil ? try db.rawBucket(named: bucket).count() : 0
                    progress?(
                        TransferProgress(
                            phase: .copyingExisting, done: 0, total: existingCount, unit: .objects,
                            isPhaseBoundary: true))
                    var copied = 0
                    load = try db.stageImport(into: bucket, chunkSize: stageChunk) { done in
                        copied = done
                        progress?(
                            TransferProgress(phase: .copyingExisting, done: done, total: existingCount, unit: .objects))
                    }
                    before = copied
                    progress?(
                        TransferProgress(
                            phase: .copyingExisting, done: existingCount, total: existingCount, unit: .objects,
                            isPhaseBoundary: true))
                }
                stage = load
                try eachLine(.storing, progress) { line, number in
                    guard let object = try storing.prepare(line, line: number) else { return }
                    chunkBytes += object.payload.count + object.key.utf8.count
                    chunk.append(object)
                    chunkLines.append(number)
                    if chunk.count >= stageChunk || chunkBytes >= stageChunkBytes {
                        try storeChunk(chunk, lines: chunkLines, partial: false) { try load.store($0) }
                        chunkCommitted?()
                        chunk.removeAll(keepingCapacity: true)
                        chunkLines.removeAll(keepingCapacity: true)
                        chunkBytes = 0
                    }
                }
                if !chunk.isEmpty {
                    try storeChunk(chunk, lines: chunkLines, partial: false) { try load.store($0) }
                    chunkCommitted?()
                }
                chunk = []
                try storing.checkEnd()
                after = try publishStages(db, [load], progress: progress).reduce(0, +)
            }
        } catch {
            var failure = TransferError.wrapping(error)
            if let stage {
                failure.stageBegun = true
                progress?(
                    TransferProgress(phase: .purgingStage, done: 0, total: 1, unit: .objects, isPhaseBoundary: true))
                // Deleted now (not left to a background purge this process may not live to
                // finish), so the database is exactly as it was.
                do {
                    try stage.discard()
                } catch {
                    failure.stageDiscardError = error
                }
                progress?(
                    TransferProgress(phase: .purgingStage, done: 1, total: 1, unit: .objects, isPhaseBoundary: true))
            }
            if createdBucket {
                try? db.dropBucket(named: bucket)
                try? db.purgeRetiredBuckets()
            }
            throw failure
        }
        return ImportReport(
            bucket: bucket, createdBucket: existing == nil, objectsRead: storing.prepared, objectsBefore: before,
            objectsAfter: after, skippedBuckets: storing.skipped,
            unfilledIndexes: plan.unfilledIndexes(objectCount: storing.prepared), inputBytes: input.size,
            newlineSearchBytes: input.bytesSearched)
    }

    /// Closes the input (a temporary copy of a pipe is gone with it); done when the import is
    /// released, too.
    ///
    /// ```swift
    /// defer { load.close() }
    /// ```
    public func close() { input.release() }

    /// Runs `body` over every line with its number, reporting the reading as `phase`.
    private func eachLine(
        _ phase: TransferProgress.Phase, _ progress: TransferProgressHandler?, _ body: ([UInt8], Int) throws -> Void
    ) throws {
        try input.rewind()
        let total = input.size
        progress?(TransferProgress(phase: phase, done: 0, total: total, unit: .bytes, isPhaseBoundary: true))
        var number = 0
        while let line = try input.nextLine() {
            number += 1
            try body(line, number)
            if let progress, number % 1000 == 0 {
                progress(
                    TransferProgress(phase: phase, done: input.consumed, total: total, unit: .bytes, lines: number))
            }
        }
        progress?(
            TransferProgress(
                phase: phase, done: input.consumed, total: total, unit: .bytes, lines: number, isPhaseBoundary: true))
    }
}

extension BuriDatabase {
    /// Imports JSON Lines into bucket `bucket`, creating it if it does not exist: plain JSON
    /// objects (keyed by ``ImportOptions/keyField``, or the bucket's recorded key field), or the
    /// output of an export (its records of this bucket; a new bucket gets the indexes of the
    /// export's schema line). Atomic, in bounded memory: see ``JSONLinesImport``.
    ///
    /// ```swift
    /// let report = try db.importJSONLines(
    ///     from: .file("people.jsonl"), into: "Person",
    ///     options: ImportOptions(keyField: "objectId", indexes: [try .init(name: "age", kind: .numeric)]))
    /// print("the bucket holds \(report.objectsAfter) objects")
    /// ```
    /// - Throws: ``TransferError``; then nothing was written (with ``ImportOptions/chunkSize``,
    ///   the chunks before the failing one are stored).
    @discardableResult
    public func importJSONLines(
        from input: TransferInput, into bucket: String, options: ImportOptions = ImportOptions(),
        progress: TransferProgressHandler? = nil, chunkCommitted: (() -> Void)? = nil
    ) throws(TransferError) -> ImportReport {
        let existing = try transferring { try bucketInfo(named: bucket) }
        let load = try JSONLinesImport(from: input, into: bucket, existing: existing, options: options)
        defer { load.close() }
        return try load.store(into: self, progress: progress, chunkCommitted: chunkCommitted)
    }
}
