import Foundation
import Synchronization
import Testing
@testable import Buri

/// Version 0 of a contact: `name` and an `age` kept as text.
struct ContactV0: BuriSupport, Equatable {
    var id: String
    var name: String
    var age: String
    static let buri = BuriSchema<ContactV0>(key: \.id, indexes: [.binary("name", \.name)], bucket: "Contact")
}

/// Version 1: `name` renamed to `fullName`.
struct ContactV1: BuriSupport, Equatable {
    var id: String
    var fullName: String
    var age: String
    static let buri = BuriSchema<ContactV1>(
        key: \.id, indexes: [.binary("name", \.fullName)], bucket: "Contact", schemaVersion: 1,
        migrations: [.from(0) { $0.rename("name", to: "fullName") }])
}

/// Version 2: `age` an integer (indexed, unique per `email`), a new `email` filled from the name.
struct ContactV2: BuriSupport, Equatable {
    var id: String
    var fullName: String
    var age: Int
    var email: String

    static let buri = BuriSchema<ContactV2>(
        key: \.id,
        indexes: [.binary("name", \.fullName), .numeric("age", \.age), .binary("email", \.email, unique: true)],
        bucket: "Contact", schemaVersion: 2,
        migrations: [
            .from(0) { $0.rename("name", to: "fullName") },
            .from(1) { record in
                let age = record["age"]?.stringValue.flatMap { Int64($0) } ?? -1
                record["age"] = .int(age)
                let name = record["fullName"]?.stringValue ?? ""
                record.fill("email", with: .text("\(name.lowercased())@example.com"))
            },
        ])
}

/// A version newer than every type above.
struct ContactV9: BuriSupport {
    var id: String
    // The same index as the older versions, so opening either keeps the bucket's indexes.
    static let buri = BuriSchema<ContactV9>(
        key: \.id, indexes: [.binary("name", \.id)], bucket: "Contact", schemaVersion: 9)
}

struct RefusedStep: Error {}

@Suite("Migrations: older records upgrade when read, migrateAll upgrades them all")
struct MigrationTests {
    static func v0(_ i: Int) -> ContactV0 {
        ContactV0(id: String(format: "c%04d", i), name: "Name\(i)", age: "\(i % 90)")
    }
    static func v2(_ i: Int) -> ContactV2 {
        ContactV2(id: String(format: "c%04d", i), fullName: "Name\(i)", age: i % 90, email: "name\(i)@example.com")
    }

    @Test(arguments: Engine.allCases) func olderRecordsReadUpgradedThroughEveryPath(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let n = engine == .etcd ? 300 : 2_500  // above the parallel decoding threshold locally
        try t.db.bucket(ContactV0.self).store((0..<n).map(Self.v0))
        // A few at version 1, written by the code of then.
        try t.db.bucket(ContactV1.self).store(ContactV1(id: "c0001", fullName: "Name1", age: "1"))
        let contacts = try t.db.bucket(ContactV2.self)
        let all = (0..<n).map(Self.v2)
        #expect(try contacts.object(forKey: "c0007") == Self.v2(7))
        #expect(try contacts.object(forKey: "c0001") == Self.v2(1))
        #expect(try contacts.objects() == all)
        #expect(try contacts.lazyObjects().map { $0 } == all)
        #expect(try contacts.page(.all, size: 10).items == Array(all.prefix(10)))
        let cursor = try contacts.cursor(.index("name", equals: "Name5"))
        #expect(try cursor.next() == Self.v2(5))
        // Indexes the new version declares were built from the upgraded objects.
        #expect(Set(try contacts.keys(.index("age", equals: 30))) == Set(all.filter { $0.age == 30 }.map(\.id)))
        #expect(try contacts.keys(.index("email", equals: "name9@example.com")) == ["c0009"])
        // Reading does not write: the records keep their version until stored.
        #expect(try contacts.raw.record(forKey: "c0007")?.schemaVersion == 0)
        try contacts.store(Self.v2(7))
        #expect(try contacts.raw.record(forKey: "c0007")?.schemaVersion == 2)
        #expect(try t.db.check().problems.isEmpty)
        // Inside a transaction too.
        let inside = try t.db.write { tx in try tx.bucket(ContactV2.self).object(forKey: "c0008") }
        #expect(inside == Self.v2(8))
    }

    @Test(arguments: Engine.allCases) func migrateAllUpgradesEveryRecordInBatchesAndIsIdempotent(engine: Engine) throws
    {
        let t = try TestDatabase(engine)
        let n = engine == .etcd ? 120 : 1_050
        try t.db.bucket(ContactV0.self).store((0..<n).map(Self.v0))
        let contacts = try t.db.bucket(ContactV2.self)
        let steps = Mutex<[Int]>([])
        let upgraded = try contacts.migrateAll(batchSize: 100) { done in steps.withLock { $0.append(done) } }
        #expect(upgraded == n)
        #expect(steps.withLock { $0 } == Array(stride(from: 100, to: n, by: 100)) + [n])
        for key in try contacts.keys() {
            #expect(try contacts.raw.record(forKey: key)?.schemaVersion == 2, "\(key)")
        }
        #expect(try contacts.objects() == (0..<n).map(Self.v2))
        #expect(try t.db.check().problems.isEmpty)
        // Again: nothing left to do (a resumed run after a kill does only what is left).
        #expect(try contacts.migrateAll(batchSize: 7) == 0)
    }

    @Test(arguments: Engine.allCases) func aUniqueIndexAMigrationWouldBreakStopsItConsistently(engine: Engine) throws {
        let t = try TestDatabase(engine)
        // Two names that lower-case alike: their filled emails collide in the unique index.
        var old = (0..<30).map(Self.v0)
        old.append(ContactV0(id: "z1", name: "NAME3", age: "3"))
        try t.db.bucket(ContactV0.self).store(old)
        // Declaring the index builds it from upgraded objects: refused, naming both keys.
        #expect {
            _ = try t.db.bucket(ContactV2.self)
        } throws: { error in
            guard case .uniqueViolation(let bucket, let index, _, _) = error as? BuriError else { return false }
            let text = "\(error)"
            return bucket == "Contact" && index == "email" && text.contains("c0003") && text.contains("z1")
        }
        // The bucket is as it was: the old type still reads every record.
        #expect(try t.db.bucket(ContactV0.self).objects().count == 31)
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test(arguments: Engine.allCases) func newerRecordsAndFailingStepsAreTypedErrors(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(ContactV0.self).store([Self.v0(1)])
        try t.db.bucket(ContactV9.self).store(ContactV9(id: "c9999"))
        let contacts = try t.db.bucket(ContactV1.self)
        #expect {
            try contacts.object(forKey: "c9999")
        } throws: { error in
            guard case .recordFromNewerSchema(let bucket, let key, let stored, let known) = error as? BuriError else {
                return false
            }
            return bucket == "Contact" && key == "c9999" && stored == 9 && known == 1
        }
        #expect(throws: BuriError.self) { try contacts.objects() }
        // A step that throws: typed, naming bucket, key and version; nothing written.
        struct Refusing: BuriSupport {
            var id: String
            static let buri = BuriSchema<Refusing>(
                key: \.id, bucket: "Contact", schemaVersion: 1,
                migrations: [.from(0) { record in if record.key == "c0001" { throw RefusedStep() } }])
        }
        let refusing = try t.db.bucket(Refusing.self)
        #expect {
            try refusing.object(forKey: "c0001")
        } throws: { error in
            guard case .migrationFailed(let bucket, let key, let from, _) = error as? BuriError else { return false }
            return bucket == "Contact" && key == "c0001" && from == 0
        }
        #expect(throws: BuriError.self) { try refusing.migrateAll() }
        #expect(try t.db.rawBucket(named: "Contact").record(forKey: "c0001")?.schemaVersion == 0)
    }

    /// A copy of fixture database `name` (in Tests/BuriTests/Fixtures, written once by the schema
    /// of its version and committed; opening a copy leaves the fixture unchanged).
    static func fixture(_ name: String) throws -> (TemporaryDirectory, String) {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(name).leveldb")
        let directory = TemporaryDirectory("buri-fixture")
        let path = directory.path("db")
        try FileManager.default.copyItem(atPath: source.path, toPath: path)
        return (directory, path)
    }

    @Test func upgradeChainsFromStoredFixtureDatabases() throws {
        // Version 0 only: 40 contacts and one whose key, name and age are unusual.
        do {
            let (directory, path) = try Self.fixture("contacts-v0")
            defer { _ = directory }
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            let contacts = try db.bucket(ContactV2.self)
            #expect(try contacts.object(forKey: "c0012") == Self.v2(12))
            let odd = try #require(try contacts.object(forKey: "\u{E9}t\u{E9}"))
            #expect(odd.fullName == "\u{C9}t\u{E9}" && odd.age == -1 && odd.email == "\u{E9}t\u{E9}@example.com")
            // The precomposed key is not the decomposed one.
            #expect(try contacts.object(forKey: "e\u{301}te\u{301}") == nil)
            #expect(try contacts.migrateAll(batchSize: 16) == 41)
            #expect(try contacts.objects().filter { $0.id.hasPrefix("c") } == (0..<40).map(Self.v2))
            #expect(try db.check().problems.isEmpty)
        }
        // Versions 0 and 1 side by side: each upgraded by the steps from its own version.
        do {
            let (directory, path) = try Self.fixture("contacts-v1")
            defer { _ = directory }
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            let raw = try db.rawBucket(named: "Contact")
            #expect(try raw.record(forKey: "c0005")?.schemaVersion == 0)
            #expect(try raw.record(forKey: "c0025")?.schemaVersion == 1)
            let contacts = try db.bucket(ContactV2.self)
            #expect(try contacts.objects() == (0..<40).map(Self.v2))
            #expect(try contacts.keys(.index("age", in: 30...35)) == (30...35).map { String(format: "c%04d", $0) })
            #expect(try contacts.migrateAll() == 40)
            for key in try contacts.keys() { #expect(try raw.record(forKey: key)?.schemaVersion == 2) }
            #expect(try db.check().problems.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func filtersSeeOlderRecordsUpgraded(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(ContactV0.self).store((0..<30).map(Self.v0))
        let contacts = try t.db.bucket(ContactV2.self)
        // The bucket's own type: upgraded by its migrations, the renamed field read under its new name.
        let named = try contacts.keys(Query.filter { (c: ContactV2) in c.fullName.hasSuffix("7") })
        #expect(named == ["c0007", "c0017", "c0027"])
        // A projection of another type: upgraded too (its steps are Swift code here, so only the
        // type that declares them can upgrade; a projection gets a typed error rather than a guess).
        struct Projection: Decodable { var fullName: String }
        #expect(throws: BuriError.self) {
            try contacts.keys(Query.filter { (p: Projection) in p.fullName.isEmpty })
        }
        try contacts.migrateAll()
        #expect(try contacts.count(Query.filter { (p: Projection) in p.fullName.hasPrefix("Name1") }) == 11)
    }

    @Test func migrationRecordComparesFieldNamesAsBytes() {
        var record = MigrationRecord(
            fields: [CBORMapEntry(key: "\u{E9}", value: 1), CBORMapEntry(key: "e\u{301}", value: 2)], key: "k")
        #expect(record["\u{E9}"] == 1 && record["e\u{301}"] == 2)
        record.rename("e\u{301}", to: "x")
        #expect(record["\u{E9}"] == 1 && record["x"] == 2 && record["e\u{301}"] == nil)
        record.fill("x", with: 9)
        record.fill("y", with: 3)
        record.remove("\u{E9}")
        #expect(record.fields == [CBORMapEntry(key: "x", value: 2), CBORMapEntry(key: "y", value: 3)])
    }
}

/// The README's transient-property example: `CodingKeys` leaves `thumbnail` out of the record.
struct Photo: BuriSupport, Equatable {
    var id: String
    var title: String
    var thumbnail: [UInt8] = []  // transient: rebuilt on demand, never stored

    enum CodingKeys: String, CodingKey { case id, title }  // no `thumbnail`

    static let buri = BuriSchema<Photo>(key: \.id, indexes: [.binary("title", \.title)])
}

/// An index over a transient property: refused at the first store.
struct PhotoIndexedByThumbnail: BuriSupport {
    var id: String
    var title: String
    var thumbnail: [UInt8] = []
    enum CodingKeys: String, CodingKey { case id, title }
    static let buri = BuriSchema<PhotoIndexedByThumbnail>(
        key: \.id, indexes: [.numeric("size", \.thumbnailSize)], bucket: "Photo2")
    var thumbnailSize: Int { thumbnail.count }
}

@Suite("Transient properties: left out of the record, never indexed")
struct TransientPropertyTests {
    @Test(arguments: Engine.allCases) func aPropertyLeftOutOfCodingKeysIsNotStored(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let photos = try t.db.bucket(Photo.self)
        try photos.store(Photo(id: "p1", title: "Dunes", thumbnail: [1, 2, 3]))
        // Read back: the default, since the record does not hold it.
        #expect(try photos.object(forKey: "p1") == Photo(id: "p1", title: "Dunes"))
        let stored = try #require(try photos.raw.record(forKey: "p1"))
        #expect(try CBORValue(decoding: stored.payload)["thumbnail"] == nil)
        #expect(try photos.keys(.index("title", equals: "Dunes")) == ["p1"])
    }

    @Test(arguments: Engine.allCases) func anIndexOverATransientPropertyIsRefusedAtTheFirstStore(engine: Engine) throws
    {
        let t = try TestDatabase(engine)
        let photos = try t.db.bucket(PhotoIndexedByThumbnail.self)
        #expect {
            try photos.store(PhotoIndexedByThumbnail(id: "p1", title: "Dunes", thumbnail: [1, 2, 3]))
        } throws: { error in
            guard case .invalidIndexDefinition(let bucket, let index, let reason) = error as? BuriError else {
                return false
            }
            return bucket == "Photo2" && index == "size" && reason.contains("not stored")
        }
        // Nothing was written.
        #expect(try photos.count() == 0)
    }
}

/// The README's migration example, as written there.
struct ReadmeContact: BuriSupport {
    var id: String, fullName: String, age: Int
    static let buri = BuriSchema<ReadmeContact>(
        key: \.id, indexes: [.numeric("age", \.age)], bucket: "Contact", schemaVersion: 2,
        migrations: [
            .from(0) { $0.rename("name", to: "fullName") },
            .from(1) { $0["age"] = .int($0["age"]?.stringValue.flatMap { Int64($0) } ?? 0) },
        ])
}

@Suite("README: the migration example")
struct ReadmeMigrationTests {
    @Test func theReadmeContactUpgradesVersionZeroRecords() throws {
        let t = try TestDatabase(.memory)
        try t.db.bucket(ContactV0.self).store(ContactV0(id: "c1", name: "Ann", age: "41"))
        let contacts = try t.db.bucket(ReadmeContact.self)
        var reported: [Int] = []
        #expect(try contacts.migrateAll { done in reported.append(done) } == 1)
        #expect(reported == [1])
        let ann = try #require(try contacts.object(forKey: "c1"))
        #expect(ann.fullName == "Ann" && ann.age == 41)
        #expect(try contacts.keys(.index("age", equals: 41)) == ["c1"])
    }
}
