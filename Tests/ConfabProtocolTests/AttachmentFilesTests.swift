import XCTest
@testable import ConfabProtocol

final class AttachmentFilesTests: XCTestCase {
    func testChunksCoverTheBytesInPiecesOfAtMostTheLimit() {
        XCTAssertEqual(AttachmentChunks.ranges(count: 0), [0..<0], "an empty file is one empty final chunk")
        XCTAssertEqual(AttachmentChunks.ranges(count: 5, chunk: 2), [0..<2, 2..<4, 4..<5])
        XCTAssertEqual(AttachmentChunks.ranges(count: 4, chunk: 2), [0..<2, 2..<4])
        let mib = AttachmentLimits.maxChunkBytes
        XCTAssertEqual(AttachmentChunks.ranges(count: mib), [0..<mib])
        XCTAssertEqual(AttachmentChunks.ranges(count: 5 * mib + 1), [0..<mib, mib..<2 * mib, 2 * mib..<3 * mib, 3 * mib..<4 * mib,
                                                                     4 * mib..<5 * mib, 5 * mib..<5 * mib + 1])
        // The base64 of the largest chunk stays far inside the daemon's line limit.
        XCTAssertLessThan(Base64.encode([UInt8](repeating: 7, count: mib)).utf8.count, 2 * mib)
    }

    func testTheNameIsTheLastPathComponent() {
        XCTAssertEqual(AttachmentName.reduced(fromPath: "/home/ana/shots/diagram.png"), "diagram.png")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "notes.txt"), "notes.txt")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "../a b/my notes.md"), "my notes.md")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "./dir//file.c"), "file.c")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "/dev/fd/63"), "63")
    }

    func testCharactersTheDaemonRefusesInANameAreSentAsVisibleStandIns() {
        XCTAssertEqual(AttachmentName.reduced(fromPath: "/tmp/\u{1B}[31mred.txt"), "^[[31mred.txt")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "evil\u{202E}gnp.exe"), "evil<U+202E>gnp.exe")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "a\rb\u{7F}c\u{9B}d\u{2028}e\u{200B}"), "a^Mb^?cM-^[d<U+2028>e<U+200B>")
        XCTAssertEqual(AttachmentName.reduced(fromPath: "blank\u{3164}\u{2800}.txt"), "blank<U+3164><U+2800>.txt")
        for name in ["^[[31mred.txt", "evil<U+202E>gnp.exe", "a^Mb^?cM-^[d<U+2028>e<U+200B>"] {
            XCTAssertFalse(name.unicodeScalars.contains(where: AttachmentName.isRefused), name)
        }
        // Spaces, accents, CJK and emoji are a name's own.
        XCTAssertEqual(AttachmentName.reduced(fromPath: "Ünïcode 図 🙂.txt"), "Ünïcode 図 🙂.txt")
    }

    func testALongNameIsShortenedBeforeItsExtensionOnACharacterBoundary() {
        let long = String(repeating: "é", count: 200) + ".png"  // 404 bytes
        let name = AttachmentName.reduced(fromPath: long)
        XCTAssertLessThanOrEqual(name.utf8.count, AttachmentLimits.maxNameBytes)
        XCTAssertTrue(name.hasSuffix("….png"), name)
        XCTAssertTrue(name.hasPrefix("éé"), name)
        // Escaping can make a name long too.
        let escaped = AttachmentName.reduced(fromPath: String(repeating: "\u{202E}", count: 100))
        XCTAssertLessThanOrEqual(escaped.utf8.count, AttachmentLimits.maxNameBytes)
    }

    func testEachProblemNamesTheFileAndWhy() {
        XCTAssertEqual(AttachmentProblem.missing(path: "nope.txt").description, "cannot attach nope.txt: no such file")
        XCTAssertEqual(AttachmentProblem.directory(path: "src").description,
                       "cannot attach src: it is a directory (attach the files in it one by one)")
        XCTAssertEqual(AttachmentProblem.unreadable(path: "secret", reason: "Permission denied").description,
                       "cannot attach secret: cannot read it (Permission denied)")
        XCTAssertEqual(AttachmentProblem.unknownType(path: "a.out", why: AttachmentType.refusal(of: [0x7F, 0x45, 0x4C, 0x46, 0]) ?? "").description,
                       "cannot attach a.out: it is neither text (it holds NUL bytes) nor a PNG, JPEG, GIF or WebP image")
        XCTAssertEqual(AttachmentProblem.tooBig(path: "big.log", size: 3 << 20, type: .text).description,
                       "cannot attach big.log: a text file may be at most 1 MiB, and it is 3 MiB")
        XCTAssertEqual(AttachmentProblem.tooBig(path: "huge.png", size: (5 << 20) + 1, type: .png).description,
                       "cannot attach huge.png: an image may be at most 5 MiB, and it is 5.0 MiB")
        XCTAssertEqual(AttachmentProblem.tooBig(path: "/dev/fd/63", size: nil, type: .text).description,
                       "cannot attach /dev/fd/63: a text file may be at most 1 MiB, and it is longer than that")
        XCTAssertEqual(AttachmentProblem.tooMany(count: 17).description, "cannot attach 17 files to one message: at most 16")
        XCTAssertEqual(AttachmentProblem.messageTooBig(total: 21 << 20).description,
                       "cannot attach these files to one message: together they pass 20 MiB (at least 21 MiB)")
    }

    func testTheLimitsOfOneMessage() {
        XCTAssertNil(AttachmentProblem.ofMessage(sizes: Array(repeating: 1, count: 16)))
        XCTAssertEqual(AttachmentProblem.ofMessage(sizes: Array(repeating: 1, count: 17)), .tooMany(count: 17))
        XCTAssertNil(AttachmentProblem.ofMessage(sizes: [5 << 20, 5 << 20, 5 << 20, 5 << 20]))
        XCTAssertEqual(AttachmentProblem.ofMessage(sizes: [5 << 20, 5 << 20, 5 << 20, 5 << 20, 1]), .messageTooBig(total: (20 << 20) + 1))
    }

    func testSizesReadAsPeopleReadThem() {
        XCTAssertEqual(ByteSize.text(0), "0 B")
        XCTAssertEqual(ByteSize.text(1023), "1023 B")
        XCTAssertEqual(ByteSize.text(1024), "1 KiB")
        XCTAssertEqual(ByteSize.text(3482), "3.4 KiB")
        XCTAssertEqual(ByteSize.text(217_088), "212 KiB")
        XCTAssertEqual(ByteSize.text(1 << 20), "1 MiB")
        XCTAssertEqual(ByteSize.text(1_572_864), "1.5 MiB")
        XCTAssertEqual(ByteSize.text((1 << 20) + 1), "1.0 MiB")
        XCTAssertEqual(ByteSize.text(20 << 20), "20 MiB")
        XCTAssertEqual(ByteSize.text(3 << 30), "3 GiB")
    }
}
