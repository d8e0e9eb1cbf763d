import Markdown
import Terminal
import XCTest

final class MarkdownRendererTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    private let plain = MarkdownRenderer(colour: false)
    private let colour = MarkdownRenderer(colour: true)

    private func rows(_ text: String, width: Int = 40, colour: Bool = false) -> [String] {
        (colour ? self.colour : plain).render(text, width: width)
    }

    private func assertFits(_ rows: [String], _ width: Int, file: StaticString = #filePath, line: UInt = #line) {
        for row in rows {
            XCTAssertLessThanOrEqual(DisplayWidth.visible(row), width, "too wide: \(row.debugDescription)", file: file, line: line)
        }
    }

    func testParagraphsWrapBetweenWordsWithABlankRowBetweenBlocks() {
        XCTAssertEqual(rows("one two three four five six\n\nseven", width: 14),
                       ["one two three", "four five six", "", "seven"])
    }

    func testHeadingsKeepTheirLevelAndAreBoldInColour() {
        XCTAssertEqual(rows("# Title\n\n### Smaller"), ["# Title", "", "### Smaller"])
        let heading = rows("## Part", colour: true)
        XCTAssertEqual(heading, ["\u{1B}[0;1m## Part\u{1B}[0m"])
    }

    func testEmphasisIsAnAttributeInColourAndItsMarkerInPlainText() {
        let text = "a *b* **c** ~~d~~ `e`"
        XCTAssertEqual(rows(text), ["a *b* **c** ~~d~~ `e`"])
        XCTAssertEqual(rows(text, colour: true),
                       ["a \u{1B}[0;3mb\u{1B}[0m \u{1B}[0;1mc\u{1B}[0m \u{1B}[0;9md\u{1B}[0m \u{1B}[0;33me\u{1B}[0m"])
    }

    func testFencedCodeShowsItsLanguageAndIsNeverReflowed() {
        let text = "```swift\nlet x = 1   // a comment that is long\n\tindented\n```"
        let out = rows(text, width: 24)
        XCTAssertEqual(out, ["┌─ swift", "│ let x = 1   // a comme", "│ nt that is long", "│     indented", "└─"])
        assertFits(out, 24)
        XCTAssertFalse(out.joined().contains("```"))
    }

    func testListsNumberAndIndentTheirItems() {
        XCTAssertEqual(rows("- apples and pears\n- plums\n  - nested", width: 12),
                       ["• apples and", "  pears", "• plums", "  • nested"])
        XCTAssertEqual(rows("3. three\n4. four"), ["3. three", "4. four"])
        XCTAssertEqual(rows("- loose\n\n- list"), ["• loose", "", "• list"])
    }

    func testQuotesHaveABar() {
        XCTAssertEqual(rows("> quoted text\n>\n> more", width: 20), ["│ quoted text", "│", "│ more"])
    }

    func testLinksShowTheirAddressOnce() {
        XCTAssertEqual(rows("see [the docs](https://example.org/d) or https://example.org/x"),
                       ["see the docs (https://example.org/d) or", "https://example.org/x"])
    }

    func testTablesAlignColumnsByDisplayWidth() {
        let text = "| name | 数 |\n|:--|--:|\n| 漢字 | 1 |\n| a | 12345 |"
        let out = rows(text)
        XCTAssertEqual(out, ["name │    数", "─────┼──────", "漢字 │     1", "a    │ 12345"])
        // The bars line up on the screen, wide characters or not.
        let bars = out.map { row in DisplayWidth.of(row.prefix { $0 != "│" && $0 != "┼" }) }
        XCTAssertEqual(Set(bars), [5])
    }

    func testATableTooWideForTheScreenWrapsItsCells() {
        let text = "| a | b |\n|---|---|\n| one two three four five | six |"
        let out = rows(text, width: 16)
        assertFits(out, 16)
        XCTAssertEqual(out.first, "a          │ b  ")
        XCTAssertTrue(out.contains { $0.hasPrefix("one two") }, "\(out)")
    }

    func testEveryRowFitsItsWidth() {
        let text = "# A heading that is quite a bit longer than the row\n\n" +
            "Words and 漢字漢字漢字 and averyveryveryverylongwordthatcannotfit.\n\n" +
            "- item with `code that is long` and **bold words**\n\n> quote quote quote quote\n\n---\n\n<div>html</div>"
        for width in [8, 13, 20, 31] {
            assertFits(rows(text, width: width), width)
            assertFits(rows(text, width: width, colour: true), width)
        }
    }

    func testPlainRenderingWritesNoEscape() {
        let text = "# H\n\n*a* **b** `c` [d](http://e)\n\n```sh\nls\n```\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n> q\n\n- l"
        XCTAssertFalse(rows(text).joined().contains("\u{1B}"))
        XCTAssertTrue(rows(text, colour: true).joined().contains("\u{1B}"))
    }

    func testControlCharactersFromTheTextAreShownNotObeyed() {
        let escape = "\u{1B}]2;PWNED\u{07}"
        let texts = [
            "```\n\(escape)\n```",
            "# title \(escape)",
            "[link](http://x/\u{1B}[31m)",
            "| a |\n|---|\n| \(escape) |",
            "an entity &#27;[31m and a paragraph \(escape)",
            "`code \(escape)`",
            "```\u{1B}[31mlang\nx\n```",
        ]
        for text in texts {
            for renderer in [plain, colour] {
                let out = renderer.render(text, width: 60).joined(separator: "\n")
                XCTAssertTrue(out.contains("^["), "\(text.debugDescription) → \(out.debugDescription)")
                XCTAssertFalse(out.contains("\u{07}"), out.debugDescription)
                // The only escapes left are our own SGR sequences.
                let withoutOurs = out.replacing(/\x1B\[[0-9;]*m/, with: "")
                XCTAssertFalse(withoutOurs.contains("\u{1B}"), "\(text.debugDescription) → \(out.debugDescription)")
            }
        }
    }

    func testAFirstRowAfterAHeaderIsShorterAndOnlyProseGoesThere() {
        XCTAssertEqual(plain.render("aaa bbb ccc ddd", width: 20, firstColumn: 8), ["aaa bbb ccc", "ddd"])
        XCTAssertEqual(plain.render("# T", width: 20, firstColumn: 8), ["", "# T"])
    }
}

final class MarkdownStreamTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    private func stream(width: Int = 30, maxLiveRows: Int = 20) -> MarkdownStream {
        MarkdownStream(renderer: MarkdownRenderer(colour: false), width: width, maxLiveRows: maxLiveRows)
    }

    func testTheOpenBlockIsLiveAndAClosedOneIsCommittedOnce() {
        var markdown = stream()
        markdown.append("Some **bold")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["Some **bold"]))
        markdown.append("** text\n\n```py\nx = 1")
        XCTAssertEqual(markdown.update(), .init(committed: ["Some **bold** text"], live: ["", "┌─ py", "│ x = 1", "└─"]))
        markdown.append("\n```\n\nafter")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["", "┌─ py", "│ x = 1", "└─", "", "after"]))
        XCTAssertEqual(markdown.finish(), ["", "┌─ py", "│ x = 1", "└─", "", "after"])
    }

    func testATableIsLaidOutAgainAsItsRowsArrive() {
        var markdown = stream()
        markdown.append("| a | b |\n|---|---|\n| 1 | 2 |\n")
        XCTAssertEqual(markdown.update().live, ["a │ b", "──┼──", "1 │ 2"])
        markdown.append("| 100 | 2 |\n")
        XCTAssertEqual(markdown.update().live, ["a   │ b", "────┼──", "1   │ 2", "100 │ 2"])
    }

    func testLiveRowsBeyondTheLimitAreCommitted() {
        var markdown = stream(width: 10, maxLiveRows: 2)
        markdown.append("```\n1\n2\n3\n4\n")
        XCTAssertEqual(markdown.update(), .init(committed: ["┌─", "│ 1", "│ 2", "│ 3"], live: ["│ 4", "└─"]))
        markdown.append("5\n```\n")
        XCTAssertEqual(markdown.update(), .init(committed: ["│ 4"], live: ["│ 5", "└─"]))
        XCTAssertEqual(markdown.finish(), ["│ 5", "└─"])
    }

    func testAScreenWithNoRowToSpareStillKeepsOneLiveRow() {
        var markdown = stream()
        markdown.maxLiveRows = -1
        markdown.append("```\n1\n2\n")
        XCTAssertEqual(markdown.update(), .init(committed: ["┌─", "│ 1", "│ 2"], live: ["└─"]))
    }

    func testASettledBlockGoesOnWithOnlyWhatItHadNotShown() {
        var markdown = stream()
        markdown.append("first\n\nsecond para")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["first", "", "second para"]))
        markdown.settle(firstColumn: 5)
        XCTAssertEqual(markdown.update(), .init(committed: [], live: []))
        markdown.append("graph goes on\n\nthird\n")
        // The rest of the paragraph starts on the header's row; the next block after a blank row.
        XCTAssertEqual(markdown.update(), .init(committed: ["graph goes on"], live: ["", "third"]))
        XCTAssertEqual(markdown.finish(), ["", "third"])
    }

    func testASettledStreamWithheldItsUnfinishedWord() {
        var markdown = stream()
        markdown.holdsPartialWords = true
        markdown.append("one two thr")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["one two"]))
        markdown.settle(firstColumn: 0)
        markdown.append("ee four")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["three"]))
        XCTAssertEqual(markdown.finish(), ["three four"])
    }

    func testTheRestOfALineThatWouldStartAListStaysText() {
        var markdown = stream(width: 40)
        markdown.append("8 ")
        _ = markdown.update()
        markdown.settle(firstColumn: 0)
        markdown.append("- 3 = 5")
        XCTAssertEqual(markdown.finish(), ["- 3 = 5"])
    }

    func testASettledCodeBlockGoesOnInAFrameOfItsOwn() {
        var markdown = stream()
        markdown.append("```swift\nlet a = 1\n")
        XCTAssertEqual(markdown.update(), .init(committed: [], live: ["┌─ swift", "│ let a = 1", "└─"]))
        markdown.settle(firstColumn: 0)
        markdown.append("let b = 2\n```\nafter\n")
        XCTAssertEqual(markdown.finish(), ["┌─ swift", "│ let b = 2", "└─", "", "after"])
    }
}

final class LiveRowsTests: XCTestCase {
    func testTextAddedAtTheEndIsJustWritten() {
        var live = LiveRows(startColumn: 4)
        XCTAssertEqual(live.replace(committing: [], live: ["Hel"]), "Hel")
        XCTAssertEqual(live.column, 7)
        XCTAssertEqual(live.replace(committing: [], live: ["Hello", "wor"]), "lo\nwor")
        XCTAssertEqual(live.column, 3)
        XCTAssertEqual(live.replace(committing: [], live: ["Hello", "wor"]), "")
    }

    func testAChangedRowIsRewrittenFromThere() {
        var live = LiveRows(startColumn: 4)
        _ = live.replace(committing: [], live: ["a **b", "c"])
        XCTAssertEqual(live.replace(committing: [], live: ["a b c", "d"]), "\r\u{1B}[1A\u{1B}[4C\u{1B}[Ka b c\n\u{1B}[Kd")
        // Fewer rows than before: the rest are blanked, and the cursor ends below them.
        XCTAssertEqual(live.replace(committing: [], live: ["x"]), "\r\u{1B}[1A\u{1B}[4C\u{1B}[Kx\n\u{1B}[K")
        XCTAssertEqual(live.column, 0)
    }

    func testCommittedRowsAreNeverTouchedAgain() {
        var live = LiveRows()
        _ = live.replace(committing: [], live: ["one"])
        XCTAssertEqual(live.replace(committing: ["one"], live: []), "")
        XCTAssertEqual(live.replace(committing: [], live: ["", "two"]), "\n\ntwo")
        XCTAssertEqual(live.replace(committing: [], live: ["", "tw0"]), "\r\u{1B}[Ktw0")
    }
}
