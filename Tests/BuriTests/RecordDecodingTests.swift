import Foundation
@testable import Buri
import BuriCodec
import Synchronization
import Testing

/// A bucket whose type adopts `BuriRecordDecodable` reads every object through `init(record:)`:
/// the same objects, order, pages and errors as the `Codable` path over the same stored bytes.
@Suite("Buckets of a BuriRecordDecodable type read through the fast path")
struct RecordDecodingTests {
    /// `PersonRecord`'s stored form, read by hand. `viaRecord` (not stored) shows which path made it.
    struct FastPerson: BuriSupport, BuriRecordDecodable {
        var objectId: String
        var name: String
        var locale: String
        var age: Int
        var viaRecord = false

        enum CodingKeys: String, CodingKey { case objectId, name, locale, age }

        static let buri = BuriSchema<FastPerson>(
            key: \.objectId, indexes: [.binary("locale", \.locale), .numeric("age", \.age)], bucket: "Person")

        init(record: inout CBORRecordReader) throws {
            var objectId: String?, name: String?, locale: String?, age: Int?
            while let field = try record.nextField() {
                switch field {
                case "objectId": objectId = try record.string()
                case "name": name = try record.string()
                case "locale": locale = try record.string()
                case "age": age = try record.int()
                default: try record.skip()
                }
            }
            guard let objectId else { throw record.missingField("objectId") }
            guard let name else { throw record.missingField("name") }
            guard let locale else { throw record.missingField("locale") }
            guard let age else { throw record.missingField("age") }
            self.objectId = objectId
            self.name = name
            self.locale = locale
            self.age = age
            viaRecord = true
        }

        var plain: PersonRecord { PersonRecord(objectId: objectId, name: name, locale: locale, age: age) }
    }

    /// Reads `PersonRecord`s, failing on any age above 255 (by `Codable`).
    struct Strict: BuriSupport {
        var objectId: String
        var name: String
        var locale: String
        var age: UInt8
        static let buri = BuriSchema<Strict>(
            key: \.objectId, indexes: [.binary("locale", \.locale), .numeric("age", \.age)], bucket: "Person")
    }

    /// The same, through the fast path.
    struct FastStrict: BuriSupport, BuriRecordDecodable {
        var objectId: String
        var name: String
        var locale: String
        var age: UInt8
        static let buri = BuriSchema<FastStrict>(
            key: \.objectId, indexes: [.binary("locale", \.locale), .numeric("age", \.age)], bucket: "Person")

        init(record: inout CBORRecordReader) throws {
            var objectId: String?, name: String?, locale: String?, age: UInt8?
            while let field = try record.nextField() {
                if field == "objectId" {
                    objectId = try record.string()
                } else if field == "name" {
                    name = try record.string()
                } else if field == "locale" {
                    locale = try record.string()
                } else if field == "age" {
                    age = try record.uint8()
                }
            }
            guard let objectId, let name, let locale, let age else { throw record.missingField("a field") }
            self.objectId = objectId
            self.name = name
            self.locale = locale
            self.age = age
        }
    }

    /// A later version of `FastPerson` with an index on `name`: opening it builds the index by
    /// decoding every stored object, through the fast path (counted).
    struct FastPersonV2: BuriSupport, BuriRecordDecodable {
        static let recordReads = Atomic<Int>(0)
        var objectId: String
        var name: String
        var locale: String
        var age: Int
        static let buri = BuriSchema<FastPersonV2>(
            key: \.objectId,
            indexes: [.binary("locale", \.locale), .numeric("age", \.age), .binary("name", \.name)], bucket: "Person")

        init(record: inout CBORRecordReader) throws {
            var person = try FastPerson(record: &record)
            person.viaRecord = false
            objectId = person.objectId
            name = person.name
            locale = person.locale
            age = person.age
            Self.recordReads.add(1, ordering: .relaxed)
        }
    }

    static func count(_ engine: Engine) -> Int {
        engine == .etcd ? 300 : ParallelDecoding.threshold + ParallelDecoding.batchSize + 321
    }

    static func key(_ i: Int) -> String { String(format: "k%06d", i) }

    static func person(_ i: Int, age: Int? = nil) -> PersonRecord {
        let names = ["\u{E9}\(i)", "e\u{301}\(i)", "nul\u{0}\(i)", String(repeating: "x", count: i % 300), ""]
        return PersonRecord(
            objectId: key(i), name: names[i % names.count],
            locale: ["EN", "NL", "e\u{301}", "\u{E9}"][i % 4], age: age ?? i % 40)
    }

    @Test(arguments: Engine.allCases) func readsQueriesPagesAndLargeReadsEqualTheCodablePath(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let slow = try t.db.bucket(PersonRecord.self)
        let n = Self.count(engine)
        try slow.store((0..<n).map { Self.person($0) })
        let fast = try t.db.bucket(FastPerson.self)
        #expect(fast.recordDecoder != nil && slow.recordDecoder == nil)

        let queries: [Query] = [
            .all, Query.all.descending(), Query.all.offset(n / 10).limit(n / 2), .index("locale", equals: "\u{E9}"),
            .index("locale", equals: "e\u{301}"), .index("age", in: 10...30),
            Query.index("age", in: 0...39).descending(),
        ]
        for query in queries {
            let objects = try fast.objects(query)  // large results decode on every core
            #expect(objects.allSatisfy { $0.viaRecord }, "\(query)")
            #expect(objects.map(\.plain) == (try slow.objects(query)), "\(query)")
            let cursor = try fast.cursor(query)
            var streamed: [PersonRecord] = []
            while let entry = try cursor.nextEntry() {
                #expect(entry.key == entry.object.objectId && entry.object.viaRecord)
                streamed.append(entry.object.plain)
            }
            #expect(streamed == objects.map(\.plain), "\(query)")
        }
        #expect(try fast.objects().map(\.name) == (0..<n).map { Self.person($0).name })
        for i in [0, 1, 2, 4, n - 1] {
            let one = try #require(try fast.object(forKey: Self.key(i)))
            #expect(one.viaRecord && one.plain == Self.person(i))
        }
        #expect(try fast.object(forKey: "absent") == nil)

        // Pages walk the same objects as Codable's pages.
        let query = Query.index("age", in: 5...25).limit(n / 3)
        var page = try fast.page(query, size: 97)
        var slowPage = try slow.page(query, size: 97)
        var walked: [PersonRecord] = []
        while true {
            #expect(page.items.allSatisfy { $0.viaRecord })
            #expect(page.items.map(\.plain) == slowPage.items)
            walked += page.items.map(\.plain)
            guard let next = page.next, let slowNext = slowPage.next else {
                #expect(page.next == nil && slowPage.next == nil)
                break
            }
            page = try fast.page(query.after(next), size: 97)
            slowPage = try slow.page(query.after(slowNext), size: 97)
        }
        #expect(walked == (try slow.objects(query)))
        #expect(walked.count == n / 3)
    }

    /// The reason and key of a decoding failure, whichever type failed.
    static func failure<T>(_ body: () throws(BuriError) -> T) -> (key: String, reason: String)? {
        do throws(BuriError) {
            _ = try body()
            return nil
        } catch {
            guard case .decodingFailed(let bucket, let key, _, let reason) = error, bucket == "Person" else {
                Issue.record("\(error)")
                return nil
            }
            return (key, reason)
        }
    }

    @Test(arguments: Engine.allCases) func damagedObjectsFailAsOnTheCodablePath(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let n = Self.count(engine)
        let bad = [n / 3, n - 5]
        try t.db.bucket(PersonRecord.self).store(
            (0..<n).map { Self.person($0, age: bad.contains($0) ? 1_000 + $0 : nil) })
        let slow = try t.db.bucket(Strict.self)
        let fast = try t.db.bucket(FastStrict.self)
        for query in [Query.all, Query.all.descending(), .index("age", in: 0...)] {
            let expected = try #require(Self.failure { () throws(BuriError) in try slow.objects(query) })
            let got = try #require(Self.failure { () throws(BuriError) in try fast.objects(query) })
            #expect(got.key == expected.key && got.reason == expected.reason, "\(got) vs \(expected)")
            #expect(got.reason.contains("age"))
            let cursor = try fast.cursor(query)
            let streamed = try #require(Self.failure { () throws(BuriError) in while try cursor.next() != nil {} })
            #expect(streamed.key == expected.key && streamed.reason == expected.reason)
        }
        let one = try #require(Self.failure { () throws(BuriError) in try fast.object(forKey: Self.key(bad[0])) })
        #expect(one.key == Self.key(bad[0]))
        // A payload damaged on disk: both paths fail, naming the key.
        let damage = t.db.engine.makeBatch()
        var value = try #require(
            try t.db.engine.snapshot().get(Keyspace.recordKey(bucket: fast.raw.descriptor.id, key: Self.key(7))))
        value.removeLast()
        damage.put(Keyspace.recordKey(bucket: fast.raw.descriptor.id, key: Self.key(7)), value)
        try t.db.engine.commit(damage, conditions: nil, sync: false)
        let fastPerson = try t.db.bucket(FastPerson.self)
        let truncated = try #require(
            Self.failure { () throws(BuriError) in try fastPerson.object(forKey: Self.key(7)) })
        let slowTruncated = try #require(
            Self.failure { () throws(BuriError) in try t.db.bucket(PersonRecord.self).object(forKey: Self.key(7)) })
        #expect(
            truncated.key == Self.key(7) && truncated.reason == slowTruncated.reason, "\(truncated) vs \(slowTruncated)"
        )
        #expect(try fastPerson.object(forKey: Self.key(8))?.viaRecord == true)
    }

    @Test(arguments: [Engine.leveldb, .memory]) func anIndexBuiltForANewDeclarationDecodesThroughTheFastPath(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let n = 1_500
        try t.db.bucket(PersonRecord.self).store((0..<n).map { Self.person($0) })
        let before = FastPersonV2.recordReads.load(ordering: .relaxed)
        let v2 = try t.db.bucket(FastPersonV2.self)
        #expect(FastPersonV2.recordReads.load(ordering: .relaxed) - before >= n)
        let named = try v2.keys(.index("name", equals: "e\u{301}1"))
        #expect(named == [Self.key(1)])
        #expect(try v2.keys(.index("name", equals: "\u{E9}1")) == [])  // the other bytes
    }
}

/// The live query of a fast-path bucket waits for its emission, so it runs with the other
/// observation tests (Scripts/test runs suites named `…ObservationTests` on their own, where no
/// long synchronous suite starves the cooperative pool the consumer task needs).
@Suite("A live query of a BuriRecordDecodable bucket emits fast-path objects")
struct RecordDecodingObservationTests {
    @Test(arguments: [Engine.leveldb, .memory]) func liveQueriesEmitFastPathObjects(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(RecordDecodingTests.FastPerson.self)
        try await people.store(
            (0..<50).map { i in
                let p = RecordDecodingTests.person(i)
                return RecordDecodingTests.FastPerson(objectId: p.objectId, name: p.name, locale: p.locale, age: p.age)
            })
        let query = Query.index("age", in: 10...19)
        let emissions = Shared<[[RecordDecodingTests.FastPerson]]>([])
        let live = try people.observe(query)
        let consumer = Task {
            for try await result in live { emissions.update { $0.append(result) } }
        }
        try await people.store(RecordDecodingTests.FastPerson(objectId: "new", name: "\u{E9}", locale: "NL", age: 15))
        let expected = try await people.objects(query).map(\.plain)
        #expect(expected.contains { $0.objectId == "new" })
        try await eventually("the live query to show the new object") {
            emissions.current.last.map { $0.map(\.plain) == expected } ?? false
        }
        consumer.cancel()
        _ = await consumer.result
        #expect(emissions.current.allSatisfy { $0.allSatisfy { $0.viaRecord } })
    }
}

extension RecordDecodingTests.FastPerson {
    init(objectId: String, name: String, locale: String, age: Int) {
        self.objectId = objectId
        self.name = name
        self.locale = locale
        self.age = age
    }
}
