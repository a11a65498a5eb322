import Buri
import BuriEncryption
import BuriTestBasics
import Foundation
import Testing

@Suite("Keys: raw keys, key files, passphrases and passphrase files; the wrong one is refused")
struct KeyTests {
    let directory = TemporaryDirectory("buri-encryption-tests")

    /// The failure of unlocking `header` with `key`, or nil when it unlocks.
    func unlockFailure(_ key: DatabaseKey, _ header: [UInt8]) -> EncryptionFailure? {
        failure { () throws(EncryptionFailure) in try key.unlock(header: header) }
    }

    /// Whether `key` unlocks `header` and opens what `writer` sealed under it.
    func opens(_ key: DatabaseKey, headerOf writer: DatabaseKey, cost: ScryptCost? = nil) throws -> Bool {
        let header = try writer.newHeader()
        let sealed = try writer.unlock(header: header).seal(Array("value".utf8), [1])
        guard let cipher = try? key.unlock(header: header) else { return false }
        return (try? cipher.open(sealed, [1])) == Array("value".utf8)
    }

    // MARK: Raw keys

    @Test func aRawKeyIsExactly32Bytes() throws {
        _ = try DatabaseKey(bytes: [UInt8](repeating: 7, count: 32))
        _ = try DatabaseKey(bytes: (0..<32).map { UInt8($0) }[...])
        for count in [0, 16, 31, 33, 64] {
            let error = failure { () throws(EncryptionFailure) in
                try DatabaseKey(bytes: [UInt8](repeating: 1, count: count))
            }
            #expect(error?.kind == .invalidKey)
            #expect(error?.description.contains("this one is \(count) bytes") == true)
        }
    }

    @Test func theWrongRawKeyIsRefusedByTheWrappedDataKeyOrTheKeyCheck() throws {
        let header = try DatabaseKey.random().newHeader()
        let error = unlockFailure(DatabaseKey.random(), header)
        #expect(error?.kind == .wrongKey)
        #expect(error?.description.hasPrefix("the key does not unwrap this database's data key") == true)
        // A version 1 header (format 8 before key changes) checks its key check.
        let old = try DatabaseKey.random().version1Header(databaseSalt: sixteen(from: 1), scryptSalt: sixteen(from: 2))
        let oldError = unlockFailure(DatabaseKey.random(), old)
        #expect(oldError?.kind == .wrongKey)
        #expect(oldError?.description.hasPrefix("the key does not match this database's key check") == true)
        // One bit off.
        var bytes = [UInt8](repeating: 0x5A, count: 32)
        let right = try DatabaseKey(bytes: bytes)
        bytes[31] ^= 1
        #expect(unlockFailure(try DatabaseKey(bytes: bytes), try right.newHeader())?.kind == .wrongKey)
    }

    @Test func randomKeysDiffer() throws {
        #expect(try !opens(DatabaseKey.random(), headerOf: DatabaseKey.random()))
        let key = DatabaseKey.random()
        #expect(try opens(key, headerOf: key))
        #expect(key.rawKeyBytes?.count == 32)
        #expect(key.rawKeyBytes != DatabaseKey.random().rawKeyBytes)
    }

    @Test func everyNewHeaderHasItsOwnSalt() throws {
        let key = DatabaseKey.random()
        let first = try key.newHeader()
        let second = try key.newHeader()
        #expect(first != second)
        #expect(first[9..<25] != second[9..<25])
    }

    // MARK: Key files

    @Test func aKeyFileOf32BytesIsThatKey() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 & 0xFF) }
        let path = directory.path("good.key")
        try write(bytes, to: path)
        let fromFile = try DatabaseKey(contentsOfFile: path)
        #expect(try opens(fromFile, headerOf: try DatabaseKey(bytes: bytes)))
        #expect(try opens(try DatabaseKey(bytes: bytes), headerOf: fromFile))
        #expect(fromFile.rawKeyBytes == bytes)
    }

    @Test func keyFilesOfAnotherLengthAreRefusedNamingThePath() throws {
        for count in [0, 31, 33] {
            let path = directory.path("key-\(count).key")
            try write([UInt8](repeating: 0xC3, count: count), to: path)
            let error = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: path) }
            #expect(error?.kind == .invalidKey)
            #expect(
                error?.description
                    == "the key file '\(path)' is \(count) bytes; a key file holds exactly 32 random bytes, e.g. `head -c 32 /dev/urandom > FILE`"
            )
        }
    }

    @Test func aMissingKeyFileOrADirectoryIsRefusedNamingThePath() throws {
        let missing = directory.path("missing.key")
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: missing) }
        #expect(error?.kind == .invalidKey)
        #expect(error?.description == "the key file '\(missing)' does not exist")

        let folder = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: directory.path) }
        #expect(folder?.kind == .invalidKey)
        #expect(folder?.description.contains("'\(directory.path)'") == true)
        #expect(folder?.description.contains("directory") == true)
    }

    @Test func anUnreadableKeyFileIsRefusedNamingThePath() throws {
        guard getuid() != 0 else { return }  // root reads everything
        let path = directory.path("locked.key")
        try write([UInt8](repeating: 1, count: 32), to: path)
        chmod(path, 0o000)
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: path) }
        #expect(error?.kind == .invalidKey)
        #expect(error?.description.contains("'\(path)' cannot be opened") == true)
    }

    @Test func aTextKeyFileGetsAHint() throws {
        let path = directory.path("hex.key")
        try write(Array((String(repeating: "ab", count: 32) + "\n").utf8), to: path)
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: path) }
        #expect(error?.kind == .invalidKey)
        #expect(error?.description.contains("is 65 bytes") == true)
        #expect(error?.description.contains("hex or base64") == true)
    }

    @Test func aHugeKeyFileIsNotReadWhole() throws {
        let path = directory.path("huge.key")
        try write([UInt8](repeating: 0, count: 1 << 20), to: path)
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(contentsOfFile: path) }
        #expect(error?.description.contains("is larger than 4096 bytes") == true)
    }

    // MARK: Passphrases

    @Test func aPassphraseOpensWhatItSealedAndAnotherDoesNot() throws {
        let key = try DatabaseKey(passphrase: "correct horse battery staple", cost: quickCost)
        #expect(try opens(try DatabaseKey(passphrase: "correct horse battery staple", cost: quickCost), headerOf: key))
        let header = try key.newHeader()
        let error = unlockFailure(try DatabaseKey(passphrase: "correct horse battery stapler", cost: quickCost), header)
        #expect(error?.kind == .wrongKey)
        #expect(
            error?.description
                == "the key does not unwrap this database's data key: it is not the passphrase the database was encrypted with (or, after a key change, changed to)"
        )
    }

    @Test func theEmptyPassphraseIsRefused() {
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(passphrase: "") }
        #expect(error == .invalidKey("the passphrase is empty"))
    }

    @Test func canonicallyEqualPassphrasesWithOtherBytesAreOtherKeys() throws {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)  // Swift calls them equal...
        #expect(Array(composed.utf8) != Array(decomposed.utf8))  // ...but their bytes differ
        let header = try DatabaseKey(passphrase: composed, cost: quickCost).newHeader()
        #expect(unlockFailure(try DatabaseKey(passphrase: decomposed, cost: quickCost), header)?.kind == .wrongKey)
        #expect(unlockFailure(try DatabaseKey(passphrase: composed, cost: quickCost), header) == nil)
    }

    @Test func unlockUsesTheStoredCostNotTheKeys() throws {
        let header = try DatabaseKey(passphrase: "pass phrase", cost: quickCost).newHeader()
        #expect(Array(header[9..<12]) == [10, 8, 1])
        // A key made with another cost opens it: stretched at its own cost, the key check would fail.
        _ = try DatabaseKey(passphrase: "pass phrase", cost: ScryptCost(logN: 11, r: 8, p: 1)).unlock(header: header)
        let other = ScryptCost(logN: 11, r: 4, p: 2)
        let header2 = try DatabaseKey(passphrase: "pass phrase", cost: other).newHeader()
        #expect(Array(header2[9..<12]) == [11, 4, 2])
        _ = try DatabaseKey(passphrase: "pass phrase", cost: quickCost).unlock(header: header2)
    }

    @Test func costsScryptCannotRunOrTooLargeAreRefused() throws {
        let refused = [
            ScryptCost(logN: 0, r: 8, p: 1), ScryptCost(logN: 23, r: 8, p: 1), ScryptCost(logN: 10, r: 0, p: 1),
            ScryptCost(logN: 10, r: 33, p: 2), ScryptCost(logN: 10, r: 8, p: 0), ScryptCost(logN: 10, r: 8, p: 17),
            ScryptCost(logN: 16, r: 1, p: 1), ScryptCost(logN: 10, r: 17, p: 1),
            // Over 1 GiB: 128 × 8 × 2^21 is 2 GiB, 128 × 32 × 2^19 too.
            ScryptCost(logN: 21, r: 8, p: 1), ScryptCost(logN: 19, r: 32, p: 2), ScryptCost(logN: 22, r: 8, p: 1),
        ]
        for cost in refused {
            let error = failure { () throws(EncryptionFailure) in try DatabaseKey(passphrase: "pass", cost: cost) }
            #expect(error?.kind == .invalidKey, "\(cost)")
        }
        // The edges that are accepted run.
        for cost in [
            ScryptCost(logN: 10, r: 16, p: 1), ScryptCost(logN: 8, r: 32, p: 2), ScryptCost(logN: 15, r: 1, p: 1),
        ] {
            // (logN 20 with r 8, exactly 1 GiB, is accepted too; not run here for its time.)
            let key = try DatabaseKey(passphrase: "pass", cost: cost)
            #expect(try opens(key, headerOf: key), "\(cost)")
        }
    }

    // MARK: Passphrase files

    @Test func aPassphraseFileLosesOneTrailingLineBreak() throws {
        let header = try DatabaseKey(passphrase: "open sesame", cost: quickCost).newHeader()
        for contents in ["open sesame", "open sesame\n", "open sesame\r\n"] {
            let path = directory.path("phrase-\(contents.utf8.count)")
            try write(Array(contents.utf8), to: path)
            #expect(unlockFailure(try DatabaseKey(passphraseFile: path, cost: quickCost), header) == nil)
        }
        // Only one: a second line break, a lone carriage return or a trailing space is kept.
        for contents in ["open sesame\n\n", "open sesame\r", "open sesame \n", "open sesame\n\r\n"] {
            let path = directory.path("other-\(contents.utf8.count)-\(contents.utf8.last!)")
            try write(Array(contents.utf8), to: path)
            let key = try DatabaseKey(passphraseFile: path, cost: quickCost)
            #expect(unlockFailure(key, header)?.kind == .wrongKey, "\(Array(contents.utf8))")
        }
        // And the same file twice is the same key.
        let path = directory.path("twice")
        try write(Array("open sesame\n\n".utf8), to: path)
        let twice = try DatabaseKey(passphraseFile: path, cost: quickCost)
        #expect(try opens(try DatabaseKey(passphrase: "open sesame\n", cost: quickCost), headerOf: twice))
    }

    @Test func anEmptyMissingOrBinaryPassphraseFileIsRefusedNamingThePath() throws {
        for contents: [UInt8] in [[], [0x0A], [0x0D, 0x0A]] {
            let path = directory.path("empty-\(contents.count)")
            try write(contents, to: path)
            let error = failure { () throws(EncryptionFailure) in try DatabaseKey(passphraseFile: path) }
            #expect(
                error
                    == .invalidKey(
                        "the passphrase file '\(path)' holds no passphrase: it is empty or only a line break"))
        }
        let missing = directory.path("no-such-passphrase")
        let error = failure { () throws(EncryptionFailure) in try DatabaseKey(passphraseFile: missing) }
        #expect(error == .invalidKey("the passphrase file '\(missing)' does not exist"))

        let binary = directory.path("binary")
        try write([0x70, 0xFF, 0xFE, 0x71], to: binary)
        let notText = failure { () throws(EncryptionFailure) in try DatabaseKey(passphraseFile: binary) }
        #expect(notText == .invalidKey("the passphrase file '\(binary)' is not UTF-8 text"))
    }

    // MARK: Kinds

    @Test func aPassphraseDoesNotOpenARawKeyDatabaseNorTheOtherWay() throws {
        let rawHeader = try DatabaseKey.random().newHeader()
        let passphraseKey = try DatabaseKey(passphrase: "a passphrase", cost: quickCost)
        #expect(
            unlockFailure(passphraseKey, rawHeader)
                == .wrongKey(
                    "this database was encrypted with a raw 256-bit key (a key file); give the key file, not a passphrase"
                ))
        let passphraseHeader = try passphraseKey.newHeader()
        #expect(
            unlockFailure(DatabaseKey.random(), passphraseHeader)
                == .wrongKey("this database was encrypted with a passphrase; give the passphrase, not a key file"))
    }

    // MARK: Descriptions

    @Test func descriptionsShowNoKeyMaterial() throws {
        let bytes = (0..<32).map { UInt8(0xA0 + $0 % 16) }
        let raw = try DatabaseKey(bytes: bytes)
        let phrase = try DatabaseKey(passphrase: "hunter2 is my passphrase", cost: quickCost)
        #expect(raw.description == "DatabaseKey(raw 256-bit key, redacted)")
        #expect(phrase.description == "DatabaseKey(passphrase, scrypt logN 10, r 8, p 1, redacted)")
        struct Options { var encryption: any DatabaseEncryption }
        for key in [raw, phrase] {
            var dumped = ""
            dump(Options(encryption: key), to: &dumped)
            let shown = [
                String(describing: key), String(reflecting: key), "\(key)", "\([key])",
                String(describing: Options(encryption: key)),
                dumped,
            ]
            for text in shown {
                #expect(!text.contains("hunter2"), "\(text)")
                #expect(!text.lowercased().contains("a0a1a2"), "\(text)")
                #expect(!text.contains("160, 161"), "\(text)")
                #expect(text.contains("redacted"), "\(text)")
            }
        }
    }
}
