import BuriStorage
import Foundation
import Testing
@testable import Buri

/// The store path's shortcuts (no old-record reads into an empty bucket, …) must give exactly the
/// records and index entries the plain path gives: duplicates in one batch, byte-different but
/// canonically equal keys, unique indexes, transactions and other clients' commits.
@Suite("Store path: filling and refilling buckets")
struct StorePathTests {
    /// Every (key, locale, age) the indexes list, read from the index entries alone.
    static func indexed(_ bucket: Bucket<PersonRecord>) throws -> [String: (locale: [String], age: [Int])] {
        var result: [String: (locale: [String], age: [Int])] = [:]
        for locale in ["EN", "DE", "FR"] {
            for key in try bucket.keys(.index("locale", equals: IndexValue(locale))) {
                result[key, default: ([], [])].locale.append(locale)
            }
        }
        for age in 0..<200 {
            for key in try bucket.keys(.index("age", equals: IndexValue(age))) {
                result[key, default: ([], [])].age.append(age)
            }
        }
        return result
    }

    @Test(
        "a batch into an empty bucket that names a key twice keeps the last object and only its index entries",
        arguments: Engine.allCases)
    func duplicatesIntoEmptyBucket(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let people = try test.db.bucket(PersonRecord.self)
        let batch = [
            PersonRecord(objectId: "a", name: "A1", locale: "EN", age: 20),
            PersonRecord(objectId: "b", name: "B", locale: "DE", age: 30),
            PersonRecord(objectId: "a", name: "A2", locale: "FR", age: 21),
            PersonRecord(objectId: "a", name: "A3", locale: "FR", age: 22),
        ]
        try people.store(batch)
        #expect(try people.object(forKey: "a") == batch[3])
        #expect(try people.count() == 2)
        let indexed = try Self.indexed(people)
        #expect(indexed["a"]?.locale == ["FR"])
        #expect(indexed["a"]?.age == [22])
        #expect(indexed["b"]?.locale == ["DE"])
        #expect(try people.raw.entryCount(index: "locale") == 2)
        #expect(try people.raw.entryCount(index: "age") == 2)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "\"é\" (c3 a9) and \"e\\u{301}\" (65 cc 81) in one batch into an empty bucket are two objects with their own entries",
        arguments: Engine.allCases)
    func canonicallyEqualKeysIntoEmptyBucket(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let people = try test.db.bucket(PersonRecord.self)
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(composed == decomposed)  // one String to Swift, two keys to Buri
        try people.store([
            PersonRecord(objectId: composed, name: "1", locale: "EN", age: 1),
            PersonRecord(objectId: decomposed, name: "2", locale: "DE", age: 2),
            PersonRecord(objectId: composed, name: "3", locale: "FR", age: 3),
        ])
        #expect(try people.count() == 2)
        #expect(try people.object(forKey: composed)?.name == "3")
        #expect(try people.object(forKey: decomposed)?.name == "2")
        let entries = try people.raw.keys(.index("age", in: IndexValue(0)...IndexValue(9))).map { Array($0.utf8) }
        #expect(entries == [Array(decomposed.utf8), Array(composed.utf8)])  // ages 2, 3; age 1 replaced
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "unique indexes in a batch into an empty bucket: two claims of a value fail and write nothing; a value freed earlier in the batch can be taken",
        arguments: Engine.allCases)
    func uniqueIntoEmptyBucket(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let accounts = try test.db.bucket(Account.self)
        #expect(throws: BuriError.self) {
            try accounts.store([
                Account(id: "a", email: "same@x", balance: 1),
                Account(id: "b", email: "same@x", balance: 2),
            ])
        }
        #expect(try accounts.count() == 0)
        #expect(try accounts.raw.entryCount(index: "email") == 0)
        try accounts.store([
            Account(id: "a", email: "first@x", balance: 1),
            Account(id: "a", email: "second@x", balance: 1),  // a lets go of first@x …
            Account(id: "b", email: "first@x", balance: 2),  // … which b takes
        ])
        #expect(try accounts.keys(.index("email", equals: "first@x")) == ["b"])
        #expect(try accounts.keys(.index("email", equals: "second@x")) == ["a"])
        #expect(try accounts.raw.entryCount(index: "email") == 2)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "in a transaction, a batch into a bucket empty on disk replaces the objects the transaction stored before it",
        arguments: Engine.allCases)
    func transactionSeesItsOwnRecords(engine: Engine) throws {
        let test = try TestDatabase(engine)
        _ = try test.db.bucket(PersonRecord.self)
        try test.db.write { tx in
            let people = try tx.bucket(PersonRecord.self)
            try people.store((0..<10).map { PersonRecord(objectId: "p\($0)", name: "old", locale: "EN", age: $0) })
            try people.store(
                (0..<10).map { PersonRecord(objectId: "p\($0)", name: "new", locale: "DE", age: 100 + $0) })
        }
        let people = try test.db.bucket(PersonRecord.self)
        let indexed = try Self.indexed(people)
        #expect(indexed.count == 10)
        for n in 0..<10 {
            #expect(indexed["p\(n)"]?.locale == ["DE"])
            #expect(indexed["p\(n)"]?.age == [100 + n])
        }
        #expect(try people.raw.entryCount(index: "locale") == 10)
        #expect(try people.raw.entryCount(index: "age") == 10)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "in a transaction, a large batch over records on disk and records the transaction stored replaces both",
        arguments: Engine.allCases)
    func transactionLargeBatchOverDiskAndPending(engine: Engine) throws {
        let test = try TestDatabase(engine)
        try test.db.bucket(PersonRecord.self).store(
            (0..<150).map { PersonRecord(objectId: "q\($0)", name: "disk", locale: "EN", age: $0 % 40) })
        try test.db.write { tx in
            let people = try tx.bucket(PersonRecord.self)
            try people.store(
                (150..<300).map { PersonRecord(objectId: "q\($0)", name: "pending", locale: "FR", age: $0 % 40) })
            var all = (0..<300).map { PersonRecord(objectId: "q\($0)", name: "new", locale: "DE", age: 100 + $0 % 40) }
            var generator = SeededGenerator(seed: 5)
            all.shuffle(using: &generator)
            try people.store(all)
        }
        let people = try test.db.bucket(PersonRecord.self)
        #expect(try people.keys(.index("locale", equals: "DE")).count == 300)
        #expect(try people.raw.entryCount(index: "locale") == 300)
        #expect(try people.raw.entryCount(index: "age") == 300)
        #expect(try people.keys(.index("age", in: 0...99)).isEmpty)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "a refill leaves no old entry behind: keys again in shuffled order, with gaps short and long, one twice, new ones among them",
        arguments: Engine.allCases)
    func refillReplacesEntries(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let people = try test.db.bucket(PersonRecord.self)
        let count = 1_200  // 3,600 keys: within etcd's 4,096 operations per transaction
        try people.store((0..<count).map { PersonRecord(objectId: "k\($0)", name: "n", locale: "EN", age: $0 % 50) })
        // Every 10th key of the first 600 (gaps longer than a walk steps), every 2nd of the
        // next 400, shuffled; k0 twice; and 20 keys not stored yet. Over RawBucket.walkThreshold.
        let chosen = Set(Array(stride(from: 0, to: 600, by: 10)) + Array(stride(from: 600, to: 1_000, by: 2)))
        var generator = SeededGenerator(seed: 13)
        var again = chosen.sorted().map {
            PersonRecord(objectId: "k\($0)", name: "m", locale: "FR", age: 100 + $0 % 50)
        }
        again.shuffle(using: &generator)
        again.append(PersonRecord(objectId: "k0", name: "last", locale: "DE", age: 199))
        again.append(
            contentsOf: (count..<(count + 20)).map {
                PersonRecord(objectId: "k\($0)", name: "new", locale: "DE", age: 150)
            })
        #expect(again.count >= RawBucket.walkThreshold)
        try people.store(again)
        let indexed = try Self.indexed(people)
        #expect(indexed.count == count + 20)
        for n in 0..<(count + 20) {
            let expected: (String, Int) =
                n == 0
                ? ("DE", 199) : n >= count ? ("DE", 150) : chosen.contains(n) ? ("FR", 100 + n % 50) : ("EN", n % 50)
            #expect(indexed["k\(n)"]?.locale == [expected.0], "k\(n)")
            #expect(indexed["k\(n)"]?.age == [expected.1], "k\(n)")
        }
        #expect(try people.object(forKey: "k0")?.name == "last")
        #expect(try people.raw.entryCount(index: "age") == count + 20)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "a refill of only keys past the last stored one, or before the first, finds no old record and loses none",
        arguments: Engine.allCases)
    func refillOutsideStoredRange(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let people = try test.db.bucket(PersonRecord.self)
        try people.store((0..<10).map { PersonRecord(objectId: "m\($0)", name: "n", locale: "EN", age: $0) })
        let outside =
            (0..<150).map { PersonRecord(objectId: "a\($0)", name: "a", locale: "DE", age: 50) }
            + (0..<150).map { PersonRecord(objectId: "z\($0)", name: "z", locale: "FR", age: 60) }
        var generator = SeededGenerator(seed: 7)
        try people.store(outside.shuffled(using: &generator))
        #expect(try people.count() == 310)
        #expect(try people.keys(.index("locale", equals: "EN")).count == 10)
        #expect(try people.keys(.index("age", equals: 50)).count == 150)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test(
        "on a shared engine, a record another client adds while a batch fills the empty bucket makes the commit retry and replace its entries",
        arguments: Engine.allCases.filter { $0 == .shared || $0 == .etcd })
    func concurrentWriterIntoEmptyBucket(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let a = test.db
        let b = try test.client(1)
        _ = try a.bucket(PersonRecord.self)
        let peopleB = try b.bucket(PersonRecord.self)
        var attempts = 0
        try a.write { tx in
            attempts += 1
            let people = try tx.bucket(PersonRecord.self)
            try people.store((0..<5).map { PersonRecord(objectId: "p\($0)", name: "a", locale: "EN", age: $0) })
            // Another client stores p3 after this attempt found the bucket empty, before it commits.
            if attempts == 1 { try peopleB.store(PersonRecord(objectId: "p3", name: "b", locale: "FR", age: 77)) }
        }
        #expect(attempts == 2)
        let people = try a.bucket(PersonRecord.self)
        #expect(try people.object(forKey: "p3")?.name == "a")
        #expect(try people.keys(.index("locale", equals: "FR")).isEmpty)
        #expect(try people.keys(.index("age", equals: 77)).isEmpty)
        #expect(try people.raw.entryCount(index: "age") == 5)
        #expect(try a.check().problems.isEmpty)
    }

    @Test(
        "a large array is encoded on several cores into exactly the serial path's writes, in order, and stored as the serial path stores it"
    )
    func parallelEncodingMatchesSerial() throws {
        let count = Bucket<PersonRecord>.parallelEncodingThreshold + Bucket<PersonRecord>.encodingChunkSize + 17
        // Keys composed and decomposed, names with NUL bytes and unicode, negative and huge ages.
        let objects = (0..<count).map { n in
            PersonRecord(
                objectId: "p\(n)" + (n % 2 == 0 ? "\u{E9}" : "e\u{301}"),
                name: String(repeating: "\u{1F600}", count: n % 5) + "\0" + String(n),
                locale: ["EN", "DE", "FR"][n % 3], age: n % 3 == 0 ? Int.max - n : n - 5_000)
        }
        let serialTest = try TestDatabase(.memory)
        let serialPeople = try serialTest.db.bucket(PersonRecord.self)
        let serial = try serialPeople.prepareAll(objects, parallel: false)
        let parallel = try serialPeople.prepareAll(objects)
        #expect(serial.count == count)
        #expect(parallel.count == count)
        let same = zip(serial, parallel).allSatisfy { a, b in
            Array(a.key.utf8) == Array(b.key.utf8) && a.value == b.value && a.header == b.header
        }
        #expect(same)

        // Through the public API: the same records as objects stored one batch at a time, serially.
        let test = try TestDatabase(.memory)
        let people = try test.db.bucket(PersonRecord.self)
        try people.storeConcurrently(objects)
        for chunk in stride(from: 0, to: count, by: 1_000) {
            try serialPeople.store(AnySequence(objects[chunk..<Swift.min(count, chunk + 1_000)]))
        }
        for n in stride(from: 0, to: count, by: 97) {
            #expect(
                try people.raw.record(forKey: objects[n].objectId)
                    == serialPeople.raw.record(forKey: objects[n].objectId))
        }
        #expect(try people.count() == count)
        #expect(try people.raw.entryCount(index: "age") == count)
        #expect(try test.db.check().problems.isEmpty)
    }

    @Test("in a parallel encoding, the first object that fails (in array order) is the error, and nothing is stored")
    func parallelEncodingFirstError() throws {
        let test = try TestDatabase(.memory)
        let bucket = try test.db.bucket(Measurement.self)
        let count = Bucket<Measurement>.parallelEncodingThreshold + 100
        var objects = (0..<count).map {
            Measurement(id: "m\($0)", value: Double($0), count: Int64($0), big: UInt64($0), label: nil)
        }
        let early = Bucket<Measurement>.encodingChunkSize + 3, late = count - 2
        objects[late].value = .nan
        objects[early].value = .nan
        let error = #expect(throws: BuriError.self) { try bucket.storeConcurrently(objects) }
        guard case .invalidIndexValue(_, let key, let index, _)? = error else {
            Issue.record("expected invalidIndexValue, got \(String(describing: error))")
            return
        }
        #expect(key == "m\(early)")
        #expect(index == "value")
        #expect(try bucket.count() == 0)
    }
}
