import Buri

/// How far an export, import or restore is, reported to the closure given as `progress` as the
/// work goes (every thousand lines or objects, and at the start and end of each phase).
///
/// ```swift
/// try db.importJSONLines(from: .file("big.jsonl"), into: "Person") { step in
///     if step.isPhaseBoundary { print("\(step.phase): \(step.done) of \(step.total)") }
/// }
/// ```
public struct TransferProgress: Sendable, Hashable {
    /// What is being done.
    ///
    /// ```swift
    /// if case .exporting(let bucket) = step.phase { print("exporting \(bucket)") }
    /// ```
    public enum Phase: Sendable, Hashable {
        /// An import's first pass: every line is read and checked, nothing is written.
        case checking
        /// An import into an existing bucket copies its objects into the stage.
        case copyingExisting
        /// An import reads the input and stores its objects (into the stage, or in chunks).
        case storing
        /// A restore reads the export and stages each bucket's objects.
        case restoring
        /// Publishing counts the staged objects.
        case publishing
        /// Publishing checks that an existing bucket still holds what the stage was copied from.
        case verifying
        /// Published: `done` objects appeared in one commit.
        case published
        /// A failed import deletes what it staged.
        case purgingStage
        /// An export writes the records of a bucket.
        case exporting(bucket: String)
    }

    /// What `done` and `total` count.
    ///
    /// ```swift
    /// let unit = step.unit == .bytes ? "bytes" : "objects"
    /// ```
    public enum Unit: Sendable, Hashable {
        /// Bytes of the input read.
        case bytes
        /// Objects.
        case objects
    }

    /// The phase.
    ///
    /// ```swift
    /// if step.phase == .published { print("done") }
    /// ```
    public var phase: Phase
    /// The work done in this phase, in `unit`.
    ///
    /// ```swift
    /// let percent = step.total > 0 ? step.done * 100 / step.total : 0
    /// ```
    public var done: Int
    /// The work the phase does in all, in `unit` (0 when not known).
    ///
    /// ```swift
    /// let left = step.total - step.done
    /// ```
    public var total: Int
    /// What `done` and `total` count.
    ///
    /// ```swift
    /// let megabytes = step.unit == .bytes ? Double(step.done) / 1_048_576 : nil
    /// ```
    public var unit: Unit
    /// The input lines read so far, for the phases that read the input (nil at their start).
    ///
    /// ```swift
    /// if let lines = step.lines { print("\(lines) lines") }
    /// ```
    public var lines: Int?
    /// A restore's buckets begun so far (nil in other phases, and at its start).
    ///
    /// ```swift
    /// if let buckets = step.buckets { print("\(buckets) buckets") }
    /// ```
    public var buckets: Int?
    /// Whether this is the first or last report of its phase (the ones a display should not skip).
    ///
    /// ```swift
    /// if step.isPhaseBoundary || Date() > nextRedraw { redraw(step) }
    /// ```
    public var isPhaseBoundary: Bool

    /// A report (made by this library; public for tests of a progress display).
    ///
    /// ```swift
    /// let step = TransferProgress(phase: .checking, done: 0, total: 100, unit: .bytes, isPhaseBoundary: true)
    /// ```
    public init(
        phase: Phase, done: Int, total: Int, unit: Unit, lines: Int? = nil, buckets: Int? = nil,
        isPhaseBoundary: Bool = false
    ) {
        self.phase = phase
        self.done = done
        self.total = total
        self.unit = unit
        self.lines = lines
        self.buckets = buckets
        self.isPhaseBoundary = isPhaseBoundary
    }
}

/// The progress closure the operations take; nil when nobody watches (then nothing is counted
/// just to report it).
///
/// ```swift
/// let show: TransferProgressHandler = { step in print(step.phase, step.done, step.total) }
/// try db.importJSONLines(from: .file("people.jsonl"), into: "Person", progress: show)
/// ```
public typealias TransferProgressHandler = (TransferProgress) -> Void

/// Objects per commit into a stage (and per copied chunk), and the bytes that end a chunk early:
/// what bounds an import's or restore's memory.
let stageChunk = 1_000
let stageChunkBytes = 4 << 20

/// Stores one chunk of objects (read from `lines`) with `store`. When a unique index refuses the
/// chunk, the objects are stored one by one to find the first that breaks it, so that the error
/// names its line and key, the index, the value and the key that holds it. With `partial`
/// (chunked, not atomic) the objects of the lines before it are then stored.
func storeChunk(_ chunk: [RawObject], lines: [Int], partial: Bool, _ store: ([RawObject]) throws -> Void) throws {
    do {
        try store(chunk)
    } catch {
        guard case .uniqueViolation? = error as? BuriError else { throw error }
        for (object, line) in zip(chunk, lines) {
            do {
                try store([object])
            } catch {
                guard case let .uniqueViolation(name, index, value, holder)? = error as? BuriError else {
                    throw error
                }
                let stored =
                    partial
                    ? "the objects of the lines before it are stored (--chunk-size is not atomic)"
                    : "nothing was imported"
                throw TransferError(
                    .invalidInput,
                    "line \(line): key \(jsonString(object.key)): unique index '\(index)' of bucket '\(name)' already holds \(value) for key \(jsonString(holder)); \(stored)",
                    line: line)
            }
        }
        throw error
    }
}

/// Publishes staged imports in one commit, reporting the publish phases' work (counting the
/// staged objects; checking existing buckets are unchanged), then the objects published.
func publishStages(
    _ db: BuriDatabase, _ loads: [StagedImport], values: [(name: String, bytes: [UInt8])] = [],
    progress: TransferProgressHandler?
) throws(BuriError) -> [Int] {
    let counts = try db.publish(loads, values: values) { step in
        guard let progress else { return }
        // New buckets have nothing to compare: no such phase is shown for them.
        if step.phase == .verifying, step.total == 0 { return }
        progress(
            TransferProgress(
                phase: step.phase == .counting ? .publishing : .verifying, done: step.done, total: step.total,
                unit: .objects, isPhaseBoundary: step.done == 0 || step.done == step.total))
    }
    let total = counts.reduce(0, +)
    progress?(TransferProgress(phase: .published, done: total, total: total, unit: .objects, isPhaseBoundary: true))
    return counts
}
