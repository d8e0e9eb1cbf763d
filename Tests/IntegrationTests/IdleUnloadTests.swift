import ConfabProtocol
import Foundation
import XCTest

/// Conversations nobody uses leave memory (their log closes, their summary stays) and come
/// back whole on the next request; one somebody is attached to stays.
final class IdleUnloadTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness(config: "[limits]\nunload_idle_seconds = 1\n") }
    override func tearDown() { harness?.tearDown() }

    /// The conversations whose logs confabd holds open, from its descriptors.
    private func openLogs() throws -> Set<String> {
        let pid = try XCTUnwrap(harness.daemon?.pid)
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        var ids: Set<String> = []
        for fd in fds {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                  target.hasPrefix(harness.dataDirectory + "/conversations/"), target.hasSuffix(".jsonl") else { continue }
            ids.insert(String(target.split(separator: "/").last!.dropLast(6)))
        }
        return ids
    }

    func testAnIdleConversationLeavesMemoryAndComesBackWholeWhileAnAttachedOneStays() throws {
        let client = try harness.client()
        let idle = try harness.createConversation(client, title: "idle")
        let watched = try harness.createConversation(client, title: "watched")
        var stored: [String: [JSON]] = [:]
        for id in [idle, watched] {
            try client.call("conversation.attach", ["conversation": .string(id)])
            let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:kept]]"])
            _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
            stored[id] = try client.call("conversation.history", ["conversation": .string(id)])["messages"]?.array
        }
        try client.call("conversation.detach", ["conversation": .string(idle)])
        XCTAssertEqual(try openLogs(), [idle, watched])

        let deadline = Date().addingTimeInterval(15)
        while try openLogs().contains(idle), Date() < deadline { usleep(100_000) }
        XCTAssertEqual(try openLogs(), [watched], "the idle conversation's log closed, the attached one's did not")
        let listed = try XCTUnwrap(client.call("conversation.get", ["conversation": .string(idle)])["conversation"])
        XCTAssertEqual(listed["message_count"]?.int, 2, "its summary stays")

        // Back whole on the next request that needs its messages, and writable again. The
        // history page may come from the log's end before the whole log is read (and opened);
        // the attach after it waits for that read.
        XCTAssertEqual(try client.call("conversation.history", ["conversation": .string(idle)])["messages"]?.array, stored[idle])
        try client.call("conversation.attach", ["conversation": .string(idle)])
        XCTAssertTrue(try openLogs().contains(idle))
        let again = try client.call("message.send", ["conversation": .string(idle), "content": "[[reply:after]]"])
        XCTAssertEqual(again["message"]?["id"]?.string, "m3")
        XCTAssertEqual(try client.awaitReply(try XCTUnwrap(again["reply"]?.string)).final["content"]?.string, "after")
    }

    func testANonPositiveUnloadTimeIsAConfigError() throws {
        try "[limits]\nunload_idle_seconds = 0\n".write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        XCTAssertEqual(harness.stopDaemon(), 0)
        XCTAssertThrowsError(try harness.startDaemon())
        XCTAssertTrue(harness.log().contains("limits.unload_idle_seconds must be positive"), harness.log())
    }
}
