// OpenSSL's libcrypto (Debian libssl-dev), for BuriEncryption's AES-256-GCM on Linux: its EVP
// interface takes the key and nonce as bytes, with no generic wrapper in between.
#include <openssl/evp.h>
