import Buri
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What an export writes, and how it treats damaged data.
///
/// ```swift
/// var options = ExportOptions(buckets: ["Person"])
/// options.skipDamaged = true
/// let report = try db.export(to: URL(fileURLWithPath: "people.jsonl"), options: options)
/// ```
public struct ExportOptions: Sendable, Hashable {
    /// The buckets to export, in the order given; nil (the default) for every bucket, in name
    /// order (bytewise).
    ///
    /// ```swift
    /// options.buckets = ["Person"]
    /// ```
    public var buckets: [String]?

    /// Whether a damaged database is exported as far as it can be read: every record that reads
    /// is written, and what could not be read is listed in the ``ExportReport`` instead of ending
    /// the export with an error.
    ///
    /// ```swift
    /// options.skipDamaged = true
    /// ```
    public var skipDamaged: Bool

    /// Whether the export holds the database's named values (``NamedValues``), after the buckets,
    /// as `{"value","data"}` lines (export format 5). Default: when ``buckets`` is nil (a whole
    /// database's export).
    ///
    /// ```swift
    /// options.includesValues = false
    /// ```
    public var includesValues: Bool

    /// Options exporting `buckets` (nil: every bucket), skipping damaged records if `skipDamaged`;
    /// the named values too if `includesValues` (default: when `buckets` is nil).
    ///
    /// ```swift
    /// let options = ExportOptions(buckets: ["Person", "notes"], skipDamaged: true)
    /// ```
    public init(buckets: [String]? = nil, skipDamaged: Bool = false, includesValues: Bool? = nil) {
        self.buckets = buckets
        self.skipDamaged = skipDamaged
        self.includesValues = includesValues ?? (buckets == nil)
    }
}

/// What an export wrote, and what it skipped (only with ``ExportOptions/skipDamaged``).
///
/// ```swift
/// let report = try db.export(to: url, options: ExportOptions(skipDamaged: true))
/// if !report.isComplete {
///     print("saved \(report.exported); skipped \(report.skippedRecords.count) records")
/// }
/// ```
public struct ExportReport: Sendable, Hashable {
    /// A record whose key is known but which could not be read.
    ///
    /// ```swift
    /// for skipped in report.skippedRecords { print(skipped.bucket, skipped.key, skipped.reason) }
    /// ```
    public struct SkippedRecord: Sendable, Hashable {
        /// Its bucket.
        ///
        /// ```swift
        /// let buckets = Set(report.skippedRecords.map(\.bucket))
        /// ```
        public var bucket: String
        /// Its key.
        ///
        /// ```swift
        /// let lost = report.skippedRecords.map(\.key)
        /// ```
        public var key: String
        /// Why it was skipped.
        ///
        /// ```swift
        /// for record in report.skippedRecords { log(record.reason) }
        /// ```
        public var reason: String
    }

    /// A key range whose records could not even be listed: of its keys, only those that index
    /// entries name were tried (and exported if they read).
    ///
    /// ```swift
    /// for range in report.skippedRanges { print(range.bucket, range.after ?? "start", range.before ?? "end") }
    /// ```
    public struct SkippedRange: Sendable, Hashable {
        /// Its bucket.
        ///
        /// ```swift
        /// print(range.bucket)
        /// ```
        public var bucket: String
        /// The key the range starts after (nil: from the first key).
        ///
        /// ```swift
        /// print(range.after ?? "(the first key)")
        /// ```
        public var after: String?
        /// The key the range ends before (nil: to the last key).
        ///
        /// ```swift
        /// print(range.before ?? "(the last key)")
        /// ```
        public var before: String?
        /// Why its records could not be listed.
        ///
        /// ```swift
        /// log(range.reason)
        /// ```
        public var reason: String
        /// How many keys in it index entries named (each tried on its own).
        ///
        /// ```swift
        /// print("\(range.keysFromIndexes) keys found through indexes")
        /// ```
        public var keysFromIndexes: Int
        /// The indexes that could not be read either.
        ///
        /// ```swift
        /// if !range.unreadIndexes.isEmpty { print("unreadable:", range.unreadIndexes) }
        /// ```
        public var unreadIndexes: [String]
    }

    /// The objects written.
    ///
    /// ```swift
    /// print("\(report.exported) objects exported")
    /// ```
    public var exported = 0
    /// The records skipped, in the order met.
    ///
    /// ```swift
    /// print("\(report.skippedRecords.count) records lost")
    /// ```
    public var skippedRecords: [SkippedRecord] = []
    /// The key ranges skipped, in the order met.
    ///
    /// ```swift
    /// print("\(report.skippedRanges.count) ranges could not be listed")
    /// ```
    public var skippedRanges: [SkippedRange] = []

    /// Whether nothing was skipped: the export holds the whole database (or the buckets asked for).
    ///
    /// ```swift
    /// guard report.isComplete else { exit(1) }
    /// ```
    public var isComplete: Bool { skippedRecords.isEmpty && skippedRanges.isEmpty }
}

extension BuriDatabase {
    /// Writes the export of the database (or of the buckets ``ExportOptions/buckets`` names), line
    /// by line, to `writeLine`, each line without its newline: the header, then for each bucket its
    /// schema line and its records in key order (bytewise) — the same database always exports to
    /// the same bytes, and ``restore(from:progress:chunkCommitted:)`` recreates it from them.
    ///
    /// A damaged database ends the export with an error, unless ``ExportOptions/skipDamaged``:
    /// then every record that reads is written, and the report lists what was skipped.
    ///
    /// ```swift
    /// var text = ""
    /// try db.export { line in text += line + "\n" }
    /// ```
    /// - Parameter progress: told every thousand records of each bucket (given, the export also
    ///   counts each bucket's records first, for the total).
    /// - Throws: ``TransferError``: `.notFound` for a bucket that does not exist; `.failure` for
    ///   damaged data (without `skipDamaged`) or a storage error. An error `writeLine` throws ends
    ///   the export and is the ``TransferError/underlying`` error of the one thrown.
    @discardableResult
    public func export(
        options: ExportOptions = ExportOptions(), progress: TransferProgressHandler? = nil,
        writingLinesTo writeLine: (String) throws -> Void
    ) throws(TransferError) -> ExportReport {
        try transferring {
            let buckets = try (options.buckets ?? bucketNames()).map { try rawBucket(named: $0) }
            return try exportBuckets(
                buckets, values: exportedValues(options), options: options, progress: progress, writeLine: writeLine)
        }
    }

    /// Writes the export (see ``export(options:progress:writingLinesTo:)``) to the file at `url`,
    /// which is replaced only when the export succeeds: it is written next to it first, under a
    /// name ending in `.partial-PID`, and renamed; after an error no file is left.
    ///
    /// ```swift
    /// let report = try db.export(to: URL(fileURLWithPath: "backup.jsonl"))
    /// print("\(report.exported) objects exported")
    /// ```
    /// - Throws: ``TransferError``, as ``export(options:progress:writingLinesTo:)`` does, and
    ///   `.failure` when the file cannot be written (a full disk, a directory that does not exist).
    @discardableResult
    public func export(
        to url: URL, options: ExportOptions = ExportOptions(), progress: TransferProgressHandler? = nil
    ) throws(TransferError) -> ExportReport {
        // The buckets are found before the file is made: an unknown one leaves no trace.
        let buckets = try transferring { try (options.buckets ?? bucketNames()).map { try rawBucket(named: $0) } }
        let values = try transferring { try exportedValues(options) }
        let output = url.path
        let partial = output + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        do throws(TransferError) {
            let file = try LineWriter(creating: partial)
            let report: ExportReport
            do {
                report = try transferring {
                    try exportBuckets(
                        buckets, values: values, options: options, progress: progress, writeLine: file.line)
                }
            } catch {
                try? file.close()
                throw error
            }
            try file.close()
            if rename(partial, output) != 0 {
                throw TransferError(
                    .failure, "cannot move the export to '\(output)': \(String(cString: strerror(errno)))")
            }
            return report
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// Writes the export (see ``export(options:progress:writingLinesTo:)``) to an open file handle,
    /// from its current position; the handle is not closed.
    ///
    /// ```swift
    /// try db.export(to: FileHandle.standardOutput, options: ExportOptions(buckets: ["Person"]))
    /// ```
    /// - Throws: ``TransferError``, as ``export(options:progress:writingLinesTo:)`` does, and
    ///   `.failure` when the handle cannot be written.
    @discardableResult
    public func export(
        to handle: FileHandle, options: ExportOptions = ExportOptions(), progress: TransferProgressHandler? = nil
    ) throws(TransferError) -> ExportReport {
        let writer = LineWriter(descriptor: handle.fileDescriptor, name: "the output")
        let report = try export(options: options, progress: progress, writingLinesTo: writer.line)
        try writer.flush()
        return report
    }

    /// The export of `buckets` (already opened, so that an unknown one fails before anything is
    /// written).
    func exportBuckets(
        _ buckets: [RawBucket], values: [(name: String, bytes: [UInt8])], options: ExportOptions,
        progress: TransferProgressHandler?, writeLine: (String) throws -> Void
    ) throws -> ExportReport {
        try withoutActuallyEscaping(writeLine) { writeLine in
            var exporter = Exporter(skipDamaged: options.skipDamaged, progress: progress, writeLine: writeLine)
            try exporter.export(buckets, values: values)
            return exporter.report
        }
    }

    /// The named values an export holds, by name (bytewise): all of them with
    /// ``ExportOptions/includesValues``, else none.
    func exportedValues(_ options: ExportOptions) throws -> [(name: String, bytes: [UInt8])] {
        guard options.includesValues else { return [] }
        // One snapshot for the names and their values.
        return try read { tx in
            try tx.values.names().compactMap { name in try tx.values.cbor(for: name).map { (name, $0) } }
        }
    }
}

/// One export's walk over its buckets, with the salvage of damaged ones.
private struct Exporter {
    let skipDamaged: Bool
    let progress: TransferProgressHandler?
    let writeLine: (String) throws -> Void
    var report = ExportReport()

    mutating func export(_ buckets: [RawBucket], values: [(name: String, bytes: [UInt8])]) throws {
        // Format 5 with named values; else 4 when a record carries index values (an index tools
        // cannot compute), else 3.
        try write(ExportFormat.header(for: buckets.map(\.descriptor), values: !values.isEmpty))
        try exportBuckets(buckets)
        // The named values after every bucket, by name.
        for (name, bytes) in values {
            let value: CBORValue
            do {
                value = try CBORValue(decoding: bytes)
            } catch {
                let reason =
                    "named value \(jsonString(name)): the stored value is not valid CBOR (\(error)); run `buri check`"
                guard skipDamaged else { throw TransferError(.failure, reason) }
                skip(bucket: "(named values)", key: name, reason: reason)
                continue
            }
            try write(ExportFormat.valueLine(name: name, value: value))
        }
    }

    mutating func exportBuckets(_ buckets: [RawBucket]) throws {
        for raw in buckets {
            try write(ExportFormat.schemaLine(raw.descriptor))
            let carried = ExportFormat.carriedIndexes(raw.descriptor)
            let total = progress != nil ? (skipDamaged ? (try? raw.count()) ?? 0 : try raw.count()) : 0
            let head = "{\"bucket\":\(jsonString(raw.name)),\"key\":"
            let dates = raw.descriptor.datePaths
            let cursor = try raw.cursor(.all)
            var done = 0
            var last: String? = nil
            do {
                while let record = try cursor.nextRecord() {
                    last = record.key
                    let object: String
                    do {
                        object =
                            try ExportFormat.exactJSONText(
                                ofPayload: record.payload, bucket: raw.name, key: record.key, dates: dates)
                            + Self.carriedValues(record, of: raw.name, carried)
                    } catch {
                        guard skipDamaged else { throw error }
                        skip(bucket: raw.name, key: record.key, reason: error.message)
                        continue
                    }
                    try write(head + jsonString(record.key) + ",\"object\":" + object + "}")
                    done += 1
                    if let progress, done % 1000 == 0 {
                        progress(
                            TransferProgress(
                                phase: .exporting(bucket: raw.name), done: done, total: total, unit: .objects))
                    }
                }
            } catch {
                guard skipDamaged, Self.damage(error) != nil else { throw error }
                report.exported += done
                // The salvage meets the same damage again and reports it.
                try salvage(raw, after: last, head: head)
                continue
            }
            report.exported += done
        }
    }

    /// Writes a line; an error of the caller's writer is carried as it is (never taken for damage:
    /// only the database's errors are).
    func write(_ line: String) throws { try writeLine(line) }

    mutating func skip(bucket: String, key: String, reason: String) {
        report.skippedRecords.append(ExportReport.SkippedRecord(bucket: bucket, key: key, reason: reason))
    }

    /// The rest of a bucket whose record walk met damage after `last`: every key listed from the
    /// top down to the damage, and between the two every key an index entry names, each read on
    /// its own, in key order; what cannot be read (or listed) goes to the report.
    /// If the walk down meets no damage, every key above `last` is listed, and only the records
    /// that fail to read (the one the walk stopped at) are skipped.
    mutating func salvage(_ raw: RawBucket, after last: String?, head: String) throws {
        // Keys from the end down to the damage (or to `last`, if the walk down meets none).
        var above: [String] = []
        var unlisted: BuriError? = nil
        do {
            let down = try raw.cursor(Query.all.descending())
            while let key = try down.nextKey(), Self.isAfter(key, last) { above.append(key) }
        } catch {
            guard let damage = Self.damage(error) else { throw error }
            unlisted = damage
        }
        var candidates: [String] = []
        if let unlisted {
            // Records between `last` and the lowest key listed from above cannot be listed: the
            // keys index entries name there are the ones that can still be found.
            let lowest = above.last
            var seen = Set<[UInt8]>()
            var unreadIndexes: [String] = []
            for index in raw.descriptor.indexes {
                do {
                    let cursor = try raw.cursor(Query.index(index.name, from: .unbounded, to: .unbounded))
                    // Index order is not key order: every entry is looked at.
                    while let key = try cursor.nextKey() {
                        if Self.isAfter(key, last), Self.isBefore(key, lowest), seen.insert(Array(key.utf8)).inserted {
                            candidates.append(key)
                        }
                    }
                } catch {
                    guard Self.damage(error) != nil else { throw error }
                    unreadIndexes.append(index.name)
                }
            }
            candidates.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            report.skippedRanges.append(
                ExportReport.SkippedRange(
                    bucket: raw.name, after: last, before: lowest, reason: unlisted.description,
                    keysFromIndexes: candidates.count, unreadIndexes: unreadIndexes))
        }
        candidates.append(contentsOf: above.reversed())
        for key in candidates {
            let object: String
            do {
                guard let record = try raw.record(forKey: key) else {
                    skip(bucket: raw.name, key: key, reason: "an index entry names it, but it has no record")
                    continue
                }
                object =
                    try ExportFormat.exactJSONText(
                        ofPayload: record.payload, bucket: raw.name, key: key, dates: raw.descriptor.datePaths)
                    + Self.carriedValues(record, of: raw.name, ExportFormat.carriedIndexes(raw.descriptor))
            } catch {
                if let damage = Self.damage(error) {
                    skip(bucket: raw.name, key: key, reason: damage.description)
                } else if let transfer = error as? TransferError {
                    skip(bucket: raw.name, key: key, reason: transfer.message)
                } else {
                    throw error
                }
                continue
            }
            try write(head + jsonString(key) + ",\"object\":" + object + "}")
            report.exported += 1
        }
    }

    /// The error if it means unreadable data (a damaged block or record, or a sealed record of an
    /// encrypted database that fails its authentication), which `skipDamaged` skips; `nil` for
    /// anything else.
    static func damage(_ error: any Error) -> BuriError? {
        guard let error = error as? BuriError else { return nil }
        switch error {
        case .damaged, .corruption, .decodingFailed, .authenticationFailed: return error
        default: return nil
        }
    }

    /// The record's `"indexValues"` member (format 4; empty when the bucket's indexes are all
    /// computable): the values its header stores for the indexes tools cannot compute.
    static func carriedValues(
        _ record: StoredRecord, of bucket: String, _ carried: [IndexDefinition]
    ) throws(TransferError) -> String {
        do {
            return try ExportFormat.indexValuesMember(record.indexValues, carried: carried)
        } catch {
            throw TransferError(
                .failure,
                "bucket '\(bucket)', key \(jsonString(record.key)): \(error.message); the record is damaged (run `buri check`)"
            )
        }
    }

    /// Whether `key` sorts bytewise after `bound` (every key does when there is none).
    static func isAfter(_ key: String, _ bound: String?) -> Bool {
        guard let bound else { return true }
        return bound.utf8.lexicographicallyPrecedes(key.utf8)
    }

    /// Whether `key` sorts bytewise before `bound` (every key does when there is none).
    static func isBefore(_ key: String, _ bound: String?) -> Bool {
        guard let bound else { return true }
        return key.utf8.lexicographicallyPrecedes(bound.utf8)
    }
}

/// Buffered lines to a file or an open descriptor.
final class LineWriter {
    private let fd: Int32
    private let name: String
    private let owned: Bool
    private var buffer: [UInt8] = []

    /// Creates (or truncates) the file at `path`.
    init(creating path: String) throws(TransferError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else {
            throw TransferError(.failure, "cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        name = "'\(path)'"
        owned = true
        buffer.reserveCapacity(1 << 16)
    }

    /// Writes to `descriptor`, which stays open.
    init(descriptor: Int32, name: String) {
        fd = descriptor
        self.name = name
        owned = false
        buffer.reserveCapacity(1 << 16)
    }

    func line(_ text: String) throws(TransferError) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= 1 << 16 { try flush() }
    }

    func flush() throws(TransferError) {
        guard !buffer.isEmpty else { return }
        var failure: Int32 = 0
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count, let base = raw.baseAddress {
                let written = write(fd, base + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += written
            }
        }
        buffer.removeAll(keepingCapacity: true)
        guard failure == 0 else {
            var message = "cannot write to \(name): \(String(cString: strerror(failure)))"
            if failure == ENOSPC {
                message +=
                    "; the disk is full; the database is not affected by this output: free space there and run the command again"
            }
            throw TransferError(.failure, message)
        }
    }

    /// Flushes, and closes a file this writer created.
    func close() throws(TransferError) {
        try flush()
        if owned, closeFile(fd) != 0 {
            throw TransferError(.failure, "cannot write to \(name): \(String(cString: strerror(errno)))")
        }
    }
}

private func closeFile(_ fd: Int32) -> Int32 { close(fd) }
