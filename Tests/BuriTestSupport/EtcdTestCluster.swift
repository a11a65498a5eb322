import BuriEtcd
import BuriStorage
import Foundation
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// The 3-member etcd cluster the tests of one process share: started on first use with
/// `Scripts/etcd-cluster` (random free loopback ports, a fresh temporary directory), stopped by an
/// exit hook, and by the script's watcher if this process dies without running it. Each test gets
/// a database of its own in it (a unique name, hence key prefix).
///
/// `BURI_ETCD_LOCATION=etcd://host:port,…/?max-txn-ops=…` uses a running cluster instead.
public enum EtcdTestCluster {
    /// The location of the cluster without a database name: `etcd://h:p,h:p,h:p/` and the limits.
    struct Started: Sendable {
        var endpoints: [String]
        var limits: EtcdLimits
        var directory: String?
    }

    private static let started = Mutex<Result<Started, StressSetupError>?>(nil)

    /// Where the cluster's files are (`nil` for a cluster given by BURI_ETCD_LOCATION).
    public static var directory: String? { (try? cluster())?.directory }

    /// Where test clusters keep their data: /dev/shm when there is one. etcd fsyncs its log before
    /// every acknowledgement; on tmpfs that costs nothing, which keeps the suites on etcd fast on
    /// a shared machine. (The tests kill processes, never the machine, so what they prove holds.)
    static var clusterParent: URL {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory), isDirectory.boolValue,
            access("/dev/shm", W_OK) == 0
        {
            return URL(fileURLWithPath: "/dev/shm")
        }
        return FileManager.default.temporaryDirectory
    }

    /// The repository's Scripts directory.
    public static var scripts: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts")
    }

    /// A location for a fresh database named `label-<uuid>` in the shared cluster.
    public static func location(_ label: String = "test") throws -> String {
        let cluster = try cluster()
        return
            "etcd://\(cluster.endpoints.joined(separator: ","))/\(label)-\(UUID().uuidString)?max-txn-ops=\(cluster.limits.maxTxnOps)&max-request-bytes=\(cluster.limits.maxRequestBytes)"
    }

    /// A new engine on a fresh database in the shared cluster.
    public static func engine(_ label: String = "test") throws -> EtcdEngine {
        try EtcdEngine(location: location(label))
    }

    static func cluster() throws -> Started {
        try started.withLock { started -> Result<Started, StressSetupError> in
            if let started { return started }
            let result = Result { () throws(StressSetupError) -> Started in try start() }
            started = result
            return result
        }.get()
    }

    private static func start() throws(StressSetupError) -> Started {
        if let given = ProcessInfo.processInfo.environment["BURI_ETCD_LOCATION"], !given.isEmpty {
            return try parse(given, directory: nil)
        }
        let directory = clusterParent.appendingPathComponent("buri-etcd-\(UUID().uuidString)").path
        let (status, output) = run(
            scripts.appendingPathComponent("etcd-cluster").path, ["start", directory],
            environment: ["ETCD_CLUSTER_OWNER_PID": String(getpid()), "ETCD_CLUSTER_REMOVE_ON_EXIT": "1"])
        stopDirectory.withLock { $0 = directory }
        atexit {
            guard let directory = EtcdTestCluster.stopDirectory.withLock({ $0 }) else { return }
            _ = EtcdTestCluster.run(
                EtcdTestCluster.scripts.appendingPathComponent("etcd-cluster").path, ["stop", directory],
                environment: [:])
            try? FileManager.default.removeItem(atPath: directory)
        }
        guard status == 0, let line = output.split(separator: "\n").last else {
            throw StressSetupError("Scripts/etcd-cluster start failed (status \(status)): \(output)")
        }
        return try parse(String(line), directory: directory)
    }

    static let stopDirectory = Mutex<String?>(nil)

    private static func parse(_ location: String, directory: String?) throws(StressSetupError) -> Started {
        // etcd://h:p,h:p/?max-txn-ops=N&max-request-bytes=M
        guard location.hasPrefix("etcd://") else { throw StressSetupError("not an etcd location: \(location)") }
        let rest = location.dropFirst("etcd://".count)
        let hosts = rest.prefix { $0 != "/" }
        var limits = EtcdLimits()
        if let mark = rest.firstIndex(of: "?") {
            for item in rest[rest.index(after: mark)...].split(separator: "&") {
                let parts = item.split(separator: "=")
                guard parts.count == 2, let value = Int(parts[1]) else { continue }
                if parts[0] == "max-txn-ops" { limits.maxTxnOps = value }
                if parts[0] == "max-request-bytes" { limits.maxRequestBytes = value }
            }
        }
        return Started(endpoints: hosts.split(separator: ",").map(String.init), limits: limits, directory: directory)
    }

    /// Runs a program to its end; its exit status and its standard output and error together.
    @discardableResult
    public static func run(_ program: String, _ arguments: [String], environment: [String: String]) -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("buri-run-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        guard let handle = try? FileHandle(forWritingTo: output) else { return (-1, "cannot create \(output.path)") }
        process.standardOutput = handle
        process.standardError = handle
        do { try process.run() } catch { return (-1, "cannot run \(program): \(error)") }
        process.waitUntilExit()
        try? handle.close()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return (process.terminationStatus, text)
    }
}

/// The test cluster could not be started.
public struct StressSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A 3-member cluster of one test's own, for what must not disturb the shared one: killing
/// members, compacting history. Stopped by ``stop()`` (and at exit or by the script's watcher
/// if the test process dies).
public final class PrivateCluster: @unchecked Sendable {
    // @unchecked: immutable after init.
    public let directory: String
    public let endpoints: [String]
    public let limits: EtcdLimits
    private let script: String

    public init() throws {
        directory = EtcdTestCluster.clusterParent.appendingPathComponent("buri-etcd-private-\(UUID().uuidString)").path
        script = EtcdTestCluster.scripts.appendingPathComponent("etcd-cluster").path
        let (status, output) = EtcdTestCluster.run(
            script, ["start", directory],
            environment: ["ETCD_CLUSTER_OWNER_PID": String(getpid()), "ETCD_CLUSTER_REMOVE_ON_EXIT": "1"])
        guard status == 0, let line = output.split(separator: "\n").last, line.hasPrefix("etcd://") else {
            EtcdTestCluster.run(script, ["stop", directory], environment: [:])
            throw StressSetupError("Scripts/etcd-cluster start failed (status \(status)): \(output)")
        }
        let hosts = line.dropFirst("etcd://".count).prefix { $0 != "/" }
        endpoints = hosts.split(separator: ",").map(String.init)
        limits = EtcdLimits(maxTxnOps: 4096, maxRequestBytes: 8 << 20)
        _ = PrivateCluster.running.withLock { $0.insert(directory) }
    }

    /// A location for database `name` in this cluster, with its limits.
    public func location(_ name: String) -> String {
        "etcd://\(endpoints.joined(separator: ","))/\(name)?max-txn-ops=\(limits.maxTxnOps)&max-request-bytes=\(limits.maxRequestBytes)"
    }

    /// Compacts the cluster's history up to `revision`.
    public func compact(to revision: UInt64) throws {
        try EtcdClient(endpoints: endpoints).compact(to: revision)
    }

    /// The index (0, 1, 2) of the member that is leader now, asking each member in turn.
    public func leader() -> Int? {
        guard let client = try? EtcdClient(endpoints: endpoints, retryWindow: 1) else { return nil }
        for (index, endpoint) in endpoints.enumerated() {
            if let status = try? client.memberStatus(of: endpoint), status.leader != 0, status.member == status.leader {
                return index
            }
        }
        return nil
    }

    /// SIGKILLs member `index`.
    public func kill(_ index: Int) {
        EtcdTestCluster.run(script, ["kill", directory, String(index)], environment: [:])
    }

    /// Starts member `index` again with its data; it rejoins the cluster.
    @discardableResult
    public func restart(_ index: Int) -> (Int32, String) {
        EtcdTestCluster.run(script, ["restart", directory, String(index)], environment: [:])
    }

    /// Whether member `index` answers and follows a leader.
    public func isHealthy(_ index: Int) -> Bool {
        guard let client = try? EtcdClient(endpoints: endpoints, retryWindow: 1),
            let status = try? client.memberStatus(of: endpoints[index])
        else { return false }
        return status.leader != 0
    }

    /// Stops every member and removes the directory.
    public func stop() {
        EtcdTestCluster.run(script, ["stop", directory], environment: [:])
        try? FileManager.default.removeItem(atPath: directory)
        PrivateCluster.running.withLock { _ = $0.remove(directory) }
    }

    static let running = Mutex<Set<String>>([])
}
