import Buri
import Foundation
import Testing

/// Version 0 of a member: `mail`, no `active`.
struct MemberV0: BuriSupport {
    var id: String, mail: String, level: Int
    static let buri = BuriSchema<MemberV0>(
        key: \.id, indexes: [.numeric("level", \.level, field: "level")], bucket: "Member")
}

/// Version 1, its step as data: `mail` renamed `email` (indexed), `active` filled in.
struct MemberV1: BuriSupport, Equatable {
    var id: String, email: String, level: Int, active: Bool
    static let buri = BuriSchema<MemberV1>(
        key: \.id,
        indexes: [.numeric("level", \.level, field: "level"), .binary("email", \.email, field: "email")],
        bucket: "Member", schemaVersion: 1,
        migrations: [.from(0, .rename("mail", to: "email"), .fill("active", with: true))])
}

/// Version 1 with its step in Swift: only the app can run it.
struct MemberSwiftStep: BuriSupport {
    var id: String, email: String, level: Int, active: Bool
    static let buri = BuriSchema<MemberSwiftStep>(
        key: \.id,
        indexes: [.numeric("level", \.level, field: "level"), .binary("email", \.email, field: "email")],
        bucket: "Member", schemaVersion: 1,
        migrations: [
            .from(0) {
                $0.rename("mail", to: "email"); $0.fill("active", with: true)
            }
        ])
}

@Suite("buri migrate: older records upgraded by the steps the catalog keeps")
struct MigrateToolTests {
    /// A database of 130 members at version 0, its bucket then declared at version 1 by `T`.
    func makeDatabase<T: BuriSupport>(_ sandbox: Sandbox, declaring type: T.Type) throws -> String {
        let path = sandbox.path("members.buri")
        let db = try BuriDatabase(path: path)
        try db.bucket(MemberV0.self).store(
            (0..<130).map { MemberV0(id: String(format: "m%03d", $0), mail: "m\($0)@example.com", level: $0 % 5) })
        // Opening with the new type records its steps (and builds the email index from upgraded objects).
        _ = try db.bucket(T.self)
        db.close()
        return path
    }

    @Test func upgradesEveryRecordInBatchesAndAgainUpgradesNothing() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox, declaring: MemberV1.self)
        let run = try buri("migrate", path, "Member", "--batch-size", "50")
        expectSuccess(run)
        #expect(run.stdout == "upgraded 130 records of bucket 'Member' to schema version 1\n")
        let again = try buri("migrate", path, "Member")
        expectSuccess(again)
        #expect(again.stdout == "upgraded 0 records of bucket 'Member' to schema version 1\n")
        expectSuccess(try buri("check", path))
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let raw = try db.rawBucket(named: "Member")
        for key in try raw.keys(.all) {
            let record = try #require(try raw.record(forKey: key))
            #expect(record.schemaVersion == 1)
            let fields = try CBORValue(decoding: record.payload)
            #expect(fields["mail"] == nil && fields["email"] != nil && fields["active"] == .bool(true))
        }
        let members = try db.bucket(MemberV1.self)
        #expect(try members.keys(.index("email", equals: "m7@example.com")) == ["m007"])
        #expect(
            try members.object(forKey: "m042") == MemberV1(id: "m042", email: "m42@example.com", level: 2, active: true)
        )
    }

    @Test func aStepWrittenInSwiftStopsItBeforeAnythingIsWritten() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox, declaring: MemberSwiftStep.self)
        let run = try buri("migrate", path, "Member")
        #expect(run.status == 3, "\(run)")
        #expect(run.stderr.contains("written in Swift") && run.stderr.contains("migrateAll"), "\(run.stderr)")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let raw = try db.rawBucket(named: "Member")
        #expect(try raw.keys(.all).allSatisfy { try raw.record(forKey: $0)?.schemaVersion == 0 })
        // The app runs it.
        #expect(try db.bucket(MemberSwiftStep.self).migrateAll() == 130)
    }

    @Test func badArgumentsAreUsageErrors() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox, declaring: MemberV1.self)
        #expect(try buri("migrate", path, "Member", "--batch-size", "0").status == 2)
        #expect(try buri("migrate", path, "Nope").status == 6)
    }
}
