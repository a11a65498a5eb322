import Buri
import BuriEncryption
import Testing

@Suite("Tampering: a changed, cut, moved or foreign sealed value fails its authentication")
struct TamperTests {
    let key = DatabaseKey.random()
    let header: [UInt8]
    let cipher: any DatabaseCipher
    let plaintext = Array("alice".utf8)
    let associatedData = Array("\u{1}people\u{0}alice".utf8)
    let sealed: [UInt8]

    init() throws {
        header = try key.newHeader()
        cipher = try key.unlock(header: header)
        sealed = cipher.seal(plaintext, associatedData)
    }

    /// The kinds of failure opening `value` gives (nil where it opened).
    func outcome(_ value: [UInt8], _ associatedData: [UInt8]? = nil) -> FailureKind? {
        failure { () throws(EncryptionFailure) in try cipher.open(value, associatedData ?? self.associatedData) }?.kind
    }

    @Test func theUntouchedValueOpens() throws {
        #expect(try cipher.open(sealed, associatedData) == plaintext)
    }

    /// `cipher.seal` with `padding` zero bytes after the tag.
    func padded(_ padding: Int) -> [UInt8] {
        plaintext.withUnsafeBytes { plaintext in
            associatedData.withUnsafeBytes { cipher.seal(plaintext, associatedData: $0, padding: padding) }
        }
    }

    @Test func paddedValuesOpenAndAnyChangeToTheirPaddingFails() throws {
        for padding in [1, 2, 7, 8, 64, 300] {
            let value = padded(padding)
            #expect(value.count == sealed.count + padding + 2)
            #expect(value.first == sealedValueMarker | paddedSealedValueFlag)
            #expect(Array(value.suffix(2)) == [UInt8(padding >> 8), UInt8(padding & 0xFF)])
            #expect(value.dropLast(2).suffix(padding).allSatisfy { $0 == 0 })
            #expect(try cipher.open(value, associatedData) == plaintext, "padding \(padding)")
            #expect(value.withUnsafeBytes { sealedGeneration(of: $0) } == 0)
            // Every bit of every byte, padding and its count included: refused.
            var opened: [String] = []
            for position in value.indices {
                for bit in 0..<8 {
                    var changed = value
                    changed[position] ^= 1 << bit
                    if outcome(changed) != .authenticationFailed { opened.append("byte \(position) bit \(bit)") }
                }
            }
            #expect(opened == [], "padding \(padding)")
            // Cut anywhere: refused.
            for count in 0..<value.count where outcome(Array(value.prefix(count))) != .authenticationFailed {
                Issue.record("padding \(padding), cut to \(count) bytes, did not fail")
            }
            // The padding dropped, the flag kept; or the flag dropped, the padding kept: refused.
            #expect(outcome(Array(value.dropLast(padding + 2))) == .authenticationFailed)
            var unflagged = value
            unflagged[0] = sealedValueMarker
            #expect(outcome(unflagged) == .authenticationFailed)
        }
        // The flag removed with the padding gives the unpadded value, which opens: the padding is
        // outside what the tag authenticates, and says nothing.
        var stripped = Array(padded(16).dropLast(18))
        stripped[0] = sealedValueMarker
        #expect(try cipher.open(stripped, associatedData) == plaintext)
    }

    @Test func flippingAnyBitOfAnyByteFails() {
        #expect(sealed.count == 46)
        var opened: [String] = []
        for position in sealed.indices {
            for bit in 0..<8 {
                var changed = sealed
                changed[position] ^= 1 << bit
                if outcome(changed) != .authenticationFailed { opened.append("byte \(position) bit \(bit)") }
            }
        }
        #expect(opened == [])
    }

    @Test func cuttingAtEveryLengthFails() {
        var opened: [Int] = []
        for length in 0..<sealed.count where outcome(Array(sealed.prefix(length))) != .authenticationFailed {
            opened.append(length)
        }
        #expect(opened == [])
        // Cut from the front as well, and a byte added at the end.
        #expect(outcome(Array(sealed.dropFirst())) == .authenticationFailed)
        #expect(outcome(sealed + [0]) == .authenticationFailed)
    }

    @Test func shortAndUnmarkedValuesSayWhy() {
        guard
            case .authenticationFailed(let short) = failure({ () throws(EncryptionFailure) in try cipher.open([0xE1]) })
        else {
            Issue.record("a 1-byte value did not fail its authentication")
            return
        }
        #expect(short.contains("cut short"))
        var unmarked = sealed
        unmarked[0] = 0x01
        guard
            case .authenticationFailed(let message) = failure({ () throws(EncryptionFailure) in
                try cipher.open(unmarked, associatedData)
            })
        else {
            Issue.record("an unmarked value did not fail its authentication")
            return
        }
        #expect(message.contains("marker"))
    }

    @Test func otherAssociatedDataFails() {
        // The value copied to another key or bucket.
        #expect(outcome(sealed, []) == .authenticationFailed)
        #expect(outcome(sealed, Array("\u{1}people\u{0}alicf".utf8)) == .authenticationFailed)
        #expect(outcome(sealed, Array("\u{1}people\u{0}alic".utf8)) == .authenticationFailed)
        #expect(outcome(sealed, associatedData + [0]) == .authenticationFailed)
        #expect(outcome(sealed, [sealedValueMarker] + associatedData) == .authenticationFailed)
        // A value sealed with no associated data does not open with some.
        let bare = cipher.seal(plaintext)
        #expect(outcome(bare, [0]) == .authenticationFailed)
        #expect(outcome(bare, []) == nil)
    }

    @Test func aValueOfAnotherDatabaseOrKeyFails() throws {
        // The same key, another database: another salt, so other record keys.
        let otherDatabase = try key.unlock(header: try key.newHeader())
        #expect(outcome(otherDatabase.seal(plaintext, associatedData)) == .authenticationFailed)
        let error = failure { () throws(EncryptionFailure) in try otherDatabase.open(sealed, associatedData) }
        #expect(error?.kind == .authenticationFailed)
        #expect(error?.description.contains("another key, bucket or database") == true)
        // Another key.
        let otherKey = DatabaseKey.random()
        let foreign = try otherKey.unlock(header: try otherKey.newHeader())
        #expect(outcome(foreign.seal(plaintext, associatedData)) == .authenticationFailed)
    }

    @Test func aValueMovedToAnotherSessionOrCounterFails() {
        let second = cipher.seal(plaintext, associatedData)
        // The ciphertext and tag of one value with the other's session id and counter.
        let spliced = Array(second[0..<25]) + Array(sealed[25...])
        #expect(outcome(spliced) == .authenticationFailed)
    }

    @Test func errorsHoldNoPlaintext() {
        let secret = Array("top secret words".utf8)
        var changed = cipher.seal(secret, associatedData)
        changed[30] ^= 0xFF
        let error = failure { () throws(EncryptionFailure) in try cipher.open(changed, associatedData) }
        #expect(error?.kind == .authenticationFailed)
        #expect(error?.description.contains("secret") == false)
    }
}
