import Buri
import Crypto
import Synchronization

#if canImport(CCryptoBoringSSL)
    import CCryptoBoringSSL
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The cipher of one unlocked database: seals values with AES-256-GCM under a session key of its
/// own, opens values any session of the same key sealed, and makes keyed tokens. Made by
/// ``DatabaseKey/unlock(header:)``.
///
/// Nonces never repeat under one key, across processes as well: each instance picks a random
/// 16-byte session id and seals under the session key HKDF-SHA256(record key, salt: session id,
/// info: "buri v1 session"), with the nonce 4 zero bytes || a counter of the session (u64
/// big-endian) that counts up from 0. A counter about to reach 2^64 − 1 starts a new session.
///
/// A sealed value (41 bytes longer than its plaintext) under the database's first data key
/// (generation 0):
///
///     u8 0xE1 (sealedValueMarker), 16 B session id, u64 BE counter,
///     ciphertext (as long as the plaintext), 16 B tag
///
/// Under a data key made by a rotation (generation g ≥ 1), 45 bytes longer:
///
///     u8 0xE2 (rotatedSealedValueMarker), u32 BE g, 16 B session id, u64 BE counter,
///     ciphertext, 16 B tag
///
/// The associated data authenticated with it is the marker byte followed by the caller's; the
/// generation picks the record key, so a changed generation fails the tag as a changed key would.
package final class SealingCipher: DatabaseCipher, Sendable, CustomStringConvertible, CustomReflectable {
    /// Marker, session id and counter (generation 0).
    static let prefixByteCount = 1 + SessionID.byteCount + 8
    static let tagByteCount = 16
    /// What sealing adds to a plaintext: 41 bytes.
    package static let overhead = prefixByteCount + tagByteCount
    /// The byte count of a token.
    static let tokenByteCount = 16
    /// How many other sessions' keys are kept (reading a database written by many processes meets
    /// many sessions); the cache starts over when full.
    static let sessionCacheLimit = 1024

    /// A session id, as two big-endian words so that it hashes and compares fast.
    struct SessionID: Hashable, Sendable {
        static let byteCount = 16
        var high: UInt64
        var low: UInt64

        init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }

        /// The id stored at `offset` of `bytes`.
        init(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
            high = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            low = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
        }

        static func random() -> SessionID {
            var generator = SystemRandomNumberGenerator()
            return SessionID(high: generator.next(), low: generator.next())
        }

        func store(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) {
            bytes.storeBytes(of: high.bigEndian, toByteOffset: offset, as: UInt64.self)
            bytes.storeBytes(of: low.bigEndian, toByteOffset: offset + 8, as: UInt64.self)
        }

        var bytes: [UInt8] {
            [UInt8](unsafeUninitializedCapacity: Self.byteCount) { buffer, initialized in
                store(into: UnsafeMutableRawBufferPointer(buffer), at: 0)
                initialized = Self.byteCount
            }
        }
    }

    /// The session this instance seals with.
    struct Session: Sendable {
        /// The generation of the data key it seals under.
        let generation: UInt32
        let id: SessionID
        let key: SessionKey
        /// The counter of the next seal.
        var next: UInt64

        init(generation: UInt32, id: SessionID, recordKey: SymmetricKey, next: UInt64) {
            self.generation = generation
            self.id = id
            key = SessionKey(id.bytes.withUnsafeBytes { KeySchedule.sessionKey(recordKey: recordKey, sessionID: $0) })
            self.next = next
        }

        /// The bytes a value sealed in this session starts with: its marker (and generation).
        var prefixByteCount: Int { SealingCipher.prefixByteCount(generation: generation) }
    }

    /// A session of some generation, as a sealed value names it.
    struct SessionRef: Hashable, Sendable {
        var generation: UInt32
        var id: SessionID
    }

    /// The record keys a cipher holds: the one it seals with (`current`), and while a rotation
    /// runs, the one being retired, which still opens.
    struct RecordKeys: Sendable {
        var current: (generation: UInt32, key: SymmetricKey)
        var retiring: (generation: UInt32, key: SymmetricKey)?

        func key(of generation: UInt32) -> SymmetricKey? {
            if generation == current.generation { return current.key }
            if let retiring, retiring.generation == generation { return retiring.key }
            return nil
        }
    }

    /// Marker (and generation), session id and counter.
    static func prefixByteCount(generation: UInt32) -> Int { generation == 0 ? prefixByteCount : prefixByteCount + 4 }

    /// A session's key, and on Linux its OpenSSL contexts (set up once per session, not per value).
    struct SessionKey: Sendable {
        let key: SymmetricKey
        #if canImport(CCryptoBoringSSL)
            let contexts: AESGCM.Key
        #endif

        init(_ key: SymmetricKey) {
            self.key = key
            #if canImport(CCryptoBoringSSL)
                contexts = key.withUnsafeBytes { AESGCM.Key($0) }
            #endif
        }
    }

    private let recordKeys: Mutex<RecordKeys>
    /// HMAC-SHA256 already keyed with the token key: each token copies it instead of keying anew.
    private let tokenAuthenticator: HMAC<SHA256>
    #if canImport(CCryptoBoringSSL)
        /// The same key's HMAC-SHA256 as BoringSSL's two SHA-256 states (a token is then two short
        /// hashes and two state copies, with no generic wrapper around them).
        private let tokenState: TokenState
    #endif
    private let session: Mutex<Session>
    /// The first session, which every value this instance seals belongs to until a counter
    /// rollover or a rotation: read without the lock by each open, the common case of reading
    /// one's own writes.
    private let firstSession: (ref: SessionRef, key: SessionKey)
    /// Whether the first session's data key is still held (a finished rotation retires it).
    private let firstSessionLive = Atomic<Bool>(true)
    private let otherSessions = Mutex<[SessionRef: SessionKey]>([:])

    /// A cipher of `keys` whose first session has the id `sessionID` (random when nil) and starts
    /// counting at `firstCounter`.
    init(keys: KeySchedule, sessionID: [UInt8]?, firstCounter: UInt64) {
        let records = keys.recordKeys
        recordKeys = Mutex(records)
        tokenAuthenticator = HMAC<SHA256>(key: keys.tokenKey)
        #if canImport(CCryptoBoringSSL)
            tokenState = TokenState(key: keys.tokenKey)
        #endif
        let id: SessionID
        if let sessionID {
            precondition(sessionID.count == SessionID.byteCount, "a session id is 16 bytes")
            id = sessionID.withUnsafeBytes { SessionID($0, at: 0) }
        } else {
            id = .random()
        }
        let first = Session(
            generation: records.current.generation, id: id, recordKey: records.current.key, next: firstCounter)
        firstSession = (SessionRef(generation: first.generation, id: first.id), first.key)
        session = Mutex(first)
    }

    /// The generations of the data keys this cipher holds: the one it seals with, and while a
    /// rotation runs, the one being retired.
    package var dataKeyGenerations: DataKeyGenerations {
        recordKeys.withLock { DataKeyGenerations(current: $0.current.generation, retiring: $0.retiring?.generation) }
    }

    /// Takes the record keys of `other`, a cipher of the same database unlocked from a newer
    /// header (a rotation began or ended): seals from now on in a new session of `other`'s current
    /// generation, and opens only what `other` opens. `false` (nothing changed) when `other` is not
    /// a `SealingCipher` of the same token key.
    package func adoptDataKeys(of other: any DatabaseCipher) -> Bool {
        guard let other = other as? SealingCipher else { return false }
        let probe = Array("buri data key adoption probe".utf8)
        guard probe.withUnsafeBytes({ token($0) == other.token($0) }) else { return false }
        let records = other.recordKeys.withLock { $0 }
        recordKeys.withLock { $0 = records }
        session.withLock { session in
            if session.generation != records.current.generation {
                session = Session(
                    generation: records.current.generation, id: .random(), recordKey: records.current.key, next: 0)
            }
        }
        otherSessions.withLock { cache in
            cache = cache.filter { records.key(of: $0.key.generation) != nil }
        }
        firstSessionLive.store(records.key(of: firstSession.ref.generation) != nil, ordering: .releasing)
        return true
    }

    /// The id of the session this instance seals with now.
    package var sessionID: [UInt8] { session.withLock { $0.id.bytes } }

    /// `plaintext` sealed with AES-256-GCM under this instance's session key and the session's next
    /// counter, authenticating the marker byte and `associatedData`.
    package func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) -> [UInt8] {
        seal(plaintext, associatedData: associatedData, padding: 0)
    }

    /// ``seal(_:associatedData:)`` followed by `padding` (at most 65,535) zero bytes and their count,
    /// u16 big-endian, with ``paddedSealedValueFlag`` set in the marker. The associated data holds
    /// the marker without the flag: padding is not authenticated, and opening checks it is zeros.
    package func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, padding requested: Int
    ) -> [UInt8] {
        let padding = min(max(0, requested), Int(UInt16.max))
        let trailer = padding > 0 ? padding + 2 : 0
        /// Writes the flag, the zeros and their count at the end of `output` (`trailer` bytes).
        func storeTrailer(_ output: UnsafeMutableRawBufferPointer) {
            guard padding > 0 else { return }
            output[0] |= paddedSealedValueFlag
            let start = output.count - trailer
            UnsafeMutableRawBufferPointer(rebasing: output[start..<start + padding]).initializeMemory(
                as: UInt8.self, repeating: 0)
            output[output.count - 2] = UInt8(padding >> 8)
            output[output.count - 1] = UInt8(padding & 0xFF)
        }
        let (id, key, counter) = session.withLock { session in
            if session.next == UInt64.max {
                // The counter never takes its last value: a new session (a new random id, so a
                // new key) starts at 0 instead, and no nonce repeats under a key.
                let current = recordKeys.withLock { $0.current }
                session = Session(generation: current.generation, id: .random(), recordKey: current.key, next: 0)
            }
            defer { session.next += 1 }
            return (SessionRef(generation: session.generation, id: session.id), session.key, session.next)
        }
        let marker = id.generation == 0 ? sealedValueMarker : rotatedSealedValueMarker
        let prefix = Self.prefixByteCount(generation: id.generation)
        /// Writes the marker, generation, session id and counter.
        func storePrefix(_ output: UnsafeMutableRawBufferPointer) {
            output[0] = marker
            var offset = 1
            if id.generation != 0 {
                output.storeBytes(of: id.generation.bigEndian, toByteOffset: 1, as: UInt32.self)
                offset += 4
            }
            id.id.store(into: output, at: offset)
            output.storeBytes(of: counter.bigEndian, toByteOffset: offset + SessionID.byteCount, as: UInt64.self)
        }
        #if canImport(CCryptoBoringSSL)
            if AESGCM.isAvailable {
                let count = prefix + plaintext.count + Self.tagByteCount + trailer
                return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                    let output = UnsafeMutableRawBufferPointer(buffer)
                    storePrefix(output)
                    let sealed = AESGCM.seal(
                        key: key.contexts, counter: counter, marker: marker, associatedData: associatedData,
                        plaintext: plaintext,
                        into: UnsafeMutableRawBufferPointer(rebasing: output[prefix..<count - trailer]))
                    // Only a key of the wrong size or an allocation failing can fail here.
                    precondition(sealed, "AES-GCM could not seal")
                    storeTrailer(output)
                    initialized = count
                }
            }
        #endif
        let box: AES.GCM.SealedBox
        do {
            box = try Self.withNonce(counter) { nonce in
                try Self.withMarkedAssociatedData(marker, associatedData) { associatedData in
                    try AES.GCM.seal(plaintext, using: key.key, nonce: nonce, authenticating: associatedData)
                }
            }
        } catch {
            // Only a key of the wrong size or a short nonce fail, and neither can be here.
            preconditionFailure("AES-GCM could not seal: \(error)")
        }
        // The combined box is nonce || ciphertext || tag: copy all but the nonce once.
        let combined = box.combined!
        let nonceByteCount = 12
        let count = prefix + plaintext.count + Self.tagByteCount + trailer
        precondition(combined.count == nonceByteCount + plaintext.count + Self.tagByteCount)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            let output = UnsafeMutableRawBufferPointer(buffer)
            storePrefix(output)
            combined.withUnsafeBytes { combined in
                UnsafeMutableRawBufferPointer(rebasing: output[prefix..<count - trailer])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: combined[nonceByteCount...]))
            }
            storeTrailer(output)
            initialized = count
        }
    }

    /// A sealed value taken apart: the marker, its session's key, counter, ciphertext and tag.
    private struct Parts {
        var marker: UInt8
        var key: SessionKey
        var counter: UInt64
        var ciphertext: UnsafeRawBufferPointer
        var tag: UnsafeRawBufferPointer
    }

    /// The parts of `sealed`, or the failure naming what is wrong with its form or generation.
    private func parts(of stored: UnsafeRawBufferPointer) throws(EncryptionFailure) -> Parts {
        guard stored.count >= Self.overhead else {
            throw .authenticationFailed(
                "a sealed value of \(stored.count) bytes is shorter than the \(Self.overhead) bytes of the shortest: it was cut short, or is not a sealed value"
            )
        }
        var sealed = stored
        var marker = stored[0]
        if marker & paddedSealedValueFlag != 0, isSealedValueMarker(marker) {
            // Zero padding after the tag, its count in the last two bytes: checked, then set aside.
            let padding = Int(stored[stored.count - 2]) << 8 | Int(stored[stored.count - 1])
            // A flagged value has at least one byte of padding (`seal` sets the flag only then).
            guard padding >= 1, padding + 2 + Self.overhead <= stored.count else {
                throw .authenticationFailed(
                    "a padded sealed value of \(stored.count) bytes names \(padding) bytes of padding, which it cannot hold: it was cut short or changed on disk"
                )
            }
            let end = stored.count - 2 - padding
            guard Self.isZero(UnsafeRawBufferPointer(rebasing: stored[end..<stored.count - 2])) else {
                throw .authenticationFailed(
                    "a padded sealed value of \(stored.count) bytes has padding that is not zeros: it was changed on disk"
                )
            }
            sealed = UnsafeRawBufferPointer(rebasing: stored[..<end])
            marker &= ~paddedSealedValueFlag
        }
        let generation: UInt32
        switch marker {
        case sealedValueMarker:
            generation = 0
        case rotatedSealedValueMarker where sealed.count >= Self.overhead + 4:
            generation = UInt32(bigEndian: sealed.loadUnaligned(fromByteOffset: 1, as: UInt32.self))
        case rotatedSealedValueMarker:
            throw .authenticationFailed(
                "a sealed value of \(sealed.count) bytes is shorter than the \(Self.overhead + 4) bytes of the shortest sealed under a rotated data key: it was cut short"
            )
        default:
            throw .authenticationFailed(
                "a value of \(sealed.count) bytes does not start with a sealed-value marker (0xE1 or 0xE2): it was changed on disk, or is not a sealed value"
            )
        }
        let prefix = Self.prefixByteCount(generation: generation)
        let ref = SessionRef(generation: generation, id: SessionID(sealed, at: prefix - 8 - SessionID.byteCount))
        let counter = UInt64(bigEndian: sealed.loadUnaligned(fromByteOffset: prefix - 8, as: UInt64.self))
        guard let key = sessionKey(of: ref) else {
            let held = dataKeyGenerations
            throw .authenticationFailed(
                "a sealed value of \(sealed.count) bytes was sealed under data key generation \(generation), which this database's header no longer holds (it holds generation \(held.current)\(held.retiring.map { " and \($0)" } ?? "")): it was restored from before a finished rotation, or changed on disk"
            )
        }
        let tagStart = sealed.count - Self.tagByteCount
        return Parts(
            marker: marker, key: key, counter: counter,
            ciphertext: UnsafeRawBufferPointer(rebasing: sealed[prefix..<tagStart]),
            tag: UnsafeRawBufferPointer(rebasing: sealed[tagStart...]))
    }

    /// Whether every byte of `bytes` is zero, read eight at a time.
    private static func isZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var word: UInt64 = 0
        var offset = 0
        while offset + 8 <= bytes.count {
            word |= bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < bytes.count {
            word |= UInt64(bytes[offset])
            offset += 1
        }
        return word == 0
    }

    private static func failedAuthentication(_ sealed: UnsafeRawBufferPointer) -> EncryptionFailure {
        .authenticationFailed(
            "a sealed value of \(sealed.count) bytes failed its authentication: it was changed on disk, cut short, or sealed for another key, bucket or database"
        )
    }

    /// The plaintext of a value any session of this key sealed with `associatedData`.
    package func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer
    )
        throws(EncryptionFailure) -> [UInt8]
    {
        let parts = try parts(of: sealed)
        #if canImport(CCryptoBoringSSL)
            if AESGCM.isAvailable {
                var opened = false
                let plaintext = [UInt8](unsafeUninitializedCapacity: parts.ciphertext.count) { buffer, initialized in
                    opened = Self.decrypt(parts, associatedData, into: UnsafeMutableRawBufferPointer(buffer))
                    initialized = opened ? parts.ciphertext.count : 0
                }
                guard opened else { throw Self.failedAuthentication(sealed) }
                return plaintext
            }
        #endif
        return try swiftCryptoOpen(parts, sealed: sealed, associatedData: associatedData)
    }

    /// The plaintext lent to `body` from a buffer allocated for the call (no array, whose generic
    /// creation would cost more than the allocation itself in a reader's unspecialized path).
    package func withOpened<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let parts = try parts(of: sealed)
        #if canImport(CCryptoBoringSSL)
            if AESGCM.isAvailable {
                let output = UnsafeMutableRawBufferPointer.allocate(
                    byteCount: max(1, parts.ciphertext.count), alignment: 1)
                defer { output.deallocate() }
                let plaintext = UnsafeMutableRawBufferPointer(rebasing: output[..<parts.ciphertext.count])
                guard Self.decrypt(parts, associatedData, into: plaintext) else {
                    throw Self.failedAuthentication(sealed)
                }
                return try body(UnsafeRawBufferPointer(plaintext))
            }
        #endif
        let plaintext = try swiftCryptoOpen(parts, sealed: sealed, associatedData: associatedData)
        return try plaintext.withUnsafeBytes { try body($0) }
    }

    /// The plaintext stored at the start of `buffer`, whose storage is reused when it is large
    /// enough (grown to twice the need otherwise); its byte count.
    package func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, into buffer: inout [UInt8]
    ) throws(EncryptionFailure) -> Int {
        let parts = try parts(of: sealed)
        #if canImport(CCryptoBoringSSL)
            if AESGCM.isAvailable {
                let count = parts.ciphertext.count
                if buffer.count < count { buffer = [UInt8](repeating: 0, count: max(count, 2 * buffer.count, 256)) }
                let opened = buffer.withUnsafeMutableBytes {
                    Self.decrypt(parts, associatedData, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<count]))
                }
                guard opened else { throw Self.failedAuthentication(sealed) }
                return count
            }
        #endif
        buffer = try swiftCryptoOpen(parts, sealed: sealed, associatedData: associatedData)
        return buffer.count
    }

    #if canImport(CCryptoBoringSSL)
        /// Opens `parts` into `output` (its ciphertext's size) with BoringSSL; `false` when the tag fails.
        private static func decrypt(
            _ parts: Parts, _ associatedData: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            AESGCM.open(
                key: parts.key.contexts, counter: parts.counter, marker: parts.marker, associatedData: associatedData,
                ciphertext: parts.ciphertext, tag: parts.tag, into: output)
        }
    #endif

    /// Opens `parts` through swift-crypto's `AES.GCM` (where BoringSSL cannot be imported).
    private func swiftCryptoOpen(
        _ parts: Parts, sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer
    ) throws(EncryptionFailure) -> [UInt8] {
        let (marker, key, counter, ciphertext, tag) = (
            parts.marker, parts.key, parts.counter, parts.ciphertext, parts.tag
        )
        let plaintext: Data
        do {
            plaintext = try Self.withNonce(counter) { nonce in
                let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
                return try Self.withMarkedAssociatedData(marker, associatedData) { associatedData in
                    try AES.GCM.open(box, using: key.key, authenticating: associatedData)
                }
            }
        } catch {
            throw Self.failedAuthentication(sealed)
        }
        return [UInt8](unsafeUninitializedCapacity: plaintext.count) { buffer, initialized in
            initialized = plaintext.copyBytes(to: buffer)
        }
    }

    /// The first 16 bytes of HMAC-SHA256(token key, `bytes`).
    ///
    /// Tokens of short inputs are remembered (up to ``tokenCacheLimit`` of them, then forgotten
    /// all at once): an index's values repeat (a locale, a tag, a status), and a lookup costs a
    /// tenth of the two SHA-256 blocks an HMAC takes. The key never changes for a cipher, so a
    /// remembered token is the token; nothing of it is ever stored but the tokens themselves.
    package func token(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard bytes.count <= Self.cachedTokenInputLimit else { return computeToken(bytes) }
        let input = TokenInput(bytes: Array(bytes))
        if let known = tokenCache.withLock({ $0[input] }) { return known }
        let token = computeToken(bytes)
        tokenCache.withLock { cache in
            if cache.count >= Self.tokenCacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[input] = token
        }
        return token
    }

    /// Tokens remembered at most, and the longest input remembered (so the cache holds at most
    /// about 1 MiB).
    static let tokenCacheLimit = 4096
    static let cachedTokenInputLimit = 192
    private let tokenCache = Mutex<[TokenInput: [UInt8]]>([:])

    /// An input remembered, hashed as one run of bytes (an array of bytes hashes byte by byte).
    private struct TokenInput: Hashable {
        let bytes: [UInt8]
        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    private func computeToken(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        #if canImport(CCryptoBoringSSL)
            return tokenState.token(bytes, count: Self.tokenByteCount)
        #else
            return swiftCryptoToken(bytes)
        #endif
    }

    /// ``token(_:)`` through swift-crypto's `HMAC` (where BoringSSL cannot be imported; elsewhere,
    /// for the tests that compare it with the pre-keyed states').
    package func swiftCryptoToken(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var authenticator = tokenAuthenticator
        authenticator.update(data: bytes)
        return authenticator.finalize().withUnsafeBytes { Array($0.prefix(Self.tokenByteCount)) }
    }

    /// The key of session `ref`: this instance's own, or derived once and cached; nil when its
    /// generation's data key is not held.
    private func sessionKey(of ref: SessionRef) -> SessionKey? {
        if ref == firstSession.ref, firstSessionLive.load(ordering: .acquiring) { return firstSession.key }
        if let own = session.withLock({ $0.id == ref.id && $0.generation == ref.generation ? $0.key : nil }) {
            return own
        }
        if let cached = otherSessions.withLock({ $0[ref] }) { return cached }
        guard let recordKey = recordKeys.withLock({ $0.key(of: ref.generation) }) else { return nil }
        let key = SessionKey(
            ref.id.bytes.withUnsafeBytes { KeySchedule.sessionKey(recordKey: recordKey, sessionID: $0) })
        otherSessions.withLock { cache in
            if cache.count >= Self.sessionCacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[ref] = key
        }
        return key
    }

    /// `body` given the nonce of `counter`: 4 zero bytes and the counter, big-endian.
    private static func withNonce<R>(_ counter: UInt64, _ body: (AES.GCM.Nonce) throws -> R) throws -> R {
        try withUnsafeTemporaryAllocation(byteCount: 12, alignment: 1) { bytes in
            bytes.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
            bytes.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
            return try body(AES.GCM.Nonce(data: UnsafeRawBufferPointer(bytes)))
        }
    }

    /// `body` given the marker byte followed by `associatedData`, in one contiguous buffer (on the
    /// stack when small).
    private static func withMarkedAssociatedData<R>(
        _ marker: UInt8, _ associatedData: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        try withUnsafeTemporaryAllocation(byteCount: 1 + associatedData.count, alignment: 1) { bytes in
            bytes[0] = marker
            UnsafeMutableRawBufferPointer(rebasing: bytes[1...]).copyMemory(from: associatedData)
            return try body(UnsafeRawBufferPointer(bytes))
        }
    }

    /// `SealingCipher(AES-256-GCM, redacted)`: never a key.
    package var description: String { "SealingCipher(AES-256-GCM, redacted)" }

    /// No children, so that `dump` shows no key.
    package var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}

#if canImport(CCryptoBoringSSL)
    /// HMAC-SHA256 keyed once (RFC 2104): BoringSSL's SHA-256 states after the key's inner and
    /// outer pads, copied by each token.
    struct TokenState: @unchecked Sendable {
        // Read only (copied by each token), never changed after `init`.
        private var inner = SHA256_CTX()
        private var outer = SHA256_CTX()

        init(key: SymmetricKey) {
            var block = [UInt8](repeating: 0, count: 64)
            key.withUnsafeBytes { key in
                guard let bytes = key.baseAddress, !key.isEmpty else { return }
                if key.count > block.count {
                    // A key longer than SHA-256's block is hashed first.
                    block.withUnsafeMutableBufferPointer { block in
                        _ = CCryptoBoringSSL_SHA256(
                            bytes.assumingMemoryBound(to: UInt8.self), key.count, block.baseAddress)
                    }
                } else {
                    block.withUnsafeMutableBytes { $0.copyMemory(from: key) }
                }
            }
            var pad = block.map { $0 ^ 0x36 }
            CCryptoBoringSSL_SHA256_Init(&inner)
            CCryptoBoringSSL_SHA256_Update(&inner, pad, pad.count)
            pad = block.map { $0 ^ 0x5C }
            CCryptoBoringSSL_SHA256_Init(&outer)
            CCryptoBoringSSL_SHA256_Update(&outer, pad, pad.count)
            for index in block.indices {
                block[index] = 0
                pad[index] = 0
            }
        }

        /// The first `count` (at most 32) bytes of the HMAC of `bytes`.
        func token(_ bytes: UnsafeRawBufferPointer, count: Int) -> [UInt8] {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest -> [UInt8] in
                guard let out = digest.baseAddress else { return [] }
                var context = inner
                if let data = bytes.baseAddress, !bytes.isEmpty {
                    CCryptoBoringSSL_SHA256_Update(&context, data, bytes.count)
                }
                CCryptoBoringSSL_SHA256_Final(out, &context)
                context = outer
                CCryptoBoringSSL_SHA256_Update(&context, out, 32)
                CCryptoBoringSSL_SHA256_Final(out, &context)
                return Array(digest.prefix(count))
            }
        }
    }
#endif
