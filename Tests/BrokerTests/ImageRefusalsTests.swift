import ConfabProtocol
import Upstream
import XCTest

@testable import Broker

/// Which refusals a request with images is sent again for, without them; which images are
/// blamed and remembered per provider and model; and how they are named in the request.
final class ImageRefusalsTests: XCTestCase {
    func testOnlyARefusalOfTheRequestAsSentIsOne() {
        for status in [400, 415, 422] {
            XCTAssertTrue(ImageRefusals.isImageRefusal(MessageError(code: .upstreamHTTP, message: "x", status: status)), "\(status)")
        }
        for status in [401, 403, 404, 408, 413, 429, 500, 503] {
            XCTAssertFalse(ImageRefusals.isImageRefusal(MessageError(code: .upstreamHTTP, message: "x", status: status)), "\(status)")
        }
        XCTAssertFalse(ImageRefusals.isImageRefusal(MessageError(code: .upstreamAuth, message: "x", status: 400)))
        XCTAssertFalse(ImageRefusals.isImageRefusal(MessageError(code: .rateLimited, message: "x", status: 429)))
        XCTAssertFalse(ImageRefusals.isImageRefusal(MessageError(code: .upstreamHTTP, message: "x")), "no status")
    }

    func testTheImagesNeverSeenTakenAreBlamedElseAll() {
        var refusals = ImageRefusals()
        refusals.took(["good"], in: "k1", provider: "p", model: "m")
        XCTAssertEqual(refusals.refusedImages(["good", "junk"], in: "k1", provider: "p", model: "m"), ["junk"])
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m"), ["junk"])
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "other"), [], "another model of the provider may take it")
        XCTAssertEqual(refusals.refused(in: "k1", provider: "q", model: "m"), [])
        // Every image was taken before: the server takes none now, all of them are blamed.
        XCTAssertEqual(refusals.refusedImages(["good"], in: "k1", provider: "p", model: "m"), ["good"])
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m"), ["good", "junk"])
        refusals.forgetAll()
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m"), [])
    }

    func testAModelThatRefusedTwiceAndNeverTookAnImageTakesNone() {
        var refusals = ImageRefusals()
        refusals.refusedImages(["a"], in: "k1", provider: "p", model: "m")
        XCTAssertFalse(refusals.takesNoImages(in: "k1", provider: "p", model: "m"), "one junk image says nothing of the others")
        refusals.refusedImages(["b"], in: "k1", provider: "p", model: "m")
        XCTAssertTrue(refusals.takesNoImages(in: "k1", provider: "p", model: "m"))
        XCTAssertFalse(refusals.takesNoImages(in: "k1", provider: "p", model: "other"))

        var tookOne = ImageRefusals()
        tookOne.took(["good"], in: "k1", provider: "p", model: "m")
        tookOne.refusedImages(["a"], in: "k1", provider: "p", model: "m")
        tookOne.refusedImages(["b"], in: "k1", provider: "p", model: "m")
        XCTAssertFalse(tookOne.takesNoImages(in: "k1", provider: "p", model: "m"), "it took an image: these two were junk")
    }

    func testWhatOneConversationTeachesStaysInIt() {
        // Two junk images sent in one conversation (by one writer of a shared one) turn images
        // off there, and nowhere else: other conversations of the model still send theirs.
        var refusals = ImageRefusals()
        refusals.refusedImages(["junk1"], in: "k1", provider: "p", model: "m")
        refusals.refusedImages(["junk2"], in: "k1", provider: "p", model: "m")
        XCTAssertTrue(refusals.takesNoImages(in: "k1", provider: "p", model: "m"))
        XCTAssertFalse(refusals.takesNoImages(in: "k2", provider: "p", model: "m"))
        XCTAssertEqual(refusals.refused(in: "k2", provider: "p", model: "m"), [])
        refusals.refusedImages(["junk3"], in: "k2", provider: "p", model: "m")
        refusals.forget(conversation: "k1")
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m"), [], "a deleted conversation's lessons go with it")
        XCTAssertEqual(refusals.refused(in: "k2", provider: "p", model: "m"), ["junk3"])
    }

    func testWhatIsRememberedIsBounded() {
        var refusals = ImageRefusals()
        refusals.refusedImages((0..<ImageRefusals.maxRemembered).map { "d\($0)" }, in: "k1", provider: "p", model: "m")
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m").count, ImageRefusals.maxRemembered)
        refusals.refusedImages(["one more"], in: "k1", provider: "p", model: "m")
        XCTAssertEqual(refusals.refused(in: "k1", provider: "p", model: "m"), ["one more"])
    }

    func testImagesGoAsTheLineNamingThemAndOtherFilesStay() {
        let image = ChatAttachment(name: "a.png", type: .png, size: 2048, sha256: "a", content: .image(base64: Array("QUJD".utf8)))
        let unread = ChatAttachment(name: "b.png", type: .png, size: 100, sha256: "b")
        let text = ChatAttachment(name: "n.txt", type: .text, size: 2, sha256: "t", content: .text("hi"))
        var messages = [ChatMessage(role: .user, content: "look", attachments: [image, text, unread])]
        XCTAssertEqual(ImageRefusals.imageDigests(in: messages), ["a"], "only images sent as images")
        var onlyB = messages
        XCTAssertEqual(ImageRefusals.replacingImages(in: &onlyB, reason: "why", only: ["b"]), 1)
        XCTAssertEqual(onlyB[0].attachments[0], image)
        XCTAssertEqual(onlyB[0].attachments[2].content, .line("[image b.png (image/png, 100 B) not sent: why]"))

        XCTAssertEqual(ImageRefusals.replacingImages(in: &messages, reason: ImageRefusals.refusedReason), 2)
        XCTAssertEqual(messages[0].attachments[0].content,
                       .line("[image a.png (image/png, 2 KiB) not sent: the model server refused the request with images]"))
        XCTAssertEqual(messages[0].attachments[1], text)
        XCTAssertTrue(messages[0].images.isEmpty)
        XCTAssertEqual(ImageRefusals.replacingImages(in: &messages, reason: "again"), 0, "a line stays the line it is")
    }
}
