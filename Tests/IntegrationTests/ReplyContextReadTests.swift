import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A reply in a conversation read back from its log reads the records it sends on the thread
/// pool: while that read is held (the debug build's `CONFAB_TEST_ONLY_HOLD_MESSAGE_READS` FIFO),
/// the loop answers another client.
final class ReplyContextReadTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// Opens the FIFO for writing, which succeeds once the daemon's read has opened it to wait
    /// there: the read is under way. Gives up after 20 s (a guard, not a timing).
    private func openWhenReadWaits(_ fifo: String) throws -> Int32 {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 { return fd }
            XCTAssertEqual(errno, ENXIO, "no reader yet is the only reason to fail")
            usleep(2_000)
        }
        throw HarnessError(description: "the reply's context read never waited at the FIFO:\n\(harness.log())")
    }

    /// Two answered exchanges, then confabd started again with its reads of messages held at a
    /// FIFO: the conversation's messages are known by where they are in its log. Returns the
    /// conversation and the FIFO.
    private func storedConversationWithReadsHeld() throws -> (id: String, fifo: String) {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        for text in ["one", "two"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:\(text)]]")])
            _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        }
        client.close()
        XCTAssertNotNil(harness.stopDaemon())
        let fifo = harness.directory + "/hold-reads"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        var environment = ProcessInfo.processInfo.environment
        environment["CONFAB_TEST_ONLY_HOLD_MESSAGE_READS"] = fifo
        try harness.startDaemon(environment: environment)
        return (id, fifo)
    }

    func testTheLoopAnswersAnotherClientWhileAReplysContextIsRead() throws {
        let (id, fifo) = try storedConversationWithReadsHeld()

        let writer = try harness.client(name: "writer")
        try writer.call("conversation.attach", ["conversation": .string(id)])
        let requestsBefore = harness.upstreamRequests().count
        let sent = try writer.call("message.send", ["conversation": .string(id), "content": "[[reply:three]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let hold = try openWhenReadWaits(fifo)

        // The read is held on the thread pool: the loop answers someone else meanwhile.
        let other = try harness.client(name: "other")
        XCTAssertNotNil(try other.call("status")["version"])
        XCTAssertNotNil(try other.call("conversation.list")["conversations"])
        XCTAssertEqual(harness.upstreamRequests().count, requestsBefore, "nothing is asked before the context is read")

        Glibc.close(hold)
        XCTAssertEqual(try writer.awaitReply(reply).final["content"]?.string, "three")
        let sentTurns = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array).compactMap { $0["content"]?.string }
        XCTAssertEqual(sentTurns, ["[[reply:one]]", "one", "[[reply:two]]", "two", "[[reply:three]]"])
    }

    /// A summary in a conversation read back from its log reads the messages it covers on the
    /// thread pool too: while that read is held the loop answers another client, nothing is asked
    /// of the model, and a cancel then ends it with nothing stored; once the read goes on, the
    /// summary is asked for with every message of its range.
    func testTheLoopAnswersAnotherClientWhileASummarysRangeIsRead() throws {
        let (id, fifo) = try storedConversationWithReadsHeld()
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        let before = try String(contentsOfFile: log, encoding: .utf8)

        // Cancelled while its range is read: nothing asked, nothing stored.
        let owner = try harness.client(name: "asker")
        try owner.call("conversation.attach", ["conversation": .string(id)])
        let requestsBefore = harness.upstreamRequests().count
        try owner.sendRaw(RPC.request(id: .int(950), method: "conversation.compact", params: ["conversation": .string(id)]))
        var hold = try openWhenReadWaits(fifo)
        let other = try harness.client(name: "other")
        XCTAssertNotNil(try other.call("status")["version"])
        XCTAssertEqual(try other.call("generation.cancel", ["conversation": .string(id)])["cancelled"]?.string, "compaction")
        XCTAssertEqual(try owner.response(to: .int(950))["error"]?["code"]?.int, RPCError.conflict)
        Glibc.close(hold)
        XCTAssertEqual(harness.upstreamRequests().count, requestsBefore, "nothing was asked")
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8), before)

        // Held, then let go: the summary covers the whole range.
        try owner.sendRaw(RPC.request(id: .int(951), method: "conversation.compact", params: ["conversation": .string(id), "focus": "[[reply:short]]"]))
        hold = try openWhenReadWaits(fifo)
        XCTAssertNotNil(try other.call("conversation.list")["conversations"])
        XCTAssertEqual(harness.upstreamRequests().count, requestsBefore, "nothing is asked before the range is read")
        Glibc.close(hold)
        let answer = try owner.response(to: .int(951), timeout: 20)
        XCTAssertEqual(answer["result"]?["compaction"]?["summary"]?.string, "short", "\(answer)")
        let asked = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array).compactMap { $0["content"]?.string }
        XCTAssertEqual(Array(asked.prefix(4)), ["[[reply:one]]", "one", "[[reply:two]]", "two"])
    }
}
