import Buri
import Foundation

/// `Person` as a Buri user who wants the last factor writes it: the same fields, stored bytes and
/// indexes, plus a hand-written `init(record:)` that Buri's reads use instead of `init(from:)`
/// (as GRDB best's `init(row:)` reads columns by index).
struct BestPerson: BuriSupport, BuriRecordDecodable, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<BestPerson>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age).plaintext()],
        bucket: "Person"
    )

    init(_ person: Person) {
        objectId = person.objectId
        name = person.name
        locale = person.locale
        age = person.age
    }

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
    }
}

/// Buri on LevelDB through the same typed API as `BuriSystem`, with `BestPerson` (the fast
/// decoding path) as the bucket's type. The tokens are `BuriSystem`'s; the people are converted
/// to `BestPerson` once, before anything is timed.
final class BuriBestSystem: System {
    static let name = "Buri (best)"
    let database: BuriDatabase
    let tokens: Bucket<Token>
    let people: Bucket<BestPerson>
    let residents: Bucket<BestResident>
    let workload: Workload
    let bestPeople: [BestPerson]
    let bestChanged: [BestPerson]

    init(path: String, workload: Workload) throws {
        database = try BuriDatabase(path: path, levelDB: StorageTuning.levelDB)
        tokens = try database.bucket(Token.self)
        people = try database.bucket(BestPerson.self)
        residents = try database.bucket(BestResident.self)
        self.workload = workload
        bestPeople = workload.people.map(BestPerson.init)
        bestChanged = workload.changed.map(BestPerson.init)
    }

    func run(_ row: Row) throws -> Int {
        switch row {
        case .simpleFill: try simpleFill()
        case .complexFill: try complexFill()
        case .sequential: try sequential()
        case .indexKeys: try indexKeys()
        case .indexObjects: try indexObjects()
        case .rangeObjects: try rangeObjects()
        case .aggregate: try aggregate()
        case .groupedAggregate: try groupedAggregate()
        case .pointFetch: try pointFetch()
        case .complexRefill: try complexRefill()
        case .observedRefill: try observedRefill()
        case .deleteAll: try deleteAll()
        case .inAndRange: try inAndRange()
        case .orTwoIndexes: try orTwoIndexes()
        case .top50AgeDesc: try top50AgeDesc()
        case .filterUnindexed: try filterUnindexed()
        case .playlistSongs, .playlistHolders, .playlistDelete: try runPlaylistRow(row)
        }
    }

    func runPlaylistRow(_ row: Row) throws -> Int {
        guard let playlistRows else { throw BenchmarkFailure("\(name): the playlists were not loaded") }
        return try playlistRows.run(row)
    }

    /// The playlist rows' buckets, loaded before the first of them (untimed).
    var playlistRows: BuriPlaylistRows<BestPlaylist>?

    func supports(_ row: Row) -> Bool { true }

    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer? { try playlistRows?.answer(row) }

    // One method per row, never inlined, so a profiler can single each one out
    // (valgrind --toggle-collect='*BuriBestSystemC10sequential*').

    @inline(never) func simpleFill() throws -> Int {
        try tokens.storeConcurrently(workload.tokens)
        return workload.tokens.count
    }

    @inline(never) func complexFill() throws -> Int {
        try people.storeConcurrently(bestPeople)
        return bestPeople.count
    }

    @inline(never) func sequential() throws -> Int {
        try people.allObjects().count
    }

    @inline(never) func aggregate() throws -> Int { try workload.aggregateAges(people, system: name) }

    @inline(never) func groupedAggregate() throws -> Int {
        try workload.aggregateAgesByLocale(people, system: name)
    }

    @inline(never) func indexKeys() throws -> Int {
        try people.keys(index: "locale", equalTo: "EN").count
    }

    @inline(never) func indexObjects() throws -> Int {
        try people.objects(index: "locale", equalTo: "EN").count
    }

    @inline(never) func rangeObjects() throws -> Int {
        let range = Workload.ageRange
        return try people.objects(index: "age", in: IndexValue(range.lowerBound)...IndexValue(range.upperBound)).count
    }

    @inline(never) func pointFetch() throws -> Int {
        var found = 0
        for key in workload.shuffledKeys where try people.object(forKey: key) != nil { found += 1 }
        return found
    }

    @inline(never) func complexRefill() throws -> Int {
        try people.storeConcurrently(bestChanged)
        agesChanged = true
        return bestChanged.count
    }

    var agesChanged = false
    var idleObservers: [LiveQuery<Int>] = []

    func prepare(_ row: Row) throws {
        if row.isQuery { try loadResidents() }
        if row.isPlaylist, playlistRows == nil, let data = workload.playlists {
            playlistRows = try BuriPlaylistRows(database: database, data: data)
        }
        guard row == .observedRefill else { return }
        let count = ProcessInfo.processInfo.environment["BURI_BENCH_OBSERVERS"].flatMap { Int($0) } ?? 1_000
        idleObservers = try (0..<count).map { i in
            let low = IndexValue(Int64(20 + i % 20))
            return try people.observeCount(.index("age", in: low...IndexValue(Int64(22 + i % 20))))
        }
    }

    func finish(_ row: Row) {
        if row == .observedRefill { idleObservers = [] }
    }

    @inline(never) func observedRefill() throws -> Int {
        let target = agesChanged ? bestPeople : bestChanged
        try people.storeConcurrently(target)
        agesChanged.toggle()
        return target.count
    }

    @inline(never) func deleteAll() throws -> Int {
        try people.deleteAll()
    }

    // The query rows: the same queries as `BuriSystem`'s, decoded by `init(record:)` (the
    // filter's candidates too).

    var residentsLoaded = false
    var lastAnswer: [BestResident] = []

    func loadResidents() throws {
        guard !residentsLoaded else { return }
        try residents.store(workload.residents.map(BestResident.init))
        try database.purgeRetiredBuckets(reclaimingSpace: false)
        try database.compact()
        _ = try residents.objects()
        _ = try residents.keys(.where(\BestResident.age, in: 0...99))
        _ = try residents.keys(.where(\BestResident.locale, in: Resident.locales))
        residentsLoaded = true
    }

    func answer(_ row: Row) -> Answer? { row.isQuery ? .objects(lastAnswer.map(\.resident)) : nil }

    @inline(never) func inAndRange() throws -> Int {
        try QueryRows.repeated(.inAndRange) {
            lastAnswer = try residents.objects(
                .where(\BestResident.locale, in: QueryRows.inLocales).and(
                    .where(\BestResident.age, in: QueryRows.inAges)))
            return lastAnswer.count
        }
    }

    @inline(never) func orTwoIndexes() throws -> Int {
        try QueryRows.repeated(.orTwoIndexes) {
            lastAnswer = try residents.objects(
                .where(\BestResident.locale, equals: QueryRows.orLocale).or(
                    .where(\BestResident.age, in: ..<QueryRows.orBelowAge)))
            return lastAnswer.count
        }
    }

    @inline(never) func top50AgeDesc() throws -> Int {
        try QueryRows.repeated(.top50AgeDesc) {
            lastAnswer = try residents.objects(
                .where(\BestResident.locale, equals: QueryRows.topLocale).order(by: \BestResident.age, descending: true)
                    .limit(QueryRows.topCount))
            return lastAnswer.count
        }
    }

    @inline(never) func filterUnindexed() throws -> Int {
        try QueryRows.repeated(.filterUnindexed) {
            lastAnswer = try residents.objects(
                .where(\BestResident.age, in: QueryRows.filterAges).filter(\BestResident.name) {
                    $0.hasPrefix(QueryRows.namePrefix)
                })
            return lastAnswer.count
        }
    }

    func close() { database.close() }
}
