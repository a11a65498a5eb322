import Buri
import BuriEtcd
import Foundation
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Reading commands read a private snapshot of the database's files (DatabaseFileSnapshot, from BuriEngines), so
// that they never create or change a file in the database directory — LevelDB itself cannot open
// a database without writing its lock, LOG, MANIFEST, CURRENT and a new log, and it may compact —
// and so that they read a database another process holds open, one on a read-only file system,
// and one on a full disk.

/// Where snapshots are made: `$TMPDIR`, else `/tmp`.
func snapshotParent() -> String {
    if let value = ProcessInfo.processInfo.environment["TMPDIR"], !value.isEmpty { return value }
    return "/tmp"
}

/// The snapshots this process made: removed when it exits, and when a signal ends it.
///
/// SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked in every thread from the start of `main`
/// (threads made later inherit the mask) and taken by one thread waiting in `sigwait`, so a
/// signal is never lost nor acted on by default while a snapshot exists. That thread removes the
/// snapshots, then ends the process as the signal would have. The creation of a snapshot's
/// directory and the handler's search for this process's directories exclude each other (see
/// ``creatingDirectory(_:)``): no directory can appear after the search.
enum SnapshotCleanup {
    private static let live = Mutex<(snapshots: [DatabaseFileSnapshot], installed: Bool)>(([], false))
    /// Set, under `live`'s lock, when a signal is ending the process: no snapshot directory is
    /// made after, and its snapshot is being removed under the command.
    private static let terminating = Atomic<Bool>(false)
    /// Set, under `gate`, when the process is exiting normally (`exit`, through `atexit`): a
    /// signal handled after leaves the removal to the exit path, so that two removals never
    /// race and the exit never cuts the handler's removal short.
    private static let exiting = Atomic<Bool>(false)
    /// Held while a snapshot directory may be created (``excludingTheHandler(_:)``) and while the
    /// handler marks the process as ending.
    private static let gate = NSLock()
    /// The signals that end the process after removing its snapshots.
    static let handledSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Installs the removal at exit and on the handled signals, once. Called first in `main`,
    /// before any other thread exists, so that every thread blocks those signals.
    static func install() {
        let first = live.withLock { state -> Bool in
            defer { state.installed = true }
            return !state.installed
        }
        guard first else { return }
        atexit { SnapshotCleanup.atExit() }
        // A reader that goes away (`buri export DB | head`) makes a write fail with EPIPE, which
        // ends the command through its normal path (removing the snapshot), not a silent death.
        signal(SIGPIPE, SIG_IGN)
        var set = signalSet(handledSignals)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let waiter = Thread {
            var set = signalSet(handledSignals)
            var number: Int32 = 0
            while sigwait(&set, &number) != 0 {}
            end(by: number)
        }
        waiter.name = "buri-signals"
        waiter.start()
    }

    private static func signalSet(_ numbers: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for number in numbers { sigaddset(&set, number) }
        return set
    }

    /// Removes this process's snapshots, then ends it by `number`'s default action.
    private static func end(by number: Int32) -> Never {
        // The command may fail once its files are gone: it must not exit with that failure (see
        // holdIfTerminating) before the signal ends it. Under the lock: no directory is made after.
        gate.lock()
        if exiting.load(ordering: .sequentiallyConsistent) {
            // The command has finished and the process is exiting: its exit path removes the
            // snapshots; this thread waits for the exit.
            gate.unlock()
            waitForTheEnd()
        }
        terminating.store(true, ordering: .sequentiallyConsistent)
        gate.unlock()
        removeAll()
        // And any still being made (not yet registered): this process's directories.
        let parent = snapshotParent()
        let mine = DatabaseFileSnapshot.directoryPrefix + "\(getpid())-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(mine) {
            DatabaseFileSnapshot.removeDirectory(atPath: parent + "/" + name)
        }
        // End as the signal would have ended the process: its default action, unblocked on this
        // thread, raised here.
        signal(number, SIG_DFL)
        var one = signalSet([number])
        pthread_sigmask(SIG_UNBLOCK, &one, nil)
        raise(number)
        _exit(128 + number)
    }

    /// Runs `create` (which makes a snapshot's directory) unless a signal is ending the process,
    /// excluding the signal handler's search for this process's directories; while it is ending,
    /// waits for the end instead.
    static func creatingDirectory(_ create: () -> Void) {
        excludingTheHandler {
            create()
            TestSignalHook.signal(.afterDirectory)
        }
        TestSignalHook.waitUntilHandled(.afterDirectory)
    }

    /// Every normal exit (`exit`, by any path): unless a signal is already ending the process
    /// (then waits for that end), marks it as exiting, under `gate`, and removes its snapshots.
    /// A signal whose handling had not begun is then left to the exit, which removes everything;
    /// one whose handling had begun ends the process itself. Either way exactly one of them
    /// removes the snapshots, to the end.
    fileprivate static func atExit() {
        gate.lock()
        if terminating.load(ordering: .sequentiallyConsistent) {
            gate.unlock()
            waitForTheEnd()
        }
        exiting.store(true, ordering: .sequentiallyConsistent)
        gate.unlock()
        removeAll()
    }

    /// Runs `body` — which may create a directory of this process's snapshots: `mkdtemp`, or
    /// LevelDB opening a snapshot (its open makes the database directory again if the handler
    /// renamed it away) — unless a signal is ending the process, excluding the handler's search
    /// for this process's directories; while it is ending, waits for the end instead.
    static func excludingTheHandler<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        gate.lock()
        guard !terminating.load(ordering: .sequentiallyConsistent) else {
            gate.unlock()
            waitForTheEnd()
        }
        defer { gate.unlock() }
        return try body()
    }

    /// Removes `files` when the process exits or a signal ends it (see ``install()``).
    static func register(_ files: DatabaseFileSnapshot) {
        install()
        live.withLock { $0.snapshots.append(files) }
    }

    /// Called before the process exits: while a signal is ending it, waits for that instead of
    /// reporting the failure its vanishing snapshot caused.
    static func holdIfTerminating() {
        guard terminating.load(ordering: .sequentiallyConsistent) else { return }
        waitForTheEnd()
    }

    /// Waits for the signal thread to end the process.
    private static func waitForTheEnd() -> Never {
        while true { pause() }
    }

    /// Whether a signal is ending the process.
    static var isTerminating: Bool { terminating.load(ordering: .sequentiallyConsistent) }

    static func removeAll() {
        let snapshots = live.withLock { state -> [DatabaseFileSnapshot] in
            defer { state.snapshots = [] }
            return state.snapshots
        }
        for files in snapshots { files.remove() }
    }
}

/// A signal at a known point of taking a snapshot, for tests that must not depend on timing
/// (docs/DURABILITY.md, "Test hooks"): with `BURI_TEST_SIGTERM_AT_SNAPSHOT=before-directory` a
/// reading command sends itself SIGTERM just before its snapshot's directory is made, and waits
/// until the signal is being handled before it goes on; with `after-directory`, right after the
/// directory is made, before a file is in it; with `before-open`, when the snapshot is taken and
/// LevelDB is about to open it (waiting as before-directory does). Either way the process must end by SIGTERM and
/// leave no directory. Without the variable nothing changes.
///
/// ```sh
/// BURI_TEST_SIGTERM_AT_SNAPSHOT=after-directory buri export db.buri   # ends by SIGTERM
/// ```
enum TestSignalHook {
    enum Point: String {
        case beforeDirectory = "before-directory", afterDirectory = "after-directory", beforeOpen = "before-open"
    }

    static let point: Point? = ProcessInfo.processInfo.environment["BURI_TEST_SIGTERM_AT_SNAPSHOT"].flatMap {
        Point(rawValue: $0)
    }

    /// Sends SIGTERM to this process at `here` if the hook asks for it; before the directory,
    /// also waits until the signal is being handled. After the directory it is sent while the
    /// handler is excluded (the directory made, not yet registered): the wait comes once the
    /// exclusion ends (``waitUntilHandled(_:)``), so the command cannot finish first.
    static func signal(_ here: Point) {
        guard point == here else { return }
        kill(getpid(), SIGTERM)
        if here != .afterDirectory { waitUntilHandled(here) }
    }

    /// Waits until the signal sent at `here` is being handled, if the hook sent one there.
    static func waitUntilHandled(_ here: Point) {
        guard point == here else { return }
        while !SnapshotCleanup.isTerminating { sched_yield() }
    }
}

/// Opens the existing database in directory `path` through a private snapshot of its files.
func openSnapshot(_ path: String) throws -> BuriDatabase {
    let parent = snapshotParent()
    SnapshotCleanup.install()
    TestSignalHook.signal(.beforeDirectory)
    let files: DatabaseFileSnapshot
    do {
        files = try DatabaseFileSnapshot.take(
            of: path, in: parent, creatingDirectory: SnapshotCleanup.creatingDirectory)
    } catch {
        throw ToolError(.failure, snapshotFailureMessage(path, error))
    }
    SnapshotCleanup.register(files)
    var options = ToolEncryption.options()
    options.createIfMissing = false
    options.purgesInBackground = false
    do {
        TestSignalHook.signal(.beforeOpen)
        return try SnapshotCleanup.excludingTheHandler { () throws(BuriError) in
            try BuriDatabase(readingSnapshot: files, options: options)
        }
    } catch let error {
        // Opening writes only in the snapshot: a full disk there is the temporary directory's.
        if case .storage(let storage) = error,
            storage.message.contains("No space left on device") || storage.message.contains("Disk quota exceeded")
        {
            throw ToolError(
                .failure,
                snapshotFailureMessage(
                    path,
                    DatabaseFileSnapshotError(
                        kind: .noSpace, source: path, temporaryDirectory: parent, detail: storage.message)))
        }
        throw ToolError(error, path: path)
    }
}

/// Why the snapshot of `path` could not be made, and what to do.
func snapshotFailureMessage(_ path: String, _ error: DatabaseFileSnapshotError) -> String {
    let how =
        "buri reads a database through a private snapshot of its files, made in the temporary directory '\(error.temporaryDirectory)'"
    switch error.kind {
    case .noSpace:
        return "cannot read '\(path)': \(how), and that disk is full (\(error.detail)); the database was not changed: "
            + "free space there, or point TMPDIR at a directory on another disk (TMPDIR=/other/dir buri …)"
    case .temporaryDirectory:
        return
            "cannot read '\(path)': \(how), which cannot be used (\(error.detail)); point TMPDIR at a writable directory (TMPDIR=/other/dir buri …)"
    case .unreadable:
        return "cannot read '\(path)': \(error.detail)"
    case .keptChanging:
        return "cannot read '\(path)': \(error.description)"
    }
}

// MARK: - Writing on a full disk

/// Purges the stages of imports that ended without publishing — a killed import, or one that
/// failed on a full disk where its purge could not be written — and compacts their key ranges so
/// that their disk space is given back (a LevelDB database opened by this process alone: every
/// stage found at open is abandoned). Nothing to do on an etcd location (other clients may be
/// loading their stages there).
func reclaimAbandonedStages(_ db: BuriDatabase, path: String) throws {
    guard hasFiles(path) else { return }
    let pending = try mapErrors(path: path) { try db.pendingPurges() }
    guard pending.contains(where: { $0.state == .staging }) else { return }
    do {
        _ = try mapErrors(path: path) { try db.purgeRetiredBuckets(reclaimingSpace: true) }
    } catch let error as ToolError {
        guard error.isDiskFull else { throw error }
        throw ToolError(.failure, diskFullMessage(path) + stageLeftNote(path), diskFull: true)
    }
}

/// What a failed import on a full disk says about its stage when it could not remove it.
func stageLeftNote(_ path: String) -> String {
    "; the objects an import had staged (invisible, never published) could not be removed while the disk is full: "
        + "once space is freed, the next command that writes to '\(path)' (such as `buri compact \(path)`) removes them and gives their space back"
}

/// After an import into the existing database at `path` failed because the disk is full, removes
/// its stage: the database handle that met the full disk refuses to write again (its log may end
/// in a partial record), so the database is opened anew, the stage purged and its key ranges
/// compacted. Returns whether that worked — on a disk that is still full, opening (which writes
/// LevelDB's log into a table) or purging fails, and the stage stays until the next writing open.
func removeStageAfterDiskFull(_ path: String) -> Bool {
    var options = ToolEncryption.options()
    options.createIfMissing = false
    guard let db = try? BuriDatabase(location: path, options: options, engines: engines) else { return false }
    defer { db.close() }
    guard (try? db.purgeRetiredBuckets(reclaimingSpace: true)) != nil else { return false }
    return (try? db.pendingPurges().isEmpty) == true
}

/// Removes what a failed attempt to create a database at `path` left there (LevelDB writes
/// `LOCK` and `LOG` before it meets a full disk writing its manifest): the directory, if the
/// attempt made it, else the files LevelDB made in it. Not after an attempt that found another
/// process creating or holding the database (in use, or already there).
func removeFailedCreation(_ path: String, error: Error, wasEmptyDirectory: Bool) {
    if let tool = error as? ToolError,
        tool.status == .inUse || tool.message.contains("error_if_exists") || tool.message.contains("exists (")
    {
        return
    }
    guard hasFiles(path) else { return }
    let manager = FileManager.default
    let names = (try? manager.contentsOfDirectory(atPath: path)) ?? []
    let made = names.filter { name in
        LevelDBEngine.isOwnFile(name)
    }
    // Anything else in it is not LevelDB's: leave the directory alone.
    guard made.count == names.count else { return }
    for name in made { try? manager.removeItem(atPath: (path as NSString).appendingPathComponent(name)) }
    if !wasEmptyDirectory { try? manager.removeItem(atPath: path) }
}
