import Buri

// The two paths of `objects(_:)` that the parallel-read tests compare: whatever the parallel one
// does, it must return what the serial cursor returns, or fail with the same first error.

extension Bucket {
    /// The serial path: the streaming cursor, object by object.
    public func serialRead(_ query: Query) -> Result<[T], BuriError> {
        do throws(BuriError) {
            let cursor = try cursor(query)
            var objects: [T] = []
            while let object = try cursor.next() { objects.append(object) }
            return .success(objects)
        } catch {
            return .failure(error)
        }
    }
}

extension Bucket where T: Sendable {
    /// `objects(_:)`, which decodes a large result on several threads.
    public func parallelRead(_ query: Query) -> Result<[T], BuriError> {
        do throws(BuriError) {
            return .success(try objects(query))
        } catch {
            return .failure(error)
        }
    }
}

/// Texts that differ only in bytes, for object fields: the two canonically equal spellings of
/// "é", a NUL, a long run and the empty text, by `i % 5`.
public func edgeText(_ i: Int) -> String {
    switch i % 5 {
    case 0: "\u{E9}\(i)"
    case 1: "e\u{301}\(i)"
    case 2: "nul\u{0}\(i)"
    case 3: String(repeating: "x", count: i % 300)
    default: ""
    }
}
