import BuriStorage
import Dispatch
import Foundation
import Synchronization

/// What one member says of itself (etcd's `/v3/maintenance/status`).
///
/// ```swift
/// let status = try client.status(of: "127.0.0.1:2379")
/// print(status.version, status.dbSize, status.isLeader)
/// ```
public struct EtcdMemberStatus: Sendable, Hashable {
    /// The `host:port` asked.
    public var endpoint: String
    /// The member's id.
    public var memberID: UInt64
    /// The id of the leader it follows; 0 when it knows of none.
    public var leaderID: UInt64
    /// The cluster revision the member has applied.
    public var revision: UInt64
    /// The etcd version it runs.
    public var version: String
    /// Its backend database file's size, and the part of it in use (the rest is freed by a defragmentation).
    public var dbSize: UInt64
    public var dbSizeInUse: UInt64
    /// Its Raft log position: the last index, the term, and the last applied index.
    public var raftIndex: UInt64
    public var raftTerm: UInt64
    public var raftAppliedIndex: UInt64
    /// What the member reports as wrong (`etcdserver: no leader`, an alarm), verbatim.
    public var errors: [String]

    /// Whether this member is the leader.
    public var isLeader: Bool { memberID != 0 && memberID == leaderID }
    /// Whether it follows a leader (a member of a cluster that lost its quorum follows none).
    public var hasLeader: Bool { leaderID != 0 && !errors.contains { $0.contains("no leader") } }

    init(endpoint: String, json: [String: Any]) {
        let header = json["header"] as? [String: Any]
        self.endpoint = endpoint
        memberID = EtcdClient.int(header?["member_id"])
        leaderID = EtcdClient.int(json["leader"])
        revision = EtcdClient.int(header?["revision"])
        version = json["version"] as? String ?? "?"
        dbSize = EtcdClient.int(json["dbSize"])
        dbSizeInUse = EtcdClient.int(json["dbSizeInUse"])
        raftIndex = EtcdClient.int(json["raftIndex"])
        raftTerm = EtcdClient.int(json["raftTerm"])
        raftAppliedIndex = EtcdClient.int(json["raftAppliedIndex"])
        errors = (json["errors"] as? [Any] ?? []).map { "\($0)" }
    }
}

/// Whether a cluster can be used, found out fast: every member is asked for its status at once,
/// with short timeouts, and a cluster whose members answer is then sent one linearizable read.
///
/// - ``Verdict/unreachable``: no member answered as an etcd member — nothing listening (connection
///   refused), no connection within the timeout, a host that does not resolve, or a server that
///   is not etcd's.
/// - ``Verdict/noQuorum``: members answer, but none follows a leader, or a linearizable read gets
///   no answer: the cluster can neither commit writes nor serve the reads Buri makes.
/// - ``Verdict/available``: a linearizable read was answered.
///
/// ```swift
/// let probe = try EtcdClient(endpoints: ["127.0.0.1:2379"]).probe()
/// if probe.verdict != .available { print(probe.summary) }
/// ```
public struct EtcdProbe: Sendable {
    public enum Verdict: String, Sendable, Hashable {
        case available
        case unreachable
        case noQuorum = "no quorum"
    }

    /// What probing one member found.
    public enum Member: Sendable, Hashable {
        /// It answered its status.
        case answered(EtcdMemberStatus)
        /// Its host answered that nothing listens on the port.
        case refused(String)
        /// No connection within the timeout.
        case timedOut(String)
        /// Its host name does not resolve, or the system could not reach it.
        case unreachable(String)
        /// Connected, but no etcd answer came (no answer within the timeout, or not etcd's).
        case noAnswer(String)
    }

    public var verdict: Verdict
    /// Each endpoint with what it said, in the order given.
    public var members: [(endpoint: String, result: Member)]
    /// Why the cluster has no quorum when its members answered with a leader (the linearizable
    /// read's failure); nil otherwise.
    public var readFailure: String?
    /// The timeouts used (seconds): connecting and the status request; the linearizable read.
    public var timeout: Double
    public var readTimeout: Double

    /// The answering members' statuses.
    public var statuses: [EtcdMemberStatus] {
        members.compactMap { if case .answered(let status) = $0.result { return status } else { return nil } }
    }

    /// One line: the verdict and what each member said.
    public var summary: String {
        let seconds = Self.seconds(timeout)
        let parts = members.map { endpoint, result -> String in
            switch result {
            case .answered(let status):
                if status.hasLeader {
                    return "\(endpoint) answers (\(status.isLeader ? "the leader" : "follows a leader"))"
                }
                let reason = status.errors.isEmpty ? "" : " (\(status.errors.joined(separator: ", ")))"
                return "\(endpoint) answers but has no leader\(reason)"
            case .refused: return "nothing is listening at \(endpoint) (connection refused)"
            case .timedOut: return "\(endpoint) did not accept a connection within \(seconds) s (timed out)"
            case .unreachable(let problem): return "\(endpoint) cannot be reached (\(problem))"
            case .noAnswer(let problem): return "\(endpoint) accepted a connection but gave no etcd answer (\(problem))"
            }
        }.joined(separator: "; ")
        switch verdict {
        case .available:
            return "the etcd cluster is available: \(parts)"
        case .unreachable:
            return "the etcd cluster is unreachable: \(parts)"
        case .noQuorum:
            let read = readFailure.map { "; a linearizable read failed: \($0)" } ?? ""
            return
                "the etcd cluster has no quorum (no leader): it answers, but can neither commit writes nor serve linearizable reads: \(parts)\(read)"
        }
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}

extension EtcdClient {
    /// What member `endpoint` says of itself, asked on a connection of its own within
    /// `timeout` seconds (connecting and answering each), without failover.
    ///
    /// ```swift
    /// let status = try client.status(of: "127.0.0.1:2379", timeout: 2)
    /// ```
    public func status(of endpoint: String, timeout: Double = 2) throws(StorageError) -> EtcdMemberStatus {
        switch Self.probeMember(endpoint, timeout: timeout) {
        case .answered(let status): return status
        case .refused(let problem), .timedOut(let problem), .unreachable(let problem), .noAnswer(let problem):
            throw StorageError(code: .unavailable, message: "\(endpoint): \(problem)", location: address)
        }
    }

    /// Finds out fast whether the cluster can serve Buri (see ``EtcdProbe``): every member's
    /// status at once, each within `timeout` seconds to connect and as many to answer, then, if
    /// members answered with a leader, one linearizable read within `readTimeout` seconds. A few
    /// seconds at most, whatever state the cluster is in.
    ///
    /// ```swift
    /// let probe = try EtcdClient(endpoints: ["127.0.0.1:2379"]).probe()
    /// guard probe.verdict == .available else { throw MyError(probe.summary) }
    /// ```
    public func probe(timeout: Double = 2, readTimeout: Double = 4) -> EtcdProbe {
        let results = Mutex<[Int: EtcdProbe.Member]>([:])
        let endpoints = self.endpoints
        DispatchQueue.concurrentPerform(iterations: endpoints.count) { index in
            let result = Self.probeMember(endpoints[index], timeout: timeout)
            results.withLock { $0[index] = result }
        }
        let found = results.withLock { $0 }
        let members = endpoints.enumerated().map { index, endpoint in
            (endpoint: endpoint, result: found[index] ?? .noAnswer("not probed"))
        }
        var probe = EtcdProbe(
            verdict: .unreachable, members: members, readFailure: nil, timeout: timeout, readTimeout: readTimeout)
        let statuses = probe.statuses
        guard !statuses.isEmpty else { return probe }
        let led = statuses.filter(\.hasLeader)
        guard !led.isEmpty else {
            probe.verdict = .noQuorum
            return probe
        }
        // A member may still name a leader for an election timeout after the quorum is gone:
        // only a linearizable read (etcd's ReadIndex: confirmed by a majority) proves there is one.
        let connections = HTTPConnections(timeout: readTimeout)
        let body = Array(#"{"key":"AA==","keys_only":true}"#.utf8)
        var failures: [String] = []
        for status in led {
            switch connections.single(endpoint: status.endpoint, path: "/v3/kv/range", body: body) {
            case .success(let response):
                let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
                if let json, json["header"] != nil, json["error"] == nil {
                    probe.verdict = .available
                    return probe
                }
                let message =
                    json?["error"] as? String ?? json?["message"] as? String
                    ?? "HTTP \(response.status) \(String(decoding: response.body.prefix(120), as: UTF8.self))"
                failures.append("\(status.endpoint): \(message)")
            case .failure(.connect(let failure)):
                failures.append("\(status.endpoint): \(failure.message)")
            case .failure(.exchange(let problem)):
                let text =
                    problem.contains("timeout") ? "no answer within \(EtcdProbe.seconds(readTimeout)) s" : problem
                failures.append("\(status.endpoint): \(text)")
            }
        }
        probe.verdict = .noQuorum
        probe.readFailure = failures.joined(separator: "; ")
        return probe
    }

    /// Asks one member for its status on a connection of its own.
    static func probeMember(_ endpoint: String, timeout: Double) -> EtcdProbe.Member {
        let connections = HTTPConnections(timeout: timeout)
        switch connections.single(endpoint: endpoint, path: "/v3/maintenance/status", body: Array("{}".utf8)) {
        case .failure(.connect(let failure)):
            switch failure.kind {
            case .refused: return .refused(failure.message)
            case .timedOut: return .timedOut(failure.message)
            case .unresolvable, .other: return .unreachable(failure.message)
            }
        case .failure(.exchange(let problem)):
            return .noAnswer(problem.contains("timeout") ? "no answer within \(EtcdProbe.seconds(timeout)) s" : problem)
        case .success(let response):
            guard let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] else {
                let text = String(decoding: response.body.prefix(80), as: UTF8.self)
                return .noAnswer("HTTP \(response.status), not JSON: \(text); is it an etcd client port?")
            }
            if json["header"] == nil {
                let message = json["error"] as? String ?? json["message"] as? String ?? "no header"
                return .noAnswer("HTTP \(response.status): \(message)")
            }
            return .answered(EtcdMemberStatus(endpoint: endpoint, json: json))
        }
    }
}
