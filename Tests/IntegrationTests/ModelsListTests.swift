import ConfabProtocol
import Foundation
import XCTest

/// FNV-1a over the key's bytes: how the fake upstream logs a key.
private func keyHash(_ key: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in key.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    let hex = String(hash, radix: 16)
    return "fnv1a64:" + String(repeating: "0", count: 16 - hex.count) + hex
}

/// A loopback port nothing listens on: bound, then let go.
private func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw unavailable("cannot bind a loopback port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

private let twoMore = """
    [providers.second]
    api = "chat"
    base_url = "$UPSTREAM/second/v1"
    api_key = "sk-second"
    model = "second-model"
    timeout_seconds = 5

    [providers.claude]
    api = "anthropic"
    base_url = "$UPSTREAM/anthropic/v1"
    api_key = "sk-ant-claude"
    model = "claude-test"
    timeout_seconds = 5
    headers = { "anthropic-beta" = "fake-beta" }

    """

final class ModelsListTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func listings() -> [JSON] {
        harness.upstreamRequests().filter { $0["method"]?.string == "GET" && $0["path"]?.string?.contains("/models") == true }
    }

    private func pairs(_ result: JSON) -> [String] {
        (result["models"]?.array ?? []).map { "\($0["provider"]?.string ?? "?") \($0["id"]?.string ?? "?")" }
    }

    func testEveryProvidersModelsAreListedWithItsOwnHeadersAndKeptForAMinute() throws {
        harness = try Harness(config: twoMore)
        try "alpha\nbeta\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        let client = try harness.client()
        let result = try client.call("models.list")
        XCTAssertEqual(pairs(result), ["claude alpha", "claude beta", "default alpha", "default beta", "second alpha", "second beta"])
        XCTAssertEqual(result["errors"], [])

        let asked = listings()
        XCTAssertEqual(asked.count, 3, "\(asked)")
        let byPath = Dictionary(asked.map { ($0["path"]?.string ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        let plain = try XCTUnwrap(byPath["/v1/models"], "\(byPath.keys)")
        XCTAssertNil(plain["headers"]?["authorization"])
        let second = try XCTUnwrap(byPath["/second/v1/models"], "\(byPath.keys)")
        XCTAssertEqual(second["headers"]?["authorization"]?.string, "Bearer " + keyHash("sk-second"))
        let claude = try XCTUnwrap(byPath["/anthropic/v1/models?limit=1000"], "\(byPath.keys)")
        XCTAssertEqual(claude["headers"]?["x-api-key"]?.string, keyHash("sk-ant-claude"))
        XCTAssertNotNil(claude["headers"]?["anthropic-version"]?.string)
        XCTAssertEqual(claude["headers"]?["anthropic-beta"]?.string, "fake-beta")
        XCTAssertNil(claude["headers"]?["authorization"])

        // Within the minute every listing comes from what was kept, even with the server's changed.
        try "gamma\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        XCTAssertEqual(pairs(try client.call("models.list")), pairs(result))
        let one = try harness.client().call("models.list", ["provider": "second"])
        XCTAssertEqual(pairs(one), ["second alpha", "second beta"])
        XCTAssertEqual(listings().count, 3)
    }

    func testCallsWhileAFetchIsOnItsWayShareIt() throws {
        harness = try Harness()
        let client = try harness.client()
        // Both lines arrive in one read, so the second is taken while the first's fetch is out.
        try client.sendRaw(#"{"jsonrpc":"2.0","id":1,"method":"models.list"}"# + "\n" + #"{"jsonrpc":"2.0","id":2,"method":"models.list","params":{"provider":"default"}}"# + "\n")
        let first = try client.response(to: 1)
        let second = try client.response(to: 2)
        XCTAssertEqual(pairs(first["result"] ?? .null), ["default fake-model", "default fake-model-2"], "\(first)")
        XCTAssertEqual(pairs(second["result"] ?? .null), ["default fake-model", "default fake-model-2"], "\(second)")
        XCTAssertEqual(listings().count, 1)
    }

    func testAProviderThatFailsIsAnErrorWhileTheOthersAreListedAndIsAskedAgainNextTime() throws {
        let port = try closedPort()
        harness = try Harness(config: "[providers.down]\nbase_url = \"http://127.0.0.1:\(port)/v1\"\nmodel = \"m\"\nconnect_timeout_seconds = 2\n")
        let client = try harness.client()
        let result = try client.call("models.list")
        XCTAssertEqual(pairs(result), ["default fake-model", "default fake-model-2"])
        let errors = try XCTUnwrap(result["errors"]?.array)
        XCTAssertEqual(errors.count, 1, "\(errors)")
        XCTAssertEqual(errors.first?["provider"]?.string, "down")
        XCTAssertEqual(errors.first?["code"]?.string, "upstream_connection")
        XCTAssertFalse(errors.first?["message"]?.string?.isEmpty ?? true)
        XCTAssertTrue(harness.log().contains("provider=down model listing failed: upstream_connection"), harness.log())

        let shown = try harness.runClient(["models"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertEqual(shown.stdout, "PROVIDER  MODEL\ndefault   fake-model\ndefault   fake-model-2\n")
        // Said in words; the code stays in --json.
        XCTAssertTrue(shown.stderr.hasPrefix("confab: provider down could not list its models: the model server "), shown.stderr)
        XCTAssertFalse(shown.stderr.contains("upstream_"), shown.stderr)
        XCTAssertEqual(shown.stderr.split(separator: "\n").count, 1, shown.stderr)

        let alone = try harness.runClient(["models", "--provider", "down"])
        XCTAssertEqual(alone.status, 1, alone.stderr)
        XCTAssertEqual(alone.stdout, "")
        XCTAssertTrue(alone.stderr.contains("provider down could not list its models: "), alone.stderr)
        XCTAssertFalse(alone.stderr.contains("upstream_connection"), alone.stderr)
        // The failure was not kept, so each call tried again; the default's listing was kept.
        XCTAssertEqual(harness.log().components(separatedBy: "provider=down model listing failed").count - 1, 3, harness.log())
        XCTAssertEqual(listings().count, 1)
    }

    func testRefusalsAndBodiesOfAnotherShapeAreReportedByCode() throws {
        harness = try Harness()
        let client = try harness.client()
        try "status 401\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        var error = try XCTUnwrap(try client.call("models.list")["errors"]?.array?.first)
        XCTAssertEqual(error["code"]?.string, "upstream_auth")
        XCTAssertEqual(error["status"]?.int, 401)
        let refused = try harness.runClient(["models"])
        XCTAssertTrue(refused.stderr.hasPrefix("confab: provider default could not list its models: the model server refused the API key (HTTP 401"),
                      refused.stderr)
        try "status 429\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        error = try XCTUnwrap(try client.call("models.list")["errors"]?.array?.first)
        XCTAssertEqual(error["code"]?.string, "rate_limited")
        try "status 404\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        error = try XCTUnwrap(try client.call("models.list")["errors"]?.array?.first)
        XCTAssertEqual(error["code"]?.string, "upstream_http")
        XCTAssertEqual(error["status"]?.int, 404)
        try "raw\n{\"models\":[\"a\"]}\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        error = try XCTUnwrap(try client.call("models.list")["errors"]?.array?.first)
        XCTAssertEqual(error["code"]?.string, "upstream_protocol")
        XCTAssertEqual(error["provider"]?.string, "default")
        XCTAssertNil(error["status"])

        // Every provider failed: the client says so and exits 1; --json still prints the result.
        let shown = try harness.runClient(["models"])
        XCTAssertEqual(shown.status, 1)
        XCTAssertEqual(shown.stdout, "")
        XCTAssertTrue(shown.stderr.contains("provider default could not list its models: "), shown.stderr)
        XCTAssertFalse(shown.stderr.contains("upstream_protocol"), shown.stderr)
        let json = try harness.runClient(["models", "--json"])
        XCTAssertEqual(json.status, 1)
        XCTAssertEqual(try JSON.parse(json.stdout)["errors"]?.array?.first?["code"]?.string, "upstream_protocol", json.stdout)

        try "late-model\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        XCTAssertEqual(pairs(try client.call("models.list")), ["default late-model"])
        // One more for the client's own call after the 401: a failure is not kept.
        XCTAssertEqual(listings().count, 8)
    }

    func testAListingLargerThanTheCapIsRefusedAndTheNextOneStillWorks() throws {
        harness = try Harness()
        let huge = "raw\n{\"data\":[{\"id\":\"" + String(repeating: "m", count: 5 << 20) + "\"}]}"
        try huge.write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        let client = try harness.client()
        let error = try XCTUnwrap(try client.call("models.list")["errors"]?.array?.first)
        XCTAssertEqual(error["code"]?.string, "upstream_protocol")
        XCTAssertTrue(error["message"]?.string?.contains("larger than 4 MiB") ?? false, "\(error)")
        try FileManager.default.removeItem(atPath: harness.upstreamModelsFile)
        XCTAssertEqual(pairs(try client.call("models.list")), ["default fake-model", "default fake-model-2"])
    }

    func testASlowListingIsATimeoutAndCallersFromTwoClientsMeanwhileShareEachFetch() throws {
        harness = try Harness(config: "[providers.slow]\nbase_url = \"$UPSTREAM/slow/v1\"\nmodel = \"m\"\ntimeout_seconds = 1\nconnect_timeout_seconds = 1\n")
        try "delay 2500\nslow-one\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        let first = try harness.client(), second = try harness.client()
        try first.sendRaw(#"{"jsonrpc":"2.0","id":"a","method":"models.list"}"# + "\n")
        // The first caller's fetches are on their way (the fake upstream has both requests)
        // before the second caller asks: it must share them, not start its own.
        let deadline = Date().addingTimeInterval(30)
        while listings().count < 2 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(listings().count, 2)
        try second.sendRaw(#"{"jsonrpc":"2.0","id":"b","method":"models.list"}"# + "\n")
        for (client, id) in [(first, "a"), (second, "b")] {
            let result = try XCTUnwrap(try client.response(to: .string(id))["result"])
            XCTAssertEqual(pairs(result), ["default slow-one"])
            let errors = try XCTUnwrap(result["errors"]?.array)
            XCTAssertEqual(errors.map { $0["provider"]?.string }, ["slow"], "\(errors)")
            XCTAssertEqual(errors.first?["code"]?.string, "upstream_timeout", "\(errors)")
        }
        XCTAssertEqual(listings().count, 2)
    }

    func testAListingStillOnItsWayAtShutdownIsAnsweredThatTheDaemonIsStopping() throws {
        harness = try Harness()
        try "delay 5000\nlate\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        let client = try harness.client()
        try client.sendRaw(#"{"jsonrpc":"2.0","id":"x","method":"models.list"}"# + "\n")
        // On its way: the fake upstream has the request (and answers it 5 s later).
        let deadline = Date().addingTimeInterval(30)
        while listings().isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(listings().count, 1)
        harness.daemon?.signal(SIGTERM)
        let answer = try client.response(to: "x")
        XCTAssertEqual(answer["error"]?["code"]?.int, RPCError.shuttingDown, answer.text)
    }

    func testAnUnknownProviderIsRefusedByName() throws {
        harness = try Harness()
        let client = try harness.client()
        XCTAssertThrowsError(try client.call("models.list", ["provider": "nope"])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams)
            XCTAssertTrue((error as? RPCError)?.message.contains("\"nope\"") ?? false, "\(error)")
        }
        XCTAssertThrowsError(try client.call("models.list", ["provider": 3]))
        let shown = try harness.runClient(["models", "--provider", "nope"])
        XCTAssertEqual(shown.status, 1)
        XCTAssertTrue(shown.stderr.contains("no provider \"nope\""), shown.stderr)
        XCTAssertEqual(listings().count, 0)
    }

    func testTheClientPrintsATableAndJSONWithNamesMadeSafe() throws {
        harness = try Harness(config: twoMore)
        try "plain\nbell\u{07}model\n".write(toFile: harness.upstreamModelsFile, atomically: true, encoding: .utf8)
        let shown = try harness.runClient(["models", "--provider", "second"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertEqual(shown.stderr, "")
        XCTAssertEqual(shown.stdout, "PROVIDER  MODEL\nsecond    plain\nsecond    bell^Gmodel\n")
        let json = try harness.runClient(["models", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let result = try JSON.parse(json.stdout)
        XCTAssertEqual(pairs(result), ["claude plain", "claude bell\u{07}model", "default plain", "default bell\u{07}model",
                                       "second plain", "second bell\u{07}model"])
        XCTAssertEqual(result["errors"], [])
    }
}
