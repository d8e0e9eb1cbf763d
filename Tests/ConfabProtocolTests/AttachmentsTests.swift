import XCTest

@testable import ConfabProtocol

/// The attachment vocabulary both ends share: base64 as `blob.put` and `attachment.get` carry
/// it, the type found from bytes, and the UTF-8 check that decides what is text.
final class AttachmentsTests: XCTestCase {

    // MARK: - Base64

    func testBase64RoundTripsEveryLengthAndByte() {
        for length in 0...70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
            let text = Base64.encode(bytes)
            XCTAssertEqual(text.utf8.count % 4, 0, "length \(length)")
            XCTAssertEqual(Base64.decode(text), bytes, "length \(length)")
        }
        let all = (0...255).map(UInt8.init)
        XCTAssertEqual(Base64.decode(Base64.encode(all)), all)
    }

    func testBase64MatchesRFC4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            XCTAssertEqual(Base64.encode(Array(plain.utf8)), encoded)
            XCTAssertEqual(Base64.decode(encoded), Array(plain.utf8))
        }
        XCTAssertEqual(Base64.encode([0xFB, 0xFF, 0xBF]), "+/+/")
        XCTAssertEqual(Base64.decode("+/+/"), [0xFB, 0xFF, 0xBF])
    }

    func testBase64RefusesAnythingButExactPaddedText() {
        let refused = [
            "Zg", "Zg=", "Zm8", "Zm9vY",            // padding missing, or length not a multiple of 4
            "Zg==Zg==", "Zm8=Zm9v",                 // padding before the end
            "Z===", "====", "Zm=v",                 // padding in the wrong places
            "Zh==", "Zm9=",                         // bits set past the end
            "Zm9v\n", " Zm9v", "Zm 9v", "Zm9v\r\n", "Zm\t9v", // white space anywhere
            "Zm9-", "Zm9_", "Zm9*", "Zm9vé===",     // other alphabets and characters
        ]
        for text in refused { XCTAssertNil(Base64.decode(text), "\(text.debugDescription) was taken") }
    }

    // MARK: - Types from bytes

    func testEveryImageSignatureIsFound() {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]
        let gif87 = Array("GIF87a".utf8) + [1, 0, 1, 0, 0, 0]
        let gif89 = Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0]
        let webp = Array("RIFF".utf8) + [0x24, 0, 0, 0] + Array("WEBP".utf8) + Array("VP8 ".utf8)
        XCTAssertEqual(AttachmentType.detect(png), .png)
        XCTAssertEqual(AttachmentType.detect(jpeg), .jpeg)
        XCTAssertEqual(AttachmentType.detect(gif87), .gif)
        XCTAssertEqual(AttachmentType.detect(gif89), .gif)
        XCTAssertEqual(AttachmentType.detect(webp), .webp)
        for type in [AttachmentType.png, .jpeg, .gif, .webp] { XCTAssertTrue(type.isImage) }
        XCTAssertFalse(AttachmentType.text.isImage)
        XCTAssertEqual(AttachmentType.png.rawValue, "image/png")
        XCTAssertEqual(AttachmentType.webp.rawValue, "image/webp")
        // Near misses: a RIFF that is no WebP, a cut PNG signature, a GIF of another version.
        XCTAssertNil(AttachmentType.detect(Array("RIFF".utf8) + [0x24, 0, 0, 0] + Array("WAVE".utf8)), "a WAV file holds NUL bytes")
        XCTAssertEqual(AttachmentType.detect(Array("RIFF1234WEBX".utf8)), .text)
        XCTAssertNil(AttachmentType.detect([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A]))
        XCTAssertEqual(AttachmentType.detect(Array("GIF90a".utf8)), .text)
        XCTAssertNil(AttachmentType.detect([0xFF, 0xD8]))
    }

    func testTextIsValidUTF8WithoutNUL() {
        XCTAssertEqual(AttachmentType.detect(Array("hello\nwörld 🌍\r\n\t".utf8)), .text)
        XCTAssertEqual(AttachmentType.detect([UInt8]()), .text, "an empty file is text")
        XCTAssertNil(AttachmentType.detect(Array("a\u{0}b".utf8)))
        XCTAssertNotNil(AttachmentType.refusal(of: Array("a\u{0}b".utf8))?.range(of: "NUL"))
        XCTAssertNil(AttachmentType.detect([0x41, 0xC3]), "a character cut at the end")
        XCTAssertNotNil(AttachmentType.refusal(of: [0x41, 0xC3])?.range(of: "UTF-8"))
        XCTAssertNil(AttachmentType.refusal(of: Array("fine".utf8)))
        // A binary file: an ELF header.
        XCTAssertNil(AttachmentType.detect([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0, 0, 0]))
    }

    // MARK: - The UTF-8 check

    private func isValid(_ bytes: [UInt8]) -> Bool {
        var validator = UTF8Validator()
        for byte in bytes where !validator.feed(byte) { return false }
        return validator.isComplete
    }

    func testUTF8ValidatorTakesEveryWellFormedLength() {
        XCTAssertTrue(isValid([0x7F]))
        XCTAssertTrue(isValid([0xC2, 0x80]))                 // U+0080, the lowest two-byte form
        XCTAssertTrue(isValid([0xDF, 0xBF]))                 // U+07FF
        XCTAssertTrue(isValid([0xE0, 0xA0, 0x80]))           // U+0800
        XCTAssertTrue(isValid([0xED, 0x9F, 0xBF]))           // U+D7FF, just below the surrogates
        XCTAssertTrue(isValid([0xEE, 0x80, 0x80]))           // U+E000, just above them
        XCTAssertTrue(isValid([0xEF, 0xBF, 0xBF]))           // U+FFFF
        XCTAssertTrue(isValid([0xF0, 0x90, 0x80, 0x80]))     // U+10000
        XCTAssertTrue(isValid([0xF4, 0x8F, 0xBF, 0xBF]))     // U+10FFFF, the last code point
        // Agrees with the standard library over every scalar's encoding at the edges.
        for value in [0x00, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF] {
            let scalar = Unicode.Scalar(value)!
            XCTAssertTrue(isValid(Array(String(Character(scalar)).utf8)), "U+\(String(value, radix: 16))")
        }
    }

    func testUTF8ValidatorRefusesOverlongForms() {
        XCTAssertFalse(isValid([0xC0, 0x80]), "NUL in two bytes")
        XCTAssertFalse(isValid([0xC1, 0xBF]), "U+007F in two bytes")
        XCTAssertFalse(isValid([0xE0, 0x80, 0x80]), "U+0000 in three bytes")
        XCTAssertFalse(isValid([0xE0, 0x9F, 0xBF]), "U+07FF in three bytes")
        XCTAssertFalse(isValid([0xF0, 0x80, 0x80, 0x80]), "U+0000 in four bytes")
        XCTAssertFalse(isValid([0xF0, 0x8F, 0xBF, 0xBF]), "U+FFFF in four bytes")
        XCTAssertFalse(isValid(Array("/".utf8) + [0xC0, 0xAF]), "an overlong slash")
    }

    func testUTF8ValidatorRefusesSurrogatesAndBeyondUnicode() {
        XCTAssertFalse(isValid([0xED, 0xA0, 0x80]), "U+D800")
        XCTAssertFalse(isValid([0xED, 0xBF, 0xBF]), "U+DFFF")
        XCTAssertFalse(isValid([0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]), "a CESU-8 surrogate pair")
        XCTAssertFalse(isValid([0xF4, 0x90, 0x80, 0x80]), "U+110000")
        XCTAssertFalse(isValid([0xF5, 0x80, 0x80, 0x80]))
        XCTAssertFalse(isValid([0xF8, 0x88, 0x80, 0x80, 0x80]), "a five-byte form")
        XCTAssertFalse(isValid([0xFE]))
        XCTAssertFalse(isValid([0xFF]))
    }

    func testUTF8ValidatorRefusesTruncatedAndStraySequences() {
        XCTAssertFalse(isValid([0xC3]), "a lead byte at the end")
        XCTAssertFalse(isValid([0xE2, 0x82]), "two of three bytes")
        XCTAssertFalse(isValid([0xF0, 0x9F, 0x8C]), "three of four bytes")
        XCTAssertFalse(isValid([0xE2, 0x82, 0x41]), "cut short by an ASCII byte")
        XCTAssertFalse(isValid([0x80]), "a continuation byte alone")
        XCTAssertFalse(isValid([0x41, 0xBF, 0x42]))
        XCTAssertFalse(isValid([0xC3, 0xA9, 0xA9]), "one continuation too many")
    }

    func testNULIsValidUTF8ButNotText() {
        XCTAssertTrue(isValid([0x00]), "the validator is UTF-8's; NUL is the type's refusal")
        XCTAssertNil(AttachmentType.detect([0x00]))
        XCTAssertNil(AttachmentType.detect(Array("text".utf8) + [0x00]))
    }

    // MARK: - The record's fields

    func testAttachmentJSONRoundTripsAndRefusesBadDigests() {
        let digest = String(repeating: "ab", count: 32)
        let attachment = Attachment(name: "notes.txt", type: .text, size: 12, sha256: digest)
        XCTAssertEqual(Attachment(json: attachment.json), attachment)
        XCTAssertTrue(Attachment.isDigest(digest))
        XCTAssertFalse(Attachment.isDigest(digest.uppercased()))
        XCTAssertFalse(Attachment.isDigest(String(digest.dropLast())))
        XCTAssertFalse(Attachment.isDigest("../" + String(digest.dropFirst(3))))
        var json = attachment.json
        json = ["name": "a", "type": "application/zip", "size": 1, "sha256": .string(digest)]
        XCTAssertNil(Attachment(json: json), "a type the protocol does not have")
        json = ["name": "a", "type": "text/plain", "size": -1, "sha256": .string(digest)]
        XCTAssertNil(Attachment(json: json))
    }
}
