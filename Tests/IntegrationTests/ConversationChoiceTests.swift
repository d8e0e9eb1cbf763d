import ConfabProtocol
import Foundation
import XCTest

/// Which conversation `confab ask` talks to without an id: the day's, a new one, the shell
/// session's, or the most recently active one.
final class ConversationChoiceTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func list() throws -> [JSON] {
        try JSON.parse(try harness.runClient(["ls", "--json"]).stdout).array ?? []
    }

    func testOneShotAsksShareTheDaysConversation() throws {
        let first = try harness.runClient(["ask", "[[reply:one]]"])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stderr.contains("conversation "), first.stderr)
        let second = try harness.runClient(["ask", "[[reply:two]]"])
        XCTAssertEqual(second.stdout, "two\n")
        XCTAssertEqual(second.stderr, "", "no new conversation the second time")
        let conversations = try list()
        XCTAssertEqual(conversations.count, 1)
        let title = conversations.first?["title"]?.string ?? ""
        XCTAssertTrue(title.hasPrefix("ask 20") && title.count == "ask 2026-11-23".count, title)
        XCTAssertEqual(conversations.first?["message_count"]?.int, 4)

        // --new (or any setting of a new conversation) starts another one.
        XCTAssertEqual(try harness.runClient(["ask", "--new", "[[reply:three]]"]).status, 0)
        XCTAssertEqual(try harness.runClient(["ask", "--system", "be brief", "[[reply:four]]"]).status, 0)
        XCTAssertEqual(try list().count, 3)
    }

    func testContinueWithoutASessionTakesTheMostRecentlyActive() throws {
        let older = try harness.runClient(["new", "--title", "older"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try harness.runClient(["new", "--title", "newer"])
        XCTAssertEqual(try harness.runClient(["ask", "-c", older, "[[reply:bump]]"]).status, 0)
        let continued = try harness.runClient(["ask", "-C", "[[context]]"], environment: ["CONFAB_SESSION": ""])
        XCTAssertEqual(continued.status, 0, continued.stderr)
        XCTAssertTrue(continued.stdout.hasPrefix("context: user assistant user |"), continued.stdout)
    }

    func testContinueInASessionMakesThenKeepsItsConversation() throws {
        let session = ["CONFAB_SESSION": "test-1"]
        XCTAssertEqual(try harness.runClient(["ask", "-C", "[[reply:hi]]"], environment: session).status, 0)
        let again = try harness.runClient(["ask", "-C", "[[context]]"], environment: session)
        XCTAssertTrue(again.stdout.hasPrefix("context: user assistant user |"), again.stdout)
        let other = try harness.runClient(["ask", "-C", "[[context]]"], environment: ["CONFAB_SESSION": "test-2"])
        XCTAssertTrue(other.stdout.hasPrefix("context: user |"), other.stdout)
        XCTAssertEqual(try list().count, 2)
        // A deleted session conversation is made again on the next use.
        let id = try String(contentsOfFile: harness.directory + "/sessions/test-1", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try harness.runClient(["rm", id]).status, 0)
        let fresh = try harness.runClient(["ask", "-C", "[[context]]"], environment: session)
        XCTAssertTrue(fresh.stdout.hasPrefix("context: user |"), fresh.stdout)
        let bad = try harness.runClient(["ask", "-C", "x"], environment: ["CONFAB_SESSION": "../x"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("CONFAB_SESSION"), bad.stderr)
    }

    func testLastNeedsTheShellIntegrationAndSaysSo() throws {
        let refused = try harness.runClient(["ask", "--last", "why"], environment: ["CONFAB_LAST_COMMAND": ""])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("shell-init"), refused.stderr)
        let asked = try harness.runClient(["ask", "--last", "why [[context]]"],
                                          environment: ["CONFAB_LAST_COMMAND": "make", "CONFAB_LAST_STATUS": "2"])
        XCTAssertTrue(asked.stdout.contains("My previous command was:\nmake\nIt exited with status 2.\n\nwhy"), asked.stdout)
        XCTAssertEqual(try harness.runClient(["ask", "-c", "abcd", "-C", "x"]).status, 2)
    }
}
