// OpenSSL's libcrypto (Debian libssl-dev), for BuriEncryption on Linux: AES-256-GCM through its
// EVP interface, which takes the key and nonce as bytes with no generic wrapper in between, and
// HMAC-SHA256 from SHA-256 states keyed once (the low-level SHA-256 calls OpenSSL 3 marks
// deprecated in favour of EVP, whose per-call setup costs more than a short token's hash).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>

/// HMAC-SHA256's two SHA-256 states after the key's inner and outer pads (RFC 2104).
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} buri_hmac_sha256_key;

/// Keys `state` with `key` (hashed first when longer than SHA-256's 64-byte block).
static inline void buri_hmac_sha256_init(buri_hmac_sha256_key *state, const unsigned char *key, size_t count) {
    unsigned char block[64];
    memset(block, 0, sizeof block);
    if (count > sizeof block) {
        SHA256(key, count, block);
    } else if (count > 0) {
        memcpy(block, key, count);
    }
    unsigned char pad[64];
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&state->inner);
    SHA256_Update(&state->inner, pad, sizeof pad);
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&state->outer);
    SHA256_Update(&state->outer, pad, sizeof pad);
    memset(block, 0, sizeof block);
    memset(pad, 0, sizeof pad);
}

/// HMAC-SHA256 of `count` bytes at `data` under the key `state` was keyed with, into `out` (32 bytes).
static inline void buri_hmac_sha256(const buri_hmac_sha256_key *state, const void *data, size_t count,
                                    unsigned char *out) {
    SHA256_CTX context = state->inner;
    unsigned char inner[32];
    SHA256_Update(&context, data, count);
    SHA256_Final(inner, &context);
    context = state->outer;
    SHA256_Update(&context, inner, sizeof inner);
    SHA256_Final(out, &context);
}
