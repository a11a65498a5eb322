import CLevelDB

/// A read-only view of a ``Database`` frozen at the moment it was taken.
///
/// Reads through a snapshot never see later writes. The snapshot is released when the last
/// reference to it goes away; it keeps the database files open until then.
///
/// ```swift
/// let snapshot = try db.snapshot()
/// let cursor = try db.cursor(in: .prefix(prefix), options: ReadOptions(snapshot: snapshot))
/// ```
public final class Snapshot: @unchecked Sendable {
    // @unchecked: a LevelDB snapshot is immutable and may be read from any thread.
    let pointer: OpaquePointer
    private let handle: Handle

    init(handle: Handle) {
        self.handle = handle
        self.pointer = leveldb_create_snapshot(handle.db)
    }

    deinit { leveldb_release_snapshot(handle.db, pointer) }
}
