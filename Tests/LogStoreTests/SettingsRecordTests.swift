import XCTest

import ConfabProtocol
@testable import LogStore

/// `settings` records: what they change in a replay, in the summary folded as they are written, and in the index.
final class SettingsRecordTests: XCTestCase {
    private let params = SamplingParameters(temperature: 0.7, stop: ["END"])

    private func fold(_ records: [LogRecord]) throws -> ReplayedConversation {
        let entries = ([.header(Fixture.header())] + records).enumerated().map { index, record in
            (record: record, at: Optional(Fixture.at(Int64(index) * 1000)))
        }
        return try XCTUnwrap(Replay.fold(entries))
    }

    func testTheRecordReadsBackAsWritten() throws {
        let full = LogRecord.settings(ConversationSettings(model: "m2", system: "", profile: "coder", params: params))
        let json = full.json(at: Fixture.created)
        XCTAssertEqual(json["type"]?.string, "settings")
        XCTAssertEqual(json["system"]?.string, "", "a cleared system prompt is written as \"\"")
        XCTAssertEqual(LogRecord(json: json), full)

        let modelOnly = LogRecord.settings(ConversationSettings(model: "m2"))
        let written = modelOnly.json(at: Fixture.created)
        XCTAssertNil(written["system"])
        XCTAssertNil(written["params"])
        XCTAssertEqual(LogRecord(json: written), modelOnly)

        XCTAssertNil(LogRecord(json: ["type": "settings", "v": 1, "at": "2026-11-22T04:15:30.123Z", "model": 3]))
        XCTAssertNil(LogRecord(json: ["type": "settings", "v": 1, "at": "2026-11-22T04:15:30.123Z", "params": ["temperature": 9]]))
    }

    func testLaterSettingsWinAndLeaveTheRestAsTheyWere() throws {
        let state = try fold([
            .message(Fixture.user(1, "hello")),
            .settings(ConversationSettings(model: "second", params: params)),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyFinished(Fixture.reply(2, "Hi", status: .complete)),
            .settings(ConversationSettings(system: "", profile: "coder")),
        ])
        XCTAssertEqual(state.header.model, "second")
        XCTAssertNil(state.header.system, "\"\" clears it")
        XCTAssertEqual(state.header.profile, "coder")
        XCTAssertEqual(state.header.params, params)
        XCTAssertEqual(state.header.created, Fixture.created)
        XCTAssertEqual(state.summary.header, state.header, "the summary says what a full read does")
        XCTAssertEqual(state.summary.updated, Fixture.at(5000))
        XCTAssertEqual(state.messages.count, 2)
        XCTAssertFalse(state.summary.needsResume)

        let kept = try fold([.settings(ConversationSettings(system: "Kinder."))])
        XCTAssertEqual(kept.header.model, Fixture.header().model)
        XCTAssertEqual(kept.header.system, "Kinder.")
    }

    func testTheIndexKeepsTheLatestSettings() throws {
        var summary = LogSummary(header: Fixture.header())
        summary.apply(.settings(ConversationSettings(model: "indexed", system: "", params: params)), at: Fixture.at(1000))
        let entry = LogStore.IndexEntry(identity: FileIdentity(size: 1, inode: 2, modifiedNanoseconds: 3), summary: summary)
        let decoded = try XCTUnwrap(LogStore.decode(LogStore.encode(entry)))
        XCTAssertEqual(decoded.summary.header.model, "indexed")
        XCTAssertNil(decoded.summary.header.system)
        XCTAssertEqual(decoded.summary.header.params, params)
        XCTAssertEqual(decoded.summary.updated, Fixture.at(1000))
    }
}
