import Dispatch
import Testing

@testable import BuriText

@Suite("Tokenizer v1: the BMP fold table, filled a block at a time")
struct FoldTableTests {
    /// What the table answers for `value`: its kind, the scalars it folds to, and the combining
    /// class the scanner uses for it.
    static func answer(_ table: FoldTable, _ value: UInt32) -> (kind: UInt32, folded: [UInt32], mark: UInt8) {
        let entry = table.entry(value)
        let folded =
            entry.count == 0
            ? [entry.value] : (0..<entry.count).map { table.extra(of: value, at: Int(entry.value) + $0) }
        return (entry.kindBits, folded, table.keptMarkClass(value))
    }

    /// What v1's rules say for `value`, computed on its own.
    static func rule(_ value: UInt32) -> (kind: UInt32, folded: [UInt32], mark: UInt8) {
        let (kind, folded) = FoldTable.fold(value)
        let mark = kind == .mark ? FoldTable.combiningClass(value) : 0
        switch kind {
        case .separator, .ignored: return (kind.rawValue, [0], mark)
        default: return (kind.rawValue, folded, mark)
        }
    }

    @Test func everyBMPScalarFoldsAsTheRulesSay() {
        let table = FoldTable()
        var differences: [String] = []
        // Blocks in a scattered order, so that no block is filled only because its neighbour was.
        for block in (0..<256).map({ ($0 * 97) % 256 }) {
            for offset in 0..<256 {
                let value = UInt32(block * 256 + offset)
                let got = Self.answer(table, value)
                let want = Self.rule(value)
                if got.kind != want.kind || got.folded != want.folded || got.mark != want.mark {
                    differences.append("U+\(String(value, radix: 16)): \(got) != \(want)")
                }
            }
        }
        #expect(differences.isEmpty, "\(differences.prefix(5))")
    }

    @Test func aFoldIntoAnotherBlockReadsThatBlocksMarkClass() {
        // が (U+304C) folds to か and U+3099 (class 8): the class of a scalar met only as part of
        // another's fold is read from its own block, filled on the way.
        let table = FoldTable()
        let ga = Self.answer(table, 0x304C)
        #expect(ga.folded == [0x304B, 0x3099])
        #expect(table.keptMarkClass(0x3099) == 8)
        // Devanagari nukta (U+093C, class 7), asked before anything of its block was.
        #expect(FoldTable().keptMarkClass(0x093C) == 7)
    }

    @Test func threadsFillingTheSameBlocksAtOnceAllSeeTheRules() {
        // Eight threads ask for the same scalars of untouched blocks at the same moment: whoever
        // fills a block, every thread reads complete entries, marks and multi-scalar folds.
        let table = FoldTable()
        let scalars: [UInt32] = [
            0x00DF, 0x00E9, 0x0130, 0x0345, 0x093C, 0x0929, 0x1E9E, 0x304C, 0x3099, 0xAC00, 0xFB01,
        ]
        let threads = 8
        nonisolated(unsafe) var mismatches = [Int](repeating: 0, count: threads)
        mismatches.withUnsafeMutableBufferPointer { counts in
            nonisolated(unsafe) let counts = counts
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for value in thread.isMultiple(of: 2) ? scalars : scalars.reversed() {
                    let got = Self.answer(table, value)
                    let want = Self.rule(value)
                    if got.kind != want.kind || got.folded != want.folded || got.mark != want.mark {
                        counts[thread] += 1
                    }
                }
            }
        }
        #expect(mismatches == [Int](repeating: 0, count: threads))
    }

    @Test func aTokenizerFirstMeetingABlockGivesTheSameTermsAsOneThatKnowsIt() {
        // The shared table fills as text comes; the same text tokenized again gives the same terms.
        let text = "Ärger ﬁle Straße がぎぐ क़लम Ǆemal ΰ"
        let first = terms(text)
        #expect(first == terms(text))
        #expect(first.contains("arger") && first.contains("strasse") && first.contains("file"))
    }
}
