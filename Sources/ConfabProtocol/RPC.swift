/// JSON-RPC 2.0 over newline-delimited JSON: the framing both ends of the socket share.
/// Codes follow the JSON-RPC spec; confab's own codes sit in the spec's server range.
public struct RPCError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: JSON?

    public init(code: Int, message: String, data: JSON? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "\(message) (\(code))" }

    public static let parseError = -32700
    public static let invalidRequest = -32600
    public static let methodNotFound = -32601
    public static let invalidParams = -32602
    public static let internalError = -32603
    /// The conversation (or message) named does not exist.
    public static let notFound = -32001
    /// A line was longer than the daemon accepts; the connection is closed after this error.
    public static let lineTooLong = -32002
    /// The log could not be written (disk full, I/O error): nothing was stored.
    public static let storageFailed = -32003
    /// A limit was reached (clients, queued sends, streams).
    public static let limitReached = -32004
    /// The daemon is shutting down and takes no new work.
    public static let shuttingDown = -32005
    /// The conversation is not in a state the method needs (a reply in flight, nothing to
    /// regenerate or continue, an edit of a message that is not the last one).
    public static let conflict = -32006
    /// The caller's role on the conversation (or its being another user) does not allow the
    /// method; `data` says which role it has and which one the method needs.
    public static let notPermitted = -32007
    /// The model server did not give what the method asked it for (`conversation.compact`'s
    /// summary); `data` is the reply error (`code`, `message`, `status`).
    public static let upstreamFailed = -32008

    public static func invalidParams(_ message: String) -> RPCError { RPCError(code: invalidParams, message: message) }
    public static func notFound(_ message: String) -> RPCError { RPCError(code: notFound, message: message) }
    public static func conflict(_ message: String) -> RPCError { RPCError(code: conflict, message: message) }

    public var json: JSON {
        var object: [String: JSON] = ["code": .int(code), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }

    public init?(json: JSON) {
        guard let code = json["code"]?.int, let message = json["message"]?.string else { return nil }
        self.init(code: code, message: message, data: json["data"])
    }
}

/// One frame received, classified.
public enum RPCFrame: Equatable, Sendable {
    case request(id: JSON, method: String, params: JSON?)
    case notification(method: String, params: JSON?)
    case response(id: JSON, result: JSON)
    case errorResponse(id: JSON, error: RPCError)
}

/// A frame that could not be taken: the error to answer with, and the id to answer to
/// (null when the id itself could not be read, as the spec says).
public struct RPCFailure: Error, Equatable, Sendable {
    public var id: JSON
    public var error: RPCError
}

public enum RPC {
    /// Parses one line. A failure carries the error to send back and the id to send it
    /// with (null when the id itself could not be read, as the spec says).
    public static func parse(_ line: some Collection<UInt8>) -> Result<RPCFrame, RPCFailure> {
        let json: JSON
        do {
            json = try JSON.parse(line)
        } catch {
            return .failure(RPCFailure(id: JSON.null, error: RPCError(code: RPCError.parseError, message: "parse error: \(error.description)")))
        }
        return classify(json)
    }

    public static func classify(_ json: JSON) -> Result<RPCFrame, RPCFailure> {
        guard case .object(let frame) = json else {
            return .failure(RPCFailure(id: JSON.null, error: RPCError(code: RPCError.invalidRequest,
                message: "invalid request: a frame must be a JSON object, got \(json.typeName)")))
        }
        let rawID = frame["id"]
        var id: JSON = .null
        if let rawID {
            switch rawID {
            case .string, .int, .null: id = rawID
            case .double(let value) where value == value.rounded() && abs(value) < 9.0e15: id = .int(Int(value))
            default:
                return .failure(RPCFailure(id: JSON.null, error: RPCError(code: RPCError.invalidRequest,
                    message: "invalid request: id must be a string, an integer or null")))
            }
        }
        guard frame["jsonrpc"] == .string("2.0") else {
            return .failure(RPCFailure(id: id, error: RPCError(code: RPCError.invalidRequest, message: "invalid request: \"jsonrpc\" must be \"2.0\"")))
        }
        if let methodValue = frame["method"] {
            guard let method = methodValue.string, !method.isEmpty else {
                return .failure(RPCFailure(id: id, error: RPCError(code: RPCError.invalidRequest, message: "invalid request: method must be a non-empty string")))
            }
            let params = frame["params"]
            if let params, params.object == nil, params.array == nil {
                return .failure(RPCFailure(id: id, error: RPCError(code: RPCError.invalidRequest, message: "invalid request: params must be an object or an array")))
            }
            return .success(rawID == nil ? .notification(method: method, params: params) : .request(id: id, method: method, params: params))
        }
        if let result = frame["result"] { return .success(.response(id: id, result: result)) }
        if let errorValue = frame["error"], let error = RPCError(json: errorValue) {
            return .success(.errorResponse(id: id, error: error))
        }
        return .failure(RPCFailure(id: id, error: RPCError(code: RPCError.invalidRequest, message: "invalid request: no method")))
    }

    public static func request(id: JSON, method: String, params: JSON? = nil) -> [UInt8] {
        var frame: [String: JSON] = ["jsonrpc": "2.0", "id": id, "method": .string(method)]
        if let params { frame["params"] = params }
        return line(.object(frame))
    }

    public static func notification(method: String, params: JSON) -> [UInt8] {
        line(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }

    public static func response(id: JSON, result: JSON) -> [UInt8] {
        line(["jsonrpc": "2.0", "id": id, "result": result])
    }

    /// A response whose result `write` puts straight into the line (after reserving `capacity`
    /// bytes for it): the same bytes as `response(id:result:)` with the value it writes, keys
    /// sorted. A history page is megabytes; it is written once, where it is sent from.
    public static func response(id: JSON, capacity: Int, result write: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity + id.writtenSizeEstimate + 32)
        out.append(contentsOf: #"{"id":"#.utf8)
        id.write(into: &out)
        out.append(contentsOf: #","jsonrpc":"2.0","result":"#.utf8)
        write(&out)
        out.append(contentsOf: "}\n".utf8)
        return out
    }

    public static func response(id: JSON, error: RPCError) -> [UInt8] {
        line(["jsonrpc": "2.0", "id": id, "error": error.json])
    }

    /// What a streamed piece is: the answer's text (`message.delta`) or the model's thought
    /// (`message.reasoning`).
    public enum StreamedPiece: Sendable {
        case text, thought
    }

    /// `message.delta`: `writePiece(.text, …)`.
    public static func writeDelta(conversation: String, message: String, content: String, into out: inout [UInt8]) {
        writePiece(.text, conversation: conversation, message: message, content: content, into: &out)
    }

    /// A streamed piece's notification, the one frame sent per piece, written straight into
    /// `out` without building its params: the same bytes as `notification(method:
    /// "message.delta" or "message.reasoning", params: ["content": …, "conversation": …,
    /// "message": …])`, keys sorted, ending in LF.
    public static func writePiece(_ piece: StreamedPiece, conversation: String, message: String, content: String, into out: inout [UInt8]) {
        let needed = out.count + 96 + conversation.utf8.count + message.utf8.count + content.utf8.count
        // Grown as appending grows it: an exact reserve reallocates on every call.
        if out.capacity < needed { out.reserveCapacity(max(needed, 2 * out.capacity)) }
        out.append(contentsOf: #"{"jsonrpc":"2.0","method":"#.utf8)
        out.append(contentsOf: piece == .text ? #""message.delta""#.utf8 : #""message.reasoning""#.utf8)
        out.append(contentsOf: #","params":{"content":"#.utf8)
        JSON.writeString(content, into: &out)
        out.append(contentsOf: #","conversation":"#.utf8)
        JSON.writeString(conversation, into: &out)
        out.append(contentsOf: #","message":"#.utf8)
        JSON.writeString(message, into: &out)
        out.append(contentsOf: "}}\n".utf8)
    }

    public static func deltaNotification(conversation: String, message: String, content: String) -> [UInt8] {
        var out: [UInt8] = []
        writeDelta(conversation: conversation, message: message, content: content, into: &out)
        return out
    }

    static func line(_ json: JSON) -> [UInt8] {
        var out: [UInt8] = []
        // Sized once: a history page is a line of megabytes, and growing to it by doubling
        // copied it over and over into fresh pages.
        out.reserveCapacity(json.writtenSizeEstimate + 16)
        json.write(into: &out)
        out.append(0x0A)
        return out
    }
}

/// A request's params, checked to be an object (or none). Outside this module they are read
/// only through a method's typed params (`RPCObject`, Calls.swift), whose fields are read by
/// the checks below: the -32602 errors that name the field.
public struct Params: Sendable {
    let members: [String: JSON]

    public init(_ params: JSON?) throws(RPCError) {
        switch params {
        case nil, .null?: members = [:]
        case .object(let members)?: self.members = members
        default: throw .invalidParams("params must be an object of named parameters")
        }
    }

    init(members: [String: JSON]) { self.members = members }

    func string(_ key: String) throws(RPCError) -> String {
        guard let value = members[key] else { throw .invalidParams("missing parameter \"\(key)\"") }
        guard let string = value.string else { throw .invalidParams("parameter \"\(key)\" must be a string, got \(value.typeName)") }
        return string
    }

    func optionalString(_ key: String) throws(RPCError) -> String? {
        guard let value = members[key], !value.isNull else { return nil }
        guard let string = value.string else { throw .invalidParams("parameter \"\(key)\" must be a string, got \(value.typeName)") }
        return string
    }

    func optionalBool(_ key: String) throws(RPCError) -> Bool? {
        guard let value = members[key], !value.isNull else { return nil }
        guard case .bool(let bool) = value else { throw .invalidParams("parameter \"\(key)\" must be true or false, got \(value.typeName)") }
        return bool
    }

    func optionalInt(_ key: String, in range: ClosedRange<Int>) throws(RPCError) -> Int? {
        guard let value = members[key], !value.isNull else { return nil }
        guard let int = value.int else { throw .invalidParams("parameter \"\(key)\" must be an integer, got \(value.typeName)") }
        guard range.contains(int) else {
            throw .invalidParams("parameter \"\(key)\" must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return int
    }
}
