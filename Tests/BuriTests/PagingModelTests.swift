import Foundation
@testable import Buri
import LevelDB
import Testing

// MARK: - A random model

/// Objects with a binary, a numeric and a multi-valued index, for the randomized model.
struct ModelItem: BuriSupport, Equatable {
    var id: String
    var a: String
    var n: Int
    var tags: [String]

    static let buri = BuriSchema<ModelItem>(
        key: \.id,
        indexes: [.binary("a", \.a), .numeric("n", \.n), .binary("tags", \.tags)],
        bucket: "Model"
    )

    func values(_ index: String) -> [IndexValue] {
        switch index {
        case "a": return [IndexValue(a)]
        case "n": return [IndexValue(n)]
        default:
            var seen: [[UInt8]] = []
            var out: [IndexValue] = []
            for tag in tags where !seen.contains(Array(tag.utf8)) {
                seen.append(Array(tag.utf8))
                out.append(IndexValue(tag))
            }
            return out
        }
    }
}

/// One condition with what it means, evaluated in memory.
private struct ModelCondition {
    var query: Query
    var index: String
    var matches: (IndexValue) -> Bool
}

private struct ModelQuery: CustomStringConvertible {
    var conditions: [ModelCondition]
    var query: Query

    var description: String { "\(query)" }

    /// Where `item` sits in the query's order (nil: no match): the first condition's smallest
    /// (largest, descending) matching encoded value, then the key's bytes.
    func sortKey(_ item: ModelItem) -> [UInt8]? {
        for condition in conditions where !item.values(condition.index).contains(where: condition.matches) {
            return nil
        }
        guard let first = conditions.first else { return Array(item.id.utf8) }
        let encoded = item.values(first.index).filter(first.matches).map(\.encoded)
        let chosen =
            query.isDescending
            ? encoded.max { $0.lexicographicallyPrecedes($1) } : encoded.min { $0.lexicographicallyPrecedes($1) }
        return chosen.map { $0 + Array(item.id.utf8) }
    }

    /// The matching items in order, with their sort keys.
    func results(_ items: [ModelItem]) -> [(key: [UInt8], id: String)] {
        let matched = items.compactMap { item in sortKey(item).map { (key: $0, id: item.id) } }
        let sorted = matched.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        return query.isDescending ? sorted.reversed() : sorted
    }
}

private let modelStrings = ["", "a", "ab", "b", "caf\u{E9}", "cafe\u{301}", "z", "\u{0}", "x\u{0}y"]
private let modelTags = ["x", "y", "z", "xy", "\u{E9}", "e\u{301}"]

private func randomValue(_ index: String, _ random: inout SeededGenerator) -> IndexValue {
    switch index {
    case "n": return IndexValue(Int.random(in: -3...6, using: &random))
    case "a": return IndexValue(modelStrings.randomElement(using: &random) ?? "")
    default: return IndexValue(modelTags.randomElement(using: &random) ?? "")
    }
}

private func randomCondition(_ random: inout SeededGenerator) -> ModelCondition {
    let index = ["a", "n", "tags"].randomElement(using: &random) ?? "a"
    switch Int.random(in: 0..<5, using: &random) {
    case 0, 1:
        let value = randomValue(index, &random)
        return ModelCondition(query: .index(index, equals: value), index: index, matches: { $0 == value })
    case 2 where index != "n":
        let prefix = Array((["", "x", "a", "caf", "e"].randomElement(using: &random) ?? "").utf8)
        return ModelCondition(
            query: .index(index, prefixBytes: prefix), index: index,
            matches: { value in
                if case .bytes(let bytes) = value.decoded { return bytes.starts(with: prefix) }
                return false
            })
    default:
        func bound(_ random: inout SeededGenerator) -> IndexBound {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return .unbounded
            case 1: return .inclusive(randomValue(index, &random))
            default: return .exclusive(randomValue(index, &random))
            }
        }
        let lower = bound(&random), upper = bound(&random)
        return ModelCondition(
            query: .index(index, from: lower, to: upper), index: index,
            matches: { value in
                switch lower {
                case .unbounded: break
                case .inclusive(let v): if value < v { return false }
                case .exclusive(let v): if value <= v { return false }
                }
                switch upper {
                case .unbounded: return true
                case .inclusive(let v): return value <= v
                case .exclusive(let v): return value < v
                }
            })
    }
}

private func randomQuery(_ random: inout SeededGenerator) -> ModelQuery {
    let count = [0, 1, 1, 2, 2, 2, 3].randomElement(using: &random) ?? 1
    let conditions = (0..<count).map { _ in randomCondition(&random) }
    var query = Query.all
    for condition in conditions { query = query.conditions.isEmpty ? condition.query : query.and(condition.query) }
    if Bool.random(using: &random) { query = query.descending() }
    if Int.random(in: 0..<3, using: &random) == 0 { query = query.limit(Int.random(in: 0...12, using: &random)) }
    if Int.random(in: 0..<3, using: &random) == 0 { query = query.offset(Int.random(in: 0...5, using: &random)) }
    return ModelQuery(conditions: conditions, query: query)
}

private func randomItem(_ random: inout SeededGenerator) -> ModelItem {
    let keys = (0..<40).map { String(format: "k%02d", $0) } + ["caf\u{E9}", "cafe\u{301}", "\u{0}", "ÿ"]
    return ModelItem(
        id: keys.randomElement(using: &random) ?? "k",
        a: modelStrings.randomElement(using: &random) ?? "",
        n: Int.random(in: -3...6, using: &random),
        tags: (0..<Int.random(in: 0...3, using: &random)).map { _ in modelTags.randomElement(using: &random) ?? "" }
    )
}

@Suite("Queries and paged walks against an in-memory model")
struct PagingModelTests {
    @Test(arguments: [1, 2, 3, 4])
    func pagedWalksWithWritesBetweenPagesMatchTheModelAndBothPlans(seed: UInt64) throws {
        let t = try TestDatabase()
        let bucket = try t.db.bucket(ModelItem.self)
        let raw = bucket.raw
        var random = SeededGenerator(seed: seed)
        // The model, keyed by the key's bytes (never by String equality).
        var model: [[UInt8]: ModelItem] = [:]
        func store(_ items: [ModelItem]) throws {
            try bucket.store(items)
            for item in items { model[Array(item.id.utf8)] = item }
        }
        try store((0..<60).map { _ in randomItem(&random) })
        var collecting = 0

        for round in 0..<100 {
            let q = randomQuery(&random)
            let snapshot = try raw.reader()
            if try QueryPlan(q.query, bucket: raw, reader: snapshot).collectFrom != nil { collecting += 1 }

            // Whole answers: both plans and the model agree, including limit and offset.
            let expected = q.results(Array(model.values))
            let offset = q.query.offset, limit = q.query.limit ?? Int.max
            let window = expected.dropFirst(offset).prefix(limit).map(\.id)
            let automatic = try raw.keys(q.query)
            #expect(automatic.map { Array($0.utf8) } == window.map { Array($0.utf8) }, "round \(round): \(q)")
            let walked = try raw.cursor(q.query, strategy: .walk)
            var walkKeys: [String] = []
            while let key = try walked.nextKey() { walkKeys.append(key) }
            #expect(walkKeys.map { Array($0.utf8) } == automatic.map { Array($0.utf8) }, "round \(round): \(q)")
            #expect(try bucket.objects(q.query).map { Array($0.id.utf8) } == automatic.map { Array($0.utf8) })
            #expect(try raw.count(q.query) == window.count)

            // A paged walk with writes between pages.
            let size = Int.random(in: 1...5, using: &random)
            var token: ContinuationToken? = nil
            var last: [UInt8]? = nil
            var returned = 0
            var pages = 0
            repeat {
                let query = token.map { q.query.after($0) } ?? q.query
                let page = try raw.keyPage(query, size: size)
                let pageByWalk = try raw.page(query, size: size, strategy: .walk) { cursor throws(BuriError) in
                    try cursor.nextKey()
                }
                #expect(
                    page.items.map { Array($0.utf8) } == pageByWalk.items.map { Array($0.utf8) },
                    "round \(round) page \(pages): \(q)")
                #expect(page.next == pageByWalk.next, "round \(round) page \(pages): \(q)")

                var rest = q.results(Array(model.values))
                if let last {
                    rest = rest.filter {
                        q.query.isDescending
                            ? $0.key.lexicographicallyPrecedes(last) : last.lexicographicallyPrecedes($0.key)
                    }
                } else {
                    rest = Array(rest.dropFirst(offset))
                }
                let cap = Swift.max(0, limit - returned)
                let expectedItems = Array(rest.prefix(Swift.min(size, cap)))
                #expect(
                    page.items.map { Array($0.utf8) } == expectedItems.map { Array($0.id.utf8) },
                    "round \(round) page \(pages): \(q)")
                let more = expectedItems.count == size && rest.count > size && cap > size
                #expect((page.next != nil) == more, "round \(round) page \(pages): \(q)")

                returned += page.items.count
                last = expectedItems.last?.key
                token = page.next
                pages += 1
                // Writes between pages: stores (new keys and changed values) and deletes.
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    // Picked from the keys in byte order: a dictionary's order changes from one
                    // process to the next, and the run must be the seed's alone.
                    if Int.random(in: 0..<4, using: &random) == 0,
                        let victimKey = model.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }).randomElement(
                            using: &random),
                        let victim = model[victimKey]
                    {
                        try bucket.delete(key: victim.id)
                        model[Array(victim.id.utf8)] = nil
                    } else {
                        try store([randomItem(&random)])
                    }
                }
            } while token != nil && pages < 100
        }
        #expect(collecting >= 5, "the collecting plan ran \(collecting) times")
        #expect(try t.db.check().isConsistent)
    }
}
