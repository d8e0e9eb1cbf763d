import XCTest

import ConfabProtocol
import EventLoop
@testable import LogStore

/// A log read for where its messages are (`stored`), then its messages read back from those
/// places, says exactly what the full read says.
final class LogOutlineTests: XCTestCase {
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

    /// Writes `records` after a header into a new log and closes it.
    private func writeLog(_ records: [LogRecord], header: ConversationHeader = Fixture.header()) throws -> (LogStore, ConversationLog) {
        let store = try makeStore()
        var created: Result<ConversationLog, StoreError>?
        store.create(header) { created = $0 }
        loop.run()
        let log = try XCTUnwrap(created).get()
        for (index, record) in records.enumerated() { try log.write([record], at: Fixture.at(Int64(100_000 + index))) }
        log.close()
        return (store, log)
    }

    /// The outlined read and its messages read back, beside the full read of the same file.
    private func bothReads(_ store: LogStore, _ log: ConversationLog) throws -> (outlined: ReplayedConversation, messages: [Message], full: ReplayedConversation) {
        let full = try XCTUnwrap(LogStore.read(id: log.id, path: log.path).conversation)
        var outlined: ReplayedConversation?
        store.read(log) { conversation, _ in outlined = conversation }
        loop.run()
        let conversation = try XCTUnwrap(outlined)
        return (conversation, try log.readMessages(conversation.stored), full)
    }

    private var withTools: Message {
        var message = Fixture.reply(4, "", status: .complete)
        message.toolCalls = [ToolCall(id: "call_1", name: "get_time", arguments: "{\"zone\":\"UTC\"}")]
        message.finishReason = "tool_calls"
        return message
    }

    private var toolResult: Message {
        Message(id: "m4.1", conversation: Fixture.conversation, role: .tool, content: "12:00", status: .complete,
                created: Fixture.at(4500), tool: ToolResult(callID: "call_1", name: "get_time"))
    }

    func testMessagesReadBackFromTheirPlacesAreTheFullReadsMessages() throws {
        var continued = Fixture.reply(6, "cut off", status: .complete)
        continued.finishReason = "length"
        var continuedAgain = Fixture.reply(6, "cut off, and then the rest", status: .complete)
        continuedAgain.usage = Usage(promptTokens: 20, completionTokens: 9, totalTokens: 29)
        let (store, log) = try writeLog([
            .message(Fixture.user(1, "first \"quoted\" line\nand a second ✓")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "Hi"),
            .replyFinished(Fixture.reply(2, "Hi there", status: .complete)),
            .title("renamed"),
            .message(Fixture.user(3, "what time is it?")),
            .replyStarted(Fixture.reply(4, "", status: .streaming)),
            .replyFinished(withTools),
            .replyStarted(toolResult),
            .replyFinished(toolResult),
            .superseded(message: "m4", by: "m7"),
            .superseded(message: "m4.1", by: "m7"),
            .message(Fixture.user(5, "go on")),
            .replyStarted(Fixture.reply(6, "", status: .streaming)),
            .replyFinished(continued),
            .replyStarted(continued),
            .replyFinished(continuedAgain),
            .settings(ConversationSettings(model: "other-model")),
        ])
        let (outlined, messages, full) = try bothReads(store, log)
        XCTAssertEqual(outlined.messages, [], "an outlined read holds no messages")
        XCTAssertEqual(outlined.stored.map(\.id), ["m1", "m2", "m3", "m4", "m4.1", "m5", "m6"])
        XCTAssertEqual(messages, full.messages)
        XCTAssertEqual(messages.first?.content, "first \"quoted\" line\nand a second ✓")
        XCTAssertEqual(messages.last?.content, "cut off, and then the rest", "the latest record of a message is the one read")
        XCTAssertEqual(messages.filter { $0.supersededBy == "m7" }.map(\.id), ["m4", "m4.1"], "later records' supersession is kept")
        XCTAssertEqual(outlined.stored.map(\.supersededBy), full.messages.map(\.supersededBy))
        XCTAssertEqual(outlined.summary, full.summary)
        XCTAssertEqual(outlined.title, "renamed")
        XCTAssertEqual(outlined.header, full.header)
        XCTAssertEqual(outlined.updated, full.updated)
        XCTAssertEqual(outlined.owedReplies, full.owedReplies)
        XCTAssertEqual(outlined.owedReplies, ["m7"], "the regenerated reply that never started is owed")
        // A page, read alone, is the same messages.
        XCTAssertEqual(try log.readMessages(Array(outlined.stored.suffix(2))), Array(full.messages.suffix(2)))
        XCTAssertEqual(try log.readMessages([outlined.stored[0]]), [full.messages[0]])
    }

    /// Records the full parse refuses or reads in its own way are refused and read the same way
    /// by the outline's reader of message records (which leaves what it is unsure of to it).
    func testOddMessageRecordsAreJudgedAsTheFullReadJudgesThem() throws {
        let (store, log) = try writeLog([.message(Fixture.user(1, "fine"))])
        let message = #""id":"m2","conversation":"k3v9q2m8x7ad","role":"user","status":"complete","created":"2026-11-19T10:15:31.123Z""#
        let digest = String(repeating: "a", count: 64)
        for line in [
            #"{"type":"message","v":1,"at":"2026-11-19T10:16:00.000Z","message":{\#(message),"content":5}}"#,
            #"{"type":"message","v":1,"at":"2026-11-19T10:16:00.000Z","message":{\#(message)}}"#,
            #"{"type":"message","v":2,"at":"2026-11-19T10:16:00.000Z","message":{\#(message),"content":"v2"}}"#,
            #"{"type":"message","v":1,"message":{\#(message),"content":"twice","content":7}}"#,
            #"{"type":"message","type":"title","v":1,"message":{\#(message),"content":"type twice"}}"#,
            #"{"type":"message","v":1,"message":{"id":"m02","conversation":"c","role":"user","content":"","status":"complete","created":"2026-11-19T10:15:31.123Z"}}"#,
            #"{"type":"message","v":1,"message":{"id":"m3","conversation":"c","role":"robot","content":"","status":"complete","created":"2026-11-19T10:15:31.123Z"}}"#,
            #"{"type":"message","v":1,"message":{"id":"m3","conversation":"c","role":"user","content":"","status":"complete","created":"yesterday"}}"#,
            #"{"type":"message","v":1,"message":"m3"}"#,
            #"{"type":"message","v":1,"message":{\#(message),"content":"bad \u12"}}"#,
            #"{"type":"message","v":1,"message":{\#(message),"content":"trailing"}} x"#,
            #"{"type":"reply.finished","v":1.0,"at":"2026-11-19T10:17:00.000Z","message":{"id":"m4","conversation":"c","role":"assistant","content":"paid","status":"complete","created":"2026-11-19T10:15:31.123Z","superseded_by":"nope","usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7},"attachments":[{"sha256":"\#(digest)"}]}}"#,
            #"{"v":1,"message":{"id":"m5","conversation":"c","role":"user","content":"late type","status":"complete","created":"2026-11-19T10:15:31.123Z","attachments":[{"sha256":"\#(digest)"}]},"type":"message","at":"2026-11-19T10:18:00.000Z"}"#,
        ] {
            Files.append(log.path, line + "\n")
        }
        let full = LogStore.read(id: log.id, path: log.path)
        let fullConversation = try XCTUnwrap(full.conversation)
        var outlined: ReplayedConversation?
        var problems: [LoadProblem] = []
        store.read(log) { conversation, found in
            outlined = conversation
            problems = found
        }
        loop.run()
        let conversation = try XCTUnwrap(outlined)
        XCTAssertEqual(problems.map(\.description), full.problems.map(\.description))
        XCTAssertEqual(problems.count, 9, problems.map(\.description).joined(separator: "\n"))
        XCTAssertEqual(try log.readMessages(conversation.stored), fullConversation.messages)
        XCTAssertEqual(fullConversation.messages.map(\.content), ["fine", "type twice", "paid", "late type"])
        XCTAssertEqual(conversation.summary, fullConversation.summary)
        XCTAssertEqual(conversation.summary.usage.totalTokens, 7)
        XCTAssertEqual(conversation.summary.blobs, [digest])
        XCTAssertEqual(conversation.updated, fullConversation.updated)
    }

    func testALogWithAReplyLeftStreamingIsReadInFull() throws {
        let (store, log) = try writeLog([
            .message(Fixture.user(1, "hello")),
            .replyStarted(Fixture.reply(2, "", status: .streaming)),
            .replyText(message: "m2", content: "half a rep"),
        ])
        var read: ReplayedConversation?
        store.read(log) { conversation, _ in read = conversation }
        loop.run()
        let conversation = try XCTUnwrap(read)
        XCTAssertEqual(conversation.stored, [], "its text is in reply.text records: the full read finishes it")
        XCTAssertEqual(conversation.messages.map(\.content), ["hello", "half a rep"])
        XCTAssertEqual(conversation.messages.last?.status, .interrupted)
    }

    func testATornTailIsCutAndTheRestOutlined() throws {
        let (store, log) = try writeLog([.message(Fixture.user(1, "kept"))])
        Files.append(log.path, "{\"type\":\"message\",\"v\":1,\"mess")
        var read: ReplayedConversation?
        var problems: [LoadProblem] = []
        store.read(log) { conversation, found in
            read = conversation
            problems = found
        }
        loop.run()
        let conversation = try XCTUnwrap(read)
        XCTAssertEqual(try log.readMessages(conversation.stored).map(\.content), ["kept"])
        XCTAssertEqual(problems.map(\.message).filter { $0.hasPrefix("torn last line") }.count, 1)
        XCTAssertEqual(Files.size(log.path), Int(log.byteCount), "the torn tail is cut off")
    }

    func testARecordThatIsNotWhereTheOutlineSaysIsAStorageError() throws {
        let (store, log) = try writeLog([.message(Fixture.user(1, "hello"))])
        var read: ReplayedConversation?
        store.read(log) { conversation, _ in read = conversation }
        loop.run()
        var place = try XCTUnwrap(read?.stored.first)
        place = StoredMessage(id: "m2", order: MessageOrder(sequence: 2), role: place.role, status: place.status,
                              supersededBy: nil, offset: place.offset, length: place.length)
        XCTAssertThrowsError(try log.readMessages([place]))
    }
}
