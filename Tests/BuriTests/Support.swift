import BuriStorage
@_exported import BuriTestSupport
import Foundation
@testable import Buri
import LevelDB

struct PersonRecord: BuriSupport, Equatable, Hashable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<PersonRecord>(
        key: \.objectId,
        indexes: [.binary("locale", \.locale), .numeric("age", \.age)],
        bucket: "Person"
    )
}

/// A type with numbers of several kinds in one index, and optional / fractional values.
struct Measurement: BuriSupport, Equatable {
    var id: String
    var value: Double
    var count: Int64
    var big: UInt64
    var label: String?

    static let buri = BuriSchema<Measurement>(
        key: \.id,
        indexes: [.numeric("value", \.value), .numeric("count", \.count), .numeric("big", \.big), .binary("label", \.label)]
    )
}
