import ConfabProtocol
import SSE
import ServiceSettings

/// The legacy OpenAI completions API, `POST {base_url}/completions`: the conversation goes as
/// one transcript `prompt` (system prompt, then labelled turns, ending with the assistant's
/// label for the model to go on from), with `stop` sequences so the model does not write the
/// next human turn itself; the stream's chunks carry `choices[0].text`.
public struct OpenAICompletionsAPI: ChatAPI {
    public var options: CompletionsOptions

    public init(options: CompletionsOptions = CompletionsOptions()) {
        self.options = options
    }

    public func missingConfiguration(_ config: UpstreamConfig) -> MessageError? {
        OpenAIChatAPI().missingConfiguration(config)
    }

    public func request(for chat: ChatRequest, config: UpstreamConfig) -> UpstreamRequest {
        var headers = ["Content-Type: application/json", "Accept: text/event-stream"]
        if let key = config.apiKey, !key.isEmpty { headers.append("Authorization: Bearer \(key)") }
        return UpstreamRequest(url: config.url("completions"), headers: headers, body: body(for: chat))
    }

    /// The system prompt, a blank line, then one line per turn (`Human: …`, `AI: …`), and the
    /// assistant's label last: with nothing after it for a new reply, or followed by the reply
    /// so far when one is being continued, which the model then simply goes on with.
    public func transcript(of chat: ChatRequest) -> String {
        var system: [String] = []
        var turns: [String] = []
        for message in chat.messages {
            switch message.role {
            case .system: system.append(message.content)
            // Text files go inline; the API takes no images (a send of one is refused before it is
            // stored), so one in the history is a line naming it.
            case .user: turns.append(labelled(options.userLabel, message.text(imagesAsLines: true)))
            case .assistant: turns.append(labelled(options.assistantLabel, message.content))
            // The API has no tool calls and the config offers none to its conversations.
            case .tool: continue
            }
        }
        turns.append(labelled(options.assistantLabel, chat.continuing ?? ""))
        let preamble = system.filter { !$0.isEmpty }.joined(separator: "\n\n")
        return (preamble.isEmpty ? "" : preamble + "\n\n") + turns.joined(separator: "\n")
    }

    private func labelled(_ label: String, _ text: String) -> String {
        text.isEmpty ? label : label + " " + text
    }

    /// `{"model":..,"prompt":..,"stream":true,"stream_options":{"include_usage":true},"stop":[..]}`
    /// plus the sampling parameters set. A profile's `stop` adds to the provider's, which end
    /// the transcript's turns; no `stop` when both are empty.
    public func body(for chat: ChatRequest) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #"{"model":"#.utf8)
        JSON.writeString(chat.model, into: &out)
        out.append(contentsOf: #","prompt":"#.utf8)
        JSON.writeString(transcript(of: chat), into: &out)
        out.append(contentsOf: #","stream":true,"stream_options":{"include_usage":true}"#.utf8)
        var stop = options.stop
        for sequence in chat.params.stop ?? [] where !stop.contains(sequence) { stop.append(sequence) }
        if !stop.isEmpty {
            out.append(contentsOf: #","stop":"#.utf8)
            JSON.array(stop.map(JSON.string)).write(into: &out)
        }
        chat.writeSamplingParameters(into: &out, stop: false)
        chat.options.writeExtraBody(into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    public func makeDecoder(for request: ChatRequest) -> any ChatEventDecoder {
        // After "AI:" a model starts with a space; a continuation goes on mid-text, where a
        // space is part of what it says.
        CompletionsStreamDecoder(trimsLeadingWhiteSpace: request.continuing == nil)
    }

    public func failure(status: Int, body: [UInt8]) -> MessageError { httpFailure(status: status, body: body) }

    /// The same `GET {base_url}/models` as chat completions: one server usually serves both.
    public func modelsRequest(config: UpstreamConfig) -> UpstreamRequest { OpenAIChatAPI().modelsRequest(config: config) }
}

/// Chunks of the completions API: OpenAI's chunk format with the text in `choices[0].text`.
public struct CompletionsStreamDecoder: ChatEventDecoder, Sendable {
    private var chunks = ChatStreamDecoder(textField: .text)
    private var leadingWhiteSpace: LeadingWhiteSpace

    public init(trimsLeadingWhiteSpace: Bool = true) {
        leadingWhiteSpace = LeadingWhiteSpace(trimming: trimsLeadingWhiteSpace)
    }

    public mutating func decode(_ event: SSEEventView, into events: inout [ChatStreamEvent]) throws {
        let start = events.count
        try chunks.decode(event, into: &events)
        leadingWhiteSpace.apply(to: &events, from: start)
    }
}

/// Drops the white space a reply's text starts with, however many pieces it comes in, until the
/// first piece with something else in it.
struct LeadingWhiteSpace: Sendable {
    private(set) var trimming: Bool

    init(trimming: Bool) { self.trimming = trimming }

    /// Trims `events[start...]` in place.
    mutating func apply(to events: inout [ChatStreamEvent], from start: Int) {
        guard trimming else { return }
        let trimmed: [ChatStreamEvent] = events[start...].compactMap { event in
            guard trimming, case .content(let text) = event else { return event }
            guard let first = text.firstIndex(where: { !$0.isWhitespace }) else { return nil }
            trimming = false
            return .content(String(text[first...]))
        }
        events.replaceSubrange(start..., with: trimmed)
    }
}
