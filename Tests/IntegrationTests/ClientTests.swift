import ConfabProtocol
import Foundation
import XCTest

/// The `confab` binary against the real daemon.
final class ClientTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testNewLsAskRenameCancelRm() throws {
        let created = try harness.runClient(["new", "--title", "demo"])
        XCTAssertEqual(created.status, 0, created.stderr)
        let id = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(ConversationID.isValid(id), id)

        let asked = try harness.runClient(["ask", "-c", String(id.prefix(5)), "[[reply:hello from the model]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout, "hello from the model\n")

        let listed = try harness.runClient(["ls"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertTrue(listed.stdout.contains(id) && listed.stdout.contains("demo") && listed.stdout.contains("2 messages"), listed.stdout)

        XCTAssertEqual(try harness.runClient(["rename", id, "new", "title"]).status, 0)
        let json = try harness.runClient(["ls", "--json"])
        let conversations = try JSON.parse(json.stdout)
        XCTAssertEqual(conversations.array?.first?["title"]?.string, "new title")

        let cancel = try harness.runClient(["cancel", id])
        XCTAssertEqual(cancel.status, 1)
        XCTAssertTrue(cancel.stderr.contains("nothing to cancel"), cancel.stderr)

        let status = try harness.runClient(["status"])
        XCTAssertEqual(status.status, 0)
        XCTAssertTrue(status.stdout.contains("conversations"), status.stdout)

        XCTAssertEqual(try harness.runClient(["rm", id]).status, 0)
        XCTAssertEqual(try harness.runClient(["ls"]).stdout, "")
        let gone = try harness.runClient(["rm", id])
        XCTAssertEqual(gone.status, 1)
        XCTAssertTrue(gone.stderr.contains("no conversation"), gone.stderr)
    }

    func testAskAppendsStdinAndPrintsOnlyTheReply() throws {
        let asked = try harness.runClient(["ask", "[[context]] summarise"], stdin: "line one\nline two\n")
        XCTAssertEqual(asked.status, 0, asked.stderr)
        // The fake upstream echoes what it received: the prompt, a blank line, then stdin.
        XCTAssertTrue(asked.stdout.hasPrefix("context: user | [[context]] summarise\n\nline one\nline two"), asked.stdout)
        XCTAssertTrue(asked.stderr.contains("conversation "), "the new conversation's id goes to stderr")
        let list = try JSON.parse(try harness.runClient(["ls", "--json"]).stdout)
        XCTAssertEqual(list.array?.count, 1)
    }

    func testAskFailsWithTheUpstreamsMessage() throws {
        let asked = try harness.runClient(["ask", "[[status:500]]"])
        XCTAssertEqual(asked.status, 1)
        XCTAssertTrue(asked.stderr.contains("fake upstream error 500"), asked.stderr)
    }

    func testUnreachableDaemonExits3() throws {
        harness.stopDaemon()
        let result = try harness.runClient(["ls"])
        XCTAssertEqual(result.status, 3)
        XCTAssertTrue(result.stderr.contains("cannot reach confabd"), result.stderr)
    }

    func testAttachShowsHistoryThenSendsTypedLinesAndDetachesAtEOF() throws {
        let id = try harness.runClient(["new", "--title", "chat"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:first answer]]"]).status, 0)
        let attached = try harness.runClient(["attach", id], stdin: "[[reply:second answer]]\n", environment: ["CONFAB_NAME": "Ana"])
        XCTAssertEqual(attached.status, 0, attached.stderr)
        XCTAssertTrue(attached.stdout.contains("first answer"), attached.stdout)
        // At end of input it detaches once its send is stored; the reply goes on without it.
        let client = try harness.client()
        try client.call("conversation.attach", ["conversation": .string(id), "history": 0])
        var history = try client.call("conversation.history", ["conversation": .string(id)])
        if history["messages"]?.array?.count == 3 {
            _ = try client.awaitReply("m4")
            history = try client.call("conversation.history", ["conversation": .string(id)])
        }
        XCTAssertEqual(history["messages"]?.array?.count, 4)
        XCTAssertEqual(history["messages"]?.array?[3]["content"]?.string, "second answer")
        XCTAssertEqual(history["messages"]?.array?[2]["author"]?["name"]?.string, "Ana")
    }
}
