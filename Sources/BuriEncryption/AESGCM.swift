#if canImport(CCryptoBoringSSL)
    import CCryptoBoringSSL

    /// AES-256-GCM through BoringSSL's one-call AEAD interface (the copy swift-crypto builds and
    /// links anyway), byte for byte what swift-crypto's `AES.GCM` computes — the known-answer
    /// vectors in `VectorTests` hold for both — without its generic `DataProtocol` calls and `Data`
    /// copies, and without OpenSSL 3's EVP layer (a parameter lookup per call, an update per
    /// piece of associated data), which together cost several times the cipher's own work on a
    /// record of a few hundred bytes.
    ///
    /// The nonce is four zero bytes and the counter (`docs/FORMAT.md` §4a); the associated data is
    /// the marker byte followed by the value's key.
    enum AESGCM {
        static var isAvailable: Bool { true }

        /// One key, set up once (the AES key schedule and GCM's hash key) and shared by every call:
        /// BoringSSL's seal and open only read it, so calls on several threads need no lock.
        final class Key: @unchecked Sendable {
            private let context: UnsafeMutablePointer<EVP_AEAD_CTX>
            /// Whether BoringSSL took the key (only a key of another size is refused).
            private let ready: Bool

            init(_ key: UnsafeRawBufferPointer) {
                context = .allocate(capacity: 1)
                context.initialize(to: EVP_AEAD_CTX())
                ready =
                    CCryptoBoringSSL_EVP_AEAD_CTX_init(
                        context, CCryptoBoringSSL_EVP_aead_aes_256_gcm(), key.bytes, key.count, 16, nil) == 1
            }

            deinit {
                if ready { CCryptoBoringSSL_EVP_AEAD_CTX_cleanup(context) }
                context.deallocate()
            }

            /// Runs `body` with the initialized context; `false` when the key was refused.
            func withContext(_ body: (UnsafePointer<EVP_AEAD_CTX>) -> Bool) -> Bool {
                ready && body(context)
            }
        }

        /// Seals `plaintext` into `output` (its count plus 16 bytes: ciphertext, then tag).
        static func seal(
            key: Key, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            guard output.count == plaintext.count + 16 else { return false }
            return key.withContext { context in
                withNonce(counter) { nonce in
                    withAssociatedData(marker, associatedData) { data in
                        var tagCount = 0
                        return CCryptoBoringSSL_EVP_AEAD_CTX_seal_scatter(
                            context, output.bytes(at: 0), output.bytes(at: plaintext.count), &tagCount, 16, nonce, 12,
                            plaintext.bytes ?? nonce, plaintext.count, nil, 0, data.bytes, data.count) == 1
                            && tagCount == 16
                    }
                }
            }
        }

        /// Opens `ciphertext` (without its tag) into `output` (the same count); `false` when the tag
        /// does not authenticate it and its associated data.
        static func open(
            key: Key, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            guard tag.count == 16, output.count == ciphertext.count, let tagBytes = tag.bytes else { return false }
            return key.withContext { context in
                withNonce(counter) { nonce in
                    withAssociatedData(marker, associatedData) { data in
                        CCryptoBoringSSL_EVP_AEAD_CTX_open_gather(
                            context, output.bytes(at: 0), nonce, 12, ciphertext.bytes ?? nonce, ciphertext.count,
                            tagBytes, 16, data.bytes, data.count) == 1
                    }
                }
            }
        }

        private static func withNonce(_ counter: UInt64, _ body: (UnsafePointer<UInt8>) -> Bool) -> Bool {
            // 4 zero bytes, then the counter big-endian: 12 bytes of a 16-byte value on the stack.
            var nonce: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &nonce) { raw in
                raw.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
                guard let start = raw.baseAddress else { return false }
                return body(start.assumingMemoryBound(to: UInt8.self))
            }
        }

        /// The marker byte and `associatedData` as one buffer: a fixed one on the stack for a key
        /// of up to 63 bytes (most keys), a temporary allocation otherwise.
        private static func withAssociatedData(
            _ marker: UInt8, _ associatedData: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Bool
        ) -> Bool {
            let count = 1 + associatedData.count
            func fill(_ data: UnsafeMutableRawBufferPointer) -> Bool {
                data[0] = marker
                if !associatedData.isEmpty {
                    UnsafeMutableRawBufferPointer(rebasing: data[1..<count]).copyMemory(from: associatedData)
                }
                return body(UnsafeRawBufferPointer(rebasing: data[..<count]))
            }
            guard count <= 64 else {
                return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { fill($0) }
            }
            var short: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &short) { fill($0) }
        }
    }

    extension UnsafeRawBufferPointer {
        fileprivate var bytes: UnsafePointer<UInt8>? { baseAddress?.assumingMemoryBound(to: UInt8.self) }
    }

    extension UnsafeMutableRawBufferPointer {
        /// The address `offset` bytes in, for EVP's output (a non-null pointer even when empty).
        fileprivate func bytes(at offset: Int) -> UnsafeMutablePointer<UInt8> {
            (baseAddress ?? UnsafeMutableRawPointer(bitPattern: 1)!).advanced(by: offset).assumingMemoryBound(
                to: UInt8.self)
        }
    }
#endif
