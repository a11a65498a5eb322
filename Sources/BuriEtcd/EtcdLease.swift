import BuriStorage
import Dispatch
import Synchronization

/// A lease of an ``EtcdEngine`` (``StorageEngine/grantLease(key:)``): an etcd lease with one key
/// bound to it, renewed in the background every third of its time to live until it is released
/// or its engine closes. If no renewal reaches the cluster within the time to live (the process
/// stopped, or lost every member for that long), etcd ends the lease and deletes the key; the
/// lease then ``isLost`` for good and renewing stops.
final class EtcdLease: StorageLease, @unchecked Sendable {
    // @unchecked: the timer is a dispatch source (cancelled from any thread); the rest is immutable or behind the Mutex.
    let id: UInt64
    let key: [UInt8]
    private let engine: EtcdEngine
    private let timer: DispatchSourceTimer
    private struct State {
        var released = false
        var lost = false
        /// Renewals the cluster acknowledged.
        var renewals = 0
    }
    private let state = Mutex(State())

    init(engine: EtcdEngine, id: UInt64, key: [UInt8], seconds: Int) {
        self.engine = engine
        self.id = id
        self.key = key
        let every = max(0.2, Double(seconds) / 3)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "buri.etcd.lease", qos: .utility))
        timer.schedule(deadline: .now() + every, repeating: every)
        timer.setEventHandler { [weak self] in self?.renew() }
        timer.resume()
    }

    /// Whether the cluster ended the lease (a renewal found it gone): its key no longer exists.
    var isLost: Bool { state.withLock { $0.lost } }

    var isHeld: Bool { state.withLock { !$0.lost && !$0.released } }

    /// How many renewals the cluster has acknowledged (for tests: a lease renewed past its time
    /// to live still holds).
    var renewals: Int { state.withLock { $0.renewals } }

    private func renew() {
        guard !state.withLock({ $0.released || $0.lost }) else { return }
        do {
            if try engine.client.keepAlive(id) == 0 {
                state.withLock { $0.lost = true }
                timer.cancel()
            } else {
                state.withLock { $0.renewals += 1 }
            }
        } catch {
            // No member answered this time; the next tick tries again (the lease may still hold).
        }
    }

    func release() {
        let first = state.withLock { state -> Bool in
            defer { state.released = true }
            return !state.released
        }
        guard first else { return }
        timer.cancel()
        engine.forget(self)
        // Best effort: a lease not revoked ends on its own after its time to live.
        try? engine.client.revokeLease(id)
    }
}

extension EtcdEngine {
    /// Grants an etcd lease of ``leaseSeconds`` and puts `key(id)` under this database's prefix
    /// bound to it (two requests), then renews it in the background until it is released or the
    /// engine closes.
    public func grantLease(key: (UInt64) -> [UInt8]) throws -> (any StorageLease)? {
        try checkOpen()
        let (id, seconds) = try client.grantLease(seconds: leaseSeconds)
        let leaseKey = key(id)
        do {
            try client.put(keyPrefix + leaseKey, [], lease: id)
        } catch {
            try? client.revokeLease(id)
            throw error
        }
        let lease = EtcdLease(engine: self, id: id, key: leaseKey, seconds: max(seconds, 1))
        // Under the lock `close()` takes the leases from: a lease granted while it closes is
        // either released by it or here.
        let kept = leases.withLock { leases -> Bool in
            if isClosed { return false }
            leases[id] = lease
            return true
        }
        guard kept else {
            lease.release()
            try checkOpen()
            return nil
        }
        return lease
    }

    public func leaseTimeToLive(_ id: UInt64) throws -> (remaining: Int, granted: Int)? {
        try checkOpen()
        return try client.leaseTimeToLive(id)
    }

    func forget(_ lease: EtcdLease) { _ = leases.withLock { $0.removeValue(forKey: lease.id) } }
}
