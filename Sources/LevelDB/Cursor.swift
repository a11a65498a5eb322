import CLevelDB

/// A position in a ``Database`` that moves through the keys of a ``KeyRange``, forward or in
/// reverse, and never past the range's ends.
///
/// The cursor starts *before* its first entry. Each ``next()`` moves onto the next entry and
/// returns `false` once the range is exhausted; ``seek(_:)`` then positions it again, as it does
/// any time (the C iterator is released by ``close()``, after an error, or when the cursor is
/// deallocated, whichever comes first).
///
/// ```swift
/// let cursor = try db.cursor(in: .prefix(Array("user:".utf8)))
/// while try cursor.next() {
///     let key = cursor.key                  // a copy
///     let size = cursor.withValue { $0.count }  // no copy
/// }
/// ```
public final class Cursor {
    private enum State { case unpositioned, positionedUnread, onEntry, finished }

    private var iterator: OpaquePointer?
    private let handle: Handle
    private let readOptions: CReadOptions
    /// The range this cursor is confined to.
    public let range: KeyRange
    /// Whether the cursor moves from the last key to the first.
    public let isReverse: Bool
    private var state: State = .unpositioned
    /// The error that ended the cursor, thrown again by every later ``next()``: a cursor that met
    /// damage never looks like one that reached the end of its range.
    private var failure: LevelDBError?
    /// Whether a move reads LevelDB's error status only when the walk stops (the iterator runs
    /// out, or leaves the range) and at ``checkStatus()``, instead of after every move. See
    /// ``defersStatusChecks``.
    private var deferring = false

    init(handle: Handle, options: ReadOptions, range: KeyRange, reverse: Bool) {
        self.handle = handle
        self.readOptions = CReadOptions(options)
        self.range = range
        self.isReverse = reverse
        self.iterator = leveldb_create_iterator(handle.db, readOptions.pointer)
        if range.isEmpty { close() }
    }

    deinit { close() }

    /// Releases the C iterator now. The cursor then reports no more entries.
    public func close() {
        if let iterator {
            leveldb_iter_destroy(iterator)
            self.iterator = nil
        }
        state = .finished
    }

    /// Moves onto the next entry of the range. Returns `false` when there is none.
    /// - Throws: ``LevelDBError`` if LevelDB met an I/O error or corruption while moving (or
    ///   while seeking before it), including a damaged table block it skipped; once thrown, every
    ///   later call throws the same error.
    @discardableResult
    public func next() throws(LevelDBError) -> Bool {
        if let failure { throw failure }
        guard let iterator else { return false }
        switch state {
        case .finished:
            return false
        case .unpositioned:
            positionAtStart(iterator)
        case .positionedUnread:
            break
        case .onEntry:
            if isReverse { leveldb_iter_prev(iterator) } else { leveldb_iter_next(iterator) }
        }
        return try settle(iterator)
    }

    /// Positions the cursor so that the following ``next()`` returns the first entry at or after
    /// `key` (in reverse: the last entry at or before `key`), clamped to the range. An error met
    /// while seeking (a damaged block) is thrown by that ``next()``.
    public func seek(_ key: [UInt8]) {
        guard let iterator else { return }
        if isReverse {
            if let end = range.end, compareBytes(key, end) >= 0 {
                positionAtStart(iterator)
            } else {
                withCBytes(key) { leveldb_iter_seek(iterator, $0, $1) }
                if leveldb_iter_valid(iterator) != 0 {
                    var length = 0
                    let current = leveldb_iter_key(iterator, &length)
                    if compareBytes(UnsafeRawBufferPointer(start: current, count: length), key) > 0 {
                        leveldb_iter_prev(iterator)
                    }
                } else {
                    leveldb_iter_seek_to_last(iterator)
                }
            }
        } else {
            if let start = range.start, compareBytes(key, start) < 0 {
                positionAtStart(iterator)
            } else {
                withCBytes(key) { leveldb_iter_seek(iterator, $0, $1) }
            }
        }
        state = .positionedUnread
    }

    private func positionAtStart(_ iterator: OpaquePointer) {
        if isReverse {
            if let end = range.end {
                withCBytes(end) { leveldb_iter_seek(iterator, $0, $1) }
                if leveldb_iter_valid(iterator) != 0 {
                    leveldb_iter_prev(iterator)
                } else {
                    leveldb_iter_seek_to_last(iterator)
                }
            } else {
                leveldb_iter_seek_to_last(iterator)
            }
        } else {
            if let start = range.start {
                withCBytes(start) { leveldb_iter_seek(iterator, $0, $1) }
            } else {
                leveldb_iter_seek_to_first(iterator)
            }
        }
    }

    /// Checks the C iterator after a move (or a seek): failed, past the range, or inside it.
    ///
    /// By default the status is read after *every* move, not only when the iterator runs out:
    /// when a table block cannot be read (a checksum mismatch, a truncated or garbled block),
    /// LevelDB's table iterator remembers the error and moves on to the next block while staying
    /// valid. Checked only at the end, such a skipped block would go unnoticed by a scan that
    /// stops early (a limit, a consumer that stops) and would make it return fewer entries as if
    /// complete. With ``defersStatusChecks`` the status is read where the walk leaves its range
    /// or runs out, and at ``checkStatus()``, which a walk that stops earlier must call.
    private func settle(_ iterator: OpaquePointer) throws(LevelDBError) -> Bool {
        if !deferring { try readStatus(iterator) }
        // Run out of the range: no entry until a seek (the iterator stays, so a seek can
        // position it again; a cursor that could not would skip every later entry silently).
        guard leveldb_iter_valid(iterator) != 0 else {
            if deferring { try readStatus(iterator) }
            state = .finished
            return false
        }
        var length = 0
        let current = UnsafeRawBufferPointer(start: leveldb_iter_key(iterator, &length), count: length)
        let inside: Bool
        if isReverse {
            inside = range.start.map { compareBytes(current, $0) >= 0 } ?? true
        } else {
            inside = range.end.map { compareBytes(current, $0) < 0 } ?? true
        }
        guard inside else {
            if deferring { try readStatus(iterator) }
            state = .finished
            return false
        }
        state = .onEntry
        return true
    }

    /// Whether the cursor is on an entry (the last ``next()`` returned `true`).
    public var isOnEntry: Bool { state == .onEntry && iterator != nil }

    /// Whether ``next()`` reads LevelDB's error status only when the walk stops — the iterator
    /// runs out or leaves the range — instead of after every move (false by default). Reading the
    /// status asks every table iterator of every level, which costs a third as much as the move
    /// itself; a walk over many small entries that checks once at its end is that much faster.
    ///
    /// It is safe only for a walk that calls ``checkStatus()`` before it uses what it read as
    /// complete: a damaged block LevelDB skipped while moving leaves the iterator valid on a later
    /// entry, and LevelDB keeps that error for the iterator's lifetime (its table iterators save
    /// the first error of every block they leave, and no seek clears it), so one check at the end
    /// reports any block skipped since the cursor was made.
    ///
    /// ```swift
    /// let cursor = try db.cursor(in: .prefix(term))
    /// cursor.defersStatusChecks = true
    /// var count = 0
    /// while try cursor.next() { count += 1 }
    /// try cursor.checkStatus()   // before `count` is trusted
    /// ```
    public var defersStatusChecks: Bool {
        get { deferring }
        set { deferring = newValue }
    }

    /// Throws the error LevelDB met since the cursor was made (a damaged block it skipped, an I/O
    /// error), as ``next()`` would; afterwards every ``next()`` throws it too. Nothing when
    /// there was none.
    public func checkStatus() throws(LevelDBError) {
        if let failure { throw failure }
        guard let iterator else { return }
        try readStatus(iterator)
    }

    /// Reads the C iterator's error status, and fails the cursor (closed, the error kept) if set.
    private func readStatus(_ iterator: OpaquePointer) throws(LevelDBError) {
        var error: UnsafeMutablePointer<CChar>? = nil
        leveldb_iter_get_error(iterator, &error)
        if let error {
            close()
            let message = String(cString: error)
            leveldb_free(error)
            let failure = LevelDBError(statusMessage: message, path: handle.path)
            self.failure = failure
            throw failure
        }
    }

    /// The current entry's key (empty when not on an entry).
    public var key: [UInt8] { withKey { [UInt8]($0) } }

    /// The current entry's value (empty when not on an entry).
    public var value: [UInt8] { withValue { [UInt8]($0) } }

    /// Lends the current key to `body` without copying. Valid only inside `body` and only until
    /// the cursor moves. Empty when not on an entry.
    public func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard state == .onEntry, let iterator else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        var length = 0
        let pointer = leveldb_iter_key(iterator, &length)
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// Lends the current value to `body` without copying. Valid only inside `body` and only until
    /// the cursor moves. Empty when not on an entry.
    public func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard state == .onEntry, let iterator else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        var length = 0
        let pointer = leveldb_iter_value(iterator, &length)
        return try body(UnsafeRawBufferPointer(start: pointer, count: length))
    }
}

/// One key and its value, copied out of the database.
public struct Entry: Sendable, Hashable {
    public var key: [UInt8]
    public var value: [UInt8]

    public init(key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }
}
