import Buri
import Foundation
import GRDB

/// Peak memory of retrieving every object, array API against streaming API.
///
/// Each measurement runs in a fresh child process of this binary (`--memory-probe MODE PATH`) so
/// that no heap left over from another measurement hides or inflates a peak. The child opens the
/// prepared database and streams every object once (so LevelDB's block cache and SQLite's page
/// cache are as warm as they will get, and their memory is not charged to the API), resets the
/// kernel's resident high-water mark (`5` into `/proc/self/clear_refs`), notes its resident size,
/// retrieves every object through the API measured, and prints how far the high-water mark
/// (`VmHWM`) rose above that.
enum MemoryProbe {
    enum Mode: String, CaseIterable {
        case buriArray = "buri-array"
        case buriLazy = "buri-lazy"
        case buriCursor = "buri-cursor"
        case grdbArray = "grdb-array"
        case grdbCursor = "grdb-cursor"

        var system: String { rawValue.hasPrefix("buri") ? "Buri" : "GRDB" }

        var label: String {
            switch self {
            case .buriArray: "Buri `allObjects()` (array)"
            case .buriLazy: "Buri `lazyObjects()` (stream)"
            case .buriCursor: "Buri `cursor(.all)` (stream)"
            case .grdbArray: "GRDB `Person.fetchAll(db)` (array)"
            case .grdbCursor: "GRDB `Person.fetchCursor(db)` (stream)"
            }
        }
    }

    struct Result {
        var mode: Mode
        var objects: Int
        var peakGrowthBytes: Int
        var peakResetWorked: Bool
    }

    /// Reads a `kB` field of /proc/self/status, in bytes.
    static func status(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int(digits).map { $0 * 1024 }
        }
        return nil
    }

    /// Resets VmHWM to the current resident size; `false` if the kernel refused.
    static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        do {
            try handle.write(contentsOf: Data("5".utf8))
        } catch {
            return false
        }
        guard let peak = status("VmHWM"), let resident = status("VmRSS") else { return false }
        return peak <= resident + 256 * 1024
    }

    /// The child's side: one retrieval, one line of output `objects peakGrowthBytes resetWorked`.
    static func runChild(mode: String, path: String) throws {
        guard let mode = Mode(rawValue: mode) else { throw BenchmarkFailure("unknown memory probe \(mode)") }
        var count = 0
        var ageSum = 0
        var reset = false
        var base = 0
        var peak = 0
        func begin() {
            reset = resetPeak()
            base = status("VmRSS") ?? 0
        }
        func end() { peak = status("VmHWM") ?? 0 }
        switch mode {
        case .buriArray, .buriLazy, .buriCursor:
            let db = try BuriDatabase(path: path + "/buri", levelDB: StorageTuning.levelDB)
            let people = try db.bucket(Person.self)
            let warm = try people.cursor(.all)
            while try warm.next() != nil {}
            begin()
            switch mode {
            case .buriArray:
                let all = try people.allObjects()
                for person in all { ageSum &+= person.age }
                count = all.count
                end()
                withExtendedLifetime(all) {}
            case .buriLazy:
                let all = people.lazyObjects()
                for person in all {
                    ageSum &+= person.age
                    count += 1
                }
                if let error = all.error { throw error }
                end()
            default:
                let cursor = try people.cursor(.all)
                while let person = try cursor.next() {
                    ageSum &+= person.age
                    count += 1
                }
                end()
            }
            db.close()
        case .grdbArray, .grdbCursor:
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = -32768") }
            let queue = try DatabaseQueue(path: path + "/grdb.sqlite", configuration: configuration)
            try queue.read { db in
                let warm = try Person.fetchCursor(db)
                while try warm.next() != nil {}
                begin()
                if mode == .grdbArray {
                    let all = try Person.fetchAll(db)
                    for person in all { ageSum &+= person.age }
                    count = all.count
                    end()
                    withExtendedLifetime(all) {}
                } else {
                    let cursor = try Person.fetchCursor(db)
                    while let person = try cursor.next() {
                        ageSum &+= person.age
                        count += 1
                    }
                    end()
                }
            }
            try queue.close()
        }
        print(count, max(0, peak - base), reset ? 1 : 0, ageSum)
    }

    /// The parent's side: fills one Buri and one GRDB database with the workload's people, then
    /// runs every mode `repetitions` times in child processes and keeps the median growth.
    static func measure(workload: Workload, directory: String, repetitions: Int) throws -> [Result] {
        let path = directory + "/memory"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let buri = try BuriSystem(path: path + "/buri", workload: workload)
            _ = try buri.run(.complexFill)
            buri.close()
            let grdb = try GRDBSystem(path: path + "/grdb.sqlite", workload: workload)
            _ = try grdb.run(.complexFill)
            grdb.close()
        }
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var samples: [Mode: [Int]] = [:]
        var counts: [Mode: Int] = [:]
        var resets: [Mode: Bool] = [:]
        for _ in 0..<repetitions {
            for mode in Mode.allCases {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = ["--memory-probe", mode.rawValue, path]
                let pipe = Pipe()
                process.standardOutput = pipe
                try process.run()
                let output = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                let fields = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isWhitespace).compactMap {
                    Int($0)
                }
                guard process.terminationStatus == 0, fields.count == 4 else {
                    throw BenchmarkFailure("memory probe \(mode.rawValue) failed (status \(process.terminationStatus))")
                }
                counts[mode] = fields[0]
                samples[mode, default: []].append(fields[1])
                resets[mode] = (resets[mode] ?? true) && fields[2] == 1
            }
        }
        return Mode.allCases.map { mode in
            Result(
                mode: mode, objects: counts[mode] ?? 0, peakGrowthBytes: median(samples[mode] ?? [0]),
                peakResetWorked: resets[mode] ?? false)
        }
    }
}

func median<T: Comparable>(_ values: [T]) -> T {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// Peak memory of the fills: for each system, how far the resident high-water mark rises while it
/// stores the simple fill's tokens, or the complex fill's people, into a fresh database.
///
/// Each measurement runs in a fresh child process (`--fill-probe SYSTEM ROW COUNT DIRECTORY`),
/// which builds the workload (and the floor's bytes) first, opens the system on an empty database,
/// resets VmHWM (`clear_refs`, as `MemoryProbe` does), notes VmRSS, runs the fill and reports
/// VmHWM's rise above it. The prebuilt inputs are not charged to the fill; everything the fill
/// allocates (encoded batch, LevelDB's batch and memtable, SQLite's pages and journal) is.
enum FillProbe {
    static let rows: [Row] = [.simpleFill, .complexFill]

    struct Result {
        var system: String
        var row: Row
        var objects: Int
        var peakGrowthBytes: Int
        /// Record keys and values as Buri writes them (`FloorLayout.recordBytes`).
        var dataBytes: Int
        var peakResetWorked: Bool

        var bytesPerObject: Double { Double(peakGrowthBytes) / Double(max(objects, 1)) }
        var multipleOfData: Double { Double(peakGrowthBytes) / Double(max(dataBytes, 1)) }
    }

    /// The child's side: one fill, one line of output `objects peakGrowthBytes resetWorked`.
    static func runChild(system name: String, row rowID: String, count: Int, directory: String) throws {
        guard let row = rows.first(where: { $0.id == rowID }) else { throw BenchmarkFailure("unknown fill \(rowID)") }
        let workload = Workload(n: count)
        let system: any System
        switch name {
        case BuriSystem.name: system = try BuriSystem(path: directory + "/buri", workload: workload)
        case BuriSystem.memoryName: system = try BuriSystem(database: BuriDatabase.inMemory(), workload: workload)
        case BuriSystem.encryptedName:
            system = try BuriSystem(encryptedAt: directory + "/buri-encrypted", workload: workload)
        case FloorSystem.name:
            let layout = try FloorLayout.learn(in: directory)
            system = try FloorSystem(
                path: directory + "/floor", workload: workload, layout: layout,
                bytes: FloorSystem.Bytes(workload: workload, layout: layout))
        case BuriBestSystem.name: system = try BuriBestSystem(path: directory + "/buri-best", workload: workload)
        case GRDBSystem.name: system = try GRDBSystem(path: directory + "/grdb.sqlite", workload: workload)
        case GRDBBestSystem.name: system = try GRDBBestSystem(path: directory + "/grdb.sqlite", workload: workload)
        default: throw BenchmarkFailure("unknown system \(name)")
        }
        let reset = MemoryProbe.resetPeak()
        let base = MemoryProbe.status("VmRSS") ?? 0
        let handled = try system.run(row)
        let peak = MemoryProbe.status("VmHWM") ?? 0
        system.close()
        withExtendedLifetime(workload) {}
        print(handled, max(0, peak - base), reset ? 1 : 0)
    }

    /// The parent's side: every system and fill in its own child, `repetitions` times; the median.
    static func measure(
        systems: [String], workload: Workload, layout: FloorLayout, directory: String, repetitions: Int
    ) throws -> [Result] {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var results: [Result] = []
        for row in rows {
            let dataBytes = layout.recordBytes(of: row, workload: workload)
            for system in systems {
                var samples: [Int] = []
                var reset = true
                for repetition in 0..<repetitions {
                    let path = directory + "/fill-\(row.id)-\(repetition)"
                    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                    defer { try? FileManager.default.removeItem(atPath: path) }
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = ["--fill-probe", system, row.id, String(workload.n), path]
                    let pipe = Pipe()
                    process.standardOutput = pipe
                    try process.run()
                    let output = pipe.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    let fields = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isWhitespace)
                        .compactMap { Int($0) }
                    guard process.terminationStatus == 0, fields.count == 3 else {
                        throw BenchmarkFailure(
                            "fill probe \(system) \(row.id) failed (status \(process.terminationStatus))")
                    }
                    guard fields[0] == workload.n else {
                        throw BenchmarkFailure(
                            "fill probe \(system) \(row.id): handled \(fields[0]) objects, expected \(workload.n)")
                    }
                    samples.append(fields[1])
                    reset = reset && fields[2] == 1
                }
                results.append(
                    Result(
                        system: system, row: row, objects: workload.n, peakGrowthBytes: median(samples),
                        dataBytes: dataBytes, peakResetWorked: reset))
            }
        }
        return results
    }
}
