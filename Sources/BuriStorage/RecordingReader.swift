import Synchronization

/// A reader that notes every key and range read through it: the conditions a writer on a
/// shared engine sends with its commit, so that it applies only if nothing it read has changed.
///
/// ```swift
/// let snapshot = try engine.snapshot()
/// let reader = RecordingReader(snapshot)
/// let old = try reader.get(key)                 // noted
/// try engine.commit(batch, conditions: reader.conditions, sync: false)
/// ```
public final class RecordingReader: StorageReader {
    public let base: any StorageSnapshot
    public private(set) var keys: [[UInt8]] = []
    public private(set) var ranges: [KeyRange] = []

    public init(_ base: any StorageSnapshot) { self.base = base }

    /// What was read, as commit conditions against the base snapshot.
    public var conditions: StorageConditions { StorageConditions(snapshot: base, keys: keys, ranges: ranges) }

    public func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        keys.append(key)
        return try base.withValue(forKey: key, body)
    }

    public func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        self.keys.append(contentsOf: keys)
        return try base.values(forKeys: keys)
    }

    public func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        ranges.append(range)
        return try base.cursor(in: range, reverse: reverse)
    }

    public var prefersBatchedReads: Bool { base.prefersBatchedReads }
}

/// A reader that has already read a set of keys in one ``StorageReader/values(forKeys:)`` call
/// and answers point reads of them from memory; everything else goes to its base. What a writer
/// on a remote engine uses to read all the old records of a batch in one round trip.
///
/// ```swift
/// let reader = try PrefetchingReader(base, keys: recordKeys)   // one round trip
/// let old = try reader.get(recordKeys[0])                      // from memory
/// ```
public final class PrefetchingReader: StorageReader {
    public let base: any StorageReader
    private var known: [[UInt8]: [UInt8]?] = [:]

    public init(_ base: any StorageReader, keys: [[UInt8]]) throws {
        self.base = base
        var unique: [[UInt8]] = []
        var seen = Set<[UInt8]>()
        for key in keys where seen.insert(key).inserted { unique.append(key) }
        let values = try base.values(forKeys: unique)
        known.reserveCapacity(unique.count)
        for (key, value) in zip(unique, values) { known[key] = .some(value) }
    }

    public func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard let value = known[key] else { return try base.withValue(forKey: key, body) }
        guard let value else { return try body(nil) }
        return try value.withUnsafeBytes { try body($0) }
    }

    public func cursor(in range: KeyRange, reverse: Bool) throws -> any StorageCursor {
        try base.cursor(in: range, reverse: reverse)
    }

    public var prefersBatchedReads: Bool { base.prefersBatchedReads }
}
