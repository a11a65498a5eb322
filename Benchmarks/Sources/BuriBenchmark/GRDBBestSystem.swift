import GRDB

/// GRDB at its best, as GRDB's own performance tests use it: the same database as `GRDBSystem`
/// (`GRDBSystem.open`: WAL, `synchronous = OFF`, 32 MiB page cache, same tables and indexes), but
/// every statement prepared once and cached (`db.cachedStatement(sql:)`), arguments bound by
/// position without validation (`setUncheckedArguments`), and rows decoded by column index
/// (`PersonRow.init(row:)`) instead of through `Codable`. Every row does the same verified work as
/// the other systems: fills insert every object, refills check that each update changed one row.
final class GRDBBestSystem: System {
    static let name = "GRDB (best)"
    let queue: DatabaseQueue
    let workload: Workload
    /// Whether the stored ages are the changed ones.
    var agesChanged = false

    init(path: String, workload: Workload) throws {
        queue = try GRDBSystem.open(path: path)
        self.workload = workload
    }

    static let selectPeople = "SELECT objectId, name, locale, age FROM person"

    func run(_ row: Row) throws -> Int {
        switch row {
        case .simpleFill:
            return try queue.write { db in
                let insert = try db.cachedStatement(sql: "INSERT INTO token (objectId) VALUES (?)")
                for token in workload.tokens {
                    insert.setUncheckedArguments([token.objectId])
                    try insert.execute()
                }
                return workload.tokens.count
            }
        case .complexFill:
            return try queue.write { db in
                let insert = try db.cachedStatement(
                    sql: "INSERT INTO person (objectId, name, locale, age) VALUES (?, ?, ?, ?)")
                for person in workload.people {
                    insert.setUncheckedArguments([person.objectId, person.name, person.locale, person.age])
                    try insert.execute()
                }
                return workload.people.count
            }
        case .sequential:
            return try queue.read { db in
                try PersonRow.fetchAll(db.cachedStatement(sql: GRDBBestSystem.selectPeople)).count
            }
        case .indexKeys:
            return try queue.read { db in
                try String.fetchAll(
                    db.cachedStatement(sql: "SELECT objectId FROM person WHERE locale = ?"), arguments: ["EN"]
                ).count
            }
        case .indexObjects:
            return try queue.read { db in
                try PersonRow.fetchAll(
                    db.cachedStatement(sql: GRDBBestSystem.selectPeople + " WHERE locale = ?"), arguments: ["EN"]
                ).count
            }
        case .rangeObjects:
            let range = Workload.ageRange
            return try queue.read { db in
                let statement = try db.cachedStatement(sql: GRDBBestSystem.selectPeople + " WHERE age BETWEEN ? AND ?")
                return try PersonRow.fetchAll(statement, arguments: [range.lowerBound, range.upperBound]).count
            }
        case .aggregate:
            return try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: "SELECT COUNT(age), SUM(age), AVG(age), MIN(age), MAX(age) FROM person")
                guard let row = try GRDB.Row.fetchOne(statement) else { return 0 }
                let average: Double? = row[2]
                guard average != nil else { return 0 }
                return try workload.checkAggregate(count: row[0], sum: row[1], system: name)
            }
        case .groupedAggregate:
            return try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: "SELECT locale, COUNT(age), SUM(age), AVG(age) FROM person GROUP BY locale")
                var count = 0
                var total = 0
                let rows = try GRDB.Row.fetchCursor(statement)
                while let row = try rows.next() {
                    count += row[1] as Int
                    total += row[2] as Int
                }
                return try workload.checkAggregate(count: count, sum: total, system: name)
            }
        case .pointFetch:
            return try queue.read { db in
                let select = try db.cachedStatement(sql: GRDBBestSystem.selectPeople + " WHERE objectId = ?")
                var found = 0
                for key in workload.shuffledKeys {
                    select.setUncheckedArguments([key])
                    if try PersonRow.fetchOne(select) != nil { found += 1 }
                }
                return found
            }
        case .complexRefill, .observedRefill:
            // The observed refill (no observers here) moves the ages back if they were changed.
            let target = row == .observedRefill && agesChanged ? workload.people : workload.changed
            let found = try queue.write { db in
                let update = try db.cachedStatement(
                    sql: "UPDATE person SET name = ?, locale = ?, age = ? WHERE objectId = ?")
                var found = 0
                for person in target {
                    update.setUncheckedArguments([person.name, person.locale, person.age, person.objectId])
                    try update.execute()
                    found += db.changesCount
                }
                return found
            }
            agesChanged = !(row == .observedRefill && agesChanged)
            return found
        case .deleteAll:
            return try queue.write { db in
                try db.cachedStatement(sql: "DELETE FROM person").execute()
                return db.changesCount
            }
        case .inAndRange: return try inAndRange()
        case .orTwoIndexes: return try orTwoIndexes()
        case .top50AgeDesc: return try top50AgeDesc()
        case .filterUnindexed: return try filterUnindexed()
        case .playlistSongs: return try playlistSongs()
        case .playlistHolders: return try playlistHolders()
        case .playlistDelete: return try playlistDelete()
        }
    }

    // The playlist rows, cached statements and songs decoded by column index: the join in the
    // order of the join table's primary key (playlistId, position), the holders from the index on
    // songId, one DELETE of the song whose foreign key cascades to its join rows.

    var playlistsLoaded = false
    var fetched: [[SongRow]] = []
    var holders: [[String]] = []

    func supports(_ row: Row) -> Bool { true }

    func playlistAnswer(_ row: Row) throws -> PlaylistAnswer? {
        guard let data = workload.playlists else { return nil }
        switch row {
        case .playlistSongs: return .songs(fetched.map { $0.map(\.song) })
        case .playlistHolders: return .holders(holders)
        case .playlistDelete: return try GRDBPlaylists.after(queue, data)
        default: return nil
        }
    }

    var playlistData: PlaylistData {
        get throws {
            guard let data = workload.playlists else { throw BenchmarkFailure("\(name): no playlists") }
            return data
        }
    }

    /// Each playlist its own read, as an app asks each time it shows one.
    @inline(never) func playlistSongs() throws -> Int {
        let data = try playlistData
        fetched.removeAll(keepingCapacity: true)
        var count = 0
        for p in data.fetchOrder {
            let songs = try queue.read { db in
                let statement = try db.cachedStatement(
                    sql:
                        "SELECT song.id, song.title FROM playlistSong JOIN song ON song.id = playlistSong.songId WHERE playlistSong.playlistId = ? ORDER BY playlistSong.position"
                )
                statement.setUncheckedArguments([data.playlists[p].id])
                return try SongRow.fetchAll(statement)
            }
            count += songs.count
            fetched.append(songs)
        }
        return count
    }

    @inline(never) func playlistHolders() throws -> Int {
        let data = try playlistData
        holders.removeAll(keepingCapacity: true)
        var count = 0
        for song in data.holderQueries {
            let ids = try queue.read { db in
                let statement = try db.cachedStatement(sql: "SELECT playlistId FROM playlistSong WHERE songId = ?")
                statement.setUncheckedArguments([song])
                return try String.fetchAll(statement)
            }
            count += ids.count
            holders.append(ids)
        }
        return count
    }

    /// One transaction per song, as Buri's delete is one commit per call.
    @inline(never) func playlistDelete() throws -> Int {
        let data = try playlistData
        var count = 0
        for song in data.hotSongs {
            count += try queue.write { db in
                let statement = try db.cachedStatement(sql: "DELETE FROM song WHERE id = ?")
                statement.setUncheckedArguments([song])
                try statement.execute()
                return db.changesCount
            }
        }
        return count
    }

    // The query rows, one method each, never inlined, so a profiler can single each one out
    // (valgrind --toggle-collect='*GRDBBestSystemC10inAndRange*').

    @inline(never) func inAndRange() throws -> Int {
        let locales = QueryRows.inLocales
        let ages = QueryRows.inAges
        return try QueryRows.repeated(.inAndRange) {
            lastAnswer = try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: GRDBBestSystem.selectResidents + " WHERE locale IN (?, ?, ?) AND age BETWEEN ? AND ?")
                statement.setUncheckedArguments([locales[0], locales[1], locales[2], ages.lowerBound, ages.upperBound])
                return try ResidentRow.fetchAll(statement)
            }
            return lastAnswer.count
        }
    }

    @inline(never) func orTwoIndexes() throws -> Int {
        try QueryRows.repeated(.orTwoIndexes) {
            lastAnswer = try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: GRDBBestSystem.selectResidents + " WHERE locale = ? OR age < ?")
                statement.setUncheckedArguments([QueryRows.orLocale, QueryRows.orBelowAge])
                return try ResidentRow.fetchAll(statement)
            }
            return lastAnswer.count
        }
    }

    /// Each query its own read, as an app asks each time it needs the list. Ties by key
    /// descending, as Buri breaks ties on a descending first sort key.
    @inline(never) func top50AgeDesc() throws -> Int {
        try QueryRows.repeated(.top50AgeDesc) {
            lastAnswer = try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: GRDBBestSystem.selectResidents + " WHERE locale = ? ORDER BY age DESC, objectId DESC LIMIT ?")
                statement.setUncheckedArguments([QueryRows.topLocale, QueryRows.topCount])
                return try ResidentRow.fetchAll(statement)
            }
            return lastAnswer.count
        }
    }

    /// GLOB is case-sensitive, as `hasPrefix` is.
    @inline(never) func filterUnindexed() throws -> Int {
        let ages = QueryRows.filterAges
        return try QueryRows.repeated(.filterUnindexed) {
            lastAnswer = try queue.read { db in
                let statement = try db.cachedStatement(
                    sql: GRDBBestSystem.selectResidents + " WHERE age BETWEEN ? AND ? AND name GLOB ?")
                statement.setUncheckedArguments([ages.lowerBound, ages.upperBound, QueryRows.namePrefix + "*"])
                return try ResidentRow.fetchAll(statement)
            }
            return lastAnswer.count
        }
    }

    static let selectResidents = "SELECT objectId, name, locale, age FROM resident"

    var residentsLoaded = false
    /// What the last query row returned (checked untimed by the driver).
    var lastAnswer: [ResidentRow] = []

    func prepare(_ row: Row) throws {
        if row.isPlaylist, !playlistsLoaded, let data = workload.playlists {
            try GRDBPlaylists.load(queue, data)
            playlistsLoaded = true
        }
        guard row.isQuery, !residentsLoaded else { return }
        try GRDBSystem.loadResidents(queue, workload.residents)
        residentsLoaded = true
    }

    func answer(_ row: Row) -> Answer? { row.isQuery ? .objects(lastAnswer.map(\.resident)) : nil }

    func close() { try? queue.close() }
}

/// A `Person` decoded from a row by column index (`objectId, name, locale, age`), as GRDB's
/// optimised record performance tests decode theirs, with no `Codable` container in between.
struct PersonRow: FetchableRecord {
    var person: Person

    init(row: GRDB.Row) {
        person = Person(objectId: row[0], name: row[1], locale: row[2], age: row[3])
    }
}
