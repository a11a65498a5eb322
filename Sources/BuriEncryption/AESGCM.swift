#if canImport(COpenSSL)
    import COpenSSL
    import Synchronization

    /// AES-256-GCM through OpenSSL's EVP interface (Linux), byte for byte what swift-crypto's
    /// `AES.GCM` computes — the known-answer vectors in `VectorTests` hold for both — without its
    /// generic `DataProtocol` calls and `Data` copies, which cost several times the cipher's own
    /// work on a record of a few hundred bytes.
    ///
    /// The nonce is four zero bytes and the counter (`docs/FORMAT.md` §4a); the associated data is
    /// given in two parts (the marker byte, then the value's key), which GCM authenticates as their
    /// concatenation.
    enum AESGCM {
        /// The algorithm, fetched once: OpenSSL 3 looks an algorithm up on every init otherwise.
        nonisolated(unsafe) fileprivate static let algorithm: OpaquePointer? = EVP_CIPHER_fetch(
            nil, "AES-256-GCM", nil)

        static var isAvailable: Bool { algorithm != nil }

        /// One key's cipher contexts, set up once (the AES key schedule and GCM's hash key) and
        /// lent to one call at a time: a call only sets its nonce. Most of the cost of a small
        /// record's seal or open is in that set-up otherwise.
        final class Key: @unchecked Sendable {
            private let key: [UInt8]
            /// Idle contexts, for sealing and for opening. Guarded by `lock`.
            private var idle: (sealing: [OpaquePointer], opening: [OpaquePointer]) = ([], [])
            private let lock = Mutex<Void>(())
            /// Contexts kept idle per direction; more calls at once make (and free) their own.
            private static let keptIdle = 8

            init(_ key: UnsafeRawBufferPointer) { self.key = Array(key) }

            deinit {
                for context in idle.sealing + idle.opening { EVP_CIPHER_CTX_free(context) }
            }

            /// Runs `body` with a context holding this key, for sealing or opening.
            func withContext(sealing: Bool, _ body: (OpaquePointer) -> Bool) -> Bool {
                let reused = lock.withLock { _ in sealing ? idle.sealing.popLast() : idle.opening.popLast() }
                guard let context = reused ?? makeContext(sealing: sealing) else { return false }
                let result = body(context)
                // A context whose call failed (a value that did not open) is not lent again.
                guard result else {
                    EVP_CIPHER_CTX_free(context)
                    return false
                }
                let kept = lock.withLock { _ -> Bool in
                    if sealing, idle.sealing.count < Self.keptIdle {
                        idle.sealing.append(context)
                        return true
                    }
                    if !sealing, idle.opening.count < Self.keptIdle {
                        idle.opening.append(context)
                        return true
                    }
                    return false
                }
                if !kept { EVP_CIPHER_CTX_free(context) }
                return result
            }

            private func makeContext(sealing: Bool) -> OpaquePointer? {
                guard let algorithm = AESGCM.algorithm, let context = EVP_CIPHER_CTX_new() else { return nil }
                let ready = key.withUnsafeBytes { key in
                    let bytes = key.bindMemory(to: UInt8.self).baseAddress
                    return sealing
                        ? EVP_EncryptInit_ex2(context, algorithm, bytes, nil, nil) == 1
                        : EVP_DecryptInit_ex2(context, algorithm, bytes, nil, nil) == 1
                }
                guard ready else {
                    EVP_CIPHER_CTX_free(context)
                    return nil
                }
                return context
            }
        }

        /// Seals `plaintext` into `output` (its count plus 16 bytes: ciphertext, then tag).
        static func seal(
            key: Key, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            guard output.count == plaintext.count + 16 else { return false }
            return key.withContext(sealing: true) { context in
                seal(
                    context, counter: counter, marker: marker, associatedData: associatedData, plaintext: plaintext,
                    into: output)
            }
        }

        private static func seal(
            _ context: OpaquePointer, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            withNonce(counter) { nonce in
                guard EVP_EncryptInit_ex2(context, nil, nil, nonce, nil) == 1,
                    authenticate(marker, associatedData, context: context, encrypting: true),
                    let written = update(context, plaintext, into: output, encrypting: true)
                else { return false }
                var final: Int32 = 0
                guard EVP_EncryptFinal_ex(context, output.bytes(at: written), &final) == 1, final == 0 else {
                    return false
                }
                return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, output.baseAddress! + plaintext.count)
                    == 1
            }
        }

        /// Opens `ciphertext` (without its tag) into `output` (the same count); `false` when the tag
        /// does not authenticate it and its associated data.
        static func open(
            key: Key, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            guard tag.count == 16, output.count == ciphertext.count else { return false }
            return key.withContext(sealing: false) { context in
                open(
                    context, counter: counter, marker: marker, associatedData: associatedData, ciphertext: ciphertext,
                    tag: tag, into: output)
            }
        }

        private static func open(
            _ context: OpaquePointer, counter: UInt64, marker: UInt8, associatedData: UnsafeRawBufferPointer,
            ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) -> Bool {
            withNonce(counter) { nonce in
                guard EVP_DecryptInit_ex2(context, nil, nil, nonce, nil) == 1,
                    authenticate(marker, associatedData, context: context, encrypting: false),
                    let written = update(context, ciphertext, into: output, encrypting: false),
                    EVP_CIPHER_CTX_ctrl(
                        context, EVP_CTRL_AEAD_SET_TAG, 16, UnsafeMutableRawPointer(mutating: tag.baseAddress))
                        == 1
                else { return false }
                var final: Int32 = 0
                return EVP_DecryptFinal_ex(context, output.bytes(at: written), &final) == 1 && final == 0
            }
        }

        private static func withNonce(_ counter: UInt64, _ body: (UnsafePointer<UInt8>) -> Bool) -> Bool {
            withUnsafeTemporaryAllocation(byteCount: 12, alignment: 8) { nonce in
                nonce.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
                nonce.storeBytes(of: counter.bigEndian, toByteOffset: 4, as: UInt64.self)
                return body(nonce.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }

        private static func authenticate(
            _ marker: UInt8, _ associatedData: UnsafeRawBufferPointer, context: OpaquePointer, encrypting: Bool
        ) -> Bool {
            func add(_ pointer: UnsafePointer<UInt8>, _ count: Int) -> Bool {
                var written: Int32 = 0
                return encrypting
                    ? EVP_EncryptUpdate(context, nil, &written, pointer, Int32(count)) == 1
                    : EVP_DecryptUpdate(context, nil, &written, pointer, Int32(count)) == 1
            }
            var marker = marker
            guard add(&marker, 1) else { return false }
            guard let bytes = associatedData.bytes, !associatedData.isEmpty else { return true }
            return associatedData.count <= Int(Int32.max) && add(bytes, associatedData.count)
        }

        /// Encrypts or decrypts `input` into `output` in pieces of at most 1 GiB (EVP counts in
        /// `Int32`); returns the bytes written.
        private static func update(
            _ context: OpaquePointer, _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
            encrypting: Bool
        ) -> Int? {
            var done = 0
            while done < input.count {
                let count = min(input.count - done, 1 << 30)
                var written: Int32 = 0
                let source = input.baseAddress!.assumingMemoryBound(to: UInt8.self) + done
                let target = output.bytes(at: done)
                let result =
                    encrypting
                    ? EVP_EncryptUpdate(context, target, &written, source, Int32(count))
                    : EVP_DecryptUpdate(context, target, &written, source, Int32(count))
                guard result == 1, Int(written) == count else { return nil }
                done += count
            }
            return done
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
