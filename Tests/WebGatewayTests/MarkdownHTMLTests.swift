import XCTest
import WebGateway

/// A reply's markdown as the browser gets it: structure rendered, everything else text.
final class MarkdownHTMLTests: XCTestCase {
    func testRawHTMLIsShownAsTextNotOmitted() {
        let html = MarkdownHTML.render("look: <img src=x onerror=alert(1)> and <script>alert(2)</script>")
        XCTAssertFalse(html.contains("<img"), html)
        XCTAssertFalse(html.contains("<script"), html)
        XCTAssertTrue(html.contains("&lt;img src=x onerror=alert(1)&gt;"), html)
        XCTAssertTrue(html.contains("&lt;script&gt;alert(2)&lt;/script&gt;"), html)
    }

    func testHTMLBlockIsShownAsText() {
        let html = MarkdownHTML.render("<div onclick=\"x()\">\nhi\n</div>\n")
        XCTAssertFalse(html.contains("<div"), html)
        XCTAssertTrue(html.contains("&lt;div onclick=&quot;x()&quot;&gt;"), html)
    }

    func testLinkSchemesAreLimited() {
        let html = MarkdownHTML.render("[a](https://example.org/x) [b](javascript:alert(1)) [c](mailto:a@b.c) [d](data:text/html,x)")
        XCTAssertTrue(html.contains("<a href=\"https://example.org/x\""), html)
        XCTAssertTrue(html.contains("<a href=\"mailto:a@b.c\""), html)
        XCTAssertFalse(html.contains("href=\"javascript"), html)
        XCTAssertFalse(html.contains("href=\"data"), html)
        XCTAssertTrue(html.contains("(javascript:alert(1))"), html)
        XCTAssertEqual(html.components(separatedBy: "<a ").count - 1, 2, html)
    }

    func testImagesAreNeverLoaded() {
        let html = MarkdownHTML.render("![cat](https://example.org/cat.png)")
        XCTAssertFalse(html.contains("<img"), html)
        XCTAssertTrue(html.contains("[image: cat]"), html)
    }

    func testControlCharactersAreVisible() {
        let html = MarkdownHTML.render("bell &#27;[31m red and &#7;")
        XCTAssertFalse(html.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, html)
        XCTAssertTrue(html.contains("\u{241B}[31m"), html)
    }

    func testTablesCodeAndLists() {
        let html = MarkdownHTML.render("| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```swift\nlet x = 1 < 2\n```\n\n- one\n- two\n")
        XCTAssertTrue(html.contains("<table>"), html)
        XCTAssertTrue(html.contains("<th class=\"al\">a</th><th class=\"ar\">b</th>"), html)
        XCTAssertTrue(html.contains("<pre data-lang=\"swift\"><code class=\"language-swift\">let x = 1 &lt; 2"), html)
        XCTAssertTrue(html.contains("<ul>\n<li>one</li>"), html)
    }

    func testCodeLanguageCannotBreakOutOfItsAttribute() {
        let html = MarkdownHTML.render("```x\"onmouseover=alert(1)\ncode\n```\n")
        XCTAssertFalse(html.contains("\"onmouseover"), html)
    }
}
