import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Replies that stay in flight until the test lets them go: `[[hold:N NAME]]` makes the fake
/// upstream stop after N pieces until `releaseUpstream(NAME)`. A test that needs a reply still
/// streaming while it does something holds it, instead of hoping the reply is slow enough.
extension Harness {
    /// A plain HTTP/1.1 request to the fake upstream on a connection of its own; the JSON body of a 200.
    func upstreamHTTP(_ method: String, _ path: String) throws -> JSON {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError(description: "socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(upstreamPort).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError(description: "connect: \(errno)") }
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
            throw HarnessError(description: "send: \(errno)")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 200"), let body = text.components(separatedBy: "\r\n\r\n").last else {
            throw HarnessError(description: "unexpected answer to \(method) \(path): \(text)")
        }
        return try JSON.parse(body)
    }

    /// Lets every reply held at `[[hold:N name]]` go on (now, and any that reach the hold later).
    func releaseUpstream(_ name: String) throws {
        _ = try upstreamHTTP("POST", "/release/\(name)")
    }

    /// Waits until some answer of the fake upstream is held at `name`: its first N pieces are out.
    func waitUntilUpstreamHolds(_ name: String, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try upstreamHTTP("GET", "/holds")["holding"]?.array?.contains(.string(name)) == true { return }
            usleep(10_000)
        }
        throw HarnessError(description: "no upstream answer held at \(name) within \(timeout)s")
    }

    /// The text of `reply` saved so far in `conversation`'s log (its `reply.text` records).
    func savedText(of reply: String, in conversation: String) -> String {
        let path = dataDirectory + "/conversations/\(conversation).jsonl"
        guard let log = try? String(contentsOfFile: path, encoding: .utf8) else { return "" }
        return log.split(separator: "\n").compactMap { line -> String? in
            guard let record = try? JSON.parse(String(line)), record["type"]?.string == "reply.text",
                  record["message"]?.string == reply else { return nil }
            return record["content"]?.string
        }.joined()
    }

    /// Waits until the log holds at least `count` characters of `reply`'s text: the daemon
    /// saves a streaming reply's text now and then, and a test of what a crash keeps needs some.
    func waitForSavedText(of reply: String, in conversation: String, atLeast count: Int, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while savedText(of: reply, in: conversation).count < count {
            if Date() > deadline { throw HarnessError(description: "fewer than \(count) characters of \(reply) saved within \(timeout)s") }
            usleep(10_000)
        }
    }
}

/// The fake upstream's `[[hold:N NAME]]` and `POST /release/NAME`, which the tests above rely on.
final class HeldReplyTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    func testAHeldReplyStopsAfterItsPiecesUntilReleasedThenEndsWhole() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": "[[words:10]] [[chunk:3]] [[hold:2 middle]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitUntilUpstreamHolds("middle")
        var seen: [String] = []
        while seen.joined().count < 6 {
            seen += RPCClient.deltas(try client.collect(until: { method, _ in method == RPCNotification.messageDelta.rawValue }), for: reply)
        }
        XCTAssertEqual(seen.joined(), "w1 w2 ", "two pieces of three characters, and no more while held")
        let attached = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        XCTAssertEqual(attached["pending"]?["content"]?.string, "w1 w2 ", "still streaming, nothing past the hold")
        XCTAssertEqual(try harness.upstreamHTTP("GET", "/holds")["holding"], ["middle"])

        try harness.releaseUpstream("middle")
        let (notes, final) = try client.awaitReply(reply)
        XCTAssertEqual(final["content"]?.string, (1...10).map { "w\($0)" }.joined(separator: " "))
        XCTAssertEqual((seen + RPCClient.deltas(notes, for: reply)).joined(), final["content"]?.string)
        XCTAssertEqual(try harness.upstreamHTTP("GET", "/holds"), ["holding": [], "released": ["middle"]])
    }

    func testAReleaseBeforeTheHoldLetsItThroughAndAHoldPastTheEndWaitsBeforeTheFinish() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        try harness.releaseUpstream("early")
        let first = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": "[[reply:not held]] [[hold:1 early]]"])
        XCTAssertEqual(try client.awaitReply(try XCTUnwrap(first["reply"]?.string)).final["content"]?.string, "not held")

        let second = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": "[[reply:all of it]] [[hold:999 end]]"])
        let reply = try XCTUnwrap(second["reply"]?.string)
        try harness.waitUntilUpstreamHolds("end")
        let attached = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        XCTAssertEqual(attached["pending"]?["status"]?.string, MessageStatus.streaming.rawValue, "every piece out, the finish held")
        try harness.releaseUpstream("end")
        XCTAssertEqual(try client.awaitReply(reply).final["status"]?.string, MessageStatus.complete.rawValue)
    }
}
