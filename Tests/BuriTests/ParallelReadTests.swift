import Foundation
@testable import Buri
import BuriStorage
import Testing

/// `objects(_:)` decodes a large result on several threads. Whatever it does, it must return what
/// the serial cursor returns: the same objects in the same order from one snapshot, and the same
/// first error when something is damaged.
@Suite("Large object reads decode in parallel and equal the serial path")
struct ParallelReadTests {
    struct Item: BuriSupport, Equatable {
        var id: String
        var n: Int
        var text: String
        static let buri = BuriSchema<Item>(key: \.id, bucket: "Item")
    }

    /// Reads `Item`s, failing (valueOutOfRange) on any `n` above 255.
    struct Strict: BuriSupport, Equatable {
        var id: String
        var n: UInt8
        var text: String
        static let buri = BuriSchema<Strict>(key: \.id, bucket: "Item")
    }

    /// Enough objects for the serial prefix and several batches, except on a remote engine (where
    /// reads stay serial anyway and a large fill is slow).
    static func count(_ engine: Engine) -> Int {
        engine == .etcd ? 300 : ParallelDecoding.threshold + 2 * ParallelDecoding.batchSize + 777
    }

    static func key(_ i: Int) -> String { String(format: "k%06d", i) }

    @Test(arguments: Engine.allCases) func largeReadsEqualTheSerialPath(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        let n = Self.count(engine)
        try people.store(
            (0..<n).map { i in
                PersonRecord(
                    objectId: Self.key(i), name: edgeText(i), locale: ["EN", "NL", "e\u{301}", "\u{E9}"][i % 4],
                    age: i % 40)
            })
        // The parallel path is the one under test here (on a machine with more than one core).
        if ParallelDecoding.helpers > 0, [.leveldb, .memory, .temporary].contains(engine) {
            #expect(try people.cursor(.all).parallelThreshold == ParallelDecoding.threshold)
        }
        let queries: [Query] = [
            .all, Query.all.descending(), Query.all.offset(n / 10).limit(n - n / 5),
            .index("locale", equals: "EN"), .index("locale", equals: "\u{E9}"), .index("age", in: 10...30),
            Query.index("age", in: 0...39).descending(), .index("locale", prefix: "e"),
        ]
        for query in queries {
            let expected = try people.serialRead(query).get()
            #expect(try people.objects(query) == expected, "\(query)")
        }
        let all = try people.objects()
        #expect(all.count == n)
        #expect(all.map(\.objectId) == (0..<n).map(Self.key))
        #expect(all.map(\.name) == (0..<n).map(edgeText))
        #expect(
            try people.objects(.index("locale", equals: "EN")).map(\.objectId)
                == stride(from: 0, to: n, by: 4).map(Self.key))
        // The two spellings of "é" are different bytes, so different index values.
        #expect(
            try people.objects(.index("locale", equals: "e\u{301}")).map(\.objectId)
                == stride(from: 2, to: n, by: 4).map(Self.key))
    }

    /// Stores `count` items, with `n` above 255 (undecodable as `Strict`) at `bad`.
    func fill(_ t: TestDatabase, count: Int, bad: Set<Int>) throws -> (Bucket<Item>, Bucket<Strict>) {
        let items = try t.db.bucket(Item.self)
        try items.store(
            (0..<count).map { Item(id: Self.key($0), n: bad.contains($0) ? 1_000 + $0 : $0 % 256, text: edgeText($0)) }
        )
        return (items, try t.db.bucket(Strict.self))
    }

    @Test(arguments: Engine.allCases) func theFirstDecodingErrorIsTheSerialOne(engine: Engine) throws {
        let n = Self.count(engine)
        // In the serial prefix, in the first batch, in a later batch (two in one batch: the first wins),
        // in the last object, in the same chunk twice.
        let cases: [Set<Int>] =
            engine == .etcd
            ? [[5], [150, 151], [n - 1]]
            : [[100], [ParallelDecoding.threshold + 10, n - 1], [n - 500, n - 400], [n - 1], [5_000, 5_001, 9_000]]
        for bad in cases {
            let t = try TestDatabase(engine)
            let (_, strict) = try fill(t, count: n, bad: bad)
            let expected = strict.serialRead(.all)
            let got = strict.parallelRead(.all)
            guard case .failure(let error) = got, case .failure(let serialError) = expected else {
                Issue.record("expected a decoding error for \(bad.sorted()), got \(got)")
                continue
            }
            #expect(error == serialError)
            guard case .decodingFailed(let bucket, let key, let type, _) = error else {
                Issue.record("\(error)")
                continue
            }
            #expect(bucket == "Item" && type.contains("Strict"))
            #expect(key == Self.key(bad.min() ?? 0))
            // Descending, the first error met is the largest bad key.
            guard case .failure(.decodingFailed(_, let last, _, _)) = strict.parallelRead(Query.all.descending())
            else {
                Issue.record("no error descending")
                continue
            }
            #expect(last == Self.key(bad.max() ?? 0))
        }
    }

    @Test(arguments: Engine.allCases) func damagedStorageAndDecodingErrorsComeInReadOrder(engine: Engine) throws {
        let n = Self.count(engine)
        let damagedAt = n / 2
        // A decoding error before the damaged record wins; one after it does not.
        for (bad, expectDecodingError) in [(damagedAt - 1_000, true), (damagedAt + 10, false), (damagedAt - 1, true)]
        where bad >= 0 {
            let t = try TestDatabase(engine)
            let (items, strict) = try fill(t, count: n, bad: [bad])
            let damage = t.db.engine.makeBatch()
            damage.put(Keyspace.recordKey(bucket: items.raw.descriptor.id, key: Self.key(damagedAt)), [0xFF, 0xFF])
            try t.db.engine.commit(damage, conditions: nil, sync: false)
            let expected = strict.serialRead(.all)
            let got = strict.parallelRead(.all)
            guard case .failure(let error) = got, case .failure(let serialError) = expected else {
                Issue.record("expected an error, got \(got)")
                continue
            }
            #expect(error == serialError)
            if case .decodingFailed(_, let key, _, _) = error {
                #expect(expectDecodingError && key == Self.key(bad))
            } else if case .corruption(_, let key, _, _) = error {
                #expect(!expectDecodingError && key == Self.key(damagedAt))
            } else {
                Issue.record("\(error)")
            }
            // The good objects around it still read one by one.
            #expect(try items.object(forKey: Self.key(damagedAt + 1))?.n == (damagedAt + 1) % 256)
        }
    }

    static func generation(_ g: Int, count: Int) -> [Item] {
        (0..<count).map { Item(id: key($0), n: g, text: edgeText($0)) }
    }

    /// Where the writer thread leaves its error (written before it signals, read after the wait).
    final class Outcome: @unchecked Sendable {
        var error: String?
    }

    @Test(arguments: Engine.allCases) func aReadDuringWritesSeesOneSnapshot(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let items = try t.db.bucket(Item.self)
        let n = Self.count(engine)
        let rounds = engine == .etcd ? 3 : 12
        try items.store(Self.generation(0, count: n))
        let done = DispatchSemaphore(value: 0)
        let outcome = Outcome()
        Thread.detachNewThread {
            do {
                // Each store replaces every object in one atomic batch.
                for g in 1...rounds { try items.store(Self.generation(g, count: n)) }
            } catch {
                outcome.error = "\(error)"
            }
            done.signal()
        }
        for _ in 0..<rounds {
            let all = try items.objects()
            #expect(all.count == n)
            #expect(Set(all.map(\.n)).count == 1, "a read mixed generations")
            #expect(all.map(\.id) == (0..<n).map(Self.key))
            #expect(all.map(\.text) == (0..<n).map(edgeText))
        }
        done.wait()
        #expect(outcome.error == nil)
        #expect(try items.objects() == Self.generation(rounds, count: n))
    }
}
