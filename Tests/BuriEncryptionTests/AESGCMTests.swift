import Crypto
import Foundation
import Synchronization
import Testing

@testable import BuriEncryption

#if canImport(CCryptoBoringSSL)
    /// Records are sealed through BoringSSL's AEAD calls (`AESGCM`) and tokens made from pre-keyed
    /// SHA-256 states where BoringSSL can be imported, through swift-crypto's generic API
    /// elsewhere: both must give the same bytes, and each must open the other's.
    @Suite("AES-256-GCM: BoringSSL's one-call AEAD and swift-crypto's agree byte for byte")
    struct AESGCMTests {
        @Test("tokens: HMAC-SHA256 from pre-keyed SHA-256 states equals swift-crypto's, for every small length")
        func tokensAgree() throws {
            var generator = SystemRandomNumberGenerator()
            for length in Array(0...200) + [1000, 65_537] {
                let key = DatabaseKey.random()
                let cipher = try key.unlockCipher(header: try key.newHeader())
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let token = bytes.withUnsafeBytes { cipher.token($0) }
                #expect(token.count == 16)
                #expect(token == bytes.withUnsafeBytes { cipher.swiftCryptoToken($0) }, "length \(length)")
            }
        }

        @Test("remembered tokens are the tokens: asked again, past the cache's limit, and from many threads")
        func rememberedTokensAgree() throws {
            let (key, otherKey) = (DatabaseKey.random(), DatabaseKey.random())
            let cipher = try key.unlockCipher(header: try key.newHeader())
            let other = try otherKey.unlockCipher(header: try otherKey.newHeader())
            // More inputs than the cache holds, each asked three times, on four threads at once;
            // lengths around the longest input remembered.
            let limit = SealingCipher.cachedTokenInputLimit
            let inputs: [[UInt8]] = (0..<(SealingCipher.tokenCacheLimit + 500)).map { n in
                let length = [0, 1, 7, 13, limit - 1, limit, limit + 1][n % 7]
                return (0..<length).map { UInt8(truncatingIfNeeded: n &* 31 &+ $0) } + Array("\(n)".utf8)
            }
            let mismatches = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for round in 0..<3 {
                    for (n, input) in inputs.enumerated() where (n + thread + round) % 2 == 0 {
                        let token = input.withUnsafeBytes { cipher.token($0) }
                        if token != input.withUnsafeBytes({ cipher.swiftCryptoToken($0) }) {
                            mismatches.withLock { $0 += 1 }
                        }
                    }
                }
            }
            #expect(mismatches.withLock { $0 } == 0)
            // Another key's tokens are its own, whatever the first cipher remembers.
            for input in inputs.prefix(50) {
                #expect(
                    input.withUnsafeBytes { other.token($0) } == input.withUnsafeBytes { other.swiftCryptoToken($0) })
                #expect(input.withUnsafeBytes { other.token($0) } != input.withUnsafeBytes { cipher.token($0) })
            }
        }

        @Test("random keys, counters, associated data and plaintexts of every small length and some large ones")
        func theTwoImplementationsAgree() throws {
            var generator = SystemRandomNumberGenerator()
            let lengths = Array(0...70) + [255, 256, 4095, 65_537, 1 << 20]
            for length in lengths {
                let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let counter = UInt64.random(in: 0...UInt64.max, using: &generator)
                let associatedData = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
                let plaintext = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                // swift-crypto: nonce 4 zero bytes and the counter, associated data the marker and the rest.
                var nonce = [UInt8](repeating: 0, count: 4)
                withUnsafeBytes(of: counter.bigEndian) { nonce += $0 }
                let box = try AES.GCM.seal(
                    plaintext, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: nonce),
                    authenticating: [sealedValueMarkerForTests] + associatedData)
                let expected = Array(box.ciphertext) + Array(box.tag)
                var sealed = [UInt8](repeating: 0, count: length + 16)
                let contexts = key.withUnsafeBytes { AESGCM.Key($0) }
                let ok = contexts.withUnsafeKey { key in
                    associatedData.withUnsafeBytes { associatedData in
                        plaintext.withUnsafeBytes { plaintext in
                            sealed.withUnsafeMutableBytes { output in
                                AESGCM.seal(
                                    key: key, counter: counter, marker: sealedValueMarkerForTests,
                                    associatedData: associatedData, plaintext: plaintext, into: output)
                            }
                        }
                    }
                }
                #expect(ok)
                #expect(sealed == expected, "length \(length)")
                // AESGCM opens it, and refuses it with a flipped bit anywhere or other associated data.
                func opens(_ value: [UInt8], _ data: [UInt8]) -> [UInt8]? {
                    var output = [UInt8](repeating: 0, count: length)
                    let opened = contexts.withUnsafeKey { key in
                        data.withUnsafeBytes { data in
                            value.withUnsafeBytes { value in
                                output.withUnsafeMutableBytes { output in
                                    AESGCM.open(
                                        key: key, counter: counter, marker: sealedValueMarkerForTests,
                                        associatedData: data,
                                        ciphertext: UnsafeRawBufferPointer(rebasing: value[..<length]),
                                        tag: UnsafeRawBufferPointer(rebasing: value[length...]), into: output)
                                }
                            }
                        }
                    }
                    return opened ? output : nil
                }
                #expect(opens(sealed, associatedData) == plaintext)
                // Contexts are reused: a failed open leaves the next ones right.
                var flipped = sealed
                flipped[Int.random(in: 0..<flipped.count, using: &generator)] ^=
                    1 << UInt8.random(in: 0...7, using: &generator)
                #expect(opens(flipped, associatedData) == nil)
                #expect(opens(sealed, associatedData + [0]) == nil)
                #expect(opens(sealed, associatedData) == plaintext)
            }
        }
    }

    private let sealedValueMarkerForTests: UInt8 = 0xE1

    extension AESGCM.Key {
        /// Lends itself to `body`, as the tests' calls are written for a key in hand.
        fileprivate func withUnsafeKey<R>(_ body: (AESGCM.Key) -> R) -> R { body(self) }
    }
#endif
