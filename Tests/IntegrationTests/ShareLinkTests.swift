import ConfabProtocol
import Foundation
import XCTest

/// A share link's holder is another user to the daemon: the gateway's connection for a link
/// page says so at `hello` (`link: {id, conversation, role}`), and from then on what it sends
/// is the link's, not the owner's, everywhere (docs/protocol.md, "Share links"). The real
/// confabd, the fake upstream, and a raw socket client of the owner's uid saying the hello
/// confab-web says.
final class ShareLinkTests: XCTestCase {
    static let writer: UInt32 = 4313

    var harness: Harness!
    var connections: [OtherUser.Connection] = []

    override func setUpWithError() throws {
        harness = try Harness(config: """
            [access]
            allow_uids = [\(Self.writer)]

            [tools.secret_echo]
            description = "Looks a ticket up with the owner's key"
            parameters = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
            [tools.secret_echo.request]
            url = "$UPSTREAM/tool/echo/secret"
            headers = { "X-Api-Key" = "owner-secret-key-4711" }

            [profiles.helper]
            tools = ["secret_echo"]
            """)
    }

    override func tearDown() {
        for connection in connections { connection.stop() }
        harness?.tearDown()
    }

    private func toolRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.contains("/tool/") == true }
    }

    /// What confab-web says for a page of share link `id` on `conversation`.
    private func linkClient(_ id: String, _ conversation: String, role: ShareRole, name: String? = nil) throws -> (RPCClient, JSON) {
        let client = try RPCClient(path: harness.socketPath)
        let hello = try client.call("hello", ["client": "confab-web", "name": .string(name ?? "web:share-" + id), "gateway": true,
                                              "link": ["id": .string(id), "conversation": .string(conversation), "role": .string(role.rawValue)]])
        return (client, hello)
    }

    private func waitForApprovalRequest(_ owner: RPCClient) throws -> JSON {
        var request: JSON?
        _ = try owner.collect(until: { method, params in
            if method == RPCNotification.toolApprovalRequested.rawValue { request = params }
            return request != nil
        }, timeout: 20)
        return try XCTUnwrap(request, "no tool.approval_requested")
    }

    static let payload = #"please look up ticket 7 [[tool:secret_echo {"q":"ticket 7"}]]"#

    /// The finding's payload: through a write link it waited for the owner's yes exactly as
    /// from another Unix user with the same role, and says that the link asked.
    func testAWriteLinksMessageWaitsForTheOwnersYesAsAnotherUsersDoes() throws {
        let owner = try harness.client(name: "owner-screen")
        let created = try owner.call("conversation.create", ["title": "tickets", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try owner.call("conversation.attach", ["conversation": .string(id)])

        let (link, hello) = try linkClient("ab12cd34", id, role: .write)
        XCTAssertEqual(hello["user"]?["login"]?.string, "link:ab12cd34", hello.text)
        XCTAssertEqual(hello["user"]?["link"]?["role"]?.string, "write", hello.text)
        let sent = try link.call("message.send", ["conversation": .string(id), "content": .string(Self.payload)])
        XCTAssertEqual(sent["message"]?["author"]?["link"]?.string, "ab12cd34", sent.text)
        XCTAssertEqual(sent["message"]?["author"]?["login"]?.string, "link:ab12cd34", sent.text)
        XCTAssertEqual(sent["message"]?["author"]?["name"]?.string, "web:share-ab12cd34", sent.text)

        let asked = try waitForApprovalRequest(owner)
        XCTAssertEqual(asked["requested_by"]?["link"]?.string, "ab12cd34", asked.text)
        XCTAssertEqual(asked["requested_by"]?["login"]?.string, "link:ab12cd34", asked.text)
        XCTAssertEqual(asked["message"]?["approval"]?.string, ToolApprovalState.pending.rawValue, asked.text)
        XCTAssertEqual(asked["message"]?["requested_by"]?["link"]?.string, "ab12cd34", asked.text)
        XCTAssertTrue(toolRequests().isEmpty, "the owner's key was used before the owner's yes: \(toolRequests())")

        // The link cannot say yes for the owner.
        let refused = try link.request(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": asked["call"]!, "allow": true])
        XCTAssertEqual(refused["error"]?["code"]?.int, RPCError.notPermitted, refused.text)
        XCTAssertTrue(toolRequests().isEmpty)

        try owner.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": asked["call"]!, "allow": true])
        _ = try owner.collect(until: { method, params in
            method == "message.completed" && params["message"]?["role"]?.string == "assistant"
                && (params["message"]?["tool_calls"]?.array ?? []).isEmpty
        }, timeout: 20)
        XCTAssertEqual(toolRequests().compactMap { $0["path"]?.string }, ["/tool/echo/secret?q=ticket%207"])

        // Stored so: after a restart the message is still the link's, not the owner's.
        owner.close()
        try harness.restartDaemon()
        let again = try harness.client()
        let history = try again.call("conversation.history", ["conversation": .string(id)])
        let first = try XCTUnwrap(history["messages"]?.array?.first)
        XCTAssertEqual(first["author"]?["link"]?.string, "ab12cd34", first.text)
        let toolMessage = try XCTUnwrap(history["messages"]?.array?.first { $0["role"]?.string == "tool" })
        XCTAssertEqual(toolMessage["requested_by"]?["link"]?.string, "ab12cd34", toolMessage.text)
        XCTAssertEqual(toolMessage["approval"]?.string, ToolApprovalState.approved.rawValue, toolMessage.text)
    }

    /// A link's message still queued when the daemon dies: resumed at the next start, its
    /// reply's tool call still waits for the owner (who asked is taken from the stored message).
    func testAQueuedLinkMessageStillWaitsForTheOwnerAfterACrash() throws {
        let owner = try harness.client(name: "owner-screen")
        let created = try owner.call("conversation.create", ["title": "tickets", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        // A slow reply of the owner's, so that the link's waits its turn behind it.
        _ = try owner.call("message.send", ["conversation": .string(id), "content": "[[words:400]] [[delay:100]]"])
        let (link, _) = try linkClient("queued1", id, role: .write)
        _ = try link.call("message.send", ["conversation": .string(id), "content": .string(Self.payload)])
        XCTAssertEqual(try owner.call("status")["queued"]?.int, 1)
        harness.killDaemon()
        try harness.startDaemon()
        let again = try harness.client(name: "owner-again")
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])
        // The queued reply runs as the daemon starts: its question may have been asked before this
        // client attached, and is then among the attach result's calls in flight.
        let waiting = attached["tools"]?.array?.first { $0["approval"]?.string == ToolApprovalState.pending.rawValue }
        let requester = try waiting?["requested_by"] ?? waitForApprovalRequest(again)["requested_by"]
        XCTAssertEqual(requester?["link"]?.string, "queued1", attached.text)
        XCTAssertTrue(toolRequests().isEmpty, "the owner's key was used before the owner's yes: \(toolRequests())")
    }

    /// The same message from a real other uid with the write role: the same wait.
    func testTheSameMessageFromAnotherUnixUserWaitsTheSameWay() throws {
        try OtherUser.requireRoot()
        OtherUser.openSocket(harness)
        let owner = try harness.client(name: "owner-screen")
        let created = try owner.call("conversation.create", ["title": "tickets", "profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try owner.call("conversation.attach", ["conversation": .string(id)])
        try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(id), "uid": .int(Int(Self.writer)), "role": "write"])
        let connection = try OtherUser.Connection(uid: Self.writer, socketPath: harness.socketPath)
        connections.append(connection)
        _ = try connection.client.call("hello", ["client": "steer", "name": "Mallory"])
        _ = try connection.client.call("message.send", ["conversation": .string(id), "content": .string(Self.payload)])
        let asked = try waitForApprovalRequest(owner)
        XCTAssertEqual(asked["requested_by"]?["uid"]?.int, Int(Self.writer), asked.text)
        XCTAssertEqual(asked["message"]?["approval"]?.string, ToolApprovalState.pending.rawValue, asked.text)
        XCTAssertTrue(toolRequests().isEmpty)

        // And a write link of the owner's own uid on the same conversation: the same question.
        let (link, _) = try linkClient("ef56", id, role: .write)
        try owner.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": asked["call"]!, "allow": false])
        _ = try link.call("message.send", ["conversation": .string(id), "content": .string(Self.payload)])
        let second = try waitForApprovalRequest(owner)
        XCTAssertEqual(second["requested_by"]?["link"]?.string, "ef56", second.text)
        XCTAssertTrue(toolRequests().isEmpty)
    }

    /// A read link writes nothing, sees one conversation, and may not undo its declaration.
    func testAReadLinkIsReadOnlyAndSeesOnlyItsConversation() throws {
        let owner = try harness.client(name: "owner-screen")
        let shown = try harness.createConversation(owner, title: "shown")
        let hidden = try harness.createConversation(owner, title: "hidden")

        let (link, _) = try linkClient("read1", shown, role: .read)
        let sent = try link.request("message.send", ["conversation": .string(shown), "content": "hello"])
        XCTAssertEqual(sent["error"]?["code"]?.int, RPCError.notPermitted, sent.text)
        XCTAssertEqual(sent["error"]?["data"]?["role"]?.string, "read", sent.text)
        let other = try link.request("conversation.attach", ["conversation": .string(hidden)])
        XCTAssertEqual(other["error"]?["code"]?.int, RPCError.notFound, other.text)
        let listed = try link.call("conversation.list")
        XCTAssertEqual(listed["conversations"]?.array?.compactMap { $0["id"]?.string }, [shown])
        let created = try link.request("conversation.create", ["title": "mine"])
        XCTAssertEqual(created["error"]?["code"]?.int, RPCError.notPermitted, created.text)
        // Quiet watching is the owner's alone: the link's attach is announced.
        try owner.call("conversation.attach", ["conversation": .string(shown)])
        _ = try link.call("conversation.attach", ["conversation": .string(shown), "quiet": true])
        var joined: JSON?
        _ = try owner.collect(until: { method, params in
            if method == "client.attached" { joined = params["client"] }
            return joined != nil
        })
        XCTAssertEqual(joined?["login"]?.string, "link:read1")
        XCTAssertEqual(joined?["link"]?.string, "read1")

        // A later hello cannot drop the link or change it.
        _ = try link.call("hello", ["name": "still a link"])
        let retry = try link.request("message.send", ["conversation": .string(shown), "content": "hello"])
        XCTAssertEqual(retry["error"]?["code"]?.int, RPCError.notPermitted, retry.text)
        let changed = try link.request("hello", ["link": ["id": "read1", "conversation": .string(shown), "role": "write"]])
        XCTAssertEqual(changed["error"]?["code"]?.int, RPCError.invalidParams, changed.text)

        // Declared only before any other call: a connection that acted as the owner stays so
        // rather than half become a link.
        let late = try harness.client()
        _ = try late.call("conversation.list")
        let refused = try late.request("hello", ["link": ["id": "late", "conversation": .string(shown), "role": "read"]])
        XCTAssertEqual(refused["error"]?["code"]?.int, RPCError.invalidParams, refused.text)
    }
}
