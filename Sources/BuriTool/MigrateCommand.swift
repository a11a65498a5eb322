import ArgumentParser
import Buri
import Foundation

// MARK: - migrate

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upgrade a bucket's older records to its schema version, with the steps its catalog keeps.",
        discussion: """
            Applies the migration steps the bucket's type declared as data (renames, removals, \
            defaults: BuriMigration.from(version, .rename(…), …)), which the catalog keeps, to \
            every record older than the bucket's schema version, and computes their index values \
            from the upgraded fields. Batches of --batch-size records, each one atomic commit; \
            killed or interrupted, run it again: it skips what is already upgraded. A step written \
            in Swift, or an index the tool cannot compute from fields, stops it before anything is \
            written (exit 3): run Bucket.migrateAll() from the app instead.

            Example: buri migrate people.buri Person
            """
    )

    @OptionGroup var target: DatabaseArgument

    @Argument(help: "The bucket to upgrade.")
    var bucket: String

    @Option(help: "Records per atomic batch.")
    var batchSize = 500

    @Flag(help: "Show progress on standard error even when it is not a terminal.")
    var progress = false

    func validate() throws {
        if batchSize < 1 { throw ValidationError("--batch-size must be at least 1; \(batchSize) given") }
    }

    func run() throws {
        let db = try target.open()
        defer { db.close() }
        let raw = try openBucket(db, bucket)
        let shown = Progress(forced: progress)
        shown.update("migrating…", force: true)
        let upgraded = try mapErrors(path: target.database) {
            try raw.migrateAll(batchSize: batchSize) { done in shown.update("upgraded \(done) records") }
        }
        shown.finish()
        let out = Output.standardOutput()
        try out.line(
            "upgraded \(upgraded) record\(upgraded == 1 ? "" : "s") of bucket '\(bucket)' to schema version \(raw.descriptor.schemaVersion)"
        )
        try out.flush()
    }
}
