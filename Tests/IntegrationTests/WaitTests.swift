import ConfabProtocol
import Foundation
import XCTest

/// `confab wait ID`: blocks until the reply in flight ends, and exits by how it ended, as `ask` does.
final class WaitTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// `confab wait ID` started while a reply is held upstream; its exit status once released,
    /// and what it said on standard error.
    private func waitOnHeld(_ directives: String) throws -> (status: Int32?, stderr: String) {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        _ = try client.call("message.send", ["conversation": .string(id), "content": .string("[[hold:1 w]] " + directives)])
        try harness.waitUntilUpstreamHolds("w")
        let errors = harness.directory + "/wait-\(UUID().uuidString.prefix(8)).err"
        let waiting = try Child(Binaries.path("confab"), ["--socket", harness.socketPath, "wait", id], logFile: errors)
        defer { waiting.stop() }
        try harness.releaseUpstream("w")
        let status = waiting.wait(seconds: 20)
        return (status, (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
    }

    func testAReplyThatCompletesExitsZero() throws {
        let (status, stderr) = try waitOnHeld("[[reply:all of it]]")
        XCTAssertEqual(status, 0, stderr)
    }

    /// Only a wait that followed the reply can know it failed: with nothing in flight and no
    /// reply stored it would have exited 0.
    func testAReplyThatFailsExitsOneSayingWhy() throws {
        let (status, stderr) = try waitOnHeld("[[reply:half of it]] [[error-mid:3]]")
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(stderr.contains("the reply failed"), stderr)
    }

    func testAReplyCutAtTheLengthLimitExitsFour() throws {
        let (status, stderr) = try waitOnHeld("[[reply:cut short]] [[finish:length]]")
        XCTAssertEqual(status, 4, stderr)
        XCTAssertTrue(stderr.contains("confab continue"), stderr)
    }

    func testWithNothingInFlightItExitsByTheLastReply() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        XCTAssertEqual(try harness.runClient(["wait", id]).status, 0, "no reply at all")
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:done]]"]).status, 0)
        XCTAssertEqual(try harness.runClient(["wait", id]).status, 0)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "[[reply:cut]] [[finish:length]]"]).status, 4)
        let cut = try harness.runClient(["wait", id])
        XCTAssertEqual(cut.status, 4, cut.stderr)
        XCTAssertEqual(try harness.runClient(["wait", "nosuchconversation"]).status, 1)
    }
}
