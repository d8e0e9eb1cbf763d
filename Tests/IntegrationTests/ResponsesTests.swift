import ConfabProtocol
import Foundation
import XCTest

/// `api = "responses"` against the fake upstream's `POST …/responses`, and the reasoning settings
/// of every API as the requests carry them: what the daemon sends, exactly, and what it makes
/// of the answers.
final class ResponsesTests: XCTestCase {
    var harness: Harness!

    static let config = """
        \(TestConfig.echoTool)

        [providers.oa]
        api = "responses"
        base_url = "$UPSTREAM/oa/v1"
        api_key = ""
        model = "o-fake"
        max_tokens = 500
        reasoning_effort = "low"
        timeout_seconds = 5
        max_retries = 0

        [profiles.oa]
        provider = "oa"
        system = "Be brief."
        tools = ["echo"]

        [providers.router]
        base_url = "$UPSTREAM/router/v1"
        api_key = ""
        model = "r-fake"
        reasoning_format = "openrouter"
        reasoning_effort = "medium"
        max_tokens_field = "max_completion_tokens"
        max_tokens = 300
        extra_body = { provider = { order = ["fast"] }, user_token = "tok-s3cret-77" }

        [profiles.deep]
        provider = "router"
        reasoning_effort = "high"
        extra_body = { top_k = 20 }

        [providers.deepseek]
        base_url = "$UPSTREAM/deepseek/v1"
        api_key = ""
        model = "deepseek-fake"
        thinking = false

        \(TestConfig.claudeProvider)
        thinking_budget = 2048
        prompt_cache = false  # an exact body; the breakpoints are PromptCacheTests'

        [profiles.warm]
        provider = "claude"
        temperature = 0.7
        """

    override func setUpWithError() throws { harness = try Harness(config: Self.config) }
    override func tearDown() { harness?.tearDown() }

    private func create(_ client: RPCClient, _ params: JSON) throws -> String {
        let id = try XCTUnwrap(try client.call("conversation.create", params)["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    /// Sends and follows the reply's chain to its last message.
    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let chain = MessageID.sequence(of: try XCTUnwrap(sent["reply"]?.string))
        let notes = try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 20)
        return (notes, try XCTUnwrap(notes.last?.params["message"]))
    }

    private func requests(to suffix: String) -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix(suffix) == true }
    }

    func testAPlainReplyAndItsExactRequest() throws {
        let client = try harness.client()
        let id = try create(client, ["provider": "oa"])
        let (_, final) = try send(client, id, "[[reply:Hello there.]]")
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(final["content"]?.string, "Hello there.")
        XCTAssertEqual(final["finish_reason"]?.string, "stop")
        let request = try XCTUnwrap(requests(to: "/responses").last)
        XCTAssertEqual(request["path"]?.string, "/oa/v1/responses")
        XCTAssertEqual(request["body"], [
            "model": "o-fake", "input": [["role": "user", "content": "[[reply:Hello there.]]"]],
            "stream": true, "store": false, "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 500, "reasoning": ["effort": "low", "summary": "auto"],
        ])
    }

    func testReasoningSummariesAndUsageAsReported() throws {
        let client = try harness.client()
        let id = try create(client, ["provider": "oa"])
        let (_, final) = try send(client, id, "[[think-words:3]][[reply:Yes.]]")
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(final["content"]?.string, "Yes.")
        // The fake counts a token a piece of three characters: "t1 t2 t3" is 3, "Yes." 2.
        let usage = try XCTUnwrap(final["usage"])
        XCTAssertEqual(usage["completion_tokens"]?.int, 5)
        XCTAssertEqual(usage["reasoning_tokens"]?.int, 3)
        XCTAssertEqual(usage["cache_read_tokens"]?.int, 0)
    }

    func testAToolLoopCarriesTheReasoningItemBackBeforeItsCall() throws {
        let client = try harness.client()
        let id = try create(client, ["profile": "oa"])
        let (_, final) = try send(client, id, #"[[think:need the weather]][[tool:echo {"city":"Lyon"}]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertTrue(final["content"]?.string?.hasPrefix("tool results: [echo]") == true, "\(final)")
        let asked = requests(to: "/responses")
        XCTAssertEqual(asked.count, 2)
        XCTAssertEqual(asked[0]["body"]?["instructions"], "Be brief.")
        XCTAssertEqual(asked[0]["body"]?["tools"], [["type": "function", "name": "echo", "description": "Says back what it was asked",
                                                     "parameters": ["type": "object", "properties": ["city": ["type": "string"]], "required": ["city"]]]])
        let input = try XCTUnwrap(asked[1]["body"]?["input"]?.array)
        XCTAssertEqual(input.count, 4, "\(input)")
        guard input.count == 4 else { return }
        XCTAssertEqual(input[0], ["role": "user", "content": #"[[think:need the weather]][[tool:echo {"city":"Lyon"}]]"#])
        // The reasoning item exactly as the server gave it, then the call it led to, then the answer.
        XCTAssertEqual(input[1]["type"], "reasoning")
        XCTAssertEqual(input[1]["encrypted_content"]?.string?.hasPrefix("enc:fake:"), true)
        XCTAssertEqual(input[1]["summary"], [["type": "summary_text", "text": "need the weather"]])
        let callID = try XCTUnwrap(input[2]["call_id"]?.string)
        XCTAssertEqual(input[2], ["type": "function_call", "call_id": .string(callID), "name": "echo", "arguments": #"{"city":"Lyon"}"#])
        XCTAssertEqual(input[3]["type"], "function_call_output")
        XCTAssertEqual(input[3]["call_id"]?.string, callID)
    }

    func testTheServersErrorReachesTheReply() throws {
        let client = try harness.client()
        let id = try create(client, ["provider": "oa"])
        let (_, final) = try send(client, id, "[[status:400]]")
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "upstream_http")
        XCTAssertEqual(final["error"]?["message"]?.string?.contains("fake upstream error 400"), true, "\(final)")
        // A mid-stream `error` event fails the reply with the server's words.
        let (_, broken) = try send(client, id, "[[words:20]][[error-mid:3]]")
        XCTAssertEqual(broken["status"]?.string, "failed")
        XCTAssertEqual(broken["error"]?["code"]?.string, "upstream_error")
        XCTAssertEqual(broken["error"]?["message"]?.string, "fake mid-stream error")
    }

    func testChatReasoningSettingsExtraBodyAndConfigure() throws {
        let client = try harness.client()
        let id = try create(client, ["profile": "deep"])
        _ = try send(client, id, "[[reply:ok]]")
        let body = try XCTUnwrap(requests(to: "/router/v1/chat/completions").last?["body"])
        XCTAssertEqual(body, [
            "model": "r-fake", "messages": [["role": "user", "content": "[[reply:ok]]"]], "stream": true,
            "stream_options": ["include_usage": true], "max_completion_tokens": 300, "reasoning": ["effort": "high"],
            "provider": ["order": ["fast"]], "user_token": "tok-s3cret-77", "top_k": 20,
        ])
        // configure sets the effort for the next replies, and every attached screen is told.
        let watcher = try harness.client(name: "watcher")
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let configured = try harness.runClient(["configure", id, "--reasoning-effort", "low"])
        XCTAssertEqual(configured.status, 0, configured.stderr)
        let told = try watcher.collect(until: { method, params in
            method == "conversation.updated" && params["info"]?["params"]?["reasoning_effort"] != nil
        }, timeout: 10)
        XCTAssertEqual(told.last?.params["info"]?["params"], ["reasoning_effort": "low"])
        _ = try send(client, id, "[[reply:again]]")
        XCTAssertEqual(requests(to: "/router/v1/chat/completions").last?["body"]?["reasoning"], ["effort": "low"])
        let refused = try harness.runClient(["configure", id, "--reasoning-effort", "LOUD!"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("--reasoning-effort must be a level"), refused.stderr)

        let deepseek = try create(client, ["provider": "deepseek"])
        _ = try send(client, deepseek, "[[reply:ok]]")
        XCTAssertEqual(requests(to: "/deepseek/v1/chat/completions").last?["body"]?["thinking"], ["type": "disabled"])
    }

    func testAnthropicThinkingBudgetKeepsMaxTokensAboveItAndLeavesTemperatureOut() throws {
        let client = try harness.client()
        let id = try create(client, ["profile": "warm"])
        let (_, final) = try send(client, id, "[[reply:thought]]")
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        let body = try XCTUnwrap(requests(to: "/messages").last?["body"])
        XCTAssertEqual(body, [
            "model": "fake-claude", "max_tokens": 3072, "messages": [["role": "user", "content": "[[reply:thought]]"]], "stream": true,
            "thinking": ["type": "enabled", "budget_tokens": 2048],
        ])
        let log = harness.log()
        XCTAssertTrue(log.contains("temperature left out: Anthropic refuses it with thinking (thinking_budget = 2048)"), log)
        XCTAssertTrue(log.contains("max_tokens 1024 is not above thinking_budget 2048: 3072 sent"), log)
    }
}
