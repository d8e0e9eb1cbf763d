import XCTest

import ConfabProtocol
@testable import LogStore

/// A reply's reasoning in the log: `reply.reasoning` records while it streams, the message's
/// `reasoning` at its end, and beside the message the daemon's own `replay`, which a client
/// never sees (docs/protocol.md, "Stored").
final class ReasoningRecordTests: XCTestCase {
    private let thinking: JSON = ["type": "thinking", "thinking": "look", "signature": "sig+/="]

    private func thoughtfulReply() -> Message {
        var message = Fixture.reply(2, "", status: .complete)
        message.reasoning = Reasoning(text: "look", started: Fixture.at(100), ended: Fixture.at(900), redactedBlocks: 1)
        message.reasoningSource = ReasoningSource(api: "anthropic", provider: "claude", model: "claude-x",
                                                  items: [thinking, ["type": "redacted_thinking", "data": "opaque"]])
        return message
    }

    func testTheReplayIsKeptBesideTheMessageAndNeverInIt() throws {
        let message = thoughtfulReply()
        let json = LogRecord.replyFinished(message).json(at: Fixture.at(1000))
        XCTAssertEqual(json["replay"]?["items"]?.array?.first, thinking, "the block exactly as it came")
        XCTAssertEqual(json["replay"]?["provider"]?.string, "claude")
        XCTAssertNil(json["message"]?["replay"])
        XCTAssertNil(message.json["replay"], "clients are sent the message's JSON: no replay in it")
        XCTAssertEqual(LogRecord(json: try JSON.parse(json.bytes)), .replyFinished(message))
        // A message without reasoning writes no key.
        XCTAssertNil(LogRecord.replyFinished(Fixture.reply(2, "x", status: .complete)).json(at: Fixture.created)["replay"])
    }

    func testTheThoughtSavedWhileStreamingComesBackAfterACrash() throws {
        let started = Fixture.at(5)
        var start = Fixture.reply(2, "", status: .streaming)
        start.usage = nil
        let records: [(record: LogRecord, at: Timestamp?)] = [
            (.header(Fixture.header()), Fixture.created), (.message(Fixture.user(1, "why?")), Fixture.at(1)),
            (.replyStarted(start), Fixture.at(2)),
            (.replyReasoning(message: "m2", content: "Because ", started: started), Fixture.at(300)),
            (.replyReasoning(message: "m2", content: "of this.", started: started), Fixture.at(600)),
        ]
        for (record, _) in records.dropFirst(3) {
            XCTAssertEqual(LogRecord(json: try JSON.parse(record.json(at: Fixture.created).bytes)), record)
        }
        let state = try XCTUnwrap(Replay.fold(records))
        let reply = try XCTUnwrap(state.messages.last)
        XCTAssertEqual(reply.status, .interrupted)
        XCTAssertEqual(reply.reasoning, Reasoning(text: "Because of this.", started: started, ended: Fixture.at(600)))
        // The thought was paid for: the estimate counts it as output.
        XCTAssertEqual(reply.usage?.reasoningTokens, 4)
        XCTAssertEqual(reply.usage?.completionTokens, 4)
        XCTAssertEqual(reply.usage?.isEstimated, true)
    }
}
