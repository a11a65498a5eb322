// buri-bench: the original Buri throughput table, measured side by side with the raw LevelDB
// floor and GRDB (SQLite), in one run. See docs/BENCHMARK.md for the method.
//
//   Scripts/benchmark [--count N] [--repetitions R] [--json] [--no-memory]
//
// Each repetition opens fresh databases for all three systems in a temporary directory and runs
// every row for each system in turn (the systems' order rotates between repetitions, so machine
// noise and background compaction hit them alike). The table shows medians.

import Buri
import Foundation
import GRDB
import LevelDB

struct Options {
    var count = 100_000
    var repetitions: Int?
    var json = false
    var memory = true
    var rows: Set<Row> = Set(Row.allCases)
    var systems: [String] = [BuriSystem.name, BuriSystem.memoryName, FloorSystem.name, GRDBSystem.name]

    init(arguments: [String]) throws {
        var iterator = arguments.dropFirst().makeIterator()
        func value(_ flag: String) throws -> String {
            guard let value = iterator.next() else { throw BenchmarkFailure("\(flag) needs a value") }
            return value
        }
        while let argument = iterator.next() {
            switch argument {
            case "--count":
                guard let n = Int(try value(argument)), n >= 20 else { throw BenchmarkFailure("--count needs a number ≥ 20") }
                count = n
            case "--repetitions":
                guard let r = Int(try value(argument)), r >= 1 else { throw BenchmarkFailure("--repetitions needs a number ≥ 1") }
                repetitions = r
            case "--json": json = true
            case "--no-memory": memory = false
            case "--rows":
                let wanted = try value(argument).split(separator: ",").map(String.init)
                rows = Set(Row.allCases.filter { wanted.contains($0.id) })
            case "--systems":
                let wanted = try value(argument).lowercased().split(separator: ",").map(String.init)
                systems = systems.filter { name in wanted.contains { name.lowercased().hasPrefix($0) } }
                if systems.isEmpty { throw BenchmarkFailure("--systems: none of buri, \"buri in memory\", leveldb, grdb") }
            case "--help", "-h":
                print(Options.usage)
                exit(0)
            default:
                throw BenchmarkFailure("unknown argument \(argument)\n\(Options.usage)")
            }
        }
    }

    static let usage = """
        usage: buri-bench [--count N] [--repetitions R] [--json] [--no-memory] [--rows id,id,…] [--systems buri,leveldb,grdb]
          --count N        objects per fill (default 100000)
          --repetitions R  repetitions, median reported (default 5; 3 above 200000 objects; 1 above 1000000)
          --json           one JSON record per row and system instead of the Markdown table
          --no-memory      skip the peak-memory comparison
          --rows           only these rows (ids as in the JSON output); the complex fill always runs
          --systems        only these systems, by name prefix (for profiling one; the table needs Buri, LevelDB and GRDB)
        """

    var effectiveRepetitions: Int { repetitions ?? (count > 1_000_000 ? 1 : count > 200_000 ? 3 : 5) }
}

func log(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

func medianSeconds(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

func seconds(_ body: () throws -> Int) rethrows -> (seconds: Double, result: Int) {
    let clock = ContinuousClock()
    let start = clock.now
    let result = try body()
    let elapsed = clock.now - start
    let (s, attoseconds) = elapsed.components
    return (Double(s) + Double(attoseconds) * 1e-18, result)
}

func formatRate(_ rate: Double) -> String {
    let whole = Int(rate.rounded())
    var digits = String(whole)
    var grouped = ""
    while digits.count > 3 {
        grouped = "," + digits.suffix(3) + grouped
        digits.removeLast(3)
    }
    return digits + grouped
}

func formatBytes(_ bytes: Int) -> String {
    bytes < 1 << 20 ? "\(bytes / 1024) KiB" : String(format: "%.1f MiB", Double(bytes) / 1_048_576)
}

func jsonString(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        default:
            if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
        }
    }
    return out + "\""
}

func sqliteVersion() -> String {
    (try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") } ?? nil) ?? "?"
}

func runBenchmark(_ options: Options) throws {
    let n = options.count
    let repetitions = options.effectiveRepetitions
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-bench-\(getpid())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }

    log("buri-bench: preparing \(n) objects…")
    let workload = Workload(n: n)
    let layout = try FloorLayout.learn(in: directory)
    let floorBytes = FloorSystem.Bytes(workload: workload, layout: layout)
    let systems = options.systems
    // Fills always run: the reads need data and the refill and delete need objects.
    let rows = Row.allCases.filter { options.rows.contains($0) || $0 == .complexFill }
    let expected = Dictionary(uniqueKeysWithValues: Row.allCases.map { ($0, workload.objects(for: $0)) })

    var times: [Row: [String: [Double]]] = [:]
    for repetition in 0..<repetitions {
        log("buri-bench: repetition \(repetition + 1) of \(repetitions)")
        let base = directory + "/run\(repetition)"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        var open: [String: any System] = [:]
        for name in systems {
            switch name {
            case BuriSystem.name: open[name] = try BuriSystem(path: base + "/buri", workload: workload)
            case BuriSystem.memoryName: open[name] = try BuriSystem(database: BuriDatabase.inMemory(), workload: workload)
            case FloorSystem.name: open[name] = try FloorSystem(path: base + "/floor", workload: workload, layout: layout, bytes: floorBytes)
            default: open[name] = try GRDBSystem(path: base + "/grdb.sqlite", workload: workload)
            }
        }
        defer { open.values.forEach { $0.close() } }
        let order = (0..<systems.count).map { systems[($0 + repetition) % systems.count] }
        for row in rows {
            for name in order {
                guard let system = open[name] else { continue }
                try system.prepare(row)
                let (elapsed, handled) = try seconds { try system.run(row) }
                system.finish(row)
                guard handled == expected[row] else {
                    throw BenchmarkFailure("\(name), \(row.title): handled \(handled) objects, expected \(expected[row] ?? -1)")
                }
                times[row, default: [:]][name, default: []].append(elapsed)
            }
        }
    }

    var memory: [MemoryProbe.Result] = []
    if options.memory {
        log("buri-bench: measuring peak memory of all-objects retrieval…")
        memory = try MemoryProbe.measure(workload: workload, directory: directory, repetitions: 3)
    }

    let shownRows = rows.filter { options.rows.contains($0) }
    func rate(_ row: Row, _ system: String) -> (seconds: Double, rate: Double) {
        let median = medianSeconds(times[row]?[system] ?? [.infinity])
        return (median, Double(expected[row] ?? 0) / median)
    }

    let hasTable = [BuriSystem.name, FloorSystem.name, GRDBSystem.name].allSatisfy(systems.contains)
    if options.json || !hasTable {
        for row in shownRows {
            for system in systems {
                let (median, ops) = rate(row, system)
                print("{\"row\":\(jsonString(row.id)),\"title\":\(jsonString(row.title)),\"system\":\(jsonString(system)),\"n\":\(n),\"objects\":\(expected[row] ?? 0),\"repetitions\":\(repetitions),\"median_seconds\":\(median),\"ops_per_s\":\(ops.rounded())}")
            }
        }
        for result in memory {
            print("{\"row\":\"all_objects_peak_memory\",\"system\":\(jsonString(result.mode.rawValue)),\"n\":\(n),\"objects\":\(result.objects),\"peak_growth_bytes\":\(result.peakGrowthBytes),\"peak_reset\":\(result.peakResetWorked)}")
        }
        return
    }

    print("## Buri throughput: \(formatRate(Double(n))) objects, median of \(repetitions) repetitions")
    print("")
    print("LevelDB \(Database.libraryVersion), SQLite \(sqliteVersion()) (GRDB 7.10.0), \(ProcessInfo.processInfo.activeProcessorCount) cores. Objects per second; higher is better. floor/GRDB is the ceiling of Buri/GRDB for any store that does at least the floor's LevelDB work.")
    print("")
    let withMemory = systems.contains(BuriSystem.memoryName)
    print("| Row | Objects | Buri | LevelDB floor | GRDB | Buri/floor | Buri/GRDB | floor/GRDB | Targets (≥ ½ floor, ≥ 2× GRDB) |" + (withMemory ? " Buri in memory | memory/Buri |" : ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|" + (withMemory ? "---:|---:|" : ""))
    for row in shownRows {
        let buri = rate(row, BuriSystem.name).rate
        let floor = rate(row, FloorSystem.name).rate
        let grdb = rate(row, GRDBSystem.name).rate
        let toFloor = buri / floor
        let toGRDB = buri / grdb
        var verdict: [String] = []
        if row.hasFloorTarget { verdict.append(toFloor >= 0.5 ? "floor ✓" : "floor ✗") }
        verdict.append(toGRDB >= 2 ? "GRDB ✓" : "GRDB ✗")
        var line = "| \(row.title) | \(formatRate(Double(expected[row] ?? 0))) | \(formatRate(buri)) | \(formatRate(floor)) | \(formatRate(grdb)) | \(String(format: "%.2f", toFloor)) | \(String(format: "%.2f", toGRDB)) | \(String(format: "%.2f", floor / grdb)) | \(verdict.joined(separator: ", ")) |"
        if withMemory {
            let memory = rate(row, BuriSystem.memoryName).rate
            line += " \(formatRate(memory)) | \(String(format: "%.2f", memory / buri)) |"
        }
        print(line)
    }
    if !memory.isEmpty {
        print("")
        print("### Peak memory of retrieving all \(formatRate(Double(n))) objects")
        print("")
        print("Growth of the resident high-water mark (VmHWM) during the retrieval, in a fresh process each time, median of 3.")
        print("")
        print("| API | Objects | Peak growth |")
        print("|---|---:|---:|")
        for result in memory {
            print("| \(result.mode.label) | \(formatRate(Double(result.objects))) | \(formatBytes(result.peakGrowthBytes)) |")
        }
        if memory.contains(where: { !$0.peakResetWorked }) {
            print("")
            print("(The kernel refused to reset VmHWM; growth is measured from the process's earlier peak.)")
        }
    }
}

do {
    let arguments = CommandLine.arguments
    if arguments.count == 4, arguments[1] == "--memory-probe" {
        try MemoryProbe.runChild(mode: arguments[2], path: arguments[3])
    } else {
        try runBenchmark(try Options(arguments: arguments))
    }
} catch {
    log("buri-bench: \(error)")
    exit(1)
}
