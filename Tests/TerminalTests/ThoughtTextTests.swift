import ConfabProtocol
import Terminal
import XCTest

/// A reply's thought on a terminal: the folded row, the marker, the block, and `<think>`
/// blocks inline in content, which wrap like prose.
final class ThoughtTextTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    func testTheRowShowsTheSecondsAndTheNewestLineCutToTheWidthByDisplayWidth() {
        let thought = "First I read the question.\nThen 漢字漢字漢字 and more words here\n\n  "
        XCTAssertEqual(ThoughtText.status(seconds: 12, thought: thought, width: 200),
                       "thinking… 12 s · Then 漢字漢字漢字 and more words here")
        let cut = ThoughtText.status(seconds: 12, thought: thought, width: 30)
        XCTAssertLessThanOrEqual(DisplayWidth.of(cut), 30)
        XCTAssertTrue(cut.hasPrefix("thinking… 12 s · Then"), cut)
        XCTAssertTrue(cut.hasSuffix("…"), cut)
        XCTAssertEqual(ThoughtText.status(seconds: 0, thought: "", width: 80), "thinking… 0 s")
    }

    /// The model's text can carry escape sequences and bidi controls: never to the terminal.
    func testTheRowAndTheBlockAreMadeSafe() {
        let hostile = "ok\u{1B}]0;owned\u{07}\u{1B}[2J \u{202E}evil"
        let row = ThoughtText.status(seconds: 1, thought: hostile, width: 200)
        XCTAssertFalse(row.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{202E}" }, row.debugDescription)
        let block = ThoughtText.block(hostile, width: 80, colour: false)
        XCTAssertFalse(block.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0 == "\u{202E}" }, block.debugDescription)
        // In colour only our own dim and reset.
        let dim = ThoughtText.block(hostile, width: 80, colour: true)
        XCTAssertEqual(dim.components(separatedBy: "\u{1B}").count - 1, 2, dim.debugDescription)
    }

    func testTheBlockIsIndentedAndWrappedBetweenWords() {
        let block = ThoughtText.block("\nalpha beta gamma delta epsilon\n\nzeta\n", width: 16, colour: false)
        XCTAssertEqual(block.split(separator: "\n", omittingEmptySubsequences: false),
                       ["  alpha beta", "  gamma delta", "  epsilon", "", "  zeta"])
        XCTAssertEqual(ThoughtText.block("a b", width: 20, colour: true), "\u{1B}[2m  a b\u{1B}[0m")
    }

    func testTheMarkerSaysHowLongAndTheEncryptedBlocks() {
        XCTAssertEqual(ThoughtText.marker(seconds: 12), "[thought for 12 s]")
        XCTAssertEqual(ThoughtText.marker(seconds: 3, redactedBlocks: 2), "[thought for 3 s, 2 encrypted blocks]")
    }

    /// A server without a reasoning parser puts `<think>…</think>` at the start of the content:
    /// its paragraph wraps between words like prose, not cut mid-word at the screen's edge.
    func testAnInlineThinkBlockWrapsLikeProse() {
        let paragraph = "Okay so the user asks about the weather in Paris and I should answer briefly without inventing numbers"
        let content = "<think>\n\(paragraph)\n</think>\n\nIt is sunny."
        let rows = MarkdownRenderer(colour: false).render(content, width: 30)
        for row in rows { XCTAssertLessThanOrEqual(DisplayWidth.visible(row), 30, row) }
        let words = Set(paragraph.split(separator: " ").map(String.init))
        for row in rows where row != "<think>" && row != "</think>" && !row.isEmpty && row != "It is sunny." {
            for word in row.split(separator: " ") {
                XCTAssertTrue(words.contains(String(word)), "cut mid-word: \(row.debugDescription)")
            }
        }
        XCTAssertEqual(rows.first, "<think>")
        XCTAssertEqual(rows.joined(separator: " ").split(separator: " ").joined(separator: " "),
                       "<think> \(paragraph) </think> It is sunny.")
    }

    /// Other HTML stays as it is written.
    func testOtherHTMLBlocksAreStillKeptVerbatim() {
        let rows = MarkdownRenderer(colour: false).render("<div>\nabcdefghij klmnop\n</div>", width: 8)
        XCTAssertEqual(rows, ["<div>", "abcdefgh", "ij klmno", "p", "</div>"])
    }
}

/// Usage with its parts apart, as `ls -l` and `show` print it.
final class UsageTextTests: XCTestCase {
    func testCachedAndThinkingTokensAreSaidApart() {
        // Anthropic's 25 + 100 + 2,000 = 2,125 input tokens, mostly cache reads.
        let usage = Usage(promptTokens: 2125, completionTokens: 300, totalTokens: 2425, reasoningTokens: 200, cacheReadTokens: 2000)
        XCTAssertEqual(UsageText.line(usage), "in 2,125 (2,000 cached) · out 300 (200 thinking)")
        XCTAssertTrue(UsageText.hasParts(usage))
        let written = Usage(promptTokens: 2125, completionTokens: 30, totalTokens: 2155, cacheReadTokens: 2000, cacheWriteTokens: 100)
        XCTAssertEqual(UsageText.line(written), "in 2,125 (2,000 cached, 100 written to cache) · out 30")
        let estimated = Usage.estimate(prompt: ["hello"], completion: "hi", reasoning: "thinking about it")
        XCTAssertEqual(UsageText.line(estimated), "in ~9 · out ~6 (~5 thinking)")
        XCTAssertFalse(UsageText.hasParts(Usage(promptTokens: 10, completionTokens: 5, totalTokens: 15)))
        XCTAssertFalse(UsageText.hasParts(Usage(promptTokens: 10, completionTokens: 5, totalTokens: 15, reasoningTokens: 0)))
        XCTAssertEqual(UsageText.grouped(1_234_567), "1,234,567")
    }
}
