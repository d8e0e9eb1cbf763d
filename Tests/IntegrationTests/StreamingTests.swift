import ConfabProtocol
import Foundation
import XCTest

/// The real confabd against the fake upstream: fan-out, late attach, disconnects, queueing, context.
final class StreamingTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testThreeAttachedClientsSeeIdenticalDeltasAndFinalMessage() throws {
        let clients = try (0..<3).map { try harness.client(name: "client\($0)") }
        let id = try harness.createConversation(clients[0])
        for client in clients { try client.call("conversation.attach", ["conversation": .string(id)]) }
        let sent = try clients[2].call("message.send", ["conversation": .string(id), "content": "[[words:30]] [[chunk:4]] hi"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        XCTAssertEqual(reply, "m2")
        var finals: [JSON] = []
        var deltaLists: [[String]] = []
        for client in clients {
            let (notes, final) = try client.awaitReply(reply)
            finals.append(final)
            deltaLists.append(RPCClient.deltas(notes, for: reply))
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
        let asker = try harness.client()
        let id = try harness.createConversation(asker)
        try asker.call("conversation.attach", ["conversation": .string(id)])
        // Part of the reply streams, then it is held until the second client has attached.
        let sent = try asker.call("message.send", ["conversation": .string(id), "content": "[[words:60]] [[delay:15]] [[hold:5 late]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try asker.collect(until: { method, _ in method == "message.delta" })
        _ = try asker.collect(until: { method, _ in method == "message.delta" })
        let late = try harness.client(name: "late")
        let attached = try late.call("conversation.attach", ["conversation": .string(id)])
        try harness.releaseUpstream("late")
        let pending = try XCTUnwrap(attached["pending"])
        XCTAssertEqual(pending["id"]?.string, reply)
        XCTAssertEqual(pending["status"]?.string, "streaming")
        let (notes, final) = try late.awaitReply(reply)
        let rebuilt = (pending["content"]?.string ?? "") + RPCClient.deltas(notes, for: reply).joined()
        XCTAssertEqual(rebuilt, final["content"]?.string)
        XCTAssertEqual(rebuilt, (1...60).map { "w\($0)" }.joined(separator: " "))
        // The attached messages exclude the reply in flight.
        XCTAssertEqual(attached["messages"]?.array?.compactMap { $0["id"]?.string }, ["m1"])
    }

    func testReplyContinuesWhenTheAskingClientDisconnects() throws {
        let watcher = try harness.client(name: "watcher")
        let id = try harness.createConversation(watcher)
        try watcher.call("conversation.attach", ["conversation": .string(id)])
        let asker = try harness.client(name: "asker")
        let sent = try asker.call("message.send", ["conversation": .string(id), "content": "[[words:40]] [[delay:10]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try watcher.collect(until: { method, _ in method == "message.delta" })
        asker.close()
        let (_, final) = try watcher.awaitReply(reply)
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["content"]?.string, (1...40).map { "w\($0)" }.joined(separator: " "))
        let history = try watcher.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.last?["content"], final["content"])
    }

    func testAReplyWithNoTextLeavesTheContextAlternatingUserAndAssistant() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // A reply that failed before any text (or was cancelled before its first delta) is sent
        // back as an empty assistant turn: left out, it would put two user turns in a row, which
        // chat APIs refuse or misread.
        let failed = try client.call("message.send", ["conversation": .string(id), "content": "first [[status:400]]"])
        let (_, failedFinal) = try client.awaitReply(try XCTUnwrap(failed["reply"]?.string))
        XCTAssertEqual(failedFinal["status"]?.string, "failed")
        let asked = try client.call("message.send", ["conversation": .string(id), "content": "[[context]] second"])
        let (_, final) = try client.awaitReply(try XCTUnwrap(asked["reply"]?.string))
        XCTAssertEqual(final["content"]?.string, "context: user assistant user | first [[status:400]] /  / [[context]] second")
        let messages = try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array)
        XCTAssertEqual(messages.compactMap { $0["role"]?.string }, ["user", "assistant", "user"])
        XCTAssertEqual(messages[1]["content"]?.string, "")
    }

    /// llama.cpp's server sends no usage even when asked: the reply then carries an estimate,
    /// marked `estimated`, so token totals still work. Reported usage is never marked.
    func testAReplyWithoutUsageFromTheUpstreamGetsAnEstimateMarkedAsSuch() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let content = "[[reply:hello there]] [[no-usage]]"
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let usage = try XCTUnwrap(try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final["usage"])
        XCTAssertEqual(usage["estimated"]?.bool, true)
        XCTAssertEqual(usage["completion_tokens"]?.int, 3)
        XCTAssertEqual(usage["prompt_tokens"]?.int, 3 + 4 + (content.utf8.count + 3) / 4)
        XCTAssertEqual(usage["total_tokens"]?.int, (usage["prompt_tokens"]?.int ?? 0) + 3)

        let reported = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:hi]]"])
        let real = try XCTUnwrap(try client.awaitReply(try XCTUnwrap(reported["reply"]?.string)).final["usage"])
        XCTAssertNil(real["estimated"])
        XCTAssertNotNil(real["total_tokens"]?.int)
    }

    func testSendsQueueInOrderAndContextCarriesEarlierTurns() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client, system: "You are terse.")
        try client.call("conversation.attach", ["conversation": .string(id)])
        let first = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]] [[delay:20]]"])
        let second = try client.call("message.send", ["conversation": .string(id), "content": "[[context]]"])
        XCTAssertEqual(first["reply"]?.string, "m2")
        XCTAssertEqual(second["message"]?["id"]?.string, "m3")
        XCTAssertEqual(second["reply"]?.string, "m4")
        let (_, firstFinal) = try client.awaitReply("m2")
        XCTAssertEqual(firstFinal["content"]?.string, "one")
        let (_, secondFinal) = try client.awaitReply("m4")
        let text = try XCTUnwrap(secondFinal["content"]?.string)
        XCTAssertTrue(text.hasPrefix("context: system user assistant user |"), text)
        XCTAssertTrue(text.contains("You are terse."), text)
        XCTAssertTrue(text.contains(" / one / "), text)
        // What went upstream: streaming, usage requested, the conversation's model.
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 2)
        let body = try XCTUnwrap(requests.last?["body"])
        XCTAssertEqual(body["stream"], .bool(true))
        XCTAssertEqual(body["stream_options"]?["include_usage"], .bool(true))
        XCTAssertEqual(body["model"]?.string, "fake-model")
        XCTAssertEqual(body["messages"]?.array?.count, 4)
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.compactMap { $0["id"]?.string }, ["m1", "m2", "m3", "m4"])
    }

    func testCancelKeepsThePartialTextAsCancelled() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:500]] [[delay:10]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        let cancelled = try client.call("generation.cancel", ["conversation": .string(id)])
        XCTAssertEqual(cancelled["cancelled"]?.string, reply)
        let (notes, final) = try client.awaitReply(reply)
        XCTAssertEqual(notes.last?.method, "message.completed")
        XCTAssertEqual(final["status"]?.string, "cancelled")
        let text = try XCTUnwrap(final["content"]?.string)
        XCTAssertTrue(text.hasPrefix("w1 w2"), text)
        XCTAssertFalse(text.hasSuffix("w500"))
        XCTAssertEqual(try client.call("generation.cancel", ["conversation": .string(id)])["cancelled"], .null)
        // The conversation stays usable.
        let next = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:after]]"])
        XCTAssertEqual(try client.awaitReply(next["reply"]!.string!).final["content"]?.string, "after")
    }

    func testListGetRenameDelete() throws {
        let client = try harness.client()
        let older = try harness.createConversation(client, title: "older")
        let newer = try harness.createConversation(client, title: "newer")
        var list = try client.call("conversation.list")["conversations"]?.array?.compactMap { $0["id"]?.string }
        XCTAssertEqual(list, [newer, older])
        // Activity moves a conversation to the top.
        let sent = try client.call("message.send", ["conversation": .string(older), "content": "[[reply:x]]"])
        XCTAssertNotNil(sent["reply"])
        list = try client.call("conversation.list")["conversations"]?.array?.compactMap { $0["id"]?.string }
        XCTAssertEqual(list, [older, newer])
        XCTAssertEqual(try client.call("conversation.list", ["limit": 1])["conversations"]?.array?.count, 1)

        let watcher = try harness.client(name: "watcher")
        try watcher.call("conversation.attach", ["conversation": .string(newer), "history": 0])
        let renamed = try client.call("conversation.rename", ["conversation": .string(newer), "title": "renamed"])
        XCTAssertEqual(renamed["conversation"]?["title"]?.string, "renamed")
        let update = try watcher.collect(until: { method, _ in method == "conversation.updated" })
        XCTAssertEqual(update.last?.params["info"]?["title"]?.string, "renamed")
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(newer)])["conversation"]?["title"]?.string, "renamed")

        try client.call("conversation.delete", ["conversation": .string(newer)])
        let deleted = try watcher.collect(until: { method, _ in method == "conversation.deleted" })
        XCTAssertEqual(deleted.last?.params["conversation"]?.string, newer)
        XCTAssertFalse(FileManager.default.fileExists(atPath: harness.dataDirectory + "/conversations/\(newer).jsonl"))
        XCTAssertThrowsError(try client.call("conversation.get", ["conversation": .string(newer)])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.notFound)
        }
    }

    func testHistoryPagesBackwards() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        for n in 1...3 {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:r\(n)]]")])
            _ = try client.awaitReply(sent["reply"]!.string!)
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

    func testHelloAndStatus() throws {
        let client = try RPCClient(path: harness.socketPath)
        let hello = try client.call("hello", ["client": "x", "name": "Ana"])
        XCTAssertEqual(hello["server"]?.string, "confabd")
        XCTAssertEqual(hello["protocol"]?.int, 1)
        XCTAssertEqual(hello["user"]?["uid"]?.int, Int(getuid()))
        XCTAssertEqual(hello["user"]?["name"]?.string, "Ana")
        let id = try harness.createConversation(client)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "who"])
        XCTAssertEqual(sent["message"]?["author"]?["name"]?.string, "Ana")
        XCTAssertEqual(sent["message"]?["author"]?["uid"]?.int, Int(getuid()))
        XCTAssertEqual(sent["message"]?["author"]?["client_id"], hello["client_id"])
        let status = try client.call("status")
        XCTAssertEqual(status["conversations"]?.int, 1)
        XCTAssertEqual(status["clients"]?.int, 1)
        XCTAssertNotNil(status["uptime_seconds"]?.int)
    }

    func testClientsSeeEachOtherAttachAndDetach() throws {
        let first = try harness.client(name: "first")
        let id = try harness.createConversation(first)
        try first.call("conversation.attach", ["conversation": .string(id)])
        let second = try harness.client(name: "second")
        let attached = try second.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(attached["clients"]?.array?.compactMap { $0["name"]?.string }, ["first"])
        let joined = try first.collect(until: { method, _ in method == "client.attached" })
        XCTAssertEqual(joined.last?.params["client"]?["name"]?.string, "second")
        second.close()
        let left = try first.collect(until: { method, _ in method == "client.detached" })
        XCTAssertEqual(left.last?.params["client"]?["name"]?.string, "second")
    }
}
