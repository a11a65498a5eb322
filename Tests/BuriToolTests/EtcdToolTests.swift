import BuriEtcd
import BuriTestSupport
import Foundation
import Testing

/// `buri` pointed at an etcd location instead of a directory.
struct EtcdToolTests {
    @Test func importQueryCheckAndExportWorkOnAnEtcdLocation() throws {
        let location = try EtcdTestCluster.location("tool")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let input = try sandbox.write("people.jsonl", """
            {"id":"a","name":"Ann","age":3}
            {"id":"b","name":"Zoë","age":5}
            {"id":"c","name":"Bob","age":9}

            """)
        expectSuccess(try buri("import", location, "People", input, "--key", "id", "--binary-index", "name", "--numeric-index", "age"))
        let info = try buri("info", location)
        expectSuccess(info)
        #expect(info.stdout.contains("bucket 'People' (key field 'id'): 3 objects"), "\(info)")
        #expect(try buri("query", location, "People", "age", "--from", "4", "--to", "10").stdout == "b\nc\n")
        expectSuccess(try buri("check", location))
        let export = try buri("export", location)
        expectSuccess(export)
        // The header, the bucket's schema line, then its three objects.
        #expect(export.stdout.split(separator: "\n").count == 5, "\(export)")
        #expect(export.stdout.split(separator: "\n").filter { $0.contains("\"key\"") }.count == 3, "\(export)")
    }

    @Test func anImportOverTheTransactionLimitIsRefusedWholeUnlessChunksAreAskedFor() throws {
        let location = try EtcdTestCluster.location("toolbig")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let lines = (0..<3000).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\"}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("big.jsonl", lines)
        // 3000 objects with one index: 6000 writes in one commit, over the cluster's 4096.
        expectFailure(try buri("import", location, "Big", input, "--key", "id", "--binary-index", "name"), status: 3,
                      mentioning: ["too large to apply atomically", "--max-txn-ops", "Nothing was written"])
        expectFailure(try buri("info", location), status: 4, mentioning: ["holds no Buri database"])
        expectSuccess(try buri("import", location, "Big", input, "--key", "id", "--binary-index", "name", "--chunk-size", "1000"))
        let info = try buri("info", location)
        #expect(info.stdout.contains("3000 objects"), "\(info)")
        expectSuccess(try buri("check", location))
    }
}
