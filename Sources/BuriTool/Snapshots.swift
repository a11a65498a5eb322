import Buri
import BuriEtcd
import Dispatch
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
enum SnapshotCleanup {
    private static let live = Mutex<(snapshots: [DatabaseFileSnapshot], installed: Bool)>(([], false))
    /// Set when a signal is ending the process: its snapshot is being removed under the command.
    private static let terminating = Atomic<Bool>(false)
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// Installs the removal at exit and on SIGINT, SIGTERM, SIGHUP and SIGQUIT, once; called
    /// before a snapshot directory is made, so that no signal can end the process between.
    static func install() {
        let first = live.withLock { state -> Bool in
            defer { state.installed = true }
            return !state.installed
        }
        guard first else { return }
        atexit { SnapshotCleanup.removeAll() }
        // A reader that goes away (`buri export DB | head`) makes a write fail with EPIPE, which
        // ends the command through its normal path (removing the snapshot), not a silent death.
        signal(SIGPIPE, SIG_IGN)
        for number in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                // The command may fail once its files are gone: it must not exit with that
                // failure (see holdIfTerminating) before the signal ends it.
                terminating.store(true, ordering: .sequentiallyConsistent)
                SnapshotCleanup.removeAll()
                // And one still being made (not yet registered): this process's directories.
                let parent = snapshotParent()
                let mine = DatabaseFileSnapshot.directoryPrefix + "\(getpid())-"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
                where name.hasPrefix(mine) {
                    DatabaseFileSnapshot.removeDirectory(atPath: parent + "/" + name)
                }
                // End as the signal would have ended the process. Dispatch receives signals with
                // them blocked (signalfd on Linux): unblock it on this thread and raise it here.
                signal(number, SIG_DFL)
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, number)
                pthread_sigmask(SIG_UNBLOCK, &set, nil)
                raise(number)
                _exit(128 + number)
            }
            source.resume()
            sources.append(source)
            // Only now is the default action (ending the process at once) turned off: a signal
            // arriving before was not lost either way.
            signal(number, SIG_IGN)
        }
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
        while true { pause() }
    }

    static func removeAll() {
        let snapshots = live.withLock { state -> [DatabaseFileSnapshot] in
            defer { state.snapshots = [] }
            return state.snapshots
        }
        for files in snapshots { files.remove() }
    }
}

/// Opens the existing database in directory `path` through a private snapshot of its files.
func openSnapshot(_ path: String) throws -> BuriDatabase {
    let parent = snapshotParent()
    SnapshotCleanup.install()
    let files: DatabaseFileSnapshot
    do {
        files = try DatabaseFileSnapshot.take(of: path, in: parent)
    } catch {
        throw ToolError(.failure, snapshotFailureMessage(path, error))
    }
    SnapshotCleanup.register(files)
    var options = BuriOptions()
    options.createIfMissing = false
    options.purgesInBackground = false
    do {
        return try BuriDatabase(readingSnapshot: files, options: options)
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
    var options = BuriOptions()
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
