import XCTest

@testable import Broker
import ConfabProtocol
#if canImport(Glibc)
import Glibc
#endif

/// What `StreamingTests` checked of the broker itself (fan-out, late attach, disconnects,
/// cancelling, the conversation methods, history paging, clients seeing each other), in-process:
/// the model's stream is scripted here, word by word, where the fake upstream sent it over HTTP.
final class InProcessStreamingTests: XCTestCase {
    private var broker: InProcessBroker!
    private var clients: [InProcessClient] = []

    override func setUpWithError() throws { broker = try InProcessBroker() }
    override func tearDown() {
        for client in clients { client.close() }
        broker?.close()
    }

    private func client(name: String = "tester") throws -> InProcessClient {
        let client = try InProcessClient(broker, name: name)
        clients.append(client)
        return client
    }

    /// The stream the upstream was asked for after the first `before`.
    private func stream(after before: Int) throws -> ScriptedUpstream.Stream {
        broker.turn(until: { broker.upstream.streams.count > before })
        return try XCTUnwrap(broker.upstream.streams.dropFirst(before).first, "the upstream was asked for no reply")
    }

    /// Sends `words` words (`w1 w2 …`) from `from`, `chunk` words a delta.
    private func sendWords(_ stream: ScriptedUpstream.Stream, _ range: ClosedRange<Int>, chunk: Int = 4) {
        let words = range.map { "w\($0)" }
        var index = 0
        while index < words.count {
            let piece = words[index..<min(index + chunk, words.count)].joined(separator: " ")
            stream.send((index + range.lowerBound == 1 ? "" : " ") + piece)
            index += chunk
        }
    }

    func testThreeAttachedClientsSeeIdenticalDeltasAndFinalMessage() throws {
        let clients = try (0..<3).map { try client(name: "client\($0)") }
        let id = try broker.createConversation(clients[0])
        for client in clients { try client.call("conversation.attach", ["conversation": .string(id)]) }
        let sent = try clients[2].call("message.send", ["conversation": .string(id), "content": "hi"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        XCTAssertEqual(reply, "m2")
        let stream = try stream(after: 0)
        sendWords(stream, 1...30)
        stream.finish()
        var finals: [JSON] = []
        var deltaLists: [[String]] = []
        for client in clients {
            let (notes, final) = try client.awaitReply(reply)
            finals.append(final)
            deltaLists.append(notes.filter { $0.method == "message.delta" && $0.params["message"]?.string == reply }
                .compactMap { $0.params["content"]?.string })
            // Every client saw the user message and the reply's creation, in that order.
            let created = notes.filter { $0.method == "message.created" }.compactMap { $0.params["message"]?["id"]?.string }
            XCTAssertEqual(created, ["m1", "m2"])
        }
        let expected = (1...30).map { "w\($0)" }.joined(separator: " ")
        XCTAssertEqual(finals[0]["content"]?.string, expected)
        XCTAssertEqual(finals[0]["status"]?.string, "complete")
        XCTAssertEqual(finals[0]["finish_reason"]?.string, "stop")
        XCTAssertNotNil(finals[0]["usage"]?["total_tokens"]?.int)
        XCTAssertEqual(finals[0], finals[1])
        XCTAssertEqual(finals[1], finals[2])
        XCTAssertGreaterThan(deltaLists[0].count, 5)
        XCTAssertEqual(deltaLists[0], deltaLists[1])
        XCTAssertEqual(deltaLists[1], deltaLists[2])
        XCTAssertEqual(deltaLists[0].joined(), expected)
    }

    func testLateAttachMidReplyEndsWithTheFullText() throws {
        let asker = try client()
        let id = try broker.createConversation(asker)
        try asker.call("conversation.attach", ["conversation": .string(id)])
        // Part of the reply streams, then the rest only once the second client has attached.
        let sent = try asker.call("message.send", ["conversation": .string(id), "content": "go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let stream = try stream(after: 0)
        sendWords(stream, 1...12)
        _ = try asker.collect(until: { method, _ in method == "message.delta" })
        _ = try asker.collect(until: { method, _ in method == "message.delta" })
        let late = try client(name: "late")
        let attached = try late.call("conversation.attach", ["conversation": .string(id)])
        sendWords(stream, 13...60)
        stream.finish()
        let pending = try XCTUnwrap(attached["pending"])
        XCTAssertEqual(pending["id"]?.string, reply)
        XCTAssertEqual(pending["status"]?.string, "streaming")
        let (notes, final) = try late.awaitReply(reply)
        let rebuilt = (pending["content"]?.string ?? "")
            + notes.filter { $0.method == "message.delta" && $0.params["message"]?.string == reply }.compactMap { $0.params["content"]?.string }.joined()
        XCTAssertEqual(rebuilt, final["content"]?.string)
        XCTAssertEqual(rebuilt, (1...60).map { "w\($0)" }.joined(separator: " "))
        // The attached messages exclude the reply in flight.
        XCTAssertEqual(attached["messages"]?.array?.compactMap { $0["id"]?.string }, ["m1"])
    }

    func testReplyContinuesWhenTheAskingClientDisconnects() throws {
        let watcher = try client(name: "watcher")
        let id = try broker.createConversation(watcher)
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let asker = try InProcessClient(broker, name: "asker")
        let sent = try asker.call("message.send", ["conversation": .string(id), "content": "go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let stream = try stream(after: 0)
        sendWords(stream, 1...8)
        _ = try watcher.collect(until: { method, _ in method == "message.delta" })
        asker.close()
        // The broker hears of the close before the rest of the reply.
        broker.turn(until: { false }, limit: 200)
        sendWords(stream, 9...40)
        stream.finish()
        let (_, final) = try watcher.awaitReply(reply)
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["content"]?.string, (1...40).map { "w\($0)" }.joined(separator: " "))
        let history = try watcher.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.last?["content"], final["content"])
    }

    func testCancelKeepsThePartialTextAsCancelled() throws {
        let client = try client()
        let id = try broker.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let stream = try stream(after: 0)
        sendWords(stream, 1...20)
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        let cancelled = try client.call("generation.cancel", ["conversation": .string(id)])
        XCTAssertEqual(cancelled["cancelled"]?.string, reply)
        XCTAssertTrue(stream.call.isCancelled, "the upstream request is stopped")
        sendWords(stream, 21...500)
        let (notes, final) = try client.awaitReply(reply)
        XCTAssertEqual(notes.last?.method, "message.completed")
        XCTAssertEqual(final["status"]?.string, "cancelled")
        let text = try XCTUnwrap(final["content"]?.string)
        XCTAssertTrue(text.hasPrefix("w1 w2"), text)
        XCTAssertFalse(text.hasSuffix("w500"))
        XCTAssertEqual(try client.call("generation.cancel", ["conversation": .string(id)])["cancelled"], .null)
        // The conversation stays usable.
        XCTAssertEqual(try broker.ask(client, id, "again", answer: "after")["content"]?.string, "after")
    }

    func testListGetRenameDelete() throws {
        let client = try client()
        // Apart by more than the list's millisecond times, so no two tie (ties go by id, which
        // is random): created in the same millisecond, "newer" came first only half the time.
        let older = try broker.createConversation(client, title: "older")
        usleep(5000)
        let newer = try broker.createConversation(client, title: "newer")
        usleep(5000)
        var list = try client.call("conversation.list")["conversations"]?.array?.compactMap { $0["id"]?.string }
        XCTAssertEqual(list, [newer, older])
        // Activity moves a conversation to the top.
        let sent = try client.call("message.send", ["conversation": .string(older), "content": "x"])
        XCTAssertNotNil(sent["reply"])
        list = try client.call("conversation.list")["conversations"]?.array?.compactMap { $0["id"]?.string }
        XCTAssertEqual(list, [older, newer])
        XCTAssertEqual(try client.call("conversation.list", ["limit": 1])["conversations"]?.array?.count, 1)

        let watcher = try self.client(name: "watcher")
        try watcher.call("conversation.attach", ["conversation": .string(newer), "history": 0])
        let renamed = try client.call("conversation.rename", ["conversation": .string(newer), "title": "renamed"])
        XCTAssertEqual(renamed["conversation"]?["title"]?.string, "renamed")
        let update = try watcher.collect(until: { method, _ in method == "conversation.updated" })
        XCTAssertEqual(update.last?.params["info"]?["title"]?.string, "renamed")
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(newer)])["conversation"]?["title"]?.string, "renamed")

        try client.call("conversation.delete", ["conversation": .string(newer)])
        let deleted = try watcher.collect(until: { method, _ in method == "conversation.deleted" })
        XCTAssertEqual(deleted.last?.params["conversation"]?.string, newer)
        XCTAssertNotEqual(access(broker.dataDirectory + "/conversations/\(newer).jsonl", F_OK), 0, "the log is gone")
        XCTAssertThrowsError(try client.call("conversation.get", ["conversation": .string(newer)])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.notFound)
        }
    }

    func testHistoryPagesBackwards() throws {
        let client = try client()
        let id = try broker.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        for n in 1...3 {
            _ = try broker.ask(client, id, "[[reply:r\(n)]]", answer: "r\(n)")
        }
        let page1 = try client.call("conversation.history", ["conversation": .string(id), "limit": 4])
        XCTAssertEqual(page1["messages"]?.array?.compactMap { $0["id"]?.string }, ["m3", "m4", "m5", "m6"])
        XCTAssertEqual(page1["more"], .bool(true))
        let page2 = try client.call("conversation.history", ["conversation": .string(id), "limit": 4, "before": "m3"])
        XCTAssertEqual(page2["messages"]?.array?.compactMap { $0["id"]?.string }, ["m1", "m2"])
        XCTAssertEqual(page2["more"], .bool(false))
        let attached = try client.call("conversation.attach", ["conversation": .string(id), "history": 2])
        XCTAssertEqual(attached["messages"]?.array?.compactMap { $0["content"]?.string }, ["[[reply:r3]]", "r3"])
    }

    /// On the broker's own connection, the only one: `status` counts it alone.
    func testHelloAndStatus() throws {
        let hello = try broker.call(.hello, ["client": "x", "name": "Ana"])
        XCTAssertEqual(hello["server"]?.string, "confabd")
        XCTAssertEqual(hello["protocol"]?.int, 1)
        XCTAssertEqual(hello["user"]?["uid"]?.int, Int(getuid()))
        XCTAssertEqual(hello["user"]?["name"]?.string, "Ana")
        let id = try XCTUnwrap(try broker.call(.conversationCreate, ["title": "test"])["conversation"]?["id"]?.string)
        let sent = try broker.call(.messageSend, ["conversation": .string(id), "content": "who"])
        XCTAssertEqual(sent["message"]?["author"]?["name"]?.string, "Ana")
        XCTAssertEqual(sent["message"]?["author"]?["uid"]?.int, Int(getuid()))
        XCTAssertEqual(sent["message"]?["author"]?["client_id"], hello["client_id"])
        let status = try broker.call(.status)
        XCTAssertEqual(status["conversations"]?.int, 1)
        XCTAssertEqual(status["clients"]?.int, 1)
        XCTAssertNotNil(status["uptime_seconds"]?.int)
    }

    func testClientsSeeEachOtherAttachAndDetach() throws {
        let first = try client(name: "first")
        let id = try broker.createConversation(first)
        try first.call("conversation.attach", ["conversation": .string(id)])
        let second = try InProcessClient(broker, name: "second")
        let attached = try second.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(attached["clients"]?.array?.compactMap { $0["name"]?.string }, ["first"])
        let joined = try first.collect(until: { method, _ in method == "client.attached" })
        XCTAssertEqual(joined.last?.params["client"]?["name"]?.string, "second")
        second.close()
        let left = try first.collect(until: { method, _ in method == "client.detached" })
        XCTAssertEqual(left.last?.params["client"]?["name"]?.string, "second")
    }

    /// A history page of a MiB or more starts a burst (large blocks reused from the heap), and
    /// the burst ends, giving the heap's free memory back, once no large answer has come for a while.
    func testALargePageStartsABurstThatEndsWhenNoLargeAnswerFollows() throws {
        let client = try client()
        let id = try broker.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let reply = try broker.ask(client, id, "a long answer, please", answer: String(repeating: "word ", count: 220_000))
        let answers = broker.broker.largeAnswers
        XCTAssertFalse(answers.inBurst, "a reply streamed is no large answer")

        let small = try client.call("conversation.history", ["conversation": .string(id), "limit": 1, "before": .string(try XCTUnwrap(reply["id"]?.string))])
        XCTAssertEqual(small["messages"]?.array?.count, 1)
        XCTAssertEqual(answers.started, 0, "a page of a few bytes starts no burst")

        let page = try client.call("conversation.history", ["conversation": .string(id), "limit": 2])
        XCTAssertEqual(page["messages"]?.array?.last?["content"]?.string?.utf8.count, 1_100_000)
        XCTAssertEqual(answers.started, 1, "the large page started a burst")
        broker.turn(until: { !answers.inBurst }, limit: .max)
        XCTAssertFalse(answers.inBurst)
        XCTAssertEqual(answers.ended, 1, "it ended once no large answer came")
    }
}
