// The OpenAI-compatible chat-completions protocol as seen by the broker, by file:
//  - here: the events a streamed response becomes (content / finish / usage / error / done);
//  - `ChatStreamDecoder.swift`: SSE events of a streamed response into those events, tolerating
//    the many small variations of real servers, over the lenient shapes of `ChatStreamShapes.swift`;
//  - `ToolCallAssembler.swift`: a turn's tool calls put together from their streamed pieces;
//  - `ChatRequest.swift`: the streaming request body;
//  - `UpstreamErrorBody.swift`: a readable message from a non-2xx response.

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
    /// A piece of the model's reasoning (`delta.reasoning_content`, `delta.reasoning`,
    /// `reasoning_details` text, Anthropic's `thinking_delta`, a Responses reasoning summary
    /// delta, a `<think>` block's text); never empty.
    case reasoning(String)
    /// A whole item of reasoning that the same API wants back, unmodified, in later requests of
    /// a tool loop, emitted once complete: an Anthropic `thinking` block with its `signature`
    /// or a `redacted_thinking` block, a Responses `reasoning` output item (with its
    /// `encrypted_content`). Kept with the reply (`ReasoningReplay.items`), never shown.
    case reasoningReplay(JSON)
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

// MARK: - Text helpers

func isJSONWhiteSpace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
}

func trimmedSlice(_ string: String) -> Substring {
    guard let first = string.firstIndex(where: { !$0.isWhitespace }),
        let last = string.lastIndex(where: { !$0.isWhitespace })
    else { return "" }
    return string[first...last]
}

/// The trimmed string, or nil when nil or only whitespace.
func nonBlank(_ string: String?) -> String? {
    guard let string else { return nil }
    let trimmed = trimmedSlice(string)
    return trimmed.isEmpty ? nil : String(trimmed)
}

/// At most `limit` characters; a cut text ends with "…".
func capped(_ text: Substring, to limit: Int) -> String {
    guard let end = text.index(text.startIndex, offsetBy: limit, limitedBy: text.endIndex), end != text.endIndex
    else { return String(text) }
    return String(text[..<text.index(before: end)]) + "…"
}

func capped(_ text: String, to limit: Int) -> String {
    capped(text[...], to: limit)
}
