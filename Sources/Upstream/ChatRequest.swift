import ConfabProtocol
import ServiceSettings

// MARK: - Request body

/// The reasoning of one assistant turn, kept to be sent back: which API, provider and model
/// made it (one server's reasoning never goes to another), its text (DeepSeek-style chat sends
/// it back as `reasoning_content`), and the opaque items the API wants back exactly as they came
/// (Anthropic's thinking and redacted-thinking blocks, Responses' reasoning items).
public struct ReasoningReplay: Equatable, Sendable {
    public var api: String
    public var provider: String
    public var model: String
    public var text: String
    public var items: [JSON]

    public init(api: String, provider: String, model: String, text: String, items: [JSON] = []) {
        self.api = api
        self.provider = provider
        self.model = model
        self.text = text
        self.items = items
    }
}

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
    /// A user turn's files, in the order attached: text files go after `content` as text,
    /// images in each API's form (see `ChatAttachment`).
    public var attachments: [ChatAttachment]
    /// An assistant turn's reasoning, as the server that wrote it gave it: each adapter sends
    /// back what its API demands of it (and only for the provider and model that made it; the
    /// broker leaves it nil otherwise).
    public var reasoning: ReasoningReplay?

    public init(role: Role, content: String, toolCalls: [ToolCall] = [], toolCallID: String? = nil,
                toolName: String? = nil, isError: Bool = false, attachments: [ChatAttachment] = [],
                reasoning: ReasoningReplay? = nil) {
        self.reasoning = reasoning
        self.role = role
        self.content = content
        self.toolCalls = toolCalls
        self.toolCallID = toolCallID
        self.toolName = toolName
        self.isError = isError
        self.attachments = attachments
    }

    /// An assistant turn that asked for tools and said nothing.
    public var isTextlessToolCallTurn: Bool { role == .assistant && !toolCalls.isEmpty && content.isEmpty }

    /// The chat-completions turns, separated by commas: `{"role":..,"content":..}`; an assistant
    /// turn with `tool_calls` (its content, when empty, as `toolCallTurnContent` says); a tool
    /// turn with its `tool_call_id`.
    /// Under `.toolCalls`, an assistant turn that called tools carries its `reasoning_content`
    /// (made by a chat server: the broker gives a turn its reasoning only for the provider and
    /// model that made it).
    static func write(_ messages: [ChatMessage], toolCallTurnContent: ToolCallTurnContent = .empty,
                      reasoningPassBack: ReasoningPassBack = .toolCalls, into out: inout [UInt8]) {
        for (index, message) in messages.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"role":"#.utf8)
            JSON.writeString(message.role.rawValue, into: &out)
            if let callID = message.toolCallID, message.role == .tool {
                out.append(contentsOf: #","tool_call_id":"#.utf8)
                JSON.writeString(callID, into: &out)
            }
            let images = message.images
            if !images.isEmpty {
                // A turn with images is sent as parts: its text (when it has any), then each image
                // as a `data:` URL. A turn without stays a plain string, which every server takes.
                out.append(contentsOf: #","content":["#.utf8)
                let text = message.text(imagesAsLines: false)
                if !text.isEmpty {
                    out.append(contentsOf: #"{"type":"text","text":"#.utf8)
                    JSON.writeString(text, into: &out)
                    out.append(contentsOf: "},".utf8)
                }
                for (position, image) in images.enumerated() {
                    if position > 0 { out.append(UInt8(ascii: ",")) }
                    out.append(contentsOf: #"{"type":"image_url","image_url":{"url":"data:"#.utf8)
                    out.append(contentsOf: image.type.rawValue.utf8)
                    out.append(contentsOf: ";base64,".utf8)
                    out.append(contentsOf: image.imageBase64 ?? [])
                    out.append(contentsOf: #""}}"#.utf8)
                }
                out.append(UInt8(ascii: "]"))
            } else if !message.isTextlessToolCallTurn || toolCallTurnContent == .empty {
                out.append(contentsOf: #","content":"#.utf8)
                JSON.writeString(message.text(imagesAsLines: false), into: &out)
            }
            if reasoningPassBack == .toolCalls, message.role == .assistant, !message.toolCalls.isEmpty,
               let reasoning = message.reasoning, reasoning.api == ProviderAPI.chat.name {
                out.append(contentsOf: #","reasoning_content":"#.utf8)
                JSON.writeString(reasoning.text, into: &out)
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
    /// Which turns' reasoning a chat body sends back (the provider's `reasoning_pass_back`).
    public var reasoningPassBack: ReasoningPassBack = .toolCalls
    /// How reasoning is asked for, the token field's name and `extra_body` (the provider's,
    /// under the profile's).
    public var options = RequestOptions()

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
        out.reserveCapacity(128 + model.utf8.count + messages.reduce(0) { $0 + $1.content.utf8.count + 32 + $1.attachedBytes })
        out.append(contentsOf: #"{"model":"#.utf8)
        JSON.writeString(model, into: &out)
        out.append(contentsOf: #","messages":["#.utf8)
        ChatMessage.write(messages, toolCallTurnContent: toolCallTurnContent, reasoningPassBack: reasoningPassBack, into: &out)
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
        writeSamplingParameters(into: &out, maxTokensField: options.maxTokensField ?? .max_tokens)
        writeReasoningSettings(into: &out)
        options.writeExtraBody(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `reasoning_effort` (or OpenRouter's `reasoning` object) and the thinking switch, as a
    /// chat-completions server takes them: DeepSeek's `thinking: {type}`; OpenRouter's
    /// `reasoning: {enabled: false}`.
    func writeReasoningSettings(into out: inout [UInt8]) {
        let effort = params.reasoningEffort
        switch options.reasoningFormat ?? .openai {
        case .openai:
            if let effort {
                out.append(contentsOf: #","reasoning_effort":"#.utf8)
                JSON.writeString(effort, into: &out)
            }
            if let thinking = options.thinking {
                out.append(contentsOf: (thinking ? #","thinking":{"type":"enabled"}"# : #","thinking":{"type":"disabled"}"#).utf8)
            }
        case .openrouter:
            var reasoning: [String: JSON] = [:]
            if let effort { reasoning["effort"] = .string(effort) }
            if let thinking = options.thinking { reasoning["enabled"] = .bool(thinking) }
            if options.thinking == false { reasoning["effort"] = nil }
            guard !reasoning.isEmpty else { return }
            out.append(contentsOf: #","reasoning":"#.utf8)
            JSON.object(reasoning).write(into: &out)
        }
    }
}

extension ChatRequest {
    /// OpenAI's names for the parameters set (`temperature`, `top_p`, `max_tokens`,
    /// `presence_penalty`, `frequency_penalty`, `stop`, `seed`), each with its comma; a
    /// non-finite number is left out, as JSON cannot hold it.
    func writeSamplingParameters(into out: inout [UInt8], stop includesStop: Bool = true, maxTokensField: MaxTokensField = .max_tokens) {
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
        integer(maxTokensField.rawValue, params.maxTokens)
        number("presence_penalty", params.presencePenalty)
        number("frequency_penalty", params.frequencyPenalty)
        if includesStop, let stop = params.stop {
            out.append(contentsOf: #","stop":"#.utf8)
            JSON.array(stop.map(JSON.string)).write(into: &out)
        }
        integer("seed", params.seed)
    }
}
