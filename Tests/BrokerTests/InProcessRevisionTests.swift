import XCTest

import ConfabProtocol

/// What `RevisionTests` checked of a conversation's state around regenerate and fork, in-process:
/// when a regenerate is refused, and which version of a reply a fork copies.
final class InProcessRevisionTests: XCTestCase {
    private var broker: InProcessBroker!
    private var client: InProcessClient!

    override func setUpWithError() throws {
        broker = try InProcessBroker()
        client = try InProcessClient(broker)
    }

    override func tearDown() {
        client?.close()
        broker?.close()
    }

    private func contents(_ messages: JSON?) -> [String] { messages?.array?.compactMap { $0["content"]?.string } ?? [] }

    private func expectError(_ code: Int, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            try body()
            XCTFail("expected error \(code)", file: file, line: line)
        } catch let error as RPCError {
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
            return error.message
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
        return ""
    }

    func testRegenerateIsRefusedWhileAReplyStreamsOrWhenThereIsNothingToRegenerate() throws {
        let id = try broker.createConversation(client)
        _ = expectError(RPCError.conflict) { try client.call("message.regenerate", ["conversation": .string(id)]) }
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "go"])
        broker.turn(until: { !broker.upstream.streams.isEmpty })
        try XCTUnwrap(broker.upstream.streams.first).send("w1 w2")
        let message = expectError(RPCError.conflict) { try client.call("message.regenerate", ["conversation": .string(id)]) }
        XCTAssertTrue(message.contains("in progress"), message)
        try XCTUnwrap(broker.upstream.streams.first).finish()
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        XCTAssertEqual(try client.call("message.regenerate", ["conversation": .string(id)])["reply"]?.string, "m3")
    }

    func testForkingAtASupersededReplyKeepsThatVersion() throws {
        let id = try broker.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try broker.ask(client, id, "q [[reply:first version]]", answer: "first version")
        let before = broker.upstream.streams.count
        let regenerated = try client.call("message.regenerate", ["conversation": .string(id)])
        try broker.answerNext(after: before, "second version")
        _ = try client.awaitReply(try XCTUnwrap(regenerated["reply"]?.string))
        let fork = try client.call("conversation.fork", ["conversation": .string(id), "at": "m2"])
        let forkID = try XCTUnwrap(fork["conversation"]?["id"]?.string)
        let copied = try client.call("conversation.history", ["conversation": .string(forkID)])["messages"]?.array ?? []
        XCTAssertEqual(copied.compactMap { $0["id"]?.string }, ["m1", "m2"])
        XCTAssertNil(copied.last?["superseded_by"])
        XCTAssertEqual(contents(.array(copied)), ["q [[reply:first version]]", "first version"])
        let whole = try client.call("conversation.fork", ["conversation": .string(id)])
        let wholeCopy = try client.call("conversation.history", ["conversation": .string(XCTUnwrap(whole["conversation"]?["id"]?.string))])
        XCTAssertEqual(contents(wholeCopy["messages"]), ["q [[reply:first version]]", "second version"])
        XCTAssertEqual(wholeCopy["messages"]?.array?.count, 2, "the superseded reply is not copied")
    }
}
