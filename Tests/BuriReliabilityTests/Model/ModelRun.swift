@testable import Buri
import BuriEncryption
import BuriStorage
import Foundation

// The runner of the randomized model test (ModelTests.swift): one seeded stream of random
// operations against a database on one engine and against ModelState, compared after every
// step (the bucket's count and the keys written), every 10 steps in full (every object, a few
// queries, a full-text search of each bucket) and with `check` every 300 steps and at the end.
//
// To add an operation (a new query form, records, encryption), append a
// ``ModelOperation`` to ``ModelRun/standardOperations`` (or to `run.operationKinds` in a test):
// it gets the run, draws what it needs from `run.rng`, calls Buri, updates `run.model` with what
// must have happened, and throws `run.fail(…)` on any difference. ``ModelDamagePhase`` is the hook
// for damaging the database's files and repairing them.

/// A difference between Buri and the model, with what is needed to replay it.
struct ModelMismatch: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// What a damage phase gets: the database's directory (the database is closed while the phase
/// runs), what the model knows was written, and the run's random generator (to draw where to damage).
struct ModelDamageContext {
    /// The LevelDB directory of the database.
    let path: String
    let engine: Engine
    /// Every object every bucket must hold (the model), by bucket name bytes and key bytes.
    let model: ModelState
    /// The run's step, for messages.
    let step: Int
    var rng: SeededGenerator
}

/// Damages the files of a closed database and repairs them (say with `BuriDatabase.repair`), then
/// returns the model as it must be afterwards: the model less exactly the objects the repair
/// reported lost (anything else missing is a mismatch the run finds when it reopens and compares;
/// `check` must then be clean), or throws a ``ModelMismatch`` for a report that disagrees with the
/// model. Given to ``ModelRun/init(engine:seed:damagePhase:)``, it is drawn like any operation
/// (weight 0.2 per step) on `.leveldb`, the engine whose files are at `context.path`.
///
/// ```swift
/// let run = try ModelRun(engine: .leveldb, seed: seed) { context in
///     try damageOneTable(at: context.path, using: &context.rng)        // the repair work's own
///     let report = try BuriDatabase.repair(path: context.path)
///     return modelWithout(report.lostObjects, from: context.model)     // likewise
/// }
/// try run.run(operations: 20_000)
/// ```
typealias ModelDamagePhase = (inout ModelDamageContext) throws -> ModelState

/// One kind of operation the runner draws, by weight.
struct ModelOperation {
    let name: String
    let weight: Double
    /// Whether it runs on an engine (reopen and damage do not make sense everywhere).
    var applies: (Engine) -> Bool = { _ in true }
    let run: (ModelRun) throws -> Void
}

final class ModelRun {
    let engine: Engine
    let seed: UInt64
    var rng: SeededGenerator
    let test: TestDatabase
    var model = ModelState()
    /// Calls made to Buri (every store, delete, query, page, read and check; a transaction's
    /// operations one by one).
    var operations = 0
    var step = 0
    /// How often each outcome happened (refusals by kind, commits, rollbacks, pages, deleteAll
    /// between pages…), printed by full runs so a run shows what it exercised.
    var tally: [String: Int] = [:]
    /// The last operations, for the failure report.
    private var log: [String] = []
    var operationKinds: [ModelOperation]
    /// The model's tokens of each text searched (Model/ModelText.swift), by the text's bytes.
    var tokenCache: [[UInt8]: ModelTextTokens] = [:]
    let damagePhase: ModelDamagePhase?
    /// Whether the database is encrypted: its `group`, `tags`, `email` and text indexes are then
    /// private (keyed tokens), so the run asks them only what tokens answer, and checks that the
    /// rest is refused (`privateRefusal`).
    private(set) var encrypted: Bool
    /// The indexes stored as tokens in this run.
    var privateIndexes: Set<String> { encrypted ? ["group", "tags", "email"] : [] }

    /// Steps between `check` runs: 300, or BURI_MODEL_CHECK_EVERY (1 to find the step that
    /// broke an invariant when replaying a seed).
    let checkEvery =
        ProcessInfo.processInfo.environment["BURI_MODEL_CHECK_EVERY"].flatMap { Int($0) }.map { max(1, $0) } ?? 300

    /// Two buckets whose names are canonically equal but byte-different: two buckets.
    static let bucketNames = ["\u{E9}", "e\u{301}"]

    init(engine: Engine, seed: UInt64, damagePhase: ModelDamagePhase? = nil, encrypted: Bool = false) throws {
        self.engine = engine
        self.seed = seed
        rng = SeededGenerator(seed: seed)
        var options = BuriOptions()
        if encrypted { options.encryption = DatabaseKey.random() }
        options.parallelDecoding = Self.parallelDecoding(seed: seed)
        test = try TestDatabase(engine, options: options)
        self.damagePhase = damagePhase
        self.encrypted = encrypted
        operationKinds = Self.standardOperations
        if encrypted { useTokens() }
        if damagePhase != nil {
            operationKinds.append(
                ModelOperation(name: "damage and repair", weight: 0.2, applies: { $0 == .leveldb }) { run in
                    try run.damage()
                })
        }
        for name in Self.bucketNames {
            _ = try test.db.bucket(ModelItem.self, named: name)
            model.buckets[Array(name.utf8)] = [:]
        }
    }

    /// The database reads go to: the test's, or a damaged copy of its files while
    /// ``damagedReads()`` runs.
    var db: BuriDatabase { damagedCopy ?? test.db }
    /// A copy of the database's files with a damaged table block, open while ``damagedReads()``
    /// runs; ``read(_:counted:_:)`` then lets `.damaged` through instead of failing the run.
    var damagedCopy: BuriDatabase?

    /// Parallel reads from the first few objects on, in small batches and chunks, so that the
    /// model's reads of a few objects take the parallel path (on an encrypted database: records
    /// opened on the helper threads) as well as the serial one. Taken from the seed, not the
    /// random stream, so that a seed replays the same operations.
    static func parallelDecoding(seed: UInt64) -> ParallelDecoding.Tuning {
        ParallelDecoding.Tuning(
            threshold: 1 + Int(seed % 7), batchSize: 1 + Int((seed >> 3) % 13), chunkSize: 1 + Int((seed >> 7) % 4))
    }

    /// From now on the run is an encrypted one: the model orders private indexes by their tokens,
    /// and the run asks them only what tokens answer (and checks that the rest is refused).
    private func useTokens() {
        if let tokens = test.db.indexTokens {
            let privateIndexes = privateIndexes
            model.stored = { index, value in
                guard privateIndexes.contains(index), let indexValue = try? value.indexValue(),
                    case .bytes(let token) = tokens.token(indexValue, index: index).decoded
                else { return nil }
                return .bytes(token)
            }
        }
        // Text entries are damaged by their terms' keys, which tokens hide; the random run of
        // plaintext databases covers that.
        operationKinds.removeAll { $0.name.hasPrefix("damage") }
        operationKinds.append(ModelOperation(name: "private refusal", weight: 2) { run in try run.privateRefusal() })
    }

    /// Encrypts this run's plaintext database online, mid-run (`BuriOptions.encryptsPlaintextDatabase`,
    /// `finishEncryption`): begins it, compares everything with the model while buckets still hold
    /// plaintext, makes random writes between the copy's batches (the first few, so that copies
    /// are brought up to date before they are published), stops once inside a bucket's copy (the
    /// handle closed after a random batch, then reopened, everything compared while that copy
    /// waits to be taken up), finishes, and goes on as an encrypted run.
    func encryptOnline(batchSize: Int) throws {
        note("begin encrypting online")
        operations += 1
        var options = BuriOptions()
        options.encryption = DatabaseKey.random()
        options.encryptsPlaintextDatabase = true
        options.parallelDecoding = Self.parallelDecoding(seed: seed)
        do { try test.reopen(options: options) } catch { throw fail("beginning encryption: \(error)") }
        // The other client of a shared engine opens again too, with the key.
        if engine == .shared { otherClient?.close() }
        otherClient = (engine == .shared || engine == .etcd) ? try? test.client(1) : nil
        if !db.isBeingEncrypted { throw fail("beginning encryption: the database is not being encrypted") }
        try verifyAll()
        try checkClean()
        var failure: ModelMismatch?
        var writes = 0
        var kept = 0
        func writeBetweenBatches(_ report: EncryptionProgress) {
            kept = max(kept, report.kept)
            guard failure == nil, report.copied > 0, writes < 6 else { return }
            writes += 1
            randomWriteBetweenBatches(
                of: "encrypting", at: "\(report.bucket ?? "-") at \(report.copied)", failure: &failure)
        }
        // Interrupted: this handle is closed after a random batch of a copy, so the next commit
        // fails. On a shared engine, sometimes its lease ends instead (as when its process is
        // killed): the handle stays open, and its next commit into the copy is refused.
        let stopAfter = int(1...2)
        let leaseEnds = engine == .shared && chance(0.5)
        var batches = 0
        let handle = db
        do {
            try handle.finishEncryption(batchSize: batchSize) { report in
                writeBetweenBatches(report)
                guard report.bucket != nil, report.copied > 0 else { return }
                batches += 1
                if batches == stopAfter {
                    self.note(
                        "stop encrypting after batch \(batches) (\(report.bucket ?? "-") at \(report.copied))\(leaseEnds ? ": its lease ends" : "")"
                    )
                    self.tally["encryption stopped inside a copy", default: 0] += 1
                    if leaseEnds, let engine = handle.storedEngine as? MemoryEngine,
                        let lease = try? handle.stageOwner()
                    {
                        engine.expireLease(lease)
                    } else {
                        handle.close()
                    }
                }
            }
        } catch {
            switch error {
            case .databaseClosed: break
            case .conflict(_, let detail) where leaseEnds && detail.contains("lease ended"): break
            default: throw fail("finishing encryption: \(error)")
            }
        }
        if let failure { throw failure }
        if leaseEnds, batches >= stopAfter {
            // The other client, alive, purges what is purgeable: a copy an online encryption may
            // take up is not, though its owner is gone.
            let stages = try read("stages") { try self.db.pendingPurges().filter { $0.state == .staging } }
            if let other = otherClient {
                try read("the other client's purge") { try other.purgeRetiredBuckets() }
                let left = try read("stages") { try other.pendingPurges().filter { $0.state == .staging } }
                if Set(left.map(\.id)) != Set(stages.map(\.id)) {
                    throw fail("another client purged an abandoned encryption copy: \(stages) → \(left)")
                }
            }
            handle.close()
        }
        try reopenMidway("encryption")
        if db.isBeingEncrypted {
            // Some buckets sealed, some not: their private indexes answer differently, so objects,
            // entry counts, links and values are compared here, queries once it is finished.
            try verifyContents()
            try checkClean()
            do {
                try db.finishEncryption(batchSize: batchSize) { report in writeBetweenBatches(report) }
            } catch {
                throw fail("finishing encryption: \(error)")
            }
            if let failure { throw failure }
        }
        if db.isBeingEncrypted { throw fail("finished, the database is still being encrypted") }
        tally["write while encrypting", default: 0] += writes
        tally["objects kept by a resumed copy", default: 0] += kept
        encrypted = true
        useTokens()
        try verifyAll()
        try checkClean()
    }

    /// One random write to a random bucket between the batches of an online operation (`doing`,
    /// `at` where it was): a progress closure cannot throw, so a mismatch or error is kept in `failure`.
    private func randomWriteBetweenBatches(of doing: String, at: String, failure: inout ModelMismatch?) {
        let name = pick(Self.bucketNames)
        note("write while \(doing) (\(at))")
        do {
            let bucket = try read("opening \(name)") { try self.bucket(name) }
            try randomWrite(in: name, bucket: bucket, model: &model, transaction: false)
        } catch let mismatch as ModelMismatch {
            failure = mismatch
        } catch {
            failure = fail("writing while \(doing): \(error)")
        }
    }

    /// Opens the database again after its handle was closed in the middle of `doing`, and on a
    /// shared engine the other client too.
    private func reopenMidway(_ doing: String) throws {
        do { try test.reopen() } catch { throw fail("reopening mid-\(doing): \(error)") }
        if engine == .shared { otherClient?.close() }
        otherClient = (engine == .shared || engine == .etcd) ? try? test.client(1) : nil
    }

    /// Rotates this encrypted run's data key online, mid-run (`rotateDataKey`): random writes
    /// between its batches (by either client of a shared engine, whose other client follows the
    /// header), one interruption (the handle closed after a few batches, then reopened, with
    /// everything compared while both generations hold values), and the rotation finished.
    func rotateDataKeyOnline(batchSize: Int) throws {
        note("rotate the data key online")
        operations += 1
        var failure: ModelMismatch?
        var writes = 0
        func writeBetweenBatches(_ report: DataKeyRotationProgress) {
            guard failure == nil, report.generations.retiring != nil, writes < 8 else { return }
            writes += 1
            randomWriteBetweenBatches(of: "rotating", at: "\(report.resealed) sealed anew", failure: &failure)
        }
        // Interrupted: this handle is closed after three reports, so the next batch fails.
        var reports = 0
        let handle = db
        do {
            try handle.rotateDataKey(batchSize: batchSize) { report in
                writeBetweenBatches(report)
                reports += 1
                if reports == 3 { handle.close() }
            }
        } catch {
            guard case .databaseClosed = error else { throw fail("rotating the data key: \(error)") }
        }
        if let failure { throw failure }
        try reopenMidway("rotation")
        if handle.dataKeyGenerations?.retiring != nil || reports < 3 {
            if db.dataKeyGenerations?.retiring == nil {
                throw fail("mid-rotation, the reopened database is not rotating")
            }
            try verifyAll()
            try checkClean()
            do {
                try db.rotateDataKey(batchSize: batchSize) { report in writeBetweenBatches(report) }
            } catch {
                throw fail("finishing the rotation: \(error)")
            }
            if let failure { throw failure }
        }
        guard let generations = db.dataKeyGenerations, generations.retiring == nil, generations.current >= 1 else {
            throw fail("rotated, the generations are \(String(describing: db.dataKeyGenerations))")
        }
        tally["write while rotating", default: 0] += writes
        try verifyAll()
        try checkClean()
    }

    /// On an engine shared by several clients (shared memory, etcd), a second client of the same
    /// data: about a third of the buckets opened (for writes, transactions, queries and pages) are
    /// its, so each client must follow the other's writes, `deleteAll`s, drops and publishes.
    lazy var otherClient: BuriDatabase? =
        (engine == .shared || engine == .etcd) ? try? test.client(1) : nil

    deinit { if engine == .shared { otherClient?.close() } }

    /// The database of this client or, on a shared engine, sometimes of the other client.
    func anyClient() -> BuriDatabase {
        if let otherClient, chance(0.3) { return otherClient }
        return db
    }

    func bucket(_ name: String) throws -> Bucket<ModelItem> { try anyClient().bucket(ModelItem.self, named: name) }

    func note(_ text: String) {
        log.append("\(step): \(text)")
        if log.count > 60 { log.removeFirst(log.count - 60) }
    }

    func fail(_ message: String) -> ModelMismatch {
        let engines = engine.rawValue
        // NUL bytes (in keys and values) would cut the report short in a terminal.
        let message = message.replacingOccurrences(of: "\u{0}", with: "\\0")
        let log = log.map { $0.replacingOccurrences(of: "\u{0}", with: "\\0") }
        return ModelMismatch(
            message: """
                model mismatch on engine \(engine), seed \(seed), step \(step) (after \(operations) operations): \(message)
                replay: BURI_MODEL_SEED=\(seed) BURI_MODEL_OPS=\(operations + 1) BURI_TEST_ENGINES=\(engines) swift test --filter ModelTests
                last operations (step: what → what the model expected):
                \(log.joined(separator: "\n"))
                """)
    }

    /// Runs steps until `target` operations have been made, then compares everything, checks,
    /// reopens and compares again.
    func run(operations target: Int) throws {
        let kinds = operationKinds.filter { $0.applies(engine) && $0.weight > 0 }
        let total = kinds.reduce(0) { $0 + $1.weight }
        while operations < target {
            step += 1
            var draw = Double.random(in: 0..<total, using: &rng)
            var chosen = kinds[kinds.count - 1]
            for kind in kinds {
                if draw < kind.weight { chosen = kind; break }
                draw -= kind.weight
            }
            try chosen.run(self)
            if step % 10 == 0 { try verifyAll() }
            if step % checkEvery == 0 { try checkClean() }
        }
        try verifyAll()
        try checkClean()
        try reopen()
        try verifyAll()
    }

    // MARK: Random values

    func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < probability }
    func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &rng)] }
    func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }

    /// Keys: canonically equal but byte-different pairs, NUL bytes, astral characters.
    static let keyPool: [String] = [
        "a", "b", "c", "A", "k1", "k10", "k2", "\u{E9}", "e\u{301}", "e", "\u{E4}", "a\u{308}", "a\u{0}", "a\u{0}b",
        "\u{0}",
        "\u{0}\u{0}", "\u{FB01}", "fi", "\u{1F642}", "\u{65E5}\u{672C}", "\u{2126}", "\u{3A9}", " ", "a b", "zz",
        "\u{FFFF}", "\u{10FFFF}",
        "x\u{0}y\u{0}z", "\u{1F1E9}\u{1F1EA}",
    ]
    static let groupPool: [String] = [
        "", "a", "ab", "abc", "\u{E9}", "e\u{301}", "e", "\u{0}", "a\u{0}", "a\u{0}b", "b", "\u{2126}", "\u{3A9}",
    ]
    static let tagPool: [String] = ["x", "y", "xy", "\u{E9}", "e\u{301}", "\u{0}", ""]
    static let emailPool: [String] = ["a@x", "b@x", "\u{E9}@x", "e\u{301}@x", "c@x\u{0}", "d@x"]
    static let numberPool: [ModelNumber] = [
        .int(.min), .int(.min + 1), .int(.max), .uint(.max), .uint(.max - 1), .uint(1 << 63), .int(0), .double(-0.0),
        .double(0), .uint(0),
        .int(1), .uint(1), .double(1), .int(-1), .double(-1), .double(0.5), .double(-0.5), .double(1.5), .int(2),
        .double(.infinity), .double(-.infinity), .double(.greatestFiniteMagnitude), .double(-.greatestFiniteMagnitude),
        .double(.leastNonzeroMagnitude), .double(-.leastNonzeroMagnitude), .int(1 << 53), .int((1 << 53) + 1),
        .double(9_007_199_254_740_992),
        .double(9_223_372_036_854_775_808), .double(-9_223_372_036_854_775_808), .double(18_446_744_073_709_551_616),
        .double(1e300),
        .double(-1e-300),
    ]
    static let notePool: [String] = [
        "", "n", "\u{0}", "line\nbreak", "\u{1F642}\u{0}\u{E9}", String(repeating: "long ", count: 40),
    ]

    func randomKey() -> String {
        if chance(0.004) { return "" }
        if chance(0.004) { return String(repeating: "x", count: 4097) }
        if chance(0.004) { return String(repeating: "x", count: 4096) }
        return pick(Self.keyPool)
    }

    func randomNumber(allowNaN: Bool) -> ModelNumber {
        if allowNaN, chance(0.01) { return .double(.nan) }
        return pick(Self.numberPool)
    }

    func randomReal(allowNaN: Bool) -> Double {
        if allowNaN, chance(0.01) { return .nan }
        switch pick(Self.numberPool) {
        case .int(let value): return Double(value)
        case .uint(let value): return Double(value)
        case .double(let value): return value
        }
    }

    func randomItem(key: String? = nil) -> ModelItem {
        ModelItem(
            id: key ?? randomKey(), group: pick(Self.groupPool), num: randomNumber(allowNaN: true),
            real: randomReal(allowNaN: true),
            tags: (0..<int(0...3)).map { _ in pick(Self.tagPool) }, email: chance(0.55) ? nil : pick(Self.emailPool),
            note: pick(Self.notePool), body: randomBody(), paragraphs: randomParagraphs())
    }

    func randomStringValue() -> ModelValue { .string(pick(Self.groupPool + Self.tagPool + Self.emailPool)) }
    func randomNumberValue() -> ModelValue { .number(randomNumber(allowNaN: false)) }

    func randomBound(_ value: () -> ModelValue) -> ModelCondition.Bound {
        switch int(0...2) {
        case 0: return .unbounded
        case 1: return .inclusive(value())
        default: return .exclusive(value())
        }
    }

    func randomPrefix() -> [UInt8] {
        Array(pick(["", "a", "e", "\u{E9}", "\u{0}", "a\u{0}", "x", "ab", "\u{2126}", "b@", "e\u{301}"]).utf8)
    }

    /// 0 to 4 values (repeats possible), for an `anyOf` condition.
    func randomAlternatives(_ value: () -> ModelValue) -> [ModelValue] { (0..<int(0...4)).map { _ in value() } }

    func randomCondition() -> ModelCondition {
        let name = pick(ModelItem.indexes).name
        // A private index answers exact values: one, or an IN list.
        if privateIndexes.contains(name) {
            return chance(0.7)
                ? ModelCondition(index: name, leading: [randomStringValue()], rest: .none)
                : ModelCondition(index: name, leading: [], rest: .anyOf(randomAlternatives(randomStringValue)))
        }
        // IN lists on every index: of numbers, of strings, and after a compound index's leading value.
        if chance(0.2) {
            switch name {
            case "num", "real":
                return ModelCondition(index: name, leading: [], rest: .anyOf(randomAlternatives(randomNumberValue)))
            case "group_real":
                return chance(0.5)
                    ? ModelCondition(index: name, leading: [], rest: .anyOf(randomAlternatives(randomStringValue)))
                    : ModelCondition(
                        index: name, leading: [randomStringValue()], rest: .anyOf(randomAlternatives(randomNumberValue))
                    )
            default:
                return ModelCondition(index: name, leading: [], rest: .anyOf(randomAlternatives(randomStringValue)))
            }
        }
        switch name {
        case "num", "real":
            if chance(0.3) { return ModelCondition(index: name, leading: [randomNumberValue()], rest: .none) }
            return ModelCondition(
                index: name, leading: [], rest: .range(randomBound(randomNumberValue), randomBound(randomNumberValue)))
        case "group_real":
            switch int(0...4) {
            case 0: return ModelCondition(index: name, leading: [randomStringValue()], rest: .none)
            case 1:
                return ModelCondition(index: name, leading: [randomStringValue(), randomNumberValue()], rest: .none)
            case 2:
                return ModelCondition(
                    index: name, leading: [randomStringValue()],
                    rest: .range(randomBound(randomNumberValue), randomBound(randomNumberValue)))
            case 3: return ModelCondition(index: name, leading: [], rest: .prefix(randomPrefix()))
            default:
                return ModelCondition(
                    index: name, leading: [],
                    rest: .range(randomBound(randomStringValue), randomBound(randomStringValue)))
            }
        default:
            switch int(0...2) {
            case 0: return ModelCondition(index: name, leading: [randomStringValue()], rest: .none)
            case 1: return ModelCondition(index: name, leading: [], rest: .prefix(randomPrefix()))
            default:
                return ModelCondition(
                    index: name, leading: [],
                    rest: .range(randomBound(randomStringValue), randomBound(randomStringValue)))
            }
        }
    }

    func randomPredicate(depth: Int) -> ModelPredicate {
        let leaf = depth >= 2 || chance(0.3)
        if leaf {
            if chance(0.15) { return .notePrefix(Array(pick(["", "n", "l", "lo", "\u{1F642}", "x"]).utf8)) }
            if chance(0.12), let search = randomSearchPredicate() { return search }
            return .condition(randomCondition())
        }
        switch int(0...3) {
        case 0: return .not(randomPredicate(depth: depth + 1))
        case 1: return .all((0..<int(0...3)).map { _ in randomPredicate(depth: depth + 1) })
        default: return .any((0..<int(0...3)).map { _ in randomPredicate(depth: depth + 1) })
        }
    }

    /// A text match as a query condition (`Query.search`), among index conditions, OR, NOT, sort
    /// keys, limits and pages: one the model can evaluate, and on a private index no prefix.
    func randomSearchPredicate() -> ModelPredicate? {
        let index = pick(ModelItem.textIndexes).name
        let query = randomTextQuery([], index)
        guard case .some(.some) = try? query.compiled(), !(encrypted && query.hasPrefixLeaf) else { return nil }
        tally["query with a text match", default: 0] += 1
        return .search(index: index, query: query)
    }

    func randomQuery(paging: Bool = false) -> ModelQuery {
        var query = ModelQuery()
        let conditions = chance(0.15) ? 0 : (chance(0.65) ? 1 : (chance(0.7) ? 2 : 3))
        query.conditions = (0..<conditions).map { _ in randomCondition() }
        // OR, NOT and filters, nested with AND.
        if chance(0.3) { query.predicates.append(randomPredicate(depth: 0)) }
        if chance(0.05) { query.predicates.append(randomPredicate(depth: 0)) }
        // An order by one or two indexes (and the tie-break by key).
        if chance(0.3) {
            let sortable = ModelItem.indexes.filter { !privateIndexes.contains($0.name) }
            query.sort = (0..<(chance(0.35) ? 2 : 1)).map { _ in (pick(sortable).name, chance(0.5)) }
        }
        query.descending = chance(0.4)
        if chance(paging ? 0.15 : 0.25) { query.limit = int(1...6) }
        if chance(0.2) { query.offset = int(0...4) }
        return query
    }

    // MARK: Calling Buri

    /// Runs one write that the model expects to succeed (`refusal` nil) or to be refused; returns
    /// whether it was applied (so the caller applies it to the model). On etcd a commit over the
    /// cluster's limits is a typed refusal of the whole write, which is fine.
    func attempt(_ refusal: ModelState.Refusal?, _ what: String, _ body: () throws -> Void) throws -> Bool {
        operations += 1
        note("\(what) → \(refusal.map { "refused: \($0)" } ?? "ok")")
        tally[refusal.map { "refused: \($0)" } ?? "write applied", default: 0] += 1
        do {
            try body()
        } catch let mismatch as ModelMismatch {
            throw mismatch
        } catch let error as BuriError {
            if let refusal, refusal.matches(error) { return false }
            if engine == .etcd, case .storage(let storage) = error, storage.code == .limitExceeded {
                note("  the cluster refused the commit as too large: nothing applied")
                return false
            }
            throw fail("\(what): \(refusal.map { "expected \($0), but got" } ?? "unexpected error:") \(error)")
        } catch {
            throw fail("\(what): unexpected error: \(error)")
        }
        if let refusal { throw fail("\(what): expected \(refusal), but it was accepted") }
        return true
    }

    /// Runs a read, turning any error into a mismatch. Reads made to compare are not counted as
    /// operations; `counted` ones (a query or page the stream asked for) are.
    func read<R>(_ what: String, counted: Bool = false, _ body: () throws -> R) throws -> R {
        if counted { operations += 1 }
        do {
            return try body()
        } catch let mismatch as ModelMismatch {
            throw mismatch
        } catch let error as BuriError where damagedCopy != nil && error.isDamage {
            throw error
        } catch {
            throw fail("\(what): unexpected error: \(error)")
        }
    }

    /// The raw objects Buri's typed bucket would store for `items` (their index values computed
    /// by the model), for the raw write path.
    func rawObjects(_ items: [ModelItem], legacy: Bool = false) throws -> [RawObject] {
        try items.map { item in
            var values: [IndexName: [[IndexValue]]] = [:]
            for (index, _) in ModelItem.indexes {
                let tuples = item.entries(index)
                if tuples.isEmpty { continue }
                values[IndexName(index)] = try tuples.map { tuple in try tuple.map { try $0.indexValue() } }
            }
            let payload = try CBOREncoder().encode(item)
            guard legacy else { return RawObject(key: item.id, payload: payload, indexValues: values) }
            // As schema version 0 stored it: the note under "legacyNote".
            guard case .map(var fields) = try CBORValue(decoding: payload) else { throw fail("an item is not a map") }
            for at in fields.indices where fields[at].key == .text("note") { fields[at].key = .text("legacyNote") }
            return RawObject(
                key: item.id, payload: CBORValue.map(fields).encoded(), indexValues: values, schemaVersion: 0)
        }
    }

    /// One random write through `bucket` (and its raw view), applied to `model` when Buri applied it.
    func randomWrite(in name: String, bucket: Bucket<ModelItem>, model: inout ModelState, transaction: Bool) throws {
        let place = "\(transaction ? "tx " : "")\(escaped(name))"
        switch int(0...99) {
        case 0..<34:
            let item = randomItem()
            let refusal = model.refusal(storing: [item], in: name)
            if try attempt(refusal, "\(place) store \(item)", { try bucket.store(item) }) {
                model.store([item], in: name)
            }
        case 34..<37:
            let items = segmentBatch()
            let refusal = model.refusal(storing: items, in: name)
            tally[
                "batches of \(RawBucket.segmentThreshold)+ distinct objects (text postings in segments)", default: 0] +=
                1
            if try attempt(
                refusal, "\(place) store a batch of \(items.count) distinct objects", { try bucket.store(items) })
            {
                model.store(items, in: name)
            }
        case 37..<54:
            let items = (0..<int(1...6)).map { _ in randomItem() }
            let refusal = model.refusal(storing: items, in: name)
            if try attempt(refusal, "\(place) store batch \(items)", { try bucket.store(items) }) {
                model.store(items, in: name)
            }
        case 54..<62:
            // The raw path, with the index values given (objects Buri refuses to index are left to the typed path).
            let items = (0..<int(1...4)).map { _ in randomItem() }.filter { !$0.hasInvalidIndexValue }
            guard !items.isEmpty else { return }
            let refusal = model.refusal(storing: items, in: name)
            let legacy = chance(0.5)
            let objects = try rawObjects(items, legacy: legacy)
            if legacy { tally["records stored at schema version 0", default: 0] += items.count }
            if try attempt(
                refusal, "\(place) raw store\(legacy ? " (schema version 0)" : "") \(items)",
                { try bucket.raw.store(objects) })
            {
                model.store(items, in: name)
            }
        case 62..<74:
            let key = randomKey()
            var copy = model
            let expected = copy.delete([key], in: name) == 1
            var deleted = false
            if try attempt(nil, "\(place) delete key \(escaped(key))", { deleted = try bucket.delete(key: key) }) {
                model = copy
                if deleted != expected { throw fail("delete(key:) returned \(deleted), the model says \(expected)") }
            }
        case 74..<84:
            let keys = (0..<int(0...5)).map { _ in randomKey() }
            var copy = model
            let expected = copy.delete(keys, in: name)
            var deleted = 0
            let raw = chance(0.3)
            if try attempt(
                nil, "\(place) \(raw ? "raw " : "")delete keys [\(keys.map(escaped).joined(separator: ", "))]",
                {
                    deleted = raw ? try bucket.raw.delete(keys: keys) : try bucket.delete(keys: keys)
                })
            {
                model = copy
                if deleted != expected { throw fail("delete(keys:) returned \(deleted), the model says \(expected)") }
            }
        case 84..<93:
            // An object as stored (or a random one): deleted by its key.
            let objects = model.sorted(name)
            let item = !objects.isEmpty && chance(0.8) ? pick(objects) : randomItem()
            var copy = model
            let expected = copy.delete([item.id], in: name) == 1
            var deleted = false
            if try attempt(nil, "\(place) delete object \(escaped(item.id))", { deleted = try bucket.delete(item) }) {
                model = copy
                if deleted != expected {
                    throw fail("delete(_ object:) returned \(deleted), the model says \(expected)")
                }
            }
        default:
            var copy = model
            let expected = copy.deleteAll(in: name)
            var deleted = 0
            let raw = chance(0.3)
            if try attempt(
                nil, "\(place) \(raw ? "raw " : "")deleteAll (\(expected) objects)",
                { deleted = raw ? try bucket.raw.deleteAll() : try bucket.deleteAll() })
            {
                model = copy
                if deleted != expected { throw fail("deleteAll returned \(deleted), the model says \(expected)") }
            }
        }
    }

    // MARK: Comparing

    /// The objects Buri returned for a query against the model's, by key bytes and content.
    func compare(_ got: [ModelItem], _ expected: [ModelItem], _ what: String) throws {
        guard got.count == expected.count, zip(got, expected).allSatisfy({ $0.isIdentical(to: $1) }) else {
            let first = zip(got, expected).first { !$0.isIdentical(to: $1) }
            throw fail(
                "\(what): got \(got.count) objects, the model has \(expected.count)\(first.map { "; first difference: got \($0.0), expected \($0.1)" } ?? "")\n got keys: [\(got.map { escaped($0.id) }.joined(separator: ", "))]\n expected: [\(expected.map { escaped($0.id) }.joined(separator: ", "))]"
            )
        }
    }

    func compareKeys(_ got: [String], _ expected: [ModelResult], _ what: String) throws {
        guard got.map({ Array($0.utf8) }) == expected.map(\.key) else {
            throw fail(
                "\(what): got keys [\(got.map(escaped).joined(separator: ", "))], the model expects [\(expected.map { escaped($0.item.id) }.joined(separator: ", "))]"
            )
        }
    }

    /// Every object, the count and the index entry counts of one bucket, as `bucket` sees it.
    func verifyBucket(_ name: String, _ bucket: Bucket<ModelItem>, _ model: ModelState, _ label: String) throws {
        let expected = model.sorted(name)
        try compare(
            try read("\(label) all objects") { try bucket.objects() }, expected,
            "\(label) all objects of \(escaped(name))")
        let count = try read("\(label) count") { try bucket.count() }
        if count != expected.count {
            throw fail("\(label) count() of \(escaped(name)) is \(count), the model has \(expected.count)")
        }
        for (index, _) in ModelItem.indexes where chance(0.2) {
            let entries = try read("\(label) entry count") { try bucket.raw.entryCount(index: index) }
            let modelEntries = expected.reduce(0) { $0 + $1.entries(index).count }
            if entries != modelEntries {
                throw fail(
                    "\(label) index \(index) of \(escaped(name)) has \(entries) entries, the model \(modelEntries)")
            }
        }
        // A text index holds one entry per distinct term of each object.
        for (index, _) in ModelItem.textIndexes where chance(0.2) {
            let entries = try read("\(label) entry count") { try bucket.raw.entryCount(index: index) }
            let modelEntries = expected.reduce(0) { $0 + $1.textEntryCount(index) }
            if entries != modelEntries {
                throw fail(
                    "\(label) text index \(index) of \(escaped(name)) has \(entries) entries, the model \(modelEntries)"
                )
            }
        }
    }

    func verifyQuery(
        _ query: ModelQuery, _ name: String, _ bucket: Bucket<ModelItem>, _ model: ModelState, _ label: String,
        counted: Bool = false
    ) throws {
        let expected = model.answer(query, in: name)
        let buriQuery = try read("building \(query)") { try query.buriQuery() }
        if !query.predicates.isEmpty { tally["query with or/not/filter", default: 0] += 1 }
        if !query.sort.isEmpty { tally["query ordered by \(query.sort.count) key(s)", default: 0] += 1 }
        note("\(label) query \(query) on \(escaped(name)) → \(expected.count) results")
        try compareKeys(
            try read("\(label) keys(\(query))", counted: counted) { try bucket.keys(buriQuery) }, expected,
            "\(label) keys(\(query))")
        if chance(0.3) {
            try compare(
                try read("\(label) objects(\(query))") { try bucket.objects(buriQuery) }, expected.map(\.item),
                "\(label) objects(\(query))")
        }
        if chance(0.3) { try verifyAggregate(query, expected, bucket, label) }
        if chance(0.3) {
            let count = try read("\(label) count(\(query))") { try bucket.count(buriQuery) }
            if count != expected.count {
                throw fail("\(label) count(\(query)) is \(count), the model says \(expected.count)")
            }
        }
    }

    // MARK: Named values

    /// Names: canonically equal but byte-different pairs, NUL bytes, and refused ones (empty, too long).
    static let valueNamePool: [String] = [
        "lastSync", "\u{E9}", "e\u{301}", "a\u{0}", "a", "\u{1F642}", "", String(repeating: "n", count: 1025),
        String(repeating: "\u{E9}", count: 512),
    ]

    func randomNamedValue() -> ModelNamedValue {
        switch int(0...2) {
        case 0: return .int(pick([Int64.min, -1, 0, 1, Int64.max]))
        case 1: return .text(pick(Self.notePool))
        default: return .list((0..<int(0...3)).map { _ in pick(Self.tagPool) })
        }
    }

    static func refusal(ofValueName name: String) -> ModelState.Refusal? {
        name.isEmpty || name.utf8.count > 1024 ? .invalidValueName : nil
    }

    /// Reads the value under `name` as the type the model holds (and, sometimes, as another type,
    /// which must be a typed error naming it).
    func readValue(_ values: NamedValues, _ name: String, _ expected: ModelNamedValue?, _ label: String) throws {
        let got: ModelNamedValue?
        switch expected {
        case .int, nil:
            got = try read("\(label)get \(escaped(name))") { try values.get(Int64.self, for: name).map { .int($0) } }
        case .text:
            got = try read("\(label)get \(escaped(name))") { try values.get(String.self, for: name).map { .text($0) } }
        case .list:
            got = try read("\(label)get \(escaped(name))") {
                try values.get([String].self, for: name).map { .list($0) }
            }
        }
        if got != expected {
            throw fail(
                "\(label)value \(escaped(name)) is \(got.map(\.description) ?? "nil"), the model has \(expected.map(\.description) ?? "none")"
            )
        }
        guard let expected, chance(0.3) else { return }
        do {
            switch expected {
            case .int: _ = try values.get([String].self, for: name)
            case .text, .list: _ = try values.get(Int64.self, for: name)
            }
            throw fail("\(label)value \(escaped(name)) (\(expected)) was read as another type without an error")
        } catch let error as BuriError {
            guard case .valueDecodingFailed(let failed, _, _) = error, failed.utf8.elementsEqual(name.utf8) else {
                throw fail("\(label)value \(escaped(name)) read as another type: \(error)")
            }
        }
    }

    /// One random set, remove or read of a named value through `values`, applied to `model` when Buri applied it.
    func randomValueOperation(_ values: NamedValues, model: inout ModelState, place: String) throws {
        let name = pick(Self.valueNamePool)
        let refusal = Self.refusal(ofValueName: name)
        switch int(0...9) {
        case 0..<5:
            let value = randomNamedValue()
            let applied = try attempt(refusal, "\(place)set value \(escaped(name)) = \(value)") {
                switch value {
                case .int(let number): try values.set(number, for: name)
                case .text(let text): try values.set(text, for: name)
                case .list(let list): try values.set(list, for: name)
                }
            }
            if applied { model.values[Array(name.utf8)] = value }
        case 5..<8:
            var removed = false
            if try attempt(refusal, "\(place)remove value \(escaped(name))", { removed = try values.remove(name) }) {
                let expected = model.values.removeValue(forKey: Array(name.utf8)) != nil
                if removed != expected {
                    throw fail("remove(\(escaped(name))) returned \(removed), the model says \(expected)")
                }
            }
        default:
            guard refusal == nil else { return }
            operations += 1
            try readValue(values, name, model.values[Array(name.utf8)], place)
        }
    }

    /// Every named value: the names in byte order, and each value as the model holds it.
    func verifyValues(_ values: NamedValues, _ model: ModelState, _ label: String) throws {
        let names = try read("\(label)names") { try values.names() }
        let expected = model.values.keys.sorted { modelCompareBytes($0, $1) < 0 }
        if names.map({ Array($0.utf8) }) != expected {
            throw fail(
                "\(label)value names are \(names.map(escaped)), the model has \(expected.map { escaped(String(decoding: $0, as: UTF8.self)) })"
            )
        }
        for name in names { try readValue(values, name, model.values[Array(name.utf8)], label) }
    }

    /// A link stored (refused when a target is not stored), deleted, or its holders queried.
    func randomLinkOperation(_ links: Bucket<ModelLink>, model: inout ModelState, place: String) throws {
        // A damage phase's repair may lose a link's target: its model does not follow references.
        guard damagePhase == nil else { return }
        let key = "l\(int(0...11))"
        let items = model.sorted(ModelLink.targetBucket)
        func target() -> String { !items.isEmpty && chance(0.85) ? pick(items).id : randomKey() }
        switch int(0...9) {
        case 0..<6:
            let targets = (0..<int(0...4)).map { _ in target() }
            let refusal: ModelState.Refusal? = targets.allSatisfy(model.linkable) ? nil : .danglingReference
            let link = ModelLink(id: key, targets: targets.map { Ref($0) })
            if try attempt(
                refusal, "\(place)store link \(key) → [\(targets.map(escaped).joined(separator: ", "))]",
                { try links.store(link) })
            {
                model.links[Array(key.utf8)] = targets
            }
        case 6:
            if try attempt(nil, "\(place)delete link \(key)", { _ = try links.delete(keys: [key]) }) {
                model.links[Array(key.utf8)] = nil
            }
        default:
            let wanted = target()
            let expected = model.links.filter { $0.value.contains { Array($0.utf8) == Array(wanted.utf8) } }.keys
                .sorted { modelCompareBytes($0, $1) < 0 }
            let got = try read("\(place)links holding \(escaped(wanted))", counted: true) {
                try links.keys(.index("targets", equals: IndexValue(wanted)))
            }
            if got.map({ Array($0.utf8) }) != expected {
                throw fail(
                    "\(place)links holding \(escaped(wanted)) are \(got.map(escaped)), the model has \(expected.map { escaped(String(decoding: $0, as: UTF8.self)) })"
                )
            }
        }
    }

    /// Every link, its targets in order, as the model holds them.
    func verifyLinks(_ label: String) throws {
        let links = try read("\(label)links") { try anyClient().bucket(ModelLink.self).objects() }
        let got = links.map { (Array($0.id.utf8), $0.targets.map { Array($0.key.utf8) }) }
        let expected = model.links.sorted { modelCompareBytes($0.key, $1.key) < 0 }.map {
            ($0.key, $0.value.map { Array($0.utf8) })
        }
        if got.map(\.0) != expected.map(\.0) || got.map(\.1) != expected.map(\.1) {
            throw fail("\(label)the links are \(links), the model has \(model.links)")
        }
    }

    /// Both buckets whole, and a few random queries.
    func verifyAll() throws {
        try verifyLinks("")
        try verifyValues(anyClient().values, model, "")
        for name in Self.bucketNames {
            let bucket = try read("opening \(name)") { try self.bucket(name) }
            try verifyBucket(name, bucket, model, "")
            for _ in 0..<2 { try verifyQuery(randomQuery(), name, bucket, model, "") }
            try verifySearch(name, bucket, model, "")
        }
    }

    /// ``verifyAll()`` without the queries and searches: objects, index entry counts, links and
    /// named values.
    func verifyContents() throws {
        try verifyLinks("")
        try verifyValues(anyClient().values, model, "")
        for name in Self.bucketNames {
            let bucket = try read("opening \(name)") { try self.bucket(name) }
            try verifyBucket(name, bucket, model, "")
        }
    }

    func checkClean() throws {
        let report = try read("check") { try db.check() }
        if !report.problems.isEmpty {
            throw fail("check reports \(report.problems.count) problems: \(report.problems.prefix(5))")
        }
        if report.values != model.values.count {
            throw fail("check counted \(report.values) named values, the model has \(model.values.count)")
        }
        let objects = model.buckets.values.reduce(0, { $0 + $1.count }) + model.links.count
        if report.objects != objects {
            throw fail("check counted \(report.objects) objects, the model has \(objects)")
        }
    }

    func reopen() throws {
        note("reopen")
        operations += 1
        do { try test.reopen() } catch { throw fail("reopening: \(error)") }
    }

    // MARK: Operations

    static var standardOperations: [ModelOperation] {
        [
            ModelOperation(name: "write", weight: 55) { run in
                let name = run.pick(bucketNames)
                let bucket = try run.read("opening \(name)") { try run.bucket(name) }
                try run.randomWrite(in: name, bucket: bucket, model: &run.model, transaction: false)
                let count = try run.read("count") { try bucket.count() }
                if count != run.model.objects(name).count {
                    throw run.fail(
                        "after the write, count() is \(count), the model has \(run.model.objects(name).count)")
                }
                // A write applied or refused: the text indexes say so at once.
                if run.chance(0.1) { try run.verifySearch(name, bucket, run.model, "after the write: ") }
            },
            ModelOperation(name: "named value", weight: 4) { run in
                try run.randomValueOperation(run.anyClient().values, model: &run.model, place: "")
            },
            ModelOperation(name: "link", weight: 4) { run in
                let links = try run.read("opening links") { try run.anyClient().bucket(ModelLink.self) }
                try run.randomLinkOperation(links, model: &run.model, place: "")
            },
            ModelOperation(name: "transaction", weight: 9) { run in try run.transaction(throwing: false) },
            ModelOperation(name: "transaction that throws", weight: 3) { run in try run.transaction(throwing: true) },
            ModelOperation(name: "query", weight: 15) { run in
                let name = run.pick(bucketNames)
                let bucket = try run.read("opening \(name)") { try run.bucket(name) }
                try run.verifyQuery(run.randomQuery(), name, bucket, run.model, "", counted: true)
            },
            ModelOperation(name: "text search", weight: 8) { run in
                let name = run.pick(bucketNames)
                let bucket = try run.read("opening \(name)") { try run.bucket(name) }
                try run.verifySearch(name, bucket, run.model, "")
            },
            ModelOperation(name: "damage a text entry, check and repair", weight: 0.3) {
                run in try run.damageTextEntry()
            },
            ModelOperation(name: "point reads", weight: 5) { run in
                let name = run.pick(bucketNames)
                let bucket = try run.read("opening \(name)") { try run.bucket(name) }
                for _ in 0..<3 {
                    let key = run.randomKey()
                    let expected = run.model.objects(name)[Array(key.utf8)]
                    let got = try run.read("object(forKey: \(escaped(key)))", counted: true) {
                        try bucket.object(forKey: key)
                    }
                    if let expected {
                        guard let got, got.isIdentical(to: expected) else {
                            throw run.fail(
                                "object(forKey: \(escaped(key))) is \(String(describing: got)), the model has \(expected)"
                            )
                        }
                    } else if let got {
                        throw run.fail("object(forKey: \(escaped(key))) is \(got), the model has none")
                    }
                    let contains = try run.read("contains") { try bucket.contains(key: key) }
                    if contains != (expected != nil) { throw run.fail("contains(key: \(escaped(key))) is \(contains)") }
                }
            },
            ModelOperation(name: "paging walk", weight: 6) { run in try run.pagingWalk() },
            ModelOperation(name: "large batch", weight: 0.3, applies: { $0 != .etcd }) { run in
                try run.largeBatch(in: run.pick(bucketNames))
            },
            ModelOperation(name: "staged import", weight: 1) { run in try run.stagedImport(into: run.pick(bucketNames))
            },
            ModelOperation(name: "migrateAll", weight: 0.6) { run in try run.migrateAll(in: run.pick(bucketNames)) },
            ModelOperation(name: "reopen", weight: 0.3) { run in
                try run.reopen()
                try run.verifyAll()
            },
            ModelOperation(name: "merge text segments or compact", weight: 0.3, applies: { $0 != .etcd }) { run in
                try run.mergeSegments(in: run.pick(bucketNames))
            },
            ModelOperation(name: "reads over damaged files", weight: 0.3, applies: { $0 == .leveldb }) { run in
                try run.damagedReads()
            },
        ]
    }

    /// Upgrades every record of version 0 in batches; then every record is at version 1 and the
    /// bucket still holds exactly the model's objects (migrations change the form, never the content).
    func migrateAll(in name: String) throws {
        let bucket = try read("opening \(name)") { try self.bucket(name) }
        let batch = int(1...40)
        let upgraded = try read("migrateAll(batchSize: \(batch)) of \(escaped(name))", counted: true) {
            try bucket.migrateAll(batchSize: batch)
        }
        tally["records upgraded by migrateAll", default: 0] += upgraded
        if upgraded > model.objects(name).count {
            throw fail("migrateAll upgraded \(upgraded) records; the bucket holds \(model.objects(name).count)")
        }
        for key in try read("keys") { try bucket.keys() } {
            let version = try read("record(forKey:)") { try bucket.raw.record(forKey: key)?.schemaVersion }
            if version != 1 {
                throw fail("after migrateAll, \(escaped(key)) is at schema version \(String(describing: version))")
            }
        }
        if try read("migrateAll again") { try bucket.migrateAll() } != 0 {
            throw fail("a second migrateAll of \(escaped(name)) upgraded records again")
        }
        try verifyAll()
    }

    /// Stores one batch large enough for segments (``segmentBatch()``) in bucket `name`.
    func storeSegmentBatch(in name: String) throws {
        let items = segmentBatch()
        let refusal = model.refusal(storing: items, in: name)
        let bucket = try read("opening \(name)") { try self.bucket(name) }
        if try attempt(
            refusal, "\(escaped(name)) store a batch of \(items.count) distinct objects", { try bucket.store(items) })
        {
            model.store(items, in: name)
        }
    }

    /// A merge pass over a bucket's text segments (what a write runs now and then), or
    /// `compact()` (every term merged, every tombstone gone): neither changes what any read
    /// answers, and `check` stays clean.
    func mergeSegments(in name: String) throws {
        let bucket = try read("opening \(name)") { try self.bucket(name) }
        if chance(0.5) {
            let counts = try read("merge pass over \(escaped(name))", counted: true) {
                try bucket.raw.mergeSegments(everything: false)
            }
            tally["merge passes", default: 0] += 1
            tally["segments merged by passes", default: 0] += counts.segmentsRead
        } else {
            try read("compact()", counted: true) { try db.compact() }
            tally["compactions", default: 0] += 1
        }
        try verifyAll()
        let report = try read("check after merging") { try db.check() }
        if !report.isConsistent { throw fail("after merging segments, check finds \(report.problems)") }
    }

    /// A batch of 256 to 320 objects (keys of the pool and `big0`…`big299`, few unique values):
    /// large enough for the writer to read the old records by one walk instead of point reads.
    func largeBatch(in name: String) throws {
        var items = (0..<int(256...320)).map { _ -> ModelItem in
            var item = randomItem(key: chance(0.9) ? "big\(int(0...299))" : nil)
            if chance(0.995) { item.email = nil }
            // Texts on a few: the walk over old headers sees text entries, without 300 objects' worth.
            if chance(0.9) { item.body = nil; item.paragraphs = [] }
            // NaN, empty or overlong keys refuse a batch before it writes: one in ten batches has one.
            if item.hasInvalidIndexValue { item.real = 7; item.num = .int(7) }
            if item.id.isEmpty || item.id.utf8.count > 4096 { item.id = "big300" }
            return item
        }
        if chance(0.1) { items[int(0...(items.count - 1))] = randomItem(key: "") }
        let refusal = model.refusal(storing: items, in: name)
        let bucket = try read("opening \(name)") { try self.bucket(name) }
        if try attempt(refusal, "\(escaped(name)) store a batch of \(items.count) objects", { try bucket.store(items) })
        {
            model.store(items, in: name)
        }
        tally[refusal == nil ? "large batch stored" : "large batch refused", default: 0] += 1
    }

    /// A batch of 80 to 112 objects, each key once, nearly all with texts: large enough for their text
    /// postings to go into segments (one per term), replacing objects whose postings are single
    /// entries or in earlier segments. Keys of the pool and `k0`…`k120` (with canonically equal
    /// pairs among them); one batch in twenty is refused as a whole.
    func segmentBatch() -> [ModelItem] {
        var byKey: [[UInt8]: ModelItem] = [:]
        let wanted = int((RawBucket.segmentThreshold + 16)...(RawBucket.segmentThreshold + 48))
        var draws = 0
        while byKey.count < wanted, draws < 1000 {
            draws += 1
            let prefix = pick(["k", "\u{E9}", "e\u{301}", "\u{0}"])
            var item = randomItem(key: chance(0.8) ? prefix + String(int(0...120)) : nil)
            if chance(0.99) { item.email = nil }
            if item.hasInvalidIndexValue { item.real = 7; item.num = .int(7) }
            if item.id.isEmpty || item.id.utf8.count > 4096 { item.id = "k121" }
            // Texts on nearly all, so that both text indexes get at least 64 objects' postings.
            if chance(0.97) {
                if item.body == nil { item.body = randomText() }
                if item.paragraphs.isEmpty { item.paragraphs = [randomText()] }
            }
            byKey[item.keyBytes] = item
        }
        var items = byKey.keys.sorted { modelCompareBytes($0, $1) < 0 }.compactMap { byKey[$0] }
        if chance(0.05) { items[int(0...(items.count - 1))] = randomItem(key: "") }
        return items
    }

    /// A staged import into the bucket: one or two chunks of raw objects over a copy of its
    /// objects (a refused chunk stages nothing; earlier chunks stay), then published (the bucket
    /// becomes the stage, under a new id) or abandoned (nothing changes).
    func stagedImport(into name: String) throws {
        note("staged import into \(escaped(name))")
        operations += 1
        let load: StagedImport
        do {
            load = try db.stageImport(into: name, chunkSize: int(1...8))
        } catch {
            throw fail("staging an import into \(escaped(name)): \(error)")
        }
        var staged = model
        for _ in 0..<int(1...2) {
            let items = (0..<int(1...5)).map { _ in randomItem() }.filter { !$0.hasInvalidIndexValue }
            guard !items.isEmpty else { continue }
            let refusal = staged.refusal(storing: items, in: name)
            let objects = try rawObjects(items)
            if try attempt(refusal, "  stage \(items)", { try load.store(objects) }) { staged.store(items, in: name) }
        }
        if chance(0.2) {
            note("  abandoned")
            load.abandon()
            tally["staged import abandoned", default: 0] += 1
            return
        }
        if engine == .shared || engine == .etcd, chance(0.15) {
            try loseStage(load, of: name, staged: staged)
            return
        }
        var count = 0
        if try attempt(nil, "  publish", { count = try load.publish() }) {
            model = staged
            if count != model.objects(name).count {
                throw fail("publishing returned \(count) objects, the model has \(model.objects(name).count)")
            }
            tally["staged import published", default: 0] += 1
        }
    }

    /// On a shared engine: the loading client's lease ends (as when its process is killed), so
    /// neither storing into the stage nor publishing it writes anything (the model is unchanged),
    /// and a purge, by this handle or the other client, deletes the abandoned stage.
    private func loseStage(_ load: StagedImport, of name: String, staged: ModelState) throws {
        note("  its client's lease ends")
        let owner = try read("the stage's owner") { try self.db.stageOwner() }
        guard let owner else { throw fail("a stage on a shared engine without an owner") }
        do { try test.endLease(owner) } catch { throw fail("ending lease \(owner): \(error)") }
        // An item the stage would take (one it refuses is refused before anything is written).
        let item = randomItem()
        let acceptable = !item.hasInvalidIndexValue && staged.refusal(storing: [item], in: name) == nil
        var steps: [(String, () throws -> Void)] = [("publishing", { _ = try load.publish() })]
        if acceptable { steps.insert(("storing", { try load.store(try self.rawObjects([item])) }), at: 0) }
        for (what, step) in steps {
            do {
                try step()
                throw fail("\(what) into a stage whose lease ended succeeded")
            } catch let mismatch as ModelMismatch {
                throw mismatch
            } catch BuriError.conflict(_, let detail) where detail.contains("lease ended") {
            } catch {
                throw fail("\(what) into a stage whose lease ended: \(error)")
            }
        }
        load.abandon()
        let purger = otherClient.flatMap { $0 === db ? nil : $0 } ?? db
        try read("purging the abandoned stage") { try purger.purgeRetiredBuckets() }
        let left = try read("stages") { try self.db.pendingPurges().filter { $0.id == load.stageId } }
        if !left.isEmpty { throw fail("a stage whose owner's lease ended was not purged: \(left)") }
        tally["staged import whose lease ended", default: 0] += 1
    }

    /// A transaction of a few random writes and reads, whose refused operations are caught and
    /// ignored; it commits (everything not refused), or throws at the end (nothing).
    func transaction(throwing: Bool) throws {
        struct Abort: Error {}
        var inside = model
        let writes = int(1...6)
        note("transaction of \(writes) operations\(throwing ? ", then throws" : "")")
        operations += 1
        do {
            try anyClient().write { tx in
                for _ in 0..<writes {
                    let name = pick(Self.bucketNames)
                    let bucket = try read("tx.bucket") { try tx.bucket(ModelItem.self, named: name) }
                    if chance(0.15) {
                        try randomValueOperation(tx.values, model: &inside, place: "tx ")
                    } else if chance(0.1) {
                        let links = try read("tx.bucket(links)") { try tx.bucket(ModelLink.self) }
                        try randomLinkOperation(links, model: &inside, place: "tx ")
                    } else if chance(0.75) {
                        try randomWrite(in: name, bucket: bucket, model: &inside, transaction: true)
                    } else if chance(0.4) {
                        try verifySearch(name, bucket, inside, "tx ")
                    } else if chance(0.5) {
                        try verifyQuery(randomQuery(), name, bucket, inside, "tx", counted: true)
                    } else {
                        try verifyBucket(name, bucket, inside, "tx")
                    }
                }
                if throwing { throw Abort() }
            }
            if throwing { throw fail("the transaction's closure threw, yet write returned") }
            model = inside
            tally["transaction committed", default: 0] += 1
        } catch is Abort {
            note("  rolled back")
            tally["transaction rolled back", default: 0] += 1
            // Nothing of it is left, in the text indexes either.
            let name = pick(Self.bucketNames)
            try verifySearch(name, try read("opening \(name)") { try self.bucket(name) }, model, "after rollback: ")
        } catch let mismatch as ModelMismatch {
            throw mismatch
        } catch let error as BuriError {
            // A commit over the cluster's limits is refused whole.
            if engine == .etcd, case .storage(let storage) = error, storage.code == .limitExceeded {
                note("  the cluster refused the commit as too large: nothing applied")
                return
            }
            throw fail("the transaction failed: \(error)")
        }
    }

    /// A walk of pages with random writes (and deleteAll) between them: each page must be exactly
    /// the query's current results after the previous page's last result (FORMAT.md §11), `offset`
    /// applied once, `limit` to the whole walk, and `next` set exactly when more results follow.
    func pagingWalk() throws {
        let name = pick(Self.bucketNames)
        let query = randomQuery(paging: true)
        let size = int(1...5)
        let objects = chance(0.3)
        var token: ContinuationToken?
        var last: ModelPosition?
        var returned = 0
        note("paging walk over \(escaped(name)): \(query), pages of \(size)\(objects ? " (objects)" : "")")
        if !query.predicates.isEmpty || !query.sort.isEmpty {
            tally["paging walk with or/not/filter/order", default: 0] += 1
        }
        for page in 0..<40 {
            let bucket = try read("opening \(name)") { try self.bucket(name) }
            var buriQuery = try read("building \(query)") { try query.buriQuery() }
            if let token {
                // Sometimes the token travels as text, as to a client and back.
                let given =
                    chance(0.3)
                    ? try read("parsing a token") { try ContinuationToken(parsing: token.description) } : token
                buriQuery = buriQuery.after(given)
            }
            // What the model says this page holds.
            var all = model.results(query, in: name)
            if let last {
                all = all.filter { ModelPosition.compare($0.position, last) > 0 }
            } else {
                all = Array(all.dropFirst(query.offset))
            }
            let remaining = query.limit.map { $0 - returned }
            let expected = Array(all.prefix(Swift.min(size, remaining ?? Int.max)))
            let expectNext = expected.count == size && (remaining.map { $0 > size } ?? true) && all.count > size
            let got: [String]
            let next: ContinuationToken?
            if objects {
                let result = try read("page \(page) of \(query)", counted: true) {
                    try bucket.page(buriQuery, size: size)
                }
                try compare(result.items, expected.map(\.item), "page \(page) of \(query)")
                got = result.items.map(\.id)
                next = result.next
            } else {
                let result = try read("key page \(page) of \(query)", counted: true) {
                    try bucket.keyPage(buriQuery, size: size)
                }
                got = result.items
                next = result.next
            }
            try compareKeys(
                got, expected, "page \(page) of the walk over \(query) (pages of \(size), \(returned) returned before)")
            if (next != nil) != expectNext {
                throw fail(
                    "page \(page) of the walk over \(query): next is \(next == nil ? "nil" : "set"), the model says \(expectNext ? "more follow" : "the walk is over")"
                )
            }
            note("  page \(page): [\(got.map(escaped).joined(separator: ", "))]")
            tally["page", default: 0] += 1
            returned += expected.count
            last = expected.last?.position ?? last
            guard let next else { return }
            token = next
            // A reopen between pages: the token still resumes.
            if chance(0.04) {
                try reopen()
                tally["reopen between pages", default: 0] += 1
            }
            // A bucket dropped and made again is another bucket: the token is refused, typed.
            if chance(0.03) {
                operations += 1
                note("drop and make again \(escaped(name)) between pages")
                tally["drop between pages", default: 0] += 1
                do {
                    try db.dropBucket(named: name)
                    _ = try self.bucket(name)
                } catch {
                    throw fail("dropping and making again \(escaped(name)): \(error)")
                }
                _ = model.deleteAll(in: name)
                let after = try read("building \(query)") { try query.buriQuery() }.after(next)
                do {
                    _ = try self.bucket(name).keyPage(after, size: size)
                    throw fail("a token of the dropped bucket \(escaped(name)) was accepted by the bucket made again")
                } catch let mismatch as ModelMismatch {
                    throw mismatch
                } catch BuriError.invalidContinuation {
                    return
                } catch {
                    throw fail("a token of the dropped bucket: expected invalidContinuation, got \(error)")
                }
            }
            // Writes between pages, a deleteAll among them now and then.
            for _ in 0..<int(0...2) {
                if chance(0.15) {
                    try transaction(throwing: chance(0.2))
                    continue
                }
                if chance(0.05) {
                    try stagedImport(into: chance(0.8) ? name : pick(Self.bucketNames))
                    continue
                }
                let writeName = chance(0.8) ? name : pick(Self.bucketNames)
                let writeBucket = try read("opening \(writeName)") { try self.bucket(writeName) }
                if chance(0.25) {
                    var copy = model
                    let expected = copy.deleteAll(in: writeName)
                    var deleted = 0
                    tally["deleteAll between pages", default: 0] += 1
                    if try attempt(
                        nil, "deleteAll between pages (\(expected) objects)", { deleted = try writeBucket.deleteAll() })
                    {
                        model = copy
                        if deleted != expected {
                            throw fail("deleteAll returned \(deleted), the model says \(expected)")
                        }
                    }
                } else {
                    try randomWrite(in: writeName, bucket: writeBucket, model: &model, transaction: false)
                }
            }
        }
    }

    /// Closes the database, runs the damage phase on its files, reopens and compares.
    func damage() throws {
        guard let damagePhase else { return }
        note("damage and repair")
        operations += 1
        db.close()
        var context = ModelDamageContext(path: test.path, engine: engine, model: model, step: step, rng: rng)
        model = try damagePhase(&context)
        rng = context.rng
        try reopen()
        try verifyAll()
        try checkClean()
    }
}
