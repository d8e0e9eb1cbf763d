import ConfabProtocol
import SSE
import ServiceSettings

/// OpenAI's Responses API, `POST {base_url}/responses`: bearer key, confab's history sent as
/// `input` items every time (`store: false`: nothing is kept at the server), the system prompt
/// as `instructions`, and the reasoning items asked for encrypted
/// (`include: ["reasoning.encrypted_content"]`) so that a tool loop can send them back; the
/// stream is typed events (`ResponsesStreamDecoder`).
public struct OpenAIResponsesAPI: ChatAPI {
    public init() {}

    public func missingConfiguration(_ config: UpstreamConfig) -> MessageError? {
        OpenAIChatAPI().missingConfiguration(config)
    }

    public func request(for chat: ChatRequest, config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["Content-Type: application/json", "Accept: text/event-stream"]
        if let key = config.apiKey, !key.isEmpty { headers.append("Authorization: Bearer \(key)") }
        return UpstreamRequest(url: config.url("responses"), headers: headers, body: body(for: chat))
    }

    /// The `input` items of a request, in order, and the `instructions` (the system prompts,
    /// joined by a blank line): a user turn as a message (its text and images as `input_text`
    /// and `input_image` parts, or a plain string without images); an assistant turn as its
    /// reasoning items (only those of the Responses API: the broker gives a turn's reasoning only
    /// to the provider and model that made it), its text as a message, then a `function_call`
    /// per tool call; a tool turn as a `function_call_output`. A reply being continued goes as an
    /// assistant message and the instruction to go on, as in chat completions.
    public func input(of chat: ChatRequest) -> (instructions: String?, items: [ResponsesInputItem]) {
        var system: [String] = []
        var items: [ResponsesInputItem] = []
        for message in chat.chatMessages {
            switch message.role {
            case .system:
                if !message.content.isEmpty { system.append(message.content) }
            case .user:
                items.append(.message(role: .user, text: message.text(imagesAsLines: false), images: message.images))
            case .assistant:
                if !message.toolCalls.isEmpty, let reasoning = message.reasoning, reasoning.api == ProviderAPI.responses.name {
                    items += reasoning.items.filter { $0["type"]?.string == "reasoning" }.map(ResponsesInputItem.reasoning)
                }
                let text = message.text(imagesAsLines: false)
                if !text.isEmpty { items.append(.message(role: .assistant, text: text, images: [])) }
                items += message.toolCalls.map { .functionCall(callID: $0.id, name: $0.name, arguments: $0.arguments) }
            case .tool:
                items.append(.functionCallOutput(callID: message.toolCallID ?? "", output: message.content))
            }
        }
        return (system.isEmpty ? nil : system.joined(separator: "\n\n"), items)
    }

    /// `{"model":..,"input":[..],"instructions":..,"stream":true,"store":false,
    /// "include":["reasoning.encrypted_content"]}`, then `tools` (function tools),
    /// `max_output_tokens`, `temperature` and `top_p` when set, `reasoning` (`effort`, and
    /// `summary: "auto"` so the thought is streamed) when `reasoning_effort` is set or
    /// `thinking = true`, then `extra_body`.
    public func body(for chat: ChatRequest) -> [UInt8] {
        let (instructions, items) = input(of: chat)
        var out: [UInt8] = []
        out.reserveCapacity(256 + chat.messages.reduce(0) { $0 + $1.content.utf8.count + 48 + $1.attachedBytes })
        out.append(contentsOf: #"{"model":"#.utf8)
        JSON.writeString(chat.model, into: &out)
        out.append(contentsOf: #","input":["#.utf8)
        for (position, item) in items.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            item.write(into: &out)
        }
        out.append(UInt8(ascii: "]"))
        if let instructions {
            out.append(contentsOf: #","instructions":"#.utf8)
            JSON.writeString(instructions, into: &out)
        }
        out.append(contentsOf: #","stream":true,"store":false,"include":["reasoning.encrypted_content"]"#.utf8)
        if !chat.tools.isEmpty {
            out.append(contentsOf: #","tools":"#.utf8)
            JSON.array(chat.tools.map {
                ["type": "function", "name": .string($0.name), "description": .string($0.description), "parameters": $0.parameters]
            }).write(into: &out)
        }
        if let tokens = chat.maxTokens {
            out.append(contentsOf: #","max_output_tokens":"#.utf8)
            out.append(contentsOf: String(tokens).utf8)
        }
        for (name, value) in [("temperature", chat.params.temperature), ("top_p", chat.params.topP)] {
            guard let value, value.isFinite else { continue }
            out.append(contentsOf: ",\"\(name)\":".utf8)
            out.append(contentsOf: value.description.utf8)
        }
        if chat.params.reasoningEffort != nil || chat.options.thinking == true {
            var reasoning: [String: JSON] = ["summary": "auto"]
            if let effort = chat.params.reasoningEffort { reasoning["effort"] = .string(effort) }
            out.append(contentsOf: #","reasoning":"#.utf8)
            JSON.object(reasoning).write(into: &out)
        }
        chat.options.writeExtraBody(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    public func makeDecoder(for request: ChatRequest) -> any ChatEventDecoder { ResponsesStreamDecoder() }

    /// The error body is OpenAI's `{"error":{"message":..,"type":..,"code":..}}`, read as chat's is.
    public func failure(status: Int, body: [UInt8]) -> MessageError { httpFailure(status: status, body: body) }

    public func modelsRequest(config: UpstreamConfig) -> UpstreamRequest {
        OpenAIChatAPI().modelsRequest(config: config)
    }
}

/// One item of a Responses request's `input`.
public enum ResponsesInputItem: Equatable, Sendable {
    /// `{"role":"user","content":"text"}`, or with images `content` as `input_text` and
    /// `input_image` parts (a `data:` URL each).
    case message(role: Role, text: String, images: [ChatAttachment])
    /// A reasoning item exactly as the server gave it.
    case reasoning(JSON)
    /// `{"type":"function_call","call_id":..,"name":..,"arguments":..}`.
    case functionCall(callID: String, name: String, arguments: String)
    /// `{"type":"function_call_output","call_id":..,"output":..}`.
    case functionCallOutput(callID: String, output: String)

    func write(into out: inout [UInt8]) {
        switch self {
        case .message(let role, let text, let images):
            out.append(contentsOf: #"{"role":"#.utf8)
            JSON.writeString(role.rawValue, into: &out)
            out.append(contentsOf: #","content":"#.utf8)
            guard !images.isEmpty else {
                JSON.writeString(text, into: &out)
                out.append(UInt8(ascii: "}"))
                return
            }
            out.append(UInt8(ascii: "["))
            if !text.isEmpty {
                out.append(contentsOf: #"{"type":"input_text","text":"#.utf8)
                JSON.writeString(text, into: &out)
                out.append(contentsOf: "},".utf8)
            }
            for (position, image) in images.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                // Written by hand: the base64 of megabytes is copied into the body as it is.
                out.append(contentsOf: #"{"type":"input_image","image_url":"data:"#.utf8)
                out.append(contentsOf: image.type.rawValue.utf8)
                out.append(contentsOf: ";base64,".utf8)
                out.append(contentsOf: image.imageBase64 ?? [])
                out.append(contentsOf: #""}"#.utf8)
            }
            out.append(contentsOf: "]}".utf8)
        case .reasoning(let item):
            item.write(into: &out)
        case .functionCall(let callID, let name, let arguments):
            JSON.object(["type": "function_call", "call_id": .string(callID), "name": .string(name), "arguments": .string(arguments)])
                .write(into: &out)
        case .functionCallOutput(let callID, let output):
            JSON.object(["type": "function_call_output", "call_id": .string(callID), "output": .string(output)]).write(into: &out)
        }
    }
}

/// The Responses API's typed events as the stream events every API's decoder gives: text of
/// `response.output_text.delta` (and `response.refusal.delta`), reasoning of
/// `response.reasoning_summary_text.delta` (and `response.reasoning_text.delta`, a model's raw
/// reasoning where a server gives it), a whole reasoning item from `response.output_item.done`
/// to be sent back, function calls from `response.output_item.added` and
/// `response.function_call_arguments.delta`, and the end from `response.completed`,
/// `response.incomplete` or `response.failed` (and `error` events) with the usage.
public struct ResponsesStreamDecoder: ChatEventDecoder, Sendable {
    /// `output_index` → the tool call it is, counted from 0 in the order calls begin.
    private var calls: [Int: Int] = [:]
    /// Calls whose arguments came in deltas: their `done` item does not repeat them.
    private var argumentsStreamed: Set<Int> = []
    /// Whether a reasoning summary part was streamed: the next part goes after a blank line.
    private var sawSummary = false

    public init() {}

    public mutating func decode(_ event: SSEEventView, into events: inout [ChatStreamEvent]) throws {
        let data = trimmedSlice(event.dataText)
        if data.isEmpty { return }
        if data == "[DONE]" {
            events.append(.done)
            return
        }
        guard let payload = try? JSON.parse(String(data)), payload.object != nil else {
            if event.type == "error" {
                events.append(.error(UpstreamErrorInfo(message: capped(data, to: 1000))))
                return
            }
            throw ChatStreamError.malformedChunk(capped(data, to: 200))
        }
        // The data names its type too: a proxy that drops `event:` lines still reads right.
        let type = payload["type"]?.string ?? event.type
        decode(payload, type: type, into: &events)
    }

    /// A whole `response` object (the answer to a request that did not stream, which some
    /// proxies give): its output items in order, then its end as `response.completed` would say.
    public mutating func decodeWhole(_ body: [UInt8], into events: inout [ChatStreamEvent]) throws {
        guard let response = try? JSON.parse(body), response.object != nil else {
            throw ChatStreamError.malformedChunk(String(decoding: body.prefix(200), as: UTF8.self))
        }
        if response["object"]?.string != "response" {
            // An error body with a 2xx status, as some proxies send.
            if let error = response["error"], error.object != nil { decode(response, type: "error", into: &events) }
            return
        }
        for (index, item) in (response["output"]?.array ?? []).enumerated() {
            switch item["type"]?.string {
            case "message":
                for part in item["content"]?.array ?? [] {
                    if let text = (part["text"] ?? part["refusal"])?.string, !text.isEmpty { events.append(.content(text)) }
                }
            default:
                decode(["type": "response.output_item.done", "output_index": .int(index), "item": item],
                       type: "response.output_item.done", into: &events)
            }
        }
        end(of: response, status: response["status"]?.string, into: &events)
    }

    private mutating func decode(_ payload: JSON, type: String, into events: inout [ChatStreamEvent]) {
        switch type {
        case "response.output_text.delta", "response.refusal.delta":
            if let text = payload["delta"]?.string, !text.isEmpty { events.append(.content(text)) }
        case "response.reasoning_summary_part.added":
            // Summary parts are paragraphs of one thought.
            if sawSummary { events.append(.reasoning("\n\n")) }
        case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
            if let text = payload["delta"]?.string, !text.isEmpty {
                sawSummary = true
                events.append(.reasoning(text))
            }
        case "response.output_item.added":
            guard let item = payload["item"], item["type"]?.string == "function_call" else { return }
            let call = callIndex(payload["output_index"]?.int)
            let arguments = item["arguments"]?.string ?? ""
            if !arguments.isEmpty { argumentsStreamed.insert(call) }
            events.append(.toolCall(ToolCallPiece(index: call, id: item["call_id"]?.string, name: item["name"]?.string, arguments: arguments)))
        case "response.function_call_arguments.delta":
            guard let piece = payload["delta"]?.string, !piece.isEmpty else { return }
            let call = callIndex(payload["output_index"]?.int)
            argumentsStreamed.insert(call)
            events.append(.toolCall(ToolCallPiece(index: call, id: nil, name: nil, arguments: piece)))
        case "response.output_item.done":
            guard let item = payload["item"] else { return }
            switch item["type"]?.string {
            case "reasoning":
                events.append(.reasoningReplay(item))
            case "function_call":
                let output = payload["output_index"]?.int
                if let output, let call = calls[output] {
                    // Begun with `output_item.added`: only arguments that never streamed are new.
                    guard !argumentsStreamed.contains(call), let arguments = item["arguments"]?.string, !arguments.isEmpty else { return }
                    argumentsStreamed.insert(call)
                    events.append(.toolCall(ToolCallPiece(index: call, id: nil, name: nil, arguments: arguments)))
                } else {
                    let call = callIndex(output)
                    argumentsStreamed.insert(call)
                    events.append(.toolCall(ToolCallPiece(index: call, id: item["call_id"]?.string, name: item["name"]?.string,
                                                          arguments: item["arguments"]?.string ?? "")))
                }
            default:
                return
            }
        case "response.completed", "response.incomplete", "response.failed":
            let response = payload["response"] ?? .object([:])
            end(of: response, status: response["status"]?.string ?? String(type.dropFirst("response.".count)), into: &events)
        case "error":
            // `{"type":"error","code":..,"message":..,"param":..}`, or an `error` object as in bodies.
            let nested = payload["error"].flatMap { $0.object == nil ? nil : $0 }
            let error = nested ?? payload
            let message = nonBlank(error["message"]?.string) ?? nonBlank(error["code"]?.flexibleString) ?? "upstream reported an error"
            events.append(.error(UpstreamErrorInfo(message: capped(message, to: 1000), type: nested?["type"]?.string,
                                                   code: error["code"]?.flexibleString)))
        default:
            // `response.created`, `response.in_progress`, `…part.added`/`…done`, `….done` of text, and
            // event types added later.
            return
        }
    }

    /// The end of a response: its usage, then its finish reason (`stop`, `tool_calls` when it
    /// asked for tools, `length` when `max_output_tokens` ran out, `content_filter`), or its
    /// error when it failed.
    private func end(of response: JSON, status: String?, into events: inout [ChatStreamEvent]) {
        if let usage = Self.usage(response["usage"]) { events.append(.usage(usage)) }
        switch status {
        case "failed":
            let error = response["error"]
            let message = nonBlank(error?["message"]?.string) ?? nonBlank(error?["code"]?.flexibleString) ?? "the response failed"
            events.append(.error(UpstreamErrorInfo(message: capped(message, to: 1000), code: error?["code"]?.flexibleString)))
            return
        case "incomplete":
            let reason = response["incomplete_details"]?["reason"]?.string
            events.append(.finish(reason: reason == "content_filter" ? "content_filter" : "length"))
        case "cancelled":
            events.append(.error(UpstreamErrorInfo(message: "the server cancelled the response")))
            return
        default:
            events.append(.finish(reason: calls.isEmpty ? "stop" : "tool_calls"))
        }
        events.append(.done)
    }

    private mutating func callIndex(_ output: Int?) -> Int {
        let key = output ?? -1 - calls.count
        if let call = calls[key] { return call }
        let call = calls.count
        calls[key] = call
        return call
    }

    /// `{"input_tokens":..,"input_tokens_details":{"cached_tokens":..},"output_tokens":..,
    /// "output_tokens_details":{"reasoning_tokens":..},"total_tokens":..}`; cached tokens are
    /// part of the input, reasoning tokens part of the output, as the protocol counts them.
    static func usage(_ usage: JSON?) -> Usage? {
        guard let usage, usage.object != nil else { return nil }
        let input = usage["input_tokens"]?.int ?? 0
        let output = usage["output_tokens"]?.int ?? 0
        let total = usage["total_tokens"]?.int ?? input.addingReportingOverflow(output).partialValue
        return Usage(promptTokens: input, completionTokens: output, totalTokens: total,
                     reasoningTokens: usage["output_tokens_details"]?["reasoning_tokens"]?.int,
                     cacheReadTokens: usage["input_tokens_details"]?["cached_tokens"]?.int)
    }
}
