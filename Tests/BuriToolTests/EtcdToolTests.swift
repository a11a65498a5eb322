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

    @Test func aStagedImportCommitsInChunksUnderTheTransactionLimitAndOneTooBigIsRefusedWholeUnlessChunksAreAskedFor() throws {
        let location = try EtcdTestCluster.location("toolbig")
        defer { try? EtcdEngine(location: location).deleteAll() }
        let sandbox = try Sandbox()
        let lines = (0..<3000).map { "{\"id\":\"k\($0)\",\"name\":\"n\($0)\"}" }.joined(separator: "\n") + "\n"
        let input = try sandbox.write("big.jsonl", lines)
        // 3000 objects with one index: 6000 writes, over the cluster's 4096 in one commit; the
        // staged import commits them 1000 objects at a time and publishes them atomically.
        expectSuccess(try buri("import", location, "Big", input, "--key", "id", "--binary-index", "name"))
        #expect(try buri("info", location).stdout.contains("3000 objects"))
        // Five entries per object: one staged chunk of 1000 is 6000 writes, refused whole.
        let tagged = (0..<1000).map { "{\"id\":\"t\($0)\",\"tags\":[\"a\($0)\",\"b\($0)\",\"c\($0)\",\"d\($0)\",\"e\($0)\"]}" }.joined(separator: "\n") + "\n"
        let taggedInput = try sandbox.write("tagged.jsonl", tagged)
        let tooBig = try buri("import", location, "Tagged", taggedInput, "--key", "id", "--binary-index", "tags")
        #expect(tooBig.status == 3 && tooBig.stderr.contains("too large to apply atomically") && tooBig.stderr.contains("--max-txn-ops"), "\(tooBig)")
        #expect(try buri("buckets", location).stdout == "Big\n")
        expectSuccess(try buri("import", location, "Tagged", taggedInput, "--key", "id", "--binary-index", "tags", "--chunk-size", "500"))
        let info = try buri("info", location)
        #expect(info.stdout.contains("bucket 'Tagged' (key field 'id'): 1000 objects"), "\(info)")
        expectSuccess(try buri("check", location))
    }
}
