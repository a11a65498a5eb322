import ArgumentParser
import Buri
import BuriCodec
import BuriEtcd
import BuriStorage
import Foundation

// `buri` on an etcd location (etcd://HOST:PORT[,HOST:PORT…]/NAME): the location is checked when
// the arguments are parsed (a malformed one is a usage error, exit 2), and before a command reads
// or writes anything the cluster is probed — every member's status at once, short timeouts, then
// one linearizable read — so that a cluster with nothing listening or without a quorum is
// reported as such within seconds (exit 3), never as an empty or non-Buri database.

/// How long the engine keeps retrying a request no member answers, once the probe found the
/// cluster available (an election takes about a second; the library's default is 30 s).
let etcdRetryWindow: Double = 10

/// Whether a database argument is meant as a location rather than a directory: `scheme://…`, or
/// anything starting with `etcd:` (in any case). Such an argument must be a valid etcd location.
func looksLikeLocation(_ argument: String) -> Bool {
    if argument.lowercased().hasPrefix("etcd:") { return true }
    guard let range = argument.range(of: "://") else { return false }
    let scheme = argument[..<range.lowerBound]
    guard let first = scheme.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic else { return false }
    return scheme.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == ".") }
}

/// The usage error for a database argument that is a malformed location (nil if it is a path or a
/// valid etcd location).
func locationProblem(_ argument: String) -> String? {
    guard looksLikeLocation(argument) else { return nil }
    guard EtcdEngine.isEtcdLocation(argument) else {
        return "'\(argument)' is not a database location: give the path of a database directory, or an etcd location \(EtcdLocation.form) (the scheme is etcd://, in lower case)"
    }
    do {
        _ = try EtcdLocation(argument)
        return nil
    } catch {
        return error.message
    }
}

/// Locations probed available in this process (a command may look at its location twice).
nonisolated(unsafe) private var availableLocations: Set<String> = []

/// Probes the cluster of `location` (see ``EtcdClient/probe(timeout:readTimeout:)``) and throws
/// exit 3 saying what is wrong — unreachable, or no quorum — unless it can serve reads and writes.
func requireAvailableCluster(_ location: String) throws -> EtcdLocation {
    let parsed: EtcdLocation
    do {
        parsed = try EtcdLocation(location)
    } catch {
        throw ToolError(.usage, error.message)
    }
    if availableLocations.contains(location) { return parsed }
    let client: EtcdClient
    do {
        client = try EtcdClient(endpoints: parsed.endpoints)
    } catch {
        throw ToolError(.usage, error.message)
    }
    let probe = client.probe()
    switch probe.verdict {
    case .available:
        availableLocations.insert(location)
        return parsed
    case .unreachable:
        throw ToolError(.failure, "cannot use '\(location)': \(probe.summary). Start the cluster (Scripts/etcd-cluster start DIR) or correct the members in the location; nothing was read or written")
    case .noQuorum:
        throw ToolError(.failure, "cannot use '\(location)': \(probe.summary). A majority of its members must run and reach each other before anything can be read or written; nothing was read or written")
    }
}

/// The message for a request the cluster stopped answering during a command (after the probe at
/// its start found it available): what a new probe finds, with the engine's own error.
func etcdUnavailableMessage(_ location: String, _ error: StorageError) -> String {
    let parsed = try? EtcdLocation(location)
    let probe = parsed.flatMap { try? EtcdClient(endpoints: $0.endpoints) }?.probe()
    var message = "'\(location)': the cluster stopped answering during the command (\(error.message))"
    if let probe, probe.verdict != .available { message += "; now \(probe.summary)" }
    return message
}

/// An engine for `location` on a cluster just probed available.
func etcdEngine(_ location: String) throws -> EtcdEngine {
    _ = try requireAvailableCluster(location)
    do {
        return try EtcdEngine(location: location, retryWindow: etcdRetryWindow)
    } catch {
        throw ToolError(.usage, error.message)
    }
}

/// Runs an engine call, turning its errors into tool errors.
func etcdCall<R>(_ location: String, _ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as StorageError {
        throw ToolError(BuriError.storage(error), path: location)
    }
}

/// What is at an etcd location: `.database` when the cluster holds keys under its name,
/// `.missing` when it holds none. Throws (exit 3) when the cluster cannot answer.
func etcdPathState(_ location: String) throws -> PathState {
    let engine = try etcdEngine(location)
    defer { engine.close() }
    return try etcdCall(location) {
        let snapshot = try engine.snapshot()
        // Any key: a database (opening it refuses data that is not Buri's).
        return try snapshot.cursor(in: .all, reverse: false).next() ? .database : .missing
    }
}

/// Opens the existing database at an etcd location (never creating one).
func openExistingEtcd(_ location: String, purges: Bool) throws -> BuriDatabase {
    if try etcdPathState(location) == .missing {
        throw ToolError(.notADatabase, "'\(location)' holds no Buri database: the cluster is available but has no key under the name '\((try? EtcdLocation(location).name) ?? location)'; check the name, or create it with 'buri import' or 'buri restore'")
    }
    var options = BuriOptions()
    options.createIfMissing = false
    options.purgesInBackground = purges
    let engine = try etcdEngine(location)
    return try mapErrors(path: location) { try BuriDatabase(engine: engine, options: options) }
}

/// Creates a new database at an etcd location that holds no key (a concurrent creation makes
/// this fail with a conflict rather than share the database unknowingly).
func createEtcdDatabase(_ location: String) throws -> BuriDatabase {
    var create = BuriOptions()
    create.storage.errorIfExists = true
    create.syncWrites = true
    let engine = try etcdEngine(location)
    return try mapErrors(path: location) { try BuriDatabase(engine: engine, options: create) }
}

/// Removes every key of a database this command created at an etcd location (its header and
/// whatever stages it left), after an error.
func removeCreatedEtcdDatabase(_ location: String) {
    guard let engine = try? EtcdEngine(location: location, retryWindow: etcdRetryWindow) else { return }
    defer { engine.close() }
    try? engine.deleteAll()
}

/// `buri repair` salvages LevelDB files; an etcd location has none here.
func refuseRepairOnEtcd(_ location: String) throws -> Never {
    _ = try requireAvailableCluster(location)
    throw ToolError(.usage, "buri repair salvages the damaged files of a LevelDB database directory, and '\(location)' is a database in an etcd cluster, whose members keep and checksum their own replicas: there are no files here to salvage. To check the database and rebuild its index entries, run `buri check --repair '\(location)'`")
}

// MARK: - stats and compact on etcd

/// `buri stats` on an etcd location: the cluster's own numbers (every member's status) and the
/// database's keys.
func printEtcdStats(_ location: String, json: Bool) throws {
    let db = try openExistingEtcd(location, purges: false)
    db.close()
    let parsed = try requireAvailableCluster(location)
    let client = try etcdCall(location) { try EtcdClient(endpoints: parsed.endpoints, retryWindow: etcdRetryWindow) }
    let prefix = Array(parsed.name.utf8) + [0]
    let end = Array(parsed.name.utf8) + [1]
    let (keys, revision) = try etcdCall(location) { try client.count(from: prefix, to: end) }
    let probe = client.probe()
    let out = Output.standardOutput()
    func describe(_ result: EtcdProbe.Member) -> String {
        switch result {
        case .answered: return "answers"
        case .refused: return "nothing listening (connection refused)"
        case .timedOut: return "no connection within \(String(format: "%g", probe.timeout)) s (timed out)"
        case .unreachable(let problem), .noAnswer(let problem): return problem
        }
    }
    if json {
        let members: [CBORValue] = probe.members.map { endpoint, result in
            guard case .answered(let status) = result else {
                return .map([CBORMapEntry(key: "endpoint", value: .text(endpoint)), CBORMapEntry(key: "error", value: .text(describe(result)))])
            }
            return .map([
                CBORMapEntry(key: "endpoint", value: .text(endpoint)),
                CBORMapEntry(key: "memberId", value: .text(String(status.memberID, radix: 16))),
                CBORMapEntry(key: "isLeader", value: .bool(status.isLeader)),
                CBORMapEntry(key: "leaderId", value: status.leaderID == 0 ? .null : .text(String(status.leaderID, radix: 16))),
                CBORMapEntry(key: "version", value: .text(status.version)),
                CBORMapEntry(key: "revision", value: .unsigned(status.revision)),
                CBORMapEntry(key: "dbSize", value: .unsigned(status.dbSize)),
                CBORMapEntry(key: "dbSizeInUse", value: .unsigned(status.dbSizeInUse)),
                CBORMapEntry(key: "raftIndex", value: .unsigned(status.raftIndex)),
                CBORMapEntry(key: "raftTerm", value: .unsigned(status.raftTerm)),
                CBORMapEntry(key: "raftAppliedIndex", value: .unsigned(status.raftAppliedIndex)),
                CBORMapEntry(key: "errors", value: .array(status.errors.map { .text($0) })),
            ])
        }
        let value: CBORValue = .map([
            CBORMapEntry(key: "engine", value: .text("etcd")),
            CBORMapEntry(key: "database", value: .text(parsed.name)),
            CBORMapEntry(key: "keyPrefix", value: .text(prefix.map { String(format: "%02x", $0) }.joined())),
            CBORMapEntry(key: "keys", value: .unsigned(keys)),
            CBORMapEntry(key: "revision", value: .unsigned(revision)),
            CBORMapEntry(key: "members", value: .array(members)),
        ])
        try out.line(value.jsonString(pretty: true))
        try out.flush()
        return
    }
    try out.line("engine:     etcd (no LevelDB files: the numbers are the cluster's)")
    try out.line("database:   \(parsed.name) (key prefix \(prefix.map { String(format: "%02x", $0) }.joined()))")
    try out.line("keys:       \(keys) at revision \(revision)")
    try out.line("members:")
    for (endpoint, result) in probe.members {
        guard case .answered(let status) = result else {
            try out.line("  \(endpoint): \(describe(result))")
            continue
        }
        let role = status.isLeader ? "leader" : status.hasLeader ? "follower" : "no leader"
        var line = "  \(endpoint): member \(String(status.memberID, radix: 16)), \(role), etcd \(status.version), revision \(status.revision), "
            + "backend \(status.dbSize) bytes (\(status.dbSizeInUse) in use), raft index \(status.raftIndex) (applied \(status.raftAppliedIndex)), term \(status.raftTerm)"
        if !status.errors.isEmpty { line += ", errors: \(status.errors.joined(separator: ", "))" }
        try out.line(line)
    }
    try out.flush()
}

/// `buri compact` on an etcd location: purges the database's retired generations now, then
/// compacts the cluster's history up to the current revision (etcd keeps every revision until
/// then; a defragmentation of each member gives the freed space back to its file system).
func compactEtcd(_ location: String) throws {
    let parsed = try requireAvailableCluster(location)
    let db = try openExistingEtcd(location, purges: false)
    defer { db.close() }
    let client = try etcdCall(location) { try EtcdClient(endpoints: parsed.endpoints, retryWindow: etcdRetryWindow) }
    let prefix = Array(parsed.name.utf8) + [0]
    let end = Array(parsed.name.utf8) + [1]
    let progress = Progress()
    progress.update("compacting…", force: true)
    let before = try etcdCall(location) { try client.count(from: prefix, to: end) }
    let retired = try mapErrors(path: location) { try db.pendingPurges().filter { $0.state == .purging }.count }
    try mapErrors(path: location) { try db.purgeRetiredBuckets() }
    let after = try etcdCall(location) { try client.count(from: prefix, to: end) }
    try etcdCall(location) { try client.compact(to: after.revision) }
    progress.finish()
    let out = Output.standardOutput()
    try out.line("compacted \(location): purged \(retired) retired generation\(retired == 1 ? "" : "s") (\(before.count) keys before, \(after.count) after); "
        + "compacted the cluster's history up to revision \(after.revision) (for every database in the cluster: earlier revisions can no longer be read); "
        + "each member gives the freed space back to its file system when defragmented (etcdctl defrag)")
    try out.flush()
}
