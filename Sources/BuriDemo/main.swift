// The main job: stores 10,000 people in a real Buri database on disk, asks it every kind of
// question, and prints what it found. Run it with `Scripts/demo [path]` (default ./demo.buri);
// the path may be an etcd location (`etcd://127.0.0.1:2379/demo`, see Scripts/etcd-cluster).
import Buri
import BuriEtcd
import BuriStorage
import Foundation

struct Person: BuriSupport, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Person>(
        key: \.objectId,
        // `field:` records which key each index reads, so the `buri` tool can query, import and
        // restore them without this type; the compound indexes answer "locale (and age)" and
        // "name and age" in one scan.
        indexes: [
            .binary("locale", \.locale, field: "locale"), .numeric("age", \.age, field: "age"),
            .compound("locale_age", .binary(\.locale, field: "locale"), .numeric(\.age, field: "age")),
            .compound("name_age", .binary(\.name, field: "name"), .numeric(\.age, field: "age")),
        ],
        keyField: "objectId"
    )
}

func show(_ label: String, _ value: Any) {
    print(label.padding(toLength: 58, withPad: " ", startingAt: 0), value)
}

func run(path: String) throws {
    let started = Date()
    // A directory (LevelDB) or an etcd location: the registry picks the engine.
    let engines = StorageEngines.standard.registering(EtcdEngine.Kind())
    let db = try BuriDatabase(location: path, engines: engines)
    defer { db.close() }
    let onEtcd = db.engine is EtcdEngine
    let people = try db.bucket(Person.self)
    let cleared = try people.deleteAll()

    let locales = ["EN", "NL", "DE", "FR", "ES"]
    let names = [
        "de Vries, Dirk", "Smith, Anna", "Jansen, Jan", "Curie, Marie", "Berg, Lars", "Rossi, Sofia", "Chen, Wei",
        "Mensah, Ama",
    ]
    let everyone = (0..<10_000).map { i in
        Person(
            objectId: String(format: "person-%05d", i), name: names[i % names.count],
            locale: locales[i % locales.count], age: 20 + i % 20)
    }
    if onEtcd {
        // etcd commits at most --max-txn-ops writes atomically: one commit per 1,000 people.
        for start in stride(from: 0, to: everyone.count, by: 1_000) {
            try people.storeConcurrently(Array(everyone[start..<min(everyone.count, start + 1_000)]))
        }
    } else {
        try people.storeConcurrently(everyone)  // encodes on every core, one atomic batch
    }
    print("Buri demo: database at \(path) (format \(db.formatVersion))")
    show("cleared objects from an earlier run", cleared)
    show(onEtcd ? "stored in atomic batches of 1,000" : "stored in one atomic batch", try people.count())

    print("\n-- fetch by key")
    show(
        "object(forKey: \"person-00042\")",
        try people.object(forKey: "person-00042").map { "\($0.name), \($0.locale), \($0.age)" } ?? "nil")
    show("object(forKey: \"nobody\")", try people.object(forKey: "nobody").map { "\($0)" } ?? "nil")

    print("\n-- binary index 'locale'")
    show("keys(.index(locale, equals: EN)).count", try people.keys(.index("locale", equals: "EN")).count)
    show(
        "keys(.index(locale, equals: E)).count (exact, not prefix)",
        try people.keys(.index("locale", equals: "E")).count)
    show("keys(.index(locale, prefix: E)).count", try people.keys(.index("locale", prefix: "E")).count)
    show(
        "objects(.index(locale, in: DE...FR)) locales",
        Set(try people.objects(.index("locale", in: "DE"..."FR")).map(\.locale)).sorted())

    print("\n-- numeric index 'age'")
    show("keys(.index(age, equals: 25)).count", try people.keys(.index("age", equals: 25)).count)
    show("keys(.index(age, equals: 25.0)).count (20 == 20.0)", try people.keys(.index("age", equals: 25.0)).count)
    show("objects(.index(age, in: 22...24)).count (inclusive)", try people.objects(.index("age", in: 22...24)).count)
    show("count(.index(age, in: 22..<24)) (half-open)", try people.count(.index("age", in: 22..<24)))
    show("count(.index(age, in: 38...)) (one-sided)", try people.count(.index("age", in: 38...)))
    show("count(.index(age, in: ...20.5)) (fractional bound)", try people.count(.index("age", in: ...20.5)))
    show(
        "min/max of age from the index alone",
        "\(try people.min(index: "age").map { "\($0)" } ?? "none") / \(try people.max(index: "age").map { "\($0)" } ?? "none")"
    )

    print("\n-- compound indexes 'locale_age' and 'name_age'")
    show("count(locale_age: EN, age 30...39)", try people.count(.index("locale_age", equals: ["EN"], in: 30...39)))
    show(
        "keys(name_age: \"Smith, Anna\", 25).count",
        try people.keys(.index("name_age", equals: "Smith, Anna", 25)).count)

    print("\n-- order, limits, paging")
    let oldest = try people.objects(.index("age", in: 20...).descending().limit(3))
    show("3 oldest (descending, limit 3)", oldest.map { "\($0.objectId) (\($0.age))" })
    var page = try people.keyPage(.index("locale", equals: "NL"), size: 1500)
    var pages = 1
    var seen = page.items.count
    while let token = page.next {
        page = try people.keyPage(.index("locale", equals: "NL").after(token), size: 1500)
        pages += 1
        seen += page.items.count
    }
    show("NL keys in pages of 1500", "\(seen) keys in \(pages) pages")
    show("all keys / all objects", "\(try people.keys().count) / \(try people.objects().count)")
    var streamed = 0
    for person in people.lazyObjects(.index("locale", equals: "FR")) where person.age >= 30 { streamed += 1 }
    show("streamed FR objects with age >= 30 (lazy sequence)", streamed)

    print("\n-- updates keep indexes exact")
    var moved = everyone[7]
    moved.age = 99
    moved.locale = "EN-GB"
    try people.store(moved)
    show("after moving person-00007 to 99 / EN-GB: age 99", try people.keys(.index("age", equals: 99)))
    show("  and locale EN-GB", try people.keys(.index("locale", equals: "EN-GB")))
    show(
        "  and still under its old age \(everyone[7].age)?",
        try people.keys(.index("age", equals: IndexValue(everyone[7].age))).contains("person-00007"))
    try people.delete(everyone[7])  // the stale in-memory copy: stored entries are removed anyway
    show(
        "after delete(stale object): age 99 / locale EN-GB",
        "\(try people.keys(.index("age", equals: 99))) / \(try people.keys(.index("locale", equals: "EN-GB")))")
    show("objects left", try people.count())
    show("elapsed", String(format: "%.2f s", Date().timeIntervalSince(started)))
}

let path = CommandLine.arguments.dropFirst().first ?? "./demo.buri"
do {
    try run(path: path)
} catch {
    FileHandle.standardError.write(Data("buri-demo: \(error)\n".utf8))
    exit(1)
}
