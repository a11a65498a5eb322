import Buri
import BuriCodec
import BuriEtcd
import BuriTestSupport
import Foundation
import Testing

/// A type at schema version 3: the bucket and every record it writes carry 3.
struct Versioned: BuriSupport, Equatable {
    var id: String
    var name: String
    static let buri = BuriSchema<Versioned>(
        key: \.id, indexes: [.binary("name", \.name, field: "name")],
        bucket: "versioned", schemaVersion: 3, keyField: "id")
}

@Suite("buri info names the engine; restore keeps each bucket's schema version")
struct InfoAndSchemaVersionToolTests {
    @Test func restoreGivesTheBucketAndItsRecordsTheExportedSchemaVersion() throws {
        let sandbox = try Sandbox()
        let original = try makeFixture(sandbox)
        do {
            let db = try BuriDatabase(path: original)
            defer { db.close() }
            try db.bucket(Versioned.self).store([Versioned(id: "v1", name: "Ann"), Versioned(id: "v2", name: "Bo")])
        }
        let dump = try buri("export", original)
        expectSuccess(dump)
        #expect(
            dump.stdout.contains(#"{"bucket":"versioned","schema":{"keyField":"id","schemaVersion":3,"#),
            "\(dump.stdout)")
        let copy = sandbox.path("copy.buri")
        expectSuccess(try buri("restore", copy, stdin: dump.stdout))
        #expect(try buri("export", copy).stdout == dump.stdout)

        let db = try BuriDatabase(path: copy)
        defer { db.close() }
        #expect(try db.bucketInfo(named: "versioned")?.schemaVersion == 3)
        #expect(try db.bucketInfo(named: "Person")?.schemaVersion == 0)
        let raw = try db.rawBucket(named: "versioned")
        #expect(try raw.record(forKey: "v1")?.schemaVersion == 3)
        #expect(try raw.record(forKey: "v2")?.schemaVersion == 3)
        #expect(try db.rawBucket(named: "Person").record(forKey: "p00")?.schemaVersion == 0)
        // The Swift type reads the restored bucket as it reads its own.
        #expect(try db.bucket(Versioned.self).object(forKey: "v2") == Versioned(id: "v2", name: "Bo"))
        #expect(try db.bucket(Versioned.self).keys(.index("name", equals: "Ann")) == ["v1"])
    }

    @Test func aMalformedSchemaVersionIsRefused() throws {
        let sandbox = try Sandbox()
        let bad =
            #"["buri-export",3]"# + "\n" + #"{"bucket":"b","schema":{"keyField":"id","schemaVersion":-1,"indexes":[]}}"#
            + "\n"
        expectFailure(
            try buri("restore", sandbox.path("x.buri"), stdin: bad), status: 7,
            mentioning: ["schemaVersion", "nothing was restored"])
        #expect(!sandbox.exists("x.buri"))
    }

    @Test func infoOnLevelDBNamesItsVersion() throws {
        let sandbox = try Sandbox()
        let db = try makeFixture(sandbox)
        let text = try buri("info", db)
        #expect(text.stdout.contains("LevelDB version: "))
        let json = try CBORValue(jsonBytes: Array(try buri("info", db, "--json").stdout.utf8))
        #expect(json["engine"] == "leveldb")
        #expect(json["leveldbVersion"]?.stringValue?.isEmpty == false)
    }

    @Test func infoOnAnEtcdLocationPrintsNoLevelDBVersion() throws {
        let location = try EtcdTestCluster.location("toolinfo")
        defer { try? EtcdEngine(location: location).deleteAll() }
        expectSuccess(try buri("import", location, "People", "--key", "id", stdin: #"{"id":"a"}"# + "\n"))
        let text = try buri("info", location)
        expectSuccess(text)
        #expect(!text.stdout.contains("LevelDB"), "\(text)")
        #expect(!text.stdout.contains("size on disk"), "\(text)")
        #expect(text.stdout.contains("engine:          etcd"), "\(text)")
        #expect(text.stdout.contains("bucket 'People' (key field 'id'): 1 object"), "\(text)")
        let json = try buri("info", location, "--json")
        expectSuccess(json)
        let value = try CBORValue(jsonBytes: Array(json.stdout.utf8))
        #expect(value["engine"] == "etcd")
        #expect(value["leveldbVersion"] == .null)
        #expect(value["sizeOnDisk"] == .null)
    }
}
