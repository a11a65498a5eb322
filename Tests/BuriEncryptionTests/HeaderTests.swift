import Buri
import BuriEncryption
import Testing

@Suite("Encryption headers: a damaged or unknown header is refused as malformed, saying why")
struct HeaderTests {
    let rawKey = DatabaseKey.random()
    let passphraseKey: DatabaseKey
    let rawHeader: [UInt8]
    let passphraseHeader: [UInt8]

    init() throws {
        passphraseKey = try DatabaseKey(passphrase: "header tests", cost: quickCost)
        rawHeader = try rawKey.newHeader()
        passphraseHeader = try passphraseKey.newHeader()
    }

    /// The failure of unlocking `header` with `key`.
    func unlockFailure(_ key: DatabaseKey, _ header: [UInt8]) -> EncryptionFailure? {
        failure { () throws(EncryptionFailure) in try key.unlock(header: header) }
    }

    @Test func theLayoutIsVersion1() {
        #expect(rawHeader.count == 57)
        #expect(passphraseHeader.count == 76)
        #expect(Array(rawHeader.prefix(9)) == Array("BURIKEY".utf8) + [1, 1])
        #expect(Array(passphraseHeader.prefix(12)) == Array("BURIKEY".utf8) + [1, 2, 10, 8, 1])
    }

    @Test func everyTruncationIsMalformed() {
        var accepted: [String] = []
        for (key, header) in [(rawKey, rawHeader), (passphraseKey, passphraseHeader)] {
            for length in 0..<header.count
            where unlockFailure(key, Array(header.prefix(length)))?.kind != .malformedHeader {
                accepted.append("\(header.count) cut to \(length)")
            }
            #expect(unlockFailure(key, header + [0])?.kind == .malformedHeader)
        }
        #expect(accepted == [])
        #expect(
            unlockFailure(rawKey, Array(rawHeader.prefix(20)))
                == .malformedHeader(
                    "the encryption header is 20 bytes; a version 1 header of a raw 256-bit key (kind 1) is 57 bytes"))
        #expect(
            unlockFailure(rawKey, Array(rawHeader.prefix(8)))
                == .malformedHeader("the encryption header is 8 bytes, cut short before its version and key kind"))
    }

    @Test func aWrongMagicIsMalformed() {
        for position in 0..<7 {
            var header = rawHeader
            header[position] ^= 0x20
            let error = unlockFailure(rawKey, header)
            #expect(error?.kind == .malformedHeader)
            #expect(error?.description.contains("does not start with \"BURIKEY\"") == true)
        }
        #expect(unlockFailure(rawKey, Array("BURIKE".utf8) + [0x58])?.kind == .malformedHeader)
    }

    @Test func anUnknownVersionOrKindIsMalformed() {
        for version: UInt8 in [0, 2, 255] {
            var header = rawHeader
            header[7] = version
            #expect(
                unlockFailure(rawKey, header)
                    == .malformedHeader(
                        "the encryption header has version \(version); this version of BuriEncryption reads version 1"))
        }
        for kind: UInt8 in [0, 3, 255] {
            var header = rawHeader
            header[8] = kind
            #expect(
                unlockFailure(rawKey, header)
                    == .malformedHeader(
                        "the encryption header has the unknown key kind \(kind) (1 is a raw 256-bit key, 2 a passphrase)"
                    ))
        }
    }

    @Test func anAbsurdStoredScryptCostIsMalformedWithoutStretching() {
        // (offset in the header, value): logN, r and p out of range, and costs scrypt cannot run.
        let damages: [(Int, UInt8)] = [
            (9, 0), (9, 23), (9, 64), (9, 255), (10, 0), (10, 33), (10, 255), (11, 0), (11, 17), (11, 255),
        ]
        let clock = ContinuousClock()
        for (offset, value) in damages {
            var header = passphraseHeader
            header[offset] = value
            var error: EncryptionFailure?
            let elapsed = clock.measure { error = unlockFailure(passphraseKey, header) }
            #expect(error?.kind == .malformedHeader, "byte \(offset) = \(value)")
            #expect(error?.description.contains("stores an scrypt cost this version refuses") == true)
            #expect(elapsed < .seconds(1), "byte \(offset) = \(value)")
        }
        // Even for a raw key, which would not stretch: the header is damaged either way.
        var header = passphraseHeader
        header[9] = 200
        #expect(unlockFailure(rawKey, header)?.kind == .malformedHeader)
    }

    @Test func aDamagedSaltOrKeyCheckIsTheWrongKey() {
        // Every byte after the fixed fields (and the cost) feeds the key check: a change there
        // cannot be told from another key's header.
        var accepted: [String] = []
        for (key, header, firstSalt) in [(rawKey, rawHeader, 9), (passphraseKey, passphraseHeader, 12)] {
            for position in firstSalt..<header.count {
                var changed = header
                changed[position] ^= 0x01
                if unlockFailure(key, changed)?.kind != .wrongKey { accepted.append("\(header.count): \(position)") }
            }
        }
        #expect(accepted == [])
    }
}
