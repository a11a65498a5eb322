import Buri
import BuriEncryption
import Testing

@Suite("Encryption headers: a damaged or unknown header is refused as malformed, saying why")
struct HeaderTests {
    let rawKey = DatabaseKey.random()
    let passphraseKey: DatabaseKey
    let rawHeader: [UInt8]
    let passphraseHeader: [UInt8]
    /// Version 1 headers, as format 8 wrote them before key changes: still read.
    let rawHeaderV1: [UInt8]
    let passphraseHeaderV1: [UInt8]

    init() throws {
        passphraseKey = try DatabaseKey(passphrase: "header tests", cost: quickCost)
        rawHeader = try rawKey.newHeader()
        passphraseHeader = try passphraseKey.newHeader()
        rawHeaderV1 = try rawKey.version1Header(databaseSalt: sixteen(from: 0x10), scryptSalt: sixteen(from: 0x20))
        passphraseHeaderV1 = try passphraseKey.version1Header(
            databaseSalt: sixteen(from: 0x10), scryptSalt: sixteen(from: 0x20))
    }

    /// Every header with its key, version 2 then version 1, and where its salts start.
    var everyHeader: [(key: DatabaseKey, header: [UInt8], firstSalt: Int)] {
        [
            (rawKey, rawHeader, 9), (passphraseKey, passphraseHeader, 12), (rawKey, rawHeaderV1, 9),
            (passphraseKey, passphraseHeaderV1, 12),
        ]
    }

    /// The failure of unlocking `header` with `key`.
    func unlockFailure(_ key: DatabaseKey, _ header: [UInt8]) -> EncryptionFailure? {
        failure { () throws(EncryptionFailure) in try key.unlock(header: header) }
    }

    @Test func newHeadersAreVersion2AndVersion1StillOpens() throws {
        #expect(rawHeader.count == 101)
        #expect(passphraseHeader.count == 120)
        #expect(Array(rawHeader.prefix(9)) == Array("BURIKEY".utf8) + [2, 1])
        #expect(Array(passphraseHeader.prefix(12)) == Array("BURIKEY".utf8) + [2, 2, 10, 8, 1])
        #expect(rawHeaderV1.count == 57)
        #expect(passphraseHeaderV1.count == 76)
        #expect(Array(rawHeaderV1.prefix(9)) == Array("BURIKEY".utf8) + [1, 1])
        #expect(Array(passphraseHeaderV1.prefix(12)) == Array("BURIKEY".utf8) + [1, 2, 10, 8, 1])
        for (key, header, _) in everyHeader { _ = try key.unlock(header: header) }
    }

    @Test func everyTruncationIsMalformed() {
        var accepted: [String] = []
        for (key, header, _) in everyHeader {
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
                    "the encryption header is 20 bytes; a version 2 header of a raw 256-bit key (kind 1) is 101 bytes"))
        #expect(
            unlockFailure(rawKey, Array(rawHeaderV1.prefix(20)))
                == .malformedHeader(
                    "the encryption header is 20 bytes; a version 1 header of a raw 256-bit key (kind 1) is 57 bytes"))
        // A version 1 header's length read as version 2, and the other way: malformed.
        var relabelled = rawHeaderV1
        relabelled[7] = 2
        #expect(unlockFailure(rawKey, relabelled)?.kind == .malformedHeader)
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
        for version: UInt8 in [0, 4, 255] {
            var header = rawHeader
            header[7] = version
            #expect(
                unlockFailure(rawKey, header)
                    == .malformedHeader(
                        "the encryption header has version \(version); this version of BuriEncryption reads versions 1 to 3"
                    ))
        }
        // A version 3 header is longer: a version 2 header's bytes marked 3 are refused by length.
        var marked = rawHeader
        marked[7] = 3
        #expect(
            unlockFailure(rawKey, marked)
                == .malformedHeader(
                    "the encryption header is \(marked.count) bytes; a version 3 header of a raw 256-bit key (kind 1) is 173 bytes"
                ))
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
        var headerV1 = passphraseHeaderV1
        headerV1[9] = 200
        #expect(unlockFailure(passphraseKey, headerV1)?.kind == .malformedHeader)
    }

    @Test func aDamagedSaltNonceWrappedKeyOrKeyCheckIsTheWrongKey() {
        // Every byte after the fixed fields (and the cost) is authenticated by the wrapped data
        // key's tag (version 2) or feeds the key check (version 1): a change there cannot be told
        // from another key's header.
        var accepted: [String] = []
        for (key, header, firstSalt) in everyHeader {
            for position in firstSalt..<header.count {
                var changed = header
                changed[position] ^= 0x01
                if unlockFailure(key, changed)?.kind != .wrongKey { accepted.append("\(header.count): \(position)") }
            }
        }
        #expect(accepted == [])
    }
}
