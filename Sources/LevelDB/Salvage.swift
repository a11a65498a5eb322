#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What ``Database/salvage(path:options:)`` found in a damaged database and what it could not
/// recover, key by key where the keys can be known.
///
/// ```swift
/// let report = try Database.salvage(path: "/tmp/app.ldb")
/// for loss in report.lostKeys { print("lost:", loss.key, loss.detail) }
/// for range in report.unreadableRanges { print("unreadable:", range.detail) }
/// ```
public struct SalvageReport: Sendable {
    /// A key whose latest readable state did not survive (or may be wrong), and why.
    public struct KeyLoss: Sendable, Hashable {
        public var key: [UInt8]
        /// The file holding the damaged or dropped data.
        public var file: String
        public var detail: String
        /// For a suspect key: its latest state in intact data, before the damaged write that
        /// LevelDB's repair applied — what to roll back to if the damaged state is unusable.
        public var verifiedState: VerifiedState = .unknown
    }

    /// A key's state as intact data last had it.
    public enum VerifiedState: Sendable, Hashable {
        /// No intact data holds the key, or it was deleted.
        case absent
        case value([UInt8])
        /// Intact data holds a value, but it was not kept.
        case unknown
    }

    /// Data that could not be read at all, so the keys it held cannot be named: every key in
    /// `lowerBound...upperBound` (either end open when `nil`) may have lost its latest state.
    public struct UnreadableRange: Sendable, Hashable {
        public var file: String
        public var detail: String
        public var lowerBound: [UInt8]?
        public var upperBound: [UInt8]?
        /// Whether a whole table file is unreadable or missing (rather than one block of it), so
        /// that whole buckets — catalog entry, records and index entries — may have gone with it.
        public var isWholeFile: Bool = false
    }

    /// An entry read from damaged data without a checksum to vouch for it: its key and value may
    /// be wrong. Offered as evidence (to recover a name, say), never written back.
    public struct UnverifiedEntry: Sendable, Hashable {
        public var key: [UInt8]
        /// `nil` for a deletion.
        public var value: [UInt8]?
        public var file: String
    }

    /// Keys whose latest state was in damaged data or was dropped, and which now hold an older
    /// state (or none). In key order (bytewise).
    public var lostKeys: [KeyLoss] = []
    /// Keys that hold a state read from damaged data without its checksum (LevelDB's repair
    /// applies damaged log records as far as they parse), or a state found in no readable data:
    /// each may be wrong. In key order.
    public var suspectKeys: [KeyLoss] = []
    /// Table blocks and whole tables that could not be read, with the key range each covered.
    public var unreadableRanges: [UnreadableRange] = []
    /// Losses whose keys cannot be known at all: a missing write-ahead log, log records whose
    /// bytes are gone (a gap in the sequence numbers of the log's writes).
    public var unknownLosses: [String] = []
    /// Keys set back to their latest verified state after LevelDB's repair: writes in
    /// checksum-valid log records that LevelDB's reader dropped because the log's framing around
    /// them was damaged, and entries of intact data blocks of a table LevelDB could not open (its
    /// footer or index gone). In key order.
    public var restoredKeys: [[UInt8]] = []
    /// Files that are not part of the database (the MANIFEST does not name them: left by an
    /// interrupted compaction, or not yet deleted), moved to `lost/` before the repair so that
    /// no stale data comes back from them. Not a loss.
    public var setAside: [String] = []
    /// Why the MANIFEST could not be used to tell live files from leftovers, if it could not.
    public var manifestProblem: String?
    /// Write-ahead log records that fail their checksum or cannot be framed.
    public var damagedLogRecords: [DamagedLogRecord] = []
    /// What LevelDB's own repair reported dropping, verbatim from the `LOG` it wrote.
    public var levelDBLog: [String] = []
    /// Entries read from damaged table blocks and log records without a valid checksum.
    public var unverifiedEntries: [UnverifiedEntry] = []

    /// Whether every key kept its latest readable state and no data was unreadable.
    public var isComplete: Bool {
        lostKeys.isEmpty && suspectKeys.isEmpty && unreadableRanges.isEmpty && unknownLosses.isEmpty
    }
}

extension Database {
    /// Salvages the damaged database in `path` and says exactly what was lost: LevelDB's repair
    /// (``repair(path:options:)``) wrapped in an inventory taken before and a comparison after.
    /// The database must not be open; keep a copy of its directory first.
    ///
    /// 1. Before: the MANIFEST says which table files and logs are live. Every live table is read
    ///    block by block (checksums verified) and every live log record by record, including
    ///    checksum-valid records that LevelDB's reader would lose to damaged framing. This gives,
    ///    per key, the latest state the readable data holds; unreadable blocks give key ranges,
    ///    damaged log records and blocks the keys that still parse in them.
    /// 2. Tables and logs the MANIFEST does not name are moved to `lost/` (LevelDB's repair would
    ///    otherwise bring back what they hold); then LevelDB's repair rebuilds the database from
    ///    what it can read, and the result is compacted.
    /// 3. After: every key is compared with its latest readable state. Writes of verified log
    ///    records that LevelDB dropped are put back; every other difference is reported, as a
    ///    lost key, a suspect key, an unreadable range or a loss whose keys cannot be known.
    ///
    /// ```swift
    /// let report = try Database.salvage(path: "/tmp/app.ldb")
    /// print(report.isComplete ? "nothing lost" : "\(report.lostKeys.count) keys lost")
    /// ```
    ///
    /// - Throws: ``LevelDBError`` if the directory cannot be read or LevelDB's repair fails, and
    ///   ``LevelDBError/Code/databaseInUse`` before changing anything if another process has the
    ///   database open.
    public static func salvage(path: String, options: Options = Options()) throws(LevelDBError) -> SalvageReport {
        // LevelDB's repair takes no lock: never start on files another process is writing.
        if ManifestState.lockHeldByAnotherProcess(path) {
            throw LevelDBError(statusMessage: "IO error: lock \(path)/LOCK: held by another process", path: path)
        }
        var inventory = try Inventory.take(path: path)
        var report = inventory.report
        try inventory.setAsideLeftovers(path: path, report: &report)
        try repair(path: path, options: options)
        report.levelDBLog = levelDBLossLines(
            logText: FileManager.default.contents(atPath: path + "/LOG").map { String(decoding: $0, as: UTF8.self) }
                ?? "")
        var openOptions = options
        openOptions.createIfMissing = false
        let db = try Database(path: path, options: openOptions)
        defer { db.close() }
        // LevelDB's repair puts every table at level 0, where a point read trusts the newest
        // file number rather than the newest write; one compaction orders them by write again.
        try db.compact()
        try inventory.compare(with: db, report: &report)
        return report
    }

    /// The lines of a LevelDB repair's `LOG` that report dropped data, without their timestamp and
    /// thread columns: corruption, I/O errors, dropped or ignored records and unparsable keys.
    /// (Lines about archiving files and the closing summary are not losses.)
    static func levelDBLossLines(logText: String) -> [String] {
        var result: [String] = []
        for line in logText.split(whereSeparator: \.isNewline) {
            // "2025/01/02-03:04:05.123456 7f3a… message"
            let columns = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            let message = columns.count == 3 ? String(columns[2]) : String(line)
            if message.hasPrefix("Archiving ") || message.hasPrefix("**** ") { continue }
            let markers = [
                "Corruption", "IO error", "dropping", "dropped", "ignoring", "unparsable", "Not implemented",
                "Invalid argument",
            ]
            if markers.contains(where: { message.contains($0) }) {
                result.append(String(message.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()))
            }
        }
        return result
    }
}

/// A key as bytes, hashed in one call.
struct KeyBytes: Hashable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    static func == (a: KeyBytes, b: KeyBytes) -> Bool { a.bytes == b.bytes }
}

/// A value's length and 64-bit FNV-1a hash: enough to tell whether a value survived unchanged
/// without holding every value of the database in memory.
struct ValueDigest: Hashable {
    var count: Int
    var hash: UInt64

    init(_ bytes: some Collection<UInt8>) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        self.count = bytes.count
        self.hash = hash
    }
}

/// What the readable data of a database holds, taken before LevelDB's repair changes anything.
struct Inventory {
    /// The latest readable state of a key.
    struct Version {
        var sequence: UInt64
        /// `nil` for a deletion.
        var digest: ValueDigest?
        /// The value itself, kept where LevelDB's repair may drop a verified state (writes read
        /// from logs, blocks of a table it cannot open), so the comparison can put it back.
        var value: [UInt8]?
        /// Whether the comparison may put this state back: it was kept (``value``) for that.
        var restorable: Bool
        var file: String
    }

    /// A newer state of a key seen only in damaged data.
    struct Uncertain {
        var sequence: UInt64
        /// Whether the damaged data deleted the key (as far as it parses).
        var isDeletion: Bool
        var fromLog: Bool
        var file: String
        var detail: String
    }

    var report = SalvageReport()
    var latest: [KeyBytes: Version] = [:]
    var uncertain: [KeyBytes: Uncertain] = [:]
    var leftovers: [String] = []

    static func take(path: String) throws(LevelDBError) -> Inventory {
        var inventory = Inventory()
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw LevelDBError(code: .ioError, message: "IO error: cannot list the directory: \(error)", path: path)
        }
        var tables: [UInt64: String] = [:]
        var logs: [UInt64: String] = [:]
        for name in names {
            switch DatabaseFile(name: name) {
            case .table(let number)?: tables[number] = name
            case .log(let number)?: logs[number] = name
            case nil: break
            }
        }
        var liveTables = tables
        var liveLogs = logs
        var manifest: ManifestState?
        switch ManifestState.read(path: path) {
        case .success(let state):
            manifest = state
            liveTables = tables.filter { state.tables[$0.key] != nil }
            liveLogs = logs.filter { state.isLive(log: $0.key) }
            inventory.leftovers =
                (tables.filter { state.tables[$0.key] == nil }.map(\.value)
                + logs.filter { !state.isLive(log: $0.key) }.map(\.value)).sorted()
            for (number, table) in state.tables.sorted(by: { $0.key < $1.key }) where tables[number] == nil {
                inventory.report.unreadableRanges.append(
                    SalvageReport.UnreadableRange(
                        file: DatabaseFile.tableName(number),
                        detail:
                            "table file \(DatabaseFile.tableName(number)) (level \(table.level), \(table.size) bytes), which \(state.name) names, is missing",
                        lowerBound: InternalKey(table.smallest[...])?.userKey,
                        upperBound: InternalKey(table.largest[...])?.userKey, isWholeFile: true))
            }
            if state.logNumber != 0, logs[state.logNumber] == nil {
                inventory.report.unknownLosses.append(
                    "the write-ahead log \(DatabaseFile.logName(state.logNumber)), which \(state.name) names as holding the latest writes, is missing: every write made after the last table file was written is lost, and the keys it wrote cannot be known"
                )
            }
        case .failure(let problem):
            inventory.report.manifestProblem = problem.reason
            // What the MANIFEST's intact records still say: a log at least as new as the newest
            // one they name must exist, or the latest writes went with it; and a table they name
            // that is missing may have held live data (a lost edit may have replaced it, so "may").
            let intact = ManifestState.readLenient(path: path)
            if (intact?.logNumber ?? 0) == 0, logs.isEmpty {
                // Every database LevelDB has opened keeps a log (only its own repair leaves none).
                inventory.report.unknownLosses.append(
                    "no write-ahead log is left, and the damaged MANIFEST no longer says which one held the latest writes: writes made after the last table file was written may be lost, and their keys cannot be known"
                )
            }
            if let intact {
                if intact.logNumber != 0, !logs.keys.contains(where: { $0 >= intact.logNumber }) {
                    inventory.report.unknownLosses.append(
                        "no write-ahead log is left although the intact part of the damaged \(intact.name) names \(DatabaseFile.logName(intact.logNumber)) as holding the latest writes: every write made after the last table file was written is lost, and the keys it wrote cannot be known"
                    )
                }
                for (number, table) in intact.tables.sorted(by: { $0.key < $1.key }) where tables[number] == nil {
                    inventory.report.unreadableRanges.append(
                        SalvageReport.UnreadableRange(
                            file: DatabaseFile.tableName(number),
                            detail:
                                "table file \(DatabaseFile.tableName(number)) (level \(table.level), \(table.size) bytes), which the intact part of the damaged \(intact.name) names, is missing (unless an edit lost to the damage replaced it)",
                            lowerBound: InternalKey(table.smallest[...])?.userKey,
                            upperBound: InternalKey(table.largest[...])?.userKey, isWholeFile: true))
                }
            }
        }

        // Logs: verified batches are the acknowledged writes; damaged records give suspects.
        var batches: [(sequence: UInt64, count: Int, file: String)] = []
        var damagedSpans: [ClosedRange<UInt64>] = []
        var lenientLog:
            [(sequence: UInt64?, count: Int?, operations: [LoggedBatch.Operation], file: String, offset: Int)] = []
        for (_, name) in liveLogs.sorted(by: { $0.key < $1.key }) {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
                inventory.report.unknownLosses.append(
                    "the write-ahead log \(name) cannot be read; the writes it held are lost and their keys cannot be known"
                )
                continue
            }
            let bytes = [UInt8](data)
            var verifiedOffsets = Set<Int>()
            for found in LogScanner.verifiedBatches(in: bytes, file: name) {
                verifiedOffsets.insert(found.offset)
                for (index, operation) in found.batch.operations.enumerated() {
                    let key = InternalKey(
                        userKey: operation.key, sequence: found.batch.sequence + UInt64(index),
                        isDeletion: operation.value == nil)
                    inventory.note(
                        key, value: operation.value.map { $0[...] } ?? [], keepValue: true, restorable: true,
                        fromLog: true, file: name)
                }
                batches.append((found.batch.sequence, found.batch.operations.count, name))
            }
            let damaged = LogScanner.damagedRecords(in: bytes, file: name)
            inventory.report.damagedLogRecords += damaged
            // Zeroes before the first intact record of a log: LevelDB never writes zeroes there, so
            // records were zeroed, and with no earlier write to count from, no sequence gap shows it.
            if let first = verifiedOffsets.min(),
                let zeroed = damaged.first(where: {
                    $0.offset < first && LogScanner.header(bytes, at: $0.offset).type == 0
                })
            {
                inventory.report.unknownLosses.append(
                    "bytes \(zeroed.offset)–\(first - 1) of the write-ahead log \(name), before its first intact record, were zeroed: the writes they held are lost, and their keys cannot be known"
                )
            }
            for record in damaged
            where record.offset + LogScanner.headerSize <= bytes.count && !verifiedOffsets.contains(record.offset) {
                let (_, length, type) = LogScanner.header(bytes, at: record.offset)
                guard type == 1 || type == 2 else { continue }
                let blockEnd = min((record.offset / LogScanner.blockSize + 1) * LogScanner.blockSize, bytes.count)
                let end = min(record.offset + LogScanner.headerSize + length, blockEnd)
                guard end > record.offset + LogScanner.headerSize else { continue }
                let parsed = LoggedBatch.lenient(bytes[(record.offset + LogScanner.headerSize)..<end])
                lenientLog.append((parsed.sequence, parsed.count, parsed.operations, name, record.offset))
            }
        }
        // The states damaged log records may have overwritten: their values are kept from the
        // tables too, so that a damaged write can be rolled back to the state before it.
        let touched = Set(lenientLog.flatMap { $0.operations.map { KeyBytes($0.key) } })

        var lenient: [(entry: InternalKey, value: [UInt8], file: String, lower: [UInt8]?, upper: [UInt8]?)] = []
        for (number, name) in liveTables.sorted(by: { $0.key < $1.key }) {
            let known = manifest?.tables[number]
            let smallest = known.flatMap { InternalKey($0.smallest[...])?.userKey }
            let largest = known.flatMap { InternalKey($0.largest[...])?.userKey }
            /// A table LevelDB cannot open: its data blocks are read without the index as far as
            /// they go (LevelDB's repair drops the whole table, so they are put back afterwards).
            func unopenable(_ bytes: [UInt8], _ reason: String) {
                var lower = smallest
                var found = 0
                for block in TableFile.dataBlocksWithoutIndex(bytes) {
                    for entry in block.entries {
                        guard let key = InternalKey(entry.key[...]) else { continue }
                        inventory.note(
                            key, value: entry.value, keepValue: true, restorable: true, fromLog: false, file: name)
                        lower = key.userKey
                    }
                    found += 1
                }
                let recovered =
                    found == 0 ? "" : "; its first \(found) data block\(found == 1 ? "" : "s") were read without it"
                inventory.report.unreadableRanges.append(
                    SalvageReport.UnreadableRange(
                        file: name, detail: "table file \(name) cannot be read: \(reason)\(recovered)",
                        lowerBound: lower, upperBound: largest, isWholeFile: true))
            }
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
                inventory.report.unreadableRanges.append(
                    SalvageReport.UnreadableRange(
                        file: name, detail: "table file \(name) cannot be read", lowerBound: smallest,
                        upperBound: largest, isWholeFile: true))
                continue
            }
            let bytes = [UInt8](data)
            let table: TableFile
            switch TableFile.open(bytes) {
            case .success(let opened): table = opened
            case .failure(let problem):
                unopenable(bytes, problem.reason)
                continue
            }
            let blocks: [(handle: BlockHandle, separator: [UInt8])]
            switch table.dataBlocks() {
            case .success(let found): blocks = found
            case .failure(let problem):
                unopenable(bytes, problem.reason)
                continue
            }
            for (position, block) in blocks.enumerated() {
                let lower = position > 0 ? InternalKey(blocks[position - 1].separator[...])?.userKey : smallest
                let upper = InternalKey(block.separator[...])?.userKey ?? largest
                var damage: (reason: String, salvage: [UInt8])?
                switch table.block(block.handle) {
                case .intact(let contents):
                    if let entries = BlockParser.entries(contents) {
                        for entry in entries {
                            guard let key = InternalKey(entry.key[...]) else { continue }
                            inventory.note(
                                key, value: entry.value, keepValue: touched.contains(KeyBytes(key.userKey)),
                                restorable: false, fromLog: false, file: name)
                        }
                    } else {
                        damage = ("the block's checksum matches but its entries do not parse", contents)
                    }
                case .damaged(let reason, let salvage):
                    damage = (reason, salvage)
                }
                if let damage {
                    inventory.report.unreadableRanges.append(
                        SalvageReport.UnreadableRange(
                            file: name,
                            detail:
                                "table file \(name), block at byte \(block.handle.offset) (\(block.handle.size) bytes): \(damage.reason)",
                            lowerBound: lower, upperBound: upper))
                    for entry in BlockParser.lenientEntries(damage.salvage) {
                        if let key = InternalKey(entry.key[...]) {
                            lenient.append((key, Array(entry.value), name, lower, upper))
                        }
                    }
                }
            }
        }

        // The newest sequence number any intact data vouches for bounds what a damaged one may say.
        let newest = max(manifest?.lastSequence ?? 0, inventory.latest.values.map(\.sequence).max() ?? 0)
        let plausible = newest + (1 << 20)
        for item in lenient {
            if let lower = item.lower, item.entry.userKey.lexicographicallyPrecedes(lower) { continue }
            if let upper = item.upper, upper.lexicographicallyPrecedes(item.entry.userKey) { continue }
            guard item.entry.sequence <= plausible else { continue }
            inventory.noteUncertain(
                item.entry.userKey, sequence: item.entry.sequence, isDeletion: item.entry.isDeletion, fromLog: false,
                file: item.file,
                detail: "its latest state was in an unreadable block of table file \(item.file)")
            inventory.report.unverifiedEntries.append(
                SalvageReport.UnverifiedEntry(
                    key: item.entry.userKey, value: item.entry.isDeletion ? nil : item.value, file: item.file))
        }
        for item in lenientLog {
            let sequence = item.sequence.flatMap { $0 > 0 && $0 <= plausible ? $0 : nil }
            if let sequence, let count = item.count, count > 0, count <= 1 << 24 {
                damagedSpans.append(sequence...(sequence + UInt64(count) - 1))
            }
            // Its writes as far as they parse are named; but a write whose own bytes were damaged
            // (its key, or the framing of the writes after it) cannot be, so the record is a loss
            // of unknown keys too.
            let declared = item.count.map { $0 <= 1 << 24 ? "\($0) write\($0 == 1 ? "" : "s")" : "writes" } ?? "writes"
            inventory.report.unknownLosses.append(
                "the damaged record at byte \(item.offset) of the write-ahead log \(item.file) held \(declared)\(sequence.map { " from sequence number \($0)" } ?? ""); \(item.operations.count) of them still parse and are named as suspect or lost, but a write whose own bytes were damaged cannot be named"
            )
            for (index, operation) in item.operations.enumerated() {
                inventory.noteUncertain(
                    operation.key, sequence: sequence.map { $0 + UInt64(index) } ?? UInt64.max,
                    isDeletion: operation.value == nil, fromLog: true, file: item.file,
                    detail:
                        "its last write was in a damaged record of the write-ahead log \(item.file) (at byte \(item.offset))"
                )
                inventory.report.unverifiedEntries.append(
                    SalvageReport.UnverifiedEntry(key: operation.key, value: operation.value, file: item.file))
            }
        }

        // Gaps in the sequence numbers of the logged writes are writes whose records are gone.
        // Consecutive batches follow each other without a gap, across logs too; the first write
        // of the live log comes at most one after the last sequence number the MANIFEST records
        // (its edit naming the log was written after the log was created).
        batches.sort { $0.sequence < $1.sequence }
        var next: UInt64? = manifest.map { $0.lastSequence + 1 }
        var end: UInt64 = 0
        for batch in batches {
            if let expected = next, batch.sequence > expected {
                let gap = expected...(batch.sequence - 1)
                // A damaged record whose header says it holds exactly these writes explains the gap:
                // its keys are reported with it.
                let explained = damagedSpans.contains { $0.contains(gap.lowerBound) && $0.contains(gap.upperBound) }
                if !explained, batch.sequence - expected < (1 << 32) {
                    let count = batch.sequence - expected
                    inventory.report.unknownLosses.append(
                        "\(count) write\(count == 1 ? "" : "s") (sequence number\(count == 1 ? "" : "s") \(expected == batch.sequence - 1 ? "\(expected)" : "\(expected)–\(batch.sequence - 1)")) before intact records of the write-ahead log \(batch.file) could not be read at all: their keys cannot be known"
                    )
                }
            }
            end = max(end, batch.sequence + UInt64(batch.count))
            next = end
        }
        return inventory
    }

    /// The newest sequence number of any entry read from a table.
    var tableSequence: UInt64 = 0

    mutating func note(
        _ key: InternalKey, value: ArraySlice<UInt8>, keepValue: Bool, restorable: Bool, fromLog: Bool, file: String
    ) {
        if !fromLog { tableSequence = max(tableSequence, key.sequence) }
        let id = KeyBytes(key.userKey)
        if let current = latest[id], current.sequence >= key.sequence { return }
        latest[id] = Version(
            sequence: key.sequence, digest: key.isDeletion ? nil : ValueDigest(value),
            value: keepValue && !key.isDeletion ? Array(value) : nil, restorable: restorable, file: file)
    }

    mutating func noteUncertain(
        _ key: [UInt8], sequence: UInt64, isDeletion: Bool, fromLog: Bool, file: String, detail: String
    ) {
        let id = KeyBytes(key)
        if let current = uncertain[id], current.sequence >= sequence { return }
        uncertain[id] = Uncertain(
            sequence: sequence, isDeletion: isDeletion, fromLog: fromLog, file: file, detail: detail)
    }

    /// Moves the tables and logs the MANIFEST does not name into `lost/`, as LevelDB's open would
    /// delete them: LevelDB's repair reads every file in the directory and would bring back what
    /// such a leftover holds (a key deleted since, an older value).
    mutating func setAsideLeftovers(path: String, report: inout SalvageReport) throws(LevelDBError) {
        guard !leftovers.isEmpty else { return }
        let lost = path + "/lost"
        do {
            try FileManager.default.createDirectory(atPath: lost, withIntermediateDirectories: true)
            for name in leftovers {
                var target = lost + "/" + name
                var attempt = 1
                while FileManager.default.fileExists(atPath: target) {
                    attempt += 1
                    target = lost + "/" + name + ".\(attempt)"
                }
                try FileManager.default.moveItem(atPath: path + "/" + name, toPath: target)
                report.setAside.append(name)
            }
        } catch {
            throw LevelDBError(
                code: .ioError, message: "IO error: cannot move a leftover file into \(lost): \(error)", path: path)
        }
    }

    /// Compares the repaired database with the latest readable states, puts back the verified
    /// writes LevelDB dropped and reports every other difference.
    mutating func compare(with db: Database, report: inout SalvageReport) throws(LevelDBError) {
        var seen = Set<KeyBytes>()
        let batch = WriteBatch()
        var lost: [SalvageReport.KeyLoss] = []
        var suspect: [SalvageReport.KeyLoss] = []

        func classify(_ key: [UInt8], after: ValueDigest?, present: Bool) {
            let id = KeyBytes(key)
            let version = latest[id]
            let expected = version?.digest
            let matches = present ? (expected != nil && expected == after) : expected == nil
            if let damage = uncertain[id], damage.sequence > (version?.sequence ?? 0) {
                // The damaged data held a newer state: a deletion that took effect anyway is no loss.
                if damage.isDeletion && !present { return }
                if matches {
                    lost.append(
                        SalvageReport.KeyLoss(
                            key: key, file: damage.file,
                            detail: damage.detail + "; it holds " + (present ? "an older value" : "nothing")))
                } else {
                    let verified: SalvageReport.VerifiedState =
                        version.map { $0.digest == nil ? .absent : $0.value.map { .value($0) } ?? .unknown } ?? .absent
                    suspect.append(
                        SalvageReport.KeyLoss(
                            key: key, file: damage.file,
                            detail: damage.detail
                                + (damage.fromLog
                                    ? ", which LevelDB's repair applied without its checksum: it may be wrong"
                                    : "; it holds a state no readable data holds"),
                            verifiedState: verified))
                }
                return
            }
            if matches { return }
            if let version, version.restorable {
                // A verified state that LevelDB's repair dropped: put it back.
                if let value = version.value { batch.put(key, value) } else { batch.delete(key) }
                report.restoredKeys.append(key)
                return
            }
            if let version {
                lost.append(
                    SalvageReport.KeyLoss(
                        key: key, file: version.file,
                        detail: "its latest state, in \(version.file), did not survive LevelDB's repair"))
            } else {
                suspect.append(
                    SalvageReport.KeyLoss(
                        key: key, file: "", detail: "it holds a value found in no readable data of the database"))
            }
        }

        let cursor = try db.cursor()
        while try cursor.next() {
            let key = cursor.key
            seen.insert(KeyBytes(key))
            classify(key, after: cursor.withValue { ValueDigest($0) }, present: true)
        }
        for key in latest.keys where !seen.contains(key) { classify(key.bytes, after: nil, present: false) }
        for key in uncertain.keys where !seen.contains(key) && latest[key] == nil {
            classify(key.bytes, after: nil, present: false)
        }
        if !report.restoredKeys.isEmpty { try db.write(batch, options: .sync) }
        func ordered(_ losses: [SalvageReport.KeyLoss]) -> [SalvageReport.KeyLoss] {
            losses.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        }
        report.lostKeys = ordered(lost)
        report.suspectKeys = ordered(suspect)
        report.restoredKeys.sort { $0.lexicographicallyPrecedes($1) }
    }
}

extension InternalKey {
    init(userKey: [UInt8], sequence: UInt64, isDeletion: Bool) {
        self.userKey = userKey
        self.sequence = sequence
        self.isDeletion = isDeletion
    }
}
