import Foundation

// buri-text-bench: Buri's text index against SQLite FTS5 (through GRDB) on Debian's package
// descriptions, side by side in one run: build time, size, and each query's latency (median and
// 99th percentile) and matches, unranked and ranked (top 20). FTS5 runs in two setups: a bare
// FTS5 table (its fastest build) and GRDB's synchronized table (documents keyed by `key`, as
// Buri's are, with an external-content FTS5 index kept by triggers: the setup GRDB documents,
// and the faster one to query). docs/BENCHMARK.md, "Text rows".

struct TextQueryCase: Sendable {
    var title: String
    /// The query in FTS5 syntax (Buri parses the same forms).
    var query: String
    /// Whether both systems must return the same set (all-words queries under equivalent
    /// tokenization); prefixes and phrases are compared too, and differences reported.
    var mustAgree: Bool
}

let cases: [TextQueryCase] = [
    TextQueryCase(title: "rare word (telescope)", query: "telescope", mustAgree: true),
    TextQueryCase(title: "common word (library)", query: "library", mustAgree: true),
    TextQueryCase(title: "two words (python module)", query: "python module", mustAgree: true),
    TextQueryCase(title: "prefix (graph*)", query: "graph*", mustAgree: false),
    TextQueryCase(title: "phrase (\"command line\")", query: "\"command line\"", mustAgree: false),
    TextQueryCase(title: "either word (python OR perl)", query: "python OR perl", mustAgree: true),
]

struct Options {
    var documents = 0
    var times = 50
    var json = false
    /// The systems to run (`--only`, for profiling one of them): all when empty.
    var only: Set<String> = []

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--documents":
                guard let value = rest.popFirst(), let n = Int(value), n >= 1_000 else {
                    throw Failure("--documents needs a number ≥ 1000 (0: the Debian descriptions as they are)")
                }
                documents = n
            case "--times":
                guard let value = rest.popFirst(), let n = Int(value), n >= 1 else {
                    throw Failure("--times needs a number ≥ 1")
                }
                times = n
            case "--json": json = true
            case "--only":
                guard let value = rest.popFirst(), !value.isEmpty else {
                    throw Failure("--only needs system names (fts5, buri, fts5-table), comma-separated")
                }
                only = Set(value.split(separator: ",").map(String.init))
            case "--help", "-h":
                print(
                    """
                    usage: buri-text-bench [--documents N] [--times T] [--only SYSTEMS] [--json]
                      --documents N  N documents derived from the descriptions (pairs; default: the
                                     descriptions themselves, one document per package)
                      --times T      each query asked T times (default 50); median and p99 reported
                      --only SYSTEMS comma-separated: fts5, buri, fts5-table, buri-concurrently
                                     (default: all; comparisons need fts5 first)
                    """)
                exit(0)
            default: throw Failure("unknown argument \(argument) (see --help)")
            }
        }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

struct QueryResult {
    var unranked: Latency
    var matches: Int
    /// `nil` where the system has no ranking yet.
    var ranked: Latency?
    var keys: Set<String>
    /// The top 20 by BM25, best first (empty without ranking).
    var top: [String] = []
}

/// BNRPersistence's figure: "search 1M records and fetch the 727 that match in 0.1 seconds". On the
/// 1M-document corpus "bioinformatics" matches about 750; every match's key and text are fetched.
let fetchQuery = "bioinformatics"

func runSystem(
    _ system: any TextSystem, corpus: Corpus, options: Options
) throws -> (build: Double, size: Int, results: [QueryResult], fetch: (Latency, Int)) {
    let (build, _) = try time { try system.build(corpus) }
    // Queries first, on the index as the build left it; the size after them (measuring it
    // compacts Buri's store, which also merges its text segments: not part of the build).
    var results: [QueryResult] = []
    for query in cases {
        let (unranked, keys) = try Latency.measure(times: options.times) { try system.keys(matching: query.query) }
        var ranked: Latency?
        var best: [String] = []
        if try system.ranked(matching: query.query, limit: 20) != nil {
            let (latency, top) = try Latency.measure(times: options.times) {
                try system.ranked(matching: query.query, limit: 20) ?? []
            }
            guard top.count == min(20, keys.count) else {
                throw Failure(
                    "\(type(of: system).name), \(query.title): ranked gave \(top.count) keys of \(keys.count) matches")
            }
            ranked = latency
            best = top
        }
        results.append(
            QueryResult(unranked: unranked, matches: keys.count, ranked: ranked, keys: Set(keys), top: best))
    }
    let (fetch, documents) = try Latency.measure(times: options.times) { try system.documents(matching: fetchQuery) }
    let size = try system.size()
    return (build, size, results, (fetch, documents.count))
}

func main() throws {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    let base: Corpus
    do {
        base = try Corpus.debianDescriptions()
    } catch let error as Corpus.Unavailable {
        print("buri-text-bench: text section skipped: \(error) (the corpus is Debian's package descriptions)")
        return
    }
    let corpus = options.documents == 0 ? base : Corpus.derived(from: base, count: options.documents)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("buri-text-bench-\(getpid())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }

    let wanted = { (id: String) in options.only.isEmpty || options.only.contains(id) }
    let all: [(id: String, name: String, make: () throws -> any TextSystem)] = [
        ("fts5", FTS5System.name, { try FTS5System(directory: directory) }),
        ("buri", BuriTextSystem.name, { try BuriTextSystem(directory: directory) }),
        ("fts5-table", FTS5TableSystem.name, { try FTS5TableSystem(directory: directory) }),
    ]
    let systems = all.filter { wanted($0.id) }.map { ($0.name, $0.make) }
    var table: [(name: String, build: Double, size: Int, results: [QueryResult], fetch: (Latency, Int))] = []
    for (name, make) in systems {
        let system = try make()
        let (build, size, results, fetch) = try runSystem(system, corpus: corpus, options: options)
        table.append((name, build, size, results, fetch))
    }

    // The same build with `storeConcurrently` (encoding and tokenizing on every core), for the
    // build row only: its index is the one `store` builds.
    var concurrentRow: [(String, Double, Int)] = []
    if wanted("buri-concurrently") {
        let concurrent = try BuriTextSystem(directory: directory, concurrently: true)
        let (build, _) = try time { try concurrent.build(corpus) }
        concurrentRow = [
            (
                "Buri, storeConcurrently (\(ProcessInfo.processInfo.activeProcessorCount) cores)", build,
                try concurrent.size()
            )
        ]
    }

    print("## Text search: \(corpus.name), each query \(options.times) times\n")
    print("| System | Build (s) | Size (MiB) |")
    print("|---|---:|---:|")
    let builds = table.map { ($0.name, $0.build, $0.size) } + concurrentRow
    for (name, build, size) in builds {
        print("| \(name) | \(String(format: "%.2f", build)) | \(String(format: "%.1f", Double(size) / 1_048_576)) |")
    }
    print("\n| Query | System | Matches | Median (ms) | p99 (ms) | Ranked top 20 median (ms) | p99 (ms) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (i, query) in cases.enumerated() {
        for row in table {
            let r = row.results[i]
            print(
                "| \(query.title) | \(row.name) | \(r.matches) | \(ms(r.unranked.median)) | \(ms(r.unranked.p99)) | \(r.ranked.map { ms($0.median) } ?? "—") | \(r.ranked.map { ms($0.p99) } ?? "—") |"
            )
        }
    }
    print("\n| Fetch every match, key and text (\(fetchQuery)) | Documents | Median (ms) | p99 (ms) |")
    print("|---|---:|---:|---:|")
    for row in table {
        print("| \(row.name) | \(row.fetch.1) | \(ms(row.fetch.0.median)) | \(ms(row.fetch.0.p99)) |")
    }
    // Rankings side by side: how many of each system's top 20 the other has too.
    if table.count > 1 {
        let others = table.dropFirst()
        print(
            "\n| Query | "
                + others.map { "\($0.name): top-20 keys \(table[0].name) ranks too (of)" }.joined(separator: " | ")
                + " |")
        print("|---|" + others.map { _ in "---:|" }.joined())
        for (i, query) in cases.enumerated() {
            let first = table[0].results[i].top
            let cells = others.map { row in
                "\(Set(first).intersection(row.results[i].top).count) (\(max(first.count, row.results[i].top.count)))"
            }
            print("| \(query.title) | " + cells.joined(separator: " | ") + " |")
        }
    }
    // Result sets side by side: all-words queries must agree; any difference is listed.
    if table.count > 1 {
        for (i, query) in cases.enumerated() {
            let first = table[0].results[i].keys
            for row in table.dropFirst() where row.results[i].keys != first {
                let only = first.subtracting(row.results[i].keys).sorted().prefix(5)
                let other = row.results[i].keys.subtracting(first).sorted().prefix(5)
                print(
                    "\(query.mustAgree ? "DIFFERENT" : "differs") (\(query.title)): only \(table[0].name): \(Array(only)); only \(row.name): \(Array(other))"
                )
            }
        }
    }
}

func ms(_ seconds: Double) -> String { String(format: "%.3f", seconds * 1000) }

do {
    try main()
} catch {
    FileHandle.standardError.write(Data("buri-text-bench: \(error)\n".utf8))
    exit(1)
}
