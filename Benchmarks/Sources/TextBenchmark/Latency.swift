import Foundation

/// Wall-clock timings of one query asked many times.
struct Latency: Sendable {
    var seconds: [Double]

    /// The `p`-th percentile (nearest rank), in seconds.
    func percentile(_ p: Double) -> Double {
        guard !seconds.isEmpty else { return .nan }
        let sorted = seconds.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }

    var median: Double { percentile(50) }
    var p99: Double { percentile(99) }

    /// Runs `body` `times` times and records each run's duration; returns the last result.
    static func measure<R>(times: Int, _ body: () throws -> R) rethrows -> (Latency, R) {
        var seconds: [Double] = []
        seconds.reserveCapacity(times)
        var (first, last) = try time(body)
        seconds.append(first)
        for _ in 1..<max(1, times) {
            (first, last) = try time(body)
            seconds.append(first)
        }
        return (Latency(seconds: seconds), last)
    }
}

/// Seconds to run `body` once.
func time<R>(_ body: () throws -> R) rethrows -> (Double, R) {
    let start = DispatchTime.now().uptimeNanoseconds
    let result = try body()
    return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, result)
}

/// The bytes of every file under `path`.
func directorySize(_ path: String) -> Int {
    let manager = FileManager.default
    var isDirectory: ObjCBool = false
    guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
    guard isDirectory.boolValue else {
        return (try? manager.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }
    var total = 0
    for case let name as String in manager.enumerator(atPath: path) ?? FileManager.DirectoryEnumerator() {
        let full = path + "/" + name
        if let size = try? manager.attributesOfItem(atPath: full)[.size] as? Int { total += size }
    }
    return total
}
