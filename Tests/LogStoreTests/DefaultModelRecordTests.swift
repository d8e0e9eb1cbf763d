import XCTest

import ConfabProtocol
import Foundation
@testable import LogStore

/// `model_default`: a conversation never given a model says so in its header, a `settings`
/// record that chooses one ends it, and the index keeps it.
final class DefaultModelRecordTests: XCTestCase {
    private func fold(_ header: ConversationHeader, _ records: [LogRecord]) throws -> ReplayedConversation {
        let entries = ([.header(header)] + records).enumerated().map { index, record in
            (record: record, at: Optional(Fixture.at(Int64(index) * 1000)))
        }
        return try XCTUnwrap(Replay.fold(entries))
    }

    func testTheFlagReadsBackAndAChosenModelEndsIt() throws {
        var header = Fixture.header()
        header.modelIsDefault = true
        let json = LogRecord.header(header).json(at: Fixture.created)
        XCTAssertEqual(json["model_default"]?.bool, true)
        XCTAssertEqual(LogRecord(json: json), .header(header))
        XCTAssertNil(LogRecord.header(Fixture.header()).json(at: Fixture.created)["model_default"], "written only when true")
        // A log from before the flag: the model was chosen.
        XCTAssertEqual(LogRecord(json: LogRecord.header(Fixture.header()).json(at: Fixture.created)), .header(Fixture.header()))

        let chosen = try fold(header, [.settings(ConversationSettings(model: "picked"))])
        XCTAssertFalse(chosen.header.modelIsDefault)
        XCTAssertEqual(chosen.header.model, "picked")
        XCTAssertEqual(chosen.summary.header, chosen.header)
        let loose = LogRecord.settings(ConversationSettings(model: "dflt", profile: "p", modelIsDefault: true))
        XCTAssertEqual(LogRecord(json: loose.json(at: Fixture.created)), loose)
        let still = try fold(header, [loose])
        XCTAssertTrue(still.header.modelIsDefault, "a profile without a model leaves it to the default")
        let untouched = try fold(header, [.settings(ConversationSettings(system: "s"))])
        XCTAssertTrue(untouched.header.modelIsDefault, "settings without a model leave it")
    }

    func testTheIndexKeepsTheFlagAndReadsLinesWithoutIt() throws {
        var header = Fixture.header()
        header.modelIsDefault = true
        var summary = LogSummary(header: header)
        summary.forgetFold()
        let entry = LogStore.IndexEntry(identity: FileIdentity(size: 10, inode: 3, modifiedNanoseconds: 5), summary: summary)
        let line = LogStore.encode(entry)
        var bytes: [UInt8] = []
        line.write(into: &bytes)
        XCTAssertEqual(bytes.withUnsafeBufferPointer { LogStore.decode(line: $0) }?.summary.header.modelIsDefault, true)
        // A line of the index before the flag: 19 fields, read as a model that was chosen.
        guard case .array(var fields) = line else { return XCTFail("\(line)") }
        fields.removeLast()
        bytes = []
        JSON.array(fields).write(into: &bytes)
        let old = try XCTUnwrap(bytes.withUnsafeBufferPointer { LogStore.decode(line: $0) })
        XCTAssertFalse(old.summary.header.modelIsDefault)
        XCTAssertEqual(old.summary.header.model, header.model)
    }
}

/// `LogStore.replyUsages(path:)`: the usage `usage.summary` reads from a log on disk.
final class ReplyUsageReadTests: XCTestCase {
    func testTheLatestEndingOfEachReplyWithItsModel() throws {
        let directory = NSTemporaryDirectory() + "confab-usage-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/log.jsonl"
        var header = Fixture.header()
        header.provider = "claude"
        var first = Fixture.reply(2, "Hi", status: .complete)
        first.model = "model-a"
        first.usage = Usage(promptTokens: 10, completionTokens: 2, totalTokens: 12, cacheReadTokens: 4)
        var continued = first
        continued.usage = Usage(promptTokens: 30, completionTokens: 5, totalTokens: 35, cacheReadTokens: 4, cacheWriteTokens: 6)
        var second = Fixture.reply(4, "There", status: .complete)
        second.model = nil
        second.usage = Usage(promptTokens: 7, completionTokens: 1, totalTokens: 8, isEstimated: true)
        let records: [LogRecord] = [.header(header), .message(Fixture.user(1, "hello \"reply.finished\"")), .replyStarted(Fixture.reply(2, "", status: .streaming)),
                                    .replyFinished(first), .replyFinished(continued), .message(Fixture.user(3, "again")), .replyFinished(second)]
        var bytes: [UInt8] = []
        for record in records {
            record.json(at: Fixture.created).write(into: &bytes)
            bytes.append(0x0A)
        }
        // A torn last line is not a record.
        bytes += Array("{\"type\":\"reply.finished\",\"v\":1".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let replies = try XCTUnwrap(LogStore.replyUsages(path: path))
        XCTAssertEqual(replies.map(\.message), ["m2", "m4"])
        XCTAssertEqual(replies.map(\.provider), ["claude", "claude"])
        XCTAssertEqual(replies.map(\.model), ["model-a", header.model], "a reply without a model is the header's")
        XCTAssertEqual(replies.first?.usage, continued.usage, "a reply ended again counts as its latest ending")
        XCTAssertEqual(replies.last?.usage.isEstimated, true)
        XCTAssertNil(LogStore.replyUsages(path: directory + "/missing.jsonl"))
    }
}
