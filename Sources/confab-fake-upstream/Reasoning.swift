import Foundation

// Models that think before they answer: the `[[think…]]` directives' reasoning in each API's
// form, the usage that counts it, and the refusals of the real servers when a tool loop's
// reasoning is not sent back as they demand.

/// How a chat-completions stream carries reasoning (`[[think-style:…]]`).
enum ThinkStyle: String {
    /// DeepSeek, vLLM, llama.cpp `--reasoning-format deepseek`: `delta.reasoning_content`.
    case deepseek
    /// OpenRouter: `delta.reasoning` and `delta.reasoning_details`, with `: OPENROUTER PROCESSING` comments.
    case openrouter
    /// Ollama's OpenAI-compatible endpoint: `delta.reasoning`.
    case ollama
    /// A server without a reasoning parser: `<think>…</think>` at the start of `content`.
    case inline
}

/// DeepSeek's refusal of a tool loop whose assistant turns lack their `reasoning_content`.
let deepSeekPassBackRefusal = "The reasoning_content in the thinking mode must be passed back to the API."

/// The fake's words for the older `deepseek-reasoner`'s refusal of any `reasoning_content` in the input.
let deepSeekReasonerRefusal = "deepseek-reasoner does not support reasoning_content in input messages: remove it from your request"

/// The signature the fake gives a thinking block: it checks it when the block comes back.
func fakeSignature(_ thinking: String) -> String { "fake-sig-" + fnv1a64(thinking) }

/// The data of the fake's redacted thinking block for a thought.
func fakeRedactedData(_ thinking: String) -> String { "fake-redacted-" + fnv1a64(thinking + "\u{0}redacted") }

extension Script {
    /// The reasoning pieces a thinking reply streams before its answer (none for `inline`, whose
    /// thought is in the text).
    var reasoningPieces: [String] {
        guard let think, !think.isEmpty else { return [] }
        return splitIntoPieces(think, size: chunk)
    }

    /// The pause between two reasoning pieces.
    var thinkPauseMs: Int { thinkDelayMs ?? delayMs }
}

/// The assistant turns after the last user turn that carries text (the tool loop in progress):
/// those a thinking server checks.
private func currentLoopAssistantTurns(_ messages: [JSON], isQuestion: (JSON) -> Bool) -> [(index: Int, message: JSON)] {
    let start = messages.lastIndex(where: isQuestion).map { $0 + 1 } ?? 0
    return messages.indices.filter { $0 >= start && messages[$0]["role"]?.stringValue == "assistant" }.map { ($0, messages[$0]) }
}

/// DeepSeek's rules for a chat request's assistant turns, for a script that thinks in its style:
/// the tool-call turns of the loop in progress carry their `reasoning_content`; `deepseek-reasoner`
/// takes none at all.
func chatReasoningRefusal(_ messages: [JSON], script: Script, model: String) -> String? {
    if model.hasPrefix("deepseek-reasoner"),
       messages.contains(where: { $0["role"]?.stringValue == "assistant" && $0["reasoning_content"] != nil }) {
        return deepSeekReasonerRefusal
    }
    guard script.think != nil, script.thinkStyle == .deepseek else { return nil }
    let loop = currentLoopAssistantTurns(messages) { $0["role"]?.stringValue == "user" }
    for (_, message) in loop where !(message["tool_calls"]?.arrayValue ?? []).isEmpty {
        guard message["reasoning_content"]?.stringValue != nil else { return deepSeekPassBackRefusal }
    }
    return nil
}

/// Anthropic's rule for a thinking script: the last assistant turn of a tool loop starts with
/// its thinking (or redacted thinking) blocks, as they were sent, signatures intact.
func anthropicReasoningRefusal(_ messages: [JSON], script: Script) -> String? {
    guard script.think != nil else { return nil }
    guard let index = messages.lastIndex(where: { $0["role"]?.stringValue == "assistant" }),
          index == messages.count - 2, holdsToolResults(messages[messages.count - 1]),
          let blocks = messages[index]["content"]?.arrayValue,
          blocks.contains(where: { $0["type"]?.stringValue == "tool_use" })
    else { return nil }
    let first = blocks.first?["type"]?.stringValue ?? "text"
    guard first == "thinking" || first == "redacted_thinking" else {
        return "messages.\(index).content.0.type: Expected 'thinking' or 'redacted_thinking', but found '\(first)'"
    }
    for (position, block) in blocks.enumerated() {
        switch block["type"]?.stringValue {
        case "thinking":
            let text = block["thinking"]?.stringValue ?? ""
            guard block["signature"]?.stringValue == fakeSignature(text) else {
                return "messages.\(index).content.\(position): Invalid `signature` in `thinking` block"
            }
        case "redacted_thinking":
            guard let data = block["data"]?.stringValue, data.hasPrefix("fake-redacted-") else {
                return "messages.\(index).content.\(position): Invalid `data` in `redacted_thinking` block"
            }
        default: continue
        }
    }
    return nil
}

/// Chat usage with the reasoning and cache counts in the form the style's servers report them.
func chatUsage(promptTokens: Int, textTokens: Int, reasoningTokens: Int, script: Script) -> JSON {
    var members: [(String, JSON)] = [
        ("prompt_tokens", .int(promptTokens)),
        ("completion_tokens", .int(textTokens + reasoningTokens)),
        ("total_tokens", .int(promptTokens + textTokens + reasoningTokens)),
    ]
    if let cached = script.cached.map({ min($0, promptTokens) }) {
        members.append(("prompt_tokens_details", .object([("cached_tokens", .int(cached))])))
        if script.thinkStyle == .deepseek {
            members.append(("prompt_cache_hit_tokens", .int(cached)))
            members.append(("prompt_cache_miss_tokens", .int(promptTokens - cached)))
        }
    }
    if reasoningTokens > 0 {
        members.append(("completion_tokens_details", .object([("reasoning_tokens", .int(reasoningTokens))])))
    }
    return .object(members)
}

/// A chat delta carrying one reasoning piece, in the style's keys.
func chatReasoningDelta(_ piece: String, style: ThinkStyle) -> [(String, JSON)] {
    switch style {
    case .deepseek: [("content", .null), ("reasoning_content", .string(piece))]
    case .ollama: [("content", .string("")), ("reasoning", .string(piece))]
    case .openrouter:
        [("content", .string("")), ("reasoning", .string(piece)),
         ("reasoning_details", .array([.object([("type", .string("reasoning.text")), ("text", .string(piece)),
                                                ("format", .string("unknown")), ("index", .int(0))])]))]
    case .inline: [("content", .string(piece))]
    }
}

/// Anthropic's usage members for a message: input tokens less the cached ones, and the cache counts.
func anthropicUsage(inputTokens: Int, script: Script) -> [(String, JSON)] {
    let read = min(script.cached ?? 0, inputTokens)
    let write = min(script.cacheWrite ?? 0, inputTokens - read)
    var members: [(String, JSON)] = [("input_tokens", .int(inputTokens - read - write))]
    if script.cached != nil || script.cacheWrite != nil {
        members.append(("cache_creation_input_tokens", .int(write)))
        members.append(("cache_read_input_tokens", .int(read)))
    }
    return members
}

/// The thinking blocks of an Anthropic reply as events (start, a delta per piece, the
/// signature, stop), from content block `index` on; and the blocks whole, for an answer not streamed.
func anthropicThinkingEvents(script: Script, from index: Int) -> (events: [String], blocks: [JSON]) {
    guard let think = script.think else { return ([], []) }
    var events: [String] = []
    events.append(fakeAnthropicEvent("content_block_start", [("index", .int(index)), ("content_block", .object([
        ("type", .string("thinking")), ("thinking", .string("")), ("signature", .string(""))]))]))
    for piece in script.reasoningPieces {
        events.append(fakeAnthropicEvent("content_block_delta", [("index", .int(index)), ("delta", .object([
            ("type", .string("thinking_delta")), ("thinking", .string(piece))]))]))
    }
    events.append(fakeAnthropicEvent("content_block_delta", [("index", .int(index)), ("delta", .object([
        ("type", .string("signature_delta")), ("signature", .string(fakeSignature(think)))]))]))
    events.append(fakeAnthropicEvent("content_block_stop", [("index", .int(index))]))
    var blocks: [JSON] = [.object([("type", .string("thinking")), ("thinking", .string(think)), ("signature", .string(fakeSignature(think)))])]
    if script.thinkRedacted {
        let block = JSON.object([("type", .string("redacted_thinking")), ("data", .string(fakeRedactedData(think)))])
        events.append(fakeAnthropicEvent("content_block_start", [("index", .int(index + 1)), ("content_block", block)]))
        events.append(fakeAnthropicEvent("content_block_stop", [("index", .int(index + 1))]))
        blocks.append(block)
    }
    return (events, blocks)
}

func fakeAnthropicEvent(_ type: String, _ members: [(String, JSON)]) -> String {
    "event: \(type)\ndata: " + JSON.object([("type", .string(type))] + members).encoded() + "\n\n"
}
