import ConfabProtocol
import Foundation
import XCTest

private let config = """
    [profiles.guide]
    system = "You are a guide."
    welcome = ["Welcome aboard.", "Which way?"]
    quick_replies = ["go left [[reply:went left]]", "go right [[reply:went right]]"]

    [profiles.terse]
    model = "terse-model"
    temperature = 0.5
    stop = ["END"]

    """

/// Profiles from the shell and quick replies inside attach.
final class ProfileClientTests: TmuxTestCase {
    override func setUpWithError() throws {
        harness = try Harness(config: config, topLevel: "default_profile = \"guide\"")
        tmux = Tmux(directory: harness.directory)
    }

    private func history(_ id: String) throws -> [JSON] {
        try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
    }

    func testAttachNumbersQuickRepliesAndSendsThePickedOne() throws {
        let id = try harness.runClient(["new", "--title", "tour"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let pane = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 140, height: 40)
        try tmux.waitForText(pane, "== tour (\(id)) · profile guide · fake-model ==")
        try tmux.waitForText(pane, "[1] go left [[reply:went left]]  [2] go right [[reply:went right]]")
        try tmux.type(pane, "/2")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: went right")
        // The text shows as it streams; the reply is stored when it ends, a moment later.
        let deadline = Date().addingTimeInterval(15)
        while try history(id).count < 4, Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try history(id).map { $0["content"]?.string }, ["Welcome aboard.", "Which way?", "go right [[reply:went right]]", "went right"])

        // Answered: a number is a message again, and /N says nothing is offered.
        try tmux.type(pane, "/1")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "no quick replies are offered")

        // A new conversation from the default profile offers them again; the number alone picks one.
        try tmux.type(pane, "/new second")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "· profile guide · fake-model ==")
        try tmux.waitForText(pane, "[1] go left")
        try tmux.type(pane, "1")
        try tmux.send(pane, ["Enter"])
        try tmux.waitForText(pane, "assistant: went left")
        XCTAssertEqual(try history(id).count, 4, "the first conversation is left as it was")
    }

    func testNewAskAndProfilesFromTheShell() throws {
        let listed = try harness.runClient(["profiles"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(listed.stdout, """
            NAME     PROVIDER  MODEL        PARAMETERS
            guide *  default   fake-model   -
            terse    default   terse-model  stop=["END"] temperature=0.5

            """)

        let json = try harness.runClient(["profiles", "--json"])
        XCTAssertEqual(try JSON.parse(json.stdout).array?.map { $0["name"]?.string }, ["guide", "terse"])

        let id = try harness.runClient(["new", "--profile", "terse"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let info = try harness.client().call("conversation.get", ["conversation": .string(id)])["conversation"]
        XCTAssertEqual(info?["profile"]?.string, "terse")
        XCTAssertEqual(info?["model"]?.string, "terse-model")

        let asked = try harness.runClient(["ask", "--profile", "terse", "q [[reply:short]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout, "short\n")
        XCTAssertNotEqual(harness.upstreamRequests().last?["body"]?["model"]?.string, nil)
        XCTAssertEqual(harness.upstreamRequests().last?["body"]?["temperature"], .double(0.5))
        XCTAssertTrue(asked.stderr.hasPrefix("conversation "), asked.stderr)

        let unknown = try harness.runClient(["new", "--profile", "nope"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no profile \"nope\""), unknown.stderr)
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "--profile", "terse", "x"]).status, 2)
    }
}
