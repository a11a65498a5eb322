import BuriCodec
import BuriEngines
import BuriStorage

/// A bucket whose catalog entry was lost and that ``BuriDatabase/repair(path:options:levelDB:)`` wrote
/// again, so that its surviving objects stay reachable.
///
/// ```swift
/// for bucket in report.recoveredBuckets where !bucket.nameIsKnown {
///     print("objects of a lost bucket are now in '\(bucket.name)'")
/// }
/// ```
public struct RecoveredBucket: Sendable, Hashable {
    /// The bucket id its records and index entries live under.
    public var id: UInt32
    /// The name it was given: its own, when a copy of its catalog entry could still be read from
    /// the damaged data; otherwise `recovered-<id>`.
    public var name: String
    /// Whether ``name`` is the bucket's own name (read from a damaged copy of its catalog entry,
    /// checked against its records), rather than one made up by the repair.
    public var nameIsKnown: Bool
    /// How many records it holds.
    public var objects: Int
    /// The definition written: from the damaged copy where it agrees with the records, otherwise
    /// inferred from the record headers and payloads (index ids, kinds, fields, key field).
    public var descriptor: BucketDescriptor
    /// What the definition was rebuilt from, for people.
    public var source: String
    /// A name the bucket may have had: a retired-generation marker names a bucket that has no
    /// catalog entry.
    public var possibleName: String?
}

/// Rebuilding catalog entries for bucket ids whose keys survive without one (docs/FORMAT.md §5:
/// records describe their own index entries, payloads are self-describing CBOR).
enum CatalogRecovery {
    /// What a recovery did besides writing catalog entries: objects named only by index entries of
    /// a bucket id without records or catalog entry, and counts of ids with nothing else left.
    struct Outcome {
        var recovered: [RecoveredBucket] = []
        var lostObjects: [ObjectReference] = []
        var unknownLosses: [String] = []
        var notes: [String] = []
    }

    /// Finds the bucket ids that hold keys (records, index entries, an object count) but have
    /// neither a catalog entry nor a retired-id marker, and for each: writes a catalog entry when
    /// records survive (from `unverified`, a damaged copy, where it agrees with them; otherwise
    /// inferred); when only index entries survive, names their objects as lost and deletes them
    /// with the count; when only a count survives, deletes it (reporting the objects it counted).
    /// One atomic commit.
    static func run(
        engine: any StorageEngine, unverified: [SalvageReport.UnverifiedEntry], damagedKeys: Set<[UInt8]>,
        unreadable: [SalvageReport.UnreadableRange]
    ) throws -> Outcome {
        var outcome = Outcome()
        let snapshot = try engine.snapshot()
        var catalogIds = Set<UInt32>()
        var names = Set<[UInt8]>()
        var descriptors: [BucketDescriptor] = []
        let catalog = try snapshot.cursor(in: Keyspace.catalogRange)
        while try catalog.next() {
            names.insert(Array(catalog.key.dropFirst()))
            if let descriptor = try? BucketDescriptor.decode(catalog.value) {
                catalogIds.insert(descriptor.id)
                descriptors.append(descriptor)
            }
        }
        var retired = Set<UInt32>()
        var markerNames: [UInt32: String] = [:]
        let markers = try snapshot.cursor(in: Keyspace.retiredRange)
        while try markers.next() {
            if let marker = Keyspace.parseRetired(key: markers.key, value: try markers.value) {
                retired.insert(marker.bucket)
                markerNames[marker.bucket] = marker.name
            }
        }
        let recordIds = try ids(in: [Keyspace.recordTag], snapshot: snapshot)
        let entryIds = try ids(in: [Keyspace.indexTag], snapshot: snapshot)
        var countIds = Set<UInt32>()
        let counts = try snapshot.cursor(in: Keyspace.countRange)
        while try counts.next() {
            if let id = Keyspace.bucket(ofCountKey: counts.key) { countIds.insert(id) }
        }
        var orphans = recordIds.union(entryIds).union(countIds).subtracting(catalogIds).subtracting(retired).sorted()
        let batch = engine.makeBatch()

        // A catalog entry may be out of date: its newer state (naming a newer generation's id, after
        // a deleteAll) lost with the damage. That shows when a retired-id marker names its id (the
        // switch writes both in one batch, FORMAT.md §6a), or when its key's latest state was in
        // damaged data and a newer id without catalog entry holds objects that fit its indexes.
        // The entry is then pointed at the newest such id; its old id, unless retired, keeps its
        // objects as a recovered bucket of its own (it may be the replaced generation: nothing is
        // deleted on a guess).
        var hints: [UInt32: String] = [:]
        var gathered: [UInt32: Evidence] = [:]
        func gatheredEvidence(_ id: UInt32) throws -> Evidence {
            if let known = gathered[id] { return known }
            let found = try Evidence.gather(id: id, snapshot: snapshot)
            gathered[id] = found
            return found
        }
        for descriptor in descriptors {
            let catalogKey = Keyspace.catalogKey(bucket: descriptor.name)
            let replaced = retired.contains(descriptor.id)
            let doubtful =
                damagedKeys.contains(catalogKey)
                || unreadable.contains { range in
                    !catalogKey.lexicographicallyPrecedes(range.lowerBound ?? [])
                        && (range.upperBound.map { !$0.lexicographicallyPrecedes(catalogKey) } ?? true)
                }
            guard replaced || doubtful else { continue }
            var successor: UInt32?
            var successorEvidence: Evidence?
            // What the old generation's own surviving records look like, if any survive.
            let former = recordIds.contains(descriptor.id) ? try gatheredEvidence(descriptor.id) : nil
            for candidate in orphans.reversed() where candidate > descriptor.id {
                let found = try gatheredEvidence(candidate)
                guard found.fits(descriptor, former: former) else { continue }
                successor = candidate
                successorEvidence = found
                break
            }
            if successor == nil && !replaced { continue }
            var updated = descriptor
            var objects = 0
            let id: UInt32
            if let successor, var evidence = successorEvidence {
                id = successor
                orphans.removeAll { $0 == successor }
                updated = evidence.merge(into: descriptor)
                objects = evidence.records
            } else {
                // The newer generation kept no key: it is empty. It gets a fresh id, as deleteAll gives one.
                id = (recordIds.union(entryIds).union(countIds).union(catalogIds).union(retired).max() ?? 0) + 1
            }
            updated.id = id
            updated.nextIndexId = max(updated.nextIndexId, (updated.indexes.map(\.id).max() ?? 0) + 1)
            batch.put(catalogKey, try updated.encoded())
            catalogIds.insert(id)
            if !replaced {
                // Its old id's objects stay reachable, under a name of their own.
                catalogIds.remove(descriptor.id)
                if recordIds.contains(descriptor.id) || entryIds.contains(descriptor.id)
                    || countIds.contains(descriptor.id)
                {
                    orphans.append(descriptor.id)
                    orphans.sort()
                    hints[descriptor.id] = descriptor.name
                }
            }
            outcome.recovered.append(
                RecoveredBucket(
                    id: id, name: descriptor.name, nameIsKnown: true, objects: objects, descriptor: updated,
                    source: (replaced
                        ? "its catalog entry, which had come back from before the generation switch that retired id \(descriptor.id) (its newer state was in damaged data)"
                        : "its catalog entry, whose newer state was in damaged data and which still named id \(descriptor.id)")
                        + (successor == nil
                            ? "; it now names id \(id), a new empty generation: the one that replaced id \(descriptor.id) kept no key"
                            : "; it now names id \(id), a newer generation whose objects fit its indexes"),
                    possibleName: nil))
        }

        // Copies of catalog entries read from damaged data, by the id they name.
        var copies: [UInt32: BucketDescriptor] = [:]
        for entry in unverified where entry.key.first == Keyspace.catalogTag {
            guard let value = entry.value, let descriptor = try? BucketDescriptor.decode(value),
                Array(descriptor.name.utf8) == Array(entry.key.dropFirst())
            else { continue }
            copies[descriptor.id] = descriptor
        }
        // Names of generations whose catalog entry is gone: a hint only.
        let orphanNames = markerNames.filter { !names.contains(Array($0.value.utf8)) }.map(\.value)

        for id in orphans {
            if !recordIds.contains(id) {
                let copy = copies[id].flatMap { names.contains(Array($0.name.utf8)) ? nil : $0 }
                try dropOrphanEntries(id: id, snapshot: snapshot, batch: batch, copy: copy, outcome: &outcome)
                // Its definition is still legible: the bucket stays, empty, under its own name.
                if let copy {
                    names.insert(Array(copy.name.utf8))
                    batch.put(Keyspace.catalogKey(bucket: copy.name), try copy.encoded())
                    outcome.recovered.append(
                        RecoveredBucket(
                            id: id, name: copy.name, nameIsKnown: true, objects: 0, descriptor: copy,
                            source:
                                "its catalog entry as read from the damaged data; none of its records survive (the objects its index entries name are reported lost)",
                            possibleName: nil))
                }
                continue
            }
            var evidence = try gatheredEvidence(id)
            var descriptor: BucketDescriptor
            var nameIsKnown = false
            var source: String
            if let copy = copies[id], !names.contains(Array(copy.name.utf8)) {
                descriptor = evidence.merge(into: copy)
                nameIsKnown = true
                source =
                    evidence.conflicts.isEmpty
                    ? "its catalog entry as read from the damaged data, which agrees with its records"
                    : "its catalog entry as read from the damaged data, with \(evidence.conflicts.joined(separator: ", ")) rebuilt from the records"
            } else {
                var name = "recovered-\(id)"
                if let hint = hints[id] {
                    source =
                        "the objects under the id bucket '\(hint)' named before its catalog entry was pointed at its newer generation (they may be the generation a deleteAll replaced): "
                } else {
                    source = ""
                }
                var attempt = 1
                while names.contains(Array(name.utf8)) {
                    attempt += 1
                    name = "recovered-\(id)-\(attempt)"
                }
                descriptor = evidence.infer(id: id, name: name)
                source +=
                    "its \(evidence.records) record\(evidence.records == 1 ? "" : "s"): "
                    + evidence.describe(descriptor)
            }
            names.insert(Array(descriptor.name.utf8))
            batch.put(Keyspace.catalogKey(bucket: descriptor.name), try descriptor.encoded())
            outcome.recovered.append(
                RecoveredBucket(
                    id: id, name: descriptor.name, nameIsKnown: nameIsKnown, objects: evidence.records,
                    descriptor: descriptor, source: source,
                    possibleName: hints[id] ?? (nameIsKnown || orphanNames.count != 1 ? nil : orphanNames.first)))
        }
        if !batch.isEmpty { try engine.commit(batch, conditions: nil, sync: true) }
        return outcome
    }

    /// The bucket ids that have keys in the space of `tag` (records or index entries), found by
    /// seeking from id to id.
    static func ids(in tag: [UInt8], snapshot: any StorageSnapshot) throws -> Set<UInt32> {
        var found = Set<UInt32>()
        let cursor = try snapshot.cursor(in: .prefix(tag))
        while try cursor.next() {
            guard let id = cursor.withKey({ $0.count >= 5 ? Keyspace.readBigEndian($0, at: 1) : nil }) else { continue }
            found.insert(id)
            if id == UInt32.max { break }
            var next = tag
            Keyspace.appendBigEndian(id + 1, to: &next)
            cursor.seek(next)
        }
        return found
    }

    /// A bucket id with index entries (and maybe a count) but no record and no catalog entry: its
    /// objects are lost. Names them from the entries (each entry key ends with its object key)
    /// and deletes the entries and the count, which no longer describe anything.
    static func dropOrphanEntries(
        id: UInt32, snapshot: any StorageSnapshot, batch: any StorageBatch, copy: BucketDescriptor?,
        outcome: inout Outcome
    ) throws {
        let bucket = copy?.name ?? "#\(id)"
        var keys = Set<ObjectKeyBytes>()
        let entries = try snapshot.cursor(in: .prefix(Keyspace.indexSpacePrefix(bucket: id)))
        while try entries.next() {
            let key = entries.key
            batch.delete(key)
            let arity =
                copy.flatMap { descriptor in
                    key.withUnsafeBytes { Keyspace.bucketAndIndex(ofEntry: $0) }.flatMap { ids in
                        descriptor.indexes.first { $0.id == ids.index }?.components.count
                    }
                } ?? 1
            if let objectKey = try? key.withUnsafeBytes({ raw -> [UInt8] in
                let parts = try Keyspace.splitIndexEntry(raw, arity: arity)
                return Array(raw[parts.objectKey])
            }) {
                keys.insert(ObjectKeyBytes(objectKey))
            }
        }
        for key in keys.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) {
            outcome.lostObjects.append(ObjectReference(bucket: bucket, key: String(decoding: key.bytes, as: UTF8.self)))
        }
        // Token totals of its text indexes go with it (`check --repair` recomputes any it keeps).
        let totals = try snapshot.cursor(in: Keyspace.textTotalRange(bucket: id))
        while try totals.next() { totals.withKey { batch.delete($0) } }
        let countKey = Keyspace.countKey(bucket: id)
        if let value = try snapshot.get(countKey) {
            batch.delete(countKey)
            if keys.isEmpty, let count = Keyspace.parseCount(value), count > 0 {
                outcome.unknownLosses.append(
                    "bucket \(copy.map { "'\($0.name)'" } ?? "id \(id)") (its catalog entry was lost): its object count says \(count) object\(count == 1 ? "" : "s"), but none of its records or index entries survive; their keys cannot be known"
                )
            }
        }
    }

    /// What a bucket's surviving records say about its definition.
    struct Evidence {
        struct IndexShape {
            var kinds: [IndexKind]?
            var consistent = true
            var multiValued = false
            var entries = 0
        }

        var records = 0
        var schemaVersion: UInt64 = 0
        var shapes: [UInt32: IndexShape] = [:]
        /// Top-level payload fields whose text value equals every record's key.
        var keyFields: [String]? = nil
        /// Per index id, the (field, form) pairs that compute every record's stored values.
        var fields: [UInt32: [(field: String, form: IndexFieldForm)]] = [:]
        var conflicts: [String] = []
        var firstFieldOrder: [String] = []

        static func gather(id: UInt32, snapshot: any StorageSnapshot) throws -> Evidence {
            var evidence = Evidence()
            var fieldNames: [String] = []
            var seenNames = Set<[UInt8]>()
            func read(_ cursor: any StorageCursor) -> (key: String, header: RecordHeader, payload: CBORValue?)? {
                guard let key = try? cursor.withKey({ try Keyspace.objectKey(fromRecordKey: $0) }),
                    let parsed = try? cursor.withValue({ value throws -> (RecordHeader, CBORValue?) in
                        let (header, offset) = try RecordHeader.parse(value)
                        return (header, try? CBORValue(decoding: UnsafeRawBufferPointer(rebasing: value[offset...])))
                    })
                else { return nil }
                return (key, parsed.0, parsed.1)
            }
            // First pass: the indexes' shapes from the headers, and the payloads' field names.
            let first = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: id)))
            while try first.next() {
                evidence.records += 1
                guard let record = read(first) else { continue }
                evidence.schemaVersion = max(evidence.schemaVersion, record.header.schemaVersion)
                var perIndex: [UInt32: Int] = [:]
                for entry in record.header.entries where entry.index != 0 {
                    perIndex[entry.index, default: 0] += 1
                    var shape = evidence.shapes[entry.index] ?? IndexShape()
                    let kinds = IndexTuple.split(entry.tuple).map {
                        $0.encoded.first == 0x30 ? IndexKind.binary : IndexKind.numeric
                    }
                    if let known = shape.kinds, known != kinds { shape.consistent = false } else { shape.kinds = kinds }
                    shape.entries += 1
                    evidence.shapes[entry.index] = shape
                }
                for (index, count) in perIndex where count > 1 { evidence.shapes[index]?.multiValued = true }
                if case .map(let members)? = record.payload, fieldNames.count < 64 {
                    for member in members {
                        if case .text(let name) = member.key, seenNames.insert(Array(name.utf8)).inserted {
                            fieldNames.append(name)
                        }
                    }
                }
            }
            evidence.firstFieldOrder = fieldNames
            evidence.keyFields = fieldNames
            for (index, shape) in evidence.shapes where shape.consistent && shape.kinds?.count == 1 {
                evidence.fields[index] = fieldNames.flatMap { [($0, IndexFieldForm.value), ($0, IndexFieldForm.date)] }
            }
            // Second pass: keep the key field and index fields that hold for every record.
            let second = try snapshot.cursor(in: .prefix(Keyspace.recordPrefix(bucket: id)))
            while try second.next() {
                guard let record = read(second) else { continue }
                evidence.check(key: record.key, header: record.header, payload: record.payload)
            }
            return evidence
        }

        /// Narrows the key-field and index-field candidates with one more record.
        mutating func check(key: String, header: RecordHeader, payload: CBORValue?) {
            guard case .map(let members)? = payload else {
                keyFields = []
                fields = fields.mapValues { _ in [] }
                return
            }
            keyFields = keyFields?.filter { name in
                members.contains { member in
                    if case .text(let field) = member.key, field.utf8.elementsEqual(name.utf8),
                        case .text(let value) = member.value
                    {
                        return value.utf8.elementsEqual(key.utf8)
                    }
                    return false
                }
            }
            var byIndex: [UInt32: Set<[UInt8]>] = [:]
            for entry in header.entries { byIndex[entry.index, default: []].insert(entry.tuple) }
            for (index, candidates) in fields where !candidates.isEmpty {
                guard let kinds = shapes[index]?.kinds, let multiValued = shapes[index]?.multiValued else { continue }
                fields[index] = candidates.filter { candidate in
                    if candidate.form == .date && kinds != [.numeric] { return false }
                    let definition = IndexDefinition(
                        id: index, name: candidate.field, components: kinds, multiValued: multiValued,
                        fields: [candidate.field], fieldForms: [candidate.form])
                    guard let tuples = try? definition.tuples(of: .map(members)) else { return false }
                    return Set(tuples.map { IndexTuple.join($0) }) == byIndex[index, default: []]
                }
            }
        }

        /// Whether these records could belong to a bucket described by `descriptor`: every index
        /// their headers use is one of its indexes, with as many components of the same kinds.
        /// Whether these records could be the newer generation of a bucket described by
        /// `descriptor`, whose older generation's records (if any survive) are `former`: every
        /// index their headers use is one of its indexes, with components of the same kinds; an
        /// index with recorded fields computes their stored values from those fields; and their
        /// objects have the fields of the older generation's (or, with none left to compare, they
        /// use every index of the descriptor).
        func fits(_ descriptor: BucketDescriptor, former: Evidence?) -> Bool {
            guard records > 0 else { return false }
            let shapesFit = shapes.allSatisfy { index, shape in
                guard let definition = descriptor.indexes.first(where: { $0.id == index }) else { return false }
                guard shape.consistent, shape.kinds == definition.components else { return false }
                if let declared = definition.fields, declared.count == 1 {
                    return (fields[index] ?? []).contains { $0.field.utf8.elementsEqual(declared[0].utf8) }
                }
                return true
            }
            guard shapesFit else { return false }
            if let former, former.records > 0 {
                let mine = Set(firstFieldOrder.map { Array($0.utf8) })
                let theirs = Set(former.firstFieldOrder.map { Array($0.utf8) })
                return !mine.isEmpty && mine.intersection(theirs).count * 2 >= mine.union(theirs).count
                    && Set(shapes.keys) == Set(former.shapes.keys)
            }
            return Set(shapes.keys) == Set(descriptor.indexes.map(\.id))
        }

        /// A definition inferred from the evidence alone.
        func infer(id: UInt32, name: String) -> BucketDescriptor {
            var indexes: [IndexDefinition] = []
            var used = Set<[UInt8]>()
            for (index, shape) in shapes.sorted(by: { $0.key < $1.key }) where shape.consistent {
                guard let kinds = shape.kinds, !kinds.isEmpty else { continue }
                // The first field (in the payloads' order) that computes every record's stored values.
                let field = (fields[index] ?? []).first { !used.contains(Array($0.field.utf8)) }
                var definition = IndexDefinition(
                    id: index, name: "index-\(index)", components: kinds, multiValued: shape.multiValued)
                if let field {
                    definition.name = field.field
                    definition.fields = [field.field]
                    definition.fieldForms = field.form == .date ? [.date] : nil
                }
                if used.contains(Array(definition.name.utf8)) { definition.name = "index-\(index)" }
                used.insert(Array(definition.name.utf8))
                indexes.append(definition)
            }
            let keyField = keyFields.flatMap { candidates in firstFieldOrder.first { candidates.contains($0) } }
            return BucketDescriptor(
                id: id, name: name, keyField: keyField, schemaVersion: schemaVersion, indexes: indexes,
                nextIndexId: (indexes.map(\.id).max() ?? 0) + 1)
        }

        /// A damaged copy of the catalog entry, kept where the records agree with it: an index the
        /// records use with another shape, or one the copy does not define, is inferred.
        mutating func merge(into copy: BucketDescriptor) -> BucketDescriptor {
            var descriptor = copy
            let inferred = infer(id: copy.id, name: copy.name)
            for definition in inferred.indexes {
                if let existing = descriptor.indexes.firstIndex(where: { $0.id == definition.id }) {
                    let kept = descriptor.indexes[existing]
                    if kept.components != definition.components || (definition.multiValued && !kept.multiValued) {
                        conflicts.append("index #\(definition.id) ('\(kept.name)')")
                        var replacement = definition
                        if !descriptor.indexes.contains(where: {
                            $0.id != definition.id && $0.name.hasSameBytes(as: kept.name)
                        }) {
                            replacement.name = kept.name
                        }
                        descriptor.indexes[existing] = replacement
                    }
                } else {
                    conflicts.append("index #\(definition.id)")
                    var added = definition
                    if descriptor.indexes.contains(where: { $0.name.hasSameBytes(as: added.name) }) {
                        added.name = "index-\(definition.id)"
                    }
                    descriptor.indexes.append(added)
                }
            }
            descriptor.schemaVersion = max(descriptor.schemaVersion, schemaVersion)
            descriptor.nextIndexId = max(descriptor.nextIndexId, (descriptor.indexes.map(\.id).max() ?? 0) + 1)
            return descriptor
        }

        func describe(_ descriptor: BucketDescriptor) -> String {
            var parts: [String] = []
            parts.append(descriptor.keyField.map { "key field '\($0)'" } ?? "no key field")
            if descriptor.indexes.isEmpty {
                parts.append("no indexes")
            } else {
                parts.append(
                    "indexes "
                        + descriptor.indexes.map { index in
                            let kinds = index.components.map(\.rawValue).joined(separator: ", ")
                            let field =
                                index.fields.map { " from field '\($0.joined(separator: "', '"))'" }
                                ?? ", values computed by code (no field found)"
                            return
                                "'\(index.name)' (id \(index.id), \(kinds)\(index.multiValued ? ", multi-valued" : "")\(field))"
                        }.joined(separator: ", "))
            }
            return parts.joined(separator: "; ")
        }
    }
}
