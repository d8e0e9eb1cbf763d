import ConfabProtocol
import SSE
import ServiceSettings
import Tools

/// What one HTTP answer of a Streamable HTTP server is, from its status and Content-Type
/// alone (the body is read according to it).
public enum MCPHTTPAnswer: Equatable, Sendable {
    /// A 2xx with no message to read: 202 to a notification or a response the client POSTed.
    case accepted
    /// `application/json`: one JSON-RPC message (or, from servers of the 2025-03-26
    /// revision, an array of them).
    case json
    /// `text/event-stream`: messages as SSE events, the request's response among them.
    case eventStream
    /// 404 to a request that carried a session id: the server ended the session (or forgot
    /// it in a restart); a new one starts with `initialize`.
    case sessionExpired
    /// 405: to the GET, the server offers no stream of its own; to the DELETE, it does not
    /// let clients end sessions.
    case methodNotAllowed
    /// Any other status outside 2xx; the body may say why.
    case refused(status: Int)
    /// A 2xx of a type this client cannot read.
    case unreadable(mediaType: String)

    public static func classify(status: Int, contentType: String?, sentSessionID: Bool) -> MCPHTTPAnswer {
        if status == 404 && sentSessionID { return .sessionExpired }
        if status == 405 { return .methodNotAllowed }
        guard (200..<300).contains(status) else { return .refused(status: status) }
        // Whatever type it names (some servers send application/json with no body).
        if status == 202 || status == 204 { return .accepted }
        let mediaType = Self.mediaType(contentType)
        switch mediaType {
        case "text/event-stream": return .eventStream
        case "application/json": return .json
        case "": return .accepted
        default: return .unreadable(mediaType: mediaType)
        }
    }

    /// `Content-Type`'s media type, lower case, without parameters (`; charset=utf-8`).
    static func mediaType(_ contentType: String?) -> String {
        guard let contentType else { return "" }
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return String(type.unicodeScalars.filter { !$0.properties.isWhitespace }).lowercased()
    }
}

/// Why a server's answer cannot be used, in words for the log and the call's result.
public struct MCPHTTPProblem: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The pure parts of the Streamable HTTP transport: what a server's answers hold, and what of
/// them may be trusted into a header or a message.
public enum MCPHTTPExchange {
    /// The most a JSON answer, or one event's data, may hold: as much as a stdio server's line.
    public static let maxMessageBytes = 16 << 20
    /// How much of a refusal's body is kept to say why.
    public static let maxRefusalBytes = 4096
    /// The longest session id taken.
    public static let maxSessionIDBytes = 1024

    /// The messages of a JSON answer: the object itself, or each element of an array.
    public static func messages(inJSONBody body: [UInt8]) -> Result<[[UInt8]], MCPHTTPProblem> {
        let value: JSON
        do {
            value = try JSON.parse(body)
        } catch {
            return .failure(MCPHTTPProblem("the server's JSON answer cannot be read: \(error.description)"))
        }
        switch value {
        case .object: return .success([value.bytes])
        case .array(let elements): return .success(elements.map(\.bytes))
        default: return .failure(MCPHTTPProblem("the server's JSON answer is a \(value.typeName), not a JSON-RPC message"))
        }
    }

    /// The `Mcp-Session-Id` an answer gives, checked: the specification allows visible ASCII
    /// only, and the value is sent back in a header, where anything else could split it.
    /// nil: no session id (a server without sessions); failure: one that cannot be used.
    public static func sessionID(fromHeader value: String?) -> Result<String?, MCPHTTPProblem> {
        guard let value else { return .success(nil) }
        guard !value.isEmpty else { return .failure(MCPHTTPProblem("the server gave an empty Mcp-Session-Id")) }
        guard value.utf8.count <= maxSessionIDBytes else {
            return .failure(MCPHTTPProblem("the server gave an Mcp-Session-Id longer than \(maxSessionIDBytes) bytes"))
        }
        guard value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return .failure(MCPHTTPProblem("the server gave an Mcp-Session-Id with characters other than visible ASCII"))
        }
        return .success(value)
    }

    /// Why a server refused a message, in one short line: the JSON-RPC error its body holds, or
    /// the start of the body as text, behind the status. The body is the server's: cut, and
    /// with control characters made spaces, so it can go into a log line or a tool result.
    public static func refusal(status: Int, body: [UInt8]) -> String {
        var detail = ""
        if let value = try? JSON.parse(body), let error = value["error"].flatMap(RPCError.init(json:)) {
            detail = error.message
        } else {
            detail = String(decoding: body.prefix(maxRefusalBytes), as: UTF8.self)
        }
        detail = String(detail.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
        detail = detail.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        if detail.count > 200 { detail = String(detail.prefix(200)) + "…" }
        return detail.isEmpty ? "HTTP \(status)" : "HTTP \(status): \(detail)"
    }
}

/// An SSE answer of a Streamable HTTP server read as the JSON-RPC messages its events carry:
/// events of type `message` with data (an event with none primes a reconnection and carries
/// no message). The data of one event, and what arrives without completing one, is bounded.
public struct MCPHTTPEventStream {
    public enum Failure: Error, Equatable, Sendable {
        case tooLarge(limit: Int)
        case lineTooLong(limit: Int)
    }

    private var parser: SSEParser
    private let maxMessageBytes: Int
    /// Bytes fed since the last event was completed.
    private var sinceLastEvent = 0
    /// The last event id seen, for a resumption.
    public private(set) var lastEventID: String?

    public init(maxMessageBytes: Int = MCPHTTPExchange.maxMessageBytes) {
        self.maxMessageBytes = maxMessageBytes
        parser = SSEParser(maxLineBytes: maxMessageBytes)
    }

    /// Feeds bytes as they arrive; each message completed by them goes to `message`, in order.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ message: ([UInt8]) -> Void) throws(Failure) {
        var completed = false
        var lastID = lastEventID
        do {
            try parser.feed(bytes) { event in
                completed = true
                if let id = event.id { lastID = id }
                guard event.type == "message", !event.data.isEmpty else { return }
                message(Array(event.data))
            }
        } catch {
            throw .lineTooLong(limit: maxMessageBytes)
        }
        lastEventID = lastID
        sinceLastEvent = completed ? 0 : sinceLastEvent + bytes.count
        // An event's data lines are held until the blank line that ends it.
        if sinceLastEvent > maxMessageBytes { throw .tooLarge(limit: maxMessageBytes) }
    }

    /// For tests and small inputs: the messages `bytes` complete.
    public mutating func feed(_ bytes: [UInt8]) throws(Failure) -> [[UInt8]] {
        var messages: [[UInt8]] = []
        var failure: Failure?
        bytes.withUnsafeBytes { buffer in
            do throws(Failure) {
                try feed(buffer) { messages.append($0) }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return messages
    }
}

/// The messages of a session waiting for the notification or response POSTed before them to
/// be accepted. The daemon's own messages (notifications such as `notifications/cancelled`,
/// and requests) go first, in the order written; answers to the server's own requests (a
/// `ping`) after them, in theirs. The server decides how many of those it asks for and how
/// long it holds each POST open: the outbox is bounded in messages and bytes, and past that
/// the server is treated as broken.
public struct MCPHTTPOutbox: Sendable {
    public static let maxMessages = 1000
    public static let maxBytes = 4 << 20

    private var own: [[UInt8]] = []
    private var answers: [[UInt8]] = []
    public private(set) var bytes = 0

    public init() {}

    public var count: Int { own.count + answers.count }
    public var isEmpty: Bool { own.isEmpty && answers.isEmpty }

    /// Queues `line`; false, and nothing queued, when it would pass a bound.
    public mutating func append(_ line: [UInt8]) -> Bool {
        guard count < Self.maxMessages, bytes + line.count <= Self.maxBytes else { return false }
        bytes += line.count
        switch RPC.parse(line) {
        case .success(.response), .success(.errorResponse): answers.append(line)
        default: own.append(line)
        }
        return true
    }

    /// The message to POST next, taken out.
    public mutating func next() -> [UInt8]? {
        let line: [UInt8]
        if !own.isEmpty {
            line = own.removeFirst()
        } else if !answers.isEmpty {
            line = answers.removeFirst()
        } else {
            return nil
        }
        bytes -= line.count
        return line
    }

    public mutating func removeAll() {
        own = []
        answers = []
        bytes = 0
    }
}
