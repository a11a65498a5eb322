import BuriStorage

// Token totals of layout-2 text indexes (`docs/FORMAT.md` §6b): every write and delete changes
// its index's total by the document lengths it adds and removes, in the same batch (see
// `Writer.adjustTextTotal`), so ranking reads the average document length from one key.
extension RawBucket {
    /// The ids of the bucket's text indexes that keep document lengths and a token total.
    var lengthKeepingIndexIds: [UInt32] {
        madeDescriptor.indexes.compactMap { $0.text?.keepsLengths == true ? $0.id : nil }
    }

    /// The document length a layout-2 entry value starts with (0 for a value that does not read:
    /// `check` reports it and its total).
    static func documentLength(_ value: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        guard let length = try? Varint.read(value, at: &offset) else { return 0 }
        return Int(clamping: length)
    }

    /// The document length of the object whose header is `header` in text index `index`, read
    /// from one of its entries through `reader` (0 when the header lists none).
    func storedDocumentLength(
        _ header: RecordHeader, index: UInt32, key: String, reader: any StorageReader
    ) throws(BuriError) -> Int {
        if let stamp = header.textStamp(of: index) { return Int(clamping: stamp.length) }
        guard let entry = header.entries.first(where: { $0.index == index }) else { return 0 }
        return try run {
            try reader.withValue(forKey: entryKey(entry, objectKey: key)) { value in
                value.map { Self.documentLength($0) } ?? 0
            }
        }
    }

    /// The document length a write gives the object in text index `index`.
    static func documentLength(of write: RecordWrite, index: UInt32) -> Int {
        guard let position = write.header.entries.firstIndex(where: { $0.index == index }) else { return 0 }
        return write.entryValues.withValue(at: position) { documentLength($0) }
    }

    /// Notes in `writer` that the objects whose headers are `removed` leave the bucket: their
    /// document lengths leave the token totals.
    func subtractDocumentLengths(
        _ removed: [(key: String, header: RecordHeader)], reader: any StorageReader, writer: Writer
    ) throws(BuriError) {
        for index in lengthKeepingIndexIds {
            var total = 0
            for (key, header) in removed {
                total += try storedDocumentLength(header, index: index, key: key, reader: reader)
            }
            writer.adjustTextTotal(of: bucketId, index: index, bucket: name, by: -total)
        }
    }
}
