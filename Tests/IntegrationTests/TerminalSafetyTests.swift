import ConfabProtocol
import Foundation
import XCTest

/// What the model or another person writes never drives the terminal it is shown on.
final class TerminalSafetyTests: TmuxTestCase {
    /// A reply that tries to retitle the window (OSC 2) and colour the text (SGR).
    static let hostileReply = #"[[reply:\033]2;PWNED\007 plain \033[31mRED\033[0m]] [[chunk:2]]"#

    private func newConversation() throws -> String {
        try harness.runClient(["new", "--title", "safety"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func assertUntouched(_ pane: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertNotEqual(try tmux.format(pane, "#{pane_title}"), "PWNED", "the reply retitled the pane", file: file, line: line)
        let coloured = try tmux.screen(pane, escapes: true)
        XCTAssertFalse(coloured.contains("\u{1B}[31m"), "the reply coloured the text:\n\(coloured.debugDescription)", file: file, line: line)
        XCTAssertTrue(try tmux.screen(pane).contains("^[]2;PWNED^G"), "the sequence is shown, visibly", file: file, line: line)
    }

    /// The explain key's text is shown as `ask` shows a reply: every line break made one,
    /// direction marks and overrides made visible rather than passed on or dropped unseen.
    func testTheExplainKeyShowsInvisibleCharactersAndNormalisesLineBreaks() throws {
        let explained = try harness.runClient(["shell-key", "explain", "--shell", "bash", "--",
                                               "what [[reply:a\u{2028}b\u{200E}c\u{202E}d\r\ne\u{1B}[31m]]"])
        XCTAssertEqual(explained.status, 0, explained.stderr)
        XCTAssertEqual(explained.stdout, "a\nb<U+200E>c<U+202E>d\ne^[[31m\n")
    }

    func testAnEscapeSequenceInAReplyDoesNotReachAnAttachedTerminal() throws {
        let id = try newConversation()
        let pane = try tmux.start(harness.confabCommand(["attach", id]))
        try tmux.waitForText(pane, "safety")
        let title = try tmux.format(pane, "#{pane_title}")
        let asked = try harness.runClient(["ask", "-c", id, "x"], environment: [:], promptFromPrintf: Self.hostileReply)
        XCTAssertEqual(asked.status, 0, asked.stderr)
        try tmux.waitForScreen(pane, "the whole reply") { $0.contains("RED^[[0m") }
        try assertUntouched(pane)
        XCTAssertEqual(try tmux.format(pane, "#{pane_title}"), title)
    }

    func testAnEscapeSequenceInAReplyDoesNotReachTheTerminalAskWritesTo() throws {
        let id = try newConversation()
        let command = harness.confabCommand(["ask", "-c", id]) + " \"$(printf '\(Self.hostileReply)')\""
        let pane = try tmux.start(command)
        try tmux.waitForText(pane, "[exit 0]")
        try assertUntouched(pane)
    }

    func testAskIntoAPipeWritesTheReplyUnchanged() throws {
        let id = try newConversation()
        let asked = try harness.runClient(["ask", "-c", id, "x"], promptFromPrintf: Self.hostileReply)
        XCTAssertEqual(asked.stdout, "\u{1B}]2;PWNED\u{07} plain \u{1B}[31mRED\u{1B}[0m\n")
    }
}

extension Harness {
    /// `runClient` with the last argument replaced by `printf`'s rendering of `format`
    /// (so tests can write `\033` as a shell would).
    func runClient(_ arguments: [String], environment: [String: String] = [:], promptFromPrintf format: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let prompt = format.replacingOccurrences(of: "\\033", with: "\u{1B}").replacingOccurrences(of: "\\007", with: "\u{07}")
        return try runClient(Array(arguments.dropLast()) + [prompt], environment: environment)
    }
}
