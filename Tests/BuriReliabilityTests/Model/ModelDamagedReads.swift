import Foundation
import Testing
@testable import Buri
import LevelDB

extension BuriError {
    /// Whether this is damage found in the engine's files (`.damaged`): what a read over a
    /// damaged table block must fail with.
    var isDamage: Bool {
        if case .damaged = self { return true }
        return false
    }
}

// The randomized model's reads over damaged files: the database compacted into tables, its files
// copied, one data block of the copy damaged, and every verification the run knows — objects,
// counts, index entries, random queries and pages, text searches (unranked, ranked, as query
// conditions), links and named values — asked of the copy. Each read either answers exactly as
// the model says or fails with `.damaged`: never a shorter or different answer. (Text walks read
// LevelDB's error status only where they stop; the model finds any walk that stops without it.)
extension ModelRun {
    func damagedReads() throws {
        note("reads over damaged files")
        operations += 1
        let options = test.options
        let copy = test.path + "-damaged"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        test.db.close()
        // Every key and value copied into a new LevelDB database whose tables are written in blocks
        // of 1 KiB (LevelDB's least), so that one word's text entries and one index value's entries
        // span blocks, and a walk can step over a damaged block in the middle of them and stop
        // before their end.
        do {
            try? FileManager.default.removeItem(atPath: copy)
            let source = try LevelDB.Database(path: test.path, options: LevelDBOptions.buriDefaults)
            defer { source.close() }
            var small = LevelDBOptions.buriDefaults
            small.blockSize = 1 << 10
            small.createIfMissing = true
            let target = try LevelDB.Database(path: copy, options: small)
            defer { target.close() }
            let batch = WriteBatch()
            for entry in try source.entries() { batch.put(entry.key, entry.value) }
            try target.write(batch, options: .sync)
            try target.compact()
        } catch {
            throw fail("copying the files: \(error)")
        }
        try reopen()
        // Half the time a block holding index entries (text entries among them), whose walks
        // stop early (limits, joint walks); otherwise any data block.
        let blocks = try DamageModel.blocks(copy)
        let entryBlocks = blocks.filter { $0.keys.contains { $0.first == Keyspace.indexTag } }
        guard let block = (chance(0.5) && !entryBlocks.isEmpty ? entryBlocks : blocks).randomElement(using: &rng)
        else {
            tally["damaged reads: no table block", default: 0] += 1
            return
        }
        let what = try DamageModel.damageBlock(block, path: copy, random: &rng)
        note("damaged \(what)")
        let opened: BuriDatabase
        do {
            opened = try BuriDatabase(path: copy, options: options)
        } catch let error as BuriError where error.isDamage {
            tally["damaged reads: open refused", default: 0] += 1
            return
        } catch {
            throw fail("opening the damaged copy (\(what)): \(error)")
        }
        damagedCopy = opened
        defer {
            damagedCopy = nil
            opened.close()
        }
        var checks: [(String, () throws -> Void)] = [
            ("links", { try self.verifyLinks("damaged: ") }),
            ("named values", { try self.verifyValues(opened.values, self.model, "damaged: ") }),
        ]
        for name in Self.bucketNames {
            checks.append(("bucket", { try self.verifyBucket(name, try self.bucket(name), self.model, "damaged: ") }))
            for _ in 0..<3 {
                checks.append(
                    ("search", { try self.verifySearch(name, try self.bucket(name), self.model, "damaged: ") }))
            }
            for _ in 0..<2 {
                let query = randomQuery()
                checks.append(
                    ("query", { try self.verifyQuery(query, name, try self.bucket(name), self.model, "damaged: ") }))
            }
        }
        for (kind, check) in checks {
            do {
                try check()
                tally["damaged reads: \(kind) exact", default: 0] += 1
            } catch let error as BuriError where error.isDamage {
                guard case .damaged(let path, _, _) = error, path == copy else {
                    throw fail("a read over \(what) names another path: \(error)")
                }
                tally["damaged reads: \(kind) reported the damage", default: 0] += 1
            } catch let mismatch as ModelMismatch {
                throw ModelMismatch(message: "over damaged files (\(what)): \(mismatch.message)")
            }
        }
    }
}
