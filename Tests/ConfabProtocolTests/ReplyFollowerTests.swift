import XCTest

@testable import ConfabProtocol

/// The follower fed notification sequences as the daemon sends them (docs/protocol.md), and
/// the typed notifications read back from the frames the daemon writes.
final class ReplyFollowerTests: XCTestCase {
    private let conversation = "abcdefghjkmn"
    private let created = Timestamp(milliseconds: 1_764_000_000_000)

    private func message(_ id: String, _ role: Role = .assistant, _ content: String = "", _ status: MessageStatus = .streaming,
                         finish: String? = nil, calls: [ToolCall]? = nil, error: MessageError? = nil, tool: ToolResult? = nil) -> Message {
        Message(id: id, conversation: conversation, role: role, content: content, status: status, created: created,
                finishReason: finish, error: error, toolCalls: calls, tool: tool)
    }

    private func event(_ event: ConversationEvent) -> ServerNotification { .conversation(conversation, event) }

    private func feed(_ follower: inout ReplyFollower, _ events: [ConversationEvent]) -> [ReplyProgress] {
        events.flatMap { follower.take(event($0)) }
    }

    private func text(_ progress: [ReplyProgress]) -> String {
        progress.map { if case .text(_, let piece) = $0 { piece } else { "" } }.joined()
    }

    private func end(_ progress: [ReplyProgress]) -> ReplyEnd? {
        progress.compactMap { if case .finished(let end) = $0 { end } else { nil } }.last
    }

    func testAPlainReplyStreamsAndEndsComplete() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let progress = feed(&follower, [
            .messageCreated(message("m1", .user, "hi", .complete)),
            .messageCreated(message("m2")),
            .messageDelta(message: "m2", content: "Hel"),
            .messageDelta(message: "m2", content: "lo"),
            .messageCompleted(message("m2", .assistant, "Hello", .complete, finish: "stop")),
        ])
        XCTAssertEqual(progress.first, .turnStarted("m2", message("m2")))
        XCTAssertEqual(text(progress), "Hello")
        XCTAssertEqual(end(progress)?.outcome, .complete)
        XCTAssertTrue(follower.isFinished)
        XCTAssertEqual(feed(&follower, [.messageDelta(message: "m2", content: "late")]), [], "nothing after the end")
    }

    func testOtherRepliesAndConversationsAreNotOurs() {
        var follower = ReplyFollower(conversation: conversation, reply: "m4")
        var progress = feed(&follower, [.messageCreated(message("m2")), .messageDelta(message: "m2", content: "theirs"),
                                        .messageCompleted(message("m2", .assistant, "theirs", .complete))])
        progress += follower.take(.conversation("zzzzzzzzzzzz", .messageDelta(message: "m4", content: "elsewhere")))
        XCTAssertEqual(progress, [])
        XCTAssertFalse(follower.started)
    }

    /// Text the deltas did not bring (we followed late, or a delta was lost) comes from the
    /// stored message, once.
    func testTheStoredTextBeyondTheDeltasIsReportedOnce() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let progress = feed(&follower, [
            .messageDelta(message: "m2", content: "one "),
            .messageCompleted(message("m2", .assistant, "one two", .complete)),
        ])
        XCTAssertEqual(text(progress), "one two")
    }

    func testRetriesAreReportedAndAFailureEndsWithItsError() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let error = MessageError(code: .upstreamHTTP, message: "line one\nline two", status: 500)
        let progress = feed(&follower, [
            .messageCreated(message("m2")),
            .messageRetrying(message: "m2", attempt: 1, delayMilliseconds: 1000, error: error),
            .messageRetrying(message: "m2", attempt: 2, delayMilliseconds: 2000, error: error),
            .messageFailed(message("m2", .assistant, "", .failed, error: error), error: error),
        ])
        XCTAssertEqual(progress.filter { if case .retrying = $0 { true } else { false } }.count, 2)
        XCTAssertEqual(end(progress)?.outcome, .failed(error))
    }

    func testALengthLimitIsItsOwnEnd() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let progress = feed(&follower, [.messageCompleted(message("m2", .assistant, "cut", .complete, finish: "length"))])
        XCTAssertEqual(end(progress)?.outcome, .cutAtLengthLimit)
    }

    func testACancelSaysWhoAndEndsCancelled() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let ana = ClientInfo(id: "c7", uid: 1000, login: "ana", name: "ana@pts/3", client: "confab-attach")
        let progress = feed(&follower, [
            .messageDelta(message: "m2", content: "so"),
            .generationCancelled(message: "m2", by: ana),
            .messageCompleted(message("m2", .assistant, "so", .cancelled)),
        ])
        XCTAssertEqual(end(progress)?.outcome, .cancelled(by: ana))
    }

    /// A turn that asks for tools does not end the reply: its calls run, then the next turn
    /// (`m2.3`) streams, and that one's end is the reply's.
    func testAToolChainIsFollowedToItsLastTurn() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let weather = ToolCall(id: "call_1", name: "weather", arguments: #"{"city":"Paris"}"#)
        let result = ToolResult(callID: "call_1", name: "weather", httpStatus: 200, durationMilliseconds: 5)
        let progress = feed(&follower, [
            .messageCreated(message("m2")),
            .messageCompleted(message("m2", .assistant, "", .complete, finish: "tool_calls", calls: [weather])),
            .messageCreated(message("m2.1", .tool, "", .streaming, tool: ToolResult(callID: "call_1", name: "weather"))),
            .toolStarted(message: message("m2.1", .tool, "", .streaming, tool: ToolResult(callID: "call_1", name: "weather")), call: weather),
            .toolCompleted(message("m2.1", .tool, "{\"temp\":21}", .complete, tool: result)),
            .messageCreated(message("m2.2")),
            .messageDelta(message: "m2.2", content: "ls -la"),
            .messageCompleted(message("m2.2", .assistant, "ls -la", .complete, finish: "stop")),
        ])
        XCTAssertEqual(progress, [
            .turnStarted("m2", message("m2")),
            .turnEnded(message("m2", .assistant, "", .complete, finish: "tool_calls", calls: [weather])),
            .toolsRequested([weather]),
            .toolStarted(weather),
            .toolEnded(message("m2.1", .tool, "{\"temp\":21}", .complete, tool: result), call: weather),
            .turnStarted("m2.2", message("m2.2")),
            .text(turn: "m2.2", "ls -la"),
            .turnEnded(message("m2.2", .assistant, "ls -la", .complete, finish: "stop")),
            .finished(ReplyEnd(outcome: .complete, message: message("m2.2", .assistant, "ls -la", .complete, finish: "stop"))),
        ])
        XCTAssertTrue(follower.running.isEmpty)
    }

    /// A turn that failed with calls (too many rounds) keeps them for the record and ends the reply.
    func testAFailedTurnWithCallsEndsTheReply() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let call = ToolCall(id: "c", name: "echo", arguments: "{}")
        let error = MessageError(code: .toolRounds, message: "too many")
        let progress = feed(&follower, [.messageFailed(message("m2.4", .assistant, "", .failed, calls: [call], error: error), error: error)])
        XCTAssertEqual(end(progress)?.outcome, .failed(error))
    }

    func testApprovalsAreAskedAndSettledOnce() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let call = ToolCall(id: "call_9", name: "delete", arguments: #"{"all":true}"#)
        let pending = message("m2.1", .tool, "", .streaming, tool: ToolResult(callID: "call_9", name: "delete", approval: .pending))
        let bob = ClientInfo(id: "c2", uid: 1001, login: "bob", name: "bob", client: "confab-attach")
        let progress = feed(&follower, [
            .messageCompleted(message("m2", .assistant, "", .complete, calls: [call])),
            .toolApprovalRequested(message: pending, call: call),
            .toolApprovalRequested(message: pending, call: call),
            .toolDenied(call: "call_9", by: bob),
            .toolDenied(call: "call_9", by: bob),
            .toolApproved(call: "someone-elses", by: bob),
        ])
        XCTAssertEqual(progress.filter { if case .approvalRequested = $0 { true } else { false } }, [.approvalRequested(call)])
        XCTAssertEqual(progress.filter { if case .approvalDecided = $0 { true } else { false } },
                       [.approvalDecided(call, allowed: false, by: bob)])
        XCTAssertTrue(follower.awaitingApproval.isEmpty)
    }

    /// `message.continue`: the stored text is not reported again, only what is added.
    func testAContinuedReplyReportsOnlyTheNewText() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let progress = feed(&follower, [
            .messageContinued(message("m2", .assistant, "Once upon", .streaming, finish: "length")),
            .messageDelta(message: "m2", content: " a time"),
            .messageCompleted(message("m2", .assistant, "Once upon a time", .complete, finish: "stop")),
        ])
        XCTAssertEqual(text(progress), " a time")
        XCTAssertEqual(end(progress)?.outcome, .complete)
    }

    func testADeletedConversationEndsTheReply() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        XCTAssertEqual(end(feed(&follower, [.messageDelta(message: "m2", content: "a"), .conversationDeleted]))?.outcome,
                       .conversationDeleted)
    }

    /// The owner unsharing mid-reply ends the reply for this user: nothing more of it comes.
    func testUnsharingEndsTheReplyForTheUserItWasTakenFrom() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let owner = ClientInfo(id: "c1", uid: 1000, login: "ana", name: "ana", client: "confab-attach")
        XCTAssertEqual(end(feed(&follower, [.messageDelta(message: "m2", content: "a"), .conversationUnshared(by: owner)])),
                       ReplyEnd(outcome: .unshared(by: owner), message: nil))
        XCTAssertTrue(follower.isFinished)
    }

    /// After a reconnection the stored messages tell the rest: text not seen, tool results,
    /// the end; and what was seen is not reported twice.
    func testResumingFromStoredMessagesReportsOnlyWhatWasMissed() {
        var follower = ReplyFollower(conversation: conversation, reply: "m2")
        let call = ToolCall(id: "c1", name: "echo", arguments: "{}")
        _ = feed(&follower, [
            .messageCompleted(message("m2", .assistant, "", .complete, calls: [call])),
            .messageCreated(message("m2.2")),
            .messageDelta(message: "m2.2", content: "first "),
        ])
        let stored = [
            message("m1", .user, "q", .complete),
            message("m2", .assistant, "", .complete, calls: [call]),
            message("m2.1", .tool, "ok", .complete, tool: ToolResult(callID: "c1", name: "echo", httpStatus: 200)),
            message("m2.2", .assistant, "first second", .interrupted),
        ]
        let progress = follower.resume(stored: stored, pending: nil, tools: [])
        XCTAssertEqual(text(progress), "second")
        XCTAssertEqual(progress.filter { if case .toolEnded = $0 { true } else { false } }.count, 1)
        XCTAssertEqual(end(progress)?.outcome, .interrupted)
        XCTAssertEqual(follower.resume(stored: stored, pending: nil, tools: []), [], "nothing twice")
    }

    func testResumingAReplyStillStreamingCatchesUpAndGoesOn() {
        var follower = ReplyFollower(conversation: conversation, reply: "m3")
        var progress = follower.resume(stored: [], pending: message("m3", .assistant, "so far", .streaming), tools: [])
        progress += feed(&follower, [.messageDelta(message: "m3", content: " and on"),
                                     .messageCompleted(message("m3", .assistant, "so far and on", .complete))])
        XCTAssertEqual(text(progress), "so far and on")
        XCTAssertEqual(end(progress)?.outcome, .complete)
    }

    // MARK: The frames both ends share

    /// Every notification written as the daemon writes it reads back as the same value.
    func testEveryNotificationRoundTripsThroughItsFrame() throws {
        let client = ClientInfo(id: "c1", uid: 1000, login: "ana", name: "ana", client: "confab-attach")
        let call = ToolCall(id: "call_1", name: "weather", arguments: "{}")
        let info = ConversationInfo(id: conversation, title: "t", created: created, updated: created, model: "m", system: nil, messageCount: 2)
        let error = MessageError(code: .rateLimited, message: "slow down", status: 429)
        let summary = Compaction(first: "m1", last: "m2", summary: "They said hi.", model: "m")
        let events: [ConversationEvent] = [
            .messageCreated(message("m1", .user, "hi", .complete)), .messageDelta(message: "m2", content: "x"),
            .messageReasoning(message: "m2", content: "hmm"),
            .messageCompleted(message("m2", .assistant, "x", .complete)),
            .messageRetrying(message: "m2", attempt: 1, delayMilliseconds: 1000, error: error),
            .messageFailed(message("m2", .assistant, "", .failed, error: error), error: error),
            .messageSuperseded(message: "m2", by: "m3"), .messageContinued(message("m2", .assistant, "x", .streaming)),
            .generationCancelled(message: "m2", by: client),
            .toolApprovalRequested(message: message("m2.1", .tool, "", .streaming, tool: ToolResult(callID: "call_1", name: "weather", approval: .pending)), call: call),
            .toolApproved(call: "call_1", by: client), .toolDenied(call: "call_1", by: nil),
            .toolStarted(message: message("m2.1", .tool, "", .streaming, tool: ToolResult(callID: "call_1", name: "weather")), call: call),
            .toolCompleted(message("m2.1", .tool, "{}", .complete, tool: ToolResult(callID: "call_1", name: "weather", httpStatus: 200))),
            .conversationUpdated(info), .conversationDeleted, .clientAttached(client), .clientDetached(client),
            .conversationUnshared(by: client),
            .toolProgress(ToolProgress(message: "m2.1", call: "call_1", tool: "weather", progress: 1, total: 2, text: "half")),
            .compactionStarted(by: client, automatic: false), .compactionDelta(content: "so far"),
            .compactionCompleted(summary), .compactionFailed(error: error, cancelledBy: nil), .compactionUndone(summary, by: client),
        ]
        XCTAssertEqual(Set(events.map(\.kind)).count + 1, RPCNotification.allCases.count, "every notification but server.stopping")
        for notification in events.map({ ServerNotification.conversation(conversation, $0) }) + [.serverStopping(reason: "SIGTERM")] {
            guard case .success(.notification(let method, let params)) = RPC.parse(notification.frame.dropLast()) else {
                return XCTFail("not a notification frame: \(notification)")
            }
            XCTAssertEqual(ServerNotification(method: method, params: params), notification, method)
        }
    }

    /// The fast path's delta frame is the typed one's, byte for byte.
    func testTheWrittenDeltaIsTheTypedDelta() {
        XCTAssertEqual(RPC.deltaNotification(conversation: conversation, message: "m2", content: "a\"b\n"),
                       ServerNotification.conversation(conversation, .messageDelta(message: "m2", content: "a\"b\n")).frame)
    }

    func testUnknownOrMalformedNotificationsAreDropped() {
        XCTAssertNil(ServerNotification(method: "message.exploded", params: ["conversation": "x"]))
        XCTAssertNil(ServerNotification(method: RPCNotification.messageDelta.rawValue, params: ["conversation": "x", "message": 3]))
        XCTAssertNil(ServerNotification(method: RPCNotification.messageCompleted.rawValue, params: ["message": ["id": "m1"]]))
    }
}
