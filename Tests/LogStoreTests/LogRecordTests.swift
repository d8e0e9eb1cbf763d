import XCTest

import ConfabProtocol
@testable import LogStore

/// Builders shared by the LogStore tests.
enum Fixture {
    static let conversation = "k3v9q2m8x7ad"
    static let created = Timestamp(milliseconds: 1_795_320_930_123)

    static func at(_ offsetMilliseconds: Int64) -> Timestamp {
        Timestamp(milliseconds: created.milliseconds + offsetMilliseconds)
    }

    static func header(id: String = conversation, title: String = "demo", system: String? = "You are terse.") -> ConversationHeader {
        ConversationHeader(id: id, created: created, title: title, model: "gpt-4o-mini", system: system)
    }

    static func user(_ sequence: Int, _ content: String, conversation: String = conversation) -> Message {
        Message(id: MessageID.make(sequence), conversation: conversation, role: .user, content: content, status: .complete,
                created: at(Int64(sequence) * 1000),
                author: Author(uid: 1000, login: "ana", name: "Ana", clientID: "c1"))
    }

    static func reply(_ sequence: Int, _ content: String, status: MessageStatus, conversation: String = conversation) -> Message {
        var message = Message(id: MessageID.make(sequence), conversation: conversation, role: .assistant, content: content,
                              status: status, created: at(Int64(sequence) * 1000), model: "gpt-4o-mini")
        if status == .complete {
            message.finishReason = "stop"
            message.usage = Usage(promptTokens: 9, completionTokens: 3, totalTokens: 12)
        }
        if status == .failed {
            message.error = MessageError(code: .upstreamHTTP, message: "bad gateway", status: 502)
        }
        return message
    }
}

final class LogRecordTests: XCTestCase {

    private func roundTrip(_ record: LogRecord, file: StaticString = #filePath, line: UInt = #line) throws {
        let time = Fixture.at(12_345)
        let json = record.json(at: time)
        XCTAssertEqual(json["v"], .int(LogRecord.formatVersion), file: file, line: line)
        XCTAssertEqual(json["at"], .string(time.description), file: file, line: line)
        let parsed = try JSON.parse(json.bytes)
        XCTAssertEqual(LogRecord(json: parsed), record, file: file, line: line)
    }

    func testEveryCaseRoundTrips() throws {
        let cases: [LogRecord] = [
            .header(Fixture.header()),
            .header(Fixture.header(title: "t \"q\" \n é", system: nil)),
            .message(Fixture.user(1, "hello\nworld")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "Hel"),
            .replyText(message: "m2", content: ""),
            .replyFinished(Fixture.reply(2, "Hello!", status: .complete)),
            .replyFinished(Fixture.reply(4, "partial", status: .failed)),
            .replyFinished(Fixture.reply(6, "cut", status: .interrupted)),
            .replyFinished(Fixture.reply(8, "stop", status: .cancelled)),
            .title("renamed 🎉"),
            .superseded(message: "m2", by: "m5"),
            .header(ConversationHeader(id: Fixture.conversation, created: Fixture.created, title: "fork", model: "m", system: nil,
                                       forkedFrom: ForkOrigin(conversation: "abcdefghjkmn", message: "m4"))),
        ]
        for record in cases { try roundTrip(record) }
        var superseded = Fixture.reply(2, "old", status: .complete)
        superseded.supersededBy = "m3"
        try roundTrip(.replyFinished(superseded))
    }

    func testTypeNames() {
        let time = Fixture.created
        XCTAssertEqual(LogRecord.header(Fixture.header()).json(at: time)["type"], "conversation")
        XCTAssertEqual(LogRecord.message(Fixture.user(1, "x")).json(at: time)["type"], "message")
        XCTAssertEqual(LogRecord.replyStarted(Fixture.reply(2, "", status: .streaming)).json(at: time)["type"], "reply.started")
        XCTAssertEqual(LogRecord.replyText(message: "m2", content: "x").json(at: time)["type"], "reply.text")
        XCTAssertEqual(LogRecord.replyFinished(Fixture.reply(2, "x", status: .complete)).json(at: time)["type"], "reply.finished")
        XCTAssertEqual(LogRecord.title("x").json(at: time)["type"], "title")
    }

    func testHeaderWithoutSystemOmitsIt() {
        let json = LogRecord.header(Fixture.header(system: nil)).json(at: Fixture.created)
        XCTAssertNil(json["system"])
        XCTAssertEqual(json["id"], .string(Fixture.conversation))
        XCTAssertEqual(json["created"], .string(Fixture.created.description))
    }

    func testUnknownTypeOrVersionIsNil() {
        guard case .object(let title) = LogRecord.title("x").json(at: Fixture.created) else { return XCTFail() }
        XCTAssertNotNil(LogRecord(json: .object(title)))
        var copy = title
        copy["type"] = "future.thing"
        XCTAssertNil(LogRecord(json: .object(copy)), "unknown type")
        copy = title
        copy["type"] = nil
        XCTAssertNil(LogRecord(json: .object(copy)), "no type")
        copy = title
        copy["type"] = 3
        XCTAssertNil(LogRecord(json: .object(copy)), "type not a string")
        copy = title
        copy["v"] = 2
        XCTAssertNil(LogRecord(json: .object(copy)), "newer version")
        copy = title
        copy["v"] = nil
        XCTAssertNil(LogRecord(json: .object(copy)), "no version")
        copy = title
        copy["v"] = "1"
        XCTAssertNil(LogRecord(json: .object(copy)), "version not a number")
        XCTAssertNil(LogRecord(json: [1, 2]))
        XCTAssertNil(LogRecord(json: "title"))
    }

    func testIncompleteRecordsAreNil() {
        let time = Fixture.created
        func without(_ record: LogRecord, _ key: String) -> JSON {
            guard case .object(var members) = record.json(at: time) else { return .null }
            members[key] = nil
            return .object(members)
        }
        for key in ["id", "created", "title", "model"] {
            XCTAssertNil(LogRecord(json: without(.header(Fixture.header()), key)), "header without \(key)")
        }
        XCTAssertNil(LogRecord(json: without(.message(Fixture.user(1, "x")), "message")))
        XCTAssertNil(LogRecord(json: without(.replyStarted(Fixture.reply(2, "", status: .streaming)), "message")))
        XCTAssertNil(LogRecord(json: without(.replyFinished(Fixture.reply(2, "", status: .complete)), "message")))
        XCTAssertNil(LogRecord(json: without(.replyText(message: "m2", content: "x"), "message")))
        XCTAssertNil(LogRecord(json: without(.replyText(message: "m2", content: "x"), "content")))
        XCTAssertNil(LogRecord(json: without(.title("x"), "title")))
        // A message record whose message is unreadable.
        XCTAssertNil(LogRecord(json: ["type": "message", "v": 1, "at": "2026-11-22T04:15:30.123Z",
                                      "message": ["id": "m0", "conversation": "k3v9q2m8x7ad", "role": "user",
                                                  "content": "x", "status": "complete", "created": "2026-11-22T04:15:30.123Z"]]))
    }
}

final class ReplayTests: XCTestCase {

    private typealias Entry = (record: LogRecord, at: Timestamp?)

    private func fold(_ records: [LogRecord], file: StaticString = #filePath, line: UInt = #line) -> ReplayedConversation? {
        let entries: [Entry] = [(.header(Fixture.header()), Fixture.created)]
            + records.enumerated().map { (record: $0.element, at: Fixture.at(Int64($0.offset + 1) * 10)) }
        let result = Replay.fold(entries)
        XCTAssertNotNil(result, file: file, line: line)
        return result
    }

    func testNoHeaderIsNil() {
        XCTAssertNil(Replay.fold([]))
        XCTAssertNil(Replay.fold([(.message(Fixture.user(1, "x")), nil), (.header(Fixture.header()), nil)]))
        XCTAssertNil(Replay.fold([(.title("x"), nil)]))
    }

    func testHeaderOnly() throws {
        let state = try XCTUnwrap(Replay.fold([(.header(Fixture.header()), Fixture.created)]))
        XCTAssertEqual(state.header, Fixture.header())
        XCTAssertEqual(state.title, "demo")
        XCTAssertEqual(state.updated, Fixture.created)
        XCTAssertEqual(state.messages, [])
        XCTAssertEqual(state.interruptedReplies, [])
    }

    func testMessagesEndUpInIdOrder() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(3, "third")),
            .message(Fixture.user(10, "tenth")),
            .message(Fixture.user(1, "first")),
            .replyFinished(Fixture.reply(9, "ninth", status: .complete)),
            .replyFinished(Fixture.reply(2, "second", status: .complete)),
        ]))
        XCTAssertEqual(state.messages.map(\.id), ["m1", "m2", "m3", "m9", "m10"], "numeric, not lexical, order")
        XCTAssertEqual(state.messages.map(\.content), ["first", "second", "third", "ninth", "tenth"])
    }

    func testReplyTextAccumulatesOntoStartedReply() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "hi")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "Hel"),
            .replyText(message: "m2", content: "lo, "),
            .replyText(message: "m2", content: "wörld"),
        ]))
        XCTAssertEqual(state.messages.count, 2)
        XCTAssertEqual(state.messages[1].content, "Hello, wörld")
    }

    func testStartedWithoutFinishedBecomesInterrupted() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "hi")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "partial "),
            .replyText(message: "m2", content: "text"),
        ]))
        var expected = Fixture.reply(2, "partial text", status: .interrupted)
        expected.finishReason = nil
        // Its text was paid for: estimated from it, and from the system prompt and "hi" before it.
        expected.usage = Usage.estimate(prompt: ["You are terse.", "hi"], completion: "partial text")
        XCTAssertEqual(state.messages.last, expected)
        XCTAssertEqual(state.interruptedReplies, [expected])
        XCTAssertEqual(state.messages.first, Fixture.user(1, "hi"), "other messages untouched")
    }

    func testSeveralInterruptedRepliesAreInIdOrder() throws {
        let state = try XCTUnwrap(fold([
            .replyStarted(Fixture.reply(4, "", status: .streaming)),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m4", content: "four"),
            .replyText(message: "m2", content: "two"),
        ]))
        XCTAssertEqual(state.interruptedReplies.map(\.id), ["m2", "m4"])
        XCTAssertEqual(state.interruptedReplies.map(\.content), ["two", "four"])
        XCTAssertTrue(state.messages.allSatisfy { $0.status == .interrupted })
    }

    func testFinishedReplyReplacesStreamedText() throws {
        let finished = Fixture.reply(2, "The full reply.", status: .complete)
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "hi")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "The full"),
            .replyFinished(finished),
        ]))
        XCTAssertEqual(state.messages, [Fixture.user(1, "hi"), finished])
        XCTAssertEqual(state.interruptedReplies, [])
    }

    func testTextAfterFinishOrForUnknownIdIsIgnored() throws {
        let finished = Fixture.reply(2, "done", status: .cancelled)
        let state = try XCTUnwrap(fold([
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyFinished(finished),
            .replyText(message: "m2", content: " extra"),
            .replyText(message: "m7", content: "orphan"),
            .replyText(message: "m1", content: "not a reply"),
            .message(Fixture.user(1, "user text")),
            .replyText(message: "m1", content: " appended?"),
        ]))
        XCTAssertEqual(state.messages, [Fixture.user(1, "user text"), finished])
        XCTAssertEqual(state.interruptedReplies, [])
    }

    func testFailedReplyKeepsItsError() throws {
        let failed = Fixture.reply(2, "so far", status: .failed)
        let state = try XCTUnwrap(fold([.replyStarted(Fixture.reply(2, "", status: .streaming)), .replyFinished(failed)]))
        XCTAssertEqual(state.messages, [failed])
        XCTAssertEqual(state.messages.first?.error?.status, 502)
    }

    func testTitleChanges() throws {
        let state = try XCTUnwrap(fold([.title("first"), .message(Fixture.user(1, "x")), .title("second")]))
        XCTAssertEqual(state.title, "second")
        XCTAssertEqual(state.header.title, "demo", "the header keeps the original")
    }

    func testUpdatedIsTheLatestAt() throws {
        let entries: [Entry] = [
            (.header(Fixture.header()), Fixture.created),
            (.message(Fixture.user(1, "a")), Fixture.at(5000)),
            (.title("t"), Fixture.at(90_000)),
            (.message(Fixture.user(2, "b")), Fixture.at(20_000)),
            (.message(Fixture.user(3, "c")), nil),
        ]
        XCTAssertEqual(Replay.fold(entries)?.updated, Fixture.at(90_000))
        let earlier: [Entry] = [(.header(Fixture.header()), Fixture.created), (.title("t"), Fixture.at(-5000))]
        XCTAssertEqual(Replay.fold(earlier)?.updated, Fixture.created, "never before creation")
    }

    func testRepeatedMessageIdIsReplacedNotDuplicated() throws {
        let state = try XCTUnwrap(fold([.message(Fixture.user(1, "old")), .message(Fixture.user(1, "new"))]))
        XCTAssertEqual(state.messages, [Fixture.user(1, "new")])
    }

    func testSupersededMarksTheMessageAndKeepsItThroughALaterRewriteOfIt() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "old", status: .complete)),
            .superseded(message: "m2", by: "m3"),
            .replyStarted(Fixture.reply(3, "", status: .streaming)), .replyFinished(Fixture.reply(3, "new", status: .complete)),
            .replyStarted(Fixture.reply(2, "old", status: .streaming)), .replyFinished(Fixture.reply(2, "old, longer", status: .complete)),
        ]))
        XCTAssertEqual(state.messages.map(\.supersededBy), [nil, "m3", nil])
        XCTAssertEqual(state.messages[1].content, "old, longer")
        XCTAssertEqual(state.owedReplies, [])
    }

    func testARegeneratedReplyThatNeverStartedIsOwedAndTheSummaryAsksForAResume() throws {
        let records: [LogRecord] = [
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "old", status: .complete)),
            .superseded(message: "m2", by: "m5"),
        ]
        let state = try XCTUnwrap(fold(records))
        XCTAssertEqual(state.owedReplies, ["m5"])
        XCTAssertTrue(state.summary.needsResume)
        let started = try XCTUnwrap(fold(records + [.replyStarted(Fixture.reply(5, "", status: .streaming)),
                                                     .replyFinished(Fixture.reply(5, "new", status: .complete))]))
        XCTAssertEqual(started.owedReplies, [])
        XCTAssertFalse(started.summary.needsResume)
        XCTAssertEqual(started.summary.messageCount, 3)
    }

    func testAnEditSupersedesWithAMessageWrittenInTheSameAppendSoNothingIsOwed() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "a", status: .complete)),
            .superseded(message: "m1", by: "m3"), .superseded(message: "m2", by: "m3"), .message(Fixture.user(3, "q2")),
        ]))
        XCTAssertEqual(state.owedReplies, [])
        XCTAssertEqual(state.messages.map(\.supersededBy), ["m3", "m3", nil])
        XCTAssertTrue(state.summary.needsResume, "the new message's reply never started")
    }

    func testUsageAddsUpOverRepliesAndAReplyEndedAgainReplacesItsPart() throws {
        var estimated = Fixture.reply(4, "b", status: .complete)
        estimated.usage = Usage(promptTokens: 20, completionTokens: 5, totalTokens: 25, isEstimated: true)
        var continued = Fixture.reply(2, "a, longer", status: .complete)
        continued.usage = Usage(promptTokens: 30, completionTokens: 8, totalTokens: 38)
        let records: [LogRecord] = [
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "a", status: .complete)),
            .message(Fixture.user(3, "q2")), .replyFinished(estimated),
        ]
        let state = try XCTUnwrap(fold(records))
        XCTAssertEqual(state.summary.usage, UsageTotals(promptTokens: 29, completionTokens: 8, totalTokens: 37, estimatedReplies: 1))
        XCTAssertEqual(state.summary.usage.usage.isEstimated, true)
        // m2 continued: its new ending carries the usage of both requests and replaces the old.
        let again = try XCTUnwrap(fold(records + [.replyStarted(Fixture.reply(2, "a", status: .streaming)), .replyFinished(continued)]))
        XCTAssertEqual(again.summary.usage, UsageTotals(promptTokens: 50, completionTokens: 13, totalTokens: 63, estimatedReplies: 1))
        // An ending without usage (cancelled before any text) takes its part away.
        var cancelled = Fixture.reply(4, "", status: .cancelled)
        cancelled.usage = nil
        let gone = try XCTUnwrap(fold(records + [.replyFinished(cancelled)]))
        XCTAssertEqual(gone.summary.usage, UsageTotals(promptTokens: 9, completionTokens: 3, totalTokens: 12, estimatedReplies: 0))
    }

    /// A regenerated reply that never started is not owed once a later reply exists: running
    /// it then would answer out of order. Replay and the summary agree.
    func testAnOwedRegenerateIsDroppedOnceALaterReplyExists() throws {
        let records: [LogRecord] = [
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "a", status: .complete)),
            .superseded(message: "m2", by: "m3"),
            .message(Fixture.user(4, "later")), .replyFinished(Fixture.reply(5, "b", status: .complete)),
        ]
        let state = try XCTUnwrap(fold(records))
        XCTAssertEqual(state.owedReplies, [])
        XCTAssertFalse(state.summary.needsResume)
    }

    /// A user message an edit replaced is not owed a reply, even if its own never started.
    func testASendReplacedByAnEditIsNotOwed() throws {
        let state = try XCTUnwrap(fold([
            .message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "a", status: .complete)),
            .message(Fixture.user(3, "first try")),
            .message(Fixture.user(5, "second try")), .superseded(message: "m3", by: "m5"),
            .replyFinished(Fixture.reply(6, "answer", status: .complete)),
        ]))
        XCTAssertEqual(state.owedReplies, [])
        XCTAssertFalse(state.summary.needsResume)
        XCTAssertEqual(state.messages.map(\.supersededBy), [nil, nil, "m5", nil, nil])
    }
}

/// A reply's tool-call chain in the log: the same records as replies, ordered by step.
final class ToolChainReplayTests: XCTestCase {
    func testAChainReplaysInStepOrderAndACallCutOffIsInterruptedWithAWordForTheModel() throws {
        var asking = Fixture.reply(2, "", status: .complete)
        asking.finishReason = "tool_calls"
        asking.toolCalls = [ToolCall(id: "a", name: "weather", arguments: "{}"), ToolCall(id: "b", name: "weather", arguments: "{}")]
        let first = Message(id: "m2.1", conversation: Fixture.conversation, role: .tool, content: "", status: .streaming,
                            created: Fixture.at(2100), tool: ToolResult(callID: "a", name: "weather"))
        let second = Message(id: "m2.2", conversation: Fixture.conversation, role: .tool, content: "", status: .streaming,
                             created: Fixture.at(2100), tool: ToolResult(callID: "b", name: "weather"))
        var secondDone = second
        secondDone.status = .complete
        secondDone.content = "rain"
        secondDone.tool?.httpStatus = 200
        // Written as the daemon writes them; the second call ends first.
        let records: [LogRecord] = [.header(Fixture.header()), .message(Fixture.user(1, "weather?")), .replyStarted(Fixture.reply(2, "", status: .streaming)),
                                    .replyFinished(asking), .replyStarted(first), .replyStarted(second), .replyFinished(secondDone)]
        let state = try XCTUnwrap(Replay.fold(records.map { ($0, Fixture.at(3000)) }))
        XCTAssertEqual(state.messages.map(\.id), ["m1", "m2", "m2.1", "m2.2"])
        XCTAssertEqual(state.messages[2].status, .interrupted)
        XCTAssertEqual(state.messages[2].content, Replay.interruptedCall)
        XCTAssertEqual(state.messages[2].tool?.callID, "a")
        XCTAssertEqual(state.messages[3].content, "rain")
        XCTAssertEqual(state.interruptedReplies.map(\.id), ["m2.1"])
        XCTAssertEqual(state.summary.messageCount, 4)
        // A tool record round-trips through its JSON line.
        for record in records { XCTAssertEqual(LogRecord(json: record.json(at: Fixture.at(1))), record) }
    }
}
