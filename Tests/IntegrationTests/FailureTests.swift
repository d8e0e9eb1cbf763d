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
        // timeout_seconds = 5 in the harness config; a stall after two pieces trips it, counted
        // from the last byte. Which timer fired is in the message: ours says "sent nothing"
        // (libcurl's own low-speed check says otherwise). With connect_timeout_seconds = 600 the
        // first deadline, before any byte, is 605 s away, far beyond awaitReply's 15 s of
        // silence: only a deadline moved to the last byte can end the reply in time.
        harness = try Harness(config: "connect_timeout_seconds = 600\n")
        let result = try failure(for: "[[stall:2]] [[chunk:3]] hello")
        XCTAssertEqual(result.error["code"]?.string, "upstream_timeout")
        XCTAssertEqual(result.error["message"]?.string, "the upstream sent nothing for 5 s")
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

    /// Sends in a conversation the client is attached to; returns the ending notification's
    /// method, the final message and its error (null when it completed).
    private func send(_ client: RPCClient, _ id: String, _ content: String) throws -> (method: String?, final: JSON, error: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
        let (notes, final) = try client.awaitReply(sent["reply"]!.string!)
        return (notes.last?.method, final, notes.last?.params["error"] ?? .null)
    }

    private func attachedConversation() throws -> (RPCClient, String) {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return (client, id)
    }

    /// Rewrites the config with another upstream and reloads it (SIGHUP), waiting for the log to say so.
    private func pointUpstream(at baseURL: String, timeout: Int = 5, connectTimeout: Int = 10) throws {
        let marker = "config reloaded from"
        let before = harness.log().components(separatedBy: marker).count
        let config = "[upstream]\nbase_url = \"\(baseURL)\"\nmodel = \"fake-model\"\ntimeout_seconds = \(timeout)\nconnect_timeout_seconds = \(connectTimeout)\nmax_retries = 0\n"
        try config.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while harness.log().components(separatedBy: marker).count == before {
            guard Date() < deadline else { throw HarnessError(description: "no reload:\n\(harness.log())") }
            usleep(10_000)
        }
    }

    private var fakeUpstreamURL: String { "http://127.0.0.1:\(harness.upstreamPort)/v1" }

    func testUpstreamHTTPErrorsKeepTheirStatusAndMessageAndTheConversationGoesOn() throws {
        let (client, id) = try attachedConversation()
        // 404 is what an OpenAI-compatible server answers for an unknown model.
        let cases = [(404, "upstream_http"), (400, "upstream_http"), (502, "upstream_http"), (503, "upstream_http"), (403, "upstream_auth")]
        for (status, code) in cases {
            let result = try send(client, id, "[[status:\(status)]]")
            XCTAssertEqual(result.method, "message.failed", "\(status): \(result.final.text)")
            XCTAssertEqual(result.final["status"]?.string, "failed")
            XCTAssertEqual(result.error["code"]?.string, code, "\(status)")
            XCTAssertEqual(result.error["status"]?.int, status)
            XCTAssertEqual(result.error["message"]?.string, "fake upstream error \(status)", "the upstream's own message")
            XCTAssertEqual(result.final["error"], result.error, "the stored message carries the same error")
        }
        let next = try send(client, id, "[[reply:still here]]")
        XCTAssertEqual(next.method, "message.completed")
        XCTAssertEqual(next.final["content"]?.string, "still here")
        let history = try XCTUnwrap(client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array)
        let replies = history.filter { $0["role"]?.string == "assistant" }
        XCTAssertEqual(replies.map { $0["status"]?.string }, Array(repeating: "failed", count: cases.count) + ["complete"])
        XCTAssertEqual(replies.compactMap { $0["error"]?["status"]?.int }, cases.map(\.0))
    }

    func testUpstream429WithoutRetryAfterIsRateLimited() throws {
        let (client, id) = try attachedConversation()
        let limited = try send(client, id, "[[status:429]] [[no-retry-after]]")
        XCTAssertEqual(limited.method, "message.failed", limited.final.text)
        XCTAssertEqual(limited.error["code"]?.string, "rate_limited")
        XCTAssertEqual(limited.error["status"]?.int, 429)
        XCTAssertEqual(limited.error["message"]?.string, "fake upstream error 429")
        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
    }

    func testStreamEndingWithNeitherFinishReasonNorDoneFailsKeepingItsText() throws {
        let (client, id) = try attachedConversation()
        // Either sign alone is enough: a finish reason without [DONE], or [DONE] without a finish reason.
        let noDone = try send(client, id, "[[no-done]] [[chunk:3]] hello")
        XCTAssertEqual(noDone.method, "message.completed", noDone.final.text)
        XCTAssertEqual(noDone.final["content"]?.string, "You said: hello")
        XCTAssertEqual(noDone.final["finish_reason"]?.string, "stop")
        let noFinish = try send(client, id, "[[no-finish]] [[chunk:3]] hello")
        XCTAssertEqual(noFinish.method, "message.completed", noFinish.final.text)
        XCTAssertEqual(noFinish.final["content"]?.string, "You said: hello")
        XCTAssertNil(noFinish.final["finish_reason"])

        // The body ends properly, but nothing said the reply was over.
        let cut = try send(client, id, "[[no-done]] [[no-finish]] [[chunk:3]] hello")
        XCTAssertEqual(cut.method, "message.failed", cut.final.text)
        XCTAssertEqual(cut.error["code"]?.string, "upstream_protocol")
        XCTAssertEqual(cut.error["message"]?.string, "the upstream ended the stream before the reply finished")
        XCTAssertEqual(cut.final["content"]?.string, "You said: hello", "the text streamed is kept")

        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
    }

    func testUnreadableChunkFailsWithUpstreamProtocolKeepingTheTextBeforeIt() throws {
        let (client, id) = try attachedConversation()
        let bad = try send(client, id, "[[bad-chunk:2]] [[chunk:3]] hello")
        XCTAssertEqual(bad.method, "message.failed", bad.final.text)
        XCTAssertEqual(bad.error["code"]?.string, "upstream_protocol")
        XCTAssertTrue(bad.error["message"]?.string?.hasPrefix("unreadable event from upstream: an event that is neither JSON nor [DONE]: {") == true, bad.error.text)
        XCTAssertEqual(bad.final["content"]?.string, "You sa")
        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
    }

    func testUnresolvableUpstreamHostFailsWithConnectionError() throws {
        let (client, id) = try attachedConversation()
        // RFC 6761: no name under .invalid ever resolves.
        try pointUpstream(at: "http://confab-test.invalid:9/v1")
        let failed = try send(client, id, "hello")
        XCTAssertEqual(failed.method, "message.failed", failed.final.text)
        XCTAssertEqual(failed.error["code"]?.string, "upstream_connection")
        XCTAssertTrue(failed.error["message"]?.string?.contains("confab-test.invalid") == true, failed.error.text)
        XCTAssertNil(failed.error["status"])
        XCTAssertEqual(failed.final["content"]?.string, "")
        try pointUpstream(at: fakeUpstreamURL)
        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
    }

    func testTLSToAPlainHTTPUpstreamFailsWithConnectionError() throws {
        let (client, id) = try attachedConversation()
        XCTAssertEqual(try send(client, id, "[[reply:before]]").final["content"]?.string, "before")
        // The fake upstream speaks plain HTTP: it answers the ClientHello with a 400, which is no TLS record.
        try pointUpstream(at: "https://127.0.0.1:\(harness.upstreamPort)/v1")
        let failed = try send(client, id, "hello")
        XCTAssertEqual(failed.method, "message.failed", failed.final.text)
        XCTAssertEqual(failed.error["code"]?.string, "upstream_connection")
        XCTAssertTrue(failed.error["message"]?.string?.contains("SSL") == true, failed.error.text)
        XCTAssertNil(failed.error["status"])
        try pointUpstream(at: fakeUpstreamURL)
        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
        let history = try XCTUnwrap(client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array)
        XCTAssertEqual(history.map { $0["status"]?.string }, ["complete", "complete", "complete", "failed", "complete", "complete"])
    }

    func testConnectTimeoutIsAConnectionErrorAndAStallAfterTheRequestATimeout() throws {
        // A listener that never accepts: the kernel completes the TCP handshake, nobody ever answers.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        XCTAssertTrue(bound)
        XCTAssertEqual(listen(fd, 16), 0)
        let port = UInt16(bigEndian: address.sin_port)
        let (client, id) = try attachedConversation()

        // The TLS handshake gets no answer: connect_timeout_seconds runs out before the request goes out.
        try pointUpstream(at: "https://127.0.0.1:\(port)/v1", timeout: 5, connectTimeout: 1)
        let handshake = try send(client, id, "hello")
        XCTAssertEqual(handshake.method, "message.failed", handshake.final.text)
        // Which timer fired, by the error: timeout_seconds' would be upstream_timeout, "sent nothing".
        XCTAssertEqual(handshake.error["code"]?.string, "upstream_connection", "the connect timeout: \(handshake.error.text)")
        XCTAssertFalse(handshake.error["message"]?.string?.contains("sent nothing") ?? true, handshake.error.text)

        // Plain HTTP: the request goes out (into the socket's backlog), then nothing comes back.
        try pointUpstream(at: "http://127.0.0.1:\(port)/v1", timeout: 1, connectTimeout: 1)
        let stall = try send(client, id, "hello")
        XCTAssertEqual(stall.error["code"]?.string, "upstream_timeout", stall.error.text)

        try pointUpstream(at: fakeUpstreamURL)
        XCTAssertEqual(try send(client, id, "[[reply:fine]]").final["content"]?.string, "fine")
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
        let sent = try reader.call("message.send", ["conversation": .string(id), "content": "[[words:60000]] [[chunk:600]] [[delay:1]]"])
        let (_, final) = try reader.awaitReply(sent["reply"]!.string!, timeout: 60)
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertTrue(final["content"]?.string?.hasSuffix("w60000") == true)
        XCTAssertTrue(harness.log().contains("slow reader"), harness.log())
    }
}
