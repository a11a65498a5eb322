import ArgumentParser
import Buri
import Foundation

// MARK: - check

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that indexes and records agree; optionally repair the indexes.",
        discussion: """
        Exits with 0 when the database is consistent, and with 1 after printing one line per \
        problem otherwise. --repair rebuilds index entries from the record headers (deleting \
        dangling, stale and unknown entries, adding missing ones) in one atomic batch; damaged \
        records and unique conflicts are reported, never deleted, and still exit with 1.

        Example: buri check people.buri --repair
        """
    )

    @OptionGroup var target: DatabaseArgument

    @Flag(help: "Rebuild the index entries from the record headers.")
    var repair = false

    func run() throws {
        let db = try openExisting(target.database)
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
        for problem in report.problems { try out.line(problem.description) }
        let counts = "\(report.buckets) bucket\(report.buckets == 1 ? "" : "s"), \(report.objects) object\(report.objects == 1 ? "" : "s"), \(report.indexEntries) index entr\(report.indexEntries == 1 ? "y" : "ies")"
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
        discussion: "Example: buri stats people.buri"
    )

    @OptionGroup var target: DatabaseArgument

    func run() throws {
        let db = try openExisting(target.database)
        defer { db.close() }
        let out = Output.standardOutput()
        try mapErrors(path: target.database) {
            for level in 0..<7 {
                let name = "leveldb.num-files-at-level\(level)"
                try out.line("\(name): \(try db.storageProperty(name) ?? "?")")
            }
            try out.line("leveldb.approximate-memory-usage: \(try db.storageProperty("leveldb.approximate-memory-usage") ?? "?")")
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
        discussion: "Example: buri compact people.buri"
    )

    @OptionGroup var target: DatabaseArgument

    func run() throws {
        let db = try openExisting(target.database)
        defer { db.close() }
        let before = sizeOnDisk(target.database)
        let progress = Progress()
        progress.update("compacting…", force: true)
        try mapErrors(path: target.database) { try db.compact() }
        progress.finish()
        let after = sizeOnDisk(target.database)
        let out = Output.standardOutput()
        try out.line("compacted \(target.database): \(formatBytes(before)) before, \(formatBytes(after)) after")
        try out.flush()
    }
}
