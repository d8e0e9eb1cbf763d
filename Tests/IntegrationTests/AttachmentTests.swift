import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Files on user messages, through the real daemon and raw socket clients: `blob.put` in
/// chunks, `message.send` naming what the connection stored, `attachment.get`, the limits, and
/// the blobs' lifetime across forks, deletes, disconnects and kill -9 (docs/protocol.md,
/// "Attachments").
final class AttachmentTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A "PNG" of `size` bytes: the signature, then bytes that are no UTF-8.
    static func image(size: Int, seed: Int = 0) -> [UInt8] {
        pngSignature + (0..<(size - pngSignature.count)).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ seed ^ ($0 >> 9)) }
    }

    /// `blob.put` of `bytes` in chunks of `chunk` bytes; the final answer's result.
    @discardableResult
    static func upload(_ client: RPCClient, _ bytes: [UInt8], chunk: Int = 1 << 20) throws -> JSON {
        var upload: String?
        var offset = 0
        repeat {
            let end = min(offset + chunk, bytes.count)
            var params: [String: JSON] = ["data": .string(Base64.encode(bytes[offset..<end]))]
            if let upload { params["upload"] = .string(upload) }
            if end == bytes.count { params["final"] = true }
            let result = try client.call(RPCMethod.blobPut.rawValue, .object(params))
            if end == bytes.count { return result }
            XCTAssertEqual(result["size"]?.int, end)
            upload = try XCTUnwrap(result["upload"]?.string)
            offset = end
        } while true
    }

    /// The whole attachment, read with `attachment.get` chunk by chunk.
    static func download(_ client: RPCClient, conversation: String, message: String, index: Int = 0) throws -> (bytes: [UInt8], chunks: Int) {
        var bytes: [UInt8] = []
        var chunks = 0
        while chunks < 100 {
            let result = try client.call(RPCMethod.attachmentGet.rawValue, ["conversation": .string(conversation), "message": .string(message),
                                                                             "index": .int(index), "offset": .int(bytes.count)])
            XCTAssertEqual(result["offset"]?.int, bytes.count)
            let data = try XCTUnwrap(result["data"]?.string.flatMap(Base64.decode))
            XCTAssertLessThanOrEqual(data.count, 1 << 20)
            bytes += data
            chunks += 1
            if result["more"] != .bool(true) { break }
        }
        return (bytes, chunks)
    }

    /// The blobs stored under a data directory's `blobs/xx/`, by digest.
    static func blobNames(_ directory: String) throws -> [String] {
        var names: [String] = []
        for sub in try FileManager.default.contentsOfDirectory(atPath: directory) {
            names += try FileManager.default.contentsOfDirectory(atPath: directory + "/" + sub)
        }
        return names
    }

    func blobPath(_ digest: String) -> String { harness.dataDirectory + "/blobs/" + digest.prefix(2) + "/" + digest }

    func blobExists(_ digest: String) -> Bool { access(blobPath(digest), F_OK) == 0 }

    func errorCode(_ body: () throws -> Void) -> Int? {
        do {
            try body()
            return nil
        } catch let error as RPCError {
            return error.code
        } catch {
            XCTFail("\(error)")
            return nil
        }
    }

    func send(_ client: RPCClient, _ conversation: String, _ content: String, _ attachments: [(name: String, sha256: String)]) throws -> JSON {
        try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(conversation), "content": .string(content),
                                                         "attachments": .array(attachments.map { ["name": .string($0.name), "sha256": .string($0.sha256)] })])
    }

    /// Waits for a condition the daemon brings about on its own time (a disconnect it has not
    /// handled yet); the bound only stops a broken daemon from hanging the test.
    func waitFor(_ what: String, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(20)
        while !condition() {
            if Date() > deadline { return XCTFail("never happened: \(what)") }
            usleep(10_000)
        }
    }

    // MARK: - Upload, send, read back

    func testFilesUploadedInChunksAreSentKeptAcrossARestartAndReadBackExactly() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        _ = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])

        let text = Array("line one\nlíne two ✓\n".utf8)
        let textAttachment = try Self.upload(client, text, chunk: 7)["attachment"]
        XCTAssertEqual(textAttachment?["type"]?.string, "text/plain")
        XCTAssertEqual(textAttachment?["size"]?.int, text.count)
        let textDigest = try XCTUnwrap(textAttachment?["sha256"]?.string)
        XCTAssertTrue(Attachment.isDigest(textDigest))
        let image = Self.image(size: (2 << 20) + 12345)
        let imageAttachment = try Self.upload(client, image)["attachment"]
        XCTAssertEqual(imageAttachment?["type"]?.string, "image/png")
        let imageDigest = try XCTUnwrap(imageAttachment?["sha256"]?.string)

        // Stored under its digest, with the logs' modes, before the answer.
        XCTAssertEqual(FileManager.default.contents(atPath: blobPath(textDigest)).map { [UInt8]($0) }, text)
        let attributes = try FileManager.default.attributesOfItem(atPath: blobPath(imageDigest))
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let directory = try FileManager.default.attributesOfItem(atPath: harness.dataDirectory + "/blobs/" + imageDigest.prefix(2))
        XCTAssertEqual((directory[.posixPermissions] as? NSNumber)?.intValue, 0o700)

        // Empty text is allowed with attachments; they keep the order given.
        let sent = try send(client, conversation, "", [("notes.txt", textDigest), ("photo of us.png", imageDigest)])
        let expected: JSON = .array([
            ["name": "notes.txt", "type": "text/plain", "size": .int(text.count), "sha256": .string(textDigest)],
            ["name": "photo of us.png", "type": "image/png", "size": .int(image.count), "sha256": .string(imageDigest)],
        ])
        XCTAssertEqual(sent["message"]?["attachments"], expected)
        let messageID = try XCTUnwrap(sent["message"]?["id"]?.string)
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let created = try client.collect { method, params in
            method == RPCNotification.messageCreated.rawValue && params["message"]?["id"]?.string == messageID
        }
        XCTAssertEqual(created.last?.params["message"]?["attachments"], expected)
        _ = try client.awaitReply(reply)

        // The record in the log.
        let log = try String(contentsOfFile: harness.dataDirectory + "/conversations/\(conversation).jsonl", encoding: .utf8)
        let record = try XCTUnwrap(log.split(separator: "\n").map { try JSON.parse(String($0)) }.first { $0["type"] == "message" })
        XCTAssertEqual(record["message"]?["attachments"], expected)

        let history = try client.call(RPCMethod.conversationHistory.rawValue, ["conversation": .string(conversation)])
        XCTAssertEqual(history["messages"]?.array?.first?["attachments"], expected)

        // Read back in chunks of at most 1 MiB.
        let got = try Self.download(client, conversation: conversation, message: messageID, index: 1)
        XCTAssertEqual(got.chunks, 3)
        XCTAssertTrue(got.bytes == image, "attachment.get returns the exact bytes")
        XCTAssertEqual(try Self.download(client, conversation: conversation, message: messageID, index: 0).bytes, text)
        XCTAssertEqual(errorCode { try client.call(RPCMethod.attachmentGet.rawValue, ["conversation": .string(conversation), "message": .string(messageID), "index": 2]) },
                       RPCError.notFound)
        XCTAssertEqual(errorCode { try client.call(RPCMethod.attachmentGet.rawValue, ["conversation": .string(conversation), "message": .string(messageID),
                                                                                    "index": 0, "offset": .int(text.count + 1)]) },
                       RPCError.invalidParams)

        // A restart reads them from the log (and from the index).
        client.close()
        try harness.restartDaemon()
        let again = try harness.client()
        let attached = try again.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        XCTAssertEqual(attached["messages"]?.array?.first?["attachments"], expected)
        XCTAssertTrue(blobExists(textDigest) && blobExists(imageDigest), "referenced blobs are not collected at start-up")
        XCTAssertTrue(try Self.download(again, conversation: conversation, message: messageID, index: 1).bytes == image)

        // An edit keeps the files; a search finds a file by its name.
        let edited = try again.call(RPCMethod.messageEdit.rawValue, ["conversation": .string(conversation), "message": .string(messageID),
                                                                     "content": "look at these"])
        XCTAssertEqual(edited["message"]?["attachments"], expected)
        _ = try again.awaitReply(try XCTUnwrap(edited["reply"]?.string))
        let hits = try again.call(RPCMethod.conversationSearch.rawValue, ["query": "photo of us"])["hits"]?.array ?? []
        XCTAssertEqual(Set(hits.compactMap { $0["message"]?.string }), [messageID, try XCTUnwrap(edited["message"]?["id"]?.string)])
        // Edited back to no text: the files are still the message.
        let emptied = try again.call(RPCMethod.messageEdit.rawValue, ["conversation": .string(conversation),
                                                                      "message": .string(try XCTUnwrap(edited["message"]?["id"]?.string)), "content": ""])
        XCTAssertEqual(emptied["message"]?["attachments"], expected)
        XCTAssertEqual(emptied["message"]?["content"], "")
    }

    // MARK: - Refusals and limits

    func testWhatIsNotTextOrAnImageIsRefused() throws {
        harness = try Harness()
        let client = try harness.client()
        // A binary file (an ELF header), and text holding a NUL.
        XCTAssertEqual(errorCode { try Self.upload(client, [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0, 0, 0, 0, 0]) }, RPCError.invalidParams)
        XCTAssertEqual(errorCode { try Self.upload(client, Array("almost text\u{0}".utf8)) }, RPCError.invalidParams)
        XCTAssertEqual(errorCode { try Self.upload(client, [0x61, 0xED, 0xA0, 0x80]) }, RPCError.invalidParams, "a surrogate is no UTF-8")
        // Base64 with a line break, a chunk over 1 MiB, an upload that does not exist.
        XCTAssertEqual(errorCode { try client.call(RPCMethod.blobPut.rawValue, ["data": "Zm9v\nYmFy", "final": true]) }, RPCError.invalidParams)
        XCTAssertEqual(errorCode { try client.call(RPCMethod.blobPut.rawValue, ["data": .string(Base64.encode([UInt8](repeating: 0x61, count: (1 << 20) + 1)))]) },
                       RPCError.invalidParams)
        XCTAssertEqual(errorCode { try client.call(RPCMethod.blobPut.rawValue, ["upload": "u99", "data": "", "final": true]) }, RPCError.invalidParams)
        XCTAssertEqual(try Self.blobNames(harness.dataDirectory + "/blobs"), [], "nothing refused was stored")
        // The connection goes on.
        XCTAssertEqual(try Self.upload(client, Array("fine".utf8))["attachment"]?["type"]?.string, "text/plain")
    }

    func testSizeAndCountLimits() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)

        // An image is refused with the chunk that passes 5 MiB, and the upload is dropped.
        let chunk = [UInt8](repeating: 0x41, count: 1 << 20)
        var upload = try XCTUnwrap(client.call(RPCMethod.blobPut.rawValue, ["data": .string(Base64.encode(Self.pngSignature + chunk.dropFirst(8)))])["upload"]?.string)
        for _ in 1..<5 { _ = try client.call(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": .string(Base64.encode(chunk))]) }
        let over = try client.request(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": "QQ=="])
        XCTAssertEqual(over["error"]?["code"]?.int, RPCError.limitReached)
        XCTAssertTrue(over["error"]?["message"]?.string?.contains("5242880") == true, over.text)
        XCTAssertEqual(errorCode { try client.call(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": "", "final": true]) }, RPCError.invalidParams,
                       "a refused upload is spent")

        // Text is refused past 1 MiB.
        upload = try XCTUnwrap(client.call(RPCMethod.blobPut.rawValue, ["data": .string(Base64.encode(chunk))])["upload"]?.string)
        let textOver = try client.request(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": "QQ=="])
        XCTAssertEqual(textOver["error"]?["code"]?.int, RPCError.limitReached)
        XCTAssertTrue(textOver["error"]?["message"]?.string?.contains("1048576") == true, textOver.text)

        // At most four uploads in progress on one connection.
        for _ in 0..<4 { _ = try client.call(RPCMethod.blobPut.rawValue, ["data": "QQ=="]) }
        XCTAssertEqual(errorCode { try client.call(RPCMethod.blobPut.rawValue, ["data": "QQ=="]) }, RPCError.limitReached)
        // Another connection has its own four.
        let other = try harness.client(name: "other")
        _ = try other.call(RPCMethod.blobPut.rawValue, ["data": "QQ=="])

        // A message: at most 20 MiB together (one 4.5 MiB image named five times), at most 16 files.
        let big = try XCTUnwrap(Self.upload(other, Self.image(size: 4_500_000))["attachment"]?["sha256"]?.string)
        XCTAssertEqual(errorCode { _ = try send(other, conversation, "five", Array(repeating: ("big.png", big), count: 5)) }, RPCError.limitReached)
        let small = try XCTUnwrap(Self.upload(other, Array("small".utf8))["attachment"]?["sha256"]?.string)
        XCTAssertEqual(errorCode { _ = try send(other, conversation, "many", Array(repeating: ("s.txt", small), count: 17)) }, RPCError.limitReached)
        // Names: one path component, no control or format characters.
        for name in ["", "dir/file.txt", "..", "bad\nname", "a\u{202E}txt.exe", String(repeating: "n", count: 256)] {
            XCTAssertEqual(errorCode { _ = try send(other, conversation, "named", [(name, small)]) }, RPCError.invalidParams, name.debugDescription)
        }
        // Text is still needed without files.
        XCTAssertEqual(errorCode { _ = try send(other, conversation, " ", []) }, RPCError.invalidParams)
        // Within every limit it goes: four of the big image and sixteen files in all.
        let sent = try send(other, conversation, "ok", Array(repeating: ("big.png", big), count: 4) + Array(repeating: ("s.txt", small), count: 12))
        XCTAssertEqual(sent["message"]?["attachments"]?.array?.count, 16)
        XCTAssertEqual(try XCTUnwrap(Self.blobNames(harness.dataDirectory + "/blobs")).sorted(), [big, small].sorted())
    }

    /// The room for files no message named yet, `limits.attachment_room_mib`, set to 1 MiB so
    /// that the tests below reach its bounds with small files (the defaults, 64 MiB and what it
    /// derives, are checked against the docs in `VisionSettingsTests`).
    static let smallRoom = "[limits]\nattachment_room_mib = 1\n"

    /// Files stored and never named stay on disk only while their connection lives: it may
    /// hold at most five eighths of the room (40 MiB by default, 640 KiB here) of them; naming
    /// them in a message gives the room back.
    func testAConnectionHoldsABoundedAmountOfFilesItHasNotSent() throws {
        harness = try Harness(config: Self.smallRoom)
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        var digests: [String] = []
        for seed in 0..<8 {
            digests.append(try XCTUnwrap(Self.upload(client, Self.image(size: 80 << 10, seed: seed), chunk: 32 << 10)["attachment"]?["sha256"]?.string))
        }
        let over = try client.request(RPCMethod.blobPut.rawValue, ["data": .string(Base64.encode(Self.image(size: 1024, seed: 99)))])
        XCTAssertEqual(over["error"]?["code"]?.int, RPCError.limitReached, over.text)
        XCTAssertTrue(over["error"]?["message"]?.string?.contains("no message has named yet, 640 KiB at most") == true, over.text)
        // Four of them sent: their 320 KiB are no longer this connection's alone.
        _ = try send(client, conversation, "four", digests.prefix(4).map { ("shot.png", $0) })
        XCTAssertNotNil(try Self.upload(client, Self.image(size: 1024, seed: 99))["attachment"]?["sha256"]?.string)
    }

    /// Uploads in progress are held in memory: every connection together holds at most the
    /// room (64 MiB by default, 1 MiB here).
    func testUploadsInProgressAreBoundedAcrossConnections() throws {
        harness = try Harness(config: Self.smallRoom)
        let chunk = Base64.encode(Self.image(size: 16 << 10))
        let more = Base64.encode([UInt8](repeating: 0x41, count: 16 << 10))
        var clients: [RPCClient] = []
        var refused: JSON?
        // Four connections of four uploads of 80 KiB each (each connection within its own
        // 640 KiB) would hold 1.25 MiB.
        outer: for index in 0..<4 {
            let client = try harness.client(name: "uploader\(index)")
            clients.append(client)
            for _ in 0..<4 {
                let started = try client.request(RPCMethod.blobPut.rawValue, ["data": .string(chunk)])
                guard let upload = started["result"]?["upload"]?.string else { refused = started; break outer }
                for _ in 1..<5 {
                    let answer = try client.request(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": .string(more)])
                    if answer["error"] != nil { refused = answer; break outer }
                }
            }
        }
        let error = try XCTUnwrap(refused?["error"], "1.25 MiB of uploads in progress were taken")
        XCTAssertEqual(error["code"]?.int, RPCError.limitReached)
        XCTAssertTrue(error["message"]?.string?.contains("the daemon holds 1 MiB of uploads in progress") == true, error.text)
        // One leaving gives its room back.
        clients[0].close()
        waitFor("the first uploader's room given back") {
            (try? clients[3].request(RPCMethod.blobPut.rawValue, ["data": .string(chunk)])["result"]?["upload"]) != nil
        }
    }

    /// Other users' uploads in progress together hold at most half the room (32 MiB by
    /// default, 512 KiB here): the rest is the owner's.
    func testOtherUsersUploadsLeaveTheOwnerRoom() throws {
        try OtherUser.requireRoot()
        let otherUID = AccessTests.otherUID
        harness = try Harness(config: "[access]\nallow_uids = [\(otherUID)]\n" + Self.smallRoom)
        OtherUser.openSocket(harness)
        let chunk = Base64.encode(Self.image(size: 16 << 10))
        let more = Base64.encode([UInt8](repeating: 0x41, count: 16 << 10))
        var connections: [OtherUser.Connection] = []
        defer { for connection in connections { connection.stop() } }
        var refused: JSON?
        // Two of the other user's connections, four uploads of 80 KiB each, would hold 640 KiB
        // (within that user's own 1 MiB, and each connection within its 640 KiB).
        outer: for _ in 0..<2 {
            let connection = try OtherUser.Connection(uid: otherUID, socketPath: harness.socketPath)
            connections.append(connection)
            let visitor = connection.client
            _ = try visitor.call(RPCMethod.hello.rawValue, ["client": "integration-test", "name": "visitor"])
            for _ in 0..<4 {
                let started = try visitor.request(RPCMethod.blobPut.rawValue, ["data": .string(chunk)])
                guard let upload = started["result"]?["upload"]?.string else { refused = started; break outer }
                for _ in 1..<5 {
                    let answer = try visitor.request(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": .string(more)])
                    if answer["error"] != nil { refused = answer; break outer }
                }
            }
        }
        let error = try XCTUnwrap(refused?["error"], "other users held 640 KiB of uploads in progress")
        XCTAssertEqual(error["code"]?.int, RPCError.limitReached)
        XCTAssertTrue(error["message"]?.string?.contains("other users' uploads in progress hold 512 KiB") == true, error.text)
        // The owner still uploads, in chunks, a file of most of the half left to it.
        let owner = try harness.client()
        XCTAssertNotNil(try Self.upload(owner, Self.image(size: 400 << 10, seed: 7), chunk: 100 << 10)["attachment"]?["sha256"]?.string)
    }

    /// However many connections another user opens, its files no message named and its uploads
    /// in progress together stay within the room (64 MiB by default, 1 MiB here).
    func testAnotherUsersUnsentFilesAreBoundedAcrossItsConnections() throws {
        try OtherUser.requireRoot()
        let otherUID = AccessTests.otherUID
        harness = try Harness(config: "[access]\nallow_uids = [\(otherUID)]\n" + Self.smallRoom)
        OtherUser.openSocket(harness)
        var connections: [OtherUser.Connection] = []
        defer { for connection in connections { connection.stop() } }
        var stored = 0
        var refused: JSON?
        // Connections of 640 KiB each (ten files of 64 KiB): the second is stopped at 1 MiB in all.
        outer: for _ in 0..<3 {
            let connection = try OtherUser.Connection(uid: otherUID, socketPath: harness.socketPath)
            connections.append(connection)
            let visitor = connection.client
            _ = try visitor.call(RPCMethod.hello.rawValue, ["client": "integration-test", "name": "visitor"])
            for _ in 0..<10 {
                let answer = try visitor.request(RPCMethod.blobPut.rawValue,
                                                 ["data": .string(Base64.encode(Self.image(size: 64 << 10, seed: stored))), "final": true])
                guard answer["error"] == nil else { refused = answer; break outer }
                stored += 1
            }
        }
        let error = try XCTUnwrap(refused?["error"], "another user stored \(stored) files of 64 KiB not sent")
        XCTAssertEqual(error["code"]?.int, RPCError.limitReached)
        XCTAssertTrue(error["message"]?.string?.contains("1 MiB at most for a user other than the daemon's own") == true, error.text)
        XCTAssertEqual(stored, 16)
        // The owner still stores files.
        let owner = try harness.client()
        XCTAssertNotNil(try Self.upload(owner, Self.image(size: 64 << 10, seed: 999))["attachment"]?["sha256"]?.string)
    }

    func testAnUploadWithoutAChunkForTheIdleLimitIsDropped() throws {
        harness = try Harness(config: "[limits]\nupload_idle_seconds = 1\n")
        let client = try harness.client()
        let started = try client.call(RPCMethod.blobPut.rawValue, ["data": .string(Base64.encode(Self.image(size: 1000)))])
        let upload = try XCTUnwrap(started["upload"]?.string)
        waitFor("the idle upload dropped") { harness.log().contains("upload=\(upload) dropped: no chunk") }
        XCTAssertEqual(errorCode { _ = try client.call(RPCMethod.blobPut.rawValue, ["upload": .string(upload), "data": "QQ==", "final": true]) },
                       RPCError.invalidParams)
        // A new upload goes on as before.
        XCTAssertNotNil(try Self.upload(client, Self.image(size: 2000, seed: 5))["attachment"]?["sha256"]?.string)
    }

    func testAMessageNamesOnlyFilesItsOwnConnectionStored() throws {
        harness = try Harness()
        let owner = try harness.client(name: "one")
        let conversation = try harness.createConversation(owner)
        let digest = try XCTUnwrap(Self.upload(owner, Array("mine".utf8))["attachment"]?["sha256"]?.string)
        let second = try harness.client(name: "two")
        // The same user's other connection, a digest never stored, and one that is no digest.
        XCTAssertEqual(errorCode { _ = try send(second, conversation, "x", [("f.txt", digest)]) }, RPCError.invalidParams)
        XCTAssertEqual(errorCode { _ = try send(owner, conversation, "x", [("f.txt", String(repeating: "0", count: 64))]) }, RPCError.invalidParams)
        XCTAssertEqual(errorCode { _ = try send(owner, conversation, "x", [("f.txt", "../../etc/passwd")]) }, RPCError.invalidParams)
        // Storing the same bytes makes them its own too.
        XCTAssertEqual(try Self.upload(second, Array("mine".utf8))["attachment"]?["sha256"]?.string, digest)
        XCTAssertNotNil(try send(second, conversation, "x", [("f.txt", digest)])["message"])
    }

    // MARK: - Lifetime

    func testForkSharesTheBlobsAndDeleteCollectsOnlyWhatNothingNames() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        let bytes = Array("shared between forks\n".utf8)
        let digest = try XCTUnwrap(Self.upload(client, bytes)["attachment"]?["sha256"]?.string)
        let sent = try send(client, conversation, "see", [("shared.txt", digest)])
        _ = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        let fork = try XCTUnwrap(client.call(RPCMethod.conversationFork.rawValue, ["conversation": .string(conversation)])["conversation"]?["id"]?.string)
        let forked = try client.call(RPCMethod.conversationHistory.rawValue, ["conversation": .string(fork)])
        XCTAssertEqual(forked["messages"]?.array?.first?["attachments"]?.array?.first?["sha256"]?.string, digest)
        XCTAssertEqual(try Self.download(client, conversation: fork, message: "m1").bytes, bytes)

        // The client that stored it goes: the messages still name it.
        client.close()
        let next = try harness.client()
        _ = try next.call(RPCMethod.conversationDelete.rawValue, ["conversation": .string(conversation)])
        XCTAssertTrue(blobExists(digest), "the fork still names it")
        XCTAssertEqual(try Self.download(next, conversation: fork, message: "m1").bytes, bytes)
        _ = try next.call(RPCMethod.conversationDelete.rawValue, ["conversation": .string(fork)])
        XCTAssertFalse(blobExists(digest), "nothing names it any more")
    }

    func testAForkBeingCreatedKeepsItsFilesFromADeleteOfTheOriginal() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        let bytes = Array("copied by a fork\n".utf8)
        let digest = try XCTUnwrap(Self.upload(client, bytes)["attachment"]?["sha256"]?.string)
        let sent = try send(client, conversation, "see", [("copied.txt", digest)])
        _ = try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        _ = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string))
        client.close()
        // Another connection (it stored nothing): the fork and the delete in one write, so the
        // delete is made while the fork's log is still being created.
        let other = try harness.client(name: "other")
        try other.sendRaw(RPC.request(id: 101, method: RPCMethod.conversationFork.rawValue, params: ["conversation": .string(conversation)])
                          + RPC.request(id: 102, method: RPCMethod.conversationDelete.rawValue, params: ["conversation": .string(conversation)]))
        let forked = try other.response(to: 101)
        XCTAssertNotNil(try other.response(to: 102)["result"])
        let fork = try XCTUnwrap(forked["result"]?["conversation"]?["id"]?.string, forked.text)
        XCTAssertTrue(blobExists(digest), "the fork names it")
        XCTAssertEqual(try Self.download(other, conversation: fork, message: "m1").bytes, bytes)
    }

    func testAFileStoredAndNeverSentGoesWithItsConnection() throws {
        harness = try Harness()
        let client = try harness.client()
        let kept = try harness.client(name: "keeper")
        let digest = try XCTUnwrap(Self.upload(client, Array("never sent".utf8))["attachment"]?["sha256"]?.string)
        let held = try XCTUnwrap(Self.upload(kept, Array("held by an open connection".utf8))["attachment"]?["sha256"]?.string)
        // Also stored by the connection that stays: kept while it may still send it.
        let both = try XCTUnwrap(Self.upload(client, Array("stored twice".utf8))["attachment"]?["sha256"]?.string)
        XCTAssertEqual(try Self.upload(kept, Array("stored twice".utf8))["attachment"]?["sha256"]?.string, both)
        // An upload left unfinished goes too (it was never a blob).
        _ = try client.call(RPCMethod.blobPut.rawValue, ["data": "QQ=="])
        XCTAssertTrue(blobExists(digest))
        client.close()
        waitFor("the closed connection's blob removed") { !blobExists(digest) }
        XCTAssertTrue(blobExists(held))
        XCTAssertTrue(blobExists(both))
    }

    func testAKillBetweenBlobAndMessageLeavesNoDanglingReferenceAndTheOrphanIsCollected() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        // One file sent and answered, one stored and never named.
        let sentBytes = Self.image(size: 300_000, seed: 7)
        let sentDigest = try XCTUnwrap(Self.upload(client, sentBytes)["attachment"]?["sha256"]?.string)
        let sent = try send(client, conversation, "keep this", [("kept.png", sentDigest)])
        let messageID = try XCTUnwrap(sent["message"]?["id"]?.string)
        let orphan = try XCTUnwrap(Self.upload(client, Array("stored, then the daemon died".utf8))["attachment"]?["sha256"]?.string)
        XCTAssertTrue(blobExists(orphan))

        harness.killDaemon()
        client.close()
        try harness.startDaemon()
        XCTAssertFalse(blobExists(orphan), "start-up collects what no message names")
        XCTAssertTrue(harness.log().contains("unreferenced blob"), harness.log())
        let again = try harness.client()
        let history = try again.call(RPCMethod.conversationHistory.rawValue, ["conversation": .string(conversation)])
        let messages = history["messages"]?.array ?? []
        // Every file any message names is there.
        for message in messages {
            for attachment in message["attachments"]?.array ?? [] {
                XCTAssertTrue(blobExists(try XCTUnwrap(attachment["sha256"]?.string)), "dangling: \(attachment.text)")
            }
        }
        XCTAssertEqual(messages.first { $0["id"]?.string == messageID }?["attachments"]?.array?.first?["name"]?.string, "kept.png")
        XCTAssertTrue(try Self.download(again, conversation: conversation, message: messageID).bytes == sentBytes)
    }

    func testStartUpCollectsNothingWhenALogOnDiskDidNotLoad() throws {
        harness = try Harness()
        let client = try harness.client()
        let conversation = try harness.createConversation(client)
        let bytes = Self.image(size: 20_000, seed: 3)
        let digest = try XCTUnwrap(Self.upload(client, bytes)["attachment"]?["sha256"]?.string)
        _ = try send(client, conversation, "keep this", [("kept.png", digest)])
        client.close()
        XCTAssertNotNil(harness.stopDaemon())
        // The log under another id's name: its header names another conversation, so it is
        // refused and left in place, and it is the only record naming the blob.
        let directory = harness.dataDirectory + "/conversations/"
        let otherID = String(conversation.dropLast()) + (conversation.hasSuffix("0") ? "1" : "0")
        XCTAssertEqual(rename(directory + conversation + ".jsonl", directory + otherID + ".jsonl"), 0)
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("unreferenced blobs not collected (start-up): a log on disk did not load"), harness.log())
        XCTAssertTrue(blobExists(digest), "a blob a log that did not load may name is kept")
        // Nor later: a connection storing the same file and leaving does not take it.
        let visitor = try harness.client()
        XCTAssertEqual(try Self.upload(visitor, bytes)["attachment"]?["sha256"]?.string, digest)
        visitor.close()
        waitFor("the disconnect handled") { harness.log().contains("unreferenced blobs not collected (client=") }
        XCTAssertTrue(blobExists(digest), "held until a start that loads every log")
        // Put back, the log loads and its file reads back whole.
        XCTAssertNotNil(harness.stopDaemon())
        XCTAssertEqual(rename(directory + otherID + ".jsonl", directory + conversation + ".jsonl"), 0)
        try harness.startDaemon()
        let again = try harness.client()
        let history = try again.call(RPCMethod.conversationHistory.rawValue, ["conversation": .string(conversation)])
        let message = try XCTUnwrap(history["messages"]?.array?.first { $0["attachments"] != nil }?["id"]?.string)
        XCTAssertTrue(try Self.download(again, conversation: conversation, message: message).bytes == bytes)
    }

    // MARK: - Another user

    func testAnotherUserReadsAttachmentsOnlyWithAShareAndNamesOnlyItsOwnFiles() throws {
        try OtherUser.requireRoot()
        let otherUID = AccessTests.otherUID
        harness = try Harness(config: "[access]\nallow_uids = [\(otherUID)]\n")
        OtherUser.openSocket(harness)
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner)
        let bytes = Array("the owner's file".utf8)
        let digest = try XCTUnwrap(Self.upload(owner, bytes)["attachment"]?["sha256"]?.string)
        let messageID = try XCTUnwrap(send(owner, conversation, "mine", [("owner.txt", digest)])["message"]?["id"]?.string)

        let connection = try OtherUser.Connection(uid: otherUID, socketPath: harness.socketPath)
        defer { connection.stop() }
        let visitor = connection.client
        _ = try visitor.call(RPCMethod.hello.rawValue, ["client": "integration-test", "name": "visitor"])
        let get: JSON = ["conversation": .string(conversation), "message": .string(messageID), "index": 0]
        XCTAssertEqual(errorCode { try visitor.call(RPCMethod.attachmentGet.rawValue, get) }, RPCError.notFound, "not shared: as if it did not exist")

        // Reading takes the read role; sending files, like any send, the write role.
        _ = try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(otherUID)), "role": "read"])
        XCTAssertEqual(try Self.download(visitor, conversation: conversation, message: messageID).bytes, bytes)
        let readerDigest = try XCTUnwrap(Self.upload(visitor, Array("a reader's file".utf8))["attachment"]?["sha256"]?.string)
        XCTAssertEqual(errorCode { _ = try send(visitor, conversation, "read only", [("r.txt", readerDigest)]) }, RPCError.notPermitted)
        _ = try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(otherUID)), "role": "write"])
        // The visitor cannot name the owner's blob, nor the owner the visitor's.
        XCTAssertEqual(errorCode { _ = try send(visitor, conversation, "steal", [("owner.txt", digest)]) }, RPCError.invalidParams)
        let visitorDigest = try XCTUnwrap(Self.upload(visitor, Array("the visitor's file".utf8))["attachment"]?["sha256"]?.string)
        XCTAssertEqual(errorCode { _ = try send(owner, conversation, "borrow", [("v.txt", visitorDigest)]) }, RPCError.invalidParams)
        XCTAssertNotNil(try send(visitor, conversation, "mine", [("v.txt", visitorDigest)])["message"])
    }
}
