import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

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

    /// A runtime directory of this test's own, as XDG_RUNTIME_DIR.
    func runtimeDirectory() throws -> String {
        let runtime = harness.directory + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return runtime
    }

    func testContinueInASessionMakesThenKeepsItsConversation() throws {
        let runtime = try runtimeDirectory()
        let session = ["CONFAB_SESSION": "test-1", "XDG_RUNTIME_DIR": runtime]
        XCTAssertEqual(try harness.runClient(["ask", "-C", "[[reply:hi]]"], environment: session).status, 0)
        let again = try harness.runClient(["ask", "-C", "[[context]]"], environment: session)
        XCTAssertTrue(again.stdout.hasPrefix("context: user assistant user |"), again.stdout)
        let other = try harness.runClient(["ask", "-C", "[[context]]"], environment: ["CONFAB_SESSION": "test-2", "XDG_RUNTIME_DIR": runtime])
        XCTAssertTrue(other.stdout.hasPrefix("context: user |"), other.stdout)
        XCTAssertEqual(try list().count, 2)
        // The map lives in the runtime directory, closed to everyone else.
        var info = stat()
        XCTAssertEqual(lstat(runtime + "/confab/sessions", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        // A deleted session conversation is made again on the next use.
        let id = try String(contentsOfFile: runtime + "/confab/sessions/test-1", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try harness.runClient(["rm", id]).status, 0)
        let fresh = try harness.runClient(["ask", "-C", "[[context]]"], environment: session)
        XCTAssertTrue(fresh.stdout.hasPrefix("context: user |"), fresh.stdout)
        let bad = try harness.runClient(["ask", "-C", "x"], environment: ["CONFAB_SESSION": "../x"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("CONFAB_SESSION"), bad.stderr)
    }

    /// Another user who made the sessions directory first (beside a socket in /tmp, or in
    /// /tmp/confab-$UID) could send this shell's questions to a conversation of theirs.
    func testASessionsDirectoryOfAnotherUserIsNeverUsed() throws {
        guard getuid() == 0 else { throw unavailable("needs root, to make directories that belong to another user") }
        let planted = try harness.createConversation(try harness.client(), title: "planted")
        func plant(_ directory: String) throws {
            try FileManager.default.createDirectory(atPath: directory + "/sessions", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
            try (planted + "\n").write(toFile: directory + "/sessions/victim", atomically: true, encoding: .utf8)
            for path in [directory + "/sessions", directory + "/sessions/victim"] { XCTAssertEqual(chown(path, 4242, 4242), 0) }
        }
        // Beside the socket, where the map used to be: not looked at.
        try plant(harness.directory)
        let runtime = try runtimeDirectory()
        let session = ["CONFAB_SESSION": "victim", "XDG_RUNTIME_DIR": runtime]
        let first = try harness.runClient(["ask", "-C", "[[reply:one]]"], environment: session)
        XCTAssertEqual(first.status, 0, first.stderr)
        // In the runtime directory, but someone else's: refused, and said so.
        try? FileManager.default.removeItem(atPath: runtime + "/confab")
        try plant(runtime + "/confab")
        XCTAssertEqual(chown(runtime + "/confab", 4242, 4242), 0)
        let second = try harness.runClient(["ask", "-C", "[[reply:two]]"], environment: session)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertTrue(second.stderr.contains("belongs to uid 4242"), second.stderr)
        let history = try harness.client().call("conversation.history", ["conversation": .string(planted)])
        XCTAssertEqual(history["messages"]?.array?.count, 0, "a question went to the planted conversation")
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
