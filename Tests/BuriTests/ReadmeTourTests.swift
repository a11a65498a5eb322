// swift-format-ignore-file
// (The tour is compared with README.md character for character, aligned comments included.)
import Foundation
import Testing
import Buri

/// The README's tour, compiled and run. The README shows the code between the markers as plain
/// code: the type, then the tour's lines as top-level code (here the body of `tour()`, whose
/// results the tests check), and the live query as the async function an app would write.
/// `readmeShowsExactlyThisCode` keeps the README and this file identical.
enum Tour {
    // BEGIN README TOUR TYPE
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
    // END README TOUR TYPE

    static func tour() throws -> [String: String] {
        // BEGIN README TOUR CODE
        let db = try BuriDatabase.temporary()      // or BuriDatabase(path: "people.buri"), created on first use
        let people = try db.bucket(Person.self)    // the bucket "Person"

        // Store one object, or many in one atomic batch. Index entries follow automatically.
        try people.store(Person(objectId: "p1", name: "Dirk", locale: "EN", age: 22))
        try people.store([
            Person(objectId: "p2", name: "Anna", locale: "NL", age: 31),
            Person(objectId: "p3", name: "Lars", locale: "EN", age: 5),
            Person(objectId: "p4", name: "Chen", locale: "EN-GB", age: -1),
        ])

        // Fetch by key, by exact index value, by range (inclusive, half-open or one-sided), by prefix.
        let dirk = try people.object(forKey: "p1")
        let english = try people.keys(.index("locale", equals: "EN"))         // ["p1", "p3"]: "EN", not "EN-GB"
        let twenties = try people.objects(.index("age", in: 20...29))         // [Dirk]
        let adults = try people.keys(.index("age", in: 18...).descending())   // ["p2", "p1"]
        let englishToo = try people.count(.index("locale", prefix: "EN"))    // 3

        // Combine conditions, page through results, stream a bucket larger than memory.
        let both = try people.keys(Query.index("locale", equals: "EN").and(.index("age", in: ..<18)))  // ["p3"]
        let page = try people.page(.index("age", in: 0...), size: 2)          // p3, p1; page.next resumes after them
        var total = 0
        for person in people.lazyObjects() { total += person.age }            // 57

        // Delete by key, or by object: the entries removed are the stored ones.
        try people.delete(key: "p4")
        let left = try people.count()                                         // 3

        // One transaction over several buckets: all of it is committed, or none of it if it throws.
        let archivedInside = try db.write { tx in
            let active = try tx.bucket(Person.self)
            let archive = try tx.bucket(Person.self, named: "Archive")
            if let lars = try active.object(forKey: "p3") {
                try archive.store(lars)
                try active.delete(lars)
            }
            return try archive.count()                                        // 1: it reads its own writes
        }

        // One snapshot of every bucket: nothing committed meanwhile is seen, in any of them.
        let (active, archived) = try db.read { tx in
            (try tx.bucket(Person.self).count(), try tx.bucket(Person.self, named: "Archive").count())  // 2, 1
        }
        db.close()                                 // a temporary database's directory goes with it
        // END README TOUR CODE

        return [
            "dirk": dirk?.name ?? "-", "english": english.joined(separator: ","),
            "twenties": twenties.map(\.name).joined(separator: ","), "adults": adults.joined(separator: ","),
            "englishToo": String(englishToo), "both": both.joined(separator: ","),
            "page": page.items.map(\.objectId).joined(separator: ","), "hasNext": String(page.next != nil),
            "total": String(total), "left": String(left),
            "archivedInside": String(archivedInside), "active": String(active), "archived": String(archived),
        ]
    }

    /// The live query on a new, empty bucket.
    static func live() async throws -> [Int] {
        // BEGIN README TOUR LIVE
        // Keep a screen in step with the store: a live query yields its results now, then again after
        // each commit that can change them (bursts coalesce; it always ends on the latest state).
        func watchAdults(in people: Bucket<Person>) async throws -> [Int] {
            var shown: [Int] = []
            for try await adults in try people.observe(.index("age", in: 18...)) {
                shown.append(adults.count)                 // redraw here
                if adults.count == 2 { break }             // leaving the loop ends the observation
                // Async variants run storage work off the caller's executor (the main actor, say).
                try await people.store(Person(objectId: "a\(shown.count)", name: "Ann", locale: "NL", age: 30))
            }
            return shown                                   // [0, 1, 2] on an empty bucket
        }
        // END README TOUR LIVE
        let db = try BuriDatabase.temporary()
        defer { db.close() }
        return try await watchAdults(in: db.bucket(Person.self))
    }
}

@Suite("README tour")
struct ReadmeTourTests {
    @Test func tourRunsAndFindsWhatTheCommentsSay() throws {
        let result = try Tour.tour()
        #expect(result["dirk"] == "Dirk")
        #expect(result["english"] == "p1,p3")
        #expect(result["twenties"] == "Dirk")
        #expect(result["adults"] == "p2,p1")
        #expect(result["englishToo"] == "3")
        #expect(result["both"] == "p3")
        #expect(result["page"] == "p3,p1")
        #expect(result["hasNext"] == "true")
        #expect(result["total"] == "57")
        #expect(result["left"] == "3")
    }

    @Test func tourTransactionCommitsAndReadsOneSnapshot() throws {
        let result = try Tour.tour()
        #expect(result["archivedInside"] == "1")
        #expect(result["active"] == "2")
        #expect(result["archived"] == "1")
    }

    @Test func liveTourRedrawsOnEachCommit() async throws {
        #expect(try await Tour.live() == [0, 1, 2])
    }

    /// The lines between `// BEGIN README TOUR <part>` and `// END README TOUR <part>`, without the
    /// indentation they have in this file.
    static func part(_ name: String, of source: String) throws -> String {
        let begin = try #require(source.range(of: "// BEGIN README TOUR \(name)\n"))
        let end = try #require(source.range(of: "// END README TOUR \(name)", range: begin.upperBound..<source.endIndex))
        let lines = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        let indent = lines.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return lines.map { String($0.dropFirst(Swift.min(indent, $0.count))) }.joined(separator: "\n") + "\n"
    }

    @Test func readmeShowsExactlyThisCode() throws {
        let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let type = try Self.part("TYPE", of: source)
        let code = try Self.part("CODE", of: source)
        let live = try Self.part("LIVE", of: source)
        #expect(type.hasPrefix("struct Person: BuriSupport {\n") && code.hasPrefix("let db = ") && live.hasPrefix("// Keep"))
        #expect(readme.contains("```swift\nimport Buri\n\n" + type + "\n" + code + "```"), "README.md's tour differs from ReadmeTourTests.swift")
        #expect(readme.contains("```swift\n" + live + "```"), "README.md's live query differs from ReadmeTourTests.swift")
    }
}
