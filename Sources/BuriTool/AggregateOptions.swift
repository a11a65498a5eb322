import ArgumentParser
import Buri

/// `buri query … --sum/--avg/--min/--max INDEX [--group-by INDEX]`: aggregates of a numeric index
/// over the query's matches, computed by the library from index entries and record headers.
struct AggregateOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Print the exact sum of this numeric index over the matches.", valueName: "index"))
    var sum: String?

    @Option(help: ArgumentHelp("Print the average of this numeric index over the matches.", valueName: "index"))
    var avg: String?

    @Option(help: ArgumentHelp("Print the smallest value of this numeric index among the matches.", valueName: "index"))
    var min: String?

    @Option(help: ArgumentHelp("Print the largest value of this numeric index among the matches.", valueName: "index"))
    var max: String?

    @Option(
        help: ArgumentHelp(
            "With --sum/--avg/--min/--max: one row per value of this index (its order), then the matches without a value.",
            valueName: "index"))
    var groupBy: String?

    /// The numeric index the statistics are of, if any is asked for.
    var index: String? { sum ?? avg ?? min ?? max }

    var isRequested: Bool { index != nil }

    func validate() throws {
        let named = [sum, avg, min, max].compactMap { $0 }
        if let first = named.first, named.contains(where: { !$0.utf8.elementsEqual(first.utf8) }) {
            throw ValidationError(
                "--sum, --avg, --min and --max are statistics of one index; name the same index in each (run the query once per index)"
            )
        }
        if groupBy != nil, named.isEmpty {
            throw ValidationError("--group-by groups statistics: add --sum, --avg, --min or --max INDEX")
        }
    }

    /// The statistics asked for, as (name, value) columns: count always, then sum, avg, min, max.
    private func columns(_ aggregate: Aggregate) -> [(String, String)] {
        var columns = [("count", String(aggregate.count))]
        if sum != nil { columns.append(("sum", Self.number(aggregate.sum))) }
        if avg != nil { columns.append(("avg", aggregate.average.map(Self.number) ?? "null")) }
        if min != nil { columns.append(("min", aggregate.minimum.map(Self.json) ?? "null")) }
        if max != nil { columns.append(("max", aggregate.maximum.map(Self.json) ?? "null")) }
        return columns
    }

    /// Prints the statistics of `index` over `query`'s matches in `raw`: `name value` lines (or
    /// one JSON object); grouped, a tab-separated table with a header line (or a JSON array).
    func run(_ raw: RawBucket, query: Query, json: Bool, path: String, out: Output) throws {
        guard let index else { return }
        guard let groupBy else {
            let aggregate = try mapErrors(path: path) { try raw.aggregate(index, where: query) }
            let columns = columns(aggregate)
            if json {
                try out.line("{" + columns.map { "\(jsonString($0.0)):\($0.1)" }.joined(separator: ",") + "}")
            } else {
                for (name, value) in columns { try out.line("\(name) \(value)") }
            }
            try out.flush()
            return
        }
        let groups = try mapErrors(path: path) { try raw.aggregate(index, where: query, groupedBy: groupBy) }
        if json {
            let rows = groups.map { group in
                "{\"group\":\(group.value.map(Self.json) ?? "null")"
                    + columns(group.aggregate).map { ",\(jsonString($0.0)):\($0.1)" }.joined() + "}"
            }
            try out.line("[" + rows.joined(separator: ",") + "]")
        } else {
            try out.line((["group"] + columns(.empty).map(\.0)).joined(separator: "\t"))
            for group in groups {
                let cells = [group.value.map(Self.json) ?? "null"] + columns(group.aggregate).map(\.1)
                try out.line(cells.joined(separator: "\t"))
            }
        }
        try out.flush()
    }

    /// A number as JSON: integers in full, doubles in their shortest exact form, and the
    /// non-finite ones, which JSON has no number for, as the strings "Infinity", "-Infinity", "NaN".
    static func number(_ value: Double) -> String {
        if value.isNaN { return "\"NaN\"" }
        if value.isInfinite { return value < 0 ? "\"-Infinity\"" : "\"Infinity\"" }
        return String(value)
    }

    static func number(_ sum: NumericSum) -> String {
        switch sum {
        case .integer(let value): return String(value)
        case .double(let value): return number(value)
        }
    }

    /// An index value as JSON: a number, or a string (bytes that are not UTF-8 as `0x…` hex).
    static func json(_ value: IndexValue) -> String {
        switch value.decoded {
        case .integer(let integer): return String(integer)
        case .unsigned(let integer): return String(integer)
        case .double(let double): return number(double)
        case .bytes: return jsonString(value.decoded.description)
        }
    }
}
