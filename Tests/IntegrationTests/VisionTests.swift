import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What the model is sent of a message's files, through the real daemon to the fake upstream's
/// request log: chat parts with `data:` URLs, Anthropic image blocks, text files fenced inline,
/// sends refused before anything is stored or requested when the model takes no images, and
/// images in the history of such a conversation named instead (docs/protocol.md, "What the
/// model is sent").
final class VisionTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    /// An Anthropic provider on the fake upstream, as the tests of images use it.
    static let anthropicProvider = """
        [providers.claude]
        api = "anthropic"
        base_url = "$UPSTREAM/anthropic/v1"
        api_key = "sk-ant-claude"
        model = "claude-test"
        max_tokens = 321
        timeout_seconds = 5
        prompt_cache = false  # exact bodies; the breakpoints are PromptCacheTests'

        """

    static let config = anthropicProvider + """
        [providers.legacy]
        api = "completions"
        base_url = "$UPSTREAM/legacy/v1"
        api_key = "sk-legacy"
        model = "legacy-model"
        timeout_seconds = 5

        [profiles.blind]
        vision = false

        """

    private let image = AttachmentTests.image(size: 3000, seed: 5)
    private let text = "let x = 1\n// ``` inside\n"
    private var imageURL: String { "data:image/png;base64," + Base64.encode(image) }
    private var fencedText: String { "notes.swift:\n````\n" + text + "````" }

    private func start() throws -> RPCClient {
        harness = try Harness(config: Self.config)
        return try harness.client()
    }

    private func conversation(_ client: RPCClient, _ params: JSON = [:]) throws -> String {
        let id = try XCTUnwrap(try client.call(RPCMethod.conversationCreate.rawValue, params)["conversation"]?["id"]?.string)
        _ = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        return id
    }

    /// Stores both files on `client`'s connection: their digests.
    private func upload(_ client: RPCClient) throws -> (image: String, text: String) {
        let imageDigest = try XCTUnwrap(try AttachmentTests.upload(client, image)["attachment"]?["sha256"]?.string)
        let textDigest = try XCTUnwrap(try AttachmentTests.upload(client, Array(text.utf8))["attachment"]?["sha256"]?.string)
        return (imageDigest, textDigest)
    }

    private func send(_ client: RPCClient, _ conversation: String, _ content: String,
                      _ attachments: [(name: String, sha256: String)] = []) throws -> JSON {
        try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(conversation), "content": .string(content),
                                                         "attachments": .array(attachments.map { ["name": .string($0.name), "sha256": .string($0.sha256)] })])
    }

    /// Sends and waits for the reply to complete.
    @discardableResult
    private func ask(_ client: RPCClient, _ conversation: String, _ content: String,
                     _ attachments: [(name: String, sha256: String)] = []) throws -> JSON {
        let reply = try XCTUnwrap(try send(client, conversation, content, attachments)["reply"]?.string)
        let final = try client.awaitReply(reply).final
        XCTAssertEqual(final["status"]?.string, MessageStatus.complete.rawValue, "\(final)")
        return final
    }

    private func lastBody() throws -> JSON {
        try XCTUnwrap(harness.upstreamRequests().last?["body"], "no request")
    }

    private func refusal(_ body: () throws -> Void) -> RPCError? {
        do {
            try body()
            return nil
        } catch let error as RPCError {
            return error
        } catch {
            XCTFail("\(error)")
            return nil
        }
    }

    func testChatCompletionsGetPartsWithADataURLAndTheTextFileFencedInline() throws {
        let client = try start()
        let id = try conversation(client)
        let digests = try upload(client)
        try ask(client, id, "What is this?", [("shot.png", digests.image), ("notes.swift", digests.text)])
        let expected = try JSON.parse(#"{"model":"fake-model","messages":[{"role":"user","content":["#
            + #"{"type":"text","text":"# + JSON.string("What is this?\n\n" + fencedText).text + "},"
            + #"{"type":"image_url","image_url":{"url":""# + imageURL + #""}}]}],"stream":true,"stream_options":{"include_usage":true}}"#)
        XCTAssertEqual(try lastBody(), expected)

        // The next reply sends the history again: the image turn as parts, the new one as a string.
        try ask(client, id, "And now?")
        let messages = try XCTUnwrap(try lastBody()["messages"]?.array)
        XCTAssertEqual(messages.count, 3)
        XCTAssertEqual(messages[0], expected["messages"]?.array?.first)
        XCTAssertEqual(messages[2], ["role": "user", "content": "And now?"])
    }

    /// The image parts of the user turns of the last request, and their text parts.
    private func userTurns() throws -> [(images: Int, text: String)] {
        try XCTUnwrap(try lastBody()["messages"]?.array).filter { $0["role"] == "user" }.map { turn in
            let parts = turn["content"]?.array ?? []
            return (parts.filter { $0["type"] == "image_url" }.count, parts.compactMap { $0["text"]?.string }.joined())
        }
    }

    func testOneRequestCarriesTheNewestTwentyImagesAndNamesTheOlderOnes() throws {
        let client = try start()
        let id = try conversation(client)
        var older: [(name: String, sha256: String)] = [], newer: [(name: String, sha256: String)] = []
        for seed in 0..<22 {
            let digest = try XCTUnwrap(try AttachmentTests.upload(client, AttachmentTests.image(size: 2000, seed: 100 + seed))["attachment"]?["sha256"]?.string)
            if seed < 16 { older.append(("a\(seed).png", digest)) } else { newer.append(("b\(seed).png", digest)) }
        }
        try ask(client, id, "first", older)
        XCTAssertEqual(try userTurns().map(\.images), [16])
        try ask(client, id, "second", newer)
        let turns = try userTurns()
        XCTAssertEqual(turns.map(\.images), [14, 6], "the newest 20 images go as images")
        for name in ["a14.png", "a15.png"] {
            XCTAssertTrue(turns[0].text.contains("[image \(name) (image/png, 2 KiB) not sent: one request carries the newest 20 images and 20 MiB of images at most]"),
                          turns[0].text)
        }
        XCTAssertFalse(turns[0].text.contains("a13.png"), turns[0].text)
        XCTAssertTrue(harness.log().contains("2 older images sent as a line"), harness.log())
    }

    func testOneRequestCarriesAtMostTwentyMebibytesOfImages() throws {
        let client = try start()
        let id = try conversation(client)
        let size = 4_718_592  // 4.5 MiB: four are 18 MiB, five would be 22.5.
        var digests: [String] = []
        for seed in 0..<5 {
            digests.append(try XCTUnwrap(try AttachmentTests.upload(client, AttachmentTests.image(size: size, seed: 40 + seed))["attachment"]?["sha256"]?.string))
        }
        try ask(client, id, "two", [("old0.png", digests[0]), ("old1.png", digests[1])])
        try ask(client, id, "three", digests[2...].enumerated().map { ("new\($0.offset).png", $0.element) })
        let turns = try userTurns()
        XCTAssertEqual(turns.map(\.images), [1, 3])
        XCTAssertTrue(turns[0].text.contains("[image old1.png (image/png, 4.5 MiB) not sent: one request carries"), turns[0].text)
        XCTAssertFalse(turns[0].text.contains("old0.png"), turns[0].text)
    }

    func testAnthropicGetsImageBlocksBeforeTheText() throws {
        let client = try start()
        let id = try conversation(client, ["provider": "claude"])
        let digests = try upload(client)
        // Only an image, no text of its own: the turn is the image block alone.
        try ask(client, id, "", [("shot.png", digests.image)])
        XCTAssertEqual(try lastBody()["messages"], try JSON.parse(#"[{"role":"user","content":[{"type":"image","source":"#
            + #"{"type":"base64","media_type":"image/png","data":""# + Base64.encode(image) + #""}}]}]"#))
        try ask(client, id, "and this file?", [("shot.png", digests.image), ("notes.swift", digests.text)])
        let messages = try XCTUnwrap(try lastBody()["messages"]?.array)
        XCTAssertEqual(messages.count, 3)
        XCTAssertEqual(messages[2], try JSON.parse(#"{"role":"user","content":[{"type":"image","source":"#
            + #"{"type":"base64","media_type":"image/png","data":""# + Base64.encode(image) + #""}},"#
            + #"{"type":"text","text":"# + JSON.string("and this file?\n\n" + fencedText).text + "}]}"))
    }

    func testCompletionsTakeTextFilesInlineAndRefuseImagesBeforeAnyRequest() throws {
        let client = try start()
        let id = try conversation(client, ["provider": "legacy"])
        let digests = try upload(client)
        let refused = refusal { _ = try send(client, id, "look", [("shot.png", digests.image)]) }
        XCTAssertEqual(refused?.code, -32602)
        XCTAssertTrue(refused?.message.contains("provider \"legacy\"") == true, refused?.message ?? "")
        XCTAssertTrue(harness.upstreamRequests().isEmpty, "the fake saw a request")
        let history = try client.call(RPCMethod.conversationGet.rawValue, ["conversation": .string(id)])
        XCTAssertEqual(history["conversation"]?["message_count"]?.int, 0, "nothing was stored: \(history)")

        try ask(client, id, "read this", [("notes.swift", digests.text)])
        XCTAssertEqual(try lastBody()["prompt"]?.string, "Human: read this\n\n" + fencedText + "\nAI:")
    }

    func testAProfileWithVisionFalseRefusesImagesAndTakesTextFiles() throws {
        let client = try start()
        let id = try conversation(client, ["profile": "blind"])
        let digests = try upload(client)
        let refused = refusal { _ = try send(client, id, "look", [("notes.swift", digests.text), ("shot.png", digests.image)]) }
        XCTAssertEqual(refused?.code, -32602)
        XCTAssertTrue(refused?.message.contains("profile \"blind\"") == true, refused?.message ?? "")
        XCTAssertTrue(refused?.message.contains("shot.png") == true, refused?.message ?? "")
        XCTAssertTrue(harness.upstreamRequests().isEmpty)
        try ask(client, id, "read this", [("notes.swift", digests.text)])
        XCTAssertEqual(try lastBody()["messages"], try JSON.parse(#"[{"role":"user","content":"#
            + JSON.string("read this\n\n" + fencedText).text + "}]"))
    }

    func testImagesInTheHistoryGoAsALineOnceAReloadSaysVisionFalse() throws {
        let client = try start()
        let id = try conversation(client)
        let digests = try upload(client)
        try ask(client, id, "look", [("shot.png", digests.image)])
        XCTAssertNotNil(try lastBody()["messages"]?.array?.first?["content"]?.array, "sent as parts first")

        let before = harness.log().components(separatedBy: "config reloaded from").count
        try harness.writeConfig(Self.config)
        // `vision = false` on [upstream]: written by hand, as writeConfig writes that table itself.
        var written = try String(contentsOfFile: harness.configPath, encoding: .utf8)
        written = written.replacingOccurrences(of: "max_retries = 0\n", with: "max_retries = 0\nvision = false\n")
        try written.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        harness.daemon?.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(20)
        while harness.log().components(separatedBy: "config reloaded from").count == before {
            guard Date() < deadline else { return XCTFail("no reload:\n\(harness.log())") }
            usleep(10_000)
        }

        try ask(client, id, "and now?")
        let messages = try XCTUnwrap(try lastBody()["messages"]?.array)
        XCTAssertEqual(messages.first, ["role": "user", "content": "look\n\n[image shot.png (image/png, 3 KiB) not sent: this model takes no images]"])
        XCTAssertFalse(harness.upstreamRequests().last?["body"]?.text.contains(Base64.encode(image)) ?? true)
        let refused = refusal { _ = try send(client, id, "again", [("shot.png", digests.image)]) }
        XCTAssertTrue(refused?.message.contains("provider \"default\"") == true, refused?.message ?? "")
    }

    func testARestartKeepsTheAttachmentsSentWithTheNextReply() throws {
        let client = try start()
        let id = try conversation(client)
        let digests = try upload(client)
        try ask(client, id, "What is this?", [("shot.png", digests.image), ("notes.swift", digests.text)])
        let first = try XCTUnwrap(try lastBody()["messages"]?.array?.first)

        try harness.restartDaemon()
        let again = try harness.client()
        _ = try again.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        try ask(again, id, "Still there?")
        let messages = try XCTUnwrap(try lastBody()["messages"]?.array)
        XCTAssertEqual(messages.count, 3)
        XCTAssertEqual(messages.first, first, "the image and the text file are read from the store again")
        XCTAssertEqual(messages.first?["content"]?.array?.last?["image_url"]?["url"]?.string, imageURL)
    }

    func testAFileRemovedBehindTheDaemonsBackIsALineAndTheConversationGoesOn() throws {
        let client = try start()
        let id = try conversation(client)
        let digests = try upload(client)
        try ask(client, id, "look", [("shot.png", digests.image)])
        let path = harness.dataDirectory + "/blobs/" + digests.image.prefix(2) + "/" + digests.image
        XCTAssertEqual(unlink(path), 0)
        try ask(client, id, "and now?")
        let messages = try XCTUnwrap(try lastBody()["messages"]?.array)
        XCTAssertEqual(messages.first, ["role": "user", "content": "look\n\n[attached file shot.png (image/png) not sent: its stored copy could not be read]"])
        XCTAssertTrue(harness.log().contains("sent as a line of text"), harness.log())
    }
}
