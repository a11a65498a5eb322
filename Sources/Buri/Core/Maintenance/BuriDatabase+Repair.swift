import BuriCodec
import BuriEngines
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

/// A stretch of one bucket's objects that was in data no one can read any more: every object
/// whose key lies between ``fromKey`` and ``toKey`` (both included; `nil` is the bucket's first or
/// last) may be lost, including objects the report cannot name.
///
/// ```swift
/// for range in report.lostRanges { print("\(range): compare with a backup") }
/// ```
public struct LostRange: Sendable, Hashable, CustomStringConvertible {
    /// The bucket's name (`#<id>` if no catalog entry names its id).
    public var bucket: String
    public var bucketId: UInt32
    public var fromKey: String?
    public var toKey: String?
    /// The unreadable data: file, block and what is wrong with it.
    public var source: String

    public var description: String {
        let span: String
        switch (fromKey, toKey) {
        case (nil, nil): span = "every object"
        case let (from?, nil): span = "objects from key '\(from)' to the last"
        case let (nil, to?): span = "objects from the first to key '\(to)'"
        case let (from?, to?):
            span =
                from.utf8.elementsEqual(to.utf8)
                ? "the object with key '\(from)'" : "objects from key '\(from)' through '\(to)'"
        }
        return "bucket '\(bucket)', \(span)"
    }
}

/// What ``BuriDatabase/repair(path:options:levelDB:)`` salvaged, and what it could not recover.
///
/// ```swift
/// let report = try BuriDatabase.repair(path: "people.buri")
/// if !report.isComplete { print(report.lines.joined(separator: "\n")) }
/// ```
public struct RepairReport: Sendable {
    /// What LevelDB's own repair reported dropping, verbatim from the `LOG` it wrote, such as
    /// `Table #9: 1893 entries Corruption: block checksum mismatch`: its account, for reference.
    /// What was actually lost is in ``lostObjects``, ``lostRanges`` and ``unknownLosses``
    /// (LevelDB also reports damage in leftover files that held nothing live, and records it
    /// dropped that Buri put back).
    public var storageLosses: [String]
    /// Write-ahead log records that failed their checksum or could not be framed (found before
    /// the repair ran). What became of their writes is in ``suspectObjects``, ``lostObjects`` and
    /// ``restoredObjects``.
    public var damagedLogRecords: [DamagedLogRecord]
    /// Objects that hold a state read from damaged data without its checksum (LevelDB's repair
    /// applies a damaged log record as far as it parses): each may be wrong; verify them against
    /// their source, or store them again. In bucket, then key order (bytewise).
    public var suspectObjects: [ObjectReference]
    /// Objects known to be lost: their latest state was in unreadable data or was dropped, and
    /// they now hold an older state or none — named from the damaged data itself where its keys
    /// still parse, and from surviving index entries (which the check then removed). In bucket,
    /// then key order (bytewise).
    public var lostObjects: [ObjectReference]
    /// Stretches of objects in unreadable data: objects there may be lost although no surviving
    /// key names them.
    public var lostRanges: [LostRange]
    /// Losses whose keys cannot be known at all: a missing write-ahead log, log records whose
    /// bytes are gone, a bucket whose every key was lost.
    public var unknownLosses: [String]
    /// Buckets whose catalog entry was lost and was written again from what survives, so that
    /// their objects stay reachable.
    public var recoveredBuckets: [RecoveredBucket]
    /// Objects whose latest write, in a checksum-valid log record that LevelDB's repair dropped
    /// (the log's framing around it was damaged), was put back: nothing of them was lost.
    public var restoredObjects: [ObjectReference]
    /// Files that were not part of the database (no MANIFEST names them: left by an interrupted
    /// compaction, or not yet deleted), moved to `lost/` unread by the repair. Not a loss.
    public var setAsideFiles: [String]
    /// Other damage to Buri's own keys that the repair wrote again (the database header, bucket
    /// catalog entries, retired-generation markers, object counts), for people.
    public var notes: [String]
    /// The result of ``BuriDatabase/check(repair:progress:)`` on the salvaged database, which
    /// rebuilt its index entries from the surviving records.
    public var check: ConsistencyReport

    /// Whether everything was recovered intact: no object lost or suspect, no unreadable data
    /// that held objects, no loss of unknown keys, no catalog entry rebuilt and no problem left.
    public var isComplete: Bool {
        suspectObjects.isEmpty && lostObjects.isEmpty && lostRanges.isEmpty && unknownLosses.isEmpty
            && recoveredBuckets.isEmpty
            && check.isConsistent
    }

    /// The report as lines for people: every loss, every suspect object, every rebuilt bucket,
    /// every problem the check could not fix, each saying what to do.
    public var lines: [String] {
        var lines: [String] = []
        for file in setAsideFiles {
            lines.append(
                "note: \(file) is not part of the database (no MANIFEST names it: left by an interrupted compaction, or not yet deleted); moved to lost/ without reading it; nothing in it was lost"
            )
        }
        for line in storageLosses { lines.append("leveldb: \(line)") }
        for record in damagedLogRecords { lines.append("damaged log record: \(record)") }
        for note in notes { lines.append("note: \(note)") }
        if !restoredObjects.isEmpty {
            let buckets = Set(restoredObjects.map { Array($0.bucket.utf8) }).count
            lines.append(
                "recovered: \(restoredObjects.count) object\(restoredObjects.count == 1 ? "" : "s") in \(buckets) bucket\(buckets == 1 ? "" : "s") whose latest write, in a checksum-valid log record that LevelDB's repair dropped, was put back intact"
            )
        }
        for bucket in recoveredBuckets {
            var line =
                "recovered: bucket id \(bucket.id) lost its catalog entry; its \(bucket.objects) object\(bucket.objects == 1 ? "" : "s") stay reachable as bucket '\(bucket.name)', rebuilt from \(bucket.source)"
            if bucket.nameIsKnown {
                line += "; verify its definition (`buri info`)"
            } else {
                line += "; its name was lost"
                if let hint = bucket.possibleName { line += " (it may be '\(hint)', which a retired generation names)" }
                line +=
                    ": copy its objects into the right bucket (`buri export DB '\(bucket.name)'`, then import them) and drop '\(bucket.name)'"
            }
            lines.append(line)
        }
        for object in suspectObjects {
            lines.append(
                "suspect: \(object): its last write was in damaged data, so it may be missing, out of date or wrong; verify it or store it again"
            )
        }
        for object in lostObjects {
            lines.append(
                "lost: \(object): its latest state was in data that could not be read; its index entries were removed; restore it from a backup or store it again"
            )
        }
        for range in lostRanges {
            lines.append(
                "lost: \(range) may be lost: they were in unreadable data (\(range.source)); objects named above are lost for certain, others in the range may be too: compare with a backup"
            )
        }
        for loss in unknownLosses { lines.append("lost: \(loss); compare with a backup") }
        for problem in check.problems where !problem.repaired { lines.append("unrepaired: \(problem)") }
        return lines
    }
}

extension BuriDatabase {
    /// Salvages a database whose files are damaged — a table block or log record failing its
    /// checksum, a truncated or missing table, a missing log, a garbled `CURRENT` or `MANIFEST` —
    /// so that it opens again, keeping every object that can still be read and saying exactly
    /// what could not be recovered. The database must not be open. Keep a copy of the directory
    /// first: what cannot be read is dropped (the damaged files are kept in `lost/`).
    ///
    /// 1. The readable data is inventoried and LevelDB's repair run around it
    ///    (`LevelDBEngine.salvage(path:options:)`): every live table block and log record is
    ///    read and checked before, files the MANIFEST does not name are set aside, and after the
    ///    repair every key is compared with its latest readable state. Writes of checksum-valid
    ///    log records that LevelDB dropped are put back; every other difference is a lost or
    ///    suspect object, an unreadable range, or a loss whose keys cannot be known.
    /// 2. If Buri's header was in the data that was lost, it is written again — but only when
    ///    every key left lies in Buri's key spaces; otherwise this is not a Buri database.
    /// 3. A bucket id whose records survive without a catalog entry gets one again: from a copy
    ///    still legible in the damaged data where it agrees with the records, otherwise inferred
    ///    from the records (index ids and kinds from their headers, fields and key field from
    ///    their payloads) under the name `recovered-<id>`. Its index entries are never deleted
    ///    while its catalog entry is unknown.
    /// 4. ``check(repair:progress:)`` rebuilds the index entries from the surviving records;
    ///    entries whose records are gone name lost objects too.
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
    public static func repair(
        path: String, options: BuriOptions = BuriOptions(), levelDB: LevelDBOptions = .buriDefaults
    ) throws(BuriError) -> RepairReport {
        // LevelDB's repair would turn any directory into a database; only salvage one that was.
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        guard names.contains(where: { $0 == LevelDBEngine.currentFileName || LevelDBEngine.isDataFile($0) }) else {
            throw .notABuriDatabase(path: path)
        }
        var storageOptions = levelDB
        storageOptions.createIfMissing = false
        let salvage: SalvageReport
        var notes: [String] = []
        var recovery = CatalogRecovery.Outcome()
        var rolledBack = Set<[UInt8]>()
        do {
            salvage = try LevelDBEngine.salvage(path: path, options: storageOptions)
            let engine = try LevelDBEngine(path: path, options: storageOptions)
            defer { engine.close() }
            // Damaged states first set back where they are not even of their key space's form, then
            // the header checked, the catalog rebuilt, and states that do not fit it (an index the
            // bucket does not have) set back too.
            rolledBack = try rollBackUnusable(salvage.suspectKeys, engine: engine)
            let current = try engine.latest()
            if try current.get(Keyspace.headerKey) == nil {
                let cursor = try current.cursor(in: .all)
                while try cursor.next() {
                    let tag = cursor.withKey { $0.first ?? 0xFF }
                    guard (Keyspace.catalogTag...Keyspace.valueTag).contains(tag) else {
                        throw BuriError.notABuriDatabase(path: path)
                    }
                }
                // The version the lost header had, if a copy is legible in the damaged data.
                let copy = salvage.unverifiedEntries.first { $0.key == Keyspace.headerKey }?.value.flatMap(
                    Keyspace.parseHeader)
                let version = copy.flatMap { $0 <= Keyspace.formatVersion ? $0 : nil } ?? Keyspace.formatVersion
                let batch = engine.makeBatch()
                batch.put(Keyspace.headerKey, Keyspace.headerValue(version: version))
                try engine.commit(batch, conditions: nil, sync: true)
                notes.append(
                    "Buri's database header was in the data that was lost; it was written again (format version \(version)\(copy == nil ? ", the version of this Buri" : ", as a damaged copy of it says"))"
                )
            }
            let damagedKeys = Set((salvage.lostKeys + salvage.suspectKeys).map(\.key))
            recovery = try CatalogRecovery.run(
                engine: engine, unverified: salvage.unverifiedEntries, damagedKeys: damagedKeys,
                unreadable: salvage.unreadableRanges)
            rolledBack.formUnion(
                try rollBackUnusable(salvage.suspectKeys.filter { !rolledBack.contains($0.key) }, engine: engine))
            notes += recovery.notes
        } catch {
            throw BuriError.wrap(error)
        }
        var openOptions = options
        openOptions.createIfMissing = false
        // No purge runs while the report is drawn up (the next open resumes it).
        openOptions.purgesInBackground = false
        let db = try BuriDatabase(path: path, options: openOptions, levelDB: levelDB)
        defer { db.close() }
        let check = try db.check(repair: true)
        var bucketNames: [UInt32: String] = [:]
        for descriptor in try db.allBucketInfo() { bucketNames[descriptor.id] = descriptor.name }
        func bucketName(_ id: UInt32) -> String { bucketNames[id] ?? "#\(id)" }

        // Keys under a retired id are a replaced generation's garbage, not objects: their loss is none.
        let retired = Set(try db.pendingPurges().map(\.id))
        func objects(_ keys: [[UInt8]]) -> [ObjectReference] {
            keys.compactMap { key in
                guard let (bucket, objectKey) = Keyspace.bucketAndObjectKey(ofRecordKey: key), !retired.contains(bucket)
                else { return nil }
                return ObjectReference(bucket: bucketName(bucket), key: objectKey)
            }
        }
        let suspects = Set(objects(salvage.suspectKeys.map(\.key).filter { !rolledBack.contains($0) }))
        var lost = Set(objects(salvage.lostKeys.map(\.key) + Array(rolledBack))).subtracting(suspects)
        for problem in check.problems where problem.kind == .danglingEntry {
            guard let bucket = problem.bucket, let key = problem.key else { continue }
            let reference = ObjectReference(bucket: bucket, key: key)
            if !suspects.contains(reference) { lost.insert(reference) }
        }
        lost.formUnion(recovery.lostObjects)
        let strays = rolledBack.filter { Keyspace.bucketAndObjectKey(ofRecordKey: $0) == nil }.count
        if strays > 0 {
            notes.append(
                "\(strays) key\(strays == 1 ? "" : "s") that a damaged log record wrote in a form Buri never writes (outside its key spaces, or not of its space's form) \(strays == 1 ? "was" : "were") set back to the state before it"
            )
        }
        let rebuilt = Set(recovery.recovered.map { Keyspace.catalogKey(bucket: $0.name) })
        for loss in salvage.suspectKeys + salvage.lostKeys
        where Keyspace.bucketAndObjectKey(ofRecordKey: loss.key) == nil && !rebuilt.contains(loss.key) {
            if let note = describeOtherKey(loss.key, detail: loss.detail) { notes.append(note) }
        }

        var lostRanges: [LostRange] = []
        var unknownLosses = salvage.unknownLosses + recovery.unknownLosses
        let maxKnownId = max(bucketNames.keys.max() ?? 0, retired.max() ?? 0)
        for range in salvage.unreadableRanges {
            let (ranges, other) = describe(range, bucketNames: bucketNames, retired: retired, maxKnownId: maxKnownId)
            lostRanges += ranges
            unknownLosses += other.losses
            notes += other.notes
        }
        func ordered(_ references: some Sequence<ObjectReference>) -> [ObjectReference] {
            references.sorted { a, b in
                a.bucket.utf8.elementsEqual(b.bucket.utf8)
                    ? a.key.utf8.lexicographicallyPrecedes(b.key.utf8)
                    : a.bucket.utf8.lexicographicallyPrecedes(b.bucket.utf8)
            }
        }
        return RepairReport(
            storageLosses: salvage.levelDBLog, damagedLogRecords: salvage.damagedLogRecords,
            suspectObjects: ordered(suspects),
            lostObjects: ordered(lost), lostRanges: lostRanges, unknownLosses: unknownLosses,
            recoveredBuckets: recovery.recovered,
            restoredObjects: ordered(objects(salvage.restoredKeys)), setAsideFiles: salvage.setAside, notes: notes,
            check: check)
    }

    /// Suspect keys whose damaged state is not even well-formed — a record whose header or CBOR
    /// does not parse, a catalog entry that does not decode — are set back to their state in
    /// intact data (or removed, when intact data holds none): such a state serves no one, and
    /// keeping it would leave the database inconsistent. Returns the keys set back; they are
    /// reported as lost (their last write could not be recovered).
    static func rollBackUnusable(_ suspects: [SalvageReport.KeyLoss], engine: any StorageEngine) throws -> Set<[UInt8]>
    {
        let reader = try engine.latest()
        let batch = engine.makeBatch()
        var rolledBack = Set<[UInt8]>()
        var descriptors: [UInt32: BucketDescriptor] = [:]
        let catalog = try reader.cursor(in: Keyspace.catalogRange)
        while try catalog.next() {
            if let descriptor = try? BucketDescriptor.decode(catalog.value) { descriptors[descriptor.id] = descriptor }
        }
        func wellFormed(_ value: [UInt8]) -> (_ key: [UInt8]) -> Bool {
            { key in
                guard isWellFormed(key: key, value: value) else { return false }
                // A record must fit its bucket's catalog entry, where there is one.
                guard key.first == Keyspace.recordTag, let (bucket, _) = Keyspace.bucketAndObjectKey(ofRecordKey: key),
                    let descriptor = descriptors[bucket], !Keyspace.looksSealed(value)
                else { return true }
                return value.withUnsafeBytes { raw in
                    guard let header = try? RecordHeader.parse(raw).0 else { return false }
                    return header.entries.allSatisfy { entry in
                        guard let index = descriptor.indexes.first(where: { $0.id == entry.index }) else {
                            return false
                        }
                        return IndexTuple.split(entry.tuple).count == index.components.count
                    }
                }
            }
        }
        for suspect in suspects {
            guard let value = try reader.get(suspect.key), !wellFormed(value)(suspect.key) else { continue }
            switch suspect.verifiedState {
            case .absent:
                batch.delete(suspect.key)
            case .value(let previous) where wellFormed(previous)(suspect.key):
                batch.put(suspect.key, previous)
            default:
                continue  // nothing better to put there: left for check to report
            }
            rolledBack.insert(suspect.key)
        }
        if !batch.isEmpty { try engine.commit(batch, conditions: nil, sync: true) }
        return rolledBack
    }

    /// Whether `key` lies in one of Buri's key spaces with a value of the form that space holds
    /// (docs/FORMAT.md §3). Index entries and counts are derived data that `check` rebuilds; a key
    /// outside every space was not written by Buri.
    static func isWellFormed(key: [UInt8], value: [UInt8]) -> Bool {
        switch key.first {
        case Keyspace.databaseTag?:
            if key == Keyspace.bucketIdsKey { return Keyspace.parseBucketIds(value) != nil }
            // Repair has no key: an encryption header is kept as long as it says what it is.
            if key == Keyspace.encryptionKey { return value.starts(with: Keyspace.encryptionHeaderMagic) }
            if key == Keyspace.encryptionStateKey { return Keyspace.parseBucketIds(value) != nil }
            // A shared engine's live client (format 12): an empty value bound to its lease.
            if Keyspace.isLeaseKey(key) { return value.isEmpty }
            return key == Keyspace.headerKey && Keyspace.parseHeader(value) != nil
        case Keyspace.indexTag?:
            // Empty, or a text index's positions (format 6 and 7 layouts): `check` then compares
            // them with the catalog and the record.
            guard key.count > Keyspace.indexPrefixLength else { return false }
            return value.isEmpty
                || value.withUnsafeBytes { raw in
                    (try? TextEntries.decode(raw, layout: 2)) != nil || (try? TextEntries.decode(raw, layout: 1)) != nil
                }
        case Keyspace.retiredTag?:
            return Keyspace.parseRetired(key: key, value: value) != nil
        case Keyspace.countTag?:
            return (Keyspace.bucket(ofCountKey: key) != nil || Keyspace.ids(ofTextTotalKey: key) != nil)
                && Keyspace.parseCount(value) != nil
        case Keyspace.recordTag?:
            guard key.count > Keyspace.recordPrefixLength else { return false }
            // A sealed record cannot be opened without the key, which repair does not have: its
            // form is all that can be judged, and `check` (with the key) authenticates it.
            if Keyspace.looksSealed(value) { return true }
            return value.withUnsafeBytes { raw in
                guard let offset = try? RecordHeader.parse(raw).payloadOffset else { return false }
                return (try? CBORValue(decoding: UnsafeRawBufferPointer(rebasing: raw[offset...]))) != nil
            }
        case Keyspace.catalogTag?:
            guard let descriptor = try? BucketDescriptor.decode(value) else { return false }
            return Array(descriptor.name.utf8) == Array(key.dropFirst())
        case Keyspace.valueTag?:
            return Keyspace.valueName(fromValueKey: key) != nil
                && (Keyspace.looksSealed(value) || (try? CBORValue(decoding: value)) != nil)
        default:
            return false
        }
    }

    /// What the loss of a key outside the record space means: Buri's own keys are written again
    /// (header, catalog entries, counts) or their loss shows elsewhere (index entries, markers).
    static func describeOtherKey(_ key: [UInt8], detail: String) -> String? {
        switch key.first {
        case Keyspace.catalogTag?:
            let name = Keyspace.bucketName(fromCatalogKey: key) ?? "(a name that is not valid UTF-8)"
            return
                "the catalog entry of bucket '\(name)' was damaged (\(detail)); verify its definition with `buri info`"
        case Keyspace.valueTag?:
            let name = Keyspace.valueName(fromValueKey: key) ?? "(a name that is not valid UTF-8)"
            return "the named value '\(name)' was damaged (\(detail)); set it again from its source"
        case Keyspace.retiredTag?:
            return
                "a retired-generation marker was damaged (\(detail)); if a bucket named `recovered-…` appears, it may be that old generation"
        default:
            return nil  // index entries are rebuilt from the records; counts are recounted; the header is written again
        }
    }

    /// An unreadable key range in Buri's terms: for each bucket whose records it spans, the
    /// stretch of object keys; plus what it means for the catalog and the other key spaces.
    static func describe(
        _ range: SalvageReport.UnreadableRange, bucketNames: [UInt32: String], retired: Set<UInt32>,
        maxKnownId: UInt32
    ) -> ([LostRange], (losses: [String], notes: [String])) {
        let lower = range.lowerBound ?? []
        let upper = range.upperBound
        func within(_ key: [UInt8]) -> Bool {
            !key.lexicographicallyPrecedes(lower) && (upper.map { !$0.lexicographicallyPrecedes(key) } ?? true)
        }
        /// Whether the range meets the key space of `tag`.
        func meets(_ tag: UInt8) -> Bool {
            let spaceStart = [tag]
            let spaceEnd = [tag + 1]
            let startsBeforeEnd = lower.lexicographicallyPrecedes(spaceEnd)
            let endsAfterStart = upper.map { !$0.lexicographicallyPrecedes(spaceStart) } ?? true
            return startsBeforeEnd && endsAfterStart
        }
        var ranges: [LostRange] = []
        var losses: [String] = []
        var notes: [String] = []
        if meets(Keyspace.catalogTag) {
            // Not a loss of objects: a bucket with records left gets its catalog entry back, and the
            // records of one without are reported as unreadable ranges below.
            notes.append(
                "bucket catalog entries were in unreadable data (\(range.source)); every bucket whose catalog entry was lost and whose objects survive was given one again (see below); an empty bucket whose catalog entry was lost is gone"
            )
        }
        if meets(Keyspace.recordTag) {
            var covered = false
            for (bucketId, name) in bucketNames.sorted(by: { $0.key < $1.key }) {
                // Bucket b's records are the keys longer than P = 02 || u32be(b) that start with P.
                let prefix = Keyspace.recordPrefix(bucket: bucketId)
                let end = KeyRange.successor(ofPrefix: prefix)
                guard end.map({ lower.lexicographicallyPrecedes($0) }) ?? true,
                    upper.map({ prefix.lexicographicallyPrecedes($0) }) ?? true
                else { continue }
                func objectKey(_ key: [UInt8]?) -> String? {
                    guard let key, key.count > prefix.count, key.starts(with: prefix) else { return nil }
                    return String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                }
                ranges.append(
                    LostRange(
                        bucket: name, bucketId: bucketId, fromKey: objectKey(lower), toKey: objectKey(upper),
                        source: range.source))
                covered = true
            }
            // Records of a bucket whose catalog entry went too, and whose every key was in this data,
            // leave no trace: say so when the range spans a bucket id nothing names. For one block,
            // only ids up to the largest one known count (a bucket fits in one block only if small);
            // a whole file may have held buckets newer than anything left.
            func id(_ key: [UInt8]) -> UInt32 {
                var bytes = Array(key.dropFirst().prefix(4))
                while bytes.count < 4 { bytes.append(0) }
                return bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            }
            let firstId = lower.first == Keyspace.recordTag ? max(id(lower), 1) : 1
            let lastId = upper.map { $0.first == Keyspace.recordTag ? id($0) : UInt32.max } ?? UInt32.max
            let limit = range.isWholeFile ? lastId : min(lastId, maxKnownId)
            var unnamed = false
            if firstId <= limit {
                let named = Set(bucketNames.keys).union(retired).filter { $0 >= firstId && $0 <= limit }.count
                unnamed = UInt64(named) < UInt64(limit) - UInt64(firstId) + 1
            }
            if !covered || unnamed {
                losses.append(
                    "records were in unreadable data (\(range.source)) where buckets whose catalog entry was lost with them may have had objects: their names and keys cannot be known"
                )
            }
        }
        if meets(Keyspace.indexTag) {
            notes.append("index entries were in unreadable data (\(range.source)); they were rebuilt from the records")
        }
        if meets(Keyspace.retiredTag) {
            notes.append(
                "retired-generation markers were in unreadable data (\(range.source)); a bucket named `recovered-…` may be such an old generation"
            )
        }
        if meets(Keyspace.valueTag) {
            losses.append(
                "named values were in unreadable data (\(range.source)); those whose every copy was there are gone and cannot be named: set them again from their source"
            )
        }
        if within(Keyspace.headerKey) || meets(Keyspace.countTag) {
            notes.append(
                "derived keys (the database header, object counts) were in unreadable data (\(range.source)); they were written again"
            )
        }
        return (ranges, (losses, notes))
    }
}

extension SalvageReport.UnreadableRange {
    var source: String { detail }
}
