import BuriCodec
import BuriStorage
import BuriTestSupport
import Foundation
import Testing
@testable import Buri

/// A playlist with a rating (numeric, listed) beside its relationships (derived).
private struct RatedPlaylist: BuriSupport, Equatable {
    var id: String
    var rating: Int
    var songs: [Ref<Song>]
    var featured: Ref<Song>?

    static let buri = BuriSchema<RatedPlaylist>(
        key: \.id,
        indexes: [
            .reference("songs", \.songs, onDelete: .nullify), .numeric("rating", \.rating),
            .reference("featured", \.featured, onDelete: .nullify),
        ],
        bucket: "RatedPlaylist")
}

/// Record headers of layout 2 (docs/FORMAT.md §10, "Derived entries"): a relationship's entries
/// derived from the payload instead of listed, read by every reader of headers as if listed.
struct DerivedEntryTests {
    private func m(_ pairs: (String, CBORValue)...) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: .text($0.0), value: $0.1) })
    }

    private static func record(_ t: TestDatabase, _ bucket: Bucket<some BuriSupport>, _ key: String) throws -> [UInt8]?
    {
        try t.db.engine.latest().get(Keyspace.recordKey(bucket: bucket.raw.descriptor.id, key: key))
    }

    private static func parse(_ value: [UInt8]) throws -> (RecordHeader, Int) {
        let result: Result<(RecordHeader, Int), FormatError> = value.withUnsafeBytes { raw in
            Result { () throws(FormatError) -> (RecordHeader, Int) in try RecordHeader.parse(raw) }
        }
        return try result.get()
    }

    /// The entries an index holds, as (index id, tuple, object key), from the index's key space.
    private static func indexEntries(_ t: TestDatabase, bucketId: UInt32) throws -> Set<[UInt8]> {
        var found = Set<[UInt8]>()
        let cursor = try t.db.engine.latest().cursor(
            in: .prefix([Keyspace.indexTag] + Keyspace.bucketIdsValue(bucketId)))
        while try cursor.next() { found.insert(cursor.key) }
        return found
    }

    @Test func theSpecExampleParsesToItsEntriesAndWritesBackByteForByte() throws {
        let header = bytes(hex: "02 01 00 00 01 01 01 05 73 6f 6e 67 73")
        let payload = bytes(hex: "a2 62 69 64 62 70 31 65 73 6f 6e 67 73 83 62 73 37 62 73 32 62 73 37")
        let (parsed, offset) = try Self.parse(header + payload)
        #expect(offset == header.count)
        #expect(
            parsed.entries == [
                RecordHeader.Entry(index: 1, tuple: bytes(hex: "30 73 37 00 00")),
                RecordHeader.Entry(index: 1, tuple: bytes(hex: "30 73 32 00 00")),
            ])
        #expect(parsed.derived == [RecordHeader.Derived(index: 1, path: [Array("songs".utf8)])])
        var written: [UInt8] = []
        parsed.append(to: &written)
        #expect(written == header)
        // A header without derived indexes is layout 1, as before.
        var plain: [UInt8] = []
        RecordHeader(schemaVersion: 0, entries: parsed.entries).append(to: &plain)
        #expect(plain.first == 1)
        #expect(try Self.parse(plain + payload).0.entries == parsed.entries)
    }

    @Test func whatAPathHoldsGivesTheEntriesTheSpecSays() throws {
        func entries(_ payload: CBORValue, path: [String] = ["songs"]) throws -> [[UInt8]]? {
            let encoded = payload.encoded()
            let derived = RecordHeader.Derived(index: 3, path: path.map { Array($0.utf8) })
            var value: [UInt8] = []
            RecordHeader(schemaVersion: 0, entries: [], derived: [derived]).append(to: &value)
            value += encoded
            return try? Self.parse(value).0.entries.map(\.tuple)
        }
        func tuple(_ text: String) -> [UInt8] { IndexValue(text).encoded }
        let nul = "a\u{0}b"
        #expect(
            try entries(m(("songs", .array([.text("x"), .null, .text("y"), .text("x")])))) == [tuple("x"), tuple("y")])
        #expect(try entries(m(("songs", .text(nul)))) == [tuple(nul)])
        // Canonically equal, byte-different keys stay two entries.
        #expect(
            try entries(m(("songs", .array([.text("\u{E9}"), .text("e\u{301}")]))))
                == [tuple("\u{E9}"), tuple("e\u{301}")])
        #expect(try entries(m(("other", .text("x")))) == [])
        #expect(try entries(m(("songs", .null))) == [])
        #expect(try entries(m(("songs", .array([])))) == [])
        // The first equal key is taken; keys compare as bytes.
        #expect(try entries(m(("songs", .text("a")), ("songs", .text("b")))) == [tuple("a")])
        #expect(try entries(m(("songs\u{0}", .text("a")))) == [])
        // A nested path; null on the way is a missing field.
        let nested = m(("album", m(("tracks", .array([.text("t")])))))
        #expect(try entries(nested, path: ["album", "tracks"]) == [tuple("t")])
        #expect(try entries(m(("album", .null)), path: ["album", "tracks"]) == [])
        // Anything else is damage.
        #expect(try entries(m(("songs", .unsigned(1)))) == nil)
        #expect(try entries(m(("songs", .array([.text("a"), .bytes([1])])))) == nil)
        #expect(try entries(m(("songs", .array([.array([.text("a")])])))) == nil)
        #expect(try entries(m(("album", .text("x"))), path: ["album", "tracks"]) == nil)
        #expect(try entries(.array([.text("songs")])) == nil)
    }

    @Test func aHeaderThatBreaksTheRulesIsRefusedAndNoCutOrByteChangeCrashes() throws {
        let payload = m(("s", .array([.text("k1"), .text("k2")]))).encoded()
        func header(listed: [RecordHeader.Entry], derivedBytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [2, 1, 0]
            Varint.append(UInt64(listed.count), to: &out)
            for entry in listed {
                out += [UInt8(entry.index), UInt8(entry.tuple.count)] + entry.tuple
            }
            return out + derivedBytes + payload
        }
        let good = header(listed: [], derivedBytes: [1, 4, 1, 1, 0x73])
        #expect(try Self.parse(good).0.entries.count == 2)
        // No derived index, a derived index named twice, or also listed: refused.
        #expect(throws: FormatError.self) { try Self.parse(header(listed: [], derivedBytes: [0])) }
        #expect(throws: FormatError.self) {
            try Self.parse(header(listed: [], derivedBytes: [2, 4, 1, 1, 0x73, 4, 1, 1, 0x73]))
        }
        #expect(throws: FormatError.self) {
            try Self.parse(
                header(
                    listed: [RecordHeader.Entry(index: 4, tuple: IndexValue("k1").encoded)],
                    derivedBytes: [1, 4, 1, 1, 0x73]))
        }
        #expect(throws: FormatError.self) { try Self.parse(header(listed: [], derivedBytes: [1, 4, 0])) }
        // Layout 3 is unknown.
        #expect(throws: FormatError.self) { try Self.parse([3] + good.dropFirst()) }
        // Every cut and every byte changed: a header, or a typed error, and payloadOffset agrees.
        for cut in 0..<good.count {
            let value = Array(good[..<cut])
            _ = try? Self.parse(value)
        }
        for position in good.indices {
            for byte: UInt8 in [0x00, 0x01, 0x02, 0x7F, 0x80, 0xF6, 0xFF] {
                var value = good
                value[position] = byte
                if let (header, offset) = try? Self.parse(value) {
                    let walked: Int? = value.withUnsafeBytes { try? RecordHeader.payloadOffset($0) }
                    #expect(walked == offset)
                    #expect(Set(header.entries).count == header.entries.count)
                }
            }
        }
    }

    @Test(arguments: Engine.allCases) func holdersDeriveTheirReferencesAndANullifyLeavesTheHeaderAsStored(
        engine: Engine
    ) throws {
        let t = try TestDatabase(engine)
        let songs = try t.db.bucket(Song.self)
        let playlists = try t.db.bucket(RatedPlaylist.self)
        try songs.store((0..<40).map { Song(id: String(format: "s%03d", $0), title: "t", album: nil) })
        let refs = (0..<40).map { Ref<Song>(String(format: "s%03d", $0)) }
        try playlists.store([
            RatedPlaylist(id: "a", rating: 5, songs: [refs[1], refs[3], refs[1], refs[5]], featured: refs[3]),
            RatedPlaylist(id: "b", rating: 3, songs: Array(refs[0..<40]), featured: nil),
            RatedPlaylist(id: "c", rating: 5, songs: [], featured: refs[3]),
        ])
        let before = try #require(try Self.record(t, playlists, "a"))
        #expect(before.first == RecordHeader.derivedLayoutVersion)
        let (header, offset) = try Self.parse(before)
        // Only the rating is listed; both relationships are derived.
        #expect(Set(header.derived.map(\.index)).count == 2)
        #expect(header.entries.filter { entry in !header.derived.contains { $0.index == entry.index } }.count == 1)
        #expect(header.entries.count == 1 + 3 + 1)
        // The same object with every entry listed is bigger by the references' tuples.
        var listed: [UInt8] = []
        RecordHeader(schemaVersion: header.schemaVersion, entries: header.entries).append(to: &listed)
        #expect(listed.count > offset)

        #expect(try playlists.keys(.index("songs", equals: "s003")) == ["a", "b"])
        #expect(try playlists.keys(.index("featured", equals: "s003")) == ["a", "c"])
        let groups = try playlists.aggregate("rating", groupedBy: "songs")
        let s1 = try #require(groups.first { $0.value == IndexValue("s001") })
        #expect(s1.aggregate.count == 2 && s1.aggregate.sum == .integer(8))

        #expect(try songs.delete(keys: ["s003"]) == 1)
        let after = try #require(try Self.record(t, playlists, "a"))
        #expect(Array(after[..<offset]) == Array(before[..<offset]))
        #expect(
            try playlists.object(forKey: "a")
                == RatedPlaylist(id: "a", rating: 5, songs: [refs[1], refs[1], refs[5]], featured: nil))
        #expect(try playlists.object(forKey: "c")?.featured == nil)
        #expect(try playlists.keys(.index("songs", equals: "s003")).isEmpty)
        #expect(try playlists.keys(.index("featured", equals: "s003")).isEmpty)
        #expect(try playlists.keys(.index("songs", equals: "s001")) == ["a", "b"])
        #expect(try t.db.check().isConsistent)

        // An update moves derived entries like listed ones; a cascade-free delete removes them.
        try playlists.store(RatedPlaylist(id: "a", rating: 1, songs: [refs[7]], featured: refs[7]))
        #expect(try playlists.keys(.index("songs", equals: "s001")) == ["b"])
        #expect(try playlists.keys(.index("songs", equals: "s007")) == ["a", "b"])
        #expect(try playlists.delete(keys: ["b"]) == 1)
        #expect(try playlists.keys(.index("songs", equals: "s000")).isEmpty)
        let entries = try Self.indexEntries(t, bucketId: playlists.raw.descriptor.id)
        // a: songs s007, featured s007, rating 1; c: rating 5 (its featured was nullified).
        #expect(entries.count == 4)
        #expect(try t.db.check().isConsistent)
    }

    @Test func onlyEntriesThePayloadGivesExactlyAreDerived() throws {
        let definitions = RatedPlaylist.buri.indexes.enumerated().map { position, index in
            var definition = index.definition
            definition.id = UInt32(position + 1)
            return definition
        }
        let payload = try CBOREncoder().encode(
            RatedPlaylist(id: "p", rating: 2, songs: [Ref("x"), Ref("y"), Ref("x")], featured: nil))
        func entry(_ index: UInt32, _ key: String) -> RecordHeader.Entry {
            RecordHeader.Entry(index: index, tuple: IndexValue(key).encoded)
        }
        let rating = RecordHeader.Entry(index: 2, tuple: IndexValue(2).encoded)
        // Exactly the array's distinct texts (in any order): derived, both relationships.
        #expect(
            Bucket<RatedPlaylist>.derivable(
                definitions, entries: [entry(1, "y"), entry(1, "x"), rating], payload: payload
            )
            .map(\.index) == [1, 3])
        // One entry missing, one too many, or another value: listed instead.
        #expect(
            Bucket<RatedPlaylist>.derivable(definitions, entries: [entry(1, "x"), rating], payload: payload).map(
                \.index)
                == [3])
        #expect(
            Bucket<RatedPlaylist>.derivable(
                definitions, entries: [entry(1, "x"), entry(1, "y"), entry(1, "z"), rating], payload: payload
            ).map(\.index) == [3])
        #expect(
            Bucket<RatedPlaylist>.derivable(
                definitions, entries: [entry(1, "x"), entry(1, "y"), entry(3, "x")], payload: payload
            ).map(\.index) == [1])
    }

    @Test(arguments: Engine.allCases.filter { $0 != .etcd })
    func aDatabaseOfVersion9WithListedHoldersIsReadNullifiedAndUpgraded(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let songs = try t.db.bucket(Song.self)
        let playlists = try t.db.bucket(RatedPlaylist.self)
        try songs.store((0..<5).map { Song(id: "s\($0)", title: "t", album: nil) })
        try playlists.store([
            RatedPlaylist(id: "a", rating: 1, songs: [Ref("s1"), Ref("s2")], featured: Ref("s1")),
            RatedPlaylist(id: "b", rating: 2, songs: [Ref("s2")], featured: nil),
        ])
        // Rewrite the holders as a version 9 writer did (every entry listed, layout 1).
        let batch = t.db.engine.makeBatch()
        for key in ["a", "b"] {
            let value = try #require(try Self.record(t, playlists, key))
            let (header, offset) = try Self.parse(value)
            var old: [UInt8] = []
            RecordHeader(schemaVersion: header.schemaVersion, entries: header.entries).append(to: &old)
            batch.put(Keyspace.recordKey(bucket: playlists.raw.descriptor.id, key: key), old + value[offset...])
        }
        batch.put(Keyspace.headerKey, Keyspace.headerValue(version: 9))
        try t.db.engine.commit(batch, conditions: nil, sync: true)
        try t.reopen()
        #expect(t.db.formatVersion == 9)
        let reopened = try t.db.bucket(RatedPlaylist.self)
        #expect(try Self.record(t, reopened, "a")?.first == RecordHeader.layoutVersion)
        #expect(try t.db.check().isConsistent)
        #expect(try t.db.bucket(Song.self).delete(keys: ["s2"]) == 1)
        #expect(t.db.formatVersion == Int(Keyspace.formatVersion))
        // A listed holder keeps layout 1 through the nullify, its entry taken out of the header.
        let a = try #require(try Self.record(t, reopened, "a"))
        #expect(a.first == RecordHeader.layoutVersion)
        #expect(try Self.parse(a).0.entries.count == 3)
        #expect(try reopened.object(forKey: "b")?.songs == [])
        #expect(try reopened.keys(.index("songs", equals: "s2")).isEmpty)
        #expect(try t.db.check().isConsistent)
        // Stored again by the Swift type, it derives.
        try reopened.store(RatedPlaylist(id: "a", rating: 1, songs: [Ref("s1")], featured: nil))
        #expect(try Self.record(t, reopened, "a")?.first == RecordHeader.derivedLayoutVersion)
        #expect(try t.db.check().isConsistent)
    }

    @Test func aDamagedDerivedFieldIsATypedErrorAndCheckReportsIt() throws {
        let t = try TestDatabase(.memory)
        let songs = try t.db.bucket(Song.self)
        let playlists = try t.db.bucket(RatedPlaylist.self)
        try songs.store([Song(id: "s1", title: "t", album: nil)])
        try playlists.store(RatedPlaylist(id: "a", rating: 1, songs: [Ref("s1")], featured: nil))
        let value = try #require(try Self.record(t, playlists, "a"))
        // The array's one text string ("s1") becomes the number 2.
        let text: [UInt8] = [0x62, 0x73, 0x31]
        let at = try #require(value.indices.last { Array(value[$0...].prefix(3)) == text })
        let batch = t.db.engine.makeBatch()
        batch.put(
            Keyspace.recordKey(bucket: playlists.raw.descriptor.id, key: "a"),
            Array(value[..<at]) + [0x02] + value[(at + 3)...])
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        #expect(throws: BuriError.self) { try playlists.object(forKey: "a") }
        let report = try t.db.check()
        #expect(!report.isConsistent)
        #expect(report.problems.contains { "\($0)".contains("derived") }, "\(report.problems)")
        // Storing the object again replaces the damaged record and its entries.
        try playlists.store(RatedPlaylist(id: "a", rating: 1, songs: [], featured: nil))
        #expect(try playlists.keys(.index("songs", equals: "s1")).isEmpty)
        #expect(try t.db.check().isConsistent)
    }
}
