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
}
