// The whole codec, not only the reader's types: a scoped import would hide `CBORField`'s `~=`
// (what `switch field { case "name": ... }` needs) from a module that imports only Buri.
@_exported import BuriCodec
// The text index's query type (`TextQuery`) and tokenizer are part of the search API.
@_exported import BuriText

// The opt-in decoding fast path: a bucket whose type adopts `CBORRecordDecodable` reads its
// objects through `T(record:)`, a hand-written walk over the record's fields, instead of
// `init(from:)`. The stored bytes are the same either way (encoding stays `Encodable`).

/// `CBORRecordDecodable` under Buri's name: adopt it to read a bucket's objects through a
/// hand-written `init(record:)` (see `CBORRecordReader`), as GRDB's `init(row:)` reads columns.
///
/// ```swift
/// struct Person: BuriSupport {
///     var objectId: String, name: String, locale: String, age: Int
///     static let buri = BuriSchema<Person>(key: \.objectId, indexes: [.numeric("age", \.age)])
/// }
///
/// extension Person: BuriRecordDecodable {   // an extension keeps the memberwise init
///     init(record: inout CBORRecordReader) throws {
///         var objectId: String?, name: String?, locale: String?, age: Int?
///         while let field = try record.nextField() {
///             switch field {
///             case "objectId": objectId = try record.string()
///             case "name": name = try record.string()
///             case "locale": locale = try record.string()
///             case "age": age = try record.int()
///             default: try record.skip()
///             }
///         }
///         guard let objectId else { throw record.missingField("objectId") }
///         guard let name else { throw record.missingField("name") }
///         guard let locale else { throw record.missingField("locale") }
///         guard let age else { throw record.missingField("age") }
///         self.init(objectId: objectId, name: name, locale: locale, age: age)
///     }
/// }
/// ```
///
/// Every typed read of the bucket (`object(forKey:)`, queries, pages, cursors, parallel large
/// reads, live queries, index rebuilds) then uses it; a failure is the same
/// ``BuriError/decodingFailed(bucket:key:type:reason:)``.
public typealias BuriRecordDecodable = CBORRecordDecodable

/// Decodes one payload into a `T`.
typealias RecordDecoder<T> = @Sendable (UnsafeRawBufferPointer) throws -> T

enum RecordDecoding {
    /// `T(record:)` as a function if `T` adopts ``CBORRecordDecodable``, else nil.
    static func decoder<T: Decodable>(for type: T.Type) -> RecordDecoder<T>? {
        guard let recordType = T.self as? any CBORRecordDecodable.Type else { return nil }
        return decoder(recordType, as: T.self)
    }

    /// `Decodable`'s `init(from:)` through the CBOR decoder, as a function.
    static func codableDecoder<T: Decodable & SendableMetatype>(for type: T.Type) -> RecordDecoder<T> {
        { payload in try CBORDecoder().decode(T.self, from: payload) }
    }

    private static func decoder<R: CBORRecordDecodable, T>(_ recordType: R.Type, as type: T.Type) -> RecordDecoder<T>? {
        // `R` is `T` (the cast above found `T` conforming); the check makes the bit cast below
        // an identity that cannot be wrong.
        guard R.self == T.self else { return nil }
        return { payload in unsafeBitCast(try CBORRecordReader.decode(R.self, from: payload), to: T.self) }
    }
}
