import Foundation
import Testing
import Buri

/// The README's tour, compiled and run. `readmeShowsExactlyThisCode` keeps the two identical.
enum Tour {
    // BEGIN README TOUR
    struct Person: BuriSupport {
        var objectId: String
        var name: String
        var locale: String
        var age: Int

        // The key and the indexes, checked by the compiler: no property names in strings.
        static let buri = BuriSchema<Person>(
            key: \.objectId,
            indexes: [.binary("locale", \.locale), .numeric("age", \.age)]
        )
    }

    static func tour(path: String) throws -> [String: String] {
        let db = try BuriDatabase(path: path)        // creates the directory on first use
        defer { db.close() }
        let people = try db.bucket(Person.self)      // the bucket "Person"

        // Store one object, or many in one atomic batch. Index entries follow automatically.
        try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
        try people.store([
            Person(objectId: "p2", name: "Anna", locale: "NL", age: 31),
            Person(objectId: "p3", name: "Lars", locale: "EN", age: 5),
            Person(objectId: "p4", name: "Chen", locale: "EN-GB", age: -1),
        ])

        // Fetch by key, by exact index value, by range (inclusive, half-open or one-sided), by prefix.
        let dirk = try people.object(forKey: "p1")
        let english = try people.keys(index: "locale", equalTo: "EN")          // ["p1", "p3"]: "EN", not "EN-GB"
        let twenties = try people.objects(index: "age", in: 20...29)           // Dirk
        let adults = try people.keys(.index("age", in: 18...).descending())    // ["p2", "p1"]
        let english2 = try people.count(.index("locale", prefix: "EN"))        // 3

        // Combine conditions, page through results, stream a bucket larger than memory.
        let both = try people.keys(Query.index("locale", equals: "EN").and(.index("age", in: ..<18)))
        let page = try people.page(.index("age", in: 0...), size: 2)           // page.next resumes after it
        var total = 0
        for person in people.lazyObjects() { total += person.age }

        // Delete by key, or by object: the entries removed are the stored ones.
        try people.delete(key: "p4")
        let left = try people.count()

        return [
            "dirk": dirk?.name ?? "-", "english": english.joined(separator: ","),
            "twenties": twenties.map(\.name).joined(separator: ","), "adults": adults.joined(separator: ","),
            "english2": String(english2), "both": both.joined(separator: ","),
            "page": page.items.map(\.objectId).joined(separator: ","), "hasNext": String(page.next != nil),
            "total": String(total), "left": String(left),
        ]
    }

    static func engines(backup: String) throws -> [String: String] {
        let db = try BuriDatabase.inMemory()                 // or BuriDatabase.temporary(), or (path:)
        defer { db.close() }

        // One transaction over several buckets: all of it is committed, or none of it if it throws.
        let seen = try db.write { tx in
            let people = try tx.bucket(Person.self)
            let archive = try tx.bucket(Person.self, named: "Archive")
            try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
            try archive.store(Person(objectId: "p0", name: "Ada", locale: "EN", age: 36))
            return try people.count()                        // 1: it reads its own writes
        }

        // One snapshot of every bucket, and a consistent copy on disk while writers go on.
        let (people, archived) = try db.read { tx in
            (try tx.bucket(Person.self).count(), try tx.bucket(Person.self, named: "Archive").count())
        }
        try db.backup(to: backup)                            // opens as an ordinary database

        return ["seen": String(seen), "people": String(people), "archived": String(archived)]
    }

    // Keep a screen in step with the store: a live query yields its results now, then again after
    // each commit that can change them (bursts coalesce; it always ends on the latest state).
    static func liveTour(path: String) async throws -> [Int] {
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        let people = try db.bucket(Person.self)
        var shown: [Int] = []
        for try await adults in try people.observe(.index("age", in: 18...)) {
            shown.append(adults.count)                 // redraw here
            if adults.count == 2 { break }             // leaving the loop ends the observation
            // Async variants run storage work off the caller's executor (the main actor, say).
            try await people.store(Person(objectId: "a\(shown.count)", name: "Ann", locale: "NL", age: 30))
        }
        return shown                                   // [0, 1, 2]
    }
    // END README TOUR
}

@Suite("README tour")
struct ReadmeTourTests {
    @Test func tourRunsAndFindsWhatTheCommentsSay() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-tour-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Tour.tour(path: directory.path)
        #expect(result["dirk"] == "Dirk")
        #expect(result["english"] == "p1,p3")
        #expect(result["twenties"] == "Dirk")
        #expect(result["adults"] == "p2,p1")
        #expect(result["english2"] == "3")
        #expect(result["both"] == "p3")
        #expect(result["page"] == "p3,p1")
        #expect(result["hasNext"] == "true")
        #expect(result["total"] == "57")
        #expect(result["left"] == "3")
    }

    @Test func enginesTourCommitsReadsAndBacksUp() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-tour-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Tour.engines(backup: directory.path)
        #expect(result == ["seen": "1", "people": "1", "archived": "1"])
        let copy = try BuriDatabase(path: directory.path)
        defer { copy.close() }
        #expect(try copy.bucket(Tour.Person.self, named: "Archive").object(forKey: "p0")?.name == "Ada")
    }

    @Test func liveTourRedrawsOnEachCommit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-tour-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await Tour.liveTour(path: directory.path) == [0, 1, 2])
    }

    @Test func readmeShowsExactlyThisCode() throws {
        let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let begin = "    // BEGIN README TOUR\n"
        let end = "    // END README TOUR"
        let start = try #require(source.range(of: begin))
        let stop = try #require(source.range(of: end, range: start.upperBound..<source.endIndex))
        let code = source[start.upperBound..<stop.lowerBound]
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }
            .joined(separator: "\n")
        #expect(readme.contains("```swift\nimport Buri\n\n" + code + "```"), "README.md's tour differs from ReadmeTourTests.swift")
    }
}
