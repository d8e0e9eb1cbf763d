import Foundation
import Glibc

// MARK: Directives

/// Scripted behaviour parsed from the `[[name]]` / `[[name:value]]` directives of the last user message.
struct Script {
    var reply: String?
    var words: Int?
    var context = false
    var chunk = 3
    var delayMs: Int
    var status: Int?
    var failFirst: Int?
    var noRetryAfter = false
    /// `[[retry-after:TEXT]]`: the `Retry-After` value sent with a `status` answer.
    var retryAfter: String?
    var drop: Int?
    var stall: Int?
    /// `[[hold:N NAME]]`: after N content pieces, wait until `POST …/release/NAME`.
    var hold: (after: Int, name: String)?
    var errorMid: Int?
    var badChunk: Int?
    var garbage = false
    var noDone = false
    var noUsage = false
    var noFinish = false
    var finishReason = "stop"
    var eol = "\n"
    var split: Int?
    /// Seeds the random split of the completions and messages endpoints.
    var seed: UInt64?
    var slowHeadersMs: Int?
    var burst: Int?
    /// `[[burst-thinking]]`: a burst's pieces are reasoning (`delta.reasoning_content`), not text,
    /// for measuring how a thought fans out beside text.
    var burstThinking = false
    var stamp = false
    var delayMicroseconds: Int?
    var endDelayMs: Int?
    /// `[[finish:…]]` was given: it then also wins over a tool-call reply's `tool_calls`/`tool_use`.
    var finishGiven = false
    /// `[[tool:NAME ARGS]]`, every one in order: the reply asks for these calls.
    var toolCalls: [ScriptedToolCall] = []
    /// `[[tool-id:ID]]`, every one in order: the k-th gives the k-th call its id (chat only).
    var toolIDs: [String] = []
    /// `[[tool-text:…]]`: text streamed before the calls.
    var toolText: String?
    /// `[[tool-style:llamacpp]]`: every argument piece repeats the call's id, type and name.
    var toolStyleLlamacpp = false
    /// `[[tool-style:parallel-chunk]]`: all calls opened in one chunk, their pieces interleaved.
    var toolStyleParallel = false
    /// `[[tool-loop]]`: ask for the calls again even when the request ends with their results.
    var toolLoop = false
    /// `[[strict-content]]`: the forms of an assistant turn's `content` refused with a 500.
    var strictContent: Set<ContentForm> = []
    /// `[[refuse-images]]`: a request holding any image is refused with a 400.
    var refuseImages = false
    /// `[[refuse-images:empty]]`: refused with a 200 and an empty event stream instead (llama-cpp-python).
    var refuseImagesEmpty = false
    /// `[[json-body]]`: a streamed request is answered as one that is not streamed.
    var jsonBody = false
    /// `[[empty-stream]]`: a 200 event stream with no event at all.
    var emptyStream = false
    /// `[[validation-error]]`: a scripted failure's message is a many-line validation error.
    var validationError = false
    /// `[[error-lines:N]]`: a `status` answer's error message is N long lines, as a validating server writes them.
    var errorLines: Int?
    /// `[[think:TEXT]]` (or `[[think-words:N]]`): the reply first streams this as reasoning.
    var think: String?
    /// `[[think-delay:MS]]`: between reasoning pieces (default: `delayMs`).
    var thinkDelayMs: Int?
    /// `[[think-style:S]]`: how a chat stream carries the reasoning.
    var thinkStyle = ThinkStyle.deepseek
    /// `[[think-again:TEXT]]` (chat completions, streamed): TEXT as one more piece of reasoning
    /// halfway through the text, as a model that thinks again after its answer began.
    var thinkAgain: String?
    /// `[[think-only]]`: reasoning, then no answer: the token limit is spent.
    var thinkOnly = false
    /// `[[think-redacted]]` (Anthropic): a `redacted_thinking` block after the thinking one.
    var thinkRedacted = false
    /// `[[cached:N]]`: N of the prompt tokens reported read from the prompt cache.
    var cached: Int?
    /// `[[cache-write:N]]` (Anthropic): N of the prompt tokens reported written to the cache.
    var cacheWrite: Int?

    /// Whether the answer is an event stream: asked for, and not `[[json-body]]`.
    func streams(_ body: JSON) -> Bool { body["stream"]?.boolValue == true && !jsonBody }

    init(directives: [(name: String, value: String?)], defaultDelayMs: Int) {
        delayMs = defaultDelayMs
        for (name, value) in directives {
            let number = value.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            switch name {
            case "reply": if let value { reply = value }
            case "words": if let n = number, n >= 0 { words = min(n, 1_000_000) }
            case "chunk": if let n = number, n >= 1 { chunk = n }
            case "delay": if let n = number, n >= 0 { delayMs = min(n, 600_000) }
            case "context": context = true
            case "status": if let n = number, (400...599).contains(n) { status = n }
            case "no-retry-after": noRetryAfter = true
            case "retry-after": if let value, !value.isEmpty { retryAfter = value }
            case "fail-first": if let n = number, n >= 0 { failFirst = n }
            case "drop": if let n = number, n >= 0 { drop = n }
            case "stall": if let n = number, n >= 0 { stall = n }
            case "hold":
                let words = (value ?? "").split(separator: " ", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if words.count == 2, let n = Int(words[0]), n >= 0, !words[1].isEmpty { hold = (n, words[1]) }
            case "error-mid": if let n = number, n >= 0 { errorMid = n }
            case "bad-chunk": if let n = number, n >= 0 { badChunk = n }
            case "garbage": garbage = true
            case "no-done": noDone = true
            case "no-usage": noUsage = true
            case "no-finish": noFinish = true
            case "finish": if let value, !value.isEmpty { finishReason = value; finishGiven = true }
            case "crlf": eol = "\r\n"
            case "cr": eol = "\r"
            case "split": if let n = number, n >= 1 { split = n }
            case "seed": if let value, let n = UInt64(value.trimmingCharacters(in: .whitespaces)) { seed = n }
            case "slow-headers": if let n = number, n >= 0 { slowHeadersMs = min(n, 600_000) }
            case "burst": if let n = number, n >= 0 { burst = min(n, 10_000_000) }
            case "stamp": stamp = true
            case "burst-thinking": burstThinking = true
            case "delay-us": if let n = number, n >= 0 { delayMicroseconds = min(n, 600_000_000) }
            case "end-delay": if let n = number, n >= 0 { endDelayMs = min(n, 600_000) }
            case "tool": if let value, let call = ScriptedToolCall(directive: value) { toolCalls.append(call) }
            case "tool-text": if let value { toolText = value }
            case "tool-id": if let value { toolIDs.append(value) }
            case "tool-style":
                // Styles may be combined: [[tool-style:llamacpp,parallel-chunk]].
                toolStyleLlamacpp = false
                toolStyleParallel = false
                for style in (value ?? "").lowercased().split(separator: ",") {
                    switch style.trimmingCharacters(in: .whitespaces) {
                    case "llamacpp": toolStyleLlamacpp = true
                    case "parallel-chunk": toolStyleParallel = true
                    default: break
                    }
                }
            case "tool-loop": toolLoop = true
            case "strict-content": strictContent = strictContentForms(value)
            case "json-body": jsonBody = true
            case "refuse-images":
                refuseImages = true
                refuseImagesEmpty = value?.trimmingCharacters(in: .whitespaces) == "empty"
            case "empty-stream": emptyStream = true
            case "validation-error": validationError = true
            case "error-lines": if let n = number, n >= 1 { errorLines = min(n, 1000) }
            case "think": if let value { think = value }
            case "think-words": if let n = number, n >= 1 { think = (1...min(n, 1_000_000)).map { "t\($0)" }.joined(separator: " ") }
            case "think-delay": if let n = number, n >= 0 { thinkDelayMs = min(n, 600_000) }
            case "think-style": if let style = value.flatMap({ ThinkStyle(rawValue: $0.trimmingCharacters(in: .whitespaces).lowercased()) }) { thinkStyle = style }
            case "think-only": thinkOnly = true
            case "think-again": if let value { thinkAgain = value }
            case "think-redacted": thinkRedacted = true
            case "cached": if let n = number, n >= 0 { cached = n }
            case "cache-write": if let n = number, n >= 0 { cacheWrite = n }
            default: break  // unknown directives are ignored (but still removed from the text)
            }
        }
        // Thinking with no thought given thinks a little.
        if thinkOnly && think == nil { think = "t1 t2 t3" }
        // A burst is as fast as possible unless a delay is asked for.
        if burst != nil && !directives.contains(where: { $0.name == "delay" }) { delayMs = 0 }
    }
}

/// Finds `[[name]]` and `[[name:value]]` (name: letters, digits, '-', '_'; value: anything up to
/// the first `]]`), returning the text with them removed and the directives in order.
func extractDirectives(_ text: String) -> (remaining: String, directives: [(name: String, value: String?)]) {
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    var found: [(name: String, value: String?)] = []
    func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
    }
    let open = UInt8(ascii: "["), close = UInt8(ascii: "]"), colon = UInt8(ascii: ":")
    var i = 0
    scan: while i < bytes.count {
        if bytes[i] == open && i + 1 < bytes.count && bytes[i + 1] == open {
            var j = i + 2
            while j < bytes.count && isNameByte(bytes[j]) { j += 1 }
            if j > i + 2 && j < bytes.count {
                let name = String(decoding: bytes[(i + 2)..<j], as: UTF8.self).lowercased()
                if j + 1 < bytes.count && bytes[j] == close && bytes[j + 1] == close {
                    found.append((name, nil))
                    i = j + 2
                    continue scan
                }
                if bytes[j] == colon {
                    var k = j + 1
                    while k + 1 < bytes.count {
                        if bytes[k] == close && bytes[k + 1] == close {
                            found.append((name, String(decoding: bytes[(j + 1)..<k], as: UTF8.self)))
                            i = k + 2
                            continue scan
                        }
                        k += 1
                    }
                }
            }
        }
        out.append(bytes[i])
        i += 1
    }
    return (String(decoding: out, as: UTF8.self), found)
}

// MARK: Request handling

func serveConnection(fd: Int32, number: Int, shared: Shared) {
    defer { close(fd) }
    let connection = Connection(fd: fd, number: number)
    while true {
        switch connection.readRequest() {
        case .closed:
            return
        case .failure(let status, let message, let code, let head):
            if let head {
                shared.log(method: head.method, path: head.target, connection: number,
                           authorization: head.header("authorization") != nil, headers: head.headers, body: nil)
            }
            _ = sendJSON(connection, status: status,
                         body: errorBody(message: message, type: "invalid_request_error", code: code),
                         keepAlive: false)
            connection.lingeringClose()
            return
        case .request(let request):
            guard handle(request, connection: connection, shared: shared) else { return }
        }
    }
}

/// Sends a complete JSON response. Returns true if the connection may serve another request.
func sendJSON(_ connection: Connection, status: Int, body: String, extraHeaders: [(String, String)] = [],
              keepAlive: Bool, split: Int? = nil) -> Bool {
    let bodyBytes = Array(body.utf8)
    var headers: [(String, String)] = [
        ("Content-Type", "application/json"),
        ("Content-Length", String(bodyBytes.count)),
        ("Connection", keepAlive ? "keep-alive" : "close"),
    ]
    headers += extraHeaders
    let head = responseHead(status: status, headers: headers)
    if let split {
        guard connection.send(head), connection.sendSplit(bodyBytes, size: split) else { return false }
    } else {
        guard connection.send(Array(head.utf8) + bodyBytes) else { return false }
    }
    return keepAlive
}

/// The 401's message: with `--echo-key`, the key sent is quoted, as some servers do.
private func wrongKeyMessage(_ authorization: String?, _ config: Config) -> String {
    guard config.echoKey, let authorization else { return "Incorrect API key provided" }
    let sent = authorization.split(separator: " ", maxSplits: 1).last.map(String.init) ?? authorization
    return "Incorrect API key provided: \(sent). You can find your API key in your account settings."
}

private func isAuthorized(_ header: String?, key: String) -> Bool {
    guard let header else { return false }
    let parts = header.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
    return parts[1].trimmingCharacters(in: .whitespaces) == key
}

/// Returns true if the connection may serve another request.
func handle(_ request: Request, connection: Connection, shared: Shared) -> Bool {
    let authorization = request.header("authorization")
    let body: JSON? = request.body.isEmpty ? nil : try? JSON.parse(request.body)
    let path = request.path
    let tool = toolRoute(path)
    let rawBody = tool != nil && body == nil && !request.body.isEmpty ? String(decoding: request.body, as: UTF8.self) : nil
    shared.log(method: request.method, path: request.target, connection: connection.number,
               authorization: authorization != nil, headers: request.headers, body: body, rawBody: rawBody)
    let keepAlive = request.wantsKeepAlive

    // The tools a model asks for are another server: any method, no --api-key.
    if let tool { return serveTool(request, route: tool, body: body, connection: connection, keepAlive: keepAlive) }

    // A test's hand on held answers: no key, any prefix.
    if request.method == "POST", let range = path.range(of: "/release/", options: .backwards) {
        let name = String(path[range.upperBound...])
        shared.release(name)
        return sendJSON(connection, status: 200, body: JSON.object([("released", .string(name))]).encoded(), keepAlive: keepAlive)
    }
    if request.method == "GET" && path.hasSuffix("/holds") {
        let state = shared.holdState()
        let body = JSON.object([("holding", .array(state.holding.map(JSON.string))),
                                ("released", .array(state.released.map(JSON.string)))])
        return sendJSON(connection, status: 200, body: body.encoded(), keepAlive: keepAlive)
    }
    // The listing is asked for with either API's key header, so either one will do.
    if request.method == "GET" && path.hasSuffix("/models") {
        if let key = shared.config.apiKey, !isAuthorized(authorization, key: key), request.header("x-api-key") != key {
            return sendJSON(connection, status: 401,
                            body: errorBody(message: wrongKeyMessage(authorization, shared.config), type: "invalid_request_error", code: "invalid_api_key"),
                            keepAlive: keepAlive)
        }
        return modelListing(shared.config, connection: connection, keepAlive: keepAlive)
    }
    // Anthropic's API takes its key in x-api-key and answers in its own error shape.
    if request.method == "POST" && path.hasSuffix("/messages") {
        if let key = shared.config.apiKey, request.header("x-api-key") != key {
            return sendJSON(connection, status: 401, body: anthropicErrorBody(type: "authentication_error",
                                                                                      message: "invalid x-api-key" + (shared.config.echoKey ? ": " + (request.header("x-api-key") ?? "") : "")),
                            keepAlive: keepAlive)
        }
        return shared.answering {
            anthropicMessages(request, body: body, connection: connection, shared: shared, keepAlive: keepAlive)
        }
    }
    if let key = shared.config.apiKey, !isAuthorized(authorization, key: key) {
        return sendJSON(connection, status: 401,
                        body: errorBody(message: wrongKeyMessage(authorization, shared.config), type: "invalid_request_error",
                                        code: "invalid_api_key"),
                        keepAlive: keepAlive)
    }
    if request.method == "POST" && path.hasSuffix("/chat/completions") {
        return shared.answering {
            chatCompletions(request, body: body, connection: connection, shared: shared, keepAlive: keepAlive)
        }
    }
    if request.method == "POST" && path.hasSuffix("/responses") {
        return shared.answering {
            responsesAPI(request, body: body, connection: connection, shared: shared, keepAlive: keepAlive)
        }
    }
    if request.method == "POST" && path.hasSuffix("/completions") {
        return shared.answering {
            legacyCompletions(request, body: body, connection: connection, shared: shared, keepAlive: keepAlive)
        }
    }
    if request.method == "GET" && path.hasSuffix("/stats") {
        let counts = shared.counts()
        let stats = JSON.object([("connections", .int(counts.connections)), ("requests", .int(counts.requests)),
                                 ("answering", .int(counts.streams))])
        return sendJSON(connection, status: 200, body: stats.encoded(), keepAlive: keepAlive)
    }
    return sendJSON(connection, status: 404,
                    body: errorBody(message: "Invalid URL (\(request.method) \(path))", type: "invalid_request_error",
                                    code: "unknown_url"),
                    keepAlive: keepAlive)
}

/// `GET …/models`: `--models-file` when it exists (read now, so a test can change it between
/// requests), else the `--models` ids, in OpenAI's list shape.
private func modelListing(_ config: Config, connection: Connection, keepAlive: Bool) -> Bool {
    var ids = config.models
    if let path = config.modelsFile, let text = try? String(contentsOfFile: path, encoding: .utf8) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if let line = lines.first?.trimmingCharacters(in: .whitespaces), line.hasPrefix("delay "),
           let ms = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces)), ms >= 0 {
            sleepMilliseconds(min(ms, 600_000))
            lines.removeFirst()
        }
        let first = lines.first?.trimmingCharacters(in: .whitespaces) ?? ""
        if first == "raw" {
            return sendJSON(connection, status: 200, body: lines.dropFirst().joined(separator: "\n"), keepAlive: keepAlive)
        }
        if first.hasPrefix("status "), let status = Int(first.dropFirst(7).trimmingCharacters(in: .whitespaces)),
           (400...599).contains(status) {
            let (type, code) = statusError(status)
            return sendJSON(connection, status: status, body: errorBody(message: "listing refused (\(status))", type: type, code: code),
                            keepAlive: keepAlive)
        }
        lines = lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        ids = lines
    }
    let list = JSON.object([
        ("object", .string("list")),
        ("data", .array(ids.map { .object([("id", .string($0)), ("object", .string("model")), ("owned_by", .string("fake"))]) })),
    ])
    return sendJSON(connection, status: 200, body: list.encoded(), keepAlive: keepAlive)
}

/// The text of a message's content: a string, or the `text` of each part of an array, joined by spaces.
func contentText(_ content: JSON?) -> String {
    switch content {
    case .string(let s)?:
        return s
    case .array(let parts)?:
        return parts.compactMap { $0["text"]?.stringValue ?? $0.stringValue }.joined(separator: " ")
    default:
        return ""
    }
}

func splitIntoPieces(_ text: String, size: Int) -> [String] {
    var pieces: [String] = []
    var current = ""
    var count = 0
    for character in text {
        current.append(character)
        count += 1
        if count == size {
            pieces.append(current)
            current = ""
            count = 0
        }
    }
    if !current.isEmpty { pieces.append(current) }
    return pieces
}

func statusError(_ status: Int) -> (type: String, code: String) {
    switch status {
    case 401: ("invalid_request_error", "invalid_api_key")
    case 429: ("rate_limit_error", "rate_limit_exceeded")
    case 500...: ("server_error", "fake_status_\(status)")
    default: ("invalid_request_error", "fake_status_\(status)")
    }
}

private func chatCompletions(_ request: Request, body: JSON?, connection: Connection, shared: Shared,
                             keepAlive: Bool) -> Bool {
    guard let body, body.isObject else {
        return sendJSON(connection, status: 400,
                        body: errorBody(message: "We could not parse the JSON body of your request.",
                                        type: "invalid_request_error", code: "invalid_json"),
                        keepAlive: keepAlive)
    }
    guard let messageList = body["messages"]?.arrayValue else {
        return sendJSON(connection, status: 400,
                        body: errorBody(message: "Missing required parameter: 'messages'.",
                                        type: "invalid_request_error", code: "missing_required_parameter"),
                        keepAlive: keepAlive)
    }
    let messages = messageList.map { (role: $0["role"]?.stringValue ?? "", text: contentText($0["content"])) }
    let lastUser = messages.last(where: { $0.role == "user" })?.text ?? ""
    let (remaining, directives) = extractDirectives(lastUser)
    let script = Script(directives: directives, defaultDelayMs: shared.config.defaultDelayMs)
    let model = body["model"]?.stringValue ?? "fake-model"
    let stream = script.streams(body)
    let includeUsage = body["stream_options"]?["include_usage"]?.boolValue == true

    if let ms = script.slowHeadersMs { sleepMilliseconds(ms) }
    if model.hasPrefix("missing") { return sendJSON(connection, status: 404, body: modelNotFoundBody(model), keepAlive: keepAlive) }
    if let problem = chatToolProblem(messageList) {
        return sendJSON(connection, status: 400,
                        body: errorBody(message: problem, type: "invalid_request_error", code: "invalid_request_error"),
                        keepAlive: keepAlive)
    }
    if let refusal = chatReasoningRefusal(messageList, script: script, model: model) {
        return sendJSON(connection, status: 400, body: errorBody(message: refusal, type: "invalid_request_error", code: "invalid_request_error"),
                        keepAlive: keepAlive)
    }
    if let refusal = strictContentRefusal(messageList, refusing: script.strictContent) {
        return sendJSON(connection, status: 500, body: llamaCppPythonErrorBody(refusal), keepAlive: keepAlive)
    }
    if script.refuseImages, holdsImage(messageList) {
        if script.refuseImagesEmpty { return sendEmptyEventStream(connection, keepAlive: keepAlive, split: script.split) }
        return sendJSON(connection, status: 400, body: errorBody(message: imageRefusalMessage, type: "invalid_request_error", code: "invalid_image"),
                        keepAlive: keepAlive)
    }

    // [[fail-first:N]]: the first N requests with this exact message fail (503, or [[status]]), later ones succeed.
    var failing = script.status
    if let failFirst = script.failFirst {
        failing = shared.attempt(for: lastUser) <= failFirst ? (script.status ?? 503) : nil
    }
    if let status = failing {
        let (type, code) = statusError(status)
        var extra: [(String, String)] = []
        if let value = script.retryAfter, !script.noRetryAfter {
            extra.append(("Retry-After", value))
        } else if status == 429 && !script.noRetryAfter {
            extra.append(("Retry-After", "1"))
        }
        return sendJSON(connection, status: status,
                        body: script.validationError ? llamaCppPythonErrorBody(scriptedValidationError)
                            : errorBody(message: longErrorMessage(status: status, lines: script.errorLines), type: type, code: code),
                        extraHeaders: extra, keepAlive: keepAlive, split: script.split)
    }
    if script.emptyStream, stream { return sendEmptyEventStream(connection, keepAlive: keepAlive, split: script.split) }

    if script.garbage {
        let head = responseHead(status: 200, headers: [
            ("Content-Type", "text/event-stream"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
            ("Connection", "close"),
        ])
        guard connection.send(head) else { return false }
        var writer = ChunkedWriter(connection: connection, split: script.split)
        guard writer.write("this is not an event stream\n{{{\n\n") else { return false }
        _ = writer.finish()
        return false
    }

    // A request that ends with tool results gets them back as text, unless [[tool-loop]] asks
    // for the calls again.
    let toolResults = trailingChatToolResults(messageList)
    let toolCalls = (toolResults == nil || script.toolLoop) && !script.thinkOnly ? script.toolCalls : []
    var replyText: String
    if script.thinkOnly {
        replyText = ""
    } else if !toolCalls.isEmpty {
        replyText = script.toolText ?? ""
    } else if let toolResults {
        replyText = toolResultsText(toolResults)
    } else if let reply = script.reply {
        replyText = reply
    } else if let words = script.words {
        replyText = words == 0 ? "" : (1...words).map { "w\($0)" }.joined(separator: " ")
    } else if script.context {
        replyText = "context: " + messages.map(\.role).joined(separator: " ")
            + " | " + messages.map(\.text).joined(separator: " / ")
    } else {
        replyText = "You said: " + remaining.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    // A server without a reasoning parser leaves the thought in the text.
    let inlineThought = script.thinkStyle == .inline ? script.think : nil
    if let inlineThought { replyText = "<think>" + inlineThought + "</think>\n\n" + replyText }
    let reasoningPieces = inlineThought == nil ? script.reasoningPieces : []
    let n = shared.nextID()
    let id = "chatcmpl-fake-\(n)"
    let created = Int(time(nil))
    let callIDs = toolCalls.indices.map { $0 < script.toolIDs.count ? script.toolIDs[$0] : "call_\(n)_\($0)" }
    // A reply that asks for tools streams one delta per chunk: text pieces, then each call's
    // opening and argument pieces (of random length, seeded like the other endpoints' splits).
    var random = SeededRandom(seed: script.seed ?? UInt64(n))
    let toolDeltas: [[(String, JSON)]]? = toolCalls.isEmpty ? nil : chatToolCallDeltas(
        toolCalls, ids: callIDs, text: script.toolText, chunk: script.chunk,
        llamacpp: script.toolStyleLlamacpp, parallel: script.toolStyleParallel, random: &random)
    let burst = toolDeltas == nil ? script.burst : nil
    // [[burst:N]]: N one-word pieces, made as they are sent rather than all in advance.
    let pieces = burst == nil ? splitIntoPieces(replyText, size: script.chunk) : []
    let pieceCount = burst ?? toolDeltas?.count ?? pieces.count
    let finishReason = script.thinkOnly && !script.finishGiven ? "length"
        : toolDeltas != nil && !script.finishGiven ? "tool_calls" : script.finishReason
    let promptTokens = messages.reduce(0) { $0 + $1.text.split(whereSeparator: { $0.isWhitespace }).count }
    let usage = chatUsage(promptTokens: promptTokens, textTokens: pieceCount, reasoningTokens: reasoningPieces.count, script: script)
    if !stream {
        if script.drop != nil { return false }  // close without answering
        if script.stall != nil {
            connection.waitForClientToGoAway(maxSeconds: 600)
            return false
        }
        let completion = JSON.object([
            ("id", .string(id)),
            ("object", .string("chat.completion")),
            ("created", .int(created)),
            ("model", .string(model)),
            ("choices", .array([.object([
                ("index", .int(0)),
                ("message", .object((toolCalls.isEmpty
                    ? [("role", .string("assistant")), ("content", .string(replyText))]
                    : [("role", .string("assistant")), ("content", script.toolText.map(JSON.string) ?? .null),
                       ("tool_calls", chatToolCallsJSON(toolCalls, ids: callIDs))])
                    + (reasoningPieces.isEmpty ? [] : chatReasoningDelta(reasoningPieces.joined(), style: script.thinkStyle).filter { $0.0 != "content" }))),
                ("finish_reason", .string(finishReason)),
            ])])),
            ("usage", usage),
        ])
        return sendJSON(connection, status: 200, body: completion.encoded(),
                        extraHeaders: [("x-request-id", "fake-\(n)")], keepAlive: keepAlive, split: script.split)
    }

    // Streamed answer. A stream that ends properly leaves the connection open for the next
    // request, as real servers do; one cut short (drop, stall, a mid-stream error) closes it.
    let head = responseHead(status: 200, headers: [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", keepAlive ? "keep-alive" : "close"),
        ("x-request-id", "fake-\(n)"),
    ])
    guard connection.send(head) else { return false }
    var writer = ChunkedWriter(connection: connection, split: script.split)
    let eol = script.eol
    func chunk(choices: [JSON], usage: JSON? = nil) -> String {
        var members: [(String, JSON)] = [
            ("id", .string(id)),
            ("object", .string("chat.completion.chunk")),
            ("created", .int(created)),
            ("model", .string(model)),
            ("choices", .array(choices)),
        ]
        if let usage { members.append(("usage", usage)) }
        return "data: " + JSON.object(members).encoded() + eol + eol
    }
    func choice(delta: [(String, JSON)], finish: JSON = .null) -> JSON {
        .object([("index", .int(0)), ("delta", .object(delta)), ("finish_reason", finish)])
    }

    guard writer.write(": keep-alive" + eol + eol),
          writer.write(chunk(choices: [choice(delta: [("role", .string("assistant")),
                                                      ("content", toolDeltas == nil ? .string("") : .null)])]))
    else { return false }

    for (position, piece) in reasoningPieces.enumerated() {
        if position > 0 { sleepMilliseconds(script.thinkPauseMs) }
        if script.thinkStyle == .openrouter, !writer.write(": OPENROUTER PROCESSING" + eol + eol) { return false }
        guard writer.write(chunk(choices: [choice(delta: chatReasoningDelta(piece, style: script.thinkStyle))])) else { return false }
    }
    if !reasoningPieces.isEmpty, pieceCount > 0 { sleepMilliseconds(script.thinkPauseMs) }

    let dropAt = script.drop.map { min($0, pieceCount) }
    let stallAt = script.stall.map { min($0, pieceCount) }
    let holdAt = script.hold.map { min($0.after, pieceCount) }
    let errorAt = script.errorMid.map { min($0, pieceCount) }
    let badAt = script.badChunk.map { min($0, pieceCount) }
    let pieceText: (Int) -> String = burst == nil ? { pieces[$0] } : { index in
        script.stamp ? "\(monotonicNanoseconds()) " : "w\(index + 1) "
    }
    // The one chunk that varies, as its text before and after the content, so a burst does
    // not encode the same JSON a million times.
    let burstKey = burst != nil && script.burstThinking ? "reasoning_content" : "content"
    let template = chunk(choices: [choice(delta: [(burstKey, .string("\u{1}"))])])
        .components(separatedBy: "\\u0001")
    // Unstamped bursts go out in writes of about 64 KiB; everything else piece by piece, so a
    // piece leaves the moment it is made (and a stamp says when it left).
    let batchBytes = burst != nil && !script.stamp ? 65_536 : 0
    var batch: [UInt8] = []
    var index = 0
    while true {
        if !batch.isEmpty && (index == dropAt || index == stallAt || index == holdAt || index == errorAt || index == badAt
                              || index >= pieceCount || batch.count >= batchBytes) {
            guard writer.write(batch) else { return false }
            batch.removeAll(keepingCapacity: true)
        }
        if index == holdAt, let hold = script.hold {
            // Held once: the pieces after it go on as usual.
            guard writer.flush() else { return false }
            let released = shared.holding(hold.name) {
                connection.waitForRelease(maxSeconds: 600) { shared.isReleased(hold.name) }
            }
            if !released { return false }
        }
        if index == dropAt {
            _ = writer.flush()
            return false  // the caller closes the socket: no terminating chunk, no [DONE]
        }
        if index == stallAt {
            guard writer.flush() else { return false }
            connection.waitForClientToGoAway(maxSeconds: 600)
            return false
        }
        if index == errorAt {
            let error = JSON.object([("error", .object([
                ("message", .string("fake mid-stream error")),
                ("type", .string("server_error")),
                ("code", .string("fake_mid_stream")),
            ]))])
            guard writer.write("data: " + error.encoded() + eol + eol) else { return false }
            _ = writer.finish()
            return false
        }
        if index == badAt {
            guard writer.write("data: {\"choices\":[{\"delta\":" + eol + eol) else { return false }
            _ = writer.finish()
            return false
        }
        if index >= pieceCount { break }
        if let again = script.thinkAgain, toolDeltas == nil, burst == nil, index == pieceCount / 2, index > 0 {
            sleepMilliseconds(script.thinkPauseMs)
            guard writer.write(chunk(choices: [choice(delta: chatReasoningDelta(again, style: script.thinkStyle))])) else { return false }
            sleepMilliseconds(script.thinkPauseMs)
        }
        if index > 0 {
            if let us = script.delayMicroseconds { sleepMicroseconds(us) } else { sleepMilliseconds(script.delayMs) }
        }
        let event = if let toolDeltas {
            chunk(choices: [choice(delta: toolDeltas[index])])
        } else if burst != nil && template.count == 2 {
            template[0] + pieceText(index) + template[1]
        } else {
            chunk(choices: [choice(delta: [(burstKey, .string(pieceText(index)))])])
        }
        if batchBytes > 0 {
            batch += event.utf8
        } else {
            guard writer.write(event) else { return false }
        }
        index += 1
    }
    if !script.noFinish {
        guard writer.write(chunk(choices: [choice(delta: [], finish: .string(finishReason))])) else { return false }
    }
    if includeUsage && !script.noUsage {
        guard writer.write(chunk(choices: [], usage: usage)) else { return false }
    }
    if !script.noDone {
        guard writer.write("data: [DONE]" + eol + eol) else { return false }
    }
    if let ms = script.endDelayMs {
        guard writer.flush() else { return false }
        sleepMilliseconds(ms)
    }
    return writer.finish() && keepAlive
}

/// `fake upstream error CODE`, or with `[[error-lines:N]]` that line followed by N-1 more, each
/// over 100 characters, as a server that validates requests lists what it refused.
func longErrorMessage(status: Int, lines: Int?) -> String {
    var text = "fake upstream error \(status)"
    for line in 1 ..< max(1, lines ?? 1) {
        text += "\n  messages.\(line).content: Input should be a valid string [type=string_type, input_value=None, input_type=NoneType] detail line \(line)"
    }
    return text
}
