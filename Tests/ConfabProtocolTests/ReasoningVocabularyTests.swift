import ConfabProtocol
import XCTest

/// The reasoning channel's values as both ends read and write them (docs/protocol.md,
/// `message.reasoning` and Message's `reasoning` and `usage`).
final class ReasoningVocabularyTests: XCTestCase {
    let started = Timestamp(milliseconds: 1_795_000_000_000)

    func testAMessageKeepsItsReasoningThroughJSON() throws {
        var message = Message(id: "m2", conversation: "k3v9q2m8x7ad", role: .assistant, content: "42", status: .complete,
                              created: started)
        message.reasoning = Reasoning(text: "6 × 7…", started: started, ended: Timestamp(milliseconds: started.milliseconds + 12_345),
                                      redactedBlocks: 2)
        let read = try XCTUnwrap(Message(json: message.json))
        XCTAssertEqual(read, message)
        XCTAssertEqual(read.reasoning?.seconds(now: started), 12)
        XCTAssertEqual(message.json["reasoning"]?["redacted_blocks"]?.int, 2)
    }

    func testReasoningStillGoingOnCountsUpToNow() throws {
        let thinking = Reasoning(text: "", started: started)
        XCTAssertNil(thinking.json["ended"])
        XCTAssertNil(thinking.json["redacted_blocks"], "no redacted blocks, no key")
        XCTAssertEqual(thinking.seconds(now: Timestamp(milliseconds: started.milliseconds + 4_999)), 4)
        XCTAssertEqual(Reasoning(json: thinking.json), thinking)
        XCTAssertNil(Reasoning(json: ["text": "x"]), "no start, no reasoning")
    }

    func testUsageKeepsReasoningAndCacheCountsApart() throws {
        // Anthropic's 25 uncached + 100 written + 2,000 read input tokens.
        let usage = Usage(promptTokens: 2_125, completionTokens: 300, totalTokens: 2_425, reasoningTokens: 200,
                          cacheReadTokens: 2_000, cacheWriteTokens: 100)
        XCTAssertEqual(usage.uncachedPromptTokens, 25)
        XCTAssertEqual(Usage(json: usage.json), usage)
        XCTAssertEqual(usage.json["cache_read_tokens"]?.int, 2_000)
        let plain = Usage(promptTokens: 9, completionTokens: 3, totalTokens: 12)
        XCTAssertNil(plain.json["reasoning_tokens"], "fields a server did not report are left out")
        let sum = try XCTUnwrap(Usage.sum(usage, plain))
        XCTAssertEqual(sum.reasoningTokens, 200)
        XCTAssertEqual(sum.cacheReadTokens, 2_000)
        XCTAssertEqual(sum.promptTokens, 2_134)
        XCTAssertNil(Usage.sum(plain, plain)?.reasoningTokens)
    }

    func testAnEstimateCountsReasoningAsOutput() {
        let estimate = Usage.estimate(prompt: ["hi"], completion: "", reasoning: String(repeating: "x", count: 400))
        XCTAssertEqual(estimate.reasoningTokens, 100)
        XCTAssertEqual(estimate.completionTokens, 100)
        XCTAssertTrue(estimate.isEstimated)
        XCTAssertNil(Usage.estimate(prompt: ["hi"], completion: "ok").reasoningTokens)
    }
}
