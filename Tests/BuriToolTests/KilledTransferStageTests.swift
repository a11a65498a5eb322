import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

@Suite("What a killed import or restore staged is gone after the next command that writes")
struct KilledTransferStageTests {
    /// A database holding bucket Person (20 people), and the stage of an import into it that
    /// stored `count` objects and was never published nor abandoned — what a SIGKILL leaves —
    /// made deterministically through the library. Returns the stage's id.
    func killedImport(_ path: String, count: Int) throws -> UInt32 {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.bucket(Person.self).store(Array(fixturePeople.prefix(20)))
        let load = try db.stageImport(into: "Person")
        // Names that do not compress (LevelDB compresses its blocks): 300 pseudo-random hex digits.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        var chunk: [RawObject] = []
        for i in 0..<count {
            var name = ""
            while name.count < 300 {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                name += String(seed >> 1, radix: 16)
            }
            let person = Person(objectId: String(format: "s%06d", i), name: name, locale: "EN", age: i % 90)
            let payload = CBORValueFixtures.person(person)
            chunk.append(
                RawObject(
                    key: person.objectId, payload: payload,
                    indexValues: ["locale": [["EN"]], "age": [[IndexValue(i % 90)]]]))
            if chunk.count == 1000 {
                try load.store(chunk)
                chunk = []
            }
        }
        if !chunk.isEmpty { try load.store(chunk) }
        return load.stageId
    }

    @Test func theNextWritingCommandDeletesTheStageAndGivesItsSpaceBack() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("people.buri")
        let stage = try killedImport(db, count: 20_000)
        let staged = try directorySize(db)
        let pending = try pendingPurges(db)
        #expect(pending.map(\.id) == [stage] && pending.first?.state == .staging, "\(pending)")
        let keysBefore = try everyKey(db).keys.filter {
            $0[0] == 2 && $0[1...4].elementsEqual(withUnsafeBytes(of: stage.bigEndian, Array.init))
        }
        // The 20 objects copied from the bucket and the 20,000 stored.
        #expect(keysBefore.count == 20_020)
        // Any command that writes: here one `put`.
        expectSuccess(try buri("put", db, "Person", #"{"objectId":"new","name":"N","locale":"NL","age":5}"#))
        #expect(try pendingPurges(db).isEmpty)
        let left = try everyKey(db).keys.filter { key in
            key.count >= 5 && [2, 3, 4, 5].contains(key[0])
                && key[1...4].elementsEqual(withUnsafeBytes(of: stage.bigEndian, Array.init))
        }
        #expect(left.isEmpty, "\(left.count) keys of the stage are left")
        // The stage's 20,000 records of 300+ bytes (over 6 MB) no longer take space.
        let after = try directorySize(db)
        #expect(staged > 6_000_000 && after < 1_000_000, "size \(staged) with the stage, \(after) after the put")
        let keys = try buri("keys", db, "Person")
        #expect(keys.lines.count == 21 && keys.lines.contains("new"), "\(keys)")
        let check = try buri("check", db)
        #expect(check.status == 0 && !check.stdout.contains("note:"), "\(check)")
    }

    /// An import creating a database killed after LevelDB made its files but before Buri wrote
    /// its header leaves a store without a single key: the same import run again takes it.
    @Test func anImportKilledBeforeTheHeaderIsWrittenCanBeRunAgain() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("new.buri")
        let engine = try LevelDBEngine(path: db)
        engine.close()
        let input = #"{"id":"a","n":1}"# + "\n" + #"{"id":"b","n":2}"# + "\n"
        let run = try buri(["import", db, "B", "--key", "id", "--numeric-index", "n"], stdin: input)
        #expect(run.status == 0 && run.stdout == "imported 2 objects into bucket 'B' of \(db)\n", "\(run)")
        #expect(try buri("keys", db, "B").lines == ["a", "b"])
        // So does restore.
        let other = sandbox.path("other.buri")
        let second = try LevelDBEngine(path: other)
        second.close()
        let dump = try buri("export", db)
        let restored = try buri(["restore", other], stdin: dump.stdout)
        #expect(restored.status == 0, "\(restored)")
        #expect(try buri("export", other).stdout == dump.stdout)
        // A LevelDB store with keys that are not Buri's is still refused, and left alone.
        let foreign = sandbox.path("foreign.buri")
        let store = try Database(path: foreign)
        try store.put(Array("k".utf8), Array("v".utf8))
        store.close()
        expectFailure(
            try buri(["import", foreign, "B", "--key", "id"], stdin: input), status: 4, mentioning: ["foreign.buri"])
    }

    /// An import into a new path killed while storing leaves a database without buckets and its
    /// stage: the same import run again creates the bucket, and nothing of the stage is left.
    @Test func anImportIntoANewPathKilledWhileStoringCanBeRunAgain() throws {
        let sandbox = try Sandbox()
        let db = sandbox.path("fresh.buri")
        do {
            let database = try BuriDatabase(path: db)
            defer { database.close() }
            var n = IndexDefinition(id: 0, name: "n", components: [.numeric])
            n.setFieldPaths([["n"]])
            let load = try database.stageImport(creating: "B", keyField: "id", indexes: [n])
            try load.store(
                (0..<20_000).map {
                    RawObject(
                        key: "s\($0)", payload: CBORValueFixtures.object(id: "s\($0)", n: $0 % 20, mail: "m"),
                        indexValues: ["n": [[IndexValue($0 % 20)]]])
                })
        }
        #expect(try pendingPurges(db).count == 1)
        let input = #"{"id":"a","n":1}"# + "\n"
        let run = try buri(["import", db, "B", "--key", "id", "--numeric-index", "n"], stdin: input)
        #expect(run.status == 0 && run.stdout == "imported 1 object into bucket 'B' of \(db)\n", "\(run)")
        #expect(try pendingPurges(db).isEmpty)
        #expect(try buri("keys", db, "B").lines == ["a"])
        let check = try buri("check", db)
        #expect(check.status == 0 && !check.stdout.contains("note:"), "\(check)")
        #expect(try everyKey(db).keys.filter { $0.first == 2 }.count == 1)
    }
}
