import BuriStorage

// async/await: the same calls as the blocking API, doing their storage work on Buri's storage
// queue (see docs/OBSERVATION.md, "Which calls block, which suspend"). The caller's executor —
// the main actor, an actor, the cooperative pool — is free while LevelDB reads or writes.

extension BuriDatabase {
    /// Runs `body` as one transaction (see ``write(_:)-1pxia``) on Buri's storage queue: the caller
    /// suspends while the transaction waits for the writer lock and commits.
    ///
    /// `body` runs synchronously on that queue, so it cannot `await`; gather what it needs first.
    ///
    /// ```swift
    /// try await db.write { tx in
    ///     try tx.bucket(Person.self).store(person)
    ///     try tx.bucket(Order.self).store(order)    // both or neither
    /// }
    /// ```
    public func write<R: Sendable>(_ body: @escaping @Sendable (BuriTransaction) throws -> R) async throws -> R {
        let result: Result<Result<R, any Error>, BuriError> = await StorageQueue.result {
            [self] () throws(BuriError) -> Result<R, any Error> in
            do {
                return .success(try write(body))
            } catch let error as BuriError {
                throw error
            } catch {
                return .failure(error)  // the app's own error from `body`: rolled back, passed on
            }
        }
        return try result.mapError { $0 as any Error }.flatMap { $0 }.get()
    }

    /// Runs `body` with one consistent snapshot of every bucket (see ``read(_:)-13h2a``) on Buri's
    /// storage queue.
    ///
    /// ```swift
    /// let total = try await db.read { tx in try tx.bucket(Person.self).count() }
    /// ```
    public func read<R: Sendable>(_ body: @escaping @Sendable (BuriTransaction) throws -> R) async throws -> R {
        let result: Result<Result<R, any Error>, BuriError> = await StorageQueue.result {
            [self] () throws(BuriError) -> Result<R, any Error> in
            do {
                return .success(try read(body))
            } catch let error as BuriError {
                throw error
            } catch {
                return .failure(error)
            }
        }
        return try result.mapError { $0 as any Error }.flatMap { $0 }.get()
    }
}
