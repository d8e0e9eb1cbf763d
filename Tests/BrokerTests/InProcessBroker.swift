import XCTest

@testable import Broker
import ConfabLog
import ConfabProtocol
import DaemonSettings
import EventLoop
import LogStore
import Posix
import ServiceSettings
import Tools
import Upstream
#if canImport(Glibc)
import Glibc
#endif

/// A model server and tool endpoints that answer in this process, as the test says: every
/// reply's stream and every tool call is kept for the test to drive.
final class ScriptedUpstream: ReplyUpstream {
    final class Call: UpstreamCall {
        private(set) var isCancelled = false
        func cancel() { isCancelled = true }
    }

    final class Stream {
        let request: ChatRequest
        let call = Call()
        private let handler: (ReplyEvent) -> Void
        init(request: ChatRequest, handler: @escaping (ReplyEvent) -> Void) {
            self.request = request
            self.handler = handler
        }
        /// What the real stream does: nothing more once cancelled or finished.
        private var isOver: Bool { call.isCancelled || finished }
        private var finished = false

        func send(_ text: String) {
            guard !isOver else { return }
            handler(.text(text))
        }

        func finish(_ finishReason: String? = "stop", toolCalls: [ToolCall] = []) {
            guard !isOver else { return }
            finished = true
            handler(.finished(finishReason: finishReason, usage: nil, error: nil, retryAfterSeconds: nil, toolCalls: toolCalls))
        }

        /// Ends the stream as a server's error does.
        func fail(_ error: MessageError) {
            guard !isOver else { return }
            finished = true
            handler(.finished(finishReason: nil, usage: nil, error: error, retryAfterSeconds: nil, toolCalls: []))
        }
    }

    final class ToolCallMade {
        let url: String
        let call = Call()
        let completion: (ToolHTTPOutcome) -> Void
        init(url: String, completion: @escaping (ToolHTTPOutcome) -> Void) {
            self.url = url
            self.completion = completion
        }
    }

    var onTransportError: ((String) -> Void)?
    private(set) var streams: [Stream] = []
    private(set) var toolCalls: [ToolCallMade] = []

    func startReply(_ request: ChatRequest, from provider: Provider, handler: @escaping (ReplyEvent) -> Void) -> any UpstreamCall {
        let stream = Stream(request: request, handler: handler)
        streams.append(stream)
        return stream.call
    }

    func startToolCall(method: String, url: String, headers: [String], body: [UInt8]?, timeoutSeconds: Int,
                       maxResponseBytes: Int, completion: @escaping (ToolHTTPOutcome) -> Void) -> any UpstreamCall {
        let made = ToolCallMade(url: url, completion: completion)
        toolCalls.append(made)
        return made.call
    }

    func startModelListing(of provider: Provider, handler: @escaping (ModelListing) -> Void) -> any UpstreamCall {
        Call()
    }
}

/// A broker on a loop of this thread, with a real log store in a temporary directory, the
/// scripted upstream, and a client on a socket pair it reads without blocking: requests are
/// answered by turning the loop until the answer is there. No process is started.
final class InProcessBroker {
    let directory: String
    let loop: Loop
    let store: LogStore
    let upstream = ScriptedUpstream()
    let broker: Broker
    private let clientFD: Int32
    private var received: [UInt8] = []
    private var nextID = 1
    /// Every notification the client got, in order.
    private(set) var notifications: [(method: String, params: JSON)] = []

    static let toolName = "lookup"

    /// An error answer.
    struct Refused: Error {
        let code: Int
        let message: String
    }

    /// `configure` changes the settings the broker starts with.
    init(configure: (inout Settings) -> Void = { _ in }) throws {
        // As confabd does: a client gone away is an error on the write, not the end of the process.
        signal(SIGPIPE, SIG_IGN)
        directory = try XCTUnwrap(String(validatingCString: mkdtemp(strdup("/tmp/confab-broker-XXXXXX"))))
        loop = try Loop()
        store = try LogStore(directory: directory + "/data", loop: loop, syncEnabled: false)
        var settings = Settings()
        settings.upstream.model = "scripted"
        settings.tools = ToolTable([ToolDefinition(name: Self.toolName, description: "looks something up",
                                                   url: "http://127.0.0.1:9/lookup")])
        settings.profiles = [Profile(name: "tools", provider: Provider.defaultName, tools: [Self.toolName])]
        configure(&settings)
        broker = Broker(loop: loop, store: store, upstream: upstream, settings: settings,
                        logger: Logger(level: .error, journal: false) { line in _ = Files.writeAll(2, Array(line.utf8)) })
        broker.load()
        let path = directory + "/socket"
        let listener = try UnixListener(loop: loop)
        try listener.bind(path: path)
        try broker.serve(listener)
        clientFD = try UnixSocket.connect(to: path)
        _ = fcntl(clientFD, F_SETFL, fcntl(clientFD, F_GETFL) | O_NONBLOCK)
    }

    /// Closes everything; the temporary directory goes.
    func close() {
        Files.close(clientFD)
        broker.shutdown(reason: "test") {}
        turn(until: { false }, limit: 50)
        store.close()
        loop.close()
        _ = Spawn.wait(["/bin/rm", "-rf", directory])
    }

    /// Sends a request and turns the loop until its answer comes: its result, or its error thrown.
    @discardableResult
    func call(_ method: RPCMethod, _ params: JSON = [:], file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        let id = nextID
        nextID += 1
        let frame = RPC.request(id: .int(id), method: method.rawValue, params: params)
        XCTAssertEqual(Files.writeAll(clientFD, frame).failure, nil, file: file, line: line)
        var answer: JSON?
        turn(until: {
            answer = self.takeAnswer(id)
            return answer != nil
        })
        let response = try XCTUnwrap(answer, "no answer to \(method.rawValue)", file: file, line: line)
        if let error = response["error"] {
            throw Refused(code: error["code"]?.int ?? 0, message: error["message"]?.string ?? "")
        }
        return response["result"] ?? .null
    }

    /// Turns the loop until `condition` holds, reading what the client got in between; gives up
    /// after `limit` turns or 10 seconds (a failure guard, not a timing).
    func turn(until condition: () -> Bool, limit: Int = 100_000) {
        let deadline = Timestamp.now().milliseconds + 10_000
        var turns = 0
        while !condition(), turns < limit, Timestamp.now().milliseconds < deadline {
            _ = loop.runOnce(wait: false)
            readAvailable()
            turns += 1
            if turns % 64 == 0 { usleep(200) }
        }
    }

    /// Turns the loop until a notification named `method` (after those already seen) arrives.
    @discardableResult
    func waitFor(_ method: RPCNotification, after seen: Int = 0, file: StaticString = #filePath, line: UInt = #line) -> JSON? {
        var found: JSON?
        turn(until: {
            found = notifications.dropFirst(seen).first { $0.method == method.rawValue }?.params
            return found != nil
        })
        XCTAssertNotNil(found, "no \(method.rawValue)", file: file, line: line)
        return found
    }

    func notifications(_ method: RPCNotification) -> [JSON] {
        notifications.filter { $0.method == method.rawValue }.map(\.params)
    }

    private var answers: [Int: JSON] = [:]

    private func takeAnswer(_ id: Int) -> JSON? {
        answers.removeValue(forKey: id)
    }

    private func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(clientFD, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            received += chunk[0..<count]
        }
        while let newline = received.firstIndex(of: 0x0A) {
            let line = Array(received[..<newline])
            received.removeFirst(newline + 1)
            guard let json = try? JSON.parse(line) else { continue }
            if let method = json["method"]?.string {
                notifications.append((method, json["params"] ?? .null))
            } else if let id = json["id"]?.int {
                answers[id] = json
            }
        }
    }
}
