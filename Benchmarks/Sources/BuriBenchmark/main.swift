// buri-bench: the original Buri throughput table, measured side by side with the raw LevelDB
// floor and GRDB (SQLite: its Codable record API, and at its best), in one run. See
// docs/BENCHMARK.md for the method.
//
//   Scripts/benchmark [--count N | --scale N,M] [--repetitions R] [--json] [--no-memory]
//
// Each repetition opens fresh databases for all systems in a temporary directory and runs every
// row for each system in turn (the systems' order rotates between repetitions, so machine noise
// and background compaction hit them alike). The table shows medians. With --scale the whole
// run happens at each count, and a last table shows the cost per object at each and its growth.

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
    /// `--scale`: the counts to run, smallest first (nil: just `count`).
    var scale: [Int]?
    /// The playlist rows' own sizes (not `count`): 100,000 songs, 1,000 playlists of 100.
    var playlistSizes = PlaylistSizes()
    var systems: [String] = [
        BuriSystem.name, BuriBestSystem.name, BuriSystem.memoryName, BuriSystem.encryptedName, FloorSystem.name,
        GRDBSystem.name, GRDBBestSystem.name,
    ]

    init(arguments: [String]) throws {
        var iterator = arguments.dropFirst().makeIterator()
        func value(_ flag: String) throws -> String {
            guard let value = iterator.next() else { throw BenchmarkFailure("\(flag) needs a value") }
            return value
        }
        while let argument = iterator.next() {
            switch argument {
            case "--count":
                guard let n = Int(try value(argument)), n >= 20 else {
                    throw BenchmarkFailure("--count needs a number ≥ 20")
                }
                count = n
            case "--scale":
                let counts = try value(argument).split(separator: ",").map {
                    Int($0.replacingOccurrences(of: "_", with: ""))
                }
                guard counts.count >= 2, counts.allSatisfy({ ($0 ?? 0) >= 20 }) else {
                    throw BenchmarkFailure(
                        "--scale needs two or more counts ≥ 20, comma-separated (e.g. 100000,1000000)")
                }
                scale = counts.compactMap { $0 }.sorted()
            case "--repetitions":
                guard let r = Int(try value(argument)), r >= 1 else {
                    throw BenchmarkFailure("--repetitions needs a number ≥ 1")
                }
                repetitions = r
            case "--json": json = true
            case "--no-memory": memory = false
            case "--rows":
                // Row ids, or a section: "queries" (the four query rows), "playlist" (the three
                // playlist rows).
                let wanted = try value(argument).split(separator: ",").map(String.init)
                rows = Set(
                    Row.allCases.filter {
                        wanted.contains($0.id) || ($0.isQuery && wanted.contains("queries"))
                            || ($0.isPlaylist && wanted.contains("playlist"))
                    })
            case "--playlist-songs":
                guard let n = Int(try value(argument)), n >= 10_000 else {
                    throw BenchmarkFailure("--playlist-songs needs a number ≥ 10000 (100 playlists)")
                }
                playlistSizes.songs = n
            case "--systems":
                // Names compare by their lowercased letters and digits. A full name selects that
                // system alone ("buri", "buri-best", "grdb", "grdb-best", "buri-in-memory"); a shorter prefix
                // every system it starts ("level", "gr", "bur").
                func simple(_ s: some StringProtocol) -> String {
                    String(s.lowercased().filter { $0.isLetter || $0.isNumber })
                }
                let wanted = try value(argument).split(separator: ",").map(simple)
                let names = Set(systems.map(simple))
                systems = systems.filter { name in
                    wanted.contains { names.contains($0) ? simple(name) == $0 : simple(name).hasPrefix($0) }
                }
                if systems.isEmpty {
                    throw BenchmarkFailure(
                        "--systems: none of buri, buri-best, buri-in-memory, buri-encrypted, leveldb, grdb, grdb-best")
                }
            case "--help", "-h":
                print(Options.usage)
                exit(0)
            default:
                throw BenchmarkFailure("unknown argument \(argument)\n\(Options.usage)")
            }
        }
    }

    static let usage = """
        usage: buri-bench [--count N | --scale N,M,…] [--repetitions R] [--json] [--no-memory] [--rows id,id,…] [--systems buri,leveldb,grdb,…]
          --count N        objects per fill (default 100000)
          --scale N,M,…    the whole run at each count (e.g. 100000,1000000), then the cost per object
                           (ns/object) of every row and system at each count and its growth (last/first)
          --repetitions R  repetitions, median reported (default 5; 3 above 200000 objects; 1 from 1000000)
          --json           one JSON record per row and system instead of the Markdown tables
          --no-memory      skip the peak-memory measurements (all-objects retrieval and fills)
          --rows           only these rows (ids as in the JSON output, or a section: queries, playlist);
                           the complex fill always runs
          --playlist-songs N  songs of the playlist rows (default 100000; N/100 playlists of 100 songs),
                           whatever --count says
          --systems        only these systems: buri, buri-best, buri-in-memory, leveldb, grdb, grdb-best (a full name is
                           that system alone, a shorter prefix every system it starts; the table needs
                           Buri, LevelDB and GRDB)
        environment:
          BURI_BENCH_LEVELDB  LevelDB options for Buri and the floor instead of Buri's defaults, e.g.
                              write_buffer=32M,block_size=16K,max_file_size=8M,cache=64M,bloom=10,compression=1
          BURI_BENCH_OBSERVERS  live queries held during the observed refill (default 1000)
        """

    func repetitions(for count: Int) -> Int { repetitions ?? (count >= 1_000_000 ? 1 : count > 200_000 ? 3 : 5) }
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
            if scalar.value < 0x20 {
                out += String(format: "\\u%04x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

func sqliteVersion() -> String {
    (try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") } ?? nil) ?? "?"
}

/// The resident size of this process, in bytes (0 where /proc is missing).
func residentBytes() -> Int { MemoryProbe.status("VmRSS") ?? 0 }

/// One whole run at one count: every row's times per system, and the memory measurements.
struct Measurement {
    var n: Int
    var repetitions: Int
    var times: [Row: [String: [Double]]] = [:]
    var expected: [Row: Int] = [:]
    var retrievalMemory: [MemoryProbe.Result] = []
    var fillMemory: [FillProbe.Result] = []
    /// How much the prebuilt inputs (objects, keys, the floor's bytes) added to the resident size.
    var inputBytes = 0
    /// The playlist rows' sizes, when they ran.
    var playlistSizes: PlaylistSizes?

    func median(_ row: Row, _ system: String) -> Double { medianSeconds(times[row]?[system] ?? [.infinity]) }
    /// Whether `system` ran `row` (the floor runs no playlist row).
    func ran(_ row: Row, _ system: String) -> Bool { times[row]?[system] != nil }
    func rate(_ row: Row, _ system: String) -> Double { Double(expected[row] ?? 0) / median(row, system) }
    func nanosecondsPerObject(_ row: Row, _ system: String) -> Double {
        median(row, system) * 1e9 / Double(max(expected[row] ?? 0, 1))
    }
    /// The median, over repetitions, of `system`'s time over `base`'s in the same repetition (the
    /// two ran one right after the other), minus 1: a cost that load lasting longer than one row
    /// affects less than the ratio of the two medians does. `nil` unless both ran every repetition.
    func pairedCost(_ row: Row, _ system: String, against base: String) -> Double? {
        guard let own = times[row]?[system], let baseTimes = times[row]?[base], own.count == baseTimes.count,
            !own.isEmpty
        else { return nil }
        return medianSeconds(zip(own, baseTimes).map { $0 / $1 }) - 1
    }
}

func measure(count n: Int, options: Options, directory: String) throws -> Measurement {
    let repetitions = options.repetitions(for: n)
    var result = Measurement(n: n, repetitions: repetitions)
    log("buri-bench: preparing \(n) objects…")
    let residentBefore = residentBytes()
    var workload = Workload(n: n)
    let layout = try FloorLayout.learn(in: directory)
    let floorBytes = FloorSystem.Bytes(workload: workload, layout: layout)
    result.inputBytes = max(0, residentBytes() - residentBefore)
    // The playlist rows' inputs: their own sizes, not counted in the inputs per object above.
    if options.rows.contains(where: \.isPlaylist) {
        workload.playlists = PlaylistData(sizes: options.playlistSizes)
    }
    // The floor's residents: stored once by Buri (untimed) and copied from there by the floor.
    let residentLayout =
        options.systems.contains(FloorSystem.name) && options.rows.contains(where: \.isQuery)
        ? try ResidentLayout.learn(workload: workload, in: directory) : nil
    defer { if let residentLayout { try? FileManager.default.removeItem(atPath: residentLayout.sourcePath) } }
    log("buri-bench: inputs take \(formatBytes(result.inputBytes)) (\(result.inputBytes / n) bytes per object)")
    let systems = options.systems
    // Fills always run: the reads need data and the refill and delete need objects.
    let rows = Row.allCases.filter { options.rows.contains($0) || $0 == .complexFill }
    result.expected = Dictionary(uniqueKeysWithValues: Row.allCases.map { ($0, workload.objects(for: $0)) })
    result.playlistSizes = workload.playlists?.sizes

    for repetition in 0..<repetitions {
        log("buri-bench: \(n) objects, repetition \(repetition + 1) of \(repetitions)")
        let base = directory + "/run\(repetition)"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        var open: [String: any System] = [:]
        for name in systems {
            switch name {
            case BuriSystem.name: open[name] = try BuriSystem(path: base + "/buri", workload: workload)
            case BuriSystem.memoryName:
                open[name] = try BuriSystem(database: BuriDatabase.inMemory(), workload: workload)
            case BuriSystem.encryptedName:
                open[name] = try BuriSystem(encryptedAt: base + "/buri-encrypted", workload: workload)
            case BuriBestSystem.name: open[name] = try BuriBestSystem(path: base + "/buri-best", workload: workload)
            case FloorSystem.name:
                open[name] = try FloorSystem(
                    path: base + "/floor", workload: workload, layout: layout, bytes: floorBytes,
                    residents: residentLayout)
            case GRDBBestSystem.name:
                open[name] = try GRDBBestSystem(path: base + "/grdb-best.sqlite", workload: workload)
            default: open[name] = try GRDBSystem(path: base + "/grdb.sqlite", workload: workload)
            }
        }
        defer { open.values.forEach { $0.close() } }
        let order = (0..<systems.count).map { systems[($0 + repetition) % systems.count] }
        for row in rows {
            for name in order {
                guard let system = open[name], system.supports(row) else { continue }
                try system.prepare(row)
                let (elapsed, handled) = try seconds { try system.run(row) }
                system.finish(row)
                guard handled == result.expected[row] else {
                    throw BenchmarkFailure(
                        "\(name), \(row.title): handled \(handled) objects, expected \(result.expected[row] ?? -1)")
                }
                if row.isQuery { try workload.expected.check(system.answer(row), row: row, system: name) }
                if row.isPlaylist, let data = workload.playlists {
                    try data.check(system.playlistAnswer(row), row: row, system: name)
                }
                result.times[row, default: [:]][name, default: []].append(elapsed)
            }
        }
    }

    if options.memory {
        log("buri-bench: measuring peak memory of the fills (\(n) objects)…")
        result.fillMemory = try FillProbe.measure(
            systems: systems, workload: workload, layout: layout, directory: directory,
            repetitions: n > 200_000 ? 1 : 3)
        if systems.contains(BuriSystem.name) && systems.contains(GRDBSystem.name) {
            log("buri-bench: measuring peak memory of all-objects retrieval (\(n) objects)…")
            result.retrievalMemory = try MemoryProbe.measure(
                workload: workload, directory: directory, repetitions: n > 200_000 ? 1 : 3)
        }
    }
    return result
}

func runBenchmark(_ options: Options) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-bench-\(getpid())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let counts = options.scale ?? [options.count]
    var measurements: [Measurement] = []
    for n in counts {
        let clock = ContinuousClock()
        let start = clock.now
        measurements.append(try measure(count: n, options: options, directory: directory))
        log("buri-bench: \(n) objects took \(clock.now - start)")
    }
    let shownRows = Row.allCases.filter { options.rows.contains($0) }
    let systems = options.systems
    let hasTable = [BuriSystem.name, FloorSystem.name, GRDBSystem.name].allSatisfy(systems.contains)
    if options.json || !hasTable {
        for m in measurements { printJSON(m, rows: shownRows, systems: systems) }
        if measurements.count > 1 { printScaleJSON(measurements, rows: shownRows, systems: systems) }
        return
    }
    for m in measurements { printTables(m, rows: shownRows, systems: systems) }
    if measurements.count > 1 { printScaleTable(measurements, rows: shownRows, systems: systems) }
}

func printJSON(_ m: Measurement, rows: [Row], systems: [String]) {
    for row in rows {
        for system in systems where m.ran(row, system) {
            // Beside Buri in the same run, the encrypted system's paired cost (`Measurement.pairedCost`).
            let paired =
                system == BuriSystem.encryptedName
                ? m.pairedCost(row, system, against: BuriSystem.name).map {
                    ",\"paired_cost_vs_buri\":\(String(format: "%.4f", $0))"
                } ?? "" : ""
            print(
                "{\"row\":\(jsonString(row.id)),\"title\":\(jsonString(row.title)),\"system\":\(jsonString(system)),\"n\":\(m.n),\"objects\":\(m.expected[row] ?? 0),\"repetitions\":\(m.repetitions),\"median_seconds\":\(m.median(row, system)),\"ops_per_s\":\(m.rate(row, system).rounded()),\"ns_per_object\":\(m.nanosecondsPerObject(row, system).rounded())\(paired)}"
            )
        }
    }
    print("{\"row\":\"inputs_resident\",\"n\":\(m.n),\"bytes\":\(m.inputBytes)}")
    for result in m.fillMemory {
        print(
            "{\"row\":\(jsonString(result.row.id + "_peak_memory")),\"system\":\(jsonString(result.system)),\"n\":\(m.n),\"objects\":\(result.objects),\"peak_growth_bytes\":\(result.peakGrowthBytes),\"bytes_per_object\":\(result.bytesPerObject.rounded()),\"data_bytes\":\(result.dataBytes),\"multiple_of_data\":\(String(format: "%.2f", result.multipleOfData)),\"peak_reset\":\(result.peakResetWorked)}"
        )
    }
    for result in m.retrievalMemory {
        print(
            "{\"row\":\"all_objects_peak_memory\",\"system\":\(jsonString(result.mode.rawValue)),\"n\":\(m.n),\"objects\":\(result.objects),\"peak_growth_bytes\":\(result.peakGrowthBytes),\"peak_reset\":\(result.peakResetWorked)}"
        )
    }
}

func printScaleJSON(_ ms: [Measurement], rows: [Row], systems: [String]) {
    guard let first = ms.first, let last = ms.last else { return }
    for row in rows {
        for system in systems where first.ran(row, system) {
            let points = ms.map {
                "{\"n\":\($0.n),\"ns_per_object\":\($0.nanosecondsPerObject(row, system).rounded())}"
            }
            let growth = last.nanosecondsPerObject(row, system) / first.nanosecondsPerObject(row, system)
            print(
                "{\"row\":\(jsonString(row.id)),\"system\":\(jsonString(system)),\"scale\":[\(points.joined(separator: ","))],\"growth\":\(String(format: "%.3f", growth))}"
            )
        }
    }
}

func ratio(_ value: Double) -> String { String(format: "%.2f", value) }

func printTables(_ m: Measurement, rows: [Row], systems: [String]) {
    let n = m.n
    print(
        "## Buri throughput: \(formatRate(Double(n))) objects, median of \(m.repetitions) repetition\(m.repetitions == 1 ? "" : "s")"
    )
    print("")
    if !StorageTuning.description.isEmpty {
        print("LevelDB options changed from Buri's defaults: \(StorageTuning.description)\n")
    }
    print(
        "LevelDB \(Database.libraryVersion), SQLite \(sqliteVersion()) (GRDB 7.10.0), \(ProcessInfo.processInfo.activeProcessorCount) cores. Objects per second; higher is better. GRDB is its Codable record API, GRDB best its cached statements and row decoding by column index. Buri (best) is Buri through the same typed API with a hand-written `init(record:)` (BuriRecordDecodable) on the same stored bytes; Buri (best)/best compares it with GRDB best. floor/GRDB and floor/best are the ceilings of Buri/GRDB and Buri/best for any store that does at least the floor's LevelDB work."
    )
    print("")
    let withBest = systems.contains(GRDBBestSystem.name)
    let withMemory = systems.contains(BuriSystem.memoryName)
    let withBuriBest = systems.contains(BuriBestSystem.name)
    let bothBest = withBuriBest && withBest
    print(
        "| Row | Objects | Buri | LevelDB floor | GRDB |" + (withBest ? " GRDB best |" : "")
            + " Buri/floor | Buri/GRDB |" + (withBest ? " Buri/best |" : "") + " floor/GRDB |"
            + (withBest ? " floor/best |" : "")
            + " Targets (≥ ½ floor, ≥ 2× GRDB" + (withBest ? ", ≥ 1× best" : "") + ") |"
            + (withMemory ? " Buri in memory | memory/Buri |" : "")
            + (withBuriBest ? " Buri (best) | Buri (best)/Buri |" : "") + (bothBest ? " Buri (best)/best |" : ""))
    print(
        "|---|---:|---:|---:|---:|" + (withBest ? "---:|" : "") + "---:|---:|" + (withBest ? "---:|" : "") + "---:|"
            + (withBest ? "---:|" : "") + "---|" + (withMemory ? "---:|---:|" : "")
            + (withBuriBest ? "---:|---:|" : "") + (bothBest ? "---:|" : ""))
    for row in rows {
        let buri = m.rate(row, BuriSystem.name)
        let floor = m.rate(row, FloorSystem.name)
        let grdb = m.rate(row, GRDBSystem.name)
        let best = m.rate(row, GRDBBestSystem.name)
        // The floor runs no playlist row: its cells say so.
        let hasFloor = m.ran(row, FloorSystem.name)
        func floorCell(_ text: String) -> String { hasFloor ? text : "—" }
        var verdict: [String] = []
        if row.hasFloorTarget { verdict.append(buri / floor >= 0.5 ? "floor ✓" : "floor ✗") }
        verdict.append(buri / grdb >= 2 ? "GRDB ✓" : "GRDB ✗")
        if withBest { verdict.append(buri / best >= 1 ? "best ✓" : "best ✗") }
        var line =
            "| \(row.title) | \(formatRate(Double(m.expected[row] ?? 0))) | \(formatRate(buri)) | \(floorCell(formatRate(floor))) | \(formatRate(grdb)) |"
        if withBest { line += " \(formatRate(best)) |" }
        line += " \(floorCell(ratio(buri / floor))) | \(ratio(buri / grdb)) |"
        if withBest { line += " \(ratio(buri / best)) |" }
        line += " \(floorCell(ratio(floor / grdb))) |"
        if withBest { line += " \(floorCell(ratio(floor / best))) |" }
        line += " \(verdict.joined(separator: ", ")) |"
        if withMemory {
            let memory = m.rate(row, BuriSystem.memoryName)
            line += " \(formatRate(memory)) | \(ratio(memory / buri)) |"
        }
        if withBuriBest {
            let buriBest = m.rate(row, BuriBestSystem.name)
            line += " \(formatRate(buriBest)) | \(ratio(buriBest / buri)) |"
            if bothBest { line += " \(ratio(buriBest / best)) |" }
        }
        print(line)
    }
    print("")
    if systems.contains(BuriSystem.encryptedName) { printEncryptionTable(m, rows: rows) }
    if let sizes = m.playlistSizes, rows.contains(where: \.isPlaylist) {
        print(
            "Playlist rows (their own sizes, whatever the count): \(formatRate(Double(sizes.songs))) songs, \(formatRate(Double(sizes.playlists))) playlists of \(sizes.perPlaylist) (a song in several playlists; \(sizes.hotSongs) songs in exactly \(sizes.holdersOfHot) each); Objects: songs fetched, playlist ids found, songs deleted. The floor runs none of them."
        )
        print("")
    }
    print(
        "Prebuilt inputs (objects, shuffled keys, the floor's bytes): \(formatBytes(m.inputBytes)) resident, \(m.inputBytes / max(n, 1)) bytes per object."
    )
    if !m.fillMemory.isEmpty {
        print("")
        print("### Peak memory of the fills, \(formatRate(Double(n))) objects")
        print("")
        print(
            "Growth of the resident high-water mark (VmHWM) during one fill into an empty database, in a fresh process each time (inputs built before), median of \(n > 200_000 ? 1 : 3). Data: the record keys and values Buri writes (no index entries); × data is the growth as a multiple of it."
        )
        print("")
        print("| Fill | System | Peak growth | Bytes/object | Data | × data |")
        print("|---|---|---:|---:|---:|---:|")
        for result in m.fillMemory {
            print(
                "| \(result.row == .simpleFill ? "Simple" : "Complex") | \(result.system) | \(formatBytes(result.peakGrowthBytes)) | \(formatRate(result.bytesPerObject)) | \(formatBytes(result.dataBytes)) | \(ratio(result.multipleOfData)) |"
            )
        }
        if m.fillMemory.contains(where: { !$0.peakResetWorked }) {
            print("")
            print("(The kernel refused to reset VmHWM; growth is measured from the process's earlier peak.)")
        }
    }
    if !m.retrievalMemory.isEmpty {
        print("")
        print("### Peak memory of retrieving all \(formatRate(Double(n))) objects")
        print("")
        print(
            "Growth of the resident high-water mark (VmHWM) during the retrieval, in a fresh process each time, median of \(n > 200_000 ? 1 : 3)."
        )
        print("")
        print("| API | Objects | Peak growth |")
        print("|---|---:|---:|")
        for result in m.retrievalMemory {
            print(
                "| \(result.mode.label) | \(formatRate(Double(result.objects))) | \(formatBytes(result.peakGrowthBytes)) |"
            )
        }
        if m.retrievalMemory.contains(where: { !$0.peakResetWorked }) {
            print("")
            print("(The kernel refused to reset VmHWM; growth is measured from the process's earlier peak.)")
        }
    }
    print("")
}

func printScaleTable(_ ms: [Measurement], rows: [Row], systems: [String]) {
    guard let first = ms.first, let last = ms.last else { return }
    print("## Cost per object from \(formatRate(Double(first.n))) to \(formatRate(Double(last.n))) objects")
    print("")
    print(
        "Nanoseconds per object (median time / objects handled; lower is better) at each count, and growth = cost at \(formatRate(Double(last.n))) / cost at \(formatRate(Double(first.n))). Target: Buri's growth ≤ 1.3× on every row."
    )
    print("")
    print("| Row | System |" + ms.map { " ns/object at \(formatRate(Double($0.n))) |" }.joined() + " Growth |")
    print("|---|---|" + String(repeating: "---:|", count: ms.count) + "---:|")
    for row in rows {
        for system in systems where first.ran(row, system) {
            let growth = last.nanosecondsPerObject(row, system) / first.nanosecondsPerObject(row, system)
            let mark = system == BuriSystem.name ? (growth <= 1.3 ? " ✓" : " ✗") : ""
            print(
                "| \(row.title) | \(system) |"
                    + ms.map { " \(formatRate($0.nanosecondsPerObject(row, system))) |" }.joined()
                    + " \(ratio(growth))\(mark) |")
        }
    }
}

do {
    let arguments = CommandLine.arguments
    if arguments.count == 4, arguments[1] == "--memory-probe" {
        try MemoryProbe.runChild(mode: arguments[2], path: arguments[3])
    } else if arguments.count == 6, arguments[1] == "--fill-probe" {
        guard let count = Int(arguments[4]) else { throw BenchmarkFailure("--fill-probe: bad count \(arguments[4])") }
        try FillProbe.runChild(system: arguments[2], row: arguments[3], count: count, directory: arguments[5])
    } else {
        try runBenchmark(try Options(arguments: arguments))
    }
} catch {
    log("buri-bench: \(error)")
    exit(1)
}

/// Buri with encryption at rest beside Buri without, from the same run: what sealing every record
/// (AES-256-GCM) and storing the locale index as keyed tokens cost, row by row. The targets
/// (issue 27): at most 25% on fills, 15% on reads.
func printEncryptionTable(_ m: Measurement, rows: [Row]) {
    print("### Encryption at rest: Buri encrypted against Buri, same run")
    print("")
    print(
        "Objects per second; cost = Buri's rate over the encrypted one, minus 1 (lower is better); paired = the median over repetitions of the encrypted time over Buri's in the same repetition, minus 1 (the two run one after the other, so load that lasts longer than a row moves it less). The encrypted database seals every record and stores the locale index as keyed tokens (private); its age index is declared plaintext. It cannot group by a private index, so it skips that row."
    )
    print("")
    print("| Row | Buri | Buri encrypted | Cost | Paired | Target |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows where m.ran(row, BuriSystem.encryptedName) && m.ran(row, BuriSystem.name) {
        let plain = m.rate(row, BuriSystem.name)
        let sealed = m.rate(row, BuriSystem.encryptedName)
        let cost = plain / sealed - 1
        let isWrite = [Row.simpleFill, .complexFill, .complexRefill, .observedRefill, .deleteAll, .playlistDelete]
            .contains(row)
        let limit = isWrite ? 0.25 : 0.15
        let verdict = cost <= limit ? "≤ \(Int(limit * 100))% ✓" : "≤ \(Int(limit * 100))% ✗"
        let paired =
            m.pairedCost(row, BuriSystem.encryptedName, against: BuriSystem.name)
            .map { String(format: "%+.0f%%", $0 * 100) } ?? "—"
        print(
            "| \(row.title) | \(formatRate(plain)) | \(formatRate(sealed)) | \(String(format: "%+.0f%%", cost * 100)) | \(paired) | \(verdict) |"
        )
    }
    print("")
}
