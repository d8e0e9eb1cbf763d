import ConfabProtocol
import Foundation
import XCTest

/// What real model servers do that the plain protocol does not promise, played by the fake
/// upstream: a server that refuses one form of a textless tool-call turn (llama-cpp-python
/// refuses `"content": null`), a proxy that answers a streamed request with one JSON body, an
/// empty 200 stream for a context too long, and what the daemon's log and usage say of it all.
final class ServerShapeTests: XCTestCase {
    var harness: Harness!

    static let config = """
        \(TestConfig.echoTool)

        [profiles.helper]
        tools = ["echo"]

        \(TestConfig.claudeProvider)

        [profiles.claude]
        provider = "claude"
        tools = ["echo"]
        """

    override func setUpWithError() throws {
        harness = try Harness(config: Self.config)
    }

    override func tearDown() { harness?.tearDown() }

    private func conversation(_ client: RPCClient, profile: String? = "helper") throws -> String {
        var params: [String: JSON] = ["title": "servers"]
        if let profile { params["profile"] = .string(profile) }
        let id = try XCTUnwrap(client.call("conversation.create", .object(params))["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    /// Sends and follows the reply's chain until a message of it ends without tool calls.
    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let chain = MessageID.sequence(of: try XCTUnwrap(sent["reply"]?.string))
        let notes = try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let reply = message["id"]?.string, MessageID.sequence(of: reply) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 30)
        return (notes, notes.last!.params["message"]!)
    }

    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { !($0["path"]?.string?.contains("/tool/") ?? true) && $0["method"]?.string == "POST" }
    }

    /// How each model request carried its textless tool-call turns: `""`, `absent` or `null`.
    private func toolTurnForms(_ request: JSON) -> [String] {
        (request["body"]?["messages"]?.array ?? []).filter { $0["tool_calls"] != nil }.map { turn in
            switch turn.object?["content"] {
            case nil: "absent"
            case .null?: "null"
            case .string(let text)?: text.isEmpty ? "\"\"" : "text"
            default: "other"
            }
        }
    }

    // MARK: - The tool-call turn

    func testAStrictServerTakesTheToolCallTurnAtOnceAndLaterSendsToo() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let (_, final) = try send(client, id, #"weather? [[tool:echo {"city":"Paris"}]] [[strict-content]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertTrue(final["content"]?.string?.hasPrefix("tool results: [echo]") == true, "\(final)")
        let (_, next) = try send(client, id, "[[strict-content]] [[reply:still here]]")
        XCTAssertEqual(next["content"]?.string, "still here", "\(next)")
        let requests = modelRequests()
        XCTAssertEqual(requests.count, 3, "no request was refused")
        XCTAssertEqual(requests.map(toolTurnForms), [[], ["\"\""], ["\"\""]])
    }

    func testAServerRefusingTheEmptyFormGetsTheOtherOnceAndTheProviderKeepsIt() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let (notes, final) = try send(client, id, #"weather? [[tool:echo {"city":"Oslo"}]] [[strict-content:empty]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertTrue(final["content"]?.string?.hasPrefix("tool results: [echo]") == true, "\(final)")
        let retrying = try XCTUnwrap(notes.first { $0.method == "message.retrying" }, "the refusal is announced as a retry")
        XCTAssertEqual(retrying.params["error"]?["status"]?.int, 500)
        XCTAssertTrue(retrying.params["error"]?["message"]?.string?.contains("validation error") == true, "\(retrying.params)")
        XCTAssertEqual(modelRequests().map(toolTurnForms), [[], ["\"\""], ["absent"]])
        XCTAssertTrue(harness.log().contains(#"refused a tool-call turn sent with "content":"""#), harness.log())
        XCTAssertTrue(harness.log().contains(#"provider=default took the tool-call turn without "content""#), harness.log())
        // The next send goes in the form the server took: no refusal first.
        let (_, next) = try send(client, id, "[[strict-content:empty]] [[reply:on we go]]")
        XCTAssertEqual(next["content"]?.string, "on we go", "\(next)")
        XCTAssertEqual(modelRequests().map(toolTurnForms).last, ["absent"])
        XCTAssertEqual(modelRequests().count, 4)
    }

    func testAServerRefusingBothFormsFailsNamingThemAndTheConversationStaysUsable() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let (_, final) = try send(client, id, #"weather? [[tool:echo {"city":"Lima"}]] [[strict-content:empty,absent]]"#)
        XCTAssertEqual(final["status"]?.string, "failed", "\(final)")
        let error = try XCTUnwrap(final["error"])
        XCTAssertEqual(error["code"]?.string, "upstream_http")
        XCTAssertEqual(error["status"]?.int, 500)
        let message = try XCTUnwrap(error["message"]?.string)
        XCTAssertTrue(message.contains(#"with "content":"""#) && message.contains(#"without "content""#), message)
        XCTAssertTrue(message.contains("Field required"), "the server's own words stay: \(message)")
        XCTAssertEqual(modelRequests().map(toolTurnForms), [[], ["\"\""], ["absent"]], "each form once, no more")
        // A server that takes a form answers the same conversation again.
        let (_, next) = try send(client, id, "[[reply:fine again]]")
        XCTAssertEqual(next["content"]?.string, "fine again", "\(next)")
    }

    // MARK: - One JSON body for a streamed request

    func testAJSONBodyToAStreamedRequestIsTheWholeReplyInOneDelta() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: nil)
        let (notes, final) = try send(client, id, "hello there [[json-body]]")
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(final["content"]?.string, "You said: hello there")
        XCTAssertEqual(final["finish_reason"]?.string, "stop")
        XCTAssertEqual(final["usage"]?["completion_tokens"]?.int, 7, "the body's own usage: \(final)")
        XCTAssertNil(final["usage"]?["estimated"])
        XCTAssertEqual(RPCClient.deltas(notes, for: try XCTUnwrap(final["id"]?.string)), ["You said: hello there"])
        XCTAssertEqual(modelRequests().first?["body"]?["stream"], .bool(true), "the request asked for a stream")
    }

    func testAJSONBodyCarriesToolCallsForChatAndAnthropic() throws {
        let client = try harness.client()
        for profile in ["helper", "claude"] {
            let id = try conversation(client, profile: profile)
            let (notes, final) = try send(client, id, #"weather? [[tool:echo {"city":"Rome"}]] [[tool-text:Looking.]] [[json-body]]"#)
            XCTAssertEqual(final["status"]?.string, "complete", "\(profile): \(final)")
            XCTAssertTrue(final["content"]?.string?.hasPrefix("tool results: [echo]") == true, "\(profile): \(final)")
            let asking = try XCTUnwrap(notes.first { $0.method == "message.completed" }?.params["message"])
            XCTAssertEqual(asking["content"]?.string, "Looking.", profile)
            XCTAssertEqual(asking["finish_reason"]?.string, "tool_calls", profile)
            XCTAssertEqual(asking["tool_calls"]?.array?.first?["name"]?.string, "echo", profile)
            XCTAssertEqual(asking["tool_calls"]?.array?.first?["arguments"].flatMap { try? JSON.parse($0.string ?? "") }?["city"]?.string,
                           "Rome", profile)
        }
    }

    // MARK: - An empty answer

    func testAnEmptyStreamFailsSayingTheServerGaveNoAnswerAndPointsToContextTokens() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let (_, final) = try send(client, id, "a long story [[empty-stream]]")
        XCTAssertEqual(final["status"]?.string, "failed", "\(final)")
        XCTAssertEqual(final["error"]?["code"]?.string, "upstream_protocol")
        let message = try XCTUnwrap(final["error"]?["message"]?.string)
        XCTAssertTrue(message.contains("the server gave no answer"), message)
        XCTAssertTrue(message.contains(#"context_tokens in profile "helper" or provider "default""#), message)
        // Without a profile the provider alone is named.
        let plain = try conversation(client, profile: nil)
        let (_, other) = try send(client, plain, "[[empty-stream]]")
        XCTAssertTrue(other["error"]?["message"]?.string?.contains(#"context_tokens in provider "default""#) == true, "\(other)")
    }

    // MARK: - Usage of stopped replies

    func testACancelledReplyWithTextGetsAnEstimateAndTheListingCountsIt() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: nil)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:500]] [[delay:10]] [[no-usage]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        XCTAssertEqual(try client.call("generation.cancel", ["conversation": .string(id)])["cancelled"]?.string, reply)
        let (_, final) = try client.awaitReply(reply)
        XCTAssertEqual(final["status"]?.string, "cancelled")
        XCTAssertFalse(final["content"]?.string?.isEmpty ?? true)
        let usage = try XCTUnwrap(final["usage"], "a cancelled reply with text has usage: \(final)")
        XCTAssertEqual(usage["estimated"], .bool(true))
        XCTAssertGreaterThan(usage["completion_tokens"]?.int ?? 0, 0)
        let listed = try XCTUnwrap(client.call("conversation.list")["conversations"]?.array?.first { $0["id"]?.string == id })
        XCTAssertEqual(listed["usage"]?["total_tokens"]?.int, usage["total_tokens"]?.int)
        let table = try harness.runClient(["ls", "-l"])
        let row = try XCTUnwrap(table.stdout.split(separator: "\n").first { $0.hasPrefix(id) }, table.stdout)
        XCTAssertTrue(row.contains("~\(usage["total_tokens"]?.int ?? -1)"), String(row))
    }

    func testAReplyInterruptedByShutdownKeepsAnEstimate() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: nil)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:50]] [[stall:4]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        harness.stopDaemon()
        try harness.startDaemon()
        let again = try harness.client()
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])
        let message = try XCTUnwrap(attached["messages"]?.array?.first { $0["id"]?.string == reply })
        XCTAssertEqual(message["status"]?.string, "interrupted", "\(message)")
        XCTAssertEqual(message["usage"]?["estimated"], .bool(true), "\(message)")
        XCTAssertGreaterThan(message["usage"]?["completion_tokens"]?.int ?? 0, 0)
    }

    func testAReplyCutOffByACrashGetsAnEstimateAtTheNextStart() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: nil)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:2000]] [[delay:20]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        // Text is saved to the log every quarter second while it streams: wait until some is.
        let path = harness.dataDirectory + "/conversations/\(id).jsonl"
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains(#""reply.text""#) {
            _ = try client.collect(until: { method, _ in method == "message.delta" })
        }
        harness.killDaemon()
        try harness.startDaemon()
        let again = try harness.client()
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])
        let message = try XCTUnwrap(attached["messages"]?.array?.first { $0["id"]?.string == reply })
        XCTAssertEqual(message["status"]?.string, "interrupted", "\(message)")
        XCTAssertFalse(message["content"]?.string?.isEmpty ?? true)
        XCTAssertEqual(message["usage"]?["estimated"], .bool(true), "\(message)")
        let listed = try XCTUnwrap(again.call("conversation.list")["conversations"]?.array?.first { $0["id"]?.string == id })
        XCTAssertEqual(listed["usage"]?["total_tokens"]?.int, message["usage"]?["total_tokens"]?.int)
    }

    // MARK: - The daemon's log

    func testTheLogWritesTheProtocolsErrorCodesWithTheServersWords() throws {
        harness.tearDown()
        harness = try Harness(config: Self.config, retries: 1)
        let client = try harness.client()
        let id = try conversation(client, profile: nil)
        let (_, limited) = try send(client, id, "[[fail-first:1]] [[status:429]] once")
        XCTAssertEqual(limited["status"]?.string, "complete", "\(limited)")
        let (_, failed) = try send(client, id, "[[status:500]] [[validation-error]] always")
        XCTAssertEqual(failed["error"]?["code"]?.string, "upstream_http")
        let log = harness.log()
        XCTAssertTrue(log.contains("failed (rate_limited status=429: fake upstream error 429): retrying"), log)
        XCTAssertTrue(log.contains("failed (upstream_http status=500: 2 validation errors"), log)
        XCTAssertTrue(log.contains("failed: upstream_http status=500: 2 validation errors"), log)
        for swiftName in ["rateLimited", "upstreamHTTP", "upstreamProtocol"] {
            XCTAssertFalse(log.contains(swiftName), "\(swiftName) in the log:\n\(log)")
        }
    }
}
