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
}

/// The keys of one unlocked database: seals and opens stored values, and makes the keyed tokens
/// that private index values are stored as. Made by ``DatabaseEncryption/unlock(header:)``.
public protocol DatabaseCipher: Sendable {
    /// `plaintext` sealed (encrypted and authenticated) with `associatedData` bound to it: the
    /// stored key, so that a value copied to another key or bucket does not open. Every call uses
    /// a nonce never used before under the same key. The result starts with ``sealedValueMarker``.
    func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) -> [UInt8]
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
}

/// The first byte of every sealed value (`docs/FORMAT.md` §4a): a record's plaintext starts with
/// its layout version (1) and a named value's with a CBOR head, so tools (and `buri repair`, which
/// has no key) tell a sealed value from a plaintext one by it.
public let sealedValueMarker: UInt8 = 0xE1

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
