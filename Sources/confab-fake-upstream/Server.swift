import Foundation
import Glibc
import Synchronization

/// State shared by all connection threads: the immutable configuration, the request log and
/// the response id counter. Everything mutable sits behind a Mutex.
final class Shared: Sendable {
    let config: Config
    private let logFD: Mutex<Int32>
    private let counter = Mutex<Int>(0)
    private let accepted = Mutex<Int>(0)
    private let requests = Mutex<Int>(0)
    private let streams = Mutex<Int>(0)
    private let attempts = Mutex<[String: Int]>([:])
    /// `[[hold:N NAME]]`: names released so far (a release may come before its hold), and the
    /// names answers are holding at now, each with how many answers hold there.
    /// Anthropic's prompt cache, for requests that mark breakpoints.
    let promptCache = PromptCache()
    private let holds = Mutex<(released: Set<String>, holding: [String: Int])>((released: [], holding: [:]))

    init(config: Config) {
        self.config = config
        var fd: Int32 = -1
        if let path = config.logPath {
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            if fd < 0 { die("cannot open --log file '\(path)': \(String(cString: strerror(errno)))") }
        }
        logFD = Mutex(fd)
    }

    /// How many requests have carried this exact last user message, this one included.
    func attempt(for key: String) -> Int {
        attempts.withLock { table in
            table[key, default: 0] += 1
            return table[key]!
        }
    }

    /// Counts an accepted TCP connection; returns its number (from 1).
    func connectionAccepted() -> Int {
        accepted.withLock { n in
            n += 1
            return n
        }
    }

    /// Runs `answer`, counted as a chat completion being answered while it runs.
    func answering<T>(_ answer: () -> T) -> T {
        streams.withLock { $0 += 1 }
        defer { streams.withLock { $0 -= 1 } }
        return answer()
    }

    /// TCP connections accepted and requests read since start, chat completions being answered now.
    func counts() -> (connections: Int, requests: Int, streams: Int) {
        (accepted.withLock { $0 }, requests.withLock { $0 }, streams.withLock { $0 })
    }

    /// Lets every answer held (now or later) under `name` go on.
    func release(_ name: String) {
        holds.withLock { _ = $0.released.insert(name) }
    }

    func isReleased(_ name: String) -> Bool {
        holds.withLock { $0.released.contains(name) }
    }

    /// Counts an answer as holding at `name` while `wait` runs.
    func holding<T>(_ name: String, _ wait: () -> T) -> T {
        holds.withLock { $0.holding[name, default: 0] += 1 }
        defer {
            holds.withLock { state in
                state.holding[name, default: 1] -= 1
                if state.holding[name] == 0 { state.holding[name] = nil }
            }
        }
        return wait()
    }

    /// The names answers are holding at now, and the names released so far, both sorted.
    func holdState() -> (holding: [String], released: [String]) {
        holds.withLock { (Array($0.holding.keys).sorted(), Array($0.released).sorted()) }
    }

    func nextID() -> Int {
        counter.withLock { n in
            n += 1
            return n
        }
    }

    /// Counts a request and appends one JSON line describing it (never the key itself).
    /// `rawBody`, when given, is logged as `raw_body` (a body that is not JSON, sent to a tool endpoint).
    func log(method: String, path: String, connection: Int, authorization: Bool, headers: [(String, String)], body: JSON?,
             rawBody: String? = nil) {
        requests.withLock { $0 += 1 }
        var members: [(String, JSON)] = [
            ("method", .string(method)),
            ("path", .string(path)),
            ("connection", .int(connection)),
            ("authorization", .bool(authorization)),
            ("headers", loggedHeaders(headers)),
            ("body", body ?? .null),
        ]
        if let rawBody { members.append(("raw_body", .string(rawBody))) }
        let line = JSON.object(members).encoded() + "\n"
        logFD.withLock { fd in
            if fd >= 0 { writeFD(fd, line) }
        }
    }
}

/// Request headers as an object by lower-case name (repeated ones joined with ", "), the
/// values of `secretHeaders` hashed.
func loggedHeaders(_ headers: [(String, String)]) -> JSON {
    var names: [String] = []
    for (name, _) in headers where !names.contains(name) { names.append(name) }
    return .object(names.map { name in
        let value = headers.filter { $0.0 == name }.map(\.1).joined(separator: ", ")
        return (name, JSON.string(secretHeaders.contains(name) ? redacted(value) : value))
    })
}

/// Headers that carry keys: logged only as a hash a test can compare with its own.
let secretHeaders: Set<String> = ["authorization", "x-api-key", "api-key", "proxy-authorization"]

/// `Bearer sk-…` → `Bearer fnv1a64:<16 hex digits>`; a value without a scheme is hashed whole.
func redacted(_ value: String) -> String {
    let parts = value.split(separator: " ", maxSplits: 1)
    if parts.count == 2, parts[0].lowercased() == "bearer" { return "\(parts[0]) fnv1a64:\(fnv1a64(String(parts[1])))" }
    return "fnv1a64:\(fnv1a64(value))"
}

/// FNV-1a, 64 bits, over the UTF-8 bytes, as 16 lower-case hex digits.
func fnv1a64(_ text: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
}

func runServer(_ config: Config) -> Never {
    signal(SIGPIPE, SIG_IGN)
    signal(SIGTERM) { _ in _exit(0) }
    signal(SIGINT) { _ in _exit(0) }

    let shared = Shared(config: config)
    let listenFD = makeListener(config)
    startWatchdog(config)

    writeFD(1, "listening \(config.host) \(boundPort(listenFD))\n")

    while true {
        let fd = accept(listenFD, nil, nil)
        if fd < 0 {
            switch errno {
            case EINTR, ECONNABORTED, EAGAIN:
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                usleep(10_000)
                continue
            default:
                die("accept failed: \(String(cString: strerror(errno)))", code: 1)
            }
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        setSocketOptions(fd)
        let number = shared.connectionAccepted()
        let thread = Thread {
            serveConnection(fd: fd, number: number, shared: shared)
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
}

private func makeListener(_ config: Config) -> Int32 {
    let domain = config.family == .v4 ? AF_INET : AF_INET6
    let fd = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    if fd < 0 { die("socket failed: \(String(cString: strerror(errno)))", code: 1) }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))

    let result: Int32
    switch config.family {
    case .v4:
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = config.port.bigEndian
        _ = inet_pton(AF_INET, config.host, &addr.sin_addr)
        result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    case .v6:
        var addr = sockaddr_in6()
        addr.sin6_family = sa_family_t(AF_INET6)
        addr.sin6_port = config.port.bigEndian
        _ = inet_pton(AF_INET6, "::1", &addr.sin6_addr)
        result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
    }
    if result != 0 {
        die("cannot bind \(config.host) port \(config.port): \(String(cString: strerror(errno)))", code: 1)
    }
    if listen(fd, 1024) != 0 { die("listen failed: \(String(cString: strerror(errno)))", code: 1) }
    return fd
}

private func boundPort(_ fd: Int32) -> UInt16 {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let ok = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    if ok != 0 { die("getsockname failed: \(String(cString: strerror(errno)))", code: 1) }
    let family = Int32(storage.ss_family)
    return withUnsafePointer(to: &storage) { ptr -> UInt16 in
        if family == AF_INET6 {
            return ptr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        }
        return ptr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
    }
}

private func setSocketOptions(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    // A client that stops reading must not pin a thread forever.
    var timeout = timeval(tv_sec: 120, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
}

/// Ends the process after --max-lifetime, when one is given (and, with --exit-with-parent,
/// when the parent goes away).
private func startWatchdog(_ config: Config) {
    guard config.maxLifetimeSeconds != nil || config.exitWithParent else { return }
    let parent = getppid()
    let deadline = config.maxLifetimeSeconds.map { monotonicSeconds() + $0 }
    let thread = Thread {
        while true {
            let remaining = deadline.map { $0 - monotonicSeconds() } ?? 0.25
            if remaining <= 0 {
                writeFD(2, "confab-fake-upstream: max lifetime reached, exiting\n")
                _exit(0)
            }
            if config.exitWithParent && getppid() != parent {
                _exit(0)
            }
            sleepMilliseconds(Int(min(remaining, 0.25) * 1000) + 1)
        }
    }
    thread.start()
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// CLOCK_MONOTONIC in nanoseconds: the clock a benchmark's reader compares a `[[stamp]]` with.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func sleepMilliseconds(_ ms: Int) {
    sleepMicroseconds(ms * 1000)
}

func sleepMicroseconds(_ us: Int) {
    guard us > 0 else { return }
    var request = timespec(tv_sec: us / 1_000_000, tv_nsec: (us % 1_000_000) * 1000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR {
        request = remaining
    }
}
