// The OpenAI-compatible chat-completions protocol as seen by the broker:
//  - `ChatStreamDecoder` turns SSE events of a streamed response into content / finish / usage /
//    error / done events, tolerating the many small variations of real servers;
//  - `ChatRequest.jsonBody()` builds the streaming request body;
//  - `upstreamErrorMessage(status:body:)` extracts a readable message from a non-2xx response.

import ConfabProtocol
import FoundationEssentials

// MARK: - Public types

/// Token accounting as the upstream reports it: the protocol's own `Usage`.
public typealias TokenUsage = Usage

/// OpenAI's `usage` object, read leniently: missing counts are 0, a missing total is their sum.
private struct UsageObject: Decodable {
    let usage: Usage

    enum CodingKeys: String, CodingKey {
        case promptTokens = "prompt_tokens"
        case completionTokens = "completion_tokens"
        case totalTokens = "total_tokens"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let prompt = c.lenient(Int.self, .promptTokens) ?? 0
        let completion = c.lenient(Int.self, .completionTokens) ?? 0
        let total = c.lenient(Int.self, .totalTokens) ?? prompt.addingReportingOverflow(completion).partialValue
        usage = Usage(promptTokens: prompt, completionTokens: completion, totalTokens: total)
    }
}

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

public struct ChatStreamDecoder: Sendable {
    private let json = JSONDecoder()

    public init() {}

    /// One SSE event in, zero or more stream events out, in order
    /// (content before finish before usage, then error, within one chunk).
    ///
    /// - Events of type `message` must carry `[DONE]`, a JSON object, or nothing but whitespace
    ///   (ignored); anything else throws `ChatStreamError.malformedChunk`.
    /// - Events of type `error` always produce an `.error`, from the JSON error object when there is
    ///   one, else from the raw text.
    /// - Events of any other type (`ping`, ...) are decoded like chunks when they carry a JSON
    ///   object and ignored otherwise.
    public mutating func decode(_ event: SSEEvent) throws -> [ChatStreamEvent] {
        let payload = trimmedSlice(event.data)
        let isError = event.type == "error"
        if payload == "[DONE]" && !isError { return [.done] }
        if payload.isEmpty {
            return isError ? [.error(UpstreamErrorInfo(message: "upstream reported an error"))] : []
        }

        // (JSON.nestsTooDeep: Foundation's decoder traps on some over-deep input rather than throwing.)
        guard payload.first == "{", !JSON.nestsTooDeep(payload.utf8),
            let chunk = try? json.decode(Envelope.self, from: Data(payload.utf8))
        else {
            if isError { return [.error(UpstreamErrorInfo(message: capped(payload, to: 1000)))] }
            if event.type == "message" { throw ChatStreamError.malformedChunk(capped(payload, to: 200)) }
            return []
        }

        var out: [ChatStreamEvent] = []
        if let choice = chunk.primaryChoice {
            let delta = choice.delta ?? choice.message
            if let text = delta?.content, !text.isEmpty { out.append(.content(text)) }
            if let text = delta?.refusal, !text.isEmpty { out.append(.content(text)) }
            if let reason = choice.finishReason, !reason.isEmpty { out.append(.finish(reason: reason)) }
        }
        if let usage = chunk.usage { out.append(.usage(usage)) }

        if let error = chunk.error {
            out.append(.error(error.info(fallback: chunk.message ?? "upstream reported an error")))
        } else if chunk.object == "error" || isError {
            // vLLM-style top-level error ({"object":"error","message":..,"type":..,"code":..}),
            // or an `error` event whose JSON has no `error` key.
            let message = nonBlank(chunk.message) ?? chunk.detail?.text.flatMap(nonBlank)
            if message != nil || isError {
                out.append(.error(UpstreamErrorInfo(
                    message: capped(message ?? String(payload), to: 1000),
                    type: chunk.type, code: chunk.code?.value)))
            }
        }
        return out
    }
}

// MARK: - Request body

public struct ChatMessage: Equatable, Sendable {
    public var role: String
    public var content: String

    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }
}

public struct ChatRequest: Equatable, Sendable {
    public var model: String
    public var messages: [ChatMessage]
    public var temperature: Double?
    /// Sent as `max_tokens`.
    public var maxTokens: Int?

    public init(model: String, messages: [ChatMessage], temperature: Double? = nil, maxTokens: Int? = nil) {
        self.model = model
        self.messages = messages
        self.temperature = temperature
        self.maxTokens = maxTokens
    }

    /// The JSON body for `POST {base}/chat/completions`:
    /// `{"model":..,"messages":[{"role":..,"content":..}],"stream":true,"stream_options":{"include_usage":true}}`
    /// plus `"temperature"` and `"max_tokens"` when set (a non-finite temperature is omitted).
    /// Compact, UTF-8.
    public func jsonBody() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + model.utf8.count + messages.reduce(0) { $0 + $1.content.utf8.count + 32 })
        out.append(contentsOf: #"{"model":"#.utf8)
        appendJSONString(model, to: &out)
        out.append(contentsOf: #","messages":["#.utf8)
        for (index, message) in messages.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"role":"#.utf8)
            appendJSONString(message.role, to: &out)
            out.append(contentsOf: #","content":"#.utf8)
            appendJSONString(message.content, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #"],"stream":true,"stream_options":{"include_usage":true}"#.utf8)
        if let temperature, temperature.isFinite {
            out.append(contentsOf: #","temperature":"#.utf8)
            out.append(contentsOf: temperature.description.utf8)
        }
        if let maxTokens {
            out.append(contentsOf: #","max_tokens":"#.utf8)
            out.append(contentsOf: String(maxTokens).utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

private func appendJSONString(_ string: String, to out: inout [UInt8]) {
    let hex: [UInt8] = Array("0123456789abcdef".utf8)
    out.append(UInt8(ascii: "\""))
    for byte in string.utf8 {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
        case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
        case 0..<0x20:
            out.append(contentsOf: Array(#"\u00"#.utf8))
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        default: out.append(byte)
        }
    }
    out.append(UInt8(ascii: "\""))
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
    if text.first == "{", !JSON.nestsTooDeep(text.utf8), let envelope = try? JSONDecoder().decode(Envelope.self, from: Data(text.utf8)) {
        if let error = envelope.error {
            type = error.type
            code = error.code
            if let message = nonBlank(error.message) {
                return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
            }
        }
        type = type ?? envelope.type
        code = code ?? envelope.code?.value
        if let message = nonBlank(envelope.message) ?? envelope.detail?.text.flatMap(nonBlank) {
            return UpstreamErrorInfo(message: capped(message, to: 1000), type: type, code: code)
        }
    }
    if text.isEmpty {
        return UpstreamErrorInfo(message: "HTTP \(status)", type: type, code: code)
    }
    return UpstreamErrorInfo(message: capped(text, to: 300), type: type, code: code)
}

// MARK: - Lenient JSON shapes (every field optional, wrong types read as absent)

/// The union of the keys we look at in stream chunks and error bodies.
private struct Envelope: Decodable {
    var choices: [Choice]?
    var usage: TokenUsage?
    var error: ErrorPayload?
    var object: String?
    var message: String?
    var detail: Detail?
    var type: String?
    var code: FlexibleString?

    enum CodingKeys: String, CodingKey {
        case choices, usage, error, object, message, detail, type, code
    }

    init(from decoder: any Decoder) throws {
        // Throws when the payload is not a JSON object: that is what makes a chunk malformed.
        let c = try decoder.container(keyedBy: CodingKeys.self)
        choices = c.lenient([Choice].self, .choices)
        usage = c.lenient(UsageObject.self, .usage)?.usage
        error = c.lenient(ErrorPayload.self, .error)
        object = c.lenient(String.self, .object)
        message = c.lenient(String.self, .message)
        detail = c.lenient(Detail.self, .detail)
        type = c.lenient(String.self, .type)
        code = c.lenient(FlexibleString.self, .code)
    }

    /// `choices[0]`: the first choice whose `index` is 0 or absent.
    var primaryChoice: Choice? {
        choices?.first { $0.index == nil || $0.index == 0 }
    }
}

private struct Choice: Decodable {
    var index: Int?
    var delta: Delta?
    var message: Delta?
    var finishReason: String?

    enum CodingKeys: String, CodingKey {
        case index, delta, message
        case finishReason = "finish_reason"
    }

    init(from decoder: any Decoder) throws {
        guard let c = try? decoder.container(keyedBy: CodingKeys.self) else { return }
        index = c.lenient(Int.self, .index)
        delta = c.lenient(Delta.self, .delta)
        message = c.lenient(Delta.self, .message)
        finishReason = c.lenient(String.self, .finishReason)
    }
}

/// `delta` (or `message`): `content` may be a string or a list of `{"type":"text","text":..}` parts.
/// `tool_calls`, `role`, `reasoning_content` and the rest are ignored.
private struct Delta: Decodable {
    var content: String?
    var refusal: String?

    enum CodingKeys: String, CodingKey {
        case content, refusal
    }

    struct Part: Decodable {
        var text: String?
        enum CodingKeys: String, CodingKey { case text }
        init(from decoder: any Decoder) throws {
            guard let c = try? decoder.container(keyedBy: CodingKeys.self) else { return }
            text = c.lenient(String.self, .text)
        }
    }

    init(from decoder: any Decoder) throws {
        guard let c = try? decoder.container(keyedBy: CodingKeys.self) else { return }
        content = c.lenient(String.self, .content)
            ?? c.lenient([Part].self, .content).map { $0.compactMap(\.text).joined() }
        refusal = c.lenient(String.self, .refusal)
    }
}

/// The value of an `error` key: an object with `message`/`type`/`code`, or a bare string.
private struct ErrorPayload: Decodable {
    var message: String?
    var type: String?
    var code: String?

    enum CodingKeys: String, CodingKey {
        case message, type, code
    }

    init(from decoder: any Decoder) throws {
        if let c = try? decoder.container(keyedBy: CodingKeys.self) {
            message = c.lenient(String.self, .message)
            type = c.lenient(String.self, .type)
            code = c.lenient(FlexibleString.self, .code)?.value
        } else {
            message = try? FlexibleString(from: decoder).value
        }
    }

    func info(fallback: String) -> UpstreamErrorInfo {
        let text = nonBlank(message) ?? nonBlank(type) ?? nonBlank(code) ?? nonBlank(fallback) ?? "upstream reported an error"
        return UpstreamErrorInfo(message: capped(text, to: 1000), type: type, code: code)
    }
}

/// `detail`: a string (FastAPI HTTPException), a list of `{"msg":..}` (FastAPI validation), or an
/// object with `message`/`msg`.
private struct Detail: Decodable {
    var text: String?

    struct Item: Decodable {
        var msg: String?
        enum CodingKeys: String, CodingKey { case msg, message }
        init(from decoder: any Decoder) throws {
            if let c = try? decoder.container(keyedBy: CodingKeys.self) {
                msg = c.lenient(String.self, .msg) ?? c.lenient(String.self, .message)
            } else {
                msg = try? String(from: decoder)
            }
        }
    }

    init(from decoder: any Decoder) throws {
        if let string = try? String(from: decoder) {
            text = string
        } else if let items = try? [Item](from: decoder) {
            let messages = items.compactMap { nonBlank($0.msg) }
            text = messages.isEmpty ? nil : messages.joined(separator: "; ")
        } else {
            text = try? Item(from: decoder).msg
        }
    }
}

/// A string, or a number / boolean rendered as a string (`"code": 429` -> "429").
private struct FlexibleString: Decodable {
    var value: String

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let string = try? c.decode(String.self) {
            value = string
        } else if let int = try? c.decode(Int.self) {
            value = String(int)
        } else if let double = try? c.decode(Double.self) {
            value = double.description
        } else {
            value = String(try c.decode(Bool.self))
        }
    }
}

extension KeyedDecodingContainer {
    /// The value for `key`, or nil when absent, null, or of an unexpected type.
    /// (JSONDecoder reads integral floating-point numbers such as `12.0` as Int.)
    fileprivate func lenient<T: Decodable>(_ type: T.Type, _ key: Key) -> T? {
        (try? decodeIfPresent(type, forKey: key)) ?? nil
    }
}

// MARK: - Text helpers

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
