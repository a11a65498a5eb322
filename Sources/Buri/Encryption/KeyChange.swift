import BuriStorage

extension BuriDatabase {
    /// Changes the key of this encrypted database to `newKey`, without rewriting its data: the
    /// database's data keys stay as they are, wrapped anew under `newKey` in its encryption header
    /// (`docs/FORMAT.md` §4a), which is the one key this commits. It takes the same time whatever
    /// the size of the database: a scrypt stretch or two for a passphrase, and one synced commit.
    ///
    /// From then on the database opens only with `newKey`; the old key gets
    /// ``BuriError/wrongEncryptionKey(path:reason:)`` and reads and writes nothing. This handle
    /// goes on working as before, and a later change on it starts from `newKey`. On an engine
    /// shared by several clients the commit is conditional on the header as read: if another
    /// client changed the key meanwhile, this change is tried again from that header, where the
    /// key this handle holds fails with ``BuriError/wrongEncryptionKey(path:reason:)``.
    ///
    /// ```swift
    /// var options = BuriOptions()
    /// options.encryption = try DatabaseKey(contentsOfFile: "notes.key")
    /// let db = try BuriDatabase(path: "notes.buri", options: options)
    /// try db.changeEncryptionKey(to: try DatabaseKey(passphrase: "a long new passphrase"))
    /// // Next time: options.encryption = try DatabaseKey(passphrase: "a long new passphrase")
    /// ```
    ///
    /// Changing the key retires the old key, not the data keys: whoever has the old key *and* a
    /// copy of the old header (an old backup, a copy of the files made before the change, or
    /// LevelDB files from before their next compaction) can still unwrap the data keys and read
    /// the database as it is now. After a key is *compromised*, copy the database into a new one
    /// instead, which gets new data keys: `buri export --decrypt`, then `buri restore` with the
    /// new key (`docs/SECURITY.md`).
    ///
    /// - Throws: ``BuriError/notEncrypted(path:)`` for a database opened without
    ///   ``BuriOptions/encryption``; ``BuriError/invalidEncryptionKey(reason:)`` when `newKey`
    ///   cannot take over (another kind of ``DatabaseEncryption``, an unusable passphrase cost, or
    ///   a header that would not keep the data keys); ``BuriError/wrongEncryptionKey(path:reason:)``
    ///   when the key this handle holds no longer opens the stored header. Nothing is written then.
    public func changeEncryptionKey(to newKey: any DatabaseEncryption) throws(BuriError) {
        guard isEncrypted, let cipher = indexTokens?.cipher, let first = currentEncryption.withLock({ $0 }) else {
            throw .notEncrypted(path: path)
        }
        // The new header is made before the writer lock is taken (scrypt takes a while), and made
        // again under it only if the stored header changed meanwhile.
        var made = try rekeyed(
            try storedEncryptionHeader(currentReader()), from: first, to: newKey, cipher: cipher)
        try performWrite(sync: true) { writer throws(BuriError) in
            // Read through the writer: on a shared engine the commit is conditional on it.
            let stored = try storedEncryptionHeader(writer.reader)
            if stored != made.stored {
                let current = currentEncryption.withLock { $0 } ?? first
                made = try rekeyed(stored, from: current, to: newKey, cipher: cipher)
            }
            writer.batch.put(Keyspace.encryptionKey, made.header)
            let header = made.header
            writer.afterCommit { [self] in
                currentEncryption.withLock { $0 = newKey }
                knownEncryptionHeader.withLock { $0 = header }
            }
        }
    }

    /// `stored` rewritten for `newKey` by `newKey` itself, checked before anything is written: it
    /// unlocks with `newKey`, to the data keys of `cipher` (this handle's), which seal and open
    /// and make tokens as before.
    private func rekeyed(
        _ stored: [UInt8], from current: any DatabaseEncryption, to newKey: any DatabaseEncryption,
        cipher: any DatabaseCipher
    ) throws(BuriError) -> (stored: [UInt8], header: [UInt8]) {
        let header: [UInt8]
        do {
            header = try newKey.rekeyedHeader(stored, from: current)
        } catch .wrongKey(let reason) {
            throw .wrongEncryptionKey(
                path: path,
                reason:
                    "the key this handle holds no longer opens its encryption header (did another client change the key?): \(reason)"
            )
        } catch {
            throw Self.keyFailure(error, path: path)
        }
        let unlocked: any DatabaseCipher
        do {
            unlocked = try newKey.unlock(header: header)
        } catch {
            throw .invalidEncryptionKey(
                reason:
                    "the header \(type(of: newKey)) made for the new key does not open with it (\(error.description)); nothing was written"
            )
        }
        guard Self.sameDataKeys(unlocked, cipher) else {
            throw .invalidEncryptionKey(
                reason:
                    "the header \(type(of: newKey)) made for the new key opens to other data keys than the database's, which would leave its data unreadable; nothing was written"
            )
        }
        return (stored, header)
    }

    /// Whether two ciphers have the same keys: equal tokens of one input, and what one seals the
    /// other opens.
    private static func sameDataKeys(_ a: any DatabaseCipher, _ b: any DatabaseCipher) -> Bool {
        let probe = Array("buri key change probe".utf8)
        return probe.withUnsafeBytes { probe in
            guard a.token(probe) == b.token(probe) else { return false }
            let sealed = a.seal(probe, associatedData: probe)
            let opened = sealed.withUnsafeBytes { sealed in try? b.open(sealed, associatedData: probe) }
            return opened.map { $0.elementsEqual(probe) } ?? false
        }
    }
}
