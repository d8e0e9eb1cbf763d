import XCTest

@testable import Broker
import ConfabProtocol
import DaemonSettings
import LogStore
import ServiceSettings
import Upstream

/// What a reply sends of the files its turns carry: read from the blob store off the loop,
/// a missing one as a line saying so, images as lines to a model that takes none.
final class ReplyAttachmentTests: XCTestCase {
    private var b: InProcessBroker!
    private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 7, 7, 7]
    private let text = Array("fn main() {}\n".utf8)

    override func setUpWithError() throws {
        b = try InProcessBroker { settings in
            settings.profiles.append(Profile(name: "blind", provider: Provider.defaultName))
            settings.profiles[settings.profiles.count - 1].takesImages = false
        }
    }

    override func tearDown() {
        b?.close()
        b = nil
    }

    private func conversation(profile: String? = nil) throws -> Conversation {
        var params: [String: JSON] = [:]
        if let profile { params["profile"] = .string(profile) }
        let id = try XCTUnwrap(try b.call(.conversationCreate, .object(params))["conversation"]?["id"]?.string)
        try b.call(.conversationAttach, ["conversation": .string(id)])
        return try XCTUnwrap(b.broker.conversations[id])
    }

    /// Stores `bytes` as a blob and returns its reference as a message records it.
    private func stored(_ bytes: [UInt8], name: String) throws -> Attachment {
        var digest: String?
        b.store.blobs.store(bytes) { result in digest = try? result.get() }
        b.turn(until: { digest != nil })
        return Attachment(name: name, type: try XCTUnwrap(AttachmentType.detect(bytes)), size: bytes.count, sha256: try XCTUnwrap(digest))
    }

    /// A user message carrying `attachments`, stored as a send stores it, and its reply's request.
    private func send(_ content: String, _ attachments: [Attachment], in conversation: Conversation) throws -> ChatRequest {
        let before = b.upstream.streams.count
        let ids = conversation.reserveSend()
        let author = Author(uid: 0, login: "test", name: "test", clientID: "c1")
        let message = Message(id: ids.message, conversation: conversation.id, role: .user, content: content, status: .complete,
                              created: .now(), author: author, attachments: attachments)
        try conversation.log.write([.message(message)])
        conversation.insert(message)
        conversation.enqueueReply(ids.reply, requestedBy: author)
        b.broker.replies.startNext(in: conversation)
        b.turn(until: { b.upstream.streams.count > before })
        return try XCTUnwrap(b.upstream.streams.count > before ? b.upstream.streams[before].request : nil, "no request")
    }

    private func finish(_ text: String) throws {
        let stream = try XCTUnwrap(b.upstream.streams.last)
        stream.send(text)
        stream.finish()
        b.turn(until: { b.broker.conversations.values.allSatisfy { $0.active == nil } })
    }

    func testAReplySendsTheBytesOfItsTurnsFiles() throws {
        let conversation = try conversation()
        let image = try stored(png, name: "shot.png")
        let file = try stored(text, name: "main.swift")
        let request = try send("look", [image, file], in: conversation)
        let turn = try XCTUnwrap(request.messages.last)
        XCTAssertEqual(turn.attachments.map(\.content), [.image(encoding: png), .text("fn main() {}\n")])
        XCTAssertEqual(turn.text(imagesAsLines: false), "look\n\nmain.swift:\n```\nfn main() {}\n```")
        try finish("a program")
        // The next reply sends the history's files again, read again.
        let next = try send("and now?", [], in: conversation)
        XCTAssertEqual(next.messages.first?.attachments.map(\.content), [.image(encoding: png), .text("fn main() {}\n")])
    }

    func testAFileRemovedBehindTheDaemonsBackIsALineAndTheConversationGoesOn() throws {
        let conversation = try conversation()
        let image = try stored(png, name: "gone.png")
        XCTAssertEqual(b.store.blobs.remove([image.sha256]), 1)
        let request = try send("see", [image], in: conversation)
        XCTAssertEqual(request.messages.last?.attachments.map(\.content),
                       [.line("[attached file gone.png (image/png) not sent: its stored copy could not be read]")])
        try finish("I cannot see it")
        XCTAssertEqual(try conversation.allMessages().last?.status, .complete)
    }

    func testImagesGoAsLinesToAModelThatTakesNone() throws {
        let conversation = try conversation(profile: "blind")
        let image = try stored(png, name: "shot.png")
        let file = try stored(text, name: "main.swift")
        XCTAssertEqual(b.broker.replies.imagePolicy(of: conversation).refusal,
                       "profile \"blind\" (vision = false) takes no images: this conversation's model would not be sent them")
        XCTAssertThrowsError(try b.broker.refuseImages([image], in: conversation))
        XCTAssertNoThrow(try b.broker.refuseImages([file], in: conversation), "text files go to every model")
        // An image already in its history (stored before vision = false was set) is named instead.
        let request = try send("look", [image, file], in: conversation)
        XCTAssertEqual(request.messages.last?.attachments.map(\.content),
                       [.line("[image shot.png (image/png, 11 B) not sent: this model takes no images]"), .text("fn main() {}\n")])
        XCTAssertNil(b.broker.replies.imagePolicy(of: try self.conversation()).refusal, "the default provider takes images")
    }

    /// A reader that answers only when the test says so.
    private final class HeldReader: AttachmentReader {
        var pending: [(digests: [String], done: ([String: [UInt8]]) -> Void)] = []
        func read(_ digests: [String], done: @escaping ([String: [UInt8]]) -> Void) { pending.append((digests, done)) }
    }

    func testAReplyCancelledWhileItsFilesAreReadAsksNothing() throws {
        let conversation = try conversation()
        let image = try stored(png, name: "shot.png")
        let held = HeldReader()
        b.broker.attachmentReader = held
        let ids = conversation.reserveSend()
        let author = Author(uid: 0, login: "test", name: "test", clientID: "c1")
        let message = Message(id: ids.message, conversation: conversation.id, role: .user, content: "look", status: .complete,
                              created: .now(), author: author, attachments: [image])
        try conversation.log.write([.message(message)])
        conversation.insert(message)
        conversation.enqueueReply(ids.reply, requestedBy: author)
        b.broker.replies.startNext(in: conversation)
        b.waitFor(.messageCreated)
        XCTAssertEqual(held.pending.map(\.digests), [[image.sha256]], "the reply is announced, then reads its files")
        XCTAssertTrue(b.upstream.streams.isEmpty, "nothing is asked before the files are read")

        XCTAssertEqual(try b.call(.generationCancel, ["conversation": .string(conversation.id)])["cancelled"]?.string, ids.reply)
        b.turn(until: { conversation.active == nil })
        held.pending[0].done([image.sha256: png])
        b.turn(until: { false }, limit: 200)
        XCTAssertTrue(b.upstream.streams.isEmpty, "a cancelled reply asks nothing when its files arrive")
        XCTAssertEqual(try conversation.allMessages().last?.status, .cancelled)
    }
}
