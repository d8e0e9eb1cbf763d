import XCTest

import ConfabProtocol
import Posix
@testable import LogStore

/// The last page read from a log's end (`LogTail`) is the page of the full read, whatever the
/// records before it said; where the end cannot tell, it says so (nil) instead of guessing.
final class LogTailTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory?.remove()
    }

    private var written = 0

    /// A log file of the header and `records`, then `raw` bytes as they are (hand-written lines,
    /// a torn end).
    private func writeLog(_ records: [LogRecord], raw: [String] = [], rawFirst: [String] = [], tail: String = "") throws -> String {
        written += 1
        let path = directory.path + "/log\(written).jsonl"
        var bytes: [UInt8] = []
        LogRecord.header(Fixture.header()).json(at: Fixture.at(0)).write(into: &bytes)
        bytes.append(0x0A)
        for line in rawFirst { bytes += Array(line.utf8) + [0x0A] }
        for (index, record) in records.enumerated() {
            record.json(at: Fixture.at(Int64(100_000 + index))).write(into: &bytes)
            bytes.append(0x0A)
        }
        for line in raw { bytes += Array(line.utf8) + [0x0A] }
        bytes += Array(tail.utf8)
        let fd = try Posix.Files.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        defer { Posix.Files.close(fd) }
        XCTAssertEqual(Posix.Files.writeAll(fd, bytes).written, bytes.count)
        return path
    }

    /// The page `conversation.history` gives from the full read: the newest `limit` of every
    /// message in id order.
    private func fullPage(_ path: String, limit: Int) throws -> TailPage {
        let read = LogStore.read(id: Fixture.conversation, path: path, outline: .never)
        if read.fd >= 0 { Posix.Files.close(read.fd) }
        let conversation = try XCTUnwrap(read.conversation)
        XCTAssertTrue(conversation.stored.isEmpty)
        let messages = conversation.messages
        return TailPage(messages: Array(messages.suffix(limit)), more: messages.count > limit, compaction: conversation.compaction)
    }

    /// Every limit and starting window against the full read; returns how many decided.
    @discardableResult
    private func compareEverywhere(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        var decided = 0
        for limit in [1, 2, 3, 4, 5, 7, 10, 20, 50, 200] {
            let full = try fullPage(path, limit: limit)
            for window in [40, 300, 4096, 1 << 20] {
                guard let page = LogTail.lastPage(path: path, id: Fixture.conversation, limit: limit, firstWindow: window) else { continue }
                decided += 1
                XCTAssertEqual(page.messages, full.messages, "limit \(limit), window \(window)", file: file, line: line)
                XCTAssertEqual(page.more, full.more, "limit \(limit), window \(window)", file: file, line: line)
                XCTAssertEqual(page.compaction, full.compaction, "limit \(limit), window \(window)", file: file, line: line)
            }
        }
        return decided
    }

    /// `count` exchanges from `from`: a user message, its reply started and finished.
    private func exchanges(_ count: Int, from first: Int = 1) -> [LogRecord] {
        var records: [LogRecord] = []
        for exchange in 0..<count {
            let sequence = first + 2 * exchange
            records.append(.message(Fixture.user(sequence, "question \(sequence) with \"quotes\", m\(sequence + 50) and a \\ backslash")))
            records.append(.replyStarted(Fixture.reply(sequence + 1, "", status: .streaming)))
            records.append(.replyText(message: MessageID.make(sequence + 1), content: "ans"))
            records.append(.replyFinished(Fixture.reply(sequence + 1, "answer \(sequence + 1)", status: .complete)))
        }
        return records
    }

    private let summary = Compaction(first: "m1", last: "m10", summary: "They \"agreed\" on m99.\n", model: "gpt-4o-mini", provider: "default")

    func testAPlainLongLogDecidesFromItsEnd() throws {
        let path = try writeLog(exchanges(60) + [.title("renamed")])
        let decided = try compareEverywhere(path)
        XCTAssertEqual(decided, 40, "every limit and window decides")
        let page = try XCTUnwrap(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 20, firstWindow: 300))
        XCTAssertEqual(page.messages.map(\.id), (101...120).map(MessageID.make))
        XCTAssertTrue(page.more)
    }

    func testEditsRegeneratesAndDroppedMessages() throws {
        var records = exchanges(30)
        // An edit of an early message: the old one and every message after it replaced by m61.
        records += (5...60).map { LogRecord.superseded(message: MessageID.make($0), by: "m61") }
        records.append(.message(Fixture.user(61, "edited")))
        records += [.replyStarted(Fixture.reply(62, "", status: .streaming)), .replyFinished(Fixture.reply(62, "first", status: .complete))]
        // A regenerate, twice.
        records += [.superseded(message: "m62", by: "m63"), .replyStarted(Fixture.reply(63, "", status: .streaming)),
                    .replyFinished(Fixture.reply(63, "second", status: .failed)),
                    .superseded(message: "m63", by: "m64"), .replyStarted(Fixture.reply(64, "", status: .streaming)),
                    .replyFinished(Fixture.reply(64, "third", status: .complete))]
        records += exchanges(5, from: 65)
        // Messages dropped by an edit near the end, and a regenerated reply written before what replaced it.
        records += [.superseded(message: "m73", by: "m75"), .superseded(message: "m74", by: "m75")]
        records += exchanges(2, from: 75)
        records += [.superseded(message: "m78", by: "m79")]
        let path = try writeLog(records)
        XCTAssertGreaterThan(try compareEverywhere(path), 30)
    }

    func testSupersededEarlyAndRewrittenInTheWindowKeepsItsReplacement() throws {
        // m4 replaced early; its record written again much later (a continued reply) says nothing
        // of it: the full read keeps m4 replaced, so the end alone must not decide m4.
        var records = exchanges(3)
        records.append(.superseded(message: "m4", by: "m7"))
        records += exchanges(20, from: 7)
        records += [.replyStarted(Fixture.reply(4, "", status: .streaming)), .replyFinished(Fixture.reply(4, "continued", status: .complete))]
        let path = try writeLog(records)
        try compareEverywhere(path)
        let page = try XCTUnwrap(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 200))
        XCTAssertEqual(page.messages.first { $0.id == "m4" }?.supersededBy, "m7")
    }

    func testToolCallsAndTheirResults() throws {
        var records = exchanges(10)
        var asking = Fixture.reply(22, "", status: .complete)
        asking.toolCalls = [ToolCall(id: "call_1", name: "get_time", arguments: "{\"zone\":\"m5\"}"),
                            ToolCall(id: "call_2", name: "get_date", arguments: "{}")]
        asking.finishReason = "tool_calls"
        records += [.message(Fixture.user(21, "what time?")), .replyStarted(Fixture.reply(22, "", status: .streaming)), .replyFinished(asking)]
        for step in 1...2 {
            let result = Message(id: "m22.\(step)", conversation: Fixture.conversation, role: .tool, content: "12:00", status: .complete,
                                 created: Fixture.at(22_500), tool: ToolResult(callID: "call_\(step)", name: "get_time"))
            records += [.replyStarted(result), .replyFinished(result)]
        }
        records += [.replyStarted(Fixture.reply(23, "", status: .streaming)), .replyFinished(Fixture.reply(23, "noon", status: .complete))]
        records += exchanges(3, from: 24)
        let path = try writeLog(records)
        XCTAssertGreaterThan(try compareEverywhere(path), 30)
    }

    func testCompactionsBeforeAndInsideTheWindow() throws {
        // A compaction long before the end: found among the lines before the window.
        let early = try writeLog(exchanges(5) + [.compaction(summary)] + exchanges(40, from: 11))
        XCTAssertEqual(try compareEverywhere(early), 40)
        XCTAssertEqual(LogTail.lastPage(path: early, id: Fixture.conversation, limit: 2, firstWindow: 300)?.compaction?.first, "m1")
        // Compacted, then undone, both long before the end.
        let undone = try writeLog(exchanges(5) + [.compaction(summary)] + exchanges(5, from: 11) + [.uncompaction] + exchanges(30, from: 21))
        XCTAssertEqual(try compareEverywhere(undone), 40)
        XCTAssertNil(LogTail.lastPage(path: undone, id: Fixture.conversation, limit: 2, firstWindow: 300)?.compaction)
        // Undone early, compacted again near the end.
        var again = summary
        again.last = "m60"
        let late = try writeLog(exchanges(5) + [.compaction(summary), .uncompaction] + exchanges(30, from: 11) + [.compaction(again)] + exchanges(2, from: 71))
        XCTAssertEqual(try compareEverywhere(late), 40)
        // A compaction record whose type is written with an escape.
        let escaped = #"{"type":"c\u006fmpaction","v":1,"at":"2026-01-01T00:00:01.000Z","first":"m1","last":"m2","summary":"s","model":"x"}"#
        let path = try writeLog(exchanges(40, from: 3), rawFirst: [escaped])
        let full = try fullPage(path, limit: 2)
        XCTAssertNotNil(full.compaction, "the fixture holds a compaction the full read takes")
        try compareEverywhere(path)
    }

    func testAMessageIdWrittenWithEscapesBeforeTheWindow() throws {
        // m999, spelled with escapes, at the log's start: the newest message of all.
        let hidden = #"{"type":"message","v":1,"at":"2026-01-01T00:00:01.000Z","message":{"id":"m\u0039\u00399","conversation":"k3v9q2m8x7ad","role":"user","content":"hidden","status":"complete","created":"2026-01-01T00:00:01.000Z"}}"#
        let path = try writeLog(exchanges(40, from: 3), rawFirst: [hidden])
        XCTAssertEqual(try fullPage(path, limit: 1).messages.map(\.id), ["m999"])
        try compareEverywhere(path)
        XCTAssertEqual(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 1, firstWindow: 300)?.messages.map(\.id), ["m999"])
    }

    func testAReplyNamedOnlyBeforeTheWindowIsNotLeftOut() throws {
        // m200 is stored first, then everything else: its record is nowhere near the end.
        let path = try writeLog([.message(Fixture.user(200, "early but newest"))] + exchanges(40))
        try compareEverywhere(path)
        XCTAssertEqual(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 3, firstWindow: 300)?.messages.last?.id, "m200")
    }

    func testATornLastLineIsDropped() throws {
        let path = try writeLog(exchanges(30), tail: #"{"type":"message","v":1,"message":{"id":"m61","#)
        XCTAssertEqual(try compareEverywhere(path), 40)
        XCTAssertEqual(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 1)?.messages.map(\.id), ["m60"])
    }

    func testALogShorterThanThePage() throws {
        let path = try writeLog(exchanges(2))
        XCTAssertEqual(try compareEverywhere(path), 40)
        let page = try XCTUnwrap(LogTail.lastPage(path: path, id: Fixture.conversation, limit: 20))
        XCTAssertEqual(page.messages.count, 4)
        XCTAssertFalse(page.more)
        let headerOnly = try writeLog([])
        XCTAssertEqual(try compareEverywhere(headerOnly), 40)
        let torn = try writeLog([], tail: #"{"type":"mess"#)
        XCTAssertEqual(try compareEverywhere(torn), 40)
        let empty = try writeLog([.title("nothing yet")])
        XCTAssertEqual(LogTail.lastPage(path: empty, id: Fixture.conversation, limit: 20), TailPage(messages: [], more: false, compaction: nil))
    }

    func testUnreadableLinesAreSkippedAsTheFullReadSkipsThem() throws {
        let path = try writeLog(exchanges(20), raw: ["not json", #"{"type":"message","v":1,"message":{"id":"m500"}}"#])
        try compareEverywhere(path)
    }

    func testWhatTheEndCannotDecideIsLeftToTheFullRead() throws {
        // A reply left streaming is finished by the full read from its texts.
        let streaming = try writeLog(exchanges(10) + [.message(Fixture.user(21, "and?")), .replyStarted(Fixture.reply(22, "", status: .streaming)),
                                                      .replyText(message: "m22", content: "par")])
        XCTAssertNil(LogTail.lastPage(path: streaming, id: Fixture.conversation, limit: 5))
        // Another conversation's header.
        let path = try writeLog(exchanges(3))
        XCTAssertNil(LogTail.lastPage(path: path, id: "another", limit: 5))
        // The newest message named only at the start, and a window too small to reach it.
        let far = try writeLog([.message(Fixture.user(900, "newest"))] + exchanges(40))
        XCTAssertNil(LogTail.lastPage(path: far, id: Fixture.conversation, limit: 1, firstWindow: 100, maxWindow: 400))
    }

    func testThePrefixScanFindsEveryIdAndCompactionType() throws {
        func scan(_ text: String) -> LogTail.PrefixMentions? {
            Array(text.utf8).withUnsafeBufferPointer { LogTail.scanPrefix($0) }
        }
        XCTAssertEqual(scan(#"{"a":"m12","b":"m3.4"}"#)?.highest, MessageID.order(of: "m12"))
        XCTAssertEqual(scan(#"{"a":"m1\u0032\u0033"}"#)?.highest, MessageID.order(of: "m123"))
        XCTAssertEqual(scan(#"{"a":"\u006d7"}"#)?.highest, MessageID.order(of: "m7"))
        // Escaped quotes are inside a string: no token there.
        XCTAssertEqual(scan(#"{"a":"say \"m77\" twice","b":"m2"}"#)?.highest, MessageID.order(of: "m2"))
        XCTAssertEqual(scan(#"{"a":"x\\","b":"m5"}"#)?.highest, MessageID.order(of: "m5"))
        XCTAssertEqual(scan(#"{"type":"uncompaction"}"# + "\n" + #"{"a":1}"# + "\n" + #"{"type":"compaction"}"#)?.compactionLines.count, 2)
        XCTAssertEqual(scan(#"{"a":"not \"compaction\" here"}"#)?.compactionLines.count, 0)
    }

    /// The prefix is read a piece of whole lines at a time: whatever the piece's size (smaller
    /// than a line, so the buffer grows; a few lines; all of it), the scan finds what one scan of
    /// the whole finds, compaction lines at the same offsets.
    func testThePrefixReadInPiecesFindsWhatTheWholeFinds() throws {
        var again = summary
        again.last = "m60"
        let hidden = #"{"type":"message","v":1,"at":"2026-01-01T00:00:01.000Z","message":{"id":"m\u0039\u00399","conversation":"k3v9q2m8x7ad","role":"user","content":"hidden \"m1000\"","status":"complete","created":"2026-01-01T00:00:01.000Z"}}"#
        let path = try writeLog(exchanges(5) + [.compaction(summary), .uncompaction] + exchanges(30, from: 11) + [.compaction(again)] + exchanges(2, from: 71),
                                rawFirst: [hidden])
        let bytes = try Posix.Files.read(path: path, offset: 0, count: 1 << 20)
        let start = try XCTUnwrap(bytes.firstIndex(of: 0x0A)) + 1
        let whole = try XCTUnwrap(bytes.withUnsafeBufferPointer { LogTail.scanPrefix(UnsafeBufferPointer(rebasing: $0[start...])) })
        XCTAssertEqual(whole.highest, MessageID.order(of: "m999"))
        XCTAssertEqual(whole.compactionLines.count, 3)
        let fd = try Posix.Files.open(path, O_RDONLY)
        defer { Posix.Files.close(fd) }
        for piece in [1, 7, 64, 300, 1000, 4096, 1 << 20] {
            XCTAssertEqual(LogTail.scanPrefix(fd, offset: start, count: bytes.count - start, piece: piece), whole, "pieces of \(piece) bytes")
        }
        // Past the end of the file: unreadable, so undecided.
        XCTAssertNil(LogTail.scanPrefix(fd, offset: start, count: bytes.count - start + 10))
    }
}
