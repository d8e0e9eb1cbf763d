import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// One client pipelining 100,000 `conversation.search` calls, then hanging up, against the
/// real daemon: what it may hold for that client is bounded, its work stops when it goes, and
/// another client is answered meanwhile.
final class FloodTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// The daemon's peak resident memory so far (VmHWM), in KiB.
    private func peakKiB() throws -> Int {
        let pid = try XCTUnwrap(harness.daemon?.pid)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        return try XCTUnwrap(Int(line.split(separator: " ").dropFirst().first ?? ""))
    }

    /// Waits (at most `seconds`, as a failure guard only) until the daemon's log holds `text`.
    private func waitForLog(_ text: String, seconds: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if harness.log().contains(text) { return true }
            usleep(20_000)
        }
        return false
    }

    func testAFloodOfSearchesIsBoundedStopsWhenItsClientGoesAndOthersAreAnswered() throws {
        let other = try harness.client(name: "other")
        for index in 0..<10 {
            let id = try harness.createConversation(other, title: "flood \(index)")
            _ = try other.call("conversation.attach", ["conversation": .string(id), "history": 0])
            let sent = try other.call("message.send", ["conversation": .string(id), "content": .string("[[reply:needle in a haystack]] look \(index)")])
            // Stored whole before the flood: a reply still streaming is not a hit yet.
            _ = try other.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        }
        let before = try peakKiB()

        let flood = try RPCClient(path: harness.socketPath)
        let hello = try flood.call("hello", ["client": "flood", "name": "flooder"])
        let floodID = try XCTUnwrap(hello["client_id"]?.string)
        var payload: [UInt8] = []
        for id in 1...100_000 {
            payload += Array(#"{"jsonrpc":"2.0","id":\#(id),"method":"conversation.search","params":{"query":"needle"}}"#.utf8) + [0x0A]
        }
        // Written without blocking for as long as the daemon takes it; a daemon that stops
        // reading (backpressure) leaves the rest unsent. The answers are never read.
        let flags = fcntl(flood.fd, F_GETFL)
        XCTAssertEqual(fcntl(flood.fd, F_SETFL, flags | O_NONBLOCK), 0)
        var offset = 0
        while offset < payload.count {
            let sent = payload[offset...].withUnsafeBytes { send(flood.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                offset += sent
                continue
            }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK else { break }
            // Not writable for two seconds: the daemon is holding back.
            var poller = pollfd(fd: flood.fd, events: Int16(POLLOUT), revents: 0)
            if poll(&poller, 1, 2000) == 0 { break }
        }

        // Another client is answered while the flood waits.
        let answered = Date()
        let hits = try other.call("conversation.search", ["query": "needle"], timeout: 120)
        let otherSeconds = Date().timeIntervalSince(answered)
        XCTAssertEqual(hits["hits"]?.array?.count, 20, "each user message and its reply")

        let hangUp = Date()
        flood.close()
        XCTAssertTrue(waitForLog("client=\(floodID) disconnected"), "the daemon never noticed the flood's client left:\n\(harness.log().suffix(2000))")
        let stopSeconds = Date().timeIntervalSince(hangUp)

        // Work for the flood stops with it: once its disconnect is logged, none of its searches
        // runs to the end. Another client's search after that is answered and logged.
        XCTAssertEqual(try other.call("conversation.search", ["query": "haystack"], timeout: 60)["hits"]?.array?.count, 20)
        let log = harness.log()
        let afterDisconnect = log.components(separatedBy: "client=\(floodID) disconnected").last ?? ""
        XCTAssertFalse(afterDisconnect.contains("search client=\(floodID) "), "a search of the flood ran after it left")
        let floodSearches = log.components(separatedBy: "search client=\(floodID) ").count - 1

        let peak = try peakKiB()
        let reason = log.split(separator: "\n").first { $0.contains("client=\(floodID) disconnected") } ?? ""
        print("flood: \(reason)")
        print("flood: \(offset) of \(payload.count) bytes taken, \(floodSearches) searches answered, peak RSS \(before) KiB before, \(peak) KiB after,"
              + " stopped \(String(format: "%.3f", stopSeconds)) s after the hang-up, other client answered in \(String(format: "%.3f", otherSeconds)) s")
        XCTAssertLessThan(offset, payload.count, "the daemon read all 100,000 requests: no backpressure")
        // The bound: 64 unanswered requests, one read (64 KiB) of deferred lines and a 16 MiB
        // outbox for the flood, above what the daemon held before.
        XCTAssertLessThan(peak - before, 64 * 1024, "the flood grew the daemon by \(peak - before) KiB")
    }

    func testSearchesTakeTurnsBetweenClients() throws {
        let setup = try harness.client(name: "setup")
        for index in 0..<5 {
            let id = try harness.createConversation(setup, title: "turns \(index)")
            _ = try setup.call("conversation.attach", ["conversation": .string(id), "history": 0])
            let sent = try setup.call("message.send", ["conversation": .string(id), "content": .string("[[reply:a needle]] turn \(index)")])
            // Stored whole before anyone searches: a reply still streaming is not a hit yet.
            _ = try setup.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        }
        let busy = try RPCClient(path: harness.socketPath)
        defer { busy.close() }
        let busyID = try XCTUnwrap(try busy.call("hello", ["client": "busy"])["client_id"]?.string)
        let other = try RPCClient(path: harness.socketPath)
        defer { other.close() }
        let otherID = try XCTUnwrap(try other.call("hello", ["client": "other"])["client_id"]?.string)
        // 60 searches at once, within the bound, all read before the other client asks.
        var batch = ""
        for id in 1...60 { batch += #"{"jsonrpc":"2.0","id":\#(id),"method":"conversation.search","params":{"query":"needle"}}"# + "\n" }
        try busy.sendRaw(batch)
        XCTAssertNotNil(try busy.readFrame(timeout: 60), "the first answer")
        XCTAssertEqual(try other.call("conversation.search", ["query": "needle"], timeout: 60)["hits"]?.array?.count, 10)
        // Once the other client's search is queued, it waits for at most the busy client's search
        // that is running and the one next in turn, not for all of them: counted in the daemon's
        // log from the line that queued it, so how fast the machine runs does not matter.
        let log = harness.log()
        let queued = log.components(separatedBy: "search queued client=\(otherID) ")
        XCTAssertEqual(queued.count, 2, "the other client's search was queued once")
        let afterQueued = queued.last ?? ""
        let untilAnswered = afterQueued.components(separatedBy: "search client=\(otherID) ").first ?? ""
        let busyFirst = untilAnswered.components(separatedBy: "search client=\(busyID) ").count - 1
        XCTAssertLessThanOrEqual(busyFirst, 2, "the other client's search waited for \(busyFirst) of the busy client's")
    }
}
