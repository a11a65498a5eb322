import BuriStorage

// Damaged records: a header that does not read is rebuilt from the index entries naming the object,
// so a damaged record can still be deleted or overwritten without leaving entries behind.
extension RawBucket {
    /// The header of the stored object `key`, read through the writer's reader.
    /// If the record is damaged so that its header cannot be read, the header is rebuilt from the
    /// index entries that name `key`, so a damaged record can still be deleted or overwritten
    /// without leaving entries behind.
    func currentHeader(forKey key: String, reader: any StorageReader) throws(BuriError) -> RecordHeader? {
        let header = try run {
            try reader.withValue(forKey: recordKey(key)) { buffer -> RecordHeader?? in
                guard let buffer else { return .some(nil) }
                return (try? RecordHeader.parse(buffer).0).map { .some($0) }
            }
        }
        if let header { return header }
        return try entriesNaming(key, reader: reader)
    }

    /// A header listing every index entry of this bucket that names object `key`, found by scanning
    /// the bucket's indexes (entries that do not parse are skipped). For damaged records only.
    private func entriesNaming(_ key: String, reader: any StorageReader) throws(BuriError) -> RecordHeader {
        let objectKey = Array(key.utf8)
        var entries: [RecordHeader.Entry] = []
        try run {
            for index in madeDescriptor.indexes {
                let cursor = try reader.cursor(in: .prefix(Keyspace.indexPrefix(bucket: bucketId, index: index.id)))
                while try cursor.next() {
                    let tuple = cursor.withKey { raw -> [UInt8]? in
                        guard let parts = try? Keyspace.splitIndexEntry(raw, arity: index.components.count),
                            raw[parts.objectKey].elementsEqual(objectKey)
                        else { return nil }
                        return Array(raw[parts.tuple])
                    }
                    if let tuple { entries.append(RecordHeader.Entry(index: index.id, tuple: tuple)) }
                }
            }
        }
        return RecordHeader(schemaVersion: 0, entries: entries)
    }
}
