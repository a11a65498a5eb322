#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A record of a LevelDB write-ahead log (`NNNNNN.log`) that fails its checksum or cannot be
/// framed: what ``Database/damagedLogRecords(path:)`` finds.
///
/// LevelDB's recovery drops such a record together with the rest of its 32 KiB log block (or,
/// with ``Options/paranoidChecks``, refuses to open); its ``Database/repair(path:options:)`` reads
/// logs *without* checksums and keeps whatever still parses, possibly with damaged bytes.
public struct DamagedLogRecord: Sendable, Hashable, CustomStringConvertible {
    /// The log file's name inside the database directory, such as `000007.log`.
    public var file: String
    /// Where the damaged record starts in the file.
    public var offset: Int
    /// How many bytes, from `offset` to the end of the log block, LevelDB's recovery drops.
    public var droppedBytes: Int
    /// What is wrong: a checksum mismatch, a length running past the block, an unknown type.
    public var reason: String
    /// The keys the write batch in the record names, as far as its (damaged) bytes still parse;
    /// empty when the record does not begin a batch or its start is unreadable.
    public var keys: [[UInt8]]

    public var description: String {
        "\(file) at byte \(offset): \(reason) (\(droppedBytes) bytes, \(keys.count) key\(keys.count == 1 ? "" : "s") readable)"
    }
}

extension Database {
    /// Reads every write-ahead log of the database in directory `path` and returns its records
    /// that fail their CRC32C or cannot be framed, in file order. The database should be closed
    /// (an open one may be appending). A record cut off at the very end of a log — a writer that
    /// died mid-write — and zero-filled space are not damage, as in LevelDB's own recovery.
    ///
    /// ```swift
    /// for record in try Database.damagedLogRecords(path: "/tmp/app.ldb") { print(record) }
    /// ```
    ///
    /// - Throws: ``LevelDBError/Code/ioError`` if the directory or a log cannot be read.
    public static func damagedLogRecords(path: String) throws(LevelDBError) -> [DamagedLogRecord] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw LevelDBError(code: .ioError, message: "cannot list the directory: \(error)", path: path)
        }
        var damaged: [DamagedLogRecord] = []
        // LevelDB names its logs by a decimal file number: 000007.log.
        let logs = names.filter { name in
            let stem = name.utf8.dropLast(4)
            return name.hasSuffix(".log") && !stem.isEmpty && stem.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }.sorted()
        for name in logs {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
                throw LevelDBError(code: .ioError, message: "cannot read log file \(name)", path: path)
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

    static func damagedRecords(in bytes: [UInt8], file: String) -> [DamagedLogRecord] {
        var damaged: [DamagedLogRecord] = []
        var blockStart = 0
        scan: while blockStart < bytes.count {
            let blockEnd = min(blockStart + blockSize, bytes.count)
            let atEnd = blockEnd == bytes.count
            var offset = blockStart
            while blockEnd - offset >= headerSize {
                let stored = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
                let length = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8
                let type = bytes[offset + 6]
                func damage(_ reason: String, keys: [[UInt8]] = []) {
                    damaged.append(DamagedLogRecord(file: file, offset: offset, droppedBytes: blockEnd - offset, reason: reason, keys: keys))
                }
                if offset + headerSize + length > blockEnd {
                    // Cut off by the end of the file: a writer that died mid-write, not damage.
                    if atEnd { break scan }
                    damage("the record's length runs past its block")
                    break
                }
                // Zero-filled (preallocated) space: LevelDB skips the rest of the block silently.
                if type == 0 && length == 0 { break }
                let payload = bytes[(offset + headerSize)..<(offset + headerSize + length)]
                if mask(crc32c([type] + payload)) != stored {
                    damage("the record fails its checksum", keys: type == 1 || type == 2 ? batchKeys(payload) : [])
                    break
                }
                if !(1...4).contains(type) {
                    damage("the record has unknown type \(type)")
                    break
                }
                offset += headerSize + length
            }
            blockStart += blockSize
        }
        return damaged
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

    /// CRC32C (Castagnoli), as LevelDB checksums its log records and blocks.
    static func crc32c(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
