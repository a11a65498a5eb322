#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif
import Foundation
import Synchronization

#if canImport(Glibc)
    private let systemConnect = Glibc.connect
#elseif canImport(Darwin)
    private let systemConnect = Darwin.connect
#elseif canImport(Musl)
    private let systemConnect = Musl.connect
#endif

/// A minimal HTTP/1.1 client over blocking POSIX sockets, for etcd's JSON gateway: POST with a
/// JSON body, a response with Content-Length or chunked encoding, kept-alive connections reused.
///
/// Written for this engine instead of using URLSession, whose Linux implementation stops the whole
/// process (a fatal error) when a member closes a connection without answering — exactly what a
/// crashing cluster member does.
final class HTTPConnections: Sendable {
    enum Failure: Error {
        /// Nothing reached the server (connect failed): safe to try elsewhere.
        case refused(String)
        /// The request may have reached the server.
        case lost(String)
    }

    struct Response {
        var status: Int
        var body: [UInt8]
    }

    let timeout: Double
    private let idle = Mutex<[String: [Int32]]>([:])

    init(timeout: Double) { self.timeout = timeout }

    deinit {
        for fds in idle.withLock({ $0.values }) { for fd in fds { close(fd) } }
    }

    /// POSTs `body` to `endpoint` (`host:port`) at `path`.
    func post(endpoint: String, path: String, body: [UInt8]) throws(Failure) -> Response {
        let request = Self.request(endpoint: endpoint, path: path, body: body)
        // A kept-alive connection the server closed meanwhile fails before any byte of an answer:
        // then (and only then) the request is sent again on a new connection.
        while let fd = idle.withLock({ $0[endpoint]?.popLast() }) {
            switch exchange(fd: fd, request: request) {
            case .success(let (response, keep)):
                if keep { give(fd, endpoint) } else { close(fd) }
                return response
            case .failure(let failure):
                close(fd)
                if case .refused = failure { continue }  // stale: nothing was answered
                throw failure
            }
        }
        let fd = try connect(endpoint)
        switch exchange(fd: fd, request: request) {
        case .success(let (response, keep)):
            if keep { give(fd, endpoint) } else { close(fd) }
            return response
        case .failure(let failure):
            close(fd)
            if case .refused(let reason) = failure { throw .lost(reason) }  // fresh connection: it was sent
            throw failure
        }
    }

    private func give(_ fd: Int32, _ endpoint: String) {
        let surplus = idle.withLock { idle -> Bool in
            if idle[endpoint, default: []].count >= 16 { return true }
            idle[endpoint, default: []].append(fd)
            return false
        }
        if surplus { close(fd) }
    }

    static func request(endpoint: String, path: String, body: [UInt8]) -> [UInt8] {
        Array(
            "POST \(path) HTTP/1.1\r\nHost: \(endpoint)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                .utf8) + body
    }

    /// Sends the request and reads the whole answer. `.refused` when the connection ended before
    /// any byte of an answer arrived (a closed kept-alive connection).
    private func exchange(fd: Int32, request: [UInt8]) -> Result<(Response, Bool), Failure> {
        if let problem = Self.sendAll(fd, request) { return .failure(.refused(problem)) }
        var reader = Reader(fd: fd)
        do {
            guard let head = try reader.head() else {
                return .failure(.refused("the connection was closed before an answer"))
            }
            let body = try reader.body(head)
            return .success((Response(status: head.status, body: body), head.keepAlive))
        } catch {
            return .failure(.lost(error.reason))
        }
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> String? {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                return "send failed: \(String(cString: strerror(errno)))"
            }
            offset += sent
        }
        return nil
    }

    /// Why no connection to a member could be made.
    struct ConnectFailure: Error {
        enum Kind: Sendable {
            /// The host answered that nothing listens on the port (ECONNREFUSED).
            case refused
            /// No answer to the connection attempt within the timeout.
            case timedOut
            /// The host name does not resolve.
            case unresolvable
            /// Anything else the system said (no route, network unreachable, …).
            case other
        }
        var kind: Kind
        var message: String
    }

    /// A connected socket to `endpoint`, within the timeout, with read and write timeouts set.
    func connect(_ endpoint: String) throws(Failure) -> Int32 {
        switch open(endpoint) {
        case .success(let fd): return fd
        case .failure(let failure): throw .refused(failure.message)
        }
    }

    /// A connected socket to `endpoint`, or why there is none.
    func open(_ endpoint: String) -> Result<Int32, ConnectFailure> {
        guard let colon = endpoint.lastIndex(of: ":") else {
            return .failure(ConnectFailure(kind: .unresolvable, message: "'\(endpoint)' is not host:port"))
        }
        var host = String(endpoint[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = String(endpoint[endpoint.index(after: colon)...])
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, port, &hints, &list)
        guard status == 0, let first = list else {
            return .failure(
                ConnectFailure(
                    kind: .unresolvable, message: "cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(first) }
        var failure = ConnectFailure(kind: .other, message: "no address")
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let info = current {
            current = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd < 0 { failure = ConnectFailure(kind: .other, message: String(cString: strerror(errno))); continue }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            var result = systemConnect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen)
            if result < 0 && errno == EINPROGRESS {
                var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = poll(&poller, 1, Int32(timeout * 1000))
                if ready == 1 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    result = error == 0 ? 0 : -1
                    errno = error
                } else {
                    result = -1
                    errno = ETIMEDOUT
                }
            }
            if result != 0 {
                let code = errno
                let kind: ConnectFailure.Kind = code == ECONNREFUSED ? .refused : code == ETIMEDOUT ? .timedOut : .other
                // A refusal or timeout on one address says more than "no address" on another.
                if failure.kind == .other || kind != .other {
                    failure = ConnectFailure(
                        kind: kind, message: "connect to \(endpoint) failed: \(String(cString: strerror(code)))")
                }
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
            var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            return .success(fd)
        }
        return .failure(failure)
    }

    /// One request on a connection of its own (opened, used, closed): what a probe sends, so that
    /// a failure says exactly which step failed.
    func single(endpoint: String, path: String, body: [UInt8]) -> Result<Response, SingleFailure> {
        let fd: Int32
        switch open(endpoint) {
        case .success(let opened): fd = opened
        case .failure(let failure): return .failure(.connect(failure))
        }
        defer { close(fd) }
        switch exchange(fd: fd, request: Self.request(endpoint: endpoint, path: path, body: body)) {
        case .success(let (response, _)): return .success(response)
        case .failure(.refused(let problem)), .failure(.lost(let problem)): return .failure(.exchange(problem))
        }
    }

    enum SingleFailure: Error {
        case connect(ConnectFailure)
        /// Connected, but no whole answer came (within the timeout, or the connection ended).
        case exchange(String)
    }
}

struct HTTPError: Error {
    let reason: String
}

/// Reads an HTTP/1.1 response from a socket: the head, then the body (Content-Length, chunked,
/// or to the end of the connection), or the chunks of a streamed body one at a time.
struct Reader {
    let fd: Int32
    var buffer: [UInt8] = []
    var start = 0

    struct Head {
        var status: Int
        var contentLength: Int?
        var chunked: Bool
        var keepAlive: Bool
    }

    init(fd: Int32) { self.fd = fd }

    /// Reads more bytes; false at the end of the connection.
    mutating func fill() throws(HTTPError) -> Bool {
        if start > 0 && start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                return true
            }
            if count == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw HTTPError(reason: "no answer within the timeout") }
            throw HTTPError(reason: "receive failed: \(String(cString: strerror(errno)))")
        }
    }

    /// The next line (without CRLF).
    mutating func line() throws(HTTPError) -> String? {
        while true {
            if let end = buffer[start...].firstIndex(of: 0x0A) {
                var line = buffer[start..<end]
                if line.last == 0x0D { line = line.dropLast() }
                start = end + 1
                return String(decoding: line, as: UTF8.self)
            }
            guard try fill() else { return nil }
        }
    }

    mutating func take(_ count: Int) throws(HTTPError) -> [UInt8] {
        while buffer.count - start < count {
            guard try fill() else { throw HTTPError(reason: "the connection ended inside a body") }
        }
        let bytes = Array(buffer[start..<(start + count)])
        start += count
        return bytes
    }

    /// The status line and headers; `nil` when the connection ended before any byte.
    mutating func head() throws(HTTPError) -> Head? {
        if buffer.count == start {
            guard try fill() else { return nil }
        }
        guard let statusLine = try line() else { throw HTTPError(reason: "the connection ended inside an answer") }
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw HTTPError(reason: "not an HTTP answer: \(statusLine.prefix(80))")
        }
        var head = Head(status: status, contentLength: nil, chunked: false, keepAlive: parts[0] == "HTTP/1.1")
        while let header = try line() {
            if header.isEmpty { return head }
            guard let colon = header.firstIndex(of: ":") else { continue }
            let name = header[..<colon].lowercased()
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces).lowercased()
            switch name {
            case "content-length": head.contentLength = Int(value)
            case "transfer-encoding": head.chunked = value.contains("chunked")
            case "connection":
                if value.contains("close") {
                    head.keepAlive = false
                } else if value.contains("keep-alive") {
                    head.keepAlive = true
                }
            default: break
            }
        }
        throw HTTPError(reason: "the connection ended inside the headers")
    }

    mutating func body(_ head: Head) throws(HTTPError) -> [UInt8] {
        if head.chunked {
            var body: [UInt8] = []
            while let chunk = try nextChunk() { body += chunk }
            return body
        }
        if let length = head.contentLength { return try take(length) }
        // To the end of the connection.
        while try fill() {}
        let bytes = Array(buffer[start...])
        start = buffer.count
        return bytes
    }

    /// The next chunk of a chunked body; `nil` after the last one.
    mutating func nextChunk() throws(HTTPError) -> [UInt8]? {
        guard let sizeLine = try line() else { throw HTTPError(reason: "the connection ended inside a chunked body") }
        guard
            let size = Int(
                sizeLine.split(separator: ";").first.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? "",
                radix: 16)
        else {
            throw HTTPError(reason: "a bad chunk size: \(sizeLine.prefix(40))")
        }
        if size == 0 {
            while let trailer = try line(), !trailer.isEmpty {}
            return nil
        }
        let bytes = try take(size)
        _ = try line()
        return bytes
    }
}
