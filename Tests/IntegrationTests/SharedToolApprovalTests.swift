import ConfabProtocol
import Foundation
import XCTest

/// A tool call runs with the owner's secrets: in a reply another user's message started, every
/// call waits for the owner's yes, whatever the tool's `approval`, and the request says who
/// asked. Real other uids through `OtherUser` (root only).
final class SharedToolApprovalTests: XCTestCase {
    static let writer: UInt32 = 4312

    var harness: Harness!
    var connections: [OtherUser.Connection] = []

    override func setUpWithError() throws {
        try OtherUser.requireRoot()
        harness = try Harness(config: """
            [access]
            allow_uids = [\(Self.writer)]

            [tools.lookup]
            description = "Looks something up with the owner's key"
            parameters = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
            [tools.lookup.request]
            url = "$UPSTREAM/tool/echo/lookup"
            headers = { "X-Team" = "research" }

            [profiles.helper]
            tools = ["lookup"]
            """)
        OtherUser.openSocket(harness)
    }

    override func tearDown() {
        for connection in connections { connection.stop() }
        harness?.tearDown()
    }

    private func toolRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.contains("/tool/") == true }
    }

    /// Everything until reply `reply`'s chain ends (a turn that asks for no more tools).
    private func follow(_ client: RPCClient, _ reply: String) throws {
        let chain = MessageID.sequence(of: reply)
        _ = try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 30)
    }

    func testACallInAReplyAnotherUserStartedWaitsForTheOwnerAndNamesWhoAsked() throws {
        let owner = try harness.client(name: "owner-screen")
        let created = try owner.call("conversation.create", ["title": "shared tools", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try owner.call("conversation.attach", ["conversation": .string(id)])

        // The owner's own message: the tool (approval "never") runs at once.
        let own = try owner.call("message.send", ["conversation": .string(id), "content": #"[[tool:lookup {"q":"mine"}]]"#])
        try follow(owner, try XCTUnwrap(own["reply"]?.string))
        XCTAssertEqual(toolRequests().count, 1, "the owner's own call needs no approval")

        try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(id), "uid": .int(Int(Self.writer)),
                                                            "role": .string(ShareRole.write.rawValue)])
        let connection = try OtherUser.Connection(uid: Self.writer, socketPath: harness.socketPath)
        connections.append(connection)
        let writer = connection.client
        _ = try writer.call("hello", ["client": "steer", "name": "Mallory"])
        let sent = try writer.call("message.send", ["conversation": .string(id), "content": #"[[tool:lookup {"q":"theirs"}]]"#])
        let reply = try XCTUnwrap(sent["reply"]?.string)

        var request: JSON?
        _ = try owner.collect(until: { method, params in
            if method == RPCNotification.toolApprovalRequested.rawValue { request = params }
            return request != nil
        }, timeout: 20)
        let asked = try XCTUnwrap(request, "no tool.approval_requested for a call another user's message started")
        XCTAssertEqual(asked["requested_by"]?["uid"]?.int, Int(Self.writer), asked.text)
        XCTAssertEqual(asked["requested_by"]?["name"]?.string, "Mallory", asked.text)
        XCTAssertEqual(asked["message"]?["requested_by"]?["uid"]?.int, Int(Self.writer), asked.text)
        XCTAssertEqual(asked["message"]?["approval"]?.string, ToolApprovalState.pending.rawValue, asked.text)
        XCTAssertEqual(toolRequests().count, 1, "nothing ran before the owner's yes")

        // The writer cannot say yes for the owner.
        let refused = try writer.request(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": asked["call"]!, "allow": true])
        XCTAssertEqual(refused["error"]?["code"]?.int, RPCError.notPermitted, refused.text)
        XCTAssertEqual(toolRequests().count, 1)

        let allowed = try owner.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": asked["call"]!, "allow": true])
        XCTAssertEqual(allowed["allowed"]?.bool, true)
        try follow(owner, reply)
        let paths = toolRequests().compactMap { $0["path"]?.string }
        XCTAssertEqual(paths, ["/tool/echo/lookup?q=mine", "/tool/echo/lookup?q=theirs"])
    }
}

/// The owner's screen names who asked for a call it is to approve.
final class SharedToolApprovalScreenTests: TmuxTestCase {
    override func setUpWithError() throws {
        try OtherUser.requireRoot()
        try super.setUpWithError()
        try harness.writeConfig("""
            [access]
            allow_uids = [\(SharedToolApprovalTests.writer)]

            [tools.lookup]
            description = "Looks something up with the owner's key"
            parameters = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
            [tools.lookup.request]
            url = "$UPSTREAM/tool/echo/lookup"

            [profiles.helper]
            tools = ["lookup"]
            """)
        try harness.restartDaemon()
        OtherUser.openSocket(harness)
    }

    func testTheApprovalLineNamesTheUserWhoAsked() throws {
        let owner = try harness.client()
        let created = try owner.call("conversation.create", ["title": "shared tools", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(id), "uid": .int(Int(SharedToolApprovalTests.writer)),
                                                            "role": .string(ShareRole.write.rawValue)])
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 160, height: 40)
        try tmux.waitForText(pane, "here: ana (you)", timeout: 10)

        let connection = try OtherUser.Connection(uid: SharedToolApprovalTests.writer, socketPath: harness.socketPath)
        defer { connection.stop() }
        _ = try connection.client.call("hello", ["client": "steer", "name": "Mallory"])
        _ = try connection.client.call("message.send", ["conversation": .string(id), "content": #"[[tool:lookup {"q":"theirs"}]]"#])

        try tmux.waitForText(pane, #"⚙ lookup {"q":"theirs"} needs your approval: asked by Mallory (\#(SharedToolApprovalTests.writer)); y/n, or /approve "#,
                             timeout: 15)
        try tmux.type(pane, "y")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "tool results: [lookup]", timeout: 15)
    }
}
