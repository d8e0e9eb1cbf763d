import Foundation
import Glibc

let maxHeaderBytes = 64 * 1024
let maxBodyBytes = 64 * 1024 * 1024
let idleTimeoutMs: Int32 = 300_000

struct Request {
    var method: String
    var target: String
    var version: String
    var headers: [(String, String)]  // names lowercased, in order received
    var body: [UInt8] = []

    var path: String {
        if let q = target.firstIndex(where: { $0 == "?" || $0 == "#" }) { return String(target[..<q]) }
        return target
    }

    /// All values of a header joined with ", " (names compared case-insensitively).
    func header(_ name: String) -> String? {
        let values = headers.filter { $0.0 == name }.map(\.1)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    var wantsKeepAlive: Bool {
        let tokens = (header("connection") ?? "").lowercased().split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        if version == "HTTP/1.0" { return tokens.contains("keep-alive") }
        return !tokens.contains("close")
    }
}

enum ReadOutcome {
    case request(Request)
    case closed
    /// The request cannot be served; answer with an error and close. `head` is set when the
    /// request line and headers were understood (so the request can still be logged).
    case failure(status: Int, message: String, code: String, head: Request?)
}

/// One client connection. Lives entirely on its own thread.
final class Connection {
    let fd: Int32
    /// Which accepted TCP connection this is, counting from 1: two requests with the same
    /// number came on one connection.
    let number: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32, number: Int) {
        self.fd = fd
        self.number = number
    }

    private var available: Int { buffer.count - start }

    /// Reads more bytes into the buffer. Returns false on EOF, error or idle timeout.
    private func fill() -> Bool {
        if start > 0 && (start == buffer.count || start > 1 << 20) {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        while true {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, idleTimeoutMs)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if ready == 0 { return false }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return false
            }
            if n == 0 { return false }
            buffer.append(contentsOf: scratch[0..<n])
            return true
        }
    }

    private func take(_ count: Int) -> [UInt8] {
        let out = Array(buffer[start..<(start + count)])
        start += count
        return out
    }

    /// Reads one line (terminated by LF, optional CR stripped) of at most `limit` bytes.
    private func readLine(limit: Int) -> [UInt8]? {
        var scanned = start
        while true {
            if let nl = buffer[scanned...].firstIndex(of: 0x0A) {
                var line = Array(buffer[start..<nl])
                if line.last == 0x0D { line.removeLast() }
                start = nl + 1
                return line
            }
            scanned = buffer.count
            if available > limit { return nil }
            let oldStart = start
            guard fill() else { return nil }
            scanned -= oldStart - start  // fill() may have compacted the buffer
        }
    }

    private func readExact(_ count: Int) -> [UInt8]? {
        while available < count {
            guard fill() else { return nil }
        }
        return take(count)
    }

    func readRequest() -> ReadOutcome {
        // Skip stray empty lines between requests.
        while true {
            while available == 0 {
                guard fill() else { return .closed }
            }
            let b = buffer[start]
            if b == 0x0D || b == 0x0A { start += 1 } else { break }
        }
        // A method starts with a letter. Anything else (a TLS ClientHello from a client that
        // took us for an HTTPS server) is refused at once, as real servers do, instead of
        // waiting for a header block that never comes.
        let first = buffer[start]
        guard (first >= 0x41 && first <= 0x5A) || (first >= 0x61 && first <= 0x7A) else {
            return .failure(status: 400, message: "Malformed HTTP request line", code: "bad_request", head: nil)
        }
        // Find the end of the header block (an empty line, CRLF or bare LF).
        var scanFrom = start
        var headEnd = -1
        while headEnd < 0 {
            var i = scanFrom
            while i < buffer.count {
                if buffer[i] == 0x0A {
                    if i + 1 < buffer.count && buffer[i + 1] == 0x0A { headEnd = i + 2; break }
                    if i + 2 < buffer.count && buffer[i + 1] == 0x0D && buffer[i + 2] == 0x0A { headEnd = i + 3; break }
                }
                i += 1
            }
            if headEnd >= 0 { break }
            if available > maxHeaderBytes {
                return .failure(status: 431, message: "Request header fields too large (limit 64 KiB)",
                                code: "request_header_fields_too_large", head: nil)
            }
            scanFrom = max(start, buffer.count - 2)
            let oldStart = start
            guard fill() else { return .closed }
            scanFrom -= oldStart - start
        }
        if headEnd - start > maxHeaderBytes {
            return .failure(status: 431, message: "Request header fields too large (limit 64 KiB)",
                            code: "request_header_fields_too_large", head: nil)
        }
        // Split on LF bytes (a Swift String would treat CRLF as one Character), dropping CRs.
        var lines = take(headEnd - start).split(separator: 0x0A, omittingEmptySubsequences: false).map {
            line -> String in
            String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let requestLine = lines.first else {
            return .failure(status: 400, message: "Malformed HTTP request", code: "bad_request", head: nil)
        }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), !parts[0].isEmpty,
              parts[0].allSatisfy({ $0.isLetter || $0 == "-" || $0 == "_" }) else {
            return .failure(status: 400, message: "Malformed HTTP request line", code: "bad_request", head: nil)
        }
        var request = Request(method: String(parts[0]), target: String(parts[1]), version: String(parts[2]), headers: [])
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                return .failure(status: 400, message: "Malformed HTTP header line", code: "bad_request", head: nil)
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            request.headers.append((name, value))
        }

        // Body.
        let chunked = (request.header("transfer-encoding") ?? "").lowercased().contains("chunked")
        var contentLength = 0
        if !chunked, let cl = request.header("content-length") {
            let values = Set(cl.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            guard values.count == 1, let only = values.first, let n = Int(only), n >= 0 else {
                return .failure(status: 400, message: "Invalid Content-Length", code: "bad_request", head: request)
            }
            contentLength = n
        }
        if contentLength > maxBodyBytes {
            return .failure(status: 413, message: "Request body too large (limit 64 MiB)",
                            code: "request_too_large", head: request)
        }
        let expectsContinue = (request.header("expect") ?? "").lowercased().contains("100-continue")
        if expectsContinue && (chunked || available < contentLength) {
            guard send("HTTP/1.1 100 Continue\r\n\r\n") else { return .closed }
        }
        if chunked {
            var body: [UInt8] = []
            while true {
                guard let line = readLine(limit: 4096) else { return .closed }
                let sizeText = String(decoding: line, as: UTF8.self)
                    .split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first?
                    .trimmingCharacters(in: .whitespaces) ?? ""
                guard let size = Int(sizeText, radix: 16), size >= 0 else {
                    return .failure(status: 400, message: "Malformed chunked body", code: "bad_request", head: request)
                }
                if size == 0 {
                    // Trailers, up to the empty line.
                    while true {
                        guard let trailer = readLine(limit: 4096) else { return .closed }
                        if trailer.isEmpty { break }
                    }
                    break
                }
                if body.count + size > maxBodyBytes {
                    return .failure(status: 413, message: "Request body too large (limit 64 MiB)",
                                    code: "request_too_large", head: request)
                }
                guard let data = readExact(size) else { return .closed }
                body.append(contentsOf: data)
                guard let end = readLine(limit: 16), end.isEmpty else {
                    return .failure(status: 400, message: "Malformed chunked body", code: "bad_request", head: request)
                }
            }
            request.body = body
        } else if contentLength > 0 {
            guard let data = readExact(contentLength) else { return .closed }
            request.body = data
        }
        return .request(request)
    }

    // MARK: Writing

    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var off = 0
        while off < bytes.count {
            let n = Glibc.send(fd, bytes.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            off += n
        }
        return true
    }

    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send($0) }
    }

    func send(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { send(UnsafeRawBufferPointer($0)) }
    }

    /// Sends `bytes` in writes of `size` bytes with a short pause in between.
    func sendSplit(_ bytes: [UInt8], size: Int) -> Bool {
        var off = 0
        while off < bytes.count {
            let end = min(off + size, bytes.count)
            guard send(Array(bytes[off..<end])) else { return false }
            off = end
            if off < bytes.count { sleepMilliseconds(1) }
        }
        return true
    }

    /// Half-closes after an error response and discards what the client still sends (up to
    /// 2 s), so that an unread request body does not turn the close into a reset that could
    /// destroy the response before the client reads it.
    func lingeringClose() {
        _ = shutdown(fd, Int32(SHUT_WR))
        waitForClientToGoAway(maxSeconds: 2)
    }

    /// Waits (at most `maxSeconds`) until the client closes its end; any data it sends is discarded.
    /// Waits until `isReleased()` says so (true), or until the client goes away or `maxSeconds`
    /// pass (false). Anything the client sends meanwhile is read and dropped.
    func waitForRelease(maxSeconds: Double, isReleased: () -> Bool) -> Bool {
        let deadline = monotonicSeconds() + maxSeconds
        while !isReleased() {
            if monotonicSeconds() >= deadline { return false }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 5)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if ready == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return false }
            if n < 0 && errno != EINTR && errno != EAGAIN { return false }
        }
        return true
    }

    func waitForClientToGoAway(maxSeconds: Double) {
        let deadline = monotonicSeconds() + maxSeconds
        while true {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(remaining, 1.0) * 1000) + 1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if ready == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return }
            if n < 0 && errno != EINTR && errno != EAGAIN { return }
        }
    }
}

func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 200: "OK"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 402: "Payment Required"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 413: "Content Too Large"
    case 415: "Unsupported Media Type"
    case 422: "Unprocessable Entity"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: status < 400 ? "OK" : "Error"
    }
}

func responseHead(status: Int, headers: [(String, String)]) -> String {
    var head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    head += "\r\n"
    return head
}

/// Body of an OpenAI-style error.
func errorBody(message: String, type: String, code: String) -> String {
    JSON.object([
        ("error", .object([
            ("message", .string(message)),
            ("type", .string(type)),
            ("code", .string(code)),
        ])),
    ]).encoded()
}

/// SplitMix64: a small generator whose whole sequence follows from its seed, so a test run
/// that splits a body at random places splits it at the same places every time.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `range`.
    mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }
}

/// Writes an SSE body as HTTP chunks. With `split`, the body is treated as one byte stream and
/// written in HTTP chunks of exactly `split` bytes (TCP_NODELAY is on; ~1 ms between writes),
/// so clients see events cut at arbitrary bytes; the remainder is sent by `flush()`. With
/// `random` instead, each chunk is 1 to 24 bytes long, the lengths drawn from the generator.
struct ChunkedWriter {
    let connection: Connection
    let split: Int?
    private var random: SeededRandom?
    private var pending: [UInt8] = []

    init(connection: Connection, split: Int?) {
        self.connection = connection
        self.split = split
    }

    /// Pieces of random length from `seed`, unless `split` fixes their length.
    init(connection: Connection, split: Int?, randomSeed seed: UInt64) {
        self.connection = connection
        self.split = split
        if split == nil { random = SeededRandom(seed: seed) }
    }

    private func writeChunk<C: Collection<UInt8>>(_ data: C) -> Bool {
        guard !data.isEmpty else { return true }
        var frame = Array(String(data.count, radix: 16).utf8)
        frame += [0x0D, 0x0A]
        frame += data
        frame += [0x0D, 0x0A]
        return connection.send(frame)
    }

    mutating func write(_ text: String) -> Bool {
        write(Array(text.utf8))
    }

    mutating func write(_ bytes: [UInt8]) -> Bool {
        if random != nil {
            pending += bytes
            var off = 0
            while true {
                let size = random!.next(in: 1...24)
                guard pending.count - off >= size else { break }
                guard writeChunk(pending[off..<(off + size)]) else { return false }
                off += size
                sleepMicroseconds(300)
            }
            pending.removeFirst(off)
            return true
        }
        guard let size = split else { return writeChunk(bytes) }
        pending += bytes
        var off = 0
        while pending.count - off >= size {
            guard writeChunk(pending[off..<(off + size)]) else { return false }
            off += size
            sleepMilliseconds(1)
        }
        pending.removeFirst(off)
        return true
    }

    mutating func flush() -> Bool {
        defer { pending = [] }
        return writeChunk(pending)
    }

    /// Flushes and writes the terminating zero-length chunk.
    mutating func finish() -> Bool {
        guard flush() else { return false }
        return connection.send("0\r\n\r\n")
    }
}
