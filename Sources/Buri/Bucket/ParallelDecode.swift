#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import BuriCodec
import BuriStorage
import Dispatch
import Synchronization

// Large object reads decode on every core. Decoding is most of a read's cost (a `Person` of four
// fields costs several times the storage step), and it needs nothing but the payload's bytes, so
// the calling thread walks the query's cursor as always (one snapshot, results in order, storage
// errors where they occur) and copies each payload into a batch; helper threads decode a batch
// while the caller collects the next, and the caller helps decode before it moves on. The results,
// their order and the first error are exactly those of the serial loop.
//
// Only for a `Sendable` `T`: its `init(from:)` then runs safely on another thread (a type whose
// `Decodable` conformance is isolated to an actor is not `Sendable`'s metatype, and reads serially
// through the unconstrained methods of `Bucket`).

extension Bucket where T: Sendable {
    /// The objects matching `query` (all objects, in key order, by default); a large result is
    /// decoded (on an encrypted database, also opened) on every core, with the same objects, order
    /// and first error as one thread would give.
    ///
    /// ```swift
    /// let twenties = try people.objects(.index("age", in: 20...29))
    /// ```
    @inlinable
    public func objects(_ query: Query = .all) throws(BuriError) -> [T] {
        let cursor = try cursor(query)
        let threshold = cursor.parallelThreshold
        var objects: [T] = []
        while let object = try cursor.next() {
            objects.append(object)
            if objects.count == threshold {
                try cursor.decodeRest(into: &objects)
                break
            }
        }
        return objects
    }
}

extension ObjectCursor where T: Sendable {
    /// After how many objects `Bucket.objects(_:)` hands the rest of the read to
    /// ``decodeRest(into:)``: `Int.max` (never) on one core or on an engine where each read is a
    /// round trip (its batched read-ahead stays as it is). Below it a read stays on one thread.
    @usableFromInline
    var parallelThreshold: Int {
        ParallelDecoding.helpers > 0 && !raw.reader.prefersBatchedReads ? tuning.threshold : Int.max
    }

    /// The database's ``ParallelDecoding/Tuning``.
    var tuning: ParallelDecoding.Tuning { raw.bucket.database.options.parallelDecoding }

    /// Decodes every remaining object, in order, onto `objects`, using the helper threads.
    /// Throws the first error the serial loop would have thrown; `objects` is then unspecified.
    @usableFromInline
    func decodeRest(into objects: inout [T]) throws(BuriError) {
        var running: ParallelDecoding.Job<T>?
        // On an encrypted database the helpers open the records too: the cipher's work is a large
        // part of a read, and the calling thread's walk is the part that does not spread.
        let opener = raw.opener
        raw.defersOpening = opener != nil
        defer { raw.defersOpening = false }
        let tuning = tuning
        let opening = opener.map {
            ParallelDecoding.Opening(
                opener: $0, recordPrefix: raw.recordPrefix, bucket: bucket.name, currentVersion: bucket.currentVersion)
        }
        // The storage of the batch last decoded, reused (no fresh pages to fault in per batch).
        var spare: ParallelDecoding.Batch?
        while true {
            var batch = spare ?? ParallelDecoding.Batch(capacity: tuning.batchSize)
            spare = nil
            var storageError: BuriError?
            var ended = false
            do {
                while batch.count < tuning.batchSize {
                    guard try raw.nextObject() else {
                        ended = true
                        break
                    }
                    if raw.currentRecordIsSealed {
                        batch.append(payload: raw.currentStoredRecord, cursor: raw, sealed: true)
                    } else if raw.currentSchemaVersion == bucket.currentVersion {
                        batch.append(payload: raw.currentPayload, cursor: raw)
                    } else if let upgraded = try bucket.upgraded(
                        raw.currentPayload, version: raw.currentSchemaVersion, key: raw.currentKey)
                    {
                        // An older record: its upgraded payload is what the helpers decode.
                        upgraded.withUnsafeBytes { batch.append(payload: $0, cursor: raw) }
                    } else {
                        batch.append(payload: raw.currentPayload, cursor: raw)
                    }
                }
            } catch {
                storageError = error
            }
            // The batch before this one precedes it: its objects, and its first error, come first.
            if let running {
                try finish(running, into: &objects)
                spare = running.takeBatch()
            }
            running = nil
            let job =
                batch.count > 0
                ? ParallelDecoding.Job<T>(
                    batch: batch, chunkSize: tuning.chunkSize, recordDecoder: bucket.recordDecoder,
                    readsNested: bucket.readsNested, opening: opening) : nil
            if let job {
                job.start()
                if ended || storageError != nil { try finish(job, into: &objects) } else { running = job }
            }
            if let storageError { throw storageError }
            if ended { return }
        }
    }

    private func finish(_ job: ParallelDecoding.Job<T>, into objects: inout [T]) throws(BuriError) {
        guard let (index, error) = job.finish(into: &objects) else { return }
        if let failure = error as? ParallelDecoding.ReadFailure { throw failure.error }
        if error is ParallelDecoding.OlderRecord, let opening = job.opening {
            // A record of an older schema version, and every one after it in the batch, take the
            // serial path (its upgrade runs on this thread), with its errors in order.
            var buffer: [UInt8] = []
            var key: [UInt8] = []
            for position in index..<job.batch.count {
                let object: Result<T, BuriError>
                if job.batch.isSealed(position) {
                    let (version, payload) = try opening.open(job.batch, position, into: &buffer, key: &key)
                    object = buffer.withUnsafeBytes { opened in
                        Result { () throws(BuriError) -> T in
                            try bucket.decode(
                                UnsafeRawBufferPointer(rebasing: opened[payload]), version: version,
                                key: job.batch.key(position))
                        }
                    }
                } else {
                    // A payload the calling thread already read (and upgraded): decoded as the
                    // helpers decode it.
                    object = job.batch.withPayload(position) { payload in
                        Result { () throws(BuriError) -> T in
                            try bucket.decode(payload, version: bucket.currentVersion, key: job.batch.key(position))
                        }
                    }
                }
                objects.append(try object.get())
            }
            return
        }
        throw .decodingFailed(
            bucket: bucket.name, key: job.batch.key(index), type: String(describing: T.self),
            reason: String(describing: error))
    }
}

enum ParallelDecoding {
    /// The sizes of a parallel read.
    struct Tuning: Sendable {
        /// Objects decoded on the calling thread before any helper starts.
        var threshold: Int
        /// Objects per batch (payload copies held at a time: two batches).
        var batchSize: Int
        /// Objects per unit of work that a thread claims.
        var chunkSize: Int

        static let standard = Tuning(threshold: 2_048, batchSize: 4_096, chunkSize: 128)
    }

    /// Objects decoded on the calling thread before any helper starts (by default).
    static let threshold = Tuning.standard.threshold
    /// Objects per batch (by default).
    static let batchSize = Tuning.standard.batchSize
    /// Threads that decode besides the caller.
    static let helpers = Swift.max(0, Swift.min(ProcessInfo.processInfo.activeProcessorCount, 16) - 1)
    static let queue = DispatchQueue(label: "buri.decode", qos: .userInitiated, attributes: .concurrent)

    /// What the helpers need to open sealed records of a bucket.
    struct Opening: Sendable {
        let opener: RecordOpener
        let recordPrefix: [UInt8]
        let bucket: String
        let currentVersion: UInt64

        /// Opens sealed record `index` of `batch` into `buffer`: its schema version and where its
        /// payload lies in `buffer`. Fails as the serial read would: the record that does not
        /// open, or whose header does not parse, named with its bucket and key. `key` is scratch
        /// space for the record key (reused from one call to the next).
        func open(
            _ batch: Batch, _ index: Int, into buffer: inout [UInt8], key: inout [UInt8]
        ) throws(BuriError) -> (version: UInt64, payload: Range<Int>) {
            let count = try batch.withStored(index) { stored, objectKey throws(BuriError) -> Int in
                key.removeAll(keepingCapacity: true)
                key.append(contentsOf: recordPrefix)
                key.append(contentsOf: objectKey)
                let count = key.withUnsafeBytes { key in
                    Result { () throws(BuriError) -> Int in try opener.open(stored, key: key, into: &buffer) }
                }
                switch count {
                case .success(let count): return count
                case .failure(let error): throw error.attributed(to: bucket)
                }
            }
            do {
                let (version, offset) = try buffer.withUnsafeBytes {
                    try RecordHeader.versionAndPayloadOffset(UnsafeRawBufferPointer(rebasing: $0[..<count]))
                }
                return (version, offset..<count)
            } catch {
                throw .corruption(bucket: bucket, key: batch.key(index), index: nil, reason: "record header: \(error)")
            }
        }
    }

    /// A record that did not open or parse: its error as the serial read throws it.
    struct ReadFailure: Error {
        let error: BuriError
    }

    /// A sealed record of an older schema version: it is upgraded on the calling thread.
    struct OlderRecord: Error {}

    /// Copies of payloads (or of sealed records) and object keys, back to back. (A struct: a
    /// class's arrays would pay a dynamic exclusivity check on every append.)
    struct Batch {
        private(set) var bytes: [UInt8] = []
        /// Payload `i` is `bytes[payloadStarts[i] ..< keyStarts[i]]`, its key
        /// `bytes[keyStarts[i] ..< payloadStarts[i + 1]]`.
        private var payloadStarts: [Int] = [0]
        private var keyStarts: [Int] = []
        /// Whether entry `i` is a sealed record (header and payload, unopened) instead of a
        /// payload; empty while no entry is.
        private var sealed: [Bool] = []

        init(capacity: Int) {
            bytes.reserveCapacity(capacity * 96)
            payloadStarts.reserveCapacity(capacity + 1)
            keyStarts.reserveCapacity(capacity)
        }

        /// An empty batch that holds no storage.
        init(empty: Void) {}

        /// Empties the batch, keeping its storage.
        mutating func removeAll() {
            bytes.removeAll(keepingCapacity: true)
            payloadStarts.removeAll(keepingCapacity: true)
            payloadStarts.append(0)
            keyStarts.removeAll(keepingCapacity: true)
            sealed.removeAll(keepingCapacity: true)
        }

        var count: Int { keyStarts.count }

        mutating func append(payload: UnsafeRawBufferPointer, cursor: RawQueryCursor, sealed isSealed: Bool = false) {
            if isSealed || !sealed.isEmpty {
                if sealed.isEmpty { sealed = Array(repeating: false, count: count) }
                sealed.append(isSealed)
            }
            bytes.append(contentsOf: payload)
            keyStarts.append(bytes.count)
            cursor.appendCurrentObjectKey(to: &bytes)
            payloadStarts.append(bytes.count)
        }

        func withPayload<R>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try bytes.withUnsafeBytes {
                try body(UnsafeRawBufferPointer(rebasing: $0[payloadStarts[index]..<keyStarts[index]]))
            }
        }

        /// Whether entry `index` is a sealed record.
        func isSealed(_ index: Int) -> Bool { !sealed.isEmpty && sealed[index] }

        /// Lends entry `index`'s stored bytes and its object key's bytes.
        func withStored<R, E: Error>(
            _ index: Int, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(E) -> R
        ) throws(E) -> R {
            let result = bytes.withUnsafeBytes { all in
                Result { () throws(E) -> R in
                    try body(
                        UnsafeRawBufferPointer(rebasing: all[payloadStarts[index]..<keyStarts[index]]),
                        UnsafeRawBufferPointer(rebasing: all[keyStarts[index]..<payloadStarts[index + 1]]))
                }
            }
            return try result.get()
        }

        /// The object key (checked to be UTF-8 when the cursor read it).
        func key(_ index: Int) -> String {
            String(decoding: bytes[keyStarts[index]..<payloadStarts[index + 1]], as: UTF8.self)
        }
    }

    /// Decodes one batch into uninitialised memory, chunk by chunk, on whichever threads claim
    /// the chunks. Every chunk is written by one thread; `finish` reads them after all are done.
    final class Job<T: Decodable & Sendable>: @unchecked Sendable {
        // @unchecked: the batch is only read once the job starts; each chunk's slots and status
        // are written by the one thread that claimed it and read after `group.wait()`.
        private(set) var batch: Batch
        private let output: UnsafeMutablePointer<T>
        private let chunks: Int
        private let chunkSize: Int
        /// Per chunk: how many objects it initialised, and the error that stopped it.
        private let initialized: UnsafeMutablePointer<Int>
        private let failures: UnsafeMutablePointer<(any Error)?>
        private let nextChunk = Atomic<Int>(0)
        private let group = DispatchGroup()
        /// The bucket's `T(record:)` decoder, if `T` has one.
        private let recordDecoder: RecordDecoder<T>?
        /// Whether `T` is decoded through `init(from:)` (the bucket's answer, kept).
        private let readsNested: Bool
        /// How sealed records of the batch are opened (`nil` on a plaintext database).
        let opening: Opening?

        init(
            batch: Batch, chunkSize: Int, recordDecoder: RecordDecoder<T>?, readsNested: Bool, opening: Opening? = nil
        ) {
            self.chunkSize = Swift.max(1, chunkSize)
            self.readsNested = readsNested
            self.opening = opening
            self.batch = batch
            self.recordDecoder = recordDecoder
            output = .allocate(capacity: batch.count)
            chunks = (batch.count + self.chunkSize - 1) / self.chunkSize
            initialized = .allocate(capacity: chunks)
            initialized.initialize(repeating: 0, count: chunks)
            failures = .allocate(capacity: chunks)
            failures.initialize(repeating: nil, count: chunks)
        }

        deinit {
            output.deallocate()
            initialized.deallocate()
            failures.deinitialize(count: chunks)
            failures.deallocate()
        }

        /// Lets helper threads claim chunks (no more helpers than chunks beyond the caller's).
        func start() {
            for _ in 0..<Swift.min(helpers, chunks - 1) {
                group.enter()
                queue.async { [self] in
                    work()
                    group.leave()
                }
            }
        }

        /// The batch, emptied for reuse, once ``finish(into:)`` returned; the job is then done.
        func takeBatch() -> Batch {
            var taken = Batch(empty: ())
            swap(&taken, &batch)
            taken.removeAll()
            return taken
        }

        private func work() {
            // A local copy: no exclusivity check per access to the property.
            let batch = batch
            while true {
                let chunk = nextChunk.add(1, ordering: .relaxed).oldValue
                guard chunk < chunks else { return }
                let start = chunk * chunkSize
                let end = Swift.min(start + chunkSize, batch.count)
                let decoder = CBORDecoder()
                let recordDecoder = recordDecoder
                let readsNested = readsNested
                var opened: [UInt8] = []
                var key: [UInt8] = []
                // One closure per chunk, not per object.
                let decode = { (payload: UnsafeRawBufferPointer) throws -> T in
                    if let recordDecoder { return try recordDecoder(payload) }
                    return try decoder.decode(T.self, from: payload, readsNested: readsNested)
                }
                for index in start..<end {
                    do {
                        let object: T
                        if let opening, batch.isSealed(index) {
                            let version: UInt64
                            let payload: Range<Int>
                            do {
                                (version, payload) = try opening.open(batch, index, into: &opened, key: &key)
                            } catch {
                                throw ReadFailure(error: error)
                            }
                            guard version == opening.currentVersion else { throw OlderRecord() }
                            object = try opened.withUnsafeBytes {
                                try decode(UnsafeRawBufferPointer(rebasing: $0[payload]))
                            }
                        } else {
                            object = try batch.withPayload(index, decode)
                        }
                        (output + index).initialize(to: object)
                        initialized[chunk] += 1
                    } catch {
                        failures[chunk] = error
                        break
                    }
                }
            }
        }

        /// Decodes what the helpers have not claimed, waits for them, and appends the objects to
        /// `objects`; or, if any failed, appends the objects before the first failure in order
        /// and returns it.
        func finish(into objects: inout [T]) -> (index: Int, error: any Error)? {
            work()
            group.wait()
            var firstFailure: (Int, any Error)?
            for chunk in 0..<chunks {
                if let error = failures[chunk] {
                    firstFailure = (chunk * chunkSize + initialized[chunk], error)
                    break
                }
            }
            let count = batch.count
            if let firstFailure {
                // Every chunk before the failing one is whole.
                objects.append(contentsOf: UnsafeBufferPointer(start: output, count: firstFailure.0))
                output.deinitialize(count: firstFailure.0)
                for chunk in 0..<chunks where chunk * chunkSize + initialized[chunk] > firstFailure.0 {
                    let from = Swift.max(chunk * chunkSize, firstFailure.0)
                    (output + from).deinitialize(count: chunk * chunkSize + initialized[chunk] - from)
                }
                return firstFailure
            }
            // No `reserveCapacity(objects.count + count)` here: it reallocates to exactly that size,
            // so every batch would copy the whole array (quadratic: 6 µs per object at 1,000,000);
            // `append(contentsOf:)` grows the array geometrically.
            objects.append(contentsOf: UnsafeBufferPointer(start: output, count: count))
            output.deinitialize(count: count)
            return nil
        }
    }
}
