import BuriEtcd
import BuriStorage
import BuriTestSupport
import Foundation
import Testing
@testable import Buri

/// On etcd every read is a network round trip. Index queries must read their records ahead in
/// batches and refills must read the records they replace in one go: a handful of requests for
/// hundreds of objects, never one per object — with exactly the answers of the local engines.
@Suite("etcd: reads go in batches")
struct EtcdRoundTripTests {
    static let engines = [Engine.etcd].filter(Engine.allCases.contains)

    @Test(arguments: engines) func indexReadsAndRefillsBatchTheirRecordReads(engine: Engine) throws {
        let t = try TestDatabase(engine)
        let etcd = try #require(t.db.engine as? EtcdEngine)
        let people = try t.db.bucket(PersonRecord.self)
        let n = 400
        // Canonically equal but byte-different locales must stay apart.
        let locales = ["EN", "\u{E9}", "e\u{301}", "NL"]
        let all = (0..<n).map { i in
            PersonRecord(objectId: String(format: "p%05d", i), name: "n\u{0}\(i)", locale: locales[i % 4], age: i % 50)
        }
        try people.store(all)
        #expect(try etcd.snapshot().prefersBatchedReads)

        let before = etcd.client.requestCount
        let found = try people.objects(.index("age", in: 10...39))
        let requests = etcd.client.requestCount - before
        #expect(found.count == all.filter { (10...39).contains($0.age) }.count)
        #expect(Set(found) == Set(all.filter { (10...39).contains($0.age) }))
        #expect(found.map(\.age) == found.map(\.age).sorted())
        #expect(requests < found.count / 8, "\(requests) requests for \(found.count) objects")

        let acute = try people.objects(.index("locale", equals: "\u{E9}"))
        #expect(acute.count == n / 4 && acute.allSatisfy { Array($0.locale.utf8) == [0xC3, 0xA9] })

        // A refill reads every old record to move its index entries: in batches too.
        let changed = all.map {
            PersonRecord(objectId: $0.objectId, name: $0.name, locale: $0.locale, age: $0.age + 100)
        }
        let beforeRefill = etcd.client.requestCount
        try people.store(changed)
        let refillRequests = etcd.client.requestCount - beforeRefill
        #expect(refillRequests < n / 8, "\(refillRequests) requests to refill \(n) objects")
        #expect(try people.objects(.index("age", in: 100...149)).count == n)
        #expect(try people.count(.index("age", in: 0...99)) == 0)
    }
}
