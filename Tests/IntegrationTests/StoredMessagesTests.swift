import ConfabProtocol
import Foundation
import XCTest

/// A conversation read back from its log keeps only where its messages are, and reads their texts
/// when a page, a request or a revision needs them: what clients and the model see is the same
/// as before the restart.
final class StoredMessagesTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
    }

    private func history(_ client: RPCClient, _ id: String, limit: Int = 100, before: String? = nil) throws -> [JSON] {
        var params: [String: JSON] = ["conversation": .string(id), "limit": .int(limit)]
        if let before { params["before"] = .string(before) }
        return try XCTUnwrap(client.call("conversation.history", .object(params))["messages"]?.array)
    }

    /// Every message, three at a time from the newest back.
    private func pages(_ client: RPCClient, _ id: String) throws -> [[JSON]] {
        var pages: [[JSON]] = []
        var before: String?
        while true {
            let page = try history(client, id, limit: 3, before: before)
            guard !page.isEmpty else { break }
            pages.append(page)
            before = page.first?["id"]?.string
        }
        return pages
    }

    private func lastRequest() throws -> [JSON] {
        try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array)
    }

    func testAConversationReadBackFromItsLogServesPagesRequestsAndRevisionsAsBefore() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client, title: "stored", system: "Be brief.")
        try client.call("conversation.attach", ["conversation": .string(id)])
        for number in 1...4 {
            XCTAssertEqual(try send(client, id, "question \(number) \"quoted\" ✓\n[[reply:answer \(number)]]")["status"]?.string, "complete")
        }
        let regenerated = try client.call("message.regenerate", ["conversation": .string(id)])
        _ = try client.awaitReply(try XCTUnwrap(regenerated["reply"]?.string))
        let request = try lastRequest()
        let whole = try history(client, id)
        XCTAssertEqual(whole.count, 9)
        let paged = try pages(client, id)
        client.close()

        try harness.restartDaemon()
        let again = try harness.client()
        XCTAssertEqual(try history(again, id), whole, "the whole history, read from the log's places")
        XCTAssertEqual(try pages(again, id), paged)
        let attached = try again.call("conversation.attach", ["conversation": .string(id), "history": 2])
        XCTAssertEqual(attached["messages"]?.array, Array(whole.suffix(2)))
        XCTAssertEqual(attached["conversation"]?["message_count"]?.int, 9)

        // The same question again: the model is sent what it was sent before the restart.
        let second = try again.call("message.regenerate", ["conversation": .string(id)])
        XCTAssertEqual(second["replaces"]?.string, "m9")
        _ = try again.awaitReply(try XCTUnwrap(second["reply"]?.string))
        XCTAssertEqual(try lastRequest(), request)
        let superseded = try history(again, id).first { $0["id"]?.string == "m9" }
        XCTAssertEqual(superseded?["superseded_by"]?.string, "m10")

        // An edit of the last question reads it (its text kept apart from the new one).
        let edited = try again.call("message.edit", ["conversation": .string(id), "message": "m7", "content": "question four, again [[reply:edited]]"])
        XCTAssertEqual(try again.awaitReply(try XCTUnwrap(edited["reply"]?.string)).final["content"]?.string, "edited")
        XCTAssertEqual(try lastRequest().compactMap { $0["content"]?.string }, [
            "Be brief.", "question 1 \"quoted\" ✓\n[[reply:answer 1]]", "answer 1", "question 2 \"quoted\" ✓\n[[reply:answer 2]]",
            "answer 2", "question 3 \"quoted\" ✓\n[[reply:answer 3]]", "answer 3", "question four, again [[reply:edited]]",
        ])

        // A fork copies the texts up to where it is cut.
        let fork = try XCTUnwrap(again.call("conversation.fork", ["conversation": .string(id), "at": "m4"])["conversation"]?["id"]?.string)
        XCTAssertEqual(try history(again, fork).compactMap { $0["content"]?.string },
                       ["question 1 \"quoted\" ✓\n[[reply:answer 1]]", "answer 1", "question 2 \"quoted\" ✓\n[[reply:answer 2]]", "answer 2"])
    }
}
