import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// How confabd uses its connections to the upstream, seen from the fake upstream, which numbers
/// every TCP connection it accepts and logs the number with each request.
final class UpstreamConnectionTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// A second reply to the same server must not pay for a new connection (and, over TLS, a
    /// new handshake): the fake upstream keeps a properly ended stream's connection open.
    /// `[[end-delay]]` ends the HTTP body 100 ms after `[DONE]`, as a server whose last write
    /// comes late does: a reply that is over at `[DONE]` must still let its transfer read the
    /// body to the end, or curl closes the connection. (Without the delay the outcome would
    /// depend on whether `[DONE]` and the body's end happen to arrive in one read.) The second
    /// send waits until the fake upstream has finished writing the first answer, so the first
    /// connection is free by then.
    func testTwoRepliesInARowUseOneUpstreamConnection() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        for text in ["[[reply:one]] [[end-delay:100]]", "[[reply:two]] [[end-delay:100]]"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(text)])
            let (_, final) = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
            XCTAssertEqual(final["status"]?.string, "complete")
            let deadline = Date().addingTimeInterval(10)
            while try fakeUpstreamStats()["answering"]?.int != 0 {
                guard Date() < deadline else { throw HarnessError(description: "the fake upstream is still answering") }
                usleep(10_000)
            }
        }
        let connections = harness.upstreamRequests()
            .filter { $0["path"]?.string?.hasSuffix("/chat/completions") == true }
            .map { $0["connection"]?.int }
        XCTAssertEqual(connections.count, 2, "two requests upstream")
        XCTAssertNotNil(connections.first ?? nil, "the fake upstream numbers its connections")
        XCTAssertEqual(connections.first, connections.last,
                       "the second reply came on the first one's connection (a reply ended at [DONE] must let curl read the body to its end)")
    }

    /// An idle confabd maps neither libcurl nor the TLS libraries it brings (about 8 MiB of
    /// resident memory): the first request to a model server loads it, and replies work.
    func testLibcurlIsLoadedByTheFirstRequestUpstreamNotAtStartUp() throws {
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // Read to the end with read(2): a /proc file says its size is 0.
        func mapped() throws -> [String] {
            let fd = open("/proc/\(try XCTUnwrap(harness.daemon).pid)/maps", O_RDONLY)
            guard fd >= 0 else { throw HarnessError(description: "open maps: \(errno)") }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count <= 0 { break }
                bytes += buffer[0..<count]
            }
            return String(decoding: bytes, as: UTF8.self)
                .split(separator: "\n").compactMap { $0.split(separator: " ", omittingEmptySubsequences: true).last.map(String.init) }
        }
        let idle = try mapped()
        XCTAssertTrue(idle.contains { $0.hasSuffix("/confabd") }, "the maps were read: \(idle.prefix(5))")
        for library in ["libcurl", "libssl", "libcrypto", "libgnutls", "libkrb5"] {
            XCTAssertFalse(idle.contains { $0.contains(library) }, "\(library) is mapped before any request upstream")
        }
        let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:hello]]")])
        let (_, final) = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["content"]?.string, "hello")
        let after = try mapped()
        XCTAssertTrue(after.contains { $0.contains("libcurl") }, "libcurl is mapped once a reply was asked for")
    }

    /// The counter the test above relies on tells connections apart.
    func testTheFakeUpstreamCountsEachConnection() throws {
        let first = try fakeUpstreamStats()
        let second = try fakeUpstreamStats()
        XCTAssertEqual(first["connections"]?.int, 1)
        XCTAssertEqual(second["connections"]?.int, 2)
        XCTAssertEqual(second["requests"]?.int, 2)
        XCTAssertEqual(second["answering"]?.int, 0)
    }

    /// `GET /stats` from the fake upstream, on a connection of its own.
    private func fakeUpstreamStats() throws -> JSON {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError(description: "socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(harness.upstreamPort).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError(description: "connect: \(errno)") }
        let request = Array("GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
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
            throw HarnessError(description: "unexpected answer to GET /stats: \(text)")
        }
        return try JSON.parse(body)
    }
}
