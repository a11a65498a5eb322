import BuriStorage
import Foundation
import Synchronization

/// What one etcd transaction may carry: the cluster's `--max-txn-ops` and `--max-request-bytes`.
///
/// The engine refuses a commit over these limits itself (nothing is sent, nothing written), with a
/// ``StorageError/Code/limitExceeded`` error naming the limit and the commit's size. The defaults
/// are etcd's own; `Scripts/etcd-cluster` starts clusters with 4096 operations and 8 MiB, and
/// prints a location that says so.
///
/// ```swift
/// let limits = EtcdLimits(maxTxnOps: 4096, maxRequestBytes: 8 << 20)
/// ```
public struct EtcdLimits: Sendable, Hashable {
    /// Operations (puts and deletes), and separately compares, per transaction. etcd's default: 128.
    public var maxTxnOps: Int
    /// Bytes per request. etcd's default: 1.5 MiB.
    public var maxRequestBytes: Int

    public init(maxTxnOps: Int = 128, maxRequestBytes: Int = 1_572_864) {
        self.maxTxnOps = maxTxnOps
        self.maxRequestBytes = maxRequestBytes
    }
}

/// Buri's replicated engine: the data lives in an etcd 3.4 cluster (Raft consensus), under a key
/// prefix of its own, so several databases (and other programs) can share one cluster, and several
/// processes can open the same database at once.
///
/// - A snapshot is one etcd revision: every read of a query or transaction is a range request at
///   that revision, so it sees one consistent point in time.
/// - A commit is one etcd transaction: all its puts and deletes or none. Its compares are the
///   writer's conditions: each key it read must have the `mod_revision` it had at the snapshot (or
///   still be absent), and no key may have been put in a range it scanned since then. When they
///   fail the commit is refused with ``StorageError/Code/conflict`` and Buri runs the write again.
/// - A commit over the cluster's limits (``EtcdLimits``) is refused, never split.
/// - Acknowledged commits are committed by a majority of the members (see docs/DURABILITY.md).
///
/// ```swift
/// let engine = try EtcdEngine(location: "etcd://127.0.0.1:2379,127.0.0.1:2381/people")
/// let db = try BuriDatabase(engine: engine)
/// ```
public final class EtcdEngine: StorageEngine, Sendable {
    /// The HTTP client of the cluster's JSON gateway.
    public let client: EtcdClient
    /// The database's name in the cluster.
    public let name: String
    /// What every key of this database starts with in etcd: the name's UTF-8 bytes and a 0 byte
    /// (so that no database's keys lie inside another's: `a` and `ab` stay apart).
    public let keyPrefix: [UInt8]
    /// The transaction limits commits are checked against.
    public let limits: EtcdLimits
    public let location: String
    public var isShared: Bool { true }
    /// The first key past every key of this database.
    let prefixEnd: [UInt8]
    /// The time to live (seconds) of the leases this engine grants (``grantLease(key:)``): how
    /// long after this client stops (or loses the cluster) other clients take it for gone.
    public let leaseSeconds: Int
    private let closed = Atomic<Bool>(false)
    let watches = Mutex<[ObjectIdentifier: EtcdWatch]>([:])
    /// The leases granted and not released, renewed until the engine closes.
    let leases = Mutex<[UInt64: EtcdLease]>([:])

    /// Opens the database `name` in the cluster whose members listen at `endpoints` (`host:port`).
    /// Nothing is sent until the first read or commit. A request no member answers is retried on
    /// the others for `retryWindow` seconds (long enough for an election), then fails with
    /// ``StorageError/Code/unavailable``. `leaseSeconds`: see ``leaseSeconds``.
    public init(
        endpoints: [String], name: String, limits: EtcdLimits = EtcdLimits(), retryWindow: Double = 30,
        leaseSeconds: Int = EtcdLocation.defaultLeaseSeconds
    ) throws(StorageError) {
        guard !name.isEmpty else {
            throw StorageError(
                code: .invalidArgument,
                message: "an etcd database needs a name (the key prefix in the cluster): etcd://host:port/NAME")
        }
        guard !name.utf8.contains(0) else {
            throw StorageError(
                code: .invalidArgument,
                message:
                    "the etcd database name '\(name)' contains a NUL byte, which ends the key prefix; choose another name"
            )
        }
        guard limits.maxTxnOps > 0, limits.maxRequestBytes > 0 else {
            throw StorageError(
                code: .invalidArgument,
                message:
                    "etcd limits must be positive (max-txn-ops \(limits.maxTxnOps), max-request-bytes \(limits.maxRequestBytes))"
            )
        }
        guard leaseSeconds > 0 else {
            throw StorageError(
                code: .invalidArgument,
                message: "an etcd lease needs a positive time to live (lease-seconds \(leaseSeconds))")
        }
        client = try EtcdClient(endpoints: endpoints, retryWindow: retryWindow)
        self.leaseSeconds = leaseSeconds
        self.name = name
        self.limits = limits
        keyPrefix = Array(name.utf8) + [0]
        prefixEnd = Array(name.utf8) + [1]
        location = "etcd://" + endpoints.joined(separator: ",") + "/" + name
    }

    /// Opens the database a location names: `etcd://HOST:PORT[,HOST:PORT…]/NAME`, optionally
    /// followed by `?max-txn-ops=N&max-request-bytes=M` (the cluster's limits; etcd's defaults
    /// otherwise) and `lease-seconds=S` (``leaseSeconds``). A host without a port gets 2379. A malformed location is refused (see
    /// ``EtcdLocation``). `retryWindow` is how long a request no member answers is retried.
    ///
    /// ```swift
    /// let engine = try EtcdEngine(location: "etcd://127.0.0.1:2379/app?max-txn-ops=4096")
    /// ```
    public convenience init(location: String, retryWindow: Double = 30) throws(StorageError) {
        let parsed = try EtcdLocation(location)
        try self.init(
            endpoints: parsed.endpoints, name: parsed.name, limits: parsed.limits, retryWindow: retryWindow,
            leaseSeconds: parsed.leaseSeconds)
    }

    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    func checkOpen() throws(StorageError) {
        if isClosed {
            throw StorageError(code: .databaseClosed, message: "call made after close()", location: location)
        }
    }

    /// One round trip: the cluster's current revision becomes the snapshot's.
    public func snapshot() throws -> any StorageSnapshot {
        try checkOpen()
        // A point read of the bare prefix (never a Buri key): its header carries the current
        // revision at O(1). (A limited range would cost etcd 3.4 a count of the whole range.)
        let reply = try client.call(
            "/v3/kv/range", ["key": EtcdClient.base64(keyPrefix), "keys_only": true], ambiguousIsSafe: true)
        let revision = EtcdClient.revision(of: reply)
        guard revision > 0 else {
            throw StorageError(
                code: .unknown, message: "the cluster answered a read without a revision", location: location)
        }
        return EtcdSnapshot(engine: self, revision: revision)
    }

    /// Writers on a shared engine read snapshots; this is one too.
    public func latest() throws -> any StorageReader { try snapshot() }

    public func makeBatch() -> any StorageBatch { EtcdBatch() }

    public func commit(_ batch: any StorageBatch, conditions: StorageConditions?, sync: Bool) throws {
        try checkOpen()
        guard let batch = batch as? EtcdBatch else {
            throw StorageError(code: .invalidArgument, message: "a batch made by another engine", location: location)
        }
        let operations = batch.finalOperations()
        if operations.isEmpty { return }

        var compares: [[String: Any]] = []
        var compareBytes = 0
        if let conditions, !conditions.isEmpty {
            guard let snapshot = conditions.snapshot as? EtcdSnapshot, snapshot.engine === self else {
                throw StorageError(
                    code: .invalidArgument, message: "conditions read from another engine's snapshot",
                    location: location)
            }
            var unique = Set<[UInt8]>()
            let keys = conditions.keys.filter { unique.insert($0).inserted }
            let seen = try snapshot.modRevisions(of: keys)
            for (key, modRevision) in zip(keys, seen) {
                let full = keyPrefix + key
                compareBytes += full.count + 16
                compares.append([
                    "target": "MOD", "result": "EQUAL", "key": EtcdClient.base64(full),
                    "mod_revision": String(modRevision),
                ])
            }
            for range in Set(conditions.ranges) where !range.isEmpty {
                let (start, end) = etcdBounds(range)
                compareBytes += start.count + end.count + 16
                // No key in the range put after the snapshot. (Deletions leave no key to compare:
                // see docs/DURABILITY.md for why that is still safe for unique checks.)
                compares.append([
                    "target": "MOD", "result": "LESS", "key": EtcdClient.base64(start),
                    "range_end": EtcdClient.base64(end), "mod_revision": String(snapshot.revision + 1),
                ])
            }
        }
        var operationBytes = 0
        var success: [[String: Any]] = []
        success.reserveCapacity(operations.count)
        for operation in operations {
            let full = keyPrefix + operation.key
            if let value = operation.value {
                operationBytes += full.count + value.count + 8
                success.append(["request_put": ["key": EtcdClient.base64(full), "value": EtcdClient.base64(value)]])
            } else {
                operationBytes += full.count + 8
                success.append(["request_delete_range": ["key": EtcdClient.base64(full)]])
            }
        }
        if operations.count > limits.maxTxnOps || compares.count > limits.maxTxnOps {
            throw StorageError(
                code: .limitExceeded,
                message:
                    "the commit has \(operations.count) write(s) and \(compares.count) read condition(s); etcd's --max-txn-ops allows \(limits.maxTxnOps) of each in one transaction. Nothing was written: write less in one transaction (or use a non-atomic chunked import), or raise the cluster's limit and say so in the location (?max-txn-ops=N)",
                location: location)
        }
        let total = operationBytes + compareBytes + 64
        if total > limits.maxRequestBytes {
            throw StorageError(
                code: .limitExceeded,
                message:
                    "the commit is about \(total) bytes (\(operations.count) write(s), \(compares.count) condition(s)); etcd's --max-request-bytes allows \(limits.maxRequestBytes). Nothing was written: write less in one transaction, or raise the cluster's limit and say so in the location (?max-request-bytes=N)",
                location: location)
        }
        let reply = try client.call(
            "/v3/kv/txn", ["compare": compares, "success": success], ambiguousIsSafe: !compares.isEmpty)
        if (reply["succeeded"] as? Bool) != true {
            let at = (conditions?.snapshot as? EtcdSnapshot)?.revision ?? 0
            throw StorageError(
                code: .conflict,
                message:
                    "a key or range read at revision \(at) changed before the commit (cluster revision now \(EtcdClient.revision(of: reply)))",
                location: location)
        }
    }

    public func close() {
        closed.store(true, ordering: .releasing)
        let running = watches.withLock { watches -> [EtcdWatch] in
            defer { watches = [:] }
            return Array(watches.values)
        }
        for watch in running { watch.stop() }
        for lease in leases.withLock({ Array($0.values) }) { lease.release() }
    }

    /// Deletes the whole database (every key under its prefix) in one etcd request, atomically.
    /// Other databases in the cluster are untouched.
    ///
    /// ```swift
    /// try EtcdEngine(location: "etcd://127.0.0.1:2379/scratch").deleteAll()
    /// ```
    public func deleteAll() throws {
        try checkOpen()
        _ = try client.call(
            "/v3/kv/deleterange", ["key": EtcdClient.base64(keyPrefix), "range_end": EtcdClient.base64(prefixEnd)],
            ambiguousIsSafe: true)
    }

    public func property(_ name: String) throws -> String? {
        switch name {
        case "etcd.revision":
            let reply = try client.call(
                "/v3/kv/range", ["key": EtcdClient.base64(keyPrefix), "keys_only": true], ambiguousIsSafe: true)
            return String(EtcdClient.revision(of: reply))
        case "etcd.prefix": return keyPrefix.map { String(format: "%02x", $0) }.joined()
        case "etcd.endpoints": return client.endpoints.joined(separator: ",")
        default: return nil
        }
    }

    /// `range` as etcd's `[key, range_end)` in this database's prefix.
    func etcdBounds(_ range: BuriStorage.KeyRange) -> ([UInt8], [UInt8]) {
        (keyPrefix + (range.start ?? []), range.end.map { keyPrefix + $0 } ?? prefixEnd)
    }
}

/// One etcd revision of the database, read through range requests at that revision.
final class EtcdSnapshot: StorageSnapshot, @unchecked Sendable {
    // @unchecked: `seen` is behind a Mutex; everything else is immutable.
    let engine: EtcdEngine
    let revision: UInt64
    /// The `mod_revision` (0: absent) of every key read by point reads, for commit conditions.
    let seen = Mutex<[[UInt8]: UInt64]>([:])

    init(engine: EtcdEngine, revision: UInt64) {
        self.engine = engine
        self.revision = revision
    }

    func withValue<R>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try engine.checkOpen()
        let reply = try engine.client.call(
            "/v3/kv/range",
            [
                "key": EtcdClient.base64(engine.keyPrefix + key), "revision": String(revision),
            ], ambiguousIsSafe: true)
        let found = try EtcdClient.keyValues(reply["kvs"]).first
        seen.withLock { $0[key] = found?.modRevision ?? 0 }
        guard let found else { return try body(nil) }
        return try found.value.withUnsafeBytes { try body($0) }
    }

    func values(forKeys keys: [[UInt8]]) throws -> [[UInt8]?] {
        try lookUp(keys).map { $0?.value }
    }

    /// Every read is a network round trip: queries read records ahead in batches, and writes read
    /// the old records they replace in one request.
    var prefersBatchedReads: Bool { true }

    /// The `mod_revision` at this snapshot of each key (0 where absent), from what was read or
    /// else read now.
    func modRevisions(of keys: [[UInt8]]) throws -> [UInt64] {
        let known = seen.withLock { seen in keys.map { seen[$0] } }
        let missing = zip(keys, known).filter { $0.1 == nil }.map(\.0)
        if !missing.isEmpty { _ = try lookUp(missing) }
        return seen.withLock { seen in keys.map { seen[$0] ?? 0 } }
    }

    /// Reads `keys` at this revision in transactions of range requests (as many per round trip as
    /// the cluster allows).
    private func lookUp(_ keys: [[UInt8]]) throws -> [EtcdClient.KeyValue?] {
        try engine.checkOpen()
        var result: [EtcdClient.KeyValue?] = []
        result.reserveCapacity(keys.count)
        var start = 0
        while start < keys.count {
            let chunk = keys[start..<min(keys.count, start + engine.limits.maxTxnOps)]
            let reads: [[String: Any]] = chunk.map {
                ["request_range": ["key": EtcdClient.base64(engine.keyPrefix + $0), "revision": String(revision)]]
            }
            let reply = try engine.client.call("/v3/kv/txn", ["success": reads], ambiguousIsSafe: true)
            let responses = reply["responses"] as? [[String: Any]] ?? []
            guard responses.count == chunk.count else {
                throw StorageError(
                    code: .unknown, message: "the cluster answered \(responses.count) of \(chunk.count) reads",
                    location: engine.location)
            }
            for (key, response) in zip(chunk, responses) {
                let found = try EtcdClient.keyValues((response["response_range"] as? [String: Any])?["kvs"]).first
                seen.withLock { $0[key] = found?.modRevision ?? 0 }
                result.append(found)
            }
            start += chunk.count
        }
        return result
    }

    func cursor(in range: BuriStorage.KeyRange, reverse: Bool) throws -> any StorageCursor {
        try engine.checkOpen()
        let (lower, upper) = engine.etcdBounds(range)
        return EtcdCursor(snapshot: self, lower: lower, upper: upper, reverse: reverse)
    }
}

/// Pages through a range at the snapshot's revision: limit-sized range requests, each continuing
/// after the last key of the one before (in reverse: sorted descending, ending before it).
final class EtcdCursor: StorageCursor {
    let snapshot: EtcdSnapshot
    let lower: [UInt8]
    let upper: [UInt8]
    let reverse: Bool
    /// What is still to be fetched: `[windowLower, windowUpper)`.
    private var windowLower: [UInt8]
    private var windowUpper: [UInt8]
    private var page: [EtcdClient.KeyValue] = []
    private var index = -1
    private var exhausted = false
    private var pageSize = 16
    private let prefixCount: Int

    init(snapshot: EtcdSnapshot, lower: [UInt8], upper: [UInt8], reverse: Bool) {
        self.snapshot = snapshot
        self.lower = lower
        self.upper = upper
        self.reverse = reverse
        windowLower = lower
        windowUpper = upper
        prefixCount = snapshot.engine.keyPrefix.count
    }

    var isOnEntry: Bool { index >= 0 && index < page.count }

    func next() throws -> Bool {
        if index < page.count { index += 1 }
        if index < page.count { return true }
        guard !exhausted else { return false }
        guard compareBytes(windowLower, windowUpper) < 0 else {
            exhausted = true
            return false
        }
        try snapshot.engine.checkOpen()
        var request: [String: Any] = [
            "key": EtcdClient.base64(windowLower), "range_end": EtcdClient.base64(windowUpper),
            "limit": String(pageSize), "revision": String(snapshot.revision),
        ]
        if reverse {
            request["sort_order"] = "DESCEND"
            request["sort_target"] = "KEY"
        }
        let reply = try snapshot.engine.client.call("/v3/kv/range", request, ambiguousIsSafe: true)
        let kvs = try EtcdClient.keyValues(reply["kvs"])
        let more = (reply["more"] as? Bool) ?? false
        if kvs.isEmpty && more {
            throw StorageError(
                code: .unknown, message: "the cluster answered an empty page that claims more keys follow",
                location: snapshot.engine.location)
        }
        pageSize = min(pageSize * 4, 1024)
        if let last = kvs.last?.key {
            if reverse { windowUpper = last } else { windowLower = last + [0] }
        }
        if !more { exhausted = true }
        page = kvs.map { kv in
            var stripped = kv
            stripped.key = Array(kv.key.dropFirst(prefixCount))
            return stripped
        }
        index = page.isEmpty ? 0 : 0
        return !page.isEmpty
    }

    func seek(_ key: [UInt8]) {
        let full = snapshot.engine.keyPrefix + key
        if reverse {
            let after = full + [0]
            windowLower = lower
            windowUpper = compareBytes(after, upper) < 0 ? after : upper
        } else {
            windowLower = compareBytes(full, lower) > 0 ? full : lower
            windowUpper = upper
        }
        page = []
        index = -1
        exhausted = false
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try page[index].key.withUnsafeBytes { try body($0) }
    }

    func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard isOnEntry else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try page[index].value.withUnsafeBytes { try body($0) }
    }
}

/// Puts and deletes in order; a later operation on a key replaces an earlier one (etcd refuses a
/// transaction that names a key twice).
final class EtcdBatch: StorageBatch {
    struct Operation {
        var key: [UInt8]
        var value: [UInt8]?
    }

    private var operations: [Operation] = []
    private var positions: [[UInt8]: Int] = [:]
    private(set) var byteSize = 0

    var count: Int { operations.count }

    func put(_ key: [UInt8], _ value: [UInt8]) { add(Operation(key: key, value: value)) }
    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) { put(Array(key), Array(value)) }
    func delete(_ key: [UInt8]) { add(Operation(key: key, value: nil)) }
    func delete(_ key: UnsafeRawBufferPointer) { delete(Array(key)) }

    private func add(_ operation: Operation) {
        byteSize += operation.key.count + (operation.value?.count ?? 0)
        if let position = positions[operation.key] {
            operations[position] = operation
        } else {
            positions[operation.key] = operations.count
            operations.append(operation)
        }
    }

    func finalOperations() -> [Operation] { operations }
}

/// A parsed `etcd://` location: the members' `host:port` list, the database's name and the
/// cluster's limits. The accepted form is ``form``; anything else (another scheme, an empty or
/// malformed host, a port that is not a number from 1 to 65535, an unknown, repeated or
/// non-numeric query parameter) is refused with ``StorageError/Code/invalidArgument`` and a
/// message that shows the form.
///
/// ```swift
/// let location = try EtcdLocation("etcd://10.0.0.1:2379,[::1]:2381/people?max-txn-ops=4096")
/// // location.endpoints == ["10.0.0.1:2379", "[::1]:2381"], location.name == "people"
/// ```
public struct EtcdLocation: Sendable, Hashable {
    /// `host:port` of each member (a host without a port gets 2379; IPv6 hosts in brackets).
    public var endpoints: [String]
    /// The database's name in the cluster (percent-decoded).
    public var name: String
    /// The limits the query parameters name (etcd's defaults otherwise).
    public var limits: EtcdLimits
    /// The time to live of the engine's leases, `lease-seconds` (``defaultLeaseSeconds`` otherwise).
    public var leaseSeconds: Int = Self.defaultLeaseSeconds

    /// How long a client's lease lives without renewal unless the location says otherwise: a
    /// killed client's unfinished import is taken for abandoned this long after it died.
    public static let defaultLeaseSeconds = 10

    /// How an etcd location is written.
    public static let form =
        "etcd://HOST:PORT[,HOST:PORT…]/NAME[?max-txn-ops=N&max-request-bytes=M&lease-seconds=S]"

    public init(_ location: String) throws(StorageError) {
        func refuse(_ problem: String) -> StorageError {
            StorageError(
                code: .invalidArgument,
                message: "'\(location)' is not a valid etcd location: \(problem); write \(Self.form)",
                location: location)
        }
        guard location.hasPrefix("etcd://") else {
            throw refuse("it does not start with etcd://")
        }
        let rest = location.dropFirst("etcd://".count)
        if rest.contains("#") { throw refuse("it contains '#' (write a '#' in the name as %23)") }
        guard let slash = rest.firstIndex(of: "/") else {
            throw refuse(
                rest.isEmpty
                    ? "it names no member and no database" : "it names no database (no '/NAME' after the members)")
        }
        let hosts = rest[..<slash].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if hosts == [""] { throw refuse("it names no member (no HOST:PORT between etcd:// and /NAME)") }
        endpoints = []
        for host in hosts {
            switch Self.endpoint(host) {
            case .success(let endpoint): endpoints.append(endpoint)
            case .failure(let problem): throw refuse(problem.text)
            }
        }
        var path = rest[rest.index(after: slash)...]
        var query = Substring("")
        if let mark = path.firstIndex(of: "?") {
            query = path[path.index(after: mark)...]
            path = path[..<mark]
        }
        guard let decoded = String(path).removingPercentEncoding else {
            throw refuse("the database name '\(path)' is not valid percent-encoding")
        }
        guard !decoded.isEmpty else { throw refuse("the database name after the '/' is empty") }
        guard !decoded.utf8.contains(0) else {
            throw refuse("the database name contains a NUL byte, which ends the key prefix")
        }
        name = decoded
        limits = EtcdLimits()
        var seen = Set<String>()
        for item in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let known = ["max-txn-ops", "max-request-bytes", "lease-seconds"]
            guard known.contains(parts[0]) else {
                throw refuse(
                    "'\(parts[0])' is not a parameter of an etcd location (known: max-txn-ops, max-request-bytes, lease-seconds)"
                )
            }
            guard seen.insert(parts[0]).inserted else { throw refuse("'\(parts[0])' is given twice") }
            guard parts.count == 2, !parts[1].isEmpty, parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let value = Int(parts[1]), value > 0
            else {
                throw refuse("'\(item)' needs a positive whole number: \(parts[0])=N")
            }
            switch parts[0] {
            case "max-txn-ops": limits.maxTxnOps = value
            case "lease-seconds": leaseSeconds = value
            default: limits.maxRequestBytes = value
            }
        }
    }

    private struct Problem: Error { var text: String }

    /// `host[:port]` as `host:port`, or why it is not one.
    private static func endpoint(_ text: String) -> Result<String, Problem> {
        if text.isEmpty {
            return .failure(Problem(text: "its member list has an empty entry (two commas, or a comma at an end)"))
        }
        var host: Substring
        var port: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                return .failure(Problem(text: "'\(text)' opens an IPv6 address with '[' but never closes it"))
            }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else {
                    return .failure(
                        Problem(text: "'\(text)' has '\(after)' after its IPv6 address; write [ADDRESS]:PORT"))
                }
                port = after.dropFirst()
            }
            guard !host.isEmpty, host.contains(":"),
                host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." || $0 == "%" || $0.isLetter || $0.isNumber })
            else {
                return .failure(Problem(text: "'\(text)' does not hold an IPv6 address between its brackets"))
            }
        } else {
            let pieces = text.split(separator: ":", omittingEmptySubsequences: false)
            if pieces.count > 2 {
                return .failure(
                    Problem(text: "'\(text)' has more than one ':' (write an IPv6 address in brackets: [::1]:2379)"))
            }
            host = pieces[0]
            port = pieces.count == 2 ? pieces[1] : nil
            if host.isEmpty { return .failure(Problem(text: "'\(text)' has no host before the port")) }
            guard
                host.unicodeScalars.allSatisfy({
                    $0.isASCII
                        && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "."
                            || $0 == "_")
                })
            else {
                return .failure(
                    Problem(
                        text: "'\(host)' is not a host name or IPv4 address (letters, digits, '-', '.' and '_' only)"))
            }
        }
        guard let port else { return .success(text + ":2379") }
        guard !port.isEmpty else { return .failure(Problem(text: "'\(text)' has no port after its ':'")) }
        guard port.utf8.allSatisfy({ (0x30...0x39).contains($0) }), port.count <= 5, let number = Int(port),
            (1...65535).contains(number)
        else {
            return .failure(Problem(text: "'\(port)' in '\(text)' is not a port (a number from 1 to 65535)"))
        }
        return .success(text)
    }
}
