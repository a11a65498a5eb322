import Testing
@testable import Buri

/// Found by the randomized model test: inside a transaction on LevelDB, a query that reads records
/// (a multi-valued order, further conditions, objects) failed with "an index entry points to an
/// object that does not exist" once it had read a record the transaction wrote after the last
/// stored record: the engine's record cursor had run out, and the seek to the next record was
/// ignored. A transaction reads its own writes and everything stored, in any order.
@Suite("A transaction's queries read its own writes and the stored objects in any order")
struct TransactionReadTests {
    struct Tagged: BuriSupport, Equatable {
        var id: String
        var tags: [String]
        var n: Int
        static let buri = BuriSchema<Tagged>(key: \.id, indexes: [.binary("tags", \.tags), .numeric("n", \.n)])
    }

    @Test(arguments: Engine.allCases)
    func queriesMixStoredAndPendingRecords(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.bucket(Tagged.self).store([
            Tagged(id: "a", tags: ["x"], n: 1), Tagged(id: "b", tags: ["x", "y"], n: 2),
            Tagged(id: "c", tags: ["y"], n: 3),
        ])
        try t.db.write { tx in
            let bucket = try tx.bucket(Tagged.self)
            // Keys after every stored one ("z…"), and one before ("0").
            try bucket.store([
                Tagged(id: "zz", tags: ["x"], n: 9), Tagged(id: "zy", tags: ["y"], n: 0),
                Tagged(id: "0", tags: ["x"], n: 5),
            ])
            // Descending over a multi-valued index: the record of "zz" first, then stored ones.
            #expect(try bucket.keys(.index("tags", in: "a"..."z").descending()) == ["zy", "c", "b", "zz", "a", "0"])
            #expect(try bucket.keys(.index("tags", in: "a"..."z")) == ["0", "a", "b", "zz", "c", "zy"])
            // Objects in index order: records looked up out of key order.
            #expect(
                try bucket.objects(.index("n", in: 0...9).descending()).map(\.id) == ["zz", "0", "c", "b", "a", "zy"])
            #expect(try bucket.objects(.index("n", in: 0...9)).map(\.id) == ["zy", "a", "b", "c", "0", "zz"])
            #expect(
                try bucket.keys(.index("n", in: 0...9).and(.index("tags", equals: "x")).descending().offset(1)) == [
                    "0", "b", "a",
                ])
            #expect(try bucket.count(.index("tags", equals: "x")) == 4)
        }
        #expect(try t.db.check().problems.isEmpty)
    }
}
