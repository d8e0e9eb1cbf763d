import Foundation

// OpenAI's Responses API (`POST …/responses`): the same directives as chat completions where
// they apply (text, words, chunk, delay, status, fail-first, drop, error-mid, tool, tool-text,
// tool-loop, no-usage, finish), the reasoning directives `think`, `think-words` and `think-only`
// as a reasoning item with a streamed summary, and the pass-back rule of a client that keeps
// its own history (`store: false`): a reasoning item comes back whole, right before the
// function calls it led to. See docs/fake-upstream.md, "The Responses API".

/// What the reasoning directives ask of a Responses reply.
private struct ResponsesThinking {
    var text: String?
    var only = false

    init(_ directives: [(name: String, value: String?)]) {
        for (name, value) in directives {
            switch name {
            case "think": text = value ?? ""
            case "think-words":
                if let n = value.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), n >= 1 {
                    text = (1...min(n, 1_000_000)).map { "t\($0)" }.joined(separator: " ")
                }
            case "think-only": only = true
            default: continue
            }
        }
        if only, text == nil { text = "t1 t2 t3" }
    }
}

private func responsesError(_ message: String, type: String = "invalid_request_error", param: String? = nil, code: String? = nil) -> String {
    JSON.object([("error", .object([("message", .string(message)), ("type", .string(type)),
                                    ("param", param.map(JSON.string) ?? .null), ("code", code.map(JSON.string) ?? .null)]))]).encoded()
}

/// The first break of the pass-back rule in `input`, in the real server's words: a reasoning
/// item not followed by the item it led to, or a function call the fake made after thinking
/// (`call_rs_N_K`) sent back without that reasoning item (`rs_fake_N`, unmodified) before it.
private func responsesPassBackProblem(_ items: [JSON]) -> String? {
    for (index, item) in items.enumerated() {
        switch item["type"]?.stringValue {
        case "reasoning":
            let id = item["id"]?.stringValue ?? ""
            let next = index + 1 < items.count ? items[index + 1] : nil
            let follows = next?["type"]?.stringValue == "function_call" || next?["type"]?.stringValue == "reasoning"
                || (next?["role"]?.stringValue == "assistant")
            if !follows { return "Item '\(id)' of type 'reasoning' was provided without its required following item." }
            if let n = id.split(separator: "_").last, id.hasPrefix("rs_fake_"), item["encrypted_content"]?.stringValue != "enc:fake:\(n)" {
                return "The encrypted content for item \(id) could not be verified."
            }
        case "function_call":
            let callID = item["call_id"]?.stringValue ?? ""
            guard callID.hasPrefix("call_rs_") else { continue }
            let n = callID.dropFirst("call_rs_".count).split(separator: "_").first.map(String.init) ?? ""
            // The items of the same turn before this call: back to the last user message or output.
            var k = index - 1
            var found = false
            while k >= 0 {
                let type = items[k]["type"]?.stringValue
                if type == "reasoning" {
                    if items[k]["id"]?.stringValue == "rs_fake_\(n)" { found = true }
                } else if type != "function_call" && items[k]["role"]?.stringValue != "assistant" {
                    break
                }
                k -= 1
            }
            if !found {
                return "Item with call_id '\(callID)' of type 'function_call' was provided without its required 'reasoning' item: 'rs_fake_\(n)'."
            }
        default:
            continue
        }
    }
    return nil
}

/// The text of a user message item: a string, or its `input_text` parts.
private func inputText(_ item: JSON) -> String {
    contentText(item["content"])
}

func responsesAPI(_ request: Request, body: JSON?, connection: Connection, shared: Shared, keepAlive: Bool) -> Bool {
    guard let body, body.isObject else {
        return sendJSON(connection, status: 400, body: responsesError("We could not parse the JSON body of your request."), keepAlive: keepAlive)
    }
    let items: [JSON]
    switch body["input"] {
    case .string(let text)?: items = [.object([("role", .string("user")), ("content", .string(text))])]
    case .array(let list)?: items = list
    default:
        return sendJSON(connection, status: 400, body: responsesError("Missing required parameter: 'input'.", param: "input",
                                                                      code: "missing_required_parameter"), keepAlive: keepAlive)
    }
    if body["max_tokens"] != nil {
        return sendJSON(connection, status: 400, body: responsesError("Unsupported parameter: 'max_tokens'. In the Responses API, this parameter has moved to 'max_output_tokens'.",
                                                                      param: "max_tokens", code: "unsupported_parameter"), keepAlive: keepAlive)
    }
    if let problem = responsesPassBackProblem(items) {
        return sendJSON(connection, status: 400, body: responsesError(problem, param: "input"), keepAlive: keepAlive)
    }
    let lastUser = items.last(where: { $0["role"]?.stringValue == "user" }).map(inputText) ?? ""
    let (remaining, directives) = extractDirectives(lastUser)
    let script = Script(directives: directives, defaultDelayMs: shared.config.defaultDelayMs)
    let thinking = ResponsesThinking(directives)
    let model = body["model"]?.stringValue ?? "fake-model"
    if model.hasPrefix("missing") {
        return sendJSON(connection, status: 404, body: modelNotFoundBody(model), keepAlive: keepAlive)
    }
    if let failFirst = script.failFirst, shared.attempt(for: lastUser) <= failFirst {
        return sendJSON(connection, status: script.status ?? 503, body: responsesError("fake upstream error \(script.status ?? 503)", type: "server_error"),
                        keepAlive: keepAlive)
    } else if script.failFirst == nil, let status = script.status {
        var extra: [(String, String)] = []
        if status == 429 && !script.noRetryAfter { extra.append(("retry-after", "1")) }
        return sendJSON(connection, status: status, body: responsesError("fake upstream error \(status)", type: "server_error"),
                        extraHeaders: extra, keepAlive: keepAlive)
    }
    let instructions = body["instructions"]?.stringValue ?? ""
    let texts = (instructions.isEmpty ? [] : [instructions]) + items.compactMap { $0["role"]?.stringValue == nil ? nil : inputText($0) }
    let context = "context: " + texts.joined(separator: " / ")
    let inputTokens = texts.reduce(0) { $0 + $1.split(whereSeparator: { $0.isWhitespace }).count }
    let n = shared.nextID()

    // A request that ends with function call outputs gets them back as text, unless [[tool-loop]]
    // asks for the calls again.
    var callNames: [String: String] = [:]
    for item in items where item["type"]?.stringValue == "function_call" {
        if let id = item["call_id"]?.stringValue { callNames[id] = item["name"]?.stringValue }
    }
    let trailing = items.reversed().prefix { $0["type"]?.stringValue == "function_call_output" }.reversed()
    let results: [ToolResult]? = trailing.isEmpty ? nil : trailing.map { item in
        let id = item["call_id"]?.stringValue ?? ""
        return ToolResult(label: callNames[id] ?? id, content: item["output"]?.stringValue ?? contentText(item["output"]))
    }
    let calls = results == nil || script.toolLoop ? script.toolCalls : []
    let thought = thinking.text.map { splitIntoPieces($0, size: script.chunk) } ?? []
    let text: String? = thinking.only ? nil
        : (calls.isEmpty ? (results.map(toolResultsText) ?? replyTextForResponses(script, remaining: remaining, context: context)) : script.toolText)
    let textPieces = text.map { splitIntoPieces($0, size: script.chunk) } ?? []
    var random = SeededRandom(seed: script.seed ?? UInt64(n))
    let callIDs = calls.indices.map { thought.isEmpty ? "call_fake_\(n)_\($0)" : "call_rs_\(n)_\($0)" }
    let argumentLists = calls.map { argumentPieces($0.arguments, random: &random) }
    let outputTokens = thought.count + textPieces.count + argumentLists.reduce(0) { $0 + $1.count }

    // The output items, whole, as `response.output_item.done` and a whole response carry them.
    var output: [JSON] = []
    let reasoningItem = JSON.object([
        ("id", .string("rs_fake_\(n)")), ("type", .string("reasoning")),
        ("summary", .array([.object([("type", .string("summary_text")), ("text", .string(thought.joined()))])])),
        ("encrypted_content", .string("enc:fake:\(n)")),
    ])
    if !thought.isEmpty { output.append(reasoningItem) }
    let messageItem = JSON.object([
        ("id", .string("msg_fake_\(n)")), ("type", .string("message")), ("status", .string("completed")), ("role", .string("assistant")),
        ("content", .array([.object([("type", .string("output_text")), ("text", .string(textPieces.joined())), ("annotations", .array([]))])])),
    ])
    if text != nil { output.append(messageItem) }
    let callItems = calls.indices.map { k in
        JSON.object([("id", .string("fc_fake_\(n)_\(k)")), ("type", .string("function_call")), ("status", .string("completed")),
                     ("call_id", .string(callIDs[k])), ("name", .string(calls[k].name)), ("arguments", .string(calls[k].arguments))])
    }
    output += callItems
    let incomplete = thinking.only || script.finishReason == "length"
    let usage = JSON.object([
        ("input_tokens", .int(inputTokens)), ("input_tokens_details", .object([("cached_tokens", .int(0))])),
        ("output_tokens", .int(outputTokens)), ("output_tokens_details", .object([("reasoning_tokens", .int(thought.count))])),
        ("total_tokens", .int(inputTokens + outputTokens)),
    ])
    func response(status: String, output: [JSON]) -> JSON {
        var members: [(String, JSON)] = [("id", .string("resp_fake_\(n)")), ("object", .string("response")), ("status", .string(status)),
                                         ("model", .string(model)), ("output", .array(output))]
        if status == "incomplete" { members.append(("incomplete_details", .object([("reason", .string("max_output_tokens"))]))) }
        if status != "in_progress" && !script.noUsage { members.append(("usage", usage)) }
        return .object(members)
    }
    guard body["stream"]?.boolValue == true, !script.jsonBody else {
        return sendJSON(connection, status: 200, body: response(status: incomplete ? "incomplete" : "completed", output: output).encoded(),
                        keepAlive: keepAlive)
    }

    var sequence = 0
    func event(_ type: String, _ members: [(String, JSON)]) -> String {
        sequence += 1
        return "event: \(type)\ndata: " + JSON.object([("type", .string(type))] + members + [("sequence_number", .int(sequence))]).encoded() + "\n\n"
    }
    // Every event after `response.created` counts as a piece for `drop` and `error-mid`.
    var events: [String] = []
    var index = 0
    if !thought.isEmpty {
        events.append(event("response.output_item.added", [("output_index", .int(index)), ("item", .object([
            ("id", .string("rs_fake_\(n)")), ("type", .string("reasoning")), ("summary", .array([]))]))]))
        let part: [(String, JSON)] = [("item_id", .string("rs_fake_\(n)")), ("output_index", .int(index)), ("summary_index", .int(0))]
        events.append(event("response.reasoning_summary_part.added", part + [("part", .object([("type", .string("summary_text")), ("text", .string(""))]))]))
        for piece in thought { events.append(event("response.reasoning_summary_text.delta", part + [("delta", .string(piece))])) }
        events.append(event("response.reasoning_summary_text.done", part + [("text", .string(thought.joined()))]))
        events.append(event("response.output_item.done", [("output_index", .int(index)), ("item", reasoningItem)]))
        index += 1
    }
    if text != nil {
        let item: [(String, JSON)] = [("item_id", .string("msg_fake_\(n)")), ("output_index", .int(index)), ("content_index", .int(0))]
        events.append(event("response.output_item.added", [("output_index", .int(index)), ("item", .object([
            ("id", .string("msg_fake_\(n)")), ("type", .string("message")), ("status", .string("in_progress")), ("role", .string("assistant")),
            ("content", .array([]))]))]))
        for piece in textPieces { events.append(event("response.output_text.delta", item + [("delta", .string(piece))])) }
        events.append(event("response.output_text.done", item + [("text", .string(textPieces.joined()))]))
        events.append(event("response.output_item.done", [("output_index", .int(index)), ("item", messageItem)]))
        index += 1
    }
    for k in calls.indices {
        let id = "fc_fake_\(n)_\(k)"
        events.append(event("response.output_item.added", [("output_index", .int(index)), ("item", .object([
            ("id", .string(id)), ("type", .string("function_call")), ("status", .string("in_progress")), ("call_id", .string(callIDs[k])),
            ("name", .string(calls[k].name)), ("arguments", .string(""))]))]))
        for piece in argumentLists[k] {
            events.append(event("response.function_call_arguments.delta", [("item_id", .string(id)), ("output_index", .int(index)), ("delta", .string(piece))]))
        }
        events.append(event("response.function_call_arguments.done", [("item_id", .string(id)), ("output_index", .int(index)),
                                                                      ("arguments", .string(calls[k].arguments))]))
        events.append(event("response.output_item.done", [("output_index", .int(index)), ("item", callItems[k])]))
        index += 1
    }

    guard connection.send(responseHead(status: 200, headers: [
        ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked"),
        ("Connection", keepAlive ? "keep-alive" : "close"), ("x-request-id", "fake-\(n)"),
    ])) else { return false }
    var writer = ChunkedWriter(connection: connection, split: script.split, randomSeed: script.seed ?? UInt64(n))
    guard writer.write(event("response.created", [("response", response(status: "in_progress", output: []))])) else { return false }
    for (position, text) in events.enumerated() {
        if script.drop == position {
            _ = writer.flush()
            return false
        }
        if script.errorMid == position {
            _ = writer.write(event("error", [("code", .string("server_error")), ("message", .string("fake mid-stream error")), ("param", .null)]))
            _ = writer.finish()
            return false
        }
        if position > 0 { sleepMilliseconds(script.delayMs) }
        guard writer.write(text) else { return false }
    }
    if !script.noFinish {
        let status = incomplete ? "incomplete" : "completed"
        guard writer.write(event("response.\(status)", [("response", response(status: status, output: output))])) else { return false }
    }
    return writer.finish() && keepAlive
}

private func replyTextForResponses(_ script: Script, remaining: String, context: String) -> String {
    if let reply = script.reply { return reply }
    if let words = script.words { return words == 0 ? "" : (1...words).map { "w\($0)" }.joined(separator: " ") }
    if script.context { return context }
    return "You said: " + remaining.trimmingCharacters(in: .whitespacesAndNewlines)
}
