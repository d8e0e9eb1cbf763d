import XCTest

@testable import ConfabProtocol

/// `message.reasoning` through the follower: pieces reported as they come, the turn's thought
/// kept (text, started, ended), thinking ended by the first text, and a late attach (a
/// streaming reply whose stored reasoning has no `ended`) resumed as thinking.
final class ReplyFollowerReasoningTests: XCTestCase {
    private let conversation = "abcdefghjkmn"
    private let created = Timestamp(milliseconds: 1_764_000_000_000)

    private func message(_ id: String, _ content: String = "", _ status: MessageStatus = .streaming,
                         reasoning: Reasoning? = nil, calls: [ToolCall]? = nil, error: MessageError? = nil) -> Message {
        var message = Message(id: id, conversation: conversation, role: .assistant, content: content, status: status,
                              created: created, finishReason: status == .streaming ? nil : "stop", error: error, toolCalls: calls)
        message.reasoning = reasoning
        return message
    }

    /// A follower whose clock reads `times` in turn (then the last one).
    private func follower(reply: String = "m2", times: [Int64]) -> ReplyFollower {
        var follower = ReplyFollower(conversation: conversation, reply: reply)
        let clock = Clock(times.map { Timestamp(milliseconds: created.milliseconds + $0) })
        follower.clock = { clock.next() }
        return follower
    }

    private final class Clock: @unchecked Sendable {
        private var times: [Timestamp]
        init(_ times: [Timestamp]) { self.times = times }
        func next() -> Timestamp { times.count > 1 ? times.removeFirst() : times[0] }
    }

    private func feed(_ follower: inout ReplyFollower, _ events: [ConversationEvent]) -> [ReplyProgress] {
        events.flatMap { follower.take(.conversation(conversation, $0)) }
    }

    private func pieces(_ progress: [ReplyProgress]) -> [String] {
        progress.compactMap { if case .reasoning(_, let piece, _) = $0 { piece } else { nil } }
    }

    func testPiecesAreReportedAndKeptUntilTheTextEndsTheThinking() {
        var follower = follower(times: [1000, 13_500])
        var progress = feed(&follower, [.messageCreated(message("m2")),
                                        .messageReasoning(message: "m2", content: "Let me see.\nThe"),
                                        .messageReasoning(message: "m2", content: " user wants"),
                                        .messageReasoning(message: "m2", content: "")])
        XCTAssertEqual(pieces(progress), ["Let me see.\nThe", " user wants"])
        let started = Timestamp(milliseconds: created.milliseconds + 1000)
        XCTAssertEqual(follower.thinking?.turn, "m2")
        XCTAssertEqual(follower.thinking?.thought, Reasoning(text: "Let me see.\nThe user wants", started: started))
        guard case .reasoning(_, _, let second)? = progress.last else { return XCTFail("\(progress)") }
        XCTAssertEqual(second.text, "Let me see.\nThe user wants", "each piece comes with the thought so far")

        progress = feed(&follower, [.messageDelta(message: "m2", content: "Hi")])
        let ended = Reasoning(text: "Let me see.\nThe user wants", started: started,
                              ended: Timestamp(milliseconds: created.milliseconds + 13_500))
        XCTAssertEqual(progress, [.reasoningEnded(turn: "m2", thought: ended), .text(turn: "m2", "Hi")],
                       "the first text ends the thinking, before it is reported")
        XCTAssertNil(follower.thinking)
        XCTAssertEqual(ended.seconds(now: Timestamp.now()), 12)

        var stored = ended
        stored.ended = Timestamp(milliseconds: created.milliseconds + 13_000)
        progress = feed(&follower, [.messageCompleted(message("m2", "Hi", .complete, reasoning: stored))])
        XCTAssertEqual(follower.thoughts["m2"], stored, "the stored thought is the finished turn's")
        XCTAssertFalse(progress.contains { if case .reasoningEnded = $0 { true } else { false } }, "ended once only")
    }

    /// A model that thinks again after its answer began (interleaved thinking): the thought
    /// opens again, the row comes back, the next text ends it again, and the clock sums the
    /// two spans instead of counting the pause between them.
    func testThinkingAgainAfterTheTextOpensTheThoughtAndItsClockGoesOn() {
        // Thinks from 1 s, text at 5 s, thinks again at 9 s, text again at 12 s: 4 + 3 s.
        var follower = follower(times: [1000, 5000, 9000, 12_000])
        var progress = feed(&follower, [.messageCreated(message("m2")),
                                        .messageReasoning(message: "m2", content: "first"),
                                        .messageDelta(message: "m2", content: "Hi"),
                                        .messageReasoning(message: "m2", content: " then more")])
        XCTAssertEqual(pieces(progress), ["first", " then more"], "the second thought is reported, not dropped")
        let open = Reasoning(text: "first then more", started: Timestamp(milliseconds: created.milliseconds + 5000))
        XCTAssertEqual(follower.thinking?.thought, open, "thinking again, its start moved on by the 4 s pause")
        progress = feed(&follower, [.messageDelta(message: "m2", content: " there")])
        let closed = Reasoning(text: "first then more", started: open.started, ended: Timestamp(milliseconds: created.milliseconds + 12_000))
        XCTAssertEqual(progress, [.reasoningEnded(turn: "m2", thought: closed), .text(turn: "m2", " there")])
        XCTAssertNil(follower.thinking)
        XCTAssertEqual(closed.seconds(now: Timestamp.now()), 7, "4 s and 3 s of thinking, the pause not counted")
    }

    func testResumingMovesTheStartByThePauseAndOnlyWhenTheThoughtHadEnded() {
        var thought = Reasoning(text: "a", started: Timestamp(milliseconds: 1000), ended: Timestamp(milliseconds: 3000))
        thought.resume(at: Timestamp(milliseconds: 10_000))
        XCTAssertEqual(thought, Reasoning(text: "a", started: Timestamp(milliseconds: 8000)))
        thought.resume(at: Timestamp(milliseconds: 20_000))
        XCTAssertEqual(thought.started, Timestamp(milliseconds: 8000), "an open thought is left as it is")
        var early = Reasoning(text: "a", started: Timestamp(milliseconds: 1000), ended: Timestamp(milliseconds: 3000))
        early.resume(at: Timestamp(milliseconds: 2000))
        XCTAssertEqual(early.started, Timestamp(milliseconds: 1000), "a clock that went back moves nothing")
    }

    /// A reply that thought and then ended (a tool call, or nothing at all) ends its thinking
    /// before the turn's end is reported.
    func testATurnThatEndsWhileThinkingEndsItsThought() {
        var follower = follower(times: [0, 4000])
        let failed = MessageError(code: .thinkingExhausted, message: "the model used all 64 tokens of max_tokens thinking")
        let progress = feed(&follower, [.messageCreated(message("m2")), .messageReasoning(message: "m2", content: "hmm"),
                                        .messageFailed(message("m2", "", .failed, error: failed), error: failed)])
        let kinds = progress.map { step -> String in
            switch step {
            case .turnStarted: "started"
            case .reasoning: "reasoning"
            case .reasoningEnded: "ended"
            case .turnEnded: "turn"
            case .finished: "finished"
            default: "other"
            }
        }
        XCTAssertEqual(kinds, ["started", "reasoning", "ended", "turn", "finished"])
        guard case .finished(let end)? = progress.last, case .failed(let error) = end.outcome else { return XCTFail() }
        XCTAssertEqual(error?.code, .thinkingExhausted)
    }

    /// Attaching mid-thought: the streaming reply's stored reasoning, without `ended`, is
    /// reported as thinking since the daemon's `started`; pieces after it go on from there.
    func testALateAttachResumesAsThinkingFromTheStoredStart() {
        var follower = follower(times: [99_000])
        let started = Timestamp(milliseconds: created.milliseconds + 500)
        let pending = message("m2", reasoning: Reasoning(text: "step one\nstep two", started: started))
        var progress = follower.resume(stored: [], pending: pending, tools: [])
        XCTAssertEqual(pieces(progress), ["step one\nstep two"])
        XCTAssertEqual(follower.thinking?.thought.started, started, "counted from the daemon's start, not from now")
        progress = feed(&follower, [.messageReasoning(message: "m2", content: "\nstep three")])
        XCTAssertEqual(pieces(progress), ["\nstep three"])
        XCTAssertEqual(follower.thinking?.thought.text, "step one\nstep two\nstep three")

        // A reconnection that finds more stored reports only the rest, and the end.
        let later = message("m2", "An", reasoning: Reasoning(text: "step one\nstep two\nstep three\nfour", started: started,
                                                            ended: Timestamp(milliseconds: created.milliseconds + 7000)))
        progress = follower.resume(stored: [], pending: later, tools: [])
        XCTAssertEqual(pieces(progress), ["\nfour"], "what was missed of the thought, then its end")
        XCTAssertTrue(progress.contains(.reasoningEnded(turn: "m2", thought: Reasoning(
            text: "step one\nstep two\nstep three\nfour", started: started, ended: Timestamp(milliseconds: created.milliseconds + 7000)))))
        XCTAssertTrue(progress.contains(.text(turn: "m2", "An")))
        XCTAssertNil(follower.thinking)
    }

    /// A reply attached to after its thinking ended is not shown thinking: its thought is
    /// reported (ask --reasoning writes it) and ended at once, at the daemon's time.
    func testAStoredThoughtThatEndedIsNotThinking() {
        var follower = follower(times: [0])
        let pending = message("m2", "Hello", reasoning: Reasoning(text: "done", started: created,
                                                                  ended: Timestamp(milliseconds: created.milliseconds + 3000)))
        let progress = follower.resume(stored: [], pending: pending, tools: [])
        XCTAssertEqual(pieces(progress), ["done"])
        let ends = progress.filter { if case .reasoningEnded = $0 { true } else { false } }
        XCTAssertEqual(ends, [.reasoningEnded(turn: "m2", thought: Reasoning(text: "done", started: created,
                                                                             ended: Timestamp(milliseconds: created.milliseconds + 3000)))])
        XCTAssertNil(follower.thinking)
        XCTAssertEqual(follower.thoughts["m2"]?.seconds(now: Timestamp.now()), 3)
    }

    /// Each turn of a tool loop has its own thought.
    func testEachTurnKeepsItsOwnThought() {
        var follower = follower(times: [0, 1000, 2000, 3000])
        let call = ToolCall(id: "c1", name: "weather", arguments: "{}")
        _ = feed(&follower, [.messageCreated(message("m2")), .messageReasoning(message: "m2", content: "first"),
                             .messageCompleted(message("m2", "", .complete, calls: [call])),
                             .messageCreated(message("m2.2")), .messageReasoning(message: "m2.2", content: "second")])
        XCTAssertEqual(follower.thoughts["m2"]?.text, "first")
        XCTAssertNotNil(follower.thoughts["m2"]?.ended)
        XCTAssertEqual(follower.thinking?.turn, "m2.2")
        XCTAssertEqual(follower.thinking?.thought.text, "second")
    }
}
