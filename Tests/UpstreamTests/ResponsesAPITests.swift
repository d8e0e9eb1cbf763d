import XCTest

import ConfabProtocol
import SSE
import ServiceSettings
@testable import Upstream

/// Decodes `text` as one stream, whole and cut at every byte: the events must be the same.
private func decodeAtEverySplit(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [ChatStreamEvent] {
    let bytes = Array(text.utf8)
    func run(_ pieces: [[UInt8]]) throws -> [ChatStreamEvent] {
        var parser = SSEParser()
        var decoder = ResponsesStreamDecoder()
        var out: [ChatStreamEvent] = []
        for piece in pieces {
            for event in try parser.feed(piece) { out += try decoder.decode(event) }
        }
        parser.finish()
        return out
    }
    let whole = try run([bytes])
    for cut in stride(from: 1, to: bytes.count, by: 7) {
        XCTAssertEqual(try run([Array(bytes[..<cut]), Array(bytes[cut...])]), whole, "cut at byte \(cut)", file: file, line: line)
    }
    return whole
}

private func body(_ chat: ChatRequest) throws -> JSON { try JSON.parse(OpenAIResponsesAPI().body(for: chat)) }

final class ResponsesStreamDecoderTests: XCTestCase {
    /// The text stream of OpenAI's API reference (streaming events), shortened.
    private let textStream = """
        event: response.created
        data: {"type":"response.created","response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are a helpful assistant.","max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":0}

        event: response.in_progress
        data: {"type":"response.in_progress","response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"in_progress","output":[],"usage":null},"sequence_number":1}

        event: response.output_item.added
        data: {"type":"response.output_item.added","output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"in_progress","role":"assistant","content":[]},"sequence_number":2}

        event: response.content_part.added
        data: {"type":"response.content_part.added","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]},"sequence_number":3}

        event: response.output_text.delta
        data: {"type":"response.output_text.delta","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}

        event: response.output_text.delta
        data: {"type":"response.output_text.delta","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":" there, wörld 👋","sequence_number":5}

        event: response.output_text.done
        data: {"type":"response.output_text.done","item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"text":"Hi there, wörld 👋","sequence_number":6}

        event: response.output_item.done
        data: {"type":"response.output_item.done","output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there, wörld 👋","annotations":[]}]},"sequence_number":7}

        event: response.completed
        data: {"type":"response.completed","response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":32},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}},"sequence_number":8}


        """

    func testTextUsageAndTheEnd() throws {
        XCTAssertEqual(try decodeAtEverySplit(textStream), [
            .content("Hi"), .content(" there, wörld 👋"),
            .usage(Usage(promptTokens: 37, completionTokens: 11, totalTokens: 48, reasoningTokens: 0, cacheReadTokens: 32)),
            .finish(reason: "stop"), .done,
        ])
    }

    /// A reasoning model's summary (the reference's `response.reasoning_summary_*` events) and
    /// the reasoning item with its encrypted content, then a function call whose arguments
    /// stream in pieces (the reference's function-calling stream).
    private let reasoningAndCallStream = """
        event: response.output_item.added
        data: {"type":"response.output_item.added","output_index":0,"item":{"id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","type":"reasoning","summary":[]},"sequence_number":2}

        event: response.reasoning_summary_part.added
        data: {"type":"response.reasoning_summary_part.added","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""},"sequence_number":3}

        event: response.reasoning_summary_text.delta
        data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"delta":"**Checking the weather**\\n\\nThe user asks","sequence_number":4}

        event: response.reasoning_summary_text.delta
        data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"delta":" about Paris.","sequence_number":5}

        event: response.reasoning_summary_part.done
        data: {"type":"response.reasoning_summary_part.done","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Checking the weather**\\n\\nThe user asks about Paris."},"sequence_number":6}

        event: response.reasoning_summary_part.added
        data: {"type":"response.reasoning_summary_part.added","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""},"sequence_number":7}

        event: response.reasoning_summary_text.delta
        data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":1,"delta":"I will call get_weather.","sequence_number":8}

        event: response.output_item.done
        data: {"type":"response.output_item.done","output_index":0,"item":{"id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","type":"reasoning","summary":[{"type":"summary_text","text":"**Checking the weather**\\n\\nThe user asks about Paris."},{"type":"summary_text","text":"I will call get_weather."}],"encrypted_content":"gAAAAABoBr_KEnc"},"sequence_number":9}

        event: response.output_item.added
        data: {"type":"response.output_item.added","response_id":"resp_1234xyz","output_index":1,"item":{"type":"function_call","id":"fc_1234xyz","call_id":"call_2345abc","name":"get_weather","arguments":""},"sequence_number":10}

        event: response.function_call_arguments.delta
        data: {"type":"response.function_call_arguments.delta","response_id":"resp_1234xyz","item_id":"fc_1234xyz","output_index":1,"delta":"{\\"","sequence_number":11}

        event: response.function_call_arguments.delta
        data: {"type":"response.function_call_arguments.delta","response_id":"resp_1234xyz","item_id":"fc_1234xyz","output_index":1,"delta":"location\\":\\"Paris, France\\"}","sequence_number":12}

        event: response.function_call_arguments.done
        data: {"type":"response.function_call_arguments.done","response_id":"resp_1234xyz","item_id":"fc_1234xyz","output_index":1,"arguments":"{\\"location\\":\\"Paris, France\\"}","sequence_number":13}

        event: response.output_item.done
        data: {"type":"response.output_item.done","response_id":"resp_1234xyz","output_index":1,"item":{"type":"function_call","id":"fc_1234xyz","call_id":"call_2345abc","name":"get_weather","arguments":"{\\"location\\":\\"Paris, France\\"}"},"sequence_number":14}

        event: response.completed
        data: {"type":"response.completed","response":{"id":"resp_1234xyz","object":"response","status":"completed","output":[],"usage":{"input_tokens":80,"input_tokens_details":{"cached_tokens":0},"output_tokens":120,"output_tokens_details":{"reasoning_tokens":96},"total_tokens":200}},"sequence_number":15}


        """

    func testReasoningSummariesTheReasoningItemAndAFunctionCall() throws {
        let item = try JSON.parse(#"{"id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","type":"reasoning","summary":[{"type":"summary_text","text":"**Checking the weather**\n\nThe user asks about Paris."},{"type":"summary_text","text":"I will call get_weather."}],"encrypted_content":"gAAAAABoBr_KEnc"}"#)
        let events = try decodeAtEverySplit(reasoningAndCallStream)
        XCTAssertEqual(events, [
            .reasoning("**Checking the weather**\n\nThe user asks"), .reasoning(" about Paris."),
            .reasoning("\n\n"), .reasoning("I will call get_weather."),
            .reasoningReplay(item),
            .toolCall(ToolCallPiece(index: 0, id: "call_2345abc", name: "get_weather", arguments: "")),
            .toolCall(ToolCallPiece(index: 0, id: nil, name: nil, arguments: "{\"")),
            .toolCall(ToolCallPiece(index: 0, id: nil, name: nil, arguments: "location\":\"Paris, France\"}")),
            .usage(Usage(promptTokens: 80, completionTokens: 120, totalTokens: 200, reasoningTokens: 96, cacheReadTokens: 0)),
            .finish(reason: "tool_calls"), .done,
        ])
        var assembler = ToolCallAssembler()
        for case .toolCall(let piece) in events { assembler.add(piece) }
        XCTAssertEqual(assembler.calls, [ToolCall(id: "call_2345abc", name: "get_weather", arguments: #"{"location":"Paris, France"}"#)])
    }

    func testACallGivenOnlyWholeInItsDoneEvent() throws {
        var decoder = ResponsesStreamDecoder()
        let events = try decoder.decode(SSEEvent(type: "response.output_item.done", data: #"{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"}}"#))
        XCTAssertEqual(events, [.toolCall(ToolCallPiece(index: 0, id: "call_1", name: "f", arguments: "{}"))])
    }

    func testIncompleteForMaxOutputTokensIsLength() throws {
        var decoder = ResponsesStreamDecoder()
        let events = try decoder.decode(SSEEvent(type: "response.incomplete", data: #"{"type":"response.incomplete","response":{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":5,"output_tokens":64,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":69}}}"#))
        XCTAssertEqual(events, [.usage(Usage(promptTokens: 5, completionTokens: 64, totalTokens: 69, reasoningTokens: 64)), .finish(reason: "length"), .done])
        var filtered = ResponsesStreamDecoder()
        XCTAssertEqual(try filtered.decode(SSEEvent(type: "response.incomplete", data: #"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}"#)),
                       [.finish(reason: "content_filter"), .done])
    }

    func testFailedResponsesAndErrorEventsAreErrors() throws {
        var decoder = ResponsesStreamDecoder()
        // The reference's `response.failed` and `error` events.
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "response.failed", data: #"{"type":"response.failed","response":{"id":"resp_123","object":"response","created_at":1740855869,"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"output":[],"usage":null}}"#)),
                       [.error(UpstreamErrorInfo(message: "The model failed to generate a response.", code: "server_error"))])
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "error", data: #"{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":1}"#)),
                       [.error(UpstreamErrorInfo(message: "Something went wrong", code: "ERR_SOMETHING"))])
        XCTAssertEqual(try decoder.decode(SSEEvent(type: "error", data: "not json")), [.error(UpstreamErrorInfo(message: "not json"))])
        XCTAssertThrowsError(try decoder.decode(SSEEvent(type: "message", data: "not json")))
    }

    func testTheWholeBodyForm() throws {
        let whole = #"""
            {"id":"resp_1","object":"response","status":"completed","model":"o4-mini","output":[
             {"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"enc"},
             {"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello.","annotations":[]}]},
             {"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}],
             "usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}
            """#
        var decoder = ResponsesStreamDecoder()
        var events: [ChatStreamEvent] = []
        try decoder.decodeWhole(Array(whole.utf8), into: &events)
        XCTAssertEqual(events, [
            .reasoningReplay(try JSON.parse(#"{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"enc"}"#)),
            .content("Hello."),
            .toolCall(ToolCallPiece(index: 0, id: "call_1", name: "f", arguments: #"{"a":1}"#)),
            .usage(Usage(promptTokens: 3, completionTokens: 4, totalTokens: 7)),
            .finish(reason: "tool_calls"), .done,
        ])
        var other = ResponsesStreamDecoder()
        var none: [ChatStreamEvent] = []
        try other.decodeWhole(Array(#"{"error":{"message":"bad","type":"invalid_request_error"}}"#.utf8), into: &none)
        XCTAssertEqual(none, [.error(UpstreamErrorInfo(message: "bad", type: "invalid_request_error"))])
    }
}

final class OpenAIResponsesAPITests: XCTestCase {
    private let config = UpstreamConfig(baseURL: "http://127.0.0.1:9/v1/", apiKey: "sk-test", model: "o4-mini")

    func testThePlainRequest() throws {
        var chat = ChatRequest(model: "o4-mini", messages: [
            ChatMessage(role: .system, content: "Be brief."), ChatMessage(role: .user, content: "hello"),
            ChatMessage(role: .assistant, content: "Hi."), ChatMessage(role: .user, content: "and now?"),
        ], temperature: 0.5, maxTokens: 300)
        chat.params.reasoningEffort = "high"
        let request = OpenAIResponsesAPI().request(for: chat, config: config)
        XCTAssertEqual(request.url, "http://127.0.0.1:9/v1/responses")
        XCTAssertEqual(request.headers, ["Content-Type: application/json", "Accept: text/event-stream", "Authorization: Bearer sk-test"])
        XCTAssertEqual(String(decoding: request.body, as: UTF8.self),
                       #"{"model":"o4-mini","input":[{"role":"user","content":"hello"},{"role":"assistant","content":"Hi."},{"role":"user","content":"and now?"}],"#
                       + #""instructions":"Be brief.","stream":true,"store":false,"include":["reasoning.encrypted_content"],"max_output_tokens":300,"temperature":0.5,"reasoning":{"effort":"high","summary":"auto"}}"#)
    }

    func testAToolLoopCarriesTheReasoningItemsBeforeTheCalls() throws {
        let item = try JSON.parse(#"{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAA"}"#)
        let call = ToolCall(id: "call_1", name: "get_weather", arguments: #"{"location":"Paris"}"#)
        var chat = ChatRequest(model: "o4-mini", messages: [
            ChatMessage(role: .user, content: "weather?"),
            ChatMessage(role: .assistant, content: "", toolCalls: [call],
                        reasoning: ReasoningReplay(api: "responses", provider: "oa", model: "o4-mini", text: "t", items: [item])),
            ChatMessage(role: .tool, content: "sunny", toolCallID: "call_1", toolName: "get_weather"),
        ])
        chat.tools = [ToolDeclaration(name: "get_weather", description: "The weather.", parameters: ["type": "object"])]
        let sent = try body(chat)
        XCTAssertEqual(sent["input"], .array([
            ["role": "user", "content": "weather?"],
            item,
            ["type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": #"{"location":"Paris"}"#],
            ["type": "function_call_output", "call_id": "call_1", "output": "sunny"],
        ]))
        XCTAssertEqual(sent["tools"], .array([["type": "function", "name": "get_weather", "description": "The weather.", "parameters": ["type": "object"]]]))
        XCTAssertNil(sent["reasoning"])
        // Another API's reasoning is never sent here.
        chat.messages[1].reasoning?.api = "anthropic"
        XCTAssertEqual(try body(chat)["input"]?.array?.count, 3)
    }

    func testImagesAreInputImageDataURLs() throws {
        let image = ChatAttachment(name: "dot.png", type: .png, size: 4, sha256: String(repeating: "a", count: 64), content: .image(encoding: [0x89, 0x50, 0x4E, 0x47]))
        let chat = ChatRequest(model: "o4-mini", messages: [ChatMessage(role: .user, content: "what is it?", attachments: [image])])
        XCTAssertEqual(try body(chat)["input"], .array([["role": "user", "content": .array([
            ["type": "input_text", "text": "what is it?"],
            ["type": "input_image", "image_url": "data:image/png;base64,iVBORw=="],
        ])]]))
    }

    func testThinkingTrueAsksForSummariesAndExtraBodyIsMerged() throws {
        var chat = ChatRequest(model: "o4-mini", messages: [ChatMessage(role: .user, content: "hi")])
        chat.options = RequestOptions(thinking: true, extraBody: [ExtraBodyMember(key: "service_tier", value: "flex")])
        let sent = try body(chat)
        XCTAssertEqual(sent["reasoning"], ["summary": "auto"])
        XCTAssertEqual(sent["service_tier"], "flex")
    }

    func testErrorsAndTheModelListing() {
        let api = OpenAIResponsesAPI()
        let refusal = api.failure(status: 400, body: Array(#"{"error":{"message":"Item 'rs_1' of type 'reasoning' was provided without its required following item.","type":"invalid_request_error","param":"input","code":null}}"#.utf8))
        XCTAssertEqual(refusal.code, .upstreamHTTP)
        XCTAssertTrue(refusal.message.contains("without its required following item"), refusal.message)
        XCTAssertEqual(api.failure(status: 401, body: []).code, .upstreamAuth)
        XCTAssertEqual(api.modelsRequest(config: config).url, "http://127.0.0.1:9/v1/models")
        XCTAssertEqual(api.models(status: 200, body: Array(#"{"object":"list","data":[{"id":"o4-mini"}]}"#.utf8)), .success(["o4-mini"]))
        XCTAssertEqual(ProviderAPI.responses.adapter is OpenAIResponsesAPI, true)
    }
}

final class ReasoningSettingsBodyTests: XCTestCase {
    private func chatBody(_ options: RequestOptions, effort: String? = nil, maxTokens: Int? = 100) throws -> String {
        var chat = ChatRequest(model: "m", messages: [ChatMessage(role: .user, content: "hi")], maxTokens: maxTokens)
        chat.params.reasoningEffort = effort
        chat.options = options
        return String(decoding: chat.jsonBody(), as: UTF8.self)
    }

    func testChatSpellings() throws {
        let start = #"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}"#
        XCTAssertEqual(try chatBody(RequestOptions(), effort: "high"), start + #","max_tokens":100,"reasoning_effort":"high"}"#)
        XCTAssertEqual(try chatBody(RequestOptions(maxTokensField: .max_completion_tokens), effort: "low"),
                       start + #","max_completion_tokens":100,"reasoning_effort":"low"}"#)
        XCTAssertEqual(try chatBody(RequestOptions(reasoningFormat: .openrouter), effort: "high"),
                       start + #","max_tokens":100,"reasoning":{"effort":"high"}}"#)
        XCTAssertEqual(try chatBody(RequestOptions(reasoningFormat: .openrouter, thinking: false), effort: "high"),
                       start + #","max_tokens":100,"reasoning":{"enabled":false}}"#)
        XCTAssertEqual(try chatBody(RequestOptions(thinking: false)), start + #","max_tokens":100,"thinking":{"type":"disabled"}}"#)
        XCTAssertEqual(try chatBody(RequestOptions(thinking: true)), start + #","max_tokens":100,"thinking":{"type":"enabled"}}"#)
        XCTAssertEqual(try chatBody(RequestOptions(reasoningFormat: .openrouter, thinking: true)),
                       start + #","max_tokens":100,"reasoning":{"enabled":true}}"#)
        let extra = RequestOptions(extraBody: [ExtraBodyMember(key: "chat_template_kwargs", value: ["enable_thinking": false]),
                                               ExtraBodyMember(key: "top_k", value: 20)])
        XCTAssertEqual(try chatBody(extra, maxTokens: nil), start + #","chat_template_kwargs":{"enable_thinking":false},"top_k":20}"#)
    }

    func testAProfilesOptionsAreOverItsProviders() {
        let provider = RequestOptions(thinkingBudget: 2048, extraBody: [ExtraBodyMember(key: "a", value: 1), ExtraBodyMember(key: "b", value: 2)])
        let profile = RequestOptions(extraBody: [ExtraBodyMember(key: "b", value: 3), ExtraBodyMember(key: "c", value: 4)])
        XCTAssertEqual(provider.overridden(by: profile).extraBody.map(\.key), ["a", "b", "c"])
        XCTAssertEqual(provider.overridden(by: profile).extraBody[1].value, 3)
        XCTAssertEqual(provider.overridden(by: profile).thinkingBudget, 2048)
        XCTAssertNil(provider.overridden(by: RequestOptions(thinking: false)).thinkingBudget)
        XCTAssertEqual(RequestOptions(thinking: false).overridden(by: RequestOptions(thinkingBudget: 4096)).thinking, true)
    }

    func testAnthropicThinkingBudget() throws {
        var chat = ChatRequest(model: "claude", messages: [ChatMessage(role: .user, content: "hi")], temperature: 0.3, maxTokens: 1024)
        chat.params.topP = 0.5
        chat.options = RequestOptions(thinkingBudget: 2048)
        let sent = String(decoding: AnthropicMessagesAPI().body(for: chat), as: UTF8.self)
        XCTAssertEqual(sent, #"{"model":"claude","max_tokens":3072,"messages":[{"role":"user","content":"hi"}],"stream":true,"thinking":{"type":"enabled","budget_tokens":2048}}"#)
        XCTAssertEqual(ProviderAPI.anthropic(AnthropicOptions()).notices(for: chat), [
            "temperature left out: Anthropic refuses it with thinking (thinking_budget = 2048)",
            "top_p left out: Anthropic refuses it with thinking (thinking_budget = 2048)",
            "max_tokens 1024 is not above thinking_budget 2048: 3072 sent",
        ])
        chat.maxTokens = 8000
        chat.params.topP = 0.95
        XCTAssertEqual(String(decoding: AnthropicMessagesAPI().body(for: chat), as: UTF8.self),
                       #"{"model":"claude","max_tokens":8000,"messages":[{"role":"user","content":"hi"}],"stream":true,"top_p":0.95,"thinking":{"type":"enabled","budget_tokens":2048}}"#)
        chat.options = RequestOptions(thinking: false)
        XCTAssertEqual(String(decoding: AnthropicMessagesAPI().body(for: chat), as: UTF8.self),
                       #"{"model":"claude","max_tokens":8000,"messages":[{"role":"user","content":"hi"}],"stream":true,"temperature":0.3,"top_p":0.95,"thinking":{"type":"disabled"}}"#)
        XCTAssertEqual(ProviderAPI.anthropic(AnthropicOptions()).notices(for: chat), [])
    }

    func testCredentialNamedExtraBodyValuesAreSecrets() {
        let options = RequestOptions(extraBody: [
            ExtraBodyMember(key: "api_key", value: "s3cret"), ExtraBodyMember(key: "metadata", value: ["user_token": "t0k", "team": "a"]),
            ExtraBodyMember(key: "top_k", value: 20),
        ])
        XCTAssertEqual(Set(options.secretValues), ["s3cret", "t0k"])
    }
}
