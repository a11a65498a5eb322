// swift-tools-version:6.1
import PackageDescription

// Layers, each depending only on those below it:
//   CLevelDB   – the LevelDB C API, as a system library (no logic)
//   LevelDB    – a typed, safe Swift skin over it, usable on its own
//   BuriCodec  – a fast CBOR (RFC 8949) Encoder/Decoder for Codable values
//   BuriStorage – the storage interface only: engines, readers, key ranges, and the registry
//                that opens a location (StorageEngines); no engine and no LevelDB in it
//   BuriEngines – the local engines: LevelDB (the default, in a directory) and in-memory
//   BuriEtcd   – the replicated engine on an etcd cluster (its own product; no LevelDB)
//   BuriText   – the full-text tokenizer (versioned) and the FTS5-style query language; stdlib only
//   Buri       – the on-disk format, buckets, indexes and queries (re-exports BuriEngines)
//   BuriTransfer – export, import and restore of a database as JSON Lines (the `buri export`
//                format), for apps as for the tool: on Buri and BuriCodec only
//   BuriEncryption – encryption at rest (Buri's `DatabaseEncryption`) with swift-crypto: its own
//                product, so that only apps that encrypt build swift-crypto
//   buri       – the command-line tool (with BuriEncryption, to open and create encrypted
//                databases); buri-demo – the runnable tour (no LevelDB import:
//                engine-specific files and operations come through BuriEngines)
// Scripts/check-layers fails if BuriStorage, BuriEtcd, BuriTransfer or the tool imports or depends
// on LevelDB.
// The throughput benchmark lives in its own package under Benchmarks/ so that
// library users never resolve its dependencies (GRDB).
let package = Package(
    name: "Buri",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Buri", targets: ["Buri"]),
        .library(name: "LevelDB", targets: ["LevelDB"]),
        .library(name: "BuriCodec", targets: ["BuriCodec"]),
        .library(name: "BuriText", targets: ["BuriText"]),
        .library(name: "BuriStorage", targets: ["BuriStorage"]),
        .library(name: "BuriEngines", targets: ["BuriEngines"]),
        // The etcd engine: a product of its own, so that only apps that link it depend on it.
        .library(name: "BuriEtcd", targets: ["BuriEtcd"]),
        .library(name: "BuriTransfer", targets: ["BuriTransfer"]),
        // Encryption at rest: a product of its own, so that only apps that encrypt build swift-crypto.
        .library(name: "BuriEncryption", targets: ["BuriEncryption"]),
        .executable(name: "buri", targets: ["BuriTool"]),
        .executable(name: "buri-demo", targets: ["BuriDemo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // Only the BuriEncryption product uses it (AES-GCM, HKDF, HMAC; scrypt from CryptoExtras).
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLevelDB",
            providers: [.apt(["libleveldb-dev", "libsnappy-dev"]), .brew(["leveldb"])]
        ),
        .target(name: "LevelDB", dependencies: ["CLevelDB"]),
        .target(name: "BuriCodec"),
        .target(name: "BuriStorage"),
        .target(name: "BuriEngines", dependencies: ["BuriStorage", "LevelDB"]),
        // The text index's tokenizer and query parser: no dependency, not even Foundation.
        .target(name: "BuriText"),
        .target(name: "Buri", dependencies: ["BuriStorage", "BuriEngines", "BuriCodec", "BuriText"]),
        // Buri's replicated engine on etcd 3.4, through its v3 JSON gateway with Foundation's
        // URLSession: no package dependency at all.
        .target(name: "BuriEtcd", dependencies: ["BuriStorage"]),
        // Export, import and restore (JSON Lines), the tool's commands' work as a library.
        .target(name: "BuriTransfer", dependencies: ["Buri", "BuriCodec"]),
        // The keys, header and cipher behind Buri's `DatabaseEncryption`, on swift-crypto. Scrypt
        // comes from CryptoExtras, not from `_CryptoExtras`, which only re-exports it: one target fewer.
        // Records are sealed, and tokens hashed, through the BoringSSL that swift-crypto builds
        // (`CCryptoBoringSSL`, its one-call AEAD and SHA-256 functions): swift-crypto's generic
        // calls cost several times the cipher's own work per record (docs/BENCHMARK.md,
        // "Encryption at rest").
        .target(
            name: "BuriEncryption",
            dependencies: [
                "Buri",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]),
        .executableTarget(
            name: "BuriTool",
            dependencies: [
                "Buri", "BuriEtcd", "BuriCodec", "BuriTransfer", "BuriEncryption",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "BuriDemo", dependencies: ["Buri", "BuriEtcd"]),
        // A child process for the reliability tests: writes in a loop and is killed mid-write.
        .executableTarget(name: "BuriStress", dependencies: ["Buri", "BuriEtcd"]),
        // Test helpers with no dependency (a seeded generator, temporary directories), so that the
        // tests of the lower layers can share them without linking Buri.
        .target(name: "BuriTestBasics", path: "Tests/BuriTestBasics"),
        // Test fixtures shared by the suites: one database on each engine; re-exports BuriTestBasics.
        .target(
            name: "BuriTestSupport", dependencies: ["Buri", "BuriStorage", "BuriEtcd", "BuriTestBasics"],
            path: "Tests/BuriTestSupport"),
        .testTarget(name: "LevelDBTests", dependencies: ["LevelDB", "BuriTestBasics"]),
        .testTarget(name: "BuriCodecTests", dependencies: ["BuriCodec", "BuriTestBasics"]),
        .testTarget(name: "BuriTextTests", dependencies: ["BuriText", "BuriTestBasics"]),
        .testTarget(
            name: "BuriStorageTests", dependencies: ["BuriStorage", "BuriEngines", "BuriEtcd", "BuriTestSupport"]),
        .testTarget(
            name: "BuriTests", dependencies: ["Buri", "BuriStorage", "BuriTestSupport"],
            // Databases written by earlier schemas, opened by the migration tests (never rewritten).
            exclude: ["Fixtures"]),
        .testTarget(name: "BuriTransferTests", dependencies: ["BuriTransfer", "Buri", "BuriTestSupport"]),
        .testTarget(
            name: "BuriEncryptionTests",
            dependencies: [
                "BuriEncryption", "Buri", "BuriStorage", "BuriEtcd", "BuriTestBasics", "BuriTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // The Python script that computed the known-answer vectors independently (not built).
            exclude: ["Vectors"]),
        .testTarget(
            name: "BuriToolTests",
            dependencies: ["Buri", "BuriStorage", "BuriCodec", "LevelDB", "BuriTestSupport", "BuriEncryption"]),
        .testTarget(
            name: "BuriReliabilityTests",
            dependencies: ["Buri", "BuriStorage", "BuriTestSupport", "LevelDB", "BuriCodec", "BuriEncryption"]),
    ],
    swiftLanguageModes: [.v6]
)

// The documentation build (Scripts/docs) adds swift-docc-plugin only when BURI_DOCS=1 is set, so
// library users and the ordinary build never resolve it. The plugin can only document the root
// package's own targets, which is why it is not a separate package under Documentation/.
if Context.environment["BURI_DOCS"] == "1" {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"))
}
