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

/// A record of a LevelDB write-ahead log (`NNNNNN.log`) that fails its checksum or cannot be
/// framed: what ``Database/damagedLogRecords(path:)`` finds.
///
/// LevelDB's recovery drops such a record together with the rest of its 32 KiB log block (or,
/// with ``Options/paranoidChecks``, refuses to open); its ``Database/repair(path:options:)`` reads
/// logs *without* checksums and keeps whatever still parses, possibly with damaged bytes.
///
/// ```swift
/// for record in try Database.damagedLogRecords(path: path) {
///     print(record.file, record.offset, record.reason, record.keys.count)
/// }
/// ```
public struct DamagedLogRecord: Sendable, Hashable, CustomStringConvertible {
    /// The log file's name inside the database directory, such as `000007.log`.
    public var file: String
    /// Where the damaged record starts in the file.
    public var offset: Int
    /// How many bytes, from `offset` on, LevelDB's recovery drops because of it.
    public var droppedBytes: Int
    /// What is wrong: a checksum mismatch, a length running past its block, an unknown type.
    public var reason: String
    /// The keys written by the damaged record's batch — and, when the damage broke the log's
    /// framing, by the intact batches in the bytes dropped with it — as far as they still parse.
    public var keys: [[UInt8]]

    public var description: String {
        "\(file) at byte \(offset): \(reason) (\(droppedBytes) bytes dropped by recovery, \(keys.count) key\(keys.count == 1 ? "" : "s") readable)"
    }
}

extension Database {
    /// Reads every write-ahead log of the database in directory `path` and returns its records
    /// that fail their CRC32C or cannot be framed, in file order. The database should be closed
    /// (an open one may be appending). A record cut off at the very end of a log — a writer that
    /// died mid-write — and zero-filled space are not damage, as in LevelDB's own recovery; but a
    /// record whose length runs past the end of the log although complete records follow it (or
    /// although its checksum matches a shorter length) is: LevelDB would take it for a cut-off
    /// write and silently drop it and everything after it.
    ///
    /// ```swift
    /// for record in try Database.damagedLogRecords(path: "/tmp/app.ldb") { print(record) }
    /// ```
    ///
    /// - Throws: ``LevelDBError/Code/ioError`` if the directory or a log cannot be read.
    public static func damagedLogRecords(path: String) throws(LevelDBError) -> [DamagedLogRecord] {
        var damaged: [DamagedLogRecord] = []
        for name in try LogScanner.logFiles(path) {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
                throw LevelDBError(code: .ioError, message: "IO error: cannot read log file \(name)", path: path)
            }
            damaged += LogScanner.damagedRecords(in: [UInt8](data), file: name)
        }
        return damaged
    }
}

/// LevelDB's log format (its `doc/log_format.md`): 32 KiB blocks of records, each a 7-byte
/// header — masked CRC32C of type and payload (u32 LE), payload length (u16 LE), type — and the
/// payload. A write batch is one record, or a FIRST, MIDDLE…, LAST chain of fragments.
enum LogScanner {
    static let blockSize = 32768
    static let headerSize = 7

    /// The names of the write-ahead logs in `path`: a decimal file number and `.log`.
    static func logFiles(_ path: String) throws(LevelDBError) -> [String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw LevelDBError(code: .ioError, message: "IO error: cannot list the directory: \(error)", path: path)
        }
        return names.filter { name in
            let stem = name.utf8.dropLast(4)
            return name.hasSuffix(".log") && !stem.isEmpty && stem.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }.sorted()
    }

    /// The record header at `offset`: stored (masked) checksum, payload length, type.
    static func header(_ bytes: [UInt8], at offset: Int) -> (crc: UInt32, length: Int, type: UInt8) {
        let crc = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
        return (crc, Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8, bytes[offset + 6])
    }

    /// Whether a whole, checksum-valid record of a known type starts at `offset` and ends by `end`.
    static func isValidRecord(_ bytes: [UInt8], at offset: Int, end: Int) -> Bool {
        guard end - offset >= headerSize else { return false }
        let (crc, length, type) = header(bytes, at: offset)
        guard (1...4).contains(type), offset + headerSize + length <= end else { return false }
        return mask(crc32c([type] + bytes[(offset + headerSize)..<(offset + headerSize + length)])) == crc
    }

    /// The keys of the batches that begin in checksum-valid records found anywhere in `range`
    /// (searched byte by byte, since the framing there cannot be trusted).
    static func keysOfValidRecords(_ bytes: [UInt8], in range: Range<Int>) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        var offset = range.lowerBound
        while offset + headerSize <= range.upperBound {
            let blockEnd = min((offset / blockSize + 1) * blockSize, range.upperBound)
            if isValidRecord(bytes, at: offset, end: blockEnd) {
                let (_, length, type) = header(bytes, at: offset)
                if type == 1 || type == 2 { keys += batchKeys(bytes[(offset + headerSize)..<(offset + headerSize + length)]) }
                offset += headerSize + length
            } else {
                offset += 1
            }
        }
        return keys
    }

    /// For a record at `offset` whose length runs past the end of the file: whether that is
    /// damage rather than a write cut off by a crash — complete records follow it, or its stored
    /// checksum matches a prefix of the bytes that are there (so the length is what is wrong).
    /// Returns the payload length its checksum matches (0 if none) when it is damage.
    static func damagedTail(_ bytes: [UInt8], at offset: Int) -> Int? {
        let (stored, _, type) = header(bytes, at: offset)
        var crc = update(0xFFFF_FFFF, type)
        var matched: Int?
        for (count, byte) in bytes[(offset + headerSize)...].enumerated() {
            crc = update(crc, byte)
            if mask(crc ^ 0xFFFF_FFFF) == stored {
                matched = count + 1
                break
            }
        }
        if let matched { return matched }
        var next = offset + 1
        while next + headerSize <= bytes.count {
            if isValidRecord(bytes, at: next, end: min((next / blockSize + 1) * blockSize, bytes.count)) { return 0 }
            next += 1
        }
        return nil
    }

    static func damagedRecords(in bytes: [UInt8], file: String) -> [DamagedLogRecord] {
        var damaged: [DamagedLogRecord] = []
        var blockStart = 0
        scan: while blockStart < bytes.count {
            let blockEnd = min(blockStart + blockSize, bytes.count)
            // LevelDB treats an over-long record as a cut-off write only in the file's last,
            // partial block; in a full block it is damage.
            let lastPartial = blockEnd == bytes.count && blockEnd - blockStart < blockSize
            var offset = blockStart
            while blockEnd - offset >= headerSize {
                let (stored, length, type) = header(bytes, at: offset)
                if offset + headerSize + length > blockEnd {
                    if lastPartial {
                        guard let matched = damagedTail(bytes, at: offset) else { break scan }  // a write cut off by a crash
                        let own = matched > 0 ? batchKeys(bytes[(offset + headerSize)..<(offset + headerSize + matched)]) : []
                        damaged.append(DamagedLogRecord(
                            file: file, offset: offset, droppedBytes: bytes.count - offset,
                            reason: "the record's length runs past the end of the log, but it is not a write cut off by a crash",
                            keys: own + keysOfValidRecords(bytes, in: (offset + 1)..<bytes.count)))
                        break scan
                    }
                    damaged.append(DamagedLogRecord(file: file, offset: offset, droppedBytes: blockEnd - offset,
                                                    reason: "the record's length runs past its block",
                                                    keys: keysOfValidRecords(bytes, in: (offset + 1)..<blockEnd)))
                    break
                }
                // Zero-filled (preallocated) space: LevelDB skips the rest of the block silently.
                if type == 0 && length == 0 { break }
                let end = offset + headerSize + length
                let payload = bytes[(offset + headerSize)..<end]
                if mask(crc32c([type] + payload)) != stored || !(1...4).contains(type) {
                    let reason = (1...4).contains(type) ? "the record fails its checksum" : "the record has unknown type \(type)"
                    let own = type == 1 || type == 2 ? batchKeys(payload) : []
                    // If a valid record (or the block's end) follows, only this record is damaged;
                    // otherwise the framing is lost and the intact records dropped with it count too.
                    let framed = blockEnd - end < headerSize || isValidRecord(bytes, at: end, end: blockEnd)
                        || (header(bytes, at: end).type == 0 && header(bytes, at: end).length == 0)
                    damaged.append(DamagedLogRecord(file: file, offset: offset, droppedBytes: blockEnd - offset, reason: reason,
                                                    keys: framed ? own : own + keysOfValidRecords(bytes, in: end..<blockEnd)))
                    if !framed { break }
                }
                offset = end
            }
            blockStart += blockSize
        }
        return damaged
    }

    /// Checks only the last, partial block of each log of the database at `path` for a record
    /// that LevelDB's recovery would take for a write cut off by a crash although it is damaged
    /// (see ``damagedTail(_:at:)``), which it drops silently even with paranoid checks. Cheap
    /// enough for every open: at most 32 KiB per log, record headers only unless one runs past
    /// the end. Returns a description of the first such record, or `nil`.
    static func silentlyDroppedTail(path: String) -> String? {
        guard let logs = try? logFiles(path) else { return nil }
        for name in logs {
            let fd = open(path + "/" + name, O_RDONLY)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { continue }
            let size = Int(info.st_size)
            let tailStart = size - size % blockSize
            guard size > tailStart else { continue }
            var tail = [UInt8](repeating: 0, count: size - tailStart)
            let read = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(tailStart)) }
            guard read == tail.count else { continue }
            var offset = 0
            while tail.count - offset >= headerSize {
                let (_, length, type) = header(tail, at: offset)
                if type == 0 && length == 0 { break }
                if offset + headerSize + length > tail.count {
                    if damagedTail(tail, at: offset) != nil {
                        return "\(name) at byte \(tailStart + offset): the record's length runs past the end of the log, but it is not a write cut off by a crash"
                    }
                    break
                }
                offset += headerSize + length
            }
        }
        return nil
    }

    /// The keys a write batch names (8-byte sequence, 4-byte count, then per entry a tag — 1 put,
    /// 0 delete — and length-prefixed key and value), read until the bytes stop making sense.
    static func batchKeys(_ batch: ArraySlice<UInt8>) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        var position = batch.startIndex + 12
        func varint() -> Int? {
            var result = 0
            var shift = 0
            while position < batch.endIndex, shift <= 28 {
                let byte = batch[position]
                position += 1
                result |= Int(byte & 0x7F) << shift
                if byte < 0x80 { return result }
                shift += 7
            }
            return nil
        }
        func slice() -> ArraySlice<UInt8>? {
            guard let length = varint(), length <= batch.endIndex - position else { return nil }
            defer { position += length }
            return batch[position..<(position + length)]
        }
        while position < batch.endIndex {
            let tag = batch[position]
            position += 1
            guard tag <= 1, let key = slice() else { break }
            if tag == 1 { guard slice() != nil else { break } }
            keys.append(Array(key))
        }
        return keys
    }

    static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
    }

    static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        return crc
    }

    @inline(__always)
    static func update(_ crc: UInt32, _ byte: UInt8) -> UInt32 {
        table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
    }

    /// CRC32C (Castagnoli), as LevelDB checksums its log records and blocks.
    static func crc32c(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = update(crc, byte) }
        return crc ^ 0xFFFF_FFFF
    }
}
