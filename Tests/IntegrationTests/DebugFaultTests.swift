import XCTest

import ConfabProtocol

/// The debug build's fault modes (`CONFAB_DEBUG_FAULT`, LogStore's DebugFault), which the long
/// checks' self-tests run the daemon with (docs/reliability.md): each lies as it says on the
/// first occasion of its kind, seen in what a restart without the fault reads back from the
/// logs, and a name the daemon does not know stops it at start. That the daemon tells no such lie
/// without the variable is every other test.
final class DebugFaultTests: XCTestCase {
    private var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    /// A daemon running with `fault`, a client and a conversation it is attached to.
    private func start(_ fault: String) throws -> (RPCClient, String) {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["CONFAB_DEBUG_FAULT"] = fault
        try harness.startDaemon(environment: environment)
        XCTAssertTrue(harness.log().contains("debug fault \(fault) on"), harness.log())
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        _ = try client.call("conversation.attach", ["conversation": .string(conversation), "history": 0])
        return (client, conversation)
    }

    /// Sends `content`, naming `files`, and waits for its reply: the send's result and the reply as announced.
    private func send(_ client: RPCClient, _ conversation: String, _ content: String,
                      files: [(name: String, sha256: String)] = []) throws -> (sent: JSON, reply: JSON) {
        let sent = try client.call("message.send", ["conversation": .string(conversation), "content": .string(content),
                                                    "attachments": .array(files.map { ["name": .string($0.name), "sha256": .string($0.sha256)] })])
        return (sent, try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final)
    }

    /// The conversation's messages as a restart without the fault reads them from its log.
    private func stored(_ conversation: String) throws -> [JSON] {
        XCTAssertEqual(harness.stopDaemon(), 0)
        try harness.startDaemon()
        let client = try harness.client()
        let history = try client.call("conversation.history", ["conversation": .string(conversation), "limit": 100])
        return try XCTUnwrap(history["messages"]?.array)
    }

    func testANameItDoesNotKnowStopsTheDaemonAtStart() throws {
        harness = try Harness()
        harness.stopDaemon()
        var environment = ProcessInfo.processInfo.environment
        environment["CONFAB_DEBUG_FAULT"] = "reply-bytes"
        // It exits once the logs are loaded, with the socket already listening: a connection may
        // be taken and closed, so the harness's start may or may not see a refusal.
        try? harness.startDaemon(environment: environment)
        let status = try XCTUnwrap(harness.daemon).wait(seconds: 20)
        XCTAssertNotNil(status, "still running")
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(harness.log().contains("CONFAB_DEBUG_FAULT=reply-bytes: none such; one of drop-record, reply-byte"), harness.log())
    }

    func testReplyByteStoresACompleteReplyWithOneLetterChanged() throws {
        let (client, conversation) = try start("reply-byte")
        let (sent, reply) = try send(client, conversation, "[[reply:all is well]]")
        XCTAssertEqual(reply["content"]?.string, "all is well", "clients are told the right text")
        let messages = try stored(conversation)
        XCTAssertEqual(messages.map { $0["content"]?.string }, ["[[reply:all is well]]", "all is welL"])
        XCTAssertEqual(messages.last?["status"]?.string, "complete")
        XCTAssertEqual(messages.last?["id"], sent["reply"])
    }

    func testUserByteStoresAUserMessageWithOneLetterChanged() throws {
        let (client, conversation) = try start("user-byte")
        let (sent, _) = try send(client, conversation, "[[reply:fine]] hello")
        XCTAssertEqual(sent["message"]?["content"]?.string, "[[reply:fine]] hello")
        XCTAssertEqual(try stored(conversation).map { $0["content"]?.string }, ["[[reply:fine]] hellO", "fine"])
    }

    /// The two ways an answered send goes missing: the log leaves its record out of a write it
    /// reports whole, or the broker never asks for the write. Either way the reply is stored.
    func testDropRecordAndUnstoredAnnounceLoseAnAnsweredSend() throws {
        for fault in ["drop-record", "unstored-announce"] {
            let (client, conversation) = try start(fault)
            let (sent, reply) = try send(client, conversation, "[[reply:noted]] lost")
            XCTAssertEqual(sent["message"]?["content"]?.string, "[[reply:noted]] lost", fault)
            XCTAssertEqual(reply["content"]?.string, "noted", fault)
            let messages = try stored(conversation)
            XCTAssertEqual(messages.map { $0["role"]?.string }, ["assistant"], "\(fault): \(messages)")
            XCTAssertEqual(messages.map { $0["content"]?.string }, ["noted"], fault)
            harness.tearDown()
            harness = nil
        }
    }

    func testBlobRemovedUnlinksTheFileOfAStoredMessage() throws {
        let (client, conversation) = try start("blob-removed")
        let digest = try XCTUnwrap(AttachmentTests.upload(client, Array("some notes\n".utf8))["attachment"]?["sha256"]?.string)
        let path = harness.dataDirectory + "/blobs/" + digest.prefix(2) + "/" + digest
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "stored by blob.put")
        let (sent, _) = try send(client, conversation, "[[reply:read]] see the file", files: [("notes.txt", digest)])
        XCTAssertEqual(sent["message"]?["attachments"]?.array?.first?["sha256"]?.string, digest)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "unlinked once its message was stored")
        XCTAssertEqual(try stored(conversation).first?["attachments"]?.array?.first?["sha256"]?.string, digest, "the message still names it")
    }
}
