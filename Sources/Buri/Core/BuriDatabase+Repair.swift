import BuriStorage
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One object of one bucket, named in a ``RepairReport``.
///
/// ```swift
/// for object in report.lostObjects { print("lost: \(object.bucket)/\(object.key)") }
/// ```
public struct ObjectReference: Sendable, Hashable, CustomStringConvertible {
    /// The bucket's name (`#<id>` if its catalog entry did not survive).
    public var bucket: String
    public var key: String

    public init(bucket: String, key: String) {
        self.bucket = bucket
        self.key = key
    }

    public var description: String { "bucket '\(bucket)', key '\(key)'" }

    // Names and keys are compared as bytes: "é" and "e\u{301}" are two objects.
    public static func == (a: Self, b: Self) -> Bool {
        a.bucket.utf8.elementsEqual(b.bucket.utf8) && a.key.utf8.elementsEqual(b.key.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(Array(bucket.utf8))
        hasher.combine(Array(key.utf8))
    }
}

/// What ``BuriDatabase/repair(path:options:)`` salvaged, and what it could not recover.
///
/// ```swift
/// let report = try BuriDatabase.repair(path: "people.buri")
/// if !report.isComplete { print(report.lines.joined(separator: "\n")) }
/// ```
public struct RepairReport: Sendable {
    /// What LevelDB's repair reported dropping, verbatim from the `LOG` it wrote: unreadable table
    /// blocks, log records it could not parse, files it could not read — such as
    /// `Table #9: 1893 entries Corruption: block checksum mismatch`. The damaged files themselves
    /// are kept in the database's `lost/` directory.
    public var storageLosses: [String]
    /// Write-ahead log records that failed their checksum (found before the repair ran). LevelDB's
    /// repair keeps whatever of them still parses *without* checking it, so the objects they name
    /// are recovered but may hold damaged values: see ``suspectObjects``.
    public var damagedLogRecords: [DamagedLogRecord]
    /// Objects written by a damaged log record (or by intact records LevelDB drops with it when
    /// the damage breaks the log's framing): each may be missing, out of date or wrong; verify
    /// them against their source, or store them again. In bucket, then key order (bytewise).
    public var suspectObjects: [ObjectReference]
    /// Objects known to be lost: their records were in data that could not be read, but index
    /// entries naming them survived (and were removed by the check). Objects whose records and
    /// index entries were both lost, or that had no index entries, cannot be named. In bucket,
    /// then key order (bytewise).
    public var lostObjects: [ObjectReference]
    /// The result of ``BuriDatabase/check(repair:progress:)`` on the salvaged database, which
    /// rebuilt its index entries from the surviving records.
    public var check: ConsistencyReport

    /// Whether everything was recovered intact: LevelDB dropped nothing, no log record was
    /// damaged, no object is known lost and the check left no problem.
    public var isComplete: Bool {
        storageLosses.isEmpty && damagedLogRecords.isEmpty && suspectObjects.isEmpty && lostObjects.isEmpty && check.isConsistent
    }

    /// The report as lines for people: every loss, every suspect object, every problem the check
    /// could not fix.
    public var lines: [String] {
        var lines: [String] = []
        for line in storageLosses { lines.append("lost: LevelDB dropped unreadable data: \(line)") }
        for record in damagedLogRecords {
            lines.append("damaged log record: \(record); recovered without its checksum")
        }
        for object in suspectObjects {
            lines.append("suspect: \(object): its last write was in a damaged log record, so it may be missing, out of date or wrong; verify it or store it again")
        }
        for object in lostObjects {
            lines.append("lost: \(object): its record could not be read; its index entries were removed")
        }
        for problem in check.problems where !problem.repaired { lines.append("unrepaired: \(problem)") }
        return lines
    }
}

extension BuriDatabase {
    /// Salvages a database whose files are damaged — a table block or log record failing its
    /// checksum, a truncated table, a garbled `CURRENT` or `MANIFEST` — so that it opens again, and
    /// says what could not be recovered. The database must not be open. Keep a copy of the
    /// directory first: what LevelDB cannot read is dropped.
    ///
    /// 1. Every write-ahead log is read and its records checked against their checksums, to name
    ///    the objects in damaged ones (``RepairReport/suspectObjects``).
    /// 2. LevelDB's repair (``LevelDBEngine/repair(path:options:)``) rebuilds the file set from every
    ///    table block and log record it can still read; unreadable data is dropped and the damaged
    ///    files are kept in a `lost/` subdirectory. What it dropped is read from the `LOG` it writes
    ///    (``RepairReport/storageLosses``).
    /// 3. If Buri's header was in the data that was lost, it is written again — but only when every
    ///    key left lies in Buri's key spaces; otherwise this is not a Buri database.
    /// 4. The database is opened and ``check(repair:progress:)`` rebuilds the index entries from
    ///    the surviving records; entries whose records are gone name lost objects
    ///    (``RepairReport/lostObjects``). Damaged records and records of a bucket whose catalog entry
    ///    was lost stay listed in ``RepairReport/check``.
    ///
    /// ```swift
    /// let report = try BuriDatabase.repair(path: "people.buri")
    /// for line in report.lines { print(line) }
    /// ```
    ///
    /// - Throws: ``BuriError/notABuriDatabase(path:)`` for a directory holding no LevelDB files
    ///   or keys Buri never writes (nothing is written then), ``BuriError/storage(_:)`` for LevelDB
    ///   errors (such as the database being open).
    @discardableResult
    public static func repair(path: String, options: BuriOptions = BuriOptions()) throws(BuriError) -> RepairReport {
        // LevelDB's repair would turn any directory into a database; only salvage one that was.
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        guard names.contains(where: { $0 == "CURRENT" || $0.hasPrefix("MANIFEST-") || $0.hasSuffix(".ldb") || $0.hasSuffix(".sst") || $0.hasSuffix(".log") }) else {
            throw .notABuriDatabase(path: path)
        }
        var storageOptions = options.storage
        storageOptions.createIfMissing = false
        let damagedLog: [DamagedLogRecord]
        let losses: [String]
        do {
            damagedLog = try LevelDBEngine.damagedLogRecords(path: path)
            try LevelDBEngine.repair(path: path, options: storageOptions)
            // LevelDB's repair starts a fresh LOG (the previous one becomes LOG.old), so all of it
            // is the repair's own account.
            losses = storageLossLines(logText: (FileManager.default.contents(atPath: path + "/LOG")).map { String(decoding: $0, as: UTF8.self) } ?? "")
            let engine = try LevelDBEngine(path: path, options: storageOptions)
            defer { engine.close() }
            let current = try engine.latest()
            if try current.get(Keyspace.headerKey) == nil {
                let cursor = try current.cursor(in: .all)
                while try cursor.next() {
                    let tag = cursor.withKey { $0.first ?? 0xFF }
                    guard (Keyspace.catalogTag...Keyspace.countTag).contains(tag) else { throw BuriError.notABuriDatabase(path: path) }
                }
                let batch = engine.makeBatch()
                batch.put(Keyspace.headerKey, Keyspace.headerValue())
                try engine.commit(batch, conditions: nil, sync: true)
            }
        } catch {
            throw BuriError.wrap(error)
        }
        var openOptions = options
        openOptions.createIfMissing = false
        let db = try BuriDatabase(path: path, options: openOptions)
        defer { db.close() }
        let check = try db.check(repair: true)
        var bucketNames: [UInt32: String] = [:]
        for descriptor in try db.allBucketInfo() { bucketNames[descriptor.id] = descriptor.name }

        var suspects: [ObjectReference] = []
        for record in damagedLog {
            for key in record.keys {
                guard let (bucket, objectKey) = Keyspace.bucketAndObjectKey(ofRecordKey: key) else { continue }
                let reference = ObjectReference(bucket: bucketNames[bucket] ?? "#\(bucket)", key: objectKey)
                if !suspects.contains(reference) { suspects.append(reference) }
            }
        }
        var lost: [ObjectReference] = []
        for problem in check.problems where problem.kind == .danglingEntry {
            guard let bucket = problem.bucket, let key = problem.key else { continue }
            let reference = ObjectReference(bucket: bucket, key: key)
            if !lost.contains(reference) { lost.append(reference) }
        }
        func ordered(_ references: [ObjectReference]) -> [ObjectReference] {
            references.sorted { a, b in
                a.bucket.utf8.elementsEqual(b.bucket.utf8) ? a.key.utf8.lexicographicallyPrecedes(b.key.utf8) : a.bucket.utf8.lexicographicallyPrecedes(b.bucket.utf8)
            }
        }
        return RepairReport(storageLosses: losses, damagedLogRecords: damagedLog, suspectObjects: ordered(suspects), lostObjects: ordered(lost), check: check)
    }

    /// The lines of a LevelDB repair's `LOG` that report dropped data, without their timestamp and
    /// thread columns: corruption, I/O errors, dropped or ignored records and unparsable keys.
    /// (Lines about archiving files and the closing summary are not losses.)
    static func storageLossLines(logText: String) -> [String] {
        var result: [String] = []
        for line in logText.split(whereSeparator: \.isNewline) {
            // "2025/01/02-03:04:05.123456 7f3a… message"
            let columns = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            let message = columns.count == 3 ? String(columns[2]) : String(line)
            if message.hasPrefix("Archiving ") || message.hasPrefix("**** ") { continue }
            let markers = ["Corruption", "IO error", "dropping", "dropped", "ignoring", "unparsable", "Not implemented", "Invalid argument"]
            if markers.contains(where: { message.contains($0) }) {
                result.append(String(message.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()))
            }
        }
        return result
    }
}
