import Foundation

// The model's side of function calling: replies that ask for tool calls (`[[tool:NAME ARGS]]`),
// the answer to a request that ends with tool results, and the checks a real server makes of
// the tool messages it is sent. See docs/fake-upstream.md, "Tool calls".

/// One call a `[[tool:NAME ARGS]]` directive asks for.
struct ScriptedToolCall {
    var name: String
    /// The arguments text exactly as written (normally JSON, but anything goes).
    var arguments: String

    /// `NAME ARGS`: the name runs to the first space, the arguments are everything after it.
    init?(directive value: String) {
        let text = value.drop(while: { $0 == " " })
        if let space = text.firstIndex(of: " ") {
            name = String(text[..<space])
            arguments = String(text[text.index(after: space)...])
        } else {
            name = String(text)
            arguments = ""
        }
        if name.isEmpty { return nil }
    }
}

/// Cuts `text` into pieces of 1 to 24 UTF-8 bytes, the lengths drawn from `random`, never inside
/// a UTF-8 sequence (a piece ends before a character that would take it past its length; a
/// character longer than the length drawn is a piece of its own).
func argumentPieces(_ text: String, random: inout SeededRandom) -> [String] {
    var pieces: [String] = []
    var current = String.UnicodeScalarView()
    var bytes = 0
    var limit = random.next(in: 1...24)
    for scalar in text.unicodeScalars {
        let size = UTF8.width(scalar)
        if bytes > 0 && bytes + size > limit {
            pieces.append(String(current))
            current = String.UnicodeScalarView()
            bytes = 0
            limit = random.next(in: 1...24)
        }
        current.append(scalar)
        bytes += size
        if bytes >= limit {
            pieces.append(String(current))
            current = String.UnicodeScalarView()
            bytes = 0
            limit = random.next(in: 1...24)
        }
    }
    if bytes > 0 { pieces.append(String(current)) }
    return pieces
}

/// A tool result the request ends with: the name of the call it answers (or its id, if the
/// call has no name) and its content as text.
struct ToolResult {
    var label: String
    var content: String
}

/// `tool results: [NAME] CONTENT | [NAME] CONTENT …`: the reply to a request that ends with tool results.
func toolResultsText(_ results: [ToolResult]) -> String {
    "tool results: " + results.map { "[\($0.label)] \($0.content)" }.joined(separator: " | ")
}

// MARK: - Chat completions

/// The deltas of a streamed reply that asks for `calls`, one per chunk: `text` (if any) as
/// content pieces of `chunk` characters, then each call's opening (id, type, name, empty
/// arguments) and its arguments in random pieces. `llamacpp` repeats id, type and name in every
/// argument piece; `parallel` opens all calls in one chunk and interleaves their pieces.
func chatToolCallDeltas(_ calls: [ScriptedToolCall], ids: [String], text: String?, chunk: Int,
                        llamacpp: Bool, parallel: Bool, random: inout SeededRandom) -> [[(String, JSON)]] {
    var deltas: [[(String, JSON)]] = []
    if let text {
        deltas += splitIntoPieces(text, size: chunk).map { [("content", JSON.string($0))] }
    }
    func opening(_ k: Int) -> JSON {
        .object([("index", .int(k)), ("id", .string(ids[k])), ("type", .string("function")),
                 ("function", .object([("name", .string(calls[k].name)), ("arguments", .string(""))]))])
    }
    func piece(_ k: Int, _ text: String) -> [(String, JSON)] {
        let entry: JSON = llamacpp
            ? .object([("index", .int(k)), ("id", .string(ids[k])), ("type", .string("function")),
                       ("function", .object([("name", .string(calls[k].name)), ("arguments", .string(text))]))])
            : .object([("index", .int(k)), ("function", .object([("arguments", .string(text))]))])
        return [("tool_calls", .array([entry]))]
    }
    let pieces = calls.map { argumentPieces($0.arguments, random: &random) }
    if parallel {
        deltas.append([("tool_calls", .array(calls.indices.map(opening)))])
        for round in 0..<(pieces.map(\.count).max() ?? 0) {
            for k in calls.indices where round < pieces[k].count {
                deltas.append(piece(k, pieces[k][round]))
            }
        }
    } else {
        for k in calls.indices {
            deltas.append([("tool_calls", .array([opening(k)]))])
            deltas += pieces[k].map { piece(k, $0) }
        }
    }
    return deltas
}

/// The `tool_calls` of a non-streamed chat message: full arguments.
func chatToolCallsJSON(_ calls: [ScriptedToolCall], ids: [String]) -> JSON {
    .array(calls.indices.map { k in
        .object([("id", .string(ids[k])), ("type", .string("function")),
                 ("function", .object([("name", .string(calls[k].name)), ("arguments", .string(calls[k].arguments))]))])
    })
}

/// What a real server refuses in a chat request's tool messages, as the message of a 400; nil
/// if all is well. An assistant message's `tool_calls` must be well formed (string id, type
/// `function`, a name, arguments as a string) and be followed by one `tool` message per call
/// before any other role; a `tool` message must answer a call of that assistant message.
func chatToolProblem(_ messages: [JSON]) -> String? {
    // The assistant message whose calls are being answered: its index, its call ids, those answered.
    var open: (index: Int, ids: [String], answered: [String])?
    func unanswered(_ open: (index: Int, ids: [String], answered: [String])) -> String? {
        let missing = open.ids.filter { !open.answered.contains($0) }
        if missing.isEmpty { return nil }
        return "messages[\(open.index)]: an assistant message with 'tool_calls' must be followed by tool messages "
            + "responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + missing.joined(separator: ", ")
    }
    for (i, message) in messages.enumerated() {
        let role = message["role"]?.stringValue ?? ""
        if role == "tool" {
            guard var calls = open else {
                return "messages[\(i)]: messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
            }
            guard let id = message["tool_call_id"]?.stringValue else {
                return "messages[\(i)]: a message with role 'tool' needs a string 'tool_call_id'"
            }
            guard calls.ids.contains(id) else {
                return "messages[\(i)]: tool_call_id '\(id)' matches no tool call of the assistant message messages[\(calls.index)] "
                    + "(its ids: \(calls.ids.joined(separator: ", ")))"
            }
            guard !calls.answered.contains(id) else {
                return "messages[\(i)]: tool_call_id '\(id)' was already answered"
            }
            switch message["content"] {
            case .string?: break
            case .array(let parts)? where parts.allSatisfy({ $0["text"]?.stringValue != nil }): break
            default: return "messages[\(i)]: the content of a 'tool' message must be a string or an array of text parts"
            }
            calls.answered.append(id)
            open = calls
            continue
        }
        if let calls = open, let problem = unanswered(calls) { return problem }
        open = nil
        guard role == "assistant", let toolCalls = message["tool_calls"] else { continue }
        if case .null = toolCalls { continue }
        guard let list = toolCalls.arrayValue, !list.isEmpty else {
            return "messages[\(i)].tool_calls: expected a non-empty array"
        }
        var ids: [String] = []
        for (k, call) in list.enumerated() {
            let at = "messages[\(i)].tool_calls[\(k)]"
            guard let id = call["id"]?.stringValue, !id.isEmpty else { return "\(at).id: expected a non-empty string" }
            guard !ids.contains(id) else { return "\(at).id: '\(id)' is used twice" }
            guard call["type"]?.stringValue == "function" else { return "\(at).type: expected 'function'" }
            guard let name = call["function"]?["name"]?.stringValue, !name.isEmpty else {
                return "\(at).function.name: expected a non-empty string"
            }
            guard call["function"]?["arguments"]?.stringValue != nil else {
                return "\(at).function.arguments: expected a string"
            }
            ids.append(id)
        }
        open = (i, ids, [])
    }
    if let calls = open { return unanswered(calls) }
    return nil
}

/// The tool results a chat request ends with (its trailing `tool` messages), each labelled with
/// the name of the call it answers; nil if the last message is not a tool message.
func trailingChatToolResults(_ messages: [JSON]) -> [ToolResult]? {
    var start = messages.count
    while start > 0 && messages[start - 1]["role"]?.stringValue == "tool" { start -= 1 }
    guard start < messages.count else { return nil }
    var names: [String: String] = [:]
    if start > 0, let calls = messages[start - 1]["tool_calls"]?.arrayValue {
        for call in calls {
            if let id = call["id"]?.stringValue, let name = call["function"]?["name"]?.stringValue { names[id] = name }
        }
    }
    return messages[start...].map { message in
        let id = message["tool_call_id"]?.stringValue ?? ""
        return ToolResult(label: names[id] ?? id, content: contentText(message["content"]))
    }
}

// MARK: - Anthropic Messages

private func blocks(_ message: JSON) -> [JSON] { message["content"]?.arrayValue ?? [] }

/// Whether a message holds `tool_result` blocks (a user turn that answers tool calls).
func holdsToolResults(_ message: JSON) -> Bool {
    blocks(message).contains { $0["type"]?.stringValue == "tool_result" }
}

/// What Anthropic's API refuses in a request's turns, as the message of a 400; nil if all is
/// well. Roles alternate, starting with `user`; `tool_use` blocks are well formed (id, name, an
/// object `input`); the user turn after an assistant turn with `tool_use` blocks starts with a
/// `tool_result` block for each of them, and every `tool_result` answers a `tool_use` of the
/// turn before.
func anthropicToolProblem(_ messages: [JSON]) -> String? {
    var uses: [String] = []  // the tool_use ids of the assistant turn before this one
    var previousRole = ""
    for (i, message) in messages.enumerated() {
        let role = message["role"]?.stringValue ?? ""
        guard role == "user" || role == "assistant" else {
            return "messages.\(i).role: Input should be 'user' or 'assistant'"
        }
        if i == 0 && role != "user" { return "messages.0: the first message must use the \"user\" role" }
        if role == previousRole {
            return "messages.\(i): roles must alternate between \"user\" and \"assistant\" (messages.\(i - 1) is also \"\(role)\")"
        }
        previousRole = role
        if role == "assistant" {
            uses = []
            for (k, block) in blocks(message).enumerated() where block["type"]?.stringValue == "tool_use" {
                let at = "messages.\(i).content.\(k)"
                guard let id = block["id"]?.stringValue, !id.isEmpty else { return "\(at).id: Field required" }
                guard !uses.contains(id) else { return "\(at).id: `tool_use` ids must be unique (\(id))" }
                guard block["name"]?.stringValue?.isEmpty == false else { return "\(at).name: Field required" }
                guard block["input"]?.isObject == true else { return "\(at).input: Input should be a valid dictionary" }
                uses.append(id)
            }
            continue
        }
        var answered: [String] = []
        var leading = true
        for (k, block) in blocks(message).enumerated() {
            guard block["type"]?.stringValue == "tool_result" else {
                leading = false
                continue
            }
            let at = "messages.\(i).content.\(k)"
            guard let id = block["tool_use_id"]?.stringValue else { return "\(at).tool_use_id: Field required" }
            guard uses.contains(id) else {
                return "\(at): unexpected `tool_use_id` found in `tool_result` blocks: \(id). "
                    + "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            }
            guard leading else { return "\(at): `tool_result` blocks must come before any other content of the message" }
            guard !answered.contains(id) else { return "\(at): `tool_use_id` \(id) is answered twice" }
            switch block["content"] {
            case nil, .string?: break
            case .array(let parts)? where parts.allSatisfy({ $0["type"]?.stringValue != nil }): break
            default: return "\(at).content: Input should be a valid string or a list of content blocks"
            }
            if let flag = block["is_error"], flag.boolValue == nil { return "\(at).is_error: Input should be a valid boolean" }
            answered.append(id)
        }
        let missing = uses.filter { !answered.contains($0) }
        if !missing.isEmpty { return missingResults(at: i - 1, missing) }
        uses = []
    }
    if !uses.isEmpty { return missingResults(at: messages.count - 1, uses) }
    return nil
}

private func missingResults(at index: Int, _ ids: [String]) -> String {
    "messages.\(index): `tool_use` ids were found without `tool_result` blocks immediately after: "
        + ids.joined(separator: ", ")
        + ". Each `tool_use` block must have a corresponding `tool_result` block in the next message."
}

/// The tool results an Anthropic request ends with (the `tool_result` blocks of its last turn,
/// a user turn), each labelled with the name of the `tool_use` it answers and marked
/// ` (error)` when `is_error` is true; nil if the last turn holds none.
func trailingAnthropicToolResults(_ messages: [JSON]) -> [ToolResult]? {
    guard let last = messages.last, last["role"]?.stringValue == "user", holdsToolResults(last) else { return nil }
    var names: [String: String] = [:]
    if messages.count >= 2 {
        for block in blocks(messages[messages.count - 2]) where block["type"]?.stringValue == "tool_use" {
            if let id = block["id"]?.stringValue, let name = block["name"]?.stringValue { names[id] = name }
        }
    }
    return blocks(last).filter { $0["type"]?.stringValue == "tool_result" }.map { block in
        let id = block["tool_use_id"]?.stringValue ?? ""
        var content = contentText(block["content"])
        if block["is_error"]?.boolValue == true { content += " (error)" }
        return ToolResult(label: names[id] ?? id, content: content)
    }
}

/// The `input` of a non-streamed `tool_use` block: the arguments parsed, `{}` for none, and
/// the text as a JSON string when it is not JSON (a real server never sends that; a test may
/// want to).
func anthropicToolInput(_ arguments: String) -> JSON {
    if arguments.isEmpty { return .object([]) }
    return (try? JSON.parse(Array(arguments.utf8))) ?? .string(arguments)
}
