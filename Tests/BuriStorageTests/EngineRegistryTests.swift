import BuriEngines
import BuriEtcd
import BuriStorage
import Foundation
import Testing

/// The registry that turns a location into an engine: which kind claims what, and the open modes.
@Suite("Opening a location through the engine registry")
struct EngineRegistryTests {
    let engines = StorageEngines.standard.registering(EtcdEngine.Kind()).registering(MemoryEngine.Kind())

    @Test func eachLocationGoesToTheKindThatClaimsItAndPathsToTheDefault() {
        #expect(engines.kind(for: "people.buri").name == "leveldb")
        #expect(engines.kind(for: "/tmp/x/etcd://not-a-scheme").name == "leveldb")
        #expect(engines.kind(for: "etcd://127.0.0.1:2379/people").name == "etcd")
        #expect(engines.kind(for: ":memory:").name == "memory")
        #expect(!engines.isClaimed("people.buri") && engines.isClaimed("etcd://127.0.0.1:2379/people"))
        #expect(engines.kind(for: "people.buri").capabilities == [.files, .repair, .compaction])
        #expect(engines.kind(for: "etcd://h:1/n").capabilities == [.probe, .shared])
        // Without the etcd kind, an etcd location is nobody's: the default (a path) would take it.
        #expect(!StorageEngines.standard.isClaimed("etcd://127.0.0.1:2379/people"))
    }

    @Test func registeringAKindAgainReplacesIt() {
        var levelDB = LevelDBOptions.buriDefaults
        levelDB.writeBufferSize = 1 << 20
        let tuned = engines.registering(LevelDBEngine.Kind(options: levelDB))
        #expect((tuned.defaultKind as? LevelDBEngine.Kind)?.options.writeBufferSize == 1 << 20)
        #expect(tuned.kinds.map(\.name) == ["etcd", "memory"])
        #expect(engines.registering(EtcdEngine.Kind(retryWindow: 1)).kinds.map(\.name) == ["memory", "etcd"])
    }

    @Test func aMalformedLocationIsRefusedBeforeAnythingIsOpened() {
        #expect(throws: StorageError.self) { try engines.open("etcd://127.0.0.1:2379/") }
        #expect(throws: StorageError.self) { try engines.kind(for: "etcd://").validate("etcd://") }
    }

    @Test func openModesCreateOpenOrRefuse() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/buri-registry-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Existing only: nothing is created.
        #expect(throws: StorageError.self) { try engines.open(directory, options: StorageOpenOptions(mode: .existing)) }
        #expect(!FileManager.default.fileExists(atPath: directory))
        // Create new, then again: the second finds it there.
        let created = try engines.open(directory, options: StorageOpenOptions(mode: .createNew))
        #expect(created is LevelDBEngine && created.location == directory)
        created.close()
        #expect(throws: StorageError.self) {
            try engines.open(directory, options: StorageOpenOptions(mode: .createNew))
        }
        let reopened = try engines.open(directory, options: StorageOpenOptions(mode: .existing))
        reopened.close()
        // Memory: a new engine each time; there is never one to open.
        #expect(try engines.open(":memory:") is MemoryEngine)
        #expect(throws: StorageError.self) {
            try engines.open(":memory:", options: StorageOpenOptions(mode: .existing))
        }
    }
}
