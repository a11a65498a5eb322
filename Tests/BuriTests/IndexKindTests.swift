import Foundation
@testable import Buri
import LevelDB
import Testing

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
        #expect(try notes.keys(.index("tags", equals: "swift")) == ["n1"])
        #expect(try notes.keys(.index("tags", equals: "db")) == ["n1", "n2"])
        #expect(try notes.keys(.index("scores", equals: 2.5)) == ["n1", "n2"])
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

    @Test(arguments: Engine.allCases) func multiValuedUpdateAddsAndRemovesExactlyTheChangedValues(engine: Engine) throws
    {
        try setUp(engine)
        try notes.store(Note("n1", tags: ["a", "b", "c"]))
        try notes.store(Note("n1", tags: ["b", "c", "d"]))
        #expect(try notes.keys(.index("tags", equals: "a")).isEmpty)
        #expect(try notes.keys(.index("tags", equals: "b")) == ["n1"])
        #expect(try notes.keys(.index("tags", equals: "d")) == ["n1"])
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
        #expect(try notes.keys(.index("email", equals: "a@x.org")) == ["mallory"])
    }

    /// A unique value is free within a batch once an earlier write of the batch released it, and
    /// only then: a release later in the batch does not count, nor does one undone by a later
    /// write of the same key.
    @Test(arguments: Engine.allCases) func aUniqueValueReleasedEarlierInABatchIsFreeInIt(engine: Engine) throws {
        try setUp(engine)
        try notes.store([Note("alice", email: "x"), Note("bob", email: "y")])
        // Bob takes x after Alice (stored with x) let it go earlier in the same batch.
        try notes.store([Note("alice", email: "z"), Note("bob", email: "x")])
        #expect(try notes.keys(.index("email", equals: "x")) == ["bob"])
        #expect(try notes.keys(.index("email", equals: "z")) == ["alice"])
        let before = try t.rawKeys()
        // Bob lets x go after Alice claims it: Bob still holds it when Alice's write is checked.
        #expect(throws: BuriError.uniqueViolation(bucket: "Note", index: "email", value: "\"x\"", holder: "bob")) {
            try notes.store([Note("alice", email: "x"), Note("bob", email: "w")])
        }
        // Bob lets x go, Alice takes it, Bob takes it back: Alice holds it then.
        #expect(throws: BuriError.uniqueViolation(bucket: "Note", index: "email", value: "\"x\"", holder: "alice")) {
            try notes.store([Note("bob", email: "w"), Note("alice", email: "x"), Note("bob", email: "x")])
        }
        // Bob lets x go and takes it again before Alice's write: he holds it when hers is checked.
        #expect(throws: BuriError.uniqueViolation(bucket: "Note", index: "email", value: "\"x\"", holder: "bob")) {
            try notes.store([Note("bob", email: "w"), Note("bob", email: "x"), Note("alice", email: "x")])
        }
        #expect(try t.rawKeys() == before)
        // Released twice over (Bob's last write before Alice's has no x): free.
        try notes.store([Note("bob", email: "v"), Note("bob", email: "w"), Note("alice", email: "x")])
        #expect(try notes.keys(.index("email", equals: "x")) == ["alice"])
        #expect(try t.db.check().isConsistent)
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
        #expect(try notes.keys(.index("email", equals: "one")) == ["b"])
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
        #expect(
            try notes.keys(.index("locale_age", leading: ["EN"], from: .exclusive(20), to: .unbounded)) == ["2", "3"])
        #expect(try notes.keys(.index("locale_age", equals: ["EN"], in: 20...30).descending()) == ["2", "1"])
        #expect(try notes.keys(.index("locale_age", prefixBytes: Array("E".utf8))) == ["5", "6", "1", "2", "3"])
        #expect(throws: BuriError.self) { try notes.keys(.index("locale_age", equals: 20)) }  // kinds checked
    }
}
