import BuriEtcd
import Foundation
import Synchronization
import Testing
@testable import Buri

/// OR, NOT and `!=`, filters on unindexed fields, and orders by any index (several keys, ties,
/// objects without a value, top-k): against a plain Swift answer on every engine, with the bad
/// inputs the issue names.
@Suite("OR, NOT, filters and order by any index")
struct PredicateQueryTests {
    /// 90 notes: tags empty for a fifth (no entry in "tags"), ages with many ties.
    static let notes: [Note] = (0..<90).map { i in
        Note(
            String(format: "n%02d", i), tags: Array(["a", "b", "c", "d"].prefix(i % 5)), scores: [Double(i % 4)],
            locale: ["EN", "NL", "DE", "\u{E9}", "e\u{301}"][i % 5], age: 20 + (i * 7) % 13)
    }

    static func keys(_ notes: [Note]) -> [String] { notes.map(\.id) }

    /// `a` before `b` by `parts` (each a comparison result), then by key.
    static func ordered(_ notes: [Note], descendingKey: Bool = false, by parts: (Note, Note) -> Int) -> [String] {
        notes.sorted { a, b in
            let order = parts(a, b)
            if order != 0 { return order < 0 }
            return descendingKey ? a.id > b.id : a.id < b.id
        }.map(\.id)
    }

    static func bytes(_ a: String, _ b: String) -> Int {
        a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : (a.utf8.elementsEqual(b.utf8) ? 0 : 1)
    }

    @Test(arguments: Engine.allCases) func orNotAndNotEqualsMatchWhatSwiftWouldSay(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        let all = Self.notes
        // OR across two indexes: each object once, in key order.
        let englishOrYoung = try notes.keys(Query.index("locale", equals: "EN").or(.index("age", in: ..<23)))
        #expect(englishOrYoung == Self.keys(all.filter { $0.locale == "EN" || $0.age < 23 }))
        // OR nested with AND, and with an IN list, the order of a first AND condition kept.
        let nested = try notes.keys(
            Query.index("age", in: 25...).and(Query.index("locale", in: ["NL", "DE"]).or(.index("tags", equals: "d"))))
        let expectedNested = Self.ordered(
            all.filter { $0.age >= 25 && (["NL", "DE"].contains($0.locale) || $0.tags.contains("d")) }
        ) {
            $0.age < $1.age ? -1 : ($0.age == $1.age ? 0 : 1)
        }
        #expect(nested == expectedNested)
        // NOT: an object without an entry in the index is in the negation (Swift's `!`).
        let untaggedA = try notes.keys(.not(.index("tags", equals: "a")))
        #expect(untaggedA == Self.keys(all.filter { !$0.tags.contains("a") }))
        #expect(untaggedA.contains("n00") && untaggedA.contains("n05"))
        // != compares bytes: "é" (precomposed) is not "e" + combining acute.
        let notPrecomposed = try notes.keys(.where(\Note.locale, notEquals: "\u{E9}"))
        #expect(notPrecomposed == Self.keys(all.filter { !$0.locale.utf8.elementsEqual("\u{E9}".utf8) }))
        #expect(notPrecomposed.count == 72)
        #expect(try notes.count(.index("locale", notEquals: "EN")) == 72)
        // Double negation, and NOT inside OR.
        #expect(
            try notes.keys(.not(.not(.index("locale", equals: "NL")))) == Self.keys(all.filter { $0.locale == "NL" }))
        let either = try notes.keys(Query.not(.index("age", in: 21...)).or(.index("tags", equals: "c")))
        #expect(either == Self.keys(all.filter { $0.age < 21 || $0.tags.contains("c") }))
        // Limit, offset and descending select from that order.
        #expect(
            try notes.keys(
                Query.index("locale", equals: "EN").or(.index("age", in: ..<23)).descending().offset(2).limit(5))
                == Array(englishOrYoung.reversed()[2..<7]))
        // A NOT with nothing to negate matches nothing; an OR of nothing matches nothing.
        #expect(try notes.keys(.not(.all)).isEmpty)
        #expect(try notes.count(.not(.all)) == 0)
        var none = Query.all
        none.predicates = [.any([])]
        #expect(try notes.keys(none).isEmpty)
        // Aggregates over an OR query.
        let sum = try notes.aggregate(
            "age", where: Query.index("locale", equals: "EN").or(.index("locale", equals: "NL")))
        let expectedSum = all.filter { ["EN", "NL"].contains($0.locale) }.map(\.age).reduce(0, +)
        #expect(sum.sum == .integer(Int128(expectedSum)))
    }

    @Test(arguments: Engine.allCases) func orderByAnyIndexWithTiesSeveralKeysAndObjectsWithoutAValue(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        let all = Self.notes
        func age(_ a: Note, _ b: Note) -> Int { a.age < b.age ? -1 : (a.age == b.age ? 0 : 1) }
        // By age, ties by key; descending reverses both.
        #expect(try notes.keys(Query.all.order(by: "age")) == Self.ordered(all, by: age))
        #expect(
            try notes.keys(Query.all.order(by: "age", descending: true))
                == Self.ordered(all, descendingKey: true) { age($1, $0) })
        #expect(
            try notes.keys(Query.all.order(by: "age").descending())
                == Self.ordered(all, descendingKey: true) { age($1, $0) })
        // Filtered by one index, ordered by another, top-k.
        let english = all.filter { $0.locale == "EN" }
        #expect(
            try notes.keys(Query.index("locale", equals: "EN").order(by: "age", descending: true).limit(5))
                == Array(Self.ordered(english, descendingKey: true) { age($1, $0) }.prefix(5)))
        #expect(
            try notes.objects(.where(\Note.locale, equals: "EN").order(by: \Note.age)).map(\.id)
                == Self.ordered(english, by: age))
        // Two keys: locale ascending (bytes), then age descending, ties by key (the first key's direction).
        let twoKeys = Self.ordered(all) { a, b in
            let first = Self.bytes(a.locale, b.locale)
            return first != 0 ? first : age(b, a)
        }
        #expect(try notes.keys(Query.all.order(by: .ascending("locale"), .descending("age"))) == twoKeys)
        #expect(
            try notes.keys(Query.all.order(by: .ascending(\Note.locale)).then(by: .descending(\Note.age))) == twoKeys)
        #expect(
            try notes.keys(Query.all.order(by: .ascending("locale"), .descending("age")).offset(7).limit(11))
                == Array(twoKeys[7..<18]))
        // A multi-valued key: by its smallest value ascending (largest descending); objects with
        // no value (no tags) after all the others, in both directions, in key order.
        func firstTag(_ note: Note, descending: Bool) -> String? {
            descending ? note.tags.max { Self.bytes($0, $1) < 0 } : note.tags.min { Self.bytes($0, $1) < 0 }
        }
        for descending in [false, true] {
            let tagged = all.filter { !$0.tags.isEmpty }
            let untagged = all.filter { $0.tags.isEmpty }
            let expected =
                Self.ordered(tagged, descendingKey: descending) { a, b in
                    let order = Self.bytes(firstTag(a, descending: descending)!, firstTag(b, descending: descending)!)
                    return descending ? -order : order
                } + (descending ? Self.keys(untagged).reversed() : Self.keys(untagged))
            #expect(try notes.keys(Query.all.order(by: "tags", descending: descending)) == expected)
            #expect(try notes.count(Query.all.order(by: "tags", descending: descending)) == all.count)
        }
        // A key no index covers, and an index the bucket lacks: typed errors.
        #expect(throws: BuriError.self) { try notes.keys(Query.all.order(by: "nope")) }
    }

    @Test(arguments: Engine.allCases) func pagesOfOrderedAndOrQueriesResumeExactlyAfterWrites(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        for query in [
            Query.all.order(by: .ascending("locale"), .descending("age")),
            Query.all.order(by: "tags", descending: true),
            Query.index("locale", equals: "EN").or(.index("tags", equals: "d")),
        ] {
            var walked: [String] = []
            var page = try notes.keyPage(query, size: 7)
            walked += page.items
            while let next = page.next {
                // The token travels as text.
                let token = try ContinuationToken(parsing: next.description)
                page = try notes.keyPage(query.after(token), size: 7)
                walked += page.items
            }
            #expect(walked == (try notes.keys(query)), "\(query)")
            // A token is bound to its query: another order is refused, typed.
            let first = try notes.keyPage(query, size: 3)
            let other = Query.all.order(by: "age")
            #expect(throws: BuriError.self) { try notes.keyPage(other.after(first.next), size: 3) }
        }
        // Writes between pages of a two-key order: the walk goes on after the last position.
        let query = Query.all.order(by: .ascending("locale"), .descending("age"))
        let first = try notes.keyPage(query, size: 10)
        try notes.store(Note("a-new", locale: "DE", age: 99))  // before the position: not returned
        try notes.store(Note("z-new", locale: "\u{E9}", age: 99))  // after it: returned
        _ = try notes.delete(key: first.items[9])
        var rest: [String] = []
        var page = try notes.keyPage(query.after(first.next), size: 10)
        rest += page.items
        while let next = page.next {
            page = try notes.keyPage(query.after(next), size: 10)
            rest += page.items
        }
        let now = try notes.keys(query)
        let position = try #require(now.firstIndex(of: first.items[8]))
        #expect(rest == Array(now[(position + 1)...]))
        #expect(rest.contains("z-new") && !rest.contains("a-new"))
    }

    @Test(arguments: Engine.allCases) func filtersScanOnlyTheCandidatesAndStopAtTheLimit(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        let calls = Atomic<Int>(0)
        let hasTwoTags = Query.index("locale", equals: "EN").filter { (note: Note) in
            calls.add(1, ordering: .relaxed)
            return note.tags.count == 2
        }
        #expect(try notes.keys(hasTwoTags) == Self.keys(Self.notes.filter { $0.locale == "EN" && $0.tags.count == 2 }))
        // Only the candidates of the indexed condition were decoded.
        #expect(calls.load(ordering: .relaxed) == 18)
        // With a limit the scan stops as soon as enough passed.
        calls.store(0, ordering: .relaxed)
        let everyone = Query.filter { (note: Note) in
            calls.add(1, ordering: .relaxed)
            return true
        }
        #expect(try notes.keys(everyone.limit(3)) == ["n00", "n01", "n02"])
        #expect(calls.load(ordering: .relaxed) == 3)
        // A key path filter, a NOT of a filter, a filter inside an OR, and the typed bucket's form.
        #expect(
            try notes.keys(Query.all.filter(\Note.email) { $0.hasPrefix("n1") })
                == Self.keys(Self.notes.filter { $0.email.hasPrefix("n1") }))
        let notTwo = Query.not(Query.filter { (note: Note) in note.tags.count == 2 })
        #expect(try notes.count(notTwo) == Self.notes.filter { $0.tags.count != 2 }.count)
        let orFiltered = Query.index("age", equals: 20).or(Query.filter { (note: Note) in note.id.hasSuffix("7") })
        #expect(try notes.keys(orFiltered) == Self.keys(Self.notes.filter { $0.age == 20 || $0.id.hasSuffix("7") }))
        #expect(
            try notes.objects(.index("age", in: 20...24), filter: { $0.locale == "NL" }).map(\.id)
                == Self.ordered(Self.notes.filter { (20...24).contains($0.age) && $0.locale == "NL" }) { a, b in
                    a.age < b.age ? -1 : (a.age == b.age ? 0 : 1)
                })
        // A filter that decodes another type: a typed decoding error naming bucket and key.
        struct Other: Decodable { var missing: Int }
        #expect {
            try notes.keys(Query.filter { (_: Other) in true })
        } throws: { error in
            guard case .decodingFailed(let bucket, let key, _, _) = error as? BuriError else { return false }
            return bucket == "Note" && key == "n00"
        }
        // A decoded projection is fine: only the fields it names are read.
        struct Projection: Decodable { var age: Int }
        #expect(
            try notes.count(Query.filter { (p: Projection) in p.age == 20 }) == Self.notes.filter { $0.age == 20 }.count
        )
    }

    @Test(arguments: Engine.allCases) func badInputIsATypedErrorOrACorrectEmptyAnswer(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let notes = try t.db.bucket(Note.self)
        try notes.store(Self.notes)
        // IN with no values: nothing; with 100,000 values on LevelDB
        // (20,000 elsewhere; InQueryTests also asks 100,000 in memory): exactly the ones present.
        #expect(try notes.keys(.index("age", in: [IndexValue]())).isEmpty)
        let many = (0..<(engine == .leveldb ? 100_000 : 20_000)).map { IndexValue($0 * 2) }
        #expect(
            try notes.keys(.index("age", in: many))
                == Self.ordered(Self.notes.filter { $0.age % 2 == 0 }) { a, b in
                    a.age < b.age ? -1 : (a.age == b.age ? 0 : 1)
                })
        #expect(
            try notes.count(Query.index("age", in: many).or(.index("locale", equals: "NL")))
                == Self.notes.filter { $0.age % 2 == 0 || $0.locale == "NL" }.count)
        // Contradictory ranges: an empty answer.
        #expect(try notes.keys(.index("age", from: .inclusive(30), to: .inclusive(20))).isEmpty)
        #expect(try notes.keys(Query.index("age", in: 20...22).and(.index("age", in: 30...))).isEmpty)
        #expect(try notes.keys(Query.index("age", from: .exclusive(25), to: .exclusive(25)).or(.not(.all))).isEmpty)
        // A string index queried with a number, inside an OR and a NOT: typed.
        #expect(throws: BuriError.self) { try notes.keys(Query.all.or(.index("locale", equals: 5))) }
        #expect(throws: BuriError.self) { try notes.keys(.not(.index("locale", equals: 5))) }
        // A key path of another type: typed, naming both types.
        #expect {
            try notes.keys(.where(\PersonRecord.age, in: 20...29))
        } throws: { error in
            guard case .invalidQuery(_, _, let reason) = error as? BuriError else { return false }
            return reason.contains("PersonRecord") && reason.contains("Note")
        }
        #expect(throws: BuriError.self) { try notes.keys(Query.all.order(by: \PersonRecord.age)) }
        #expect(throws: BuriError.self) {
            try notes.count(Query.index("age", equals: 3).or(.where(\PersonRecord.locale, equals: "EN")))
        }
        let lazy = notes.lazyKeys(.where(\PersonRecord.age, equals: 3))
        #expect(Array(lazy).isEmpty && lazy.error != nil)
        // A sort key by a key path no index covers: typed, naming type and key path.
        #expect {
            try notes.keys(Query.all.order(by: .ascending(\Note.id)))
        } throws: { error in
            guard case .unindexedKeyPath(let type, let keyPath) = error as? BuriError else { return false }
            return type == "Note" && keyPath.contains("id")
        }
    }

    @Test(arguments: Engine.allCases) func transactionsReadTheirOwnWritesThroughTheNewForms(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(Note.self).store(Self.notes)
        try t.db.write { tx in
            let notes = try tx.bucket(Note.self)
            try notes.store(Note("tx1", locale: "XX", age: 5))
            _ = try notes.delete(key: "n00")
            #expect(try notes.keys(Query.index("locale", equals: "XX").or(.index("age", in: ..<6))) == ["tx1"])
            #expect(try notes.keys(Query.all.order(by: "age").limit(1)) == ["tx1"])
            #expect(!(try notes.keys(.not(.index("locale", equals: "XX")))).contains("n00"))
            #expect(try notes.count(Query.filter { (note: Note) in note.locale == "XX" }) == 1)
            // A caught error leaves no trace, and the queries go on reading the transaction's state.
            #expect(throws: BuriError.self) { try notes.store(Note("dup", email: "n01@example.com")) }
            #expect(try notes.count(.not(.all)) == 0)
            #expect(try notes.keys(.index("email", equals: "n01@example.com")) == ["n01"])
        }
        let notes = try t.db.bucket(Note.self)
        #expect(try notes.keys(Query.all.order(by: "age").limit(1)) == ["tx1"])
    }
}

/// Live queries of the new forms. (Named for the observation run of Scripts/test, which runs apart
/// from the long synchronous suites that would hold the cooperative threads its consumers need.)
@Suite("OR, NOT, filters and order: live queries")
struct ObservationTestsOfPredicates {
    @Test(arguments: Engine.allCases) func liveQueriesOfOrQueriesWakeOnlyForTheirRanges(engine: Engine) async throws {
        let t = try TestDatabase(engine)
        let people = try t.db.bucket(PersonRecord.self)
        try await people.store([
            PersonRecord(objectId: "p0", name: "a", locale: "EN", age: 30),
            PersonRecord(objectId: "q0", name: "z", locale: "NL", age: 30),
        ])
        let emissions = Shared<[[String]]>([])
        let live = try people.observe(Query.index("locale", in: ["EN", "FR"]).or(.index("age", in: ..<10)))
        let consumer = Task {
            for try await found in live { emissions.update { $0.append(found.map(\.name)) } }
        }
        try await eventually("the first emission") { emissions.current.count == 1 }
        // Outside every range of the OR (and between the IN list's values): nothing to redraw.
        for i in 0..<20 {
            try await people.store(PersonRecord(objectId: "q\(i)", name: "n\(i)", locale: "DE", age: 20 + i))
        }
        // Inside one of its ranges: one emission each.
        try await people.store(PersonRecord(objectId: "q3", name: "young", locale: "DE", age: 3))
        try await eventually("the object that moved in") { emissions.current.count == 2 }
        try await people.store(PersonRecord(objectId: "r0", name: "fr", locale: "FR", age: 50))
        try await eventually("a new object in the IN list") { emissions.current.count == 3 }
        #expect(emissions.current == [["a"], ["a", "young"], ["a", "young", "fr"]])
        consumer.cancel()
        _ = await consumer.result
    }
}

/// On etcd an IN list or an OR reads in a bounded number of requests, not one per value per object.
@Suite("etcd: IN and OR read in batches")
struct EtcdPredicateRoundTripTests {
    static let engines = [Engine.etcd].filter(Engine.allCases.contains)

    @Test(arguments: engines) func inAndOrQueriesCostABoundedNumberOfRequests(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let etcd = try #require(t.db.engine as? EtcdEngine)
        let people = try t.db.bucket(PersonRecord.self)
        let all = (0..<600).map { i in
            PersonRecord(
                objectId: String(format: "p%05d", i), name: "n\(i)", locale: ["EN", "NL", "DE", "FR"][i % 4],
                age: i % 60)
        }
        try people.store(all)
        func requests(_ body: () throws -> Void) rethrows -> Int {
            let before = etcd.client.requestCount
            try body()
            return etcd.client.requestCount - before
        }
        var found: [PersonRecord] = []
        let inRequests = try requests {
            found = try people.objects(.index("age", in: (0..<60).filter { $0 % 3 == 0 }.map { IndexValue($0) }))
        }
        #expect(found.count == 200)
        #expect(inRequests < 40, "\(inRequests) requests for an IN of 20 values over \(found.count) objects")
        let orRequests = try requests {
            found = try people.objects(Query.index("locale", equals: "FR").or(.index("age", in: ..<5)))
        }
        #expect(Set(found) == Set(all.filter { $0.locale == "FR" || $0.age < 5 }))
        #expect(orRequests < 40, "\(orRequests) requests for an OR over \(found.count) objects")
        // A selective OR collects its few objects, reading their records in batches.
        let fewRequests = try requests {
            found = try people.objects(Query.index("age", equals: 7).or(.index("age", equals: 8)))
        }
        #expect(found.count == 20)
        #expect(fewRequests < 12, "\(fewRequests) requests for an OR of 20 objects")
    }
}

/// The calls of the README's "Queries" table, run as written (on `PersonRecord`, whose `name` has
/// no index), against a plain Swift answer.
@Suite("README: the queries table's calls")
struct ReadmeQueriesTableTests {
    @Test func everyCallOfTheTableAnswersItsQuestion() throws {
        let t = try TestDatabase(.memory)
        let people = try t.db.bucket(PersonRecord.self)
        let all = (0..<200).map { i in
            PersonRecord(
                objectId: String(format: "p%03d", i), name: ["Ann", "Bob", "Al", "Cy"][i % 4],
                locale: ["EN", "NL", "DE"][i % 3], age: (i * 37) % 90)
        }
        try people.store(all)
        func ids(_ found: [PersonRecord]) -> Set<String> { Set(found.map(\.objectId)) }
        func ids(_ found: [PersonRecord], _ keep: (PersonRecord) -> Bool) -> Set<String> { ids(found.filter(keep)) }
        #expect(ids(try people.objects(where: \.locale, equals: "EN")) == ids(all) { $0.locale == "EN" })
        #expect(ids(try people.objects(where: \.age, in: 20...29)) == ids(all) { (20...29).contains($0.age) })
        #expect(
            ids(
                try people.objects(
                    Query.where(\PersonRecord.locale, in: ["EN", "NL"]).and(.where(\PersonRecord.age, in: 20...29))))
                == ids(all) { ["EN", "NL"].contains($0.locale) && (20...29).contains($0.age) })
        #expect(
            ids(
                try people.objects(
                    Query.where(\PersonRecord.locale, equals: "EN").or(.where(\PersonRecord.age, in: ..<10))))
                == ids(all) { $0.locale == "EN" || $0.age < 10 })
        #expect(
            ids(try people.objects(.where(\PersonRecord.locale, notEquals: "EN"))) == ids(all) { $0.locale != "EN" })
        let oldest = try people.objects(
            Query.where(\PersonRecord.locale, equals: "EN").order(by: \PersonRecord.age, descending: true).limit(50))
        let expectedOldest = all.filter { $0.locale == "EN" }.sorted { ($0.age, $0.objectId) > ($1.age, $1.objectId) }
        #expect(oldest == Array(expectedOldest.prefix(50)))
        let sorted = try people.objects(Query.all.order(by: .ascending("locale"), .descending("age")))
        #expect(sorted == all.sorted { ($0.locale, -$0.age, $0.objectId) < ($1.locale, -$1.age, $1.objectId) })
        #expect(
            ids(try people.objects(.where(\PersonRecord.age, in: 20...29), filter: { $0.name.hasPrefix("A") }))
                == ids(all) { (20...29).contains($0.age) && $0.name.hasPrefix("A") })
        #expect(try people.count(where: \.locale, equals: "EN") == all.filter { $0.locale == "EN" }.count)
        let groups = try people.aggregate("age", groupedBy: "locale")
        #expect(groups.map { $0.value } == [IndexValue("DE"), IndexValue("EN"), IndexValue("NL")])
        for group in groups {
            #expect(group.aggregate.count == all.filter { IndexValue($0.locale) == group.value }.count)
        }
    }

    @Test func signaturesOfOlderQueriesAreUnchangedAndNewOnesExtendThem() throws {
        let plain = Query.index("locale", equals: "EN").and(.index("age", in: 20...29))
        // The vector of FORMAT.md §11, unchanged by the new parts of a query.
        #expect(ContinuationFormat.fingerprint(of: plain) == 0xF058_B7A0_8939_09C2)
        let ordered = plain.order(by: .descending("age"))
        let signature = ContinuationFormat.signature(of: ordered)
        #expect(signature.starts(with: ContinuationFormat.signature(of: plain)))
        #expect(signature.dropFirst(ContinuationFormat.signature(of: plain).count).first == 0xF0)
        #expect(ContinuationFormat.fingerprint(of: ordered) != ContinuationFormat.fingerprint(of: plain))
        #expect(
            ContinuationFormat.fingerprint(of: plain.or(.index("age", equals: 3)))
                != ContinuationFormat.fingerprint(of: plain.and(.index("age", equals: 3))))
        // A b2 token round-trips through its text; cut short, it is refused with a typed error.
        let token = ContinuationToken(
            bucket: 1, order: 2, fingerprint: 3, returned: 4, position: [3, 0, 0, 0, 1, 0, 0, 0, 2, 0x20, 0x70],
            secondary: [1, 0xFE, 2])
        #expect(token.description.hasPrefix("b2"))
        let parsed = try ContinuationToken(parsing: token.description)
        #expect(parsed == token && parsed.secondary == [1, 0xFE, 2])
        let cut = String(token.description.prefix(40))
        #expect(throws: BuriError.self) { try ContinuationToken(parsing: cut) }
    }
}
