import Buri
import BuriEncryption
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

@Suite("Rotating the data key: every value sealed anew online, the old record key gone, on every engine")
struct DataKeyRotationTests {
    static let engines = Engine.allCases

    /// The generation each stored record and named value is sealed under, by stored key.
    static func generations(_ engine: any StorageEngine) throws -> [[UInt8]: UInt32?] {
        var found: [[UInt8]: UInt32?] = [:]
        for (key, value) in try storedEntries(engine) where key.first == 0x02 || key.first == 0x06 {
            found[key] = value.withUnsafeBytes { sealedGeneration(of: $0) }
        }
        return found
    }

    /// The stored sealed values (records and named values) that `cipher` opens.
    static func opened(by cipher: any DatabaseCipher, _ engine: any StorageEngine) throws -> Int {
        var count = 0
        for (key, value) in try storedEntries(engine) where key.first == 0x02 || key.first == 0x06 {
            if (try? cipher.open(value, key)) != nil { count += 1 }
        }
        return count
    }

    @Test(
        "rotated with writes between batches: every value under the new generation, everything reads, the old header's keys open nothing",
        arguments: engines)
    func rotationSealsEverythingAnew(engine: Engine) throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(engine, options: encrypted(key))
        try EncryptedDatabaseTests.fill(t.db)
        let base = t.db.storedEngine
        let oldHeader = try KeyChangeTests.storedHeader(base)
        let oldCipher = try key.unlock(header: oldHeader)
        #expect(try Self.generations(base).values.allSatisfy { $0 == 0 })
        #expect(t.db.dataKeyGenerations == DataKeyGenerations(current: 0, retiring: nil))
        let notes = try t.db.bucket(SecretNote.self)
        var reports: [DataKeyRotationProgress] = []
        var writes = 0
        try t.db.rotateDataKey(batchSize: 17) { report in
            reports.append(report)
            // Between batches the application goes on: stores, deletes and a named value.
            guard report.generations.retiring != nil, writes < 5 else { return }
            writes += 1
            do {
                try notes.store(SecretNote(id: "w\(writes)", day: 2, text: "written while rotating", tags: ["w"]))
                #expect(try notes.delete(key: "n\(100 + writes)"))
                try notes.store(SecretNote(id: "n\(100 + writes)", day: 3, text: "back", tags: ["t"]))
                try t.db.values.set(writes, for: "during")
            } catch {
                Issue.record("writing while rotating: \(error)")
            }
        }
        #expect(writes == 5)
        #expect(reports.first?.generations == DataKeyGenerations(current: 1, retiring: 0))
        #expect(reports.last?.generations == DataKeyGenerations(current: 1, retiring: nil))
        // The 201 values of the fill, but those the writes replaced before the walk reached them.
        #expect((196...201).contains(reports.last?.resealed ?? 0), "\(reports.last.map { "\($0)" } ?? "")")
        #expect(t.db.dataKeyGenerations == DataKeyGenerations(current: 1, retiring: nil))
        let header = try KeyChangeTests.storedHeader(base)
        #expect(header[7] == 3 && header.count == 173)
        // Every record and named value is sealed under generation 1.
        let stored = try Self.generations(base)
        #expect(stored.count >= 207)
        #expect(stored.values.allSatisfy { $0 == 1 }, "\(stored.values.filter { $0 != 1 })")
        // The keys of the old header open none of them; those of the new header all.
        #expect(try Self.opened(by: oldCipher, base) == 0)
        #expect(try Self.opened(by: try key.unlock(header: header), base) == stored.count)
        // Everything reads, on this handle and on a new one; and check is clean.
        func expectEverything(_ db: BuriDatabase) throws {
            #expect(try db.bucket(SecretNote.self).count() == 205)
            #expect(try db.bucket(SecretNote.self).object(forKey: "n101")?.text == "back")
            #expect(try db.bucket(SecretNote.self).keys(.index("tags", equals: "w")).count == 5)
            #expect(try db.values.get(Int.self, for: "during") == 5)
            #expect(try db.values.get(String.self, for: "config") == EncryptedDatabaseTests.valueSecret)
            #expect(try db.check().problems.isEmpty)
        }
        try expectEverything(t.db)
        let reopened = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
        try expectEverything(reopened)
        reopened.close()
        // A second rotation: generation 2, generation 1 retired in turn.
        try t.db.rotateDataKey(batchSize: 1000)
        #expect(t.db.dataKeyGenerations == DataKeyGenerations(current: 2, retiring: nil))
        #expect(try Self.generations(base).values.allSatisfy { $0 == 2 })
        #expect(try Self.opened(by: try key.unlock(header: header), base) == 0)
        try expectEverything(t.db)
    }

    @Test("a handle closed during a rotation stops it: nothing more is read or reported", arguments: engines)
    func closedHandleStopsTheRotation(engine: Engine) throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(engine, options: encrypted(key))
        // Records only: after the records' one batch, the named values' range has nothing to seal,
        // which a rotation reports without writing.
        try t.db.bucket(SecretNote.self).store(
            (0..<10).map { SecretNote(id: "n\($0)", day: $0, text: "note \($0)", tags: []) })
        let db = try BuriDatabase(engine: t.db.storedEngine, options: encrypted(key), closesEngine: false)
        var reports: [DataKeyRotationProgress] = []
        do {
            try db.rotateDataKey(batchSize: 1000) { report in
                reports.append(report)
                if report.resealed == 10 { db.close() }
            }
            Issue.record("the rotation finished after its handle was closed")
        } catch {
            guard case .databaseClosed = error else { throw error }
        }
        #expect(reports.map(\.resealed) == [0, 10], "\(reports)")
        try t.db.rotateDataKey()
        #expect(t.db.dataKeyGenerations == DataKeyGenerations(current: 1, retiring: nil))
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test(
        "interrupted after each batch, it opens with both generations, checks clean, and finishes", arguments: engines)
    func interruptedRotationResumes(engine: Engine) throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(engine, options: encrypted(key))
        try EncryptedDatabaseTests.fill(t.db)
        let base = t.db.storedEngine
        var stops = 0
        while true {
            // A handle closed after `stops + 1` progress reports: the rotation stops there.
            let db = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
            var seen = 0
            var reportedAfterClose = false
            do {
                try db.rotateDataKey(batchSize: 40) { _ in
                    // A closed handle stops at its next batch: no report follows the close.
                    if seen > stops { reportedAfterClose = true }
                    seen += 1
                    if seen > stops { db.close() }
                }
            } catch {
                // Stopped mid-way: the closed handle is the only error expected.
                guard case .databaseClosed = error else { throw error }
            }
            #expect(!reportedAfterClose, "closed after report \(stops + 1), the rotation went on reporting")
            let finished = db.dataKeyGenerations?.retiring == nil && seen <= stops
            db.close()
            let reopened = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
            defer { reopened.close() }
            try KeyChangeTests.expectReadable(reopened)
            if finished || reopened.dataKeyGenerations?.retiring == nil {
                #expect(try Self.generations(base).values.allSatisfy { $0 == 1 })
                break
            }
            // Mid-way: two generations, values under both, every one readable.
            #expect(reopened.dataKeyGenerations == DataKeyGenerations(current: 1, retiring: 0))
            let stored = Set(try Self.generations(base).values)
            #expect(stored.isSubset(of: [0, 1]), "\(stored)")
            stops += 1
            #expect(stops < 20, "the rotation never finished")
            if stops >= 20 { break }
        }
        #expect(stops >= 3, "stopped only \(stops) times")
    }

    @Test("refused on a plaintext database, while being encrypted online, and for a key that cannot rotate")
    func refusals() throws {
        let plain = try TestDatabase(.memory)
        #expect(throws: BuriError.notEncrypted(path: plain.db.path)) { try plain.db.rotateDataKey() }
        // Being encrypted online: finish that first; nothing written.
        var options = BuriOptions()
        options.encryption = DatabaseKey.random()
        options.encryptsPlaintextDatabase = true
        let engine = MemoryEngine()
        let first = try BuriDatabase(engine: engine, closesEngine: false)
        try first.values.set("x", for: "x")
        first.close()
        let encrypting = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        defer { encrypting.close() }
        let before = try storedEntries(engine)
        #expect {
            try encrypting.rotateDataKey()
        } throws: { error in
            guard case BuriError.invalidTransaction(let reason) = error else { return false }
            return reason.contains("being encrypted online")
        }
        #expect(try storedEntries(engine) == before)
        // A key that keeps the protocol's defaults cannot rotate.
        let v1 = try TestDatabase(.memory, options: encrypted(Version1Key(key: DatabaseKey.random())))
        try v1.db.values.set("y", for: "y")
        let v1Before = try storedEntries(v1.db.storedEngine)
        #expect {
            try v1.db.rotateDataKey()
        } throws: { error in
            guard case BuriError.invalidEncryptionKey(let reason) = error else { return false }
            return reason.contains("cannot rotate")
        }
        #expect(try storedEntries(v1.db.storedEngine) == v1Before)
    }

    @Test("a version 3 header whose generations were changed does not open; malformed generations are refused")
    func tamperedGenerations() throws {
        let key = DatabaseKey.random()
        let header = try key.headerBeginningRotation(try key.newHeader())
        #expect(key.dataKeyGenerations(ofHeader: header) == DataKeyGenerations(current: 1, retiring: 0))
        // A second beginning is refused while one is under way.
        #expect(failure { () throws(EncryptionFailure) in try key.headerBeginningRotation(header) } != nil)
        for (offset, byte) in [(44, UInt8(2)), (48, UInt8(0xFF)), (48, UInt8(1))] {
            var changed = header
            changed[offset] = byte
            let refused = failure { () throws(EncryptionFailure) in try key.unlock(header: changed) }
            #expect(refused != nil, "generation byte \(offset) set to \(byte) still opens")
        }
        var zero = header
        zero[44] = 0  // current generation 0 in a version 3 header
        guard case .malformedHeader = failure({ () throws(EncryptionFailure) in try key.unlock(header: zero) }) else {
            Issue.record("a version 3 header with current generation 0 was not refused as malformed")
            return
        }
        // Changing the key during a rotation keeps both generations.
        let new = DatabaseKey.random()
        let rekeyed = try new.rekeyedHeader(header, from: key)
        #expect(new.dataKeyGenerations(ofHeader: rekeyed) == DataKeyGenerations(current: 1, retiring: 0))
        let a = try key.unlock(header: header)
        let b = try new.unlock(header: rekeyed)
        let sealed = a.seal(Array("both".utf8), Array("k".utf8))
        #expect(try b.open(sealed, Array("k".utf8)) == Array("both".utf8))
    }

    @Test("another client of a shared engine follows a rotation: it reads the new generation and writes under it")
    func sharedClientsFollow() throws {
        for engine in Self.engines where engine == .shared || engine == .etcd {
            let key = DatabaseKey.random()
            let t = try TestDatabase(engine, options: encrypted(key))
            try EncryptedDatabaseTests.fill(t.db)
            let other = try t.client(1)
            defer { if other !== t.db { other.close() } }
            #expect(try other.values.get(String.self, for: "config") == EncryptedDatabaseTests.valueSecret)
            var wrote = false
            try t.db.rotateDataKey(batchSize: 50) { report in
                guard report.generations.retiring != nil, !wrote else { return }
                wrote = true
                // The other client began with generation 0 only; its write follows the header.
                do {
                    try other.bucket(SecretNote.self).store(
                        SecretNote(id: "other", day: 1, text: "from the other client", tags: ["o"]))
                } catch {
                    Issue.record("the other client's write while rotating: \(error)")
                }
            }
            #expect(try Self.generations(t.db.storedEngine).values.allSatisfy { $0 == 1 })
            // It reads values sealed under generation 1 (the header is read when it meets one).
            #expect(try other.bucket(SecretNote.self).object(forKey: "other")?.text == "from the other client")
            try KeyChangeTests.expectReadable(other, count: 201)
            try other.values.set("after", for: "after")
            #expect(try t.db.values.get(String.self, for: "after") == "after")
            #expect(try Self.generations(t.db.storedEngine).values.allSatisfy { $0 == 1 })
            // A client whose key was changed meanwhile, and whose data key was rotated, writes nothing.
            let third = try t.client(2)
            defer { if third !== t.db { third.close() } }
            try t.db.changeEncryptionKey(to: DatabaseKey.random())
            try third.values.set("same data keys", for: "third")
            try t.db.rotateDataKey()
            let before = try storedEntries(t.db.storedEngine)
            #expect {
                try third.values.set("refused", for: "third")
            } throws: { error in
                guard case BuriError.wrongEncryptionKey(_, let reason) = error else { return false }
                return reason.contains("rotated")
            }
            #expect(try storedEntries(t.db.storedEngine) == before)
        }
    }

    @Test("on LevelDB, once rotated and compacted, no file holds a value of the old record key's session")
    func oldSessionLeavesTheFiles() throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(.leveldb, options: encrypted(key))
        try EncryptedDatabaseTests.fill(t.db)
        try t.db.storedEngine.compact(nil)
        // Every value sealed before carries the session id of this handle's first session.
        let value = try #require(try storedEntries(t.db.storedEngine).first { $0.key.first == 0x02 }?.value)
        let session = Array(value[1..<17])
        #expect(!filesHolding(session, under: t.path).isEmpty)
        try t.db.rotateDataKey()
        #expect(filesHolding(session, under: t.path) == [])
        try KeyChangeTests.expectReadable(t.db)
    }

    @Test(
        "a generation being purged is not sealed anew, so a purge running meanwhile can never see a record it deleted come back"
    )
    func aGenerationBeingPurgedIsLeftToThePurge() throws {
        let key = DatabaseKey.random()
        var options = encrypted(key)
        options.purgesInBackground = false
        let t = try TestDatabase(.leveldb, options: options)
        try EncryptedDatabaseTests.fill(t.db)
        let notes = try t.db.bucket(SecretNote.self)
        #expect(try notes.deleteAll() == 200)
        // The old generation's records wait for their purge, under the retired id.
        let retired = try Self.generations(t.db.storedEngine).filter { $0.key.first == 0x02 }
        #expect(retired.count == 200)
        try notes.store(SecretNote(id: "after", day: 1, text: "kept", tags: ["k"]))
        try t.db.rotateDataKey(batchSize: 17)
        // The rotation sealed the new record and the named value anew, and left the purge's alone.
        let stored = try Self.generations(t.db.storedEngine)
        for (key, generation) in retired { #expect(stored[key] == generation, "\(key)") }
        #expect(stored.filter { $0.value == 1 }.count == 2)
        try t.db.purgeRetiredBuckets()
        #expect(try Self.generations(t.db.storedEngine).values.allSatisfy { $0 == 1 })
        #expect(try notes.keys() == ["after"])
        #expect(try t.db.check().isConsistent)
    }
}

@Suite("Padding: an encrypted LevelDB database's blocks compress, so LevelDB caches them")
struct SealedPaddingTests {
    @Test("on LevelDB every sealed value is padded, and the tables hold the padding compressed away")
    func paddingIsCompressedAway() throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(.leveldb, options: encrypted(key))
        var generator = SystemRandomNumberGenerator()
        for i in 0..<3000 {
            let text = String(
                (0..<300).map { _ in Character(UnicodeScalar(UInt8.random(in: 33...126, using: &generator))) })
            try t.db.values.set(text, for: "v\(i)")
        }
        try t.db.storedEngine.compact(nil)
        let stored = try storedEntries(t.db.storedEngine).filter { $0.key.first == 0x06 }
        #expect(stored.count == 3000)
        var raw = 0
        for (storedKey, value) in stored {
            #expect(value.first == sealedValueMarker | paddedSealedValueFlag)
            let padding = Int(value[value.count - 2]) << 8 | Int(value[value.count - 1])
            #expect(
                padding == sealedValuePadding(keyCount: storedKey.count, valueCount: value.count - padding - 2 - 41))
            raw += storedKey.count + value.count
        }
        // LevelDB keeps a block compressed only when it shrinks by an eighth: the tables are that
        // much smaller than the entries, so every block compressed (and is cached when read).
        let files = try FileManager.default.contentsOfDirectory(atPath: t.path).filter { $0.hasSuffix(".ldb") }
        let tables = try files.reduce(0) { total, file in
            total + ((try FileManager.default.attributesOfItem(atPath: t.path + "/" + file)[.size] as? Int) ?? 0)
        }
        #expect(tables > 0 && Double(tables) < Double(raw) * 0.92, "tables \(tables) bytes, entries \(raw) bytes")
        for i in [0, 1234, 2999] { #expect(try t.db.values.get(String.self, for: "v\(i)")?.count == 300) }
        #expect(try t.db.check().problems.isEmpty)

        // A damaged compressed block of those tables: listing the values fails with a typed
        // error, never a shorter list.
        t.db.close()
        let table = try #require(
            files.max { a, b in
                let size = { (file: String) in
                    (try? FileManager.default.attributesOfItem(atPath: t.path + "/" + file)[.size] as? Int) ?? 0
                }
                return size(a) < size(b)
            })
        let handle = try #require(FileHandle(forUpdatingAtPath: t.path + "/" + table))
        try handle.seek(toOffset: 4000)
        var byte = try #require(try handle.read(upToCount: 1))
        byte[0] ^= 0xFF
        try handle.seek(toOffset: 4000)
        try handle.write(contentsOf: byte)
        try handle.close()
        let reopened = try BuriDatabase(path: t.path, options: encrypted(key))
        defer { reopened.close() }
        var listed: [String]?
        do { listed = try reopened.values.names() } catch {}
        #expect(listed == nil, "listed \(listed?.count ?? 0) names from a damaged table")
        // `check` reports it too: as problems, or as the damage it could not read past.
        do {
            #expect(try !reopened.check().problems.isEmpty)
        } catch {
            guard case .damaged = error else { throw error }
        }
    }

    @Test("engines that cache every block (memory, etcd) store sealed values unpadded", arguments: [Engine.memory])
    func otherEnginesDoNotPad(engine: Engine) throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        try t.db.values.set("x", for: "x")
        let value = try #require(try storedEntries(t.db.storedEngine).first { $0.key.first == 0x06 }?.value)
        #expect(value.first == sealedValueMarker && value.count == 41 + 2)
    }
}
