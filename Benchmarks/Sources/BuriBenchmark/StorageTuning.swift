import Buri
import Foundation

/// The options every LevelDB-backed system of a run opens with: Buri's defaults, changed by
/// `BURI_BENCH_LEVELDB` (comma-separated `name=size`, sizes may end in K or M), so engine options
/// can be weighed by measurement with one build, Buri and the floor always on the same options.
///
///     BURI_BENCH_LEVELDB=write_buffer=32M,block_size=16K,max_file_size=8M buri-bench --count 100000
///
/// Names: `write_buffer`, `block_size`, `max_file_size`, `cache`, `bloom` (bits per key, 0 = none),
/// `compression` (0 or 1), `restart_interval` (keys between a data block's restart points). An unknown name or bad size stops the run.
enum StorageTuning {
    static let levelDB: LevelDBOptions = {
        var options = LevelDBOptions.buriDefaults
        guard let spec = ProcessInfo.processInfo.environment["BURI_BENCH_LEVELDB"], !spec.isEmpty else {
            return options
        }
        for item in spec.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let size = parseSize(parts[1]) else {
                log("BURI_BENCH_LEVELDB: cannot read \(item) (expected name=size, e.g. block_size=16K)")
                exit(2)
            }
            switch parts[0] {
            case "write_buffer": options.writeBufferSize = size
            case "block_size": options.blockSize = size
            case "max_file_size": options.maxFileSize = size
            case "cache": options.blockCacheSize = size
            case "bloom": options.bloomFilterBitsPerKey = size == 0 ? nil : size
            case "compression": options.compression = size != 0
            case "restart_interval": options.blockRestartInterval = size
            default:
                log(
                    "BURI_BENCH_LEVELDB: unknown option \(parts[0]) (write_buffer, block_size, max_file_size, cache, bloom, compression, restart_interval)"
                )
                exit(2)
            }
        }
        return options
    }()

    /// What the run changed from Buri's defaults, for the report ("" when nothing).
    static var description: String { ProcessInfo.processInfo.environment["BURI_BENCH_LEVELDB"] ?? "" }

    private static func parseSize(_ text: String) -> Int? {
        let scale: Int
        var digits = Substring(text)
        switch text.last {
        case "K", "k": scale = 1 << 10; digits = digits.dropLast()
        case "M", "m": scale = 1 << 20; digits = digits.dropLast()
        default: scale = 1
        }
        guard let value = Int(digits), value >= 0 else { return nil }
        return value * scale
    }
}
