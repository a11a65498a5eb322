import Synchronization
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif

private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, buffer, count) }

/// Why a ``FileSnapshot`` could not be taken.
///
/// ```swift
/// do {
///     let files = try FileSnapshot.take(of: "app.ldb", in: NSTemporaryDirectory())
/// } catch where error.kind == .noSpace {
///     print("no room in \(error.temporaryDirectory)")
/// }
/// ```
public struct FileSnapshotError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// The temporary directory's disk has no room for the copied log and manifest (`ENOSPC`, `EDQUOT`).
        case noSpace
        /// The temporary directory cannot hold a snapshot (missing, not writable, read-only).
        case temporaryDirectory
        /// A file of the database could not be read.
        case unreadable
        /// The database's files changed during every attempt (another process compacting it nonstop).
        case keptChanging
    }

    /// What went wrong.
    public let kind: Kind
    /// The database directory being read.
    public let source: String
    /// The directory the snapshot was to be made in.
    public let temporaryDirectory: String
    /// The operating system's words, with the file involved.
    public let detail: String

    public init(kind: Kind, source: String, temporaryDirectory: String, detail: String) {
        self.kind = kind
        self.source = source
        self.temporaryDirectory = temporaryDirectory
        self.detail = detail
    }

    public var description: String {
        switch kind {
        case .noSpace:
            return
                "no space in the temporary directory '\(temporaryDirectory)' for a private snapshot of '\(source)' (\(detail))"
        case .temporaryDirectory:
            return
                "the temporary directory '\(temporaryDirectory)' cannot hold a private snapshot of '\(source)' (\(detail))"
        case .unreadable:
            return "cannot read the files of '\(source)' (\(detail))"
        case .keptChanging:
            return
                "the files of '\(source)' changed during every attempt to take a consistent snapshot of them (\(detail))"
        }
    }
}

/// A private, consistent snapshot of the files of a LevelDB database directory, made without
/// writing anything in that directory: open it with ``Database`` to read the database as its
/// files stood, while another process holds the database open (its `LOCK`), on a read-only
/// file system, or on a full disk — leaving every file of the original as it was.
///
/// LevelDB has no read-only mode: opening a database takes its lock, writes `LOG`, replays the
/// write-ahead log into a new table, writes a new `MANIFEST`, rewrites `CURRENT` and may compact.
/// A snapshot gives it a directory of its own to do that in:
/// - `CURRENT`, the `MANIFEST` it names and every write-ahead log (`*.log`) are copied (they are
///   appended to, so the copy is what they hold at that moment);
/// - the table files the manifest names are hard-linked (tables are never changed once written;
///   LevelDB in the snapshot only unlinks its own links). Where a hard link is impossible (another
///   file system, or not permitted), the snapshot holds an open descriptor of the table and a
///   symbolic link to it (`/proc/self/fd/N`, so the file stays readable even if the original's
///   owner deletes it after a compaction), or, without `/proc`, a symbolic link to the original.
///   Tables the manifest does not name (outputs of a compaction in progress) are left out, and a
///   table numbered at or above the manifest's next file number is copied rather than linked, so
///   no file LevelDB creates in the snapshot can ever be one of the original's.
/// - A manifest that does not parse (damage) gets copies of every table instead of links, so
///   LevelDB reports the same damage it would report on the original.
///
/// The copy is consistent: if `CURRENT` or the manifest changed while the files were gathered (the
/// database's owner finished a compaction or a memtable flush), the snapshot is taken again. What
/// it shows is the last committed state on disk — the log is read as it stands; a write another
/// process has under way and not finished writing to its log is not in it (as after a crash).
///
/// ```swift
/// let files = try FileSnapshot.take(of: "/data/app.ldb", in: NSTemporaryDirectory())
/// defer { files.remove() }
/// let db = try Database(path: files.path, options: { var o = Options(); o.createIfMissing = false; return o }())
/// ```
///
/// Remove it with ``remove()`` once the database opened on it is closed (also done when the
/// object is released). Directories left by a process that was killed are removed by the next
/// ``take(of:in:maxAttempts:)`` in the same temporary directory.
public final class FileSnapshot: Sendable {
    /// The database directory the snapshot was taken of.
    public let source: String
    /// The snapshot's own directory: open the database here.
    public let path: String
    /// The directory the snapshot directory was made in.
    public let temporaryDirectory: String
    /// How the tables reached the snapshot: hard-linked, referenced by a symbolic link, copied.
    public let linkedTables: Int
    public let referencedTables: Int
    public let copiedTables: Int
    /// The bytes copied (`CURRENT`, the manifest, the logs and any copied tables).
    public let copiedBytes: UInt64

    /// Descriptors kept open for `/proc/self/fd` links, and whether the directory is gone.
    private let state: Mutex<(descriptors: [Int32], removed: Bool)>

    /// The prefix of every snapshot directory's name: `buri-snapshot-PID-…`.
    public static let directoryPrefix = "buri-snapshot-"

    private init(source: String, path: String, temporaryDirectory: String, gathered: Gathered) {
        self.source = source
        self.path = path
        self.temporaryDirectory = temporaryDirectory
        linkedTables = gathered.linked
        referencedTables = gathered.referenced
        copiedTables = gathered.copied
        copiedBytes = gathered.bytes
        state = Mutex((gathered.descriptors, false))
    }

    deinit { remove() }

    /// Deletes the snapshot directory and closes its descriptors. Idempotent. Close any database
    /// opened on it first.
    public func remove() {
        let descriptors = state.withLock { state -> [Int32]? in
            if state.removed { return nil }
            state.removed = true
            defer { state.descriptors = [] }
            return state.descriptors
        }
        guard let descriptors else { return }
        for fd in descriptors { close(fd) }
        Self.removeDirectory(atPath: path)
    }

    /// Removes a snapshot directory and everything in it, also while another thread of this
    /// process is still creating files there (a signal handler removing the snapshot of a command
    /// that is taking it, or whose LevelDB is opening it). The directory is first renamed, so
    /// that every later creation by path fails instead of landing in it, then emptied until it is
    /// gone: a creation already past its path lookup can still add a file after one pass. The new
    /// name keeps the prefix and process id, so a process killed in between leaves a directory
    /// that ``removeAbandoned(in:)`` recognises.
    public static func removeDirectory(atPath path: String) {
        var target = path
        let moved = path + "-removing"
        if rename(path, moved) == 0 { target = moved }
        var status = stat()
        for _ in 0..<1_000 {
            try? FileManager.default.removeItem(atPath: target)
            if lstat(target, &status) != 0 && errno == ENOENT { return }
            sched_yield()
        }
    }

    /// Whether ``remove()`` has run.
    public var isRemoved: Bool { state.withLock { $0.removed } }

    /// Takes a snapshot of the database in `source` inside a new directory under `directory`.
    /// `source` must be a database directory with a `CURRENT` file (a missing manifest or table,
    /// or damage, is left for LevelDB to report when the snapshot is opened).
    ///
    /// `creatingDirectory` runs the creation of the snapshot's directory (its one argument): a
    /// process that removes its snapshots when a signal ends it passes a gate that excludes its
    /// signal handler, so that no directory is made between the handler's look for this process's
    /// directories and the process's end (see the `buri` tool's `SnapshotCleanup`).
    ///
    /// ```swift
    /// let files = try FileSnapshot.take(of: "people.buri", in: "/tmp") { create in
    ///     gate.withLock { _ in create() }
    /// }
    /// ```
    /// - Throws: ``FileSnapshotError``: no space or no usable `directory`, an unreadable file, or
    ///   files that kept changing for `maxAttempts` attempts.
    public static func take(
        of source: String, in directory: String, maxAttempts: Int = 64,
        creatingDirectory: (_ create: () -> Void) -> Void = { $0() }
    ) throws(FileSnapshotError) -> FileSnapshot {
        removeAbandoned(in: directory)
        let template = (directory.hasSuffix("/") ? directory : directory + "/") + directoryPrefix + "\(getpid())-XXXXXX"
        var templateBytes = Array(template.utf8CString)
        var made = false
        var code: Int32 = 0
        creatingDirectory {
            made = templateBytes.withUnsafeMutableBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return false }
                return mkdtemp(base) != nil
            }
            code = errno
        }
        guard made else {
            throw FileSnapshotError(
                kind: isNoSpace(code) ? .noSpace : .temporaryDirectory, source: source, temporaryDirectory: directory,
                detail: "creating a directory in it: \(errorText(code))")
        }
        let path = String(decoding: templateBytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var gatherer = Gatherer(source: source, target: path, temporaryDirectory: directory)
        do throws(FileSnapshotError) {
            var attempt = 0
            while true {
                attempt += 1
                if try gatherer.gather() {
                    return FileSnapshot(
                        source: source, path: path, temporaryDirectory: directory, gathered: gatherer.result)
                }
                if attempt >= maxAttempts {
                    throw FileSnapshotError(
                        kind: .keptChanging, source: source, temporaryDirectory: directory,
                        detail: "\(attempt) attempts; the process that has it open is writing to it heavily: try again")
                }
                gatherer.reset()
            }
        } catch {
            gatherer.reset()
            removeDirectory(atPath: path)
            throw error
        }
    }

    /// Removes the snapshot directories in `directory` whose process has ended (killed before it
    /// could remove its own).
    public static func removeAbandoned(in directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(directoryPrefix) {
            let rest = name.dropFirst(directoryPrefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0 else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH {
                removeDirectory(atPath: (directory.hasSuffix("/") ? directory : directory + "/") + name)
            }
        }
    }

    static func isNoSpace(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    // MARK: Gathering

    struct Gathered {
        var linked = 0
        var referenced = 0
        var copied = 0
        var bytes: UInt64 = 0
        var descriptors: [Int32] = []
    }

    /// One attempt at collecting the files, repeated until they held still.
    struct Gatherer {
        let source: String
        let target: String
        let temporaryDirectory: String
        var result = Gathered()
        /// Whether `/proc/self/fd` links can stand for tables that cannot be hard-linked.
        let procDescriptors = FileManager.default.fileExists(atPath: "/proc/self/fd")
        /// Whether the descriptor limit was raised already.
        var raisedLimit = false

        init(source: String, target: String, temporaryDirectory: String) {
            self.source = source
            self.target = target
            self.temporaryDirectory = temporaryDirectory
        }

        func sourcePath(_ name: String) -> String { source + "/" + name }
        func targetPath(_ name: String) -> String { target + "/" + name }

        func failure(_ kind: FileSnapshotError.Kind, _ detail: String) -> FileSnapshotError {
            FileSnapshotError(kind: kind, source: source, temporaryDirectory: temporaryDirectory, detail: detail)
        }

        /// Empties the snapshot directory for another attempt.
        mutating func reset() {
            for fd in result.descriptors { close(fd) }
            result = Gathered()
            for name in (try? FileManager.default.contentsOfDirectory(atPath: target)) ?? [] {
                try? FileManager.default.removeItem(atPath: targetPath(name))
            }
        }

        /// Reads a whole file of the source; nil if it does not exist.
        func read(_ name: String) throws(FileSnapshotError) -> [UInt8]? {
            let fd = open(sourcePath(name), O_RDONLY | O_CLOEXEC)
            if fd < 0 {
                let code = errno
                if code == ENOENT { return nil }
                throw failure(.unreadable, "\(sourcePath(name)): \(FileSnapshot.errorText(code))")
            }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw failure(.unreadable, "\(sourcePath(name)): \(FileSnapshot.errorText(errno))")
                }
                if count == 0 { return bytes }
                bytes.append(contentsOf: chunk[..<count])
            }
        }

        /// Writes `bytes` as a new file of the snapshot.
        mutating func write(_ name: String, _ bytes: [UInt8]) throws(FileSnapshotError) {
            let fd = open(targetPath(name), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw targetFailure("creating \(targetPath(name))", errno) }
            defer { close(fd) }
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, bytes.count - offset) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw targetFailure("writing \(targetPath(name))", errno)
                }
                offset += written
            }
            result.bytes += UInt64(bytes.count)
        }

        func targetFailure(_ what: String, _ code: Int32) -> FileSnapshotError {
            failure(
                FileSnapshot.isNoSpace(code) ? .noSpace : .temporaryDirectory,
                "\(what): \(FileSnapshot.errorText(code))")
        }

        /// Copies a file of the source as it stands (a log being appended to: up to its end now),
        /// a megabyte at a time; false if it does not exist.
        mutating func copy(_ name: String) throws(FileSnapshotError) -> Bool {
            let input = open(sourcePath(name), O_RDONLY | O_CLOEXEC)
            if input < 0 {
                let code = errno
                if code == ENOENT { return false }
                throw failure(.unreadable, "\(sourcePath(name)): \(FileSnapshot.errorText(code))")
            }
            defer { close(input) }
            let output = open(targetPath(name), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard output >= 0 else { throw targetFailure("creating \(targetPath(name))", errno) }
            defer { close(output) }
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = chunk.withUnsafeMutableBytes { systemRead(input, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw failure(.unreadable, "\(sourcePath(name)): \(FileSnapshot.errorText(errno))")
                }
                if count == 0 { return true }
                var offset = 0
                while offset < count {
                    let written = chunk.withUnsafeBytes {
                        systemWrite(output, $0.baseAddress! + offset, count - offset)
                    }
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw targetFailure("writing \(targetPath(name))", errno)
                    }
                    offset += written
                }
                result.bytes += UInt64(count)
            }
        }

        /// Puts table `name` into the snapshot without copying it: a hard link, else a descriptor
        /// and a symbolic link. False if it does not exist.
        mutating func reference(_ name: String) throws(FileSnapshotError) -> Bool {
            if link(sourcePath(name), targetPath(name)) == 0 {
                result.linked += 1
                return true
            }
            let code = errno
            if code == ENOENT { return false }
            if FileSnapshot.isNoSpace(code) { throw targetFailure("linking \(targetPath(name))", code) }
            // Another file system (EXDEV), or links not permitted: point at the file instead.
            var fd = open(sourcePath(name), O_RDONLY | O_CLOEXEC)
            if fd < 0 && errno == EMFILE && !raisedLimit {
                raisedLimit = true
                #if canImport(Glibc)
                    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
                #else
                    let resource = RLIMIT_NOFILE
                #endif
                var limit = rlimit()
                if getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max {
                    limit.rlim_cur = limit.rlim_max
                    _ = setrlimit(resource, &limit)
                }
                fd = open(sourcePath(name), O_RDONLY | O_CLOEXEC)
            }
            let destination: String
            if fd >= 0 && procDescriptors {
                result.descriptors.append(fd)
                destination = "/proc/self/fd/\(fd)"
            } else {
                if fd >= 0 { close(fd) } else if errno == ENOENT { return false }
                destination = absolute(sourcePath(name))
            }
            if symlink(destination, targetPath(name)) != 0 { throw targetFailure("linking \(targetPath(name))", errno) }
            result.referenced += 1
            return true
        }

        func absolute(_ path: String) -> String {
            if path.hasPrefix("/") { return path }
            return FileManager.default.currentDirectoryPath + "/" + path
        }

        /// One attempt; true if the files held still while it ran.
        mutating func gather() throws(FileSnapshotError) -> Bool {
            guard let current = try read("CURRENT") else {
                throw failure(.unreadable, "\(sourcePath("CURRENT")): \(FileSnapshot.errorText(ENOENT))")
            }
            try write("CURRENT", current)
            var manifestName: String?
            if current.last == UInt8(ascii: "\n") {
                let name = String(decoding: current.dropLast(), as: UTF8.self)
                if name.hasPrefix("MANIFEST-"), !name.contains("/") { manifestName = name }
            }
            // A CURRENT LevelDB cannot follow: it says so when the snapshot is opened.
            guard let manifestName else { return true }
            guard let manifest = try read(manifestName) else {
                // Either CURRENT moved on to a new manifest meanwhile, or the manifest is missing.
                return try read("CURRENT") == current
            }
            try write(manifestName, manifest)
            let parsed = ManifestReader.parse(manifest)
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: source).sorted()
            } catch {
                throw failure(.unreadable, "listing \(source): \(error)")
            }
            for name in names {
                guard let (number, kind) = FileSnapshot.numberedFile(name) else { continue }
                switch kind {
                case .log:
                    // A log that vanished was made obsolete by a flush: the manifest changed.
                    if try !copy(name) { return false }
                case .table:
                    if let parsed {
                        guard parsed.tables.contains(number) else { continue }
                        if number < parsed.nextFile {
                            // A live table that is missing is reported by LevelDB, if it held still.
                            _ = try reference(name)
                        } else if try copy(name) {
                            result.copied += 1
                        }
                    } else if try copy(name) {
                        result.copied += 1
                    }
                }
            }
            // Held still: CURRENT names the same manifest and the manifest did not grow.
            guard try read("CURRENT") == current else { return false }
            var info = stat()
            guard stat(sourcePath(manifestName), &info) == 0, Int(info.st_size) == manifest.count else { return false }
            return true
        }
    }

    enum FileKind { case log, table }

    /// The number and kind of a log or table file name (`000123.log`, `000123.ldb`, `000123.sst`).
    static func numberedFile(_ name: String) -> (UInt64, FileKind)? {
        let kind: FileKind
        if name.hasSuffix(".log") {
            kind = .log
        } else if name.hasSuffix(".ldb") || name.hasSuffix(".sst") {
            kind = .table
        } else {
            return nil
        }
        let stem = name.utf8.dropLast(4)
        guard !stem.isEmpty, stem.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let number = UInt64(String(decoding: stem, as: UTF8.self))
        else { return nil }
        return (number, kind)
    }
}

/// Reads a LevelDB `MANIFEST` (a log of version edits, `doc/impl.md`) as LevelDB's recovery does:
/// the live table files and the next file number. Nil for a manifest LevelDB would refuse.
enum ManifestReader {
    struct State {
        var tables: Set<UInt64> = []
        var nextFile: UInt64 = 0
    }

    static func parse(_ bytes: [UInt8]) -> State? {
        guard let records = records(bytes) else { return nil }
        var levels: [UInt32: Set<UInt64>] = [:]
        var nextFile: UInt64?
        for record in records {
            var reader = Reader(bytes: record)
            while !reader.atEnd {
                guard let tag = reader.varint32() else { return nil }
                switch tag {
                case 1:  // comparator
                    guard reader.slice() != nil else { return nil }
                case 2, 4, 9:  // log number, last sequence, previous log number
                    guard reader.varint64() != nil else { return nil }
                case 3:  // next file number
                    guard let value = reader.varint64() else { return nil }
                    nextFile = value
                case 5:  // compaction pointer: level, internal key
                    guard reader.varint32() != nil, reader.slice() != nil else { return nil }
                case 6:  // deleted file: level, number
                    guard let level = reader.varint32(), let number = reader.varint64() else { return nil }
                    levels[level, default: []].remove(number)
                case 7:  // new file: level, number, size, smallest, largest
                    guard let level = reader.varint32(), let number = reader.varint64(), reader.varint64() != nil,
                        reader.slice() != nil, reader.slice() != nil
                    else { return nil }
                    levels[level, default: []].insert(number)
                default:
                    return nil
                }
            }
        }
        guard let nextFile else { return nil }
        return State(tables: levels.values.reduce(into: Set<UInt64>()) { $0.formUnion($1) }, nextFile: nextFile)
    }

    /// The records of a log-format file, fragments joined; nil if a record fails its checksum or
    /// framing where LevelDB would report it. A record cut off in the file's last, partial block
    /// (a write that did not finish) ends the records, as in LevelDB.
    static func records(_ bytes: [UInt8]) -> [[UInt8]]? {
        let blockSize = LogScanner.blockSize
        let headerSize = LogScanner.headerSize
        var records: [[UInt8]] = []
        var pending: [UInt8]?
        var blockStart = 0
        while blockStart < bytes.count {
            let blockEnd = min(blockStart + blockSize, bytes.count)
            let lastPartial = blockEnd == bytes.count && blockEnd - blockStart < blockSize
            var offset = blockStart
            while blockEnd - offset >= headerSize {
                let (stored, length, type) = LogScanner.header(bytes, at: offset)
                if type == 0 && length == 0 { break }  // preallocated space: the rest of the block
                let end = offset + headerSize + length
                if end > blockEnd {
                    if lastPartial { return records }
                    return nil
                }
                let payload = bytes[(offset + headerSize)..<end]
                guard LogScanner.mask(LogScanner.crc32c([type] + payload)) == stored else { return nil }
                switch type {
                case 1:
                    if pending != nil { return nil }
                    records.append(Array(payload))
                case 2:
                    if pending != nil { return nil }
                    pending = Array(payload)
                case 3:
                    guard pending != nil else { return nil }
                    pending?.append(contentsOf: payload)
                case 4:
                    guard var whole = pending else { return nil }
                    whole.append(contentsOf: payload)
                    records.append(whole)
                    pending = nil
                default:
                    return nil
                }
                offset = end
            }
            blockStart += blockSize
        }
        // A chain of fragments without its last one at the end: a write that did not finish.
        return records
    }

    struct Reader {
        let bytes: [UInt8]
        var position = 0
        var atEnd: Bool { position >= bytes.count }

        mutating func varint64() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while position < bytes.count, shift <= 63 {
                let byte = bytes[position]
                position += 1
                result |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return result }
                shift += 7
            }
            return nil
        }

        mutating func varint32() -> UInt32? {
            guard let value = varint64(), value <= UInt64(UInt32.max) else { return nil }
            return UInt32(value)
        }

        mutating func slice() -> ArraySlice<UInt8>? {
            guard let length = varint32(), Int(length) <= bytes.count - position else { return nil }
            defer { position += Int(length) }
            return bytes[position..<(position + Int(length))]
        }
    }
}
