import ArgumentParser
import Buri
import BuriCodec
import BuriEtcd
import Foundation

// MARK: - check

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that indexes and records agree; optionally repair the indexes.",
        discussion: """
            Exits with 0 when the database is consistent, and with 1 after printing one line per \
            problem otherwise. Besides entries against record headers, it compares each object's \
            stored index values with what its fields give, for every index tools compute from \
            fields (wrongIndexValue: a date stored one way and indexed another, say). --repair \
            rebuilds index entries from the record headers (deleting dangling, stale and unknown \
            entries, adding missing ones) in one atomic batch; damaged records, unique conflicts and \
            wrong index values are reported, never deleted or guessed, and still exit with 1; so are \
            the keys of a bucket id whose catalog entry was lost (named `#<id>`: `buri repair` gives \
            the bucket a catalog entry again, rebuilt from its records). Damaged \
            files (a block or log record failing LevelDB's checksum) exit with 3 instead: salvage \
            them with `buri repair`.

            Example: buri check people.buri --repair
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Flag(help: "Rebuild the index entries from the record headers.")
    var repair = false

    @Flag(
        help:
            "Print the result as one JSON object: consistent, counts, and every problem with its kind, bucket, key, index, detail and whether it was repaired."
    )
    var json = false

    func run() throws {
        let db = try target.open(readOnly: !repair)
        defer { db.close() }
        let progress = Progress()
        progress.update(repair ? "checking and repairing…" : "checking…", force: true)
        let report = try mapErrors(path: target.database) {
            try db.check(repair: repair) { processed in
                progress.update("\(repair ? "checked and repairing" : "checked") \(processed) objects")
            }
        }
        progress.finish()
        let out = Output.standardOutput()
        if json {
            func text(_ value: String?) -> CBORValue { value.map { .text($0) } ?? .null }
            let value: CBORValue = .map([
                CBORMapEntry(key: "consistent", value: .bool(report.isConsistent)),
                CBORMapEntry(key: "buckets", value: .int(Int64(report.buckets))),
                CBORMapEntry(key: "objects", value: .int(Int64(report.objects))),
                CBORMapEntry(key: "indexEntries", value: .int(Int64(report.indexEntries))),
                CBORMapEntry(key: "values", value: .int(Int64(report.values))),
                CBORMapEntry(
                    key: "pendingPurges",
                    value: .array(
                        try report.pendingPurges.map { purge in
                            var entries = [
                                CBORMapEntry(key: "bucket", value: .text(purge.bucket)),
                                CBORMapEntry(key: "id", value: .int(Int64(purge.id))),
                                CBORMapEntry(key: "state", value: .text(purge.state.rawValue)),
                            ]
                            // A shared engine's stage: its owner's lease, and whether it still holds.
                            if let owner = purge.owner,
                                let alive = try mapErrors(path: target.database, { try db.stageOwnerIsAlive(purge) })
                            {
                                entries.append(CBORMapEntry(key: "owner", value: .unsigned(owner)))
                                entries.append(CBORMapEntry(key: "ownerAlive", value: .bool(alive)))
                            }
                            return .map(entries)
                        })),
                CBORMapEntry(
                    key: "problems",
                    value: .array(
                        report.problems.map { problem in
                            .map([
                                CBORMapEntry(key: "kind", value: .text(problem.kind.rawValue)),
                                CBORMapEntry(key: "bucket", value: text(problem.bucket)),
                                CBORMapEntry(key: "key", value: text(problem.key)),
                                CBORMapEntry(key: "index", value: text(problem.index)),
                                CBORMapEntry(key: "detail", value: .text(problem.detail)),
                                CBORMapEntry(key: "repaired", value: .bool(problem.repaired)),
                            ])
                        })),
            ])
            try out.line(value.jsonString(pretty: true))
            try out.flush()
            if !report.isConsistent { throw ExitCode(ExitStatus.problemsFound.rawValue) }
            return
        }
        for problem in report.problems { try out.line(problem.description) }
        // Information, not problems: generations deleteAll replaced, still being purged.
        for purge in report.pendingPurges {
            let alive = try mapErrors(path: target.database) { try db.stageOwnerIsAlive(purge) }
            let what =
                switch (purge.state, alive) {
                case (.purging, _): "being purged in the background"
                // A shared engine's stage whose client still renews its lease: under way.
                case (.staging, true?):
                    "staged by a client that is still running (its lease \(purge.owner ?? 0) holds); left to it"
                // While a database is being encrypted, a stage is most likely the copy a killed
                // `buri encrypt` left, which the next run takes up.
                case (.staging, _) where db.isBeingEncrypted:
                    "staged by an import or by an encryption that has not published it (`buri encrypt` goes on with its copy)"
                case (.staging, false?):
                    "staged by a client that ended without publishing it (its lease ended); the next command that writes purges it"
                case (.staging, nil): "staged by an import that has not published it"
                }
            try out.line("note: bucket '\(purge.bucket)' has a retired generation (id \(purge.id)) \(what)")
        }
        let counts =
            "\(report.buckets) bucket\(report.buckets == 1 ? "" : "s"), \(report.objects) object\(report.objects == 1 ? "" : "s"), \(report.indexEntries) index entr\(report.indexEntries == 1 ? "y" : "ies")"
            + (report.values == 0 ? "" : ", \(report.values) named value\(report.values == 1 ? "" : "s")")
        let repaired = report.problems.filter(\.repaired).count
        let left = report.problems.count - repaired
        if report.problems.isEmpty {
            try out.line("ok: \(counts); no problems")
        } else if left == 0 {
            try out.line("repaired: \(counts); \(repaired) problem\(repaired == 1 ? "" : "s") fixed")
        } else {
            var summary = "\(left) problem\(left == 1 ? "" : "s") found: \(counts)"
            if repaired > 0 { summary += "; \(repaired) repaired" }
            if !repair { summary += "; run `buri check --repair` to rebuild the indexes" }
            try out.line(summary)
        }
        try out.flush()
        if !report.isConsistent { throw ExitCode(ExitStatus.problemsFound.rawValue) }
    }
}

// MARK: - stats

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print LevelDB's statistics: files per level, table files, compactions, memory.",
        discussion: """
            On an etcd location there are no LevelDB files: it prints the cluster's own numbers \
            instead — the database's key count and revision, and each member's status (leader or \
            follower, etcd version, revision, backend size and the part in use, Raft index and term).

            Example: buri stats people.buri --json
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Flag(help: "Print the statistics as one JSON object.")
    var json = false

    func run() throws {
        // Without files here (etcd): the engine's own numbers.
        if !hasFiles(target.database) { return try printEtcdStats(target.database, json: json) }
        let db = try target.open(readOnly: true)
        defer { db.close() }
        let out = Output.standardOutput()
        if json {
            let value = try mapErrors(path: target.database) { () throws -> CBORValue in
                func number(_ name: String) throws -> CBORValue {
                    guard let text = try db.storageProperty(name),
                        let value = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines))
                    else { return .null }
                    return .unsigned(value)
                }
                return .map([
                    CBORMapEntry(
                        key: "filesAtLevel",
                        value: .array(try (0..<7).map { try number("leveldb.num-files-at-level\($0)") })),
                    CBORMapEntry(key: "approximateMemoryUsage", value: try number("leveldb.approximate-memory-usage")),
                    CBORMapEntry(key: "sizeOnDisk", value: .unsigned(sizeOnDisk(target.database))),
                    CBORMapEntry(key: "sstables", value: .text(try db.storageProperty("leveldb.sstables") ?? "")),
                    CBORMapEntry(key: "stats", value: .text(try db.storageProperty("leveldb.stats") ?? "")),
                ])
            }
            try out.line(value.jsonString(pretty: true))
            try out.flush()
            return
        }
        try mapErrors(path: target.database) {
            for level in 0..<7 {
                let name = "leveldb.num-files-at-level\(level)"
                try out.line("\(name): \(try db.storageProperty(name) ?? "?")")
            }
            try out.line(
                "leveldb.approximate-memory-usage: \(try db.storageProperty("leveldb.approximate-memory-usage") ?? "?")"
            )
            try out.line("size on disk: \(formatBytes(sizeOnDisk(target.database)))")
            for name in ["leveldb.sstables", "leveldb.stats"] {
                try out.line("")
                try out.line("\(name):")
                let text = try db.storageProperty(name) ?? ""
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).drop(while: \.isEmpty) {
                    try out.line(String(line))
                }
            }
        }
        try out.flush()
    }
}

// MARK: - compact

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compact the database: rewrite its files, dropping deleted and overwritten data.",
        discussion: """
            On an etcd location: purges the database's retired generations (old bucket contents \
            replaced by imports, deleteAll), then compacts the cluster's history up to the current \
            revision — etcd keeps every revision until compacted. The compaction is cluster-wide \
            (every database in the cluster; reads fixed at an earlier revision must run again); \
            defragmenting each member (etcdctl defrag) gives the freed space back to its file system.

            Example: buri compact people.buri
            """
    )

    @OptionGroup var target: DatabaseArgument

    func run() throws {
        if !hasFiles(target.database) { return try compactEtcd(target.database) }
        let db = try target.open(purgesInBackground: false)
        defer { db.close() }
        let before = sizeOnDisk(target.database)
        let progress = Progress()
        progress.update("compacting…", force: true)
        // Generations still waiting to be purged are deleted first, so that their space is
        // given back by this compaction rather than by a later one.
        try mapErrors(path: target.database) {
            try db.purgeRetiredBuckets()
            try db.compact()
        }
        progress.finish()
        let after = sizeOnDisk(target.database)
        let out = Output.standardOutput()
        try out.line("compacted \(target.database): \(formatBytes(before)) before, \(formatBytes(after)) after")
        try out.flush()
    }
}

// MARK: - repair

struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Salvage a database whose files are damaged, and say what could not be recovered.",
        discussion: """
            For a database that other commands report as damaged (exit 3). Reads every table block \
            and log record the database's MANIFEST names and notes what each holds; sets aside files \
            no MANIFEST names (leftovers of an interrupted compaction: not a loss); runs LevelDB's \
            repair, which rebuilds the database from what it can read (the damaged files are kept in \
            DB/lost/); puts back writes of intact log records LevelDB dropped; restores Buri's header \
            if it was lost; gives a bucket whose catalog entry was lost a new one rebuilt from its \
            records (under its own name if a copy can still be read, otherwise `recovered-<id>`), so \
            no readable object becomes unreachable; and rebuilds the index entries from the records. \
            Comparing what was readable before with what is there after, it prints one line per \
            loss — objects known lost, ranges of objects in unreadable data, losses whose keys \
            cannot be known (a missing log), objects recovered from a damaged log record (verify \
            them), rebuilt buckets, problems left — and exits with 0 when nothing was lost, 1 when \
            anything was. Close every other user of the database first and keep a copy of its \
            directory: what cannot be read is dropped. LevelDB directories only: on an etcd location \
            (whose members keep their own checksummed replicas) it refuses with exit 2; `buri check \
            --repair` rebuilds index entries there.

            Example: buri repair people.buri
            """
    )

    @OptionGroup var target: DatabaseArgument

    func run() throws {
        let path = target.database
        if !engineKind(path).capabilities.contains(.repair) { try refuseRepairOnEtcd(path) }
        switch try pathState(path) {
        case .missing:
            throw ToolError(.notADatabase, "'\(path)' does not exist; give the directory of a Buri database")
        case .file:
            throw ToolError(.notADatabase, "'\(path)' is a file, not a database; give the directory of a Buri database")
        case .emptyDirectory:
            throw ToolError(
                .notADatabase, "'\(path)' is an empty directory, not a database; give the directory of a Buri database")
        case .otherDirectory, .database, .damaged:
            break  // a lost CURRENT is one of the things repair fixes
        }
        let progress = Progress()
        progress.update("repairing…", force: true)
        let report: RepairReport
        do {
            report = try waitingForLock(target.wait) {
                try mapErrors(path: path) { try BuriDatabase.repair(path: path, options: ToolEncryption.options()) }
            }
        } catch let error as ToolError where error.status == .keyRequired || error.status == .wrongKey {
            // The key is needed only after LevelDB's repair of the files has run: say so.
            var message = error.message
            for written in ["; nothing was read or written", "; nothing was written"] where message.hasSuffix(written) {
                message.removeLast(written.count)
            }
            throw ToolError(
                error.status,
                message
                    + "; the files were salvaged (LevelDB's repair ran), but checking the records and rebuilding the indexes needs the database's own key: run `buri repair` again with it"
            )
        }
        progress.finish()
        let out = Output.standardOutput()
        for line in report.lines { try out.line(line) }
        let check = report.check
        let counts =
            "\(check.buckets) bucket\(check.buckets == 1 ? "" : "s"), \(check.objects) object\(check.objects == 1 ? "" : "s"), \(check.indexEntries) index entr\(check.indexEntries == 1 ? "y" : "ies") before the indexes were rebuilt"
        if report.isComplete {
            try out.line("repaired \(path): \(counts); nothing was lost")
        } else {
            func plural(_ count: Int, _ one: String, _ many: String) -> String { "\(count) \(count == 1 ? one : many)" }
            var lost: [String] = []
            if !report.lostObjects.isEmpty {
                lost.append(plural(report.lostObjects.count, "object", "objects") + " known lost")
            }
            if !report.lostRanges.isEmpty {
                lost.append(plural(report.lostRanges.count, "range", "ranges") + " of objects in unreadable data")
            }
            if !report.unknownLosses.isEmpty {
                lost.append(plural(report.unknownLosses.count, "loss", "losses") + " whose keys cannot be known")
            }
            if !report.suspectObjects.isEmpty {
                lost.append(plural(report.suspectObjects.count, "suspect object", "suspect objects") + " to verify")
            }
            if !report.recoveredBuckets.isEmpty {
                lost.append(
                    plural(report.recoveredBuckets.count, "catalog entry", "catalog entries")
                        + " rebuilt (verify with `buri info`)")
            }
            let left = check.problems.filter { !$0.repaired }.count
            if left > 0 { lost.append(plural(left, "problem", "problems") + " left; see `buri check \(path)`") }
            if FileManager.default.fileExists(atPath: path + "/lost") {
                lost.append("the damaged files are kept in \(path)/lost/")
            }
            try out.line("repaired \(path) with losses: \(lost.joined(separator: "; ")); \(counts)")
        }
        try out.flush()
        if !report.isComplete { throw ExitCode(ExitStatus.problemsFound.rawValue) }
    }
}
