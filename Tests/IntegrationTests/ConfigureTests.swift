import ConfabProtocol
import Foundation
import XCTest

private let profiles = """
    [providers.claude]
    api = "anthropic"
    base_url = "$UPSTREAM/anthropic/v1"
    api_key = "sk-ant-claude"
    model = "claude-test"
    timeout_seconds = 5

    [profiles.tuned]
    model = "tuned-model"
    system = "Be brief."
    temperature = 0.5
    seed = 7

    [profiles.sonnet]
    provider = "claude"
    model = "claude-profile-model"

    """

/// `conversation.configure`: new settings for the next reply, stored, announced and kept.
final class ConfigureTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness(config: profiles) }
    override func tearDown() { harness?.tearDown() }

    private func create(_ client: RPCClient, _ params: JSON = [:]) throws -> String {
        try XCTUnwrap(try client.call("conversation.create", params)["conversation"]?["id"]?.string)
    }

    private func configure(_ client: RPCClient, _ id: String, _ params: [String: JSON]) throws -> JSON {
        var all = params
        all["conversation"] = .string(id)
        return try XCTUnwrap(try client.call("conversation.configure", .object(all))["conversation"])
    }

    @discardableResult
    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> JSON {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
    }

    private func lastBody() throws -> JSON {
        try XCTUnwrap(harness.upstreamRequests().last { $0["path"]?.string?.hasSuffix("/chat/completions") == true }?["body"])
    }

    private func assertInvalid(_ client: RPCClient, _ params: JSON, mentioning text: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            try client.call("conversation.configure", params)
            XCTFail("configured with \(params.text)", file: file, line: line)
        } catch let error as RPCError {
            XCTAssertEqual(error.code, RPCError.invalidParams, file: file, line: line)
            XCTAssertTrue(error.message.contains(text), "\(error.message) does not mention \(text)", file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    func testTheNextRequestUsesTheNewSettingsAndAttachedClientsHear() throws {
        let client = try harness.client()
        let other = try harness.client(name: "other")
        let id = try create(client, ["system": "Old prompt."])
        try client.call("conversation.attach", ["conversation": .string(id)])
        try other.call("conversation.attach", ["conversation": .string(id)])
        ask(client, id, "[[reply:one]]")
        XCTAssertEqual(try lastBody()["model"]?.string, "fake-model")

        let info = try configure(client, id, ["model": "new-model", "system": "New prompt.", "params": ["temperature": 1.25, "stop": ["END"]]])
        XCTAssertEqual(info["model"]?.string, "new-model")
        XCTAssertEqual(info["system"]?.string, "New prompt.")
        XCTAssertEqual(info["params"]?.text, #"{"stop":["END"],"temperature":1.25}"#)
        let heard = try other.collect { method, _ in method == "conversation.updated" }.last
        XCTAssertEqual(heard?.params["info"]?["model"]?.string, "new-model")
        XCTAssertEqual(heard?.params["info"]?["system"]?.string, "New prompt.")

        let reply = try send(client, id, "[[reply:two]]")
        XCTAssertEqual(reply["model"]?.string, "new-model")
        let body = try lastBody()
        XCTAssertEqual(body["model"]?.string, "new-model")
        XCTAssertEqual(body["temperature"], .double(1.25))
        XCTAssertEqual(body["stop"], .array(["END"]))
        XCTAssertEqual(body["messages"]?.array?.first?["content"]?.string, "New prompt.")

        // Params given alone change only the keys given; "" clears the system prompt.
        let cleared = try configure(client, id, ["system": "", "params": ["seed": 3]])
        XCTAssertNil(cleared["system"])
        XCTAssertEqual(cleared["params"]?.text, #"{"seed":3,"stop":["END"],"temperature":1.25}"#)
        ask(client, id, "[[reply:three]]")
        XCTAssertEqual(try lastBody()["messages"]?.array?.first?["role"]?.string, "user")
        XCTAssertEqual(try lastBody()["seed"], .int(3))
    }

    private func ask(_ client: RPCClient, _ id: String, _ content: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNoThrow(try send(client, id, content), file: file, line: line)
    }

    func testAProfileBringsItsSettingsUnderThoseGivenWithIt() throws {
        let client = try harness.client()
        let id = try create(client)
        let info = try configure(client, id, ["profile": "tuned", "params": ["seed": 1]])
        XCTAssertEqual(info["profile"]?.string, "tuned")
        XCTAssertEqual(info["model"]?.string, "tuned-model")
        XCTAssertEqual(info["system"]?.string, "Be brief.")
        XCTAssertEqual(info["params"]?.text, #"{"seed":1,"temperature":0.5}"#)
        let given = try configure(client, id, ["profile": "tuned", "model": "mine", "system": "Mine."])
        XCTAssertEqual(given["model"]?.string, "mine")
        XCTAssertEqual(given["system"]?.string, "Mine.")
        XCTAssertEqual(given["params"]?.text, #"{"seed":7,"temperature":0.5}"#)
        XCTAssertEqual(given["provider"]?.string, "default")
    }

    func testAReplyInFlightKeepsItsSettings() throws {
        let client = try harness.client()
        let id = try create(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:30]] [[delay:50]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try client.collect { method, params in method == "message.delta" && params["message"]?.string == reply }
        let info = try configure(client, id, ["model": "later-model"])
        XCTAssertEqual(info["model"]?.string, "later-model")
        let (_, final) = try client.awaitReply(reply)
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["model"]?.string, "fake-model")
        XCTAssertEqual(try lastBody()["model"]?.string, "fake-model")
        ask(client, id, "[[reply:next]]")
        XCTAssertEqual(try lastBody()["model"]?.string, "later-model")
    }

    func testARestartKeepsTheSettingsWithOrWithoutReadingTheLog() throws {
        let client = try harness.client()
        let id = try create(client, ["system": "Old."])
        _ = try configure(client, id, ["model": "kept-model", "system": .null, "params": ["top_p": 0.5]])
        client.close()
        try harness.restartDaemon()
        XCTAssertTrue(harness.log().contains("1 conversations listed from the index, 0 logs read"), harness.log())
        let again = try harness.client()
        let listed = try XCTUnwrap(again.call("conversation.list")["conversations"]?.array?.first)
        XCTAssertEqual(listed["model"]?.string, "kept-model")
        XCTAssertNil(listed["system"])
        XCTAssertEqual(listed["params"]?.text, #"{"top_p":0.5}"#)
        try again.call("conversation.attach", ["conversation": .string(id)])
        ask(again, id, "[[reply:ok]]")
        let body = try lastBody()
        XCTAssertEqual(body["model"]?.string, "kept-model")
        XCTAssertEqual(body["top_p"], .double(0.5))
        XCTAssertEqual(body["messages"]?.array?.count, 1, "no system prompt")

        // Without the index the log alone says the same.
        again.close()
        _ = harness.stopDaemon()
        XCTAssertEqual(unlink(harness.dataDirectory + "/index.jsonl"), 0)
        try harness.startDaemon()
        let third = try harness.client()
        let read = try XCTUnwrap(third.call("conversation.get", ["conversation": .string(id)])["conversation"])
        XCTAssertEqual(read["model"]?.string, "kept-model")
        XCTAssertEqual(read["params"]?.text, #"{"top_p":0.5}"#)
    }

    func testRefusals() throws {
        let client = try harness.client()
        let id = try create(client)
        let conversation = JSON.string(id)
        assertInvalid(client, ["conversation": conversation], mentioning: "nothing to change")
        assertInvalid(client, ["conversation": conversation, "profile": "nope"], mentioning: #"parameter "profile": no profile "nope""#)
        assertInvalid(client, ["conversation": conversation, "profile": "sonnet"], mentioning: #"profile "sonnet" uses provider "claude""#)
        assertInvalid(client, ["conversation": conversation, "model": "two words"], mentioning: #"parameter "model""#)
        assertInvalid(client, ["conversation": conversation, "model": 3], mentioning: #"parameter "model" must be a string"#)
        assertInvalid(client, ["conversation": conversation, "params": ["temperature": 3]], mentioning: "params.temperature must be a number from 0 to 2")
        let claude = try create(client, ["provider": "claude"])
        assertInvalid(client, ["conversation": .string(claude), "params": ["seed": 1]], mentioning: "params.seed is not one the anthropic API takes")
        let info = try XCTUnwrap(client.call("conversation.get", ["conversation": conversation])["conversation"])
        XCTAssertEqual(info["model"]?.string, "fake-model")
        XCTAssertEqual(info["params"], .object([:]))
    }
}
