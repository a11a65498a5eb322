import Buri
import BuriEncryption
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

/// A note whose text and tags are secret: both are indexed privately (tags exactly, text by its
/// words); its day is declared plaintext.
struct SecretNote: BuriSupport, Equatable {
    var id: String
    var day: Int
    var text: String
    var tags: [String]

    static let buri = BuriSchema<SecretNote>(
        key: \.id,
        indexes: [.numeric("day", \.day).plaintext(), .binary("tags", \.tags), .text("text", \.text)])
}

/// A numeric index not declared plaintext.
struct LeakyNote: BuriSupport, Equatable {
    var id: String
    var age: Int
    static let buri = BuriSchema<LeakyNote>(key: \.id, indexes: [.numeric("age", \.age)])
}

/// A unique private index.
struct Account: BuriSupport, Equatable {
    var id: String
    var email: String
    static let buri = BuriSchema<Account>(key: \.id, indexes: [.binary("email", \.email, unique: true)])
}

/// Every key and value an engine stores, as it stores them.
func storedEntries(_ engine: any StorageEngine) throws -> [[UInt8]: [UInt8]] {
    let cursor = try engine.snapshot().cursor(in: .all, reverse: false)
    var result: [[UInt8]: [UInt8]] = [:]
    while try cursor.next() { result[cursor.key] = try cursor.value }
    return result
}

/// A cheap scrypt cost for tests (the default takes 32 MiB and about 0.1 s per stretch).
let testCost = ScryptCost(logN: 10, r: 8, p: 1)

func encrypted(_ key: any DatabaseEncryption) -> BuriOptions {
    var options = BuriOptions()
    options.encryption = key
    return options
}

@Suite("Encryption at rest: sealed records and values, wrong keys, damage, on every engine")
struct EncryptedDatabaseTests {
    static let engines = Engine.allCases
    static let secret = "correct horse battery staple \u{1F40E} 0xDEADBEEF-secret"
    static let valueSecret = "the named value's own secret 42"

    static func fill(_ db: BuriDatabase) throws {
        let notes = try db.bucket(SecretNote.self)
        for i in 0..<200 {
            try notes.store(SecretNote(id: "n\(i)", day: i % 7, text: "\(secret) #\(i)", tags: [secret, "t\(i)"]))
        }
        try db.values.set(valueSecret, for: "config")
    }

    @Test("what is stored reads back, and the engine holds no plaintext secret", arguments: engines)
    func roundTripAndNoPlaintext(engine: Engine) throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(engine, options: encrypted(key))
        #expect(t.db.isEncrypted)
        try Self.fill(t.db)
        let notes = try t.db.bucket(SecretNote.self)
        #expect(try notes.object(forKey: "n5")?.text == "\(Self.secret) #5")
        #expect(try notes.count() == 200)
        let third = (0..<200).filter { $0 % 7 == 3 }.map { "n\($0)" }.sorted()
        #expect(try notes.keys(.index("day", equals: 3)).sorted() == third)
        // Private indexes answer exact matches: a tag, a word, a phrase, an IN list.
        #expect(try notes.keys(.index("tags", equals: "t5")) == ["n5"])
        #expect(try notes.keys(.index("tags", equals: IndexValue(Self.secret))).count == 200)
        #expect(try notes.keys(.index("tags", in: ["t1", "t2", "nope"])).sorted() == ["n1", "n2"])
        #expect(try notes.searchKeys("text", "horse battery").count == 200)
        #expect(try notes.searchKeys("text", "\"battery staple\" 17") == ["n17"])
        #expect(try notes.searchKeys("text", "staple NOT horse") == [])
        #expect(try notes.rankedSearchKeys("text", "17 OR 18", limit: 5).map(\.key).sorted() == ["n17", "n18"])
        #expect(try notes.keys(Query.index("day", equals: 3).and(.search("text", "horse"))).sorted() == third)
        #expect(try notes.count(.search("text", "horse").and(.index("tags", equals: "t9"))) == 1)
        #expect(try t.db.values.get(String.self, for: "config") == Self.valueSecret)
        // Inside a transaction, with a caught error: it sees its own writes, and the error leaves no trace.
        try t.db.write { tx in
            let txNotes = try tx.bucket(SecretNote.self)
            try txNotes.store(SecretNote(id: "tx", day: 1, text: Self.secret, tags: []))
            #expect(try txNotes.object(forKey: "tx")?.text == Self.secret)
            do {
                try txNotes.store(SecretNote(id: "", day: 1, text: "x", tags: []))
            } catch {}
        }
        #expect(try notes.object(forKey: "tx")?.text == Self.secret)
        try t.reopen()
        #expect(try t.db.bucket(SecretNote.self).object(forKey: "n199")?.tags == [Self.secret, "t199"])
        #expect(try t.db.check().problems.isEmpty)
        // Underneath, no stored value holds the secrets, and every record and value is sealed.
        let stored = try storedEntries(t.db.storedEngine)
        for (storedKey, value) in stored {
            #expect(value.firstRange(of: Array(Self.secret.utf8)) == nil)
            #expect(value.firstRange(of: Array(Self.valueSecret.utf8)) == nil)
            // Padded for its block to compress on LevelDB (which caches only compressed blocks).
            let marker = sealedValueMarker | (t.db.storedEngine.cachesOnlyCompressedBlocks ? paddedSealedValueFlag : 0)
            if storedKey.first == 0x02 || storedKey.first == 0x06 { #expect(value.first == marker) }
        }
        #expect(stored.keys.contains { $0.first == 0x02 })
    }

    @Test("no file of a compacted LevelDB database or of its backup holds a secret; a plaintext one does")
    func secretsAbsentFromFiles() throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(.leveldb, options: encrypted(key))
        try Self.fill(t.db)
        try t.db.compact()
        let backup = t.directory.appendingPathComponent("backup.buri").path
        try t.db.backup(to: backup)
        try Self.fill(t.db)  // again, so that the log holds them too
        for needle in [Self.secret, Self.valueSecret, "n5"] where needle != "n5" {
            #expect(filesHolding(Array(needle.utf8), under: t.directory.path) == [])
        }
        // The backup opens with the key, and is as sealed.
        let copy = try BuriDatabase(path: backup, options: encrypted(key))
        #expect(try copy.bucket(SecretNote.self).object(forKey: "n7")?.text == "\(Self.secret) #7")
        copy.close()
        #expect(throws: BuriError.encryptionKeyRequired(path: backup)) { try BuriDatabase(path: backup) }
        // The control: the same search finds the secret in a plaintext database's files.
        let plain = try TestDatabase(.leveldb)
        try Self.fill(plain.db)
        try plain.db.compact()
        #expect(!filesHolding(Array(Self.secret.utf8), under: plain.directory.path).isEmpty)
    }

    @Test("an etcd cluster's members never store a secret")
    func secretsAbsentFromEtcd() throws {
        guard Engine.allCases.contains(.etcd) else { return }
        let t = try TestDatabase(.etcd, options: encrypted(DatabaseKey.random()))
        try Self.fill(t.db)
        let directory = try #require(EtcdTestCluster.directory)
        #expect(filesHolding(Array(Self.secret.utf8), under: directory) == [])
        #expect(filesHolding(Array(Self.valueSecret.utf8), under: directory) == [])
    }

    @Test(
        "without a key, with a wrong key or passphrase, or a key for a plaintext database: a typed error, nothing written",
        arguments: engines)
    func wrongKeys(engine: Engine) throws {
        let key = try DatabaseKey(passphrase: "open sesame", cost: testCost)
        let t = try TestDatabase(engine, options: encrypted(key))
        try Self.fill(t.db)
        let before = try storedEntries(t.db.storedEngine)
        let base = t.db.storedEngine
        #expect(throws: BuriError.encryptionKeyRequired(path: base.location)) {
            try BuriDatabase(engine: base, closesEngine: false)
        }
        for wrong in [
            try DatabaseKey(passphrase: "open sesame!", cost: testCost),
            try DatabaseKey(passphrase: "Open sesame", cost: testCost), DatabaseKey.random(),
        ] as [any DatabaseEncryption] {
            #expect {
                try BuriDatabase(engine: base, options: encrypted(wrong), closesEngine: false)
            } throws: { error in
                guard case BuriError.wrongEncryptionKey(let path, _) = error else { return false }
                return path == base.location
            }
        }
        #expect(try storedEntries(base) == before)
        // The right passphrase again (a new key object: stretched anew from the stored salt).
        let again = try BuriDatabase(
            engine: base, options: encrypted(try DatabaseKey(passphrase: "open sesame", cost: testCost)),
            closesEngine: false)
        #expect(try again.bucket(SecretNote.self).count() == 200)
        // A key for a database that is not encrypted.
        let plain = try TestDatabase(engine)
        try plain.db.values.set(1, for: "x")
        let plainBase = plain.db.storedEngine
        let plainBefore = try storedEntries(plainBase)
        #expect(throws: BuriError.notEncrypted(path: plainBase.location)) {
            try BuriDatabase(engine: plainBase, options: encrypted(key), closesEngine: false)
        }
        #expect(try storedEntries(plainBase) == plainBefore)
        #expect(!plain.db.isEncrypted)
    }

    @Test("a numeric index not declared plaintext is refused, and nothing is written", arguments: engines)
    func undeclaredNumericIndexRefused(engine: Engine) throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        let before = try storedEntries(t.db.storedEngine)
        #expect(throws: BuriError.indexNotDeclaredPlaintext(bucket: "LeakyNote", index: "age")) {
            try t.db.bucket(LeakyNote.self).store(LeakyNote(id: "a", age: 41))
        }
        #expect(throws: BuriError.indexNotDeclaredPlaintext(bucket: "raw", index: "pair")) {
            try t.db.createBucket(
                named: "raw", indexes: [IndexDefinition(id: 0, name: "pair", components: [.binary, .numeric])])
        }
        #expect(try storedEntries(t.db.storedEngine) == before)
        // Declared plaintext, or on a plaintext database, the same index is fine.
        try t.db.createBucket(
            named: "raw",
            indexes: [IndexDefinition(id: 0, name: "pair", components: [.binary, .numeric], plaintext: true)])
        let plain = try TestDatabase(engine)
        try plain.db.bucket(LeakyNote.self).store(LeakyNote(id: "a", age: 41))
    }

    @Test(
        "a private index refuses ranges, prefixes, sorting, grouping and word prefixes; a unique one still holds",
        arguments: engines)
    func privateIndexLimits(engine: Engine) throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        try Self.fill(t.db)
        let notes = try t.db.bucket(SecretNote.self)
        func refused(
            _ operation: String, index: String = "tags", sourceLocation: SourceLocation = #_sourceLocation,
            _ body: () throws -> Void
        ) {
            #expect(sourceLocation: sourceLocation) {
                try body()
            } throws: { error in
                guard case BuriError.privateIndex(let bucket, let name, let what) = error else { return false }
                return bucket == "SecretNote" && name == index && what.contains(operation)
            }
        }
        refused("range") { _ = try notes.keys(.index("tags", in: IndexValue("a")...IndexValue("z"))) }
        refused("prefix") { _ = try notes.keys(.index("tags", prefix: "t1")) }
        refused("order") { _ = try notes.keys(Query.all.order(by: "tags")) }
        refused("grouping") { _ = try notes.aggregate("day", groupedBy: "tags") }
        refused("prefix", index: "text") { _ = try notes.searchKeys("text", "hors*") }
        refused("prefix", index: "text") { _ = try notes.keys(.search("text", "\"battery sta\"*")) }
        refused("prefix", index: "text") { _ = try notes.rankedSearchKeys("text", "bat*", limit: 3) }
        // The plaintext index still answers ranges and sorts.
        #expect(try notes.keys(.index("day", in: IndexValue(5)...IndexValue(6))).count == 56)
        // A unique private index: a second holder of one value is refused, naming the holder.
        let accounts = try t.db.bucket(Account.self)
        try accounts.store(Account(id: "a", email: "x@example.org"))
        #expect {
            try accounts.store(Account(id: "b", email: "x@example.org"))
        } throws: { error in
            guard case BuriError.uniqueViolation(let bucket, let index, _, let holder) = error else { return false }
            return bucket == "Account" && index == "email" && holder == "a"
        }
        try accounts.store(Account(id: "b", email: "X@example.org"))
        #expect(try accounts.keys(.index("email", equals: "X@example.org")) == ["b"])
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test(
        "a flipped byte, or records swapped between keys or buckets: a typed error naming bucket and key, listed by check",
        arguments: engines)
    func tamperedRecords(engine: Engine) throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        try Self.fill(t.db)
        try t.db.bucket(SecretNote.self, named: "Other").store(SecretNote(id: "o1", day: 1, text: "o", tags: []))
        let base = t.db.storedEngine
        let stored = try storedEntries(base)
        let records = stored.keys.filter { $0.first == 0x02 }.sorted { $0.lexicographicallyPrecedes($1) }
        func key(of object: String, bucketSuffix: Bool = false) throws -> [UInt8] {
            try #require(
                records.first {
                    $0.count > 5 && String(decoding: $0[5...], as: UTF8.self) == object && (!bucketSuffix || true)
                })
        }
        let n1 = try key(of: "n1"), n2 = try key(of: "n2"), n3 = try key(of: "n3"), o1 = try key(of: "o1")
        let batch = base.makeBatch()
        var flipped = try #require(stored[n1])
        flipped[flipped.count / 2] ^= 0x01
        batch.put(n1, flipped)
        batch.put(n2, try #require(stored[n3]))  // n3's sealed value under n2's key
        batch.put(n3, try #require(stored[o1]))  // another bucket's under n3's
        try base.commit(batch, conditions: nil, sync: false)
        let notes = try t.db.bucket(SecretNote.self)
        for damaged in ["n1", "n2", "n3"] {
            #expect {
                try notes.object(forKey: damaged)
            } throws: { error in
                guard case BuriError.authenticationFailed(let bucket, let key, _) = error else { return false }
                return bucket == "SecretNote" && key == damaged
            }
        }
        #expect(try notes.object(forKey: "n4")?.id == "n4")
        // A scan meets the damage and fails; it never returns the others as if complete.
        #expect(throws: BuriError.self) { try notes.objects(.index("day", equals: 1)) }
        let report = try t.db.check()
        let damaged = report.problems.filter { $0.kind == .corruptRecord }.compactMap(\.key).sorted()
        #expect(damaged == ["n1", "n2", "n3"])
        #expect(report.problems.allSatisfy { $0.detail.contains("authentication") || $0.kind != .corruptRecord })
        // A named value swapped into another name fails as well.
        let values = stored.keys.filter { $0.first == 0x06 }
        #expect(values.count == 1)
        try t.db.values.set("second", for: "other")
        let swap = base.makeBatch()
        swap.put(Array([0x06] + Array("other".utf8)), try #require(stored[values[0]]))
        try base.commit(swap, conditions: nil, sync: false)
        #expect(throws: BuriError.self) { try t.db.values.get(String.self, for: "other") }
        #expect(try t.db.values.get(String.self, for: "config") == Self.valueSecret)
    }

    @Test("a batched read opens every record it returns", arguments: engines)
    func batchedReads(engine: Engine) throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        let notes = try t.db.bucket(SecretNote.self)
        try notes.store(SecretNote(id: "a", day: 1, text: Self.secret, tags: []))
        #expect(try notes.objects(forKeys: ["a", "b"]).map { $0?.text } == [Self.secret, nil])
        #expect(try notes.page(.all, size: 10).items.map(\.text) == [Self.secret])
    }

    @Test("a repair of the files (no key) keeps every sealed record")
    func fileRepairKeepsSealedRecords() throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(.leveldb, options: encrypted(key))
        try Self.fill(t.db)
        t.db.close()
        // Without the key, repair salvages the files and says that checking them needs the key.
        #expect(throws: BuriError.encryptionKeyRequired(path: t.path)) { try BuriDatabase.repair(path: t.path) }
        _ = try BuriDatabase.repair(path: t.path, options: encrypted(key))
        let db = try BuriDatabase(path: t.path, options: encrypted(key))
        defer { db.close() }
        #expect(try db.bucket(SecretNote.self).count() == 200)
        #expect(try db.check().problems.isEmpty)
        #expect(try db.values.get(String.self, for: "config") == Self.valueSecret)
    }
}

@Suite("Encryption at rest: change streams carry opened objects")
struct EncryptedDatabaseObservationTests {
    @Test("another client's commit reaches a change stream opened, with its object", arguments: Engine.allCases)
    func changesAreOpened(engine: Engine) async throws {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        let notes = try t.db.bucket(SecretNote.self)
        let stream = try notes.changes(includingObjects: true)
        let writer = try t.client(1).bucket(SecretNote.self)
        try await writer.store(SecretNote(id: "a", day: 1, text: EncryptedDatabaseTests.secret, tags: ["x"]))
        let first = try await withThrowingTaskGroup(of: BucketChange<SecretNote>?.self) { group in
            group.addTask {
                for try await change in stream { return change }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            let result = try await group.next() ?? nil
            group.cancelAll()
            return result
        }
        let change = try #require(first, "no change arrived within 60 s")
        guard case .stored(let key, let object) = try #require(change.changes.first) else {
            Issue.record("not a store: \(change)")
            return
        }
        #expect(key == "a")
        #expect(object?.text == EncryptedDatabaseTests.secret)
    }
}

/// The README's encryption example, run as written.
struct Diagnosis: BuriSupport {
    var id: String, patient: String, notes: String, year: Int
    static let buri = BuriSchema<Diagnosis>(
        key: \.id,
        indexes: [.binary("patient", \.patient), .text("notes", \.notes), .numeric("year", \.year).plaintext()])
}

@Suite("Encryption at rest: the README's example")
struct EncryptionReadmeTests {
    @Test("the README shows this code, and it runs")
    func readmeExample() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "buri-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyPath = directory.appendingPathComponent("clinic.key").path
        FileManager.default.createFile(atPath: keyPath, contents: Data((0..<32).map { UInt8($0 * 7 & 0xFF) }))
        let previous = FileManager.default.currentDirectoryPath
        FileManager.default.changeCurrentDirectoryPath(directory.path)
        defer { FileManager.default.changeCurrentDirectoryPath(previous) }
        var options = BuriOptions()
        options.encryption = try DatabaseKey(contentsOfFile: keyPath)  // 32 random bytes; or DatabaseKey(passphrase:)
        let db = try BuriDatabase(path: "clinic.buri", options: options)
        defer { db.close() }
        let diagnoses = try db.bucket(Diagnosis.self)
        try diagnoses.store(Diagnosis(id: "d1", patient: "Ada Lovelace", notes: "mild asthma", year: 2026))
        let hers = try diagnoses.keys(.index("patient", equals: "Ada Lovelace"))  // exact: ["d1"]
        let asthma = try diagnoses.searchKeys("notes", "asthma")  // words and phrases
        let recent = try diagnoses.keys(.index("year", in: 2020...))  // plaintext: ranges too
        #expect(hers == ["d1"] && asthma == ["d1"] && recent == ["d1"])
        #expect(filesHolding(Array("Ada Lovelace".utf8), under: directory.path + "/clinic.buri") == [])
        #expect(filesHolding(Array("asthma".utf8), under: directory.path + "/clinic.buri") == [])

        // The README holds the same lines.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        for line in [
            "options.encryption = try DatabaseKey(contentsOfFile: keyPath)  // 32 random bytes; or DatabaseKey(passphrase:)",
            "let hers = try diagnoses.keys(.index(\"patient\", equals: \"Ada Lovelace\"))  // exact: [\"d1\"]",
            "let asthma = try diagnoses.searchKeys(\"notes\", \"asthma\")                  // words and phrases",
            "let recent = try diagnoses.keys(.index(\"year\", in: 2020...))              // plaintext: ranges too",
            "indexes: [.binary(\"patient\", \\.patient), .text(\"notes\", \\.notes), .numeric(\"year\", \\.year).plaintext()])",
        ] {
            #expect(readme.contains(line), "README.md lacks: \(line)")
        }
    }
}
