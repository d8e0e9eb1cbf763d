import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Built executables sit next to the test bundle in `.build/<config>/`.
enum Binaries {
    static let directory: String = {
        if let dir = ProcessInfo.processInfo.environment["CONFAB_BIN_DIR"] { return dir }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (exe as NSString).deletingLastPathComponent
    }()
    static func path(_ name: String) -> String { directory + "/" + name }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
}

/// A process we started, ended by its PID only.
final class Child {
    let process = Process()
    let output: Pipe?
    let name: String

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, captureOutput: Bool = false, logFile: String? = nil) throws {
        name = (executable as NSString).lastPathComponent
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if captureOutput {
            let pipe = Pipe()
            process.standardOutput = pipe
            output = pipe
        } else {
            output = nil
        }
        if let logFile {
            _ = FileManager.default.createFile(atPath: logFile, contents: nil)
            let handle = FileHandle(forWritingAtPath: logFile)!
            handle.seekToEndOfFile()
            process.standardError = handle
            if !captureOutput { process.standardOutput = handle }
        }
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    func signal(_ signal: Int32) { if process.isRunning { kill(pid, signal) } }

    /// Waits up to `seconds` for exit; returns the exit status, or nil if still running.
    @discardableResult
    func wait(seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        return process.terminationStatus
    }

    func stop() {
        guard process.isRunning else { return }
        signal(SIGTERM)
        if wait(seconds: 5) == nil {
            signal(SIGKILL)
            wait(seconds: 5)
        }
    }
}

/// A fake upstream, a confabd wired to it, and a temporary directory that holds it all.
final class Harness {
    let directory: String
    let socketPath: String
    let dataDirectory: String
    let configPath: String
    private(set) var fake: Child?
    private(set) var daemon: Child?
    private(set) var upstreamPort = 0
    var daemonLog: String { directory + "/confabd.log" }
    var upstreamLog: String { directory + "/upstream-requests.jsonl" }
    /// The fake upstream's `--models-file`: what its `GET …/models` answers, while it exists.
    var upstreamModelsFile: String { directory + "/upstream-models.txt" }

    /// `topLevel` goes before `[upstream]` (keys such as `default_provider`), `extra` after it (other
    /// tables, such as `[providers.NAME]`); in both, `$UPSTREAM` is the fake upstream's
    /// `http://127.0.0.1:PORT`, so a provider can point at it under a path of its own.
    init(config extra: String = "", topLevel: String = "", startUpstream: Bool = true, retries: Int = 0) throws {
        var template = Array("/tmp/confab-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
        directory = String(cString: made)
        socketPath = directory + "/confabd.sock"
        dataDirectory = directory + "/data"
        configPath = directory + "/config.toml"
        if startUpstream { try startFake() }
        // No retries unless a test asks: most tests want a failure to show at once.
        try writeConfig(extra, topLevel: topLevel, retries: retries)
        try startDaemon()
    }

    var upstreamURL: String { "http://127.0.0.1:\(upstreamPort)" }

    /// The config file the harness starts confabd with (see `init`); for reloads, too.
    func writeConfig(_ extra: String, topLevel: String = "", retries: Int = 0) throws {
        var config = topLevel.isEmpty ? "" : topLevel + "\n"
        config += "[upstream]\nbase_url = \"http://127.0.0.1:\(upstreamPort)/v1\"\nmodel = \"fake-model\"\ntimeout_seconds = 5\nmax_retries = \(retries)\n"
        config += extra
        config = config.replacingOccurrences(of: "$UPSTREAM", with: upstreamURL)
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    private func startFake() throws {
        (fake, upstreamPort) = try Self.startFakeUpstream(["--port", "0", "--log", upstreamLog, "--max-lifetime", "600", "--default-delay-ms", "1",
                                                           "--models-file", upstreamModelsFile], logFile: directory + "/upstream.log")
    }

    /// Starts `confab-fake-upstream` with `arguments` and waits for its first line,
    /// `listening 127.0.0.1 PORT`; the process and its port.
    static func startFakeUpstream(_ arguments: [String], logFile: String) throws -> (Child, Int) {
        let fake = try Child(Binaries.path("confab-fake-upstream"), arguments, captureOutput: true, logFile: logFile)
        var line = Data()
        let handle = fake.output!.fileHandleForReading
        while !line.contains(0x0A) {
            let chunk = handle.availableData
            if chunk.isEmpty { throw HarnessError(description: "fake upstream exited before listening") }
            line.append(chunk)
        }
        let words = String(decoding: line, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard words.count >= 3, let port = Int(words[2]) else { throw HarnessError(description: "unexpected fake upstream output: \(words)") }
        return (fake, port)
    }

    func startDaemon(extraArguments: [String] = [], environment: [String: String]? = nil) throws {
        var env = environment ?? ProcessInfo.processInfo.environment
        env["OPENAI_API_KEY"] = env["OPENAI_API_KEY"] ?? nil
        env.removeValue(forKey: "NOTIFY_SOCKET")
        env.removeValue(forKey: "LISTEN_PID")
        env.removeValue(forKey: "LISTEN_FDS")
        let daemon = try Child(Binaries.path("confabd"),
                               ["--socket", socketPath, "--data-dir", dataDirectory, "--config", configPath, "--log-level", "debug"] + extraArguments,
                               environment: env, logFile: daemonLog)
        self.daemon = daemon
        // The socket listens before start-up is over (clients wait in the backlog), so a
        // connection proves nothing: the daemon is up once its loop answers a request. Only
        // then is everything start-up logs ("ready", resumed replies) in the log.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let client = try? RPCClient(path: socketPath) {
                defer { client.close() }
                try? client.sendRaw(RPC.request(id: .int(0), method: "status", params: [:]))
                while Date() < deadline {
                    // Any answer, even a refusal or a close, comes from the running loop.
                    do {
                        _ = try client.readFrame(timeout: 0.2)
                        return
                    } catch {
                        if daemon.wait(seconds: 0) != nil { break }
                    }
                }
            }
            if daemon.wait(seconds: 0.02) != nil {
                throw HarnessError(description: "confabd exited at start-up:\n\(log())")
            }
        }
        throw HarnessError(description: "confabd did not answer at start-up:\n\(log())")
    }

    /// SIGTERM, and the exit status.
    @discardableResult
    func stopDaemon() -> Int32? {
        guard let daemon else { return nil }
        daemon.signal(SIGTERM)
        let status = daemon.wait(seconds: 10)
        if status == nil { daemon.signal(SIGKILL); daemon.wait(seconds: 5) }
        self.daemon = nil
        return status
    }

    func killDaemon() {
        daemon?.signal(SIGKILL)
        daemon?.wait(seconds: 5)
        daemon = nil
    }

    func restartDaemon() throws {
        stopDaemon()
        try startDaemon()
    }

    func log() -> String { (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "" }

    func client(name: String = "tester") throws -> RPCClient {
        let client = try RPCClient(path: socketPath)
        try client.call(HelloCall.self, HelloParams(client: "integration-test", name: name))
        return client
    }

    func createConversation(_ client: RPCClient, title: String = "test", system: String? = nil) throws -> String {
        var params = CreateParams()
        params.title = title
        params.system = system
        return try client.call(CreateCall.self, params).conversation.id
    }

    /// Requests the fake upstream received, one JSON object each.
    func upstreamRequests() -> [JSON] {
        guard let text = try? String(contentsOfFile: upstreamLog, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSON.parse(String($0)) }
    }

    func runClient(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
        process.arguments = ["--socket", socketPath] + arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdoutData, as: UTF8.self), String(decoding: stderrData, as: UTF8.self))
    }

    func tearDown() {
        stopDaemon()
        fake?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A blocking JSON-RPC client over the Unix socket, as a test (or a script) would write one.
final class RPCClient {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var nextID = 1
    /// Notifications received, in order, not yet taken.
    var notifications: [(method: String, params: JSON)] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let error = errno
            Glibc.close(fd)
            throw HarnessError(description: "connect \(path): \(String(cString: strerror(error)))")
        }
    }

    /// Speaks over a socket already connected (another user's relay, see `AccessTests`).
    init(connected fd: Int32) { self.fd = fd }
    /// A client on a descriptor already connected (one end of a socketpair, to test the harness).
    init(adopting fd: Int32) { self.fd = fd }

    func close() { Glibc.close(fd) }

    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError(description: "send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    func sendRaw(_ text: String) throws { try sendRaw(Array(text.utf8)) }

    /// Next frame, or nil at end of stream. Throws after `timeout` seconds of silence.
    func readFrame(timeout: Double = 10) throws -> JSON? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return try JSON.parse(line)
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(timeout * 1000))
            if ready == 0 { throw HarnessError(description: "no frame within \(timeout)s") }
            if ready < 0 { if errno == EINTR { continue }; throw HarnessError(description: "poll failed") }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return nil }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return nil }
                throw HarnessError(description: "recv: \(String(cString: strerror(errno)))")
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Sends a request and returns its response frame, queueing notifications met on the way.
    func request(_ method: String, _ params: JSON = [:], timeout: Double = 10) throws -> JSON {
        let id = nextID
        nextID += 1
        try sendRaw(RPC.request(id: .int(id), method: method, params: params))
        return try response(to: .int(id), timeout: timeout)
    }

    /// The notifications that arrived while the last `response(to:)` waited, in order: they
    /// came before that response (they are also in `notifications`, as ever).
    private(set) var notificationsBeforeLastResponse: [(method: String, params: JSON)] = []

    /// The response to request `id`. Throws if it came after a notification it must precede
    /// (`RPCClient.precedes`): a send's result comes before its own `message.created` and deltas.
    func response(to id: JSON, timeout: Double = 10) throws -> JSON {
        var before: [(method: String, params: JSON)] = []
        while true {
            guard let frame = try readFrame(timeout: timeout) else { throw HarnessError(description: "connection closed awaiting response \(id)") }
            if let method = frame["method"]?.string, frame["id"] == nil {
                notifications.append((method, frame["params"] ?? .null))
                before.append((method, frame["params"] ?? .null))
                continue
            }
            if frame["id"] == id {
                notificationsBeforeLastResponse = before
                if let early = before.first(where: { Self.precedes(frame, $0.method, $0.params) }) {
                    throw HarnessError(description: "\(early.method) \(early.params.text) arrived before the response it must follow: \(frame.text)")
                }
                return frame
            }
            throw HarnessError(description: "unexpected frame \(frame.text)")
        }
    }

    /// Whether `response` must reach its client before the notification `method`/`params`. A
    /// result naming a stored `message` and the `reply` to it (`message.send`, `message.edit`)
    /// comes before `message.created` for either and before any delta of the reply, in that
    /// message's conversation (ids are per conversation).
    static func precedes(_ response: JSON, _ method: String, _ params: JSON) -> Bool {
        guard let result = response["result"], let message = result["message"]?["id"]?.string,
              let reply = result["reply"]?.string, let conversation = result["message"]?["conversation"]?.string,
              params["conversation"]?.string == conversation else { return false }
        switch method {
        case RPCNotification.messageCreated.rawValue: return [message, reply].contains(params["message"]?["id"]?.string ?? "")
        case RPCNotification.messageDelta.rawValue: return params["message"]?.string == reply
        default: return false
        }
    }

    /// The result, or a thrown RPCError.
    @discardableResult
    func call(_ method: String, _ params: JSON = [:], timeout: Double = 10) throws -> JSON {
        let frame = try request(method, params, timeout: timeout)
        if let error = frame["error"].flatMap(RPCError.init(json:)) { throw error }
        return frame["result"] ?? .null
    }

    /// A method's typed call, its result read as a client reads it (`RPCClientCore.decode`);
    /// an error answer is thrown as an `RPCError`. The frames themselves are read raw here, so
    /// that a test sees every frame, in order, as the daemon sent it.
    @discardableResult
    func call<Call: RPCCall>(_: Call.Type, _ params: Call.Params, timeout: Double = 10) throws -> Call.Result {
        try RPCClientCore.decode(Call.self, call(Call.method.rawValue, params.json, timeout: timeout))
    }

    /// Takes notifications until one matches; returns everything taken, the match last.
    func collect(until match: (String, JSON) -> Bool, timeout: Double = 10) throws -> [(method: String, params: JSON)] {
        var taken: [(method: String, params: JSON)] = []
        while true {
            if !notifications.isEmpty {
                let next = notifications.removeFirst()
                taken.append(next)
                if match(next.method, next.params) { return taken }
                continue
            }
            guard let frame = try readFrame(timeout: timeout) else {
                throw HarnessError(description: "connection closed; got \(taken.map(\.method))")
            }
            if let method = frame["method"]?.string {
                notifications.append((method, frame["params"] ?? .null))
            }
        }
    }

    /// Waits for the end of reply `id` and returns (every notification up to it, the final message).
    func awaitReply(_ id: String, timeout: Double = 15) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let notes = try collect(until: { method, params in
            (method == "message.completed" || method == "message.failed") && params["message"]?["id"]?.string == id
        }, timeout: timeout)
        return (notes, notes.last!.params["message"]!)
    }

    static func deltas(_ notes: [(method: String, params: JSON)], for id: String) -> [String] {
        notes.filter { $0.method == "message.delta" && $0.params["message"]?.string == id }.compactMap { $0.params["content"]?.string }
    }
}
