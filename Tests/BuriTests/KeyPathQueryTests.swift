import Foundation
@testable import Buri
import Testing

/// One property of every indexable kind, each with its index; `note` has none.
struct Gadget: BuriSupport, Equatable {
    var id: String
    var count: Int
    var small: Int8
    var big: UInt64
    var weight: Double
    var ratio: Float
    var made: Date
    var name: String
    var blob: Data
    var serial: UUID
    var rank: Int?
    var tags: [String]
    var readings: [Double]
    var note: String

    static let buri = BuriSchema<Gadget>(
        key: \.id,
        indexes: [
            .numeric("count", \.count), .numeric("small", \.small), .numeric("big", \.big),
            .numeric("weight", \.weight), .numeric("ratio", \.ratio), .numeric("made", \.made),
            .binary("name", \.name), .binary("blob", \.blob), .binary("serial", \.serial),
            .numeric("rank", \.rank), .binary("tags", \.tags), .numeric("readings", \.readings),
        ])

    static func make(_ i: Int) -> Gadget {
        Gadget(
            id: String(format: "g%03d", i), count: i - 10, small: Int8(i % 7) - 3, big: UInt64.max - UInt64(i),
            weight: Double(i) / 4, ratio: Float(i % 5) / 2,
            made: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 0.5),
            name: ["caf\u{E9}", "cafe\u{301}", "bolt", "nut\u{0}x", ""][i % 5], blob: Data([UInt8(i % 3), 0]),
            serial: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", i % 4))!,
            rank: i % 3 == 0 ? nil : i % 4, tags: Array(["a", "b", "c"].prefix(i % 4)),
            readings: i % 2 == 0 ? [Double(i), -Double(i)] : [], note: "n\(i)")
    }
}

@Suite("Queries by key path: resolved to the declared index, every indexable type")
struct KeyPathQueryTests {
    @Test(arguments: Engine.allCases) func everyIndexableTypeFindsWhatItsIndexFinds(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let gadgets = try t.db.bucket(Gadget.self)
        let all = (0..<40).map(Gadget.make)
        try gadgets.store(all)
        func keys(_ query: Query) throws -> [String] { try gadgets.keys(query) }
        // Each typed query returns exactly what the same query by index name returns.
        #expect(try keys(.where(\Gadget.count, in: -3...4)) == keys(.index("count", in: -3...4)))
        #expect(try keys(.where(\Gadget.count, in: -3...4)).count == 8)
        #expect(try keys(.where(\Gadget.small, equals: -3)) == keys(.index("small", equals: -3)))
        #expect(try keys(.where(\Gadget.big, in: (UInt64.max - 5)...)).count == 6)
        #expect(
            try keys(.where(\Gadget.weight, in: 1.0..<2.5)) == all.filter { (1.0..<2.5).contains($0.weight) }.map(\.id))
        #expect(try keys(.where(\Gadget.ratio, equals: 1.5)).count == all.filter { $0.ratio == 1.5 }.count)
        let start = Date(timeIntervalSince1970: 1_700_000_005)
        let end = Date(timeIntervalSince1970: 1_700_000_010)
        #expect(
            try keys(.where(\Gadget.made, in: start..<end)) == all.filter { (start..<end).contains($0.made) }.map(\.id))
        #expect(try keys(.where(\Gadget.made, in: ...start)).count == 11)
        #expect(try keys(.where(\Gadget.made, in: ..<start)).count == 10)
        // Strings compare as bytes: the two spellings of "café" are two values.
        #expect(
            try keys(.where(\Gadget.name, equals: "caf\u{E9}"))
                == all.filter { $0.name == "caf\u{E9}" && $0.name.utf8.count == 5 }.map(\.id))
        #expect(try keys(.where(\Gadget.name, equals: "cafe\u{301}")).count == 8)
        #expect(try keys(.where(\Gadget.name, equals: "nut\u{0}x")).count == 8)
        #expect(try keys(.where(\Gadget.name, prefix: "caf")).count == 16)
        #expect(try keys(.where(\Gadget.name, equals: "")).count == 8)
        #expect(
            try keys(.where(\Gadget.blob, equals: Data([2, 0]))).count == all.filter { $0.blob == Data([2, 0]) }.count)
        let serial = all[5].serial
        #expect(try keys(.where(\Gadget.serial, equals: serial)) == all.filter { $0.serial == serial }.map(\.id))
        // Optionals: nil has no entry, so no query finds it.
        #expect(try keys(.where(\Gadget.rank, in: 0...)).count == all.filter { $0.rank != nil }.count)
        #expect(try keys(.where(\Gadget.rank, equals: 0)) == all.filter { $0.rank == 0 }.map(\.id))
        // Arrays: an object matches if any element does, once.
        #expect(try keys(.where(\Gadget.tags, equals: "b")) == all.filter { $0.tags.contains("b") }.map(\.id))
        #expect(try keys(.where(\Gadget.readings, in: -4.0...(-2.0))) == keys(.index("readings", in: -4.0...(-2.0))))
        // Combined with AND, with order, limit and count, and through the bucket's own forms.
        let query = Query.where(\Gadget.count, in: 0...).and(.where(\Gadget.tags, equals: "a")).descending().limit(3)
        #expect(
            try keys(query)
                == Array(all.filter { $0.count >= 0 && $0.tags.contains("a") }.map(\.id).reversed().prefix(3)))
        #expect(try gadgets.objects(where: \.count, in: 0...2) == Array(all[10...12]))
        #expect(try gadgets.objects(where: \.weight, in: 0.0..<0.5).map(\.id) == ["g000", "g001"])
        #expect(try gadgets.objects(where: \.name, equals: "bolt").count == 8)
        #expect(try gadgets.count(where: \.tags, equals: "c") == all.filter { $0.tags.contains("c") }.count)
        #expect(
            try gadgets.aggregate("count", where: .where(\Gadget.rank, equals: 1)).count
                == all.filter { $0.rank == 1 }.count)
        // Pages resume with tokens of the typed query as of any other.
        let page = try gadgets.keyPage(.where(\Gadget.count, in: 0...), size: 7)
        let rest = try gadgets.keyPage(Query.where(\Gadget.count, in: 0...).after(page.next), size: 100)
        #expect(page.items + rest.items == all.filter { $0.count >= 0 }.map(\.id))
        // Contradictory ranges: an empty answer, not an error.
        #expect(try keys(.where(\Gadget.count, in: 5..<5)).isEmpty)
    }

    @Test func aKeyPathNoIndexCoversIsATypedErrorNamingTypeAndKeyPath() throws {
        let t = try TestDatabase(.memory)
        let gadgets = try t.db.bucket(Gadget.self)
        try gadgets.store(Gadget.make(1))
        for attempt in [
            { () throws -> Void in _ = try gadgets.objects(where: \.note, equals: "n1") },
            { () throws -> Void in _ = try gadgets.count(.where(\Gadget.note, equals: "n1")) },
            { () throws -> Void in _ = try gadgets.keys(Query.all.and(.where(\Gadget.note, prefix: "n"))) },
            { () throws -> Void in
                _ = try gadgets.aggregate("count", where: .where(\Gadget.note, equals: "x"))
            },
        ] {
            do {
                try attempt()
                Issue.record("a query by an unindexed key path ran")
            } catch let error as BuriError {
                guard case let .unindexedKeyPath(type, keyPath) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(type == "Gadget")
                #expect(keyPath.contains("note"), "\(keyPath)")
                #expect(error.description.contains("Gadget") && error.description.contains("declare"))
            } catch {
                Issue.record("not a BuriError: \(error)")
            }
        }
        // A value no index can hold (NaN) is a typed error too, not a crash or a wrong answer.
        do {
            _ = try gadgets.objects(where: \.weight, equals: .nan)
            Issue.record("NaN was queried")
        } catch {
            guard case .invalidQuery(_, let index, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(index == "weight")
        }
    }
}
