import XCTest

import ConfabProtocol
import SSE
@testable import Upstream

/// Tool calls as servers stream them, put back together; and as requests send them back.
final class ToolCallTests: XCTestCase {
    private func decode(_ chunks: [String]) throws -> (events: [ChatStreamEvent], calls: [ToolCall]) {
        var decoder = ChatStreamDecoder()
        var assembler = ToolCallAssembler()
        var events: [ChatStreamEvent] = []
        for chunk in chunks {
            for event in try decoder.decode(SSEEvent(type: "message", data: chunk)) {
                events.append(event)
                if case .toolCall(let piece) = event { assembler.add(piece) }
            }
        }
        return (events, assembler.calls)
    }

    func testOpenAIStyleArgumentsSplitAcrossChunks() throws {
        let result = try decode([
            #"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Pa"}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ris\"}"}}]}}]}"#,
            #"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        XCTAssertEqual(result.calls, [ToolCall(id: "call_a", name: "weather", arguments: #"{"city":"Paris"}"#)])
        XCTAssertEqual(result.events.last, .finish(reason: "tool_calls"))
        XCTAssertFalse(result.events.contains { if case .content = $0 { true } else { false } }, "no text comes of a tool call")
    }

    func testLlamaCppRepeatsTheIdAndNameInEveryChunk() throws {
        let piece = { (args: String) in
            #"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"abc","type":"function","function":{"name":"weather","arguments":"# + args + "}}]}}]}"
        }
        let result = try decode([piece(#""{\"city\":""#), piece(#""\"Oslo\"""#), piece(#""}""#)])
        XCTAssertEqual(result.calls, [ToolCall(id: "abc", name: "weather", arguments: #"{"city":"Oslo"}"#)])
    }

    func testSeveralCallsInOneReplyAndInOneChunk() throws {
        let result = try decode([
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c0","function":{"name":"a","arguments":""}},{"index":1,"id":"c1","function":{"name":"b","arguments":""}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"y\":"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":1}"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"2}"}}]}}]}"#,
        ])
        XCTAssertEqual(result.calls, [ToolCall(id: "c0", name: "a", arguments: #"{"x":1}"#), ToolCall(id: "c1", name: "b", arguments: #"{"y":2}"#)])
    }

    func testCallsWithoutIndexGoByIdAndCallsWithoutIdGetOne() throws {
        var assembler = ToolCallAssembler()
        assembler.add(ToolCallPiece(index: nil, id: "x", name: "a", arguments: "{"))
        assembler.add(ToolCallPiece(index: nil, id: nil, name: nil, arguments: "}"))
        assembler.add(ToolCallPiece(index: nil, id: "y", name: "b", arguments: "[]"))
        assembler.add(ToolCallPiece(index: nil, id: "x", name: "a", arguments: ""))
        XCTAssertEqual(assembler.calls, [ToolCall(id: "x", name: "a", arguments: "{}"), ToolCall(id: "y", name: "b", arguments: "[]")])
        var anonymous = ToolCallAssembler()
        anonymous.add(ToolCallPiece(index: 3, id: nil, name: "z", arguments: "{}"))
        XCTAssertEqual(anonymous.calls, [ToolCall(id: "call_0", name: "z", arguments: "{}")])
    }

    func testTwoCallsWithOneIdGetIdsOfTheirOwn() throws {
        let result = try decode([
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"same","function":{"name":"a","arguments":"{}"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"same","function":{"name":"b","arguments":"{}"}}]}}]}"#,
        ])
        XCTAssertEqual(result.calls.map(\.id), ["same", "same_1"])
        XCTAssertEqual(result.calls.map(\.name), ["a", "b"])
        // A renamed id that a later call already has, and an id-less call whose default is taken.
        var assembler = ToolCallAssembler()
        assembler.add(ToolCallPiece(index: 0, id: "x", name: "a", arguments: ""))
        assembler.add(ToolCallPiece(index: 1, id: "x_2", name: "b", arguments: ""))
        assembler.add(ToolCallPiece(index: 2, id: "x", name: "c", arguments: ""))
        assembler.add(ToolCallPiece(index: 3, id: "call_4", name: "d", arguments: ""))
        assembler.add(ToolCallPiece(index: 4, id: nil, name: "e", arguments: ""))
        let ids = assembler.calls.map(\.id)
        XCTAssertEqual(ids, ["x", "x_2", "x_2_2", "call_4", "call_4_4"])
        XCTAssertEqual(Set(ids).count, ids.count)
    }

    func testAnIdThatCannotBeTypedOrIsTooLongIsReplaced() {
        var assembler = ToolCallAssembler()
        let long = String(repeating: "a", count: 100_000)
        let longest = String(repeating: "b", count: ToolCallAssembler.maxIDLength)
        assembler.add(ToolCallPiece(index: 0, id: long, name: "a", arguments: ""))
        assembler.add(ToolCallPiece(index: 1, id: "with space", name: "b", arguments: ""))
        assembler.add(ToolCallPiece(index: 2, id: "tool\u{1B}[2J", name: "c", arguments: ""))
        assembler.add(ToolCallPiece(index: 3, id: "call_0", name: "d", arguments: ""))
        assembler.add(ToolCallPiece(index: 4, id: "toolu_01A.b:c-D", name: "e", arguments: ""))
        assembler.add(ToolCallPiece(index: 5, id: longest, name: "f", arguments: ""))
        assembler.add(ToolCallPiece(index: 6, id: longest, name: "g", arguments: ""))
        let ids = assembler.calls.map(\.id)
        XCTAssertEqual(ids, ["call_0", "call_1", "call_2", "call_0_3", "toolu_01A.b:c-D", longest, "call_6"])
        XCTAssertEqual(Set(ids).count, ids.count)
    }

    func testANonStreamedMessageWithArgumentsAsAnObject() throws {
        let result = try decode([
            #"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"q","type":"function","function":{"name":"f","arguments":{"k":[1,2]}}}]},"finish_reason":"tool_calls"}]}"#,
        ])
        XCTAssertEqual(result.calls, [ToolCall(id: "q", name: "f", arguments: #"{"k":[1,2]}"#)])
    }

    func testAnthropicToolUseBlocks() throws {
        var decoder = AnthropicStreamDecoder()
        var assembler = ToolCallAssembler()
        var text = ""
        let events: [(String, String)] = [
            ("message_start", #"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}"#),
            ("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}"#),
            ("content_block_stop", #"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", #"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Rome\"}"}}"#),
            ("content_block_start", #"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"time","input":{}}}"#),
            ("content_block_delta", #"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#),
            ("message_delta", #"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}"#),
            ("message_stop", #"{"type":"message_stop"}"#),
        ]
        var finish: String?
        for (type, data) in events {
            for event in try decoder.decode(SSEEvent(type: type, data: data)) {
                switch event {
                case .toolCall(let piece): assembler.add(piece)
                case .content(let piece): text += piece
                case .finish(let reason): finish = reason
                default: break
                }
            }
        }
        XCTAssertEqual(text, "Checking.")
        XCTAssertEqual(finish, "tool_calls")
        XCTAssertEqual(assembler.calls, [ToolCall(id: "toolu_1", name: "weather", arguments: #"{"city": "Rome"}"#),
                                         ToolCall(id: "toolu_2", name: "time", arguments: "{}")])
    }

    private var toolTurns: [ChatMessage] {
        [
            ChatMessage(role: .system, content: "sys"),
            ChatMessage(role: .user, content: "weather?"),
            ChatMessage(role: .assistant, content: "", toolCalls: [ToolCall(id: "c1", name: "weather", arguments: #"{"city":"Paris"}"#),
                                                                   ToolCall(id: "c2", name: "weather", arguments: "not json")]),
            ChatMessage(role: .tool, content: "{\"temp\":21}", toolCallID: "c1", toolName: "weather"),
            ChatMessage(role: .tool, content: "Error: arguments are not JSON", toolCallID: "c2", toolName: "weather", isError: true),
            ChatMessage(role: .assistant, content: "It is 21."),
            ChatMessage(role: .user, content: "thanks"),
        ]
    }

    func testChatBodyCarriesToolsAndToolTurns() throws {
        var request = ChatRequest(model: "m", messages: toolTurns)
        request.tools = [ToolDeclaration(name: "weather", description: "Weather now",
                                         parameters: ["type": "object", "properties": ["city": ["type": "string"]]])]
        let body = try JSON.parse(request.jsonBody())
        let tools = try XCTUnwrap(body["tools"]?.array)
        XCTAssertEqual(tools.first?["type"]?.string, "function")
        XCTAssertEqual(tools.first?["function"]?["name"]?.string, "weather")
        XCTAssertEqual(tools.first?["function"]?["parameters"]?["properties"]?["city"]?["type"]?.string, "string")
        let messages = try XCTUnwrap(body["messages"]?.array)
        XCTAssertEqual(messages.map { $0["role"]?.string }, ["system", "user", "assistant", "tool", "tool", "assistant", "user"])
        XCTAssertEqual(messages[2]["content"], .string(""), "an assistant turn of tool calls alone has empty content, never null")
        XCTAssertEqual(messages[2]["tool_calls"]?.array?.map { $0["id"]?.string }, ["c1", "c2"])
        XCTAssertEqual(messages[2]["tool_calls"]?.array?[0]["type"]?.string, "function")
        XCTAssertEqual(messages[2]["tool_calls"]?.array?[0]["function"]?["arguments"]?.string, #"{"city":"Paris"}"#)
        XCTAssertEqual(messages[3]["tool_call_id"]?.string, "c1")
        XCTAssertEqual(messages[3]["content"]?.string, "{\"temp\":21}")
        XCTAssertNil(messages[5]["tool_calls"], "no tool_calls key on a plain turn")
        XCTAssertNil(try JSON.parse(ChatRequest(model: "m", messages: []).jsonBody())["tools"], "no tools key when none is offered")
    }

    func testTextlessToolCallTurnTakesEitherContentFormAndNoOtherTurnChanges() throws {
        var request = ChatRequest(model: "m", messages: toolTurns)
        XCTAssertTrue(request.hasTextlessToolCallTurn)
        XCTAssertEqual(request.toolCallTurnContent, .empty, "the form every server takes is the default")
        request.toolCallTurnContent = .omitted
        let messages = try XCTUnwrap(try JSON.parse(request.jsonBody())["messages"]?.array)
        XCTAssertNil(messages[2].object?["content"], "the other form leaves content out")
        XCTAssertEqual(messages[2]["tool_calls"]?.array?.count, 2)
        for position in [0, 1, 3, 4, 5, 6] {
            XCTAssertNotNil(messages[position]["content"]?.string, "turn \(position) keeps its content")
        }
        var plain = toolTurns
        plain[2].content = "Let me look."
        XCTAssertFalse(ChatRequest(model: "m", messages: plain).hasTextlessToolCallTurn, "a tool-call turn with text is not in question")
        XCTAssertFalse(ChatRequest(model: "m", messages: [ChatMessage(role: .assistant, content: "")]).hasTextlessToolCallTurn)
    }

    func testAnthropicToolUseTurnWithoutTextHasNoEmptyTextBlock() throws {
        let body = try JSON.parse(AnthropicMessagesAPI().body(for: ChatRequest(model: "m", messages: toolTurns)))
        let blocks = try XCTUnwrap(body["messages"]?.array?[1]["content"]?.array)
        XCTAssertEqual(blocks.map { $0["type"]?.string }, ["tool_use", "tool_use"], "the API refuses an empty text block")
    }

    func testAnthropicBodyCarriesToolUseAndToolResultBlocks() throws {
        var request = ChatRequest(model: "m", messages: toolTurns)
        request.tools = [ToolDeclaration(name: "weather", description: "Weather now", parameters: ["type": "object"])]
        let body = try JSON.parse(AnthropicMessagesAPI().body(for: request))
        XCTAssertEqual(body["tools"]?.array?.first?["input_schema"]?["type"]?.string, "object")
        XCTAssertEqual(body["system"]?.string, "sys")
        let messages = try XCTUnwrap(body["messages"]?.array)
        XCTAssertEqual(messages.map { $0["role"]?.string }, ["user", "assistant", "user", "assistant", "user"])
        let uses = try XCTUnwrap(messages[1]["content"]?.array)
        XCTAssertEqual(uses.map { $0["type"]?.string }, ["tool_use", "tool_use"])
        XCTAssertEqual(uses[0]["input"]?["city"]?.string, "Paris")
        XCTAssertEqual(uses[1]["input"], .object([:]), "arguments that are not an object go as an empty one")
        let results = try XCTUnwrap(messages[2]["content"]?.array)
        XCTAssertEqual(results.map { $0["tool_use_id"]?.string }, ["c1", "c2"])
        XCTAssertNil(results[0]["is_error"])
        XCTAssertEqual(results[1]["is_error"]?.bool, true)
        XCTAssertEqual(messages[3]["content"]?.string, "It is 21.", "a turn of text alone stays a string")
    }

    func testAnthropicToolResultsGoBeforeTextInTheSameUserTurn() throws {
        let request = ChatRequest(model: "m", messages: [
            ChatMessage(role: .user, content: "go"),
            ChatMessage(role: .assistant, content: "Looking.", toolCalls: [ToolCall(id: "c", name: "t", arguments: "{}")]),
            ChatMessage(role: .tool, content: "interrupted", toolCallID: "c", toolName: "t", isError: true),
            ChatMessage(role: .user, content: "and now?"),
        ])
        let messages = try XCTUnwrap(try JSON.parse(AnthropicMessagesAPI().body(for: request))["messages"]?.array)
        XCTAssertEqual(messages.count, 3)
        XCTAssertEqual(messages[1]["content"]?.array?.map { $0["type"]?.string }, ["text", "tool_use"])
        XCTAssertEqual(messages[2]["content"]?.array?.map { $0["type"]?.string }, ["tool_result", "text"])
        XCTAssertEqual(messages[2]["content"]?.array?[1]["text"]?.string, "and now?")
    }
}
