import Foundation
@testable import Buri
import LevelDB
import Testing

/// "é" precomposed (c3 a9) and decomposed (65 cc 81) are equal Swift Strings but different bytes,
/// so different keys, names and values on disk. Every place that stands for stored bytes must tell
/// them apart.
private let composed = "caf\u{E9}"
private let decomposed = "cafe\u{301}"

/// Two indexes whose names are canonically equal but byte-different, of the same kind.
struct TwinIndexed: BuriSupport, Equatable {
    var id: String
    var first: String
    var second: String

    static let buri = BuriSchema<TwinIndexed>(
        key: \.id,
        indexes: [.binary("\u{E9}", \.first), .binary("e\u{301}", \.second)],
        bucket: "Twins"
    )
}

@Suite("Keys, names and values are compared as bytes")
struct ByteExactTests {
    @Test func theStringsReallyDifferOnlyInBytes() {
        #expect(composed == decomposed)
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
    }

    @Test(arguments: Engine.allCases) func checkAndRepairTellApartObjectsWhoseKeysAreCanonicallyEqual(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try people.store([
            PersonRecord(objectId: composed, name: "composed", locale: "EN", age: 1),
            PersonRecord(objectId: decomposed, name: "decomposed", locale: "NL", age: 2),
            PersonRecord(objectId: "other", name: "other", locale: "EN", age: 3),
        ])
        let report = try t.db.check()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.objects == 3 && report.indexEntries == 6)

        let before = try t.rawKeys()
        let repaired = try t.db.check(repair: true)
        #expect(repaired.problems.isEmpty, "\(repaired.problems)")
        #expect(try t.rawKeys() == before, "repair changed a consistent database")

        // Both objects are still found, each under its own bytes.
        let english = try people.keys(.index("locale", equals: "EN"))
        #expect(english.map { Array($0.utf8) } == [Array(composed.utf8), Array("other".utf8)])
        let dutch = try people.keys(.index("locale", equals: "NL"))
        #expect(dutch.map { Array($0.utf8) } == [Array(decomposed.utf8)])
        #expect(try people.objects(.index("age", in: 1...2)).map(\.name) == ["composed", "decomposed"])
    }

    @Test(arguments: Engine.allCases) func bucketsWhoseNamesAreCanonicallyEqualAreTwoBuckets(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let one = try t.db.bucket(EvolvingPerson.self, named: "\u{E9}")
        let two = try t.db.bucket(EvolvingPerson.self, named: "e\u{301}")
        #expect(one.raw.descriptor.id != two.raw.descriptor.id)
        try one.store(EvolvingPerson(objectId: "a", name: "in one", locale: "EN", age: 1))
        try two.store(EvolvingPerson(objectId: "b", name: "in two", locale: "EN", age: 2))
        #expect(try one.keys() == ["a"] && two.keys() == ["b"])
        #expect(try t.db.bucketNames().map { Array($0.utf8) } == [[0x65, 0xCC, 0x81], [0xC3, 0xA9]])
        #expect(try t.db.rawBucket(named: "e\u{301}").keys(.all) == ["b"])

        // Redefining one bucket makes its old Bucket values stale, and only its own.
        _ = try t.db.bucket(EvolvedPerson.self, named: "\u{E9}")
        #expect(throws: BuriError.self) {
            try one.store(EvolvingPerson(objectId: "c", name: "stale", locale: "EN", age: 3))
        }
        try two.store(EvolvingPerson(objectId: "c", name: "still current", locale: "EN", age: 3))
        #expect(try two.keys(.index("locale", equals: "EN")) == ["b", "c"])

        // Dropping one leaves the other.
        try t.db.dropBucket(named: "\u{E9}")
        #expect(try t.db.bucketNames().map { Array($0.utf8) } == [[0x65, 0xCC, 0x81]])
        #expect(try two.count() == 2)
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func indexesWhoseNamesAreCanonicallyEqualAreTwoIndexes(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let twins = try t.db.bucket(TwinIndexed.self)
        let descriptor = twins.raw.descriptor
        #expect(descriptor.indexes.count == 2)
        let first = try #require(descriptor.index(named: "\u{E9}"))
        let second = try #require(descriptor.index(named: "e\u{301}"))
        #expect(first.id != second.id)
        #expect(Array(first.name.utf8) == [0xC3, 0xA9] && Array(second.name.utf8) == [0x65, 0xCC, 0x81])

        try twins.store([
            TwinIndexed(id: "k1", first: "x", second: "y"), TwinIndexed(id: "k2", first: "y", second: "x"),
        ])
        #expect(try twins.keys(.index("\u{E9}", equals: "x")) == ["k1"])
        #expect(try twins.keys(.index("e\u{301}", equals: "x")) == ["k2"])
        #expect(try twins.keys(Query.index("\u{E9}", equals: "x").and(.index("e\u{301}", equals: "y"))) == ["k1"])
        #expect(try twins.keys(Query.index("\u{E9}", equals: "x").and(.index("e\u{301}", equals: "x"))).isEmpty)

        // Stored index values keep the two names apart.
        let record = try #require(try twins.raw.record(forKey: "k1"))
        #expect(record.indexValues.count == 2)
        #expect(record.indexValues[IndexName("\u{E9}")] == [["x"]])
        #expect(record.indexValues[IndexName("e\u{301}")] == [["y"]])
        #expect(record.indexValues["e\u{301}"] == [["y"]])

        // Raw objects can name both.
        let payload = try #require(try twins.raw.record(forKey: "k2")).payload
        try twins.raw.store([
            RawObject(
                key: "k3", payload: payload,
                indexValues: [IndexName("\u{E9}"): [["z"]], IndexName("e\u{301}"): [["w"]]])
        ])
        #expect(try twins.keys(.index("\u{E9}", equals: "z")) == ["k3"])
        #expect(try twins.keys(.index("e\u{301}", equals: "w")) == ["k3"])

        // Opening the same declarations again keeps both indexes as they are.
        let quiet = ProgressLog()
        let again = try t.db.bucket(TwinIndexed.self) { quiet.append($0) }
        #expect(quiet.all.isEmpty)
        #expect(again.raw.descriptor == descriptor)
        let report = try t.db.check()
        #expect(report.isConsistent && report.indexEntries == 6, "\(report.problems)")
    }

    @Test(arguments: Engine.allCases) func indexValuesThatAreCanonicallyEqualAreDifferentValues(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        // A unique index holds each of them once: they are different values.
        try notes.store(Note("a", tags: [composed], email: composed, locale: composed))
        try notes.store(Note("b", tags: [decomposed, composed], email: decomposed, locale: decomposed))
        #expect(throws: BuriError.self) { try notes.store(Note("c", email: decomposed)) }
        #expect(try notes.keys(.index("email", equals: IndexValue(composed))) == ["a"])
        #expect(try notes.keys(.index("email", equals: IndexValue(decomposed))) == ["b"])
        #expect(try notes.keys(.index("locale", equals: IndexValue(decomposed))) == ["b"])
        #expect(try notes.keys(.index("locale", prefix: "cafe")) == ["b"])
        #expect(try notes.keys(.index("locale", prefix: "caf")) == ["b", "a"])  // 65 cc 81 sorts before c3 a9
        #expect(try notes.keys(.index("tags", equals: IndexValue(composed))) == ["a", "b"])
        #expect(try notes.keys(.index("tags", equals: IndexValue(decomposed))) == ["b"])
        #expect(
            try notes.keys(
                Query.index("tags", equals: IndexValue(composed)).and(.index("email", equals: IndexValue(composed))))
                == ["a"])
        let report = try t.db.check(repair: true)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }
}
