import Buri
import Foundation
import GRDB
import LevelDB

// The query rows: IN with a range, OR of two indexes, a top-k ordered by an index, and a filter on
// an unindexed field. The original benchmark's people all have locale "EN", name "Dirk" and ages
// 20 to 39, on which these conditions would select everything or nothing, so the query rows have
// their own objects, `Resident`: the same four fields and the same two indexes, with locales,
// ages and names drawn so that each condition selects a part. Every system loads them untimed
// before the first query row (after the delete, so the original rows run exactly as before), and
// every system's answer is checked, untimed, against the one computed here in plain Swift.

/// The query rows' object: `Person`'s fields and indexes, in a bucket and table of its own.
struct Resident: BuriSupport, FetchableRecord, PersistableRecord, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Resident>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age).plaintext()],
        bucket: "Resident"
    )
    static let databaseTableName = "resident"

    /// Six locales, equally likely.
    static let locales = ["EN", "NL", "DE", "FR", "ES", "IT"]
    /// 24 first names, equally likely; 4 start with "A" (all start with a capital, so SQL's
    /// case-insensitive `LIKE 'A%'` and Swift's `hasPrefix("A")` agree).
    static let names = [
        "Anna", "Ahmed", "Alice", "Arjun", "Bram", "Chen", "Dirk", "Eva", "Fatima", "Giulia", "Hugo", "Ines",
        "Jan", "Kofi", "Lars", "Mia", "Noor", "Omar", "Pablo", "Sofia", "Tess", "Umar", "Vera", "Yuki",
    ]

    /// `n` residents that depend only on `n`'s indices: keys spread like random UUIDs (from seeds
    /// no other object uses), ages 0 to 99, locales and names drawn independently.
    static func population(_ n: Int) -> [Resident] {
        (0..<n).map { i in
            var generator = SplitMix64(seed: 0xC0FFEE &+ UInt64(i))
            let draw = generator.next()
            return Resident(
                objectId: uuidString(-1_000_000 - i),
                name: names[Int(draw % 24)],
                locale: locales[Int((draw >> 8) % 6)],
                age: Int((draw >> 16) % 100))
        }
    }
}

/// `Resident` with a hand-written `init(record:)`, for Buri (best), as `BestPerson` is `Person`.
struct BestResident: BuriSupport, BuriRecordDecodable, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<BestResident>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age).plaintext()],
        bucket: "Resident"
    )

    init(_ resident: Resident) {
        objectId = resident.objectId
        name = resident.name
        locale = resident.locale
        age = resident.age
    }

    init(record: inout CBORRecordReader) throws {
        var objectId: String?, name: String?, locale: String?, age: Int?
        while let field = try record.nextField() {
            switch field {
            case "objectId": objectId = try record.string()
            case "name": name = try record.string()
            case "locale": locale = try record.string()
            case "age": age = try record.int()
            default: try record.skip()
            }
        }
        guard let objectId else { throw record.missingField("objectId") }
        guard let name else { throw record.missingField("name") }
        guard let locale else { throw record.missingField("locale") }
        guard let age else { throw record.missingField("age") }
        self.objectId = objectId
        self.name = name
        self.locale = locale
        self.age = age
    }

    var resident: Resident { Resident(objectId: objectId, name: name, locale: locale, age: age) }
}

/// A `Resident` decoded from a row by column index (`objectId, name, locale, age`), for GRDB best.
struct ResidentRow: FetchableRecord {
    var resident: Resident

    init(row: GRDB.Row) {
        resident = Resident(objectId: row[0], name: row[1], locale: row[2], age: row[3])
    }
}

/// The conditions of the query rows, shared by every system.
enum QueryRows {
    /// `in_and_range`: locale IN these AND age in `inAges`.
    static let inLocales = ["EN", "NL", "DE"]
    static let inAges = 20...29
    /// `or_two_indexes`: locale = `orLocale` OR age < `orBelowAge`.
    static let orLocale = "EN"
    static let orBelowAge = 10
    /// `top50_age_desc`: the `topCount` oldest with locale `topLocale`, ties by key descending.
    static let topLocale = "EN"
    static let topCount = 50
    /// `filter_unindexed`: age in `filterAges` AND name starts with `namePrefix` (no index on name).
    static let filterAges = 20...29
    static let namePrefix = "A"

    /// How many times a row asks its query (each a query of its own: its own read, snapshot and
    /// statement run). One query takes a few milliseconds, which a shared machine's scheduling
    /// noise swamps; repeated, each row takes tens to hundreds of milliseconds per system.
    static func queries(_ row: Row) -> Int {
        switch row {
        case .inAndRange: 20
        case .orTwoIndexes: 10
        case .top50AgeDesc: 100
        case .filterUnindexed: 50
        default: 1
        }
    }

    /// Runs `query` as many times as `row` asks it; the objects handled in all.
    static func repeated(_ row: Row, _ query: () throws -> Int) rethrows -> Int {
        var count = 0
        for _ in 0..<queries(row) { count += try query() }
        return count
    }
}

/// What a system returned for a query row: the objects, or (the floor, which decodes nothing)
/// their keys.
enum Answer {
    case objects([Resident])
    case keys([String])
}

/// The answers of the query rows, by plain Swift over the residents: sets sorted by key, the
/// top-k in its order (age descending, then key descending — Buri breaks ties on the first sort
/// key by object key in that key's direction, and the SQL says `ORDER BY age DESC, objectId DESC`).
struct ExpectedAnswers: Sendable {
    let inAndRange: [Resident]
    let orTwoIndexes: [Resident]
    let top50AgeDesc: [Resident]
    let filterUnindexed: [Resident]

    init(_ residents: [Resident]) {
        func byKey(_ list: [Resident]) -> [Resident] { list.sorted { keyPrecedes($0.objectId, $1.objectId) } }
        inAndRange = byKey(
            residents.filter { QueryRows.inLocales.contains($0.locale) && QueryRows.inAges.contains($0.age) })
        orTwoIndexes = byKey(residents.filter { $0.locale == QueryRows.orLocale || $0.age < QueryRows.orBelowAge })
        top50AgeDesc = Array(
            residents.filter { $0.locale == QueryRows.topLocale }
                .sorted { $0.age != $1.age ? $0.age > $1.age : keyPrecedes($1.objectId, $0.objectId) }
                .prefix(QueryRows.topCount))
        filterUnindexed = byKey(
            residents.filter { QueryRows.filterAges.contains($0.age) && $0.name.hasPrefix(QueryRows.namePrefix) })
    }

    func answer(for row: Row) -> [Resident] {
        switch row {
        case .inAndRange: inAndRange
        case .orTwoIndexes: orTwoIndexes
        case .top50AgeDesc: top50AgeDesc
        case .filterUnindexed: filterUnindexed
        default: []
        }
    }

    /// Checks a system's answer to `row`: the same objects (every field) or keys; in the same
    /// order for the top-k, as a set (compared sorted by key) otherwise.
    func check(_ answer: Answer?, row: Row, system: String) throws {
        let expected = self.answer(for: row)
        let ordered = row == .top50AgeDesc
        func sortedByKey<T>(_ list: [T], _ key: (T) -> String) -> [T] {
            ordered ? list : list.sorted { keyPrecedes(key($0), key($1)) }
        }
        switch answer {
        case nil:
            throw BenchmarkFailure("\(system), \(row.title): no answer recorded")
        case .objects(let objects):
            let got = sortedByKey(objects, \.objectId)
            guard got == expected else {
                let first =
                    zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(got.count, expected.count)
                throw BenchmarkFailure(
                    "\(system), \(row.title): \(got.count) objects, expected \(expected.count); first difference at \(first): \(first < got.count ? "\(got[first])" : "none") instead of \(first < expected.count ? "\(expected[first])" : "none")"
                )
            }
        case .keys(let keys):
            let got = sortedByKey(keys) { $0 }
            guard got == expected.map(\.objectId) else {
                throw BenchmarkFailure(
                    "\(system), \(row.title): \(got.count) keys, expected \(expected.count), or other keys")
            }
        }
    }
}

/// Byte order of two strings' UTF-8 (Buri's key order, SQLite's BINARY collation).
func keyPrecedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

/// Where Buri keeps the residents in LevelDB, learned (as `FloorLayout` learns the people's) by
/// storing them with Buri into a directory of their own and reading it back, so the floor reads
/// Buri's exact keys and values. The floor's `prepare` copies them from there into its database.
struct ResidentLayout: Sendable {
    /// The Buri database the residents were stored in (buckets made in the order every system
    /// makes them, so the bucket ids and keys are those of the systems' databases).
    var sourcePath: String
    /// Bytes in front of the object key in a resident's record key.
    var recordPrefix: [UInt8] = []
    /// The prefix of every index entry of the bucket (tag and bucket id).
    var indexSpacePrefix: [UInt8] = []
    /// The prefix of every entry of the age index (tag, bucket id, index id).
    var ageIndexPrefix: [UInt8] = []
    /// Bytes in front of the object key in an age entry, by age.
    var ageEntryPrefixes: [Int: [UInt8]] = [:]
    /// Bytes in front of the object key in a locale entry, by locale.
    var localeEntryPrefixes: [String: [UInt8]] = [:]
    /// The length of every object key (UUID strings): an entry's last `keyLength` bytes are its
    /// object key (the age entries' prefixes differ in length: zero encodes shorter).
    var keyLength = 0

    static func learn(workload: Workload, in directory: String) throws -> ResidentLayout {
        let path = directory + "/residents.buri"
        try? FileManager.default.removeItem(atPath: path)
        do {
            let db = try BuriDatabase(path: path, levelDB: StorageTuning.levelDB)
            _ = try db.bucket(Token.self)
            _ = try db.bucket(Person.self)
            try db.bucket(Resident.self).store(workload.residents)
            db.close()
        }
        var layout = ResidentLayout(sourcePath: path)
        let byKey = Dictionary(uniqueKeysWithValues: workload.residents.map { (Array($0.objectId.utf8), $0) })
        let keyLength = workload.residents.first?.objectId.utf8.count ?? 0
        // Per index (the first 9 bytes of its entries), each entry prefix with the residents' values.
        var prefixes: [[UInt8]: [[UInt8]: (locales: Set<String>, ages: Set<Int>)]] = [:]
        let storage = try LevelDB.Database(path: path)
        defer { storage.close() }
        let cursor = try storage.cursor()
        var records = 0
        while try cursor.next() {
            let key = cursor.key
            guard key.count > keyLength, let resident = byKey[Array(key.suffix(keyLength))] else { continue }
            let prefix = Array(key.dropLast(keyLength))
            let isRecord = cursor.withValue { !$0.isEmpty }
            if isRecord {
                layout.recordPrefix = prefix
                records += 1
                // The floor reads locale and name from the record's bytes: check that it reads them right.
                let (locale, name) = cursor.withValue {
                    (
                        FloorBytes.text(of: FloorBytes.localeField, in: $0),
                        FloorBytes.text(of: FloorBytes.nameField, in: $0)
                    )
                }
                guard locale.map({ String(decoding: $0, as: UTF8.self) }) == resident.locale,
                    name.map({ String(decoding: $0, as: UTF8.self) }) == resident.name
                else { throw BenchmarkFailure("residents: the floor cannot read locale and name of \(resident)") }
            } else {
                prefixes[Array(prefix.prefix(9)), default: [:]][prefix, default: ([], [])].locales.insert(
                    resident.locale)
                prefixes[Array(prefix.prefix(9)), default: [:]][prefix, default: ([], [])].ages.insert(resident.age)
            }
        }
        guard records == workload.residents.count, prefixes.count == 2 else {
            throw BenchmarkFailure("residents: found \(records) records and \(prefixes.count) indexes")
        }
        // The locale index has one prefix per locale, the age index one per age.
        for (head, entries) in prefixes {
            layout.indexSpacePrefix = Array(head.prefix(5))
            if entries.values.allSatisfy({ $0.locales.count == 1 }), entries.count == Resident.locales.count {
                for (prefix, values) in entries { layout.localeEntryPrefixes[values.locales.first!] = prefix }
            } else if entries.values.allSatisfy({ $0.ages.count == 1 }) {
                layout.ageIndexPrefix = head
                for (prefix, values) in entries { layout.ageEntryPrefixes[values.ages.first!] = prefix }
            }
        }
        guard layout.localeEntryPrefixes.count == Resident.locales.count, layout.ageEntryPrefixes.count == 100 else {
            throw BenchmarkFailure(
                "residents: could not tell the locale and age entries apart (\(layout.localeEntryPrefixes.count) locales, \(layout.ageEntryPrefixes.count) ages)"
            )
        }
        layout.keyLength = keyLength
        return layout
    }

    /// The age entries with an age in `ages` (the encoding keeps numeric order as byte order).
    func ageRange(_ ages: ClosedRange<Int>) throws -> KeyRange {
        guard let low = ageEntryPrefixes[ages.lowerBound], let high = ageEntryPrefixes[ages.upperBound] else {
            throw BenchmarkFailure("floor: no age entry prefix learned for \(ages)")
        }
        return KeyRange(start: low, end: KeyRange.successor(ofPrefix: high))
    }

    /// Copies the residents' records and index entries from the source database into `storage`
    /// (batches of 30,000 keys).
    func copy(into storage: LevelDB.Database) throws {
        let source = try LevelDB.Database(path: sourcePath)
        defer { source.close() }
        for range in [KeyRange.prefix(recordPrefix), .prefix(indexSpacePrefix)] {
            let cursor = try source.cursor(in: range)
            var batch = WriteBatch()
            while try cursor.next() {
                cursor.withKey { key in cursor.withValue { value in batch.put(key, value) } }
                if batch.count >= 30_000 {
                    try storage.write(batch)
                    batch = WriteBatch()
                }
            }
            try storage.write(batch)
        }
    }
}

/// What the floor reads from a record's stored bytes without decoding it: a hand-written app's
/// knowledge of its own format. The payload is a CBOR map with text keys; a field's value is found
/// by looking for the key's bytes and reading the short text string after them.
enum FloorBytes {
    /// CBOR text(6) "locale", text(4) "name".
    static let localeField: [UInt8] = [0x66] + Array("locale".utf8)
    static let nameField: [UInt8] = [0x64] + Array("name".utf8)

    /// The bytes of the short (under 24 bytes) text value right after `field` in `value`.
    static func text(of field: [UInt8], in value: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard value.count > field.count else { return nil }
        let first = field[0]
        var i = 0
        let last = value.count - field.count
        outer: while i < last {
            if value[i] == first {
                for j in 1..<field.count where value[i + j] != field[j] {
                    i += 1
                    continue outer
                }
                let head = Int(value[i + field.count])
                let start = i + field.count + 1
                guard head >= 0x60, head < 0x78, start + head - 0x60 <= value.count else { return nil }
                return UnsafeRawBufferPointer(rebasing: value[start..<(start + head - 0x60)])
            }
            i += 1
        }
        return nil
    }

    /// Whether `value`'s text at `field` equals `wanted`.
    static func text(of field: [UInt8], in value: UnsafeRawBufferPointer, equals wanted: [UInt8]) -> Bool {
        guard let text = text(of: field, in: value) else { return false }
        return text.elementsEqual(wanted)
    }
}
