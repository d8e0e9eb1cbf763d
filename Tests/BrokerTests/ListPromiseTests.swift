import XCTest

import ConfabProtocol
#if canImport(Glibc)
import Glibc
#endif

/// docs/protocol.md's promises of conversation.create and conversation.list that only the
/// document held: the default title, the default limit and the bounds of `limit`. In-process:
/// a daemon process adds nothing to a method's answer.
final class ListPromiseTests: XCTestCase {
    private var broker: InProcessBroker!

    override func setUpWithError() throws { broker = try InProcessBroker() }
    override func tearDown() { broker?.close() }

    func testAConversationWithoutATitleIsUntitled() throws {
        let client = try InProcessClient(broker)
        defer { client.close() }
        let created = try client.call(RPCMethod.conversationCreate.rawValue, [:])
        XCTAssertEqual(created["conversation"]?["title"]?.string, "untitled")
        let listed = try client.call(RPCMethod.conversationList.rawValue, [:])
        XCTAssertEqual(listed["conversations"]?.array?.first?["title"]?.string, "untitled")
    }

    /// 101 conversations: the list gives the newest 100 unless asked for more, newest first.
    func testTheListGivesAHundredByDefaultAndTakesLimitsFromOneToTenThousand() throws {
        let client = try InProcessClient(broker)
        defer { client.close() }
        var ids: [String] = []
        for n in 1...101 {
            ids.append(try broker.createConversation(client, title: "c\(n)"))
            // Times are in milliseconds and a create here takes less: without a tick between
            // them, two would tie and their order would be their ids'.
            usleep(2000)
            broker.turn(until: { false }, limit: 1)
        }
        let plain = try client.call(RPCMethod.conversationList.rawValue, [:])["conversations"]?.array ?? []
        XCTAssertEqual(plain.count, 100)
        XCTAssertEqual(plain.first?["id"]?.string, ids.last, "the most recently updated first")
        XCTAssertFalse(plain.contains { $0["id"]?.string == ids.first }, "the oldest is the one left out")
        let all = try client.call(RPCMethod.conversationList.rawValue, ["limit": 10_000])["conversations"]?.array ?? []
        XCTAssertEqual(all.count, 101)
        let one = try client.call(RPCMethod.conversationList.rawValue, ["limit": 1])["conversations"]?.array ?? []
        XCTAssertEqual(one.map { $0["id"]?.string }, [ids.last])
        for limit: JSON in [0, 10_001, -1, "5", 2.5] {
            let refused = try client.request(RPCMethod.conversationList.rawValue, ["limit": limit])
            XCTAssertEqual(refused["error"]?["code"]?.int, RPCError.invalidParams, "limit \(limit.text): \(refused.text)")
        }
    }
}
