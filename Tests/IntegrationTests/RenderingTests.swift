import ConfabProtocol
import Foundation
import XCTest

/// Replies rendered from markdown in real terminals, the status before a reply's first
/// text, and messages of several lines typed with Alt-Enter.
final class RenderingTests: TmuxTestCase {
    /// A reply with a heading, a fenced code block and a table (a wide character in it).
    static let markdown = """
        # Plan

        Some **bold** words.

        ```python
        print("hi")
        ```

        | name | value |
        |:-----|------:|
        | 漢字 | 1 |
        | alpha | 12345 |

        done.
        """

    private func new(_ title: String = "chat") throws -> String {
        try harness.runClient(["new", "--title", title]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `swift test` runs tests with NO_COLOR set; `colour` takes it away.
    private func attach(_ id: String, name: String = "ana", width: Int = 80, arguments: [String] = [], colour: Bool = false) throws -> String {
        let command = (colour ? "unset NO_COLOR; " : "export NO_COLOR=1; ") + harness.confabCommand(["attach", id, "--name", name] + arguments)
        let pane = try tmux.start(command, width: width, height: 30)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    /// The screen shows the markdown rendered: the code's language on its frame, no fences,
    /// the table's bars in one column however wide the characters before them.
    private func assertRendered(_ screen: String, colour: Bool, file: StaticString = #filePath, line: UInt = #line) {
        // The reply's rows: after the assistant's header in attach (the prompt above holds
        // the markdown too), all of them from ask.
        let all = screen.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let rows = all.contains { $0.contains("assistant:") } ? Array(all.drop { !$0.contains("assistant:") }) : all
        let screen = rows.joined(separator: "\n")
        XCTAssertTrue(rows.contains { $0.hasPrefix("# Plan") }, "heading:\n\(screen)", file: file, line: line)
        XCTAssertTrue(rows.contains("┌─ python"), "the code's language:\n\(screen)", file: file, line: line)
        XCTAssertTrue(rows.contains("│ print(\"hi\")"), "the code:\n\(screen)", file: file, line: line)
        XCTAssertFalse(screen.contains("```"), "no raw fences:\n\(screen)", file: file, line: line)
        // In colour emphasis is an attribute; with NO_COLOR its markers stay.
        XCTAssertEqual(screen.contains("**bold**"), !colour, "emphasis:\n\(screen)", file: file, line: line)
        let table = rows.filter { $0.contains("│") && ($0.contains("name") || $0.contains("漢字") || $0.contains("alpha")) }
        XCTAssertEqual(table.count, 3, "the table's rows:\n\(screen)", file: file, line: line)
        let bars = table.map { row in Self.columns(row.prefix { $0 != "│" }) }
        XCTAssertEqual(Set(bars).count, 1, "the columns line up:\n\(table.joined(separator: "\n"))", file: file, line: line)
        XCTAssertTrue(table.contains { $0.hasSuffix("12345") } && table.contains { $0.hasSuffix("    1") },
                      "the right-aligned column:\n\(table.joined(separator: "\n"))", file: file, line: line)
    }

    /// Columns on a terminal: CJK takes two.
    private static func columns(_ text: Substring) -> Int {
        text.reduce(0) { $0 + ($1 == "漢" || $1 == "字" ? 2 : 1) }
    }

    func testAttachRendersAHeadingACodeBlockAndATableWithColourOrWithout() throws {
        let id = try new()
        let coloured = try attach(id, name: "ana", colour: true)
        let plain = try attach(id, name: "bob")
        let asked = try harness.runClient(["ask", "-c", id, "[[reply:\(Self.markdown)]] [[chunk:4]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        for (pane, colour) in [(coloured, true), (plain, false)] {
            let screen = try tmux.waitForText(pane, "done.")
            assertRendered(screen, colour: colour)
            XCTAssertTrue(screen.contains("assistant:\n# Plan"), "the heading starts on the row after the header:\n\(screen)")
            let escapes = try tmux.screen(pane, escapes: true)
            let reply = escapes[escapes.range(of: "Some")!.lowerBound...]
            if colour {
                XCTAssertTrue(reply.contains("\u{1B}[1mbold"), "bold in colour:\n\(reply.debugDescription)")
            } else {
                XCTAssertFalse(reply.contains("\u{1B}["), "NO_COLOR: no attributes at all:\n\(reply.debugDescription)")
            }
        }
    }

    func testAskOnATerminalRendersAndIntoAPipeWritesTheMarkdownUnchanged() throws {
        let id = try new()
        let command = "unset NO_COLOR; " + harness.confabCommand(["ask", "-c", id, "[[reply:\(Self.markdown)]] [[chunk:5]]"])
        let pane = try tmux.start(command, width: 80, height: 40)
        let screen = try tmux.waitForText(pane, "[exit 0]")
        assertRendered(screen, colour: true)

        let piped = try harness.runClient(["ask", "-c", id, "[[reply:\(Self.markdown)]] [[chunk:5]]"])
        XCTAssertEqual(piped.stdout, Self.markdown + "\n")
        // --raw on a terminal: the text as it was written.
        let raw = try tmux.start(harness.confabCommand(["ask", "--raw", "-c", id, "[[reply:\(Self.markdown)]]"]), width: 80, height: 40)
        XCTAssertTrue(try tmux.waitForText(raw, "[exit 0]").contains("```python"))
    }

    func testRawAttachShowsTheMarkdownAsWritten() throws {
        let id = try new()
        let pane = try attach(id, arguments: ["--raw"])
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:\(Self.markdown)]]"]).status, 0)
        let screen = try tmux.waitForText(pane, "done.")
        XCTAssertTrue(screen.contains("```python"), screen)
        XCTAssertTrue(screen.contains("**bold**"), screen)
    }

    func testAltEnterMakesOneMessageOfSeveralLines() throws {
        let id = try new()
        let pane = try attach(id)
        try tmux.type(pane, "[[reply:two lines]] first")
        try tmux.send(pane, ["M-Enter"])
        try tmux.type(pane, "second")
        try tmux.waitForScreen(pane, "the line break in the input line") {
            $0.split(separator: "\n").last == "chat> [[reply:two lines]] first↵second"
        }
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: two lines")
        let messages = try history(id)
        XCTAssertEqual(messages.count, 2)
        XCTAssertEqual(messages.first?["content"]?.string, "[[reply:two lines]] first\nsecond")
        XCTAssertEqual(harness.upstreamRequests().count, 1)
    }

    func testAStatusShowsFromTheSendUntilTheFirstText() throws {
        let id = try new()
        let pane = try attach(id)
        try tmux.type(pane, "[[reply:at last]] [[slow-headers:2500]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "waiting for the model")
        let screen = try tmux.waitForText(pane, "assistant: at last")
        XCTAssertFalse(screen.contains("waiting for the model"), "the status is gone once text came:\n\(screen)")
    }

    func testARetryIsShownWithItsReasonAndACountdown() throws {
        harness.tearDown()
        harness = try Harness(retries: 1)
        tmux = Tmux(directory: harness.directory)
        let id = try new()
        let pane = try attach(id)
        try tmux.type(pane, "[[fail-first:1]] [[status:429]]")
        try tmux.send(pane, ["Enter"])
        let screen = try tmux.waitForText(pane, "retry 1 in 1 s: the model server is rate limiting")
        XCTAssertFalse(screen.contains("assistant:"), screen)
        try tmux.waitForText(pane, "assistant: You said:")
    }

    func testTheReplyStreamingWhenTheWindowNarrowsIsLaidOutAtTheNewWidth() throws {
        let id = try new()
        let pane = try attach(id, width: 80)
        try tmux.type(pane, "[[words:150]] [[delay:20]]")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "w40 ")
        try tmux.run(["resize-window", "-t", pane, "-x", "40"])
        try tmux.waitForText(pane, "w150", timeout: 30)
        // The whole scrollback, rows the terminal wrapped (the old ones, reflowed) joined again.
        let all = try tmux.run(["capture-pane", "-p", "-J", "-S", "-", "-t", pane])
        guard let header = all.range(of: "assistant:") else { return XCTFail("no reply:\n\(all)") }
        XCTAssertFalse(all.contains("(continued)"), "the reply goes on without a new header:\n\(all)")
        // Nothing of the reply is lost or printed twice.
        let words = all[header.upperBound...].split(whereSeparator: \.isWhitespace).compactMap { $0.hasPrefix("w") ? Int($0.dropFirst()) : nil }
        XCTAssertEqual(words, Array(1...150), all)
        // What came after the resize is laid out at the new width.
        let rows = all.split(separator: "\n")
        for row in rows.drop(while: { !$0.contains("w140") }) {
            XCTAssertLessThanOrEqual(row.count, 40, "\(row.debugDescription) is laid out at the old width:\n\(all)")
        }
    }
}
