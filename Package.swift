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
//   Buri       – the on-disk format, buckets, indexes and queries (re-exports BuriEngines)
//   buri       – the command-line tool; buri-demo – the runnable tour (no LevelDB import:
//                engine-specific files and operations come through BuriEngines)
// Scripts/check-layers fails if BuriStorage, BuriEtcd or the tool imports or depends on LevelDB.
// The throughput benchmark lives in its own package under Benchmarks/ so that
// library users never resolve its dependencies (GRDB).
let package = Package(
    name: "Buri",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Buri", targets: ["Buri"]),
        .library(name: "LevelDB", targets: ["LevelDB"]),
        .library(name: "BuriCodec", targets: ["BuriCodec"]),
        .library(name: "BuriStorage", targets: ["BuriStorage"]),
        .library(name: "BuriEngines", targets: ["BuriEngines"]),
        // The etcd engine: a product of its own, so that only apps that link it depend on it.
        .library(name: "BuriEtcd", targets: ["BuriEtcd"]),
        .executable(name: "buri", targets: ["BuriTool"]),
        .executable(name: "buri-demo", targets: ["BuriDemo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
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
        .target(name: "Buri", dependencies: ["BuriStorage", "BuriEngines", "BuriCodec"]),
        // Buri's replicated engine on etcd 3.4, through its v3 JSON gateway with Foundation's
        // URLSession: no package dependency at all.
        .target(name: "BuriEtcd", dependencies: ["BuriStorage"]),
        .executableTarget(
            name: "BuriTool",
            dependencies: ["Buri", "BuriEtcd", "BuriCodec", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(name: "BuriDemo", dependencies: ["Buri", "BuriEtcd"]),
        // A child process for the reliability tests: writes in a loop and is killed mid-write.
        .executableTarget(name: "BuriStress", dependencies: ["Buri", "BuriEtcd"]),
        // Test fixtures shared by the suites: one database on each engine.
        .target(name: "BuriTestSupport", dependencies: ["Buri", "BuriStorage", "BuriEtcd"], path: "Tests/BuriTestSupport"),
        .testTarget(name: "LevelDBTests", dependencies: ["LevelDB"]),
        .testTarget(name: "BuriCodecTests", dependencies: ["BuriCodec"]),
        .testTarget(name: "BuriStorageTests", dependencies: ["BuriStorage", "BuriEngines", "BuriEtcd", "BuriTestSupport"]),
        .testTarget(name: "BuriTests", dependencies: ["Buri", "BuriStorage", "BuriTestSupport"]),
        .testTarget(name: "BuriToolTests", dependencies: ["Buri", "BuriStorage", "BuriCodec", "LevelDB", "BuriTestSupport"]),
        .testTarget(name: "BuriReliabilityTests", dependencies: ["Buri", "BuriStorage", "BuriTestSupport", "LevelDB", "BuriCodec"]),
    ],
    swiftLanguageModes: [.v6]
)
