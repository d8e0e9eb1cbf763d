import ConfabProtocol
import Foundation
import XCTest

/// 256 tokens, 100 of them kept for the reply: 156 for the request.
private let budgetProfiles = """
    [profiles.tight]
    system = "Be brief."
    max_tokens = 100
    context_tokens = 256

    """

final class ContextBudgetTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness(config: budgetProfiles) }
    override func tearDown() { harness?.tearDown() }

    /// About 52 estimated tokens (190 bytes and the message's own 4). No usage: the fake
    /// upstream counts words, and a recalibration from that would move the numbers below.
    private func question(_ label: String) -> String {
        "[[no-usage]][[reply:ok]] \(label) " + String(repeating: "x", count: 160)
    }

    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
    }

    private func lastMessages() throws -> [String] {
        try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array).map {
            "\($0["role"]?.string ?? ""): \(($0["content"]?.string ?? "").prefix(30))"
        }
    }

    func testTheOldestTurnsAreDroppedAndTheSystemPromptKept() throws {
        let client = try harness.client()
        let id = try XCTUnwrap(try client.call("conversation.create", ["profile": "tight"])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])

        let first = try send(client, id, question("q1"))
        XCTAssertEqual(first["context"]?["messages"]?.int, 2)
        XCTAssertEqual(first["context"]?["dropped"]?.int, 0)
        let second = try send(client, id, question("q2"))
        XCTAssertEqual(second["context"]?["messages"]?.int, 4)
        XCTAssertEqual(second["context"]?["dropped"]?.int, 0)
        XCTAssertEqual(try lastMessages().count, 4)

        // q1, ok, q2, ok, q3 and the system prompt no longer fit: q1 and its answer go together.
        let third = try send(client, id, question("q3"))
        XCTAssertEqual(third["status"]?.string, "complete")
        XCTAssertEqual(try lastMessages(), [
            "system: Be brief.", "user: [[no-usage]][[reply:ok]] q2 xx", "assistant: ok", "user: [[no-usage]][[reply:ok]] q3 xx",
        ])
        let context = try XCTUnwrap(third["context"])
        XCTAssertEqual(context["messages"]?.int, 4)
        XCTAssertEqual(context["dropped"]?.int, 2)
        let estimated = try XCTUnwrap(context["estimated_tokens"]?.int)
        XCTAssertTrue((100...156).contains(estimated), "\(estimated) tokens for 4 messages within 156")

        // Recorded with the reply, so a restart tells the same.
        try harness.restartDaemon()
        let again = try harness.client()
        let history = try XCTUnwrap(try again.call("conversation.history", ["conversation": .string(id)])["messages"]?.array)
        XCTAssertEqual(history.last?["id"]?.string, third["id"]?.string)
        XCTAssertEqual(history.last?["context"], context)
    }

    func testReportedPromptTokensRecalibrateTheEstimate() throws {
        let client = try harness.client()
        let id = try XCTUnwrap(try client.call("conversation.create", ["profile": "tight"])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // The fake upstream reports a word count as prompt_tokens: far below the estimate, so
        // the ratio goes to its bound of 0.5 and the three turns that did not fit above now do.
        for label in ["q1", "q2"] { _ = try send(client, id, "[[reply:ok]] \(label) " + String(repeating: "x", count: 172)) }
        let third = try send(client, id, "[[reply:ok]] q3 " + String(repeating: "x", count: 172))
        XCTAssertEqual(third["context"]?["messages"]?.int, 6)
        XCTAssertEqual(third["context"]?["dropped"]?.int, 0)
        XCTAssertEqual(try lastMessages().count, 6)
        let estimated = try XCTUnwrap(third["context"]?["estimated_tokens"]?.int)
        XCTAssertTrue((70...100).contains(estimated), "\(estimated): half the uncorrected estimate")
    }

    func testAMessageTooLargeForTheBudgetFailsBeforeAnyRequest() throws {
        let client = try harness.client()
        let id = try XCTUnwrap(try client.call("conversation.create", ["profile": "tight"])["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let before = harness.upstreamRequests().count
        let final = try send(client, id, String(repeating: "word ", count: 200))
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "context_too_large")
        XCTAssertTrue(final["error"]?["message"]?.string?.contains("context_tokens is 256") == true, "\(final)")
        XCTAssertNil(final["context"])
        XCTAssertEqual(harness.upstreamRequests().count, before, "no request was made")
    }

    func testWithoutABudgetNothingIsTrimmedOrRecorded() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let final = try send(client, id, String(repeating: "word ", count: 400))
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertNil(final["context"])
    }
}
