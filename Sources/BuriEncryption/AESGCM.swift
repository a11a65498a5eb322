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
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 12) { nonce in
                let raw = UnsafeMutableRawBufferPointer(nonce)
                raw.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
                raw.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
                guard let start = nonce.baseAddress else { return false }
                return body(start)
            }
        }

        /// The marker byte and `associatedData` as one buffer (on the stack for a short key).
        private static func withAssociatedData(
            _ marker: UInt8, _ associatedData: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Bool
        ) -> Bool {
            withUnsafeTemporaryAllocation(byteCount: 1 + associatedData.count, alignment: 1) { data in
                data[0] = marker
                if !associatedData.isEmpty {
                    UnsafeMutableRawBufferPointer(rebasing: data[1...]).copyMemory(from: associatedData)
                }
                return body(UnsafeRawBufferPointer(data))
            }
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
