import ConfabProtocol
import Foundation
import XCTest

/// Anthropic's prompt cache, used by itself: each request marks its stable prefix (the tools,
/// the system prompt, the newest turn and the one two before it), so each turn of a long
/// conversation reads from the cache what the turn before wrote. The fake upstream bills a
/// request as the API's documented rules do (docs/fake-upstream.md, "Prompt caching").
final class PromptCacheTests: XCTestCase {
    var harness: Harness!

    static let config = """
        \(TestConfig.echoTool)

        \(TestConfig.claudeProvider)

        [providers.uncached]
        api = "anthropic"
        base_url = "$UPSTREAM/anthropic/v1"
        api_key = "anthropic-test-key"
        model = "fake-claude"
        prompt_cache = false

        [profiles.claude]
        provider = "claude"
        system = "You answer in one short sentence, with care."
        tools = ["echo"]

        [profiles.uncached]
        provider = "uncached"
        system = "You answer in one short sentence, with care."
        tools = ["echo"]
        """

    override func setUpWithError() throws { harness = try Harness(config: Self.config) }
    override func tearDown() { harness?.tearDown() }

    private func conversation(_ client: RPCClient, profile: String) throws -> String {
        let id = try XCTUnwrap(try client.call("conversation.create", ["title": "cached", "profile": .string(profile)])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let ended = try client.collect(until: { method, params in method == "message.completed" && params["message"]?["id"]?.string == reply })
        return try XCTUnwrap(ended.last?.params["message"])
    }

    private func modelBodies() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/messages") == true }.compactMap { $0["body"] }
    }

    func testEachTurnReadsFromTheCacheWhatTheTurnBeforeSent() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "claude")
        var previousPrompt: Int?
        for turn in 1...4 {
            let message = try send(client, id, "question number \(turn) about the weather [[reply:answer number \(turn) is sunny]]")
            let usage = try XCTUnwrap(message["usage"], "turn \(turn)")
            let prompt = try XCTUnwrap(usage["prompt_tokens"]?.int)
            // Everything the last request sent is a prefix of this one, marked there: read whole.
            XCTAssertEqual(usage["cache_read_tokens"]?.int ?? 0, previousPrompt ?? 0, "turn \(turn): \(usage)")
            // The rest, up to the newest turn (which carries the last breakpoint), is written.
            XCTAssertEqual(usage["cache_write_tokens"]?.int, prompt - (previousPrompt ?? 0), "turn \(turn): \(usage)")
            previousPrompt = prompt
        }

        let bodies = modelBodies()
        XCTAssertEqual(bodies.count, 4)
        let last = try XCTUnwrap(bodies.last)
        let marker: JSON = ["type": "ephemeral"]
        XCTAssertEqual(last["tools"]?.array?.last?["cache_control"], marker, "the last tool definition")
        XCTAssertEqual(last["system"], .array([["type": "text", "text": "You answer in one short sentence, with care.", "cache_control": marker]]))
        let turns = try XCTUnwrap(last["messages"]?.array)
        XCTAssertEqual(turns.count, 7)
        let marked = turns.indices.filter { turns[$0]["content"]?.array?.last?["cache_control"] == marker }
        XCTAssertEqual(marked, [4, 6], "the newest turn and the one two before it")
        // Four breakpoints at most, as the API requires.
        XCTAssertEqual(last.text.components(separatedBy: "cache_control").count - 1, 4)
    }

    func testAProviderWithPromptCacheOffMarksNothing() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "uncached")
        _ = try send(client, id, "first [[reply:one]]")
        let second = try send(client, id, "second [[reply:two]]")
        XCTAssertNil(second["usage"]?["cache_read_tokens"], "\(second)")
        let bodies = modelBodies()
        XCTAssertEqual(bodies.count, 2)
        for body in bodies { XCTAssertFalse(body.text.contains("cache_control"), body.text) }
        XCTAssertEqual(bodies.last?["system"]?.string, "You answer in one short sentence, with care.")
    }
}
