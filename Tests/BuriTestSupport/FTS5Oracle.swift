import Buri
import Foundation

/// SQLite FTS5 as an oracle for Buri's text search: random documents and random queries in FTS5's
/// syntax, and FTS5's own answers to them, from python3's `sqlite3` module (Scripts/bootstrap
/// installs python3; Debian's SQLite has FTS5), with the tokenizer `unicode61 remove_diacritics 2`.
///
/// The vocabulary keeps to words both tokenizers cut and fold alike: Latin letters with accents,
/// in any case and in both Unicode forms, and digits. Where they differ by design (`ß`, `don't`,
/// `x_y`, `3.14`, Chinese) the README and docs/BENCHMARK.md say how.
public enum FTS5Oracle {
    static let vocabulary = [
        "apple", "Apple", "APPLE", "pie", "tart", "pear", "crème", "creme", "CRÈME", "café", "cafe\u{301}", "Ärger",
        "arger", "42", "2024", "naïve", "naive", "appliance", "applet", "pi", "pies", "tarte", "zebra", "zoo", "zoom",
        "über", "uber", "résumé", "resume", "x", "y", "a1", "b2b", "lemon", "lime", "limes", "Ωmega", "ωmega",
    ]
    static let separators = [" ", "  ", ", ", ". ", "-", "; ", "\t", " (", ") ", "\n", "!", "/"]
    static let queryWords = [
        "apple", "APPLE", "pie", "tart", "pear", "creme", "crème", "cafe", "Café", "cafe\u{301}", "arger", "ärger",
        "42", "2024", "naive", "appl", "pi", "zoo", "zebra", "uber", "über", "resume", "x", "y", "a1", "lemon", "lim",
        "ωmega", "nothing",
    ]

    /// A random document of up to 14 words.
    public static func document(_ random: inout SeededGenerator) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 0...14, using: &random) {
            text += vocabulary.randomElement(using: &random)! + separators.randomElement(using: &random)!
        }
        return text
    }

    /// A random query in FTS5's grammar (words, `"phrases"`, `one + two`, AND, OR, NOT, implicit
    /// AND, parentheses); with `prefixes`, some words and phrases end in `*`. Beside a
    /// parenthesized group an operator is always written: FTS5 has no implicit AND there.
    public static func query(_ random: inout SeededGenerator, prefixes: Bool = true, depth: Int = 0) -> String {
        if depth > 3 || Int.random(in: 0..<10, using: &random) < 3 { return word(&random, prefixes: prefixes) }
        func operand(_ random: inout SeededGenerator) -> String {
            Int.random(in: 0..<4, using: &random) == 0
                ? "(" + query(&random, prefixes: prefixes, depth: depth + 1) + ")" : word(&random, prefixes: prefixes)
        }
        var text = operand(&random)
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let next = operand(&random)
            var op = [" ", " AND ", " OR ", " NOT ", " "].randomElement(using: &random)!
            if op == " " && (next.hasPrefix("(") || text.hasSuffix(")")) { op = " AND " }
            text += op + next
        }
        return text
    }

    static func word(_ random: inout SeededGenerator, prefixes: Bool) -> String {
        let word = queryWords.randomElement(using: &random)!
        let star = { (random: inout SeededGenerator) in prefixes && Bool.random(using: &random) ? "*" : "" }
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<4: return word + star(&random)
        case 4..<7:
            let words = (0..<Int.random(in: 1...3, using: &random)).map { _ in queryWords.randomElement(using: &random)!
            }
            return "\"" + words.joined(separator: " ") + "\"" + (Bool.random(using: &random) ? star(&random) : "")
        case 7..<9: return word + " + " + queryWords.randomElement(using: &random)! + star(&random)
        default: return word
        }
    }

    /// One FTS5 answer: the matching keys with their BM25 scores (FTS5's `bm25()` negated, so
    /// higher is better, as Buri gives them), or FTS5's error.
    public struct Answer: Decodable, Sendable {
        public var error: String?
        public var scores: [String: Double]?
    }

    /// FTS5's answers to `queries` over `documents`, from one python3 process; `nil` entries of
    /// the result never occur (a failure to run python3 throws).
    public static func answers(_ documents: [String: String], _ queries: [String]) throws -> [Answer] {
        let script = """
            import json, sqlite3, sys
            request = json.load(sys.stdin)
            db = sqlite3.connect(":memory:")
            db.execute("CREATE VIRTUAL TABLE doc USING fts5(key UNINDEXED, body, tokenize='unicode61 remove_diacritics 2')")
            db.executemany("INSERT INTO doc (key, body) VALUES (?, ?)", sorted(request["documents"].items()))
            answers = []
            for query in request["queries"]:
                try:
                    rows = db.execute("SELECT key, bm25(doc) FROM doc WHERE doc MATCH ?", (query,)).fetchall()
                    answers.append({"scores": {key: -score for key, score in rows}})
                except sqlite3.Error as error:
                    answers.append({"error": str(error)})
            json.dump(answers, sys.stdout)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let request = try JSONSerialization.data(withJSONObject: ["documents": documents, "queries": queries])
        // Written from another thread: python3 may fill its output pipe before reading all input.
        let writer = Thread {
            input.fileHandleForWriting.write(request)
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw OracleError(
                message:
                    "python3 with sqlite3's FTS5 exited \(process.terminationStatus) (Scripts/bootstrap installs it)")
        }
        return try JSONDecoder().decode([Answer].self, from: data)
    }

    public struct OracleError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// How a comparison went: what disagreed, and how much was compared.
    public struct Comparison: Sendable {
        public var problems: [String] = []
        /// Queries both answered.
        public var answered = 0
        /// Of those, the ones whose scores were not compared (``mayMatchPartly(_:)``).
        public var scoresSkipped = 0
        /// Queries Buri refused as `refusal` allows (and FTS5 answered).
        public var refusedAsExpected = 0
    }

    /// Compares Buri's answers (`search`: keys in byte order; `ranked`: every match with its
    /// score, best first) with FTS5's: the same queries accepted, the same matches, the same
    /// scores. A query for which `refusal` returns true of Buri's error is counted, not a problem.
    ///
    /// Where an OR has an operand with AND inside, an object can match with a sub-expression
    /// failing. Buri then scores only the units of the sub-expressions that match, as FTS5 does
    /// in simple cases (`apple OR (pie apple)`: apple once in an object without pie). In others
    /// FTS5's counts depend on where its doclist iterators stand (`lim NOT pie OR cafe` scores pie
    /// in some objects holding pie and cafe, not in others), so such scores are not compared.
    public static func compare(
        documents: [String: String], queries: [String], answers: [Answer], label: String,
        refusal: (any Error) -> Bool = { _ in false },
        search: (String) throws -> [String], ranked: (String) throws -> [(key: String, score: Double)]
    ) -> Comparison {
        var result = Comparison()
        for (text, answer) in zip(queries, answers) {
            let keys: [String]
            do {
                keys = try search(text)
            } catch {
                if answer.error == nil {
                    if refusal(error) {
                        result.refusedAsExpected += 1
                    } else {
                        result.problems.append("\(label): Buri refused \(text) (\(error)), FTS5 answered")
                    }
                }
                continue
            }
            guard let scores = answer.scores else {
                result.problems.append("\(label): FTS5 refused \(text) (\(answer.error ?? "")), Buri answered")
                continue
            }
            result.answered += 1
            if Set(keys) != Set(scores.keys) {
                result.problems.append(
                    "\(label): \(text): only Buri \(Set(keys).subtracting(scores.keys).sorted()), only FTS5 \(Set(scores.keys).subtracting(keys).sorted())"
                )
            }
            let bytes = keys.map { Array($0.utf8) }
            if bytes != bytes.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                result.problems.append("\(label): \(text): keys not in byte order")
            }
            let best: [(key: String, score: Double)]
            do { best = try ranked(text) } catch {
                result.problems.append("\(label): ranked \(text): \(error)")
                continue
            }
            if best.count != scores.count { result.problems.append("\(label): ranked \(text): \(best.count) matches") }
            if !zip(best, best.dropFirst()).allSatisfy({ $0.score >= $1.score }) {
                result.problems.append("\(label): ranked \(text): not best first")
            }
            guard let parsed = try? TextQuery.parse(text, tokenizer: .v1), !mayMatchPartly(parsed) else {
                result.scoresSkipped += 1
                continue
            }
            for match in best {
                guard let expected = scores[match.key] else {
                    result.problems.append("\(label): ranked \(text) gave \(match.key)")
                    continue
                }
                if abs(match.score - expected) > 1e-9 * max(1, abs(expected)) {
                    result.problems.append(
                        "\(label): \(text) \(match.key) \(String(reflecting: documents[match.key] ?? "")): score \(match.score), FTS5 \(expected)"
                    )
                }
            }
        }
        return result
    }

    /// Whether an object may match `query` with one of its sub-expressions failing: an operand of
    /// OR holds an AND (NOT is an operand of AND).
    public static func mayMatchPartly(_ query: TextQuery, underOr: Bool = false) -> Bool {
        switch query {
        case .term, .prefix, .phrase, .not: return false
        case .or(let operands): return operands.contains { mayMatchPartly($0, underOr: true) }
        case .and(let operands): return underOr || operands.contains { mayMatchPartly($0, underOr: underOr) }
        }
    }
}
