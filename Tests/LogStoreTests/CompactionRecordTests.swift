import XCTest

import ConfabProtocol
@testable import LogStore

/// `compaction` and `uncompaction` records: as written and read, and what a replay keeps in force.
final class CompactionRecordTests: XCTestCase {
    private func fold(_ records: [LogRecord]) throws -> ReplayedConversation {
        let entries = ([.header(Fixture.header())] + records).enumerated().map { index, record in
            (record: record, at: Optional(Fixture.at(Int64(index) * 1000)))
        }
        return try XCTUnwrap(Replay.fold(entries))
    }

    private let summary = Compaction(first: "m1", last: "m2", summary: "They \"agreed\".\n", model: "m", provider: "default",
                                     usage: Usage(promptTokens: 40, completionTokens: 5, totalTokens: 45), focus: "plans", automatic: true)

    func testTheRecordsReadBackAsWritten() throws {
        let time = Fixture.at(12_345)
        let json = LogRecord.compaction(summary).json(at: time)
        XCTAssertEqual(json["type"]?.string, "compaction")
        XCTAssertNil(json["created"], "the record's own time says when")
        XCTAssertNil(json["tokens"])
        var read = summary
        read.created = time
        XCTAssertEqual(LogRecord(json: try JSON.parse(json.bytes)), .compaction(read))
        let end = LogRecord.uncompaction.json(at: time)
        XCTAssertEqual(end["type"]?.string, "uncompaction")
        XCTAssertEqual(LogRecord(json: try JSON.parse(end.bytes)), .uncompaction)
        // A range must be message ids.
        XCTAssertNil(LogRecord(json: ["type": "compaction", "v": 1, "first": "x", "last": "m2", "summary": "s", "model": "m"]))
        XCTAssertNil(LogRecord(json: ["type": "compaction", "v": 1, "first": "m1", "last": "m2", "model": "m"]))
    }

    func testTheLastOneNotEndedIsInForceAndTheMessagesStay() throws {
        let messages: [LogRecord] = [.message(Fixture.user(1, "q")), .replyFinished(Fixture.reply(2, "a", status: .complete))]
        XCTAssertNil(try fold(messages).compaction)
        let compacted = try fold(messages + [.compaction(summary)])
        XCTAssertEqual(compacted.compaction?.summary, summary.summary)
        XCTAssertEqual(compacted.compaction?.created, Fixture.at(3000))
        XCTAssertEqual(compacted.messages.count, 2)
        XCTAssertEqual(compacted.summary.messageCount, 2)
        XCTAssertFalse(compacted.summary.needsResume)
        XCTAssertNil(try fold(messages + [.compaction(summary), .uncompaction]).compaction)
        var second = summary
        second.summary = "again"
        XCTAssertEqual(try fold(messages + [.compaction(summary), .uncompaction, .compaction(second)]).compaction?.summary, "again")
    }
}
