// The OpenAI-compatible chat-completions protocol as seen by the broker:
//  - `ChatStreamDecoder` turns SSE events of a streamed response into content / finish / usage /
//    error / done events, tolerating the many small variations of real servers;
//  - `ChatRequest.jsonBody()` builds the streaming request body;
//  - `upstreamErrorMessage(status:body:)` extracts a readable message from a non-2xx response.

import ConfabProtocol

// MARK: - Public types

/// Token accounting as the upstream reports it: the protocol's own `Usage`.
public typealias TokenUsage = Usage

/// An error reported by the upstream, in-stream or as a non-2xx response body.
public struct UpstreamErrorInfo: Equatable, Sendable {
    /// Human-readable message; never empty.
    public var message: String
    public var type: String?
    /// The `code` field, stringified when the server sent a number.
    public var code: String?

    public init(message: String, type: String? = nil, code: String? = nil) {
        self.message = message
        self.type = type
        self.code = code
    }
}

public enum ChatStreamEvent: Equatable, Sendable {
    /// Text of `choices[0].delta.content` (or `delta.refusal`); never empty.
    case content(String)
    /// `choices[0].finish_reason` when non-null.
    case finish(reason: String)
    /// The top-level `usage` object, whether `choices` is empty or not.
    case usage(TokenUsage)
    /// A payload with an `error` key, or an SSE event named `error`.
    case error(UpstreamErrorInfo)
    /// The `[DONE]` sentinel.
    case done
    /// A piece of a tool call (`choices[0].delta.tool_calls[]`, Anthropic's `tool_use` blocks):
    /// `ToolCallAssembler` puts the pieces of a reply together.
    case toolCall(ToolCallPiece)
}

/// What one chunk says of one tool call. Servers differ: OpenAI sends the id and name once and
/// then pieces of `arguments` by `index`; llama.cpp repeats the id and name in every chunk; some
/// send several calls' first pieces in one chunk, or leave out `index`.
public struct ToolCallPiece: Equatable, Sendable {
    public var index: Int?
    public var id: String?
    public var name: String?
    public var arguments: String

    public init(index: Int?, id: String?, name: String?, arguments: String) {
        self.index = index
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// The tool calls of one reply, from their pieces in arrival order: by `index` when the server
/// gives one, else by `id`, else the piece goes on the call before it. The first non-empty id and
/// name of a call stand (a repeated one is the same); `arguments` pieces are joined.
public struct ToolCallAssembler: Sendable {
    private struct Call: Sendable {
        var index: Int?
        var id = ""
        var name = ""
        var arguments = ""
    }
    private var pending: [Call] = []

    public init() {}

    public var isEmpty: Bool { pending.isEmpty }

    public mutating func add(_ piece: ToolCallPiece) {
        let position: Int
        if let index = piece.index {
            position = pending.firstIndex { $0.index == index } ?? append(Call(index: index))
        } else if let id = piece.id, !id.isEmpty {
            position = pending.lastIndex { $0.id == id } ?? append(Call())
        } else {
            position = pending.isEmpty ? append(Call()) : pending.count - 1
        }
        if let id = piece.id, !id.isEmpty, pending[position].id.isEmpty { pending[position].id = id }
        if let name = piece.name, !name.isEmpty, pending[position].name.isEmpty { pending[position].name = name }
        pending[position].arguments += piece.arguments
    }

    private mutating func append(_ call: Call) -> Int {
        pending.append(call)
        return pending.count - 1
    }

    /// The calls in the order they began, each with an id no other call of the reply has: a
    /// call whose server gave no id gets `call_<position>`, and one whose id an earlier call
    /// already has (two calls at index 0 and 1 with one id) gets `<id>_<position>` (or the first
    /// free `<id>_<position>_<n>`). Each call is then shown, approved and answered by itself:
    /// an approval by id can never reach a call nobody was shown.
    public var calls: [ToolCall] {
        var taken: Set<String> = []
        return pending.enumerated().map { position, call in
            var id = call.id.isEmpty ? "call_\(position)" : call.id
            if taken.contains(id) {
                let base = "\(id)_\(position)"
                id = base
                var attempt = 2
                while taken.contains(id) {
                    id = "\(base)_\(attempt)"
                    attempt += 1
                }
            }
            taken.insert(id)
            return ToolCall(id: id, name: call.name, arguments: call.arguments)
        }
    }
}

public enum ChatStreamError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The data of a `message` event was neither `[DONE]` nor a JSON object. Carries an excerpt
    /// of at most 200 characters.
    case malformedChunk(String)

    public var description: String {
        switch self {
        case .malformedChunk(let excerpt): "an event that is neither JSON nor [DONE]: \(excerpt)"
        }
    }
}

// MARK: - Stream decoder

/// Reads one reply's Server-Sent Events in one wire format.
public protocol ChatEventDecoder {
    /// One SSE event in, zero or more stream events appended to `events`, in order. (Appended to
    /// the caller's array, reused from chunk to chunk: one is decoded per streamed token.)
    mutating func decode(_ event: SSEEventView, into events: inout [ChatStreamEvent]) throws
    /// The whole reply given in one JSON body instead of a stream: the same events, appended
    /// to `events`; none when the body is not a reply of this format.
    mutating func decodeWhole(_ body: [UInt8], into events: inout [ChatStreamEvent]) throws
}

extension ChatEventDecoder {
    /// One event's stream events on their own (tests, and events not from the parser).
    public mutating func decode(_ event: SSEEvent) throws -> [ChatStreamEvent] {
        var events: [ChatStreamEvent] = []
        try event.withView { try decode($0, into: &events) }
        return events
    }

    /// OpenAI's whole answers (`chat.completion` with `choices[0].message`, `text_completion`
    /// with `choices[0].text`) read as one chunk does.
    public mutating func decodeWhole(_ body: [UInt8], into events: inout [ChatStreamEvent]) throws {
        try body.withUnsafeBytes { bytes in
            try decode(SSEEventView(type: "message", data: bytes, id: nil), into: &events)
        }
    }
}

/// OpenAI's chunks (and, with `textField: .text`, the legacy completions API's).
public struct ChatStreamDecoder: ChatEventDecoder, Sendable {
    /// Where a chunk's text is: `choices[0].delta.content` in chat completions, `choices[0].text`
    /// in the legacy completions API, whose chunks are otherwise the same (usage, errors, `[DONE]`).
    enum TextField: Sendable { case delta, text }
    let textField: TextField

    public init() { textField = .delta }

    init(textField: TextField) { self.textField = textField }

    /// One SSE event in, zero or more stream events out, in order
    /// (content before finish before usage, then error, within one chunk).
    ///
    /// - Events of type `message` must carry `[DONE]`, a JSON object, or nothing but whitespace
    ///   (ignored); anything else throws `ChatStreamError.malformedChunk`.
    /// - Events of type `error` always produce an `.error`, from the JSON error object when there is
    ///   one, else from the raw text.
    /// - Events of any other type (`ping`, ...) are decoded like chunks when they carry a JSON
    ///   object and ignored otherwise.
    public mutating func decode(_ event: SSEEventView, into out: inout [ChatStreamEvent]) throws {
        // The usual event, a JSON object, is read from its bytes as they are: the scanner skips
        // JSON's own white space, so the payload is made text and trimmed (by Unicode's rules)
        // only for the rest.
        let isError = event.type == "error"
        var chunk = Envelope()
        if event.data.first(where: { !isJSONWhiteSpace($0) }) == UInt8(ascii: "{"), chunk.read(event.data) {
            // read in place
        } else {
            let text = event.dataText
            let payload = trimmedSlice(text)
            if payload == "[DONE]" && !isError {
                out.append(.done)
                return
            }
            if payload.isEmpty {
                if isError { out.append(.error(UpstreamErrorInfo(message: "upstream reported an error"))) }
                return
            }
            guard let envelope = Envelope(String(payload)) else {
                if isError {
                    out.append(.error(UpstreamErrorInfo(message: capped(payload, to: 1000))))
                    return
                }
                if event.type == "message" { throw ChatStreamError.malformedChunk(capped(payload, to: 200)) }
                return
            }
            chunk = envelope
        }

        if chunk.hasChoice {
            switch textField {
            case .delta:
                if chunk.choice.hasDelta {
                    Self.append(chunk.choice.delta, to: &out)
                } else if chunk.choice.hasMessage {
                    Self.append(chunk.choice.message, to: &out)
                }
            case .text:
                if let text = chunk.choice.text, !text.isEmpty { out.append(.content(text)) }
            }
            if let reason = chunk.choice.finishReason, !reason.isEmpty { out.append(.finish(reason: reason)) }
        }
        if let usage = chunk.usage { out.append(.usage(usage)) }

        if let error = chunk.error {
            out.append(.error(error.info(fallback: chunk.message ?? "upstream reported an error")))
        } else if chunk.objectIsError || isError {
            // vLLM-style top-level error ({"object":"error","message":..,"type":..,"code":..}),
            // or an `error` event whose JSON has no `error` key.
            let message = nonBlank(chunk.message) ?? nonBlank(chunk.detail)
            if message != nil || isError {
                out.append(.error(UpstreamErrorInfo(
                    message: capped(message ?? String(trimmedSlice(event.dataText)), to: 1000),
                    type: chunk.type, code: chunk.code)))
            }
        }
    }
}

extension ChatStreamDecoder {
    fileprivate static func append(_ delta: Delta, to out: inout [ChatStreamEvent]) {
        if let text = delta.content, !text.isEmpty { out.append(.content(text)) }
        if let text = delta.refusal, !text.isEmpty { out.append(.content(text)) }
        for piece in delta.toolCalls { out.append(.toolCall(piece)) }
    }
}

// MARK: - Request body

public struct ChatMessage: Equatable, Sendable {
    public var role: Role
    public var content: String
    /// An assistant turn that asked for tools.
    public var toolCalls: [ToolCall]
    /// A `tool` turn: the call it answers, the tool's name, and whether it is an error
    /// (no answer: bad arguments, denied, timed out, …).
    public var toolCallID: String?
    public var toolName: String?
    public var isError: Bool

    public init(role: Role, content: String, toolCalls: [ToolCall] = [], toolCallID: String? = nil,
                toolName: String? = nil, isError: Bool = false) {
        self.role = role
        self.content = content
        self.toolCalls = toolCalls
        self.toolCallID = toolCallID
        self.toolName = toolName
        self.isError = isError
    }

    /// An assistant turn that asked for tools and said nothing.
    public var isTextlessToolCallTurn: Bool { role == .assistant && !toolCalls.isEmpty && content.isEmpty }

    /// The chat-completions turns, separated by commas: `{"role":..,"content":..}`; an assistant
    /// turn with `tool_calls` (its content, when empty, as `toolCallTurnContent` says); a tool
    /// turn with its `tool_call_id`.
    static func write(_ messages: [ChatMessage], toolCallTurnContent: ToolCallTurnContent = .empty, into out: inout [UInt8]) {
        for (index, message) in messages.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"role":"#.utf8)
            JSON.writeString(message.role.rawValue, into: &out)
            if let callID = message.toolCallID, message.role == .tool {
                out.append(contentsOf: #","tool_call_id":"#.utf8)
                JSON.writeString(callID, into: &out)
            }
            if !message.isTextlessToolCallTurn || toolCallTurnContent == .empty {
                out.append(contentsOf: #","content":"#.utf8)
                JSON.writeString(message.content, into: &out)
            }
            if !message.toolCalls.isEmpty {
                out.append(contentsOf: #","tool_calls":["#.utf8)
                for (position, call) in message.toolCalls.enumerated() {
                    if position > 0 { out.append(UInt8(ascii: ",")) }
                    out.append(contentsOf: #"{"id":"#.utf8)
                    JSON.writeString(call.id, into: &out)
                    out.append(contentsOf: #","type":"function","function":{"name":"#.utf8)
                    JSON.writeString(call.name, into: &out)
                    out.append(contentsOf: #","arguments":"#.utf8)
                    JSON.writeString(call.arguments, into: &out)
                    out.append(contentsOf: "}}".utf8)
                }
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}

/// How a chat-completions body carries the `content` of an assistant turn that asked for tools
/// and said nothing. OpenAI writes such a turn with `"content": null`, but servers that check
/// requests against their own schema refuse that (llama-cpp-python answers 500: "Input should
/// be a valid string"; llama.cpp's server has too), and some refuse a turn with no `content`
/// (llama.cpp's and llama-cpp-python's older versions, some vLLM setups). An empty string is the
/// one form all of them take; the other is kept for a server that refuses it, tried once when
/// one does (see `ReplyRunner`).
public enum ToolCallTurnContent: Sendable, Equatable, CustomStringConvertible {
    /// `"content":""`.
    case empty
    /// No `content` key.
    case omitted

    public var other: ToolCallTurnContent { self == .empty ? .omitted : .empty }

    /// As an error message names it.
    public var description: String {
        switch self {
        case .empty: #"with "content":"""#
        case .omitted: #"without "content""#
        }
    }
}

/// A tool as the model is told of it: its name, what it does, and its parameters' JSON Schema.
public struct ToolDeclaration: Equatable, Sendable {
    public var name: String
    public var description: String
    public var parameters: JSON

    public init(name: String, description: String, parameters: JSON) {
        self.name = name
        self.description = description
        self.parameters = parameters
    }
}

public struct ChatRequest: Equatable, Sendable {
    public var model: String
    public var messages: [ChatMessage]
    /// Only those set are sent, each in its API's own name.
    public var params: SamplingParameters
    public var temperature: Double? {
        get { params.temperature }
        set { params.temperature = newValue }
    }
    /// Sent as `max_tokens`.
    public var maxTokens: Int? {
        get { params.maxTokens }
        set { params.maxTokens = newValue }
    }
    /// The text of a reply that stopped for length and is to be continued (`message.continue`).
    /// Chat completions have no way to extend a final assistant turn, so the chat body sends it
    /// as an assistant turn followed by `continuationInstruction` as a user turn; what streams
    /// back is appended to the same reply.
    public var continuing: String?
    /// The tools the model may ask for; none is sent when empty.
    public var tools: [ToolDeclaration] = []
    /// How an assistant turn that asked for tools and said nothing carries its `content`
    /// (chat completions; the other APIs have one form).
    public var toolCallTurnContent: ToolCallTurnContent = .empty

    public static let continuationInstruction =
        "Continue your last answer exactly where it stopped, without repeating anything and without any preamble."

    public init(model: String, messages: [ChatMessage], temperature: Double? = nil, maxTokens: Int? = nil, continuing: String? = nil) {
        self.model = model
        self.messages = messages
        self.params = SamplingParameters(temperature: temperature, maxTokens: maxTokens)
        self.continuing = continuing
    }

    /// Whether the turns sent hold an assistant turn that asked for tools and said nothing: the
    /// one part of a body whose shape servers disagree on (`toolCallTurnContent`).
    public var hasTextlessToolCallTurn: Bool { messages.contains { $0.isTextlessToolCallTurn } }

    /// The turns a chat-completions body carries: the context, and for a continuation the
    /// reply so far and the instruction to go on.
    public var chatMessages: [ChatMessage] {
        guard let continuing else { return messages }
        return messages + [ChatMessage(role: .assistant, content: continuing), ChatMessage(role: .user, content: Self.continuationInstruction)]
    }

    /// The JSON body for `POST {base}/chat/completions`:
    /// `{"model":..,"messages":[{"role":..,"content":..}],"stream":true,"stream_options":{"include_usage":true}}`
    /// plus each sampling parameter set (a non-finite number is omitted).
    /// Compact, UTF-8.
    public func jsonBody() -> [UInt8] {
        var out: [UInt8] = []
        let messages = chatMessages
        out.reserveCapacity(128 + model.utf8.count + messages.reduce(0) { $0 + $1.content.utf8.count + 32 })
        out.append(contentsOf: #"{"model":"#.utf8)
        JSON.writeString(model, into: &out)
        out.append(contentsOf: #","messages":["#.utf8)
        ChatMessage.write(messages, toolCallTurnContent: toolCallTurnContent, into: &out)
        out.append(contentsOf: #"],"stream":true,"stream_options":{"include_usage":true}"#.utf8)
        if !tools.isEmpty {
            out.append(contentsOf: #","tools":["#.utf8)
            for (position, tool) in tools.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: #"{"type":"function","function":"#.utf8)
                JSON.object(["name": .string(tool.name), "description": .string(tool.description), "parameters": tool.parameters])
                    .write(into: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        }
        writeSamplingParameters(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}

extension ChatRequest {
    /// OpenAI's names for the parameters set (`temperature`, `top_p`, `max_tokens`,
    /// `presence_penalty`, `frequency_penalty`, `stop`, `seed`), each with its comma; a
    /// non-finite number is left out, as JSON cannot hold it.
    func writeSamplingParameters(into out: inout [UInt8], stop includesStop: Bool = true) {
        func number(_ name: String, _ value: Double?) {
            guard let value, value.isFinite else { return }
            out.append(contentsOf: ",\"\(name)\":".utf8)
            out.append(contentsOf: value.description.utf8)
        }
        func integer(_ name: String, _ value: Int?) {
            guard let value else { return }
            out.append(contentsOf: ",\"\(name)\":".utf8)
            out.append(contentsOf: String(value).utf8)
        }
        number("temperature", params.temperature)
        number("top_p", params.topP)
        integer("max_tokens", params.maxTokens)
        number("presence_penalty", params.presencePenalty)
        number("frequency_penalty", params.frequencyPenalty)
        if includesStop, let stop = params.stop {
            out.append(contentsOf: #","stop":"#.utf8)
            JSON.array(stop.map(JSON.string)).write(into: &out)
        }
        integer("seed", params.seed)
    }
}

// MARK: - Error bodies

/// Best human-readable message from a non-2xx response body:
/// OpenAI style `{"error":{"message":..,"type":..,"code":..}}`, `{"error":"text"}`, `{"message":..}`,
/// `{"detail":..}` (string, FastAPI list of `{"msg":..}`, or object with `message`/`msg`);
/// otherwise the body text, trimmed and cut to 300 characters; an empty body gives "HTTP <status>".
/// Messages from JSON are cut to 1000 characters. The message is never empty.
public func upstreamErrorMessage(status: Int, body: [UInt8]) -> UpstreamErrorInfo {
    let text = trimmedSlice(String(decoding: body, as: UTF8.self))
    var type: String?
    var code: String?
    if let envelope = Envelope(String(text)) {
        if let error = envelope.error {
            type = error.type
            code = error.code
            if let message = nonBlank(error.message) {
                return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
            }
        }
        type = type ?? envelope.type
        code = code ?? envelope.code
        if let message = nonBlank(envelope.message) ?? nonBlank(envelope.detail) {
            return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
        }
    }
    if text.isEmpty {
        return UpstreamErrorInfo(message: "HTTP \(status)", type: type, code: code)
    }
    return UpstreamErrorInfo(message: capped(text, to: 300), type: type, code: code)
}

// MARK: - Lenient JSON shapes (every field optional, wrong types read as absent)

/// The union of the keys we look at in stream chunks and error bodies. Read in one pass over
/// the bytes: only `choices[0]`'s text is built on the hot path; every other key of a chunk
/// (`id`, `model`, `logprobs`, `tool_calls`, …) is checked and skipped. Duplicate keys: the
/// first one counts.
private struct Envelope {
    /// `choices[0]`, when `hasChoice`.
    var choice = Choice()
    var hasChoice = false
    var usage: TokenUsage?
    var error: ErrorPayload?
    var objectIsError = false
    var message: String?
    var detail: String?
    var type: String?
    var code: String?

    /// Nil unless the text is one JSON object.
    init?(_ text: String) {
        var text = text
        guard text.withUTF8({ read(UnsafeRawBufferPointer($0)) }) else { return nil }
    }

    init() {}

    /// Reads the bytes into this (empty) envelope; false unless they are one JSON object. Read
    /// in place, nested parts included, so that nothing is copied: this runs once per streamed
    /// token. (Over bytes, so that nothing here is generic at run time.)
    mutating func read(_ bytes: UnsafeRawBufferPointer) -> Bool {
        do throws(JSONParseError) {
            return try JSONScanner.read(bytes.assumingMemoryBound(to: UInt8.self)) { (scanner) throws(JSONParseError) -> Bool in
                guard try scanner.kind() == .object else {
                    try scanner.skipValue()
                    return false
                }
                try read(&scanner)
                return true
            }
        } catch {
            return false
        }
    }

    private mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        var seen = Seen()
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "choices" {
                guard seen.first(.choices) else { return }
                try readPrimaryChoice(&scanner)
            } else if key == "usage" {
                guard seen.first(.usage) else { return }
                usage = try scanner.readValue().usage
            } else if key == "error" {
                guard seen.first(.error) else { return }
                error = ErrorPayload(try scanner.readValue())
            } else if key == "object" {
                guard seen.first(.object) else { return }
                objectIsError = try scanner.readString(equalTo: "error")
            } else if key == "message" {
                guard seen.first(.message) else { return }
                message = try scanner.readString()
            } else if key == "detail" {
                guard seen.first(.detail) else { return }
                detail = detailText(try scanner.readValue())
            } else if key == "type" {
                guard seen.first(.type) else { return }
                type = try scanner.readString()
            } else if key == "code" {
                guard seen.first(.code) else { return }
                code = try scanner.readValue().flexibleString
            }
        }
    }

    /// `choices[0]`: the first choice whose `index` is 0 or absent (or not an integer). None
    /// when `choices` is not an array or has no such choice; an element that is not an object is
    /// an empty choice.
    private mutating func readPrimaryChoice(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .array else { return }
        try scanner.elements { (_, scanner) throws(JSONParseError) in
            guard !hasChoice else { return }
            choice = Choice()
            try choice.read(&scanner)
            hasChoice = choice.index == nil || choice.index == 0
        }
        if !hasChoice { choice = Choice() }
    }

    private struct Seen {
        enum Key: Int { case choices, usage, error, object, message, detail, type, code }
        var keys: UInt8 = 0
        /// True the first time `key` is met.
        mutating func first(_ key: Key) -> Bool {
            defer { keys |= 1 << key.rawValue }
            return keys & 1 << key.rawValue == 0
        }
    }
}

private struct Choice {
    var index: Int?
    /// `delta` when `hasDelta`, `message` when `hasMessage` (a server that sends whole messages).
    var delta = Delta()
    var hasDelta = false
    var message = Delta()
    var hasMessage = false
    var finishReason: String?
    /// The legacy completions API's text.
    var text: String?

    mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .object else { return }
        var seenIndex = false, seenFinish = false, seenText = false
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "text" {
                guard !seenText else { return }
                seenText = true
                text = try scanner.readString()
            } else if key == "index" {
                guard !seenIndex else { return }
                seenIndex = true
                index = try scanner.readInt()
            } else if key == "delta" {
                guard !hasDelta, try !scanner.readNull() else { return }
                hasDelta = true
                try delta.read(&scanner)
            } else if key == "message" {
                guard !hasMessage, try !scanner.readNull() else { return }
                hasMessage = true
                try message.read(&scanner)
            } else if key == "finish_reason" {
                guard !seenFinish else { return }
                seenFinish = true
                finishReason = try scanner.readString()
            }
        }
    }
}

/// `delta` (or `message`): `content` may be a string or a list of `{"type":"text","text":..}` parts;
/// `tool_calls` pieces. `role`, `reasoning_content` and the rest are ignored.
private struct Delta {
    var content: String?
    var refusal: String?
    var toolCalls: [ToolCallPiece] = []

    mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .object else {
            try scanner.skipValue()
            return
        }
        var seenContent = false, seenRefusal = false
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "content" {
                guard !seenContent else { return }
                seenContent = true
                switch try scanner.kind() {
                case .string: content = try scanner.readString()
                case .array:
                    var text = ""
                    try scanner.elements { (_, scanner) throws(JSONParseError) in
                        if let part = try scanner.readValue()["text"]?.string { text += part }
                    }
                    content = text
                default: return
                }
            } else if key == "refusal" {
                guard !seenRefusal else { return }
                seenRefusal = true
                refusal = try scanner.readString()
            } else if key == "tool_calls" {
                guard toolCalls.isEmpty, case .array(let items) = try scanner.readValue() else { return }
                toolCalls = items.compactMap(Self.toolCallPiece)
            }
        }
    }

    /// `{"index":0,"id":..,"type":"function","function":{"name":..,"arguments":..}}`, any part
    /// missing; `arguments` given as an object (some servers) is taken as its JSON text.
    private static func toolCallPiece(_ item: JSON) -> ToolCallPiece? {
        guard item.object != nil else { return nil }
        let function = item["function"]
        let arguments: String = switch function?["arguments"] {
            case .string(let text)?: text
            case let value? where value.object != nil || value.array != nil: value.compactText
            default: ""
        }
        return ToolCallPiece(index: item["index"]?.int, id: item["id"]?.string, name: function?["name"]?.string, arguments: arguments)
    }
}

extension JSON {
    /// Compact JSON text.
    var compactText: String {
        var out: [UInt8] = []
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// The value of an `error` key: an object with `message`/`type`/`code`, or a bare string (or
/// number or boolean). Any other value still says there was an error, without a message.
private struct ErrorPayload {
    var message: String?
    var type: String?
    var code: String?

    init?(_ value: JSON) {
        switch value {
        case .null: return nil
        case .object:
            message = value["message"]?.string
            type = value["type"]?.string
            code = value["code"]?.flexibleString
        default:
            message = value.flexibleString
        }
    }

    func info(fallback: String) -> UpstreamErrorInfo {
        let text = nonBlank(message) ?? nonBlank(type) ?? nonBlank(code) ?? nonBlank(fallback) ?? "upstream reported an error"
        return UpstreamErrorInfo(message: capped(text, to: 1000), type: type, code: code)
    }
}

/// `detail`: a string (FastAPI HTTPException), a list of `{"msg":..}` (FastAPI validation), or an
/// object with `message`/`msg`.
private func detailText(_ value: JSON) -> String? {
    func itemText(_ item: JSON) -> String? {
        if item.object != nil { return item["msg"]?.string ?? item["message"]?.string }
        return item.string
    }
    switch value {
    case .string(let text): return text
    case .array(let items):
        let messages = items.compactMap { nonBlank(itemText($0)) }
        return messages.isEmpty ? nil : messages.joined(separator: "; ")
    case .object: return itemText(value)
    default: return nil
    }
}

extension JSON {
    /// OpenAI's `usage` object, read leniently: missing counts are 0, a missing total is their sum.
    fileprivate var usage: TokenUsage? {
        guard object != nil else { return nil }
        let prompt = self["prompt_tokens"]?.int ?? 0
        let completion = self["completion_tokens"]?.int ?? 0
        let total = self["total_tokens"]?.int ?? prompt.addingReportingOverflow(completion).partialValue
        return Usage(promptTokens: prompt, completionTokens: completion, totalTokens: total)
    }

    /// A string, or a number / boolean rendered as a string (`"code": 429` -> "429").
    fileprivate var flexibleString: String? {
        switch self {
        case .string(let text): text
        case .int(let value): String(value)
        case .double(let value): value.description
        case .bool(let value): String(value)
        default: nil
        }
    }
}

// MARK: - Text helpers

private func isJSONWhiteSpace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
}

private func trimmedSlice(_ string: String) -> Substring {
    guard let first = string.firstIndex(where: { !$0.isWhitespace }),
        let last = string.lastIndex(where: { !$0.isWhitespace })
    else { return "" }
    return string[first...last]
}

/// The trimmed string, or nil when nil or only whitespace.
private func nonBlank(_ string: String?) -> String? {
    guard let string else { return nil }
    let trimmed = trimmedSlice(string)
    return trimmed.isEmpty ? nil : String(trimmed)
}

/// At most `limit` characters; a cut text ends with "…".
private func capped(_ text: Substring, to limit: Int) -> String {
    guard let end = text.index(text.startIndex, offsetBy: limit, limitedBy: text.endIndex), end != text.endIndex
    else { return String(text) }
    return String(text[..<text.index(before: end)]) + "…"
}

private func capped(_ text: String, to limit: Int) -> String {
    capped(text[...], to: limit)
}
