import ConfabProtocol
import Foundation
import XCTest

/// What survives a restart, a crash and a shutdown mid-reply.
final class PersistenceTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// `updated` is when the log was last written to, live as after a restart: it used to stay
    /// at a reply's start while running and become its end after a restart, so a slow reply and
    /// a fast one swapped places in `conversation.list`.
    func testUpdatedAndListOrderAreTheSameBeforeAndAfterARestart() throws {
        var client = try harness.client()
        let slow = try harness.createConversation(client, title: "slow")
        let fast = try harness.createConversation(client, title: "fast")
        try client.call("conversation.attach", ["conversation": .string(slow)])
        try client.call("conversation.attach", ["conversation": .string(fast)])
        let slowSent = try client.call("message.send", ["conversation": .string(slow), "content": "[[words:20]] [[chunk:3]] [[delay:40]]"])
        let fastSent = try client.call("message.send", ["conversation": .string(fast), "content": "[[reply:quick]]"])
        _ = try client.awaitReply(try XCTUnwrap(fastSent["reply"]?.string))
        _ = try client.awaitReply(try XCTUnwrap(slowSent["reply"]?.string))
        func listed(_ client: RPCClient) throws -> [String] {
            try XCTUnwrap(client.call("conversation.list")["conversations"]?.array).map {
                "\($0["id"]?.string ?? "") \($0["updated"].map { "\($0)" } ?? "")"
            }
        }
        let before = try listed(client)
        XCTAssertEqual(before.first?.hasPrefix(slow), true, "the reply that ended last is the most recent: \(before)")
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        client = try harness.client()
        XCTAssertEqual(try listed(client), before)
    }

    /// `conversation.list` keeps its order between calls and is told of every write, creation
    /// and deletion: a list after each must show it, as a fresh sort would.
    func testListOrderFollowsWritesCreationsAndDeletionsBetweenLists() throws {
        let client = try harness.client()
        // Apart by more than the list's millisecond times, so no two tie (ties go by id).
        let first = try harness.createConversation(client, title: "first")
        usleep(5000)
        let second = try harness.createConversation(client, title: "second")
        usleep(5000)
        let third = try harness.createConversation(client, title: "third")
        func listed() throws -> [String] {
            try XCTUnwrap(client.call("conversation.list")["conversations"]?.array).compactMap { $0["id"]?.string }
        }
        XCTAssertEqual(try listed(), [third, second, first])
        try client.call("conversation.attach", ["conversation": .string(first)])
        let sent = try client.call("message.send", ["conversation": .string(first), "content": "[[reply:again]]"])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        XCTAssertEqual(try listed(), [first, third, second], "the conversation written to last comes first")
        try client.call("conversation.delete", ["conversation": .string(third)])
        XCTAssertEqual(try listed(), [first, second])
        usleep(5000)
        let fourth = try harness.createConversation(client, title: "fourth")
        XCTAssertEqual(try listed(), [fourth, first, second])
        XCTAssertEqual(try XCTUnwrap(client.call("conversation.list", ["limit": 1])["conversations"]?.array).count, 1)
    }

    func testRestartKeepsEveryCompletedMessage() throws {
        var client = try harness.client()
        let id = try harness.createConversation(client, title: "kept", system: "sys")
        try client.call("conversation.attach", ["conversation": .string(id)])
        var expected: [JSON] = []
        for n in 1...3 {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:answer \(n)]]")])
            expected.append(sent["message"]!)
            expected.append(try client.awaitReply(sent["reply"]!.string!).final)
        }
        try client.call("conversation.rename", ["conversation": .string(id), "title": "kept, renamed"])
        client.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        client = try harness.client()
        let history = try client.call("conversation.history", ["conversation": .string(id), "limit": 100])
        XCTAssertEqual(history["messages"]?.array, expected)
        let info = try client.call("conversation.get", ["conversation": .string(id)])["conversation"]
        XCTAssertEqual(info?["title"]?.string, "kept, renamed")
        XCTAssertEqual(info?["system"]?.string, "sys")
        XCTAssertEqual(info?["message_count"]?.int, 6)
        // New ids continue after the old ones.
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:more]]"])
        XCTAssertEqual(sent["message"]?["id"]?.string, "m7")
        // Every log line is a self-describing record.
        let log = try String(contentsOfFile: harness.dataDirectory + "/conversations/\(id).jsonl", encoding: .utf8)
        for line in log.split(separator: "\n") {
            let record = try JSON.parse(String(line))
            XCTAssertNotNil(record["type"]?.string)
            XCTAssertEqual(record["v"]?.int, 1)
        }
    }

    func testSigtermMidReplySavesItAsInterrupted() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:2000]] [[delay:5]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        harness.daemon?.signal(SIGTERM)
        let notes = try client.collect(until: { method, _ in method == "server.stopping" })
        let completed = try XCTUnwrap(notes.first { $0.method == "message.completed" }?.params["message"])
        XCTAssertEqual(completed["status"]?.string, "interrupted")
        let partial = try XCTUnwrap(completed["content"]?.string)
        XCTAssertTrue(partial.hasPrefix("w1 w2"))
        // The deltas that came after the ones taken above end the saved text.
        XCTAssertTrue(partial.hasSuffix(RPCClient.deltas(notes, for: reply).joined()))
        XCTAssertNil(try client.readFrame(), "the daemon closes the connection")
        XCTAssertEqual(harness.daemon?.wait(seconds: 10), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let history = try again.call("conversation.history", ["conversation": .string(id)])
        let saved = try XCTUnwrap(history["messages"]?.array?.last)
        XCTAssertEqual(saved["status"]?.string, "interrupted")
        XCTAssertEqual(saved["content"]?.string, partial)
    }

    func testSendsQueuedAtAStopAreAnsweredAfterTheRestartInOrder() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let first = try client.call("message.send", ["conversation": .string(id), "content": "[[words:2000]] [[delay:5]] go"])
        let second = try client.call("message.send", ["conversation": .string(id), "content": "[[context]] second"])
        let third = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:third answer]]"])
        _ = try client.collect(until: { method, _ in method == "message.delta" })
        XCTAssertEqual(try client.call("status")["queued"]?.int, 2)
        harness.daemon?.signal(SIGTERM)
        XCTAssertEqual(harness.daemon?.wait(seconds: 10), 0)

        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("conversation=\(id) resuming 2 queued replies"), harness.log())
        let again = try harness.client()
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])
        // The second reply may be streaming already, or even done.
        var finals: [String: JSON] = [:]
        for message in attached["messages"]?.array ?? [] { if let mid = message["id"]?.string { finals[mid] = message } }
        for reply in [second["reply"]!.string!, third["reply"]!.string!] where finals[reply] == nil {
            finals[reply] = try again.awaitReply(reply).final
        }
        let secondReply = try XCTUnwrap(finals[second["reply"]!.string!])
        let thirdReply = try XCTUnwrap(finals[third["reply"]!.string!])
        XCTAssertEqual(secondReply["status"]?.string, "complete")
        // Its context is what it would have been without the restart: the interrupted first
        // reply, then its own send; not the third send.
        XCTAssertEqual(secondReply["content"]?.string?.hasPrefix("context: user assistant user | "), true, secondReply.text)
        XCTAssertEqual(secondReply["content"]?.string?.hasSuffix(" / [[context]] second"), true, secondReply.text)
        XCTAssertEqual(thirdReply["content"]?.string, "third answer")
        let history = try again.call("conversation.history", ["conversation": .string(id), "limit": 10])["messages"]?.array ?? []
        XCTAssertEqual(history.map { $0["id"]?.string ?? "" }, ["m1", first["reply"]!.string!, "m3", "m4", "m5", "m6"])
        XCTAssertEqual(history[1]["status"]?.string, "interrupted")

        // Nothing is owed twice: another restart runs nothing.
        again.close()
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        XCTAssertEqual(try harness.client().call("status")["streams"]?.int, 0)
        XCTAssertFalse(harness.log().contains("resuming"), "the second start's log: nothing left to resume")
    }

    func testCrashMidReplyRestoresItAsInterruptedWithSavedText() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let done = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:safe]]"])
        _ = try client.awaitReply(done["reply"]!.string!)
        // Held after 1,000 pieces (3,000 characters): still in flight whenever the kill comes.
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:3000]] [[delay:2]] [[hold:1000 crash]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        // The daemon saves a streaming reply's text now and then (every 250 ms): wait for 300 characters of it.
        try harness.waitForSavedText(of: reply, in: id, atLeast: 300)
        harness.killDaemon()
        try harness.startDaemon()
        let again = try harness.client()
        let history = try again.call("conversation.history", ["conversation": .string(id)])
        let messages = try XCTUnwrap(history["messages"]?.array)
        XCTAssertEqual(messages.map { $0["status"]?.string }, ["complete", "complete", "complete", "interrupted"])
        XCTAssertEqual(messages[1]["content"]?.string, "safe")
        let restored = try XCTUnwrap(messages[3]["content"]?.string)
        XCTAssertTrue(restored.hasPrefix("w1 w2 w3"), restored)
        XCTAssertGreaterThanOrEqual(restored.count, 300)
        XCTAssertTrue(harness.log().isEmpty == false)
    }

    func testTornLastLineIsReportedAndIgnored() throws {
        var client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:ok]]"])
        _ = try? client.awaitReply(sent["reply"]!.string!)
        client.close()
        harness.stopDaemon()
        let path = harness.dataDirectory + "/conversations/\(id).jsonl"
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"type":"message","v":1,"message":{"id":"m9","con"#.utf8))
        try handle.close()
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("torn last line"), harness.log())
        client = try harness.client()
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        XCTAssertEqual(history["messages"]?.array?.count, 2)
        let more = try client.call("message.send", ["conversation": .string(id), "content": "after the tear"])
        XCTAssertEqual(more["message"]?["id"]?.string, "m3")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertFalse(text.contains("\"con{"), "the torn tail was cut before the next append")
    }
}
