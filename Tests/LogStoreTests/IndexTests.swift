import Foundation
import XCTest

import ConfabProtocol
import EventLoop
@testable import LogStore
#if canImport(Glibc)
import Glibc
#endif

/// The summary folded as records are written, and the index that lets start-up skip reading logs.
final class LogSummaryTests: XCTestCase {
    private func fold(_ records: [LogRecord]) throws -> ReplayedConversation {
        let entries = ([.header(Fixture.header())] + records).enumerated().map { index, record in
            (record: record, at: Optional(Fixture.at(Int64(index) * 1000)))
        }
        return try XCTUnwrap(Replay.fold(entries))
    }

    func testAFinishedExchangeNeedsNothingResumed() throws {
        let state = try fold([
            .message(Fixture.user(1, "hello")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "Hi"),
            .replyFinished(Fixture.reply(2, "Hi", status: .complete)),
            .title("renamed"),
        ])
        XCTAssertEqual(state.summary.messageCount, state.messages.count)
        XCTAssertEqual(state.summary.messageCount, 2)
        XCTAssertEqual(state.summary.title, "renamed")
        XCTAssertEqual(state.summary.updated, state.updated)
        XCTAssertEqual(state.summary.updated, Fixture.at(5000))
        XCTAssertFalse(state.summary.needsResume)
    }

    func testAReplyLeftStreamingNeedsResuming() throws {
        let state = try fold([.message(Fixture.user(1, "hello")), .replyStarted(Fixture.reply(2, "", status: .streaming))])
        XCTAssertEqual(state.summary.messageCount, 2)
        XCTAssertTrue(state.summary.needsResume)
    }

    func testASendWithoutItsReplyNeedsResumingUntilALaterReplyExists() throws {
        var state = try fold([.message(Fixture.user(1, "a")), .replyFinished(Fixture.reply(2, "b", status: .complete)),
                              .message(Fixture.user(3, "c"))])
        XCTAssertTrue(state.summary.needsResume, "m3 waits for its reply m4")
        state = try fold([.message(Fixture.user(1, "a")), .message(Fixture.user(3, "c")),
                          .replyFinished(Fixture.reply(4, "d", status: .complete))])
        XCTAssertFalse(state.summary.needsResume, "m1's reply never started, and a later reply exists: not owed")
        XCTAssertEqual(state.summary.messageCount, 3)
    }

    func testAReplyFinishedWithoutAStartIsCountedOnce() throws {
        let state = try fold([.message(Fixture.user(1, "a")), .replyFinished(Fixture.reply(2, "", status: .failed)),
                              .replyStarted(Fixture.reply(4, "", status: .streaming)), .replyFinished(Fixture.reply(4, "x", status: .complete))])
        XCTAssertEqual(state.summary.messageCount, state.messages.count)
        XCTAssertEqual(state.summary.messageCount, 3)
    }
}

final class LogIndexTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var loop: Loop!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        loop = try Loop()
    }

    override func tearDown() {
        loop?.close()
        directory?.remove()
    }

    private func makeStore() throws -> LogStore {
        try LogStore(directory: directory.path + "/data", loop: loop, syncEnabled: false)
    }

    private func id(_ number: Int) -> String { "k3v9q2m8x7a" + String(Array("0123456789abcdefghjkmnpqrstvwxyz")[number]) }

    /// `count` conversations of one exchange each, the second renamed; the store stays open.
    private func populate(_ store: LogStore, count: Int) throws -> [ConversationLog] {
        var logs: [ConversationLog] = []
        for number in 0..<count {
            var result: Result<ConversationLog, StoreError>?
            store.create(Fixture.header(id: id(number), title: "t\(number)")) { result = $0 }
            loop.run()
            let log = try XCTUnwrap(result).get()
            try log.write([.message(Fixture.user(1, "hello", conversation: id(number))),
                           .replyFinished(Fixture.reply(2, "hi", status: .complete, conversation: id(number)))], at: Fixture.at(5000))
            if number == 1 { try log.write([.title("renamed")], at: Fixture.at(9000)) }
            logs.append(log)
        }
        return logs
    }

    private func summaries(_ opened: LogStore.Opened) -> [String: LogSummary] {
        var result: [String: LogSummary] = [:]
        for item in opened.items {
            var summary = item.log.summary
            summary.forgetFold()
            result[item.log.id] = summary
        }
        return result
    }

    private func expectedSummaries(_ logs: [ConversationLog]) -> [String: LogSummary] {
        var result: [String: LogSummary] = [:]
        for log in logs {
            var summary = log.summary
            summary.forgetFold()
            result[log.id] = summary
        }
        return result
    }

    func testAnUnchangedDirectoryIsListedFromTheIndexWithoutReadingALog() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()
        XCTAssertTrue(Files.exists(store.indexPath), "closing writes the index")

        let opened = try makeStore().openConversations()
        XCTAssertTrue(opened.problems.isEmpty, "\(opened.problems)")
        XCTAssertEqual(opened.fromIndex, 3)
        XCTAssertEqual(opened.read, 0)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        XCTAssertEqual(summaries(opened)[id(1)]?.title, "renamed")
        XCTAssertEqual(summaries(opened)[id(1)]?.messageCount, 2)
        XCTAssertTrue(opened.items.allSatisfy { !$0.log.isOpen && $0.conversation == nil }, "nothing is held open")
    }

    func testWithoutAnIndexEveryLogIsReadAndTheIndexWritten() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()
        unlink(store.indexPath)

        let second = try makeStore()
        let opened = second.openConversations()
        XCTAssertTrue(opened.problems.isEmpty, "\(opened.problems)")
        XCTAssertEqual(opened.fromIndex, 0)
        XCTAssertEqual(opened.read, 3)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        second.close()

        let third = try makeStore().openConversations()
        XCTAssertEqual(third.fromIndex, 3, "the index was written again")
        XCTAssertEqual(summaries(third), expectedSummaries(logs))
    }

    func testALogAppendedAfterTheIndexIsReadAgain() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()
        // Another writer (or a daemon that died before writing the index) appended to one log.
        Files.append(logs[2].path, Files.record(.message(Fixture.user(3, "more", conversation: id(2))), at: Fixture.at(20_000)))

        let opened = try makeStore().openConversations()
        XCTAssertTrue(opened.problems.isEmpty, "\(opened.problems)")
        XCTAssertEqual(opened.fromIndex, 2)
        XCTAssertEqual(opened.read, 1)
        let summary = try XCTUnwrap(summaries(opened)[id(2)])
        XCTAssertEqual(summary.messageCount, 3)
        XCTAssertEqual(summary.updated, Fixture.at(20_000))
        XCTAssertTrue(summary.needsResume, "m3 has no reply yet")
        let item = try XCTUnwrap(opened.items.first { $0.log.id == id(2) })
        XCTAssertEqual(item.conversation?.messages.count, 3, "a conversation with a reply owed is kept in memory")
        XCTAssertTrue(item.log.isOpen)
    }

    /// The index is read on another thread while the logs are `stat`ed: a log replaced by a file
    /// of the same size (another inode), or edited in place to the same size (another time), must
    /// still be read, and its summary come from the file.
    func testALogReplacedOrEditedToTheSameSizeIsReadAgain() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()
        let replaced = try String(contentsOfFile: logs[1].path, encoding: .utf8)
        XCTAssertTrue(replaced.contains("\"renamed\""))
        try replaced.replacingOccurrences(of: "\"renamed\"", with: "\"xenamed\"").write(toFile: logs[1].path + ".new", atomically: false, encoding: .utf8)
        XCTAssertEqual(rename(logs[1].path + ".new", logs[1].path), 0)
        let edited = try String(contentsOfFile: logs[0].path, encoding: .utf8)
        let fd = open(logs[0].path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let bytes = Array(edited.replacingOccurrences(of: "\"t0\"", with: "\"T0\"").utf8)
        XCTAssertEqual(bytes.count, Array(edited.utf8).count)
        XCTAssertEqual(pwrite(fd, bytes, bytes.count, 0), bytes.count)
        // A time surely not the one the index holds, however coarse the file system's clock.
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        XCTAssertEqual(futimens(fd, &times), 0)
        close(fd)

        let opened = try makeStore().openConversations()
        XCTAssertTrue(opened.problems.isEmpty, "\(opened.problems)")
        XCTAssertEqual(opened.fromIndex, 1)
        XCTAssertEqual(opened.read, 2)
        XCTAssertEqual(summaries(opened)[id(1)]?.title, "xenamed")
        XCTAssertEqual(summaries(opened)[id(0)]?.header.title, "T0")
        XCTAssertEqual(summaries(opened)[id(2)], expectedSummaries(logs)[id(2)])
    }

    func testATornLogIsReadAndCutBackAsWithoutAnIndex() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 2)
        store.close()
        let sizeBefore = Files.size(logs[0].path)
        Files.append(logs[0].path, "{\"type\":\"message\",\"v\":1,\"mess")

        let second = try makeStore()
        let opened = second.openConversations()
        XCTAssertEqual(opened.read, 1)
        XCTAssertEqual(opened.problems.count, 1, "\(opened.problems)")
        XCTAssertTrue(opened.problems.first?.message.hasPrefix("torn last line") == true, "\(opened.problems)")
        XCTAssertEqual(Files.size(logs[0].path), sizeBefore, "the torn tail is cut off")
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        second.close()

        let third = try makeStore().openConversations()
        XCTAssertTrue(third.problems.isEmpty, "\(third.problems)")
        XCTAssertEqual(third.fromIndex, 2)
    }

    func testAnUnreadableIndexMeansReadingTheLogs() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()

        // A line that is not an entry: only its log is read.
        var lines = Files.lines(store.indexPath)
        lines[2] = Array("{\"id\":".utf8)
        try Data(lines.joined(separator: [0x0A]) + [0x0A]).write(to: URL(fileURLWithPath: store.indexPath))
        var opened = try makeStore().openConversations()
        XCTAssertEqual(opened.fromIndex, 2)
        XCTAssertEqual(opened.read, 1)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        XCTAssertEqual(opened.problems.map(\.message), ["1 unreadable lines: their logs are read"])

        // Not an index at all.
        try Data("garbage\n".utf8).write(to: URL(fileURLWithPath: store.indexPath))
        opened = try makeStore().openConversations()
        XCTAssertEqual(opened.fromIndex, 0)
        XCTAssertEqual(opened.read, 3)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
    }

    func testAnIndexWriteCutShortByAKillIsCleanedUp() throws {
        let store = try makeStore()
        _ = try populate(store, count: 1)
        store.close()
        let leftover = store.indexPath + ".12345.7.tmp"
        try Data("[\"half an ind".utf8).write(to: URL(fileURLWithPath: leftover))
        let other = store.directory + "/notes.tmp"
        try Data("not ours".utf8).write(to: URL(fileURLWithPath: other))
        let opened = try makeStore().openConversations()
        XCTAssertEqual(opened.fromIndex, 1)
        XCTAssertFalse(Files.exists(leftover))
        XCTAssertTrue(Files.exists(other), "only the index's own temporary files are removed")
    }

    func testAnEntryWhoseLogIsGoneIsDropped() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 3)
        store.close()
        unlink(logs[0].path)

        let second = try makeStore()
        let opened = second.openConversations()
        XCTAssertEqual(opened.items.map(\.log.id), [id(1), id(2)])
        second.close()
        XCTAssertEqual(Files.lines(second.indexPath).count, 3, "format line and two entries")
    }

    func testAReplyLeftStreamingIsReadAtStartAndFinishedInterrupted() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 2)
        try logs[0].write([.message(Fixture.user(3, "again", conversation: id(0))),
                           .replyStarted(Fixture.reply(4, "", status: .streaming, conversation: id(0))),
                           .replyText(message: "m4", content: "part")])
        store.close()   // the index says it needs resuming (as it would be after a crash, stale)

        let second = try makeStore()
        let opened = second.openConversations()
        XCTAssertEqual(opened.fromIndex, 1)
        XCTAssertEqual(opened.read, 1)
        let item = try XCTUnwrap(opened.items.first { $0.log.id == id(0) })
        // Finished as interrupted and with no send owed, it needs nothing more: closed again.
        XCTAssertNil(item.conversation)
        XCTAssertFalse(item.log.isOpen)
        XCTAssertEqual(item.log.summary.messageCount, 4)
        XCTAssertFalse(item.log.summary.needsResume)
        let last = LogRecord(json: try JSON.parse(try XCTUnwrap(Files.lines(logs[0].path).last)))
        guard case .replyFinished(var finished)? = last else { return XCTFail("\(String(describing: last))") }
        // Its text was paid for: an estimate, whatever came before it.
        XCTAssertEqual(finished.usage?.isEstimated, true)
        XCTAssertEqual(finished.usage?.completionTokens, Usage.estimate(prompt: [], completion: "part").completionTokens)
        finished.usage = nil
        XCTAssertEqual(finished, Fixture.reply(4, "part", status: .interrupted, conversation: id(0)))
    }

    func testAClosedLogIsReadAgainOnTheThreadPoolAndKeepsAppending() throws {
        let store = try makeStore()
        _ = try populate(store, count: 1)
        store.close()

        let second = try makeStore()
        let opened = second.openConversations()
        let log = try XCTUnwrap(opened.items.first?.log)
        XCTAssertFalse(log.isOpen)
        var conversation: ReplayedConversation?
        var problems: [LoadProblem] = []
        second.read(log) { read, found in
            conversation = read
            problems = found
        }
        loop.run()
        XCTAssertTrue(problems.isEmpty, "\(problems)")
        XCTAssertEqual(conversation?.stored.count, 2, "read for where its messages are")
        XCTAssertEqual(try log.readMessages(conversation?.stored ?? []).map(\.content), ["hello", "hi"])
        XCTAssertTrue(log.isOpen)
        try log.write([.message(Fixture.user(3, "more", conversation: id(0)))], at: Fixture.at(30_000))
        XCTAssertEqual(log.summary.messageCount, 3, "the summary goes on folding after the read")
        XCTAssertEqual(log.summary.updated, Fixture.at(30_000))
        second.close()

        let third = try makeStore().openConversations()
        XCTAssertEqual(third.read, 1, "a send owed a reply is read at start")
        XCTAssertEqual(third.items.first?.log.summary.messageCount, 3)
    }

    func testAReadOfAVanishedLogFailsAndSaysWhy() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 1)
        store.close()
        let second = try makeStore()
        let log = try XCTUnwrap(second.openConversations().items.first?.log)
        unlink(logs[0].path)
        var conversation: ReplayedConversation?
        var problems: [LoadProblem] = []
        second.read(log) { read, found in
            conversation = read
            problems = found
        }
        loop.run()
        XCTAssertNil(conversation)
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems.first?.message.hasPrefix("cannot open") == true, "\(problems)")
        XCTAssertFalse(log.isOpen)
    }

    func testTheIndexIsWrittenOnTheThreadPoolAfterAChange() throws {
        let store = try makeStore()
        store.indexDelayMilliseconds = 0
        let logs = try populate(store, count: 2)
        // The index's timer does not keep a loop alive (the daemon's listener does): stand in for it.
        let daemon = Timer(loop: loop)
        daemon.start(after: 20) { daemon.close() }
        loop.run()
        XCTAssertTrue(Files.exists(store.indexPath))
        let opened = try makeStore().openConversations()
        XCTAssertEqual(opened.fromIndex, 2)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        store.close()
    }

    func testIndexEntriesRoundTrip() throws {
        let header = Fixture.header(title: "first \"quoted\" é")
        let entry = LogStore.IndexEntry(
            identity: FileIdentity(size: 1234, inode: 987_654_321, modifiedNanoseconds: 1_795_320_930_123_456_789),
            summary: LogSummary(header: header, title: "now\nthis", updated: Fixture.at(77), messageCount: 42, needsResume: true,
                                usage: UsageTotals(promptTokens: 100, completionTokens: 20, totalTokens: 120, estimatedReplies: 2)))
        let json = try JSON.parse(LogStore.encode(entry).bytes)
        XCTAssertEqual(LogStore.decode(json), entry)
        var noSystem = entry
        noSystem.summary.header.system = nil
        XCTAssertEqual(LogStore.decode(try JSON.parse(LogStore.encode(noSystem).bytes)), noSystem)
        XCTAssertNil(LogStore.decode(["id": "k3v9q2m8x7ad"]))
        XCTAssertNil(LogStore.decode(["k3v9q2m8x7ad", 1, 2]), "too few fields")
    }

    /// Start-up reads index lines straight from their bytes: it must take exactly the lines the
    /// tree decoder takes, and read them the same.
    func testLinesAreDecodedFromBytesAsFromTheTree() throws {
        var full = LogStore.IndexEntry(
            identity: FileIdentity(size: 1234, inode: 987_654_321, modifiedNanoseconds: 1_795_320_930_123_456_789),
            summary: LogSummary(header: Fixture.header(title: "first \"quoted\" é \u{1F600}"), title: "now\nthis", updated: Fixture.at(77),
                                messageCount: 42, needsResume: true,
                                usage: UsageTotals(promptTokens: 100, completionTokens: 20, totalTokens: 120, estimatedReplies: 2)))
        full.summary.header.forkedFrom = ForkOrigin(conversation: "k3v9q2m8x7ac", message: "m4")
        full.summary.header.provider = "claude"
        full.summary.header.profile = "coder"
        full.summary.header.params = SamplingParameters(temperature: 0.5, maxTokens: 300)
        full.summary.shares = [ConversationShare(uid: 1001, login: "bob", role: .write), ConversationShare(uid: 1002, login: "1002", role: .read)]
        var bare = full
        bare.summary.shares = []
        bare.summary.header.system = nil
        bare.summary.header.forkedFrom = nil
        bare.summary.header.provider = nil
        bare.summary.header.profile = nil
        bare.summary.header.params = SamplingParameters()
        bare.summary.usage = UsageTotals()
        var lines = [LogStore.encode(full).bytes, LogStore.encode(bare).bytes]
        let fields = try XCTUnwrap(LogStore.encode(full).array)
        // Every field replaced by a value of each other kind, plus lines of the wrong length.
        let others: [JSON] = [.null, .bool(true), .int(-3), .double(1.5), .double(7), .string("x"), .array([]), .object([:]),
                              .array([1, 2, 3, 4]), ["conversation": "k3v9q2m8x7ac", "message": "m1"], ["temperature": 9]]
        for position in fields.indices {
            for other in others {
                var changed = fields
                changed[position] = other
                lines.append(JSON.array(changed).bytes)
            }
        }
        lines.append(JSON.array(Array(fields.dropLast())).bytes)
        lines.append(JSON.array(fields + [.null]).bytes)
        lines += ["", " ", "[]", "{}", "null", "[\"k3v9q2m8x7ad\"", "garbage", " \(String(decoding: LogStore.encode(bare).bytes, as: UTF8.self)) ",
                  "\(String(decoding: LogStore.encode(bare).bytes, as: UTF8.self)) x"].map { Array($0.utf8) }
        var taken = 0
        for line in lines {
            let fromTree = (try? JSON.parse(line)).flatMap(LogStore.decode)
            let fromBytes = line.withUnsafeBufferPointer { LogStore.decode(line: $0) }
            XCTAssertEqual(fromBytes, fromTree, String(decoding: line, as: UTF8.self))
            if fromTree != nil { taken += 1 }
        }
        XCTAssertEqual(lines.first.flatMap { line in line.withUnsafeBufferPointer { LogStore.decode(line: $0) } }, full)
        XCTAssertGreaterThan(taken, 10, "the changes that still make an entry (a whole double, an empty title) are taken by both")
    }

    /// The index is written in id order and start-up walks it beside the sorted listing; an index
    /// put in another order by hand, or holding an id twice, still vouches for its logs.
    func testAnIndexOutOfOrderOrWithAnIdTwiceStillVouchesForItsLogs() throws {
        let store = try makeStore()
        let logs = try populate(store, count: 4)
        store.close()
        let text = try String(contentsOfFile: store.indexPath, encoding: .utf8)
        var lines = text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 5)
        // Reversed, with a stale copy of the first entry before its good one (the later line wins).
        var stale = try XCTUnwrap(JSON.parse(Array(lines[1].utf8)).array)
        stale[9] = .int(99)
        lines = [lines[0], String(decoding: JSON.array(stale).bytes, as: UTF8.self)] + lines[1...].reversed()
        try (lines.joined(separator: "\n") + "\n").write(toFile: store.indexPath, atomically: true, encoding: .utf8)

        let opened = try makeStore().openConversations()
        XCTAssertTrue(opened.problems.isEmpty, "\(opened.problems)")
        XCTAssertEqual(opened.fromIndex, 4)
        XCTAssertEqual(opened.read, 0)
        XCTAssertEqual(summaries(opened), expectedSummaries(logs))
        XCTAssertEqual(opened.items.map(\.log.id), (0..<4).map(id))
    }
}
