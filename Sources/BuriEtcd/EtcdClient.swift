import BuriStorage
import Dispatch
import Foundation
import Synchronization

/// A small synchronous client of etcd's v3 JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`,
/// `/v3/watch`) over HTTP, with failover between the members of a cluster.
///
/// Every request goes to the member that answered last; when a member cannot be reached (refused,
/// reset, timed out) or answers that the cluster has no leader, the request is tried again on the
/// next member, after a short pause, for at most ``maxAttempts`` tries and ``retryWindow``
/// seconds, then fails with ``StorageError/Code/unavailable``.
///
/// ```swift
/// let client = try EtcdClient(endpoints: ["127.0.0.1:2379", "127.0.0.1:2381"])
/// let revision = try client.put(Array("k".utf8), Array("v".utf8))
/// let pairs = try client.range(from: Array("k".utf8), to: nil, limit: 10)
/// ```
public final class EtcdClient: Sendable {
    /// `host:port` of each member.
    public let endpoints: [String]
    /// How many times one request is tried across the members before it fails.
    public let maxAttempts: Int
    /// How long (seconds) one request keeps being retried before it fails.
    public let retryWindow: Double
    /// The time (seconds) one HTTP exchange may take.
    public let requestTimeout: Double
    private let preferred = Atomic<Int>(0)
    private let requests = Atomic<Int>(0)
    let connections: HTTPConnections

    /// How many requests this client has made (each is one round trip to a member, or more when
    /// one is retried): what a caller pays on a network engine, for diagnostics and tests.
    ///
    /// ```swift
    /// let before = engine.client.requestCount
    /// _ = try people.objects(.index("age", in: 20...29))
    /// print(engine.client.requestCount - before)   // a handful, not one per object
    /// ```
    public var requestCount: Int { requests.load(ordering: .relaxed) }

    public init(
        endpoints: [String], maxAttempts: Int = 80, retryWindow: Double = 30, requestTimeout: Double = 5
    ) throws(StorageError) {
        guard !endpoints.isEmpty else {
            throw StorageError(code: .invalidArgument, message: "no etcd endpoint given; name at least one host:port")
        }
        self.endpoints = endpoints
        self.maxAttempts = max(1, maxAttempts)
        self.retryWindow = retryWindow
        self.requestTimeout = requestTimeout
        connections = HTTPConnections(timeout: requestTimeout)
    }

    /// The cluster address, for messages: `etcd://h1:p1,h2:p2`.
    public var address: String { "etcd://" + endpoints.joined(separator: ",") }

    // MARK: Raw operations (also the benchmark's floor)

    /// Puts one key, returning the revision of the commit.
    @discardableResult
    public func put(_ key: [UInt8], _ value: [UInt8]) throws(StorageError) -> UInt64 {
        let reply = try call(
            "/v3/kv/put", ["key": Self.base64(key), "value": Self.base64(value)], ambiguousIsSafe: true)
        return Self.revision(of: reply)
    }

    /// Puts every pair in one etcd transaction (all or none), returning its revision. The caller
    /// keeps within the cluster's limits.
    @discardableResult
    public func putAll(_ pairs: [(key: [UInt8], value: [UInt8])]) throws(StorageError) -> UInt64 {
        let success: [[String: Any]] = pairs.map {
            ["request_put": ["key": Self.base64($0.key), "value": Self.base64($0.value)]]
        }
        return Self.revision(of: try call("/v3/kv/txn", ["success": success], ambiguousIsSafe: true))
    }

    /// Deletes every key in `[start, end)`.
    public func deleteRange(from start: [UInt8], to end: [UInt8]) throws(StorageError) {
        _ = try call(
            "/v3/kv/deleterange", ["key": Self.base64(start), "range_end": Self.base64(end)], ambiguousIsSafe: true)
    }

    /// The key-value pairs in `[start, end)` (all keys from `start` with `end` `nil`), in key order,
    /// at most `limit` of them (0: no limit), as of `revision` (0: now).
    public func range(
        from start: [UInt8], to end: [UInt8]?, limit: Int = 0, revision: UInt64 = 0
    ) throws(StorageError) -> [(key: [UInt8], value: [UInt8])] {
        var body: [String: Any] = ["key": Self.base64(start), "range_end": Self.base64(end ?? [0])]
        if limit > 0 { body["limit"] = String(limit) }
        if revision > 0 { body["revision"] = String(revision) }
        let reply = try call("/v3/kv/range", body, ambiguousIsSafe: true)
        return try Self.keyValues(reply["kvs"]).map { ($0.key, $0.value) }
    }

    /// How many keys `[start, end)` holds now (a linearizable count; etcd walks its index for it),
    /// with the revision it was counted at.
    ///
    /// ```swift
    /// let (keys, revision) = try client.count(from: Array("app\0".utf8), to: Array("app\u{1}".utf8))
    /// ```
    public func count(from start: [UInt8], to end: [UInt8]) throws(StorageError) -> (count: UInt64, revision: UInt64) {
        let reply = try call(
            "/v3/kv/range", ["key": Self.base64(start), "range_end": Self.base64(end), "count_only": true],
            ambiguousIsSafe: true)
        return (Self.int(reply["count"]), Self.revision(of: reply))
    }

    /// Compacts the cluster's history up to `revision`: reads at earlier revisions fail from then
    /// on. Cluster-wide (every database in it).
    public func compact(to revision: UInt64) throws(StorageError) {
        _ = try call("/v3/kv/compaction", ["revision": String(revision), "physical": true], ambiguousIsSafe: true)
    }

    // MARK: Leases

    /// Grants a lease of `seconds` to live unless renewed; returns its id and the time to live the
    /// cluster gave (etcd raises a very short one to its minimum, about 2 s).
    ///
    /// ```swift
    /// let (lease, ttl) = try client.grantLease(seconds: 10)
    /// try client.keepAlive(lease)      // every few seconds
    /// try client.revokeLease(lease)    // its keys are deleted
    /// ```
    public func grantLease(seconds: Int) throws(StorageError) -> (id: UInt64, seconds: Int) {
        let reply = try call("/v3/lease/grant", ["TTL": String(max(1, seconds))], ambiguousIsSafe: true)
        let id = Self.int(reply["ID"])
        guard id > 0 else {
            throw StorageError(code: .unknown, message: "the cluster granted a lease without an id", location: address)
        }
        return (id, Int(Self.int(reply["TTL"])))
    }

    /// Renews lease `id` once; returns the seconds it now has to live, 0 if it has ended (expired
    /// or revoked: it cannot be renewed again).
    public func keepAlive(_ id: UInt64) throws(StorageError) -> Int {
        let reply = try call("/v3/lease/keepalive", ["ID": String(id)], ambiguousIsSafe: true)
        return Int(Self.int((reply["result"] as? [String: Any])?["TTL"]))
    }

    /// Lease `id`'s remaining and granted time to live in whole seconds; `nil` once it has ended.
    ///
    /// ```swift
    /// let alive = try client.leaseTimeToLive(lease) != nil
    /// ```
    public func leaseTimeToLive(_ id: UInt64) throws(StorageError) -> (remaining: Int, granted: Int)? {
        let reply = try call("/v3/lease/timetolive", ["ID": String(id)], ambiguousIsSafe: true)
        // proto3 JSON: int64 as a string, zero left out; an ended lease says -1.
        func seconds(_ value: Any?) -> Int {
            if let text = value as? String { return Int(text) ?? 0 }
            return (value as? NSNumber)?.intValue ?? 0
        }
        let remaining = seconds(reply["TTL"])
        return remaining < 0 ? nil : (remaining, seconds(reply["grantedTTL"]))
    }

    /// Ends lease `id` now: every key put with it is deleted. A lease already ended is no error.
    public func revokeLease(_ id: UInt64) throws(StorageError) {
        do {
            _ = try call("/v3/lease/revoke", ["ID": String(id)], ambiguousIsSafe: true)
        } catch let error where error.message.contains("lease not found") {
            return
        }
    }

    /// Puts one key bound to lease `id` (deleted when the lease ends), returning the revision.
    ///
    /// ```swift
    /// try client.put(Array("app\0alive".utf8), [], lease: lease)
    /// ```
    @discardableResult
    public func put(_ key: [UInt8], _ value: [UInt8], lease id: UInt64) throws(StorageError) -> UInt64 {
        let reply = try call(
            "/v3/kv/put", ["key": Self.base64(key), "value": Self.base64(value), "lease": String(id)],
            ambiguousIsSafe: true)
        return Self.revision(of: reply)
    }

    /// What one member says of itself: its id, the id of the leader it follows (0: none), and
    /// the cluster revision it has applied. Asks that member only, without failover.
    ///
    /// ```swift
    /// let status = try client.memberStatus(of: "127.0.0.1:2379")
    /// let isLeader = status.member == status.leader
    /// ```
    public func memberStatus(
        of endpoint: String
    ) throws(StorageError) -> (member: UInt64, leader: UInt64, revision: UInt64) {
        let payload = Data("{}".utf8)
        switch exchange(endpoint: endpoint, path: "/v3/maintenance/status", payload: payload) {
        case let .reply(json):
            if let message = json["error"] as? String {
                throw StorageError(code: .unavailable, message: "\(endpoint): \(message)", location: address)
            }
            let header = json["header"] as? [String: Any]
            return (Self.int(header?["member_id"]), Self.int(json["leader"]), Self.int(header?["revision"]))
        case let .refused(problem), let .lost(problem):
            throw StorageError(code: .unavailable, message: "\(endpoint): \(problem)", location: address)
        case let .failed(error):
            throw error
        }
    }

    // MARK: Transport

    /// POSTs `body` as JSON to `path` and returns the decoded reply, trying other members on
    /// failures that say nothing was done (or, with `ambiguousIsSafe`, on any transport failure:
    /// reads, and commits guarded by conditions that a first, applied attempt would fail).
    func call(_ path: String, _ body: [String: Any], ambiguousIsSafe: Bool) throws(StorageError) -> [String: Any] {
        let payload: Data
        do {
            payload = try JSONSerialization.data(withJSONObject: body)
        } catch {
            throw StorageError(
                code: .invalidArgument, message: "could not encode an etcd request: \(error)", location: address)
        }
        requests.add(1, ordering: .relaxed)
        let started = DispatchTime.now().uptimeNanoseconds
        var attempt = 0
        var lastProblem = ""
        var pause = 0.02
        while true {
            attempt += 1
            let index = preferred.load(ordering: .relaxed) % endpoints.count
            let endpoint = endpoints[index]
            let outcome = exchange(endpoint: endpoint, path: path, payload: payload)
            switch outcome {
            case let .reply(json):
                if let message = json["error"] as? String ?? json["message"] as? String, json["header"] == nil {
                    let code = (json["code"] as? NSNumber)?.intValue ?? -1
                    if code == 14 || message.contains("no leader") || message.contains("leader changed")
                        || message.contains("timed out") || message.contains("deadline exceeded")
                    {
                        // Unavailable: an election is under way, or this member lost its leader.
                        lastProblem = "\(endpoint): \(message)"
                        if (message.contains("timed out") || message.contains("deadline exceeded")) && !ambiguousIsSafe
                        {
                            throw StorageError(
                                code: .unavailable,
                                message:
                                    "\(message) at \(endpoint); the commit may or may not have been applied: read again before retrying",
                                location: address)
                        }
                        rotate(from: index)
                        break
                    }
                    throw Self.error(code: code, message: message, address: address)
                }
                preferred.store(index, ordering: .relaxed)
                return json
            case let .refused(problem):
                lastProblem = "\(endpoint): \(problem)"
                rotate(from: index)
            case let .lost(problem):
                lastProblem = "\(endpoint): \(problem)"
                if !ambiguousIsSafe {
                    throw StorageError(
                        code: .unavailable,
                        message:
                            "lost the connection to \(endpoint) during a commit (\(problem)); it may or may not have been applied: read again before retrying",
                        location: address)
                }
                rotate(from: index)
            case let .failed(error):
                throw error
            }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            if attempt >= maxAttempts || elapsed >= retryWindow {
                throw StorageError(
                    code: .unavailable,
                    message:
                        "no member of the cluster answered after \(attempt) attempt(s) in \(String(format: "%.1f", elapsed)) s; last: \(lastProblem). Start the cluster (Scripts/etcd-cluster start DIR) or check the endpoints",
                    location: address)
            }
            // Every member tried once: wait a little (an election takes about a second).
            if attempt % endpoints.count == 0 {
                usleep(UInt32(pause * 1e6))
                pause = min(pause * 2, 0.5)
            }
        }
    }

    private func rotate(from index: Int) {
        _ = preferred.compareExchange(
            expected: preferred.load(ordering: .relaxed), desired: (index + 1) % endpoints.count, ordering: .relaxed)
    }

    enum Outcome {
        case reply([String: Any])
        /// Nothing reached the member.
        case refused(String)
        /// The request may have reached the member.
        case lost(String)
        case failed(StorageError)
    }

    private func exchange(endpoint: String, path: String, payload: Data) -> Outcome {
        let response: HTTPConnections.Response
        do {
            response = try connections.post(endpoint: endpoint, path: path, body: [UInt8](payload))
        } catch {
            switch error {
            case .refused(let problem): return .refused(problem)
            case .lost(let problem): return .lost(problem)
            }
        }
        guard let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] else {
            let text = String(decoding: response.body.prefix(200), as: UTF8.self)
            if response.status == 502 || response.status == 503 || response.status == 504 {
                return .lost("HTTP \(response.status) \(text)")
            }
            return .failed(
                StorageError(
                    code: .unknown,
                    message: "\(endpoint) answered \(path) with HTTP \(response.status) and no JSON: \(text)",
                    location: address))
        }
        return .reply(json)
    }

    static func error(code: Int, message: String, address: String) -> StorageError {
        if message.contains("compacted") {
            return StorageError(
                code: .unavailable,
                message:
                    "\(message): the revision this read was fixed at is no longer kept by the cluster; run the read again",
                location: address)
        }
        if message.contains("too many operations") {
            return StorageError(
                code: .limitExceeded,
                message:
                    "\(message) (the cluster's --max-txn-ops); write less at once, or tell the engine the cluster's limit (?max-txn-ops=N)",
                location: address)
        }
        if message.contains("too large") {
            return StorageError(
                code: .limitExceeded, message: "\(message) (the cluster's --max-request-bytes); write less at once",
                location: address)
        }
        if message.contains("space exceeded") {
            return StorageError(
                code: .limitExceeded,
                message:
                    "\(message) (the cluster's --quota-backend-bytes); compact and defragment the cluster or raise its quota",
                location: address)
        }
        return StorageError(code: .unknown, message: "etcd error \(code): \(message)", location: address)
    }

    // MARK: JSON helpers

    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    static func bytes(_ value: Any?) throws(StorageError) -> [UInt8] {
        guard let text = value as? String else { return [] }  // proto3 JSON leaves empty bytes out
        guard let data = Data(base64Encoded: text) else {
            throw StorageError(
                code: .corruption, message: "etcd returned bytes that are not base64: \(text.prefix(40))")
        }
        return [UInt8](data)
    }

    /// An int64 field: proto3 JSON writes them as strings and leaves zeros out.
    static func int(_ value: Any?) -> UInt64 {
        if let text = value as? String { return UInt64(text) ?? 0 }
        if let number = value as? NSNumber { return number.uint64Value }
        return 0
    }

    static func revision(of reply: [String: Any]) -> UInt64 {
        int((reply["header"] as? [String: Any])?["revision"])
    }

    struct KeyValue {
        var key: [UInt8]
        var value: [UInt8]
        var modRevision: UInt64
    }

    static func keyValues(_ value: Any?) throws(StorageError) -> [KeyValue] {
        guard let list = value as? [[String: Any]] else { return [] }
        var result: [KeyValue] = []
        result.reserveCapacity(list.count)
        for item in list {
            result.append(
                KeyValue(
                    key: try bytes(item["key"]), value: try bytes(item["value"]), modRevision: int(item["mod_revision"])
                ))
        }
        return result
    }
}
