import Foundation
import Testing
import LevelDB
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

@Suite("Removing a snapshot directory while this process still creates files in it")
struct SnapshotRemovalTests {
    /// A signal handler removes the snapshot of a command that is still taking it (or whose
    /// LevelDB is still opening it): the thread doing that keeps creating files by path. One
    /// recursive delete is not enough then — a file created after its listing makes the final
    /// rmdir fail and leaves the directory behind. The removal must leave nothing, and every later
    /// creation by path must fail.
    @Test func aDirectoryStillBeingFilledIsRemovedWhole() throws {
        for round in 0..<100 {
            var template = Array(
                (NSTemporaryDirectory() + "/" + FileSnapshot.directoryPrefix + "\(getpid())-XXXXXX").utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            try #require(made != nil)
            let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let started = DispatchSemaphore(value: 0)
            let stopped = DispatchSemaphore(value: 0)
            let created = Atomic<Int>(0)
            let removed = Atomic<Bool>(false)
            let creator = Thread {
                var index = 0
                // Until the removal has returned (then a creation would be a new directory's
                // business, and the check below would see it).
                while !removed.load(ordering: .sequentiallyConsistent) {
                    let fd = open(path + "/file-\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
                    if fd < 0 { break }  // the directory is gone from this path
                    close(fd)
                    index += 1
                    if created.add(1, ordering: .relaxed).newValue == 50 { started.signal() }
                }
                stopped.signal()
            }
            creator.start()
            started.wait()
            FileSnapshot.removeDirectory(atPath: path)
            let leftBehind =
                FileManager.default.fileExists(atPath: path)
                || FileManager.default.fileExists(atPath: path + "-removing")
            removed.store(true, ordering: .sequentiallyConsistent)
            stopped.wait()
            // Whatever the creator managed after the removal began, nothing was left.
            #expect(!leftBehind, "round \(round): the directory outlived its removal")
            try? FileManager.default.removeItem(atPath: path)
            #expect(created.load(ordering: .relaxed) >= 50)
        }
    }
}
