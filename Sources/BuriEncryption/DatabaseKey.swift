import Buri
import Crypto

/// The key of an encrypted database: a raw 256-bit key (from a key file, or bytes the app keeps in
/// a keychain), or a passphrase stretched with scrypt. Set it as Buri's `BuriOptions.encryption`
/// to create or open an encrypted database.
///
/// Records are sealed with AES-256-GCM under keys derived (HKDF-SHA256) from the database's random
/// data master and salt; the database's encryption header stores the data master wrapped under
/// this key, the salts and the passphrase's scrypt cost, never this key (`docs/FORMAT.md` §4a).
/// A wrong key is refused before anything is read or written. The key can be changed without
/// rewriting the data (Buri's `BuriDatabase.changeEncryptionKey(to:)`, `buri rekey`).
///
/// ```swift
/// import Buri
/// import BuriEncryption
///
/// var options = BuriOptions()
/// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")   // head -c 32 /dev/urandom > notes.key
/// let db = try BuriDatabase(path: "notes.buri", options: options)
/// ```
///
/// Its `description` and `debugDescription` say which kind of key it is and never show the key.
public struct DatabaseKey: DatabaseEncryption, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    enum Material: Sendable {
        /// The master key itself.
        case rawKey(SymmetricKey)
        /// The passphrase's UTF-8 bytes (kept in swift-crypto's zeroed storage) and the scrypt
        /// cost of new databases.
        case passphrase(SymmetricKey, ScryptCost)
    }

    let material: Material

    /// The byte count of a raw key and of a key file: 256 bits.
    static let rawKeyByteCount = 32
    /// The largest passphrase file read.
    static let passphraseFileLimit = 64 * 1024

    /// A raw 256-bit key: exactly 32 bytes, as random as the system's generator makes them.
    ///
    /// ```swift
    /// let bytes: [UInt8] = try keychain.databaseKey()   // 32 bytes the app stored
    /// options.encryption = try DatabaseKey(bytes: bytes)
    /// ```
    ///
    /// - Throws: `EncryptionFailure.invalidKey` naming the length when there are not exactly
    ///   32 bytes.
    public init(bytes: some Collection<UInt8>) throws(EncryptionFailure) {
        guard bytes.count == Self.rawKeyByteCount else {
            throw .invalidKey(
                "a raw database key is exactly \(Self.rawKeyByteCount) bytes (256 bits); this one is \(bytes.count) bytes"
            )
        }
        material = .rawKey(SymmetricKey(data: Array(bytes)))
    }

    /// The raw 256-bit key in a key file, which holds exactly 32 random bytes (not hex, not text).
    ///
    /// ```swift
    /// // head -c 32 /dev/urandom > notes.key
    /// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")
    /// ```
    ///
    /// - Throws: `EncryptionFailure.invalidKey` naming the path and what is wrong: the file
    ///   is missing or cannot be read, or it is not 32 bytes long.
    public init(contentsOfFile path: String) throws(EncryptionFailure) {
        let limit = 4096
        let bytes = try readKeyMaterial(at: path, what: "key file", limit: limit)
        guard bytes.count == Self.rawKeyByteCount else {
            let size = bytes.count > limit ? "larger than \(limit) bytes" : "\(bytes.count) bytes"
            // A hex or base64 key (with its line break) is the likely mistake: say so.
            let looksLikeText =
                bytes.count > Self.rawKeyByteCount
                && bytes.allSatisfy { (0x20...0x7E).contains($0) || $0 == 0x0A || $0 == 0x0D }
            let hint = looksLikeText ? " (this one looks like text: hex or base64 must be decoded first)" : ""
            throw .invalidKey(
                "the key file '\(path)' is \(size); a key file holds exactly \(Self.rawKeyByteCount) random bytes, e.g. `head -c 32 /dev/urandom > FILE`\(hint)"
            )
        }
        material = .rawKey(SymmetricKey(data: bytes))
    }

    /// A passphrase, stretched with scrypt at `cost` and the database's random salt when a
    /// database is created or opened (not here: the salt is in the database).
    ///
    /// The passphrase is the UTF-8 of the string exactly as given, not normalised: two strings
    /// Swift calls equal but whose bytes differ (`"\u{E9}"` and `"e\u{301}"`, both "é") are
    /// different keys. An app that takes passphrases from several keyboards or systems should
    /// normalise them itself, the same way every time.
    ///
    /// ```swift
    /// options.encryption = try DatabaseKey(passphrase: "correct horse battery staple")
    /// ```
    ///
    /// - Parameter cost: the scrypt cost of a database created with this key; an existing
    ///   database is opened with the cost stored in it.
    /// - Throws: `EncryptionFailure.invalidKey` for an empty passphrase or a cost that cannot
    ///   be used (see ``ScryptCost``).
    public init(passphrase: String, cost: ScryptCost = .default) throws(EncryptionFailure) {
        guard !passphrase.isEmpty else { throw .invalidKey("the passphrase is empty") }
        try self.init(passphraseBytes: Array(passphrase.utf8), cost: cost)
    }

    /// The passphrase in a text file: its UTF-8 text with one trailing line break (`"\n"` or
    /// `"\r\n"`) removed, so that `echo "…" > FILE` and editors' files work. Any other space is part
    /// of the passphrase, and it is not normalised (see ``init(passphrase:cost:)``).
    ///
    /// ```swift
    /// options.encryption = try DatabaseKey(passphraseFile: "/run/secrets/notes-passphrase")
    /// ```
    ///
    /// - Throws: `EncryptionFailure.invalidKey` naming the path when the file is missing or
    ///   unreadable, not UTF-8, larger than 64 KiB, or holds no passphrase; or for a cost that
    ///   cannot be used.
    public init(passphraseFile path: String, cost: ScryptCost = .default) throws(EncryptionFailure) {
        var bytes = try readKeyMaterial(at: path, what: "passphrase file", limit: Self.passphraseFileLimit)
        guard bytes.count <= Self.passphraseFileLimit else {
            throw .invalidKey(
                "the passphrase file '\(path)' is larger than \(Self.passphraseFileLimit) bytes; it holds one passphrase"
            )
        }
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw .invalidKey("the passphrase file '\(path)' is not UTF-8 text")
        }
        if bytes.last == 0x0A {
            bytes.removeLast()
            if bytes.last == 0x0D { bytes.removeLast() }
        }
        guard !bytes.isEmpty else {
            throw .invalidKey("the passphrase file '\(path)' holds no passphrase: it is empty or only a line break")
        }
        try self.init(passphraseBytes: bytes, cost: cost)
    }

    /// A passphrase key of `bytes` (not empty) at `cost`, checked.
    init(passphraseBytes bytes: [UInt8], cost: ScryptCost) throws(EncryptionFailure) {
        if let refusal = cost.refusal {
            throw .invalidKey("the scrypt cost \(cost.summary) cannot be used: \(refusal)")
        }
        material = .passphrase(SymmetricKey(data: bytes), cost)
    }

    private init(material: Material) {
        self.material = material
    }

    /// The 32 bytes of a raw key (nil for a passphrase), for the tool to write a key file that
    /// `random()` made. Not public: an app that holds its key's bytes already has them.
    package var rawKeyBytes: [UInt8]? {
        guard case .rawKey(let key) = material else { return nil }
        return key.withUnsafeBytes { Array($0) }
    }

    /// A new raw 256-bit key of 32 bytes from the system's secure random number generator: for
    /// tests, and for `buri`'s key generation.
    ///
    /// ```swift
    /// let key = DatabaseKey.random()
    /// options.encryption = key
    /// ```
    public static func random() -> DatabaseKey {
        DatabaseKey(material: .rawKey(SymmetricKey(size: .bits256)))
    }

    /// The encryption header of a new database (version 2): a new random data master, which the
    /// data keys are derived from, wrapped under this key with new random salts (and, for a
    /// passphrase, this key's cost). Buri calls it when it creates an encrypted database.
    ///
    /// ```swift
    /// let header = try DatabaseKey.random().newHeader()   // 101 bytes for a raw key
    /// ```
    ///
    /// - Throws: `EncryptionFailure.invalidKey` when scrypt cannot stretch the passphrase.
    public func newHeader() throws(EncryptionFailure) -> [UInt8] {
        try wrappedHeader(
            keys: WrappedKeys(dataMaster: SymmetricKey(size: .bits256)),
            databaseSalt: secureRandomBytes(EncryptionHeader.saltByteCount))
    }

    /// The encryption header of a new database with every random input given (16-byte salts, a
    /// 12-byte nonce, a 32-byte data master; the scrypt salt is used only by a passphrase key):
    /// `newHeader()`'s work, with inputs a test can fix.
    package func newHeader(
        dataMaster: [UInt8], databaseSalt: [UInt8], keySalt: [UInt8], nonce: [UInt8], scryptSalt: [UInt8]
    ) throws(EncryptionFailure) -> [UInt8] {
        precondition(dataMaster.count == 32, "a data master is 32 bytes")
        return try wrappedHeader(
            keys: WrappedKeys(dataMaster: SymmetricKey(data: dataMaster)), databaseSalt: databaseSalt, keySalt: keySalt,
            nonce: nonce, scryptSalt: scryptSalt)
    }

    /// The header of a database whose data key is being rotated, with every random input given
    /// (a 32-byte data master and the new generation's 32-byte record master): a version 3 header
    /// whose current generation is `generation` and whose retiring one is 0, for known-answer tests.
    package func rotatingHeader(
        dataMaster: [UInt8], generation: UInt32, recordMaster: [UInt8], databaseSalt: [UInt8], keySalt: [UInt8],
        nonce: [UInt8], scryptSalt: [UInt8]
    ) throws(EncryptionFailure) -> [UInt8] {
        precondition(dataMaster.count == 32 && recordMaster.count == 32, "masters are 32 bytes")
        let keys = WrappedKeys(
            dataMaster: SymmetricKey(data: dataMaster),
            current: .init(number: generation, master: SymmetricKey(data: recordMaster)),
            retiring: .init(number: 0, master: nil))
        return try wrappedHeader(
            keys: keys, databaseSalt: databaseSalt, keySalt: keySalt, nonce: nonce, scryptSalt: scryptSalt)
    }

    /// A version 1 header, as format 8 wrote before key changes (the key is the data master, and
    /// a key check is stored): for tests of databases made then, and their known-answer vectors.
    package func version1Header(databaseSalt: [UInt8], scryptSalt: [UInt8]) throws(EncryptionFailure) -> [UInt8] {
        precondition(databaseSalt.count == EncryptionHeader.saltByteCount, "a database salt is 16 bytes")
        let (kind, cost, master) = try newMaster(scryptSalt: scryptSalt)
        var header = EncryptionHeader(
            kind: kind, cost: cost, scryptSalt: kind == .passphrase ? scryptSalt : [], databaseSalt: databaseSalt,
            keyCheck: [])
        header.keyCheck = KeySchedule(master: master, databaseSalt: databaseSalt).keyCheck
        return header.encoded
    }

    /// The header of the same database for this key: the data master `old` unwraps from
    /// `header` (version 1 or 2) wrapped anew under this key, with a new key salt and nonce (and,
    /// for a passphrase, a new scrypt salt and this key's cost). The database salt, and so every
    /// data key, stay as they are: nothing but the header is rewritten. Buri's
    /// `BuriDatabase.changeEncryptionKey(to:)` calls it.
    ///
    /// ```swift
    /// let old = DatabaseKey.random()
    /// let header = try old.newHeader()
    /// let new = try DatabaseKey(passphrase: "a new passphrase")
    /// let changed = try new.rekeyedHeader(header, from: old)   // opens with `new`, not `old`
    /// ```
    ///
    /// - Throws: `EncryptionFailure.wrongKey` when `old` does not open `header`,
    ///   `EncryptionFailure.malformedHeader` for a header this version cannot read,
    ///   `EncryptionFailure.invalidKey` when `old` is not a `DatabaseKey` or scrypt cannot
    ///   stretch this passphrase.
    public func rekeyedHeader(
        _ header: [UInt8], from old: any DatabaseEncryption
    ) throws(EncryptionFailure) -> [UInt8] {
        guard let old = old as? DatabaseKey else {
            throw .invalidKey(
                "the database's current key is a \(type(of: old)), not a DatabaseKey: a DatabaseKey can take over only from a DatabaseKey, whose header it can read"
            )
        }
        let current = try old.unlockedKeys(header: header)
        return try wrappedHeader(keys: current.wrapped, databaseSalt: current.header.databaseSalt)
    }

    /// The header of the same database (opened with this key) beginning a rotation of its record
    /// key: a new data key generation, one more than the current, with a new random record master,
    /// seals from now on; the current one is kept as the retiring generation, so that everything
    /// sealed before still opens until `BuriDatabase.rotateDataKey` has sealed it anew. The token
    /// key (the data master) stays. The header is wrapped under this key with new salts and nonce.
    ///
    /// ```swift
    /// let rotating = try key.headerBeginningRotation(storedHeader)   // version 3
    /// ```
    ///
    /// - Throws: `EncryptionFailure.wrongKey` when this key does not open `header`;
    ///   `EncryptionFailure.invalidKey` when a rotation is already under way (finish it first) or
    ///   the generations are used up; `EncryptionFailure.malformedHeader` for a header this version
    ///   cannot read.
    public func headerBeginningRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8] {
        let unlocked = try unlockedKeys(header: header)
        var keys = unlocked.wrapped
        if let retiring = keys.retiring {
            throw .invalidKey(
                "a rotation of the data key is already under way (generation \(retiring.number) is being retired for \(keys.current.number)): finish it before beginning another"
            )
        }
        guard keys.current.number < WrappedKeys.noGeneration - 1 else {
            throw .invalidKey(
                "the data key has been rotated \(keys.current.number) times, the most a header can number")
        }
        if unlocked.header.version == 1 {
            throw .invalidKey(
                "this database's encryption header is version 1 (the key is the data key): change its key once (`buri rekey`), which writes a version 2 header, then rotate"
            )
        }
        keys.retiring = keys.current
        keys.current = .init(number: keys.current.number + 1, master: SymmetricKey(size: .bits256))
        return try wrappedHeader(keys: keys, databaseSalt: unlocked.header.databaseSalt)
    }

    /// The record-key generations a header names, readable without the key (generation 0 alone in
    /// versions 1 and 2); nil for a header this version cannot read.
    ///
    /// ```swift
    /// let generations = key.dataKeyGenerations(ofHeader: storedHeader)
    /// ```
    public func dataKeyGenerations(ofHeader header: [UInt8]) -> DataKeyGenerations? {
        (try? EncryptionHeader(decoding: header))?.generations
    }

    /// The header of the same database (opened with this key) ending a rotation: the retiring
    /// generation's record master is dropped, so nothing sealed under it opens any more. Returns
    /// `header` unchanged when no rotation is under way.
    ///
    /// ```swift
    /// let rotated = try key.headerEndingRotation(rotatingHeader)
    /// ```
    ///
    /// - Throws: as ``headerBeginningRotation(_:)``.
    public func headerEndingRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8] {
        let unlocked = try unlockedKeys(header: header)
        var keys = unlocked.wrapped
        guard keys.retiring != nil else { return header }
        keys.retiring = nil
        return try wrappedHeader(keys: keys, databaseSalt: unlocked.header.databaseSalt)
    }

    /// A version 2 header wrapping `keys` under this key (version 3 once they hold a rotated
    /// generation), with the salts and nonce given or new random ones.
    private func wrappedHeader(
        keys: WrappedKeys, databaseSalt: [UInt8],
        keySalt: [UInt8] = secureRandomBytes(EncryptionHeader.saltByteCount),
        nonce: [UInt8] = secureRandomBytes(EncryptionHeader.nonceByteCount),
        scryptSalt: [UInt8] = secureRandomBytes(EncryptionHeader.saltByteCount)
    ) throws(EncryptionFailure) -> [UInt8] {
        precondition(databaseSalt.count == EncryptionHeader.saltByteCount, "a database salt is 16 bytes")
        precondition(keySalt.count == EncryptionHeader.saltByteCount, "a key salt is 16 bytes")
        precondition(nonce.count == EncryptionHeader.nonceByteCount, "a nonce is 12 bytes")
        let (kind, cost, master) = try newMaster(scryptSalt: scryptSalt)
        var header = EncryptionHeader(
            version: keys.version, kind: kind, cost: cost, scryptSalt: kind == .passphrase ? scryptSalt : [],
            keySalt: keySalt, databaseSalt: databaseSalt, nonce: nonce)
        header.generations = keys.generations
        header.wrappedDataMaster = try KeyWrap.wrap(
            keys.plaintext, kek: KeyWrap.keyEncryptionKey(master: master, keySalt: keySalt), nonce: nonce,
            associatedData: header.wrappedPrefix)
        return header.encoded
    }

    /// This key's kind, cost and master key for a new header: the raw key, or the passphrase
    /// stretched at this key's cost with `scryptSalt` (16 bytes).
    private func newMaster(
        scryptSalt: [UInt8]
    ) throws(EncryptionFailure) -> (EncryptionHeader.Kind, ScryptCost?, SymmetricKey) {
        switch material {
        case .rawKey(let key):
            return (.rawKey, nil, key)
        case .passphrase(let passphrase, let cost):
            precondition(scryptSalt.count == EncryptionHeader.saltByteCount, "an scrypt salt is 16 bytes")
            do {
                let master = try KeySchedule.scrypt(
                    passphrase: passphrase, salt: scryptSalt, cost: cost, byteCount: 32)
                return (.passphrase, cost, master)
            } catch {
                throw .invalidKey("scrypt could not stretch the passphrase at \(cost.summary): \(error)")
            }
        }
    }

    /// The cipher of the database whose stored encryption header is `header`: the passphrase is
    /// stretched with the cost and salt stored there, the database's data master is unwrapped
    /// (version 2; in a version 1 header the key is checked against the stored key check), and
    /// the cipher seals with a session of its own. Buri calls it when it opens an encrypted
    /// database.
    ///
    /// ```swift
    /// let key = DatabaseKey.random()
    /// let cipher = try key.unlock(header: try key.newHeader())
    /// ```
    ///
    /// - Throws: `EncryptionFailure.wrongKey` when the key does not unwrap the data master (or
    ///   fails the key check), or the database needs the other kind of key (a passphrase, or a
    ///   key file); `EncryptionFailure.malformedHeader` for a header this version cannot read
    ///   (magic, version, key kind, length, or a stored scrypt cost above logN 22, r 32 or p 16).
    public func unlock(header: [UInt8]) throws(EncryptionFailure) -> any DatabaseCipher {
        try unlockCipher(header: header)
    }

    /// `unlock(header:)`'s work, with the first session's id and counter a test can fix (a random
    /// id and 0 otherwise).
    package func unlockCipher(
        header bytes: [UInt8], sessionID: [UInt8]? = nil, firstCounter: UInt64 = 0
    )
        throws(EncryptionFailure) -> SealingCipher
    {
        let keys = try unlockedKeys(header: bytes).keys
        return SealingCipher(keys: keys, sessionID: sessionID, firstCounter: firstCounter)
    }

    /// The decoded header, what it wraps (the database's data master and record-key generations)
    /// and its keys, for this key.
    private func unlockedKeys(
        header bytes: [UInt8]
    ) throws(EncryptionFailure) -> (header: EncryptionHeader, wrapped: WrappedKeys, keys: KeySchedule) {
        let header = try EncryptionHeader(decoding: bytes)
        let master = try userMaster(for: header)
        let what = header.kind == .passphrase ? "passphrase" : "key"
        if header.version == 1 {
            let keys = KeySchedule(master: master, databaseSalt: header.databaseSalt)
            guard keys.matches(keyCheck: header.keyCheck) else {
                throw .wrongKey(
                    "the key does not match this database's key check: it is not the \(what) the database was encrypted with"
                )
            }
            return (header, WrappedKeys(dataMaster: master), keys)
        }
        guard
            let unwrapped = KeyWrap.unwrap(
                header.wrappedDataMaster, kek: KeyWrap.keyEncryptionKey(master: master, keySalt: header.keySalt),
                nonce: header.nonce, associatedData: header.wrappedPrefix)
        else {
            throw .wrongKey(
                "the key does not unwrap this database's data key: it is not the \(what) the database was encrypted with (or, after a key change, changed to)"
            )
        }
        let wrapped = WrappedKeys(unwrapped: unwrapped, header: header)
        return (header, wrapped, KeySchedule(keys: wrapped, databaseSalt: header.databaseSalt))
    }

    /// This key's master key for `header`: the raw key, or the passphrase stretched with the cost
    /// and salt stored there.
    private func userMaster(for header: EncryptionHeader) throws(EncryptionFailure) -> SymmetricKey {
        switch (material, header.kind, header.cost) {
        case (.rawKey(let key), .rawKey, _):
            return key
        case (.passphrase(let passphrase, _), .passphrase, let cost?):
            do {
                return try KeySchedule.scrypt(
                    passphrase: passphrase, salt: header.scryptSalt, cost: cost, byteCount: 32)
            } catch {
                throw .malformedHeader(
                    "scrypt could not stretch the passphrase at the stored cost (\(cost.summary)): \(error)")
            }
        case (.passphrase, .passphrase, nil):
            throw .malformedHeader("the encryption header of a passphrase stores no scrypt cost")
        case (.rawKey, .passphrase, _):
            throw .wrongKey("this database was encrypted with a passphrase; give the passphrase, not a key file")
        case (.passphrase, .rawKey, _):
            throw .wrongKey(
                "this database was encrypted with a raw 256-bit key (a key file); give the key file, not a passphrase")
        }
    }

    /// `DatabaseKey(raw 256-bit key, redacted)` or `DatabaseKey(passphrase, scrypt logN 15, r 8,
    /// p 1, redacted)`: the kind of key, never the key.
    ///
    /// ```swift
    /// print(DatabaseKey.random())   // DatabaseKey(raw 256-bit key, redacted)
    /// ```
    public var description: String {
        switch material {
        case .rawKey: return "DatabaseKey(raw 256-bit key, redacted)"
        case .passphrase(_, let cost): return "DatabaseKey(passphrase, scrypt \(cost.summary), redacted)"
        }
    }

    /// The same as ``description``, so that `debugPrint`, string interpolation of containers and
    /// the debugger show no key either.
    ///
    /// ```swift
    /// debugPrint([DatabaseKey.random()])   // [DatabaseKey(raw 256-bit key, redacted)]
    /// ```
    public var debugDescription: String { description }

    /// A mirror with no children, so that `dump` and the printing of a structure holding the key
    /// show no key material.
    ///
    /// ```swift
    /// dump(DatabaseKey.random())   // - DatabaseKey(raw 256-bit key, redacted)
    /// ```
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
