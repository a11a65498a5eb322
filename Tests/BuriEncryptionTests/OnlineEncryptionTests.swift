import Buri
import BuriEncryption
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

/// A person whose age index is numeric (so it must be named plaintext to encrypt the database)
/// and whose city is private once encrypted.
struct Resident: BuriSupport, Equatable {
    var id: String
    var city: String
    var age: Int
    static let buri = BuriSchema<Resident>(
        key: \.id, indexes: [.binary("city", \.city), .numeric("age", \.age).plaintext()])
}

@Suite("Encrypting a plaintext database online: every object reads the same throughout, on every engine")
struct OnlineEncryptionTests {
    static let secret = "online secret \u{1F511} 7c1d"

    /// A plaintext database: notes (private tags and text, plaintext day), residents, named values.
    static func fillPlaintext(_ db: BuriDatabase, notes count: Int = 300) throws {
        let notes = try db.bucket(SecretNote.self)
        try notes.store(
            (0..<count).map {
                SecretNote(id: "n\($0)", day: $0 % 7, text: "\(secret) #\($0)", tags: [secret, "t\($0)"])
            })
        try db.bucket(Resident.self).store(
            (0..<50).map { Resident(id: "r\($0)", city: $0 % 2 == 0 ? "Oslo \(secret)" : "Lund", age: $0) })
        try db.values.set(secret, for: "motto")
        try db.values.set(42, for: "answer")
    }

    static func beginning(_ key: DatabaseKey, plaintext: [String] = []) -> BuriOptions {
        var options = encrypted(key)
        options.encryptsPlaintextDatabase = true
        options.plaintextIndexes = plaintext
        return options
    }

    /// Every object and named value, as the application reads them.
    static func contents(_ db: BuriDatabase) throws -> ([SecretNote], [Resident], String?, Int?) {
        (
            try db.bucket(SecretNote.self).objects().sorted { $0.id < $1.id },
            try db.bucket(Resident.self).objects().sorted { $0.id < $1.id },
            try db.values.get(String.self, for: "motto"), try db.values.get(Int.self, for: "answer")
        )
    }

    @Test(
        "begun, written meanwhile, finished: same objects, all sealed, private indexes tokens",
        arguments: Engine.allCases)
    func encryptsOnline(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try Self.fillPlaintext(t.db)
        let key = DatabaseKey.random()
        try t.reopen(options: Self.beginning(key))
        #expect(t.db.isEncrypted && t.db.isBeingEncrypted)
        #expect(t.db.formatVersion == 13)
        // Before any bucket is sealed: every read works, private indexes still answer ranges.
        let notes = try t.db.bucket(SecretNote.self)
        #expect(try notes.object(forKey: "n3")?.text == "\(Self.secret) #3")
        #expect(try notes.keys(.index("tags", equals: "t7")) == ["n7"])
        #expect(try notes.keys(.index("tags", prefix: "t29")).count == 11)
        #expect(try notes.searchKeys("text", "7c1d 12") == ["n12"])
        // A write now is sealed at once.
        try notes.store(SecretNote(id: "early", day: 2, text: "written while plaintext remained", tags: ["early"]))
        try notes.delete(key: "n0")
        var expected = try Self.contents(t.db)

        // A write during the copy makes publishing catch up with it, and a write during the
        // catching up makes it catch up again.
        let writer = try t.db.bucket(Resident.self)
        nonisolated(unsafe) var writes = 0
        nonisolated(unsafe) var reports: [EncryptionProgress] = []
        try t.db.finishEncryption(batchSize: 40) { report in
            reports.append(report)
            if report.bucket == "Resident", report.copied > 0, writes == 0 || (writes == 1 && report.kept > 0) {
                writes += 1
                try? writer.store(Resident(id: "moved\(writes)", city: "Lund", age: 90 + writes))
            }
        }
        #expect(writes == 2)
        // Each write was caught up with: the copy kept what it had sealed and copied only the new object.
        #expect(reports.contains { $0.bucket == "Resident" && $0.kept == 50 }, "\(reports)")
        #expect(reports.contains { $0.bucket == "Resident" && $0.kept == 51 }, "\(reports)")
        expected.1 = try t.db.bucket(Resident.self).objects().sorted { $0.id < $1.id }
        #expect(expected.1.contains { $0.id == "moved2" })
        #expect(!t.db.isBeingEncrypted && t.db.isEncrypted)
        #expect(reports.last?.bucketsDone == 2 && reports.last?.bucketsTotal == 2)
        #expect(reports.contains { $0.bucket == "SecretNote" && $0.copied == 300 })
        #expect(try Self.contents(t.db) == expected)

        // The views opened before go on reading and writing, now with tokens.
        try notes.store(SecretNote(id: "late", day: 3, text: "after", tags: ["late", Self.secret]))
        #expect(try notes.keys(.index("tags", equals: "late")) == ["late"])
        #expect(try notes.keys(.index("tags", equals: IndexValue(Self.secret))).count == 300)
        #expect(try writer.keys(.index("city", equals: "Lund")).count == 27)
        #expect(try notes.searchKeys("text", "\"online secret\" 17") == ["n17"])
        #expect(throws: BuriError.self) { try notes.keys(.index("tags", prefix: "t29")) }
        #expect(try notes.keys(.index("day", in: IndexValue(5)...IndexValue(6))).count == 85)
        #expect(try t.db.check().problems.isEmpty)

        // Nothing stored is plaintext; a plaintext value is damage now.
        for (storedKey, value) in try storedEntries(t.db.storedEngine) {
            #expect(value.firstRange(of: Array(Self.secret.utf8)) == nil, "\(storedKey)")
            #expect(storedKey.firstRange(of: Array("Oslo".utf8)) == nil, "\(storedKey)")
            let marker = sealedValueMarker | (t.db.storedEngine.cachesOnlyCompressedBlocks ? paddedSealedValueFlag : 0)
            if storedKey.first == 0x02 || storedKey.first == 0x06 { #expect(value.first == marker) }
        }
        expected = try Self.contents(t.db)
        try t.reopen(options: encrypted(key))
        #expect(!t.db.isBeingEncrypted)
        #expect(try Self.contents(t.db) == expected)
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test(
        "stopped inside a bucket's copy and written meanwhile, the next call keeps what it sealed and copies the rest",
        arguments: Engine.allCases)
    func resumesInsideABucket(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try Self.fillPlaintext(t.db)
        let key = DatabaseKey.random()
        try t.reopen(options: Self.beginning(key))
        let base = t.db.storedEngine
        // A handle closed after the third batch of SecretNote (the second bucket): 120 notes staged.
        let first = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
        nonisolated(unsafe) var batches = 0
        do {
            try first.finishEncryption(batchSize: 40) { report in
                guard report.bucket == "SecretNote", report.copied > 0 else { return }
                batches += 1
                if batches == 3 { first.close() }
            }
            Issue.record("finishEncryption went on after its handle was closed")
        } catch {
            guard case .databaseClosed = error else { throw error }
        }
        #expect(batches == 3)
        // Written meanwhile, inside the staged range (the first 120 keys in byte order: n0, n1, n10,
        // n100…n109, n11, …, n19, n190…n199, n2, n20, n200…n205) and after it.
        let second = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
        #expect(second.isBeingEncrypted)
        #expect(try second.check().problems.isEmpty)
        let notes = try second.bucket(SecretNote.self)
        try notes.store(SecretNote(id: "n15", day: 1, text: "rewritten \(Self.secret)", tags: ["changed"]))
        try notes.delete(key: "n17")
        try notes.store(SecretNote(id: "n0a", day: 2, text: "inserted", tags: ["new"]))
        try notes.store(SecretNote(id: "n99", day: 3, text: "rewritten later", tags: ["later"]))
        let expected = try Self.contents(second)
        second.close()

        let third = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
        defer { third.close() }
        nonisolated(unsafe) var reports: [EncryptionProgress] = []
        try third.finishEncryption(batchSize: 40) { reports.append($0) }
        let kept = reports.filter { $0.bucket == "SecretNote" }.map(\.kept).max() ?? 0
        // Of the 120 staged, n15 was changed and n17 deleted: 118 kept. (On a shared engine the
        // stage is taken up because its owner's lease ended when the first handle closed.)
        #expect(kept == 118, "\(reports)")
        #expect(reports.filter { $0.bucket == "SecretNote" }.map(\.copied).max() == 300)
        #expect(!third.isBeingEncrypted)
        #expect(try Self.contents(third) == expected)
        #expect(try third.bucket(SecretNote.self).keys(.index("tags", equals: "changed")) == ["n15"])
        #expect(try third.bucket(SecretNote.self).keys(.index("tags", equals: "t17")).isEmpty)
        #expect(try third.bucket(SecretNote.self).searchKeys("text", "rewritten") == ["n15", "n99"])
        #expect(try third.check().problems.isEmpty)
        let marker = sealedValueMarker | (base.cachesOnlyCompressedBlocks ? paddedSealedValueFlag : 0)
        for (storedKey, value) in try storedEntries(base) {
            #expect(value.firstRange(of: Array(Self.secret.utf8)) == nil, "\(storedKey)")
            if storedKey.first == 0x02 || storedKey.first == 0x06 { #expect(value.first == marker) }
        }
        // The stage taken up became the bucket; no other is left behind.
        try third.purgeRetiredBuckets()
        #expect(try third.pendingPurges().isEmpty)
    }

    @Test("a numeric index not named plaintext stops it before anything is written", arguments: Engine.allCases)
    func numericIndexMustBeNamed(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(LeakyNote.self).store(LeakyNote(id: "a", age: 3))
        let before = try storedEntries(t.db.storedEngine)
        #expect(throws: BuriError.indexNotDeclaredPlaintext(bucket: "LeakyNote", index: "age")) {
            try t.reopen(options: Self.beginning(DatabaseKey.random()))
        }
        #expect(try storedEntries(try reopened(t).storedEngine) == before)
        try t.reopen(options: Self.beginning(DatabaseKey.random(), plaintext: ["age"]))
        try t.db.finishEncryption()
        #expect(try t.db.rawBucket(named: "LeakyNote").keys(.index("age", in: IndexValue(1)...IndexValue(5))) == ["a"])
    }

    /// Reopens `t` without a key (it must still be plaintext).
    func reopened(_ t: TestDatabase) throws -> BuriDatabase {
        try t.reopen(options: BuriOptions())
        return t.db
    }

    @Test("interrupted after each bucket, it opens with the key and finishes; without a key it does not open")
    func resumesAfterEachBucket() throws {
        let t = try TestDatabase(.leveldb)
        try Self.fillPlaintext(t.db, notes: 120)
        let expected = try Self.contents(t.db)
        let key = DatabaseKey.random()
        try t.reopen(options: Self.beginning(key))
        // Begun, not finished: the database needs the key, and reads everything with it.
        t.db.close()
        #expect(throws: BuriError.encryptionKeyRequired(path: t.path)) { try BuriDatabase(path: t.path) }
        try t.reopen(options: encrypted(key))
        #expect(t.db.isBeingEncrypted)
        #expect(try Self.contents(t.db) == expected)
        #expect(try t.db.check().problems.isEmpty)
        try t.db.finishEncryption()
        #expect(try Self.contents(t.db) == expected)
        // Running it again does nothing.
        try t.reopen(options: Self.beginning(key))
        #expect(!t.db.isBeingEncrypted)
        try t.db.finishEncryption()
        #expect(try Self.contents(t.db) == expected)
    }

    @Test("a compacted LevelDB database keeps no plaintext in any file once finished; before, it did")
    func noPlaintextLeftInFiles() throws {
        let t = try TestDatabase(.leveldb)
        try Self.fillPlaintext(t.db)
        try t.db.compact()
        #expect(!filesHolding(Array(Self.secret.utf8), under: t.directory.path).isEmpty)
        try t.reopen(options: Self.beginning(DatabaseKey.random()))
        try t.db.finishEncryption()
        t.db.close()
        #expect(filesHolding(Array(Self.secret.utf8), under: t.directory.path) == [])
        #expect(filesHolding(Array("Oslo".utf8), under: t.directory.path) == [])
    }
}
