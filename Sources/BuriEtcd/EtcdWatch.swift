#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import BuriStorage
import Foundation
import Synchronization

extension EtcdEngine {
    /// Calls `observer` once for every commit to this database, by any client of the cluster, in
    /// revision order, from etcd's watch stream (one event per etcd revision, which is one
    /// transaction; keys without the prefix). Commits made after this returns are all seen; when
    /// the member serving the watch fails, the watch resumes on another member from the revision
    /// after the last one delivered, so none is skipped or repeated. Calls come on a background
    /// queue, one at a time.
    ///
    /// ```swift
    /// let observation = engine.observeCommits { event in print(event.revision, event.changes.count) }
    /// observation.cancel()
    /// ```
    public func observeCommits(_ observer: @escaping @Sendable (StorageCommitEvent) -> Void) -> StorageObservation {
        // Start right after the current revision, so that nothing committed from now on is missed.
        let current = (try? property("etcd.revision")).flatMap { $0.flatMap { UInt64($0) } } ?? 0
        let watch = EtcdWatch(engine: self, startRevision: current + 1, observer: observer)
        let id = ObjectIdentifier(watch)
        watches.withLock { $0[id] = watch }
        if isClosed { watch.stop() } else { watch.start() }
        return StorageObservation { [weak self] in
            watch.stop()
            self?.watches.withLock { _ = $0.removeValue(forKey: id) }
        }
    }
}

/// One watch stream over the database's prefix on a thread of its own, reconnecting to another
/// member (from the revision after the last one delivered) when the stream breaks.
final class EtcdWatch: Sendable {
    struct State {
        var nextRevision: UInt64
        var stopped = false
        var endpoint = 0
        var socket: Int32 = -1
        var failures = 0
    }

    let engine: EtcdEngine
    let observer: @Sendable (StorageCommitEvent) -> Void
    let state: Mutex<State>

    init(engine: EtcdEngine, startRevision: UInt64, observer: @escaping @Sendable (StorageCommitEvent) -> Void) {
        self.engine = engine
        self.observer = observer
        state = Mutex(State(nextRevision: startRevision))
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "buri-etcd-watch"
        thread.start()
    }

    func stop() {
        let socket = state.withLock { state -> Int32 in
            state.stopped = true
            return state.socket
        }
        // Wakes the thread out of its blocking read; it closes the socket.
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func run() {
        let endpoints = engine.client.endpoints
        let connections = HTTPConnections(timeout: 5)
        while !isStopped && !engine.isClosed {
            let (index, revision) = state.withLock { ($0.endpoint, $0.nextRevision) }
            let endpoint = endpoints[index % endpoints.count]
            var create: [String: Any] = [
                "key": EtcdClient.base64(engine.keyPrefix), "range_end": EtcdClient.base64(engine.prefixEnd),
            ]
            if revision > 0 { create["start_revision"] = String(revision) }
            if let body = try? JSONSerialization.data(withJSONObject: ["create_request": create]),
                let fd = try? connections.connect(endpoint)
            {
                // Reads block until events arrive: no timeout on this socket.
                var forever = timeval(tv_sec: 0, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, socklen_t(MemoryLayout<timeval>.size))
                let registered = state.withLock { state -> Bool in
                    if state.stopped { return false }
                    state.socket = fd
                    return true
                }
                if registered {
                    stream(
                        fd: fd,
                        request: HTTPConnections.request(endpoint: endpoint, path: "/v3/watch", body: [UInt8](body)))
                }
                state.withLock { $0.socket = -1 }
                close(fd)
            }
            // The stream ended: the next member, after a pause that grows while nothing is delivered.
            let pause = state.withLock { state -> Double in
                state.endpoint += 1
                state.failures += 1
                return min(0.05 * Double(state.failures), 1.0)
            }
            if !isStopped { usleep(UInt32(pause * 1e6)) }
        }
    }

    /// Sends the watch request and delivers what the stream carries until it ends.
    private func stream(fd: Int32, request: [UInt8]) {
        guard HTTPConnections.sendAll(fd, request) == nil else { return }
        var reader = Reader(fd: fd)
        var pending: [UInt8] = []
        do {
            guard let head = try reader.head(), head.status == 200 else { return }
            while !isStopped {
                let chunk: [UInt8]
                if head.chunked {
                    guard let next = try reader.nextChunk() else { return }
                    chunk = next
                } else {
                    if reader.start == reader.buffer.count { guard try reader.fill() else { return } }
                    chunk = Array(reader.buffer[reader.start...])
                    reader.start = reader.buffer.count
                }
                pending += chunk
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = Array(pending[..<newline])
                    pending.removeSubrange(...newline)
                    if !line.isEmpty { handle(line) }
                }
            }
        } catch {
            return
        }
    }

    private func handle(_ line: [UInt8]) {
        guard let json = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
            let result = json["result"] as? [String: Any]
        else { return }
        guard let events = result["events"] as? [[String: Any]], !events.isEmpty else { return }
        let prefixCount = engine.keyPrefix.count
        var grouped: [(UInt64, [StorageCommitEvent.Change])] = []
        for event in events {
            guard let kv = event["kv"] as? [String: Any],
                let key = try? EtcdClient.bytes(kv["key"]), key.count >= prefixCount
            else { continue }
            let revision = EtcdClient.int(kv["mod_revision"])
            let stripped = Array(key.dropFirst(prefixCount))
            let change: StorageCommitEvent.Change
            if (event["type"] as? String) == "DELETE" {
                change = .delete(key: stripped)
            } else {
                change = .put(key: stripped, value: (try? EtcdClient.bytes(kv["value"])) ?? [])
            }
            if let last = grouped.last, last.0 == revision {
                grouped[grouped.count - 1].1.append(change)
            } else {
                grouped.append((revision, [change]))
            }
        }
        for (revision, changes) in grouped {
            let deliver = state.withLock { state -> Bool in
                guard !state.stopped, revision >= state.nextRevision else { return false }
                state.nextRevision = revision + 1
                state.failures = 0
                return true
            }
            if deliver { observer(StorageCommitEvent(changes: changes, revision: revision)) }
        }
    }
}
