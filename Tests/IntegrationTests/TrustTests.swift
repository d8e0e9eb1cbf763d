import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What a hostile model server, tool or local user can make the real confabd do: secrets that
/// come back escaped or quoted in an error, tool arguments that would move a call elsewhere,
/// two calls with one id, log lines that would drive a terminal, names that pass for a role.
final class TrustTests: XCTestCase {
    var harness: Harness!
    /// A second fake model server that wants a key the daemon does not have.
    var keyedServer: Child?
    var quoteKeyFile = ""

    /// Distinctive parts of the secrets: none may appear anywhere but in the tool's own request.
    static let slashKey = "k3y/QZXWV/slash+plus=="
    static let quoteKey = #"tok"en-JQKPL-77"#
    static let wrongAPIKey = #"sk-proj-Wr0ng/MNBVC+"q"=="#
    static let marks = ["QZXWV", "JQKPL", "MNBVC"]

    static func config(quoteKeyFile: String, keyedPort: Int) -> String {
        """
        [limits]
        tool_approval_timeout_seconds = 60

        [tools.leaky]
        description = "Echoes its request, every / written as \\\\/"
        [tools.leaky.request]
        url = "$UPSTREAM/tool/echo/leaky?escape=slash"
        header_env = { "X-Slash-Key" = "CONFAB_TEST_SLASH_KEY" }
        header_file = { "X-Quote-Key" = "\(quoteKeyFile)" }

        [tools.leakier]
        description = "Echoes its request, every punctuation character as \\\\u00XX"
        [tools.leakier.request]
        url = "$UPSTREAM/tool/echo/leakier?escape=unicode"
        header_env = { "X-Slash-Key" = "CONFAB_TEST_SLASH_KEY" }
        header_file = { "X-Quote-Key" = "\(quoteKeyFile)" }

        [tools.detail]
        description = "One item"
        parameters = { type = "object", properties = { id = { type = "string" } }, required = ["id"] }
        [tools.detail.request]
        url = "$UPSTREAM/v1/tool/echo/api/items/{id}/detail"

        [tools.slug]
        description = "Looks up a slug"
        parameters = { type = "object", properties = { name = { type = "string", pattern = "^[a-z0-9-]+$" } }, required = ["name"] }
        [tools.slug.request]
        url = "$UPSTREAM/tool/echo/slug"

        [tools.guarded]
        description = "Needs a yes"
        approval = "always"
        parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
        [tools.guarded.request]
        url = "$UPSTREAM/tool/echo/guarded"

        [profiles.helper]
        tools = ["leaky", "leakier", "detail", "slug", "guarded"]

        [providers.keyed]
        base_url = "http://127.0.0.1:\(keyedPort)/v1"
        api_key = '\(wrongAPIKey)'
        model = "fake-model"
        max_retries = 0
        """
    }

    override func setUpWithError() throws {
        setenv("CONFAB_TEST_SLASH_KEY", Self.slashKey, 1)
        quoteKeyFile = NSTemporaryDirectory() + "/confab-quote-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertTrue(FileManager.default.createFile(atPath: quoteKeyFile, contents: Data((Self.quoteKey + "\n").utf8),
                                                     attributes: [.posixPermissions: 0o600]))
        let (server, port) = try Harness.startFakeUpstream(
            ["--port", "0", "--api-key", "the-right-key-0000", "--echo-key", "--max-lifetime", "600"],
            logFile: NSTemporaryDirectory() + "/confab-keyed-upstream-\(getpid()).log")
        keyedServer = server
        harness = try Harness(config: Self.config(quoteKeyFile: quoteKeyFile, keyedPort: port))
    }

    override func tearDown() {
        harness?.tearDown()
        keyedServer?.stop()
        try? FileManager.default.removeItem(atPath: quoteKeyFile)
    }

    // MARK: - Helpers

    private func conversation(_ client: RPCClient, _ params: JSON = ["profile": "helper"]) throws -> String {
        var members = params.object ?? [:]
        members["title"] = "trust"
        let created = try client.call("conversation.create", .object(members))
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return id
    }

    /// Every notification of the reply's chain, until one of its assistant messages ends
    /// without tool calls, or not complete.
    private func follow(_ client: RPCClient, _ reply: String, timeout: Double = 30) throws -> [(method: String, params: JSON)] {
        let chain = MessageID.sequence(of: reply)
        return try client.collect(until: { method, params in
            guard method == "message.completed" || method == "message.failed", let message = params["message"],
                  message["role"]?.string == "assistant", let id = message["id"]?.string, MessageID.sequence(of: id) == chain
            else { return false }
            return message["status"]?.string != "complete" || (message["tool_calls"]?.array ?? []).isEmpty
        }, timeout: timeout)
    }

    private func send(_ client: RPCClient, _ id: String, _ text: String) throws -> String {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
        return try XCTUnwrap(sent["reply"]?.string)
    }

    private func toolRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.contains("/tool/") == true }
    }

    private func modelRequests() -> [JSON] {
        harness.upstreamRequests().filter { $0["path"]?.string?.hasSuffix("/completions") == true }
    }

    /// Every file of the data directory, as text.
    private func storedText() throws -> String {
        try FileManager.default.subpathsOfDirectory(atPath: harness.dataDirectory).map {
            (try? String(contentsOfFile: harness.dataDirectory + "/" + $0, encoding: .utf8)) ?? ""
        }.joined(separator: "\n")
    }

    private func assertNoSecret(in text: String, _ place: String, file: StaticString = #filePath, line: UInt = #line) {
        for mark in Self.marks where text.contains(mark) {
            XCTFail("\(place) holds a secret (\(mark))", file: file, line: line)
        }
    }

    // MARK: - Secrets

    func testAToolEchoingItsSecretHeadersEscapedLeavesThemNowhere() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let reply = try send(client, id, "[[tool:leaky {}]] [[tool:leakier {}]]")
        let notes = try follow(client, reply)
        // The tools did get the secrets, and answered them back escaped.
        let requests = toolRequests()
        XCTAssertEqual(requests.count, 2)
        for request in requests {
            XCTAssertEqual(request["headers"]?["x-slash-key"]?.string, Self.slashKey)
            XCTAssertEqual(request["headers"]?["x-quote-key"]?.string, Self.quoteKey)
        }
        let results = notes.filter { $0.method == "tool.completed" }.compactMap { $0.params["message"]?["content"]?.string }
        XCTAssertEqual(results.count, 2)
        for result in results {
            XCTAssertEqual(result.components(separatedBy: "[secret]").count - 1, 2, result)
        }
        // One answer with every / as \/, the other with every punctuation character as \u00XX.
        XCTAssertTrue(results.contains { $0.contains(#""x-slash-key":"[secret]""#) }, "\(results)")
        XCTAssertTrue(results.contains { $0.contains(#""x\u002dslash\u002dkey":"[secret]""#) }, "\(results)")

        assertNoSecret(in: "\(notes.map(\.params))", "what the client was sent")
        let toModel = modelRequests().map { $0["body"]?.text ?? "" }.joined()
        XCTAssertTrue(toModel.contains("[secret]"), "the model got the redacted results")
        assertNoSecret(in: toModel, "what the model was sent")
        let history = try client.call("conversation.history", ["conversation": .string(id)])
        assertNoSecret(in: history.text, "conversation.history")
        assertNoSecret(in: try storedText(), "the data directory")
        assertNoSecret(in: harness.log(), "the daemon's stderr")
    }

    func testAModelServerQuotingTheKeyIn401GetsItNowhere() throws {
        let client = try harness.client()
        let id = try conversation(client, ["provider": "keyed"])
        let reply = try send(client, id, "hello")
        let notes = try follow(client, reply)
        let failed = try XCTUnwrap(notes.last { $0.method == "message.failed" }?.params)
        XCTAssertEqual(failed["error"]?["code"]?.string, "upstream_auth")
        let message = try XCTUnwrap(failed["error"]?["message"]?.string)
        XCTAssertTrue(message.contains("Incorrect API key provided: [secret]"), message)
        assertNoSecret(in: "\(notes.map(\.params))", "message.failed")

        let listed = try client.call("models.list")
        let keyed = try XCTUnwrap(listed["errors"]?.array?.first { $0["provider"]?.string == "keyed" })
        XCTAssertEqual(keyed["code"]?.string, "upstream_auth")
        XCTAssertTrue(keyed["message"]?.string?.contains("[secret]") == true, keyed.text)
        assertNoSecret(in: listed.text, "models.list")

        assertNoSecret(in: try storedText(), "the conversation log")
        let log = harness.log()
        XCTAssertTrue(log.contains("provider=keyed model listing failed"), log)
        assertNoSecret(in: log, "the daemon's stderr")
    }

    // MARK: - Tool paths and ids

    func testAPathPlaceholderCannotClimbAndAPatternIsCheckedBeforeAnyRequest() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let reply = try send(client, id, #"[[tool:detail {"id":".."}]] [[tool:detail {"id":""}]] [[tool:slug {"name":"../x"}]] [[tool:detail {"id":"7"}]]"#)
        let notes = try follow(client, reply)
        // In call order (they end in any order).
        let results = notes.filter { $0.method == "tool.completed" }.compactMap { $0.params["message"] }
            .sorted { MessageID.order(of: $0["id"]?.string ?? "")! < MessageID.order(of: $1["id"]?.string ?? "")! }
        XCTAssertEqual(results.map { $0["error"]?["code"]?.string ?? "ok" }, ["tool_arguments", "tool_arguments", "tool_arguments", "ok"])
        XCTAssertEqual(results[0]["error"]?["message"]?.string, #""id" must not be "." or "..", nor hold one between slashes: it fills a segment of the tool's URL path"#)
        XCTAssertEqual(results[2]["error"]?["message"]?.string, #""name" must match the pattern "^[a-z0-9-]+$""#)
        // Only the good call was made, where the config says.
        XCTAssertEqual(toolRequests().compactMap { $0["path"]?.string }, ["/v1/tool/echo/api/items/7/detail"])
        XCTAssertEqual(notes.last?.params["message"]?["status"]?.string, "complete", "the model was told and answered")
    }

    func testTwoCallsWithOneIdAreShownAndApprovedEachByItself() throws {
        let asker = try harness.client(name: "asker")
        let approver = try harness.client(name: "approver")
        let id = try conversation(asker)
        try approver.call("conversation.attach", ["conversation": .string(id)])
        let reply = try send(asker, id, #"[[tool-id:dup]] [[tool-id:dup]] [[tool:guarded {"city":"Alba"}]] [[tool:guarded {"city":"Bra"}]]"#)
        var requests: [JSON] = []
        _ = try approver.collect(until: { method, params in
            if method == "tool.approval_requested" { requests.append(params) }
            return requests.count == 2
        }, timeout: 20)
        let calls = requests.compactMap { $0["call"]?.string }
        XCTAssertEqual(calls, ["dup", "dup_1"])
        XCTAssertEqual(requests.compactMap { $0["arguments"]?.string }, [#"{"city":"Alba"}"#, #"{"city":"Bra"}"#])
        // Yes to the second, no to the first: each answer reaches its own call.
        XCTAssertEqual(try approver.call("tool.approve", ["conversation": .string(id), "call": "dup_1", "allow": true])["allowed"]?.bool, true)
        XCTAssertEqual(try approver.call("tool.approve", ["conversation": .string(id), "call": "dup", "allow": false])["allowed"]?.bool, false)
        let notes = try follow(asker, reply)
        let results = notes.filter { $0.method == "tool.completed" }.compactMap { $0.params["message"] }
        XCTAssertEqual(results.map { $0["tool_call_id"]?.string ?? "" }.sorted(), ["dup", "dup_1"])
        XCTAssertEqual(toolRequests().compactMap { $0["path"]?.string }, ["/tool/echo/guarded?city=Bra"])
        XCTAssertEqual(notes.last?.params["message"]?["status"]?.string, "complete", "the model took the two answers")
    }

    // MARK: - Log lines

    func testAToolCallIdFullOfControlsCannotDriveTheTerminalReadingTheLog() throws {
        let client = try harness.client()
        let id = try conversation(client)
        let forged = "cX\u{0}<0>FORGED\u{1B}]0;LOGTITLE\u{07}\u{1B}[2J"
        let reply = try send(client, id, "[[tool-id:\(forged)]] [[tool:detail {\"id\":\"9\"}]]")
        let notes = try follow(client, reply)
        XCTAssertEqual(notes.first { $0.method == "tool.completed" }?.params["message"]?["tool_call_id"]?.string, "call_0",
                       "an id nobody could type after /approve is replaced, and the model server is sent the replacement")
        XCTAssertEqual(notes.last { $0.method == "message.completed" }?.params["message"]?["status"]?.string, "complete",
                       "the model server takes the replaced id back")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: harness.daemonLog))
        for control: UInt8 in [0x00, 0x07, 0x1B] {
            XCTAssertFalse(bytes.contains(control), "the daemon's stderr holds byte \(control)")
        }
        let log = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(log.contains("call=call_0 "), log)
        XCTAssertFalse(log.contains("call=cX"), log)
        XCTAssertFalse(log.split(separator: "\n").contains { $0.hasPrefix("<0>") || $0.hasPrefix("FORGED") })
    }

    // MARK: - Names

    func testHelloRefusesNamesThatPassForARoleOrHoldControls() throws {
        let client = try RPCClient(path: harness.socketPath)
        defer { client.close() }
        for name in ["assistant", "SYSTEM", "Tool", "confabd", "ana\u{202E}nimda", "ana\u{2028}x", "ana\u{1B}[2J", "assis\u{200B}tant"] {
            let answer = try client.request("hello", ["client": "test", "name": .string(name)])
            XCTAssertEqual(answer["error"]?["code"]?.int, -32602, "\(name.unicodeScalars.map(\.value)): \(answer)")
            XCTAssertTrue(answer["error"]?["message"]?.string?.hasPrefix("parameter \"name\" must") == true, answer.text)
        }
        let program = try client.request("hello", ["client": "test\u{1B}]0;x\u{07}"])
        XCTAssertEqual(program["error"]?["message"]?.string,
                       "parameter \"client\" must not hold control, format (bidi, zero-width) or separator characters (it holds U+001B)")
        let accepted = try client.call("hello", ["client": "test", "name": "Ana"])
        XCTAssertEqual(accepted["user"]?["name"]?.string, "Ana")
        XCTAssertNotNil(accepted["user"]?["login"]?.string)
    }
}
