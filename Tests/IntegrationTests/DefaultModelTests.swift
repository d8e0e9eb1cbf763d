import ConfabProtocol
import Foundation
import XCTest

/// A conversation never given a model follows the configured default; one given a model keeps it.
final class DefaultModelTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    private func reload(model: String, extra: String = "") throws {
        let marker = "config reloaded from"
        let before = harness.log().components(separatedBy: marker).count
        var config = "[upstream]\nbase_url = \"\(harness.upstreamURL)/v1\"\nmodel = \"\(model)\"\ntimeout_seconds = 5\nmax_retries = 0\n" + extra
        config = config.replacingOccurrences(of: "$UPSTREAM", with: harness.upstreamURL)
        try config.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while harness.log().components(separatedBy: marker).count == before {
            guard Date() < deadline else { throw HarnessError(description: "no reload:\n\(harness.log())") }
            usleep(10_000)
        }
    }

    /// The models the fake upstream was asked for, in order.
    private func askedModels() -> [String] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/chat/completions") == true }.compactMap { $0["body"]?["model"]?.string }
    }

    private func info(_ id: String) throws -> JSON {
        try XCTUnwrap(try harness.client().call("conversation.get", ["conversation": .string(id)])["conversation"])
    }

    /// A newcomer's first `confab ask`, made before a model was configured, uses the model
    /// configured later; a conversation given `--model` keeps it; `confab show` says which.
    func testTheDaysConversationFollowsTheConfiguredDefault() throws {
        let first = try harness.runClient(["ask", "first question [[reply:one]]"])
        XCTAssertEqual(first.status, 0, first.stderr)
        let chosen = try harness.runClient(["ask", "--new", "--model", "fake-model", "chosen [[reply:two]]"])
        XCTAssertEqual(chosen.status, 0, chosen.stderr)
        XCTAssertEqual(askedModels(), ["fake-model", "fake-model"])
        let list = try harness.client().call("conversation.list")["conversations"]?.array ?? []
        XCTAssertEqual(list.count, 2, "\(list)")
        // The day's conversation, and the one --new made (titled by its prompt).
        let chosenID = try XCTUnwrap(list.first { $0["title"]?.string?.hasPrefix("chosen") == true }?["id"]?.string, "\(list)")
        let followerID = try XCTUnwrap(list.first { $0["id"]?.string != chosenID }?["id"]?.string, "\(list)")
        XCTAssertEqual(try info(followerID)["model_default"]?.bool, true)
        XCTAssertNil(try info(chosenID)["model_default"])

        try reload(model: "fake-model-2")
        XCTAssertEqual(try info(followerID)["model"]?.string, "fake-model-2")
        XCTAssertEqual(try info(chosenID)["model"]?.string, "fake-model")
        let again = try harness.runClient(["ask", "second question [[reply:three]]"])
        XCTAssertEqual(again.status, 0, again.stderr)
        let third = try harness.runClient(["ask", "-c", chosenID, "still chosen [[reply:four]]"])
        XCTAssertEqual(third.status, 0, third.stderr)
        XCTAssertEqual(askedModels(), ["fake-model", "fake-model", "fake-model-2", "fake-model"])

        let shownFollower = try harness.runClient(["show", followerID])
        XCTAssertTrue(shownFollower.stdout.contains("\nmodel: fake-model-2 (the default: it follows the config)\n"), shownFollower.stdout)
        let shownChosen = try harness.runClient(["show", chosenID])
        XCTAssertTrue(shownChosen.stdout.contains("\nmodel: fake-model\n"), shownChosen.stdout)

        // After a restart, read from the index, it follows the config it starts with.
        try harness.writeConfig("")
        try harness.restartDaemon()
        XCTAssertEqual(try info(followerID)["model"]?.string, "fake-model")
        XCTAssertEqual(try info(followerID)["model_default"]?.bool, true)
    }

    /// `/model` (conversation.configure with a model) chooses it: the conversation keeps it from then on.
    func testChoosingAModelEndsFollowing() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        XCTAssertEqual(try info(id)["model_default"]?.bool, true)
        try client.call("conversation.configure", ["conversation": .string(id), "model": "fake-model-2"])
        XCTAssertNil(try info(id)["model_default"])
        try reload(model: "fake-model-3")
        XCTAssertEqual(try info(id)["model"]?.string, "fake-model-2")
        // And a restart reads the same from the log's settings record.
        try harness.restartDaemon()
        XCTAssertEqual(try info(id)["model"]?.string, "fake-model-2")
        XCTAssertNil(try info(id)["model_default"])
    }

    /// A profile's model is chosen; a profile without one leaves the conversation on the default.
    func testAProfilesModelIsChosen() throws {
        try reload(model: "fake-model", extra: "[profiles.pinned]\nmodel = \"fake-model-2\"\n[profiles.loose]\nsystem = \"Be brief.\"\n")
        let client = try harness.client()
        let pinned = try XCTUnwrap(try client.call("conversation.create", ["title": "p", "profile": "pinned"])["conversation"]?["id"]?.string)
        let loose = try XCTUnwrap(try client.call("conversation.create", ["title": "l", "profile": "loose"])["conversation"]?["id"]?.string)
        try reload(model: "fake-model-3", extra: "[profiles.pinned]\nmodel = \"fake-model-2\"\n[profiles.loose]\nsystem = \"Be brief.\"\n")
        XCTAssertEqual(try info(pinned)["model"]?.string, "fake-model-2")
        XCTAssertNil(try info(pinned)["model_default"])
        XCTAssertEqual(try info(loose)["model"]?.string, "fake-model-3")
        XCTAssertEqual(try info(loose)["model_default"]?.bool, true)
    }
}
