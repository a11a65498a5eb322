#!/usr/bin/env python3
"""Known-answer vectors of BuriEncryption (encryption headers version 1, 2 and 3), computed
independently of the Swift code from the specification (docs/FORMAT.md §4a), so that VectorTests checks the Swift
implementation against another one, and another implementation can check itself against both.

    python3 Tests/BuriEncryptionTests/Vectors/make_vectors.py

Needs the `cryptography` package (pip install cryptography) for AES-GCM and for cross-checks.
HKDF-SHA256 (RFC 5869) is written out here from the RFC with the standard library's HMAC and
checked against `cryptography`'s; scrypt is OpenSSL's (hashlib), checked against RFC 7914 §12 and
against `cryptography`'s. The printed hex is what VectorTests.swift holds.
"""

import hashlib
import hmac

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869: extract, then expand."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    result = okm[:length]
    check = HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)
    assert result == check, "the hand-written HKDF disagrees with cryptography's"
    return result


def scrypt(passphrase: bytes, salt: bytes, log_n: int, r: int, p: int, length: int) -> bytes:
    n = 1 << log_n
    result = hashlib.scrypt(passphrase, salt=salt, n=n, r=r, p=p, maxmem=2**31 - 1, dklen=length)
    assert result == Scrypt(salt=salt, length=length, n=n, r=r, p=p).derive(passphrase)
    return result


MAGIC = b"BURIKEY"
VERSION = 1
VERSION_2 = 2
MARKER = 0xE1


def key_schedule(master: bytes, database_salt: bytes):
    record = hkdf_sha256(master, database_salt, b"buri v1 records", 32)
    token = hkdf_sha256(master, database_salt, b"buri v1 tokens", 32)
    check = hkdf_sha256(master, database_salt, b"buri v1 key check", 32)
    key_check = hmac.new(check, b"buri key check v1", hashlib.sha256).digest()
    return record, token, key_check


def raw_key_header(key: bytes, database_salt: bytes) -> bytes:
    _, _, key_check = key_schedule(key, database_salt)
    return MAGIC + bytes([VERSION, 1]) + database_salt + key_check


def passphrase_header(passphrase: bytes, log_n, r, p, scrypt_salt: bytes, database_salt: bytes) -> bytes:
    master = scrypt(passphrase, scrypt_salt, log_n, r, p, 32)
    _, _, key_check = key_schedule(master, database_salt)
    return MAGIC + bytes([VERSION, 2, log_n, r, p]) + scrypt_salt + database_salt + key_check


def user_master_v2(kind: int, key_or_passphrase: bytes, cost, scrypt_salt: bytes) -> bytes:
    """The raw key, or the passphrase stretched with scrypt (as in version 1)."""
    if kind == 1:
        return key_or_passphrase
    log_n, r, p = cost
    return scrypt(key_or_passphrase, scrypt_salt, log_n, r, p, 32)


def header_v2(kind, key_or_passphrase, cost, scrypt_salt, key_salt, database_salt, nonce, data_master) -> bytes:
    """Version 2: the user's key wraps the data master with AES-256-GCM under
    HKDF-SHA256(user master, salt: key salt, info: "buri v2 key wrap"); the associated data is
    every header byte before the nonce."""
    prefix = MAGIC + bytes([VERSION_2, kind])
    if kind == 2:
        prefix += bytes(cost) + scrypt_salt
    prefix += key_salt + database_salt
    master = user_master_v2(kind, key_or_passphrase, cost, scrypt_salt)
    kek = hkdf_sha256(master, key_salt, b"buri v2 key wrap", 32)
    wrapped = AESGCM(kek).encrypt(nonce, data_master, prefix)
    assert len(wrapped) == 48
    return prefix + nonce + wrapped


def unwrap_v2(header: bytes, kind, key_or_passphrase) -> bytes:
    """The data master of a version 2 header, read back from the bytes alone (a cross-check)."""
    assert header[:7] == MAGIC and header[7] == VERSION_2 and header[8] == kind
    offset, cost, scrypt_salt = 9, None, b""
    if kind == 2:
        cost = tuple(header[9:12])
        scrypt_salt = header[12:28]
        offset = 28
    key_salt = header[offset:offset + 16]
    nonce_at = offset + 32
    master = user_master_v2(kind, key_or_passphrase, cost, scrypt_salt)
    kek = hkdf_sha256(master, key_salt, b"buri v2 key wrap", 32)
    return AESGCM(kek).decrypt(header[nonce_at:nonce_at + 12], header[nonce_at + 12:], header[:nonce_at])


def seal(record_key: bytes, session_id: bytes, counter: int, plaintext: bytes, associated_data: bytes) -> bytes:
    session_key = hkdf_sha256(record_key, session_id, b"buri v1 session", 32)
    nonce = bytes(4) + counter.to_bytes(8, "big")
    ciphertext_and_tag = AESGCM(session_key).encrypt(nonce, plaintext, bytes([MARKER]) + associated_data)
    return bytes([MARKER]) + session_id + counter.to_bytes(8, "big") + ciphertext_and_tag


def header_v3(key, key_salt, database_salt, nonce, data_master, current, current_master, retiring, retiring_master):
    """Version 3 (a raw key): the record-key generations readable after the database salt
    (u32 BE each, 0xFFFFFFFF for no retiring one), then the nonce, then the data master and the two
    record masters (zeros for none, or for generation 0) wrapped as in version 2."""
    generations = current.to_bytes(4, "big") + (0xFFFFFFFF if retiring is None else retiring).to_bytes(4, "big")
    prefix = MAGIC + bytes([3, 1]) + key_salt + database_salt + generations
    kek = hkdf_sha256(key, key_salt, b"buri v2 key wrap", 32)
    wrapped = AESGCM(kek).encrypt(nonce, data_master + current_master + retiring_master, prefix)
    assert len(wrapped) == 112
    return prefix + nonce + wrapped


def seal_rotated(record_key: bytes, generation: int, session_id: bytes, counter: int, plaintext: bytes,
                 associated_data: bytes) -> bytes:
    """A value sealed under generation g >= 1: marker 0xE2, u32 BE g, then as generation 0, with
    0xE2 as the first byte of the associated data."""
    session_key = hkdf_sha256(record_key, session_id, b"buri v1 session", 32)
    nonce = bytes(4) + counter.to_bytes(8, "big")
    body = AESGCM(session_key).encrypt(nonce, plaintext, bytes([0xE2]) + associated_data)
    return bytes([0xE2]) + generation.to_bytes(4, "big") + session_id + counter.to_bytes(8, "big") + body


def token(token_key: bytes, value: bytes) -> bytes:
    return hmac.new(token_key, value, hashlib.sha256).digest()[:16]


def main():
    # RFC 7914 §12, the second vector.
    rfc = scrypt(b"password", b"NaCl", 10, 8, 16, 64)
    assert rfc.hex() == (
        "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
        "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
    )
    print(f"scrypt RFC 7914 §12:  {rfc.hex()}")

    raw_key = bytes(range(0x00, 0x20))
    database_salt = bytes(range(0xA0, 0xB0))
    scrypt_salt = bytes(range(0xB0, 0xC0))
    session_id = bytes(range(0xC0, 0xD0))

    record_key, token_key, key_check = key_schedule(raw_key, database_salt)
    print(f"raw key header:       {raw_key_header(raw_key, database_salt).hex()}")
    print(f"raw key key check:    {key_check.hex()}")

    phrase = "correct horse battery staple".encode()
    print(f"passphrase header:    {passphrase_header(phrase, 10, 8, 1, scrypt_salt, database_salt).hex()}")

    plaintext = b"Buri\x00sealed \xe2\x9c\x93 value"
    associated_data = b"\x01people\x00alice"
    sealed = seal(record_key, session_id, 0x0102030405060708, plaintext, associated_data)
    print(f"sealed plaintext:     {plaintext.hex()}")
    print(f"sealed assoc. data:   {associated_data.hex()}")
    print(f"sealed value:         {sealed.hex()}")
    # Padded (on LevelDB): marker 0xE9 (0xE1 | 0x08), the associated data still starts with 0xE1,
    # then the padding's zero bytes and their count, u16 BE.
    padded = bytes([MARKER | 0x08]) + sealed[1:] + bytes(8) + (8).to_bytes(2, "big")
    print(f"sealed value, padded by 8: {padded.hex()}")
    print(f"sealed empty (c=0):   {seal(record_key, session_id, 0, b'', b'').hex()}")
    print(f"token of 'alice@example.com': {token(token_key, b'alice@example.com').hex()}")

    # Version 2: the same user keys wrap a fixed data master; the data keys come from it.
    data_master = bytes(range(0x40, 0x60))
    key_salt = bytes(range(0xD0, 0xE0))
    nonce = bytes(range(0xE0, 0xEC))
    raw_v2 = header_v2(1, raw_key, None, b"", key_salt, database_salt, nonce, data_master)
    assert len(raw_v2) == 101 and unwrap_v2(raw_v2, 1, raw_key) == data_master
    print(f"v2 raw key header:    {raw_v2.hex()}")
    phrase_v2 = header_v2(2, phrase, (10, 8, 1), scrypt_salt, key_salt, database_salt, nonce, data_master)
    assert len(phrase_v2) == 120 and unwrap_v2(phrase_v2, 2, phrase) == data_master
    print(f"v2 passphrase header: {phrase_v2.hex()}")
    v2_record_key, v2_token_key, _ = key_schedule(data_master, database_salt)
    print(f"v2 token of 'alice@example.com': {token(v2_token_key, b'alice@example.com').hex()}")
    print(f"v2 sealed empty (c=0): {seal(v2_record_key, session_id, 0, b'', b'').hex()}")

    # Version 3: a rotation under way from generation 0 to 1, whose record master is fixed.
    record_master = bytes(range(0x60, 0x80))
    raw_v3 = header_v3(raw_key, key_salt, database_salt, nonce, data_master, 1, record_master, 0, bytes(32))
    assert len(raw_v3) == 173
    print(f"v3 raw key header:    {raw_v3.hex()}")
    g1_record_key = hkdf_sha256(record_master, database_salt, b"buri v3 records", 32)
    print(f"v3 sealed value (g=1, c=7): {seal_rotated(g1_record_key, 1, session_id, 7, plaintext, associated_data).hex()}")
    print(f"v3 token of 'alice@example.com': {token(v2_token_key, b'alice@example.com').hex()}")


if __name__ == "__main__":
    main()
