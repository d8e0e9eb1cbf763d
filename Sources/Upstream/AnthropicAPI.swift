import ConfabProtocol
import SSE
import ServiceSettings

/// Anthropic's Messages API, `POST {base_url}/messages`: the key in `x-api-key`, the API's
/// version in `anthropic-version`, the system prompt as a top-level `system`, `max_tokens`
/// always (the API requires it), and a stream of named events (`message_start`,
/// `content_block_delta`, `message_delta`, `message_stop`, …).
public struct AnthropicMessagesAPI: ChatAPI {
    public var options: AnthropicOptions

    public init(options: AnthropicOptions = AnthropicOptions()) {
        self.options = options
    }

    public func missingConfiguration(_ config: UpstreamConfig) -> MessageError? {
        guard (config.apiKey ?? "").isEmpty else { return nil }
        return MessageError(code: .notConfigured,
                            message: "no API key: set api_key, api_key_file or api_key_env in the provider's table, or ANTHROPIC_API_KEY in confabd's environment")
    }

    public func request(for chat: ChatRequest, config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["content-type: application/json", "accept: text/event-stream", "anthropic-version: \(options.version)"]
        if let key = config.apiKey, !key.isEmpty { headers.append("x-api-key: \(key)") }
        return UpstreamRequest(url: config.url("messages"), headers: headers, body: body(for: chat))
    }

    /// The turns the API accepts: user first, user and assistant alternating, none empty. The
    /// system prompt leaves the turns for `system`; empty turns (a reply that failed before any
    /// text) are left out and what then meets is joined (texts by a blank line); a conversation
    /// that starts with the assistant gets a user turn of "." before it, as LiteLLM sends. A reply
    /// being continued is the last, assistant turn: the API goes on with it. Tool calls are
    /// `tool_use` blocks of the assistant's turn; their results are `tool_result` blocks of the
    /// user turn after it, before any text of that turn.
    public func turns(of chat: ChatRequest) -> (system: String?, messages: [AnthropicTurn]) {
        var system: [String] = []
        var turns: [AnthropicTurn] = []
        var conversation = chat.messages
        // The API refuses a final assistant turn that ends in white space; the decoder drops
        // the white space the continuation then starts with instead.
        if let continuing = chat.continuing?.trimmingTrailingWhiteSpace, !continuing.isEmpty {
            conversation.append(ChatMessage(role: .assistant, content: continuing))
        }
        for message in conversation {
            var turn: AnthropicTurn
            switch message.role {
            case .system:
                if !message.content.isEmpty { system.append(message.content) }
                continue
            case .tool:
                turn = AnthropicTurn(role: .user, blocks: [.toolResult(id: message.toolCallID ?? "", content: message.content, isError: message.isError)])
            case .user, .assistant:
                // Images go before the turn's text, as the API's own examples put them.
                turn = AnthropicTurn(role: message.role, blocks: message.images.map { .image(mediaType: $0.type.rawValue, base64: $0.imageBase64 ?? []) })
                // A turn that called tools goes back as it came: its thinking and redacted
                // thinking blocks first, unmodified (the API checks their signatures).
                if message.role == .assistant, !message.toolCalls.isEmpty, let reasoning = message.reasoning,
                   reasoning.api == ProviderAPI.anthropic(AnthropicOptions()).name {
                    turn.blocks.append(contentsOf: reasoning.items.map(AnthropicTurn.Block.reasoning))
                }
                let text = message.text(imagesAsLines: false)
                if !text.isEmpty { turn.blocks.append(.text(text)) }
                for call in message.toolCalls {
                    // The API takes the input as an object: arguments that are not one (the call
                    // then failed, and its result says why) go as an empty one.
                    let input = (try? JSON.parse(call.arguments)).flatMap { $0.object == nil ? nil : $0 } ?? .object([:])
                    turn.blocks.append(.toolUse(id: call.id, name: call.name, input: input))
                }
            }
            guard !turn.blocks.isEmpty else { continue }
            if let last = turns.last, last.role == turn.role {
                turns[turns.count - 1].append(turn.blocks)
            } else {
                turns.append(turn)
            }
        }
        if turns.first?.role == .assistant { turns.insert(AnthropicTurn(role: .user, text: "."), at: 0) }
        return (system.isEmpty ? nil : system.joined(separator: "\n\n"), turns)
    }

    /// `{"model":..,"max_tokens":N,"system":..,"messages":[{"role":..,"content":..}],"stream":true}`,
    /// `system` only when there is one; `tools` when the conversation offers any; `temperature`,
    /// `top_p` and `stop_sequences` when set; `thinking` with `thinking_budget` (or switched off
    /// with `thinking = false`); then `extra_body`.
    /// The penalties and `seed` have no field here: the config and the protocol refuse them
    /// for this API, so none reaches a request.
    public func body(for chat: ChatRequest) -> [UInt8] {
        let (system, messages) = turns(of: chat)
        let thinking = Self.thinking(of: chat)
        var out: [UInt8] = []
        out.reserveCapacity(256 + chat.messages.reduce(0) { $0 + $1.content.utf8.count + 32 + $1.attachedBytes })
        out.append(contentsOf: #"{"model":"#.utf8)
        JSON.writeString(chat.model, into: &out)
        out.append(contentsOf: #","max_tokens":"#.utf8)
        out.append(contentsOf: String(thinking.maxTokens).utf8)
        let cache = options.promptCache
        if let system {
            out.append(contentsOf: #","system":"#.utf8)
            if cache {
                JSON.array([["type": "text", "text": .string(system), "cache_control": Self.ephemeral]]).write(into: &out)
            } else {
                JSON.writeString(system, into: &out)
            }
        }
        out.append(contentsOf: #","messages":["#.utf8)
        let marked = cache ? Self.cachedTurns(messages.count) : []
        for (position, turn) in messages.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            turn.write(into: &out, cacheBreakpoint: marked.contains(position))
        }
        out.append(contentsOf: #"],"stream":true"#.utf8)
        if !chat.tools.isEmpty {
            out.append(contentsOf: #","tools":"#.utf8)
            JSON.array(chat.tools.enumerated().map { position, tool in
                var definition: [String: JSON] = ["name": .string(tool.name), "description": .string(tool.description), "input_schema": tool.parameters]
                if cache && position == chat.tools.count - 1 { definition["cache_control"] = Self.ephemeral }
                return .object(definition)
            }).write(into: &out)
        }
        for (name, value) in [("temperature", chat.params.temperature), ("top_p", chat.params.topP)] {
            guard let value, value.isFinite, !thinking.leftOut.contains(name) else { continue }
            out.append(contentsOf: ",\"\(name)\":".utf8)
            out.append(contentsOf: value.description.utf8)
        }
        if let stop = chat.params.stop {
            out.append(contentsOf: #","stop_sequences":"#.utf8)
            JSON.array(stop.map(JSON.string)).write(into: &out)
        }
        if let budget = thinking.budget {
            out.append(contentsOf: #","thinking":{"type":"enabled","budget_tokens":"#.utf8)
            out.append(contentsOf: String(budget).utf8)
            out.append(UInt8(ascii: "}"))
        } else if chat.options.thinking == false {
            out.append(contentsOf: #","thinking":{"type":"disabled"}"#.utf8)
        }
        chat.options.writeExtraBody(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A prompt-cache breakpoint: the server caches the request up to and including the block
    /// that carries it (tools, then system, then messages, in that order), for five minutes
    /// from its last use.
    static let ephemeral: JSON = ["type": "ephemeral"]

    /// The turns whose last block carries a breakpoint: the newest (so the next request, which
    /// repeats it, reads everything up to it from the cache) and the one two before it, the
    /// previous request's newest, which the server finds written by then. The API takes four
    /// breakpoints at most: these two, the tools' and the system prompt's.
    static func cachedTurns(_ count: Int) -> Set<Int> {
        Set([count - 1, count - 3].filter { $0 >= 0 })
    }

    /// What extended thinking changes in a body: the budget (none unless `thinking_budget` is
    /// set and thinking not switched off), `max_tokens` kept above it (when the reply's limit
    /// is not, the budget plus that limit is sent: the answer keeps the room it had), and the
    /// sampling parameters the API refuses with thinking, left out (`temperature`; `top_p`
    /// below 0.95).
    public static func thinking(of chat: ChatRequest) -> (budget: Int?, maxTokens: Int, leftOut: [String]) {
        let maxTokens = chat.maxTokens ?? AnthropicOptions.defaultMaxTokens
        guard let budget = chat.options.thinkingBudget, chat.options.thinking != false else { return (nil, maxTokens, []) }
        var leftOut: [String] = []
        if let value = chat.params.temperature, value.isFinite { leftOut.append("temperature") }
        if let value = chat.params.topP, value.isFinite, value < 0.95 { leftOut.append("top_p") }
        return (budget, maxTokens > budget ? maxTokens : budget + maxTokens, leftOut)
    }

    /// What the body leaves out or changes of what was asked, for the daemon's log.
    public static func notices(for chat: ChatRequest) -> [String] {
        let thinking = thinking(of: chat)
        guard let budget = thinking.budget else { return [] }
        var notices = thinking.leftOut.map { "\($0) left out: Anthropic refuses it with thinking (thinking_budget = \(budget))" }
        let asked = chat.maxTokens ?? AnthropicOptions.defaultMaxTokens
        if thinking.maxTokens != asked {
            notices.append("max_tokens \(asked) is not above thinking_budget \(budget): \(thinking.maxTokens) sent")
        }
        return notices
    }

    public func makeDecoder(for request: ChatRequest) -> any ChatEventDecoder {
        let continuing = request.continuing ?? ""
        return AnthropicStreamDecoder(trimsLeadingWhiteSpace: continuing != continuing.trimmingTrailingWhiteSpace)
    }

    public func failure(status: Int, body: [UInt8]) -> MessageError { httpFailure(status: status, body: body) }

    /// `GET {base_url}/models` with the key and version headers. The listing is paged, 20 a page
    /// unless asked: `limit=1000`, the most the API gives, so one request holds them all.
    public func modelsRequest(config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["accept: application/json", "anthropic-version: \(options.version)"]
        if let key = config.apiKey, !key.isEmpty { headers.append("x-api-key: \(key)") }
        return UpstreamRequest(url: config.url("models?limit=1000"), headers: headers, body: [])
    }
}

/// The Messages API's events as the stream events every API's decoder gives: text of
/// `text_delta`s, the stop reason in OpenAI's words, usage (input tokens from `message_start`,
/// output tokens from `message_delta`), `error` events, and `message_stop` as the end.
public struct AnthropicStreamDecoder: ChatEventDecoder, Sendable {
    /// Content block index → the tool call it is, counted from 0 in the order calls begin.
    private var toolBlocks: [Int: Int] = [:]
    private var inputTokens = 0
    private var outputTokens = 0
    private var cache: (read: Int?, write: Int?) = (nil, nil)
    /// Content block index → the reasoning block being streamed there.
    private var reasoningBlocks: [Int: ReasoningBlock] = [:]
    private var leadingWhiteSpace: LeadingWhiteSpace

    public init(trimsLeadingWhiteSpace: Bool = false) {
        leadingWhiteSpace = LeadingWhiteSpace(trimming: trimsLeadingWhiteSpace)
    }

    /// `stop_reason` as OpenAI's `finish_reason`; one with no counterpart is kept as it is.
    public static func finishReason(_ stopReason: String) -> String {
        switch stopReason {
        case "end_turn", "stop_sequence": "stop"
        case "max_tokens": "length"
        case "tool_use": "tool_calls"
        case "refusal": "content_filter"
        default: stopReason
        }
    }

    public mutating func decode(_ event: SSEEventView, into events: inout [ChatStreamEvent]) throws {
        let start = events.count
        events.append(contentsOf: try self.events(of: SSEEvent(event)))
        leadingWhiteSpace.apply(to: &events, from: start)
    }

    /// A whole `message` (the answer to a request that did not stream, which some proxies give
    /// to one that did): its text and `tool_use` blocks in order, the stop reason, the usage.
    /// An `error` object reads as the `error` event would.
    public mutating func decodeWhole(_ body: [UInt8], into events: inout [ChatStreamEvent]) throws {
        guard let message = try? JSON.parse(body), message.object != nil else {
            throw ChatStreamError.malformedChunk(String(decoding: body.prefix(200), as: UTF8.self))
        }
        let start = events.count
        switch message["type"]?.string {
        case "message":
            for block in message["content"]?.array ?? [] {
                switch block["type"]?.string {
                case "text":
                    if let text = block["text"]?.string, !text.isEmpty { events.append(.content(text)) }
                case "thinking":
                    if let text = block["thinking"]?.string, !text.isEmpty { events.append(.reasoning(text)) }
                    events.append(.reasoningReplay(block))
                case "redacted_thinking":
                    events.append(.reasoningReplay(block))
                case "tool_use":
                    let call = toolBlocks.count
                    toolBlocks[-1 - call] = call
                    let input = block["input"].flatMap { $0.object == nil ? nil : $0.compactText } ?? "{}"
                    events.append(.toolCall(ToolCallPiece(index: call, id: block["id"]?.string, name: block["name"]?.string, arguments: input)))
                default:
                    continue
                }
            }
            if let reason = message["stop_reason"]?.string { events.append(.finish(reason: Self.finishReason(reason))) }
            if let usage = message["usage"], usage.object != nil {
                let input = Self.inputTokens(of: usage), output = usage["output_tokens"]?.int ?? 0, cache = Self.cacheTokens(of: usage)
                events.append(.usage(Usage(promptTokens: input, completionTokens: output, totalTokens: input + output,
                                           cacheReadTokens: cache.read, cacheWriteTokens: cache.write)))
            }
        case "error":
            events.append(contentsOf: try self.events(of: SSEEvent(type: "error", data: String(decoding: body, as: UTF8.self))))
        default:
            return
        }
        leadingWhiteSpace.apply(to: &events, from: start)
    }

    private mutating func events(of event: SSEEvent) throws -> [ChatStreamEvent] {
        let data = event.data.trimmingTrailingWhiteSpace
        let payload: JSON
        if data.isEmpty {
            payload = .null
        } else if let parsed = try? JSON.parse(data), parsed.object != nil {
            payload = parsed
        } else if event.type == "error" {
            return [.error(UpstreamErrorInfo(message: capped(data, to: 1000)))]
        } else {
            throw ChatStreamError.malformedChunk(capped(data, to: 200))
        }
        // The data names its type too: a proxy that drops `event:` lines still reads right.
        let type = payload["type"]?.string ?? event.type
        switch type {
        case "message_start":
            let usage = payload["message"]?["usage"]
            inputTokens = Self.inputTokens(of: usage)
            cache = Self.cacheTokens(of: usage)
            outputTokens = usage?["output_tokens"]?.int ?? 0
            return []
        case "content_block_start":
            let block = payload["content_block"]
            switch block?["type"]?.string {
            case "thinking":
                // Its text comes as `thinking_delta`s and its signature as a `signature_delta`;
                // the block goes back whole at `content_block_stop`.
                let text = block?["thinking"]?.string ?? ""
                reasoningBlocks[payload["index"]?.int ?? -1] = ReasoningBlock(thinking: text, signature: block?["signature"]?.string ?? "")
                return text.isEmpty ? [] : [.reasoning(text)]
            case "redacted_thinking":
                // Opaque: nothing to show, the block to send back exactly as it came.
                if let block { reasoningBlocks[payload["index"]?.int ?? -1] = ReasoningBlock(redacted: block) }
                return []
            default:
                break
            }
            if block?["type"]?.string == "tool_use" {
                let call = toolBlocks.count
                toolBlocks[payload["index"]?.int ?? -1 - call] = call
                // The input arrives as `input_json_delta`s; one given whole here is taken as it is.
                let input = block?["input"].flatMap { $0.object?.isEmpty == false ? $0.compactText : nil } ?? ""
                return [.toolCall(ToolCallPiece(index: call, id: block?["id"]?.string, name: block?["name"]?.string, arguments: input))]
            }
            guard let text = block?["text"]?.string, !text.isEmpty else { return [] }
            return [.content(text)]
        case "content_block_delta":
            // Text is shown and tool input is gathered; thinking and signatures are neither.
            guard let delta = payload["delta"] else { return [] }
            if delta["type"]?.string == "input_json_delta" {
                guard let index = payload["index"]?.int, let call = toolBlocks[index],
                      let piece = delta["partial_json"]?.string, !piece.isEmpty else { return [] }
                return [.toolCall(ToolCallPiece(index: call, id: nil, name: nil, arguments: piece))]
            }
            switch delta["type"]?.string {
            case "thinking_delta":
                guard let text = delta["thinking"]?.string, !text.isEmpty else { return [] }
                if let index = payload["index"]?.int { reasoningBlocks[index]?.thinking += text }
                return [.reasoning(text)]
            case "signature_delta":
                if let index = payload["index"]?.int, let signature = delta["signature"]?.string {
                    reasoningBlocks[index]?.signature += signature
                }
                return []
            default:
                break
            }
            guard delta["type"]?.string == "text_delta", let text = delta["text"]?.string, !text.isEmpty else { return [] }
            return [.content(text)]
        case "content_block_stop":
            guard let index = payload["index"]?.int, let block = reasoningBlocks.removeValue(forKey: index) else { return [] }
            return [.reasoningReplay(block.json)]
        case "message_delta":
            var out: [ChatStreamEvent] = []
            if let reason = payload["delta"]?["stop_reason"]?.string { out.append(.finish(reason: Self.finishReason(reason))) }
            if let usage = payload["usage"], usage.object != nil {
                if let output = usage["output_tokens"]?.int { outputTokens = output }
                // Newer servers repeat the input counts here, final where message_start's were not.
                if usage["input_tokens"]?.int != nil {
                    inputTokens = Self.inputTokens(of: usage)
                    cache = Self.cacheTokens(of: usage)
                }
                out.append(.usage(Usage(promptTokens: inputTokens, completionTokens: outputTokens,
                                        totalTokens: inputTokens + outputTokens, cacheReadTokens: cache.read, cacheWriteTokens: cache.write)))
            }
            return out
        case "message_stop":
            return [.done]
        case "error":
            let error = payload["error"]
            let message = error?["message"]?.string ?? error?["type"]?.string ?? "upstream reported an error"
            return [.error(UpstreamErrorInfo(message: capped(message, to: 1000), type: error?["type"]?.string))]
        default:
            // `ping`, and event types added later.
            return []
        }
    }

    /// Input tokens, counting those read from or written to the prompt cache: all of them are the prompt.
    private static func inputTokens(of usage: JSON?) -> Int {
        ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
            .reduce(0) { $0 + (usage?[$1]?.int ?? 0) }
    }

    /// The parts of the input read from and written to the prompt cache, as reported (kept
    /// apart: `promptTokens` counts them all).
    private static func cacheTokens(of usage: JSON?) -> (read: Int?, write: Int?) {
        func count(_ key: String) -> Int? { usage?[key]?.int.flatMap { $0 >= 0 ? $0 : nil } }
        return (count("cache_read_input_tokens"), count("cache_creation_input_tokens"))
    }
}

/// A reasoning block of the Messages API being streamed: a `thinking` block put together from
/// its deltas, or a `redacted_thinking` block as it came. Sent back whole, unmodified, in the
/// assistant turn of a tool loop.
struct ReasoningBlock: Sendable {
    var thinking = ""
    var signature = ""
    var redacted: JSON?

    init(thinking: String, signature: String) {
        self.thinking = thinking
        self.signature = signature
    }

    init(redacted: JSON) { self.redacted = redacted }

    /// `{"type":"thinking","thinking":..,"signature":..}`, or the redacted block as received.
    var json: JSON {
        redacted ?? ["type": "thinking", "thinking": .string(thinking), "signature": .string(signature)]
    }
}

/// One turn of a Messages body: a role and its content blocks.
public struct AnthropicTurn: Equatable, Sendable {
    public enum Block: Equatable, Sendable {
        case text(String)
        case toolUse(id: String, name: String, input: JSON)
        case toolResult(id: String, content: String, isError: Bool)
        /// A thinking or redacted-thinking block, exactly as the API gave it.
        case reasoning(JSON)
        /// An image, as the base64 it is sent as (`media_type` such as `image/png`).
        case image(mediaType: String, base64: [UInt8])

        var isContent: Bool {
            switch self {
            case .text, .image: true
            case .toolUse, .toolResult, .reasoning: false
            }
        }
    }
    public var role: Role
    public var blocks: [Block]

    public init(role: Role, blocks: [Block]) {
        self.role = role
        self.blocks = blocks
    }

    public init(role: Role, text: String) { self.init(role: role, blocks: [.text(text)]) }

    /// A turn of the same role meeting this one: texts that meet are joined by a blank line,
    /// and results of tool calls go before the text and images of a turn.
    mutating func append(_ more: [Block]) {
        for block in more {
            if case .text(let text) = block, case .text(let previous)? = blocks.last {
                blocks[blocks.count - 1] = .text(previous + "\n\n" + text)
            } else if case .toolResult = block, let firstContent = blocks.firstIndex(where: \.isContent) {
                blocks.insert(block, at: firstContent)
            } else {
                blocks.append(block)
            }
        }
    }

    /// `{"role":..,"content":"text"}` for a turn of text alone, else `content` as blocks. With
    /// `cacheBreakpoint`, the last block that may carry one (not a thinking block: the API
    /// refuses `cache_control` there) does, and the content is written as blocks.
    func write(into out: inout [UInt8], cacheBreakpoint: Bool = false) {
        let marked = cacheBreakpoint ? blocks.lastIndex { if case .reasoning = $0 { false } else { true } } : nil
        out.append(contentsOf: #"{"role":"#.utf8)
        JSON.writeString(role.rawValue, into: &out)
        out.append(contentsOf: #","content":"#.utf8)
        if blocks.count == 1, marked == nil, case .text(let text) = blocks[0] {
            JSON.writeString(text, into: &out)
        } else {
            out.append(UInt8(ascii: "["))
            for (position, block) in blocks.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                let cache: [String: JSON] = position == marked ? ["cache_control": AnthropicMessagesAPI.ephemeral] : [:]
                switch block {
                case .image(let mediaType, let base64):
                    // Written by hand: the base64 of megabytes is copied into the body as it is.
                    out.append(contentsOf: #"{"type":"image","source":{"type":"base64","media_type":"#.utf8)
                    JSON.writeString(mediaType, into: &out)
                    out.append(contentsOf: #","data":""#.utf8)
                    out.append(contentsOf: base64)
                    out.append(contentsOf: #""}"#.utf8)
                    if !cache.isEmpty { out.append(contentsOf: #","cache_control":{"type":"ephemeral"}"#.utf8) }
                    out.append(UInt8(ascii: "}"))
                case .text(let text):
                    JSON.object(["type": "text", "text": .string(text)].merging(cache) { a, _ in a }).write(into: &out)
                case .toolUse(let id, let name, let input):
                    JSON.object(["type": "tool_use", "id": .string(id), "name": .string(name), "input": input].merging(cache) { a, _ in a })
                        .write(into: &out)
                case .reasoning(let block):
                    block.write(into: &out)
                case .toolResult(let id, let content, let isError):
                    var fields: [String: JSON] = ["type": "tool_result", "tool_use_id": .string(id), "content": .string(content)]
                    if isError { fields["is_error"] = true }
                    JSON.object(fields.merging(cache) { a, _ in a }).write(into: &out)
                }
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension String {
    var trimmingTrailingWhiteSpace: String {
        guard let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[...last])
    }
}
