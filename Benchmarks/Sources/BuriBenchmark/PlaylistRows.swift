import Buri
import Foundation
import GRDB

// The playlist rows (issue 25): BNRPersistence's playlist shape, songs and playlists that hold an
// ordered list of them. Buri stores each playlist's songs as an array of `Ref<Song>` with a
// reference index (`onDelete: .nullify`); GRDB as a join table `playlistSong (playlistId, songId,
// position)` with foreign keys `ON DELETE CASCADE` and an index on `songId`. The rows: fetch one
// playlist's songs in order, find every playlist holding a song, delete a song held by 100
// playlists. The sizes are fixed (100,000 songs, 1,000 playlists of 100), whatever `--count`
// says, so every run measures the shape; `--playlist-songs N` shrinks them for a quick run.
// Every system loads them untimed before the first playlist row, and every system's answer is
// checked, untimed, against the one computed here in plain Swift.

/// A song: its key and a title. Buri's `Song` bucket and GRDB's `song` table.
struct Song: BuriSupport, FetchableRecord, PersistableRecord, Equatable, Sendable {
    var id: String
    var title: String

    static let buri = BuriSchema<Song>(key: \.id, bucket: "Song")
    static let databaseTableName = "song"
    /// The join-table rows naming this song (GRDB infers the foreign key `playlistSong.songId`).
    static let playlistEntries = hasMany(PlaylistSong.self)
}

/// A playlist as Buri stores it: its songs in order, as references with a nullify rule.
struct Playlist: BuriSupport, Equatable, Sendable {
    var id: String
    var name: String
    var songs: [Ref<Song>]

    static let buri = BuriSchema<Playlist>(
        key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)], bucket: "Playlist")
}

/// A playlist as GRDB stores it: its row; the songs are in `playlistSong`.
struct PlaylistRecord: Codable, FetchableRecord, PersistableRecord, Equatable {
    var id: String
    var name: String
    static let databaseTableName = "playlist"
}

/// One song of one playlist at `position` (positions are sparse after deletions: the order is
/// `ORDER BY position`, so no renumbering is needed).
struct PlaylistSong: Codable, FetchableRecord, PersistableRecord, Equatable {
    var playlistId: String
    var songId: String
    var position: Int
    static let databaseTableName = "playlistSong"
}

/// What Buri (and Buri best) need of a song type.
protocol SongShape: BuriSupport {
    var id: String { get }
    var title: String { get }
    init(_ song: Song)
}

/// What Buri (and Buri best) need of a playlist type.
protocol PlaylistShape: BuriSupport {
    associatedtype Track: SongShape
    var id: String { get }
    var name: String { get }
    var songs: [Ref<Track>] { get }
    init(_ playlist: Playlist)
    /// The key path the schema's reference index is declared on (`\P.songs` in generic code
    /// names the protocol requirement, not the stored property the index knows).
    static var songsKeyPath: KeyPath<Self, [Ref<Track>]> & Sendable { get }
}

extension Song: SongShape {
    init(_ song: Song) { self = song }
}

extension Playlist: PlaylistShape {
    init(_ playlist: Playlist) { self = playlist }
    static var songsKeyPath: KeyPath<Playlist, [Ref<Song>]> & Sendable { \Playlist.songs }
}

/// `Song` with a hand-written `init(record:)`, for Buri (best).
struct BestSong: SongShape, BuriRecordDecodable, Equatable {
    var id: String
    var title: String

    static let buri = BuriSchema<BestSong>(key: \.id, bucket: "Song")

    init(_ song: Song) {
        id = song.id
        title = song.title
    }

    init(record: inout CBORRecordReader) throws {
        var id: String?, title: String?
        while let field = try record.nextField() {
            switch field {
            case "id": id = try record.string()
            case "title": title = try record.string()
            default: try record.skip()
            }
        }
        guard let id else { throw record.missingField("id") }
        guard let title else { throw record.missingField("title") }
        self.id = id
        self.title = title
    }
}

/// `Playlist` with a hand-written `init(record:)`, for Buri (best).
struct BestPlaylist: PlaylistShape, BuriRecordDecodable, Equatable {
    var id: String
    var name: String
    var songs: [Ref<BestSong>]

    static let buri = BuriSchema<BestPlaylist>(
        key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)], bucket: "Playlist")
    static var songsKeyPath: KeyPath<BestPlaylist, [Ref<BestSong>]> & Sendable { \BestPlaylist.songs }

    init(_ playlist: Playlist) {
        id = playlist.id
        name = playlist.name
        songs = playlist.songs.map { Ref<BestSong>($0.key) }
    }

    init(record: inout CBORRecordReader) throws {
        var id: String?, name: String?, songs: [Ref<BestSong>]?
        while let field = try record.nextField() {
            switch field {
            case "id": id = try record.string()
            case "name": name = try record.string()
            case "songs": songs = try record.decode([Ref<BestSong>].self)
            default: try record.skip()
            }
        }
        guard let id else { throw record.missingField("id") }
        guard let name else { throw record.missingField("name") }
        guard let songs else { throw record.missingField("songs") }
        self.id = id
        self.name = name
        self.songs = songs
    }
}

/// A `Song` decoded from a row by column index (`id, title`), for GRDB best.
struct SongRow: FetchableRecord {
    var song: Song
    init(row: GRDB.Row) { song = Song(id: row[0], title: row[1]) }
}

/// The playlist section's sizes: `songs` songs, `songs / 100` playlists of 100 songs each.
struct PlaylistSizes: Sendable {
    var songs = 100_000
    var perPlaylist = 100
    var playlists: Int { songs / perPlaylist }
    /// Songs held by exactly `holdersOfHot` playlists each: the holder queries and the deletions.
    var hotSongs = 20
    var holdersOfHot = 100
    /// Playlists whose songs the fetch row reads, one query each.
    var fetches = 200
    /// Holder queries: each hot song asked this many times.
    var holderRounds = 5
}

/// The songs, the playlists and every playlist row's expected answer, built once before any
/// timing (the same for every count: the sizes are the section's own).
struct PlaylistData: Sendable {
    let sizes: PlaylistSizes
    let songs: [Song]
    /// Each playlist's songs, as indices into `songs`, in order.
    let members: [[Int32]]
    let playlists: [Playlist]
    /// The songs held by exactly `holdersOfHot` playlists, in the order the delete row deletes them.
    let hotSongs: [String]
    /// The playlists the fetch row reads (indices into `playlists`), in order.
    let fetchOrder: [Int]
    /// The songs the holder row asks about, in order.
    let holderQueries: [String]

    init(sizes: PlaylistSizes) {
        self.sizes = sizes
        let songCount = sizes.songs
        let playlistCount = sizes.playlists
        precondition(playlistCount >= sizes.holdersOfHot, "the playlist section needs ≥ 100 playlists")
        songs = (0..<songCount).map { i in
            Song(id: uuidString(-50_000_000 - i), title: "Track \(i) of album \(i / 12)")
        }
        var generator = SplitMix64(seed: 0x504C_4159_4C49_5354)
        // The hot songs: distinct, each put in exactly `holdersOfHot` distinct playlists.
        var hot: [Int] = []
        var hotSet = Set<Int>()
        while hot.count < sizes.hotSongs {
            let s = Int(generator.next() % UInt64(songCount))
            if hotSet.insert(s).inserted { hot.append(s) }
        }
        var lists = [[Int32]](repeating: [], count: playlistCount)
        var indices = Array(0..<playlistCount)
        for s in hot {
            // A partial Fisher–Yates shuffle: the first `holdersOfHot` playlists, each once.
            for k in 0..<sizes.holdersOfHot {
                let j = k + Int(generator.next() % UInt64(playlistCount - k))
                indices.swapAt(k, j)
                lists[indices[k]].append(Int32(s))
            }
        }
        // The rest of each playlist: other songs drawn at random (a song may be in several
        // playlists, at most once in each), then the playlist's order shuffled.
        for p in 0..<playlistCount {
            var held = Set(lists[p])
            while lists[p].count < sizes.perPlaylist {
                let s = Int32(generator.next() % UInt64(songCount))
                if !hotSet.contains(Int(s)), held.insert(s).inserted { lists[p].append(s) }
            }
            lists[p].shuffle(using: &generator)
        }
        members = lists
        let songs = songs
        playlists = (0..<playlistCount).map { p in
            Playlist(
                id: uuidString(-60_000_000 - p), name: "Playlist \(p)",
                songs: lists[p].map { Ref<Song>(songs[Int($0)].id) })
        }
        hotSongs = hot.map { songs[$0].id }
        fetchOrder = (0..<sizes.fetches).map { ($0 * 5) % playlistCount }
        holderQueries = (0..<sizes.holderRounds).flatMap { _ in hot.map { songs[$0].id } }
        // Every hot song is held by exactly `holdersOfHot` playlists, and no other song is.
        var holders: [Int32: Int] = [:]
        for list in lists { for s in list { holders[s, default: 0] += 1 } }
        precondition(hot.allSatisfy { holders[Int32($0)] == sizes.holdersOfHot })
        precondition(holders.filter { $0.value >= sizes.holdersOfHot }.count == sizes.hotSongs)
    }

    /// How many objects `row` handles: songs fetched, playlist ids returned, songs deleted.
    func objects(for row: Row) -> Int {
        switch row {
        case .playlistSongs: fetchOrder.count * sizes.perPlaylist
        case .playlistHolders: holderQueries.count * sizes.holdersOfHot
        case .playlistDelete: hotSongs.count
        default: 0
        }
    }

    /// The songs of `playlists[p]`, in order.
    func expectedSongs(_ p: Int) -> [Song] { members[p].map { songs[Int($0)] } }

    /// The ids of the playlists holding `song`, in key (byte) order.
    func expectedHolders(_ song: String) -> [String] {
        playlists.filter { $0.songs.contains(Ref<Song>(song)) }.map(\.id).sorted(by: keyPrecedes)
    }

    /// Checks a system's answer to a playlist row, and throws at the first difference.
    func check(_ answer: PlaylistAnswer?, row: Row, system: String) throws {
        func fail(_ what: String) -> BenchmarkFailure { BenchmarkFailure("\(system), \(row.title): \(what)") }
        switch answer {
        case nil:
            throw fail("no answer recorded")
        case .songs(let lists):
            guard lists.count == fetchOrder.count else { throw fail("\(lists.count) playlists fetched") }
            for (list, p) in zip(lists, fetchOrder) where list != expectedSongs(p) {
                throw fail(
                    "playlist \(playlists[p].id): \(list.map(\.id).prefix(3))… (\(list.count) songs), expected \(expectedSongs(p).map(\.id).prefix(3))… (\(sizes.perPlaylist))"
                )
            }
        case .holders(let answers):
            guard answers.count == holderQueries.count else { throw fail("\(answers.count) holder queries") }
            var expected: [String: [String]] = [:]
            for (ids, song) in zip(answers, holderQueries) {
                let want = expected[song] ?? expectedHolders(song)
                expected[song] = want
                guard ids.sorted(by: keyPrecedes) == want else {
                    throw fail("song \(song): \(ids.count) playlists, expected \(want.count), or other playlists")
                }
            }
        case .after(let state, let songCount, let deletedLeft):
            let deleted = Set(hotSongs)
            guard deletedLeft == 0 else { throw fail("\(deletedLeft) deleted songs still stored") }
            guard songCount == songs.count - deleted.count else {
                throw fail("\(songCount) songs left, expected \(songs.count - deleted.count)")
            }
            guard state.count == playlists.count else {
                throw fail("\(state.count) playlists, expected \(playlists.count)")
            }
            for playlist in playlists {
                let want = playlist.songs.map(\.key).filter { !deleted.contains($0) }
                guard state[playlist.id] == want else {
                    throw fail(
                        "playlist \(playlist.id) afterwards: \(state[playlist.id]?.count ?? -1) songs, expected \(want.count) (in order)"
                    )
                }
            }
        }
    }
}

/// What a system returned for a playlist row.
enum PlaylistAnswer {
    /// The fetch row: every fetched playlist's songs, in order.
    case songs([[Song]])
    /// The holder row: each query's playlist ids (any order; compared as sets).
    case holders([[String]])
    /// After the delete row: every playlist's song ids in order, the songs left, and how many of
    /// the deleted songs are still stored.
    case after(playlists: [String: [String]], songCount: Int, deletedLeft: Int)
}

/// The playlist rows on Buri, for any song and playlist types (`Song`/`Playlist` for Buri and
/// Buri in memory, `BestSong`/`BestPlaylist` for Buri best): one non-inlined method per row, so a
/// profiler can single each out (valgrind --toggle-collect='*BuriPlaylistRows*songsInOrder*').
final class BuriPlaylistRows<P: PlaylistShape> {
    typealias S = P.Track
    let database: BuriDatabase
    let data: PlaylistData
    let songs: Bucket<S>
    let playlists: Bucket<P>
    var fetched: [[S?]] = []
    var holders: [[String]] = []

    /// Opens the buckets and loads the songs and playlists (untimed): stored, compacted, every
    /// record and entry read once, as the query rows load the residents.
    init(database: BuriDatabase, data: PlaylistData) throws {
        self.database = database
        self.data = data
        songs = try database.bucket(S.self)
        playlists = try database.bucket(P.self)
        try songs.store(data.songs.map(S.init))
        try playlists.store(data.playlists.map(P.init))
        try database.purgeRetiredBuckets(reclaimingSpace: false)
        try database.compact()
        _ = try songs.objects()
        _ = try playlists.objects()
        _ = try playlists.keys(.index("songs", in: IndexValue("")...))
    }

    func run(_ row: Row) throws -> Int {
        switch row {
        case .playlistSongs: try songsInOrder()
        case .playlistHolders: try holdersOfSong()
        case .playlistDelete: try deleteHeldSongs()
        default: throw BenchmarkFailure("not a playlist row: \(row.title)")
        }
    }

    /// One playlist read by key, then its songs resolved in order (`objects(for:)`).
    @inline(never) func songsInOrder() throws -> Int {
        fetched.removeAll(keepingCapacity: true)
        var count = 0
        for p in data.fetchOrder {
            guard let playlist = try playlists.object(forKey: data.playlists[p].id) else {
                throw BenchmarkFailure("Buri: playlist \(data.playlists[p].id) missing")
            }
            let list = try songs.objects(for: playlist.songs)
            count += list.count
            fetched.append(list)
        }
        return count
    }

    /// The reference index: the keys of the playlists holding the song.
    @inline(never) func holdersOfSong() throws -> Int {
        holders.removeAll(keepingCapacity: true)
        var count = 0
        for song in data.holderQueries {
            let keys = try playlists.keys(.where(P.songsKeyPath, equals: Ref<S>(song)))
            count += keys.count
            holders.append(keys)
        }
        return count
    }

    /// Each hot song deleted in a commit of its own; the nullify rule removes it from its 100
    /// playlists in that commit.
    @inline(never) func deleteHeldSongs() throws -> Int {
        var count = 0
        for song in data.hotSongs { count += try songs.delete(keys: [song]) }
        return count
    }

    func answer(_ row: Row) throws -> PlaylistAnswer? {
        switch row {
        case .playlistSongs:
            return .songs(
                fetched.map { $0.map { $0.map { Song(id: $0.id, title: $0.title) } ?? Song(id: "", title: "") } })
        case .playlistHolders: return .holders(holders)
        case .playlistDelete:
            var state: [String: [String]] = [:]
            for playlist in try playlists.objects() { state[playlist.id] = playlist.songs.map(\.key) }
            let left = try songs.objects(forKeys: data.hotSongs).compactMap { $0 }.count
            return .after(playlists: state, songCount: try songs.count(), deletedLeft: left)
        default: return nil
        }
    }
}

/// The playlist schema for both GRDB columns (made by `GRDBSystem.open`): the join table's
/// primary key (playlistId, position) keeps each playlist's songs in order, `songId` is indexed
/// for the holder query and the cascade, and both foreign keys cascade (GRDB turns
/// `foreign_keys` on), so deleting a song deletes its join rows in the same statement.
enum GRDBPlaylists {
    static func createTables(_ db: GRDB.Database) throws {
        try db.create(table: Song.databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("title", .text).notNull()
        }
        try db.create(table: PlaylistRecord.databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("name", .text).notNull()
        }
        try db.create(table: PlaylistSong.databaseTableName) { t in
            t.column("playlistId", .text).notNull().references(PlaylistRecord.databaseTableName, onDelete: .cascade)
            t.column("songId", .text).notNull().indexed().references(Song.databaseTableName, onDelete: .cascade)
            t.column("position", .integer).notNull()
            t.primaryKey(["playlistId", "position"])
        }
    }

    /// Before the first playlist row (untimed): every song, playlist and join row inserted in one
    /// transaction, then the WAL checkpointed, as `GRDBSystem.loadResidents` does.
    static func load(_ queue: DatabaseQueue, _ data: PlaylistData) throws {
        try queue.write { db in
            let song = try db.cachedStatement(sql: "INSERT INTO song (id, title) VALUES (?, ?)")
            for s in data.songs {
                song.setUncheckedArguments([s.id, s.title])
                try song.execute()
            }
            let playlist = try db.cachedStatement(sql: "INSERT INTO playlist (id, name) VALUES (?, ?)")
            let entry = try db.cachedStatement(
                sql: "INSERT INTO playlistSong (playlistId, songId, position) VALUES (?, ?, ?)")
            for p in data.playlists {
                playlist.setUncheckedArguments([p.id, p.name])
                try playlist.execute()
                for (position, ref) in p.songs.enumerated() {
                    entry.setUncheckedArguments([p.id, ref.key, position])
                    try entry.execute()
                }
            }
        }
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// After the delete row (untimed): every playlist's song ids in order, the songs left, and
    /// how many deleted songs are still there.
    static func after(_ queue: DatabaseQueue, _ data: PlaylistData) throws -> PlaylistAnswer {
        try queue.read { db in
            var state: [String: [String]] = [:]
            for id in try String.fetchAll(db, sql: "SELECT id FROM playlist") { state[id] = [] }
            let rows = try GRDB.Row.fetchCursor(
                db, sql: "SELECT playlistId, songId FROM playlistSong ORDER BY playlistId, position")
            while let row = try rows.next() { state[row[0], default: []].append(row[1]) }
            let songCount = try Song.fetchCount(db)
            let left = try Song.filter(keys: data.hotSongs).fetchCount(db)
            return .after(playlists: state, songCount: songCount, deletedLeft: left)
        }
    }
}
