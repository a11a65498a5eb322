import Synchronization

/// One commit as an observer of an engine sees it: the keys it put and deleted, and the engine's
/// revision of the commit (increasing from commit to commit).
///
/// ```swift
/// let observation = engine.observeCommits { event in
///     for case let .put(key, _) in event.changes { print(key.count) }
/// }
/// observation.cancel()
/// ```
public struct StorageCommitEvent: Sendable {
    /// One key's change in a commit.
    public enum Change: Sendable, Hashable {
        case put(key: [UInt8], value: [UInt8])
        case delete(key: [UInt8])
    }

    /// What the commit changed, in the engine's order.
    public var changes: [Change]
    /// The engine's revision of the commit.
    public var revision: UInt64

    public init(changes: [Change], revision: UInt64) {
        self.changes = changes
        self.revision = revision
    }
}

/// A running observation of an engine's commits; ``cancel()`` stops it (idempotent).
///
/// ```swift
/// let observation = StorageObservation { print("stopped") }
/// observation.cancel()   // prints once
/// ```
public final class StorageObservation: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    public init(cancel: @escaping @Sendable () -> Void) {
        action = Mutex(cancel)
    }

    /// Stops the observation; later calls do nothing.
    public func cancel() {
        let body = action.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        body?()
    }
}
