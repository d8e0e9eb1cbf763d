import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The command line at its edges: a prompt's words, `confab` alone, a mistyped command,
/// `--json` with controls in it, and the manual page.
final class CommandLineTests: XCTestCase {
    var harness: Harness!

    override func setUpWithError() throws { harness = try Harness() }
    override func tearDown() { harness?.tearDown() }

    /// The client without the harness's `--socket`: exactly `arguments`.
    func runBare(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["CONFAB_SOCKET"] = harness.socketPath
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    func userMessages(_ id: String) throws -> [String] {
        let history = try harness.client().call("conversation.history", ["conversation": .string(id), "limit": 100])
        return (history["messages"]?.array ?? []).filter { $0["role"]?.string == "user" }.compactMap { $0["content"]?.string }
    }

    func testEveryWordFromThePromptsFirstIsPromptText() throws {
        let id = try harness.createConversation(try harness.client())
        let before = try harness.client().call("conversation.get", ["conversation": .string(id)])["conversation"]?["model"]
        let questions: [[String]] = [["explain", "git", "commit", "-m", "quickly", "please"], ["is", "rm", "-rf", "safe", "here"],
                                     ["what", "does", "grep", "-c", "do"], ["why", "--new", "--", "--raw", "-C"]]
        for words in questions {
            let asked = try harness.runClient(["ask", "-c", id] + words)
            XCTAssertEqual(asked.status, 0, asked.stderr)
            XCTAssertEqual(asked.stdout, "You said: " + words.joined(separator: " ") + "\n")
        }
        // After --, even a first word with a dash.
        XCTAssertEqual(try harness.runClient(["ask", "-c", id, "--", "-x", "or", "-X?"]).stdout, "You said: -x or -X?\n")
        XCTAssertEqual(try userMessages(id), questions.map { $0.joined(separator: " ") } + ["-x or -X?"])
        // Nothing was configured by asking.
        let after = try harness.client().call("conversation.get", ["conversation": .string(id)])["conversation"]?["model"]
        XCTAssertEqual(after, before)
        // An option ask does not know where the prompt would start is a typo, not a question.
        let typo = try harness.runClient(["ask", "-c", id, "--modle", "x", "hello"])
        XCTAssertEqual(typo.status, 2, typo.stderr)
        XCTAssertTrue(typo.stderr.contains("unknown option '--modle'"), typo.stderr)
        XCTAssertEqual(try userMessages(id).count, 5)
    }

    func testConfabAloneSaysWhatToTypeFirst() throws {
        let bare = try runBare([])
        XCTAssertEqual(bare.status, 0, bare.stderr)
        let lines = bare.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertLessThanOrEqual(lines.count, 15, bare.stdout)
        XCTAssertTrue(bare.stdout.contains("confab --help"), bare.stdout)
        XCTAssertTrue(bare.stdout.contains("confab new") && bare.stdout.contains("confab attach") && bare.stdout.contains("confab ask"), bare.stdout)
    }

    func testAMistypedCommandGetsADidYouMean() throws {
        for (typed, meant) in [("atach", "attach"), ("lst", "ls"), ("serach", "search"), ("shell-int", "shell-init"), ("confgure", "configure")] {
            let run = try runBare([typed, "abcd"])
            XCTAssertEqual(run.status, 2, run.stderr)
            XCTAssertTrue(run.stderr.contains("unknown command '\(typed)'. Did you mean '\(meant)'?"), run.stderr)
            XCTAssertTrue(run.stderr.contains("confab --help"), run.stderr)
        }
        // After the global --socket too; and a word like no command gets no guess.
        let socket = try runBare(["--socket", harness.socketPath, "atach"])
        XCTAssertTrue(socket.stderr.contains("Did you mean 'attach'?"), socket.stderr)
        let far = try runBare(["xyzzy"])
        XCTAssertEqual(far.status, 2)
        XCTAssertTrue(far.stderr.contains("unknown command 'xyzzy'.") && !far.stderr.contains("Did you mean"), far.stderr)
        // Real commands, aliases and help still work.
        XCTAssertEqual(try runBare(["list", "--json"]).status, 0)
        XCTAssertEqual(try runBare(["help", "ask"]).status, 0)
    }

    func testJSONOutputEscapesEveryControl() throws {
        let hostile = "a\u{9B}31mb\u{7F}c\u{1B}[2Jd\u{85}e\u{202E}f"
        let asked = try harness.runClient(["ask", "--new", "--json", "--title", "t\u{9B}itle", "[[reply:\(hostile)]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let message = try JSON.parse(asked.stdout)
        XCTAssertEqual(message["content"]?.string, hostile)
        for (name, output) in [("ask --json", asked.stdout), ("ls --json", try harness.runClient(["ls", "--json"]).stdout)] {
            XCTAssertFalse(output.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value) || $0.value == 0x202E },
                           "\(name) wrote a control raw: \(output.debugDescription)")
            XCTAssertTrue(output.contains(#"\u009b"#), "\(name): \(output)")
        }
        XCTAssertTrue(asked.stdout.contains(#"\u007f"#) && asked.stdout.contains(#"\u001b"#) && asked.stdout.contains(#"\u0085"#), asked.stdout)
    }

    /// The manual is generated from the parser, which drops characters outside ASCII: the
    /// help texts keep to ASCII, and the page renders ranges whole.
    func testTheManualPageRendersRanges() throws {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/confab.1").path
        let source = try String(contentsOfFile: page, encoding: .utf8)
        XCTAssertTrue(source.contains("(1 to 10000; default 50)") && source.contains("(0 to 1000)"), "docs/confab.1 is out of date: make man")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/groff") else { throw unavailable("groff is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/groff")
        process.arguments = ["-man", "-mdoc", "-Tutf8", page]
        process.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let rendered = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let text = rendered.replacingOccurrences(of: "\u{8}.", with: "", options: .regularExpression)
        XCTAssertTrue(text.contains("(1 to 10000; default 50)"), text)
        XCTAssertTrue(text.contains("(0 to 1000)"), text)
        XCTAssertFalse(text.contains("110000") || text.contains("(01000)") || text.contains("(11000;"), text)
        // What the parser says is what the page says.
        for (command, phrase) in [("ls", "(1 to 10000; default 50)"), ("attach", "(0 to 1000)"), ("search", "(1 to 1000; default 20)")] {
            let help = try runBare([command, "--help"])
            XCTAssertTrue(help.stdout.contains(phrase), "\(command) --help: \(help.stdout)")
            XCTAssertTrue(help.stdout.unicodeScalars.allSatisfy(\.isASCII), "\(command) --help has characters the manual would drop")
        }
    }
}
