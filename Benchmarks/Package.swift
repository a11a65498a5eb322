// swift-tools-version:6.1
import PackageDescription

// Benchmarks, in their own package so that users of the Buri library never resolve their
// dependencies (GRDB for the side-by-side throughput comparison).
//
//   buri-codec-bench  CBOREncoder/CBORDecoder against Foundation's JSON coders
//   buri-bench        Buri against raw LevelDB and GRDB (Scripts/benchmark)
//   buri-etcd-bench   Buri on etcd against raw etcd requests through the same client (Scripts/benchmark --etcd)
//
// Build in release: swift build -c release --package-path Benchmarks --scratch-path Benchmarks/.build-bench
let package = Package(
    name: "BuriBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "buri-codec-bench", targets: ["CodecBenchmark"]),
        .executable(name: "buri-bench", targets: ["BuriBenchmark"]),
        .executable(name: "buri-etcd-bench", targets: ["EtcdBenchmark"]),
        .executable(name: "buri-text-bench", targets: ["TextBenchmark"]),
    ],
    dependencies: [
        .package(name: "Buri", path: ".."),
        // GRDB on Linux links the system SQLite (libsqlite3-dev; Scripts/benchmark installs it).
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "CodecBenchmark",
            dependencies: [.product(name: "BuriCodec", package: "Buri")]
        ),
        .executableTarget(
            name: "BuriBenchmark",
            dependencies: [
                .product(name: "Buri", package: "Buri"),
                .product(name: "BuriEncryption", package: "Buri"),
                .product(name: "LevelDB", package: "Buri"),
                .product(name: "BuriCodec", package: "Buri"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Full-text search against SQLite FTS5 on Debian's package descriptions (issue 26).
        .executableTarget(
            name: "TextBenchmark",
            dependencies: [.product(name: "Buri", package: "Buri"), .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .executableTarget(
            name: "EtcdBenchmark",
            dependencies: [.product(name: "Buri", package: "Buri"), .product(name: "BuriEtcd", package: "Buri")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
