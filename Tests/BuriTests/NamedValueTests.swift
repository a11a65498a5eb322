import BuriCodec
import BuriStorage
import Foundation
import Synchronization
import Testing
@testable import Buri

/// A struct stored as a named value.
struct SyncSettings: Codable, Equatable, Sendable {
    var server: String
    var interval: Double
    var tags: [String]
    var last: Date?
}

@Suite("Named values: Codable values under names, in transactions, on every engine")
struct NamedValueTests {
    static let engines: [Engine] = Engine.allCases

    @Test("values of several types round trip exactly", arguments: engines)
    func typedRoundTrip(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let values = t.db.values
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let settings = SyncSettings(server: "a\u{0}b", interval: 0.1, tags: ["x", ""], last: date)
        let bytes = Data([0, 1, 0, 255, 0])
        try values.set(date, for: "lastSync")
        try values.set(settings, for: "settings")
        try values.set(["a", "b", "é"], for: "list")
        try values.set(Int64.min, for: "min")
        try values.set(Int64.max, for: "max")
        try values.set(UInt64.max, for: "umax")
        try values.set(Double.nan, for: "nan")
        try values.set(-0.0, for: "negativeZero")
        try values.set(bytes, for: "bytes")
        try values.set("", for: "empty string")
        #expect(try values.get(Date.self, for: "lastSync") == date)
        #expect(try values.get(SyncSettings.self, for: "settings") == settings)
        #expect(try values.get([String].self, for: "list") == ["a", "b", "é"])
        #expect(try values.get(Int64.self, for: "min") == Int64.min)
        #expect(try values.get(Int64.self, for: "max") == Int64.max)
        #expect(try values.get(UInt64.self, for: "umax") == UInt64.max)
        #expect(try values.get(Double.self, for: "nan")?.isNaN == true)
        #expect(try values.get(Double.self, for: "negativeZero")?.sign == .minus)
        #expect(try values.get(Data.self, for: "bytes") == bytes)
        #expect(try values.get(String.self, for: "empty string") == "")
        #expect(try values["lastSync", as: Date.self] == date)
        // Names in bytewise order.
        #expect(
            try values.names() == [
                "bytes", "empty string", "lastSync", "list", "max", "min", "nan", "negativeZero", "settings", "umax",
            ])
        // Replaced by a value of another type.
        try values.set(42, for: "lastSync")
        #expect(try values.get(Int.self, for: "lastSync") == 42)
        // Values survive a reopen.
        try t.reopen()
        #expect(try t.db.values.get(Int.self, for: "lastSync") == 42)
        #expect(try t.db.values.get(SyncSettings.self, for: "settings") == settings)
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test("names are bytes: canonically equal names are two values", arguments: engines)
    func namesAreBytes(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)  // Swift says equal; Buri does not
        try t.db.values.set(1, for: composed)
        try t.db.values.set(2, for: decomposed)
        #expect(try t.db.values.get(Int.self, for: composed) == 1)
        #expect(try t.db.values.get(Int.self, for: decomposed) == 2)
        #expect(try t.db.values.names().map { Array($0.utf8) } == [Array(decomposed.utf8), Array(composed.utf8)])
        try t.db.values.remove(decomposed)
        #expect(try t.db.values.get(Int.self, for: composed) == 1)
        #expect(try t.db.values.get(Int.self, for: decomposed) == nil)
    }

    @Test("a missing name is nil; removing it says there was none", arguments: engines)
    func missingName(engine: Engine) throws {
        let t = try TestDatabase(engine)
        #expect(try t.db.values.get(Date.self, for: "never") == nil)
        #expect(try t.db.values["never", as: Int.self] == nil)
        #expect(try !t.db.values.contains("never"))
        #expect(try t.db.values.remove("never") == false)
        try t.db.values.set(true, for: "flag")
        #expect(try t.db.values.contains("flag"))
        #expect(try t.db.values.remove("flag") == true)
        #expect(try t.db.values.get(Bool.self, for: "flag") == nil)
        #expect(try t.db.values.names().isEmpty)
    }

    @Test("a value read as another type is a typed error naming it, never a wrong value", arguments: engines)
    func wrongTypeIsATypedError(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set("yesterday", for: "lastSync")
        #expect {
            try t.db.values.get(Date.self, for: "lastSync")
        } throws: { error in
            guard case .valueDecodingFailed(let name, let type, _) = error as? BuriError else { return false }
            return name == "lastSync" && type == "Date" && "\(error)".contains("lastSync")
        }
        try t.db.values.set(-1, for: "count")
        #expect(throws: BuriError.self) { try t.db.values.get(UInt8.self, for: "count") }
        #expect(throws: BuriError.self) { try t.db.values.get(SyncSettings.self, for: "count") }
    }

    @Test("empty and over-long names are typed errors; 1024 bytes is allowed", arguments: engines)
    func nameLimits(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let before = try scanEntries(t.db.engine.snapshot())
        for name in ["", String(repeating: "é", count: 513)] {
            #expect {
                try t.db.values.set(1, for: name)
            } throws: { error in
                guard case .invalidValueName = error as? BuriError else { return false }
                return true
            }
            #expect(throws: BuriError.self) { try t.db.values.get(Int.self, for: name) }
            #expect(throws: BuriError.self) { try t.db.values.remove(name) }
        }
        #expect(try scanEntries(t.db.engine.snapshot()) == before)
        let longest = String(repeating: "é", count: 512)
        try t.db.values.set(1, for: longest)
        #expect(try t.db.values.get(Int.self, for: longest) == 1)
    }

    @Test("the value is the CBOR payload encoding under 06 || name", arguments: [Engine.memory])
    func storedBytes(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(Date(timeIntervalSinceReferenceDate: 1), for: "lastSync")
        let key: [UInt8] = [0x06] + Array("lastSync".utf8)
        #expect(try t.db.engine.latest().get(key) == [0xc1, 0x1a, 0x3a, 0x4f, 0xc8, 0x81])
        #expect(try t.db.values.cbor(for: "lastSync") == [0xc1, 0x1a, 0x3a, 0x4f, 0xc8, 0x81])
    }

    // MARK: Transactions

    @Test("a transaction reads its own writes and commits values with bucket writes", arguments: engines)
    func transactionCommitsTogether(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(1, for: "version")
        try t.db.write { tx in
            try tx.bucket(Memo.self).store(Memo(id: "m1", text: "hello"))
            #expect(try tx.values.get(Int.self, for: "version") == 1)
            try tx.values.set(2, for: "version")
            try tx.values.set("m1", for: "current")
            #expect(try tx.values.get(Int.self, for: "version") == 2)
            #expect(try tx.values.names() == ["current", "version"])
            // Outside the transaction nothing is seen yet.
            #expect(try t.db.values.get(Int.self, for: "version") == 1)
            try tx.values.remove("current")
            #expect(try tx.values.get(String.self, for: "current") == nil)
        }
        #expect(try t.db.values.get(Int.self, for: "version") == 2)
        #expect(try t.db.values.get(String.self, for: "current") == nil)
        #expect(try t.db.bucket(Memo.self).count() == 1)
        // A read transaction reads its snapshot.
        let seen = try t.db.read { tx in try tx.values.get(Int.self, for: "version") }
        #expect(seen == 2)
        #expect(throws: BuriError.self) { try t.db.read { tx in try tx.values.set(3, for: "version") } }
    }

    @Test("a transaction that throws leaves no value behind", arguments: engines)
    func rollbackOnThrow(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(1, for: "version")
        let before = try scanEntries(t.db.engine.snapshot())
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try t.db.write { tx in
                try tx.values.set(2, for: "version")
                try tx.values.set("x", for: "other")
                try tx.bucket(Memo.self).store(Memo(id: "m1", text: "hello"))
                throw Abort()
            }
        }
        #expect(try scanEntries(t.db.engine.snapshot()) == before)
        #expect(try t.db.values.get(Int.self, for: "version") == 1)
    }

    @Test(
        "a value call that throws inside a transaction leaves no trace though the closure catches it",
        arguments: engines)
    func caughtErrorLeavesNoTrace(engine: Engine) throws {
        let t = try TestDatabase(engine)
        struct Unencodable: Encodable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.unkeyedContainer()
                try container.encode(1)
                throw EncodingError.invalidValue(1, .init(codingPath: [], debugDescription: "refused"))
            }
        }
        try t.db.write { tx in
            do { try tx.values.set(Unencodable(), for: "bad") } catch BuriError.valueEncodingFailed {}
            do { try tx.values.set(1, for: "") } catch BuriError.invalidValueName {}
            // A bucket store that fails inside, caught: its statement is undone, the value stays.
            try tx.values.set("kept", for: "good")
            #expect(try tx.values.get(Int.self, for: "bad") == nil)
        }
        #expect(try t.db.values.names() == ["good"])
        #expect(try t.db.values.get(String.self, for: "good") == "kept")
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test("writing a value into a version 4 database raises its header in the same commit")
    func upgradesTheHeader() throws {
        let engine = MemoryEngine()
        let batch = engine.makeBatch()
        batch.put(Keyspace.headerKey, Keyspace.headerValue(version: 4))
        try engine.commit(batch, conditions: nil, sync: false)
        let db = try BuriDatabase(engine: engine, closesEngine: false)
        #expect(db.formatVersion == 4)
        #expect(try db.values.get(Int.self, for: "a") == nil)
        #expect(db.formatVersion == 4)
        try db.values.set(1, for: "a")
        #expect(db.formatVersion == Int(Keyspace.formatVersion))
        #expect(try engine.latest().get(Keyspace.headerKey) == Keyspace.headerValue())
    }

    // MARK: Shared engines

    @Test("read-modify-write of one value from two clients of a shared engine loses no update")
    func sharedEngineConflictsRetry() throws {
        let engine = MemoryEngine(shared: true)
        var options = BuriOptions()
        options.maxCommitAttempts = 1_000
        let a = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        let b = try BuriDatabase(engine: engine, options: options, closesEngine: false)
        try a.values.set(0, for: "counter")
        let rounds = 200
        DispatchQueue.concurrentPerform(iterations: 2) { client in
            let db = client == 0 ? a : b
            for _ in 0..<rounds {
                do {
                    try db.write { tx in
                        let now = try tx.values.get(Int.self, for: "counter") ?? 0
                        try tx.values.set(now + 1, for: "counter")
                    }
                } catch {
                    Issue.record("client \(client): \(error)")
                }
            }
        }
        #expect(try a.values.get(Int.self, for: "counter") == 2 * rounds)
        #expect(try b.values.get(Int.self, for: "counter") == 2 * rounds)
    }

    @Test(
        "clients of one shared engine see each other's values",
        arguments: engines.filter { $0 == .shared || $0 == .etcd })
    func clientsSeeEachOther(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let other = try t.client(1)
        try t.db.values.set("from a", for: "note")
        #expect(try other.values.get(String.self, for: "note") == "from a")
        try other.write { tx in try tx.values.set("from b", for: "note") }
        #expect(try t.db.values.get(String.self, for: "note") == "from b")
        if other !== t.db { other.close() }
    }

    // MARK: Check, repair, backup

    @Test("check counts values and keeps them; a damaged value is reported by name, never deleted", arguments: engines)
    func checkAndRepairKeepValues(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(Date(timeIntervalSince1970: 5), for: "good")
        try t.db.bucket(Memo.self).store(Memo(id: "m1", text: "x"))
        var report = try t.db.check()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.values == 1)
        // Damage one value behind Buri's back: not one CBOR item.
        let batch = t.db.engine.makeBatch()
        batch.put(Keyspace.valueKey(name: "bad"), [0x82, 0x01])
        try t.db.engine.commit(batch, conditions: nil, sync: false)
        report = try t.db.check(repair: true)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.kind == .corruptValue)
        #expect(report.problems.first?.key == "bad")
        #expect(report.problems.first?.repaired == false)
        #expect(try t.db.values.cbor(for: "bad") == [0x82, 0x01])
        #expect(try t.db.values.get(Date.self, for: "good") == Date(timeIntervalSince1970: 5))
        #expect {
            try t.db.values.get(Int.self, for: "bad")
        } throws: { error in
            guard case .valueDecodingFailed(let name, _, let reason) = error as? BuriError else { return false }
            return name == "bad" && reason.contains("damaged")
        }
    }

    @Test("repair of a database's files keeps every named value")
    func fileRepairKeepsValues() throws {
        let t = try TestDatabase(.leveldb)
        try t.db.values.set(["a": 1], for: "map")
        try t.db.values.set("text", for: "text")
        let path = t.path
        t.db.close()
        _ = try BuriDatabase.repair(path: path)
        try t.reopen()
        #expect(try t.db.values.get([String: Int].self, for: "map") == ["a": 1])
        #expect(try t.db.values.get(String.self, for: "text") == "text")
        #expect(try t.db.check().problems.isEmpty)
    }

    @Test("a backup holds the named values", arguments: engines.filter { $0 != .etcd })
    func backupKeepsValues(engine: Engine) throws {
        let t = try TestDatabase(engine)
        try t.db.values.set(SyncSettings(server: "s", interval: 1, tags: [], last: nil), for: "settings")
        let copy = t.directory.appendingPathComponent("copy.buri").path
        try t.db.backup(to: copy)
        let restored = try BuriDatabase(path: copy)
        defer { restored.close() }
        #expect(
            try restored.values.get(SyncSettings.self, for: "settings")
                == SyncSettings(server: "s", interval: 1, tags: [], last: nil))
    }
}

/// Live queries of named values. (Named for the observation run of Scripts/test.)
@Suite("Named values: live queries")
struct NamedValueObservationTests {
    @Test(arguments: Engine.allCases) func aLiveValueYieldsNowThenAfterEachCommitThatChangesIt(
        engine: Engine
    ) async throws {
        let t = try TestDatabase(engine)
        try await t.db.values.set(1, for: "version")
        let emissions = Shared<[Int?]>([])
        let live = try t.db.observeValue(Int.self, for: "version")
        let consumer = Task {
            for try await value in live { emissions.update { $0.append(value) } }
        }
        try await eventually("the first emission") { emissions.current.count == 1 }
        // Unrelated commits: another value, a bucket write, a byte-different but canonically equal name.
        for i in 0..<10 {
            try await t.db.values.set(i, for: "other")
            try await t.db.bucket(Memo.self).store(Memo(id: "m\(i)", text: "t"))
        }
        try await t.db.values.set(9, for: "versio\u{0301}n")
        try await t.db.values.set(2, for: "version")
        try await eventually("the value set") { emissions.current.count == 2 }
        try await t.db.write { tx in
            try tx.bucket(Memo.self).store(Memo(id: "x", text: "t"))
            try tx.values.set(3, for: "version")
        }
        try await eventually("the value set in a transaction") { emissions.current.count == 3 }
        // A rolled-back transaction yields nothing.
        struct Abort: Error {}
        _ = try? await t.db.write { tx in
            try tx.values.set(99, for: "version")
            throw Abort()
        }
        try await t.db.values.remove("version")
        try await eventually("the value removed") { emissions.current.count == 4 }
        #expect(emissions.current == [1, 2, 3, nil])
        // The async calls read what the blocking ones wrote.
        #expect(try await t.db.values.get(Int.self, for: "other") == 9)
        #expect(try await t.db.values.names() == ["other", "versio\u{0301}n"])
        #expect(try await t.db.values.remove("other"))
        consumer.cancel()
        _ = await consumer.result
    }

    @Test func aLiveValueEndsWithATypedErrorWhenTheValueIsNotTheType() async throws {
        let t = try TestDatabase(.memory)
        let live = try t.db.values.observe(Date.self, for: "lastSync")
        let seen = Shared<[Date?]>([])
        let ended = Shared<BuriError?>(nil)
        let consumer = Task {
            do {
                for try await value in live { seen.update { $0.append(value) } }
            } catch {
                ended.update { $0 = error as? BuriError }
            }
        }
        try await eventually("the first emission") { seen.current.count == 1 }
        try await t.db.values.set("not a date", for: "lastSync")
        try await eventually("the end") { ended.current != nil }
        guard case .valueDecodingFailed(let name, _, _)? = ended.current else {
            Issue.record("expected valueDecodingFailed, got \(String(describing: ended.current))")
            return
        }
        #expect(name == "lastSync")
        #expect(seen.current == [nil])
        _ = await consumer.result
        await #expect(throws: BuriError.self) {
            try await t.db.write { tx in _ = try tx.values.observe(Int.self, for: "x") }
        }
    }
}

/// The README's "Named values" example, compared with README.md character for character.
enum ReadmeValues {
    struct Person: BuriSupport {
        var objectId: String
        var name: String
        static let buri = BuriSchema<Person>(key: \.objectId, indexes: [])
    }

    static func example() throws -> (lastSync: Date?, theme: String?, user: String?, people: Int) {
        let db = try BuriDatabase.inMemory()
        defer { db.close() }
        let anna = Person(objectId: "p2", name: "Anna")
        // BEGIN README VALUES
        struct Settings: Codable { var theme: String, fontSize: Int }

        try db.values.set(Date(), for: "lastSync")  // one atomic commit
        try db.values.set(Settings(theme: "dark", fontSize: 14), for: "settings")
        let lastSync = try db.values.get(Date.self, for: "lastSync")  // Date?, nil if never set
        let theme = try db.values["settings", as: Settings.self]?.theme  // "dark"
        try db.write { tx in  // with bucket writes: both or neither
            try tx.bucket(Person.self).store(anna)
            try tx.values.set(anna.objectId, for: "currentUser")
        }
        // END README VALUES
        return (
            lastSync, theme, try db.values.get(String.self, for: "currentUser"), try db.bucket(Person.self).count()
        )
    }
}

@Suite("README: the named values example")
struct ReadmeValuesTests {
    @Test func theExampleRunsAndDoesWhatItsCommentsSay() throws {
        let result = try ReadmeValues.example()
        #expect(result.lastSync != nil)
        #expect(result.theme == "dark")
        #expect(result.user == "p2" && result.people == 1)
    }

    @Test func readmeShowsExactlyThisCode() throws {
        let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let begin = try #require(source.range(of: "// BEGIN README VALUES\n"))
        let end = try #require(source.range(of: "// END README VALUES", range: begin.upperBound..<source.endIndex))
        let lines = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast()
        let indent = lines.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        let code = lines.map { String($0.dropFirst(Swift.min(indent, $0.count))) }.joined(separator: "\n") + "\n"
        #expect(
            readme.contains("```swift\n" + code + "```"), "README.md's named values differ from NamedValueTests.swift")
    }
}
