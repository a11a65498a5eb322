import BuriEncryption
import BuriStorage
import BuriTestSupport
import Foundation
import Testing

@testable import Buri

/// A large read of an encrypted database opens its records on the threads that decode them. It
/// must return what the serial cursor returns, object for object, and fail with the serial
/// cursor's first error: a record that does not open, one that does not decode, whichever comes
/// first in read order; older records upgrade on the way, and plaintext records of a database
/// being encrypted read as they are.
@Suite("Large encrypted reads open records in parallel and equal the serial path")
struct ParallelOpeningTests {
    struct Item: BuriSupport, Equatable {
        var id: String
        var n: Int
        var tag: String
        var text: String
        static let buri = BuriSchema<Item>(
            key: \.id, indexes: [.binary("tag", \.tag), .numeric("n", \.n).plaintext()], bucket: "Item")
    }

    /// Reads `Item`s, failing on any `n` above 255.
    struct Strict: BuriSupport, Equatable {
        var id: String
        var n: UInt8
        var tag: String
        var text: String
        static let buri = BuriSchema<Strict>(
            key: \.id, indexes: [.binary("tag", \.tag), .numeric("n", \.n).plaintext()], bucket: "Item")
    }

    /// Version 1 of `Item`: `text` renamed `body`, and a field filled by the migration.
    struct ItemV1: BuriSupport, Equatable {
        var id: String
        var n: Int
        var tag: String
        var body: String
        var origin: String
        static let buri = BuriSchema<ItemV1>(
            key: \.id, indexes: [.binary("tag", \.tag), .numeric("n", \.n).plaintext()], bucket: "Item",
            schemaVersion: 1,
            migrations: [
                .from(0) { record in
                    record.rename("text", to: "body")
                    record.fill("origin", with: .text("v0"))
                }
            ])
    }

    static let engines: [Engine] = Engine.allCases.filter { $0 != .etcd }
    /// The serial prefix, then several batches of the parallel path.
    static let count = ParallelDecoding.threshold + 2 * ParallelDecoding.batchSize + 777

    static func key(_ i: Int) -> String { String(format: "k%06d", i) }

    static func item(_ i: Int, bad: Set<Int> = []) -> Item {
        Item(
            id: key(i), n: bad.contains(i) ? 1_000 + i : i % 256, tag: ["a", "b", "\u{E9}", "e\u{301}"][i % 4],
            text: edgeText(i))
    }

    /// An encrypted database holding `count` items, `n` above 255 at `bad`.
    func filled(_ engine: Engine, bad: Set<Int> = []) throws -> TestDatabase {
        let t = try TestDatabase(engine, options: encrypted(DatabaseKey.random()))
        try t.db.bucket(Item.self).store((0..<Self.count).map { Self.item($0, bad: bad) })
        return t
    }

    /// Flips a byte in the middle of the sealed record of object `i`.
    func damage(_ t: TestDatabase, _ i: Int) throws {
        let id = try t.db.bucket(Item.self).raw.descriptor.id
        let storedKey = Keyspace.recordKey(bucket: id, key: Self.key(i))
        let base = t.db.storedEngine
        var value = try #require(try base.latest().get(storedKey))
        value[value.count / 2] ^= 0x10
        let batch = base.makeBatch()
        batch.put(storedKey, value)
        try base.commit(batch, conditions: nil, sync: false)
    }

    @Test(arguments: engines) func largeReadsEqualTheSerialPath(engine: Engine) throws {
        let t = try filled(engine)
        let items = try t.db.bucket(Item.self)
        let n = Self.count
        if ParallelDecoding.helpers > 0, [.leveldb, .memory, .temporary].contains(engine) {
            #expect(try items.cursor(.all).parallelThreshold == ParallelDecoding.threshold)
        }
        #expect(try items.cursor(.all).raw.opener != nil)
        let queries: [Query] = [
            .all, Query.all.descending(), Query.all.offset(n / 10).limit(n - n / 5),
            .index("tag", equals: "a"), .index("tag", equals: "\u{E9}"), .index("n", in: 10...200),
            Query.index("n", in: 0...255).descending(),
        ]
        for query in queries {
            let expected = try items.serialRead(query).get()
            #expect(try items.objects(query) == expected, "\(query)")
        }
        #expect(try items.objects() == (0..<n).map { Self.item($0) })
        // The two spellings of "é" are different bytes, so different tokens.
        #expect(
            try items.objects(.index("tag", equals: "e\u{301}")).map(\.id)
                == stride(from: 3, to: n, by: 4).map(Self.key))
        // A reading cursor lends nothing unopened once the parallel read is over.
        let cursor = try items.cursor(.all)
        var first: [Item] = []
        while first.count < 3, let item = try cursor.next() { first.append(item) }
        #expect(first == (0..<3).map { Self.item($0) })
    }

    @Test(arguments: engines) func aRecordThatDoesNotOpenFailsAsTheSerialReadDoes(engine: Engine) throws {
        let n = Self.count
        let threshold = ParallelDecoding.threshold
        // (damaged record, record that does not decode): in the serial prefix, in the first batch,
        // in a later batch, the last one; a decoding error before the damage wins, one after loses.
        let cases: [(Int, Int?)] = [
            (100, nil), (threshold + 10, nil), (n - 500, nil), (n - 1, nil), (threshold + 300, threshold + 200),
            (threshold + 300, threshold + 301), (n - 2, n - 3), (threshold + 5_000, threshold + 5_000 - 128),
        ]
        for (damaged, bad) in cases {
            let t = try filled(engine, bad: bad.map { [$0] } ?? [])
            try damage(t, damaged)
            let strict = try t.db.bucket(Strict.self)
            for query in [Query.all, Query.all.descending(), .index("n", in: 0...255)] {
                let expected = strict.serialRead(query)
                let got = strict.parallelRead(query)
                guard case .failure(let error) = got, case .failure(let serialError) = expected else {
                    Issue.record("expected an error for \(damaged), \(String(describing: bad)), \(query): \(got)")
                    continue
                }
                #expect(error == serialError, "\(query)")
            }
            guard case .failure(let error) = strict.parallelRead(.all) else { continue }
            if let bad, bad < damaged {
                guard case .decodingFailed(let bucket, let key, _, _) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(bucket == "Item" && key == Self.key(bad))
            } else {
                guard case .authenticationFailed(let bucket, let key, _) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(bucket == "Item" && key == Self.key(damaged))
            }
            // The records around it still open one by one.
            #expect(
                try t.db.bucket(Item.self).object(forKey: Self.key(damaged - 1))
                    == Self.item(damaged - 1, bad: bad.map { [$0] } ?? []))
        }
    }

    @Test(arguments: engines) func olderRecordsUpgradeInOrderAmongSealedOnes(engine: Engine) throws {
        let n = Self.count
        let t = try filled(engine)
        let upgraded = { (i: Int) -> ItemV1 in
            let item = Self.item(i)
            return ItemV1(id: item.id, n: item.n, tag: item.tag, body: item.text, origin: "v0")
        }
        let v1 = try t.db.bucket(ItemV1.self)
        // Some records written at version 1: inside the serial prefix and inside later batches.
        let rewritten = [7, ParallelDecoding.threshold + 1, ParallelDecoding.threshold + 4_000, n - 1]
        var expected = (0..<n).map(upgraded)
        for i in rewritten {
            expected[i].origin = "v1"
            try v1.store(expected[i])
        }
        #expect(try v1.objects() == expected)
        #expect(try v1.objects(Query.all.descending()) == expected.reversed())
        #expect(try v1.objects(.index("tag", equals: "b")) == expected.filter { $0.tag == "b" })
        // A damaged record after an older one: the serial path's error, at the damaged key.
        try damage(t, ParallelDecoding.threshold + 6_000)
        guard case .failure(let error) = v1.parallelRead(.all), case .failure(let serialError) = v1.serialRead(.all)
        else {
            Issue.record("no error")
            return
        }
        #expect(error == serialError)
        guard case .authenticationFailed("Item", let key, _) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(key == Self.key(ParallelDecoding.threshold + 6_000))
    }

    @Test(arguments: engines) func aDatabaseBeingEncryptedReadsPlaintextAndSealedRecords(engine: Engine) throws {
        let n = Self.count
        let t = try TestDatabase(engine)
        try t.db.bucket(Item.self).store((0..<n).map { Self.item($0) })
        var options = encrypted(DatabaseKey.random())
        options.encryptsPlaintextDatabase = true
        options.plaintextIndexes = ["n"]
        try t.reopen(options: options)
        #expect(t.db.isBeingEncrypted)
        let items = try t.db.bucket(Item.self)
        // Written since: sealed, among the plaintext records.
        var expected = (0..<n).map { Self.item($0) }
        for i in stride(from: 3, to: n, by: 97) {
            expected[i].text = "sealed \(i)"
            try items.store(expected[i])
        }
        #expect(try items.objects() == expected)
        #expect(try items.objects(Query.all.descending()) == expected.reversed())
        #expect(try items.objects(.index("n", in: 0...99)) == items.serialRead(.index("n", in: 0...99)).get())
        try t.db.finishEncryption()
        #expect(try items.objects() == expected)
    }

    @Test(arguments: engines) func olderRecordsPlaintextAndSealedInOneBatchUpgradeInOrder(engine: Engine) throws {
        let n = Self.count
        let t = try TestDatabase(engine)
        try t.db.bucket(Item.self).store((0..<n).map { Self.item($0) })
        var options = encrypted(DatabaseKey.random())
        options.encryptsPlaintextDatabase = true
        options.plaintextIndexes = ["n"]
        try t.reopen(options: options)
        // Written at version 0 while the database is being encrypted: sealed, among plaintext
        // records of the same version, so a batch holds both kinds; then read at version 1.
        let rewritten = Array(stride(from: ParallelDecoding.threshold + 5, to: n, by: 211))
        var expected = (0..<n).map { i -> ItemV1 in
            let item = Self.item(i)
            return ItemV1(id: item.id, n: item.n, tag: item.tag, body: item.text, origin: "v0")
        }
        let items = try t.db.bucket(Item.self)
        for i in rewritten {
            var item = Self.item(i)
            item.text = "sealed \(i)"
            expected[i].body = item.text
            try items.store(item)
        }
        let v1 = try t.db.bucket(ItemV1.self)
        #expect(try v1.objects() == expected)
        #expect(try v1.objects(Query.all.descending()) == expected.reversed())
        #expect(try v1.objects() == v1.serialRead(.all).get())
    }
}
