import Buri
import Foundation
import LevelDB

/// The exact bytes Buri writes for each object, learned by storing sample objects with Buri and
/// reading its LevelDB directory back, so the floor's keys and values have Buri's sizes (and
/// contents) without the benchmark re-implementing the format.
struct FloorLayout: Sendable {
    /// Bytes in front of the object key in a `Token` record key.
    var tokenRecordPrefix: [UInt8] = []
    var tokenValue: Template = Template()
    var personRecordPrefix: [UInt8] = []
    /// Record values by age.
    var personValues: [Int: Template] = [:]
    /// Bytes in front of the object key in a locale = "EN" index entry.
    var localeEntryPrefix: [UInt8] = []
    /// Bytes in front of the object key in an age index entry, by age.
    var ageEntryPrefixes: [Int: [UInt8]] = [:]

    /// A value with the object key at known offsets.
    struct Template: Sendable {
        var bytes: [UInt8] = []
        var keyOffsets: [Int] = []

        func value(forKey key: [UInt8]) -> [UInt8] {
            var out = bytes
            for offset in keyOffsets { out.replaceSubrange(offset..<(offset + key.count), with: key) }
            return out
        }
    }

    static func learn(in directory: String) throws -> FloorLayout {
        let path = directory + "/calibration.buri"
        let tokenKey = uuidString(-1)
        let samples = (20..<40).map { Person(objectId: uuidString(-100 - $0), name: "Dirk", locale: "EN", age: $0) }
        do {
            let db = try BuriDatabase(path: path, levelDB: StorageTuning.levelDB)
            try db.bucket(Token.self).store(Token(objectId: tokenKey))
            try db.bucket(Person.self).store(samples)
            db.close()
        }
        defer { try? FileManager.default.removeItem(atPath: path) }

        var layout = FloorLayout()
        var entryPrefixes: [Int: [[UInt8]]] = [:]  // age -> prefixes of its index entries
        let storage = try Database(path: path)
        defer { storage.close() }
        for entry in try storage.entries() {
            func split(_ key: String) -> [UInt8]? {
                let bytes = Array(key.utf8)
                guard entry.key.count > bytes.count, Array(entry.key.suffix(bytes.count)) == bytes else { return nil }
                return Array(entry.key.dropLast(bytes.count))
            }
            if let prefix = split(tokenKey), !entry.value.isEmpty {
                layout.tokenRecordPrefix = prefix
                layout.tokenValue = Template(
                    bytes: entry.value, keyOffsets: offsets(of: Array(tokenKey.utf8), in: entry.value))
                continue
            }
            for sample in samples {
                guard let prefix = split(sample.objectId) else { continue }
                if entry.value.isEmpty {
                    entryPrefixes[sample.age, default: []].append(prefix)
                } else {
                    layout.personRecordPrefix = prefix
                    layout.personValues[sample.age] = Template(
                        bytes: entry.value, keyOffsets: offsets(of: Array(sample.objectId.utf8), in: entry.value))
                }
            }
        }
        // The locale entry's prefix is the one every sample shares; the other is the age entry.
        guard let first = entryPrefixes[20], first.count == 2,
            let shared = first.first(where: { candidate in entryPrefixes.values.allSatisfy { $0.contains(candidate) } })
        else { throw BenchmarkFailure("calibration: could not tell the index entries apart") }
        layout.localeEntryPrefix = shared
        for (age, prefixes) in entryPrefixes {
            guard prefixes.count == 2, let other = prefixes.first(where: { $0 != shared }) else {
                throw BenchmarkFailure("calibration: age \(age) has \(prefixes.count) index entries")
            }
            layout.ageEntryPrefixes[age] = other
        }
        guard !layout.tokenRecordPrefix.isEmpty, layout.personValues.count == 20 else {
            throw BenchmarkFailure("calibration: records not found")
        }
        return layout
    }

    private static func offsets(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
        guard haystack.count >= needle.count else { return [] }
        return (0...(haystack.count - needle.count)).filter { start in
            haystack[start..<(start + needle.count)].elementsEqual(needle)
        }
    }

    /// The bytes of the records Buri writes in a fill (record keys and values, without index
    /// entries): the data that the fills' peak memory is compared with.
    func recordBytes(of row: Row, workload: Workload) -> Int {
        switch row {
        case .simpleFill:
            workload.tokens.reduce(0) { $0 + tokenRecordPrefix.count + $1.objectId.utf8.count + tokenValue.bytes.count }
        default:
            workload.people.reduce(0) {
                $0 + personRecordPrefix.count + $1.objectId.utf8.count + (personValues[$1.age]?.bytes.count ?? 0)
            }
        }
    }

    /// The common prefix of every record key of a bucket (tag and bucket id).
    var personRecordRange: KeyRange { .prefix(personRecordPrefix) }
}

/// The floor: the LevelDB Swift module alone, doing the storage operations each row needs, on
/// Buri's exact bytes, prepared before timing (no encoding, no decoding, no object is built).
///
/// | row | LevelDB work |
/// |-----|--------------|
/// | simple fill | N puts, one batch |
/// | complex fill | N gets (the old record, which an upsert must read to replace its index entries) + one batch of 3N puts |
/// | sequential | N entries iterated (key and value touched) |
/// | 2i keys | N index entries iterated |
/// | 2i objects, range | M index entries iterated + M gets of the records |
/// | point fetch | N gets |
/// | refill | N gets + one batch of N deletes (old age entry) and 2N puts (new age entry, record) |
/// | delete all | 3N keys iterated + one batch of 3N deletes |
/// | IN and range, filter | the age range's entries iterated + a get of each record, the other condition checked in the record's bytes |
/// | OR | both conditions' entries iterated, their keys sorted and deduplicated + a get of each record |
/// | top 50 | the age index iterated backwards + a get of each record, its locale checked in its bytes, until 50 match |
final class FloorSystem: System {
    static let name = "LevelDB floor"
    let storage: Database
    let workload: Workload
    let layout: FloorLayout
    let bytes: Bytes
    /// Whether the stored ages are the changed ones.
    var agesChanged = false

    /// Every key and value of the workload, built once per process. Keys read with point gets
    /// stay arrays (the LevelDB module's non-generic get takes `[UInt8]`); everything only written
    /// is packed into one buffer per column, which keeps the inputs small at 1,000,000 objects
    /// (an array per key costs its header and allocation on top of its 40 to 60 bytes).
    struct Bytes: Sendable {
        var tokenKeys = PackedBytes()
        var tokenValues = PackedBytes()
        var personRecordKeys: [[UInt8]] = []
        var personValues = PackedBytes()
        var localeEntries = PackedBytes()
        var ageEntries = PackedBytes()
        var changedValues = PackedBytes()
        var changedAgeEntries = PackedBytes()
        /// The point fetches' order, as indices into `personRecordKeys`.
        var shuffledIndices: [Int32] = []

        init(workload: Workload, layout: FloorLayout) {
            for token in workload.tokens {
                let key = Array(token.objectId.utf8)
                tokenKeys.append(layout.tokenRecordPrefix, key)
                tokenValues.append(layout.tokenValue.value(forKey: key))
            }
            personRecordKeys.reserveCapacity(workload.people.count)
            for (person, moved) in zip(workload.people, workload.changed) {
                let key = Array(person.objectId.utf8)
                personRecordKeys.append(layout.personRecordPrefix + key)
                personValues.append(layout.personValues[person.age, default: .init()].value(forKey: key))
                localeEntries.append(layout.localeEntryPrefix, key)
                ageEntries.append(layout.ageEntryPrefixes[person.age, default: []], key)
                changedValues.append(layout.personValues[moved.age, default: .init()].value(forKey: key))
                changedAgeEntries.append(layout.ageEntryPrefixes[moved.age, default: []], key)
            }
            shuffledIndices = workload.shuffledIndices
        }
    }

    /// Where the residents of the query rows are (nil when no query row runs).
    let residents: ResidentLayout?
    var residentsLoaded = false
    /// The object keys of the last query row's matches (bytes; strings are made for the check only).
    var matchedKeys: [[UInt8]] = []

    init(path: String, workload: Workload, layout: FloorLayout, bytes: Bytes, residents: ResidentLayout? = nil) throws {
        // The very LevelDB options Buri opens its databases with.
        storage = try Database(path: path, options: StorageTuning.levelDB)
        self.workload = workload
        self.layout = layout
        self.bytes = bytes
        self.residents = residents
    }

    /// Before the first query row: the residents' records and entries, Buri's bytes, copied in,
    /// the database compacted (as Buri's is), so no flush or compaction runs while a query is
    /// timed, and every one of them read once (a warm block cache, as Buri's).
    func prepare(_ row: Row) throws {
        guard row.isQuery, !residentsLoaded else { return }
        guard let residents else { throw BenchmarkFailure("floor: the residents' layout was not learned") }
        try residents.copy(into: storage)
        try storage.compact()
        for range in [KeyRange.prefix(residents.recordPrefix), .prefix(residents.indexSpacePrefix)] {
            let cursor = try storage.cursor(in: range)
            while try cursor.next() {}
        }
        residentsLoaded = true
    }

    func answer(_ row: Row) -> Answer? {
        row.isQuery ? .keys(matchedKeys.map { String(decoding: $0, as: UTF8.self) }) : nil
    }

    func run(_ row: Row) throws -> Int {
        switch row {
        case .simpleFill:
            let batch = WriteBatch()
            bytes.tokenKeys.withView { keys in
                bytes.tokenValues.withView { values in
                    for i in 0..<keys.count { batch.put(keys[i], values[i]) }
                }
            }
            try storage.write(batch)
            return bytes.tokenKeys.count
        case .complexFill:
            let batch = WriteBatch()
            var found = 0
            try bytes.localeEntries.withView { localeEntries in
                try bytes.ageEntries.withView { ageEntries in
                    try bytes.personValues.withView { values in
                        for i in bytes.personRecordKeys.indices {
                            found += try storage.withValue(forKey: bytes.personRecordKeys[i]) { $0 == nil ? 0 : 1 }
                            batch.put(localeEntries[i], PackedBytes.empty)
                            batch.put(ageEntries[i], PackedBytes.empty)
                            bytes.personRecordKeys[i].withUnsafeBytes { batch.put($0, values[i]) }
                        }
                    }
                }
            }
            try storage.write(batch)
            guard found == 0 else { throw BenchmarkFailure("floor: complex fill found \(found) existing records") }
            return bytes.personRecordKeys.count
        case .sequential:
            let cursor = try storage.cursor(in: layout.personRecordRange)
            var count = 0
            var touched = 0
            while try cursor.next() {
                touched &+= cursor.withKey { $0.count } &+ cursor.withValue { $0.count }
                count += 1
            }
            return touched > 0 ? count : 0
        case .indexKeys:
            let cursor = try storage.cursor(in: .prefix(layout.localeEntryPrefix))
            var count = 0
            var touched = 0
            while try cursor.next() {
                touched &+= cursor.withKey { $0.count }
                count += 1
            }
            return touched > 0 ? count : 0
        case .indexObjects:
            return try indexThenRecords(
                .prefix(layout.localeEntryPrefix), entryPrefixLength: layout.localeEntryPrefix.count)
        case .rangeObjects:
            // Age entries of the range: from the lowest age's prefix up to the successor of the highest's.
            let range = Workload.ageRange
            guard let low = layout.ageEntryPrefixes[range.lowerBound],
                let high = layout.ageEntryPrefixes[range.upperBound],
                low.count == high.count
            else { throw BenchmarkFailure("floor: age prefixes differ in length") }
            let keyRange = KeyRange(start: low, end: KeyRange.successor(ofPrefix: high))
            return try indexThenRecords(keyRange, entryPrefixLength: low.count)
        case .aggregate:
            // The floor of an aggregate from index entries: walking every age entry.
            // (Tag, bucket id and index id: the first 9 bytes every age entry's prefix shares.)
            guard let agePrefix = layout.ageEntryPrefixes.values.first.map({ Array($0.prefix(9)) }) else {
                throw BenchmarkFailure("floor: no age entry prefix learned")
            }
            let cursor = try storage.cursor(in: .prefix(agePrefix))
            var count = 0
            var touched = 0
            while try cursor.next() {
                touched &+= cursor.withKey { $0.count }
                count += 1
            }
            return touched > 0 ? count : 0
        case .groupedAggregate:
            // The floor of an aggregate that reads each record's header: walking every record.
            let cursor = try storage.cursor(in: layout.personRecordRange)
            var count = 0
            var touched = 0
            while try cursor.next() {
                touched &+= cursor.withValue { $0.count > 0 ? Int($0[0]) : 0 }
                count += 1
            }
            return touched > 0 ? count : 0
        case .pointFetch:
            var found = 0
            for i in bytes.shuffledIndices {
                found += try storage.withValue(forKey: bytes.personRecordKeys[Int(i)]) {
                    $0 == nil ? 0 : ($0!.count > 0 ? 1 : 0)
                }
            }
            return found
        case .complexRefill, .observedRefill:
            // The observed refill (no observers here) moves the ages back if they were changed.
            let back = row == .observedRefill && agesChanged
            let batch = WriteBatch()
            var found = 0
            let (oldEntries, newEntries) =
                back ? (bytes.changedAgeEntries, bytes.ageEntries) : (bytes.ageEntries, bytes.changedAgeEntries)
            let newValues = back ? bytes.personValues : bytes.changedValues
            try oldEntries.withView { oldEntries in
                try newEntries.withView { newEntries in
                    try newValues.withView { newValues in
                        for i in bytes.personRecordKeys.indices {
                            found += try storage.withValue(forKey: bytes.personRecordKeys[i]) { $0 == nil ? 0 : 1 }
                            batch.delete(oldEntries[i])
                            batch.put(newEntries[i], PackedBytes.empty)
                            bytes.personRecordKeys[i].withUnsafeBytes { batch.put($0, newValues[i]) }
                        }
                    }
                }
            }
            try storage.write(batch)
            agesChanged = !back
            return found
        case .deleteAll:
            let batch = WriteBatch()
            var count = 0
            let records = try storage.cursor(in: layout.personRecordRange, options: ReadOptions(fillCache: false))
            while try records.next() {
                records.withKey { batch.delete($0) }
                count += 1
            }
            // Every index entry of the bucket: the prefix shared by its locale and age entries (tag, bucket id).
            let entries = try storage.cursor(
                in: .prefix(Array(layout.localeEntryPrefix.prefix(5))), options: ReadOptions(fillCache: false))
            while try entries.next() { entries.withKey { batch.delete($0) } }
            try storage.write(batch)
            return count
        case .inAndRange, .orTwoIndexes, .top50AgeDesc, .filterUnindexed:
            guard let residents else { throw BenchmarkFailure("floor: the residents' layout was not learned") }
            return try QueryRows.repeated(row) {
                matchedKeys.removeAll(keepingCapacity: true)
                return try query(row, residents)
            }
        case .playlistSongs, .playlistHolders, .playlistDelete:
            // The floor has no playlist rows (`supports` says so; the driver skips it).
            throw BenchmarkFailure("floor: no playlist rows")
        }
    }

    /// A query row as a hand-written LevelDB app on Buri's layout would answer it: walk the most
    /// selective index's entries, read each record with a point get and check what the entries
    /// do not tell in the record's bytes (`FloorBytes`); an OR reads both indexes' entries.
    private func query(_ row: Row, _ residents: ResidentLayout) throws -> Int {
        let keyLength = residents.keyLength
        switch row {
        case .inAndRange:
            let wanted = QueryRows.inLocales.map { Array($0.utf8) }
            return try entriesThenRecords(residents.ageRange(QueryRows.inAges), residents: residents) { value in
                guard let locale = FloorBytes.text(of: FloorBytes.localeField, in: value) else { return false }
                return wanted.contains { locale.elementsEqual($0) }
            }
        case .orTwoIndexes:
            guard let localePrefix = residents.localeEntryPrefixes[QueryRows.orLocale] else {
                throw BenchmarkFailure("floor: no locale entry prefix learned")
            }
            var keys: [[UInt8]] = []
            for range in [KeyRange.prefix(localePrefix), try residents.ageRange(0...(QueryRows.orBelowAge - 1))] {
                let cursor = try storage.cursor(in: range)
                while try cursor.next() { keys.append(cursor.withKey { Array($0.suffix(keyLength)) }) }
            }
            keys.sort { $0.lexicographicallyPrecedes($1) }
            var recordKey = residents.recordPrefix
            let recordPrefixLength = recordKey.count
            var previous: [UInt8]? = nil
            for key in keys where key != previous {
                previous = key
                recordKey.removeSubrange(recordPrefixLength...)
                recordKey.append(contentsOf: key)
                if try storage.withValue(forKey: recordKey, { $0 != nil }) { matchedKeys.append(key) }
            }
            return matchedKeys.count
        case .top50AgeDesc:
            let wanted = Array(QueryRows.topLocale.utf8)
            return try entriesThenRecords(
                .prefix(residents.ageIndexPrefix), reverse: true, limit: QueryRows.topCount, residents: residents
            ) { FloorBytes.text(of: FloorBytes.localeField, in: $0, equals: wanted) }
        case .filterUnindexed:
            let wanted = Array(QueryRows.namePrefix.utf8)
            return try entriesThenRecords(residents.ageRange(QueryRows.filterAges), residents: residents) { value in
                FloorBytes.text(of: FloorBytes.nameField, in: value).map { $0.starts(with: wanted) } ?? false
            }
        default:
            return 0
        }
    }

    /// Walks index entries in `range`, reads each one's record with a point get and keeps the
    /// keys of those `matches` accepts, until `limit`; returns how many it kept.
    private func entriesThenRecords(
        _ range: KeyRange, reverse: Bool = false, limit: Int = .max, residents: ResidentLayout,
        _ matches: (UnsafeRawBufferPointer) -> Bool
    ) throws -> Int {
        let cursor = try storage.cursor(in: range, reverse: reverse)
        var recordKey = residents.recordPrefix
        let recordPrefixLength = recordKey.count
        var count = 0
        while count < limit, try cursor.next() {
            cursor.withKey { entry in
                recordKey.removeSubrange(recordPrefixLength...)
                recordKey.append(contentsOf: entry.suffix(residents.keyLength))
            }
            if try storage.withValue(forKey: recordKey, { $0.map(matches) ?? false }) {
                matchedKeys.append(Array(recordKey[recordPrefixLength...]))
                count += 1
            }
        }
        return count
    }

    /// Walks index entries in `range` and reads each one's record with a point get.
    private func indexThenRecords(_ range: KeyRange, entryPrefixLength: Int) throws -> Int {
        let cursor = try storage.cursor(in: range)
        var recordKey = layout.personRecordPrefix
        let recordPrefixLength = recordKey.count
        var count = 0
        while try cursor.next() {
            cursor.withKey { entry in
                recordKey.removeSubrange(recordPrefixLength...)
                recordKey.append(contentsOf: entry[entryPrefixLength...])
            }
            count += try storage.withValue(forKey: recordKey) { $0 == nil ? 0 : 1 }
        }
        return count
    }

    func close() { storage.close() }
}

/// Many byte strings in one buffer, with their end offsets: the floor's prebuilt inputs.
struct PackedBytes: Sendable {
    private var storage: [UInt8] = []
    private var ends: [Int] = []

    static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    var count: Int { ends.count }

    mutating func append(_ bytes: [UInt8]) {
        storage.append(contentsOf: bytes)
        ends.append(storage.count)
    }

    mutating func append(_ prefix: [UInt8], _ rest: [UInt8]) {
        storage.append(contentsOf: prefix)
        storage.append(contentsOf: rest)
        ends.append(storage.count)
    }

    /// Lends the strings as raw buffers (valid only inside `body`).
    func withView<R>(_ body: (View) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in
            try ends.withUnsafeBufferPointer { ends in try body(View(raw: raw, ends: ends)) }
        }
    }

    struct View {
        let raw: UnsafeRawBufferPointer
        let ends: UnsafeBufferPointer<Int>
        var count: Int { ends.count }
        subscript(i: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: raw[(i == 0 ? 0 : ends[i - 1])..<ends[i]])
        }
    }
}
