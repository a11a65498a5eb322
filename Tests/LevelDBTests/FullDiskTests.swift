import Foundation
import Testing
import LevelDB
#if canImport(Glibc)
    import Glibc
#endif

/// A small tmpfs mounted for one test (as root; `nil`, with the reason printed, otherwise).
/// Unmounted by ``unmount()``, which every test calls in a `defer`.
final class TinyDisk {
    let path: String
    private let base: TemporaryDirectory

    private init(base: TemporaryDirectory, path: String) {
        self.base = base
        self.path = path
    }

    static func mount(megabytes: Int, test: String) throws -> TinyDisk? {
        guard getuid() == 0 else {
            print("skipped \(test): mounting a \(megabytes) MiB tmpfs needs root (this run is uid \(getuid()))")
            return nil
        }
        let base = TemporaryDirectory()
        let path = base.path("disk")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path]
        try mount.run()
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else {
            Issue.record("running as root, but `mount -t tmpfs` failed with status \(mount.terminationStatus)")
            return nil
        }
        return TinyDisk(base: base, path: path)
    }

    /// Fills the disk with a file until writes fail, then gives `leaving` bytes back.
    func fill(leaving: Int = 0) throws {
        let fd = open(path + "/filler", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5A, count: 64 << 10)
        var size = 0
        while true {
            let written = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            size += written
        }
        if leaving > 0 { _ = ftruncate(fd, off_t(max(0, size - leaving))) }
    }

    func freeSpace() { try? FileManager.default.removeItem(atPath: path + "/filler") }

    func unmount() {
        for arguments in [[path], ["-l", path]] {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = arguments
            guard (try? umount.run()) != nil else { continue }
            umount.waitUntilExit()
            if umount.terminationStatus == 0 { break }
        }
    }
}

@Suite("A full disk: a write that fails leaves the handle refusing writes and the log readable")
struct FullDiskTests {
    @Test func afterAWriteFailsOnAFullDiskNoLaterWriteIsAppendedAfterItsPartialRecord() throws {
        guard let disk = try TinyDisk.mount(megabytes: 2, test: #function) else { return }
        defer { disk.unmount() }
        let path = disk.path + "/db"
        let db = try Database(path: path)
        var acknowledged: [Int] = []
        try disk.fill(leaving: 300 << 10)
        var failure: LevelDBError?
        for i in 0..<10_000 {
            // Values bigger than LevelDB's 64 KiB write buffer, so a record is cut off mid-write.
            do {
                try db.put(bytes(String(format: "k%05d", i)), [UInt8](repeating: UInt8(i % 251), count: 100_000))
                acknowledged.append(i)
            } catch {
                failure = error
                break
            }
        }
        let first = try #require(failure, "the disk never filled")
        #expect(first.message.contains("No space left on device"), "\(first)")
        // Space comes back, but this handle's log may end in a partial record: a write appended
        // after it would be unreadable after a restart. It is refused, quoting the first failure.
        disk.freeSpace()
        do {
            try db.put(bytes("after"), bytes("the failure"))
            Issue.record("a write was accepted after a write failed on a full disk")
        } catch {
            #expect(error.code == .ioError)
            #expect(error.message.contains("No space left on device") && error.message.contains("reopen"), "\(error)")
        }
        // Reads go on.
        if let last = acknowledged.last { #expect(try db.get(bytes(String(format: "k%05d", last)))?.count == 100_000) }
        db.close()
        // Reopened with paranoid checks: the log reads, every acknowledged write is there, and the
        // new handle writes again.
        var options = Options()
        options.paranoidChecks = true
        let reopened = try Database(path: path, options: options)
        defer { reopened.close() }
        for i in acknowledged { #expect(try reopened.get(bytes(String(format: "k%05d", i)))?.first == UInt8(i % 251)) }
        #expect(try reopened.get(bytes("after")) == nil)
        try reopened.put(bytes("later"), bytes("fine"))
        #expect(try reopened.get(bytes("later")) == bytes("fine"))
    }
}
