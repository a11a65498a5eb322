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

/// SplitMix64, so random tests reproduce.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
