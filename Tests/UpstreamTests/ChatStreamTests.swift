import XCTest

import Foundation
import SSE
import ServiceSettings
@testable import Upstream

final class ChatStreamDecoderTests: XCTestCase {

    // MARK: - Helpers

    private func decode(_ data: String, type: String = "message") throws -> [ChatStreamEvent] {
        var decoder = ChatStreamDecoder()
        return try decoder.decode(SSEEvent(type: type, data: data))
    }

    /// Raw SSE text through `SSEParser` and `ChatStreamDecoder`, the way the daemon uses them.
    private func decodeStream(_ text: String) throws -> [ChatStreamEvent] {
        var parser = SSEParser()
        var decoder = ChatStreamDecoder()
        var out: [ChatStreamEvent] = []
        for event in try parser.feed(Array(text.utf8)) {
            out += try decoder.decode(event)
        }
        parser.finish()
        return out
    }

    private func chunk(_ delta: String, finish: String = "null", extra: String = "") -> String {
        #"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":\#(delta),"logprobs":null,"finish_reason":\#(finish)}]\#(extra)}"#
    }

    private func assertMalformed(_ data: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try decode(data), file: file, line: line) { error in
            guard case .malformedChunk(let excerpt)? = error as? ChatStreamError else {
                return XCTFail("unexpected error \(error)", file: file, line: line)
            }
            XCTAssertLessThanOrEqual(excerpt.count, 200, file: file, line: line)
            XCTAssertFalse(excerpt.isEmpty, file: file, line: line)
        }
    }

    // MARK: - Full streams

    func testRealisticFullStream() throws {
        let text = """
            : OPENROUTER PROCESSING

            data: \(chunk(#"{"role":"assistant","content":"","refusal":null}"#))

            data: \(chunk(#"{"content":"Hello"}"#))

            data: \(chunk(#"{"content":","}"#))

            : keep-alive

            data: \(chunk(#"{"content":" wörld 👋"}"#))

            data: \(chunk("{}", finish: #""stop""#))

            data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

            data: [DONE]


            """
        XCTAssertEqual(try decodeStream(text), [
            .content("Hello"),
            .content(","),
            .content(" wörld 👋"),
            .finish(reason: "stop"),
            // The details the server reported are kept, zeros included.
            .usage(TokenUsage(promptTokens: 12, completionTokens: 4, totalTokens: 16, reasoningTokens: 0, cacheReadTokens: 0)),
            .done,
        ])
    }

    func testStreamWithoutUsageAndWithoutDone() throws {
        let text = """
            data: \(chunk(#"{"role":"assistant"}"#))

            data: \(chunk(#"{"content":"Hi"}"#))

            data: \(chunk("{}", finish: #""length""#))


            """
        XCTAssertEqual(try decodeStream(text), [.content("Hi"), .finish(reason: "length")])
    }

    func testUsageInsideChunkWithNonEmptyChoices() throws {
        // Some servers put the usage on the last content/finish chunk.
        let data = chunk(#"{"content":"end"}"#, finish: #""stop""#,
                         extra: #","usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}"#)
        XCTAssertEqual(try decode(data), [
            .content("end"),
            .finish(reason: "stop"),
            .usage(TokenUsage(promptTokens: 5, completionTokens: 7, totalTokens: 12)),
        ])
    }

    func testNullUsageIsIgnored() throws {
        XCTAssertEqual(try decode(chunk(#"{"content":"a"}"#, extra: #","usage":null"#)), [.content("a")])
    }

    func testUsageWithoutTotalOrWithFloatCounts() throws {
        XCTAssertEqual(
            try decode(#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#),
            [.usage(TokenUsage(promptTokens: 3, completionTokens: 4, totalTokens: 7))])
        XCTAssertEqual(
            try decode(#"{"usage":{"prompt_tokens":3.0,"completion_tokens":4,"total_tokens":7.0}}"#),
            [.usage(TokenUsage(promptTokens: 3, completionTokens: 4, totalTokens: 7))])
        // Non-integral or non-numeric counts read as absent.
        XCTAssertEqual(
            try decode(#"{"usage":{"prompt_tokens":"3","completion_tokens":4.5,"total_tokens":null}}"#),
            [.usage(TokenUsage(promptTokens: 0, completionTokens: 0, totalTokens: 0))])
    }

    func testUsageWithWrongTypeIsIgnored() throws {
        XCTAssertEqual(try decode(#"{"choices":[],"usage":"lots"}"#), [])
    }

    // MARK: - [DONE]

    func testDone() throws {
        XCTAssertEqual(try decode("[DONE]"), [.done])
        XCTAssertEqual(try decode("  [DONE] \n"), [.done])
        XCTAssertEqual(try decode("[DONE]", type: "done"), [.done])
    }

    func testDoneIsCaseSensitiveAndExact() {
        assertMalformed("[done]")
        assertMalformed("[DONE]x")
    }

    // MARK: - Content

    func testEmptyAndNullContentAreSkipped() throws {
        XCTAssertEqual(try decode(chunk(#"{"content":""}"#)), [])
        XCTAssertEqual(try decode(chunk(#"{"content":null}"#)), [])
        XCTAssertEqual(try decode(chunk(#"{"role":"assistant","content":null}"#)), [])
        XCTAssertEqual(try decode(chunk("{}")), [])
    }

    func testWhitespaceContentIsKept() throws {
        XCTAssertEqual(try decode(chunk(#"{"content":" "}"#)), [.content(" ")])
        XCTAssertEqual(try decode(chunk(#"{"content":"\n\n"}"#)), [.content("\n\n")])
    }

    func testEscapedContent() throws {
        XCTAssertEqual(
            try decode(chunk(#"{"content":"a \"quote\" \\ \u00e9 \ud83d\ude00 </b>"}"#)),
            [.content("a \"quote\" \\ é 😀 </b>")])
    }

    func testRefusalTextIsContent() throws {
        XCTAssertEqual(
            try decode(chunk(#"{"content":null,"refusal":"I can't help with that."}"#)),
            [.content("I can't help with that.")])
        XCTAssertEqual(try decode(chunk(#"{"refusal":""}"#)), [])
    }

    func testContentAsListOfTextParts() throws {
        XCTAssertEqual(
            try decode(chunk(#"{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}"#)),
            [.content("ab")])
    }

    func testContentOfWrongTypeIsIgnored() throws {
        XCTAssertEqual(try decode(chunk(#"{"content":42}"#, finish: #""stop""#)), [.finish(reason: "stop")])
    }

    func testReasoningContentIsReasoningNotContent() throws {
        XCTAssertEqual(try decode(chunk(#"{"reasoning_content":"thinking...","content":""}"#)), [.reasoning("thinking...")])
    }

    func testMessageInsteadOfDelta() throws {
        XCTAssertEqual(
            try decode(#"{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}"#),
            [.content("whole"), .finish(reason: "stop")])
    }

    // MARK: - Choices

    func testMissingOrEmptyChoices() throws {
        XCTAssertEqual(try decode(#"{"id":"x","object":"chat.completion.chunk"}"#), [])
        XCTAssertEqual(try decode(#"{"choices":[]}"#), [])
        XCTAssertEqual(try decode(#"{"choices":null}"#), [])
        XCTAssertEqual(try decode(#"{"choices":"nope"}"#), [])
        XCTAssertEqual(try decode(#"{"choices":[{}]}"#), [])
        XCTAssertEqual(try decode(#"{"choices":[{"index":0}]}"#), [])
    }

    func testOnlyChoiceZeroIsUsed() throws {
        XCTAssertEqual(
            try decode(#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}"#),
            [.content("mine")])
        XCTAssertEqual(try decode(#"{"choices":[{"index":1,"delta":{"content":"other"}}]}"#), [])
        // No index at all: the first choice.
        XCTAssertEqual(try decode(#"{"choices":[{"delta":{"content":"first"}},{"delta":{"content":"second"}}]}"#),
                       [.content("first")])
    }

    func testFinishReasons() throws {
        XCTAssertEqual(try decode(chunk("{}", finish: #""length""#)), [.finish(reason: "length")])
        XCTAssertEqual(try decode(chunk("{}", finish: #""content_filter""#)), [.finish(reason: "content_filter")])
        XCTAssertEqual(try decode(chunk("{}", finish: "null")), [])
        XCTAssertEqual(try decode(chunk("{}", finish: #""""#)), [])
    }

    func testContentAndFinishInOneChunkAreOrdered() throws {
        XCTAssertEqual(
            try decode(chunk(#"{"content":"last"}"#, finish: #""stop""#)),
            [.content("last"), .finish(reason: "stop")])
    }

    func testToolCallDeltasAreToolCallPiecesNotText() throws {
        let text = """
            data: \(chunk(#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#))

            data: \(chunk(#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]}"#))

            data: \(chunk(#"{"tool_calls":[{"index":0,"function":{"arguments":"ation\":\"Paris\"}"}}]}"#))

            data: \(chunk("{}", finish: #""tool_calls""#))

            data: [DONE]


            """
        XCTAssertEqual(try decodeStream(text), [
            .toolCall(ToolCallPiece(index: 0, id: "call_1", name: "get_weather", arguments: "")),
            .toolCall(ToolCallPiece(index: 0, id: nil, name: nil, arguments: "{\"loc")),
            .toolCall(ToolCallPiece(index: 0, id: nil, name: nil, arguments: "ation\":\"Paris\"}")),
            .finish(reason: "tool_calls"), .done,
        ])
    }

    func testUnknownKeysAreIgnored() throws {
        XCTAssertEqual(
            try decode(#"{"weird":[1,{"x":null}],"choices":[{"index":0,"delta":{"content":"a","audio":{"id":"x"}},"extra":true,"logprobs":{"content":[]}}],"service_tier":"default","x_groq":{"id":"req"}}"#),
            [.content("a")])
    }

    // MARK: - Errors

    func testErrorObjectMidStream() throws {
        let text = """
            data: \(chunk(#"{"content":"par"}"#))

            data: {"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}

            data: [DONE]


            """
        XCTAssertEqual(try decodeStream(text), [
            .content("par"),
            .error(UpstreamErrorInfo(message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded")),
            .done,
        ])
    }

    func testErrorWithNumericCode() throws {
        XCTAssertEqual(
            try decode(#"{"error":{"message":"Provider returned error","code":502,"metadata":{"raw":"x"}}}"#),
            [.error(UpstreamErrorInfo(message: "Provider returned error", type: nil, code: "502"))])
        XCTAssertEqual(
            try decode(#"{"error":{"message":"m","code":null,"type":null}}"#),
            [.error(UpstreamErrorInfo(message: "m", type: nil, code: nil))])
        XCTAssertEqual(
            try decode(#"{"error":{"message":"m","code":1.5}}"#),
            [.error(UpstreamErrorInfo(message: "m", type: nil, code: "1.5"))])
        XCTAssertEqual(
            try decode(#"{"error":{"message":"m","code":true}}"#),
            [.error(UpstreamErrorInfo(message: "m", type: nil, code: "true"))])
    }

    func testBareStringError() throws {
        XCTAssertEqual(try decode(#"{"error":"model overloaded"}"#), [.error(UpstreamErrorInfo(message: "model overloaded"))])
    }

    func testErrorObjectWithoutMessageStillHasAMessage() throws {
        let events = try decode(#"{"error":{"type":"server_error"}}"#)
        XCTAssertEqual(events, [.error(UpstreamErrorInfo(message: "server_error", type: "server_error", code: nil))])
        guard case .error(let info)? = try decode(#"{"error":{}}"#).first else { return XCTFail("no error") }
        XCTAssertFalse(info.message.isEmpty)
    }

    func testNullErrorIsNotAnError() throws {
        XCTAssertEqual(try decode(chunk(#"{"content":"a"}"#, extra: #","error":null"#)), [.content("a")])
    }

    func testTopLevelErrorObjectVLLMStyle() throws {
        XCTAssertEqual(
            try decode(#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}"#),
            [.error(UpstreamErrorInfo(message: "This model's maximum context length is 4096 tokens.", type: "BadRequestError", code: "400"))])
    }

    func testErrorEventWithJSONErrorObject() throws {
        let text = """
            event: error
            data: {"error":{"message":"upstream timeout","type":"timeout","code":"504"}}


            """
        XCTAssertEqual(try decodeStream(text), [.error(UpstreamErrorInfo(message: "upstream timeout", type: "timeout", code: "504"))])
    }

    func testErrorEventWithPlainText() throws {
        XCTAssertEqual(try decode("  something broke \n", type: "error"), [.error(UpstreamErrorInfo(message: "something broke"))])
        XCTAssertEqual(try decode("[DONE]", type: "error"), [.error(UpstreamErrorInfo(message: "[DONE]"))])
    }

    func testErrorEventWithOtherJSON() throws {
        XCTAssertEqual(try decode(#"{"message":"overloaded"}"#, type: "error"), [.error(UpstreamErrorInfo(message: "overloaded"))])
        XCTAssertEqual(try decode(#"{"foo":1}"#, type: "error"), [.error(UpstreamErrorInfo(message: #"{"foo":1}"#))])
        XCTAssertEqual(try decode(#"[1,2]"#, type: "error"), [.error(UpstreamErrorInfo(message: "[1,2]"))])
    }

    func testErrorEventWithEmptyData() throws {
        guard case .error(let info)? = try decode("", type: "error").first else { return XCTFail("no error") }
        XCTAssertFalse(info.message.isEmpty)
    }

    // MARK: - Malformed chunks and other event types

    func testMalformedJSONThrows() {
        assertMalformed(#"{"choices":[{"delta":{"content":"a"}"#)
        assertMalformed("not json at all")
        assertMalformed("{bad}")
    }

    func testNonObjectJSONThrows() {
        assertMalformed("[1,2,3]")
        assertMalformed(#""a string""#)
        assertMalformed("42")
        assertMalformed("null")
        assertMalformed("true")
    }

    func testMalformedExcerptIsShortPrefix() {
        let long = "x" + String(repeating: "é", count: 1000)
        XCTAssertThrowsError(try decode(long)) { error in
            guard case .malformedChunk(let excerpt)? = error as? ChatStreamError else { return XCTFail("\(error)") }
            XCTAssertLessThanOrEqual(excerpt.count, 200)
            XCTAssertGreaterThanOrEqual(excerpt.count, 100)
            XCTAssertTrue(excerpt.hasPrefix("xéé"))
        }
        XCTAssertThrowsError(try decode("oops")) { error in
            XCTAssertEqual(error as? ChatStreamError, .malformedChunk("oops"))
        }
    }

    func testWhiteSpaceAroundAChunkIsFine() throws {
        XCTAssertEqual(try decode(" \n\t" + chunk(#"{"content":"a"}"#) + "\r\n "), [.content("a")])
        XCTAssertEqual(try decode("\u{00A0}" + chunk(#"{"content":"b"}"#) + "\u{2028}"), [.content("b")], "Unicode white space too")
        XCTAssertEqual(try decode("\u{3000}[DONE]\u{00A0}"), [.done])
    }

    func testEmptyOrWhitespaceDataIsIgnored() throws {
        XCTAssertEqual(try decode(""), [])
        XCTAssertEqual(try decode(" \n "), [])
    }

    func testOtherEventTypes() throws {
        // Non-JSON payloads of unknown event types are ignored rather than fatal...
        XCTAssertEqual(try decode("ping", type: "ping"), [])
        XCTAssertEqual(try decode("{oops", type: "keepalive"), [])
        // ...and JSON chunks are decoded whatever the event is called.
        XCTAssertEqual(try decode(chunk(#"{"content":"x"}"#), type: "completion"), [.content("x")])
    }

    func testDecoderIsReusableAcrossEvents() throws {
        var decoder = ChatStreamDecoder()
        XCTAssertThrowsError(try decoder.decode(SSEEvent(data: "garbage")))
        XCTAssertEqual(try decoder.decode(SSEEvent(data: chunk(#"{"content":"ok"}"#))), [.content("ok")])
        XCTAssertEqual(try decoder.decode(SSEEvent(data: "[DONE]")), [.done])
    }

    // MARK: - Usage

    func testUsageReadsSnakeCaseKeysAndFillsTheTotal() throws {
        var decoder = ChatStreamDecoder()
        let events = try decoder.decode(SSEEvent(data: #"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#))
        XCTAssertEqual(events, [.usage(TokenUsage(promptTokens: 1, completionTokens: 2, totalTokens: 3))])
    }
}

final class ChatRequestTests: XCTestCase {

    private func object(_ request: ChatRequest) throws -> [String: Any] {
        let body = Data(request.jsonBody())
        return try XCTUnwrap(JSONSerialization.jsonObject(with: body) as? [String: Any])
    }

    func testMinimalBodyRoundTrips() throws {
        let request = ChatRequest(model: "gpt-4o-mini", messages: [
            ChatMessage(role: .system, content: "Be brief."),
            ChatMessage(role: .user, content: "Hi"),
        ])
        let json = try object(request)
        XCTAssertEqual(Set(json.keys), ["model", "messages", "stream", "stream_options"])
        XCTAssertEqual(json["model"] as? String, "gpt-4o-mini")
        XCTAssertEqual(json["stream"] as? Bool, true)
        let streamOptions = try XCTUnwrap(json["stream_options"] as? [String: Any])
        XCTAssertEqual(Set(streamOptions.keys), ["include_usage"])
        XCTAssertEqual(streamOptions["include_usage"] as? Bool, true)
        let messages = try XCTUnwrap(json["messages"] as? [[String: Any]])
        XCTAssertEqual(messages.count, 2)
        for message in messages { XCTAssertEqual(Set(message.keys), ["role", "content"]) }
        XCTAssertEqual(messages.map { $0["role"] as? String }, ["system", "user"])
        XCTAssertEqual(messages.map { $0["content"] as? String }, ["Be brief.", "Hi"])
    }

    func testExactCompactBytes() {
        let request = ChatRequest(model: "m", messages: [ChatMessage(role: .user, content: "x")], temperature: 0.5, maxTokens: 10)
        XCTAssertEqual(
            String(decoding: request.jsonBody(), as: UTF8.self),
            #"{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"max_tokens":10}"#)
    }

    func testOptionalFields() throws {
        let request = ChatRequest(model: "m", messages: [], temperature: 0.7, maxTokens: 256)
        let json = try object(request)
        XCTAssertEqual(Set(json.keys), ["model", "messages", "stream", "stream_options", "temperature", "max_tokens"])
        XCTAssertEqual(json["temperature"] as? Double, 0.7)
        XCTAssertEqual(json["max_tokens"] as? Int, 256)
        XCTAssertEqual((json["messages"] as? [Any])?.count, 0)

        let onlyTemperature = try object(ChatRequest(model: "m", messages: [], temperature: 0))
        XCTAssertEqual(onlyTemperature["temperature"] as? Double, 0)
        XCTAssertNil(onlyTemperature["max_tokens"])

        let onlyMax = try object(ChatRequest(model: "m", messages: [], maxTokens: 1))
        XCTAssertNil(onlyMax["temperature"])
        XCTAssertEqual(onlyMax["max_tokens"] as? Int, 1)
    }

    func testTemperatureValuesRoundTrip() throws {
        for value in [0.0, 1.0, 2.0, 0.1, 1e-5, 1.25, 123456.789] {
            let json = try object(ChatRequest(model: "m", messages: [], temperature: value))
            XCTAssertEqual(json["temperature"] as? Double, value, "\(value)")
        }
    }

    func testNonFiniteTemperatureIsOmitted() throws {
        for value in [Double.nan, .infinity, -.infinity] {
            let json = try object(ChatRequest(model: "m", messages: [], temperature: value))
            XCTAssertNil(json["temperature"])
        }
    }

    func testSpecialCharactersRoundTrip() throws {
        let tricky = "quote \" backslash \\ slash / newline \n cr \r tab \t nul \u{0} bell \u{7} esc \u{1B} del \u{7F} "
            + "é 世界 👋🏽 \u{2028}\u{2029} </script> {\"json\":true}"
        let request = ChatRequest(model: "weird \"model\"/v1", messages: [ChatMessage(role: .user, content: tricky)])
        let body = request.jsonBody()
        // Compact: no raw control characters anywhere (they are all escaped).
        XCTAssertFalse(body.contains { $0 < 0x20 })
        let json = try object(request)
        XCTAssertEqual(json["model"] as? String, "weird \"model\"/v1")
        let messages = try XCTUnwrap(json["messages"] as? [[String: Any]])
        XCTAssertEqual(messages.first?["content"] as? String, tricky)
    }

    func testBodyIsValidUTF8() {
        let request = ChatRequest(model: "m", messages: [ChatMessage(role: .user, content: "日本語 🎌")])
        let body = request.jsonBody()
        XCTAssertNotNil(String(validating: body, as: UTF8.self))
        XCTAssertTrue(String(decoding: body, as: UTF8.self).contains("日本語 🎌"))
    }
}

final class UpstreamErrorMessageTests: XCTestCase {

    private func info(_ body: String, status: Int = 400) -> UpstreamErrorInfo {
        upstreamErrorMessage(status: status, body: Array(body.utf8))
    }

    func testOpenAIStyle() {
        let body = #"{"error":{"message":"Incorrect API key provided: sk-xxx.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#
        XCTAssertEqual(info(body, status: 401), UpstreamErrorInfo(
            message: "Incorrect API key provided: sk-xxx.", type: "invalid_request_error", code: "invalid_api_key"))
    }

    func testOpenAIStyleWithNumericCodeAndNulls() {
        XCTAssertEqual(info(#"{"error":{"message":"Too many requests","code":429}}"#),
                       UpstreamErrorInfo(message: "Too many requests", type: nil, code: "429"))
        XCTAssertEqual(info(#"{"error":{"message":"x","type":null,"code":null}}"#),
                       UpstreamErrorInfo(message: "x", type: nil, code: nil))
    }

    func testErrorString() {
        XCTAssertEqual(info(#"{"error":"model 'llama9' not found"}"#, status: 404),
                       UpstreamErrorInfo(message: "model 'llama9' not found"))
    }

    func testTopLevelMessage() {
        XCTAssertEqual(info(#"{"message":"Service unavailable"}"#), UpstreamErrorInfo(message: "Service unavailable"))
        XCTAssertEqual(
            info(#"{"object":"error","message":"bad temperature","type":"BadRequestError","param":null,"code":400}"#),
            UpstreamErrorInfo(message: "bad temperature", type: "BadRequestError", code: "400"))
    }

    func testDetailString() {
        XCTAssertEqual(info(#"{"detail":"Not Found"}"#, status: 404), UpstreamErrorInfo(message: "Not Found"))
    }

    func testDetailFastAPIValidationList() {
        let body = #"{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"},{"loc":["body","model"],"msg":"str type expected","type":"type_error.str"}]}"#
        XCTAssertEqual(info(body, status: 422).message, "field required; str type expected")
    }

    func testDetailObject() {
        XCTAssertEqual(info(#"{"detail":{"message":"quota exceeded"}}"#).message, "quota exceeded")
    }

    func testPrecedenceErrorOverMessageOverDetail() {
        XCTAssertEqual(info(#"{"detail":"d","message":"m","error":{"message":"e"}}"#).message, "e")
        XCTAssertEqual(info(#"{"detail":"d","message":"m"}"#).message, "m")
        // A blank error message falls through to the next shape, keeping the error's type/code.
        XCTAssertEqual(info(#"{"error":{"message":"  ","type":"t","code":"c"},"detail":"d"}"#),
                       UpstreamErrorInfo(message: "d", type: "t", code: "c"))
    }

    func testMessageIsTrimmed() {
        XCTAssertEqual(info(#"{"error":{"message":"  spaced out \n"}}"#).message, "spaced out")
    }

    func testEmptyBody() {
        XCTAssertEqual(upstreamErrorMessage(status: 502, body: []), UpstreamErrorInfo(message: "HTTP 502"))
        XCTAssertEqual(info(" \r\n\t ", status: 503), UpstreamErrorInfo(message: "HTTP 503"))
    }

    func testPlainTextBody() {
        XCTAssertEqual(info("  Bad Gateway\n", status: 502), UpstreamErrorInfo(message: "Bad Gateway"))
    }

    func testLongNonJSONBodyIsCutTo300Characters() {
        let html = "<html><head><title>504 Gateway Time-out</title></head><body>" + String(repeating: "é", count: 1000) + "</body></html>"
        let result = info(html, status: 504)
        XCTAssertEqual(result.message.count, 300)
        XCTAssertTrue(result.message.hasPrefix("<html><head><title>504 Gateway Time-out</title>"))
        XCTAssertTrue(result.message.hasSuffix("…"))
        XCTAssertEqual(info(String(repeating: "a", count: 300)).message, String(repeating: "a", count: 300))
        XCTAssertEqual(info(String(repeating: "a", count: 301)).message.count, 300)
    }

    func testJSONWithoutKnownKeysFallsBackToText() {
        XCTAssertEqual(info(#"{"status":"fail"}"#).message, #"{"status":"fail"}"#)
        XCTAssertEqual(info(#"["error"]"#).message, #"["error"]"#)
        XCTAssertEqual(info(#"{"error": {"message": "#).message, #"{"error": {"message":"#)
    }

    func testLongJSONMessageIsCapped() {
        let long = String(repeating: "m", count: 5000)
        let result = info(#"{"error":{"message":"\#(long)"}}"#)
        XCTAssertLessThanOrEqual(result.message.count, 1000)
        XCTAssertTrue(result.message.hasPrefix("mmmm"))
    }

    func testInvalidUTF8BodyDoesNotCrash() {
        let result = upstreamErrorMessage(status: 500, body: [0xFF, 0xFE, 0x41, 0xC3])
        XCTAssertFalse(result.message.isEmpty)
        XCTAssertTrue(result.message.contains("A"))
    }

    func testNeverEmpty() {
        let bodies = ["", " ", "{}", #"{"error":""}"#, #"{"error":{}}"#, #"{"error":null}"#, #"{"message":""}"#,
                      #"{"detail":[]}"#, #"{"detail":null}"#, "null", "\"\"", "\n\n"]
        for body in bodies {
            XCTAssertFalse(info(body).message.isEmpty, body)
        }
    }
}
