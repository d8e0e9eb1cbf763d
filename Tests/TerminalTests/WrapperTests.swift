import Terminal
import XCTest

final class WrapperTests: XCTestCase {
    override class func setUp() { DisplayWidth.useUTF8Locale() }

    private func wrap(_ pieces: [String], width: Int) -> String {
        var wrapper = Wrapper(width: width)
        return pieces.map { wrapper.feed($0) }.joined() + wrapper.flush()
    }

    private func rows(_ text: String) -> [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }

    func testWordsMoveWholeToTheNextRow() {
        XCTAssertEqual(wrap(["the quick brown fox jumps"], width: 10), "the quick\nbrown fox\njumps")
    }

    func testAWordSplitAcrossPiecesIsNotBroken() {
        XCTAssertEqual(wrap(["w1 w2 w3 w", "109 w110"], width: 9), "w1 w2 w3\nw109 w110")
    }

    func testAWordLongerThanARowIsCut() {
        XCTAssertEqual(wrap(["abcdefghij"], width: 4), "abcd\nefgh\nij")
    }

    func testNewlinesStartRowsOver() {
        XCTAssertEqual(wrap(["ab\ncd ef"], width: 5), "ab\ncd ef")
    }

    func testWideCharactersTakeTwoColumnsAndBreakAnywhere() {
        let out = wrap(["漢字漢字漢字"], width: 5)
        XCTAssertEqual(rows(out), ["漢字", "漢字", "漢字"])
        for row in rows(out) { XCTAssertLessThanOrEqual(DisplayWidth.of(row), 5) }
    }

    func testEmojiAndCombiningMarksAreMeasuredAsTheyShow() {
        XCTAssertEqual(DisplayWidth.of("👋"), 2)
        XCTAssertEqual(DisplayWidth.of("e\u{301}"), 1)
        XCTAssertEqual(DisplayWidth.of("👍🏽"), 2)
        let out = wrap(["ok 👋👋 bye"], width: 6)
        for row in rows(out) { XCTAssertLessThanOrEqual(DisplayWidth.of(row), 6, out) }
    }

    func testTruncateCutsByDisplayWidth() {
        XCTAssertEqual(DisplayWidth.truncate("漢字漢字", to: 5), "漢字…")
        XCTAssertEqual(DisplayWidth.truncate("short", to: 10), "short")
    }
}
