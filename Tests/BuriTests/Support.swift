import BuriStorage
@_exported import BuriTestSupport
import Foundation
@testable import Buri
import LevelDB

/// The people most BuriTests suites store, in bucket "Person". A local type, not shared with
/// BuriToolTests' `Person`: that one names its JSON fields and key field (what `buri import` maps
/// members by), so its stored catalog differs from this one's, which these suites write and read.
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
        indexes: [
            .numeric("value", \.value), .numeric("count", \.count), .numeric("big", \.big), .binary("label", \.label),
        ]
    )
}

/// Notes: a multi-valued index, a unique one and a compound one (most query suites use them).
struct Note: BuriSupport, Equatable {
    var id: String
    var tags: [String]
    var scores: [Double]
    var email: String
    var locale: String
    var age: Int

    static let buri = BuriSchema<Note>(
        key: \.id,
        indexes: [
            .binary("tags", \.tags),
            .numeric("scores", \.scores),
            .binary("email", \.email, unique: true),
            .compound("locale_age", .binary(\.locale), .numeric(\.age)),
            .binary("locale", \.locale),
            .numeric("age", \.age),
        ]
    )

    init(
        _ id: String, tags: [String] = [], scores: [Double] = [], email: String? = nil, locale: String = "EN",
        age: Int = 0
    ) {
        self.id = id
        self.tags = tags
        self.scores = scores
        self.email = email ?? "\(id)@example.com"
        self.locale = locale
        self.age = age
    }
}

/// The index-build progress reports a test received, collected from any thread.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [IndexBuildProgress] = []
    func append(_ progress: IndexBuildProgress) { lock.withLock { entries.append(progress) } }
    var all: [IndexBuildProgress] { lock.withLock { entries } }
}
