import ConfabProtocol
import Foundation
import XCTest

private let defaultProfile = "default_profile = \"guide\""

private let profiles = """
    [providers.claude]
    api = "anthropic"
    base_url = "$UPSTREAM/anthropic/v1"
    api_key = "sk-ant-claude"
    model = "claude-test"
    max_tokens = 500
    timeout_seconds = 5

    [profiles.tuned]
    system = "Be brief."
    temperature = 0
    top_p = 0.5
    max_tokens = 77
    presence_penalty = -1.5
    frequency_penalty = 1
    stop = ["END", "STOP"]
    seed = 42

    [profiles.sonnet]
    provider = "claude"
    model = "claude-profile-model"
    temperature = 1.5
    top_p = 0.25
    max_tokens = 99
    stop = ["~~~"]

    [profiles.guide]
    welcome = ["Hello, I am your guide.", "Shall we start?"]
    quick_replies = ["yes", "no", "tell me more"]

    """

final class ProfileTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness(config: profiles, topLevel: defaultProfile) }
    override func tearDown() { harness?.tearDown() }

    private func create(_ client: RPCClient, _ params: JSON) throws -> (id: String, info: JSON) {
        let result = try client.call("conversation.create", params)
        let info = try XCTUnwrap(result["conversation"])
        let id = try XCTUnwrap(info["id"]?.string)
        return (id, info)
    }

    @discardableResult
    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> JSON {
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let (_, final) = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        return final
    }

    private func lastBody(to pathSuffix: String) throws -> JSON {
        let request = try XCTUnwrap(harness.upstreamRequests().last { $0["path"]?.string?.hasSuffix(pathSuffix) == true }, "no request to \(pathSuffix)")
        return try XCTUnwrap(request["body"])
    }

    private func assertInvalid(_ client: RPCClient, _ params: JSON, mentioning text: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            try client.call("conversation.create", params)
            XCTFail("created with \(params.text)", file: file, line: line)
        } catch let error as RPCError {
            XCTAssertEqual(error.code, RPCError.invalidParams, file: file, line: line)
            XCTAssertTrue(error.message.contains(text), "\(error.message) does not mention \(text)", file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    func testEveryParameterReachesAChatBodyWithItsNameAndType() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["profile": "tuned"])
        XCTAssertEqual(info["profile"]?.string, "tuned")
        XCTAssertEqual(info["system"]?.string, "Be brief.")
        XCTAssertEqual(info["params"]?.text,
                       #"{"frequency_penalty":1,"max_tokens":77,"presence_penalty":-1.5,"seed":42,"stop":["END","STOP"],"temperature":0,"top_p":0.5}"#)
        let reply = try send(client, id, "[[reply:ok]]")
        XCTAssertEqual(reply["params"], info["params"], "a reply records the parameters it was asked with")
        let body = try lastBody(to: "/chat/completions")
        XCTAssertEqual(body["temperature"], .double(0))
        XCTAssertEqual(body["top_p"], .double(0.5))
        XCTAssertEqual(body["max_tokens"], .int(77))
        XCTAssertEqual(body["presence_penalty"], .double(-1.5))
        XCTAssertEqual(body["frequency_penalty"], .double(1))
        XCTAssertEqual(body["stop"], .array(["END", "STOP"]))
        XCTAssertEqual(body["seed"], .int(42))
        XCTAssertEqual(body["messages"]?.array?.first?["content"]?.string, "Be brief.")
    }

    func testAnthropicGetsItsOwnNames() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["profile": "sonnet"])
        XCTAssertEqual(info["provider"]?.string, "claude")
        XCTAssertEqual(info["model"]?.string, "claude-profile-model")
        try send(client, id, "[[reply:ok]]")
        let body = try lastBody(to: "/messages")
        XCTAssertEqual(body["model"]?.string, "claude-profile-model")
        XCTAssertEqual(body["temperature"], .double(1.5))
        XCTAssertEqual(body["top_p"], .double(0.25))
        XCTAssertEqual(body["max_tokens"], .int(99))
        XCTAssertEqual(body["stop_sequences"], .array(["~~~"]))
        XCTAssertNil(body["stop"])

        // The provider's max_tokens is the default beneath a conversation's own.
        let (plain, _) = try create(client, ["provider": "claude"])
        try send(client, plain, "[[reply:ok]]")
        let plainBody = try lastBody(to: "/messages")
        XCTAssertEqual(plainBody["max_tokens"], .int(500))
        XCTAssertNil(plainBody["top_p"])
        XCTAssertNil(plainBody["stop_sequences"])
    }

    func testParamsOverrideTheProfilesAndOnlyWhatIsSetIsSent() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["profile": "tuned", "params": ["temperature": 1, "stop": ["\n"]], "system": "Be long.", "model": "other-model"])
        XCTAssertEqual(info["params"]?["temperature"], .double(1))
        XCTAssertEqual(info["params"]?["seed"], .int(42))
        try send(client, id, "[[reply:ok]]")
        let body = try lastBody(to: "/chat/completions")
        XCTAssertEqual(body["temperature"], .double(1))
        XCTAssertEqual(body["stop"], .array(["\n"]))
        XCTAssertEqual(body["seed"], .int(42))
        XCTAssertEqual(body["model"]?.string, "other-model")
        XCTAssertEqual(body["messages"]?.array?.first?["content"]?.string, "Be long.")

        // Without a profile (naming the provider leaves the default profile out) nothing extra is sent.
        let (plain, plainInfo) = try create(client, ["provider": "default"])
        XCTAssertNil(plainInfo["profile"])
        XCTAssertEqual(plainInfo["params"], .object([:]))
        let reply = try send(client, plain, "[[reply:ok]]")
        XCTAssertNil(reply["params"])
        let plainBody = try lastBody(to: "/chat/completions")
        for key in ["temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty", "stop", "seed"] {
            XCTAssertNil(plainBody[key], key)
        }
    }

    func testBadParamsAreRefusedNamingTheField() throws {
        let client = try harness.client()
        assertInvalid(client, ["profile": "nope"], mentioning: #"no profile "nope""#)
        assertInvalid(client, ["params": ["temperature": 3]], mentioning: "params.temperature must be a number from 0 to 2")
        assertInvalid(client, ["params": ["top_p": "high"]], mentioning: "params.top_p must be a number, not string")
        assertInvalid(client, ["params": ["max_tokens": 0]], mentioning: "params.max_tokens must be at least 1")
        assertInvalid(client, ["params": ["stop": ["a", "b", "c", "d", "e"]]], mentioning: "params.stop must hold at most 4 strings")
        assertInvalid(client, ["params": ["colour": 1]], mentioning: "params.colour is not a sampling parameter")
        assertInvalid(client, ["params": 3], mentioning: "params must be an object")
        assertInvalid(client, ["profile": "sonnet", "params": ["seed": 1]], mentioning: "params.seed is not one the anthropic API takes")
        assertInvalid(client, ["provider": "claude", "params": ["presence_penalty": 1]], mentioning: "params.presence_penalty is not one the anthropic API takes")
        // The profile's own parameters count too, checked against the provider named over its own.
        assertInvalid(client, ["profile": "tuned", "provider": "claude"], mentioning: "params.presence_penalty is not one the anthropic API takes")
        XCTAssertEqual(try client.call("conversation.list")["conversations"]?.array?.count, 0)
    }

    func testWelcomeMessagesAndQuickRepliesAreStoredAndKept() throws {
        let client = try harness.client()
        // The default profile.
        let (id, info) = try create(client, [:])
        XCTAssertEqual(info["profile"]?.string, "guide")
        XCTAssertEqual(info["message_count"], .int(2))
        func check(_ messages: [JSON]) {
            XCTAssertEqual(messages.map { $0["content"]?.string }, ["Hello, I am your guide.", "Shall we start?"])
            XCTAssertEqual(messages.map { $0["role"]?.string }, ["assistant", "assistant"])
            XCTAssertEqual(messages.map { $0["status"]?.string }, ["complete", "complete"])
            XCTAssertNil(messages.first?["quick_replies"])
            XCTAssertEqual(messages.last?["quick_replies"], .array(["yes", "no", "tell me more"]))
        }
        check(try client.call("conversation.attach", ["conversation": .string(id)])["messages"]?.array ?? [])
        XCTAssertTrue(harness.upstreamRequests().isEmpty, "a welcome is not asked for")

        let reply = try send(client, id, "[[reply:ok]]")
        XCTAssertEqual(reply["id"]?.string, MessageID.make(4))
        let messages = try lastBody(to: "/chat/completions")["messages"]?.array ?? []
        // Turns of one role are joined, so the welcome goes as one assistant turn.
        XCTAssertEqual(messages.map { $0["role"]?.string }, ["assistant", "user"])
        XCTAssertEqual(messages.first?["content"]?.string, "Hello, I am your guide.\n\nShall we start?")

        client.close()
        try harness.restartDaemon()
        let again = try harness.client()
        let attached = try again.call("conversation.attach", ["conversation": .string(id)])["messages"]?.array ?? []
        check(Array(attached.prefix(2)))
        XCTAssertEqual(attached.count, 4)
    }

    func testAProviderNamedOverTheProfilesBringsItsOwnModel() throws {
        let client = try harness.client()
        let (_, info) = try create(client, ["profile": "sonnet", "provider": "default"])
        XCTAssertEqual(info["provider"]?.string, "default")
        XCTAssertEqual(info["model"]?.string, "fake-model")
        XCTAssertEqual(info["profile"]?.string, "sonnet")
        XCTAssertEqual(info["params"]?["max_tokens"], .int(99))
    }

    func testProfilesList() throws {
        let client = try harness.client()
        let listed = try client.call("profiles.list")["profiles"]?.array ?? []
        XCTAssertEqual(listed.map { $0["name"]?.string }, ["guide", "sonnet", "tuned"])
        XCTAssertEqual(listed.map { $0["default"] }, [.bool(true), .bool(false), .bool(false)])
        XCTAssertEqual(listed.map { $0["provider"]?.string }, ["default", "claude", "default"])
        XCTAssertEqual(listed.map { $0["model"]?.string }, ["fake-model", "claude-profile-model", "fake-model"])
        XCTAssertEqual(listed[2]["system"]?.string, "Be brief.")
        XCTAssertNil(listed[0]["system"])
        XCTAssertEqual(listed[0]["params"], .object([:]))
        XCTAssertEqual(listed[1]["params"]?.text, #"{"max_tokens":99,"stop":["~~~"],"temperature":1.5,"top_p":0.25}"#)
    }

    func testARestartAndAForkKeepProfileAndParams() throws {
        let client = try harness.client()
        let (id, info) = try create(client, ["profile": "tuned", "params": ["seed": 7]])
        try send(client, id, "[[reply:ok]]")
        let fork = try client.call("conversation.fork", ["conversation": .string(id)])["conversation"]
        XCTAssertEqual(fork?["profile"]?.string, "tuned")
        XCTAssertEqual(fork?["params"], info["params"])
        client.close()
        try harness.restartDaemon()
        let again = try harness.client()
        for conversation in [id, try XCTUnwrap(fork?["id"]?.string)] {
            let got = try again.call("conversation.get", ["conversation": .string(conversation)])["conversation"]
            XCTAssertEqual(got?["profile"]?.string, "tuned")
            XCTAssertEqual(got?["params"], info["params"])
            XCTAssertEqual(got?["params"]?["seed"], .int(7))
        }
        let listed = try again.call("conversation.list")["conversations"]?.array ?? []
        XCTAssertEqual(listed.map { $0["params"] }, [info["params"], info["params"]])
        try send(again, id, "[[reply:after]]")
        XCTAssertEqual(try lastBody(to: "/chat/completions")["seed"], .int(7))
    }

    func testAReloadWithABadProfileKeepsTheOldOnes() throws {
        try harness.writeConfig(profiles + "[profiles.broken]\ntemperature = 9\n", topLevel: defaultProfile)
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while !harness.log().contains("config reload rejected"), Date() < deadline { usleep(50_000) }
        XCTAssertTrue(harness.log().contains("profiles.broken.temperature must be a number from 0 to 2"), harness.log())
        let client = try harness.client()
        XCTAssertEqual(try client.call("profiles.list")["profiles"]?.array?.count, 3)
    }
}
