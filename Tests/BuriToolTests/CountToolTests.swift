import Buri
import Foundation
import LevelDB
import Testing

@Suite("buri and the stored object counts (format 4)")
struct CountToolTests {
    /// Puts `value` as bucket `name`'s object count (key 05 + u32be(id), docs/FORMAT.md §6b), behind Buri's back.
    private func putCount(_ path: String, bucket name: String, _ value: [UInt8]) throws {
        let id: UInt32
        do {
            let db = try BuriDatabase(path: path)
            defer { db.close() }
            id = try #require(try db.bucketInfo(named: name)).id
        }
        let storage = try Database(path: path)
        defer { storage.close() }
        try storage.put(
            [0x05, UInt8(id >> 24), UInt8((id >> 16) & 0xFF), UInt8((id >> 8) & 0xFF), UInt8(id & 0xFF)], value)
    }

    @Test func aDamagedCountFailsInfoNamingTheBucketCheckReportsItAndRepairRecountsIt() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let clean = try buri("check", path)
        expectSuccess(clean)

        try putCount(path, bucket: "Person", [0x01, 0x02, 0x03])
        let info = try buri("info", path)
        #expect(info.status != 0, "\(info)")
        #expect(
            info.stderr.contains("Person") && info.stderr.contains("object count")
                && info.stderr.contains("buri check --repair"), "\(info)")

        let damaged = try buri("check", path)
        #expect(damaged.status == 1, "\(damaged)")
        #expect(
            damaged.lines.contains { $0.hasPrefix("wrongCount bucket 'Person': ") && $0.contains("holds 40 records") },
            "\(damaged)")

        let repair = try buri("check", path, "--repair")
        expectSuccess(repair)
        #expect(
            repair.lines.contains { $0.hasPrefix("wrongCount bucket 'Person'") && $0.hasSuffix("[repaired]") },
            "\(repair)")
        #expect(try buri("check", path).stdout == clean.stdout)
        #expect(
            try buri("info", path).lines.contains { $0.hasPrefix("bucket 'Person'") && $0.hasSuffix(": 40 objects") })

        // A count that parses but is wrong: info shows what is stored (one key read), check finds it.
        try putCount(path, bucket: "Person", [0, 0, 0, 0, 0, 0, 0, 7])
        let wrong = try buri("check", path)
        #expect(
            wrong.status == 1
                && wrong.lines.contains { $0.contains("stored object count is 7 but the bucket holds 40 records") },
            "\(wrong)")
        expectSuccess(try buri("check", path, "--repair"))
        #expect(try buri("check", path).stdout == clean.stdout)
    }
}
