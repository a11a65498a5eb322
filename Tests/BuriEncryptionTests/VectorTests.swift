import Buri
import BuriEncryption
import Foundation
import Testing

// The expected hex was computed by Vectors/make_vectors.py, an independent implementation of the
// specification (Python's HMAC, a hand-written HKDF, OpenSSL's scrypt, `cryptography`'s AES-GCM),
// not by this code. Another implementation of the format can check itself against these.

/// The fixed inputs of the vectors.
enum Vector {
    static let rawKey: [UInt8] = Array(0x00...0x1F)
    static let databaseSalt = sixteen(from: 0xA0)
    static let scryptSalt = sixteen(from: 0xB0)
    static let sessionID = sixteen(from: 0xC0)
    static let passphrase = "correct horse battery staple"

    static let rawKeyHeader = bytes(
        hex: "425552494b45590101a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "5b3e5e22ae44f465e322ed1a09e8772cebd645a39a2c56f040a41f6b672f0673")
    static let rawKeyCheck = bytes(hex: "5b3e5e22ae44f465e322ed1a09e8772cebd645a39a2c56f040a41f6b672f0673")
    static let passphraseHeader = bytes(
        hex: "425552494b455901020a0801b0b1b2b3b4b5b6b7b8b9babbbcbdbebfa0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "0c74dacbe5839c0203807108293a58af6eb6925a6dba9df0be643e39ae8a731c")

    // Version 2: the data master, key salt and nonce the user's key wraps it with.
    static let dataMaster: [UInt8] = Array(0x40...0x5F)
    static let keySalt = sixteen(from: 0xD0)
    static let nonce: [UInt8] = Array(0xE0...0xEB)
    static let rawKeyHeaderV2 = bytes(
        hex: "425552494b45590201d0d1d2d3d4d5d6d7d8d9dadbdcdddedfa0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "e0e1e2e3e4e5e6e7e8e9eaeb"
            + "c423a7f018310530f4a7d27c9cad1670bbed7ee90735b338ef07726fff15cebc"
            + "8b903b7bea9391c22557ea6635594096")
    static let passphraseHeaderV2 = bytes(
        hex: "425552494b455902020a0801b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
            + "d0d1d2d3d4d5d6d7d8d9dadbdcdddedfa0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "e0e1e2e3e4e5e6e7e8e9eaeb"
            + "62858bebe1cfb7250a1df1a05f933c27281c2de1a8b968eb6ab10fd7d1b3b4ad"
            + "7e69e3a02c65e4348119e3d10427cc06")

    // Version 3: a rotation under way from generation 0 to 1, with this record master.
    static let recordMaster: [UInt8] = Array(0x60...0x7F)
    static let rawKeyHeaderV3 = bytes(
        hex: "425552494b45590301d0d1d2d3d4d5d6d7d8d9dadbdcdddedfa0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
            + "0000000100000000"
            + "e0e1e2e3e4e5e6e7e8e9eaeb"
            + "c423a7f018310530f4a7d27c9cad1670bbed7ee90735b338ef07726fff15cebc"
            + "3922a2f926c51e8d1ef6d11f265483cbb68606c8d900d6070081325d4d0e6f5d"
            + "22f9ce9cdcc95a1b1adf65f517aef182a87b13094c8efdf0f794ae5f2858efd8"
            + "b9c89ed5f0c03795dd449f166fa5953c")
}

@Suite("Known-answer vectors: scrypt, headers, sealed values and tokens match an independent implementation")
struct VectorTests {
    @Test func scryptMatchesRFC7914() throws {
        // RFC 7914 §12, the second vector, through the call that stretches passphrases.
        let key = try KeySchedule.scrypt(
            passphrase: Array("password".utf8), salt: Array("NaCl".utf8), cost: ScryptCost(logN: 10, r: 8, p: 16),
            byteCount: 64)
        #expect(
            hex(key.withUnsafeBytes { Array($0) })
                == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
                + "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640")
    }

    @Test func rawKeyHeaderIsByteExact() throws {
        let key = try DatabaseKey(bytes: Vector.rawKey)
        let header = try key.version1Header(databaseSalt: Vector.databaseSalt, scryptSalt: Vector.scryptSalt)
        #expect(hex(header) == hex(Vector.rawKeyHeader))
        #expect(header.count == 57)
        #expect(Array(header.suffix(32)) == Vector.rawKeyCheck)
        _ = try key.unlock(header: header)
    }

    @Test func passphraseHeaderIsByteExact() throws {
        let key = try DatabaseKey(passphrase: Vector.passphrase, cost: quickCost)
        let header = try key.version1Header(databaseSalt: Vector.databaseSalt, scryptSalt: Vector.scryptSalt)
        #expect(hex(header) == hex(Vector.passphraseHeader))
        #expect(header.count == 76)
        _ = try key.unlock(header: header)
    }

    @Test func rawKeyHeaderV2IsByteExact() throws {
        let key = try DatabaseKey(bytes: Vector.rawKey)
        let header = try key.newHeader(
            dataMaster: Vector.dataMaster, databaseSalt: Vector.databaseSalt, keySalt: Vector.keySalt,
            nonce: Vector.nonce, scryptSalt: Vector.scryptSalt)
        #expect(hex(header) == hex(Vector.rawKeyHeaderV2))
        #expect(header.count == 101)
        // The data keys are the data master's: its token and sealed value, as the script computes them.
        let cipher = try key.unlockCipher(header: header, sessionID: Vector.sessionID, firstCounter: 0)
        #expect(hex(cipher.token(Array("alice@example.com".utf8))) == "bf5e9ed9bd8bb8e98bb19c2409c94a8e")
        #expect(
            hex(cipher.seal([], []))
                == "e1c0c1c2c3c4c5c6c7c8c9cacbcccdcecf0000000000000000"
                + "2ad65d721f0c548c46c6230fa20dab57")
    }

    @Test func rawKeyHeaderV3AndRotatedSealedValueAreByteExact() throws {
        let key = try DatabaseKey(bytes: Vector.rawKey)
        let header = try key.rotatingHeader(
            dataMaster: Vector.dataMaster, generation: 1, recordMaster: Vector.recordMaster,
            databaseSalt: Vector.databaseSalt, keySalt: Vector.keySalt, nonce: Vector.nonce,
            scryptSalt: Vector.scryptSalt)
        #expect(hex(header) == hex(Vector.rawKeyHeaderV3))
        #expect(header.count == 173)
        #expect(key.dataKeyGenerations(ofHeader: header) == DataKeyGenerations(current: 1, retiring: 0))
        let cipher = try key.unlockCipher(header: header, sessionID: Vector.sessionID, firstCounter: 7)
        #expect(cipher.dataKeyGenerations == DataKeyGenerations(current: 1, retiring: 0))
        // The token key is the data master's, as in version 2.
        #expect(hex(cipher.token(Array("alice@example.com".utf8))) == "bf5e9ed9bd8bb8e98bb19c2409c94a8e")
        let plaintext = Array("Buri\u{0}sealed \u{2713} value".utf8)
        let associatedData: [UInt8] = [0x01] + Array("people".utf8) + [0x00] + Array("alice".utf8)
        let sealed = cipher.seal(plaintext, associatedData)
        #expect(
            hex(sealed)
                == "e200000001c0c1c2c3c4c5c6c7c8c9cacbcccdcecf0000000000000007"
                + "97786088c518eef41dd78bd799fb519384bcb59af0"
                + "57a5c73ad0cf20161c1d1cf25e1e0229")
        #expect(sealed.count == plaintext.count + 45)
        #expect(try cipher.open(sealed, associatedData) == plaintext)
        // The retiring generation 0 still opens what the version 2 header's cipher sealed.
        let v2 = try key.unlockCipher(header: Vector.rawKeyHeaderV2, sessionID: Vector.sessionID, firstCounter: 0)
        let old = v2.seal(plaintext, associatedData)
        #expect(try cipher.open(old, associatedData) == plaintext)
        // But the version 2 cipher does not hold generation 1.
        #expect(failure { () throws(EncryptionFailure) in try v2.open(sealed, associatedData) } != nil)
        // Ended, the header keeps generation 1 alone: generation 0's values no longer open.
        let ended = try key.headerEndingRotation(header)
        #expect(ended.count == 173 && Array(ended[41..<49]) == [0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF])
        let after = try key.unlock(header: ended)
        #expect(after.dataKeyGenerations == DataKeyGenerations(current: 1, retiring: nil))
        #expect(try after.open(sealed, associatedData) == plaintext)
        let refused = failure { () throws(EncryptionFailure) in try after.open(old, associatedData) }
        #expect(refused?.description.contains("generation 0") == true, "\(String(describing: refused))")
    }

    @Test func formatSpecificationShowsTheVersion2Example() throws {
        // docs/FORMAT.md §4a shows the raw key's version 2 header field by field, one row each.
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("docs/FORMAT.md").path) {
            let parent = directory.deletingLastPathComponent()
            try #require(parent.path != directory.path, "docs/FORMAT.md not found above \(#filePath)")
            directory = parent
        }
        let format = try String(contentsOf: directory.appendingPathComponent("docs/FORMAT.md"), encoding: .utf8)
        var offset = 0
        for count in [9, 16, 16, 12, 16, 16, 16] {
            let row = Vector.rawKeyHeaderV2[offset..<offset + count].map { hex([$0]) }.joined(separator: " ")
            #expect(format.contains(row), "docs/FORMAT.md lacks the row \(row)")
            offset += count
        }
        #expect(offset == Vector.rawKeyHeaderV2.count)
    }

    @Test func passphraseHeaderV2IsByteExact() throws {
        let key = try DatabaseKey(passphrase: Vector.passphrase, cost: quickCost)
        let header = try key.newHeader(
            dataMaster: Vector.dataMaster, databaseSalt: Vector.databaseSalt, keySalt: Vector.keySalt,
            nonce: Vector.nonce, scryptSalt: Vector.scryptSalt)
        #expect(hex(header) == hex(Vector.passphraseHeaderV2))
        #expect(header.count == 120)
        // The passphrase and the raw key wrap the same data master: the same data keys.
        let viaPassphrase = try key.unlock(header: header)
        let viaRawKey = try DatabaseKey(bytes: Vector.rawKey).unlock(header: Vector.rawKeyHeaderV2)
        #expect(viaPassphrase.token(Array("x".utf8)) == viaRawKey.token(Array("x".utf8)))
    }

    @Test func sealedValueIsByteExact() throws {
        let key = try DatabaseKey(bytes: Vector.rawKey)
        let cipher = try key.unlockCipher(
            header: Vector.rawKeyHeader, sessionID: Vector.sessionID, firstCounter: 0x0102_0304_0506_0708)
        let plaintext = Array("Buri\u{0}sealed \u{2713} value".utf8)
        let associatedData: [UInt8] = [0x01] + Array("people".utf8) + [0x00] + Array("alice".utf8)
        #expect(hex(plaintext) == "42757269007365616c656420e29c932076616c7565")
        #expect(hex(associatedData) == "0170656f706c6500616c696365")

        let sealed = cipher.seal(plaintext, associatedData)
        #expect(
            hex(sealed)
                == "e1c0c1c2c3c4c5c6c7c8c9cacbcccdcecf0102030405060708"
                + "b075c43d065b15f7e515b8bbb8991688fc87e4d431"
                + "56ca9478c102b36ad55e5accdacb024e")
        #expect(sealed.count == plaintext.count + 41)
        #expect(try cipher.open(sealed, associatedData) == plaintext)
        // Padded (as on LevelDB): marker 0xE9, the same ciphertext and tag, 8 zero bytes and 00 08.
        let padded = try key.unlockCipher(
            header: Vector.rawKeyHeader, sessionID: Vector.sessionID, firstCounter: 0x0102_0304_0506_0708
        ).seal(plaintext, associatedData, padding: 8)
        #expect(
            hex(padded)
                == "e9c0c1c2c3c4c5c6c7c8c9cacbcccdcecf0102030405060708"
                + "b075c43d065b15f7e515b8bbb8991688fc87e4d431"
                + "56ca9478c102b36ad55e5accdacb024e" + "00000000000000000008")
        #expect(try cipher.open(padded, associatedData) == plaintext)
        // Another instance (another process) of the same key opens it too.
        #expect(try key.unlock(header: Vector.rawKeyHeader).open(sealed, associatedData) == plaintext)
    }

    @Test func emptySealedValueIsByteExact() throws {
        let key = try DatabaseKey(bytes: Vector.rawKey)
        let cipher = try key.unlockCipher(header: Vector.rawKeyHeader, sessionID: Vector.sessionID, firstCounter: 0)
        let sealed = cipher.seal([], [])
        #expect(
            hex(sealed)
                == "e1c0c1c2c3c4c5c6c7c8c9cacbcccdcecf0000000000000000"
                + "51820d27e6fa0e01dd553d6b37fa9681")
        #expect(try cipher.open(sealed, []) == [])
    }

    @Test func tokenIsByteExact() throws {
        let cipher = try DatabaseKey(bytes: Vector.rawKey).unlock(header: Vector.rawKeyHeader)
        #expect(hex(cipher.token(Array("alice@example.com".utf8))) == "a44d456857f5a61fd35b8f39a8f2f705")
    }
}
