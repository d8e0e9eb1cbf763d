import ConfabProtocol
import Foundation
import XCTest

/// `--provider NAME` on `confab new` and `confab ask`: a new conversation on that provider,
/// `--model` checked against what `confab models --provider NAME` lists.
final class ProviderClientTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws {
        harness = try Harness(config: """
            [providers.second]
            api = "chat"
            base_url = "$UPSTREAM/second/v1"
            api_key = "sk-second"
            model = "second-model"
            timeout_seconds = 5

            """)
    }

    override func tearDown() { harness?.tearDown() }

    private func info(_ id: String) throws -> JSON? {
        let list = try harness.client().call("conversation.list", ["limit": 100])
        return list["conversations"]?.array?.first { $0["id"]?.string == id }
    }

    func testNewMakesTheConversationOnTheProviderNamed() throws {
        let made = try harness.runClient(["new", "--provider", "second"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let id = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try info(id)?["provider"]?.string, "second")
        XCTAssertEqual(try info(id)?["model"]?.string, "second-model")

        // A model the provider lists (the fake server lists fake-model and fake-model-2).
        let listed = try harness.runClient(["new", "--provider", "second", "--model", "fake-model-2"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let other = listed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try info(other)?["provider"]?.string, "second")
        XCTAssertEqual(try info(other)?["model"]?.string, "fake-model-2")
    }

    func testAModelTheProviderDoesNotListIsRefusedBeforeAnythingIsMade() throws {
        let before = try harness.client().call("conversation.list", ["limit": 100])["conversations"]?.array?.count
        let refused = try harness.runClient(["new", "--provider", "second", "--model", "mock-gpt"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("provider second has no model mock-gpt: it lists fake-model, fake-model-2 (confab models --provider second)"),
                      refused.stderr)
        let asked = try harness.runClient(["ask", "--provider", "second", "--model", "mock-gpt", "hello"])
        XCTAssertEqual(asked.status, 1)
        XCTAssertTrue(asked.stderr.contains("provider second has no model mock-gpt"), asked.stderr)
        XCTAssertEqual(try harness.client().call("conversation.list", ["limit": 100])["conversations"]?.array?.count, before)

        let unknown = try harness.runClient(["new", "--provider", "nosuch"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no provider \"nosuch\""), unknown.stderr)
    }

    func testAskWithAProviderAsksThatProvidersServer() throws {
        let asked = try harness.runClient(["ask", "--provider", "second", "[[reply:from the second]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout.trimmingCharacters(in: .newlines), "from the second")
        let id = try XCTUnwrap(asked.stderr.split(separator: "\n").first { $0.hasPrefix("conversation ") }?.split(separator: " ").last.map(String.init))
        XCTAssertEqual(try info(id)?["provider"]?.string, "second")
        let paths = harness.upstreamRequests().compactMap { $0["path"]?.string }
        XCTAssertTrue(paths.contains { $0.hasPrefix("/second/v1/chat/completions") }, "\(paths)")
    }

    func testAConversationsProviderStays() throws {
        let id = try harness.runClient(["new"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let refused = try harness.runClient(["ask", "-c", id, "--provider", "second", "hello"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("a conversation's provider stays"), refused.stderr)
    }
}
