import Buri
import Crypto
import CryptoExtras

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The stored encryption header (`docs/FORMAT.md` §4a): what reopening needs, never a key.
///
/// Version 2 (written since key changes): the user's key wraps a random *data master*, which the
/// data keys are derived from, so changing the key rewrites only this header.
///
///     "BURIKEY" (7 ASCII bytes), u8 header version = 2,
///     u8 key kind: 1 = raw 256-bit key, 2 = scrypt passphrase,
///     if kind 2: u8 logN, u8 r, u8 p, 16 B scrypt salt,
///     16 B key salt (random, new at every key change),
///     16 B database salt (random, for the database's life),
///     12 B nonce (random),
///     48 B the data master sealed with AES-256-GCM (32 B ciphertext, 16 B tag) under
///          HKDF-SHA256(user master, salt: key salt, info: "buri v2 key wrap"),
///          authenticating every byte before the nonce
///
/// Version 3 (written once the data key has been rotated): as version 2, with the record-key
/// generations readable after the database salt (so a client that cannot unwrap a changed header
/// still sees whether they changed), and the record masters wrapped with the data master:
///
///     … 16 B database salt,
///     u32 BE current generation g ≥ 1, u32 BE retiring generation (0xFFFFFFFF: none; else < g),
///     12 B nonce,
///     112 B sealed (96 B plaintext, 16 B tag): 32 B data master (the token key; generation 0's
///          record key), 32 B current record master, 32 B retiring record master (zeros when
///          none, or for generation 0, whose record key comes from the data master)
///
/// Version 1 (still read): the user's key is the data master, and a key check stands where the
/// key salt and the wrapped data master are:
///
///     "BURIKEY", u8 1, u8 key kind, [u8 logN, u8 r, u8 p, 16 B scrypt salt],
///     16 B database salt, 32 B key check
struct EncryptionHeader: Equatable {
    enum Kind: UInt8 {
        case rawKey = 1
        case passphrase = 2
    }

    static let magic: [UInt8] = Array("BURIKEY".utf8)
    /// The version new headers get (a rotated data key makes it 3).
    static let version: UInt8 = 2
    /// The versions this library reads.
    static let readableVersions: ClosedRange<UInt8> = 1...3
    static let saltByteCount = 16
    static let keyCheckByteCount = 32
    static let nonceByteCount = 12
    /// The data master's 32 bytes sealed: ciphertext and a 16-byte tag.
    static let wrappedByteCount = 32 + 16

    /// The wrapped bytes of a version 2 (48) or 3 (112) header.
    static func wrappedByteCount(version: UInt8) -> Int {
        version >= 3 ? WrappedKeys.version3ByteCount + 16 : wrappedByteCount
    }

    var version: UInt8
    var kind: Kind
    /// The passphrase's scrypt cost and salt (kind 2 only).
    var cost: ScryptCost?
    var scryptSalt: [UInt8]
    /// The salt of the key-encryption key (version 2 only).
    var keySalt: [UInt8]
    var databaseSalt: [UInt8]
    /// The key check of the data master (version 1 only).
    var keyCheck: [UInt8]
    /// The nonce of the wrapped data master (version 2 only).
    var nonce: [UInt8]
    /// The wrapped data master: ciphertext then tag (version 2 only).
    var wrappedDataMaster: [UInt8]
    /// The record-key generations (version 3; generation 0 alone before).
    var generations = DataKeyGenerations(current: 0, retiring: nil)

    /// The header's length for a version and key kind: 57, 101 or 173 bytes for a raw key
    /// (version 1, 2 or 3), 76, 120 or 192 for a passphrase.
    static func byteCount(version: UInt8, kind: Kind) -> Int {
        let passphrase = kind == .passphrase ? 3 + saltByteCount : 0
        let common = magic.count + 2 + passphrase + saltByteCount
        return version == 1
            ? common + keyCheckByteCount
            : common + saltByteCount + (version >= 3 ? 8 : 0) + nonceByteCount + wrappedByteCount(version: version)
    }

    /// The header's bytes up to and including the database salt: in version 2, the associated
    /// data of the wrapped data master (every byte before the nonce), so that none of the kind,
    /// the cost or the salts can be changed without the tag failing.
    var wrappedPrefix: [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.byteCount(version: version, kind: kind))
        bytes.append(version)
        bytes.append(kind.rawValue)
        if kind == .passphrase, let cost {
            bytes += [cost.logN, cost.r, cost.p]
            bytes += scryptSalt
        }
        if version >= 2 { bytes += keySalt }
        bytes += databaseSalt
        if version >= 3 {
            for number in [generations.current, generations.retiring ?? WrappedKeys.noGeneration] {
                bytes += [
                    UInt8(number >> 24), UInt8((number >> 16) & 0xFF), UInt8((number >> 8) & 0xFF),
                    UInt8(number & 0xFF),
                ]
            }
        }
        return bytes
    }

    var encoded: [UInt8] {
        var bytes = wrappedPrefix
        if version == 1 {
            bytes += keyCheck
        } else {
            bytes += nonce
            bytes += wrappedDataMaster
        }
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
        guard Self.readableVersions.contains(version) else {
            throw .malformedHeader(
                "the encryption header has version \(version); this version of BuriEncryption reads versions 1 to 3"
            )
        }
        let kindByte = bytes[magic.count + 1]
        guard let kind = Kind(rawValue: kindByte) else {
            throw .malformedHeader(
                "the encryption header has the unknown key kind \(kindByte) (1 is a raw 256-bit key, 2 a passphrase)")
        }
        let expected = Self.byteCount(version: version, kind: kind)
        guard bytes.count == expected else {
            throw .malformedHeader(
                "the encryption header is \(bytes.count) bytes; a version \(version) header of \(kind.name) (kind \(kind.rawValue)) is \(expected) bytes"
            )
        }
        var offset = magic.count + 2
        func take(_ count: Int) -> [UInt8] {
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }
        self.version = version
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
        keySalt = version >= 2 ? take(Self.saltByteCount) : []
        databaseSalt = take(Self.saltByteCount)
        if version == 1 {
            keyCheck = take(Self.keyCheckByteCount)
            nonce = []
            wrappedDataMaster = []
        } else {
            keyCheck = []
            if version >= 3 {
                let current = take(4).reduce(0) { $0 << 8 | UInt32($1) }
                let retiring = take(4).reduce(0) { $0 << 8 | UInt32($1) }
                guard current >= 1, current != WrappedKeys.noGeneration,
                    retiring == WrappedKeys.noGeneration || retiring < current
                else {
                    throw .malformedHeader(
                        "the encryption header (version 3) names data key generation \(current) retiring \(retiring == WrappedKeys.noGeneration ? "none" : String(retiring)): a current generation is 1 or more and a retiring one older: it is damaged"
                    )
                }
                generations = DataKeyGenerations(
                    current: current, retiring: retiring == WrappedKeys.noGeneration ? nil : retiring)
            }
            nonce = take(Self.nonceByteCount)
            wrappedDataMaster = take(Self.wrappedByteCount(version: version))
        }
    }

    /// A version 1 header (its key check is filled in by the caller).
    init(kind: Kind, cost: ScryptCost?, scryptSalt: [UInt8], databaseSalt: [UInt8], keyCheck: [UInt8]) {
        version = 1
        self.kind = kind
        self.cost = cost
        self.scryptSalt = scryptSalt
        keySalt = []
        self.databaseSalt = databaseSalt
        self.keyCheck = keyCheck
        nonce = []
        wrappedDataMaster = []
    }

    /// A version 2 or 3 header (its wrapped data master is filled in by the caller).
    init(
        version: UInt8 = 2, kind: Kind, cost: ScryptCost?, scryptSalt: [UInt8], keySalt: [UInt8],
        databaseSalt: [UInt8], nonce: [UInt8]
    ) {
        self.version = version
        self.kind = kind
        self.cost = cost
        self.scryptSalt = scryptSalt
        self.keySalt = keySalt
        self.databaseSalt = databaseSalt
        keyCheck = []
        self.nonce = nonce
        wrappedDataMaster = []
    }
}

/// The wrapping of a version 2 header's data master under the user's key: AES-256-GCM under the
/// key-encryption key HKDF-SHA256(user master, salt: key salt, info: "buri v2 key wrap").
enum KeyWrap {
    static let label = Array("buri v2 key wrap".utf8)

    /// The key-encryption key of `master` (the raw key, or the stretched passphrase).
    static func keyEncryptionKey(master: SymmetricKey, keySalt: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: master, salt: keySalt, info: label, outputByteCount: 32)
    }

    /// `keys` sealed under `kek`: their bytes (32 in version 2, 104 in version 3) encrypted,
    /// then the 16-byte tag.
    static func wrap(
        _ keys: [UInt8], kek: SymmetricKey, nonce: [UInt8], associatedData: [UInt8]
    ) throws(EncryptionFailure) -> [UInt8] {
        do {
            let box = try AES.GCM.seal(
                keys, using: kek, nonce: try AES.GCM.Nonce(data: nonce), authenticating: associatedData)
            return Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw .invalidKey("the database's data key could not be wrapped with AES-256-GCM: \(error)")
        }
    }

    /// The bytes `wrapped` holds, or nil when its tag fails: another key, or a changed header.
    static func unwrap(
        _ wrapped: [UInt8], kek: SymmetricKey, nonce: [UInt8], associatedData: [UInt8]
    ) -> [UInt8]? {
        guard wrapped.count > 16,
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: nonce), ciphertext: wrapped.dropLast(16), tag: wrapped.suffix(16)),
            let opened = try? AES.GCM.open(box, using: kek, authenticating: associatedData),
            opened.count == wrapped.count - 16
        else { return nil }
        return Array(opened)
    }
}

/// What a version 2 or 3 header wraps: the data master, and the record-key generations.
struct WrappedKeys {
    /// A generation of record keys: 0 (the data master's own) or one a rotation made, with its
    /// random 32-byte record master.
    struct Generation {
        var number: UInt32
        var master: SymmetricKey?
    }

    /// The wrapped plaintext of a version 3 header.
    static let version3ByteCount = 32 * 3
    /// A retiring generation of none, as stored.
    static let noGeneration = UInt32.max

    var dataMaster: SymmetricKey
    var current: Generation
    var retiring: Generation?

    /// The keys of a version 2 header: the data master alone, generation 0.
    init(dataMaster: SymmetricKey) {
        self.init(dataMaster: dataMaster, current: Generation(number: 0, master: nil), retiring: nil)
    }

    init(dataMaster: SymmetricKey, current: Generation, retiring: Generation?) {
        self.dataMaster = dataMaster
        self.current = current
        self.retiring = retiring
    }

    /// The header version that holds these keys: 2 until a rotation, 3 after.
    var version: UInt8 { current.number == 0 && retiring == nil ? 2 : 3 }

    var generations: DataKeyGenerations { DataKeyGenerations(current: current.number, retiring: retiring?.number) }

    /// The bytes wrapped: the data master (version 2), or the version 3 layout.
    var plaintext: [UInt8] {
        var bytes = dataMaster.withUnsafeBytes { Array($0) }
        guard version == 3 else { return bytes }
        for generation in [current, retiring] {
            bytes += generation?.master?.withUnsafeBytes { Array($0) } ?? [UInt8](repeating: 0, count: 32)
        }
        return bytes
    }

    /// The keys in the unwrapped `bytes` of `header`.
    init(unwrapped bytes: [UInt8], header: EncryptionHeader) {
        dataMaster = SymmetricKey(data: bytes.prefix(32))
        guard header.version >= 3, bytes.count == Self.version3ByteCount else {
            current = Generation(number: 0, master: nil)
            retiring = nil
            return
        }
        let generations = header.generations
        current = Generation(number: generations.current, master: SymmetricKey(data: bytes[32..<64]))
        retiring = generations.retiring.map { number in
            Generation(number: number, master: number == 0 ? nil : SymmetricKey(data: bytes[64..<96]))
        }
    }
}

extension EncryptionHeader.Kind {
    /// `a raw 256-bit key`, for messages.
    var name: String { self == .rawKey ? "a raw 256-bit key" : "a passphrase" }
}

/// The keys of one database, derived from its data master and its random database salt with
/// HKDF-SHA256, one label each. The data master is the one a version 2 header wraps, or, in a
/// version 1 header, the user's master key itself (the raw key, or the stretched passphrase).
package struct KeySchedule {
    /// Seals records (through a session key per cipher instance): generation 0's record key.
    let recordKey: SymmetricKey
    /// The record keys a cipher of these keys holds: generation 0's alone, or after a rotation
    /// those the header names.
    var recordKeys: SealingCipher.RecordKeys
    /// Keys the tokens of private index values.
    let tokenKey: SymmetricKey
    /// Keys the stored key check.
    let checkKey: SymmetricKey

    static let recordLabel = Array("buri v1 records".utf8)
    static let rotatedRecordLabel = Array("buri v3 records".utf8)
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
        recordKeys = SealingCipher.RecordKeys(current: (0, recordKey), retiring: nil)
    }

    /// The keys of what a version 2 or 3 header wraps: the data master's, with the record keys of
    /// the generations named (a generation g ≥ 1 has the record key HKDF-SHA256(its record
    /// master, salt: database salt, info: "buri v3 records")).
    init(keys: WrappedKeys, databaseSalt: [UInt8]) {
        self.init(master: keys.dataMaster, databaseSalt: databaseSalt)
        let base = recordKey
        func key(_ generation: WrappedKeys.Generation) -> (UInt32, SymmetricKey) {
            guard let master = generation.master else { return (generation.number, base) }
            return (
                generation.number,
                HKDF<SHA256>.deriveKey(
                    inputKeyMaterial: master, salt: databaseSalt, info: Self.rotatedRecordLabel, outputByteCount: 32)
            )
        }
        recordKeys = SealingCipher.RecordKeys(current: key(keys.current), retiring: keys.retiring.map(key))
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
