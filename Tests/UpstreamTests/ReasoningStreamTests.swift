import XCTest

import ConfabProtocol
import SSE
import ServiceSettings
@testable import Upstream

/// Reasoning and usage as each family's servers stream them, from their documented shapes.
final class ReasoningStreamTests: XCTestCase {
    /// Raw SSE text through the parser and a decoder, as the daemon reads it.
    private func decode(_ text: String, _ decoder: any ChatEventDecoder = ChatStreamDecoder()) throws -> [ChatStreamEvent] {
        var parser = SSEParser()
        var decoder = decoder
        var out: [ChatStreamEvent] = []
        for event in try parser.feed(Array(text.utf8)) { out += try decoder.decode(event) }
        parser.finish()
        return out
    }

    private func whole(_ body: String, _ decoder: any ChatEventDecoder = ChatStreamDecoder()) throws -> [ChatStreamEvent] {
        var decoder = decoder
        var events: [ChatStreamEvent] = []
        try decoder.decodeWhole(Array(body.utf8), into: &events)
        return events
    }

    private func body(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    // MARK: - Chat completions

    func testDeepSeekStreamsReasoningContentThenContentAndReportsItsUsage() throws {
        let stream = """
            data: {"id":"e1","object":"chat.completion.chunk","created":1764000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}

            data: {"id":"e1","object":"chat.completion.chunk","created":1764000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Okay, "},"logprobs":null,"finish_reason":null}]}

            data: {"id":"e1","object":"chat.completion.chunk","created":1764000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"the user greets."},"logprobs":null,"finish_reason":null}]}

            data: {"id":"e1","object":"chat.completion.chunk","created":1764000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello!","reasoning_content":null},"logprobs":null,"finish_reason":null}]}

            data: {"id":"e1","object":"chat.completion.chunk","created":1764000000,"model":"deepseek-chat","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":13,"completion_tokens":200,"total_tokens":213,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":150},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":13}}

            data: [DONE]


            """
        XCTAssertEqual(try decode(stream), [
            .reasoning("Okay, "), .reasoning("the user greets."), .content("Hello!"), .finish(reason: "stop"),
            .usage(Usage(promptTokens: 13, completionTokens: 200, totalTokens: 213, reasoningTokens: 150, cacheReadTokens: 0)),
            .done,
        ])
    }

    func testDeepSeekCacheHitsAreThePromptsCacheReads() throws {
        let usage = #"data: {"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":10,"total_tokens":1210,"prompt_cache_hit_tokens":1024,"prompt_cache_miss_tokens":176}}"# + "\n\n"
        XCTAssertEqual(try decode(usage), [.usage(Usage(promptTokens: 1200, completionTokens: 10, totalTokens: 1210, cacheReadTokens: 1024))])
    }

    func testOpenRouterReasoningIsCountedOnceAndItsCommentsAreIgnored() throws {
        let stream = """
            : OPENROUTER PROCESSING

            data: {"id":"gen-1","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1764000000,"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Let me","reasoning_details":[{"type":"reasoning.text","text":"Let me","format":"unknown","index":0}]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}

            : OPENROUTER PROCESSING

            data: {"id":"gen-1","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1764000000,"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":" think.","reasoning_details":[{"type":"reasoning.text","text":" think.","format":"unknown","index":0}]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}

            data: {"id":"gen-1","provider":"DeepInfra","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1764000000,"choices":[{"index":0,"delta":{"role":"assistant","content":"Four.","reasoning":null,"reasoning_details":[]},"finish_reason":"stop","native_finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":38}}}

            data: [DONE]


            """
        XCTAssertEqual(try decode(stream), [
            .reasoning("Let me"), .reasoning(" think."), .content("Four."), .finish(reason: "stop"),
            .usage(Usage(promptTokens: 10, completionTokens: 40, totalTokens: 50, reasoningTokens: 38, cacheReadTokens: 4)),
            .done,
        ])
    }

    func testReasoningDetailsAloneGiveTheirTextAndSummariesButNotEncryptedData() throws {
        let chunk = #"data: {"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.summary","summary":"Plan: ","index":0},{"type":"reasoning.encrypted","data":"gAAAAB…","index":1},{"type":"reasoning.text","text":"add.","index":2}]}}]}"# + "\n\n"
        XCTAssertEqual(try decode(chunk), [.reasoning("Plan: add.")])
        let encryptedOnly = #"data: {"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAB"}]}}]}"# + "\n\n"
        XCTAssertEqual(try decode(encryptedOnly), [])
    }

    func testOllamaAndVLLMSpellItReasoning() throws {
        let ollama = #"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"qwen3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Hmm"},"finish_reason":null}]}"# + "\n\n"
        XCTAssertEqual(try decode(ollama), [.reasoning("Hmm")])
        // Newer vLLM sends both names with the same text.
        let vllm = #"data: {"choices":[{"index":0,"delta":{"reasoning_content":"x","reasoning":"x"}}]}"# + "\n\n"
        XCTAssertEqual(try decode(vllm), [.reasoning("x")])
    }

    func testAWholeChatAnswerCarriesItsReasoningContent() throws {
        let answer = #"{"id":"e2","object":"chat.completion","created":1764000000,"model":"deepseek-chat","choices":[{"index":0,"message":{"role":"assistant","content":"42","reasoning_content":"6 times 7"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14,"completion_tokens_details":{"reasoning_tokens":7}}}"#
        XCTAssertEqual(try whole(answer), [
            .reasoning("6 times 7"), .content("42"), .finish(reason: "stop"),
            .usage(Usage(promptTokens: 5, completionTokens: 9, totalTokens: 14, reasoningTokens: 7)),
        ])
    }

    // MARK: - Anthropic

    /// The extended-thinking stream of Anthropic's documentation.
    static let anthropicThinkingStream = """
        event: message_start
        data: {"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "output_tokens": 1}}}

        event: content_block_start
        data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

        event: content_block_delta
        data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I need to find the GCD of 1071 and 462.\\n\\n1071 = 2 × 462 + 147"}}

        event: content_block_delta
        data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "\\n462 = 3 × 147 + 21"}}

        event: content_block_delta
        data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

        event: content_block_stop
        data: {"type": "content_block_stop", "index": 0}

        event: content_block_start
        data: {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}

        event: content_block_stop
        data: {"type": "content_block_stop", "index": 1}

        event: content_block_start
        data: {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}

        event: content_block_delta
        data: {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "The GCD is **21**."}}

        event: content_block_stop
        data: {"type": "content_block_stop", "index": 2}

        event: message_delta
        data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 300}}

        event: message_stop
        data: {"type": "message_stop"}


        """

    func testAnthropicThinkingAndRedactedBlocksComeBackWholeWithTheirSignatures() throws {
        let thinking: JSON = ["type": "thinking", "thinking": .string("I need to find the GCD of 1071 and 462.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21"),
                              "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"]
        let redacted: JSON = ["type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"]
        XCTAssertEqual(try decode(Self.anthropicThinkingStream, AnthropicStreamDecoder()), [
            .reasoning("I need to find the GCD of 1071 and 462.\n\n1071 = 2 × 462 + 147"), .reasoning("\n462 = 3 × 147 + 21"),
            .reasoningReplay(thinking), .reasoningReplay(redacted), .content("The GCD is **21**."), .finish(reason: "stop"),
            // 25 uncached + 100 written + 2,000 read: all of them input, the cache parts kept apart.
            .usage(Usage(promptTokens: 2_125, completionTokens: 300, totalTokens: 2_425, cacheReadTokens: 2_000, cacheWriteTokens: 100)),
            .done,
        ])
    }

    func testAnthropicSpendingMaxTokensThinkingReadsAsLength() throws {
        let stream = """
            event: message_start
            data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":9,"output_tokens":1}}}

            event: content_block_start
            data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"so long"}}

            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}

            event: message_stop
            data: {"type":"message_stop"}


            """
        XCTAssertEqual(try decode(stream, AnthropicStreamDecoder()), [
            .reasoning("so long"), .finish(reason: "length"), .usage(Usage(promptTokens: 9, completionTokens: 64, totalTokens: 73)), .done,
        ])
    }

    func testAWholeAnthropicMessageGivesItsThinkingBlocks() throws {
        let message = #"{"id":"msg_3","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"hm","signature":"sig1"},{"type":"redacted_thinking","data":"opaque"},{"type":"text","text":"Yes."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"cache_read_input_tokens":7,"output_tokens":5}}"#
        XCTAssertEqual(try whole(message, AnthropicStreamDecoder()), [
            .reasoning("hm"), .reasoningReplay(["type": "thinking", "thinking": "hm", "signature": "sig1"]),
            .reasoningReplay(["type": "redacted_thinking", "data": "opaque"]), .content("Yes."), .finish(reason: "stop"),
            .usage(Usage(promptTokens: 10, completionTokens: 5, totalTokens: 15, cacheReadTokens: 7)),
        ])
    }

    // MARK: - Passed back

    private let call = ToolCall(id: "call_1", name: "weather", arguments: #"{"city":"Oslo"}"#)

    func testChatSendsReasoningContentOnToolCallTurnsOnly() {
        let chat = ReasoningReplay(api: "chat", provider: "deepseek", model: "deepseek-chat", text: "I should look it up.")
        var request = ChatRequest(model: "deepseek-chat", messages: [
            ChatMessage(role: .user, content: "hi"),
            ChatMessage(role: .assistant, content: "Hello.", reasoning: ReasoningReplay(api: "chat", provider: "deepseek", model: "deepseek-chat", text: "greet")),
            ChatMessage(role: .user, content: "weather?"),
            ChatMessage(role: .assistant, content: "", toolCalls: [call], reasoning: chat),
            ChatMessage(role: .tool, content: "sunny", toolCallID: "call_1", toolName: "weather"),
        ])
        XCTAssertEqual(body(request.jsonBody()), #"{"model":"deepseek-chat","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"weather?"},{"role":"assistant","content":"","reasoning_content":"I should look it up.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],"stream":true,"stream_options":{"include_usage":true}}"#)
        request.reasoningPassBack = .none
        XCTAssertFalse(body(request.jsonBody()).contains("reasoning_content"), "deepseek-reasoner takes none")
        // Another API's reasoning is not chat's to send.
        request.reasoningPassBack = .toolCalls
        request.messages[3].reasoning?.api = "anthropic"
        XCTAssertFalse(body(request.jsonBody()).contains("reasoning_content"))
    }

    func testAnthropicSendsTheBlocksFirstInTheToolCallTurnExactlyAsTheyCame() {
        let thinking: JSON = ["type": "thinking", "thinking": "look it up", "signature": "sig+/="]
        let redacted: JSON = ["type": "redacted_thinking", "data": "opaque=="]
        let replay = ReasoningReplay(api: "anthropic", provider: "claude", model: "claude", text: "look it up", items: [thinking, redacted])
        let request = ChatRequest(model: "claude", messages: [
            ChatMessage(role: .user, content: "weather?"),
            ChatMessage(role: .assistant, content: "Checking.", toolCalls: [call], reasoning: replay),
            ChatMessage(role: .tool, content: "sunny", toolCallID: "call_1", toolName: "weather"),
        ])
        XCTAssertEqual(body(AnthropicMessagesAPI().body(for: request)), #"{"model":"claude","max_tokens":1024,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"signature":"sig+/=","thinking":"look it up","type":"thinking"},{"data":"opaque==","type":"redacted_thinking"},{"text":"Checking.","type":"text"},{"id":"call_1","input":{"city":"Oslo"},"name":"weather","type":"tool_use"}]},{"role":"user","content":[{"content":"sunny","tool_use_id":"call_1","type":"tool_result"}]}],"stream":true}"#)
        // A turn that called no tool goes back as text alone.
        let plain = ChatRequest(model: "claude", messages: [
            ChatMessage(role: .user, content: "hi"), ChatMessage(role: .assistant, content: "Hello.", reasoning: replay),
            ChatMessage(role: .user, content: "again"),
        ])
        XCTAssertFalse(body(AnthropicMessagesAPI().body(for: plain)).contains("thinking"))
    }
    /// The breakpoints of the prompt cache go on the last block a turn may mark: never on a
    /// thinking block (the API refuses cache_control there), and the turn is written as blocks.
    func testPromptCacheBreakpointsSkipThinkingBlocksAndMarkTheTurnsTwoApart() {
        let thinking: JSON = ["type": "thinking", "thinking": "look it up", "signature": "sig"]
        let replay = ReasoningReplay(api: "anthropic", provider: "claude", model: "claude", text: "look it up", items: [thinking])
        var request = ChatRequest(model: "claude", messages: [
            ChatMessage(role: .system, content: "Be brief."),
            ChatMessage(role: .user, content: "weather?"),
            ChatMessage(role: .assistant, content: "", toolCalls: [call], reasoning: replay),
            ChatMessage(role: .tool, content: "sunny", toolCallID: "call_1", toolName: "weather"),
        ])
        let api = AnthropicMessagesAPI(options: AnthropicOptions(promptCache: true))
        XCTAssertEqual(body(api.body(for: request)), #"{"model":"claude","max_tokens":1024,"system":[{"cache_control":{"type":"ephemeral"},"text":"Be brief.","type":"text"}],"messages":[{"role":"user","content":[{"cache_control":{"type":"ephemeral"},"text":"weather?","type":"text"}]},{"role":"assistant","content":[{"signature":"sig","thinking":"look it up","type":"thinking"},{"id":"call_1","input":{"city":"Oslo"},"name":"weather","type":"tool_use"}]},{"role":"user","content":[{"cache_control":{"type":"ephemeral"},"content":"sunny","tool_use_id":"call_1","type":"tool_result"}]}],"stream":true}"#)
        // Off, nothing is marked and a turn of text alone stays a string.
        XCTAssertFalse(body(AnthropicMessagesAPI().body(for: request)).contains("cache_control"))
        // Two turns: only the newest is marked (there is none two before it).
        request.messages = [ChatMessage(role: .user, content: "hi")]
        XCTAssertEqual(body(api.body(for: request)), #"{"model":"claude","max_tokens":1024,"messages":[{"role":"user","content":[{"cache_control":{"type":"ephemeral"},"text":"hi","type":"text"}]}],"stream":true}"#)
    }
}

