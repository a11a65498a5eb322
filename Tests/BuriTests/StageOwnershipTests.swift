import BuriCodec
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

@testable import Buri

/// Stages on a shared engine name their owner (docs/FORMAT.md §6a, format 12): a live client's
/// stage is left alone by every other client; a dead client's (its lease ended) is purged by the
/// next client that looks, or taken up by an online encryption; and a client whose lease ended
/// writes nothing more into its stage.
@Suite("Stage ownership on shared engines")
struct StageOwnershipTests {
    static let sharedEngines: [Engine] = [.shared, .etcd].filter(Engine.allCases.contains)

    static func mail(_ id: String, _ email: String) -> RawObject {
        let payload: CBORValue = ["id": .text(id), "email": .text(email), "age": .int(3)]
        return RawObject(
            key: id, payload: payload.encoded(),
            indexValues: ["email": [[IndexValue(email)]], "age": [[IndexValue(3)]]])
    }

    static var indexes: [IndexDefinition] {
        var email = IndexDefinition(id: 0, name: "email", components: [.binary], unique: true)
        email.setFieldPaths([["email"]])
        var age = IndexDefinition(id: 0, name: "age", components: [.numeric])
        age.setFieldPaths([["age"]])
        return [email, age]
    }

    /// Every key but markers and lease keys: the data a stage must leave as it found it.
    static func dataKeys(_ t: TestDatabase) throws -> [[UInt8]] {
        try t.rawKeys().filter { $0.first != Keyspace.retiredTag && !Keyspace.isLeaseKey($0) }
    }

    /// Options under which purges run only when a test asks, so that what is stored between its
    /// steps is the steps' doing (a client's purge at open would race them).
    static var purgesWhenAsked: BuriOptions {
        var options = BuriOptions()
        options.purgesInBackground = false
        return options
    }

    /// A database on `engine` whose bucket Mail holds `count` objects, and its data keys.
    static func mailDatabase(
        _ engine: Engine, count: Int, options: BuriOptions = BuriOptions()
    ) throws -> (TestDatabase, [[UInt8]]) {
        let t = try TestDatabase(engine, options: options)
        _ = try t.db.createBucket(named: "Mail", keyField: "id", indexes: Self.indexes)
        try t.db.rawBucket(named: "Mail").store((0..<count).map { Self.mail("m\($0)", "\($0)@x") })
        return (t, try Self.dataKeys(t))
    }

    static func purgeUntilSettled(_ db: BuriDatabase) throws {
        try db.purgeRetiredBuckets()
        try db.purgeRetiredBuckets(reclaimingSpace: false)
    }

    @Test(
        "a live client's stage is left alone by another client; once its lease ends, the other client purges it and the dead client's handle writes nothing more",
        arguments: sharedEngines)
    func aDeadClientsStageIsPurgedByAnother(engine: Engine) throws {
        let t = try TestDatabase(engine, options: Self.purgesWhenAsked)
        _ = try t.db.createBucket(named: "Person", keyField: "id", indexes: Self.indexes)
        try t.db.rawBucket(named: "Person").store([Self.mail("p1", "a@x")])
        let before = try Self.dataKeys(t)
        let load = try t.db.stageImport(creating: "Mail", keyField: "id", indexes: Self.indexes)
        try load.store((0..<40).map { Self.mail("m\($0)", "\($0)@x") })
        let owner = try #require(try t.db.stageOwner())
        #expect(
            try t.db.pendingPurges() == [RetiredBucket(id: load.stageId, bucket: "Mail", state: .staging, owner: owner)]
        )

        // Another client, while the owner lives: purging leaves the stage, check calls it pending.
        let other = try t.client(1)
        defer { other.close() }
        try other.purgeRetiredBuckets()
        #expect(try other.pendingPurges().map(\.id) == [load.stageId])
        let report = try other.check()
        #expect(report.problems.isEmpty && report.pendingPurges.map(\.owner) == [owner])
        try load.store([Self.mail("m40", "40@x")])

        // The owner's lease ends (its process was killed): its handle writes nothing more.
        try t.endLease(owner)
        let stagedKeys = try t.rawKeys()
        #expect {
            try load.store([Self.mail("m41", "41@x")])
        } throws: { error in
            guard case BuriError.conflict(_, let detail) = error else { return false }
            return detail.contains("lease ended") && detail.contains("'Mail'")
        }
        #expect(throws: BuriError.self) { try load.publish() }
        load.abandon()  // not its stage to mark any more: nothing is written
        #expect(try t.rawKeys() == stagedKeys)
        #expect(try other.bucketInfo(named: "Mail") == nil)

        // The other client purges it: nothing of the stage is left, the database is as before.
        try Self.purgeUntilSettled(other)
        #expect(try other.pendingPurges().isEmpty)
        #expect(try Self.dataKeys(t) == before)
        #expect(try other.check().isConsistent)
        // The dead client's handle stages again under a new lease, and that import works.
        let again = try t.db.stageImport(creating: "Mail", keyField: "id", indexes: Self.indexes)
        #expect(try t.db.stageOwner() != owner)
        try again.store([Self.mail("m1", "1@x")])
        #expect(try again.publish() == 1)
        #expect(try other.rawBucket(named: "Mail").keys(.index("email", equals: "1@x")) == ["m1"])
    }

    @Test(
        "a stage whose handle closed is abandoned at once: the next client purges it, and a stage into an existing bucket leaves the bucket as it was",
        arguments: sharedEngines)
    func aClosedHandlesStageIsPurged(engine: Engine) throws {
        let (t, before) = try Self.mailDatabase(engine, count: 30)
        let first = try t.client(1)
        let load = try first.stageImport(into: "Mail", chunkSize: 7)
        try load.store([Self.mail("new", "new@x"), Self.mail("m3", "changed@x")])
        first.close()  // its lease is released: the stage is nobody's
        let next = try t.client(2)
        defer { next.close() }
        try Self.purgeUntilSettled(next)
        #expect(try next.pendingPurges().isEmpty)
        #expect(try Self.dataKeys(t) == before)
        #expect(try next.rawBucket(named: "Mail").count() == 30)
        #expect(try next.check().isConsistent)
    }

    @Test(
        "a copy whose owner's lease ends between its commits stops with a clear error and writes nothing more",
        arguments: sharedEngines)
    func aLeaseEndingDuringACopyStopsIt(engine: Engine) throws {
        let (t, before) = try Self.mailDatabase(engine, count: 50)
        var copied: [Int] = []
        #expect {
            _ = try t.db.stageImport(into: "Mail", chunkSize: 10) { done in
                copied.append(done)
                if done == 20, let owner = try? t.db.stageOwner() { try? t.endLease(owner) }
            }
        } throws: { error in
            guard case BuriError.conflict(_, let detail) = error else { return false }
            return detail.contains("lease ended") && detail.contains("'Mail'")
        }
        #expect(copied == [10, 20])
        // The failed copy deleted its stage itself: abandoned (its lease ended) and taken up by
        // nobody, it was this client's to purge as much as anyone's.
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try Self.dataKeys(t) == before)
        #expect(try t.db.check().isConsistent)
    }

    @Test(
        "a stage taken up by another client is not purged by its first owner's failed copy",
        arguments: sharedEngines)
    func aTakenStageIsNotPurgedByItsFormerOwner(engine: Engine) throws {
        let (t, _) = try Self.mailDatabase(engine, count: 50)
        let other = try t.client(1)
        defer { other.close() }
        var taken: UInt32?
        #expect(throws: BuriError.self) {
            _ = try t.db.stageImport(into: "Mail", chunkSize: 10) { done in
                guard done == 20, let owner = try? t.db.stageOwner() else { return }
                try? t.endLease(owner)
                taken = (try? other.takeUpAbandonedStage(of: "Mail"))?.id
            }
        }
        let id = try #require(taken)
        let owner = try #require(try other.stageOwner())
        // Still there, the other client's, holding the 20 objects copied.
        #expect(try other.pendingPurges() == [RetiredBucket(id: id, bucket: "Mail", state: .staging, owner: owner)])
        #expect(try t.rawKeys().filter { $0.starts(with: Keyspace.recordPrefix(bucket: id)) }.count == 20)
    }

    @Test("an abandoned stage is taken up by one client only", arguments: sharedEngines)
    func anAbandonedStageIsTakenUpOnce(engine: Engine) throws {
        // Outside an online encryption an abandoned stage is purgeable: purges only when asked.
        let (t, _) = try Self.mailDatabase(engine, count: 0, options: Self.purgesWhenAsked)
        let first = try t.client(1)
        let load = try first.stageImport(into: "Mail")
        try load.store([Self.mail("a", "a@x")])
        let dead = try #require(try first.stageOwner())
        try t.endLease(dead)
        let second = try t.client(2)
        defer {
            second.close()
            first.close()
        }
        let taken = try #require(try second.takeUpAbandonedStage(of: "Mail"))
        let owner = try #require(try second.stageOwner())
        #expect(taken.id == load.stageId && taken.owner == owner)
        #expect(try second.pendingPurges().map(\.owner) == [owner])
        // Now a live client's: neither the dead one, nor a third client, takes it or purges it.
        #expect(try t.db.takeUpAbandonedStage(of: "Mail") == nil)
        try t.db.purgeRetiredBuckets()
        #expect(try t.db.pendingPurges().map(\.id) == [load.stageId])
        #expect(throws: BuriError.self) { try load.store([Self.mail("b", "b@x")]) }
        // A name that is canonically equal but byte-different is another bucket's: not taken.
        #expect(try t.db.takeUpAbandonedStage(of: "Mail\u{301}") == nil)
    }

    @Test(
        "a client that renews its lease is alive to the others; one that stopped is found dead once its lease runs out",
        arguments: sharedEngines)
    func ownersAreFoundAliveOrDead(engine: Engine) throws {
        let (t, _) = try Self.mailDatabase(engine, count: 0, options: Self.purgesWhenAsked)
        let load = try t.db.stageImport(into: "Mail")
        let owner = try #require(try t.db.stageOwner())
        let other = try t.client(1)
        defer { other.close() }
        // Renewed (etcd: within a third of its 10 s; the memory engine's never runs down).
        #expect(try other.ownerHasDied(owner) == false)
        #expect(try other.takeUpAbandonedStage(of: "Mail") == nil)
        try t.endLease(owner)
        #expect(try other.ownerHasDied(owner) == true)
        #expect(try other.takeUpAbandonedStage(of: "Mail")?.id == load.stageId)
    }

    @Test("a stage partly purged is a purge from the first chunk on: never taken up again", arguments: sharedEngines)
    func aPartlyPurgedStageIsNotTakenUp(engine: Engine) throws {
        let (t, _) = try Self.mailDatabase(engine, count: 0, options: Self.purgesWhenAsked)
        let load = try t.db.stageImport(into: "Mail")
        try load.store((0..<20).map { Self.mail("m\($0)", "\($0)@x") })
        try t.endLease(try #require(try t.db.stageOwner()))
        let other = try t.client(1)
        defer { other.close() }
        // One chunk of a few keys: the purge stops midway (as when its process is killed).
        other.purger.chunkSize.store(5, ordering: .relaxed)
        #expect(try other.purgeChunk(bucket: load.stageId) == false)
        #expect(try other.pendingPurges().map(\.state) == [.purging])
        #expect(try other.takeUpAbandonedStage(of: "Mail") == nil)
        try other.purgeRetiredBuckets()
        #expect(try other.pendingPurges().isEmpty)
        #expect(try other.check().isConsistent)
    }

    @Test(
        "on an engine only this process writes to, a marker naming an owner is a stage its process left: purged at open, never read",
        arguments: [Engine.leveldb, .memory, .temporary].filter(Engine.allCases.contains))
    func anOwnedMarkerOnAnUnsharedEngineIsPurgedAtOpen(engine: Engine) throws {
        let t = try TestDatabase(engine)
        _ = try t.db.createBucket(named: "Mail", keyField: "id", indexes: Self.indexes)
        try t.db.rawBucket(named: "Mail").store([Self.mail("a", "a@x")])
        let before = try Self.dataKeys(t)
        // As a backup of an etcd database mid-import would hold it.
        let stage: UInt32 = 77
        let batch = t.db.storedEngine.makeBatch()
        batch.put(Keyspace.retiredKey(bucket: stage), Keyspace.retiredValue(.staging, bucket: "Mail", owner: 0xABCD))
        batch.put(Keyspace.recordKey(bucket: stage, key: "x"), [0xFF, 0x00])
        batch.put(Keyspace.countKey(bucket: stage), Keyspace.countValue(1))
        try t.db.storedEngine.commit(batch, conditions: nil, sync: true)
        #expect(try t.db.check().problems.isEmpty)
        try t.reopen()
        try t.db.purgeRetiredBuckets()
        #expect(try t.db.pendingPurges().isEmpty)
        #expect(try Self.dataKeys(t) == before)
    }

    @Test("a backup leaves out lease keys; in the copy, a stage they owned is purged at open", arguments: sharedEngines)
    func aBackupLeavesLeaseKeysOut(engine: Engine) throws {
        let t = try TestDatabase(engine)
        _ = try t.db.createBucket(named: "Mail", keyField: "id", indexes: Self.indexes)
        try t.db.rawBucket(named: "Mail").store([Self.mail("a", "a@x")])
        let load = try t.db.stageImport(into: "Mail")
        try load.store([Self.mail("b", "b@x")])
        #expect(try t.rawKeys().contains(where: Keyspace.isLeaseKey))
        let path = t.directory.appendingPathComponent("copy.buri").path
        try t.db.backup(to: path)
        let copy = try BuriDatabase(path: path)
        defer { copy.close() }
        try copy.purgeRetiredBuckets()
        #expect(try copy.pendingPurges().isEmpty)
        #expect(try copy.rawBucket(named: "Mail").keys(.all) == ["a"])
        #expect(try copy.check().isConsistent)
        let raw = try scanKeys(copy.storedEngine.snapshot())
        #expect(!raw.contains(where: Keyspace.isLeaseKey))
    }

    @Test("§6a: a staging marker's owner parses only as written; a lease key is well formed only empty")
    func ownedMarkersParse() {
        let key = Keyspace.retiredKey(bucket: 9)
        let value = Keyspace.retiredValue(.staging, bucket: "Ma\u{0}il", owner: UInt64.max)
        let parsed = Keyspace.parseRetired(key: key, value: value)
        #expect(parsed?.owner == UInt64.max && parsed?.name == "Ma\u{0}il" && parsed?.state == .staging)
        // A purge never names an owner.
        #expect(Keyspace.retiredValue(.purging, bucket: "M", owner: 5) == [0x01, 0x4D])
        // Owner 0, a short owner, or a name that is not UTF-8: damage, not a marker.
        #expect(Keyspace.parseRetired(key: key, value: [0x03] + [UInt8](repeating: 0, count: 8) + [0x4D]) == nil)
        #expect(Keyspace.parseRetired(key: key, value: [0x03, 0, 0, 1]) == nil)
        #expect(Keyspace.parseRetired(key: key, value: [0x03, 0, 0, 0, 0, 0, 0, 0, 1, 0xFF]) == nil)
        #expect(Keyspace.parseRetired(key: key, value: [0x03, 0, 0, 0, 0, 0, 0, 0, 1])?.name == "")
        #expect(Keyspace.parseRetired(key: key, value: [0x04, 0x4D]) == nil)
        #expect(BuriDatabase.isWellFormed(key: Keyspace.leaseKey(3), value: []))
        #expect(!BuriDatabase.isWellFormed(key: Keyspace.leaseKey(3), value: [0]))
        #expect(!BuriDatabase.isWellFormed(key: Keyspace.leaseKey(3).dropLast().map { $0 }, value: []))
    }
}
