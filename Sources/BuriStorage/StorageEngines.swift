// Opening a location: the one place where a location string becomes an engine. Each kind of
// engine says which locations are its, what it can do and how to open one; a registry of kinds
// (``StorageEngines``) picks the kind for a location. Apps, the `buri` tool, the demo and the
// stress tool all open locations through it, so a new engine, or a new open option such as an
// encryption key (a field of ``StorageOpenOptions`` that each kind honours or refuses), is
// added in one place.

/// What a kind of engine can do beyond the ``StorageEngine`` protocol: what tools ask before
/// offering a file-level operation, instead of testing the location's text.
///
/// ```swift
/// let kind = engines.kind(for: location)
/// if kind.capabilities.contains(.files) { print("a directory of files") }
/// ```
public struct StorageCapabilities: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The location is a local directory of files the engine owns: it has a size on disk, its
    /// files can be snapshotted to read it without writing there, and the directory can be removed.
    public static let files = StorageCapabilities(rawValue: 1 << 0)
    /// Damaged files can be salvaged (LevelDB's repair).
    public static let repair = StorageCapabilities(rawValue: 1 << 1)
    /// ``StorageEngine/compact(_:)`` rewrites the stored data and gives space back.
    public static let compaction = StorageCapabilities(rawValue: 1 << 2)
    /// ``StorageEngineKind/probe(_:)`` finds out within seconds whether the data can be reached
    /// (an engine across a network), before anything is read or written.
    public static let probe = StorageCapabilities(rawValue: 1 << 3)
    /// Several clients may open the same data at once (``StorageEngine/isShared``).
    public static let shared = StorageCapabilities(rawValue: 1 << 4)
}

/// What a probe of a location found (see ``StorageEngineKind/probe(_:)``).
///
/// ```swift
/// if case .unavailable(let reason, let advice) = kind.probe(location) { print(reason, advice) }
/// ```
public enum StorageAvailability: Sendable, Hashable {
    /// The data can be read and written.
    case available
    /// Nothing answered: `reason` says what each part of the engine said, `advice` what to do.
    case unreachable(reason: String, advice: String)
    /// Something answered but cannot serve reads and writes (a cluster without a quorum).
    case unavailable(reason: String, advice: String)
}

/// How an engine is opened: the options every kind of engine is given.
///
/// A kind honours each option or refuses it with ``StorageError/Code/notSupported``; none is
/// silently ignored. Engine-specific settings (LevelDB's cache size, etcd's retry window) are not
/// here: they are given when the kind is made (``StorageEngines/register(_:)``).
///
/// ```swift
/// let engine = try engines.open("people.buri", options: StorageOpenOptions(mode: .createNew))
/// ```
public struct StorageOpenOptions: Sendable, Hashable {
    /// Whether the data must, may or must not exist already.
    public enum Mode: Sendable, Hashable {
        /// Open existing data only; nothing is created where there is none.
        case existing
        /// Open the data, creating an empty store if there is none. The default.
        case openOrCreate
        /// Create a new, empty store; fail if the location holds data already.
        case createNew
    }

    /// Whether the data must, may or must not exist already. Default ``Mode/openOrCreate``.
    public var mode: Mode

    public init(mode: Mode = .openOrCreate) {
        self.mode = mode
    }
}

/// One kind of storage engine: which locations are its, what it can do, and how to open one.
///
/// Conform to add an engine; register it in a ``StorageEngines`` registry to open its locations
/// by name. Only the registry's default kind may claim plain paths.
///
/// ```swift
/// struct RedisKind: StorageEngineKind {
///     var name: String { "redis" }
///     var capabilities: StorageCapabilities { [.shared, .probe] }
///     func claims(_ location: String) -> Bool { location.hasPrefix("redis://") }
///     func open(_ location: String, options: StorageOpenOptions) throws(StorageError) -> any StorageEngine {
///         try RedisEngine(location: location, options: options)
///     }
/// }
/// ```
public protocol StorageEngineKind: Sendable {
    /// A short name for messages and tools: `leveldb`, `memory`, `etcd`.
    var name: String { get }
    /// What engines of this kind can do.
    var capabilities: StorageCapabilities { get }
    /// Whether `location` names data of this kind (typically: it starts with the kind's scheme).
    func claims(_ location: String) -> Bool
    /// Checks the form of `location` without reading or writing anything: throws
    /// ``StorageError/Code/invalidArgument`` saying what is wrong. Default: every form is accepted.
    func validate(_ location: String) throws(StorageError)
    /// Finds out, within a few seconds, whether the data at `location` can be read and written
    /// now. Kinds without ``StorageCapabilities/probe`` answer ``StorageAvailability/available``.
    func probe(_ location: String) -> StorageAvailability
    /// Opens the engine for `location`.
    func open(_ location: String, options: StorageOpenOptions) throws(StorageError) -> any StorageEngine
}

extension StorageEngineKind {
    public func validate(_ location: String) throws(StorageError) {}
    public func probe(_ location: String) -> StorageAvailability { .available }
}

/// The kinds of engine a program can open by location: a registry. The kind that claims a
/// location opens it; the default kind (a local directory engine) opens every location no
/// other kind claims.
///
/// Buri's standard registry (`StorageEngines.standard`, from the `BuriEngines` module) has
/// LevelDB as its default; an app that links `BuriEtcd` registers the etcd kind once:
///
/// ```swift
/// var engines = StorageEngines.standard
/// engines.register(EtcdEngine.Kind())
/// let engine = try engines.open("etcd://127.0.0.1:2379/people")
/// let db = try BuriDatabase(location: "etcd://127.0.0.1:2379/people", engines: engines)
/// ```
public struct StorageEngines: Sendable {
    /// The kind for locations no other kind claims (plain paths).
    public private(set) var defaultKind: any StorageEngineKind
    /// The other kinds, asked in order.
    public private(set) var kinds: [any StorageEngineKind]

    /// A registry whose `defaultKind` opens every location the others do not claim.
    public init(default defaultKind: any StorageEngineKind, _ kinds: [any StorageEngineKind] = []) {
        self.defaultKind = defaultKind
        self.kinds = []
        for kind in kinds { register(kind) }
    }

    /// Adds `kind`, replacing a registered kind of the same name (the default kind too: to set
    /// its options, register it again).
    public mutating func register(_ kind: any StorageEngineKind) {
        if kind.name == defaultKind.name {
            defaultKind = kind
            return
        }
        kinds.removeAll { $0.name == kind.name }
        kinds.append(kind)
    }

    /// This registry with `kind` registered too (see ``register(_:)``).
    public func registering(_ kind: any StorageEngineKind) -> StorageEngines {
        var copy = self
        copy.register(kind)
        return copy
    }

    /// The kind that opens `location`: the first registered kind that claims it, else the default.
    public func kind(for location: String) -> any StorageEngineKind {
        kinds.first { $0.claims(location) } ?? defaultKind
    }

    /// Whether a registered kind other than the default claims `location`.
    public func isClaimed(_ location: String) -> Bool {
        kinds.contains { $0.claims(location) }
    }

    /// Opens the engine for `location` with the kind that claims it (after checking its form).
    public func open(
        _ location: String, options: StorageOpenOptions = StorageOpenOptions()
    ) throws(StorageError) -> any StorageEngine {
        let kind = kind(for: location)
        try kind.validate(location)
        return try kind.open(location, options: options)
    }
}
