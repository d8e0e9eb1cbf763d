import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's tool loop against the real confabd, the fake model asking for tools
/// (`[[tool:NAME ARGS]]`) and the fake's `/tool/…` endpoints as the tools: what the tool
/// receives, what every attached client is told and in which order, what the model is sent
/// next, approvals, the limits, cancel, a crash, and the Anthropic shape.
final class ToolTests: XCTestCase {
    var harness: Harness!
    static let secret = "s3cret-tool-key-4242"

    static let config = """
        [limits]
        max_tool_rounds = 2
        tool_approval_timeout_seconds = 3

        [tools.echo]
        description = "Says back what it was asked"
        parameters = { type = "object", properties = { city = { type = "string" }, units = { type = "string", enum = ["metric", "imperial"] } }, required = ["city"] }
        [tools.echo.request]
        method = "GET"
        url = "$UPSTREAM/tool/echo/{city}"
        headers = { "X-Plain" = "visible" }
        header_env = { "X-Tool-Key" = "CONFAB_TEST_TOOL_KEY" }

        [tools.note]
        description = "Posts a note"
        parameters = { type = "object", properties = { note = { type = "string" }, n = { type = "integer" } }, required = ["note"] }
        [tools.note.request]
        method = "POST"
        url = "$UPSTREAM/tool/echo/notes"

        [tools.hang]
        description = "Never answers"
        [tools.hang.request]
        url = "$UPSTREAM/tool/hang"
        timeout_seconds = 1

        [tools.slow]
        description = "Answers after a long time"
        [tools.slow.request]
        url = "$UPSTREAM/tool/hang"
        timeout_seconds = 60

        [tools.big]
        description = "Answers ten megabytes"
        [tools.big.request]
        url = "$UPSTREAM/tool/big?bytes=10000000"
        max_response_bytes = 4096

        [tools.guarded]
        description = "Needs a yes"
        approval = "always"
        parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
        [tools.guarded.request]
        url = "$UPSTREAM/tool/echo/guarded"

        [profiles.helper]
        tools = ["echo", "note", "hang", "slow", "big", "guarded"]

        \(TestConfig.claudeProvider)

        [profiles.claude]
        provider = "claude"
        tools = ["echo"]
        """

    override func setUpWithError() throws {
        setenv("CONFAB_TEST_TOOL_KEY", Self.secret, 1)
        harness = try Harness(config: Self.config)
    }

    override func tearDown() { harness?.tearDown() }

    private func conversation(_ client: RPCClient, profile: String = "helper") throws -> String {
        let created = try client.call("conversation.create", ["title": "tools", "profile": .string(profile)])
        return try XCTUnwrap(created["conversation"]?["id"]?.string)
    }

    /// Sends and follows the reply's whole chain: every notification until a message of it
    /// ends without tool calls, or not complete.
    private func sendAndFollow(_ client: RPCClient, _ id: String, _ text: String, timeout: Double = 20) throws
        -> (reply: String, notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let notes = try follow(client, reply, timeout: timeout)
        return (reply, notes, notes.last!.params["message"]!)
    }

    private func follow(_ client: RPCClient, _ reply: String, timeout: Double = 20) throws -> [(method: String, params: JSON)] {
        let chain = MessageID.sequence(of: reply)
        return try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: timeout)
    }

    /// Each notification as "method id", the id being the message's (or the call's).
    private func outline(_ notes: [(method: String, params: JSON)]) -> [String] {
        notes.compactMap { note in
            guard note.method != "message.delta", !note.method.hasPrefix("client.") else { return nil }
            let id = note.params["message"]?["id"]?.string ?? note.params["message"]?.string ?? note.params["call"]?.string ?? ""
            return "\(note.method) \(id)"
        }
    }

    private func toolRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasPrefix("/tool/") == true }
    }

    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/completions") == true || $0["path"]?.string?.hasSuffix("/messages") == true }
    }

    func testOneCallReachesTheToolWithItsSecretAndTheAnswerUsesTheResult() throws {
        let asker = try harness.client(name: "asker")
        let watcher = try harness.client(name: "watcher")
        let id = try conversation(asker)
        try asker.call("conversation.attach", ["conversation": .string(id)])
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let (reply, notes, final) = try sendAndFollow(asker, id, #"weather? [[tool:echo {"city":"São Paulo","units":"metric"}]]"#)
        XCTAssertEqual(reply, "m2")
        XCTAssertEqual(outline(notes), [
            "message.created m1", "message.created m2", "message.completed m2", "tool.started m2.1", "tool.completed m2.1",
            "message.created m2.2", "message.completed m2.2",
        ])
        let asking = try XCTUnwrap(notes.first { $0.method == "message.completed" }?.params["message"])
        XCTAssertEqual(asking["finish_reason"]?.string, "tool_calls")
        let call = try XCTUnwrap(asking["tool_calls"]?.array?.first)
        XCTAssertEqual(call["name"]?.string, "echo")
        XCTAssertEqual(call["arguments"]?.string, #"{"city":"São Paulo","units":"metric"}"#)
        let started = try XCTUnwrap(notes.first { $0.method == "tool.started" }?.params)
        XCTAssertEqual(started["call"]?["id"], call["id"])
        XCTAssertEqual(started["message"]?["status"]?.string, "streaming")
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["role"]?.string, "tool")
        XCTAssertEqual(result["status"]?.string, "complete")
        XCTAssertEqual(result["tool_call_id"], call["id"])
        XCTAssertEqual(result["http_status"]?.int, 200)
        XCTAssertNotNil(result["duration_ms"]?.int)

        // The tool got the method, the URL with the placeholder filled and encoded, the other
        // argument in the query, and both headers.
        let request = try XCTUnwrap(toolRequests().last)
        XCTAssertEqual(request["method"]?.string, "GET")
        XCTAssertEqual(request["path"]?.string, "/tool/echo/S%C3%A3o%20Paulo?units=metric")
        XCTAssertEqual(request["headers"]?["x-tool-key"]?.string, Self.secret)
        XCTAssertEqual(request["headers"]?["x-plain"]?.string, "visible")
        // The tool echoed its headers back: the secret is redacted from what is stored and sent on.
        XCTAssertTrue(notes.first { $0.method == "tool.completed" }?.params["message"]?["content"]?.string?.contains("[secret]") == true)
        // The model got the result and answered with it.
        let content = try XCTUnwrap(final["content"]?.string)
        XCTAssertTrue(content.hasPrefix("tool results:"), content)
        XCTAssertTrue(content.contains("/tool/echo/S%C3%A3o%20Paulo"), content)
        XCTAssertEqual(final["status"]?.string, "complete")

        // Both requests to the model: the tools offered, then the tool turns in chat's shape.
        let asked = modelRequests()
        XCTAssertEqual(asked.count, 2)
        let offered = try XCTUnwrap(asked[0]["body"]?["tools"]?.array)
        XCTAssertEqual(offered.compactMap { $0["function"]?["name"]?.string }, ["echo", "note", "hang", "slow", "big", "guarded"])
        XCTAssertEqual(offered[0]["function"]?["parameters"]?["required"]?.array, ["city"])
        let turns = try XCTUnwrap(asked[1]["body"]?["messages"]?.array)
        XCTAssertEqual(turns.map { $0["role"]?.string }, ["user", "assistant", "tool"])
        XCTAssertEqual(turns[1]["tool_calls"]?.array?.first?["id"], call["id"])
        XCTAssertEqual(turns[2]["tool_call_id"], call["id"])
        XCTAssertEqual(turns[2]["content"], result["content"])

        // The watcher saw the same events in the same order.
        let seen = try follow(watcher, reply)
        XCTAssertEqual(outline(seen), outline(notes))
        // The secret is nowhere but in the tool's request.
        XCTAssertFalse(harness.log().contains(Self.secret), "the daemon's log holds the secret")
        for file in try FileManager.default.subpathsOfDirectory(atPath: harness.dataDirectory) {
            let text = (try? String(contentsOfFile: harness.dataDirectory + "/" + file, encoding: .utf8)) ?? ""
            XCTAssertFalse(text.contains(Self.secret), "\(file) holds the secret")
        }
        XCTAssertFalse("\(notes.map(\.params))".contains(Self.secret))
    }

    func testTwoCallsInOneReplyAsLlamaCppSendsThemRunAtOnceAndAnswerInCallOrder() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, notes, final) = try sendAndFollow(client, id,
            #"[[tool-style:llamacpp]] [[tool:echo {"city":"Oslo"}]] [[tool:note {"note":"hi there","n":2}]]"#)
        let outlined = outline(notes)
        XCTAssertEqual(outlined.filter { $0.hasPrefix("tool.started") }, ["tool.started m2.1", "tool.started m2.2"],
                       "both calls start before either ends: \(outlined)")
        XCTAssertLessThan(outlined.firstIndex(of: "tool.started m2.2")!, outlined.firstIndex { $0.hasPrefix("tool.completed") }!)
        XCTAssertEqual(final["id"]?.string, "m2.3")
        let posted = try XCTUnwrap(toolRequests().first { $0["method"]?.string == "POST" })
        XCTAssertEqual(posted["path"]?.string, "/tool/echo/notes")
        XCTAssertEqual(posted["body"], ["note": "hi there", "n": 2])
        XCTAssertEqual(posted["headers"]?["content-type"]?.string, "application/json")
        let turns = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(turns.map { $0["role"]?.string }, ["user", "assistant", "tool", "tool"])
        XCTAssertEqual(turns[1]["tool_calls"]?.array?.count, 2)
        XCTAssertEqual(turns[2]["tool_call_id"], turns[1]["tool_calls"]?.array?[0]["id"])
        XCTAssertEqual(turns[3]["tool_call_id"], turns[1]["tool_calls"]?.array?[1]["id"])
    }

    func testCallsAreMadeWhateverFinishReasonTheServerGivesWithThem() throws {
        // Some servers end a turn of tool calls with "stop"; the calls decide, not the reason.
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, notes, final) = try sendAndFollow(client, id, #"[[finish:stop]] [[tool-text:Checking.]] [[tool:echo {"city":"Turku"}]]"#)
        let asking = try XCTUnwrap(notes.first { $0.method == "message.completed" }?.params["message"])
        XCTAssertEqual(asking["finish_reason"]?.string, "stop")
        XCTAssertEqual(asking["content"]?.string, "Checking.", "text before the calls stays the turn's text")
        XCTAssertEqual(asking["tool_calls"]?.array?.count, 1)
        XCTAssertEqual(final["id"]?.string, "m2.2")
        XCTAssertEqual(toolRequests().first?["path"]?.string, "/tool/echo/Turku")
        let turns = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(turns[1]["content"]?.string, "Checking.")
    }

    func testBadArgumentsAndUnknownToolsGoBackToTheModelAsErrorsWithoutARequest() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, notes, final) = try sendAndFollow(client, id,
            #"[[tool:echo not json]] [[tool:echo {"units":"metric"}]] [[tool:echo {"city":"X","units":"kelvin"}]] [[tool:nosuch {}]]"#)
        // In the order of the calls (their ids, m2.1 to m2.4): calls of one turn run at once, and
        // nothing says in which order they end.
        let results = notes.filter { $0.method == "tool.completed" }.compactMap { $0.params["message"] }
            .sorted { MessageID.order(of: $0["id"]?.string ?? "")! < MessageID.order(of: $1["id"]?.string ?? "")! }
        XCTAssertEqual(results.map { $0["status"]?.string }, ["failed", "failed", "failed", "failed"])
        XCTAssertEqual(results.map { $0["error"]?["code"]?.string }, ["tool_arguments", "tool_arguments", "tool_arguments", "tool_unavailable"])
        XCTAssertTrue(results[1]["error"]?["message"]?.string?.contains("city") == true, "\(results[1])")
        XCTAssertTrue(results[2]["error"]?["message"]?.string?.contains("units") == true, "\(results[2])")
        XCTAssertTrue(results[3]["content"]?.string?.contains("echo") == true, "the model is told which tools there are")
        XCTAssertTrue(toolRequests().isEmpty, "no call was made")
        XCTAssertEqual(final["status"]?.string, "complete", "the model answered, told of each error")
        let turns = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(turns.filter { $0["role"]?.string == "tool" }.count, 4)
    }

    func testApprovalFromASecondClientAndADenialThatReachesTheModel() throws {
        let asker = try harness.client(name: "asker")
        let approver = try harness.client(name: "approver")
        let id = try conversation(asker)
        try asker.call("conversation.attach", ["conversation": .string(id)])
        try approver.call("conversation.attach", ["conversation": .string(id)])
        let sent = try asker.call("message.send", ["conversation": .string(id), "content": #"[[tool:guarded {"city":"Rome"}]]"#])
        let requested = try approver.collect(until: { method, _ in method == "tool.approval_requested" }).last!.params
        XCTAssertEqual(requested["tool"]?.string, "guarded")
        XCTAssertEqual(requested["arguments"]?.string, #"{"city":"Rome"}"#)
        XCTAssertEqual(requested["message"]?["approval"]?.string, "pending")
        let call = try XCTUnwrap(requested["call"]?.string)
        XCTAssertTrue(toolRequests().isEmpty, "nothing is called before the yes")
        // A third client attaching now sees the pending call.
        let late = try harness.client(name: "late")
        let attached = try late.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(attached["tools"]?.array?.first?["tool_call_id"]?.string, call)
        XCTAssertEqual(attached["tools"]?.array?.first?["approval"]?.string, "pending")
        XCTAssertEqual(attached["pending"], .null)

        let answer = try approver.call("tool.approve", ["conversation": .string(id), "call": .string(call), "allow": true])
        XCTAssertEqual(answer["allowed"]?.bool, true)
        do {
            try asker.call("tool.approve", ["conversation": .string(id), "call": .string(call), "allow": false])
            XCTFail("the second answer must be refused")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, -32006)
        }
        let notes = try follow(asker, try XCTUnwrap(sent["reply"]?.string))
        let approved = try XCTUnwrap(notes.first { $0.method == "tool.approved" }?.params)
        XCTAssertEqual(approved["client"]?["name"]?.string, "approver")
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["approval"]?.string, "approved")
        XCTAssertEqual(result["status"]?.string, "complete")
        XCTAssertEqual(toolRequests().count, 1)

        // Denied: the model is told, and no request is made.
        let second = try asker.call("message.send", ["conversation": .string(id), "content": #"[[tool:guarded {"city":"Nice"}]]"#])
        let secondCall = try XCTUnwrap(try approver.collect(until: { method, _ in method == "tool.approval_requested" }).last?.params["call"]?.string)
        try approver.call("tool.approve", ["conversation": .string(id), "call": .string(secondCall), "allow": false])
        let denied = try follow(asker, try XCTUnwrap(second["reply"]?.string))
        XCTAssertNotNil(denied.first { $0.method == "tool.denied" })
        let deniedResult = try XCTUnwrap(denied.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(deniedResult["error"]?["code"]?.string, "tool_denied")
        XCTAssertEqual(deniedResult["approval"]?.string, "denied")
        XCTAssertTrue(denied.last!.params["message"]?["content"]?.string?.contains("denied") == true)
        XCTAssertEqual(toolRequests().count, 1)

        // Nobody answers: denied when the wait runs out, by nobody.
        let third = try asker.call("message.send", ["conversation": .string(id), "content": #"[[tool:guarded {"city":"Bari"}]]"#])
        let unanswered = try follow(asker, try XCTUnwrap(third["reply"]?.string))
        let timedOut = try XCTUnwrap(unanswered.first { $0.method == "tool.denied" }?.params)
        XCTAssertEqual(timedOut["client"], .null)

        // Who decided is stored with each call's message: there after a restart, none for the
        // call nobody answered.
        XCTAssertEqual(result["decided_by"]?["name"]?.string, "approver")
        XCTAssertEqual(deniedResult["decided_by"]?["name"]?.string, "approver")
        try harness.restartDaemon()
        let reader = try harness.client(name: "reader")
        let stored = try reader.call("conversation.attach", ["conversation": .string(id), "history": 100])["messages"]?.array ?? []
        let tools = stored.filter { $0["role"]?.string == "tool" }
        XCTAssertEqual(tools.map { $0["approval"]?.string }, ["approved", "denied", "denied"])
        XCTAssertEqual(tools.map { $0["decided_by"]?["name"]?.string }, ["approver", "approver", nil])
    }

    func testAHangingToolTimesOutAndAHugeAnswerIsCut() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, notes, final) = try sendAndFollow(client, id, "[[tool:hang {}]] [[tool:big {}]]")
        let results = notes.filter { $0.method == "tool.completed" }.compactMap { $0.params["message"] }
        XCTAssertEqual(results.count, 2)
        let hung = try XCTUnwrap(results.first { $0["name"]?.string == "hang" })
        XCTAssertEqual(hung["status"]?.string, "failed")
        XCTAssertEqual(hung["error"]?["code"]?.string, "tool_timeout")
        let big = try XCTUnwrap(results.first { $0["name"]?.string == "big" })
        XCTAssertEqual(big["status"]?.string, "complete")
        XCTAssertEqual(big["truncated"]?.bool, true)
        let content = try XCTUnwrap(big["content"]?.string)
        XCTAssertLessThan(content.utf8.count, 4096 + 200)
        XCTAssertTrue(content.hasPrefix(String(repeating: "x", count: 4096)))
        XCTAssertTrue(content.contains("10000000"), "the cut says how long the answer was: \(content.suffix(120))")
        XCTAssertEqual(final["status"]?.string, "complete")
        let status = try client.call("status")
        XCTAssertEqual(status["streams"]?.int, 0)
    }

    func testCancelDuringACallAbortsItAndClosesTheReply() throws {
        let client = try harness.client()
        let watcher = try harness.client(name: "watcher")
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[tool:slow {}]]"])
        _ = try client.collect(until: { method, _ in method == "tool.started" })
        XCTAssertEqual(try client.call("status")["streams"]?.int, 1, "a reply running tools holds its stream")
        let cancelled = try client.call("generation.cancel", ["conversation": .string(id), "message": try XCTUnwrap(sent["reply"])])
        XCTAssertEqual(cancelled["cancelled"]?.string, "m2")
        let notes = try follow(watcher, "m2")
        let outlined = outline(notes)
        XCTAssertEqual(Array(outlined.suffix(3)), ["generation.cancelled m2", "tool.completed m2.1", "message.completed m2.2"], "\(outlined)")
        XCTAssertEqual(notes.last?.params["message"]?["status"]?.string, "cancelled")
        XCTAssertEqual(notes.first { $0.method == "tool.completed" }?.params["message"]?["status"]?.string, "cancelled")
        XCTAssertEqual(try client.call("status")["streams"]?.int, 0)
        // The next reply's context has the cancelled call with its result, in a shape the model takes.
        let (_, _, next) = try sendAndFollow(client, id, "and now?")
        XCTAssertEqual(next["status"]?.string, "complete")
        let turns = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(turns.map { $0["role"]?.string }, ["user", "assistant", "tool", "assistant", "user"])
    }

    func testKillDuringACallLeavesAConversationTheNextReplyCanUse() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try client.call("message.send", ["conversation": .string(id), "content": "[[tool:slow {}]]"])
        _ = try client.collect(until: { method, _ in method == "tool.started" })
        client.close()
        harness.killDaemon()
        try harness.startDaemon()
        let again = try harness.client()
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])
        let messages = try XCTUnwrap(attached["messages"]?.array)
        XCTAssertEqual(messages.map { $0["id"]?.string }, ["m1", "m2", "m2.1"])
        XCTAssertEqual(messages[2]["status"]?.string, "interrupted")
        XCTAssertEqual(messages[2]["content"]?.string, "The call was interrupted: the daemon stopped before it ended.")
        XCTAssertEqual(attached["tools"]?.array, [])
        let (reply, _, final) = try sendAndFollow(again, id, "still there?")
        XCTAssertEqual(reply, "m4")
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        let turns = try XCTUnwrap(modelRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(turns.map { $0["role"]?.string }, ["user", "assistant", "tool", "user"])
        XCTAssertEqual(turns[2]["content"], messages[2]["content"], "the model is told the call was interrupted")
    }

    func testARoundLimitEndsAReplyThatKeepsAskingAndTheNextReplyStillWorks() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, notes, final) = try sendAndFollow(client, id, #"[[tool-loop]] [[tool:echo {"city":"Loop"}]]"#)
        XCTAssertEqual(outline(notes).filter { $0.hasPrefix("tool.completed") }.count, 2, "max_tool_rounds = 2")
        XCTAssertEqual(final["id"]?.string, "m2.4")
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "tool_rounds")
        XCTAssertEqual(final["tool_calls"]?.array?.count, 1)
        XCTAssertEqual(toolRequests().count, 2)
        let (_, _, next) = try sendAndFollow(client, id, "ok, stop")
        XCTAssertEqual(next["status"]?.string, "complete", "\(next)")
    }

    func testAnthropicGetsToolUseAndToolResultBlocks() throws {
        let client = try harness.client()
        let id = try conversation(client, profile: "claude")
        try client.call("conversation.attach", ["conversation": .string(id)])
        let (_, _, final) = try sendAndFollow(client, id, #"[[tool:echo {"city":"Lyon"}]]"#)
        XCTAssertEqual(final["status"]?.string, "complete", "\(final)")
        let requests = modelRequests()
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests[0]["body"]?["tools"]?.array?.first?["name"]?.string, "echo")
        XCTAssertNotNil(requests[0]["body"]?["tools"]?.array?.first?["input_schema"]?.object)
        let turns = try XCTUnwrap(requests[1]["body"]?["messages"]?.array)
        XCTAssertEqual(turns.map { $0["role"]?.string }, ["user", "assistant", "user"])
        let use = try XCTUnwrap(turns[1]["content"]?.array?.first { $0["type"]?.string == "tool_use" })
        XCTAssertEqual(use["input"]?["city"]?.string, "Lyon")
        let result = try XCTUnwrap(turns[2]["content"]?.array?.first)
        XCTAssertEqual(result["type"]?.string, "tool_result")
        XCTAssertEqual(result["tool_use_id"], use["id"])
    }

    func testAChainSurvivesARestartAndIsRegeneratedWhole() throws {
        let client = try harness.client()
        let id = try conversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try sendAndFollow(client, id, #"[[tool:echo {"city":"Bern"}]]"#)
        let before = try client.call("conversation.history", ["conversation": .string(id)])["messages"]
        XCTAssertEqual(before?.array?.map { $0["id"]?.string }, ["m1", "m2", "m2.1", "m2.2"])
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let again = try harness.client()
        try again.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(try again.call("conversation.history", ["conversation": .string(id)])["messages"], before)
        let paged = try again.call("conversation.history", ["conversation": .string(id), "before": "m2.2", "limit": 2])
        XCTAssertEqual(paged["messages"]?.array?.map { $0["id"]?.string }, ["m2", "m2.1"])

        let regenerated = try again.call("message.regenerate", ["conversation": .string(id)])
        XCTAssertEqual(regenerated["replaces"]?.string, "m2")
        let notes = try follow(again, try XCTUnwrap(regenerated["reply"]?.string))
        let superseded = notes.filter { $0.method == "message.superseded" }.compactMap { $0.params["message"]?.string }
        XCTAssertEqual(superseded, ["m2", "m2.1", "m2.2"])
        let history = try XCTUnwrap(try again.call("conversation.history", ["conversation": .string(id)])["messages"]?.array)
        XCTAssertEqual(history.prefix(4).map { $0["superseded_by"]?.string }, [nil, "m3", "m3", "m3"])
        let forked = try again.call("conversation.fork", ["conversation": .string(id), "at": "m2.1"])
        let fork = try XCTUnwrap(forked["conversation"]?["id"]?.string)
        let copied = try again.call("conversation.history", ["conversation": .string(fork)])["messages"]?.array
        XCTAssertEqual(copied?.map { $0["id"]?.string }, ["m1", "m2", "m2.1"])
    }

    func testApproveIsCheckedLikeEveryMethod() throws {
        let client = try harness.client()
        let id = try conversation(client)
        for (params, code) in [
            (["conversation": JSON.string(id), "call": "x"] as JSON, -32602),
            (["conversation": .string(id), "call": "", "allow": true], -32602),
            (["conversation": .string(id), "call": "nope", "allow": true], -32006),
            (["conversation": "zzzzzzzzzzzz", "call": "nope", "allow": true], -32001),
        ] {
            do {
                try client.call("tool.approve", params)
                XCTFail("\(params) must be refused")
            } catch let error as RPCError {
                XCTAssertEqual(error.code, code, "\(params): \(error.message)")
            }
        }
    }
}
