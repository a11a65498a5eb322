import BuriStorage

extension EtcdEngine {
    /// Whether `location` names an etcd database (starts with `etcd://`).
    @available(
        *, deprecated,
        message: "ask a StorageEngines registry: engines.kind(for: location), and the kind's capabilities"
    )
    public static func isEtcdLocation(_ location: String) -> Bool { Kind.scheme(location) }

    /// The kind of engine ``EtcdEngine`` is, for a ``StorageEngines`` registry: it claims the
    /// locations `etcd://HOST:PORT[,HOST:PORT…]/NAME[?…]` (``EtcdLocation``), checks their form
    /// without connecting, and probes the cluster (``EtcdClient/probe(timeout:readTimeout:)``):
    /// every member at once, then one linearizable read, within seconds.
    ///
    /// ```swift
    /// var engines = StorageEngines.standard
    /// engines.register(EtcdEngine.Kind(retryWindow: 10))
    /// let db = try BuriDatabase(location: "etcd://127.0.0.1:2379/people", engines: engines)
    /// ```
    public struct Kind: StorageEngineKind {
        /// How long an engine keeps retrying a request no member answers (see ``EtcdEngine/init(location:retryWindow:)``).
        public var retryWindow: Double

        public init(retryWindow: Double = 30) {
            self.retryWindow = retryWindow
        }

        public var name: String { "etcd" }
        public var capabilities: StorageCapabilities { [.probe, .shared] }

        static func scheme(_ location: String) -> Bool { location.hasPrefix("etcd://") }

        public func claims(_ location: String) -> Bool { Self.scheme(location) }

        public func validate(_ location: String) throws(StorageError) {
            let parsed = try EtcdLocation(location)
            _ = try EtcdClient(endpoints: parsed.endpoints)
        }

        public func probe(_ location: String) -> StorageAvailability {
            let client: EtcdClient
            do {
                client = try EtcdClient(endpoints: try EtcdLocation(location).endpoints)
            } catch {
                return .unreachable(reason: error.message, advice: "give a location of the form \(EtcdLocation.form)")
            }
            let probe = client.probe()
            switch probe.verdict {
            case .available:
                return .available
            case .unreachable:
                return .unreachable(
                    reason: probe.summary,
                    advice: "Start the cluster (Scripts/etcd-cluster start DIR) or correct the members in the location")
            case .noQuorum:
                return .unavailable(
                    reason: probe.summary,
                    advice:
                        "A majority of its members must run and reach each other before anything can be read or written"
                )
            }
        }

        /// Opens the database; with ``StorageOpenOptions/Mode/createNew``, first reads whether the
        /// cluster holds a key under its name, and refuses if it does.
        public func open(_ location: String, options: StorageOpenOptions) throws(StorageError) -> any StorageEngine {
            let engine = try EtcdEngine(location: location, retryWindow: retryWindow)
            if options.mode == .createNew {
                do {
                    if try engine.snapshot().cursor(in: .all, reverse: false).next() {
                        engine.close()
                        throw StorageError(
                            code: .invalidArgument,
                            message:
                                "'\(location)' exists: the cluster holds keys under the name '\(engine.name)'; create the database under another name",
                            location: location)
                    }
                } catch let error as StorageError {
                    engine.close()
                    throw error
                } catch {
                    engine.close()
                    throw StorageError(code: .unknown, message: "\(error)", location: location)
                }
            }
            return engine
        }
    }
}
