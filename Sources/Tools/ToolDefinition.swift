import ConfabProtocol

public enum ToolHTTPMethod: String, Sendable, CaseIterable {
    case GET, POST, PUT, PATCH, DELETE

    /// Whether the arguments the URL does not take go in the query string (else in a JSON body).
    public var sendsArgumentsInQuery: Bool { self == .GET || self == .DELETE }
}

/// One header a tool's requests carry. A secret one (its value from the environment or a
/// file, or written inline under a credential's name) never shows its value when printed.
public struct ToolHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    /// The value came from `header_env` or `header_file`, or the name is a credential's.
    public var isSecret: Bool

    public init(name: String, value: String, isSecret: Bool = false) {
        self.name = name
        self.value = value
        self.isSecret = isSecret
    }

    /// The request's header line, value included: for the transport only.
    public var line: String { "\(name): \(value)" }

    /// Whether a header of this name carries a credential (`Authorization`, `Cookie`,
    /// `X-Api-Key`, `X-Auth-Token`, …): its value is a secret even when written inline in the config.
    public static func namesCredential(_ name: String) -> Bool {
        let lower = name.lowercased()
        return ["authorization", "cookie"].contains(lower)
            || ["key", "token", "secret", "password", "auth"].contains { lower.contains($0) }
    }
}

extension ToolHeader: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `Authorization: (secret)` for a secret header: safe to log and to show in a test failure.
    public var description: String { isSecret ? "\(name): (secret)" : line }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "value": isSecret ? "(secret)" : value, "isSecret": isSecret])
    }
}

/// Why the model's arguments cannot be used; the message is for the model and the user.
public struct ToolArgumentError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// The HTTP request one tool call makes.
public struct ToolHTTPRequest: Sendable, Equatable {
    public var method: ToolHTTPMethod
    public var url: String
    /// "Name: value" lines, secret values included.
    public var headers: [String]
    /// nil for GET and DELETE.
    public var body: [UInt8]?

    public init(method: ToolHTTPMethod, url: String, headers: [String] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

extension ToolHTTPRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The method, URL and header names, never header values (some are secrets).
    public var description: String {
        let names = headers.map { String($0.prefix { $0 != ":" }) }
        var text = "\(method.rawValue) \(url)"
        if !names.isEmpty { text += " (headers: \(names.joined(separator: ", ")))" }
        if let body { text += " (body: \(body.count) bytes)" }
        return text
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["request": description]) }
}

/// A `[tools.NAME]` of the config: what the model is told about a tool, and the HTTP request
/// a call becomes.
public struct ToolDefinition: Sendable, Equatable {
    public static let defaultTimeoutSeconds = 10
    public static let defaultMaxResponseBytes = 65536
    /// Parameters for a tool that takes none.
    public static let noParameters: JSON = ["type": "object", "properties": [:]]

    /// ^[A-Za-z0-9_-]{1,64}$, as the APIs that call functions require.
    public var name: String
    public var description: String
    /// A JSON Schema object (type "object"), within what `ToolSchema` supports.
    public var parameters: JSON
    public var method: ToolHTTPMethod
    /// http or https, with `{param}` placeholders.
    public var url: String
    public var headers: [ToolHeader]
    public var timeoutSeconds: Int
    public var maxResponseBytes: Int
    public var approval: ToolApproval

    public init(name: String, description: String, parameters: JSON = ToolDefinition.noParameters,
                method: ToolHTTPMethod = .GET, url: String, headers: [ToolHeader] = [],
                timeoutSeconds: Int = ToolDefinition.defaultTimeoutSeconds,
                maxResponseBytes: Int = ToolDefinition.defaultMaxResponseBytes, approval: ToolApproval = .never) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.method = method
        self.url = url
        self.headers = headers
        self.timeoutSeconds = timeoutSeconds
        self.maxResponseBytes = maxResponseBytes
        self.approval = approval
    }

    /// Whether `name` can name a tool: 1 to 64 ASCII letters, digits, `_` or `-`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// The function declaration the model sees: `{"name":…,"description":…,"parameters":…}`.
    public var declaration: JSON {
        ["name": .string(name), "description": .string(description), "parameters": parameters]
    }

    /// The model's arguments text as a JSON object: empty or all white space means `{}`; any
    /// other text must be a JSON object. The same for every kind of tool.
    public static func parse(arguments: String) -> Result<JSON, ToolArgumentError> {
        let value: JSON
        if arguments.unicodeScalars.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }) {
            value = .object([:])
        } else {
            do {
                value = try JSON.parse(arguments)
            } catch {
                return .failure(ToolArgumentError(message: "arguments are not JSON: \(error.reason) at byte \(error.offset)"))
            }
        }
        guard value.object != nil else { return .failure(ToolArgumentError(message: "arguments must be a JSON object")) }
        return .success(value)
    }

    /// Parses the model's arguments text (JSON; empty or all white space means `{}`) and checks
    /// it against `parameters`.
    public func validate(arguments: String) -> Result<JSON, ToolArgumentError> {
        let value: JSON
        switch Self.parse(arguments: arguments) {
        case .success(let parsed): value = parsed
        case .failure(let error): return .failure(error)
        }
        if let problem = ToolSchema.validate(value, against: parameters) {
            return .failure(ToolArgumentError(message: problem))
        }
        let given = value.object ?? [:]
        for name in ToolURLTemplate.pathPlaceholders(in: url).sorted() {
            if let problem = ToolURLTemplate.pathValueProblem(given[name] ?? .null) {
                return .failure(ToolArgumentError(message: "\(JSON.string(name).text) \(problem)"))
            }
        }
        return .success(value)
    }

    /// The HTTP request for validated arguments: the URL's placeholders filled (percent-encoded),
    /// the other arguments in the query string (GET, DELETE; null ones left out) or a JSON body
    /// (POST, PUT, PATCH, with `Content-Type: application/json` unless a configured header sets
    /// it), and the configured headers.
    public func httpRequest(arguments: JSON) -> ToolHTTPRequest {
        let given = arguments.object ?? [:]
        var rest = given
        var url = ""
        for part in ToolURLTemplate.parts(of: self.url) {
            switch part {
            case .text(let text):
                url += text
            case .placeholder(let name):
                url += ToolURLTemplate.percentEncoded(ToolURLTemplate.text(of: given[name] ?? .null))
                rest[name] = nil
            }
        }
        var headers = self.headers.map(\.line)
        var body: [UInt8]?
        if method.sendsArgumentsInQuery {
            let pairs = rest.keys.sorted().compactMap { key -> String? in
                guard let value = rest[key], !value.isNull else { return nil }
                return ToolURLTemplate.percentEncoded(key) + "=" + ToolURLTemplate.percentEncoded(ToolURLTemplate.text(of: value))
            }
            url = ToolURLTemplate.appendingQuery(pairs.joined(separator: "&"), to: url)
        } else {
            body = JSON.object(rest).bytes
            if !self.headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                headers.append("Content-Type: application/json")
            }
        }
        return ToolHTTPRequest(method: method, url: url, headers: headers, body: body)
    }
}

// `description` is the tool's own text, so printing falls back to these, which never show a
// secret header's value.
extension ToolDefinition: CustomDebugStringConvertible, CustomReflectable {
    public var debugDescription: String {
        "ToolDefinition(name: \(name), method: \(method.rawValue), url: \(url), headers: \(headers), "
            + "timeoutSeconds: \(timeoutSeconds), maxResponseBytes: \(maxResponseBytes), approval: \(approval), parameters: \(parameters.text))"
    }
    public var customMirror: Mirror {
        Mirror(self, children: [
            "name": name, "description": description, "parameters": parameters.text, "method": method, "url": url,
            "headers": headers, "timeoutSeconds": timeoutSeconds, "maxResponseBytes": maxResponseBytes, "approval": approval,
        ])
    }
}

extension ToolDefinition {
    /// `text` with every secret header value of this tool, in every encoding `SecretRedactor`
    /// knows, replaced by `[secret]`: a tool that echoes its request back must not put a key
    /// into the transcript, the log or a terminal.
    public func redactingSecrets(_ text: String) -> String {
        SecretRedactor(secrets: headers.filter(\.isSecret).map(\.value)).redacting(text)
    }
}
