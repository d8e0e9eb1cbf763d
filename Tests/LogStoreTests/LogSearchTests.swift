import Foundation
import XCTest

import ConfabProtocol
@testable import LogStore

final class LogSearchTests: XCTestCase {
    private func message(_ id: String, _ role: Role, _ content: String, at milliseconds: Int64 = 1_000) -> Message {
        Message(id: id, conversation: "k3v9q2m8x7ad", role: role, content: content, status: .complete,
                created: Timestamp(milliseconds: milliseconds))
    }

    private func log(_ records: [LogRecord]) -> [UInt8] {
        var bytes: [UInt8] = []
        for record in records {
            record.json(at: Timestamp(milliseconds: 5)).write(into: &bytes)
            bytes.append(0x0A)
        }
        return bytes
    }

    private func search(_ bytes: [UInt8], _ text: String) throws -> [SearchHit] {
        var folded: [UInt8] = []
        LogSearch.fold(bytes, into: &folded)
        return LogSearch.searchFile(raw: bytes, folded: folded, conversation: "k3v9q2m8x7ad", query: try XCTUnwrap(SearchQuery(text)))
    }

    func testAMessageIsFoundByTheNamesOfItsFilesAfterItsText() throws {
        var withFiles = message("m1", .user, "see the attached", at: 1_000)
        withFiles.attachments = [Attachment(name: "Quarterly Report.txt", type: .text, size: 3, sha256: String(repeating: "a", count: 64)),
                                 Attachment(name: "diagram.png", type: .png, size: 9, sha256: String(repeating: "b", count: 64))]
        let bytes = log([.header(Fixture.header()), .message(withFiles), .message(message("m3", .user, "report", at: 3_000))])
        let byName = try search(bytes, "quarterly report")
        XCTAssertEqual(byName.map(\.message), ["m1"])
        XCTAssertEqual(byName.first?.snippet, "Quarterly Report.txt", "the snippet is the name's")
        XCTAssertEqual(try search(bytes, "DIAGRAM").map(\.message), ["m1"])
        XCTAssertEqual(try search(bytes, "attached").first?.snippet, "see the attached", "the text first")
        XCTAssertEqual(Set(try search(bytes, "report").map(\.message)), ["m1", "m3"])
    }

    func testABlankQueryIsNone() {
        XCTAssertNil(SearchQuery(""))
        XCTAssertNil(SearchQuery("  \n\t "))
    }

    func testMatchesTheWholeTextOrEveryWordCaseInsensitively() throws {
        let query = try XCTUnwrap(SearchQuery("Retry  Policy"))
        XCTAssertEqual(query.match("what does the retry policy look like?"), 14)
        XCTAssertEqual(query.match("POLICY for a retry"), 0, "every word, in any order; the first one found is where")
        XCTAssertNil(query.match("the policy"))
        XCTAssertEqual(try XCTUnwrap(SearchQuery("ÄPFEL")).match("grüne äpfel"), 6)
        XCTAssertEqual(try XCTUnwrap(SearchQuery("東京")).match("行き先は東京です"), 4)
    }

    func testTheNeedleIsTheLongestRunThatReadsTheSameInTheLogsJSON() throws {
        XCTAssertEqual(try XCTUnwrap(SearchQuery("a quote\"d backslash\\ word")).needle, Array("backslash".utf8))
        XCTAssertEqual(try XCTUnwrap(SearchQuery("Ärgerlich")).needle, Array("rgerlich".utf8), "no letter whose case differs outside ASCII")
        XCTAssertEqual(try XCTUnwrap(SearchQuery("東京")).needle, Array("東京".utf8), "caseless letters are kept")
        XCTAssertEqual(try XCTUnwrap(SearchQuery("ÄÖ")).needle, [], "nothing to look for first: every message line is read")
    }

    func testFindsUserMessagesAndFinishedRepliesOnlyWithTheLastVersionOfEach() throws {
        var reply = message("m2", .assistant, "the first part")
        var continued = reply
        continued.content = "the first part and the Needle after it"
        reply.status = .streaming
        let bytes = log([
            .header(ConversationHeader(id: "k3v9q2m8x7ad", created: Timestamp(milliseconds: 1), title: "needle in the title", model: "m", system: "needle")),
            .message(message("m1", .user, "where is the needle?")),
            .replyStarted(reply),
            .replyText(message: "m2", content: "needle in a piece"),
            .replyFinished(message("m2", .assistant, "the first part")),
            .replyStarted(message("m2", .assistant, "the first part")),
            .replyFinished(continued),
            .superseded(message: "m2", by: "m3"),
            .message(message("m5", .user, "a NEEDLE, shouting", at: 3_000)),
        ])
        let hits = try search(bytes, "needle")
        XCTAssertEqual(hits.map(\.message), ["m1", "m2", "m5"])
        XCTAssertEqual(hits.map(\.role), [.user, .assistant, .user])
        XCTAssertEqual(hits[1].snippet, "the first part and the Needle after it")
        XCTAssertEqual(try search(bytes, "shouting needle").map(\.message), ["m5"])
        XCTAssertEqual(try search(bytes, "absent").count, 0)
    }

    func testAQueryWithoutANeedleStillReadsEveryMessage() throws {
        let bytes = log([.message(message("m1", .user, "ÄÖ together")), .message(message("m3", .user, "äö lower"))])
        XCTAssertEqual(try search(bytes, "ÄÖ").map(\.message), ["m1", "m3"])
    }

    func testASnippetIsOneLineAroundTheHitCutWithEllipses() {
        let long = String(repeating: "a", count: 100) + " key\n\nword " + String(repeating: "b", count: 100)
        let snippet = LogSearch.snippet(of: long, around: 101, length: 3)
        XCTAssertTrue(snippet.hasPrefix("…"))
        XCTAssertTrue(snippet.hasSuffix("…"))
        XCTAssertTrue(snippet.contains(" key word "), snippet)
        XCTAssertFalse(snippet.contains("\n"))
        XCTAssertEqual(LogSearch.snippet(of: "short one", around: 0, length: 5), "short one")
    }

    func testNewestFirstAndCutToTheLimit() {
        var hits = (1...10).map { SearchHit(conversation: "c", message: "m\($0)", role: .user, created: Timestamp(milliseconds: Int64($0 % 4)), snippet: "") }
        LogSearch.keepNewest(&hits, 4)
        XCTAssertEqual(hits.map(\.message), ["m7", "m3", "m10", "m6"])
    }

    func testSearchReadsFilesFromDiskAndSkipsOnesThatAreGone() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/one.jsonl"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(log([.message(message("m1", .user, "find me"))]))))
        let hits = LogSearch.search([LogSearch.Log(id: "k3v9q2m8x7ad", path: path, updated: Timestamp(milliseconds: 1_000)),
                                     LogSearch.Log(id: "gone", path: directory.path + "/missing.jsonl", updated: Timestamp(milliseconds: 2_000))],
                                    for: try XCTUnwrap(SearchQuery("FIND")), limit: 10)
        XCTAssertEqual(hits.map(\.message), ["m1"])
    }

    /// Once `limit` hits are in hand, logs last written before the oldest of them are not read.
    func testLogsOlderThanTheHitsKeptAreNotRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var logs: [LogSearch.Log] = []
        for index in 0..<4 {
            let path = directory.path + "/\(index).jsonl"
            // The oldest log's time says it is old, but its second message says otherwise: found
            // only if the log were read, which it must not be once three newer hits are in hand.
            let at = Int64(10_000 * (index + 1))
            let second = index == 0 ? 999_999 : at + 1
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(log([
                .message(message("m1", .user, "common word \(index)", at: at)),
                .message(message("m3", .user, "common word again \(index)", at: second)),
            ]))))
            logs.append(LogSearch.Log(id: "c\(index)", path: path, updated: Timestamp(milliseconds: at + 1)))
        }
        let hits = LogSearch.search(logs, for: try XCTUnwrap(SearchQuery("common")), limit: 3)
        XCTAssertEqual(hits.map { "\($0.conversation) \($0.message)" }, ["c3 m3", "c3 m1", "c2 m3"])
        // A log whose time says it may hold newer hits is read even after the limit is reached.
        logs[0].updated = Timestamp(milliseconds: 999_999)
        let again = LogSearch.search(logs, for: try XCTUnwrap(SearchQuery("again")), limit: 1)
        XCTAssertEqual(again.map(\.conversation), ["c0"])
    }
}
