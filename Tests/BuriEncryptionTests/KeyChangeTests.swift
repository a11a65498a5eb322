import Buri
import BuriEncryption
import BuriStorage
import BuriTestSupport
import Testing

/// The stored key of the encryption header: 00 "encryption".
let encryptionHeaderKey: [UInt8] = [0x00] + Array("encryption".utf8)

/// A key that makes version 1 headers, as format 8 did before key changes (the key itself is the
/// data master), and cannot change keys (the protocol's default `rekeyedHeader`).
struct Version1Key: DatabaseEncryption {
    let key: DatabaseKey

    func newHeader() throws(EncryptionFailure) -> [UInt8] {
        func salt() -> [UInt8] { (0..<16).map { _ in UInt8.random(in: 0...255) } }
        return try key.version1Header(databaseSalt: salt(), scryptSalt: salt())
    }

    func unlock(header: [UInt8]) throws(EncryptionFailure) -> any DatabaseCipher { try key.unlock(header: header) }
}

/// A key whose "changed" header is a new database's: other data keys, which would leave every
/// sealed value unreadable. The key change must refuse it.
struct ForgetfulKey: DatabaseEncryption {
    let key: DatabaseKey

    func newHeader() throws(EncryptionFailure) -> [UInt8] { try key.newHeader() }
    func unlock(header: [UInt8]) throws(EncryptionFailure) -> any DatabaseCipher { try key.unlock(header: header) }
    func rekeyedHeader(_ header: [UInt8], from old: any DatabaseEncryption) throws(EncryptionFailure) -> [UInt8] {
        try key.newHeader()
    }
}

@Suite("Changing the key: one header rewritten, every record kept, the old key refused, on every engine")
struct KeyChangeTests {
    static let engines = Engine.allCases

    /// Everything `EncryptedDatabaseTests.fill` stored reads back through `db`: records, the
    /// named value, the plaintext index and the private ones (exact values, words, phrases).
    static func expectReadable(
        _ db: BuriDatabase, count: Int = 200, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let secret = EncryptedDatabaseTests.secret
        let notes = try db.bucket(SecretNote.self)
        #expect(try notes.count() == count, sourceLocation: sourceLocation)
        #expect(try notes.object(forKey: "n5")?.text == "\(secret) #5", sourceLocation: sourceLocation)
        #expect(try notes.keys(.index("day", equals: 3)).count == 29, sourceLocation: sourceLocation)
        #expect(try notes.keys(.index("tags", equals: "t5")) == ["n5"], sourceLocation: sourceLocation)
        #expect(
            try notes.keys(.index("tags", equals: IndexValue(secret))).count == 200, sourceLocation: sourceLocation)
        #expect(try notes.searchKeys("text", "\"battery staple\" 17") == ["n17"], sourceLocation: sourceLocation)
        #expect(
            try db.values.get(String.self, for: "config") == EncryptedDatabaseTests.valueSecret,
            sourceLocation: sourceLocation)
        #expect(try db.check().problems.isEmpty, sourceLocation: sourceLocation)
    }

    /// Whether opening `engine` with `key` fails with `wrongEncryptionKey` naming its location.
    static func refuses(_ key: any DatabaseEncryption, _ engine: any StorageEngine) -> Bool {
        do {
            let db = try BuriDatabase(engine: engine, options: encrypted(key), closesEngine: false)
            db.close()
            return false
        } catch BuriError.wrongEncryptionKey(let path, _) {
            return path == engine.location
        } catch {
            return false
        }
    }

    /// The header stored in `engine`.
    static func storedHeader(_ engine: any StorageEngine) throws -> [UInt8] {
        try #require(try storedEntries(engine)[encryptionHeaderKey])
    }

    @Test("a new encrypted database gets a version 2 header", arguments: engines)
    func newDatabasesGetVersion2(engine: Engine) throws {
        for key in [DatabaseKey.random(), try DatabaseKey(passphrase: "v2", cost: testCost)] {
            let t = try TestDatabase(engine, options: encrypted(key))
            let header = try Self.storedHeader(t.db.storedEngine)
            #expect(Array(header.prefix(8)) == Array("BURIKEY".utf8) + [2])
            #expect(header.count == (key.description.contains("passphrase") ? 120 : 101))
        }
    }

    @Test(
        "raw key to raw key, to passphrase, to raw key on one handle: only the header changes, everything reads with the new key",
        arguments: engines)
    func changesKeepEverything(engine: Engine) throws {
        let first = DatabaseKey.random()
        let t = try TestDatabase(engine, options: encrypted(first))
        try EncryptedDatabaseTests.fill(t.db)
        let base = t.db.storedEngine
        let keys: [DatabaseKey] = [
            DatabaseKey.random(), try DatabaseKey(passphrase: "the second key \u{1F511}", cost: testCost),
            DatabaseKey.random(),
        ]
        var old: DatabaseKey = first
        for (step, new) in keys.enumerated() {
            let before = try storedEntries(base)
            try t.db.changeEncryptionKey(to: new)
            let after = try storedEntries(base)
            // One key rewritten: the header, still version 2, with the same database salt.
            #expect(Set(after.keys) == Set(before.keys), "step \(step)")
            #expect(after.filter { before[$0.key] != $0.value }.map(\.key) == [encryptionHeaderKey], "step \(step)")
            let header = try Self.storedHeader(base)
            #expect(header[7] == 2, "step \(step)")
            let saltAt = header[8] == 2 ? 44 : 25
            let oldHeader = try #require(before[encryptionHeaderKey])
            let oldSaltAt = oldHeader[8] == 2 ? 44 : 25
            #expect(Array(header[saltAt..<saltAt + 16]) == Array(oldHeader[oldSaltAt..<oldSaltAt + 16]))
            // The old key is refused, and writes nothing.
            #expect(Self.refuses(old, base), "step \(step)")
            #expect(try storedEntries(base) == after, "step \(step)")
            // The new key opens everything.
            let reopened = try BuriDatabase(engine: base, options: encrypted(new), closesEngine: false)
            try Self.expectReadable(reopened)
            reopened.close()
            // The handle that changed the key reads and writes on; what it writes opens with the new key.
            try Self.expectReadable(t.db)
            try t.db.values.set("written after change \(step)", for: "after")
            let notes = try t.db.bucket(SecretNote.self)
            try notes.store(SecretNote(id: "late\(step)", day: 1, text: "late \(step)", tags: ["late"]))
            #expect(try notes.delete(key: "late\(step)"))
            let again = try BuriDatabase(engine: base, options: encrypted(new), closesEngine: false)
            #expect(try again.values.get(String.self, for: "after") == "written after change \(step)")
            again.close()
            old = new
        }
        // Every key the database had is refused but the last.
        for key in [first] + keys.dropLast() { #expect(Self.refuses(key, base)) }
    }

    @Test(
        "a version 1 header (format 8 before key changes) changes to version 2 and keeps its records",
        arguments: engines)
    func version1HeadersChange(engine: Engine) throws {
        for first in [DatabaseKey.random(), try DatabaseKey(passphrase: "version one", cost: testCost)] {
            let t = try TestDatabase(engine, options: encrypted(Version1Key(key: first)))
            try EncryptedDatabaseTests.fill(t.db)
            let base = t.db.storedEngine
            let v1 = try Self.storedHeader(base)
            #expect(v1[7] == 1 && (v1.count == 57 || v1.count == 76))
            // Opened with the key itself, as an app does.
            let db = try BuriDatabase(engine: base, options: encrypted(first), closesEngine: false)
            defer { db.close() }
            try Self.expectReadable(db)
            let new = try DatabaseKey(passphrase: "a new passphrase", cost: testCost)
            try db.changeEncryptionKey(to: new)
            let v2 = try Self.storedHeader(base)
            #expect(v2[7] == 2 && v2.count == 120)
            #expect(Self.refuses(first, base))
            let reopened = try BuriDatabase(engine: base, options: encrypted(new), closesEngine: false)
            try Self.expectReadable(reopened)
            reopened.close()
            try Self.expectReadable(db)
        }
    }

    @Test(
        "a key that cannot change, a key change from another kind of key, or one that loses the data keys: refused, nothing written"
    )
    func refusedChanges() throws {
        let key = DatabaseKey.random()
        // Opened with a conformer that keeps the protocol's default: it cannot change keys.
        let t = try TestDatabase(.memory, options: encrypted(Version1Key(key: key)))
        try EncryptedDatabaseTests.fill(t.db)
        let base = t.db.storedEngine
        let before = try storedEntries(base)
        #expect {
            try t.db.changeEncryptionKey(to: Version1Key(key: DatabaseKey.random()))
        } throws: { error in
            guard case BuriError.invalidEncryptionKey(let reason) = error else { return false }
            return reason.hasPrefix("Version1Key cannot change keys")
        }
        // A DatabaseKey takes over only from a DatabaseKey.
        #expect {
            try t.db.changeEncryptionKey(to: DatabaseKey.random())
        } throws: { error in
            guard case BuriError.invalidEncryptionKey(let reason) = error else { return false }
            return reason.contains("not a DatabaseKey")
        }
        #expect(try storedEntries(base) == before)
        // A header for other data keys is caught before it is written.
        let db = try BuriDatabase(engine: base, options: encrypted(key), closesEngine: false)
        defer { db.close() }
        #expect {
            try db.changeEncryptionKey(to: ForgetfulKey(key: DatabaseKey.random()))
        } throws: { error in
            guard case BuriError.invalidEncryptionKey(let reason) = error else { return false }
            return reason.contains("other data keys") && reason.contains("nothing was written")
        }
        #expect(try storedEntries(base) == before)
        try Self.expectReadable(db)
    }

    @Test("a plaintext database has no key to change", arguments: engines)
    func plaintextIsNotEncrypted(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(1, for: "x")
        let before = try storedEntries(t.db.storedEngine)
        #expect(throws: BuriError.notEncrypted(path: t.db.path)) {
            try t.db.changeEncryptionKey(to: DatabaseKey.random())
        }
        #expect(try storedEntries(t.db.storedEngine) == before)
    }

    @Test("another client of a shared engine keeps reading; its own key change fails with the old key")
    func otherClients() throws {
        for engine in Self.engines where engine == .shared || engine == .etcd {
            let first = DatabaseKey.random()
            let t = try TestDatabase(engine, options: encrypted(first))
            try EncryptedDatabaseTests.fill(t.db)
            let other = try t.client(1)
            let new = DatabaseKey.random()
            try t.db.changeEncryptionKey(to: new)
            // The data keys did not change: the other client reads and writes on.
            try Self.expectReadable(other)
            try other.values.set("from the other client", for: "other")
            #expect(try t.db.values.get(String.self, for: "other") == "from the other client")
            // But the key it holds no longer opens the header: its key change is refused.
            let before = try storedEntries(t.db.storedEngine)
            #expect {
                try other.changeEncryptionKey(to: DatabaseKey.random())
            } throws: { error in
                guard case BuriError.wrongEncryptionKey(_, let reason) = error else { return false }
                return reason.contains("no longer opens")
            }
            #expect(try storedEntries(t.db.storedEngine) == before)
            if other !== t.db { other.close() }
        }
    }

    @Test("the handle closed: a typed error, nothing written")
    func closedHandle() throws {
        let key = DatabaseKey.random()
        let t = try TestDatabase(.memory, options: encrypted(key))
        let db = try BuriDatabase(engine: t.db.storedEngine, options: encrypted(key), closesEngine: false)
        db.close()
        #expect(throws: BuriError.databaseClosed(path: db.path)) {
            try db.changeEncryptionKey(to: DatabaseKey.random())
        }
    }
}
