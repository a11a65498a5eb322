import Buri

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif

/// The first `limit + 1` bytes at most of the file at `path` (a key or passphrase file), read
/// with the system's calls so that a pipe or `/dev/stdin` works and a huge file is not read whole.
///
/// - Throws: `EncryptionFailure.invalidKey` naming `what` and `path` with the system's
///   reason: missing, not readable, a directory.
func readKeyMaterial(at path: String, what: String, limit: Int) throws(EncryptionFailure) -> [UInt8] {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else {
        let code = errno
        if code == ENOENT { throw .invalidKey("the \(what) '\(path)' does not exist") }
        throw .invalidKey("the \(what) '\(path)' cannot be opened: \(systemMessage(code))")
    }
    defer { close(descriptor) }
    var bytes = [UInt8](repeating: 0, count: limit + 1)
    var count = 0
    while count < bytes.count {
        let result = bytes.withUnsafeMutableBytes { buffer in
            read(descriptor, buffer.baseAddress! + count, buffer.count - count)
        }
        if result == 0 { break }
        if result < 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EISDIR { throw .invalidKey("the \(what) '\(path)' is a directory, not a file") }
            throw .invalidKey("the \(what) '\(path)' cannot be read: \(systemMessage(code))")
        }
        count += result
    }
    bytes.removeSubrange(count...)
    return bytes
}

private func systemMessage(_ code: Int32) -> String {
    guard let message = strerror(code) else { return "error \(code)" }
    return String(cString: message)
}
