/// A message read from and written to bytes without a tree of its whole object. A history
/// page is a thousand messages: building each record's dictionary to read it, and each
/// message's dictionary to write it, was most of what confabd spent on a page. Both ways give
/// exactly what the tree would: the reading goes through the same `Message(fields:)`, and the
/// writing is checked against `json` (`MessageBytesTests`, and every history page confabd
/// answers in a debug build).

/// A member of a message object, in the order of its name: the order `JSON.write` sorts
/// members into, which `Message.write(into:)` follows.
public enum MessageKey: Int, CaseIterable, Sendable {
    case approval, attachments, author, content, context, conversation, created, decidedBy, durationMilliseconds, error
    case finishReason, httpStatus, id, model, name, params, quickReplies, reasoning, requestedBy, role, status
    case supersededBy, toolCallID, toolCalls, truncated, usage

    public var staticName: StaticString {
        switch self {
        case .approval: "approval"
        case .attachments: "attachments"
        case .author: "author"
        case .content: "content"
        case .context: "context"
        case .conversation: "conversation"
        case .created: "created"
        case .decidedBy: "decided_by"
        case .durationMilliseconds: "duration_ms"
        case .error: "error"
        case .finishReason: "finish_reason"
        case .httpStatus: "http_status"
        case .id: "id"
        case .model: "model"
        case .name: "name"
        case .params: "params"
        case .quickReplies: "quick_replies"
        case .reasoning: "reasoning"
        case .requestedBy: "requested_by"
        case .role: "role"
        case .status: "status"
        case .supersededBy: "superseded_by"
        case .toolCallID: "tool_call_id"
        case .toolCalls: "tool_calls"
        case .truncated: "truncated"
        case .usage: "usage"
        }
    }

    private static let names = allCases.map { $0.staticName.description }

    public var name: String { Self.names[rawValue] }

    /// The keys by the length of their names: a scanned name is compared with those of its length only.
    private static let byLength: [[MessageKey]] = {
        var table = [[MessageKey]](repeating: [], count: 16)
        for key in allCases { table[key.staticName.utf8CodeUnitCount].append(key) }
        return table
    }()

    /// The key a scanned member's name is, if it is one of these.
    static func of(_ key: JSONKey) -> MessageKey? {
        guard !key.token.hasEscapes else {
            for candidate in allCases where key == candidate.staticName { return candidate }
            return nil
        }
        let length = key.token.end - key.token.start
        guard length < byLength.count else { return nil }
        for candidate in byLength[length] where key == candidate.staticName { return candidate }
        return nil
    }
}

/// Where `Message(fields:)` reads a message's members from.
protocol MessageFieldSource {
    subscript(_ key: MessageKey) -> JSON? { get }
}

extension JSON: MessageFieldSource {
    subscript(_ key: MessageKey) -> JSON? { self[key.name] }
}

/// The members of a message object as the scanner met them: each known one's value (the first
/// where a key is repeated, as a tree keeps it); the others checked and skipped, as `Message`
/// reads none of them.
struct MessageMembers: MessageFieldSource {
    private var values = [JSON?](repeating: nil, count: MessageKey.allCases.count)

    subscript(_ key: MessageKey) -> JSON? { values[key.rawValue] }

    init(_ scanner: inout JSONScanner) throws(JSONParseError) {
        try scanner.members { (key, scanner) throws(JSONParseError) in
            guard let known = MessageKey.of(key), values[known.rawValue] == nil else { return }
            values[known.rawValue] = try scanner.readValue()
        }
    }
}

extension Message {
    /// The message object the scanner is on, read as `Message(json:)` reads its tree; nil where
    /// that would be nil. Throws where the text is not JSON.
    public init?(scanning scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .object else {
            try scanner.skipValue()
            return nil
        }
        self.init(fields: try MessageMembers(&scanner))
    }

    /// Exactly the bytes `json.write(into:)` writes, without building `json`'s dictionary.
    public func write(into out: inout [UInt8]) {
        var first = true
        func key(_ key: MessageKey) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            let name = key.staticName
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: "\":".utf8)
        }
        func string(_ name: MessageKey, _ value: String?) {
            guard let value else { return }
            key(name)
            JSON.writeString(value, into: &out)
        }
        func value(_ name: MessageKey, _ value: JSON?) {
            guard let value else { return }
            key(name)
            value.write(into: &out)
        }
        let otherAttachments = otherAttachments ?? []
        value(.approval, tool?.approval.map { .string($0.rawValue) })
        if !(attachments ?? []).isEmpty || !otherAttachments.isEmpty {
            value(.attachments, .array((attachments ?? []).map(\.json) + otherAttachments))
        }
        value(.author, author?.json)
        string(.content, content)
        value(.context, context?.json)
        string(.conversation, conversation)
        string(.created, created.description)
        value(.decidedBy, tool?.decidedBy?.json)
        value(.durationMilliseconds, tool?.durationMilliseconds.map(JSON.int))
        value(.error, error?.json)
        string(.finishReason, finishReason)
        value(.httpStatus, tool?.httpStatus.map(JSON.int))
        string(.id, id)
        string(.model, model)
        string(.name, tool?.name)
        if let params, !params.isEmpty { value(.params, params.json) }
        value(.quickReplies, quickReplies.map { .array($0.map(JSON.string)) })
        value(.reasoning, reasoning?.json)
        value(.requestedBy, tool?.requestedBy?.json)
        string(.role, role.rawValue)
        string(.status, status.rawValue)
        string(.supersededBy, supersededBy)
        string(.toolCallID, tool?.callID)
        if let toolCalls, !toolCalls.isEmpty { value(.toolCalls, .array(toolCalls.map(\.json))) }
        if tool?.truncated == true { value(.truncated, .bool(true)) }
        value(.usage, usage?.json)
        out.append(UInt8(ascii: "}"))
    }
}

extension HistoryResult {
    /// Exactly the bytes `json.write(into:)` writes: the messages by `Message.write(into:)`.
    public func write(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        if let compaction {
            out.append(contentsOf: #""compaction":"#.utf8)
            compaction.json.write(into: &out)
            out.append(UInt8(ascii: ","))
        }
        out.append(contentsOf: #""messages":["#.utf8)
        for (index, message) in messages.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            message.write(into: &out)
        }
        out.append(contentsOf: (more ? #"],"more":true}"# : #"],"more":false}"#).utf8)
    }

    /// About how many bytes `write(into:)` writes, for sizing a buffer once: a page is
    /// megabytes, and growing to it by doubling copies it over and over into fresh pages.
    public var writtenSizeEstimate: Int {
        messages.reduce(64) { $0 + $1.content.utf8.count + ($1.reasoning?.text.utf8.count ?? 0) + 400 }
    }
}
