import Buri
import Foundation
import Testing

struct ToolSong: BuriSupport, Equatable {
    var id: String
    var title: String
    static let buri = BuriSchema<ToolSong>(key: \.id, bucket: "Song")
}

struct ToolPlaylist: BuriSupport, Equatable {
    var id: String
    var songs: [Ref<ToolSong>]
    static let buri = BuriSchema<ToolPlaylist>(
        key: \.id, indexes: [.reference("songs", \.songs, onDelete: .nullify)], bucket: "Playlist")
}

struct ToolFan: BuriSupport, Equatable {
    var id: String
    var favourite: Ref<ToolSong>
    static let buri = BuriSchema<ToolFan>(
        key: \.id, indexes: [.reference("favourite", \.favourite, onDelete: .cascade)], bucket: "Fan")
}

@Suite("buri delete and drop apply delete rules; export and restore keep relationships")
struct ReferenceToolTests {
    func makeDatabase(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.path("music.buri")
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(ToolSong.self).store((1...4).map { ToolSong(id: "s\($0)", title: "t\($0)") })
        try db.bucket(ToolPlaylist.self).store([
            ToolPlaylist(id: "p1", songs: [Ref("s2"), Ref("s1"), Ref("s2"), Ref("s3")]),
            ToolPlaylist(id: "p2", songs: [Ref("s1")]),
        ])
        try db.bucket(ToolFan.self).store([
            ToolFan(id: "f1", favourite: Ref("s1")), ToolFan(id: "f2", favourite: Ref("s4")),
        ])
        return path
    }

    @Test func deleteNullifiesAndCascadesInItsCommit() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox)
        expectSuccess(try buri("delete", path, "Song", "s1"))
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.bucket(ToolPlaylist.self).object(forKey: "p1")?.songs == [Ref("s2"), Ref("s2"), Ref("s3")])
        #expect(try db.bucket(ToolPlaylist.self).object(forKey: "p2")?.songs == [])
        #expect(try db.bucket(ToolFan.self).keys() == ["f2"])
        #expect(try db.check().isConsistent)
    }

    @Test func dropAppliesTheRulesToEveryHolder() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox)
        expectSuccess(try buri("drop", path, "Song", "--force"))
        expectSuccess(try buri("check", path))
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.bucket(ToolPlaylist.self).objects().allSatisfy { $0.songs.isEmpty })
        #expect(try db.bucket(ToolFan.self).count() == 0)
    }

    @Test func exportAndRestoreKeepTheRelationshipAndItsRule() throws {
        let sandbox = try Sandbox()
        let path = try makeDatabase(sandbox)
        let export = try buri("export", path)
        expectSuccess(export)
        #expect(export.stdout.contains("\"references\":\"Song\""))
        #expect(export.stdout.contains("\"onDelete\":\"cascade\""))
        let copy = sandbox.path("copy.buri")
        expectSuccess(try buri(["restore", copy, "-"], stdin: export.stdout))
        let again = try buri("export", copy)
        #expect(again.stdout == export.stdout)
        expectSuccess(try buri("delete", copy, "Song", "s2"))
        let db = try BuriDatabase(path: copy)
        defer { db.close() }
        let info = try #require(try db.bucketInfo(named: "Playlist")?.index(named: "songs"))
        #expect(info.references == "Song" && info.onDelete == .nullify)
        #expect(try db.bucket(ToolPlaylist.self).object(forKey: "p1")?.songs == [Ref("s1"), Ref("s3")])
    }
}
