import ConfabProtocol
import XCTest
@testable import Upstream

/// A streamed request answered with the whole reply in one JSON body, as some proxies do:
/// each API's decoder reads it as the events the stream would have given.
final class WholeReplyTests: XCTestCase {
    private func whole(_ body: String, _ decoder: some ChatEventDecoder) throws -> [ChatStreamEvent] {
        var decoder = decoder
        var events: [ChatStreamEvent] = []
        try decoder.decodeWhole(Array(body.utf8), into: &events)
        return events
    }

    func testChatCompletionGivesTextFinishAndUsage() throws {
        let body = #"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#
        XCTAssertEqual(try whole(body, ChatStreamDecoder()), [
            .content("Hello there"), .finish(reason: "stop"), .usage(Usage(promptTokens: 7, completionTokens: 2, totalTokens: 9)),
        ])
    }

    func testChatCompletionWithToolCallsAndNullContentGivesTheCalls() throws {
        let body = #"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}},{"id":"call_2","type":"function","function":{"name":"time","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#
        let events = try whole(body, ChatStreamDecoder())
        var assembler = ToolCallAssembler()
        for case .toolCall(let piece) in events { assembler.add(piece) }
        XCTAssertEqual(assembler.calls, [ToolCall(id: "call_1", name: "weather", arguments: #"{"city":"Rome"}"#),
                                         ToolCall(id: "call_2", name: "time", arguments: "{}")])
        XCTAssertEqual(events.last, .finish(reason: "tool_calls"))
        XCTAssertFalse(events.contains { if case .content = $0 { true } else { false } }, "null content is no text")
    }

    func testTextCompletionDropsTheLeadingSpaceAsItsStreamWould() throws {
        let body = #"{"object":"text_completion","choices":[{"text":" Hi","index":0,"logprobs":null,"finish_reason":"length"}]}"#
        XCTAssertEqual(try whole(body, CompletionsStreamDecoder()), [.content("Hi"), .finish(reason: "length")])
    }

    func testAnthropicMessageGivesTextToolUseStopReasonAndUsage() throws {
        let body = #"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Rome"}}],"stop_reason":"tool_use","usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":8}}"#
        XCTAssertEqual(try whole(body, AnthropicStreamDecoder()), [
            .content("Let me look."),
            .toolCall(ToolCallPiece(index: 0, id: "toolu_1", name: "weather", arguments: #"{"city":"Rome"}"#)),
            .finish(reason: "tool_calls"),
            .usage(Usage(promptTokens: 25, completionTokens: 8, totalTokens: 33, cacheReadTokens: 5)),
        ])
    }

    func testAnErrorBodyIsAnErrorAndJSONThatIsNoReplyGivesNothing() throws {
        XCTAssertEqual(try whole(#"{"error":{"message":"no such model","type":"invalid_request_error"}}"#, ChatStreamDecoder()),
                       [.error(UpstreamErrorInfo(message: "no such model", type: "invalid_request_error"))])
        XCTAssertEqual(try whole(#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, AnthropicStreamDecoder()),
                       [.error(UpstreamErrorInfo(message: "Overloaded", type: "overloaded_error"))])
        XCTAssertEqual(try whole(#"{"object":"list","data":[]}"#, ChatStreamDecoder()), [])
        XCTAssertEqual(try whole(#"{"type":"ping"}"#, AnthropicStreamDecoder()), [])
        XCTAssertThrowsError(try whole("[1,2]", AnthropicStreamDecoder()))
    }
}
