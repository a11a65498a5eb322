import BuriStorage
import BuriCodec
import Foundation
import LevelDB
import Testing

@testable import Buri

// MARK: - The specific cases named by the format's requirements

@Suite("Format: required cases")
struct FormatRequiredCaseTests {
    @Test("2^53+1 sorts after 9007199254740992.0 and differs from it")
    func beyondDoublePrecision() throws {
        let exact = IndexValue(Int64(9_007_199_254_740_993))
        let double = try doubleValue(9_007_199_254_740_992.0)
        #expect(exact > double)
        #expect(exact != double)
        #expect(IndexValue(Int64(9_007_199_254_740_992)) == double)
        #expect(try doubleValue(9_007_199_254_740_994.0) > exact)
        #expect(exact.decoded == .integer(9_007_199_254_740_993))
        #expect(IndexValue(UInt64.max) > (try IndexValue(Double(UInt64.max).nextDown)))
        #expect(IndexValue(UInt64.max) < (try doubleValue(0x1p64)))
    }

    @Test("20 == 20.0 and -0.0 == 0.0, byte for byte")
    func equalAcrossTypes() throws {
        #expect(IndexValue(20) == (try doubleValue(20.0)))
        #expect(IndexValue(UInt8(20)) == (try IndexValue(Float(20))))
        #expect(try doubleValue(-0.0) == IndexValue(0))
        #expect(try doubleValue(-0.0).encoded == [0x22])
        #expect(try doubleValue(-0.0).decoded == .integer(0))
        #expect(try doubleValue(20.0).decoded == .integer(20))
        #expect(try doubleValue(20.5).decoded == .double(20.5))
        #expect(IndexValue(UInt64(1) << 63).decoded == .unsigned(1 << 63))
    }

    @Test("NaN is rejected with invalidIndexValue")
    func nanRejected() {
        for nan in [Double.nan, -Double.nan, Double.signalingNaN, Double(bitPattern: 0x7FF0_0000_0000_0001)] {
            let error = #expect(throws: BuriError.self) { _ = try IndexValue(nan) }
            if case .invalidIndexValue = error {} else { Issue.record("NaN threw \(String(describing: error))") }
            #expect(throws: BuriError.self) { _ = try nan.numericIndexValue() }
        }
        #expect(throws: BuriError.self) { _ = try IndexValue(Float.nan) }
    }

    @Test("the extremes of every type order correctly")
    func extremes() throws {
        let ordered: [IndexValue] = [
            try IndexValue(-Double.infinity),
            try IndexValue(-Double.greatestFiniteMagnitude),
            try doubleValue(-0x1p64),
            IndexValue(Int64.min),
            IndexValue(Int64.min + 1),
            IndexValue(-1),
            try doubleValue(-0.5),
            try IndexValue(-Double.leastNonzeroMagnitude),
            IndexValue(0),
            try IndexValue(Double.leastNonzeroMagnitude),
            try IndexValue(Double.leastNormalMagnitude),
            try doubleValue(0.5),
            IndexValue(1),
            IndexValue(Int64.max),
            IndexValue(UInt64(Int64.max) + 1),
            IndexValue(UInt64.max),
            try doubleValue(0x1p64),
            try IndexValue(Double.greatestFiniteMagnitude),
            try IndexValue(Double.infinity),
            IndexValue(bytes: []),
            IndexValue(bytes: [0x00]),
            IndexValue(bytes: [0x00, 0x00]),
            IndexValue(bytes: [0x00, 0x01]),
            IndexValue(bytes: [0x01]),
            IndexValue(bytes: [0xFF]),
            IndexValue(bytes: [0xFF, 0xFF]),
        ]
        for (a, b) in zip(ordered, ordered.dropFirst()) { #expect(a < b, "\(a) < \(b)") }
        #expect(IndexValue(Int64.min).decoded == .integer(.min))
        #expect(IndexValue(Int64.max).decoded == .integer(.max))
        #expect(IndexValue(UInt64.max).decoded == .unsigned(.max))
        #expect(try doubleValue(-0x1p63) == IndexValue(Int64.min))
        #expect(try doubleValue(-0x1p64).decoded == .double(-0x1p64))
    }
}
