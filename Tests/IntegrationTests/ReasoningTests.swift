import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Models that think: the reasoning streamed to every attached client and kept, passed back
/// exactly where each API demands it (the fake upstream refuses as DeepSeek and Anthropic do
/// when it is not), a budget spent thinking, and the empty answers of reasoning servers.
final class ReasoningTests: XCTestCase {
    var harness: Harness!

    static let config = """
        \(TestConfig.echoTool)

        [profiles.helper]
        tools = ["echo"]

        [profiles.reason]
        max_tokens = 64

        \(TestConfig.claudeProvider)

        [profiles.claude]
        provider = "claude"
        tools = ["echo"]

        [providers.reasoner]
        base_url = "$UPSTREAM/reasoner/v1"
        model = "deepseek-reasoner"
        reasoning_pass_back = "none"

        [profiles.reasoner]
        provider = "reasoner"
        tools = ["echo"]
        """

    override func setUpWithError() throws { harness = try Harness(config: Self.config) }
    override func tearDown() { harness?.tearDown() }

    private func conversation(_ client: RPCClient, profile: String? = nil) throws -> String {
        var params: [String: JSON] = ["title": "thinking"]
        if let profile { params["profile"] = .string(profile) }
        let id = try XCTUnwrap(try client.call("conversation.create", .object(params))["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    /// Every notification until the reply's chain ends: a message of it ends without tool calls, or not complete.
    private func follow(_ client: RPCClient, _ reply: String, timeout: Double = 20) throws -> [(method: String, params: JSON)] {
        let chain = MessageID.sequence(of: reply)
        return try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: timeout)
    }

    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> (reply: String, notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let notes = try follow(client, reply)
        return (reply, notes, notes.last!.params["message"]!)
    }

    /// The requests the model servers got (not the tools'), in order.
    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasPrefix("/tool/") != true && $0["method"]?.string == "POST" }
    }

    private func history(_ client: RPCClient, _ id: String) throws -> [JSON] {
        try XCTUnwrap(try client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array)
    }

    private static func reasoningNotes(_ notes: [(method: String, params: JSON)], for id: String) -> [String] {
        notes.filter { $0.method == "message.reasoning" && $0.params["message"]?.string == id }.compactMap { $0.params["content"]?.string }
    }

    /// The fake's signature of a thought (FNV-1a 64 of its text, `fake-sig-` and 16 hex digits).
    private static func fakeSignature(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return "fake-sig-" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    // MARK: - Passed back

    func testADeepSeekToolLoopSendsBackTheReasoningOfItsToolCallTurnInEveryLaterRequest() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "helper")
        let (_, notes, final) = try send(client, id, #"[[think:I should check the weather.]] [[tool-id:call_w]] [[tool:echo {"city":"Oslo"}]] [[chunk:100]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(Self.reasoningNotes(notes, for: "m2").joined(), "I should check the weather.")
        let messages = try history(client, id)
        guard messages.map({ $0["id"]?.string }) == ["m1", "m2", "m2.1", "m2.2"] else { return XCTFail("\(messages)") }
        XCTAssertEqual(messages[1]["reasoning"]?["text"]?.string, "I should check the weather.")
        XCTAssertNil(messages[1]["replay"], "what goes back to the server is not sent to clients")
        let result = try XCTUnwrap(messages[2]["content"]?.string)
        var requests = modelRequests()
        guard requests.count == 2 else { return XCTFail("requests: \(requests.count)") }
        let toolTurn: JSON = ["role": "assistant", "content": "", "reasoning_content": "I should check the weather.",
                              "tool_calls": [["id": "call_w", "type": "function", "function": ["name": "echo", "arguments": #"{"city":"Oslo"}"#]]]]
        XCTAssertEqual(requests[1]["body"]?["messages"], [
            ["role": "user", "content": #"[[think:I should check the weather.]] [[tool-id:call_w]] [[tool:echo {"city":"Oslo"}]] [[chunk:100]]"#],
            toolTurn, ["role": "tool", "tool_call_id": "call_w", "content": .string(result)],
        ])
        // The next question: the tool-call turn's reasoning still goes, the answer's does not.
        let (_, _, next) = try send(client, id, "[[think:again]] [[reply:fine]]")
        XCTAssertEqual(next["status"]?.string, "complete", "\(next)")
        requests = modelRequests()
        guard requests.count == 3 else { return XCTFail("requests: \(requests.count)") }
        let answer = try XCTUnwrap(messages[3]["content"]?.string)
        XCTAssertEqual(requests[2]["body"]?["messages"], [
            ["role": "user", "content": #"[[think:I should check the weather.]] [[tool-id:call_w]] [[tool:echo {"city":"Oslo"}]] [[chunk:100]]"#],
            toolTurn, ["role": "tool", "tool_call_id": "call_w", "content": .string(result)],
            ["role": "assistant", "content": .string(answer)],
            ["role": "user", "content": "[[think:again]] [[reply:fine]]"],
        ])
    }

    func testWithoutThePassBackTheServerRefusesInItsOwnWordsAndNoOtherFormIsTried() throws {
        // deepseek-reasoner's provider sends no reasoning back; the fake, thinking in DeepSeek's
        // style, then refuses the tool loop as DeepSeek does.
        let client = try harness.client()
        let id = try conversation(client, profile: "reasoner")
        let (_, _, final) = try send(client, id, #"[[think:hmm]] [[tool:echo {"city":"Oslo"}]]"#)
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "upstream_http")
        let message = try XCTUnwrap(final["error"]?["message"]?.string)
        XCTAssertTrue(message.hasPrefix("The reasoning_content in the thinking mode must be passed back to the API."), message)
        XCTAssertTrue(message.contains("reasoning_pass_back"), message)
        XCTAssertFalse(message.contains("tool-call turn without text"), message)
        let requests = modelRequests()
        guard requests.count == 2 else { return XCTFail("refused once, not sent again without content: \(requests.count)") }
        XCTAssertNil(requests[1]["body"]?["messages"]?.array?[1]["reasoning_content"])
    }

    func testDeepSeekReasonerIsSentNoReasoning() throws {
        // deepseek-reasoner refuses any reasoning_content in a request (the fake as well): with
        // reasoning_pass_back = "none" a tool loop of a model that thinks (here in Ollama's
        // form, which the fake does not hold to DeepSeek's rule) is sent none.
        let client = try harness.client()
        let id = try conversation(client, profile: "reasoner")
        let (_, _, final) = try send(client, id, #"[[think:first]] [[think-style:ollama]] [[tool-id:call_r]] [[tool:echo {"city":"Oslo"}]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(try history(client, id)[1]["reasoning"]?["text"]?.string, "first")
        let requests = modelRequests()
        guard requests.count == 2, requests[1]["body"]?["messages"]?.array?.count == 3 else { return XCTFail("\(requests)") }
        XCTAssertEqual(requests[1]["body"]?["messages"]?.array?[1], ["role": "assistant", "content": "",
            "tool_calls": [["id": "call_r", "type": "function", "function": ["name": "echo", "arguments": #"{"city":"Oslo"}"#]]]])
    }

    func testAnAnthropicThinkingToolLoopSendsItsBlocksBackFirstWithTheirSignatures() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "claude")
        let prompt = #"[[think:Look it up.]] [[think-redacted]] [[tool:echo {"city":"Lyon"}]]"#
        let (_, notes, final) = try send(client, id, prompt)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        XCTAssertEqual(Self.reasoningNotes(notes, for: "m2").joined(), "Look it up.")
        let messages = try history(client, id)
        XCTAssertEqual(messages[1]["reasoning"]?["redacted_blocks"]?.int, 1)
        let requests = modelRequests()
        guard requests.count == 2 else { return XCTFail("requests: \(requests.count)") }
        let turns = try XCTUnwrap(requests[1]["body"]?["messages"]?.array)
        guard turns.count == 3 else { return XCTFail("turns: \(turns)") }
        let use = try XCTUnwrap(turns[1]["content"]?.array?.last)
        XCTAssertEqual(turns[1], ["role": "assistant", "content": [
            ["type": "thinking", "thinking": "Look it up.", "signature": .string(Self.fakeSignature("Look it up."))],
            try XCTUnwrap(turns[1]["content"]?.array?[1]),
            use,
        ]])
        XCTAssertEqual(turns[1]["content"]?.array?[1]["type"]?.string, "redacted_thinking")
        XCTAssertTrue(turns[1]["content"]?.array?[1]["data"]?.string?.hasPrefix("fake-redacted-") == true)
        XCTAssertEqual(use["type"]?.string, "tool_use")

        // The blocks survive a restart and a fork: a later request of either still carries them.
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        try again.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(try history(again, id)[1]["reasoning"]?["text"]?.string, "Look it up.")
        let forked = try XCTUnwrap(try again.call("conversation.fork", ["conversation": .string(id)])["conversation"]?["id"]?.string)
        for conversation in [id, forked] {
            try again.call("conversation.attach", ["conversation": .string(conversation)])
            XCTAssertEqual(try send(again, conversation, "[[reply:ok]]").final["status"]?.string, "complete")
            XCTAssertEqual(modelRequests().last?["body"]?["messages"]?.array?[1], turns[1], conversation)
        }
    }

    func testBeforeAnyPassBackTheFakeRefusesAsAnthropicDoes() throws {
        // The strict mode itself: a thinking tool loop whose assistant turn starts with its tool_use.
        let client = try harness.client()
        let id = try conversation(client, profile: "claude")
        XCTAssertEqual(try send(client, id, "[[reply:plain]]").final["status"]?.string, "complete")
        let body = #"{"model":"fake-claude","max_tokens":64,"messages":[{"role":"user","content":"[[think:x]] [[tool:echo {}]]"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"echo","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}"#
        let answer = try rawPost("/anthropic/v1/messages", body, headers: ["x-api-key: anthropic-test-key"])
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 400"), answer)
        XCTAssertTrue(answer.contains(#"messages.1.content.0.type: Expected 'thinking' or 'redacted_thinking', but found 'tool_use'"#), answer)
        let chat = #"{"model":"fake-model","messages":[{"role":"user","content":"[[think:x]] [[tool:echo {}]]"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}"#
        let refused = try rawPost("/v1/chat/completions", chat)
        XCTAssertTrue(refused.hasPrefix("HTTP/1.1 400"), refused)
        XCTAssertTrue(refused.contains("The reasoning_content in the thinking mode must be passed back to the API."), refused)
    }

    private func rawPost(_ path: String, _ body: String, headers: [String] = []) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(harness.upstreamPort).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError(description: "connect: \(errno)") }
        let head = (["POST \(path) HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", "Content-Length: \(body.utf8.count)",
                     "Connection: close"] + headers).joined(separator: "\r\n")
        let request = Array((head + "\r\n\r\n" + body).utf8)
        _ = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    // MARK: - Streamed, shown to late comers, kept

    func testEveryClientGetsTheThoughtAndOneAttachingMidThoughtSeesItThinking() throws {
        let first = try harness.client(name: "first")
        let id = try conversation(first)
        let second = try harness.client(name: "second")
        try second.call("conversation.attach", ["conversation": .string(id)])
        let sent = try first.call("message.send", ["conversation": .string(id), "content": "[[think:Six times seven.]] [[hold:0 thought]] [[reply:42]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitUntilUpstreamHolds("thought")
        // Every piece of the thought reaches both, before any text.
        for client in [first, second] {
            var thought = ""
            let notes = try client.collect(until: { method, params in
                if method == "message.reasoning" { thought += params["content"]?.string ?? "" }
                return thought == "Six times seven."
            })
            XCTAssertFalse(notes.contains { $0.method == "message.delta" })
        }
        let late = try harness.client(name: "late")
        let attached = try late.call("conversation.attach", ["conversation": .string(id)])
        let pending = try XCTUnwrap(attached["pending"])
        XCTAssertEqual(pending["id"]?.string, reply)
        XCTAssertEqual(pending["reasoning"]?["text"]?.string, "Six times seven.")
        XCTAssertNotNil(pending["reasoning"]?["started"]?.string)
        XCTAssertNil(pending["reasoning"]?["ended"], "still thinking")
        try harness.releaseUpstream("thought")
        for client in [first, second, late] {
            let notes = try follow(client, reply)
            let final = try XCTUnwrap(notes.last?.params["message"])
            XCTAssertEqual(final["content"]?.string, "42")
            let started = try XCTUnwrap(final["reasoning"]?["started"]?.string.flatMap(Timestamp.init(rfc3339:)))
            let ended = try XCTUnwrap(final["reasoning"]?["ended"]?.string.flatMap(Timestamp.init(rfc3339:)))
            XCTAssertLessThanOrEqual(started, ended)
        }
        let usage = try XCTUnwrap(try history(first, id).last?["usage"])
        XCTAssertEqual(usage["reasoning_tokens"]?.int, 6, "\(usage)")
        XCTAssertEqual(usage["completion_tokens"]?.int, 7)
        // The thought is searchable as the text is.
        let found = try first.call("conversation.search", ["query": "times seven"])
        XCTAssertEqual(found["hits"]?.array?.first?["message"]?.string, reply, "\(found)")
    }

    func testEachStyleOfChatReasoningIsReadAndInlineThinkingStaysText() throws {
        let client = try harness.client()
        let id = try conversation(client)
        for style in ["deepseek", "openrouter", "ollama"] {
            let (reply, notes, final) = try send(client, id, "[[think:step one]] [[think-style:\(style)]] [[reply:done]] [[cached:2]]")
            XCTAssertEqual(Self.reasoningNotes(notes, for: reply).joined(), "step one", style)
            XCTAssertEqual(final["content"]?.string, "done", style)
            XCTAssertEqual(final["reasoning"]?["text"]?.string, "step one", style)
            XCTAssertEqual(final["usage"]?["cache_read_tokens"]?.int, 2, style)
            XCTAssertEqual(final["usage"]?["reasoning_tokens"]?.int, 3, style)
        }
        let (_, notes, final) = try send(client, id, "[[think:inline]] [[think-style:inline]] [[reply:done]]")
        XCTAssertFalse(notes.contains { $0.method == "message.reasoning" })
        XCTAssertEqual(final["content"]?.string, "<think>inline</think>\n\ndone")
    }

    func testAnthropicUsageKeepsCacheReadsAndWritesApart() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "claude")
        let final = try send(client, id, "[[cached:3]] [[cache-write:1]] [[reply:ok]] one two three four five six").final
        let usage = try XCTUnwrap(final["usage"])
        XCTAssertEqual(usage["cache_read_tokens"]?.int, 3)
        XCTAssertEqual(usage["cache_write_tokens"]?.int, 1)
        // The fake counts the prompt's nine words; it reports 5 of them as input_tokens, 3 read, 1 written.
        XCTAssertEqual(usage["prompt_tokens"]?.int, 9, "every input token, the cache's included: \(usage)")
    }

    func testARestartKeepsTheThoughtAndACrashKeepsWhatWasSaved() throws {
        let client = try harness.client()
        let id = try conversation(client)
        XCTAssertEqual(try send(client, id, "[[think:kept]] [[reply:fine]]").final["status"]?.string, "complete")
        // Mid-thought: the daemon saves the thought as it saves text (every 250 ms).
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[think-words:400]] [[think-delay:2]] [[hold:0 crash]] [[reply:never]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        func saved() -> String {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line -> String? in
                guard let record = try? JSON.parse(String(line)), record["type"]?.string == "reply.reasoning",
                      record["message"]?.string == reply else { return nil }
                return record["content"]?.string
            }.joined()
        }
        let deadline = Date().addingTimeInterval(30)
        while saved().count < 300, Date() < deadline { usleep(10_000) }
        XCTAssertGreaterThanOrEqual(saved().count, 300)
        harness.killDaemon()
        try harness.startDaemon()
        let again = try harness.client()
        let messages = try history(again, id)
        XCTAssertEqual(messages[1]["reasoning"]?["text"]?.string, "kept")
        let restored = try XCTUnwrap(messages.last)
        XCTAssertEqual(restored["status"]?.string, "interrupted")
        let thought = try XCTUnwrap(restored["reasoning"]?["text"]?.string)
        XCTAssertTrue(thought.hasPrefix("t1 t2 t3"), thought)
        XCTAssertGreaterThanOrEqual(thought.count, 300)
        XCTAssertNotNil(restored["reasoning"]?["ended"], "no longer thinking")
        XCTAssertEqual(restored["usage"]?["estimated"]?.bool, true)
        XCTAssertEqual(restored["usage"]?["reasoning_tokens"]?.int, (thought.utf8.count + 3) / 4)
    }

    /// A model that thinks again after its answer began: every client gets the second thought
    /// between the texts, the thought is kept whole, and its clock's start moves on by the
    /// pause (kept so in the log: a crash after it restores the moved start).
    func testThinkingAgainAfterTheAnswerBeganIsStreamedKeptAndRestored() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let (reply, notes, final) = try send(client, id, "[[think:first]] [[think-again:second]] [[reply:one two three four]]")
        let order = notes.filter { $0.params["message"]?.string == reply }.compactMap { note -> String? in
            switch note.method {
            case "message.reasoning": "thought:" + (note.params["content"]?.string ?? "")
            case "message.delta": "text"
            default: nil
            }
        }
        let second = try XCTUnwrap(order.firstIndex(of: "thought:second"), "\(order)")
        XCTAssertTrue(order[..<second].contains("text") && order[second...].contains("text"), "between the texts: \(order)")
        XCTAssertEqual(Self.reasoningNotes(notes, for: reply).joined(), "firstsecond")
        XCTAssertEqual(final["reasoning"]?["text"]?.string, "firstsecond")
        XCTAssertNotNil(final["reasoning"]?["ended"])
        XCTAssertEqual(try history(client, id).last?["reasoning"], final["reasoning"])

        // Cut after the second thought: the log's last reasoning record holds the moved start.
        let sent = try client.call("message.send", ["conversation": .string(id),
                                                    "content": "[[think:early]] [[think-again:again]] [[think-delay:300]] [[hold:3 cut]] [[reply:a b c d]]"])
        let cut = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitUntilUpstreamHolds("cut")
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        func starts() -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line -> String? in
                guard let record = try? JSON.parse(String(line)), record["type"]?.string == "reply.reasoning",
                      record["message"]?.string == cut else { return nil }
                return record["started"]?.string
            }
        }
        let deadline = Date().addingTimeInterval(10)
        while Set(starts()).count < 2 && Date() < deadline { usleep(20_000) }
        let saved = starts()
        XCTAssertEqual(Set(saved).count, 2, "the second thought's record carries the moved start: \(saved)")
        harness.killDaemon()
        try harness.releaseUpstream("cut")
        try harness.startDaemon()
        let again = try harness.client()
        let restored = try XCTUnwrap(try history(again, id).last)
        XCTAssertEqual(restored["id"]?.string, cut)
        XCTAssertEqual(restored["reasoning"]?["text"]?.string, "earlyagain")
        let first = try XCTUnwrap(saved.first.flatMap(Timestamp.init(rfc3339:)))
        let moved = try XCTUnwrap(restored["reasoning"]?["started"]?.string.flatMap(Timestamp.init(rfc3339:)))
        XCTAssertEqual(restored["reasoning"]?["started"]?.string, saved.last, "the last record's start, not the first")
        // Later by the pause as the daemon saw it (no lower bound: a loaded machine may deliver
        // the first text late, which shortens the pause the daemon measures).
        XCTAssertGreaterThan(moved.milliseconds, first.milliseconds, "moved on by the pause")
    }

    func testAReplyCancelledWhileThinkingRecordsAnEstimateOfTheThought() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[think:abcdefgh]] [[hold:0 stop]] [[reply:never]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitUntilUpstreamHolds("stop")
        var thought = ""
        _ = try client.collect(until: { method, params in
            if method == "message.reasoning" { thought += params["content"]?.string ?? "" }
            return thought == "abcdefgh"
        })
        try client.call("generation.cancel", ["conversation": .string(id)])
        let final = try XCTUnwrap(try follow(client, reply).last?.params["message"])
        try harness.releaseUpstream("stop")
        XCTAssertEqual(final["status"]?.string, "cancelled")
        XCTAssertEqual(final["usage"]?["reasoning_tokens"]?.int, 2)
        XCTAssertEqual(final["usage"]?["completion_tokens"]?.int, 2)
        XCTAssertEqual(final["usage"]?["estimated"]?.bool, true)
        XCTAssertNotNil(final["reasoning"]?["ended"])
    }

    // MARK: - A budget spent thinking

    func testABudgetSpentThinkingFailsSaysSoAndCannotBeContinued() throws {
        let client = try harness.client()
        for (profile, spent) in [("reason", "all 64 tokens of max_tokens"), ("claude", "all 1024 tokens of max_tokens")] {
            let id = try conversation(client, profile: profile)
            let (_, _, final) = try send(client, id, "[[think-only]] [[think-words:5]]")
            let expected = "the model used \(spent) thinking and wrote no answer: raise max_tokens (profile `\(profile)`) or lower reasoning_effort"
            XCTAssertEqual(final["status"]?.string, "failed", profile)
            XCTAssertEqual(final["finish_reason"]?.string, "length", profile)
            XCTAssertEqual(final["error"]?["code"]?.string, "thinking_exhausted", profile)
            XCTAssertEqual(final["error"]?["message"]?.string, expected, profile)
            XCTAssertEqual(final["reasoning"]?["text"]?.string, "t1 t2 t3 t4 t5", profile)
            XCTAssertEqual(final["content"]?.string, "", profile)
            if profile == "reason" {
                XCTAssertEqual(final["usage"]?["reasoning_tokens"]?.int, final["usage"]?["completion_tokens"]?.int, "\(final)")
            }
            XCTAssertThrowsError(try client.call("message.continue", ["conversation": .string(id)])) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error)")
            }
        }
    }

    // MARK: - Empty answers

    func testDoneAfterNothingIsNoAnswer() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let final = try send(client, id, "[[words:0]] [[no-finish]]").final
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "upstream_protocol")
        XCTAssertTrue(final["error"]?["message"]?.string?.hasPrefix("the server gave no answer") == true, "\(final)")
    }
}
