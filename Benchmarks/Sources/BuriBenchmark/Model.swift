import Buri
import Foundation
import GRDB

/// The original benchmark's "simple" object: nothing but a UUID key, no indexes.
/// One type serves Buri (`BuriSupport`) and GRDB (`FetchableRecord`, `PersistableRecord`), so both
/// are handed the very same prebuilt values.
struct Token: BuriSupport, FetchableRecord, PersistableRecord, Equatable {
    var objectId: String

    static let buri = BuriSchema<Token>(key: \.objectId, bucket: "Token")
    static let databaseTableName = "token"
}

/// The original benchmark's "complex" object: a binary index on `locale`, a numeric one on `age`.
struct Person: BuriSupport, FetchableRecord, PersistableRecord, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Person>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age).plaintext()],
        bucket: "Person"
    )
    static let databaseTableName = "person"
}

/// A UUID string (uppercase, 8-4-4-4-12) that depends only on `seed`, so runs are repeatable.
/// Successive seeds land all over the key space, as real random UUIDs do.
func uuidString(_ seed: Int) -> String {
    var generator = SplitMix64(seed: UInt64(bitPattern: Int64(seed)) &+ 0x5EED)
    var bytes = [UInt8](repeating: 0, count: 16)
    for k in stride(from: 0, to: 16, by: 8) {
        let word = generator.next()
        for j in 0..<8 { bytes[k + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
    }
    bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
    bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
    let uuid = UUID(
        uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        ))
    return uuid.uuidString
}

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Everything the rows work on, built once before any timing, identical for every system.
struct Workload: Sendable {
    let n: Int
    let tokens: [Token]
    /// The complex fill: ages 20 + i % 20.
    let people: [Person]
    /// The same keys with every age changed (20 + (i + 7) % 20), so each object moves in the age index.
    let changed: [Person]
    /// Every key once, in a fixed pseudo-random order, for point fetches.
    let shuffledKeys: [String]
    /// The same order as indices into `people` (for the floor's prebuilt record keys).
    let shuffledIndices: [Int32]

    /// The range query of the original benchmark: ages 22...24, both included.
    static let ageRange = 22...24

    /// The sum of the stored ages when the aggregate rows run (the complex fill's ages).
    var ageSum: Int { people.reduce(0) { $0 + $1.age } }

    /// The aggregate row through Buri's API (one way to ask it, for both Buri systems).
    func aggregateAges<P>(_ people: Bucket<P>, system: String) throws -> Int {
        let result = try people.aggregate("age")
        guard case .integer(let sum) = result.sum, result.average != nil, result.minimum != nil else { return 0 }
        return try checkAggregate(count: result.count, sum: Int(sum), system: system)
    }

    /// The grouped aggregate row through Buri's API.
    func aggregateAgesByLocale<P>(_ people: Bucket<P>, system: String) throws -> Int {
        var count = 0
        var total = 0
        for group in try people.aggregate("age", groupedBy: "locale") {
            guard case .integer(let sum) = group.aggregate.sum, group.aggregate.average != nil else { return 0 }
            count += group.aggregate.count
            total += Int(sum)
        }
        return try checkAggregate(count: count, sum: total, system: system)
    }

    /// Checks an aggregate row's answer: every age counted, and their sum; returns the count.
    func checkAggregate(count: Int, sum: Int, system: String) throws -> Int {
        guard count == n, sum == ageSum else {
            throw BenchmarkFailure(
                "\(system): aggregate of \(count) ages summing to \(sum); expected \(n) and \(ageSum)")
        }
        return count
    }

    /// The query rows' objects (`Resident`): varied locales, ages and names, so that each
    /// condition selects a part of them (see `QueryRows.swift`).
    let residents: [Resident]
    /// What each query row must return, computed here from `residents` by plain Swift.
    let expected: ExpectedAnswers
    /// The playlist rows' songs and playlists (their own fixed sizes, see `PlaylistRows.swift`);
    /// built by the driver only when a playlist row runs, after the inputs' size is measured.
    var playlists: PlaylistData?

    init(n: Int) {
        self.n = n
        residents = Resident.population(n)
        expected = ExpectedAnswers(residents)
        tokens = (0..<n).map { Token(objectId: uuidString(2 * $0 + 1)) }
        people = (0..<n).map { Person(objectId: uuidString(2 * $0), name: "Dirk", locale: "EN", age: 20 + $0 % 20) }
        changed = people.enumerated().map { i, person in
            var moved = person
            moved.age = 20 + (i + 7) % 20
            return moved
        }
        var indices = (0..<Int32(n)).map { $0 }
        var generator = SplitMix64(seed: 42)
        indices.shuffle(using: &generator)
        shuffledIndices = indices
        shuffledKeys = indices.map { [people] i in people[Int(i)].objectId }
    }

    /// How many objects each row handles (the denominator of objects/s).
    func objects(for row: Row) -> Int {
        switch row {
        case .rangeObjects: people.filter { Workload.ageRange.contains($0.age) }.count
        case .inAndRange, .orTwoIndexes, .top50AgeDesc, .filterUnindexed:
            expected.answer(for: row).count * QueryRows.queries(row)
        case .playlistSongs, .playlistHolders, .playlistDelete: playlists?.objects(for: row) ?? 0
        default: n
        }
    }
}

/// The rows of the table, in the order they run inside each repetition.
enum Row: Int, CaseIterable, Sendable {
    case simpleFill, complexFill, sequential, indexKeys, indexObjects, rangeObjects, aggregate, groupedAggregate,
        pointFetch, complexRefill, observedRefill, deleteAll,
        // The query rows run last, on their own bucket and table (`Resident`), loaded untimed
        // before the first of them (see `QueryRows.swift`).
        inAndRange, orTwoIndexes, top50AgeDesc, filterUnindexed,
        // The playlist rows run after them, on songs and playlists of their own (100,000 and
        // 1,000 whatever the count), loaded untimed before the first (see `PlaylistRows.swift`).
        playlistSongs, playlistHolders, playlistDelete

    var title: String {
        switch self {
        case .simpleFill: "Simple fill (UUID key only, no indexes)"
        case .complexFill: "Complex fill (Person, 2 indexes)"
        case .sequential: "Bucket sequential retrieval (all objects)"
        case .indexKeys: "2i key retrieval (locale = EN)"
        case .indexObjects: "2i object retrieval (locale = EN)"
        case .rangeObjects: "2i numeric range (age in 22...24)"
        case .aggregate: "Aggregate: count, sum, avg, min, max of age"
        case .groupedAggregate: "Aggregate grouped: count, sum, avg of age by locale"
        case .pointFetch: "Point fetch by key, random order"
        case .complexRefill: "Complex refill (same keys, ages changed)"
        case .observedRefill: "Refill with 1,000 idle observers (ages changed back)"
        case .deleteAll: "Delete all (Person)"
        case .inAndRange: "Query: locale IN (EN, NL, DE) AND age in 20...29 (20 queries)"
        case .orTwoIndexes: "Query: locale = EN OR age < 10 (10 queries)"
        case .top50AgeDesc: "Top 50 by age descending where locale = EN (100 queries)"
        case .filterUnindexed: "Filter: age in 20...29 AND name starts with A, unindexed (50 queries)"
        case .playlistSongs: "Playlist: one playlist's 100 songs in order (200 playlists)"
        case .playlistHolders: "Playlist: every playlist holding a song held by 100 (100 queries)"
        case .playlistDelete: "Playlist: delete a song held by 100 playlists, nullify (20 songs)"
        }
    }

    /// A short stable name for JSON.
    var id: String {
        switch self {
        case .simpleFill: "simple_fill"
        case .complexFill: "complex_fill"
        case .sequential: "sequential_retrieval"
        case .indexKeys: "index_key_retrieval"
        case .indexObjects: "index_object_retrieval"
        case .rangeObjects: "index_numeric_range"
        case .aggregate: "aggregate_age"
        case .groupedAggregate: "aggregate_age_by_locale"
        case .pointFetch: "point_fetch_random"
        case .complexRefill: "complex_refill"
        case .observedRefill: "refill_1000_observers"
        case .deleteAll: "delete_all"
        case .inAndRange: "in_and_range"
        case .orTwoIndexes: "or_two_indexes"
        case .top50AgeDesc: "top50_age_desc"
        case .filterUnindexed: "filter_unindexed"
        case .playlistSongs: "playlist_songs_in_order"
        case .playlistHolders: "playlist_holders_of_song"
        case .playlistDelete: "playlist_delete_song_nullify"
        }
    }

    /// Whether the "at least half the raw LevelDB floor" target applies (fills and retrievals).
    var hasFloorTarget: Bool {
        switch self {
        case .simpleFill, .complexFill, .sequential, .indexKeys, .indexObjects, .rangeObjects: true
        case .aggregate, .groupedAggregate, .pointFetch, .complexRefill, .observedRefill, .deleteAll: false
        // The floor of a query row is one way a hand-written LevelDB app could answer it (not
        // the least LevelDB work Buri's plan needs), so it is shown but not a target.
        case .inAndRange, .orTwoIndexes, .top50AgeDesc, .filterUnindexed: false
        case .playlistSongs, .playlistHolders, .playlistDelete: false
        }
    }

    /// Whether the row is a playlist row (Buri and GRDB only: the floor has none).
    var isPlaylist: Bool {
        switch self {
        case .playlistSongs, .playlistHolders, .playlistDelete: true
        default: false
        }
    }

    /// Whether the row is a query on the residents, whose answer every system must give exactly.
    var isQuery: Bool {
        switch self {
        case .inAndRange, .orTwoIndexes, .top50AgeDesc, .filterUnindexed: true
        default: false
        }
    }
}

/// One system under test. Each call does one row's work and returns how many objects it handled,
/// which the driver checks against the workload so that every system provably does the same work.
protocol System: AnyObject {
    static var name: String { get }
    var name: String { get }
    /// Untimed set-up before `row` runs (Buri: the idle observers of the observed refill).
    func prepare(_ row: Row) throws
    func run(_ row: Row) throws -> Int
    /// Untimed clean-up after `row` ran.
    func finish(_ row: Row)
    /// What the query row `row` returned when it last ran (read untimed, checked by the driver).
    func answer(_ row: Row) -> Answer?
    /// Whether the system runs `row` (the floor runs no playlist row).
    func supports(_ row: Row) -> Bool
    /// What the playlist row `row` returned (read untimed, checked by the driver).
    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer?
    func close()
}

extension System {
    var name: String { Self.name }
    func prepare(_ row: Row) throws {}
    func finish(_ row: Row) {}
    func answer(_ row: Row) -> Answer? { nil }
    func supports(_ row: Row) -> Bool { !row.isPlaylist }
    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer? { nil }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
