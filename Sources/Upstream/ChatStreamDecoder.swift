import ConfabProtocol
import SSE

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
        // Reasoning comes before the answer in every server's stream; in one chunk, it goes first.
        if let text = delta.reasoning { out.append(.reasoning(text)) }
        if let text = delta.content, !text.isEmpty { out.append(.content(text)) }
        if let text = delta.refusal, !text.isEmpty { out.append(.content(text)) }
        for piece in delta.toolCalls { out.append(.toolCall(piece)) }
    }
}
