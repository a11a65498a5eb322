import BuriCodec

/// An object given as raw data, for tools that store objects without their Swift type
/// (`buri import`): its key, CBOR payload and index values by index name.
///
/// ```swift
/// let payload = try CBORValue(json: #"{"id":"p1","age":20}"#).encoded()
/// try raw.store([RawObject(key: "p1", payload: payload, indexValues: ["age": [[20]]])])
/// ```
public struct RawObject: Sendable, Hashable {
    public var key: String
    /// The object's CBOR encoding.
    public var payload: [UInt8]
    /// For each index, the value tuples of the object's entries (one-element tuples for a plain index).
    /// Indexes not named get no entry. Names are matched as bytes (see ``IndexName``). A text
    /// index's entries are always computed from the payload's field, and values given for it ignored.
    public var indexValues: [IndexName: [[IndexValue]]]
    /// The schema version written into the object's record header; `nil` (the default) writes the
    /// bucket's current one (its catalog `schemaVersion`), as its Swift type writes it.
    public var schemaVersion: UInt64?

    public init(key: String, payload: [UInt8], indexValues: [IndexName: [[IndexValue]]], schemaVersion: UInt64? = nil) {
        self.key = key
        self.payload = payload
        self.indexValues = indexValues
        self.schemaVersion = schemaVersion
    }

    /// An object whose index values are keyed by `String`. A `[String: …]` dictionary cannot hold
    /// two names that differ only in Unicode normalization; use ``IndexName`` keys for those.
    public init(
        key: String, payload: [UInt8], indexValues: [String: [[IndexValue]]] = [:], schemaVersion: UInt64? = nil
    ) {
        var byName: [IndexName: [[IndexValue]]] = [:]
        for (name, tuples) in indexValues { byName[IndexName(name)] = tuples }
        self.init(key: key, payload: payload, indexValues: byName, schemaVersion: schemaVersion)
    }
}

extension RawBucket {
    /// Stores raw objects in one atomic batch, exactly as ``Bucket/store(_:)-(Sequence<T>)`` does
    /// for typed ones: each object's old index entries are replaced, unique indexes are checked, and
    /// on any error nothing is written. Each record carries the object's ``RawObject/schemaVersion``,
    /// or, when it has none, the bucket's (its catalog entry's `schemaVersion`).
    /// - Throws: ``BuriError/unknownIndex(bucket:index:known:)`` for an index the bucket lacks,
    ///   ``BuriError/invalidIndexValue(bucket:key:index:reason:)`` for a tuple of the wrong shape,
    ///   ``BuriError/encodingFailed(bucket:key:reason:)`` for a payload that is not one CBOR item or
    ///   has a map with a repeated key.
    public func store(_ objects: [RawObject], sync: Bool? = nil) throws(BuriError) {
        var writes: [RecordWrite] = []
        writes.reserveCapacity(objects.count)
        // Equal text terms of the batch share one tuple array.
        let interner = TextTupleInterner()
        for object in objects {
            try validateKey(object.key)
            let item: CBORValue
            do {
                item = try CBORValue(decoding: object.payload)
            } catch {
                throw .encodingFailed(
                    bucket: name, key: object.key, reason: "the payload is not one CBOR item: \(error)")
            }
            if let repeated = item.firstRepeatedMapKey() {
                throw .encodingFailed(
                    bucket: name, key: object.key,
                    reason: "the payload has a map with the key \(repeated.exactJSONString()) twice; give each key once"
                )
            }
            var entries: [RecordHeader.Entry] = []
            for (indexName, tuples) in object.indexValues.sorted(by: { $0.key < $1.key }) {
                guard let definition = descriptor.index(named: indexName.name) else {
                    throw .unknownIndex(bucket: name, index: indexName.name, known: descriptor.indexes.map(\.name))
                }
                // A text index's entries carry positions, which only its field gives: they are
                // computed from the payload below, whatever tuples are given.
                guard definition.text == nil else { continue }
                try appendEntries(tuples, for: definition, key: object.key, to: &entries)
            }
            /// Values parallel to `entries` once a text index gives one (the others' are empty).
            var entryValues = EntryValues()
            for definition in descriptor.indexes where definition.text != nil {
                entryValues.appendEmpty(upTo: entries.count)
                let terms: [[UInt8]]
                do {
                    terms = try definition.appendTextEntries(
                        of: item, bucket: name, values: &entryValues, interner: interner)
                } catch let BuriError.invalidIndexValue(_, _, index, reason) {
                    throw .invalidIndexValue(bucket: name, key: object.key, index: index, reason: reason)
                }
                for tuple in terms {
                    entries.append(RecordHeader.Entry(index: definition.id, tuple: definition.stored(encoded: tuple)))
                }
            }
            // Without one of its own, an object carries the bucket's schema version: the version the
            // catalog says its objects are written at (docs/FORMAT.md §10).
            let header = RecordHeader(
                schemaVersion: object.schemaVersion ?? madeDescriptor.schemaVersion, entries: entries)
            writes.append(
                RecordWrite(key: object.key, header: header, payload: object.payload, entryValues: entryValues))
        }
        if !writes.isEmpty { try write(writes, sync: sync) }
    }
}
