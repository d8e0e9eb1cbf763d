import ConfabProtocol
import Foundation
import XCTest

/// A model server that refuses the images it is sent (a file that starts like a PNG and is junk,
/// or a server that takes none) does not break the conversation: the request goes once more
/// with each image as a line naming it, announced as a retry, and the images it refused go so
/// from then on (docs/protocol.md, "What the model is sent").
final class ImageRefusalTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    static let config = VisionTests.anthropicProvider

    /// A PNG signature and junk after it: stored as an image, and no server can decode it.
    private let junk = AttachmentTests.image(size: 3000, seed: 9)
    private let refusedLine = "[image junk.png (image/png, 3 KiB) not sent: the model server refused the request with images]"

    private func start() throws -> RPCClient {
        harness = try Harness(config: Self.config)
        return try harness.client()
    }

    private func conversation(_ client: RPCClient, _ params: JSON = [:]) throws -> String {
        let id = try XCTUnwrap(try client.call(RPCMethod.conversationCreate.rawValue, params)["conversation"]?["id"]?.string)
        _ = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        return id
    }

    private func upload(_ client: RPCClient, _ bytes: [UInt8]) throws -> String {
        try XCTUnwrap(try AttachmentTests.upload(client, bytes)["attachment"]?["sha256"]?.string)
    }

    /// Sends, waits for the reply's end: every notification up to it and the final message.
    private func ask(_ client: RPCClient, _ conversation: String, _ content: String,
                     _ attachments: [(name: String, sha256: String)] = []) throws -> (notes: [(method: String, params: JSON)], final: JSON) {
        let sent = try client.call(RPCMethod.messageSend.rawValue, [
            "conversation": .string(conversation), "content": .string(content),
            "attachments": .array(attachments.map { ["name": .string($0.name), "sha256": .string($0.sha256)] }),
        ])
        return try client.awaitReply(try XCTUnwrap(sent["reply"]?.string), timeout: 30)
    }

    private func retries(_ notes: [(method: String, params: JSON)]) -> [JSON] {
        notes.filter { $0.method == RPCNotification.messageRetrying.rawValue }.map(\.params)
    }

    /// The texts and image parts (or blocks) of every user turn of a recorded request body.
    private func userTurns(_ body: JSON?) -> [(images: Int, text: String)] {
        (body?["messages"]?.array ?? []).filter { $0["role"] == "user" }.map { turn in
            guard let parts = turn["content"]?.array else { return (0, turn["content"]?.string ?? "") }
            return (parts.filter { $0["type"] == "image_url" || $0["type"] == "image" }.count, parts.compactMap { $0["text"]?.string }.joined())
        }
    }

    func testAJunkImageRefusedIsSentAgainAsALineAndTheConversationGoesOn() throws {
        let client = try start()
        let id = try conversation(client)
        let digest = try upload(client, junk)
        let first = try ask(client, id, "what is this? [[refuse-images]]", [("junk.png", digest)])
        XCTAssertEqual(first.final["status"]?.string, MessageStatus.complete.rawValue, "\(first.final)")
        let retrying = retries(first.notes)
        XCTAssertEqual(retrying.count, 1, "\(first.notes.map(\.method))")
        XCTAssertTrue(retrying.first?["error"]?["message"]?.string?.hasPrefix("the model server refused the request with images: ") == true,
                      "\(retrying)")
        XCTAssertEqual(retrying.first?["error"]?["status"]?.int, 400)

        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(userTurns(requests.first?["body"]).map(\.images), [1], "the first request carries the image")
        let second = userTurns(requests.last?["body"])
        XCTAssertEqual(second.map(\.images), [0], "the second carries none")
        XCTAssertTrue(second.first?.text.contains(refusedLine) == true, "\(second)")

        // The next reply sends the refused image as the line at once: no refusal, no retry.
        let next = try ask(client, id, "and now? [[refuse-images]]")
        XCTAssertEqual(next.final["status"]?.string, MessageStatus.complete.rawValue, "\(next.final)")
        XCTAssertTrue(retries(next.notes).isEmpty, "\(next.notes.map(\.method))")
        XCTAssertEqual(harness.upstreamRequests().count, 3)
        let turns = userTurns(harness.upstreamRequests().last?["body"])
        XCTAssertEqual(turns.count, 2)
        XCTAssertTrue(turns[0].text.contains(refusedLine), "\(turns)")

        // A new image is still tried as an image.
        let fresh = try upload(client, AttachmentTests.image(size: 2000, seed: 10))
        let third = try ask(client, id, "this one?", [("fresh.png", fresh)])
        XCTAssertEqual(third.final["status"]?.string, MessageStatus.complete.rawValue, "\(third.final)")
        XCTAssertTrue(retries(third.notes).isEmpty)
        XCTAssertEqual(userTurns(harness.upstreamRequests().last?["body"]).map(\.images), [0, 0, 1])
    }

    func testAModelThatRefusedEveryImageTwiceIsSentNoneAfterwards() throws {
        let client = try start()
        let id = try conversation(client)
        for seed in 0..<2 {
            let digest = try upload(client, AttachmentTests.image(size: 2000, seed: 20 + seed))
            let reply = try ask(client, id, "look \(seed) [[refuse-images]]", [("shot\(seed).png", digest)])
            XCTAssertEqual(reply.final["status"]?.string, MessageStatus.complete.rawValue, "\(reply.final)")
            XCTAssertEqual(retries(reply.notes).count, 1, "a new image is tried once more")
        }
        let digest = try upload(client, AttachmentTests.image(size: 2000, seed: 30))
        let reply = try ask(client, id, "and this? [[refuse-images]]", [("third.png", digest)])
        XCTAssertEqual(reply.final["status"]?.string, MessageStatus.complete.rawValue, "\(reply.final)")
        XCTAssertTrue(retries(reply.notes).isEmpty, "\(reply.notes.map(\.method))")
        XCTAssertEqual(harness.upstreamRequests().count, 5)
        let turns = userTurns(harness.upstreamRequests().last?["body"])
        XCTAssertEqual(turns.map(\.images), [0, 0, 0])
        XCTAssertTrue(turns[2].text.contains("[image third.png (image/png, 2 KiB) not sent: the model server refused the request with images]"),
                      "\(turns)")
    }

    func testWhatOneConversationsImagesTaughtDoesNotStopAnothersImages() throws {
        // Two junk images refused in one conversation turn images off there only: another
        // conversation of the same model (another user's, in a shared daemon) still sends its own.
        let client = try start()
        let spoiled = try conversation(client)
        for seed in 0..<2 {
            let digest = try upload(client, AttachmentTests.image(size: 2000, seed: 40 + seed))
            _ = try ask(client, spoiled, "junk \(seed) [[refuse-images]]", [("junk\(seed).png", digest)])
        }
        let other = try conversation(client)
        let digest = try upload(client, AttachmentTests.image(size: 2000, seed: 50))
        let reply = try ask(client, other, "a real one", [("real.png", digest)])
        XCTAssertEqual(reply.final["status"]?.string, MessageStatus.complete.rawValue, "\(reply.final)")
        XCTAssertEqual(userTurns(harness.upstreamRequests().last?["body"]).map(\.images), [1], "sent as an image")
    }

    func testAnEmptyAnswerToARequestWithImagesIsTheirRefusal() throws {
        // llama-cpp-python answers an image sent to a text-only model with 200 and an empty stream.
        harness = try Harness()
        let client = try harness.client()
        let id = try conversation(client)
        let digest = try upload(client, junk)
        let first = try ask(client, id, "what is this? [[refuse-images:empty]]", [("junk.png", digest)])
        XCTAssertEqual(first.final["status"]?.string, MessageStatus.complete.rawValue, "\(first.final)")
        let retrying = retries(first.notes)
        XCTAssertEqual(retrying.count, 1, "\(first.notes.map(\.method))")
        XCTAssertTrue(retrying.first?["error"]?["message"]?.string?.hasPrefix("the model server refused the request with images: the server gave no answer") == true,
                      "\(retrying)")
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(userTurns(requests.last?["body"]).map(\.images), [0])
        XCTAssertTrue(userTurns(requests.last?["body"]).first?.text.contains(refusedLine) == true)
        // And the conversation goes on: the image goes as its line from then on.
        let next = try ask(client, id, "and now? [[refuse-images:empty]]")
        XCTAssertEqual(next.final["status"]?.string, MessageStatus.complete.rawValue, "\(next.final)")
        XCTAssertTrue(retries(next.notes).isEmpty)
    }

    func testAnthropicImageBlocksRefusedAreSentAgainAsALine() throws {
        let client = try start()
        let id = try conversation(client, ["provider": "claude"])
        let digest = try upload(client, junk)
        let reply = try ask(client, id, "look [[refuse-images]]", [("junk.png", digest)])
        XCTAssertEqual(reply.final["status"]?.string, MessageStatus.complete.rawValue, "\(reply.final)")
        XCTAssertEqual(retries(reply.notes).count, 1)
        let requests = harness.upstreamRequests()
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(userTurns(requests.first?["body"]).map(\.images), [1])
        let second = userTurns(requests.last?["body"])
        XCTAssertEqual(second.map(\.images), [0])
        XCTAssertTrue(second.first?.text.contains(refusedLine) == true, "\(second)")
    }

    func testARefusalOfTheKeyIsNotRetriedWithoutImages() throws {
        let client = try start()
        let id = try conversation(client)
        let digest = try upload(client, junk)
        let reply = try ask(client, id, "look [[status:401]]", [("junk.png", digest)])
        XCTAssertEqual(reply.final["status"]?.string, MessageStatus.failed.rawValue, "\(reply.final)")
        XCTAssertTrue(retries(reply.notes).isEmpty, "\(reply.notes.map(\.method))")
        XCTAssertEqual(harness.upstreamRequests().count, 1)
    }

    func testARequestRefusedWithAndWithoutImagesFailsNamingBothAndIsNotSentAThirdTime() throws {
        let client = try start()
        let id = try conversation(client)
        let digest = try upload(client, junk)
        let reply = try ask(client, id, "look [[status:400]]", [("junk.png", digest)])
        XCTAssertEqual(reply.final["status"]?.string, MessageStatus.failed.rawValue, "\(reply.final)")
        XCTAssertEqual(retries(reply.notes).count, 1)
        XCTAssertEqual(harness.upstreamRequests().count, 2)
        XCTAssertTrue(reply.final["error"]?["message"]?.string?.hasPrefix(
            "the server refused the request with its images, and again with each image as a line naming it: ") == true, "\(reply.final)")
        // Nothing was learnt: the next reply tries the image again.
        _ = try ask(client, id, "again")
        XCTAssertEqual(userTurns(harness.upstreamRequests().last?["body"]).first?.images, 1)
    }
}
