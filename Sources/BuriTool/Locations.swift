import Buri
import BuriEtcd
import BuriStorage
import Foundation

// How `buri` opens what a DB argument names: one registry of engine kinds (LevelDB directories,
// the default; etcd locations), asked for the kind of a location and its capabilities — files
// here or not, a reachability probe — rather than testing the location's text. A new engine is
// registered in `engines` and nowhere else. The checks run in this order: the location's form
// when the arguments are parsed (a malformed one is a usage error, exit 2), then, before a
// command reads or writes anything, a probe where the kind has one (an etcd cluster with nothing
// listening or without a quorum is reported within seconds, exit 3), then the open itself.

/// How long the etcd engine keeps retrying a request no member answers, once the probe found the
/// cluster available (an election takes about a second; the library's default is 30 s).
let etcdRetryWindow: Double = 10

/// The engines `buri` opens: LevelDB directories (the default kind) and etcd locations.
let engines = StorageEngines.standard.registering(EtcdEngine.Kind(retryWindow: etcdRetryWindow))

/// The kind of engine that opens `location`.
func engineKind(_ location: String) -> any StorageEngineKind { engines.kind(for: location) }

/// Whether the database at `location` is a directory of files here (LevelDB), rather than data
/// an engine keeps elsewhere (an etcd cluster): what file snapshots, sizes on disk, file-level
/// repair and the removal of a failed creation need.
func hasFiles(_ location: String) -> Bool { engineKind(location).capabilities.contains(.files) }

/// Whether a database argument is meant as a location rather than a directory: `scheme://…`, or
/// anything starting with `etcd:` (in any case). Such an argument must be a valid location of a
/// registered engine.
func looksLikeLocation(_ argument: String) -> Bool {
    if argument.lowercased().hasPrefix("etcd:") { return true }
    guard let range = argument.range(of: "://") else { return false }
    let scheme = argument[..<range.lowerBound]
    guard let first = scheme.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic else { return false }
    return scheme.unicodeScalars.allSatisfy {
        $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == ".")
    }
}

/// The usage error for a database argument that is a malformed location (nil if it is a path or a
/// valid location).
func locationProblem(_ argument: String) -> String? {
    guard looksLikeLocation(argument) else { return nil }
    guard engines.isClaimed(argument) else {
        return
            "'\(argument)' is not a database location: give the path of a database directory, or an etcd location \(EtcdLocation.form) (the scheme is etcd://, in lower case)"
    }
    do {
        try engineKind(argument).validate(argument)
        return nil
    } catch {
        return error.message
    }
}

/// Locations probed available in this process (a command may look at its location twice).
nonisolated(unsafe) private var availableLocations: Set<String> = []

/// Probes `location` where its kind can (see ``StorageEngineKind/probe(_:)``), and throws exit 3
/// saying what is wrong — unreachable, or no quorum — unless it can serve reads and writes.
func requireAvailable(_ location: String) throws {
    let kind = engineKind(location)
    guard kind.capabilities.contains(.probe) else { return }
    do {
        try kind.validate(location)
    } catch {
        throw ToolError(.usage, error.message)
    }
    if availableLocations.contains(location) { return }
    switch kind.probe(location) {
    case .available:
        availableLocations.insert(location)
    case .unreachable(let reason, let advice), .unavailable(let reason, let advice):
        throw ToolError(.failure, "cannot use '\(location)': \(reason). \(advice); nothing was read or written")
    }
}

/// The message for a request the engine stopped answering during a command (after the probe at
/// its start found it available): what a new probe finds, with the engine's own error.
func unavailableMessage(_ location: String, _ error: StorageError) -> String {
    var message = "'\(location)': the cluster stopped answering during the command (\(error.message))"
    switch engineKind(location).probe(location) {
    case .available: break
    case .unreachable(let reason, _), .unavailable(let reason, _): message += "; now \(reason)"
    }
    return message
}

/// The engine for `location`, existing data only, on a location just probed available.
func openEngine(_ location: String) throws -> any StorageEngine {
    try requireAvailable(location)
    do {
        return try engines.open(location, options: StorageOpenOptions(mode: .existing))
    } catch {
        throw ToolError(.usage, error.message)
    }
}

/// Runs an engine call, turning its errors into tool errors.
func engineCall<R>(_ location: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as StorageError {
        throw ToolError(BuriError.storage(error), path: location)
    }
}

/// Opens the database at `location` through the registry, after probing it where its kind can.
func openLocation(_ location: String, options: BuriOptions) throws -> BuriDatabase {
    try requireAvailable(location)
    return try mapErrors(path: location) { try BuriDatabase(location: location, options: options, engines: engines) }
}

/// Creates a new database at `location` (failing if one is there: another process created it),
/// after probing it where its kind can. Every write is synced.
func createLocation(_ location: String) throws -> BuriDatabase {
    try requireAvailable(location)
    var create = ToolEncryption.options()
    create.syncWrites = true
    return try mapErrors(path: location) {
        try BuriDatabase.create(location: location, options: create, engines: engines)
    }
}

/// What is at a location without files here: `.database` when the engine holds keys there,
/// `.missing` when it holds none. Throws (exit 3) when it cannot answer.
func enginePathState(_ location: String) throws -> PathState {
    let engine = try openEngine(location)
    defer { engine.close() }
    return try engineCall(location) {
        let snapshot = try engine.snapshot()
        // Any key: a database (opening it refuses data that is not Buri's).
        return try snapshot.cursor(in: .all, reverse: false).next() ? .database : .missing
    }
}
