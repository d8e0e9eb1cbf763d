import ConfabProtocol

// MARK: - Lenient JSON shapes (every field optional, wrong types read as absent)

/// The union of the keys we look at in stream chunks and error bodies. Read in one pass over
/// the bytes: only `choices[0]`'s text is built on the hot path; every other key of a chunk
/// (`id`, `model`, `logprobs`, `tool_calls`, …) is checked and skipped. Duplicate keys: the
/// first one counts.
struct Envelope {
    /// `choices[0]`, when `hasChoice`.
    var choice = Choice()
    var hasChoice = false
    var usage: TokenUsage?
    var error: ErrorPayload?
    var objectIsError = false
    var message: String?
    var detail: String?
    var type: String?
    var code: String?

    /// Nil unless the text is one JSON object.
    init?(_ text: String) {
        var text = text
        guard text.withUTF8({ read(UnsafeRawBufferPointer($0)) }) else { return nil }
    }

    init() {}

    /// Reads the bytes into this (empty) envelope; false unless they are one JSON object. Read
    /// in place, nested parts included, so that nothing is copied: this runs once per streamed
    /// token. (Over bytes, so that nothing here is generic at run time.)
    mutating func read(_ bytes: UnsafeRawBufferPointer) -> Bool {
        do throws(JSONParseError) {
            return try JSONScanner.read(bytes.assumingMemoryBound(to: UInt8.self)) { (scanner) throws(JSONParseError) -> Bool in
                guard try scanner.kind() == .object else {
                    try scanner.skipValue()
                    return false
                }
                try read(&scanner)
                return true
            }
        } catch {
            return false
        }
    }

    private mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        var seen = Seen()
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "choices" {
                guard seen.first(.choices) else { return }
                try readPrimaryChoice(&scanner)
            } else if key == "usage" {
                guard seen.first(.usage) else { return }
                usage = try scanner.readValue().usage
            } else if key == "error" {
                guard seen.first(.error) else { return }
                error = ErrorPayload(try scanner.readValue())
            } else if key == "object" {
                guard seen.first(.object) else { return }
                objectIsError = try scanner.readString(equalTo: "error")
            } else if key == "message" {
                guard seen.first(.message) else { return }
                message = try scanner.readString()
            } else if key == "detail" {
                guard seen.first(.detail) else { return }
                detail = detailText(try scanner.readValue())
            } else if key == "type" {
                guard seen.first(.type) else { return }
                type = try scanner.readString()
            } else if key == "code" {
                guard seen.first(.code) else { return }
                code = try scanner.readValue().flexibleString
            }
        }
    }

    /// `choices[0]`: the first choice whose `index` is 0 or absent (or not an integer). None
    /// when `choices` is not an array or has no such choice; an element that is not an object is
    /// an empty choice.
    private mutating func readPrimaryChoice(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .array else { return }
        try scanner.elements { (_, scanner) throws(JSONParseError) in
            guard !hasChoice else { return }
            choice = Choice()
            try choice.read(&scanner)
            hasChoice = choice.index == nil || choice.index == 0
        }
        if !hasChoice { choice = Choice() }
    }

    private struct Seen {
        enum Key: Int { case choices, usage, error, object, message, detail, type, code }
        var keys: UInt8 = 0
        /// True the first time `key` is met.
        mutating func first(_ key: Key) -> Bool {
            defer { keys |= 1 << key.rawValue }
            return keys & 1 << key.rawValue == 0
        }
    }
}

struct Choice {
    var index: Int?
    /// `delta` when `hasDelta`, `message` when `hasMessage` (a server that sends whole messages).
    var delta = Delta()
    var hasDelta = false
    var message = Delta()
    var hasMessage = false
    var finishReason: String?
    /// The legacy completions API's text.
    var text: String?

    mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .object else { return }
        var seenIndex = false, seenFinish = false, seenText = false
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "text" {
                guard !seenText else { return }
                seenText = true
                text = try scanner.readString()
            } else if key == "index" {
                guard !seenIndex else { return }
                seenIndex = true
                index = try scanner.readInt()
            } else if key == "delta" {
                guard !hasDelta, try !scanner.readNull() else { return }
                hasDelta = true
                try delta.read(&scanner)
            } else if key == "message" {
                guard !hasMessage, try !scanner.readNull() else { return }
                hasMessage = true
                try message.read(&scanner)
            } else if key == "finish_reason" {
                guard !seenFinish else { return }
                seenFinish = true
                finishReason = try scanner.readString()
            }
        }
    }
}

/// `delta` (or `message`): `content` may be a string or a list of `{"type":"text","text":..}` parts;
/// `tool_calls` pieces; the reasoning, in whichever of its servers' names it comes. `role` and
/// the rest are ignored.
struct Delta {
    var content: String?
    var refusal: String?
    var toolCalls: [ToolCallPiece] = []
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp's `--reasoning-format deepseek`).
    var reasoningContent: String?
    /// `reasoning` (OpenRouter, Ollama, newer vLLM).
    var reasoningText: String?
    /// The text of `reasoning_details` (OpenRouter): `reasoning.text` items' `text`,
    /// `reasoning.summary` items' `summary`; encrypted items have none.
    var reasoningDetails: String?

    /// The piece of reasoning the delta carries, counted once: servers that send it under two
    /// names (OpenRouter's `reasoning` beside `reasoning_details`, vLLM's `reasoning` beside
    /// `reasoning_content`) send the same text twice.
    var reasoning: String? {
        for text in [reasoningContent, reasoningText, reasoningDetails] {
            if let text, !text.isEmpty { return text }
        }
        return nil
    }

    mutating func read(_ scanner: inout JSONScanner) throws(JSONParseError) {
        guard try scanner.kind() == .object else {
            try scanner.skipValue()
            return
        }
        var seenContent = false, seenRefusal = false, seenReasoningContent = false, seenReasoning = false, seenDetails = false
        try scanner.members { (key, scanner) throws(JSONParseError) in
            if key == "content" {
                guard !seenContent else { return }
                seenContent = true
                switch try scanner.kind() {
                case .string: content = try scanner.readString()
                case .array:
                    var text = ""
                    try scanner.elements { (_, scanner) throws(JSONParseError) in
                        if let part = try scanner.readValue()["text"]?.string { text += part }
                    }
                    content = text
                default: return
                }
            } else if key == "refusal" {
                guard !seenRefusal else { return }
                seenRefusal = true
                refusal = try scanner.readString()
            } else if key == "tool_calls" {
                guard toolCalls.isEmpty, case .array(let items) = try scanner.readValue() else { return }
                toolCalls = items.compactMap(Self.toolCallPiece)
            } else if key == "reasoning_content" {
                guard !seenReasoningContent else { return }
                seenReasoningContent = true
                reasoningContent = try scanner.readString()
            } else if key == "reasoning" {
                guard !seenReasoning else { return }
                seenReasoning = true
                reasoningText = try scanner.readString()
            } else if key == "reasoning_details" {
                guard !seenDetails else { return }
                seenDetails = true
                guard case .array(let items) = try scanner.readValue() else { return }
                var text = ""
                for item in items {
                    switch item["type"]?.string {
                    case "reasoning.text": text += item["text"]?.string ?? ""
                    case "reasoning.summary": text += item["summary"]?.string ?? ""
                    default: continue
                    }
                }
                reasoningDetails = text
            }
        }
    }

    /// `{"index":0,"id":..,"type":"function","function":{"name":..,"arguments":..}}`, any part
    /// missing; `arguments` given as an object (some servers) is taken as its JSON text.
    private static func toolCallPiece(_ item: JSON) -> ToolCallPiece? {
        guard item.object != nil else { return nil }
        let function = item["function"]
        let arguments: String = switch function?["arguments"] {
            case .string(let text)?: text
            case let value? where value.object != nil || value.array != nil: value.compactText
            default: ""
        }
        return ToolCallPiece(index: item["index"]?.int, id: item["id"]?.string, name: function?["name"]?.string, arguments: arguments)
    }
}

extension JSON {
    /// Compact JSON text.
    var compactText: String {
        var out: [UInt8] = []
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// The value of an `error` key: an object with `message`/`type`/`code`, or a bare string (or
/// number or boolean). Any other value still says there was an error, without a message.
struct ErrorPayload {
    var message: String?
    var type: String?
    var code: String?

    init?(_ value: JSON) {
        switch value {
        case .null: return nil
        case .object:
            message = value["message"]?.string
            type = value["type"]?.string
            code = value["code"]?.flexibleString
        default:
            message = value.flexibleString
        }
    }

    func info(fallback: String) -> UpstreamErrorInfo {
        let text = nonBlank(message) ?? nonBlank(type) ?? nonBlank(code) ?? nonBlank(fallback) ?? "upstream reported an error"
        return UpstreamErrorInfo(message: capped(text, to: 1000), type: type, code: code)
    }
}

/// `detail`: a string (FastAPI HTTPException), a list of `{"msg":..}` (FastAPI validation), or an
/// object with `message`/`msg`.
func detailText(_ value: JSON) -> String? {
    func itemText(_ item: JSON) -> String? {
        if item.object != nil { return item["msg"]?.string ?? item["message"]?.string }
        return item.string
    }
    switch value {
    case .string(let text): return text
    case .array(let items):
        let messages = items.compactMap { nonBlank(itemText($0)) }
        return messages.isEmpty ? nil : messages.joined(separator: "; ")
    case .object: return itemText(value)
    default: return nil
    }
}

extension JSON {
    /// OpenAI's `usage` object, read leniently: missing counts are 0, a missing total is their
    /// sum. The parts servers report apart are kept: `completion_tokens_details.reasoning_tokens`,
    /// `prompt_tokens_details.cached_tokens` (OpenAI, vLLM, OpenRouter) or DeepSeek's
    /// `prompt_cache_hit_tokens` (its `prompt_cache_miss_tokens` are the rest of `prompt_tokens`).
    var usage: TokenUsage? {
        guard object != nil else { return nil }
        func count(_ value: JSON?) -> Int? { value?.int.flatMap { $0 >= 0 ? $0 : nil } }
        let prompt = self["prompt_tokens"]?.int ?? 0
        let completion = self["completion_tokens"]?.int ?? 0
        let total = self["total_tokens"]?.int ?? prompt.addingReportingOverflow(completion).partialValue
        let cached = count(self["prompt_tokens_details"]?["cached_tokens"]) ?? count(self["prompt_cache_hit_tokens"])
        return Usage(promptTokens: prompt, completionTokens: completion, totalTokens: total,
                     reasoningTokens: count(self["completion_tokens_details"]?["reasoning_tokens"]),
                     cacheReadTokens: cached)
    }

    /// A string, or a number / boolean rendered as a string (`"code": 429` -> "429").
    var flexibleString: String? {
        switch self {
        case .string(let text): text
        case .int(let value): String(value)
        case .double(let value): value.description
        case .bool(let value): String(value)
        default: nil
        }
    }
}
