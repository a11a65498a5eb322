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
    /// write and silently drop it and everything after it. So are zeroed bytes with complete
    /// records after them in their block, which LevelDB takes for preallocated space and skips.
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
            return name.hasSuffix(".log") && !stem.isEmpty
                && stem.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }.sorted()
    }

    /// The record header at `offset`: stored (masked) checksum, payload length, type.
    static func header(_ bytes: [UInt8], at offset: Int) -> (crc: UInt32, length: Int, type: UInt8) {
        let crc =
            UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(
                bytes[offset + 3]) << 24
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
                if type == 1 || type == 2 {
                    keys += batchKeys(bytes[(offset + headerSize)..<(offset + headerSize + length)])
                }
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
                        // a write cut off by a crash
                        guard let matched = damagedTail(bytes, at: offset) else { break scan }
                        let own =
                            matched > 0 ? batchKeys(bytes[(offset + headerSize)..<(offset + headerSize + matched)]) : []
                        damaged.append(
                            DamagedLogRecord(
                                file: file, offset: offset, droppedBytes: bytes.count - offset,
                                reason:
                                    "the record's length runs past the end of the log, but it is not a write cut off by a crash",
                                keys: own + keysOfValidRecords(bytes, in: (offset + 1)..<bytes.count)))
                        break scan
                    }
                    damaged.append(
                        DamagedLogRecord(
                            file: file, offset: offset, droppedBytes: blockEnd - offset,
                            reason: "the record's length runs past its block",
                            keys: keysOfValidRecords(bytes, in: (offset + 1)..<blockEnd)))
                    break
                }
                // Zero-filled (preallocated) space: LevelDB skips the rest of the block silently,
                // which is damage when complete records follow the zeroes.
                if type == 0 && length == 0 {
                    if zeroedRecords(bytes, at: offset, blockEnd: blockEnd) {
                        damaged.append(
                            DamagedLogRecord(
                                file: file, offset: offset, droppedBytes: blockEnd - offset,
                                reason: "zeroed bytes hide complete records after them in their block",
                                keys: keysOfValidRecords(bytes, in: offset..<blockEnd)))
                    }
                    break
                }
                let end = offset + headerSize + length
                let payload = bytes[(offset + headerSize)..<end]
                if mask(crc32c([type] + payload)) != stored || !(1...4).contains(type) {
                    let reason =
                        (1...4).contains(type) ? "the record fails its checksum" : "the record has unknown type \(type)"
                    let own = type == 1 || type == 2 ? batchKeys(payload) : []
                    // If a valid record (or the block's end) follows, only this record is damaged;
                    // otherwise the framing is lost and the intact records dropped with it count too.
                    let framed =
                        blockEnd - end < headerSize || isValidRecord(bytes, at: end, end: blockEnd)
                        || (header(bytes, at: end).type == 0 && header(bytes, at: end).length == 0)
                    damaged.append(
                        DamagedLogRecord(
                            file: file, offset: offset, droppedBytes: blockEnd - offset, reason: reason,
                            keys: framed ? own : own + keysOfValidRecords(bytes, in: end..<blockEnd)))
                    if !framed { break }
                }
                offset = end
            }
            blockStart += blockSize
        }
        return damaged
    }

    /// The logical records of a log read the way LevelDB's own reader reads a MANIFEST, with
    /// checksums: whole records and FIRST…LAST chains; zero-filled space skips the rest of its
    /// block and a record cut off at the very end is a write that never completed. Anything else
    /// that does not check out ends the read with a description of the problem.
    static func strictRecords(_ bytes: [UInt8]) -> ([[UInt8]], problem: String?) {
        var records: [[UInt8]] = []
        var pending: [UInt8]? = nil
        var blockStart = 0
        while blockStart < bytes.count {
            let blockEnd = min(blockStart + blockSize, bytes.count)
            var offset = blockStart
            while blockEnd - offset >= headerSize {
                let (_, length, type) = header(bytes, at: offset)
                if type == 0 && length == 0 { break }
                if offset + headerSize + length > blockEnd {
                    if blockEnd == bytes.count { return (records, nil) }  // cut off at the end
                    return (records, "the record at byte \(offset) runs past its block")
                }
                guard isValidRecord(bytes, at: offset, end: blockEnd) else {
                    return (records, "the record at byte \(offset) fails its checksum")
                }
                let payload = bytes[(offset + headerSize)..<(offset + headerSize + length)]
                switch type {
                case 1:
                    if pending != nil {
                        return (records, "a chain of fragments ends without its last fragment at byte \(offset)")
                    }
                    records.append(Array(payload))
                case 2:
                    if pending != nil {
                        return (records, "a chain of fragments ends without its last fragment at byte \(offset)")
                    }
                    pending = Array(payload)
                case 3:
                    guard pending != nil else {
                        return (records, "a middle fragment without its first at byte \(offset)")
                    }
                    pending? += payload
                default:
                    guard let first = pending else {
                        return (records, "a last fragment without its first at byte \(offset)")
                    }
                    records.append(first + payload)
                    pending = nil
                }
                offset += headerSize + length
            }
            blockStart += blockSize
        }
        return (records, nil)
    }

    /// A write batch found in a log whose record (or every fragment of it) passes its checksum:
    /// an acknowledged write that can be trusted byte for byte, wherever the log's framing around
    /// it is damaged.
    struct VerifiedBatch {
        var file: String
        /// Where its record (its first fragment) starts.
        var offset: Int
        var batch: LoggedBatch
        /// Whether LevelDB's reader, following the framing, would miss it (it lies after damage in
        /// its block, or its own length field is damaged).
        var outsideFraming: Bool
    }

    /// Every checksum-valid write batch of a log, including those LevelDB's reader loses: records
    /// after a damaged record, a zeroed stretch or a broken length in the same block are found by
    /// searching byte by byte for a valid record, and a record whose length field is damaged is
    /// recognised when its checksum matches a shorter length. FIRST…LAST chains are joined when
    /// their fragments follow each other block by block, as LevelDB writes them.
    static func verifiedBatches(in bytes: [UInt8], file: String) -> [VerifiedBatch] {
        validLogicalRecords(bytes).compactMap { record in
            LoggedBatch(record.payload[...]).map {
                VerifiedBatch(file: file, offset: record.offset, batch: $0, outsideFraming: record.outsideFraming)
            }
        }
    }

    /// Every logical record of a log (a whole record, or a FIRST…LAST chain joined) whose every
    /// fragment passes its checksum, wherever the framing around it is damaged (see
    /// ``verifiedBatches(in:file:)``): where it starts, its payload, and whether LevelDB's reader,
    /// following the framing, would miss it.
    static func validLogicalRecords(_ bytes: [UInt8]) -> [(offset: Int, payload: [UInt8], outsideFraming: Bool)] {
        struct Physical {
            var offset: Int
            var type: UInt8
            var payload: Range<Int>
            var blockStart: Int
            var outsideFraming: Bool
        }
        var physical: [Physical] = []
        var blockStart = 0
        while blockStart < bytes.count {
            let blockEnd = min(blockStart + blockSize, bytes.count)
            var offset = blockStart
            var framed = true
            while blockEnd - offset >= headerSize {
                let (_, length, type) = header(bytes, at: offset)
                if isValidRecord(bytes, at: offset, end: blockEnd) {
                    physical.append(
                        Physical(
                            offset: offset, type: type, payload: (offset + headerSize)..<(offset + headerSize + length),
                            blockStart: blockStart, outsideFraming: !framed))
                    offset += headerSize + length
                    continue
                }
                if framed {
                    if type == 0 && length == 0 && bytes[offset..<blockEnd].allSatisfy({ $0 == 0 }) { break }
                    // A record whose length is damaged: its checksum matches the length it had.
                    if (1...4).contains(type), let matched = checksumPrefix(bytes, at: offset, end: blockEnd) {
                        physical.append(
                            Physical(
                                offset: offset, type: type,
                                payload: (offset + headerSize)..<(offset + headerSize + matched),
                                blockStart: blockStart, outsideFraming: true))
                        offset += headerSize + matched
                        framed = false
                        continue
                    }
                    framed = false
                }
                offset += 1
            }
            blockStart += blockSize
        }
        var records: [(offset: Int, payload: [UInt8], outsideFraming: Bool)] = []
        var chain: (first: Physical, payload: [UInt8], outside: Bool, lastBlock: Int)? = nil
        for record in physical {
            switch record.type {
            case 1:
                chain = nil
                records.append((record.offset, Array(bytes[record.payload]), record.outsideFraming))
            case 2:
                // A first fragment fills its block to the end.
                chain =
                    record.payload.upperBound == min(record.blockStart + blockSize, bytes.count)
                    ? (record, Array(bytes[record.payload]), record.outsideFraming, record.blockStart) : nil
            default:
                guard let current = chain, record.offset == current.lastBlock + blockSize else {
                    chain = nil
                    continue
                }
                let payload = current.payload + bytes[record.payload]
                if record.type == 3 {
                    chain =
                        record.payload.upperBound == min(record.blockStart + blockSize, bytes.count)
                        ? (current.first, payload, current.outside || record.outsideFraming, record.blockStart) : nil
                } else {
                    chain = nil
                    records.append((current.first.offset, payload, current.outside || record.outsideFraming))
                }
            }
        }
        return records
    }

    /// For a record at `offset` that is not valid as framed: the payload length its stored
    /// checksum matches, if a shorter or longer length within the block (or the file) matches it.
    static func checksumPrefix(_ bytes: [UInt8], at offset: Int, end: Int) -> Int? {
        let (stored, _, type) = header(bytes, at: offset)
        var crc = update(0xFFFF_FFFF, type)
        var count = 0
        for byte in bytes[(offset + headerSize)..<end] {
            crc = update(crc, byte)
            count += 1
            if mask(crc ^ 0xFFFF_FFFF) == stored { return count }
        }
        return nil
    }

    /// Whether a checksum-valid record starts anywhere in `range` (searched byte by byte).
    static func containsValidRecord(_ bytes: [UInt8], in range: Range<Int>) -> Bool {
        var offset = range.lowerBound
        while offset + headerSize <= range.upperBound {
            if isValidRecord(bytes, at: offset, end: min((offset / blockSize + 1) * blockSize, range.upperBound)) {
                return true
            }
            offset += 1
        }
        return false
    }

    /// Whether zero-filled bytes at `offset`, which LevelDB's reader takes for preallocated space
    /// and skips to the end of the block without a word, hide complete records after them.
    static func zeroedRecords(_ bytes: [UInt8], at offset: Int, blockEnd: Int) -> Bool {
        guard let firstNonZero = bytes[offset..<blockEnd].firstIndex(where: { $0 != 0 }) else { return false }
        return containsValidRecord(bytes, in: max(offset + 1, firstNonZero - headerSize)..<blockEnd)
    }

    /// Finds the damage in the logs of the database at `path` that LevelDB's recovery drops
    /// silently, even with paranoid checks: a record of a log's last block whose length runs past
    /// the end of the file although it is not a write cut off by a crash (see
    /// ``damagedTail(_:at:)``), and zeroed bytes that hide complete records after them in their
    /// block. Reads record headers only, unless one of these turns up. Returns a description of
    /// the first such damage, or `nil`.
    static func silentlyDroppedRecords(path: String) -> String? {
        guard let logs = try? logFiles(path) else { return nil }
        for name in logs {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else { continue }
            let bytes = [UInt8](data)
            var blockStart = 0
            blocks: while blockStart < bytes.count {
                let blockEnd = min(blockStart + blockSize, bytes.count)
                let lastPartial = blockEnd == bytes.count && blockEnd - blockStart < blockSize
                var offset = blockStart
                var previous: Int? = nil
                while blockEnd - offset >= headerSize {
                    let (_, length, type) = header(bytes, at: offset)
                    if type == 0 && length == 0 {
                        // Zeroes reached through a damaged record are that record's damage, which
                        // LevelDB reports itself (its checksum fails).
                        if let previous, !isValidRecord(bytes, at: previous, end: blockEnd) { break }
                        if zeroedRecords(bytes, at: offset, blockEnd: blockEnd) {
                            return
                                "\(name) at byte \(offset): zeroed bytes hide complete records after them in their block"
                        }
                        break
                    }
                    if offset + headerSize + length > blockEnd {
                        if lastPartial, damagedTail(bytes, at: offset) != nil {
                            return
                                "\(name) at byte \(offset): the record's length runs past the end of the log, but it is not a write cut off by a crash"
                        }
                        break  // in a full block LevelDB reports it itself
                    }
                    previous = offset
                    offset += headerSize + length
                }
                blockStart += blockSize
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
