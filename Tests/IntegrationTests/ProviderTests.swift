import ConfabProtocol
import Foundation
import XCTest

/// FNV-1a over the key's bytes: how the fake upstream logs a key, so a test can tell which one came.
private func keyHash(_ key: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in key.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    let hex = String(hash, radix: 16)
    return "fnv1a64:" + String(repeating: "0", count: 16 - hex.count) + hex
}

/// `[providers.NAME]` tables pointing at the fake upstream, each under a path of its own.
private func providers(retries: Int = 0) -> String {
    """
    [providers.second]
    api = "chat"
    base_url = "$UPSTREAM/second/v1"
    api_key = "sk-second"
    model = "second-model"
    max_retries = \(retries)
    timeout_seconds = 5
    headers = { "X-Team" = "blue" }

    [providers.legacy]
    api = "completions"
    base_url = "$UPSTREAM/legacy/v1"
    api_key = "sk-legacy"
    model = "legacy-model"
    max_retries = \(retries)
    timeout_seconds = 5

    [providers.claude]
    api = "anthropic"
    base_url = "$UPSTREAM/anthropic/v1"
    api_key = "sk-ant-claude"
    model = "claude-test"
    max_tokens = 321
    max_retries = \(retries)
    timeout_seconds = 5
    headers = { "anthropic-beta" = "fake-beta" }
    prompt_cache = false  # exact bodies below; the breakpoints are PromptCacheTests'


    [providers.bare]
    base_url = "$UPSTREAM/bare/v1"

    """
}

final class ProviderTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness(config: providers()) }
    override func tearDown() { harness?.tearDown() }

    private func create(_ client: RPCClient, _ params: JSON) throws -> (id: String, info: JSON) {
        let result = try client.call("conversation.create", params)
        let info = try XCTUnwrap(result["conversation"])
        let id = try XCTUnwrap(info["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return (id, info)
    }

    /// Sends and waits for the reply's end: how it ended, its final message, its error.
    @discardableResult
    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> (notes: [(method: String, params: JSON)], final: JSON, error: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let (notes, final) = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        return (notes, final, notes.last?.params["error"] ?? .null)
    }

    private func lastRequest(to pathSuffix: String) throws -> JSON {
        try XCTUnwrap(harness.upstreamRequests().last { $0["path"]?.string?.hasSuffix(pathSuffix) == true }, "no request to \(pathSuffix)")
    }

    func testASecondProviderGetsItsOwnURLKeyHeadersAndModelAndKeepsThemAcrossARestart() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["provider": "second"])
        XCTAssertEqual(info["provider"]?.string, "second")
        XCTAssertEqual(info["model"]?.string, "second-model", "the provider's model is the default")
        XCTAssertEqual(try send(client, id, "[[reply:from second]]").final["content"]?.string, "from second")
        let request = try lastRequest(to: "/chat/completions")
        XCTAssertEqual(request["path"]?.string, "/second/v1/chat/completions")
        XCTAssertEqual(request["headers"]?["authorization"]?.string, "Bearer " + keyHash("sk-second"))
        XCTAssertEqual(request["headers"]?["x-team"]?.string, "blue")
        XCTAssertEqual(request["body"]?["model"]?.string, "second-model")

        // A conversation that names none gets [upstream], at its own URL, without the other's headers.
        let (plain, plainInfo) = try create(client, [:])
        XCTAssertEqual(plainInfo["provider"]?.string, "default")
        XCTAssertEqual(plainInfo["model"]?.string, "fake-model")
        try send(client, plain, "[[reply:from default]]")
        let defaultRequest = try lastRequest(to: "/chat/completions")
        XCTAssertEqual(defaultRequest["path"]?.string, "/v1/chat/completions")
        XCTAssertNil(defaultRequest["headers"]?["x-team"])

        client.close()
        try harness.restartDaemon()
        let again = try harness.client()
        XCTAssertEqual(try again.call("conversation.get", ["conversation": .string(id)])["conversation"]?["provider"]?.string, "second")
        let listed = try again.call("conversation.list")["conversations"]?.array ?? []
        XCTAssertEqual(Set(listed.compactMap { $0["provider"]?.string }), ["second", "default"])
        try again.call("conversation.attach", ["conversation": .string(id)])
        try send(again, id, "[[reply:still second]]")
        XCTAssertEqual(try lastRequest(to: "/chat/completions")["path"]?.string, "/second/v1/chat/completions")
    }

    func testAnUnknownProviderIsRefused() throws {
        let client = try harness.client()
        do {
            try client.call("conversation.create", ["provider": "nope"])
            XCTFail("created")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, RPCError.invalidParams)
            XCTAssertTrue(error.message.contains("\"nope\""), error.message)
        }
        XCTAssertEqual(try client.call("conversation.list")["conversations"]?.array?.count, 0)
    }

    func testAProviderWithoutAModelNeedsOneNamed() throws {
        let client = try harness.client()
        do {
            try client.call("conversation.create", ["provider": "bare"])
            XCTFail("created without a model")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, RPCError.invalidParams)
            XCTAssertTrue(error.message.contains("\"bare\" has no default model"), error.message)
        }
        let (id, info) = try create(client, ["provider": "bare", "model": "named-model"])
        XCTAssertEqual(info["model"]?.string, "named-model")
        try send(client, id, "[[reply:ok]]")
        let request = try lastRequest(to: "/chat/completions")
        XCTAssertEqual(request["path"]?.string, "/bare/v1/chat/completions")
        XCTAssertNil(request["headers"]?["authorization"], "a server on this machine gets no key unless given one")
    }

    func testTheCompletionsTranscriptAndStopSequences() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["provider": "legacy", "system": "Be brief."])
        XCTAssertEqual(info["model"]?.string, "legacy-model")
        let first = try send(client, id, "hello [[reply:Hi there.]]")
        XCTAssertEqual(first.final["content"]?.string, "Hi there.", "the space a model starts with after the label is not kept")
        XCTAssertEqual(first.final["finish_reason"]?.string, "stop")
        XCTAssertNotNil(first.final["usage"]?["prompt_tokens"]?.int)
        XCTAssertNil(first.final["usage"]?["estimated"], "the fake reports usage")
        XCTAssertEqual(try send(client, id, "again [[reply:ok]]").final["content"]?.string, "ok")
        let request = try lastRequest(to: "/completions")
        XCTAssertEqual(request["path"]?.string, "/legacy/v1/completions")
        XCTAssertEqual(request["headers"]?["authorization"]?.string, "Bearer " + keyHash("sk-legacy"))
        let body = try XCTUnwrap(request["body"])
        XCTAssertEqual(body["prompt"]?.string, "Be brief.\n\nHuman: hello [[reply:Hi there.]]\nAI: Hi there.\nHuman: again [[reply:ok]]\nAI:")
        XCTAssertEqual(body["stop"], ["Human:", "AI:"])
        XCTAssertEqual(body["model"]?.string, "legacy-model")
        XCTAssertEqual(body["stream"], true)
        XCTAssertNil(body["messages"])
    }

    func testAnthropicGetsSystemMaxTokensAndItsHeaders() throws {
        let client = try harness.client()
        let (id, _) = try create(client, ["provider": "claude", "system": "Be brief."])
        let first = try send(client, id, "hello [[chunk:2]]")
        XCTAssertEqual(first.final["content"]?.string, "You said: hello")
        XCTAssertEqual(RPCClient.deltas(first.notes, for: first.final["id"]!.string!).count, 8, "every text_delta is a delta")
        XCTAssertEqual(first.final["finish_reason"]?.string, "stop")
        XCTAssertEqual(first.final["usage"]?["completion_tokens"]?.int, 8)
        XCTAssertEqual(first.final["usage"]?["prompt_tokens"]?.int, 4)
        try send(client, id, "and again")
        let request = try lastRequest(to: "/messages")
        XCTAssertEqual(request["path"]?.string, "/anthropic/v1/messages")
        let headers = try XCTUnwrap(request["headers"])
        XCTAssertEqual(headers["x-api-key"]?.string, keyHash("sk-ant-claude"))
        XCTAssertEqual(headers["anthropic-version"]?.string, "2023-06-01")
        XCTAssertEqual(headers["content-type"]?.string, "application/json")
        XCTAssertEqual(headers["anthropic-beta"]?.string, "fake-beta")
        XCTAssertNil(headers["authorization"])
        let body = try XCTUnwrap(request["body"])
        XCTAssertEqual(body["system"]?.string, "Be brief.")
        XCTAssertEqual(body["max_tokens"]?.int, 321)
        XCTAssertEqual(body["model"]?.string, "claude-test")
        XCTAssertEqual(body["stream"], true)
        XCTAssertEqual(body["messages"], [["role": "user", "content": "hello [[chunk:2]]"], ["role": "assistant", "content": "You said: hello"],
                                          ["role": "user", "content": "and again"]])
    }

    func testAContinuationGoesOnFromTheReplySoFar() throws {
        let client = try harness.client()
        for (provider, path) in [("claude", "/messages"), ("legacy", "/completions")] {
            let (id, _) = try create(client, ["provider": .string(provider)])
            let first = try send(client, id, "[[reply:Once upon]] [[finish:\(provider == "claude" ? "max_tokens" : "length")]]")
            XCTAssertEqual(first.final["finish_reason"]?.string, "length", provider)
            let reply = try XCTUnwrap(try client.call("message.continue", ["conversation": .string(id)])["reply"]?.string)
            let (_, final) = try client.awaitReply(reply)
            let body = try XCTUnwrap(try lastRequest(to: path)["body"])
            if provider == "claude" {
                XCTAssertEqual(body["messages"]?.array?.last, ["role": "assistant", "content": "Once upon"], "the reply so far ends the request")
                XCTAssertEqual(body["messages"]?.array?.count, 2)
                XCTAssertEqual(final["content"]?.string, "Once uponOnce upon")
            } else {
                XCTAssertTrue(body["prompt"]?.string?.hasSuffix("\nAI: Once upon") == true, body["prompt"]?.string ?? "")
                // The fake starts with a space as a model would; mid-text it is kept.
                XCTAssertEqual(final["content"]?.string, "Once upon Once upon")
            }
        }
    }

    func testEachProvidersErrorAnswersMapToReplyErrorCodes() throws {
        let client = try harness.client()
        for provider in ["default", "second", "legacy", "claude"] {
            // A conversation per case: turns after a failed reply are joined for Anthropic, and
            // the fake would read the earlier directives too.
            func fresh() throws -> String { try create(client, ["provider": .string(provider)]).id }
            let auth = try send(client, try fresh(), "[[status:401]]")
            XCTAssertEqual(auth.error["code"]?.string, "upstream_auth", provider)
            XCTAssertEqual(auth.error["status"]?.int, 401, provider)

            let limited = try send(client, try fresh(), "[[status:429]]")
            XCTAssertEqual(limited.error["code"]?.string, "rate_limited", provider)
            XCTAssertEqual(limited.error["status"]?.int, 429, provider)

            let mid = try send(client, try fresh(), "[[error-mid:2]] [[chunk:2]] abcdef")
            XCTAssertEqual(mid.notes.last?.method, "message.failed", provider)
            XCTAssertEqual(mid.error["code"]?.string, "upstream_error", provider)
            XCTAssertEqual(mid.error["message"]?.string, "fake mid-stream error", provider)
            XCTAssertFalse(mid.final["content"]?.string?.isEmpty ?? true, "\(provider): the text so far is kept")

            let (missing, _) = try create(client, ["provider": .string(provider), "model": "missing-model"])
            let notFound = try send(client, missing, "hello")
            XCTAssertEqual(notFound.error["code"]?.string, "upstream_http", provider)
            XCTAssertEqual(notFound.error["status"]?.int, 404, provider)
            XCTAssertTrue(notFound.error["message"]?.string?.contains("missing-model") == true,
                          "\(provider): the server's message, not a generic one: \(notFound.error.text)")
        }
        let (claude, _) = try create(client, ["provider": "claude"])
        let overloaded = try send(client, claude, "[[status:529]]")
        XCTAssertEqual(overloaded.error["code"]?.string, "upstream_http")
        XCTAssertEqual(overloaded.error["status"]?.int, 529)
        XCTAssertEqual(overloaded.error["message"]?.string, "Overloaded")
    }

    func testRetriesHonourRetryAfterAndRetryAnthropicsOverload() throws {
        harness.tearDown()
        harness = try Harness(config: providers(retries: 1), retries: 1)
        let client = try harness.client()
        var cases = ["default", "second", "legacy", "claude"].map { ($0, "[[fail-first:1]] [[status:429]] busy \($0)", 429) }
        cases.append(("claude", "[[fail-first:1]] [[status:529]] overloaded", 529))
        for (provider, content, status) in cases {
            let (id, _) = try create(client, ["provider": .string(provider)])
            let result = try send(client, id, content)
            let retrying = try XCTUnwrap(result.notes.first { $0.method == "message.retrying" }, "\(provider) \(status)")
            XCTAssertEqual(retrying.params["error"]?["status"]?.int, status, provider)
            if status == 429 {
                XCTAssertEqual(retrying.params["delay_ms"]?.int, 1000, "\(provider): the server's retry-after")
            }
            XCTAssertEqual(result.final["status"]?.string, "complete", "\(provider) \(status): \(result.final.text)")
        }
    }

    func testAConversationWhoseProviderIsGoneFailsItsRepliesAndABadReloadKeepsTheOldTable() throws {
        let client = try harness.client()
        let (id, _) = try create(client, ["provider": "second"])
        try send(client, id, "[[reply:before]]")

        // A reload naming a default provider that is not there is refused: "second" still answers.
        try reload(providers(), topLevel: "default_provider = \"ghost\"", marker: "config reload rejected")
        XCTAssertTrue(harness.log().contains("default_provider names no configured provider: \"ghost\""), harness.log())
        XCTAssertEqual(try send(client, id, "[[reply:kept]]").final["content"]?.string, "kept")

        // A reload without it: the conversation stays, its replies fail, nothing crashes.
        try reload("", marker: "config reloaded from")
        let gone = try send(client, id, "hello?")
        XCTAssertEqual(gone.error["code"]?.string, "not_configured")
        XCTAssertTrue(gone.error["message"]?.string?.contains("\"second\"") == true, gone.error.text)
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(id)])["conversation"]?["provider"]?.string, "second")
        let (plain, _) = try create(client, [:])
        XCTAssertEqual(try send(client, plain, "[[reply:fine]]").final["content"]?.string, "fine")
    }

    func testDefaultProviderChoosesForConversationsThatNameNone() throws {
        harness.tearDown()
        harness = try Harness(config: providers(), topLevel: "default_provider = \"claude\"")
        let client = try harness.client()
        let (id, info) = try create(client, [:])
        XCTAssertEqual(info["provider"]?.string, "claude")
        XCTAssertEqual(info["model"]?.string, "claude-test")
        XCTAssertEqual(try send(client, id, "[[reply:from claude]]").final["content"]?.string, "from claude")
        XCTAssertEqual(try lastRequest(to: "/messages")["path"]?.string, "/anthropic/v1/messages")
    }

    private func reload(_ extra: String, topLevel: String = "", marker: String) throws {
        let before = harness.log().components(separatedBy: marker).count
        try harness.writeConfig(extra, topLevel: topLevel)
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while harness.log().components(separatedBy: marker).count == before {
            guard Date() < deadline else { throw HarnessError(description: "no \"\(marker)\":\n\(harness.log())") }
            usleep(10_000)
        }
    }
}
