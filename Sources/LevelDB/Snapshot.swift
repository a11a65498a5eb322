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
    /// C read options with this snapshot and otherwise default settings (checksums verified), made once, so point reads
    /// at the snapshot need not create and destroy options each time.
    let readOptions: OpaquePointer

    init(handle: Handle) {
        self.handle = handle
        self.pointer = leveldb_create_snapshot(handle.db)
        readOptions = leveldb_readoptions_create()
        leveldb_readoptions_set_snapshot(readOptions, pointer)
        leveldb_readoptions_set_verify_checksums(readOptions, ReadOptions().verifyChecksums ? 1 : 0)
    }

    deinit {
        leveldb_readoptions_destroy(readOptions)
        leveldb_release_snapshot(handle.db, pointer)
    }
}
