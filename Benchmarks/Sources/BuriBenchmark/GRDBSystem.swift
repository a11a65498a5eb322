import GRDB

/// GRDB 7.10 on SQLite through its record API, set up as a careful app would: WAL journal,
/// `synchronous = OFF` (Buri's default writes are not synced either: both survive a process crash,
/// neither a power cut), a 32 MiB page cache (Buri's block cache is 32 MiB), one connection
/// (`DatabaseQueue`), so reads see a warm cache as Buri's do.
final class GRDBSystem: System {
    static let name = "GRDB"
    let queue: DatabaseQueue
    let workload: Workload

    init(path: String, workload: Workload) throws {
        queue = try GRDBSystem.open(path: path)
        self.workload = workload
    }

    /// The database both GRDB columns use: the same settings, tables and indexes.
    static func open(path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = OFF")
            try db.execute(sql: "PRAGMA cache_size = -32768")
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
        }
        try queue.write { db in
            try db.create(table: Token.databaseTableName) { t in
                t.primaryKey("objectId", .text)
            }
            try db.create(table: Person.databaseTableName) { t in
                t.primaryKey("objectId", .text)
                t.column("name", .text).notNull()
                t.column("locale", .text).notNull().indexed()
                t.column("age", .integer).notNull().indexed()
            }
            // The query rows' table: the same columns and indexes (empty until the first query row).
            try db.create(table: Resident.databaseTableName) { t in
                t.primaryKey("objectId", .text)
                t.column("name", .text).notNull()
                t.column("locale", .text).notNull().indexed()
                t.column("age", .integer).notNull().indexed()
            }
            // The playlist rows' tables (empty until the first playlist row).
            try GRDBPlaylists.createTables(db)
        }
        return queue
    }

    /// Before the first query row (untimed): the residents inserted in one transaction, then the
    /// WAL checkpointed into the database file (as the LevelDB systems compact theirs). The
    /// inserts leave the table's and indexes' pages in the page cache (32 MiB, the residents
    /// take a few), as the LevelDB systems warm their block caches by reading everything once.
    static func loadResidents(_ queue: DatabaseQueue, _ residents: [Resident]) throws {
        try queue.write { db in
            let insert = try db.cachedStatement(
                sql: "INSERT INTO resident (objectId, name, locale, age) VALUES (?, ?, ?, ?)")
            for resident in residents {
                insert.setUncheckedArguments([resident.objectId, resident.name, resident.locale, resident.age])
                try insert.execute()
            }
        }
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    var residentsLoaded = false
    /// The objects the last query row returned (checked untimed by the driver).
    var lastAnswer: [Resident] = []

    func prepare(_ row: Row) throws {
        if row.isPlaylist, !playlistsLoaded, let data = workload.playlists {
            try GRDBPlaylists.load(queue, data)
            playlistsLoaded = true
        }
        guard row.isQuery, !residentsLoaded else { return }
        try GRDBSystem.loadResidents(queue, workload.residents)
        residentsLoaded = true
    }

    // The playlist rows, through GRDB's record API: an association joined with an alias to
    // order by the join table's position, a filtered selection of one column, `deleteOne` (the
    // foreign key's ON DELETE CASCADE removes the join rows in the same statement).

    var playlistsLoaded = false
    var fetched: [[Song]] = []
    var holders: [[String]] = []

    func supports(_ row: Row) -> Bool { true }

    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer? {
        guard let data = workload.playlists else { return nil }
        switch row {
        case .playlistSongs: return .songs(fetched)
        case .playlistHolders: return .holders(holders)
        case .playlistDelete: return try GRDBPlaylists.after(queue, data)
        default: return nil
        }
    }

    func playlistRow(_ row: Row) throws -> Int {
        guard let data = workload.playlists else { throw BenchmarkFailure("\(name): no playlists") }
        switch row {
        case .playlistSongs:
            fetched.removeAll(keepingCapacity: true)
            var count = 0
            for p in data.fetchOrder {
                let id = data.playlists[p].id
                let songs = try queue.read { db in
                    let entry = TableAlias<PlaylistSong>()
                    return try Song.joining(
                        required: Song.playlistEntries.aliased(entry).filter(Column("playlistId") == id)
                    )
                    .order(entry[Column("position")])
                    .fetchAll(db)
                }
                count += songs.count
                fetched.append(songs)
            }
            return count
        case .playlistHolders:
            holders.removeAll(keepingCapacity: true)
            var count = 0
            for song in data.holderQueries {
                let ids = try queue.read { db in
                    try PlaylistSong.filter(Column("songId") == song).select(Column("playlistId"), as: String.self)
                        .fetchAll(db)
                }
                count += ids.count
                holders.append(ids)
            }
            return count
        case .playlistDelete:
            var count = 0
            for song in data.hotSongs {
                if try queue.write({ db in try Song.deleteOne(db, key: song) }) { count += 1 }
            }
            return count
        default:
            throw BenchmarkFailure("not a playlist row: \(row.title)")
        }
    }

    func answer(_ row: Row) -> Answer? { row.isQuery ? .objects(lastAnswer) : nil }

    func run(_ row: Row) throws -> Int {
        switch row {
        case .simpleFill:
            try queue.write { db in
                for token in workload.tokens { try token.insert(db) }
            }
            return workload.tokens.count
        case .complexFill:
            try queue.write { db in
                for person in workload.people { try person.insert(db) }
            }
            return workload.people.count
        case .sequential:
            return try queue.read { db in try Person.fetchAll(db).count }
        case .indexKeys:
            return try queue.read { db in
                try Person.filter(Column("locale") == "EN").select(Column("objectId"), as: String.self).fetchAll(db)
                    .count
            }
        case .indexObjects:
            return try queue.read { db in try Person.filter(Column("locale") == "EN").fetchAll(db).count }
        case .rangeObjects:
            return try queue.read { db in
                try Person.filter(Workload.ageRange.contains(Column("age"))).fetchAll(db).count
            }
        case .aggregate:
            return try queue.read { db in
                let age = Column("age")
                let request = Person.select(count(age), sum(age), average(age), min(age), max(age))
                guard let row = try GRDB.Row.fetchOne(db, request) else { return 0 }
                let average: Double? = row[2]
                let minimum: Int? = row[3]
                guard average != nil, minimum != nil else { return 0 }
                return try workload.checkAggregate(count: row[0], sum: row[1], system: name)
            }
        case .groupedAggregate:
            return try queue.read { db in
                let age = Column("age")
                let request = Person.select(Column("locale"), count(age), sum(age), average(age)).group(
                    Column("locale"))
                var count = 0
                var total = 0
                for row in try GRDB.Row.fetchAll(db, request) {
                    let average: Double? = row[3]
                    guard average != nil else { return 0 }
                    count += row[1] as Int
                    total += row[2] as Int
                }
                return try workload.checkAggregate(count: count, sum: total, system: name)
            }
        case .pointFetch:
            return try queue.read { db in
                var found = 0
                for key in workload.shuffledKeys where try Person.fetchOne(db, key: key) != nil { found += 1 }
                return found
            }
        case .complexRefill:
            try queue.write { db in
                for person in workload.changed { try person.update(db) }
            }
            agesChanged = true
            return workload.changed.count
        case .observedRefill:
            // No observers here: the same refill, for the table's columns.
            let target = agesChanged ? workload.people : workload.changed
            try queue.write { db in
                for person in target { try person.update(db) }
            }
            agesChanged.toggle()
            return target.count
        case .deleteAll:
            return try queue.write { db in try Person.deleteAll(db) }
        case .inAndRange:
            return try QueryRows.repeated(row) {
                lastAnswer = try queue.read { db in
                    try Resident.filter(
                        QueryRows.inLocales.contains(Column("locale")) && QueryRows.inAges.contains(Column("age"))
                    ).fetchAll(db)
                }
                return lastAnswer.count
            }
        case .orTwoIndexes:
            return try QueryRows.repeated(row) {
                lastAnswer = try queue.read { db in
                    try Resident.filter(Column("locale") == QueryRows.orLocale || Column("age") < QueryRows.orBelowAge)
                        .fetchAll(db)
                }
                return lastAnswer.count
            }
        case .top50AgeDesc:
            // Each query its own read, as an app asks each time it needs the list.
            return try QueryRows.repeated(row) {
                lastAnswer = try queue.read { db in
                    try Resident.filter(Column("locale") == QueryRows.topLocale)
                        .order(Column("age").desc, Column("objectId").desc)
                        .limit(QueryRows.topCount)
                        .fetchAll(db)
                }
                return lastAnswer.count
            }
        case .filterUnindexed:
            // LIKE is case-insensitive in SQLite; every name starts with a capital, so it agrees
            // with `hasPrefix` here (and the answer is checked).
            return try QueryRows.repeated(row) {
                lastAnswer = try queue.read { db in
                    try Resident.filter(
                        QueryRows.filterAges.contains(Column("age")) && Column("name").like(QueryRows.namePrefix + "%")
                    ).fetchAll(db)
                }
                return lastAnswer.count
            }
        case .playlistSongs, .playlistHolders, .playlistDelete:
            return try playlistRow(row)
        }
    }

    /// Whether the stored ages are the changed ones.
    var agesChanged = false

    func close() { try? queue.close() }
}
