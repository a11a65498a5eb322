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

// Readers of LevelDB's own file formats, for salvaging a damaged database without LevelDB:
// table files (`doc/table_format.md`), the MANIFEST's version edits (`db/version_edit.cc`) and
// write batches (`db/write_batch.cc`). Each reads bytes already in memory and never traps on
// damaged input: what does not parse is reported, never guessed.

/// A cursor over bytes with LevelDB's integer encodings: fixed little-endian and varints.
struct ByteReader {
    let bytes: ArraySlice<UInt8>
    var position: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.position = bytes.startIndex
    }

    var isAtEnd: Bool { position >= bytes.endIndex }
    var remaining: Int { bytes.endIndex - position }

    mutating func byte() -> UInt8? {
        guard position < bytes.endIndex else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func varint64() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while shift <= 63, let byte = byte() {
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    mutating func varint32() -> Int? {
        guard let value = varint64(), value <= UInt64(UInt32.max) else { return nil }
        return Int(value)
    }

    mutating func fixed32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var value: UInt32 = 0
        for i in 0..<4 { value |= UInt32(bytes[position + i]) << (8 * UInt32(i)) }
        position += 4
        return value
    }

    mutating func fixed64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[position + i]) << (8 * UInt64(i)) }
        position += 8
        return value
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    /// A varint32 length, then that many bytes.
    mutating func lengthPrefixed() -> ArraySlice<UInt8>? {
        guard let length = varint32() else { return nil }
        return take(length)
    }
}

/// LevelDB's internal key: the user key, then 8 bytes little-endian holding
/// `sequence << 8 | type` (type 1 a value, 0 a deletion).
struct InternalKey: Hashable {
    var userKey: [UInt8]
    var sequence: UInt64
    var isDeletion: Bool

    init?(_ bytes: ArraySlice<UInt8>) {
        guard bytes.count >= 8 else { return nil }
        var reader = ByteReader(bytes[(bytes.endIndex - 8)...])
        guard let trailer = reader.fixed64(), trailer & 0xFF <= 1 else { return nil }
        userKey = Array(bytes[..<(bytes.endIndex - 8)])
        sequence = trailer >> 8
        isDeletion = trailer & 0xFF == 0
    }
}

// MARK: - Snappy

/// Snappy decompression (the format of `format_description.txt` in Google's snappy): the
/// uncompressed length as a varint, then literals and back-references. LevelDB compresses table
/// blocks with it by default.
enum Snappy {
    /// The decompressed bytes, or `nil` if `input` is not valid Snappy data. With `lenient`, what
    /// could be decoded before the first inconsistency is returned instead of `nil` (for reading
    /// what is left of a damaged block).
    static func decompress(_ input: ArraySlice<UInt8>, lenient: Bool = false) -> [UInt8]? {
        var reader = ByteReader(input)
        guard let declared = reader.varint64() else { return lenient ? [] : nil }
        // A damaged length must not make us allocate gigabytes: a block holds at most a few MiB.
        let limit = min(Int(clamping: declared), max(input.count * 32, 1 << 16))
        var output: [UInt8] = []
        output.reserveCapacity(limit)
        func fail() -> [UInt8]? { lenient ? output : nil }
        while let tag = reader.byte() {
            switch tag & 0x03 {
            case 0:  // literal
                var length = Int(tag >> 2)
                if length >= 60 {
                    let extra = length - 59
                    guard reader.remaining >= extra else { return fail() }
                    length = 0
                    for i in 0..<extra { length |= Int(reader.bytes[reader.position + i]) << (8 * i) }
                    reader.position += extra
                }
                length += 1
                guard output.count + length <= limit, let literal = reader.take(length) else { return fail() }
                output.append(contentsOf: literal)
            default:
                let length: Int
                let offset: Int
                switch tag & 0x03 {
                case 1:
                    guard let next = reader.byte() else { return fail() }
                    length = Int((tag >> 2) & 0x07) + 4
                    offset = Int(tag >> 5) << 8 | Int(next)
                case 2:
                    guard reader.remaining >= 2 else { return fail() }
                    length = Int(tag >> 2) + 1
                    offset = Int(reader.bytes[reader.position]) | Int(reader.bytes[reader.position + 1]) << 8
                    reader.position += 2
                default:
                    guard let value = reader.fixed32() else { return fail() }
                    length = Int(tag >> 2) + 1
                    offset = Int(value)
                }
                guard offset > 0, offset <= output.count, output.count + length <= limit else { return fail() }
                let start = output.count - offset
                for i in 0..<length { output.append(output[start + i]) }
            }
        }
        guard output.count == Int(clamping: declared) else { return fail() }
        return output
    }
}

// MARK: - Blocks and tables

/// A block handle: where a block's contents start in the table file and how long they are
/// (without the 5-byte trailer of compression type and checksum).
struct BlockHandle: Hashable {
    var offset: Int
    var size: Int

    static func read(_ reader: inout ByteReader) -> BlockHandle? {
        guard let offset = reader.varint64(), let size = reader.varint64(),
            offset <= UInt64(Int.max / 2), size <= UInt64(Int.max / 2)
        else { return nil }
        return BlockHandle(offset: Int(offset), size: Int(size))
    }
}

/// One key-value entry of a block.
struct BlockEntry {
    var key: [UInt8]
    var value: ArraySlice<UInt8>
}

enum BlockParser {
    /// The entries of a block's (decompressed) contents: prefix-compressed keys, then the restart
    /// array and its length. Strict: `nil` if anything does not parse.
    static func entries(_ contents: [UInt8]) -> [BlockEntry]? {
        guard contents.count >= 4 else { return nil }
        var tail = ByteReader(contents[(contents.count - 4)...])
        guard let restarts = tail.fixed32(), Int(restarts) <= (contents.count - 4) / 4 else { return nil }
        let end = contents.count - 4 - 4 * Int(restarts)
        let (entries, stop) = parse(contents[..<end], from: 0)
        return stop == end ? entries.map(\.entry) : nil
    }

    /// The entries that still parse in a damaged block: from its start, and from every restart
    /// point that looks sane (restart entries share no prefix, so parsing can resume there). Each
    /// entry is kept once; what lies between parsable stretches is lost.
    static func lenientEntries(_ contents: [UInt8]) -> [BlockEntry] {
        var end = contents.count
        var starts: [Int] = [0]
        if contents.count >= 4 {
            var tail = ByteReader(contents[(contents.count - 4)...])
            if let restarts = tail.fixed32(), restarts > 0, Int(restarts) <= (contents.count - 4) / 4 {
                let arrayStart = contents.count - 4 - 4 * Int(restarts)
                var array = ByteReader(contents[arrayStart..<(contents.count - 4)])
                var offsets: [Int] = []
                while let offset = array.fixed32() { offsets.append(Int(offset)) }
                // Only a restart array whose offsets increase and lie inside the entries is trusted.
                if offsets.first == 0, zip(offsets, offsets.dropFirst()).allSatisfy({ $0 < $1 }),
                    (offsets.last ?? 0) < arrayStart
                {
                    end = arrayStart
                    starts = offsets
                }
            }
        }
        var found: [(position: Int, entry: BlockEntry)] = []
        var covered = 0
        for start in starts where start >= covered {
            let (entries, stop) = parse(contents[..<end], from: start)
            found += entries
            covered = max(covered, stop)
        }
        return found.map(\.entry)
    }

    /// Entries from `start` until the bytes stop parsing (a restart point must be `start`: its
    /// entry shares nothing with an earlier key). Returns where parsing stopped.
    private static func parse(
        _ bytes: ArraySlice<UInt8>, from start: Int
    ) -> ([(position: Int, entry: BlockEntry)], Int) {
        var reader = ByteReader(bytes)
        reader.position = start
        var key: [UInt8] = []
        var entries: [(position: Int, entry: BlockEntry)] = []
        var stop = start
        while !reader.isAtEnd {
            let at = reader.position
            guard let shared = reader.varint32(), let unshared = reader.varint32(), let valueLength = reader.varint32(),
                shared <= key.count, let delta = reader.take(unshared), let value = reader.take(valueLength)
            else { break }
            key = Array(key.prefix(shared)) + delta
            entries.append((at, BlockEntry(key: key, value: value)))
            stop = reader.position
        }
        return (entries, stop)
    }
}

/// A block read from a table: its contents if its checksum and compression check out.
enum BlockRead {
    case intact([UInt8])
    /// Why it cannot be trusted, and whatever could be decoded of it anyway.
    case damaged(reason: String, salvage: [UInt8])
}

/// A table file (`NNNNNN.ldb` or `.sst`) read from bytes in memory.
struct TableFile {
    static let magic: UInt64 = 0xdb47_7524_8b80_fb57
    static let footerSize = 48

    let bytes: [UInt8]
    let index: BlockHandle

    /// Parses the footer; `nil` with a reason if the file is too short or not a table.
    static func open(_ bytes: [UInt8]) -> Result<TableFile, TableProblem> {
        guard bytes.count >= footerSize else {
            return .failure(TableProblem("the file is \(bytes.count) bytes, too short for a table (truncated?)"))
        }
        var reader = ByteReader(bytes[(bytes.count - footerSize)...])
        guard let _ = BlockHandle.read(&reader), let index = BlockHandle.read(&reader) else {
            return .failure(TableProblem("its footer does not parse"))
        }
        var magicReader = ByteReader(bytes[(bytes.count - 8)...])
        guard magicReader.fixed64() == magic else {
            return .failure(TableProblem("it does not end with a table's magic number (truncated or overwritten?)"))
        }
        return .success(TableFile(bytes: bytes, index: index))
    }

    /// The block at `handle`, checked against its CRC32C and decompressed.
    func block(_ handle: BlockHandle) -> BlockRead {
        guard handle.offset + handle.size + 5 <= bytes.count else {
            return .damaged(reason: "the block at byte \(handle.offset) runs past the end of the file", salvage: [])
        }
        let contents = bytes[handle.offset..<(handle.offset + handle.size)]
        let type = bytes[handle.offset + handle.size]
        var crcReader = ByteReader(bytes[(handle.offset + handle.size + 1)...])
        let stored = crcReader.fixed32() ?? 0
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in contents { crc = LogScanner.update(crc, byte) }
        crc = LogScanner.update(crc, type)
        let checksumOK = LogScanner.mask(crc ^ 0xFFFF_FFFF) == stored
        let decoded: [UInt8]?
        switch type {
        case 0: decoded = Array(contents)
        case 1: decoded = Snappy.decompress(contents)
        default: decoded = nil
        }
        if checksumOK, let decoded { return .intact(decoded) }
        let salvage: [UInt8]
        switch type {
        case 1: salvage = Snappy.decompress(contents, lenient: true) ?? []
        case 0: salvage = Array(contents)
        default: salvage = Array(contents)  // most likely an uncompressed block with a damaged type byte
        }
        let reason =
            !checksumOK
            ? "block checksum mismatch"
            : (type > 1 ? "unknown compression type \(type)" : "the block does not decompress")
        return .damaged(reason: reason, salvage: salvage)
    }

    /// The data blocks at the start of a table whose footer or index block cannot be read (a
    /// truncated table, say), found without the index: LevelDB writes the data blocks one after
    /// the other from byte 0, each followed by its compression type and the CRC32C of both, so each
    /// block's end is where that checksum matches. The scan stops at the first stretch that is not
    /// a data block — damage, the end of the file, or the filter and index blocks that follow the
    /// data. Every block returned passed its checksum and parses.
    static func dataBlocksWithoutIndex(_ bytes: [UInt8]) -> [(offset: Int, contents: [UInt8], entries: [BlockEntry])] {
        var blocks: [(offset: Int, contents: [UInt8], entries: [BlockEntry])] = []
        var handles = Set<BlockHandle>()
        var start = 0
        var lastKey: [UInt8]? = nil
        scan: while start + 5 <= bytes.count {
            var crc: UInt32 = 0xFFFF_FFFF
            var end = start
            while end + 5 <= bytes.count {
                let type = bytes[end]
                if type <= 1 {
                    var reader = ByteReader(bytes[(end + 1)...])
                    if LogScanner.mask(LogScanner.update(crc, type) ^ 0xFFFF_FFFF) == reader.fixed32() {
                        let raw = bytes[start..<end]
                        if let contents = type == 0 ? Array(raw) : Snappy.decompress(raw),
                            let entries = BlockParser.entries(contents),
                            !entries.isEmpty, entries.allSatisfy({ InternalKey($0.key[...]) != nil })
                        {
                            // The index block: every value is the handle of a block already found.
                            let isIndex = entries.allSatisfy { entry in
                                var value = ByteReader(entry.value)
                                return BlockHandle.read(&value).map { handles.contains($0) && value.isAtEnd } ?? false
                            }
                            if isIndex { break scan }
                            // Blocks follow each other in key order.
                            if let lastKey, let first = entries.first.flatMap({ InternalKey($0.key[...]) }),
                                first.userKey.lexicographicallyPrecedes(lastKey)
                            {
                                break scan
                            }
                            blocks.append((start, contents, entries))
                            handles.insert(BlockHandle(offset: start, size: end - start))
                            lastKey = entries.last.flatMap { InternalKey($0.key[...]) }?.userKey
                            start = end + 5
                            continue scan
                        }
                    }
                }
                crc = LogScanner.update(crc, bytes[end])
                end += 1
            }
            break
        }
        return blocks
    }

    /// The data blocks, from the index block: each handle with the separator key after it (an
    /// internal key ≥ every key in the block and < every key of the next one).
    func dataBlocks() -> Result<[(handle: BlockHandle, separator: [UInt8])], TableProblem> {
        guard case .intact(let contents) = block(index) else {
            return .failure(TableProblem("its index block is damaged"))
        }
        guard let entries = BlockParser.entries(contents) else {
            return .failure(TableProblem("its index block does not parse"))
        }
        var blocks: [(BlockHandle, [UInt8])] = []
        for entry in entries {
            var reader = ByteReader(entry.value)
            guard let handle = BlockHandle.read(&reader) else {
                return .failure(TableProblem("its index block names a block it cannot locate"))
            }
            blocks.append((handle, entry.key))
        }
        return .success(blocks)
    }
}

struct TableProblem: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

// MARK: - MANIFEST

/// What a MANIFEST says about the database: the live table files and which logs hold writes not
/// yet in them.
struct ManifestState {
    struct Table {
        var number: UInt64
        var level: Int
        var size: UInt64
        var smallest: [UInt8]  // internal keys
        var largest: [UInt8]
    }

    var name: String
    var comparator: String?
    var logNumber: UInt64 = 0
    var previousLogNumber: UInt64 = 0
    var nextFileNumber: UInt64 = 0
    var lastSequence: UInt64 = 0
    var tables: [UInt64: Table] = [:]

    /// Reads the MANIFEST named by `CURRENT` in `path`. Fails (with a reason) unless `CURRENT` names
    /// a MANIFEST whose every record passes its checksum and parses: a damaged MANIFEST says
    /// nothing reliable about which files are live.
    static func read(path: String) -> Result<ManifestState, TableProblem> {
        guard let current = FileManager.default.contents(atPath: path + "/CURRENT") else {
            return .failure(TableProblem("CURRENT is missing or unreadable"))
        }
        let text = String(decoding: current, as: UTF8.self)
        guard text.hasSuffix("\n"), case let name = String(text.dropLast()), name.hasPrefix("MANIFEST-"),
            !name.contains("/")
        else {
            return .failure(TableProblem("CURRENT does not name a MANIFEST"))
        }
        guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
            return .failure(TableProblem("\(name), named by CURRENT, is missing or unreadable"))
        }
        let bytes = [UInt8](data)
        let (records, problem) = LogScanner.strictRecords(bytes)
        if let problem { return .failure(TableProblem("\(name): \(problem)")) }
        var state = ManifestState(name: name)
        for record in records {
            guard state.apply(edit: record[...]) else {
                return .failure(TableProblem("\(name): a version edit does not parse"))
            }
        }
        return .success(state)
    }

    /// What the checksum-valid version edits of a damaged MANIFEST still say, applied in file
    /// order: the one `CURRENT` names or, if `CURRENT` is unreadable, the newest `MANIFEST-*`. An
    /// edit lost to the damage may have changed any of it, so this is evidence, not a file list.
    static func readLenient(path: String) -> ManifestState? {
        var name: String?
        if let current = FileManager.default.contents(atPath: path + "/CURRENT") {
            let text = String(String(decoding: current, as: UTF8.self).prefix { $0 != "\n" })
            if text.hasPrefix("MANIFEST-"), !text.contains("/"),
                FileManager.default.fileExists(atPath: path + "/" + text)
            {
                name = text
            }
        }
        if name == nil {
            name = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter {
                $0.hasPrefix("MANIFEST-")
            }
            .max { (UInt64($0.dropFirst(9)) ?? 0) < (UInt64($1.dropFirst(9)) ?? 0) }
        }
        guard let name, let data = FileManager.default.contents(atPath: path + "/" + name) else { return nil }
        var state = ManifestState(name: name)
        var applied = false
        for record in LogScanner.validLogicalRecords([UInt8](data)) {
            var edit = state
            if edit.apply(edit: record.payload[...]) {
                state = edit
                applied = true
            }
        }
        return applied ? state : nil
    }

    /// Applies one encoded version edit; `false` if it does not parse.
    mutating func apply(edit: ArraySlice<UInt8>) -> Bool {
        var reader = ByteReader(edit)
        while !reader.isAtEnd {
            guard let tag = reader.varint32() else { return false }
            switch tag {
            case 1:
                guard let name = reader.lengthPrefixed() else { return false }
                comparator = String(decoding: name, as: UTF8.self)
            case 2:
                guard let value = reader.varint64() else { return false }
                logNumber = value
            case 3:
                guard let value = reader.varint64() else { return false }
                nextFileNumber = value
            case 4:
                guard let value = reader.varint64() else { return false }
                lastSequence = value
            case 5:
                guard reader.varint32() != nil, reader.lengthPrefixed() != nil else { return false }
            case 6:
                guard reader.varint32() != nil, let number = reader.varint64() else { return false }
                tables[number] = nil
            case 7:
                guard let level = reader.varint32(), let number = reader.varint64(), let size = reader.varint64(),
                    let smallest = reader.lengthPrefixed(), let largest = reader.lengthPrefixed()
                else { return false }
                tables[number] = Table(
                    number: number, level: level, size: size, smallest: Array(smallest), largest: Array(largest))
            case 9:
                guard let value = reader.varint64() else { return false }
                previousLogNumber = value
            default:
                return false
            }
        }
        return true
    }

    /// A description of the damage if the write-ahead log the MANIFEST names as holding the
    /// latest writes is missing (LevelDB creates that log before the MANIFEST names it and opens
    /// without complaint when it is gone, losing the writes it held). `nil` when it is there, when
    /// the MANIFEST names none (after LevelDB's repair) or cannot be read (LevelDB's open reports
    /// that), and when another process holds the database (it may be replacing the log right now).
    static func missingLiveLog(path: String) -> String? {
        guard case .success(let state) = read(path: path), state.logNumber != 0 else { return nil }
        let name = DatabaseFile.logName(state.logNumber)
        guard !FileManager.default.fileExists(atPath: path + "/" + name) else { return nil }
        if lockHeldByAnotherProcess(path) { return nil }
        // A handle in this process may have moved to a new log meanwhile: the MANIFEST says so.
        guard case .success(let again) = read(path: path), again.name == state.name, again.logNumber == state.logNumber,
            !FileManager.default.fileExists(atPath: path + "/" + name)
        else { return nil }
        return
            "the write-ahead log \(name), which \(state.name) names as holding the latest writes, is missing: the writes made since sequence number \(state.lastSequence) or earlier may be lost"
    }

    /// Whether another process holds LevelDB's lock on `path/LOCK` (asked without taking it).
    static func lockHeldByAnotherProcess(_ path: String) -> Bool {
        let fd = open(path + "/LOCK", O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 0
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return false }
        return lock.l_type != Int16(F_UNLCK)
    }

    /// The log files that may hold writes not yet in a table.
    func isLive(log number: UInt64) -> Bool {
        number >= logNumber || (previousLogNumber != 0 && number == previousLogNumber)
    }
}

/// A database file's number and kind, from its name (`000123.ldb`, `000123.sst`, `000123.log`).
enum DatabaseFile: Hashable {
    case table(UInt64)
    case log(UInt64)

    init?(name: String) {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty,
            parts[0].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let number = UInt64(parts[0])
        else { return nil }
        switch parts[1] {
        case "ldb", "sst": self = .table(number)
        case "log": self = .log(number)
        default: return nil
        }
    }

    static func tableName(_ number: UInt64) -> String { padded(number) + ".ldb" }
    static func logName(_ number: UInt64) -> String { padded(number) + ".log" }

    /// A file number as LevelDB writes it in names: at least six digits.
    static func padded(_ number: UInt64) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}

// MARK: - Write batches

/// A write batch as logged: a sequence number, a count, then puts and deletes.
struct LoggedBatch {
    struct Operation {
        var key: [UInt8]
        /// `nil` for a delete.
        var value: [UInt8]?
    }

    var sequence: UInt64
    var operations: [Operation]

    /// Parses a whole batch exactly: `nil` if its count does not match its operations or bytes are
    /// left over.
    init?(_ bytes: ArraySlice<UInt8>) {
        var reader = ByteReader(bytes)
        guard let sequence = reader.fixed64(), let count = reader.fixed32() else { return nil }
        var operations: [Operation] = []
        while !reader.isAtEnd {
            guard let tag = reader.byte(), tag <= 1, let key = reader.lengthPrefixed() else { return nil }
            if tag == 1 {
                guard let value = reader.lengthPrefixed() else { return nil }
                operations.append(Operation(key: Array(key), value: Array(value)))
            } else {
                operations.append(Operation(key: Array(key), value: nil))
            }
        }
        guard operations.count == Int(count) else { return nil }
        self.sequence = sequence
        self.operations = operations
    }

    /// The sequence number, the count of operations its header declares, and the operations that
    /// still parse in a damaged batch (no more than the declared count).
    static func lenient(_ bytes: ArraySlice<UInt8>) -> (sequence: UInt64?, count: Int?, operations: [Operation]) {
        var reader = ByteReader(bytes)
        let sequence = reader.fixed64()
        let count = reader.fixed32().map(Int.init)
        var operations: [Operation] = []
        while !reader.isAtEnd, operations.count < (count ?? Int.max) {
            guard let tag = reader.byte(), tag <= 1, let key = reader.lengthPrefixed() else { break }
            if tag == 1 {
                guard let value = reader.lengthPrefixed() else { break }
                operations.append(Operation(key: Array(key), value: Array(value)))
            } else {
                operations.append(Operation(key: Array(key), value: nil))
            }
        }
        return (sequence, count, operations)
    }
}
