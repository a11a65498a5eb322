import Foundation
@testable import Buri
import LevelDB
import Testing

struct Note: BuriSupport, Equatable {
    var id: String
    var tags: [String]
    var scores: [Double]
    var email: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Note>(
        key: \.id,
        indexes: [
            .binary("tags", \.tags),
            .numeric("scores", \.scores),
            .binary("email", \.email, unique: true),
            .compound("locale_age", .binary(\.locale), .numeric(\.age)),
            .binary("locale", \.locale),
            .numeric("age", \.age),
        ]
    )

    init(_ id: String, tags: [String] = [], scores: [Double] = [], email: String? = nil, locale: String = "EN", age: Int = 0) {
        self.id = id
        self.tags = tags
        self.scores = scores
        self.email = email ?? "\(id)@example.com"
        self.locale = locale
        self.age = age
    }
}

@Suite("Multi-valued, unique and compound indexes")
final class IndexKindTests {
    var t: TestDatabase!
    var notes: Bucket<Note>!

    func setUp(_ engine: Engine) throws {
        t = try TestDatabase(engine)
        notes = try t.db.bucket(Note.self)
    }

    @Test(arguments: Engine.allCases) func multiValuedIndexWritesOneEntryPerDistinctValue(engine: Engine) throws {
        try setUp(engine)
        try notes.store(Note("n1", tags: ["swift", "db", "swift"], scores: [1, 2.5]))
        try notes.store(Note("n2", tags: ["db"], scores: [2.5]))
        #expect(try notes.keys(index: "tags", equalTo: "swift") == ["n1"])
        #expect(try notes.keys(index: "tags", equalTo: "db") == ["n1", "n2"])
        #expect(try notes.keys(index: "scores", equalTo: 2.5) == ["n1", "n2"])
        #expect(try notes.count(.index("tags", prefix: "")) == 2)  // n1 and n2, each once
        let record = try notes.raw.record(forKey: "n1")
        #expect(record?.indexValues["tags"]?.count == 2)
    }

    @Test(arguments: Engine.allCases) func anObjectWithSeveralValuesInARangeIsOneResult(engine: Engine) throws {
        try setUp(engine)
        try notes.store([Note("n1", tags: ["a", "b", "c"], scores: [1, 2, 3]), Note("n2", tags: ["b"], scores: [2])])
        #expect(try notes.keys(.index("tags", in: "a"..."c")) == ["n1", "n2"])
        #expect(try notes.keys(.index("tags", prefix: "")) == ["n1", "n2"])
        #expect(try notes.objects(.index("scores", in: 1...3).descending()).map(\.id) == ["n1", "n2"])
        #expect(try notes.count(.index("scores", in: 0...10)) == 2)
        #expect(try notes.keys(.index("tags", in: "a"..."c").offset(1)) == ["n2"])
    }

    @Test(arguments: Engine.allCases) func multiValuedUpdateAddsAndRemovesExactlyTheChangedValues(engine: Engine) throws {
        try setUp(engine)
        try notes.store(Note("n1", tags: ["a", "b", "c"]))
        try notes.store(Note("n1", tags: ["b", "c", "d"]))
        #expect(try notes.keys(index: "tags", equalTo: "a").isEmpty)
        #expect(try notes.keys(index: "tags", equalTo: "b") == ["n1"])
        #expect(try notes.keys(index: "tags", equalTo: "d") == ["n1"])
        try notes.store(Note("n1", tags: []))
        #expect(try notes.count(.index("tags", prefix: "")) == 0)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func uniqueIndexRefusesASecondHolderAndWritesNothing(engine: Engine) throws {
        try setUp(engine)
        try notes.store(Note("alice", email: "a@x.org"))
        let before = try t.rawKeys()
        do {
            try notes.store(Note("mallory", email: "a@x.org"))
            Issue.record("a taken unique value was stored twice")
        } catch {
            #expect(error == .uniqueViolation(bucket: "Note", index: "email", value: "\"a@x.org\"", holder: "alice"))
        }
        #expect(try t.rawKeys() == before)
        // The holder itself can be stored again, changed or not.
        try notes.store(Note("alice", email: "a@x.org", age: 5))
        #expect(try notes.object(forKey: "alice")?.age == 5)
        // Once released, the value is free.
        try notes.store(Note("alice", email: "alice@x.org"))
        try notes.store(Note("mallory", email: "a@x.org"))
        #expect(try notes.keys(index: "email", equalTo: "a@x.org") == ["mallory"])
    }

    @Test(arguments: Engine.allCases) func canonicallyEquivalentKeysAreDistinctObjects(engine: Engine) throws {
        try setUp(engine)
        // "é" precomposed and decomposed are equal Swift Strings but different keys on disk.
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        try notes.store([Note(composed, email: "same")])
        #expect(throws: BuriError.self) { try notes.store(Note(decomposed, email: "same")) }
        try notes.store([Note(decomposed, email: "other", age: 2)])
        #expect(try notes.count() == 2)
        #expect(try notes.object(forKey: composed)?.age == 0)
        #expect(try notes.delete(keys: [composed, decomposed]) == 2)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func uniqueValuesCanMoveBetweenObjectsInOneBatch(engine: Engine) throws {
        try setUp(engine)
        try notes.store([Note("a", email: "one"), Note("b", email: "two")])
        try notes.store([Note("a", email: "three"), Note("b", email: "one")])
        #expect(try notes.keys(index: "email", equalTo: "one") == ["b"])
        #expect(throws: BuriError.self) { try notes.store([Note("c", email: "x"), Note("d", email: "x")]) }
        #expect(try notes.object(forKey: "c") == nil)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func compoundIndexAnswersEqualityThenRange(engine: Engine) throws {
        try setUp(engine)
        try notes.store([
            Note("1", locale: "EN", age: 20), Note("2", locale: "EN", age: 25), Note("3", locale: "EN", age: 31),
            Note("4", locale: "NL", age: 22), Note("5", locale: "E", age: 22), Note("6", locale: "EN", age: -3),
        ])
        #expect(try notes.keys(.index("locale_age", equals: ["EN"], in: 20...30)) == ["1", "2"])
        #expect(try notes.keys(.index("locale_age", equals: "EN")) == ["6", "1", "2", "3"])
        #expect(try notes.keys(.index("locale_age", equals: "EN", 25)) == ["2"])
        #expect(try notes.keys(.index("locale_age", leading: ["EN"], from: .exclusive(20), to: .unbounded)) == ["2", "3"])
        #expect(try notes.keys(.index("locale_age", equals: ["EN"], in: 20...30).descending()) == ["2", "1"])
        #expect(try notes.keys(.index("locale_age", prefixBytes: Array("E".utf8))) == ["5", "6", "1", "2", "3"])
        #expect(throws: BuriError.self) { try notes.keys(.index("locale_age", equals: 20)) }  // kinds checked
    }
}

@Suite("Combined conditions, order and paging")
final class CombinedQueryTests {
    var t: TestDatabase!
    var notes: Bucket<Note>!

    func setUp(_ engine: Engine) throws {
        t = try TestDatabase(engine)
        notes = try t.db.bucket(Note.self)
        let locales = ["EN", "NL", "DE"]
        try notes.store((0..<300).map { Note(String(format: "n%03d", $0), tags: $0 % 10 == 0 ? ["ten"] : [], locale: locales[$0 % 3], age: $0 % 50) })
    }

    @Test(arguments: Engine.allCases) func andOfTwoIndexesReturnsExactlyTheIntersection(engine: Engine) throws {
        try setUp(engine)
        let query = Query.index("locale", equals: "EN").and(.index("age", in: 10...12))
        let expected = (0..<300).filter { $0 % 3 == 0 && (10...12).contains($0 % 50) }.map { String(format: "n%03d", $0) }
        #expect(Set(try notes.keys(query)) == Set(expected))
        #expect(try notes.count(query) == expected.count)
        #expect(try notes.objects(query).allSatisfy { $0.locale == "EN" && (10...12).contains($0.age) })
        let three = Query.index("tags", equals: "ten").and(.index("locale", equals: "EN")).and(.index("age", in: 0...10))
        let expectedThree = (0..<300).filter { $0 % 30 == 0 && $0 % 50 <= 10 }.map { String(format: "n%03d", $0) }
        #expect(expectedThree == ["n000", "n060", "n150", "n210"])
        #expect(Set(try notes.keys(three)) == Set(expectedThree))
    }

    @Test(arguments: Engine.allCases) func andChecksFurtherConditionsFromHeadersAndDecodesOnlyMatches(engine: Engine) throws {
        try setUp(engine)
        // Damage the payload of every object that fails the second condition: if the query decoded
        // non-matching objects it would throw.
        let matching = Set(try notes.keys(.index("tags", equals: "ten")))
        t.db.close()
        let storage = try Database(path: t.path)
        for entry in try storage.entries(in: .prefix([Keyspace.recordTag])) {
            let key = String(decoding: entry.key.dropFirst(5), as: UTF8.self)
            if !matching.contains(key) {
                let (_, offset) = try entry.value.withUnsafeBytes { try RecordHeader.parse($0) }
                try storage.put(entry.key, Array(entry.value[..<offset]) + [0xFF, 0x00])
            }
        }
        storage.close()
        try t.reopen()
        let reopened = try t.db.bucket(Note.self)
        let found = try reopened.objects(Query.index("locale", equals: "EN").and(.index("tags", equals: "ten")))
        #expect(found.map(\.id) == ["n000", "n030", "n060", "n090", "n120", "n150", "n180", "n210", "n240", "n270"])
        #expect(try reopened.count(Query.index("age", in: 0...49).and(.index("tags", equals: "ten"))) == 30)
    }

    @Test(arguments: Engine.allCases) func limitOffsetAndDescendingCompose(engine: Engine) throws {
        try setUp(engine)
        let all = try notes.keys(.index("age", in: 0...49))
        #expect(all.count == 300)
        #expect(try notes.keys(.index("age", in: 0...49).offset(10).limit(5)) == Array(all[10..<15]))
        #expect(try notes.keys(.index("age", in: 0...49).descending().limit(5)) == Array(all.reversed().prefix(5)))
        #expect(try notes.keys(.index("age", in: 0...49).limit(0)).isEmpty)
    }

    @Test(arguments: Engine.allCases) func continuationResumesExactlyAfterTheLastResultDespiteConcurrentWrites(engine: Engine) throws {
        try setUp(engine)
        let query = Query.index("age", in: 10...20)
        let first = try notes.keyPage(query, size: 25)
        #expect(first.items.count == 25)
        let token = try #require(first.next)
        let last = try #require(first.items.last)
        let lastAge = try #require(try notes.object(forKey: last)).age
        // Between pages: delete the next few results, add objects before and after the position.
        let upcoming = Array(try notes.keys(query.after(token)).prefix(3))
        try notes.delete(keys: upcoming)
        try notes.store([Note("a-before", locale: "EN", age: 10), Note("z-after", locale: "EN", age: 20), Note("n999", locale: "EN", age: lastAge)])
        var rest: [String] = []
        var page = try notes.keyPage(query.after(token), size: 25)
        rest += page.items
        while let next = page.next {
            page = try notes.keyPage(query.after(next), size: 25)
            rest += page.items
        }
        let everything = try notes.keys(query)
        let position = try #require(everything.firstIndex(of: last))
        #expect(rest == Array(everything[(position + 1)...]))
        #expect(!rest.contains("a-before"))
        #expect(rest.contains("z-after") && rest.contains("n999"))
        #expect(Set(rest).isDisjoint(with: upcoming))
        // Tokens survive a round trip through their printed form.
        #expect(ContinuationToken(token.description) == token)
        #expect(ContinuationToken("zz") == nil)
    }

    @Test(arguments: Engine.allCases) func descendingPagesWalkBackwards(engine: Engine) throws {
        try setUp(engine)
        let query = Query.index("locale", equals: "NL").descending()
        var seen: [Note] = []
        var page = try notes.page(query, size: 7)
        seen += page.items
        while let next = page.next {
            page = try notes.page(query.after(next), size: 7)
            seen += page.items
        }
        #expect(seen.map(\.id) == (try notes.keys(query)))
        #expect(seen.count == 100)
    }

    @Test(arguments: Engine.allCases) func minAndMaxComeFromTheIndexAlone(engine: Engine) throws {
        try setUp(engine)
        #expect(try notes.min(index: "age") == 0)
        #expect(try notes.max(index: "age") == 49)
        #expect(try notes.min(index: "tags") == "ten")
        try notes.deleteAll()
        #expect(try notes.min(index: "age") == nil)
    }
}

struct EvolvingPerson: BuriSupport {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<EvolvingPerson>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
        bucket: "People"
    )
}

/// The same stored objects, declared with the age index removed, a new name index and the
/// locale index redefined as unique-free version 2.
struct EvolvedPerson: BuriSupport {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<EvolvedPerson>(
        key: \.objectId,
        indexes: [.binary("name", \.name), .binary("locale", \.locale, version: 2)],
        bucket: "People"
    )
}

@Suite("Index evolution")
struct IndexEvolutionTests {
    @Test(arguments: Engine.allCases) func changedDeclarationsRebuildAndDropEntriesOver100kObjects(engine: Engine) throws {
        let t = try TestDatabase(engine)
        // etcd commits at most --max-txn-ops (4096 in the tests' cluster) writes atomically, over
        // the network: a smaller database there, stored and rebuilt in batches that fit.
        let count = engine == .etcd ? 5_000 : 100_000
        let original = try t.db.bucket(EvolvingPerson.self)
        let people = (0..<count).map { EvolvingPerson(objectId: String(format: "p%06d", $0), name: "name\($0 % 100)", locale: $0 % 2 == 0 ? "EN" : "NL", age: $0 % 90) }
        for start in stride(from: 0, to: count, by: engine == .etcd ? 1_000 : count) {
            try original.store(Array(people[start ..< min(count, start + (engine == .etcd ? 1_000 : count))]))
        }
        let before = try t.db.bucketInfo(named: "People")
        let oldAgeId = try #require(before?.index(named: "age")?.id)

        let reports = ProgressLog()
        let evolved = try t.db.bucket(EvolvedPerson.self, batchSize: count / 10) { reports.append($0) }
        let last = try #require(reports.all.last)
        #expect(last.processed == count && last.total == count)
        #expect(reports.all.count == 10)
        #expect(Set(last.building) == ["name", "locale"])
        #expect(last.dropping == ["age", "locale"] || Set(last.dropping) == ["age", "locale"])

        #expect(try evolved.count(.index("name", equals: "name7")) == count / 100)
        #expect(try evolved.count(.index("locale", equals: "EN")) == count / 2)
        #expect(throws: BuriError.self) { try evolved.keys(.index("age", equals: 1)) }
        let after = try #require(try t.db.bucketInfo(named: "People"))
        #expect(after.indexes.map(\.name) == ["name", "locale"])
        #expect(after.index(named: "locale")?.version == 2)
        #expect(!after.indexes.contains { $0.id == oldAgeId })
        // Nothing remains under the dropped index's id.
        let prefix = Keyspace.indexPrefix(bucket: after.id, index: oldAgeId)
        #expect(try t.rawKeys().allSatisfy { !$0.starts(with: prefix) })
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems.prefix(5))")
        #expect(report.indexEntries == 2 * count)

        // Opening again with the same declarations changes nothing.
        let quiet = ProgressLog()
        _ = try t.db.bucket(EvolvedPerson.self) { quiet.append($0) }
        #expect(quiet.all.isEmpty)
    }

    @Test(arguments: Engine.allCases) func aBucketOpenedBeforeItWasRedefinedRefusesToWrite(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let old = try t.db.bucket(EvolvingPerson.self)
        try old.store(EvolvingPerson(objectId: "p", name: "n", locale: "EN", age: 1))
        let new = try t.db.bucket(EvolvedPerson.self)
        do {
            try old.store(EvolvingPerson(objectId: "q", name: "n", locale: "EN", age: 2))
            Issue.record("a stale Bucket wrote with index ids the catalog no longer has")
        } catch {
            #expect(error.description.contains("open it again"))
        }
        #expect(throws: BuriError.self) { try old.delete(key: "p") }
        try new.store(EvolvedPerson(objectId: "q", name: "m", locale: "NL", age: 2))
        #expect(try old.object(forKey: "q")?.name == "m")   // reads still work
        #expect(try t.db.check().isConsistent)
        // Opening the same declarations again does not invalidate anything.
        _ = try t.db.bucket(EvolvedPerson.self)
        try new.store(EvolvedPerson(objectId: "r", name: "m", locale: "NL", age: 3))
    }

    @Test(arguments: Engine.allCases) func addingAUniqueIndexOverDuplicatesFailsAndKeepsTheOldDefinition(engine: Engine) throws {
        struct Loose: BuriSupport {
            var id: String
            var email: String
            static let buri = BuriSchema<Loose>(key: \.id, bucket: "Accounts")
        }
        struct Strict: BuriSupport {
            var id: String
            var email: String
            static let buri = BuriSchema<Strict>(key: \.id, indexes: [.binary("email", \.email, unique: true)], bucket: "Accounts")
        }
        let t = try TestDatabase(engine)
        try t.db.bucket(Loose.self).store([Loose(id: "a", email: "same"), Loose(id: "b", email: "same")])
        #expect(throws: BuriError.self) { try t.db.bucket(Strict.self) }
        #expect(try t.db.bucketInfo(named: "Accounts")?.indexes.isEmpty == true)
    }
}

final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [IndexBuildProgress] = []
    func append(_ progress: IndexBuildProgress) { lock.withLock { entries.append(progress) } }
    var all: [IndexBuildProgress] { lock.withLock { entries } }
}
