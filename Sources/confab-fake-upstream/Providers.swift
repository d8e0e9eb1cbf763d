import Foundation
import Glibc

// The two other APIs confab speaks: OpenAI's legacy completions (`POST …/completions`) and
// Anthropic's Messages API (`POST …/messages`). Both take the same directives as chat
// completions, and both write their event stream in pieces of random length (seeded).

/// OpenAI's answer to a model it does not have.
func modelNotFoundBody(_ model: String) -> String {
    errorBody(message: "The model `\(model)` does not exist or you do not have access to it.",
              type: "invalid_request_error", code: "model_not_found")
}

/// Anthropic's error shape: `{"type":"error","error":{"type":…,"message":…}}`.
func anthropicErrorBody(type: String, message: String) -> String {
    JSON.object([("type", .string("error")), ("error", .object([("type", .string(type)), ("message", .string(message))]))]).encoded()
}

private func anthropicErrorType(_ status: Int) -> String {
    switch status {
    case 400: "invalid_request_error"
    case 401: "authentication_error"
    case 403: "permission_error"
    case 404: "not_found_error"
    case 413: "request_too_large"
    case 429: "rate_limit_error"
    case 529: "overloaded_error"
    default: "api_error"
    }
}

/// What a scripted reply is: its text and the pieces it streams in.
private func replyText(_ script: Script, remaining: String, context: String) -> String {
    if let reply = script.reply { return reply }
    if let words = script.words { return words == 0 ? "" : (1...words).map { "w\($0)" }.joined(separator: " ") }
    if script.context { return context }
    return "You said: " + remaining.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The status a request is refused with, if the script says so (`status`, `fail-first`).
private func scriptedFailure(_ script: Script, key: String, shared: Shared) -> Int? {
    guard let failFirst = script.failFirst else { return script.status }
    return shared.attempt(for: key) <= failFirst ? (script.status ?? 503) : nil
}

/// How a stream is cut short, if it is: after how many pieces, and how.
private enum Interruption { case drop, stall, error }

private func interruption(_ script: Script, pieceCount: Int) -> (at: Int, kind: Interruption)? {
    let candidates: [(Int?, Interruption)] = [(script.drop, .drop), (script.stall, .stall), (script.errorMid, .error)]
    return candidates.compactMap { n, kind in n.map { (min($0, pieceCount), kind) } }.min { $0.0 < $1.0 }
}

/// Streams `pieces` as events, with the script's delays and interruptions. Returns false when
/// the stream was cut short (the connection then closes), true when the caller should go on
/// with the ending events.
private func streamPieces(_ pieces: [String], script: Script, writer: inout ChunkedWriter, connection: Connection,
                          event: (String) -> String, errorEvent: String) -> Bool? {
    let cut = interruption(script, pieceCount: pieces.count)
    for index in 0...pieces.count {
        if let cut, cut.at == index {
            switch cut.kind {
            case .drop:
                _ = writer.flush()
            case .stall:
                guard writer.flush() else { return nil }
                connection.waitForClientToGoAway(maxSeconds: 600)
            case .error:
                guard writer.write(errorEvent) else { return nil }
                _ = writer.finish()
            }
            return false
        }
        guard index < pieces.count else { break }
        if index > 0 { sleepMilliseconds(script.delayMs) }
        guard writer.write(event(pieces[index])) else { return nil }
    }
    return true
}

private func eventStreamHead(keepAlive: Bool, requestID: Int) -> String {
    responseHead(status: 200, headers: [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", keepAlive ? "keep-alive" : "close"),
        ("x-request-id", "fake-\(requestID)"),
    ])
}

// MARK: - Legacy completions

/// The last human turn of a transcript prompt: from the last line that starts with the user's
/// label to the end, leaving out the assistant's label that ends the prompt (and anything after
/// it on its line). The labels are the request's first two `stop` sequences, as confab sends
/// them by default, else `Human:` and `AI:`.
func lastHumanTurn(_ prompt: String, stop: [String]) -> String {
    let userLabel = stop.count >= 1 ? stop[0] : "Human:"
    let assistantLabel = stop.count >= 2 ? stop[1] : "AI:"
    let lines = prompt.components(separatedBy: "\n")
    guard let start = lines.lastIndex(where: { $0.hasPrefix(userLabel) }) else { return "" }
    var turn = Array(lines[start...])
    if let end = turn.lastIndex(where: { $0.hasPrefix(assistantLabel) }), end > 0 { turn = Array(turn[..<end]) }
    turn[0] = String(turn[0].dropFirst(userLabel.count))
    return turn.joined(separator: "\n")
}

func legacyCompletions(_ request: Request, body: JSON?, connection: Connection, shared: Shared, keepAlive: Bool) -> Bool {
    guard let body, body.isObject, let prompt = body["prompt"]?.stringValue else {
        return sendJSON(connection, status: 400,
                        body: errorBody(message: "Missing required parameter: 'prompt'.", type: "invalid_request_error",
                                        code: "missing_required_parameter"),
                        keepAlive: keepAlive)
    }
    let stop = body["stop"]?.arrayValue?.compactMap(\.stringValue) ?? body["stop"]?.stringValue.map { [$0] } ?? []
    let turn = lastHumanTurn(prompt, stop: stop)
    let (remaining, directives) = extractDirectives(turn)
    let script = Script(directives: directives, defaultDelayMs: shared.config.defaultDelayMs)
    let model = body["model"]?.stringValue ?? "fake-model"
    if let ms = script.slowHeadersMs { sleepMilliseconds(ms) }
    if model.hasPrefix("missing") { return sendJSON(connection, status: 404, body: modelNotFoundBody(model), keepAlive: keepAlive) }
    if let status = scriptedFailure(script, key: turn, shared: shared) {
        let (type, code) = statusError(status)
        var extra: [(String, String)] = []
        if status == 429 && !script.noRetryAfter { extra.append(("Retry-After", "1")) }
        return sendJSON(connection, status: status, body: errorBody(message: "fake upstream error \(status)", type: type, code: code),
                        extraHeaders: extra, keepAlive: keepAlive)
    }
    if script.emptyStream, script.streams(body) { return sendEmptyEventStream(connection, keepAlive: keepAlive, split: script.split) }
    // A model goes on after "AI:" with a space, as real ones do.
    let text = replyText(script, remaining: remaining, context: "prompt: " + prompt)
    let pieces = splitIntoPieces(text.isEmpty ? text : " " + text, size: script.chunk)
    let promptTokens = prompt.split(whereSeparator: { $0.isWhitespace }).count
    let n = shared.nextID()
    let created = Int(time(nil))
    func chunk(_ choices: [JSON], usage: JSON? = nil) -> String {
        var members: [(String, JSON)] = [("id", .string("cmpl-fake-\(n)")), ("object", .string("text_completion")),
                                         ("created", .int(created)), ("model", .string(model)), ("choices", .array(choices))]
        if let usage { members.append(("usage", usage)) }
        return "data: " + JSON.object(members).encoded() + "\n\n"
    }
    func choice(_ text: String, finish: JSON = .null) -> JSON {
        .object([("text", .string(text)), ("index", .int(0)), ("logprobs", .null), ("finish_reason", finish)])
    }
    guard script.streams(body) else {
        let completion = JSON.object([("id", .string("cmpl-fake-\(n)")), ("object", .string("text_completion")), ("created", .int(created)),
                                      ("model", .string(model)), ("choices", .array([choice(pieces.joined(), finish: .string(script.finishReason))]))])
        return sendJSON(connection, status: 200, body: completion.encoded(), keepAlive: keepAlive)
    }
    guard connection.send(eventStreamHead(keepAlive: keepAlive, requestID: n)) else { return false }
    var writer = ChunkedWriter(connection: connection, split: script.split, randomSeed: script.seed ?? UInt64(n))
    let errorEvent = "data: " + JSON.object([("error", .object([
        ("message", .string("fake mid-stream error")), ("type", .string("server_error")), ("code", .string("fake_mid_stream")),
    ]))]).encoded() + "\n\n"
    guard let completed = streamPieces(pieces, script: script, writer: &writer, connection: connection,
                                       event: { chunk([choice($0)]) }, errorEvent: errorEvent) else { return false }
    guard completed else { return false }
    if !script.noFinish {
        guard writer.write(chunk([choice("", finish: .string(script.finishReason))])) else { return false }
    }
    if body["stream_options"]?["include_usage"]?.boolValue == true && !script.noUsage {
        let usage = JSON.object([("prompt_tokens", .int(promptTokens)), ("completion_tokens", .int(pieces.count)),
                                 ("total_tokens", .int(promptTokens + pieces.count))])
        guard writer.write(chunk([], usage: usage)) else { return false }
    }
    if !script.noDone {
        guard writer.write("data: [DONE]\n\n") else { return false }
    }
    return writer.finish() && keepAlive
}

// MARK: - Anthropic Messages

func anthropicMessages(_ request: Request, body: JSON?, connection: Connection, shared: Shared, keepAlive: Bool) -> Bool {
    guard let body, body.isObject else {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: "invalid JSON body"),
                        keepAlive: keepAlive)
    }
    guard let messageList = body["messages"]?.arrayValue else {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: "messages: Field required"),
                        keepAlive: keepAlive)
    }
    guard case .number? = body["max_tokens"] else {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: "max_tokens: Field required"),
                        keepAlive: keepAlive)
    }
    let messages = messageList.map { (role: $0["role"]?.stringValue ?? "", text: contentText($0["content"])) }
    // A user turn that hands back tool results is not where the directives are: they are in the
    // question that led to the calls.
    let lastUser = messageList.last(where: { $0["role"]?.stringValue == "user" && !holdsToolResults($0) })
        .map { contentText($0["content"]) } ?? ""
    let (remaining, directives) = extractDirectives(lastUser)
    var script = Script(directives: directives, defaultDelayMs: shared.config.defaultDelayMs)
    let model = body["model"]?.stringValue ?? "fake-model"
    if let ms = script.slowHeadersMs { sleepMilliseconds(ms) }
    if model.hasPrefix("missing") {
        return sendJSON(connection, status: 404, body: anthropicErrorBody(type: "not_found_error", message: "model: \(model)"),
                        keepAlive: keepAlive)
    }
    if let problem = anthropicToolProblem(messageList) {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: problem),
                        keepAlive: keepAlive)
    }
    if let refusal = anthropicReasoningRefusal(messageList, script: script) {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: refusal),
                        keepAlive: keepAlive)
    }
    if script.refuseImages, holdsImage(messageList) {
        return sendJSON(connection, status: 400, body: anthropicErrorBody(type: "invalid_request_error", message: imageRefusalMessage),
                        keepAlive: keepAlive)
    }
    if let status = scriptedFailure(script, key: lastUser, shared: shared) {
        var extra: [(String, String)] = []
        if status == 429 && !script.noRetryAfter { extra.append(("retry-after", "1")) }
        let message = status == 529 ? "Overloaded" : "fake upstream error \(status)"
        return sendJSON(connection, status: status, body: anthropicErrorBody(type: anthropicErrorType(status), message: message),
                        extraHeaders: extra, keepAlive: keepAlive)
    }
    if script.emptyStream, script.streams(body) { return sendEmptyEventStream(connection, keepAlive: keepAlive, split: script.split) }
    let system = body["system"]?.stringValue ?? contentText(body["system"])
    let roles = (system.isEmpty ? [] : ["system"]) + messages.map(\.role)
    let texts = (system.isEmpty ? [] : [system]) + messages.map(\.text)
    let context = "context: " + roles.joined(separator: " ") + " | " + texts.joined(separator: " / ")
    var inputTokens = (messages.map(\.text) + [system]).reduce(0) { $0 + $1.split(whereSeparator: { $0.isWhitespace }).count }
    // Breakpoints in the body: billed as the cache would ([[cached:N]] and [[cache-write:N]] win).
    if script.cached == nil, script.cacheWrite == nil,
       let billed = shared.promptCache.bill(PromptCache.blocks(of: body), now: monotonicSeconds()) {
        inputTokens = billed.read + billed.written + billed.uncached
        script.cached = billed.read
        script.cacheWrite = billed.written
    }
    let n = shared.nextID()
    // A request that ends with tool results gets them back as text, unless [[tool-loop]] asks
    // for the calls again.
    let toolResults = trailingAnthropicToolResults(messageList)
    let toolCalls = (toolResults == nil || script.toolLoop) && !script.thinkOnly ? script.toolCalls : []
    if !toolCalls.isEmpty {
        return anthropicToolUse(toolCalls, script: script, body: body, model: model, requestID: n, inputTokens: inputTokens,
                                connection: connection, keepAlive: keepAlive)
    }
    let text = script.thinkOnly ? "" : toolResults.map(toolResultsText) ?? replyText(script, remaining: remaining, context: context)
    let pieces = splitIntoPieces(text, size: script.chunk)
    let stopReason = script.thinkOnly && !script.finishGiven ? "max_tokens" : script.finishReason == "stop" ? "end_turn" : script.finishReason
    let thinking = anthropicThinkingEvents(script: script, from: 0)
    let outputTokens = pieces.count + script.reasoningPieces.count
    let textIndex = thinking.blocks.count
    guard script.streams(body) else {
        let message = JSON.object([
            ("id", .string("msg_fake_\(n)")), ("type", .string("message")), ("role", .string("assistant")), ("model", .string(model)),
            ("content", .array(thinking.blocks + (script.thinkOnly ? [] : [.object([("type", .string("text")), ("text", .string(pieces.joined()))])]))),
            ("stop_reason", .string(stopReason)), ("stop_sequence", .null),
            ("usage", .object(anthropicUsage(inputTokens: inputTokens, script: script) + [("output_tokens", .int(outputTokens))])),
        ])
        return sendJSON(connection, status: 200, body: message.encoded(), keepAlive: keepAlive)
    }
    let event = anthropicEvent
    guard connection.send(eventStreamHead(keepAlive: keepAlive, requestID: n)) else { return false }
    var writer = ChunkedWriter(connection: connection, split: script.split, randomSeed: script.seed ?? UInt64(n))
    guard writer.write(event("message_start", anthropicStart(requestID: n, model: model, inputTokens: inputTokens, script: script))) else { return false }
    for (position, thought) in thinking.events.enumerated() {
        if position > 1 { sleepMilliseconds(script.thinkPauseMs) }
        guard writer.write(thought) else { return false }
    }
    if !script.thinkOnly {
        guard writer.write(event("content_block_start", [("index", .int(textIndex)), ("content_block", .object([("type", .string("text")), ("text", .string(""))]))])),
              writer.write(event("ping", []))
        else { return false }
        let errorEvent = event("error", [("error", .object([("type", .string("overloaded_error")), ("message", .string("fake mid-stream error"))]))])
        guard let completed = streamPieces(pieces, script: script, writer: &writer, connection: connection, event: { text in
            event("content_block_delta", [("index", .int(textIndex)), ("delta", .object([("type", .string("text_delta")), ("text", .string(text))]))])
        }, errorEvent: errorEvent) else { return false }
        guard completed else { return false }
        guard writer.write(event("content_block_stop", [("index", .int(textIndex))])) else { return false }
    }
    if !script.noFinish {
        let usage: [(String, JSON)] = script.noUsage ? [] : [("usage", .object([("output_tokens", .int(outputTokens))]))]
        guard writer.write(event("message_delta", [("delta", .object([("stop_reason", .string(stopReason)), ("stop_sequence", .null)]))] + usage))
        else { return false }
    }
    if !script.noDone {
        guard writer.write(event("message_stop", [])) else { return false }
    }
    return writer.finish() && keepAlive
}

/// `message_start`'s event for a streamed message.
private func anthropicStart(requestID n: Int, model: String, inputTokens: Int, script: Script) -> [(String, JSON)] {
    [("message", .object([
        ("id", .string("msg_fake_\(n)")), ("type", .string("message")), ("role", .string("assistant")), ("content", .array([])),
        ("model", .string(model)), ("stop_reason", .null), ("stop_sequence", .null),
        ("usage", .object(anthropicUsage(inputTokens: inputTokens, script: script) + [("output_tokens", .int(1))])),
    ]))]
}

private func anthropicEvent(_ type: String, _ members: [(String, JSON)]) -> String {
    "event: \(type)\ndata: " + JSON.object([("type", .string(type))] + members).encoded() + "\n\n"
}

/// A reply that asks for tool calls: `[[tool-text]]` as a text block, then one `tool_use` block
/// per call, its `input` streamed as `input_json_delta` pieces of random length (seeded), and
/// `stop_reason` `tool_use`. Streamed, every event after `message_start` up to the last block's
/// `content_block_stop` counts as a piece for `drop`, `stall` and `error-mid`.
private func anthropicToolUse(_ calls: [ScriptedToolCall], script: Script, body: JSON, model: String, requestID n: Int,
                              inputTokens: Int, connection: Connection, keepAlive: Bool) -> Bool {
    let ids = calls.indices.map { "toolu_fake_\(n)_\($0)" }
    let stopReason = script.finishGiven ? (script.finishReason == "stop" ? "end_turn" : script.finishReason) : "tool_use"
    var random = SeededRandom(seed: script.seed ?? UInt64(n))
    let textPieces = script.toolText.map { splitIntoPieces($0, size: script.chunk) }
    let arguments = calls.map { argumentPieces($0.arguments, random: &random) }
    let outputTokens = (textPieces?.count ?? 0) + arguments.reduce(0) { $0 + $1.count } + script.reasoningPieces.count
    let thinking = anthropicThinkingEvents(script: script, from: 0)
    guard script.streams(body) else {
        var content: [JSON] = thinking.blocks
        if let text = script.toolText { content.append(.object([("type", .string("text")), ("text", .string(text))])) }
        for k in calls.indices {
            content.append(.object([("type", .string("tool_use")), ("id", .string(ids[k])), ("name", .string(calls[k].name)),
                                    ("input", anthropicToolInput(calls[k].arguments))]))
        }
        let message = JSON.object([
            ("id", .string("msg_fake_\(n)")), ("type", .string("message")), ("role", .string("assistant")), ("model", .string(model)),
            ("content", .array(content)), ("stop_reason", .string(stopReason)), ("stop_sequence", .null),
            ("usage", .object(anthropicUsage(inputTokens: inputTokens, script: script) + [("output_tokens", .int(outputTokens))])),
        ])
        return sendJSON(connection, status: 200, body: message.encoded(), keepAlive: keepAlive)
    }
    var events: [String] = thinking.events
    var index = thinking.blocks.count
    func block(_ start: JSON, deltas: [JSON]) {
        events.append(anthropicEvent("content_block_start", [("index", .int(index)), ("content_block", start)]))
        if index == 0 { events.append(anthropicEvent("ping", [])) }
        for delta in deltas {
            events.append(anthropicEvent("content_block_delta", [("index", .int(index)), ("delta", delta)]))
        }
        events.append(anthropicEvent("content_block_stop", [("index", .int(index))]))
        index += 1
    }
    if let textPieces {
        block(.object([("type", .string("text")), ("text", .string(""))]),
              deltas: textPieces.map { .object([("type", .string("text_delta")), ("text", .string($0))]) })
    }
    for k in calls.indices {
        block(.object([("type", .string("tool_use")), ("id", .string(ids[k])), ("name", .string(calls[k].name)), ("input", .object([]))]),
              deltas: arguments[k].map { .object([("type", .string("input_json_delta")), ("partial_json", .string($0))]) })
    }
    guard connection.send(eventStreamHead(keepAlive: keepAlive, requestID: n)) else { return false }
    var writer = ChunkedWriter(connection: connection, split: script.split, randomSeed: script.seed ?? UInt64(n))
    guard writer.write(anthropicEvent("message_start", anthropicStart(requestID: n, model: model, inputTokens: inputTokens, script: script)))
    else { return false }
    let errorEvent = anthropicEvent("error", [("error", .object([("type", .string("overloaded_error")),
                                                                 ("message", .string("fake mid-stream error"))]))])
    guard let completed = streamPieces(events, script: script, writer: &writer, connection: connection, event: { $0 },
                                       errorEvent: errorEvent) else { return false }
    guard completed else { return false }
    if !script.noFinish {
        let usage: [(String, JSON)] = script.noUsage ? [] : [("usage", .object([("output_tokens", .int(outputTokens))]))]
        guard writer.write(anthropicEvent("message_delta", [("delta", .object([("stop_reason", .string(stopReason)),
                                                                                ("stop_sequence", .null)]))] + usage))
        else { return false }
    }
    if !script.noDone {
        guard writer.write(anthropicEvent("message_stop", [])) else { return false }
    }
    return writer.finish() && keepAlive
}
