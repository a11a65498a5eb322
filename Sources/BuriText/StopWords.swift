/// A tokenizer's stop words as folded terms, sorted so that a term still in the scanner's buffer
/// is looked up by binary search, without making an array of it.
struct StopWordList: Sendable, Hashable {
    let terms: Set<[UInt8]>
    private let sorted: [[UInt8]]
    private let longest: Int

    init(_ terms: Set<[UInt8]>) {
        self.terms = terms
        sorted = terms.sorted { $0.lexicographicallyPrecedes($1) }
        longest = terms.map(\.count).max() ?? 0
    }

    var isEmpty: Bool { terms.isEmpty }

    func contains(_ term: UnsafeBufferPointer<UInt8>) -> Bool {
        guard term.count <= longest else { return false }
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            let order = Self.compare(sorted[middle], term)
            if order == 0 { return true }
            if order < 0 { low = middle + 1 } else { high = middle }
        }
        return false
    }

    /// <0, 0 or >0 as `stored` sorts before, equal to or after `term` (bytes, then length).
    private static func compare(_ stored: [UInt8], _ term: UnsafeBufferPointer<UInt8>) -> Int {
        stored.withUnsafeBufferPointer { stored in
            let common = min(stored.count, term.count)
            for index in 0..<common where stored[index] != term[index] {
                return stored[index] < term[index] ? -1 : 1
            }
            return stored.count - term.count
        }
    }
}
