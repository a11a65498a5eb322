import ArgumentParser
import Buri
import BuriCodec
import BuriEtcd
import BuriStorage
import Foundation

// `buri` on an etcd location (etcd://HOST:PORT[,HOST:PORT…]/NAME): what the tool does there
// that it does not do on a directory — its own messages, stats and compaction of the cluster.
// The location is checked, probed and opened as every location is (Locations.swift).

/// Opens the existing database at an etcd location (never creating one).
func openExistingEtcd(_ location: String, purges: Bool) throws -> BuriDatabase {
    if try enginePathState(location) == .missing {
        throw ToolError(
            .notADatabase,
            "'\(location)' holds no Buri database: the cluster is available but has no key under the name '\((try? EtcdLocation(location).name) ?? location)'; check the name, or create it with 'buri import' or 'buri restore'"
        )
    }
    var options = ToolEncryption.options()
    options.createIfMissing = false
    options.purgesInBackground = purges
    return try openLocation(location, options: options)
}

/// Removes every key of a database this command created at an etcd location (its header and
/// whatever stages it left), after an error.
func removeCreatedEtcdDatabase(_ location: String) {
    guard let engine = try? engines.open(location, options: StorageOpenOptions(mode: .existing)) else { return }
    defer { engine.close() }
    try? (engine as? EtcdEngine)?.deleteAll()
}

/// The parts of an etcd location probed available.
func etcdLocation(_ location: String) throws -> EtcdLocation {
    try requireAvailable(location)
    do {
        return try EtcdLocation(location)
    } catch {
        throw ToolError(.usage, error.message)
    }
}

/// `buri repair` salvages LevelDB files; an etcd location has none here.
func refuseRepairOnEtcd(_ location: String) throws -> Never {
    try requireAvailable(location)
    throw ToolError(
        .usage,
        "buri repair salvages the damaged files of a LevelDB database directory, and '\(location)' is a database in an etcd cluster, whose members keep and checksum their own replicas: there are no files here to salvage. To check the database and rebuild its index entries, run `buri check --repair '\(location)'`"
    )
}

// MARK: - stats and compact on etcd

/// `buri stats` on an etcd location: the cluster's own numbers (every member's status) and the
/// database's keys.
func printEtcdStats(_ location: String, json: Bool) throws {
    let db = try openExistingEtcd(location, purges: false)
    db.close()
    let parsed = try etcdLocation(location)
    let client = try engineCall(location) { try EtcdClient(endpoints: parsed.endpoints, retryWindow: etcdRetryWindow) }
    let prefix = Array(parsed.name.utf8) + [0]
    let end = Array(parsed.name.utf8) + [1]
    let (keys, revision) = try engineCall(location) { try client.count(from: prefix, to: end) }
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
                return .map([
                    CBORMapEntry(key: "endpoint", value: .text(endpoint)),
                    CBORMapEntry(key: "error", value: .text(describe(result))),
                ])
            }
            return .map([
                CBORMapEntry(key: "endpoint", value: .text(endpoint)),
                CBORMapEntry(key: "memberId", value: .text(String(status.memberID, radix: 16))),
                CBORMapEntry(key: "isLeader", value: .bool(status.isLeader)),
                CBORMapEntry(
                    key: "leaderId", value: status.leaderID == 0 ? .null : .text(String(status.leaderID, radix: 16))),
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
        var line =
            "  \(endpoint): member \(String(status.memberID, radix: 16)), \(role), etcd \(status.version), revision \(status.revision), "
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
    let parsed = try etcdLocation(location)
    let db = try openExistingEtcd(location, purges: false)
    defer { db.close() }
    let client = try engineCall(location) { try EtcdClient(endpoints: parsed.endpoints, retryWindow: etcdRetryWindow) }
    let prefix = Array(parsed.name.utf8) + [0]
    let end = Array(parsed.name.utf8) + [1]
    let progress = Progress()
    progress.update("compacting…", force: true)
    let before = try engineCall(location) { try client.count(from: prefix, to: end) }
    let pending = try mapErrors(path: location) { try db.pendingPurges().count }
    try mapErrors(path: location) { try db.purgeRetiredBuckets() }
    // Replaced generations, and stages their clients abandoned (a live client's stays).
    let retired = pending - (try mapErrors(path: location) { try db.pendingPurges().count })
    let after = try engineCall(location) { try client.count(from: prefix, to: end) }
    try engineCall(location) { try client.compact(to: after.revision) }
    progress.finish()
    let out = Output.standardOutput()
    try out.line(
        "compacted \(location): purged \(retired) retired generation\(retired == 1 ? "" : "s") (\(before.count) keys before, \(after.count) after); "
            + "compacted the cluster's history up to revision \(after.revision) (for every database in the cluster: earlier revisions can no longer be read); "
            + "each member gives the freed space back to its file system when defragmented (etcdctl defrag)")
    try out.flush()
}
