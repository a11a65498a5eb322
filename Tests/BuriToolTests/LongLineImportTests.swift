import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

@Suite("A long line is read in time linear in its length")
struct LongLineImportTests {
    /// One line of 24 MiB, then a short one. Main searched the whole line again for its newline
    /// after every 1 MiB block it read, so the work grew with the square of the line (5 MB 3.9 s,
    /// 20 MB 27 s, 100 MB 376 s in a release build). Linearity is measured without a clock: the
    /// tool counts every byte its newline search looks at, and that must stay within the input's
    /// size per pass over it (an import into a new bucket reads its input twice).
    @Test func aLongSingleLineImportsInLinearTimeAndBoundedMemory() throws {
        let sandbox = try Sandbox()
        let length = 24 << 20
        let path = try sandbox.write(
            "long.jsonl",
            #"{"id":"a","s":""# + String(repeating: "x", count: length) + #""}"# + "\n" + #"{"id":"b","s":"short"}"#
                + "\n")
        let db = sandbox.path("long.buri")
        let run = try buri(["import", db, "L", "--key", "id", "--debug-peak-memory", path])
        #expect(
            run.status == 0 && run.stdout == "imported 2 objects into bucket 'L' of \(db)\n",
            "\(run.stdout) \(run.stderr)")
        // Memory is a small multiple of the line (the line, its parsed form, its record), never
        // the whole input or a copy per block read.
        let field = run.stderr.split(separator: "\n").first { $0.hasPrefix("buri: debug: VmHWM:") }
        let kilobytes = field.flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" })[3]) } ?? .max
        #expect(kilobytes < 12 * length / 1024, "peak \(kilobytes) kB for a line of \(length / 1024) kB")
        let searched =
            run.stderr.split(separator: "\n").first { $0.hasPrefix("buri: debug: searched ") }
            .flatMap { Int($0.split(separator: " ")[3]) } ?? .max
        #expect(
            searched <= 2 * (length + 64),
            "the newline search looked at \(searched) bytes of a \(length)-byte input read twice")
        let database = try BuriDatabase(path: db)
        defer { database.close() }
        let record = try database.rawBucket(named: "L").record(forKey: "a")
        #expect((record?.payload.count ?? 0) > length)
        #expect(try database.rawBucket(named: "L").count() == 2)
    }
}
