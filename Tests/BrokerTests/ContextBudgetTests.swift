import XCTest

import DaemonSettings
import ConfabProtocol
import Upstream

final class ContextBudgetTests: XCTestCase {
    private func user(_ text: String) -> ChatMessage { ChatMessage(role: .user, content: text) }
    private func assistant(_ text: String) -> ChatMessage { ChatMessage(role: .assistant, content: text) }
    /// 40 bytes: 10 tokens of text, 14 with the message's own 4.
    private let forty = String(repeating: "x", count: 40)

    /// system (14) + 3 pairs (28 each) + newest user (14) = 3 priming + 14 + 84 + 14 = 115 tokens.
    private var context: [ChatMessage] {
        [ChatMessage(role: .system, content: forty), user("1" + forty.dropFirst()), assistant(forty), user("2" + forty.dropFirst()),
         assistant(forty), user("3" + forty.dropFirst()), assistant(forty), user("newest" + forty.dropFirst(6))]
    }

    private func fitted(_ result: Result<ContextBudget.Fitted, ContextBudget.Failure>, file: StaticString = #filePath, line: UInt = #line) -> ContextBudget.Fitted? {
        guard case .success(let fitted) = result else { XCTFail("expected a fit, got \(result)", file: file, line: line); return nil }
        return fitted
    }

    func testEverythingFits() throws {
        XCTAssertEqual(ContextBudget.rawEstimate(context), 115)
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1115, maxTokens: 1000).fit(context)))
        XCTAssertEqual(fit.messages, context)
        XCTAssertEqual(fit.info, ContextInfo(messages: 8, dropped: 0, estimatedTokens: 115))
    }

    func testTheExactBoundary() throws {
        // One token short of everything: the oldest pair goes, both its turns.
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1114, maxTokens: 1000).fit(context)))
        XCTAssertEqual(fit.messages, [context[0]] + context[3...])
        XCTAssertEqual(fit.info, ContextInfo(messages: 6, dropped: 2, estimatedTokens: 87))
        let exact = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1087, maxTokens: 1000).fit(context)))
        XCTAssertEqual(exact.info.dropped, 2, "a request that fills the budget exactly fits")
        let under = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1086, maxTokens: 1000).fit(context)))
        XCTAssertEqual(under.info, ContextInfo(messages: 4, dropped: 4, estimatedTokens: 59))
    }

    func testSystemAndNewestAreKeptAndPairsGoWhole() throws {
        // system + newest = 3 + 14 + 14 = 31.
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1031, maxTokens: 1000).fit(context)))
        XCTAssertEqual(fit.messages, [context[0], context[7]])
        XCTAssertEqual(fit.info, ContextInfo(messages: 2, dropped: 6, estimatedTokens: 31))
        for budget in 1031...1115 {
            let messages = try XCTUnwrap(fitted(ContextBudget(contextTokens: budget, maxTokens: 1000).fit(context))).messages
            XCTAssertEqual(messages.first, context[0], "budget \(budget)")
            XCTAssertEqual(messages.last, context[7], "budget \(budget)")
            XCTAssertEqual(messages.dropFirst().first?.role, .user, "budget \(budget): the turns left start with a user turn")
            XCTAssertEqual(messages.count % 2, 0, "budget \(budget): whole pairs only")
        }
    }

    func testTooLarge() {
        XCTAssertEqual(ContextBudget(contextTokens: 1030, maxTokens: 1000).fit(context), .failure(.tooLarge(needed: 1031, budget: 1030)))
        XCTAssertEqual(ContextBudget(contextTokens: 1030, maxTokens: nil).fit(context),
                       .failure(.tooLarge(needed: 31 + ContextBudget.defaultMaxTokens, budget: 1030)),
                       "without max_tokens the reply keeps the documented default")
    }

    func testWelcomeMessagesBeforeTheFirstQuestionGoAlone() throws {
        let context = [assistant(forty), user(forty), assistant(forty), user("newest")]
        // 3 + 14 + 14 + 14 + 6 = 51; without the welcome: 37.
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1040, maxTokens: 1000).fit(context)))
        XCTAssertEqual(fit.messages, Array(context[1...]))
        XCTAssertEqual(fit.info, ContextInfo(messages: 3, dropped: 1, estimatedTokens: 37))
    }

    func testRecalibration() throws {
        XCTAssertEqual(ContextBudget.calibrated(reported: 230, estimated: 115), 2)
        XCTAssertEqual(ContextBudget.calibrated(reported: 1000, estimated: 115), 2, "bounded above")
        XCTAssertEqual(ContextBudget.calibrated(reported: 10, estimated: 115), 0.5, "bounded below")
        XCTAssertNil(ContextBudget.calibrated(reported: 0, estimated: 115), "a zero report says nothing")
        // At 1.5 tokens per estimated token everything costs ceil(115 × 1.5) = 173.
        let budget = ContextBudget(contextTokens: 1172, maxTokens: 1000, ratio: 1.5)
        let fit = try XCTUnwrap(fitted(budget.fit(context)))
        XCTAssertEqual(fit.info, ContextInfo(messages: 6, dropped: 2, estimatedTokens: 131))
        XCTAssertEqual(try XCTUnwrap(fitted(ContextBudget(contextTokens: 1173, maxTokens: 1000, ratio: 1.5).fit(context))).info.dropped, 0)
        XCTAssertEqual(ContextBudget(contextTokens: 1000, maxTokens: 1000, ratio: 9).ratio, 2, "a ratio is bounded when applied too")
    }

    func testAContinuationCountsTheReplySoFar() throws {
        // The reply so far (40 bytes: 14) and the instruction to go on count as well.
        let instruction = ContextBudget.rawEstimate([user(ChatRequest.continuationInstruction)]) - 3
        let full = 115 + 14 + instruction
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1000 + full, maxTokens: 1000).fit(context, continuing: forty)))
        XCTAssertEqual(fit.info, ContextInfo(messages: 8, dropped: 0, estimatedTokens: full))
        XCTAssertEqual(fit.messages, context, "the continuation's own turns are added by the request, not here")
        let short = try XCTUnwrap(fitted(ContextBudget(contextTokens: 999 + full, maxTokens: 1000).fit(context, continuing: forty)))
        XCTAssertEqual(short.info.dropped, 2)
        XCTAssertEqual(ContextBudget(contextTokens: 1030 + 14 + instruction, maxTokens: 1000).fit(context, continuing: forty),
                       .failure(.tooLarge(needed: 1031 + 14 + instruction, budget: 1030 + 14 + instruction)))
    }

    func testNoTurns() throws {
        let fit = try XCTUnwrap(fitted(ContextBudget(contextTokens: 1100, maxTokens: 1000).fit([ChatMessage(role: .system, content: forty)])))
        XCTAssertEqual(fit.info, ContextInfo(messages: 1, dropped: 0, estimatedTokens: 17))
    }
    /// The reasoning a tool-call turn sends back is part of the request: a long thought pushes
    /// older turns out as text does (it is counted as the larger of its text and its items),
    /// and nothing is counted for it when the provider sends none back.
    func testReasoningSentBackWithAToolCallTurnCounts() throws {
        let call = ToolCall(id: "c1", name: "echo", arguments: "{}")
        let thought = String(repeating: "t", count: 160)  // 40 tokens: two older pairs (28 each) make room for it
        var turn = ChatMessage(role: .assistant, content: "", toolCalls: [call],
                               reasoning: ReasoningReplay(api: "chat", provider: "p", model: "m", text: thought))
        let withTool = context.dropLast() + [turn, ChatMessage(role: .tool, content: forty, toolCallID: "c1", toolName: "echo")]
        let plain = ContextBudget.rawEstimate(Array(withTool), sendsReasoning: false)
        XCTAssertEqual(ContextBudget.rawEstimate(Array(withTool)), plain + 40)
        // Signed items larger than the text count as what they are.
        turn.reasoning?.items = [["type": "thinking", "thinking": .string(thought), "signature": .string(String(repeating: "s", count: 400))]]
        let items = context.dropLast() + [turn]
        XCTAssertGreaterThan(ContextBudget.rawEstimate(Array(items)), ContextBudget.rawEstimate(Array(items), sendsReasoning: false) + 80)
        // A turn without tool calls sends its reasoning back nowhere.
        let answered = [ChatMessage(role: .assistant, content: forty, reasoning: ReasoningReplay(api: "chat", provider: "p", model: "m", text: thought))]
        XCTAssertEqual(ContextBudget.rawEstimate(answered), ContextBudget.rawEstimate(answered, sendsReasoning: false))
        // A budget that held the turns without the thought drops the oldest pair for it.
        let budget = ContextBudget(contextTokens: 1000 + plain, maxTokens: 1000)
        XCTAssertEqual(try XCTUnwrap(fitted(budget.fit(Array(withTool), sendsReasoning: false))).info.dropped, 0)
        XCTAssertGreaterThan(try XCTUnwrap(fitted(budget.fit(Array(withTool)))).info.dropped, 0)
    }
}

final class AttachmentBudgetTests: XCTestCase {
    private let digest = String(repeating: "d", count: 64)

    func testATextFileCountsAsTheTextItIsSentAs() {
        let text = String(repeating: "y", count: 400)
        let file = ChatAttachment(name: "notes.txt", type: .text, size: 400, sha256: digest, content: .text(text))
        let turn = ChatMessage(role: .user, content: "read this", attachments: [file])
        let sent = "read this\n\n" + ChatAttachment.fenced(text, name: "notes.txt")
        XCTAssertEqual(ContextBudget.rawEstimate([turn]), 3 + 4 + (sent.utf8.count + 3) / 4)
        // Before it is read, its size stands for it, with its name line and fences: the same count.
        var unread = turn
        unread.attachments[0].content = .unread
        XCTAssertEqual(ContextBudget.rawEstimate([unread]), ContextBudget.rawEstimate([turn]))
    }

    func testEachImageCountsTheSameWhateverItsSize() {
        let small = ChatAttachment(name: "a.png", type: .png, size: 10, sha256: digest, content: .image(encoding: [UInt8](repeating: 1, count: 10)))
        let large = ChatAttachment(name: "b.png", type: .png, size: 3 << 20, sha256: digest)
        let turn = ChatMessage(role: .user, content: "", attachments: [small, large])
        XCTAssertEqual(ContextBudget.imageTokens, 1600)
        XCTAssertEqual(ContextBudget.rawEstimate([turn]), 3 + 4 + 2 * 1600)
        // An image sent as a line of text (the model takes none) is that line.
        let line = ChatAttachment.imageNotSentLine(name: "a.png", type: .png, size: 10)
        let named = ChatMessage(role: .user, content: "", attachments: [ChatAttachment(name: "a.png", type: .png, size: 10, sha256: digest, content: .line(line))])
        XCTAssertEqual(ContextBudget.rawEstimate([named]), 3 + 4 + (line.utf8.count + 3) / 4)
    }

    func testOlderTurnsWithImagesGoFirstWhenTheyDoNotFit() throws {
        let image = ChatAttachment(name: "a.png", type: .png, size: 10, sha256: digest)
        let context = [ChatMessage(role: .user, content: "first", attachments: [image]), ChatMessage(role: .assistant, content: "ok"),
                       ChatMessage(role: .user, content: "second")]
        // Room for the newest pair, not for the image: the turn carrying it is dropped whole.
        guard case .success(let fitted) = ContextBudget(contextTokens: 1600, maxTokens: 256).fit(context) else { return XCTFail() }
        XCTAssertEqual(fitted.messages, [context[2]])
        guard case .success(let all) = ContextBudget(contextTokens: 2000, maxTokens: 256).fit(context) else { return XCTFail() }
        XCTAssertEqual(all.messages, context)
    }

}
