/// How a database is encrypted at rest: the key (or passphrase) an app holds, which makes the
/// stored encryption header of a new database and unlocks that of an existing one.
///
/// Buri itself holds no cryptography: the `BuriEncryption` product implements this protocol with
/// swift-crypto (`DatabaseKey`), so apps that never encrypt never build or resolve it. Set it as
/// ``BuriOptions/encryption`` to create or open an encrypted database:
///
/// ```swift
/// import BuriEncryption
/// var options = BuriOptions()
/// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")   // 32 random bytes
/// let db = try BuriDatabase(path: "notes.buri", options: options)
/// ```
///
/// What is sealed and what stays readable is specified in `docs/FORMAT.md` §4a and explained in
/// `docs/SECURITY.md`.
public protocol DatabaseEncryption: Sendable {
    /// The encryption header for a database being created with this key: stored under
    /// `00 "encryption"` in the same commit as the database header. It holds what reopening needs
    /// (random salts, the passphrase's cost) and the database's data keys wrapped under the key,
    /// never the key.
    func newHeader() throws(EncryptionFailure) -> [UInt8]
    /// The cipher of the database whose stored encryption header is `header`.
    ///
    /// - Throws: ``EncryptionFailure/wrongKey(_:)`` when the key is not the database's (nothing is read or
    ///   written with a wrong key), ``EncryptionFailure/malformedHeader(_:)`` for a header this
    ///   version cannot read.
    func unlock(header: [UInt8]) throws(EncryptionFailure) -> any DatabaseCipher
    /// The encryption header of the same database for this key as its new key: the header
    /// `header` (as stored) keeps the database's data keys, which `old` (the current key) unlocks,
    /// wrapped anew for this key, with fresh random salts and nonce. Everything sealed stays as
    /// it is; only the header changes. ``BuriDatabase/changeEncryptionKey(to:)`` calls it, and
    /// checks that the result unlocks with this key to the same data keys before storing it.
    ///
    /// ```swift
    /// let changed = try newKey.rekeyedHeader(storedHeader, from: currentKey)
    /// _ = try newKey.unlock(header: changed)   // the database's cipher, as before
    /// ```
    ///
    /// The default implementation refuses with ``EncryptionFailure/invalidKey(_:)``: a conformer
    /// that cannot change keys need not implement it.
    ///
    /// - Throws: ``EncryptionFailure/wrongKey(_:)`` when `old` does not unlock `header`,
    ///   ``EncryptionFailure/malformedHeader(_:)`` for a header this version cannot read,
    ///   ``EncryptionFailure/invalidKey(_:)`` when this key cannot take over from `old`.
    func rekeyedHeader(_ header: [UInt8], from old: any DatabaseEncryption) throws(EncryptionFailure) -> [UInt8]
    /// The header of the same database (this key opens `header`) beginning a rotation of its data
    /// key: a new generation of record key seals from then on, and the current one still opens
    /// what it sealed until ``headerEndingRotation(_:)`` retires it.
    /// ``BuriDatabase/rotateDataKey(batchSize:progress:)`` calls both.
    ///
    /// ```swift
    /// let rotating = try key.headerBeginningRotation(storedHeader)
    /// ```
    ///
    /// The default implementation refuses with ``EncryptionFailure/invalidKey(_:)``.
    func headerBeginningRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8]
    /// The header of the same database with the retiring generation of a rotation dropped (or
    /// `header` unchanged when no rotation is under way).
    ///
    /// ```swift
    /// let rotated = try key.headerEndingRotation(rotatingHeader)
    /// ```
    ///
    /// The default implementation refuses with ``EncryptionFailure/invalidKey(_:)``.
    func headerEndingRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8]
    /// The record-key generations `header` names, readable without its key; nil when the header
    /// does not say (the default). A client of a shared engine whose key another client changed
    /// goes on writing only while the generations are the ones it holds.
    ///
    /// ```swift
    /// let generations = key.dataKeyGenerations(ofHeader: storedHeader)
    /// ```
    func dataKeyGenerations(ofHeader header: [UInt8]) -> DataKeyGenerations?
}

extension DatabaseEncryption {
    /// Refuses: this kind of key cannot change a database's key. Copy the database into a new one
    /// encrypted with the new key instead (`buri export --decrypt`, then `buri restore`).
    ///
    /// ```swift
    /// try db.changeEncryptionKey(to: someOtherEncryption)   // invalidEncryptionKey: … cannot change keys
    /// ```
    public func rekeyedHeader(
        _ header: [UInt8], from old: any DatabaseEncryption
    ) throws(EncryptionFailure) -> [UInt8] {
        throw .invalidKey(
            "\(type(of: self)) cannot change keys: copy the database into a new one encrypted with the new key (`buri export --decrypt`, then `buri restore` with the new key)"
        )
    }

    /// Refuses: this kind of key cannot rotate a database's data key. Copy the database into a new
    /// one instead (`buri export --decrypt`, then `buri restore`), which gets new data keys.
    ///
    /// ```swift
    /// try db.rotateDataKey()   // invalidEncryptionKey: … cannot rotate
    /// ```
    public func headerBeginningRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8] {
        throw .invalidKey(
            "\(type(of: self)) cannot rotate data keys: copy the database into a new one (`buri export --decrypt`, then `buri restore`), which gets new data keys"
        )
    }

    /// Refuses, as ``headerBeginningRotation(_:)``.
    ///
    /// ```swift
    /// try db.rotateDataKey()   // invalidEncryptionKey: … cannot rotate
    /// ```
    public func headerEndingRotation(_ header: [UInt8]) throws(EncryptionFailure) -> [UInt8] {
        try headerBeginningRotation(header)
    }

    /// `nil`: the header's generations are not known without the key.
    ///
    /// ```swift
    /// _ = key.dataKeyGenerations(ofHeader: storedHeader)   // nil
    /// ```
    public func dataKeyGenerations(ofHeader header: [UInt8]) -> DataKeyGenerations? { nil }
}

/// The generations of the record keys an unlocked database holds (``DatabaseCipher/dataKeyGenerations``):
/// the one that seals, and during a rotation of the data key the one being retired, which still
/// opens what it sealed.
///
/// ```swift
/// if db.dataKeyGenerations?.retiring != nil { try db.rotateDataKey() }   // finish a rotation
/// ```
public struct DataKeyGenerations: Sendable, Hashable {
    /// The generation new values are sealed under: 0 until the first rotation.
    public var current: UInt32
    /// The generation being retired by a rotation under way, nil when none is.
    public var retiring: UInt32?

    public init(current: UInt32, retiring: UInt32?) {
        self.current = current
        self.retiring = retiring
    }
}

/// The keys of one unlocked database: seals and opens stored values, and makes the keyed tokens
/// that private index values are stored as. Made by ``DatabaseEncryption/unlock(header:)``.
public protocol DatabaseCipher: Sendable {
    /// `plaintext` sealed (encrypted and authenticated) with `associatedData` bound to it: the
    /// stored key, so that a value copied to another key or bucket does not open. Every call uses
    /// a nonce never used before under the same key. The result starts with ``sealedValueMarker``.
    func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) -> [UInt8]
    /// ``seal(_:associatedData:)`` followed by `padding` zero bytes and their count (u16be), the
    /// marker's ``paddedSealedValueFlag`` set; ``open(_:associatedData:)`` opens either. The default
    /// implementation does not pad.
    func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, padding: Int) -> [UInt8]
    /// The plaintext of a value ``seal(_:associatedData:)`` made with the same associated data.
    ///
    /// - Throws: ``EncryptionFailure/authenticationFailed(_:)`` when the value was changed, cut
    ///   short, or sealed for another key, bucket or database.
    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer
    ) throws(EncryptionFailure)
        -> [UInt8]
    /// A keyed token of `bytes` (an HMAC, cut to a fixed length): equal inputs give equal tokens,
    /// and without the key a token says nothing about its input but its equality to others.
    func token(_ bytes: UnsafeRawBufferPointer) -> [UInt8]
    /// Lends the plaintext of a sealed value to `body` without keeping it: what
    /// ``open(_:associatedData:)`` returns, in a buffer that may live on the stack. The default
    /// implementation calls ``open(_:associatedData:)``.
    ///
    /// - Throws: ``EncryptionFailure/authenticationFailed(_:)`` as ``open(_:associatedData:)``,
    ///   before `body` runs; and what `body` throws.
    func withOpened<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R
    /// Opens a sealed value into the start of `buffer`, growing it when it is too short and
    /// otherwise reusing its storage (a cursor opening one value after another allocates rarely),
    /// and returns the plaintext's byte count. The default implementation calls
    /// ``open(_:associatedData:)``.
    ///
    /// - Throws: ``EncryptionFailure/authenticationFailed(_:)`` as ``open(_:associatedData:)``.
    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, into buffer: inout [UInt8]
    ) throws(EncryptionFailure) -> Int
    /// The record-key generations this cipher holds. The default: generation 0 alone.
    var dataKeyGenerations: DataKeyGenerations { get }
    /// Takes the record keys of `other`, a cipher of the same database unlocked from a newer
    /// header (a rotation began or ended), keeping this one's token key; `false` (and nothing
    /// changed) when `other` is not of the same kind and token key. The default: `false`.
    func adoptDataKeys(of other: any DatabaseCipher) -> Bool
}

extension DatabaseCipher {
    /// ``seal(_:associatedData:)``, unpadded.
    ///
    /// ```swift
    /// let sealed = cipher.seal(plaintext, associatedData: key, padding: 64)
    /// ```
    public func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, padding: Int
    ) -> [UInt8] {
        seal(plaintext, associatedData: associatedData)
    }

    /// ``open(_:associatedData:)``, then `body` with the array's bytes.
    ///
    /// ```swift
    /// let count = try cipher.withOpened(sealed, associatedData: key) { $0.count }
    /// ```
    public func withOpened<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let plaintext = try open(sealed, associatedData: associatedData)
        return try plaintext.withUnsafeBytes { try body($0) }
    }

    /// ``open(_:associatedData:)`` stored into `buffer` (which it replaces); its count.
    ///
    /// ```swift
    /// var buffer: [UInt8] = []
    /// let count = try cipher.open(sealed, associatedData: key, into: &buffer)
    /// ```
    public func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, into buffer: inout [UInt8]
    ) throws(EncryptionFailure) -> Int {
        buffer = try open(sealed, associatedData: associatedData)
        return buffer.count
    }

    /// Generation 0 alone: a cipher that cannot rotate.
    ///
    /// ```swift
    /// let generations = cipher.dataKeyGenerations   // current 0, retiring nil
    /// ```
    public var dataKeyGenerations: DataKeyGenerations { DataKeyGenerations(current: 0, retiring: nil) }

    /// `false`: a cipher that cannot rotate takes no other keys.
    ///
    /// ```swift
    /// _ = cipher.adoptDataKeys(of: newer)   // false
    /// ```
    public func adoptDataKeys(of other: any DatabaseCipher) -> Bool { false }
}

/// The generation of the record key that sealed `value` (``sealedValueMarker``: 0;
/// ``rotatedSealedValueMarker``: the u32 after it), nil when it has neither form.
///
/// ```swift
/// let generation = sealedGeneration(of: storedBytes)   // 0 for a value sealed before any rotation
/// ```
public func sealedGeneration(of value: UnsafeRawBufferPointer) -> UInt32? {
    switch value.first.map({ $0 & ~paddedSealedValueFlag }) {
    case sealedValueMarker: return 0
    case rotatedSealedValueMarker where value.count >= 5:
        return UInt32(bigEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt32.self))
    default: return nil
    }
}

/// The first byte of every sealed value (`docs/FORMAT.md` §4a): a record's plaintext starts with
/// its layout version (1) and a named value's with a CBOR head, so tools (and `buri repair`, which
/// has no key) tell a sealed value from a plaintext one by it.
public let sealedValueMarker: UInt8 = 0xE1

/// The first byte of a value sealed under a record key made by a rotation of the data key
/// (generation 1 or later, the u32 big-endian after it; `docs/FORMAT.md` §4a). A CBOR head 0xE2
/// is a simple value no Buri encoder writes, so it is never the start of a plaintext value either.
public let rotatedSealedValueMarker: UInt8 = 0xE2

/// The bit set in the marker of a sealed value stored with zero padding after its tag (0xE9 for
/// 0xE1, 0xEA for 0xE2; `docs/FORMAT.md` §4a): padding that LevelDB's block compression removes,
/// so that the blocks of an encrypted database compress, which LevelDB needs to cache them.
public let paddedSealedValueFlag: UInt8 = 0x08

/// Whether `byte` starts a sealed value of any form (0xE1, 0xE2, padded or not).
@inline(__always)
public func isSealedValueMarker(_ byte: UInt8?) -> Bool {
    guard let byte else { return false }
    let base = byte & ~paddedSealedValueFlag
    return base == sealedValueMarker || base == rotatedSealedValueMarker
}

/// The zero bytes Buri pads a sealed value with on an engine that caches only compressed blocks
/// (`StorageEngine.cachesOnlyCompressedBlocks`): a sixth of the key and the sealed value, plus 8.
/// Snappy stores a run of zeros in about 3 bytes per 64, so each entry saves more than the eighth
/// of its size LevelDB asks of a block before it keeps the block compressed.
///
/// ```swift
/// let padding = sealedValuePadding(keyCount: 20, valueCount: 300)   // 68
/// ```
public func sealedValuePadding(keyCount: Int, valueCount: Int) -> Int { (keyCount + valueCount + 41) / 6 + 8 }

/// Why a key did not unlock a database, or a sealed value did not open.
public enum EncryptionFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key (or passphrase) is not the one the database was created with.
    case wrongKey(String)
    /// The stored encryption header cannot be read by this version.
    case malformedHeader(String)
    /// A sealed value failed its authentication.
    case authenticationFailed(String)
    /// A key file or passphrase that cannot be used (wrong length, unreadable, empty).
    case invalidKey(String)

    public var description: String {
        switch self {
        case .wrongKey(let reason), .malformedHeader(let reason), .authenticationFailed(let reason),
            .invalidKey(let reason):
            return reason
        }
    }
}
