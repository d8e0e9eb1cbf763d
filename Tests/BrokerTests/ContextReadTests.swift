import Dispatch
import XCTest

@testable import Broker
import ConfabProtocol
@testable import LogStore

/// A reply's context, in a conversation read back from its log, is read on the thread pool: the
/// loop goes on meanwhile, and what the conversation does while the read is held (cancel,
/// delete, undo its summary, revise or compact it) leaves it as the rules say.
final class ContextReadTests: XCTestCase {
    private var b: InProcessBroker!
    /// Where the read waits until the test lets it go.
    private final class Gate: @unchecked Sendable {
        /// Signalled by the read when it starts to wait.
        let entered = DispatchSemaphore(value: 0)
        /// Signalled by the test to let it go on.
        let proceed = DispatchSemaphore(value: 0)
    }
    private let gate = Gate()
    private var entered: DispatchSemaphore { gate.entered }
    private var proceed: DispatchSemaphore { gate.proceed }

    override func setUpWithError() throws {
        b = try InProcessBroker()
        let gate = gate
        ConversationLog.holdingReads = {
            gate.entered.signal()
            gate.proceed.wait()
        }
    }

    override func tearDown() {
        // A read still held would never end.
        proceed.signal()
        ConversationLog.holdingReads = nil
        b?.close()
        b = nil
    }

    /// A conversation of two answered exchanges (`m1`…`m4`; `summary`, if given, a summary of the
    /// first), then out of memory: its messages are read back from the log by place.
    private func storedConversation(summary: String? = nil, lastFinish: String = "stop") throws -> String {
        let created = try b.call(.conversationCreate, [:])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try b.call(.conversationAttach, ["conversation": .string(id)])
        for exchange in 1...2 {
            try b.call(.messageSend, ["conversation": .string(id), "content": .string("question \(exchange)")])
            b.turn(until: { b.upstream.streams.count == exchange })
            let stream = try XCTUnwrap(b.upstream.streams.last)
            stream.send("answer \(exchange)")
            stream.finish(exchange == 2 ? lastFinish : "stop")
            b.turn(until: { b.broker.conversations[id]?.active == nil })
        }
        if let summary {
            try XCTUnwrap(b.broker.conversations[id]).log.write([.compaction(Compaction(first: "m1", last: "m2", summary: summary, model: "scripted"))])
        }
        try b.call(.conversationDetach, ["conversation": .string(id)])
        b.broker.unloadIdle(idleMilliseconds: 0)
        XCTAssertEqual(b.broker.conversations[id]?.contents, .onDisk, "out of memory")
        try b.call(.conversationAttach, ["conversation": .string(id)])
        XCTAssertTrue(b.broker.conversations[id]?.current.allSatisfy { if case .stored = $0 { true } else { false } } ?? false,
                      "the messages are known by place")
        return id
    }

    /// Every turn the stored conversation's next reply sends, without a summary.
    private let whole = ["question 1", "answer 1", "question 2", "answer 2", "next question"]

    /// Sends the next question and waits until the reply's context read is under way (held).
    private func sendAndHold(_ id: String) throws {
        try b.call(.messageSend, ["conversation": .string(id), "content": "next question"])
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success, "the reply did not read its context on the thread pool")
    }

    /// Lets the held read go on and turns the loop until its answer has come back.
    private func release() {
        let answered = b.broker.replies.contextReadsAnswered
        proceed.signal()
        b.turn(until: { b.broker.replies.contextReadsAnswered > answered })
        XCTAssertGreaterThan(b.broker.replies.contextReadsAnswered, answered, "the read never came back")
    }

    private func conflict(_ method: RPCMethod, _ params: JSON) {
        XCTAssertThrowsError(try b.call(method, params), "\(method.rawValue)") { error in
            XCTAssertEqual((error as? InProcessBroker.Refused)?.code, RPCError.conflict, "\(error)")
        }
    }

    func testTheLoopServesWhileTheContextIsReadAndTheRequestHasItAll() throws {
        let id = try storedConversation()
        try sendAndHold(id)
        // The loop is free: another request is answered, and nothing of the reply is out yet.
        XCTAssertNotNil(try b.call(.status)["version"])
        XCTAssertEqual(b.upstream.streams.count, 2, "no request before the context is read")
        XCTAssertFalse(b.notifications(.messageCreated).contains { $0["message"]?["id"]?.string == "m6" }, "not announced yet")
        release()
        b.turn(until: { b.upstream.streams.count == 3 })
        let request = try XCTUnwrap(b.upstream.streams.last?.request)
        XCTAssertEqual(request.messages.map(\.content), whole)
        b.upstream.streams.last?.send("next answer")
        b.upstream.streams.last?.finish()
        b.turn(until: { b.notifications(.messageCompleted).contains { $0["message"]?["id"]?.string == "m6" } })
        XCTAssertEqual(b.notifications(.messageCompleted).last?["message"]?["content"]?.string, "next answer")
    }

    /// The notifications naming message `id` since the first `seen`, by method.
    private func events(of id: String, after seen: Int) -> [String] {
        b.notifications.dropFirst(seen).filter { ($0.params["message"]?["id"]?.string ?? $0.params["message"]?.string) == id }.map(\.method)
    }

    func testCancelWhileTheContextIsReadEndsTheReplyWithoutAsking() throws {
        let id = try storedConversation()
        let seen = b.notifications.count
        try sendAndHold(id)
        XCTAssertEqual(try b.call(.generationCancel, ["conversation": .string(id)])["cancelled"]?.string, "m6")
        release()
        b.turn(until: { b.broker.conversations[id]?.active == nil })
        XCTAssertEqual(b.upstream.streams.count, 2, "nothing was asked for the cancelled reply")
        // Announced as it ends, before its cancel and its ending: no client hears of an end first.
        XCTAssertEqual(events(of: "m6", after: seen), ["message.created", "generation.cancelled", "message.completed"])
        let ending = try XCTUnwrap(b.notifications(.messageCompleted).last { $0["message"]?["id"]?.string == "m6" }?["message"])
        XCTAssertEqual(ending["status"]?.string, MessageStatus.cancelled.rawValue)
        XCTAssertEqual(b.broker.replies.activeReplies, 0)
        // The conversation goes on: the next send is answered, with the cancelled reply as an empty turn.
        try b.call(.messageSend, ["conversation": .string(id), "content": "another question"])
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        release()
        b.turn(until: { b.upstream.streams.count == 3 })
        XCTAssertEqual(b.upstream.streams.last?.request.messages.map(\.content), whole + ["", "another question"])
    }

    func testDeleteWhileTheContextIsReadAsksNothingAndFreesTheStream() throws {
        let id = try storedConversation()
        try sendAndHold(id)
        try b.call(.conversationDelete, ["conversation": .string(id)])
        XCTAssertEqual(b.broker.replies.activeReplies, 0, "its stream is free at once")
        release()
        XCTAssertEqual(b.upstream.streams.count, 2, "nothing was asked for the deleted conversation")
        XCTAssertNil(b.broker.conversations[id])
        XCTAssertFalse(b.notifications(.messageCreated).contains { $0["message"]?["id"]?.string == "m6" })
    }

    func testASummaryUndoneWhileTheContextIsReadIsNotSent() throws {
        let id = try storedConversation(summary: "they asked a first question")
        try sendAndHold(id)
        let undone = try b.call(.conversationUncompact, ["conversation": .string(id)])
        XCTAssertNotNil(undone["uncompacted"])
        // The read under way was of the summary's context: the conversation is read again as it is now.
        release()
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success, "the context is read again")
        release()
        b.turn(until: { b.upstream.streams.count == 3 })
        let request = try XCTUnwrap(b.upstream.streams.last?.request)
        XCTAssertEqual(request.messages.map(\.content), whole)
    }

    func testWithTheSummaryKeptTheRequestSendsItInsteadOfItsRange() throws {
        let id = try storedConversation(summary: "they asked a first question")
        try sendAndHold(id)
        release()
        b.turn(until: { b.upstream.streams.count == 3 })
        let request = try XCTUnwrap(b.upstream.streams.last?.request)
        XCTAssertEqual(request.messages.map(\.content),
                       ["Summary of the earlier conversation (m1…m2):\n\nthey asked a first question\n\nquestion 2", "answer 2", "next question"])
    }

    func testRevisionsAndCompactionWaitForTheReplyWhileItsContextIsRead() throws {
        let id = try storedConversation()
        try sendAndHold(id)
        // Refused as while the reply streams: the reply is in flight from its start.
        conflict(.messageEdit, ["conversation": .string(id), "message": "m5", "content": "changed"])
        conflict(.messageRegenerate, ["conversation": .string(id)])
        conflict(.conversationCompact, ["conversation": .string(id)])
        release()
        b.turn(until: { b.upstream.streams.count == 3 })
        XCTAssertEqual(b.upstream.streams.last?.request.messages.map(\.content), whole)
    }

    /// A continuation cancelled while its context is read: clients hear `message.continued`
    /// before its new ending, as they would had it streamed, and its text stays as it was.
    func testACancelledContinuationIsAnnouncedAsContinuedBeforeItsEnding() throws {
        let id = try storedConversation(lastFinish: "length")
        let seen = b.notifications.count
        try b.call(.messageContinue, ["conversation": .string(id)])
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success, "the continuation did not read its context on the thread pool")
        XCTAssertEqual(try b.call(.generationCancel, ["conversation": .string(id)])["cancelled"]?.string, "m4")
        release()
        b.turn(until: { b.broker.conversations[id]?.active == nil })
        XCTAssertEqual(b.upstream.streams.count, 2, "nothing was asked")
        XCTAssertEqual(events(of: "m4", after: seen), ["message.continued", "generation.cancelled", "message.completed"])
        let ending = try XCTUnwrap(b.notifications(.messageCompleted).last?["message"])
        XCTAssertEqual(ending["status"]?.string, MessageStatus.cancelled.rawValue)
        XCTAssertEqual(ending["content"]?.string, "answer 2")
    }
}
