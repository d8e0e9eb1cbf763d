import ConfabProtocol
import Foundation
import XCTest

/// Bad input and a failing upstream: every case gets a clear error, and nothing else breaks.
final class FailureTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testUpstream429ReachesEveryAttachedClientAndTheDaemonKeepsServing() throws {
        let a = try harness.client(name: "a"), b = try harness.client(name: "b")
        let id = try harness.createConversation(a)
        for client in [a, b] { try client.call("conversation.attach", ["conversation": .string(id)]) }
        let sent = try a.call("message.send", ["conversation": .string(id), "content": "[[status:429]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        for client in [a, b] {
            let (notes, final) = try client.awaitReply(reply)
            XCTAssertEqual(notes.last?.method, "message.failed")
            XCTAssertEqual(final["status"]?.string, "failed")
            let error = try XCTUnwrap(notes.last?.params["error"])
            XCTAssertEqual(error["code"]?.string, "rate_limited")
            XCTAssertEqual(error["status"]?.int, 429)
            XCTAssertEqual(error["message"]?.string, "fake upstream error 429")
        }
        let next = try a.call("message.send", ["conversation": .string(id), "content": "[[reply:fine]]"])
        XCTAssertEqual(try b.awaitReply(next["reply"]!.string!).final["content"]?.string, "fine")
    }

    private func failure(for content: String) throws -> (final: JSON, error: JSON) {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let (notes, final) = try client.awaitReply(sent["reply"]!.string!)
        XCTAssertEqual(notes.last?.method, "message.failed", "\(content): \(final.text)")
        return (final, notes.last?.params["error"] ?? .null)
    }

    func testUpstreamFailuresEachEndInAClearFailure() throws {
        let auth = try failure(for: "[[status:401]]")
        XCTAssertEqual(auth.error["code"]?.string, "upstream_auth")
        let server = try failure(for: "[[status:500]]")
        XCTAssertEqual(server.error["code"]?.string, "upstream_http")
        XCTAssertEqual(server.error["status"]?.int, 500)

        let mid = try failure(for: "[[error-mid:3]] [[chunk:2]] abcdefghij")
        XCTAssertEqual(mid.error["code"]?.string, "upstream_error")
        XCTAssertEqual(mid.error["message"]?.string, "fake mid-stream error")
        XCTAssertEqual(mid.final["content"]?.string, "You sa", "the partial text is kept")

        let dropped = try failure(for: "[[drop:2]] [[chunk:3]] hello")
        XCTAssertEqual(dropped.error["code"]?.string, "upstream_protocol")
        XCTAssertEqual(dropped.final["content"]?.string, "You sa")

        let garbage = try failure(for: "[[garbage]]")
        XCTAssertEqual(garbage.error["code"]?.string, "upstream_protocol")
    }

    func testStalledUpstreamTimesOut() throws {
        harness.tearDown()
        harness = try Harness(config: "")
        // timeout_seconds = 5 in the harness config; a stall after two pieces trips it.
        let result = try failure(for: "[[stall:2]] [[chunk:3]] hello")
        XCTAssertEqual(result.error["code"]?.string, "upstream_timeout")
        XCTAssertEqual(result.final["content"]?.string, "You sa")
    }

    func testUnreachableUpstreamFailsWithConnectionError() throws {
        harness.tearDown()
        // Port 9 on loopback: nothing listens there.
        harness = try Harness(config: "", startUpstream: false)
        let result = try failure(for: "hello")
        XCTAssertEqual(result.error["code"]?.string, "upstream_connection")
    }

    func testMissingKeyForOpenAIIsAClearError() throws {
        harness.tearDown()
        harness = try Harness(startUpstream: false)
        try "[upstream]\nbase_url = \"https://api.openai.com/v1\"\n".write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "OPENAI_API_KEY")
        harness.stopDaemon()
        try harness.startDaemon(environment: env)
        let result = try failure(for: "hello")
        XCTAssertEqual(result.error["code"]?.string, "not_configured")
        XCTAssertTrue(harness.log().contains("no API key"))
    }

    func testMalformedFramesGetJSONRPCErrorsAndTheConnectionLives() throws {
        let client = try harness.client()
        func answer(_ line: String) throws -> JSON {
            try client.sendRaw(line + "\n")
            return try XCTUnwrap(try client.readFrame())
        }
        var frame = try answer("this is not json")
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.parseError)
        XCTAssertEqual(frame["id"], .null)
        frame = try answer("[1,2,3]")
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        frame = try answer(#"{"jsonrpc":"2.0","id":{"x":1},"method":"status"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        frame = try answer(#"{"jsonrpc":"1.0","id":7,"method":"status"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidRequest)
        XCTAssertEqual(frame["id"]?.int, 7)
        frame = try answer(#"{"jsonrpc":"2.0","id":8,"method":"no.such.method"}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.methodNotFound)
        frame = try answer(#"{"jsonrpc":"2.0","id":9,"method":"conversation.get","params":{"conversation":"../../etc/passwd"}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        frame = try answer(#"{"jsonrpc":"2.0","id":10,"method":"conversation.get","params":{"conversation":42}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        XCTAssertTrue(frame["error"]?["message"]?.string?.contains("conversation") == true)
        frame = try answer(#"{"jsonrpc":"2.0","id":11,"method":"conversation.get","params":{"conversation":"0123456789ab"}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.notFound)
        frame = try answer(#"{"jsonrpc":"2.0","id":13,"method":"conversation.list","params":{"limit":1e300}}"#)
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.invalidParams)
        try client.sendRaw(Array("{\"a\":\u{FF}}\n".utf8.dropLast(4)) + [0xFF, 0xFE, 0x7D, 0x0A])
        frame = try XCTUnwrap(try client.readFrame())
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.parseError)
        // A notification with an unknown method gets no answer; the next request still does.
        try client.sendRaw(#"{"jsonrpc":"2.0","method":"no.such.method"}"# + "\n\n")
        XCTAssertEqual(try client.call("status")["server"]?.string, "confabd")
        let id = try harness.createConversation(client)
        XCTAssertThrowsError(try client.call("message.send", ["conversation": .string(id), "content": "   "])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams, "\(error)")
        }
        XCTAssertThrowsError(try client.call("conversation.history", ["conversation": .string(id), "before": "m01"])) { error in
            XCTAssertEqual((error as? RPCError)?.code, RPCError.invalidParams, "\(error)")
        }
    }

    func testOversizedLineClosesOnlyThatConnection() throws {
        harness.tearDown()
        harness = try Harness(config: "[limits]\nmax_line_bytes = 4096\n")
        let bystander = try harness.client(name: "bystander")
        let offender = try harness.client(name: "offender")
        try offender.sendRaw(String(repeating: "x", count: 10_000))
        let frame = try XCTUnwrap(try offender.readFrame())
        XCTAssertEqual(frame["error"]?["code"]?.int, RPCError.lineTooLong)
        XCTAssertNil(try offender.readFrame(), "the connection is closed after the error")
        XCTAssertEqual(try bystander.call("status")["clients"]?.int, 1)
    }

    func testSlowReaderIsDisconnectedAndOthersKeepStreaming() throws {
        harness.tearDown()
        harness = try Harness(config: "[limits]\nmax_client_buffer_bytes = 131072\n")
        let reader = try harness.client(name: "reader")
        let id = try harness.createConversation(reader)
        try reader.call("conversation.attach", ["conversation": .string(id)])
        let sleeper = try harness.client(name: "sleeper")
        try sleeper.call("conversation.attach", ["conversation": .string(id)])
        // Shrink the sleeper's receive buffer so the daemon's side fills quickly; it never reads.
        var small: Int32 = 4096
        setsockopt(sleeper.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let sent = try reader.call("message.send", ["conversation": .string(id), "content": "[[words:60000]] [[chunk:60]] [[delay:1]]"])
        let (_, final) = try reader.awaitReply(sent["reply"]!.string!, timeout: 60)
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertTrue(final["content"]?.string?.hasSuffix("w60000") == true)
        XCTAssertTrue(harness.log().contains("slow reader"), harness.log())
    }
}
