import Foundation

/// The text benchmark's documents: Debian's package descriptions, a real corpus no one here wrote,
/// and a larger corpus derived from it by a fixed, seeded procedure.
struct Corpus: Sendable {
    /// Where the documents came from, for the report.
    var name: String
    /// Document keys (unique), in the order documents are stored.
    var keys: [String]
    /// Document texts, `texts[i]` the text of `keys[i]`.
    var texts: [String]

    var count: Int { keys.count }

    /// Why the corpus could not be made (apt is not available, or gave nothing).
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// Every package's `Description:` line from `apt-cache dumpavail` (one document per package
    /// name; a name listed twice keeps its first description), keyed by the package name.
    static func debianDescriptions() throws -> Corpus {
        // BURI_TEXT_DUMPAVAIL names a saved `apt-cache dumpavail` output (for runs under valgrind,
        // where starting a process fails).
        let output: String
        if let saved = ProcessInfo.processInfo.environment["BURI_TEXT_DUMPAVAIL"] {
            guard let text = try? String(contentsOfFile: saved, encoding: .utf8) else {
                throw Unavailable(description: "could not read BURI_TEXT_DUMPAVAIL file \(saved)")
            }
            output = text
        } else {
            output = try run(["apt-cache", "dumpavail"])
        }
        var keys: [String] = []
        var texts: [String] = []
        var seen = Set<String>()
        var package: String?
        for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("Package: ") {
                package = String(line.dropFirst("Package: ".count))
            } else if line.hasPrefix("Description: "), let name = package {
                package = nil
                guard seen.insert(name).inserted else { continue }
                keys.append(name)
                texts.append(String(line.dropFirst("Description: ".count)))
            }
        }
        guard keys.count >= 1_000 else {
            throw Unavailable(
                description: "apt-cache dumpavail listed \(keys.count) package descriptions (need 1,000 or more)")
        }
        return Corpus(
            name: "Debian package descriptions (apt-cache dumpavail, \(keys.count) packages)", keys: keys, texts: texts)
    }

    /// `count` documents derived from `base`: document `i` is the text of base document `a`, a
    /// space, and the text of base document `b`, where `a` and `b` are the next two draws of
    /// SplitMix64 (seed 26) modulo the base's size; its key is `"d"` and `i` in 8 digits. The
    /// words, their frequencies and the phrases inside each half are real; only the pairing is
    /// made up.
    static func derived(from base: Corpus, count: Int) -> Corpus {
        var random = SplitMix64(seed: 26)
        var keys: [String] = []
        var texts: [String] = []
        keys.reserveCapacity(count)
        texts.reserveCapacity(count)
        for i in 0..<count {
            let a = Int(random.next() % UInt64(base.count))
            let b = Int(random.next() % UInt64(base.count))
            keys.append("d" + String(i).leftPadded(to: 8))
            texts.append(base.texts[a] + " " + base.texts[b])
        }
        return Corpus(
            name: "\(count) documents derived from the Debian descriptions (pairs, SplitMix64 seed 26)", keys: keys,
            texts: texts)
    }

    private static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        // Not the benchmark's own standard input, which may be closed (a background run).
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Unavailable(description: "could not run \(arguments.joined(separator: " ")): \(error)")
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Unavailable(
                description: "\(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// SplitMix64 (Steele, Lea and Flood), the benchmark's seeded generator.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
