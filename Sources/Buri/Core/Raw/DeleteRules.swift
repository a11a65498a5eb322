import BuriCodec
import BuriStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// Relationships (docs/FORMAT.md §5, `references`/`onDelete`): the delete rules applied in a
// deletion's own batch, and the check that a stored reference names an object that exists.

/// One relationship of the catalog: an index of `holder` whose values are keys of bucket `target`.
struct Relationship {
    var holder: BucketDescriptor
    var index: IndexDefinition
    var target: String { index.references ?? "" }
    var rule: DeleteRule { index.onDelete ?? .nullify }

    /// The path of map keys the references are stored under in the holder's payload.
    var path: [String]? { Self.path(of: index) }

    /// The path of map keys a relationship index's references are read from.
    static func path(of index: IndexDefinition) -> [String]? {
        index.fieldPaths?.first ?? index.fields?.first.map { [$0] }
    }
}

extension BuriDatabase {
    /// Every relationship in the catalog as `reader` sees it (a catalog entry without one is
    /// skipped without being decoded: the word `references` does not occur in its bytes).
    func relationships(reader: any StorageReader) throws(BuriError) -> [Relationship] {
        let marker = Array("references".utf8)
        return try run {
            var found: [Relationship] = []
            let cursor = try reader.cursor(in: Keyspace.catalogRange)
            while try cursor.next() {
                let mentions = try cursor.withValue { value in Self.contains(marker, in: value) }
                guard mentions else { continue }
                let descriptor: BucketDescriptor
                do {
                    descriptor = try BucketDescriptor.decode(cursor.value)
                } catch {
                    throw BuriError.corruption(
                        bucket: String(decoding: cursor.key.dropFirst(), as: UTF8.self), key: nil, index: nil,
                        reason: "its catalog entry does not decode: \(error)")
                }
                for index in descriptor.indexes where index.references != nil {
                    found.append(Relationship(holder: descriptor, index: index))
                }
            }
            return found
        }
    }

    /// Whether `bytes` holds `needle` (not empty): each occurrence of its first byte found with
    /// `memchr`, then compared with `memcmp`. (A generic search was a twentieth of a delete's time.)
    static func contains(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = needle.first, let base = bytes.baseAddress, bytes.count >= needle.count else {
            return false
        }
        return needle.withUnsafeBytes { wanted -> Bool in
            guard let pattern = wanted.baseAddress else { return false }
            var offset = 0
            let lastStart = bytes.count - needle.count
            while offset <= lastStart {
                guard let hit = memchr(base + offset, Int32(first), lastStart - offset + 1) else { return false }
                let at = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + at, pattern, needle.count) == 0 { return true }
                offset = at + 1
            }
            return false
        }
    }

    /// Applies the delete rules of every relationship into bucket `target` to the objects `keys`
    /// (UTF-8 bytes; `nil`: every object of the bucket) that `writer`'s batch deletes: holders
    /// declared `.cascade` are deleted in the same batch (their own rules applied in turn, each
    /// object once, so cycles end), `.nullify` holders lose the references, and a `.deny` holder
    /// that is not itself deleted fails the whole deletion with ``BuriError/referenced(bucket:key:holderBucket:holderKey:index:)``.
    func applyDeleteRules(target: String, keys: [[UInt8]]?, writer: Writer) throws(BuriError) {
        let relationships = try relationships(reader: writer.reader)
        guard !relationships.isEmpty else { return }
        var plan = DeletionPlan()
        plan.markDeleted(bucket: target, keys: keys)
        try carryOut(&plan, deleting: [(target, keys)], relationships: relationships, writer: writer)
    }

    /// Carries `plan` out in `writer`'s batch: follows the relationships into the objects of
    /// `deleting` (and of every holder `plan` cascades to, transitively), then refuses a denial
    /// whose holder survives, and takes the references out of the surviving nullified holders.
    func carryOut(
        _ plan: inout DeletionPlan, deleting: [(bucket: String, keys: [[UInt8]]?)], relationships: [Relationship],
        writer: Writer
    ) throws(BuriError) {
        var queue = deleting
        while true {
            // The holders cascaded so far are deleted now, and their own relationships followed.
            for (name, pending) in plan.takeCascaded() {
                let deleted = try deleteRecords(of: pending.descriptor, keys: pending.keys, writer: writer)
                queue.append((name, deleted))
            }
            guard let (bucket, deleting) = queue.popLast() else { break }
            for relationship in relationships where relationship.target.hasSameBytes(as: bucket) {
                let holders = try referencesInto(relationship, keys: deleting, reader: writer.reader)
                plan.nullified.reserveCapacity(plan.nullified.count + holders.count)
                for (holderKey, tuple) in holders {
                    let holderName = relationship.holder.name
                    if plan.isDeleted(bucket: holderName, key: holderKey) { continue }
                    switch relationship.rule {
                    case .deny:
                        plan.denials.append((relationship, holderKey, tuple, bucket))
                    case .cascade:
                        plan.cascade(relationship.holder, key: holderKey)
                    case .nullify:
                        plan.nullify(relationship, holderKey: holderKey, tuple: tuple)
                    }
                }
            }
        }
        for denial in plan.denials
        where !plan.isDeleted(bucket: denial.relationship.holder.name, key: denial.holderKey) {
            throw .referenced(
                bucket: denial.target, key: String(decoding: Self.referencedKey(denial.tuple), as: UTF8.self),
                holderBucket: denial.relationship.holder.name,
                holderKey: String(decoding: denial.holderKey, as: UTF8.self), index: denial.relationship.index.name)
        }
        for (holderKey, removal) in plan.nullified
        where !plan.isDeleted(bucket: removal.holder.name, key: holderKey.holderKey) {
            try removeReferences(removal, holderKey: holderKey.holderKey, writer: writer)
        }
    }

    /// The (holder key, tuple) of every entry of `relationship`'s index naming one of `keys`
    /// (`nil`: any key), through `reader`.
    func referencesInto(
        _ relationship: Relationship, keys: [[UInt8]]?, reader: any StorageReader
    ) throws(BuriError) -> [(holderKey: [UInt8], tuple: [UInt8])] {
        let prefix = Keyspace.indexPrefix(bucket: relationship.holder.id, index: relationship.index.id)
        var found: [(holderKey: [UInt8], tuple: [UInt8])] = []
        try run(bucket: relationship.holder.name) {
            let ranges: [[UInt8]]
            if let keys {
                ranges = keys.map { key in
                    var tuple = prefix
                    ValueEncoding.appendBinary(key, to: &tuple)
                    return tuple
                }
            } else {
                ranges = [prefix]
            }
            for start in ranges {
                let cursor = try reader.cursor(in: .prefix(start))
                while try cursor.next() {
                    let split = try cursor.withKey { raw in try Keyspace.splitIndexEntry(raw, arity: 1) }
                    let key = cursor.key
                    found.append((Array(key[split.objectKey]), Array(key[split.tuple])))
                }
            }
        }
        return found
    }

    /// The referenced object key an entry's tuple holds (a single binary element).
    static func referencedKey(_ tuple: [UInt8]) -> [UInt8] {
        var offset = 0
        if case .bytes(let bytes)? = try? ValueEncoding.decodeElement(tuple, at: &offset) { return bytes }
        return []
    }

    /// Deletes the records `keys` of bucket `descriptor` and the index entries their headers list,
    /// in `writer`'s batch. Returns the keys that were there.
    private func deleteRecords(
        of descriptor: BucketDescriptor, keys: [[UInt8]], writer: Writer
    ) throws(BuriError) -> [[UInt8]] {
        let bucket = RawBucket(database: self, descriptor: descriptor, transaction: writer.transaction)
        return try bucket.deleteRecords(keys.map { String(decoding: $0, as: UTF8.self) }, writer: writer)
    }

    /// Takes the references `removal` lists out of holder `holderKey`'s record: out of the array
    /// that holds them (the others keep their order), or a single one set to null; the entries go
    /// with them. Other index entries are left as they are.
    private func removeReferences(_ removal: DeletionPlan.Removal, holderKey: [UInt8], writer: Writer) throws(BuriError)
    {
        let holder = removal.holder
        let key = String(decoding: holderKey, as: UTF8.self)
        let recordKey = Keyspace.recordKey(bucket: holder.id, key: key)
        // The header is rewritten from the stored bytes, less the listed entries of the removed
        // references (one walk of it, tuples compared in place); a relationship whose entries the
        // header derives from the payload needs no header change at all: the edit of the payload
        // takes its entries out. The payload is edited in place (CBORSplice): only the array (or
        // the lone reference) changes, every other byte stays as stored. The new record is built
        // in one buffer, from the stored bytes read where the engine holds them.
        let removals = removal.tuples.map { (index: $0.key, tuples: $0.value) }
        let single: (UInt32, [UInt8])? =
            removals.count == 1 && removals[0].tuples.count == 1 ? (removals[0].index, removals[0].tuples[0]) : nil
        var record: [UInt8] = []
        let found = try run(bucket: holder.name) {
            try writer.reader.withValue(forKey: recordKey) { value -> Bool in
                guard let raw = value else { return false }
                record.reserveCapacity(raw.count)
                guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                    throw BuriError.corruption(
                        bucket: holder.name, key: key, index: nil, reason: "record header: empty record")
                }
                // Where the entries begin (after the schema version and the count): the walk below
                // validates the same varints, and throws if they do not read.
                var entriesStart = 2
                if raw.count >= 2 {
                    _ = try? Varint.read(raw, at: &entriesStart)
                    _ = try? Varint.read(raw, at: &entriesStart)
                }
                // The byte spans of the entries to drop (each from its index id to its tuple's end):
                // the header is copied around them in a few spans, not entry by entry.
                var dropped: [Range<Int>] = []
                var entryCount = 0
                var previousEnd = entriesStart
                let schemaVersion: UInt64
                let payloadOffset: Int
                do {
                    if let (onlyIndex, onlyTuple) = single {
                        // The usual nullify: one reference out of each holder, compared in place.
                        (schemaVersion, payloadOffset, _) = try RecordHeader.forEachListedEntry(raw) { index, range in
                            entryCount += 1
                            let start = previousEnd
                            previousEnd = range.upperBound
                            if index == onlyIndex, Self.sameBytes(onlyTuple, raw, range) {
                                dropped.append(start..<range.upperBound)
                            }
                        }
                    } else {
                        (schemaVersion, payloadOffset, _) = try RecordHeader.forEachListedEntry(raw) { index, range in
                            entryCount += 1
                            let start = previousEnd
                            previousEnd = range.upperBound
                            for (removedIndex, tuples) in removals where removedIndex == index {
                                if tuples.contains(where: { Self.sameBytes($0, raw, range) }) {
                                    dropped.append(start..<range.upperBound)
                                    return
                                }
                            }
                        }
                    }
                } catch {
                    throw BuriError.corruption(
                        bucket: holder.name, key: key, index: nil, reason: "record header: \(error)")
                }
                if dropped.isEmpty {
                    // Nothing listed goes (the entries are derived): the header stays as stored.
                    record.append(contentsOf: UnsafeBufferPointer(start: base, count: payloadOffset))
                } else {
                    // The layout byte is kept (a derived layout's section after the entries is
                    // copied with the last span).
                    record.append(raw[0])
                    record.append(RecordHeader.cborCodec)
                    Varint.append(schemaVersion, to: &record)
                    Varint.append(UInt64(entryCount - dropped.count), to: &record)
                    var from = entriesStart
                    for span in dropped + [payloadOffset..<payloadOffset] {
                        record.append(
                            contentsOf: UnsafeBufferPointer(start: base + from, count: span.lowerBound - from))
                        from = span.upperBound
                    }
                }
                // Each relationship's array is edited in turn; the one edit there usually is goes
                // straight into the record.
                let payload = UnsafeRawBufferPointer(rebasing: raw[payloadOffset...])
                if removals.count == 1, let (indexId, tuples) = removals.first,
                    let index = holder.indexes.first(where: { $0.id == indexId }),
                    let path = Relationship(holder: holder, index: index).path
                {
                    let removed = Set(tuples.map { Self.referencedKey($0) })
                    let changed: Bool
                    do {
                        changed = try CBORSplice.removingTexts(removed, at: path, in: payload, appendingTo: &record)
                    } catch {
                        throw BuriError.corruption(
                            bucket: holder.name, key: key, index: index.name, reason: "payload: \(error)")
                    }
                    if !changed {
                        record.append(
                            contentsOf: UnsafeBufferPointer(
                                start: base + payloadOffset, count: raw.count - payloadOffset))
                    }
                    return true
                }
                var edited: [UInt8]?
                for (indexId, tuples) in removals {
                    guard let index = holder.indexes.first(where: { $0.id == indexId }),
                        let path = Relationship(holder: holder, index: index).path
                    else { continue }
                    let removed = Set(tuples.map { Self.referencedKey($0) })
                    var out: [UInt8] = []
                    do {
                        let changed =
                            if let current = edited {
                                try current.withUnsafeBytes {
                                    try CBORSplice.removingTexts(removed, at: path, in: $0, appendingTo: &out)
                                }
                            } else {
                                try CBORSplice.removingTexts(removed, at: path, in: payload, appendingTo: &out)
                            }
                        if changed { edited = out }
                    } catch {
                        throw BuriError.corruption(
                            bucket: holder.name, key: key, index: index.name, reason: "payload: \(error)")
                    }
                }
                if let edited {
                    record.append(contentsOf: edited)
                } else {
                    record.append(
                        contentsOf: UnsafeBufferPointer(start: base + payloadOffset, count: raw.count - payloadOffset))
                }
                return true
            }
        }
        guard found else { return }
        for (indexId, tuples) in removals {
            for tuple in tuples {
                writer.batch.delete(
                    Keyspace.indexEntryKey(bucket: holder.id, index: indexId, tuple: tuple, objectKey: key))
            }
        }
        writer.batch.put(recordKey, record)
    }

    /// Whether `bytes` equals `raw[range]` (a header tuple compared where it is stored).
    private static func sameBytes(_ bytes: [UInt8], _ raw: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
        guard bytes.count == range.count else { return false }
        guard let base = raw.baseAddress, !bytes.isEmpty else { return true }
        // Keys often share long prefixes: a key's last byte rules most tuples out without a call.
        // A tuple ends with its element's end mark (0x00 0x00), so that byte is the third from
        // the end; the last byte is checked too when the tuple is shorter.
        let probe = bytes.count >= 3 ? bytes.count - 3 : bytes.count - 1
        guard raw[range.lowerBound + probe] == bytes[probe] else { return false }
        return bytes.withUnsafeBytes { own in
            guard let start = own.baseAddress else { return false }
            return memcmp(start, base + range.lowerBound, range.count) == 0
        }
    }

}

/// What one deletion does to the objects that refer to what it deletes.
struct DeletionPlan {
    /// Per bucket name (bytes): every key deleted, or `nil` for the whole bucket.
    private var deleted: [ObjectKeyBytes: Set<ObjectKeyBytes>?] = [:]
    /// Holders to delete next, per bucket.
    private var cascaded: [ObjectKeyBytes: (name: String, descriptor: BucketDescriptor, keys: [[UInt8]])] = [:]
    var denials: [(relationship: Relationship, holderKey: [UInt8], tuple: [UInt8], target: String)] = []

    struct Removal {
        var holder: BucketDescriptor
        /// Per relationship index id, the tuples (referenced keys) to take out.
        var tuples: [UInt32: [[UInt8]]] = [:]
    }

    struct HolderKey: Hashable {
        var bucket: ObjectKeyBytes
        var holderKey: [UInt8]
    }

    var nullified: [HolderKey: Removal] = [:]

    mutating func markDeleted(bucket: String, keys: [[UInt8]]?) {
        let name = ObjectKeyBytes(Array(bucket.utf8))
        guard let keys else {
            deleted[name] = .some(nil)
            return
        }
        if case .some(.none) = deleted[name] { return }
        var set = deleted[name].flatMap { $0 } ?? []
        for key in keys { set.insert(ObjectKeyBytes(key)) }
        deleted[name] = .some(set)
    }

    func isDeleted(bucket: String, key: [UInt8]) -> Bool {
        guard let entry = deleted[ObjectKeyBytes(Array(bucket.utf8))] else { return false }
        guard let keys = entry else { return true }
        return keys.contains(ObjectKeyBytes(key))
    }

    mutating func cascade(_ holder: BucketDescriptor, key: [UInt8]) {
        let name = ObjectKeyBytes(Array(holder.name.utf8))
        markDeleted(bucket: holder.name, keys: [key])
        cascaded[name, default: (holder.name, holder, [])].keys.append(key)
    }

    mutating func takeCascaded() -> [(String, (descriptor: BucketDescriptor, keys: [[UInt8]]))] {
        defer { cascaded = [:] }
        return cascaded.values.map { ($0.name, ($0.descriptor, $0.keys)) }
    }

    mutating func nullify(_ relationship: Relationship, holderKey: [UInt8], tuple: [UInt8]) {
        let key = HolderKey(bucket: ObjectKeyBytes(Array(relationship.holder.name.utf8)), holderKey: holderKey)
        nullified[key, default: Removal(holder: relationship.holder)].tuples[relationship.index.id, default: []]
            .append(tuple)
    }
}
