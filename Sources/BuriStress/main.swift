// BuriStress: a child process for Buri's reliability tests (Tests/BuriReliabilityTests).
//
//   BuriStress stress <db-path> <seed> [--async] [--keys N] [--seconds S] [--ops N] [--stop-file F]
//       Opens the database and, until killed (or S seconds pass, default 120, or N writes are
//       done, or file F exists), stores, updates
//       (changing indexed values), and deletes objects of bucket "stress", one at a time and in
//       batches. Before each write it prints   begin <seq> <op> <json>
//       and once the write has returned        ok <seq> <op> <json>
//       where <op> is store / storemany (json: array of objects) / delete (json: array of keys).
//       Every line is written with one write(2) call, unbuffered, so a line that is in the output
//       file was printed after the write it reports completed. "ready" is printed once the
//       database is open. Writes are synchronous (BuriOptions.syncWrites) unless --async.
//
//   BuriStress evolve <db-path> <age-index-version> [<kill-after-batches>]
//       Opens bucket "stress" with the "age" index declared at the given version, which makes Buri
//       rebuild that index (in batches of 100, printing "progress <n>" after each), then prints
//       "evolved". With <kill-after-batches> K it sends itself SIGKILL right after printing the
//       Kth progress line: the index-evolution kill test kills it in the middle of the rebuild at
//       a known point, on any machine.
//
//   BuriStress deleteall <db-path>
//       Opens the database, deletes every object of bucket "stress" (a new generation; the old
//       one is purged in the background), prints "deleted <count>", waits for the purge to finish,
//       then prints "purged". The deleteAll kill test kills it in the middle of the purge.
//
//   BuriStress open <db-path>
//       Opens the database, stores one object and prints "stored" — or "error <BuriError>" and
//       exits 1. The read-only-directory test runs it as an unprivileged user.
//
//   BuriStress transfer <db-path> <seed> [--accounts N]
//       Opens buckets "accounts" (N accounts, created with balance 1000 each on first use) and
//       "transfers", then, until killed, runs transactions that move an amount between two accounts
//       and record the transfer: three objects in two buckets per `db.write`. Prints "ready", then
//       "ok <seq>" after each transaction returns. The transaction kill test checks that every
//       acknowledged transfer is there and that the balances equal 1000 each plus the recorded
//       transfers: no transaction was ever applied in part.
//
// <db-path> may be an etcd location (etcd://HOST:PORT,…/NAME?…): the database is then opened on
// the etcd engine, where several BuriStress processes may write it at once (the two-process
// hammer and the cluster fault test).
//
// The seed makes every run's choice of operations reproducible.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Buri
import BuriEtcd
import BuriStorage
import Foundation

/// The objects the stress writer stores: a binary, a numeric and a multi-valued index, plus a
/// numeric index over a Double.
struct StressItem: BuriSupport, Equatable {
    var id: String
    var name: String
    var age: Int
    var tags: [String]
    var score: Double
    /// Which run and operation wrote this version ("<seed>-<seq>"), so every version is distinct.
    var writer: String
    var note: String

    static let buri = BuriSchema<StressItem>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
        ],
        bucket: "stress"
    )
}

/// SplitMix64: small, fast, and the same sequence for the same seed on every platform.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Writes one whole line to stdout with a single write(2): no buffering to lose on SIGKILL.
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { buffer in
            write(1, UnsafeRawBufferPointer(rebasing: buffer[offset...]).baseAddress, buffer.count - offset)
        }
        if written <= 0 {
            if errno == EINTR { continue }
            exit(3)
        }
        offset += written
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data(("BuriStress: " + message + "\n").utf8))
    exit(2)
}

let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}()

func json(_ value: some Encodable) -> String {
    guard let data = try? encoder.encode(value) else { fail("cannot encode \(value) as JSON") }
    return String(decoding: data, as: UTF8.self)
}

func openDatabase(_ path: String, sync: Bool) -> BuriDatabase {
    var options = BuriOptions()
    options.syncWrites = sync
    // Small memtables: table files are written and compacted often, so kills land in the middle of them too.
    var levelDB = LevelDBOptions.buriDefaults
    levelDB.writeBufferSize = 64 << 10
    levelDB.maxFileSize = 256 << 10
    let engines = StorageEngines(default: LevelDBEngine.Kind(options: levelDB), [EtcdEngine.Kind()])
    if engines.kind(for: path).capabilities.contains(.shared) {
        // Several processes hammer a handful of keys: give optimistic retries room.
        options.maxCommitAttempts = 1_000
    }
    do {
        return try BuriDatabase(location: path, options: options, engines: engines)
    } catch {
        fail("cannot open \(path): \(error)")
    }
}

func runStress(
    path: String, seed: UInt64, sync: Bool, keyCount: Int, seconds: Double, maxOperations: Int, stopFile: String?
) {
    var random = SeededGenerator(seed: seed)
    let db = openDatabase(path, sync: sync)
    let bucket: Bucket<StressItem>
    do {
        bucket = try db.bucket(StressItem.self)
    } catch {
        fail("cannot open bucket: \(error)")
    }
    emit("ready pid=\(getpid()) seed=\(seed) sync=\(sync)")

    let names = ["ann", "bob", "cid", "dee", "E\u{0}N", "émile", "zoë"]
    let tagPool = ["red", "green", "blue", "x", "y", "🙂"]
    var seq = 0
    func makeItem(_ key: String) -> StressItem {
        seq += 1
        var tags: [String] = []
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            let tag = tagPool[Int.random(in: 0..<tagPool.count, using: &random)]
            if !tags.contains(tag) { tags.append(tag) }
        }
        let noteLength =
            Int.random(in: 0..<8, using: &random) == 0
            ? Int.random(in: 200...3000, using: &random) : Int.random(in: 0...20, using: &random)
        return StressItem(
            id: key,
            name: names[Int.random(in: 0..<names.count, using: &random)],
            age: Int.random(in: 0..<100, using: &random),
            tags: tags,
            score: Double(Int.random(in: -400...400, using: &random)) / 4,
            writer: "\(seed)-\(seq)",
            note: String(repeating: "n", count: noteLength)
        )
    }
    func randomKey() -> String { "k\(Int.random(in: 0..<keyCount, using: &random))" }

    let deadline = Date().addingTimeInterval(seconds)
    var operations = 0
    while Date() < deadline && operations < maxOperations
        && !(stopFile.map { FileManager.default.fileExists(atPath: $0) } ?? false)
    {
        operations += 1
        let roll = Int.random(in: 0..<100, using: &random)
        do {
            switch roll {
            case 0..<60:
                let item = makeItem(randomKey())
                let text = json(item)
                emit("begin \(seq) store \(text)")
                try bucket.store(item)
                emit("ok \(seq) store \(text)")
            case 60..<75:
                var items: [StressItem] = []
                for _ in 0..<Int.random(in: 2...5, using: &random) { items.append(makeItem(randomKey())) }
                let text = json(items)
                emit("begin \(seq) storemany \(text)")
                try bucket.storeConcurrently(items)
                emit("ok \(seq) storemany \(text)")
            case 75..<95:
                seq += 1
                let key = randomKey()
                let text = json([key])
                emit("begin \(seq) delete \(text)")
                try bucket.delete(key: key)
                emit("ok \(seq) delete \(text)")
            default:
                seq += 1
                var keys: [String] = []
                for _ in 0..<Int.random(in: 2...4, using: &random) { keys.append(randomKey()) }
                let text = json(keys)
                emit("begin \(seq) delete \(text)")
                try bucket.delete(keys: keys)
                emit("ok \(seq) delete \(text)")
            }
        } catch {
            fail("write \(seq) failed: \(error)")
        }
    }
    db.close()
    emit("done")
}

/// `migrate <path> <record>`: the step kills the process when it upgrades its `record`-th record.
let migrateKillAt =
    CommandLine.arguments.count >= 4 && CommandLine.arguments[1] == "migrate" ? Int(CommandLine.arguments[3]) ?? 0 : 0
/// Records the migration step has upgraded in this process.
nonisolated(unsafe) var migrateSteps = 0

/// StressItem at schema version 1: the step from version 0 writes "migrated" into `note`, and
/// kills the process at the record chosen on the command line — inside `migrateAll`'s batch
/// transaction, before its commit, so the kill lands in the middle of a batch.
struct MigratingItem: BuriSupport {
    var id: String
    var name: String
    var age: Int
    var tags: [String]
    var score: Double
    var writer: String
    var note: String

    static let buri = BuriSchema<MigratingItem>(
        key: \.id,
        indexes: [
            .binary("name", \.name), .numeric("age", \.age), .binary("tags", \.tags), .numeric("score", \.score),
        ],
        bucket: "stress", schemaVersion: 1,
        migrations: [
            .from(0) { record in
                record["note"] = "migrated"
                migrateSteps += 1
                if migrateSteps == migrateKillAt { kill(getpid(), SIGKILL) }
            }
        ])
}

func runMigrate(path: String) -> Never {
    let db = openDatabase(path, sync: false)
    emit("ready pid=\(getpid()) kill-at=\(migrateKillAt)")
    do {
        let upgraded = try db.bucket(MigratingItem.self).migrateAll(batchSize: 100) { done in emit("upgraded \(done)") }
        emit("migrated \(upgraded)")
    } catch {
        fail("migrate failed: \(error)")
    }
    db.close()
    emit("done")
    exit(0)
}

/// `refs <path> <round>`: songs held by playlists (nullify) and fans (cascade); each round is one
/// transaction that deletes the next song and stores a marker, whose encoding kills the process in
/// round `round` — after the deletion's rules are in the transaction, before its commit.
let refsKillAt =
    CommandLine.arguments.count >= 4 && CommandLine.arguments[1] == "refs" ? Int(CommandLine.arguments[3]) ?? 0 : 0

struct StressSong: BuriSupport {
    var id: String
    static let buri = BuriSchema<StressSong>(key: \.id, bucket: "songs")
}

struct StressPlaylist: BuriSupport {
    var id: String
    var songs: [Ref<StressSong>]
    static let buri = BuriSchema<StressPlaylist>(
        key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)], bucket: "playlists")
}

struct StressFan: BuriSupport {
    var id: String
    var favourite: Ref<StressSong>
    static let buri = BuriSchema<StressFan>(
        key: \.id, indexes: [.reference("favourite", \.favourite, onDelete: .cascade)], bucket: "fans")
}

/// The last round committed; encoding it in round `refsKillAt` kills the process.
struct RoundMarker: BuriSupport {
    var id: String
    var round: Int
    static let buri = BuriSchema<RoundMarker>(key: \.id, bucket: "rounds")

    func encode(to encoder: any Encoder) throws {
        if round == refsKillAt { kill(getpid(), SIGKILL) }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(round, forKey: .round)
    }
}

/// Deletes songs in order, one transaction per round, until killed (or every song is gone).
func runRefs(path: String) -> Never {
    let db = openDatabase(path, sync: false)
    emit("ready pid=\(getpid()) kill-at=\(refsKillAt)")
    do {
        let done = try db.bucket(RoundMarker.self).object(forKey: "last")?.round ?? 0
        let songs = try db.bucket(StressSong.self).keys()
        for (offset, song) in songs.enumerated() {
            let round = done + offset + 1
            try db.write { tx in
                try tx.bucket(StressSong.self).delete(keys: [song])
                try tx.bucket(RoundMarker.self).store(RoundMarker(id: "last", round: round))
            }
            emit("round \(round)")
        }
    } catch {
        fail("refs failed: \(error)")
    }
    db.close()
    emit("done")
    exit(0)
}

/// The age index's version for `evolve` (from the command line; 0 otherwise).
let evolveVersion =
    CommandLine.arguments.count >= 4 && CommandLine.arguments[1] == "evolve" ? Int(CommandLine.arguments[3]) ?? 0 : 0

/// StressItem with the "age" index at a version chosen on the command line.
struct EvolvingItem: BuriSupport {
    var id: String
    var name: String
    var age: Int
    var tags: [String]
    var score: Double
    var writer: String
    var note: String

    static var buri: BuriSchema<EvolvingItem> {
        BuriSchema(
            key: \.id,
            indexes: [
                .binary("name", \.name), .numeric("age", \.age, version: evolveVersion), .binary("tags", \.tags),
                .numeric("score", \.score),
            ],
            bucket: "stress"
        )
    }
}

func runEvolve(path: String) -> Never {
    let db = openDatabase(path, sync: false)
    emit("ready pid=\(getpid()) version=\(evolveVersion)")
    do {
        let killAfter = arguments.count >= 5 ? Int(arguments[4]) : nil
        _ = try db.bucket(EvolvingItem.self, batchSize: 100) { progress in
            emit("progress \(progress.processed)")
            if let killAfter, progress.processed >= killAfter * 100 { kill(getpid(), SIGKILL) }
        }
    } catch {
        fail("evolve failed: \(error)")
    }
    db.close()
    emit("evolved")
    exit(0)
}

func runDeleteAll(path: String) -> Never {
    let db = openDatabase(path, sync: false)
    do {
        let count = try db.bucket(StressItem.self).deleteAll()
        emit("deleted \(count)")
        while try !db.pendingPurges().isEmpty { usleep(1_000) }
    } catch {
        fail("deleteall failed: \(error)")
    }
    db.close()
    emit("purged")
    exit(0)
}

func runOpen(path: String) -> Never {
    do {
        let db = try BuriDatabase(path: path)
        let bucket = try db.bucket(StressItem.self)
        try bucket.store(StressItem(id: "probe", name: "probe", age: 1, tags: [], score: 0, writer: "open", note: ""))
        db.close()
        emit("stored")
        exit(0)
    } catch {
        emit("error \(error)")
        exit(1)
    }
}

struct StressAccount: BuriSupport, Equatable {
    var id: String
    var balance: Int
    static let buri = BuriSchema<StressAccount>(
        key: \.id, indexes: [.numeric("balance", \.balance)], bucket: "accounts")
}

struct StressTransfer: BuriSupport, Equatable {
    var id: String
    var from: String
    var to: String
    var amount: Int
    static let buri = BuriSchema<StressTransfer>(
        key: \.id, indexes: [.binary("from", \.from), .binary("to", \.to)], bucket: "transfers")
}

func runTransfers(path: String, seed: UInt64, accounts: Int) -> Never {
    let db = openDatabase(path, sync: false)
    var random = SeededGenerator(seed: seed)
    do {
        let bucket = try db.bucket(StressAccount.self)
        _ = try db.bucket(StressTransfer.self)
        if try bucket.count() == 0 {
            try bucket.storeConcurrently((0..<accounts).map { StressAccount(id: "a\($0)", balance: 1000) })
        }
        var sequence = try db.bucket(StressTransfer.self).count()
        emit("ready")
        while true {
            sequence += 1
            let from = "a\(Int.random(in: 0..<accounts, using: &random))"
            var to = "a\(Int.random(in: 0..<accounts, using: &random))"
            if to == from { to = from == "a0" ? "a1" : "a0" }
            let amount = Int.random(in: 1...50, using: &random)
            let id = "\(seed)-" + String(format: "%09d", sequence)
            try db.write { tx in
                let balances = try tx.bucket(StressAccount.self)
                let transfers = try tx.bucket(StressTransfer.self)
                guard var source = try balances.object(forKey: from), var target = try balances.object(forKey: to)
                else {
                    throw StressTransferError.missingAccount
                }
                source.balance -= amount
                target.balance += amount
                try balances.store(source)
                try transfers.store(StressTransfer(id: id, from: from, to: to, amount: amount))
                try balances.store(target)
            }
            emit("ok \(id)")
        }
    } catch {
        emit("error \(error)")
        exit(1)
    }
}

enum StressTransferError: Error { case missingAccount }

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    fail(
        "usage: BuriStress stress <db-path> <seed> [--async] [--keys N] [--seconds S] | evolve <db-path> <version> | transfer <db-path> <seed> [--accounts N] | open <db-path>"
    )
}
switch arguments[1] {
case "open":
    runOpen(path: arguments[2])
case "evolve":
    runEvolve(path: arguments[2])
case "migrate":
    runMigrate(path: arguments[2])
case "refs":
    runRefs(path: arguments[2])
case "deleteall":
    runDeleteAll(path: arguments[2])
case "transfer":
    guard arguments.count >= 4, let seed = UInt64(arguments[3]) else { fail("transfer needs <db-path> <seed>") }
    let accounts = arguments.count >= 6 && arguments[4] == "--accounts" ? max(2, Int(arguments[5]) ?? 8) : 8
    runTransfers(path: arguments[2], seed: seed, accounts: accounts)
case "stress":
    guard arguments.count >= 4, let seed = UInt64(arguments[3]) else { fail("stress needs <db-path> <seed>") }
    var sync = true
    var keyCount = 64
    var seconds = 120.0
    var maxOperations = Int.max
    var stopFile: String?
    var rest = arguments.dropFirst(4).makeIterator()
    while let option = rest.next() {
        switch option {
        case "--async": sync = false
        case "--keys": keyCount = rest.next().flatMap(Int.init).map { max(1, $0) } ?? keyCount
        case "--seconds": seconds = rest.next().flatMap(Double.init) ?? seconds
        case "--stop-file": stopFile = rest.next()
        case "--ops": maxOperations = rest.next().flatMap(Int.init).map { max(1, $0) } ?? maxOperations
        default: fail("unknown option \(option)")
        }
    }
    runStress(
        path: arguments[2], seed: seed, sync: sync, keyCount: keyCount, seconds: seconds, maxOperations: maxOperations,
        stopFile: stopFile)
default:
    fail("unknown mode \(arguments[1])")
}
