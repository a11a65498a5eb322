// buri-etcd-bench LOCATION [--count N]: Buri on the etcd engine against the floor of the same
// storage work as raw etcd requests through the same client (EtcdClient): what Buri's encoding,
// indexes and commit conditions cost on top of the network and Raft. LOCATION is a cluster
// location as Scripts/etcd-cluster prints it (etcd://h:p,…/?limits); Scripts/benchmark --etcd
// starts a fresh cluster and runs this.
import Buri
import BuriEtcd
import Foundation

struct Person: BuriSupport, Equatable, Codable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Person>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
        bucket: "Person"
    )
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("buri-etcd-bench: \(message)\n".utf8))
    exit(1)
}

func timed(_ body: () throws -> Int) throws -> (Double, Int) {
    let start = DispatchTime.now().uptimeNanoseconds
    let count = try body()
    return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, count)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let base = arguments.first, base.hasPrefix("etcd://") else {
    fail("usage: buri-etcd-bench etcd://HOST:PORT,…/?max-txn-ops=N [--count N]")
}
var count = 10_000
if let index = arguments.firstIndex(of: "--count"), index + 1 < arguments.count, let n = Int(arguments[index + 1]),
    n >= 100
{
    count = n
}
let hosts = base.dropFirst("etcd://".count).prefix { $0 != "/" }
let query = base.firstIndex(of: "?").map { String(base[$0...]) } ?? ""
let chunk = 500  // objects per commit: 3 writes each (record, 2 index entries) fit --max-txn-ops 4096

let locales = ["EN", "NL", "DE", "FR", "ES"]
let people = (0..<count).map { i in
    Person(
        objectId: String(format: "person-%06d", (i &* 7919) % count), name: "name\(i % 97)",
        locale: locales[i % locales.count], age: 20 + i % 40)
}
var generator = SystemRandomNumberGenerator()
let probes = people.shuffled(using: &generator).prefix(min(count, 2_000)).map(\.objectId)

do {
    let engine = try EtcdEngine(location: "etcd://\(hosts)/bench-buri-\(UUID().uuidString)\(query)")
    let db = try BuriDatabase(engine: engine)
    let bucket = try db.bucket(Person.self)
    let client = try EtcdClient(endpoints: engine.client.endpoints)
    let floorPrefix = Array("bench-floor-\(UUID().uuidString)/".utf8)
    let encoder = JSONEncoder()
    // The floor stores what Buri stores per object: a record and two index keys, in commits of
    // the same size, and reads the same numbers of keys back.
    func recordKey(_ id: String) -> [UInt8] { floorPrefix + Array("r/\(id)".utf8) }
    func indexKey(_ name: String, _ value: String, _ id: String) -> [UInt8] {
        floorPrefix + Array("i/\(name)/\(value)/\(id)".utf8)
    }

    var rows: [(String, Int, Double, Double)] = []

    let (buriFill, _) = try timed {
        for start in stride(from: 0, to: count, by: chunk) {
            try bucket.store(Array(people[start..<min(count, start + chunk)]))
        }
        return count
    }
    let (floorFill, _) = try timed {
        for start in stride(from: 0, to: count, by: chunk) {
            var pairs: [(key: [UInt8], value: [UInt8])] = []
            for person in people[start..<min(count, start + chunk)] {
                pairs.append((recordKey(person.objectId), [UInt8](try encoder.encode(person))))
                pairs.append((indexKey("locale", person.locale, person.objectId), []))
                pairs.append((indexKey("age", String(format: "%03d", person.age), person.objectId), []))
            }
            try client.putAll(pairs)
        }
        return count
    }
    rows.append(("Complex fill (Person, 2 indexes; commits of \(chunk))", count, buriFill, floorFill))

    func floorScan(_ start: [UInt8], _ end: [UInt8]) throws -> Int {
        var from = start, seen = 0
        while true {
            let page = try client.range(from: from, to: end, limit: 1024)
            seen += page.count
            guard page.count == 1024, let last = page.last else { return seen }
            from = last.key + [0]
        }
    }
    let (buriAll, all) = try timed { try bucket.allObjects().count }
    let (floorAll, floorCount) = try timed { try floorScan(recordKey(""), recordKey("\u{7F}")) }
    guard all == count, floorCount == count else { fail("sequential: \(all) and \(floorCount) of \(count)") }
    rows.append(("Bucket sequential retrieval (all objects)", count, buriAll, floorAll))

    let en = people.filter { $0.locale == "EN" }.count
    let (buriKeys, keys) = try timed { try bucket.keys(index: "locale", equalTo: "EN").count }
    let (floorKeys, floorKeyCount) = try timed {
        try floorScan(indexKey("locale", "EN", ""), indexKey("locale", "EN", "\u{7F}"))
    }
    guard keys == en, floorKeyCount == en else { fail("2i keys: \(keys) and \(floorKeyCount) of \(en)") }
    rows.append(("2i key retrieval (locale = EN)", en, buriKeys, floorKeys))

    let (buriPoint, found) = try timed { try probes.reduce(0) { $0 + (try bucket.object(forKey: $1) == nil ? 0 : 1) } }
    let (floorPoint, floorFound) = try timed {
        try probes.reduce(0) { $0 + (try client.range(from: recordKey($1), to: recordKey($1) + [0]).count) }
    }
    guard found == probes.count, floorFound == probes.count else { fail("point fetch: \(found) and \(floorFound)") }
    rows.append(("Point fetch by key, random order", probes.count, buriPoint, floorPoint))

    print("| Row | Objects | Buri on etcd (objects/s) | etcd floor (objects/s) | Buri/floor |")
    print("|---|---:|---:|---:|---:|")
    for (title, n, buri, floor) in rows {
        print(
            "| \(title) | \(n) | \(Int(Double(n) / buri)) | \(Int(Double(n) / floor)) | \(String(format: "%.2f", floor / buri)) |"
        )
    }
    db.close()
    try engine.client.deleteRange(from: engine.keyPrefix, to: Array(engine.name.utf8) + [1])
    try client.deleteRange(from: floorPrefix, to: Array(floorPrefix.dropLast()) + [UInt8(ascii: "0")])
} catch {
    fail("\(error)")
}
