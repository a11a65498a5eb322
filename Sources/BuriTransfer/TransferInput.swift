import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where an import or restore reads its JSON Lines: a file, standard input, or an open file
/// handle. It is read line by line in bounded memory, never whole; an input that is not a regular
/// file (a pipe) is first copied to an unlinked temporary file, so that its size is known and it
/// can be read twice.
///
/// ```swift
/// try db.importJSONLines(from: .file("people.jsonl"), into: "Person")
/// try db.importJSONLines(from: .standardInput, into: "Person")
/// ```
public struct TransferInput: Sendable, Hashable {
    enum Source: Sendable, Hashable {
        case path(String)
        case standardInput
        case descriptor(Int32)
    }

    let source: Source

    /// The file at `path`.
    ///
    /// ```swift
    /// let input = TransferInput.file("/tmp/people.jsonl")
    /// ```
    public static func file(_ path: String) -> TransferInput { TransferInput(source: .path(path)) }

    /// The file at `url` (a file URL).
    ///
    /// ```swift
    /// let input = TransferInput.file(URL(fileURLWithPath: "people.jsonl"))
    /// ```
    public static func file(_ url: URL) -> TransferInput { TransferInput(source: .path(url.path)) }

    /// The process's standard input.
    ///
    /// ```swift
    /// try db.importJSONLines(from: .standardInput, into: "Person")
    /// ```
    public static let standardInput = TransferInput(source: .standardInput)

    /// An open file handle, read from its current position; it must stay open while it is read,
    /// and is not closed.
    ///
    /// ```swift
    /// let handle = try FileHandle(forReadingFrom: url)
    /// defer { try? handle.close() }
    /// try db.importJSONLines(from: .fileHandle(handle), into: "Person")
    /// ```
    public static func fileHandle(_ handle: FileHandle) -> TransferInput {
        TransferInput(source: .descriptor(handle.fileDescriptor))
    }
}

/// A JSON Lines input read line by line in blocks, never whole; it can be read again from the
/// start. Standard input that is not a regular file (a pipe) is first copied to an unlinked
/// temporary file, so its size is known and a second pass can read it.
final class LineReader {
    private let fd: Int32
    private let owned: Bool
    /// The input's size in bytes.
    let size: Int
    /// The bytes of the lines returned so far (their newlines included).
    private(set) var consumed = 0
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private static let blockSize = 1 << 20

    init(_ input: TransferInput) throws(TransferError) {
        let source: Int32
        /// Whether `source` is this reader's to close.
        let opened: Bool
        let what: String
        switch input.source {
        case .standardInput:
            source = 0
            opened = false
            what = "standard input"
        case .descriptor(let descriptor):
            source = descriptor
            opened = false
            what = "the input"
        case .path(let name):
            source = open(name, O_RDONLY)
            guard source >= 0 else {
                let reason =
                    errno == ENOENT
                    ? "there is no such file" : "it cannot be read (\(String(cString: strerror(errno))))"
                throw TransferError(.failure, "cannot read '\(name)': \(reason)")
            }
            opened = true
            what = "'\(name)'"
        }
        var info = stat()
        if fstat(source, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            fd = source
            owned = opened
            size = Int(info.st_size) - max(0, Int(lseek(source, 0, SEEK_CUR)))
            return
        }
        // A pipe (or another stream): copied to an unlinked temporary file.
        defer { if opened { _ = closeDescriptor(source) } }
        var template = Array((NSTemporaryDirectory() + "/buri-import-XXXXXX").utf8CString)
        let spool = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard spool >= 0 else {
            throw TransferError(
                .failure,
                "cannot make a temporary file for \(what) in \(NSTemporaryDirectory()): \(String(cString: strerror(errno))); set TMPDIR, or give the input as a regular file"
            )
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var block = [UInt8](repeating: 0, count: Self.blockSize)
        var total = 0
        while true {
            let got = block.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else {
                let reason = String(cString: strerror(errno))
                _ = closeDescriptor(spool)
                throw TransferError(.failure, "cannot read \(what): \(reason); nothing was imported")
            }
            if got == 0 { break }
            var written = 0
            while written < got {
                let put = block.withUnsafeBytes { write(spool, $0.baseAddress! + written, got - written) }
                if put < 0, errno == EINTR { continue }
                guard put > 0 else {
                    let reason = String(cString: strerror(errno))
                    _ = closeDescriptor(spool)
                    throw TransferError(
                        .failure,
                        "cannot copy \(what) to a temporary file in \(NSTemporaryDirectory()): \(reason); free space there (or set TMPDIR), or give the input as a regular file; nothing was imported"
                    )
                }
                written += put
            }
            total += got
        }
        fd = spool
        owned = true
        size = total
        start = 0
    }

    private var start: off_t = -1

    /// Goes back to the start of the input.
    func rewind() throws(TransferError) {
        if start < 0 { start = lseek(fd, 0, SEEK_CUR) }
        guard lseek(fd, start, SEEK_SET) >= 0 else {
            throw TransferError(.failure, "cannot read the input again: \(String(cString: strerror(errno)))")
        }
        buffer = []
        position = 0
        scanned = 0
        consumed = 0
        atEnd = false
    }

    /// The next line without its newline, or nil at the end.
    ///
    /// Linear in the input, however long a line is: the search for the newline goes on from
    /// where the last block's search ended (never over the same bytes again), blocks are read
    /// straight into the buffer's free capacity, and consumed bytes are dropped only once they
    /// are most of the buffer. Memory is the longest line plus a block.
    func nextLine() throws(TransferError) -> [UInt8]? {
        while true {
            let newline: Int? = buffer.withUnsafeBufferPointer { bytes in
                guard scanned < bytes.count, let base = bytes.baseAddress else { return nil }
                guard let found = memchr(base + scanned, 0x0A, bytes.count - scanned) else {
                    bytesSearched += bytes.count - scanned
                    return nil
                }
                let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                bytesSearched += at + 1 - scanned
                return at
            }
            if let newline {
                consumed += newline + 1 - position
                if newline - position > 4 * Self.blockSize {
                    // A long line: the buffer itself becomes the line (no second copy of it), and
                    // what follows it starts a new buffer.
                    let rest = Array(buffer[(newline + 1)...])
                    buffer.removeSubrange(newline...)
                    buffer.removeSubrange(0..<position)
                    let line = buffer
                    buffer = rest
                    position = 0
                    scanned = 0
                    return line
                }
                let line = Array(buffer[position..<newline])
                position = newline + 1
                scanned = position
                releaseIfLarge()
                return line
            }
            scanned = buffer.count
            if atEnd {
                guard position < buffer.count else { return nil }
                let line = Array(buffer[position...])
                consumed += buffer.count - position
                position = buffer.count
                scanned = position
                releaseIfLarge()
                return line
            }
            // Drop the consumed bytes once they are at least half the buffer (each byte is moved
            // a bounded number of times), then read a block into the free capacity.
            if position > 0, position * 2 >= buffer.count {
                buffer.removeSubrange(0..<position)
                scanned -= position
                position = 0
            }
            var got = 0
            var failure: Int32 = 0
            let readCount = Self.blockSize
            let tail = [UInt8](unsafeUninitializedCapacity: readCount) { chunk, initialized in
                repeat {
                    got = read(fd, chunk.baseAddress, readCount)
                } while got < 0 && errno == EINTR
                if got < 0 { failure = errno }
                initialized = max(0, got)
            }
            guard got >= 0 else {
                throw TransferError(
                    .failure, "cannot read the input: \(String(cString: strerror(failure))); nothing was imported")
            }
            buffer.append(contentsOf: tail)
            if got == 0 { atEnd = true }
        }
    }

    /// Bytes of the buffer already searched for a newline (from `position` on).
    private var scanned = 0

    /// Every byte the newline search has looked at, over all passes: what makes reading linear
    /// measurable without a clock (`buri import --debug-peak-memory` prints it; a test bounds it
    /// by the input's size).
    private(set) var bytesSearched = 0

    /// After a long line, gives its memory back instead of keeping a buffer that large.
    private func releaseIfLarge() {
        guard buffer.capacity > 4 * Self.blockSize, buffer.count - position <= Self.blockSize else { return }
        buffer = Array(buffer[position...])
        scanned -= position
        position = 0
    }

    /// Closes the input (a temporary copy is gone with it). Called once, by the owner.
    func release() {
        if owned, !released { _ = closeDescriptor(fd) }
        released = true
    }

    private var released = false

    deinit { release() }
}

private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
