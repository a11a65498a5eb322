import Buri
import BuriEncryption
import Foundation

/// Buri through its public typed API, as an app would use it: on LevelDB (the default engine),
/// or on the in-memory engine (its own column).
final class BuriSystem: System {
    static let name = "Buri"
    static let memoryName = "Buri in memory"
    /// Buri on an encrypted database (sealed records, the locale index private), its own column.
    static let encryptedName = "Buri encrypted"
    /// Which of the three this one is.
    let name: String
    let database: BuriDatabase
    let tokens: Bucket<Token>
    let people: Bucket<Person>
    /// The query rows' objects (made with the others, so its bucket id is the same in every run).
    let residents: Bucket<Resident>
    let workload: Workload

    convenience init(path: String, workload: Workload) throws {
        try self.init(database: BuriDatabase(path: path, levelDB: StorageTuning.levelDB), workload: workload)
    }

    /// An encrypted database at `path`, with a random key.
    convenience init(encryptedAt path: String, workload: Workload) throws {
        var options = BuriOptions()
        options.encryption = DatabaseKey.random()
        try self.init(
            database: BuriDatabase(path: path, options: options, levelDB: StorageTuning.levelDB), workload: workload,
            name: Self.encryptedName)
    }

    init(database: BuriDatabase, workload: Workload, name: String? = nil) throws {
        self.name = name ?? (database.path == ":memory:" ? Self.memoryName : Self.name)
        self.database = database
        tokens = try database.bucket(Token.self)
        people = try database.bucket(Person.self)
        residents = try database.bucket(Resident.self)
        self.workload = workload
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
    var playlistRows: BuriPlaylistRows<Playlist>?

    /// Every row, but on an encrypted database the grouping by the locale index, which is private
    /// there (its values are keyed tokens, which cannot be grouped).
    func supports(_ row: Row) -> Bool { !(database.isEncrypted && row == .groupedAggregate) }

    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer? { try playlistRows?.answer(row) }

    // One method per row, never inlined, so a profiler can single each one out
    // (valgrind --toggle-collect='*BuriSystemC10sequential*').

    @inline(never) func simpleFill() throws -> Int {
        try tokens.storeConcurrently(workload.tokens)  // one atomic batch
        return workload.tokens.count
    }

    @inline(never) func complexFill() throws -> Int {
        try people.storeConcurrently(workload.people)
        return workload.people.count
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
        try people.storeConcurrently(workload.changed)
        agesChanged = true
        return workload.changed.count
    }

    /// Whether the stored ages are the changed ones (the refill moved them).
    var agesChanged = false
    /// Live queries on the people bucket that nobody iterates, held during the observed refill.
    var idleObservers: [LiveQuery<Int>] = []

    func prepare(_ row: Row) throws {
        if row.isQuery { try loadResidents() }
        if row.isPlaylist, playlistRows == nil, let data = workload.playlists {
            playlistRows = try BuriPlaylistRows(database: database, data: data)
        }
        guard row == .observedRefill else { return }
        // BURI_BENCH_OBSERVERS overrides the 1,000 (0: the same refill unobserved, as a baseline).
        let count = ProcessInfo.processInfo.environment["BURI_BENCH_OBSERVERS"].flatMap { Int($0) } ?? 1_000
        idleObservers = try (0..<count).map { i in
            let low = IndexValue(Int64(20 + i % 20))
            return try people.observeCount(.index("age", in: low...IndexValue(Int64(22 + i % 20))))
        }
    }

    func finish(_ row: Row) {
        if row == .observedRefill { idleObservers = [] }
    }

    /// The complex refill's work (every object moves in the age index), with 1,000 live queries
    /// registered on the bucket: the cost of observation to a writer.
    @inline(never) func observedRefill() throws -> Int {
        let target = agesChanged ? workload.people : workload.changed
        try people.storeConcurrently(target)
        agesChanged.toggle()
        return target.count
    }

    @inline(never) func deleteAll() throws -> Int {
        try people.deleteAll()
    }

    // The query rows, through the key-path forms an app would write.

    var residentsLoaded = false
    /// The objects the last query row returned (checked untimed by the driver).
    var lastAnswer: [Resident] = []

    /// Before the first query row: the residents stored, the purge of the generation that delete
    /// all retired finished, and the store compacted, so that no background purge, flush or
    /// compaction runs while a query is timed (the floor compacts its database too); then every
    /// record and index entry read once, so the first query finds the block cache as warm as
    /// SQLite's page cache is after its inserts.
    func loadResidents() throws {
        guard !residentsLoaded else { return }
        try residents.store(workload.residents)
        try database.purgeRetiredBuckets(reclaimingSpace: false)
        try database.compact()
        _ = try residents.objects()
        _ = try residents.keys(.where(\Resident.age, in: 0...99))
        _ = try residents.keys(.where(\Resident.locale, in: Resident.locales))
        residentsLoaded = true
    }

    func answer(_ row: Row) -> Answer? { row.isQuery ? .objects(lastAnswer) : nil }

    @inline(never) func inAndRange() throws -> Int {
        try QueryRows.repeated(.inAndRange) {
            lastAnswer = try residents.objects(
                .where(\Resident.locale, in: QueryRows.inLocales).and(.where(\Resident.age, in: QueryRows.inAges)))
            return lastAnswer.count
        }
    }

    @inline(never) func orTwoIndexes() throws -> Int {
        try QueryRows.repeated(.orTwoIndexes) {
            lastAnswer = try residents.objects(
                .where(\Resident.locale, equals: QueryRows.orLocale).or(
                    .where(\Resident.age, in: ..<QueryRows.orBelowAge)))
            return lastAnswer.count
        }
    }

    @inline(never) func top50AgeDesc() throws -> Int {
        try QueryRows.repeated(.top50AgeDesc) {
            lastAnswer = try residents.objects(
                .where(\Resident.locale, equals: QueryRows.topLocale).order(by: \Resident.age, descending: true)
                    .limit(QueryRows.topCount))
            return lastAnswer.count
        }
    }

    @inline(never) func filterUnindexed() throws -> Int {
        try QueryRows.repeated(.filterUnindexed) {
            lastAnswer = try residents.objects(
                .where(\Resident.age, in: QueryRows.filterAges).filter(\Resident.name) {
                    $0.hasPrefix(QueryRows.namePrefix)
                })
            return lastAnswer.count
        }
    }

    func close() { database.close() }
}
