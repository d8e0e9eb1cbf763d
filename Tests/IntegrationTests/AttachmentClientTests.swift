import ConfabProtocol
import Foundation
import XCTest

/// Files and images from the client's side: `confab ask -a`, `confab show`, `export` and
/// `confab attachment` against the real daemon.
final class AttachmentClientTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// A valid 1×1 PNG.
    static let png = Array(Data(base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")!)

    func testAskSendsATextFileAndAnImageAndEveryViewShowsThem() throws {
        let id = try harness.runClient(["new", "--title", "files"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let text = harness.directory + "/notes.txt"
        try Data("line one\nline two\n".utf8).write(to: URL(fileURLWithPath: text))
        let image = harness.directory + "/shots/pixel.png"
        try FileManager.default.createDirectory(atPath: harness.directory + "/shots", withIntermediateDirectories: true)
        try Data(Self.png).write(to: URL(fileURLWithPath: image))

        let asked = try harness.runClient(["ask", "-c", id, "-a", text, "--attach", image, "[[reply:seen both]] what are these?"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(asked.stdout, "seen both\n")

        // The record: both, in order, by their last path component.
        let messages = try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
        let attachments = (messages.first?["attachments"]?.array ?? []).compactMap(Attachment.init(json:))
        XCTAssertEqual(attachments.map(\.name), ["notes.txt", "pixel.png"])
        XCTAssertEqual(attachments.map(\.type), [.text, .png])
        XCTAssertEqual(attachments.map(\.size), [18, Self.png.count])
        XCTAssertEqual(messages.first?["content"]?.string, "[[reply:seen both]] what are these?")

        let shown = try harness.runClient(["show", id])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.contains("what are these?\n[attached: notes.txt, 18 B, text/plain]\n[attached: pixel.png, 69 B, image/png]\n"),
                      shown.stdout)

        // Export: markdown lists them, JSON holds the references.
        let markdown = try harness.runClient(["export", id]).stdout
        XCTAssertTrue(markdown.contains("- [attached: notes.txt, 18 B, text/plain, sha256 \(attachments[0].sha256.prefix(12))]"), markdown)
        let exported = try JSON.parse(try harness.runClient(["export", id, "--format", "json"]).stdout)
        let references = (exported.array?.first?["attachments"]?.array ?? []).compactMap(Attachment.init(json:))
        XCTAssertEqual(references, attachments)

        // Each file comes back byte for byte, numbered from 1 as show lists them.
        XCTAssertEqual(try clientBytes(["attachment", id, "m1", "2"]), Self.png)
        XCTAssertEqual(try clientBytes(["attachment", id, "m1", "1"]), Array("line one\nline two\n".utf8))
        let third = try harness.runClient(["attachment", id, "m1", "3"])
        XCTAssertEqual(third.status, 1)
        XCTAssertTrue(third.stderr.contains("m1 file 3:"), third.stderr)
        XCTAssertEqual(try harness.runClient(["attachment", id, "m1", "0"]).status, 2)
    }

    func testAskWithOnlyAFileSendsAnEmptyPromptAndTitlesTheConversationAfterIt() throws {
        let image = harness.directory + "/whiteboard.png"
        try Data(Self.png).write(to: URL(fileURLWithPath: image))
        let asked = try harness.runClient(["ask", "--new", "-a", image])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let list = try harness.client().call("conversation.list", [:])["conversations"]?.array ?? []
        XCTAssertEqual(list.first?["title"]?.string, "whiteboard.png")
        let id = list.first?["id"]?.string ?? ""
        let messages = try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
        XCTAssertEqual(messages.first?["content"]?.string, "")
        XCTAssertEqual(messages.first?["attachments"]?.array?.count, 1)
    }

    func testFilesThatCannotGoAreRefusedBeforeAnythingIsSent() throws {
        let id = try harness.runClient(["new", "--title", "refusals"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let directory = harness.directory
        let binary = directory + "/a.out"
        try Data([0x7F, 0x45, 0x4C, 0x46, 0x02, 0x01, 0x01, 0x00, 0x00]).write(to: URL(fileURLWithPath: binary))
        let latin1 = directory + "/latin1.txt"
        try Data([0x63, 0x61, 0x66, 0xE9, 0x0A]).write(to: URL(fileURLWithPath: latin1))
        let bigText = directory + "/big.log"
        try Data(repeating: 0x61, count: (1 << 20) + 1).write(to: URL(fileURLWithPath: bigText))
        let bigImage = directory + "/big.png"
        try Data(Self.png + [UInt8](repeating: 0, count: 5 << 20)).write(to: URL(fileURLWithPath: bigImage))
        let largeImage = directory + "/large.png"
        try Data(Self.png + [UInt8](repeating: 0, count: (9 << 20) / 2)).write(to: URL(fileURLWithPath: largeImage))
        let fine = directory + "/fine.txt"
        try Data("fine\n".utf8).write(to: URL(fileURLWithPath: fine))
        let unreadable = directory + "/secret.txt"
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: unreadable))
        chmod(unreadable, 0)

        var cases: [(paths: [String], says: String)] = [
            ([fine, binary], "cannot attach \(binary): it is neither text (it holds NUL bytes) nor a PNG, JPEG, GIF or WebP image"),
            ([latin1], "cannot attach \(latin1): it is neither UTF-8 text nor a PNG, JPEG, GIF or WebP image"),
            ([bigText], "cannot attach \(bigText): a text file may be at most 1 MiB, and it is 1.0 MiB"),
            ([bigImage], "cannot attach \(bigImage): an image may be at most 5 MiB, and it is 5.0 MiB"),
            ([directory + "/missing.txt"], "cannot attach \(directory)/missing.txt: no such file"),
            ([directory], "cannot attach \(directory): it is a directory"),
            (Array(repeating: fine, count: 17), "cannot attach 17 files to one message: at most 16"),
            (Array(repeating: largeImage, count: 5), "cannot attach these files to one message: together they pass 20 MiB (at least 22 MiB)"),
            ([fine, directory + "/missing.txt"], "cannot attach \(directory)/missing.txt: no such file"),
        ]
        // root reads every file whatever its mode.
        if getuid() != 0 { cases.append(([unreadable], "cannot attach \(unreadable): cannot read it (Permission denied)")) }
        for (paths, says) in cases {
            let asked = try harness.runClient(["ask", "-c", id] + paths.flatMap { ["-a", $0] } + ["[[reply:never]] look"])
            XCTAssertEqual(asked.status, 1, "\(paths): \(asked.stderr)")
            XCTAssertTrue(asked.stderr.contains(says), "\(paths): \(asked.stderr)")
            XCTAssertEqual(asked.stdout, "")
        }
        let messages = try harness.client().call("conversation.history", ["conversation": .string(id)])["messages"]?.array ?? []
        XCTAssertEqual(messages.count, 0, "nothing was sent")
        XCTAssertTrue(harness.upstreamRequests().isEmpty)
    }

    func testAFileOfManyChunksArrivesWhole() throws {
        let id = try harness.runClient(["new", "--title", "chunks"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // Three chunks and a bit, every byte value of an image's body.
        var image = Self.png
        for index in 0..<((3 << 20) + 12345) { image.append(UInt8(truncatingIfNeeded: index &* 31 &+ index >> 9)) }
        let path = harness.directory + "/big but fine.png"
        try Data(image).write(to: URL(fileURLWithPath: path))
        let asked = try harness.runClient(["ask", "-c", id, "-a", path, "[[reply:ok]] big"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(try clientBytes(["attachment", id, "m1", "1"]), image)
        let shown = try harness.runClient(["show", id]).stdout
        XCTAssertTrue(shown.contains("[attached: big but fine.png, 3.0 MiB, image/png]"), shown)
    }

    func testBashCompletesPathsForAttach() throws {
        guard FileManager.default.isExecutableFile(atPath: "/bin/bash") else { throw unavailable("bash is not installed") }
        let script = try harness.runClient(["completions", "bash"]).stdout
        let directory = harness.directory + "/completing"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try script.write(toFile: directory + "/../confab.bash", atomically: true, encoding: .utf8)
        for name in ["notes.txt", "notebook.png", "other.md"] { _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.arguments = ["--norc", "--noprofile", "-c", """
            source ../confab.bash
            COMP_WORDS=(confab ask -a note); COMP_CWORD=3; COMP_LINE="confab ask -a note"; COMP_POINT=${#COMP_LINE}
            _confab confab note -a
            printf '%s\\n' "${COMPREPLY[@]}" | sort
            """]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let offered = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(offered, "notebook.png\nnotes.txt\n")
    }

    /// The client's standard output as bytes (into a file, as `> file` gives it).
    private func clientBytes(_ arguments: [String]) throws -> [UInt8] {
        let outPath = harness.directory + "/client-out-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
        process.arguments = ["--socket", harness.socketPath] + arguments
        process.standardOutput = out
        let errors = Pipe()
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try out.close()
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        return Array(try Data(contentsOf: URL(fileURLWithPath: outPath)))
    }
}
