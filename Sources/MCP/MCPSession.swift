import ConfabProtocol

/// A tool an MCP server offers, as its `tools/list` describes it.
public struct MCPTool: Sendable, Equatable {
    public var name: String
    public var description: String
    /// The JSON Schema of its arguments (an object schema; `{"type":"object"}` when the server gave none).
    public var inputSchema: JSON
    public init(name: String, description: String, inputSchema: JSON) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
    }

    /// The longest description kept, in UTF-8 bytes: each goes to the model with every request.
    public static let maxDescriptionBytes = 8 << 10
    /// What ends a description that was cut.
    public static let cutMark = " …[cut]"

    /// `description` as kept: at most `maxDescriptionBytes`, cut at a character with `cutMark`.
    public static func keptDescription(_ description: String) -> String {
        guard description.utf8.count > maxDescriptionBytes else { return description }
        let room = maxDescriptionBytes - cutMark.utf8.count
        var kept = ""
        var bytes = 0
        for character in description {
            bytes += character.utf8.count
            guard bytes <= room else { break }
            kept.append(character)
        }
        return kept + cutMark
    }

    /// What it holds, in bytes, towards a listing's bound.
    var listedBytes: Int { name.utf8.count + description.utf8.count + inputSchema.bytes.count }
}

/// What a `tools/call` came to: the server's answer (which may itself say the tool failed:
/// `isError`), an error response, no answer in time, or no answer at all (a cancel, a server
/// that is not running or went away).
public enum MCPCallOutcome: Sendable, Equatable {
    case answered(MCPToolResult)
    case refused(String)
    case timedOut(String)
    case failed(String)
}

/// A `notifications/progress` for a call in flight, as the server sent it (untrusted:
/// `message` is the server's text, unchecked).
public struct MCPProgress: Sendable, Equatable {
    public var progress: Double
    public var total: Double?
    public var message: String?
    public init(progress: Double, total: Double? = nil, message: String? = nil) {
        self.progress = progress
        self.total = total
        self.message = message
    }
}

/// The client side of one MCP connection as a state machine over lines: it is given the
/// server's lines (`receive`) and hands the lines to send to `send`. It knows no clock and no
/// process; its owner feeds it, times requests out (`cancel`) and ends it (`fail`).
/// Lifecycle as the specification has it: `initialize` (version negotiation, capabilities,
/// clientInfo), then `notifications/initialized`, then `tools/list` (every page), then ready;
/// `notifications/tools/list_changed` lists the tools again.
public final class MCPSession {
    /// Protocol revisions this client speaks, newest first; the first is the one it asks for.
    public static let supportedVersions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
    /// Bounds on what a server may make us hold.
    public static let maxTools = 1000
    public static let maxListPages = 100
    /// The most a whole tool listing may hold (names, descriptions as kept, schemas).
    public static let maxListingBytes = 4 << 20

    public enum State: Equatable, Sendable {
        case created, initializing, listingTools, ready
        case failed(String)
    }

    public private(set) var state: State = .created
    public private(set) var tools: [MCPTool] = []
    public private(set) var protocolVersion: String?
    public private(set) var serverName: String?
    /// The first tool listing is done: the server is ready for calls.
    public var onReady: (() -> Void)?
    /// A later listing (after `list_changed`) replaced `tools`.
    public var onToolsChanged: (() -> Void)?
    /// The session failed (the handshake, a broken frame, `fail`); every pending call has ended.
    public var onFailed: ((String) -> Void)?
    /// A `notifications/message` log line from the server: level and text.
    public var onLog: ((String, String) -> Void)?

    private let clientName: String
    private let clientVersion: String
    private let send: ([UInt8]) -> Void
    private var nextID = 1

    private enum Pending {
        case initialize
        case listTools(collected: [MCPTool], pages: Int, bytes: Int)
        case call(tool: String, completion: (MCPCallOutcome) -> Void, progress: ((MCPProgress) -> Void)?)
    }
    private var pending: [Int: Pending] = [:]
    /// A `list_changed` came while a listing was under way: list again when it ends.
    private var listAgain = false

    public init(clientName: String, clientVersion: String, send: @escaping ([UInt8]) -> Void) {
        self.clientName = clientName
        self.clientVersion = clientVersion
        self.send = send
    }

    public var isFailed: Bool { if case .failed = state { return true }; return false }

    /// Requests waiting for an answer (for the owner's bounds and tests).
    public var pendingCount: Int { pending.count }

    /// Sends `initialize`.
    public func start() {
        guard state == .created else { return }
        state = .initializing
        let params: JSON = [
            "protocolVersion": .string(Self.supportedVersions[0]),
            // A client that offers no roots, sampling or elicitation declares none.
            "capabilities": .object([:]),
            "clientInfo": ["name": .string(clientName), "version": .string(clientVersion)],
        ]
        request("initialize", params: params, as: .initialize)
    }

    /// Calls `tool`; `completion` runs once, with the answer or the failure. With `progress`,
    /// the request carries a progress token (its id) and each `notifications/progress` for it
    /// runs `progress` until the call ends. Returns the request id (for `cancel`), or nil when
    /// the session is not ready (then `completion` has run).
    @discardableResult
    public func call(tool: String, arguments: JSON, progress: ((MCPProgress) -> Void)? = nil,
                     completion: @escaping (MCPCallOutcome) -> Void) -> Int? {
        if case .failed(let reason) = state {
            completion(.failed(reason))
            return nil
        }
        guard state == .ready else {
            completion(.failed("the server is not ready"))
            return nil
        }
        var params: [String: JSON] = ["name": .string(tool), "arguments": arguments]
        if progress != nil { params["_meta"] = ["progressToken": .int(nextID)] }
        return request("tools/call", params: .object(params), as: .call(tool: tool, completion: completion, progress: progress))
    }

    /// Gives up on call `id`: the server is told (`notifications/cancelled`) and the call ends
    /// now with `reason`; a late answer is ignored.
    public func cancel(_ id: Int, reason: String) {
        guard case .call(_, let completion, _) = pending[id] else { return }
        pending[id] = nil
        send(RPC.notification(method: "notifications/cancelled", params: ["requestId": .int(id), "reason": .string(reason)]))
        completion(.failed(reason))
    }

    /// Ends the session (the server exited, its stdout broke, the handshake timed out):
    /// every pending call fails with `reason`.
    public func fail(_ reason: String) {
        guard !isFailed else { return }
        state = .failed(reason)
        let calls = pending.values
        pending = [:]
        for case .call(_, let completion, _) in calls { completion(.failed(reason)) }
        onFailed?(reason)
    }

    /// One line from the server's stdout.
    public func receive(_ line: some Collection<UInt8>) {
        guard !isFailed else { return }
        // Blank lines carry nothing; the transport is one JSON-RPC message a line.
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        switch RPC.parse(line) {
        case .failure(let failure):
            fail("the server broke the protocol: \(failure.error.message)")
        case .success(.response(let id, let result)):
            guard let id = id.int, let waiting = pending.removeValue(forKey: id) else { return }
            answered(waiting, result: result)
        case .success(.errorResponse(let id, let error)):
            guard let id = id.int, let waiting = pending.removeValue(forKey: id) else { return }
            refused(waiting, error: error)
        case .success(.request(let id, let method, _)):
            // Liveness checks are answered; this client declared no capability the server
            // could ask anything else of.
            if method == "ping" {
                send(RPC.response(id: id, result: .object([:])))
            } else {
                send(RPC.response(id: id, error: RPCError(code: RPCError.methodNotFound, message: "method not found: \(method)")))
            }
        case .success(.notification(let method, let params)):
            switch method {
            case "notifications/tools/list_changed":
                guard state == .ready else { return }
                if pending.values.contains(where: { if case .listTools = $0 { return true }; return false }) {
                    listAgain = true
                } else {
                    listTools(cursor: nil, collected: [], pages: 0, bytes: 0)
                }
            case "notifications/message":
                let level = params?["level"]?.string ?? "info"
                let data = params?["data"]
                onLog?(level, data?.string ?? data?.text ?? "")
            case "notifications/progress":
                // Only for a call in flight that asked for it; a token of nothing pending is dropped.
                guard let token = params?["progressToken"]?.int, case .call(_, _, let onProgress?) = pending[token],
                      let progress = params?["progress"]?.double, progress.isFinite else { return }
                let total = params?["total"]?.double.flatMap { $0.isFinite ? $0 : nil }
                onProgress(MCPProgress(progress: progress, total: total, message: params?["message"]?.string))
            default:
                break  // resource updates and the like: nothing asked for them
            }
        }
    }

    private func answered(_ waiting: Pending, result: JSON) {
        switch waiting {
        case .initialize:
            guard let version = result["protocolVersion"]?.string else {
                return fail("the server's initialize answer has no protocolVersion")
            }
            guard Self.supportedVersions.contains(version) else {
                return fail("the server speaks protocol \(version); this client speaks \(Self.supportedVersions.joined(separator: ", "))")
            }
            protocolVersion = version
            serverName = result["serverInfo"]?["name"]?.string
            send(RPC.notification(method: "notifications/initialized", params: .object([:])))
            state = .listingTools
            if result["capabilities"]?["tools"] == nil {
                // A server without tools: ready, with none.
                finishListing([])
            } else {
                listTools(cursor: nil, collected: [], pages: 0, bytes: 0)
            }
        case .listTools(let collected, let pages, let bytes):
            var all = collected
            var total = bytes
            for value in result["tools"]?.array ?? [] {
                guard let name = value["name"]?.string, !name.isEmpty else { continue }
                var schema = value["inputSchema"] ?? ["type": "object"]
                if schema.object == nil { schema = ["type": "object"] }
                let description = MCPTool.keptDescription(value["description"]?.string ?? value["title"]?.string ?? "")
                let tool = MCPTool(name: name, description: description, inputSchema: schema)
                total += tool.listedBytes
                all.append(tool)
                if all.count > Self.maxTools {
                    return fail("the server lists more than \(Self.maxTools) tools")
                }
                if total > Self.maxListingBytes {
                    return fail("the server's tool list holds more than \(Self.maxListingBytes >> 20) MiB of names, descriptions and schemas")
                }
            }
            if let cursor = result["nextCursor"]?.string {
                guard pages + 1 < Self.maxListPages else {
                    return fail("the server's tool list goes on past \(Self.maxListPages) pages")
                }
                listTools(cursor: cursor, collected: all, pages: pages + 1, bytes: total)
            } else {
                finishListing(all)
            }
        case .call(_, let completion, _):
            completion(.answered(MCPToolResult(result)))
        }
    }

    private func refused(_ waiting: Pending, error: RPCError) {
        switch waiting {
        case .initialize: fail("the server refused initialize: \(error.message)")
        case .listTools:
            if state == .listingTools { fail("the server refused tools/list: \(error.message)") }
            // A refused refresh keeps the tools known so far.
        case .call(_, let completion, _): completion(.refused("the server answered with an error: \(error.message) (\(error.code))"))
        }
    }

    private func finishListing(_ listed: [MCPTool]) {
        let first = state == .listingTools
        tools = listed
        state = .ready
        if listAgain {
            listAgain = false
            listTools(cursor: nil, collected: [], pages: 0, bytes: 0)
        }
        if first { onReady?() } else { onToolsChanged?() }
    }

    private func listTools(cursor: String?, collected: [MCPTool], pages: Int, bytes: Int) {
        let params: JSON? = cursor.map { ["cursor": .string($0)] }
        request("tools/list", params: params, as: .listTools(collected: collected, pages: pages, bytes: bytes))
    }

    @discardableResult
    private func request(_ method: String, params: JSON?, as waiting: Pending) -> Int {
        let id = nextID
        nextID += 1
        pending[id] = waiting
        send(RPC.request(id: .int(id), method: method, params: params))
        return id
    }
}
