import XCTest

@testable import Broker
import ConfabProtocol

/// A history page of a MiB or more starts a burst (large blocks reused from the heap), and the
/// burst ends, giving the heap's free memory back, once no large answer has come for a while.
final class LargeAnswersTests: XCTestCase {
    private var broker: InProcessBroker!
    private var clients: [InProcessClient] = []

    override func setUpWithError() throws { broker = try InProcessBroker() }
    override func tearDown() {
        for client in clients { client.close() }
        broker?.close()
    }

    func testALargePageStartsABurstThatEndsWhenNoLargeAnswerFollows() throws {
        let client = try InProcessClient(broker)
        clients.append(client)
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
