import ConfabLog
import ConfabProtocol
import Curl
import EventLoop
import ServiceSettings

/// One MCP session's Streamable HTTP transport, on the daemon's loop through libcurl: every
/// message the session writes is POSTed to the server's endpoint, and the messages its
/// answers hold (one JSON message, or an SSE stream of requests and notifications ending
/// with the response) are handed to `onMessage`, as a stdio server's lines are.
///
/// The `Mcp-Session-Id` of the `initialize` answer goes with every later request, and so does
/// the negotiated `MCP-Protocol-Version`. A 404 to a request with the session id means the
/// server ended the session: the transport fails, and its owner starts a new session (a new
/// transport) on next use. Once initialized, the server's own stream is opened with a GET
/// (`notifications/tools/list_changed` arrives there); a 405 says the server has none.
/// `close(endingSession:)` DELETEs the session, bounded in time.
///
/// A notification or response is POSTed only once the one before it was accepted, so a
/// server sees `notifications/initialized` before the requests that follow it; requests go
/// out side by side. What waits is bounded (`MCPHTTPOutbox`), and the daemon's own messages
/// (`notifications/cancelled`) go before answers to the server's requests.
public final class MCPHTTPTransport {
    /// A message from the server, for the session.
    public var onMessage: (([UInt8]) -> Void)?
    /// The transport cannot go on (the server cannot be reached, ended the session, or broke
    /// the transport's rules); called once, after which nothing is sent or delivered.
    public var onFailure: ((String) -> Void)?
    public private(set) var sessionID: String?
    public private(set) var protocolVersion: String?

    private let multi: CurlMulti
    private let endpoint: MCPHTTPEndpoint
    private let timeoutSeconds: Int
    private let log: (_ level: LogLevel, _ text: String) -> Void
    /// The reader of what the server sends: each POST and the GET, until it ends.
    private var exchanges: [ObjectIdentifier: Exchange] = [:]
    /// Messages waiting for the notification or response before them to be accepted.
    private var queue = MCPHTTPOutbox()
    private var waitingForAcceptance = false
    private var initializeID: Int?
    /// The GET stream, while it is open.
    private var listening: Exchange?
    private var listenAgain: Timer?
    /// The server answered the GET with 405, or with something else than a stream.
    private var noServerStream = false
    private var isOver = false
    /// How long the GET stream waits before it is opened again after it ended.
    static let listenAgainMilliseconds: UInt64 = 2000

    /// `timeoutSeconds`: the longest a request may go without a byte of its answer (the
    /// owner times calls out sooner and cancels them), and the longest a notification's
    /// POST may take.
    public init(endpoint: MCPHTTPEndpoint, multi: CurlMulti, timeoutSeconds: Int,
                log: @escaping (_ level: LogLevel, _ text: String) -> Void) {
        self.endpoint = endpoint
        self.multi = multi
        self.timeoutSeconds = timeoutSeconds
        self.log = log
    }

    /// Sends one message of the session (a line: its trailing LF is not part of the body).
    public func send(_ line: [UInt8]) {
        guard !isOver else { return }
        if waitingForAcceptance {
            guard queue.append(line) else {
                return fail("more than \(MCPHTTPOutbox.maxMessages) messages or \(MCPHTTPOutbox.maxBytes) bytes wait for the server to accept the one before them")
            }
        } else {
            post(line)
        }
    }

    private func post(_ line: [UInt8]) {
        var body = line
        while body.last == 0x0A || body.last == 0x0D { body.removeLast() }
        let kind: Exchange.Kind
        switch RPC.parse(body) {
        case .success(.request(let id, let method, _)):
            kind = .request(id: id.int ?? -1, method: method)
            if method == "initialize" { initializeID = id.int }
        case .success(.notification(let method, let params)):
            kind = .message(method: method)
            // A cancelled request's answer is not waited for: its stream is closed too.
            if method == "notifications/cancelled", let id = params?["requestId"]?.int {
                for exchange in exchanges.values {
                    if case .request(id, _) = exchange.kind { end(exchange) }
                }
            }
        default:
            kind = .message(method: nil)
        }
        let headers = requestHeaders(accept: "application/json, text/event-stream") + ["Content-Type: application/json"]
        let stall: Int
        let total: Int
        switch kind {
        case .request: (stall, total) = (timeoutSeconds + 10, 0)
        default: (stall, total) = (timeoutSeconds, timeoutSeconds)
        }
        let transfer = CurlTransfer(url: endpoint.url, body: body, headers: headers, connectTimeoutSeconds: min(timeoutSeconds, 10),
                                    stallSeconds: stall, totalSeconds: total)
        let exchange = Exchange(kind: kind, transfer: transfer, sentSessionID: sessionID != nil)
        if case .message = kind { waitingForAcceptance = true }
        start(exchange)
    }

    /// Opens the server's own stream (after `notifications/initialized` was accepted).
    private func listen() {
        guard !isOver, !noServerStream, listening == nil, sessionID != nil || protocolVersion != nil else { return }
        // An idle stream is normal: no stall limit; TCP keepalive finds a dead peer.
        let transfer = CurlTransfer(url: endpoint.url, body: nil, headers: requestHeaders(accept: "text/event-stream"),
                                    connectTimeoutSeconds: min(timeoutSeconds, 10), stallSeconds: 0)
        let exchange = Exchange(kind: .listen, transfer: transfer, sentSessionID: sessionID != nil)
        listening = exchange
        start(exchange)
    }

    private func requestHeaders(accept: String) -> [String] {
        var headers = endpoint.headers.map(\.line) + ["Accept: \(accept)"]
        if let sessionID { headers.append("Mcp-Session-Id: \(sessionID)") }
        if let protocolVersion { headers.append("MCP-Protocol-Version: \(protocolVersion)") }
        return headers
    }

    private func start(_ exchange: Exchange) {
        let key = ObjectIdentifier(exchange)
        exchanges[key] = exchange
        // The transfer holds its exchange until it ends (curl then drops these closures).
        exchange.transfer.onData = { [weak self] bytes in
            guard let self, !isOver, exchanges[key] != nil else { return false }
            if exchange.answer == nil { classify(exchange) }
            received(bytes, on: exchange)
            return !isOver && exchanges[key] != nil
        }
        exchange.transfer.onComplete = { [weak self] outcome in
            guard let self, !isOver, exchanges[key] != nil else { return }
            exchanges[key] = nil
            if exchange.answer == nil, outcome.isSuccess || exchange.transfer.responseCode != 0 { classify(exchange) }
            guard !isOver else { return }
            completed(exchange, outcome)
        }
        multi.start(exchange.transfer)
    }

    /// Stops reading `exchange` (its answer is no longer wanted).
    private func end(_ exchange: Exchange) {
        exchanges[ObjectIdentifier(exchange)] = nil
        multi.cancel(exchange.transfer)
        if exchange === listening { listening = nil }
    }

    /// The status and headers have come: what the body is, and what the headers say.
    private func classify(_ exchange: Exchange) {
        let transfer = exchange.transfer
        let answer = MCPHTTPAnswer.classify(status: transfer.responseCode, contentType: transfer.header("Content-Type"),
                                            sentSessionID: exchange.sentSessionID)
        exchange.answer = answer
        switch answer {
        case .sessionExpired:
            return fail("the server ended the session (HTTP 404)")
        case .eventStream:
            exchange.events = MCPHTTPEventStream()
        default:
            break
        }
        if case .request(let id, _) = exchange.kind, id == initializeID, [.json, .eventStream].contains(answer) {
            switch MCPHTTPExchange.sessionID(fromHeader: transfer.header("Mcp-Session-Id")) {
            case .success(let id): sessionID = id
            case .failure(let problem): return fail(problem.description)
            }
        }
        if case .message = exchange.kind {
            // Accepted or refused, the next message may go: the server has read this one.
            releaseQueue()
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer, on exchange: Exchange) {
        guard let answer = exchange.answer else { return }
        switch answer {
        case .eventStream:
            do throws(MCPHTTPEventStream.Failure) {
                try exchange.events?.feed(bytes) { [unowned self] message in
                    // Nothing after the response: the exchange ended with it.
                    guard !isOver, exchanges[ObjectIdentifier(exchange)] != nil else { return }
                    deliver(message, from: exchange)
                }
            } catch {
                switch error {
                case .tooLarge(let limit): fail("the server sent an event of more than \(limit) bytes")
                case .lineTooLong(let limit): fail("the server sent an event line of more than \(limit) bytes")
                }
            }
        case .json:
            guard exchange.body.count + bytes.count <= MCPHTTPExchange.maxMessageBytes else {
                return fail("the server's answer is larger than \(MCPHTTPExchange.maxMessageBytes) bytes")
            }
            exchange.body.append(contentsOf: bytes)
        case .refused, .unreadable, .methodNotAllowed:
            let room = MCPHTTPExchange.maxRefusalBytes - exchange.body.count
            if room > 0 { exchange.body.append(contentsOf: bytes.prefix(room)) }
        case .accepted, .sessionExpired:
            break
        }
    }

    private func deliver(_ message: [UInt8], from exchange: Exchange) {
        let wasAnswered = exchange.isAnswered
        if case .request(let id, _) = exchange.kind, case .success(let frame) = RPC.parse(message) {
            switch frame {
            case .response(let answered, let result) where answered.int == id:
                exchange.isAnswered = true
                if id == initializeID, let version = result["protocolVersion"]?.string, MCPSession.supportedVersions.contains(version) {
                    protocolVersion = version
                }
            case .errorResponse(let answered, _) where answered.int == id:
                exchange.isAnswered = true
            default:
                break
            }
        }
        onMessage?(message)
        // The response an event stream was for has come: its exchange is over, even if the
        // server keeps the stream open (a connection, and a reader, held for nothing).
        if !wasAnswered, exchange.isAnswered, exchange.answer == .eventStream, !isOver, exchanges[ObjectIdentifier(exchange)] != nil {
            end(exchange)
        }
    }

    private func completed(_ exchange: Exchange, _ outcome: CurlOutcome) {
        if exchange === listening {
            listening = nil
            return listenEnded(exchange, outcome)
        }
        switch exchange.kind {
        case .request(let id, let method):
            if exchange.isAnswered { return }
            guard outcome.isSuccess || exchange.answer != nil else {
                return fail("the server could not be reached: \(outcome.message)")
            }
            switch exchange.answer {
            case .json?:
                switch MCPHTTPExchange.messages(inJSONBody: exchange.body) {
                case .success(let messages):
                    for message in messages where !isOver { deliver(message, from: exchange) }
                case .failure(let problem):
                    return fail(problem.description)
                }
                guard !isOver, !exchange.isAnswered else { return }
                answerForServer(id, "the server's JSON answer to \(method) is not its response")
            case .eventStream?:
                guard outcome.isSuccess else { return fail("the server's answer to \(method) broke off: \(outcome.message)") }
                // The stream may be resumed by a server that keeps events; this client does
                // not: the request cannot be answered any more.
                fail("the server ended its answer to \(method) without the response")
            case .refused(let status)?:
                answerForServer(id, MCPHTTPExchange.refusal(status: status, body: exchange.body))
            case .methodNotAllowed?:
                answerForServer(id, MCPHTTPExchange.refusal(status: 405, body: exchange.body))
            case .unreadable(let type)?:
                answerForServer(id, "the server answered \(method) with \(type), which is neither JSON nor an event stream")
            case .accepted?:
                answerForServer(id, "the server accepted \(method) without answering it")
            case .sessionExpired?, nil:
                fail("the server could not be reached: \(outcome.message)")
            }
        case .message(let method):
            let what = method ?? "a response"
            if exchange.answer == nil {
                return fail("the server could not be reached: \(outcome.message)")
            }
            switch exchange.answer {
            case .refused(let status)?:
                log(.warning, "the server did not accept \(what): \(MCPHTTPExchange.refusal(status: status, body: exchange.body))")
            case .methodNotAllowed?:
                log(.warning, "the server did not accept \(what): \(MCPHTTPExchange.refusal(status: 405, body: exchange.body))")
            default:
                break
            }
            if method == "notifications/initialized", exchange.answer == .accepted { listen() }
        case .listen:
            break
        }
    }

    /// The server answered request `id` in HTTP but not in JSON-RPC: the session is given
    /// the error response the server did not write, as stdio gives one a server wrote.
    private func answerForServer(_ id: Int, _ reason: String) {
        deliverSynthesized(RPC.response(id: .int(id), error: RPCError(code: RPCError.internalError, message: reason)))
    }

    private func deliverSynthesized(_ message: [UInt8]) {
        guard !isOver else { return }
        onMessage?(message)
    }

    private func listenEnded(_ exchange: Exchange, _ outcome: CurlOutcome) {
        switch exchange.answer {
        case .eventStream?:
            break
        case .methodNotAllowed?:
            noServerStream = true
            log(.info, "the server offers no stream of its own (HTTP 405): its notifications come only with answers")
            return
        case .refused(let status)?:
            noServerStream = true
            log(.warning, "the server refused its own stream: \(MCPHTTPExchange.refusal(status: status, body: exchange.body))")
            return
        case .accepted?, .json?, .unreadable?:
            noServerStream = true
            log(.warning, "the server answered the request for its stream with something else than an event stream")
            return
        case .sessionExpired?:
            return
        case nil:
            if outcome.isConnectFailure { return fail("the server could not be reached: \(outcome.message)") }
        }
        // The server (or something between) closed the stream: it is opened again, once a while.
        let timer = listenAgain ?? Timer(loop: multi.loop)
        listenAgain = timer
        timer.start(after: Self.listenAgainMilliseconds) { [weak self] in self?.listen() }
    }

    private func releaseQueue() {
        waitingForAcceptance = false
        while !waitingForAcceptance, !isOver, let line = queue.next() {
            post(line)
        }
    }

    private func fail(_ reason: String) {
        guard !isOver else { return }
        stopEverything()
        onFailure?(reason)
    }

    private func stopEverything() {
        isOver = true
        for exchange in exchanges.values { multi.cancel(exchange.transfer) }
        exchanges = [:]
        queue.removeAll()
        listening = nil
        listenAgain?.close()
        listenAgain = nil
    }

    /// Ends the transport: nothing more is sent or delivered. With `endingSession`, a session
    /// the server gave an id is DELETEd, waiting at most `seconds`; `then` runs once that is
    /// done (at once without it), on a later loop turn.
    public func close(endingSession: Bool, seconds: Int = 2, then: @escaping () -> Void = {}) {
        let wasOver = isOver
        stopEverything()
        onMessage = nil
        onFailure = nil
        guard endingSession, !wasOver, let sessionID else { return multi.loop.onNextTurn(then) }
        let transfer = CurlTransfer(url: endpoint.url, body: nil, headers: endpoint.headers.map(\.line) + ["Mcp-Session-Id: \(sessionID)"]
                                    + (protocolVersion.map { ["MCP-Protocol-Version: \($0)"] } ?? []),
                                    connectTimeoutSeconds: seconds, stallSeconds: seconds, totalSeconds: seconds, method: "DELETE")
        transfer.onData = { _ in true }
        transfer.onComplete = { [log] outcome in
            // Kept alive by this closure until it ends.
            let status = transfer.responseCode
            if !outcome.isSuccess {
                log(.info, "the session could not be ended: \(outcome.message)")
            } else if !(200..<300).contains(status) && status != 404 && status != 405 {
                log(.info, "the server did not end the session: HTTP \(status)")
            }
            transfer.onComplete = nil
            then()
        }
        multi.start(transfer)
    }

    /// One HTTP exchange with the server and what has been read of its answer.
    private final class Exchange {
        enum Kind {
            /// A request: its answer holds its response.
            case request(id: Int, method: String)
            /// A notification (its method) or a response: accepted with 202.
            case message(method: String?)
            /// The GET for the server's own stream.
            case listen
        }
        let kind: Kind
        let transfer: CurlTransfer
        let sentSessionID: Bool
        var answer: MCPHTTPAnswer?
        var body: [UInt8] = []
        var events: MCPHTTPEventStream?
        var isAnswered = false

        init(kind: Kind, transfer: CurlTransfer, sentSessionID: Bool) {
            self.kind = kind
            self.transfer = transfer
            self.sentSessionID = sentSessionID
        }
    }
}

/// The HTTP client the servers over HTTP share (libcurl's multi handle on the loop), made by
/// whoever runs the servers without their knowing that it is libcurl.
public final class MCPHTTPClient {
    let multi: CurlMulti

    public init(loop: Loop) {
        multi = CurlMulti(loop: loop)
    }

    /// At shutdown, once no server uses it.
    public func close() {
        multi.close()
    }
}
