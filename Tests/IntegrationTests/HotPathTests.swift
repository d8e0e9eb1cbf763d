import ConfabProtocol
import Foundation
import XCTest

/// Re-entrancy on the broker's hot path: work that finishes inside a C callback, and clients
/// closed while a notification is being fanned out.
final class HotPathTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    /// With syncing off, the end of one reply used to start the next queued reply from inside
    /// curl's write callback: curl refused to add the transfer there (CURLM_RECURSIVE_API_CALL)
    /// and the queued reply sat until the stall timer failed it.
    func testAQueuedReplyStartsAtOnceWhenThePreviousOneEndsWithSyncingOff() throws {
        harness = try Harness(config: "connect_timeout_seconds = 1\n[storage]\nfsync = false\n")
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let first = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]]"])
        let second = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:two]]"])
        let (_, firstFinal) = try client.awaitReply(try XCTUnwrap(first["reply"]?.string))
        let (notes, secondFinal) = try client.awaitReply(try XCTUnwrap(second["reply"]?.string), timeout: 30)
        XCTAssertEqual(firstFinal["status"]?.string, "complete")
        XCTAssertEqual(secondFinal["status"]?.string, "complete", "\(secondFinal)")
        XCTAssertEqual(secondFinal["content"]?.string, "two")
        XCTAssertFalse(notes.contains { $0.method == "message.retrying" }, "the queued reply had to be retried: \(notes.map(\.method))")
        XCTAssertFalse(harness.log().contains("curl_multi"), harness.log())
    }

    /// A line over the limit ends the connection, but a send before it that was still waiting
    /// on the disk is answered first: the answer used to be dropped with the connection.
    func testASendBeforeATooLongLineIsStillAnsweredBeforeTheConnectionCloses() throws {
        harness = try Harness(config: "[limits]\nmax_line_bytes = 4096\n")
        let client = try harness.client()
        let id = try harness.createConversation(client)
        let send = RPC.request(id: .int(77), method: "message.send", params: ["conversation": .string(id), "content": "kept"])
        try client.sendRaw(send + Array(String(repeating: "x", count: 10_000).utf8) + [0x0A])
        let first = try XCTUnwrap(try client.readFrame())
        XCTAssertEqual(first["id"], .int(77), "\(first)")
        XCTAssertEqual(first["result"]?["message"]?["content"]?.string, "kept")
        var frame = try client.readFrame()
        while let notification = frame, notification["method"] != nil { frame = try client.readFrame() }
        XCTAssertEqual(frame?["error"]?["code"]?.int, RPCError.lineTooLong, "\(String(describing: frame))")
        while try client.readFrame() != nil {}
    }

    /// A slow client closed in the middle of a broadcast used to announce its departure from
    /// inside the fan-out loop: clients before it saw the delta then `client.detached`, clients
    /// after it the reverse. Every attached client must see one order.
    func testClientsBeforeAndAfterASlowReaderSeeTheSameOrderWhenItIsDropped() throws {
        harness = try Harness(config: "[limits]\nmax_client_buffer_bytes = 131072\n")
        let first = try harness.client(name: "first")
        let id = try harness.createConversation(first)
        try first.call("conversation.attach", ["conversation": .string(id)])
        let sleeper = try harness.client(name: "sleeper")
        try sleeper.call("conversation.attach", ["conversation": .string(id)])
        var small: Int32 = 4096
        setsockopt(sleeper.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let last = try harness.client(name: "last")
        try last.call("conversation.attach", ["conversation": .string(id)])

        let sent = try first.call("message.send", ["conversation": .string(id), "content": "[[words:60000]] [[chunk:60]] [[delay:1]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        // Both readers must keep up while the sleeper falls behind: read them on two threads.
        let readers = [ReplyReader(first, reply: reply), ReplyReader(last, reply: reply)]
        for reader in readers { reader.start() }
        let orders = try readers.map { try $0.wait() }

        XCTAssertTrue(harness.log().contains("slow reader"), harness.log())
        for order in orders { XCTAssertTrue(order.contains { $0.hasPrefix("detached") }, "the sleeper was never dropped") }
        XCTAssertEqual(orders[0].count, orders[1].count)
        if let split = zip(orders[0], orders[1]).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
            XCTFail("orders differ at \(split.offset): \(orders[0][split.offset]) vs \(orders[1][split.offset])")
        }
    }
}

/// Reads one client's notifications on its own thread until a reply ends; the client belongs
/// to that thread until `wait` returns.
private final class ReplyReader: @unchecked Sendable {
    private let client: RPCClient
    private let reply: String
    private let finished = DispatchSemaphore(value: 0)
    private var order: [String] = []
    private var failure: Error?

    init(_ client: RPCClient, reply: String) {
        self.client = client
        self.reply = reply
    }

    func start() {
        Thread.detachNewThread { [self] in
            do {
                let (notes, _) = try client.awaitReply(reply, timeout: 60)
                order = notes.compactMap { note in
                    switch note.method {
                    case "message.delta": "delta " + (note.params["content"]?.string ?? "")
                    case "client.detached": "detached " + (note.params["client"]?["id"]?.string ?? "")
                    case "message.completed", "message.failed": note.method
                    default: nil
                    }
                }
            } catch {
                failure = error
            }
            finished.signal()
        }
    }

    func wait() throws -> [String] {
        finished.wait()
        if let failure { throw failure }
        return order
    }
}
