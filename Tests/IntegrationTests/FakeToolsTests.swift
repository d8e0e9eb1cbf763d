import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The fake upstream's side of function calling, spoken to over plain HTTP: replies that ask
/// for tool calls, the answer to tool results, the checks of tool messages, and the tool
/// endpoints. confabd's tool tests rely on all of it behaving as docs/fake-upstream.md says.
final class FakeToolsTests: XCTestCase {
    var fake: Child!
    var port = 0
    var directory = ""
    var logPath: String { directory + "/requests.jsonl" }

    override func setUpWithError() throws {
        var template = Array("/tmp/confab-fake-tools-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
        directory = String(cString: made)
        (fake, port) = try Harness.startFakeUpstream(["--port", "0", "--log", logPath, "--max-lifetime", "300", "--default-delay-ms", "0"],
                                                     logFile: directory + "/stderr.log")
    }

    override func tearDown() {
        fake?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Chat completions

    func testAStreamedToolCallReassemblesToItsArguments() throws {
        let weather = #"{"city":"Paris, the capital of France","units":"metric","note":"héllo ✓"}"#
        let content = "what now [[tool:get_weather \(weather)]] [[tool:echo not json]] [[tool-text:Let me check.]]"
        let events = try chatStream(messages: [["role": "user", "content": .string(content)]])
        var endsWithDone = false
        if case .some(.none) = events.last { endsWithDone = true }
        XCTAssertTrue(endsWithDone, "the stream ends with [DONE]")
        let chunks = events.compactMap { $0 }
        let deltas = chunks.compactMap { $0["choices"]?.array?.first?["delta"] }
        XCTAssertEqual(deltas.first?["role"]?.string, "assistant")
        XCTAssertEqual(deltas.compactMap { $0["content"]?.string }.joined(), "Let me check.",
                       "only the tool-text is content, not the rest of the message")
        let calls = try reassemble(deltas)
        XCTAssertEqual(calls.map(\.name), ["get_weather", "echo"])
        XCTAssertEqual(calls.map(\.arguments), [weather, "not json"])
        XCTAssertEqual(Set(calls.map(\.id)).count, 2)
        XCTAssertTrue(calls.allSatisfy { $0.id.hasPrefix("call_") })
        XCTAssertGreaterThan(calls[0].pieces, 2, "long arguments come in several pieces")
        // After its opening, a call's chunks carry only its index and an argument piece.
        for entry in deltas.compactMap({ $0["tool_calls"]?.array?.first }) where entry["id"] == nil {
            let piece = try XCTUnwrap(entry["function"]?["arguments"]?.string)
            XCTAssertTrue((1...24).contains(piece.utf8.count), "piece of \(piece.utf8.count) bytes")
            XCTAssertNil(entry["function"]?["name"])
        }
        let finish = chunks.compactMap { $0["choices"]?.array?.first?["finish_reason"]?.string }
        XCTAssertEqual(finish, ["tool_calls"])
    }

    func testTheLlamacppStyleRepeatsIdAndNameInEveryChunk() throws {
        let arguments = #"{"query":"a fairly long search query, to cut in pieces"}"#
        let events = try chatStream(messages: [["role": "user", "content": .string("[[tool:search \(arguments)]] [[tool-style:llamacpp]]")]])
        let deltas = events.compactMap { $0?["choices"]?.array?.first?["delta"] }
        let entries = deltas.compactMap { $0["tool_calls"]?.array }.flatMap { $0 }
        XCTAssertGreaterThan(entries.count, 2)
        for entry in entries {
            XCTAssertNotNil(entry["id"]?.string)
            XCTAssertEqual(entry["type"]?.string, "function")
            XCTAssertEqual(entry["function"]?["name"]?.string, "search")
        }
        XCTAssertEqual(try reassemble(deltas).map(\.arguments), [arguments])
    }

    func testParallelChunkOpensEveryCallInOneChunk() throws {
        let events = try chatStream(messages: [["role": "user", "content": "[[tool:a {\"x\":\"0123456789abcdef\"}]] [[tool:b {\"y\":\"fedcba9876543210\"}]] [[tool-style:parallel-chunk]]"]])
        let deltas = events.compactMap { $0?["choices"]?.array?.first?["delta"] }
        let first = try XCTUnwrap(deltas.compactMap { $0["tool_calls"]?.array }.first)
        XCTAssertEqual(first.compactMap { $0["function"]?["name"]?.string }, ["a", "b"])
        XCTAssertEqual(try reassemble(deltas).map(\.arguments), [#"{"x":"0123456789abcdef"}"#, #"{"y":"fedcba9876543210"}"#])
    }

    func testToolResultsAreAnsweredAsText() throws {
        let messages: [JSON] = [
            ["role": "user", "content": "[[tool:get_weather {}]] [[tool:echo {}]]"],
            ["role": "assistant", "content": nil, "tool_calls": [
                ["id": "c1", "type": "function", "function": ["name": "get_weather", "arguments": "{}"]],
                ["id": "c2", "type": "function", "function": ["name": "echo", "arguments": "{}"]],
            ]],
            ["role": "tool", "tool_call_id": "c1", "content": "sunny"],
            ["role": "tool", "tool_call_id": "c2", "content": [["type": "text", "text": "a"], ["type": "text", "text": "b"]]],
        ]
        let events = try chatStream(messages: messages)
        let deltas = events.compactMap { $0?["choices"]?.array?.first?["delta"] }
        XCTAssertEqual(deltas.compactMap { $0["content"]?.string }.joined(), "tool results: [get_weather] sunny | [echo] a b")
        XCTAssertTrue(deltas.allSatisfy { $0["tool_calls"] == nil }, "no new calls once the results are there")
    }

    func testAToolMessageWithNoMatchingCallIsRefused() throws {
        let messages: [JSON] = [
            ["role": "user", "content": "hi"],
            ["role": "assistant", "content": nil, "tool_calls": [
                ["id": "c1", "type": "function", "function": ["name": "get_weather", "arguments": "{}"]],
            ]],
            ["role": "tool", "tool_call_id": "c9", "content": "sunny"],
        ]
        let answer = try http("POST", "/v1/chat/completions", body: JSON.object(["model": "m", "messages": .array(messages)]).text)
        XCTAssertEqual(answer.status, 400)
        let error = try JSON.parse(answer.text)["error"]
        XCTAssertEqual(error?["type"]?.string, "invalid_request_error")
        XCTAssertTrue(error?["message"]?.string?.contains("c9") == true, answer.text)
    }

    // MARK: Anthropic Messages

    func testAnAnthropicToolUseStream() throws {
        let arguments = #"{"city":"Paris","days":[1,2,3],"detail":"hourly, with wind"}"#
        let body: JSON = ["model": "m", "max_tokens": 100, "stream": true,
                          "messages": [["role": "user", "content": .string("[[tool:get_weather \(arguments)]]")]]]
        let answer = try http("POST", "/v1/messages", body: body.text)
        XCTAssertEqual(answer.status, 200)
        let events = try answer.text.components(separatedBy: "\n\n").filter { !$0.isEmpty }.map { event in
            let lines = event.split(separator: "\n")
            let data = try XCTUnwrap(lines.first { $0.hasPrefix("data: ") }?.dropFirst(6))
            return try JSON.parse(String(data))
        }
        XCTAssertEqual(events.first?["type"]?.string, "message_start")
        let start = try XCTUnwrap(events.first { $0["type"]?.string == "content_block_start" })
        XCTAssertEqual(start["content_block"]?["type"]?.string, "tool_use")
        XCTAssertEqual(start["content_block"]?["name"]?.string, "get_weather")
        XCTAssertTrue(start["content_block"]?["id"]?.string?.hasPrefix("toolu_") == true)
        XCTAssertEqual(start["content_block"]?["input"], .object([:]))
        let pieces = events.filter { $0["type"]?.string == "content_block_delta" }.map { $0["delta"] }
        XCTAssertTrue(pieces.allSatisfy { $0?["type"]?.string == "input_json_delta" })
        XCTAssertEqual(pieces.compactMap { $0?["partial_json"]?.string }.joined(), arguments)
        XCTAssertGreaterThan(pieces.count, 1)
        XCTAssertEqual(events.first { $0["type"]?.string == "message_delta" }?["delta"]?["stop_reason"]?.string, "tool_use")
        XCTAssertEqual(events.last?["type"]?.string, "message_stop")
    }

    func testAnthropicToolResultsAndTheirChecks() throws {
        let use: JSON = ["role": "assistant", "content": [["type": "tool_use", "id": "t1", "name": "get_weather", "input": [:]]]]
        let good: JSON = ["model": "m", "max_tokens": 100, "messages": [
            ["role": "user", "content": "[[tool:get_weather {}]]"], use,
            ["role": "user", "content": [["type": "tool_result", "tool_use_id": "t1", "content": "no such city", "is_error": true]]],
        ]]
        let answer = try http("POST", "/v1/messages", body: good.text)
        XCTAssertEqual(answer.status, 200, answer.text)
        XCTAssertEqual(try JSON.parse(answer.text)["content"]?.array?.first?["text"]?.string,
                       "tool results: [get_weather] no such city (error)")
        let bad: JSON = ["model": "m", "max_tokens": 100, "messages": [
            ["role": "user", "content": "hi"], use,
            ["role": "user", "content": [["type": "tool_result", "tool_use_id": "t7", "content": "x"]]],
        ]]
        let refused = try http("POST", "/v1/messages", body: bad.text)
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(try JSON.parse(refused.text)["error"]?["type"]?.string, "invalid_request_error")
    }

    // MARK: Tool endpoints

    func testToolEndpoints() throws {
        let echo = try http("POST", "/tool/echo/x?units=metric", body: #"{"city":"Paris"}"#,
                            headers: ["X-Tool-Key: s3cret", "Content-Type: application/json"])
        XCTAssertEqual(echo.status, 200)
        let echoed = try JSON.parse(echo.text)
        XCTAssertEqual(echoed["method"]?.string, "POST")
        XCTAssertEqual(echoed["path"]?.string, "/tool/echo/x")
        XCTAssertEqual(echoed["query"]?.string, "units=metric")
        XCTAssertEqual(echoed["body"], ["city": "Paris"])
        XCTAssertEqual(echoed["headers"]?["x-tool-key"]?.string, "s3cret")

        let missing = try http("GET", "/tool/status/404")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(try JSON.parse(missing.text)["error"]?.string, "status 404")

        let big = try http("GET", "/tool/big?bytes=300000")
        XCTAssertEqual(big.status, 200)
        XCTAssertEqual(big.body.count, 300_000)
        XCTAssertTrue(big.body.allSatisfy { $0 == UInt8(ascii: "x") })

        let text = try http("GET", "/tool/text?body=a%1B%5B31mb")
        XCTAssertEqual(text.body, Array("a\u{1B}[31mb".utf8))

        _ = try http("PUT", "/tool/weather/Paris", body: "not json", headers: ["X-Tool-Key: s3cret"])
        let logged = try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n").map { try JSON.parse(String($0)) }
        let put = try XCTUnwrap(logged.last)
        XCTAssertEqual(put["path"]?.string, "/tool/weather/Paris")
        XCTAssertEqual(put["raw_body"]?.string, "not json")
        XCTAssertEqual(put["headers"]?["x-tool-key"]?.string, "s3cret", "a tool's key header is logged as it came")
    }

    // MARK: Helpers

    /// One call put back together from its chunks.
    struct Call {
        var id = ""
        var name = ""
        var arguments = ""
        var pieces = 0
    }

    /// Joins the `tool_calls` entries of stream deltas by index, as a client must.
    private func reassemble(_ deltas: [JSON]) throws -> [Call] {
        var calls: [Call] = []
        for entry in deltas.compactMap({ $0["tool_calls"]?.array }).flatMap({ $0 }) {
            let index = try XCTUnwrap(entry["index"]?.int)
            while calls.count <= index { calls.append(Call()) }
            if let id = entry["id"]?.string { calls[index].id = id }
            if let name = entry["function"]?["name"]?.string { calls[index].name = name }
            if let piece = entry["function"]?["arguments"]?.string, !piece.isEmpty {
                calls[index].arguments += piece
                calls[index].pieces += 1
            }
        }
        return calls
    }

    /// A streamed chat completion's events: each chunk, or nil for `[DONE]`.
    private func chatStream(messages: [JSON]) throws -> [JSON?] {
        let body: JSON = ["model": "m", "stream": true, "messages": .array(messages)]
        let answer = try http("POST", "/v1/chat/completions", body: body.text)
        XCTAssertEqual(answer.status, 200, answer.text)
        return try answer.text.components(separatedBy: "\n").filter { $0.hasPrefix("data: ") }.map { line -> JSON? in
            let data = line.dropFirst(6)
            if data == "[DONE]" { return Optional<JSON>.none }
            return try JSON.parse(String(data))
        }
    }

    /// One HTTP/1.1 request on a connection of its own; the body de-chunked if need be.
    private func http(_ method: String, _ target: String, body: String? = nil,
                      headers: [String] = []) throws -> (status: Int, body: [UInt8], text: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError(description: "socket: \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError(description: "connect: \(errno)") }
        let payload = Array((body ?? "").utf8)
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for header in headers { head += header + "\r\n" }
        if body != nil { head += "Content-Length: \(payload.count)\r\n" }
        let request = Array((head + "\r\n").utf8) + payload
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
            throw HarnessError(description: "send: \(errno)")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw HarnessError(description: "recv: \(errno)") }
            if n == 0 { break }
            answer += buffer[0..<n]
        }
        let separator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        guard let end = answer.indices.first(where: { answer[$0...].starts(with: separator) }) else {
            throw HarnessError(description: "no header block in \(String(decoding: answer, as: UTF8.self))")
        }
        let headText = String(decoding: answer[..<end], as: UTF8.self)
        let status = Int(headText.split(separator: " ").dropFirst().first ?? "") ?? 0
        var content = Array(answer[(end + 4)...])
        if headText.lowercased().contains("transfer-encoding: chunked") {
            var plain: [UInt8] = []
            var at = 0
            while let lineEnd = content[at...].firstIndex(of: 0x0A),
                  let size = Int(String(decoding: content[at..<lineEnd], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines), radix: 16),
                  size > 0 {
                plain += content[(lineEnd + 1)..<(lineEnd + 1 + size)]
                at = lineEnd + 1 + size + 2
            }
            content = plain
        }
        return (status, content, String(decoding: content, as: UTF8.self))
    }
}
