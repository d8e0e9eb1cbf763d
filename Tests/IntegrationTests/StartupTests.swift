import ConfabProtocol
import Foundation
import XCTest

/// Start-up lists conversations from the index of summaries and reads a conversation's log
/// only when a request needs its messages.
final class StartupTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private var indexPath: String { harness.dataDirectory + "/index.jsonl" }
    private func logPath(_ id: String) -> String { harness.dataDirectory + "/conversations/\(id).jsonl" }

    /// Three conversations with a finished exchange each, the second renamed.
    private func populate() throws -> [String] {
        let client = try harness.client()
        defer { client.close() }
        var ids: [String] = []
        for number in 0..<3 {
            let id = try harness.createConversation(client, title: "c\(number)")
            try client.call("conversation.attach", ["conversation": .string(id)])
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:answer \(number)]]")])
            _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
            if number == 1 { try client.call("conversation.rename", ["conversation": .string(id), "title": "renamed"]) }
            ids.append(id)
        }
        return ids
    }

    /// The list without `updated`: a restart has always moved it by the milliseconds between a
    /// message's creation and its record's write (the log's record times win at a restart).
    private func list(_ client: RPCClient) throws -> [JSON] {
        try XCTUnwrap(try client.call("conversation.list")["conversations"]?.array).map(withoutUpdated)
    }

    private func withoutUpdated(_ info: JSON) -> JSON {
        guard case .object(var fields) = info else { return info }
        fields["updated"] = nil
        return .object(fields)
    }

    private func history(_ client: RPCClient, _ id: String) throws -> [JSON] {
        try XCTUnwrap(try client.call("conversation.history", ["conversation": .string(id), "limit": 100])["messages"]?.array)
    }

    /// The list and every history, as a client sees them.
    private func snapshot() throws -> (list: [JSON], histories: [String: [JSON]]) {
        let client = try harness.client()
        defer { client.close() }
        let listed = try list(client)
        var histories: [String: [JSON]] = [:]
        for conversation in listed {
            let id = try XCTUnwrap(conversation["id"]?.string)
            histories[id] = try history(client, id)
            XCTAssertEqual(conversation["message_count"]?.int, histories[id]?.count, "the listed count is the history's")
        }
        return (listed, histories)
    }

    private func restart() throws {
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
    }

    func testARestartListsFromTheIndexAndReadsALogOnlyWhenAsked() throws {
        let ids = try populate()
        let before = try snapshot()
        try restart()
        XCTAssertTrue(harness.log().contains("3 conversations listed from the index, 0 logs read"), harness.log())

        let client = try harness.client()
        XCTAssertEqual(try list(client), before.list, "listed before any conversation is read")
        XCTAssertEqual(try client.call("conversation.get", ["conversation": .string(ids[1])])["conversation"]?["title"]?.string, "renamed")
        XCTAssertFalse(harness.log().contains(" read: "), "no log read for the list")

        let attached = try client.call("conversation.attach", ["conversation": .string(ids[0]), "history": 100])
        XCTAssertEqual(attached["messages"]?.array, before.histories[ids[0]])
        XCTAssertEqual(attached["conversation"].map(withoutUpdated), before.list.first { $0["id"]?.string == ids[0] })
        XCTAssertTrue(harness.log().contains("conversation=\(ids[0]) read: 2 messages"), harness.log())
        XCTAssertFalse(harness.log().contains("conversation=\(ids[2]) read:"), "untouched conversations stay unread")

        // Ids go on after the stored ones, and the summary follows the new messages.
        let sent = try client.call("message.send", ["conversation": .string(ids[0]), "content": "[[reply:more]]"])
        XCTAssertEqual(sent["message"]?["id"]?.string, "m3")
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        client.close()
        let after = try snapshot()
        try restart()
        XCTAssertTrue(harness.log().contains("3 conversations listed from the index, 0 logs read"), harness.log())
        let again = try snapshot()
        XCTAssertEqual(again.list, after.list)
        XCTAssertEqual(again.histories, after.histories)
        XCTAssertEqual(again.list.first { $0["id"]?.string == ids[0] }?["message_count"]?.int, 4)
    }

    func testWithoutTheIndexEveryLogIsReadOnceAndTheIndexWrittenAgain() throws {
        _ = try populate()
        let before = try snapshot()
        XCTAssertEqual(harness.stopDaemon(), 0)
        XCTAssertEqual(unlink(indexPath), 0, "a clean stop leaves the index")
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("0 conversations listed from the index, 3 logs read"), harness.log())
        let after = try snapshot()
        XCTAssertEqual(after.list, before.list)
        XCTAssertEqual(after.histories, before.histories)
        try restart()
        XCTAssertTrue(harness.log().contains("3 conversations listed from the index, 0 logs read"), harness.log())
    }

    func testALogAppendedAfterTheIndexWasWrittenIsReadAtStart() throws {
        let ids = try populate()
        XCTAssertEqual(harness.stopDaemon(), 0)
        // As a confabd that died before writing the index again would leave it.
        let record = "{\"type\":\"title\",\"title\":\"changed behind the index\",\"v\":1,\"at\":\"\(Timestamp.now())\"}\n"
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: logPath(ids[2])))
        handle.seekToEndOfFile()
        handle.write(Data(record.utf8))
        handle.closeFile()
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("2 conversations listed from the index, 1 logs read"), harness.log())
        let after = try snapshot()
        XCTAssertEqual(after.list.first { $0["id"]?.string == ids[2] }?["title"]?.string, "changed behind the index")
    }

    func testATornLogIsCutBackAndReportedAsWithoutTheIndex() throws {
        let ids = try populate()
        let before = try snapshot()
        XCTAssertEqual(harness.stopDaemon(), 0)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: logPath(ids[0])))
        let size = handle.seekToEndOfFile()
        handle.write(Data("{\"type\":\"message\",\"v\":1,\"mess".utf8))
        handle.closeFile()
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("torn last line"), harness.log())
        XCTAssertTrue(harness.log().contains("2 conversations listed from the index, 1 logs read"), harness.log())
        let attrs = try FileManager.default.attributesOfItem(atPath: logPath(ids[0]))
        XCTAssertEqual((attrs[.size] as? NSNumber)?.uint64Value, size, "the torn tail is cut off")
        let after = try snapshot()
        XCTAssertEqual(after.list, before.list)
        XCTAssertEqual(after.histories, before.histories)
    }

    func testAfterAKillTheListStillAgreesWithEveryHistory() throws {
        let ids = try populate()
        let client = try harness.client()
        // Changes the index has not caught up with when the daemon dies.
        try client.call("conversation.attach", ["conversation": .string(ids[2])])
        let sent = try client.call("message.send", ["conversation": .string(ids[2]), "content": "[[reply:late]]"])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        try client.call("conversation.rename", ["conversation": .string(ids[0]), "title": "late title"])
        client.close()
        harness.killDaemon()
        try harness.startDaemon()
        let after = try snapshot()
        XCTAssertEqual(after.histories[ids[2]]?.count, 4)
        XCTAssertEqual(after.list.first { $0["id"]?.string == ids[0] }?["title"]?.string, "late title")
    }

    func testRequestsThatComeWhileALogIsReadAreAnsweredInOrderAfterIt() throws {
        let ids = try populate()
        let before = try snapshot()
        try restart()
        let client = try harness.client()
        let watcher = try harness.client(name: "watcher")
        let id = JSON.string(ids[1])
        // One write: every request lands in the same read, while the log is still being read.
        var batch: [UInt8] = []
        batch += RPC.request(id: 101, method: "conversation.attach", params: ["conversation": id, "history": 100])
        batch += RPC.request(id: 102, method: "conversation.get", params: ["conversation": id])
        batch += RPC.request(id: 103, method: "message.send", params: ["conversation": id, "content": "[[reply:queued behind the read]]"])
        batch += RPC.request(id: 104, method: "conversation.history", params: ["conversation": id, "limit": 100])
        batch += RPC.request(id: 105, method: "status", params: [:])
        batch += RPC.request(id: 106, method: "conversation.detach", params: ["conversation": id])
        try client.sendRaw(batch)
        // A second client's request on the same conversation waits behind the same read.
        try watcher.sendRaw(RPC.request(id: 201, method: "conversation.history", params: ["conversation": id, "limit": 100]))

        var responses: [JSON] = []
        while responses.count < 6 {
            let frame = try XCTUnwrap(try client.readFrame())
            if frame["id"] != nil { responses.append(frame) }
        }
        XCTAssertEqual(responses.map { $0["id"]?.int }, [101, 102, 103, 104, 105, 106], "answers in request order")
        XCTAssertEqual(responses[0]["result"]?["messages"]?.array, before.histories[ids[1]], "attach sees the whole history")
        XCTAssertEqual(responses[1]["result"]?["conversation"]?["title"]?.string, "renamed")
        XCTAssertEqual(responses[2]["result"]?["message"]?["id"]?.string, "m3", "the send is numbered after what was read")
        // Answered right after the send began storing its message, as without a read.
        XCTAssertEqual(responses[3]["result"]?["messages"]?.array, before.histories[ids[1]])
        XCTAssertEqual(responses[5]["result"]?["detached"], .bool(true), "detach after the attach, as asked")
        let watched = try watcher.response(to: 201)
        XCTAssertEqual(watched["result"]?["messages"]?.array, before.histories[ids[1]])
        XCTAssertEqual(harness.log().components(separatedBy: "conversation=\(ids[1]) read:").count - 1, 1, "read once")
    }

    func testAnUnreadableLogFailsTheRequestThatNeedsItAndNothingElse() throws {
        let ids = try populate()
        try restart()
        // The log vanishes behind the daemon's back.
        XCTAssertEqual(unlink(logPath(ids[0])), 0)
        let client = try harness.client()
        XCTAssertThrowsError(try client.call("conversation.attach", ["conversation": .string(ids[0])])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.storageFailed, "\(error)")
        }
        XCTAssertEqual(try list(client).count, 3)
        XCTAssertEqual(try history(client, ids[1]).count, 2)
    }
}
