@testable import Buri
import Foundation
import Testing

/// The randomized model test: one seeded stream of random operations — stores (single, batches,
/// raw, some refused for unique values, NaN or bad keys), deletes by key, keys and object,
/// `deleteAll`, transactions whose closures catch refused operations and go on, transactions that
/// throw, queries of every form, paging walks with writes and `deleteAll` between pages, counts,
/// full-text searches (terms, AND, OR, NOT, prefixes, phrases) of two `.text` indexes, text entries
/// damaged then found by `check` and repaired, reopens — against every engine and against a plain
/// Swift model (Model/ModelState.swift, Model/ModelText.swift), compared after every step
/// (Model/ModelRun.swift).
///
/// The default run is a fixed-seed slice of a few seconds. `BURI_FULL_TESTS=1` (`Scripts/test
/// --full`) runs more than 300,000 operations over more seeds, one of them new each run. A failure
/// prints its seed and the command that replays it: `BURI_MODEL_SEED=<seed>` (with
/// `BURI_MODEL_OPS=<n>` for the operation count and `BURI_TEST_ENGINES=<engine>`).
@Suite("Randomized model test: every engine agrees with a plain model")
struct ModelTests {
    /// Operations per seed on each engine, and the seeds, for the default and the full run.
    struct Plan {
        var seeds: [UInt64]
        var operations: Int
    }

    static func plan(for engine: Engine) -> Plan {
        let environment = ProcessInfo.processInfo.environment
        if let text = environment["BURI_MODEL_SEED"], let seed = UInt64(text) {
            let operations = environment["BURI_MODEL_OPS"].flatMap { Int($0) } ?? (fullTests ? 40_000 : 3_000)
            return Plan(seeds: [seed], operations: operations)
        }
        let fixed: [UInt64] = [0xB0A1_2026, 21, 0x5EED_0003, 0x5EED_0004]
        guard fullTests else {
            switch engine {
            case .memory: return Plan(seeds: [fixed[0], fixed[1]], operations: 1_500)
            case .temporary, .leveldb, .shared: return Plan(seeds: [fixed[0]], operations: 1_500)
            case .etcd: return Plan(seeds: [fixed[0]], operations: 200)
            }
        }
        // At least 300,000 operations in all: 3 × 40,000 on memory, 2 × 35,000 on each LevelDB
        // engine, 2 × 20,000 shared, 3,000 on etcd; the last seed of each is new every run.
        let fresh = UInt64(Date().timeIntervalSince1970 * 1000) &+ UInt64(Engine.allCases.firstIndex(of: engine) ?? 0)
        switch engine {
        case .memory: return Plan(seeds: [fixed[0], fixed[1], fresh], operations: 40_000)
        case .temporary, .leveldb: return Plan(seeds: [fixed[2], fresh], operations: 35_000)
        case .shared: return Plan(seeds: [fixed[3], fresh], operations: 20_000)
        case .etcd: return Plan(seeds: [fresh], operations: 3_000)
        }
    }

    @Test("random operations on every engine agree with the model", arguments: Engine.allCases)
    func randomOperationsAgreeWithTheModel(engine: Engine) throws {
        let plan = Self.plan(for: engine)
        for seed in plan.seeds {
            let run = try ModelRun(engine: engine, seed: seed)
            do {
                try run.run(operations: plan.operations)
            } catch let mismatch as ModelMismatch {
                Issue.record("\(mismatch)")
                return
            }
            if fullTests || ProcessInfo.processInfo.environment["BURI_MODEL_SEED"] != nil {
                let tally = run.tally.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                print(
                    "model test: engine \(engine), seed \(seed): \(run.operations) operations in \(run.step) steps agree with the model (\(tally))"
                )
            }
        }
    }

    @Test(
        "on an encrypted database, private indexes answer exact queries like the model and refuse the rest",
        // Not etcd, whose random run is short; its encryption is tested in BuriEncryptionTests.
        arguments: Engine.allCases.filter { $0 != .etcd })
    func encryptedRunsAgreeWithTheModel(engine: Engine) throws {
        let plan = Self.plan(for: engine)
        for seed in plan.seeds {
            let run = try ModelRun(engine: engine, seed: seed &+ 0xE1, encrypted: true)
            do {
                try run.run(operations: plan.operations)
            } catch let mismatch as ModelMismatch {
                Issue.record("encrypted: \(mismatch)")
                return
            }
            #expect(run.tally["private index refusal", default: 0] > 0, "\(run.tally)")
            #expect(run.db.isEncrypted)
        }
    }

    @Test(
        "an encrypted database whose data key is rotated mid-run, interrupted once, written between batches, agrees with the model",
        // Not etcd, whose random run is short; BuriEncryptionTests rotates on etcd.
        arguments: Engine.allCases.filter { $0 != .etcd })
    func dataKeyRotatedMidRunAgreesWithTheModel(engine: Engine) throws {
        let plan = Self.plan(for: engine)
        for seed in plan.seeds {
            let run = try ModelRun(engine: engine, seed: seed &+ 0x2E1, encrypted: true)
            do {
                try run.run(operations: plan.operations / 2)
                try run.rotateDataKeyOnline(batchSize: 5)
                try run.run(operations: plan.operations)
            } catch let mismatch as ModelMismatch {
                Issue.record("rotated: \(mismatch)")
                return
            }
            #expect(run.tally["write while rotating", default: 0] > 0, "\(run.tally)")
            #expect(run.db.dataKeyGenerations?.current == 1 && run.db.dataKeyGenerations?.retiring == nil)
        }
    }

    @Test(
        "a plaintext database encrypted online mid-run, written between the copy's batches and stopped inside one, agrees with the model",
        // Not etcd, whose random run is short; BuriEncryptionTests encrypts online on etcd.
        arguments: Engine.allCases.filter { $0 != .etcd })
    func encryptedOnlineMidRunAgreesWithTheModel(engine: Engine) throws {
        let plan = Self.plan(for: engine)
        var (stops, kept) = (0, 0)
        // The plan's seeds, then (until a resumed copy kept objects) up to four more: whether the
        // stop falls inside a copy that a random write between batches does not empty (a deleteAll
        // of the bucket under copy leaves nothing to keep) depends on the seed's stream.
        let extra = (1...4).map { (plan.seeds.last ?? 0) &+ UInt64($0) }
        for (position, seed) in (plan.seeds + extra).enumerated() {
            if position >= plan.seeds.count, kept > 0 { break }
            let run = try ModelRun(engine: engine, seed: seed &+ 0x0E1)
            do {
                try run.run(operations: plan.operations / 2)
                try run.encryptOnline(batchSize: 7)
                try run.run(operations: plan.operations)
            } catch let mismatch as ModelMismatch {
                Issue.record("encrypted online: \(mismatch)")
                return
            }
            #expect(run.tally["write while encrypting", default: 0] > 0, "\(run.tally)")
            stops += run.tally["encryption stopped inside a copy", default: 0]
            kept += run.tally["objects kept by a resumed copy", default: 0]
            #expect(run.tally["private index refusal", default: 0] > 0, "\(run.tally)")
            #expect(run.db.isEncrypted && !run.db.isBeingEncrypted)
        }
        // The copy under way when the handle closed (or, on a shared engine, its lease ended) was
        // taken up; catching up with writes keeps objects too.
        #expect(stops > 0)
        #expect(kept > 0, "\(stops) stops")
    }

    @Test(
        "a damaged text entry (each kind) is found by check, repaired, and searches match the model again",
        // Not etcd, where 15 checks take seconds each; its random run draws the same operation.
        arguments: Engine.allCases.filter { $0 != .etcd })
    func damagedTextEntriesAreRepaired(engine: Engine) throws {
        let run = try ModelRun(engine: engine, seed: 0x7E47)
        do {
            try run.run(operations: 300)
            for kind in 0..<18 {
                // Before a segment's damage: a batch whose postings go in segments, in each bucket.
                if kind % 6 == 5 { for name in ModelRun.bucketNames { try run.storeSegmentBatch(in: name) } }
                try run.damageTextEntry(kind: kind % 6)
            }
            try run.verifyAll()
        } catch let mismatch as ModelMismatch {
            Issue.record("\(mismatch)")
            return
        }
        let kinds = run.tally.keys.filter { $0.hasPrefix("text entry damaged: ") }
        // A shared engine never puts postings in segments, so it has no segment to damage.
        #expect(kinds.count == (engine == .shared ? 5 : 6), "\(run.tally)")
    }

    @Test("the damage hook runs on the closed database's files, and the run goes on after it")
    func theDamageHookRuns() throws {
        final class Calls: @unchecked Sendable { var count = 0 }
        let calls = Calls()
        // A phase that damages nothing: it only proves the hook's plumbing (close, the files at
        // `path`, reopen, compare). The repair work plugs real damage in here.
        let run = try ModelRun(engine: .leveldb, seed: 77) { context in
            calls.count += 1
            #expect(FileManager.default.fileExists(atPath: context.path + "/CURRENT"))
            return context.model
        }
        do {
            // Until the phase was drawn (whatever else the stream draws as operations are added).
            var target = 0
            while calls.count == 0, target < 30_000 {
                target += 1_500
                try run.run(operations: target)
            }
        } catch let mismatch as ModelMismatch {
            Issue.record("\(mismatch)")
        }
        #expect(calls.count > 0)
    }

    @Test("the model orders numbers exactly across Int64, UInt64 and Double")
    func theModelsNumberOrderIsExact() {
        // The model must be right for the test to mean anything: its comparisons against known answers.
        let ascending: [ModelNumber] = [
            .double(-.infinity), .double(-.greatestFiniteMagnitude), .double(-18_446_744_073_709_551_616), .int(.min),
            .int(.min + 1),
            .double(-1.5), .int(-1), .double(-0.5), .double(-.leastNonzeroMagnitude), .int(0),
            .double(.leastNonzeroMagnitude), .double(0.5),
            .uint(1), .double(1.5), .int(1 << 53), .int((1 << 53) + 1), .int(.max), .uint(1 << 63), .uint(.max),
            .double(18_446_744_073_709_551_616), .double(.greatestFiniteMagnitude), .double(.infinity),
        ]
        for (i, a) in ascending.enumerated() {
            for (j, b) in ascending.enumerated() {
                let expected = i < j ? -1 : (i > j ? 1 : 0)
                #expect(ModelNumber.compare(a, b) == expected, "\(a) vs \(b)")
            }
        }
        #expect(ModelNumber.compare(.double(-0.0), .int(0)) == 0)
        #expect(ModelNumber.compare(.double(9_223_372_036_854_775_808), .uint(1 << 63)) == 0)
        #expect(ModelNumber.compare(.double(-9_223_372_036_854_775_808), .int(.min)) == 0)
        #expect(ModelNumber.compare(.double(9_007_199_254_740_992), .int((1 << 53) + 1)) == -1)
        // And it agrees with Buri's encoding, which orders index keys.
        for a in ascending {
            for b in ascending {
                let encoded = (try? a.indexValue()).map(\.encoded) ?? []
                let other = (try? b.indexValue()).map(\.encoded) ?? []
                let order = modelCompareBytes(encoded, other)
                #expect(order == ModelNumber.compare(a, b), "\(a) vs \(b)")
            }
        }
    }
}
