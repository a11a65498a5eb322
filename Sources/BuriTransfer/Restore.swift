import Buri
import Foundation

/// What a restore recreated.
///
/// ```swift
/// let report = try BuriDatabase.restore(from: .file("dump.jsonl"), to: "copy.buri")
/// print("\(report.buckets.count) buckets, \(report.objects) objects")
/// ```
public struct RestoreReport: Sendable, Hashable {
    /// The buckets restored, in the export's order.
    ///
    /// ```swift
    /// print(report.buckets.joined(separator: ", "))
    /// ```
    public var buckets: [String]
    /// The objects they hold (a key given twice in the export is one object).
    ///
    /// ```swift
    /// print("\(report.objects) objects")
    /// ```
    public var objects: Int
    /// The named values restored (a name given twice in the export is one value).
    ///
    /// ```swift
    /// print("\(report.values) named values")
    /// ```
    public var values: Int
    /// The size of the input in bytes.
    ///
    /// ```swift
    /// print("\(report.inputBytes) bytes read")
    /// ```
    public var inputBytes: Int
    /// Every byte the search for newlines looked at (for a test that reading is linear).
    package var newlineSearchBytes: Int
}

/// Where a restore puts the buckets it recreates.
package enum RestoreDestination {
    /// An open database without buckets: what was staged is deleted after an error.
    case database(BuriDatabase)
    /// A database made by the closure once the input has shown it is an export (an input that is
    /// not one makes none): what was staged is abandoned after an error, as the caller removes the
    /// database.
    case created(() throws -> BuriDatabase)
}

extension BuriDatabase {
    /// Recreates every bucket of an export in this database, which must hold no buckets: each
    /// with its key field and indexes exactly as they were (kinds, fields, field forms, unique,
    /// multi-valued, versions), so that it answers every query the same and exports to the same
    /// bytes. The export must carry schema lines (format 3 or 4); the entries of indexes only
    /// Swift code computes come from the values format 4 records carry.
    ///
    /// The export is read line by line in bounded memory: each bucket is staged as its records
    /// come, and one commit publishes every bucket at once. On any error nothing is published and
    /// what was staged is deleted; if the process is killed, the next open that writes deletes it.
    ///
    /// ```swift
    /// let db = try BuriDatabase.inMemory()
    /// let report = try db.restore(from: .file("dump.jsonl"))
    /// ```
    /// - Parameters:
    ///   - progress: told how reading and publishing go.
    ///   - chunkCommitted: called right after each chunk of objects is committed into a stage.
    /// - Throws: ``TransferError``: `.usage` if the database has buckets, `.invalidInput` for an
    ///   input that is not a whole export (naming the line and member), `.failure` or `.diskFull`
    ///   for a storage error.
    @discardableResult
    public func restore(
        from input: TransferInput, progress: TransferProgressHandler? = nil, chunkCommitted: (() -> Void)? = nil
    ) throws(TransferError) -> RestoreReport {
        let names = try transferring { try bucketNames() }
        guard names.isEmpty else {
            throw TransferError(
                .usage,
                "the database at '\(path)' already has \(names.count) bucket\(names.count == 1 ? "" : "s"); a restore fills a database without buckets"
            )
        }
        let valueNames = try transferring { try values.names() }
        guard valueNames.isEmpty else {
            throw TransferError(
                .usage,
                "the database at '\(path)' already has \(valueNames.count) named value\(valueNames.count == 1 ? "" : "s"); a restore fills a database without buckets or named values"
            )
        }
        return try Self.restore(
            from: input, into: .database(self), progress: progress, chunkCommitted: chunkCommitted
        ).report
    }

    /// Creates a new database in directory `path` (which must not exist, or be empty) and
    /// restores an export into it (see ``restore(from:progress:chunkCommitted:)``); the database
    /// is closed when the restore ends. The database is created only once the input has shown
    /// it is an export; after an error nothing is left at `path` (an empty directory that was
    /// there stays, empty).
    ///
    /// ```swift
    /// try db.export(to: URL(fileURLWithPath: "dump.jsonl"))
    /// let report = try BuriDatabase.restore(from: .file("dump.jsonl"), to: "copy.buri")
    /// ```
    /// - Throws: ``TransferError``: `.notADatabase` if `path` exists and is not an empty directory,
    ///   and what ``restore(from:progress:chunkCommitted:)`` throws.
    @discardableResult
    public static func restore(
        from input: TransferInput, to path: String, options: BuriOptions = BuriOptions(),
        progress: TransferProgressHandler? = nil, chunkCommitted: (() -> Void)? = nil
    ) throws(TransferError) -> RestoreReport {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        var wasEmptyDirectory = false
        if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue, (try? manager.contentsOfDirectory(atPath: path))?.isEmpty == true else {
                throw TransferError(
                    .notADatabase,
                    "'\(path)' exists and is not empty; restore creates a new database: give a new path or an empty directory"
                )
            }
            wasEmptyDirectory = true
        }
        var created: BuriDatabase?
        do {
            let (report, db) = try restore(
                from: input,
                into: .created {
                    var create = options
                    create.syncWrites = true
                    let db = try BuriDatabase.create(location: path, options: create)
                    created = db
                    return db
                }, progress: progress, chunkCommitted: chunkCommitted)
            db.close()
            return report
        } catch {
            if let created {
                created.close()
                if wasEmptyDirectory {
                    for name in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
                        try? manager.removeItem(atPath: (path as NSString).appendingPathComponent(name))
                    }
                } else {
                    try? manager.removeItem(atPath: path)
                }
            }
            throw error
        }
    }

    /// Restores the export `input` holds into `destination`: the report, and the database
    /// restored into.
    ///
    /// `plaintextIndexes`: index names declared plaintext in every bucket that has an index of
    /// that name (`buri restore --plaintext-index`), besides those the export declares so; each
    /// must be the name of some index of the export.
    package static func restore(
        from source: TransferInput, into destination: RestoreDestination, plaintextIndexes: [String] = [],
        progress: TransferProgressHandler?, chunkCommitted: (() -> Void)?
    ) throws(TransferError) -> (report: RestoreReport, database: BuriDatabase) {
        let input = try LineReader(source)
        defer { input.release() }
        var restore = Restoration(input: input, progress: progress, chunkCommitted: chunkCommitted)
        restore.plaintextIndexes = plaintextIndexes
        switch destination {
        case .database(let db): restore.db = db
        case .created(let create): restore.create = create
        }
        do {
            let objects = try restore.run()
            guard let db = restore.db else { throw TransferError(.failure, "the restore made no database") }
            return (
                RestoreReport(
                    buckets: restore.stages.map(\.bucket), objects: objects, values: restore.values.count,
                    inputBytes: input.size,
                    newlineSearchBytes: input.bytesSearched), db
            )
        } catch {
            // A database the restore created is removed by its caller; one that was there (a killed
            // restore's, without buckets) keeps nothing of the stages.
            for stage in restore.stages {
                if case .database = destination { try? stage.discard() } else { stage.abandon() }
            }
            throw TransferError.restoring(error)
        }
    }
}

/// One restore's pass over its input: each schema line begins a staged import creating its
/// bucket; each record goes into its bucket's stage in chunks; all stages publish in one commit.
private struct Restoration {
    let input: LineReader
    let progress: TransferProgressHandler?
    let chunkCommitted: (() -> Void)?
    var db: BuriDatabase?
    var create: (() throws -> BuriDatabase)?
    var plans: [ImportPlan] = []
    var stages: [StagedImport] = []
    var byName: [[UInt8]: Int] = [:]
    var chunk: [RawObject] = []
    var chunkLines: [Int] = []
    var chunkBytes = 0
    var chunkOwner = -1
    var exportVersion: UInt64 = 0
    /// The named values read (format 5), published with the buckets; a name given twice: the last wins.
    var values: [(name: String, bytes: [UInt8])] = []
    var valueIndex: [[UInt8]: Int] = [:]
    /// Index names declared plaintext in every bucket that has one so named, and those seen.
    var plaintextIndexes: [String] = []
    var declaredPlaintext = Set<[UInt8]>()

    init(input: LineReader, progress: TransferProgressHandler?, chunkCommitted: (() -> Void)?) {
        self.input = input
        self.progress = progress
        self.chunkCommitted = chunkCommitted
    }

    static func fail(_ line: Int, _ message: String) -> TransferError {
        TransferError(.invalidInput, "line \(line): \(message); nothing was restored", line: line)
    }

    /// The database restored into, made when first needed.
    mutating func database() throws -> BuriDatabase {
        if let db { return db }
        guard let create else { throw TransferError(.failure, "the restore has no database") }
        let made = try create()
        db = made
        return made
    }

    mutating func flush() throws {
        if !chunk.isEmpty {
            let stage = stages[chunkOwner]
            try storeChunk(chunk, lines: chunkLines, partial: false) { try stage.store($0) }
            chunkCommitted?()
        }
        chunk.removeAll(keepingCapacity: true)
        chunkLines.removeAll(keepingCapacity: true)
        chunkBytes = 0
    }

    func report(_ number: Int, boundary: Bool = false) {
        progress?(
            TransferProgress(
                phase: .restoring, done: input.consumed, total: input.size, unit: .bytes, lines: number,
                buckets: stages.count, isPhaseBoundary: boundary))
    }

    /// Reads, stages and publishes; returns the objects the buckets hold.
    mutating func run() throws -> Int {
        try input.rewind()
        var header: (bytes: [UInt8], number: Int)?
        var number = 0
        progress?(TransferProgress(phase: .restoring, done: 0, total: input.size, unit: .bytes, isPhaseBoundary: true))
        while let line = try input.nextLine() {
            number += 1
            if progress != nil, number % 1000 == 0 { report(number) }
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            guard let header else {
                header = (line, number)
                try readHeader(line, number)
                continue
            }
            try restoreLine(line, number, header: header)
        }
        guard header != nil else {
            throw TransferError(.invalidInput, "the input is empty; give the output of `buri export`")
        }
        report(number, boundary: true)
        if let name = plaintextIndexes.first(where: { !declaredPlaintext.contains(Array($0.utf8)) }) {
            throw TransferError(
                .usage,
                "index '\(name)' is declared plaintext, but no bucket of the export has an index of that name; name one of their indexes; nothing was restored"
            )
        }
        try flush()
        let database = try database()
        do {
            // What the buckets hold (a key given twice in the dump is one object).
            return try publishStages(database, stages, values: values, progress: progress).reduce(0, +)
        } catch {
            guard case .storage(let storage) = error, storage.code == .limitExceeded else { throw error }
            // Only one commit keeps the restore atomic; an engine with transaction limits (etcd)
            // may refuse it for a dump of many buckets.
            throw TransferError(
                .failure,
                "restore publishes every bucket of the dump in one commit, so that the whole dump appears at once or not at all, and the database's engine refuses a commit that large for \(stages.count) buckets (\(storage.message)); nothing was restored: raise the limit, or import the buckets one at a time with `buri import` (each import is atomic on its own)"
            )
        }
    }

    /// The export's header, checked: a format with schema lines.
    mutating func readHeader(_ line: [UInt8], _ number: Int) throws {
        let start = line.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(line.dropFirst(3)) : line
        guard let value = try? CBORValue(jsonBytes: start), let version = ExportFormat.headerVersion(value) else {
            throw Self.fail(
                number,
                "the input is not a `buri export` (it must start with the header \(ExportFormat.header(version: ExportFormat.version)), or \(ExportFormat.header) from an older buri)"
            )
        }
        guard case .unsigned(let known) = version, ExportFormat.readable.contains(known) else {
            throw Self.fail(
                number,
                "this is a `buri export` of format \(version.jsonString()), which this buri does not know (it reads formats \(ExportFormat.readableList)); restore it with the buri that wrote it, or a newer one"
            )
        }
        guard known >= 3 else {
            throw Self.fail(
                number,
                "this export has format \(known), written by an older buri before exports carried each bucket's schema (format 3): restore cannot recreate its indexes; import its buckets one by one with `buri import`, naming their indexes"
            )
        }
        exportVersion = known
    }

    /// A schema line (which begins its bucket's stage) or a record (which goes into it).
    mutating func restoreLine(_ line: [UInt8], _ number: Int, header: (bytes: [UInt8], number: Int)) throws {
        let members: [CBORMapEntry]
        do {
            members = try CBORValue.exactJSONMembers(line)
        } catch let error as CBORError {
            throw ImportPlan.malformed(error, line: number)
        }
        let parsed = try ExportFormat.classify(members, version: exportVersion) { Self.fail(number, $0) }
        let name: String
        switch parsed {
        case .schema(let bucket, _), .record(let bucket, _, _, _): name = bucket
        case .value(let valueName, let data):
            // Kept until the buckets publish, in the same commit.
            let bytes = data.encoded()
            if let repeated = data.firstRepeatedMapKey() {
                throw Self.fail(
                    number,
                    "named value '\(valueName)': a map holds the key \(repeated.jsonString()) twice; give each key once"
                )
            }
            if let index = valueIndex[Array(valueName.utf8)] {
                values[index].bytes = bytes
            } else {
                valueIndex[Array(valueName.utf8)] = values.count
                values.append((valueName, bytes))
            }
            return
        }
        let nameBytes = Array(name.utf8)
        if case .schema = parsed {
            if byName[nameBytes] != nil {
                throw Self.fail(number, "bucket '\(name)' has a second schema line; give one per bucket")
            }
            var plan = try ImportPlan(bucket: name, existing: nil, options: ImportOptions())
            _ = try plan.prepare(header.bytes, line: header.number)
            _ = try plan.prepare(line, line: number)
            for position in plan.definitions.indices {
                let name = Array(plan.definitions[position].name.utf8)
                guard plaintextIndexes.contains(where: { Array($0.utf8) == name }) else { continue }
                plan.definitions[position].plaintext = true
                declaredPlaintext.insert(name)
            }
            let database = try database()
            do {
                try database.requirePlaintextDeclarations(plan.newDefinitions(), bucket: name)
                stages.append(
                    try database.stageImport(
                        creating: name, keyField: plan.keyField, indexes: plan.newDefinitions(),
                        schemaVersion: plan.schemaVersion))
            } catch {
                switch error {
                case .invalidBucketName, .invalidIndexDefinition:
                    throw TransferError.database(
                        error, kind: .invalidInput, line: number,
                        prefix: "line \(number): the schema of bucket '\(name)' is not one a bucket can have: ",
                        suffix: "; nothing was restored")
                case .indexNotDeclaredPlaintext:
                    // An encrypted database's refusal of a numeric index names the bucket itself.
                    throw TransferError.database(
                        error, kind: .invalidInput, line: number, prefix: "line \(number): ",
                        suffix: "; nothing was restored")
                default:
                    // The database's own trouble (storage, limits, a conflict), not the schema's.
                    throw TransferError.restoring(error)
                }
            }
            plans.append(plan)
            byName[nameBytes] = plans.count - 1
            return
        }
        guard let owner = byName[nameBytes] else {
            throw Self.fail(
                number,
                "the export has a record of bucket '\(name)' but no schema line for it before its records (`buri export` writes each bucket's schema line first)"
            )
        }
        guard var object = try plans[owner].prepareRecord(members: members, line: number) else { return }
        // The records are written under the bucket's schema version, as the Swift type writes them.
        object.schemaVersion = plans[owner].schemaVersion
        if owner != chunkOwner { try flush() }
        chunkOwner = owner
        chunkBytes += object.payload.count + object.key.utf8.count
        chunk.append(object)
        chunkLines.append(number)
        if chunk.count >= stageChunk || chunkBytes >= stageChunkBytes { try flush() }
    }
}
