import ConfabProtocol
import ServiceSettings
import Upstream
import XCTest

@testable import Broker

/// Every branch of the attempt policy, in its order: another form of a textless tool-call turn,
/// images as lines, the usual retries, else the ending (its explained error, what is learnt of
/// the provider, the tool-round limit, the usage). No loop, no broker: values in, a decision out.
final class AttemptPolicyTests: XCTestCase {
    private func policy(_ change: (inout AttemptPolicy) -> Void = { _ in }) -> AttemptPolicy {
        var policy = AttemptPolicy(maxRetries: 2, maxToolRounds: 3, attempts: 1)
        change(&policy)
        return policy
    }

    private func http(_ status: Int, _ message: String = "refused") -> MessageError {
        MessageError(code: .upstreamHTTP, message: message, status: status)
    }

    private func failed(_ error: MessageError, streamed: Int = 0, retryAfter: Int? = nil) -> AttemptOutcome {
        AttemptOutcome(error: error, retryAfterSeconds: retryAfter, streamedBytes: streamed)
    }

    private func ending(_ decision: AttemptDecision, file: StaticString = #filePath, line: UInt = #line) -> AttemptEnding? {
        guard case .finish(let ending) = decision else {
            XCTFail("not an ending: \(decision)", file: file, line: line)
            return nil
        }
        return ending
    }

    private let call = ToolCall(id: "c1", name: "lookup", arguments: "{}")

    // MARK: another form of a textless tool-call turn

    func testARefusedTextlessToolCallTurnIsSentInTheOtherFormOnce() {
        let textless = policy { $0.hasTextlessToolCallTurn = true }
        for status in [400, 422, 500] {
            XCTAssertEqual(textless.decide(failed(http(status), retryAfter: 3)),
                           .retry(announced: http(status), retryAfterSeconds: 3, adjustment: .toolCallTurnContent(refused: .empty)), "\(status)")
        }
        let omittedFirst = policy { $0.hasTextlessToolCallTurn = true; $0.sentToolCallTurnContent = .omitted }
        XCTAssertEqual(omittedFirst.decide(failed(http(400))),
                       .retry(announced: http(400), retryAfterSeconds: nil, adjustment: .toolCallTurnContent(refused: .omitted)))
        // Tried once a turn: the second refusal ends it, naming both forms.
        let tried = policy { $0.hasTextlessToolCallTurn = true; $0.refusedToolCallTurnContent = .empty }
        XCTAssertEqual(ending(tried.decide(failed(http(400, "bad content"))))?.error,
                       http(400, #"the server refused a context holding a tool-call turn without text, sent with "content":"" and again without "content": bad content"#))
    }

    func testOnlyAChatRequestWithATextlessToolCallTurnRefusedBeforeAnyTextTriesTheOtherForm() {
        let textless = policy { $0.hasTextlessToolCallTurn = true }
        // Passing refusals are the usual retries' (500 and up), or none (404, 408, 413).
        for status in [502, 503, 504, 529] {
            XCTAssertEqual(textless.decide(failed(http(status))), .retry(announced: http(status), retryAfterSeconds: nil, adjustment: nil), "\(status)")
        }
        for status in [404, 408, 413] {
            XCTAssertEqual(ending(textless.decide(failed(http(status))))?.error, http(status), "\(status)")
        }
        XCTAssertEqual(ending(policy().decide(failed(http(400))))?.error, http(400), "no textless tool-call turn")
        XCTAssertEqual(ending(policy { $0.hasTextlessToolCallTurn = true; $0.api = .responses }.decide(failed(http(400))))?.error, http(400))
        XCTAssertEqual(ending(textless.decide(failed(http(400), streamed: 1)))?.error, http(400), "text came")
        XCTAssertEqual(ending(policy { $0.hasTextlessToolCallTurn = true; $0.isStopping = true }.decide(failed(http(400))))?.error, http(400))
        XCTAssertEqual(ending(textless.decide(failed(MessageError(code: .upstreamAuth, message: "no", status: 401))))?.error,
                       MessageError(code: .upstreamAuth, message: "no", status: 401))
        // The server names the reasoning: another form of `content` would be refused the same.
        let reasoning = http(400, "The reasoning_content in the thinking mode must be passed back to the API.")
        XCTAssertEqual(ending(textless.decide(failed(reasoning)))?.error?.message,
                       reasoning.message + #" (the server refused the reasoning sent back with the conversation's tool-call turns; provider "default" sends it as its reasoning_pass_back says)"#)
    }

    // MARK: images as lines

    func testARefusedRequestWithImagesIsSentOnceWithEachAsALineWhateverMaxRetriesSays() {
        let images = policy { $0.carriesImages = true; $0.maxRetries = 0 }
        XCTAssertEqual(images.decide(failed(http(400, "image not supported"), retryAfter: 9)),
                       .retry(announced: http(400, "the model server refused the request with images: image not supported"),
                              retryAfterSeconds: nil, adjustment: .imagesAsLines))
        // An empty answer to a request with images is taken as a refusal of them.
        var noAnswer = MessageError.noAnswer
        noAnswer.message = ImageRefusals.refusedReason + ": " + noAnswer.message
        XCTAssertEqual(images.decide(failed(.noAnswer)), .retry(announced: noAnswer, retryAfterSeconds: nil, adjustment: .imagesAsLines))
        // Sent so once: the second refusal ends the reply, saying both.
        let withdrawn = policy { $0.carriesImages = true; $0.withdrawnImages = ["d1"] }
        XCTAssertEqual(ending(withdrawn.decide(failed(http(400, "no"))))?.error,
                       http(400, "the server refused the request with its images, and again with each image as a line naming it: no"))
    }

    func testImagesGoAsLinesOnlyForARefusalOfARequestCarryingThemBeforeAnyText() {
        let images = policy { $0.carriesImages = true }
        XCTAssertEqual(ending(policy().decide(failed(http(400))))?.error, http(400), "no images")
        XCTAssertEqual(ending(images.decide(failed(http(400), streamed: 5)))?.error, http(400), "text came")
        XCTAssertEqual(ending(policy { $0.carriesImages = true; $0.isStopping = true }.decide(failed(http(400))))?.error, http(400))
        XCTAssertEqual(ending(images.decide(failed(http(401))))?.error, http(401), "a key refused is no image refusal")
        XCTAssertEqual(images.decide(failed(http(429))), .finish(AttemptEnding(error: http(429))), "429 with upstreamHTTP is no retry either")
        XCTAssertEqual(images.decide(failed(http(500))), .retry(announced: http(500), retryAfterSeconds: nil, adjustment: nil),
                       "a server error is the usual retries'")
    }

    // MARK: the usual retries

    func testPassingFailuresAreRetriedUpToMaxRetries() {
        let passing = [MessageError(code: .rateLimited, message: "slow down", status: 429),
                       MessageError(code: .upstreamConnection, message: "refused"),
                       MessageError(code: .upstreamTimeout, message: "slow"), http(500), http(503)]
        for error in passing {
            XCTAssertEqual(policy().decide(failed(error, retryAfter: 7)), .retry(announced: error, retryAfterSeconds: 7, adjustment: nil), "\(error)")
            XCTAssertEqual(policy { $0.attempts = 2 }.decide(failed(error)), .retry(announced: error, retryAfterSeconds: nil, adjustment: nil))
            // The attempt past max_retries ends the reply with the error as it came.
            XCTAssertEqual(policy { $0.attempts = 3 }.decide(failed(error)), .finish(AttemptEnding(error: error)), "\(error)")
            XCTAssertEqual(policy { $0.maxRetries = 0 }.decide(failed(error)), .finish(AttemptEnding(error: error)))
            XCTAssertEqual(policy().decide(failed(error, streamed: 1)), .finish(AttemptEnding(error: error)), "a retry would repeat text")
            XCTAssertEqual(policy { $0.isStopping = true }.decide(failed(error)), .finish(AttemptEnding(error: error)))
        }
        for error in [http(400), http(404), MessageError(code: .upstreamAuth, message: "key", status: 401),
                      MessageError(code: .upstreamProtocol, message: "garbled"), MessageError(code: .upstreamHTTP, message: "no status")] {
            XCTAssertEqual(policy().decide(failed(error)), .finish(AttemptEnding(error: error)), "\(error)")
        }
    }

    // MARK: the ending

    func testACompleteTurnKeepsItsFinishReasonAndUsageAndCalibratesTheEstimate() {
        let usage = Usage(promptTokens: 150, completionTokens: 10, totalTokens: 160)
        let decision = policy { $0.promptEstimate = 100 }.decide(AttemptOutcome(finishReason: "stop", usage: usage, streamedBytes: 40))
        XCTAssertEqual(decision, .finish(AttemptEnding(finishReason: "stop", lessons: [.tookImages], contextRatio: 1.5, usage: usage)))
        // An estimate the server made is no calibration; no usage leaves the estimate to the runner.
        let estimated = Usage(promptTokens: 150, completionTokens: 10, totalTokens: 160, isEstimated: true)
        XCTAssertNil(ending(policy { $0.promptEstimate = 100 }.decide(AttemptOutcome(usage: estimated)))?.contextRatio)
        XCTAssertNil(ending(policy().decide(AttemptOutcome(finishReason: "stop")))?.usage)
        XCTAssertEqual(ending(policy().decide(AttemptOutcome(finishReason: "stop")))?.status, .complete)
        // A failure is kept with the usage the server still reported.
        XCTAssertEqual(ending(policy().decide(AttemptOutcome(error: http(400), usage: usage)))?.usage, usage)
        XCTAssertEqual(ending(policy().decide(AttemptOutcome(error: http(400), usage: usage)))?.status, .failed)
    }

    func testWhatATakenTurnTeachesOfItsProvider() {
        // The other form of a tool-call turn passed: from now on it goes first (said once).
        XCTAssertEqual(ending(policy { $0.refusedToolCallTurnContent = .empty }.decide(AttemptOutcome()))?.lessons,
                       [.toolCallTurnContent(.omitted), .tookImages])
        XCTAssertEqual(ending(policy { $0.refusedToolCallTurnContent = .empty; $0.learnedToolCallTurnContent = .omitted }
            .decide(AttemptOutcome()))?.lessons, [.tookImages], "learnt already")
        // Taken with its images as lines: they are blamed.
        XCTAssertEqual(ending(policy { $0.withdrawnImages = ["d1", "d2"] }.decide(AttemptOutcome()))?.lessons, [.refusedImages(["d1", "d2"])])
        // A failed turn teaches nothing.
        XCTAssertEqual(ending(policy { $0.refusedToolCallTurnContent = .empty; $0.withdrawnImages = ["d1"] }
            .decide(failed(http(400))))?.lessons, [])
    }

    func testAllTheTokensSpentThinkingIsAnErrorSayingWhatToRaise() {
        let thought = AttemptOutcome(finishReason: "length", usage: Usage(promptTokens: 5, completionTokens: 64, totalTokens: 69), reasoned: true)
        XCTAssertEqual(ending(policy { $0.maxTokens = 256; $0.profile = "deep" }.decide(thought))?.error,
                       MessageError(code: .thinkingExhausted, message: "the model used all 256 tokens of max_tokens thinking and wrote no answer:"
                           + " raise max_tokens (profile `deep`) or lower reasoning_effort"))
        XCTAssertEqual(ending(policy().decide(thought))?.error?.message,
                       "the model used all 64 tokens of max_tokens thinking and wrote no answer: raise max_tokens or lower reasoning_effort",
                       "the reported completion tokens when none was asked for")
        var unreported = thought
        unreported.usage = nil
        XCTAssertEqual(ending(policy().decide(unreported))?.error?.message,
                       "the model used all of the server's token limit thinking and wrote no answer: raise max_tokens or lower reasoning_effort")
        var withText = thought
        withText.streamedBytes = 3
        XCTAssertNil(ending(policy().decide(withText))?.error, "text to continue")
        var withoutThought = thought
        withoutThought.reasoned = false
        XCTAssertNil(ending(policy().decide(withoutThought))?.error)
        var stopped = thought
        stopped.finishReason = "stop"
        XCTAssertNil(ending(policy().decide(stopped))?.error)
        var calling = thought
        calling.toolCalls = [call]
        XCTAssertNil(ending(policy().decide(calling))?.error, "it asked for a tool")
    }

    func testToolCallsAreKeptAndTheRoundPastTheLimitFails() {
        let asks = AttemptOutcome(finishReason: "tool_calls", toolCalls: [call])
        let under = ending(policy { $0.toolRounds = 2 }.decide(asks))
        XCTAssertEqual(under?.toolCalls, [call])
        XCTAssertNil(under?.error)
        let over = ending(policy { $0.toolRounds = 3 }.decide(asks))
        XCTAssertEqual(over?.toolCalls, [call], "the calls are kept with the failed turn")
        XCTAssertEqual(over?.error, MessageError(code: .toolRounds, message: "the model asked for tools again after 3 rounds of tool calls;"
            + " limits.max_tool_rounds is 3"))
        XCTAssertNil(ending(policy().decide(AttemptOutcome(finishReason: "stop")))?.toolCalls)
    }

    func testAnEmptyAnswerSaysWhereToSetTheContextWindow() {
        let bare = ending(policy { $0.promptEstimate = 1234; $0.provider = "local" }.decide(failed(.noAnswer)))?.error
        XCTAssertEqual(bare?.code, MessageError.noAnswer.code)
        XCTAssertEqual(bare?.message, MessageError.noAnswer.message + ". Some servers (llama.cpp's) answer so when the context is longer than"
            + #" the model's window; this request's was about 1234 tokens. Set context_tokens in provider "local" to the model's window,"#
            + " so that older turns are left out.")
        let profiled = ending(policy { $0.promptEstimate = 10; $0.provider = "local"; $0.profile = "p"; $0.contextTokens = 4096 }
            .decide(failed(.noAnswer)))?.error
        XCTAssertTrue(profiled?.message.hasSuffix(#"Set context_tokens in profile "p" or provider "local" to the model's window (it is 4096 now),"#
            + " so that older turns are left out.") ?? false, profiled?.message ?? "")
        // A reasoning refusal from another API names no chat setting.
        let responses = policy { $0.api = .responses }
        XCTAssertEqual(ending(responses.decide(failed(http(400, "Expected 'thinking' or 'redacted_thinking'"))))?.error?.message,
                       "Expected 'thinking' or 'redacted_thinking' (the server refused the reasoning sent back with the conversation's tool-call turns)")
    }

    // MARK: what is learnt, as a value

    func testProviderQuirksLearnAndForget() {
        var quirks = ProviderQuirks()
        XCTAssertEqual(quirks.toolCallTurnContent(for: "p"), .empty)
        XCTAssertEqual(quirks.learn(.toolCallTurnContent(.omitted), conversation: "k1", provider: "p", model: "m", sentImages: []),
                       #"provider=p took the tool-call turn without "content": its requests carry it so from now on"#)
        XCTAssertEqual(quirks.toolCallTurnContent(for: "p"), .omitted)
        XCTAssertEqual(quirks.toolCallTurnContent(for: "q"), .empty, "one provider's form is its own")

        XCTAssertNil(quirks.learn(.tookImages, conversation: "k1", provider: "p", model: "m", sentImages: ["good"]))
        XCTAssertEqual(quirks.learn(.refusedImages(["good", "junk"]), conversation: "k1", provider: "p", model: "m", sentImages: []),
                       "provider=p model=m took the request without its images: 1 of them go as a line naming them from now on")
        XCTAssertEqual(quirks.imageRefusals.refused(in: "k1", provider: "p", model: "m"), ["junk"])
        quirks.forget(conversation: "k1")
        XCTAssertEqual(quirks.imageRefusals.refused(in: "k1", provider: "p", model: "m"), [])
        XCTAssertEqual(quirks.toolCallTurnContent(for: "p"), .omitted, "a conversation's going leaves the provider's form")

        quirks.learn(.refusedImages(["junk"]), conversation: "k2", provider: "p", model: "m", sentImages: [])
        quirks.forgetAll()
        XCTAssertEqual(quirks.toolCallTurnContent(for: "p"), .empty)
        XCTAssertEqual(quirks.imageRefusals.refused(in: "k2", provider: "p", model: "m"), [])
    }
}
