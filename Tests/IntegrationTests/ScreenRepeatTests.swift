import ConfabProtocol
import Foundation
import XCTest

/// No text is ever printed twice in a screen's scrollback: a join, a leave or a resize while
/// a reply streams leaves every word of it exactly once, in order, on every screen, and the
/// notice waits on the status row until the reply has ended.
final class ScreenRepeatTests: TmuxTestCase {
    /// A reply of one paragraph: `w1 … w90`.
    static let oneParagraph = (1...90).map { "w\($0)" }.joined(separator: " ")
    /// A reply of six paragraphs: `p1w1 … p1w16`, a blank line, `p2w1 …`.
    static let paragraphs = (1...6).map { paragraph in (1...16).map { "p\(paragraph)w\($0)" }.joined(separator: " ") }
        .joined(separator: "\n\n")

    private func new() throws -> String {
        try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func attach(_ id: String, name: String) throws -> String {
        let pane = try tmux.start("export NO_COLOR=1; " + harness.confabCommand(["attach", id, "--name", name]), width: 80, height: 40)
        try tmux.waitForText(pane, "here: \(name) (you)")
        return pane
    }

    /// Sends `reply` as the model's answer to be, held after its first 120 characters until
    /// `release("r")`, the rest streamed slowly; returns once each pane shows `shown`.
    private func startReply(_ id: String, _ reply: String, shown: String, on panes: [String]) throws {
        let client = try harness.client()
        _ = try client.call("message.send", ["conversation": .string(id),
                                             "content": .string("[[reply:\(reply)]] [[chunk:3]] [[delay:5]] [[hold:40 r]]")])
        try harness.waitUntilUpstreamHolds("r")
        for pane in panes { try waitForReply(pane, "its first words") { $0.contains(shown) } }
    }

    /// Waits until the reply's text in `pane`'s scrollback (from its header on) satisfies `condition`.
    private func waitForReply(_ pane: String, _ description: String, file: StaticString = #filePath, line: UInt = #line,
                              until condition: (Substring) -> Bool) throws {
        let deadline = Date().addingTimeInterval(20)
        var all = ""
        while Date() < deadline {
            all = try scrollback(pane)
            if let header = all.range(of: "assistant:"), condition(all[header.upperBound...]) { return }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(description):\n\(all)", file: file, line: line)
        throw HarnessError(description: "timed out waiting for \(description)")
    }

    /// The whole scrollback of `pane`, rows the terminal wrapped joined again.
    private func scrollback(_ pane: String) throws -> String {
        try tmux.run(["capture-pane", "-p", "-J", "-S", "-", "-t", pane])
    }

    /// The reply's words as the scrollback has them, from its header on (the question above
    /// it holds them too); and that `notice` is there once, after the reply.
    private func assertWholeOnce(_ pane: String, _ reply: String, notice: String? = nil,
                                 file: StaticString = #filePath, line: UInt = #line) throws {
        let expected = reply.split(whereSeparator: \.isWhitespace).map(String.init)
        let last = expected.last ?? ""
        try waitForReply(pane, "the reply's end\(notice.map { " and \($0)" } ?? "")", file: file, line: line) { reply in
            reply.contains(last + "\n") && (notice.map { reply.contains($0) } ?? true)
        }
        let all = try scrollback(pane)
        guard let header = all.range(of: "assistant:") else { return XCTFail("no reply in:\n\(all)", file: file, line: line) }
        let after = all[header.upperBound...]
        let words = after.split(whereSeparator: \.isWhitespace).map(String.init)
            .filter { $0.wholeMatch(of: /(p[0-9]+)?w[0-9]+/) != nil }
        XCTAssertEqual(words, expected, "every word once, in order:\n\(all)", file: file, line: line)
        XCTAssertFalse(all.contains("(continued)"), all, file: file, line: line)
        if let notice {
            XCTAssertEqual(all.components(separatedBy: notice).count - 1, 1, all, file: file, line: line)
            if let noticeAt = after.range(of: notice), let lastAt = after.range(of: last) {
                XCTAssertTrue(noticeAt.lowerBound > lastAt.upperBound, "the notice waited for the reply:\n\(all)", file: file, line: line)
            }
        }
    }

    private func join(_ reply: String, shown: String) throws {
        let id = try new()
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        try startReply(id, reply, shown: shown, on: [ana, bob])
        let carol = try attach(id, name: "carol")
        // Said at once on the status row, printed once the reply has ended.
        for pane in [ana, bob] { try tmux.waitForText(pane, "carol (root) joined") }
        try harness.releaseUpstream("r")
        for pane in [ana, bob] { try assertWholeOnce(pane, reply, notice: "-- carol (root) joined --") }
        try assertWholeOnce(carol, reply)
    }

    private func leave(_ reply: String, shown: String) throws {
        let id = try new()
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        let carol = try attach(id, name: "carol")
        try startReply(id, reply, shown: shown, on: [ana, bob, carol])
        try tmux.send(carol, ["C-d"])
        for pane in [ana, bob] { try tmux.waitForText(pane, "carol (root) left") }
        try harness.releaseUpstream("r")
        for pane in [ana, bob] { try assertWholeOnce(pane, reply, notice: "-- carol (root) left --") }
    }

    private func resize(_ reply: String, shown: String) throws {
        let id = try new()
        let ana = try attach(id, name: "ana")
        let bob = try attach(id, name: "bob")
        try startReply(id, reply, shown: shown, on: [ana, bob])
        try tmux.run(["resize-window", "-t", ana, "-x", "50"])
        try tmux.waitForScreen(ana, "the narrower window") { $0.split(separator: "\n").allSatisfy { $0.count <= 50 } }
        try harness.releaseUpstream("r")
        for pane in [ana, bob] { try assertWholeOnce(pane, reply) }
        // What streamed after the resize is laid out at the new width.
        // (The question above the reply holds its words too.)
        let rows = try scrollback(ana).split(separator: "\n").drop { !$0.contains("assistant:") }
        let tail = rows.drop { !$0.contains(Self.oneParagraph == reply ? "w80" : "p6w1") }
        for row in tail { XCTAssertLessThanOrEqual(row.count, 50, String(row)) }
    }

    func testAJoinMidReplyLeavesAOneParagraphReplyOnceOnEveryScreen() throws {
        try join(Self.oneParagraph, shown: "w25 ")
    }

    func testAJoinMidReplyLeavesEveryParagraphOnceOnEveryScreen() throws {
        try join(Self.paragraphs, shown: "p2w3 ")
    }

    func testALeaveMidReplyLeavesAOneParagraphReplyOnceOnEveryScreen() throws {
        try leave(Self.oneParagraph, shown: "w25 ")
    }

    func testALeaveMidReplyLeavesEveryParagraphOnceOnEveryScreen() throws {
        try leave(Self.paragraphs, shown: "p2w3 ")
    }

    func testAResizeMidReplyLeavesAOneParagraphReplyOnceOnEveryScreen() throws {
        try resize(Self.oneParagraph, shown: "w25 ")
    }

    func testAResizeMidReplyLeavesEveryParagraphOnceOnEveryScreen() throws {
        try resize(Self.paragraphs, shown: "p2w3 ")
    }
}
