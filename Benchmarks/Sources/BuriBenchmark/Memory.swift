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
            let db = try BuriDatabase(path: path + "/buri")
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
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
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
                let fields = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
                guard process.terminationStatus == 0, fields.count == 4 else {
                    throw BenchmarkFailure("memory probe \(mode.rawValue) failed (status \(process.terminationStatus))")
                }
                counts[mode] = fields[0]
                samples[mode, default: []].append(fields[1])
                resets[mode] = (resets[mode] ?? true) && fields[2] == 1
            }
        }
        return Mode.allCases.map { mode in
            Result(mode: mode, objects: counts[mode] ?? 0, peakGrowthBytes: median(samples[mode] ?? [0]), peakResetWorked: resets[mode] ?? false)
        }
    }
}

func median<T: Comparable>(_ values: [T]) -> T {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}
