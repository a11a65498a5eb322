// Tokenizer throughput, run by hand through Scripts/time-tokenizer (not a test: timings depend on
// the host). Reads one document per line from the file given as the first argument (the script
// passes the package descriptions of `apt-cache dumpavail`) and reports tokens/s and MB/s of
// TextTokenizer.v1 on them: per line (many short documents), as one text, through tokens(in:),
// and on the same text with accents (the fold table's path) and on Chinese (bigrams).
import BuriText
import Glibc

@main
struct TokenizerTiming {
    static func main() {
        guard CommandLine.arguments.count > 1, let file = fopen(CommandLine.arguments[1], "r") else {
            print("usage: tokenizer-timing <file with one document per line>")
            exit(2)
        }
        var lines: [String] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        while getline(&line, &capacity, file) > 0, let line {
            var text = String(cString: line)
            if text.hasSuffix("\n") { text.removeLast() }
            if text.hasPrefix("Description: ") { text.removeFirst(13) }
            lines.append(text)
        }
        fclose(file)
        let whole = lines.joined(separator: "\n")
        let accented = String(whole.map { $0 == "e" ? "é" : $0 == "a" ? "ä" : $0 == "o" ? "ø" : $0 })
        let chinese = String(
            repeating: "全文检索是一种将文件中所有文本与检索项匹配的文字资料检索方法。北京大学的图书馆藏书丰富，读者可以在线查询。", count: 20_000)
        let tokenizer = TextTokenizer.v1

        report("lines, forEachToken", bytes: whole.utf8.count) {
            var count = 0
            for text in lines { tokenizer.forEachToken(in: text) { _, _ in count += 1 } }
            return count
        }
        report("lines, tokens(in:)", bytes: whole.utf8.count) {
            var count = 0
            for text in lines { count += tokenizer.tokens(in: text).count }
            return count
        }
        for (name, text) in [
            ("one text, ASCII", whole), ("one text, accented", accented), ("one text, Chinese", chinese),
        ] {
            report(name, bytes: text.utf8.count) {
                var count = 0
                tokenizer.forEachToken(in: text) { _, _ in count += 1 }
                return count
            }
        }
    }

    /// The best of 7 runs of `work`, which returns how many tokens it saw.
    static func report(_ name: String, bytes: Int, _ work: () -> Int) {
        var best = Double.infinity
        var tokens = 0
        for _ in 0..<7 {
            let start = now()
            tokens = work()
            best = min(best, now() - start)
        }
        let perSecond = Double(tokens) / best / 1e6
        let megabytes = Double(bytes) / best / 1e6
        print(
            "\(name): \(tokens) tokens, \(bytes) bytes in \(milliseconds(best)) ms: "
                + "\(rounded(perSecond)) M tokens/s, \(rounded(megabytes)) MB/s")
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func milliseconds(_ seconds: Double) -> String { rounded(seconds * 1000) }
    static func rounded(_ value: Double) -> String { String(Double(Int(value * 10)) / 10) }
}
