import BuriStorage
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
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

/// One watch stream over the database's prefix, reconnecting to another member when it breaks.
final class EtcdWatch: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: mutable state lives behind `state`; delegate calls come on one serial queue.
    struct State {
        var nextRevision: UInt64
        var buffer = Data()
        var stopped = false
        var endpoint = 0
        var session: URLSession?
        var failures = 0
    }

    unowned let engine: EtcdEngine
    let observer: @Sendable (StorageCommitEvent) -> Void
    let state: Mutex<State>
    let queue: OperationQueue

    init(engine: EtcdEngine, startRevision: UInt64, observer: @escaping @Sendable (StorageCommitEvent) -> Void) {
        self.engine = engine
        self.observer = observer
        state = Mutex(State(nextRevision: startRevision))
        queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
    }

    func start() {
        let (endpoint, revision, stopped) = state.withLock { ($0.endpoint, $0.nextRevision, $0.stopped) }
        if stopped { return }
        let endpoints = engine.client.endpoints
        guard let url = URL(string: "http://\(endpoints[endpoint % endpoints.count])/v3/watch") else { return }
        var create: [String: Any] = [
            "key": EtcdClient.base64(engine.keyPrefix), "range_end": EtcdClient.base64(engine.prefixEnd),
        ]
        if revision > 0 { create["start_revision"] = String(revision) }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = try? JSONSerialization.data(withJSONObject: ["create_request": create])
        request.timeoutInterval = 24 * 3600
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 24 * 3600
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
        state.withLock { $0.session = session; $0.buffer = Data() }
        session.dataTask(with: request).resume()
    }

    func stop() {
        let session = state.withLock { state -> URLSession? in
            state.stopped = true
            defer { state.session = nil }
            return state.session
        }
        session?.invalidateAndCancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        var lines: [Data] = []
        state.withLock { state in
            state.buffer.append(data)
            while let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(state.buffer[state.buffer.startIndex ..< newline])
                state.buffer = Data(state.buffer[state.buffer.index(after: newline)...])
            }
        }
        for line in lines where !line.isEmpty { handle(line) }
    }

    private func handle(_ line: Data) {
        guard let json = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any],
              let result = json["result"] as? [String: Any] else { return }
        if result["canceled"] as? Bool == true { return }  // reconnects when the stream ends
        guard let events = result["events"] as? [[String: Any]], !events.isEmpty else { return }
        let prefixCount = engine.keyPrefix.count
        var grouped: [(UInt64, [StorageCommitEvent.Change])] = []
        for event in events {
            guard let kv = event["kv"] as? [String: Any],
                  let key = try? EtcdClient.bytes(kv["key"]), key.count >= prefixCount else { continue }
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

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        // The stream ended (the member went away): resume on the next member after a pause.
        let pause = state.withLock { state -> Double? in
            guard !state.stopped else { return nil }
            state.endpoint += 1
            state.failures += 1
            state.session = nil
            return min(0.05 * Double(state.failures), 1.0)
        }
        session.finishTasksAndInvalidate()
        guard let pause else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + pause) { [self] in
            if !engine.isClosed { start() }
        }
    }
}
