import ConfabProtocol
import WebGateway
import XCTest

/// The daemon's notifications as page events: the same state whatever order of attach and
/// events a page saw, and everybody's text as text.
final class ConversationViewTests: XCTestCase {
    let created = Timestamp(milliseconds: 1_700_000_000_000)

    func reply(_ id: String, _ content: String, status: MessageStatus, calls: [ToolCall]? = nil) -> Message {
        Message(id: id, conversation: "k3v9q2m8x7ad", role: .assistant, content: content, status: status,
                created: created, toolCalls: calls)
    }

    func testUserMessageShowsItsFilesAsTheTerminalDoes() {
        var view = ConversationView(role: "read")
        let files = [
            Attachment(name: "notes.txt", type: .text, size: 512, sha256: String(repeating: "a", count: 64)),
            Attachment(name: "<img src=x onerror=alert(1)>\u{202E}gnp.\u{1B}[31m.png", type: .png, size: 217_088,
                       sha256: String(repeating: "b", count: 64)),
        ]
        let sent = Message(id: "m1", conversation: "k3v9q2m8x7ad", role: .user, content: "look", status: .complete,
                           created: created, attachments: files)
        let events = view.apply(.messageCreated(sent))
        let lines = events.first?["message"]?["attachments"]?.array?.compactMap(\.string)
        XCTAssertEqual(lines, [
            "[attached: notes.txt, 512 B, text/plain]",
            // Text for textContent: the markup stays as typed, the controls are made visible.
            "[attached: <img src=x onerror=alert(1)><U+202E>gnp.^[[31m.png, 212 KiB, image/png]",
        ])
        // The same after a reload, from the attach's history.
        let state = view.load(AttachResult(json: ["messages": [sent.json], "clients": []]))
        XCTAssertEqual(state["messages"]?.array?.first?["attachments"]?.array?.compactMap(\.string), lines)
        // A message without files has no such field.
        let plain = Message(id: "m3", conversation: "k3v9q2m8x7ad", role: .user, content: "hi", status: .complete, created: created)
        XCTAssertNil(view.apply(.messageCreated(plain)).first?["message"]?["attachments"])
    }

    func testDeltasGrowTheRenderedReply() {
        var view = ConversationView(role: "owner")
        _ = view.load(AttachResult(json: ["messages": [], "clients": []]))
        XCTAssertEqual(view.apply(.messageCreated(reply("m2", "", status: .streaming))).count, 1)
        _ = view.apply(.messageDelta(message: "m2", content: "**bo"))
        let events = view.apply(.messageDelta(message: "m2", content: "ld** <b>x</b>"))
        XCTAssertEqual(events.first?["message"]?["html"]?.string, "<p><strong>bold</strong> &lt;b&gt;x&lt;/b&gt;</p>\n")
        XCTAssertEqual(events.first?["message"]?["status"]?.string, "streaming")
        XCTAssertTrue(view.apply(.messageDelta(message: "m9", content: "unknown")).isEmpty)
    }

    func testApprovalSaysWhoAnsweredOnTheToolCard() {
        var view = ConversationView(role: "owner")
        let call = ToolCall(id: "call_1", name: "guarded", arguments: "{\"city\":\"<Paris>\"}")
        _ = view.apply(.messageCompleted(reply("m2", "", status: .complete, calls: [call])))
        let tool = Message(id: "m2.1", conversation: "k3v9q2m8x7ad", role: .tool, content: "", status: .streaming, created: created,
                           tool: ToolResult(callID: "call_1", name: "guarded", approval: .pending))
        _ = view.apply(.toolApprovalRequested(message: tool, call: call))
        let approver = ClientInfo(id: "c3", uid: 1000, login: "ana", name: "web:phone", client: "confab-web")
        let events = view.apply(.toolApproved(call: "call_1", by: approver))
        let card = events.first?["message"]?["tool"]
        XCTAssertEqual(card?["answered"]?.string, "approved by web:phone (ana)", "a chosen name shows with its login")
        XCTAssertEqual(card?["approval"]?.string, "approved")
        XCTAssertEqual(card?["arguments"]?.string, "{\"city\":\"<Paris>\"}", "arguments go as text, for textContent")
        let timedOut = view.apply(.toolDenied(call: "call_1", by: nil))
        XCTAssertEqual(timedOut.first?["message"]?["tool"]?["answered"]?.string, "denied: nobody answered in time")
    }

    func testToolCardsAreNamedByTheirStateAndKeepWhoDecidedAfterAReload() {
        func tool(_ status: MessageStatus, _ approval: ToolApprovalState?, error: ReplyErrorCode? = nil, decidedBy: Author? = nil) -> Message {
            Message(id: "m2.1", conversation: "k3v9q2m8x7ad", role: .tool, content: "", status: status, created: created,
                    error: error.map { MessageError(code: $0, message: "the user denied this call, so it was not made") },
                    tool: ToolResult(callID: "call_1", name: "guarded", approval: approval, decidedBy: decidedBy))
        }
        XCTAssertEqual(ConversationView.toolState(tool(.streaming, .pending)), "waiting for approval")
        XCTAssertEqual(ConversationView.toolState(tool(.streaming, .approved)), "running")
        XCTAssertEqual(ConversationView.toolState(tool(.streaming, nil)), "running")
        XCTAssertEqual(ConversationView.toolState(tool(.complete, .approved)), "done")
        XCTAssertEqual(ConversationView.toolState(tool(.failed, nil, error: .toolTimeout)), "failed")
        XCTAssertEqual(ConversationView.toolState(tool(.failed, .denied, error: .toolDenied)), "denied")
        // A fresh view (a reload) knows who decided from the stored message alone.
        let ana = Author(uid: 1000, login: "ana", name: "web:phone", clientID: "c3")
        var view = ConversationView(role: "owner")
        let state = view.load(AttachResult(json: [
            "messages": [tool(.complete, .approved, decidedBy: ana).json], "clients": [],
        ]))
        let card = state["messages"]?.array?.first?["tool"]
        XCTAssertEqual(card?["answered"]?.string, "approved by web:phone (ana)")
        XCTAssertEqual(card?["state"]?.string, "done")
        let denied = view.load(AttachResult(json: [
            "messages": [tool(.failed, .denied, error: .toolDenied, decidedBy: ana).json], "clients": [],
        ]))
        XCTAssertEqual(denied["messages"]?.array?.first?["tool"]?["answered"]?.string, "denied by web:phone (ana)")
        XCTAssertEqual(denied["messages"]?.array?.first?["tool"]?["state"]?.string, "denied")
    }

    func testErrorsAreInWordsAndRepliesCarryTheirTimeAndModel() {
        var view = ConversationView(role: "owner")
        var failed = reply("m2", "", status: .failed)
        failed.model = "mock-gpt"
        failed.error = MessageError(code: .upstreamHTTP, message: "HTTP 500: overloaded", status: 500)
        let shown = view.apply(.messageCreated(failed)).first?["message"]
        XCTAssertEqual(shown?["error"]?.string, "The model server answered with an error (HTTP 500). HTTP 500: overloaded")
        XCTAssertFalse(shown?["error"]?.string?.contains("upstream_http") ?? true)
        XCTAssertEqual(shown?["model"]?.string, "mock-gpt")
        XCTAssertEqual(shown?["created"]?.string, created.description)
        for code in ReplyErrorCode.allCases {
            XCTAssertFalse(ConversationView.errorWords(MessageError(code: code, message: "m")).contains(code.rawValue), code.rawValue)
        }
    }

    func testStateOrdersMessagesAndCarriesTheRole() {
        var view = ConversationView(role: "read")
        let state = view.load(AttachResult(json: [
            "messages": [reply("m10", "b", status: .complete).json, reply("m2", "a", status: .complete).json],
            "pending": reply("m11", "c", status: .streaming).json,
            "clients": [],
        ]))
        XCTAssertEqual(state["messages"]?.array?.compactMap { $0["id"]?.string }, ["m2", "m10", "m11"])
        XCTAssertEqual(state["role"]?.string, "read")
    }

    func testListActivityFollowsRepliesAndPresence() {
        var activity = ListActivity(AttachResult(json: ["clients": [], "messages": []]))
        XCTAssertTrue(activity.apply(.messageCreated(reply("m2", "", status: .streaming))))
        XCTAssertEqual(activity.streaming, ["m2"])
        XCTAssertFalse(activity.apply(.messageDelta(message: "m2", content: "x")))
        XCTAssertTrue(activity.apply(.messageCompleted(reply("m2", "x", status: .complete))))
        XCTAssertTrue(activity.streaming.isEmpty)
        let client = ClientInfo(id: "c1", uid: 1000, login: "ana", name: "terminal", client: "confab-attach")
        XCTAssertTrue(activity.apply(.clientAttached(client)))
        XCTAssertEqual(activity.clients.map(\.name), ["terminal"])
        XCTAssertTrue(activity.apply(.clientDetached(client)))
    }

    /// The list page is told of a call waiting for the owner's yes and of a reply chain's
    /// end, naming the conversation; a reply that only asks for tools, or a share's page
    /// asked for an approval it cannot give, is told nothing.
    func testListAttentionNamesTheConversation() {
        let call = ToolCall(id: "call_1", name: "guarded", arguments: "{}")
        let waiting = ListAttention.event(.toolApprovalRequested(message: nil, call: call), conversation: "k3v9q2m8x7ad",
                                          title: "trip", owner: true)
        XCTAssertEqual(waiting, ["type": "attention", "conversation": "k3v9q2m8x7ad", "message": "call_1", "title": "trip",
                                 "text": "A tool call waits for your approval: guarded"])
        XCTAssertNil(ListAttention.event(.toolApprovalRequested(message: nil, call: call), conversation: "k3v9q2m8x7ad",
                                         title: "trip", owner: false))
        let done = ListAttention.event(.messageCompleted(reply("m4", "ok", status: .complete)), conversation: "k3v9q2m8x7ad",
                                       title: "trip", owner: true)
        XCTAssertEqual(done?["text"]?.string, "The reply is ready")
        XCTAssertEqual(done?["message"]?.string, "m4")
        let cut = ListAttention.event(.messageCompleted(reply("m4", "ok", status: .cancelled)), conversation: "k3v9q2m8x7ad",
                                      title: "trip", owner: false)
        XCTAssertEqual(cut?["text"]?.string, "The reply ended: cancelled")
        let failed = ListAttention.event(.messageFailed(reply("m4", "", status: .failed), error: nil), conversation: "k3v9q2m8x7ad",
                                         title: "trip", owner: true)
        XCTAssertEqual(failed?["text"]?.string, "The reply ended: failed")
        XCTAssertNil(ListAttention.event(.messageCompleted(reply("m3", "", status: .complete, calls: [call])),
                                         conversation: "k3v9q2m8x7ad", title: "trip", owner: true), "the chain goes on")
        XCTAssertNil(ListAttention.event(.messageCreated(reply("m5", "", status: .streaming)), conversation: "k3v9q2m8x7ad",
                                         title: "trip", owner: true))
    }
}
