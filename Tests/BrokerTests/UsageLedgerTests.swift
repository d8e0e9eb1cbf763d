import XCTest

@testable import Broker
import ConfabProtocol
import DaemonSettings
import LogStore

/// What `usage.summary` keeps per conversation, and how it prices and dates it.
final class UsageLedgerTests: XCTestCase {
    func testDaysAreUTCDates() {
        XCTAssertEqual(civilDate(days: 0), "1970-01-01")
        XCTAssertEqual(civilDate(days: -1), "1969-12-31")
        XCTAssertEqual(civilDate(days: 19782), "2024-02-29")
        XCTAssertEqual(civilDate(days: 11017), "2000-03-01")
        XCTAssertEqual(civilDate(days: 20784), "2026-11-27")
        XCTAssertEqual(floorDivide(-1, 24), -1)
        XCTAssertEqual(floorDivide(23, 24), 0)
    }

    /// Replies summed per provider, model and hour price the same as one by one.
    func testBucketsPriceAsTheirReplies() {
        let hour = UsageBucketKey.hourMilliseconds
        let replies = [
            ReplyUsage(conversation: "c", message: "m2", provider: "p", model: "a", created: Timestamp(milliseconds: 5 * hour + 10),
                       usage: Usage(promptTokens: 100, completionTokens: 10, totalTokens: 110, cacheReadTokens: 60, cacheWriteTokens: 30)),
            ReplyUsage(conversation: "c", message: "m4", provider: "p", model: "a", created: Timestamp(milliseconds: 5 * hour + 20),
                       usage: Usage(promptTokens: 50, completionTokens: 5, totalTokens: 55, isEstimated: true, reasoningTokens: 2)),
            ReplyUsage(conversation: "c", message: "m6", provider: "p", model: "a", created: Timestamp(milliseconds: 6 * hour),
                       usage: Usage(promptTokens: 7, completionTokens: 1, totalTokens: 8)),
        ]
        let buckets = UsageLedger.buckets(replies)
        XCTAssertEqual(buckets.count, 2, "two hours")
        let first = buckets[UsageBucketKey(provider: "p", model: "a", hour: 5)]
        XCTAssertEqual(first?.replies, 2)
        XCTAssertEqual(first?.promptTokens, 150)
        XCTAssertEqual(first?.uncachedPromptTokens, 60)
        XCTAssertEqual(first?.cacheReadTokens, 60)
        XCTAssertEqual(first?.cacheWriteTokens, 30)
        XCTAssertEqual(first?.reasoningTokens, 2)
        XCTAssertEqual(first?.estimatedReplies, 1)
        let price = ModelPrice(input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15)
        var row = UsageRow(key: "p/a")
        for bucket in buckets.values { row.add(bucket, price: price) }
        let oneByOne = replies.map { price.cost(of: $0.usage) }.reduce(0, +)
        XCTAssertEqual(row.cost ?? -1, oneByOne, accuracy: 1e-12)
        XCTAssertEqual(row.replies, 3)
        var unpriced = UsageRow(key: "p/a")
        for bucket in buckets.values { unpriced.add(bucket, price: nil) }
        XCTAssertNil(unpriced.cost)
        XCTAssertEqual(unpriced.unpricedReplies, 3)
    }
}
