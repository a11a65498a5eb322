import Buri
import Crypto
import CryptoExtras

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The stored encryption header, version 1 (`docs/FORMAT.md` §15): what reopening needs and a
/// key check, never the key.
///
///     "BURIKEY" (7 ASCII bytes), u8 header version = 1,
///     u8 key kind: 1 = raw 256-bit key, 2 = scrypt passphrase,
///     if kind 2: u8 logN, u8 r, u8 p, 16 B scrypt salt,
///     16 B database salt (random),
///     32 B key check
struct EncryptionHeader: Equatable {
    enum Kind: UInt8 {
        case rawKey = 1
        case passphrase = 2
    }

    static let magic: [UInt8] = Array("BURIKEY".utf8)
    static let version: UInt8 = 1
    static let saltByteCount = 16
    static let keyCheckByteCount = 32

    var kind: Kind
    /// The passphrase's scrypt cost and salt (kind 2 only).
    var cost: ScryptCost?
    var scryptSalt: [UInt8]
    var databaseSalt: [UInt8]
    var keyCheck: [UInt8]

    /// The header's length for a key kind: 57 bytes for a raw key, 76 for a passphrase.
    static func byteCount(of kind: Kind) -> Int {
        let common = magic.count + 2 + saltByteCount + keyCheckByteCount
        return kind == .passphrase ? common + 3 + saltByteCount : common
    }

    var encoded: [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.byteCount(of: kind))
        bytes.append(Self.version)
        bytes.append(kind.rawValue)
        if kind == .passphrase, let cost {
            bytes += [cost.logN, cost.r, cost.p]
            bytes += scryptSalt
        }
        bytes += databaseSalt
        bytes += keyCheck
        return bytes
    }

    /// The header stored as `bytes`.
    ///
    /// - Throws: `EncryptionFailure.malformedHeader` saying what is wrong: the magic, the
    ///   version, the key kind, the length, or a stored scrypt cost this version refuses.
    init(decoding bytes: [UInt8]) throws(EncryptionFailure) {
        let magic = Self.magic
        guard bytes.starts(with: magic.prefix(min(bytes.count, magic.count))) else {
            throw .malformedHeader(
                "the encryption header does not start with \"BURIKEY\": it is not a Buri encryption header, or it is damaged"
            )
        }
        guard bytes.count >= magic.count + 2 else {
            throw .malformedHeader(
                "the encryption header is \(bytes.count) bytes, cut short before its version and key kind")
        }
        let version = bytes[magic.count]
        guard version == Self.version else {
            throw .malformedHeader(
                "the encryption header has version \(version); this version of BuriEncryption reads version \(Self.version)"
            )
        }
        let kindByte = bytes[magic.count + 1]
        guard let kind = Kind(rawValue: kindByte) else {
            throw .malformedHeader(
                "the encryption header has the unknown key kind \(kindByte) (1 is a raw 256-bit key, 2 a passphrase)")
        }
        let expected = Self.byteCount(of: kind)
        guard bytes.count == expected else {
            throw .malformedHeader(
                "the encryption header is \(bytes.count) bytes; a version 1 header of \(kind.name) (kind \(kind.rawValue)) is \(expected) bytes"
            )
        }
        var offset = magic.count + 2
        func take(_ count: Int) -> [UInt8] {
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }
        self.kind = kind
        if kind == .passphrase {
            let cost = ScryptCost(logN: bytes[offset], r: bytes[offset + 1], p: bytes[offset + 2])
            offset += 3
            if let refusal = cost.refusal {
                throw .malformedHeader(
                    "the encryption header stores an scrypt cost this version refuses (\(cost.summary)): \(refusal)")
            }
            self.cost = cost
            scryptSalt = take(Self.saltByteCount)
        } else {
            cost = nil
            scryptSalt = []
        }
        databaseSalt = take(Self.saltByteCount)
        keyCheck = take(Self.keyCheckByteCount)
    }

    init(kind: Kind, cost: ScryptCost?, scryptSalt: [UInt8], databaseSalt: [UInt8], keyCheck: [UInt8]) {
        self.kind = kind
        self.cost = cost
        self.scryptSalt = scryptSalt
        self.databaseSalt = databaseSalt
        self.keyCheck = keyCheck
    }
}

extension EncryptionHeader.Kind {
    /// `a raw 256-bit key`, for messages.
    var name: String { self == .rawKey ? "a raw 256-bit key" : "a passphrase" }
}

/// The keys of one database, derived from its master key (the raw key, or the stretched
/// passphrase) and its random database salt with HKDF-SHA256, one label each.
package struct KeySchedule {
    /// Seals records (through a session key per cipher instance).
    let recordKey: SymmetricKey
    /// Keys the tokens of private index values.
    let tokenKey: SymmetricKey
    /// Keys the stored key check.
    let checkKey: SymmetricKey

    static let recordLabel = Array("buri v1 records".utf8)
    static let tokenLabel = Array("buri v1 tokens".utf8)
    static let checkLabel = Array("buri v1 key check".utf8)
    static let sessionLabel = Array("buri v1 session".utf8)
    static let keyCheckMessage = Array("buri key check v1".utf8)

    init(master: SymmetricKey, databaseSalt: [UInt8]) {
        func derive(_ label: [UInt8]) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: master, salt: databaseSalt, info: label, outputByteCount: 32)
        }
        recordKey = derive(Self.recordLabel)
        tokenKey = derive(Self.tokenLabel)
        checkKey = derive(Self.checkLabel)
    }

    /// The key check stored in the header: HMAC-SHA256(check key, "buri key check v1").
    var keyCheck: [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Self.keyCheckMessage, using: checkKey))
    }

    /// Whether a stored key check is this key's, compared in constant time.
    func matches(keyCheck stored: [UInt8]) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(stored, authenticating: Self.keyCheckMessage, using: checkKey)
    }

    /// The key that seals the values of one cipher session: HKDF-SHA256 of the record key with the
    /// session id as salt.
    static func sessionKey(recordKey: SymmetricKey, sessionID: UnsafeRawBufferPointer) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: recordKey, salt: sessionID, info: sessionLabel, outputByteCount: 32)
    }

    /// scrypt (RFC 7914) of `passphrase` with `salt` at `cost`, `byteCount` bytes: the one call
    /// that stretches passphrases, so the known-answer test checks the same call.
    ///
    /// The caller checks the cost (`ScryptCost.refusal`); the passphrase must not be empty.
    package static func scrypt(
        passphrase: some ContiguousBytes, salt: [UInt8], cost: ScryptCost, byteCount: Int
    )
        throws -> SymmetricKey
    {
        try passphrase.withUnsafeBytes { passphrase in
            try KDF.Scrypt.deriveKey(
                from: passphrase, salt: salt, outputByteCount: byteCount, rounds: 1 << Int(cost.logN),
                blockSize: Int(cost.r), parallelism: Int(cost.p))
        }
    }
}

/// `count` bytes from the system's secure random number generator.
func secureRandomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        var index = 0
        while index < count {
            var word = generator.next()
            let n = min(8, count - index)
            withUnsafeBytes(of: &word) { word in
                for i in 0..<n { buffer[index + i] = word[i] }
            }
            index += n
        }
        initialized = count
    }
}
