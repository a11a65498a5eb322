import BuriCodec
import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Synchronization
import Testing
@testable import Buri

struct Song: BuriSupport, Equatable, Hashable {
    var id: String
    var title: String
    var album: Ref<Album>?

    static let buri = BuriSchema<Song>(key: \.id, indexes: [.reference("album", \.album, onDelete: .deny)])
}

struct Album: BuriSupport, Equatable {
    var id: String
    var title: String
    static let buri = BuriSchema<Album>(key: \.id)
}

struct Playlist: BuriSupport, Equatable {
    var id: String
    var name: String
    var songs: [Ref<Song>]
    var featured: Ref<Song>?

    static let buri = BuriSchema<Playlist>(
        key: \.id,
        indexes: [
            .reference("songs", \.songs, onDelete: .nullify), .reference("featured", \.featured, onDelete: .nullify),
            .binary("name", \.name),
        ])
}

/// Notes belong to an owner (cascade) and may point at a parent note (cascade: a cycle is allowed).
struct Owner: BuriSupport, Equatable {
    var id: String
    static let buri = BuriSchema<Owner>(key: \.id)
}

struct OwnedNote: BuriSupport, Equatable {
    var id: String
    var owner: Ref<Owner>
    var parent: Ref<OwnedNote>?

    static let buri = BuriSchema<OwnedNote>(
        key: \.id,
        indexes: [
            .reference("owner", \.owner, onDelete: .cascade), .reference("parent", \.parent, onDelete: .cascade),
        ])
}

struct NullifiedOwner: BuriSupport {
    var id: String
    var owner: Ref<Owner>
    static let buri = BuriSchema<NullifiedOwner>(
        key: \.id, indexes: [.reference("owner", \.owner, onDelete: .nullify)])
}

/// A value whose live instances are counted, so a read that throws is seen to release the
/// objects it decoded before the failure.
final class LiveCounted: Codable, Sendable {
    static let live = Atomic<Int>(0)
    let n: Int
    init(_ n: Int) {
        self.n = n
        Self.live.add(1, ordering: .relaxed)
    }
    required init(from decoder: any Decoder) throws {
        n = try decoder.singleValueContainer().decode(Int.self)
        Self.live.add(1, ordering: .relaxed)
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(n)
    }
    deinit { Self.live.subtract(1, ordering: .relaxed) }
}

struct Counted: BuriSupport {
    var id: String
    var value: LiveCounted
    static let buri = BuriSchema<Counted>(key: \.id, bucket: "Counted")
}

/// Stored into `Counted`'s bucket: its `value` is text, which `Counted` does not decode.
struct Mislabeled: BuriSupport {
    var id: String
    var value: String
    static let buri = BuriSchema<Mislabeled>(key: \.id, bucket: "Counted")
}

@Suite("References and relationships: Ref<T>, resolve in order, delete rules in the deletion's commit")
struct ReferenceTests {
    static func fill(_ t: TestDatabase, songs count: Int = 10) throws -> (Bucket<Song>, Bucket<Playlist>) {
        let songs = try t.db.bucket(Song.self)
        let playlists = try t.db.bucket(Playlist.self)
        try songs.store((0..<count).map { Song(id: String(format: "s%03d", $0), title: "t\($0)", album: nil) })
        return (songs, playlists)
    }

    @Test func aRefEncodesAsTheTargetsKeyAndComparesAsBytes() throws {
        let ref = Ref<Song>("s\u{0}é")
        let encoded = try CBOREncoder().encode(ref)
        #expect(try CBORValue(decoding: encoded) == .text("s\u{0}é"))
        #expect(try CBORDecoder().decode(Ref<Song>.self, from: encoded) == ref)
        #expect(Ref<Song>("\u{E9}") != Ref<Song>("e\u{301}"))
        #expect(Set([Ref<Song>("\u{E9}"), Ref<Song>("e\u{301}")]).count == 2)
        #expect(Ref(Song(id: "x", title: "", album: nil)).key == "x")
    }

    /// Every engine in one test, one after the other: `LiveCounted`'s count is process-wide.
    @Test func objectsForKeysPutNilExactlyWhereAKeyIsMissingAndADamagedOneThrowsReleasingTheRest() throws {
        for engine in Engine.allCases {
            let t = try TestDatabase(engine)
            let bucket = try t.db.bucket(Counted.self)
            let stored = ["a": 1, "b": 2, "c": 3, "\u{E9}": 4]
            try bucket.store(stored.map { Counted(id: $0.key, value: LiveCounted($0.value)) })
            let cases: [[String]] = [
                [], ["a"], ["x"], ["x", "y"], ["x", "a"], ["a", "x"], ["x", "a", "y", "b", "z"], ["a", "a", "x", "x"],
                ["c", "b", "a"], ["e\u{301}", "\u{E9}"],
            ]
            // The model compares keys as bytes, as Buri does (a Swift `String` key would take
            // "e\u{301}" for "\u{E9}").
            let model = Dictionary(uniqueKeysWithValues: stored.map { (Array($0.key.utf8), $0.value) })
            for keys in cases {
                let found = try bucket.objects(forKeys: keys).map { $0?.value.n }
                #expect(found == keys.map { model[Array($0.utf8)] }, "\(engine): \(keys)")
            }
            // One record in the middle that does not decode: a typed error naming it, and the
            // objects decoded before it are released, not leaked.
            try t.db.bucket(Mislabeled.self).store(Mislabeled(id: "bad", value: "not a number"))
            let before = LiveCounted.live.load(ordering: .relaxed)
            do {
                _ = try bucket.objects(forKeys: ["a", "b", "x", "bad", "c"])
                Issue.record("\(engine): a record that does not decode was read")
            } catch {
                guard case .decodingFailed(let name, let key, _, _) = error else {
                    Issue.record("\(engine): \(error)")
                    continue
                }
                #expect(name == "Counted" && key == "bad")
            }
            #expect(LiveCounted.live.load(ordering: .relaxed) == before, "\(engine)")
        }
    }

    @Test(arguments: Engine.allCases) func resolvingKeepsOrderReportsMissingAndQueriesFindHolders(engine: Engine) throws
    {
        let t = try TestDatabase(engine)
        let (songs, playlists) = try Self.fill(t)
        let order = [7, 2, 9, 2, 0].map { Ref<Song>(String(format: "s%03d", $0)) }
        try playlists.store(Playlist(id: "p1", name: "mix", songs: order, featured: order[0]))
        try playlists.store(Playlist(id: "p2", name: "other", songs: [order[1]], featured: nil))
        let stored = try #require(try playlists.object(forKey: "p1"))
        #expect(stored.songs == order)  // the array keeps its order, repeats included
        let resolved = try songs.objects(for: stored.songs + [Ref("missing")])
        #expect(resolved.map { $0?.id } == order.map(\.key) + [nil])
        // Paging an ordered relationship is paging its array.
        #expect(try songs.objects(for: Array(stored.songs[1..<3])).map { $0?.id } == ["s002", "s009"])
        // Who holds s002: an index query, by key path or by name.
        #expect(try playlists.keys(.where(\Playlist.songs, equals: Ref<Song>("s002"))) == ["p1", "p2"])
        #expect(try playlists.keys(.index("songs", equals: "s007")) == ["p1"])
        #expect(try playlists.keys(.where(\Playlist.featured, equals: Ref<Song>("s007"))) == ["p1"])
        // The catalog records the relationship for tools.
        let songsIndex = try #require(try t.db.bucketInfo(named: "Playlist")?.index(named: "songs"))
        #expect(songsIndex.references == "Song" && songsIndex.onDelete == .nullify && songsIndex.fields == ["songs"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func aReferenceToAMissingObjectIsRefusedUnlessStoredInTheSameCommit(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let (songs, playlists) = try Self.fill(t, songs: 2)
        #expect {
            try playlists.store(Playlist(id: "p", name: "", songs: [Ref("s000"), Ref("nope")], featured: nil))
        } throws: { error in
            guard case BuriError.danglingReference("Playlist", "p", "songs", "Song", "nope") = error else {
                return false
            }
            return true
        }
        #expect(try playlists.count() == 0)
        // Canonically equal but byte-different: not the same key.
        try songs.store(Song(id: "\u{E9}", title: "", album: nil))
        #expect(throws: BuriError.self) {
            try playlists.store(Playlist(id: "p", name: "", songs: [Ref("e\u{301}")], featured: nil))
        }
        // The target stored in the same transaction first: fine.
        try t.db.write { tx in
            try tx.bucket(Song.self).store(Song(id: "new", title: "", album: nil))
            try tx.bucket(Playlist.self).store(Playlist(id: "p", name: "", songs: [Ref("new")], featured: nil))
            // A caught refusal leaves no trace, and the transaction goes on.
            do {
                try tx.bucket(Playlist.self).store(Playlist(id: "q", name: "", songs: [Ref("zzz")], featured: nil))
            } catch BuriError.danglingReference {}
        }
        #expect(try playlists.keys() == ["p"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func nullifyTakesTheTargetOutOfEveryListInOrder(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let (songs, playlists) = try Self.fill(t)
        let refs = (0..<10).map { Ref<Song>(String(format: "s%03d", $0)) }
        try playlists.store([
            Playlist(id: "a", name: "a", songs: [refs[1], refs[3], refs[1], refs[5]], featured: refs[3]),
            Playlist(id: "b", name: "b", songs: [refs[3]], featured: refs[4]),
            Playlist(id: "c", name: "c", songs: [refs[6]], featured: nil),
        ])
        #expect(try songs.delete(keys: ["s003", "s001"]) == 2)
        #expect(try playlists.object(forKey: "a") == Playlist(id: "a", name: "a", songs: [refs[5]], featured: nil))
        #expect(try playlists.object(forKey: "b") == Playlist(id: "b", name: "b", songs: [], featured: refs[4]))
        #expect(try playlists.object(forKey: "c")?.songs == [refs[6]])
        #expect(try playlists.keys(.index("songs", equals: "s003")).isEmpty)
        #expect(try playlists.keys(.index("featured", equals: "s003")).isEmpty)
        #expect(try playlists.keys(.index("name", equals: "a")) == ["a"])  // other entries stay
        // deleteAll and drop nullify every holder.
        #expect(try songs.deleteAll() == 8)
        #expect(try playlists.objects().allSatisfy { $0.songs.isEmpty && $0.featured == nil })
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func denyRefusesTheWholeDeletionAndLeavesEverythingUnchanged(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let albums = try t.db.bucket(Album.self)
        let songs = try t.db.bucket(Song.self)
        try albums.store([Album(id: "a1", title: "one"), Album(id: "a2", title: "two")])
        try songs.store(Song(id: "s1", title: "x", album: Ref("a1")))
        #expect {
            try albums.delete(keys: ["a2", "a1"])
        } throws: { error in
            guard case BuriError.referenced("Album", "a1", "Song", "s1", "album") = error else { return false }
            return true
        }
        #expect(try albums.keys() == ["a1", "a2"])
        #expect(throws: BuriError.self) { try albums.deleteAll() }
        #expect(throws: BuriError.self) { try t.db.dropBucket(named: "Album") }
        #expect(try albums.count() == 2)
        // Inside a transaction the refused deletion leaves no trace; the holder deleted first lets it go.
        try t.db.write { tx in
            do { try tx.bucket(Album.self).delete(keys: ["a1"]) } catch BuriError.referenced {}
            #expect(try tx.bucket(Album.self).count() == 2)
            try tx.bucket(Song.self).delete(keys: ["s1"])
            try tx.bucket(Album.self).delete(keys: ["a1"])
        }
        #expect(try albums.keys() == ["a2"])
        #expect(try t.db.check().isConsistent)
    }

    @Test(arguments: Engine.allCases) func cascadeDeletesHoldersTransitivelyAndEndsOnACycle(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let owners = try t.db.bucket(Owner.self)
        let notes = try t.db.bucket(OwnedNote.self)
        try owners.store([Owner(id: "o1"), Owner(id: "o2")])
        // n1 ← n2 ← n3 (parents), n4 of another owner under n3; x of o2 alone.
        try notes.store(OwnedNote(id: "n1", owner: Ref("o1"), parent: nil))
        try notes.store(OwnedNote(id: "n2", owner: Ref("o1"), parent: Ref("n1")))
        try notes.store(OwnedNote(id: "n3", owner: Ref("o1"), parent: Ref("n2")))
        try notes.store(OwnedNote(id: "n4", owner: Ref("o2"), parent: Ref("n3")))
        try notes.store(OwnedNote(id: "x", owner: Ref("o2"), parent: nil))
        // A cycle: n1's parent is n3.
        try notes.store(OwnedNote(id: "n1", owner: Ref("o1"), parent: Ref("n3")))
        #expect(try owners.delete(keys: ["o1"]) == 1)
        #expect(try notes.keys() == ["x"])  // n1–n3 by owner, n4 by its parent n3
        #expect(try t.db.check().isConsistent)
        try t.db.dropBucket(named: "Owner")
        #expect(try notes.count() == 0)
        #expect(try t.db.check().isConsistent)
    }

    @Test func aNonOptionalReferenceCannotBeNullified() throws {
        let t = try TestDatabase()
        #expect {
            _ = try t.db.bucket(NullifiedOwner.self)
        } throws: { error in
            guard case BuriError.invalidIndexDefinition("NullifiedOwner", "owner", let reason) = error else {
                return false
            }
            return reason.contains("cannot be nullified")
        }
    }

    @Test(arguments: [Engine.etcd].filter(Engine.allCases.contains))
    func resolvingAThousandReferencesOnEtcdIsABoundedNumberOfRequests(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let etcd = try #require(t.db.engine as? EtcdEngine)
        let (songs, playlists) = try Self.fill(t, songs: 1_000)
        let refs = (0..<1_000).reversed().map { Ref<Song>(String(format: "s%03d", $0 % 1000)) }
        try playlists.store(Playlist(id: "big", name: "big", songs: refs, featured: nil))
        let playlist = try #require(try playlists.object(forKey: "big"))
        let before = etcd.client.requestCount
        let resolved = try songs.objects(for: playlist.songs)
        let requests = etcd.client.requestCount - before
        #expect(resolved.map { $0?.id } == refs.map(\.key))
        #expect(requests <= 4, "\(requests) requests for 1,000 references")
    }

    @Test(arguments: Engine.allCases) func checkReportsDanglingReferencesAndRepairAppliesEachRule(engine: Engine) throws
    {
        let t = try TestDatabase(engine)
        let (songs, playlists) = try Self.fill(t, songs: 3)
        let albums = try t.db.bucket(Album.self)
        let owners = try t.db.bucket(Owner.self)
        let notes = try t.db.bucket(OwnedNote.self)
        try albums.store(Album(id: "a1", title: ""))
        try owners.store(Owner(id: "o1"))
        try songs.store(Song(id: "s100", title: "", album: Ref("a1")))
        try notes.store(OwnedNote(id: "n1", owner: Ref("o1"), parent: nil))
        try playlists.store(
            Playlist(id: "p", name: "", songs: [Ref("s001"), Ref("s002"), Ref("s001")], featured: Ref("s001")))
        // Targets removed behind Buri's back (as a partial restore or a bug might): no rule ran.
        let batch = t.db.engine.makeBatch()
        for (bucket, key) in [("Song", "s001"), ("Owner", "o1"), ("Album", "a1")] {
            let id = try #require(try t.db.bucketInfo(named: bucket)).id
            batch.delete(Keyspace.recordKey(bucket: id, key: key))
        }
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        let report = try t.db.check()
        let dangling = report.problems.filter { $0.kind == .danglingReference }
        #expect(
            Set(dangling.map { "\($0.bucket ?? "")/\($0.key ?? "")/\($0.index ?? "")" })
                == ["Playlist/p/songs", "Playlist/p/featured", "OwnedNote/n1/owner", "Song/s100/album"])
        let repaired = try t.db.check(repair: true)
        #expect(repaired.problems.filter { !$0.repaired }.map(\.kind) == [.danglingReference])
        #expect(try playlists.object(forKey: "p") == Playlist(id: "p", name: "", songs: [Ref("s002")], featured: nil))
        #expect(try notes.count() == 0)
        #expect(try songs.object(forKey: "s100")?.album == Ref("a1"))  // deny: left as it is
        let after = try t.db.check()
        #expect(after.problems.map(\.kind) == [.danglingReference])
        #expect(after.problems.first?.detail.contains("deny") == true)
    }

    /// README, "References and relationships": the example as written there.
    @Test func theReadmeExampleWorksAsWritten() throws {
        struct ReadmePlaylist: BuriSupport {
            var id: String, name: String
            var songs: [Ref<Song>]
            static let buri = BuriSchema<ReadmePlaylist>(
                key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)])
        }
        let t = try TestDatabase()
        let (songs, _) = try Self.fill(t, songs: 3)
        let playlists = try t.db.bucket(ReadmePlaylist.self)
        let song = try #require(try songs.object(forKey: "s001"))
        let playlist = ReadmePlaylist(id: "p", name: "mix", songs: [Ref("s002"), Ref(song), Ref("s000")])
        try playlists.store(playlist)
        let tracks = try songs.objects(for: playlist.songs)
        #expect(tracks.map { $0?.id } == ["s002", "s001", "s000"])
        let holders = try playlists.objects(where: \.songs, equals: Ref(song))
        #expect(holders.map(\.id) == ["p"])
        try songs.delete(keys: [song.id])
        #expect(try playlists.object(forKey: "p")?.songs == [Ref("s002"), Ref("s000")])
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        for line in [
            "var songs: [Ref<Song>]", ".reference(\"songs\", \\.songs, onDelete: .nullify)",
            "try songs.objects(for: playlist.songs)", "try playlists.objects(where: \\.songs, equals: Ref(song))",
            "try songs.delete(keys: [song.id])",
        ] {
            #expect(readme.contains(line), "README lacks \(line)")
        }
    }

    /// Four writers at once (two clients on shared engines): playlists and fans stored with
    /// references to random songs while songs are deleted and stored again. A store that names a
    /// song just deleted is refused; whatever commits, no reference dangles.
    @Test(arguments: Engine.allCases) func fourWritersNeverLeaveADanglingReference(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let other = try t.client(1)
        defer { if other !== t.db { other.close() } }
        let (songs, _) = try Self.fill(t, songs: 40)
        _ = try t.db.bucket(Owner.self)
        let keys = (0..<40).map { String(format: "s%03d", $0) }
        let failures = Mutex<[String]>([])
        let mine = t.db
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            let db = writer % 2 == 0 ? mine : other
            var random = SeededGenerator(seed: UInt64(0xBEE + writer))
            do {
                let songs = try db.bucket(Song.self)
                let playlists = try db.bucket(Playlist.self)
                for step in 0..<60 {
                    do {
                        switch writer {
                        case 0, 1:
                            let refs = (0..<4).map { _ in Ref<Song>(keys.randomElement(using: &random)!) }
                            try playlists.store(
                                Playlist(id: "w\(writer)-\(step % 15)", name: "", songs: refs, featured: refs.first))
                        case 2:
                            try songs.delete(keys: [keys.randomElement(using: &random)!])
                        default:
                            let key = keys.randomElement(using: &random)!
                            try songs.store(Song(id: key, title: "again", album: nil))
                        }
                    } catch BuriError.danglingReference {
                    } catch BuriError.conflict {}
                }
            } catch {
                failures.withLock { $0.append("writer \(writer): \(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let report = try t.db.check()
        #expect(report.isConsistent, "\(report.problems)")
        let stored = Set(try songs.keys())
        for playlist in try t.db.bucket(Playlist.self).objects() {
            #expect(
                playlist.songs.allSatisfy { stored.contains($0.key) }
                    && playlist.featured.map { stored.contains($0.key) } != false)
        }
    }

    /// A relationship into a bucket named explicitly: the name is compared as bytes, so deleting
    /// from the canonically equal "e\u{301}" leaves references into "\u{E9}" alone.
    @Test(arguments: Engine.allCases) func aRelationshipIntoANamedBucketComparesItsNameAsBytes(engine: Engine) throws {
        struct Mix: BuriSupport, Equatable {
            var id: String
            var songs: [Ref<Song>]
            static let buri = BuriSchema<Mix>(
                key: \.id, indexes: [.reference("songs", \.songs, in: "\u{E9}", onDelete: .nullify)])
        }
        let t = try TestDatabase(engine)
        let composed = try t.db.bucket(Song.self, named: "\u{E9}")
        let decomposed = try t.db.bucket(Song.self, named: "e\u{301}")
        try composed.store(Song(id: "a", title: "", album: nil))
        try decomposed.store(Song(id: "a", title: "", album: nil))
        let mixes = try t.db.bucket(Mix.self)
        try mixes.store(Mix(id: "m", songs: [Ref("a")]))
        #expect(throws: BuriError.self) { try mixes.store(Mix(id: "n", songs: [Ref("b")])) }
        try decomposed.store(Song(id: "b", title: "", album: nil))
        #expect(throws: BuriError.self) { try mixes.store(Mix(id: "n", songs: [Ref("b")])) }
        #expect(try decomposed.delete(keys: ["a"]) == 1)
        #expect(try mixes.object(forKey: "m")?.songs == [Ref("a")])
        #expect(try composed.delete(keys: ["a"]) == 1)
        #expect(try mixes.object(forKey: "m")?.songs == [])
        #expect(try t.db.check().isConsistent)
    }

    /// The nullify edit works on the stored bytes: only the array (or the lone reference) changes.
    @Test func theNullifyEditKeepsEveryOtherByte() throws {
        struct Nested: Codable { var inner: Inner; var other: [String] }
        struct Inner: Codable { var refs: [String]; var one: String?; var n: Double }
        let value = Nested(
            inner: Inner(refs: ["a", "\u{E9}", "a", "e\u{301}", String(repeating: "z", count: 300)], one: "a", n: 1.5),
            other: ["a"])
        let bytes = try CBOREncoder().encode(value)
        let removed: Set<[UInt8]> = [Array("a".utf8), Array("\u{E9}".utf8)]
        let edited = try #require(try CBORSplice.removingTexts(removed, at: ["inner", "refs"], in: bytes))
        let back = try CBORDecoder().decode(Nested.self, from: edited)
        #expect(back.inner.refs == ["e\u{301}", String(repeating: "z", count: 300)])
        #expect(back.inner.one == "a" && back.inner.n == 1.5 && back.other == ["a"])
        let lone = try #require(try CBORSplice.removingTexts(removed, at: ["inner", "one"], in: bytes))
        #expect(try CBORDecoder().decode(Nested.self, from: lone).inner.one == nil)
        #expect(try CBORSplice.removingTexts(removed, at: ["inner", "missing"], in: bytes) == nil)
        #expect(try CBORSplice.removingTexts([Array("q".utf8)], at: ["inner", "refs"], in: bytes) == nil)
        // 30 elements: the array's head grows from one byte to two, and shrinks back.
        let long = try CBOREncoder().encode(["refs": (0..<30).map { "k\($0)" }])
        let shorter = try #require(
            try CBORSplice.removingTexts(Set((0..<10).map { Array("k\($0)".utf8) }), at: ["refs"], in: long))
        #expect(try CBORDecoder().decode([String: [String]].self, from: shorter)["refs"] == (10..<30).map { "k\($0)" })
    }
}

/// The byte search that picks the catalog entries declaring relationships, and the splice that
/// takes references out of a holder: both compare bytes with shortcuts (first byte, last byte);
/// every position and every near miss must still answer right.
@Suite("Delete rules: byte comparisons with shortcuts")
struct DeleteRuleByteTests {
    @Test func theMarkerIsFoundAtEveryPositionAndNearMissesAreNot() {
        let marker = Array("references".utf8)
        var rng = SeededGenerator(seed: 11)
        for length in 0..<40 {
            let filler = (0..<length).map { _ in UInt8(rng.next() % 3) + 0x70 }  // p q r: many first bytes
            for at in 0...length {
                let bytes = Array(filler[..<at]) + marker + Array(filler[at...])
                #expect(bytes.withUnsafeBytes { BuriDatabase.contains(marker, in: $0) })
                // The marker with any one byte changed, or cut short at either end, is not found.
                for change in 0..<marker.count {
                    var near = marker
                    near[change] ^= 0x20
                    let miss = Array(filler[..<at]) + near + Array(filler[at...])
                    #expect(!miss.withUnsafeBytes { BuriDatabase.contains(marker, in: $0) })
                }
                let cut = Array(filler[..<at]) + marker.dropLast() + Array(filler[at...])
                #expect(!cut.withUnsafeBytes { BuriDatabase.contains(marker, in: $0) })
            }
        }
        #expect(![UInt8]().withUnsafeBytes { BuriDatabase.contains(marker, in: $0) })
        #expect(!Array("reference".utf8).withUnsafeBytes { BuriDatabase.contains(marker, in: $0) })
    }

    /// The header's entries are told apart before `memcmp` by one probe byte: keys that differ
    /// only there, only elsewhere, or in length, and keys holding NUL (escaped in a tuple), are
    /// each taken out of the holder alone, entry and element both.
    @Test(arguments: [Engine.memory, .leveldb]) func nullifyTakesOutExactlyTheDeletedKeyAmongNearTwins(
        engine: Engine
    ) throws {
        let keys = [
            "song-0001", "song-0002", "song-1001", "tong-0001", "song-000", "song-00011", "s", "t", "\u{0}",
            "x\u{0}", "x\u{0}\u{0}", "\u{0}x", "e\u{301}", "\u{E9}",
        ]
        for removed in keys {
            let t = try TestDatabase(engine)
            let songs = try t.db.bucket(Song.self)
            let playlists = try t.db.bucket(Playlist.self)
            try songs.store(keys.map { Song(id: $0, title: "", album: nil) })
            try playlists.store(
                Playlist(id: "p", name: "all", songs: keys.map { Ref($0) }, featured: Ref(removed)))
            #expect(try songs.delete(keys: [removed]) == 1)
            let left = try #require(try playlists.object(forKey: "p"))
            let expected = keys.filter { !$0.utf8.elementsEqual(removed.utf8) }
            #expect(
                left.songs.map { Array($0.key.utf8) } == expected.map { Array($0.utf8) }, "\(removed.debugDescription)")
            #expect(left.featured == nil)
            for key in expected {
                #expect(try playlists.keys(.where(\Playlist.songs, equals: Ref<Song>(key))) == ["p"])
            }
            #expect(try playlists.keys(.where(\Playlist.songs, equals: Ref<Song>(removed))).isEmpty)
            #expect(try t.db.check().isConsistent, "\(removed.debugDescription)")
        }
    }

    /// Texts of every head form (lengths around 23/24 and 255/256), among items that are not
    /// text, with random ones removed: the array keeps everything else in order; every cut of the
    /// payload is a typed error or no change, never a wrong edit.
    @Test func theSpliceMatchesAModelForEveryHeadFormAndRefusesCutPayloads() throws {
        var rng = SeededGenerator(seed: 25)
        let lengths = [0, 1, 22, 23, 24, 25, 254, 255, 256, 300]
        for round in 0..<40 {
            var items: [CBORValue] = []
            var texts: [[UInt8]] = []
            for _ in 0..<(Int(rng.next() % 12) + 1) {
                if rng.next() % 5 == 0 {
                    items.append(rng.next() % 2 == 0 ? .unsigned(rng.next() % 1000) : .array([.text("n")]))
                } else {
                    let length = lengths[Int(rng.next() % UInt64(lengths.count))]
                    let text = (0..<length).map { _ in UInt8(rng.next() % 3) + 0x61 }
                    texts.append(text)
                    items.append(.text(String(decoding: text, as: UTF8.self)))
                }
            }
            let removed = Set(texts.filter { _ in rng.next() % 3 == 0 })
            let payload = CBORValue.map([
                CBORMapEntry(key: .text("songs"), value: .array(items)),
                CBORMapEntry(key: .text("n"), value: .text("x")),
            ]).encoded()
            let kept = items.filter { item in
                if case .text(let text) = item { return !removed.contains(Array(text.utf8)) }
                return true
            }
            let edited = try CBORSplice.removingTexts(removed, at: ["songs"], in: payload)
            if kept.count == items.count {
                #expect(edited == nil, "round \(round)")
            } else {
                let expected = CBORValue.map([
                    CBORMapEntry(key: .text("songs"), value: .array(kept)),
                    CBORMapEntry(key: .text("n"), value: .text("x")),
                ]).encoded()
                #expect(edited == expected, "round \(round)")
            }
            if !removed.isEmpty {
                for end in 0..<payload.count {
                    do {
                        let cut = try CBORSplice.removingTexts(removed, at: ["songs"], in: Array(payload[..<end]))
                        // A cut before the array is reached leaves nothing to edit.
                        #expect(cut == nil || end > payload.count - 5, "round \(round), cut at \(end)")
                    } catch is CBORError {
                    }
                }
            }
        }
    }

    @Test func referencesDifferingOnlyInTheirLastOrFirstByteAreTakenOutExactly() throws {
        let keys = ["song-0001", "song-0002", "song-1001", "tong-0001", "song-000", "song-00011", ""]
        for removed in keys {
            let payload = try CBOREncoder().encode(["songs": keys, "name": ["song-0001"]])
            let edited = try #require(
                try CBORSplice.removingTexts([Array(removed.utf8)], at: ["songs"], in: payload))
            let decoded = try CBORDecoder().decode([String: [String]].self, from: edited)
            #expect(decoded["songs"] == keys.filter { $0.utf8.elementsEqual(removed.utf8) == false })
            #expect(decoded["name"] == ["song-0001"])
        }
        let payload = try CBOREncoder().encode(["songs": keys])
        #expect(try CBORSplice.removingTexts([Array("song-0003".utf8)], at: ["songs"], in: payload) == nil)
    }
}
