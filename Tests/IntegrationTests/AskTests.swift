import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `confab ask` stops its reply when the person stops it, and only then.
final class AskTests: XCTestCase {
    var harness: Harness!
    var tmux: Tmux!

    override func setUpWithError() throws {
        harness = try Harness(retries: 1)
        tmux = Tmux(directory: harness.directory)
    }

    override func tearDown() {
        tmux?.kill()
        harness?.tearDown()
    }

    private func newConversation() throws -> String {
        try harness.runClient(["new", "--title", "ask"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The conversation's last message once no reply is in flight.
    private func lastReply(_ id: String, _ observer: RPCClient) throws -> JSON {
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            let history = try observer.call("conversation.history", ["conversation": .string(id)])
            if let last = history["messages"]?.array?.last, last["role"]?.string == "assistant", last["status"]?.string != "streaming" {
                return last
            }
            let status = try observer.call("status")
            if status["streams"]?.int == 0, status["queued"]?.int == 0, let last = history["messages"]?.array?.last, last["role"]?.string == "assistant" {
                return last
            }
            _ = try? observer.collect(until: { method, _ in method == "message.completed" || method == "message.failed" }, timeout: 0.5)
        }
        throw HarnessError(description: "no finished reply in \(id)")
    }

    func testCtrlCCancelsTheReplyAndExitsWith130OnAFreshLine() throws {
        let id = try newConversation()
        let pane = try tmux.start(harness.confabCommand(["ask", "-c", id, "[[words:100]] [[delay:50]]"]))
        try tmux.waitForText(pane, "w5 ")
        try tmux.send(pane, ["C-c"])
        let screen = try tmux.waitForText(pane, "[exit 130]")
        XCTAssertTrue(screen.split(separator: "\n").contains { $0.hasPrefix("[exit 130]") }, "the prompt starts a fresh line:\n\(screen)")
        let reply = try lastReply(id, try harness.client())
        XCTAssertEqual(reply["status"]?.string, "cancelled")
        XCTAssertFalse(reply["content"]?.string?.contains("w100") ?? true)
    }

    /// `| head -c 10`: the reader leaves, nobody else is watching, the reply stops, and ask
    /// ends as a filter whose reader left (SIGPIPE).
    func testAReaderThatGoesAwayCancelsTheReply() throws {
        let id = try newConversation()
        let observer = try harness.client()
        let result = try shell("\(harness.confabCommand(["ask", "-c", id, "[[words:20000]] [[delay:5]]"])) | head -c 10")
        XCTAssertEqual(result.stdout, "w1 w2 w3 w")
        XCTAssertEqual(result.status, 141)
        let reply = try lastReply(id, observer)
        XCTAssertEqual(reply["status"]?.string, "cancelled")
    }

    func testAReaderThatGoesAwayLeavesTheReplyToThoseWatching() throws {
        let id = try newConversation()
        let watcher = try harness.client()
        try watcher.call("conversation.attach", ["conversation": .string(id), "history": 0])
        let result = try shell("\(harness.confabCommand(["ask", "-c", id, "[[words:300]] [[delay:2]]"])) | head -c 10")
        XCTAssertEqual(result.stdout, "w1 w2 w3 w")
        XCTAssertEqual(result.status, 141, "ask leaves at once, as when its terminal closes")
        let end = try watcher.collect(until: { method, params in
            method == "message.completed" && params["message"]?["role"]?.string == "assistant"
        })
        XCTAssertEqual(end.last?.params["message"]?["status"]?.string, "complete")
        XCTAssertFalse(end.contains { $0.method == "client.attached" }, "a one-shot ask is not announced as joining")
    }

    /// A terminal that closes (SIGHUP) or a lost connection: the reply outlives the asker.
    func testSIGHUPLeavesTheReplyRunning() throws {
        let id = try newConversation()
        let watcher = try harness.client()
        try watcher.call("conversation.attach", ["conversation": .string(id), "history": 0])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Binaries.path("confab"))
        process.arguments = ["--socket", harness.socketPath, "ask", "-c", id, "[[words:200]] [[delay:5]]"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        _ = try watcher.collect(until: { method, _ in method == "message.delta" })
        kill(process.processIdentifier, SIGHUP)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        let end = try watcher.collect(until: { method, params in
            method == "message.completed" && params["message"]?["role"]?.string == "assistant"
        })
        XCTAssertEqual(end.last?.params["message"]?["status"]?.string, "complete")
        XCTAssertTrue(end.last?.params["message"]?["content"]?.string?.hasSuffix("w200") ?? false)
    }

    func testRetriesAreShownWithTheirReasonAndJSONPrintsTheMessage() throws {
        let asked = try harness.runClient(["ask", "--json", "[[fail-first:1]] [[status:429]]"])
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertTrue(asked.stderr.contains("rate limiting"), asked.stderr)
        XCTAssertTrue(asked.stderr.contains("retry 1 in 1 s"), asked.stderr)
        let message = try JSON.parse(asked.stdout)
        XCTAssertEqual(message["role"]?.string, "assistant")
        XCTAssertEqual(message["status"]?.string, "complete")
    }

    func testUpstreamErrorsAreSaidInPlainWords() throws {
        let failed = try harness.runClient(["ask", "[[status:503]]"])
        XCTAssertEqual(failed.status, 1)
        XCTAssertTrue(failed.stderr.contains("the model server answered with an error (HTTP 503: fake upstream error 503)"), failed.stderr)
        let dropped = try harness.runClient(["ask", "[[drop:2]]"])
        XCTAssertEqual(dropped.status, 1)
        XCTAssertTrue(dropped.stderr.contains("the connection to the model server closed before the reply finished"), dropped.stderr)
    }

    /// The protocol's side: a quiet attach is neither announced nor listed, and a cancel
    /// naming a reply stops only that one.
    func testQuietAttachAndCancellingOneReplyOnTheWire() throws {
        let id = try newConversation()
        let watcher = try harness.client(name: "watcher")
        try watcher.call("conversation.attach", ["conversation": .string(id), "history": 0])
        let asker = try harness.client(name: "asker")
        let attached = try asker.call("conversation.attach", ["conversation": .string(id), "history": 0, "quiet": true])
        XCTAssertEqual(attached["clients"]?.array?.count, 1)
        let third = try harness.client(name: "third")
        let seen = try third.call("conversation.attach", ["conversation": .string(id), "history": 0])
        XCTAssertEqual(seen["clients"]?.array?.compactMap { $0["name"]?.string }, ["watcher"], "the quiet one is not listed")
        XCTAssertThrowsError(try asker.call("conversation.attach", ["conversation": .string(id), "quiet": "yes"]))

        let sent = try asker.call("message.send", ["conversation": .string(id), "content": "[[words:5000]] [[delay:5]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        _ = try watcher.collect(until: { method, _ in method == "message.delta" })
        XCTAssertEqual(try asker.call("generation.cancel", ["conversation": .string(id), "message": "m99"])["cancelled"], .null)
        XCTAssertThrowsError(try asker.call("generation.cancel", ["conversation": .string(id), "message": "nope"]))
        XCTAssertEqual(try asker.call("generation.cancel", ["conversation": .string(id), "message": .string(reply)])["cancelled"]?.string, reply)
        let notes = try watcher.collect(until: { method, _ in method == "message.completed" })
        XCTAssertFalse(notes.contains { $0.method == "client.attached" }, "the quiet attach was not announced")
        XCTAssertEqual(notes.first { $0.method == "generation.cancelled" }?.params["by"]?["name"]?.string, "asker")
        asker.close()
        third.close()
        let left = try watcher.collect(until: { method, _ in method == "client.detached" })
        XCTAssertEqual(left.last?.params["client"]?["name"]?.string, "third", "the quiet one left without a word")
    }

    /// `bash -o pipefail -c COMMAND`, with its output: the status is the pipeline's first failure.
    private func shell(_ command: String) throws -> (status: Int32, stdout: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-o", "pipefail", "-c", command]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
