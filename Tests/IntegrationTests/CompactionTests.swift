import ConfabProtocol
import Foundation
import XCTest

/// The summary prompt as the daemon sends it (Compaction.defaultPrompt).
let compactionPrompt = "Summarise the conversation above so that it can go on from your summary alone: the messages "
    + "it covers will not be sent again. Keep every decision made, every fact established (names, "
    + "numbers, paths, code that matters) and every question still open. Be brief. Write the summary "
    + "only, with no preamble."

/// `conversation.compact`, `conversation.uncompact`, and what the model is sent around a summary.
final class CompactionTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
    }

    /// The last request's messages, `role: content`.
    private func lastRequest() throws -> [String] {
        try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array).map {
            "\($0["role"]?.string ?? ""): \($0["content"]?.string ?? "")"
        }
    }

    private func logText(_ id: String) throws -> String {
        try String(contentsOfFile: harness.dataDirectory + "/conversations/\(id).jsonl", encoding: .utf8)
    }

    private func records(_ id: String, type: String) throws -> [JSON] {
        try logText(id).split(separator: "\n").compactMap { try? JSON.parse(String($0)) }.filter { $0["type"]?.string == type }
    }

    /// A conversation with a system prompt and two answered questions (m1 … m4).
    private func twoTurns(_ client: RPCClient) throws -> String {
        let id = try harness.createConversation(client, system: "Be brief.")
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try send(client, id, "[[reply:one]] q1")
        _ = try send(client, id, "[[reply:two]] q2")
        return id
    }

    private func compact(_ client: RPCClient, _ id: String, focus: String) throws -> JSON {
        try client.call("conversation.compact", ["conversation": .string(id), "focus": .string(focus)], timeout: 20)
    }

    func testTheModelIsSentTheSummaryInPlaceOfItsRangeUntilUncompact() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        let other = try harness.client(name: "other")
        try other.call("conversation.attach", ["conversation": .string(id)])

        let result = try compact(client, id, focus: "[[reply:They said one and two.]] the numbers")
        let compaction = try XCTUnwrap(result["compaction"])
        XCTAssertEqual(compaction["first"]?.string, "m1")
        XCTAssertEqual(compaction["last"]?.string, "m4")
        XCTAssertEqual(compaction["summary"]?.string, "They said one and two.")
        XCTAssertEqual(compaction["model"]?.string, "fake-model")
        XCTAssertEqual(compaction["focus"]?.string, "[[reply:They said one and two.]] the numbers")
        // The summary request: the conversation as a reply would be sent it, then the prompt with the focus.
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: [[reply:one]] q1", "assistant: one", "user: [[reply:two]] q2", "assistant: two",
            "user: " + compactionPrompt + "\n\nAbove all, keep what concerns: [[reply:They said one and two.]] the numbers",
        ])
        // Every attached screen follows the job.
        for watcher in [client, other] {
            let notes = try watcher.collect(until: { method, _ in method == "compaction.completed" })
            XCTAssertEqual(notes.first { $0.method.hasPrefix("compaction.") }?.method, "compaction.started")
            XCTAssertEqual(notes.filter { $0.method == "compaction.delta" }.compactMap { $0.params["content"]?.string }.joined(),
                           "They said one and two.")
            XCTAssertEqual(notes.last?.params["compaction"]?["last"]?.string, "m4")
        }

        // From now on: the system prompt, the summary, then what came after it.
        _ = try send(client, id, "[[reply:three]] q3")
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nThey said one and two.\n\n[[reply:three]] q3",
        ])
        // Nothing of the history is gone.
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.map { $0["id"]?.string ?? "" }, ["m1", "m2", "m3", "m4", "m5", "m6"])
        XCTAssertEqual(history["compaction"]?["last"]?.string, "m4")
        XCTAssertEqual(try records(id, type: "compaction").count, 1)
        XCTAssertEqual(try records(id, type: "message").count, 3)

        // A restart reads the summary back.
        try harness.restartDaemon()
        let again = try harness.client()
        try again.call("conversation.attach", ["conversation": .string(id)])
        _ = try send(again, id, "[[reply:four]] q4")
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nThey said one and two.\n\n[[reply:three]] q3",
            "assistant: three", "user: [[reply:four]] q4",
        ])

        // Undone: the whole history again, by a record.
        let undone = try again.call("conversation.uncompact", ["conversation": .string(id)])
        XCTAssertEqual(undone["uncompacted"]?["last"]?.string, "m4")
        let note = try again.collect(until: { method, _ in method == "compaction.undone" })
        XCTAssertEqual(note.last?.params["compaction"]?["summary"]?.string, "They said one and two.")
        _ = try send(again, id, "[[reply:five]] q5")
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: [[reply:one]] q1", "assistant: one", "user: [[reply:two]] q2", "assistant: two",
            "user: [[reply:three]] q3", "assistant: three", "user: [[reply:four]] q4", "assistant: four", "user: [[reply:five]] q5",
        ])
        XCTAssertEqual(try records(id, type: "uncompaction").count, 1)
        XCTAssertNil(try again.call("conversation.history", ["conversation": .string(id)])["compaction"])
        XCTAssertThrowsError(try again.call("conversation.uncompact", ["conversation": .string(id)])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.conflict)
        }
    }

    func testASecondSummaryFoldsInTheFirst() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        _ = try compact(client, id, focus: "[[reply:S1]]")
        _ = try send(client, id, "[[reply:three]] q3")
        let second = try compact(client, id, focus: "[[reply:S2]]")
        XCTAssertEqual(second["compaction"]?["first"]?.string, "m1")
        XCTAssertEqual(second["compaction"]?["last"]?.string, "m6")
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nS1\n\n[[reply:three]] q3", "assistant: three",
            "user: " + compactionPrompt + "\n\nAbove all, keep what concerns: [[reply:S2]]",
        ])
        // Nothing new since: nothing to compact.
        XCTAssertThrowsError(try compact(client, id, focus: "")) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.conflict)
        }
        _ = try send(client, id, "[[reply:four]] q4")
        XCTAssertEqual(try lastRequest(), ["system: Be brief.", "user: Summary of the earlier conversation (m1…m6):\n\nS2\n\n[[reply:four]] q4"])
    }

    func testAFailedOrCancelledSummaryLeavesTheLogAsItWas() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        let before = try logText(id)

        XCTAssertThrowsError(try compact(client, id, focus: "[[status:500]]")) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.upstreamFailed)
        }
        let failed = try client.collect(until: { method, _ in method == "compaction.failed" })
        XCTAssertEqual(failed.last?.params["error"]?["status"]?.int, 500)
        XCTAssertEqual(failed.last?.params["cancelled"]?.bool, false)
        XCTAssertEqual(try logText(id), before)

        // Cancelled as a reply is (generation.cancel), from another screen, while it streams.
        let canceller = try harness.client(name: "canceller")
        try canceller.call("conversation.attach", ["conversation": .string(id)])
        let requestID = 900
        try client.sendRaw(RPC.request(id: .int(requestID), method: "conversation.compact",
                                       params: ["conversation": .string(id), "focus": "[[hold:2 sum]]"]))
        try harness.waitUntilUpstreamHolds("sum")
        let cancelled = try canceller.call("generation.cancel", ["conversation": .string(id)])
        XCTAssertEqual(cancelled["cancelled"]?.string, "compaction")
        let answer = try client.response(to: .int(requestID))
        XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.conflict)
        let notes = try canceller.collect(until: { method, _ in method == "compaction.failed" })
        XCTAssertEqual(notes.last?.params["cancelled"]?.bool, true)
        try harness.releaseUpstream("sum")
        XCTAssertEqual(try logText(id), before)

        _ = try send(client, id, "[[reply:three]] q3")
        XCTAssertEqual(try lastRequest().count, 6, "the whole history: system, four messages and the new one")
    }

    func testDeletingTheConversationAnswersTheSummaryItWaitedFor() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        try client.sendRaw(RPC.request(id: .int(901), method: "conversation.compact",
                                       params: ["conversation": .string(id), "focus": "[[hold:1 gone]]"]))
        try harness.waitUntilUpstreamHolds("gone")
        let other = try harness.client(name: "other")
        try other.call("conversation.delete", ["conversation": .string(id)])
        let answer = try client.response(to: .int(901))
        XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.notFound, "\(answer)")
        XCTAssertEqual(answer["error"]?["message"]?.string, "no conversation \(id): it was deleted while its summary was written")
        try harness.releaseUpstream("gone")
        XCTAssertEqual(try other.call("status")["conversations"]?.int, 0)
    }

    /// confabd told to stop (SIGTERM) while a summary is written still answers the call that
    /// asked for it, before `server.stopping`: the summary stops and nothing is stored.
    func testStoppingWhileASummaryIsWrittenAnswersTheCompactCall() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        let before = try logText(id)
        try client.sendRaw(RPC.request(id: .int(902), method: "conversation.compact",
                                       params: ["conversation": .string(id), "focus": "[[hold:2 stopping]]"]))
        try harness.waitUntilUpstreamHolds("stopping")
        harness.daemon?.signal(SIGTERM)
        let answer = try client.response(to: .int(902))
        XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.shuttingDown, "\(answer)")
        XCTAssertEqual(answer["error"]?["message"]?.string, "confabd is shutting down: no summary was stored")
        XCTAssertFalse(client.notificationsBeforeLastResponse.contains { $0.method == "server.stopping" }, "answered before the goodbye")
        XCTAssertEqual(try client.collect(until: { method, _ in method == "server.stopping" }).last?.method, "server.stopping")
        XCTAssertEqual(harness.daemon?.wait(seconds: 10), 0)
        try harness.releaseUpstream("stopping")
        XCTAssertEqual(try logText(id), before)
        XCTAssertTrue(harness.log().contains("stopped: confabd is shutting down"), harness.log())
    }

    /// The summary request as an Anthropic provider receives it, whole: the system prompt and
    /// the turns as a reply there would be sent them, with the prompt cache's breakpoints (the
    /// system prompt, the newest turn and the one two before it), and the summary prompt with
    /// its focus as the last user turn; then the next reply's, the summary in place of its range.
    func testTheSummaryRequestAnAnthropicProviderReceivesWhole() throws {
        harness.tearDown()
        harness = try Harness(config: TestConfig.claudeProvider + "\nmax_tokens = 321\n")
        let client = try harness.client()
        let created = try client.call("conversation.create", ["title": "claude", "provider": "claude", "system": "Be brief."])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try send(client, id, "[[reply:one]] q1")
        _ = try send(client, id, "[[reply:two]] q2")
        let focus = "[[reply:They said one and two.]] the numbers"
        XCTAssertEqual(try compact(client, id, focus: focus)["compaction"]?["summary"]?.string, "They said one and two.")

        let marker: JSON = ["type": "ephemeral"]
        let summaryRequest = try XCTUnwrap(harness.upstreamRequests().last)
        XCTAssertEqual(summaryRequest["path"]?.string, "/anthropic/v1/messages")
        let expected: JSON = [
            "model": "fake-claude",
            "max_tokens": 321,
            "system": [["type": "text", "text": "Be brief.", "cache_control": marker]],
            "messages": [
                ["role": "user", "content": "[[reply:one]] q1"],
                ["role": "assistant", "content": "one"],
                ["role": "user", "content": [["type": "text", "text": "[[reply:two]] q2", "cache_control": marker]]],
                ["role": "assistant", "content": "two"],
                ["role": "user", "content": [["type": "text", "text": .string(compactionPrompt + "\n\nAbove all, keep what concerns: " + focus),
                                               "cache_control": marker]]],
            ],
            "stream": true,
        ]
        XCTAssertEqual(summaryRequest["body"], expected, summaryRequest["body"]?.text ?? "")

        _ = try send(client, id, "[[reply:three]] q3")
        let next: JSON = [
            "model": "fake-claude",
            "max_tokens": 321,
            "system": [["type": "text", "text": "Be brief.", "cache_control": marker]],
            "messages": [
                ["role": "user", "content": [["type": "text", "text": "Summary of the earlier conversation (m1…m4):\n\nThey said one and two.\n\n[[reply:three]] q3",
                                               "cache_control": marker]]],
            ],
            "stream": true,
        ]
        let nextBody = harness.upstreamRequests().last?["body"]
        XCTAssertEqual(nextBody, next, nextBody?.text ?? "")
    }

    func testAForkBeforeTheSummaryCopiesNoneAndOneAfterItKeepsIt() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        _ = try compact(client, id, focus: "[[reply:S1]]")
        _ = try send(client, id, "[[reply:three]] q3")

        // At m2, inside the range: no summary.
        let inside = try XCTUnwrap(try client.call("conversation.fork", ["conversation": .string(id), "at": "m2"])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(inside)])
        XCTAssertNil(try client.call("conversation.history", ["conversation": .string(inside)])["compaction"])
        _ = try send(client, inside, "[[reply:x]] qx")
        XCTAssertEqual(try lastRequest(), ["system: Be brief.", "user: [[reply:one]] q1", "assistant: one", "user: [[reply:x]] qx"])

        // At m6, after it: the summary comes along.
        let after = try XCTUnwrap(try client.call("conversation.fork", ["conversation": .string(id), "at": "m6"])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(after)])
        XCTAssertEqual(try client.call("conversation.history", ["conversation": .string(after)])["compaction"]?["last"]?.string, "m4")
        _ = try send(client, after, "[[reply:y]] qy")
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nS1\n\n[[reply:three]] q3", "assistant: three",
            "user: [[reply:y]] qy",
        ])
        XCTAssertEqual(try records(after, type: "compaction").count, 1)
        XCTAssertEqual(try records(inside, type: "compaction").count, 0)
    }

    func testAnEditInsideTheRangeEndsTheSummaryAndOneAfterItKeepsIt() throws {
        let client = try harness.client()
        let id = try twoTurns(client)
        _ = try compact(client, id, focus: "[[reply:S1]]")

        // After the range: the summary stays, for an edit and a regenerated reply alike.
        _ = try send(client, id, "[[reply:three]] q3")
        let edited = try client.call("message.edit", ["conversation": .string(id), "message": "m5", "content": "[[reply:THREE]] q3 again"])
        _ = try client.awaitReply(try XCTUnwrap(edited["reply"]?.string))
        XCTAssertEqual(try lastRequest(), ["system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nS1\n\n[[reply:THREE]] q3 again"])
        let regenerated = try client.call("message.regenerate", ["conversation": .string(id)])
        _ = try client.awaitReply(try XCTUnwrap(regenerated["reply"]?.string))
        XCTAssertEqual(try lastRequest(), ["system: Be brief.", "user: Summary of the earlier conversation (m1…m4):\n\nS1\n\n[[reply:THREE]] q3 again"])
        XCTAssertEqual(try records(id, type: "uncompaction").count, 0)

        // Inside it: the summary ends, by a record, and the whole history goes again.
        let second = try compact(client, id, focus: "[[reply:S2]]")
        XCTAssertEqual(second["compaction"]?["last"]?.string, "m9")
        let inside = try client.call("message.edit", ["conversation": .string(id), "message": "m7", "content": "[[reply:changed]] q3 changed"])
        let notes = try client.awaitReply(try XCTUnwrap(inside["reply"]?.string)).notes
        XCTAssertTrue(notes.contains { $0.method == "compaction.undone" && $0.params["compaction"]?["last"]?.string == "m9" })
        XCTAssertEqual(try lastRequest(), [
            "system: Be brief.", "user: [[reply:one]] q1", "assistant: one", "user: [[reply:two]] q2", "assistant: two",
            "user: [[reply:changed]] q3 changed",
        ])
        XCTAssertEqual(try records(id, type: "uncompaction").count, 1)
        XCTAssertNil(try client.call("conversation.history", ["conversation": .string(id)])["compaction"])
    }
}

/// Summaries made before a reply (`compact_at`), their fallback, and tool calls in a range.
final class AutomaticCompactionTests: XCTestCase {
    var harness: Harness!

    static let config = """
        [tools.echo]
        description = "Says back what it was asked"
        [tools.echo.request]
        method = "GET"
        url = "$UPSTREAM/tool/echo/x"

        [profiles.tools]
        system = "Be brief."
        tools = ["echo"]

        [profiles.auto]
        system = "Be brief."
        max_tokens = 100
        context_tokens = 400
        compact_at = 0.5
        compact_prompt = "Summarise it. [[reply:AUTO SUMMARY]]"

        [profiles.autofail]
        system = "Be brief."
        max_tokens = 100
        context_tokens = 400
        compact_at = 0.5
        compact_prompt = "Summarise it. [[status:400]]"

        """

    override func setUpWithError() throws { harness = try Harness(config: Self.config) }
    override func tearDown() { harness?.tearDown() }

    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string), timeout: 30)
    }

    private func messages(_ request: JSON?) throws -> [String] {
        try XCTUnwrap(request?["body"]?["messages"]?.array).map {
            "\($0["role"]?.string ?? ""): \(($0["content"]?.string ?? "").prefix(60))"
        }
    }

    /// About 54 estimated tokens; no usage, so the estimate is not recalibrated.
    private func question(_ label: String) -> String { "[[no-usage]][[reply:ok]] \(label) " + String(repeating: "x", count: 170) }

    private func conversation(_ client: RPCClient, profile: String) throws -> String {
        let id = try XCTUnwrap(try client.call("conversation.create", ["profile": .string(profile)])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    func testAReplyThatWouldPassCompactAtWaitsForASummary() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "auto")
        for label in ["q1", "q2", "q3"] {
            let final = try send(client, id, question(label)).final
            XCTAssertNil(final["context"]?["summarised"], "\(label) fits under compact_at")
        }
        XCTAssertEqual(harness.upstreamRequests().count, 3)
        let (notes, final) = try send(client, id, question("q4"))
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["context"]?["summarised"]?.string, "m1…m6")
        XCTAssertEqual(final["context"]?["dropped"]?.int, 0)
        XCTAssertNil(final["context"]?["compaction_failed"])
        // The summary first, with the profile's prompt, then the reply with it.
        let started = try XCTUnwrap(notes.first { $0.method == "compaction.started" })
        XCTAssertEqual(started.params["automatic"]?.bool, true)
        let order = notes.filter { $0.method == "compaction.completed" || ($0.method == "message.created" && $0.params["message"]?["role"]?.string == "assistant") }
            .map(\.method)
        XCTAssertEqual(order.first, "compaction.completed", "the reply waited for the summary: \(order)")
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 5)
        XCTAssertEqual(try messages(requests[3]), [
            "system: Be brief.", "user: " + String(question("q1").prefix(60)), "assistant: ok", "user: " + String(question("q2").prefix(60)),
            "assistant: ok", "user: " + String(question("q3").prefix(60)), "assistant: ok", "user: Summarise it. [[reply:AUTO SUMMARY]]",
        ])
        let sent = try XCTUnwrap(requests[4]["body"]?["messages"]?.array)
        XCTAssertEqual(sent.count, 2)
        XCTAssertEqual(sent[1]["content"]?.string, "Summary of the earlier conversation (m1…m6):\n\nAUTO SUMMARY\n\n" + question("q4"))
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.count, 8)
        XCTAssertEqual(history["compaction"]?["automatic"]?.bool, true)
    }

    func testWhenTheSummaryFailsTheReplyGoesOnTrimmedAndSaysSo() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "autofail")
        for label in ["q1", "q2", "q3"] { _ = try send(client, id, question(label)) }
        let log = try String(contentsOfFile: harness.dataDirectory + "/conversations/\(id).jsonl", encoding: .utf8)
        let (notes, final) = try send(client, id, question("q4"))
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertNil(final["context"]?["summarised"])
        XCTAssertEqual(final["context"]?["compaction_failed"]?.string?.contains("400"), true, "\(final)")
        XCTAssertEqual(notes.first { $0.method == "compaction.failed" }?.params["error"]?["status"]?.int, 400)
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 5)
        XCTAssertEqual(try messages(requests[4]).count, 8, "the whole history, as without a summary")
        let after = try String(contentsOfFile: harness.dataDirectory + "/conversations/\(id).jsonl", encoding: .utf8)
        XCTAssertTrue(after.hasPrefix(log))
        XCTAssertFalse(after.contains("\"type\":\"compaction\""))
    }

    func testToolCallsAndTheirResultsAreSummarisedTogether() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "tools")
        let first = try send(client, id, #"q1 [[tool:echo {"a":1}]]"#).final
        XCTAssertEqual(first["id"]?.string, "m2")
        _ = try client.collect(until: { method, params in method == "message.completed" && params["message"]?["id"]?.string == "m2.2" })
        let result = try client.call("conversation.compact", ["conversation": .string(id), "focus": "[[reply:S]]"], timeout: 20)
        XCTAssertEqual(result["compaction"]?["last"]?.string, "m2.2")
        let summaryRequest = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(summaryRequest.map { $0["role"]?.string ?? "" }, ["system", "user", "assistant", "tool", "assistant", "user"])
        XCTAssertEqual(summaryRequest[2]["tool_calls"]?.array?.count, 1)
        XCTAssertEqual(summaryRequest[3]["tool_call_id"], summaryRequest[2]["tool_calls"]?.array?.first?["id"])

        _ = try send(client, id, "[[reply:done]] q2")
        let sent = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(sent.map { $0["role"]?.string ?? "" }, ["system", "user"], "no call or result is sent without the other")
        XCTAssertEqual(sent[1]["content"]?.string, "Summary of the earlier conversation (m1…m2.2):\n\nS\n\n[[reply:done]] q2")
    }
}
