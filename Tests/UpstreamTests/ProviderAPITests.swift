import XCTest

import ConfabProtocol
import SSE
import ServiceSettings
@testable import Upstream

/// Every way of feeding `text` to a decoder: whole, and cut in two at every byte.
private func decodeAtEverySplit(_ text: String, _ makeDecoder: () -> any ChatEventDecoder,
                                file: StaticString = #filePath, line: UInt = #line) throws -> [ChatStreamEvent] {
    let bytes = Array(text.utf8)
    func run(_ pieces: [[UInt8]]) throws -> [ChatStreamEvent] {
        var parser = SSEParser()
        var decoder = makeDecoder()
        var out: [ChatStreamEvent] = []
        for piece in pieces {
            for event in try parser.feed(piece) { out += try decoder.decode(event) }
        }
        parser.finish()
        return out
    }
    let whole = try run([bytes])
    for cut in 1..<bytes.count {
        let split = try run([Array(bytes[..<cut]), Array(bytes[cut...])])
        XCTAssertEqual(split, whole, "cut at byte \(cut)", file: file, line: line)
    }
    // And one byte at a time.
    XCTAssertEqual(try run(bytes.map { [$0] }), whole, "byte by byte", file: file, line: line)
    return whole
}

private func json(_ bytes: [UInt8]) throws -> JSON { try JSON.parse(bytes) }

private let conversation = [
    ChatMessage(role: .system, content: "Be brief."),
    ChatMessage(role: .user, content: "hello"),
    ChatMessage(role: .assistant, content: "Hi."),
    ChatMessage(role: .user, content: "how are you?"),
]

final class AnthropicMessagesAPITests: XCTestCase {
    private let stream = """
        event: message_start
        data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":5,"output_tokens":1}}}

        event: content_block_start
        data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

        event: ping
        data: {"type": "ping"}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", wörld 👋"}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\""}}

        event: content_block_stop
        data: {"type":"content_block_stop","index":0}

        event: message_delta
        data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

        event: message_stop
        data: {"type":"message_stop"}


        """

    func testTheWholeEventSequenceAtEverySplit() throws {
        XCTAssertEqual(try decodeAtEverySplit(stream, { AnthropicStreamDecoder() }), [
            .content("Hello"),
            .content(", wörld 👋"),
            .finish(reason: "stop"),
            .usage(Usage(promptTokens: 30, completionTokens: 15, totalTokens: 45, cacheReadTokens: 5)),
            .done,
        ])
    }

    func testStopReasonsInOpenAIWords() throws {
        for (stop, finish) in [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"), ("tool_use", "tool_calls"),
                               ("refusal", "content_filter"), ("pause_turn", "pause_turn")] {
            var decoder = AnthropicStreamDecoder()
            let events = try decoder.decode(SSEEvent(type: "message_delta", data: #"{"type":"message_delta","delta":{"stop_reason":"\#(stop)"}}"#))
            XCTAssertEqual(events, [.finish(reason: finish)], stop)
        }
    }

    func testAnErrorEventMidStream() throws {
        let text = """
            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Par"}}

            event: error
            data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}


            """
        XCTAssertEqual(try decodeAtEverySplit(text, { AnthropicStreamDecoder() }), [
            .content("Par"), .error(UpstreamErrorInfo(message: "Overloaded", type: "overloaded_error")),
        ])
        var decoder = AnthropicStreamDecoder()
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "error", data: "upstream went away")),
                       [.error(UpstreamErrorInfo(message: "upstream went away"))])
    }

    func testTheTypeInTheDataWinsOverAMissingEventLine() throws {
        var decoder = AnthropicStreamDecoder()
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message", data: #"{"type":"message_stop"}"#)), [.done])
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "some_new_event", data: #"{"type":"some_new_event"}"#)), [])
    }

    func testUnreadableDataIsAProtocolError() {
        var decoder = AnthropicStreamDecoder()
        XCTAssertThrowsError(try decoder.decode(SSEEvent(type: "content_block_delta", data: #"{"type":"content_block_delta","delta":"#)))
    }

    func testUsageWithoutMessageStartCountsOutputOnly() throws {
        var decoder = AnthropicStreamDecoder()
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message_delta", data: #"{"type":"message_delta","delta":{},"usage":{"output_tokens":7}}"#)),
                       [.usage(Usage(promptTokens: 0, completionTokens: 7, totalTokens: 7))])
    }

    func testTheRequest() throws {
        let api = AnthropicMessagesAPI(options: AnthropicOptions(version: "2024-01-01"))
        var chat = ChatRequest(model: "claude-x", messages: conversation, maxTokens: 300)
        chat.temperature = 0.5
        let config = UpstreamConfig(baseURL: "https://api.example.test/v1/", apiKey: "sk-ant-test", model: nil)
        let request = api.request(for: chat, config: config)
        XCTAssertEqual(request.url, "https://api.example.test/v1/messages")
        XCTAssertEqual(request.headers, ["content-type: application/json", "accept: text/event-stream",
                                         "anthropic-version: 2024-01-01", "x-api-key: sk-ant-test"])
        XCTAssertFalse(request.headers.contains { $0.lowercased().hasPrefix("authorization") })
        let body = try json(request.body)
        XCTAssertEqual(body["model"], "claude-x")
        XCTAssertEqual(body["max_tokens"], 300)
        XCTAssertEqual(body["system"], "Be brief.")
        XCTAssertEqual(body["stream"], true)
        XCTAssertEqual(body["temperature"], 0.5)
        XCTAssertEqual(body["messages"], [["role": "user", "content": "hello"], ["role": "assistant", "content": "Hi."],
                                          ["role": "user", "content": "how are you?"]])
    }

    func testMaxTokensIsAlwaysSentAndSystemOnlyWhenThere() throws {
        let body = try json(AnthropicMessagesAPI().body(for: ChatRequest(model: "m", messages: [ChatMessage(role: .user, content: "hi")])))
        XCTAssertEqual(body["max_tokens"], .int(AnthropicOptions.defaultMaxTokens))
        XCTAssertNil(body["system"])
        XCTAssertNil(body["temperature"])
    }

    func testTurnsAlternateStartWithTheUserAndAreNeverEmpty() {
        let api = AnthropicMessagesAPI()
        let turns = api.turns(of: ChatRequest(model: "m", messages: [
            ChatMessage(role: .system, content: "one"), ChatMessage(role: .system, content: "two"),
            ChatMessage(role: .assistant, content: "Welcome!"),
            ChatMessage(role: .user, content: "a"), ChatMessage(role: .assistant, content: ""),
            ChatMessage(role: .user, content: "b"),
        ]))
        XCTAssertEqual(turns.system, "one\n\ntwo")
        XCTAssertEqual(turns.messages, [AnthropicTurn(role: .user, text: "."), AnthropicTurn(role: .assistant, text: "Welcome!"),
                                        AnthropicTurn(role: .user, text: "a\n\nb")])
    }

    func testAContinuationIsTheFinalAssistantTurnWithoutTrailingWhiteSpace() throws {
        let api = AnthropicMessagesAPI()
        let chat = ChatRequest(model: "m", messages: Array(conversation.prefix(2)), continuing: "Once upon a time ")
        XCTAssertEqual(api.turns(of: chat).messages.last, AnthropicTurn(role: .assistant, text: "Once upon a time"))
        XCTAssertEqual(try json(api.body(for: chat))["messages"]?.array?.count, 2, "no instruction to continue: the API goes on by itself")
        // The white space cut off the turn is already in the reply: the continuation's own is dropped.
        var decoder = api.makeDecoder(for: chat)
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "content_block_delta",
            data: #"{"type":"content_block_delta","delta":{"type":"text_delta","text":" there"}}"#)), [.content("there")])
        var plain = api.makeDecoder(for: ChatRequest(model: "m", messages: [], continuing: "Once"))
        XCTAssertEqual(try plain.decode(SSEEvent(type: "content_block_delta",
            data: #"{"type":"content_block_delta","delta":{"type":"text_delta","text":" there"}}"#)), [.content(" there")])
    }

    func testErrorAnswersMapToReplyErrorCodes() {
        let api = AnthropicMessagesAPI()
        func body(_ type: String, _ message: String) -> [UInt8] { Array(#"{"type":"error","error":{"type":"\#(type)","message":"\#(message)"}}"#.utf8) }
        XCTAssertEqual(api.failure(status: 401, body: body("authentication_error", "invalid x-api-key")),
                       MessageError(code: .upstreamAuth, message: "invalid x-api-key", status: 401))
        XCTAssertEqual(api.failure(status: 403, body: body("permission_error", "no")).code, .upstreamAuth)
        XCTAssertEqual(api.failure(status: 404, body: body("not_found_error", "model: claude-nope")),
                       MessageError(code: .upstreamHTTP, message: "model: claude-nope", status: 404))
        XCTAssertEqual(api.failure(status: 429, body: body("rate_limit_error", "slow down")).code, .rateLimited)
        XCTAssertEqual(api.failure(status: 529, body: body("overloaded_error", "Overloaded")),
                       MessageError(code: .upstreamHTTP, message: "Overloaded", status: 529))
    }

    func testAMissingKeyIsNotConfigured() {
        XCTAssertEqual(AnthropicMessagesAPI().missingConfiguration(UpstreamConfig(baseURL: "http://127.0.0.1:1", apiKey: nil))?.code, .notConfigured)
        XCTAssertNil(AnthropicMessagesAPI().missingConfiguration(UpstreamConfig(apiKey: "k")))
    }
}

final class OpenAICompletionsAPITests: XCTestCase {
    private func chunk(_ text: String, finish: String = "null") -> String {
        #"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":"\#(text)","index":0,"logprobs":null,"finish_reason":\#(finish)}]}"#
    }

    func testTheStreamAtEverySplit() throws {
        let text = """
            data: \(chunk(" Hel"))

            data: \(chunk("lo wörld"))

            data: \(chunk("", finish: #""length""#))

            data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}

            data: [DONE]


            """
        XCTAssertEqual(try decodeAtEverySplit(text, { CompletionsStreamDecoder() }), [
            .content("Hel"), .content("lo wörld"), .finish(reason: "length"),
            .usage(Usage(promptTokens: 9, completionTokens: 2, totalTokens: 11)), .done,
        ])
    }

    func testLeadingWhiteSpaceIsDroppedAcrossPiecesButNotInAContinuation() throws {
        var decoder = CompletionsStreamDecoder()
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message", data: chunk(" "))), [])
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message", data: chunk(" Hi"))), [.content("Hi")])
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message", data: chunk(" there"))), [.content(" there")])
        var continuing = OpenAICompletionsAPI().makeDecoder(for: ChatRequest(model: "m", messages: [], continuing: "Once"))
        XCTAssertEqual(try continuing.decode(SSEEvent(type: "message", data: chunk(" upon"))), [.content(" upon")])
    }

    func testChatDeltasAreNotCompletionText() throws {
        var decoder = CompletionsStreamDecoder()
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "message", data: #"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#)), [])
        var chat = ChatStreamDecoder()
        XCTAssertEqual(try chat.decode(SSEEvent(type: "message", data: chunk("x"))), [])
    }

    func testErrorsInTheStream() throws {
        let text = """
            data: \(chunk("Par"))

            data: {"error":{"message":"fake mid-stream error","type":"server_error","code":"fake_mid_stream"}}


            """
        XCTAssertEqual(try decodeAtEverySplit(text, { CompletionsStreamDecoder() }), [
            .content("Par"), .error(UpstreamErrorInfo(message: "fake mid-stream error", type: "server_error", code: "fake_mid_stream")),
        ])
    }

    func testTheTranscriptAndTheRequest() throws {
        let api = OpenAICompletionsAPI()
        let chat = ChatRequest(model: "davinci", messages: conversation, maxTokens: 64)
        XCTAssertEqual(api.transcript(of: chat), "Be brief.\n\nHuman: hello\nAI: Hi.\nHuman: how are you?\nAI:")
        let request = api.request(for: chat, config: UpstreamConfig(baseURL: "http://127.0.0.1:8080/v1", apiKey: "sk-c", model: nil))
        XCTAssertEqual(request.url, "http://127.0.0.1:8080/v1/completions")
        XCTAssertEqual(request.headers, ["Content-Type: application/json", "Accept: text/event-stream", "Authorization: Bearer sk-c"])
        let body = try json(request.body)
        XCTAssertEqual(body["model"], "davinci")
        XCTAssertEqual(body["prompt"]?.string, api.transcript(of: chat))
        XCTAssertEqual(body["stop"], ["Human:", "AI:"])
        XCTAssertEqual(body["stream"], true)
        XCTAssertEqual(body["max_tokens"], 64)
        XCTAssertNil(body["messages"])
    }

    func testLabelsStopSequencesAndAContinuation() throws {
        let api = OpenAICompletionsAPI(options: CompletionsOptions(userLabel: "User:", assistantLabel: "Bot:", stop: ["\nUser:"]))
        let chat = ChatRequest(model: "m", messages: [ChatMessage(role: .user, content: "tell a story")], continuing: "Once upon")
        XCTAssertEqual(api.transcript(of: chat), "User: tell a story\nBot: Once upon")
        XCTAssertEqual(try json(api.body(for: chat))["stop"], ["\nUser:"])
        XCTAssertEqual(CompletionsOptions(userLabel: "Q:", assistantLabel: "A:").stop, ["Q:", "A:"], "the labels are the default stop sequences")
        let none = OpenAICompletionsAPI(options: CompletionsOptions(stop: []))
        XCTAssertNil(try json(none.body(for: chat))["stop"], "an empty list sends no stop")
    }

    func testErrorAnswers() {
        let api = OpenAICompletionsAPI()
        let notFound = Array(#"{"error":{"message":"The model `x` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#.utf8)
        XCTAssertEqual(api.failure(status: 404, body: notFound), MessageError(code: .upstreamHTTP, message: "The model `x` does not exist", status: 404))
        XCTAssertEqual(api.failure(status: 401, body: []).code, .upstreamAuth)
        XCTAssertEqual(api.failure(status: 429, body: []).code, .rateLimited)
    }
}

final class ProviderHeadersTests: XCTestCase {
    func testExtraHeadersAreAddedAndReplaceTheAdaptersOwnByName() {
        let request = UpstreamRequest(url: "u", headers: ["Content-Type: application/json", "Authorization: Bearer k"], body: [])
        let extra = [HTTPHeader(name: "X-Team", value: "blue"), HTTPHeader(name: "authorization", value: "Token t")]
        XCTAssertEqual(request.adding(extra).headers, ["Content-Type: application/json", "X-Team: blue", "authorization: Token t"])
        XCTAssertEqual(request.adding([]).headers, request.headers)
    }

    func testEachAPIHasItsAdapter() {
        XCTAssertTrue(ProviderAPI.chat.adapter is OpenAIChatAPI)
        XCTAssertTrue(ProviderAPI.completions(CompletionsOptions()).adapter is OpenAICompletionsAPI)
        XCTAssertTrue(ProviderAPI.anthropic(AnthropicOptions()).adapter is AnthropicMessagesAPI)
    }
}

final class SamplingParameterBodyTests: XCTestCase {
    private func json(_ bytes: [UInt8]) throws -> JSON { try JSON.parse(bytes) }

    func testAProfilesStopAddsToTheTranscriptsLabels() throws {
        var chat = ChatRequest(model: "davinci", messages: [ChatMessage(role: .user, content: "hi")])
        chat.params.stop = ["\n\n", "AI:"]
        chat.params.seed = 5
        let body = try json(OpenAICompletionsAPI().body(for: chat))
        XCTAssertEqual(body["stop"], ["Human:", "AI:", "\n\n"])
        XCTAssertEqual(body["seed"], 5)
    }

    func testNonFiniteNumbersAreLeftOut() throws {
        var chat = ChatRequest(model: "m", messages: [])
        chat.params = SamplingParameters(topP: .nan, presencePenalty: .infinity, frequencyPenalty: 0.5)
        let body = try json(chat.jsonBody())
        XCTAssertNil(body["top_p"])
        XCTAssertNil(body["presence_penalty"])
        XCTAssertEqual(body["frequency_penalty"], 0.5)
    }
}
