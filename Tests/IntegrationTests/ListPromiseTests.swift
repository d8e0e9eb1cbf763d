import ConfabProtocol
import Foundation
import XCTest

/// docs/protocol.md's promises of conversation.create and conversation.list that only the
/// document held: the default title, the default limit and the bounds of `limit`.
final class ListPromiseTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    func testAConversationWithoutATitleIsUntitled() throws {
        harness = try Harness()
        let client = try harness.client()
        let created = try client.call(RPCMethod.conversationCreate.rawValue, [:])
        XCTAssertEqual(created["conversation"]?["title"]?.string, "untitled")
        let listed = try client.call(RPCMethod.conversationList.rawValue, [:])
        XCTAssertEqual(listed["conversations"]?.array?.first?["title"]?.string, "untitled")
    }

    /// 101 conversations: the list gives the newest 100 unless asked for more, newest first.
    func testTheListGivesAHundredByDefaultAndTakesLimitsFromOneToTenThousand() throws {
        harness = try Harness()
        let client = try harness.client()
        var ids: [String] = []
        for n in 1...101 { ids.append(try harness.createConversation(client, title: "c\(n)")) }
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
